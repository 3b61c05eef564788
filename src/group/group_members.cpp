// See group_members.h.
#include "group/group_members.h"

#include <poll.h>

#include <algorithm>

#include "common/error.h"
#include "control/frames.h"
#include "device/tensor_digest.h"
#include "group/engine_members.h"
#include "group/group_catchup.h"
#include "group/group_internal.h"
#include "group/group_mailbox.h"

namespace wsync {
namespace {

void stop_waiting_for(Flight* flight, Peer* p) {
  if (flight == nullptr) return;
  for (auto& b : *flight) {
    b->want_ready.erase(std::remove(b->want_ready.begin(), b->want_ready.end(), p), b->want_ready.end());
    b->want_ack.erase(std::remove(b->want_ack.begin(), b->want_ack.end(), p), b->want_ack.end());
  }
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

}  // namespace

wsync_status_t members_check_options(wsync_group_t* g) {
  if (g->cfg.commit_quorum != 0 && !g->cfg.elastic)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'commit_quorum' needs membership=elastic (a fixed group's update "
                "commits on every receiver or fails)");
  if (g->cfg.commit_quorum > g->shape.num_receivers && g->shape.num_receivers != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'commit_quorum' is %u but the group has %u receiver(s)",
                g->cfg.commit_quorum, g->shape.num_receivers);
  if (g->shape.init_receivers != 0 && !g->cfg.elastic)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'init_receivers' needs membership=elastic (a fixed group's init "
                "waits for every receiver)");
  if (g->shape.init_receivers > g->shape.num_receivers && g->shape.num_receivers != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'init_receivers' is %u but the group has %u receiver(s)",
                g->shape.init_receivers, g->shape.num_receivers);
  if (!g->cfg.elastic) return WSYNC_OK;
  if (!g->cfg.engines_spec.empty() && !g->cfg.engines_embed_wsync)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "membership=elastic with HTTP engines needs engines that embed wsync "
                "receivers (option engine_receivers=wsync): an unmodified engine's ranks cannot leave or join its "
                "process group one by one");
  if (!g->cfg.engines_spec.empty() && g->shape.init_receivers != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'init_receivers' is not used with HTTP engines: init waits for "
                "the servers that pass their health check, the others join when they answer");
  return WSYNC_OK;
}

wsync_status_t members_check_transport(wsync_group_t* g) {
  if (!g->cfg.elastic) return WSYNC_OK;
  if (!(g->plugins.transport.table->caps & WSYNC_TRANSPORT_CAP_FORGET_ONE))
    return fail(WSYNC_ERR_UNSUPPORTED, "membership=elastic needs a transport that can leave one receiver out and go on "
                "with the others (WSYNC_TRANSPORT_CAP_FORGET_ONE); transport '%s' cannot", g->plugins.transport.table->name);
  if (g->shape.http_engines && !members_can_join(g))
    return fail(WSYNC_ERR_UNSUPPORTED, "membership=elastic with HTTP engines needs a transport that connects a "
                "receiver that joins later (plugin ABI 1.5 connect_peer); transport '%s' cannot", g->plugins.transport.table->name);
  if (g->shape.init_receivers != 0 && g->shape.init_receivers < g->shape.num_receivers && !members_can_join(g))
    return fail(WSYNC_ERR_UNSUPPORTED, "option 'init_receivers' needs a transport that connects a receiver that joins "
                "later (plugin ABI 1.5 connect_peer); transport '%s' cannot", g->plugins.transport.table->name);
  return WSYNC_OK;
}

bool members_can_join(const wsync_group_t* g) {
  const wsync_transport_v1_t* t = g->plugins.transport.table;
  return g->cfg.elastic && t != nullptr && WSYNC_HAS_FIELD(t, wsync_transport_v1_t, connect_peer) && t->connect_peer != nullptr;
}

void members_open_slots(wsync_group_t* g) { g->members.peers.resize(g->shape.num_receivers); }

void members_seat(wsync_group_t* g, std::unique_ptr<Peer> p) {
  const uint32_t r = p->rank;
  g->members.peers[r - 1] = std::move(p);
}

// Tell every receiver the group closed; half-close and drain so our last frames are not lost to
// a TCP reset, and give late messages (an error ACK in flight) a moment to land.
void members_close(wsync_group_t* g) {
  std::vector<pollfd> fds;
  for (auto& p : g->members.peers)
    if (p && p->conn.open()) {
      p->conn.set_abort_flag(nullptr);
      p->conn.send(MsgType::kClose, {}, 200);
      p->conn.shutdown_and_drain();
      if (p->conn.open()) fds.push_back(pollfd{p->conn.fd(), POLLIN, 0});
    }
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 20) > 0)
    for (auto& p : g->members.peers)
      if (p && p->conn.open()) p->conn.shutdown_and_drain();
  g->members.peers.clear();
}

void members_absent(wsync_group_t* g) {
  for (uint32_t r = 1; r <= g->members.peers.size(); ++r) {
    if (g->members.peers[r - 1]) continue;
    auto p = std::make_unique<Peer>();
    p->rank = r;
    p->dropped = true;  // (not a member: skipped by every send and wait, like a receiver removed)
    p->alive = false;
    p->left = true;     // (nothing for the transport to forget)
    p->never_joined = true;  // (assigned ranks go here first)
    p->conn.set_peer_name("receiver rank " + std::to_string(r) + " (not joined yet)");
    g->members.peers[r - 1] = std::move(p);
  }
}

namespace {

// A receiver that joined (JOINED read, the transport connected to it) takes its rank's place.
void install(wsync_group_t* g, std::unique_ptr<Peer> p, const std::string& catchup) {
  const uint32_t r = p->rank;
  const std::string name = p->conn.peer_name();
  p->alive = true;
  p->dropped = false;
  p->left = false;
  p->buckets = 0;
  g->members.peers[r - 1] = std::move(p);
  MemberEvent e;
  e.kind = WSYNC_MEMBER_JOINED;
  e.rank = r;
  e.update = mailbox_updates(g) + 1;
  const uint32_t relay = g->members.peers[r - 1]->route_parent;
  e.reason = name + engines_rank_note(g, r, name) + " joined the group" +
             (relay != 0 ? " below relay rank " + std::to_string(relay) : std::string()) + catchup;
  Members::Book& book = g->members.book;
  std::lock_guard<std::mutex> lk(book.mu);
  book.events.push_back(e);
  auto& m = book.ranks;
  m.insert(std::upper_bound(m.begin(), m.end(), r), r);
  if (book.holds.size() < g->shape.num_receivers) book.holds.resize(g->shape.num_receivers, 0);
  book.holds[r - 1] = 0;  // (a new process holds nothing yet)
  WSYNC_LOGI("group '%s': %s joined; it takes part from update %llu (%zu member(s))%s", g->cfg.group_name.c_str(),
             name.c_str(), static_cast<unsigned long long>(e.update), m.size(), catchup.c_str());
}

}  // namespace

namespace {

// The group is being destroyed, aborted or broken: no more joining.
bool admission_stopped(wsync_group_t* g) {
  return g->pipe.aborted.load() || mailbox_closed(g);
}

// What a member said between updates, when it said something: a joiner whose catch-up failed
// says CATCHUP_FAILED with the reason (a NACK is read as a refusal); nothing else is expected there.
wsync_status_t idle_word(wsync_group_t* g, Peer* p, InboxWord* word) {
  InboxContext ctx;
  ctx.during = "between updates";
  ctx.between_updates = true;
  Frame f;
  wsync_status_t st = inbox_take(g, p, ctx, &f, word);
  if (st != WSYNC_OK || *word != InboxWord::kAnswer) return st;
  StatusBody nack;
  const bool move_refused = f.type == static_cast<uint16_t>(MsgType::kNack) &&
                            decode_nack(f.body, &nack) == WSYNC_OK && nack.seq == kRouteMoveNackSeq;
  if (p->route_moving && (f.type == static_cast<uint16_t>(MsgType::kJoined) || move_refused)) {
    route_move_answered(g, p, f);  // (its answer to a re-plan's ROUTE_MOVE)
    return WSYNC_OK;
  }
  if (f.type == static_cast<uint16_t>(MsgType::kNack) && decode_nack(f.body, &nack) == WSYNC_OK) {
    st = wire_failure(nack.status, WSYNC_ERR_PROTOCOL);
    if (st == WSYNC_ERR_ABORTED || st == WSYNC_ERR_INVALID_ARGUMENT || st == WSYNC_ERR_INTERNAL ||
        st == WSYNC_ERR_OUT_OF_MEMORY)
      st = WSYNC_ERR_PEER_FAILED;  // (its own trouble, never the sender's: it is removed)
    return fail(st, "%s refused between updates: %s", p->conn.peer_name().c_str(), nack.reason.c_str());
  }
  return fail(WSYNC_ERR_PROTOCOL, "%s sent %s between updates", p->conn.peer_name().c_str(), msg_type_name(f.type));
}

// Members a re-plan asked to move that have not answered yet: their answers read (idle_word takes
// them), their connections polled for the rest.
std::vector<pollfd> read_move_answers(wsync_group_t* g) {
  std::vector<pollfd> fds;
  for (auto& p : g->members.peers) {
    if (p->dropped || !p->alive || !p->route_moving) continue;
    p->conn.pump();
    InboxWord word = InboxWord::kNone;
    const wsync_status_t st = p->conn.closed() || p->conn.has_frame() ? idle_word(g, p.get(), &word) : WSYNC_OK;
    if (st != WSYNC_OK && member_failed(g, nullptr, p.get(), st) != WSYNC_OK) clear_error();
    if (!p->dropped && p->alive && p->route_moving) fds.push_back(pollfd{p->conn.fd(), POLLIN, 0});
  }
  return fds;
}

// Every member a re-plan asked to move has answered (it reads its ROUTE_MOVE before the next
// update's MANIFEST, so it is reading now), within the re-plan's own budget; one that did not is
// removed, named, and may join again (its place is no longer what the sender would feed).
void settle_moves(wsync_group_t* g) {
  const int64_t deadline = deadline_after(route_move_budget_ms(g));
  for (std::vector<pollfd> fds = read_move_answers(g); !fds.empty(); fds = read_move_answers(g)) {
    const int64_t left = deadline - now_ms();
    if (left <= 0) break;
    ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left, 50)));
  }
  for (auto& p : g->members.peers) {
    if (p->dropped || !p->alive || !p->route_moving) continue;
    const std::string to = p->route_move_to == 0 ? "the sender" : "receiver rank " + std::to_string(p->route_move_to);
    const wsync_status_t st = fail(WSYNC_ERR_TIMEOUT, "%s did not answer the route's re-plan (take the bytes from %s) "
                                   "within %lld ms, before the next update", p->conn.peer_name().c_str(), to.c_str(),
                                   static_cast<long long>(route_move_budget_ms(g)));
    if (member_failed(g, nullptr, p.get(), st) != WSYNC_OK) clear_error();
  }
}

// The members that stayed take the places a plan made now would give them (route_replan): one round
// a look while idle; before an update's first batch, every round the plan needs, each answered.
void replan_members(wsync_group_t* g, bool before_update) {
  if (!before_update) {
    route_replan(g);
    return;
  }
  settle_moves(g);
  for (size_t round = 0; round < g->members.peers.size() && route_replan(g); ++round) settle_moves(g);
}

// Members whose connection ended while the group was idle (an engine killed between updates), or
// that refused then (a failed catch-up), are removed now, so that a restarted process can take the
// rank at once.
void drop_hung_up(wsync_group_t* g) {
  for (auto& p : g->members.peers) {
    if (p->dropped || !p->alive) continue;
    p->conn.pump();
    if (!p->conn.closed() && !p->conn.has_frame()) continue;
    InboxWord word = InboxWord::kNone;
    const wsync_status_t st = idle_word(g, p.get(), &word);  // (a late PROGRESS of the last update: nothing)
    if (st == WSYNC_OK) continue;
    if (member_failed(g, nullptr, p.get(), st) != WSYNC_OK)
      clear_error();  // (the last member left: the next update fails saying so)
    g->members.dropped_in_update.clear();  // (not the next update's loss: it was not a member of it)
  }
}

}  // namespace

namespace {

// A joiner that cannot take its place in the route (its relay left since its ROUTE; the error
// says so) is not installed: told why (many senders: REMOVED, so that it joins again rather than
// taking the close for this sender's death) and forgotten; its connection closes, and it may join
// again.
void refuse_joiner(wsync_group_t* g, Peer* p) {
  WSYNC_LOGW("group '%s': %s could not join: %s", g->cfg.group_name.c_str(), p->conn.peer_name().c_str(),
             last_error().c_str());
  if (g->shape.planned && p->conn.open())
    p->conn.send(MsgType::kRemoved, encode_removed({"it could not join: " + last_error()}), 200);
  clear_error();
  g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
}

// Many senders: a joiner whose join is done becomes a member at the first batch of an update whose
// agreed joiners name it (every sender installs the same ones there; the others keep it waiting,
// `later`), caught up first from the member sender 0 picked, if any. False: its connection ended
// while it waited (it is forgotten).
bool seat_agreed(wsync_group_t* g, std::unique_ptr<Peer>& p, const std::vector<uint32_t>* agreed,
                 const CatchupPicks* picks, std::vector<std::unique_ptr<Peer>>* later) {
  p->conn.pump();
  if (p->conn.hung_up()) return false;  // (closed, even behind a frame it sent that waits unread)
  if (agreed == nullptr || !std::binary_search(agreed->begin(), agreed->end(), p->rank)) {
    later->push_back(std::move(p));
    return true;
  }
  if (route_install_joiner(g, p.get()) != WSYNC_OK) {
    refuse_joiner(g, p.get());
    return true;
  }
  const std::string catchup = catchup_arrange_picked(g, p.get(), picks);
  install(g, std::move(p), catchup);
  return true;
}

void forget_joiner_gone(wsync_group_t* g, Peer* p) {
  WSYNC_LOGW("group '%s': %s left before every sender had it", g->cfg.group_name.c_str(), p->conn.peer_name().c_str());
  g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
}

}  // namespace

void members_admit(wsync_group_t* g, const std::vector<uint32_t>* agreed, const CatchupPicks* picks) {
  if (!members_can_join(g) || g->pipe.update_begun || admission_stopped(g)) return;
  drop_hung_up(g);
  take_hellos(g);
  // One budget for the transport connects of everyone who joins now (their JOINED says their side
  // is up): the next update, or a destroy, waits at most this long.
  const int64_t deadline = deadline_after(std::min<int64_t>(g->cfg.timeout_ms, 10000));
  std::vector<std::unique_ptr<Peer>> joining = admission_take_joining(g), later;
  std::vector<uint32_t> busy;  // (joiners at this boundary serve no catch-up)
  for (const auto& p : joining) busy.push_back(p->rank);
  for (auto& p : joining) {
    if (admission_stopped(g)) return;  // (their connections close: they see the group end)
    if (p->joined) {  // (many senders: joined, waiting for the other senders to have it too)
      if (!seat_agreed(g, p, agreed, picks, &later)) forget_joiner_gone(g, p.get());
      continue;
    }
    const wsync_status_t st = join_one(g, p.get(), deadline);
    if (st == WSYNC_ERR_TIMEOUT && now_ms() - p->welcomed_ms < g->cfg.timeout_ms) {
      later.push_back(std::move(p));  // no JOINED yet: a later look (the thread never waits for it)
      continue;
    }
    if (st != WSYNC_OK) {
      route_joiner_failed(g, p.get());
      if (st == WSYNC_ERR_TIMEOUT && p->route_told)  // (its transport was connected: forgotten again)
        g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
      if (st == WSYNC_ERR_TIMEOUT)
        fail(st, "%s said HELLO but did not connect its transport (JOINED) within %lld ms",
             p->conn.peer_name().c_str(), static_cast<long long>(g->cfg.timeout_ms));  // (of its WELCOME)
      WSYNC_LOGW("group '%s': %s could not join: %s", g->cfg.group_name.c_str(), p->conn.peer_name().c_str(),
                 last_error().c_str());
      // Many senders: the joiner is told (REMOVED) before its connection closes, so that it joins
      // this group again, not taking the close for this sender's death (it then waited for a new
      // trainer: 66 s in the composed soak).
      if (g->shape.planned && p->conn.open())
        p->conn.send(MsgType::kRemoved, encode_removed({"it could not join: " + last_error()}), 200);
      clear_error();  // (a joiner gone already: its own failure says enough)
      continue;  // (its connection closes here: it may try again)
    }
    if (g->shape.planned) {
      p->joined = true;
      if (!seat_agreed(g, p, agreed, picks, &later)) forget_joiner_gone(g, p.get());
      continue;
    }
    if (route_install_joiner(g, p.get()) != WSYNC_OK) {
      refuse_joiner(g, p.get());
      continue;
    }
    const std::string catchup = catchup_arrange(g, p.get(), busy);
    install(g, std::move(p), catchup);
  }
  admission_keep_joining(g, std::move(later));
  replan_members(g, agreed != nullptr);
  // HTTP engines: dropped servers on their way back (their INIT makes their receivers come); after
  // this look's joins, so that an INIT that answered finds the receivers it brought installed.
  engines_readmit(g);
  engines_after_admit(g);
}

void members_settle_moves(wsync_group_t* g) {
  if (members_can_join(g) && !g->pipe.update_begun && !admission_stopped(g) && route_moves_pending(g)) settle_moves(g);
}

void members_init(wsync_group_t* g) {
  Members::Book& book = g->members.book;
  std::lock_guard<std::mutex> lk(book.mu);
  book.ranks.clear();
  for (const auto& p : g->members.peers)
    if (!p->dropped) book.ranks.push_back(p->rank);
  if (g->members.peers.empty())  // unmodified HTTP engines: no control channel, the ranks all the same
    for (uint32_t r = 1; r <= g->shape.num_receivers; ++r) book.ranks.push_back(r);
}

std::vector<uint32_t> members_ranks(const wsync_group_t* g) {
  std::lock_guard<std::mutex> lk(g->members.book.mu);
  return g->members.book.ranks;
}

void members_counts(const wsync_group_t* g, uint32_t* members, uint32_t* left) {
  const Members::Book& book = g->members.book;
  std::lock_guard<std::mutex> lk(book.mu);
  *members = static_cast<uint32_t>(book.ranks.size());
  *left = static_cast<uint32_t>(std::count_if(book.events.begin(), book.events.end(),
                                              [](const MemberEvent& e) { return e.kind == WSYNC_MEMBER_LEFT; }));
}

bool members_take_event(wsync_group_t* g, wsync_member_event_t* e) {
  Members::Book& book = g->members.book;
  std::lock_guard<std::mutex> lk(book.mu);
  if (book.taken >= book.events.size()) return false;
  const MemberEvent& m = book.events[book.taken++];
  book.reason = m.reason;
  e->kind = m.kind;
  e->rank = m.rank;
  e->status = m.status;
  e->update = m.update;
  e->reason = book.reason.c_str();
  return true;
}

uint32_t members_left_in(const wsync_group_t* g) {
  uint32_t n = 0;
  for (const auto& p : g->members.peers) n += p->dropped ? 0 : 1;
  return n;
}

wsync_status_t member_failed(wsync_group_t* g, Flight* flight, Peer* p, wsync_status_t st) {
  const std::string why = last_error();
  // Only what the receiver did: not the group's abort, nor a failure of the sender's own.
  if (!g->cfg.elastic || g->pipe.aborted.load() || st == WSYNC_ERR_ABORTED || st == WSYNC_ERR_INVALID_ARGUMENT ||
      st == WSYNC_ERR_INTERNAL || st == WSYNC_ERR_OUT_OF_MEMORY)
    return st;
  if (p->blames_sender) {  // (many senders: another sender failed, not this receiver)
    p->blames_sender = false;
    return st;
  }
  if (p->dropped) return WSYNC_OK;
  p->dropped = true;
  if (g->plugins.transport_self && !p->left && p->alive) g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
  p->alive = false;  // (peer_lost forgot it already)
  // Many senders: it is told why first, and tells the other senders, which remove it too.
  if (g->shape.planned && p->conn.open() && p->conn.send(MsgType::kRemoved, encode_removed({why}), 200) != WSYNC_OK)
    clear_error();
  p->conn.close();  // it sees the group end
  stop_waiting_for(flight, p);
  if (!p->catchup.failed) g->members.dropped_in_update.push_back(why);  // (one that never caught up held nothing of it)
  {
    MemberEvent e;
    e.kind = WSYNC_MEMBER_LEFT;
    e.rank = p->rank;
    e.status = st;
    e.update = mailbox_updates(g) + 1;
    e.reason = why + engines_rank_note(g, p->rank, why);
    Members::Book& book = g->members.book;
    std::lock_guard<std::mutex> lk(book.mu);
    book.events.push_back(std::move(e));
    auto& m = book.ranks;
    m.erase(std::remove(m.begin(), m.end(), p->rank), m.end());
  }
  members_note_holds(g, p->rank, 0);
  WSYNC_LOGW("group '%s': receiver rank %u left the group (%u remain): %s", g->cfg.group_name.c_str(), p->rank,
             members_left_in(g), why.c_str());
  engines_rank_left(g, flight, p->rank, why);  // (HTTP engines: its server is dropped with it)
  catchup_member_left(g, p->rank, why);
  // A relay: the members it fed lose the update in progress with it (their bytes came through it)
  // and leave too, each named; they may join again (receiver option rejoin does so by itself),
  // each taking a place in the route then, caught up from a member that holds the version.
  for (uint32_t r : route_member_left(g, p->rank)) {
    Peer* d = g->members.peers[r - 1].get();
    if (d->dropped) continue;
    const wsync_status_t cut = fail(WSYNC_ERR_PEER_FAILED, "%s was cut off: it was fed by relay rank %u, which "
                                    "left the group (%s)", d->conn.peer_name().c_str(), p->rank, why.c_str());
    if (member_failed(g, flight, d, cut) != WSYNC_OK) clear_error();  // (the count below says who is left)
  }
  if (members_left_in(g) == 0)
    return fail(WSYNC_ERR_PEER_FAILED, "every receiver of group '%s' has left; the last: %s", g->cfg.group_name.c_str(),
                why.c_str());
  clear_error();
  return WSYNC_OK;
}

wsync_status_t members_may_commit(wsync_group_t* g, uint64_t version) {
  if (!g->cfg.elastic) return WSYNC_OK;
  const uint32_t left = members_left_in(g);
  if (left == 0)  // (every receiver left between updates, or never joined: nobody holds it)
    return fail(WSYNC_ERR_PEER_FAILED, "version %llu does not commit: no receiver is in group '%s' (they left or "
                "have not joined yet)", static_cast<unsigned long long>(version), g->cfg.group_name.c_str());
  const uint32_t quorum = g->cfg.commit_quorum;
  if (quorum != 0 && left < quorum && g->members.dropped_in_update.empty())
    return fail(WSYNC_ERR_PEER_FAILED, "version %llu does not commit: %u receiver(s) remain in the group, fewer than "
                "the quorum of %u (option commit_quorum)", static_cast<unsigned long long>(version), left, quorum);
  if (g->members.dropped_in_update.empty()) return WSYNC_OK;
  if (quorum != 0 && left >= quorum) {
    WSYNC_LOGW("group '%s': version %llu commits on %u receiver(s), at least the quorum of %u; removed during it: %s",
               g->cfg.group_name.c_str(), static_cast<unsigned long long>(version), left, quorum,
               joined(g->members.dropped_in_update).c_str());
    return WSYNC_OK;
  }
  const std::string need = quorum == 0 ? "every receiver must hold it (option commit_quorum is not set)"
                                       : "the quorum is " + std::to_string(quorum);
  return fail(WSYNC_ERR_PEER_FAILED, "version %llu does not commit: %zu receiver(s) left the group during the update "
              "(%s); %u remain and %s", static_cast<unsigned long long>(version), g->members.dropped_in_update.size(),
              joined(g->members.dropped_in_update).c_str(), left, need.c_str());
}

void end_failed_update(wsync_group_t* g, const std::string& why) {
  announce_abort(g, why);
  g->members.dropped_in_update.clear();
  wire_next_update(g);
}

void members_record_digests(wsync_group_t* g, const Batch& b) {
  const bool parts = g->shape.planned && b.owned.size() == b.tensors.size();  // (many senders: by part)
  // Many senders: every tensor of the batch gets an entry, with no parts when another sender sent
  // it, so that parts this sender sent of an earlier version are not vouched for after this one.
  for (const std::string& name : b.planned) g->members.update_digests[name];
  for (size_t i = 0; i < b.tensors.size(); ++i) {
    const wsync_tensor_t& t = b.tensors[i];
    Members::TensorDigest d;
    d.nbytes = t.nbytes;
    if (tensor_digest(t.data, t.nbytes, t.device_type, t.device_index, &d.sum) != WSYNC_OK) {
      if (g->members.digest_failed.empty()) g->members.digest_failed = "tensor '" + std::string(t.name) + "': " + last_error();
      clear_error();
      continue;
    }
    if (!parts) {
      g->members.update_digests[t.name] = d;
      continue;
    }
    std::vector<Members::PartDigest>& list = g->members.update_digests[t.name].parts;
    const Box& box = b.owned[i].box;
    auto same = std::find_if(list.begin(), list.end(), [&](const Members::PartDigest& x) { return box_equal(x.box, box); });
    if (same != list.end()) same->sum = d.sum;
    else list.push_back({box, d.sum});
  }
}

void members_note_holds(wsync_group_t* g, uint32_t rank, uint64_t version) {
  Members::Book& book = g->members.book;
  std::lock_guard<std::mutex> lk(book.mu);
  if (book.holds.size() < g->shape.num_receivers) book.holds.resize(g->shape.num_receivers, 0);
  if (rank >= 1 && rank <= book.holds.size()) book.holds[rank - 1] = version;
}

std::vector<uint64_t> members_holds(const wsync_group_t* g) {
  std::lock_guard<std::mutex> lk(g->members.book.mu);
  return g->members.book.holds;
}

void members_committed(wsync_group_t* g) { g->members.dropped_in_update.clear(); }

void members_update_ended(wsync_group_t* g, uint64_t version) {
  const bool committed = mailbox_committed_version(g) == version;
  if (committed && g->members.digest_failed.empty())
    for (auto& kv : g->members.update_digests) g->members.committed_digests[kv.first] = kv.second;
  if (committed && !g->members.digest_failed.empty()) {  // (what it vouches for would be incomplete)
    WSYNC_LOGW("group '%s': no joiner catches up to version %llu from a peer (the next update brings it): the "
               "sender could not take the digest of %s", g->cfg.group_name.c_str(), static_cast<unsigned long long>(version),
               g->members.digest_failed.c_str());
    g->members.committed_digests.clear();
  }
  g->members.update_digests.clear();
  g->members.digest_failed.clear();
}

}  // namespace wsync
