// Transport 'cuda_ipc' driven through its function table against a fake CUDA runtime
// (fake_cuda_ipc.h), without a GPU: sender and receivers are instances in this one process (connect
// runs them on different threads), and each bucket goes through the plugin ABI 1.2 side channel in
// the order the core uses:
//
//   sender describe_send -> [MANIFEST + bucket record] -> receiver peer_blob -> recv_post ->
//   describe_recv(READY) -> sender send_post -> receiver recv_wait -> describe_recv(ACK) ->
//   [ACK + done record] -> sender peer_blob -> send_wait
//
// Covered: bytes through alternating staging slots into scattered regions (one and two receivers),
// the GPU-side ordering of the receiver's copies after the sender's event, slot reuse only after
// every done record, validation of both records, abort, forget_peer, a failed copy, finding the
// sender's GPU by UUID, the entry's host-table checks, and that no bucket touches the store. The
// real GPU is tested by test_cuda_ipc_gpu.cpp (label gpu).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cipc_logic.h"
#include "fake_cuda_ipc.h"
#include "wsync_plugin.h"

extern "C" const wsync_transport_v1_t* wsync_transport_entry_v1(const wsync_host_v1_t* host);

namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// ---- host table with an in-memory store ----------------------------------------------------------

std::mutex g_mu;
std::condition_variable g_cv;
std::map<std::string, std::string> g_store;
int g_sets = 0, g_gets = 0;  // store traffic, to show that buckets cause none
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
  g_sets++;
  g_store[key] = std::string(static_cast<const char*>(v), len);
  g_cv.notify_all();
  return WSYNC_OK;
}
wsync_status_t HostGet(wsync_store_t*, const char* key, void* buf, uint64_t cap, uint64_t* len, int64_t timeout_ms) {
  std::unique_lock<std::mutex> l(g_mu);
  g_gets++;
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

// ---- bytes ---------------------------------------------------------------------------------------

// FNV-1a 64: enough to tell two byte strings apart in a failure message.
uint64_t Sum(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
uint64_t Sum(const Bytes& b) { return Sum(b.data(), b.size()); }

Bytes Pattern(uint64_t seed, size_t n) {
  Bytes v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + n;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

// Record fields (little-endian; layouts in cipc_logic.h).
uint32_t Get32(const Bytes& b, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b[off + static_cast<size_t>(i)];
  return v;
}
uint64_t Get64(const Bytes& b, size_t off) {
  return static_cast<uint64_t>(Get32(b, off)) | (static_cast<uint64_t>(Get32(b, off + 4)) << 32);
}
void Put32(Bytes* b, size_t off, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) (*b)[off + i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(Bytes* b, size_t off, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) (*b)[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A receiver's destination: a device region, an empty one, a host region and another device
// region, so every bucket is scattered (the core's iov may hold empty regions too).
struct Dest {
  std::vector<wsync_iov_t> iov;
  Bytes Gather() const {
    Bytes out;
    for (const auto& r : iov)
      if (r.len > 0) out.insert(out.end(), static_cast<uint8_t*>(r.base), static_cast<uint8_t*>(r.base) + r.len);
    return out;
  }
};

class CudaIpcFake : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::Reset();
    {
      std::lock_guard<std::mutex> l(g_mu);
      g_store.clear();
      g_sets = g_gets = 0;
    }
    tp_ = wsync_transport_entry_v1(&kHost);
    ASSERT_NE(tp_, nullptr) << t_error;
  }

  void TearDown() override {
    fake::ReleaseAll();  // work the test held back runs before the mappings it reads are closed
    for (auto it = live_.rbegin(); it != live_.rend(); ++it) tp_->destroy(*it);  // receivers before the sender
    live_.clear();
    EXPECT_EQ(fake::g.violations, 0) << (fake::g.violation_what.empty() ? "" : fake::g.violation_what[0]);
    EXPECT_EQ(fake::g.events_created, fake::g.events_destroyed) << "events leaked";
    EXPECT_EQ(fake::g.ipc_events_opened, fake::g.ipc_events_destroyed) << "opened IPC events leaked";
    EXPECT_EQ(fake::g.streams_created, fake::g.streams_destroyed) << "streams leaked";
    EXPECT_EQ(fake::g.mappings_opened, fake::g.mappings_closed) << "IPC mappings left open";
    EXPECT_EQ(fake::PendingOnPluginStreams(), 0u) << "copies left queued";
    for (void* p : bufs_) fake::DevFree(p);
  }

  void* Create(uint32_t rank, uint32_t world, int32_t device = 0, wsync_status_t expect = WSYNC_OK) {
    wsync_transport_params_t p = WSYNC_TRANSPORT_PARAMS_INIT;
    p.rank = rank;
    p.world_size = world;
    p.group_name = "g";
    p.store = kStore;
    p.timeout_ms = 2000;
    p.device_index = device;
    void* self = nullptr;
    EXPECT_EQ(tp_->create(&p, &self), expect) << t_error;
    if (self != nullptr) live_.push_back(self);
    return self;
  }

  uint8_t* Dev(size_t n) {
    void* p = fake::DevAlloc(n);
    bufs_.push_back(p);
    return static_cast<uint8_t*>(p);
  }

  static wsync_buffer_t Buf(const void* data, uint64_t len, cudaStream_t stream, int32_t device = 0) {
    wsync_buffer_t b = WSYNC_BUFFER_INIT;
    b.device_type = WSYNC_DEVICE_CUDA;
    b.device_index = device;
    b.data = data;
    b.len = len;
    b.stream = stream;
    return b;
  }

  // A sender (rank 0, staging of num_slots slots on `device`) and `receivers` receivers, connected
  // the way the core does it: the sender's connect on a thread of its own (it waits for every
  // receiver's ready key), the receivers' here. one_allocation: all slots in one cudaMalloc.
  void ConnectGroup(uint32_t receivers, uint32_t num_slots, uint64_t slot_bytes, bool one_allocation = false,
                    int32_t device = 0) {
    tx_ = Create(0, receivers + 1, device);
    ASSERT_NE(tx_, nullptr);
    std::vector<wsync_buffer_t> staging;
    uint8_t* block = one_allocation ? Dev(128 + num_slots * slot_bytes + 64) : nullptr;
    for (uint32_t i = 0; i < num_slots; ++i) {
      slots_.push_back(one_allocation ? block + 128 + i * slot_bytes : Dev(slot_bytes));
      staging.push_back(Buf(slots_.back(), slot_bytes, nullptr, device));
    }
    ASSERT_EQ(tp_->register_staging(tx_, staging.data(), num_slots), WSYNC_OK) << t_error;
    for (uint32_t r = 1; r <= receivers; ++r) {
      rx_.push_back(Create(r, receivers + 1));
      ASSERT_NE(rx_.back(), nullptr);
      ranks_.push_back(r);
    }
    wsync_status_t tx_rc = WSYNC_ERR_INTERNAL;
    std::string tx_err;
    std::thread sender([&] {
      tx_rc = tp_->connect(tx_, 5000);
      tx_err = t_error;
    });
    for (void* rx : rx_) EXPECT_EQ(tp_->connect(rx, 5000), WSYNC_OK) << t_error;
    sender.join();
    ASSERT_EQ(tx_rc, WSYNC_OK) << tx_err;
    caller_ = fake::NewStream();
  }

  Dest MakeDest(uint64_t len) {
    const uint64_t a = len / 3, b = len / 4, c = len - a - b;
    host_.emplace_back(b + 1, 0);  // deque: earlier regions stay where they are
    Dest d;
    d.iov = {{Dev(a), a}, {nullptr, 0}, {host_.back().data(), b}, {Dev(c), c}};
    return d;
  }

  // What describe_send writes for a bucket (empty when it fails).
  Bytes Describe(uint64_t seq, const wsync_buffer_t& b, wsync_status_t expect = WSYNC_OK) {
    Bytes blob(WSYNC_BLOB_MAX_BYTES);
    uint64_t len = 0;
    t_error.clear();
    EXPECT_EQ(tp_->describe_send(tx_, seq, &b, blob.data(), blob.size(), &len), expect) << t_error;
    blob.resize(expect == WSYNC_OK ? len : 0);
    return blob;
  }

  wsync_status_t Manifest(void* rx, uint64_t seq, const Bytes& record) {
    t_error.clear();
    return tp_->peer_blob(rx, seq, 0, WSYNC_BLOB_MANIFEST, record.data(), record.size());
  }

  wsync_status_t Post(void* rx, uint64_t seq, const Dest& d) {
    t_error.clear();
    return tp_->recv_post(rx, seq, d.iov.data(), d.iov.size());
  }

  // The receiver's READY carries nothing.
  void ExpectEmptyReady(void* rx, uint64_t seq) {
    Bytes blob(WSYNC_BLOB_MAX_BYTES);
    uint64_t len = 99;
    EXPECT_EQ(tp_->describe_recv(rx, seq, WSYNC_BLOB_READY, blob.data(), blob.size(), &len), WSYNC_OK) << t_error;
    EXPECT_EQ(len, 0u);
  }

  // recv_wait in the core's short slices until it is no longer TIMEOUT (or 2 s passed).
  wsync_status_t WaitRecv(void* rx, uint64_t seq) {
    const auto t0 = Clock::now();
    for (;;) {
      t_error.clear();
      const wsync_status_t rc = tp_->recv_wait(rx, seq, 20);
      if (rc != WSYNC_ERR_TIMEOUT || MsSince(t0) > 2000) return rc;
    }
  }

  // The done record a receiver's ACK carries.
  Bytes Ack(void* rx, uint64_t seq) {
    Bytes blob(WSYNC_BLOB_MAX_BYTES);
    uint64_t len = 0;
    EXPECT_EQ(tp_->describe_recv(rx, seq, WSYNC_BLOB_ACK, blob.data(), blob.size(), &len), WSYNC_OK) << t_error;
    blob.resize(len);
    return blob;
  }

  wsync_status_t Done(uint64_t seq, uint32_t rank, const Bytes& record, int32_t kind = WSYNC_BLOB_ACK) {
    t_error.clear();
    return tp_->peer_blob(tx_, seq, rank, kind, record.data(), record.size());
  }

  wsync_status_t SendWait(uint64_t seq) {
    t_error.clear();
    return tp_->send_wait(tx_, seq, 0);
  }

  // Bucket `seq` (`bytes` at `offset` of slot `slot`) to every receiver, in the core's order;
  // checks that each receiver got the bytes and that the slot is free afterwards.
  void MoveBucket(uint64_t seq, uint32_t slot, uint64_t offset, const Bytes& bytes) {
    fake::Write(caller_, slots_[slot] + offset, bytes);
    const wsync_buffer_t b = Buf(slots_[slot] + offset, bytes.size(), caller_);
    const Bytes record = Describe(seq, b);
    ASSERT_EQ(record.size(), CIPC_BUCKET_BYTES);
    std::vector<Dest> dest;
    for (void* rx : rx_) {
      ASSERT_EQ(Manifest(rx, seq, record), WSYNC_OK) << t_error;
      dest.push_back(MakeDest(bytes.size()));
      ASSERT_EQ(Post(rx, seq, dest.back()), WSYNC_OK) << t_error;
      ExpectEmptyReady(rx, seq);
    }
    ASSERT_EQ(tp_->send_post(tx_, seq, &b, ranks_.data(), static_cast<uint32_t>(ranks_.size())), WSYNC_OK) << t_error;
    for (size_t i = 0; i < rx_.size(); ++i) {
      ASSERT_EQ(WaitRecv(rx_[i], seq), WSYNC_OK) << t_error;
      EXPECT_EQ(Sum(dest[i].Gather()), Sum(bytes)) << "bucket " << seq << " at rank " << ranks_[i];
      ASSERT_EQ(Done(seq, ranks_[i], Ack(rx_[i], seq)), WSYNC_OK) << t_error;
    }
    EXPECT_EQ(SendWait(seq), WSYNC_OK) << t_error;
  }

  // Like MoveBucket up to the receivers' ACKs, whose done records go to *acks instead of the sender.
  // The core's stream is held until every receiver posted and the sender called send_post: the
  // receivers' copies must wait for the sender's event on the GPU, not run at recv_post.
  void HeldBucket(uint64_t seq, uint32_t slot, uint64_t offset, const Bytes& bytes, std::vector<Bytes>* acks) {
    const uint64_t len = bytes.size();
    fake::Hold(caller_);
    fake::Write(caller_, slots_[slot] + offset, bytes);
    const wsync_buffer_t b = Buf(slots_[slot] + offset, len, caller_);
    const Bytes record = Describe(seq, b);
    ASSERT_EQ(record.size(), CIPC_BUCKET_BYTES);
    EXPECT_EQ(Get64(record, 16), seq);
    EXPECT_EQ(Get32(record, 24), slot);
    EXPECT_EQ(Get64(record, 32), offset);
    EXPECT_EQ(Get64(record, 40), len);
    std::vector<Dest> dest;
    for (void* rx : rx_) {
      ASSERT_EQ(Manifest(rx, seq, record), WSYNC_OK) << t_error;
      dest.push_back(MakeDest(len));
      ASSERT_EQ(Post(rx, seq, dest.back()), WSYNC_OK) << t_error;
      ExpectEmptyReady(rx, seq);
    }
    ASSERT_EQ(tp_->send_post(tx_, seq, &b, ranks_.data(), static_cast<uint32_t>(ranks_.size())), WSYNC_OK) << t_error;
    const int copied_before = fake::g.copies_done;
    for (size_t i = 0; i < rx_.size(); ++i) {
      EXPECT_EQ(tp_->recv_wait(rx_[i], seq, 0), WSYNC_ERR_TIMEOUT);
      EXPECT_EQ(Sum(dest[i].Gather()), Sum(Bytes(len, 0)))
          << "rank " << ranks_[i] << " copied bucket " << seq << " before the sender's bytes were final";
    }
    EXPECT_EQ(fake::g.copies_done, copied_before);
    fake::Release(caller_);
    for (size_t i = 0; i < rx_.size(); ++i) {
      ASSERT_EQ(WaitRecv(rx_[i], seq), WSYNC_OK) << t_error;
      EXPECT_EQ(Sum(dest[i].Gather()), Sum(bytes)) << "bucket " << seq << " at rank " << ranks_[i];
      acks->push_back(Ack(rx_[i], seq));
      EXPECT_EQ(acks->back().size(), CIPC_DONE_BYTES);
    }
  }

  // (a) Buckets 1..3 through two slots into every receiver: 1 and 2 fill both slots, 3 reuses slot
  // 0, which describe_send refuses (without recording the slot's event again, a receiver may still
  // copy out of it) until every receiver's done record for bucket 1 came back.
  void ThreeBuckets() {
    const uint64_t kOffset[4] = {0, 1024, 4096, 64};
    std::vector<Bytes> acks[4];
    for (uint64_t seq = 1; seq <= 2; ++seq)
      ASSERT_NO_FATAL_FAILURE(HeldBucket(seq, static_cast<uint32_t>(seq - 1), kOffset[seq],
                                         Pattern(seq, 5000 + 777 * seq), &acks[seq]));
    EXPECT_EQ(SendWait(1), WSYNC_ERR_TIMEOUT);
    EXPECT_TRUE(Has(t_error, "bucket 1 (staging slot 0) has not been copied by rank 1 yet")) << t_error;
    EXPECT_EQ(SendWait(2), WSYNC_ERR_TIMEOUT);
    const Bytes third = Pattern(3, 7000);
    const wsync_buffer_t b3 = Buf(slots_[0] + kOffset[3], third.size(), caller_);
    const int records = fake::g.records;
    Describe(3, b3, WSYNC_ERR_INVALID_STATE);
    EXPECT_TRUE(Has(t_error, "staging slot 0 still holds bucket 1, which rank 1 has not copied yet")) << t_error;
    for (size_t i = 0; i < rx_.size(); ++i) {
      ASSERT_EQ(Done(1, ranks_[i], acks[1][i]), WSYNC_OK) << t_error;
      if (i + 1 == rx_.size()) break;
      const std::string next = "rank " + std::to_string(ranks_[i + 1]);
      Describe(3, b3, WSYNC_ERR_INVALID_STATE);
      EXPECT_TRUE(Has(t_error, "which " + next + " has not copied yet")) << t_error;
      EXPECT_EQ(SendWait(1), WSYNC_ERR_TIMEOUT);
      EXPECT_TRUE(Has(t_error, "not been copied by " + next)) << t_error;
    }
    EXPECT_EQ(fake::g.records, records) << "a refused describe_send recorded the slot's event";
    EXPECT_EQ(SendWait(1), WSYNC_OK) << t_error;
    EXPECT_EQ(SendWait(2), WSYNC_ERR_TIMEOUT) << "slot 1 was freed by bucket 1's done records";
    ASSERT_NO_FATAL_FAILURE(HeldBucket(3, 0, kOffset[3], third, &acks[3]));
    for (uint64_t seq = 2; seq <= 3; ++seq) {
      for (size_t i = 0; i < rx_.size(); ++i) ASSERT_EQ(Done(seq, ranks_[i], acks[seq][i]), WSYNC_OK) << t_error;
      EXPECT_EQ(SendWait(seq), WSYNC_OK) << t_error;
    }
  }

  const wsync_transport_v1_t* tp_ = nullptr;
  std::vector<void*> live_;
  std::vector<void*> bufs_;
  std::deque<Bytes> host_;
  void* tx_ = nullptr;
  std::vector<void*> rx_;
  std::vector<uint32_t> ranks_;
  std::vector<uint8_t*> slots_;
  cudaStream_t caller_ = nullptr;  // the core's copy stream: where the bucket's bytes become final
};

// ---- (a) bytes through alternating slots ---------------------------------------------------------

TEST_F(CudaIpcFake, ThreeBucketsTwoSlotsOneReceiver) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(1, 2, 64 << 10));
  ThreeBuckets();
  EXPECT_EQ(fake::g.mappings_opened, 2);  // one per slot allocation
  EXPECT_EQ(fake::g.stream_waits, 3);     // one GPU-side wait per bucket
}

TEST_F(CudaIpcFake, ThreeBucketsTwoSlotsTwoReceivers) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(2, 2, 64 << 10));
  ThreeBuckets();
  EXPECT_EQ(fake::g.mappings_opened, 4);
}

// Slots carved out of one cudaMalloc (the driver's cuMemGetAddressRange available): the allocation
// is exported and mapped once, and each slot is found at its offset in it.
TEST_F(CudaIpcFake, SlotsInOneAllocation) {
  fake::g.provide_range = true;
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(2, 3, 8192, true));
  EXPECT_EQ(fake::g.mem_handles, 1);
  EXPECT_EQ(fake::g.mappings_opened, 2);  // once per receiver
  for (uint64_t seq = 1; seq <= 4; ++seq)
    ASSERT_NO_FATAL_FAILURE(MoveBucket(seq, static_cast<uint32_t>((seq - 1) % 3), 8 * seq, Pattern(seq, 8000)));
}

// The sender's GPU is another ordinal in the receiver's process: the receiver finds it by UUID
// and copies there; a receiver that does not see that GPU says which one it looked for.
TEST_F(CudaIpcFake, ReceiverFindsTheSendersGpuByUuid) {
  fake::g.device_count = 3;
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(1, 1, 4096, false, 2));
  fake::g.copies.clear();
  ASSERT_NO_FATAL_FAILURE(MoveBucket(1, 0, 0, Pattern(1, 3000)));
  ASSERT_FALSE(fake::g.copies.empty());
  for (const auto& c : fake::g.copies) EXPECT_EQ(c.device, 2);
}

TEST_F(CudaIpcFake, ReceiverWithoutTheSendersGpu) {
  fake::g.device_count = 2;
  tx_ = Create(0, 2, 1);
  uint8_t* slot = Dev(4096);
  const wsync_buffer_t staging = Buf(slot, 4096, nullptr, 1);
  ASSERT_EQ(tp_->register_staging(tx_, &staging, 1), WSYNC_OK) << t_error;
  void* rx = Create(1, 2);
  wsync_status_t tx_rc = WSYNC_OK;
  std::string tx_err;
  std::thread sender([&] {
    tx_rc = tp_->connect(tx_, 300);
    tx_err = t_error;
  });
  {  // wait for the staging record, then take the sender's GPU away from this "process"
    std::unique_lock<std::mutex> l(g_mu);
    g_cv.wait_for(l, std::chrono::seconds(2), [] { return g_store.count("wsync/g/cuda_ipc/staging") > 0; });
  }
  {
    std::lock_guard<std::mutex> l(fake::Mutex());
    fake::g.uuids[1][0] ^= 0xff;
  }
  EXPECT_EQ(tp_->connect(rx, 2000), WSYNC_ERR_NO_DEVICE);
  EXPECT_TRUE(Has(t_error, "the sender's staging is on GPU-22232425-2627-2829-2a2b-2c2d2e2f3031, which this process "
                           "does not see")) << t_error;
  sender.join();
  EXPECT_EQ(tx_rc, WSYNC_ERR_TIMEOUT);
  EXPECT_TRUE(Has(tx_err, "rank 1 did not map the CUDA IPC staging within 300 ms")) << tx_err;
  EXPECT_EQ(fake::g.mappings_opened, 0);
}

TEST_F(CudaIpcFake, ConnectTimeoutNamesTheMissingRank) {
  tx_ = Create(0, 3);
  uint8_t* slot = Dev(4096);
  const wsync_buffer_t staging = Buf(slot, 4096, nullptr);
  ASSERT_EQ(tp_->register_staging(tx_, &staging, 1), WSYNC_OK) << t_error;
  void* rx = Create(1, 3);
  wsync_status_t tx_rc = WSYNC_OK;
  std::string tx_err;
  const auto t0 = Clock::now();
  std::thread sender([&] {
    tx_rc = tp_->connect(tx_, 250);
    tx_err = t_error;
  });
  EXPECT_EQ(tp_->connect(rx, 2000), WSYNC_OK) << t_error;
  sender.join();
  EXPECT_GE(MsSince(t0), 249);
  EXPECT_EQ(tx_rc, WSYNC_ERR_TIMEOUT);
  EXPECT_TRUE(Has(tx_err, "rank 2 did not map the CUDA IPC staging within 250 ms")) << tx_err;
}

// ---- (b) the bucket record is checked -------------------------------------------------------------

TEST_F(CudaIpcFake, BucketRecordIsValidated) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(1, 2, 4096));
  void* rx = rx_[0];
  const Bytes bytes = Pattern(7, 1000);
  fake::Write(caller_, slots_[1] + 100, bytes);
  const wsync_buffer_t b = Buf(slots_[1] + 100, bytes.size(), caller_);
  const Bytes good = Describe(1, b);
  ASSERT_EQ(good.size(), CIPC_BUCKET_BYTES);
  const Dest dest = MakeDest(bytes.size());
  auto refused = [&](uint64_t seq, const Bytes& record, const std::string& why) {
    EXPECT_EQ(Manifest(rx, seq, record), WSYNC_ERR_PROTOCOL) << why;
    EXPECT_TRUE(Has(t_error, "rank 1: the sender's record of bucket " + std::to_string(seq))) << t_error;
    EXPECT_TRUE(Has(t_error, why)) << t_error;
    // Nothing of it was kept: the receive still has no record to go by.
    EXPECT_EQ(Post(rx, seq, dest), WSYNC_ERR_PROTOCOL) << why;
  };
  Bytes r = good;
  r[8] ^= 1;
  refused(1, r, "session");
  refused(2, good, "the record describes bucket 1, but it came with bucket 2");
  r = good;
  Put32(&r, 24, 2);
  refused(1, r, "bucket 1 names slot 2 of 2");
  r = good;
  Put64(&r, 32, 4000);
  refused(1, r, "1000 bytes at offset 4000 run past the 4096-byte slot 1");
  r = good;
  Put64(&r, 40, 4096 - 100 + 1);
  refused(1, r, "3997 bytes at offset 100 run past the 4096-byte slot 1");
  r = good;
  Put64(&r, 32, UINT64_MAX - 10);  // offset + len wraps around
  refused(1, r, "run past the 4096-byte slot 1");
  r = good;
  r.resize(CIPC_BUCKET_BYTES - 1);
  refused(1, r, "a bucket record of 47 bytes, expected 48");
  r = good;
  r.push_back(0);
  refused(1, r, "a bucket record of 49 bytes, expected 48");
  r = good;
  r[0] ^= 0xff;
  refused(1, r, "not a version 1 cuda_ipc bucket record");
  r = good;
  Put32(&r, 4, 2);  // a newer wire version
  refused(1, r, "not a version 1 cuda_ipc bucket record");
  refused(1, Bytes(), "a bucket record of 0 bytes");
  // Only the sender's MANIFEST carries a bucket record.
  EXPECT_EQ(tp_->peer_blob(rx, 1, 2, WSYNC_BLOB_MANIFEST, good.data(), good.size()), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(tp_->peer_blob(rx, 1, 0, WSYNC_BLOB_READY, good.data(), good.size()), WSYNC_ERR_PROTOCOL);
  EXPECT_TRUE(Has(t_error, "only the sender's MANIFEST carries one")) << t_error;

  // The receive state is still usable: the genuine record goes through, once.
  ASSERT_EQ(Manifest(rx, 1, good), WSYNC_OK) << t_error;
  EXPECT_EQ(Manifest(rx, 1, good), WSYNC_ERR_INVALID_STATE);
  ASSERT_EQ(Post(rx, 1, dest), WSYNC_OK) << t_error;
  ASSERT_EQ(tp_->send_post(tx_, 1, &b, ranks_.data(), 1), WSYNC_OK) << t_error;
  ASSERT_EQ(WaitRecv(rx, 1), WSYNC_OK) << t_error;
  EXPECT_EQ(Sum(dest.Gather()), Sum(bytes));
  ASSERT_EQ(Done(1, 1, Ack(rx, 1)), WSYNC_OK) << t_error;
  EXPECT_EQ(SendWait(1), WSYNC_OK) << t_error;
}

// ---- (c) calls out of order -----------------------------------------------------------------------

TEST_F(CudaIpcFake, RecvPostNeedsARecordSendPostNeedsDescribe) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(1, 1, 4096));
  void* rx = rx_[0];
  const Dest dest = MakeDest(100);
  EXPECT_EQ(Post(rx, 1, dest), WSYNC_ERR_PROTOCOL);
  EXPECT_TRUE(Has(t_error, "rank 1: recv_post of bucket 1, which the sender did not describe")) << t_error;
  EXPECT_TRUE(fake::g.copies.empty());

  const wsync_buffer_t b = Buf(slots_[0], 100, caller_);
  t_error.clear();
  EXPECT_EQ(tp_->send_post(tx_, 1, &b, ranks_.data(), 1), WSYNC_ERR_INVALID_STATE);
  EXPECT_TRUE(Has(t_error, "send_post of bucket 1, which describe_send did not describe")) << t_error;
  const Bytes record = Describe(1, b);
  const wsync_buffer_t moved = Buf(slots_[0] + 8, 100, caller_);  // not the range that was described
  EXPECT_EQ(tp_->send_post(tx_, 1, &moved, ranks_.data(), 1), WSYNC_ERR_INVALID_STATE);
  const wsync_buffer_t shorter = Buf(slots_[0], 99, caller_);
  EXPECT_EQ(tp_->send_post(tx_, 1, &shorter, ranks_.data(), 1), WSYNC_ERR_INVALID_STATE);
  EXPECT_EQ(tp_->send_post(tx_, 2, &b, ranks_.data(), 1), WSYNC_ERR_INVALID_STATE);
  // Ranges outside the staging cannot be described at all.
  uint8_t* elsewhere = Dev(64);
  Describe(1, Buf(elsewhere, 64, caller_), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Has(t_error, "is not inside a staging buffer given to register_staging")) << t_error;
  Describe(1, Buf(slots_[0] + 4000, 200, caller_), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Has(t_error, "runs past its 4096 bytes")) << t_error;

  // A record for bucket 1 does not let bucket 2 be received, and regions of another size are
  // refused (dropping the record).
  ASSERT_EQ(Manifest(rx, 1, record), WSYNC_OK) << t_error;
  EXPECT_EQ(Post(rx, 2, dest), WSYNC_ERR_PROTOCOL);
  const Dest wrong = MakeDest(99);
  EXPECT_EQ(Post(rx, 1, wrong), WSYNC_ERR_PROTOCOL);
  EXPECT_TRUE(Has(t_error, "bucket 1 from rank 0 has 100 bytes, the receive expects 99")) << t_error;
  EXPECT_EQ(Post(rx, 1, dest), WSYNC_ERR_PROTOCOL);
  EXPECT_TRUE(fake::g.copies.empty());
  EXPECT_EQ(tp_->recv_wait(rx, 1, 0), WSYNC_ERR_INVALID_STATE);
}

// ---- (d) the sender checks done records ---------------------------------------------------------

TEST_F(CudaIpcFake, SenderChecksDoneRecords) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(2, 2, 4096));
  std::vector<Bytes> acks;
  ASSERT_NO_FATAL_FAILURE(HeldBucket(1, 0, 0, Pattern(1, 2000), &acks));
  const Bytes& good = acks[0];  // rank 1's
  auto refused = [&](uint64_t seq, uint32_t rank, const Bytes& record, int32_t kind, wsync_status_t want,
                     const std::string& why) {
    EXPECT_EQ(Done(seq, rank, record, kind), want) << why;
    EXPECT_TRUE(Has(t_error, why)) << t_error;
    EXPECT_EQ(SendWait(1), WSYNC_ERR_TIMEOUT) << "a refused record freed the slot (" << why << ")";
    EXPECT_TRUE(Has(t_error, "has not been copied by rank 1 yet")) << t_error;
  };
  Bytes r = good;
  r[9] ^= 0x40;
  refused(1, 1, r, WSYNC_BLOB_ACK, WSYNC_ERR_PROTOCOL, "a done record of session");
  refused(1, 1, Ack(rx_[0], 2), WSYNC_BLOB_ACK, WSYNC_ERR_PROTOCOL,
          "rank 1 reports bucket 2 copied in its ACK of bucket 1");
  refused(1, 1, good, WSYNC_BLOB_READY, WSYNC_ERR_PROTOCOL,
          "rank 1 sent a record with message kind 2 of bucket 1; only ACK carries one");
  refused(1, 1, good, WSYNC_BLOB_MANIFEST, WSYNC_ERR_PROTOCOL, "message kind 1");
  r = good;
  r.resize(CIPC_DONE_BYTES - 1);
  refused(1, 1, r, WSYNC_BLOB_ACK, WSYNC_ERR_PROTOCOL, "a done record of 23 bytes, expected 24");
  r = good;
  r[2] ^= 1;
  refused(1, 1, r, WSYNC_BLOB_ACK, WSYNC_ERR_PROTOCOL, "not a version 1 cuda_ipc done record");
  refused(1, 3, good, WSYNC_BLOB_ACK, WSYNC_ERR_INVALID_ARGUMENT, "rank 3 is not a receiver (1..2)");
  // A done record for a bucket that was never posted is a confused (or stale) receiver.
  refused(5, 1, Ack(rx_[0], 5), WSYNC_BLOB_ACK, WSYNC_ERR_PROTOCOL,
          "rank 1 reports bucket 5 copied, but the last bucket described or posted is 1");

  // Rank 2 is forgotten: its records change nothing (not even one for a bucket never posted).
  tp_->forget_peer(tx_, 2);
  EXPECT_EQ(Done(1, 2, acks[1]), WSYNC_OK) << t_error;
  EXPECT_EQ(Done(9, 2, Ack(rx_[1], 9)), WSYNC_OK) << t_error;
  EXPECT_EQ(SendWait(1), WSYNC_ERR_TIMEOUT);
  EXPECT_TRUE(Has(t_error, "has not been copied by rank 1 yet")) << t_error;
  ASSERT_EQ(Done(1, 1, good), WSYNC_OK) << t_error;
  EXPECT_EQ(SendWait(1), WSYNC_OK) << t_error;
  EXPECT_EQ(Done(1, 1, good), WSYNC_OK) << "a repeated done record is harmless";
}

// ---- (e) abort ------------------------------------------------------------------------------------

TEST_F(CudaIpcFake, AbortFromAnotherThreadEndsRecvWait) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(1, 1, 4096));
  void* rx = rx_[0];
  fake::Hold(caller_);  // the sender's bytes never become final
  const wsync_buffer_t b = Buf(slots_[0], 512, caller_);
  const Bytes record = Describe(1, b);
  const Dest dest = MakeDest(512);
  ASSERT_EQ(Manifest(rx, 1, record), WSYNC_OK) << t_error;
  ASSERT_EQ(Post(rx, 1, dest), WSYNC_OK) << t_error;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    tp_->abort(rx);
  });
  const auto t0 = Clock::now();
  t_error.clear();
  const wsync_status_t rc = tp_->recv_wait(rx, 1, 10000);
  const int64_t ms = MsSince(t0);
  aborter.join();
  EXPECT_EQ(rc, WSYNC_ERR_ABORTED) << t_error;
  EXPECT_EQ(t_error, "transport 'cuda_ipc': rank 1: aborted");
  EXPECT_GE(ms, 90);
  EXPECT_LT(ms, 2000);
  EXPECT_EQ(tp_->recv_wait(rx, 1, 0), WSYNC_ERR_ABORTED);
  EXPECT_EQ(Manifest(rx, 2, record), WSYNC_ERR_ABORTED);
  EXPECT_EQ(Post(rx, 2, dest), WSYNC_ERR_ABORTED);
  EXPECT_EQ(fake::g.copies_done, 0);
}

// ---- (f) forget_peer ------------------------------------------------------------------------------

TEST_F(CudaIpcFake, ForgetPeerFreesTheSlotForTheOthers) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(2, 1, 4096));
  std::vector<Bytes> acks;
  ASSERT_NO_FATAL_FAILURE(HeldBucket(1, 0, 0, Pattern(1, 1500), &acks));
  ASSERT_EQ(Done(1, 1, acks[0]), WSYNC_OK) << t_error;  // rank 2 never reports
  EXPECT_EQ(SendWait(1), WSYNC_ERR_TIMEOUT);
  EXPECT_TRUE(Has(t_error, "has not been copied by rank 2 yet")) << t_error;
  const Bytes second = Pattern(2, 2500);
  const wsync_buffer_t b2 = Buf(slots_[0] + 16, second.size(), caller_);
  Describe(2, b2, WSYNC_ERR_INVALID_STATE);
  EXPECT_TRUE(Has(t_error, "which rank 2 has not copied yet")) << t_error;

  tp_->forget_peer(tx_, 2);
  EXPECT_EQ(SendWait(1), WSYNC_OK) << t_error;
  fake::Write(caller_, slots_[0] + 16, second);
  const Bytes record = Describe(2, b2);
  ASSERT_EQ(record.size(), CIPC_BUCKET_BYTES);
  const uint32_t both[] = {1, 2};
  EXPECT_EQ(tp_->send_post(tx_, 2, &b2, both, 2), WSYNC_ERR_INVALID_STATE);
  EXPECT_TRUE(Has(t_error, "rank 2 was forgotten (forget_peer) and cannot be sent to again")) << t_error;
  const Dest dest = MakeDest(second.size());
  ASSERT_EQ(Manifest(rx_[0], 2, record), WSYNC_OK) << t_error;
  ASSERT_EQ(Post(rx_[0], 2, dest), WSYNC_OK) << t_error;
  const uint32_t one[] = {1};
  ASSERT_EQ(tp_->send_post(tx_, 2, &b2, one, 1), WSYNC_OK) << t_error;
  ASSERT_EQ(WaitRecv(rx_[0], 2), WSYNC_OK) << t_error;
  EXPECT_EQ(Sum(dest.Gather()), Sum(second));
  EXPECT_EQ(SendWait(2), WSYNC_ERR_TIMEOUT);
  ASSERT_EQ(Done(2, 1, Ack(rx_[0], 2)), WSYNC_OK) << t_error;
  EXPECT_EQ(SendWait(2), WSYNC_OK) << t_error;
}

// A receiver that forgets its sender drops the receive in progress (its record included).
TEST_F(CudaIpcFake, ReceiverForgetsTheSender) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(1, 1, 4096));
  const Bytes record = Describe(1, Buf(slots_[0], 64, caller_));
  ASSERT_EQ(Manifest(rx_[0], 1, record), WSYNC_OK) << t_error;
  tp_->forget_peer(rx_[0], 0);
  const Dest dest = MakeDest(64);
  EXPECT_EQ(Post(rx_[0], 1, dest), WSYNC_ERR_PEER_FAILED);
  EXPECT_TRUE(Has(t_error, "the sender (rank 0) was forgotten")) << t_error;
}

// ---- a failed cudaMemcpyAsync ---------------------------------------------------------------------

// The core treats a failed recv_post as never posted: no recv_wait, no forget_peer, and the next
// bucket comes as usual. The failure must therefore leave no receive behind (nor copies still
// writing into regions the core takes back).
TEST_F(CudaIpcFake, FailedCopyLeavesTheReceiverUsable) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(1, 1, 4096));
  void* rx = rx_[0];
  const Bytes first = Pattern(1, 900);
  fake::Write(caller_, slots_[0], first);
  const wsync_buffer_t b1 = Buf(slots_[0], first.size(), caller_);
  const Bytes r1 = Describe(1, b1);
  ASSERT_EQ(Manifest(rx, 1, r1), WSYNC_OK) << t_error;
  const Dest d1 = MakeDest(first.size());
  fake::g.fail_memcpy_in = 2;  // the second region's copy fails, the first is queued already
  EXPECT_EQ(Post(rx, 1, d1), WSYNC_ERR_IO);
  EXPECT_TRUE(Has(t_error, "bucket 1: copying region 1")) << t_error;
  EXPECT_EQ(fake::PendingOnPluginStreams(), 0u) << "copies into the regions still queued after recv_post failed";

  // Bucket 2 (the sender's core failed bucket 1: it was never posted).
  const Bytes second = Pattern(2, 1200);
  fake::Write(caller_, slots_[0] + 64, second);
  const wsync_buffer_t b2 = Buf(slots_[0] + 64, second.size(), caller_);
  const Bytes r2 = Describe(2, b2);
  ASSERT_EQ(Manifest(rx, 2, r2), WSYNC_OK) << t_error;
  const Dest d2 = MakeDest(second.size());
  ASSERT_EQ(Post(rx, 2, d2), WSYNC_OK) << t_error;
  ASSERT_EQ(tp_->send_post(tx_, 2, &b2, ranks_.data(), 1), WSYNC_OK) << t_error;
  ASSERT_EQ(WaitRecv(rx, 2), WSYNC_OK) << t_error;
  EXPECT_EQ(Sum(d2.Gather()), Sum(second));
  ASSERT_EQ(Done(2, 1, Ack(rx, 2)), WSYNC_OK) << t_error;
  EXPECT_EQ(SendWait(2), WSYNC_OK) << t_error;
}

// ---- (g) the entry and the table ------------------------------------------------------------------

TEST_F(CudaIpcFake, EntryChecksTheHostTable) {
  wsync_host_v1_t old = kHost;
  old.abi_minor = 1;
  t_status = WSYNC_OK;
  t_error.clear();
  EXPECT_EQ(wsync_transport_entry_v1(&old), nullptr);
  EXPECT_EQ(t_status, WSYNC_ERR_VERSION_MISMATCH);
  EXPECT_TRUE(Has(t_error, "plugin ABI 1.2 or newer")) << t_error;

  wsync_host_v1_t short_table = kHost;  // a 1.1 core's table ends before abi_minor
  short_table.struct_size = static_cast<uint32_t>(offsetof(wsync_host_v1_t, abi_minor));
  short_table.abi_minor = 2;  // beyond its struct_size: must not be read
  t_status = WSYNC_OK;
  t_error.clear();
  EXPECT_EQ(wsync_transport_entry_v1(&short_table), nullptr);
  EXPECT_EQ(t_status, WSYNC_ERR_VERSION_MISMATCH);
  EXPECT_TRUE(Has(t_error, "'abi_minor'")) << t_error;

  wsync_host_v1_t other_major = kHost;
  other_major.abi_version = WSYNC_PLUGIN_ABI_VERSION + 1;
  t_status = WSYNC_OK;
  EXPECT_EQ(wsync_transport_entry_v1(&other_major), nullptr);
  EXPECT_EQ(t_status, WSYNC_ERR_VERSION_MISMATCH);
  EXPECT_EQ(wsync_transport_entry_v1(nullptr), nullptr);

  // A newer core's larger table is fine. Static: the plugin keeps the pointer for its messages.
  struct Larger {
    wsync_host_v1_t base;
    uint64_t future[4];
  };
  static Larger larger;
  larger.base = kHost;
  larger.base.struct_size = sizeof(Larger);
  larger.base.abi_minor = WSYNC_PLUGIN_ABI_MINOR + 1;
  EXPECT_NE(wsync_transport_entry_v1(&larger.base), nullptr) << t_error;

  fake::g.device_count = 0;
  t_status = WSYNC_OK;
  EXPECT_EQ(wsync_transport_entry_v1(&kHost), nullptr);
  EXPECT_EQ(t_status, WSYNC_ERR_NO_DEVICE);
  EXPECT_TRUE(Has(t_error, "transport 'cuda_ipc': no CUDA device")) << t_error;
}

TEST_F(CudaIpcFake, TableAndRuntimeInfo) {
  EXPECT_STREQ(tp_->name, "cuda_ipc");
  EXPECT_EQ(tp_->abi_version, static_cast<uint32_t>(WSYNC_PLUGIN_ABI_VERSION));
  EXPECT_EQ(tp_->struct_size, sizeof(wsync_transport_v1_t));
  EXPECT_GE(tp_->struct_size, WSYNC_TRANSPORT_V1_2_SIZE);
  EXPECT_EQ(tp_->caps, static_cast<uint64_t>(WSYNC_TRANSPORT_CAP_CUDA_MEMORY | WSYNC_TRANSPORT_CAP_STAGING_ONLY |
                                             WSYNC_TRANSPORT_CAP_SCATTER_RECV));
  EXPECT_NE(tp_->describe_send, nullptr);
  EXPECT_NE(tp_->describe_recv, nullptr);
  EXPECT_NE(tp_->peer_blob, nullptr);
  EXPECT_NE(tp_->register_staging, nullptr);
  EXPECT_NE(tp_->abort, nullptr);
  ASSERT_NE(tp_->runtime_info, nullptr);
  const char* info = tp_->runtime_info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(std::string(info), "CUDA runtime 13.0, driver 13.0, 1 device(s)");
  tp_->destroy(nullptr);  // accepted
}

// ---- (h) no store traffic per bucket --------------------------------------------------------------

TEST_F(CudaIpcFake, BucketsDoNotTouchTheStore) {
  ASSERT_NO_FATAL_FAILURE(ConnectGroup(2, 2, 8192));
  int sets = 0, gets = 0;
  {
    std::lock_guard<std::mutex> l(g_mu);
    sets = g_sets;
    gets = g_gets;
    std::vector<std::string> keys;
    for (const auto& kv : g_store) keys.push_back(kv.first);
    EXPECT_EQ(keys, (std::vector<std::string>{"wsync/g/cuda_ipc/ready/1", "wsync/g/cuda_ipc/ready/2",
                                              "wsync/g/cuda_ipc/staging"}));
  }
  EXPECT_EQ(sets, 3);  // once per group: the staging record and one ready key per receiver
  for (uint64_t seq = 1; seq <= 3; ++seq)
    ASSERT_NO_FATAL_FAILURE(MoveBucket(seq, static_cast<uint32_t>((seq - 1) % 2), 0, Pattern(seq, 6000)));
  std::lock_guard<std::mutex> l(g_mu);
  EXPECT_EQ(g_sets, sets) << "a bucket wrote to the store";
  EXPECT_EQ(g_gets, gets) << "a bucket read from the store";
  EXPECT_EQ(g_store.size(), 3u);
}

}  // namespace
