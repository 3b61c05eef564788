// Where a process finds its group secret, and files written whole or not at all.
//
// The secret comes from, first match wins: the option "secret", the option "secret_file" (a file
// holding it), the environment variable WSYNC_GROUP_SECRET, the environment variable
// WSYNC_GROUP_SECRET_FILE. A sender that finds none generates one (32 random bytes as 64 hex
// characters) and, when "secret_file" names a file that does not exist yet, writes it there
// (mode 0600) for its receivers. A secret is 16..4096 bytes without NUL or newline (a file's one
// trailing newline is dropped).
#pragma once

#include <string>

#include "common/options.h"
#include "wsync.h"

namespace wsync {

constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMaxSecretBytes = 4096;

struct GroupSecret {
  std::string value;
  std::string origin;  // for logs: "option secret", "file /run/x", "WSYNC_GROUP_SECRET", "generated"
  std::string file;    // the secret_file option or variable, "" when none
};

// Find the secret in the options `secret` / `secret_file` (already parsed out of the caller's
// options) and the environment. `generate`: the sender's rule above. Errors: INVALID_ARGUMENT (a
// secret of the wrong size or with a NUL/newline, naming where it came from; a receiver without
// any secret), IO (a secret file that cannot be read or written).
wsync_status_t find_group_secret(const std::string& opt_secret, const std::string& opt_file, bool generate,
                                 GroupSecret* out);

// Write `content` to `path` as a whole: a temporary file beside it, written, flushed to disk and
// renamed over `path`. On any failure (a full disk included) `path` is untouched, the temporary is
// removed and the error names the path and the system's reason. `mode` applies to the new file.
wsync_status_t write_file_atomic(const std::string& path, const std::string& content, unsigned mode, const char* what);

}  // namespace wsync
