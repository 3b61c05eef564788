// A receiver of a many-sender group (docs/ARCHITECTURE.md, "Many senders"): one link per sender,
// each the single-sender receiver (its control connection, transport world, buckets on the
// wire), sharing the registry, assemblies, arrivals and staged blocks (RxShared). next() looks
// at every link in turn without blocking on any: a link's buckets are accepted and land while
// another's are reported. The update commits once every sender finalized the same version and
// every tensor is whole; a link that fails voids the update on every link and tells the other
// senders (a NACK naming the failed sender), so none of them waits for a commit that cannot come.
#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "control/frames.h"
#include "planner/ownership_record.h"
#include "receiver/receiver.h"

namespace wsync {
namespace {

std::string link_name(const Link* l) {
  return "sender " + std::to_string(l->sender) + " (store at " + l->sender_addr + ")";
}

// What the other senders are told when link `l` failed with `st`: its sender removed this receiver
// (REJECTED, elastic): a NACK saying so, and they remove it too. Its sender failed (`sender_fault`:
// it did not finalize in time; its connection closed; its bucket, straight from it, timed out or its
// transport failed): SENDER_LOST, not this receiver's doing. Anything else, a bucket fed by a relay
// included (the relay's loss, which its senders name), or this receiver's own refusal: a NACK.
MsgType word_for(Link* l, wsync_status_t st, bool sender_fault) {
  if (st == WSYNC_ERR_REJECTED) return MsgType::kNack;
  if (sender_fault) return MsgType::kSenderLost;
  l->conn.pump();
  if (l->conn.closed()) return MsgType::kSenderLost;
  if (l->parent != 0) return MsgType::kNack;
  if (st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_TIMEOUT || st == WSYNC_ERR_IO) return MsgType::kSenderLost;
  return MsgType::kNack;
}

// Several senders gone at once (one died; the others gave up because of it and closed): the one
// that went silent first is blamed, not the one whose close this receiver happened to read first.
Link* silent_first(Link* rx, Link* l, std::string* cause) {
  for (Link* o : rx->sh->links) {
    if (o == l) continue;
    o->conn.pump();
    // (what it left unread of the update, MANIFESTs and BUCKET_SUMs, is no word: dropped)
    if (o->conn.closed() && !sender_said_why_already(o) && !o->conn.has_frame() && o->last_frame_ms < l->last_frame_ms) {
      l = o;
      *cause = "its connection closed (the process died?), before the others";
    }
  }
  return l;
}

// Link `l` failed with `st`: the update is void on every link, the other senders are told (see
// word_for), and the receiver takes no more updates (option rejoin: the next call joins again).
wsync_status_t link_failed(Link* rx, Link* l, wsync_status_t st, bool sender_fault = false) {
  RxShared* sh = rx->sh;
  // Its sender removed this receiver (elastic) and said so before its close: that is the cause, not
  // the failure this receiver met at the same moment (a bucket that stopped below a relay that left).
  if (st != WSYNC_ERR_REJECTED && inbox_next_type(l) == static_cast<uint16_t>(MsgType::kRemoved)) {
    Frame f;
    wsync_receiver_event_t lev = WSYNC_RECEIVER_EVENT_INIT;
    if (inbox_recv(l, &f, 0) == WSYNC_OK && handle_frame(l, f, &lev) == WSYNC_ERR_REJECTED) {
      st = WSYNC_ERR_REJECTED;
      sender_fault = false;
    }
  }
  std::string cause = last_error();
  if (st == WSYNC_ERR_PEER_FAILED && l->conn.closed()) l = silent_first(rx, l, &cause);
  const bool removed = st == WSYNC_ERR_REJECTED;
  const MsgType word = word_for(l, st, sender_fault);
  // (a bucket lost below a relay is the relay's failure, not its sender's: said so)
  const bool relayed = !removed && word == MsgType::kNack && l->parent != 0;
  const std::string why = relayed ? "the bytes of " + link_name(l) + " through relay rank " + std::to_string(l->parent) +
                                        " stopped: " + cause
                                  : link_name(l) + (removed ? ": " : " failed: ") + cause;
  drop_update(l, why);
  for (Link* o : sh->links)
    if (o != l && o->conn.open()) send_status(o, word, 0, WSYNC_ERR_PEER_FAILED, why);
  sh->commit_ready = 0;
  sh->sender_lost = word == MsgType::kSenderLost;
  sh->link_status = st == WSYNC_ERR_TIMEOUT ? WSYNC_ERR_PEER_FAILED : st;
  sh->link_failed = why;
  WSYNC_LOGW("receiver rank %u: %s", rx->rank, why.c_str());
  return fail_msg(sh->link_status, why);
}

// Every link's commit is refused for `why` (a NACK to each sender); the update is void.
wsync_status_t refuse_all(Link* rx, wsync_status_t st, const std::string& why) {
  for (Link* l : rx->sh->links) {
    l->pending_commit = 0;
    if (l->conn.open()) send_status(l, MsgType::kNack, 0, st, why);
  }
  rx->sh->first_end_ms = 0;
  rx->sh->commit_ready = 0;
  drop_update(rx, why);
  return fail_msg(st, why);
}

// The plan digest chain a sender's END_UPDATE carried, for messages.
std::string plan_text(const Link* l) {
  if (!l->end_has_plan) return "(none: it sent no plan digest)";
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(l->end_plan_digest));
  return buf;
}

// Every sender finalized: the same version, by the same plan, and every tensor whole.
wsync_status_t merge_commit(Link* rx, wsync_receiver_event_t* ev) {
  const std::vector<Link*>& links = rx->sh->links;
  const uint64_t v = links[0]->pending_commit;
  for (Link* l : links)
    if (l->pending_commit != v)
      return refuse_all(rx, WSYNC_ERR_PROTOCOL,
                        "the senders disagree on the version: " + link_name(links[0]) + " finalized " +
                            std::to_string(v) + " but " + link_name(l) + " finalized " +
                            std::to_string(l->pending_commit) + "; nothing commits");
  for (Link* l : links)  // every sender sent its boxes by the same agreed plan
    if (l->end_has_plan != links[0]->end_has_plan || l->end_plan_digest != links[0]->end_plan_digest)
      return refuse_all(rx, WSYNC_ERR_PROTOCOL,
                        "the senders did not send version " + std::to_string(v) + " by the same plan: " +
                            link_name(links[0]) + " agreed on plan " + plan_text(links[0]) + " but " + link_name(l) +
                            " on plan " + plan_text(l) + "; nothing commits");
  if (!rx->sh->assembling.empty())
    return refuse_all(rx, WSYNC_ERR_PROTOCOL,
                      "every sender finalized version " + std::to_string(v) + " but tensor '" +
                          rx->sh->assembling.begin()->first + "' is incomplete (" +
                          rx->sh->arrived.missing(rx->sh->assembling.begin()->first) + " missing): no sender sent it");
  if (check_staged_arrived(rx) != WSYNC_OK) return refuse_all(rx, last_status(), last_error());
  rx->sh->first_end_ms = 0;
  rx->sh->commit_ready = v;
  ev->kind = WSYNC_EVENT_COMMIT;
  ev->version = v;
  return WSYNC_OK;
}

// A sender finalized and another has not within timeout_ms: name the one that did not.
wsync_status_t check_stragglers(Link* rx) {
  RxShared* sh = rx->sh;
  if (sh->first_end_ms == 0 || now_ms() < sh->first_end_ms + rx->timeout_ms) return WSYNC_OK;
  Link* done = nullptr;
  for (Link* l : sh->links)
    if (l->pending_commit) done = l;
  for (Link* l : sh->links)
    if (!l->pending_commit) {
      fail(WSYNC_ERR_PEER_FAILED, "it did not finalize within %lld ms (timeout_ms) of %s finalizing version %llu",
           static_cast<long long>(rx->timeout_ms), done ? link_name(done).c_str() : "another sender",
           static_cast<unsigned long long>(done ? done->pending_commit : 0));
      return link_failed(rx, l, WSYNC_ERR_PEER_FAILED, true);
    }
  return WSYNC_OK;
}

// Sleep until a link's control socket or transport has something, or 20 ms (transports without
// an event fd are polled in slices by their waits).
void sleep_on_links(Link* rx, int64_t deadline) {
  std::vector<pollfd> fds;
  for (Link* l : rx->sh->links) {
    progress_transports(l, true);
    fds.push_back(pollfd{l->conn.fd(), POLLIN, 0});
    const wsync_transport_v1_t* t = l->transport.table;
    auto arm = WSYNC_HAS_FIELD(t, wsync_transport_v1_t, arm) ? t->arm : nullptr;
    if (l->recv_self == nullptr || l->recv_fd < 0) continue;
    int32_t armed = 1;
    if (arm != nullptr && arm(l->recv_self, &armed) != WSYNC_OK) armed = 0;
    if (!armed) return;  // work now
    fds.push_back(pollfd{l->recv_fd, POLLIN, 0});
  }
  ::poll(fds.data(), fds.size(), remaining_ms(deadline, 20));
}

// Another link whose sender is gone without a word (its connection closed, no frame left): the
// cause an ABORT or a CLOSE from `l` most likely answers (the other senders give up because of it).
Link* vanished_other(Link* rx, Link* l) {
  for (Link* o : rx->sh->links) {
    if (o == l) continue;
    o->conn.pump();
    if (o->conn.closed() && !o->conn.has_frame()) return o;
  }
  return nullptr;
}

// A sender that finalized sends nothing more before this receiver's COMMITTED, unless the update
// died on its side (another receiver refused the commit, a receiver or sender failed) or it removed
// this receiver (elastic: it did not answer in time): its ABORT_UPDATE, CLOSE or REMOVED is read at
// once, not after the others' finalize timed out, and before the version is merged.
bool void_word_next(Link* l) {
  const uint16_t next = inbox_next_type(l);
  return next == static_cast<uint16_t>(MsgType::kAbortUpdate) || next == static_cast<uint16_t>(MsgType::kClose) ||
         next == static_cast<uint16_t>(MsgType::kRemoved);
}

// Link `l`'s control frame made event `lev`: a COMMIT waits for the other senders' finalize; an
// ABORTED or CLOSED is the receiver's event (*ready), unless another link's sender vanished without a
// word, which explains it better.
wsync_status_t link_event(Link* rx, Link* l, const wsync_receiver_event_t& lev, wsync_receiver_event_t* ev, bool* ready) {
  switch (lev.kind) {
    case WSYNC_EVENT_COMMIT:  // this sender finalized; the others may still be sending
      if (rx->sh->commit_ready == lev.version && rx->sh->links[0]->catchup_commit) {  // (a catch-up took it)
        *ev = lev;
        *ready = true;
        return WSYNC_OK;
      }
      if (rx->sh->first_end_ms == 0) rx->sh->first_end_ms = now_ms();
      return WSYNC_OK;
    case WSYNC_EVENT_ABORTED:
      if (Link* o = vanished_other(rx, l))
        return link_failed(rx, o, fail(WSYNC_ERR_PEER_FAILED, "its connection closed (the process died?)"));
      *ev = lev;
      *ready = true;
      WSYNC_LOGW("receiver rank %u: %s aborted the update", rx->rank, link_name(l).c_str());
      // The others' buckets of it were abandoned here: they must not wait for this receiver's ACK.
      for (Link* o : rx->sh->links)
        if (o != l && o->conn.open())
          send_status(o, MsgType::kNack, 0, WSYNC_ERR_ABORTED, link_name(l) + " aborted the update");
      return WSYNC_OK;
    case WSYNC_EVENT_CLOSED:  // one sender closing ends the group for this receiver
      if (Link* o = vanished_other(rx, l))
        return link_failed(rx, o, fail(WSYNC_ERR_PEER_FAILED, "its connection closed (the process died?)"));
      for (Link* o : rx->sh->links) o->closed = true;
      *ev = lev;
      *ready = true;
      return WSYNC_OK;
    default:  // a MANIFEST: its bucket is on the wire now
      return WSYNC_OK;
  }
}

// One look at link `l`: its oldest bucket, else its next control frame. *ready: `ev` is an event
// to report; *busy: something happened.
wsync_status_t look_at(Link* rx, Link* l, wsync_receiver_event_t* ev, bool* ready, bool* busy) {
  *ready = false;
  *busy = false;
  if (l->pending_commit && !void_word_next(l)) return WSYNC_OK;
  wsync_status_t st;
  if (!l->flight.empty()) {  // its frames (the next MANIFESTs, BUCKET_SUMs) are taken meanwhile
    st = bucket_step(l, ev, ready);
    // The sender abandoned its bucket: its ABORT_UPDATE, next in line, says why (often another
    // sender's failure, which it names); it is reported as the ABORTED event below.
    const bool abandoned = st == WSYNC_ERR_ABORTED && l->conn.has_frame();
    if (st != WSYNC_OK && !abandoned) return link_failed(rx, l, st);
    if (!abandoned) return WSYNC_OK;
  }
  Frame f;
  st = inbox_recv(l, &f, 0);
  if (st == WSYNC_ERR_TIMEOUT) return WSYNC_OK;
  if (st != WSYNC_OK) return link_failed(rx, l, st);
  l->last_frame_ms = now_ms();
  *busy = true;
  if (l->pending_commit) {  // its ABORT_UPDATE or CLOSE after its finalize: the version commits nowhere
    l->pending_commit = 0;
    rx->sh->first_end_ms = 0;
  }
  // (another sender aborted the update: this sender's BUCKET_SUM of a bucket abandoned here may
  // still come; found under load in ManySenders.SendersThatDisagreeOnAShapeAreRefused)
  if (leftover_of_void_update(l, f)) return WSYNC_OK;
  wsync_receiver_event_t lev = WSYNC_RECEIVER_EVENT_INIT;
  // (a catch-up that failed recorded itself: every sender was told and removes this receiver)
  if ((st = handle_frame(l, f, &lev)) != WSYNC_OK) return rx->sh->link_failed.empty() ? link_failed(rx, l, st) : st;
  return link_event(rx, l, lev, ev, ready);
}

}  // namespace

wsync_status_t links_join(const wsync_receiver_config_t* config, wsync_receiver_t* receiver) {
  Link* rx = receiver->link0();
  if (rx->num_senders <= 1) return WSYNC_OK;
  if (rx->sender != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the store at %s is sender %u's of group '%s' (%u senders); a receiver "
                "joins through sender 0's store", rx->sender_addr.c_str(), rx->sender, rx->group_name.c_str(),
                rx->num_senders);
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  std::memcpy(&c, config, std::min<size_t>(config->struct_size, sizeof c));
  c.struct_size = sizeof c;
  c.rank = rx->rank;  // (the rank sender 0 gave it, had it asked for any)
  const int64_t timeout = c.timeout_ms > 0 ? c.timeout_ms : rx->timeout_ms;
  const int64_t deadline = deadline_after(timeout);
  rx->sh->links.assign(1, rx);
  for (uint32_t k = 1; k < rx->num_senders; ++k) {
    std::vector<uint8_t> v;
    wsync_status_t st = rx->store_client->get(sender_key(k), &v, std::max<int64_t>(remaining_ms(deadline), 1));
    if (st != WSYNC_OK)
      return fail_msg(st, "sender " + std::to_string(k) + " of " + std::to_string(rx->num_senders) +
                              " never listed its store in sender 0's: " + last_error());
    const std::string addr(v.begin(), v.end());
    c.store_addr = addr.c_str();
    c.timeout_ms = std::max<int64_t>(remaining_ms(deadline), 1);
    auto link = std::make_unique<Link>(rx->sh);
    st = receiver_init(&c, link.get());
    Link* l = link.get();
    receiver->links.push_back(std::move(link));  // destroyed with the receiver, also after a failure
    if (st != WSYNC_OK) return fail_msg(st, "joining sender " + std::to_string(k) + " at " + addr + ": " + last_error());
    if (l->sender != k || l->num_senders != rx->num_senders || l->world_size != rx->world_size)
      return fail(WSYNC_ERR_PROTOCOL, "the store sender 0 lists for sender %u (%s) is sender %u of %u with %u "
                  "receivers; sender 0 announced %u senders and %u receivers", k, addr.c_str(), l->sender,
                  l->num_senders, l->world_size - 1, rx->num_senders, rx->world_size - 1);
    rx->sh->links.push_back(l);
  }
  for (Link* l : rx->sh->links) l->last_frame_ms = now_ms();
  WSYNC_LOGI("receiver rank %u joined all %u senders of group '%s'", rx->rank, rx->num_senders, rx->group_name.c_str());
  return WSYNC_OK;
}

wsync_status_t links_publish_needs(Link* rx) {
  if (!rx->store_client) return WSYNC_OK;  // (a rejoin under way: said once it joined, needs_published being 0)
  std::vector<Need> needs;
  for (const auto& kv : rx->sh->registry)
    if (kv.second.slice) {
      Need n;
      n.name = kv.first;
      n.full = false;
      n.box = kv.second.box;
      needs.push_back(std::move(n));
    }
  std::sort(needs.begin(), needs.end(), [](const Need& a, const Need& b) { return a.name < b.name; });
  // Said once, and again only when they change (registering whole buffers changes nothing).
  const std::vector<uint8_t> canon = encode_needs(rx->rank, 0, needs);
  if (rx->sh->needs_published != 0 && canon == rx->sh->needs_said) return WSYNC_OK;
  rx->sh->needs_said = canon;
  const std::vector<uint8_t> rec = encode_needs(rx->rank, ++rx->sh->needs_published, needs);
  wsync_status_t st = rx->store_client->set(needs_key(rx->group_name, rx->rank), rec.data(), rec.size());
  return st == WSYNC_OK ? st : fail_msg(st, "telling the senders what receiver rank " + std::to_string(rx->rank) +
                                                " needs (sender 0's store): " + last_error());
}

namespace {

bool all_finalized(const RxShared* sh) {
  bool all = true;
  for (const Link* l : sh->links) all &= l->pending_commit != 0;
  return all;
}

// The version a COMMIT reported (every sender finalized it, or a catch-up took it) that
// wsync_receiver_commit has not confirmed yet, else 0.
uint64_t commit_owed(const Link* rx) {
  if (rx->sh->commit_ready != 0) return rx->sh->commit_ready;
  return all_finalized(rx->sh) ? rx->pending_commit : 0;
}

// A finalized link's sender voided the update after its END_UPDATE (void_word_next): the next
// look reads it, and nothing is merged or committed meanwhile.
bool any_void_word(const RxShared* sh) {
  bool any = false;
  for (Link* l : sh->links) any |= l->pending_commit != 0 && void_word_next(l);
  return any;
}

// No event within `tmo` ms: name the senders still awaited when some finalized.
wsync_status_t links_timed_out(Link* rx, int64_t tmo) {
  std::string waiting;
  for (Link* l : rx->sh->links)
    if (rx->sh->first_end_ms != 0 && l->pending_commit == 0) waiting += (waiting.empty() ? "" : ", ") + link_name(l);
  if (!waiting.empty())
    return fail(WSYNC_ERR_TIMEOUT, "no event within %lld ms: still waiting for %s to finalize the update the "
                "others finalized (it fails at timeout_ms after the first)", static_cast<long long>(tmo),
                waiting.c_str());
  return fail(WSYNC_ERR_TIMEOUT, "no message from the %zu senders within %lld ms", rx->sh->links.size(),
              static_cast<long long>(tmo));
}

// Every link looked at once, starting at link `start` (no link starves the others); *any: one
// had something.
wsync_status_t look_at_links(Link* rx, size_t start, wsync_receiver_event_t* ev, bool* ready, bool* any) {
  *any = false;
  const size_t n = rx->sh->links.size();
  for (size_t i = 0; i < n; ++i) {
    bool busy = false;
    wsync_status_t st = look_at(rx, rx->sh->links[(start + i) % n], ev, ready, &busy);
    if (st != WSYNC_OK || *ready) return st;
    *any |= busy;
  }
  return WSYNC_OK;
}

}  // namespace

wsync_status_t links_next(Link* rx, wsync_receiver_event_t* ev, int64_t timeout_ms) {
  RxShared* sh = rx->sh;
  for (Link* l : sh->links) release_event(l);
  // Nothing registered as a slice by now: every tensor whole (the senders wait for this word).
  if (sh->needs_published == 0) {
    wsync_status_t st = links_publish_needs(rx);
    if (st != WSYNC_OK) return st;
  }
  if (!sh->link_failed.empty())
    return fail(sh->link_status, "receiver rank %u takes no more updates: %s", rx->rank, sh->link_failed.c_str());
  if (rx->closed) {
    ev->kind = WSYNC_EVENT_CLOSED;
    return WSYNC_OK;
  }
  if (const uint64_t owed = commit_owed(rx))
    return fail(WSYNC_ERR_INVALID_STATE, "version %llu is waiting for wsync_receiver_commit",
                static_cast<unsigned long long>(owed));
  const int64_t tmo = timeout_ms < 0 ? rx->timeout_ms : timeout_ms;
  const int64_t deadline = deadline_after(tmo);
  for (size_t start = 0;; start = (start + 1) % sh->links.size()) {
    bool ready = false, any = false;
    wsync_status_t st = look_at_links(rx, start, ev, &ready, &any);
    if (st != WSYNC_OK || ready) return st;
    if (all_finalized(sh) && !any_void_word(sh)) return merge_commit(rx, ev);
    if ((st = check_stragglers(rx)) != WSYNC_OK) return st;
    bool flying = false;
    for (Link* l : sh->links) flying |= !l->flight.empty();
    if (!flying && now_ms() >= deadline) return links_timed_out(rx, tmo);
    if (!any) sleep_on_links(rx, flying ? deadline_after(20) : deadline);
  }
}

namespace {

// A catch-up's version (receiver_catchup.cpp): nothing was finalized, and the senders wait for no
// COMMITTED of it. Refused here (staged bytes missing), every sender hears it as a failed catch-up.
wsync_status_t commit_caught_up(Link* rx, uint64_t version) {
  rx->sh->links.front()->catchup_commit = false;
  wsync_status_t st = check_staged_arrived(rx);
  if (st != WSYNC_OK) {
    const std::string why = "the caught-up version cannot commit: " + last_error();
    for (Link* l : rx->sh->links) {
      send_status(l, MsgType::kCatchupFailed, 0, st, why);
      l->broken = why;
    }
    drop_update(rx, why);
    rx->sh->sender_lost = false;
    rx->sh->link_status = st;
    rx->sh->link_failed = why;
    return fail(st, "%s", why.c_str());
  }
  rx->sh->committed = version;
  return apply_commit(rx);
}

}  // namespace

wsync_status_t links_commit(Link* rx, uint64_t version) {
  // Link 0's sender may have finalized while others still send: only the merged COMMIT counts.
  if (rx->sh->commit_ready == 0)
    return fail(WSYNC_ERR_INVALID_STATE, "no version to commit: wait for a WSYNC_EVENT_COMMIT first (every sender "
                "must finalize it)");
  if (version != rx->sh->commit_ready)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "version %llu does not match the version %llu every sender finalized",
                static_cast<unsigned long long>(version), static_cast<unsigned long long>(rx->sh->commit_ready));
  rx->sh->commit_ready = 0;
  Link* l0 = rx->sh->links.front();
  if (l0->catchup_commit) return commit_caught_up(rx, version);
  // A sender that removed this receiver (elastic) or voided the update since the merge: its word
  // decides, not a COMMITTED it would never read (the others would take that failure for its death).
  for (Link* l : rx->sh->links)
    if (void_word_next(l)) {
      for (Link* o : rx->sh->links) o->pending_commit = 0;
      rx->sh->first_end_ms = 0;
      Frame f;
      wsync_receiver_event_t lev = WSYNC_RECEIVER_EVENT_INIT, ev = WSYNC_RECEIVER_EVENT_INIT;
      wsync_status_t vst = inbox_recv(l, &f, 0);
      if (vst == WSYNC_OK) vst = handle_frame(l, f, &lev);  // (REMOVED: REJECTED, the receiver is out)
      if (vst != WSYNC_OK) return link_failed(rx, l, vst);
      // An ABORT_UPDATE or CLOSE: as when read before the merge (the others told, the group goes on).
      bool ready = false;
      if ((vst = link_event(rx, l, lev, &ev, &ready)) != WSYNC_OK) return vst;
      return fail(WSYNC_ERR_ABORTED, "%s %s after finalizing version %llu: it does not commit here",
                  link_name(l).c_str(), lev.kind == WSYNC_EVENT_CLOSED ? "closed the group" : "aborted the update",
                  static_cast<unsigned long long>(version));
    }
  wsync_status_t st = check_staged_arrived(rx);
  if (st != WSYNC_OK) return refuse_all(rx, st, last_error());
  // Every sender first: one that cannot be told means nothing is applied here (those before it
  // were told; their finalize returned) and the update is lost (option rejoin: the next call joins
  // again). A sender whose end closed without a word (it died after it finalized) is found before
  // anyone is told: the kernel would take its COMMITTED for a peer that is gone.
  for (Link* l : rx->sh->links)
    if (l->conn.hung_up() && inbox_next_type(l) == 0 && l->conn.closed()) {
      for (Link* o : rx->sh->links) o->pending_commit = 0;
      return link_failed(rx, l,
                         fail(WSYNC_ERR_PEER_FAILED, "it closed its connection before it heard COMMITTED of version %llu",
                              static_cast<unsigned long long>(version)));
    }
  for (Link* l : rx->sh->links) l->pending_commit = 0;
  for (Link* l : rx->sh->links)
    if ((st = l->conn.send(MsgType::kCommitted, encode_committed({version}), rx->timeout_ms)) != WSYNC_OK)
      return link_failed(rx, l, st);
  rx->sh->committed = version;
  return apply_commit(rx);
}

}  // namespace wsync
