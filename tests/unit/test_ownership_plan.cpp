// The many-sender ownership plan: every refusal with the message a user needs (the tensor, the
// senders, the range), replicas sent once, the digest every member compares, transfers that give
// each receiver exactly what it asked for (checked element by element through the byte runs a
// sender packs and a receiver scatters), and the planner that does not recompute a repeated plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "planner/ownership_plan.h"

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

OwnedTensor owned(const std::string& name, std::vector<int64_t> shape, const Box& b, bool replica = false,
                  int32_t dtype = WSYNC_DTYPE_BFLOAT16) {
  OwnedTensor t;
  t.name = name;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  t.box = b;
  t.replica = replica;
  return t;
}

// `senders` ranks each owning torch.chunk `rank` of dimension `dim` of every tensor.
std::vector<SenderRecord> sharded(uint32_t senders, int32_t dim, const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  std::vector<SenderRecord> recs(senders);
  for (uint32_t r = 0; r < senders; ++r) {
    recs[r].rank = r;
    for (const auto& t : tensors) {
      Box b;
      EXPECT_EQ(WSYNC_OK, chunk_box(static_cast<int32_t>(t.second.size()), t.second.data(), dim, senders, r, &b));
      recs[r].tensors.push_back(owned(t.first, t.second, b));
    }
  }
  return recs;
}

wsync_status_t refused(const std::vector<SenderRecord>& recs, std::string* msg) {
  OwnershipPlan p;
  wsync_status_t st = plan_ownership(recs, &p);
  *msg = last_error();
  if (st != WSYNC_OK) {
    EXPECT_TRUE(p.tensors.empty());
  }
  return st;
}

void expect_has(const std::string& msg, const std::vector<std::string>& parts) {
  for (const auto& p : parts) EXPECT_NE(std::string::npos, msg.find(p)) << "'" << p << "' missing from: " << msg;
}

TEST(OwnershipPlan, Fsdp2RowShardsCoverEachTensorOnceAndTheDigestIgnoresRecordOrder) {
  auto recs = sharded(4, 0, {{"w", {10, 4}}, {"b", {10}}, {"tiny", {2, 3}}});
  OwnershipPlan p;
  ASSERT_EQ(WSYNC_OK, plan_ownership(recs, &p)) << last_error();
  ASSERT_EQ(3u, p.tensors.size());
  const TensorPlan* w = p.find("w");
  ASSERT_NE(nullptr, w);
  ASSERT_EQ(4u, w->owners.size());
  EXPECT_EQ("[0:3, 0:4]", box_str(w->owners[0].box));
  EXPECT_EQ("[9:10, 0:4]", box_str(w->owners[3].box));
  EXPECT_EQ(2u, p.find("tiny")->owners.size()) << "torch.chunk's empty shards own nothing";
  std::reverse(recs.begin(), recs.end());
  OwnershipPlan q;
  ASSERT_EQ(WSYNC_OK, plan_ownership(recs, &q));
  EXPECT_EQ(p.digest, q.digest);
  recs[0].tensors[0].shape[0] = 11;  // one sender's view of one shape differs: another plan, or a refusal
  std::string msg;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
}

TEST(OwnershipPlan, AGapIsRefusedNamingTheTensorAndTheRange) {
  std::vector<SenderRecord> recs(2);
  recs[0].rank = 0;
  recs[0].tensors.push_back(owned("layers.0.w", {10, 4}, box({0, 0}, {3, 4})));
  recs[1].rank = 1;
  recs[1].tensors.push_back(owned("layers.0.w", {10, 4}, box({6, 0}, {4, 4})));
  std::string msg;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"layers.0.w", "[3:6, 0:4]", "owned by no sender", "12 elements"});
}

TEST(OwnershipPlan, AnOverlapIsRefusedNamingBothSendersAndTheCommonRange) {
  std::vector<SenderRecord> recs(2);
  recs[0].rank = 0;
  recs[0].tensors.push_back(owned("w", {10, 4}, box({0, 0}, {5, 4})));
  recs[1].rank = 3;
  recs[1].tensors.push_back(owned("w", {10, 4}, box({3, 0}, {7, 4})));
  std::string msg;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"'w'", "senders 0 and 3 both own [3:5, 0:4]", "[0:5, 0:4]", "[3:10, 0:4]"});
  // The same box twice without `replica` is an overlap too: replicas are declared, never guessed.
  recs[1].tensors[0].box = box({0, 0}, {10, 4});
  recs[0].tensors[0].box = box({0, 0}, {10, 4});
  recs[0].tensors[0].replica = true;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"marked replica"});
}

TEST(OwnershipPlan, ReplicasAreSentOnceByTheLowestSender) {
  // A 2 x 2 mesh: data-parallel replicas (senders 0/2 and 1/3) of tensor-parallel column shards.
  std::vector<SenderRecord> recs(4);
  for (uint32_t r = 0; r < 4; ++r) {
    recs[r].rank = r;
    const int64_t col = (r % 2) * 3;
    recs[r].tensors.push_back(owned("qkv", {8, 6}, box({0, col}, {8, 3}), true));
    recs[r].tensors.push_back(owned("norm", {6}, box({0}, {6}), true));  // Replicate everywhere
  }
  OwnershipPlan p;
  ASSERT_EQ(WSYNC_OK, plan_ownership(recs, &p)) << last_error();
  const TensorPlan* q = p.find("qkv");
  ASSERT_EQ(2u, q->owners.size());
  EXPECT_EQ(0u, q->owners[0].sender);
  EXPECT_EQ(1u, q->owners[1].sender);
  ASSERT_EQ(1u, p.find("norm")->owners.size());
  EXPECT_EQ(0u, p.find("norm")->owners[0].sender);
}

TEST(OwnershipPlan, SendersThatDisagreeAreRefusedBeforeAnyByteMoves) {
  auto recs = sharded(2, 0, {{"w", {10, 4}}});
  recs[1].tensors[0].dtype = WSYNC_DTYPE_FLOAT32;
  std::string msg;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"'w'", "sender 0 publishes it as bfloat16 [10, 4]", "sender 1 as float32 [10, 4]"});
  recs = sharded(2, 0, {{"w", {10, 4}}});
  recs[1].tensors[0].shape[1] = 5;
  recs[1].tensors[0].box.extent[1] = 5;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"bfloat16 [10, 5]"});
  // A name only one sender publishes is a tensor only it owns: half of it is a gap.
  recs = sharded(2, 0, {{"w", {10, 4}}});
  recs[1].tensors[0].name = "v";
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"owned by no sender"});
}

TEST(OwnershipPlan, MalformedRecordsAreRefusedNamingTheSender) {
  std::string msg;
  auto recs = sharded(2, 0, {{"w", {10, 4}}});
  recs[1].rank = 0;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"two records come from sender 0"});
  recs = sharded(1, 0, {{"w", {10, 4}}, {"w", {10, 4}}});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"sender 0 publishes tensor 'w' twice"});
  recs = sharded(1, 0, {{"w", {10, 4}}});
  recs[0].tensors[0].dtype = 99;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"dtype 99"});
  recs = sharded(1, 0, {{"w", {10, 4}}});
  recs[0].tensors[0].name = std::string("a\x01", 2);
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"sender 0", "\\x01"});
  recs = sharded(1, 0, {{"w", {10, 4}}});
  recs[0].tensors[0].box = box({0, 0}, {11, 4});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  expect_has(msg, {"[0:11, 0:4]", "'w'", "dimension 0"});
  recs = sharded(1, 0, {{"w", {10, 4}}});
  recs[0].tensors[0].ndim = 9;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
  recs = sharded(1, 0, {{"w", {10, 4}}});
  recs[0].tensors[0].shape[0] = INT64_MAX;
  recs[0].tensors[0].box.extent[0] = INT64_MAX;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, refused(recs, &msg));
}

TEST(OwnershipPlan, EmptyAndScalarTensors) {
  std::vector<SenderRecord> recs(2);
  recs[0].rank = 0;
  recs[1].rank = 1;
  recs[0].tensors.push_back(owned("step", {}, Box{}, false, WSYNC_DTYPE_INT64));
  recs[1].tensors.push_back(owned("empty", {0, 4}, box({0, 0}, {0, 4})));
  OwnershipPlan p;
  ASSERT_EQ(WSYNC_OK, plan_ownership(recs, &p)) << last_error();
  ASSERT_EQ(1u, p.find("step")->owners.size());
  // An empty tensor still reaches a receiver that asks for it, from the lowest sender naming it
  // (found in review: it had no owner, so no transfer, so no event on the receiver).
  ASSERT_EQ(1u, p.find("empty")->owners.size());
  EXPECT_EQ(1u, p.find("empty")->owners[0].sender);
  std::vector<Transfer> ts;
  ASSERT_EQ(WSYNC_OK, plan_transfers(p, {{"empty", true, Box{}}, {"step", true, Box{}}}, &ts)) << last_error();
  ASSERT_EQ(2u, ts.size());
  EXPECT_EQ(0u, ts[0].sender);  // step
  EXPECT_EQ(1u, ts[1].sender);  // empty, as an empty box
  int64_t n = -1;
  EXPECT_TRUE(box_elements(ts[1].box, &n));
  EXPECT_EQ(0, n);
}

// Element ids of the full tensor; a box's elements in its own row-major order.
std::vector<uint32_t> ids_of(const Box& inner, const int64_t* shape) {
  std::vector<uint32_t> ids;
  int64_t n = 0;
  box_elements(inner, &n);
  std::vector<int64_t> idx(inner.ndim, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t id = 0;
    for (int32_t i = 0; i < inner.ndim; ++i) id = id * shape[i] + inner.offset[i] + idx[i];
    ids.push_back(static_cast<uint32_t>(id));
    for (int32_t i = inner.ndim - 1; i >= 0; --i) {
      if (++idx[i] < inner.extent[i]) break;
      idx[i] = 0;
    }
  }
  return ids;
}

// Moves every transfer as the pipeline will: the sender packs the transfer's box out of the box
// it holds, the receiver scatters the packed bytes into the box it asked for. Returns the
// receiver's buffers (ids; 0xFFFFFFFF where nothing was written) and checks nothing is written twice.
std::vector<std::vector<uint32_t>> deliver(const OwnershipPlan& p, const std::vector<SenderRecord>& recs,
                                           const std::vector<Need>& needs, const std::vector<Transfer>& ts) {
  std::vector<std::vector<uint32_t>> bufs(needs.size());
  std::vector<Box> want(needs.size());
  for (size_t i = 0; i < needs.size(); ++i) {
    const TensorPlan* t = p.find(needs[i].name);
    want[i] = needs[i].full ? full_box(t->ndim, t->shape) : needs[i].box;
    int64_t n = 0;
    box_elements(want[i], &n);
    bufs[i].assign(n, 0xFFFFFFFFu);
  }
  for (const Transfer& tr : ts) {
    const TensorPlan& t = p.tensors[tr.tensor];
    const OwnedTensor* mine = nullptr;
    for (const auto& r : recs)
      if (r.rank == tr.sender)
        for (const auto& o : r.tensors)
          if (o.name == t.name) mine = &o;
    EXPECT_NE(nullptr, mine);
    const std::vector<uint32_t> held = ids_of(mine->box, t.shape);
    std::vector<ByteRun> src, dst;
    EXPECT_EQ(WSYNC_OK, box_runs(tr.box, mine->box, 4, &src)) << last_error();
    EXPECT_EQ(WSYNC_OK, box_runs(tr.box, want[tr.need], 4, &dst)) << last_error();
    std::vector<uint32_t> wire;
    for (const ByteRun& r : src) wire.insert(wire.end(), held.begin() + r.offset / 4, held.begin() + (r.offset + r.length) / 4);
    size_t at = 0;
    for (const ByteRun& r : dst)
      for (uint64_t k = r.offset / 4; k < (r.offset + r.length) / 4; ++k) {
        EXPECT_EQ(0xFFFFFFFFu, bufs[tr.need][k]) << "element written twice";
        bufs[tr.need][k] = wire.at(at++);
      }
    EXPECT_EQ(wire.size(), at);
  }
  for (size_t i = 0; i < needs.size(); ++i) EXPECT_EQ(ids_of(want[i], p.find(needs[i].name)->shape), bufs[i]) << needs[i].name;
  return bufs;
}

TEST(OwnershipPlan, TransfersGiveAReceiverExactlyWhatItAskedFor) {
  auto recs = sharded(4, 0, {{"w", {10, 4}}, {"b", {10}}});
  OwnershipPlan p;
  ASSERT_EQ(WSYNC_OK, plan_ownership(recs, &p));
  // A full-tensor receiver and a TP-2 receiver holding the second half of w's columns.
  std::vector<Need> full = {{"w", true, Box{}}, {"b", true, Box{}}};
  std::vector<Transfer> ts;
  ASSERT_EQ(WSYNC_OK, plan_transfers(p, full, &ts)) << last_error();
  EXPECT_EQ(8u, ts.size());
  for (size_t i = 1; i < ts.size(); ++i) EXPECT_LE(ts[i - 1].sender, ts[i].sender);
  deliver(p, recs, full, ts);
  std::vector<Need> tp = {{"w", false, box({0, 2}, {10, 2})}};
  ASSERT_EQ(WSYNC_OK, plan_transfers(p, tp, &ts)) << last_error();
  ASSERT_EQ(4u, ts.size());
  EXPECT_EQ("[0:3, 2:4]", box_str(ts[0].box));
  deliver(p, recs, tp, ts);
}

TEST(OwnershipPlan, BadNeedsAreRefusedNamingThem) {
  auto recs = sharded(2, 0, {{"w", {10, 4}}});
  OwnershipPlan p;
  ASSERT_EQ(WSYNC_OK, plan_ownership(recs, &p));
  std::vector<Transfer> ts;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, plan_transfers(p, {{"nope", true, Box{}}}, &ts));
  expect_has(last_error(), {"'nope'", "no sender publishes"});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, plan_transfers(p, {{"w", false, box({0, 3}, {10, 2})}}, &ts));
  expect_has(last_error(), {"[0:10, 3:5]", "'w'", "dimension 1"});
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, plan_transfers(p, {{"w", true, Box{}}, {"w", true, Box{}}}, &ts));
  expect_has(last_error(), {"twice"});
  EXPECT_TRUE(ts.empty());
}

// Random meshes: each tensor cut by torch.chunk along a random dimension among 1..4 senders, the
// rest replicas; receivers asking for random boxes. Every element arrives once, from its owner.
TEST(OwnershipPlan, RandomShardingsDeliverEveryElementOnce) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const uint32_t m = 1 + rng() % 4;
    std::vector<SenderRecord> recs(m);
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
    for (int t = 0; t < 3; ++t) {
      std::vector<int64_t> shape;
      const int nd = 1 + rng() % 3;
      for (int d = 0; d < nd; ++d) shape.push_back(1 + rng() % 7);
      tensors.push_back({"t" + std::to_string(t), shape});
    }
    for (uint32_t r = 0; r < m; ++r) recs[r].rank = r;
    for (const auto& t : tensors) {
      const int32_t nd = static_cast<int32_t>(t.second.size());
      const int32_t dim = static_cast<int32_t>(rng() % nd);
      const uint32_t shards = 1 + rng() % m;  // senders past `shards` hold replicas of shard r % shards
      for (uint32_t r = 0; r < m; ++r) {
        Box b;
        ASSERT_EQ(WSYNC_OK, chunk_box(nd, t.second.data(), dim, shards, r % shards, &b));
        recs[r].tensors.push_back(owned(t.first, t.second, b, shards < m));
      }
    }
    OwnershipPlan p;
    ASSERT_EQ(WSYNC_OK, plan_ownership(recs, &p)) << last_error();
    std::vector<Need> needs;
    for (const auto& t : tensors) {
      Need n;
      n.name = t.first;
      n.full = rng() % 2 == 0;
      n.box.ndim = static_cast<int32_t>(t.second.size());
      for (int32_t i = 0; i < n.box.ndim; ++i) {
        n.box.offset[i] = rng() % t.second[i];
        n.box.extent[i] = 1 + rng() % (t.second[i] - n.box.offset[i]);
      }
      needs.push_back(n);
    }
    std::vector<Transfer> ts;
    ASSERT_EQ(WSYNC_OK, plan_transfers(p, needs, &ts)) << last_error();
    deliver(p, recs, needs, ts);
  }
}

TEST(OwnershipPlan, ThePlannerDoesNotRecomputeARepeatedPlan) {
  OwnershipPlanner planner;
  auto recs = sharded(4, 0, {{"w", {10, 4}}});
  const OwnershipPlan* a = nullptr;
  const OwnershipPlan* b = nullptr;
  ASSERT_EQ(WSYNC_OK, planner.plan(recs, &a));
  ASSERT_EQ(WSYNC_OK, planner.plan(recs, &b));
  EXPECT_EQ(1u, planner.computed());
  EXPECT_EQ(a, b);  // the kept plan itself
  const uint64_t four = a->digest;
  auto other = sharded(2, 0, {{"w", {10, 4}}});
  ASSERT_EQ(WSYNC_OK, planner.plan(other, &b));
  EXPECT_EQ(2u, planner.computed());
  EXPECT_NE(four, b->digest);
  ASSERT_EQ(WSYNC_OK, planner.plan(other, &b));
  EXPECT_EQ(2u, planner.computed());
  auto bad = sharded(2, 0, {{"w", {10, 4}}});
  bad[1].tensors[0].box.offset[0] = 4;  // overlaps sender 0's rows 0..5
  const OwnershipPlan* c = nullptr;
  EXPECT_EQ(WSYNC_ERR_INVALID_ARGUMENT, planner.plan(bad, &c));
  EXPECT_EQ(2u, planner.computed()) << "a refused plan is not kept";
  ASSERT_EQ(WSYNC_OK, planner.plan(other, &b));
  EXPECT_EQ(2u, planner.computed());
}

}  // namespace
}  // namespace wsync
