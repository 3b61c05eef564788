// Transport 'nccl' driven through its function table against a fake CUDA runtime and NCCL
// (fake_cuda_nccl.h): the op queue, the deferred issue of a broadcast that is still enqueuing,
// scatter receives through the scratch buffer, timeouts, abort, forget_peer and teardown, all
// without a GPU. The real GPU behaviour is tested by test_nccl_gpu.cpp (label gpu).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fake_cuda_nccl.h"
#include "nccl_logic.h"
#include "wsync_plugin.h"

extern "C" const wsync_transport_v1_t* wsync_transport_entry_v1(const wsync_host_v1_t* host);

namespace {

using Clock = std::chrono::steady_clock;
int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// ---- host table with an in-memory store ----------------------------------------------------------

std::mutex g_mu;
std::condition_variable g_cv;
std::map<std::string, std::string> g_store;
thread_local std::string t_error;
thread_local wsync_status_t t_status = WSYNC_OK;

wsync_status_t HostSetError(wsync_status_t st, const char* msg) {
  t_status = st;
  t_error = msg ? msg : "";
  return st;
}
void HostLog(int32_t, const char*) {}
wsync_status_t HostSet(wsync_store_t*, const char* key, const void* v, uint64_t len) {
  std::lock_guard<std::mutex> l(g_mu);
  g_store[key] = std::string(static_cast<const char*>(v), len);
  g_cv.notify_all();
  return WSYNC_OK;
}
wsync_status_t HostGet(wsync_store_t*, const char* key, void* buf, uint64_t cap, uint64_t* len, int64_t timeout_ms) {
  std::unique_lock<std::mutex> l(g_mu);
  if (!g_cv.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return g_store.count(key) > 0; }))
    return HostSetError(WSYNC_ERR_TIMEOUT, "store wait timed out");
  const std::string& v = g_store[key];
  *len = v.size();
  if (v.size() > cap) return HostSetError(WSYNC_ERR_INVALID_ARGUMENT, "too long");
  std::memcpy(buf, v.data(), v.size());
  return WSYNC_OK;
}
wsync_status_t HostAdd(wsync_store_t*, const char*, int64_t, int64_t*) { return WSYNC_ERR_UNSUPPORTED; }
void* HostAlloc(uint64_t n) { return std::malloc(n); }
void HostFree(void* p, uint64_t) { std::free(p); }

const wsync_host_v1_t kHost = {sizeof(wsync_host_v1_t), WSYNC_PLUGIN_ABI_VERSION, HostLog, HostSetError, HostSet,
                               HostGet, HostAdd, HostAlloc, HostFree, WSYNC_PLUGIN_ABI_MINOR, 0};

wsync_store_t* const kStore = reinterpret_cast<wsync_store_t*>(0x1);
const cudaStream_t kCallerStream = reinterpret_cast<cudaStream_t>(0x5eed);

std::string Id() {
  std::string id(NCCL_UNIQUE_ID_BYTES, '\0');
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) id[i] = static_cast<char>(i * 7 + 3);  // the fake's id
  return id;
}

class NcclFake : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::Reset();
    {
      std::lock_guard<std::mutex> l(g_mu);
      g_store.clear();
    }
    tp_ = wsync_transport_entry_v1(&kHost);
    ASSERT_NE(tp_, nullptr) << t_error;
  }
  void TearDown() override {
    for (void* s : live_) tp_->destroy(s);
    EXPECT_EQ(fake::g.violations, 0) << (fake::g.violation_what.empty() ? "" : fake::g.violation_what[0]);
    EXPECT_EQ(fake::g.live_comms, 0) << "a communicator was neither destroyed nor aborted";
    EXPECT_EQ(fake::g.events_created, fake::g.events_destroyed) << "events leaked";
    EXPECT_EQ(fake::g.streams_created, fake::g.streams_destroyed) << "streams leaked";
    for (void* p : bufs_) fake::DevFree(p);
    EXPECT_TRUE(fake::g.dev.empty()) << fake::g.dev.size() << " fake device allocations leaked";
  }

  void* Create(uint32_t rank, uint32_t world, std::vector<std::pair<std::string, std::string>> opts = {},
               int32_t device = 0, wsync_status_t expect = WSYNC_OK,
               std::vector<std::pair<std::string, std::string>> hints = {}) {
    opts_ = std::move(opts);
    hints_ = std::move(hints);
    copts_.clear();
    chints_.clear();
    for (auto& kv : opts_) copts_.push_back(WSYNC_OPTION(kv.first.c_str(), kv.second.c_str()));
    for (auto& kv : hints_) chints_.push_back(WSYNC_OPTION(kv.first.c_str(), kv.second.c_str()));
    wsync_transport_params_t p = WSYNC_TRANSPORT_PARAMS_INIT;
    p.rank = rank;
    p.world_size = world;
    p.group_name = "g";
    p.store = kStore;
    p.options = copts_.data();
    p.num_options = copts_.size();
    p.timeout_ms = 1000;
    p.device_index = device;
    p.hints = chints_.data();
    p.num_hints = chints_.size();
    void* self = nullptr;
    EXPECT_EQ(tp_->create(&p, &self), expect) << t_error;
    if (self != nullptr) live_.push_back(self);
    return self;
  }
  void Destroy(void* self) {
    for (size_t i = 0; i < live_.size(); ++i)
      if (live_[i] == self) live_.erase(live_.begin() + static_cast<long>(i));
    tp_->destroy(self);
  }
  void* Connected(uint32_t rank, uint32_t world, std::vector<std::pair<std::string, std::string>> opts = {}) {
    if (rank != 0) HostSet(kStore, "wsync/g/nccl/unique_id", Id().data(), NCCL_UNIQUE_ID_BYTES);
    void* self = Create(rank, world, std::move(opts));
    if (self != nullptr) {
      EXPECT_EQ(tp_->connect(self, 1000), WSYNC_OK) << t_error;
    }
    return self;
  }
  void* Dev(size_t n) {
    void* p = fake::DevAlloc(n);
    bufs_.push_back(p);
    return p;
  }
  wsync_buffer_t Buf(const void* data, uint64_t len) {
    wsync_buffer_t b = WSYNC_BUFFER_INIT;
    b.device_type = WSYNC_DEVICE_CUDA;
    b.device_index = 0;
    b.data = data;
    b.len = len;
    b.stream = kCallerStream;
    return b;
  }

  const wsync_transport_v1_t* tp_ = nullptr;
  std::vector<void*> live_;
  std::vector<void*> bufs_;
  std::vector<std::pair<std::string, std::string>> opts_, hints_;
  std::vector<wsync_option_t> copts_, chints_;
};

// ---- entry, create, properties -------------------------------------------------------------------

TEST_F(NcclFake, EntryRefusesWithoutDevice) {
  fake::g.device_count = 0;
  t_error.clear();
  EXPECT_EQ(wsync_transport_entry_v1(&kHost), nullptr);
  EXPECT_EQ(t_status, WSYNC_ERR_NO_DEVICE);
  EXPECT_EQ(t_error, "transport nccl: no CUDA device (cudaGetDeviceCount: fake CUDA error)");
  wsync_host_v1_t old = kHost;
  old.abi_version = 2;
  fake::g.device_count = 1;
  EXPECT_EQ(wsync_transport_entry_v1(&old), nullptr);
  EXPECT_EQ(t_status, WSYNC_ERR_VERSION_MISMATCH);
}

TEST_F(NcclFake, TableIsComplete) {
  EXPECT_STREQ(tp_->name, "nccl");
  EXPECT_EQ(tp_->struct_size, sizeof(wsync_transport_v1_t));
  EXPECT_EQ(tp_->caps, static_cast<uint64_t>(WSYNC_TRANSPORT_CAP_CUDA_MEMORY));
  EXPECT_NE(tp_->runtime_info, nullptr);
  EXPECT_NE(std::string(tp_->runtime_info()).find("NCCL"), std::string::npos) << tp_->runtime_info();
  EXPECT_NE(tp_->abort, nullptr);
  EXPECT_NE(tp_->get_property, nullptr);
  EXPECT_EQ(tp_->register_staging, nullptr);
  tp_->destroy(nullptr);  // accepted
}

// Plugin ABI 1.2: the adapter's hints (torch_group, lazy_init, allreduce_after_init) configure the
// transport like options, under the caller's options; unknown keys and bad values are ignored.
TEST_F(NcclFake, HintsApplyUnderTheOptions) {
  void* self = Create(0, 3, {}, 0, WSYNC_OK, {{"torch_group", "weight_update_group"}, {"lazy_init", "1"},
                                              {"some_other_engines_hint", "x"}, {"allreduce_after_init", "maybe"}});
  ASSERT_NE(self, nullptr);
  char key[256];
  ASSERT_EQ(tp_->get_property(self, "torch_store_key", key, sizeof key), WSYNC_OK) << t_error;
  EXPECT_STREQ(key, "weight_update_group/weight_update_group//cuda//0");
  {
    std::lock_guard<std::mutex> l(g_mu);
    EXPECT_EQ(g_store.count("weight_update_group/weight_update_group//cuda//0"), 1u);  // published under the hint's group
  }
  // An option of the caller wins over a hint of the same key.
  self = Create(0, 3, {{"torch_group", "mine"}}, 0, WSYNC_OK, {{"torch_group", "theirs"}});
  ASSERT_NE(self, nullptr);
  ASSERT_EQ(tp_->get_property(self, "torch_store_key", key, sizeof key), WSYNC_OK) << t_error;
  EXPECT_STREQ(key, "mine/mine//cuda//0");
  // Hints that cannot go together are refused like the same options (they would hang vLLM).
  EXPECT_EQ(Create(0, 2, {}, 0, WSYNC_ERR_INVALID_ARGUMENT, {{"lazy_init", "1"}, {"allreduce_after_init", "1"}}), nullptr);
  EXPECT_NE(t_error.find("cannot be combined"), std::string::npos) << t_error;
}

TEST_F(NcclFake, Rank0PublishesTheIdAtCreate) {
  void* self = Create(0, 3, {{"torch_group", "weight_update_group"}});
  ASSERT_NE(self, nullptr);
  {
    std::lock_guard<std::mutex> l(g_mu);
    EXPECT_EQ(g_store["wsync/g/nccl/unique_id"], Id());
    EXPECT_EQ(g_store["weight_update_group/weight_update_group//cuda//0"], Id());
    EXPECT_EQ(g_store.size(), 2u);
  }
  char b64[200];
  ASSERT_EQ(tp_->get_property(self, "nccl_unique_id_b64", b64, sizeof b64), WSYNC_OK) << t_error;
  char expect[200];
  ASSERT_EQ(nccl_b64_encode(Id().data(), NCCL_UNIQUE_ID_BYTES, expect, sizeof expect), 172);
  EXPECT_STREQ(b64, expect);
  char key[100];
  ASSERT_EQ(tp_->get_property(self, "torch_store_key", key, sizeof key), WSYNC_OK);
  EXPECT_STREQ(key, "weight_update_group/weight_update_group//cuda//0");
  EXPECT_EQ(tp_->get_property(self, "torch_store_key", key, 10), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tp_->get_property(self, "nope", key, sizeof key), WSYNC_ERR_NOT_FOUND);
  EXPECT_EQ(t_error, "transport nccl: unknown property 'nope' (known: nccl_unique_id_b64, torch_store_key)");
  EXPECT_EQ(fake::g.inits, 0);  // no communicator before connect
}

TEST_F(NcclFake, CreateRefusesBadOptionsAndParams) {
  EXPECT_EQ(Create(0, 2, {{"bogus", "1"}}, 0, WSYNC_ERR_INVALID_ARGUMENT), nullptr);
  EXPECT_EQ(t_error,
            "transport nccl: unknown option 'transport.bogus' (known: transport.torch_group, "
            "transport.allreduce_after_init, transport.init_timeout_ms, transport.lazy_init)");
  EXPECT_EQ(Create(0, 2, {{"allreduce_after_init", "yes"}}, 0, WSYNC_ERR_INVALID_ARGUMENT), nullptr);
  EXPECT_EQ(Create(0, 2, {}, 5, WSYNC_ERR_INVALID_ARGUMENT), nullptr);  // one device only
  EXPECT_NE(t_error.find("device_index 5"), std::string::npos) << t_error;
  EXPECT_EQ(Create(2, 2, {}, 0, WSYNC_ERR_INVALID_ARGUMENT), nullptr);
}

// ---- connect -------------------------------------------------------------------------------------

TEST_F(NcclFake, ConnectPollsANonBlockingInit) {
  fake::g.init_polls = 5;
  fake::g.current_device = 0;
  void* self = Connected(0, 3);
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(fake::g.init_blocking, 0);
  EXPECT_EQ(fake::g.init_nranks, 3);
  EXPECT_EQ(fake::g.init_rank, 0);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(fake::g.init_id), NCCL_UNIQUE_ID_BYTES), Id());
  EXPECT_TRUE(fake::g.allreduces.empty());
  EXPECT_EQ(tp_->connect(self, 1000), WSYNC_ERR_INVALID_STATE);  // twice
}

TEST_F(NcclFake, ReceiverUsesTheStoredId) {
  void* self = Connected(2, 3);
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(fake::g.init_rank, 2);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(fake::g.init_id), NCCL_UNIQUE_ID_BYTES), Id());
  char b64[200];
  EXPECT_EQ(tp_->get_property(self, "nccl_unique_id_b64", b64, sizeof b64), WSYNC_OK);
}

TEST_F(NcclFake, ReceiverRefusesAMissingOrMalformedId) {
  void* self = Create(1, 2);
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->connect(self, 150), WSYNC_ERR_TIMEOUT);
  EXPECT_GE(MsSince(t0), 149);
  EXPECT_EQ(t_error,
            "transport nccl: rank 1: no NCCL unique id under store key 'wsync/g/nccl/unique_id' after 150 ms: the "
            "sender (rank 0) has not created its nccl transport");
  Destroy(self);
  HostSet(kStore, "wsync/g/nccl/unique_id", "abc", 3);
  self = Create(1, 2);
  EXPECT_EQ(tp_->connect(self, 1000), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(t_error,
            "transport nccl: rank 1: store key 'wsync/g/nccl/unique_id' holds 3 bytes, not the 128 bytes of an NCCL "
            "unique id");
  EXPECT_EQ(fake::g.inits, 0);
}

TEST_F(NcclFake, ConnectTimesOutAndAbortsTheCommunicator) {
  fake::g.init_polls = -1;  // a rank never joins
  void* self = Create(0, 3);
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->connect(self, 120), WSYNC_ERR_TIMEOUT);
  const int64_t took = MsSince(t0);
  EXPECT_GE(took, 119);  // the plugin's clock counts whole milliseconds
  EXPECT_LT(took, 1000);
  EXPECT_EQ(t_error,
            "transport nccl: NCCL communicator (world size 3, this rank 0) was not complete after 120 ms: a rank never "
            "joined (this rank is on cuda:0)");
  EXPECT_EQ(fake::g.aborts, 1);
  wsync_buffer_t b = Buf(Dev(8), 8);
  EXPECT_EQ(tp_->send_post(self, 1, &b, nullptr, 0), WSYNC_ERR_TIMEOUT);  // broken: says why again
  Destroy(self);
  EXPECT_EQ(fake::g.aborts, 1);  // not twice
}

TEST_F(NcclFake, InitTimeoutOptionWins) {
  fake::g.init_polls = -1;
  void* self = Create(0, 2, {{"init_timeout_ms", "80"}});
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->connect(self, 60000), WSYNC_ERR_TIMEOUT);
  EXPECT_LT(MsSince(t0), 1000);
  EXPECT_NE(t_error.find("after 80 ms"), std::string::npos) << t_error;
}

TEST_F(NcclFake, AbortFromAnotherThreadEndsConnect) {
  fake::g.init_polls = -1;
  void* self = Create(0, 2);
  std::thread th([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    tp_->abort(self);
  });
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->connect(self, 10000), WSYNC_ERR_ABORTED);
  th.join();
  EXPECT_LT(MsSince(t0), 2000);
  EXPECT_EQ(t_error, "transport nccl: rank 0: aborted");
  EXPECT_EQ(fake::g.aborts, 1);
  wsync_buffer_t b = Buf(Dev(8), 8);
  EXPECT_EQ(tp_->send_post(self, 1, &b, nullptr, 0), WSYNC_ERR_ABORTED);
}

TEST_F(NcclFake, AllReduceAfterInitEvenWhileEnqueuing) {
  fake::g.in_progress_next = 1;  // the all-reduce answers ncclInProgress
  fake::g.enqueue_polls = 3;
  void* self = Connected(0, 2, {{"allreduce_after_init", "1"}});
  ASSERT_NE(self, nullptr);
  ASSERT_EQ(fake::g.allreduces.size(), 1u);
  EXPECT_EQ(fake::g.allreduces[0].count, 1u);
  EXPECT_EQ(fake::g.allreduces[0].type, ncclFloat32);
  EXPECT_EQ(fake::g.allreduces[0].op, ncclSum);
}

TEST_F(NcclFake, AllReduceThatNeverCompletesTimesOut) {
  fake::g.auto_complete = false;  // the peer never issues its all-reduce
  void* self = Create(0, 2, {{"allreduce_after_init", "1"}});
  EXPECT_EQ(tp_->connect(self, 100), WSYNC_ERR_TIMEOUT);
  EXPECT_NE(t_error.find("all-reduce after NCCL init"), std::string::npos) << t_error;
  EXPECT_EQ(fake::g.aborts, 1);
}

// ---- lazy init (transport.lazy_init=1) -----------------------------------------------------------

const char kLazyFailed[] =
    "transport nccl: rank 0: the NCCL communicator's init failed (lazy, world size 2, cuda:0): fake NCCL error (NCCL "
    "result 6); NCCL's last error: fake last error from NCCL; a rank never joined?";

TEST_F(NcclFake, LazyConnectReturnsAtOnce) {
  fake::g.init_polls = -1;  // nobody else joins before the first broadcast
  void* self = Create(0, 3, {{"lazy_init", "1"}});
  ASSERT_NE(self, nullptr);
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->connect(self, 10000), WSYNC_OK) << t_error;
  EXPECT_LT(MsSince(t0), 500);
  EXPECT_EQ(fake::g.inits, 1);
  EXPECT_EQ(fake::g.init_blocking, 0);
  EXPECT_EQ(fake::g.init_nranks, 3);
  EXPECT_EQ(fake::g.async_polls, 0);  // connect did not even look
  EXPECT_EQ(fake::g.streams_created, 1);
  EXPECT_TRUE(fake::g.allreduces.empty());
  EXPECT_EQ(tp_->connect(self, 1000), WSYNC_ERR_INVALID_STATE);  // twice
  Destroy(self);  // the init is still pending: aborted, never finalized
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_EQ(fake::g.finalizes, 0);
  EXPECT_EQ(fake::g.destroys, 0);
}

TEST_F(NcclFake, LazySendIsQueuedUntilTheInitCompletes) {
  fake::g.init_polls = -1;
  void* self = Connected(0, 2, {{"lazy_init", "1"}});
  ASSERT_NE(self, nullptr);
  void* d = Dev(128);
  wsync_buffer_t b1 = Buf(d, 64), b2 = Buf(static_cast<char*>(d) + 64, 64);
  const uint32_t r = 1;
  fake::g.calls.clear();
  fake::g.async_polls = 0;
  ASSERT_EQ(tp_->send_post(self, 1, &b1, &r, 1), WSYNC_OK) << t_error;
  EXPECT_EQ(fake::g.async_polls, 1);  // one look at the init, no waiting
  EXPECT_TRUE(fake::g.bcasts.empty()) << "a broadcast was issued before the init completed";
  ASSERT_EQ(tp_->send_post(self, 2, &b2, &r, 1), WSYNC_OK) << t_error;
  EXPECT_EQ(fake::g.async_polls, 2);
  EXPECT_TRUE(fake::g.bcasts.empty());
  EXPECT_EQ(fake::g.calls, (std::vector<std::string>{"record_caller", "record_caller"}));
  EXPECT_EQ(tp_->send_wait(self, 1, 0), WSYNC_ERR_TIMEOUT);
  EXPECT_EQ(t_error,
            "transport nccl: rank 0: bucket 1 (64 bytes) is queued: the NCCL communicator's init is still pending "
            "(transport.lazy_init=1; every rank of the world of 2 must join)");
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->send_wait(self, 2, 30), WSYNC_ERR_TIMEOUT);  // the core's ~20 ms slices
  EXPECT_GE(MsSince(t0), 29);
  EXPECT_TRUE(fake::g.bcasts.empty());
  EXPECT_EQ(fake::g.aborts, 0);

  fake::CompleteInit();
  EXPECT_EQ(tp_->send_wait(self, 2, 100), WSYNC_OK) << t_error;  // issues 1 then 2, in post order
  ASSERT_EQ(fake::g.bcasts.size(), 2u);
  EXPECT_EQ(fake::g.bcasts[0].recv, b1.data);
  EXPECT_EQ(fake::g.bcasts[0].count, 64u);
  EXPECT_EQ(fake::g.bcasts[0].root, 0);
  EXPECT_EQ(fake::g.bcasts[1].recv, b2.data);
  EXPECT_EQ(fake::g.calls, (std::vector<std::string>{"record_caller", "record_caller", "wait", "bcast", "record",
                                                     "wait", "bcast", "record"}));
  EXPECT_EQ(tp_->send_wait(self, 1, 100), WSYNC_OK) << t_error;
  Destroy(self);  // complete and idle: finalized politely
  EXPECT_EQ(fake::g.finalizes, 1);
  EXPECT_EQ(fake::g.destroys, 1);
  EXPECT_EQ(fake::g.aborts, 0);
}

TEST_F(NcclFake, LazyReceiverIssuesOnceTheInitAnswersSuccess) {
  fake::g.init_polls = 3;  // three looks answer ncclInProgress, the fourth ncclSuccess
  void* self = Connected(1, 2, {{"lazy_init", "1"}});
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(fake::g.async_polls, 0);
  std::vector<unsigned char> src(24);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 3 + 1);
  fake::g.bcast_source = src.data();
  void* d = Dev(24);
  wsync_iov_t iov[] = {{d, 24}};
  ASSERT_EQ(tp_->recv_post(self, 4, iov, 1), WSYNC_OK) << t_error;
  EXPECT_EQ(fake::g.async_polls, 1);
  EXPECT_EQ(tp_->recv_wait(self, 4, 0), WSYNC_ERR_TIMEOUT);
  EXPECT_EQ(fake::g.async_polls, 2);
  EXPECT_EQ(tp_->recv_wait(self, 4, 0), WSYNC_ERR_TIMEOUT);
  EXPECT_EQ(fake::g.async_polls, 3);
  EXPECT_TRUE(fake::g.bcasts.empty());
  EXPECT_EQ(tp_->recv_wait(self, 4, 0), WSYNC_OK) << t_error;  // 4th look: done; issued and complete
  ASSERT_EQ(fake::g.bcasts.size(), 1u);
  EXPECT_EQ(fake::g.bcasts[0].recv, d);
  EXPECT_EQ(fake::g.bcasts[0].count, 24u);
  EXPECT_EQ(std::memcmp(d, src.data(), 24), 0);
}

TEST_F(NcclFake, LazyInitFailureBreaksTheInstance) {
  fake::g.init_polls = -1;
  void* self = Connected(0, 2, {{"lazy_init", "1"}});
  ASSERT_NE(self, nullptr);
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 1, &b, &r, 1), WSYNC_OK) << t_error;
  fake::g.async_error = ncclRemoteError;
  EXPECT_EQ(tp_->send_wait(self, 1, 1000), WSYNC_ERR_IO);
  EXPECT_EQ(t_error, kLazyFailed);
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_TRUE(fake::g.bcasts.empty());
  EXPECT_EQ(tp_->send_post(self, 2, &b, &r, 1), WSYNC_ERR_IO);
  EXPECT_EQ(t_error, kLazyFailed);
  Destroy(self);
  EXPECT_EQ(fake::g.aborts, 1);  // not twice
}

TEST_F(NcclFake, LazyInitFailureSeenByAPost) {
  fake::g.init_polls = -1;
  void* self = Connected(0, 2, {{"lazy_init", "1"}});
  ASSERT_NE(self, nullptr);
  fake::g.async_error = ncclRemoteError;
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t r = 1;
  EXPECT_EQ(tp_->send_post(self, 1, &b, &r, 1), WSYNC_ERR_IO);
  EXPECT_EQ(t_error, kLazyFailed);
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_TRUE(fake::g.bcasts.empty());
}

TEST_F(NcclFake, LazyInitTimeoutOptionBreaksTheFirstWaitPastIt) {
  fake::g.init_polls = -1;
  void* self = Connected(0, 2, {{"lazy_init", "1"}, {"init_timeout_ms", "60"}});
  ASSERT_NE(self, nullptr);
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 1, &b, &r, 1), WSYNC_OK) << t_error;
  EXPECT_EQ(tp_->send_wait(self, 1, 0), WSYNC_ERR_TIMEOUT);  // before the deadline: only not yet
  EXPECT_NE(t_error.find("is queued: the NCCL communicator's init is still pending"), std::string::npos) << t_error;
  EXPECT_EQ(fake::g.aborts, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(tp_->send_wait(self, 1, 0), WSYNC_ERR_TIMEOUT);
  const std::string expect =
      "transport nccl: rank 0: lazy NCCL init: rank(s) never joined within 60 ms (transport.init_timeout_ms, counted "
      "from connect; world size 2, cuda:0)";
  EXPECT_EQ(t_error, expect);
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_TRUE(fake::g.bcasts.empty());
  EXPECT_EQ(tp_->send_post(self, 2, &b, &r, 1), WSYNC_ERR_TIMEOUT);  // broken: says why again
  EXPECT_EQ(t_error, expect);
  Destroy(self);
  EXPECT_EQ(fake::g.aborts, 1);

  // A long wait that spans the deadline ends at the deadline, not at its own timeout.
  void* again = Connected(0, 2, {{"lazy_init", "1"}, {"init_timeout_ms", "80"}});
  ASSERT_NE(again, nullptr);
  ASSERT_EQ(tp_->send_post(again, 1, &b, &r, 1), WSYNC_OK) << t_error;
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->send_wait(again, 1, 10000), WSYNC_ERR_TIMEOUT);
  const int64_t took = MsSince(t0);
  EXPECT_GE(took, 60);
  EXPECT_LT(took, 2000);
  EXPECT_NE(t_error.find("lazy NCCL init: rank(s) never joined within 80 ms"), std::string::npos) << t_error;
  EXPECT_EQ(fake::g.aborts, 2);
  EXPECT_TRUE(fake::g.bcasts.empty());
}

TEST_F(NcclFake, LazyWithoutInitTimeoutLeavesTheDeadlineToTheCore) {
  fake::g.init_polls = -1;
  void* self = Connected(0, 2, {{"lazy_init", "1"}});
  ASSERT_NE(self, nullptr);
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 1, &b, &r, 1), WSYNC_OK) << t_error;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tp_->send_wait(self, 1, 20), WSYNC_ERR_TIMEOUT);
  EXPECT_NE(t_error.find("is queued"), std::string::npos) << t_error;
  EXPECT_EQ(fake::g.aborts, 0);  // still usable
  fake::CompleteInit();
  EXPECT_EQ(tp_->send_wait(self, 1, 100), WSYNC_OK) << t_error;
  EXPECT_EQ(fake::g.bcasts.size(), 1u);
}

TEST_F(NcclFake, LazyAbortDuringThePendingInit) {
  fake::g.init_polls = -1;
  void* self = Connected(0, 2, {{"lazy_init", "1"}});
  ASSERT_NE(self, nullptr);
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 1, &b, &r, 1), WSYNC_OK) << t_error;
  std::thread th([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    tp_->abort(self);
  });
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->send_wait(self, 1, 10000), WSYNC_ERR_ABORTED);
  th.join();
  EXPECT_LT(MsSince(t0), 2000);
  EXPECT_EQ(t_error, "transport nccl: rank 0: aborted");
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_TRUE(fake::g.bcasts.empty());
  EXPECT_EQ(tp_->send_post(self, 2, &b, &r, 1), WSYNC_ERR_ABORTED);
  Destroy(self);
  EXPECT_EQ(fake::g.aborts, 1);
}

TEST_F(NcclFake, LazyForgetPeerDuringThePendingInit) {
  fake::g.init_polls = -1;
  void* self = Connected(1, 2, {{"lazy_init", "1"}});
  ASSERT_NE(self, nullptr);
  void* d = Dev(8);
  wsync_iov_t iov[] = {{d, 8}};
  ASSERT_EQ(tp_->recv_post(self, 1, iov, 1), WSYNC_OK) << t_error;
  tp_->forget_peer(self, 0);
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_EQ(tp_->recv_wait(self, 1, 100), WSYNC_ERR_PEER_FAILED);
  EXPECT_EQ(t_error,
            "transport nccl: rank 0 (the sender) was dropped; an NCCL group cannot continue without it (this rank 1, "
            "world size 2)");
  EXPECT_TRUE(fake::g.bcasts.empty());
}

TEST_F(NcclFake, LazyInitOptionValues) {
  const std::string conflict =
      "transport nccl: options 'transport.lazy_init=1' and 'transport.allreduce_after_init=1' cannot be combined: the "
      "all-reduce needs the communicator complete at connect (vLLM, which wants it, initialises eagerly)";
  EXPECT_EQ(Create(0, 2, {{"lazy_init", "1"}, {"allreduce_after_init", "1"}}, 0, WSYNC_ERR_INVALID_ARGUMENT), nullptr);
  EXPECT_EQ(t_error, conflict);
  EXPECT_EQ(Create(0, 2, {{"allreduce_after_init", "1"}, {"lazy_init", "1"}}, 0, WSYNC_ERR_INVALID_ARGUMENT), nullptr);
  EXPECT_EQ(t_error, conflict);
  EXPECT_EQ(Create(0, 2, {{"lazy_init", "yes"}}, 0, WSYNC_ERR_INVALID_ARGUMENT), nullptr);
  EXPECT_EQ(t_error, "transport nccl: option 'transport.lazy_init' is 'yes'; use 0 or 1");
  // lazy_init=0 is the eager default: connect waits for the init (and times out on it).
  fake::g.init_polls = -1;
  void* eager = Create(0, 2, {{"lazy_init", "0"}, {"allreduce_after_init", "1"}});
  ASSERT_NE(eager, nullptr);
  EXPECT_EQ(tp_->connect(eager, 50), WSYNC_ERR_TIMEOUT);
  EXPECT_NE(t_error.find("NCCL communicator (world size 2, this rank 0) was not complete after 50 ms"),
            std::string::npos)
      << t_error;
  EXPECT_EQ(fake::g.aborts, 1);
}

// ---- sending -------------------------------------------------------------------------------------

TEST_F(NcclFake, SendBroadcastsInPlaceFromRank0AfterTheCallersStream) {
  void* self = Connected(0, 3);
  void* d = Dev(64);
  wsync_buffer_t b = Buf(d, 64);
  const uint32_t ranks[] = {2, 1};
  fake::g.calls.clear();
  ASSERT_EQ(tp_->send_post(self, 7, &b, ranks, 2), WSYNC_OK) << t_error;
  ASSERT_EQ(fake::g.bcasts.size(), 1u);
  EXPECT_EQ(fake::g.bcasts[0].send, d);
  EXPECT_EQ(fake::g.bcasts[0].recv, d);
  EXPECT_EQ(fake::g.bcasts[0].count, 64u);
  EXPECT_EQ(fake::g.bcasts[0].type, ncclUint8);
  EXPECT_EQ(fake::g.bcasts[0].root, 0);
  EXPECT_EQ(fake::g.bcasts[0].stream, fake::g.transport_stream);
  EXPECT_EQ(fake::g.calls, (std::vector<std::string>{"record_caller", "wait", "bcast", "record"}));
  EXPECT_EQ(tp_->send_wait(self, 7, 100), WSYNC_OK) << t_error;
  EXPECT_EQ(tp_->send_wait(self, 7, 0), WSYNC_OK);  // nothing under 7 any more
}

TEST_F(NcclFake, SecondBucketWaitsWhileTheFirstIsStillEnqueuing) {
  void* self = Connected(0, 2);
  fake::g.in_progress_next = 1;
  fake::g.enqueue_polls = 4;
  void* d = Dev(128);
  wsync_buffer_t b1 = Buf(d, 64), b2 = Buf(static_cast<char*>(d) + 64, 64);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 1, &b1, &r, 1), WSYNC_OK) << t_error;
  ASSERT_EQ(tp_->send_post(self, 2, &b2, &r, 1), WSYNC_OK) << t_error;
  EXPECT_EQ(fake::g.bcasts.size(), 1u) << "bucket 2 was issued while bucket 1 was still enqueuing";
  EXPECT_EQ(tp_->send_wait(self, 2, 1000), WSYNC_OK) << t_error;  // finishes 1's enqueue, issues 2
  ASSERT_EQ(fake::g.bcasts.size(), 2u);
  EXPECT_EQ(fake::g.bcasts[0].recv, b1.data);
  EXPECT_EQ(fake::g.bcasts[1].recv, b2.data);
  EXPECT_EQ(tp_->send_wait(self, 1, 1000), WSYNC_OK) << t_error;
  EXPECT_EQ(fake::g.stream_waits, 2);
}

TEST_F(NcclFake, SendWaitIsResumable) {
  void* self = Connected(0, 2);
  fake::g.auto_complete = false;
  wsync_buffer_t b = Buf(Dev(32), 32);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 3, &b, &r, 1), WSYNC_OK);
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->send_wait(self, 3, 30), WSYNC_ERR_TIMEOUT);
  EXPECT_GE(MsSince(t0), 29);
  EXPECT_EQ(t_error,
            "transport nccl: rank 0: the broadcast of bucket 3 (32 bytes) is not complete yet (it needs every rank of "
            "the world of 2)");
  EXPECT_EQ(tp_->send_wait(self, 3, 0), WSYNC_ERR_TIMEOUT);
  fake::ReleaseKernels();
  EXPECT_EQ(tp_->send_wait(self, 3, 0), WSYNC_OK) << t_error;
}

TEST_F(NcclFake, SendRefusals) {
  void* self = Connected(0, 3);
  void* d = Dev(16);
  const uint32_t both[] = {1, 2}, one[] = {1}, far[] = {1, 5}, twice[] = {1, 1};
  std::vector<char> host(16);
  wsync_buffer_t hb = WSYNC_BUFFER_INIT;
  hb.data = host.data();
  hb.len = host.size();
  EXPECT_EQ(tp_->send_post(self, 1, &hb, both, 2), WSYNC_ERR_UNSUPPORTED);
  EXPECT_EQ(t_error, "transport nccl: bucket 1 is in host memory (device type 1); nccl moves device memory only");
  wsync_buffer_t lie = Buf(host.data(), host.size());
  EXPECT_EQ(tp_->send_post(self, 1, &lie, both, 2), WSYNC_ERR_UNSUPPORTED);
  EXPECT_NE(t_error.find("is not CUDA memory of cuda:0"), std::string::npos) << t_error;
  wsync_buffer_t b = Buf(d, 16);
  EXPECT_EQ(tp_->send_post(self, 1, &b, one, 1), WSYNC_ERR_UNSUPPORTED);
  EXPECT_EQ(t_error, "transport nccl: bucket 1: rank 2 was dropped; an NCCL group cannot continue without it");
  EXPECT_EQ(tp_->send_post(self, 1, &b, far, 2), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tp_->send_post(self, 1, &b, twice, 2), WSYNC_ERR_INVALID_ARGUMENT);
  wsync_buffer_t other = b;
  other.device_index = 1;
  EXPECT_EQ(tp_->send_post(self, 1, &other, both, 2), WSYNC_ERR_UNSUPPORTED);
  EXPECT_EQ(t_error, "transport nccl: bucket 1 is on cuda:1 but this transport works on cuda:0");
  wsync_iov_t iov = {d, 16};
  EXPECT_EQ(tp_->recv_post(self, 1, &iov, 1), WSYNC_ERR_INVALID_STATE);
  EXPECT_TRUE(fake::g.bcasts.empty());
  ASSERT_EQ(tp_->send_post(self, 1, &b, both, 2), WSYNC_OK) << t_error;
  EXPECT_EQ(tp_->send_post(self, 1, &b, both, 2), WSYNC_ERR_INVALID_STATE);  // posted twice
  EXPECT_EQ(tp_->send_wait(self, 1, 100), WSYNC_OK);
}

TEST_F(NcclFake, OldBufferStructHasNoStream) {
  void* self = Connected(0, 1);
  wsync_buffer_t b = Buf(Dev(8), 8);
  b.struct_size = offsetof(wsync_buffer_t, stream);  // a 1.0 core: the stream field is not there
  b.stream = reinterpret_cast<void*>(0xdead);        // must not be read
  ASSERT_EQ(tp_->send_post(self, 1, &b, nullptr, 0), WSYNC_OK) << t_error;
  EXPECT_EQ(tp_->send_wait(self, 1, 100), WSYNC_OK);
}

// ---- receiving -----------------------------------------------------------------------------------

TEST_F(NcclFake, ReceiveIntoOneRegionIsDirect) {
  void* self = Connected(1, 2);
  std::vector<unsigned char> src(40);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i + 1);
  fake::g.bcast_source = src.data();
  void* d = Dev(40);
  wsync_iov_t iov[] = {{nullptr, 0}, {d, 40}, {nullptr, 0}};
  ASSERT_EQ(tp_->recv_post(self, 5, iov, 3), WSYNC_OK) << t_error;
  ASSERT_EQ(fake::g.bcasts.size(), 1u);
  EXPECT_EQ(fake::g.bcasts[0].recv, d);
  EXPECT_EQ(fake::g.bcasts[0].count, 40u);
  EXPECT_TRUE(fake::g.copies.empty());
  EXPECT_EQ(tp_->recv_wait(self, 5, 100), WSYNC_OK) << t_error;
  EXPECT_EQ(std::memcmp(d, src.data(), 40), 0);
}

TEST_F(NcclFake, ReceiveIntoSeveralRegionsGoesThroughScratch) {
  void* self = Connected(1, 3);
  std::vector<unsigned char> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 13 + 5);
  fake::g.bcast_source = src.data();
  char* a = static_cast<char*>(Dev(10));
  char* b = static_cast<char*>(Dev(20));
  char* c = static_cast<char*>(Dev(5));
  wsync_iov_t iov[] = {{a, 10}, {nullptr, 0}, {b, 20}, {c, 5}};
  ASSERT_EQ(tp_->recv_post(self, 1, iov, 4), WSYNC_OK) << t_error;
  ASSERT_EQ(fake::g.bcasts.size(), 1u);
  EXPECT_EQ(fake::g.bcasts[0].count, 35u);
  void* scratch = fake::g.bcasts[0].recv;
  EXPECT_TRUE(scratch != a && scratch != b && scratch != c);
  ASSERT_EQ(fake::g.copies.size(), 3u);
  EXPECT_EQ(fake::g.copies[0].dst, a);
  EXPECT_EQ(fake::g.copies[0].src, scratch);
  EXPECT_EQ(fake::g.copies[0].len, 10u);
  EXPECT_EQ(fake::g.copies[1].dst, b);
  EXPECT_EQ(fake::g.copies[1].src, static_cast<char*>(scratch) + 10);
  EXPECT_EQ(fake::g.copies[2].dst, c);
  EXPECT_EQ(fake::g.copies[2].src, static_cast<char*>(scratch) + 30);
  EXPECT_EQ(tp_->recv_wait(self, 1, 100), WSYNC_OK) << t_error;
  EXPECT_EQ(std::memcmp(a, src.data(), 10), 0);
  EXPECT_EQ(std::memcmp(b, src.data() + 10, 20), 0);
  EXPECT_EQ(std::memcmp(c, src.data() + 30, 5), 0);

  // A smaller bucket reuses the scratch; a bigger one grows it (old freed in stream order).
  wsync_iov_t small[] = {{a, 4}, {b, 4}};
  ASSERT_EQ(tp_->recv_post(self, 2, small, 2), WSYNC_OK);
  EXPECT_EQ(fake::g.bcasts[1].recv, scratch);
  char* big1 = static_cast<char*>(Dev(500));
  char* big2 = static_cast<char*>(Dev(500));
  wsync_iov_t big[] = {{big1, 500}, {big2, 500}};
  ASSERT_EQ(tp_->recv_post(self, 3, big, 2), WSYNC_OK);
  ASSERT_EQ(fake::g.bcasts.size(), 3u);
  EXPECT_EQ(fake::g.bcasts[2].count, 1000u);
  EXPECT_EQ(tp_->recv_wait(self, 3, 100), WSYNC_OK);
  EXPECT_EQ(tp_->recv_wait(self, 2, 100), WSYNC_OK);
  EXPECT_EQ(std::memcmp(big2, src.data() + 500, 500), 0);
}

TEST_F(NcclFake, ReceiveRefusesHostMemory) {
  void* self = Connected(1, 2);
  std::vector<char> host(8);
  wsync_iov_t iov[] = {{host.data(), 8}};
  EXPECT_EQ(tp_->recv_post(self, 1, iov, 1), WSYNC_ERR_UNSUPPORTED);
  EXPECT_NE(t_error.find("nccl receives into device memory only"), std::string::npos) << t_error;
  fake::g.ptr_device = 3;  // device memory, but of another GPU
  void* d = Dev(8);
  wsync_iov_t other[] = {{d, 8}};
  EXPECT_EQ(tp_->recv_post(self, 1, other, 1), WSYNC_ERR_UNSUPPORTED);
  EXPECT_TRUE(fake::g.bcasts.empty());
}

// ---- failures ------------------------------------------------------------------------------------

TEST_F(NcclFake, AsyncErrorFailsTheWaitAndBreaksTheInstance) {
  void* self = Connected(0, 2);
  fake::g.auto_complete = false;
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 1, &b, &r, 1), WSYNC_OK);
  fake::g.async_error = ncclRemoteError;
  EXPECT_EQ(tp_->send_wait(self, 1, 1000), WSYNC_ERR_IO);
  EXPECT_NE(t_error.find("NCCL reported an error while bucket 1 was in flight"), std::string::npos) << t_error;
  EXPECT_NE(t_error.find("fake NCCL error"), std::string::npos) << t_error;
  EXPECT_NE(t_error.find("fake last error from NCCL"), std::string::npos) << t_error;
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_EQ(tp_->send_post(self, 2, &b, &r, 1), WSYNC_ERR_IO);
}

TEST_F(NcclFake, ForgetPeerAbortsAndLaterPostsNameTheRank) {
  void* self = Connected(0, 3);
  fake::g.auto_complete = false;
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t both[] = {1, 2};
  ASSERT_EQ(tp_->send_post(self, 1, &b, both, 2), WSYNC_OK);
  tp_->forget_peer(self, 2);
  EXPECT_EQ(fake::g.aborts, 1);
  tp_->forget_peer(self, 1);  // already broken: nothing more
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_EQ(tp_->send_wait(self, 1, 100), WSYNC_ERR_PEER_FAILED);
  EXPECT_EQ(t_error,
            "transport nccl: rank 2 was dropped; an NCCL group cannot continue without it (this rank 0, world size 3)");
  EXPECT_EQ(tp_->send_post(self, 2, &b, both, 2), WSYNC_ERR_PEER_FAILED);
}

TEST_F(NcclFake, ReceiverForgetsItsSender) {
  void* self = Connected(1, 2);
  tp_->forget_peer(self, 0);
  EXPECT_EQ(fake::g.aborts, 1);
  void* d = Dev(8);
  wsync_iov_t iov[] = {{d, 8}};
  EXPECT_EQ(tp_->recv_post(self, 1, iov, 1), WSYNC_ERR_PEER_FAILED);
  EXPECT_EQ(t_error,
            "transport nccl: rank 0 (the sender) was dropped; an NCCL group cannot continue without it (this rank 1, "
            "world size 2)");
}

TEST_F(NcclFake, AbortDuringAWait) {
  void* self = Connected(0, 2);
  fake::g.auto_complete = false;
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 1, &b, &r, 1), WSYNC_OK);
  std::thread th([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    tp_->abort(self);
  });
  auto t0 = Clock::now();
  EXPECT_EQ(tp_->send_wait(self, 1, 10000), WSYNC_ERR_ABORTED);
  th.join();
  EXPECT_LT(MsSince(t0), 2000);
  EXPECT_EQ(fake::g.aborts, 1);
}

// ---- teardown and the current device -------------------------------------------------------------

TEST_F(NcclFake, DestroyIdleFinalizesThenDestroys) {
  fake::g.finalize_polls = 3;
  void* self = Connected(0, 2);
  wsync_buffer_t b = Buf(Dev(8), 8);
  const uint32_t r = 1;
  ASSERT_EQ(tp_->send_post(self, 1, &b, &r, 1), WSYNC_OK);
  ASSERT_EQ(tp_->send_wait(self, 1, 100), WSYNC_OK);
  Destroy(self);
  EXPECT_EQ(fake::g.finalizes, 1);
  EXPECT_EQ(fake::g.destroys, 1);
  EXPECT_EQ(fake::g.aborts, 0);
}

TEST_F(NcclFake, DestroyWithWorkInFlightAborts) {
  void* self = Connected(1, 2);
  fake::g.auto_complete = false;
  void* a = Dev(8);
  void* b = Dev(8);
  wsync_iov_t iov[] = {{a, 8}, {b, 8}};
  ASSERT_EQ(tp_->recv_post(self, 1, iov, 2), WSYNC_OK);
  Destroy(self);
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_EQ(fake::g.finalizes, 0);
}

TEST_F(NcclFake, FinalizeThatNeverEndsFallsBackToAbort) {
  fake::g.finalize_polls = -1;
  void* self = Connected(0, 2);
  auto t0 = Clock::now();
  Destroy(self);
  EXPECT_GE(MsSince(t0), 4900);  // the bounded finalize budget
  EXPECT_EQ(fake::g.finalizes, 1);
  EXPECT_EQ(fake::g.aborts, 1);
  EXPECT_EQ(fake::g.destroys, 0);
}

TEST_F(NcclFake, TheCallersCurrentDeviceIsKept) {
  fake::g.device_count = 4;
  fake::g.current_device = 3;
  fake::g.ptr_device = 1;
  HostSet(kStore, "wsync/g/nccl/unique_id", Id().data(), NCCL_UNIQUE_ID_BYTES);
  void* self = Create(1, 2, {}, 1);
  ASSERT_NE(self, nullptr);
  ASSERT_EQ(tp_->connect(self, 1000), WSYNC_OK) << t_error;
  EXPECT_EQ(fake::g.current_device, 3);
  ASSERT_FALSE(fake::g.set_device_calls.empty());
  EXPECT_EQ(fake::g.set_device_calls.front(), 1);
  EXPECT_EQ(fake::g.set_device_calls.back(), 3);
  void* d = Dev(8);
  wsync_iov_t iov[] = {{d, 8}};
  ASSERT_EQ(tp_->recv_post(self, 1, iov, 1), WSYNC_OK) << t_error;
  EXPECT_EQ(fake::g.current_device, 3);
  Destroy(self);
  EXPECT_EQ(fake::g.current_device, 3);
}

}  // namespace
