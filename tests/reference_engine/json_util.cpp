// json_util.cpp — cJSON helpers: strict whole-body parse, printing, integral checks and
// Python reprs (see json_util.h).
#include "json_util.h"

#include <cmath>
#include <cstdio>

namespace refeng {

bool is_blank(const std::string& s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  return true;
}

JsonPtr json_parse(const std::string& text, size_t* error_pos, const char** python_msg) {
  const char* end = nullptr;
  cJSON* v = cJSON_ParseWithLengthOpts(text.data(), text.size(), &end, false);
  if (v == nullptr) {
    size_t pos = end != nullptr && end >= text.data() ? static_cast<size_t>(end - text.data()) : 0;
    if (pos > text.size()) pos = text.size();
    if (error_pos) *error_pos = pos;
    // Python names what it expected at the position: after '{' or ',' in an object, a key.
    size_t k = pos;
    while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t' || text[k - 1] == '\r' || text[k - 1] == '\n')) --k;
    bool key = k > 0 && text[k - 1] == '{' && (pos >= text.size() || text[pos] != '"');
    if (python_msg) *python_msg = key ? "Expecting property name enclosed in double quotes" : "Expecting value";
    return nullptr;
  }
  size_t pos = end != nullptr ? static_cast<size_t>(end - text.data()) : text.size();
  for (size_t i = pos; i < text.size(); ++i) {
    char c = text[i];
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {  // trailing garbage: "Extra data"
      cJSON_Delete(v);
      if (error_pos) *error_pos = i;
      if (python_msg) *python_msg = "Extra data";
      return nullptr;
    }
  }
  return JsonPtr(v);
}

std::string json_print(const cJSON* v) {
  if (v == nullptr) return "null";
  char* s = cJSON_PrintUnformatted(v);
  if (s == nullptr) return "null";
  std::string out(s);
  cJSON_free(s);
  return out;
}

bool json_int(const cJSON* v, int64_t* out) {
  if (!cJSON_IsNumber(v)) return false;
  double d = v->valuedouble;
  if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9007199254740992.0) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

const char* py_type_name(const cJSON* v) {
  if (v == nullptr || cJSON_IsNull(v)) return "NoneType";
  if (cJSON_IsBool(v)) return "bool";
  if (cJSON_IsString(v)) return "str";
  if (cJSON_IsNumber(v)) {
    int64_t i;
    return json_int(v, &i) ? "int" : "float";
  }
  if (cJSON_IsArray(v)) return "list";
  return "dict";
}

std::string py_str_repr(const std::string& s) {
  // Python picks double quotes only when the text has a ' and no ".
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == q) { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  out += q;
  return out;
}

std::string py_repr(const cJSON* v) {
  if (v == nullptr || cJSON_IsNull(v)) return "None";
  if (cJSON_IsTrue(v)) return "True";
  if (cJSON_IsFalse(v)) return "False";
  if (cJSON_IsString(v)) return py_str_repr(v->valuestring);
  if (cJSON_IsNumber(v)) {
    int64_t i = 0;
    if (json_int(v, &i)) return std::to_string(i);
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", v->valuedouble);
    return b;
  }
  std::string out;
  bool obj = cJSON_IsObject(v);
  out += obj ? '{' : '[';
  bool first = true;
  for (const cJSON* c = v->child; c != nullptr; c = c->next) {
    if (!first) out += ", ";
    first = false;
    if (obj) out += py_str_repr(c->string ? c->string : "") + ": ";
    out += py_repr(c);
  }
  out += obj ? '}' : ']';
  return out;
}

}  // namespace refeng
