// The store server's loop: one thread polls the listening socket, a wake-up pipe and every
// connection; feeds each connection's bytes to its request parser (store_request_parser.h) through
// the gatekeeping of store_access.cpp, hands whole requests to store_queries.cpp, writes replies,
// and closes connections whose handshake is overdue. A slow or malicious client only ever holds up
// itself.
#include "store/tcp_store_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include "common/clock.h"
#include "common/error.h"
#include "common/heap.h"
#include "common/socket.h"
#include "store/fd_budget.h"
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
// Bytes read from one client per loop turn (fairness), through the one shared read buffer.
constexpr size_t kReadChunk = 256u * 1024u;
constexpr size_t kReadPerTurn = 4u * kReadChunk;
// A drained reply buffer larger than this is freed, so idle connections hold next to nothing.
constexpr size_t kOutKeep = 4096;
// Warnings about closed connections per second before they are only counted (a flood of
// connections must not flood the trainer's log).
constexpr int kWarnBurst = 20;
// After this many bytes were released, hand the allocator's free memory back to the OS (at most
// once a second): a client's 64 MiB value or a big WAIT should not stay in the trainer's RSS.
constexpr uint64_t kTrimAfter = 8u << 20;

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

void Impl::warn_closing(const Conn* c, const std::string& why) {
  flush_warnings(now_ms());
  if (warn_in_window++ < kWarnBurst)
    WSYNC_LOGW("store server %s: closing connection from %s: %s", where().c_str(), c->peer.c_str(), why.c_str());
  else
    ++warn_suppressed;
}

void Impl::flush_warnings(int64_t now) {
  if (now - warn_window_ms < 1000) return;
  if (warn_suppressed > 0)
    WSYNC_LOGW("store server %s: %llu more connections were closed in the last second (their warnings were "
               "suppressed; the first %d of each second are logged)", where().c_str(),
               static_cast<unsigned long long>(warn_suppressed), kWarnBurst);
  warn_window_ms = now;
  warn_in_window = 0;
  warn_suppressed = 0;
}

void Impl::trim_memory(int64_t now) {
  if (released_since_trim < kTrimAfter || now - last_trim_ms < 1000) return;
  released_since_trim = 0;
  last_trim_ms = now;
  heap_return_free();
}

// Close one client and return everything it held; a non-empty `why` is logged as a warning
// naming the peer.
void Impl::close_conn(Conn* c, const std::string& why) {
  if (c->dead) return;
  if (!why.empty()) warn_closing(c, why);
  c->dead = true;
  clear_wait(c);
  bytes_parsed += c->parser.bytes_parsed();
  c->parser.clear();
  std::vector<uint8_t>().swap(c->in);
  std::vector<uint8_t>().swap(c->out.data());
  c->out_off = 0;
  uncharge_conn(c, c->out_charged, /*reply=*/true);
  uncharge_conn(c, c->charged);
  handshaking.erase(c->id);
  if (c->torch) --torch_clients;
  c->torch = false;
  --live;
  if (c->fd >= 0) ::close(c->fd);
  c->fd = -1;
}

Impl::Conn* Impl::adopt(int fd, const std::string& peer) {
  auto owned = std::make_unique<Conn>();
  Conn* c = owned.get();
  c->id = next_id++;
  c->fd = fd;
  c->peer = peer;
  c->opened_ms = c->last_read_ms = now_ms();
  c->parser = StoreRequestParser([this, c](size_t n) {
    if (charge_conn(c, n)) return true;
    refused_bytes = n;
    return false;
  });
  charge_conn(c, kConnOverhead, /*force=*/true);  // bounded by the connection caps
  handshaking.insert(c->id);
  ++live;
  conns.emplace(c->id, std::move(owned));
  return c;
}

// A new connection is about to be adopted: keep the caps (tcp_store_server.h). Closing the
// oldest connection still in its handshake rather than refusing the newcomer is what keeps a
// flood of idle connections from locking members out: the flood can only churn among itself.
bool Impl::make_room(const std::string& peer) {
  const bool all_full = live >= opt.max_connections;
  const bool pre_full = handshaking.size() >= opt.max_unauthenticated;
  if (!all_full && !pre_full) return true;
  if (!handshaking.empty()) {
    Conn* oldest = conns.at(*handshaking.begin()).get();
    close_conn(oldest, all_full ? "closed to make room: the store has max_connections (" +
                                      std::to_string(opt.max_connections) + ") connections"
                                : "closed to make room: " + std::to_string(handshaking.size()) +
                                      " connections are in their handshake (max_unauthenticated)");
    return true;
  }
  flush_warnings(now_ms());
  if (warn_in_window++ < kWarnBurst)
    WSYNC_LOGW("store server %s: refusing client %s: already %zu connections (max_connections), none of them "
               "still in its handshake%s%s", where().c_str(), peer.c_str(), live, fd_limit_note.empty() ? "" : "; ",
               fd_limit_note.c_str());
  else
    ++warn_suppressed;
  return false;
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
    if (!make_room(peer)) {
      ::close(fd);
      continue;
    }
    adopt(fd, peer);
    WSYNC_LOGD("store server %s: client %s connected", where().c_str(), peer.c_str());
  }
}

// Bytes that arrived while c's replies were above the high-water mark wait here, counted.
void Impl::park(Conn* c, const uint8_t* p, size_t n) {
  const size_t need = c->in.size() + n, cap = c->in.capacity();
  if (need > cap) {
    if (!charge_conn(c, need - cap)) {
      close_conn(c, refusal("buffering " + std::to_string(n) + " bytes of requests", need - cap, conn_pool(c)));
      return;
    }
    c->in.reserve(need);
  }
  c->in.insert(c->in.end(), p, p + n);
}

// Parse c's bytes and execute every request they complete. The parser stops after the query
// type and after each key so that a refused query or key closes the client before the rest of
// its request (a value of 64 MiB) is taken in.
void Impl::consume(Conn* c, const uint8_t* p, size_t n) {
  if (!c->validated && c->first_n < sizeof c->first) {
    const size_t k = std::min(n, sizeof c->first - c->first_n);
    std::memcpy(c->first + c->first_n, p, k);
    c->first_n += k;
  }
  while (!c->dead) {
    if (c->out_pending() >= kOutHighWater) {
      if (n > 0) park(c, p, n);
      return;
    }
    size_t used = 0;
    const StoreRequestParser::Event ev = c->parser.next(p, n, &used);
    p += used;
    n -= used;
    const StoreRequest& q = c->parser.request();
    std::string why;
    switch (ev) {
      case StoreRequestParser::kNeedMore:
        return;
      case StoreRequestParser::kType:
        why = admit_query(c, q.type);
        break;
      case StoreRequestParser::kKey:
        why = admit_key(c, q.keys.back(), q.type);
        break;
      case StoreRequestParser::kBad:
        why = c->validated ? "malformed request: " + c->parser.error() : older_protocol(c);
        break;
      case StoreRequestParser::kRefused:
        why = refusal(std::string("the ") + w::query_name(q.type) + " request it is sending" +
                          (q.keys.empty() ? std::string() : " (key '" + shown_key(q.keys.back()) + "')"),
                      refused_bytes, conn_pool(c));
        break;
      case StoreRequestParser::kDone: {
        Request done;
        uncharge_conn(c, c->parser.take(&done));
        why = execute(c, done);
        break;
      }
    }
    if (!why.empty()) {
      flush_conn(c);  // e.g. AUTH's refusal byte
      close_conn(c, why);
      return;
    }
  }
}

void Impl::resume_parked(Conn* c) {
  std::vector<uint8_t> buf;
  buf.swap(c->in);
  uncharge_conn(c, buf.capacity());
  consume(c, buf.data(), buf.size());
}

void Impl::read_conn(Conn* c) {
  size_t total = 0;
  while (total < kReadPerTurn && !c->dead && c->in.empty()) {
    ssize_t n = ::recv(c->fd, scratch.data(), scratch.size(), 0);
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
    c->last_read_ms = now_ms();
    consume(c, scratch.data(), static_cast<size_t>(n));
    total += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < scratch.size()) return;
  }
}

void Impl::shrink_out(Conn* c) {
  std::vector<uint8_t>& out = c->out.data();
  if (c->out_off == out.size()) {
    out.clear();
    c->out_off = 0;
    if (out.capacity() > kOutKeep) {
      const size_t cap = out.capacity();
      std::vector<uint8_t>().swap(out);
      uncharge_conn(c, cap, /*reply=*/true);
    }
  } else if (c->out_off > (1u << 20) && c->out_off * 2 > out.size()) {
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(c->out_off));
    c->out_off = 0;
  }
}

void Impl::flush_conn(Conn* c) {
  if (c->dead || c->fd < 0) return;
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
  shrink_out(c);
}

// Replies queued by requests or by waiters released through other connections; then requests
// parked behind a now-drained output buffer.
void Impl::service_pending() {
  for (auto& kvp : conns) {
    Conn* c = kvp.second.get();
    if (!c->dead && c->out_pending() > 0) flush_conn(c);
    if (!c->dead && !c->in.empty() && c->out_pending() < kOutHighWater) {
      resume_parked(c);
      if (!c->dead && c->out_pending() > 0) flush_conn(c);
    }
  }
}

// Closes the connections whose handshake is overdue; returns the ms until the next deadline (-1:
// none).
int64_t Impl::expire_handshakes(int64_t now) {
  int64_t next = -1;
  std::vector<Conn*> due;
  for (uint64_t id : handshaking) {
    Conn* c = conns.at(id).get();
    const int64_t d = std::min(c->opened_ms + opt.handshake_ms, c->last_read_ms + opt.idle_ms);
    if (now >= d) due.push_back(c);
    else if (next < 0 || d - now < next) next = d - now;
  }
  for (Conn* c : due) {
    if (now >= c->opened_ms + opt.handshake_ms)
      close_conn(c, "it did not finish its handshake (VALIDATE" +
                        std::string(opt.secret.empty() ? "" : ", then AUTH with the group secret") + ") within " +
                        std::to_string(opt.handshake_ms) + " ms");
    else
      close_conn(c, "it sent nothing for " + std::to_string(opt.idle_ms) + " ms during its handshake");
  }
  return next;
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
  int64_t timeout = -1;
  {
    std::lock_guard<std::mutex> g(mu);
    const int64_t now = now_ms();
    timeout = expire_handshakes(now);
    flush_warnings(now);
    trim_memory(now);
    reap();
    // A summary of suppressed warnings or a pending trim is due within a second, even when idle.
    if (warn_suppressed > 0 || released_since_trim >= kTrimAfter)
      timeout = timeout < 0 ? 1000 : std::min<int64_t>(timeout, 1000);
    for (auto& kvp : conns) {
      Conn* c = kvp.second.get();
      short ev = 0;
      if (c->out_pending() < kOutHighWater && c->in.empty()) ev |= POLLIN;
      if (c->out_pending() > 0) ev |= POLLOUT;
      fds->push_back({c->fd, ev, 0});
      ids->push_back(c->id);
    }
  }
  if (accept_paused) timeout = timeout < 0 ? 100 : std::min<int64_t>(timeout, 100);
  int n = ::poll(fds->data(), fds->size(), timeout < 0 ? -1 : static_cast<int>(std::min<int64_t>(timeout + 1, 60000)));
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
    if (c->dead) continue;
    if (re & POLLNVAL) {
      close_conn(c);
      continue;
    }
    try {  // one client's request (untrusted sizes) must not end the server thread
      if (re & (POLLIN | POLLHUP | POLLERR)) read_conn(c);
      if (!c->dead && c->out_pending() > 0) flush_conn(c);  // free its replies before the next client's
      if (!c->dead && c->eof) {
        flush_conn(c);
        close_conn(c);
      }
    } catch (const std::bad_alloc&) {
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

namespace {

wsync_status_t check_options(const std::string& where, const StoreServerOptions& o) {
  const char* bad = o.memory_quota < (64u << 10) ? "memory_quota (at least 65536 bytes)"
                    : o.handshake_ms <= 0       ? "handshake_ms (> 0)"
                    : o.idle_ms <= 0            ? "idle_ms (> 0)"
                    : o.max_connections == 0    ? "max_connections (> 0)"
                    : o.max_unauthenticated == 0 ? "max_unauthenticated (> 0)"
                                                 : nullptr;
  if (bad != nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "store server %s: option %s is out of range", where.c_str(), bad);
  return WSYNC_OK;
}

}  // namespace

wsync_status_t TcpStoreServer::start(const std::string& host, uint16_t port, std::unique_ptr<TcpStoreServer>* out) {
  return start(host, port, StoreServerOptions(), out);
}

wsync_status_t TcpStoreServer::start(const std::string& host, uint16_t port, const StoreServerOptions& options,
                                     std::unique_ptr<TcpStoreServer>* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "TcpStoreServer::start: out is NULL");
  wsync_status_t st = check_options(format_host_port(host, port), options);
  if (st != WSYNC_OK) return st;
  std::unique_ptr<TcpStoreServer> s(new TcpStoreServer());
  Impl& im = *s->impl_;
  im.host = host;
  im.opt = options;
  im.fd_limit_note = fit_to_fd_budget(current_fd_budget(options.members), &im.opt);
  im.split_quota = !options.secret.empty() && options.torch_clients;
  st = tcp_listen(host, port, SOMAXCONN, &im.listen_fd, &im.port);
  if (st != WSYNC_OK) return fail_msg(st, "store server: " + last_error());
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
    return fail(WSYNC_ERR_IO, "store server %s: cannot create its wake-up pipe: %s", im.where().c_str(), strerror(errno));
  im.wake_rd = p[0];
  im.wake_wr = p[1];
  try {
    im.scratch.resize(kReadChunk);
    im.thread = std::thread([&im] { im.run(); });
  } catch (const std::exception& e) {
    return fail(WSYNC_ERR_INTERNAL, "store server %s: cannot start its thread: %s", im.where().c_str(), e.what());
  }
  const char* mode = options.secret.empty() ? "no group secret: any peer that reaches it can read and write every key"
                     : options.torch_clients ? "group secret required for wsync's keys; torch clients without it "
                                               "may use torch's keys"
                                             : "group secret required";
  WSYNC_LOGI("store server listening on %s (clients use %s; %s)", im.where().c_str(), s->address().c_str(), mode);
  if (!im.fd_limit_note.empty()) WSYNC_LOGI("store server %s: %s", im.where().c_str(), im.fd_limit_note.c_str());
  if (options.torch_clients && im.opt.max_torch_clients == 0)
    WSYNC_LOGW("store server %s: torch mode, but no torch client fits under the open-file limit: %s",
               im.where().c_str(), im.fd_limit_note.c_str());
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

uint64_t TcpStoreServer::memory_in_use() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->used;
}

StoreServerStats TcpStoreServer::stats() const {
  const Impl& im = *impl_;
  StoreServerStats st;
  {
    std::lock_guard<std::mutex> g(im.mu);
    st.memory_in_use = im.used;
    st.memory_quota = im.opt.memory_quota;
    st.connection_bytes = im.conn_bytes;
    st.connections = im.live;
    st.handshaking = im.handshaking.size();
    st.torch_clients = im.torch_clients;
    st.max_connections = im.opt.max_connections;
    st.max_unauthenticated = im.opt.max_unauthenticated;
    st.max_torch_clients = im.opt.max_torch_clients;
    st.bytes_parsed = im.bytes_parsed;
    for (const auto& kvp : im.conns)
      if (!kvp.second->dead) st.bytes_parsed += kvp.second->parser.bytes_parsed();
  }
  std::lock_guard<std::mutex> sg(impl_->stop_mu);
  clockid_t cid;
  timespec ts{};
  if (!im.stopped && im.thread.joinable() && pthread_getcpuclockid(const_cast<std::thread&>(im.thread).native_handle(), &cid) == 0 &&
      clock_gettime(cid, &ts) == 0)
    st.cpu_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  return st;
}

}  // namespace wsync
