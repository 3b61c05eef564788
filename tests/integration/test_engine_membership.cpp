// HTTP engines in an elastic group (membership=elastic, engine_receivers=wsync), against the strict
// reference engine (tests/reference_engine) over UCX on loopback: a server that dies, or that
// refuses an update, is dropped by name and its ranks leave; the update goes on with the others;
// between updates the trainer checks the dropped server again, and one that answers is probed,
// reset, initialised and its receivers join with their old ranks. A server down at init joins when
// it starts. Every tensor of every version is checked in the engines (XXH3 read back through their
// debug route); the group is never rebuilt.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "engine_fixture.h"

using namespace engines;
using harness::Model;
using harness::tensor_set;

namespace {

std::vector<uint32_t> members(wsync_group_t* g) {
  uint32_t ranks[16];
  uint64_t n = 0;
  EXPECT_EQ(WSYNC_OK, wsync_group_members(g, ranks, 16, &n));
  return std::vector<uint32_t>(ranks, ranks + std::min<uint64_t>(n, 16));
}

// Waits (the group is idle: its pipeline admits and checks servers) until the members are `want`.
bool wait_members(wsync_group_t* g, const std::vector<uint32_t>& want, int timeout_ms = 20000) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    if (members(g) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

struct Event {
  int kind;
  uint32_t rank;
  std::string reason;
};

std::vector<Event> events(wsync_group_t* g) {
  std::vector<Event> out;
  wsync_member_event_t e = WSYNC_MEMBER_EVENT_INIT;
  while (wsync_group_next_member_event(g, &e) == WSYNC_OK) out.push_back({e.kind, e.rank, e.reason ? e.reason : ""});
  return out;
}

// The event of `kind` for `rank`; fails the test when there is none.
Event find_event(const std::vector<Event>& ev, int kind, uint32_t rank) {
  for (const Event& e : ev)
    if (e.kind == kind && e.rank == rank) return e;
  ADD_FAILURE() << "no " << (kind == WSYNC_MEMBER_LEFT ? "LEFT" : "JOINED") << " event for rank " << rank;
  return Event{0, 0, ""};
}

std::string str(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t r : v) s += (s.empty() ? "" : ",") + std::to_string(r);
  return "[" + s + "]";
}

const Options kElastic = {{"membership", "elastic"}, {"engine_recheck_ms", "300"}, {"timeout_ms", "5000"},
                          {"engine_timeout_ms", "8000"}};

Options with(Options o, const Options& more) {
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

class EngineMembership : public ::testing::TestWithParam<Release> {
 protected:
  void SetUp() override { m.spec = tensor_set(12, 0); }
  std::string proto() const { return GetParam().protocol; }
  // The server was initialised again after `from` requests: the init route answered 200. (Its
  // receivers join while the request runs, and the engine records a request once it answered it:
  // looked for up to 10 s.)
  void expect_initialised_again(const Engine& e, size_t from) {
    const std::string init = proto() == "vllm" ? "/init_weight_transfer_engine" : "/init_weights_update_group";
    bool inited = false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!inited && std::chrono::steady_clock::now() < until) {
      const std::vector<Seen> seen = requests(e);
      for (size_t i = from; i < seen.size(); ++i)
        inited |= seen[i].path == init && seen[i].status == 200 && seen[i].body != "{}";
      if (!inited) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(inited) << e.url() << " was not initialised again within 10 s";
  }
  Model m;
};

// A two-GPU server is SIGKILLed between updates: both its ranks leave, named with its URL; the next
// version commits on the other server; the server restarts on its port and is brought back with
// ranks 2 and 3; the version after reaches all three ranks.
TEST_P(EngineMembership, AServerKilledBetweenUpdatesIsDroppedAndBroughtBackWhenItRestarts) {
  Engine a, b;
  start_engine(&a, proto(), GetParam().version);
  start_engine(&b, proto(), GetParam().version, {"--gpus", "2"});
  const int b_port = b.port;
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init(proto(), a.url() + "=1," + b.url() + "=2", kElastic)) << wsync_last_error();
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
  expect_engine_holds(a, m.spec, 1);
  expect_engine_holds(b, m.spec, 1);

  b.kill_now();
  ASSERT_TRUE(wait_members(tr.g, {1})) << "members " << str(members(tr.g));
  std::vector<Event> ev = events(tr.g);
  for (uint32_t r : {2u, 3u}) {
    Event e = find_event(ev, WSYNC_MEMBER_LEFT, r);
    EXPECT_NE(std::string::npos, e.reason.find(b.url())) << "rank " << r << ": " << e.reason;
  }
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 2)) << "a dropped server must not fail the update: " << wsync_last_error();
  expect_engine_holds(a, m.spec, 2);

  Engine b2;
  start_engine(&b2, proto(), GetParam().version, {"--gpus", "2", "--port", std::to_string(b_port)});
  ASSERT_EQ(b_port, b2.port);
  ASSERT_TRUE(wait_members(tr.g, {1, 2, 3})) << "the restarted server was not brought back; members "
                                              << str(members(tr.g));
  ev = events(tr.g);
  for (uint32_t r : {2u, 3u})
    EXPECT_NE(std::string::npos, find_event(ev, WSYNC_MEMBER_JOINED, r).reason.find(b2.url()));
  expect_initialised_again(b2, 0);
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 3)) << wsync_last_error();
  expect_engine_holds(a, m.spec, 3);
  expect_engine_holds(b2, m.spec, 3);
  if (proto() != "lmdeploy") { EXPECT_EQ("3", state(b2, "weight_version")); }
  EXPECT_EQ("false", state(b2, "paused"));
  wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
  EXPECT_EQ(3u, s.committed_version);
  EXPECT_EQ(3u, s.members);
}

// A server refuses its first update request: it is dropped mid-update, named with the engine's
// own words. With commit_quorum=1 the version commits on the other server; without it the
// update fails naming the server. Either way the server still answers, so it is reset and
// initialised again between updates, and the next version reaches both.
TEST_P(EngineMembership, AServerThatRefusesAnUpdateIsDroppedThenBroughtBack) {
  for (bool quorum : {true, false}) {
    SCOPED_TRACE(quorum ? "commit_quorum=1" : "no quorum");
    Engine a, b;
    start_engine(&a, proto(), GetParam().version);
    start_engine(&b, proto(), GetParam().version, {"--fail-update", "weights are on fire", "--fail-updates", "1"});
    Trainer tr;
    Options o = quorum ? with(kElastic, {{"commit_quorum", "1"}}) : kElastic;
    ASSERT_EQ(WSYNC_OK, tr.init(proto(), a.url() + "=1," + b.url() + "=1", o)) << wsync_last_error();
    const size_t seen_before = requests(b).size();
    wsync_status_t st = publish(tr, m, 1);
    const std::string why = st == WSYNC_OK ? "" : wsync_last_error();
    if (quorum) {
      ASSERT_EQ(WSYNC_OK, st) << why;
      expect_engine_holds(a, m.spec, 1);
    } else {
      EXPECT_EQ(WSYNC_ERR_PEER_FAILED, st);
      EXPECT_NE(std::string::npos, why.find(b.url())) << why;
    }
    Event left = find_event(events(tr.g), WSYNC_MEMBER_LEFT, 2);
    EXPECT_NE(std::string::npos, left.reason.find(b.url())) << left.reason;
    EXPECT_NE(std::string::npos, left.reason.find("weights are on fire")) << left.reason;
    ASSERT_TRUE(wait_members(tr.g, {1, 2})) << "members " << str(members(tr.g));
    expect_initialised_again(b, seen_before);
    ASSERT_EQ(WSYNC_OK, publish(tr, m, 2)) << wsync_last_error();
    expect_engine_holds(a, m.spec, 2);
    expect_engine_holds(b, m.spec, 2);
    EXPECT_EQ("false", state(b, "paused"));
  }
}

INSTANTIATE_TEST_SUITE_P(HttpEngines, EngineMembership,
                         ::testing::Values(Release{"sglang", "0.5.23"}, Release{"sglang", "0.5.6"},
                                           Release{"vllm", "0.33.0"}, Release{"lmdeploy", "0.18.0"}),
                         [](const ::testing::TestParamInfo<Release>& i) { return release_name(i.param); });

// Two one-GPU SGLang servers, a (rank 1) and b (rank 2), in an elastic group.
class TwoServers : public ::testing::Test {
 protected:
  void SetUp() override { m.spec = tensor_set(8, 0); }
  // Starts both (with `engine_args`) and the trainer (kElastic and `more`).
  wsync_status_t start(const Options& more, const std::vector<std::string>& engine_args = {}) {
    start_engine(&a, "sglang", "", engine_args);
    start_engine(&b, "sglang", "", engine_args);
    return tr.init("sglang", a.url() + "=1," + b.url() + "=1", with(kElastic, more));
  }
  Model m;
  Engine a, b;
  Trainer tr;  // (destroyed before the servers)
};

// A listed server that is down at init leaves the world as it is (its rank is kept) and joins
// once it starts; its first version comes with the next update.
TEST(EngineMembershipInit, AServerDownAtInitJoinsWhenItStarts) {
  Model m;
  m.spec = tensor_set(8, 0);
  Engine a;
  start_engine(&a, "sglang");
  const int late_port = closed_port();
  Trainer tr;
  const std::string late_url = "http://127.0.0.1:" + std::to_string(late_port);
  ASSERT_EQ(WSYNC_OK, tr.init("sglang", a.url() + "=1," + late_url + "=1", kElastic)) << wsync_last_error();
  wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
  EXPECT_EQ(2u, s.num_receivers) << "the down server keeps its rank";
  EXPECT_EQ((std::vector<uint32_t>{1}), members(tr.g));
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
  Engine late;
  start_engine(&late, "sglang", "", {"--port", std::to_string(late_port)});
  ASSERT_TRUE(wait_members(tr.g, {1, 2})) << "members " << str(members(tr.g));
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 2)) << wsync_last_error();
  expect_engine_holds(a, m.spec, 2);
  expect_engine_holds(late, m.spec, 2);
}

// The only server is killed between updates: its rank leaves, and the next version fails at its
// finalize because nobody is in the group. Restarted on its port, the server is brought back and
// the version after commits on it. Then it is killed mid-update: that version fails naming it, and
// the group is not broken either: restarted again, it takes the next version.
TEST(EngineMembershipInit, TheOnlyServerKilledAndRestartedTakesTheNextVersion) {
  Model m;
  m.spec = tensor_set(8, 0);
  Engine a;
  start_engine(&a, "sglang");
  const int port = a.port;
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("sglang", a.url() + "=1", kElastic)) << wsync_last_error();
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
  expect_engine_holds(a, m.spec, 1);
  a.kill_now();
  ASSERT_TRUE(wait_members(tr.g, {})) << "members " << str(members(tr.g));
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, publish(tr, m, 2)) << "a version with nobody in the group committed";
  EXPECT_NE(std::string::npos, std::string(wsync_last_error()).find("no receiver is in group")) << wsync_last_error();
  Engine a2;
  start_engine(&a2, "sglang", "", {"--port", std::to_string(port)});
  ASSERT_TRUE(wait_members(tr.g, {1})) << "the restarted server was not brought back; members " << str(members(tr.g));
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 3)) << wsync_last_error();
  expect_engine_holds(a2, m.spec, 3);

  m.fill(4);
  const size_t half = m.descs.size() / 2;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_batch(tr.g, m.descs.data(), half, -1)) << wsync_last_error();
  wait_delivered(tr, 5);  // (versions 1 and 3: two batches each, and version 4's first)
  a2.kill_now();
  wsync_status_t st = wsync_group_send_batch(tr.g, m.descs.data() + half, m.descs.size() - half, -1);
  if (st == WSYNC_OK) st = wsync_group_finalize(tr.g, 4, -1);
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, st) << wsync_last_error();
  EXPECT_NE(std::string::npos, std::string(wsync_last_error()).find("every receiver of group")) << wsync_last_error();
  Engine a3;
  start_engine(&a3, "sglang", "", {"--port", std::to_string(port)});
  ASSERT_TRUE(wait_members(tr.g, {1})) << "the server was not brought back again; members " << str(members(tr.g));
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 5)) << "the group broke: " << wsync_last_error();
  expect_engine_holds(a3, m.spec, 5);
  wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
  EXPECT_EQ(5u, s.committed_version);
}

// A server that hangs (SIGSTOP) between updates stops answering its update requests: it is
// dropped within engine_timeout_ms, named, and the version commits on the other server
// (commit_quorum=1). Killed and restarted, it is brought back.
TEST_F(TwoServers, AServerThatHangsIsDroppedWithinTheEngineTimeout) {
  ASSERT_EQ(WSYNC_OK, start({{"commit_quorum", "1"}})) << wsync_last_error();
  const int b_port = b.port;
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
  ASSERT_TRUE(harness::stop_child(b.pid)) << "the server did not stop";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 2)) << wsync_last_error();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 8.0 + 6.0) << "engine_timeout_ms is 8000";
  expect_engine_holds(a, m.spec, 2);
  Event left = find_event(events(tr.g), WSYNC_MEMBER_LEFT, 2);
  EXPECT_NE(std::string::npos, left.reason.find(b.url())) << left.reason;
  EXPECT_EQ((std::vector<uint32_t>{1}), members(tr.g));
  b.kill_now();
  Engine b2;
  start_engine(&b2, "sglang", "", {"--port", std::to_string(b_port)});
  ASSERT_TRUE(wait_members(tr.g, {1, 2})) << "members " << str(members(tr.g));
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 3)) << wsync_last_error();
  expect_engine_holds(a, m.spec, 3);
  expect_engine_holds(b2, m.spec, 3);
}

// A server hangs in the middle of an update, with its update requests waiting: its receiver does
// not answer within timeout_ms (5 s), so it leaves, the server is dropped, and its requests are
// no longer waited for (engine_timeout_ms is 60 s here: waiting for them would show).
TEST_F(TwoServers, AServerThatHangsMidUpdateIsDroppedWithinTheTimeout) {
  ASSERT_EQ(WSYNC_OK, start({{"commit_quorum", "1"}, {"engine_timeout_ms", "60000"}})) << wsync_last_error();
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
  m.fill(2);
  const size_t half = m.descs.size() / 2;
  ASSERT_EQ(WSYNC_OK, wsync_group_send_batch(tr.g, m.descs.data(), half, -1)) << wsync_last_error();
  // send_batch returns once the tensors are packed (ABI 1.5): wait until the batch was delivered
  // (the update is open on both servers, PAUSE and BEGIN_UPDATE answered), so that the hang comes
  // with update requests waiting, not in the middle of the opening steps (those are bounded by
  // engine_timeout_ms alone).
  wait_delivered(tr, 3);  // (version 1's two batches and version 2's first)
  ASSERT_FALSE(::testing::Test::HasFailure());
  // (stopped before the batch goes: kill() returns before the server's threads stop, and a server
  // that still runs a moment answers the next bucket, then hangs with only its HTTP request left,
  // which engine_timeout_ms bounds: that is the other test's case, not this one)
  ASSERT_TRUE(harness::stop_child(b.pid)) << "the server did not stop";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(WSYNC_OK, wsync_group_send_batch(tr.g, m.descs.data() + half, m.descs.size() - half, -1))
      << wsync_last_error();
  ASSERT_EQ(WSYNC_OK, wsync_group_finalize(tr.g, 2, -1)) << wsync_last_error();
  // (well under engine_timeout_ms, the bound a regression would show, far above the 5 s expected:
  // not a guess at how fast this machine is)
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 40.0)
      << "the hung server's update requests were waited for (engine_timeout_ms 60000)";
  expect_engine_holds(a, m.spec, 2);
  Event left = find_event(events(tr.g), WSYNC_MEMBER_LEFT, 2);
  EXPECT_NE(std::string::npos, left.reason.find(b.url())) << left.reason;
  // Removed for its receiver's silence (timeout_ms), not for its requests' timeout.
  EXPECT_NE(std::string::npos, left.reason.find("made no progress within 5000 ms")) << left.reason;
  EXPECT_EQ((std::vector<uint32_t>{1}), members(tr.g));
  b.kill_now();
}

// Engines whose receivers register their model (--register-model, as an engine that loads its
// weights before it joins does) are brought to the latest version before the next update: the
// server that was dropped comes back, its receivers register what they hold, and they catch up
// from the other server's receiver; the trainer sends nothing for it.
TEST_F(TwoServers, ADroppedServerThatComesBackCatchesUpFromAPeer) {
  // (a catch-up must end within half of timeout_ms: room for a slow, sanitized build)
  ASSERT_EQ(WSYNC_OK, start({{"commit_quorum", "1"}, {"timeout_ms", "10000"}}, {"--register-model"}))
      << wsync_last_error();
  for (uint64_t v = 1; v <= 2; ++v) ASSERT_EQ(WSYNC_OK, publish(tr, m, v)) << wsync_last_error();
  expect_engine_holds(b, m.spec, 2);
  post(b, "/debug/fail_updates?count=1&message=refused%20once", "");
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 3)) << wsync_last_error();
  expect_engine_holds(a, m.spec, 3);
  ASSERT_TRUE(wait_members(tr.g, {1, 2})) << "members " << str(members(tr.g));
  const std::vector<Event> ev = events(tr.g);  // (both, in one look: the way back may be quick)
  EXPECT_NE(std::string::npos, find_event(ev, WSYNC_MEMBER_LEFT, 2).reason.find("refused once"));
  EXPECT_NE(std::string::npos, find_event(ev, WSYNC_MEMBER_JOINED, 2).reason.find("from receiver rank 1"));
  // Its receiver commits version 3 from the peer, before any update.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until && state(b, "weight_version") != "3" &&
         get(b, "/debug/tensors").find("\"committed_version\":3") == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  expect_engine_holds(b, m.spec, 3);
  wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
  EXPECT_EQ(3u, s.committed_version);
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 4)) << wsync_last_error();
  expect_engine_holds(a, m.spec, 4);
  expect_engine_holds(b, m.spec, 4);
}

TEST(EngineMembershipInit, ElasticNeedsEnginesThatEmbedWsyncReceivers) {
  Trainer tr;
  tr.transport = "";
  wsync_status_t st = tr.init("sglang", "http://127.0.0.1:1=1", {{"membership", "elastic"}, {"engine_receivers", "none"}});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, st);
  EXPECT_NE(std::string::npos, std::string(wsync_last_error()).find("engine_receivers=wsync")) << wsync_last_error();
  st = tr.init("sglang", "http://127.0.0.1:1=1", {{"membership", "elastic"}, {"init_receivers", "1"}});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, st);
  EXPECT_NE(std::string::npos, std::string(wsync_last_error()).find("init_receivers")) << wsync_last_error();
}

// What the group logs at WARN or above, while it lives.
struct WarnTap {
  static std::mutex mu;
  static std::vector<std::string> lines;
  static void fn(void*, int32_t level, const char* m) {
    if (level > WSYNC_LOG_WARN) return;
    std::lock_guard<std::mutex> l(mu);
    lines.push_back(m);
  }
  WarnTap() { wsync_set_log_callback(&WarnTap::fn, nullptr, WSYNC_LOG_WARN); }
  ~WarnTap() { wsync_set_log_callback(nullptr, nullptr, 0); }
  size_t count(const std::string& what) {
    std::lock_guard<std::mutex> l(mu);
    size_t n = 0;
    for (const auto& line : lines) n += line.find(what) != std::string::npos;
    return n;
  }
};
std::mutex WarnTap::mu;
std::vector<std::string> WarnTap::lines;

// The review's rogue engine server: its health check answers, every other route answers with a
// body that never ends. Each recheck probes it and fails; the warning is logged at the 1st, 2nd,
// 4th, ... failure in a row, not at every recheck (with a 100 ms recheck: 10 a second before).
TEST(EngineMembershipInit, ARogueServerFailingEveryProbeIsNotLoggedAtEveryRecheck) {
  Model m;
  m.spec = tensor_set(4, 0);
  Engine a;
  start_engine(&a, "sglang");
  const int rogue_port = closed_port();
  const std::string rogue_url = "http://127.0.0.1:" + std::to_string(rogue_port);
  WarnTap tap;
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("sglang", a.url() + "=1," + rogue_url + "=1", with(kElastic, {{"engine_recheck_ms", "100"}})))
      << wsync_last_error();
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();

  httplib::Server rogue;
  std::atomic<bool> stopping{false};
  std::atomic<int> probes{0};
  // (the SGLang adapter's health check is GET /model_info)
  rogue.Get("/model_info", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
  auto endless = [&](const httplib::Request&, httplib::Response& res) {
    probes++;
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      static const std::string chunk(64 << 10, '[');
      if (stopping) {
        sink.done();
        return true;
      }
      return sink.write(chunk.data(), chunk.size());
    });
  };
  rogue.Get(".*", endless);
  rogue.Post(".*", endless);
  ASSERT_TRUE(rogue.bind_to_port("127.0.0.1", rogue_port));
  std::thread serving([&] { rogue.listen_after_bind(); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (probes.load() < 16 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int seen = probes.load();
  const size_t warned = tap.count("failed its probe");
  stopping = true;
  rogue.stop();
  serving.join();
  ASSERT_GE(seen, 16) << "the rogue server was not probed again and again";
  EXPECT_GE(warned, 1u);
  EXPECT_LE(warned, 6u) << warned << " warnings for " << seen << " failed probes";
  EXPECT_EQ((std::vector<uint32_t>{1}), members(tr.g));
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 2)) << wsync_last_error();  // the group goes on
  expect_engine_holds(a, m.spec, 2);
}

}  // namespace
