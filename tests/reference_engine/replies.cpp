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

void reply_bare(httplib::Response& res, int status, const std::string& text) {
  res.status = status;
  res.body = text;
}

void reply_internal_error(httplib::Response& res) { reply_text(res, 500, "Internal Server Error"); }

void reply_success(httplib::Response& res, bool ok, const std::string& message) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddBoolToObject(o.get(), "success", ok);
  cJSON_AddStringToObject(o.get(), "message", message.c_str());
  reply_json(res, ok ? 200 : 400, o.get());
}

void reply_detail(httplib::Response& res, int status, const std::string& detail) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "detail", detail.c_str());
  reply_json(res, status, o.get());
}

void reply_unauthorized(httplib::Response& res, const Family& f) {
  if (f.protocol == Protocol::kLmdeploy && f.lm.envelope_401)
    return reply_lmdeploy_error(res, 401, "Unauthorized.", "authentication_error");
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "error", "Unauthorized");
  reply_json(res, 401, o.get());
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

// f"{str(exc)} {str(exc.errors())}": FastAPI's str(exc) lists the errors one per line (and, in
// the newest FastAPI, the handler's file and line, left out here).
void reply_sglang_validation(httplib::Response& res, const std::vector<FieldError>& errors) {
  std::string msg = std::to_string(errors.size()) + " validation error" + (errors.size() == 1 ? "" : "s") + ":\n";
  for (const FieldError& e : errors) msg += "  " + error_py_repr(e) + "\n";
  msg += " " + errors_py_repr(errors);
  sglang_error(res, 400, msg, "Bad Request");
}

void reply_sglang_http_error(httplib::Response& res, int status, const std::string& detail) {
  sglang_error(res, status, detail, std::to_string(status));
}

void reply_vllm_error(httplib::Response& res, int status, const std::string& type, const std::string& message,
                      const char* param) {
  JsonPtr o(cJSON_CreateObject());
  cJSON* e = cJSON_AddObjectToObject(o.get(), "error");
  cJSON_AddStringToObject(e, "message", message.c_str());
  cJSON_AddStringToObject(e, "type", type.c_str());
  if (param) cJSON_AddStringToObject(e, "param", param);
  else cJSON_AddNullToObject(e, "param");
  cJSON_AddNumberToObject(e, "code", status);
  reply_json(res, status, o.get());
}

void reply_vllm_plain_error(httplib::Response& res, int status, const std::string& message) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "error", message.c_str());
  reply_json(res, status, o.get());
}

void reply_vllm_message(httplib::Response& res, const std::string& message) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "message", message.c_str());
  reply_json(res, 200, o.get());
}

void reply_lmdeploy_error(httplib::Response& res, int status, const std::string& message, const char* type) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "message", message.c_str());
  cJSON_AddStringToObject(o.get(), "type", type);
  cJSON_AddNumberToObject(o.get(), "code", status);
  cJSON_AddNullToObject(o.get(), "param");
  cJSON_AddStringToObject(o.get(), "object", "error");
  reply_json(res, status, o.get());
}

void reply_lmdeploy_validation(httplib::Response& res, const Family& f, const std::vector<FieldError>& errors,
                               const cJSON* raw_body) {
  if (f.validation == Validation::kLmdeploy422) {  // {"detail": exc.errors(), "body": exc.body}
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddItemToObject(o.get(), "detail", errors_to_json(errors).release());
    cJSON_AddItemToObject(o.get(), "body", raw_body ? cJSON_Duplicate(raw_body, true) : cJSON_CreateNull());
    return reply_json(res, 422, o.get());
  }
  // 0.16+: the first error as "<loc without 'body', joined by '.'>: <msg>".
  std::string loc, msg = "Invalid request body.";
  if (!errors.empty()) {
    msg = errors[0].msg;
    for (const cJSON* c = errors[0].loc->child; c; c = c->next) {
      if (cJSON_IsString(c) && std::string(c->valuestring) == "body") continue;
      if (!loc.empty()) loc += ".";
      loc += cJSON_IsString(c) ? std::string(c->valuestring) : py_repr(c);
    }
  }
  reply_lmdeploy_error(res, 400, loc.empty() ? msg : loc + ": " + msg);
}

void reply_lmdeploy_media_type(httplib::Response& res, const Family& f) {
  const char* kMsg = "Unsupported Media Type: Only 'application/json' is allowed";
  if (f.validation == Validation::kLmdeploy422) {
    JsonPtr o(cJSON_CreateObject());
    cJSON* arr = cJSON_AddArrayToObject(o.get(), "detail");
    cJSON_AddItemToArray(arr, cJSON_CreateString(kMsg));
    cJSON_AddNullToObject(o.get(), "body");
    return reply_json(res, 422, o.get());
  }
  reply_lmdeploy_error(res, 400, kMsg);
}

}  // namespace refeng
