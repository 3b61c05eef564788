// replies.h — reply bodies shared by the routes, in each engine's exact format:
//   SGLang    {"success","message"} 200/400; validation errors 400 ErrorResponse
//             {"object":"error","message":..,"type":"Bad Request","param":null,"code":400};
//             HTTPException -> the same shape with type = str(status).
//   vLLM      {"message": ..} 200; errors {"error":{"message","type","param","code"}};
//             /pause, /resume, /is_paused: {"error": "<text>"}.
//   LMDeploy  {"success","message"} 200/400; validation 422 {"detail","body"} (0.14–0.15) or
//             400 {"message","type","code","param","object"} (0.16+).
//   All       unknown route 404 / wrong method 405 {"detail": ..} (Starlette's defaults); an
//             exception no handler catches: 500 text/plain "Internal Server Error".
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

#include "family.h"
#include "json_util.h"
#include "schemas.h"

namespace refeng {

void reply_json(httplib::Response& res, int status, const cJSON* body);
void reply_text(httplib::Response& res, int status, const std::string& text);
// A body with no Content-Type (Starlette's Response(content=str) without a media type).
void reply_bare(httplib::Response& res, int status, const std::string& text);
// Starlette's ServerErrorMiddleware: 500 text/plain "Internal Server Error".
void reply_internal_error(httplib::Response& res);

// {"success": ok, "message": message}, 200 when ok else 400 (SGLang and LMDeploy).
void reply_success(httplib::Response& res, bool ok, const std::string& message);
// {"detail": detail} with `status` (Starlette's HTTPException default).
void reply_detail(httplib::Response& res, int status, const std::string& detail);
// 401 in the protocol's (and version's) shape.
void reply_unauthorized(httplib::Response& res, const Family& f);

// SGLang's RequestValidationError handler (400) and HTTPException handler.
void reply_sglang_validation(httplib::Response& res, const std::vector<FieldError>& errors);
void reply_sglang_http_error(httplib::Response& res, int status, const std::string& detail);

// vLLM's ErrorResponse {"error":{"message","type","param","code"}}.
void reply_vllm_error(httplib::Response& res, int status, const std::string& type, const std::string& message,
                      const char* param = nullptr);
// {"error": "<text>"} of /pause, /resume, /is_paused.
void reply_vllm_plain_error(httplib::Response& res, int status, const std::string& message);
void reply_vllm_message(httplib::Response& res, const std::string& message);

// LMDeploy's ErrorResponse {"message","type","code","param":null,"object":"error"}.
void reply_lmdeploy_error(httplib::Response& res, int status, const std::string& message,
                          const char* type = "invalid_request_error");
// LMDeploy's RequestValidationError handler of the family (422 or 400).
void reply_lmdeploy_validation(httplib::Response& res, const Family& f, const std::vector<FieldError>& errors,
                               const cJSON* raw_body);
// The errors that LMDeploy's validate_json_request dependency raises (plain strings).
void reply_lmdeploy_media_type(httplib::Response& res, const Family& f);

}  // namespace refeng
