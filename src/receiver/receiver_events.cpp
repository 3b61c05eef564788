// wsync_receiver_next: one control message from the sender becomes one event. A MANIFEST is a
// bucket (receiver_bucket.cpp); END_UPDATE asks for the commit; ABORT_UPDATE voids the update;
// CLOSE ends the group.
#include <algorithm>

#include "common/clock.h"
#include "common/error.h"
#include "control/frames.h"
#include "manifest/manifest.h"
#include "receiver/receiver.h"

namespace wsync {

void release_event(Link* rx) {
  rx->ev_tensors.clear();
  rx->ev_placed.clear();
  rx->ev_owned.clear();
  rx->ev_manifest.entries.clear();
  if (rx->ev_staging.data()) rx->staging_pool.push_back(std::move(rx->ev_staging));
}

namespace {

// The update is complete on our side (no half-assembled tensor, every bucket arrived): COMMIT.
wsync_status_t end_update(Link* rx, const Frame& f, wsync_receiver_event_t* ev) {
  EndUpdateBody end;
  if (decode_end_update(f.body, &end) != WSYNC_OK)
    return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "END_UPDATE message is malformed: %s", last_error().c_str()));
  const uint64_t version = end.version, update = end.update_id, buckets = end.buckets;
  if (update != rx->sh->update && update != rx->current_update)
    rx->sh->update_void.clear();  // a later update, none of whose buckets came
  if (!rx->sh->update_void.empty())  // what arrived of it may be incomplete: never commit it
    return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender finalized version %llu of an update that cannot commit "
                              "here (%s)", static_cast<unsigned long long>(version), rx->sh->update_void.c_str()));
  // With many senders the other senders' boxes may still be coming: links_next checks the whole
  // update once every sender finalized it.
  const bool alone = rx->sh->links.size() <= 1;
  if (alone && !rx->sh->assembling.empty())
    return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender finalized version %llu while tensor '%s' was incomplete",
                              static_cast<unsigned long long>(version), rx->sh->assembling.begin()->first.c_str()));
  if (alone && check_staged_arrived(rx) != WSYNC_OK) return refuse(rx, 0, last_status());
  const uint64_t got = update == rx->current_update ? rx->expected_bucket : 0;
  if (got != buckets)
    return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender finalized version %llu after %llu buckets but this receiver "
                              "got %llu", static_cast<unsigned long long>(version),
                              static_cast<unsigned long long>(buckets), static_cast<unsigned long long>(got)));
  if (version == 0) return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender finalized version 0, which is never valid"));
  rx->current_update = update + 1;
  rx->expected_bucket = 0;
  rx->accepted_bucket = 0;
  rx->pending_commit = version;
  rx->end_has_plan = end.has_plan;
  rx->end_plan_digest = end.plan_digest;
  ev->kind = WSYNC_EVENT_COMMIT;
  ev->version = version;
  return WSYNC_OK;
}

// The sender's next control frame, within timeout_ms. Meanwhile the transports are progressed
// whenever their event fds fire (plugin ABI 1.4 progress): between buckets a transport may still
// owe the sender messages about receives that completed, and the sender's sends complete only
// once they went out.
wsync_status_t wait_frame(Link* rx, Frame* f, int64_t timeout_ms) {
  const wsync_transport_v1_t* t = rx->transport.table;
  if (!WSYNC_HAS_FIELD(t, wsync_transport_v1_t, progress) || t->progress == nullptr || rx->recv_self == nullptr)
    return inbox_recv(rx, f, timeout_ms);
  const int64_t deadline = deadline_after(timeout_ms);
  for (;;) {
    progress_transports(rx, true);
    wsync_status_t st = inbox_recv(rx, f, 0);
    if (st != WSYNC_ERR_TIMEOUT) return st;
    if (now_ms() >= deadline) return WSYNC_ERR_TIMEOUT;
    sleep_on_transports(rx, deadline, 1000);
  }
}

// A bucket failed because the sender's connection is gone (a READY or ACK found it reset, or it
// closed while the bytes came), but the sender said why before it went: its ABORT_UPDATE or CLOSE,
// behind this update's MANIFESTs and BUCKET_SUMs, was kept from the socket. That word is the
// event, not "gone" (the update is void either way). Anything else: `st` as it was.
wsync_status_t said_why_instead(Link* rx, wsync_status_t st, wsync_receiver_event_t* ev) {
  if (st != WSYNC_ERR_PEER_FAILED || rx->conn.open()) return st;
  const std::string why = last_error();
  const bool said = sender_said_why_already(rx);  // (drops the update's MANIFESTs and BUCKET_SUMs)
  const uint16_t next = said ? rx->conn.next_type() : 0;
  Frame word;
  const bool word_is_why =
      next == static_cast<uint16_t>(MsgType::kAbortUpdate) || next == static_cast<uint16_t>(MsgType::kClose);
  if (!said || !word_is_why || rx->conn.recv(&word, 0) != WSYNC_OK) {
    restore_error(st, why);
    return st;
  }
  clear_error();
  return handle_frame(rx, word, ev);
}

}  // namespace

// What is still coming of an update this receiver voided on its own (it refused a bucket, or the
// relay feeding it died: its NACK is on the way): that update's BUCKET_SUMs and MANIFESTs are
// dropped, not refused again. The sender's word on the update (END_UPDATE, ABORT_UPDATE, CLOSE)
// and the next update are taken as usual.
bool leftover_of_void_update(const Link* rx, const Frame& f) {
  const bool voided = !rx->sh->update_void.empty();
  if (f.type == static_cast<uint16_t>(MsgType::kBucketSum)) return voided;
  if (f.type != static_cast<uint16_t>(MsgType::kManifest)) return false;
  // (many senders: one sender's late MANIFEST of an update another's ABORT_UPDATE ended, seen after
  // the next update began: superseded)
  if (!voided && rx->sh->links.size() <= 1) return false;
  ManifestFrameBody body;
  Manifest m;
  if (decode_manifest_frame(f.body, &body) != WSYNC_OK ||
      decode_manifest(body.manifest.data(), body.manifest.size(), &m) != WSYNC_OK) {
    clear_error();
    return false;  // (refused as malformed by the usual path)
  }
  // (the voided update is the shared one: a link whose sender finalized it may show the next
  // update's MANIFEST first, which is not a leftover)
  return m.update_id < rx->sh->update || (voided && m.update_id == rx->sh->update);
}

wsync_status_t receiver_next(Link* rx, wsync_receiver_event_t* ev, int64_t timeout_ms) {
  if (rx->sh->links.size() > 1) return links_next(rx, ev, timeout_ms);
  release_event(rx);
  // One planning sender: it waits for this receiver's needs (none registered: every tensor whole).
  if (rx->planned && rx->sh->needs_published == 0) {
    wsync_status_t st = links_publish_needs(rx);
    if (st != WSYNC_OK) return st;
  }
  if (rx->closed) {
    ev->kind = WSYNC_EVENT_CLOSED;
    return WSYNC_OK;
  }
  if (rx->pending_commit)
    return fail(WSYNC_ERR_INVALID_STATE, "version %llu is waiting for wsync_receiver_commit",
                static_cast<unsigned long long>(rx->pending_commit));
  if (!rx->flight.empty())  // the next bucket is on the wire already
    return said_why_instead(rx, complete_bucket(rx, ev), ev);
  const int64_t tmo = timeout_ms < 0 ? rx->timeout_ms : timeout_ms;
  const int64_t deadline = deadline_after(tmo);
  for (;;) {  // (a frame that makes no event, a catch-up served: the next one, within the time left)
    Frame f;
    wsync_status_t st = wait_frame(rx, &f, std::max<int64_t>(deadline - now_ms(), 0));
    if (st == WSYNC_ERR_TIMEOUT)
      return fail(WSYNC_ERR_TIMEOUT, "no message from the sender within %lld ms", static_cast<long long>(tmo));
    if (st != WSYNC_OK) {  // the sender is gone: its update never commits here
      const std::string why = last_error();
      drop_update(rx, why);
      return fail_msg(st, why);
    }
    if (leftover_of_void_update(rx, f)) continue;
    if ((st = handle_frame(rx, f, ev)) != WSYNC_OK) return said_why_instead(rx, st, ev);
    // A MANIFEST: the bucket is on the wire; report it once its bytes are in.
    if (ev->kind == WSYNC_EVENT_NONE && !rx->flight.empty()) return said_why_instead(rx, complete_bucket(rx, ev), ev);
    if (ev->kind != WSYNC_EVENT_NONE) return WSYNC_OK;
  }
}

wsync_status_t handle_frame(Link* rx, const Frame& f, wsync_receiver_event_t* ev) {
  switch (static_cast<MsgType>(f.type)) {
    case MsgType::kManifest:
      return accept_manifest(rx, f);
    case MsgType::kEndUpdate:
      return end_update(rx, f, ev);
    case MsgType::kAbortUpdate: {
      // Malformed or not, an abort from the sender voids the update.
      AbortUpdateBody abort;
      const std::string why = decode_abort_update(f.body, &abort) == WSYNC_OK
                                  ? abort.reason
                                  : "(its ABORT_UPDATE was malformed: " + last_error() + ")";
      WSYNC_LOGW("receiver rank %u: the sender aborted the update: %s", rx->rank, why.c_str());
      // The sender's group is broken: this update never commits.
      drop_update(rx, "the sender aborted it: " + why);
      ev->kind = WSYNC_EVENT_ABORTED;
      return WSYNC_OK;
    }
    case MsgType::kRemoved: {  // (elastic groups of many senders: this sender removed us)
      RemovedBody removed;
      const std::string why = decode_removed(f.body, &removed) == WSYNC_OK
                                  ? removed.reason
                                  : "(its REMOVED was malformed: " + last_error() + ")";
      drop_update(rx, "removed from the group: " + why);
      return fail(WSYNC_ERR_REJECTED, "receiver rank %u was removed from group '%s' by its sender: %s", rx->rank,
                  rx->group_name.c_str(), why.c_str());
    }
    case MsgType::kCatchup:  // (elastic groups, between updates: receiver_catchup.cpp)
      return catchup(rx, f, ev);
    case MsgType::kClose:  // an update in progress ends here without a commit
      drop_update(rx, "the sender closed the group");
      rx->closed = true;
      ev->kind = WSYNC_EVENT_CLOSED;
      return WSYNC_OK;
    default:
      return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "unexpected %s message from the sender", msg_type_name(f.type)));
  }
}

}  // namespace wsync
