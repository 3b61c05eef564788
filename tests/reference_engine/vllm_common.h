// vllm_common.h — helpers shared by the vLLM route files: the error envelope of worker-side
// failures (collective_rpc), the dead-engine replies, and the two ways vLLM reads a request
// body (by hand in 0.28–0.31's init/update, FastAPI Body(embed=True) elsewhere).
#pragma once

#include <httplib.h>

#include <string>

#include "json_util.h"
#include "schemas.h"
#include "state.h"

namespace refeng {

// vLLM's sanitize_message: strips " at 0x..", traceback lines and file paths.
std::string vllm_sanitize(const std::string& message);

// 500 {"error":{"message":"Call to collective_rpc method failed: <X>","type":"InternalServerError",..}}
// with X wrapped as "Worker failed with error '<msg>', ..." when more than one worker runs (mp
// executor); the uni executor (one worker) re-raises the message as is.
void vllm_rpc_failure(Shared& s, httplib::Response& res, const std::string& worker_message);

// The EngineDeadError text a client gets in this version.
std::string vllm_dead_message(const Shared& s);
// When the engine is dead: answers 500 EngineDeadError and returns true.
bool vllm_dead_refused(Shared& s, httplib::Response& res);

// 0.28–0.31 init/update: `body = await raw_request.json()` then `body.get(key)`. Answers and
// returns false on "Invalid JSON format" (400), a non-object ('list' object has no attribute
// 'get': 500) or a missing/null key (400 "Missing '<key>' in request body").
bool vllm_manual_body(const httplib::Request& req, httplib::Response& res, const char* key, JsonPtr* body,
                      cJSON** value);

// FastAPI Body(embed=True) fields. kind: "dict" (dict[str, Any]), "dict_or_list"
// (dict | list[dict]), "str" (str), "str_or_none" (str | None = None). Answers vLLM's 400
// validation envelope and returns false on errors; *value is null when an optional field is absent.
bool vllm_embed_body(const httplib::Request& req, httplib::Response& res, const char* key, const char* kind,
                     JsonPtr* body, cJSON** value);

// vLLM's RequestValidationError handler: 400 {"error":{"message":"N validation error(s):\n  {..}",
// "type":"Bad Request","param":"<cleaned loc of the first error>","code":400}}.
void vllm_validation(httplib::Response& res, const std::vector<FieldError>& errors);

// A FastAPI Query(bool) parameter; false and an error appended when it does not parse.
bool vllm_query_bool(const httplib::Request& req, const char* name, bool def, bool* out, std::vector<FieldError>* errors);

}  // namespace refeng
