// One bucket on the wire, on every receiver's control channel:
//
//   MANIFEST(seq, manifest, transport blob) ->  <- READY(seq, blob)   the receive is posted
//   transport send_post(seq + i), each piece    bytes move on the data plane
//   BUCKET_SUM(seq, checksum) ->                (a checksum that follows: hashed while they move)
//                                           <- ACK(seq, status, blob) the bytes are in place
//
// Up to `window` buckets are on the wire at once: the next MANIFEST does not wait for this ACK.
//
// Blobs are the transports' per-bucket side channel (plugin ABI 1.2): the core carries them and
// hands them to the transport without reading them.
#include "group/group_bucket.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "control/frames.h"
#include "group/group_internal.h"
#include "group/group_catchup.h"
#include "group/group_members.h"
#include "manifest/manifest.h"

namespace wsync {
namespace {

const wsync_transport_v1_t* tp(wsync_group_t* g) { return g->plugins.transport.table; }

// The receivers bucket `b` goes to (its delivery, from the plan).
bool in_audience(const InflightBucket& b, const Peer* p) { return b.delivery.awaits(p->rank); }

// Who takes part in bucket `b`: the delivery plan asked for its segment (many senders: the
// receivers that need its boxes) and the members now.
BucketDelivery delivery_of(const wsync_group_t* g, const InflightBucket& b) {
  const Batch& batch = *b.batch;
  const std::vector<uint32_t>* segment =
      batch.segments.empty() ? nullptr : &batch.segments[batch.bucket_segment[b.index]].ranks;
  std::vector<uint32_t> members;
  for (const auto& p : g->members.peers)
    if (!p->dropped) members.push_back(p->rank);
  return g->route.delivery.bucket(segment, members);
}

std::vector<uint8_t> encode_bucket_manifest(wsync_group_t* g, const InflightBucket& b) {
  const PlanBucket& pb = b.batch->plan[b.index];
  Manifest m;
  m.update_id = g->wire.update_id;
  m.bucket_index = b.number;
  m.bucket_bytes = pb.bytes;
  if (g->shape.verify_payload) {
    m.flags |= kManifestFlagPayloadChecksum;
    if (b.sum_follows) m.flags |= kManifestFlagChecksumFollows;
    else m.payload_checksum = b.checksum;
  }
  m.entries.reserve(pb.entries.size());
  for (const auto& e : pb.entries) {
    const wsync_tensor_t& x = b.batch->tensors[e.tensor_index];
    ManifestEntry me;
    me.name = x.name;
    me.dtype = x.dtype;
    me.ndim = x.ndim;
    for (int d = 0; d < x.ndim && d < WSYNC_MAX_NDIM; ++d) me.shape[d] = x.shape[d];
    if (!b.batch->owned.empty()) {  // many senders: the full tensor's shape and this sender's box of it
      const OwnedTensor& o = b.batch->owned[e.tensor_index];
      m.flags |= kManifestFlagBoxes;
      for (int d = 0; d < o.ndim && d < WSYNC_MAX_NDIM; ++d) me.shape[d] = o.shape[d];
      me.box = o.box;
    }
    me.bucket_offset = e.bucket_offset;
    me.length = e.length;
    me.tensor_bytes = x.nbytes;
    me.tensor_offset = e.tensor_offset;
    m.entries.push_back(std::move(me));
  }
  return encode_manifest(m);
}

wsync_buffer_t bucket_buffer(wsync_group_t* g, const InflightBucket& b) {
  wsync_buffer_t buf = WSYNC_BUFFER_INIT;
  buf.data = b.data;
  buf.len = b.batch->plan[b.index].bytes;
  if (b.on_device) {
    buf.device_type = WSYNC_DEVICE_CUDA;
    buf.device_index = g->dev.device;
    buf.stream = g->dev.copy_stream;
  }
  return buf;
}

// The transport's blob for this bucket's MANIFEST (empty when it has nothing to say).
wsync_status_t describe_send(wsync_group_t* g, const InflightBucket& b, std::vector<uint8_t>* blob) {
  auto fn = WSYNC_HAS_FIELD(tp(g), wsync_transport_v1_t, describe_send) ? tp(g)->describe_send : nullptr;
  blob->clear();
  if (fn == nullptr || b.batch->plan[b.index].bytes == 0) return WSYNC_OK;
  blob->resize(WSYNC_BLOB_MAX_BYTES);
  uint64_t len = 0;
  const wsync_buffer_t buf = bucket_buffer(g, b);
  clear_error();
  wsync_status_t st = fn(g->plugins.transport_self, b.seq, &buf, blob->data(), blob->size(), &len);
  if (st != WSYNC_OK)
    return fail(st, "transport '%s' could not describe %s: %s", tp(g)->name, b.what.c_str(),
                plugin_error("transport", tp(g)->name).c_str());
  if (len > WSYNC_BLOB_MAX_BYTES)
    return fail(WSYNC_ERR_INTERNAL, "transport '%s' wrote %llu bytes of side-channel data, more than %u", tp(g)->name,
                static_cast<unsigned long long>(len), WSYNC_BLOB_MAX_BYTES);
  blob->resize(len);
  return WSYNC_OK;
}

// A receiver's blob, to the transport. A transport that cannot take one while the receiver's sends
// them runs another plugin version.
wsync_status_t deliver_blob(wsync_group_t* g, const InflightBucket& b, Peer* p, int32_t kind,
                            const std::vector<uint8_t>& blob) {
  if (blob.empty()) return WSYNC_OK;
  auto fn = WSYNC_HAS_FIELD(tp(g), wsync_transport_v1_t, peer_blob) ? tp(g)->peer_blob : nullptr;
  if (fn == nullptr)
    return fail(WSYNC_ERR_VERSION_MISMATCH, "%s sent transport data with %s, which transport '%s' on the sender cannot "
                "read (use the same transport plugin release on both sides)", p->conn.peer_name().c_str(),
                b.what.c_str(), tp(g)->name);
  clear_error();
  wsync_status_t st = fn(g->plugins.transport_self, b.seq, p->rank, kind, blob.data(), blob.size());
  return st == WSYNC_OK ? st
                        : fail(st, "transport '%s' refused what %s sent about %s: %s", tp(g)->name,
                               p->conn.peer_name().c_str(), b.what.c_str(), last_error().c_str());
}

// One frame from `p` while the sender waits for `expect` about the bucket: the expected one
// (its blob delivered), or the receiver's refusal, or nonsense.
wsync_status_t judge_reply(wsync_group_t* g, const InflightBucket& b, Peer* p, MsgType expect, const Frame& f) {
  const std::string& who = p->conn.peer_name();
  const bool nack = f.type == static_cast<uint16_t>(MsgType::kNack);
  uint64_t got = 0;
  std::vector<uint8_t> blob;
  if (nack || f.type == static_cast<uint16_t>(MsgType::kAck)) {
    StatusBody s;
    if ((nack ? decode_nack(f.body, &s) : decode_ack(f.body, &s)) != WSYNC_OK)
      return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed %s: %s", who.c_str(), msg_type_name(f.type),
                  last_error().c_str());
    if (nack || s.status != WSYNC_OK)
      return fail(wire_failure(s.status, WSYNC_ERR_PROTOCOL), "%s refused %s: %s%s", who.c_str(), b.what.c_str(),
                  s.reason.c_str(), fed_by_note(g, p->rank).c_str());
    got = s.seq;
    blob = std::move(s.blob);
  } else if (f.type == static_cast<uint16_t>(MsgType::kReady)) {
    ReadyBody r;
    if (decode_ready(f.body, &r) != WSYNC_OK)
      return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed READY: %s", who.c_str(), last_error().c_str());
    got = r.seq;
    blob = std::move(r.blob);
  } else {
    return fail(WSYNC_ERR_PROTOCOL, "%s sent %s while the sender waited for %s(seq %llu) of %s", who.c_str(),
                msg_type_name(f.type), msg_type_name(static_cast<uint16_t>(expect)),
                static_cast<unsigned long long>(b.seq), b.what.c_str());
  }
  if (f.type != static_cast<uint16_t>(expect) || got != b.seq)
    return fail(WSYNC_ERR_PROTOCOL, "%s sent %s(seq %llu) while the sender waited for %s(seq %llu) of %s", who.c_str(),
                msg_type_name(f.type), static_cast<unsigned long long>(got),
                msg_type_name(static_cast<uint16_t>(expect)), static_cast<unsigned long long>(b.seq), b.what.c_str());
  return deliver_blob(g, b, p, expect == MsgType::kReady ? WSYNC_BLOB_READY : WSYNC_BLOB_ACK, blob);
}

// The bucket of the flight the frame `f` from `p` answers: the oldest that waits for that kind of
// answer from p (a READY; an ACK or NACK once p said READY for it), or nullptr.
InflightBucket* answered_by(Flight* flight, Peer* p, uint16_t type) {
  const bool ready = type == static_cast<uint16_t>(MsgType::kReady);
  for (auto& b : *flight) {
    const bool wants_ready = std::find(b->want_ready.begin(), b->want_ready.end(), p) != b->want_ready.end();
    if (ready && wants_ready) return b.get();
    if (!ready && wants_ready) return b.get();  // an ACK before the READY: judge_reply names it
    if (!ready && std::find(b->want_ack.begin(), b->want_ack.end(), p) != b->want_ack.end()) return b.get();
  }
  return nullptr;
}

void forget(std::vector<Peer*>* v, Peer* p) { v->erase(std::remove(v->begin(), v->end(), p), v->end()); }

// Some bucket of the flight still waits for a READY or an ACK from `p`.
bool awaited(const Flight& flight, const Peer* p) {
  for (const auto& b : flight)
    if (std::find(b->want_ready.begin(), b->want_ready.end(), p) != b->want_ready.end() ||
        std::find(b->want_ack.begin(), b->want_ack.end(), p) != b->want_ack.end())
      return true;
  return false;
}

// `p`'s answer `f` (a READY, an ACK or a NACK of a bucket): taken off the bucket it answers.
wsync_status_t take_answer(wsync_group_t* g, Flight* flight, Peer* p, const Frame& f) {
  InflightBucket* b = flight->empty() ? nullptr : answered_by(flight, p, f.type);
  StatusBody nack;
  if (f.type == static_cast<uint16_t>(MsgType::kNack) && decode_nack(f.body, &nack) == WSYNC_OK)
    for (auto& x : *flight)
      if (x->seq == nack.seq) b = x.get();  // a refusal names its bucket
  if (b == nullptr)
    return fail(WSYNC_ERR_PROTOCOL, "%s sent %s while no bucket on the wire waited for one from it",
                p->conn.peer_name().c_str(), msg_type_name(f.type));
  const bool wants_ready = std::find(b->want_ready.begin(), b->want_ready.end(), p) != b->want_ready.end();
  wsync_status_t st = judge_reply(g, *b, p, wants_ready ? MsgType::kReady : MsgType::kAck, f);
  if (st != WSYNC_OK) return st;
  forget(wants_ready ? &b->want_ready : &b->want_ack, p);
  p->silence.heard_ms = now_ms();
  if (wants_ready) p->silence.caught_up = false;  // (it posted receives: it waits for bytes now)
  // (its frames come in order: it is past them; its own flag too when its source answered first,
  // which took their catch-up off the book)
  if (p->catchup.running || !g->catchups.open.empty()) catchup_done(g, p->rank);
  return WSYNC_OK;
}

// Read what the receivers sent so far, through their inboxes, and take each answer off its
// bucket; relays before the receivers downstream of them.
wsync_status_t take_replies(wsync_group_t* g, Flight* flight) {
  for (Peer* p : peers_upstream_first(g)) {
    for (;;) {
      if (!p->alive || p->left) break;
      InboxContext ctx;
      const InflightBucket* owed = flight->empty() ? nullptr : answered_by(flight, p, 0);  // (the oldest it owes)
      ctx.during = owed != nullptr ? owed->what.c_str() : flight->empty() ? "an update" : flight->front()->what.c_str();
      // (a relay's close is a failure whatever it answered: the receivers downstream lost their
      // source, and would otherwise be blamed when they give up)
      ctx.close_loses_nothing = !awaited(*flight, p) && !relays_to_others(g, p->rank);
      Frame f;
      InboxWord word = InboxWord::kNone;
      wsync_status_t st = inbox_take(g, p, ctx, &f, &word);
      if (st == WSYNC_OK && word != InboxWord::kAnswer) break;
      if (st == WSYNC_OK) st = take_answer(g, flight, p, f);
      if (st == WSYNC_OK) continue;
      // (membership=elastic: a receiver that failed is removed, and the others go on)
      if ((st = member_failed(g, flight, p, st)) != WSYNC_OK) return st;
      break;
    }
  }
  return WSYNC_OK;
}

// A transport error: a receiver that died explains it best. Its control connection may close a
// moment after the transport noticed (a killed process's sockets reset one by one): look for a
// while (kDeathWindowMs) before blaming the transport. So does a receiver that says why it let go
// (many senders: a NACK naming another sender that failed, after which it drops this sender's
// transport too): what the receivers said is read in that window as well.
constexpr int64_t kDeathWindowMs = 300;
// Elastic membership: the dead receiver is removed and WSYNC_OK returned (the others' ACKs say
// whether the bytes reached them).
wsync_status_t transport_failed(wsync_group_t* g, Flight* flight, const InflightBucket& b, wsync_status_t st) {
  const std::string why = plugin_error("transport", tp(g)->name);
  const int64_t until = deadline_after(kDeathWindowMs);
  for (;;) {
    WaitSet w;
    bool said = false;
    for (auto& p : g->members.peers) {
      if (!p->alive) continue;
      p->conn.pump();
      if (p->conn.closed() && !p->conn.has_frame())
        return member_failed(g, flight, p.get(), peer_lost(g, p.get(), b.what.c_str()));
      said = said || p->conn.has_frame();
      if (p->conn.open()) w.peers.push_back(p.get());
    }
    if (said) {  // (a refusal names its cause; anything else is taken as usual)
      const wsync_status_t st_said = take_replies(g, flight);
      if (st_said != WSYNC_OK) return st_said;
    }
    if (now_ms() >= until || g->pipe.aborted.load()) break;
    wait_for_progress(g, w, until);
  }
  return fail(st, "transport '%s' failed during %s: %s", tp(g)->name, b.what.c_str(), why.c_str());
}

// A bucket's pieces go out a few at a time, in order: a transport that moves every posted message
// at once (UCX over TCP interleaves them) would otherwise finish the first piece only near the end
// of the bucket, and a relay could forward nothing until then.
constexpr size_t kPiecesOnTheWire = 8;

wsync_status_t post_more(wsync_group_t* g, InflightBucket* b) {
  b->delivery = delivery_of(g, *b);  // (members removed since its MANIFEST are not posted to)
  const std::vector<uint32_t>& ranks = b->delivery.targets;  // (relays forward to the others)
  for (; b->next_piece < b->pieces.size() && b->unsent.size() < kPiecesOnTheWire; ++b->next_piece) {
    const size_t i = b->next_piece;
    wsync_buffer_t buf = bucket_buffer(g, *b);
    buf.data = b->data + b->pieces[i].offset;
    buf.len = b->pieces[i].len;
    clear_error();
    wsync_status_t st = tp(g)->send_post(g->plugins.transport_self, b->seq + i, &buf, ranks.data(), static_cast<uint32_t>(ranks.size()));
    if (st != WSYNC_OK)
      return fail(st, "transport '%s' could not start %s: %s", tp(g)->name, b->what.c_str(),
                  plugin_error("transport", tp(g)->name).c_str());
    b->posted = true;
    b->unsent.push_back(b->seq + i);
  }
  return WSYNC_OK;
}

// Every receiver ACKed the bucket: its bytes landed everywhere. A transport error on one of its
// sends after that (a receiver that ACKed and closed before the sender's transport saw its own
// completion) is no loss.
bool acked_by_all(const wsync_group_t* g, const InflightBucket& b) {
  return !g->members.peers.empty() && b.want_ready.empty() && b.want_ack.empty() && b.next_piece == b.pieces.size();
}

// The transport's sends of the flight's pieces, in order, until one is still moving.
wsync_status_t take_sends(wsync_group_t* g, Flight* flight) {
  for (auto& b : *flight) {
    while (!b->unsent.empty()) {
      wsync_status_t st = poll_transport(g, b->unsent.front());
      if (st == WSYNC_ERR_TIMEOUT) return WSYNC_OK;
      if (st != WSYNC_OK && !acked_by_all(g, *b)) {
        if ((st = transport_failed(g, flight, *b, st)) != WSYNC_OK) return st;
        continue;  // (elastic: the dead receiver was removed; the same piece again, for the others)
      }
      b->unsent.erase(b->unsent.begin());
      b->deadline = deadline_after(b->batch->timeout_ms);  // (the transport moves: silence starts again)
      if ((st = post_more(g, b.get())) != WSYNC_OK) return st;  // the next piece takes its place
    }
    if (b->next_piece == b->pieces.size()) {
      b->posted = false;
      // (sent from the caller's memory: its first hops have the bytes. Packed into CUDA staging: when
      // every receiver acknowledged it, as the copy into staging is not waited for on the host.)
      if (b->from_caller && (!b->sum_follows || b->sum_taken)) bucket_release(g, b.get());
    }
  }
  return WSYNC_OK;
}

// A receiver the flight waits for, with what it owes first (the oldest bucket that awaits it).
struct Awaited {
  Peer* p;
  InflightBucket* b;
  bool ready;  // it owes b's READY (else its ACK)
};

std::vector<Awaited> awaited_peers(const Flight& flight) {
  std::vector<Awaited> out;
  auto add = [&out](Peer* p, InflightBucket* b, bool ready) {
    for (const Awaited& a : out)
      if (a.p == p) return;
    out.push_back({p, b, ready});
  };
  for (const auto& b : flight) {
    for (Peer* p : b->want_ready) add(p, b.get(), true);
    if (b->moving)  // (until then they wait for the sender, which waits for another's READY)
      for (Peer* p : b->want_ack) add(p, b.get(), false);
  }
  return out;
}

// The relay that feeds `rank` (its parent in the route) when the sender heard nothing from it for
// half of `timeout_ms` (no answer, no report: a relay that waits reports every 250 ms), else
// nullptr. (Half: its last word may have come a moment after the starving receiver's last piece.)
Peer* silent_relay_feeding(wsync_group_t* g, uint32_t rank, int64_t timeout_ms) {
  if (!g->route.relays || rank >= g->route.plan.parent.size()) return nullptr;
  const uint32_t r = g->route.plan.parent[rank];
  if (r == 0 || r > g->members.peers.size() || !g->members.peers[r - 1]) return nullptr;
  Peer* relay = g->members.peers[r - 1].get();
  if (!relay->alive || relay->dropped) return nullptr;
  return now_ms() - std::max(relay->silence.heard_ms, relay->silence.report_ms) >= timeout_ms / 2 ? relay : nullptr;
}

// Who the silent receivers point at: those that stopped themselves, and for a receiver that still
// reports while it starves below a silent relay, that relay (the receivers it starves in
// *starving). Every silent one when all of them only wait on others.
std::vector<Peer*> blame_set(wsync_group_t* g, const std::vector<Awaited>& silent, std::vector<const Peer*>* starving) {
  std::vector<Peer*> set;
  const int64_t now = now_ms();
  for (const Awaited& a : silent) {
    const bool reports = now - a.p->silence.report_ms <= a.b->batch->timeout_ms / 2;
    if (a.p->silence.caught_up && reports) continue;  // (it waits on others)
    Peer* relay = reports && !a.ready ? silent_relay_feeding(g, a.p->rank, a.b->batch->timeout_ms) : nullptr;
    if (relay != nullptr) starving->push_back(a.p);
    Peer* blame = relay != nullptr ? relay : a.p;
    if (std::find(set.begin(), set.end(), blame) == set.end()) set.push_back(blame);
  }
  if (set.empty())
    for (const Awaited& a : silent) set.push_back(a.p);
  return set;
}

// Why `p` is named: what it owed and for how long; a relay named for the receivers it starves says
// which wait on it.
std::string silence_word(wsync_group_t* g, const std::vector<Awaited>& silent, const std::vector<const Peer*>& starving,
                         const Peer* p) {
  const auto owed = [&silent](const Peer* q) -> const Awaited* {
    for (const Awaited& a : silent)
      if (a.p == q) return &a;
    return nullptr;
  };
  const Awaited* a = owed(p);
  if (a == nullptr && !starving.empty() && owed(starving.front()) != nullptr) {
    const Awaited& w = *owed(starving.front());
    std::string below;
    for (const Peer* q : starving) below += (below.empty() ? "" : ", ") + std::to_string(q->rank);
    return "made no progress within " + std::to_string(w.b->batch->timeout_ms) + " ms: receiver rank(s) " + below +
           ", fed by it, still wait for the bytes of " + w.b->what + " and it said nothing since" + fed_by_note(g, p->rank);
  }
  if (a == nullptr) a = &silent.front();
  return "made no progress within " + std::to_string(a->b->batch->timeout_ms) +
         " ms (no piece landed, no answer) while the sender waited for its " + (a->ready ? "READY" : "ACK") + " of " +
         a->b->what + fed_by_note(g, p->rank);
}

// Receivers that made no progress (no READY, ACK, or PROGRESS whose count moved) for the timeout
// of what they owe, named. Those that wait for bytes are the ones that stopped; one that holds every
// piece it asked for and still reports so waits on someone else (a relay on its children), unless
// all silent ones do. (A relay that stopped right after its last piece landed said it held them
// all, then went quiet: its reports are stale, and it is named.)
// With relays, the first that stopped on each path (its parent not among them); and a receiver
// that still reports while it waits for bytes that do not come, fed by a relay, waits on that relay
// (which may have answered every bucket already: its forwarding then sits in its sockets, on a
// link that went down), so the relay is named. Elastic membership: they are removed, each named,
// and the flight goes on with the others.
wsync_status_t silence(wsync_group_t* g, Flight* flight, const std::vector<Awaited>& silent) {
  std::vector<const Peer*> starving;  // (still reporting, waiting for bytes from a relay)
  const std::vector<Peer*> failed = upstream_of_set(g, blame_set(g, silent, &starving));
  const auto word = [&](const Peer* p) { return silence_word(g, silent, starving, p); };
  // (when every receiver left is silent, the sender's side is the likelier cause: a timeout, as fixed)
  if (g->cfg.elastic && failed.size() < members_left_in(g)) {
    for (Peer* p : failed) {
      wsync_status_t st = fail(WSYNC_ERR_TIMEOUT, "%s %s", p->conn.peer_name().c_str(), word(p).c_str());
      if ((st = member_failed(g, flight, p, st)) != WSYNC_OK) return st;
    }
    return WSYNC_OK;
  }
  std::string down;
  for (Peer* p : failed) down += downstream_note(g, p->rank);
  return fail(WSYNC_ERR_TIMEOUT, "%s %s%s", peer_names(failed).c_str(), word(failed.front()).c_str(), down.c_str());
}

// Every receiver answered the bucket, the transport did not finish its sends for its timeout
// (counted from the last send that finished): its own word names the rank it waits for.
wsync_status_t transport_timed_out(wsync_group_t* g, InflightBucket* b) {
  clear_error();
  const bool still = tp(g)->send_wait(g->plugins.transport_self, b->unsent.front(), 0) == WSYNC_ERR_TIMEOUT;
  const std::string said = still ? last_error() : std::string();
  return fail(WSYNC_ERR_TIMEOUT, "transport '%s' did not deliver %s: no send finished within %lld ms%s%s", tp(g)->name,
              b->what.c_str(), static_cast<long long>(b->batch->timeout_ms), said.empty() ? "" : ": ", said.c_str());
}

// The awaited receivers silent for the timeout of what they owe, and (*deadline) when the next
// one will be. What they said while this thread was busy (e.g. posting a bucket's pieces) is read
// before anyone is called silent.
wsync_status_t find_silent(wsync_group_t* g, Flight* flight, std::vector<Awaited>* silent, int64_t* deadline) {
  for (int look = 0; look < 2; ++look) {
    const int64_t now = now_ms();
    silent->clear();
    *deadline = INT64_MAX;
    for (const Awaited& a : awaited_peers(*flight)) {
      const int64_t due = a.p->silence.heard_ms + a.b->batch->timeout_ms;
      if (now >= due)
        silent->push_back(a);
      else
        *deadline = std::min(*deadline, due);
    }
    if (silent->empty() || look == 1) break;
    wsync_status_t st = take_replies(g, flight);
    if (st != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

// Sends only the transport still has (every receiver of their bucket answered) are bounded by the
// last send that finished; *deadline lowered to the next such bound, w->transport_seq set.
wsync_status_t check_sends(wsync_group_t* g, Flight* flight, WaitSet* w, int64_t* deadline) {
  const int64_t now = now_ms();
  for (auto& b : *flight) {
    if (b->unsent.empty()) continue;
    if (w->transport_seq == 0) w->transport_seq = b->unsent.front();
    if (!b->want_ready.empty() || !b->want_ack.empty()) continue;  // (its receivers' silence bounds it)
    if (now >= b->deadline) return transport_timed_out(g, b.get());
    *deadline = std::min(*deadline, b->deadline);
  }
  return WSYNC_OK;
}

// Wait until `done()` holds, taking replies and sends for the whole flight meanwhile. What bounds
// the wait is silence: each awaited receiver's last progress plus the timeout of what it owes, and
// for sends only the transport still has, the last send that finished.
wsync_status_t await(wsync_group_t* g, Flight* flight, const std::function<bool()>& done) {
  for (;;) {
    wsync_status_t st = flight_progress(g, flight);
    if (st != WSYNC_OK) return st;
    if (done()) return WSYNC_OK;
    if (g->pipe.aborted.load())
      return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted during %s", g->cfg.group_name.c_str(),
                  flight->empty() ? "an update" : flight->front()->what.c_str());
    std::vector<Awaited> silent;
    int64_t deadline = INT64_MAX;
    if ((st = find_silent(g, flight, &silent, &deadline)) != WSYNC_OK) return st;
    if (!silent.empty()) {
      if ((st = silence(g, flight, silent)) != WSYNC_OK) return st;
      continue;  // (elastic: the silent ones were removed; look again at once)
    }
    WaitSet w;
    if ((st = check_sends(g, flight, &w, &deadline)) != WSYNC_OK) return st;
    for (auto& p : g->members.peers)
      if (p->alive) w.peers.push_back(p.get());
    wait_for_progress(g, w, deadline == INT64_MAX ? now_ms() + 1000 : deadline);
  }
}

wsync_status_t send_manifest(wsync_group_t* g, Flight* flight, const InflightBucket& b, const std::vector<uint8_t>& blob) {
  const std::vector<uint8_t> body = encode_manifest_frame({b.seq, encode_bucket_manifest(g, b), blob});
  for (auto& p : g->members.peers) {
    if (p->dropped || !in_audience(b, p.get())) continue;
    p->buckets++;  // END_UPDATE tells each receiver how many it was sent
    wsync_status_t st = p->conn.send(MsgType::kManifest, body, b.batch->timeout_ms);
    if (st == WSYNC_ERR_PEER_FAILED) st = peer_lost(g, p.get(), b.what.c_str());
    if (st != WSYNC_OK && (st = member_failed(g, flight, p.get(), st)) != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

wsync_status_t post(wsync_group_t* g, InflightBucket* b) { return post_more(g, b); }

// The checksum of bytes sent from the caller's memory, taken while they move: on the group's
// hasher thread, while this thread progresses the flight (over TCP the sender's progress does the
// socket copies, and a hash on this thread let the wire idle), then BUCKET_SUM to every receiver.
wsync_status_t send_sum(wsync_group_t* g, InflightBucket* b, Flight* flight) {
  PayloadHasher& h = g->wire.sum_hasher;
  h.reset();
  h.set_wake_fd(g->pipe.wake_fd);
  const PlanBucket& pb = b->batch->plan[b->index];
  // In bucket order, as the receiver hashes them, and in slices: a cancel waits for one slice only.
  constexpr uint64_t kSumSlice = 1u << 20;
  for (const Piece& slice : cut_pieces(pb.bytes, kSumSlice)) {
    const uint64_t end = slice.offset + slice.len;
    for (const auto& e : pb.entries) {
      const uint64_t from = std::max(e.bucket_offset, slice.offset), to = std::min(e.bucket_offset + e.length, end);
      if (to > from) h.feed(b->data + from, to - from);
    }
  }
  wsync_status_t st = await(g, flight, [&h] { return h.idle(); });
  if (st != WSYNC_OK) {
    h.cancel();  // it must not read the caller's memory after this call failed
    return st;
  }
  b->checksum = h.digest();
  b->sum_taken = true;
  if (b->from_caller && b->unsent.empty() && b->next_piece == b->pieces.size()) bucket_release(g, b);
  const std::vector<uint8_t> body = encode_bucket_sum({b->seq, b->checksum});
  for (auto& p : g->members.peers) {
    if (p->dropped || !in_audience(*b, p.get())) continue;
    p->silence.heard_ms = std::max(p->silence.heard_ms, now_ms());  // (one that holds every piece waited for this)
    if ((st = p->conn.send(MsgType::kBucketSum, body, b->batch->timeout_ms)) == WSYNC_ERR_PEER_FAILED)
      st = peer_lost(g, p.get(), b->what.c_str());
    if (st != WSYNC_OK && (st = member_failed(g, flight, p.get(), st)) != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

}  // namespace

void bucket_release(wsync_group_t* g, InflightBucket* b) {
  if (b->released) return;
  b->released = true;
  batch_bucket_released(g, b->batch);
}

void announce_group_aborted(wsync_group_t* g) {
  if (g->wire.bucket_in_update == 0) g->wire.abort_announced = true;  // between updates: receivers have nothing to drop
  else announce_abort(g, "the sender aborted the group");
}

void wire_next_update(wsync_group_t* g) {
  g->wire.abort_announced = false;
  g->wire.update_id++;
  g->wire.bucket_in_update = 0;
  for (auto& p : g->members.peers) p->buckets = 0;
}

void announce_abort(wsync_group_t* g, const std::string& why) {
  if (g->wire.abort_announced) return;
  g->wire.abort_announced = true;
  const std::vector<uint8_t> body = encode_abort_update({why});
  for (auto& p : g->members.peers)
    if (p->alive && p->conn.open()) {
      p->conn.set_abort_flag(nullptr);  // this one message must go out even after an abort
      p->conn.send(MsgType::kAbortUpdate, body, 200);
      p->conn.set_abort_flag(&g->pipe.aborted);
    }
}

wsync_status_t peer_lost(wsync_group_t* g, Peer* p, const char* during) {
  wsync_status_t said = WSYNC_OK;
  if (catchup_failed_unread(g, p, &said)) {  // (a joiner that said why it went)
    p->alive = false;
    if (g->plugins.transport_self && !p->left) g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
    return said;
  }
  p = first_failed_upstream(g, p);
  p->alive = false;
  if (g->plugins.transport_self && !p->left) g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
  return fail(WSYNC_ERR_PEER_FAILED, "%s failed during %s: it closed its connection (process died?)%s",
              p->conn.peer_name().c_str(), during, downstream_note(g, p->rank).c_str());
}

wsync_status_t flight_progress(wsync_group_t* g, Flight* flight) {
  wsync_status_t st = take_replies(g, flight);
  return st == WSYNC_OK ? take_sends(g, flight) : st;
}

wsync_status_t bucket_send(wsync_group_t* g, Flight* flight) {
  InflightBucket* b = flight->back().get();
  wsync_status_t st = open_update(g, flight);
  if (st != WSYNC_OK) return st;
  const PlanBucket& pb = b->batch->plan[b->index];
  b->pieces = cut_pieces(pb.bytes, route_piece_bytes(g));
  b->seq = g->wire.next_seq;
  g->wire.next_seq += std::max<size_t>(b->pieces.size(), 1);
  b->number = g->wire.bucket_in_update + flight->size() - 1;
  // The index (what the manifest and the receiver's messages count) and the sequence number (what
  // the frames carry) both named, so that the two sides' messages can be matched.
  b->what = "bucket " + std::to_string(b->number) + " (seq " + std::to_string(b->seq) +
            ", " + std::to_string(b->index + 1) + " of " + std::to_string(b->batch->plan.size()) + " in batch " +
            std::to_string(b->batch->ticket) + ") of update " + std::to_string(g->wire.update_id);
  // HTTP engines: the update request goes out before the bytes; engines answer once they arrived.
  // Senders that plan: one request per batch, with its first bucket (group_announce.cpp).
  if (g->shape.http_engines && g->shape.planned && b->index == 0 && (st = announce_start(g, b->batch)) != WSYNC_OK) return st;
  CallMode about_bucket;
  about_bucket.about = b->what.c_str();  // (copied by start)
  if (g->shape.http_engines && !g->shape.planned &&
      (st = b->update_calls.start(g, WSYNC_STEP_UPDATE, &b->batch->plan[b->index], &b->batch->tensors, 0, nullptr,
                                  about_bucket)) != WSYNC_OK)
    return st;
  std::vector<uint8_t> blob;
  if ((st = describe_send(g, *b, &blob)) != WSYNC_OK) return st;
  b->delivery = delivery_of(g, *b);
  for (auto& p : g->members.peers) {
    if (!p->alive || !in_audience(*b, p.get())) continue;
    if (!awaited(*flight, p.get())) {  // (its silence counts from now)
      p->silence.heard_ms = now_ms();
      p->silence.caught_up = false;
    }
    b->want_ready.push_back(p.get());
  }
  b->want_ack = b->want_ready;
  b->deadline = deadline_after(b->batch->timeout_ms);
  if ((st = send_manifest(g, flight, *b, blob)) != WSYNC_OK) return st;
  if ((st = await(g, flight, [b] { return b->want_ready.empty(); })) != WSYNC_OK) return st;
  b->deadline = deadline_after(b->batch->timeout_ms);
  b->moving = true;
  for (Peer* p : b->want_ack) p->silence.heard_ms = std::max(p->silence.heard_ms, now_ms());  // (its bytes start now)
  if ((st = post(g, b)) != WSYNC_OK) return st;
  return b->sum_follows ? send_sum(g, b, flight) : WSYNC_OK;
}

wsync_status_t flight_drain_sends(wsync_group_t* g, Flight* flight) {
  for (auto& b : *flight) {
    for (uint64_t seq : b->unsent) {
      clear_error();
      const wsync_status_t st = tp(g)->send_wait(g->plugins.transport_self, seq, b->batch->timeout_ms);
      if (st != WSYNC_OK)
        return fail(st, "transport '%s' did not finish the sends of %s on the wire: %s", tp(g)->name, b->what.c_str(),
                    plugin_error("transport", tp(g)->name).c_str());
    }
    b->unsent.clear();
    b->posted = false;
  }
  return WSYNC_OK;
}

wsync_status_t bucket_complete(wsync_group_t* g, Flight* flight, const std::function<bool()>& give_way, bool* done) {
  *done = false;
  InflightBucket* b = flight->front().get();
  const auto acked = [b] { return b->want_ack.empty() && b->unsent.empty() && b->next_piece == b->pieces.size(); };
  wsync_status_t st = await(g, flight, [&] { return acked() || give_way(); });
  if (st == WSYNC_OK && !acked()) return WSYNC_OK;  // (it gave way: the caller has more to send)
  if (st == WSYNC_OK && g->shape.http_engines && !g->shape.planned) st = b->update_calls.finish(flight);
  if (st == WSYNC_OK && g->shape.http_engines && g->shape.planned && b->index + 1 == b->batch->plan.size())
    st = announce_finish(b->batch);
  if (st != WSYNC_OK) return st;
  b->posted = false;
  bucket_release(g, b);  // (CUDA staging, and any bucket not released before: every receiver has it)
  g->wire.bucket_in_update++;
  *done = true;
  return WSYNC_OK;
}

}  // namespace wsync
