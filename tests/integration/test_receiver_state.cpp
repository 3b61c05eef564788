// What an engine's registered buffers hold when an update fails, in both receive modes, over the
// real UCX transport: a sender process (forked) publishes version 1, then fails during version 2 in
// one of the ways below, while this process is the engine (one receiver) that checksums every
// registered buffer.
//
//   in_place (default)  the buffers that version 2 wrote hold new bytes; the receiver says so:
//                       WSYNC_BUFFERS_MIXED and exactly those tensors, in order; every other
//                       buffer still holds version 1 bit for bit
//   staged              every registered buffer holds version 1 bit for bit, through every fault;
//                       the state is CLEAN and the staging memory is reported
//
// Faults: the sender aborts (between batches, and while a bucket's bytes are awaited), the sender
// process is killed (the same two moments), the sender destroys its group mid-update, the receiver
// refuses a bucket (a shape that differs from the registration), a bucket arrives corrupted
// (payload checksum), and a bucket's bytes never come (the receiver's own timeout). Data-plane faults come from transport 'faulty' (UCX with one
// fault injected on the sender, tests/integration/faulty_transport.c).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "wsync.h"

using namespace harness;

namespace {

constexpr uint64_t kBucket = 16u << 10;  // bucket_bytes, and the size of most tensors
constexpr int64_t kReceiverTimeoutMs = 1500;

synth_tensor_t tensor(const std::string& name, std::vector<int64_t> shape) {
  return tensor_of(name, WSYNC_DTYPE_FLOAT32, std::move(shape));
}

// In send order. Batch A is the first two; batch B the rest. With 16 KiB buckets each layer is one
// bucket and big.weight (40 KiB) is split over three: the buckets of an update are
//   0 layers.0  1 layers.1 | 2 layers.2  3-5 big.weight  6 layers.3  7 layers.4 ...
// extra.bias is not registered (the engine takes it as a view).
std::vector<synth_tensor_t> model() {
  return {tensor("layers.0.weight", {4096}), tensor("layers.1.weight", {4096}), tensor("layers.2.weight", {4096}),
          tensor("big.weight", {10240}),     tensor("layers.3.weight", {4096}), tensor("layers.4.weight", {4096}),
          tensor("extra.bias", {2048}),      tensor("layers.5.weight", {4096})};
}
constexpr size_t kBatchA = 2;
bool registered(const synth_tensor_t& t) { return std::string(t.name) != "extra.bias"; }

uint64_t registered_bytes() {
  uint64_t n = 0;
  for (const auto& t : model())
    if (registered(t)) n += t.nbytes;
  return n;
}

enum class Fault {
  kNone,
  kAbortBetweenBatches,   // wsync_group_abort after batch A was delivered
  kKilledBetweenBatches,  // the sender process SIGKILLed after batch A
  kDestroyedMidUpdate,    // wsync_group_destroy after batch A, without a finalize
  kRefusedBucket,         // layers.3 sent with another shape: the receiver refuses bucket 6
  kCorruptedBucket,       // a byte of bucket 4 (big.weight's second chunk) flipped in flight
  kStalledBucket,         // bucket 2's bytes never sent: the receiver's timeout
  kAbortMidBucket,        // bucket 2 stalled, then wsync_group_abort from another thread
  kKilledMidBucket,       // bucket 2 stalled, then the sender process SIGKILLed
};

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kAbortBetweenBatches: return "abort_between_batches";
    case Fault::kKilledBetweenBatches: return "killed_between_batches";
    case Fault::kDestroyedMidUpdate: return "destroyed_mid_update";
    case Fault::kRefusedBucket: return "refused_bucket";
    case Fault::kCorruptedBucket: return "corrupted_bucket";
    case Fault::kStalledBucket: return "stalled_bucket";
    case Fault::kAbortMidBucket: return "abort_mid_bucket";
    case Fault::kKilledMidBucket: return "killed_mid_bucket";
  }
  return "?";
}

// ---- the sender process ------------------------------------------------------------------------

#define SENDER_FAIL(code, ...)                                                                   \
  do {                                                                                           \
    std::fprintf(stderr, "sender: " __VA_ARGS__);                                                \
    std::fprintf(stderr, ": %s: %s\n", wsync_status_name(st), wsync_last_error());             \
    return code;                                                                                 \
  } while (0)

void write_fault(const std::string& path, const char* kind, uint64_t at) {
  FILE* f = std::fopen(path.c_str(), "w");
  std::fprintf(f, "%s %llu\n", kind, static_cast<unsigned long long>(at));
  std::fclose(f);
}

// Publishes version 1, then version 2 with `fault`. Returns 0 when everything went as planned.
int run_sender(const std::string& dir, Fault fault) {
  const std::string fault_file = dir + "/fault";
  setenv("WSYNC_FAULTY_FILE", fault_file.c_str(), 1);
  const std::string addr_file = dir + "/store.addr";
  const std::string bucket = std::to_string(kBucket);
  wsync_option_t opts[] = {WSYNC_OPTION("bucket_bytes", bucket.c_str()),
                           WSYNC_OPTION("store_addr_file", addr_file.c_str()), WSYNC_OPTION("timeout_ms", "10000"),
                           WSYNC_OPTION("verify_payload", "1")};
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = 1;
  cfg.group_name = "state";
  cfg.transport = "faulty";
  cfg.options = opts;
  cfg.num_options = sizeof opts / sizeof opts[0];
  cfg.timeout_ms = 20000;
  wsync_group_t* g = nullptr;
  wsync_status_t st = wsync_group_init(&cfg, &g);
  if (st != WSYNC_OK) SENDER_FAIL(10, "init");
  Model m;
  m.spec = model();
  m.fill(1);
  if ((st = wsync_group_send_batch(g, m.descs.data(), kBatchA, -1)) != WSYNC_OK) SENDER_FAIL(11, "v1 batch A");
  if ((st = wsync_group_send_batch(g, m.descs.data() + kBatchA, m.descs.size() - kBatchA, -1)) != WSYNC_OK)
    SENDER_FAIL(12, "v1 batch B");
  if ((st = wsync_group_finalize(g, 1, -1)) != WSYNC_OK) SENDER_FAIL(13, "finalize 1");
  wsync_group_stats_t stats = WSYNC_GROUP_STATS_INIT;
  wsync_group_get_stats(g, &stats);
  const uint64_t v1_buckets = stats.buckets;  // the transport's send_post count so far
  if (fault == Fault::kCorruptedBucket) write_fault(fault_file, "corrupt", v1_buckets + 4 + 1);
  if (fault == Fault::kStalledBucket || fault == Fault::kAbortMidBucket || fault == Fault::kKilledMidBucket)
    write_fault(fault_file, "stall", v1_buckets + 2 + 1);

  m.fill(2);
  if (fault == Fault::kRefusedBucket) {  // layers.3: same bytes, another shape than registered
    wsync_tensor_t& t = m.descs[4];
    t.ndim = 2;
    t.shape[0] = 2;
    t.shape[1] = 2048;
  }
  if ((st = wsync_group_send_batch(g, m.descs.data(), kBatchA, -1)) != WSYNC_OK) SENDER_FAIL(20, "v2 batch A");
  if (fault == Fault::kKilledBetweenBatches || fault == Fault::kAbortBetweenBatches ||
      fault == Fault::kDestroyedMidUpdate) {
    // "Between batches" for the receiver: batch A delivered (send_batch returns once A is
    // released, since ABI 1.5, which may be before the receiver has it: a receive still posted
    // when the sender goes would make late writes possible).
    for (int i = 0; i < 2000; ++i) {
      wsync_group_get_stats(g, &stats);
      if (stats.batches >= 3) break;  // (version 1's two, and A)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (stats.batches < 3) SENDER_FAIL(24, "v2 batch A was not delivered within 20 s");
  }
  if (fault == Fault::kKilledBetweenBatches) raise(SIGKILL);
  if (fault == Fault::kDestroyedMidUpdate) {
    wsync_group_destroy(g);
    return 0;
  }
  if (fault == Fault::kAbortBetweenBatches) {
    wsync_group_abort(g);
    if ((st = wsync_group_finalize(g, 2, -1)) != WSYNC_ERR_ABORTED) SENDER_FAIL(21, "finalize after abort");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the engine reads ABORTED before CLOSED
    wsync_group_destroy(g);
    return 0;
  }
  std::thread fault_thread;
  if (fault == Fault::kAbortMidBucket || fault == Fault::kKilledMidBucket) {
    fault_thread = std::thread([g, fault] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the receiver waits for the bytes
      if (fault == Fault::kKilledMidBucket) raise(SIGKILL);
      wsync_group_abort(g);
    });
  }
  st = wsync_group_send_batch(g, m.descs.data() + kBatchA, m.descs.size() - kBatchA, -1);
  if (fault_thread.joinable()) fault_thread.join();
  const wsync_status_t want = fault == Fault::kNone             ? WSYNC_OK
                              : fault == Fault::kAbortMidBucket ? WSYNC_ERR_ABORTED
                              : fault == Fault::kRefusedBucket || fault == Fault::kCorruptedBucket
                                  ? WSYNC_ERR_PROTOCOL
                                  : WSYNC_ERR_PEER_FAILED;  // a stalled bucket, as send_wait reports it
  if (st != want) SENDER_FAIL(22, "v2 batch B returned %s, expected %s", wsync_status_name(st), wsync_status_name(want));
  if (fault == Fault::kNone && (st = wsync_group_finalize(g, 2, -1)) != WSYNC_OK) SENDER_FAIL(23, "finalize 2");
  if (fault != Fault::kNone) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  wsync_group_destroy(g);
  return 0;
}

// ---- the engine: one receiver in this process --------------------------------------------------

struct Engine {
  bool staged = false;
  wsync_receiver_t* rx = nullptr;
  std::vector<synth_tensor_t> spec = model();
  std::map<std::string, std::vector<uint8_t>> buffers;  // the registered parameters

  ~Engine() { wsync_receiver_destroy(rx); }

  void join(const std::string& addr_file) {
    const std::string addr = read_addr_file(addr_file, 20000);
    ASSERT_FALSE(addr.empty()) << "the sender wrote no store address";
    const std::string timeout = std::to_string(kReceiverTimeoutMs);
    wsync_option_t opts[] = {WSYNC_OPTION("receive_mode", staged ? "staged" : "in_place"),
                             WSYNC_OPTION("timeout_ms", timeout.c_str())};
    wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
    cfg.rank = 1;
    cfg.store_addr = addr.c_str();
    cfg.group_name = "state";
    cfg.options = opts;
    cfg.num_options = 2;
    cfg.timeout_ms = 20000;
    ASSERT_EQ(WSYNC_OK, wsync_receiver_init(&cfg, &rx)) << wsync_last_error();
    // What the engine loaded before any update: version 100.
    std::vector<wsync_tensor_t> regs;
    for (const auto& t : spec) {
      if (!registered(t)) continue;
      auto& b = buffers[t.name];
      b.resize(t.nbytes);
      synth_fill(&t, 100, b.data());
      regs.push_back(desc_of(t, b.data()));
    }
    ASSERT_EQ(WSYNC_OK, wsync_receiver_register(rx, regs.data(), regs.size())) << wsync_last_error();
  }

  std::map<std::string, uint64_t> checksums() const {
    std::map<std::string, uint64_t> out;
    for (const auto& kv : buffers) out[kv.first] = synth_checksum(kv.second.data(), kv.second.size());
    return out;
  }

  // Every registered buffer against the bytes of `version`.
  std::vector<std::string> differing_from(uint64_t version) const {
    std::vector<std::string> bad;
    for (const auto& t : spec)
      if (registered(t) && synth_checksum(buffers.at(t.name).data(), t.nbytes) != synth_expected_checksum(&t, version))
        bad.push_back(t.name);
    return bad;
  }

  wsync_receiver_state_t state() const {
    wsync_receiver_state_t s = WSYNC_RECEIVER_STATE_INIT;
    EXPECT_EQ(WSYNC_OK, wsync_receiver_get_state(rx, &s)) << wsync_last_error();
    return s;
  }

  std::vector<std::string> touched() const {
    std::vector<std::string> out;
    const wsync_receiver_state_t s = state();
    for (uint64_t i = 0; i < s.num_touched; ++i) {
      const char* n = wsync_receiver_touched_name(rx, i);
      out.push_back(n ? n : "(NULL)");
    }
    EXPECT_EQ(nullptr, wsync_receiver_touched_name(rx, s.num_touched));
    return out;
  }

  // The buckets of one update, checked, up to its COMMIT event (returned as OK with *commit set),
  // an ABORTED or CLOSED event (OK, *commit 0) or a failure (its status).
  wsync_status_t receive_update(uint64_t* commit, std::string* why) {
    *commit = 0;
    for (;;) {
      wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
      const wsync_status_t st = wsync_receiver_next(rx, &ev, 10000);
      if (st != WSYNC_OK) {
        *why = wsync_last_error();
        return st;
      }
      if (ev.kind == WSYNC_EVENT_COMMIT) {
        *commit = ev.version;
        return WSYNC_OK;
      }
      if (ev.kind == WSYNC_EVENT_ABORTED || ev.kind == WSYNC_EVENT_CLOSED) return WSYNC_OK;
      if (ev.kind != WSYNC_EVENT_BUCKET) {
        ADD_FAILURE() << "unexpected event " << ev.kind;
        return WSYNC_ERR_INTERNAL;
      }
      for (uint64_t i = 0; i < ev.num_tensors; ++i) {
        const wsync_tensor_t& t = ev.tensors[i];
        auto it = buffers.find(t.name);
        if (it == buffers.end()) {
          EXPECT_EQ(WSYNC_PLACED_VIEW, ev.placed[i]) << t.name;
          continue;
        }
        EXPECT_EQ(staged ? WSYNC_PLACED_STAGED : WSYNC_PLACED_IN_PLACE, ev.placed[i]) << t.name;
        EXPECT_EQ(static_cast<void*>(it->second.data()), t.data) << t.name << ": reported at its registered buffer";
      }
    }
  }

  // After the update's end: read events until CLOSED (or the sender is gone).
  void drain() {
    for (int i = 0; i < 8; ++i) {
      wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
      const wsync_status_t st = wsync_receiver_next(rx, &ev, 5000);
      if (st == WSYNC_OK && ev.kind == WSYNC_EVENT_CLOSED) return;
      if (st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_TIMEOUT) return;
    }
  }
};

// Version 1 arrives and commits; in staged mode the buffers change only in wsync_receiver_commit.
void publish_version_1(Engine& e) {
  uint64_t commit = 0;
  std::string why;
  ASSERT_EQ(WSYNC_OK, e.receive_update(&commit, &why)) << why;
  ASSERT_EQ(1u, commit);
  wsync_receiver_state_t s = e.state();
  EXPECT_EQ(1u, s.pending_version);
  EXPECT_EQ(0u, s.committed_version);
  EXPECT_EQ(7u, s.num_touched);
  if (e.staged) {
    EXPECT_EQ(WSYNC_BUFFERS_CLEAN, s.buffers);
    EXPECT_EQ(std::vector<std::string>{}, e.differing_from(100)) << "staged: the buffers changed before the commit";
    EXPECT_EQ(registered_bytes(), s.staged_bytes);
  } else {
    EXPECT_EQ(WSYNC_BUFFERS_MIXED, s.buffers);
    EXPECT_EQ(0u, s.staged_bytes);
  }
  ASSERT_EQ(WSYNC_OK, wsync_receiver_commit(e.rx, 1)) << wsync_last_error();
  EXPECT_EQ(std::vector<std::string>{}, e.differing_from(1));
  s = e.state();
  EXPECT_EQ(WSYNC_BUFFERS_CLEAN, s.buffers);
  EXPECT_EQ(1u, s.committed_version);
  EXPECT_EQ(0u, s.pending_version);
  EXPECT_EQ(0u, s.num_touched);
}

struct Expect {
  wsync_status_t status;           // of the next() that ended version 2 (OK: an ABORTED event)
  const char* words;               // in its message
  std::vector<std::string> touched;  // in place
  int late_writes;                 // in place
};

Expect expected(Fault f) {
  const std::vector<std::string> a = {"layers.0.weight", "layers.1.weight"};
  const std::vector<std::string> a2 = {"layers.0.weight", "layers.1.weight", "layers.2.weight"};
  const std::vector<std::string> a2big = {"layers.0.weight", "layers.1.weight", "layers.2.weight", "big.weight"};
  switch (f) {
    case Fault::kAbortBetweenBatches: return {WSYNC_OK, "", a, 0};
    case Fault::kKilledBetweenBatches: return {WSYNC_ERR_PEER_FAILED, "", a, 0};
    case Fault::kDestroyedMidUpdate: return {WSYNC_OK, "", a, 0};
    case Fault::kRefusedBucket: return {WSYNC_ERR_PROTOCOL, "layers.3.weight", a2big, 0};
    // With the default window of 2 the bucket after the failed one is on the wire too: its
    // tensor is touched (big.weight, after bucket 2), and its receive was posted when the update
    // failed (late writes possible).
    case Fault::kCorruptedBucket: return {WSYNC_ERR_PROTOCOL, "checksum", a2big, 1};
    case Fault::kStalledBucket: return {WSYNC_ERR_TIMEOUT, "did not arrive", a2big, 1};
    case Fault::kAbortMidBucket: return {WSYNC_ERR_ABORTED, "abandoned", a2big, 1};
    // The control channel ("the sender vanished") or the transport ("rank 0 (the sender) failed")
    // may notice first.
    case Fault::kKilledMidBucket: return {WSYNC_ERR_PEER_FAILED, "bucket 2 of update 2", a2big, 1};
    case Fault::kNone: break;
  }
  return {WSYNC_OK, "", {}, 0};
}

// Transport 'faulty' from its folder; a group secret for sender and engine (ctest gives one; a
// direct run of this binary gets its own).
void use_test_environment() {
  setenv("WSYNC_PLUGIN_PATH", WSYNC_TEST_FAULTY_DIR, 1);
  setenv("WSYNC_GROUP_SECRET", "receiver-state-test-secret-0123456789abcdef", 0);
}

class ReceiverState : public ::testing::TestWithParam<std::tuple<Fault, bool>> {
 protected:
  static void SetUpTestSuite() { use_test_environment(); }
};

TEST_P(ReceiverState, RegisteredBuffersThroughAFailedUpdate) {
  const Fault fault = std::get<0>(GetParam());
  const std::string dir = temp_dir();
  const pid_t sender = spawn([dir, fault] { return run_sender(dir, fault); });
  Engine e;
  e.staged = std::get<1>(GetParam());
  e.join(dir + "/store.addr");
  if (HasFatalFailure()) return;
  publish_version_1(e);
  if (HasFatalFailure()) return;
  const std::map<std::string, uint64_t> before = e.checksums();

  uint64_t commit = 0;
  std::string why;
  const wsync_status_t st = e.receive_update(&commit, &why);
  const Expect want = expected(fault);
  EXPECT_EQ(want.status, st) << wsync_status_name(st) << ": " << why;
  EXPECT_NE(std::string::npos, why.find(want.words)) << why;
  EXPECT_EQ(0u, commit) << "version 2 must not commit";

  const wsync_receiver_state_t s = e.state();
  EXPECT_EQ(e.staged ? WSYNC_RECEIVE_STAGED : WSYNC_RECEIVE_IN_PLACE, s.receive_mode);
  EXPECT_EQ(1u, s.committed_version);
  EXPECT_EQ(0u, s.pending_version);
  EXPECT_EQ(1u, wsync_receiver_committed_version(e.rx));
  if (e.staged) {
    EXPECT_EQ(before, e.checksums()) << "staged: a registered buffer changed";
    EXPECT_EQ(WSYNC_BUFFERS_CLEAN, s.buffers);
    EXPECT_EQ(0u, s.num_touched);
    EXPECT_EQ(0, s.late_writes);
    // Staging for every registered tensor, kept for reuse (or, once the transport gave up on a
    // receive into it, until destroy).
    EXPECT_EQ(registered_bytes(), s.staged_bytes);
  } else {
    EXPECT_EQ(WSYNC_BUFFERS_MIXED, s.buffers);
    EXPECT_EQ(want.touched, e.touched());
    EXPECT_EQ(want.late_writes, s.late_writes);
    EXPECT_EQ(0u, s.staged_bytes);
    // Exactly those: every other buffer still holds version 1, and the first two (delivered
    // whole) hold version 2.
    const std::map<std::string, uint64_t> now = e.checksums();
    for (const auto& t : e.spec) {
      if (!registered(t)) continue;
      const bool touched = std::find(want.touched.begin(), want.touched.end(), t.name) != want.touched.end();
      if (!touched) {
        EXPECT_EQ(before.at(t.name), now.at(t.name)) << t.name << " changed but is not reported touched";
      }
    }
    for (size_t i = 0; i < kBatchA; ++i)
      EXPECT_EQ(synth_expected_checksum(&e.spec[i], 2), now.at(e.spec[i].name)) << e.spec[i].name;
  }

  e.drain();
  const wsync_receiver_state_t after = e.state();  // what followed the failure changed nothing
  EXPECT_EQ(s.buffers, after.buffers);
  EXPECT_EQ(s.num_touched, after.num_touched);
  EXPECT_EQ(1u, after.committed_version);
  wsync_receiver_destroy(e.rx);
  e.rx = nullptr;
  if (e.staged) {
    EXPECT_EQ(before, e.checksums()) << "staged: a registered buffer changed by destroy";
  }
  const bool killed = fault == Fault::kKilledBetweenBatches || fault == Fault::kKilledMidBucket;
  EXPECT_EQ(killed ? 128 + SIGKILL : 0, wait_child(sender, 30000));
}

INSTANTIATE_TEST_SUITE_P(
    Faults, ReceiverState,
    ::testing::Combine(::testing::Values(Fault::kAbortBetweenBatches, Fault::kKilledBetweenBatches,
                                         Fault::kDestroyedMidUpdate,
                                         Fault::kRefusedBucket, Fault::kCorruptedBucket, Fault::kStalledBucket,
                                         Fault::kAbortMidBucket, Fault::kKilledMidBucket),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Fault, bool>>& i) {
      return std::string(fault_name(std::get<0>(i.param))) + (std::get<1>(i.param) ? "_staged" : "_in_place");
    });

// No fault: version 2 arrives whole. In place the buffers hold it at the COMMIT event (MIXED until
// the commit); staged they hold version 1 until wsync_receiver_commit copies it in, and a staged
// name cannot be registered again in between.
class ReceiverCommit : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() { use_test_environment(); }
};

TEST_P(ReceiverCommit, BuffersChangeWhereTheModeSays) {
  const std::string dir = temp_dir();
  const pid_t sender = spawn([dir] { return run_sender(dir, Fault::kNone); });
  Engine e;
  e.staged = GetParam();
  e.join(dir + "/store.addr");
  if (HasFatalFailure()) return;
  publish_version_1(e);
  if (HasFatalFailure()) return;

  uint64_t commit = 0;
  std::string why;
  ASSERT_EQ(WSYNC_OK, e.receive_update(&commit, &why)) << why;
  ASSERT_EQ(2u, commit);
  wsync_receiver_state_t s = e.state();
  EXPECT_EQ(2u, s.pending_version);
  EXPECT_EQ(1u, s.committed_version);
  const std::vector<std::string> all = {"layers.0.weight", "layers.1.weight", "layers.2.weight", "big.weight",
                                        "layers.3.weight", "layers.4.weight", "layers.5.weight"};
  EXPECT_EQ(all, e.touched());
  if (e.staged) {
    EXPECT_EQ(WSYNC_BUFFERS_CLEAN, s.buffers);
    EXPECT_EQ(std::vector<std::string>{}, e.differing_from(1)) << "staged: changed before the commit";
    wsync_tensor_t again = desc_of(e.spec[0], e.buffers[e.spec[0].name].data());
    EXPECT_EQ(WSYNC_ERR_INVALID_STATE, wsync_receiver_register(e.rx, &again, 1));
    EXPECT_NE(std::string::npos, std::string(wsync_last_error()).find("layers.0.weight")) << wsync_last_error();
  } else {
    EXPECT_EQ(WSYNC_BUFFERS_MIXED, s.buffers);
    EXPECT_EQ(std::vector<std::string>{}, e.differing_from(2));
  }
  ASSERT_EQ(WSYNC_OK, wsync_receiver_commit(e.rx, 2)) << wsync_last_error();
  EXPECT_EQ(std::vector<std::string>{}, e.differing_from(2));
  s = e.state();
  EXPECT_EQ(WSYNC_BUFFERS_CLEAN, s.buffers);
  EXPECT_EQ(2u, s.committed_version);
  EXPECT_EQ(0u, s.pending_version);
  EXPECT_EQ(0u, s.num_touched);
  EXPECT_EQ(e.staged ? registered_bytes() : 0u, s.staged_bytes);
  if (e.staged) {  // after the commit the name may be registered again
    wsync_tensor_t again = desc_of(e.spec[0], e.buffers[e.spec[0].name].data());
    EXPECT_EQ(WSYNC_OK, wsync_receiver_register(e.rx, &again, 1)) << wsync_last_error();
  }
  e.drain();
  EXPECT_EQ(0, wait_child(sender, 30000));
}

INSTANTIATE_TEST_SUITE_P(Modes, ReceiverCommit, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "staged" : "in_place"; });

}  // namespace
