// engine_fixture.cpp — see engine_fixture.h.
#include "engine_fixture.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

using harness::Model;

namespace engines {
namespace {

using Json = std::unique_ptr<cJSON, decltype(&cJSON_Delete)>;
Json parse(const std::string& s) { return Json(cJSON_Parse(s.c_str()), cJSON_Delete); }

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string text_of(const cJSON* v) {
  if (v == nullptr) return "";
  if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
  if (cJSON_IsNull(v)) return "null";
  if (cJSON_IsString(v)) return v->valuestring;
  if (cJSON_IsNumber(v)) return std::to_string(static_cast<long long>(v->valuedouble));
  char* p = cJSON_PrintUnformatted(v);
  std::string out = p ? p : "";
  cJSON_free(p);
  return out;
}

}  // namespace

std::string release_name(const Release& r) {
  std::string s = std::string(r.protocol) + "_" + r.version;
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

void Engine::kill_now() {
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
}

Engine::~Engine() {
  if (pid > 0) {
    ::kill(pid, SIGTERM);
    if (harness::wait_child(pid, 10000) < 0) kill_now();
  }
}

void start_engine(Engine* e, const std::string& protocol, const std::string& version, std::vector<std::string> extra) {
  std::string port_file = harness::temp_dir() + "/port";
  std::vector<std::string> args = {WSYNC_REFERENCE_ENGINE, "--protocol", protocol, "--port", "0", "--port-file", port_file};
  if (!version.empty()) args.insert(args.end(), {"--engine-version", version});
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
  std::string line = harness::read_addr_file(port_file, 20000);
  e->port = std::atoi(line.c_str());
  ASSERT_GT(e->port, 0) << "the reference engine (" << protocol << " " << version << ") did not start";
}

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

wsync_status_t Trainer::init(const std::string& adapter, const std::string& engines, Options extra) {
  // The reference engine embeds wsync receivers (an unmodified engine would not: "none").
  Options kv = {{"engines", engines}, {"engine_receivers", "wsync"}, {"timeout_ms", "20000"}, {"engine_timeout_ms", "20000"}};
  // vLLM fixes the bucket size itself (packed_buffer_size_bytes): the group takes it from the adapter
  // (its NCCL backend; with the wsync backend the group's bucket_bytes).
  bool wsync_backend = false;
  for (const auto& p : extra) wsync_backend |= p.first == "adapter.backend" && p.second == "wsync";
  if (adapter == "vllm" && !wsync_backend)
    kv.push_back({"adapter.packed_buffer_size_bytes", "262144"});
  else
    kv.push_back({"bucket_bytes", "262144"});
  kv.insert(kv.end(), extra.begin(), extra.end());
  keys.clear();
  values.clear();
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

std::string get(const Engine& e, const std::string& path) {
  httplib::Client c("127.0.0.1", e.port);
  c.set_read_timeout(10, 0);
  auto r = c.Get(path.c_str());
  return r ? r->body : std::string();
}

std::string post(const Engine& e, const std::string& path, const std::string& body) {
  httplib::Client c("127.0.0.1", e.port);
  c.set_read_timeout(10, 0);
  auto r = c.Post(path.c_str(), body, "application/json");
  return r ? r->body : std::string();
}

void expect_engine_holds(const Engine& e, const std::vector<synth_tensor_t>& spec, uint64_t version) {
  Json doc = parse(get(e, "/debug/tensors"));
  cJSON* ranks = cJSON_GetObjectItemCaseSensitive(doc.get(), "ranks");
  ASSERT_TRUE(cJSON_IsArray(ranks)) << e.url() << " gave no /debug/tensors";
  ASSERT_GT(cJSON_GetArraySize(ranks), 0) << e.url();
  cJSON* rank = nullptr;
  cJSON_ArrayForEach(rank, ranks) {
    std::string who = e.url() + " rank " + text_of(cJSON_GetObjectItemCaseSensitive(rank, "rank"));
    EXPECT_EQ(std::to_string(version), text_of(cJSON_GetObjectItemCaseSensitive(rank, "committed_version"))) << who;
    cJSON* tensors = cJSON_GetObjectItemCaseSensitive(rank, "tensors");
    for (const auto& t : spec) {
      cJSON* entry = cJSON_GetObjectItemCaseSensitive(tensors, t.name);
      ASSERT_NE(nullptr, entry) << who << " lacks " << t.name;
      EXPECT_EQ(hex16(synth_expected_checksum(&t, version)), text_of(cJSON_GetObjectItemCaseSensitive(entry, "xxh3")))
          << who << " version " << version << " tensor " << t.name;
      EXPECT_EQ(wsync_dtype_name(t.dtype), text_of(cJSON_GetObjectItemCaseSensitive(entry, "dtype"))) << who << " " << t.name;
    }
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

void wait_delivered(Trainer& tr, uint64_t n) {
  wsync_group_stats_t st = WSYNC_GROUP_STATS_INIT;
  for (int i = 0; i < 3000 && wsync_group_get_stats(tr.g, &st) == WSYNC_OK && st.batches < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(st.batches, n) << "the trainer's batches were not delivered within 30 s";
}

std::vector<Seen> requests(const Engine& e) {
  std::vector<Seen> out;
  Json doc = parse(get(e, "/debug/requests"));
  cJSON* r = nullptr;
  cJSON_ArrayForEach(r, doc.get()) {
    Seen s;
    s.method = text_of(cJSON_GetObjectItemCaseSensitive(r, "method"));
    s.path = text_of(cJSON_GetObjectItemCaseSensitive(r, "path"));
    s.path = s.path.substr(0, s.path.find('?'));
    s.body = text_of(cJSON_GetObjectItemCaseSensitive(r, "body"));
    cJSON* st = cJSON_GetObjectItemCaseSensitive(r, "status");
    s.status = cJSON_IsNumber(st) ? st->valueint : 0;
    if (s.path != "/health" && s.path.compare(0, 7, "/debug/") != 0) out.push_back(s);
  }
  return out;
}

std::vector<std::string> routes(const Engine& e) {
  std::vector<std::string> out;
  for (const Seen& s : requests(e)) out.push_back(s.path);
  return out;
}

size_t count(const std::vector<std::string>& v, const std::string& s) { return std::count(v.begin(), v.end(), s); }

size_t find_route(const std::vector<std::string>& v, const std::string& path, size_t from) {
  for (size_t i = from; i < v.size(); ++i)
    if (v[i] == path) return i;
  return v.size();
}

void forget_requests(const Engine& e) {
  httplib::Client c("127.0.0.1", e.port);
  c.Delete("/debug/requests");
}

std::string state(const Engine& e, const char* field) {
  Json doc = parse(get(e, "/debug/state"));
  return text_of(cJSON_GetObjectItemCaseSensitive(doc.get(), field));
}

}  // namespace engines
