// The CUDA runtime, loaded with dlopen on first use, so that libwsync builds and runs where
// there is no CUDA at all and needs no CUDA to link. Only the handful of calls the core needs for
// device staging (allocate, copy, order after the caller's stream) are resolved. Types are
// declared here without CUDA's headers: streams and events are opaque pointers, errors ints.
#pragma once

#include <string>

#include "wsync.h"

namespace wsync {

// The values of the few CUDA enums used; tests/unit/test_cuda_rt.cpp checks them against
// cuda_runtime_api.h where the toolkit is present.
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorNotReady = 600;
constexpr int kCudaMemcpyDefault = 4;     // cudaMemcpyDefault (unified addressing decides)
constexpr unsigned kCudaStreamNonBlocking = 0x01;
constexpr unsigned kCudaEventDisableTiming = 0x02;

struct CudaRt {
  std::string library;  // the file that provided the runtime
  int (*GetDeviceCount)(int*);
  int (*GetDevice)(int*);
  int (*SetDevice)(int);
  int (*Malloc)(void**, size_t);
  int (*Free)(void*);
  int (*MemcpyAsync)(void*, const void*, size_t, int, void*);
  int (*MemsetAsync)(void*, int, size_t, void*);
  int (*StreamCreateWithFlags)(void**, unsigned);
  int (*StreamDestroy)(void*);
  int (*StreamSynchronize)(void*);
  int (*StreamWaitEvent)(void*, void*, unsigned);
  int (*EventCreateWithFlags)(void**, unsigned);
  int (*EventRecord)(void*, void*);
  int (*EventSynchronize)(void*);
  int (*EventDestroy)(void*);
  const char* (*GetErrorString)(int);
};

// The runtime and at least one device, or nullptr after fail() saying what is missing: no runtime
// library or no driver or no device (WSYNC_ERR_NO_DEVICE), a runtime lacking a call
// (WSYNC_ERR_UNSUPPORTED). Loaded once per process; the search: a runtime already loaded in the
// process (torch's) wins; else WSYNC_CUDART (a path), the sonames of CUDA 13, 12 and 11, and the
// runtime of the toolkit wsync was built with.
const CudaRt* cuda_runtime();

// fail() with a CUDA error: "<what>: <cudaGetErrorString> (cuda error N)"; WSYNC_ERR_OUT_OF_MEMORY
// for cudaErrorMemoryAllocation, else WSYNC_ERR_IO.
wsync_status_t cuda_fail(const CudaRt* rt, int err, const std::string& what);

// Resolve the device a group or receiver works on: `requested` >= 0 is checked against the device
// count; -1 takes the calling thread's current device.
wsync_status_t cuda_pick_device(const CudaRt* rt, int requested, int* out);

// Makes `device` current for its lifetime and then restores the caller's device, so wsync never
// leaves the trainer's or engine's thread on another GPU. device < 0: does nothing.
class CudaDeviceGuard {
 public:
  CudaDeviceGuard(const CudaRt* rt, int device);
  ~CudaDeviceGuard();
  int status() const { return status_; }  // the cudaSetDevice result
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  const CudaRt* rt_;
  int previous_ = -1;
  int status_ = kCudaSuccess;
};

}  // namespace wsync
