// timeout_ms bounds silence, not size (issue: "a healthy group fails for being slow"). The sender
// runs transport 'faulty' with its "slow" fault (every send waits first: a slow link), so one
// bucket takes well over the timeout while its pieces keep moving; receivers report what landed
// (PROGRESS) and a relay's forwarding counts for it. Every receiver checks every tensor. Before
// this, the sender failed such an update with "did not answer ACK of bucket 0 ... within 2000 ms"
// and the receivers with "did not arrive within". A member that stops is still named: the relay
// that hangs in the middle of a chain, not its healthy upstream neighbour.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "wsync.h"

using namespace harness;

namespace {

constexpr int64_t kTimeoutMs = 2000;
// 12 MiB in one bucket, 48 pieces of 256 KiB, each send 100 ms late: about 4.8 s per bucket,
// more than the sender's timeout (2 s) and the receivers' (2 s + 2 s for the sender to say why).
constexpr uint64_t kBucketBytes = 12u << 20;
constexpr const char* kPieceBytes = "262144";
constexpr const char* kSlow = "slow 100";

struct PluginPath {
  PluginPath() { setenv("WSYNC_PLUGIN_PATH", WSYNC_TEST_FAULTY_DIR, 1); }
  ~PluginPath() { unsetenv("WSYNC_PLUGIN_PATH"); }
};

struct Sender {
  std::string dir = temp_dir();
  std::string addr_file = dir + "/store.addr";
  wsync_group_t* g = nullptr;
  // The fault applies to this process only (set after the receivers were forked).
  wsync_status_t init(uint32_t receivers, const std::string& route, const char* fault_text = kSlow) {
    const std::string fault = dir + "/fault";
    FILE* f = std::fopen(fault.c_str(), "w");
    std::fputs(fault_text, f);
    std::fclose(f);
    setenv("WSYNC_FAULTY_FILE", fault.c_str(), 1);
    const std::string bucket = std::to_string(kBucketBytes), timeout = std::to_string(kTimeoutMs);
    wsync_option_t opts[] = {WSYNC_OPTION("bucket_bytes", bucket.c_str()), WSYNC_OPTION("store_addr_file", addr_file.c_str()),
                             WSYNC_OPTION("timeout_ms", timeout.c_str()), WSYNC_OPTION("piece_bytes", kPieceBytes),
                             WSYNC_OPTION("route", route.c_str())};
    wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
    cfg.num_receivers = receivers;
    cfg.group_name = "it";
    cfg.transport = "faulty";
    cfg.options = opts;
    cfg.num_options = sizeof opts / sizeof opts[0];
    cfg.timeout_ms = kTimeoutMs;
    return wsync_group_init(&cfg, &g);
  }
  ~Sender() {
    wsync_group_destroy(g);
    unsetenv("WSYNC_FAULTY_FILE");
  }
};

// Receivers 1..n, each from an address of its own (127.0.0.2, ...: the route planner sees n
// hosts, so route=chain makes relays), with the same timeout as the sender.
// `faulty_rank`'s process runs transport 'faulty' with `fault` (its own sends: a relay's forwards).
std::vector<pid_t> start_receivers(const Sender& s, const std::vector<synth_tensor_t>& spec, uint64_t versions,
                                   uint32_t n, uint32_t faulty_rank = 0, const char* fault = "") {
  std::vector<pid_t> pids;
  const std::string fault_file = s.dir + "/relay_fault";
  if (faulty_rank != 0) {
    FILE* f = std::fopen(fault_file.c_str(), "w");
    std::fputs(fault, f);
    std::fclose(f);
  }
  for (uint32_t r = 1; r <= n; ++r) {
    if (r == faulty_rank) setenv("WSYNC_FAULTY_FILE", fault_file.c_str(), 1);
    ReceiverPlan p;
    p.rank = r;
    p.addr_file = s.addr_file;
    p.spec = spec;
    p.versions = versions;
    p.register_buffers = r % 2 == 1;
    p.timeout_ms = kTimeoutMs;
    p.local_address = "127.0.0." + std::to_string(r + 1);
    pids.push_back(spawn([p] { return run_receiver(p); }));
    unsetenv("WSYNC_FAULTY_FILE");
  }
  return pids;
}

std::vector<synth_tensor_t> model() { return {tensor_of("w", WSYNC_DTYPE_FLOAT32, {static_cast<int64_t>(kBucketBytes / 4)})}; }

wsync_status_t publish(Sender& s, Model& m, uint64_t version) {
  m.fill(version);
  wsync_status_t st = wsync_group_send_batch(s.g, m.descs.data(), m.descs.size(), -1);
  return st == WSYNC_OK ? wsync_group_finalize(s.g, version, -1) : st;
}

// A star and a chain of relays: each version commits, every byte checked on every receiver.
TEST(Silence, ASlowUpdateWhosePiecesKeepMovingIsNeverATimeout) {
  PluginPath faulty;
  for (const char* route : {"star", "chain"}) {
    Model m;
    m.spec = model();
    Sender s;
    auto pids = start_receivers(s, m.spec, 1, 3);
    ASSERT_EQ(WSYNC_OK, s.init(3, route)) << route << ": " << wsync_last_error();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(WSYNC_OK, publish(s, m, 1)) << route << ": " << wsync_last_error();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GT(took, 2 * kTimeoutMs) << route << ": the update was not slower than the timeout; the test shows nothing";
    wsync_group_destroy(s.g);
    s.g = nullptr;
    for (pid_t p : pids) EXPECT_EQ(0, wait_child(p, 20000)) << route;
  }
}

// The middle relay of a chain 0 -> 1 -> 2 -> 3 hangs (SIGSTOP) while the bucket moves: the sender
// names rank 2, the one that stopped, with rank 3 downstream of it, not rank 1 (healthy, its
// forwarding blocked by rank 2), and not later than its timeout after the last progress.
TEST(Silence, AHungRelayInAChainIsTheOneNamedNotItsUpstreamNeighbour) {
  PluginPath faulty;
  Model m;
  m.spec = model();
  Sender s;
  auto pids = start_receivers(s, m.spec, 0, 3);
  ASSERT_EQ(WSYNC_OK, s.init(3, "chain")) << wsync_last_error();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // (about a third of the bucket)
    kill(pids[1], SIGSTOP);
  });
  const wsync_status_t st = publish(s, m, 1);
  stopper.join();
  const std::string why = wsync_last_error();
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, st) << why;  // (a receiver that did not answer in time: ABI 1.4)
  EXPECT_NE(std::string::npos, why.find("receiver rank 2 ")) << why;
  EXPECT_EQ(std::string::npos, why.find("receiver rank 1 ")) << why;
  EXPECT_NE(std::string::npos, why.find("made no progress within 2000 ms")) << why;
  EXPECT_NE(std::string::npos, why.find("downstream of it (cut off with it): rank 3")) << why;
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) wait_child(p, 20000);
}

// Relays at depth 2 and 3: in a chain 0 -> 1 -> 2 -> 3 the hung relay is rank 2, in a chain of
// four rank 3 (its upstream relays 1 and 2 healthy, blocked behind it).
TEST(Silence, AHungRelayDeeperInTheChainIsTheOneNamed) {
  PluginPath faulty;
  Model m;
  m.spec = model();
  Sender s;
  auto pids = start_receivers(s, m.spec, 0, 4);
  ASSERT_EQ(WSYNC_OK, s.init(4, "chain")) << wsync_last_error();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pids[2], SIGSTOP);
  });
  const wsync_status_t st = publish(s, m, 1);
  stopper.join();
  const std::string why = wsync_last_error();
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, st) << why;
  EXPECT_NE(std::string::npos, why.find("receiver rank 3 ")) << why;
  EXPECT_EQ(std::string::npos, why.find("receiver rank 2 ")) << why;
  EXPECT_EQ(std::string::npos, why.find("receiver rank 1 ")) << why;
  EXPECT_NE(std::string::npos, why.find("downstream of it (cut off with it): rank 4")) << why;
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) wait_child(p, 20000);
}

// A relay that alters what it forwards (rank 1's transport flips a byte of its first forward:
// transport 'faulty', "corrupt 1"): the receiver below it refuses the bucket (payload checksum),
// and the sender names that receiver and the relay that fed it.
TEST(Silence, ARelayThatAltersWhatItForwardsIsNamedWithTheReceiverThatRefused) {
  PluginPath faulty;
  Model m;
  m.spec = model();
  Sender s;
  auto pids = start_receivers(s, m.spec, 0, 2, 1, "corrupt 1");
  ASSERT_EQ(WSYNC_OK, s.init(2, "chain", "")) << wsync_last_error();
  const wsync_status_t st = publish(s, m, 1);
  const std::string why = wsync_last_error();
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, st) << why;
  EXPECT_NE(std::string::npos, why.find("receiver rank 2 ")) << why;
  EXPECT_NE(std::string::npos, why.find("payload checksum mismatch")) << why;
  EXPECT_NE(std::string::npos, why.find("fed by relay rank 1 (at 127.0.0.2:")) << why;
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) wait_child(p, 20000);
}

}  // namespace
