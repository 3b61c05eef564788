// Loading transport 'nccl' through the core's loader. Without a CUDA device (or driver) the entry
// refuses with WSYNC_ERR_NO_DEVICE and says so; with one, the table is complete. The test asks
// the CUDA runtime itself which case applies, so either branch can fail.
#include <dlfcn.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "common/error.h"
#include "loader/plugin_loader.h"
#include "wsync_plugin.h"

namespace {

const std::string kPluginDir = WSYNC_TEST_PLUGIN_DIR;
const std::string kPlugin = kPluginDir + "/libwsync_transport_nccl.so";

bool HasDevice(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  *why = e != cudaSuccess ? cudaGetErrorString(e) : std::to_string(n) + " device(s)";
  return e == cudaSuccess && n > 0;
}

void ExpectOutcome(wsync_status_t st, const wsync::LoadedTransport& t) {
  std::string why;
  if (!HasDevice(&why)) {
    EXPECT_EQ(st, WSYNC_ERR_NO_DEVICE) << wsync::last_error();
    EXPECT_NE(wsync::last_error().find("transport nccl: no CUDA device (cudaGetDeviceCount: "), std::string::npos)
        << wsync::last_error();
    EXPECT_EQ(t.table, nullptr);
    std::printf("refused as expected (the CUDA runtime sees: %s): %s\n", why.c_str(), wsync::last_error().c_str());
    return;
  }
  ASSERT_EQ(st, WSYNC_OK) << wsync::last_error() << " (the CUDA runtime sees " << why << ")";
  ASSERT_NE(t.table, nullptr);
  EXPECT_STREQ(t.table->name, "nccl");
  EXPECT_EQ(t.table->abi_version, static_cast<uint32_t>(WSYNC_PLUGIN_ABI_VERSION));
  EXPECT_EQ(t.table->struct_size, sizeof(wsync_transport_v1_t));
  EXPECT_EQ(t.table->caps, static_cast<uint64_t>(WSYNC_TRANSPORT_CAP_CUDA_MEMORY));
  EXPECT_NE(t.table->abort, nullptr);
  EXPECT_EQ(t.table->register_staging, nullptr);
  EXPECT_NE(t.table->get_property, nullptr);
}

TEST(NcclLoad, ByPath) {
  wsync::LoadedTransport t;
  wsync::clear_error();
  wsync_status_t st = wsync::load_transport(kPlugin, &t);
  ExpectOutcome(st, t);
}

TEST(NcclLoad, ByNameThroughPluginPath) {
  setenv("WSYNC_PLUGIN_PATH", kPluginDir.c_str(), 1);
  wsync::LoadedTransport t;
  wsync::clear_error();
  wsync_status_t st = wsync::load_transport("nccl", &t);
  unsetenv("WSYNC_PLUGIN_PATH");
  ExpectOutcome(st, t);
}

// Only the entry leaves the plugin: the static CUDA runtime inside it stays private.
TEST(NcclLoad, ExportsOnlyTheEntry) {
  void* h = dlopen(kPlugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_NE(dlsym(h, "wsync_transport_entry_v1"), nullptr);
  Dl_info info;
  void* sym = dlsym(h, "cudaGetDeviceCount");
  // Found at all, it must come from another library (libnccl), never from the plugin itself.
  if (sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr) {
    EXPECT_EQ(std::string(info.dli_fname).find("libwsync_transport_nccl"), std::string::npos) << info.dli_fname;
  }
  EXPECT_EQ(dlsym(h, "nccl_parse_options"), nullptr);
  EXPECT_EQ(dlsym(h, "nccl_host"), nullptr);
  dlclose(h);
}

}  // namespace
