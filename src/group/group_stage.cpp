// Making a bucket's bytes ready to send. A bucket with a single entry goes straight from the
// caller's tensor when the transport takes that memory (no copy; its checksum is then taken while
// the bytes move); others are packed into a staging slot and hashed there: with the CPU for host
// tensors into host staging (in 8 MiB pieces, progressing the buckets already on the wire between
// pieces), or on wsync's copy stream when a tensor or the staging is CUDA memory.
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "group/group_bucket.h"
#include "group/group_device.h"
#include "group/group_internal.h"

namespace wsync {
namespace {

constexpr uint64_t kPackPiece = 8u << 20;

bool is_cuda(const wsync_tensor_t& x) { return x.device_type == WSYNC_DEVICE_CUDA; }

wsync_status_t grow_host_slot(wsync_group_t* g, StagingSlot* s, uint64_t bytes) {
  g->staging.host_bytes -= s->mem.size();
  s->mem.reset();
  uint64_t cap = std::max<uint64_t>(bytes, std::min<uint64_t>(g->shape.rule.bucket_bytes, bytes * 2));
  cap = (cap + 4095) / 4096 * 4096;
  wsync_status_t st = MemBlock::alloc(cap, -1, &s->mem);
  if (st != WSYNC_OK) return fail_msg(st, "staging: " + last_error());
  g->staging.host_bytes += cap;
  WSYNC_LOGD("group '%s': staging slot grown to %llu bytes", g->cfg.group_name.c_str(), static_cast<unsigned long long>(cap));
  return WSYNC_OK;
}

wsync_status_t ensure_slot(wsync_group_t* g, StagingSlot* s, uint64_t bytes) {
  if (s->mem.size() >= bytes) return WSYNC_OK;
  if (!g->shape.device_staging) return grow_host_slot(g, s, bytes);
  if (g->shape.staging_only)  // the planner splits for these transports; a bigger bucket is a bug
    return fail(WSYNC_ERR_INTERNAL, "a bucket of %llu bytes does not fit the %llu-byte staging buffer registered "
                "with transport '%s'", static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(s->mem.size()), g->plugins.transport.table->name);
  return device_grow_slot(g, s, bytes);
}

// Checksum over the entries' bytes in order (padding excluded), the way receivers compute it: over
// the bucket as it leaves (host staging, or the one host tensor sent in place), so it also covers
// CUDA tensors copied to host staging and catches a tensor changed while it was packed.
uint64_t bucket_checksum(const PlanBucket& b, const uint8_t* data) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  for (const auto& e : b.entries)
    if (e.length) XXH3_64bits_update(s, data + e.bucket_offset, e.length);
  uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

// Host tensors into host staging, in pieces, progressing the buckets on the wire between them.
wsync_status_t pack_host(const PlanBucket& b, const std::vector<wsync_tensor_t>& t, uint8_t* dst,
                         const std::function<wsync_status_t()>& progress) {
  uint64_t cursor = 0;
  for (const auto& e : b.entries) {
    if (e.bucket_offset > cursor) std::memset(dst + cursor, 0, e.bucket_offset - cursor);  // padding
    const uint8_t* src = static_cast<const uint8_t*>(t[e.tensor_index].data) + e.tensor_offset;
    for (uint64_t done = 0; done < e.length;) {
      const uint64_t n = std::min(kPackPiece, e.length - done);
      std::memcpy(dst + e.bucket_offset + done, src + done, n);
      done += n;
      wsync_status_t st = progress();
      if (st != WSYNC_OK) return st;
    }
    cursor = e.bucket_offset + e.length;
  }
  return WSYNC_OK;
}

// On wsync's copy stream (some source or the staging is CUDA memory), after the caller's stream.
// A host transport waits for the copies; a CUDA transport orders its reads after them through the
// buffer's stream.
wsync_status_t pack_device(wsync_group_t* g, const PlanBucket& b, const std::vector<wsync_tensor_t>& t, uint8_t* dst) {
  uint64_t cursor = 0;
  wsync_status_t st = WSYNC_OK;
  for (const auto& e : b.entries) {
    if (e.bucket_offset > cursor) {
      if (g->shape.device_staging)
        st = device_zero(g, dst + cursor, e.bucket_offset - cursor);
      else
        std::memset(dst + cursor, 0, e.bucket_offset - cursor);
      if (st != WSYNC_OK) return st;
    }
    const uint8_t* src = static_cast<const uint8_t*>(t[e.tensor_index].data) + e.tensor_offset;
    if (e.length && (st = device_copy(g, dst + e.bucket_offset, src, e.length)) != WSYNC_OK)
      return fail_msg(st, "packing tensor '" + std::string(t[e.tensor_index].name) + "': " + last_error());
    cursor = e.bucket_offset + e.length;
  }
  return g->shape.device_staging ? WSYNC_OK : device_wait_copies(g);
}

}  // namespace

void staging_open_host(wsync_group_t* g) { g->staging.slots.resize(g->shape.staging_buckets); }

wsync_status_t staging_open_device(wsync_group_t* g, size_t count, uint64_t bytes, int device, uint64_t* held) {
  g->staging.slots.resize(count);
  for (auto& s : g->staging.slots) {
    wsync_status_t st = MemBlock::alloc(bytes, device, &s.mem);
    if (st != WSYNC_OK) return st;
    *held += s.mem.size();
  }
  return WSYNC_OK;
}

void staging_close(wsync_group_t* g) { g->staging.slots.clear(); }

size_t staging_next_slot(wsync_group_t* g) {
  return static_cast<size_t>(g->staging.buckets_started++ % g->staging.slots.size());
}

wsync_status_t bucket_prepare(wsync_group_t* g, InflightBucket* b, const std::function<wsync_status_t()>& progress) {
  Batch& batch = *b->batch;
  const PlanBucket& pb = batch.plan[b->index];
  const std::vector<wsync_tensor_t>& t = batch.tensors;
  wsync_status_t st;
  if (batch.cuda_event != nullptr && !batch.cuda_ordered) {  // the copy stream waits for the caller's work
    if ((st = device_order_after(g, batch.cuda_event)) != WSYNC_OK) return st;
    batch.cuda_ordered = true;
  }
  b->on_device = g->shape.device_staging;
  if (pb.bytes == 0) {
    if (g->shape.verify_payload) b->checksum = bucket_checksum(pb, nullptr);
    bucket_release(g, b);
    return WSYNC_OK;
  }
  if (pb.entries.size() == 1 && pb.entries[0].bucket_offset == 0 && !g->shape.staging_only &&
      is_cuda(t[pb.entries[0].tensor_index]) == g->shape.device_staging) {
    const PlanEntry& e = pb.entries[0];
    b->data = static_cast<const uint8_t*>(t[e.tensor_index].data) + e.tensor_offset;
    b->from_caller = true;  // (released once its pieces are sent: group_bucket.cpp)
    b->sum_follows = g->shape.verify_payload;  // hashed while the bytes move (group_bucket.cpp, send_sum)
    return WSYNC_OK;
  }
  StagingSlot* slot = &g->staging.slots[b->slot];
  if ((st = ensure_slot(g, slot, pb.bytes)) != WSYNC_OK) return st;
  const bool any_cuda = std::any_of(pb.entries.begin(), pb.entries.end(),
                                    [&](const PlanEntry& e) { return is_cuda(t[e.tensor_index]); });
  st = g->shape.device_staging || any_cuda ? pack_device(g, pb, t, slot->mem.data()) : pack_host(pb, t, slot->mem.data(), progress);
  if (st != WSYNC_OK) return st;
  b->data = slot->mem.data();
  if (g->shape.verify_payload) b->checksum = bucket_checksum(pb, b->data);
  if (!g->shape.device_staging) bucket_release(g, b);  // (host staging: the copy is done)
  return WSYNC_OK;
}

}  // namespace wsync
