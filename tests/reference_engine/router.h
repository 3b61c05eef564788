// router.h — one dispatcher in front of every route: it logs each request (for
// GET /debug/requests), checks the API key where the engine checks it, finds the route by
// method and path, and answers 404/405 the way Starlette does.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "state.h"

namespace refeng {

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
  bool authorized(const httplib::Request& req) const;

  const Options& opt_;
  std::map<std::pair<std::string, std::string>, Fn> routes_;  // (method, path) -> handler
  std::mutex log_mu_;
  struct Logged { uint64_t seq; std::string method, path, query, body; int status = -1; };
  std::vector<Logged> log_;
  uint64_t next_seq_ = 0;
};

// Route sets, one per file.
void add_sglang_identity_routes(Router& r, Shared& s);
void add_sglang_session_routes(Router& r, Shared& s);
void add_sglang_update_routes(Router& r, Shared& s);
void add_vllm_identity_routes(Router& r, Shared& s);
void add_vllm_generation_routes(Router& r, Shared& s);
void add_vllm_transfer_routes(Router& r, Shared& s);
void add_lmdeploy_identity_routes(Router& r, Shared& s);
void add_lmdeploy_update_routes(Router& r, Shared& s);
void add_debug_routes(Router& r, Shared& s);

}  // namespace refeng
