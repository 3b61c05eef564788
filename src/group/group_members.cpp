// See group_members.h.
#include "group/group_members.h"

#include <algorithm>

#include "common/error.h"
#include "group/group_internal.h"

namespace wsync {
namespace {

void stop_waiting_for(Flight* flight, Peer* p) {
  if (flight == nullptr) return;
  for (auto& b : *flight) {
    b->want_ready.erase(std::remove(b->want_ready.begin(), b->want_ready.end(), p), b->want_ready.end());
    b->want_ack.erase(std::remove(b->want_ack.begin(), b->want_ack.end(), p), b->want_ack.end());
  }
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

}  // namespace

wsync_status_t members_check_options(wsync_group_t* g) {
  if (g->commit_quorum != 0 && !g->elastic)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'commit_quorum' needs membership=elastic (a fixed group's update "
                "commits on every receiver or fails)");
  if (g->commit_quorum > g->num_receivers && g->num_receivers != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'commit_quorum' is %u but the group has %u receiver(s)",
                g->commit_quorum, g->num_receivers);
  if (!g->elastic) return WSYNC_OK;
  if (!g->engines_spec.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "membership=elastic is not supported with HTTP engines (option 'engines') "
                "yet: their servers are dropped and brought back by a later release");
  if (g->planned)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "membership=elastic is not supported with option num_senders yet");
  if (g->route_set && g->route_spec.shape != RouteShape::kStar)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'route' must be star with membership=elastic (a relay that left "
                "would take the receivers behind it along)");
  g->route_spec.shape = RouteShape::kStar;
  return WSYNC_OK;
}

wsync_status_t members_check_transport(wsync_group_t* g) {
  if (!g->elastic || (g->transport.table->caps & WSYNC_TRANSPORT_CAP_FORGET_ONE)) return WSYNC_OK;
  return fail(WSYNC_ERR_UNSUPPORTED, "membership=elastic needs a transport that can leave one receiver out and go on "
              "with the others (WSYNC_TRANSPORT_CAP_FORGET_ONE); transport '%s' cannot", g->transport.table->name);
}

void members_init(wsync_group_t* g) {
  std::lock_guard<std::mutex> lk(g->shared.mu);
  g->shared.members.clear();
  for (const auto& p : g->peers) g->shared.members.push_back(p->rank);
  if (g->peers.empty())  // unmodified HTTP engines: no control channel, the ranks all the same
    for (uint32_t r = 1; r <= g->num_receivers; ++r) g->shared.members.push_back(r);
}

uint32_t members_left_in(const wsync_group_t* g) {
  uint32_t n = 0;
  for (const auto& p : g->peers) n += p->dropped ? 0 : 1;
  return n;
}

wsync_status_t member_failed(wsync_group_t* g, Flight* flight, Peer* p, wsync_status_t st) {
  const std::string why = last_error();
  // Only what the receiver did: not the group's abort, nor a failure of the sender's own.
  if (!g->elastic || g->aborted.load() || st == WSYNC_ERR_ABORTED || st == WSYNC_ERR_INVALID_ARGUMENT ||
      st == WSYNC_ERR_INTERNAL || st == WSYNC_ERR_OUT_OF_MEMORY)
    return st;
  if (p->dropped) return WSYNC_OK;
  p->dropped = true;
  if (g->transport_self && !p->left && p->alive) g->transport.table->forget_peer(g->transport_self, p->rank);
  p->alive = false;  // (peer_lost forgot it already)
  p->conn.close();  // it sees the group end
  stop_waiting_for(flight, p);
  g->dropped_in_update.push_back(why);
  {
    std::lock_guard<std::mutex> lk(g->shared.mu);
    MemberEvent e;
    e.kind = WSYNC_MEMBER_LEFT;
    e.rank = p->rank;
    e.status = st;
    e.update = g->shared.stats.updates + 1;
    e.reason = why;
    g->shared.member_events.push_back(std::move(e));
    auto& m = g->shared.members;
    m.erase(std::remove(m.begin(), m.end(), p->rank), m.end());
  }
  WSYNC_LOGW("group '%s': receiver rank %u left the group (%u remain): %s", g->group_name.c_str(), p->rank,
             members_left_in(g), why.c_str());
  if (members_left_in(g) == 0)
    return fail(WSYNC_ERR_PEER_FAILED, "every receiver of group '%s' has left; the last: %s", g->group_name.c_str(),
                why.c_str());
  clear_error();
  return WSYNC_OK;
}

wsync_status_t members_may_commit(wsync_group_t* g, uint64_t version) {
  if (!g->elastic) return WSYNC_OK;
  const uint32_t left = members_left_in(g);
  const uint32_t quorum = g->commit_quorum;
  if (quorum != 0 && left < quorum && g->dropped_in_update.empty())
    return fail(WSYNC_ERR_PEER_FAILED, "version %llu does not commit: %u receiver(s) remain in the group, fewer than "
                "the quorum of %u (option commit_quorum)", static_cast<unsigned long long>(version), left, quorum);
  if (g->dropped_in_update.empty()) return WSYNC_OK;
  if (quorum != 0 && left >= quorum) {
    WSYNC_LOGW("group '%s': version %llu commits on %u receiver(s), at least the quorum of %u; removed during it: %s",
               g->group_name.c_str(), static_cast<unsigned long long>(version), left, quorum,
               joined(g->dropped_in_update).c_str());
    return WSYNC_OK;
  }
  const std::string need = quorum == 0 ? "every receiver must hold it (option commit_quorum is not set)"
                                       : "the quorum is " + std::to_string(quorum);
  return fail(WSYNC_ERR_PEER_FAILED, "version %llu does not commit: %zu receiver(s) left the group during the update "
              "(%s); %u remain and %s", static_cast<unsigned long long>(version), g->dropped_in_update.size(),
              joined(g->dropped_in_update).c_str(), left, need.c_str());
}

void end_failed_update(wsync_group_t* g, const std::string& why) {
  announce_abort(g, why);
  g->abort_announced = false;
  g->dropped_in_update.clear();
  g->update_id++;
  g->bucket_in_update = 0;
  for (auto& p : g->peers) p->buckets = 0;
}

void members_committed(wsync_group_t* g) { g->dropped_in_update.clear(); }

}  // namespace wsync
