#include "store/tcp_store_client.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <thread>

#include "common/auth.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/socket.h"
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
// Times a store may close the connection on AUTH before it is taken for one without the secret.
constexpr int kAuthClosedTries = 3;
// Deadlines are computed as now + timeout; this keeps that sum far from overflowing.
constexpr int64_t kMaxTimeoutMs = int64_t(1) << 40;

std::string join_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i == 8) {
      s += ", ... (" + std::to_string(keys.size()) + " keys)";
      break;
    }
    // Messages name user keys: the wire prefix is the client's business.
    const std::string& k = keys[i];
    s += (i ? ", '" : "'") + (k.compare(0, 1, w::kKeyPrefix) == 0 ? k.substr(1) : k) + "'";
  }
  return s;
}

std::vector<uint8_t> query(w::Query q) { return std::vector<uint8_t>(1, static_cast<uint8_t>(q)); }

}  // namespace

std::string TcpStoreClient::wire_key(const std::string& key) { return std::string(w::kKeyPrefix) + key; }

wsync_status_t TcpStoreClient::connect(const std::string& host, uint16_t port, int64_t timeout_ms,
                                       std::unique_ptr<TcpStoreClient>* out) {
  return connect(host, port, timeout_ms, std::string(), out);
}

wsync_status_t TcpStoreClient::connect(const std::string& host, uint16_t port, int64_t timeout_ms,
                                       const std::string& secret, std::unique_ptr<TcpStoreClient>* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "TcpStoreClient::connect: out is NULL");
  if (host.empty()) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store client: empty host for port %u", unsigned(port));
  timeout_ms = std::min<int64_t>(timeout_ms < 0 ? kDefaultTimeoutMs : timeout_ms, kMaxTimeoutMs);
  const std::string where = format_host_port(host, port);
  const int64_t deadline = deadline_after(timeout_ms);
  std::string last = "not tried";
  int auth_closed = 0;
  for (int attempt = 1;; ++attempt) {
    int fd = -1;
    if (tcp_connect(host, port, deadline, &fd, &last) == WSYNC_OK) {
      std::unique_ptr<TcpStoreClient> c(new TcpStoreClient());
      c->fd_ = fd;
      c->host_ = host;
      c->port_ = port;
      c->op_timeout_ms_ = std::max<int64_t>(timeout_ms, kDefaultTimeoutMs);
      wsync_status_t st = c->handshake(deadline);
      if (st == WSYNC_OK && !secret.empty()) {
        st = c->authenticate(secret, deadline);
        // A store closing the connection on AUTH is one without the secret (or not wsync's), or
        // one that closed a connection still in its handshake to make room (a flood of idle
        // connections): try again a few times before calling it the former.
        if (st == WSYNC_ERR_PEER_FAILED && ++auth_closed >= kAuthClosedTries)
          return fail(WSYNC_ERR_REJECTED, "the store at %s does not know this group's secret: %s, %d times (a store "
                      "started without a secret, or not wsync's)", where.c_str(), last_error().c_str(),
                      kAuthClosedTries);
      }
      if (st == WSYNC_OK) {
        WSYNC_LOGD("store client connected to %s after %d attempt(s)%s", where.c_str(), attempt,
                   secret.empty() ? "" : ", group secret proved both ways");
        *out = std::move(c);
        return WSYNC_OK;
      }
      if (st == WSYNC_ERR_PROTOCOL || st == WSYNC_ERR_REJECTED) return st;
      if (st == WSYNC_ERR_TIMEOUT)
        return fail(WSYNC_ERR_TIMEOUT, "store at %s accepted the connection but did not answer the VALIDATE/PING%s "
                    "handshake within %" PRId64 " ms (is it a torch TCPStore-compatible server?)", where.c_str(),
                    secret.empty() ? "" : "/AUTH", timeout_ms);
      last = "handshake failed: " + last_error();
    }
    if (now_ms() >= deadline)
      return fail(WSYNC_ERR_TIMEOUT, "could not connect to the store at %s within %" PRId64 " ms (%d attempts): %s",
                  where.c_str(), timeout_ms, attempt, last.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(attempt < 3 ? 50 : 100, remaining_ms(deadline))));
  }
}

// VALIDATE + magic (no reply), then PING + nonce (echoed): exactly torch's handshake.
wsync_status_t TcpStoreClient::handshake(int64_t deadline) {
  static std::atomic<uint32_t> counter{0};
  const uint32_t nonce = static_cast<uint32_t>(getpid()) * 2654435761u + counter.fetch_add(1) + 1;
  ByteWriter b;
  b.u8(static_cast<uint8_t>(w::Query::VALIDATE));
  b.u32(w::kValidationMagic);
  b.u8(static_cast<uint8_t>(w::Query::PING));
  b.u32(nonce);
  uint32_t echo = 0;
  wsync_status_t st = send_all(b.data(), deadline, "VALIDATE/PING handshake");
  if (st == WSYNC_OK) st = recv_exact(&echo, sizeof echo, deadline, "PING handshake");
  if (st == WSYNC_OK && echo != nonce)
    return fail(WSYNC_ERR_PROTOCOL, "store at %s answered the PING handshake with %" PRIu32 " instead of %" PRIu32
                "; it is not a torch TCPStore-compatible server", address().c_str(), echo, nonce);
  return st;
}

// wsync's AUTH (store_wire.h). The client proves the secret first and then judges the store's
// proof: the common misconfiguration (the two sides hold different secrets) is reported as what it
// is, the store refusing our proof, and a store that accepts our proof without proving the secret
// itself is an impostor (or a store without a secret that answers anyway): refused, nothing read.
wsync_status_t TcpStoreClient::authenticate(const std::string& secret, int64_t deadline) {
  const std::string where = address();
  const std::vector<uint8_t> cn = random_bytes(w::kAuthBytes);
  ByteWriter hello;
  hello.u8(static_cast<uint8_t>(w::Query::AUTH));
  hello.raw(cn.data(), cn.size());
  uint8_t sn[w::kAuthBytes];
  wsync_status_t st = send_all(hello.data(), deadline, "AUTH");
  if (st == WSYNC_OK) st = recv_exact(sn, sizeof sn, deadline, "AUTH");
  if (st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_IO)
    return fail(WSYNC_ERR_PEER_FAILED, "it closed the connection when asked to prove the group secret");
  if (st != WSYNC_OK) return st;
  const Mac proof = Hmac(secret)
                        .field(std::string(w::kAuthClientLabel))
                        .field(cn.data(), cn.size())
                        .field(sn, w::kAuthBytes)
                        .finish();
  ByteWriter b;
  b.u8(static_cast<uint8_t>(w::Query::AUTH));
  b.raw(proof.data(), proof.size());
  uint8_t verdict = w::kAuthRefused;
  st = send_all(b.data(), deadline, "AUTH");
  if (st == WSYNC_OK) st = recv_exact(&verdict, 1, deadline, "AUTH");
  if (st == WSYNC_ERR_TIMEOUT) return st;
  if (st != WSYNC_OK)
    return fail(WSYNC_ERR_PEER_FAILED, "it closed the connection before answering this process's proof");
  if (verdict == w::kAuthRefused)
    return fail(WSYNC_ERR_REJECTED, "the store at %s refused this process's group secret (set the same secret as the "
                "sender: option secret or WSYNC_GROUP_SECRET)", where.c_str());
  if (verdict != w::kAuthAccepted)
    return fail(WSYNC_ERR_PROTOCOL, "the store at %s answered AUTH with %u", where.c_str(), unsigned(verdict));
  uint8_t theirs[w::kAuthBytes];
  if ((st = recv_exact(theirs, sizeof theirs, deadline, "AUTH")) == WSYNC_ERR_TIMEOUT) return st;
  const Mac server_expect = Hmac(secret)
                                .field(std::string(w::kAuthServerLabel))
                                .field(cn.data(), cn.size())
                                .field(sn, w::kAuthBytes)
                                .finish();
  if (st != WSYNC_OK || !equal_ct(server_expect.data(), theirs, w::kAuthBytes))
    return fail(WSYNC_ERR_REJECTED, "the store at %s does not know this group's secret: its proof does not match "
                "(it is not this group's store, or it runs with another secret); nothing was read from it",
                where.c_str());
  return WSYNC_OK;
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TcpStoreClient::address() const { return format_host_port(host_, port_); }

int64_t TcpStoreClient::op_deadline() const { return deadline_after(op_timeout_ms_); }

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
      if (now_ms() >= deadline)
        return fail(WSYNC_ERR_TIMEOUT, "store %s: timed out sending %s (the server does not read)", address().c_str(),
                    what);
      pollfd p = {fd_, POLLOUT, 0};
      ::poll(&p, 1, remaining_ms(deadline));
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
      return fail(WSYNC_ERR_PEER_FAILED, "store server %s closed the connection while sending %s: %s",
                  address().c_str(), what, strerror(errno));
    return fail(WSYNC_ERR_IO, "store %s: sending %s failed: %s", address().c_str(), what, strerror(errno));
  }
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::recv_exact(void* buf, size_t len, int64_t deadline, const char* what) {
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
      if (now_ms() >= deadline) return fail(WSYNC_ERR_TIMEOUT, "store %s: no reply to %s in time", address().c_str(), what);
      pollfd pf = {fd_, POLLIN, 0};
      ::poll(&pf, 1, remaining_ms(deadline));
      continue;
    }
    if (errno == ECONNRESET || errno == EPIPE || errno == ENOTCONN)
      return fail(WSYNC_ERR_PEER_FAILED, "store server %s reset the connection while we waited for the reply to %s",
                  address().c_str(), what);
    return fail(WSYNC_ERR_IO, "store %s: reading the reply to %s failed: %s", address().c_str(), what, strerror(errno));
  }
  return WSYNC_OK;
}

wsync_status_t TcpStoreClient::recv_payload(std::vector<uint8_t>* out, int64_t deadline, const char* what) {
  uint64_t len = 0;
  wsync_status_t st = recv_exact(&len, sizeof len, deadline, what);
  if (st != WSYNC_OK) return st;
  if (len > kMaxReplyPayload)
    return fail(WSYNC_ERR_PROTOCOL, "store %s: the reply to %s announces %" PRIu64 " bytes; the stream is corrupt",
                address().c_str(), what, len);
  out->resize(static_cast<size_t>(len));
  return len == 0 ? WSYNC_OK : recv_exact(out->data(), out->size(), deadline, what);
}

// Under the lock: one request and its reply; any failure breaks the connection.
wsync_status_t TcpStoreClient::exchange(const char* what, const std::vector<uint8_t>& bytes, const ReplyFn& reply) {
  wsync_status_t st = usable();
  if (st != WSYNC_OK) return st;
  const int64_t d = op_deadline();
  st = send_all(bytes, d, what);
  if (st == WSYNC_OK && reply) st = reply(*this, d);
  return st == WSYNC_OK ? st : broken(st);
}

wsync_status_t TcpStoreClient::request(const char* what, const std::vector<uint8_t>& bytes, const ReplyFn& reply) {
  std::lock_guard<std::mutex> g(mu_);
  return exchange(what, bytes, reply);
}

// Timed out: cancel like torch does. The server answers WAIT_CANCELED, possibly preceded by a
// STOP_WAITING that crossed our CANCEL_WAIT on the wire (*arrived: the keys came after all).
wsync_status_t TcpStoreClient::cancel_wait(bool* arrived) {
  uint8_t r = 0;
  *arrived = false;
  return exchange("CANCEL_WAIT", query(w::Query::CANCEL_WAIT), [&](TcpStoreClient& c, int64_t d) {
    wsync_status_t st = c.recv_exact(&r, 1, d, "CANCEL_WAIT");
    if (st == WSYNC_OK && r == static_cast<uint8_t>(w::WaitReply::STOP_WAITING)) {
      *arrived = true;
      st = c.recv_exact(&r, 1, d, "CANCEL_WAIT");
    }
    if (st == WSYNC_OK && r != static_cast<uint8_t>(w::WaitReply::WAIT_CANCELED))
      st = fail(WSYNC_ERR_PROTOCOL, "store %s: CANCEL_WAIT answered %u instead of WAIT_CANCELED", c.address().c_str(),
                unsigned(r));
    return st;
  });
}

wsync_status_t TcpStoreClient::do_wait(const std::vector<std::string>& wire_keys, int64_t timeout_ms) {
  timeout_ms = std::min<int64_t>(timeout_ms < 0 ? op_timeout_ms_ : timeout_ms, kMaxTimeoutMs);
  ByteWriter b;
  b.u8(static_cast<uint8_t>(w::Query::WAIT));
  b.u64(wire_keys.size());
  for (const auto& k : wire_keys) b.str64(k);
  wsync_status_t st = usable();
  if (st == WSYNC_OK) st = send_all(b.data(), op_deadline(), "WAIT");
  if (st != WSYNC_OK) return broken(st);
  uint8_t r = 0;
  st = recv_exact(&r, 1, deadline_after(timeout_ms), "WAIT");
  if (st == WSYNC_OK && r != static_cast<uint8_t>(w::WaitReply::STOP_WAITING))
    st = fail(WSYNC_ERR_PROTOCOL, "store %s: WAIT answered %u instead of STOP_WAITING", address().c_str(), unsigned(r));
  if (st != WSYNC_ERR_TIMEOUT) return st == WSYNC_OK ? st : broken(st);
  bool arrived = false;
  if ((st = cancel_wait(&arrived)) != WSYNC_OK) return st;
  if (arrived) return WSYNC_OK;
  return fail(WSYNC_ERR_TIMEOUT, "store %s: keys %s did not appear within %" PRId64 " ms", address().c_str(),
              join_keys(wire_keys).c_str(), timeout_ms);
}

wsync_status_t TcpStoreClient::wait(const std::vector<std::string>& wire_keys, int64_t timeout_ms) {
  std::lock_guard<std::mutex> g(mu_);
  return do_wait(wire_keys, timeout_ms);
}

wsync_status_t TcpStoreClient::set(const std::string& key, const void* data, size_t len) {
  if (data == nullptr && len > 0) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store set of key '%s': NULL data", key.c_str());
  ByteWriter b;
  b.reserve(17 + key.size() + 1 + len);
  b.u8(static_cast<uint8_t>(w::Query::SET));
  b.str64(wire_key(key));
  b.blob64(data, len);
  return request("SET", b.data(), nullptr);
}

wsync_status_t TcpStoreClient::get(const std::string& key, std::vector<uint8_t>* out, int64_t timeout_ms) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store get of key '%s': out is NULL", key.c_str());
  std::lock_guard<std::mutex> g(mu_);
  const std::string wk = wire_key(key);
  wsync_status_t st = do_wait({wk}, timeout_ms);
  if (st != WSYNC_OK) return st;
  ByteWriter b;
  b.u8(static_cast<uint8_t>(w::Query::GET));
  b.str64(wk);
  return exchange("GET", b.data(), [out](TcpStoreClient& c, int64_t d) { return c.recv_payload(out, d, "GET"); });
}

wsync_status_t TcpStoreClient::add(const std::string& key, int64_t delta, int64_t* out) {
  ByteWriter b;
  b.u8(static_cast<uint8_t>(w::Query::ADD));
  b.str64(wire_key(key));
  b.i64(delta);
  int64_t v = 0;
  wsync_status_t st = request("ADD", b.data(), [&v](TcpStoreClient& c, int64_t d) { return c.recv_exact(&v, sizeof v, d, "ADD"); });
  if (st == WSYNC_OK && out != nullptr) *out = v;
  return st;
}

}  // namespace wsync
