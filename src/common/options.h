// Parsing and validation of the string key/value options of the public ABI. Every refusal names
// the key and says what would be accepted.
#pragma once

#include <cstring>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "wsync.h"

namespace wsync {

using OptionList = std::vector<std::pair<std::string, std::string>>;

// Copy a caller's option array (stepping by the first element's struct_size). NULL keys or
// values, or a struct_size too small to hold key and value, are refused.
wsync_status_t copy_options(const wsync_option_t* options, uint64_t count, OptionList* out);

// Parse an unsigned integer option value in [min, max]; accepts a K/M/G/KiB/MiB/GiB suffix.
// The whole value counts: one with a NUL byte inside (from the wire, never from a C string) is
// refused, not read up to the NUL.
wsync_status_t parse_u64_option(const std::string& key, const std::string& value, uint64_t min,
                                uint64_t max, uint64_t* out);
// 1/0, true/false, yes/no, on/off in any case; likewise refuses a value with a NUL byte.
wsync_status_t parse_bool_option(const std::string& key, const std::string& value, bool* out);

// Views of `l` as a C option array for a plugin; valid while `l` lives and is not changed.
std::vector<wsync_option_t> to_c_options(const OptionList& l);

// Options whose key starts with `prefix` ("transport."), with the prefix removed.
OptionList options_with_prefix(const OptionList& all, const std::string& prefix);

// Read min(struct_size, sizeof(T)) bytes of a caller's struct into a default-initialised T.
template <typename T>
wsync_status_t read_struct(const T* in, const char* what, T* out, T defaults);

// A struct the library fills for the caller: its struct_size (`size`) must be a sequence of 8-byte
// words, like every public struct's; else WSYNC_ERR_INVALID_ARGUMENT naming `what` ("event") and
// its `init` macro.
wsync_status_t check_out_struct(uint32_t size, const char* what, const char* init);
// Fill the caller's struct with `value`, as much of it as its struct_size (`size`) holds: a caller
// built against an older, shorter struct gets the fields it knows of.
template <typename T>
void write_struct(T value, uint32_t size, T* out) {
  value.struct_size = size < sizeof value ? size : static_cast<uint32_t>(sizeof value);
  std::memcpy(static_cast<void*>(out), &value, value.struct_size);
}

}  // namespace wsync

#include <cstring>

#include "common/error.h"

template <typename T>
wsync_status_t wsync::read_struct(const T* in, const char* what, T* out, T defaults) {
  *out = defaults;
  if (in == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s is NULL", what);
  uint32_t size = in->struct_size;
  // Every public struct is a sequence of 8-byte words (4-byte fields come in pairs), so a size
  // from any header version is a multiple of 8; anything else would cut a field in half.
  if (size < sizeof(uint32_t) * 2 || size % 8 != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT,
                "%s->struct_size is %u; initialise the struct with its *_INIT macro", what, size);
  std::memcpy(static_cast<void*>(out), in, size < sizeof(T) ? size : sizeof(T));
  out->struct_size = sizeof(T);
  return WSYNC_OK;
}
