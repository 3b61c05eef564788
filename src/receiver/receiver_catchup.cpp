// Catch-up (elastic groups, docs/ABI.md "Membership"): a receiver that joins an elastic group
// after a version committed takes that version from a member that holds it, not from the trainer.
// The sender pairs them with a CATCHUP frame to each, ordered before any later update on both
// control connections, so the source still holds exactly that version when it reads it and the
// joiner has it before the next update's first bucket.
//
// The bytes move over a transport world of two (the source rank 0, the joiner rank 1) named by the
// sender, as buckets shaped like an update's: on it, in order,
//   seq 1   24 bytes: u64 kMagic, i64 status, u64 n. A source that cannot serve says why: status
//           is not 0, n the length of its reason (at most kFrameMaxReasonBytes), which follows in
//           seq 2, and nothing else. Else n is the number of buckets (at most kMaxBuckets).
//   then per bucket: u64 the length of its MANIFEST (at most kMaxManifestBytes), the MANIFEST
//           (manifest/manifest.h: its index, its bytes, one entry: a tensor or a chunk of one, in
//           order), and its payload straight from the source's registered memory (none when the
//           bucket holds no bytes).
// The source plans its registered tensors that hold the committed version into buckets of at most
// kBucketBytes with the bucket planner, one tensor per bucket (a larger one split into chunks), so
// every payload is one range of one buffer. The joiner reads each MANIFEST with the decoder every
// bucket goes through and places each chunk as a bucket's: its registered buffer (staged: its
// staged block), the coverage of every tensor checked before a byte is posted and recorded once
// it landed (a source that sends a chunk twice, overlapping or short is refused); a tensor it did
// not register alike, or without a digest from the sender, lands in a discard block. Each tensor
// it registered is checked, once all of it arrived, against the sender's digest (XXH3-64 of the
// bytes as the sender sent them: the source is trusted with nothing; a mismatch fails the
// catch-up naming it); then it reports COMMIT of the version, which its engine confirms with
// wsync_receiver_commit as always (the sender waits for no COMMITTED).
#include <poll.h>

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "common/clock.h"
#include "common/error.h"
#include "common/names.h"
#include "control/frames.h"
#include "manifest/manifest.h"
#include "planner/bucket_planner.h"
#include "device/tensor_digest.h"
#include "receiver/receiver.h"

namespace wsync {
namespace {

constexpr uint64_t kMagic = 0x3270756863746163ull;  // "catchup2"
constexpr uint64_t kMaxBuckets = 1ull << 24;
constexpr uint64_t kMaxManifestBytes = 64u << 10;  // one entry: a name of at most 1 KiB and its shape
constexpr uint64_t kBucketBytes = 64ull << 20;

const wsync_transport_v1_t* tp(const Link* rx) { return rx->transport.table; }

// A catch-up ends within the sender's budget (half its timeout_ms: it waits timeout_ms for the
// next update's first READY from both, and a catch-up that cannot finish must not cost the source
// its membership), and within half the receiver's own timeout_ms.
int64_t budget(const Link* rx, const CatchupBody& c) {
  const int64_t mine = std::max<int64_t>(rx->timeout_ms / 2, 1);
  return c.budget_ms == 0 ? mine : std::min<int64_t>(mine, static_cast<int64_t>(std::min<uint64_t>(c.budget_ms, 1ull << 40)));
}

// The joiner, between slices: did the sender say the source of this catch-up (`world`) left
// (CATCHUP_CANCEL, maybe behind the next update's frames), close the group, or go away? The frames
// stay buffered for later.
wsync_status_t sender_word(Link* rx, const std::string& world) {
  rx->conn.pump();
  if (rx->conn.has_frame() && rx->conn.pump_all(1u << 20) != WSYNC_OK) clear_error();  // (behind the frames buffered)
  std::vector<std::vector<uint8_t>> bodies;
  rx->conn.peek_all(static_cast<uint16_t>(MsgType::kCatchupCancel), &bodies);
  for (const auto& b : bodies) {
    CatchupBody c;
    if (decode_catchup(b, &c) == WSYNC_OK && c.world == world)
      return fail(WSYNC_ERR_PEER_FAILED, "the sender says the %s left: %s",
                  c.role == CatchupBody::kSource ? "joiner" : "source", c.reason.c_str());
  }
  bodies.clear();
  rx->conn.peek_all(static_cast<uint16_t>(MsgType::kClose), &bodies);
  if (!bodies.empty()) return fail(WSYNC_ERR_PEER_FAILED, "the sender closed the group");
  if (rx->conn.closed() && !rx->conn.has_frame()) return fail(WSYNC_ERR_PEER_FAILED, "the sender closed its connection");
  return WSYNC_OK;
}

// Wait for the instance's send or receive of `seq`, in slices, until `deadline`.
wsync_status_t wait_seq(Link* rx, void* self, uint64_t seq, bool send, int64_t deadline,
                        const std::string& world = "") {
  for (;;) {
    if ((!send || !world.empty()) && sender_word(rx, world) != WSYNC_OK) return last_status();
    clear_error();
    const int64_t slice = std::max<int64_t>(1, std::min<int64_t>(deadline - now_ms(), 100));
    wsync_status_t st = send ? tp(rx)->send_wait(self, seq, slice) : tp(rx)->recv_wait(self, seq, slice);
    if (st != WSYNC_ERR_TIMEOUT) {
      if (st != WSYNC_OK) return fail(st, "transport '%s': %s", tp(rx)->name, plugin_error("transport", tp(rx)->name).c_str());
      return WSYNC_OK;
    }
    if (now_ms() >= deadline) return fail(WSYNC_ERR_TIMEOUT, "seq %llu did not %s in time",
                                          static_cast<unsigned long long>(seq), send ? "leave" : "arrive");
  }
}

wsync_status_t send_range(Link* rx, void* self, uint64_t seq, const void* data, uint64_t len, int dev_type,
                          int dev_index) {
  wsync_buffer_t buf{};
  buf.struct_size = sizeof buf;
  buf.device_type = dev_type;
  buf.device_index = dev_index;
  buf.data = data;
  buf.len = len;
  const uint32_t joiner = 1;
  clear_error();
  wsync_status_t st = tp(rx)->send_post(self, seq, &buf, &joiner, 1);
  return st == WSYNC_OK ? st : fail(st, "transport '%s': %s", tp(rx)->name, plugin_error("transport", tp(rx)->name).c_str());
}

wsync_status_t recv_range(Link* rx, void* self, uint64_t seq, void* data, uint64_t len, int64_t deadline,
                          const std::string& world) {
  wsync_iov_t iov{data, len};
  clear_error();
  wsync_status_t st = tp(rx)->recv_post(self, seq, &iov, 1);
  if (st != WSYNC_OK) return fail(st, "transport '%s': %s", tp(rx)->name, plugin_error("transport", tp(rx)->name).c_str());
  return wait_seq(rx, self, seq, false, deadline, world);
}

// What the source serves: its registered tensors that hold the committed version, planned into
// buckets, or (status) why it cannot.
struct Offer {
  wsync_status_t status = WSYNC_OK;
  std::string reason;
  std::vector<std::string> names;  // the tensors, in order (PlanEntry::tensor_index points here)
  std::vector<PlanBucket> buckets;
};

std::string cannot_serve(const Link* rx, uint64_t version, wsync_status_t* status) {
  *status = WSYNC_ERR_INVALID_STATE;
  if (rx->sh->committed != version)
    return "receiver rank " + std::to_string(rx->rank) + " holds version " + std::to_string(rx->sh->committed) +
           ", not " + std::to_string(version);
  if (!rx->sh->touched.empty() || rx->sh->apply_failed)
    return "receiver rank " + std::to_string(rx->rank) + "'s buffers hold a mix (an update failed in them)";
  *status = WSYNC_ERR_UNSUPPORTED;
  if (tp(rx)->caps & WSYNC_TRANSPORT_CAP_STAGING_ONLY)
    return std::string("transport '") + tp(rx)->name + "' sends from its own staging only";
  *status = WSYNC_OK;
  return "";
}

Offer source_offer(const Link* rx, uint64_t version) {
  Offer o;
  o.reason = cannot_serve(rx, version, &o.status);
  if (o.status != WSYNC_OK) return o;
  for (const auto& kv : rx->sh->registry)  // (what it holds of the version: never what an engine put there)
    if (kv.second.held || kv.second.nbytes == 0) o.names.push_back(kv.first);  // (no bytes to hold)
  if (o.names.empty()) {
    o.status = WSYNC_ERR_INVALID_STATE;
    o.reason = "receiver rank " + std::to_string(rx->rank) + " holds no registered tensor of version " +
               std::to_string(version);
    return o;
  }
  std::sort(o.names.begin(), o.names.end());
  LayoutRule rule;  // one tensor per bucket (a larger one in chunks): every payload is one range of one buffer
  rule.allow_split = true;
  rule.bucket_bytes = kBucketBytes;
  for (uint32_t i = 0; i < o.names.size(); ++i) {
    const Registered& r = rx->sh->registry.at(o.names[i]);
    PlanTensor t;
    t.name = o.names[i];
    t.dtype = r.dtype;
    t.ndim = r.ndim;
    std::copy(r.shape, r.shape + WSYNC_MAX_NDIM, t.shape);
    t.nbytes = r.nbytes;
    std::vector<PlanBucket> one;
    if ((o.status = plan_buckets(rule, {t}, &one)) != WSYNC_OK) {
      o.reason = last_error();
      return o;
    }
    for (PlanBucket& b : one) {
      for (PlanEntry& e : b.entries) e.tensor_index = i;
      o.buckets.push_back(std::move(b));
    }
  }
  return o;
}

// Bucket `b` of the offer as a MANIFEST.
std::vector<uint8_t> manifest_of(const Link* rx, const Offer& o, uint64_t index, uint64_t version) {
  const PlanBucket& b = o.buckets[index];
  Manifest m;
  m.update_id = version;
  m.bucket_index = index;
  m.bucket_bytes = b.bytes;
  for (const PlanEntry& pe : b.entries) {
    const Registered& r = rx->sh->registry.at(o.names[pe.tensor_index]);
    ManifestEntry e;
    e.name = o.names[pe.tensor_index];
    e.dtype = r.dtype;
    e.ndim = r.ndim;
    std::copy(r.shape, r.shape + WSYNC_MAX_NDIM, e.shape);
    e.bucket_offset = pe.bucket_offset;
    e.length = pe.length;
    e.tensor_bytes = r.nbytes;
    e.tensor_offset = pe.tensor_offset;
    m.entries.push_back(std::move(e));
  }
  return encode_manifest(m);
}

// The source's sends, in order, up to kSendsAhead on the wire at once: a joiner reads each bucket's
// MANIFEST before it posts the bucket's receive, and a wait per message would cost a round trip
// each (three per tensor).
constexpr size_t kSendsAhead = 32;
struct Sends {
  Link* rx;
  void* self;
  int64_t deadline;
  std::string world;            // the sender's CATCHUP_CANCEL of it ends the sends (the joiner left)
  uint64_t next = 1;            // the seq of the next message
  std::deque<uint64_t> moving;  // posted, not known to have left

  wsync_status_t post(const void* data, uint64_t len, int dev_type, int dev_index) {
    wsync_status_t st = WSYNC_OK;
    if (moving.size() >= kSendsAhead) st = oldest_left();
    if (st == WSYNC_OK) st = send_range(rx, self, next, data, len, dev_type, dev_index);
    if (st == WSYNC_OK) moving.push_back(next++);
    return st;
  }
  wsync_status_t oldest_left() {
    wsync_status_t st = wait_seq(rx, self, moving.front(), true, deadline, world);
    moving.pop_front();
    return st;
  }
  wsync_status_t all_left() {
    wsync_status_t st = WSYNC_OK;
    while (!moving.empty() && st == WSYNC_OK) st = oldest_left();
    return st;
  }
};

// The head and every bucket, in order. What the transport may still read lives in
// rx->catchup_keep until the instance is destroyed (at the next catch-up or at destroy).
wsync_status_t serve(Link* rx, void* self, const Offer& o, const CatchupBody& c, int64_t deadline, uint64_t* bytes) {
  const uint64_t version = c.version;
  std::vector<uint8_t>& keep = rx->catchup_keep;
  const uint64_t head[3] = {kMagic, static_cast<uint64_t>(static_cast<int64_t>(o.status)),
                            o.status != WSYNC_OK ? o.reason.size() : o.buckets.size()};
  keep.assign(reinterpret_cast<const uint8_t*>(head), reinterpret_cast<const uint8_t*>(head) + sizeof head);
  if (o.status != WSYNC_OK) keep.insert(keep.end(), o.reason.begin(), o.reason.end());
  std::vector<size_t> at;  // where each bucket's length and MANIFEST start in `keep` (filled whole first:
                           // the transport reads it while later ones are posted)
  for (uint64_t i = 0; i < o.buckets.size() && o.status == WSYNC_OK; ++i) {
    const std::vector<uint8_t> m = manifest_of(rx, o, i, version);
    const uint64_t len = m.size();
    at.push_back(keep.size());
    keep.insert(keep.end(), reinterpret_cast<const uint8_t*>(&len), reinterpret_cast<const uint8_t*>(&len) + sizeof len);
    keep.insert(keep.end(), m.begin(), m.end());
  }
  Sends out{rx, self, deadline, c.world, 1, {}};
  wsync_status_t st = out.post(keep.data(), sizeof head, WSYNC_DEVICE_CPU, 0);
  if (o.status != WSYNC_OK) {
    if (st == WSYNC_OK && !o.reason.empty()) st = out.post(keep.data() + sizeof head, o.reason.size(), WSYNC_DEVICE_CPU, 0);
    return st == WSYNC_OK ? out.all_left() : st;
  }
  for (uint64_t i = 0; i < o.buckets.size() && st == WSYNC_OK; ++i) {
    const size_t end = i + 1 < at.size() ? at[i + 1] : keep.size();
    st = out.post(keep.data() + at[i], sizeof(uint64_t), WSYNC_DEVICE_CPU, 0);
    if (st == WSYNC_OK) st = out.post(keep.data() + at[i] + sizeof(uint64_t), end - at[i] - sizeof(uint64_t), WSYNC_DEVICE_CPU, 0);
    const PlanBucket& b = o.buckets[i];
    if (st != WSYNC_OK || b.bytes == 0) continue;
    const PlanEntry& e = b.entries.front();  // (one range of one buffer)
    const Registered& r = rx->sh->registry.at(o.names[e.tensor_index]);
    st = out.post(static_cast<const uint8_t*>(r.data) + e.tensor_offset, b.bytes, r.device_type, r.device_index);
    *bytes += b.bytes;
  }
  return st == WSYNC_OK ? out.all_left() : st;
}

// The source: send, log, and go on whatever happened (a failure is the joiner's to report).
wsync_status_t be_source(Link* rx, const CatchupBody& c) {
  if (rx->catchup_self != nullptr) tp(rx)->destroy(rx->catchup_self);  // the last catch-up's (its joiner is done)
  rx->catchup_self = nullptr;
  const int64_t start = now_ms(), deadline = deadline_after(budget(rx, c));
  int fd = -1;
  uint64_t bytes = 0;
  Offer cat;
  wsync_status_t st = open_world(rx, c.world, 0, 2, budget(rx, c), &rx->catchup_self, &fd);
  if (st == WSYNC_OK) {
    cat = source_offer(rx, c.version);
    st = serve(rx, rx->catchup_self, cat, c, deadline, &bytes);
  }
  if (st != WSYNC_OK)
    WSYNC_LOGW("receiver rank %u: the catch-up of receiver rank %u to version %llu failed here: %s", rx->rank, c.peer,
               static_cast<unsigned long long>(c.version), last_error().c_str());
  else if (cat.status != WSYNC_OK && rx->sh->registry.empty())  // (an engine that takes views: expected)
    WSYNC_LOGI("receiver rank %u: cannot catch receiver rank %u up to version %llu: %s", rx->rank, c.peer,
               static_cast<unsigned long long>(c.version), cat.reason.c_str());
  else if (cat.status != WSYNC_OK)
    WSYNC_LOGW("receiver rank %u: cannot catch receiver rank %u up to version %llu: %s", rx->rank, c.peer,
               static_cast<unsigned long long>(c.version), cat.reason.c_str());
  else
    WSYNC_LOGI("receiver rank %u: caught receiver rank %u up to version %llu (%zu tensors, %llu bytes) in %lld ms",
               rx->rank, c.peer, static_cast<unsigned long long>(c.version), cat.names.size(),
               static_cast<unsigned long long>(bytes), static_cast<long long>(now_ms() - start));
  clear_error();
  return WSYNC_OK;
}

// What the joiner receives into, alive until its instance is destroyed.
struct JoinBuffers {
  uint64_t head[3] = {0, 0, 0};
  uint64_t manifest_len = 0;
  std::vector<uint8_t> raw;
  MemBlock discard;  // what it does not take lands here
};

// What the senders vouch for, per tensor (CATCHUP): what the source's bytes must match. One sender:
// the XXH3-64 of the whole tensor as it sent it. Many senders: per part each sent (a box of the full
// tensor), the XXH3-64 of the part's bytes in the box's own row-major order. A tensor nobody
// vouches for is not taken (no digest, no commit).
// `unusable`: more parts than a tensor can have (kMaxParts): it is not taken, and the version does
// not commit.
struct Vouched {
  bool whole = false;
  uint64_t sum = 0;
  std::vector<std::pair<Box, uint64_t>> parts;
  bool unusable = false;
};
using SenderDigests = std::unordered_map<std::string, Vouched>;
constexpr size_t kMaxParts = 1024;  // (per tensor, all senders: one per distinct box a receiver needs)

void add_told(const CatchupBody& c, SenderDigests* out) {
  for (size_t i = 0; i < c.names.size() && i < c.sums.size(); ++i) {
    Vouched& v = (*out)[c.names[i]];
    if (v.parts.size() >= kMaxParts) {
      v.parts.clear();
      v.unusable = true;
    }
    if (v.unusable) continue;
    if (c.boxes.empty()) {
      v.whole = true;
      v.sum = c.sums[i];
      continue;
    }
    Box b;
    b.ndim = static_cast<int32_t>(c.boxes[i].size() / 2);
    for (int32_t d = 0; d < b.ndim; ++d) {
      b.offset[d] = c.boxes[i][2 * d];
      b.extent[d] = c.boxes[i][2 * d + 1];
    }
    v.parts.emplace_back(b, c.sums[i]);
  }
}

// The box registered tensor `r` holds of its full tensor.
Box held_box(const Registered& r) { return r.slice ? r.box : full_box(r.ndim, r.shape); }

// Many senders: the parts that tile the box `held` (each inside it; larger first, none overlapping
// one taken already: every sender's part for receivers needing `held` itself, where a sender also
// cut smaller ones for others), or false when they do not cover it (a sender vouched for none).
bool tiling(const Box& held, const std::vector<std::pair<Box, uint64_t>>& parts,
            std::vector<std::pair<Box, uint64_t>>* out) {
  std::vector<std::pair<Box, uint64_t>> inside;
  for (const auto& p : parts) {
    Box common;
    if (box_intersect(p.first, held, &common) && box_equal(common, p.first)) inside.push_back(p);
  }
  const auto elems = [](const Box& b) {
    int64_t n = 0;
    return box_elements(b, &n) ? n : 0;
  };
  std::stable_sort(inside.begin(), inside.end(), [&](const auto& a, const auto& b) { return elems(a.first) > elems(b.first); });
  int64_t covered = 0;
  for (const auto& p : inside) {
    Box common;
    if (std::any_of(out->begin(), out->end(), [&](const auto& q) { return box_intersect(q.first, p.first, &common); }))
      continue;
    out->push_back(p);
    covered += elems(p.first);
  }
  int64_t want = 0;
  return box_elements(held, &want) && covered == want;
}

// Where the joiner puts chunk `e`: *take and its registered buffer (staged: its staged block), or
// not (not registered alike, no digest from the sender, or, many senders, parts that do not cover
// the box it holds: it lands in the discard block, and its buffer keeps its bytes).
wsync_status_t target_of(Link* rx, const ManifestEntry& e, const SenderDigests& digests, bool* take, uint8_t** dst) {
  *take = false;
  *dst = nullptr;
  auto it = rx->sh->registry.find(e.name);
  if (it == rx->sh->registry.end() || digests.count(e.name) == 0) return WSYNC_OK;
  const Registered& r = it->second;
  const Vouched& v = digests.at(e.name);
  const bool by_parts = !v.parts.empty();  // (a slice is checked by parts only)
  std::vector<std::pair<Box, uint64_t>> tiles;
  if (v.unusable || (by_parts && !tiling(held_box(r), v.parts, &tiles))) {
    if (e.tensor_offset == 0)
      WSYNC_LOGW("receiver rank %u: catch-up: the senders' digests do not cover %s of tensor '%s' (or list more than "
                 "%zu parts); it keeps its bytes", rx->rank, box_str(held_box(r)).c_str(), e.name.c_str(), kMaxParts);
    return WSYNC_OK;
  }
  if ((r.slice && !by_parts) || r.dtype != e.dtype || r.ndim != e.ndim || r.nbytes != e.tensor_bytes ||
      !std::equal(r.shape, r.shape + r.ndim, e.shape)) {
    if (e.tensor_offset == 0)
      WSYNC_LOGW("receiver rank %u: catch-up: tensor '%s' is registered here with another dtype or shape than the "
                 "source's; it keeps its bytes", rx->rank, e.name.c_str());
    return WSYNC_OK;
  }
  wsync_status_t st = rx->sh->arrived.check(e);  // (a chunk twice, or overlapping one: refused before any post)
  if (st != WSYNC_OK) return fail_msg(st, "the catch-up source: " + last_error());
  note_touched(rx, e.name);
  uint8_t* base = static_cast<uint8_t*>(r.data);
  if (rx->sh->staged && (st = staged_block(rx, e.name, e.tensor_bytes, &base)) != WSYNC_OK) return st;
  *dst = base + e.tensor_offset;
  *take = true;
  return WSYNC_OK;
}

wsync_status_t mismatch(const CatchupBody& c, const std::string& what, uint64_t sum, uint64_t want) {
  return fail(WSYNC_ERR_PROTOCOL,
              "%s from receiver rank %u (the catch-up source) is not version %llu as the sender sent it "
              "(XXH3 %016llx, the sender's %016llx): the source's copy changed after its commit (written to, or "
              "post-processed in place)",
              what.c_str(), c.peer, static_cast<unsigned long long>(c.version), static_cast<unsigned long long>(sum),
              static_cast<unsigned long long>(want));
}

// A tensor all of which arrived must be what the senders sent: the source is a member, trusted
// with nothing else. *verified: it is (false, no error: the senders' parts do not cover it).
wsync_status_t check_digest(Link* rx, const CatchupBody& c, const ManifestEntry& e, const Vouched& want,
                            bool* verified) {
  *verified = false;
  const Registered& reg = rx->sh->registry.at(e.name);
  uint8_t* base = static_cast<uint8_t*>(reg.data);
  wsync_status_t st = rx->sh->staged ? staged_block(rx, e.name, e.tensor_bytes, &base) : WSYNC_OK;
  const int32_t dev = (rx->sh->staged ? rx->device >= 0 : reg.device_type == WSYNC_DEVICE_CUDA) ? WSYNC_DEVICE_CUDA
                                                                                                 : WSYNC_DEVICE_CPU;
  const int32_t index = rx->sh->staged ? rx->device : reg.device_index;
  if (want.parts.empty()) {
    uint64_t sum = 0;
    if (st == WSYNC_OK) st = tensor_digest(base, e.tensor_bytes, dev, index, &sum);
    if (st != WSYNC_OK)
      return fail(st, "tensor '%s' from the catch-up source cannot be checked: %s", e.name.c_str(), last_error().c_str());
    if (sum != want.sum) return mismatch(c, "tensor '" + e.name + "'", sum, want.sum);
    *verified = true;
    return WSYNC_OK;
  }
  const Box held = held_box(reg);
  std::vector<std::pair<Box, uint64_t>> parts;
  if (!tiling(held, want.parts, &parts)) {
    WSYNC_LOGW("receiver rank %u: catch-up: the senders' digests of version %llu do not cover %s of tensor '%s'; it "
               "is not taken", rx->rank, static_cast<unsigned long long>(c.version), box_str(held).c_str(),
               e.name.c_str());
    return st;
  }
  for (const auto& p : parts) {
    std::vector<ByteRun> runs;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    uint64_t sum = 0;
    if (st == WSYNC_OK) st = box_runs(p.first, held, wsync_dtype_size(reg.dtype), &runs);
    for (const ByteRun& r : runs) ranges.emplace_back(r.offset, r.length);
    if (st == WSYNC_OK) st = tensor_digest_runs(base, ranges, dev, index, &sum);
    if (st != WSYNC_OK)
      return fail(st, "tensor '%s' from the catch-up source cannot be checked: %s", e.name.c_str(), last_error().c_str());
    if (sum != p.second) return mismatch(c, box_str(p.first) + " of tensor '" + e.name + "'", sum, p.second);
  }
  *verified = true;
  return WSYNC_OK;
}

// The source's MANIFEST of bucket `index`, read and checked like any bucket's.
wsync_status_t read_bucket_manifest(Link* rx, void* self, const CatchupBody& c, uint64_t index, uint64_t* seq,
                                    JoinBuffers* bufs, int64_t deadline, Manifest* m) {
  wsync_status_t st = recv_range(rx, self, (*seq)++, &bufs->manifest_len, sizeof bufs->manifest_len, deadline, c.world);
  if (st != WSYNC_OK) return st;
  if (bufs->manifest_len == 0 || bufs->manifest_len > kMaxManifestBytes)
    return fail(WSYNC_ERR_PROTOCOL, "the catch-up source announces a %llu-byte MANIFEST for bucket %llu (at most %llu)",
                static_cast<unsigned long long>(bufs->manifest_len), static_cast<unsigned long long>(index),
                static_cast<unsigned long long>(kMaxManifestBytes));
  bufs->raw.resize(bufs->manifest_len);
  if ((st = recv_range(rx, self, (*seq)++, bufs->raw.data(), bufs->raw.size(), deadline, c.world)) != WSYNC_OK)
    return st;
  if ((st = decode_manifest(bufs->raw.data(), bufs->raw.size(), m)) != WSYNC_OK)
    return fail_msg(st, "the catch-up source's bucket " + std::to_string(index) + ": " + last_error());
  if (m->update_id != c.version)
    return fail(WSYNC_ERR_PROTOCOL, "the source serves version %llu, the sender asked for %llu",
                static_cast<unsigned long long>(m->update_id), static_cast<unsigned long long>(c.version));
  if (m->bucket_index != index || m->flags != 0 || m->bucket_bytes > kBucketBytes)
    return fail(WSYNC_ERR_PROTOCOL, "the catch-up source's bucket %llu is bucket %llu of %llu bytes with flags %u "
                "(expected bucket %llu, at most %llu bytes, no flags)", static_cast<unsigned long long>(index),
                static_cast<unsigned long long>(m->bucket_index), static_cast<unsigned long long>(m->bucket_bytes),
                m->flags, static_cast<unsigned long long>(index), static_cast<unsigned long long>(kBucketBytes));
  return WSYNC_OK;
}

// Where each chunk of a bucket goes: taken (its registered buffer or staged block) or discarded.
struct Placement {
  std::vector<uint8_t*> dst;
  std::vector<uint8_t> take;
  uint64_t taken = 0;  // bytes taken
};

// The payload of bucket `m`, in order: each chunk where it goes, the rest (padding, chunks not
// taken) into the discard block.
wsync_status_t receive_payload(Link* rx, void* self, const CatchupBody& c, const Manifest& m, const Placement& p,
                               uint64_t* seq, JoinBuffers* bufs, int64_t deadline) {
  wsync_status_t st = WSYNC_OK;
  if (p.taken < m.bucket_bytes && bufs->discard.size() < m.bucket_bytes) {
    bufs->discard.reset();
    if ((st = MemBlock::alloc(kBucketBytes, rx->device_memory ? rx->device : -1, &bufs->discard)) != WSYNC_OK) return st;
  }
  std::vector<wsync_iov_t> iov;
  uint64_t cursor = 0;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const ManifestEntry& e = m.entries[i];
    if (e.bucket_offset > cursor) iov.push_back(wsync_iov_t{bufs->discard.data() + cursor, e.bucket_offset - cursor});
    if (e.length > 0) iov.push_back(wsync_iov_t{p.take[i] ? p.dst[i] : bufs->discard.data() + e.bucket_offset, e.length});
    cursor = e.bucket_offset + e.length;
  }
  if (m.bucket_bytes > cursor) iov.push_back(wsync_iov_t{bufs->discard.data() + cursor, m.bucket_bytes - cursor});
  clear_error();
  if ((st = tp(rx)->recv_post(self, *seq, iov.data(), iov.size())) != WSYNC_OK)
    return fail(st, "transport '%s': %s", tp(rx)->name, plugin_error("transport", tp(rx)->name).c_str());
  return wait_seq(rx, self, (*seq)++, false, deadline, c.world);
}

// One bucket: its MANIFEST, each chunk placed (or discarded), its payload received; the chunks
// taken recorded, and every tensor completed by them checked against the senders' digests
// (`verified` names those that matched).
wsync_status_t take_bucket(Link* rx, void* self, const CatchupBody& c, const SenderDigests& digests, uint64_t index,
                           uint64_t* seq, JoinBuffers* bufs, int64_t deadline, std::unordered_set<std::string>* listed,
                           std::unordered_set<std::string>* verified) {
  Manifest m;
  wsync_status_t st = read_bucket_manifest(rx, self, c, index, seq, bufs, deadline, &m);
  Placement p;
  p.dst.assign(m.entries.size(), nullptr);
  p.take.assign(m.entries.size(), 0);
  for (size_t i = 0; i < m.entries.size() && st == WSYNC_OK; ++i) {
    listed->insert(m.entries[i].name);
    bool t = false;
    st = target_of(rx, m.entries[i], digests, &t, &p.dst[i]);
    p.take[i] = t;
    p.taken += t ? m.entries[i].length : 0;
  }
  if (st == WSYNC_OK && m.bucket_bytes > 0) st = receive_payload(rx, self, c, m, p, seq, bufs, deadline);
  for (size_t i = 0; i < m.entries.size() && st == WSYNC_OK; ++i) {
    if (!p.take[i]) continue;
    const ManifestEntry& e = m.entries[i];
    if ((st = rx->sh->arrived.record(e)) != WSYNC_OK) return fail_msg(st, "the catch-up source: " + last_error());
    bool ok = false;
    if (rx->sh->arrived.complete(e.name) && (st = check_digest(rx, c, e, digests.at(e.name), &ok)) == WSYNC_OK && ok)
      verified->insert(e.name);
  }
  return st;
}

wsync_status_t take_all(Link* rx, void* self, const CatchupBody& c, const SenderDigests& digests, JoinBuffers* bufs,
                        int64_t deadline, std::unordered_set<std::string>* verified) {
  wsync_status_t st = recv_range(rx, self, 1, bufs->head, sizeof bufs->head, deadline, c.world);
  if (st != WSYNC_OK) return st;
  const int64_t status = static_cast<int64_t>(bufs->head[1]);
  const uint64_t n = bufs->head[2];
  if (bufs->head[0] != kMagic || (status != 0 && n > kFrameMaxReasonBytes) || (status == 0 && n > kMaxBuckets))
    return fail(WSYNC_ERR_PROTOCOL, "the catch-up source sent no head (magic %llx, status %lld, %llu)",
                static_cast<unsigned long long>(bufs->head[0]), static_cast<long long>(status),
                static_cast<unsigned long long>(n));
  if (status != 0) {  // (nothing moves: it takes the next update, as when no member is free)
    bufs->raw.assign(n, 0);
    if (n > 0 && (st = recv_range(rx, self, 2, bufs->raw.data(), n, deadline, c.world)) != WSYNC_OK) return st;
    const std::string reason = printable_text(std::string(bufs->raw.begin(), bufs->raw.end()));
    if (rx->sh->registry.empty())  // (it takes views: nothing a source could have given it)
      WSYNC_LOGI("receiver rank %u: the catch-up source cannot serve version %llu (%s); this receiver registered "
                 "nothing and takes the next update", rx->rank, static_cast<unsigned long long>(c.version),
                 reason.c_str());
    else
      WSYNC_LOGW("receiver rank %u: the catch-up source cannot serve version %llu: %s", rx->rank,
                 static_cast<unsigned long long>(c.version), reason.c_str());
    return WSYNC_OK;
  }
  std::unordered_set<std::string> listed;
  uint64_t seq = 2;
  for (uint64_t i = 0; i < n; ++i)
    if ((st = take_bucket(rx, self, c, digests, i, &seq, bufs, deadline, &listed, verified)) != WSYNC_OK) return st;
  for (const auto& kv : rx->sh->registry)
    if (digests.count(kv.first) != 0 && listed.count(kv.first) == 0)
      WSYNC_LOGW("receiver rank %u: catch-up: the source holds no tensor '%s'", rx->rank, kv.first.c_str());
  return WSYNC_OK;
}

// The catch-up failed: the sender hears why (CATCHUP_FAILED: it removes this receiver, which may
// join again), what arrived is dropped, and no more buckets are taken.
wsync_status_t catchup_failed(Link* rx, const CatchupBody& c, wsync_status_t st) {
  const std::string why = "the catch-up to version " + std::to_string(c.version) + " from receiver rank " +
                          std::to_string(c.peer) + " failed: " + last_error();
  // (the sender removes it for either; PROTOCOL names bytes or a catalogue that were wrong)
  const wsync_status_t code = st == WSYNC_ERR_PROTOCOL ? st : WSYNC_ERR_PEER_FAILED;
  std::vector<Link*> links = rx->sh->links;  // (many senders: every sender removes it)
  if (links.empty()) links.push_back(rx);
  for (Link* l : links) {
    l->conn.pump();
    if (!l->conn.closed()) send_status(l, MsgType::kCatchupFailed, 0, code, why);
    l->broken = why;  // (in place, its buffers may hold a mix)
  }
  drop_update(rx, why);
  if (rx->sh->links.size() > 1) {  // (many senders: every sender removes it; no sender was lost)
    rx->sh->commit_ready = 0;
    rx->sh->sender_lost = false;
    rx->sh->link_status = code;
    rx->sh->link_failed = why;
  }
  return fail(code, "%s", why.c_str());
}

// What the joiner must hold to commit the version: every tensor it registered that the group
// committed (one the trainer never sent keeps what the engine put there, here as on every member),
// each checked. When it does not, nothing commits: staged bytes are dropped; in place, the buffers
// written read as mixed until the next commit, and the next update brings its tensors.
bool holds_wholly(Link* rx, const CatchupBody& c, const SenderDigests& digests,
                  const std::unordered_set<std::string>& verified) {
  uint64_t needed = 0, missing = 0;
  for (const auto& kv : rx->sh->registry) {
    if (digests.count(kv.first) == 0) continue;
    const Vouched& v = digests.at(kv.first);
    if (kv.second.slice && v.parts.empty() && !v.unusable) continue;  // (one sender: slices are not its to vouch)
    ++needed;
    if (verified.count(kv.first) == 0) ++missing;
  }
  if (needed != 0 && missing == 0) return true;
  if (needed == 0) {  // (it takes views, or registered other tensors: expected)
    WSYNC_LOGI("receiver rank %u: registered none of the tensors the group committed; version %llu is not "
               "committed (the next update brings this receiver its tensors)", rx->rank,
               static_cast<unsigned long long>(c.version));
  } else {
    WSYNC_LOGW("receiver rank %u: the catch-up from receiver rank %u gave %llu of the %llu tensors registered "
               "here that the group committed; version %llu is not committed (the next update brings this "
               "receiver its tensors)", rx->rank, c.peer, static_cast<unsigned long long>(needed - missing),
               static_cast<unsigned long long>(needed), static_cast<unsigned long long>(c.version));
  }
  drop_staged(rx);
  rx->sh->arrived.clear();
  return false;
}

// The joiner: take the version, then say it may commit it (*caught_up, 0: not) or fail, and take no
// more buckets, by `deadline`. `told`: the senders' CATCHUPs (one sender: one); with many, it
// commits only when each of its `senders` told it and vouched for its parts.
wsync_status_t be_joiner(Link* rx, const std::vector<CatchupBody>& told, size_t senders, int64_t deadline,
                         uint64_t* caught_up) {
  *caught_up = 0;
  const CatchupBody& c = told.front();
  if (c.peer == 0 || c.peer == rx->rank || c.peer >= rx->world_size || c.version == 0) {
    fail(WSYNC_ERR_PROTOCOL, "the sender's CATCHUP names source rank %u and version %llu", c.peer,
         static_cast<unsigned long long>(c.version));
    return catchup_failed(rx, c, WSYNC_ERR_PROTOCOL);
  }
  if (c.version <= rx->sh->committed) return WSYNC_OK;  // (it has that version already)
  SenderDigests digests;
  bool every = told.size() == senders;  // (many senders: each vouches for its own parts only)
  for (const CatchupBody& t : told) {
    add_told(t, &digests);
    every &= senders == 1 || !t.names.empty();
    if (t.names.empty() && !t.reason.empty())
      WSYNC_LOGW("receiver rank %u: catch-up to version %llu: %s", rx->rank, static_cast<unsigned long long>(c.version),
                 t.reason.c_str());
  }
  const int64_t start = now_ms();
  JoinBuffers bufs;  // (outlives the instance)
  void* self = nullptr;
  int fd = -1;
  std::unordered_set<std::string> verified;
  wsync_status_t st = open_world(rx, c.world, 1, 2, std::max<int64_t>(remaining_ms(deadline), 1), &self, &fd);
  if (st == WSYNC_OK) st = take_all(rx, self, c, digests, &bufs, deadline, &verified);
  const std::string why = st == WSYNC_OK ? "" : last_error();
  if (self != nullptr) tp(rx)->destroy(self);  // (no write into the buffers after this returns)
  if (st != WSYNC_OK) {
    fail(st, "%s", why.c_str());
    return catchup_failed(rx, c, st);
  }
  if (!every) {  // (a tensor only that sender sent would otherwise keep the engine's bytes, unnamed)
    WSYNC_LOGW("receiver rank %u: %zu of the %zu senders vouched for their parts of version %llu; it is not committed "
               "(the next update brings this receiver what it carries)", rx->rank, told.size(), senders,
               static_cast<unsigned long long>(c.version));
    drop_staged(rx);
    rx->sh->arrived.clear();
    return WSYNC_OK;
  }
  if (!holds_wholly(rx, c, digests, verified)) return WSYNC_OK;
  WSYNC_LOGI("receiver rank %u: caught up to version %llu from receiver rank %u (%zu tensors) in %lld ms", rx->rank,
             static_cast<unsigned long long>(c.version), c.peer, verified.size(),
             static_cast<long long>(now_ms() - start));
  *caught_up = c.version;
  return WSYNC_OK;
}

// Many senders: every sender tells the joiner (CATCHUP, role joiner, its own digests), each on its
// own link before its first MANIFEST of the update. The one read first (`c`, on link `from`)
// starts the catch-up; the others' are read here, each the next frame of its link, within the
// budget (a link whose next frame is another: that sender told nothing, and vouches for nothing).
wsync_status_t gather_told(Link* rx, Link* from, const CatchupBody& c, int64_t deadline, std::vector<CatchupBody>* told) {
  for (Link* l : rx->sh->links) {
    if (l == from) continue;
    uint16_t type = 0;
    while ((type = inbox_next_type(l)) == 0 && !l->conn.closed() && now_ms() < deadline) {
      pollfd pfd{l->conn.fd(), POLLIN, 0};
      ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(remaining_ms(deadline), 20)));
    }
    if (type != static_cast<uint16_t>(MsgType::kCatchup)) {
      WSYNC_LOGW("receiver rank %u: sender %u said nothing of the catch-up to version %llu (%s): it vouches for none "
                 "of its parts", rx->rank, l->sender, static_cast<unsigned long long>(c.version),
                 type == 0 ? "no word in time" : msg_type_name(type));
      continue;
    }
    Frame f;
    CatchupBody b;
    wsync_status_t st = inbox_recv(l, &f, 0);
    if (st == WSYNC_OK) st = decode_catchup(f.body, &b);
    if (st == WSYNC_OK && (b.role != CatchupBody::kJoiner || b.world != c.world || b.version != c.version || b.peer != c.peer))
      st = fail(WSYNC_ERR_PROTOCOL, "sender %u's CATCHUP (role %u, source rank %u, version %llu, world '%s') is not "
                "sender %u's (source rank %u, version %llu, world '%s')", l->sender, b.role, b.peer,
                static_cast<unsigned long long>(b.version), b.world.c_str(), from->sender, c.peer,
                static_cast<unsigned long long>(c.version), c.world.c_str());
    if (st != WSYNC_OK) return catchup_failed(rx, c, st);
    told->push_back(std::move(b));
  }
  return WSYNC_OK;
}

}  // namespace

namespace {

// A catch-up is told between updates: is an update under way here (a bucket on the wire, a
// version finalized or reported and not yet committed, on any link)?
bool mid_update(const Link* rx, bool many) {
  bool busy = rx->sh->commit_ready != 0;
  for (const Link* l : many ? rx->sh->links : std::vector<Link*>{const_cast<Link*>(rx)})
    busy |= !l->flight.empty() || l->pending_commit != 0;
  return busy;
}

// The joiner's side once it may start: every sender's word (many), the bytes, and its COMMIT.
wsync_status_t take_catchup(Link* rx, Link* l0, const CatchupBody& c, bool many, wsync_receiver_event_t* ev) {
  std::vector<CatchupBody> told{c};
  const int64_t deadline = deadline_after(budget(rx, c));  // (one budget: the words, then the bytes)
  if (many && gather_told(rx, rx, c, deadline, &told) != WSYNC_OK) return last_status();
  uint64_t version = 0;
  wsync_status_t st = be_joiner(l0, told, many ? rx->sh->links.size() : 1, deadline, &version);
  if (st != WSYNC_OK || version == 0) return st;
  if (many) {
    rx->sh->commit_ready = version;
  } else {
    rx->pending_commit = version;
  }
  l0->catchup_commit = true;
  ev->kind = WSYNC_EVENT_COMMIT;
  ev->version = version;
  return WSYNC_OK;
}

}  // namespace

wsync_status_t catchup(Link* rx, const Frame& f, wsync_receiver_event_t* ev) {
  CatchupBody c;
  if (decode_catchup(f.body, &c) != WSYNC_OK) return refuse(rx, 0, last_status());
  const bool many = rx->sh->links.size() > 1;
  Link* l0 = many ? rx->sh->links.front() : rx;  // (the catch-up's world: through sender 0's store)
  // Many senders: every sender says the same catch-up; the first one read does it (the others may
  // be read after the update's first MANIFESTs of senders that said it first).
  if (many && c.world == rx->sh->catchup_world) return WSYNC_OK;
  if (c.role != CatchupBody::kSource && c.role != CatchupBody::kJoiner)
    return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender's CATCHUP has role %u", c.role));
  const bool busy = mid_update(rx, many);
  if (busy && many && c.role == CatchupBody::kSource) {  // (another sender's update came first here)
    WSYNC_LOGW("receiver rank %u: cannot serve receiver rank %u's catch-up to version %llu: an update is under way "
               "here (the joiner fails it within its budget, and this receiver serves none until its next commit)",
               rx->rank, c.peer, static_cast<unsigned long long>(c.version));
    rx->sh->catchup_world = c.world;
    return WSYNC_OK;
  }
  if (busy) return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender sent CATCHUP in the middle of an update"));
  rx->sh->catchup_world = c.world;
  return c.role == CatchupBody::kSource ? be_source(l0, c) : take_catchup(rx, l0, c, many, ev);
}

}  // namespace wsync
