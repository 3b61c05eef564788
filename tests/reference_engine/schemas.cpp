// schemas.cpp — FastAPI body parsing and pydantic v2 (lax mode) field checks, as the engines'
// servers validate their request bodies (see schemas.h).
#include "schemas.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace refeng {
namespace {

JsonPtr dup(const cJSON* v) { return JsonPtr(v ? cJSON_Duplicate(v, true) : cJSON_CreateNull()); }

JsonPtr with_index(const JsonPtr& loc, int idx) {
  JsonPtr l(cJSON_Duplicate(loc.get(), true));
  cJSON_AddItemToArray(l.get(), cJSON_CreateNumber(idx));
  return l;
}

JsonPtr copy_loc(const JsonPtr& loc) { return JsonPtr(cJSON_Duplicate(loc.get(), true)); }

std::string lower_trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  std::string t = a == std::string::npos ? "" : s.substr(a, b - a + 1);
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t;
}

// Python's int(str) as pydantic's lax mode applies it: sign, digits, single underscores
// between digits; pydantic also takes "5.0" (a fractional part of zeros).
bool parse_int_string(const std::string& raw, int64_t* out) {
  std::string s = lower_trim(raw);
  size_t dot = s.find('.');
  if (dot != std::string::npos) {
    if (s.find_first_not_of('0', dot + 1) != std::string::npos) return false;
    s = s.substr(0, dot);
  }
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  if (i >= s.size()) return false;
  std::string digits;
  for (size_t j = i; j < s.size(); ++j) {
    if (s[j] == '_' && j > i && j + 1 < s.size() && std::isdigit((unsigned char)s[j - 1]) && std::isdigit((unsigned char)s[j + 1])) continue;
    if (!std::isdigit(static_cast<unsigned char>(s[j])) || digits.size() > 17) return false;
    digits += s[j];
  }
  *out = std::stoll(digits) * (s[0] == '-' ? -1 : 1);
  return true;
}

// Puts the coerced value in place of v (keeping its key when the parent is an object).
void replace(cJSON* parent, cJSON* v, cJSON* with) {
  if (parent == nullptr) cJSON_Delete(with);
  else if (cJSON_IsObject(parent) && v->string) cJSON_ReplaceItemInObjectCaseSensitive(parent, v->string, with);
  else cJSON_ReplaceItemViaPointer(parent, v, with);
}

bool check_int(cJSON* parent, cJSON* v, const JsonPtr& loc, std::vector<FieldError>* e) {
  int64_t i = 0;
  if (json_int(v, &i)) return true;
  if (cJSON_IsNumber(v) && std::isfinite(v->valuedouble)) {
    add_error(e, "int_from_float", copy_loc(loc), "Input should be a valid integer, got a number with a fractional part", v);
    return false;
  }
  if (cJSON_IsBool(v)) { replace(parent, v, cJSON_CreateNumber(cJSON_IsTrue(v) ? 1 : 0)); return true; }
  if (cJSON_IsString(v)) {
    if (parse_int_string(v->valuestring, &i)) { replace(parent, v, cJSON_CreateNumber(static_cast<double>(i))); return true; }
    add_error(e, "int_parsing", copy_loc(loc), "Input should be a valid integer, unable to parse string as an integer", v);
    return false;
  }
  add_error(e, "int_type", copy_loc(loc), "Input should be a valid integer", v);
  return false;
}

bool check_bool(cJSON* parent, cJSON* v, const JsonPtr& loc, std::vector<FieldError>* e) {
  if (cJSON_IsBool(v)) return true;
  int truth = -1;
  if (cJSON_IsNumber(v) && (v->valuedouble == 0 || v->valuedouble == 1)) truth = v->valuedouble == 1;
  if (cJSON_IsString(v)) {
    std::string s = lower_trim(v->valuestring);
    static const char* kTrue[] = {"1", "on", "t", "true", "y", "yes"};
    static const char* kFalse[] = {"0", "off", "f", "false", "n", "no"};
    for (const char* t : kTrue) if (s == t) truth = 1;
    for (const char* f : kFalse) if (s == f) truth = 0;
  }
  if (truth >= 0) { replace(parent, v, cJSON_CreateBool(truth)); return true; }
  if (cJSON_IsNumber(v) || cJSON_IsString(v))
    add_error(e, "bool_parsing", copy_loc(loc), "Input should be a valid boolean, unable to interpret input", v);
  else
    add_error(e, "bool_type", copy_loc(loc), "Input should be a valid boolean", v);
  return false;
}

bool check_str(cJSON* v, const FieldSpec& f, const JsonPtr& loc, std::vector<FieldError>* e) {
  if (!cJSON_IsString(v)) {
    add_error(e, "string_type", copy_loc(loc), "Input should be a valid string", v);
    return false;
  }
  if (f.literals.empty() || std::find(f.literals.begin(), f.literals.end(), std::string(v->valuestring)) != f.literals.end())
    return true;
  std::string exp;  // pydantic: "'a', 'b' or 'c'"
  for (size_t i = 0; i < f.literals.size(); ++i) {
    if (i > 0) exp += i + 1 == f.literals.size() ? " or " : ", ";
    exp += "'" + f.literals[i] + "'";
  }
  JsonPtr ctx(cJSON_CreateObject());
  cJSON_AddStringToObject(ctx.get(), "expected", exp.c_str());
  add_error(e, "literal_error", copy_loc(loc), "Input should be " + exp, v, std::move(ctx));
  return false;
}

bool check_list(cJSON* v, const JsonPtr& loc, std::vector<FieldError>* e) {
  if (cJSON_IsArray(v)) return true;
  add_error(e, "list_type", copy_loc(loc), "Input should be a valid list", v);
  return false;
}

}  // namespace

void add_error(std::vector<FieldError>* errors, const char* type, JsonPtr loc, const std::string& msg, const cJSON* input,
               JsonPtr ctx) {
  FieldError e;
  e.type = type;
  e.loc = std::move(loc);
  e.msg = msg;
  e.input = dup(input);
  e.ctx = std::move(ctx);
  errors->push_back(std::move(e));
}

JsonPtr loc_path(std::initializer_list<const char*> parts) {
  JsonPtr loc(cJSON_CreateArray());
  for (const char* p : parts) cJSON_AddItemToArray(loc.get(), cJSON_CreateString(p));
  return loc;
}

bool check_value(cJSON* parent, cJSON* v, const FieldSpec& f, const JsonPtr& loc, std::vector<FieldError>* e) {
  size_t before = e->size();
  switch (f.kind) {
    case Kind::Str: check_str(v, f, loc, e); break;
    case Kind::Int: check_int(parent, v, loc, e); break;
    case Kind::Bool: check_bool(parent, v, loc, e); break;
    case Kind::Float:
      if (!cJSON_IsNumber(v)) add_error(e, "float_type", copy_loc(loc), "Input should be a valid number", v);
      break;
    case Kind::Object:
      if (!cJSON_IsObject(v)) add_error(e, "dict_type", copy_loc(loc), "Input should be a valid dictionary", v);
      break;
    case Kind::StrList: {
      if (!check_list(v, loc, e)) break;
      int i = 0;
      FieldSpec item{f.name, Kind::Str, true, false, {}};
      for (cJSON* c = v->child; c; c = c->next, ++i) check_str(c, item, with_index(loc, i), e);
      break;
    }
    case Kind::IntListList: {
      if (!check_list(v, loc, e)) break;
      int i = 0;
      for (cJSON* c = v->child; c; c = c->next, ++i) {
        JsonPtr li = with_index(loc, i);
        if (!check_list(c, li, e)) continue;
        int j = 0;
        for (cJSON* d = c->child; d;) {
          cJSON* next = d->next;  // check_int may replace d
          check_int(c, d, with_index(li, j++), e);
          d = next;
        }
      }
      break;
    }
  }
  return e->size() == before;
}

bool fastapi_reads_json(const std::string& content_type) {
  // email.message.Message: the main type and subtype of the value, lowercased.
  std::string t = lower_trim(content_type.substr(0, content_type.find(';')));
  size_t slash = t.find('/');
  if (t.empty() || slash == std::string::npos) return false;
  std::string main = t.substr(0, slash), sub = t.substr(slash + 1);
  return main == "application" && (sub == "json" || (sub.size() > 5 && sub.compare(sub.size() - 5, 5, "+json") == 0));
}

bool fastapi_body(const std::string& body, const std::string& content_type, JsonPtr* value, bool* present,
                  bool* is_bytes, std::vector<FieldError>* errors) {
  *present = false;
  *is_bytes = false;
  value->reset();
  if (body.empty()) return true;
  if (!fastapi_reads_json(content_type)) {  // strict_content_type: the body stays bytes
    value->reset(cJSON_CreateString(body.c_str()));
    *present = *is_bytes = true;
    return true;
  }
  size_t pos = 0;
  const char* why = "Expecting value";
  JsonPtr root = json_parse(body, &pos, &why);
  if (!root) {
    JsonPtr loc = loc_path({"body"});
    cJSON_AddItemToArray(loc.get(), cJSON_CreateNumber(static_cast<double>(pos)));
    JsonPtr ctx(cJSON_CreateObject());
    cJSON_AddStringToObject(ctx.get(), "error", why);
    JsonPtr empty(cJSON_CreateObject());
    add_error(errors, "json_invalid", std::move(loc), "JSON decode error", empty.get(), std::move(ctx));
    value->reset(cJSON_CreateString(body.c_str()));  // RequestValidationError.body = e.doc
    return false;
  }
  if (cJSON_IsNull(root.get())) return true;  // FastAPI: a JSON null body is no body
  *value = std::move(root);
  *present = true;
  return true;
}

std::string get_str(const cJSON* obj, const char* name, const std::string& def) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return cJSON_IsString(v) ? std::string(v->valuestring) : def;
}

bool get_str_or_null(const cJSON* obj, const char* name, std::string* out) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!cJSON_IsString(v)) return false;
  *out = v->valuestring;
  return true;
}

int64_t get_int(const cJSON* obj, const char* name, int64_t def) {
  int64_t i = 0;
  return json_int(cJSON_GetObjectItemCaseSensitive(obj, name), &i) ? i : def;
}

bool get_bool(const cJSON* obj, const char* name, bool def) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return cJSON_IsBool(v) ? cJSON_IsTrue(v) != 0 : def;
}

}  // namespace refeng
