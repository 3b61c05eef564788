// The bucket planner: every layout rule's cut points, padding and splits, checked on hand-worked
// examples, against invariants on random batches, and (for vLLM packed) against a line-by-line
// model of vLLM's own consumer.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "planner/bucket_planner.h"

namespace wsync {
namespace {

// Largest bucket payload of a plan: what staging must hold.
uint64_t plan_max_bucket_bytes(const std::vector<PlanBucket>& buckets) {
  uint64_t most = 0;
  for (const auto& b : buckets) most = b.bytes > most ? b.bytes : most;
  return most;
}


PlanTensor T(const std::string& name, int32_t dtype, std::initializer_list<int64_t> shape) {
  PlanTensor t;
  t.name = name;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  int i = 0;
  uint64_t n = wsync_dtype_size(dtype);
  for (int64_t d : shape) {
    t.shape[i++] = d;
    n *= static_cast<uint64_t>(d);
  }
  t.nbytes = n;
  return t;
}

// A 1-D tensor of `bytes` bytes of dtype (bytes must be a multiple of its size).
PlanTensor B(const std::string& name, uint64_t bytes, int32_t dtype = WSYNC_DTYPE_UINT8) {
  return T(name, dtype, {static_cast<int64_t>(bytes / wsync_dtype_size(dtype))});
}

LayoutRule Rule(int32_t kind, uint64_t bucket_bytes, uint32_t alignment = 1, bool split = false) {
  LayoutRule r;
  r.kind = kind;
  r.bucket_bytes = bucket_bytes;
  r.alignment = alignment;
  r.allow_split = split;
  return r;
}

struct E {
  uint32_t t;
  uint64_t off, len, toff;
};

void ExpectBucket(const PlanBucket& b, std::initializer_list<E> want, uint64_t bytes) {
  ASSERT_EQ(b.entries.size(), want.size());
  size_t i = 0;
  for (const E& w : want) {
    const PlanEntry& e = b.entries[i++];
    EXPECT_EQ(e.tensor_index, w.t) << "entry " << i - 1;
    EXPECT_EQ(e.bucket_offset, w.off) << "entry " << i - 1;
    EXPECT_EQ(e.length, w.len) << "entry " << i - 1;
    EXPECT_EQ(e.tensor_offset, w.toff) << "entry " << i - 1;
  }
  EXPECT_EQ(b.bytes, bytes);
}

std::vector<PlanBucket> Plan(const LayoutRule& rule, const std::vector<PlanTensor>& ts) {
  std::vector<PlanBucket> out;
  wsync_status_t st = plan_buckets(rule, ts, &out);
  EXPECT_EQ(st, WSYNC_OK) << last_error();
  return out;
}

// What every plan must satisfy, whatever the rule.
void CheckInvariants(const LayoutRule& rule, const std::vector<PlanTensor>& ts, const std::vector<PlanBucket>& bs) {
  if (ts.empty()) {
    EXPECT_TRUE(bs.empty());
    return;
  }
  uint32_t next_tensor = 0;
  uint64_t next_toff = 0;
  for (size_t bi = 0; bi < bs.size(); ++bi) {
    const PlanBucket& b = bs[bi];
    ASSERT_FALSE(b.entries.empty()) << "bucket " << bi;
    uint64_t end = 0;
    uint64_t payload_before_last = 0;
    size_t nonempty = 0;
    for (const PlanEntry& e : b.entries) {
      // Caller order, each tensor exactly once, chunks contiguous in the tensor.
      if (next_toff == 0) {
        ASSERT_EQ(e.tensor_index, next_tensor) << "bucket " << bi;
      } else {
        ASSERT_EQ(e.tensor_index, next_tensor - 1) << "bucket " << bi << ": split tensor interrupted";
      }
      const PlanTensor& t = ts[e.tensor_index];
      const uint64_t esize = wsync_dtype_size(t.dtype);
      EXPECT_EQ(e.tensor_offset, next_toff);
      EXPECT_EQ(e.length % esize, 0u);
      EXPECT_GE(e.bucket_offset, end) << "bucket " << bi << ": entries overlap";
      if (e.length > 0) {
        EXPECT_EQ(e.bucket_offset % rule.alignment, 0u) << "bucket " << bi;
        if (rule.kind != WSYNC_LAYOUT_BYTES_MIXED) {
          EXPECT_EQ(e.bucket_offset, end) << "bucket " << bi << ": padding in a no-padding layout";
        }
        ++nonempty;
      } else {
        EXPECT_EQ(e.bucket_offset, end) << "empty tensors sit at the current offset";
      }
      payload_before_last = end;
      end = e.bucket_offset + e.length;
      if (rule.kind == WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE) {
        EXPECT_EQ(t.dtype, b.dtype) << "bucket " << bi;
      }
      if (e.tensor_offset + e.length == t.nbytes) {
        next_toff = 0;
        if (e.tensor_index == next_tensor) ++next_tensor;
      } else {
        ASSERT_LT(e.tensor_offset + e.length, t.nbytes);
        EXPECT_TRUE(rule.allow_split);
        if (e.tensor_index == next_tensor) ++next_tensor;
        next_toff = e.tensor_offset + e.length;
      }
    }
    EXPECT_EQ(b.bytes, end) << "bucket " << bi;
    if (rule.kind != WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE) {
      EXPECT_EQ(b.dtype, WSYNC_DTYPE_INVALID);
    }
    if (rule.kind == WSYNC_LAYOUT_EXCEED_THEN_FLUSH) {
      if (bi + 1 < bs.size()) {
        EXPECT_GT(b.bytes, rule.bucket_bytes) << "bucket " << bi << " flushed early";
      }
      EXPECT_LE(payload_before_last, rule.bucket_bytes) << "bucket " << bi << " flushed late";
    } else if (b.bytes > rule.bucket_bytes) {
      EXPECT_EQ(nonempty, 1u) << "bucket " << bi << " overflows with more than one tensor";
      EXPECT_FALSE(rule.allow_split) << "bucket " << bi;
    }
  }
  EXPECT_EQ(next_tensor, ts.size());
  EXPECT_EQ(next_toff, 0u);
}

// ------------------------------------------------------------------------------------------
// BYTES_MIXED
// ------------------------------------------------------------------------------------------

TEST(BytesMixed, PacksInOrderAndClosesWhenTheNextDoesNotFit) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 100);
  std::vector<PlanTensor> ts = {T("a", WSYNC_DTYPE_FLOAT32, {10}), T("b", WSYNC_DTYPE_BFLOAT16, {4, 5}),
                                T("c", WSYNC_DTYPE_FLOAT32, {10}), T("d", WSYNC_DTYPE_INT64, {2})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[0], {{0, 0, 40, 0}, {1, 40, 40, 0}}, 80);
  ExpectBucket(bs[1], {{2, 0, 40, 0}, {3, 40, 16, 0}}, 56);
  EXPECT_EQ(bs[0].dtype, WSYNC_DTYPE_INVALID);
  EXPECT_EQ(plan_max_bucket_bytes(bs), 80u);
  CheckInvariants(r, ts, bs);
}

TEST(BytesMixed, ExactFitStaysInTheBucket) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64);
  std::vector<PlanTensor> ts = {B("a", 32), B("b", 32), B("c", 1)};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[0], {{0, 0, 32, 0}, {1, 32, 32, 0}}, 64);
  ExpectBucket(bs[1], {{2, 0, 1, 0}}, 1);
}

TEST(BytesMixed, AlignsEveryEntry) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 16);
  std::vector<PlanTensor> ts = {B("u8", 3), T("h", WSYNC_DTYPE_FLOAT16, {5}), T("f", WSYNC_DTYPE_FLOAT32, {1}),
                                B("next", 20)};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 2u);
  // 3 -> pad to 16; 16+10=26 -> pad to 32; 36 -> 48+20 = 68 > 64 closes.
  ExpectBucket(bs[0], {{0, 0, 3, 0}, {1, 16, 10, 0}, {2, 32, 4, 0}}, 36);
  ExpectBucket(bs[1], {{3, 0, 20, 0}}, 20);
  CheckInvariants(r, ts, bs);
}

TEST(BytesMixed, AlignmentPaddingCanCloseTheBucket) {
  // 40 + 20 fits unpadded but 48 + 20 does not.
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 16);
  auto bs = Plan(r, {B("a", 40), B("b", 20)});
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[0], {{0, 0, 40, 0}}, 40);
  ExpectBucket(bs[1], {{1, 0, 20, 0}}, 20);
}

TEST(BytesMixed, OversizeWithoutSplitGetsItsOwnBucket) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 8);
  std::vector<PlanTensor> ts = {B("a", 16), T("big", WSYNC_DTYPE_FLOAT32, {50}), B("c", 16)};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 3u);
  ExpectBucket(bs[0], {{0, 0, 16, 0}}, 16);
  ExpectBucket(bs[1], {{1, 0, 200, 0}}, 200);
  ExpectBucket(bs[2], {{2, 0, 16, 0}}, 16);
  EXPECT_EQ(plan_max_bucket_bytes(bs), 200u);
  CheckInvariants(r, ts, bs);
}

TEST(BytesMixed, SplitFillsTheSpaceLeftThenWholeBucketsThenSharesTheTail) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 8, true);
  std::vector<PlanTensor> ts = {B("a", 10), T("big", WSYNC_DTYPE_FLOAT32, {50}), B("c", 8)};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 4u);
  ExpectBucket(bs[0], {{0, 0, 10, 0}, {1, 16, 48, 0}}, 64);
  ExpectBucket(bs[1], {{1, 0, 64, 48}}, 64);
  ExpectBucket(bs[2], {{1, 0, 64, 112}}, 64);
  ExpectBucket(bs[3], {{1, 0, 24, 176}, {2, 24, 8, 0}}, 32);
  EXPECT_EQ(plan_max_bucket_bytes(bs), 64u);
  CheckInvariants(r, ts, bs);
}

TEST(BytesMixed, SplitSkipsASpaceTooSmallForOneElement) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 1, true);
  std::vector<PlanTensor> ts = {B("a", 59), T("big", WSYNC_DTYPE_FLOAT64, {20})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 4u);
  ExpectBucket(bs[0], {{0, 0, 59, 0}}, 59);  // 5 bytes left < 8
  ExpectBucket(bs[1], {{1, 0, 64, 0}}, 64);
  ExpectBucket(bs[2], {{1, 0, 64, 64}}, 64);
  ExpectBucket(bs[3], {{1, 0, 32, 128}}, 32);
  CheckInvariants(r, ts, bs);
}

TEST(BytesMixed, SplitChunksAreWholeElementsWhenTheBucketIsNotAMultiple) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 30, 1, true);
  std::vector<PlanTensor> ts = {T("w", WSYNC_DTYPE_FLOAT32, {4, 5})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 3u);
  ExpectBucket(bs[0], {{0, 0, 28, 0}}, 28);
  ExpectBucket(bs[1], {{0, 0, 28, 28}}, 28);
  ExpectBucket(bs[2], {{0, 0, 24, 56}}, 24);
  CheckInvariants(r, ts, bs);
}

TEST(BytesMixed, SplitOnlyWhatIsLargerThanABucket) {
  // 48 bytes fit a bucket, so they close the bucket instead of being split into the 24 left.
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 1, true);
  auto bs = Plan(r, {B("a", 40), B("b", 48)});
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[1], {{1, 0, 48, 0}}, 48);
}

TEST(BytesMixed, SplitTailExactlyABucket) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 1, true);
  std::vector<PlanTensor> ts = {B("big", 128), B("c", 1)};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 3u);
  ExpectBucket(bs[0], {{0, 0, 64, 0}}, 64);
  ExpectBucket(bs[1], {{0, 0, 64, 64}}, 64);
  ExpectBucket(bs[2], {{1, 0, 1, 0}}, 1);
  CheckInvariants(r, ts, bs);
}

// ------------------------------------------------------------------------------------------
// ELEMENTS_ONE_DTYPE
// ------------------------------------------------------------------------------------------

TEST(ElementsOneDtype, DtypeChangeClosesTheBucket) {
  LayoutRule r = Rule(WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE, 1024);
  std::vector<PlanTensor> ts = {T("a", WSYNC_DTYPE_FLOAT32, {3}), T("b", WSYNC_DTYPE_FLOAT32, {1}),
                                T("c", WSYNC_DTYPE_BFLOAT16, {3}), T("d", WSYNC_DTYPE_BFLOAT16, {2}),
                                T("e", WSYNC_DTYPE_FLOAT32, {2})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 3u);
  ExpectBucket(bs[0], {{0, 0, 12, 0}, {1, 12, 4, 0}}, 16);  // no padding
  ExpectBucket(bs[1], {{2, 0, 6, 0}, {3, 6, 4, 0}}, 10);
  ExpectBucket(bs[2], {{4, 0, 8, 0}}, 8);
  EXPECT_EQ(bs[0].dtype, WSYNC_DTYPE_FLOAT32);
  EXPECT_EQ(bs[1].dtype, WSYNC_DTYPE_BFLOAT16);
  EXPECT_EQ(bs[2].dtype, WSYNC_DTYPE_FLOAT32);
  CheckInvariants(r, ts, bs);
}

TEST(ElementsOneDtype, SizeClosesTheBucketAndOversizeGetsItsOwn) {
  LayoutRule r = Rule(WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE, 64);
  std::vector<PlanTensor> ts = {T("a", WSYNC_DTYPE_FLOAT32, {10}), T("b", WSYNC_DTYPE_FLOAT32, {7}),
                                T("c", WSYNC_DTYPE_FLOAT32, {100}), T("d", WSYNC_DTYPE_FLOAT32, {1})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 4u);
  ExpectBucket(bs[0], {{0, 0, 40, 0}}, 40);
  ExpectBucket(bs[1], {{1, 0, 28, 0}}, 28);  // 40 + 28 > 64
  ExpectBucket(bs[2], {{2, 0, 400, 0}}, 400);
  ExpectBucket(bs[3], {{3, 0, 4, 0}}, 4);
  CheckInvariants(r, ts, bs);
}

TEST(ElementsOneDtype, EmptyTensorsFollowTheDtypeRule) {
  LayoutRule r = Rule(WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE, 64);
  std::vector<PlanTensor> ts = {T("a", WSYNC_DTYPE_FLOAT32, {2}), T("e_same", WSYNC_DTYPE_FLOAT32, {0}),
                                T("e_other", WSYNC_DTYPE_INT8, {0, 4}), T("b", WSYNC_DTYPE_INT8, {3})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[0], {{0, 0, 8, 0}, {1, 8, 0, 0}}, 8);
  ExpectBucket(bs[1], {{2, 0, 0, 0}, {3, 0, 3, 0}}, 3);
  EXPECT_EQ(bs[1].dtype, WSYNC_DTYPE_INT8);
  CheckInvariants(r, ts, bs);
}

TEST(ElementsOneDtype, RefusesPaddingAndSplitting) {
  std::vector<PlanBucket> out;
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE, 64, 16), {B("a", 1)}, &out),
            WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("alignment"), std::string::npos) << last_error();
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE, 64, 1, true), {B("a", 1)}, &out),
            WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("allow_split"), std::string::npos) << last_error();
}

// ------------------------------------------------------------------------------------------
// EXCEED_THEN_FLUSH (vLLM packed)
// ------------------------------------------------------------------------------------------

// vllm/distributed/weight_transfer/packed_tensor.py, packed_nccl_broadcast_consumer, transcribed:
// append, add, `if size > target: break`; on StopIteration broadcast what is left if any.
std::vector<std::vector<uint32_t>> VllmCuts(const std::vector<PlanTensor>& ts, uint64_t target) {
  std::vector<std::vector<uint32_t>> chunks;
  std::vector<uint32_t> meta;
  uint64_t size = 0;
  for (uint32_t i = 0; i < ts.size(); ++i) {
    meta.push_back(i);
    size += ts[i].nbytes;
    if (size > target) {
      chunks.push_back(meta);
      meta.clear();
      size = 0;
    }
  }
  if (!meta.empty()) chunks.push_back(meta);
  return chunks;
}

TEST(ExceedThenFlush, TheCrossingTensorStaysInTheChunk) {
  LayoutRule r = Rule(WSYNC_LAYOUT_EXCEED_THEN_FLUSH, 100);
  std::vector<PlanTensor> ts = {B("a", 40), T("b", WSYNC_DTYPE_FLOAT32, {10}), T("c", WSYNC_DTYPE_BFLOAT16, {20}),
                                B("d", 20)};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[0], {{0, 0, 40, 0}, {1, 40, 40, 0}, {2, 80, 40, 0}}, 120);
  ExpectBucket(bs[1], {{3, 0, 20, 0}}, 20);  // the last partial chunk is sent
  EXPECT_EQ(plan_max_bucket_bytes(bs), 120u);
  CheckInvariants(r, ts, bs);
}

TEST(ExceedThenFlush, ReachingTheSizeExactlyDoesNotFlush) {
  LayoutRule r = Rule(WSYNC_LAYOUT_EXCEED_THEN_FLUSH, 100);
  auto bs = Plan(r, {B("a", 50), B("b", 50), B("c", 10), B("d", 1)});
  ASSERT_EQ(bs.size(), 2u);  // 100 is not > 100; 110 is.
  ExpectBucket(bs[0], {{0, 0, 50, 0}, {1, 50, 50, 0}, {2, 100, 10, 0}}, 110);
  ExpectBucket(bs[1], {{3, 0, 1, 0}}, 1);
}

TEST(ExceedThenFlush, OversizeTensorFlushesAtOnce) {
  LayoutRule r = Rule(WSYNC_LAYOUT_EXCEED_THEN_FLUSH, 100);
  auto bs = Plan(r, {B("big", 500), B("a", 10)});
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[0], {{0, 0, 500, 0}}, 500);
  ExpectBucket(bs[1], {{1, 0, 10, 0}}, 10);
}

TEST(ExceedThenFlush, EmptyTensorAfterAFlushIsAChunkOfItsOwnLikeVllm) {
  // vLLM's consumer starts a new chunk after the flush, appends the 0-byte tensor and, at the end
  // of the iterator, broadcasts a 0-byte chunk; the sender must match it or both sides hang.
  LayoutRule r = Rule(WSYNC_LAYOUT_EXCEED_THEN_FLUSH, 100);
  std::vector<PlanTensor> ts = {B("a", 101), T("e", WSYNC_DTYPE_FLOAT32, {0, 3})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[0], {{0, 0, 101, 0}}, 101);
  ExpectBucket(bs[1], {{1, 0, 0, 0}}, 0);
  ASSERT_EQ(VllmCuts(ts, 100).size(), 2u);
}

TEST(ExceedThenFlush, MatchesVllmCutsOnRandomBatches) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const uint64_t target = 8 + rng() % 200;
    std::vector<PlanTensor> ts;
    const int n = static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      const uint64_t kind = rng() % 10;
      const uint64_t bytes = kind == 0 ? 0 : (kind == 1 ? target + rng() % 100 : rng() % (target / 2 + 1));
      ts.push_back(B("t" + std::to_string(i), bytes));
    }
    LayoutRule r = Rule(WSYNC_LAYOUT_EXCEED_THEN_FLUSH, target);
    auto bs = Plan(r, ts);
    auto want = VllmCuts(ts, target);
    ASSERT_EQ(bs.size(), want.size()) << "iter " << iter;
    for (size_t b = 0; b < bs.size(); ++b) {
      ASSERT_EQ(bs[b].entries.size(), want[b].size()) << "iter " << iter << " bucket " << b;
      uint64_t off = 0;
      for (size_t k = 0; k < want[b].size(); ++k) {
        EXPECT_EQ(bs[b].entries[k].tensor_index, want[b][k]);
        EXPECT_EQ(bs[b].entries[k].bucket_offset, off);  // vLLM's packed_tensor.split(sizes)
        off += ts[want[b][k]].nbytes;
      }
      EXPECT_EQ(bs[b].bytes, off);
    }
    CheckInvariants(r, ts, bs);
  }
}

TEST(ExceedThenFlush, RefusesPaddingAndSplitting) {
  std::vector<PlanBucket> out;
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_EXCEED_THEN_FLUSH, 64, 4), {B("a", 1)}, &out),
            WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_EXCEED_THEN_FLUSH, 64, 1, true), {B("a", 1)}, &out),
            WSYNC_ERR_INVALID_ARGUMENT);
}

// ------------------------------------------------------------------------------------------
// Empty tensors, empty batches
// ------------------------------------------------------------------------------------------

TEST(EmptyTensors, AreEntriesAtTheCurrentOffsetWithoutPadding) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 16);
  std::vector<PlanTensor> ts = {T("e0", WSYNC_DTYPE_FLOAT32, {0}), B("a", 3), T("e1", WSYNC_DTYPE_FLOAT16, {5, 0}),
                                B("b", 4), B("c", 60), T("e2", WSYNC_DTYPE_INT64, {0, 0, 0})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 2u);
  ExpectBucket(bs[0], {{0, 0, 0, 0}, {1, 0, 3, 0}, {2, 3, 0, 0}, {3, 16, 4, 0}}, 20);
  ExpectBucket(bs[1], {{4, 0, 60, 0}, {5, 60, 0, 0}}, 60);
  CheckInvariants(r, ts, bs);
}

TEST(EmptyTensors, OnlyEmptyTensorsGiveOneBucketOfZeroBytes) {
  for (int32_t kind : {WSYNC_LAYOUT_BYTES_MIXED, WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE, WSYNC_LAYOUT_EXCEED_THEN_FLUSH}) {
    LayoutRule r = Rule(kind, 64);
    std::vector<PlanTensor> ts = {T("a", WSYNC_DTYPE_FLOAT32, {0}), T("b", WSYNC_DTYPE_FLOAT32, {3, 0})};
    auto bs = Plan(r, ts);
    ASSERT_EQ(bs.size(), 1u) << kind;
    ExpectBucket(bs[0], {{0, 0, 0, 0}, {1, 0, 0, 0}}, 0);
    EXPECT_EQ(plan_max_bucket_bytes(bs), 0u);
  }
}

TEST(EmptyTensors, RideWithAnOversizeTensorInsteadOfMakingAnEmptyBucket) {
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64);
  std::vector<PlanTensor> ts = {T("e0", WSYNC_DTYPE_FLOAT32, {0}), B("big", 100), T("e1", WSYNC_DTYPE_FLOAT32, {0})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 1u);
  ExpectBucket(bs[0], {{0, 0, 0, 0}, {1, 0, 100, 0}, {2, 100, 0, 0}}, 100);
}

TEST(EmptyTensors, ZeroTensorsGiveZeroBuckets) {
  for (int32_t kind : {WSYNC_LAYOUT_BYTES_MIXED, WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE, WSYNC_LAYOUT_EXCEED_THEN_FLUSH}) {
    std::vector<PlanBucket> out(3);
    EXPECT_EQ(plan_buckets(Rule(kind, 64), {}, &out), WSYNC_OK);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(plan_max_bucket_bytes(out), 0u);
  }
}

TEST(Scalars, NdimZeroIsOneElement) {
  PlanTensor s;
  s.name = "step";
  s.dtype = WSYNC_DTYPE_INT64;
  s.ndim = 0;
  s.nbytes = 8;
  auto bs = Plan(Rule(WSYNC_LAYOUT_BYTES_MIXED, 64), {s});
  ASSERT_EQ(bs.size(), 1u);
  ExpectBucket(bs[0], {{0, 0, 8, 0}}, 8);
}

// ------------------------------------------------------------------------------------------
// Random batches: invariants for every rule
// ------------------------------------------------------------------------------------------

TEST(RandomBatches, InvariantsHoldForEveryRule) {
  const int32_t dtypes[] = {WSYNC_DTYPE_UINT8, WSYNC_DTYPE_FLOAT16, WSYNC_DTYPE_BFLOAT16, WSYNC_DTYPE_FLOAT32,
                            WSYNC_DTYPE_FLOAT64};
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 1500; ++iter) {
    const int32_t kind = 1 + static_cast<int32_t>(rng() % 3);
    const uint64_t bucket = 8 + rng() % 256;
    const uint32_t align = kind == WSYNC_LAYOUT_BYTES_MIXED ? (1u << (rng() % 8)) : 1u;
    const bool split = kind == WSYNC_LAYOUT_BYTES_MIXED && (rng() % 2) == 0;
    LayoutRule r = Rule(kind, bucket, align, split);
    std::vector<PlanTensor> ts;
    const int n = static_cast<int>(rng() % 16);
    for (int i = 0; i < n; ++i) {
      const int32_t dt = dtypes[rng() % 5];
      const int64_t elems = (rng() % 8 == 0) ? 0 : static_cast<int64_t>(1 + rng() % (bucket / 2 + 2 * (rng() % 3) * bucket));
      ts.push_back(T("w" + std::to_string(i), dt, {elems}));
    }
    std::vector<PlanBucket> out;
    ASSERT_EQ(plan_buckets(r, ts, &out), WSYNC_OK) << last_error();
    SCOPED_TRACE("iter " + std::to_string(iter) + " kind " + std::to_string(kind));
    CheckInvariants(r, ts, out);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
}

// ------------------------------------------------------------------------------------------
// Bad input
// ------------------------------------------------------------------------------------------

void ExpectRefused(const std::vector<PlanTensor>& ts, const std::string& must_mention) {
  std::vector<PlanBucket> out(2);
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_BYTES_MIXED, 64), ts, &out), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(out.empty());
  EXPECT_NE(last_error().find(must_mention), std::string::npos) << last_error();
}

TEST(BadInput, TensorsAreRefusedNamingTheTensor) {
  PlanTensor ok = B("fine", 4);
  {
    PlanTensor t = B("bad_dtype", 4);
    t.dtype = WSYNC_DTYPE_INVALID;
    ExpectRefused({ok, t}, "#1 'bad_dtype'");
    t.dtype = WSYNC_DTYPE_COUNT;
    ExpectRefused({ok, t}, "'bad_dtype'");
    t.dtype = -3;
    ExpectRefused({ok, t}, "'bad_dtype'");
  }
  {
    PlanTensor t = B("bad_ndim", 4);
    t.ndim = 9;
    ExpectRefused({t}, "'bad_ndim'");
    t.ndim = -1;
    ExpectRefused({t}, "'bad_ndim'");
  }
  {
    PlanTensor t = T("neg_dim", WSYNC_DTYPE_FLOAT32, {2, -1});
    t.nbytes = 0;
    ExpectRefused({t}, "'neg_dim'");
  }
  {
    PlanTensor t = T("wrong_nbytes", WSYNC_DTYPE_FLOAT32, {2, 3});
    t.nbytes = 25;
    ExpectRefused({ok, B("fine2", 4), t}, "#2 'wrong_nbytes'");
  }
  {
    PlanTensor t = T("overflow", WSYNC_DTYPE_FLOAT32, {1ll << 31, 1ll << 31});  // 2^62 * 4
    t.nbytes = 0;
    ExpectRefused({t}, "'overflow'");
    PlanTensor u = T("overflow2", WSYNC_DTYPE_UINT8, {INT64_MAX, 3});
    u.nbytes = 0;
    ExpectRefused({u}, "'overflow2'");
  }
  ExpectRefused({ok, B("", 4)}, "#1");
  ExpectRefused({B(std::string(1025, 'x'), 4)}, "1025");
  ExpectRefused({ok, B("dup", 4), B("dup", 8)}, "#2 'dup'");
}

TEST(BadInput, LongestNameAndHugeEmptyShapesAreFine) {
  std::vector<PlanBucket> out;
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_BYTES_MIXED, 64), {B(std::string(1024, 'x'), 4)}, &out), WSYNC_OK);
  const int64_t shape[3] = {1ll << 40, 1ll << 40, 0};
  EXPECT_EQ(validate_tensor_shape("empty", WSYNC_DTYPE_FLOAT64, 3, shape, 0), WSYNC_OK) << last_error();
  EXPECT_EQ(validate_tensor_shape("scalar", WSYNC_DTYPE_FLOAT64, 0, nullptr, 8), WSYNC_OK) << last_error();
  EXPECT_EQ(validate_tensor_shape("scalar", WSYNC_DTYPE_FLOAT64, 0, nullptr, 0), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(validate_tensor_shape("noshape", WSYNC_DTYPE_FLOAT64, 1, nullptr, 8), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'noshape'"), std::string::npos) << last_error();
}

TEST(BadInput, RulesAreRefused) {
  std::vector<PlanBucket> out;
  EXPECT_EQ(plan_buckets(Rule(0, 64), {B("a", 1)}, &out), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(plan_buckets(Rule(4, 64), {B("a", 1)}, &out), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 0), {B("a", 1)}, &out), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 24), {B("a", 1)}, &out), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("alignment"), std::string::npos) << last_error();
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_BYTES_MIXED, 4), {B("a", 1)}, &out), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("bucket_bytes"), std::string::npos) << last_error();
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_BYTES_MIXED, 64), {B("a", 1)}, nullptr), WSYNC_ERR_INVALID_ARGUMENT);
}

TEST(BadInput, HugeTensorsDoNotOverflowOffsets) {
  // Two tensors of 2^63 bytes each are valid descriptors; planned without split each is alone.
  LayoutRule r = Rule(WSYNC_LAYOUT_BYTES_MIXED, 64, 8);
  std::vector<PlanTensor> ts = {B("a", 3), T("h1", WSYNC_DTYPE_UINT8, {1ll << 62, 2}),
                                T("h2", WSYNC_DTYPE_UINT8, {1ll << 62, 2})};
  auto bs = Plan(r, ts);
  ASSERT_EQ(bs.size(), 3u);
  EXPECT_EQ(bs[2].bytes, 1ull << 63);
  // vLLM's running total would overflow: refused, not wrapped.
  std::vector<PlanBucket> out;
  std::vector<PlanTensor> v = {T("h1", WSYNC_DTYPE_UINT8, {1ll << 62, 3}), T("h2", WSYNC_DTYPE_UINT8, {1ll << 62, 3})};
  EXPECT_EQ(plan_buckets(Rule(WSYNC_LAYOUT_EXCEED_THEN_FLUSH, UINT64_MAX), v, &out), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'h2'"), std::string::npos) << last_error();
}

}  // namespace
}  // namespace wsync
