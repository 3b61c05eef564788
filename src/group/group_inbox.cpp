// One inbox per member: every frame a receiver sends the sender is read here, and the words no
// caller waits for are handled here once, whatever the sender is doing (a bucket on the wire, a
// commit, between updates):
//   PROGRESS         its silence (a count that moved is progress; its last word says whether it
//                    waits for bytes of ours or on someone else)
//   CATCHUP_FAILED   its catch-up failed: it fails with its own words, no update's loss
//   NACK of seq 0    it refused the whole update (many senders: another sender failed)
//   a close          peer_lost: a joiner's unread CATCHUP_FAILED explains it, else it (or the relay
//                    above it that died first) failed; a close that loses nothing is only noted
// Callers see only the answers they wait for: READY, ACK and NACK of a bucket, COMMITTED.
#include "common/clock.h"
#include "common/error.h"
#include "control/frames.h"
#include "group/group_catchup.h"
#include "group/group_internal.h"

namespace wsync {
namespace {

wsync_status_t take_progress(Peer* p, const Frame& f) {
  ProgressBody b;
  if (decode_progress(f.body, &b) != WSYNC_OK)
    return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed PROGRESS: %s", p->conn.peer_name().c_str(),
                last_error().c_str());
  if (b.landed != p->silence.progress) {
    p->silence.progress = b.landed;
    p->silence.heard_ms = now_ms();
  }
  p->silence.report_ms = now_ms();
  p->silence.caught_up = b.waiting_seq == 0;
  return WSYNC_OK;
}

// A NACK that refuses the whole update (seq 0): the member's failure. Between updates it is the
// receiver's own trouble, never the sender's: it fails as a peer (elastic: it is removed).
wsync_status_t refused_update(wsync_group_t* g, Peer* p, const InboxContext& ctx, const StatusBody& nack) {
  wsync_status_t st = wire_failure(nack.status, WSYNC_ERR_PROTOCOL);
  // Elastic, many senders: it let go of the update because another sender aborted it (that sender's
  // verdict: its members fell below the quorum, say). The update fails here too, as a peer's failure
  // (send_batch or finalize: PEER_FAILED, quoting it), the receiver is not to blame (member_failed
  // keeps it), and the pipeline voids the update, not the group (group_pipeline.cpp). Found by the
  // composed soak: the trainer's finalize failed with ABORTED, then its next batch found the group
  // broken.
  if (!ctx.between_updates && st == WSYNC_ERR_ABORTED && g->cfg.elastic && g->shape.num_senders > 1 &&
      !g->pipe.aborted.load()) {
    p->blames_sender = true;
    pipeline_update_abandoned(g);  // (the pipeline voids the update, not the group)
    st = WSYNC_ERR_PEER_FAILED;
  }
  if (!ctx.between_updates)
    return fail(st, "%s refused %s: %s%s", p->conn.peer_name().c_str(), ctx.during, nack.reason.c_str(),
                fed_by_note(g, p->rank).c_str());
  if (st == WSYNC_ERR_ABORTED || st == WSYNC_ERR_INVALID_ARGUMENT || st == WSYNC_ERR_INTERNAL ||
      st == WSYNC_ERR_OUT_OF_MEMORY)
    st = WSYNC_ERR_PEER_FAILED;
  return fail(st, "%s refused between updates: %s", p->conn.peer_name().c_str(), nack.reason.c_str());
}

// Many senders: it let go of the update because another sender failed. The update fails, naming
// that sender in its words; the receiver is not to blame (member_failed keeps it).
wsync_status_t sender_lost(Peer* p, const InboxContext& ctx, const Frame& f) {
  StatusBody lost;
  if (decode_nack(f.body, &lost) != WSYNC_OK)
    return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed SENDER_LOST: %s", p->conn.peer_name().c_str(),
                last_error().c_str());
  p->blames_sender = true;
  return fail(wire_failure(lost.status, WSYNC_ERR_PEER_FAILED), "%s let go of %s because another sender failed: %s",
              p->conn.peer_name().c_str(), ctx.during, lost.reason.c_str());
}

// Its connection closed.
wsync_status_t closed(wsync_group_t* g, Peer* p, const InboxContext& ctx, InboxWord* word) {
  if (ctx.close_loses_nothing) {  // it answered everything it owed and feeds nobody
    p->left = true;
    if (g->plugins.transport_self) g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
    *word = InboxWord::kGone;
    return WSYNC_OK;
  }
  if (ctx.between_updates)
    return fail(WSYNC_ERR_PEER_FAILED, "%s closed its connection between updates (process died?)",
                p->conn.peer_name().c_str());
  return peer_lost(g, p, ctx.during);
}

}  // namespace

wsync_status_t inbox_take(wsync_group_t* g, Peer* p, const InboxContext& ctx, Frame* f, InboxWord* word) {
  for (;;) {
    *word = InboxWord::kNone;
    wsync_status_t st = p->conn.recv(f, 0);
    if (st == WSYNC_ERR_TIMEOUT) return WSYNC_OK;
    if (st == WSYNC_ERR_PEER_FAILED) return closed(g, p, ctx, word);
    if (st != WSYNC_OK) return st;  // (a malformed frame)
    switch (static_cast<MsgType>(f->type)) {
      case MsgType::kProgress:
        if ((st = take_progress(p, *f)) != WSYNC_OK) return st;
        continue;
      case MsgType::kCatchupFailed:
        return catchup_failed(g, p, *f);
      case MsgType::kNack: {
        StatusBody nack;
        if (decode_nack(f->body, &nack) == WSYNC_OK && nack.seq == 0) return refused_update(g, p, ctx, nack);
        break;  // (a bucket's refusal, a refused ROUTE_MOVE, or a malformed one: the caller judges it)
      }
      case MsgType::kSenderLost:
        return sender_lost(p, ctx, *f);
      default:
        break;
    }
    *word = InboxWord::kAnswer;
    return WSYNC_OK;
  }
}

}  // namespace wsync
