// Tensor names as every side checks them: the sender before it plans, the manifest decoder on
// the wire, and the receiver at register. A name is 1..kMaxTensorNameBytes bytes of valid UTF-8
// (shortest forms, no surrogates, at most U+10FFFF) with no NUL and no control character (C0,
// DEL, C1), so two different byte strings can never print, compare or hash as the same name
// in an engine.
#pragma once

#include <cstddef>
#include <string>

namespace wsync {

constexpr size_t kMaxTensorNameBytes = 1024;

// "" when `name[0..len)` is a valid tensor name, else why not ("byte 3 is a NUL", "byte 7 starts
// an invalid UTF-8 sequence", ...), for the caller's message.
std::string tensor_name_problem(const char* name, size_t len);

// The name made printable for a message: control characters and invalid bytes as \xNN, cut
// after 64 bytes.
std::string printable_name(const char* name, size_t len);

// Text a peer sent (a NACK's or REJECT's reason, an engine's error), safe to put in a log line or
// an error message: control characters (ANSI escapes, line breaks) and invalid UTF-8 bytes as
// \xNN, cut after max_bytes ("..." then). Every text from a peer passes here before it is shown.
std::string printable_text(const char* text, size_t len, size_t max_bytes);
std::string printable_text(const std::string& text);

}  // namespace wsync
