// The byte size a dtype and a shape describe, computed without overflow: the one rule the bucket
// planner checks a caller's descriptor with and the manifest decoder checks an entry from the wire
// with, so both sides agree on what a shape holds.
#pragma once

#include <cstdint>

namespace wsync {

// The number of bytes `dtype`/`shape` describe, or false when a dim is negative, ndim is out of
// range, the dtype is unknown or the product overflows uint64. A zero dim makes 0 bytes whatever
// the other dims are. `shape` may be NULL when ndim is 0.
bool shape_nbytes(int32_t dtype, int32_t ndim, const int64_t* shape, uint64_t* out);

}  // namespace wsync
