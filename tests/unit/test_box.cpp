// Boxes: torch.chunk's rounding, bounds that refuse hostile values without overflow, and byte
// runs checked element by element (a buffer of element ids, packed out of one box and compared
// with the ids the box must hold) on hand-worked and random boxes.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "planner/box.h"

namespace wsync {
namespace {

Box box(std::vector<int64_t> off, std::vector<int64_t> ext) {
  Box b;
  b.ndim = static_cast<int32_t>(off.size());
  for (size_t i = 0; i < off.size(); ++i) {
    b.offset[i] = off[i];
    b.extent[i] = ext[i];
  }
  return b;
}

std::vector<int64_t> chunk_rows(int64_t n, uint32_t chunks) {
  std::vector<int64_t> rows;
  const int64_t shape[2] = {n, 4};
  for (uint32_t i = 0; i < chunks; ++i) {
    Box b;
    EXPECT_EQ(WSYNC_OK, chunk_box(2, shape, 0, chunks, i, &b)) << last_error();
    EXPECT_EQ(b.extent[1], 4);
    rows.push_back(b.extent[0]);
  }
  return rows;
}

// torch.chunk (and DTensor's Shard): ceil(n / chunks) per chunk, the rest in the last, empty after.
TEST(Box, ChunkRoundsAsTorchChunk) {
  EXPECT_EQ(chunk_rows(10, 4), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(chunk_rows(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(chunk_rows(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(chunk_rows(5, 3), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(chunk_rows(0, 2), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(chunk_rows(7, 1), (std::vector<int64_t>{7}));
  const int64_t shape[2] = {2, 4};
  Box b;
  ASSERT_EQ(WSYNC_OK, chunk_box(2, shape, 0, 4, 3, &b));
  EXPECT_EQ(b.offset[0], 2);  // an empty chunk sits at the end, inside the tensor
  const int64_t cols[2] = {3, 10};
  ASSERT_EQ(WSYNC_OK, chunk_box(2, cols, 1, 4, 2, &b));
  EXPECT_EQ(box_str(b), "[0:3, 6:9]");
}

TEST(Box, ChunkRefusesBadArgumentsNamingThem) {
  const int64_t shape[2] = {10, 4}, neg[2] = {-1, 4};
  Box b;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, chunk_box(2, shape, 2, 4, 0, &b));
  EXPECT_NE(std::string::npos, last_error().find("dimension 2")) << last_error();
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, chunk_box(2, shape, 0, 0, 0, &b));
  EXPECT_NE(std::string::npos, last_error().find("0 chunks")) << last_error();
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, chunk_box(2, shape, 0, 4, 4, &b));
  EXPECT_NE(std::string::npos, last_error().find("chunk 4 of 4")) << last_error();
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, chunk_box(2, neg, 0, 4, 0, &b));
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, chunk_box(0, shape, 0, 1, 0, &b));
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, chunk_box(9, shape, 0, 1, 0, &b));
}

TEST(Box, WithinRefusesHostileValuesWithoutOverflow) {
  const int64_t shape[2] = {10, 4};
  std::string why;
  EXPECT_TRUE(box_within(box({3, 0}, {7, 4}), 2, shape, &why)) << why;
  EXPECT_FALSE(box_within(box({3, 0}, {8, 4}), 2, shape, &why));
  EXPECT_NE(std::string::npos, why.find("dimension 0")) << why;
  EXPECT_FALSE(box_within(box({INT64_MAX, 0}, {1, 4}), 2, shape, &why));
  EXPECT_FALSE(box_within(box({1, 0}, {INT64_MAX, 4}), 2, shape, &why));
  EXPECT_FALSE(box_within(box({-1, 0}, {2, 4}), 2, shape, &why));
  EXPECT_FALSE(box_within(box({0, 0}, {-2, 4}), 2, shape, &why));
  EXPECT_FALSE(box_within(box({0}, {10}), 2, shape, &why));
  Box wild;
  wild.ndim = 100;  // from the wire: nothing reads past the arrays
  EXPECT_FALSE(box_within(wild, 2, shape, &why));
  EXPECT_EQ("(a box of 100 dimensions)", box_str(wild));
  int64_t n = 0;
  EXPECT_FALSE(box_elements(wild, &n));
  EXPECT_FALSE(box_elements(box({0, 0, 0}, {INT64_MAX, 4, 4}), &n));
}

TEST(Box, IntersectAndEqual) {
  Box c;
  ASSERT_TRUE(box_intersect(box({0, 0}, {5, 4}), box({3, 2}, {7, 2}), &c));
  EXPECT_EQ("[3:5, 2:4]", box_str(c));
  EXPECT_FALSE(box_intersect(box({0, 0}, {3, 4}), box({3, 0}, {7, 4}), &c));  // touching is not common
  EXPECT_FALSE(box_intersect(box({0}, {3}), box({0, 0}, {3, 4}), &c));
  EXPECT_TRUE(box_equal(box({1, 2}, {3, 4}), box({1, 2}, {3, 4})));
  EXPECT_FALSE(box_equal(box({1, 2}, {3, 4}), box({1, 2}, {3, 5})));
}

// The element ids a box holds, in its own row-major order, in a tensor of `outer` whose element
// at (i0, i1, ...) has the id of its row-major position in the full tensor `full`.
std::vector<uint32_t> ids_of(const Box& inner, const Box& full) {
  std::vector<uint32_t> ids;
  int64_t n = 0;
  box_elements(inner, &n);
  std::vector<int64_t> idx(inner.ndim, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t id = 0;
    for (int32_t i = 0; i < inner.ndim; ++i) id = id * full.extent[i] + inner.offset[i] + idx[i];
    ids.push_back(static_cast<uint32_t>(id));
    for (int32_t i = inner.ndim - 1; i >= 0; --i) {
      if (++idx[i] < inner.extent[i]) break;
      idx[i] = 0;
    }
  }
  return ids;
}

// Packs `inner` out of a buffer holding `outer` (ids as above) with box_runs.
std::vector<uint32_t> pack(const Box& inner, const Box& outer, const Box& full) {
  const std::vector<uint32_t> buffer = ids_of(outer, full);
  std::vector<ByteRun> runs;
  EXPECT_EQ(WSYNC_OK, box_runs(inner, outer, sizeof(uint32_t), &runs)) << last_error();
  std::vector<uint32_t> out;
  for (const ByteRun& r : runs) {
    EXPECT_EQ(0u, r.offset % 4);
    EXPECT_LE(r.offset + r.length, buffer.size() * 4);
    const size_t first = r.offset / 4;
    out.insert(out.end(), buffer.begin() + first, buffer.begin() + first + r.length / 4);
  }
  return out;
}

TEST(Box, RunsOfHandWorkedBoxes) {
  const Box full = box({0, 0}, {4, 6});
  std::vector<ByteRun> runs;
  ASSERT_EQ(WSYNC_OK, box_runs(full, full, 2, &runs));
  ASSERT_EQ(1u, runs.size());
  EXPECT_EQ(48u, runs[0].length);
  ASSERT_EQ(WSYNC_OK, box_runs(box({1, 0}, {2, 6}), full, 2, &runs));  // a slab of rows: one run
  ASSERT_EQ(1u, runs.size());
  EXPECT_EQ(12u, runs[0].offset);
  EXPECT_EQ(24u, runs[0].length);
  ASSERT_EQ(WSYNC_OK, box_runs(box({0, 2}, {4, 2}), full, 2, &runs));  // columns: a run per row
  ASSERT_EQ(4u, runs.size());
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ((r * 6 + 2) * 2, runs[r].offset);
    EXPECT_EQ(4u, runs[r].length);
  }
  ASSERT_EQ(WSYNC_OK, box_runs(box({0, 0}, {0, 6}), full, 2, &runs));  // empty: nothing to move
  EXPECT_TRUE(runs.empty());
  Box scalar;
  ASSERT_EQ(WSYNC_OK, box_runs(scalar, scalar, 8, &runs));
  ASSERT_EQ(1u, runs.size());
  EXPECT_EQ(8u, runs[0].length);
  EXPECT_EQ(pack(box({1, 3}, {2, 2}), box({1, 2}, {3, 4}), full), (std::vector<uint32_t>{9, 10, 15, 16}));
}

TEST(Box, RunsRefuseABoxOutsideItsBufferAndTooManyRuns) {
  std::vector<ByteRun> runs;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_runs(box({0, 0}, {5, 6}), box({0, 0}, {4, 6}), 2, &runs));
  EXPECT_NE(std::string::npos, last_error().find("not inside")) << last_error();
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_runs(box({0, 0}, {4, 6}), box({1, 0}, {4, 6}), 2, &runs));
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_runs(box({0, 0}, {4, 6}), box({0, 0}, {4, 6}), 0, &runs));
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_runs(box({0}, {4}), box({0, 0}, {4, 6}), 2, &runs));
  // One column of a very tall matrix: a run per row, 2^25 of them, is refused, not allocated.
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_runs(box({0, 0}, {1 << 25, 1}), box({0, 0}, {1 << 25, 2}), 2, &runs));
  EXPECT_NE(std::string::npos, last_error().find("runs")) << last_error();
  EXPECT_TRUE(runs.empty());
  // A byte count past int64 is refused before any arithmetic on it.
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT,
            box_runs(box({0, 0}, {1, 1}), box({0, 0}, {INT64_MAX / 2, 4}), 8, &runs));
}

// Random tensors, random outer boxes and random boxes inside them: the packed ids are exactly the
// ids the inner box holds, in its row-major order.
TEST(Box, RunsPackEveryElementOfRandomBoxes) {
  std::mt19937 rng(20261126);
  for (int iter = 0; iter < 2000; ++iter) {
    const int32_t nd = static_cast<int32_t>(rng() % 4) + 1;
    Box full;
    full.ndim = nd;
    for (int32_t i = 0; i < nd; ++i) full.extent[i] = static_cast<int64_t>(rng() % 6) + 1;
    Box outer, inner;
    outer.ndim = inner.ndim = nd;
    for (int32_t i = 0; i < nd; ++i) {
      outer.offset[i] = static_cast<int64_t>(rng() % full.extent[i]);
      outer.extent[i] = static_cast<int64_t>(rng() % (full.extent[i] - outer.offset[i])) + 1;
      inner.offset[i] = outer.offset[i] + static_cast<int64_t>(rng() % outer.extent[i]);
      inner.extent[i] = static_cast<int64_t>(rng() % (outer.offset[i] + outer.extent[i] - inner.offset[i])) + 1;
    }
    ASSERT_EQ(ids_of(inner, full), pack(inner, outer, full))
        << "inner " << box_str(inner) << " outer " << box_str(outer) << " full " << box_str(full);
  }
}

}  // namespace
}  // namespace wsync

namespace wsync {
namespace {

// A box cut into chunks of its packed bytes at random places: each chunk's window scatters exactly
// the elements of that part of the box, in order.
TEST(Box, PackedWindowsCoverTheBoxInOrder) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 500; ++iter) {
    const Box full = box({0, 0, 0}, {static_cast<int64_t>(1 + rng() % 5), static_cast<int64_t>(1 + rng() % 5),
                                     static_cast<int64_t>(1 + rng() % 5)});
    Box inner;
    inner.ndim = 3;
    for (int32_t i = 0; i < 3; ++i) {
      inner.offset[i] = static_cast<int64_t>(rng() % full.extent[i]);
      inner.extent[i] = static_cast<int64_t>(1 + rng() % (full.extent[i] - inner.offset[i]));
    }
    const std::vector<uint32_t> buffer = ids_of(full, full), want = ids_of(inner, full);
    const uint64_t bytes = want.size() * 4;
    std::vector<uint32_t> got;
    for (uint64_t at = 0; at < bytes;) {
      const uint64_t end = std::min<uint64_t>(bytes, at + 4 * (1 + rng() % 7));
      std::vector<ByteRun> w;
      ASSERT_EQ(WSYNC_OK, box_window(inner, full, 4, at, end, 1000, &w)) << last_error();
      uint64_t n = 0;
      for (const ByteRun& r : w) {
        n += r.length;
        for (uint64_t k = r.offset / 4; k < (r.offset + r.length) / 4; ++k) got.push_back(buffer[k]);
      }
      ASSERT_EQ(end - at, n);
      at = end;
    }
    ASSERT_EQ(want, got) << box_str(inner) << " of " << box_str(full);
  }
  std::vector<ByteRun> w;
  const Box rows = box({0, 0}, {4, 6}), cols = box({0, 2}, {4, 2});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_window(cols, rows, 2, 4, 17, 100, &w));  // past its 16 bytes
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_window(cols, rows, 2, 5, 4, 100, &w));
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_window(cols, rows, 2, 0, 16, 3, &w));  // 4 runs, 3 allowed
  ASSERT_EQ(WSYNC_OK, box_window(cols, rows, 2, 2, 10, 100, &w));
  ASSERT_EQ(3u, w.size());  // the end of row 0's part, row 1's, the start of row 2's
  EXPECT_EQ(6u, w[0].offset);
  EXPECT_EQ(2u, w[0].length);
  EXPECT_EQ(16u, w[1].offset);
  EXPECT_EQ(28u, w[2].offset);
  EXPECT_EQ(2u, w[2].length);
}

// Found in review: placing 4 bytes of a forged column box of a tall matrix built every row's run
// first (16 M of them, half a second per manifest entry). A window costs only its own runs now.
TEST(Box, AWindowOfAHugeColumnBoxCostsOnlyItsRuns) {
  const Box tall = box({0, 0}, {int64_t{1} << 40, 2}), column = box({0, 1}, {int64_t{1} << 40, 1});
  std::vector<ByteRun> w;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, box_runs(column, tall, 4, &w));  // every run: too many
  ASSERT_EQ(WSYNC_OK, box_window(column, tall, 4, 4, 8, 1, &w)) << last_error();
  ASSERT_EQ(1u, w.size());
  EXPECT_EQ(12u, w[0].offset);  // row 1's second element
  EXPECT_EQ(4u, w[0].length);
  ASSERT_EQ(WSYNC_OK, box_window(column, tall, 4, (uint64_t{1} << 42) - 4, uint64_t{1} << 42, 1, &w));
  EXPECT_EQ((uint64_t{1} << 43) - 4, w[0].offset);  // the last row's
}

// chunk_box's begin = size * index overflowed int64 for a huge dimension and ~2^32 chunks.
TEST(Box, ChunkOfAHugeDimensionDoesNotOverflow) {
  const int64_t shape[1] = {INT64_MAX};
  Box b;
  ASSERT_EQ(WSYNC_OK, chunk_box(1, shape, 0, 4294967294u, 4294967293u, &b)) << last_error();
  EXPECT_EQ(INT64_MAX, b.offset[0]);  // past the end: empty, at the end
  EXPECT_EQ(0, b.extent[0]);
  for (uint32_t k : {0u, 1u, 4294967293u}) {
    ASSERT_EQ(WSYNC_OK, chunk_box(1, shape, 0, 4294967294u, k, &b));
    EXPECT_GE(b.offset[0], 0);
    EXPECT_LE(b.offset[0], INT64_MAX - b.extent[0]);
  }
}

}  // namespace
}  // namespace wsync

namespace wsync {
namespace {

// Found by fuzz.manifest: a hostile box printed in a refusal overflowed offset + extent.
TEST(Box, HostileBoxesPrintAndIntersectWithoutOverflow) {
  const Box b = box({INT64_MAX - 1, 0}, {INT64_MAX, 4});
  EXPECT_EQ("[9223372036854775806:9223372036854775806+9223372036854775807, 0:4]", box_str(b));
  Box c;
  EXPECT_TRUE(box_intersect(b, box({INT64_MAX - 1, 0}, {1, 4}), &c));
  EXPECT_EQ("[9223372036854775806:9223372036854775807, 0:4]", box_str(c));
}

}  // namespace
}  // namespace wsync
