// A bucket on the wire as pieces: transport messages of at most piece_bytes (the last one
// shorter), with consecutive sequence numbers from the bucket's own. Pieces let the receiver hash
// (and, later, a relay forward) what landed while the rest is still moving. One piece per bucket
// when piece_bytes is 0 or the transport cannot keep several messages apart (CAP_PIECES).
#pragma once

#include <cstdint>
#include <vector>

#include "wsync_plugin.h"

namespace wsync {

struct Piece {
  uint64_t offset = 0;  // in the bucket
  uint64_t len = 0;
};

// The pieces of a bucket of `bytes` (none for an empty bucket; one when piece_bytes is 0).
std::vector<Piece> cut_pieces(uint64_t bytes, uint64_t piece_bytes);

// The regions of `iov` (which lays out a bucket in order) that hold bytes [offset, offset + len).
std::vector<wsync_iov_t> slice_iov(const std::vector<wsync_iov_t>& iov, uint64_t offset, uint64_t len);

}  // namespace wsync
