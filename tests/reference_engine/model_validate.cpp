// model_validate.cpp — validate_model(): a whole request body against a model, with the error
// list pydantic gives for each model style (see schemas.h), and the error renderers shared by
// the engines (FastAPI's detail list, Python reprs).
#include "schemas.h"

namespace refeng {
namespace {

// The loc prefix of a field error for this model style.
JsonPtr field_loc(const ModelSpec& spec, const char* field) {
  JsonPtr loc = loc_path({"body"});
  if (spec.style == ModelStyle::kMsgspec) {
    std::string marker = "function-after[build_struct(), " + spec.name + "]";
    cJSON_AddItemToArray(loc.get(), cJSON_CreateString(marker.c_str()));
  }
  if (field) cJSON_AddItemToArray(loc.get(), cJSON_CreateString(field));
  return loc;
}

// msgspec bridge: a union of "already an instance" and "build from a dict"; pydantic reports
// the failed is-instance branch first.
void msgspec_instance_error(const ModelSpec& spec, const cJSON* input, std::vector<FieldError>* e) {
  std::string marker = "is-instance[" + spec.name + "]";
  JsonPtr loc = loc_path({"body", marker.c_str()});
  JsonPtr ctx(cJSON_CreateObject());
  cJSON_AddStringToObject(ctx.get(), "class", spec.name.c_str());
  add_error(e, "is_instance_of", std::move(loc), "Input should be an instance of " + spec.name, input, std::move(ctx));
}

// The body is not an object (a list, a scalar, or bytes of a non-JSON Content-Type).
void not_an_object(const ModelSpec& spec, const cJSON* input, bool bytes, std::vector<FieldError>* e) {
  if (spec.style == ModelStyle::kDataclass) {
    JsonPtr ctx(cJSON_CreateObject());
    cJSON_AddStringToObject(ctx.get(), "class_name", spec.name.c_str());
    add_error(e, "dataclass_type", loc_path({"body"}), "Input should be a dictionary or an instance of " + spec.name, input,
              std::move(ctx));
  } else if (spec.style == ModelStyle::kMsgspec) {
    msgspec_instance_error(spec, input, e);
    add_error(e, "dict_type", field_loc(spec, nullptr), "Input should be a valid dictionary", input);
  } else {
    add_error(e, "model_attributes_type", loc_path({"body"}),
              "Input should be a valid dictionary or object to extract fields from", input);
  }
  for (auto& err : *e) err.input_is_bytes = bytes;
}

}  // namespace

Validated validate_model(const std::string& body, const std::string& content_type, const ModelSpec& spec) {
  Validated out;
  JsonPtr value;
  bool present = false, bytes = false;
  if (!fastapi_body(body, content_type, &value, &present, &bytes, &out.errors)) {
    out.raw = std::move(value);
    return out;
  }
  if (!present) {  // FastAPI: a required body that is absent
    add_error(&out.errors, "missing", loc_path({"body"}), "Field required", nullptr);
    return out;
  }
  out.raw.reset(cJSON_Duplicate(value.get(), true));
  if (bytes && spec.style == ModelStyle::kMsgspec) {
    // SGLang's msgspec bridge hands the raw bytes to build_struct, which raises outside
    // pydantic's error types: Starlette answers 500 text/plain (FastAPI 0.136 + pydantic 2.14).
    out.internal_error = true;
    return out;
  }
  if (!cJSON_IsObject(value.get())) {
    not_an_object(spec, value.get(), bytes, &out.errors);
    return out;
  }
  std::vector<FieldError> field_errors;
  for (const FieldSpec& f : spec.fields) {
    cJSON* v = cJSON_GetObjectItemCaseSensitive(value.get(), f.name);
    if (v == nullptr) {
      if (f.required) add_error(&field_errors, "missing", field_loc(spec, f.name), "Field required", value.get());
      continue;
    }
    if (cJSON_IsNull(v) && f.nullable) continue;
    check_value(value.get(), v, f, field_loc(spec, f.name), &field_errors);
  }
  if (!field_errors.empty()) {
    if (spec.style == ModelStyle::kMsgspec) msgspec_instance_error(spec, out.raw.get(), &out.errors);
    for (auto& e : field_errors) out.errors.push_back(std::move(e));
    return out;
  }
  out.body = std::move(value);
  return out;
}

JsonPtr errors_to_json(const std::vector<FieldError>& errors) {
  JsonPtr arr(cJSON_CreateArray());
  for (const FieldError& e : errors) {
    cJSON* o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", e.type.c_str());
    cJSON_AddItemToObject(o, "loc", cJSON_Duplicate(e.loc.get(), true));
    cJSON_AddStringToObject(o, "msg", e.msg.c_str());
    cJSON_AddItemToObject(o, "input", cJSON_Duplicate(e.input.get(), true));
    if (e.ctx) cJSON_AddItemToObject(o, "ctx", cJSON_Duplicate(e.ctx.get(), true));
    cJSON_AddItemToArray(arr.get(), o);
  }
  return arr;
}

std::string error_py_repr(const FieldError& e) {
  std::string s = "{'type': " + py_str_repr(e.type) + ", 'loc': (";
  bool first = true;
  for (const cJSON* c = e.loc->child; c; c = c->next) {
    if (!first) s += ", ";
    first = false;
    s += py_repr(c);
  }
  if (e.loc->child && !e.loc->child->next) s += ",";  // a 1-tuple
  std::string input = e.input_is_bytes && cJSON_IsString(e.input.get()) ? "b" + py_str_repr(e.input->valuestring)
                                                                          : py_repr(e.input.get());
  s += "), 'msg': " + py_str_repr(e.msg) + ", 'input': " + input;
  if (e.ctx) s += ", 'ctx': " + py_repr(e.ctx.get());
  return s + "}";
}

std::string errors_py_repr(const std::vector<FieldError>& errors) {
  std::string s = "[";
  for (size_t i = 0; i < errors.size(); ++i) s += (i ? ", " : "") + error_py_repr(errors[i]);
  return s + "]";
}

}  // namespace refeng
