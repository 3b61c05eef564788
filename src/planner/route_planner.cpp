#include "planner/route_planner.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/names.h"

namespace wsync {
namespace {

constexpr const char* kAcceptedRoutes = "auto, star, chain, tree, tree:K with K in 2..64";

// The shape after auto is resolved: star, chain, or a tree of `degree`.
struct Resolved {
  RouteShape shape;
  uint32_t degree;
};

wsync_status_t refuse_route(const std::string& text, const char* why) {
  return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'route'='%s' %s (accepted: %s)",
              printable_text(text.data(), text.size(), 64).c_str(), why, kAcceptedRoutes);
}

// "K" of tree:K: a decimal without sign or leading zero, so that each spec has one spelling.
bool parse_degree(const std::string& digits, uint32_t* out) {
  if (digits.empty() || digits.size() > 2 || digits[0] == '0') return false;
  uint32_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  *out = v;
  return true;
}

std::string shape_text(const Resolved& r) {
  switch (r.shape) {
    case RouteShape::kStar: return "star";
    case RouteShape::kChain: return "chain";
    default: return "tree:" + std::to_string(r.degree);
  }
}

wsync_status_t validate_spec(const RouteSpec& spec) {
  switch (spec.shape) {
    case RouteShape::kAuto:
    case RouteShape::kStar:
    case RouteShape::kChain: return WSYNC_OK;
    case RouteShape::kTree:
      if (spec.degree >= kMinTreeDegree && spec.degree <= kMaxTreeDegree) return WSYNC_OK;
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "route tree:%u: the tree degree must be in %u..%u", spec.degree,
                  kMinTreeDegree, kMaxTreeDegree);
  }
  return fail(WSYNC_ERR_INVALID_ARGUMENT, "route: unknown shape %d", static_cast<int>(spec.shape));
}

// The host of every rank (index = rank, [0] = the sender's), or a refusal naming the rank that
// breaks "1..N, each once".
wsync_status_t hosts_by_rank(const std::vector<RouteMember>& receivers, const std::string& sender_host,
                             std::vector<std::string>* hosts) {
  if (receivers.empty()) return fail(WSYNC_ERR_INVALID_ARGUMENT, "plan_routes: no receivers (ranks 1..N, N >= 1)");
  if (receivers.size() >= UINT32_MAX)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "plan_routes: %zu receivers, more than ranks can number",
                receivers.size());
  const uint32_t n = static_cast<uint32_t>(receivers.size());
  std::vector<bool> seen(n + 1, false);
  hosts->assign(n + 1, std::string());
  (*hosts)[0] = sender_host;
  for (const RouteMember& m : receivers) {
    if (m.rank == 0)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "plan_routes: a receiver (host '%s') has rank 0, the sender's",
                  printable_text(m.host.data(), m.host.size(), 64).c_str());
    if (m.rank > n)
      return fail(WSYNC_ERR_INVALID_ARGUMENT,
                  "plan_routes: rank %u (host '%s') is outside 1..%u: %u receivers must have ranks 1..%u, none "
                  "missing",
                  m.rank, printable_text(m.host.data(), m.host.size(), 64).c_str(), n, n, n);
    if (seen[m.rank])
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "plan_routes: rank %u appears twice (hosts '%s' and '%s')", m.rank,
                  printable_text((*hosts)[m.rank].data(), (*hosts)[m.rank].size(), 64).c_str(),
                  printable_text(m.host.data(), m.host.size(), 64).c_str());
    seen[m.rank] = true;
    (*hosts)[m.rank] = m.host;
  }
  return WSYNC_OK;  // n distinct ranks in 1..n: none is missing
}

// The relay (lowest rank) of every remote host, ascending: the order hosts take in a chain or tree.
std::vector<uint32_t> remote_relays(const std::vector<std::string>& hosts) {
  std::unordered_map<std::string, uint32_t> relay_of;
  std::vector<uint32_t> relays;
  for (uint32_t r = 1; r < hosts.size(); ++r) {
    if (hosts[r] == hosts[0]) continue;
    if (relay_of.emplace(hosts[r], r).second) relays.push_back(r);
  }
  return relays;
}

Resolved resolve(const RouteSpec& spec, uint32_t receivers, uint32_t remote_hosts) {
  switch (spec.shape) {
    case RouteShape::kStar: return {RouteShape::kStar, 0};
    case RouteShape::kChain: return {RouteShape::kChain, 0};
    case RouteShape::kTree: return {RouteShape::kTree, spec.degree};
    default: break;
  }
  if (remote_hosts == 0 || receivers <= 1) return {RouteShape::kStar, 0};
  if (remote_hosts > kAutoChainMaxHosts) return {RouteShape::kTree, 2};
  return {RouteShape::kChain, 0};
}

// The parent of the relay of the i-th remote host (0-based, in relay order).
uint32_t relay_parent(const Resolved& shape, const std::vector<uint32_t>& relays, size_t i) {
  if (shape.shape == RouteShape::kChain) return i == 0 ? 0 : relays[i - 1];
  // A K-ary heap over the nodes [sender, host 0, host 1, ...]: node j's parent is (j-1)/K.
  const size_t parent_node = i / shape.degree;  // (node (i+1) - 1) / K
  return parent_node == 0 ? 0 : relays[parent_node - 1];
}

std::vector<uint32_t> link_parents(const Resolved& shape, const std::vector<std::string>& hosts,
                                   const std::vector<uint32_t>& relays) {
  std::vector<uint32_t> parent(hosts.size(), 0);
  if (shape.shape == RouteShape::kStar) return parent;
  std::unordered_map<std::string, uint32_t> relay_of;
  for (size_t i = 0; i < relays.size(); ++i) {
    relay_of.emplace(hosts[relays[i]], relays[i]);
    parent[relays[i]] = relay_parent(shape, relays, i);
  }
  for (uint32_t r = 1; r < hosts.size(); ++r) {
    if (hosts[r] == hosts[0]) continue;  // the sender's host: a child of the sender
    const uint32_t relay = relay_of.at(hosts[r]);
    if (relay != r) parent[r] = relay;
  }
  return parent;
}

// Receivers in several lanes (RouteMember::lane): each lane planned on its own, as if its members
// were the only receivers, and the lanes side by side under the sender. *shape: "star" when every
// lane is one, else the first routed lane's shape and the count ("chain in 2 lanes").
void plan_lanes(const RouteSpec& spec, const std::vector<std::string>& hosts, const std::vector<uint32_t>& lane,
                std::string* shape, std::vector<uint32_t>* parent) {
  std::vector<std::pair<uint32_t, uint32_t>> by_lane;  // (lane, rank), in lane order then rank order
  for (uint32_t r = 1; r < hosts.size(); ++r) by_lane.emplace_back(lane[r], r);
  std::sort(by_lane.begin(), by_lane.end());
  parent->assign(hosts.size(), 0);
  std::string routed;
  size_t lanes = 0;
  for (size_t b = 0; b < by_lane.size();) {
    size_t e = b;
    std::vector<uint32_t> ranks;  // local rank i+1 is ranks[i]
    std::vector<std::string> local_hosts = {hosts[0]};
    for (; e < by_lane.size() && by_lane[e].first == by_lane[b].first; ++e) {
      ranks.push_back(by_lane[e].second);
      local_hosts.push_back(hosts[by_lane[e].second]);
    }
    ++lanes;
    const std::vector<uint32_t> relays = remote_relays(local_hosts);
    const Resolved r = resolve(spec, static_cast<uint32_t>(ranks.size()), static_cast<uint32_t>(relays.size()));
    if (r.shape != RouteShape::kStar && routed.empty()) routed = shape_text(r);
    const std::vector<uint32_t> local = link_parents(r, local_hosts, relays);
    for (size_t i = 0; i < ranks.size(); ++i) (*parent)[ranks[i]] = local[i + 1] == 0 ? 0 : ranks[local[i + 1] - 1];
    b = e;
  }
  *shape = routed.empty() ? "star" : routed + " in " + std::to_string(lanes) + " lanes";
}

// Versioned, so that a later encoding never collides with this one; the shape is length-prefixed
// and every parent a fixed-width little-endian u32.
uint64_t plan_digest(const std::string& shape, const std::vector<uint32_t>& parent) {
  ByteWriter w;
  w.reserve(32 + shape.size() + 4 * parent.size());
  w.str32("wsync.route.v1");
  w.str32(shape);
  w.u32(static_cast<uint32_t>(parent.size() - 1));
  for (size_t r = 1; r < parent.size(); ++r) w.u32(parent[r]);
  return checksum64(w.data().data(), w.size());
}

// Ranks in breadth-first order from `root` (root first), each at most once even in a hand-built
// plan with a cycle; depth[r] is set for every rank reached.
std::vector<uint32_t> breadth_first(const RoutePlan& plan, uint32_t root, std::vector<uint32_t>* depth) {
  std::vector<uint32_t> order;
  if (root >= plan.children.size()) return order;
  std::vector<bool> visited(plan.children.size(), false);
  if (depth != nullptr) depth->assign(plan.children.size(), 0);
  order.push_back(root);
  visited[root] = true;
  for (size_t i = 0; i < order.size(); ++i) {
    for (uint32_t c : plan.children[order[i]]) {
      if (c >= plan.children.size() || visited[c]) continue;
      visited[c] = true;
      if (depth != nullptr) (*depth)[c] = (*depth)[order[i]] + 1;
      order.push_back(c);
    }
  }
  return order;
}

// "{1,2,3}" or, past `most`, "{1,2,3,...+97}".
std::string rank_set(const std::vector<uint32_t>& ranks, size_t most) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size() && i < most; ++i) {
    if (i) s += ",";
    s += std::to_string(ranks[i]);
  }
  if (ranks.size() > most) s += ",...+" + std::to_string(ranks.size() - most);
  return s + "}";
}

// Fan-outs "p->{a,b}" in breadth-first order; a parent with one child that continues the previous
// fan-out's single child is written as a path: "0->1->3->5".
class EdgeText {
 public:
  void add(uint32_t parent, const std::vector<uint32_t>& kids) {
    if (kids.empty()) return;
    if (kids.size() == 1 && has_tail_ && tail_ == parent && groups_ <= kMaxGroups) {
      text_ += "->" + std::to_string(kids[0]);
      tail_ = kids[0];
      return;
    }
    ++groups_;
    has_tail_ = kids.size() == 1;
    tail_ = kids[0];
    if (groups_ > kMaxGroups) return;
    if (!text_.empty()) text_ += " ";
    text_ += std::to_string(parent) + "->" + (kids.size() == 1 ? std::to_string(kids[0]) : rank_set(kids, 8));
  }
  std::string str() const {
    if (groups_ <= kMaxGroups) return text_;
    return text_ + " ...+" + std::to_string(groups_ - kMaxGroups);
  }
  bool empty() const { return groups_ == 0; }

 private:
  static constexpr size_t kMaxGroups = 12;
  std::string text_;
  size_t groups_ = 0;
  bool has_tail_ = false;
  uint32_t tail_ = 0;
};

}  // namespace

wsync_status_t parse_route(const std::string& text, RouteSpec* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "parse_route: out is NULL");
  RouteSpec spec;
  if (text == "auto") {
    spec.shape = RouteShape::kAuto;
  } else if (text == "star") {
    spec.shape = RouteShape::kStar;
  } else if (text == "chain") {
    spec.shape = RouteShape::kChain;
  } else if (text == "tree") {
    spec.shape = RouteShape::kTree;
    spec.degree = 2;
  } else if (text.compare(0, 5, "tree:") == 0) {
    uint32_t k = 0;
    if (!parse_degree(text.substr(5), &k) || k < kMinTreeDegree || k > kMaxTreeDegree)
      return refuse_route(text, "has a tree degree that is not a whole number in 2..64");
    spec.shape = RouteShape::kTree;
    spec.degree = k;
  } else {
    return refuse_route(text, text.empty() ? "is empty" : "is not a route shape (names are lower-case)");
  }
  *out = spec;
  return WSYNC_OK;
}

std::string route_spec_text(const RouteSpec& spec) {
  switch (spec.shape) {
    case RouteShape::kAuto: return "auto";
    case RouteShape::kStar: return "star";
    case RouteShape::kChain: return "chain";
    case RouteShape::kTree: return "tree:" + std::to_string(spec.degree);
  }
  return "unknown";
}

wsync_status_t plan_routes(const RouteSpec& spec, const std::vector<RouteMember>& receivers,
                           const std::string& sender_host, RoutePlan* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "plan_routes: out is NULL");
  *out = RoutePlan();
  wsync_status_t st = validate_spec(spec);
  if (st != WSYNC_OK) return st;
  std::vector<std::string> hosts;
  st = hosts_by_rank(receivers, sender_host, &hosts);
  if (st != WSYNC_OK) return st;

  const uint32_t n = static_cast<uint32_t>(receivers.size());
  const std::vector<uint32_t> relays = remote_relays(hosts);
  const uint32_t remote = static_cast<uint32_t>(relays.size());
  std::vector<uint32_t> lane(n + 1, 0);
  for (const RouteMember& m : receivers) lane[m.rank] = m.lane;

  RoutePlan plan;
  if (std::all_of(lane.begin() + 1, lane.end(), [&](uint32_t l) { return l == lane[1]; })) {
    const Resolved shape = resolve(spec, n, remote);
    plan.shape = shape_text(shape);
    plan.parent = link_parents(shape, hosts, relays);
  } else {
    plan_lanes(spec, hosts, lane, &plan.shape, &plan.parent);
  }
  plan.children.assign(n + 1, {});
  for (uint32_t r = 1; r <= n; ++r) plan.children[plan.parent[r]].push_back(r);  // ascending by construction
  plan.host = std::move(hosts);
  plan.remote_hosts = remote;
  plan.digest = plan_digest(plan.shape, plan.parent);
  *out = std::move(plan);
  return WSYNC_OK;
}

std::vector<uint32_t> downstream_of(const RoutePlan& plan, uint32_t rank) {
  std::vector<uint32_t> below = breadth_first(plan, rank, nullptr);
  if (below.empty()) return below;
  below.erase(below.begin());  // `rank` itself
  std::sort(below.begin(), below.end());
  return below;
}

uint32_t route_depth(const RoutePlan& plan) {
  std::vector<uint32_t> depth;
  uint32_t deepest = 0;
  for (uint32_t r : breadth_first(plan, 0, &depth)) deepest = std::max(deepest, depth[r]);
  return deepest;
}

std::string describe_route(const RoutePlan& plan) {
  const size_t members = plan.parent.size();
  const uint32_t n = members > 0 ? static_cast<uint32_t>(members - 1) : 0;
  const bool know_hosts = plan.host.size() == members;
  EdgeText between;
  EdgeText within;
  std::vector<std::string> receiver_hosts;
  for (uint32_t p : breadth_first(plan, 0, nullptr)) {
    std::vector<uint32_t> across;
    std::vector<uint32_t> local;
    for (uint32_t c : plan.children[p]) {
      if (c >= members) continue;
      (know_hosts && plan.host[c] == plan.host[p] ? local : across).push_back(c);
    }
    between.add(p, across);
    within.add(p, local);
    if (p != 0 && know_hosts) receiver_hosts.push_back(plan.host[p]);
  }
  std::sort(receiver_hosts.begin(), receiver_hosts.end());
  const size_t host_count =
      static_cast<size_t>(std::unique(receiver_hosts.begin(), receiver_hosts.end()) - receiver_hosts.begin());

  std::string s = plan.shape + ", " + std::to_string(n) + (n == 1 ? " receiver" : " receivers");
  if (know_hosts) s += " on " + std::to_string(host_count) + (host_count == 1 ? " host" : " hosts");
  s += ", depth " + std::to_string(route_depth(plan)) + ": ";
  s += between.empty() ? "-" : between.str();
  if (!within.empty()) s += "; same host: " + within.str();
  return s;
}

}  // namespace wsync
