// A trainer that restarts without its engines (receiver option rejoin), over the public ABI with
// the real store, control channel and UCX, every member a process on loopback: the trainer
// publishes versions 1 and 2, dies (SIGKILL) in the middle of version 3, and a new trainer process
// at the same store address publishes versions 3 and 4 into the same receivers, which were never
// restarted or re-initialised. Every byte of every committed version is checked; a staged
// receiver's buffers hold version 2 exactly while no trainer runs. Then the same with a trainer of
// two ranks (two senders, each the rows it holds): rank 1 dies, then rank 0, and each time the
// trainer restarts (its ranks together, as torchrun restarts them) and goes on into the same
// receivers. And a trainer (one sender, or rank 1 of two) dying after it finalized, while the
// receivers hold its COMMIT: their commits fail, change nothing, and the receivers go on.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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

constexpr const char* kGroup = "restart";

std::vector<synth_tensor_t> spec() {
  return {tensor_of("embed.weight", WSYNC_DTYPE_FLOAT32, {1000, 64}),
          tensor_of("layers.0.qkv", WSYNC_DTYPE_BFLOAT16, {300, 7}),
          tensor_of("layers.0.scale", WSYNC_DTYPE_INT8, {4096}),
          tensor_of("lm_head.weight", WSYNC_DTYPE_BFLOAT16, {512, 1024})};
}

// A port nothing listens on now: a restarted trainer binds the same one (store_addr is fixed).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A trainer's group for the two receivers at `store_addr`; NULL (the reason printed) on a failure.
wsync_group_t* init_group(const char* who, const char* store_addr, const std::vector<wsync_option_t>& opts) {
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = 2;
  cfg.group_name = kGroup;
  cfg.store_addr = store_addr;
  cfg.options = opts.data();
  cfg.num_options = opts.size();
  cfg.timeout_ms = 30000;
  wsync_group_t* g = nullptr;
  const wsync_status_t st = wsync_group_init(&cfg, &g);
  if (st != WSYNC_OK) std::fprintf(stderr, "%s: init: %s: %s\n", who, wsync_status_name(st), wsync_last_error());
  return st == WSYNC_OK ? g : nullptr;
}

// One trainer process: versions first..last, two batches each; with die_in, SIGKILL itself after
// that version's first batch.
int run_trainer(const std::string& store, uint64_t first, uint64_t last, uint64_t die_in) {
  wsync_group_t* g = init_group("trainer", store.c_str(), {WSYNC_OPTION("timeout_ms", "10000")});
  if (g == nullptr) return 3;
  wsync_status_t st = WSYNC_OK;
  Model m;
  m.spec = spec();
  for (uint64_t v = first; v <= last && st == WSYNC_OK; ++v) {
    m.fill(v);
    st = wsync_group_send_batch(g, m.descs.data(), 2, -1);
    if (v == die_in) raise(SIGKILL);
    if (st == WSYNC_OK) st = wsync_group_send_batch(g, m.descs.data() + 2, m.descs.size() - 2, -1);
    if (st == WSYNC_OK) st = wsync_group_finalize(g, v, -1);
  }
  if (st != WSYNC_OK) std::fprintf(stderr, "trainer: %s: %s\n", wsync_status_name(st), wsync_last_error());
  wsync_group_destroy(g);
  return st == WSYNC_OK ? 0 : 3;
}

bool holds(const std::vector<synth_tensor_t>& s, const std::vector<std::vector<uint8_t>>& bufs, uint64_t version) {
  for (size_t i = 0; i < s.size(); ++i) {
    std::vector<uint8_t> want(s[i].nbytes);
    synth_fill(&s[i], version, want.data());
    if (want != bufs[i]) return false;
  }
  return true;
}

// A receiver with option rejoin at `store`, its buffers (*bufs, one per tensor of `s`)
// registered; NULL (the reason printed) on a failure.
wsync_receiver_t* open_engine(const std::string& store, uint32_t rank, bool staged, const std::vector<synth_tensor_t>& s,
                              std::vector<std::vector<uint8_t>>* bufs) {
  wsync_option_t opts[] = {WSYNC_OPTION("rejoin", "1"), WSYNC_OPTION("receive_mode", staged ? "staged" : "in_place"),
                           WSYNC_OPTION("timeout_ms", "10000")};
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.rank = rank;
  cfg.store_addr = store.c_str();
  cfg.group_name = kGroup;
  cfg.options = opts;
  cfg.num_options = 3;
  cfg.timeout_ms = 30000;
  wsync_receiver_t* rx = nullptr;
  if (wsync_receiver_init(&cfg, &rx) != WSYNC_OK) {
    std::fprintf(stderr, "engine %u: init: %s\n", rank, wsync_last_error());
    return nullptr;
  }
  std::vector<wsync_tensor_t> descs;
  for (const auto& t : s) bufs->emplace_back(t.nbytes);
  for (size_t i = 0; i < s.size(); ++i) descs.push_back(desc_of(s[i], (*bufs)[i].data()));
  if (wsync_receiver_register(rx, descs.data(), descs.size()) != WSYNC_OK) {
    std::fprintf(stderr, "engine %u: register: %s\n", rank, wsync_last_error());
    wsync_receiver_destroy(rx);
    return nullptr;
  }
  return rx;
}

// Commits `version` and checks that the buffers hold it (*bad set when not); false, the reason
// printed, when the commit failed.
bool commit_checked(wsync_receiver_t* rx, uint32_t rank, uint64_t version, const std::vector<synth_tensor_t>& s,
                    const std::vector<std::vector<uint8_t>>& bufs, int* bad) {
  if (wsync_receiver_commit(rx, version) != WSYNC_OK) {
    std::fprintf(stderr, "engine %u: commit %llu: %s\n", rank, static_cast<unsigned long long>(version),
                 wsync_last_error());
    return false;
  }
  if (!holds(s, bufs, version)) {
    std::fprintf(stderr, "engine %u: the buffers differ from version %llu\n", rank,
                 static_cast<unsigned long long>(version));
    *bad = 1;
  }
  return true;
}

// A receiver (an engine worker that embeds wsync) with option rejoin: commits 1..4 in order, each
// checked byte for byte; between trainers (errors and timeouts from next) a staged one still
// holds the last committed version. Exit 0, or 1 with the reason printed.
int run_engine(const std::string& store, uint32_t rank, bool staged, const std::vector<synth_tensor_t>& s = spec(),
               uint64_t last = 4, int max_failures = 1) {
  std::vector<std::vector<uint8_t>> bufs;
  wsync_receiver_t* rx = open_engine(store, rank, staged, s, &bufs);
  if (rx == nullptr) return 1;
  uint64_t committed = 0;
  int failures = 0, waits = 0, bad = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  while (committed < last && std::chrono::steady_clock::now() < until) {
    const wsync_status_t st = wsync_receiver_next(rx, &ev, 1000);
    if (st != WSYNC_OK) {  // the trainer died mid-update, or its successor is not up yet
      (st == WSYNC_ERR_TIMEOUT ? waits : failures)++;
      if (st != WSYNC_ERR_TIMEOUT)
        std::printf("engine %u: after version %llu: %s: %s\n", rank, static_cast<unsigned long long>(committed),
                    wsync_status_name(st), wsync_last_error());
      if (staged && committed > 0 && !holds(s, bufs, committed)) {
        std::fprintf(stderr, "engine %u: the buffers lost version %llu while no trainer ran\n", rank,
                     static_cast<unsigned long long>(committed));
        bad = 1;
      }
      continue;
    }
    if (ev.kind == WSYNC_EVENT_COMMIT) {
      if (ev.version != committed + 1) {
        std::fprintf(stderr, "engine %u: version %llu committed after %llu\n", rank,
                     static_cast<unsigned long long>(ev.version), static_cast<unsigned long long>(committed));
        bad = 1;
      }
      if (!commit_checked(rx, rank, ev.version, s, bufs, &bad)) return 1;
      committed = ev.version;
    }
  }
  std::printf("engine %u: committed %llu, %d failure(s), %d wait(s)\n", rank, static_cast<unsigned long long>(committed),
              failures, waits);
  wsync_receiver_destroy(rx);
  // At most one failure per trainer death: the update it died in, when any of it had reached this
  // engine (the wait for the successor is a timeout).
  return bad || committed != last || failures > max_failures ? 1 : 0;
}

}  // namespace

TEST(SenderRestart, EnginesWithRejoinTakeTheRestartedTrainersVersionsWithoutARestart) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string store = "127.0.0.1:" + std::to_string(port);
  pid_t first = spawn([store] { return run_trainer(store, 1, 3, 3); });
  pid_t e1 = spawn([store] { return run_engine(store, 1, true); });
  pid_t e2 = spawn([store] { return run_engine(store, 2, false); });
  EXPECT_EQ(128 + SIGKILL, wait_child(first, 60000));
  // A new trainer process takes the group at the same address.
  pid_t second = spawn([store] { return run_trainer(store, 3, 4, 0); });
  EXPECT_EQ(0, wait_child(second, 60000));
  EXPECT_EQ(0, wait_child(e1, 60000));
  EXPECT_EQ(0, wait_child(e2, 60000));
}

namespace {

// A trainer of two ranks: rank k holds rows chunk k of every tensor (torch.chunk over dim 0).
std::vector<synth_tensor_t> two_rank_spec() {
  return {tensor_of("embed.weight", WSYNC_DTYPE_FLOAT32, {1000, 64}), tensor_of("layers.0.qkv", WSYNC_DTYPE_BFLOAT16, {300, 7}),
          tensor_of("layers.0.scale", WSYNC_DTYPE_INT8, {4097}), tensor_of("lm_head.weight", WSYNC_DTYPE_BFLOAT16, {512, 1024})};
}

struct Rows {
  std::vector<uint8_t> bytes;
  wsync_tensor_t desc = WSYNC_TENSOR_INIT;
};

Rows rows_of(const synth_tensor_t& t, uint32_t k, uint64_t version) {
  std::vector<uint8_t> full(t.nbytes);
  synth_fill(&t, version, full.data());
  const int64_t chunk = (t.shape[0] + 1) / 2, begin = std::min<int64_t>(t.shape[0], chunk * k),
                end = std::min<int64_t>(t.shape[0], begin + chunk);
  const uint64_t row = t.nbytes / static_cast<uint64_t>(t.shape[0]);
  Rows r;
  r.bytes.assign(full.begin() + begin * row, full.begin() + end * row);
  wsync_tensor_t& d = r.desc;
  d.name = t.name;
  d.dtype = t.dtype;
  d.ndim = t.ndim;
  std::memcpy(d.full_shape, t.shape, sizeof d.full_shape);
  std::memcpy(d.shape, t.shape, sizeof d.shape);
  d.flags = WSYNC_TENSOR_SLICE;
  d.box_offset[0] = begin;
  d.shape[0] = end - begin;
  d.nbytes = r.bytes.size();
  return r;
}

// Rank k of a two-rank trainer: versions first..last, two batches each; with die_in, SIGKILL after
// that version's first batch. Exit 0 when all were finalized; 3 when one failed naming sender
// `lost` (the rank that died), 4 when it failed otherwise.
int run_rank(const std::string& store, uint32_t k, uint64_t first, uint64_t last, uint64_t die_in, int lost = -1) {
  const std::string rank = std::to_string(k);
  std::vector<wsync_option_t> opts = {WSYNC_OPTION("timeout_ms", "10000"), WSYNC_OPTION("num_senders", "2"),
                                      WSYNC_OPTION("sender_rank", rank.c_str())};
  if (k > 0) opts.push_back(WSYNC_OPTION("sender0_store", store.c_str()));
  wsync_group_t* g = init_group(("rank " + rank).c_str(), k == 0 ? store.c_str() : "127.0.0.1:0", opts);
  if (g == nullptr) return 4;
  wsync_status_t st = WSYNC_OK;
  const std::vector<synth_tensor_t> s = two_rank_spec();
  for (uint64_t v = first; v <= last && st == WSYNC_OK; ++v) {
    std::vector<Rows> rows;
    std::vector<wsync_tensor_t> descs;
    for (const auto& t : s) rows.push_back(rows_of(t, k, v));
    for (auto& r : rows) {
      r.desc.data = r.bytes.data();
      descs.push_back(r.desc);
    }
    st = wsync_group_send_batch(g, descs.data(), 2, -1);
    if (v == die_in) raise(SIGKILL);
    if (st == WSYNC_OK) st = wsync_group_send_batch(g, descs.data() + 2, descs.size() - 2, -1);
    if (st == WSYNC_OK) st = wsync_group_finalize(g, v, -1);
  }
  const std::string why = st == WSYNC_OK ? "" : wsync_last_error();
  if (st != WSYNC_OK) std::fprintf(stderr, "rank %u: %s: %s\n", k, wsync_status_name(st), why.c_str());
  wsync_group_destroy(g);
  if (st == WSYNC_OK) return 0;
  return lost >= 0 && why.find("sender " + std::to_string(lost)) != std::string::npos ? 3 : 4;
}

}  // namespace

TEST(SenderRestart, ATrainerOfManySendersRestartsIntoTheSameEngines) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string store = "127.0.0.1:" + std::to_string(port);
  const std::vector<synth_tensor_t> s = two_rank_spec();
  pid_t e1 = spawn([store, s] { return run_engine(store, 1, true, s, 6, 2); });
  pid_t e2 = spawn([store, s] { return run_engine(store, 2, false, s, 6, 2); });
  // Rank 1 dies in version 3: rank 0's update fails naming sender 1.
  pid_t r0 = spawn([store] { return run_rank(store, 0, 1, 3, 0, 1); });
  pid_t r1 = spawn([store] { return run_rank(store, 1, 1, 3, 3); });
  EXPECT_EQ(128 + SIGKILL, wait_child(r1, 60000));
  EXPECT_EQ(3, wait_child(r0, 60000));
  // The trainer restarts from its checkpoint (both ranks, new processes); rank 0 dies in version 5.
  r0 = spawn([store] { return run_rank(store, 0, 3, 5, 5); });
  r1 = spawn([store] { return run_rank(store, 1, 3, 5, 0, 0); });
  EXPECT_EQ(128 + SIGKILL, wait_child(r0, 60000));
  EXPECT_EQ(3, wait_child(r1, 60000));
  // And again: versions 5 and 6.
  r0 = spawn([store] { return run_rank(store, 0, 5, 6, 0); });
  r1 = spawn([store] { return run_rank(store, 1, 5, 6, 0); });
  EXPECT_EQ(0, wait_child(r0, 60000));
  EXPECT_EQ(0, wait_child(r1, 60000));
  EXPECT_EQ(0, wait_child(e1, 60000));
  EXPECT_EQ(0, wait_child(e2, 60000));
}

namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

void touch(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

// Until both engines hold version 2's COMMIT (their files in `dir`): at most 60 s.
bool both_at_commit(const std::string& dir) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(exists(dir + "/at_commit.1") && exists(dir + "/at_commit.2")) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return exists(dir + "/at_commit.1") && exists(dir + "/at_commit.2");
}

// An engine (option rejoin) that holds at version `hold`'s COMMIT event, says so (file
// <dir>/at_commit.<rank>) and commits only once the test says go (<dir>/go), a sender having died
// meanwhile. That commit must fail (PEER_FAILED, its message holding `names_gone`) and apply nothing
// (a staged receiver's buffers and committed_version keep the version before, docs/ABI.md); then
// the receiver takes the restarted trainer's versions up to `last`, each checked byte for byte.
// Exit 0, or 1 with the reason printed.
int run_engine_held_at_commit(const std::string& store, uint32_t rank, bool staged, const std::string& dir,
                              const std::vector<synth_tensor_t>& s, uint64_t hold, uint64_t last,
                              const std::string& names_gone) {
  std::vector<std::vector<uint8_t>> bufs;
  wsync_receiver_t* rx = open_engine(store, rank, staged, s, &bufs);
  if (rx == nullptr) return 1;
  uint64_t committed = 0;
  int bad = 0;
  bool held = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  while (committed < last && std::chrono::steady_clock::now() < until) {
    const wsync_status_t st = wsync_receiver_next(rx, &ev, 1000);
    if (st == WSYNC_ERR_INVALID_STATE) {  // (a version left pending: every call would refuse so)
      std::fprintf(stderr, "engine %u: stuck after version %llu: %s\n", rank,
                   static_cast<unsigned long long>(committed), wsync_last_error());
      wsync_receiver_destroy(rx);
      return 1;
    }
    if (st != WSYNC_OK) {
      if (st != WSYNC_ERR_TIMEOUT)
        std::printf("engine %u: after version %llu: %s: %s\n", rank, static_cast<unsigned long long>(committed),
                    wsync_status_name(st), wsync_last_error());
      continue;
    }
    if (ev.kind != WSYNC_EVENT_COMMIT) continue;
    if (ev.version <= committed) {
      std::fprintf(stderr, "engine %u: version %llu after %llu\n", rank, static_cast<unsigned long long>(ev.version),
                   static_cast<unsigned long long>(committed));
      bad = 1;
    }
    if (ev.version == hold && !held) {
      held = true;
      touch(dir + "/at_commit." + std::to_string(rank));
      while (!exists(dir + "/go") && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const wsync_status_t cst = wsync_receiver_commit(rx, hold);
      const std::string why = wsync_last_error();
      std::printf("engine %u: commit of %llu: %s: %s\n", rank, static_cast<unsigned long long>(hold),
                  wsync_status_name(cst), why.c_str());
      if (cst != WSYNC_ERR_PEER_FAILED || why.find(names_gone) == std::string::npos) {
        std::fprintf(stderr, "engine %u: the commit of %llu, its sender gone, did not fail naming that\n", rank,
                     static_cast<unsigned long long>(hold));
        bad = 1;
      }
      if (wsync_receiver_committed_version(rx) != committed || (staged && !holds(s, bufs, committed))) {
        std::fprintf(stderr, "engine %u: a failed commit of %llu changed the committed version or the buffers\n",
                     rank, static_cast<unsigned long long>(hold));
        bad = 1;
      }
      continue;
    }
    if (!commit_checked(rx, rank, ev.version, s, bufs, &bad)) return 1;
    committed = ev.version;
  }
  std::printf("engine %u: committed %llu\n", rank, static_cast<unsigned long long>(committed));
  wsync_receiver_destroy(rx);
  return bad || committed != last ? 1 : 0;
}

}  // namespace

// Sender 1 dies after it finalized version 2, while the engines hold its COMMIT unconfirmed (the
// window the composed soak hit: an engine's wsync_receiver_commit failed and the sample engine
// quit). The commits fail, naming sender 1, and apply nothing; the engines, with option
// rejoin, take versions 3 and 4 from the restarted trainer, checked byte for byte.
TEST(SenderRestart, ASenderThatDiesBeforeTheEnginesConfirmTheirCommitIsSurvived) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string store = "127.0.0.1:" + std::to_string(port);
  const std::string dir = temp_dir();
  const std::vector<synth_tensor_t> s = two_rank_spec();
  // (named: sender 1 closed before it heard COMMITTED, or, for the receiver that commits second,
  // sender 0 aborted after the first let go, and sender 1's connection closed)
  pid_t e1 = spawn([store, dir, s] { return run_engine_held_at_commit(store, 1, true, dir, s, 2, 4, "sender 1 ("); });
  pid_t e2 = spawn([store, dir, s] { return run_engine_held_at_commit(store, 2, false, dir, s, 2, 4, "sender 1 ("); });
  pid_t r0 = spawn([store] { return run_rank(store, 0, 1, 3, 0, 1); });
  pid_t r1 = spawn([store] { return run_rank(store, 1, 1, 3, 0); });
  ASSERT_TRUE(both_at_commit(dir)) << "version 2's COMMIT did not come";
  ::kill(r1, SIGKILL);
  EXPECT_EQ(128 + SIGKILL, wait_child(r1, 10000));
  touch(dir + "/go");
  EXPECT_EQ(3, wait_child(r0, 60000)) << "rank 0 did not fail naming sender 1";
  r0 = spawn([store] { return run_rank(store, 0, 3, 4, 0); });
  r1 = spawn([store] { return run_rank(store, 1, 3, 4, 0); });
  EXPECT_EQ(0, wait_child(r0, 60000));
  EXPECT_EQ(0, wait_child(r1, 60000));
  EXPECT_EQ(0, wait_child(e1, 60000));
  EXPECT_EQ(0, wait_child(e2, 60000));
}

// The same with one sender: the trainer dies in version 2's finalize, the receivers' commits fail
// and apply nothing, and the next call joins the restarted trainer (a commit that failed there
// once left the version pending, and every later call refused with INVALID_STATE).
TEST(SenderRestart, ATrainerThatDiesBeforeTheEnginesConfirmTheirCommitIsSurvived) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string store = "127.0.0.1:" + std::to_string(port);
  const std::string dir = temp_dir();
  const std::vector<synth_tensor_t> s = spec();
  const std::string gone = "the sender of group 'restart' closed its connection before it heard COMMITTED";
  pid_t e1 = spawn([store, dir, s, gone] { return run_engine_held_at_commit(store, 1, true, dir, s, 2, 4, gone); });
  pid_t e2 = spawn([store, dir, s, gone] { return run_engine_held_at_commit(store, 2, false, dir, s, 2, 4, gone); });
  pid_t first = spawn([store] { return run_trainer(store, 1, 3, 0); });
  ASSERT_TRUE(both_at_commit(dir)) << "version 2's COMMIT did not come";
  ::kill(first, SIGKILL);
  EXPECT_EQ(128 + SIGKILL, wait_child(first, 10000));
  touch(dir + "/go");
  pid_t second = spawn([store] { return run_trainer(store, 3, 4, 0); });
  EXPECT_EQ(0, wait_child(second, 60000));
  EXPECT_EQ(0, wait_child(e1, 60000));
  EXPECT_EQ(0, wait_child(e2, 60000));
}
