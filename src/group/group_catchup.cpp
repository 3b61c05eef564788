// See group_catchup.h.
#include "group/group_catchup.h"

#include <algorithm>
#include <map>

#include "common/clock.h"
#include "common/error.h"
#include "control/frames.h"
#include "group/group_mailbox.h"
#include "store/host_port.h"

namespace wsync {
namespace {

bool in_open_catchup(const wsync_group_t* g, uint32_t rank) {
  const int64_t now = now_ms();
  return std::any_of(g->catchups.open.begin(), g->catchups.open.end(), [&](const CatchupBook::Open& o) {
    return o.until_ms >= now && (o.source == rank || o.joiner == rank);
  });
}

// The members that may serve `version`, best first: those that confirmed it.
std::vector<Peer*> candidates(wsync_group_t* g, const Peer* joiner, const std::vector<uint32_t>& busy,
                              uint64_t version) {
  std::vector<Peer*> out;
  for (auto& p : g->members.peers)
    if (p && !p->dropped && p->alive && p.get() != joiner && p->holds_version == version && !p->catchup.suspect &&
        std::find(busy.begin(), busy.end(), p->rank) == busy.end() && !in_open_catchup(g, p->rank))
      out.push_back(p.get());
  const std::string host = host_of(joiner->addr);
  std::stable_sort(out.begin(), out.end(), [&](const Peer* a, const Peer* b) {
    const bool la = host_of(a->addr) == host, lb = host_of(b->addr) == host;
    if (la != lb) return la;
    return a->rank < b->rank;
  });
  return out;
}

}  // namespace

std::string catchup_arrange(wsync_group_t* g, Peer* joiner, const std::vector<uint32_t>& busy_ranks) {
  const uint64_t version = mailbox_committed_version(g);
  if (version == 0) return "";
  if (g->members.committed_digests.empty())  // (a commit whose digests the sender could not take)
    return "; the sender holds no digests of version " + std::to_string(version) +
           " to check a catch-up against: the next update brings it the tensors that update carries";
  CatchupBody c;
  c.version = version;
  c.world = g->cfg.group_name + ".catchup" + std::to_string(++g->catchups.arranged);
  c.budget_ms = static_cast<uint64_t>(std::max<int64_t>(g->cfg.timeout_ms / 2, 1));
  for (Peer* s : candidates(g, joiner, busy_ranks, version)) {
    c.role = CatchupBody::kSource;
    c.peer = joiner->rank;
    if (s->conn.send(MsgType::kCatchup, encode_catchup(c), std::min<int64_t>(g->cfg.timeout_ms, 1000)) != WSYNC_OK) {
      clear_error();
      continue;  // (gone: the next boundary removes it)
    }
    c.role = CatchupBody::kJoiner;
    c.peer = s->rank;
    c.names.clear();
    c.sums.clear();
    for (const auto& kv : g->members.committed_digests) {
      c.names.push_back(kv.first);
      c.sums.push_back(kv.second.sum);
    }
    if (joiner->conn.send(MsgType::kCatchup, encode_catchup(c), std::min<int64_t>(g->cfg.timeout_ms, 1000)) != WSYNC_OK)
      clear_error();  // (the joiner is gone: the source gives up on it within half its timeout_ms)
    joiner->catchup.running = true;
    joiner->catchup.source = s->rank;
    joiner->catchup.source_ms = s->accepted_ms;
    g->catchups.open.push_back({s->rank, joiner->rank, c.world, version,
                                now_ms() + static_cast<int64_t>(c.budget_ms) + 1000});
    WSYNC_LOGI("group '%s': %s catches up to version %llu from %s", g->cfg.group_name.c_str(),
               joiner->conn.peer_name().c_str(), static_cast<unsigned long long>(version),
               s->conn.peer_name().c_str());
    return "; it catches up to version " + std::to_string(version) + " from receiver rank " + std::to_string(s->rank);
  }
  WSYNC_LOGI("group '%s': no member is free to catch %s up to version %llu; the trainer's next update brings it "
             "the tensors that update carries", g->cfg.group_name.c_str(), joiner->conn.peer_name().c_str(),
             static_cast<unsigned long long>(version));
  return "; no member is free to catch it up to version " + std::to_string(version) +
         ": the next update brings it the tensors that update carries";
}

void catchup_member_left(wsync_group_t* g, uint32_t rank, const std::string& why) {
  const int64_t now = now_ms();
  auto& open = g->catchups.open;
  open.erase(std::remove_if(open.begin(), open.end(), [&](const CatchupBook::Open& o) { return o.until_ms < now; }),
             open.end());
  for (auto it = open.begin(); it != open.end();) {
    if (it->joiner == rank) {
      it = open.erase(it);
      continue;
    }
    if (it->source != rank) {
      ++it;
      continue;
    }
    Peer* j = it->joiner >= 1 && it->joiner <= g->members.peers.size() ? g->members.peers[it->joiner - 1].get() : nullptr;
    if (j != nullptr && !j->dropped && j->alive) {
      CatchupBody c;
      c.role = CatchupBody::kJoiner;
      c.peer = rank;
      c.version = it->version;
      c.world = it->world;
      c.reason = why;
      if (j->conn.send(MsgType::kCatchupCancel, encode_catchup(c), std::min<int64_t>(g->cfg.timeout_ms, 1000)) != WSYNC_OK)
        clear_error();  // (gone too: removed in its turn)
    }
    it = open.erase(it);
  }
}

void catchup_done(wsync_group_t* g, uint32_t rank) {
  if (rank >= 1 && rank <= g->members.peers.size() && g->members.peers[rank - 1]) g->members.peers[rank - 1]->catchup.running = false;
  auto& open = g->catchups.open;
  open.erase(std::remove_if(open.begin(), open.end(), [&](const CatchupBook::Open& o) {
               return o.source == rank || o.joiner == rank;
             }), open.end());
}

namespace {

// A joiner's catch-up failed: its source is suspect (struck, hung or cut off, and the trainer may
// not know yet), so it serves no other joiner until it confirms a version again. A restarted
// joiner would otherwise be sent to the same silent source at once, and fail again.
void source_suspect(wsync_group_t* g, const Peer* joiner, const std::string& why) {
  const uint32_t r = joiner->catchup.source;
  Peer* s = r >= 1 && r <= g->members.peers.size() ? g->members.peers[r - 1].get() : nullptr;
  if (s == nullptr || s->dropped || s->accepted_ms != joiner->catchup.source_ms || s->catchup.suspect) return;
  s->catchup.suspect = true;
  WSYNC_LOGW("group '%s': %s serves no catch-up until it confirms a version again: %s's catch-up from it failed: %s",
             g->cfg.group_name.c_str(), s->conn.peer_name().c_str(), joiner->conn.peer_name().c_str(), why.c_str());
}

}  // namespace

wsync_status_t catchup_failed(wsync_group_t* g, Peer* p, const Frame& f) {
  StatusBody body;
  if (!p->catchup.running)  // (only a joiner in its catch-up may leave without counting against the update)
    return fail(WSYNC_ERR_PROTOCOL, "%s sent CATCHUP_FAILED but had no catch-up under way",
                p->conn.peer_name().c_str());
  p->catchup.failed = true;
  if (decode_nack(f.body, &body) != WSYNC_OK) {
    source_suspect(g, p, "(its reason was malformed)");
    return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed CATCHUP_FAILED: %s", p->conn.peer_name().c_str(),
                last_error().c_str());
  }
  source_suspect(g, p, body.reason);
  wsync_status_t st = wire_failure(body.status, WSYNC_ERR_PEER_FAILED);
  if (st != WSYNC_ERR_PROTOCOL) st = WSYNC_ERR_PEER_FAILED;  // (its own trouble, never the sender's)
  return fail(st, "%s could not catch up: %s", p->conn.peer_name().c_str(), body.reason.c_str());
}

bool catchup_failed_unread(wsync_group_t* g, Peer* p, wsync_status_t* st) {
  if (!p->catchup.running || p->catchup.failed) return false;
  p->conn.pump();
  Frame f;
  while (p->conn.has_frame() && p->conn.recv(&f, 0) == WSYNC_OK)
    if (f.type == static_cast<uint16_t>(MsgType::kCatchupFailed)) {
      *st = catchup_failed(g, p, f);
      return true;
    }
  return false;
}

}  // namespace wsync
