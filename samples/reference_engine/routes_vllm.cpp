// routes_vllm.cpp — vLLM's weight-transfer HTTP API (vllm/entrypoints/serve/rlhf/api_router.py,
// the newest shape with start/finish; NCCL init_info/update_info of nccl_common.py). See
// /tmp/issue4_research.md §2.
//
// Error statuses: route-level problems (missing "init_info"/"update_info", invalid JSON) are
// vLLM's HTTPException 400. Errors vLLM raises inside its workers (a ValueError for an unknown
// key in init_info/update_info, an AttributeError for a bad dtype, a failed join or update) are
// not caught by its routes; what status they reach the client with is UNCONFIRMED (probably 500).
// This engine answers them with --vllm-error-status (default 400) and {"error": "<message>"}.
//
// The init_info/update_info key sets follow --vllm-api-version (default 3, the newest; see
// schemas.h).
//
// vLLM's init_info carries no group name; the embedded receivers join the wsync group named by
// --vllm-group (default "weight_update_group"), so the trainer's wsync group must use that name.
// The UID mode (nccl_unique_id_b64 without master_address/port) is refused: this engine joins
// over the sender's store only.
#include <cctype>
#include <string>
#include <vector>

#include "replies.h"
#include "router.h"
#include "schemas.h"

namespace refeng {
namespace {

// Parses the body as a JSON object; on failure answers 400 "Invalid JSON format" and returns null.
// An empty body reads as {} (start/finish take none).
JsonPtr parse_object(const httplib::Request& req, httplib::Response& res, bool empty_ok) {
  if (empty_ok && is_blank(req.body)) return JsonPtr(cJSON_CreateObject());
  size_t pos = 0;
  JsonPtr b = json_parse(req.body, &pos);
  if (!b || !cJSON_IsObject(b.get())) {
    reply_vllm_error(res, 400, "Invalid JSON format");
    return nullptr;
  }
  return b;
}

bool query_bool(const httplib::Request& req, const char* name, bool def, bool* out) {
  if (!req.has_param(name)) { *out = def; return true; }
  std::string v = req.get_param_value(name);
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "true" || v == "1" || v == "yes" || v == "on") { *out = true; return true; }
  if (v == "false" || v == "0" || v == "no" || v == "off") { *out = false; return true; }
  return false;
}

}  // namespace

void add_vllm_routes(Router& r, Shared& s) {
  r.add("GET", "/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });

  // POST /init_weight_transfer_engine {"init_info": {...}}: blocks until all local ranks joined.
  r.add("POST", "/init_weight_transfer_engine", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse_object(req, res, false);
    if (!b) return;
    const cJSON* info = cJSON_GetObjectItemCaseSensitive(b.get(), "init_info");
    if (info == nullptr) return reply_vllm_error(res, 400, "Missing 'init_info' in request body");
    VllmInit in;
    std::string err;
    if (!vllm_parse_init_info(info, s.opt.vllm_api_version, &in, &err)) return reply_vllm_error(res, s.opt.vllm_error_status, err);
    if (in.has_unique_id)
      return reply_vllm_error(res, s.opt.vllm_error_status,
                              "this reference engine joins over the sender's store only: pass master_address and "
                              "master_port (nccl_unique_id_b64 is not supported here)");
    JoinRequest j;
    j.master_address = in.master_address;
    j.master_port = in.master_port;
    j.rank_offset = in.rank_offset;
    j.world_size = in.world_size;
    j.group_name = s.opt.vllm_group;
    Outcome o = s.engine.init_group(j);
    if (!o.ok) return reply_vllm_error(res, s.opt.vllm_error_status, "Failed to initialize weight transfer: " + o.message);
    reply_vllm_message(res, "Weight transfer initialized");
  });

  // Some versions read is_checkpoint_format from the body; nothing to do here.
  r.add("POST", "/start_weight_update", [](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse_object(req, res, true);
    if (!b) return;
    reply_vllm_message(res, "Weight update started");
  });

  // POST /update_weights {"update_info": {names, dtype_names, shapes} | [..]}: replies after the data.
  r.add("POST", "/update_weights", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse_object(req, res, false);
    if (!b) return;
    const cJSON* info = cJSON_GetObjectItemCaseSensitive(b.get(), "update_info");
    if (info == nullptr) return reply_vllm_error(res, 400, "Missing 'update_info' in request body");
    std::vector<TensorSpec> specs;
    std::string err;
    if (!vllm_parse_update_info(info, s.opt.vllm_api_version, &specs, &err)) return reply_vllm_error(res, s.opt.vllm_error_status, err);
    if (!s.engine.has_group(s.opt.vllm_group))  // wording UNCONFIRMED
      return reply_vllm_error(res, s.opt.vllm_error_status,
                              "The weight transfer engine is not initialized: call /init_weight_transfer_engine first");
    if (s.opt.fail_update) return reply_vllm_error(res, s.opt.vllm_error_status, s.opt.fail_update_message);
    Outcome o = s.engine.wait_for_tensors(s.opt.vllm_group, specs, s.opt.timeout_ms);
    if (!o.ok) return reply_vllm_error(res, s.opt.vllm_error_status, o.message);
    reply_vllm_message(res, "Weights updated");
  });

  // POST /finish_weight_update {"weight_version": str|null} (body optional).
  r.add("POST", "/finish_weight_update", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse_object(req, res, true);
    if (!b) return;
    const cJSON* v = cJSON_GetObjectItemCaseSensitive(b.get(), "weight_version");
    if (v != nullptr && !cJSON_IsNull(v) && !cJSON_IsString(v))
      return reply_vllm_error(res, 400, "'weight_version' must be a string or null");
    if (cJSON_IsString(v)) {
      std::lock_guard<std::mutex> lk(s.mu);
      s.vllm_has_version = true;
      s.vllm_weight_version = v->valuestring;
    }
    reply_vllm_message(res, "Weight update finished");
  });

  r.add("POST", "/update_weight_version", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse_object(req, res, false);
    if (!b) return;
    const cJSON* v = cJSON_GetObjectItemCaseSensitive(b.get(), "new_version");
    if (!cJSON_IsString(v)) return reply_vllm_error(res, 400, "'new_version' (a string) is required");
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.vllm_has_version = true;
      s.vllm_weight_version = v->valuestring;
    }
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddBoolToObject(o.get(), "success", true);
    cJSON_AddStringToObject(o.get(), "new_version", v->valuestring);
    reply_json(res, 200, o.get());
  });

  r.add("GET", "/weight_info", [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    {
      std::lock_guard<std::mutex> lk(s.mu);
      if (s.vllm_has_version) cJSON_AddStringToObject(o.get(), "weight_version", s.vllm_weight_version.c_str());
      else cJSON_AddNullToObject(o.get(), "weight_version");
    }
    reply_json(res, 200, o.get());
  });

  // POST /pause?mode=abort|wait|keep&clear_cache=true&wait_for_inflight_requests=false
  r.add("POST", "/pause", [&s](const httplib::Request& req, httplib::Response& res) {
    std::string mode = req.has_param("mode") ? req.get_param_value("mode") : "abort";
    if (mode != "abort" && mode != "wait" && mode != "keep")  // ValueError -> 400 {"error": str(e)}
      return reply_vllm_error(res, 400, "Invalid mode '" + mode + "': expected 'abort', 'wait' or 'keep'");
    bool b;
    if (!query_bool(req, "clear_cache", true, &b) || !query_bool(req, "wait_for_inflight_requests", false, &b))
      return reply_vllm_error(res, 400, "clear_cache and wait_for_inflight_requests must be booleans");
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.paused = true;
      s.pause_mode = mode;
    }
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddStringToObject(o.get(), "status", "paused");
    reply_json(res, 200, o.get());
  });
  r.add("POST", "/resume", [&s](const httplib::Request&, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.paused = false;
    }
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddStringToObject(o.get(), "status", "resumed");
    reply_json(res, 200, o.get());
  });
  r.add("GET", "/is_paused", [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    {
      std::lock_guard<std::mutex> lk(s.mu);
      cJSON_AddBoolToObject(o.get(), "is_paused", s.paused);
    }
    reply_json(res, 200, o.get());
  });
  // TP*PP (*DP) of this engine: its local ranks.
  r.add("GET", "/get_world_size", [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddNumberToObject(o.get(), "world_size", s.engine.gpus());
    reply_json(res, 200, o.get());
  });
}

}  // namespace refeng
