// Failures mid-update and what they leave behind, per engine release family, against the strict
// reference engine (tests/reference_engine): an engine refuses a bucket, a receiver dies, the
// trainer destroys its group mid-update, the trainer process is SIGKILLed. After each, the failing
// trainer (or, when it is dead, the next one) ends the engine-side update on every server, and a
// new trainer then updates the same two servers without restarting them; every tensor's checksum
// is read back from both.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine_fixture.h"

using namespace engines;
using harness::Model;
using harness::tensor_set;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class Recovery : public ::testing::TestWithParam<Release> {
 protected:
  void SetUp() override { m.spec = tensor_set(16, 0); }
  std::string proto() const { return GetParam().protocol; }
  bool sessions() const { return proto() == "sglang" && std::atoi(GetParam().version + 4) >= 21; }
  void start(std::vector<std::string> extra_a = {}) {
    start_engine(&a, proto(), GetParam().version, extra_a);
    start_engine(&b, proto(), GetParam().version);
  }
  std::string engines() const { return a.url() + "=1," + b.url() + "=1"; }

  // What the failing trainer must have done on every server: no engine-side update left open.
  void expect_update_ended(const Engine& e) {
    if (sessions()) { EXPECT_EQ("false", state(e, "session_open")) << e.url(); }
    if (proto() == "vllm") { EXPECT_EQ("false", state(e, "update_active")) << e.url(); }
  }

  // A new trainer updates the same servers twice; both hold every tensor and are not paused.
  void expect_new_trainer_updates(uint64_t first_version) {
    Trainer next;
    ASSERT_EQ(WSYNC_OK, next.init(proto(), engines())) << wsync_last_error();
    for (uint64_t v = first_version; v < first_version + 2; ++v) {
      ASSERT_EQ(WSYNC_OK, publish(next, m, v)) << "version " << v << ": " << wsync_last_error();
      expect_engine_holds(a, m.spec, v);
      expect_engine_holds(b, m.spec, v);
    }
    for (const Engine* e : {&a, &b}) {
      EXPECT_EQ("false", state(*e, "paused")) << e->url();
      expect_update_ended(*e);
      EXPECT_EQ("false", state(*e, "dead")) << e->url();
    }
  }

  // Destroying a group after a failure tears the engine side down within a bounded time.
  void destroy_bounded(Trainer& tr) {
    auto t0 = std::chrono::steady_clock::now();
    tr.destroy();
    EXPECT_LT(seconds_since(t0), 15.0);
  }

  Engine a, b;
  Model m;
};

TEST_P(Recovery, AnEngineRefusesABucket) {
  start({"--fail-update", "the disk is on fire", "--fail-updates", "1"});
  {
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init(proto(), engines())) << wsync_last_error();
    EXPECT_EQ(WSYNC_ERR_ENGINE, publish(tr, m, 1));
    std::string msg = wsync_last_error();
    EXPECT_NE(std::string::npos, msg.find("the disk is on fire")) << msg;
    EXPECT_NE(std::string::npos, msg.find("mix of weight versions")) << msg;
    for (const Engine* e : {&a, &b}) {
      expect_update_ended(*e);
      // LMDeploy has no undo: the update is finalized with what arrived, on every server.
      if (proto() == "lmdeploy") { EXPECT_EQ("1", state(*e, "finalized")) << e->url(); }
    }
    if (proto() == "vllm") {  // paused by default, and left paused after a failure by default
      EXPECT_EQ("true", state(a, "paused"));
      EXPECT_NE(std::string::npos, msg.find("engine_resume_on_failure")) << msg;
    }
    destroy_bounded(tr);
  }
  expect_new_trainer_updates(2);
}

TEST_P(Recovery, AReceiverDiesMidUpdate) {
  start();
  {
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init(proto(), engines(), {{"timeout_ms", "5000"}, {"engine_timeout_ms", "5000"}}))
        << wsync_last_error();
    ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
    EXPECT_NE(std::string::npos, post(b, "/debug/kill_receiver?rank=0").find("receivers_killed"));
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_NE(WSYNC_OK, publish(tr, m, 2));
    EXPECT_LT(seconds_since(t0), 15.0);
    std::string msg = wsync_last_error();
    EXPECT_TRUE(msg.find("rank 2") != std::string::npos || msg.find(b.url()) != std::string::npos) << msg;
    expect_update_ended(a);
    destroy_bounded(tr);
  }
  expect_new_trainer_updates(3);
}

TEST_P(Recovery, TheTrainerDestroysItsGroupMidUpdate) {
  start();
  {
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init(proto(), engines())) << wsync_last_error();
    m.fill(1);
    ASSERT_EQ(WSYNC_OK, wsync_group_send_batch(tr.g, m.descs.data(), m.descs.size() / 2, -1)) << wsync_last_error();
    wait_delivered(tr, 1);  // (between two batches, none on the wire)
    destroy_bounded(tr);
  }
  for (const Engine* e : {&a, &b}) {
    expect_update_ended(*e);
    if (proto() != "vllm" || std::string(GetParam().version) >= "0.32") { EXPECT_EQ("[]", state(*e, "groups")) << e->url(); }
  }
  expect_new_trainer_updates(1);
}

// wsync_group_abort between two batches of an update: the pipeline thread ends the engines'
// update; the next call says so; a new trainer then updates the same servers.
TEST_P(Recovery, TheTrainerAbortsMidUpdate) {
  start();
  {
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init(proto(), engines())) << wsync_last_error();
    m.fill(1);
    ASSERT_EQ(WSYNC_OK, wsync_group_send_batch(tr.g, m.descs.data(), m.descs.size() / 2, -1)) << wsync_last_error();
    wait_delivered(tr, 1);  // (between two batches, none on the wire)
    if (sessions()) { EXPECT_EQ("true", state(a, "session_open")); }
    wsync_group_abort(tr.g);
    // The next call returns once the pipeline thread ended the update on every server.
    EXPECT_EQ(WSYNC_ERR_ABORTED, wsync_group_finalize(tr.g, 1, -1));
    std::string msg = wsync_last_error();
    EXPECT_NE(std::string::npos, msg.find("mix of weight versions")) << msg;
    for (const Engine* e : {&a, &b}) expect_update_ended(*e);
    destroy_bounded(tr);
  }
  expect_new_trainer_updates(2);
}

// The trainer process dies with an update open on both servers: nobody ended it. The next
// trainer's init finds the servers in that state and cleans up before it begins.
TEST_P(Recovery, TheTrainerProcessIsKilledMidUpdate) {
  start();
  int ready[2];
  ASSERT_EQ(0, pipe(ready));
  const std::string adapter = proto(), urls = engines();
  pid_t child = harness::spawn([&]() {
    close(ready[0]);
    Trainer tr;
    Model mine;
    mine.spec = m.spec;
    if (tr.init(adapter, urls, {{"adapter.pause", "1"}}) != WSYNC_OK) return 2;
    mine.fill(1);
    if (wsync_group_send_batch(tr.g, mine.descs.data(), mine.descs.size() / 2, -1) != WSYNC_OK) return 3;
    // The batch delivered: no request of it is still running on a server when the kill comes (a
    // vLLM worker whose /update_weights fails ends the session itself, update_active false).
    wait_delivered(tr, 1);
    if (write(ready[1], "x", 1) != 1) return 4;
    pause();  // until SIGKILLed
    return 5;
  });
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(1, read(ready[0], &c, 1)) << "the trainer child failed before the update: " << harness::wait_child(child, 5000);
  close(ready[0]);
  // The child's batch was delivered (so the update is open on the servers); kill it once the
  // servers show it.
  const auto update_open = [&] {
    return (!sessions() || state(a, "session_open") == "true") && (proto() != "vllm" || state(a, "update_active") == "true") &&
           state(a, proto() == "lmdeploy" ? "loaded_unfinished" : "paused") == "true";
  };
  for (int i = 0; i < 1000 && !update_open(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(child, SIGKILL);
  ASSERT_EQ(128 + SIGKILL, harness::wait_child(child, 10000));
  // The dead trainer left its update open and generation paused.
  if (sessions()) { EXPECT_EQ("true", state(a, "session_open")); }
  if (proto() == "vllm") { EXPECT_EQ("true", state(a, "update_active")); }
  if (proto() != "lmdeploy") { EXPECT_EQ("true", state(a, "paused")); }
  if (proto() == "lmdeploy") { EXPECT_EQ("true", state(a, "loaded_unfinished")); }
  {
    // The next trainer's init alone (its reset) ends the leftover update: LMDeploy's post-load
    // step runs before the group it needs is destroyed; vLLM's finish is sent because the
    // probe found the update active, and no finish is ever refused.
    Trainer next;
    ASSERT_EQ(WSYNC_OK, next.init(proto(), engines())) << wsync_last_error();
    for (const Engine* e : {&a, &b}) {
      if (proto() == "lmdeploy") {
        EXPECT_EQ("false", state(*e, "loaded_unfinished")) << e->url();
        EXPECT_EQ("1", state(*e, "finalized")) << e->url();
      }
      if (proto() == "vllm") { EXPECT_EQ("0", state(*e, "unmatched_finishes")) << e->url(); }
      expect_update_ended(*e);
    }
  }
  expect_new_trainer_updates(1);
}

INSTANTIATE_TEST_SUITE_P(HttpEngines, Recovery,
                         ::testing::Values(Release{"sglang", "0.5.20"}, Release{"sglang", "0.5.23"},
                                           Release{"vllm", "0.31.0"}, Release{"vllm", "0.33.0"},
                                           Release{"lmdeploy", "0.15.0"}, Release{"lmdeploy", "0.18.0"}),
                         [](const ::testing::TestParamInfo<Release>& i) { return release_name(i.param); });

// engine_resume_on_failure=1: after a failure the engines generate again (with the mix of versions).
TEST(HttpEngines, ResumeOnFailureResumesGeneration) {
  Engine a;
  start_engine(&a, "vllm", "", {"--fail-update", "no", "--fail-updates", "1"});
  Model m;
  m.spec = tensor_set(6, 0);
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("vllm", a.url(), {{"engine_resume_on_failure", "1"}})) << wsync_last_error();
  EXPECT_EQ(WSYNC_ERR_ENGINE, publish(tr, m, 1));
  EXPECT_EQ("false", state(a, "paused"));
  EXPECT_EQ("false", state(a, "update_active"));
  std::vector<std::string> r = routes(a);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ("/resume", r.back());
}

}  // namespace
