// lmdeploy_identity.cpp — LMDeploy's identity and lifecycle routes: GET /health,
// /distserve/engine_info (a JSON string holding JSON), GET /update_weights_from_ipc (0.18),
// POST /sleep, /wakeup, GET /is_sleeping, POST /abort_request. LMDeploy has no version route.
#include <cstdlib>
#include <string>

#include "lmdeploy_common.h"
#include "models.h"
#include "replies.h"
#include "router.h"

namespace refeng {
namespace {

// DistServeEngineConfig(...).model_dump_json(), returned as a str: FastAPI encodes the string.
void engine_info(Shared& s, httplib::Response& res) {
  JsonPtr cfg(cJSON_CreateObject());
  cJSON_AddNumberToObject(cfg.get(), "tp_size", s.opt.tp_size);
  cJSON_AddNumberToObject(cfg.get(), "ep_size", 1);
  cJSON_AddNumberToObject(cfg.get(), "dp_size", 1);
  cJSON_AddNullToObject(cfg.get(), "pp_size");
  cJSON_AddNumberToObject(cfg.get(), "dp_rank", 0);
  cJSON_AddNumberToObject(cfg.get(), "block_size", 64);
  cJSON_AddNumberToObject(cfg.get(), "num_cpu_blocks", 0);
  cJSON_AddNumberToObject(cfg.get(), "num_gpu_blocks", 0);
  JsonPtr str(cJSON_CreateString(json_print(cfg.get()).c_str()));
  reply_json(res, 200, str.get());
}

// UpdateWeightsFromIPCStatus: the checkpoint-engine path is not there (ready false).
void ipc_status(Shared& s, httplib::Response& res) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddBoolToObject(o.get(), "ready", false);
  cJSON_AddStringToObject(o.get(), "message",
                          "checkpoint-engine is unavailable; install 'checkpoint-engine==0.4.2': No module named "
                          "'checkpoint_engine'");
  cJSON_AddStringToObject(o.get(), "backend", s.opt.lmdeploy_backend.c_str());
  if (s.opt.lmdeploy_backend == "pytorch") cJSON_AddStringToObject(o.get(), "device_type", "cuda");
  else cJSON_AddNullToObject(o.get(), "device_type");  // TurbomindEngineConfig has none
  cJSON_AddNullToObject(o.get(), "checkpoint_engine_version");
  std::lock_guard<std::mutex> lk(s.mu);
  cJSON_AddBoolToObject(o.get(), "is_sleeping", s.sleeping);
  cJSON* tags = cJSON_AddArrayToObject(o.get(), "sleeping_tags");
  for (const auto& t : s.sleeping_tags) cJSON_AddItemToArray(tags, cJSON_CreateString(t.c_str()));
  cJSON* uuids = cJSON_AddArrayToObject(o.get(), "device_uuids");
  cJSON* ranks = cJSON_AddArrayToObject(o.get(), "worker_ranks");
  for (int i = 0; i < s.engine.gpus(); ++i) {
    std::string uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i % 10);
    cJSON_AddItemToArray(uuids, cJSON_CreateString(uuid.c_str()));
    cJSON_AddItemToArray(ranks, cJSON_CreateNumber(i));
  }
  reply_json(res, 200, o.get());
}

void add_sleep_routes(Router& r, Shared& s) {
  r.add("POST", "/sleep", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!lmdeploy_json_media(s, req, res)) return;
    std::string level = req.has_param("level") ? req.get_param_value("level") : "1";
    char* end = nullptr;
    long v = std::strtol(level.c_str(), &end, 10);
    if (level.empty() || *end != '\0') return reply_lmdeploy_error(res, 400, "The \"level\" query parameter must be an integer.");
    if (v != 1 && v != 2) return reply_lmdeploy_error(res, 400, "The \"level\" query parameter must be 1 or 2.");
    s.note_abort("/sleep");  // stop_all_session
    std::lock_guard<std::mutex> lk(s.mu);
    s.sleeping = true;
    s.sleeping_tags = {"kv_cache", "weights"};
    res.status = 200;
  });
  r.add("POST", "/wakeup", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!lmdeploy_json_media(s, req, res)) return;
    std::lock_guard<std::mutex> lk(s.mu);
    std::set<std::string> tags;
    for (size_t i = 0; i < req.get_param_value_count("tags"); ++i) tags.insert(req.get_param_value("tags", i));
    if (tags.empty()) tags = s.sleeping_tags;
    bool all_sleeping = true;
    for (const auto& t : tags) all_sleeping = all_sleeping && s.sleeping_tags.count(t);
    if (all_sleeping) {  // else LMDeploy logs a warning and does nothing (still 200)
      for (const auto& t : tags) s.sleeping_tags.erase(t);
      s.sleeping = !s.sleeping_tags.empty();
    }
    res.status = 200;
  });
  r.add("GET", "/is_sleeping", [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    std::lock_guard<std::mutex> lk(s.mu);
    cJSON_AddBoolToObject(o.get(), "is_sleeping", s.sleeping);
    reply_json(res, 200, o.get());
  });
}

// POST /abort_request (no Content-Type dependency): 501 text unless --enable-abort-handling.
void abort_request(Shared& s, const httplib::Request& req, httplib::Response& res) {
  if (!s.opt.enable_abort_handling)
    return reply_text(res, 501, "This server does not support abort requests. Enable with --enable-abort-handling flag.");
  Validated v = validate_model(req.body, req.get_header_value("Content-Type"), lmdeploy_abort_model());
  if (!v.body) return reply_lmdeploy_validation(res, s.fam, v.errors, v.raw.get());
  if (get_bool(v.body.get(), "abort_all", false)) {
    s.note_abort("/abort_request abort_all");
    res.status = 200;
    return;
  }
  reply_lmdeploy_error(res, 400, "Session " + std::to_string(get_int(v.body.get(), "session_id", -1)) + " not found.");
}

}  // namespace

void add_lmdeploy_identity_routes(Router& r, Shared& s) {
  r.add("GET", "/health", [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    std::lock_guard<std::mutex> lk(s.mu);
    cJSON_AddStringToObject(o.get(), "status", s.sleeping ? "sleeping" : "healthy");
    cJSON_AddStringToObject(o.get(), "message", s.sleeping ? "Engine is sleeping." : "Engine is healthy.");
    reply_json(res, 200, o.get());
  });
  r.add("GET", "/distserve/engine_info", [&s](const httplib::Request&, httplib::Response& res) { engine_info(s, res); });
  if (s.fam.lm.ipc_route)
    r.add("GET", "/update_weights_from_ipc", [&s](const httplib::Request&, httplib::Response& res) { ipc_status(s, res); });
  add_sleep_routes(r, s);
  r.add("POST", "/abort_request", [&s](const httplib::Request& req, httplib::Response& res) { abort_request(s, req, res); });
}

}  // namespace refeng
