// routes_debug.cpp — test-only routes, NOT part of any engine's API (no API key, never blocked
// by the engine's control loop):
//   GET    /debug/tensors   what each local rank holds: {"ranks":[{"rank","local_rank",
//                           "committed_version","groups":[..],"tensors":{name:{"dtype","shape",
//                           "xxh3" (16 hex digits of XXH3-64 of the bytes),"nbytes"}}}]}
//   GET    /debug/requests  every non-debug request received, in arrival order:
//                           [{"method","path","query","body","status"}]
//   DELETE /debug/requests  forget them
//   GET    /debug/state     the engine's state (see state_json)
//   POST   /debug/kill_receiver?rank=R  destroy local rank R's receivers at once, as if its
//                           worker process died (the trainer sees the connection close)
//   POST   /debug/fail_updates?count=N&message=M  the next N update requests fail with M (as
//                           --fail-update M --fail-updates N, from now on)
#include <algorithm>
#include <cstdlib>

#include "replies.h"
#include "router.h"

namespace refeng {
namespace {

std::string state_json(Shared& s) {
  JsonPtr o(cJSON_CreateObject());
  cJSON* r = o.get();
  cJSON_AddStringToObject(r, "protocol", s.fam.protocol_name.c_str());
  cJSON_AddStringToObject(r, "engine_version", s.fam.version.c_str());
  cJSON_AddStringToObject(r, "family", s.fam.family.c_str());
  cJSON* groups = cJSON_AddArrayToObject(r, "groups");
  for (const auto& g : s.engine.group_names()) cJSON_AddItemToArray(groups, cJSON_CreateString(g.c_str()));
  cJSON_AddNumberToObject(r, "receivers_joined", s.engine.receivers_running());
  cJSON_AddItemToObject(r, "receivers", s.engine.receivers_json().release());
  std::lock_guard<std::mutex> lk(s.mu);
  cJSON_AddBoolToObject(r, "paused", s.paused);
  if (s.paused) cJSON_AddStringToObject(r, "pause_mode", s.pause_mode.c_str());
  else cJSON_AddNullToObject(r, "pause_mode");
  cJSON_AddStringToObject(r, "weight_version", s.weight_version.c_str());
  if (s.fam.protocol == Protocol::kSglang) {
    cJSON_AddBoolToObject(r, "session_open", s.session_open);
    cJSON_AddNumberToObject(r, "flush_calls", s.flush_calls);
  }
  if (s.fam.protocol == Protocol::kVllm) {
    cJSON_AddBoolToObject(r, "update_active", s.update_active);
    cJSON_AddBoolToObject(r, "packed", s.packed);
    cJSON_AddNumberToObject(r, "completions", static_cast<double>(s.completions));
    cJSON_AddNumberToObject(r, "unmatched_finishes", static_cast<double>(s.unmatched_finishes));
  }
  if (s.fam.protocol == Protocol::kLmdeploy) {
    cJSON_AddBoolToObject(r, "sleeping", s.sleeping);
    cJSON_AddNumberToObject(r, "finalized", static_cast<double>(s.finalized));
    cJSON_AddBoolToObject(r, "loaded_unfinished", s.loaded_unfinished);
  }
  cJSON_AddBoolToObject(r, "dead", s.dead);
  cJSON_AddNumberToObject(r, "aborted_requests", static_cast<double>(s.aborted_requests));
  if (s.last_abort.empty()) cJSON_AddNullToObject(r, "last_abort");
  else cJSON_AddStringToObject(r, "last_abort", s.last_abort.c_str());
  return json_print(r);
}

void kill_receiver(Shared& s, const httplib::Request& req, httplib::Response& res) {
  std::string v = req.has_param("rank") ? req.get_param_value("rank") : "";
  char* end = nullptr;
  long rank = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || rank < 0 || rank >= s.engine.gpus())
    return reply_detail(res, 400, "rank must be a local rank, 0.." + std::to_string(s.engine.gpus() - 1));
  int n = s.engine.kill_receiver(static_cast<int>(rank));
  if (n == 0) return reply_detail(res, 404, "local rank " + v + " has no running receiver");
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddNumberToObject(o.get(), "local_rank", rank);
  cJSON_AddNumberToObject(o.get(), "receivers_killed", n);
  reply_json(res, 200, o.get());
}

}  // namespace

void add_debug_routes(Router& r, Shared& s) {
  r.add("GET", "/debug/tensors", [&s](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(s.engine.debug_tensors_json(), "application/json");
  });
  r.add("GET", "/debug/requests", [&r](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(r.requests_json(), "application/json");
  });
  r.add("DELETE", "/debug/requests", [&r](const httplib::Request&, httplib::Response& res) {
    r.clear_requests();
    res.status = 200;
    res.set_content("{}", "application/json");
  });
  r.add("GET", "/debug/state", [&s](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(state_json(s), "application/json");
  });
  r.add("POST", "/debug/kill_receiver",
        [&s](const httplib::Request& req, httplib::Response& res) { kill_receiver(s, req, res); });
  r.add("POST", "/debug/fail_updates", [&s](const httplib::Request& req, httplib::Response& res) {
    const long n = req.has_param("count") ? std::strtol(req.get_param_value("count").c_str(), nullptr, 10) : -1;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.fail_on = true;
      s.fail_message = req.has_param("message") ? req.get_param_value("message") : "failing on purpose";
      s.fail_updates_left = n < 0 ? -1 : static_cast<int>(std::min<long>(n, 1000000));
    }
    res.status = 200;
    res.set_content("{}", "application/json");
  });
}

}  // namespace refeng
