// The delivery plan: over random routes (star, chain, trees, auto on random hosts), random
// ownership segments (which ranks a bucket's boxes are for) and random memberships (ranks
// removed; with relays, segments of whole lanes), every bucket reaches exactly the members that
// need it, each once, along the route; the sender posts only to its own targets; and unmodified engines (no control channel) get every
// byte from the sender with nobody awaited.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "planner/delivery_plan.h"

namespace wsync {
namespace {

std::vector<uint32_t> sorted_unique(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// The ranks that get a bucket's bytes: its targets and, along the relays, everything below them;
// each rank counted once per way it is reached.
std::vector<uint32_t> reached(const DeliveryPlan& d, const BucketDelivery& b) {
  std::vector<uint32_t> out, todo = b.targets;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    out.push_back(r);
    for (uint32_t c : d.children(r)) todo.push_back(c);
  }
  return out;
}

RoutePlan random_route(std::mt19937* rng, uint32_t n) {
  std::uniform_int_distribution<uint32_t> hosts_of(1, n), shape_of(0, 3), degree_of(2, 4);
  const uint32_t hosts = hosts_of(*rng);
  std::vector<RouteMember> m;
  for (uint32_t r = 1; r <= n; ++r) m.push_back(RouteMember{r, "198.18.1." + std::to_string((*rng)() % hosts)});
  RouteSpec spec;
  spec.shape = static_cast<RouteShape>(shape_of(*rng));
  spec.degree = degree_of(*rng);
  RoutePlan plan;
  EXPECT_EQ(WSYNC_OK, plan_routes(spec, m, "198.18.0.1", &plan));
  return plan;
}

TEST(DeliveryPlan, EveryBucketReachesExactlyTheMembersThatNeedItOnce) {
  std::mt19937 rng(20261129);
  int relayed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const uint32_t n = 1 + rng() % 24;
    const RoutePlan plan = random_route(&rng, n);
    const DeliveryPlan d = DeliveryPlan::routed(plan);
    relayed += d.relays();
    std::vector<uint32_t> members, segment;
    if (!d.relays()) {
      for (uint32_t r = 1; r <= n; ++r) {
        if (rng() % 5 != 0) members.push_back(r);  // elastic: about one in five removed
        if (rng() % 3 != 0) segment.push_back(r);  // many senders: the ranks that need these boxes
      }
    } else {  // relays: every member; a segment is whole lanes (subtrees under the sender)
      for (uint32_t r = 1; r <= n; ++r) members.push_back(r);
      for (uint32_t head : plan.children[0])
        if (rng() % 3 != 0) {
          segment.push_back(head);
          for (uint32_t r : downstream_of(plan, head)) segment.push_back(r);
        }
      segment = sorted_unique(segment);
    }
    const bool whole = rng() % 2 == 0;
    const BucketDelivery b = d.bucket(whole ? nullptr : &segment, members);
    std::vector<uint32_t> want;
    for (uint32_t r : members)
      if (whole || std::count(segment.begin(), segment.end(), r)) want.push_back(r);
    ASSERT_EQ(want, b.audience) << "iteration " << iter;
    for (uint32_t r = 0; r <= n + 1; ++r) EXPECT_EQ(b.awaits(r), std::count(want.begin(), want.end(), r) == 1);
    const std::vector<uint32_t> got = reached(d, b);
    // Each rank at most once: one parent per rank.
    ASSERT_EQ(sorted_unique(got).size(), got.size()) << "a rank reached twice, iteration " << iter;
    for (uint32_t r : b.audience)
      ASSERT_TRUE(std::count(got.begin(), got.end(), r)) << "member " << r << " not reached, iteration " << iter;
    if (!d.relays()) {  // a star: the sender posts to exactly the audience, nobody forwards
      EXPECT_EQ(b.targets, b.audience);
      for (uint32_t r = 1; r <= n; ++r) EXPECT_TRUE(d.children(r).empty());
    } else {  // relays: the sender posts to its own children in the audience, each relay to its children
      std::vector<uint32_t> heads;
      for (uint32_t r : plan.children[0])
        if (b.awaits(r)) heads.push_back(r);
      EXPECT_EQ(b.targets, sorted_unique(heads));
      for (uint32_t r : got) EXPECT_TRUE(b.awaits(r)) << "rank " << r << " outside the audience gets the bytes";
      for (uint32_t r = 1; r <= n; ++r) EXPECT_EQ(d.children(r), sorted_unique(plan.children[r]));
    }
  }
  EXPECT_GT(relayed, 500) << "too few random routes had relays to mean anything";
}

TEST(DeliveryPlan, UnmodifiedEnginesGetEveryByteFromTheSenderAndNobodyIsAwaited) {
  const DeliveryPlan d = DeliveryPlan::star(5, false);
  const std::vector<uint32_t> members = {1, 3};
  const std::vector<uint32_t> segment = {2};
  for (const std::vector<uint32_t>* seg : {static_cast<const std::vector<uint32_t>*>(nullptr), &segment}) {
    const BucketDelivery b = d.bucket(seg, members);
    EXPECT_TRUE(b.audience.empty());
    EXPECT_EQ(b.targets, (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  }
}

TEST(DeliveryPlan, RanksOutsideThePlanAreIgnored) {
  const DeliveryPlan d = DeliveryPlan::star(3, true);
  const BucketDelivery b = d.bucket(nullptr, {0, 2, 3, 3, 9});
  EXPECT_EQ(b.audience, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(b.targets, b.audience);
  EXPECT_TRUE(d.children(7).empty());
  EXPECT_TRUE(DeliveryPlan::routed(RoutePlan()).bucket(nullptr, {1}).audience.empty());
}

}  // namespace
}  // namespace wsync
