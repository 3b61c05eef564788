// The store server's request parser: a state machine that takes a connection's bytes as they
// arrive, in pieces of any size, and parses each byte exactly once. A request that trickles in
// (a 125 MiB WAIT sent 4 KiB at a time) costs O(its size) in total, never a re-parse from its
// first byte; and the parser only allocates for bytes that actually arrived (a length prefix that
// promises 64 MiB reserves nothing until the bytes come), each allocation approved first by the
// caller's budget (the server's memory quota).
//
// The shapes of the requests are torch's TCPStore wire (store/store_wire.h) plus wsync's AUTH.
// The parser stops at every point where the server may want to refuse early: after the query type
// byte (kType), after each key (kKey), so a client without the group secret is closed before it can
// send the 64 MiB value of a key it may not write.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace wsync {

struct StoreRequest {
  uint8_t type = 0;
  std::vector<std::string> keys;
  std::vector<std::vector<uint8_t>> values;  // capacity == size once complete (libstdc++)
  uint32_t u32 = 0;                          // VALIDATE's magic, PING's nonce
  int64_t i64 = 0;                           // ADD's delta, BARRIER's world size
  std::array<uint8_t, 32> blob{};            // AUTH's nonce or proof
};

class StoreRequestParser {
 public:
  enum Event {
    kNeedMore,  // every byte given was consumed; the request is not complete
    kType,      // the query type byte was just read: request().type
    kKey,       // a key was just completed: request().keys.back()
    kDone,      // a whole request is ready: take() it
    kBad,       // malformed (unknown type, a bound broken): error() says which; do not feed again
    kRefused,   // the budget refused an allocation; do not feed again
  };

  // Asked before the parser allocates `bytes` more for the request in progress; false refuses
  // (kRefused). Everything approved is reported by held() until take()/clear().
  using Budget = std::function<bool(size_t bytes)>;

  // A whole request (all of its fields) must fit in this many bytes.
  static constexpr uint64_t kMaxRequestBytes = 256ull << 20;
  // Bookkeeping charged per key on top of its bytes (the string object, the vector slot).
  static constexpr size_t kKeyOverhead = 48;

  explicit StoreRequestParser(Budget budget = nullptr) : budget_(std::move(budget)) {}

  // Consume bytes from p[0, n) up to the next event; *used says how many were consumed (all of
  // them for kNeedMore). Call again with the rest after handling kType/kKey/kDone; n may be 0
  // (a request with no fields completes without more bytes).
  Event next(const uint8_t* p, size_t n, size_t* used);

  const StoreRequest& request() const { return req_; }
  // After kDone: moves the request out and readies the parser for the next one. Returns the
  // bytes the budget had approved for it (now the caller's to release or re-account).
  size_t take(StoreRequest* out);
  // Drops the request in progress (the connection closes); returns the bytes held.
  size_t clear();

  size_t held() const { return held_; }
  const std::string& error() const { return error_; }
  uint64_t bytes_parsed() const { return parsed_; }

 private:
  enum Field : uint8_t { kU32, kI64, kAuthBlob, kKeyField, kValueField, kCount, kEnd };
  struct Shape {
    Field f[4];
    uint8_t repeat_from;  // > 0: fields [repeat_from, kEnd) repeat `count` times
  };
  static bool shape_of(uint8_t type, Shape* s);

  Event begin_field();
  Event finish_field();
  Event finish_item();
  Event bad(const std::string& why);
  bool approve(size_t bytes);
  bool fixed(const uint8_t* p, size_t n, size_t* used, size_t width);
  Event string_body(const uint8_t* p, size_t n, size_t* used);
  template <typename Buf>
  bool grow(Buf& b, size_t add);

  Budget budget_;
  StoreRequest req_;
  Shape shape_{};
  bool have_type_ = false;
  bool failed_ = false;
  uint8_t field_ = 0;          // index into shape_.f
  uint64_t items_left_ = 0;    // list requests: items still to read, the current one included
  uint8_t fixed_[32] = {};     // a fixed-width field (or a length prefix) being assembled
  size_t fixed_got_ = 0;
  bool in_body_ = false;       // a key/value: its length is known, its bytes are arriving
  uint64_t body_len_ = 0;
  uint64_t req_bytes_ = 0;     // bytes of this request so far (the type byte included)
  size_t held_ = 0;
  uint64_t parsed_ = 0;
  std::string error_;
};

}  // namespace wsync
