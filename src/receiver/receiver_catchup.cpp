// Catch-up (elastic groups, docs/ABI.md "Membership"): a receiver that joins an elastic group
// after a version committed takes that version from a member that holds it, not from the trainer.
// The sender pairs them with a CATCHUP frame to each, ordered before any later update on both
// control connections, so the source still holds exactly that version when it reads it and the
// joiner has it before the next update's first bucket.
//
// The bytes move over a transport world of two (the source rank 0, the joiner rank 1) named by the
// sender; on it, in order:
//   seq 1   16 bytes: u64 kMagic, u64 the catalogue's length (at most kMaxCatalogue)
//   seq 2   the catalogue: i32 status, str reason (a source that cannot serve says why and nothing
//           follows), u64 version, u32 n, n x (str name, i32 dtype, i32 ndim, i64 shape[ndim],
//           u64 nbytes, u32 has_sum, u64 sum: written 0 since protocol 4, and never read)
//   seq 3.. every tensor's bytes in catalogue order, in chunks of at most kChunk bytes
// The source sends its registered tensors as they are (what it holds of the committed version). The
// joiner places those it registered with the same dtype and shape for which the sender's CATCHUP
// carries a digest (in place, or staged until its commit), checks each one against that digest
// (XXH3-64 of the bytes as the sender sent them: the source is trusted with nothing; a mismatch
// fails the catch-up naming it), and drops the rest; then it reports COMMIT of the version, which
// its engine confirms with wsync_receiver_commit as always (the sender waits for no COMMITTED).
#include <xxhash.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "common/bytes.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/names.h"
#include "control/frames.h"
#include "device/tensor_digest.h"
#include "receiver/receiver.h"

namespace wsync {
namespace {

constexpr uint64_t kMagic = 0x3170756863746163ull;  // "catchup1"
constexpr uint64_t kMaxCatalogue = 64ull << 20;
constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kChunk = 64ull << 20;

const wsync_transport_v1_t* tp(const Link* rx) { return rx->transport.table; }

// A catch-up ends within the sender's budget (half its timeout_ms: it waits timeout_ms for the
// next update's first READY from both, and a catch-up that cannot finish must not cost the source
// its membership), and within half the receiver's own timeout_ms.
int64_t budget(const Link* rx, const CatchupBody& c) {
  const int64_t mine = std::max<int64_t>(rx->timeout_ms / 2, 1);
  return c.budget_ms == 0 ? mine : std::min<int64_t>(mine, static_cast<int64_t>(std::min<uint64_t>(c.budget_ms, 1ull << 40)));
}

struct Item {
  std::string name;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};
  uint64_t nbytes = 0;
  bool has_sum = false;
  uint64_t sum = 0;
};

struct Catalogue {
  int32_t status = WSYNC_OK;
  std::string reason;
  uint64_t version = 0;
  std::vector<Item> items;
};

std::vector<uint8_t> encode(const Catalogue& c) {
  ByteWriter w;
  w.i32(c.status);
  w.str32(c.reason);
  w.u64(c.version);
  w.u32(static_cast<uint32_t>(c.items.size()));
  for (const Item& t : c.items) {
    w.str32(t.name);
    w.i32(t.dtype);
    w.i32(t.ndim);
    for (int d = 0; d < t.ndim; ++d) w.i64(t.shape[d]);
    w.u64(t.nbytes);
    w.u32(t.has_sum ? 1 : 0);
    w.u64(t.sum);
  }
  return std::move(w.data());
}

// The source's catalogue is untrusted: every count and length bounded, names checked.
wsync_status_t decode(const std::vector<uint8_t>& b, Catalogue* out) {
  ByteReader r(b);
  uint32_t n = 0;
  if (!r.i32(&out->status) || !r.str32(&out->reason, kFrameMaxReasonBytes, "reason") || !r.u64(&out->version) ||
      !r.u32(&n))
    return fail(WSYNC_ERR_PROTOCOL, "the catch-up source's catalogue is malformed (%s)", r.error().c_str());
  if (n > kMaxTensors)
    return fail(WSYNC_ERR_PROTOCOL, "the catch-up source lists %u tensors, more than %llu", n,
                static_cast<unsigned long long>(kMaxTensors));
  out->reason = printable_text(out->reason);
  std::unordered_set<std::string> seen;
  for (uint32_t i = 0; i < n; ++i) {
    Item t;
    uint32_t has = 0;
    if (!r.str32(&t.name, kMaxTensorNameBytes, "name") || !r.i32(&t.dtype) || !r.i32(&t.ndim))
      return fail(WSYNC_ERR_PROTOCOL, "the catch-up source's catalogue is cut in entry %u", i);
    const std::string bad = tensor_name_problem(t.name.data(), t.name.size());
    if (!bad.empty()) return fail(WSYNC_ERR_PROTOCOL, "catch-up catalogue entry %u: its name is invalid: %s", i, bad.c_str());
    if (t.ndim < 0 || t.ndim > WSYNC_MAX_NDIM)
      return fail(WSYNC_ERR_PROTOCOL, "catch-up catalogue entry %u ('%s'): ndim %d is out of range", i,
                  printable_name(t.name.data(), t.name.size()).c_str(), t.ndim);
    for (int d = 0; d < t.ndim; ++d)
      if (!r.i64(&t.shape[d])) return fail(WSYNC_ERR_PROTOCOL, "the catch-up source's catalogue is cut in entry %u", i);
    if (!r.u64(&t.nbytes) || !r.u32(&has) || !r.u64(&t.sum))
      return fail(WSYNC_ERR_PROTOCOL, "the catch-up source's catalogue is cut in entry %u", i);
    t.has_sum = has != 0;
    if (!seen.insert(t.name).second)
      return fail(WSYNC_ERR_PROTOCOL, "the catch-up source lists tensor '%s' twice", printable_name(t.name.data(),
                  t.name.size()).c_str());
    out->items.push_back(std::move(t));
  }
  return WSYNC_OK;
}

// The joiner, between slices: did the sender say the source of this catch-up (`world`) left
// (CATCHUP_CANCEL, maybe behind the next update's frames), close the group, or go away? The frames
// stay buffered for later.
wsync_status_t sender_word(Link* rx, const std::string& world) {
  rx->conn.pump();
  std::vector<std::vector<uint8_t>> bodies;
  rx->conn.peek_all(static_cast<uint16_t>(MsgType::kCatchupCancel), &bodies);
  for (const auto& b : bodies) {
    CatchupBody c;
    if (decode_catchup(b, &c) == WSYNC_OK && c.world == world)
      return fail(WSYNC_ERR_PEER_FAILED, "the sender says the source left: %s", c.reason.c_str());
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
    if (!send && sender_word(rx, world) != WSYNC_OK) return last_status();
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

// What the source can serve: its registered tensors, or why not.
Catalogue source_catalogue(const Link* rx, uint64_t version) {
  Catalogue c;
  c.version = version;
  if (rx->sh->committed != version) {
    c.status = WSYNC_ERR_INVALID_STATE;
    c.reason = "receiver rank " + std::to_string(rx->rank) + " holds version " + std::to_string(rx->sh->committed) +
               ", not " + std::to_string(version);
  } else if (!rx->sh->touched.empty() || rx->sh->apply_failed) {
    c.status = WSYNC_ERR_INVALID_STATE;
    c.reason = "receiver rank " + std::to_string(rx->rank) + "'s buffers hold a mix (an update failed in them)";
  } else if (tp(rx)->caps & WSYNC_TRANSPORT_CAP_STAGING_ONLY) {
    c.status = WSYNC_ERR_UNSUPPORTED;
    c.reason = std::string("transport '") + tp(rx)->name + "' sends from its own staging only";
  }
  if (c.status != WSYNC_OK) return c;
  std::vector<std::string> names;  // (what it holds of the version: never what an engine put there)
  for (const auto& kv : rx->sh->registry)
    if (!kv.second.slice && (kv.second.held || kv.second.nbytes == 0)) names.push_back(kv.first);  // (no bytes to hold)
  if (names.empty()) {
    c.status = WSYNC_ERR_INVALID_STATE;
    c.reason = "receiver rank " + std::to_string(rx->rank) + " holds no registered tensor of version " +
               std::to_string(version);
    return c;
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    const Registered& r = rx->sh->registry.at(n);
    Item t;
    t.name = n;
    t.dtype = r.dtype;
    t.ndim = r.ndim;
    std::copy(r.shape, r.shape + WSYNC_MAX_NDIM, t.shape);
    t.nbytes = r.nbytes;
    t.has_sum = false;  // (the joiner checks against the sender's digests, never the source's word)
    c.items.push_back(std::move(t));
  }
  return c;
}

// The catalogue and the tensors, in order. What the transport may still read lives in
// rx->catchup_keep until the instance is destroyed (at the next catch-up or at destroy).
wsync_status_t serve(Link* rx, void* self, const Catalogue& c, int64_t deadline, uint64_t* bytes) {
  const std::vector<uint8_t> cat = encode(c);
  const uint64_t head[2] = {kMagic, cat.size()};
  std::vector<uint8_t>& keep = rx->catchup_keep;
  keep.assign(reinterpret_cast<const uint8_t*>(head), reinterpret_cast<const uint8_t*>(head) + sizeof head);
  keep.insert(keep.end(), cat.begin(), cat.end());
  uint64_t seq = 1;
  wsync_status_t st = send_range(rx, self, seq, keep.data(), sizeof head, WSYNC_DEVICE_CPU, 0);
  if (st == WSYNC_OK) st = wait_seq(rx, self, seq++, true, deadline);
  if (st == WSYNC_OK) st = send_range(rx, self, seq, keep.data() + sizeof head, cat.size(), WSYNC_DEVICE_CPU, 0);
  if (st == WSYNC_OK) st = wait_seq(rx, self, seq++, true, deadline);
  for (const Item& t : c.items) {
    const Registered& r = rx->sh->registry.at(t.name);
    for (uint64_t off = 0; off < t.nbytes && st == WSYNC_OK; off += kChunk) {
      const uint64_t len = std::min(kChunk, t.nbytes - off);
      st = send_range(rx, self, seq, static_cast<const uint8_t*>(r.data) + off, len, r.device_type, r.device_index);
      if (st == WSYNC_OK) st = wait_seq(rx, self, seq++, true, deadline);
      *bytes += len;
    }
  }
  return st;
}

// The source: send, log, and go on whatever happened (a failure is the joiner's to report).
wsync_status_t be_source(Link* rx, const CatchupBody& c) {
  if (rx->catchup_self != nullptr) tp(rx)->destroy(rx->catchup_self);  // the last catch-up's (its joiner is done)
  rx->catchup_self = nullptr;
  const int64_t start = now_ms(), deadline = deadline_after(budget(rx, c));
  int fd = -1;
  uint64_t bytes = 0;
  Catalogue cat;
  wsync_status_t st = open_world(rx, c.world, 0, 2, budget(rx, c), &rx->catchup_self, &fd);
  if (st == WSYNC_OK) {
    cat = source_catalogue(rx, c.version);  // (hashed once the joiner is there)
    st = serve(rx, rx->catchup_self, cat, deadline, &bytes);
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
               rx->rank, c.peer, static_cast<unsigned long long>(c.version), cat.items.size(),
               static_cast<unsigned long long>(bytes), static_cast<long long>(now_ms() - start));
  clear_error();
  return WSYNC_OK;
}

// Where the joiner puts item `t`: its registered buffer (staged: its staged block), or nullptr
// (not registered alike: received into `discard` and dropped).
wsync_status_t target_of(Link* rx, const Item& t, uint8_t** dst, bool* found) {
  *dst = nullptr;
  *found = false;
  auto it = rx->sh->registry.find(t.name);
  if (it == rx->sh->registry.end()) return WSYNC_OK;
  const Registered& r = it->second;
  if (r.slice || r.dtype != t.dtype || r.ndim != t.ndim || r.nbytes != t.nbytes ||
      !std::equal(r.shape, r.shape + r.ndim, t.shape)) {
    WSYNC_LOGW("receiver rank %u: catch-up: tensor '%s' is registered here with another dtype or shape than the "
               "source's; it keeps its bytes", rx->rank, t.name.c_str());
    return WSYNC_OK;
  }
  note_touched(rx, t.name);
  *found = true;
  if (!rx->sh->staged) {
    *dst = static_cast<uint8_t*>(r.data);
    return WSYNC_OK;
  }
  return staged_block(rx, t.name, t.nbytes, dst);
}

// What the joiner receives into, alive until its instance is destroyed.
struct JoinBuffers {
  uint64_t head[2] = {0, 0};
  std::vector<uint8_t> raw;
  MemBlock discard;
};

// The digest of each tensor of the version, as the sender sent it (CATCHUP): what the source's
// bytes must match. A tensor without one is not taken (no digest, no commit).
using SenderDigests = std::unordered_map<std::string, uint64_t>;

wsync_status_t take_item(Link* rx, void* self, const CatchupBody& c, const SenderDigests& digests,
                         const Item& t, uint64_t* seq, JoinBuffers* bufs, int64_t deadline, bool* placed) {
  uint8_t* dst = nullptr;
  bool found = false;
  const auto digest = digests.find(t.name);
  wsync_status_t st = digest == digests.end() ? WSYNC_OK : target_of(rx, t, &dst, &found);
  for (uint64_t off = 0; off < t.nbytes && st == WSYNC_OK; off += kChunk) {
    const uint64_t len = std::min(kChunk, t.nbytes - off);
    if (!found && bufs->discard.size() < len) {
      bufs->discard.reset();
      st = MemBlock::alloc(kChunk, rx->device_memory ? rx->device : -1, &bufs->discard);
    }
    if (st == WSYNC_OK)
      st = recv_range(rx, self, (*seq)++, found ? dst + off : bufs->discard.data(), len, deadline, c.world);
  }
  if (st != WSYNC_OK || !found) return st;
  *placed = true;
  // What came must be what the sender sent: the source is a member, trusted with nothing else.
  const Registered& reg = rx->sh->registry.at(t.name);
  const bool on_device = rx->sh->staged ? rx->device >= 0 : reg.device_type == WSYNC_DEVICE_CUDA;
  uint64_t sum = 0;
  if ((st = tensor_digest(dst, t.nbytes, on_device ? WSYNC_DEVICE_CUDA : WSYNC_DEVICE_CPU,
                          rx->sh->staged ? rx->device : reg.device_index, &sum)) != WSYNC_OK)
    return fail(st, "tensor '%s' from the catch-up source cannot be checked: %s", t.name.c_str(), last_error().c_str());
  if (sum != digest->second)
    return fail(WSYNC_ERR_PROTOCOL,
                "tensor '%s' from receiver rank %u (the catch-up source) is not version %llu as the sender sent it "
                "(XXH3 %016llx, the sender's %016llx): the source's copy changed after its commit (written to, or "
                "post-processed in place)",
                t.name.c_str(), c.peer, static_cast<unsigned long long>(c.version),
                static_cast<unsigned long long>(sum), static_cast<unsigned long long>(digest->second));
  if (rx->sh->staged) {
    ManifestEntry e;
    e.name = t.name;
    e.length = e.tensor_bytes = t.nbytes;
    return rx->sh->arrived.record(e);
  }
  return WSYNC_OK;
}

wsync_status_t take_all(Link* rx, void* self, const CatchupBody& c, JoinBuffers* bufs, int64_t deadline,
                        uint64_t* tensors) {
  wsync_status_t st = recv_range(rx, self, 1, bufs->head, sizeof bufs->head, deadline, c.world);
  if (st != WSYNC_OK) return st;
  if (bufs->head[0] != kMagic || bufs->head[1] > kMaxCatalogue)
    return fail(WSYNC_ERR_PROTOCOL, "the catch-up source sent no catalogue (a %llu-byte one, magic %llx)",
                static_cast<unsigned long long>(bufs->head[1]), static_cast<unsigned long long>(bufs->head[0]));
  bufs->raw.resize(bufs->head[1]);
  Catalogue cat;
  if ((st = recv_range(rx, self, 2, bufs->raw.data(), bufs->raw.size(), deadline, c.world)) != WSYNC_OK ||
      (st = decode(bufs->raw, &cat)) != WSYNC_OK)
    return st;
  if (cat.status != WSYNC_OK) {  // (nothing moved: it takes the next update, as when no member is free)
    if (rx->sh->registry.empty())  // (it takes views: nothing a source could have given it)
      WSYNC_LOGI("receiver rank %u: the catch-up source cannot serve version %llu (%s); this receiver registered "
                 "nothing and takes the next update", rx->rank, static_cast<unsigned long long>(c.version),
                 cat.reason.c_str());
    else
      WSYNC_LOGW("receiver rank %u: the catch-up source cannot serve version %llu: %s", rx->rank,
                 static_cast<unsigned long long>(c.version), cat.reason.c_str());
    return WSYNC_OK;
  }
  if (cat.version != c.version)
    return fail(WSYNC_ERR_PROTOCOL, "the source serves version %llu, the sender asked for %llu",
                static_cast<unsigned long long>(cat.version), static_cast<unsigned long long>(c.version));
  SenderDigests digests;
  for (size_t i = 0; i < c.names.size() && i < c.sums.size(); ++i) digests[c.names[i]] = c.sums[i];
  uint64_t seq = 3;
  for (const Item& t : cat.items) {
    bool placed = false;
    if ((st = take_item(rx, self, c, digests, t, &seq, bufs, deadline, &placed)) != WSYNC_OK) return st;
    *tensors += placed ? 1 : 0;
  }
  std::unordered_set<std::string> listed;
  for (const Item& t : cat.items) listed.insert(t.name);
  for (const auto& kv : rx->sh->registry)
    if (!kv.second.slice && listed.count(kv.first) == 0)
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
  rx->conn.pump();
  if (!rx->conn.closed()) send_status(rx, MsgType::kCatchupFailed, 0, code, why);
  drop_update(rx, why);
  rx->broken = why;  // (in place, its buffers may hold a mix)
  return fail(code, "%s", why.c_str());
}

// The joiner: take the version, then COMMIT it (or fail, and take no more buckets).
wsync_status_t be_joiner(Link* rx, const CatchupBody& c, wsync_receiver_event_t* ev) {
  if (c.peer == 0 || c.peer == rx->rank || c.peer >= rx->world_size || c.version == 0) {
    fail(WSYNC_ERR_PROTOCOL, "the sender's CATCHUP names source rank %u and version %llu", c.peer,
         static_cast<unsigned long long>(c.version));
    return catchup_failed(rx, c, WSYNC_ERR_PROTOCOL);
  }
  if (c.version <= rx->sh->committed) return WSYNC_OK;  // (it has that version already)
  const int64_t start = now_ms(), deadline = deadline_after(budget(rx, c));
  JoinBuffers bufs;  // (outlives the instance)
  void* self = nullptr;
  int fd = -1;
  uint64_t tensors = 0;
  wsync_status_t st = open_world(rx, c.world, 1, 2, budget(rx, c), &self, &fd);
  if (st == WSYNC_OK) st = take_all(rx, self, c, &bufs, deadline, &tensors);
  const std::string why = st == WSYNC_OK ? "" : last_error();
  if (self != nullptr) tp(rx)->destroy(self);  // (no write into the buffers after this returns)
  if (st != WSYNC_OK) {
    fail(st, "%s", why.c_str());
    return catchup_failed(rx, c, st);
  }
  // What it must hold to commit the version: every tensor it registered that the group committed
  // (one the trainer never sent keeps what the engine put there, here as on every member).
  uint64_t needed = 0, missing = 0;
  const std::unordered_set<std::string> group(c.names.begin(), c.names.end());
  for (const auto& kv : rx->sh->registry) {
    if (kv.second.slice || group.count(kv.first) == 0) continue;
    ++needed;
    if (rx->sh->touched_set.count(kv.first) == 0) ++missing;
  }
  if (needed == 0 || missing != 0) {
    // It does not hold the version wholly: no commit. Staged bytes are dropped; in place, the
    // buffers written read as mixed until the next commit. The next update brings its tensors.
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
    return WSYNC_OK;
  }
  WSYNC_LOGI("receiver rank %u: caught up to version %llu from receiver rank %u (%llu tensors) in %lld ms", rx->rank,
             static_cast<unsigned long long>(c.version), c.peer, static_cast<unsigned long long>(tensors),
             static_cast<long long>(now_ms() - start));
  rx->pending_commit = c.version;
  rx->catchup_commit = true;
  ev->kind = WSYNC_EVENT_COMMIT;
  ev->version = c.version;
  return WSYNC_OK;
}

}  // namespace

wsync_status_t catchup(Link* rx, const Frame& f, wsync_receiver_event_t* ev) {
  CatchupBody c;
  if (decode_catchup(f.body, &c) != WSYNC_OK) return refuse(rx, 0, last_status());
  if (rx->sh->links.size() > 1 || !rx->flight.empty() || rx->pending_commit != 0)
    return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender sent CATCHUP in the middle of an update"));
  if (c.role == CatchupBody::kSource) return be_source(rx, c);
  if (c.role == CatchupBody::kJoiner) return be_joiner(rx, c, ev);
  return refuse(rx, 0, fail(WSYNC_ERR_PROTOCOL, "the sender's CATCHUP has role %u", c.role));
}

}  // namespace wsync
