// Loading transport 'cuda_ipc' through the core's loader on this machine. Without a usable CUDA
// device (no GPU, or no driver: libcudart_static then fails cudaGetDeviceCount) the plugin must
// refuse to load with WSYNC_ERR_NO_DEVICE and say so; with one, the loader must accept a full
// ABI 1.1 table, and create must validate its parameters without touching the store.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/error.h"
#include "loader/plugin_loader.h"

namespace {

bool HaveDevice(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    return false;
  }
  *why = std::to_string(count) + " device(s)";
  return count > 0;
}

class CudaIpcLoad : public ::testing::Test {
 protected:
  void SetUp() override { setenv("WSYNC_PLUGIN_PATH", WSYNC_TEST_PLUGIN_DIR, 1); }
};

TEST_F(CudaIpcLoad, RefusedWithoutADeviceLoadedWithOne) {
  std::string why;
  const bool gpu = HaveDevice(&why);
  wsync::LoadedTransport t;
  wsync::clear_error();
  const wsync_status_t st = wsync::load_transport("cuda_ipc", &t);
  const std::string msg = wsync::last_error();
  if (!gpu) {
    std::printf("no CUDA device here (%s): the plugin must refuse to load\n", why.c_str());
    EXPECT_EQ(st, WSYNC_ERR_NO_DEVICE) << msg;
    EXPECT_NE(msg.find("no CUDA device"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cudaGetDeviceCount"), std::string::npos) << msg;
    EXPECT_NE(msg.find("libwsync_transport_cuda_ipc.so"), std::string::npos) << msg;  // the loader names the file
    EXPECT_EQ(t.table, nullptr);
    return;
  }
  ASSERT_EQ(st, WSYNC_OK) << msg;
  ASSERT_NE(t.table, nullptr);
  EXPECT_STREQ(t.table->name, "cuda_ipc");
  EXPECT_EQ(t.table->abi_version, static_cast<uint32_t>(WSYNC_PLUGIN_ABI_VERSION));
  EXPECT_EQ(t.table->struct_size, sizeof(wsync_transport_v1_t));
  EXPECT_EQ(t.table->caps, static_cast<uint64_t>(WSYNC_TRANSPORT_CAP_CUDA_MEMORY | WSYNC_TRANSPORT_CAP_STAGING_ONLY |
                                                 WSYNC_TRANSPORT_CAP_SCATTER_RECV));
  EXPECT_NE(t.table->abort, nullptr);
  EXPECT_NE(t.table->register_staging, nullptr);
  EXPECT_NE(t.table->get_property, nullptr);
}

TEST_F(CudaIpcLoad, CreateValidatesParameters) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no CUDA device (" << why << ")";
  wsync::LoadedTransport t;
  ASSERT_EQ(wsync::load_transport("cuda_ipc", &t), WSYNC_OK) << wsync::last_error();
  const wsync_transport_v1_t* T = t.table;
  wsync_transport_params_t p = WSYNC_TRANSPORT_PARAMS_INIT;
  p.rank = 0;
  p.world_size = 1;  // no receiver: no store needed
  p.group_name = "load-test";
  p.timeout_ms = 1000;
  p.device_index = 0;
  void* self = nullptr;

  wsync_option_t bad[] = {WSYNC_OPTION("poll_us", "10"), WSYNC_OPTION("bogus", "1")};
  p.options = bad;
  p.num_options = 2;
  EXPECT_EQ(T->create(&p, &self), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(wsync::last_error().find("transport.bogus"), std::string::npos) << wsync::last_error();
  EXPECT_EQ(self, nullptr);

  p.options = nullptr;
  p.num_options = 0;
  p.rank = 1;  // outside a world of 1
  EXPECT_EQ(T->create(&p, &self), WSYNC_ERR_INVALID_ARGUMENT);
  p.rank = 0;
  p.device_index = 4096;
  EXPECT_EQ(T->create(&p, &self), WSYNC_ERR_NO_DEVICE);
  EXPECT_NE(wsync::last_error().find("device 4096"), std::string::npos) << wsync::last_error();
  p.device_index = 0;

  ASSERT_EQ(T->create(&p, &self), WSYNC_OK) << wsync::last_error();
  char buf[64];
  EXPECT_EQ(T->get_property(self, "nccl_unique_id_b64", buf, sizeof buf), WSYNC_ERR_NOT_FOUND);
  EXPECT_NE(wsync::last_error().find("'nccl_unique_id_b64'"), std::string::npos) << wsync::last_error();
  // The sender must be given its staging before connect.
  EXPECT_EQ(T->connect(self, 100), WSYNC_ERR_INVALID_STATE);
  EXPECT_NE(wsync::last_error().find("register_staging"), std::string::npos) << wsync::last_error();
  // Host memory cannot be staging for this transport.
  static char host[4096];
  wsync_buffer_t hb = WSYNC_BUFFER_INIT;
  hb.data = host;
  hb.len = sizeof host;
  EXPECT_EQ(T->register_staging(self, &hb, 1), WSYNC_ERR_UNSUPPORTED);
  EXPECT_NE(wsync::last_error().find("not CUDA memory"), std::string::npos) << wsync::last_error();
  T->destroy(self);
  T->destroy(nullptr);
}

}  // namespace
