// replies.cpp — reply bodies per engine (see replies.h for the formats and their sources).
#include "replies.h"

namespace refeng {

void reply_json(httplib::Response& res, int status, const cJSON* body) {
  res.status = status;
  res.set_content(json_print(body), "application/json");
}

void reply_text(httplib::Response& res, int status, const std::string& text) {
  res.status = status;
  res.set_content(text, "text/plain; charset=utf-8");
}

void reply_success(httplib::Response& res, bool ok, const std::string& message) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddBoolToObject(o.get(), "success", ok);
  cJSON_AddStringToObject(o.get(), "message", message.c_str());
  reply_json(res, ok ? 200 : 400, o.get());
}

namespace {
void sglang_error(httplib::Response& res, int status, const std::string& message, const std::string& type) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "object", "error");
  cJSON_AddStringToObject(o.get(), "message", message.c_str());
  cJSON_AddStringToObject(o.get(), "type", type.c_str());
  cJSON_AddNullToObject(o.get(), "param");
  cJSON_AddNumberToObject(o.get(), "code", status);
  reply_json(res, status, o.get());
}
}  // namespace

void reply_sglang_validation(httplib::Response& res, const std::vector<FieldError>& errors) {
  std::string n = std::to_string(errors.size());
  std::string msg = n + " validation error" + (errors.size() == 1 ? "" : "s") + " " + errors_py_repr(errors);
  sglang_error(res, 400, msg, "Bad Request");
}

void reply_sglang_http_error(httplib::Response& res, int status, const std::string& detail) {
  sglang_error(res, status, detail, std::to_string(status));
}

void reply_fastapi_422(httplib::Response& res, const std::vector<FieldError>& errors) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddItemToObject(o.get(), "detail", errors_to_json(errors).release());
  reply_json(res, 422, o.get());
}

void reply_fastapi_422_strings(httplib::Response& res, const std::vector<std::string>& details) {
  JsonPtr o(cJSON_CreateObject());
  cJSON* arr = cJSON_AddArrayToObject(o.get(), "detail");
  for (const auto& d : details) cJSON_AddItemToArray(arr, cJSON_CreateString(d.c_str()));
  reply_json(res, 422, o.get());
}

void reply_detail(httplib::Response& res, int status, const std::string& detail) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "detail", detail.c_str());
  reply_json(res, status, o.get());
}

void reply_vllm_message(httplib::Response& res, const std::string& message) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "message", message.c_str());
  reply_json(res, 200, o.get());
}

void reply_vllm_error(httplib::Response& res, int status, const std::string& message) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "error", message.c_str());
  reply_json(res, status, o.get());
}

void reply_lmdeploy_error(httplib::Response& res, int status, const std::string& message, const char* type) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "object", "error");
  cJSON_AddStringToObject(o.get(), "message", message.c_str());
  cJSON_AddStringToObject(o.get(), "type", type);
  cJSON_AddNullToObject(o.get(), "param");
  cJSON_AddNumberToObject(o.get(), "code", status);
  reply_json(res, status, o.get());
}

void reply_unauthorized(httplib::Response& res) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "error", "Unauthorized");
  reply_json(res, 401, o.get());
}

}  // namespace refeng
