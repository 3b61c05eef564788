// schemas.h — FastAPI + pydantic v2 request validation as the engines' servers run it
// (FastAPI >= 0.132, whose strict_content_type reads a body as JSON only with an
// application/json or application/*+json Content-Type; vLLM pins fastapi>=0.133, SGLang and
// LMDeploy take the newest).
//
//  * validate_model() checks a body against a ModelSpec the way FastAPI + pydantic would: a
//    missing body (or JSON null), malformed JSON, a non-object, missing fields, wrong types, bad
//    literals. Pydantic's lax mode is kept: "5" and 5.0 are ints, "yes"/1 are bools. Unknown
//    fields are ignored (pydantic's default; SGLang's msgspec bridge sets extra="ignore").
//  * The error list comes in pydantic's shape; the renderers turn it into each engine's reply
//    text (SGLang's str(exc) dump, LMDeploy's "<loc>: <msg>", vLLM's bounded summary).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "json_util.h"

namespace refeng {

enum class Kind { Str, Int, Bool, Float, StrList, IntListList, Object };

struct FieldSpec {
  const char* name;
  Kind kind;
  bool required;                     // no default
  bool nullable;                     // Optional[...]: null accepted
  std::vector<std::string> literals; // Literal[...] of a Str field; empty = any string
};

// How the model is built, which decides the errors for a body that is not an object.
enum class ModelStyle {
  kDataclass,  // stdlib @dataclass (SGLang <= 0.5.14): dataclass_type
  kMsgspec,    // msgspec.Struct through SGLang's bridge (0.5.15+): is-instance / function-after locs
  kBaseModel,  // pydantic BaseModel (LMDeploy): model_attributes_type
};

struct ModelSpec {
  std::string name;
  ModelStyle style;
  std::vector<FieldSpec> fields;
};

// One pydantic error: {"type", "loc", "msg", "input"[, "ctx"]}.
struct FieldError {
  std::string type;
  JsonPtr loc;    // array: "body", field, index...
  std::string msg;
  JsonPtr input;  // the offending value; a JSON string holding the bytes for a non-JSON body
  JsonPtr ctx;    // may be null
  bool input_is_bytes = false;  // Python repr b'...'
};

struct Validated {
  JsonPtr body;                    // the object with lax coercions applied; null on errors
  std::vector<FieldError> errors;  // pydantic's errors, in its order
  JsonPtr raw;                     // RequestValidationError.body: parsed JSON, or the text when it did not parse
  bool internal_error = false;     // the server would answer 500 "Internal Server Error" instead
};

// True when FastAPI parses a body with this Content-Type as JSON.
bool fastapi_reads_json(const std::string& content_type);

// Parses a body the way FastAPI does before validation: absent/empty/JSON-null -> *present false;
// a JSON Content-Type with malformed JSON -> a json_invalid error. Non-JSON Content-Types leave
// the bytes as a string in *value with *is_bytes set.
bool fastapi_body(const std::string& body, const std::string& content_type, JsonPtr* value, bool* present,
                  bool* is_bytes, std::vector<FieldError>* errors);

Validated validate_model(const std::string& body, const std::string& content_type, const ModelSpec& spec);

// Checks one value against a field's kind (lax), appending errors at `loc`; may replace *v in
// its parent with the coerced value. Returns false when it added errors.
bool check_value(cJSON* parent, cJSON* v, const FieldSpec& f, const JsonPtr& loc, std::vector<FieldError>* e);

void add_error(std::vector<FieldError>* errors, const char* type, JsonPtr loc, const std::string& msg,
               const cJSON* input, JsonPtr ctx = nullptr);
JsonPtr loc_path(std::initializer_list<const char*> parts);

// [{"type":..,"loc":[..],"msg":..,"input":..}, ...] (FastAPI's "detail").
JsonPtr errors_to_json(const std::vector<FieldError>& errors);
// Python repr of one error / of the list.
std::string error_py_repr(const FieldError& e);
std::string errors_py_repr(const std::vector<FieldError>& errors);

// Typed reads of a validated object, with the model's default when absent (or null).
std::string get_str(const cJSON* obj, const char* name, const std::string& def);
bool get_str_or_null(const cJSON* obj, const char* name, std::string* out);  // false = absent/null
int64_t get_int(const cJSON* obj, const char* name, int64_t def);
bool get_bool(const cJSON* obj, const char* name, bool def);

}  // namespace refeng
