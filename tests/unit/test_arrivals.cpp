// receiver/arrivals.h: which bytes of each tensor arrived in an update, and the messages that
// refuse a chunk (naming the tensor and both ranges).
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "receiver/arrivals.h"
#include "../common/manifest_entry.h"

namespace wsync {
namespace {

using test_manifest::entry;

// A chunk of tensor `name` (float32[256], 1024 bytes): `length` bytes at `offset`.
ManifestEntry chunk(const std::string& name, uint64_t offset, uint64_t length) {
  return entry(name, WSYNC_DTYPE_FLOAT32, {256}, 0, length, offset);
}

TEST(Arrivals, SplitTensorIsCompleteWhenItsChunksTileIt) {
  Arrivals a;
  ASSERT_EQ(WSYNC_OK, a.record(chunk("x", 0, 512)));
  EXPECT_FALSE(a.complete("x"));
  EXPECT_EQ("bytes [512, 1024)", a.missing("x"));
  ASSERT_EQ(WSYNC_OK, a.record(chunk("x", 512, 512)));
  EXPECT_TRUE(a.complete("x"));
  EXPECT_FALSE(a.complete("y"));
  EXPECT_EQ("all of its bytes", a.missing("y"));
}

TEST(Arrivals, TheSameHalfTwiceIsRefusedNamingTheTensorAndBothRanges) {
  Arrivals a;
  ASSERT_EQ(WSYNC_OK, a.record(chunk("x", 0, 512)));
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, a.check(chunk("x", 0, 512)));
  EXPECT_EQ("tensor 'x': chunk [0, 512) overlaps bytes [0, 512) already received in this update", last_error());
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, a.record(chunk("x", 0, 512)));
  EXPECT_FALSE(a.complete("x"));  // 512 + 512 bytes, but only the first half arrived
}

TEST(Arrivals, AChunkAfterTheTensorIsCompleteIsRefused) {
  Arrivals a;
  ASSERT_EQ(WSYNC_OK, a.record(chunk("x", 0, 1024)));  // whole
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, a.check(chunk("x", 256, 512)));
  EXPECT_EQ("tensor 'x': chunk [256, 768) overlaps bytes [0, 1024) already received in this update", last_error());
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, a.check(chunk("x", 0, 1024)));  // the whole tensor again
}

TEST(Arrivals, ChunksThatDisagreeOnTheSizeOrReachPastTheEndAreRefused) {
  Arrivals a;
  ASSERT_EQ(WSYNC_OK, a.record(chunk("x", 0, 512)));
  ManifestEntry other = entry("x", WSYNC_DTYPE_FLOAT32, {512}, 0, 512, 512);
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, a.check(other));
  EXPECT_NE(std::string::npos, last_error().find("tensor 'x': a chunk says it has 2048 bytes")) << last_error();
  ManifestEntry past = chunk("y", 768, 512);
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, a.check(past));
  EXPECT_EQ("tensor 'y': a chunk of 512 bytes at offset 768 reaches past its 1024 bytes", last_error());
  past.tensor_offset = 512;
  past.length = ~0ull - 100;  // offset + length wraps around
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, a.check(past));
  EXPECT_FALSE(a.complete("y"));
}

TEST(Arrivals, ClearForgetsTheUpdate) {
  Arrivals a;
  ASSERT_EQ(WSYNC_OK, a.record(chunk("x", 0, 1024)));
  a.clear();
  EXPECT_TRUE(a.empty());
  EXPECT_FALSE(a.complete("x"));
  EXPECT_EQ(WSYNC_OK, a.check(chunk("x", 0, 1024)));
}

}  // namespace
}  // namespace wsync
