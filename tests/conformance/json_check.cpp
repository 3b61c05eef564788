// A strict JSON validator (RFC 8259): what an engine's JSON parser will accept. No values are
// built; it only says whether (and where) the text is malformed.
#include <cstring>
#include <string>

#include "conformance.h"

namespace conformance {

namespace {

class Parser {
 public:
  explicit Parser(const char* s) : s_(s), p_(s) {}

  bool document(std::string* why) {
    ws();
    if (!value(0)) return report(why);
    ws();
    if (*p_ != '\0') {
      err_ = "trailing characters after the JSON value";
      return report(why);
    }
    return true;
  }

 private:
  static constexpr int kMaxDepth = 256;

  bool report(std::string* why) {
    if (why) *why = err_ + " at byte " + std::to_string(p_ - s_);
    return false;
  }
  void ws() {
    while (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r') ++p_;
  }
  bool lit(const char* word) {
    size_t n = std::strlen(word);
    if (std::strncmp(p_, word, n) != 0) {
      err_ = std::string("expected '") + word + "'";
      return false;
    }
    p_ += n;
    return true;
  }
  bool value(int depth) {
    if (depth > kMaxDepth) {
      err_ = "nesting deeper than 256";
      return false;
    }
    switch (*p_) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': return string();
      case 't': return lit("true");
      case 'f': return lit("false");
      case 'n': return lit("null");
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return number();
        err_ = *p_ == '\0' ? "unexpected end of text" : std::string("unexpected character '") + *p_ + "'";
        return false;
    }
  }
  bool object(int depth) {
    ++p_;  // {
    ws();
    if (*p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      ws();
      if (*p_ != '"') {
        err_ = "expected a member name (a string)";
        return false;
      }
      if (!string()) return false;
      ws();
      if (*p_ != ':') {
        err_ = "expected ':' after a member name";
        return false;
      }
      ++p_;
      ws();
      if (!value(depth)) return false;
      ws();
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      err_ = "expected ',' or '}' in an object";
      return false;
    }
  }
  bool array(int depth) {
    ++p_;  // [
    ws();
    if (*p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      ws();
      if (!value(depth)) return false;
      ws();
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      err_ = "expected ',' or ']' in an array";
      return false;
    }
  }
  static bool hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
  bool string() {
    ++p_;  // "
    for (;;) {
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '\0') {
        err_ = "unterminated string";
        return false;
      }
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) {
        err_ = "unescaped control character in a string";
        return false;
      }
      if (c == '\\') {
        ++p_;
        switch (*p_) {
          case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't': ++p_; break;
          case 'u':
            for (int i = 1; i <= 4; ++i)
              if (!hex(p_[i])) {
                err_ = "bad \\u escape";
                return false;
              }
            p_ += 5;
            break;
          default:
            err_ = "bad escape in a string";
            return false;
        }
        continue;
      }
      if (c < 0x80) {
        ++p_;
        continue;
      }
      // UTF-8: a lead byte and its continuation bytes (no overlongs, no surrogates).
      int n = (c >= 0xc2 && c <= 0xdf) ? 1 : (c >= 0xe0 && c <= 0xef) ? 2 : (c >= 0xf0 && c <= 0xf4) ? 3 : -1;
      if (n < 0) {
        err_ = "invalid UTF-8 in a string";
        return false;
      }
      unsigned char c1 = static_cast<unsigned char>(p_[1]);
      if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 > 0x8f)) {
        err_ = "invalid UTF-8 in a string";
        return false;
      }
      for (int i = 1; i <= n; ++i)
        if ((static_cast<unsigned char>(p_[i]) & 0xc0) != 0x80) {
          err_ = "invalid UTF-8 in a string";
          return false;
        }
      p_ += n + 1;
    }
  }
  static bool digit(char c) { return c >= '0' && c <= '9'; }
  bool number() {
    if (*p_ == '-') ++p_;
    if (*p_ == '0') {
      ++p_;
    } else if (digit(*p_)) {
      while (digit(*p_)) ++p_;
    } else {
      err_ = "bad number";
      return false;
    }
    if (*p_ == '.') {
      ++p_;
      if (!digit(*p_)) {
        err_ = "bad number: no digit after '.'";
        return false;
      }
      while (digit(*p_)) ++p_;
    }
    if (*p_ == 'e' || *p_ == 'E') {
      ++p_;
      if (*p_ == '+' || *p_ == '-') ++p_;
      if (!digit(*p_)) {
        err_ = "bad number: no digit in the exponent";
        return false;
      }
      while (digit(*p_)) ++p_;
    }
    return true;
  }

  const char* s_;
  const char* p_;
  std::string err_;
};

}  // namespace

bool json_valid(const char* text, std::string* why) {
  if (text == nullptr) {
    if (why) *why = "NULL text";
    return false;
  }
  return Parser(text).document(why);
}

}  // namespace conformance
