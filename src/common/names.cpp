// Tensor name validation (see common/names.h).
#include "common/names.h"

#include <cstdint>
#include <cstdio>

namespace wsync {
namespace {

// Length of the UTF-8 sequence starting at p[i] (1..4), or 0 when it is not a valid, shortest
// encoding of a scalar value (RFC 3629, table 3-7 of the Unicode standard). *cp gets its value.
size_t utf8_seq(const unsigned char* p, size_t n, size_t i, uint32_t* cp) {
  const unsigned char b = p[i];
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;  // no overlong forms
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  if (p[i + 1] < lo || p[i + 1] > hi) return 0;
  uint32_t v = b & (0xFF >> (len + 1));
  v = (v << 6) | (p[i + 1] & 0x3F);
  for (size_t k = 2; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (p[i + k] & 0x3F);
  }
  *cp = v;
  return len;
}

bool is_control(uint32_t cp) { return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F); }

}  // namespace

std::string tensor_name_problem(const char* name, size_t len) {
  if (name == nullptr || len == 0) return "the name is empty";
  if (len > kMaxTensorNameBytes)
    return "the name is " + std::to_string(len) + " bytes, more than " + std::to_string(kMaxTensorNameBytes);
  const unsigned char* p = reinterpret_cast<const unsigned char*>(name);
  for (size_t i = 0; i < len;) {
    uint32_t cp = 0;
    const size_t k = utf8_seq(p, len, i, &cp);
    if (k == 0) return "byte " + std::to_string(i) + " starts an invalid UTF-8 sequence";
    if (cp == 0) return "byte " + std::to_string(i) + " is a NUL";
    if (is_control(cp)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
      return "byte " + std::to_string(i) + " is the control character " + buf;
    }
    i += k;
  }
  return "";
}

std::string printable_text(const char* text, size_t len, size_t max_bytes) {
  std::string s;
  if (text == nullptr) return s;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(text);
  const size_t n = len < max_bytes ? len : max_bytes;
  for (size_t i = 0; i < n;) {
    uint32_t cp = 0;
    const size_t k = utf8_seq(p, len, i, &cp);
    if (k == 0 || is_control(cp)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", p[i]);
      s += buf;
      ++i;
    } else {
      s.append(text + i, k);
      i += k;
    }
  }
  if (len > n) s += "...";
  return s;
}

std::string printable_text(const std::string& text) { return printable_text(text.data(), text.size(), text.size()); }

std::string printable_name(const char* name, size_t len) { return printable_text(name, len, 64); }

}  // namespace wsync
