#include "group/group_device.h"

#include "common/error.h"
#include "device/cuda_rt.h"

namespace wsync {
namespace {

wsync_status_t runtime(wsync_group_t* g, const CudaRt** out) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  if (g->device >= 0) {
    int err = rt->SetDevice(g->device);
    if (err != kCudaSuccess) return cuda_fail(rt, err, "cudaSetDevice(" + std::to_string(g->device) + ")");
  }
  *out = rt;
  return WSYNC_OK;
}

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
  if ((st = runtime(g, &rt)) != WSYNC_OK || (st = make_stream(g, rt)) != WSYNC_OK) return st;
  g->staging.resize(g->staging_buckets);
  for (auto& s : g->staging) {
    if ((st = MemBlock::alloc(g->rule.bucket_bytes, g->device, &s.mem)) != WSYNC_OK)
      return fail_msg(st, "CUDA staging for group '" + g->group_name + "': " + last_error() +
                              " (lower the bucket_bytes or staging_buckets option)");
    g->stats.device_staging_bytes += s.mem.size();
  }
  WSYNC_LOGI("group '%s': %u CUDA staging buffers of %llu bytes on device %d (%llu MiB in all)", g->group_name.c_str(),
             g->staging_buckets, static_cast<unsigned long long>(g->rule.bucket_bytes), g->device,
             static_cast<unsigned long long>(g->stats.device_staging_bytes >> 20));
  return WSYNC_OK;
}

wsync_status_t device_begin_batch(wsync_group_t* g, int device) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr)
    return fail_msg(last_status(), "the batch has CUDA tensors, but " + last_error());
  if (g->device < 0) g->device = device;  // a host transport: the first CUDA tensor's device
  if (device != g->device)
    return fail(WSYNC_ERR_UNSUPPORTED, "a tensor is on CUDA device %d but group '%s' works on device %d (group option "
                "'device'); send each device's tensors through its own group", device, g->group_name.c_str(), g->device);
  wsync_status_t st;
  if ((st = runtime(g, &rt)) != WSYNC_OK || (st = make_stream(g, rt)) != WSYNC_OK) return st;
  int err = rt->EventRecord(g->caller_event, g->caller_stream);
  if (err != kCudaSuccess) return cuda_fail(rt, err, "cudaEventRecord on the caller's stream (wsync_group_set_cuda_stream)");
  if ((err = rt->StreamWaitEvent(g->copy_stream, g->caller_event, 0)) != kCudaSuccess)
    return cuda_fail(rt, err, "cudaStreamWaitEvent");
  return WSYNC_OK;
}

wsync_status_t device_copy(wsync_group_t* g, void* dst, const void* src, uint64_t n) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  int err = rt->MemcpyAsync(dst, src, n, kCudaMemcpyDefault, g->copy_stream);
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaMemcpyAsync of " + std::to_string(n) + " bytes");
}

wsync_status_t device_zero(wsync_group_t* g, void* dst, uint64_t n) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  int err = rt->MemsetAsync(dst, 0, n, g->copy_stream);
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaMemsetAsync");
}

wsync_status_t device_wait_copies(wsync_group_t* g) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  int err = rt->StreamSynchronize(g->copy_stream);
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaStreamSynchronize of wsync's copy stream");
}

wsync_status_t device_grow_slot(wsync_group_t* g, StagingSlot* slot, uint64_t bytes) {
  // The old slot may still be read by the copy stream's queued work: drain it first.
  wsync_status_t st = device_wait_copies(g);
  if (st != WSYNC_OK) return st;
  g->stats.device_staging_bytes -= slot->mem.size();
  slot->mem.reset();
  if ((st = MemBlock::alloc(bytes, g->device, &slot->mem)) != WSYNC_OK) return st;
  g->stats.device_staging_bytes += slot->mem.size();
  WSYNC_LOGI("group '%s': a CUDA staging buffer grew to %llu bytes for a bucket larger than bucket_bytes",
             g->group_name.c_str(), static_cast<unsigned long long>(bytes));
  return WSYNC_OK;
}

void device_teardown(wsync_group_t* g) {
  if (g->copy_stream == nullptr && g->caller_event == nullptr) return;
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return;
  if (g->device >= 0) rt->SetDevice(g->device);
  if (g->copy_stream) {
    rt->StreamSynchronize(g->copy_stream);
    rt->StreamDestroy(g->copy_stream);
  }
  if (g->caller_event) rt->EventDestroy(g->caller_event);
  g->copy_stream = nullptr;
  g->caller_event = nullptr;
}

}  // namespace wsync
