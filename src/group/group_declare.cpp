// The declared update (wsync_group_declare_update): the whole next update, said before its first
// batch. The caller's thread keeps it to check every batch and the finalize against it; the
// pipeline thread hands it to the engines' CHECK step when the update opens (open_update), before
// anything is paused or begun, so an engine can refuse a bad tensor with nothing touched.
#include "group/group_declare.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/names.h"
#include "group/group_mailbox.h"

namespace wsync {
namespace {

// The full tensor's shape of a descriptor: full_shape for a slice, else shape.
const int64_t* full_shape_of(const wsync_tensor_t& t) { return (t.flags & WSYNC_TENSOR_SLICE) ? t.full_shape : t.shape; }

std::string shape_text(int32_t ndim, const int64_t* shape) {
  std::string s = "[";
  for (int32_t d = 0; d < ndim; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

const char* dtype_text(int32_t dtype) {
  const char* n = wsync_dtype_name(dtype);
  return n != nullptr ? n : "an invalid dtype";
}

// One descriptor of the caller's array (stepped by the first one's struct_size), checked.
wsync_status_t read_one(const wsync_tensor_t* tensors, uint32_t stride, uint64_t i, wsync_tensor_t* out) {
  const wsync_tensor_t defaults = WSYNC_TENSOR_INIT;
  *out = defaults;
  std::memcpy(out, reinterpret_cast<const char*>(tensors) + i * stride, std::min<size_t>(stride, sizeof *out));
  if (out->struct_size != stride)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensors[%llu].struct_size is %u but tensors[0] has %u; all must be equal",
                static_cast<unsigned long long>(i), out->struct_size, stride);
  if (out->name == nullptr || out->name[0] == '\0')
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensors[%llu] has a NULL or empty name", static_cast<unsigned long long>(i));
  if (strnlen(out->name, kMaxTensorNameBytes + 1) > kMaxTensorNameBytes)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensors[%llu] has a name longer than %zu bytes",
                static_cast<unsigned long long>(i), kMaxTensorNameBytes);
  if (wsync_dtype_size(out->dtype) == 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' has invalid dtype %d", out->name, out->dtype);
  if (out->ndim < 0 || out->ndim > WSYNC_MAX_NDIM)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' has ndim %d (0..%d)", out->name, out->ndim, WSYNC_MAX_NDIM);
  if (stride < WSYNC_STRUCT_SIZE(wsync_tensor_t, flags)) out->flags = 0;
  const int64_t* full = full_shape_of(*out);
  for (int32_t d = 0; d < out->ndim; ++d)
    if (full[d] < 0)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' has a negative dimension %d (%lld)", out->name, d,
                  static_cast<long long>(full[d]));
  return WSYNC_OK;
}

}  // namespace

wsync_status_t group_declare_update(wsync_group_t* g, const wsync_tensor_t* tensors, uint64_t n) {
  wsync_status_t st = mailbox_check_usable(g);
  if (st != WSYNC_OK) return st;
  if (!g->caller.names_in_update.empty())
    return fail(WSYNC_ERR_INVALID_STATE, "wsync_group_declare_update: %zu tensor(s) of this update were already sent; "
                "declare an update before its first send_batch/send_start", g->caller.names_in_update.size());
  if (n > 0 && tensors == nullptr)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensors is NULL but num_tensors is %llu", static_cast<unsigned long long>(n));
  if (n > (1u << 24))
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%llu tensors in one declaration is more than the 16777216 allowed",
                static_cast<unsigned long long>(n));
  const uint32_t stride = n > 0 ? tensors[0].struct_size : 0;
  const size_t need = offsetof(wsync_tensor_t, shape) + sizeof(int64_t) * WSYNC_MAX_NDIM;
  if (n > 0 && stride < need)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensors[0].struct_size is %u, smaller than the %zu bytes of a "
                "wsync_tensor_t (initialise descriptors with WSYNC_TENSOR_INIT)", stride, need);
  auto d = std::make_shared<Declared>();
  d->names.reserve(n);
  d->tensors.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    wsync_tensor_t& t = d->tensors[i];
    if ((st = read_one(tensors, stride, i, &t)) != WSYNC_OK) return st;
    d->names.emplace_back(t.name);
    if (!d->index.emplace(d->names.back(), i).second)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' is declared twice", t.name);
    // The engines see whole tensors: the full shape, no slice.
    std::memcpy(t.shape, full_shape_of(t), sizeof t.shape);
    t.flags = 0;
    t.data = nullptr;
    t.nbytes = 0;
    t.struct_size = sizeof t;
    PlanEntry e;
    e.tensor_index = static_cast<uint32_t>(i);
    d->all.entries.push_back(e);
  }
  for (uint64_t i = 0; i < n; ++i) d->tensors[i].name = d->names[i].c_str();  // (after every emplace_back)
  g->declared.caller = d;
  std::lock_guard<std::mutex> lk(g->declared.mu);
  g->declared.for_engines = d;
  return WSYNC_OK;
}

wsync_status_t declared_check_batch(const wsync_group_t* g, const std::vector<wsync_tensor_t>& tensors) {
  const Declared* d = g->declared.caller.get();
  if (d == nullptr) return WSYNC_OK;
  for (const wsync_tensor_t& t : tensors) {
    auto it = d->index.find(t.name);
    if (it == d->index.end())
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' is not in the update declared with "
                  "wsync_group_declare_update (%zu tensors): send only declared tensors, or declare it", t.name,
                  d->tensors.size());
    const wsync_tensor_t& w = d->tensors[it->second];
    const int64_t* full = full_shape_of(t);
    if (t.dtype != w.dtype || t.ndim != w.ndim || std::memcmp(full, w.shape, sizeof(int64_t) * t.ndim) != 0)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' is sent as %s %s but was declared %s %s", t.name,
                  dtype_text(t.dtype), shape_text(t.ndim, full).c_str(), dtype_text(w.dtype),
                  shape_text(w.ndim, w.shape).c_str());
  }
  return WSYNC_OK;
}

wsync_status_t declared_check_finalize(const wsync_group_t* g) {
  const Declared* d = g->declared.caller.get();
  if (d == nullptr || g->shape.num_senders > 1) return WSYNC_OK;  // each sender sends only its part
  std::vector<const std::string*> missing;
  for (const std::string& n : d->names)
    if (!g->caller.names_in_update.count(n)) missing.push_back(&n);
  if (missing.empty()) return WSYNC_OK;
  std::string list;
  for (size_t i = 0; i < missing.size() && i < 5; ++i) list += (i ? ", '" : "'") + *missing[i] + "'";
  if (missing.size() > 5) list += ", ...";
  return fail(WSYNC_ERR_INVALID_ARGUMENT, "wsync_group_finalize: %zu declared tensor(s) were not sent in this update "
              "(%s): send them, then finalize", missing.size(), list.c_str());
}

void declared_update_ended(wsync_group_t* g) { g->declared.caller.reset(); }

std::shared_ptr<const Declared> declared_take_for_engines(wsync_group_t* g) {
  std::lock_guard<std::mutex> lk(g->declared.mu);
  std::shared_ptr<const Declared> d = std::move(g->declared.for_engines);
  g->declared.for_engines.reset();
  return d;
}

}  // namespace wsync
