// schemas.h — request validation for the three engines.
//
//  * SGLang and LMDeploy take pydantic-validated FastAPI bodies: validate_model() checks a body
//    against a ModelSpec the way FastAPI + pydantic v2 would (missing field, wrong JSON type,
//    bad literal, malformed JSON, non-JSON Content-Type) and returns pydantic-style errors; extra
//    fields are ignored (pydantic's default, and SGLang's msgspec schema's extra="ignore").
//    Type checks are strict JSON types: pydantic's lax coercions ("5" -> 5, 1 -> True) are
//    refused here.
//  * vLLM passes init_info/update_info dicts into dataclasses (cls(**dict)): unknown keys and
//    missing required keys are errors, worded like Python's TypeError.
//  * dtype strings are resolved like getattr(torch, name): "bfloat16" works, "torch.bfloat16"
//    does not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "json_util.h"

namespace refeng {

// ---- pydantic-style models ---------------------------------------------------------------

enum class Kind { Str, Int, Bool, Float, StrList, IntListList, Object };

struct FieldSpec {
  const char* name;
  Kind kind;
  bool required;                     // no default
  bool nullable;                     // Optional[...]: null accepted
  std::vector<std::string> literals; // Literal[...] of a Str field; empty = any string
};

struct ModelSpec {
  const char* name;
  std::vector<FieldSpec> fields;
};

// One pydantic error: {"type", "loc", "msg", "input"[, "ctx"]}.
struct FieldError {
  std::string type;
  JsonPtr loc;    // array: "body", field, index...
  std::string msg;
  JsonPtr input;
  JsonPtr ctx;    // may be null
};

// Validates `body` (with its Content-Type header value, "" when absent) against `spec`.
// Returns the parsed object (null when there are errors) and fills *errors.
JsonPtr validate_model(const std::string& body, const std::string& content_type, const ModelSpec& spec,
                       std::vector<FieldError>* errors);

// FastAPI reads a body as JSON only without a Content-Type or with application/json or
// application/*+json.
bool fastapi_reads_json(const std::string& content_type);

// [{"type":..,"loc":[..],"msg":..,"input":..}, ...] as FastAPI's default 422 "detail".
JsonPtr errors_to_json(const std::vector<FieldError>& errors);
// "[{'type': 'missing', 'loc': ('body', 'x'), 'msg': 'Field required', 'input': {...}}]".
std::string errors_py_repr(const std::vector<FieldError>& errors);

// Typed reads of a validated object, with the model's default when absent (or null).
std::string get_str(const cJSON* obj, const char* name, const std::string& def);
bool get_str_or_null(const cJSON* obj, const char* name, std::string* out);  // false = absent/null
int64_t get_int(const cJSON* obj, const char* name, int64_t def);
bool get_bool(const cJSON* obj, const char* name, bool def);

// The request models.
extern const ModelSpec kSglangInit, kSglangUpdate, kSglangDestroy, kSglangPause, kSglangContinue,
    kSglangUpdateWeightVersion;
extern const ModelSpec kLmdeployInit, kLmdeployUpdate, kLmdeployDestroy, kLmdeployAbort;

// ---- tensors of an update request ----------------------------------------------------------

struct TensorSpec {
  std::string name;
  std::string dtype_name;  // as the request spelled it
  int32_t dtype;           // WSYNC_DTYPE_*
  std::vector<int64_t> shape;
};

// getattr(torch, s) for dtypes. Returns WSYNC_DTYPE_INVALID and sets *why when `s` is not a
// torch dtype name ("module 'torch' has no attribute 'torch.bfloat16'") or one wsync lacks.
int32_t torch_dtype(const std::string& s, std::string* why);

// Zips names/dtypes/shapes (already type-checked JSON arrays) into specs. Fails on a length
// mismatch, an unknown dtype, a negative dimension or too many dimensions.
bool build_tensor_specs(const cJSON* names, const cJSON* dtypes, const cJSON* shapes, std::vector<TensorSpec>* out,
                        std::string* err);

// ---- vLLM ---------------------------------------------------------------------------------

struct VllmInit {
  bool has_address = false;
  std::string master_address;
  bool has_port = false;
  int64_t master_port = 0;
  int64_t rank_offset = 0;
  int64_t world_size = 0;
  bool has_unique_id = false;
};

// vLLM's NCCL dataclasses changed across releases (research §0.1); `api_version` picks the
// generation, numbered like wsync's vllm adapter option of the same name:
//   3 (newest, nccl_common.py): init_info {master_address, master_port, rank_offset*, world_size*,
//     nccl_unique_id_b64, packed, packed_buffer_size_bytes, packed_num_buffers};
//     update_info {names*, dtype_names*, shapes*}
//   2: init_info {master_address*, master_port*, rank_offset*, world_size*};
//     update_info {names*, dtype_names*, shapes*, packed, packed_buffer_size_bytes,
//     packed_num_buffers, is_checkpoint_format (UNCONFIRMED for this generation)}
//   1: init_info as 2; update_info {names*, dtype_names*, shapes*, packed, is_checkpoint_format}
// (* = required). Any other key is an error, as cls(**dict) raises. *err is the full error text.
bool vllm_parse_init_info(const cJSON* info, int api_version, VllmInit* out, std::string* err);

// NCCLWeightTransferUpdateInfo(**update_info); lengths must match. `info` may be a dict or a
// list of dicts.
bool vllm_parse_update_info(const cJSON* info, int api_version, std::vector<TensorSpec>* out, std::string* err);

}  // namespace refeng
