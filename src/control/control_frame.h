// The control channel between the sender and each receiver: small framed messages over TCP that
// carry everything except bucket bytes (join, manifests, readiness, acknowledgements, commits).
// Keeping them off the transport means every transport gets the same liveness detection: a
// receiver that dies closes its socket, and the sender knows at once which rank it was.
//
// Frame: magic u32 "WSYN", type u16, reserved u16, body_len u32, then the body. All integers
// little-endian. Bodies are read with ByteReader, which bounds-checks every field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wsync.h"

namespace wsync {

constexpr uint32_t kControlMagic = 0x4E595357;  // "WSYN"
constexpr uint32_t kControlProtocolVersion = 1;
constexpr uint32_t kControlMaxBody = 64u << 20;
constexpr size_t kControlHeaderBytes = 12;

enum class MsgType : uint16_t {
  kHello = 1,        // rx->tx: u32 protocol, u32 rank, u32 pid, str group
  kWelcome = 2,      // tx->rx: u32 world_size
  kReject = 3,       // tx->rx: i32 status, str reason
  kJoined = 4,       // rx->tx: transport is connected
  kManifest = 5,     // tx->rx: u64 seq, bytes manifest
  kReady = 6,        // rx->tx: u64 seq (receive posted)
  kNack = 7,         // rx->tx: u64 seq, i32 status, str reason (bucket refused)
  kAck = 8,          // rx->tx: u64 seq, i32 status, str reason (bucket placed, or failed)
  kEndUpdate = 9,    // tx->rx: u64 version, u64 update_id, u64 buckets
  kCommitted = 10,   // rx->tx: u64 version
  kAbortUpdate = 11, // tx->rx: str reason
  kClose = 12,       // tx->rx: the group is destroyed
};

const char* msg_type_name(uint16_t type);

// A status code read from the wire: only a pinned failure code passes; 0 or an unknown value
// becomes `fallback`, so a peer can neither fake success nor hand out codes outside the ABI.
inline wsync_status_t wire_failure(int32_t code, wsync_status_t fallback) {
  return code > 0 && code < WSYNC_STATUS_COUNT ? code : fallback;
}

struct Frame {
  uint16_t type = 0;
  std::vector<uint8_t> body;
};

class ByteWriter {
 public:
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void i32(int32_t v) { put(static_cast<uint32_t>(v), 4); }
  void u64(uint64_t v) { put(v, 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    buf_.insert(buf_.end(), s.begin(), s.end());
  }
  void bytes(const std::vector<uint8_t>& b) {
    u32(static_cast<uint32_t>(b.size()));
    buf_.insert(buf_.end(), b.begin(), b.end());
  }
  std::vector<uint8_t>& data() { return buf_; }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> buf_;
};

// Reads fields from an untrusted body; every getter returns false past the end.
class ByteReader {
 public:
  ByteReader(const std::vector<uint8_t>& b) : p_(b.data()), n_(b.size()) {}
  bool u32(uint32_t* v) { return get(v, 4); }
  bool i32(int32_t* v) {
    uint32_t u;
    if (!get(&u, 4)) return false;
    *v = static_cast<int32_t>(u);
    return true;
  }
  bool u64(uint64_t* v) { return get(v, 8); }
  bool str(std::string* s, uint32_t max_len) {
    uint32_t len;
    if (!u32(&len) || len > max_len || len > n_ - off_) return false;
    s->assign(reinterpret_cast<const char*>(p_ + off_), len);
    off_ += len;
    return true;
  }
  bool bytes(std::vector<uint8_t>* b, uint32_t max_len) {
    uint32_t len;
    if (!u32(&len) || len > max_len || len > n_ - off_) return false;
    b->assign(p_ + off_, p_ + off_ + len);
    off_ += len;
    return true;
  }
  bool at_end() const { return off_ == n_; }

 private:
  template <typename T>
  bool get(T* v, int n) {
    if (n_ - off_ < static_cast<size_t>(n)) return false;
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) x |= static_cast<uint64_t>(p_[off_ + i]) << (8 * i);
    off_ += n;
    *v = static_cast<T>(x);
    return true;
  }
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
};

}  // namespace wsync
