// tensors.h — the tensors an update request names: torch dtype names resolved like
// getattr(torch, name) ("bfloat16" works, "torch.bfloat16" does not), and the zip of the
// names/dtypes/shapes lists as the engines do it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "json_util.h"

namespace refeng {

struct TensorSpec {
  std::string name;
  std::string dtype_name;  // as the request spelled it
  int32_t dtype = 0;       // WSYNC_DTYPE_*
  std::vector<int64_t> shape;
};

// getattr(torch, s) for dtypes. Returns WSYNC_DTYPE_INVALID and sets *why when `s` is not a
// torch dtype name ("module 'torch' has no attribute 'torch.bfloat16'") or one wsync lacks.
int32_t torch_dtype(const std::string& s, std::string* why);
// str(torch.<dtype>): "torch.bfloat16".
std::string torch_dtype_repr(int32_t dtype);

// One zipped entry whose dtype may still be unresolved (dtype == 0, why set): engines resolve
// dtypes lazily, inside their receive loop.
struct RawTensor {
  TensorSpec spec;
  std::string dtype_error;  // getattr(torch, ..) failure, "" when resolved
};

// zip(names, dtypes, shapes) of already type-checked JSON arrays: truncated to the shortest list
// (Python's zip). *lengths_differ tells whether it truncated.
std::vector<RawTensor> zip_tensors(const cJSON* names, const cJSON* dtypes, const cJSON* shapes, bool* lengths_differ);

// The per-tensor receive path (torch.empty(shape, dtype=getattr(torch, d)) per tensor, in
// order): the first bad dtype or negative dimension fails it, in torch's words.
bool resolve_tensors(const std::vector<RawTensor>& raw, std::vector<TensorSpec>* out, std::string* err);

// "torch.Size([2, 3])" / "[2, 3]".
std::string torch_size_repr(const std::vector<int64_t>& shape);
std::string shape_list_repr(const std::vector<int64_t>& shape);

}  // namespace refeng
