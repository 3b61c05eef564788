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
wsync_status_t copy_into(wsync_receiver_t* rx, void* dst, const void* src, uint64_t n, const std::string& name) {
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

wsync_status_t staged_block(wsync_receiver_t* rx, const std::string& name, uint64_t bytes, uint8_t** out) {
  MemBlock& b = rx->staged_blocks[name];
  if (b.size() != bytes) {  // first use, or registered again with another shape since
    b.reset();
    wsync_status_t st = MemBlock::alloc(bytes, rx->device, &b);
    if (st != WSYNC_OK) {
      rx->staged_blocks.erase(name);
      return fail_msg(st, "cannot allocate " + std::to_string(bytes) + " bytes to stage tensor '" + name +
                              "' (receiver option receive_mode=staged): " + last_error());
    }
  }
  *out = b.data();
  return WSYNC_OK;
}

void note_touched(wsync_receiver_t* rx, const std::string& name) {
  if (rx->touched_set.insert(name).second) rx->touched.push_back(name);
}

bool may_still_write(const wsync_receiver_t* rx) {
  if (!rx->broken.empty()) return true;
  for (const wsync_receiver_t* l : rx->sh->links)
    if (!l->broken.empty()) return true;
  return false;
}

void drop_staged(wsync_receiver_t* rx) {
  // After a copy at commit failed, the touched list names the mixed buffers: keep it.
  if (!rx->staged || rx->apply_failed) return;
  if (may_still_write(rx)) {  // a transport gave up on a receive: it may still write there
    for (auto& kv : rx->staged_blocks) {
      rx->staged_retired_bytes += kv.second.size();
      rx->graveyard.push_back(std::move(kv.second));
    }
    rx->staged_blocks.clear();
  }
  rx->touched.clear();
  rx->touched_set.clear();
}

wsync_status_t check_staged_arrived(const wsync_receiver_t* rx) {
  if (!rx->staged) return WSYNC_OK;
  for (const std::string& name : rx->touched)
    if (!rx->arrived.complete(name))
      return fail(WSYNC_ERR_PROTOCOL, "tensor '%s' has staged bytes, but %s of it did not arrive in this update; its "
                  "buffer keeps the previous version", name.c_str(), rx->arrived.missing(name).c_str());
  return WSYNC_OK;
}

wsync_status_t apply_commit(wsync_receiver_t* rx) {
  for (const std::string& name : rx->touched) {  // (their buffers hold the version once this returns OK)
    auto reg = rx->registry.find(name);
    if (reg != rx->registry.end()) reg->second.held = true;
  }
  if (rx->staged) {
    for (const std::string& name : rx->touched) {
      auto reg = rx->registry.find(name);
      auto blk = rx->staged_blocks.find(name);
      if (reg == rx->registry.end() || blk == rx->staged_blocks.end() || blk->second.size() != reg->second.nbytes) {
        rx->apply_failed = true;
        return fail(WSYNC_ERR_INTERNAL, "the staged bytes of tensor '%s' have no registered buffer of their size",
                    name.c_str());
      }
      wsync_status_t st = copy_into(rx, reg->second.data, blk->second.data(), reg->second.nbytes, name);
      if (st != WSYNC_OK) {
        rx->apply_failed = true;
        return st;
      }
    }
  }
  rx->touched.clear();
  rx->touched_set.clear();
  rx->arrived.clear();
  rx->claimed.clear();
  rx->apply_failed = false;
  return WSYNC_OK;
}

void fill_state(const wsync_receiver_t* rx, wsync_receiver_state_t* out) {
  out->receive_mode = rx->staged ? WSYNC_RECEIVE_STAGED : WSYNC_RECEIVE_IN_PLACE;
  out->committed_version = rx->committed;
  out->pending_version = rx->sh->links.size() > 1 ? rx->sh->commit_ready : rx->pending_commit;
  const bool mixed = rx->staged ? rx->apply_failed : !rx->touched.empty();
  out->buffers = mixed ? WSYNC_BUFFERS_MIXED : WSYNC_BUFFERS_CLEAN;
  out->late_writes = !rx->staged && rx->late_writes && !rx->touched.empty() ? 1 : 0;
  out->num_touched = rx->touched.size();
  uint64_t staged = rx->staged_retired_bytes;  // still held: freed at destroy
  for (const auto& kv : rx->staged_blocks) staged += kv.second.size();
  out->staged_bytes = staged;
  out->num_senders = rx->num_senders > 1 ? rx->num_senders : 1;
  out->planned = rx->planned ? 1 : 0;
  out->rank = rx->rank;
  out->rank_assigned = rx->rank_assigned ? 1 : 0;
}

}  // namespace wsync
