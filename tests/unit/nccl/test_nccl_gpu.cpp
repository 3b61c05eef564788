// Transport 'nccl' on a real GPU, through the core's loader and a real TCPStore (label gpu).
// Exits 77 (ctest: skipped) when no CUDA device is visible.
//
// One GPU cannot hold two ranks of one NCCL communicator, so data between ranks is not moved here
// (that needs two GPUs). What one GPU can check: a rank that never joins costs a timeout within
// the deadline, abort from another thread ends a connect at once, the unique id property matches
// the store, a world of one initialises (with vLLM's all-reduce after init) and moves a bucket
// through the whole post/wait path, and a receiver refuses a malformed id.
#include <sys/types.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "loader/plugin_loader.h"
#include "nccl_logic.h"
#include "store/store_handle.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "wsync_plugin.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

const std::string kPlugin = std::string(WSYNC_TEST_PLUGIN_DIR) + "/libwsync_transport_nccl.so";

std::string Threads() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, 8, "Threads:") == 0) return line;
  return "?";
}

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(wsync::TcpStoreServer::start("127.0.0.1", 0, &server_), WSYNC_OK) << wsync::last_error();
    ASSERT_EQ(wsync::TcpStoreClient::connect("127.0.0.1", server_->port(), 5000, &client_), WSYNC_OK)
        << wsync::last_error();
    store_.client = client_.get();
    wsync::LoadedTransport lt;
    ASSERT_EQ(wsync::load_transport(kPlugin, &lt), WSYNC_OK) << wsync::last_error();
    tp_ = lt.table;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }

  void TearDown() override {
    client_.reset();
    if (server_) server_->stop();
  }

  // Create an instance on device 0; options as key/value pairs.
  wsync_status_t Create(uint32_t rank, uint32_t world, const std::string& group,
                        std::vector<std::pair<std::string, std::string>> opts, void** self) {
    opts_ = std::move(opts);
    copts_.clear();
    for (auto& kv : opts_) copts_.push_back(WSYNC_OPTION(kv.first.c_str(), kv.second.c_str()));
    group_ = group;
    wsync_transport_params_t p = WSYNC_TRANSPORT_PARAMS_INIT;
    p.rank = rank;
    p.world_size = world;
    p.group_name = group_.c_str();
    p.store = &store_;
    p.options = copts_.data();
    p.num_options = copts_.size();
    p.timeout_ms = 10000;
    p.device_index = 0;
    wsync::clear_error();
    return tp_->create(&p, self);
  }

  std::vector<uint8_t> StoreValue(const std::string& key) {
    std::vector<uint8_t> v;
    EXPECT_EQ(client_->get(key, &v, 2000), WSYNC_OK) << key << ": " << wsync::last_error();
    return v;
  }

  std::unique_ptr<wsync::TcpStoreServer> server_;
  std::unique_ptr<wsync::TcpStoreClient> client_;
  wsync_store store_{nullptr};
  const wsync_transport_v1_t* tp_ = nullptr;
  std::string group_;
  std::vector<std::pair<std::string, std::string>> opts_;
  std::vector<wsync_option_t> copts_;
};

// (a) rank 0 of a world of 2 whose rank 1 never joins: WSYNC_ERR_TIMEOUT within the deadline, and
// destroy gives the device memory back (checked over two rounds).
TEST_F(NcclGpu, ConnectTimesOutWhenARankNeverJoins) {
  size_t free_after[2] = {0, 0}, total = 0;
  for (int round = 0; round < 2; ++round) {
    void* self = nullptr;
    ASSERT_EQ(Create(0, 2, "nccl_gpu_timeout_" + std::to_string(round), {}, &self), WSYNC_OK) << wsync::last_error();
    const auto t0 = Clock::now();
    wsync::clear_error();
    const wsync_status_t st = tp_->connect(self, 2000);
    const int64_t took = MsSince(t0);
    EXPECT_EQ(st, WSYNC_ERR_TIMEOUT) << wsync::last_error();
    EXPECT_NE(wsync::last_error().find("NCCL communicator (world size 2, this rank 0) was not complete after 2000 ms: "
                                       "a rank never joined"),
              std::string::npos)
        << wsync::last_error();
    EXPECT_GE(took, 1990);
    EXPECT_LT(took, 2000 + 3000) << "ncclCommAbort of an unfinished init took too long";
    // Broken from now on: the next call says why, at once.
    wsync_buffer_t b = WSYNC_BUFFER_INIT;
    EXPECT_EQ(tp_->send_post(self, 1, &b, nullptr, 0), WSYNC_ERR_TIMEOUT);
    const auto d0 = Clock::now();
    tp_->destroy(self);
    EXPECT_LT(MsSince(d0), 3000);
    size_t fr = 0;
    ASSERT_EQ(cudaMemGetInfo(&fr, &total), cudaSuccess);
    free_after[round] = fr;
    std::printf("round %d: connect %lld ms, free device memory %zu MiB, %s\n", round, static_cast<long long>(took),
                fr >> 20, Threads().c_str());
  }
  // NCCL keeps a little process-wide state (and a bootstrap root thread per unused unique id);
  // device memory must not grow per communicator.
  EXPECT_LE(free_after[0] > free_after[1] ? free_after[0] - free_after[1] : 0, size_t(64) << 20);
}

// transport.init_timeout_ms overrides connect's own timeout.
TEST_F(NcclGpu, InitTimeoutOptionOverridesConnectTimeout) {
  void* self = nullptr;
  ASSERT_EQ(Create(0, 2, "nccl_gpu_init_timeout", {{"init_timeout_ms", "700"}}, &self), WSYNC_OK)
      << wsync::last_error();
  const auto t0 = Clock::now();
  EXPECT_EQ(tp_->connect(self, 60000), WSYNC_ERR_TIMEOUT) << wsync::last_error();
  const int64_t took = MsSince(t0);
  EXPECT_GE(took, 690);
  EXPECT_LT(took, 700 + 3000);
  EXPECT_NE(wsync::last_error().find("after 700 ms"), std::string::npos) << wsync::last_error();
  tp_->destroy(self);
}

// (b) abort from another thread ends a connect that waits for a missing rank.
TEST_F(NcclGpu, AbortFromAnotherThreadEndsConnect) {
  void* self = nullptr;
  ASSERT_EQ(Create(0, 2, "nccl_gpu_abort", {}, &self), WSYNC_OK) << wsync::last_error();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    tp_->abort(self);
  });
  const auto t0 = Clock::now();
  wsync::clear_error();
  const wsync_status_t st = tp_->connect(self, 30000);
  const int64_t took = MsSince(t0);
  aborter.join();
  EXPECT_EQ(st, WSYNC_ERR_ABORTED) << wsync::last_error();
  EXPECT_NE(wsync::last_error().find("aborted"), std::string::npos) << wsync::last_error();
  EXPECT_GE(took, 450);
  EXPECT_LT(took, 500 + 3000);
  wsync_buffer_t b = WSYNC_BUFFER_INIT;
  EXPECT_EQ(tp_->send_post(self, 1, &b, nullptr, 0), WSYNC_ERR_ABORTED);
  EXPECT_EQ(tp_->send_wait(self, 1, 0), WSYNC_ERR_ABORTED);
  tp_->destroy(self);
}

// (c) the base64 property decodes to exactly the 128 bytes under wsync's key (and torch's).
TEST_F(NcclGpu, UniqueIdPropertyMatchesTheStore) {
  void* self = nullptr;
  ASSERT_EQ(Create(0, 2, "nccl_gpu_prop", {{"torch_group", "weight_update_group"}}, &self), WSYNC_OK)
      << wsync::last_error();
  char b64[256];
  ASSERT_EQ(tp_->get_property(self, "nccl_unique_id_b64", b64, sizeof b64), WSYNC_OK) << wsync::last_error();
  ASSERT_EQ(std::strlen(b64), 172u);
  uint8_t raw[NCCL_LOGIC_ID_BYTES];
  ASSERT_EQ(nccl_b64_decode(b64, std::strlen(b64), raw, sizeof raw), NCCL_LOGIC_ID_BYTES);
  const std::vector<uint8_t> id(raw, raw + sizeof raw);
  EXPECT_EQ(StoreValue("wsync/nccl_gpu_prop/nccl/unique_id"), id);
  EXPECT_EQ(StoreValue("weight_update_group/weight_update_group//cuda//0"), id);
  // On the wire it is "/weight_update_group/..." (the client adds "/"), as torch asks for it.

  char key[256];
  ASSERT_EQ(tp_->get_property(self, "torch_store_key", key, sizeof key), WSYNC_OK) << wsync::last_error();
  EXPECT_STREQ(key, "weight_update_group/weight_update_group//cuda//0");
  EXPECT_EQ(tp_->get_property(self, "nccl_unique_id_b64", b64, 172), WSYNC_ERR_INVALID_ARGUMENT);  // no room for NUL
  EXPECT_EQ(tp_->get_property(self, "nccl_unique_id_b64", b64, 173), WSYNC_OK);
  wsync::clear_error();
  EXPECT_EQ(tp_->get_property(self, "nccl_comm_id", b64, sizeof b64), WSYNC_ERR_NOT_FOUND);
  EXPECT_NE(wsync::last_error().find("nccl_comm_id"), std::string::npos) << wsync::last_error();
  tp_->destroy(self);

  ASSERT_EQ(Create(0, 2, "nccl_gpu_prop2", {}, &self), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(tp_->get_property(self, "torch_store_key", key, sizeof key), WSYNC_ERR_NOT_FOUND);
  ASSERT_EQ(tp_->get_property(self, "nccl_unique_id_b64", b64, sizeof b64), WSYNC_OK);
  ASSERT_EQ(nccl_b64_decode(b64, std::strlen(b64), raw, sizeof raw), NCCL_LOGIC_ID_BYTES);
  EXPECT_EQ(StoreValue("wsync/nccl_gpu_prop2/nccl/unique_id"), std::vector<uint8_t>(raw, raw + sizeof raw));
  EXPECT_NE(std::vector<uint8_t>(raw, raw + sizeof raw), id) << "two groups got the same NCCL unique id";
  tp_->destroy(self);
}

TEST_F(NcclGpu, UnknownOptionIsRefused) {
  void* self = nullptr;
  EXPECT_EQ(Create(0, 2, "nccl_gpu_opt", {{"socket_ifname", "eth0"}}, &self), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(self, nullptr);
  EXPECT_NE(wsync::last_error().find("transport.socket_ifname"), std::string::npos) << wsync::last_error();
}

// (d) a world of one: init with the all-reduce after it, then the post/wait path end to end (a
// broadcast to nobody), two buckets in flight, and a clean finalize at destroy.
TEST_F(NcclGpu, WorldOfOneInitAllReduceAndPostWait) {
  void* self = nullptr;
  ASSERT_EQ(Create(0, 1, "nccl_gpu_world1", {{"allreduce_after_init", "1"}}, &self), WSYNC_OK)
      << wsync::last_error();
  ASSERT_EQ(tp_->connect(self, 30000), WSYNC_OK) << wsync::last_error();

  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 2 << 20), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(dev, 0x5a, 2 << 20, s), cudaSuccess);

  wsync_buffer_t b = WSYNC_BUFFER_INIT;
  b.device_type = WSYNC_DEVICE_CUDA;
  b.device_index = 0;
  b.data = dev;
  b.len = 1 << 20;
  b.stream = s;
  wsync_buffer_t b2 = b;
  b2.data = static_cast<char*>(dev) + (1 << 20);
  ASSERT_EQ(tp_->send_post(self, 1, &b, nullptr, 0), WSYNC_OK) << wsync::last_error();
  ASSERT_EQ(tp_->send_post(self, 2, &b2, nullptr, 0), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(tp_->send_post(self, 2, &b2, nullptr, 0), WSYNC_ERR_INVALID_STATE);  // posted twice
  EXPECT_EQ(tp_->send_wait(self, 2, 10000), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(tp_->send_wait(self, 1, 10000), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(tp_->send_wait(self, 1, 0), WSYNC_OK);  // nothing posted under 1 any more

  // The bytes on the root are untouched by an in-place broadcast.
  std::vector<uint8_t> back(1 << 20);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), dev, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[0], 0x5a);
  EXPECT_EQ(back[back.size() - 1], 0x5a);

  // Refusals.
  std::vector<uint8_t> host(64);
  wsync_buffer_t hb = WSYNC_BUFFER_INIT;
  hb.data = host.data();
  hb.len = host.size();
  wsync::clear_error();
  EXPECT_EQ(tp_->send_post(self, 3, &hb, nullptr, 0), WSYNC_ERR_UNSUPPORTED);
  EXPECT_NE(wsync::last_error().find("device memory only"), std::string::npos) << wsync::last_error();
  wsync_buffer_t lie = hb;  // host memory that claims to be CUDA
  lie.device_type = WSYNC_DEVICE_CUDA;
  EXPECT_EQ(tp_->send_post(self, 3, &lie, nullptr, 0), WSYNC_ERR_UNSUPPORTED);
  const uint32_t r1 = 1;
  EXPECT_EQ(tp_->send_post(self, 3, &b, &r1, 1), WSYNC_ERR_INVALID_ARGUMENT);  // no rank 1 in a world of 1
  wsync_iov_t iov = {dev, 16};
  EXPECT_EQ(tp_->recv_post(self, 3, &iov, 1), WSYNC_ERR_INVALID_STATE);  // rank 0 never receives
  tp_->forget_peer(self, 0);  // itself: ignored
  tp_->forget_peer(self, 7);  // not a rank: ignored
  ASSERT_EQ(tp_->send_post(self, 4, &b, nullptr, 0), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(tp_->send_wait(self, 4, 10000), WSYNC_OK) << wsync::last_error();

  const auto d0 = Clock::now();
  tp_->destroy(self);  // idle and healthy: ncclCommFinalize + ncclCommDestroy
  EXPECT_LT(MsSince(d0), 5000);
  int cur = -1;
  EXPECT_EQ(cudaGetDevice(&cur), cudaSuccess);
  EXPECT_EQ(cur, 0);
  cudaStreamDestroy(s);
  cudaFree(dev);
}

// A receiver reads the id from the store: missing → timeout naming the key; not 128 bytes →
// protocol error naming the key. No NCCL init happens in either case.
TEST_F(NcclGpu, ReceiverChecksTheStoredId) {
  void* self = nullptr;
  ASSERT_EQ(Create(1, 2, "nccl_gpu_rx", {}, &self), WSYNC_OK) << wsync::last_error();
  char b64[256];
  EXPECT_EQ(tp_->get_property(self, "nccl_unique_id_b64", b64, sizeof b64), WSYNC_ERR_INVALID_STATE);
  const auto t0 = Clock::now();
  wsync::clear_error();
  EXPECT_EQ(tp_->connect(self, 600), WSYNC_ERR_TIMEOUT) << wsync::last_error();
  EXPECT_LT(MsSince(t0), 600 + 1500);
  EXPECT_NE(wsync::last_error().find("wsync/nccl_gpu_rx/nccl/unique_id"), std::string::npos) << wsync::last_error();
  tp_->destroy(self);

  ASSERT_EQ(client_->set("wsync/nccl_gpu_rx2/nccl/unique_id", "short", 5), WSYNC_OK);
  ASSERT_EQ(Create(1, 2, "nccl_gpu_rx2", {}, &self), WSYNC_OK) << wsync::last_error();
  wsync::clear_error();
  EXPECT_EQ(tp_->connect(self, 5000), WSYNC_ERR_PROTOCOL) << wsync::last_error();
  EXPECT_NE(wsync::last_error().find("'wsync/nccl_gpu_rx2/nccl/unique_id' holds 5 bytes"), std::string::npos)
      << wsync::last_error();
  tp_->destroy(self);

  std::string big(300, 'x');
  ASSERT_EQ(client_->set("wsync/nccl_gpu_rx3/nccl/unique_id", big.data(), big.size()), WSYNC_OK);
  ASSERT_EQ(Create(1, 2, "nccl_gpu_rx3", {}, &self), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(tp_->connect(self, 5000), WSYNC_ERR_PROTOCOL) << wsync::last_error();
  tp_->destroy(self);
}

// A receiver that forgets its sender while waiting for the id, then is aborted: both later calls
// fail fast with the reason.
TEST_F(NcclGpu, ForgetPeerBreaksTheInstance) {
  void* self = nullptr;
  ASSERT_EQ(Create(1, 2, "nccl_gpu_forget", {}, &self), WSYNC_OK) << wsync::last_error();
  tp_->forget_peer(self, 0);
  wsync::clear_error();
  EXPECT_EQ(tp_->connect(self, 1000), WSYNC_ERR_PEER_FAILED) << wsync::last_error();
  EXPECT_NE(wsync::last_error().find("rank 0 (the sender) was dropped; an NCCL group cannot continue without it"),
            std::string::npos)
      << wsync::last_error();
  tp_->destroy(self);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    std::printf("SKIPPED: gpu.nccl_plugin needs a CUDA device (cudaGetDeviceCount: %s, %d device(s))\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no error", n);
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
