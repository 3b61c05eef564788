#include "common/pieces.h"

#include <algorithm>

namespace wsync {

std::vector<Piece> cut_pieces(uint64_t bytes, uint64_t piece_bytes) {
  std::vector<Piece> out;
  if (bytes == 0) return out;
  const uint64_t step = piece_bytes == 0 ? bytes : piece_bytes;
  out.reserve(static_cast<size_t>((bytes + step - 1) / step));
  for (uint64_t off = 0; off < bytes; off += step) out.push_back(Piece{off, std::min(step, bytes - off)});
  return out;
}

std::vector<wsync_iov_t> slice_iov(const std::vector<wsync_iov_t>& iov, uint64_t offset, uint64_t len) {
  std::vector<wsync_iov_t> out;
  const uint64_t end = offset + len;
  uint64_t at = 0;  // where the current region starts in the bucket
  for (const wsync_iov_t& r : iov) {
    const uint64_t r_end = at + r.len;
    if (r_end > offset && at < end) {
      const uint64_t from = std::max(at, offset), to = std::min(r_end, end);
      out.push_back(wsync_iov_t{static_cast<uint8_t*>(r.base) + (from - at), to - from});
    }
    if (r_end >= end) break;
    at = r_end;
  }
  return out;
}

}  // namespace wsync
