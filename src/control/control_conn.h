// One control connection: framed send, and a buffered receive with a deadline that keeps
// partial frames across calls (a timeout never desynchronises the stream).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "control/control_frame.h"

namespace wsync {

class ControlConn {
 public:
  explicit ControlConn(int fd = -1) : fd_(fd) {}
  ~ControlConn();
  ControlConn(const ControlConn&) = delete;
  ControlConn& operator=(const ControlConn&) = delete;

  // Connect to host:port, retrying refused connections until timeout_ms passes.
  static wsync_status_t connect(const std::string& host, uint16_t port, int64_t timeout_ms, ControlConn* out,
                                const std::string& bind_ip = "");

  // Take ownership of an accepted socket.
  void adopt(int fd) {
    close();
    fd_ = fd;
    in_.clear();
    rd_ = 0;
    eof_ = false;
  }
  int fd() const { return fd_; }
  // The peer closed (EOF seen or socket gone); frames read before that may still be buffered.
  bool closed() const { return eof_ || fd_ < 0; }
  // closed(), or the peer's end is closed with frames still unread before its EOF (which reads do
  // not reach while a whole frame waits in the buffer): a poll for POLLRDHUP, without reading.
  bool hung_up() const;
  bool open() const { return fd_ >= 0; }
  void close();
  // Half-close our side (the peer reads everything we sent, then EOF) and discard what the peer
  // has sent that we will never read, so the final close() sends FIN, not RST (an RST makes the
  // peer's kernel drop our last frames unread).
  void shutdown_and_drain();
  // `peer` names the other end in error messages ("receiver rank 2", "the sender").
  void set_peer_name(const std::string& n) { peer_ = n; }
  // Blocking sends and receives give up with WSYNC_ERR_ABORTED once *flag is true.
  void set_abort_flag(const std::atomic<bool>* flag) { abort_ = flag; }
  const std::string& peer_name() const { return peer_; }
  // The largest frame body accepted from the peer (default kControlMaxBody). Small until the peer
  // proved the group secret, so an unauthenticated peer cannot make us buffer 64 MiB.
  void set_max_body(uint32_t n) { max_body_ = n; }

  wsync_status_t send(MsgType type, const std::vector<uint8_t>& body, int64_t timeout_ms);
  // Wait up to timeout_ms (0 = only what is already readable) for one whole frame.
  // WSYNC_ERR_TIMEOUT: no whole frame yet (state kept). WSYNC_ERR_PEER_FAILED: closed.
  // WSYNC_ERR_PROTOCOL: bad magic or oversized body (the connection is closed).
  wsync_status_t recv(Frame* out, int64_t timeout_ms);
  // Read whatever is available now without blocking; detects a closed peer.
  wsync_status_t pump();
  // The same past the next whole frame: what the peer sent is buffered now, up to max_bytes in all,
  // so that peek_all sees a word behind frames not taken yet (a catch-up's cancel behind the next
  // update's MANIFEST). What is buffered is not seen by poll() on fd(): callers take buffered
  // frames (has_frame) before they sleep on the socket.
  wsync_status_t pump_all(size_t max_bytes);
  bool has_frame() const;
  // The type of the whole frame buffered next (it stays buffered), or 0 when there is none.
  uint16_t next_type() const;
  // The whole frames buffered now, in order, whose type is `type`: their bodies appended to *out
  // (they stay buffered). Stops at the first frame that is not whole or not well formed.
  void peek_all(uint16_t type, std::vector<std::vector<uint8_t>>* out) const;

 private:
  wsync_status_t fill(int64_t timeout_ms);
  // A send found the peer gone: what it sent before it went (its last ABORT_UPDATE or CLOSE, still
  // in the kernel's queue) is read into the buffer, up to kLastWordsBytes, before the socket is
  // closed, so recv still returns it; the connection then reads as closed. (A sender that gave up
  // says why and closes; a receiver's ACK crossing that close made the receiver drop the reason
  // unread and blame the sender.)
  void keep_last_words();
  static constexpr size_t kLastWordsBytes = 1 << 20;
  bool take_frame(Frame* out, wsync_status_t* err);

  int fd_;
  std::string peer_ = "peer";
  size_t wanted() const;  // bytes still needed to complete the frame at rd_

  std::vector<uint8_t> in_;  // received bytes; frames are consumed from rd_
  size_t rd_ = 0;
  bool eof_ = false;
  const std::atomic<bool>* abort_ = nullptr;
  uint32_t max_body_ = kControlMaxBody;
};

// A listening socket for control connections.
class ControlListener {
 public:
  ~ControlListener();
  wsync_status_t listen(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  int fd() const { return fd_; }
  // Accept one connection within timeout_ms; WSYNC_ERR_TIMEOUT if none came. *peer (optional)
  // gets the peer's "ip:port".
  wsync_status_t accept(int64_t timeout_ms, int* fd_out, std::string* peer = nullptr);
  void close();

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace wsync
