// A bucket cut into pieces, and the receive regions of each piece (common/pieces.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/pieces.h"

namespace wsync {
namespace {

TEST(Pieces, CutsTheBucketIntoPiecesThatTileIt) {
  EXPECT_TRUE(cut_pieces(0, 4096).empty());
  const std::vector<Piece> one = cut_pieces(1000, 0);
  ASSERT_EQ(1u, one.size());
  EXPECT_EQ(0u, one[0].offset);
  EXPECT_EQ(1000u, one[0].len);
  for (uint64_t bytes : {1ull, 4095ull, 4096ull, 4097ull, 10000ull, (1ull << 20) + 3}) {
    const std::vector<Piece> p = cut_pieces(bytes, 4096);
    ASSERT_EQ((bytes + 4095) / 4096, p.size()) << bytes;
    uint64_t at = 0;
    for (const Piece& x : p) {
      EXPECT_EQ(at, x.offset);
      EXPECT_GT(x.len, 0u);
      EXPECT_LE(x.len, 4096u);
      at += x.len;
    }
    EXPECT_EQ(bytes, at);
  }
}

TEST(Pieces, SlicesRegionsAtPieceBoundaries) {
  std::vector<uint8_t> a(100), b(50), c(200);
  const std::vector<wsync_iov_t> iov = {{a.data(), 100}, {b.data(), 50}, {c.data(), 200}};
  // Every byte of the bucket, sliced by pieces of 64, lands where the whole iov puts it, once.
  std::vector<const uint8_t*> where;
  for (const Piece& p : cut_pieces(350, 64)) {
    uint64_t got = 0;
    for (const wsync_iov_t& r : slice_iov(iov, p.offset, p.len)) {
      EXPECT_GT(r.len, 0u);
      for (uint64_t i = 0; i < r.len; ++i) where.push_back(static_cast<const uint8_t*>(r.base) + i);
      got += r.len;
    }
    EXPECT_EQ(p.len, got);
  }
  ASSERT_EQ(350u, where.size());
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(a.data() + i, where[i]);
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(b.data() + i, where[100 + i]);
  for (size_t i = 0; i < 200; ++i) EXPECT_EQ(c.data() + i, where[150 + i]);
  // A slice inside one region, and one that spans all three.
  const std::vector<wsync_iov_t> inner = slice_iov(iov, 110, 20);
  ASSERT_EQ(1u, inner.size());
  EXPECT_EQ(b.data() + 10, inner[0].base);
  EXPECT_EQ(3u, slice_iov(iov, 90, 100).size());
  EXPECT_TRUE(slice_iov(iov, 350, 0).empty());
}

}  // namespace
}  // namespace wsync
