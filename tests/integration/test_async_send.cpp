// The asynchronous send (ABI 1.2: wsync_group_send_start / wsync_group_send_wait) over the public
// ABI, with receiver processes on loopback through the real store, control channel and UCX
// transport. Receivers check every tensor of every version byte for byte.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "wsync.h"

using namespace harness;

namespace {

double secs_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string error() { return wsync_last_error(); }

struct Sender {
  std::string dir = temp_dir();
  std::string addr_file = dir + "/store.addr";
  wsync_group_t* g = nullptr;

  // `route`: the group option route (nullptr: the default).
  wsync_status_t init(uint32_t receivers, uint64_t bucket_bytes, int64_t timeout_ms, uint32_t depth = 2,
                      const char* route = nullptr) {
    const std::string bb = std::to_string(bucket_bytes), tm = std::to_string(timeout_ms), d = std::to_string(depth);
    wsync_option_t opts[] = {WSYNC_OPTION("bucket_bytes", bb.c_str()), WSYNC_OPTION("store_addr_file", addr_file.c_str()),
                             WSYNC_OPTION("timeout_ms", tm.c_str()), WSYNC_OPTION("staging_buckets", d.c_str()),
                             WSYNC_OPTION("route", route)};
    wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
    cfg.num_receivers = receivers;
    cfg.group_name = "it";
    cfg.options = opts;
    cfg.num_options = route != nullptr ? 5 : 4;
    return wsync_group_init(&cfg, &g);
  }
  ~Sender() { wsync_group_destroy(g); }
};

ReceiverPlan plan_for(const Sender& s, uint32_t rank, const std::vector<synth_tensor_t>& spec, uint64_t versions,
                      bool reg) {
  ReceiverPlan p;
  p.rank = rank;
  p.addr_file = s.addr_file;
  p.spec = spec;
  p.versions = versions;
  p.register_buffers = reg;
  return p;
}

// Tensors of exactly one 1 MiB bucket each (the tests' bucket_bytes): each goes straight from the
// caller's memory, so its batch stays borrowed until the receivers said READY and its bytes went
// out. A stalling receiver keeps such a batch borrowed (a packed one is released once packed).
std::vector<synth_tensor_t> one_bucket_tensors(size_t count) {
  std::vector<synth_tensor_t> out;
  for (size_t i = 0; i < count; ++i)
    out.push_back(tensor_of("big." + std::to_string(i) + ".weight", WSYNC_DTYPE_FLOAT32, {256, 1024}));
  return out;
}

// A receiver that joins and then does not ask for events for `stall_ms`: batches stay in flight.
// Exits 0 after a clean CLOSED, 2 when the sender gave up or left, 1 on anything else.
pid_t stalling_receiver(const std::string& addr_file, int stall_ms) {
  return spawn([=] {
    std::string addr = read_addr_file(addr_file, 10000);
    wsync_receiver_t* rx = nullptr;
    if (join(addr, 1, "it", -1, &rx) != WSYNC_OK) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    wsync_status_t st;
    bool aborted = false;  // (the sender's ABORT_UPDATE, read even when its connection is gone by then)
    while ((st = wsync_receiver_next(rx, &ev, 5000)) == WSYNC_OK && ev.kind != WSYNC_EVENT_CLOSED) {
      aborted |= ev.kind == WSYNC_EVENT_ABORTED;
      if (ev.kind == WSYNC_EVENT_COMMIT && (st = wsync_receiver_commit(rx, ev.version)) != WSYNC_OK) break;
    }
    if (st != WSYNC_OK) std::fprintf(stderr, "stalling receiver: %s: %s\n", wsync_status_name(st), wsync_last_error());
    wsync_receiver_destroy(rx);
    if (st == WSYNC_OK) return aborted ? 2 : 0;
    return st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_ABORTED ? 2 : 1;  // 2: the sender gave up or left
  });
}

// Three versions, each in three batches started before the earlier ones were delivered. After a
// batch's wait returns, its tensor memory is overwritten at once while later batches still move:
// wsync must not read it any more, so every receiver still sees the right bytes.
TEST(AsyncSend, BatchesInFlightOverlapAndBorrowOnlyUntilTheirWait) {
  Sender s;
  Model m;
  m.spec = tensor_set(45, 3u << 20);  // a 3 MiB tensor split across 1 MiB buckets
  pid_t placed = spawn([p = plan_for(s, 1, m.spec, 3, true)] { return run_receiver(p); });
  pid_t views = spawn([p = plan_for(s, 2, m.spec, 3, false)] { return run_receiver(p); });
  ASSERT_EQ(WSYNC_OK, s.init(2, 1u << 20, 20000)) << error();
  uint64_t expected_ticket = 1;
  for (uint64_t v = 1; v <= 3; ++v) {
    m.fill(v);
    const size_t per = m.descs.size() / 3;
    std::vector<uint64_t> tickets;
    for (size_t b = 0; b < 3; ++b) {
      const size_t off = b * per, n = b == 2 ? m.descs.size() - off : per;
      uint64_t t = 0;
      ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data() + off, n, -1, &t)) << error();
      EXPECT_EQ(t, expected_ticket++);
      tickets.push_back(t);
      if (b == 0) continue;
      // The batch before this one: once its wait returns, its memory is the caller's again.
      ASSERT_EQ(WSYNC_OK, wsync_group_send_wait(s.g, tickets[b - 1], -1)) << error();
      for (size_t i = (b - 1) * per; i < b * per; ++i) std::memset(m.descs[i].data, 0xEE, m.descs[i].nbytes);
    }
    ASSERT_EQ(WSYNC_OK, wsync_group_send_wait(s.g, tickets.back(), -1)) << error();
    EXPECT_EQ(WSYNC_OK, wsync_group_send_wait(s.g, tickets.front(), 0));  // delivered long ago: at once
    ASSERT_EQ(WSYNC_OK, wsync_group_finalize(s.g, v, -1)) << error();
  }
  wsync_group_stats_t st = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(s.g, &st));
  EXPECT_EQ(st.committed_version, 3u);
  EXPECT_EQ(st.batches, 9u);
  EXPECT_EQ(st.tensors, 3u * m.descs.size());
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(0, wait_child(placed, 20000));
  EXPECT_EQ(0, wait_child(views, 20000));
}

TEST(AsyncSend, FinalizeDeliversTheBatchesStillInFlightFirst) {
  Sender s;
  Model m;
  m.spec = tensor_set(20, 1u << 20);
  pid_t rx = spawn([p = plan_for(s, 1, m.spec, 1, false)] { return run_receiver(p); });
  ASSERT_EQ(WSYNC_OK, s.init(1, 1u << 20, 20000)) << error();
  m.fill(1);
  uint64_t t1 = 0, t2 = 0;
  const size_t half = m.descs.size() / 2;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data(), half, -1, &t1)) << error();
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data() + half, m.descs.size() - half, -1, &t2)) << error();
  ASSERT_EQ(WSYNC_OK, wsync_group_finalize(s.g, 1, -1)) << error();  // no wait first
  EXPECT_EQ(WSYNC_OK, wsync_group_send_wait(s.g, t2, 0));
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(0, wait_child(rx, 20000));
}

TEST(AsyncSend, TicketsAreCheckedAndWaitZeroNeverBlocks) {
  Sender s;
  Model m;
  m.spec = one_bucket_tensors(2);
  pid_t rx = stalling_receiver(s.addr_file, 1500);
  ASSERT_EQ(WSYNC_OK, s.init(1, 1u << 20, 20000)) << error();
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, wsync_group_send_wait(s.g, 0, 0));
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, wsync_group_send_wait(s.g, 1, 0));
  EXPECT_NE(std::string::npos, error().find("never handed out")) << error();
  m.fill(1);
  uint64_t t = 0;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data(), m.descs.size(), -1, &t)) << error();
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, wsync_group_send_wait(s.g, t + 1, 0));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(WSYNC_ERR_TIMEOUT, wsync_group_send_wait(s.g, t, 0));  // the receiver is stalling
  EXPECT_LT(secs_since(t0), 0.2);
  EXPECT_NE(std::string::npos, error().find("still in flight")) << error();
  EXPECT_EQ(WSYNC_OK, wsync_group_send_wait(s.g, t, 10000)) << error();  // the receiver wakes up
  EXPECT_EQ(WSYNC_OK, wsync_group_finalize(s.g, 1, -1)) << error();
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(0, wait_child(rx, 10000));
}

// At most staging_buckets batches in flight: one more start waits for room, then times out and
// starts nothing; the group stays usable. A refused batch (a name already in flight) starts
// nothing either.
TEST(AsyncSend, DepthIsBoundedAndRefusalsStartNothing) {
  Sender s;
  Model m;
  m.spec = one_bucket_tensors(6);
  pid_t rx = stalling_receiver(s.addr_file, 2500);
  ASSERT_EQ(WSYNC_OK, s.init(1, 1u << 20, 20000, 2)) << error();
  m.fill(1);
  uint64_t t1 = 0, t2 = 0, t3 = 0;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data(), 2, -1, &t1)) << error();
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data() + 2, 2, -1, &t2)) << error();
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, wsync_group_send_start(s.g, m.descs.data(), 1, -1, &t3));  // in flight already
  EXPECT_NE(std::string::npos, error().find("already sent in this update")) << error();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(WSYNC_ERR_TIMEOUT, wsync_group_send_start(s.g, m.descs.data() + 4, 2, 300, &t3));
  EXPECT_GE(secs_since(t0), 0.25);
  EXPECT_NE(std::string::npos, error().find("nothing was started")) << error();
  EXPECT_EQ(t3, 0u);
  // Once the receiver wakes up the same batch goes, with the next ticket.
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data() + 4, 2, 20000, &t3)) << error();
  EXPECT_EQ(t3, t2 + 1);
  EXPECT_EQ(WSYNC_OK, wsync_group_send_wait(s.g, t3, -1)) << error();
  EXPECT_EQ(WSYNC_OK, wsync_group_finalize(s.g, 1, -1)) << error();
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(0, wait_child(rx, 10000));
}

// timeout_ms 0 skips only what can be skipped: the wait for room. A receiver that takes its time
// still gets the group's timeout inside send_batch and finalize.
TEST(AsyncSend, ZeroTimeoutSkipsOnlyTheWaitForRoom) {
  Sender s;
  Model m;
  m.spec = one_bucket_tensors(6);
  pid_t rx = stalling_receiver(s.addr_file, 800);
  ASSERT_EQ(WSYNC_OK, s.init(1, 1u << 20, 20000, 2)) << error();
  m.fill(1);
  uint64_t t1 = 0, t2 = 0, t3 = 0;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data(), 2, 0, &t1)) << error();
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data() + 2, 2, 0, &t2)) << error();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(WSYNC_ERR_TIMEOUT, wsync_group_send_start(s.g, m.descs.data() + 4, 2, 0, &t3));
  EXPECT_LT(secs_since(t0), 0.2);
  EXPECT_NE(std::string::npos, error().find("nothing was started")) << error();
  EXPECT_EQ(WSYNC_OK, wsync_group_send_wait(s.g, t2, -1)) << error();  // the receiver woke up after 800 ms
  EXPECT_EQ(WSYNC_OK, wsync_group_send_batch(s.g, m.descs.data() + 4, 2, 0)) << error();
  EXPECT_EQ(WSYNC_OK, wsync_group_finalize(s.g, 1, 0)) << error();
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(0, wait_child(rx, 10000));
}

// A receiver that stops answering: the batch fails once the group's timeout passes, and a caller
// polling send_wait learns it (TIMEOUT from send_wait only ever means "not yet").
TEST(AsyncSend, AReceiverTimeoutEndsAPollingWait) {
  Sender s;
  Model m;
  m.spec = one_bucket_tensors(2);
  pid_t rx = stalling_receiver(s.addr_file, 3000);
  ASSERT_EQ(WSYNC_OK, s.init(1, 1u << 20, 300)) << error();
  m.fill(1);
  uint64_t t = 0;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data(), m.descs.size(), -1, &t)) << error();
  auto t0 = std::chrono::steady_clock::now();
  wsync_status_t st = WSYNC_ERR_TIMEOUT;
  while (st == WSYNC_ERR_TIMEOUT && secs_since(t0) < 5) st = wsync_group_send_wait(s.g, t, 100);
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, st) << wsync_status_name(st) << ": " << error();
  EXPECT_LT(secs_since(t0), 2.0);
  EXPECT_NE(std::string::npos, error().find("within 300 ms")) << error();
  EXPECT_NE(std::string::npos, error().find("rank 1")) << error();
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, wsync_group_send_wait(s.g, t, 0));  // and again, the same
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(2, wait_child(rx, 10000));
}

// The last bucket fails after it moved (the test transport 'stub' delivers zeros, and with
// verify_payload the receiver's checksum refuses them in its ACK) while finalize is already
// queued behind the batch: finalize fails, the receiver is told to drop the update, and it never
// sees an END_UPDATE, let alone a COMMIT.
TEST(AsyncSend, AFinalizeQueuedBehindAFailingBatchCommitsNothing) {
  Sender s;
  std::vector<float> w(1024, 1.5f);
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  t.name = "w";
  t.dtype = WSYNC_DTYPE_FLOAT32;
  t.data = w.data();
  t.nbytes = w.size() * sizeof(float);
  t.ndim = 1;
  t.shape[0] = static_cast<int64_t>(w.size());
  const std::string addr_file = s.addr_file;
  pid_t rx = spawn([addr_file] {
    const std::string addr = read_addr_file(addr_file, 10000);
    wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
    cfg.rank = 1;
    cfg.store_addr = addr.c_str();
    cfg.group_name = "it";
    cfg.transport = WSYNC_TEST_STUB_TRANSPORT;
    wsync_receiver_t* r = nullptr;
    if (wsync_receiver_init(&cfg, &r) != WSYNC_OK) return 1;
    int rc = 0, errors = 0;
    for (int i = 0; i < 20 && rc == 0; ++i) {
      wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
      wsync_status_t st = wsync_receiver_next(r, &ev, 5000);
      if (st == WSYNC_OK && ev.kind == WSYNC_EVENT_COMMIT) rc = 3;  // an update it never had
      if (st == WSYNC_OK && ev.kind == WSYNC_EVENT_CLOSED) break;
      if (st == WSYNC_ERR_TIMEOUT || st == WSYNC_ERR_PEER_FAILED) rc = 4;
      // Its own refusal of the bucket is the one error; a second is an END_UPDATE the sender
      // should never have sent.
      if (st != WSYNC_OK && rc == 0 && ++errors > 1) {
        std::fprintf(stderr, "receiver: %s: %s\n", wsync_status_name(st), wsync_last_error());
        rc = 5;
      }
    }
    wsync_receiver_destroy(r);
    return rc;
  });
  wsync_option_t opts[] = {WSYNC_OPTION("store_addr_file", s.addr_file.c_str()), WSYNC_OPTION("verify_payload", "1")};
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = 1;
  cfg.group_name = "it";
  cfg.transport = WSYNC_TEST_STUB_TRANSPORT;
  cfg.options = opts;
  cfg.num_options = 2;
  cfg.timeout_ms = 10000;
  ASSERT_EQ(WSYNC_OK, wsync_group_init(&cfg, &s.g)) << error();
  uint64_t ticket = 0;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, &t, 1, -1, &ticket)) << error();
  EXPECT_NE(WSYNC_OK, wsync_group_finalize(s.g, 7, -1));  // queued behind the batch
  EXPECT_NE(std::string::npos, error().find("rank 1")) << error();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // when the pipeline thread would commit
  wsync_group_stats_t stats = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(s.g, &stats));
  EXPECT_EQ(stats.committed_version, 0u);
  EXPECT_EQ(stats.updates, 0u);
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(0, wait_child(rx, 15000));
}

TEST(AsyncSend, AbortWhileBatchesAreInFlight) {
  Sender s;
  Model m;
  m.spec = one_bucket_tensors(8);
  pid_t rx = stalling_receiver(s.addr_file, 3000);
  ASSERT_EQ(WSYNC_OK, s.init(1, 1u << 20, 30000)) << error();
  m.fill(1);
  uint64_t t1 = 0, t2 = 0;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data(), 4, -1, &t1)) << error();
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data() + 4, 4, -1, &t2)) << error();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    wsync_group_abort(s.g);
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(WSYNC_ERR_ABORTED, wsync_group_send_wait(s.g, t2, 30000)) << error();
  EXPECT_LT(secs_since(t0), 1.5);
  aborter.join();
  EXPECT_EQ(WSYNC_ERR_ABORTED, wsync_group_send_wait(s.g, t1, 0));  // the earlier one too
  uint64_t t3 = 0;
  EXPECT_EQ(WSYNC_ERR_ABORTED, wsync_group_send_start(s.g, m.descs.data(), 1, -1, &t3));
  EXPECT_EQ(WSYNC_ERR_ABORTED, wsync_group_finalize(s.g, 1, 1000));
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(2, wait_child(rx, 10000));  // it wakes to a sender that gave up and is gone, and says so
}

// A receiver killed while two batches are in flight: both waits report it, by rank, within the
// timeout; the group is broken and says why; the other receiver is told and exits cleanly.
TEST(AsyncSend, ReceiverDyingWithTwoBatchesInFlight) {
  Sender s;
  Model m;
  m.spec = tensor_set(24, 4u << 20);
  pid_t alive = spawn([p = plan_for(s, 1, m.spec, 0, false)] { return run_receiver(p); });
  // Rank 2 joins, reads nothing for a while (both batches start and wait on it), then dies.
  const std::string addr_file = s.addr_file;
  pid_t dead = spawn([addr_file] {
    wsync_receiver_t* rx = nullptr;
    if (join(read_addr_file(addr_file, 10000), 2, "it", -1, &rx) != WSYNC_OK) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    raise(SIGKILL);
    return 2;
  });
  const int64_t timeout = 5000;
  ASSERT_EQ(WSYNC_OK, s.init(2, 1u << 20, timeout)) << error();
  m.fill(1);
  const size_t half = m.descs.size() / 2;
  uint64_t t1 = 0, t2 = 0;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data(), half, -1, &t1)) << error();
  ASSERT_EQ(WSYNC_OK, wsync_group_send_start(s.g, m.descs.data() + half, m.descs.size() - half, -1, &t2)) << error();
  auto t0 = std::chrono::steady_clock::now();
  wsync_status_t st = wsync_group_send_wait(s.g, t2, 30000);
  EXPECT_TRUE(st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_TIMEOUT) << wsync_status_name(st) << ": " << error();
  EXPECT_NE(std::string::npos, error().find("rank 2")) << error();
  EXPECT_LT(secs_since(t0), timeout / 1000.0 + 2.0);
  // Batch 1 reports the same failure, unless all of it was packed into staging before (then it was
  // released, and its wait stays OK: wsync no longer read its tensors).
  const wsync_status_t st1 = wsync_group_send_wait(s.g, t1, 0);
  EXPECT_TRUE(st1 == st || st1 == WSYNC_OK) << wsync_status_name(st1) << ": " << error();
  uint64_t t3 = 0;
  // A start after the failure reports it, with its status (not INVALID_STATE, before 0.7.0).
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, wsync_group_send_start(s.g, m.descs.data(), 1, -1, &t3));
  EXPECT_NE(std::string::npos, error().find("rank 2")) << error();
  EXPECT_EQ(128 + SIGKILL, wait_child(dead, 10000));
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(0, wait_child(alive, 10000));
}

// A batch packed into host staging is released at once: its wait (and send_batch) returns while
// the receiver has not even read the MANIFEST, and the caller may overwrite the tensors. Delivery
// is what finalize waits for: the receiver, woken later, still gets every byte as it was sent.
// (Before ABI 1.5 the wait waited for every ACK, and this send_batch ran into the 5 s timeout.)
TEST(AsyncSend, APackedBatchIsReleasedBeforeItsReceiverAnswers) {
  Sender s;
  Model m;
  m.spec = tensor_set(12, 0);  // small tensors: packed, several to a bucket
  const std::string addr_file = s.addr_file;
  const std::string go = s.dir + "/go";
  const std::vector<synth_tensor_t> spec = m.spec;
  pid_t rx = spawn([addr_file, go, spec] {
    ReceiverPlan p;
    p.addr_file = addr_file;
    p.spec = spec;
    p.versions = 1;
    // Joins, then reads nothing until the sender's send_batch returned (the file appears).
    p.before_first_event = [go] {
      for (int i = 0; i < 3000 && ::access(go.c_str(), F_OK) != 0; ++i)  // (30 s at most)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    };
    return run_receiver(p);
  });
  ASSERT_EQ(WSYNC_OK, s.init(1, 1u << 20, 5000)) << error();
  m.fill(1);
  ASSERT_EQ(WSYNC_OK, wsync_group_send_batch(s.g, m.descs.data(), m.descs.size(), -1)) << error();
  wsync_group_stats_t st = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(s.g, &st));
  EXPECT_EQ(st.batches, 0u);  // released, not delivered: nobody acknowledged it yet
  for (auto& d : m.data)  // the caller's again
    if (!d.empty()) std::memset(d.data(), 0xEE, d.size());
  std::FILE* f = std::fopen(go.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  ASSERT_EQ(WSYNC_OK, wsync_group_finalize(s.g, 1, -1)) << error();  // the receiver checks version 1's bytes
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(s.g, &st));
  EXPECT_EQ(st.batches, 1u);
  wsync_group_destroy(s.g);
  s.g = nullptr;
  EXPECT_EQ(0, wait_child(rx, 20000));
}

// Batches sent straight from the caller's tensors (one bucket each) are released once their bytes
// went out; the caller overwrites each at once and publishes the next, many batches per version,
// while the receivers (one of them a relay: route=chain) may still be taking earlier ones. Every
// receiver checks every byte of every version.
// The relaying one-sender group, not given piece_bytes, moves 512 KiB pieces (told in the ROUTE;
// each hop of a chain costs a piece's time), and says so.
std::vector<std::string> g_route_lines;
void keep_route_lines(void*, int32_t, const char* message) {
  if (std::strstr(message, ": route ") != nullptr) g_route_lines.push_back(message);
}

TEST(AsyncSend, ManyBatchesPerVersionThroughARelayKeepTheirBytes) {
  g_route_lines.clear();
  wsync_set_log_callback(keep_route_lines, nullptr, WSYNC_LOG_INFO);
  Sender s;
  Model m;
  m.spec = one_bucket_tensors(8);
  ReceiverPlan p1 = plan_for(s, 1, m.spec, 3, true), p2 = plan_for(s, 2, m.spec, 3, false);
  p1.local_address = "127.0.0.2";  // (hosts of their own for the route planner)
  p2.local_address = "127.0.0.3";
  pid_t r1 = spawn([p1] { return run_receiver(p1); });
  pid_t r2 = spawn([p2] { return run_receiver(p2); });
  ASSERT_EQ(WSYNC_OK, s.init(2, 1u << 20, 20000, 2, "chain")) << error();
  for (uint64_t v = 1; v <= 3; ++v) {
    m.fill(v);
    for (size_t i = 0; i < m.descs.size(); ++i) {
      ASSERT_EQ(WSYNC_OK, wsync_group_send_batch(s.g, &m.descs[i], 1, -1)) << error();
      std::memset(m.descs[i].data, 0xEE, m.descs[i].nbytes);  // released: the caller's again
    }
    ASSERT_EQ(WSYNC_OK, wsync_group_finalize(s.g, v, -1)) << error();
  }
  wsync_group_destroy(s.g);
  s.g = nullptr;
  wsync_set_log_callback(nullptr, nullptr, 0);
  EXPECT_EQ(0, wait_child(r1, 20000));
  EXPECT_EQ(0, wait_child(r2, 20000));
  ASSERT_EQ(1u, g_route_lines.size());
  EXPECT_NE(std::string::npos, g_route_lines[0].find("route chain")) << g_route_lines[0];
  EXPECT_NE(std::string::npos, g_route_lines[0].find("pieces of 512 KiB (chosen with the route)")) << g_route_lines[0];
}

}  // namespace
