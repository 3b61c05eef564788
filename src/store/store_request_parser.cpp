// The store's incremental request parser (see store_request_parser.h): one field at a time, each
// byte consumed once, allocations only for bytes that arrived and only with the budget's consent.
#include "store/store_request_parser.h"

#include <algorithm>
#include <cstring>

#include "store/store_wire.h"

namespace wsync {

namespace w = store_wire;
using P = StoreRequestParser;

namespace {

// A key's or value's buffer starts at most this large and doubles as its bytes arrive (up to its
// announced length).
constexpr size_t kFirstChunk = 4096;

}  // namespace

// The fields of each query, in wire order (torch's TCPStore client, store/store_wire.h).
bool P::shape_of(uint8_t type, Shape* s) {
  switch (static_cast<w::Query>(type)) {
    case w::Query::VALIDATE:
    case w::Query::PING:
      *s = {{kU32, kEnd}, 0};
      return true;
    case w::Query::AUTH:
      *s = {{kAuthBlob, kEnd}, 0};
      return true;
    case w::Query::SET:
    case w::Query::APPEND:
    case w::Query::QUEUE_PUSH:
      *s = {{kKeyField, kValueField, kEnd}, 0};
      return true;
    case w::Query::COMPARE_SET:
      *s = {{kKeyField, kValueField, kValueField, kEnd}, 0};
      return true;
    case w::Query::GET:
    case w::Query::DELETE_KEY:
    case w::Query::QUEUE_POP:
    case w::Query::QUEUE_LEN:
      *s = {{kKeyField, kEnd}, 0};
      return true;
    case w::Query::ADD:
    case w::Query::BARRIER:
      *s = {{kKeyField, kI64, kEnd}, 0};
      return true;
    case w::Query::CHECK:
    case w::Query::WAIT:
    case w::Query::MULTI_GET:
      *s = {{kCount, kKeyField, kEnd}, 1};
      return true;
    case w::Query::MULTI_SET:  // torch sends the count as int64: the same bits
      *s = {{kCount, kKeyField, kValueField, kEnd}, 1};
      return true;
    case w::Query::GETNUMKEYS:
    case w::Query::CANCEL_WAIT:
    case w::Query::LIST:
      *s = {{kEnd}, 0};
      return true;
  }
  return false;
}

P::Event P::bad(const std::string& why) {
  failed_ = true;
  error_ = why;
  return kBad;
}

bool P::approve(size_t bytes) {
  if (bytes == 0) return true;
  if (budget_ && !budget_(bytes)) {
    failed_ = true;
    error_.clear();
    return false;
  }
  held_ += bytes;
  return true;
}

// Gathers a fixed-width field into fixed_; true once all `width` bytes are there.
bool P::fixed(const uint8_t* p, size_t n, size_t* used, size_t width) {
  const size_t k = std::min(n, width - fixed_got_);
  std::memcpy(fixed_ + fixed_got_, p, k);
  fixed_got_ += k;
  *used = k;
  if (fixed_got_ < width) return false;
  fixed_got_ = 0;
  return true;
}

// The current field was read: move to the next one, repeating list items.
P::Event P::finish_item() {
  ++field_;
  if (shape_.f[field_] == kEnd && shape_.repeat_from > 0 && --items_left_ > 0) field_ = shape_.repeat_from;
  return kNeedMore;  // "go on"
}

// A fixed-width field (or a length prefix) is complete in fixed_.
P::Event P::finish_field() {
  const Field f = shape_.f[field_];
  const char* name = w::query_name(req_.type);
  uint64_t v = 0;
  switch (f) {
    case kU32:
      std::memcpy(&req_.u32, fixed_, 4);
      return finish_item();
    case kI64:
      std::memcpy(&req_.i64, fixed_, 8);
      return finish_item();
    case kAuthBlob:
      std::memcpy(req_.blob.data(), fixed_, req_.blob.size());
      return finish_item();
    case kCount:
      std::memcpy(&v, fixed_, 8);
      if (v > w::kMaxKeyCount)
        return bad(std::string(name) + ": key count " + std::to_string(v) + " exceeds the limit of " +
                   std::to_string(w::kMaxKeyCount));
      items_left_ = v;
      if (v == 0) {
        while (shape_.f[field_] != kEnd) ++field_;
        return kNeedMore;
      }
      ++field_;
      return kNeedMore;
    case kKeyField:
    case kValueField: {
      std::memcpy(&v, fixed_, 8);
      const bool key = f == kKeyField;
      const uint64_t max = key ? w::kMaxKeyLen : w::kMaxValueLen;
      if (v > max)
        return bad(std::string(name) + ": " + (key ? "key" : "value") + " length " + std::to_string(v) +
                   " exceeds the limit of " + std::to_string(max));
      if (req_bytes_ + v > kMaxRequestBytes)
        return bad(std::string(name) + " request exceeds " + std::to_string(kMaxRequestBytes) + " bytes");
      if (key) {
        if (!approve(kKeyOverhead)) return kRefused;
        req_.keys.emplace_back();
      } else {
        req_.values.emplace_back();
      }
      in_body_ = true;
      body_len_ = v;
      return kNeedMore;
    }
    case kEnd:
      break;
  }
  return kNeedMore;
}

// Room in b for `add` more bytes of the field being read: the buffer starts at kFirstChunk and
// doubles, never past the field's announced length, each step approved by the budget first. So a
// length prefix alone allocates nothing, and a field costs O(its length) in copies.
template <typename Buf>
bool P::grow(Buf& b, size_t add) {
  const size_t need = b.size() + add, cap = b.capacity();
  if (need <= cap) return true;
  const size_t want = static_cast<size_t>(
      std::min<uint64_t>(body_len_, std::max<uint64_t>(need, std::max<size_t>(2 * cap, kFirstChunk))));
  if (!approve(want - std::min(want, cap))) return false;
  b.reserve(want);
  return b.capacity() <= want || approve(b.capacity() - want);  // the allocator's rounding, counted too
}

// Bytes of the key or value being read; kKey when a key completes.
P::Event P::string_body(const uint8_t* p, size_t n, size_t* used) {
  const bool key = shape_.f[field_] == kKeyField;
  const size_t got = key ? req_.keys.back().size() : req_.values.back().size();
  const size_t k = static_cast<size_t>(std::min<uint64_t>(n, body_len_ - got));
  *used = 0;
  if (key) {
    std::string& s = req_.keys.back();
    if (!grow(s, k)) return kRefused;
    s.append(reinterpret_cast<const char*>(p), k);
  } else {
    std::vector<uint8_t>& v = req_.values.back();
    if (!grow(v, k)) return kRefused;
    v.insert(v.end(), p, p + k);
  }
  *used = k;
  req_bytes_ += k;
  if (got + k < body_len_) return kNeedMore;
  in_body_ = false;
  finish_item();
  return key ? kKey : kNeedMore;
}

P::Event P::next(const uint8_t* p, size_t n, size_t* used) {
  *used = 0;
  if (failed_) return error_.empty() ? kRefused : kBad;
  if (!have_type_) {
    if (n == 0) return kNeedMore;
    req_.type = p[0];
    *used = 1;
    ++parsed_;
    req_bytes_ = 1;
    have_type_ = true;
    field_ = 0;
    if (!shape_of(req_.type, &shape_)) return bad("unknown query type " + std::to_string(req_.type));
    return kType;
  }
  for (;;) {
    const Field f = shape_.f[field_];
    if (f == kEnd) return kDone;
    const uint8_t* q = p + *used;
    const size_t left = n - *used;
    size_t k = 0;
    Event ev = kNeedMore;
    if (in_body_) {
      ev = string_body(q, left, &k);
      *used += k;
      parsed_ += k;
      if (ev == kNeedMore && in_body_) return kNeedMore;  // every byte given was taken
    } else {
      if (left == 0) return kNeedMore;
      const size_t width = f == kU32 ? 4 : f == kAuthBlob ? w::kAuthBytes : 8;
      const bool whole = fixed(q, left, &k, width);
      *used += k;
      parsed_ += k;
      req_bytes_ += k;
      if (!whole) return kNeedMore;
      ev = finish_field();
    }
    if (ev != kNeedMore) return ev;
  }
}

size_t P::take(StoreRequest* out) {
  *out = std::move(req_);
  return clear();
}

size_t P::clear() {
  const size_t h = held_;
  req_ = StoreRequest();
  have_type_ = false;
  failed_ = false;
  field_ = 0;
  items_left_ = 0;
  fixed_got_ = 0;
  in_body_ = false;
  body_len_ = 0;
  req_bytes_ = 0;
  held_ = 0;
  error_.clear();
  return h;
}

}  // namespace wsync
