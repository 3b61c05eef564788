// routes_lmdeploy.cpp — LMDeploy's weight-update routes (lmdeploy/serve/openai/endpoints/
// management.py, PyTorch backend). See /tmp/issue4_research.md §3.
//
//  * The weight routes, /sleep and /wakeup require Content-Type: application/json
//    (validate_json_request, lmdeploy/serve/utils/server_utils.py: it raises
//    RequestValidationError(["Unsupported Media Type: Only 'application/json' is allowed"])).
//  * Validation errors answer FastAPI's default 422 {"detail": [...]}: LMDeploy's own handler,
//    if any, is UNCONFIRMED. Unknown fields are ignored (pydantic's default).
//  * The request models' field lists and the reply messages are UNCONFIRMED (the sources read
//    did not include them): fields follow /work/shared/PROTOCOLS.md; messages reuse SGLang's.
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "replies.h"
#include "router.h"
#include "schemas.h"

namespace refeng {
namespace {

// validate_json_request: media type, lowercased, before any ';', must be application/json.
bool json_content_type(const httplib::Request& req, httplib::Response& res) {
  std::string ct = req.get_header_value("Content-Type");
  for (auto& c : ct) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ct.substr(0, ct.find(';')) == "application/json") return true;
  reply_fastapi_422_strings(res, {"Unsupported Media Type: Only 'application/json' is allowed"});
  return false;
}

JsonPtr parse(const httplib::Request& req, httplib::Response& res, const ModelSpec& spec) {
  if (!json_content_type(req, res)) return nullptr;
  std::vector<FieldError> errors;
  JsonPtr body = validate_model(req.body, req.get_header_value("Content-Type"), spec, &errors);
  if (!body) reply_fastapi_422(res, errors);
  return body;
}

void update_failed(httplib::Response& res, const std::string& e) {
  reply_success(res, false, "Failed to update parameter online: " + e + ".");
}

}  // namespace

void add_lmdeploy_routes(Router& r, Shared& s) {
  r.add("GET", "/health", [](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddStringToObject(o.get(), "status", "healthy");
    reply_json(res, 200, o.get());
  });

  // POST /init_weights_update_group (group_name required): blocks until all local ranks joined.
  r.add("POST", "/init_weights_update_group", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kLmdeployInit);
    if (!b) return;
    JoinRequest j;
    j.master_address = get_str(b.get(), "master_address", "");
    j.master_port = get_int(b.get(), "master_port", 0);
    j.rank_offset = get_int(b.get(), "rank_offset", 0);
    j.world_size = get_int(b.get(), "world_size", 0);
    j.group_name = get_str(b.get(), "group_name", "");
    Outcome o = s.engine.init_group(j);
    if (o.ok) reply_success(res, true, "Succeeded to initialize custom process group.");
    else reply_success(res, false, "Failed to initialize custom process group: " + o.message + ".");
  });

  // POST /update_weights_from_distributed: replies once every named tensor arrived on every rank.
  // finished=true with no names is "finalize only" (the trainer's wsync finalize commits).
  r.add("POST", "/update_weights_from_distributed", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kLmdeployUpdate);
    if (!b) return;
    const cJSON* names = cJSON_GetObjectItemCaseSensitive(b.get(), "names");
    const cJSON* dtypes = cJSON_GetObjectItemCaseSensitive(b.get(), "dtypes");
    const cJSON* shapes = cJSON_GetObjectItemCaseSensitive(b.get(), "shapes");
    bool finished = get_bool(b.get(), "finished", false);
    std::string group = get_str(b.get(), "group_name", "");
    if (!s.engine.has_group(group))
      return update_failed(res, "group '" + group + "' does not exist; call /init_weights_update_group first");
    if (s.opt.fail_update) return reply_success(res, false, s.opt.fail_update_message);
    if (finished && cJSON_GetArraySize(names) == 0)
      return reply_success(res, true, "Succeeded to update parameter online.");
    std::vector<TensorSpec> specs;
    std::string err;
    if (!build_tensor_specs(names, dtypes, shapes, &specs, &err)) return update_failed(res, err);
    std::string fmt;
    if (get_str_or_null(b.get(), "load_format", &fmt) && fmt == "flattened_bucket")
      for (const auto& t : specs)  // LMDeploy's flattened bucket: one dtype per bucket
        if (t.dtype != specs.front().dtype)
          return update_failed(res, "a flattened_bucket holds one dtype, got " + specs.front().dtype_name + " and " +
                                        t.dtype_name);
    Outcome o = s.engine.wait_for_tensors(group, specs, s.opt.timeout_ms);
    if (!o.ok) return update_failed(res, o.message);
    reply_success(res, true, "Succeeded to update parameter online.");
  });

  r.add("POST", "/destroy_weights_update_group", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kLmdeployDestroy);
    if (!b) return;
    Outcome o = s.engine.destroy_group(get_str(b.get(), "group_name", ""));
    reply_success(res, o.ok, o.ok ? "Succeeded to destroy custom process group." : o.message);
  });

  // POST /sleep?level=1|2 and /wakeup?tags=..: no body, but Content-Type: application/json.
  r.add("POST", "/sleep", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!json_content_type(req, res)) return;
    std::string level = req.has_param("level") ? req.get_param_value("level") : "1";
    char* end = nullptr;
    long v = std::strtol(level.c_str(), &end, 10);
    if (level.empty() || *end != '\0')
      return reply_lmdeploy_error(res, 400, "The \"level\" query parameter must be an integer.");
    if (v != 1 && v != 2) return reply_lmdeploy_error(res, 400, "The \"level\" query parameter must be 1 or 2.");
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.sleeping = true;
    }
    res.status = 200;
  });
  r.add("POST", "/wakeup", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!json_content_type(req, res)) return;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.sleeping = false;
    }
    res.status = 200;
  });
  r.add("GET", "/is_sleeping", [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    {
      std::lock_guard<std::mutex> lk(s.mu);
      cJSON_AddBoolToObject(o.get(), "is_sleeping", s.sleeping);
    }
    reply_json(res, 200, o.get());
  });

  // POST /abort_request (no Content-Type check): 501 text unless --enable-abort-handling.
  r.add("POST", "/abort_request", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!s.opt.enable_abort_handling)
      return reply_text(res, 501,
                        "This server does not support abort requests. Enable with --enable-abort-handling flag.");
    std::vector<FieldError> errors;
    JsonPtr b = validate_model(req.body, req.get_header_value("Content-Type"), kLmdeployAbort, &errors);
    if (!b) return reply_fastapi_422(res, errors);
    if (get_bool(b.get(), "abort_all", false)) {
      res.status = 200;
      return;
    }
    reply_lmdeploy_error(res, 400, "Session " + std::to_string(get_int(b.get(), "session_id", -1)) + " not found.");
  });
}

}  // namespace refeng
