#include "control/control_conn.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/socket.h"

namespace wsync {

const char* msg_type_name(uint16_t type) {
  static const char* names[] = {"?",     "HELLO", "WELCOME",    "REJECT",    "JOINED",       "MANIFEST", "READY",
                                "NACK",  "ACK",   "END_UPDATE", "COMMITTED", "ABORT_UPDATE", "CLOSE",
                                "CHALLENGE", "BUCKET_SUM", "ROUTE", "CATCHUP", "CATCHUP_CANCEL", "ASSIGN", "CATCHUP_FAILED", "PROGRESS", "ROUTE_DROP", "SENDER_LOST", "REMOVED", "ROUTE_ADD",
                                "ROUTE_MOVE"};
  return type < sizeof names / sizeof names[0] ? names[type] : "?";
}

namespace {

struct FrameHeader {
  uint32_t magic = 0;
  uint16_t type = 0;
  uint16_t reserved = 0;
  uint32_t body_len = 0;
};

// The 12 header bytes at p (the caller checked they are there).
FrameHeader header_at(const uint8_t* p) {
  ByteReader r(p, kControlHeaderBytes);
  FrameHeader h;
  r.u32(&h.magic);
  r.u16(&h.type);
  r.u16(&h.reserved);
  r.u32(&h.body_len);
  return h;
}

}  // namespace

ControlConn::~ControlConn() { close(); }

void ControlConn::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ControlConn::shutdown_and_drain() {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_WR);
  uint8_t buf[4096];
  while (::recv(fd_, buf, sizeof buf, 0) > 0) {
  }
}

wsync_status_t ControlConn::connect(const std::string& host, uint16_t port, int64_t timeout_ms, ControlConn* out,
                                    const std::string& bind_ip) {
  const int64_t deadline = deadline_after(timeout_ms);
  std::string last = "no attempt";
  for (;;) {
    int fd = -1;
    wsync_status_t st = tcp_connect(host, port, deadline, &fd, &last, bind_ip);
    if (st == WSYNC_OK) {
      out->adopt(fd);
      return WSYNC_OK;
    }
    if (now_ms() >= deadline)
      return fail(WSYNC_ERR_TIMEOUT, "could not connect to %s:%u within %lld ms: %s", host.c_str(), port,
                  static_cast<long long>(timeout_ms), last.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, remaining_ms(deadline))));
  }
}

wsync_status_t ControlConn::send(MsgType type, const std::vector<uint8_t>& body, int64_t timeout_ms) {
  if (fd_ < 0) return fail(WSYNC_ERR_PEER_FAILED, "the connection to %s is closed", peer_.c_str());
  if (body.size() > kControlMaxBody)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "control message of %zu bytes is larger than %u", body.size(),
                kControlMaxBody);
  ByteWriter hdr;
  hdr.u32(kControlMagic);
  hdr.u16(static_cast<uint16_t>(type));
  hdr.u16(0);
  hdr.u32(static_cast<uint32_t>(body.size()));
  const int64_t deadline = deadline_after(timeout_ms);
  const uint8_t* parts[2] = {hdr.data().data(), body.data()};
  size_t lens[2] = {hdr.size(), body.size()};
  for (int p = 0; p < 2; ++p) {
    size_t off = 0;
    while (off < lens[p]) {
      ssize_t n = ::send(fd_, parts[p] + off, lens[p] - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (abort_ != nullptr && abort_->load())
          return fail(WSYNC_ERR_ABORTED, "aborted while sending %s to %s", msg_type_name(static_cast<uint16_t>(type)),
                      peer_.c_str());
        int64_t left = deadline - now_ms();
        if (left <= 0)
          return fail(WSYNC_ERR_TIMEOUT, "sending %s to %s timed out after %lld ms", msg_type_name(static_cast<uint16_t>(type)),
                      peer_.c_str(), static_cast<long long>(timeout_ms));
        pollfd pfd{fd_, POLLOUT, 0};
        ::poll(&pfd, 1, poll_slice(left));
        continue;
      }
      std::string why = n == 0 ? "connection closed" : std::strerror(errno);
      keep_last_words();
      close();
      return fail(WSYNC_ERR_PEER_FAILED, "%s is gone (sending %s: %s)", peer_.c_str(),
                  msg_type_name(static_cast<uint16_t>(type)), why.c_str());
    }
  }
  return WSYNC_OK;
}

void ControlConn::keep_last_words() {
  uint8_t buf[4096];
  size_t kept = 0;
  // (no more than a few of the largest frames this peer may send: an unproven peer's are small)
  const size_t cap = std::min<size_t>(kLastWordsBytes, 4 * (kControlHeaderBytes + static_cast<size_t>(max_body_)));
  while (fd_ >= 0 && kept < cap) {
    const ssize_t n = ::recv(fd_, buf, std::min(sizeof buf, cap - kept), MSG_DONTWAIT);
    if (n <= 0) break;  // nothing more, or the reset itself
    in_.insert(in_.end(), buf, buf + n);
    kept += static_cast<size_t>(n);
  }
  eof_ = true;
}

wsync_status_t ControlConn::pump() { return fill(0); }

wsync_status_t ControlConn::pump_all(size_t max_bytes) {
  if (fd_ < 0) return fail(WSYNC_ERR_PEER_FAILED, "%s closed its connection", peer_.c_str());
  for (size_t got = in_.size() - rd_; got < max_bytes && !eof_;) {  // (at most max_bytes buffered)
    const size_t old = in_.size(), chunk = std::min<size_t>(65536, max_bytes - got);
    in_.resize(old + chunk);
    ssize_t n = ::recv(fd_, in_.data() + old, chunk, 0);
    in_.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return WSYNC_OK;
    if (n < 0 && errno == EINTR) continue;
    eof_ = true;
  }
  return WSYNC_OK;
}

bool ControlConn::hung_up() const {
  if (closed()) return true;
  pollfd f{fd_, POLLRDHUP, 0};
  return ::poll(&f, 1, 0) > 0 && (f.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// Bytes still missing for the frame that starts at rd_ (header first, then its body). Reads
// never take more than that, so a peer cannot make us buffer more than one frame (max_body_).
size_t ControlConn::wanted() const {
  size_t have = in_.size() - rd_;
  if (have < kControlHeaderBytes) return kControlHeaderBytes - have;
  const FrameHeader h = header_at(in_.data() + rd_);
  const uint32_t len = h.body_len;
  if (len > max_body_) return 0;  // take_frame refuses it
  size_t total = kControlHeaderBytes + len;
  return have >= total ? 0 : total - have;
}

wsync_status_t ControlConn::fill(int64_t timeout_ms) {
  if (fd_ < 0) return fail(WSYNC_ERR_PEER_FAILED, "%s closed its connection", peer_.c_str());
  if (wanted() == 0) return WSYNC_OK;  // a whole frame is already buffered
  if (timeout_ms > 0) {
    pollfd pfd{fd_, POLLIN, 0};
    int rc = ::poll(&pfd, 1, poll_slice(timeout_ms));
    if (rc == 0) return WSYNC_ERR_TIMEOUT;
  }
  if (rd_ > 0 && rd_ >= in_.size() / 2) {  // drop consumed frames now and then, not per frame
    in_.erase(in_.begin(), in_.begin() + static_cast<long>(rd_));
    rd_ = 0;
  }
  for (int rounds = 0; rounds < 64; ++rounds) {  // bounded work per call
    size_t want = wanted();
    if (want == 0) return WSYNC_OK;
    size_t old = in_.size();
    size_t chunk = want < 65536 ? want : 65536;
    in_.resize(old + chunk);
    ssize_t n = ::recv(fd_, in_.data() + old, chunk, 0);
    in_.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return WSYNC_OK;
    if (n < 0 && errno == EINTR) continue;
    eof_ = true;
    return WSYNC_OK;
  }
  return WSYNC_OK;
}

bool ControlConn::has_frame() const { return in_.size() - rd_ >= kControlHeaderBytes && wanted() == 0; }

uint16_t ControlConn::next_type() const { return has_frame() ? header_at(in_.data() + rd_).type : 0; }

void ControlConn::peek_all(uint16_t type, std::vector<std::vector<uint8_t>>* out) const {
  for (size_t at = rd_; in_.size() - at >= kControlHeaderBytes;) {
    const FrameHeader fh = header_at(in_.data() + at);
    if (fh.magic != kControlMagic || fh.body_len > max_body_ || in_.size() - at - kControlHeaderBytes < fh.body_len)
      return;
    const uint8_t* body = in_.data() + at + kControlHeaderBytes;
    if (fh.type == type) out->emplace_back(body, body + fh.body_len);
    at += kControlHeaderBytes + fh.body_len;
  }
}

bool ControlConn::take_frame(Frame* out, wsync_status_t* err) {
  *err = WSYNC_OK;
  if (in_.size() - rd_ < kControlHeaderBytes) return false;
  const uint8_t* h = in_.data() + rd_;
  const FrameHeader fh = header_at(h);
  const uint32_t magic = fh.magic, len = fh.body_len;
  if (magic != kControlMagic || len > max_body_) {
    close();
    *err = fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed control frame (magic 0x%08x, length %u, at most %u); "
                "connection closed", peer_.c_str(), magic, len, max_body_);
    return false;
  }
  if (in_.size() - rd_ - kControlHeaderBytes < len) return false;
  out->type = fh.type;
  out->body.assign(h + kControlHeaderBytes, h + kControlHeaderBytes + len);
  rd_ += kControlHeaderBytes + len;
  if (rd_ == in_.size()) {
    in_.clear();
    rd_ = 0;
  }
  return true;
}

wsync_status_t ControlConn::recv(Frame* out, int64_t timeout_ms) {
  const int64_t deadline = deadline_after(timeout_ms);
  for (;;) {
    wsync_status_t err;
    if (take_frame(out, &err)) return WSYNC_OK;
    if (err != WSYNC_OK) return err;
    if (eof_ || fd_ < 0) {
      close();
      return fail(WSYNC_ERR_PEER_FAILED, "%s closed its connection", peer_.c_str());
    }
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      // One last non-blocking read so a frame that is already there is never missed.
      wsync_status_t st = fill(0);
      if (st != WSYNC_OK) return st;
      if (take_frame(out, &err)) return WSYNC_OK;
      if (err != WSYNC_OK) return err;
      if (eof_) {
        close();
        return fail(WSYNC_ERR_PEER_FAILED, "%s closed its connection", peer_.c_str());
      }
      return WSYNC_ERR_TIMEOUT;
    }
    if (abort_ != nullptr && abort_->load()) return fail(WSYNC_ERR_ABORTED, "aborted while waiting for %s", peer_.c_str());
    wsync_status_t st = fill(left);
    if (st != WSYNC_OK && st != WSYNC_ERR_TIMEOUT) return st;
  }
}

ControlListener::~ControlListener() { close(); }

void ControlListener::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

wsync_status_t ControlListener::listen(const std::string& host, uint16_t port) {
  return tcp_listen(host, port, 128, &fd_, &port_);
}

wsync_status_t ControlListener::accept(int64_t timeout_ms, int* fd_out, std::string* peer) {
  pollfd pfd{fd_, POLLIN, 0};
  if (::poll(&pfd, 1, poll_slice(timeout_ms)) <= 0) return WSYNC_ERR_TIMEOUT;
  int fd = tcp_accept(fd_, peer);
  if (fd < 0) return WSYNC_ERR_TIMEOUT;
  *fd_out = fd;
  return WSYNC_OK;
}

}  // namespace wsync
