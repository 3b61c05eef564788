// The group's route (group option route): after every receiver joined, the route planner
// (planner/route_planner.h) decides from the hosts the receivers connected from who forwards to
// whom; each receiver is told its parent and children (ROUTE), wires its relay transports and
// answers JOINED again. The pipeline then sends to the sender's own children only, and failures
// name the members downstream of the one that failed.
#include "common/error.h"
#include "common/socket.h"
#include "control/frames.h"
#include "group/group_internal.h"

namespace wsync {
namespace {

std::string host_of(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  return colon == std::string::npos ? addr : addr.substr(0, colon);
}

RouteBody route_for(const RoutePlan& plan, uint32_t rank) {
  RouteBody b;
  b.digest = plan.digest;
  b.parent = plan.parent[rank];
  const std::vector<uint32_t>& siblings = plan.children[b.parent];
  for (size_t i = 0; i < siblings.size(); ++i)
    if (siblings[i] == rank) b.position = static_cast<uint32_t>(i + 1);
  b.parent_world = static_cast<uint32_t>(siblings.size() + 1);
  b.children = plan.children[rank];
  return b;
}

}  // namespace

wsync_status_t route_members(wsync_group_t* g, int64_t deadline) {
  if (g->peers.empty()) return WSYNC_OK;  // unmodified HTTP engines: no receiver of ours to plan for
  std::vector<RouteMember> members;
  std::string sender_host;
  for (auto& p : g->peers) {
    members.push_back(RouteMember{p->rank, host_of(p->addr)});
    if (sender_host.empty() && p->conn.open()) sender_host = local_ip(p->conn.fd());  // this host, as they see it
  }
  wsync_status_t st = plan_routes(g->route_spec, members, sender_host, &g->plan);
  if (st != WSYNC_OK) return fail_msg(st, "group '" + g->group_name + "': planning its routes: " + last_error());
  g->relays = g->plan.shape != "star";
  WSYNC_LOGI("group '%s': route %s", g->group_name.c_str(), describe_route(g->plan).c_str());
  if (route_spec_text(g->route_spec) == "star") return WSYNC_OK;  // receivers wait for no ROUTE
  for (auto& p : g->peers)
    if ((st = p->conn.send(MsgType::kRoute, encode_route(route_for(g->plan, p->rank)), remaining_ms(deadline, 1)))
        != WSYNC_OK)
      return fail_msg(st, "group init: telling " + p->conn.peer_name() + " its route: " + last_error());
  return wait_joined(g, deadline);  // each wired its relay transports
}

std::vector<uint32_t> direct_ranks(const wsync_group_t* g) {
  if (!g->relays) {
    std::vector<uint32_t> all;
    for (auto& p : g->peers) all.push_back(p->rank);
    return all;
  }
  return g->plan.children[0];
}

std::string downstream_note(const wsync_group_t* g, uint32_t rank) {
  if (!g->relays || rank >= g->plan.parent.size()) return "";
  const std::vector<uint32_t> down = downstream_of(g->plan, rank);
  if (down.empty()) return "";
  std::string s = "; downstream of it (cut off with it): rank";
  s += down.size() > 1 ? "s " : " ";
  for (size_t i = 0; i < down.size(); ++i) s += (i ? ", " : "") + std::to_string(down[i]);
  return s;
}

std::vector<Peer*> upstream_of_set(const wsync_group_t* g, const std::vector<Peer*>& set) {
  if (!g->relays) return set;
  std::vector<Peer*> out;
  for (Peer* p : set) {
    const uint32_t parent = g->plan.parent[p->rank];
    bool parent_waits = false;
    for (Peer* q : set) parent_waits |= q->rank == parent;
    if (!parent_waits) out.push_back(p);
  }
  return out;
}

}  // namespace wsync
