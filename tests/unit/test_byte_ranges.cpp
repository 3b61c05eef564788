// common/byte_ranges.h: a tensor's received bytes as ranges. Complete means tiled exactly, never
// "the lengths add up"; overlaps and ranges past the end are refused without changing anything.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/byte_ranges.h"

namespace wsync {
namespace {

using Add = ByteRanges::Add;

std::vector<std::pair<uint64_t, uint64_t>> pairs(const ByteRanges& r) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const ByteRange& x : r.ranges()) out.emplace_back(x.begin, x.end);
  return out;
}

TEST(ByteRanges, TwoHalvesTileTheWhole) {
  ByteRanges r(1024);
  EXPECT_FALSE(r.complete());
  EXPECT_EQ(Add::kAdded, r.add(512, 512));
  EXPECT_FALSE(r.complete());
  EXPECT_EQ(Add::kAdded, r.add(0, 512));
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(1024u, r.held());
  EXPECT_EQ((std::vector<std::pair<uint64_t, uint64_t>>{{0, 1024}}), pairs(r));  // merged
}

TEST(ByteRanges, TheSameHalfTwiceIsAnOverlapNotAWhole) {
  ByteRanges r(1024);
  ASSERT_EQ(Add::kAdded, r.add(0, 512));
  ByteRange clash;
  EXPECT_EQ(Add::kOverlap, r.add(0, 512, &clash));
  EXPECT_EQ(0u, clash.begin);
  EXPECT_EQ(512u, clash.end);
  EXPECT_FALSE(r.complete());
  EXPECT_EQ(512u, r.held());
}

TEST(ByteRanges, PartialOverlapsOnEitherSideAreRefused) {
  ByteRanges r(1000);
  ASSERT_EQ(Add::kAdded, r.add(100, 100));  // [100, 200)
  ByteRange clash;
  EXPECT_EQ(Add::kOverlap, r.add(50, 51, &clash));  // ends inside
  EXPECT_EQ(100u, clash.begin);
  EXPECT_EQ(Add::kOverlap, r.add(199, 10, &clash));  // starts inside
  EXPECT_EQ(Add::kOverlap, r.add(0, 1000, &clash));  // contains it
  EXPECT_EQ(Add::kOverlap, r.add(120, 10, &clash));  // inside it
  EXPECT_EQ(Add::kAdded, r.add(0, 100));             // adjacent: fine
  EXPECT_EQ(Add::kAdded, r.add(200, 100));
  EXPECT_EQ((std::vector<std::pair<uint64_t, uint64_t>>{{0, 300}}), pairs(r));
}

TEST(ByteRanges, ARangeBetweenTwoMergesAllThree) {
  ByteRanges r(30);
  ASSERT_EQ(Add::kAdded, r.add(0, 10));
  ASSERT_EQ(Add::kAdded, r.add(20, 10));
  EXPECT_EQ(2u, r.ranges().size());
  EXPECT_EQ(10u, r.first_gap().begin);
  EXPECT_EQ(20u, r.first_gap().end);
  ASSERT_EQ(Add::kAdded, r.add(10, 10));
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(30u, r.first_gap().begin);
  EXPECT_EQ(30u, r.first_gap().end);
}

TEST(ByteRanges, RangesPastTheEndAreRefusedWithoutOverflow) {
  ByteRanges r(1024);
  EXPECT_EQ(Add::kOutOfBounds, r.add(1024, 1));
  EXPECT_EQ(Add::kOutOfBounds, r.add(1, 1024));
  EXPECT_EQ(Add::kOutOfBounds, r.add(1025, 0));
  EXPECT_EQ(Add::kOutOfBounds, r.add(512, UINT64_MAX - 100));  // 512 + that wraps to 411
  EXPECT_EQ(Add::kOutOfBounds, r.add(UINT64_MAX, 2));
  EXPECT_EQ(0u, r.held());
  ByteRanges huge(UINT64_MAX);
  EXPECT_EQ(Add::kAdded, huge.add(UINT64_MAX - 1, 1));
  EXPECT_EQ(Add::kOutOfBounds, huge.add(UINT64_MAX - 1, 2));
}

TEST(ByteRanges, EmptyRangesAndEmptyRegions) {
  ByteRanges r(8);
  EXPECT_EQ(Add::kAdded, r.add(8, 0));
  EXPECT_EQ(Add::kAdded, r.add(4, 0));
  EXPECT_FALSE(r.complete());  // an empty chunk covers nothing
  ASSERT_EQ(Add::kAdded, r.add(0, 8));
  EXPECT_EQ(Add::kAdded, r.add(4, 0));  // inside a held range, but holds no byte of it
  EXPECT_TRUE(r.complete());
  ByteRanges none(0);
  EXPECT_TRUE(none.complete());
  EXPECT_EQ(Add::kAdded, none.add(0, 0));
  EXPECT_EQ(Add::kOutOfBounds, none.add(0, 1));
}

TEST(ByteRanges, CheckChangesNothing) {
  ByteRanges r(16);
  EXPECT_EQ(Add::kAdded, r.check(0, 16));
  EXPECT_EQ(0u, r.held());
  EXPECT_FALSE(r.complete());
}

}  // namespace
}  // namespace wsync
