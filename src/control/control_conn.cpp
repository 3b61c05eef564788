#include "control/control_conn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/error.h"

namespace wsync {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t deadline_after(int64_t timeout_ms) {
  const int64_t now = now_ms();
  if (timeout_ms <= 0) return now;
  return timeout_ms > INT64_MAX - now ? INT64_MAX : now + timeout_ms;
}

int poll_slice(int64_t left_ms) {
  if (left_ms <= 0) return 0;
  return static_cast<int>(left_ms < 100 ? left_ms : 100);
}

const char* msg_type_name(uint16_t type) {
  static const char* names[] = {"?",     "HELLO", "WELCOME",    "REJECT",    "JOINED",       "MANIFEST", "READY",
                                "NACK",  "ACK",   "END_UPDATE", "COMMITTED", "ABORT_UPDATE", "CLOSE"};
  return type < sizeof names / sizeof names[0] ? names[type] : "?";
}

namespace {

void set_socket_options(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int fl = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

wsync_status_t resolve(const std::string& host, uint16_t port, bool passive, addrinfo** out) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int rc = getaddrinfo(h.empty() ? nullptr : h.c_str(), std::to_string(port).c_str(), &hints, out);
  if (rc != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "cannot resolve host '%s': %s", host.c_str(), gai_strerror(rc));
  return WSYNC_OK;
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

wsync_status_t ControlConn::connect(const std::string& host, uint16_t port, int64_t timeout_ms, ControlConn* out) {
  const int64_t deadline = deadline_after(timeout_ms);
  std::string last = "no attempt";
  for (;;) {
    addrinfo* ai = nullptr;
    wsync_status_t st = resolve(host, port, false, &ai);
    if (st != WSYNC_OK) return st;
    for (addrinfo* a = ai; a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) continue;
      // Non-blocking, so a host that drops SYNs cannot hold us past the deadline.
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        for (;;) {
          int64_t left = deadline - now_ms();
          pollfd pfd{fd, POLLOUT, 0};
          int pr = ::poll(&pfd, 1, poll_slice(left));
          if (pr > 0) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            rc = err == 0 ? 0 : -1;
            errno = err;
            break;
          }
          if (left <= 0) {
            rc = -1;
            errno = ETIMEDOUT;
            break;
          }
        }
      }
      if (rc == 0) {
        freeaddrinfo(ai);
        set_socket_options(fd);
        out->adopt(fd);
        return WSYNC_OK;
      }
      last = std::strerror(errno);
      ::close(fd);
    }
    freeaddrinfo(ai);
    if (now_ms() >= deadline)
      return fail(WSYNC_ERR_TIMEOUT, "could not connect to %s:%u within %lld ms: %s", host.c_str(), port,
                  static_cast<long long>(timeout_ms), last.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

wsync_status_t ControlConn::send(MsgType type, const std::vector<uint8_t>& body, int64_t timeout_ms) {
  if (fd_ < 0) return fail(WSYNC_ERR_PEER_FAILED, "the connection to %s is closed", peer_.c_str());
  if (body.size() > kControlMaxBody)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "control message of %zu bytes is larger than %u", body.size(),
                kControlMaxBody);
  uint8_t hdr[kControlHeaderBytes];
  auto put = [&](size_t off, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) hdr[off + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  put(0, kControlMagic, 4);
  put(4, static_cast<uint16_t>(type), 2);
  put(6, 0, 2);
  put(8, body.size(), 4);
  const int64_t deadline = deadline_after(timeout_ms);
  const uint8_t* parts[2] = {hdr, body.data()};
  size_t lens[2] = {sizeof hdr, body.size()};
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
      close();
      return fail(WSYNC_ERR_PEER_FAILED, "%s is gone (sending %s: %s)", peer_.c_str(),
                  msg_type_name(static_cast<uint16_t>(type)), why.c_str());
    }
  }
  return WSYNC_OK;
}

wsync_status_t ControlConn::pump() { return fill(0); }

// Bytes still missing for the frame that starts at rd_ (header first, then its body). Reads
// never take more than that, so a peer cannot make us buffer more than one frame (64 MiB).
size_t ControlConn::wanted() const {
  size_t have = in_.size() - rd_;
  if (have < kControlHeaderBytes) return kControlHeaderBytes - have;
  const uint8_t* h = in_.data() + rd_;
  uint32_t len = h[8] | (h[9] << 8) | (h[10] << 16) | (static_cast<uint32_t>(h[11]) << 24);
  if (len > kControlMaxBody) return 0;  // take_frame refuses it
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

bool ControlConn::take_frame(Frame* out, wsync_status_t* err) {
  *err = WSYNC_OK;
  if (in_.size() - rd_ < kControlHeaderBytes) return false;
  const uint8_t* h = in_.data() + rd_;
  uint32_t magic = h[0] | (h[1] << 8) | (h[2] << 16) | (static_cast<uint32_t>(h[3]) << 24);
  uint32_t len = h[8] | (h[9] << 8) | (h[10] << 16) | (static_cast<uint32_t>(h[11]) << 24);
  if (magic != kControlMagic || len > kControlMaxBody) {
    close();
    *err = fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed control frame (magic 0x%08x, length %u); connection closed",
                peer_.c_str(), magic, len);
    return false;
  }
  if (in_.size() - rd_ - kControlHeaderBytes < len) return false;
  out->type = static_cast<uint16_t>(h[4] | (h[5] << 8));
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
  addrinfo* ai = nullptr;
  wsync_status_t st = resolve(host, port, true, &ai);
  if (st != WSYNC_OK) return st;
  std::string last = "no address";
  for (addrinfo* a = ai; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl);
      port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
      fd_ = fd;
      freeaddrinfo(ai);
      return WSYNC_OK;
    }
    last = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(ai);
  return fail(WSYNC_ERR_IO, "cannot listen on %s:%u: %s", host.c_str(), port, last.c_str());
}

wsync_status_t ControlListener::accept(int64_t timeout_ms, int* fd_out) {
  pollfd pfd{fd_, POLLIN, 0};
  int rc = ::poll(&pfd, 1, poll_slice(timeout_ms));
  if (rc <= 0) return WSYNC_ERR_TIMEOUT;
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return WSYNC_ERR_TIMEOUT;
  set_socket_options(fd);
  *fd_out = fd;
  return WSYNC_OK;
}

}  // namespace wsync
