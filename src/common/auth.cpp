// HMAC-SHA-256, nonces and constant-time comparison for the group secret (see common/auth.h).
#include "common/auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <sys/random.h>

#include <cerrno>
#include <stdexcept>

namespace wsync {

Hmac::Hmac(const std::string& key) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = mac ? EVP_MAC_CTX_new(mac) : nullptr;
  EVP_MAC_free(mac);  // the context keeps its own reference
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
  static const unsigned char kEmpty = 0;
  const unsigned char* k = key.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(key.data());
  if (ctx == nullptr || EVP_MAC_init(ctx, k, key.empty() ? 1 : key.size(), params) != 1) {
    EVP_MAC_CTX_free(ctx);
    throw std::runtime_error("HMAC-SHA-256 is not available from libcrypto");
  }
  ctx_ = ctx;
}

Hmac::~Hmac() { EVP_MAC_CTX_free(static_cast<EVP_MAC_CTX*>(ctx_)); }

void Hmac::raw(const void* data, size_t len) {
  if (len && EVP_MAC_update(static_cast<EVP_MAC_CTX*>(ctx_), static_cast<const unsigned char*>(data), len) != 1)
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
  size_t n = 0;
  if (!ok_ || EVP_MAC_final(static_cast<EVP_MAC_CTX*>(ctx_), out.data(), &n, out.size()) != 1 || n != out.size())
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
  if (got < n && RAND_bytes(v.data(), static_cast<int>(n)) != 1)
    throw std::runtime_error("no random bytes from getrandom() or libcrypto");
  return v;
}

uint64_t random_u64() {
  const std::vector<uint8_t> b = random_bytes(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
  return v;
}

bool equal_ct(const uint8_t* a, const uint8_t* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

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
