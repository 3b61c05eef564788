#include "group/group_device.h"

#include <algorithm>

#include "common/error.h"
#include "device/cuda_rt.h"
#include "group/group_bucket.h"

namespace wsync {
namespace {

bool is_cuda(const wsync_tensor_t& x) { return x.device_type == WSYNC_DEVICE_CUDA && x.nbytes > 0; }

wsync_status_t make_stream(wsync_group_t* g, const CudaRt* rt) {
  if (g->dev.copy_stream.load() != nullptr) return WSYNC_OK;
  void* s = nullptr;
  int err = rt->StreamCreateWithFlags(&s, kCudaStreamNonBlocking);
  if (err != kCudaSuccess) return cuda_fail(rt, err, "cudaStreamCreateWithFlags");
  g->dev.copy_stream.store(s);
  return WSYNC_OK;
}

const CudaRt* runtime_for(const char* why) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) fail_msg(last_status(), std::string(why) + ", but " + last_error());
  return rt;
}

}  // namespace

wsync_status_t device_init_staging(wsync_group_t* g) {
  const CudaRt* rt = runtime_for(("transport '" + std::string(g->plugins.transport.table->name) + "' moves CUDA memory").c_str());
  if (rt == nullptr) return last_status();
  wsync_status_t st = cuda_pick_device(rt, g->cfg.requested_device, &g->dev.device);
  if (st != WSYNC_OK) return st;
  CudaDeviceGuard on(rt, g->dev.device);
  if (on.status() != kCudaSuccess) return cuda_fail(rt, on.status(), "cudaSetDevice(" + std::to_string(g->dev.device) + ")");
  if ((st = make_stream(g, rt)) != WSYNC_OK) return st;
  // The pipeline keeps one bucket on the wire and packs the next: more device slots would only
  // hold memory, so staging_buckets above 2 does not add device staging.
  uint64_t held = 0;
  st = staging_open_device(g, 2, g->shape.rule.bucket_bytes, g->dev.device, &held);
  g->dev.staging_bytes += held;
  if (st != WSYNC_OK)
    return fail_msg(st, "CUDA staging for group '" + g->cfg.group_name + "': " + last_error() +
                            " (lower the bucket_bytes or staging_buckets option)");
  WSYNC_LOGI("group '%s': %u CUDA staging buffers of %llu bytes on device %d (%llu MiB in all)", g->cfg.group_name.c_str(),
             static_cast<unsigned>(g->staging.slots.size()), static_cast<unsigned long long>(g->shape.rule.bucket_bytes), g->dev.device,
             static_cast<unsigned long long>(g->dev.staging_bytes.load() >> 20));
  return WSYNC_OK;
}

wsync_status_t device_check_batch(wsync_group_t* g, const std::vector<wsync_tensor_t>& t) {
  auto first = std::find_if(t.begin(), t.end(), is_cuda);
  if (first == t.end()) return WSYNC_OK;
  for (const auto& x : t)
    if (is_cuda(x) && x.device_index != first->device_index)
      return fail(WSYNC_ERR_UNSUPPORTED, "tensors '%s' (CUDA device %d) and '%s' (CUDA device %d) are on different "
                  "devices; send each device's tensors through its own group", first->name, first->device_index,
                  x.name, x.device_index);
  // A host transport works on the group option 'device', else on the first CUDA batch's device.
  const bool from_option = g->shape.device_staging || g->cfg.requested_device >= 0;
  if (g->dev.device < 0) g->dev.device = g->cfg.requested_device >= 0 ? g->cfg.requested_device : first->device_index;
  if (first->device_index != g->dev.device)
    return fail(WSYNC_ERR_UNSUPPORTED, "a tensor is on CUDA device %d but group '%s' works on device %d (%s); send "
                "each device's tensors through its own group", first->device_index, g->cfg.group_name.c_str(), g->dev.device,
                from_option ? "its option 'device' or the current device at init" : "the device of its first CUDA batch");
  return runtime_for("the batch has CUDA tensors") != nullptr ? WSYNC_OK : last_status();
}

wsync_status_t device_record_caller(wsync_group_t* g, const std::vector<wsync_tensor_t>& t, void** event) {
  *event = nullptr;
  if (std::none_of(t.begin(), t.end(), is_cuda)) return WSYNC_OK;
  const CudaRt* rt = runtime_for("the batch has CUDA tensors");
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, g->dev.device);
  if (on.status() != kCudaSuccess) return cuda_fail(rt, on.status(), "cudaSetDevice(" + std::to_string(g->dev.device) + ")");
  wsync_status_t st = make_stream(g, rt);
  if (st != WSYNC_OK) return st;
  void* ev = nullptr;
  {
    std::lock_guard<std::mutex> lk(g->dev.event_mu);
    if (!g->dev.free_events.empty()) {
      ev = g->dev.free_events.back();
      g->dev.free_events.pop_back();
    }
  }
  int err = ev != nullptr ? kCudaSuccess : rt->EventCreateWithFlags(&ev, kCudaEventDisableTiming);
  if (err != kCudaSuccess) return cuda_fail(rt, err, "cudaEventCreateWithFlags");
  if ((err = rt->EventRecord(ev, g->caller.stream)) != kCudaSuccess) {
    std::lock_guard<std::mutex> lk(g->dev.event_mu);
    g->dev.free_events.push_back(ev);
    return cuda_fail(rt, err, "cudaEventRecord on the caller's stream (wsync_group_set_cuda_stream; the stream must "
                     "belong to CUDA device " + std::to_string(g->dev.device) + ")");
  }
  *event = ev;
  return WSYNC_OK;
}

wsync_status_t device_order_after(wsync_group_t* g, void* event) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, g->dev.device);
  int err = rt->StreamWaitEvent(g->dev.copy_stream.load(), event, 0);
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaStreamWaitEvent");
}

wsync_status_t device_copy(wsync_group_t* g, void* dst, const void* src, uint64_t n) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, g->dev.device);
  int err = rt->MemcpyAsync(dst, src, n, kCudaMemcpyDefault, g->dev.copy_stream.load());
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaMemcpyAsync of " + std::to_string(n) + " bytes");
}

wsync_status_t device_zero(wsync_group_t* g, void* dst, uint64_t n) {
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, g->dev.device);
  int err = rt->MemsetAsync(dst, 0, n, g->dev.copy_stream.load());
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaMemsetAsync");
}

wsync_status_t device_wait_copies(wsync_group_t* g) {
  void* stream = g->dev.copy_stream.load();
  if (stream == nullptr) return WSYNC_OK;
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, g->dev.device);
  int err = rt->StreamSynchronize(stream);
  return err == kCudaSuccess ? WSYNC_OK : cuda_fail(rt, err, "cudaStreamSynchronize of wsync's copy stream");
}

wsync_status_t device_grow_slot(wsync_group_t* g, StagingSlot* slot, uint64_t bytes) {
  // The old slot may still be read by the copy stream's queued work: drain it first.
  wsync_status_t st = device_wait_copies(g);
  if (st != WSYNC_OK) return st;
  g->dev.staging_bytes -= slot->mem.size();
  // With headroom: a layout that does not split (one dtype per bucket, exceed-then-flush) makes
  // buckets a little over bucket_bytes again and again; each grow frees device memory, which waits
  // for the device.
  const uint64_t grown = std::max<uint64_t>(bytes, slot->mem.size() + slot->mem.size() / 4);
  slot->mem.reset();
  if ((st = MemBlock::alloc(grown, g->dev.device, &slot->mem)) != WSYNC_OK) return st;
  g->dev.staging_bytes += slot->mem.size();
  WSYNC_LOGW("group '%s': a CUDA staging buffer grew to %llu bytes for a %llu-byte bucket (larger than bucket_bytes: "
             "a tensor bigger than a bucket, or a layout that does not split)", g->cfg.group_name.c_str(),
             static_cast<unsigned long long>(grown), static_cast<unsigned long long>(bytes));
  return WSYNC_OK;
}

void device_recycle_event(wsync_group_t* g, void* event) {
  if (event == nullptr) return;
  std::lock_guard<std::mutex> lk(g->dev.event_mu);
  g->dev.free_events.push_back(event);
}

void device_teardown(wsync_group_t* g) {
  void* stream = g->dev.copy_stream.load();
  if (stream == nullptr && g->dev.free_events.empty()) return;
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return;
  CudaDeviceGuard on(rt, g->dev.device);
  if (stream != nullptr) {
    rt->StreamSynchronize(stream);
    rt->StreamDestroy(stream);
  }
  for (void* ev : g->dev.free_events) rt->EventDestroy(ev);
  g->dev.free_events.clear();
  g->dev.copy_stream.store(nullptr);
}

}  // namespace wsync
