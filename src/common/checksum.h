// The core's checksum of a byte range: XXH3-64, seed 0. It closes every versioned record the core
// writes (the native manifest, the many-sender ownership records) and is the digest of an ownership
// plan; one function, so a record written by one part is checked by another with the same hash.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wsync {

// XXH3-64 of `len` bytes (seed 0). `data` may be NULL when len is 0.
uint64_t checksum64(const void* data, size_t len);

}  // namespace wsync
