// sglang_identity.cpp — SGLang's identity and health routes: GET /get_server_info (all
// versions) and /server_info (0.5.6+), /get_model_info and /model_info (0.5.6+), the
// weight-version routes per family, /health and /health_generate.
#include <ctime>
#include <string>

#include "replies.h"
#include "router.h"
#include "sglang_common.h"

namespace refeng {
namespace {

constexpr int kHealthCheckTimeoutS = 20;  // SGLANG_HEALTH_CHECK_TIMEOUT

// ServerArgs (flat) + scheduler info + internal_states + version, with the keys a client reads
// (tp_size, pp_size, dp_size, ep_size, enable_dp_attention, version) and a few more.
JsonPtr server_info(Shared& s) {
  const SglangFeatures& f = s.fam.sg;
  JsonPtr o(cJSON_CreateObject());
  cJSON* r = o.get();
  cJSON_AddStringToObject(r, "model_path", "wsync-reference-engine");
  cJSON_AddStringToObject(r, "tokenizer_path", "wsync-reference-engine");
  cJSON_AddStringToObject(r, "load_format", "auto");
  cJSON_AddStringToObject(r, "dtype", "auto");
  cJSON_AddStringToObject(r, "host", s.opt.host.c_str());
  cJSON_AddNumberToObject(r, "tp_size", s.opt.tp_size);
  cJSON_AddNumberToObject(r, "pp_size", s.opt.pp_size);
  cJSON_AddNumberToObject(r, "dp_size", s.opt.dp_size);
  cJSON_AddNumberToObject(r, "ep_size", 1);
  cJSON_AddNumberToObject(r, "nnodes", 1);
  cJSON_AddNumberToObject(r, "node_rank", 0);
  cJSON_AddBoolToObject(r, "enable_dp_attention", false);
  if (f.attn_dp_key) cJSON_AddNumberToObject(r, "attn_dp_size", 1);
  cJSON_AddNumberToObject(r, "mem_fraction_static", 0.88);
  cJSON_AddNumberToObject(r, "random_seed", 42);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    cJSON_AddStringToObject(r, "weight_version", s.weight_version.c_str());
  }
  if (f.launch_command) cJSON_AddStringToObject(r, "launch_command", "wsync-reference-engine --protocol sglang");
  if (f.kv_events_key) cJSON_AddNullToObject(r, "kv_events");
  if (f.startup_time_key) cJSON_AddNumberToObject(r, "startup_time", static_cast<double>(std::time(nullptr)));
  cJSON* states = cJSON_AddArrayToObject(r, "internal_states");
  cJSON* st = cJSON_CreateObject();
  cJSON_AddNumberToObject(st, "last_gen_throughput", 0.0);
  cJSON_AddItemToArray(states, st);
  cJSON_AddStringToObject(r, "version", s.fam.version.c_str());
  if (f.frontend_key) cJSON_AddStringToObject(r, "frontend", "python");
  return o;
}

JsonPtr model_info(Shared& s) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "model_path", "wsync-reference-engine");
  cJSON_AddStringToObject(o.get(), "tokenizer_path", "wsync-reference-engine");
  cJSON_AddBoolToObject(o.get(), "is_generation", true);
  cJSON_AddNullToObject(o.get(), "preferred_sampling_params");
  std::lock_guard<std::mutex> lk(s.mu);
  cJSON_AddStringToObject(o.get(), "weight_version", s.weight_version.c_str());
  return o;
}

void add_weight_version_routes(Router& r, Shared& s) {
  auto answer = [&s](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    std::lock_guard<std::mutex> lk(s.mu);
    cJSON_AddStringToObject(o.get(), "weight_version", s.weight_version.c_str());
    reply_json(res, 200, o.get());
  };
  auto deprecated = [](const httplib::Request&, httplib::Response& res) {
    reply_sglang_http_error(res, 404,
                            "Endpoint '/get_weight_version' or '/weight_version' is deprecated. Please use '/model_info' "
                            "instead.");
  };
  switch (s.fam.sg.weight_version_routes) {
    case WeightVersionRoutes::kGetOnly: r.add("GET", "/get_weight_version", answer); break;
    case WeightVersionRoutes::kBoth:
      r.add("GET", "/get_weight_version", answer);
      r.add("GET", "/weight_version", answer);
      break;
    case WeightVersionRoutes::kDeprecated404:
      r.add("GET", "/get_weight_version", deprecated);
      r.add("GET", "/weight_version", deprecated);
      break;
    case WeightVersionRoutes::kRemoved: break;  // Starlette's plain 404
  }
}

}  // namespace

void add_sglang_identity_routes(Router& r, Shared& s) {
  // A 1-token generation: waits while paused or while an update holds the writer lock.
  auto health = [&s](const httplib::Request&, httplib::Response& res) {
    res.status = sglang_wait_generation(s, kHealthCheckTimeoutS) ? 200 : 503;
  };
  r.add("GET", "/health", health);
  r.add("GET", "/health_generate", health);

  // get_internal_state() is a scheduler round trip: it waits while the scheduler is busy.
  auto info = [&s](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> core(s.core);
    reply_json(res, 200, server_info(s).get());
  };
  r.add("GET", "/get_server_info", info);
  if (s.fam.sg.server_info_route) r.add("GET", "/server_info", info);

  // Answered by the tokenizer process alone: cheap during an update.
  auto minfo = [&s](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, model_info(s).get()); };
  r.add("GET", "/get_model_info", minfo);
  if (s.fam.sg.server_info_route) r.add("GET", "/model_info", minfo);

  add_weight_version_routes(r, s);
}

}  // namespace refeng
