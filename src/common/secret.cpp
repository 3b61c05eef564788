// The group secret's sources and atomic file writes (see common/secret.h).
#include "common/secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/auth.h"
#include "common/error.h"

namespace wsync {
namespace {

wsync_status_t check_secret(const std::string& s, const std::string& origin) {
  if (s.size() < kMinSecretBytes || s.size() > kMaxSecretBytes)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group secret from %s is %zu bytes; it must be %zu..%zu bytes (a short "
                "secret can be guessed)", origin.c_str(), s.size(), kMinSecretBytes, kMaxSecretBytes);
  if (s.find('\0') != std::string::npos || s.find('\n') != std::string::npos || s.find('\r') != std::string::npos)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group secret from %s contains a NUL or a line break", origin.c_str());
  return WSYNC_OK;
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// A secret file must be like an ssh key: a regular file of this process's effective user that
// nobody else may read or write. `fd` is the opened file, so what is checked is what is read.
wsync_status_t check_secret_file(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return fail(WSYNC_ERR_IO, "cannot inspect the group secret file '%s': %s", path.c_str(), std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group secret file '%s' is not a regular file (mode %s); give the path "
                "of a file holding the secret", path.c_str(), mode_text(st.st_mode).c_str());
  if (st.st_uid != ::geteuid())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group secret file '%s' belongs to uid %u, not to this process's user "
                "(uid %u): another user could have chosen or read the secret; remove it and let the sender write a "
                "new one, or create your own (chmod 600)", path.c_str(), static_cast<unsigned>(st.st_uid),
                static_cast<unsigned>(::geteuid()));
  if ((st.st_mode & 077) != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group secret file '%s' has mode %s: other users may read or change "
                "it; run \"chmod 600 %s\" (and change the secret if someone else may have seen it)", path.c_str(),
                mode_text(st.st_mode).c_str(), path.c_str());
  return WSYNC_OK;
}

// *exists = false (and OK) when the file is not there. A symbolic link, another user's file or
// one that others may read is refused (check_secret_file).
wsync_status_t read_secret_file(const std::string& path, std::string* out, bool* exists) {
  *exists = false;
  // O_NONBLOCK: a FIFO put there must not hang the caller (it is refused as not regular).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return WSYNC_OK;
    if (errno == ELOOP)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group secret file '%s' is a symbolic link; give the path of the "
                  "file itself (a link can be pointed elsewhere by whoever owns it)", path.c_str());
    return fail(WSYNC_ERR_IO, "cannot read the group secret file '%s': %s", path.c_str(), std::strerror(errno));
  }
  wsync_status_t st = check_secret_file(fd, path);
  if (st != WSYNC_OK) {
    ::close(fd);
    return st;
  }
  std::string s;
  char buf[1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return fail(WSYNC_ERR_IO, "cannot read the group secret file '%s': %s", path.c_str(), std::strerror(e));
    }
    if (n == 0) break;
    s.append(buf, static_cast<size_t>(n));
    if (s.size() > kMaxSecretBytes + 2) break;
  }
  ::close(fd);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  *exists = true;
  *out = s;
  return WSYNC_OK;
}

// A new file beside `path` with a name nobody can predict, created exclusively (mkostemp: O_EXCL,
// so a file or link planted in advance is never opened) and set to `mode`. errno on failure.
int open_temp_beside(const std::string& path, unsigned mode, std::string* tmp) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  std::string name = dir + ".wsync-tmp-XXXXXX";
  int fd = ::mkostemp(&name[0], O_CLOEXEC);
  if (fd < 0) return -1;
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(name.c_str());
    errno = e;
    return -1;
  }
  *tmp = name;
  return fd;
}

// Writes everything, flushes it to disk and closes fd; 0 or the errno.
int write_sync_close(int fd, const std::string& content) {
  int err = 0;
  size_t off = 0;
  while (off < content.size() && err == 0) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) err = n < 0 ? errno : EIO;
    else off += static_cast<size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Gives `tmp` the name `path` unless `path` exists (then EEXIST): link() never replaces, and
// renameat2(RENAME_NOREPLACE) does the same where the file system has no hard links. 0 or errno.
int publish_without_replacing(const std::string& tmp, const std::string& path) {
  if (::link(tmp.c_str(), path.c_str()) == 0) {
    ::unlink(tmp.c_str());
    return 0;
  }
  if (errno != EPERM && errno != EOPNOTSUPP && errno != ENOSYS) return errno;
#ifdef SYS_renameat2
  if (::syscall(SYS_renameat2, AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), 1u /* RENAME_NOREPLACE */) == 0)
    return 0;
  return errno;
#else
  return EOPNOTSUPP;
#endif
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

wsync_status_t write_file_atomic(const std::string& path, const std::string& content, unsigned mode, const char* what) {
  std::string tmp;
  int fd = open_temp_beside(path, mode, &tmp);
  if (fd < 0) return fail(WSYNC_ERR_IO, "cannot write %s '%s': %s", what, path.c_str(), std::strerror(errno));
  int err = write_sync_close(fd, content);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return fail(WSYNC_ERR_IO, "cannot write %s '%s': %s (the file was left as it was)", what, path.c_str(),
                std::strerror(err));
  }
  return WSYNC_OK;
}

wsync_status_t write_secret_file(const std::string& path, const std::string& content, bool* existed) {
  *existed = false;
  std::string tmp;
  int fd = open_temp_beside(path, 0600, &tmp);
  if (fd < 0)
    return fail(WSYNC_ERR_IO, "cannot write the group secret file '%s': %s", path.c_str(), std::strerror(errno));
  int err = write_sync_close(fd, content);
  if (err == 0) err = publish_without_replacing(tmp, path);
  if (err != 0) ::unlink(tmp.c_str());
  if (err == EEXIST) {
    *existed = true;
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group secret file '%s' appeared while this process wrote it; it was "
                "left as it was", path.c_str());
  }
  if (err != 0)
    return fail(WSYNC_ERR_IO, "cannot write the group secret file '%s': %s (nothing was written there)", path.c_str(),
                std::strerror(err));
  return WSYNC_OK;
}

wsync_status_t find_group_secret(const std::string& opt_secret, const std::string& opt_file, bool generate,
                                 GroupSecret* out) {
  out->file = !opt_file.empty() ? opt_file : env("WSYNC_GROUP_SECRET_FILE");
  const char* file_origin = !opt_file.empty() ? "option secret_file" : "WSYNC_GROUP_SECRET_FILE";
  if (!opt_secret.empty()) {
    out->value = opt_secret;
    out->origin = "option secret";
    return check_secret(out->value, out->origin);
  }
  bool exists = false;
  if (!opt_file.empty()) {
    wsync_status_t st = read_secret_file(opt_file, &out->value, &exists);
    if (st != WSYNC_OK) return st;
    if (exists) {
      out->origin = "file " + opt_file;
      return check_secret(out->value, out->origin);
    }
  }
  if (opt_file.empty() && !env("WSYNC_GROUP_SECRET").empty()) {
    out->value = env("WSYNC_GROUP_SECRET");
    out->origin = "WSYNC_GROUP_SECRET";
    return check_secret(out->value, out->origin);
  }
  if (opt_file.empty() && !out->file.empty()) {
    wsync_status_t st = read_secret_file(out->file, &out->value, &exists);
    if (st != WSYNC_OK) return st;
    if (exists) {
      out->origin = "file " + out->file;
      return check_secret(out->value, out->origin);
    }
  }
  if (!generate) {
    if (!out->file.empty())
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group secret file '%s' (%s) does not exist; the sender writes it "
                  "when it starts", out->file.c_str(), file_origin);
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "no group secret: give this receiver the sender's secret (option secret or "
                "secret_file, or the environment variable WSYNC_GROUP_SECRET or WSYNC_GROUP_SECRET_FILE)");
  }
  const std::vector<uint8_t> r = random_bytes(32);
  out->value = to_hex(r.data(), r.size());
  out->origin = "generated";
  if (out->file.empty()) return WSYNC_OK;
  out->origin = "generated, written to " + out->file;
  wsync_status_t st = write_secret_file(out->file, out->value + "\n", &exists);
  if (st == WSYNC_OK || !exists) return st;
  // Another process created it in the meantime: adopt it only under the same rules as above.
  if ((st = read_secret_file(out->file, &out->value, &exists)) != WSYNC_OK) return st;
  if (!exists)
    return fail(WSYNC_ERR_IO, "the group secret file '%s' appeared and vanished while this process wrote it",
                out->file.c_str());
  out->origin = "file " + out->file;
  return check_secret(out->value, out->origin);
}

}  // namespace wsync
