// Receivers joining a group: the sender opens each control connection with a CHALLENGE; the
// receiver's HELLO must prove the group secret (control/control_auth.h) and is then checked
// against the group's name, ranks and protocol; WELCOME (with the sender's proof) or REJECT; then
// JOINED once the receiver's transport is connected. Connections that have not said HELLO are
// bounded in number, in time and in the bytes they may send.
#include <poll.h>

#include <algorithm>

#include "common/error.h"
#include "common/log_rate_limit.h"
#include "common/names.h"
#include "control/control_auth.h"
#include "control/frames.h"
#include "group/group_internal.h"
#include "group/group_members.h"
#include "store/host_port.h"

namespace wsync {
namespace {

// A connection must say HELLO within this long; at most this many may be waiting to (the oldest
// is dropped for a newer one, so a flood of silent connections cannot lock receivers out).
constexpr int64_t kHelloDeadlineMs = 10000;
constexpr size_t kMaxPendingHellos = 64;

// Warnings about control connections, per kind: the first kWarnBurst of each kWarnWindowMs are
// logged, the rest summed up in one line per window (a churn of connections once wrote 74,872
// lines in 25 s). The first lines name the peers; the count says how big the flood is.
constexpr int kWarnBurst = 10;
constexpr int64_t kWarnWindowMs = 10000;



}  // namespace

class ControlWarnings {
 public:
  enum Kind { kRefused, kNoHello, kDropped, kCrowded, kKinds };

  explicit ControlWarnings(const wsync_group_t* g) {
    static const char* const what[kKinds] = {"receivers were refused", "connections sent no HELLO in time",
                                             "connections were dropped before their HELLO",
                                             "waiting connections were dropped to make room"};
    const std::string group = g->cfg.group_name;
    for (int k = 0; k < kKinds; ++k)
      limits_.emplace_back(kWarnBurst, kWarnWindowMs, [group, k](uint64_t n, int64_t window_ms) {
        WSYNC_LOGW("group '%s': ... and %llu more %s on the control port in the last %lld s (the first %d of each "
                   "kind are logged)", group.c_str(), static_cast<unsigned long long>(n), what[k],
                   static_cast<long long>(window_ms / 1000), kWarnBurst);
      });
  }
  ~ControlWarnings() { flush(true); }
  bool admit(Kind k) { return limits_[k].admit(now_ms()); }
  void flush(bool force = false) {
    const int64_t now = now_ms();
    for (auto& l : limits_) l.flush(now, force);
  }

 private:
  std::vector<LogRateLimit> limits_;
};

void ControlWarningsDeleter::operator()(ControlWarnings* w) const { delete w; }

namespace {

// The lowest rank no receiver holds or is joining with (0: none): first one that no receiver ever
// took (at init, one that has not joined), then one whose receiver was removed, which a restarting
// engine that names its rank may want back.
uint32_t free_rank(const wsync_group_t* g) {
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t r = 1; r <= g->shape.num_receivers; ++r) {
      const Peer* had = g->members.peers.size() >= r ? g->members.peers[r - 1].get() : nullptr;
      if (had != nullptr && !had->dropped) continue;
      if (pass == 0 && had != nullptr && !had->never_joined) continue;
      if (std::any_of(g->admission.joining.begin(), g->admission.joining.end(), [r](const std::unique_ptr<Peer>& j) { return j->rank == r; }))
        continue;
      return r;
    }
  return 0;
}

// A joiner of `rank` that a new HELLO of that rank replaces: one whose connection ended (the
// receiver gave up on that try) or that the same process opened (the same pid claim from the same
// host: a receiver joins each sender on one connection at a time, so its new try means it let the
// old one go; another process of that rank is still refused "joining already"). Between updates a joiner
// is looked at only at update boundaries; without this, a receiver whose try failed elsewhere (at
// another sender) was refused "joining already" by its own stale try on every retry, as long as
// updates kept this sender busy (found by the composed soak).
void retire_stale_joiner(wsync_group_t* g, uint32_t rank, uint32_t pid, const std::string& host) {
  auto& joining = g->admission.joining;
  for (auto it = joining.begin(); it != joining.end(); ++it) {
    Peer* j = it->get();
    if (j->rank != rank) continue;
    j->conn.pump();
    const bool closed = j->conn.hung_up();  // (a JOINED it sent may wait unread before its EOF)
    if (!closed && (j->pid != pid || host_of(j->addr) != host)) return;
    WSYNC_LOGW("group '%s': %s %s; the new one takes its place", g->cfg.group_name.c_str(), j->conn.peer_name().c_str(),
               closed ? "closed its connection before it was installed" : "connected again from the same process");
    if (j->route_told || j->joined) g->plugins.transport.table->forget_peer(g->plugins.transport_self, j->rank);
    const bool was_ready = j->joined;
    joining.erase(it);
    if (was_ready) admission_keep_joining(g, {});  // (the ready list the caller's thread says: without it)
    return;
  }
}

// Why the HELLO in `f` is refused ("" when it is accepted), and with which status. The proof is
// checked before anything the peer says is believed or answered in detail.
std::string check_hello(wsync_group_t* g, const Peer& p, const Frame& f, HelloBody* h, wsync_status_t* code,
                        bool* assigned) {
  *code = WSYNC_ERR_PROTOCOL;
  *assigned = false;
  if (f.type != static_cast<uint16_t>(MsgType::kHello))
    return std::string("the first message was ") + msg_type_name(f.type) + ", not HELLO";
  if (decode_hello(f.body, h) != WSYNC_OK) return "the first message was not a valid HELLO: " + last_error();
  if (h->protocol != kControlProtocolVersion) {
    *code = WSYNC_ERR_VERSION_MISMATCH;
    return "receiver speaks control protocol " + std::to_string(h->protocol) + ", the sender speaks " +
           std::to_string(kControlProtocolVersion) + " (use the same wsync release on both sides)";
  }
  *code = WSYNC_ERR_REJECTED;
  if (!proof_matches(h->proof, control_hello_proof(g->rdv.secret.value, h->group, h->rank, h->pid, p.nonce, h->nonce)))
    return "the receiver did not prove the group secret (give it the sender's secret: option secret or secret_file, "
           "or WSYNC_GROUP_SECRET)";
  if (h->group != g->cfg.group_name)
    return "receiver asked for group '" + printable_text(h->group) + "' but this sender hosts group '" + g->cfg.group_name + "'";
  if (h->rank == 0) {  // (any rank: the lowest free one)
    if (!g->cfg.elastic)
      return "rank 0 asks the sender to assign a rank, which only a group with membership=elastic does; give this "
             "receiver its rank (1.." + std::to_string(g->shape.num_receivers) + ")";
    h->rank = free_rank(g);
    if (h->rank == 0)
      return "no rank is free to assign: all " + std::to_string(g->shape.num_receivers) + " ranks are members or joining";
    *assigned = true;
  }
  if (h->rank < 1 || h->rank > g->shape.num_receivers)
    return "rank " + std::to_string(h->rank) + " is out of range: this group has receivers 1.." +
           std::to_string(g->shape.num_receivers);
  const Peer* had = g->members.peers.size() >= h->rank ? g->members.peers[h->rank - 1].get() : nullptr;
  const bool rejoin = had != nullptr && had->dropped && g->cfg.elastic;  // (elastic: it left, or never came)
  if (had != nullptr && !rejoin)
    return "rank " + std::to_string(h->rank) + " already joined (" + had->conn.peer_name() + "); each rank " +
           (g->cfg.elastic ? "is one member at a time" : "may join once");
  retire_stale_joiner(g, h->rank, h->pid, host_of(p.addr));
  for (const auto& j : g->admission.joining)
    if (j->rank == h->rank) return "rank " + std::to_string(h->rank) + " is joining already (" + j->conn.peer_name() + ")";
  if (rejoin && !members_can_join(g))
    return "receiver rank " + std::to_string(h->rank) + " cannot join again: transport '" +
           std::string(g->plugins.transport.table->name) + "' cannot connect one receiver later (plugin ABI 1.5 connect_peer)";
  return "";
}

// Handle one HELLO; on success the peer is placed at its rank (at init) or in g->admission.joining (between
// updates). A refused receiver is told why and the sender keeps waiting for the right one.
void admit(wsync_group_t* g, std::unique_ptr<Peer> p, const Frame& f, int64_t timeout_ms, ControlWarnings* warn,
           bool between_updates) {
  HelloBody h;
  wsync_status_t code;
  bool assigned = false;
  const std::string reason = check_hello(g, *p, f, &h, &code, &assigned);
  if (!reason.empty()) {
    if (warn->admit(ControlWarnings::kRefused))
      WSYNC_LOGW("group '%s': refused a receiver connecting from %s: %s", g->cfg.group_name.c_str(), p->addr.c_str(),
                 reason.c_str());
    p->conn.send(MsgType::kReject, encode_reject({code, reason}), std::min<int64_t>(timeout_ms, 1000));
    return;
  }
  p->rank = h.rank;
  p->pid = h.pid;
  p->conn.set_peer_name("receiver rank " + std::to_string(h.rank) + " (at " + p->addr + ", claims pid " +
                        std::to_string(h.pid) + ")");
  p->conn.set_max_body(kControlMaxBody);
  if (assigned && p->conn.send(MsgType::kAssign, encode_assign({h.rank}), timeout_ms) != WSYNC_OK) {
    WSYNC_LOGW("group '%s': a receiver given rank %u left during its welcome", g->cfg.group_name.c_str(), h.rank);
    return;
  }
  const Mac proof = control_welcome_proof(g->rdv.secret.value, g->cfg.group_name, h.rank, g->shape.num_receivers + 1, p->nonce, h.nonce);
  const WelcomeBody welcome{g->shape.num_receivers + 1, std::vector<uint8_t>(proof.begin(), proof.end())};
  if (p->conn.send(MsgType::kWelcome, encode_welcome(welcome), timeout_ms) != WSYNC_OK) {
    WSYNC_LOGW("group '%s': rank %u left during its welcome", g->cfg.group_name.c_str(), h.rank);
    return;
  }
  WSYNC_LOGI("group '%s': %s joined%s", g->cfg.group_name.c_str(), p->conn.peer_name().c_str(),
             assigned ? " (its rank assigned)" : "");
  p->conn.set_abort_flag(&g->pipe.aborted);
  if (between_updates) {  // a member from the next update
    p->welcomed_ms = now_ms();
    g->admission.joining.push_back(std::move(p));
  }
  else members_seat(g, std::move(p));
}

// A new connection: it gets its CHALLENGE at once and joins the pending ones (the oldest pending
// one makes room when there are too many).
void open_pending(wsync_group_t* g, int fd, const std::string& addr, std::vector<std::unique_ptr<Peer>>* pending,
                  ControlWarnings* warn) {
  auto p = std::make_unique<Peer>();
  p->conn.adopt(fd);
  p->addr = addr;
  p->conn.set_peer_name("a connection from " + addr);
  p->conn.set_max_body(kControlMaxBodyUnauthenticated);
  p->accepted_ms = now_ms();
  p->nonce = random_bytes(kNonceBytes);
  if (p->conn.send(MsgType::kChallenge, encode_challenge({kControlProtocolVersion, p->nonce}), 1000) != WSYNC_OK)
    return;  // gone already
  if (pending->size() >= kMaxPendingHellos) {
    if (warn->admit(ControlWarnings::kCrowded))
      WSYNC_LOGW("group '%s': %zu connections are waiting to say HELLO; dropping the oldest, from %s",
                 g->cfg.group_name.c_str(), pending->size(), pending->front()->addr.c_str());
    pending->erase(pending->begin());
  }
  pending->push_back(std::move(p));
}

std::string missing_ranks(wsync_group_t* g) {
  std::string s;
  for (uint32_t r = 1; r <= g->shape.num_receivers; ++r)
    if (!g->members.peers[r - 1]) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

wsync_status_t init_interrupted(wsync_group_t* g) {
  if (g->pipe.aborted.load()) return fail(WSYNC_ERR_ABORTED, "group init aborted");
  if (g->engines.failed.load()) return fail(WSYNC_ERR_ENGINE, "an engine refused to join the group");
  return WSYNC_OK;
}

// Read the HELLO of every pending connection that sent one; the others stay pending until their
// HELLO deadline.
void read_hellos(wsync_group_t* g, std::vector<std::unique_ptr<Peer>>* pending, int64_t left, ControlWarnings* warn,
                 bool between_updates = false) {
  for (size_t i = 0; i < pending->size();) {
    Frame f;
    wsync_status_t st = (*pending)[i]->conn.recv(&f, 0);
    if (st == WSYNC_ERR_TIMEOUT && now_ms() - (*pending)[i]->accepted_ms > kHelloDeadlineMs) {
      if (warn->admit(ControlWarnings::kNoHello))
        WSYNC_LOGW("group '%s': closing the connection from %s: no HELLO within %lld ms", g->cfg.group_name.c_str(),
                   (*pending)[i]->addr.c_str(), static_cast<long long>(kHelloDeadlineMs));
      st = WSYNC_ERR_PEER_FAILED;
    } else if (st == WSYNC_ERR_TIMEOUT) {
      ++i;
      continue;
    } else if (st != WSYNC_OK) {
      if (warn->admit(ControlWarnings::kDropped))
        WSYNC_LOGW("group '%s': dropped the connection from %s before its HELLO: %s", g->cfg.group_name.c_str(),
                   (*pending)[i]->addr.c_str(), last_error().c_str());
    }
    std::unique_ptr<Peer> p = std::move((*pending)[i]);
    pending->erase(pending->begin() + static_cast<long>(i));
    if (st == WSYNC_OK) admit(g, std::move(p), f, std::max<int64_t>(left, 1000), warn, between_updates);  // else: closed before HELLO
  }
}

}  // namespace

wsync_status_t accept_receivers(wsync_group_t* g, int64_t deadline) {
  std::vector<std::unique_ptr<Peer>> pending;  // connected, HELLO not read yet
  ControlWarnings warn(g);                     // its summaries are logged when they are due and at the end
  const uint32_t wanted = g->cfg.elastic && g->shape.init_receivers != 0 ? g->shape.init_receivers : g->shape.num_receivers;
  for (;;) {
    warn.flush();
    const auto joined = std::count_if(g->members.peers.begin(), g->members.peers.end(), [](const std::unique_ptr<Peer>& p) { return !!p; });
    if (static_cast<uint32_t>(joined) >= wanted) {
      if (members_can_join(g)) g->admission.hello_pending = std::move(pending);  // (read between updates)
      members_absent(g);
      return WSYNC_OK;
    }
    wsync_status_t st = init_interrupted(g);
    if (st != WSYNC_OK) return st;
    const int64_t left = deadline - now_ms();
    if (left <= 0)
      return fail(WSYNC_ERR_TIMEOUT, "group '%s': receiver rank(s) %s did not join in time (store at %s)",
                  g->cfg.group_name.c_str(), missing_ranks(g).c_str(), g->rdv.store_addr.c_str());
    int fd = -1;
    std::string addr;
    if (g->rdv.listener.accept(std::min<int64_t>(left, 20), &fd, &addr) == WSYNC_OK) open_pending(g, fd, addr, &pending, &warn);
    read_hellos(g, &pending, left, &warn);
  }
}

namespace {

// JOINED, or the receiver's NACK saying why its transport did not connect.
wsync_status_t judge_join_frame(wsync_group_t* g, Peer* p, const Frame& f) {
  if (f.type == static_cast<uint16_t>(MsgType::kJoined)) {
    JoinedBody j;
    if (decode_joined(f.body, &j) != WSYNC_OK)
      return fail(WSYNC_ERR_PROTOCOL, "group init: %s sent a malformed JOINED: %s", p->conn.peer_name().c_str(),
                  last_error().c_str());
    if (j.has_lane) p->lane = j.lane;  // (the JOINED after a ROUTE says none)
    return WSYNC_OK;
  }
  if (f.type == static_cast<uint16_t>(MsgType::kNack)) {
    StatusBody nack;
    if (decode_nack(f.body, &nack) != WSYNC_OK)
      return fail(WSYNC_ERR_PROTOCOL, "group init: %s sent a malformed NACK: %s", p->conn.peer_name().c_str(),
                  last_error().c_str());
    return fail(wire_failure(nack.status, WSYNC_ERR_PROTOCOL), "group init: %s could not connect its transport: %s",
                p->conn.peer_name().c_str(), nack.reason.c_str());
  }
  return fail(WSYNC_ERR_PROTOCOL, "group init: %s sent %s instead of JOINED", p->conn.peer_name().c_str(),
              msg_type_name(f.type));
}

}  // namespace

wsync_status_t wait_joined(wsync_group_t* g, int64_t deadline) {
  for (auto& p : g->members.peers) {
    if (p->dropped) continue;  // (elastic: a rank that has not joined yet)
    for (;;) {
      wsync_status_t st = init_interrupted(g);
      if (st != WSYNC_OK) return st;
      const int64_t left = deadline - now_ms();
      Frame f;
      st = p->conn.recv(&f, std::max<int64_t>(0, std::min<int64_t>(left, 50)));
      if (st == WSYNC_ERR_TIMEOUT) {
        if (left <= 0)
          return fail(WSYNC_ERR_TIMEOUT, "group '%s': %s did not connect its transport in time", g->cfg.group_name.c_str(),
                      p->conn.peer_name().c_str());
        continue;
      }
      if (st != WSYNC_OK) return fail_msg(st, "group init: " + last_error());
      if ((st = judge_join_frame(g, p.get(), f)) != WSYNC_OK) return st;
      break;
    }
  }
  return WSYNC_OK;
}

void take_hellos(wsync_group_t* g) {
  if (!g->admission.warnings) g->admission.warnings.reset(new ControlWarnings(g));  // one budget for the group's life
  ControlWarnings* warn = g->admission.warnings.get();
  warn->flush();
  int fd = -1;
  std::string addr;
  // (at most a pending list's worth per look: a flood of connections cannot hold the thread here)
  for (size_t n = 0; n < kMaxPendingHellos && g->rdv.listener.accept(0, &fd, &addr) == WSYNC_OK; ++n)
    open_pending(g, fd, addr, &g->admission.hello_pending, warn);
  // Only the HELLOs that are here: a connection that says nothing costs this thread nothing (the
  // pipeline looks again every 100 ms while idle, and before every update).
  read_hellos(g, &g->admission.hello_pending, g->cfg.timeout_ms, warn, true);
}

std::vector<std::unique_ptr<Peer>> admission_take_joining(wsync_group_t* g) {
  std::vector<std::unique_ptr<Peer>> out;
  out.swap(g->admission.joining);
  return out;
}

void admission_keep_joining(wsync_group_t* g, std::vector<std::unique_ptr<Peer>> later) {
  for (auto& p : later) g->admission.joining.push_back(std::move(p));
  std::vector<uint32_t> ready;
  for (const auto& p : g->admission.joining)
    if (p->joined) ready.push_back(p->rank);
  std::sort(ready.begin(), ready.end());
  std::lock_guard<std::mutex> lk(g->admission.ready_mu);
  g->admission.ready = std::move(ready);
}

std::vector<uint32_t> admission_ready(wsync_group_t* g) {
  std::lock_guard<std::mutex> lk(g->admission.ready_mu);
  return g->admission.ready;
}

namespace {

// A joiner whose transport was connected fails before it joined: the transport forgets it (a
// later process may take the rank).
wsync_status_t forget_joiner(wsync_group_t* g, Peer* p, wsync_status_t st) {
  const std::string why = last_error();
  g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
  return fail_msg(st, why);
}

}  // namespace

wsync_status_t join_one(wsync_group_t* g, Peer* p, int64_t deadline) {
  if (g->pipe.aborted.load()) return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted", g->cfg.group_name.c_str());
  Frame f;
  wsync_status_t st = WSYNC_OK;
  if (!p->route_told) {
    if ((st = p->conn.recv(&f, 0)) == WSYNC_ERR_TIMEOUT) return st;  // no JOINED yet: the caller looks again later
    if (st != WSYNC_OK || (st = judge_join_frame(g, p, f)) != WSYNC_OK || (st = connect_receiver(g, p, deadline)) != WSYNC_OK)
      return st;
    if (route_spec_text(g->shape.route_spec) == "star") return WSYNC_OK;
    // A group that relays: the joiner reads its ROUTE (its place: a relay the planner names, or the
    // sender) and says JOINED again.
    p->route_told = true;
    if ((st = route_tell_joiner(g, p, deadline)) != WSYNC_OK) return forget_joiner(g, p, st);
    // (its JOINED again is due timeout_ms from now: the ROUTE may come long after the WELCOME when
    // an update kept this sender busy, and a joiner dropped for that took the composed soak's
    // engine 66 s to come back)
    p->welcomed_ms = now_ms();
  }
  if ((st = p->conn.recv(&f, 0)) == WSYNC_ERR_TIMEOUT) return st;  // (a caller that gives up forgets it)
  StatusBody nack;
  if (st == WSYNC_OK && f.type == static_cast<uint16_t>(MsgType::kNack) && p->route_parent != 0 &&
      !p->route_fell_back && decode_nack(f.body, &nack) == WSYNC_OK &&
      nack.status != WSYNC_ERR_UNSUPPORTED) {  // (its relay is out of reach; UNSUPPORTED: it cannot relay at all)
    if ((st = route_fall_back(g, p, nack.reason, deadline)) != WSYNC_OK) return forget_joiner(g, p, st);
    p->welcomed_ms = now_ms();
    return WSYNC_ERR_TIMEOUT;  // (its JOINED again: a later look)
  }
  if (st != WSYNC_OK || (st = judge_join_frame(g, p, f)) != WSYNC_OK) return forget_joiner(g, p, st);
  return WSYNC_OK;
}

wsync_status_t connect_receiver(wsync_group_t* g, Peer* p, int64_t deadline) {
  const wsync_transport_v1_t* t = g->plugins.transport.table;
  clear_error();
  wsync_status_t st = t->connect_peer(g->plugins.transport_self, p->rank, std::max<int64_t>(deadline - now_ms(), 1));
  if (st != WSYNC_OK)
    return fail(st, "transport '%s' could not connect to %s: %s", t->name, p->conn.peer_name().c_str(),
                plugin_error("transport", t->name).c_str());
  return WSYNC_OK;
}

}  // namespace wsync
