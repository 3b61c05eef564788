// The rest of torch's TCPStore queries, spoken through TcpStoreClient::request: what tests need
// to exercise every query of wsync's store server (and of torch's), while the core only carries
// the three it uses (set, get, add). And, for the store's tests, a raw socket that speaks
// hand-built bytes (a hostile peer, byte by byte) and a capture of the server's warnings. Nothing
// here depends on gtest: a failed read returns a value no test expects (see Raw).
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "common/error.h"
#include "store/store_wire.h"
#include "store/tcp_store_client.h"

namespace wsync {
namespace test_store {

namespace w = store_wire;
using Bytes = std::vector<uint8_t>;

inline ByteWriter start(w::Query q) {
  ByteWriter b;
  b.u8(static_cast<uint8_t>(q));
  return b;
}

inline void put_keys(ByteWriter* b, const std::vector<std::string>& keys) {
  b->u64(keys.size());
  for (const auto& k : keys) b->str64(TcpStoreClient::wire_key(k));
}

inline wsync_status_t ping(TcpStoreClient& c, uint32_t nonce = 0x5157u) {
  ByteWriter b = start(w::Query::PING);
  b.u32(nonce);
  uint32_t echo = 0;
  wsync_status_t st = c.request("PING", b.data(), [&](TcpStoreClient& cl, int64_t d) {
    return cl.recv_exact(&echo, sizeof echo, d, "PING");
  });
  if (st == WSYNC_OK && echo != nonce) return fail(WSYNC_ERR_PROTOCOL, "PING echoed %u instead of %u", echo, nonce);
  return st;
}

inline wsync_status_t check(TcpStoreClient& c, const std::vector<std::string>& keys, bool* ready) {
  ByteWriter b = start(w::Query::CHECK);
  put_keys(&b, keys);
  uint8_t r = 0;
  wsync_status_t st = c.request("CHECK", b.data(), [&](TcpStoreClient& cl, int64_t d) { return cl.recv_exact(&r, 1, d, "CHECK"); });
  if (st != WSYNC_OK) return st;
  if (r > 1) return fail(WSYNC_ERR_PROTOCOL, "CHECK answered %u", unsigned(r));
  *ready = r == static_cast<uint8_t>(w::CheckReply::READY);
  return WSYNC_OK;
}

inline wsync_status_t wait(TcpStoreClient& c, const std::vector<std::string>& keys, int64_t timeout_ms) {
  std::vector<std::string> wk;
  for (const auto& k : keys) wk.push_back(TcpStoreClient::wire_key(k));
  return c.wait(wk, timeout_ms);
}

inline wsync_status_t compare_set(TcpStoreClient& c, const std::string& key, const Bytes& expected, const Bytes& desired,
                                  Bytes* current) {
  ByteWriter b = start(w::Query::COMPARE_SET);
  b.str64(TcpStoreClient::wire_key(key));
  b.blob64(expected.data(), expected.size());
  b.blob64(desired.data(), desired.size());
  return c.request("COMPARE_SET", b.data(),
                   [&](TcpStoreClient& cl, int64_t d) { return cl.recv_payload(current, d, "COMPARE_SET"); });
}

inline wsync_status_t delete_key(TcpStoreClient& c, const std::string& key, bool* deleted) {
  ByteWriter b = start(w::Query::DELETE_KEY);
  b.str64(TcpStoreClient::wire_key(key));
  int64_t n = 0;
  wsync_status_t st = c.request("DELETE_KEY", b.data(), [&](TcpStoreClient& cl, int64_t d) {
    return cl.recv_exact(&n, sizeof n, d, "DELETE_KEY");
  });
  *deleted = n == 1;
  return st;
}

inline wsync_status_t num_keys(TcpStoreClient& c, int64_t* out) {
  ByteWriter b = start(w::Query::GETNUMKEYS);
  return c.request("GETNUMKEYS", b.data(), [&](TcpStoreClient& cl, int64_t d) {
    return cl.recv_exact(out, sizeof *out, d, "GETNUMKEYS");
  });
}

inline wsync_status_t multi_get(TcpStoreClient& c, const std::vector<std::string>& keys, std::vector<Bytes>* out,
                                int64_t timeout_ms) {
  wsync_status_t st = wait(c, keys, timeout_ms);
  if (st != WSYNC_OK) return st;
  ByteWriter b = start(w::Query::MULTI_GET);
  put_keys(&b, keys);
  out->assign(keys.size(), Bytes());
  return c.request("MULTI_GET", b.data(), [&](TcpStoreClient& cl, int64_t d) {
    for (auto& v : *out) {
      wsync_status_t s = cl.recv_payload(&v, d, "MULTI_GET");
      if (s != WSYNC_OK) return s;
    }
    return WSYNC_OK;
  });
}

inline wsync_status_t multi_set(TcpStoreClient& c, const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "multi_set: %zu keys but %zu values", keys.size(), values.size());
  ByteWriter b = start(w::Query::MULTI_SET);
  b.i64(static_cast<int64_t>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    b.str64(TcpStoreClient::wire_key(keys[i]));
    b.blob64(values[i].data(), values[i].size());
  }
  return c.request("MULTI_SET", b.data(), nullptr);
}

inline wsync_status_t append(TcpStoreClient& c, const std::string& key, const void* data, size_t len) {
  ByteWriter b = start(w::Query::APPEND);
  b.str64(TcpStoreClient::wire_key(key));
  b.blob64(data, len);
  return c.request("APPEND", b.data(), nullptr);
}

// The value stored under `wire_key` exactly as sent on the wire (no "/" added): false when the key
// does not exist. For looking at what another client (torch) stored.
inline bool lookup_wire(TcpStoreClient& c, const std::string& wire_key, Bytes* v) {
  ByteWriter chk = start(w::Query::CHECK);
  chk.u64(1);
  chk.str64(wire_key);
  uint8_t r = 1;
  if (c.request("CHECK", chk.data(), [&](TcpStoreClient& cl, int64_t d) { return cl.recv_exact(&r, 1, d, "CHECK"); }) !=
          WSYNC_OK ||
      r != static_cast<uint8_t>(w::CheckReply::READY))
    return false;
  ByteWriter get = start(w::Query::GET);
  get.str64(wire_key);
  return c.request("GET", get.data(), [&](TcpStoreClient& cl, int64_t d) { return cl.recv_payload(v, d, "GET"); }) ==
         WSYNC_OK;
}

// ---- raw bytes ------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;
inline int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}
inline Bytes B(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline std::string S(const Bytes& b) { return std::string(b.begin(), b.end()); }

// Query numbers written out literally (torch's TCPStoreBackend.hpp; AUTH is wsync's), so tests
// that use them check the wire independently of store_wire.h.
enum : uint8_t {
  VALIDATE = 0, SET = 1, COMPARE_SET = 2, GET = 3, ADD = 4, CHECK = 5, WAIT = 6, GETNUMKEYS = 7,
  DELETE_KEY = 8, APPEND = 9, MULTI_GET = 10, MULTI_SET = 11, CANCEL_WAIT = 12, PING = 13,
  QUEUE_PUSH = 14, QUEUE_POP = 15, QUEUE_LEN = 16, LIST = 17, BARRIER = 18, AUTH = 0xF0,
};
constexpr uint32_t kMagic = 0x3C85F7CEu;

// Little-endian request builder (torch writes native order; these tests run on little endian).
struct Req {
  Bytes b;
  explicit Req(uint8_t q) { b.push_back(q); }
  Req& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
    return *this;
  }
  Req& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
    return *this;
  }
  Req& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Req& raw(const void* p, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return *this;
  }
};

// A raw blocking socket to 127.0.0.1:port speaking hand-built bytes. The readers return values no
// test expects when the bytes do not come in time: u8 0xFF, u32 0xFFFFFFFF, i64 INT64_MIN, and
// payload the marker kNoReply.
class Raw {
 public:
  static inline const std::string kNoReply = "<no reply>";

  // rcvbuf > 0: a small receive buffer (a client that reads nothing fills it soon).
  explicit Raw(uint16_t port, bool handshake = true, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    int one = 1;  // like torch's client: no Nagle delay between small requests
    if (ok_) setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (ok_ && handshake) send(Req(VALIDATE).u32(kMagic).b);
  }
  ~Raw() {
    if (fd_ >= 0) ::close(fd_);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  bool ok() const { return ok_; }
  int fd() const { return fd_; }
  // False when the peer closed or reset the connection before all bytes were sent.
  bool send(const Bytes& b) {
    size_t off = 0;
    while (off < b.size()) {
      ssize_t n = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }
  // Exactly n bytes within timeout_ms, or an empty vector.
  Bytes recv(size_t n, int timeout_ms = 3000) {
    Bytes out(n);
    size_t off = 0;
    auto t0 = Clock::now();
    while (off < n) {
      int left = timeout_ms - int(ms_since(t0));
      if (left <= 0) return {};
      pollfd p = {fd_, POLLIN, 0};
      if (::poll(&p, 1, left) <= 0) return {};
      ssize_t r = ::recv(fd_, out.data() + off, n - off, 0);
      if (r <= 0) return {};
      off += size_t(r);
    }
    return out;
  }
  uint8_t u8() {
    Bytes b = recv(1);
    return b.size() == 1 ? b[0] : 0xFF;
  }
  uint32_t u32() {
    Bytes b = recv(4);
    uint32_t v = 0xFFFFFFFFu;
    if (b.size() == 4) std::memcpy(&v, b.data(), 4);
    return v;
  }
  int64_t i64() {
    Bytes b = recv(8);
    int64_t v = INT64_MIN;
    if (b.size() == 8) std::memcpy(&v, b.data(), 8);
    return v;
  }
  Bytes payload() {
    int64_t n = i64();
    if (n < 0 || n > (int64_t(1) << 30)) return B(kNoReply);
    if (n == 0) return Bytes();
    Bytes b = recv(size_t(n));
    return b.size() == size_t(n) ? b : B(kNoReply);
  }
  // True when nothing arrives for timeout_ms.
  bool silent(int timeout_ms) {
    pollfd p = {fd_, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) == 0;
  }
  // True when the server closes the connection within timeout_ms; *got (when given) receives
  // every byte that came before the close.
  bool closed_by_peer(int timeout_ms = 3000, Bytes* got = nullptr) {
    auto t0 = Clock::now();
    char buf[4096];
    for (;;) {
      int left = timeout_ms - int(ms_since(t0));
      if (left <= 0) return false;
      pollfd p = {fd_, POLLIN, 0};
      if (::poll(&p, 1, left) <= 0) return false;
      ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
      if (r > 0 && got != nullptr) got->insert(got->end(), buf, buf + r);
    }
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

// Captures the warnings wsync logs (the server logs from its own thread) while it lives.
struct LogCapture {
  static inline std::mutex mu;
  static inline std::vector<std::string> lines;
  LogCapture() {
    std::lock_guard<std::mutex> g(mu);
    lines.clear();
    wsync_set_log_callback(&LogCapture::sink, nullptr, WSYNC_LOG_WARN);
  }
  ~LogCapture() { wsync_set_log_callback(nullptr, nullptr, WSYNC_LOG_WARN); }
  static void sink(void*, int32_t, const char* m) {
    std::lock_guard<std::mutex> g(mu);
    lines.push_back(m);
  }
  // The first captured line containing every needle, waiting up to a second for it; "" if none.
  std::string find(const std::vector<std::string>& needles) {
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard<std::mutex> g(mu);
        for (const auto& l : lines) {
          bool all = true;
          for (const auto& n : needles) all = all && l.find(n) != std::string::npos;
          if (all) return l;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::string();
  }
  bool has(const std::string& needle) { return !find({needle}).empty(); }
  size_t count(const std::string& needle) {
    std::lock_guard<std::mutex> g(mu);
    size_t n = 0;
    for (const auto& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
};

}  // namespace test_store
}  // namespace wsync
