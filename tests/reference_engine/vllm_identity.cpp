// vllm_identity.cpp — vLLM's identity and control routes: GET /health, /version,
// /get_world_size, /weight_info; POST /update_weight_version; POST /pause, /resume and GET
// /is_paused (which answer their own {"error": "<text>"} envelope).
#include <string>
#include <vector>

#include "replies.h"
#include "router.h"
#include "vllm_common.h"

namespace refeng {
namespace {

bool dead(Shared& s) {
  std::lock_guard<std::mutex> lk(s.mu);
  return s.dead;
}

void pause(Shared& s, const httplib::Request& req, httplib::Response& res) {
  std::vector<FieldError> errors;
  std::string mode = req.has_param("mode") ? req.get_param_value("mode") : "abort";
  if (mode != "abort" && mode != "wait" && mode != "keep") {
    JsonPtr input(cJSON_CreateString(mode.c_str()));
    JsonPtr ctx(cJSON_CreateObject());
    cJSON_AddStringToObject(ctx.get(), "expected", "'abort', 'wait' or 'keep'");
    add_error(&errors, "literal_error", loc_path({"query", "mode"}), "Input should be 'abort', 'wait' or 'keep'",
              input.get(), std::move(ctx));
  }
  bool clear_cache = true, wait_inflight = false;
  vllm_query_bool(req, "clear_cache", true, &clear_cache, &errors);
  if (s.fam.vl.pause_wait_param) vllm_query_bool(req, "wait_for_inflight_requests", false, &wait_inflight, &errors);
  if (!errors.empty()) return vllm_validation(res, errors);
  if (dead(s)) return reply_vllm_plain_error(res, 500, "Failed to pause generation: " + vllm_dead_message(s));
  if (wait_inflight) mode = "wait";  // the deprecated alias (<= 0.31)
  std::lock_guard<std::mutex> core(s.core);
  if (mode == "abort") s.note_abort("/pause?mode=abort");
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.paused = true;
    s.pause_mode = mode;
  }
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "status", "paused");
  reply_json(res, 200, o.get());
}

void add_pause_routes(Router& r, Shared& s) {
  r.add("POST", "/pause", [&s](const httplib::Request& req, httplib::Response& res) { pause(s, req, res); });
  r.add("POST", "/resume", [&s](const httplib::Request&, httplib::Response& res) {
    if (dead(s)) return reply_vllm_plain_error(res, 500, "Failed to resume generation: " + vllm_dead_message(s));
    std::lock_guard<std::mutex> core(s.core);
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.paused = false;
      s.pause_mode.clear();
    }
    s.cv.notify_all();  // queued generation runs now
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddStringToObject(o.get(), "status", "resumed");
    reply_json(res, 200, o.get());
  });
  r.add("GET", "/is_paused", [&s](const httplib::Request&, httplib::Response& res) {
    if (dead(s)) return reply_vllm_plain_error(res, 500, "Failed to fetch pause status: " + vllm_dead_message(s));
    std::lock_guard<std::mutex> core(s.core);
    JsonPtr o(cJSON_CreateObject());
    std::lock_guard<std::mutex> lk(s.mu);
    cJSON_AddBoolToObject(o.get(), "is_paused", s.paused);
    reply_json(res, 200, o.get());
  });
}

void add_version_routes(Router& r, Shared& s) {
  r.add("GET", "/weight_info", [&s](const httplib::Request&, httplib::Response& res) {
    if (vllm_dead_refused(s, res)) return;
    std::lock_guard<std::mutex> core(s.core);
    JsonPtr o(cJSON_CreateObject());
    std::lock_guard<std::mutex> lk(s.mu);
    cJSON_AddStringToObject(o.get(), "weight_version", s.weight_version.c_str());  // "default" before any
    reply_json(res, 200, o.get());
  });
  r.add("POST", "/update_weight_version", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr body;
    cJSON* v = nullptr;
    if (!vllm_embed_body(req, res, "new_version", "str", &body, &v) || vllm_dead_refused(s, res)) return;
    std::lock_guard<std::mutex> core(s.core);
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.weight_version = v->valuestring;
    }
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddBoolToObject(o.get(), "success", true);
    cJSON_AddStringToObject(o.get(), "new_version", v->valuestring);
    reply_json(res, 200, o.get());
  });
}

}  // namespace

void add_vllm_identity_routes(Router& r, Shared& s) {
  r.add("GET", "/health", [&s](const httplib::Request&, httplib::Response& res) { res.status = dead(s) ? 503 : 200; });
  r.add("GET", "/version", [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddStringToObject(o.get(), "version", s.fam.version.c_str());
    reply_json(res, 200, o.get());
  });
  // Read from the API server's config: answers even while the engine core is busy or dead.
  r.add("GET", "/get_world_size", [&s](const httplib::Request& req, httplib::Response& res) {
    std::vector<FieldError> errors;
    bool include_dp = true;
    if (!vllm_query_bool(req, "include_dp", true, &include_dp, &errors)) return vllm_validation(res, errors);
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddNumberToObject(o.get(), "world_size", s.opt.world_size);  // no DP here: both answers agree
    reply_json(res, 200, o.get());
  });
  add_pause_routes(r, s);
  add_version_routes(r, s);
}

}  // namespace refeng
