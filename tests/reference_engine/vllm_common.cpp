// vllm_common.cpp — see vllm_common.h.
#include "vllm_common.h"

#include <regex>

#include "replies.h"

namespace refeng {

std::string vllm_sanitize(const std::string& message) {
  static const std::regex kAddr(" at 0x[0-9a-f]+>");
  static const std::regex kFile("\\n?\\s*File \"[^\"]+\", line \\d+, in \\S+(\\n\\s+.*)?");
  static const std::regex kPath("/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\\w.\\-]+)+");
  static const std::regex kFileName("(?:/[\\w\\-]+)+/[\\w\\-]+\\.\\w+");
  std::string m = std::regex_replace(message, kAddr, ">");
  m = std::regex_replace(m, kFile, "");
  m = std::regex_replace(m, kPath, "<path>");
  m = std::regex_replace(m, kFileName, "<path>");
  size_t a = m.find_first_not_of(" \t\r\n"), b = m.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : m.substr(a, b - a + 1);
}

void vllm_rpc_failure(Shared& s, httplib::Response& res, const std::string& worker_message) {
  std::string x = s.engine.gpus() > 1 ? "Worker failed with error '" + worker_message +
                                            "', please check the stack trace above for the root cause"
                                      : worker_message;
  reply_vllm_error(res, 500, "InternalServerError", vllm_sanitize("Call to collective_rpc method failed: " + x));
}

std::string vllm_dead_message(const Shared& s) {
  return s.fam.vl.dead_client_message ? "The server had an error while processing your request."
                                      : "EngineCore encountered an issue. See stack trace (above) for the root cause.";
}

bool vllm_dead_refused(Shared& s, httplib::Response& res) {
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.dead) return false;
  }
  reply_vllm_error(res, 500, "InternalServerError", vllm_dead_message(s));
  return true;
}

bool vllm_manual_body(const httplib::Request& req, httplib::Response& res, const char* key, JsonPtr* body,
                      cJSON** value) {
  size_t pos = 0;
  *body = json_parse(req.body, &pos);  // Request.json() ignores the Content-Type
  if (!*body) {
    reply_vllm_error(res, 400, "Bad Request", "Invalid JSON format");
    return false;
  }
  if (!cJSON_IsObject(body->get())) {  // AttributeError: 500 through the generic handler
    reply_vllm_error(res, 500, "InternalServerError",
                     std::string("'") + py_type_name(body->get()) + "' object has no attribute 'get'");
    return false;
  }
  *value = cJSON_GetObjectItemCaseSensitive(body->get(), key);
  if (*value == nullptr || cJSON_IsNull(*value)) {
    reply_vllm_error(res, 400, "Bad Request", std::string("Missing '") + key + "' in request body");
    return false;
  }
  return true;
}

namespace {

// pydantic for dict | list[dict]: both branches' errors, dict first.
void check_dict_or_list(const cJSON* v, const JsonPtr& loc, std::vector<FieldError>* e) {
  if (cJSON_IsObject(v)) return;
  bool list_of_dicts = cJSON_IsArray(v);
  for (const cJSON* c = list_of_dicts ? v->child : nullptr; c; c = c->next) list_of_dicts = list_of_dicts && cJSON_IsObject(c);
  if (list_of_dicts) return;
  add_error(e, "dict_type", JsonPtr(cJSON_Duplicate(loc.get(), true)), "Input should be a valid dictionary", v);
  if (!cJSON_IsArray(v)) {
    add_error(e, "list_type", JsonPtr(cJSON_Duplicate(loc.get(), true)), "Input should be a valid list", v);
    return;
  }
  int i = 0;
  for (const cJSON* c = v->child; c; c = c->next, ++i)
    if (!cJSON_IsObject(c)) {
      JsonPtr l(cJSON_Duplicate(loc.get(), true));
      cJSON_AddItemToArray(l.get(), cJSON_CreateNumber(i));
      add_error(e, "dict_type", std::move(l), "Input should be a valid dictionary", c);
    }
}

}  // namespace

bool vllm_embed_body(const httplib::Request& req, httplib::Response& res, const char* key, const char* kind,
                     JsonPtr* body, cJSON** value) {
  std::vector<FieldError> errors;
  bool present = false, bytes = false;
  *value = nullptr;
  if (!fastapi_body(req.body, req.get_header_value("Content-Type"), body, &present, &bytes, &errors)) {
    vllm_validation(res, errors);
    return false;
  }
  // An embedded field is read from a dict body only; anything else leaves it missing.
  cJSON* v = present && !bytes && cJSON_IsObject(body->get()) ? cJSON_GetObjectItemCaseSensitive(body->get(), key) : nullptr;
  std::string k = kind;
  JsonPtr loc = loc_path({"body", key});
  if (v == nullptr || (cJSON_IsNull(v) && k != "str_or_none")) {
    if (k == "str_or_none") return true;
    add_error(&errors, "missing", std::move(loc), "Field required", nullptr);
  } else if (k == "dict" && !cJSON_IsObject(v)) {
    add_error(&errors, "dict_type", std::move(loc), "Input should be a valid dictionary", v);
  } else if (k == "dict_or_list") {
    check_dict_or_list(v, loc, &errors);
  } else if ((k == "str" || k == "str_or_none") && !cJSON_IsString(v) && !cJSON_IsNull(v)) {
    add_error(&errors, "string_type", std::move(loc), "Input should be a valid string", v);
  }
  if (!errors.empty()) {
    vllm_validation(res, errors);
    return false;
  }
  *value = cJSON_IsNull(v) ? nullptr : v;
  return true;
}

namespace {

// _summarize_error_input: containers are described, scalars are str()'d.
std::string summarize(const cJSON* v) {
  if (cJSON_IsString(v)) {
    std::string s = v->valuestring;
    return s.size() > 200 ? s.substr(0, 200) + "...[truncated]" : s;
  }
  if (cJSON_IsArray(v)) return "<list of " + std::to_string(cJSON_GetArraySize(v)) + " items>";
  if (cJSON_IsObject(v)) return "<dict of " + std::to_string(cJSON_GetArraySize(v)) + " items>";
  if (v == nullptr || cJSON_IsNull(v)) return "None";
  if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "True" : "False";
  return py_repr(v);
}

std::string dotted(const cJSON* loc) {
  std::string s;
  for (const cJSON* c = loc->child; c; c = c->next) s += (s.empty() ? "" : ".") + (cJSON_IsString(c) ? std::string(c->valuestring) : py_repr(c));
  return s;
}

}  // namespace

void vllm_validation(httplib::Response& res, const std::vector<FieldError>& errors) {
  size_t n = errors.size();
  std::string label = n == 1 ? "error" : "errors";
  std::string msg = std::to_string(n) + " validation " + label + ":\n";
  for (size_t i = 0; i < n && i < 10; ++i) {
    const FieldError& e = errors[i];
    std::string t = "{'type': " + py_str_repr(e.type) + ", 'loc': " + py_str_repr(dotted(e.loc.get())) +
                    ", 'msg': " + py_str_repr(e.msg) + ", 'input': " + py_str_repr(summarize(e.input.get()));
    if (e.ctx) t += ", 'ctx': " + py_repr(e.ctx.get());
    t += "}";
    if (t.size() > 1000) t = t.substr(0, 1000) + "...[truncated]";
    msg += "  " + t + "\n";
  }
  if (n > 10) msg += "  ...and " + std::to_string(n - 10) + " more " + label + "\n";
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  std::string param = n ? dotted(errors[0].loc.get()) : "";
  reply_vllm_error(res, 400, "Bad Request", vllm_sanitize(msg), n ? param.c_str() : nullptr);
}

bool vllm_query_bool(const httplib::Request& req, const char* name, bool def, bool* out, std::vector<FieldError>* errors) {
  *out = def;
  if (!req.has_param(name)) return true;
  JsonPtr v(cJSON_CreateString(req.get_param_value(name).c_str()));
  cJSON* holder = cJSON_CreateObject();
  cJSON_AddItemToObject(holder, "v", v.release());
  cJSON* item = cJSON_GetObjectItemCaseSensitive(holder, "v");
  FieldSpec f{name, Kind::Bool, true, false, {}};
  bool ok = check_value(holder, item, f, loc_path({"query", name}), errors);
  if (ok) *out = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(holder, "v"));
  cJSON_Delete(holder);
  return ok;
}

}  // namespace refeng
