// One bucket on a receiver. accept_manifest takes its MANIFEST:
//
//   read_manifest    decode and check the MANIFEST against this receiver's update and limits
//   check_entries    each entry against its registration (looked up once), sizes, padding
//   plan_placement   each chunk against the bytes of its tensor that arrived in this update or that
//                    buckets on the wire will bring (rx->sh->arrived, rx->sh->claimed), then where each byte
//                    range goes: registered buffers (staged mode: their staged blocks), the bucket's
//                    staging block, assemblies, scratch
//   post_receive     the transport's blob, recv_post of every piece, READY (with our blob)
//
// and complete_bucket finishes the oldest bucket in flight (up to `window` may be posted: the
// sender does not wait for an ACK before the next MANIFEST):
//
//   wait_bytes       until its pieces are in place, each handed to the hasher thread as it lands,
//                    sleeping on the control socket and the transport's event fd; meanwhile the next
//                    MANIFESTs are accepted and BUCKET_SUMs noted; a vanished or abandoning sender
//                    ends it
//   finish_bucket    the payload checksum, record which bytes arrived (rx->sh->arrived), ACK (with our
//                    blob)
//   fill_event       the BUCKET event: placed tensors and views
#include <poll.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "control/frames.h"
#include "planner/bucket_planner.h"
#include "receiver/receiver.h"

namespace wsync {
namespace {

constexpr int64_t kSliceMs = 20;
// Limits on what a manifest may ask of this process (the sender refuses larger buckets too).
constexpr uint64_t kMaxBucketBytes = 1ull << 40;
constexpr uint64_t kMaxPadding = 64u << 10;  // between entries; the native layout pads < 256 bytes


bool whole(const ManifestEntry& e) { return e.tensor_offset == 0 && e.length == e.tensor_bytes; }

const wsync_transport_v1_t* tp(Link* rx) { return rx->transport.table; }

bool same_shape(const Registered& r, const ManifestEntry& e) {
  if (r.dtype != e.dtype || r.ndim != e.ndim || r.nbytes != e.tensor_bytes) return false;
  for (int d = 0; d < e.ndim; ++d)
    if (r.shape[d] != e.shape[d]) return false;
  return true;
}

std::string shape_str(int32_t dtype, int32_t ndim, const int64_t* shape) {
  std::string s = std::string(wsync_dtype_name(dtype)) + "[";
  for (int d = 0; d < ndim; ++d) s += (d ? "," : "") + std::to_string(shape[d]);
  return s + "]";
}

// The slice of tensor `name` this receiver registered, or nullptr (the whole tensor).
const Box* held_box(const void* ctx, const std::string& name) {
  const Link* rx = static_cast<const Link*>(ctx);
  auto it = rx->sh->registry.find(name);
  return it != rx->sh->registry.end() && it->second.slice ? &it->second.box : nullptr;
}

// The receiver's first bucket of update `update` (on any link): bytes an unfinished update left
// behind never count for, or commit with, this one; and what voided that one does not void this
// one. (Not keyed on a link's current_update: its END_UPDATE set that to the next update already.
// Update ids only grow: an older one is a leftover, dropped before it comes here.)
wsync_status_t begin_update(Link* rx, uint64_t update) {
  if (!rx->sh->assembling.empty())
    return fail(WSYNC_ERR_PROTOCOL, "update %llu started while tensor '%s' of update %llu was incomplete",
                static_cast<unsigned long long>(update), rx->sh->assembling.begin()->first.c_str(),
                static_cast<unsigned long long>(rx->sh->update));
  rx->sh->arrived.clear();
  rx->sh->claimed.clear();
  drop_staged(rx);
  rx->sh->update_void.clear();
  rx->sh->update = update;
  return WSYNC_OK;
}

wsync_status_t read_manifest(Link* rx, const Frame& f, Incoming* in) {
  ManifestFrameBody body;
  if (decode_manifest_frame(f.body, &body) != WSYNC_OK)
    return fail(WSYNC_ERR_PROTOCOL, "MANIFEST message is malformed: %s", last_error().c_str());
  in->seq = body.seq;
  in->blob = std::move(body.blob);
  const std::vector<uint8_t>& raw = body.manifest;
  if (!rx->broken.empty())
    return fail(WSYNC_ERR_INVALID_STATE, "receiver rank %u cannot take more buckets: %s", rx->rank, rx->broken.c_str());
  wsync_status_t st = decode_manifest(raw.data(), raw.size(), &in->m);
  if (st != WSYNC_OK) return st;
  const Manifest& m = in->m;
  if (m.update_id < rx->sh->update)  // (many senders' late ones were dropped as leftovers)
    return fail(WSYNC_ERR_PROTOCOL, "a bucket of update %llu arrived after update %llu began",
                static_cast<unsigned long long>(m.update_id), static_cast<unsigned long long>(rx->sh->update));
  if (m.update_id != rx->current_update && !rx->flight.empty())
    return fail(WSYNC_ERR_PROTOCOL, "update %llu started while %s was still on the wire",
                static_cast<unsigned long long>(m.update_id), rx->flight.front()->what.c_str());
  if (m.update_id > rx->sh->update && (st = begin_update(rx, m.update_id)) != WSYNC_OK) return st;
  if (m.update_id != rx->current_update) {
    rx->current_update = m.update_id;
    rx->expected_bucket = 0;
    rx->accepted_bucket = 0;
  }
  // Many senders: a sender's buckets go to the receivers that need them, so this receiver may see
  // some of its indexes only (END_UPDATE counts the ones it was sent); they still only grow.
  const bool boxes = (m.flags & kManifestFlagBoxes) != 0;
  if (boxes ? m.bucket_index < rx->accepted_bucket : m.bucket_index != rx->accepted_bucket)
    return fail(WSYNC_ERR_PROTOCOL, "bucket %llu arrived where bucket %s%llu was expected",
                static_cast<unsigned long long>(m.bucket_index), boxes ? "at least " : "",
                static_cast<unsigned long long>(rx->accepted_bucket));
  in->what = "bucket " + std::to_string(m.bucket_index) + " of update " + std::to_string(m.update_id);
  if (m.bucket_bytes > kMaxBucketBytes)
    return fail(WSYNC_ERR_PROTOCOL, "%s claims %llu bytes, more than the %llu a bucket may hold", in->what.c_str(),
                static_cast<unsigned long long>(m.bucket_bytes), static_cast<unsigned long long>(kMaxBucketBytes));
  // Boxes (many senders): placed, checked and completed as the chunks of whole tensors they are.
  if ((st = expand_boxes(&in->m, kManifestMaxExpandedEntries, held_box, rx)) != WSYNC_OK)
    return fail_msg(st, in->what + ": " + last_error());
  if ((m.flags & kManifestFlagChecksumFollows) && !(m.flags & kManifestFlagPayloadChecksum))
    return fail(WSYNC_ERR_PROTOCOL, "%s announces a checksum to follow without asking for one", in->what.c_str());
  in->sum_known = (m.flags & kManifestFlagChecksumFollows) == 0;
  in->sum = m.payload_checksum;
  if ((m.flags & kManifestFlagPayloadChecksum) && rx->device_memory)
    return fail(WSYNC_ERR_UNSUPPORTED, "%s asks for a payload checksum, which wsync computes on the host; this "
                "receiver's bytes land in CUDA memory", in->what.c_str());
  return WSYNC_OK;
}

wsync_status_t check_entries(Link* rx, Incoming* in) {
  uint64_t cursor = 0;
  in->reg.resize(in->m.entries.size());
  for (size_t i = 0; i < in->m.entries.size(); ++i) {
    const ManifestEntry& e = in->m.entries[i];
    if (e.tensor_bytes > kMaxBucketBytes)
      return fail(WSYNC_ERR_PROTOCOL, "tensor '%s' claims %llu bytes, more than wsync moves", e.name.c_str(),
                  static_cast<unsigned long long>(e.tensor_bytes));
    in->max_gap = std::max(in->max_gap, e.bucket_offset - cursor);
    cursor = e.bucket_offset + e.length;
    auto it = rx->sh->registry.find(e.name);
    in->reg[i] = it == rx->sh->registry.end() ? nullptr : &it->second;
    if (in->reg[i] != nullptr && !same_shape(*in->reg[i], e))
      return fail(WSYNC_ERR_PROTOCOL, "tensor '%s' is registered as %s but the sender sends %s", e.name.c_str(),
                  shape_str(in->reg[i]->dtype, in->reg[i]->ndim, in->reg[i]->shape).c_str(),
                  shape_str(e.dtype, e.ndim, e.shape).c_str());
    if (in->reg[i] == nullptr && whole(e)) in->staging_need = std::max(in->staging_need, e.bucket_offset + e.length);
  }
  in->max_gap = std::max(in->max_gap, in->m.bucket_bytes - cursor);
  if (in->max_gap > kMaxPadding)
    return fail(WSYNC_ERR_PROTOCOL, "%s has %llu bytes of padding between entries (at most %llu)", in->what.c_str(),
                static_cast<unsigned long long>(in->max_gap), static_cast<unsigned long long>(kMaxPadding));
  return WSYNC_OK;
}

// The bucket's staging block: a free one of the pool, grown when too small.
wsync_status_t allocate(Link* rx, Incoming* in) {
  wsync_status_t st;
  if (in->staging_need > 0) {
    if (!rx->staging_pool.empty()) {
      in->staging = std::move(rx->staging_pool.back());
      rx->staging_pool.pop_back();
    }
    if (in->staging_need > in->staging.size()) {
      in->staging.reset();  // first: on a full engine GPU, old and new together may not fit
      if ((st = MemBlock::alloc((in->staging_need + 4095) / 4096 * 4096, rx->device, &in->staging)) != WSYNC_OK)
        return fail_msg(st, "cannot allocate staging for " + in->what + ": " + last_error());
    }
  }
  if (in->max_gap > rx->scratch.size() && (st = MemBlock::alloc(in->max_gap, rx->device, &rx->scratch)) != WSYNC_OK)
    return fail_msg(st, "cannot allocate padding scratch for " + in->what + ": " + last_error());
  return WSYNC_OK;
}

void add_piece(Link* rx, Incoming* in, uint8_t* base, uint64_t len) {
  if (len == 0) return;
  // Adjacent host regions merge; device regions never do (two cudaMalloc blocks may be adjacent in
  // the address space, and one copy may not span both).
  std::vector<wsync_iov_t>& iov = in->iov;
  if (!rx->device_memory && !iov.empty() && static_cast<uint8_t*>(iov.back().base) + iov.back().len == base)
    iov.back().len += len;
  else
    iov.push_back(wsync_iov_t{base, len});
}

// The assembly a chunk of tensor `e` lands in (created with its first chunk).
wsync_status_t assembly_for(Link* rx, const ManifestEntry& e, const Registered* reg, Assembly** out) {
  auto it = rx->sh->assembling.find(e.name);
  if (it == rx->sh->assembling.end()) {
    Assembly a;
    a.tensor_bytes = e.tensor_bytes;
    a.dtype = e.dtype;
    a.ndim = e.ndim;
    std::memcpy(a.shape, e.shape, sizeof a.shape);
    if (reg != nullptr) {
      a.placed = true;
      if (!rx->sh->staged) {
        a.dst = static_cast<uint8_t*>(reg->data);
      } else {
        wsync_status_t st = staged_block(rx, e.name, e.tensor_bytes, &a.dst);
        if (st != WSYNC_OK) return st;
      }
    } else {
      wsync_status_t st = MemBlock::alloc(e.tensor_bytes, rx->device, &a.owned);
      if (st != WSYNC_OK)
        return fail_msg(st, "cannot allocate " + std::to_string(e.tensor_bytes) + " bytes to assemble tensor '" + e.name +
                                "': " + last_error());
      a.dst = a.owned.data();
    }
    it = rx->sh->assembling.emplace(e.name, std::move(a)).first;
  } else if (it->second.tensor_bytes != e.tensor_bytes || it->second.dtype != e.dtype) {
    return fail(WSYNC_ERR_PROTOCOL, "chunks of tensor '%s' disagree on its size or dtype", e.name.c_str());
  }
  *out = &it->second;
  return WSYNC_OK;
}

// Where a whole tensor's bytes land: its registered buffer (staged mode: its staged block), or
// the staging the event's views point into.
wsync_status_t whole_destination(Link* rx, Incoming* in, const ManifestEntry& e, const Registered* reg,
                                 uint8_t** out) {
  if (reg == nullptr) {
    *out = in->staging.data() + e.bucket_offset;
    return WSYNC_OK;
  }
  if (rx->sh->staged) return staged_block(rx, e.name, e.tensor_bytes, out);
  *out = static_cast<uint8_t*>(reg->data);
  return WSYNC_OK;
}

wsync_status_t plan_placement(Link* rx, Incoming* in) {
  uint64_t cursor = 0;
  in->dst.assign(in->m.entries.size(), nullptr);
  for (size_t i = 0; i < in->m.entries.size(); ++i) {
    const ManifestEntry& e = in->m.entries[i];
    if (e.bucket_offset > cursor) add_piece(rx, in, rx->scratch.data(), e.bucket_offset - cursor);
    cursor = e.bucket_offset + e.length;
    // Before any byte is posted: an overlapping chunk never overwrites bytes that already arrived
    // or that a bucket on the wire brings.
    wsync_status_t st = rx->sh->arrived.check(e);
    if (st == WSYNC_OK) st = rx->sh->claimed.check(e);
    if (st != WSYNC_OK) return st;
    if (whole(e)) {
      if ((st = whole_destination(rx, in, e, in->reg[i], &in->dst[i])) != WSYNC_OK) return st;
    } else {
      Assembly* a = nullptr;
      if ((st = assembly_for(rx, e, in->reg[i], &a)) != WSYNC_OK) return st;
      in->dst[i] = a->dst + e.tensor_offset;
    }
    add_piece(rx, in, in->dst[i], e.length);
  }
  if (in->m.bucket_bytes > cursor) add_piece(rx, in, rx->scratch.data(), in->m.bucket_bytes - cursor);
  return WSYNC_OK;
}

// The transport's side of the side channel: what it says for `kind` (empty when nothing).
wsync_status_t describe_recv(Link* rx, const Incoming& in, int32_t kind, std::vector<uint8_t>* blob) {
  blob->clear();
  auto fn = WSYNC_HAS_FIELD(tp(rx), wsync_transport_v1_t, describe_recv) ? tp(rx)->describe_recv : nullptr;
  if (fn == nullptr || in.m.bucket_bytes == 0) return WSYNC_OK;
  blob->resize(WSYNC_BLOB_MAX_BYTES);
  uint64_t len = 0;
  clear_error();
  wsync_status_t st = fn(rx->recv_self, in.seq, kind, blob->data(), blob->size(), &len);
  if (st != WSYNC_OK)
    return fail(st, "transport '%s' could not describe its side of %s: %s", tp(rx)->name, in.what.c_str(),
                plugin_error("transport", tp(rx)->name).c_str());
  if (len > WSYNC_BLOB_MAX_BYTES)  // as on the sender: a transport that claims more is broken
    return fail(WSYNC_ERR_INTERNAL, "transport '%s' wrote %llu bytes of side-channel data for %s, more than %u",
                tp(rx)->name, static_cast<unsigned long long>(len), in.what.c_str(), WSYNC_BLOB_MAX_BYTES);
  blob->resize(len);
  return WSYNC_OK;
}

// A relay's block for the whole bucket: a free one of the pool, grown when too small.
wsync_status_t relay_block(Link* rx, Incoming* in) {
  if (!rx->relay_pool.empty()) {
    in->relay_block = std::move(rx->relay_pool.back());
    rx->relay_pool.pop_back();
  }
  if (in->relay_block.size() >= in->m.bucket_bytes) return WSYNC_OK;
  in->relay_block.reset();
  wsync_status_t st = MemBlock::alloc((in->m.bucket_bytes + 4095) / 4096 * 4096, rx->device, &in->relay_block);
  return st == WSYNC_OK ? st : fail_msg(st, "cannot allocate the relay block for " + in->what + ": " + last_error());
}

// Hand the sender's blob to the transport, post the receive of every piece, say READY. A failure
// after a post leaves the buffers to the graveyard (the transport may still write into them).
wsync_status_t post_receive(Link* rx, Incoming* in) {
  wsync_status_t st;
  auto peer_blob = WSYNC_HAS_FIELD(tp(rx), wsync_transport_v1_t, peer_blob) ? tp(rx)->peer_blob : nullptr;
  if (!in->blob.empty()) {
    if (peer_blob == nullptr)
      return fail(WSYNC_ERR_VERSION_MISMATCH, "the sender's transport '%s' sent data with %s that this receiver's "
                  "transport plugin cannot read (use the same transport release on both sides)", tp(rx)->name,
                  in->what.c_str());
    clear_error();
    if ((st = peer_blob(rx->recv_self, in->seq, 0, WSYNC_BLOB_MANIFEST, in->blob.data(), in->blob.size())) != WSYNC_OK)
      return fail(st, "transport '%s' refused the sender's data for %s: %s", tp(rx)->name, in->what.c_str(),
                  plugin_error("transport", tp(rx)->name).c_str());
  }
  in->pieces = cut_pieces(in->m.bucket_bytes, rx->piece_bytes);
  // A relay takes each piece whole into its relay block, to forward it as it is and then place it.
  if (in->m.bucket_bytes > 0 && relay_feeds_anyone(rx) && (st = relay_block(rx, in)) != WSYNC_OK) return st;
  for (size_t i = 0; i < in->pieces.size(); ++i) {
    const Piece& pc = in->pieces[i];
    const std::vector<wsync_iov_t> part =
        in->relay_block.data() ? std::vector<wsync_iov_t>{{in->relay_block.data() + pc.offset, pc.len}}
        : in->pieces.size() == 1 ? in->iov
                                 : slice_iov(in->iov, pc.offset, pc.len);
    clear_error();
    if ((st = tp(rx)->recv_post(rx->recv_self, in->seq + i, part.data(), part.size())) != WSYNC_OK)
      return fail(st, "transport '%s' could not post the receive of %s: %s", tp(rx)->name, in->what.c_str(),
                  plugin_error("transport", tp(rx)->name).c_str());
    in->posted = true;
  }
  std::vector<uint8_t> blob;
  if ((st = describe_recv(rx, *in, WSYNC_BLOB_READY, &blob)) != WSYNC_OK) return st;
  return rx->conn.send(MsgType::kReady, encode_ready({in->seq, std::move(blob)}), rx->timeout_ms);
}

// The transport gave up on the bucket: never wait for the sender there again. Keeps the error.
wsync_status_t give_up(Link* rx, const std::string& why) {
  const wsync_status_t st = last_status();
  const std::string msg = last_error();
  tp(rx)->forget_peer(rx->recv_self, 0);
  for (uint32_t r : relay_live_peers(rx)) tp(rx)->forget_peer(rx->relay_self, r);
  rx->broken = why;
  rx->sh->late_writes = true;  // a receive was posted: UCX (for one) may still complete part of it
  restore_error(st, msg);
  return st;
}

// Sleep until a transport or the control socket has something (event fds armed), or a slice;
// the group's world is progressed first when the bytes come from a relay.
void sleep_on_fds(Link* rx, int64_t deadline) {
  progress_transports(rx, false);
  sleep_on_transports(rx, deadline, 1000);
}

// A relay: piece `p` of the bucket landed in its relay block. Forward it to the children (the
// same sequence number in this relay's world), then place it where the manifest puts its bytes.
wsync_status_t relay_piece(Link* rx, Incoming* in, size_t index) {
  const Piece& p = in->pieces[index];
  const uint8_t* from = in->relay_block.data() + p.offset;
  const std::vector<uint32_t> ranks = relay_live_peers(rx);
  wsync_buffer_t buf = WSYNC_BUFFER_INIT;
  buf.data = from;
  buf.len = p.len;
  clear_error();
  wsync_status_t st = ranks.empty() ? WSYNC_OK  // (every child left: it only places its own)
                                    : tp(rx)->send_post(rx->relay_self, in->seq + index, &buf, ranks.data(),
                                                        static_cast<uint32_t>(ranks.size()));
  if (st != WSYNC_OK)  // a child that failed is the sender's to name (its control connection); this relay goes on
    WSYNC_LOGW("receiver rank %u: forwarding %s to its children: %s%s", rx->rank, in->what.c_str(),
               plugin_error("transport", tp(rx)->name).c_str(), relay_world_note(rx).c_str());
  else if (!ranks.empty())
    in->forwarding.push_back(in->seq + index);
  for (const wsync_iov_t& r : slice_iov(in->iov, p.offset, p.len)) {
    std::memcpy(r.base, from, r.len);
    from += r.len;
  }
  return WSYNC_OK;
}

// A relay: the forwarded pieces whose sends finished leave the list, oldest first, up to the first
// still moving (each look progresses the transport; looking at every piece each time would cost a
// core at a few hundred pieces in flight).
void take_forwarded(Link* rx, Incoming* in) {
  while (!in->forwarding.empty()) {
    clear_error();
    const wsync_status_t st = tp(rx)->send_wait(rx->relay_self, in->forwarding.front(), 0);
    if (st == WSYNC_ERR_TIMEOUT) return;
    if (st != WSYNC_OK)
      WSYNC_LOGW("receiver rank %u: forwarding %s: %s%s", rx->rank, in->what.c_str(),
                 plugin_error("transport", tp(rx)->name).c_str(), relay_world_note(rx).c_str());
    in->forwarding.erase(in->forwarding.begin());
    rx->progress_count++;
  }
}

// How much longer than its timeout_ms a receiver waits for a bucket's bytes while the sender's
// connection is up. The sender waits for every receiver with the same kind of timeout; when another
// receiver stalls, the sender gives up first and its ABORT_UPDATE must reach us before we give up
// on our own: then the engine sees WSYNC_EVENT_ABORTED (the sender's reason) instead of a timeout
// of its own that blames nobody.
int64_t abort_grace_ms(int64_t timeout_ms) { return std::min<int64_t>(timeout_ms, 5000); }

// Piece `p` of the bucket landed: hand its entries' bytes (padding excluded), in order, to the hasher.
void hash_piece(Link* rx, Incoming* in, const Piece& p) {
  if (!in->hashing) {
    rx->hasher.reset();
    in->hashing = true;
  }
  const uint64_t end = p.offset + p.len;
  for (; in->hash_entry < in->m.entries.size(); ++in->hash_entry) {
    const ManifestEntry& e = in->m.entries[in->hash_entry];
    const uint64_t from = std::max(e.bucket_offset, p.offset), to = std::min(e.bucket_offset + e.length, end);
    if (to > from) rx->hasher.feed(in->dst[in->hash_entry] + (from - e.bucket_offset), to - from);
    if (e.bucket_offset + e.length > end) return;  // the rest of this entry is in a later piece
  }
}

// Look at the pieces that were not in place yet, oldest bucket first, up to the first that is
// still moving (each look progresses the transport); the oldest bucket's new pieces go to the
// hasher. True when every piece of the oldest bucket is in place; *st: the transport's word on the
// piece it stopped at (TIMEOUT: still moving), *why its message.
bool take_landed(Link* rx, wsync_status_t* st, std::string* why) {
  const bool has_fd = rx->recv_fd >= 0;
  *st = WSYNC_OK;
  for (auto& b : rx->flight) {
    Incoming* in = b.get();
    if (rx->relay_self != nullptr) take_forwarded(rx, in);
    while (in->landed < in->pieces.size() && *st == WSYNC_OK) {
      clear_error();
      *st = tp(rx)->recv_wait(rx->recv_self, in->seq + in->landed, has_fd ? 0 : kSliceMs);
      if (*st != WSYNC_OK) {
        *why = plugin_error("transport", tp(rx)->name);
        break;
      }
      if (in->relay_block.data()) relay_piece(rx, in, in->landed);
      in->landed++;
      rx->progress_count++;
    }
    if (*st != WSYNC_OK) break;
  }
  Incoming* head = rx->flight.front().get();
  if (head->m.flags & kManifestFlagPayloadChecksum)
    for (; head->hashed < head->landed; ++head->hashed) hash_piece(rx, head, head->pieces[head->hashed]);
  // A relay's bucket is done when its children have every piece too (its block is free then).
  return head->landed == head->pieces.size() && head->forwarding.empty();
}

// A BUCKET_SUM: the checksum of a bucket in flight that announced it.
wsync_status_t note_sum(Link* rx, const Frame& f) {
  BucketSumBody b;
  if (decode_bucket_sum(f.body, &b) != WSYNC_OK) return fail(WSYNC_ERR_PROTOCOL, "%s", last_error().c_str());
  for (auto& in : rx->flight)
    if (in->seq == b.seq && (in->m.flags & kManifestFlagChecksumFollows) && !in->sum_known) {
      in->sum_known = true;
      in->sum = b.checksum;
      return WSYNC_OK;
    }
  return fail(WSYNC_ERR_PROTOCOL, "BUCKET_SUM(seq %llu) names no bucket on the wire that waits for its checksum",
              static_cast<unsigned long long>(b.seq));
}

// What the sender says while the oldest bucket lands: the next buckets' MANIFESTs (accepted while
// the window has room) and BUCKET_SUMs are taken; anything else (ABORT_UPDATE, CLOSE) stays
// buffered for the next event and ends the wait (*other).
wsync_status_t take_frames(Link* rx, bool* other) {
  *other = false;
  inbox_pump(rx);  // (once: what came by now; a later MANIFEST waits for the next look)
  for (uint16_t type = inbox_buffered_type(rx); type != 0; type = inbox_buffered_type(rx)) {
    const bool manifest = type == static_cast<uint16_t>(MsgType::kManifest);
    if (manifest && rx->flight.size() >= rx->window) return WSYNC_OK;  // the sender keeps to the window
    if (!manifest && type != static_cast<uint16_t>(MsgType::kBucketSum)) {
      *other = true;
      return WSYNC_OK;
    }
    Frame f;
    wsync_status_t st = rx->conn.recv(&f, 0);
    if (st != WSYNC_OK) return st;
    rx->last_frame_ms = now_ms();
    if ((st = manifest ? accept_manifest(rx, f) : note_sum(rx, f)) != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

// Many senders: a sender that gives up because another failed sends ABORT_UPDATE (naming that one)
// and then closes its transport endpoints and its connection, so this receiver may see its
// transport fail, its connection close or its bucket stall first. Before that is blamed on this
// link's sender, its control channel gets a moment (kSaidWhyMs) to say why: true when a frame that
// is not a bucket's (an ABORT_UPDATE, a CLOSE) comes next. The MANIFESTs and BUCKET_SUMs before it
// belong to the update it abandons and are dropped with it (a sender with a full window has sent
// the next MANIFEST before its ABORT_UPDATE). `wait_ms` 0: only what has come already.
constexpr int64_t kSaidWhyMs = 500;
bool sender_said_why(Link* rx, int64_t wait_ms = kSaidWhyMs) {
  const int64_t until = deadline_after(wait_ms);
  for (;;) {
    for (uint16_t type = inbox_next_type(rx); type != 0; type = inbox_next_type(rx)) {
      if (type != static_cast<uint16_t>(MsgType::kManifest) && type != static_cast<uint16_t>(MsgType::kBucketSum))
        return true;
      Frame dropped;
      if (rx->conn.recv(&dropped, 0) != WSYNC_OK) return false;
    }
    if (rx->conn.closed() || now_ms() >= until) return false;
    pollfd p{rx->conn.fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(remaining_ms(until), 20)));
  }
}

// The first piece this link posted a receive for and does not hold yet; 0 when it holds every one.
uint64_t waiting_seq(const Link* rx) {
  for (const auto& b : rx->flight)
    if (b->posted && b->landed < b->pieces.size()) return b->seq + b->landed;
  return 0;
}

// PROGRESS to the sender every kProgressEveryMs while this link waits for a bucket, whether the
// count moved or not (the sender tells a member that waits on someone else, e.g. a relay whose
// child stopped taking pieces, from one that stopped itself: only the first keeps reporting); the
// time the next one is due.
int64_t report_progress(Link* rx) {
  const int64_t due = rx->progress_sent_ms + kProgressEveryMs;
  if (now_ms() < due) return due;
  rx->progress_sent = rx->progress_count;
  rx->progress_sent_ms = now_ms();
  rx->conn.send(MsgType::kProgress, encode_progress({rx->progress_count, waiting_seq(rx)}), 1000);
  return 0;
}

// The transport failed (`st`, its words `why`) while bucket `in` landed: with many senders a sender
// that said why first abandoned it; else the transport (or, below a relay, the relay) is named.
wsync_status_t transport_gave_up(Link* rx, Incoming* in, wsync_status_t st, const std::string& why) {
  if (rx->sh->links.size() > 1 && sender_said_why(rx)) {
    fail(WSYNC_ERR_ABORTED, "the sender abandoned %s (its transport closed after it said why)", in->what.c_str());
    return give_up(rx, "the sender stopped during " + in->what);
  }
  if (rx->parent != 0)  // (its transport's "rank 0" is the relay: name the relay, in the group's ranks)
    fail(st, "receiver rank %u, the relay that feeds this receiver, failed during %s: transport '%s' (in the relay's "
         "world, where the relay is rank 0, \"the sender\"): %s", rx->parent, in->what.c_str(), tp(rx)->name,
         why.c_str());
  else
    fail(st, "transport '%s' failed during %s: %s", tp(rx)->name, in->what.c_str(), why.c_str());
  return give_up(rx, "the transport failed during " + in->what);
}

// Nothing moved for bucket `in` until its deadline: named (a sender that gave up said so at once).
wsync_status_t bytes_timed_out(Link* rx, Incoming* in) {
  const bool many = rx->sh->links.size() > 1;
  if (many && sender_said_why(rx, 0)) {
    fail(WSYNC_ERR_ABORTED, "the sender abandoned %s (it said why after its bytes stopped)", in->what.c_str());
    return give_up(rx, "the sender stopped during " + in->what);
  }
  std::string stalled = in->landed == in->pieces.size() && !in->forwarding.empty()
                            ? " (all of it is here; this relay's forwarding to its children stalled)"
                            : "";
  if (rx->parent != 0 && in->landed < in->pieces.size())
    stalled += " (this receiver takes the bytes from receiver rank " + std::to_string(rx->parent) + ", a relay)";
  if (many)
    fail(WSYNC_ERR_TIMEOUT, "%s did not arrive: nothing moved for %lld ms (timeout_ms)%s", in->what.c_str(),
         static_cast<long long>(rx->timeout_ms), stalled.c_str());
  else
    fail(WSYNC_ERR_TIMEOUT,
         "%s did not arrive: nothing moved for %lld ms (timeout_ms, plus %lld ms for the sender to say why)%s",
         in->what.c_str(), static_cast<long long>(rx->timeout_ms), static_cast<long long>(abort_grace_ms(rx->timeout_ms)),
         stalled.c_str());
  return give_up(rx, "the transport failed during " + in->what);
}

// One look at the oldest bucket (never sleeps): *done when its bytes are in place and its sum is
// known; *landed when its pieces are (the caller then sleeps on the fds even without an event fd).
// Its deadline bounds silence: timeout_ms after the last piece this link took, however long the
// bucket takes while its pieces move.
wsync_status_t bytes_step(Link* rx, Incoming* in, bool* done, bool* landed) {
  *done = false;
  // With many senders nobody else can say why a sender stopped: no grace beyond timeout_ms.
  const int64_t wait_ms = rx->timeout_ms + (rx->sh->links.size() > 1 ? 0 : abort_grace_ms(rx->timeout_ms));
  if (in->deadline == 0) in->deadline = deadline_after(wait_ms);
  wsync_status_t st;
  std::string why;
  const uint64_t before = rx->progress_count;
  const bool all = take_landed(rx, &st, &why);
  *landed = all;
  if (rx->progress_count != before) in->deadline = deadline_after(wait_ms);
  report_progress(rx);
  const bool many = rx->sh->links.size() > 1;
  if (st != WSYNC_OK && st != WSYNC_ERR_TIMEOUT) return transport_gave_up(rx, in, st, why);
  bool other = false;
  const wsync_status_t fst = take_frames(rx, &other);
  if (fst != WSYNC_OK) return fst;  // a later bucket refused, or a malformed frame: the caller gives up
  if (all && in->sum_known) {
    *done = true;
    return WSYNC_OK;
  }
  if (rx->conn.closed() || other) {  // (the sender never stops between the last piece and its sum)
    // (many senders: one that closed after a last word, its ABORT_UPDATE naming the cause, is read
    // as having abandoned the bucket; the caller then reads that word)
    const bool vanished = rx->conn.closed() && !(many && sender_said_why(rx));
    fail(vanished ? WSYNC_ERR_PEER_FAILED : WSYNC_ERR_ABORTED, "the sender %s during %s",
         vanished ? "vanished" : "abandoned the bucket", in->what.c_str());
    return give_up(rx, "the sender stopped during " + in->what);
  }
  if (now_ms() >= in->deadline) return bytes_timed_out(rx, in);
  return WSYNC_OK;
}

wsync_status_t wait_bytes(Link* rx, Incoming* in) {
  const bool has_fd = rx->recv_fd >= 0;
  for (;;) {
    bool done = false, landed = false;
    const wsync_status_t st = bytes_step(rx, in, &done, &landed);
    if (st != WSYNC_OK || done) return st;
    const int64_t report_due = report_progress(rx);
    if (has_fd || landed) sleep_on_fds(rx, std::min(in->deadline, report_due));
  }
}

wsync_status_t verify_payload(Link* rx, Incoming* in) {
  if (!in->hashing) {  // an empty bucket: nothing was fed
    rx->hasher.reset();
    in->hashing = true;
  }
  const uint64_t h = rx->hasher.digest();
  if (h == in->sum) return WSYNC_OK;
  const std::string via = rx->parent == 0 ? "" : "; the bytes came through receiver rank " + std::to_string(rx->parent) +
                                                    ", a relay";
  return fail(WSYNC_ERR_PROTOCOL, "payload checksum mismatch in %s (got %016llx, sender computed %016llx%s)",
              in->what.c_str(), static_cast<unsigned long long>(h), static_cast<unsigned long long>(in->sum),
              via.c_str());
}

// The bytes are in place: check the payload, record which bytes arrived, and ACK (with our blob).
wsync_status_t finish_bucket(Link* rx, Incoming* in) {
  wsync_status_t st = WSYNC_OK;
  if (in->m.flags & kManifestFlagPayloadChecksum) st = verify_payload(rx, in);
  for (size_t i = 0; i < in->m.entries.size() && st == WSYNC_OK; ++i) st = rx->sh->arrived.record(in->m.entries[i]);
  std::vector<uint8_t> blob;
  if (st == WSYNC_OK) st = describe_recv(rx, *in, WSYNC_BLOB_ACK, &blob);
  if (st != WSYNC_OK) return st;
  send_status(rx, MsgType::kAck, in->seq, WSYNC_OK, "", blob);
  rx->expected_bucket++;
  return WSYNC_OK;
}

void add_event_tensor(Link* rx, const ManifestEntry& e, const Registered* reg, const Assembly* a,
                      void* data) {
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  t.name = e.name.c_str();  // into rx->ev_manifest, alive until the next event
  t.dtype = e.dtype;
  t.ndim = e.ndim;
  std::memcpy(t.shape, a ? a->shape : e.shape, sizeof t.shape);
  t.nbytes = a ? a->tensor_bytes : e.length;
  // A registered tensor is reported at its buffer, also when staged (the buffer gets it at commit).
  t.data = t.nbytes ? (reg ? reg->data : data) : nullptr;
  t.device_type = reg ? reg->device_type : (rx->device_memory ? WSYNC_DEVICE_CUDA : WSYNC_DEVICE_CPU);
  t.device_index = reg ? reg->device_index : (rx->device_memory ? rx->device : 0);
  rx->ev_tensors.push_back(t);
  rx->ev_placed.push_back(reg == nullptr ? WSYNC_PLACED_VIEW : rx->sh->staged ? WSYNC_PLACED_STAGED : WSYNC_PLACED_IN_PLACE);
}

// Whole tensors, and split ones whose last chunk just arrived. The bucket's staging block (views
// point into it) stays the event's until the next one.
void fill_event(Link* rx, Incoming* in, wsync_receiver_event_t* ev) {
  rx->ev_tensors.reserve(in->m.entries.size());
  rx->ev_placed.reserve(in->m.entries.size());
  for (size_t i = 0; i < in->m.entries.size(); ++i) {
    const ManifestEntry& e = in->m.entries[i];
    if (whole(e)) {
      add_event_tensor(rx, e, in->reg[i], nullptr, in->dst[i]);
      continue;
    }
    auto it = rx->sh->assembling.find(e.name);
    if (it == rx->sh->assembling.end() || !rx->sh->arrived.complete(e.name)) continue;
    add_event_tensor(rx, e, in->reg[i], &it->second, it->second.dst);
    if (it->second.owned.data()) rx->ev_owned.push_back(std::move(it->second.owned));
    rx->sh->assembling.erase(it);
  }
  ev->kind = WSYNC_EVENT_BUCKET;
  ev->bucket_index = in->m.bucket_index;
  ev->bytes = in->m.bucket_bytes;
  rx->ev_manifest = std::move(in->m);  // the names in ev_tensors point into its entries (moved, not copied)
  rx->ev_staging = std::move(in->staging);
  if (in->relay_block.data()) rx->relay_pool.push_back(std::move(in->relay_block));
  ev->num_tensors = rx->ev_tensors.size();
  ev->tensors = rx->ev_tensors.data();
  ev->placed = rx->ev_placed.data();
}

// The registered tensors of a bucket whose receive was posted: their buffers (or staged blocks)
// may be written from now on.
void note_posted(Link* rx, const Incoming& in) {
  for (size_t i = 0; i < in.m.entries.size(); ++i)
    if (in.reg[i] != nullptr && in.m.entries[i].length > 0) note_touched(rx, in.m.entries[i].name);
}

// Every bucket in flight ends without an event: the hasher lets go of their memory, and when a
// receive was posted the transport gives up on the sender (it may still write into the buffers,
// which then go to the graveyard).
void abandon_flight(Link* rx, const std::string& why) {
  rx->hasher.cancel();
  bool posted = false;
  for (auto& in : rx->flight) posted |= in->posted;
  if (posted && rx->broken.empty()) give_up(rx, why);
  for (auto& in : rx->flight)
    if (in->staging.data()) (rx->broken.empty() ? rx->staging_pool : rx->sh->graveyard).push_back(std::move(in->staging));
  for (auto& in : rx->flight)
    if (in->relay_block.data()) (rx->broken.empty() ? rx->relay_pool : rx->sh->graveyard).push_back(std::move(in->relay_block));
  rx->flight.clear();
}

// The failure of a bucket: tell the sender (an ACK with the status, for `seq`) unless it is gone
// or stopped on its own, and void the update. Returns `st` with its message.
wsync_status_t fail_bucket(Link* rx, uint64_t seq, wsync_status_t st, MsgType type) {
  const std::string why = last_error();
  abandon_flight(rx, "the update failed here: " + why);
  // A local failure (transport error, timeout, checksum) is reported so the sender learns why at
  // once. Not when the sender itself abandoned the bucket or is gone: it knows, and a message
  // landing on a socket it is closing would reset the connection and destroy its last frames.
  if (st != WSYNC_ERR_ABORTED && st != WSYNC_ERR_PEER_FAILED && rx->conn.open()) send_status(rx, type, seq, st, why);
  drop_update(rx, why);
  return fail_msg(st, type == MsgType::kNack ? "bucket refused: " + why : why);
}

}  // namespace

void send_status(Link* rx, MsgType type, uint64_t seq, wsync_status_t code, const std::string& why,
                 const std::vector<uint8_t>& blob) {
  rx->conn.send(type, encode_status({seq, code, why, blob}), 1000);
}

void drop_update(Link* rx, const std::string& why) {
  if (!rx->flight.empty()) abandon_flight(rx, why);
  // Many senders: the other links' buckets on the wire land in the same assemblies, which go now.
  for (Link* l : rx->sh->links)
    if (l != rx && !l->flight.empty()) abandon_flight(l, why);
  if (rx->sh->update_void.empty()) rx->sh->update_void = why;
  rx->sh->arrived.clear();
  rx->sh->claimed.clear();
  if (may_still_write(rx))  // (many senders: another link's transport may write into these)
    for (auto& kv : rx->sh->assembling)
      if (kv.second.owned.data()) rx->sh->graveyard.push_back(std::move(kv.second.owned));
  rx->sh->assembling.clear();
  drop_staged(rx);
}

wsync_status_t refuse(Link* rx, uint64_t seq, wsync_status_t st) {
  const std::string why = last_error();
  rx->conn.pump();  // notices a sender that is gone (the status alone cannot say: a transport's
                    // PEER_FAILED may come while the control connection is fine)
  const bool sender_gone = rx->conn.closed();
  if (!sender_gone) send_status(rx, MsgType::kNack, seq, st, why);
  drop_update(rx, why);
  return fail_msg(st, sender_gone ? why : "bucket refused: " + why);
}

wsync_status_t accept_manifest(Link* rx, const Frame& f) {
  rx->manifests_taken++;  // (read, refused or not: rejoin's "did this call begin a bucket")
  auto in = std::make_unique<Incoming>();
  wsync_status_t st = read_manifest(rx, f, in.get());
  if (st == WSYNC_OK) st = check_entries(rx, in.get());
  if (st == WSYNC_OK) st = allocate(rx, in.get());
  if (st == WSYNC_OK) st = plan_placement(rx, in.get());
  for (size_t i = 0; i < in->m.entries.size() && st == WSYNC_OK; ++i) st = rx->sh->claimed.record(in->m.entries[i]);
  if (st == WSYNC_OK) st = post_receive(rx, in.get());
  if (in->posted) note_posted(rx, *in);
  const uint64_t seq = in->seq, index = in->m.bucket_index;
  const bool posted = in->posted;
  const std::string what = in->what;
  rx->flight.push_back(std::move(in));  // from here on a failure abandons it with the others
  if (st != WSYNC_OK) {
    const std::string why = last_error();
    if (posted) give_up(rx, "the sender went away while " + what + " was posted");  // buffers go to the graveyard
    abandon_flight(rx, why);
    restore_error(st, why);
    return refuse(rx, seq, st);
  }
  rx->accepted_bucket = index + 1;
  return WSYNC_OK;
}

bool sender_said_why_already(Link* rx) { return sender_said_why(rx, 0); }

wsync_status_t bucket_step(Link* rx, wsync_receiver_event_t* ev, bool* ready) {
  *ready = false;
  Incoming* in = rx->flight.front().get();
  const uint64_t seq = in->seq;
  bool done = false, landed = false;
  wsync_status_t st = bytes_step(rx, in, &done, &landed);
  if (st == WSYNC_OK && !done) return WSYNC_OK;
  if (st == WSYNC_OK) st = finish_bucket(rx, in);
  if (st != WSYNC_OK) return fail_bucket(rx, seq, st, MsgType::kAck);
  fill_event(rx, in, ev);
  rx->flight.pop_front();
  *ready = true;
  return WSYNC_OK;
}

wsync_status_t complete_bucket(Link* rx, wsync_receiver_event_t* ev) {
  Incoming* in = rx->flight.front().get();
  const uint64_t seq = in->seq;
  // (a failure of a later bucket met while waiting has abandoned this one too: `in` is gone then)
  wsync_status_t st = wait_bytes(rx, in);
  if (st == WSYNC_OK) st = finish_bucket(rx, in);
  if (st != WSYNC_OK) return fail_bucket(rx, seq, st, MsgType::kAck);
  fill_event(rx, in, ev);
  rx->flight.pop_front();
  return WSYNC_OK;
}

}  // namespace wsync
