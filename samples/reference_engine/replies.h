// replies.h — the reply bodies of the three engines, so every route answers in its engine's
// exact format:
//   SGLang    {"success","message"} 200/400; validation errors 400 ErrorResponse
//             {"object":"error","message":..,"type":"Bad Request","param":null,"code":400};
//             HTTPException -> the same shape with type = str(status).
//   vLLM      {"message": ..} 200; errors {"error": ..} (see routes_vllm.cpp for the status).
//   LMDeploy  {"success","message"} 200/400; validation errors FastAPI's default 422
//             {"detail":[{"type","loc","msg","input"}]} (LMDeploy's own handler UNCONFIRMED).
//   All       401 {"error":"Unauthorized"} (SGLang, vLLM and LMDeploy middlewares all answer so);
//             unknown route 404 / wrong method 405 {"detail": ..} (Starlette's defaults).
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

#include "json_util.h"
#include "schemas.h"

namespace refeng {

void reply_json(httplib::Response& res, int status, const cJSON* body);
void reply_text(httplib::Response& res, int status, const std::string& text);

// {"success": ok, "message": message}, 200 when ok else 400 (SGLang and LMDeploy).
void reply_success(httplib::Response& res, bool ok, const std::string& message);

// SGLang's RequestValidationError handler: 400 ErrorResponse with a message that carries the
// pydantic errors (wording beyond "the errors' repr" UNCONFIRMED).
void reply_sglang_validation(httplib::Response& res, const std::vector<FieldError>& errors);
// SGLang's HTTPException handler.
void reply_sglang_http_error(httplib::Response& res, int status, const std::string& detail);

// FastAPI's default RequestValidationError handler: 422 {"detail": [...]}.
void reply_fastapi_422(httplib::Response& res, const std::vector<FieldError>& errors);
// ... with raw detail entries (LMDeploy's Content-Type check passes plain strings).
void reply_fastapi_422_strings(httplib::Response& res, const std::vector<std::string>& details);
// {"detail": detail} with `status` (Starlette's HTTPException default).
void reply_detail(httplib::Response& res, int status, const std::string& detail);

// vLLM: {"message": message} 200, {"error": message} with `status`, or any object.
void reply_vllm_message(httplib::Response& res, const std::string& message);
void reply_vllm_error(httplib::Response& res, int status, const std::string& message);

// LMDeploy's create_error_response: ErrorResponse JSON (field set UNCONFIRMED).
void reply_lmdeploy_error(httplib::Response& res, int status, const std::string& message,
                          const char* type = "invalid_request_error");

void reply_unauthorized(httplib::Response& res);

}  // namespace refeng
