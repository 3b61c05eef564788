// HMAC-SHA-256, nonces and constant-time comparison for the group secret (see common/auth.h).
// HMAC comes from the system's libcrypto, loaded at run time (OpenSSL 3's libcrypto.so.3, or
// 1.1's libcrypto.so.1.1 as RHEL 8 has): the HMAC_CTX calls both export. Nothing of OpenSSL is
// linked, so the portable wheel carries no copy of it (docs/PYTHON.md).
#include "common/auth.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <stdexcept>

#include "common/system_library.h"

namespace wsync {
namespace {

// The calls of libcrypto's HMAC_CTX interface, declared here (OpenSSL's own types are opaque).
struct Libcrypto {
  void* (*ctx_new)() = nullptr;
  void (*ctx_free)(void*) = nullptr;
  int (*init_ex)(void*, const void*, int, const void*, void*) = nullptr;
  int (*update)(void*, const unsigned char*, size_t) = nullptr;
  int (*final_)(void*, unsigned char*, unsigned int*) = nullptr;
  const void* (*sha256)() = nullptr;
  std::string error;  // why it is not there; empty when every call above is
};

Libcrypto load_libcrypto() {
  Libcrypto c;
  const SystemLibrary lib = open_system_library("WSYNC_LIBCRYPTO", {"libcrypto.so.3", "libcrypto.so.1.1"});
  if (lib.handle == nullptr) {
    c.error = "HMAC-SHA-256 needs the system's libcrypto (OpenSSL 3 or 1.1), which could not be loaded (" +
              lib.why_not + "; Debian/Ubuntu: apt-get install libssl3; RHEL/Rocky: dnf install openssl-libs)";
    return c;
  }
  if (!resolve_symbol(lib, "HMAC_CTX_new", &c.ctx_new) || !resolve_symbol(lib, "HMAC_CTX_free", &c.ctx_free) ||
      !resolve_symbol(lib, "HMAC_Init_ex", &c.init_ex) || !resolve_symbol(lib, "HMAC_Update", &c.update) ||
      !resolve_symbol(lib, "HMAC_Final", &c.final_) || !resolve_symbol(lib, "EVP_sha256", &c.sha256)) {
    c = Libcrypto{};
    c.error = "the system's libcrypto (" + lib.path + ") has no HMAC_CTX interface (OpenSSL older than 1.1?)";
  }
  return c;
}

const Libcrypto& libcrypto() {
  static std::once_flag once;
  static Libcrypto lib;
  std::call_once(once, [] { lib = load_libcrypto(); });
  return lib;
}

}  // namespace

Hmac::Hmac(const std::string& key) {
  const Libcrypto& c = libcrypto();
  if (!c.error.empty()) throw std::runtime_error(c.error);
  static const unsigned char kEmpty = 0;
  const unsigned char* k = key.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(key.data());
  void* ctx = c.ctx_new();
  if (ctx == nullptr || key.size() > (1u << 30) ||
      c.init_ex(ctx, k, key.empty() ? 1 : static_cast<int>(key.size()), c.sha256(), nullptr) != 1) {
    if (ctx != nullptr) c.ctx_free(ctx);
    throw std::runtime_error("HMAC-SHA-256 is not available from libcrypto");
  }
  ctx_ = ctx;
}

Hmac::~Hmac() { libcrypto().ctx_free(ctx_); }

void Hmac::raw(const void* data, size_t len) {
  if (len && libcrypto().update(ctx_, static_cast<const unsigned char*>(data), len) != 1)
    ok_ = false;
}

Hmac& Hmac::field_u64(uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  raw(b, 8);
  return *this;
}

Hmac& Hmac::field(const void* data, size_t len) {
  field_u64(len);
  raw(data, len);
  return *this;
}

Mac Hmac::finish() {
  Mac out{};
  unsigned int n = 0;
  if (!ok_ || libcrypto().final_(ctx_, out.data(), &n) != 1 || n != out.size())
    throw std::runtime_error("HMAC-SHA-256 failed in libcrypto");
  return out;
}

std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(v.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  if (got < n) {  // getrandom() refused (a kernel before 3.17, a seccomp filter): the device
    int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < n) {
      ssize_t r = ::read(fd, v.data() + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    if (fd >= 0) ::close(fd);
  }
  if (got < n) throw std::runtime_error("no random bytes from getrandom() or /dev/urandom");
  return v;
}

uint64_t random_u64() {
  const std::vector<uint8_t> b = random_bytes(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
  return v;
}

bool equal_ct(const uint8_t* a, const uint8_t* b, size_t n) {
  volatile uint8_t diff = 0;  // every byte is looked at, whatever differs first
  for (size_t i = 0; i < n; ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

}  // namespace wsync
