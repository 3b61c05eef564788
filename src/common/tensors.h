// Reading the caller's tensor descriptor arrays (stepped by the first element's struct_size).
#pragma once

#include <vector>

#include "wsync.h"

namespace wsync {

// Copy `count` descriptors into `out`, refusing NULL names, NULL data with bytes, device types
// this build cannot move, and struct sizes too small to hold the fields. `what` names the
// array in messages ("tensors", "buffers").
wsync_status_t copy_tensor_descs(const wsync_tensor_t* tensors, uint64_t count, const char* what,
                                 std::vector<wsync_tensor_t>* out);

}  // namespace wsync
