// Reference engines and trainers for the HTTP adapter tests (test_http_engines.cpp,
// test_engine_recovery.cpp): start a tests/reference_engine process in one release's mode, run a
// trainer group against engine servers, read back what each engine holds and what it was asked.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "wsync.h"

namespace engines {

// One engine release: the adapter/protocol name and the version the reference engine plays.
struct Release {
  const char* protocol;
  const char* version;
};
// "sglang_0_5_23": a gtest parameter name.
std::string release_name(const Release& r);

struct Engine {
  pid_t pid = -1;
  int port = 0;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  void kill_now();  // SIGKILL, as a crashed server
  ~Engine();        // SIGTERM, then SIGKILL after 10 s
};

// Starts a reference engine (version "": its default, the newest) and returns when it listens.
// Fails the current test (gtest ASSERT) when it does not start.
void start_engine(Engine* e, const std::string& protocol, const std::string& version = "",
                  std::vector<std::string> extra = {});

// A port nothing listens on (bound for a moment to get a free number, then closed).
int closed_port();

using Options = std::vector<std::pair<std::string, std::string>>;

struct Trainer {
  std::vector<std::string> keys, values;
  std::string transport;  // empty: the default (ucx)
  wsync_group_t* g = nullptr;
  // A group with the engines as receivers ("url=gpus,..."), small buckets, 20 s timeouts.
  wsync_status_t init(const std::string& adapter, const std::string& engines, Options extra = {});
  void destroy() {
    wsync_group_destroy(g);
    g = nullptr;
  }
  ~Trainer() { destroy(); }
};

// GET path from the engine; "" when it does not answer.
std::string get(const Engine& e, const std::string& path);
std::string post(const Engine& e, const std::string& path, const std::string& body = "{}");

// Every tensor of `spec` at `version` is in the engine (dtype and XXH3 of the bytes, read back
// through /debug/tensors) and every local rank committed `version`.
void expect_engine_holds(const Engine& e, const std::vector<synth_tensor_t>& spec, uint64_t version);

// One update: fill the model for `version`, send it in two batches, finalize.
wsync_status_t publish(Trainer& tr, harness::Model& m, uint64_t version);
// Until the trainer's first `n` batches were delivered (every server answered their UPDATE):
// send_batch returns once wsync no longer reads the tensors, maybe before (ABI 1.5). At most 30 s;
// a test failure when they were not.
void wait_delivered(Trainer& tr, uint64_t n);

// A request the engine saw (GET /debug/requests), debug routes and /health left out.
struct Seen {
  std::string method, path, body;  // path without the query
  int status = 0;                  // 0 while it ran
};
std::vector<Seen> requests(const Engine& e);
std::vector<std::string> routes(const Engine& e);  // paths only
size_t count(const std::vector<std::string>& v, const std::string& s);
// Index of the first `path` at or after `from` in v; v.size() when absent.
size_t find_route(const std::vector<std::string>& v, const std::string& path, size_t from = 0);
void forget_requests(const Engine& e);

// A field of GET /debug/state: true/false for booleans, the number or string as text, "null",
// or "" when absent.
std::string state(const Engine& e, const char* field);

}  // namespace engines
