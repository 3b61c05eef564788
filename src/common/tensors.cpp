#include "common/tensors.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace wsync {

wsync_status_t copy_tensor_descs(const wsync_tensor_t* tensors, uint64_t count, const char* what,
                                 std::vector<wsync_tensor_t>* out) {
  out->clear();
  if (count == 0) return WSYNC_OK;
  if (tensors == nullptr)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s is NULL but its count is %llu", what,
                static_cast<unsigned long long>(count));
  if (count > (1u << 24))
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%llu %s in one call is more than the 16777216 allowed",
                static_cast<unsigned long long>(count), what);
  const uint32_t stride = tensors[0].struct_size;
  const size_t need = offsetof(wsync_tensor_t, shape) + sizeof(int64_t) * WSYNC_MAX_NDIM;
  if (stride < need)
    return fail(WSYNC_ERR_INVALID_ARGUMENT,
                "%s[0].struct_size is %u, smaller than the %zu bytes of a wsync_tensor_t "
                "(initialise descriptors with WSYNC_TENSOR_INIT)", what, stride, need);
  out->resize(count);
  const char* base = reinterpret_cast<const char*>(tensors);
  for (uint64_t i = 0; i < count; ++i) {
    wsync_tensor_t& t = (*out)[i];
    // A caller built against an older header passes a shorter struct: the fields it does not know
    // keep their defaults (flags 0, a whole tensor); a newer, longer one has its tail ignored.
    const wsync_tensor_t defaults = WSYNC_TENSOR_INIT;
    t = defaults;
    std::memcpy(&t, base + i * stride, std::min<size_t>(stride, sizeof t));
    if (t.struct_size != stride)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s[%llu].struct_size is %u but %s[0] has %u; all must be equal",
                  what, static_cast<unsigned long long>(i), t.struct_size, what, stride);
    if (t.name == nullptr || t.name[0] == '\0')
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s[%llu] has a NULL or empty name", what,
                  static_cast<unsigned long long>(i));
    if (t.data == nullptr && t.nbytes != 0)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' has %llu bytes but a NULL data pointer", t.name,
                  static_cast<unsigned long long>(t.nbytes));
    if (t.device_type == 0) t.device_type = WSYNC_DEVICE_CPU;
    if (t.device_type == WSYNC_DEVICE_CUDA && (t.device_index < 0 || t.device_index > 1023))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' has CUDA device_index %d", t.name, t.device_index);
    if (t.device_type != WSYNC_DEVICE_CPU && t.device_type != WSYNC_DEVICE_CUDA)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' has unknown device_type %d", t.name, t.device_type);
    t.struct_size = sizeof t;
  }
  return WSYNC_OK;
}

}  // namespace wsync
