// The route planner: for one membership (who is on which host), which member forwards the bytes
// of an update to which. It only plans; moving pieces along the plan is the pipeline's job, and
// nothing here opens a socket. The plan is a tree rooted at the sender (rank 0): every receiver
// has exactly one parent and gets every byte from it.
//
// Shapes (group option `route`):
//  - star:   the sender sends every byte to every receiver itself (the behaviour up to 0.7).
//  - chain:  the remote hosts in a line, in order of their lowest rank: 0 -> host A -> host B -> ...
//  - tree:K: the remote hosts in a K-ary tree (K in 2..64), filled breadth-first in order of their
//            lowest rank, the sender at the root: the sender and every host feed at most K hosts.
//            `tree` is tree:2.
//  - auto:   the default; see "Why auto chooses" below.
//
// Hosts. A host is an opaque key (the address a receiver connected from). In every shape but
// star, the lowest rank on a remote host is that host's relay: it takes the bytes from upstream
// and passes them to the other receivers on its host (its children, over the host's loopback or
// shared memory), so each byte crosses each host's NIC inbound exactly once. Receivers on the
// sender's own host are direct children of the sender in every shape: they cost the sender's NIC
// nothing.
//
// Why auto chooses:
//  - star when every receiver is on the sender's host, or there is at most one receiver: no byte
//    would cross a NIC twice anyway, and a relay only adds a hop.
//  - chain over the remote hosts otherwise. With the bucket cut into pieces that each relay
//    forwards as soon as it holds them (store-and-forward per piece, NCCL's ring broadcast), every
//    link of a chain carries each byte once at the full NIC rate R (NICs are full duplex: a relay
//    receives piece i+1 while it sends piece i). An update of B bytes over H hosts takes about
//    B/R + (H-1)*piece/R, against H*B/R for a star and about K*B/R for a K-ary tree, whose relays
//    split their upload rate among K children.
//  - tree:2 over the hosts when there are more than kAutoChainMaxHosts (16) remote hosts. By
//    throughput alone a chain would win far beyond 16 hosts; the bound is for what that model
//    leaves out. A chain's depth grows with H: every hop adds its latency and its jitter, the
//    slowest link is everyone's link, each hop's bounded wait adds up in the time a failure takes
//    to be noticed and reported, and a dead relay cuts off every host behind it. A binary tree keeps
//    the depth at about log2(H) hops (5 for 20 hosts, 10 for 1000) at the cost of half the rate
//    per link, and a slow or dead relay only affects its own subtree.
//
// Lanes. Receivers may say a lane (many senders: the receivers that take the same boxes, e.g.
// each TP rank of every replica, give the same lane). Each lane is planned on its own, with the
// shape above, as if its members were the only receivers: relays forward only to receivers of
// their own lane, so a relay never passes on bytes its child did not ask for, and each sender
// feeds the first host of every lane that needs its bytes (GPU i of replica 1 relays share i to GPU
// i of replica 2, ...). Every receiver in one lane: the plan above, unchanged.
//
// The digest identifies the plan (its shape and every parent), not the membership it came from:
// two memberships that give the same tree give the same digest. Every member computes the plan
// from the same inputs and checks the digest, so a member that saw a different membership is
// caught before any byte moves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wsync.h"

namespace wsync {

// auto picks a chain up to this many remote hosts and tree:2 beyond (see above).
constexpr uint32_t kAutoChainMaxHosts = 16;
constexpr uint32_t kMinTreeDegree = 2;
constexpr uint32_t kMaxTreeDegree = 64;

enum class RouteShape { kAuto, kStar, kChain, kTree };

struct RouteSpec {
  RouteShape shape = RouteShape::kAuto;
  uint32_t degree = 2;  // kTree only: children per relay among hosts, kMinTreeDegree..kMaxTreeDegree
};

// Parses the `route` option: "auto", "star", "chain", "tree" (= tree:2), "tree:K" with K a decimal
// in 2..64 without sign or leading zero. Case-sensitive, like every other option value that names
// something. Anything else: WSYNC_ERR_INVALID_ARGUMENT naming the value and the accepted forms;
// *out is left unchanged on failure.
wsync_status_t parse_route(const std::string& text, RouteSpec* out);

// The canonical text of a spec: what parse_route accepts for it ("auto", "star", "chain", "tree:K").
std::string route_spec_text(const RouteSpec& spec);

struct RouteMember {
  uint32_t rank;     // 1..N
  std::string host;  // opaque key: equal keys are the same host
  uint32_t lane = 0;  // receivers that take the same bytes (see "Lanes" above)
};

struct RoutePlan {
  std::string shape;                            // what was chosen, auto resolved: "star", "chain", "tree:3"
  std::vector<uint32_t> parent;                 // index = rank (size N+1); parent[0] = 0, unused; 0 = the sender
  std::vector<std::vector<uint32_t>> children;  // index = rank (size N+1); children[0]: the sender's; each ascending
  std::vector<std::string> host;                // index = rank (size N+1); host[0] = the sender's host. Not in the digest
  uint32_t remote_hosts = 0;                    // hosts other than the sender's that hold a receiver
  uint64_t digest = 0;                          // see below
};
// The digest: XXH3-64 (seed 0) of, little-endian, u32 14 "wsync.route.v1", u32 len(shape) shape,
// u32 N, then u32 parent[r] for r = 1..N. A change of this encoding changes its version tag.

// Plans the routes for `receivers` (ranks 1..N, each exactly once, in any order; the result does not
// depend on the order). `sender_host` is the sender's host key. *out is replaced; on failure it is
// left empty.
// Errors: WSYNC_ERR_INVALID_ARGUMENT for no receivers, a rank 0, a rank outside 1..N (which means a
// gap), a rank given twice, a tree degree outside 2..64 or an unknown shape, the message naming the
// rank (and its hosts for a duplicate).
wsync_status_t plan_routes(const RouteSpec& spec, const std::vector<RouteMember>& receivers,
                           const std::string& sender_host, RoutePlan* out);

// Every rank below `rank` (its children, their children, ...), ascending; not `rank` itself. For 0:
// every receiver reachable from the sender. A rank outside the plan: empty. What a failure of
// `rank` cuts off, for the message that names it.
std::vector<uint32_t> downstream_of(const RoutePlan& plan, uint32_t rank);

// The longest path from the sender, in hops (1 for a star, 0 for a plan without receivers).
uint32_t route_depth(const RoutePlan& plan);

// One short line for logs, e.g.
//   "chain, 7 receivers on 4 hosts, depth 3: 0->1->3->5; same host: 0->6 1->2 3->{4,7}"
// The part before ';' is the edges between hosts (a chain of single children written as a path),
// the part after it the fan-out inside hosts; long lists are cut ("...+N").
std::string describe_route(const RoutePlan& plan);

}  // namespace wsync
