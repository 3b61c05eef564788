// schemas.cpp — request validation per engine (see schemas.h): pydantic-style model checks for
// SGLang and LMDeploy, vLLM's dataclass-style init_info/update_info checks, torch dtype names.
#include "schemas.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "wsync.h"

namespace refeng {
namespace {

JsonPtr loc_of(const char* field) {
  JsonPtr loc(cJSON_CreateArray());
  cJSON_AddItemToArray(loc.get(), cJSON_CreateString("body"));
  if (field) cJSON_AddItemToArray(loc.get(), cJSON_CreateString(field));
  return loc;
}

JsonPtr dup(const cJSON* v) { return JsonPtr(v ? cJSON_Duplicate(v, true) : cJSON_CreateNull()); }

void add_error(std::vector<FieldError>* errors, const char* type, JsonPtr loc, const char* msg, const cJSON* input,
               JsonPtr ctx = nullptr) {
  FieldError e;
  e.type = type;
  e.loc = std::move(loc);
  e.msg = msg;
  e.input = dup(input);
  e.ctx = std::move(ctx);
  errors->push_back(std::move(e));
}

JsonPtr with_index(const JsonPtr& loc, int idx) {
  JsonPtr l(cJSON_Duplicate(loc.get(), true));
  cJSON_AddItemToArray(l.get(), cJSON_CreateNumber(idx));
  return l;
}

// Pydantic v2 messages for the strict-JSON-type errors.
void check_str(const cJSON* v, const JsonPtr& loc, std::vector<FieldError>* e) {
  if (!cJSON_IsString(v)) add_error(e, "string_type", JsonPtr(cJSON_Duplicate(loc.get(), true)), "Input should be a valid string", v);
}

void check_int(const cJSON* v, const JsonPtr& loc, std::vector<FieldError>* e) {
  int64_t i = 0;
  if (json_int(v, &i)) return;
  if (cJSON_IsNumber(v))
    add_error(e, "int_from_float", JsonPtr(cJSON_Duplicate(loc.get(), true)),
              "Input should be a valid integer, got a number with a fractional part", v);
  else
    add_error(e, "int_type", JsonPtr(cJSON_Duplicate(loc.get(), true)), "Input should be a valid integer", v);
}

bool check_list(const cJSON* v, const JsonPtr& loc, std::vector<FieldError>* e) {
  if (cJSON_IsArray(v)) return true;
  add_error(e, "list_type", JsonPtr(cJSON_Duplicate(loc.get(), true)), "Input should be a valid list", v);
  return false;
}

std::string literal_expected(const std::vector<std::string>& lits) {
  // pydantic: "'a', 'b' or 'c'"
  std::string s;
  for (size_t i = 0; i < lits.size(); ++i) {
    if (i > 0) s += i + 1 == lits.size() ? " or " : ", ";
    s += "'" + lits[i] + "'";
  }
  return s;
}

void check_field(const cJSON* v, const FieldSpec& f, std::vector<FieldError>* e) {
  JsonPtr loc = loc_of(f.name);
  switch (f.kind) {
    case Kind::Str:
      if (!cJSON_IsString(v)) { check_str(v, loc, e); return; }
      if (!f.literals.empty() &&
          std::find(f.literals.begin(), f.literals.end(), std::string(v->valuestring)) == f.literals.end()) {
        std::string exp = literal_expected(f.literals);
        JsonPtr ctx(cJSON_CreateObject());
        cJSON_AddStringToObject(ctx.get(), "expected", exp.c_str());
        std::string msg = "Input should be " + exp;
        add_error(e, "literal_error", std::move(loc), msg.c_str(), v, std::move(ctx));
      }
      return;
    case Kind::Int: check_int(v, loc, e); return;
    case Kind::Bool:
      if (!cJSON_IsBool(v)) add_error(e, "bool_type", std::move(loc), "Input should be a valid boolean", v);
      return;
    case Kind::Float:
      if (!cJSON_IsNumber(v)) add_error(e, "float_type", std::move(loc), "Input should be a valid number", v);
      return;
    case Kind::Object:
      if (!cJSON_IsObject(v)) add_error(e, "dict_type", std::move(loc), "Input should be a valid dictionary", v);
      return;
    case Kind::StrList: {
      if (!check_list(v, loc, e)) return;
      int i = 0;
      for (const cJSON* c = v->child; c; c = c->next, ++i) check_str(c, with_index(loc, i), e);
      return;
    }
    case Kind::IntListList: {
      if (!check_list(v, loc, e)) return;
      int i = 0;
      for (const cJSON* c = v->child; c; c = c->next, ++i) {
        JsonPtr li = with_index(loc, i);
        if (!check_list(c, li, e)) continue;
        int j = 0;
        for (const cJSON* d = c->child; d; d = d->next, ++j) check_int(d, with_index(li, j), e);
      }
      return;
    }
  }
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

bool fastapi_reads_json(const std::string& content_type) {
  if (content_type.empty()) return true;
  std::string t = lower(trim(content_type.substr(0, content_type.find(';'))));
  size_t slash = t.find('/');
  if (slash == std::string::npos) return false;  // Python's email parser: text/plain
  std::string main = t.substr(0, slash), sub = t.substr(slash + 1);
  return main == "application" && (sub == "json" || (sub.size() > 5 && sub.compare(sub.size() - 5, 5, "+json") == 0));
}

JsonPtr validate_model(const std::string& body, const std::string& content_type, const ModelSpec& spec,
                       std::vector<FieldError>* errors) {
  errors->clear();
  if (body.empty()) {  // FastAPI: no body -> the whole model is missing
    add_error(errors, "missing", loc_of(nullptr), "Field required", nullptr);
    return nullptr;
  }
  if (!fastapi_reads_json(content_type)) {  // the body stays bytes: not a dict
    JsonPtr raw(cJSON_CreateString(body.c_str()));
    add_error(errors, "model_attributes_type", loc_of(nullptr),
              "Input should be a valid dictionary or object to extract fields from", raw.get());
    return nullptr;
  }
  size_t pos = 0;
  const char* why = "Expecting value";
  JsonPtr root = json_parse(body, &pos, &why);
  if (!root) {
    JsonPtr loc = loc_of(nullptr);
    cJSON_AddItemToArray(loc.get(), cJSON_CreateNumber(static_cast<double>(pos)));
    JsonPtr ctx(cJSON_CreateObject());
    cJSON_AddStringToObject(ctx.get(), "error", why);
    JsonPtr empty(cJSON_CreateObject());
    add_error(errors, "json_invalid", std::move(loc), "JSON decode error", empty.get(), std::move(ctx));
    return nullptr;
  }
  if (!cJSON_IsObject(root.get())) {
    add_error(errors, "model_attributes_type", loc_of(nullptr),
              "Input should be a valid dictionary or object to extract fields from", root.get());
    return nullptr;
  }
  for (const FieldSpec& f : spec.fields) {
    const cJSON* v = cJSON_GetObjectItemCaseSensitive(root.get(), f.name);
    if (v == nullptr) {
      if (f.required) add_error(errors, "missing", loc_of(f.name), "Field required", root.get());
      continue;
    }
    if (cJSON_IsNull(v) && f.nullable) continue;
    check_field(v, f, errors);
  }
  if (!errors->empty()) return nullptr;
  return root;
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

std::string errors_py_repr(const std::vector<FieldError>& errors) {
  std::string s = "[";
  for (size_t i = 0; i < errors.size(); ++i) {
    const FieldError& e = errors[i];
    if (i) s += ", ";
    s += "{'type': " + py_str_repr(e.type) + ", 'loc': (";
    bool first = true;
    for (const cJSON* c = e.loc->child; c; c = c->next) {
      if (!first) s += ", ";
      first = false;
      s += py_repr(c);
    }
    if (e.loc->child && !e.loc->child->next) s += ",";  // a 1-tuple
    s += "), 'msg': " + py_str_repr(e.msg) + ", 'input': " + py_repr(e.input.get());
    if (e.ctx) s += ", 'ctx': " + py_repr(e.ctx.get());
    s += "}";
  }
  return s + "]";
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

// ---- the models ---------------------------------------------------------------------------
// SGLang: python/sglang/srt/managers/io_struct.py (msgspec BaseReq structs; extra ignored).
const ModelSpec kSglangInit{"InitWeightsUpdateGroupReqInput",
                            {{"master_address", Kind::Str, true, false, {}},
                             {"master_port", Kind::Int, true, false, {}},
                             {"rank_offset", Kind::Int, true, false, {}},
                             {"world_size", Kind::Int, true, false, {}},
                             {"group_name", Kind::Str, false, false, {}},
                             {"backend", Kind::Str, false, false, {}}}};
const ModelSpec kSglangUpdate{"UpdateWeightsFromDistributedReqInput",
                              {{"names", Kind::StrList, true, false, {}},
                               {"dtypes", Kind::StrList, true, false, {}},
                               {"shapes", Kind::IntListList, true, false, {}},
                               {"group_name", Kind::Str, false, false, {}},
                               {"flush_cache", Kind::Bool, false, false, {}},
                               {"abort_all_requests", Kind::Bool, false, false, {}},
                               {"weight_version", Kind::Str, false, true, {}},
                               {"load_format", Kind::Str, false, true, {}},
                               {"torch_empty_cache", Kind::Bool, false, false, {}}}};
const ModelSpec kSglangDestroy{"DestroyWeightsUpdateGroupReqInput", {{"group_name", Kind::Str, false, false, {}}}};
const ModelSpec kSglangPause{"PauseGenerationReqInput",
                             {{"mode", Kind::Str, false, false, {"abort", "retract", "in_place"}}}};
const ModelSpec kSglangContinue{"ContinueGenerationReqInput", {{"torch_empty_cache", Kind::Bool, false, false, {}}}};
const ModelSpec kSglangUpdateWeightVersion{"UpdateWeightVersionReqInput",
                                           {{"new_version", Kind::Str, true, false, {}},
                                            {"abort_all_requests", Kind::Bool, false, false, {}}}};

// LMDeploy: lmdeploy/serve/openai/protocol.py. The field lists of the weight-update models are
// UNCONFIRMED (not found in the sources read); they follow /work/shared/PROTOCOLS.md, with
// group_name required on all three (init's has no default there).
const ModelSpec kLmdeployInit{"InitWeightsUpdateGroupRequest",
                              {{"master_address", Kind::Str, true, false, {}},
                               {"master_port", Kind::Int, true, false, {}},
                               {"rank_offset", Kind::Int, true, false, {}},
                               {"world_size", Kind::Int, true, false, {}},
                               {"group_name", Kind::Str, true, false, {}},
                               {"backend", Kind::Str, false, false, {}}}};
const ModelSpec kLmdeployUpdate{"UpdateWeightsFromDistributedRequest",
                                {{"names", Kind::StrList, true, false, {}},
                                 {"dtypes", Kind::StrList, true, false, {}},
                                 {"shapes", Kind::IntListList, true, false, {}},
                                 {"group_name", Kind::Str, true, false, {}},
                                 {"load_format", Kind::Str, false, true, {}},
                                 {"finished", Kind::Bool, false, false, {}}}};
const ModelSpec kLmdeployDestroy{"DestroyWeightsUpdateGroupRequest", {{"group_name", Kind::Str, true, false, {}}}};
// AbortRequest (protocol.py @0051af7d).
const ModelSpec kLmdeployAbort{"AbortRequest",
                               {{"abort_all", Kind::Bool, false, false, {}},
                                {"finished_reason", Kind::Object, false, true, {}},
                                {"abort_message", Kind::Str, false, true, {}},
                                {"session_id", Kind::Int, false, false, {}}}};

// ---- dtypes and tensors -------------------------------------------------------------------

int32_t torch_dtype(const std::string& s, std::string* why) {
  static const struct { const char* name; int32_t dtype; } kTable[] = {
      {"bool", WSYNC_DTYPE_BOOL},        {"int8", WSYNC_DTYPE_INT8},         {"int16", WSYNC_DTYPE_INT16},
      {"short", WSYNC_DTYPE_INT16},      {"int32", WSYNC_DTYPE_INT32},       {"int", WSYNC_DTYPE_INT32},
      {"int64", WSYNC_DTYPE_INT64},      {"long", WSYNC_DTYPE_INT64},        {"uint8", WSYNC_DTYPE_UINT8},
      {"float16", WSYNC_DTYPE_FLOAT16},  {"half", WSYNC_DTYPE_FLOAT16},      {"bfloat16", WSYNC_DTYPE_BFLOAT16},
      {"float32", WSYNC_DTYPE_FLOAT32},  {"float", WSYNC_DTYPE_FLOAT32},     {"float64", WSYNC_DTYPE_FLOAT64},
      {"double", WSYNC_DTYPE_FLOAT64},   {"float8_e4m3fn", WSYNC_DTYPE_FLOAT8_E4M3},
      {"float8_e5m2", WSYNC_DTYPE_FLOAT8_E5M2}};
  for (const auto& e : kTable)
    if (s == e.name) return e.dtype;
  // torch dtypes that exist but that wsync does not carry.
  static const char* kTorchOnly[] = {"uint16", "uint32", "uint64", "complex32", "chalf", "complex64", "cfloat",
                                     "complex128", "cdouble", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                     "float8_e8m0fnu", "qint8", "quint8", "qint32", "quint4x2", "quint2x4"};
  for (const char* n : kTorchOnly)
    if (s == n) {
      *why = "dtype torch." + s + " is not supported by wsync";
      return WSYNC_DTYPE_INVALID;
    }
  *why = "module 'torch' has no attribute '" + s + "'";
  return WSYNC_DTYPE_INVALID;
}

bool build_tensor_specs(const cJSON* names, const cJSON* dtypes, const cJSON* shapes, std::vector<TensorSpec>* out,
                        std::string* err) {
  int n = cJSON_GetArraySize(names), d = cJSON_GetArraySize(dtypes), s = cJSON_GetArraySize(shapes);
  if (n != d || n != s) {
    *err = "names, dtypes and shapes must have the same length (got " + std::to_string(n) + ", " +
           std::to_string(d) + ", " + std::to_string(s) + ")";
    return false;
  }
  out->clear();
  const cJSON* a = names->child;
  const cJSON* b = dtypes->child;
  const cJSON* c = shapes->child;
  for (; a && b && c; a = a->next, b = b->next, c = c->next) {
    TensorSpec t;
    t.name = a->valuestring;
    t.dtype_name = b->valuestring;
    std::string why;
    t.dtype = torch_dtype(t.dtype_name, &why);
    if (t.dtype == WSYNC_DTYPE_INVALID) { *err = why; return false; }
    for (const cJSON* x = c->child; x; x = x->next) {
      int64_t v = 0;
      json_int(x, &v);
      t.shape.push_back(v);
    }
    std::string dims;
    for (size_t i = 0; i < t.shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(t.shape[i]);
    for (int64_t v : t.shape)
      if (v < 0) {  // torch.empty's own wording
        *err = "Trying to create tensor with negative dimension " + std::to_string(v) + ": [" + dims + "]";
        return false;
      }
    if (t.shape.size() > WSYNC_MAX_NDIM) {
      *err = "tensor '" + t.name + "' has " + std::to_string(t.shape.size()) + " dimensions; wsync carries at most " +
             std::to_string(WSYNC_MAX_NDIM);
      return false;
    }
    out->push_back(std::move(t));
  }
  return true;
}

// ---- vLLM ---------------------------------------------------------------------------------
namespace {

const char* py_type(const cJSON* v) {
  if (cJSON_IsNull(v)) return "NoneType";
  if (cJSON_IsBool(v)) return "bool";
  if (cJSON_IsString(v)) return "str";
  if (cJSON_IsNumber(v)) { int64_t i; return json_int(v, &i) ? "int" : "float"; }
  if (cJSON_IsArray(v)) return "list";
  return "dict";
}

// The TypeError of cls(**kw) for an unexpected or missing argument (kw_only: a
// @dataclass(kw_only=True), as the newest NCCLWeightTransferInitInfo is).
bool dataclass_keys(const cJSON* info, const char* cls, const std::vector<const char*>& known,
                    const std::vector<const char*>& required, bool kw_only, std::string* err) {
  for (const cJSON* c = info->child; c; c = c->next) {
    bool ok = false;
    for (const char* k : known) ok = ok || std::strcmp(k, c->string) == 0;
    if (!ok) {
      *err = std::string(cls) + ".__init__() got an unexpected keyword argument '" + c->string + "'";
      return false;
    }
  }
  std::vector<std::string> missing;
  for (const char* k : required)
    if (!cJSON_GetObjectItemCaseSensitive(info, k)) missing.push_back(std::string("'") + k + "'");
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size(); ++i)
      list += (i == 0 ? "" : (i + 1 == missing.size() ? (missing.size() > 2 ? ", and " : " and ") : ", ")) + missing[i];
    *err = std::string(cls) + ".__init__() missing " + std::to_string(missing.size()) + " required " +
           (kw_only ? "keyword-only" : "positional") + " argument" +
           (missing.size() > 1 ? "s" : "") + ": " + list;
    return false;
  }
  return true;
}

bool typed(const cJSON* info, const char* key, const char* want, bool nullable, std::string* err) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(info, key);
  if (v == nullptr || (nullable && cJSON_IsNull(v))) return true;
  std::string got = py_type(v);
  if (got == want) return true;
  *err = std::string("'") + key + "' must be " + (nullable ? std::string(want) + " or None" : want) + ", got " + got;
  return false;
}

}  // namespace

bool vllm_parse_init_info(const cJSON* info, int api_version, VllmInit* out, std::string* err) {
  const std::string prefix = "Invalid init_info for NCCLWeightTransferEngine: ";
  if (!cJSON_IsObject(info)) {
    *err = prefix + "init_info must be a dict, got " + py_type(info);
    return false;
  }
  std::string e;
  const bool newest = api_version >= 3;
  std::vector<const char*> known = {"master_address", "master_port", "rank_offset", "world_size"};
  std::vector<const char*> required = {"rank_offset", "world_size"};
  if (newest) {
    known.insert(known.end(), {"nccl_unique_id_b64", "packed", "packed_buffer_size_bytes", "packed_num_buffers"});
  } else {
    required = known;
  }
  if (!dataclass_keys(info, "NCCLWeightTransferInitInfo", known, required, newest, &e) ||
      !typed(info, "master_address", "str", newest, &e) || !typed(info, "master_port", "int", newest, &e) ||
      !typed(info, "rank_offset", "int", false, &e) || !typed(info, "world_size", "int", false, &e) ||
      !typed(info, "nccl_unique_id_b64", "str", true, &e) || !typed(info, "packed", "bool", false, &e) ||
      !typed(info, "packed_buffer_size_bytes", "int", false, &e) || !typed(info, "packed_num_buffers", "int", false, &e)) {
    *err = prefix + e;
    return false;
  }
  out->has_address = get_str_or_null(info, "master_address", &out->master_address);
  const cJSON* port = cJSON_GetObjectItemCaseSensitive(info, "master_port");
  out->has_port = port != nullptr && !cJSON_IsNull(port);
  out->master_port = get_int(info, "master_port", 0);
  out->rank_offset = get_int(info, "rank_offset", 0);
  out->world_size = get_int(info, "world_size", 0);
  const cJSON* uid = cJSON_GetObjectItemCaseSensitive(info, "nccl_unique_id_b64");
  out->has_unique_id = uid != nullptr && !cJSON_IsNull(uid);
  // decode_nccl_unique_id (nccl_common.py): the two modes are exclusive.
  if (out->has_unique_id && (out->has_address || out->has_port)) {
    *err = "pass nccl_unique_id_b64 OR master_address/master_port, not both";
    return false;
  }
  if (!out->has_unique_id && (!out->has_address || !out->has_port)) {
    *err = "pass nccl_unique_id_b64 OR master_address/master_port";  // wording UNCONFIRMED
    return false;
  }
  return true;
}

bool vllm_parse_update_info(const cJSON* info, int api_version, std::vector<TensorSpec>* out, std::string* err) {
  const std::string prefix = "Invalid update_info for NCCLWeightTransferEngine: ";
  out->clear();
  std::vector<const cJSON*> items;
  if (cJSON_IsArray(info)) {
    for (const cJSON* c = info->child; c; c = c->next) items.push_back(c);
  } else {
    items.push_back(info);
  }
  for (const cJSON* it : items) {
    if (!cJSON_IsObject(it)) {
      *err = prefix + "update_info must be a dict or a list of dicts, got " + py_type(it);
      return false;
    }
    std::string e;
    std::vector<const char*> known = {"names", "dtype_names", "shapes"};
    if (api_version == 2)
      known.insert(known.end(), {"packed", "packed_buffer_size_bytes", "packed_num_buffers", "is_checkpoint_format"});
    if (api_version == 1) known.insert(known.end(), {"packed", "is_checkpoint_format"});
    if (!dataclass_keys(it, "NCCLWeightTransferUpdateInfo", known, {"names", "dtype_names", "shapes"}, false, &e) ||
        !typed(it, "packed", "bool", false, &e) || !typed(it, "is_checkpoint_format", "bool", false, &e) ||
        !typed(it, "packed_buffer_size_bytes", "int", false, &e) || !typed(it, "packed_num_buffers", "int", false, &e)) {
      *err = prefix + e;
      return false;
    }
    const cJSON* names = cJSON_GetObjectItemCaseSensitive(it, "names");
    const cJSON* dtypes = cJSON_GetObjectItemCaseSensitive(it, "dtype_names");
    const cJSON* shapes = cJSON_GetObjectItemCaseSensitive(it, "shapes");
    auto list_of = [](const cJSON* v, bool (*ok)(const cJSON*)) {
      if (!cJSON_IsArray(v)) return false;
      for (const cJSON* c = v->child; c; c = c->next)
        if (!ok(c)) return false;
      return true;
    };
    auto is_str = [](const cJSON* c) { return cJSON_IsString(c) != 0; };
    auto is_shape = [](const cJSON* c) {
      if (!cJSON_IsArray(c)) return false;
      int64_t i;
      for (const cJSON* d = c->child; d; d = d->next)
        if (!json_int(d, &i)) return false;
      return true;
    };
    if (!list_of(names, is_str)) { *err = prefix + "'names' must be a list of str"; return false; }
    if (!list_of(dtypes, is_str)) { *err = prefix + "'dtype_names' must be a list of str"; return false; }
    if (!list_of(shapes, is_shape)) { *err = prefix + "'shapes' must be a list of lists of int"; return false; }
    int n = cJSON_GetArraySize(names), d = cJSON_GetArraySize(dtypes), s = cJSON_GetArraySize(shapes);
    if (n != d || n != s) {  // __post_init__ ValueError; exact wording UNCONFIRMED
      *err = "names, dtype_names and shapes must have the same length (got " + std::to_string(n) + ", " +
             std::to_string(d) + ", " + std::to_string(s) + ")";
      return false;
    }
    std::vector<TensorSpec> part;
    if (!build_tensor_specs(names, dtypes, shapes, &part, err)) return false;
    out->insert(out->end(), part.begin(), part.end());
  }
  return true;
}

}  // namespace refeng
