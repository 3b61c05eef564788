// tensors.cpp — torch dtype names and the zip of an update request's lists (see tensors.h).
#include "tensors.h"

#include "wsync.h"

namespace refeng {
namespace {

struct DtypeName {
  const char* name;
  int32_t dtype;
};

// wsync's dtypes by torch's name (wsync.h's one table), then torch's aliases for them.
const DtypeName kTable[] = {
#define REFENG_DTYPE(code, name, size) {name, code},
    WSYNC_DTYPE_TABLE(REFENG_DTYPE)
#undef REFENG_DTYPE
    {"short", WSYNC_DTYPE_INT16}, {"int", WSYNC_DTYPE_INT32},   {"long", WSYNC_DTYPE_INT64},
    {"half", WSYNC_DTYPE_FLOAT16}, {"float", WSYNC_DTYPE_FLOAT32}, {"double", WSYNC_DTYPE_FLOAT64}};

}  // namespace

int32_t torch_dtype(const std::string& s, std::string* why) {
  for (const auto& e : kTable)
    if (s == e.name) return e.dtype;
  // torch dtypes that exist but that wsync does not carry.
  static const char* kTorchOnly[] = {"uint16", "uint32", "uint64", "complex32", "chalf", "complex64", "cfloat",
                                     "complex128", "cdouble", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                     "float8_e8m0fnu", "qint8", "quint8", "qint32", "quint4x2", "quint2x4"};
  for (const char* n : kTorchOnly)
    if (s == n) {
      *why = "dtype torch." + s + " is not supported by wsync-reference-engine";
      return WSYNC_DTYPE_INVALID;
    }
  *why = "module 'torch' has no attribute '" + s + "'";
  return WSYNC_DTYPE_INVALID;
}

std::string torch_dtype_repr(int32_t dtype) {
  for (const auto& e : kTable)  // the first spelling of each dtype is torch's canonical one
    if (e.dtype == dtype) return std::string("torch.") + e.name;
  return "torch.?";
}

std::string shape_list_repr(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string torch_size_repr(const std::vector<int64_t>& shape) { return "torch.Size(" + shape_list_repr(shape) + ")"; }

std::vector<RawTensor> zip_tensors(const cJSON* names, const cJSON* dtypes, const cJSON* shapes, bool* lengths_differ) {
  int n = cJSON_GetArraySize(names), d = cJSON_GetArraySize(dtypes), s = cJSON_GetArraySize(shapes);
  *lengths_differ = n != d || n != s;
  std::vector<RawTensor> out;
  const cJSON* a = names->child;
  const cJSON* b = dtypes->child;
  const cJSON* c = shapes->child;
  for (; a && b && c; a = a->next, b = b->next, c = c->next) {
    RawTensor t;
    t.spec.name = a->valuestring;
    t.spec.dtype_name = b->valuestring;
    t.spec.dtype = torch_dtype(t.spec.dtype_name, &t.dtype_error);
    for (const cJSON* x = c->child; x; x = x->next) {
      int64_t v = 0;
      json_int(x, &v);
      t.spec.shape.push_back(v);
    }
    out.push_back(std::move(t));
  }
  return out;
}

bool resolve_tensors(const std::vector<RawTensor>& raw, std::vector<TensorSpec>* out, std::string* err) {
  out->clear();
  for (const RawTensor& t : raw) {
    if (!t.dtype_error.empty()) { *err = t.dtype_error; return false; }
    for (int64_t v : t.spec.shape)
      if (v < 0) {  // torch.empty's own wording
        *err = "Trying to create tensor with negative dimension " + std::to_string(v) + ": " + shape_list_repr(t.spec.shape);
        return false;
      }
    if (t.spec.shape.size() > WSYNC_MAX_NDIM) {
      *err = "tensor '" + t.spec.name + "' has " + std::to_string(t.spec.shape.size()) +
             " dimensions; wsync carries at most " + std::to_string(WSYNC_MAX_NDIM);
      return false;
    }
    out->push_back(t.spec);
  }
  return true;
}

}  // namespace refeng
