// routes_sglang.cpp — SGLang's native weight-update routes (python/sglang/srt/entrypoints/
// http_server.py, request models in managers/io_struct.py), with SGLang's validation (400
// ErrorResponse, unknown fields ignored) and its reply texts. See /tmp/issue4_research.md §1.
#include <cstdlib>
#include <string>
#include <vector>

#include "replies.h"
#include "router.h"
#include "schemas.h"

namespace refeng {
namespace {

const char* kDefaultGroup = "weight_update_group";

std::string content_type(const httplib::Request& req) { return req.get_header_value("Content-Type"); }

// Validates req.body against `spec`; on errors answers SGLang's 400 and returns null.
JsonPtr parse(const httplib::Request& req, httplib::Response& res, const ModelSpec& spec) {
  std::vector<FieldError> errors;
  JsonPtr body = validate_model(req.body, content_type(req), spec, &errors);
  if (!body) reply_sglang_validation(res, errors);
  return body;
}

void update_failed(httplib::Response& res, const std::string& e) {
  reply_success(res, false,
                "Failed to update parameter online: " + e +
                    ". The full weights of the ModelRunner are partially updated. Please discard the whole weights.");
}

std::string py_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + py_str_repr(v[i]);
  return s + "]";
}

void status_ok(httplib::Response& res, const char* message) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "message", message);
  cJSON_AddStringToObject(o.get(), "status", "ok");
  reply_json(res, 200, o.get());
}

// One pydantic error about a query parameter (FastAPI loc ("query", name)).
void query_error(httplib::Response& res, const char* name, const char* type, const char* msg, const std::string& input,
                 JsonPtr ctx) {
  std::vector<FieldError> errors(1);
  errors[0].type = type;
  errors[0].loc.reset(cJSON_CreateArray());
  cJSON_AddItemToArray(errors[0].loc.get(), cJSON_CreateString("query"));
  cJSON_AddItemToArray(errors[0].loc.get(), cJSON_CreateString(name));
  errors[0].msg = msg;
  errors[0].input.reset(cJSON_CreateString(input.c_str()));
  errors[0].ctx = std::move(ctx);
  reply_sglang_validation(res, errors);
}

}  // namespace

void add_sglang_routes(Router& r, Shared& s) {
  auto health = [](const httplib::Request&, httplib::Response& res) { res.status = 200; };
  r.add("GET", "/health", health);
  r.add("GET", "/health_generate", health);

  // POST /init_weights_update_group: blocks until every local rank joined the trainer's group.
  r.add("POST", "/init_weights_update_group", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kSglangInit);
    if (!b) return;
    JoinRequest j;
    j.master_address = get_str(b.get(), "master_address", "");
    j.master_port = get_int(b.get(), "master_port", 0);
    j.rank_offset = get_int(b.get(), "rank_offset", 0);
    j.world_size = get_int(b.get(), "world_size", 0);
    j.group_name = get_str(b.get(), "group_name", kDefaultGroup);
    Outcome o = s.engine.init_group(j);
    if (o.ok) reply_success(res, true, "Succeeded to initialize custom process group.");
    else reply_success(res, false, "Failed to initialize custom process group: " + o.message + ".");
  });

  // POST /update_weights_from_distributed: replies once every named tensor arrived on every rank.
  r.add("POST", "/update_weights_from_distributed", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kSglangUpdate);
    if (!b) return;
    std::string group = get_str(b.get(), "group_name", kDefaultGroup);
    if (!s.engine.has_group(group)) {
      reply_success(res, false, "Group " + group + " not in " + py_list(s.engine.group_names()) +
                                    ". Please call `init_weights_update_group` first.");
      return;
    }
    std::vector<TensorSpec> specs;
    std::string err;
    // SGLang zips the three lists (a length mismatch silently drops tensors); refused here.
    if (!build_tensor_specs(cJSON_GetObjectItemCaseSensitive(b.get(), "names"), cJSON_GetObjectItemCaseSensitive(b.get(), "dtypes"),
                            cJSON_GetObjectItemCaseSensitive(b.get(), "shapes"), &specs, &err))
      return update_failed(res, err);
    if (s.opt.fail_update) return reply_success(res, false, s.opt.fail_update_message);
    Outcome o = s.engine.wait_for_tensors(group, specs, s.opt.timeout_ms);
    if (!o.ok) return update_failed(res, o.message);
    std::string version;
    if (get_str_or_null(b.get(), "weight_version", &version)) {
      std::lock_guard<std::mutex> lk(s.mu);
      s.sglang_weight_version = version;
    }
    reply_success(res, true, "Succeeded to update parameter online.");
  });

  r.add("POST", "/destroy_weights_update_group", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kSglangDestroy);
    if (!b) return;
    Outcome o = s.engine.destroy_group(get_str(b.get(), "group_name", kDefaultGroup));
    reply_success(res, o.ok, o.ok ? "Succeeded to destroy custom process group." : o.message);
  });

  // Newer SGLang requires a JSON body on both ({} is enough).
  r.add("POST", "/pause_generation", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kSglangPause);
    if (!b) return;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.paused = true;
      s.pause_mode = get_str(b.get(), "mode", "abort");
    }
    status_ok(res, "Generation paused successfully.");
  });
  r.add("POST", "/continue_generation", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kSglangContinue);
    if (!b) return;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.paused = false;
    }
    status_ok(res, "Generation continued successfully.");
  });

  // GET|POST /flush_cache?timeout=S (float >= 0). --flush-busy N: the first N calls fail.
  auto flush = [&s](const httplib::Request& req, httplib::Response& res) {
    if (req.has_param("timeout")) {
      std::string t = req.get_param_value("timeout");
      char* end = nullptr;
      double v = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0')
        return query_error(res, "timeout", "float_parsing", "Input should be a valid number, unable to parse string as a number",
                           t, nullptr);
      if (v < 0) {
        JsonPtr ctx(cJSON_CreateObject());
        cJSON_AddNumberToObject(ctx.get(), "ge", 0.0);
        return query_error(res, "timeout", "greater_than_equal", "Input should be greater than or equal to 0", t,
                           std::move(ctx));
      }
    }
    int n;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      n = ++s.flush_calls;
    }
    if (n <= s.opt.flush_busy) return reply_text(res, 400, "Flush cache failed.\n");
    reply_text(res, 200,
               "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
               "requests, the operation will not be performed.)\n");
  };
  r.add("GET", "/flush_cache", flush);
  r.add("POST", "/flush_cache", flush);

  r.add("POST", "/update_weight_version", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = parse(req, res, kSglangUpdateWeightVersion);
    if (!b) return;
    std::string v = get_str(b.get(), "new_version", "");
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.sglang_weight_version = v;
    }
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddBoolToObject(o.get(), "success", true);
    cJSON_AddStringToObject(o.get(), "message", ("Weight version updated to " + v).c_str());
    cJSON_AddStringToObject(o.get(), "new_version", v.c_str());
    reply_json(res, 200, o.get());
  });

  auto model_info = [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddStringToObject(o.get(), "model_path", "wsync-reference-engine");
    cJSON_AddStringToObject(o.get(), "tokenizer_path", "wsync-reference-engine");
    cJSON_AddBoolToObject(o.get(), "is_generation", true);
    cJSON_AddNullToObject(o.get(), "preferred_sampling_params");
    {
      std::lock_guard<std::mutex> lk(s.mu);
      cJSON_AddStringToObject(o.get(), "weight_version", s.sglang_weight_version.c_str());
    }
    reply_json(res, 200, o.get());
  };
  r.add("GET", "/model_info", model_info);
  r.add("GET", "/get_model_info", model_info);  // the older name of the same route

  // Current SGLang: deprecated, 404 through its HTTPException handler.
  auto deprecated = [](const httplib::Request&, httplib::Response& res) {
    reply_sglang_http_error(res, 404,
                            "Endpoint '/get_weight_version' or '/weight_version' is deprecated. Please use '/model_info' "
                            "instead.");
  };
  r.add("GET", "/get_weight_version", deprecated);
  r.add("GET", "/weight_version", deprecated);
}

}  // namespace refeng
