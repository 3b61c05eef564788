// json_util.h — small helpers around cJSON: an owning pointer, strict parsing of a request
// body, printing, and a Python-repr printer (SGLang puts Python reprs of pydantic errors into
// its error messages).
#pragma once

#include <cJSON.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace refeng {

struct JsonDeleter {
  void operator()(cJSON* p) const { cJSON_Delete(p); }
};
using JsonPtr = std::unique_ptr<cJSON, JsonDeleter>;

// Parses the whole of `text` as one JSON value (trailing whitespace allowed, anything else is an
// error). On failure returns null, sets *error_pos to the byte offset of the problem and
// *python_msg to what Python's json module would roughly say ("Expecting value", "Expecting
// property name enclosed in double quotes", "Extra data").
JsonPtr json_parse(const std::string& text, size_t* error_pos, const char** python_msg = nullptr);

// Compact JSON text of a value ("null" for nullptr).
std::string json_print(const cJSON* v);

// True and *out set when v is a JSON number with an integral value within +-2^53.
bool json_int(const cJSON* v, int64_t* out);

// Python repr of a JSON value: 'str', True/False/None, ints without ".0", [..], {..}.
std::string py_repr(const cJSON* v);
std::string py_str_repr(const std::string& s);

// Python's type name of a JSON value: NoneType, bool, int, float, str, list, dict.
const char* py_type_name(const cJSON* v);

// True when the string is empty or only JSON whitespace.
bool is_blank(const std::string& s);

}  // namespace refeng
