// Receiver option rejoin: a trainer that dies, or ends its group, and starts again from its
// checkpoint (new processes at the same store address) finds its engines' receivers waiting. The
// receiver keeps what the engine gave it (registered buffers, receive mode, committed version,
// staged blocks) and replaces only its links: the next wsync_receiver_next after the sender is gone
// (many senders: after one of them was lost, or closed) drops the update that was in flight
// (staged: the registered buffers still hold the last committed version), closes every link and
// joins the group at the same store (sender 0's) with the same rank, as init did. Until the
// successors are up each call returns an error within its own timeout and the engine goes on
// serving. A trainer's ranks restart together (a rank that survived its peer's death re-creates its
// group, as torchrun restarts every worker): a receiver greets sender 0 only once every sender
// listed its store there (receiver_init.cpp), so a half-restarted trainer is not joined half.
#include <chrono>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "receiver/receiver.h"

namespace wsync {

wsync_status_t rejoin_keep(const wsync_receiver_config_t* config, wsync_receiver_t* receiver) {
  if (!receiver->shared.rejoin) return WSYNC_OK;
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  std::memcpy(&c, config, std::min<size_t>(config->struct_size, sizeof c));
  RejoinConfig& k = receiver->rejoin;
  k.store_addr = c.store_addr;  // (many senders: sender 0's, where a receiver joins the group)
  k.has_group_name = c.group_name != nullptr;
  k.group_name = c.group_name ? c.group_name : "";
  k.has_transport = c.transport != nullptr;
  k.transport = c.transport ? c.transport : "";
  wsync_status_t st = copy_options(c.options, c.num_options, &k.options);
  if (st != WSYNC_OK) return st;
  k.rank = receiver->link0()->rank;
  k.timeout_ms = receiver->link0()->timeout_ms;
  return WSYNC_OK;
}

namespace {

uint64_t manifests_taken(const wsync_receiver_t* receiver) {
  uint64_t n = 0;
  for (const auto& l : receiver->links) n += l->manifests_taken;
  return n;
}

// Some link holds part of an update the engine has not heard the loss of (a bucket taken or on the
// wire, a sender's finalize, bytes arrived).
bool update_unreported(const wsync_receiver_t* receiver) {
  const RxShared& sh = receiver->shared;
  if (!sh.update_void.empty() || !sh.link_failed.empty()) return false;  // (the engine was told)
  if (!sh.arrived.empty() || sh.first_end_ms != 0) return true;
  for (const auto& l : receiver->links)
    if (l->accepted_bucket > 0 || !l->flight.empty() || l->pending_commit != 0) return true;
  return false;
}

}  // namespace

bool rejoin_due(wsync_receiver_t* receiver) {
  if (!receiver->shared.rejoin) return false;
  if (receiver->rejoin.due) return true;  // a rejoin began (the old links are gone) and has not joined yet
  Link* l = receiver->link0();
  if (l->closed) return true;  // a sender closed its group (CLOSE): a successor may come
  if (receiver->links.size() > 1) return !receiver->shared.link_failed.empty();  // (reported by the call that failed)
  // An update this receiver took part of, whose loss the engine has not heard yet: next() reports
  // it first (the sender is gone: PEER_FAILED), then the call after it rejoins.
  if (update_unreported(receiver)) return false;
  l->conn.pump();
  return l->conn.closed() && !l->conn.has_frame();  // gone, and what it said was read
}

RejoinWatch rejoin_watch(const wsync_receiver_t* receiver) {
  RejoinWatch w;
  w.on = receiver->shared.rejoin;
  w.reported = w.on && !update_unreported(receiver);
  w.manifests = manifests_taken(receiver);
  return w;
}

bool rejoin_in_call(wsync_receiver_t* receiver, const RejoinWatch& w) {
  return w.on && w.reported && manifests_taken(receiver) == w.manifests && rejoin_due(receiver);
}

namespace {

// One try: new links in place of the old (the old ones' transports are destroyed: nothing writes
// for them); link 0 stays, torn down, when the join fails, for the calls that read it meanwhile.
// *avoided: the store still announces the group that lost a sender.
wsync_status_t join_again(wsync_receiver_t* receiver, wsync_receiver_config_t* c, bool* avoided) {
  RejoinConfig& k = receiver->rejoin;
  RxShared& sh = receiver->shared;
  std::vector<std::unique_ptr<Link>> old;
  old.swap(receiver->links);
  receiver->links.push_back(std::make_unique<Link>(&sh));
  Link* fresh = receiver->link0();
  fresh->rejoining = true;
  fresh->avoid_control = k.avoid_control;
  sh.links.assign(1, fresh);
  wsync_status_t st = receiver_init(c, fresh);
  if (st == WSYNC_OK) {  // many senders: the others too, seen through as sender 0's join was
    c->timeout_ms = std::max<int64_t>(c->timeout_ms, fresh->timeout_ms);
    st = links_join(c, receiver);
  }
  *avoided = fresh->avoided;
  if (st == WSYNC_OK) return st;
  const std::string why = last_error();
  if (!fresh->store_reached) k.avoid_control.clear();  // (that group's store is gone)
  for (auto& l : receiver->links) link_teardown(l.get());
  // The old link 0 (torn down) stays the one the other calls read until a join succeeds: it still
  // knows the group's shape (planned, the transport, device memory).
  receiver->links.clear();
  receiver->links.push_back(std::move(old[0]));
  sh.links.assign(1, receiver->link0());
  return fail_msg(st, why);
}

}  // namespace

// The first try of a rejoin: every link let go of (its update dropped, its transports destroyed),
// what the successor must hear again forgotten.
void let_go(wsync_receiver_t* receiver) {
  RejoinConfig& k = receiver->rejoin;
  RxShared& sh = receiver->shared;
  Link* old = receiver->link0();
  WSYNC_LOGW("receiver rank %u: the sender%s of group '%s' %s; joining %s at %s (receiver option rejoin)", old->rank,
             receiver->links.size() > 1 ? "s" : "", old->group_name.c_str(),
             receiver->links.size() > 1 ? "lost one of them" : "is gone",
             receiver->links.size() > 1 ? "them again" : "its successor", k.store_addr.c_str());
  // (many senders, one lost or closed: that group is not joined again, its survivors close it;
  // one that removed this receiver, or whose update this receiver failed, is)
  k.avoid_control = receiver->links.size() > 1 && (sh.sender_lost || old->closed) ? old->control_endpoint : "";
  for (auto& l : receiver->links) {
    drop_update(l.get(), "the sender is gone");
    l->pending_commit = 0;  // (it cannot be told: that version never committed)
    link_teardown(l.get());
  }
  // Every transport is destroyed: nothing writes into the buffers given up on any more.
  sh.graveyard.clear();
  sh.staged_retired_bytes = 0;
  sh.late_writes = false;
  sh.update = 0;  // the successor numbers its updates afresh
  sh.update_void.clear();
  sh.needs_published = 0;  // said again, in the successor's store
  sh.needs_said.clear();
  sh.link_failed.clear();
  sh.link_status = WSYNC_OK;
  sh.sender_lost = false;
  sh.commit_ready = 0;
  sh.first_end_ms = 0;
  sh.catchup_world.clear();  // (a successor numbers its catch-up worlds afresh)
  k.due = true;
}

wsync_status_t rejoin(wsync_receiver_t* receiver, int64_t timeout_ms) {
  RejoinConfig& k = receiver->rejoin;
  RxShared& sh = receiver->shared;
  const std::string store = k.store_addr;
  if (!k.due) let_go(receiver);  // (once: a later try finds the links gone)
  const std::vector<wsync_option_t> opts = to_c_options(k.options);
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  c.rank = k.rank;
  c.store_addr = k.store_addr.c_str();
  c.group_name = k.has_group_name ? k.group_name.c_str() : nullptr;
  c.transport = k.has_transport ? k.transport.c_str() : nullptr;
  c.options = opts.empty() ? nullptr : opts.data();
  c.num_options = opts.size();
  c.timeout_ms = timeout_ms < 0 ? k.timeout_ms : std::max<int64_t>(timeout_ms, 1);
  // The group at the store is still the one that lost a sender (avoid_control): looked at again
  // every 100 ms until the call's time is up, as a wait for the trainer would.
  const int64_t until = deadline_after(c.timeout_ms);
  wsync_status_t st;
  bool avoided = false;
  for (;;) {
    c.timeout_ms = std::max<int64_t>(remaining_ms(until), 1);
    st = join_again(receiver, &c, &avoided);
    if (st == WSYNC_OK || !avoided || remaining_ms(until) <= 100) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (st != WSYNC_OK) {
    const std::string why = last_error();
    // (a store or sender not up yet, or the old one still closing: a wait, as for the engine; a
    // refusal by the new group keeps its status)
    const bool wait = st == WSYNC_ERR_TIMEOUT || st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_IO;
    return fail(wait ? WSYNC_ERR_TIMEOUT : st, "receiver rank %u: the sender is gone and no successor took the group at %s within %lld ms "
                "(receiver option rejoin; the next wsync_receiver_next tries again): %s",
                k.rank, store.c_str(), static_cast<long long>(timeout_ms < 0 ? k.timeout_ms : timeout_ms), why.c_str());
  }
  k.due = false;
  ++k.rejoins;
  WSYNC_LOGI("receiver rank %u rejoined group '%s' at %s (%zu sender%s; committed version %llu kept; rejoin %llu)",
             k.rank, receiver->link0()->group_name.c_str(), store.c_str(), receiver->links.size(),
             receiver->links.size() > 1 ? "s" : "", static_cast<unsigned long long>(sh.committed),
             static_cast<unsigned long long>(k.rejoins));
  return WSYNC_OK;
}

}  // namespace wsync
