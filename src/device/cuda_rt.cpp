#include "device/cuda_rt.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "common/error.h"

#ifndef WSYNC_CUDART_SONAME
#define WSYNC_CUDART_SONAME ""
#endif

namespace wsync {
namespace {

std::once_flag g_once;
CudaRt g_rt;
bool g_ok = false;
wsync_status_t g_status = WSYNC_ERR_NO_DEVICE;
std::string g_why;

template <typename F>
bool resolve(void* h, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  if (*out == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

void load() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("WSYNC_CUDART")) candidates.push_back(env);
  const char* sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", WSYNC_CUDART_SONAME,
                           "libcudart.so"};
  void* h = nullptr;
  std::string tried;
  // A runtime already in the process first (torch's, or a plugin's shared one).
  for (const char* s : sonames)
    if (s[0] && (h = dlopen(s, RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL)) != nullptr) {
      g_rt.library = s;
      break;
    }
  if (h == nullptr) {
    for (const char* s : sonames)
      if (s[0]) candidates.push_back(s);
    for (const auto& c : candidates) {
      if ((h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) {
        g_rt.library = c;
        break;
      }
      const char* e = dlerror();
      tried += "\n  " + c + ": " + (e ? e : "not found");
    }
  }
  if (h == nullptr) {
    g_why = "no CUDA device: the CUDA runtime library could not be loaded (set WSYNC_CUDART to its path); tried:" + tried;
    return;
  }
  std::string missing;
  resolve(h, "cudaGetDeviceCount", &g_rt.GetDeviceCount, &missing);
  resolve(h, "cudaGetDevice", &g_rt.GetDevice, &missing);
  resolve(h, "cudaSetDevice", &g_rt.SetDevice, &missing);
  resolve(h, "cudaMalloc", &g_rt.Malloc, &missing);
  resolve(h, "cudaFree", &g_rt.Free, &missing);
  resolve(h, "cudaMemcpyAsync", &g_rt.MemcpyAsync, &missing);
  resolve(h, "cudaMemsetAsync", &g_rt.MemsetAsync, &missing);
  resolve(h, "cudaStreamCreateWithFlags", &g_rt.StreamCreateWithFlags, &missing);
  resolve(h, "cudaStreamDestroy", &g_rt.StreamDestroy, &missing);
  resolve(h, "cudaStreamSynchronize", &g_rt.StreamSynchronize, &missing);
  resolve(h, "cudaStreamWaitEvent", &g_rt.StreamWaitEvent, &missing);
  resolve(h, "cudaEventCreateWithFlags", &g_rt.EventCreateWithFlags, &missing);
  resolve(h, "cudaEventRecord", &g_rt.EventRecord, &missing);
  resolve(h, "cudaEventSynchronize", &g_rt.EventSynchronize, &missing);
  resolve(h, "cudaEventDestroy", &g_rt.EventDestroy, &missing);
  resolve(h, "cudaGetErrorString", &g_rt.GetErrorString, &missing);
  if (!missing.empty()) {
    g_status = WSYNC_ERR_UNSUPPORTED;
    g_why = "the CUDA runtime " + g_rt.library + " lacks " + missing;
    return;
  }
  int n = 0;
  int err = g_rt.GetDeviceCount(&n);
  if (err != kCudaSuccess || n <= 0) {
    g_why = "no CUDA device (" + g_rt.library + ": cudaGetDeviceCount " +
            (err != kCudaSuccess ? std::string("failed: ") + g_rt.GetErrorString(err) : std::string("found 0 devices")) +
            ")";
    return;
  }
  g_ok = true;
}

}  // namespace

const CudaRt* cuda_runtime() {
  std::call_once(g_once, load);
  if (!g_ok) {
    fail_msg(g_status, g_why);
    return nullptr;
  }
  return &g_rt;
}

CudaDeviceGuard::CudaDeviceGuard(const CudaRt* rt, int device) : rt_(rt) {
  if (rt_ == nullptr || device < 0) return;
  int cur = -1;
  if (rt_->GetDevice(&cur) == kCudaSuccess && cur != device) {
    previous_ = cur;
    status_ = rt_->SetDevice(device);
  }
}

CudaDeviceGuard::~CudaDeviceGuard() {
  if (previous_ >= 0) rt_->SetDevice(previous_);
}

wsync_status_t cuda_fail(const CudaRt* rt, int err, const std::string& what) {
  const char* s = rt && rt->GetErrorString ? rt->GetErrorString(err) : "unknown";
  return fail(err == 2 /* cudaErrorMemoryAllocation */ ? WSYNC_ERR_OUT_OF_MEMORY : WSYNC_ERR_IO, "%s: %s (cuda error %d)",
              what.c_str(), s ? s : "unknown", err);
}

wsync_status_t cuda_pick_device(const CudaRt* rt, int requested, int* out) {
  int n = 0, err;
  if ((err = rt->GetDeviceCount(&n)) != kCudaSuccess) return cuda_fail(rt, err, "cudaGetDeviceCount");
  if (requested < 0) {
    if ((err = rt->GetDevice(&requested)) != kCudaSuccess) return cuda_fail(rt, err, "cudaGetDevice");
  }
  if (requested >= n)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "CUDA device %d does not exist: this process sees %d device(s)", requested, n);
  *out = requested;
  return WSYNC_OK;
}

}  // namespace wsync
