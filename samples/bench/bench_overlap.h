// wsync-bench's overlap row (bench_overlap.cpp): a trainer-like loop, blocking against
// send_start/send_wait.
#pragma once

#include <cstdint>
#include <string>

namespace bench {

// Prints one row and returns blocking time over overlapped time (0 on failure).
double overlap_row(const std::string& tls, size_t layers, uint64_t layer_mib, int repeat);

}  // namespace bench
