// The delivery plan: for a bucket, which members must hold its bytes (each answers its READY and
// its ACK), which ranks the sender posts its pieces to (the others get them from a relay), and
// which ranks each member forwards them to. It is the one answer to "who gets this piece, from
// whom": built once per plan change from the route plan (relays), the members (membership=elastic
// removes some), and, per bucket, the ranks whose boxes it carries (many senders: a bucket cut
// from an ownership segment goes only to the receivers that need exactly those boxes). The wire
// code only executes it.
//
// Cases:
//  - star, with control channels: the audience is every member (of the bucket's segment, when it
//    has one), and the sender posts to each of them.
//  - relays (a route plan that is not a star): the audience is every member of the segment; the
//    sender posts to those of its own children in the route that are in it, and every relay
//    forwards every piece to its children. With segments the route is in lanes (many senders:
//    route_planner.h), and every lane must lie within one segment: the sender checks that before
//    a batch is sent (group_senders.cpp), since a relay passes on all it gets.
//  - no control channel (unmodified HTTP engines): nobody answers over wsync; every rank gets
//    every byte straight from the sender, member or not.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/route_planner.h"

namespace wsync {

// Who takes part in one bucket.
struct BucketDelivery {
  std::vector<uint32_t> audience;  // ascending: the members that must hold its bytes and answer
  std::vector<uint32_t> targets;   // ascending: the ranks the sender posts its pieces to
  bool awaits(uint32_t rank) const;
};

class DeliveryPlan {
 public:
  DeliveryPlan() = default;
  // Ranks 1..num_ranks, each straight from the sender; `control`: they answer over wsync.
  static DeliveryPlan star(uint32_t num_ranks, bool control);
  // The route plan's tree (a star plan is a star).
  static DeliveryPlan routed(const RoutePlan& plan);

  // A bucket for the ranks of its segment (nullptr: every rank), given the members (ascending;
  // ranks outside 1..num_ranks are ignored).
  BucketDelivery bucket(const std::vector<uint32_t>* segment, const std::vector<uint32_t>& members) const;
  // The ranks `rank` forwards every piece to (0: the sender's own targets with no segment); empty
  // in a star and for a rank outside the plan.
  const std::vector<uint32_t>& children(uint32_t rank) const;
  bool relays() const { return relays_; }
  bool control() const { return control_; }
  uint32_t num_ranks() const { return num_ranks_; }

 private:
  uint32_t num_ranks_ = 0;
  bool control_ = true;
  bool relays_ = false;
  std::vector<std::vector<uint32_t>> children_;  // index = rank (size num_ranks + 1)
};

}  // namespace wsync
