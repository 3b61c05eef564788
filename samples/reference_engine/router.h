// router.h — one dispatcher in front of every route: it logs each request (for
// GET /debug/requests), checks the API key, finds the route by method and path, and answers
// 404/405 the way Starlette does. Also the state the routes of all protocols share.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "options.h"
#include "receiver_side.h"

namespace refeng {

// Engine-level state shared by the routes (versions, pause flags, knobs' counters).
struct Shared {
  Shared(const Options& o, Engine& e) : opt(o), engine(e) {}
  const Options& opt;
  Engine& engine;
  std::mutex mu;
  std::string sglang_weight_version = "default";  // ServerArgs.weight_version's default
  bool vllm_has_version = false;                  // GET /weight_info: null until set
  std::string vllm_weight_version;
  bool paused = false;
  std::string pause_mode;
  bool sleeping = false;
  int flush_calls = 0;
};

class Router {
 public:
  using Fn = std::function<void(const httplib::Request&, httplib::Response&)>;

  explicit Router(const Options& opt) : opt_(opt) {}
  // `method` is GET, POST, ...; a GET route answers HEAD too. Paths are exact.
  void add(const std::string& method, const std::string& path, Fn fn);
  // Registers the dispatcher as the server's only handler.
  void install(httplib::Server& svr);

  // [{"method","path","query","body","status"}] in arrival order (status null while running).
  std::string requests_json();
  void clear_requests();

 private:
  void dispatch(const httplib::Request& req, httplib::Response& res);

  const Options& opt_;
  std::map<std::pair<std::string, std::string>, Fn> routes_;  // (method, path) -> handler
  std::mutex log_mu_;
  struct Logged { uint64_t seq; std::string method, path, query, body; int status = -1; };
  std::vector<Logged> log_;
  uint64_t next_seq_ = 0;
};

// Route sets, one per file.
void add_sglang_routes(Router& r, Shared& s);
void add_vllm_routes(Router& r, Shared& s);
void add_lmdeploy_routes(Router& r, Shared& s);
void add_debug_routes(Router& r, Shared& s);

}  // namespace refeng
