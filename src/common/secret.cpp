// The group secret's sources and atomic file writes (see common/secret.h).
#include "common/secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

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

// *exists = false (and OK) when the file is not there.
wsync_status_t read_secret_file(const std::string& path, std::string* out, bool* exists) {
  *exists = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return WSYNC_OK;
    return fail(WSYNC_ERR_IO, "cannot read the group secret file '%s': %s", path.c_str(), std::strerror(errno));
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

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

wsync_status_t write_file_atomic(const std::string& path, const std::string& content, unsigned mode, const char* what) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return fail(WSYNC_ERR_IO, "cannot write %s '%s': %s", what, path.c_str(), std::strerror(errno));
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
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return fail(WSYNC_ERR_IO, "cannot write %s '%s': %s (the file was left as it was)", what, path.c_str(),
                std::strerror(err));
  }
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
  return write_file_atomic(out->file, out->value + "\n", 0600, "the group secret file");
}

}  // namespace wsync
