// The digest of a tensor's bytes, wherever they are: XXH3-64 of host memory directly, of CUDA
// memory through the host in slices. What the sender vouches for in an elastic group (each tensor
// of each committed version) and what a joiner checks its catch-up against.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "wsync.h"

namespace wsync {

// XXH3-64 of `len` bytes at `data` (device_type WSYNC_DEVICE_CPU or WSYNC_DEVICE_CUDA on
// `device_index`). CUDA memory is copied to the host in 4 MiB slices on the default stream of
// that device (the caller's current device is restored). A failure names the CUDA error.
wsync_status_t tensor_digest(const void* data, uint64_t len, int32_t device_type, int32_t device_index, uint64_t* out);

// The same of the bytes of `runs` (offset, length from `data`) one after the other: the digest of
// a part of a tensor held in a larger buffer (many senders: a box inside the box a receiver holds).
wsync_status_t tensor_digest_runs(const void* data, const std::vector<std::pair<uint64_t, uint64_t>>& runs,
                                  int32_t device_type, int32_t device_index, uint64_t* out);

}  // namespace wsync
