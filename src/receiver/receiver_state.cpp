// What the updates do to the registered buffers. In place, the touched list names the buffers an
// unfinished update wrote into; staged, the bytes of registered tensors wait in blocks of their own
// and reach the registered buffers only in apply_commit, after the sender was told.
#include <cstring>

#include "common/error.h"
#include "device/cuda_rt.h"
#include "receiver/receiver.h"

namespace wsync {
namespace {

// dst <- src, n bytes, both in the receiver's kind of memory.
wsync_status_t copy_into(Link* rx, void* dst, const void* src, uint64_t n, const std::string& name) {
  if (n == 0) return WSYNC_OK;
  if (!rx->device_memory) {
    std::memcpy(dst, src, n);
    return WSYNC_OK;
  }
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, rx->device);
  int err = on.status();
  // The legacy default stream: ordered after the engine's work on blocking streams, and the copy
  // is complete when the commit returns.
  if (err == kCudaSuccess) err = rt->MemcpyAsync(dst, src, n, kCudaMemcpyDefault, nullptr);
  if (err == kCudaSuccess) err = rt->StreamSynchronize(nullptr);
  if (err != kCudaSuccess) return cuda_fail(rt, err, "copying the staged bytes of tensor '" + name + "' into its buffer");
  return WSYNC_OK;
}

}  // namespace

wsync_status_t staged_block(Link* rx, const std::string& name, uint64_t bytes, uint8_t** out) {
  MemBlock& b = rx->sh->staged_blocks[name];
  if (b.size() != bytes) {  // first use, or registered again with another shape since
    b.reset();
    wsync_status_t st = MemBlock::alloc(bytes, rx->device, &b);
    if (st != WSYNC_OK) {
      rx->sh->staged_blocks.erase(name);
      return fail_msg(st, "cannot allocate " + std::to_string(bytes) + " bytes to stage tensor '" + name +
                              "' (receiver option receive_mode=staged): " + last_error());
    }
  }
  *out = b.data();
  return WSYNC_OK;
}

void note_touched(Link* rx, const std::string& name) {
  if (rx->sh->touched_set.insert(name).second) rx->sh->touched.push_back(name);
}

bool may_still_write(const Link* rx) {
  if (!rx->broken.empty()) return true;
  for (const Link* l : rx->sh->links)
    if (!l->broken.empty()) return true;
  return false;
}

void drop_staged(Link* rx) {
  // After a copy at commit failed, the touched list names the mixed buffers: keep it.
  if (!rx->sh->staged || rx->sh->apply_failed) return;
  if (may_still_write(rx)) {  // a transport gave up on a receive: it may still write there
    for (auto& kv : rx->sh->staged_blocks) {
      rx->sh->staged_retired_bytes += kv.second.size();
      rx->sh->graveyard.push_back(std::move(kv.second));
    }
    rx->sh->staged_blocks.clear();
  }
  rx->sh->touched.clear();
  rx->sh->touched_set.clear();
}

wsync_status_t check_staged_arrived(const Link* rx) {
  if (!rx->sh->staged) return WSYNC_OK;
  for (const std::string& name : rx->sh->touched)
    if (!rx->sh->arrived.complete(name))
      return fail(WSYNC_ERR_PROTOCOL, "tensor '%s' has staged bytes, but %s of it did not arrive in this update; its "
                  "buffer keeps the previous version", name.c_str(), rx->sh->arrived.missing(name).c_str());
  return WSYNC_OK;
}

wsync_status_t apply_commit(Link* rx) {
  rx->sh->catchup_world.clear();  // (every sender's word of a catch-up came before this update's bytes)
  for (const std::string& name : rx->sh->touched) {  // (their buffers hold the version once this returns OK)
    auto reg = rx->sh->registry.find(name);
    if (reg != rx->sh->registry.end()) reg->second.held = true;
  }
  if (rx->sh->staged) {
    for (const std::string& name : rx->sh->touched) {
      auto reg = rx->sh->registry.find(name);
      auto blk = rx->sh->staged_blocks.find(name);
      if (reg == rx->sh->registry.end() || blk == rx->sh->staged_blocks.end() || blk->second.size() != reg->second.nbytes) {
        rx->sh->apply_failed = true;
        return fail(WSYNC_ERR_INTERNAL, "the staged bytes of tensor '%s' have no registered buffer of their size",
                    name.c_str());
      }
      wsync_status_t st = copy_into(rx, reg->second.data, blk->second.data(), reg->second.nbytes, name);
      if (st != WSYNC_OK) {
        rx->sh->apply_failed = true;
        return st;
      }
    }
  }
  rx->sh->touched.clear();
  rx->sh->touched_set.clear();
  rx->sh->arrived.clear();
  rx->sh->claimed.clear();
  rx->sh->apply_failed = false;
  return WSYNC_OK;
}

void fill_state(const Link* rx, wsync_receiver_state_t* out) {
  out->receive_mode = rx->sh->staged ? WSYNC_RECEIVE_STAGED : WSYNC_RECEIVE_IN_PLACE;
  out->committed_version = rx->sh->committed;
  out->pending_version = rx->sh->links.size() > 1 ? rx->sh->commit_ready : rx->pending_commit;
  const bool mixed = rx->sh->staged ? rx->sh->apply_failed : !rx->sh->touched.empty();
  out->buffers = mixed ? WSYNC_BUFFERS_MIXED : WSYNC_BUFFERS_CLEAN;
  out->late_writes = !rx->sh->staged && rx->sh->late_writes && !rx->sh->touched.empty() ? 1 : 0;
  out->num_touched = rx->sh->touched.size();
  uint64_t staged = rx->sh->staged_retired_bytes;  // still held: freed at destroy
  for (const auto& kv : rx->sh->staged_blocks) staged += kv.second.size();
  out->staged_bytes = staged;
  out->num_senders = rx->num_senders > 1 ? rx->num_senders : 1;
  out->planned = rx->planned ? 1 : 0;
  out->rank = rx->rank;
  out->rank_assigned = rx->rank_assigned ? 1 : 0;
}

}  // namespace wsync
