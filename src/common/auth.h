// The group secret's cryptography: HMAC-SHA-256 over length-prefixed fields, random nonces, and
// constant-time comparison (HMAC from the system's libcrypto, loaded at run time). Every proof wsync exchanges is
// HMAC(secret, label, fields...) with a distinct label per use, so a proof made for one purpose
// (a store login, a control HELLO) never verifies for another.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wsync {

constexpr size_t kMacBytes = 32;
constexpr size_t kNonceBytes = 32;
using Mac = std::array<uint8_t, kMacBytes>;

// Incremental HMAC-SHA-256 keyed with the group secret. Every field is fed as a u64
// (little-endian) length followed by its bytes, so field boundaries are part of the MAC.
class Hmac {
 public:
  explicit Hmac(const std::string& key);
  ~Hmac();
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;
  Hmac& field(const void* data, size_t len);
  Hmac& field(const std::string& s) { return field(s.data(), s.size()); }
  Hmac& field(const std::vector<uint8_t>& v) { return field(v.data(), v.size()); }
  Hmac& field_u64(uint64_t v);
  Mac finish();

 private:
  void raw(const void* data, size_t len);
  void* ctx_ = nullptr;
  bool ok_ = true;
};

// n bytes from the operating system's CSPRNG (getrandom, else /dev/urandom). Aborts
// never; on the (practically impossible) failure both sources fail it throws std::runtime_error.
std::vector<uint8_t> random_bytes(size_t n);
uint64_t random_u64();

// Constant-time equality of two byte strings of the same length.
bool equal_ct(const uint8_t* a, const uint8_t* b, size_t n);

std::string to_hex(const uint8_t* p, size_t n);

}  // namespace wsync
