#include "store/store_wire.h"

#include <cinttypes>
#include <cstdio>

namespace wsync {
namespace store_wire {

const char* query_name(uint8_t q) {
  static const char* names[] = {"VALIDATE",   "SET",        "COMPARE_SET", "GET",       "ADD",
                                "CHECK",      "WAIT",       "GETNUMKEYS",  "DELETE_KEY", "APPEND",
                                "MULTI_GET",  "MULTI_SET",  "CANCEL_WAIT", "PING",      "QUEUE_PUSH",
                                "QUEUE_POP",  "QUEUE_LEN",  "LIST"};
  return q <= kMaxQuery ? names[q] : "UNKNOWN";
}

bool Reader::take(size_t k) {
  if (state_ != OK) return false;
  if (n_ - pos_ < k) {
    state_ = NEED_MORE;
    need_ = pos_ + k;
    return false;
  }
  pos_ += k;
  return true;
}

bool Reader::length(uint64_t* len, uint64_t max, const char* what) {
  if (!u64(len)) return false;
  if (*len > max) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s length %" PRIu64 " exceeds the limit of %" PRIu64 " bytes", what, *len, max);
    error_ = buf;
    state_ = BAD;
    return false;
  }
  return true;
}

bool Reader::string(std::string* out, uint64_t max, const char* what) {
  uint64_t len = 0;
  if (!length(&len, max, what)) return false;
  if (!take(static_cast<size_t>(len))) return false;
  out->assign(reinterpret_cast<const char*>(p_ + pos_ - len), static_cast<size_t>(len));
  return true;
}

bool Reader::bytes(std::vector<uint8_t>* out, uint64_t max, const char* what) {
  uint64_t len = 0;
  if (!length(&len, max, what)) return false;
  if (!take(static_cast<size_t>(len))) return false;
  out->assign(p_ + pos_ - len, p_ + pos_);
  return true;
}

bool Reader::count(uint64_t* out, const char* what) {
  if (!u64(out)) return false;
  if (*out > kMaxKeyCount) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s count %" PRIu64 " exceeds the limit of %" PRIu64, what, *out, kMaxKeyCount);
    error_ = buf;
    state_ = BAD;
    return false;
  }
  return true;
}

}  // namespace store_wire
}  // namespace wsync
