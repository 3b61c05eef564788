// The core's dlopen'd CUDA runtime and its memory blocks, on a machine with or without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "common/error.h"
#include "device/cuda_rt.h"
#include "device/mem_block.h"

#ifdef WSYNC_TEST_HAVE_CUDA_HEADERS
#include <cuda_runtime_api.h>
// The constants the core declares without CUDA's headers are CUDA's own.
static_assert(wsync::kCudaSuccess == cudaSuccess, "cudaSuccess");
static_assert(wsync::kCudaErrorNotReady == cudaErrorNotReady, "cudaErrorNotReady");
static_assert(wsync::kCudaMemcpyDefault == cudaMemcpyDefault, "cudaMemcpyDefault");
static_assert(wsync::kCudaStreamNonBlocking == cudaStreamNonBlocking, "cudaStreamNonBlocking");
static_assert(wsync::kCudaEventDisableTiming == cudaEventDisableTiming, "cudaEventDisableTiming");
static_assert(cudaErrorMemoryAllocation == 2, "cuda_fail maps error 2 to out-of-memory");
static_assert(sizeof(cudaStream_t) == sizeof(void*) && sizeof(cudaEvent_t) == sizeof(void*), "handles are pointers");
#endif

namespace {

bool machine_has_gpu() { return access("/dev/nvidia0", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0; }

TEST(CudaRt, WithoutAGpuTheRuntimeReportsNoDeviceAndSaysWhy) {
  if (machine_has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  wsync::clear_error();
  EXPECT_EQ(nullptr, wsync::cuda_runtime());
  EXPECT_EQ(WSYNC_ERR_NO_DEVICE, wsync::last_status());
  std::string msg = wsync::last_error();
  EXPECT_NE(std::string::npos, msg.find("no CUDA device")) << msg;
  // asked again: the same answer, no second search
  wsync::clear_error();
  EXPECT_EQ(nullptr, wsync::cuda_runtime());
  EXPECT_EQ(msg, wsync::last_error());
}

TEST(CudaRt, WithAGpuTheRuntimeResolvesEveryCall) {
  if (!machine_has_gpu()) GTEST_SKIP() << "no GPU on this machine";
  const wsync::CudaRt* rt = wsync::cuda_runtime();
  ASSERT_NE(nullptr, rt) << wsync::last_error();
  int n = 0;
  EXPECT_EQ(wsync::kCudaSuccess, rt->GetDeviceCount(&n));
  EXPECT_GT(n, 0);
  int dev = -1;
  EXPECT_EQ(WSYNC_OK, wsync::cuda_pick_device(rt, -1, &dev));
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, wsync::cuda_pick_device(rt, n, &dev));
  EXPECT_NE(std::string::npos, wsync::last_error().find("does not exist")) << wsync::last_error();
}

TEST(MemBlock, HostBlocksAllocateMoveAndFree) {
  wsync::MemBlock a;
  EXPECT_EQ(nullptr, a.data());
  ASSERT_EQ(WSYNC_OK, wsync::MemBlock::alloc(10000, -1, &a));
  ASSERT_NE(nullptr, a.data());
  EXPECT_EQ(10000u, a.size());
  EXPECT_FALSE(a.on_device());
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(a.data()) % 4096);
  std::memset(a.data(), 7, a.size());
  wsync::MemBlock b = std::move(a);
  EXPECT_EQ(nullptr, a.data());
  EXPECT_EQ(10000u, b.size());
  EXPECT_EQ(7, b.data()[9999]);
  ASSERT_EQ(WSYNC_OK, wsync::MemBlock::alloc(0, -1, &b));  // an empty block frees the old one
  EXPECT_EQ(nullptr, b.data());
  EXPECT_EQ(0u, b.size());
}

TEST(MemBlock, DeviceBlocksWithoutAGpuFailWithNoDevice) {
  if (machine_has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  wsync::MemBlock d;
  EXPECT_EQ(WSYNC_ERR_NO_DEVICE, wsync::MemBlock::alloc(4096, 0, &d));
  EXPECT_EQ(nullptr, d.data());
  EXPECT_NE(std::string::npos, wsync::last_error().find("no CUDA device")) << wsync::last_error();
}

}  // namespace
