// The group's route (group option route): after every receiver joined, the route planner
// (planner/route_planner.h) decides from the hosts the receivers connected from who forwards to
// whom; each receiver is told its parent and children (ROUTE), wires its relay transports and
// answers JOINED again. The pipeline then sends to the sender's own children only, and failures
// name the members downstream of the one that failed.
#include <poll.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>

#include "common/error.h"
#include "common/socket.h"
#include "control/frames.h"
#include "group/group_internal.h"
#include "group/group_members.h"
#include "store/host_port.h"

namespace wsync {
namespace {

// Elastic groups that relay number every relay world by the group's ranks (ROUTE flag
// kRouteByRank): a joiner can then be placed below any member between updates (ROUTE_ADD).
bool by_rank(const wsync_group_t* g) { return g->route.relays && members_can_join(g); }

RouteBody route_for(const wsync_group_t* g, uint32_t rank) {
  const RoutePlan& plan = g->route.plan;
  RouteBody b;
  b.has_piece_bytes = g->route.piece_bytes != 0;
  b.piece_bytes = g->route.piece_bytes;
  b.digest = plan.digest;
  b.parent = plan.parent[rank];
  const std::vector<uint32_t>& siblings = plan.children[b.parent];
  for (size_t i = 0; i < siblings.size(); ++i)
    if (siblings[i] == rank) b.position = static_cast<uint32_t>(i + 1);
  b.parent_world = static_cast<uint32_t>(siblings.size() + 1);
  b.children = plan.children[rank];
  if (by_rank(g)) {
    b.flags = kRouteByRank;
    b.position = rank;
    b.parent_world = static_cast<uint32_t>(g->members.peers.size() + 1);
  }
  return b;
}

// The planner's route over the members (and `extra`, a joiner, when given): the planner numbers
// its receivers 1..n; rank_of maps its numbers back to ranks (rank_of[0] = 0, the sender).
wsync_status_t plan_subset(const wsync_group_t* g, const Peer* extra, RoutePlan* sub, std::vector<uint32_t>* rank_of) {
  std::vector<RouteMember> members;
  rank_of->assign(1, 0);
  auto add = [&](const Peer& p) {
    rank_of->push_back(p.rank);
    members.push_back(RouteMember{static_cast<uint32_t>(rank_of->size() - 1), host_of(p.addr), p.lane});
  };
  for (auto& p : g->members.peers)
    if (!p->dropped && (extra == nullptr || p->rank != extra->rank)) add(*p);
  if (extra != nullptr) add(*extra);
  return plan_routes(g->shape.route_spec, members, g->route.sender_host, sub);
}

// The route of the receivers that joined (elastic: the ranks absent at init are left out, then
// hang below the sender as leaves in the plan until they join and take their place: see
// route_tell_joiner). The planner
// numbers its receivers 1..n: the members are planned under such numbers and mapped back.
wsync_status_t plan_present(wsync_group_t* g, RoutePlan* out) {
  std::vector<uint32_t> rank_of;
  RoutePlan sub;
  wsync_status_t st = plan_subset(g, nullptr, &sub, &rank_of);
  if (st != WSYNC_OK) return st;
  const size_t n = g->members.peers.size();
  RoutePlan& plan = *out;
  plan = RoutePlan();
  plan.shape = sub.shape;
  plan.remote_hosts = sub.remote_hosts;
  plan.parent.assign(n + 1, 0);
  plan.children.assign(n + 1, {});
  plan.host.assign(n + 1, std::string());
  plan.host[0] = g->route.sender_host;
  for (size_t i = 1; i < rank_of.size(); ++i) {
    plan.parent[rank_of[i]] = rank_of[sub.parent[i]];
    plan.host[rank_of[i]] = sub.host[i];
  }
  for (uint32_t r = 1; r <= n; ++r) plan.children[plan.parent[r]].push_back(r);  // ascending
  plan.digest = sub.digest;  // (of the present members' tree, as the planner numbered them)
  return WSYNC_OK;
}

// Where the route's wiring is the same for every membership: no ROUTE is sent, nothing relays.
bool star_spec(const wsync_group_t* g) { return route_spec_text(g->shape.route_spec) == "star"; }

// Move `rank` below the sender, as a leaf (children[0] stays ascending); its own children too.
void hang_below_sender(RoutePlan* plan, uint32_t rank) {
  std::vector<uint32_t>& from = plan->children[plan->parent[rank]];
  from.erase(std::remove(from.begin(), from.end(), rank), from.end());
  plan->parent[rank] = 0;
  std::vector<uint32_t>& top = plan->children[0];
  top.insert(std::upper_bound(top.begin(), top.end(), rank), rank);
  const std::vector<uint32_t> below = plan->children[rank];
  for (uint32_t c : below) hang_below_sender(plan, c);
}

// The plan's edges and the members' lanes, as the caller's thread reads them (route_fits_segments);
// `joining`: a joiner about to take its slot, whose lane counts already.
void copy_parents(wsync_group_t* g, const Peer* joining = nullptr) {
  std::vector<uint32_t> lane(g->members.peers.size() + 1, 0);
  for (size_t i = 0; i < g->members.peers.size(); ++i)
    if (g->members.peers[i]) lane[i + 1] = g->members.peers[i]->lane;
  if (joining != nullptr && joining->rank < lane.size()) lane[joining->rank] = joining->lane;
  std::lock_guard<std::mutex> lock(g->route.parent_mu);
  g->route.parent = g->route.plan.parent;
  g->route.lane = std::move(lane);
}

}  // namespace

wsync_status_t route_members(wsync_group_t* g, int64_t deadline) {
  if (g->members.peers.empty()) {  // unmodified HTTP engines: no receiver of ours; every engine rank from the sender
    g->route.delivery = DeliveryPlan::star(g->shape.num_receivers, false);
    return WSYNC_OK;
  }
  std::string& sender_host = g->route.sender_host;
  for (auto& p : g->members.peers)
    if (sender_host.empty() && p->conn.open()) sender_host = local_ip(p->conn.fd());  // this host, as they see it
  wsync_status_t st = plan_present(g, &g->route.plan);
  if (st != WSYNC_OK) return fail_msg(st, "group '" + g->cfg.group_name + "': planning its routes: " + last_error());
  g->route.relays = g->route.plan.shape != "star";
  g->route.delivery = DeliveryPlan::routed(g->route.plan);
  copy_parents(g);
  // One sender that relays, piece_bytes not given: each hop costs a piece's time (a batch of 10 MB
  // is five 2 MiB pieces; docs/PERFORMANCE.md "no drain"), so smaller pieces, told in the ROUTE
  // (receivers of a star spec read no ROUTE, and a star keeps the larger pieces: UCX on one host
  // moved 2 MiB pieces 15 % faster).
  if (!star_spec(g) && g->route.relays && !g->cfg.piece_bytes && !g->shape.planned &&
      g->shape.piece_bytes > kLanePieceBytes)
    g->route.piece_bytes = kLanePieceBytes;
  WSYNC_LOGI("group '%s': route %s; pieces of %llu KiB%s", g->cfg.group_name.c_str(),
             describe_route(g->route.plan).c_str(), static_cast<unsigned long long>(route_piece_bytes(g) >> 10),
             g->route.piece_bytes != 0 ? " (chosen with the route)" : "");
  if (star_spec(g)) return WSYNC_OK;  // receivers wait for no ROUTE
  for (auto& p : g->members.peers)
    if (!p->dropped &&
        (st = p->conn.send(MsgType::kRoute, encode_route(route_for(g, p->rank)), remaining_ms(deadline, 1)))
            != WSYNC_OK)
      return fail_msg(st, "group init: telling " + p->conn.peer_name() + " its route: " + last_error());
  return wait_joined(g, deadline);  // each wired its relay transports
}

uint64_t route_piece_bytes(const wsync_group_t* g) {
  return g->route.piece_bytes != 0 ? g->route.piece_bytes : g->shape.piece_bytes;
}

namespace {

// `rank`'s place below `relay` failed it (a move or a join): no re-plan moves it below that process
// again (a later process of the relay's rank may take it).
void note_move_failed(wsync_group_t* g, uint32_t rank, uint32_t relay) {
  const Peer* r = relay >= 1 && relay <= g->members.peers.size() ? g->members.peers[relay - 1].get() : nullptr;
  if (r == nullptr) return;
  if (g->route.move_failed.size() <= rank) g->route.move_failed.resize(g->members.peers.size() + 1, {0, 0});
  if (rank < g->route.move_failed.size()) g->route.move_failed[rank] = {relay, r->accepted_ms};
}

// The parent the planner gives a joiner among the members now (0: the sender; also when planning
// fails, which the members' plan at init did not, and when the same place failed this rank last
// time: the planner would name it again, and the joiner would fail there again).
uint32_t place_joiner(wsync_group_t* g, const Peer* p) {
  std::vector<uint32_t> rank_of;
  RoutePlan sub;
  if (!g->route.relays || plan_subset(g, p, &sub, &rank_of) != WSYNC_OK) {
    clear_error();
    return 0;
  }
  const uint32_t parent = rank_of[sub.parent[rank_of.size() - 1]];
  const Peer* relay = parent >= 1 && parent <= g->members.peers.size() ? g->members.peers[parent - 1].get() : nullptr;
  if (relay == nullptr || relay->dropped || !relay->alive) return 0;
  if (p->rank < g->route.failed_place.size() && g->route.failed_place[p->rank] == parent) {
    WSYNC_LOGW("group '%s': %s goes below the sender, not below receiver rank %u, where its last place failed",
               g->cfg.group_name.c_str(), p->conn.peer_name().c_str(), parent);
    return 0;
  }
  return parent;
}

// The place below `relay` failed `rank`: its next join goes elsewhere (place_joiner).
void place_failed(wsync_group_t* g, uint32_t rank, uint32_t relay) {
  if (g->route.failed_place.size() <= rank) g->route.failed_place.resize(g->members.peers.size() + 1, 0);
  if (rank < g->route.failed_place.size()) g->route.failed_place[rank] = relay;
  note_move_failed(g, rank, relay);  // (no re-plan moves it back there)
}

// Move `rank` below `relay` (0: the sender), its children with it: a joiner (a leaf below the
// sender: every rank that is not a member is), or a member a re-plan moves.
void hang_below(RoutePlan* plan, uint32_t rank, uint32_t relay) {
  std::vector<uint32_t>& from = plan->children[plan->parent[rank]];
  from.erase(std::remove(from.begin(), from.end(), rank), from.end());
  plan->parent[rank] = relay;
  std::vector<uint32_t>& to = plan->children[relay];
  to.insert(std::upper_bound(to.begin(), to.end(), rank), rank);
}

// A joiner's ROUTE: the parent it was given (route_parent), no children; below a relay, with the
// time it tries that relay's world before it asks for a place below the sender (route_fall_back).
RouteBody joiner_route(const wsync_group_t* g, const Peer* p) {
  RouteBody b;
  b.has_piece_bytes = g->route.piece_bytes != 0;
  b.piece_bytes = g->route.piece_bytes;
  b.digest = g->route.plan.digest;
  b.parent = p->route_parent;
  b.position = p->rank;
  b.parent_world = static_cast<uint32_t>(g->members.peers.size() + 1);
  b.flags = by_rank(g) ? kRouteByRank : 0;
  if (p->route_parent != 0) {  // (half the time this sender waits for its JOINED)
    b.flags |= kRouteFallback;
    b.wire_ms = static_cast<uint32_t>(std::min<int64_t>(std::max<int64_t>(g->cfg.timeout_ms / 2, 1), UINT32_MAX));
  }
  return b;
}

}  // namespace

wsync_status_t route_tell_joiner(wsync_group_t* g, Peer* p, int64_t deadline) {
  if (star_spec(g) || g->route.plan.parent.size() <= p->rank) return WSYNC_OK;
  // (a rank that is not a member is a leaf below the sender in the plan: plan_present,
  // route_member_left; it moves below its relay when it is installed)
  p->route_parent = place_joiner(g, p);
  p->route_parent_ms = p->route_parent != 0 ? g->members.peers[p->route_parent - 1]->accepted_ms : 0;
  if (p->route_parent == 0 && p->rank < g->route.failed_place.size())
    g->route.failed_place[p->rank] = 0;  // (below the sender this time; the planner's place again the next)
  if (p->route_parent != 0)
    WSYNC_LOGI("group '%s': %s takes its place in the route below receiver rank %u", g->cfg.group_name.c_str(),
               p->conn.peer_name().c_str(), p->route_parent);
  return p->conn.send(MsgType::kRoute, encode_route(joiner_route(g, p)), remaining_ms(deadline, 1));
}

wsync_status_t route_fall_back(wsync_group_t* g, Peer* p, const std::string& why, int64_t deadline) {
  WSYNC_LOGW("group '%s': %s could not reach receiver rank %u, its place in the route (%s); it goes below the sender",
             g->cfg.group_name.c_str(), p->conn.peer_name().c_str(), p->route_parent, why.c_str());
  p->route_parent = 0;  // (this join goes below the sender; the next is placed by the planner again)
  p->route_parent_ms = 0;
  p->route_fell_back = true;
  return p->conn.send(MsgType::kRoute, encode_route(joiner_route(g, p)), remaining_ms(deadline, 1));
}

wsync_status_t route_install_joiner(wsync_group_t* g, Peer* p) {
  const uint32_t r = p->route_parent;
  p->route_moving = p->route_moved = false;
  if (g->route.relays) g->route.replan_due = true;  // (the members that stayed may have better places now)
  if (r == 0 || star_spec(g) || g->route.plan.parent.size() <= std::max(r, p->rank)) return WSYNC_OK;
  Peer* relay = g->members.peers[r - 1].get();
  wsync_status_t st = WSYNC_ERR_PEER_FAILED;
  // (the same process its ROUTE named: a later one of that rank listens elsewhere)
  if (!relay->dropped && relay->alive && relay->conn.open() && relay->accepted_ms == p->route_parent_ms &&
      (st = relay->conn.send(MsgType::kRouteAdd, encode_route_drop({p->rank}), std::min<int64_t>(g->cfg.timeout_ms, 1000))) == WSYNC_OK) {
    hang_below(&g->route.plan, p->rank, r);
    g->route.delivery = DeliveryPlan::routed(g->route.plan);
    copy_parents(g, p);
    if (p->rank < g->route.move_failed.size() && g->route.move_failed[p->rank].first == r)
      g->route.move_failed[p->rank] = {0, 0};
    return WSYNC_OK;
  }
  clear_error();
  return fail(WSYNC_ERR_PEER_FAILED, "its relay, receiver rank %u, left the group before it was installed (it may join "
              "again, and takes another place then)", r);
}

void route_joiner_failed(wsync_group_t* g, const Peer* p) {
  if (p->route_told && p->route_parent != 0) place_failed(g, p->rank, p->route_parent);
}

std::vector<uint32_t> route_member_left(wsync_group_t* g, uint32_t rank) {
  if (!g->route.relays || g->route.plan.parent.size() <= rank) return {};
  const std::vector<uint32_t> cut = downstream_of(g->route.plan, rank);
  const uint32_t parent = g->route.plan.parent[rank];
  const Peer* me = rank >= 1 && rank <= g->members.peers.size() ? g->members.peers[rank - 1].get() : nullptr;
  if (parent != 0 && me != nullptr &&
      (me->holds_version == 0 || (me->route_moved && me->holds_version == me->route_moved_holds)))
    place_failed(g, rank, parent);  // (it confirmed no version below that relay)
  g->route.replan_due = true;
  if (parent != 0 && parent <= g->members.peers.size()) {  // its relay feeds it no more
    Peer* relay = g->members.peers[parent - 1].get();
    if (!relay->dropped && relay->conn.open()) {
      const wsync_status_t st = relay->conn.send(MsgType::kRouteDrop, encode_route_drop({rank}), 200);
      if (st != WSYNC_OK) clear_error();  // (a relay that is gone is the next look's to find)
    }
  }
  hang_below_sender(&g->route.plan, rank);
  g->route.delivery = DeliveryPlan::routed(g->route.plan);
  copy_parents(g);  // (a receiver that relayed to it relays to it no more)
  return cut;
}

std::vector<Peer*> peers_upstream_first(const wsync_group_t* g) {
  std::vector<Peer*> out;
  out.reserve(g->members.peers.size());
  if (!g->route.relays || g->route.plan.children.size() != g->members.peers.size() + 1) {
    for (auto& p : g->members.peers) out.push_back(p.get());
    return out;
  }
  std::vector<uint32_t> level = g->route.plan.children[0];  // breadth first from the sender
  for (size_t i = 0; i < level.size() && level.size() <= g->members.peers.size(); ++i) {
    const uint32_t r = level[i];
    if (r == 0 || r > g->members.peers.size()) continue;
    out.push_back(g->members.peers[r - 1].get());
    level.insert(level.end(), g->route.plan.children[r].begin(), g->route.plan.children[r].end());
  }
  if (out.size() != g->members.peers.size()) {  // (a plan that is not a tree of every receiver: rank order)
    out.clear();
    for (auto& p : g->members.peers) out.push_back(p.get());
  }
  return out;
}

namespace {

// How long a receiver's close waits for its relays' closes to show: a relay's death makes its
// receivers give up within milliseconds, and on a busy host the dead relay's sockets can close
// after theirs (measured: 32 ms after a SIGKILL with both cores busy).
constexpr int kUpstreamGraceMs = 300;

}  // namespace

Peer* first_failed_upstream(wsync_group_t* g, Peer* p) {
  if (!g->route.relays || p->rank >= g->route.plan.parent.size()) return p;
  std::vector<Peer*> up;  // nearest first
  for (uint32_t r = g->route.plan.parent[p->rank]; r != 0 && r <= g->members.peers.size() && up.size() < g->members.peers.size();
       r = r < g->route.plan.parent.size() ? g->route.plan.parent[r] : 0)
    if (g->members.peers[r - 1]->alive && g->members.peers[r - 1]->conn.open()) up.push_back(g->members.peers[r - 1].get());
  // Until the grace ends, or the furthest relay upstream has closed: the furthest that closed.
  Peer* blame = p;
  size_t from = 0;  // up[from ..]: the relays above `blame`, still watched
  for (const int64_t deadline = now_ms() + kUpstreamGraceMs;;) {
    for (size_t i = up.size(); i-- > from;)
      if (up[i]->conn.hung_up()) {  // (EOF seen, or pending behind unread frames)
        blame = up[i];
        from = i + 1;
        break;
      }
    const int64_t left = deadline - now_ms();
    if (from >= up.size() || left <= 0) break;
    std::vector<pollfd> fds;
    for (size_t i = from; i < up.size(); ++i) fds.push_back(pollfd{up[i]->conn.fd(), POLLRDHUP, 0});
    ::poll(fds.data(), fds.size(), static_cast<int>(left));
  }
  return blame;
}

bool relays_to_others(const wsync_group_t* g, uint32_t rank) {
  return g->route.relays && rank < g->route.plan.parent.size() && !downstream_of(g->route.plan, rank).empty();
}

std::string downstream_note(const wsync_group_t* g, uint32_t rank) {
  if (!g->route.relays || rank >= g->route.plan.parent.size()) return "";
  const std::vector<uint32_t> down = downstream_of(g->route.plan, rank);
  if (down.empty()) return "";
  std::string s = "; downstream of it (cut off with it): rank";
  s += down.size() > 1 ? "s " : " ";
  for (size_t i = 0; i < down.size(); ++i) s += (i ? ", " : "") + std::to_string(down[i]);
  return s;
}

std::string fed_by_note(const wsync_group_t* g, uint32_t rank) {
  if (!g->route.relays || rank >= g->route.plan.parent.size()) return "";
  const uint32_t parent = g->route.plan.parent[rank];
  if (parent == 0 || parent > g->members.peers.size() || !g->members.peers[parent - 1]) return "";
  return "; fed by relay rank " + std::to_string(parent) + " (at " + g->members.peers[parent - 1]->addr + ")";
}

wsync_status_t route_fits_segments(const wsync_group_t* g, const std::vector<std::vector<uint32_t>>& segments) {
  if (!g->route.relays) return WSYNC_OK;
  // (the caller's thread: a copy of the plan's edges as they are now, never the moving `plan`; a
  // member that left relays to no one, and a joiner hangs where it was placed)
  std::vector<uint32_t> parent, lanes;
  {
    std::lock_guard<std::mutex> lock(g->route.parent_mu);
    parent = g->route.parent;
    lanes = g->route.lane;
  }
  std::vector<size_t> segment_of(parent.size(), segments.size());
  for (size_t i = 0; i < segments.size(); ++i)
    for (uint32_t r : segments[i])
      if (r < parent.size()) segment_of[r] = i;
  auto lane = [&lanes](uint32_t r) { return r < lanes.size() ? lanes[r] : 0; };
  for (uint32_t r = 1; r < parent.size(); ++r) {
    const uint32_t p = parent[r];
    if (p == 0 || p >= parent.size() || segment_of[p] == segment_of[r]) continue;
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver rank %u relays to rank %u (both in lane %u of route %s), but they "
                "take different boxes from sender %u: a relay passes on all it gets. Give the receivers that take "
                "different boxes different lanes (receiver option lane, e.g. the TP rank), or use route=star; nothing "
                "was sent", p, r, lane(r), g->route.plan.shape.c_str(), g->cfg.sender_rank);
  }
  return WSYNC_OK;
}

std::vector<Peer*> upstream_of_set(const wsync_group_t* g, const std::vector<Peer*>& set) {
  if (!g->route.relays) return set;
  std::vector<Peer*> out;
  for (Peer* p : set) {
    const uint32_t parent = g->route.plan.parent[p->rank];
    bool parent_waits = false;
    for (Peer* q : set) parent_waits |= q->rank == parent;
    if (!parent_waits) out.push_back(p);
  }
  return out;
}

namespace {

Peer* member_at(const wsync_group_t* g, uint32_t rank) {
  return rank >= 1 && rank <= g->members.peers.size() ? g->members.peers[rank - 1].get() : nullptr;
}

bool in_group(const Peer* p) { return p != nullptr && !p->dropped && p->alive; }

std::string place_name(uint32_t parent) {
  return parent == 0 ? std::string("the sender") : "receiver rank " + std::to_string(parent);
}

// `a` is `b` or below it in `plan`.
bool at_or_below(const RoutePlan& plan, uint32_t a, uint32_t b) {
  for (size_t steps = 0; steps < plan.parent.size() && a != 0; ++steps, a = plan.parent[a])
    if (a == b) return true;
  return false;
}

// The moves of one re-plan round (by rank, the new parent; kStay: none): where the planner, run
// over the members now, puts a member elsewhere than it is, to a relay in the group, not one a move
// or join failed it at, and it is not catching up. Only moves that keep the route a tree however
// many of them are taken (a member's new parent is below no member that moves, and no member that
// moves is below another's new parent's path): the others wait for a later round (*later: some
// do, after this round's moves, or a member catching up would move once it is done).
constexpr uint32_t kStay = UINT32_MAX;
std::vector<uint32_t> replan_moves(wsync_group_t* g, bool* later) {
  *later = false;
  const RoutePlan& plan = g->route.plan;
  const size_t n = g->members.peers.size();
  std::vector<uint32_t> to(n + 1, kStay);
  RoutePlan fresh;
  if (plan_present(g, &fresh) != WSYNC_OK || fresh.parent.size() != n + 1 || plan.parent.size() != n + 1) {
    clear_error();
    return to;
  }
  std::vector<uint32_t> chosen;
  bool deferred = false;  // (a later round may take it once this round's moves are done)
  for (uint32_t r = 1; r <= n; ++r) {
    const Peer* p = member_at(g, r);
    const uint32_t want = fresh.parent[r];
    if (!in_group(p) || want == plan.parent[r]) continue;
    const Peer* relay = member_at(g, want);
    if (want != 0 && (!in_group(relay) || (r < g->route.move_failed.size() &&
                                           g->route.move_failed[r] == std::make_pair(want, relay->accepted_ms))))
      continue;
    if (p->catchup.running) {  // (it moves once its catch-up is over: its first update)
      *later = true;
      continue;
    }
    bool independent = !at_or_below(plan, want, r);  // (below itself: once those below it moved)
    for (uint32_t c : chosen)
      independent &= !at_or_below(plan, want, c) && !at_or_below(plan, to[c], r);
    if (!independent) {
      deferred = true;
      continue;
    }
    to[r] = want;
    chosen.push_back(r);
  }
  *later |= deferred && !chosen.empty();  // (nothing moves now: nothing changes for them later either)
  return to;
}

// Ask `p` to take the bytes from `to` from the next update on (ROUTE_MOVE); its answer is read by
// route_move_answered.
void ask_move(wsync_group_t* g, Peer* p, uint32_t to) {
  // (it tries the relay's world for half the time the sender waits for its answer: a NACK comes first)
  const uint32_t wire_ms = static_cast<uint32_t>(std::max<int64_t>(route_move_budget_ms(g) / 2, 1));
  const wsync_status_t st = p->conn.send(MsgType::kRouteMove, encode_route_move({to, wire_ms}),
                                         std::min<int64_t>(g->cfg.timeout_ms, 1000));
  if (st != WSYNC_OK) {  // (a connection that broke: the next look removes it)
    clear_error();
    return;
  }
  p->route_moving = true;
  p->route_move_to = to;
  p->route_move_ms = to != 0 ? member_at(g, to)->accepted_ms : 0;
  WSYNC_LOGI("group '%s': the route is re-planned around the members that stayed: %s is asked to take the bytes "
             "from %s (now from %s)", g->cfg.group_name.c_str(), p->conn.peer_name().c_str(), place_name(to).c_str(),
             place_name(g->route.plan.parent[p->rank]).c_str());
}

}  // namespace

bool route_replan(wsync_group_t* g) {
  if (!g->route.replan_due || !by_rank(g) || star_spec(g) || route_moves_pending(g)) return false;
  bool later = false;
  const std::vector<uint32_t> to = replan_moves(g, &later);
  bool asked = false;
  for (uint32_t r = 1; r < to.size(); ++r)
    if (to[r] != kStay) {
      ask_move(g, member_at(g, r), to[r]);
      asked = true;
    }
  g->route.replan_due = asked || later;  // (a round that moved some looks again once they answered)
  return asked;
}

int64_t route_move_budget_ms(const wsync_group_t* g) { return std::min<int64_t>(g->cfg.timeout_ms, 10000); }

bool route_moves_pending(const wsync_group_t* g) {
  for (const auto& p : g->members.peers)
    if (in_group(p.get()) && p->route_moving) return true;
  return false;
}

void route_move_answered(wsync_group_t* g, Peer* p, const Frame& f) {
  p->route_moving = false;
  const uint32_t to = p->route_move_to, from = g->route.plan.parent[p->rank];
  StatusBody nack;
  if (f.type != static_cast<uint16_t>(MsgType::kJoined)) {
    const std::string why = decode_nack(f.body, &nack) == WSYNC_OK ? nack.reason : "a malformed NACK";
    clear_error();
    WSYNC_LOGW("group '%s': %s stays below %s: it could not take its new place below %s: %s",
               g->cfg.group_name.c_str(), p->conn.peer_name().c_str(), place_name(from).c_str(),
               place_name(to).c_str(), why.c_str());
    note_move_failed(g, p->rank, to);
    return;
  }
  // It took the bytes from its old place for the last time: its old relay feeds it no more.
  Peer* old_relay = member_at(g, from);
  if (in_group(old_relay) && old_relay->conn.open() &&
      old_relay->conn.send(MsgType::kRouteDrop, encode_route_drop({p->rank}), 200) != WSYNC_OK)
    clear_error();  // (a relay that is gone is the next look's to find)
  Peer* relay = member_at(g, to);
  uint32_t now_below = to;
  if (to != 0 && !(in_group(relay) && relay->conn.open() && relay->accepted_ms == p->route_move_ms &&
                   relay->conn.send(MsgType::kRouteAdd, encode_route_drop({p->rank}),
                                    std::min<int64_t>(g->cfg.timeout_ms, 1000)) == WSYNC_OK)) {
    clear_error();  // its new relay left meanwhile: below the sender, wired in at its next answer
    WSYNC_LOGW("group '%s': %s moved below receiver rank %u, which left meanwhile; it goes below the sender",
               g->cfg.group_name.c_str(), p->conn.peer_name().c_str(), to);
    note_move_failed(g, p->rank, to);
    now_below = 0;
  }
  hang_below(&g->route.plan, p->rank, now_below);
  g->route.delivery = DeliveryPlan::routed(g->route.plan);
  copy_parents(g);
  p->route_moved = true;
  p->route_moved_holds = p->holds_version;
  if (now_below != to) {
    ask_move(g, p, 0);
    return;
  }
  WSYNC_LOGI("group '%s': %s takes the bytes from %s now, not from %s (the route re-planned around the members "
             "that stayed)", g->cfg.group_name.c_str(), p->conn.peer_name().c_str(), place_name(to).c_str(),
             place_name(from).c_str());
}

}  // namespace wsync
