#include "group/group_device.h"

#include <algorithm>

#include "common/error.h"
#include "device/cuda_rt.h"

namespace wsync {
namespace {

wsync_status_t make_stream(wsync_group_t* g, const CudaRt* rt) {
  if (g->copy_stream != nullptr) return WSYNC_OK;
  int err = rt->StreamCreateWithFlags(&g->copy_stream, kCudaStreamNonBlocking);
  if (err != kCudaSuccess) return cuda_fail(rt, err, "cudaStreamCreateWithFlags");
  if ((err = rt->EventCreateWithFlags(&g->caller_event, kCudaEventDisableTiming)) != kCudaSuccess)
    return cuda_fail(rt, err, "cudaEventCreateWithFlags");
  return WSYNC_OK;
}

}  // namespace

wsync_status_t device_init_staging(wsync_group_t* g) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr)
    return fail_msg(last_status(), "transport '" + std::string(g->transport.table->name) + "' moves CUDA memory, but " +
                                       last_error());
  wsync_status_t st = cuda_pick_device(rt, g->requested_device, &g->device);
  if (st != WSYNC_OK) return st;
  CudaDeviceGuard on(rt, g->device);
  if (on.status() != kCudaSuccess) return cuda_fail(rt, on.status(), "cudaSetDevice(" + std::to_string(g->device) + ")");
  if ((st = make_stream(g, rt)) != WSYNC_OK) return st;
  // The pipeline keeps one bucket on the wire and packs the next: more device slots would only
  // hold memory, so staging_buckets above 2 does not add device staging.
  g->staging.resize(2);
  for (auto& s : g->staging) {
    if ((st = MemBlock::alloc(g->rule.bucket_bytes, g->device, &s.mem)) != WSYNC_OK)
      return fail_msg(st, "CUDA staging for group '" + g->group_name + "': " + last_error() +
                              " (lower the bucket_bytes or staging_buckets option)");
    g->stats.device_staging_bytes += s.mem.size();
  }
  WSYNC_LOGI("group '%s': %u CUDA staging buffers of %llu bytes on device %d (%llu MiB in all)", g->group_name.c_str(),
             static_cast<unsigned>(g->staging.size()), static_cast<unsigned long long>(g->rule.bucket_bytes), g->device,
             static_cast<unsigned long long>(g->stats.device_staging_bytes >> 20));
  return WSYNC_OK;
}

wsync_status_t device_begin_batch(wsync_group_t* g, int device) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr)
    return fail_msg(last_status(), "the batch has CUDA tensors, but " + last_error());
  // A host transport works on the group option 'device', else on the first CUDA tensor's device.
  const bool from_option = g->device_staging || g->requested_device >= 0;
  if (g->device < 0) g->device = g->requested_device >= 0 ? g->requested_device : device;
  if (device != g->device)
    return fail(WSYNC_ERR_UNSUPPORTED, "a tensor is on CUDA device %d but group '%s' works on device %d (%s); send "
                "each device's tensors through its own group", device, g->group_name.c_str(), g->device,
                from_option ? "its option 'device' or the current device at init" : "the device of its first CUDA batch");
  CudaDeviceGuard on(rt, g->device);
  if (on.status() != kCudaSuccess) return cuda_fail(rt, on.status(), "cudaSetDevice(" + std::to_string(g->device) + ")");
  wsync_status_t st;
  if ((st = make_stream(g, rt)) != WSYNC_OK) return st;
  int err = rt->EventRecord(g->caller_event, g->caller_stream);
  if (err != kCudaSuccess)
    return cuda_fail(rt, err, "cudaEventRecord on the caller's stream (wsync_group_set_cuda_stream; the stream must "
                     "belong to CUDA device " + std::to_string(g->device) + ")");
  if ((err = rt->StreamWaitEvent(g->copy_stream, g->caller_event, 0)) != kCudaSuccess)
    return cuda_fail(rt, err, "cudaStreamWaitEvent");
  return WSYNC_OK;
}

wsync_status_t device_copy(wsync_group_t* g, void* dst, const void* src, uint64_t n) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, g->device);
  int err = rt->MemcpyAsync(dst, src, n, kCudaMemcpyDefault, g->copy_stream);
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaMemcpyAsync of " + std::to_string(n) + " bytes");
}

wsync_status_t device_zero(wsync_group_t* g, void* dst, uint64_t n) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, g->device);
  int err = rt->MemsetAsync(dst, 0, n, g->copy_stream);
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaMemsetAsync");
}

wsync_status_t device_wait_copies(wsync_group_t* g) {
  if (g->copy_stream == nullptr) return WSYNC_OK;
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, g->device);
  int err = rt->StreamSynchronize(g->copy_stream);
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaStreamSynchronize of wsync's copy stream");
}

wsync_status_t device_grow_slot(wsync_group_t* g, StagingSlot* slot, uint64_t bytes) {
  // The old slot may still be read by the copy stream's queued work: drain it first.
  wsync_status_t st = device_wait_copies(g);
  if (st != WSYNC_OK) return st;
  g->stats.device_staging_bytes -= slot->mem.size();
  // With headroom: a layout that does not split (one dtype per bucket, exceed-then-flush) makes
  // buckets a little over bucket_bytes again and again; each grow frees device memory, which waits
  // for the device.
  const uint64_t grown = std::max<uint64_t>(bytes, slot->mem.size() + slot->mem.size() / 4);
  slot->mem.reset();
  if ((st = MemBlock::alloc(grown, g->device, &slot->mem)) != WSYNC_OK) return st;
  g->stats.device_staging_bytes += slot->mem.size();
  WSYNC_LOGW("group '%s': a CUDA staging buffer grew to %llu bytes for a %llu-byte bucket (larger than bucket_bytes: "
             "a tensor bigger than a bucket, or a layout that does not split)", g->group_name.c_str(),
             static_cast<unsigned long long>(grown), static_cast<unsigned long long>(bytes));
  return WSYNC_OK;
}

void device_teardown(wsync_group_t* g) {
  if (g->copy_stream == nullptr && g->caller_event == nullptr) return;
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return;
  CudaDeviceGuard on(rt, g->device);
  if (g->copy_stream) {
    rt->StreamSynchronize(g->copy_stream);
    rt->StreamDestroy(g->copy_stream);
  }
  if (g->caller_event) rt->EventDestroy(g->caller_event);
  g->copy_stream = nullptr;
  g->caller_event = nullptr;
}

}  // namespace wsync
