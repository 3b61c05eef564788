// The HTTP adapters end to end: a trainer (this process) drives reference-engine processes
// (samples/reference_engine) that speak SGLang's, vLLM's or LMDeploy's HTTP protocol and embed a
// wsync receiver; the bytes travel over UCX on loopback. Every tensor of every version is checked
// in the engines (XXH3 of their copy, read back through their debug route), and so are the
// requests they saw, in order. Then the failures a user meets: an engine that says no, a server
// that is down at init, one that dies mid-update, a wrong API key, a reply that is not JSON.
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "wsync.h"

using namespace harness;

namespace {

struct Engine {
  pid_t pid = -1;
  int port = 0;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  void kill_now() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  ~Engine() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      if (wait_child(pid, 10000) < 0) kill_now();
    }
  }
};

// Start a reference engine; returns when it listens.
void start_engine(Engine* e, const std::string& protocol, std::vector<std::string> extra = {}) {
  std::string dir = temp_dir();
  std::string port_file = dir + "/port";
  std::vector<std::string> args = {WSYNC_REFERENCE_ENGINE, "--protocol", protocol, "--port", "0", "--port-file", port_file};
  args.insert(args.end(), extra.begin(), extra.end());
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  e->pid = pid;
  std::string line = read_addr_file(port_file, 20000);
  e->port = std::atoi(line.c_str());
  ASSERT_GT(e->port, 0) << "the reference engine did not start";
}

// A port nothing listens on (bound for a moment to get a free number, then closed).
int closed_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct Trainer {
  std::vector<std::string> keys, values;
  std::string transport;  // empty: the default (ucx)
  wsync_group_t* g = nullptr;
  wsync_status_t init(const std::string& adapter, const std::string& engines,
                      std::vector<std::pair<std::string, std::string>> extra = {}) {
    // The reference engine embeds wsync receivers (an unmodified engine would not: "none").
    std::vector<std::pair<std::string, std::string>> kv = {
        {"engines", engines}, {"engine_receivers", "wsync"}, {"timeout_ms", "20000"}, {"engine_timeout_ms", "20000"}};
    // vLLM fixes the bucket size itself (packed_buffer_size_bytes): the group takes it from the adapter.
    if (adapter == "vllm")
      kv.push_back({"adapter.packed_buffer_size_bytes", "262144"});
    else
      kv.push_back({"bucket_bytes", "262144"});
    kv.insert(kv.end(), extra.begin(), extra.end());
    for (auto& p : kv) {
      keys.push_back(p.first);
      values.push_back(p.second);
    }
    std::vector<wsync_option_t> opts;
    for (size_t i = 0; i < keys.size(); ++i) opts.push_back(WSYNC_OPTION(keys[i].c_str(), values[i].c_str()));
    wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
    cfg.num_receivers = 0;  // from the engines
    cfg.group_name = "weight_update_group";
    cfg.adapter = adapter.c_str();
    cfg.options = opts.data();
    cfg.num_options = opts.size();
    cfg.timeout_ms = 30000;
    cfg.transport = transport.empty() ? nullptr : transport.c_str();
    return wsync_group_init(&cfg, &g);
  }
  ~Trainer() { wsync_group_destroy(g); }
};

std::string get(const Engine& e, const std::string& path) {
  httplib::Client c("127.0.0.1", e.port);
  c.set_read_timeout(10, 0);
  auto r = c.Get(path.c_str());
  return r ? r->body : std::string();
}

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// Every tensor of `spec` at `version`, as the engine reports it (name, dtype, shape, XXH3).
void expect_engine_holds(const Engine& e, const std::vector<synth_tensor_t>& spec, uint64_t version) {
  std::string body = get(e, "/debug/tensors");
  ASSERT_FALSE(body.empty()) << e.url();
  EXPECT_NE(std::string::npos, body.find("\"committed_version\":" + std::to_string(version))) << body.substr(0, 300);
  for (const auto& t : spec) {
    std::string want = "\"" + std::string(t.name) + "\":{";
    size_t at = body.find(want);
    ASSERT_NE(std::string::npos, at) << e.url() << " lacks " << t.name;
    size_t end = body.find('}', at);
    std::string entry = body.substr(at, end - at);
    EXPECT_NE(std::string::npos, entry.find(hex16(synth_expected_checksum(&t, version))))
        << e.url() << " version " << version << " tensor " << t.name << ": " << entry;
    EXPECT_NE(std::string::npos, entry.find(wsync_dtype_name(t.dtype))) << entry;
  }
}

wsync_status_t publish(Trainer& tr, Model& m, uint64_t version) {
  m.fill(version);
  size_t half = m.descs.size() / 2;
  wsync_status_t st = wsync_group_send_batch(tr.g, m.descs.data(), half, -1);
  if (st == WSYNC_OK) st = wsync_group_send_batch(tr.g, m.descs.data() + half, m.descs.size() - half, -1);
  if (st == WSYNC_OK) st = wsync_group_finalize(tr.g, version, -1);
  return st;
}

// The routes an engine saw, in order, as one line each ("POST /route").
std::vector<std::string> routes(const Engine& e) {
  std::string body = get(e, "/debug/requests");
  std::vector<std::string> out;
  for (size_t at = 0; (at = body.find("\"path\":\"", at)) != std::string::npos;) {
    at += 8;
    size_t end = body.find('"', at);
    std::string path = body.substr(at, end - at);
    size_t q = path.find('?');
    if (q != std::string::npos) path = path.substr(0, q);
    if (path != "/health" && path.compare(0, 7, "/debug/") != 0) out.push_back(path);
  }
  return out;
}

size_t count(const std::vector<std::string>& v, const std::string& s) { return std::count(v.begin(), v.end(), s); }

class Protocols : public ::testing::TestWithParam<const char*> {};

TEST_P(Protocols, ThreeVersionsIntoTwoEnginesEveryTensorChecked) {
  const std::string proto = GetParam();
  Engine a, b;
  start_engine(&a, proto);
  start_engine(&b, proto);
  Model m;
  m.spec = tensor_set(24, 0);
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init(proto, a.url() + "=1," + b.url() + "=1")) << wsync_last_error();
  wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
  EXPECT_EQ(2u, s.num_receivers);
  for (uint64_t v = 1; v <= 3; ++v) {
    ASSERT_EQ(WSYNC_OK, publish(tr, m, v)) << "version " << v << ": " << wsync_last_error();
    expect_engine_holds(a, m.spec, v);
    expect_engine_holds(b, m.spec, v);
  }
  ASSERT_EQ(WSYNC_OK, wsync_group_get_stats(tr.g, &s));
  // The dialogue each engine saw: init first, then per update the engine's own markers.
  for (const Engine* e : {&a, &b}) {
    std::vector<std::string> r = routes(*e);
    ASSERT_FALSE(r.empty());
    if (proto == "vllm") {
      EXPECT_EQ("/init_weight_transfer_engine", r[0]);
      EXPECT_EQ(3u, count(r, "/start_weight_update"));
      EXPECT_EQ(3u, count(r, "/finish_weight_update"));
      EXPECT_EQ(s.buckets, count(r, "/update_weights"));
    } else {
      EXPECT_EQ("/init_weights_update_group", r[0]);
      if (proto == "sglang") {
        EXPECT_EQ(s.buckets, count(r, "/update_weights_from_distributed"));
        EXPECT_EQ(3u, count(r, "/update_weight_version"));
        EXPECT_GE(count(r, "/flush_cache"), 3u);
      } else {  // lmdeploy: one more request per update, the finalize-only one
        EXPECT_EQ(s.buckets + 3, count(r, "/update_weights_from_distributed"));
      }
    }
  }
  if (proto == "sglang") {
    EXPECT_NE(std::string::npos, get(a, "/model_info").find("\"3\"")) << get(a, "/model_info");
  }
  if (proto == "vllm") {
    EXPECT_NE(std::string::npos, get(a, "/weight_info").find("\"3\"")) << get(a, "/weight_info");
  }
}

INSTANTIATE_TEST_SUITE_P(HttpEngines, Protocols, ::testing::Values("sglang", "vllm", "lmdeploy"));

TEST(HttpEngines, AnEngineThatSaysNoFailsTheBatchWithItsOwnMessage) {
  Engine a;
  start_engine(&a, "sglang", {"--fail-update", "the disk is on fire"});
  Model m;
  m.spec = tensor_set(6, 0);
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("sglang", a.url())) << wsync_last_error();
  m.fill(1);
  EXPECT_EQ(WSYNC_ERR_ENGINE, wsync_group_send_batch(tr.g, m.descs.data(), m.descs.size(), -1));
  std::string msg = wsync_last_error();
  EXPECT_NE(std::string::npos, msg.find("the disk is on fire")) << msg;
  EXPECT_NE(std::string::npos, msg.find(a.url())) << msg;
}

// SGLang refuses /flush_cache while requests run: the trainer retries it (idempotent), and gives
// up with the engine's words after its bounded retries.
TEST(HttpEngines, FlushCacheIsRetriedWhileTheEngineIsBusyThenGivenUp) {
  Model m;
  m.spec = tensor_set(4, 0);
  {
    Engine a;
    start_engine(&a, "sglang", {"--flush-busy", "2"});
    Trainer tr;
    ASSERT_EQ(WSYNC_OK, tr.init("sglang", a.url())) << wsync_last_error();
    ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
    EXPECT_EQ(3u, count(routes(a), "/flush_cache"));  // two refusals, then done
    expect_engine_holds(a, m.spec, 1);
  }
  Engine b;
  start_engine(&b, "sglang", {"--flush-busy", "100"});
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
  std::string init = get(b, "/debug/requests");
  EXPECT_NE(std::string::npos, init.find("\\\"world_size\\\":2")) << init.substr(0, 400);
  EXPECT_NE(std::string::npos, init.find("\\\"rank_offset\\\":1")) << init.substr(0, 400);
}

TEST(HttpEngines, AServerThatDiesMidUpdateGivesAClearErrorWithinTheTimeout) {
  Engine a, b;
  start_engine(&a, "lmdeploy");
  start_engine(&b, "lmdeploy");
  Model m;
  m.spec = tensor_set(12, 0);
  Trainer tr;
  ASSERT_EQ(WSYNC_OK, tr.init("lmdeploy", a.url() + "," + b.url(), {{"timeout_ms", "5000"}, {"engine_timeout_ms", "5000"}}))
      << wsync_last_error();
  ASSERT_EQ(WSYNC_OK, publish(tr, m, 1)) << wsync_last_error();
  b.kill_now();
  auto t0 = std::chrono::steady_clock::now();
  wsync_status_t st = publish(tr, m, 2);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(WSYNC_OK, st);
  EXPECT_LT(secs, 15.0);
  std::string msg = wsync_last_error();
  EXPECT_TRUE(msg.find("rank 2") != std::string::npos || msg.find(b.url()) != std::string::npos) << msg;
}

TEST(HttpEngines, AWrongApiKeyIsAClearError) {
  Engine a;
  start_engine(&a, "vllm", {"--api-key", "right"});
  Trainer tr;
  EXPECT_EQ(WSYNC_ERR_REJECTED, tr.init("vllm", a.url(), {{"engine_api_key", "wrong"}}));
  std::string msg = wsync_last_error();
  EXPECT_NE(std::string::npos, msg.find("401")) << msg;
  Trainer ok;
  EXPECT_EQ(WSYNC_OK, ok.init("vllm", a.url(), {{"engine_api_key", "right"}})) << wsync_last_error();
}

TEST(HttpEngines, AReplyThatIsNotJsonIsAProtocolError) {
  httplib::Server srv;
  srv.Get("/health", [](const httplib::Request&, httplib::Response& r) { r.set_content("ok", "text/plain"); });
  srv.Post("/init_weights_update_group", [](const httplib::Request&, httplib::Response& r) {
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
  EXPECT_NE(std::string::npos, msg.find("gateway says hi")) << msg;
}

// An unmodified engine embeds no wsync receiver: there is no control channel, its HTTP replies are
// the acknowledgements and the transport moves the bytes to ranks rank_offset.. (NCCL in real
// life). Here an in-process server plays SGLang and the stub test transport moves nothing: what is
// checked is the dialogue, in order, with the fields the engine must see.
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
  srv.Get("/health", record);
  srv.Get("/flush_cache", record);
  srv.Post(R"(/.*)", record);
  int port = srv.bind_to_any_port("127.0.0.1");
  std::thread th([&] { srv.listen_after_bind(); });
  Model m;
  m.spec = tensor_set(6, 0);
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
    ASSERT_GE(seen.size(), 3u);
    EXPECT_EQ(0u, seen[0].rfind("GET /health", 0)) << seen[0];
    EXPECT_EQ(0u, seen[1].rfind("POST /init_weights_update_group", 0)) << seen[1];
    EXPECT_NE(std::string::npos, seen[1].find("\"rank_offset\":1")) << seen[1];
    EXPECT_NE(std::string::npos, seen[1].find("\"world_size\":3")) << seen[1];
    EXPECT_NE(std::string::npos, seen[1].find("\"group_name\":\"weight_update_group\"")) << seen[1];
    size_t i = 2;
    for (uint64_t v = 1; v <= 2; ++v) {
      size_t updates = 0;
      for (; i < seen.size() && seen[i].rfind("POST /update_weights_from_distributed", 0) == 0; ++i) {
        EXPECT_NE(std::string::npos, seen[i].find("\"flush_cache\":false")) << seen[i];
        ++updates;
      }
      EXPECT_EQ(s.buckets / 2, updates) << "version " << v;
      ASSERT_LT(i + 1, seen.size());
      EXPECT_EQ(0u, seen[i++].rfind("GET /flush_cache", 0));
      EXPECT_EQ(0u, seen[i].rfind("POST /update_weight_version", 0)) << seen[i];
      EXPECT_NE(std::string::npos, seen[i++].find("\"new_version\":\"" + std::to_string(v) + "\"")) << seen[i - 1];
    }
    EXPECT_EQ(seen.size(), i);
  }  // destroy
  srv.stop();
  th.join();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(0u, seen.back().rfind("POST /destroy_weights_update_group", 0)) << seen.back();
}

}  // namespace
