// vllm_generation.cpp — a minimal generation surface for vLLM: GET /v1/models and POST
// /v1/completions (both behind --api-key, as vLLM guards /v1). A completion answers a fixed text,
// except:
//   * while paused: 0.28–0.32 (and mode=keep) queue it until /resume; 0.33 (abort/wait) answers
//     503 ServiceUnavailableError "Generation is paused. Please retry after it resumes.";
//   * while a weight update is active (between start and finish) and generation runs, the
//     layers are on meta tensors: the engine core dies. That request and every later engine
//     request answer 500 EngineDeadError; /health answers 503 (a real server also exits unless
//     VLLM_KEEP_ALIVE_ON_ENGINE_DEATH is set).
#include <cstdio>
#include <ctime>
#include <string>

#include "replies.h"
#include "router.h"
#include "vllm_common.h"

namespace refeng {
namespace {

void completion_reply(Shared& s, const cJSON* body, httplib::Response& res) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    n = ++s.completions;
  }
  std::string model = get_str(body, "model", "wsync-reference-engine");
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "id", ("cmpl-" + std::to_string(n)).c_str());
  cJSON_AddStringToObject(o.get(), "object", "text_completion");
  cJSON_AddNumberToObject(o.get(), "created", static_cast<double>(std::time(nullptr)));
  cJSON_AddStringToObject(o.get(), "model", model.c_str());
  cJSON* choices = cJSON_AddArrayToObject(o.get(), "choices");
  cJSON* c = cJSON_CreateObject();
  cJSON_AddNumberToObject(c, "index", 0);
  cJSON_AddStringToObject(c, "text", " wsync");
  cJSON_AddNullToObject(c, "logprobs");
  cJSON_AddStringToObject(c, "finish_reason", "length");
  cJSON_AddNullToObject(c, "stop_reason");
  cJSON_AddItemToArray(choices, c);
  cJSON* usage = cJSON_AddObjectToObject(o.get(), "usage");
  cJSON_AddNumberToObject(usage, "prompt_tokens", 1);
  cJSON_AddNumberToObject(usage, "total_tokens", 2);
  cJSON_AddNumberToObject(usage, "completion_tokens", 1);
  reply_json(res, 200, o.get());
}

void completions(Shared& s, const httplib::Request& req, httplib::Response& res) {
  JsonPtr body;
  bool present = false, bytes = false;
  std::vector<FieldError> errors;
  if (fastapi_body(req.body, req.get_header_value("Content-Type"), &body, &present, &bytes, &errors) &&
      (!present || bytes || !cJSON_IsObject(body.get()))) {
    if (!present) add_error(&errors, "missing", loc_path({"body"}), "Field required", nullptr);
    else add_error(&errors, "model_attributes_type", loc_path({"body"}),
                   "Input should be a valid dictionary or object to extract fields from", body.get());
  }
  if (!errors.empty()) return vllm_validation(res, errors);
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(s.mu);
      if (s.paused && s.fam.vl.paused_rejects && s.pause_mode != "keep") {
        lk.unlock();
        return reply_vllm_error(res, 503, "ServiceUnavailableError", "Generation is paused. Please retry after it resumes.");
      }
      s.cv.wait(lk, [&] { return !s.paused || s.dead || s.stopping; });  // queued until /resume
      if (s.stopping) {
        lk.unlock();
        return reply_vllm_error(res, 503, "ServiceUnavailableError", "The server is shutting down.");
      }
    }
    if (vllm_dead_refused(s, res)) return;
    std::lock_guard<std::mutex> core(s.core);  // generation steps in the engine core loop
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.paused) continue;  // paused again before it got to run
    if (s.update_active) {
      s.dead = true;  // a forward pass over meta tensors: the worker fails, EngineDeadError
      s.cv.notify_all();
      std::fprintf(stderr, "wsync-reference-engine: generation during an active weight update: the engine core died\n");
      return reply_vllm_error(res, 500, "InternalServerError", vllm_dead_message(s));
    }
    break;
  }
  completion_reply(s, body.get(), res);
}

}  // namespace

void add_vllm_generation_routes(Router& r, Shared& s) {
  r.add("GET", "/v1/models", [](const httplib::Request&, httplib::Response& res) {
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddStringToObject(o.get(), "object", "list");
    cJSON* data = cJSON_AddArrayToObject(o.get(), "data");
    cJSON* m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", "wsync-reference-engine");
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddStringToObject(m, "owned_by", "vllm");
    cJSON_AddItemToArray(data, m);
    reply_json(res, 200, o.get());
  });
  r.add("POST", "/v1/completions", [&s](const httplib::Request& req, httplib::Response& res) { completions(s, req, res); });
}

}  // namespace refeng
