// One update on the sender: wsync_group_send_batch plans tensors into buckets and moves them
// with a two-deep pipeline (bucket k+1 is packed while bucket k is on the wire), and
// wsync_group_finalize commits a version on every receiver.
//
// Per bucket, on the control channel of every receiver:
//   MANIFEST(seq) ->  <- READY(seq)      the receiver posted its receive into its buffers
//   transport send_post(seq)             bytes move on the data plane
//                  <- ACK(seq, status)   the bytes are in place (and verified if asked)
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <xxhash.h>

#include "common/error.h"
#include "common/tensors.h"
#include "group/group.h"
#include "group/group_device.h"
#include "group/group_engines.h"
#include "manifest/manifest.h"

using namespace wsync;

namespace {

constexpr int64_t kSliceMs = 20;          // how often waits look at abort and peer liveness
constexpr uint64_t kPackPiece = 8u << 20; // pack in pieces, progressing the transport between

void announce_abort(wsync_group_t* g, const std::string& why) {
  if (g->abort_announced) return;
  g->abort_announced = true;
  ByteWriter w;
  w.str(why);
  for (auto& p : g->peers)
    if (p->alive && p->conn.open()) {
      p->conn.set_abort_flag(nullptr);  // this one message must go out even after an abort
      p->conn.send(MsgType::kAbortUpdate, w.data(), 200);
      p->conn.set_abort_flag(&g->aborted);
    }
}

wsync_status_t check_usable(wsync_group_t* g) {
  if (g->aborted.load()) {
    announce_abort(g, "the sender aborted the group");
    return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted", g->group_name.c_str());
  }
  if (!g->broken.empty())
    return fail(WSYNC_ERR_INVALID_STATE, "group '%s' cannot update any more: %s; destroy it and create a new one",
                g->group_name.c_str(), g->broken.c_str());
  return WSYNC_OK;
}

// Record why the group broke, tell the receivers the update is void, keep the error detail.
wsync_status_t break_group(wsync_group_t* g, wsync_status_t st) {
  std::string why = last_error();
  if (g->broken.empty()) g->broken = why;
  // A bucket still on the wire may point into the caller's tensor memory, which is theirs again
  // once we return: cancel it with every receiver before that.
  if (g->inflight_seq != 0 && g->transport_self) {
    for (auto& p : g->peers)
      if (p->alive) g->transport.table->forget_peer(g->transport_self, p->rank);
    g->inflight_seq = 0;
  }
  // Packing queued on the copy stream may still read the caller's CUDA tensors: finish it, so
  // that "send_batch no longer reads the tensors once it returns" holds on failure too.
  if (g->copy_stream != nullptr && device_wait_copies(g) != WSYNC_OK)
    WSYNC_LOGW("group '%s': waiting for wsync's copy stream after a failure: %s", g->group_name.c_str(),
               last_error().c_str());
  announce_abort(g, why);
  return fail_msg(st, why);
}

wsync_status_t peer_lost(wsync_group_t* g, Peer* p, const char* during) {
  p->alive = false;
  if (g->transport_self) g->transport.table->forget_peer(g->transport_self, p->rank);
  return fail(WSYNC_ERR_PEER_FAILED, "%s failed during %s: it closed its connection (process died?)",
              p->conn.peer_name().c_str(), during);
}

// Wait for one `expect` frame about `seq` from every live receiver.
wsync_status_t wait_all(wsync_group_t* g, MsgType expect, uint64_t seq, int64_t timeout_ms, const std::string& what) {
  const int64_t deadline = deadline_after(timeout_ms);
  std::vector<Peer*> pending;
  for (auto& p : g->peers)
    if (p->alive) pending.push_back(p.get());
  while (!pending.empty()) {
    for (size_t i = 0; i < pending.size();) {
      Peer* p = pending[i];
      Frame f;
      wsync_status_t st = p->conn.recv(&f, 0);
      if (st == WSYNC_ERR_TIMEOUT) {
        ++i;
        continue;
      }
      if (st == WSYNC_ERR_PEER_FAILED) return peer_lost(g, p, what.c_str());
      if (st != WSYNC_OK) return st;
      ByteReader r(f.body);
      uint64_t got = 0;
      if (f.type == static_cast<uint16_t>(MsgType::kNack) || f.type == static_cast<uint16_t>(MsgType::kAck)) {
        int32_t code = 0;
        std::string why;
        if (!r.u64(&got) || !r.i32(&code) || !r.str(&why, 1 << 16))
          return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed %s", p->conn.peer_name().c_str(), msg_type_name(f.type));
        if (f.type == static_cast<uint16_t>(MsgType::kNack) || code != WSYNC_OK)
          return fail(wire_failure(code, WSYNC_ERR_PROTOCOL), "%s refused %s: %s", p->conn.peer_name().c_str(),
                      what.c_str(), why.c_str());
      } else if (!r.u64(&got)) {
        return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed %s", p->conn.peer_name().c_str(), msg_type_name(f.type));
      }
      if (f.type != static_cast<uint16_t>(expect) || got != seq)
        return fail(WSYNC_ERR_PROTOCOL, "%s sent %s(%llu) while the sender waited for %s(%llu) of %s",
                    p->conn.peer_name().c_str(), msg_type_name(f.type), static_cast<unsigned long long>(got),
                    msg_type_name(static_cast<uint16_t>(expect)), static_cast<unsigned long long>(seq), what.c_str());
      pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (pending.empty()) break;
    if (g->aborted.load()) return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted during %s", g->group_name.c_str(), what.c_str());
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      std::string who;
      for (Peer* p : pending) who += (who.empty() ? "" : ", ") + p->conn.peer_name();
      return fail(WSYNC_ERR_TIMEOUT, "%s did not answer %s of %s within %lld ms", who.c_str(),
                  msg_type_name(static_cast<uint16_t>(expect)), what.c_str(), static_cast<long long>(timeout_ms));
    }
    std::vector<pollfd> fds;
    for (Peer* p : pending) fds.push_back(pollfd{p->conn.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), poll_slice(left));
  }
  return WSYNC_OK;
}

// Look for receivers that died while the data plane is busy.
wsync_status_t check_peers(wsync_group_t* g, const std::string& what) {
  for (auto& p : g->peers) {
    if (!p->alive) continue;
    p->conn.pump();
    if (p->conn.closed() && !p->conn.has_frame()) return peer_lost(g, p.get(), what.c_str());
  }
  if (g->aborted.load()) return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted during %s", g->group_name.c_str(), what.c_str());
  return WSYNC_OK;
}

// Progress the transport once without blocking; OK when `seq` has completed.
wsync_status_t poll_send(wsync_group_t* g, uint64_t seq, bool* done) {
  clear_error();
  wsync_status_t st = g->transport.table->send_wait(g->transport_self, seq, 0);
  *done = st == WSYNC_OK;
  if (st == WSYNC_OK || st == WSYNC_ERR_TIMEOUT) return WSYNC_OK;
  return fail(st, "transport '%s': %s", g->transport.table->name, last_error().c_str());
}

wsync_status_t wait_send(wsync_group_t* g, uint64_t seq, int64_t timeout_ms, const std::string& what) {
  const int64_t deadline = deadline_after(timeout_ms);
  for (;;) {
    clear_error();
    wsync_status_t st = g->transport.table->send_wait(g->transport_self, seq, kSliceMs);
    if (st == WSYNC_OK) return WSYNC_OK;
    if (st != WSYNC_ERR_TIMEOUT) {
      std::string why = last_error();
      wsync_status_t pst = check_peers(g, what);  // a dead peer explains a failed send best
      if (pst != WSYNC_OK) return pst;
      return fail(st, "transport '%s' failed during %s: %s", g->transport.table->name, what.c_str(), why.c_str());
    }
    if ((st = check_peers(g, what)) != WSYNC_OK) return st;
    if (now_ms() >= deadline)
      return fail(WSYNC_ERR_TIMEOUT, "transport '%s' did not deliver %s within %lld ms", g->transport.table->name,
                  what.c_str(), static_cast<long long>(timeout_ms));
  }
}

struct Prepared {
  const uint8_t* data = nullptr;  // where the bucket's bytes are (staging or the caller's tensor)
  bool on_device = false;         // data is CUDA memory on g->device
  uint64_t checksum = 0;
};

bool is_cuda(const wsync_tensor_t& x) { return x.device_type == WSYNC_DEVICE_CUDA; }

wsync_status_t ensure_slot(wsync_group_t* g, StagingSlot* s, uint64_t bytes) {
  if (s->mem.size() >= bytes) return WSYNC_OK;
  if (g->device_staging) {
    if (g->staging_only)  // the planner splits for these transports; a bigger bucket is a bug
      return fail(WSYNC_ERR_INTERNAL, "a bucket of %llu bytes does not fit the %llu-byte staging buffer registered "
                  "with transport '%s'", static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(s->mem.size()), g->transport.table->name);
    return device_grow_slot(g, s, bytes);
  }
  g->stats.staging_bytes -= s->mem.size();
  s->mem.reset();
  uint64_t cap = std::max<uint64_t>(bytes, std::min<uint64_t>(g->rule.bucket_bytes, bytes * 2));
  cap = (cap + 4095) / 4096 * 4096;
  wsync_status_t st = MemBlock::alloc(cap, -1, &s->mem);
  if (st != WSYNC_OK) return fail_msg(st, "staging: " + last_error());
  g->stats.staging_bytes += cap;
  WSYNC_LOGD("group '%s': staging slot grown to %llu bytes", g->group_name.c_str(), static_cast<unsigned long long>(cap));
  return WSYNC_OK;
}

// Checksum over the entries' bytes in order (padding excluded), the way receivers compute it.
uint64_t entries_checksum(const PlanBucket& b, const std::vector<wsync_tensor_t>& t) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  for (const auto& e : b.entries)
    if (e.length) XXH3_64bits_update(s, static_cast<const uint8_t*>(t[e.tensor_index].data) + e.tensor_offset, e.length);
  uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

// Pack with the CPU: host tensors into host staging, in pieces, progressing `inflight` between.
wsync_status_t pack_host(wsync_group_t* g, const PlanBucket& b, const std::vector<wsync_tensor_t>& t, uint8_t* dst,
                         uint64_t inflight) {
  uint64_t cursor = 0;
  wsync_status_t st;
  for (const auto& e : b.entries) {
    if (e.bucket_offset > cursor) std::memset(dst + cursor, 0, e.bucket_offset - cursor);  // padding
    const uint8_t* src = static_cast<const uint8_t*>(t[e.tensor_index].data) + e.tensor_offset;
    for (uint64_t done = 0; done < e.length;) {
      uint64_t n = std::min(kPackPiece, e.length - done);
      std::memcpy(dst + e.bucket_offset + done, src + done, n);
      done += n;
      if (inflight) {
        bool fin = false;
        if ((st = poll_send(g, inflight, &fin)) != WSYNC_OK) return st;
      }
    }
    cursor = e.bucket_offset + e.length;
  }
  return WSYNC_OK;
}

// Pack on wsync's copy stream (some source or the staging is CUDA memory). Queued after the
// caller's stream (device_begin_batch); a host transport waits for the copies, a CUDA transport
// orders its reads after them through the buffer's stream.
wsync_status_t pack_device(wsync_group_t* g, const PlanBucket& b, const std::vector<wsync_tensor_t>& t, uint8_t* dst) {
  uint64_t cursor = 0;
  wsync_status_t st;
  for (const auto& e : b.entries) {
    if (e.bucket_offset > cursor) {
      if (g->device_staging)
        st = device_zero(g, dst + cursor, e.bucket_offset - cursor);
      else
        std::memset(dst + cursor, 0, e.bucket_offset - cursor), st = WSYNC_OK;
      if (st != WSYNC_OK) return st;
    }
    const uint8_t* src = static_cast<const uint8_t*>(t[e.tensor_index].data) + e.tensor_offset;
    if (e.length && (st = device_copy(g, dst + e.bucket_offset, src, e.length)) != WSYNC_OK)
      return fail_msg(st, "packing tensor '" + std::string(t[e.tensor_index].name) + "': " + last_error());
    cursor = e.bucket_offset + e.length;
  }
  return g->device_staging ? WSYNC_OK : device_wait_copies(g);
}

// Make bucket `b` ready to send: a single-entry bucket goes straight from the caller's tensor
// when the transport takes that memory (no copy); others are packed into staging.
wsync_status_t prepare(wsync_group_t* g, const PlanBucket& b, const std::vector<wsync_tensor_t>& t, StagingSlot* slot,
                       uint64_t inflight, Prepared* out) {
  if (g->verify_payload) out->checksum = entries_checksum(b, t);
  out->on_device = g->device_staging;
  if (b.bytes == 0) {
    out->data = nullptr;
    return WSYNC_OK;
  }
  if (b.entries.size() == 1 && b.entries[0].bucket_offset == 0 && !g->staging_only &&
      is_cuda(t[b.entries[0].tensor_index]) == g->device_staging) {
    const PlanEntry& e = b.entries[0];
    out->data = static_cast<const uint8_t*>(t[e.tensor_index].data) + e.tensor_offset;
    return WSYNC_OK;
  }
  wsync_status_t st = ensure_slot(g, slot, b.bytes);
  if (st != WSYNC_OK) return st;
  bool any_cuda = false;
  for (const auto& e : b.entries) any_cuda |= is_cuda(t[e.tensor_index]);
  st = g->device_staging || any_cuda ? pack_device(g, b, t, slot->mem.data())
                                     : pack_host(g, b, t, slot->mem.data(), inflight);
  if (st != WSYNC_OK) return st;
  out->data = slot->mem.data();
  return WSYNC_OK;
}

std::vector<uint8_t> manifest_body(wsync_group_t* g, uint64_t seq, const PlanBucket& b,
                                   const std::vector<wsync_tensor_t>& t, const Prepared& prep) {
  Manifest m;
  m.update_id = g->update_id;
  m.bucket_index = g->bucket_in_update;
  m.bucket_bytes = b.bytes;
  if (g->verify_payload) {
    m.flags |= kManifestFlagPayloadChecksum;
    m.payload_checksum = prep.checksum;
  }
  for (const auto& e : b.entries) {
    const wsync_tensor_t& x = t[e.tensor_index];
    ManifestEntry me;
    me.name = x.name;
    me.dtype = x.dtype;
    me.ndim = x.ndim;
    std::memset(me.shape, 0, sizeof me.shape);
    for (int d = 0; d < x.ndim && d < WSYNC_MAX_NDIM; ++d) me.shape[d] = x.shape[d];
    me.bucket_offset = e.bucket_offset;
    me.length = e.length;
    me.tensor_bytes = x.nbytes;
    me.tensor_offset = e.tensor_offset;
    m.entries.push_back(std::move(me));
  }
  ByteWriter w;
  w.u64(seq);
  w.bytes(encode_manifest(m));
  return std::move(w.data());
}

std::string bucket_what(wsync_group_t* g, uint64_t index_in_batch, uint64_t n) {
  return "bucket " + std::to_string(g->bucket_in_update) + " (" + std::to_string(index_in_batch + 1) + " of " +
         std::to_string(n) + " in this batch) of update " + std::to_string(g->update_id);
}

// CUDA tensors in the batch: check them, and order wsync's copy stream after the caller's.
wsync_status_t begin_device_batch(wsync_group_t* g, const std::vector<wsync_tensor_t>& t) {
  const wsync_tensor_t* first = nullptr;
  for (const auto& x : t)
    if (is_cuda(x) && x.nbytes > 0) {
      if (first == nullptr) first = &x;
      if (x.device_index != first->device_index)
        return fail(WSYNC_ERR_UNSUPPORTED, "tensors '%s' (CUDA device %d) and '%s' (CUDA device %d) are on different "
                    "devices; send each device's tensors through its own group", first->name, first->device_index,
                    x.name, x.device_index);
    }
  if (first == nullptr) return WSYNC_OK;
  if (g->verify_payload)
    return fail(WSYNC_ERR_UNSUPPORTED, "tensor '%s' is in CUDA memory; option verify_payload checksums on the host "
                "and works with host tensors only", first->name);
  return device_begin_batch(g, first->device_index);
}

wsync_status_t send_batch(wsync_group_t* g, const wsync_tensor_t* tensors, uint64_t num, int64_t timeout_ms) {
  wsync_status_t st = check_usable(g);
  if (st != WSYNC_OK) return st;
  std::vector<wsync_tensor_t> t;
  if ((st = copy_tensor_descs(tensors, num, "tensors", &t)) != WSYNC_OK) return st;
  std::vector<PlanTensor> pt(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    if (g->names_in_update.count(t[i].name))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' was already sent in this update (names must be unique until finalize)",
                  t[i].name);
    pt[i].name = t[i].name;
    pt[i].dtype = t[i].dtype;
    pt[i].ndim = t[i].ndim;
    std::memcpy(pt[i].shape, t[i].shape, sizeof pt[i].shape);
    pt[i].nbytes = t[i].nbytes;
  }
  std::vector<PlanBucket> plan;
  if ((st = plan_buckets(g->rule, pt, &plan)) != WSYNC_OK) return st;
  if ((st = begin_device_batch(g, t)) != WSYNC_OK) return st;
  if (g->http_engines && !g->update_open && !plan.empty()) {
    // The first batch of an update: pause generation (if asked) and open the update.
    if ((st = engines_step(g, WSYNC_STEP_PAUSE)) != WSYNC_OK || (st = engines_step(g, WSYNC_STEP_BEGIN_UPDATE)) != WSYNC_OK)
      return break_group(g, st);
    g->update_open = true;
  }

  const int64_t tmo = timeout_ms >= 0 ? timeout_ms : g->timeout_ms;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<uint32_t> ranks;
  for (auto& p : g->peers) ranks.push_back(p->rank);
  if (g->peers.empty())  // unmodified HTTP engines: every engine rank, no control channel
    for (uint32_t r = 1; r <= g->num_receivers; ++r) ranks.push_back(r);

  // The pipeline: prepared[k % slots] holds bucket k; bucket k+1 is packed while k moves.
  const size_t nslots = g->staging.size();
  std::vector<Prepared> prep(nslots);
  if (!plan.empty() && (st = prepare(g, plan[0], t, &g->staging[0], 0, &prep[0])) != WSYNC_OK) return break_group(g, st);
  for (size_t k = 0; k < plan.size(); ++k) {
    const PlanBucket& b = plan[k];
    const uint64_t seq = g->next_seq++;
    const std::string what = bucket_what(g, k, plan.size());
    Prepared& cur = prep[k % nslots];
    // HTTP engines: the update request goes out before the bytes; engines answer once they arrived.
    EngineCalls update_calls;
    if (g->http_engines && (st = update_calls.start(g, WSYNC_STEP_UPDATE, &b, &t, 0)) != WSYNC_OK)
      return break_group(g, st);
    std::vector<uint8_t> body = manifest_body(g, seq, b, t, cur);
    for (auto& p : g->peers)
      if ((st = p->conn.send(MsgType::kManifest, body, tmo)) != WSYNC_OK) {
        if (st == WSYNC_ERR_PEER_FAILED) st = peer_lost(g, p.get(), what.c_str());
        return break_group(g, st);
      }
    if ((st = wait_all(g, MsgType::kReady, seq, tmo, what)) != WSYNC_OK) return break_group(g, st);
    if (b.bytes > 0) {
      wsync_buffer_t buf = WSYNC_BUFFER_INIT;
      buf.data = cur.data;
      buf.len = b.bytes;
      if (cur.on_device) {
        buf.device_type = WSYNC_DEVICE_CUDA;
        buf.device_index = g->device;
        buf.stream = g->copy_stream;
      }
      clear_error();
      if ((st = g->transport.table->send_post(g->transport_self, seq, &buf, ranks.data(),
                                              static_cast<uint32_t>(ranks.size()))) != WSYNC_OK)
        return break_group(g, fail(st, "transport '%s' could not start %s: %s", g->transport.table->name, what.c_str(),
                                   last_error().c_str()));
      g->inflight_seq = seq;
    }
    if (k + 1 < plan.size() &&
        (st = prepare(g, plan[k + 1], t, &g->staging[(k + 1) % nslots], b.bytes > 0 ? seq : 0,
                      &prep[(k + 1) % nslots])) != WSYNC_OK)
      return break_group(g, st);
    if (b.bytes > 0 && (st = wait_send(g, seq, tmo, what)) != WSYNC_OK) return break_group(g, st);
    g->inflight_seq = 0;
    if ((st = wait_all(g, MsgType::kAck, seq, tmo, what)) != WSYNC_OK) return break_group(g, st);
    if (g->http_engines && (st = update_calls.finish()) != WSYNC_OK) return break_group(g, st);
    g->bucket_in_update++;
    g->stats.buckets++;
  }
  for (const auto& x : t) {
    g->names_in_update.insert(x.name);
    g->stats.bytes += x.nbytes;
  }
  g->stats.tensors += t.size();
  g->stats.batches++;
  g->stats.send_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return WSYNC_OK;
}

wsync_status_t finalize(wsync_group_t* g, uint64_t version, int64_t timeout_ms) {
  wsync_status_t st = check_usable(g);
  if (st != WSYNC_OK) return st;
  if (version <= g->stats.committed_version)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "version %llu is not greater than the committed version %llu",
                static_cast<unsigned long long>(version), static_cast<unsigned long long>(g->stats.committed_version));
  const int64_t tmo = timeout_ms >= 0 ? timeout_ms : g->timeout_ms;
  // HTTP engines: their end-of-update markers (cache flush, version, LMDeploy's finished) first.
  if (g->http_engines && (st = engines_step(g, WSYNC_STEP_FINALIZE, version)) != WSYNC_OK) return break_group(g, st);
  ByteWriter w;
  w.u64(version);
  w.u64(g->update_id);
  w.u64(g->bucket_in_update);
  const std::string what = "the commit of version " + std::to_string(version);
  for (auto& p : g->peers)
    if ((st = p->conn.send(MsgType::kEndUpdate, w.data(), tmo)) != WSYNC_OK) {
      if (st == WSYNC_ERR_PEER_FAILED) st = peer_lost(g, p.get(), what.c_str());
      return break_group(g, st);
    }
  if ((st = wait_all(g, MsgType::kCommitted, version, tmo, what)) != WSYNC_OK) return break_group(g, st);
  if (g->http_engines && g->update_open) {
    g->update_open = false;
    if ((st = engines_step(g, WSYNC_STEP_RESUME)) != WSYNC_OK) return break_group(g, st);
  }
  g->stats.committed_version = version;
  g->stats.updates++;
  g->update_id++;
  g->bucket_in_update = 0;
  g->names_in_update.clear();
  WSYNC_LOGI("group '%s': version %llu committed on %u receiver(s)", g->group_name.c_str(),
             static_cast<unsigned long long>(version), g->num_receivers);
  return WSYNC_OK;
}

}  // namespace

extern "C" {

WSYNC_API wsync_status_t wsync_group_send_batch(wsync_group_t* group, const wsync_tensor_t* tensors,
                                                uint64_t num_tensors, int64_t timeout_ms) {
  clear_error();
  if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
  wsync_status_t st;
  WSYNC_GUARD(st = send_batch(group, tensors, num_tensors, timeout_ms));
  return st;
}

WSYNC_API wsync_status_t wsync_group_finalize(wsync_group_t* group, uint64_t version, int64_t timeout_ms) {
  clear_error();
  if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
  wsync_status_t st;
  WSYNC_GUARD(st = finalize(group, version, timeout_ms));
  return st;
}

}  // extern "C"
