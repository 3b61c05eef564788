#include "store/tcp_store_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "store/host_port.h"
#include "store/store_wire.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

namespace wsync {

namespace w = store_wire;

namespace {

// A reply payload longer than this is taken as a desynchronised stream, not a value.
constexpr uint64_t kMaxReplyPayload = 1ull << 30;
// Deadlines are computed as now + timeout; this keeps that sum far from overflowing.
constexpr int64_t kMaxTimeoutMs = int64_t(1) << 40;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int remaining_ms(int64_t deadline) {
  int64_t r = deadline - now_ms();
  if (r < 0) return 0;
  if (r > 24 * 3600 * 1000) return 24 * 3600 * 1000;
  return static_cast<int>(r);
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i == 8) {
      s += ", ... (" + std::to_string(keys.size()) + " keys)";
      break;
    }
    if (i) s += ", ";
    s += "'" + keys[i] + "'";
  }
  return s;
}

std::string wire_key(const std::string& key) { return std::string(w::kKeyPrefix) + key; }

// One non-blocking connect attempt to one address; returns the fd or -1 with *err set.
int connect_one(const addrinfo* ai, int64_t deadline, std::string* err) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
  if (fd < 0) {
    *err = strerror(errno);
    return -1;
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int fl = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
  setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS && errno != EINTR) {
    *err = strerror(errno);
    ::close(fd);
    return -1;
  }
  pollfd p = {fd, POLLOUT, 0};
  int n;
  do {
    n = ::poll(&p, 1, remaining_ms(deadline));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    *err = n == 0 ? "connect timed out" : strerror(errno);
    ::close(fd);
    return -1;
  }
  int so = 0;
  socklen_t sl = sizeof so;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl);
  if (so != 0) {
    *err = strerror(so);
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

wsync_status_t TcpStoreClient::connect(const std::string& host, uint16_t port, int64_t timeout_ms,
                                       std::unique_ptr<TcpStoreClient>* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "TcpStoreClient::connect: out is NULL");
  if (host.empty()) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store client: empty host for port %u", unsigned(port));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    return connect(host.substr(1, host.size() - 2), port, timeout_ms, out);
  if (timeout_ms < 0) timeout_ms = kDefaultTimeoutMs;
  timeout_ms = std::min<int64_t>(timeout_ms, kMaxTimeoutMs);
  const std::string where = format_host_port(host, port);
  const int64_t deadline = now_ms() + timeout_ms;
  static std::atomic<uint32_t> counter{0};
  std::string last_err = "not tried";
  int attempt = 0;

  for (;;) {
    ++attempt;
    addrinfo hints;
    std::memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string port_s = std::to_string(port);
    int gai = ::getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res);
    int fd = -1;
    if (gai != 0) {
      last_err = std::string("cannot resolve host: ") + gai_strerror(gai);
    } else {
      for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) fd = connect_one(ai, deadline, &last_err);
      freeaddrinfo(res);
    }
    if (fd >= 0) {
      std::unique_ptr<TcpStoreClient> c(new TcpStoreClient());
      c->fd_ = fd;
      c->host_ = host;
      c->port_ = port;
      c->op_timeout_ms_ = std::max<int64_t>(timeout_ms, kDefaultTimeoutMs);
      // VALIDATE + magic (no reply), then PING + nonce (echoed): exactly torch's handshake.
      uint32_t nonce = static_cast<uint32_t>(getpid()) * 2654435761u + counter.fetch_add(1) + 1;
      std::vector<uint8_t> b;
      w::put_u8(&b, static_cast<uint8_t>(w::Query::VALIDATE));
      w::put_pod<uint32_t>(&b, w::kValidationMagic);
      w::put_u8(&b, static_cast<uint8_t>(w::Query::PING));
      w::put_pod<uint32_t>(&b, nonce);
      uint32_t echo = 0;
      wsync_status_t st = c->send_all(b, deadline, "VALIDATE/PING handshake");
      if (st == WSYNC_OK) st = c->recv_all(&echo, sizeof echo, deadline, "PING handshake");
      if (st == WSYNC_OK) {
        if (echo != nonce)
          return fail(WSYNC_ERR_PROTOCOL,
                      "store at %s answered the PING handshake with %" PRIu32 " instead of %" PRIu32
                      "; it is not a torch TCPStore-compatible server",
                      where.c_str(), echo, nonce);
        WSYNC_LOGD("store client connected to %s after %d attempt(s)", where.c_str(), attempt);
        *out = std::move(c);
        return WSYNC_OK;
      }
      if (st == WSYNC_ERR_TIMEOUT)
        return fail(WSYNC_ERR_TIMEOUT,
                    "store at %s accepted the connection but did not answer the VALIDATE/PING handshake within "
                    "%" PRId64 " ms (is it a torch TCPStore-compatible server?)",
                    where.c_str(), timeout_ms);
      last_err = "handshake failed: " + last_error();
    }
    if (now_ms() >= deadline)
      return fail(WSYNC_ERR_TIMEOUT, "could not connect to the store at %s within %" PRId64 " ms (%d attempts): %s",
                  where.c_str(), timeout_ms, attempt, last_err.c_str());
    int64_t delay = std::min<int64_t>(attempt < 3 ? 50 : 100, deadline - now_ms());
    if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStoreClient::set_timeout(int64_t timeout_ms) {
  std::lock_guard<std::mutex> g(mu_);
  op_timeout_ms_ = timeout_ms < 0 ? kDefaultTimeoutMs : std::min<int64_t>(timeout_ms, kMaxTimeoutMs);
}

std::string TcpStoreClient::address() const { return format_host_port(host_, port_); }

int64_t TcpStoreClient::op_deadline() const { return now_ms() + op_timeout_ms_; }

wsync_status_t TcpStoreClient::usable() {
  if (broken_status_ == WSYNC_OK && fd_ >= 0) return WSYNC_OK;
  return fail(broken_status_ == WSYNC_OK ? WSYNC_ERR_INVALID_STATE : broken_status_,
              "store connection to %s is unusable after an earlier error: %s", address().c_str(),
              broken_reason_.c_str());
}

wsync_status_t TcpStoreClient::broken(wsync_status_t st) {
  if (broken_status_ == WSYNC_OK) {
    broken_status_ = st;
    broken_reason_ = last_error();
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  return st;
}

wsync_status_t TcpStoreClient::send_all(const std::vector<uint8_t>& buf, int64_t deadline, const char* what) {
  size_t off = 0;
  while (off < buf.size()) {
    ssize_t n = ::send(fd_, buf.data() + off, buf.size() - off, MSG_NOSIGNAL);
    if (n >= 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int ms = remaining_ms(deadline);
      if (ms == 0)
        return fail(WSYNC_ERR_TIMEOUT, "store %s: timed out sending %s (the server does not read)",
                    address().c_str(), what);
      pollfd p = {fd_, POLLOUT, 0};
      ::poll(&p, 1, ms);
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
      return fail(WSYNC_ERR_PEER_FAILED, "store server %s closed the connection while sending %s: %s",
                  address().c_str(), what, strerror(errno));
    return fail(WSYNC_ERR_IO, "store %s: sending %s failed: %s", address().c_str(), what, strerror(errno));
  }
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::recv_all(void* buf, size_t len, int64_t deadline, const char* what) {
  uint8_t* p = static_cast<uint8_t*>(buf);
  size_t off = 0;
  while (off < len) {
    ssize_t n = ::recv(fd_, p + off, len - off, 0);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n == 0)
      return fail(WSYNC_ERR_PEER_FAILED, "store server %s closed the connection while we waited for the reply to %s",
                  address().c_str(), what);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int ms = remaining_ms(deadline);
      if (ms == 0)
        return fail(WSYNC_ERR_TIMEOUT, "store %s: no reply to %s in time", address().c_str(), what);
      pollfd pf = {fd_, POLLIN, 0};
      ::poll(&pf, 1, ms);
      continue;
    }
    if (errno == ECONNRESET || errno == EPIPE || errno == ENOTCONN)
      return fail(WSYNC_ERR_PEER_FAILED, "store server %s reset the connection while we waited for the reply to %s",
                  address().c_str(), what);
    return fail(WSYNC_ERR_IO, "store %s: reading the reply to %s failed: %s", address().c_str(), what,
                strerror(errno));
  }
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::recv_payload(std::vector<uint8_t>* out, int64_t deadline, const char* what) {
  uint64_t len = 0;
  wsync_status_t st = recv_all(&len, sizeof len, deadline, what);
  if (st != WSYNC_OK) return st;
  if (len > kMaxReplyPayload)
    return fail(WSYNC_ERR_PROTOCOL, "store %s: the reply to %s announces %" PRIu64 " bytes; the stream is corrupt",
                address().c_str(), what, len);
  out->resize(static_cast<size_t>(len));
  return len == 0 ? WSYNC_OK : recv_all(out->data(), out->size(), deadline, what);
}

wsync_status_t TcpStoreClient::do_wait(const std::vector<std::string>& wire_keys, int64_t timeout_ms) {
  if (timeout_ms < 0) timeout_ms = op_timeout_ms_;
  timeout_ms = std::min<int64_t>(timeout_ms, kMaxTimeoutMs);
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::WAIT));
  w::put_pod<uint64_t>(&b, wire_keys.size());
  for (const auto& k : wire_keys) w::put_string(&b, k);
  wsync_status_t st = send_all(b, op_deadline(), "WAIT");
  if (st != WSYNC_OK) return broken(st);
  uint8_t r = 0;
  st = recv_all(&r, 1, now_ms() + timeout_ms, "WAIT");
  if (st == WSYNC_OK) {
    if (r != static_cast<uint8_t>(w::WaitReply::STOP_WAITING))
      return broken(fail(WSYNC_ERR_PROTOCOL, "store %s: WAIT answered %u instead of STOP_WAITING", address().c_str(),
                         unsigned(r)));
    return WSYNC_OK;
  }
  if (st != WSYNC_ERR_TIMEOUT) return broken(st);
  // Timed out: cancel like torch does. The server answers WAIT_CANCELED, possibly preceded by
  // a STOP_WAITING that crossed our CANCEL_WAIT on the wire.
  b.clear();
  w::put_u8(&b, static_cast<uint8_t>(w::Query::CANCEL_WAIT));
  const int64_t d = op_deadline();
  st = send_all(b, d, "CANCEL_WAIT");
  if (st == WSYNC_OK) st = recv_all(&r, 1, d, "CANCEL_WAIT");
  if (st != WSYNC_OK) return broken(st);
  bool arrived = false;
  if (r == static_cast<uint8_t>(w::WaitReply::STOP_WAITING)) {
    arrived = true;
    st = recv_all(&r, 1, d, "CANCEL_WAIT");
    if (st != WSYNC_OK) return broken(st);
  }
  if (r != static_cast<uint8_t>(w::WaitReply::WAIT_CANCELED))
    return broken(fail(WSYNC_ERR_PROTOCOL, "store %s: CANCEL_WAIT answered %u instead of WAIT_CANCELED",
                       address().c_str(), unsigned(r)));
  if (arrived) return WSYNC_OK;
  std::vector<std::string> user;
  user.reserve(wire_keys.size());
  for (const auto& k : wire_keys) user.push_back(k.compare(0, 1, w::kKeyPrefix) == 0 ? k.substr(1) : k);
  return fail(WSYNC_ERR_TIMEOUT, "store %s: keys %s did not appear within %" PRId64 " ms", address().c_str(),
              join_keys(user).c_str(), timeout_ms);
}

wsync_status_t TcpStoreClient::set(const std::string& key, const void* data, size_t len) {
  if (data == nullptr && len > 0) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store set of key '%s': NULL data", key.c_str());
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  b.reserve(17 + key.size() + 1 + len);
  w::put_u8(&b, static_cast<uint8_t>(w::Query::SET));
  w::put_string(&b, wire_key(key));
  w::put_bytes(&b, data, len);
  st = send_all(b, op_deadline(), "SET");
  return st == WSYNC_OK ? st : broken(st);
}

wsync_status_t TcpStoreClient::append(const std::string& key, const void* data, size_t len) {
  if (data == nullptr && len > 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "store append to key '%s': NULL data", key.c_str());
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::APPEND));
  w::put_string(&b, wire_key(key));
  w::put_bytes(&b, data, len);
  st = send_all(b, op_deadline(), "APPEND");
  return st == WSYNC_OK ? st : broken(st);
}

wsync_status_t TcpStoreClient::get(const std::string& key, std::vector<uint8_t>* out, int64_t timeout_ms) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store get of key '%s': out is NULL", key.c_str());
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  const std::string wk = wire_key(key);
  st = do_wait({wk}, timeout_ms);
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::GET));
  w::put_string(&b, wk);
  const int64_t d = op_deadline();
  st = send_all(b, d, "GET");
  if (st == WSYNC_OK) st = recv_payload(out, d, "GET");
  return st == WSYNC_OK ? st : broken(st);
}

wsync_status_t TcpStoreClient::add(const std::string& key, int64_t delta, int64_t* out) {
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::ADD));
  w::put_string(&b, wire_key(key));
  w::put_pod<int64_t>(&b, delta);
  const int64_t d = op_deadline();
  int64_t v = 0;
  st = send_all(b, d, "ADD");
  if (st == WSYNC_OK) st = recv_all(&v, sizeof v, d, "ADD");
  if (st != WSYNC_OK) return broken(st);
  if (out != nullptr) *out = v;
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::check(const std::vector<std::string>& keys, bool* ready) {
  if (ready == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store check: ready is NULL");
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::CHECK));
  w::put_pod<uint64_t>(&b, keys.size());
  for (const auto& k : keys) w::put_string(&b, wire_key(k));
  const int64_t d = op_deadline();
  uint8_t r = 0;
  st = send_all(b, d, "CHECK");
  if (st == WSYNC_OK) st = recv_all(&r, 1, d, "CHECK");
  if (st != WSYNC_OK) return broken(st);
  if (r == static_cast<uint8_t>(w::CheckReply::READY)) {
    *ready = true;
  } else if (r == static_cast<uint8_t>(w::CheckReply::NOT_READY)) {
    *ready = false;
  } else {
    return broken(fail(WSYNC_ERR_PROTOCOL, "store %s: CHECK answered %u, neither READY nor NOT_READY",
                       address().c_str(), unsigned(r)));
  }
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::wait(const std::vector<std::string>& keys, int64_t timeout_ms) {
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<std::string> wk;
  wk.reserve(keys.size());
  for (const auto& k : keys) wk.push_back(wire_key(k));
  return do_wait(wk, timeout_ms);
}

wsync_status_t TcpStoreClient::compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                           const std::vector<uint8_t>& desired, std::vector<uint8_t>* current) {
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::COMPARE_SET));
  w::put_string(&b, wire_key(key));
  w::put_bytes(&b, expected.data(), expected.size());
  w::put_bytes(&b, desired.data(), desired.size());
  const int64_t d = op_deadline();
  std::vector<uint8_t> cur;
  st = send_all(b, d, "COMPARE_SET");
  if (st == WSYNC_OK) st = recv_payload(&cur, d, "COMPARE_SET");
  if (st != WSYNC_OK) return broken(st);
  if (current != nullptr) *current = std::move(cur);
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::delete_key(const std::string& key, bool* deleted) {
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::DELETE_KEY));
  w::put_string(&b, wire_key(key));
  const int64_t d = op_deadline();
  int64_t n = 0;
  st = send_all(b, d, "DELETE_KEY");
  if (st == WSYNC_OK) st = recv_all(&n, sizeof n, d, "DELETE_KEY");
  if (st != WSYNC_OK) return broken(st);
  if (deleted != nullptr) *deleted = (n == 1);
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::num_keys(int64_t* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store num_keys: out is NULL");
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::GETNUMKEYS));
  const int64_t d = op_deadline();
  st = send_all(b, d, "GETNUMKEYS");
  if (st == WSYNC_OK) st = recv_all(out, sizeof *out, d, "GETNUMKEYS");
  return st == WSYNC_OK ? st : broken(st);
}

wsync_status_t TcpStoreClient::multi_get(const std::vector<std::string>& keys, std::vector<std::vector<uint8_t>>* out,
                                         int64_t timeout_ms) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store multi_get: out is NULL");
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<std::string> wk;
  wk.reserve(keys.size());
  for (const auto& k : keys) wk.push_back(wire_key(k));
  st = do_wait(wk, timeout_ms);
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::MULTI_GET));
  w::put_pod<uint64_t>(&b, wk.size());
  for (const auto& k : wk) w::put_string(&b, k);
  const int64_t d = op_deadline();
  st = send_all(b, d, "MULTI_GET");
  std::vector<std::vector<uint8_t>> vals(keys.size());
  for (size_t i = 0; st == WSYNC_OK && i < vals.size(); ++i) st = recv_payload(&vals[i], d, "MULTI_GET");
  if (st != WSYNC_OK) return broken(st);
  *out = std::move(vals);
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::multi_set(const std::vector<std::string>& keys,
                                         const std::vector<std::vector<uint8_t>>& values) {
  if (keys.size() != values.size())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "store multi_set: %zu keys but %zu values", keys.size(), values.size());
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::MULTI_SET));
  w::put_pod<int64_t>(&b, static_cast<int64_t>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    w::put_string(&b, wire_key(keys[i]));
    w::put_bytes(&b, values[i].data(), values[i].size());
  }
  st = send_all(b, op_deadline(), "MULTI_SET");
  return st == WSYNC_OK ? st : broken(st);
}

wsync_status_t TcpStoreClient::ping() {
  std::lock_guard<std::mutex> g(mu_);
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  static std::atomic<uint32_t> counter{0x5157u};
  uint32_t nonce = counter.fetch_add(7919u), echo = 0;
  std::vector<uint8_t> b;
  w::put_u8(&b, static_cast<uint8_t>(w::Query::PING));
  w::put_pod<uint32_t>(&b, nonce);
  const int64_t d = op_deadline();
  st = send_all(b, d, "PING");
  if (st == WSYNC_OK) st = recv_all(&echo, sizeof echo, d, "PING");
  if (st != WSYNC_OK) return broken(st);
  if (echo != nonce)
    return broken(fail(WSYNC_ERR_PROTOCOL, "store %s: PING echoed %" PRIu32 " instead of %" PRIu32, address().c_str(),
                       echo, nonce));
  return WSYNC_OK;
}

}  // namespace wsync
