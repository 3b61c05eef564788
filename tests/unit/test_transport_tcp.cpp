// Tests of transport 'tcp' (wsync's own socket transport), driven through its function table with a
// small host table and an in-memory store; ranks run as threads. What a user would notice: bytes
// arrive equal over several streams and many regions; a connection that does not prove the key is
// closed and never delays a member; a dead, hung or vanished peer is a named error in bounded time,
// and forgetting one leaves the others working; a receiver of a forgotten rank can come back.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "wsync_plugin.h"

namespace {

using Clock = std::chrono::steady_clock;

class MemStore {
 public:
  void Set(const std::string& k, const std::string& v) {
    std::lock_guard<std::mutex> l(mu_);
    map_[k] = v;
    cv_.notify_all();
  }
  bool Get(const std::string& k, std::string* v, int64_t timeout_ms) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return map_.count(k) > 0; })) return false;
    *v = map_[k];
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

thread_local std::string t_error;
std::mutex g_log_mu;
std::vector<std::string> g_log;

void HostLog(int32_t, const char* m) {
  std::lock_guard<std::mutex> l(g_log_mu);
  g_log.emplace_back(m ? m : "");
}
wsync_status_t HostSetError(wsync_status_t st, const char* m) {
  t_error = m ? m : "";
  return st;
}
wsync_status_t HostSet(wsync_store_t* s, const char* k, const void* v, uint64_t n) {
  reinterpret_cast<MemStore*>(s)->Set(k, std::string(static_cast<const char*>(v), n));
  return WSYNC_OK;
}
wsync_status_t HostGet(wsync_store_t* s, const char* k, void* buf, uint64_t cap, uint64_t* len, int64_t timeout_ms) {
  std::string v;
  if (!reinterpret_cast<MemStore*>(s)->Get(k, &v, timeout_ms)) return WSYNC_ERR_TIMEOUT;
  *len = v.size();
  if (v.size() > cap) return WSYNC_ERR_INVALID_ARGUMENT;
  std::memcpy(buf, v.data(), v.size());
  return WSYNC_OK;
}
wsync_status_t HostAdd(wsync_store_t*, const char*, int64_t, int64_t*) { return WSYNC_ERR_UNSUPPORTED; }
void* HostAlloc(uint64_t n) { return std::aligned_alloc(4096, (n + 4095) / 4096 * 4096); }
void HostFree(void* p, uint64_t) { std::free(p); }

const wsync_host_v1_t kHost = {static_cast<uint32_t>(sizeof(wsync_host_v1_t)), WSYNC_PLUGIN_ABI_VERSION, HostLog,
                               HostSetError, HostSet, HostGet, HostAdd, HostAlloc, HostFree, WSYNC_PLUGIN_ABI_MINOR, 0};

const wsync_transport_v1_t* Plugin() {
  static const wsync_transport_v1_t* table = [] {
    void* h = dlopen(WSYNC_TEST_PLUGIN_DIR "/libwsync_transport_tcp.so", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return static_cast<const wsync_transport_v1_t*>(nullptr);
    auto entry = reinterpret_cast<wsync_transport_entry_v1_fn>(dlsym(h, "wsync_transport_entry_v1"));
    return entry ? entry(&kHost) : nullptr;
  }();
  return table;
}

const char kKey[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const char kOtherKey[] = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

struct Inst {
  void* self = nullptr;
  ~Inst() {
    if (self) Plugin()->destroy(self);
  }
};

wsync_status_t Create(Inst* i, MemStore* store, uint32_t rank, uint32_t world, const char* key = kKey,
                      const char* streams = nullptr, bool join_later = false) {
  std::vector<wsync_option_t> opts, hints;
  if (streams) opts.push_back(WSYNC_OPTION("streams", streams));
  if (key) hints.push_back(WSYNC_OPTION(WSYNC_HINT_AUTH_KEY, key));
  hints.push_back(WSYNC_OPTION(WSYNC_HINT_LOCAL_ADDRESS, "127.0.0.1"));
  if (join_later) hints.push_back(WSYNC_OPTION(WSYNC_HINT_JOIN_LATER, "1"));
  wsync_transport_params_t p = WSYNC_TRANSPORT_PARAMS_INIT;
  p.rank = rank;
  p.world_size = world;
  p.group_name = "tcp-test";
  p.store = reinterpret_cast<wsync_store_t*>(store);
  p.options = opts.empty() ? nullptr : opts.data();
  p.num_options = opts.size();
  p.timeout_ms = 10000;
  p.hints = hints.data();
  p.num_hints = hints.size();
  return Plugin()->create(&p, &i->self);
}

std::vector<uint8_t> Bytes(uint64_t seed, size_t n) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

wsync_buffer_t Buf(const std::vector<uint8_t>& v) {
  wsync_buffer_t b = WSYNC_BUFFER_INIT;
  b.data = v.data();
  b.len = v.size();
  return b;
}

// Wait for `seq` in short slices, as the core does.
wsync_status_t RecvWait(void* self, uint64_t seq, int64_t total_ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(total_ms);
  wsync_status_t st;
  while ((st = Plugin()->recv_wait(self, seq, 50)) == WSYNC_ERR_TIMEOUT && Clock::now() < until) {
  }
  return st;
}
wsync_status_t SendWait(void* self, uint64_t seq, int64_t total_ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(total_ms);
  wsync_status_t st;
  while ((st = Plugin()->send_wait(self, seq, 50)) == WSYNC_ERR_TIMEOUT && Clock::now() < until) {
  }
  return st;
}

// The port rank 0 published in the store.
int PublishedPort(MemStore* store) {
  std::string v;
  if (!store->Get("wsync/tcp/tcp-test/addr", &v, 5000)) return -1;
  unsigned ver = 0, streams = 0, port = 0;
  return std::sscanf(v.c_str(), "wsync-tcp %u %u %u", &ver, &streams, &port) == 3 ? static_cast<int>(port) : -1;
}

int Dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

size_t LogLinesWith(const std::string& s) {
  std::lock_guard<std::mutex> l(g_log_mu);
  size_t n = 0;
  for (const auto& m : g_log) n += m.find(s) != std::string::npos;
  return n;
}

// Rank 0 (`s`) and rank 1 (`r`) of a world of two, created and connected (the receiver on a thread).
void ConnectPair(MemStore* store, Inst* s, Inst* r) {
  std::thread t([&] {
    ASSERT_EQ(Create(r, store, 1, 2), WSYNC_OK);
    ASSERT_EQ(Plugin()->connect(r->self, 10000), WSYNC_OK);
  });
  ASSERT_EQ(Create(s, store, 0, 2), WSYNC_OK);
  ASSERT_EQ(Plugin()->connect(s->self, 10000), WSYNC_OK);
  t.join();
}

class TcpTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Plugin(), nullptr) << "cannot load libwsync_transport_tcp.so from " WSYNC_TEST_PLUGIN_DIR;
  }
};

TEST_F(TcpTransport, WithoutTheAuthKeyHintCreateIsRefused) {
  MemStore store;
  Inst s;
  EXPECT_EQ(Create(&s, &store, 0, 2, nullptr), WSYNC_ERR_UNSUPPORTED);
  EXPECT_NE(t_error.find("auth_key"), std::string::npos) << t_error;
  Inst r;
  EXPECT_EQ(Create(&r, &store, 0, 2, kKey, "17"), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(t_error.find("streams"), std::string::npos) << t_error;
}

// Pieces of many sizes (empty, small, split over streams) into regions of many shapes, to two
// receivers, several in flight: every byte equal.
TEST_F(TcpTransport, PiecesArriveEqualOverSeveralStreams) {
  MemStore store;
  const uint32_t world = 3;
  const std::vector<size_t> sizes = {0, 1, 4096, 3u << 20, 5u << 20 | 123, 64};
  Inst s;
  ASSERT_EQ(Create(&s, &store, 0, world, kKey, "3"), WSYNC_OK) << t_error;
  std::vector<std::thread> rx;
  std::atomic<int> ok{0};
  for (uint32_t r = 1; r < world; ++r)
    rx.emplace_back([&, r] {
      Inst i;
      if (Create(&i, &store, r, world) != WSYNC_OK || Plugin()->connect(i.self, 10000) != WSYNC_OK) return;
      std::vector<std::vector<uint8_t>> got;
      for (size_t k = 0; k < sizes.size(); ++k) got.emplace_back(sizes[k]);
      for (size_t k = 0; k < sizes.size(); ++k) {  // regions of 1000 bytes and a remainder
        std::vector<wsync_iov_t> iov;
        for (size_t off = 0; off < sizes[k]; off += 1000)
          iov.push_back({got[k].data() + off, std::min<uint64_t>(1000, sizes[k] - off)});
        if (Plugin()->recv_post(i.self, 10 + k, iov.data(), iov.size()) != WSYNC_OK) return;
      }
      for (size_t k = 0; k < sizes.size(); ++k)
        if (RecvWait(i.self, 10 + k, 20000) != WSYNC_OK || got[k] != Bytes(k, sizes[k])) return;
      ++ok;
    });
  ASSERT_EQ(Plugin()->connect(s.self, 10000), WSYNC_OK) << t_error;
  std::vector<std::vector<uint8_t>> src;
  for (size_t k = 0; k < sizes.size(); ++k) src.push_back(Bytes(k, sizes[k]));
  const uint32_t ranks[] = {1, 2};
  for (size_t k = 0; k < sizes.size(); ++k) {
    wsync_buffer_t b = Buf(src[k]);
    ASSERT_EQ(Plugin()->send_post(s.self, 10 + k, &b, ranks, 2), WSYNC_OK) << t_error;
  }
  for (size_t k = 0; k < sizes.size(); ++k) EXPECT_EQ(SendWait(s.self, 10 + k, 20000), WSYNC_OK) << t_error;
  for (auto& t : rx) t.join();
  EXPECT_EQ(ok.load(), 2);
}

// Strangers at rank 0's port: silence (more connections than the handshake table holds), random
// bytes, a member of another group (another key). None stops a member from connecting and
// receiving; each is closed and logged.
TEST_F(TcpTransport, StrangersAreClosedAndNeverDelayAMember) {
  MemStore store;
  Inst s;
  ASSERT_EQ(Create(&s, &store, 0, 2, kKey, nullptr, /*join_later=*/true), WSYNC_OK) << t_error;
  ASSERT_EQ(Plugin()->connect(s.self, 10000), WSYNC_OK) << t_error;  // listens, waits for nobody
  const int port = PublishedPort(&store);
  ASSERT_GT(port, 0);
  std::vector<int> silent;
  for (int i = 0; i < 100; ++i) silent.push_back(Dial(port));
  int noisy = Dial(port);
  ASSERT_GE(noisy, 0);
  std::vector<uint8_t> junk = Bytes(7, 96);
  ASSERT_EQ(write(noisy, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  // A process of another group (it knows a key, not this one) tries rank 1 first.
  MemStore other_store;
  other_store.Set("wsync/tcp/tcp-test/addr", [&] { std::string v; store.Get("wsync/tcp/tcp-test/addr", &v, 1000); return v; }());
  Inst intruder;
  ASSERT_EQ(Create(&intruder, &other_store, 1, 2, kOtherKey), WSYNC_OK);
  EXPECT_EQ(Plugin()->connect(intruder.self, 1500), WSYNC_ERR_TIMEOUT);
  EXPECT_EQ(Plugin()->connect_peer(s.self, 1, 300), WSYNC_ERR_TIMEOUT) << "the intruder became rank 1";
  // The member, while the 100 silent connections are still open.
  std::vector<uint8_t> got(1 << 20);
  std::thread member([&] {
    Inst i;
    ASSERT_EQ(Create(&i, &store, 1, 2), WSYNC_OK);
    ASSERT_EQ(Plugin()->connect(i.self, 10000), WSYNC_OK) << t_error;
    wsync_iov_t iov = {got.data(), got.size()};
    ASSERT_EQ(Plugin()->recv_post(i.self, 0, &iov, 1), WSYNC_OK);
    EXPECT_EQ(RecvWait(i.self, 0, 20000), WSYNC_OK) << t_error;
  });
  ASSERT_EQ(Plugin()->connect_peer(s.self, 1, 10000), WSYNC_OK) << t_error;
  const std::vector<uint8_t> src = Bytes(3, got.size());
  wsync_buffer_t b = Buf(src);
  const uint32_t rank = 1;
  ASSERT_EQ(Plugin()->send_post(s.self, 0, &b, &rank, 1), WSYNC_OK);
  EXPECT_EQ(SendWait(s.self, 0, 20000), WSYNC_OK) << t_error;
  member.join();
  EXPECT_EQ(got, src);
  EXPECT_GE(LogLinesWith("did not prove the group secret"), 1u);
  for (int fd : silent)
    if (fd >= 0) close(fd);
  close(noisy);
}

// A receiver that vanishes mid-stream is named on the sender (rank, address, what was in flight)
// in bounded time; once forgotten, the other receiver goes on, and the rank can come back.
TEST_F(TcpTransport, DeadReceiverIsNamedForgottenAndCanComeBack) {
  MemStore store;
  Inst s;
  ASSERT_EQ(Create(&s, &store, 0, 3), WSYNC_OK);
  Inst r1, r2;
  std::thread t1([&] { ASSERT_EQ(Create(&r1, &store, 1, 3), WSYNC_OK); ASSERT_EQ(Plugin()->connect(r1.self, 10000), WSYNC_OK); });
  std::thread t2([&] { ASSERT_EQ(Create(&r2, &store, 2, 3), WSYNC_OK); ASSERT_EQ(Plugin()->connect(r2.self, 10000), WSYNC_OK); });
  ASSERT_EQ(Plugin()->connect(s.self, 10000), WSYNC_OK) << t_error;
  t1.join();
  t2.join();
  // Rank 2 posts nothing and goes away: its sockets close under a 64 MiB piece in flight.
  const std::vector<uint8_t> big = Bytes(1, 64u << 20);
  std::vector<uint8_t> got1(big.size());
  wsync_iov_t iov1 = {got1.data(), got1.size()};
  ASSERT_EQ(Plugin()->recv_post(r1.self, 0, &iov1, 1), WSYNC_OK);
  wsync_buffer_t b = Buf(big);
  const uint32_t both[] = {1, 2};
  ASSERT_EQ(Plugin()->send_post(s.self, 0, &b, both, 2), WSYNC_OK);
  Plugin()->destroy(r2.self);
  r2.self = nullptr;
  const auto t0 = Clock::now();
  wsync_status_t st = SendWait(s.self, 0, 10000);
  EXPECT_EQ(st, WSYNC_ERR_PEER_FAILED) << t_error;
  EXPECT_NE(t_error.find("rank 2"), std::string::npos) << t_error;
  EXPECT_NE(t_error.find("127.0.0.1"), std::string::npos) << t_error;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));  // a bound, not a speed: a hang is forever
  Plugin()->forget_peer(s.self, 2);
  EXPECT_EQ(SendWait(s.self, 0, 20000), WSYNC_OK) << t_error;
  EXPECT_EQ(RecvWait(r1.self, 0, 20000), WSYNC_OK) << t_error;
  EXPECT_EQ(got1, big);
  // Rank 2 comes back (a new process): connect_peer takes it, and it receives.
  Inst again;
  std::vector<uint8_t> got2(4096);
  std::thread t3([&] {
    ASSERT_EQ(Create(&again, &store, 2, 3), WSYNC_OK);
    ASSERT_EQ(Plugin()->connect(again.self, 10000), WSYNC_OK);
  });
  ASSERT_EQ(Plugin()->connect_peer(s.self, 2, 10000), WSYNC_OK) << t_error;
  t3.join();
  wsync_iov_t iov2 = {got2.data(), got2.size()};
  ASSERT_EQ(Plugin()->recv_post(again.self, 1, &iov2, 1), WSYNC_OK);
  const std::vector<uint8_t> small = Bytes(9, got2.size());
  wsync_buffer_t sb = Buf(small);
  const uint32_t two = 2;
  ASSERT_EQ(Plugin()->send_post(s.self, 1, &sb, &two, 1), WSYNC_OK);
  EXPECT_EQ(SendWait(s.self, 1, 20000), WSYNC_OK) << t_error;
  EXPECT_EQ(RecvWait(again.self, 1, 20000), WSYNC_OK) << t_error;
  EXPECT_EQ(got2, small);
}

// A receiver that never reads (hung): the sender's write blocks; send_wait times out in slices,
// forget_peer returns at once (the blocked writer is released) and the buffer is the caller's again.
TEST_F(TcpTransport, HungReceiverIsForgottenWithoutWaiting) {
  MemStore store;
  Inst s, r;
  ConnectPair(&store, &s, &r);
  if (HasFatalFailure()) return;
  const std::vector<uint8_t> big = Bytes(2, 256u << 20);  // far more than the socket buffers hold
  wsync_buffer_t b = Buf(big);
  const uint32_t one = 1;
  ASSERT_EQ(Plugin()->send_post(s.self, 0, &b, &one, 1), WSYNC_OK);  // rank 1 never posts a receive
  EXPECT_EQ(Plugin()->send_wait(s.self, 0, 300), WSYNC_ERR_TIMEOUT);
  EXPECT_NE(t_error.find("rank 1"), std::string::npos) << t_error;
  const auto t0 = Clock::now();
  Plugin()->forget_peer(s.self, 1);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));  // a blocked writer would never return
  EXPECT_EQ(Plugin()->send_wait(s.self, 0, 0), WSYNC_OK) << t_error;
}

// After a transfer, with nothing outstanding, arm lets the caller sleep (at most one "look again"
// first) and the event fd is quiet: a relay's world between updates must not make its owner spin.
TEST_F(TcpTransport, AnIdleInstanceLetsItsOwnerSleep) {
  MemStore store;
  Inst s, r;
  ConnectPair(&store, &s, &r);
  if (HasFatalFailure()) return;
  std::vector<uint8_t> got(1 << 20);
  wsync_iov_t iov = {got.data(), got.size()};
  ASSERT_EQ(Plugin()->recv_post(r.self, 0, &iov, 1), WSYNC_OK);
  const std::vector<uint8_t> src = Bytes(4, got.size());
  wsync_buffer_t b = Buf(src);
  const uint32_t one = 1;
  ASSERT_EQ(Plugin()->send_post(s.self, 0, &b, &one, 1), WSYNC_OK);
  ASSERT_EQ(SendWait(s.self, 0, 20000), WSYNC_OK);
  ASSERT_EQ(RecvWait(r.self, 0, 20000), WSYNC_OK);
  for (void* self : {s.self, r.self}) {
    int32_t fd = -1, armed = 0;
    ASSERT_EQ(Plugin()->get_event_fd(self, &fd), WSYNC_OK);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(Plugin()->arm(self, &armed), WSYNC_OK);
    if (!armed) {
      ASSERT_EQ(Plugin()->arm(self, &armed), WSYNC_OK);
    }
    EXPECT_EQ(armed, 1) << "an idle instance keeps saying 'look again': its owner would spin";
    pollfd p = {fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 0), 0) << "the event fd of an idle, armed instance is readable";
  }
}

// The sender vanishes while a receiver waits: recv_wait names rank 0 and what had arrived.
TEST_F(TcpTransport, DeadSenderIsNamedOnTheReceiver) {
  MemStore store;
  Inst r;
  auto* s = new Inst;
  ConnectPair(&store, s, &r);
  if (HasFatalFailure()) return;
  std::vector<uint8_t> got(1 << 20);
  wsync_iov_t iov = {got.data(), got.size()};
  ASSERT_EQ(Plugin()->recv_post(r.self, 0, &iov, 1), WSYNC_OK);
  delete s;
  const auto t0 = Clock::now();
  EXPECT_EQ(RecvWait(r.self, 0, 10000), WSYNC_ERR_PEER_FAILED) << t_error;
  EXPECT_NE(t_error.find("rank 0"), std::string::npos) << t_error;
  EXPECT_NE(t_error.find("0 of its 1048576 bytes"), std::string::npos) << t_error;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));  // a bound, not a speed: a hang is forever
}

}  // namespace
