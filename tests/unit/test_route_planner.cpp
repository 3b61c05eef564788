// The route planner: every shape checked for what a transfer depends on (each receiver reached
// from the sender exactly once, each remote host's NIC crossed once per byte, the fan-out bound),
// on hand-worked examples and on random memberships; auto's choices; the digest every member
// compares; and the `route` option's parser.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "planner/route_planner.h"

namespace wsync {
namespace {

const std::string kSenderHost = "198.18.0.1";

std::string host_ip(uint32_t i) { return "198.18.1." + std::to_string(i); }

// Receivers from the host of each rank: hosts[0] is rank 1's host, and so on.
std::vector<RouteMember> members(const std::vector<std::string>& hosts) {
  std::vector<RouteMember> m;
  for (size_t i = 0; i < hosts.size(); ++i) m.push_back(RouteMember{static_cast<uint32_t>(i + 1), hosts[i]});
  return m;
}

// `count` remote hosts with `per_host` receivers each, ranks dealt round-robin over the hosts
// (rank 1 on host 0, rank 2 on host 1, ...), so a host's ranks are not consecutive.
std::vector<std::string> spread(uint32_t count, uint32_t per_host) {
  std::vector<std::string> hosts;
  for (uint32_t i = 0; i < count * per_host; ++i) hosts.push_back(host_ip(i % count));
  return hosts;
}

RoutePlan plan_of(const RouteSpec& spec, const std::vector<std::string>& hosts) {
  RoutePlan plan;
  EXPECT_EQ(plan_routes(spec, members(hosts), kSenderHost, &plan), WSYNC_OK) << last_error();
  return plan;
}

RouteSpec spec_of(const std::string& text) {
  RouteSpec spec;
  EXPECT_EQ(parse_route(text, &spec), WSYNC_OK) << last_error();
  return spec;
}

// A tree rooted at the sender that holds every receiver once: parent and children agree, children
// are ascending, and every receiver's walk up reaches the sender without a cycle.
void expect_spanning_tree(const RoutePlan& plan, uint32_t n) {
  ASSERT_EQ(plan.parent.size(), n + 1);
  ASSERT_EQ(plan.children.size(), n + 1);
  ASSERT_EQ(plan.host.size(), n + 1);
  std::vector<uint32_t> listed(n + 1, 0);
  for (uint32_t p = 0; p <= n; ++p) {
    EXPECT_TRUE(std::is_sorted(plan.children[p].begin(), plan.children[p].end())) << "children of " << p;
    for (uint32_t c : plan.children[p]) {
      ASSERT_GE(c, 1u);
      ASSERT_LE(c, n);
      EXPECT_EQ(plan.parent[c], p) << "rank " << c << " is listed under " << p;
      ++listed[c];
    }
  }
  for (uint32_t r = 1; r <= n; ++r) {
    EXPECT_EQ(listed[r], 1u) << "rank " << r << " is some member's child " << listed[r] << " times";
    uint32_t at = r;
    uint32_t hops = 0;
    while (at != 0 && hops <= n) {
      ASSERT_LE(plan.parent[at], n);
      at = plan.parent[at];
      ++hops;
    }
    EXPECT_EQ(at, 0u) << "rank " << r << " does not reach the sender (a cycle)";
  }
  std::vector<uint32_t> all;
  for (uint32_t r = 1; r <= n; ++r) all.push_back(r);
  EXPECT_EQ(downstream_of(plan, 0), all);
}

// For each host, the edges that enter it from another host: what its NIC receives per byte.
std::map<std::string, uint32_t> nic_crossings(const RoutePlan& plan) {
  std::map<std::string, uint32_t> in;
  in[plan.host[0]] = 0;
  for (uint32_t r = 1; r < plan.parent.size(); ++r) {
    uint32_t& count = in[plan.host[r]];
    if (plan.host[plan.parent[r]] != plan.host[r]) ++count;
  }
  return in;
}

void expect_each_nic_once(const RoutePlan& plan) {
  for (const auto& [host, count] : nic_crossings(plan)) {
    if (host == plan.host[0])
      EXPECT_EQ(count, 0u) << "the sender's host " << host << " receives bytes (" << plan.shape << ")";
    else
      EXPECT_EQ(count, 1u) << "host " << host << " receives each byte " << count << " times (" << plan.shape << ")";
  }
}

// The lowest rank of every host.
std::map<std::string, uint32_t> relays_of(const RoutePlan& plan) {
  std::map<std::string, uint32_t> relay;
  for (uint32_t r = 1; r < plan.host.size(); ++r) relay.emplace(plan.host[r], r);  // first = lowest
  return relay;
}

// Receivers on the sender's host are the sender's children; on a remote host, every receiver but
// the lowest rank is a child of the lowest rank.
void expect_same_host_children(const RoutePlan& plan) {
  const std::map<std::string, uint32_t> relay = relays_of(plan);
  for (uint32_t r = 1; r < plan.host.size(); ++r) {
    if (plan.host[r] == plan.host[0]) {
      EXPECT_EQ(plan.parent[r], 0u) << "rank " << r << " shares the sender's host";
    } else if (relay.at(plan.host[r]) != r) {
      EXPECT_EQ(plan.parent[r], relay.at(plan.host[r])) << "rank " << r << " on " << plan.host[r];
    } else {
      EXPECT_NE(plan.host[plan.parent[r]], plan.host[r]) << "relay " << r << " takes bytes from its own host";
    }
  }
}

// The most hosts that the sender or one relay feeds.
uint32_t max_host_fanout(const RoutePlan& plan) {
  uint32_t most = 0;
  for (uint32_t p = 0; p < plan.children.size(); ++p) {
    uint32_t across = 0;
    for (uint32_t c : plan.children[p]) across += plan.host[c] != plan.host[p];
    most = std::max(most, across);
  }
  return most;
}

TEST(RoutePlanner, StarMakesEveryReceiverTheSendersChild) {
  const std::vector<std::string> hosts = {host_ip(1), host_ip(1), kSenderHost, host_ip(2), host_ip(3)};
  const RoutePlan plan = plan_of(spec_of("star"), hosts);
  expect_spanning_tree(plan, 5);
  EXPECT_EQ(plan.shape, "star");
  for (uint32_t r = 1; r <= 5; ++r) EXPECT_EQ(plan.parent[r], 0u);
  EXPECT_EQ(plan.children[0], (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(route_depth(plan), 1u);
  EXPECT_EQ(plan.remote_hosts, 3u);
  // A star is today's behaviour: host 1's NIC takes each byte twice.
  EXPECT_EQ(nic_crossings(plan)[host_ip(1)], 2u);
}

// Hosts A(1,2) B(3,4,7) C(5) and the sender's own host (6): the chain follows the hosts' lowest
// ranks, 1 then 3 then 5.
TEST(RoutePlanner, ChainRunsThroughOneRelayPerHost) {
  const std::string a = host_ip(10), b = host_ip(11), c = host_ip(12);
  const std::vector<std::string> hosts = {a, a, b, b, c, kSenderHost, b};
  const RoutePlan plan = plan_of(spec_of("chain"), hosts);
  expect_spanning_tree(plan, 7);
  EXPECT_EQ(plan.shape, "chain");
  EXPECT_EQ(plan.parent, (std::vector<uint32_t>{0, 0, 1, 1, 3, 3, 0, 3}));
  EXPECT_EQ(plan.children[0], (std::vector<uint32_t>{1, 6}));
  EXPECT_EQ(plan.children[3], (std::vector<uint32_t>{4, 5, 7}));
  EXPECT_EQ(route_depth(plan), 3u);
  EXPECT_EQ(plan.remote_hosts, 3u);
  expect_each_nic_once(plan);
  expect_same_host_children(plan);
  EXPECT_EQ(downstream_of(plan, 1), (std::vector<uint32_t>{2, 3, 4, 5, 7}));
  EXPECT_EQ(downstream_of(plan, 3), (std::vector<uint32_t>{4, 5, 7}));
  EXPECT_EQ(describe_route(plan),
            "chain, 7 receivers on 4 hosts, depth 3: 0->1->3->5; same host: 0->6 1->2 3->{4,7}");
}

// Five hosts of two receivers, ranks dealt round-robin: relays are ranks 1..5 (hosts 0..4), their
// partners 6..10. Breadth-first binary tree: 0->{1,2}, 1->{3,4}, 2->{5}.
TEST(RoutePlanner, TreeFillsHostsBreadthFirstByRank) {
  const RoutePlan plan = plan_of(spec_of("tree"), spread(5, 2));
  expect_spanning_tree(plan, 10);
  EXPECT_EQ(plan.shape, "tree:2");
  EXPECT_EQ(plan.parent, (std::vector<uint32_t>{0, 0, 0, 1, 1, 2, 1, 2, 3, 4, 5}));
  EXPECT_EQ(route_depth(plan), 3u);  // 0 -> 1 -> 3 -> 8
  expect_each_nic_once(plan);
  expect_same_host_children(plan);
  EXPECT_EQ(describe_route(plan),
            "tree:2, 10 receivers on 5 hosts, depth 3: 0->{1,2} 1->{3,4} 2->5; same host: 1->6 2->7 3->8 4->9 5->10");

  const RoutePlan three = plan_of(spec_of("tree:3"), spread(5, 2));
  EXPECT_EQ(three.shape, "tree:3");
  EXPECT_EQ(three.parent, (std::vector<uint32_t>{0, 0, 0, 0, 1, 1, 1, 2, 3, 4, 5}));
}

TEST(RoutePlanner, TreeDegreeBoundsEachRelaysHosts) {
  for (uint32_t k : {2u, 3u, 4u, 7u, 64u}) {
    for (uint32_t hosts : {1u, 2u, 5u, 40u, 200u}) {
      std::vector<std::string> h = spread(hosts, 3);
      h.push_back(kSenderHost);  // local receivers do not count against the bound
      h.push_back(kSenderHost);
      RouteSpec spec;
      spec.shape = RouteShape::kTree;
      spec.degree = k;
      const RoutePlan plan = plan_of(spec, h);
      SCOPED_TRACE("tree:" + std::to_string(k) + " over " + std::to_string(hosts) + " hosts");
      expect_spanning_tree(plan, static_cast<uint32_t>(h.size()));
      EXPECT_EQ(max_host_fanout(plan), std::min(k, hosts));
      // A full K-ary tree: relays at depth d number K^d, so the hosts reach depth ceil(log_K(hosts(K-1)+1)),
      // one more hop for their local children.
      uint32_t levels = 0;
      for (uint64_t filled = 0, width = 1; filled < hosts; ++levels) {
        width *= k;
        filled += width;
      }
      EXPECT_EQ(route_depth(plan), levels + 1);
      expect_each_nic_once(plan);
      expect_same_host_children(plan);
    }
  }
}

// Random memberships, every shape: the invariants above hold whatever the hosts and the order the
// receivers are listed in.
TEST(RoutePlanner, InvariantsOnRandomMemberships) {
  std::mt19937 rng(20240611);
  const std::vector<std::string> shapes = {"auto", "star", "chain", "tree", "tree:3", "tree:16", "tree:64"};
  for (int round = 0; round < 300; ++round) {
    const uint32_t n = 1 + rng() % 150;
    const uint32_t host_count = 1 + rng() % 40;
    std::vector<std::string> hosts;
    for (uint32_t r = 1; r <= n; ++r) {
      const uint32_t h = rng() % (host_count + 1);  // h == host_count: the sender's host
      hosts.push_back(h == host_count ? kSenderHost : host_ip(h));
    }
    std::vector<RouteMember> listed = members(hosts);
    std::shuffle(listed.begin(), listed.end(), rng);
    for (const std::string& text : shapes) {
      RoutePlan plan;
      ASSERT_EQ(plan_routes(spec_of(text), listed, kSenderHost, &plan), WSYNC_OK) << last_error();
      SCOPED_TRACE("round " + std::to_string(round) + ", route " + text + " -> " + plan.shape);
      expect_spanning_tree(plan, n);
      if (plan.shape == "star") {
        EXPECT_EQ(plan.children[0].size(), n);
        continue;
      }
      expect_each_nic_once(plan);
      expect_same_host_children(plan);
      if (plan.shape.compare(0, 5, "tree:") == 0)
        EXPECT_LE(max_host_fanout(plan), std::stoul(plan.shape.substr(5)));
      else
        EXPECT_LE(max_host_fanout(plan), 1u);
    }
  }
}

// Lanes: TP-2 receivers of 3 replicas, each on a host of its own, and 2 more on the sender's host.
// Each lane is a chain of its own (TP rank t of replica 1 -> of replica 2 -> ...), relays never
// feed another lane, each host's NIC takes each of its lane's bytes once, and one lane for all is
// the plan without lanes.
TEST(RoutePlanner, LanesAreRoutedEachOnItsOwn) {
  std::vector<RouteMember> m;
  for (uint32_t r = 1; r <= 6; ++r) m.push_back(RouteMember{r, host_ip(r), (r - 1) % 2});  // rank r: replica (r-1)/2
  m.push_back(RouteMember{7, kSenderHost, 0});
  m.push_back(RouteMember{8, kSenderHost, 1});
  for (const char* shape : {"auto", "chain", "tree:2"}) {
    RoutePlan plan;
    ASSERT_EQ(plan_routes(spec_of(shape), m, kSenderHost, &plan), WSYNC_OK) << last_error();
    expect_spanning_tree(plan, 8);
    expect_each_nic_once(plan);
    for (uint32_t r = 1; r <= 8; ++r) {
      if (plan.parent[r] != 0) {
        EXPECT_EQ(m[plan.parent[r] - 1].lane, m[r - 1].lane) << shape << ": rank " << r;
      }
    }
    EXPECT_NE(plan.shape.find("in 2 lanes"), std::string::npos) << plan.shape;
  }
  RoutePlan chain;
  ASSERT_EQ(plan_routes(spec_of("chain"), m, kSenderHost, &chain), WSYNC_OK);
  EXPECT_EQ(chain.shape, "chain in 2 lanes");
  EXPECT_EQ(chain.children[0], (std::vector<uint32_t>{1, 2, 7, 8}));  // each lane's first host, and the local ones
  EXPECT_EQ(chain.parent[3], 1u);
  EXPECT_EQ(chain.parent[5], 3u);
  EXPECT_EQ(chain.parent[4], 2u);
  EXPECT_EQ(chain.parent[6], 4u);
  RoutePlan star;  // one receiver per lane, or star asked: no relays
  ASSERT_EQ(plan_routes(spec_of("star"), m, kSenderHost, &star), WSYNC_OK);
  EXPECT_EQ(star.shape, "star");
  for (RouteMember& x : m) x.lane = 7;
  RoutePlan one, plain;
  ASSERT_EQ(plan_routes(spec_of("chain"), m, kSenderHost, &one), WSYNC_OK);
  for (RouteMember& x : m) x.lane = 0;
  ASSERT_EQ(plan_routes(spec_of("chain"), m, kSenderHost, &plain), WSYNC_OK);
  EXPECT_EQ(one.parent, plain.parent);
  EXPECT_EQ(one.digest, plain.digest);
}

TEST(RoutePlanner, AutoChoosesByHostCount) {
  const RouteSpec automatic;  // the default
  EXPECT_EQ(automatic.shape, RouteShape::kAuto);

  // Everyone on the sender's host: a relay would only add a hop.
  const RoutePlan local = plan_of(automatic, std::vector<std::string>(6, kSenderHost));
  EXPECT_EQ(local.shape, "star");
  EXPECT_EQ(local.remote_hosts, 0u);
  EXPECT_EQ(route_depth(local), 1u);

  EXPECT_EQ(plan_of(automatic, {host_ip(1)}).shape, "star");

  // One remote host with three receivers: its relay passes the bytes on, so the NIC takes them once.
  const RoutePlan one_host = plan_of(automatic, {host_ip(1), host_ip(1), host_ip(1)});
  EXPECT_EQ(one_host.shape, "chain");
  EXPECT_EQ(one_host.parent, (std::vector<uint32_t>{0, 0, 1, 1}));

  std::vector<std::string> eight = spread(8, 4);
  eight.push_back(kSenderHost);
  const RoutePlan chain = plan_of(automatic, eight);
  EXPECT_EQ(chain.shape, "chain");
  EXPECT_EQ(route_depth(chain), 9u);  // 8 relays in a line, then their local children

  EXPECT_EQ(plan_of(automatic, spread(kAutoChainMaxHosts, 1)).shape, "chain");
  EXPECT_EQ(plan_of(automatic, spread(kAutoChainMaxHosts + 1, 1)).shape, "tree:2");

  const RoutePlan tree = plan_of(automatic, spread(20, 2));
  EXPECT_EQ(tree.shape, "tree:2");
  EXPECT_EQ(route_depth(tree), 5u);  // 2 + 4 + 8 hosts, then 6 of 16 at depth 4, then local children
  expect_each_nic_once(tree);
}

TEST(RoutePlanner, DigestIdentifiesThePlan) {
  const std::vector<std::string> hosts = {host_ip(1), host_ip(2), host_ip(1), kSenderHost, host_ip(3), host_ip(2)};
  const RoutePlan a = plan_of(spec_of("chain"), hosts);
  EXPECT_NE(a.digest, 0u);
  EXPECT_EQ(plan_of(spec_of("chain"), hosts).digest, a.digest);

  // The order the receivers come in (the order they connected) changes nothing.
  std::vector<RouteMember> reversed = members(hosts);
  std::reverse(reversed.begin(), reversed.end());
  RoutePlan b;
  ASSERT_EQ(plan_routes(spec_of("chain"), reversed, kSenderHost, &b), WSYNC_OK);
  EXPECT_EQ(b.digest, a.digest);
  EXPECT_EQ(b.parent, a.parent);

  // auto resolves to chain here: the same plan, the same digest.
  EXPECT_EQ(plan_of(RouteSpec(), hosts).digest, a.digest);

  std::set<uint64_t> distinct = {a.digest};
  for (const char* other : {"star", "tree", "tree:3"}) distinct.insert(plan_of(spec_of(other), hosts).digest);
  EXPECT_EQ(distinct.size(), 4u);

  // With a single remote host chain and tree:2 have the same parents; the shape still tells them apart.
  const std::vector<std::string> one = {host_ip(1), host_ip(1)};
  EXPECT_EQ(plan_of(spec_of("chain"), one).parent, plan_of(spec_of("tree"), one).parent);
  EXPECT_NE(plan_of(spec_of("chain"), one).digest, plan_of(spec_of("tree"), one).digest);

  // A different membership: one receiver on another host, or one more receiver.
  std::vector<std::string> moved = hosts;
  moved[2] = host_ip(3);
  EXPECT_NE(plan_of(spec_of("chain"), moved).digest, a.digest);
  std::vector<std::string> grown = hosts;
  grown.push_back(host_ip(3));
  EXPECT_NE(plan_of(spec_of("chain"), grown).digest, a.digest);

  // The digest is of the plan: renaming every host gives the same tree and the same digest.
  std::vector<std::string> renamed;
  for (const std::string& h : hosts) renamed.push_back(h == kSenderHost ? h : h + "0");
  EXPECT_EQ(plan_of(spec_of("chain"), renamed).digest, a.digest);
}

// Members of different builds compare digests: the encoding must not change by accident. If it has
// to change, change its version tag ("wsync.route.v1") and this value together. The value was
// computed apart from the planner, from the encoding the header documents, in plain C over libxxhash.
TEST(RoutePlanner, DigestEncodingIsPinned) {
  const RoutePlan plan = plan_of(spec_of("chain"), {host_ip(1), host_ip(1), host_ip(2)});
  EXPECT_EQ(plan.parent, (std::vector<uint32_t>{0, 0, 1, 1}));
  EXPECT_EQ(plan.digest, 0x96be7ecf393b4a92ull) << std::hex << "digest 0x" << plan.digest;
}

// Hand-built plans, including one no planner would produce: a cycle cut off from the sender must
// not hang the walkers.
TEST(RoutePlanner, DownstreamAndDepthOnHandBuiltPlans) {
  RoutePlan plan;
  plan.shape = "tree:2";
  //   0 -> {1, 2}, 1 -> {3, 4}, 4 -> {5}, 2 -> {6}
  plan.parent = {0, 0, 0, 1, 1, 4, 2};
  plan.children = {{1, 2}, {3, 4}, {6}, {}, {5}, {}, {}};
  EXPECT_EQ(downstream_of(plan, 0), (std::vector<uint32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(downstream_of(plan, 1), (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(downstream_of(plan, 4), (std::vector<uint32_t>{5}));
  EXPECT_EQ(downstream_of(plan, 2), (std::vector<uint32_t>{6}));
  EXPECT_TRUE(downstream_of(plan, 5).empty());
  EXPECT_TRUE(downstream_of(plan, 7).empty());
  EXPECT_TRUE(downstream_of(plan, UINT32_MAX).empty());
  EXPECT_EQ(route_depth(plan), 3u);
  EXPECT_EQ(describe_route(plan), "tree:2, 6 receivers, depth 3: 0->{1,2} 1->{3,4} 2->6 4->5");

  RoutePlan line;
  line.shape = "chain";
  line.parent = {0, 0, 1, 2, 3};
  line.children = {{1}, {2}, {3}, {4}, {}};
  EXPECT_EQ(route_depth(line), 4u);
  EXPECT_EQ(downstream_of(line, 2), (std::vector<uint32_t>{3, 4}));

  RoutePlan broken;
  broken.parent = {0, 0, 3, 2};
  broken.children = {{1}, {}, {3}, {2}};  // 2 <-> 3, unreachable from the sender
  EXPECT_EQ(downstream_of(broken, 0), (std::vector<uint32_t>{1}));
  EXPECT_EQ(downstream_of(broken, 2), (std::vector<uint32_t>{3}));
  EXPECT_EQ(route_depth(broken), 1u);

  EXPECT_EQ(route_depth(RoutePlan()), 0u);
  EXPECT_TRUE(downstream_of(RoutePlan(), 0).empty());
}

TEST(RoutePlanner, DescriptionStaysShort) {
  const RoutePlan star = plan_of(spec_of("star"), spread(1000, 1));
  const std::string line = describe_route(star);
  EXPECT_LT(line.size(), 200u) << line;
  EXPECT_EQ(line, "star, 1000 receivers on 1000 hosts, depth 1: 0->{1,2,3,4,5,6,7,8,...+992}");

  const std::string tree = describe_route(plan_of(spec_of("tree:4"), spread(500, 4)));
  EXPECT_LT(tree.size(), 600u) << tree;
  EXPECT_NE(tree.find("...+"), std::string::npos) << tree;
  EXPECT_EQ(tree.find('\n'), std::string::npos);
}

TEST(RoutePlanner, ParseRouteAcceptsTheDocumentedForms) {
  struct Case {
    const char* text;
    RouteShape shape;
    uint32_t degree;
    const char* canonical;
  };
  for (const Case& c : {Case{"auto", RouteShape::kAuto, 2, "auto"}, Case{"star", RouteShape::kStar, 2, "star"},
                        Case{"chain", RouteShape::kChain, 2, "chain"}, Case{"tree", RouteShape::kTree, 2, "tree:2"},
                        Case{"tree:2", RouteShape::kTree, 2, "tree:2"}, Case{"tree:3", RouteShape::kTree, 3, "tree:3"},
                        Case{"tree:64", RouteShape::kTree, 64, "tree:64"}}) {
    RouteSpec spec;
    ASSERT_EQ(parse_route(c.text, &spec), WSYNC_OK) << c.text << ": " << last_error();
    EXPECT_EQ(spec.shape, c.shape) << c.text;
    if (c.shape == RouteShape::kTree) {
      EXPECT_EQ(spec.degree, c.degree) << c.text;
    }
    EXPECT_EQ(route_spec_text(spec), c.canonical);
  }
}

TEST(RoutePlanner, ParseRouteRefusesEverythingElse) {
  // Case-sensitive like the other option values that name something: "Star" is refused, not guessed.
  const std::vector<std::string> refused = {"tree:1",  "tree:65", "tree:100", "tree:0", "tree:x", "tree:",
                                            "tree:02", "tree:-2", "tree:+2",  "tree:2 ", "",       "Star",
                                            "AUTO",    " star",   "ring",     "tree2",   "tree:4294967298",
                                            std::string("star\0x", 6)};
  for (const std::string& text : refused) {
    RouteSpec spec;
    spec.shape = RouteShape::kChain;
    spec.degree = 9;
    EXPECT_EQ(parse_route(text, &spec), WSYNC_ERR_INVALID_ARGUMENT) << "'" << text << "' was accepted";
    EXPECT_EQ(spec.shape, RouteShape::kChain) << "'" << text << "' changed the spec";
    EXPECT_EQ(spec.degree, 9u);
    const std::string& msg = last_error();
    EXPECT_NE(msg.find("route"), std::string::npos) << msg;
    EXPECT_NE(msg.find("auto, star, chain, tree, tree:K with K in 2..64"), std::string::npos) << msg;
    if (!text.empty() && text.find('\0') == std::string::npos) {
      EXPECT_NE(msg.find("'" + text + "'"), std::string::npos) << msg;
    }
  }
  EXPECT_NE(last_error().find("\\x00"), std::string::npos) << "a NUL is shown escaped: " << last_error();
  EXPECT_EQ(parse_route("star", nullptr), WSYNC_ERR_INVALID_ARGUMENT);
}

TEST(RoutePlanner, RefusesBadMemberships) {
  RoutePlan plan;
  plan.shape = "left over";

  EXPECT_EQ(plan_routes(RouteSpec(), {}, kSenderHost, &plan), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("no receivers"), std::string::npos) << last_error();
  EXPECT_TRUE(plan.shape.empty());
  EXPECT_TRUE(plan.parent.empty());

  EXPECT_EQ(plan_routes(RouteSpec(), {{1, "a"}, {0, "b"}}, kSenderHost, &plan), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("rank 0"), std::string::npos) << last_error();

  EXPECT_EQ(plan_routes(RouteSpec(), {{1, "a"}, {2, "b"}, {2, "c"}}, kSenderHost, &plan),
            WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("rank 2 appears twice (hosts 'b' and 'c')"), std::string::npos) << last_error();

  // 1, 2, 4: three receivers, so rank 3 is missing and 4 is out of range.
  EXPECT_EQ(plan_routes(RouteSpec(), {{1, "a"}, {2, "b"}, {4, "c"}}, kSenderHost, &plan),
            WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("rank 4 (host 'c') is outside 1..3"), std::string::npos) << last_error();
  EXPECT_TRUE(plan.parent.empty());

  RouteSpec bad_tree;
  bad_tree.shape = RouteShape::kTree;
  for (uint32_t k : {0u, 1u, 65u}) {
    bad_tree.degree = k;
    EXPECT_EQ(plan_routes(bad_tree, {{1, "a"}}, kSenderHost, &plan), WSYNC_ERR_INVALID_ARGUMENT) << k;
    EXPECT_NE(last_error().find("tree:" + std::to_string(k)), std::string::npos) << last_error();
  }
  RouteSpec unknown;
  unknown.shape = static_cast<RouteShape>(42);
  EXPECT_EQ(plan_routes(unknown, {{1, "a"}}, kSenderHost, &plan), WSYNC_ERR_INVALID_ARGUMENT);

  EXPECT_EQ(plan_routes(RouteSpec(), {{1, "a"}}, kSenderHost, nullptr), WSYNC_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace wsync
