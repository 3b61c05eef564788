// The one byte codec of the core: control frames, native manifests and the store's wire all write
// with ByteWriter and read with ByteReader. Integers are little-endian (torch's store sends them in
// native order; every platform wsync builds for is little-endian, checked below). Lengths come in
// two widths: u32 before strings and blobs of control frames, u64 before the store's.
//
// ByteReader treats its input as hostile: every read is bounds-checked and either succeeds, finds
// the input too short (state kShort, need() says how many bytes in total would let it go on: the
// store's incremental parser waits for them), or finds a bound broken (state kBad, error() names it).
// After the first failure every read fails, so a decoder may read a run of fields and check once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "wsync's wire formats (and torch's TCPStore, in native order) assume a little-endian host");

namespace wsync {

class ByteWriter {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v) { put(&v, 2); }
  void u32(uint32_t v) { put(&v, 4); }
  void i32(int32_t v) { put(&v, 4); }
  void u64(uint64_t v) { put(&v, 8); }
  void i64(int64_t v) { put(&v, 8); }
  void raw(const void* p, size_t n) { put(p, n); }
  // u32 length + bytes (control frames).
  void str32(const std::string& s) { blob32(s.data(), s.size()); }
  void blob32(const void* p, size_t n) {
    u32(static_cast<uint32_t>(n));
    put(p, n);
  }
  void blob32(const std::vector<uint8_t>& b) { blob32(b.data(), b.size()); }
  // u64 length + bytes (the store's wire).
  void blob64(const void* p, size_t n) {
    u64(static_cast<uint64_t>(n));
    put(p, n);
  }
  void str64(const std::string& s) { blob64(s.data(), s.size()); }
  void patch_u32(size_t at, uint32_t v) { std::memcpy(buf_.data() + at, &v, 4); }
  void reserve(size_t n) { buf_.reserve(n); }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& data() { return buf_; }

 private:
  void put(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = buf_.size();
    buf_.resize(at + n);
    std::memcpy(buf_.data() + at, p, n);
  }
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  enum State { kOk, kShort, kBad };

  ByteReader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  explicit ByteReader(const std::vector<uint8_t>& b) : p_(b.data()), n_(b.size()) {}

  bool u8(uint8_t* v) { return pod(v); }
  bool u16(uint16_t* v) { return pod(v); }
  bool u32(uint32_t* v) { return pod(v); }
  bool i32(int32_t* v) { return pod(v); }
  bool u64(uint64_t* v) { return pod(v); }
  bool i64(int64_t* v) { return pod(v); }
  // n bytes as a string (no length prefix).
  bool raw(size_t n, std::string* out) {
    if (!take(n)) return false;
    out->assign(reinterpret_cast<const char*>(p_ + pos_ - n), n);
    return true;
  }
  // u32 length (at most max, else kBad naming `what`) + bytes.
  bool str32(std::string* out, uint32_t max, const char* what = "string") {
    uint32_t len = 0;
    return u32(&len) && bounded(len, max, what) && raw(len, out);
  }
  bool blob32(std::vector<uint8_t>* out, uint32_t max, const char* what = "blob") {
    uint32_t len = 0;
    if (!u32(&len) || !bounded(len, max, what) || !take(len)) return false;
    out->assign(p_ + pos_ - len, p_ + pos_);
    return true;
  }
  // u64 length + bytes.
  bool str64(std::string* out, uint64_t max, const char* what = "string") {
    uint64_t len = 0;
    return u64(&len) && bounded(len, max, what) && raw(static_cast<size_t>(len), out);
  }
  bool blob64(std::vector<uint8_t>* out, uint64_t max, const char* what = "blob") {
    uint64_t len = 0;
    if (!u64(&len) || !bounded(len, max, what) || !take(static_cast<size_t>(len))) return false;
    out->assign(p_ + pos_ - len, p_ + pos_);
    return true;
  }
  // A u64 count of at most max.
  bool count64(uint64_t* out, uint64_t max, const char* what) { return u64(out) && bounded(*out, max, what); }

  State state() const { return state_; }
  bool ok() const { return state_ == kOk; }
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }
  bool at_end() const { return pos_ == n_; }
  size_t need() const { return need_; }  // kShort: total input bytes that would let it go on
  const std::string& error() const { return error_; }  // kBad: which bound was broken

 private:
  template <typename T>
  bool pod(T* v) {
    if (!take(sizeof(T))) return false;
    std::memcpy(v, p_ + pos_ - sizeof(T), sizeof(T));
    return true;
  }
  bool take(size_t k) {
    if (state_ != kOk) return false;
    if (n_ - pos_ < k) {
      state_ = kShort;
      need_ = pos_ + k;
      return false;
    }
    pos_ += k;
    return true;
  }
  bool bounded(uint64_t len, uint64_t max, const char* what) {
    if (len <= max) return true;
    state_ = kBad;
    error_ = std::string(what) + " length " + std::to_string(len) + " exceeds the limit of " + std::to_string(max);
    return false;
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  size_t need_ = 0;
  State state_ = kOk;
  std::string error_;
};

}  // namespace wsync
