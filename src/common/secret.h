// Where a process finds its group secret, and files written whole or not at all.
//
// The secret comes from, first match wins: the option "secret", the option "secret_file" (a file
// holding it), the environment variable WSYNC_GROUP_SECRET, the environment variable
// WSYNC_GROUP_SECRET_FILE. A sender that finds none generates one (32 random bytes as 64 hex
// characters) and, when "secret_file" names a file that does not exist yet, writes it there
// (mode 0600) for its receivers. A secret is 16..4096 bytes without NUL or newline (a file's one
// trailing newline is dropped).
//
// A secret file is treated like an ssh key, on the sender and the receivers alike: it is opened
// without following a symbolic link and checked on the opened descriptor (no window between check
// and read): it must be a regular file owned by this process's effective user with no permission
// for group or others, or it is refused (INVALID_ARGUMENT naming the file, its owner or mode and
// the fix). The generated file is written to a temporary of unpredictable name created with
// O_EXCL beside it, then linked to its name without ever replacing a file that is there; one that
// appeared meanwhile is adopted only under the same rules.
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

// Write `content` to `path` as a whole: a temporary file beside it (of unpredictable name,
// created exclusively, so nothing planted there is written through), written, flushed to disk and
// renamed over `path`. On any failure (a full disk included) `path` is untouched, the temporary is
// removed and the error names the path and the system's reason. `mode` applies to the new file.
wsync_status_t write_file_atomic(const std::string& path, const std::string& content, unsigned mode, const char* what);

// Create `path` holding `content`, mode 0600, as a whole, never replacing what is there: when
// `path` exists (before or by a race) it is left untouched, *existed is set and the status is
// INVALID_ARGUMENT. IO for any other failure, the path unchanged.
wsync_status_t write_secret_file(const std::string& path, const std::string& content, bool* existed);

}  // namespace wsync
