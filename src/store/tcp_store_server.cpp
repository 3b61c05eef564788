// The store server's loop: one thread polls the listening socket, a wake-up pipe and every
// connection; reads requests, hands whole ones to store_queries.cpp, writes replies. A slow or
// malicious client only ever holds up itself.
#include "store/tcp_store_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include "common/error.h"
#include "common/socket.h"
#include "store/host_port.h"
#include "store/store_server_impl.h"
#include "store/store_wire.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

namespace wsync {

namespace w = store_wire;
using Impl = TcpStoreServer::Impl;

namespace {

// Stop reading a client's requests while this much of its replies is still unsent.
constexpr size_t kOutHighWater = 64u * 1024u * 1024u;
// Bytes read from one client per loop turn (fairness).
constexpr size_t kReadChunk = 256u * 1024u;
constexpr size_t kReadPerTurn = 4u * kReadChunk;
constexpr size_t kMaxConnections = 4096;
constexpr size_t kMaxRequestBytes = 256u * 1024u * 1024u;

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

}  // namespace

Impl::~Impl() {
  if (listen_fd >= 0) ::close(listen_fd);
  if (wake_rd >= 0) ::close(wake_rd);
  if (wake_wr >= 0) ::close(wake_wr);
}

void Impl::wake() {
  if (wake_wr < 0) return;
  char c = 1;
  ssize_t r = ::write(wake_wr, &c, 1);
  (void)r;  // EAGAIN: a wake-up is already pending
}

std::string Impl::where() const { return format_host_port(host, port); }

// Close one client; a non-empty `why` is logged as a warning naming the peer.
void Impl::close_conn(Conn* c, const std::string& why) {
  if (c->dead) return;
  if (!why.empty())
    WSYNC_LOGW("store server %s: closing connection from %s: %s", where().c_str(), c->peer.c_str(), why.c_str());
  c->dead = true;
  clear_wait(c);
  if (c->fd >= 0) ::close(c->fd);
  c->fd = -1;
}

void Impl::accept_all() {
  for (int i = 0; i < 64; ++i) {
    std::string peer;
    int fd = tcp_accept(listen_fd, &peer);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
        WSYNC_LOGW("store server %s: accept failed: %s", where().c_str(), strerror(errno));
      return;
    }
    if (conns.size() >= kMaxConnections) {
      WSYNC_LOGW("store server %s: refusing client %s: already %zu connections", where().c_str(), peer.c_str(),
                 conns.size());
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->id = next_id++;
    c->fd = fd;
    c->peer = peer;
    WSYNC_LOGD("store server %s: client %s connected", where().c_str(), peer.c_str());
    conns.emplace(c->id, std::move(c));
  }
}

void Impl::read_conn(Conn* c) {
  size_t total = 0;
  while (total < kReadPerTurn) {
    size_t want = kReadChunk;
    size_t avail = c->in.size() - c->in_off;
    if (c->need > avail) want = std::max(want, std::min(c->need - avail, kReadPerTurn - total));
    size_t old = c->in.size();
    c->in.resize(old + want);
    ssize_t n = ::recv(c->fd, c->in.data() + old, want, 0);
    c->in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n == 0) {
      WSYNC_LOGD("store server: client %s disconnected", c->peer.c_str());
      c->eof = true;
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) close_conn(c, std::string("read failed: ") + strerror(errno));
      return;
    }
    total += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < want) return;
  }
}

void Impl::flush_conn(Conn* c) {
  std::vector<uint8_t>& out = c->out.data();
  while (c->out_pending() > 0) {
    ssize_t n = ::send(c->fd, out.data() + c->out_off, c->out_pending(), MSG_NOSIGNAL);
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
  if (c->out_off == out.size()) {
    out.clear();
    c->out_off = 0;
    if (out.capacity() > 4 * kReadChunk) out.shrink_to_fit();
  } else if (c->out_off > (1u << 20) && c->out_off * 2 > out.size()) {
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(c->out_off));
    c->out_off = 0;
  }
}

// The first request of a connection must be VALIDATE + magic: 00 CE F7 85 3C on the wire. Returns
// false when the connection was closed (an older torch store protocol) or needs more bytes.
bool Impl::validate_conn(Conn* c, const uint8_t* p, size_t avail) {
  uint8_t expect[5] = {0};
  const uint32_t magic = w::kValidationMagic;
  std::memcpy(expect + 1, &magic, 4);
  if (std::memcmp(p, expect, std::min<size_t>(avail, 5)) != 0) {
    close_conn(c, "the client speaks an older torch store protocol (it did not open with VALIDATE + magic "
                  "0x3C85F7CE; first bytes " + hex_prefix(p, avail) + "); use torch >= 2.5 or wsync's own store client");
    return false;
  }
  if (avail < 5) {
    c->need = 5;
    return false;
  }
  c->in_off += 5;
  c->need = 0;
  c->validated = true;
  return true;
}

void Impl::compact_input(Conn* c) {
  if (c->in_off == c->in.size()) {
    c->in.clear();
    c->in_off = 0;
    if (c->in.capacity() > 4 * kReadChunk && c->need == 0) c->in.shrink_to_fit();
  } else if (c->in_off > 0 && (c->in_off > (1u << 20) || c->in_off * 2 > c->in.size())) {
    c->in.erase(c->in.begin(), c->in.begin() + static_cast<std::ptrdiff_t>(c->in_off));
    c->in_off = 0;
  }
}

// Execute every whole request buffered on `c` (while its unsent replies stay below the mark).
void Impl::process_conn(Conn* c) {
  while (!c->dead && c->out_pending() < kOutHighWater) {
    const size_t avail = c->in.size() - c->in_off;
    if (avail == 0 || avail < c->need) break;
    const uint8_t* p = c->in.data() + c->in_off;
    if (!c->validated) {
      if (!validate_conn(c, p, avail)) break;
      continue;
    }
    ByteReader r(p, avail);
    Request q;
    std::string bad;
    if (!parse(r, &q, &bad)) {
      if (!bad.empty() || r.state() == ByteReader::kBad) {
        close_conn(c, "malformed request: " + (!bad.empty() ? bad : std::string(w::query_name(q.type)) + ": " + r.error()));
        return;
      }
      if (r.need() > kMaxRequestBytes) {
        close_conn(c, std::string(w::query_name(q.type)) + " request exceeds " + std::to_string(kMaxRequestBytes) +
                          " bytes");
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
  compact_input(c);
}

// Replies queued by requests or by waiters released through other connections; then requests
// parked behind a now-drained output buffer.
void Impl::service_pending() {
  for (auto& kvp : conns) {
    Conn* c = kvp.second.get();
    if (!c->dead && c->out_pending() > 0) flush_conn(c);
    if (!c->dead && c->in.size() > c->in_off && c->out_pending() < kOutHighWater &&
        c->in.size() - c->in_off >= std::max<size_t>(c->need, 1)) {
      process_conn(c);
      if (!c->dead && c->out_pending() > 0) flush_conn(c);
    }
  }
}

void Impl::reap() {
  for (auto it = conns.begin(); it != conns.end();) it = it->second->dead ? conns.erase(it) : std::next(it);
}

void Impl::poll_once(std::vector<pollfd>* fds, std::vector<uint64_t>* ids) {
  fds->clear();
  ids->clear();
  const bool accept_paused = std::chrono::steady_clock::now() < accept_paused_until;
  fds->push_back({listen_fd, static_cast<short>(accept_paused ? 0 : POLLIN), 0});
  fds->push_back({wake_rd, POLLIN, 0});
  {
    std::lock_guard<std::mutex> g(mu);
    for (auto& kvp : conns) {
      Conn* c = kvp.second.get();
      short ev = 0;
      if (c->out_pending() < kOutHighWater) ev |= POLLIN;
      if (c->out_pending() > 0) ev |= POLLOUT;
      fds->push_back({c->fd, ev, 0});
      ids->push_back(c->id);
    }
  }
  int n = ::poll(fds->data(), fds->size(), accept_paused ? 100 : -1);
  if (n < 0) {
    if (errno != EINTR) {
      WSYNC_LOGE("store server %s: poll failed: %s; the store stops serving", where().c_str(), strerror(errno));
      stopping.store(true);
    }
    return;
  }
  if (stopping.load()) return;
  if ((*fds)[1].revents) {
    char buf[64];
    while (::read(wake_rd, buf, sizeof buf) > 0) {
    }
  }
  std::lock_guard<std::mutex> g(mu);
  if ((*fds)[0].revents & POLLIN) accept_all();
  for (size_t i = 2; i < fds->size(); ++i) {
    auto it = conns.find((*ids)[i - 2]);
    if (it == conns.end()) continue;
    Conn* c = it->second.get();
    const short re = (*fds)[i].revents;
    if (re & POLLNVAL) {
      close_conn(c);
      continue;
    }
    try {  // one client's request (untrusted sizes) must not end the server thread
      if (re & (POLLIN | POLLHUP | POLLERR)) read_conn(c);
      if (!c->dead) process_conn(c);
      if (!c->dead && c->eof) {
        flush_conn(c);
        close_conn(c);
      }
    } catch (const std::bad_alloc&) {
      c->in.clear();
      c->in.shrink_to_fit();
      close_conn(c, "out of memory serving its request");
    }
  }
  service_pending();
  reap();
}

void Impl::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stopping.load()) {
    try {
      poll_once(&fds, &ids);
    } catch (...) {  // an exception must not terminate the trainer: log it and keep serving
      log_exception("store server thread", std::current_exception());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

TcpStoreServer::TcpStoreServer() : impl_(new Impl) {}

TcpStoreServer::~TcpStoreServer() { stop(); }

wsync_status_t TcpStoreServer::start(const std::string& host, uint16_t port, std::unique_ptr<TcpStoreServer>* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "TcpStoreServer::start: out is NULL");
  std::unique_ptr<TcpStoreServer> s(new TcpStoreServer());
  Impl& im = *s->impl_;
  im.host = host;
  wsync_status_t st = tcp_listen(host, port, SOMAXCONN, &im.listen_fd, &im.port);
  if (st != WSYNC_OK) return fail_msg(st, "store server: " + last_error());
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
    return fail(WSYNC_ERR_IO, "store server %s: cannot create its wake-up pipe: %s", im.where().c_str(), strerror(errno));
  im.wake_rd = p[0];
  im.wake_wr = p[1];
  try {
    im.thread = std::thread([&im] { im.run(); });
  } catch (const std::exception& e) {
    return fail(WSYNC_ERR_INTERNAL, "store server %s: cannot start its thread: %s", im.where().c_str(), e.what());
  }
  WSYNC_LOGI("store server listening on %s (clients use %s)", im.where().c_str(), s->address().c_str());
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
  if (im.listen_fd >= 0) ::close(im.listen_fd);
  im.listen_fd = -1;
}

uint16_t TcpStoreServer::port() const { return impl_->port; }

std::string TcpStoreServer::address() const {
  const std::string& h = impl_->host;
  if (h.empty() || h == "0.0.0.0" || h == "::" || h == "[::]") return format_host_port("127.0.0.1", impl_->port);
  return format_host_port(h, impl_->port);
}

}  // namespace wsync
