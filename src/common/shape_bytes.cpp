// A shape's byte size (see common/shape_bytes.h).
#include "common/shape_bytes.h"

#include "wsync.h"

namespace wsync {

bool shape_nbytes(int32_t dtype, int32_t ndim, const int64_t* shape, uint64_t* out) {
  const uint64_t esize = wsync_dtype_size(dtype);
  if (esize == 0 || ndim < 0 || ndim > WSYNC_MAX_NDIM) return false;
  if (ndim > 0 && shape == nullptr) return false;
  bool any_zero = false;
  for (int32_t d = 0; d < ndim; ++d) {
    if (shape[d] < 0) return false;
    if (shape[d] == 0) any_zero = true;
  }
  // A zero dim makes the tensor empty whatever the other dims are; checking it first keeps
  // [2^40, 2^40, 0] from being refused as an overflow.
  if (any_zero) {
    *out = 0;
    return true;
  }
  uint64_t product = esize;
  for (int32_t d = 0; d < ndim; ++d) {
    if (__builtin_mul_overflow(product, static_cast<uint64_t>(shape[d]), &product)) return false;
  }
  *out = product;
  return true;
}

}  // namespace wsync
