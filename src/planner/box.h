// A box: the slice of a tensor that one member owns (a sender) or needs (a receiver), as an
// offset and an extent per dimension of the full tensor, row-major. A full tensor is one box. A
// box's bytes on the wire are its elements in row-major order of the box itself, so a sender packs
// any box out of the buffer it holds and a receiver scatters it into the buffer it holds, each
// with the byte runs below, and neither needs the other's layout.
//
// Pure functions, no sockets: every input may come from the wire or a user, so each is checked
// (ranks, dims, offsets, extents, overflow of every product) before it is used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wsync.h"

namespace wsync {

struct Box {
  int32_t ndim = 0;
  int64_t offset[WSYNC_MAX_NDIM] = {0};
  int64_t extent[WSYNC_MAX_NDIM] = {0};
};

// One contiguous run of bytes: where it starts in a buffer, and how long it is.
struct ByteRun {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// The whole tensor of `shape` as a box.
Box full_box(int32_t ndim, const int64_t* shape);

// torch.chunk's split of dimension `dim` into `chunks`: every chunk but the last has
// ceil(shape[dim] / chunks) rows and the last what is left, so 10 rows over 4 are 3, 3, 3, 1 and
// chunks past the end are empty (DTensor's Shard(dim) pads them; 2 rows over 4 are 1, 1, 0, 0).
// Chunk `index` (0-based) as a box of the full tensor. INVALID_ARGUMENT (the message names the
// argument) for ndim outside 0..8, dim outside [0, ndim), chunks 0, index >= chunks or a negative
// dimension.
wsync_status_t chunk_box(int32_t ndim, const int64_t* shape, int32_t dim, uint32_t chunks, uint32_t index,
                         Box* out);

// Elements in the box (0 for an empty one); false when the count overflows int64.
bool box_elements(const Box& b, int64_t* out);

// Is `b` a box of a tensor of `shape` (same ndim, 0 <= offset, 0 <= extent, offset + extent <=
// dim, no overflow)? On false *why says which dimension and how, for a message.
bool box_within(const Box& b, int32_t ndim, const int64_t* shape, std::string* why);

// The common part of two boxes of one tensor; false when it is empty (also for ndim mismatch).
bool box_intersect(const Box& a, const Box& b, Box* out);

bool box_equal(const Box& a, const Box& b);

// "[0:3, 0:4]": offset:end per dimension, as messages print a box.
std::string box_str(const Box& b);

// The bytes of `inner`, in its own row-major order, inside a buffer that holds the box `outer`
// row-major (elem_size bytes per element): a list of runs, adjacent ones merged, in the order the
// elements of `inner` come. `inner` must lie inside `outer` (INVALID_ARGUMENT otherwise, and for
// elem_size 0 or an overflow). Concatenating the runs of a sender's packing and scattering them
// over a receiver's runs of the same inner box moves every element to its place.
wsync_status_t box_runs(const Box& inner, const Box& outer, uint32_t elem_size, std::vector<ByteRun>* out);

// The runs that packed bytes [begin, end) of `inner` (its elements in its own row-major order)
// land in, inside a buffer that holds `outer`: a box cut across buckets arrives as such windows.
// Computed from the window alone (run k of a box starts at packed byte k * run length), so a
// chunk of 4 bytes of a column of a tall matrix costs a run or two, not the list of every row's.
// INVALID_ARGUMENT for a window past the box's bytes, for the cases box_runs refuses, and when the
// window would need more than max_runs runs.
wsync_status_t box_window(const Box& inner, const Box& outer, uint32_t elem_size, uint64_t begin, uint64_t end,
                          uint64_t max_runs, std::vector<ByteRun>* out);

}  // namespace wsync
