// The HTTP adapters end to end against the strict reference engine (tests/reference_engine), one
// release family at a time: a trainer (this process) drives two engine servers that speak that
// release's routes, state machine and error format and embed a wsync receiver; the bytes travel
// over UCX on loopback. Every tensor of every version is checked in the engines (XXH3 of their
// copy, read back through their debug route), and so is the dialogue each engine saw, in order,
// with the status each request got. Then what a user meets before anything moves: a release
// outside the supported range, a GPU count that differs from the server's own, a wrong API key,
// a reply that is not JSON. Failures mid-update and the recovery are in test_engine_recovery.cpp.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine_fixture.h"

using namespace engines;
using harness::Model;
using harness::tensor_set;

namespace {

bool has_sessions(const Release& r) {  // SGLang 0.5.21+
  return std::string(r.protocol) == "sglang" && std::atoi(r.version + 4) >= 21;
}
bool has_shutdown(const Release& r) {
  return std::string(r.protocol) == "vllm" && std::string(r.version) >= "0.32";
}

// Checks one engine's dialogue of three updates after the group's init (the probe and the
// clean-up of an earlier trainer come before it).
void expect_dialogue(const Release& rel, const Engine& e, uint64_t buckets) {
  const std::string proto = rel.protocol;
  std::vector<Seen> seen = requests(e);
  std::vector<std::string> r;
  for (const Seen& s : seen) r.push_back(s.path);
  const std::string init = proto == "vllm" ? "/init_weight_transfer_engine" : "/init_weights_update_group";
  size_t at = r.size();  // the real init: the last init route (lmdeploy probes with an empty one)
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] == init) at = i;
  ASSERT_LT(at, r.size()) << e.url() << " was never initialized";
  for (size_t i = at; i < seen.size(); ++i)  // the strict engine accepted every request of the updates
    EXPECT_EQ(200, seen[i].status) << e.url() << " " << seen[i].method << " " << seen[i].path << " " << seen[i].body;
  std::vector<std::string> after(r.begin() + at + 1, r.end());
  if (proto == "sglang") {
    EXPECT_EQ(buckets, count(after, "/update_weights_from_distributed"));
    EXPECT_EQ(3u, count(after, "/update_weight_version"));
    EXPECT_EQ(3u, count(after, "/flush_cache"));
    EXPECT_EQ(has_sessions(rel) ? 3u : 0u, count(after, "/begin_weight_update"));
    EXPECT_EQ(has_sessions(rel) ? 3u : 0u, count(after, "/end_weight_update"));
    if (has_sessions(rel)) {  // begin before the first bucket, end after the last, before the flush
      size_t from = 0;
      for (int v = 0; v < 3; ++v) {
        size_t begin = find_route(after, "/begin_weight_update", from);
        size_t first = find_route(after, "/update_weights_from_distributed", from);
        size_t end = find_route(after, "/end_weight_update", from);
        size_t flush = find_route(after, "/flush_cache", from);
        EXPECT_LT(begin, first) << "update " << v + 1;
        EXPECT_LT(end, flush) << "update " << v + 1;
        EXPECT_GT(find_route(after, "/update_weights_from_distributed", end), flush) << "a bucket after the end";
        from = flush + 1;
      }
    }
  } else if (proto == "vllm") {
    EXPECT_EQ(3u, count(after, "/start_weight_update"));
    EXPECT_EQ(3u, count(after, "/finish_weight_update"));
    EXPECT_EQ(buckets, count(after, "/update_weights"));
    // Paused around every update by default: /pause, /start, buckets, /finish, /resume.
    size_t from = 0;
    for (int v = 0; v < 3; ++v) {
      size_t pause = find_route(after, "/pause", from), start = find_route(after, "/start_weight_update", from);
      size_t finish = find_route(after, "/finish_weight_update", from), resume = find_route(after, "/resume", from);
      ASSERT_LT(resume, after.size()) << "update " << v + 1 << " was not resumed";
      EXPECT_LT(pause, start) << "update " << v + 1;
      EXPECT_LT(start, find_route(after, "/update_weights", from));
      EXPECT_LT(finish, resume);
      from = resume + 1;
    }
  } else {  // lmdeploy: the buckets, then one finalize-only request per update
    EXPECT_EQ(buckets + 3, count(after, "/update_weights_from_distributed"));
  }
}

// The teardown each release has, after the group is destroyed.
void expect_torn_down(const Release& rel, const Engine& e) {
  std::vector<Seen> seen = requests(e);
  ASSERT_FALSE(seen.empty());
  const std::string proto = rel.protocol;
  std::string want = proto != "vllm" ? "/destroy_weights_update_group" : has_shutdown(rel) ? "/shutdown_weight_transfer_engine" : "";
  if (want.empty()) {  // vLLM before 0.32 has no teardown route: the last request is the update's
    EXPECT_EQ("/resume", seen.back().path);
    return;
  }
  EXPECT_EQ(want, seen.back().path) << e.url();
  EXPECT_EQ(200, seen.back().status) << e.url() << " " << seen.back().body;
  EXPECT_EQ("[]", state(e, "groups")) << e.url();
}

class Dialogue : public ::testing::TestWithParam<Release> {};

TEST_P(Dialogue, ThreeVersionsIntoTwoServersEveryTensorChecked) {
  const Release rel = GetParam();
  const std::string proto = rel.protocol;
  Engine a, b;
  start_engine(&a, proto, rel.version);
  start_engine(&b, proto, rel.version);
  Model m;
  m.spec = tensor_set(24, 0);
  wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
  {
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init(proto, a.url() + "=1," + b.url() + "=1")) << wsync_last_error();
    ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
    EXPECT_EQ(2u, s.num_receivers);
    for (uint64_t v = 1; v <= 3; ++v) {
      ASSERT_EQ(WSYNC_OK, publish(tr, m, v)) << "version " << v << ": " << wsync_last_error();
      expect_engine_holds(a, m.spec, v);
      expect_engine_holds(b, m.spec, v);
    }
    ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
    EXPECT_EQ(3u, s.committed_version);
    for (const Engine* e : {&a, &b}) {
      expect_dialogue(rel, *e, s.buckets);
      EXPECT_EQ("false", state(*e, "paused")) << e->url();
      if (has_sessions(rel)) { EXPECT_EQ("false", state(*e, "session_open")) << e->url(); }
      if (proto == "vllm") { EXPECT_EQ("false", state(*e, "update_active")) << e->url(); }
      if (proto != "lmdeploy") { EXPECT_EQ("3", state(*e, "weight_version")) << e->url(); }
    }
  }
  for (const Engine* e : {&a, &b}) expect_torn_down(rel, *e);
}

// One release per family the reference engine tells apart (tests/reference_engine/family.cpp).
INSTANTIATE_TEST_SUITE_P(HttpEngines, Dialogue,
                         ::testing::Values(Release{"sglang", "0.5.6"}, Release{"sglang", "0.5.15"},
                                           Release{"sglang", "0.5.20"}, Release{"sglang", "0.5.21"},
                                           Release{"sglang", "0.5.22"}, Release{"sglang", "0.5.23"},
                                           Release{"vllm", "0.28.0"}, Release{"vllm", "0.29.1"},
                                           Release{"vllm", "0.31.0"}, Release{"vllm", "0.32.0"},
                                           Release{"vllm", "0.33.0"}, Release{"lmdeploy", "0.14.0"},
                                           Release{"lmdeploy", "0.16.0"}, Release{"lmdeploy", "0.18.0"}),
                         [](const ::testing::TestParamInfo<Release>& i) { return release_name(i.param); });

// Before anything moves: the init route is never called, no receiver joins, and the trainer's
// destroy sends no teardown (it would destroy another trainer's group of the same name).
void expect_nothing_moved(const Engine& e, const std::string& init_route) {
  for (const Seen& s : requests(e)) {
    EXPECT_FALSE(s.path == init_route && s.body != "{}") << e.url() << " got " << s.path << " " << s.body;
    EXPECT_NE("/destroy_weights_update_group", s.path) << e.url();
    EXPECT_NE("/shutdown_weight_transfer_engine", s.path) << e.url();
  }
  EXPECT_EQ("0", state(e, "receivers_joined")) << e.url();
}

TEST(HttpEngines, AVersionOutsideTheMatrixIsRefusedNamingTheVersionsThatWork) {
  struct Case { const char* proto; const char* version; const char* oldest; const char* newest; const char* init; };
  for (const Case& c : {Case{"lmdeploy", "0.13.0", "0.14", "0.18", "/init_weights_update_group"}}) {
    Engine a;
    start_engine(&a, c.proto, c.version);
    Trainer tr;
    EXPECT_EQ(WSYNC_ERR_VERSION_MISMATCH, tr.init(c.proto, a.url())) << c.proto;
    std::string msg = wsync_last_error();
    EXPECT_NE(std::string::npos, msg.find(c.oldest)) << msg;
    EXPECT_NE(std::string::npos, msg.find(c.newest)) << msg;
    EXPECT_NE(std::string::npos, msg.find(a.url())) << msg;
    tr.destroy();
    expect_nothing_moved(a, c.init);
  }
}

// SGLang 0.5.5 and older have neither /model_info nor /server_info (0.5.6 added them; their old
// names are deprecated since): such a server fails the health check, named with the route and the
// status, and nothing is initialized on it. (The adapter's refusal of a release outside 0.5.6 ..
// 0.5.23 by its "version" is unit-tested in test_adapter_sglang.)
TEST(HttpEngines, AnSglangWithoutTheCurrentRoutesFailsItsHealthCheckNamed) {
  Engine a;
  start_engine(&a, "sglang", "0.5.5");
  Trainer tr;
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, tr.init("sglang", a.url()));
  std::string msg = wsync_last_error();
  EXPECT_NE(std::string::npos, msg.find("health check")) << msg;
  EXPECT_NE(std::string::npos, msg.find(a.url())) << msg;
  EXPECT_NE(std::string::npos, msg.find("404")) << msg;
  tr.destroy();
  expect_nothing_moved(a, "/init_weights_update_group");
}

// A forced release wins over what the server says: SGLang 0.5.23 forced to speak 0.5.20 sends no
// session routes, and the strict engine refuses the bucket with SGLang's own words.
TEST(HttpEngines, AForcedVersionPicksTheDialogue) {
  Engine a;
  start_engine(&a, "sglang", "0.5.23");
  Model m;
  m.spec = tensor_set(6, 0);
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("sglang", a.url(), {{"adapter.engine_version", "0.5.20"}})) << wsync_last_error();
  EXPECT_EQ(WSYNC_ERR_ENGINE, publish(tr, m, 1));
  std::string msg = wsync_last_error();
  EXPECT_NE(std::string::npos, msg.find("begin_weight_update")) << msg;
  EXPECT_EQ(0u, count(routes(a), "/begin_weight_update"));
}

// The GPU count after a server's URL must be the server's own: the error names the server and
// both numbers, and nothing is initialized anywhere.
TEST(HttpEngines, AWorldSizeMismatchIsRefusedBeforeAnythingMoves) {
  struct Case { const char* proto; const char* flag; const char* init; };
  for (const Case& c : {Case{"sglang", "--tp-size", "/init_weights_update_group"},
                        Case{"vllm", "--world-size", "/init_weight_transfer_engine"},
                        Case{"lmdeploy", "--tp-size", "/init_weights_update_group"}}) {
    Engine good, bad;
    start_engine(&good, c.proto);
    start_engine(&bad, c.proto, "", {c.flag, "2"});
    Trainer tr;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, tr.init(c.proto, good.url() + "=1," + bad.url() + "=1")) << c.proto;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
    std::string msg = wsync_last_error();
    EXPECT_NE(std::string::npos, msg.find(bad.url())) << msg;
    EXPECT_NE(std::string::npos, msg.find(" 2 ")) << msg;
    EXPECT_NE(std::string::npos, msg.find(" 1")) << msg;
    tr.destroy();
    expect_nothing_moved(good, c.init);
    expect_nothing_moved(bad, c.init);
  }
}

// An update with no bucket still opens on the engines (SGLang's session, vLLM's start) before
// its finalize: the strict engines refuse a finalize without them.
TEST(HttpEngines, AFinalizeWithoutBucketsCommits) {
  for (const char* proto : {"sglang", "vllm", "lmdeploy"}) {
    Engine a;
    start_engine(&a, proto);
    Model m;
    m.spec = tensor_set(6, 0);
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init(proto, a.url())) << wsync_last_error();
    EXPECT_EQ(WSYNC_OK, wsync_group_finalize(tr.g, 1, -1)) << proto << ": " << wsync_last_error();
    ASSERT_EQ(WSYNC_OK, publish(tr, m, 2)) << proto << ": " << wsync_last_error();
    expect_engine_holds(a, m.spec, 2);
  }
}

// vLLM logs an ERROR traceback for every /finish_weight_update without an active update: the
// reset asks first (POST /collective_rpc reads the workers' _weight_update_active) and finishes
// only an update an earlier trainer left open.
TEST(HttpEngines, VllmResetFinishesOnlyAnUpdateThatIsActive) {
  for (const char* version : {"0.31.0", "0.33.0"}) {
    Engine a;
    start_engine(&a, "vllm", version);
    Model m;
    m.spec = tensor_set(6, 0);
    {
      Trainer tr;  // a fresh server: nothing to finish
      ASSERT_EQ(WSYNC_OK, tr.init("vllm", a.url())) << wsync_last_error();
      ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
    }
    std::vector<std::string> r = routes(a);
    EXPECT_EQ(1u, count(r, "/collective_rpc")) << version;
    EXPECT_EQ(1u, count(r, "/finish_weight_update")) << version << ": only the update's own finish";
    EXPECT_EQ("0", state(a, "unmatched_finishes")) << version;
    // An update left active (as a dead trainer leaves it): the next trainer's reset ends it.
    ASSERT_NE(std::string::npos, post(a, "/start_weight_update").find("Weight update started"));
    EXPECT_EQ("true", state(a, "update_active"));
    forget_requests(a);
    Trainer next;
    ASSERT_EQ(WSYNC_OK, next.init("vllm", a.url())) << wsync_last_error();
    EXPECT_EQ("false", state(a, "update_active")) << version;
    r = routes(a);
    EXPECT_LT(find_route(r, "/collective_rpc"), find_route(r, "/finish_weight_update")) << version;
    EXPECT_LT(find_route(r, "/finish_weight_update"), find_route(r, "/init_weight_transfer_engine")) << version;
    ASSERT_EQ(WSYNC_OK, publish(next, m, 2)) << wsync_last_error();
    expect_engine_holds(a, m.spec, 2);
    EXPECT_EQ("0", state(a, "unmatched_finishes")) << version;
  }
}

// LMDeploy validates the body before its backend check, so the {} probe answers 400 on
// TurboMind as on PyTorch; the probe's no-op update passes validation and gets TurboMind's 501.
TEST(HttpEngines, ATurboMindServerIsRefusedAtTheProbeNamingItsBackend) {
  for (const char* version : {"0.16.0", "0.18.0"}) {
    Engine a;
    start_engine(&a, "lmdeploy", version, {"--lmdeploy-backend", "turbomind"});
    Trainer tr;
    EXPECT_EQ(WSYNC_ERR_UNSUPPORTED, tr.init("lmdeploy", a.url())) << version;
    std::string msg = wsync_last_error();
    EXPECT_NE(std::string::npos, msg.find("'turbomind'")) << msg;
    EXPECT_NE(std::string::npos, msg.find("--backend pytorch")) << msg;
    tr.destroy();
    std::vector<Seen> seen = requests(a);
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ("/init_weights_update_group", seen[0].path);
    EXPECT_EQ(400, seen[0].status) << seen[0].body;  // validation first, as LMDeploy does
    expect_nothing_moved(a, "/init_weights_update_group");
  }
}

TEST(HttpEngines, AnEngineThatSaysNoFailsTheBatchWithItsOwnMessage) {
  Engine a;
  start_engine(&a, "sglang", "", {"--fail-update", "the disk is on fire"});
  Model m;
  m.spec = tensor_set(6, 0);
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("sglang", a.url())) << wsync_last_error();
  m.fill(1);
  EXPECT_EQ(WSYNC_ERR_ENGINE, wsync_group_send_batch(tr.g, m.descs.data(), m.descs.size(), -1));
  std::string msg = wsync_last_error();
  EXPECT_NE(std::string::npos, msg.find("the disk is on fire")) << msg;
  EXPECT_NE(std::string::npos, msg.find(a.url())) << msg;
  EXPECT_NE(std::string::npos, msg.find("mix of weight versions")) << msg;
}

// SGLang refuses /flush_cache while requests run: the trainer retries it (idempotent), and gives
// up with the engine's words after its bounded retries.
TEST(HttpEngines, FlushCacheIsRetriedWhileTheEngineIsBusyThenGivenUp) {
  Model m;
  m.spec = tensor_set(4, 0);
  {
    Engine a;
    start_engine(&a, "sglang", "", {"--flush-busy", "2"});
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init("sglang", a.url())) << wsync_last_error();
    ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
    EXPECT_EQ(3u, count(routes(a), "/flush_cache"));  // two refusals, then done
    expect_engine_holds(a, m.spec, 1);
  }
  Engine b;
  start_engine(&b, "sglang", "", {"--flush-busy", "100"});
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("sglang", b.url(), {{"engine_retries", "2"}})) << wsync_last_error();
  EXPECT_EQ(WSYNC_ERR_ENGINE, publish(tr, m, 1));
  std::string msg = wsync_last_error();
  EXPECT_NE(std::string::npos, msg.find("Flush cache failed")) << msg;
  EXPECT_NE(std::string::npos, msg.find("/flush_cache")) << msg;
  EXPECT_EQ(3u, count(routes(b), "/flush_cache"));  // 1 + 2 retries, no more
}

TEST(HttpEngines, AServerDownAtInitIsSkippedAndTheWorldSizeSaysSo) {
  Engine b;
  start_engine(&b, "sglang");
  Model m;
  m.spec = tensor_set(6, 0);
  Trainer tr;
  std::string down = "http://127.0.0.1:" + std::to_string(closed_port());
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(WSYNC_OK, tr.init("sglang", down + "=2," + b.url() + "=1")) << wsync_last_error();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
  EXPECT_EQ(1u, s.num_receivers);  // world size 2: the trainer and the one healthy GPU
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
  expect_engine_holds(b, m.spec, 1);
  std::string init;
  for (const Seen& r : requests(b))
    if (r.path == "/init_weights_update_group") init = r.body;
  EXPECT_NE(std::string::npos, init.find("\"world_size\":2")) << init;
  EXPECT_NE(std::string::npos, init.find("\"rank_offset\":1")) << init;
}

// SGLang guards every route but the health checks with its API key (vLLM guards only /v1, /v2,
// /inference and /cohere: its weight-transfer routes are open, as the reference engine's are).
TEST(HttpEngines, AWrongApiKeyIsAClearError) {
  Engine a;
  start_engine(&a, "sglang", "", {"--api-key", "right"});
  Trainer tr;
  EXPECT_EQ(WSYNC_ERR_REJECTED, tr.init("sglang", a.url(), {{"engine_api_key", "wrong"}}));
  std::string msg = wsync_last_error();
  EXPECT_NE(std::string::npos, msg.find("401")) << msg;
  EXPECT_NE(std::string::npos, msg.find("engine_api_key")) << msg;
  Trainer ok;
  EXPECT_EQ(WSYNC_OK, ok.init("sglang", a.url(), {{"engine_api_key", "right"}})) << wsync_last_error();
}

TEST(HttpEngines, AReplyThatIsNotJsonIsAProtocolError) {
  httplib::Server srv;
  srv.Get("/model_info", [](const httplib::Request&, httplib::Response& r) { r.set_content("{}", "application/json"); });
  srv.Get("/server_info", [](const httplib::Request&, httplib::Response& r) {
    r.set_content("<html>gateway says hi</html>", "text/html");
  });
  int port = srv.bind_to_any_port("127.0.0.1");
  std::thread t([&] { srv.listen_after_bind(); });
  Trainer tr;
  wsync_status_t st = tr.init("sglang", "http://127.0.0.1:" + std::to_string(port), {{"timeout_ms", "5000"}});
  std::string msg = wsync_last_error();
  srv.stop();
  t.join();
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, st) << msg;
  EXPECT_NE(std::string::npos, msg.find("JSON")) << msg;
  EXPECT_NE(std::string::npos, msg.find("/server_info")) << msg;
}

// An unmodified engine embeds no wsync receiver: there is no control channel, its HTTP replies are
// the acknowledgements and the transport moves the bytes to ranks rank_offset.. (NCCL in real
// life). Here an in-process server plays SGLang 0.5.23 and the stub test transport moves nothing:
// what is checked is the dialogue, in order, with the fields the engine must see.
TEST(HttpEngines, UnmodifiedEngineGetsTheWholeDialogueInOrder) {
  httplib::Server srv;
  std::mutex mu;
  std::vector<std::string> seen;  // "METHOD /path body"
  auto record = [&](const httplib::Request& q, httplib::Response& r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(q.method + " " + q.path + " " + q.body);
    }
    r.set_content(R"({"success":true,"message":"ok"})", "application/json");
  };
  // Only the routes SGLang names current: a request for a deprecated one (/get_model_info,
  // /get_server_info, "will be removed") gets 404 here and fails the init.
  srv.Get("/model_info", record);
  srv.Get("/flush_cache", record);
  srv.Get("/server_info", [](const httplib::Request&, httplib::Response& r) {
    r.set_content(R"({"version":"0.5.23","tp_size":2,"pp_size":1,"dp_size":1})", "application/json");
  });
  srv.Post(R"(/.*)", record);
  int port = srv.bind_to_any_port("127.0.0.1");
  std::thread th([&] { srv.listen_after_bind(); });
  Model m;
  m.spec = tensor_set(6, 0);
  size_t i = 0;
  {
    Trainer tr;
    tr.transport = WSYNC_TEST_STUB_TRANSPORT;
    ASSERT_EQ(WSYNC_OK, tr.init("sglang", "http://127.0.0.1:" + std::to_string(port) + "=2",
                                {{"engine_receivers", "none"}, {"timeout_ms", "5000"}}))
        << wsync_last_error();
    wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
    ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
    EXPECT_EQ(2u, s.num_receivers);
    for (uint64_t v = 1; v <= 2; ++v) ASSERT_EQ(WSYNC_OK, publish(tr, m, v)) << wsync_last_error();
    ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
    EXPECT_EQ(2u, s.committed_version);
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_GE(seen.size(), 5u);
    EXPECT_EQ(0u, seen[i++].rfind("GET /model_info", 0)) << seen[0];  // health: no generation
    // An earlier trainer's session and group are cleaned up first (best effort).
    EXPECT_EQ(0u, seen[i++].rfind("POST /end_weight_update", 0)) << seen[1];
    EXPECT_EQ(0u, seen[i++].rfind("POST /destroy_weights_update_group", 0)) << seen[2];
    EXPECT_EQ(0u, seen[i++].rfind("POST /continue_generation", 0)) << seen[3];
    EXPECT_EQ(0u, seen[i].rfind("POST /init_weights_update_group", 0)) << seen[i];
    EXPECT_NE(std::string::npos, seen[i].find("\"rank_offset\":1")) << seen[i];
    EXPECT_NE(std::string::npos, seen[i].find("\"world_size\":3")) << seen[i];
    EXPECT_NE(std::string::npos, seen[i++].find("\"group_name\":\"weight_update_group\"")) << seen[i - 1];
    for (uint64_t v = 1; v <= 2; ++v) {
      ASSERT_LT(i, seen.size());
      EXPECT_EQ(0u, seen[i++].rfind("POST /begin_weight_update {}", 0)) << seen[i - 1];
      size_t updates = 0;
      for (; i < seen.size() && seen[i].rfind("POST /update_weights_from_distributed", 0) == 0; ++i) {
        EXPECT_NE(std::string::npos, seen[i].find("\"flush_cache\":false")) << seen[i];
        ++updates;
      }
      EXPECT_EQ(s.buckets / 2, updates) << "version " << v;
      ASSERT_LT(i + 2, seen.size());
      EXPECT_EQ(0u, seen[i++].rfind("POST /end_weight_update {}", 0)) << seen[i - 1];
      EXPECT_EQ(0u, seen[i++].rfind("GET /flush_cache", 0)) << seen[i - 1];
      EXPECT_EQ(0u, seen[i].rfind("POST /update_weight_version", 0)) << seen[i];
      EXPECT_NE(std::string::npos, seen[i++].find("\"new_version\":\"" + std::to_string(v) + "\"")) << seen[i - 1];
    }
    EXPECT_EQ(seen.size(), i);
  }  // destroy
  srv.stop();
  th.join();
  ASSERT_EQ(i + 1, seen.size());
  EXPECT_EQ(0u, seen.back().rfind("POST /destroy_weights_update_group", 0)) << seen.back();
}

}  // namespace

// ---- Many senders (issue 24) ------------------------------------------------------------------
// A trainer of two processes into a vLLM server whose workers run the wsync backend (the reference
// engine with --vllm-backend wsync, 2 GPUs). Batch 1 (the small tensors) is sender 1's alone:
// sender 0 sends no bucket of it; batch 2 is half of every tensor's rows each, several buckets of
// sender 0's. Sender 0 drives the server, both batches queued at once: one /update_weights per
// batch naming every tensor whole, in batch order; sender 1 (a child) only sends its boxes, to
// workers that joined it through sender 0's store. Both workers hold every byte of both versions.

namespace {

using harness::desc_of;
using harness::read_addr_file;
using harness::spawn;
using harness::temp_dir;
using harness::tensor_of;
using harness::wait_child;

std::vector<synth_tensor_t> two_sender_model() {
  return {tensor_of("layer.0.bias", WSYNC_DTYPE_INT64, {10}), tensor_of("norm.weight", WSYNC_DTYPE_FLOAT32, {7}),
          tensor_of("embed.weight", WSYNC_DTYPE_FLOAT32, {3000, 64}), tensor_of("layer.0.w", WSYNC_DTYPE_BFLOAT16, {64, 130})};
}

// Sender k's part of every tensor at `version`: the first two tensors whole from sender 1 (sender 0
// has none of them), the others by rows (torch.chunk over 2 along dim 0): bytes and descriptors.
struct Rows {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<wsync_tensor_t> descs;
};

Rows rows_of(const std::vector<synth_tensor_t>& spec, uint32_t k, uint64_t version) {
  Rows out;
  out.bytes.resize(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) {
    const synth_tensor_t& t = spec[i];
    std::vector<uint8_t> full(t.nbytes);
    synth_fill(&t, version, full.data());
    const bool whole = i < 2;  // sender 1's alone
    if (whole && k == 0) continue;
    const int64_t half = whole ? 0 : (t.shape[0] + 1) / 2, begin = k == 0 ? 0 : half, end = k == 0 ? half : t.shape[0];
    const uint64_t row = t.nbytes / static_cast<uint64_t>(t.shape[0]);
    out.bytes[i].assign(full.begin() + begin * row, full.begin() + end * row);
    wsync_tensor_t d = desc_of(t, out.bytes[i].data());
    d.flags = WSYNC_TENSOR_SLICE;
    std::memcpy(d.full_shape, t.shape, sizeof d.full_shape);
    d.box_offset[0] = begin;
    d.shape[0] = end - begin;
    d.nbytes = out.bytes[i].size();
    out.descs.push_back(d);
  }
  return out;
}

// Versions 1..versions of sender k's part, in two batches each, both queued before either is
// waited for.
wsync_status_t publish_rows(wsync_group_t* g, uint32_t k, uint64_t versions) {
  const std::vector<synth_tensor_t> spec = two_sender_model();
  wsync_status_t st = WSYNC_OK;
  for (uint64_t v = 1; v <= versions && st == WSYNC_OK; ++v) {
    Rows r = rows_of(spec, k, v);
    const size_t first = k == 0 ? 0 : 2;  // batch 1: the whole tensors (none of sender 0's)
    uint64_t t1 = 0, t2 = 0;
    st = wsync_group_send_start(g, r.descs.data(), first, -1, &t1);
    if (st == WSYNC_OK) st = wsync_group_send_start(g, r.descs.data() + first, r.descs.size() - first, -1, &t2);
    if (st == WSYNC_OK) st = wsync_group_send_wait(g, t1, -1);
    if (st == WSYNC_OK) st = wsync_group_send_wait(g, t2, -1);
    if (st == WSYNC_OK) st = wsync_group_finalize(g, v, -1);
  }
  return st;
}

int second_sender(const std::string& addr_file, uint32_t receivers) {
  const std::string s0 = read_addr_file(addr_file, 20000);
  if (s0.empty()) return 5;
  std::vector<wsync_option_t> opts = {WSYNC_OPTION("num_senders", "2"), WSYNC_OPTION("sender_rank", "1"),
                                      WSYNC_OPTION("sender0_store", s0.c_str()), WSYNC_OPTION("timeout_ms", "20000"),
                                      WSYNC_OPTION("bucket_bytes", "65536")};
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = receivers;
  cfg.group_name = "weight_update_group";
  cfg.store_addr = "127.0.0.1:0";
  cfg.options = opts.data();
  cfg.num_options = opts.size();
  cfg.timeout_ms = 30000;
  wsync_group_t* g = nullptr;
  wsync_status_t st = wsync_group_init(&cfg, &g);
  if (st == WSYNC_OK) st = publish_rows(g, 1, 2);
  if (st != WSYNC_OK) std::fprintf(stderr, "sender 1: %s: %s\n", wsync_status_name(st), wsync_last_error());
  wsync_group_destroy(g);
  return st == WSYNC_OK ? 0 : 3;
}

}  // namespace

TEST(HttpEngines, TwoSendersIntoAVllmWhoseWorkersRunTheWsyncBackend) {
  Engine e;
  start_engine(&e, "vllm", "0.32.0", {"--gpus", "2", "--vllm-backend", "wsync"});
  const std::string af = temp_dir() + "/sender0.addr";
  pid_t second = spawn([af] { return second_sender(af, 2); });
  {
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init("vllm", e.url() + "=2",
                                {{"adapter.backend", "wsync"}, {"num_senders", "2"}, {"store_addr_file", af}}))
        << wsync_last_error();
    forget_requests(e);
    ASSERT_EQ(WSYNC_OK, publish_rows(tr.g, 0, 2)) << wsync_last_error();
    expect_engine_holds(e, two_sender_model(), 2);
    wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
    ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
    EXPECT_EQ(2u, s.committed_version);
    EXPECT_EQ(2u, s.plans_computed);  // one per batch, reused for version 2
    wsync_group_stats_t s0 = WSYNC_GROUP_STATS_INIT;
    ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s0));
    EXPECT_GE(s0.buckets, 4u) << "sender 0 sent several buckets of batch 2 each version";
    // One /update_weights per batch (2 batches x 2 versions), in batch order, each naming its
    // tensors whole; the first of each version comes from no bucket of sender 0's.
    size_t updates = 0;
    for (const Seen& r : requests(e))
      if (r.path == "/update_weights") {
        ++updates;
        const bool first = updates % 2 == 1;
        for (const char* name : first ? std::vector<const char*>{"layer.0.bias", "norm.weight"}
                                      : std::vector<const char*>{"embed.weight", "layer.0.w"})
          EXPECT_NE(std::string::npos, r.body.find(name)) << "update request " << updates << ": " << r.body;
        EXPECT_EQ(std::string::npos, r.body.find(first ? "embed.weight" : "norm.weight")) << r.body;
        EXPECT_EQ(200, r.status) << r.body;
      }
    EXPECT_EQ(4u, updates);
  }
  EXPECT_EQ(0, wait_child(second, 30000));
}

// Sender 0 alone drives the engine servers, and only engines whose workers embed wsync can take
// boxes from several senders: anything else is refused at init, naming the option.
TEST(HttpEngines, ManySendersRefuseEnginesTheyCannotServe) {
  Trainer tr;
  wsync_status_t st = tr.init("vllm", "http://127.0.0.1:1=1", {{"num_senders", "2"}, {"engine_receivers", "none"}});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, st);
  EXPECT_NE(std::string::npos, std::string(wsync_last_error()).find("engine_receivers=wsync")) << wsync_last_error();
  st = tr.init("vllm", "http://127.0.0.1:1=1",
               {{"num_senders", "2"}, {"sender_rank", "1"}, {"sender0_store", "127.0.0.1:1"}});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, st);
  EXPECT_NE(std::string::npos, std::string(wsync_last_error()).find("sender 0 alone")) << wsync_last_error();
}

namespace {

const char kWsyncEngine[] = "--vllm-backend";

void start_wsync_vllm(Engine* e, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {kWsyncEngine, "wsync"};
  args.insert(args.end(), extra.begin(), extra.end());
  start_engine(e, "vllm", "0.32.0", args);
}

}  // namespace

// A declared update (wsync_group_declare_update) that the engine refuses: the first send fails
// with the engine's words before anything is paused, begun or sent, and the server serves on.
TEST(HttpEngines, ADeclaredUpdateTheEngineRefusesTouchesNothing) {
  Engine e;
  start_wsync_vllm(&e, {"--wsync-refuse", "layers.3.weight"});
  Model m;
  m.spec = tensor_set(8, 0);
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("vllm", e.url(), {{"adapter.backend", "wsync"}})) << wsync_last_error();
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
  forget_requests(e);
  m.fill(2);
  ASSERT_EQ(WSYNC_OK, wsync_group_declare_update(tr.g, m.descs.data(), m.descs.size())) << wsync_last_error();
  // (send_batch returns once its tensors are staged: the refusal comes by the finalize at the latest)
  const wsync_status_t sent = wsync_group_send_batch(tr.g, m.descs.data(), m.descs.size(), -1);
  EXPECT_TRUE(sent == WSYNC_OK || sent == WSYNC_ERR_INVALID_ARGUMENT) << wsync_last_error();
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, wsync_group_finalize(tr.g, 2, -1));
  const std::string msg = wsync_last_error();
  EXPECT_NE(std::string::npos, msg.find("tensor 'layers.3.weight' has a shape the served model does not have")) << msg;
  EXPECT_NE(std::string::npos, msg.find("refused the declared update before anything was paused, sent or loaded"))
      << msg;
  // Only the check reached the server: no pause, no start, no bucket, no abandon.
  const std::vector<std::string> r = routes(e);
  EXPECT_EQ((std::vector<std::string>{"/collective_rpc"}), r);
  EXPECT_NE(std::string::npos, requests(e).at(0).body.find("wsync_check")) << requests(e).at(0).body;
  EXPECT_EQ("false", state(e, "paused"));
  EXPECT_EQ("false", state(e, "update_active"));
  expect_engine_holds(e, m.spec, 1);
}

// An update that fails before any bucket loaded: the server holds one version, so it resumes by
// default (engine_resume_on_failure=auto), and the error says so. One that fails after a bucket
// loaded holds a mix: it stays paused, and the error says what to do. Neither sends a
// /finish_weight_update that vLLM must refuse.
TEST(HttpEngines, AFailedUpdateResumesWhereTheServerHoldsOneVersion) {
  Engine e;
  start_wsync_vllm(&e);
  Model m;
  m.spec = tensor_set(8, 0);
  {
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init("vllm", e.url(), {{"adapter.backend", "wsync"}})) << wsync_last_error();
    ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
    post(e, "/debug/fail_updates?count=1&message=refused%20once", "");
    m.fill(2);
    const wsync_status_t sent = wsync_group_send_batch(tr.g, m.descs.data(), m.descs.size(), -1);
    EXPECT_TRUE(sent == WSYNC_OK || sent == WSYNC_ERR_ENGINE) << wsync_last_error();
    EXPECT_EQ(WSYNC_ERR_ENGINE, wsync_group_finalize(tr.g, 2, -1));
    const std::string msg = wsync_last_error();
    EXPECT_NE(std::string::npos, msg.find("refused once")) << msg;
    EXPECT_NE(std::string::npos, msg.find("holds version 1 and serves again")) << msg;
    EXPECT_EQ("false", state(e, "paused"));
    EXPECT_EQ("0", state(e, "unmatched_finishes"));
    // (what the server holds is its engine's word, emulated here: the reference engine's own
    // receiver writes bytes as they come, so its tensors are not checked in this case)
  }
  {
    Trainer tr;  // (a new group: the failed one is broken)
    ASSERT_EQ(WSYNC_OK, tr.init("vllm", e.url(), {{"adapter.backend", "wsync"}})) << wsync_last_error();
    m.fill(3);
    const size_t half = m.descs.size() / 2;
    ASSERT_EQ(WSYNC_OK, wsync_group_send_batch(tr.g, m.descs.data(), half, -1)) << wsync_last_error();
    wait_delivered(tr, 1);
    post(e, "/debug/fail_updates?count=1&message=refused%20later", "");
    const wsync_status_t sent = wsync_group_send_batch(tr.g, m.descs.data() + half, m.descs.size() - half, -1);
    EXPECT_TRUE(sent == WSYNC_OK || sent == WSYNC_ERR_ENGINE) << wsync_last_error();
    EXPECT_EQ(WSYNC_ERR_ENGINE, wsync_group_finalize(tr.g, 3, -1));
    const std::string msg = wsync_last_error();
    EXPECT_NE(std::string::npos, msg.find("holds a mix of two versions (1 bucket(s)")) << msg;
    EXPECT_NE(std::string::npos, msg.find("its generation stays paused: publish a complete version")) << msg;
    EXPECT_EQ("true", state(e, "paused"));
    EXPECT_EQ("0", state(e, "unmatched_finishes"));
  }
  // The failed group's destroy leaves it so (a mix is not served because the trainer went away).
  EXPECT_EQ("true", state(e, "paused"));
  // The next trainer's reset resumes it.
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("vllm", e.url(), {{"adapter.backend", "wsync"}})) << wsync_last_error();
  EXPECT_EQ("false", state(e, "paused"));
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 4)) << wsync_last_error();
  expect_engine_holds(e, m.spec, 4);
}
