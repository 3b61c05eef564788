// The delivery plan (delivery_plan.h): who gets a bucket's pieces, and from whom.
#include "planner/delivery_plan.h"

#include <algorithm>

namespace wsync {

bool BucketDelivery::awaits(uint32_t rank) const {
  return std::binary_search(audience.begin(), audience.end(), rank);
}

DeliveryPlan DeliveryPlan::star(uint32_t num_ranks, bool control) {
  DeliveryPlan d;
  d.num_ranks_ = num_ranks;
  d.control_ = control;
  d.children_.assign(num_ranks + 1, {});
  for (uint32_t r = 1; r <= num_ranks; ++r) d.children_[0].push_back(r);
  return d;
}

DeliveryPlan DeliveryPlan::routed(const RoutePlan& plan) {
  const uint32_t n = plan.children.empty() ? 0 : static_cast<uint32_t>(plan.children.size() - 1);
  if (plan.shape == "star" || n == 0) return star(n, true);
  DeliveryPlan d;
  d.num_ranks_ = n;
  d.relays_ = true;
  d.children_ = plan.children;
  for (auto& c : d.children_) {
    c.erase(std::remove_if(c.begin(), c.end(), [n](uint32_t r) { return r == 0 || r > n; }), c.end());
    std::sort(c.begin(), c.end());
  }
  return d;
}

BucketDelivery DeliveryPlan::bucket(const std::vector<uint32_t>* segment, const std::vector<uint32_t>& members) const {
  BucketDelivery out;
  if (!control_) {  // unmodified engines: every rank gets every byte from the sender; none answers
    out.targets = children(0);
    return out;
  }
  for (uint32_t r : members) {
    if (r == 0 || r > num_ranks_) continue;
    if (segment != nullptr && std::find(segment->begin(), segment->end(), r) == segment->end()) continue;
    out.audience.push_back(r);
  }
  std::sort(out.audience.begin(), out.audience.end());
  out.audience.erase(std::unique(out.audience.begin(), out.audience.end()), out.audience.end());
  if (!relays_) {
    out.targets = out.audience;
    return out;
  }
  // The sender's own children in the audience: with lanes, the first of each lane whose segment
  // this is (a relay forwards to its lane only; the plan's lanes follow the segments).
  for (uint32_t r : children(0))
    if (out.awaits(r)) out.targets.push_back(r);
  return out;
}

const std::vector<uint32_t>& DeliveryPlan::children(uint32_t rank) const {
  static const std::vector<uint32_t> kNone;
  if (rank >= children_.size() || (rank != 0 && !relays_)) return kNone;
  return children_[rank];
}

}  // namespace wsync
