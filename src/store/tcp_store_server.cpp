#include "store/tcp_store_server.h"

#include <arpa/inet.h>
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
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "store/host_port.h"
#include "store/store_wire.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

namespace wsync {

namespace w = store_wire;

namespace {

// A whole request (all its fields) must fit in this many bytes; MULTI_SET is the only request
// that can approach it. Replies larger than kMaxReplyBytes (a huge MULTI_GET) close the client.
constexpr size_t kMaxRequestBytes = 256u * 1024u * 1024u;
constexpr size_t kMaxReplyBytes = 512u * 1024u * 1024u;
// Stop reading a client's requests while this much of its replies is still unsent.
constexpr size_t kOutHighWater = 64u * 1024u * 1024u;
// Bytes read from one client per loop turn (fairness).
constexpr size_t kReadChunk = 256u * 1024u;
constexpr size_t kReadPerTurn = 4u * kReadChunk;
constexpr size_t kMaxConnections = 4096;

bool set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl < 0) return false;
  if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return false;
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  return true;
}

std::string sockaddr_string(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "unknown-peer";
}

std::string hex_prefix(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n && i < 8; ++i) {
    if (i) s += ' ';
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

// torch parses stored counters with std::stoll: optional leading space and sign, then digits;
// trailing text is ignored. Returns false when there are no digits or the value overflows.
bool parse_counter(const std::vector<uint8_t>& v, int64_t* out) {
  size_t i = 0, n = v.size();
  while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r' || v[i] == '\f' || v[i] == '\v')) ++i;
  bool neg = false;
  if (i < n && (v[i] == '+' || v[i] == '-')) neg = (v[i++] == '-');
  if (i >= n || v[i] < '0' || v[i] > '9') return false;
  uint64_t mag = 0;
  const uint64_t limit = neg ? (uint64_t(INT64_MAX) + 1u) : uint64_t(INT64_MAX);
  for (; i < n && v[i] >= '0' && v[i] <= '9'; ++i) {
    uint64_t dgt = uint64_t(v[i] - '0');
    if (mag > (limit - dgt) / 10u) return false;
    mag = mag * 10u + dgt;
  }
  *out = neg ? static_cast<int64_t>(0u - mag) : static_cast<int64_t>(mag);
  return true;
}

int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

std::vector<uint8_t> decimal(int64_t v) {
  std::string s = std::to_string(v);
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace

struct TcpStoreServer::Impl {
  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;
    bool validated = false;
    bool dead = false;
    bool eof = false;  // the peer closed its side; finish the buffered requests, then close
    std::vector<uint8_t> in;
    size_t in_off = 0;
    size_t need = 0;  // don't re-parse until in.size() - in_off reaches this
    std::vector<uint8_t> out;
    size_t out_off = 0;
    std::unordered_set<std::string> waiting;  // keys its pending WAIT still needs
    size_t out_pending() const { return out.size() - out_off; }
  };

  struct Request {
    uint8_t type = 0;
    std::vector<std::string> keys;
    std::vector<std::vector<uint8_t>> values;
    uint32_t u32 = 0;
    int64_t i64 = 0;
  };

  std::string host;
  uint16_t port = 0;
  int listen_fd = -1;
  int wake_rd = -1, wake_wr = -1;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> nconn{0};
  bool stopped = false;  // guarded by stop_mu
  std::mutex stop_mu;

  mutable std::mutex mu;  // everything below
  std::unordered_map<std::string, std::vector<uint8_t>> kv;
  std::unordered_map<std::string, std::deque<std::vector<uint8_t>>> queues;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;  // key -> connection ids
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_id = 1;
  // Out of file descriptors: stop polling the listening socket for a moment instead of spinning.
  std::chrono::steady_clock::time_point accept_paused_until{};

  ~Impl() {
    if (listen_fd >= 0) ::close(listen_fd);
    if (wake_rd >= 0) ::close(wake_rd);
    if (wake_wr >= 0) ::close(wake_wr);
  }

  void wake() {
    if (wake_wr < 0) return;
    char c = 1;
    ssize_t r = ::write(wake_wr, &c, 1);
    (void)r;  // EAGAIN: a wake-up is already pending
  }

  // ---- data operations (mu held) ----------------------------------------------------------

  bool key_ready(const std::string& k) const {
    if (kv.count(k)) return true;
    auto q = queues.find(k);
    return q != queues.end() && !q->second.empty();
  }

  static void reply_u8(Conn* c, uint8_t v) { w::put_u8(&c->out, v); }

  void wake_waiters(const std::string& key) {
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    std::vector<uint64_t> ids = std::move(it->second);
    waiters.erase(it);
    bool any = false;
    for (uint64_t id : ids) {
      auto c = conns.find(id);
      if (c == conns.end()) continue;
      Conn* conn = c->second.get();
      if (conn->waiting.erase(key) && conn->waiting.empty()) {
        reply_u8(conn, static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
        any = true;
      }
    }
    if (any) wake();  // flush from the loop (needed when called from an in-process accessor)
  }

  // Queue pushes release one waiter, like torch's libuv backend.
  void wake_one_waiter(const std::string& key) {
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    auto& ids = it->second;
    while (!ids.empty()) {
      uint64_t id = ids.front();
      ids.erase(ids.begin());
      auto c = conns.find(id);
      if (c == conns.end() || !c->second->waiting.erase(key)) continue;
      if (c->second->waiting.empty()) {
        reply_u8(c->second.get(), static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
        wake();
      }
      break;
    }
    if (ids.empty()) waiters.erase(it);
  }

  void clear_wait(Conn* c) {
    for (const std::string& k : c->waiting) {
      auto it = waiters.find(k);
      if (it == waiters.end()) continue;
      auto& v = it->second;
      v.erase(std::remove(v.begin(), v.end(), c->id), v.end());
      if (v.empty()) waiters.erase(it);
    }
    c->waiting.clear();
  }

  void do_set(const std::string& key, std::vector<uint8_t> value) {
    kv[key] = std::move(value);
    wake_waiters(key);
  }

  // Returns false when the stored value is not an integer (torch's stoll would throw).
  bool do_add(const std::string& key, int64_t delta, int64_t* result) {
    auto it = kv.find(key);
    int64_t v = delta;
    if (it != kv.end()) {
      int64_t old = 0;
      if (!parse_counter(it->second, &old)) return false;
      v = wrapping_add(old, delta);
    }
    kv[key] = decimal(v);
    *result = v;
    wake_waiters(key);
    return true;
  }

  // ---- connections (mu held) --------------------------------------------------------------

  // Close one client; a non-empty `why` is logged as a warning naming the peer.
  void close_conn(Conn* c, const std::string& why = std::string()) {
    if (c->dead) return;
    if (!why.empty())
      WSYNC_LOGW("store server %s: closing connection from %s: %s", format_host_port(host, port).c_str(),
                 c->peer.c_str(), why.c_str());
    c->dead = true;
    clear_wait(c);
    if (c->fd >= 0) ::close(c->fd);
    c->fd = -1;
  }

  void accept_all() {
    for (int i = 0; i < 64; ++i) {
      sockaddr_storage ss;
      socklen_t len = sizeof ss;
      int fd = ::accept(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          accept_paused_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
          WSYNC_LOGW("store server %s: accept failed: %s", format_host_port(host, port).c_str(), strerror(errno));
        return;
      }
      std::string peer = sockaddr_string(reinterpret_cast<sockaddr*>(&ss));
      if (conns.size() >= kMaxConnections) {
        WSYNC_LOGW("store server %s: refusing client %s: already %zu connections",
                   format_host_port(host, port).c_str(), peer.c_str(), conns.size());
        ::close(fd);
        continue;
      }
      if (!set_nonblocking(fd)) {
        ::close(fd);
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
      setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
      auto c = std::make_unique<Conn>();
      c->id = next_id++;
      c->fd = fd;
      c->peer = peer;
      WSYNC_LOGD("store server %s: client %s connected", format_host_port(host, port).c_str(), peer.c_str());
      conns.emplace(c->id, std::move(c));
      nconn.store(conns.size());
    }
  }

  void read_conn(Conn* c) {
    size_t total = 0;
    while (total < kReadPerTurn) {
      size_t want = kReadChunk;
      size_t avail = c->in.size() - c->in_off;
      if (c->need > avail) want = std::max(want, std::min(c->need - avail, kReadPerTurn - total));
      size_t old = c->in.size();
      c->in.resize(old + want);
      ssize_t n = ::recv(c->fd, c->in.data() + old, want, 0);
      if (n <= 0) {
        c->in.resize(old);
        if (n == 0) {
          WSYNC_LOGD("store server: client %s disconnected", c->peer.c_str());
          c->eof = true;
          return;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        close_conn(c, std::string("read failed: ") + strerror(errno));
        return;
      }
      c->in.resize(old + static_cast<size_t>(n));
      total += static_cast<size_t>(n);
      if (static_cast<size_t>(n) < want) return;
    }
  }

  void flush_conn(Conn* c) {
    while (c->out_pending() > 0) {
      ssize_t n = ::send(c->fd, c->out.data() + c->out_off, c->out_pending(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EPIPE || errno == ECONNRESET) {
          WSYNC_LOGD("store server: client %s went away with replies unsent", c->peer.c_str());
          close_conn(c);
        } else {
          close_conn(c, std::string("write failed: ") + strerror(errno));
        }
        return;
      }
      c->out_off += static_cast<size_t>(n);
    }
    if (c->out_off == c->out.size()) {
      c->out.clear();
      c->out_off = 0;
      if (c->out.capacity() > 4 * kReadChunk) c->out.shrink_to_fit();
    } else if (c->out_off > (1u << 20) && c->out_off * 2 > c->out.size()) {
      c->out.erase(c->out.begin(), c->out.begin() + static_cast<std::ptrdiff_t>(c->out_off));
      c->out_off = 0;
    }
  }

  // Parse one whole request from r (no side effects). Returns false with r's state NEED_MORE
  // or BAD, or with *bad set for errors found after the bytes (unknown query type).
  static bool parse(w::Reader& r, Request* q, std::string* bad) {
    if (!r.u8(&q->type)) return false;
    const w::Query t = static_cast<w::Query>(q->type);
    std::string k;
    std::vector<uint8_t> v;
    uint64_t n = 0;
    switch (t) {
      case w::Query::VALIDATE:
      case w::Query::PING:
        return r.u32(&q->u32);
      case w::Query::SET:
      case w::Query::APPEND:
      case w::Query::QUEUE_PUSH:
        if (!r.string(&k, w::kMaxKeyLen, "key") || !r.bytes(&v, w::kMaxValueLen, "value")) return false;
        q->keys.push_back(std::move(k));
        q->values.push_back(std::move(v));
        return true;
      case w::Query::COMPARE_SET: {
        std::vector<uint8_t> v2;
        if (!r.string(&k, w::kMaxKeyLen, "key") || !r.bytes(&v, w::kMaxValueLen, "expected value") ||
            !r.bytes(&v2, w::kMaxValueLen, "desired value"))
          return false;
        q->keys.push_back(std::move(k));
        q->values.push_back(std::move(v));
        q->values.push_back(std::move(v2));
        return true;
      }
      case w::Query::GET:
      case w::Query::DELETE_KEY:
      case w::Query::QUEUE_POP:
      case w::Query::QUEUE_LEN:
        if (!r.string(&k, w::kMaxKeyLen, "key")) return false;
        q->keys.push_back(std::move(k));
        return true;
      case w::Query::ADD:
        if (!r.string(&k, w::kMaxKeyLen, "key") || !r.i64(&q->i64)) return false;
        q->keys.push_back(std::move(k));
        return true;
      case w::Query::CHECK:
      case w::Query::WAIT:
      case w::Query::MULTI_GET:
        if (!r.count(&n, "key")) return false;
        q->keys.reserve(static_cast<size_t>(n));
        for (uint64_t i = 0; i < n; ++i) {
          if (!r.string(&k, w::kMaxKeyLen, "key")) return false;
          q->keys.push_back(std::move(k));
        }
        return true;
      case w::Query::MULTI_SET:
        if (!r.count(&n, "key")) return false;
        for (uint64_t i = 0; i < n; ++i) {
          if (!r.string(&k, w::kMaxKeyLen, "key") || !r.bytes(&v, w::kMaxValueLen, "value")) return false;
          q->keys.push_back(std::move(k));
          q->values.push_back(std::move(v));
          if (r.pos() > kMaxRequestBytes) {
            *bad = "MULTI_SET request exceeds " + std::to_string(kMaxRequestBytes) + " bytes";
            return false;
          }
        }
        return true;
      case w::Query::GETNUMKEYS:
      case w::Query::CANCEL_WAIT:
      case w::Query::LIST:
        return true;
    }
    *bad = "unknown query type " + std::to_string(q->type);
    return false;
  }

  // Execute a parsed request. Returns "" or the reason to close the connection.
  std::string execute(Conn* c, Request& q) {
    const w::Query t = static_cast<w::Query>(q.type);
    // WSYNC_LOG_LEVEL=debug traces every key a client asks for (how docs/TORCH_KEYS.md was
    // settled: what a torch ProcessGroupNCCL reads from the store).
    if (::wsync::log_enabled(WSYNC_LOG_DEBUG) && !q.keys.empty()) {
      std::string keys;
      for (const auto& k : q.keys) keys += (keys.empty() ? "'" : ", '") + k + "'";
      WSYNC_LOGD("store server: %s from %s: %s", w::query_name(q.type), c->peer.c_str(), keys.c_str());
    }
    switch (t) {
      case w::Query::VALIDATE:
        if (q.u32 != w::kValidationMagic) return "VALIDATE with a wrong magic number";
        return "";
      case w::Query::PING:
        w::put_pod<uint32_t>(&c->out, q.u32);
        return "";
      case w::Query::SET:
        do_set(q.keys[0], std::move(q.values[0]));
        return "";
      case w::Query::COMPARE_SET: {
        const std::string& key = q.keys[0];
        std::vector<uint8_t>& expected = q.values[0];
        std::vector<uint8_t>& desired = q.values[1];
        auto it = kv.find(key);
        if (it == kv.end()) {
          if (expected.empty()) {
            w::put_bytes(&c->out, desired.data(), desired.size());
            do_set(key, std::move(desired));
          } else {
            // torch replies the expected value when the key is missing (and stores nothing).
            w::put_bytes(&c->out, expected.data(), expected.size());
          }
        } else {
          if (it->second == expected) {
            it->second = std::move(desired);
            w::put_bytes(&c->out, it->second.data(), it->second.size());
            wake_waiters(key);
          } else {
            w::put_bytes(&c->out, it->second.data(), it->second.size());
          }
        }
        return "";
      }
      case w::Query::GET: {
        auto it = kv.find(q.keys[0]);
        if (it == kv.end()) {
          w::put_pod<uint64_t>(&c->out, 0);  // like torch's libuv backend: empty for a missing key
        } else {
          w::put_bytes(&c->out, it->second.data(), it->second.size());
        }
        return "";
      }
      case w::Query::ADD: {
        int64_t v = 0;
        if (!do_add(q.keys[0], q.i64, &v)) return "ADD on key '" + q.keys[0] + "' whose value is not an integer";
        w::put_pod<int64_t>(&c->out, v);
        return "";
      }
      case w::Query::CHECK: {
        bool ready = std::all_of(q.keys.begin(), q.keys.end(), [&](const std::string& k) { return key_ready(k); });
        reply_u8(c, static_cast<uint8_t>(ready ? w::CheckReply::READY : w::CheckReply::NOT_READY));
        return "";
      }
      case w::Query::WAIT: {
        for (const std::string& k : q.keys) {
          if (key_ready(k) || c->waiting.count(k)) continue;
          c->waiting.insert(k);
          waiters[k].push_back(c->id);
        }
        if (c->waiting.empty()) reply_u8(c, static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
        return "";
      }
      case w::Query::GETNUMKEYS:
        w::put_pod<int64_t>(&c->out, static_cast<int64_t>(kv.size()));
        return "";
      case w::Query::DELETE_KEY:
        w::put_pod<int64_t>(&c->out, static_cast<int64_t>(kv.erase(q.keys[0])));
        return "";
      case w::Query::APPEND: {
        auto it = kv.find(q.keys[0]);
        if (it == kv.end()) {
          kv[q.keys[0]] = std::move(q.values[0]);
        } else {
          if (it->second.size() + q.values[0].size() > kMaxRequestBytes)
            return "APPEND would grow key '" + q.keys[0] + "' beyond " + std::to_string(kMaxRequestBytes) + " bytes";
          it->second.insert(it->second.end(), q.values[0].begin(), q.values[0].end());
        }
        wake_waiters(q.keys[0]);
        return "";
      }
      case w::Query::MULTI_GET: {
        size_t total = 0;
        for (const std::string& k : q.keys) {
          auto it = kv.find(k);
          total += 8 + (it == kv.end() ? 0 : it->second.size());
        }
        if (total > kMaxReplyBytes) return "MULTI_GET reply of " + std::to_string(total) + " bytes is too large";
        c->out.reserve(c->out.size() + total);
        for (const std::string& k : q.keys) {
          auto it = kv.find(k);
          if (it == kv.end()) {
            w::put_pod<uint64_t>(&c->out, 0);
          } else {
            w::put_bytes(&c->out, it->second.data(), it->second.size());
          }
        }
        return "";
      }
      case w::Query::MULTI_SET:
        for (size_t i = 0; i < q.keys.size(); ++i) do_set(q.keys[i], std::move(q.values[i]));
        return "";
      case w::Query::CANCEL_WAIT:
        clear_wait(c);
        reply_u8(c, static_cast<uint8_t>(w::WaitReply::WAIT_CANCELED));
        return "";
      case w::Query::QUEUE_PUSH:
        queues[q.keys[0]].push_back(std::move(q.values[0]));
        wake_one_waiter(q.keys[0]);
        return "";
      case w::Query::QUEUE_POP: {
        auto it = queues.find(q.keys[0]);
        int64_t len = it == queues.end() ? 0 : static_cast<int64_t>(it->second.size());
        w::put_pod<int64_t>(&c->out, len);
        if (len > 0) {
          w::put_bytes(&c->out, it->second.front().data(), it->second.front().size());
          it->second.pop_front();
          if (it->second.empty()) queues.erase(it);
        }
        return "";
      }
      case w::Query::QUEUE_LEN: {
        auto it = queues.find(q.keys[0]);
        w::put_pod<int64_t>(&c->out, it == queues.end() ? 0 : static_cast<int64_t>(it->second.size()));
        return "";
      }
      case w::Query::LIST:
        w::put_pod<int64_t>(&c->out, static_cast<int64_t>(kv.size()));
        for (const auto& kvp : kv) w::put_string(&c->out, kvp.first);
        return "";
    }
    return "unknown query type " + std::to_string(q.type);
  }

  void process_conn(Conn* c) {
    while (!c->dead && c->out_pending() < kOutHighWater) {
      size_t avail = c->in.size() - c->in_off;
      if (avail == 0 || avail < c->need) break;
      const uint8_t* p = c->in.data() + c->in_off;
      if (!c->validated) {
        // The first request must be VALIDATE + magic: 00 CE F7 85 3C on the wire.
        uint8_t expect[5] = {0};
        uint32_t magic = w::kValidationMagic;
        std::memcpy(expect + 1, &magic, 4);
        size_t k = std::min<size_t>(avail, 5);
        if (std::memcmp(p, expect, k) != 0) {
          close_conn(c, "the client speaks an older torch store protocol (it did not open with VALIDATE + "
                        "magic 0x3C85F7CE; first bytes " + hex_prefix(p, avail) +
                        "); use torch >= 2.5 or wsync's own store client");
          return;
        }
        if (avail < 5) {
          c->need = 5;
          break;
        }
        c->in_off += 5;
        c->need = 0;
        c->validated = true;
        continue;
      }
      w::Reader r(p, avail);
      Request q;
      std::string bad;
      if (!parse(r, &q, &bad)) {
        if (!bad.empty() || r.state() == w::Reader::BAD) {
          std::string why = !bad.empty() ? bad : std::string(w::query_name(q.type)) + ": " + r.error();
          close_conn(c, "malformed request: " + why);
          return;
        }
        if (r.need() > kMaxRequestBytes) {
          close_conn(c, std::string(w::query_name(q.type)) + " request exceeds " +
                            std::to_string(kMaxRequestBytes) + " bytes");
          return;
        }
        c->need = r.need();
        if (c->in.capacity() < c->in_off + c->need) c->in.reserve(c->in_off + c->need);
        break;
      }
      c->in_off += r.pos();
      c->need = 0;
      std::string why = execute(c, q);
      if (!why.empty()) {
        close_conn(c, why);
        return;
      }
    }
    if (c->in_off == c->in.size()) {
      c->in.clear();
      c->in_off = 0;
      if (c->in.capacity() > 4 * kReadChunk && c->need == 0) c->in.shrink_to_fit();
    } else if (c->in_off > 0 && (c->in_off > (1u << 20) || c->in_off * 2 > c->in.size())) {
      c->in.erase(c->in.begin(), c->in.begin() + static_cast<std::ptrdiff_t>(c->in_off));
      c->in_off = 0;
    }
  }

  void reap() {
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second->dead) {
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    nconn.store(conns.size());
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    while (!stopping.load()) {
      fds.clear();
      ids.clear();
      const bool accept_paused = std::chrono::steady_clock::now() < accept_paused_until;
      fds.push_back({listen_fd, static_cast<short>(accept_paused ? 0 : POLLIN), 0});
      fds.push_back({wake_rd, POLLIN, 0});
      {
        std::lock_guard<std::mutex> g(mu);
        for (auto& kvp : conns) {
          Conn* c = kvp.second.get();
          short ev = 0;
          if (c->out_pending() < kOutHighWater) ev |= POLLIN;
          if (c->out_pending() > 0) ev |= POLLOUT;
          fds.push_back({c->fd, ev, 0});
          ids.push_back(c->id);
        }
      }
      int n = ::poll(fds.data(), fds.size(), accept_paused ? 100 : -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        WSYNC_LOGE("store server %s: poll failed: %s; the store stops serving", format_host_port(host, port).c_str(),
                   strerror(errno));
        break;
      }
      if (stopping.load()) break;
      if (fds[1].revents) {
        char buf[64];
        while (::read(wake_rd, buf, sizeof buf) > 0) {
        }
      }
      std::lock_guard<std::mutex> g(mu);
      if (fds[0].revents & POLLIN) accept_all();
      for (size_t i = 2; i < fds.size(); ++i) {
        auto it = conns.find(ids[i - 2]);
        if (it == conns.end()) continue;
        Conn* c = it->second.get();
        short re = fds[i].revents;
        if (re & POLLNVAL) {
          close_conn(c);
          continue;
        }
        if (re & (POLLIN | POLLHUP | POLLERR)) read_conn(c);
        if (!c->dead) process_conn(c);
        if (!c->dead && c->eof) {
          flush_conn(c);
          close_conn(c);
        }
      }
      // Replies queued by requests or by waiters released through other connections or the
      // in-process accessors; then requests parked behind a now-drained output buffer.
      for (auto& kvp : conns) {
        Conn* c = kvp.second.get();
        if (!c->dead && c->out_pending() > 0) flush_conn(c);
        if (!c->dead && c->in.size() > c->in_off && c->out_pending() < kOutHighWater &&
            c->in.size() - c->in_off >= std::max<size_t>(c->need, 1)) {
          process_conn(c);
          if (!c->dead && c->out_pending() > 0) flush_conn(c);
        }
      }
      reap();
    }
  }
};

TcpStoreServer::TcpStoreServer() : impl_(new Impl) {}

TcpStoreServer::~TcpStoreServer() { stop(); }

wsync_status_t TcpStoreServer::start(const std::string& host, uint16_t port, std::unique_ptr<TcpStoreServer>* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "TcpStoreServer::start: out is NULL");
  std::unique_ptr<TcpStoreServer> s(new TcpStoreServer());
  Impl& im = *s->impl_;
  im.host = host;
  const std::string where = format_host_port(host.empty() ? "0.0.0.0" : host, port);

  addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port_s = std::to_string(port);
  int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_s.c_str(), &hints, &res);
  if (gai != 0 || res == nullptr)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "store server: cannot resolve bind address %s: %s", where.c_str(),
                gai_strerror(gai));
  std::string last_err = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) {
      last_err = strerror(errno);
      continue;
    }
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0 || !set_nonblocking(fd)) {
      last_err = strerror(errno);
      ::close(fd);
      continue;
    }
    im.listen_fd = fd;
    break;
  }
  freeaddrinfo(res);
  if (im.listen_fd < 0)
    return fail(WSYNC_ERR_IO, "store server: cannot listen on %s: %s (is the port already in use?)", where.c_str(),
                last_err.c_str());

  sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(im.listen_fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return fail(WSYNC_ERR_IO, "store server: getsockname on %s failed: %s", where.c_str(), strerror(errno));
  im.port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);

  int p[2];
  if (::pipe(p) != 0)
    return fail(WSYNC_ERR_IO, "store server %s: cannot create its wake-up pipe: %s", where.c_str(), strerror(errno));
  im.wake_rd = p[0];
  im.wake_wr = p[1];
  set_nonblocking(im.wake_rd);
  set_nonblocking(im.wake_wr);

  try {
    im.thread = std::thread([&im] { im.run(); });
  } catch (const std::exception& e) {
    return fail(WSYNC_ERR_INTERNAL, "store server %s: cannot start its thread: %s", where.c_str(), e.what());
  }
  WSYNC_LOGI("store server listening on %s (clients use %s)", format_host_port(host, im.port).c_str(),
             s->address().c_str());
  *out = std::move(s);
  return WSYNC_OK;
}

void TcpStoreServer::stop() {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> sg(im.stop_mu);
  if (im.stopped) return;
  im.stopped = true;
  im.stopping.store(true);
  im.wake();
  if (im.thread.joinable()) im.thread.join();
  std::lock_guard<std::mutex> g(im.mu);
  for (auto& kvp : im.conns) im.close_conn(kvp.second.get());
  im.conns.clear();
  im.waiters.clear();
  im.nconn.store(0);
  if (im.listen_fd >= 0) ::close(im.listen_fd);
  im.listen_fd = -1;
}

uint16_t TcpStoreServer::port() const { return impl_->port; }

std::string TcpStoreServer::address() const {
  const std::string& h = impl_->host;
  if (h.empty() || h == "0.0.0.0" || h == "::" || h == "[::]") return format_host_port("127.0.0.1", impl_->port);
  return format_host_port(h, impl_->port);
}

size_t TcpStoreServer::num_connections() const { return impl_->nconn.load(); }

void TcpStoreServer::set(const std::string& key, const std::vector<uint8_t>& value) {
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->do_set(key, value);
}

bool TcpStoreServer::get(const std::string& key, std::vector<uint8_t>* value) const {
  std::lock_guard<std::mutex> g(impl_->mu);
  auto it = impl_->kv.find(key);
  if (it == impl_->kv.end()) return false;
  if (value != nullptr) *value = it->second;
  return true;
}

int64_t TcpStoreServer::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> g(impl_->mu);
  int64_t v = 0;
  if (!impl_->do_add(key, delta, &v)) {
    WSYNC_LOGW("store server: add on key '%s' whose value is not an integer; it is reset to %" PRId64, key.c_str(),
               delta);
    impl_->do_set(key, decimal(delta));
    v = delta;
  }
  return v;
}

bool TcpStoreServer::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->kv.erase(key) > 0;
}

int64_t TcpStoreServer::num_keys() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return static_cast<int64_t>(impl_->kv.size());
}

}  // namespace wsync
