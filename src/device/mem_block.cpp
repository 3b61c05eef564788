#include "device/mem_block.h"

#include <cstdlib>

#include "common/error.h"
#include "device/cuda_rt.h"

namespace wsync {

MemBlock& MemBlock::operator=(MemBlock&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = o.data_;
    size_ = o.size_;
    device_ = o.device_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.device_ = -1;
  }
  return *this;
}

wsync_status_t MemBlock::alloc(uint64_t bytes, int device, MemBlock* out) {
  out->reset();
  if (bytes == 0) return WSYNC_OK;
  if (device < 0) {
    uint64_t cap = (bytes + 4095) / 4096 * 4096;
    void* p = std::aligned_alloc(4096, cap);
    if (p == nullptr)
      return fail(WSYNC_ERR_OUT_OF_MEMORY, "cannot allocate %llu bytes of host memory", static_cast<unsigned long long>(cap));
    out->data_ = static_cast<uint8_t*>(p);
    out->size_ = bytes;
    out->device_ = -1;
    return WSYNC_OK;
  }
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr) return last_status();
  CudaDeviceGuard on(rt, device);
  int err = on.status();
  if (err != kCudaSuccess) return cuda_fail(rt, err, "cudaSetDevice(" + std::to_string(device) + ")");
  void* p = nullptr;
  if ((err = rt->Malloc(&p, bytes)) != kCudaSuccess)
    return cuda_fail(rt, err, "cudaMalloc of " + std::to_string(bytes) + " bytes on CUDA device " + std::to_string(device));
  out->data_ = static_cast<uint8_t*>(p);
  out->size_ = bytes;
  out->device_ = device;
  return WSYNC_OK;
}

void MemBlock::reset() {
  if (data_ != nullptr) {
    if (device_ < 0) {
      std::free(data_);
    } else if (const CudaRt* rt = cuda_runtime()) {
      CudaDeviceGuard on(rt, device_);
      rt->Free(data_);
    }
  }
  data_ = nullptr;
  size_ = 0;
  device_ = -1;
}

}  // namespace wsync
