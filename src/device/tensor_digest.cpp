#include "device/tensor_digest.h"

#include <xxhash.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "common/error.h"
#include "device/cuda_rt.h"

namespace wsync {
namespace {

constexpr uint64_t kSlice = 4u << 20;

struct StateDeleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

}  // namespace

wsync_status_t tensor_digest_runs(const void* data, const std::vector<std::pair<uint64_t, uint64_t>>& runs,
                                  int32_t device_type, int32_t device_index, uint64_t* out) {
  std::unique_ptr<XXH3_state_t, StateDeleter> state(XXH3_createState());
  if (!state) return fail(WSYNC_ERR_OUT_OF_MEMORY, "no memory for a tensor digest");
  XXH3_64bits_reset(state.get());
  const uint8_t* src = static_cast<const uint8_t*>(data);
  if (device_type != WSYNC_DEVICE_CUDA) {
    for (const auto& r : runs) XXH3_64bits_update(state.get(), src + r.first, r.second);
    *out = XXH3_64bits_digest(state.get());
    return WSYNC_OK;
  }
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard guard(rt, device_index);
  if (guard.status() != kCudaSuccess) return cuda_fail(rt, guard.status(), "cudaSetDevice for a tensor digest");
  std::vector<uint8_t> host;
  for (const auto& r : runs)
    for (uint64_t off = 0; off < r.second; off += kSlice) {
      const uint64_t n = std::min(kSlice, r.second - off);
      host.resize(std::max<size_t>(host.size(), static_cast<size_t>(n)));
      int err = rt->MemcpyAsync(host.data(), src + r.first + off, n, kCudaMemcpyDefault, nullptr);
      if (err == kCudaSuccess) err = rt->StreamSynchronize(nullptr);
      if (err != kCudaSuccess) return cuda_fail(rt, err, "copying a tensor to the host for its digest");
      XXH3_64bits_update(state.get(), host.data(), n);
    }
  *out = XXH3_64bits_digest(state.get());
  return WSYNC_OK;
}

wsync_status_t tensor_digest(const void* data, uint64_t len, int32_t device_type, int32_t device_index, uint64_t* out) {
  if (device_type != WSYNC_DEVICE_CUDA) {
    *out = XXH3_64bits(len != 0 && data != nullptr ? data : "", len);
    return WSYNC_OK;
  }
  return tensor_digest_runs(data, {{0, len}}, device_type, device_index, out);
}

}  // namespace wsync
