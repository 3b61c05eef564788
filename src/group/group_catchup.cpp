// See group_catchup.h.
#include "group/group_catchup.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/clock.h"
#include "common/error.h"
#include "control/frames.h"
#include "group/group_mailbox.h"
#include "group/group_members.h"
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

CatchupPicks catchup_pick(const std::vector<uint64_t>& holds, uint64_t version, uint64_t seq,
                          const std::vector<uint32_t>& admit, const std::vector<uint32_t>& ranks,
                          const std::function<bool(uint32_t, uint32_t)>& same_needs) {
  CatchupPicks out;
  out.version = version;
  out.seq = seq;
  if (version == 0) return out;
  std::vector<uint32_t> used;
  for (uint32_t j : admit)
    for (uint32_t r : ranks) {
      if (r < 1 || r > holds.size() || holds[r - 1] != version || std::count(admit.begin(), admit.end(), r) != 0 ||
          std::count(used.begin(), used.end(), r) != 0 || !same_needs(j, r))
        continue;
      out.pairs.emplace_back(j, r);
      used.push_back(r);
      break;
    }
  return out;
}

std::vector<uint8_t> encode_picks(const CatchupPicks& p) {
  std::vector<uint8_t> out(20);
  const uint32_t n = static_cast<uint32_t>(p.pairs.size());
  std::memcpy(out.data(), &p.version, 8);
  std::memcpy(out.data() + 8, &p.seq, 8);
  std::memcpy(out.data() + 16, &n, 4);
  for (const auto& pr : p.pairs)
    for (uint32_t r : {pr.first, pr.second})
      out.insert(out.end(), reinterpret_cast<const uint8_t*>(&r), reinterpret_cast<const uint8_t*>(&r) + 4);
  return out;
}

wsync_status_t decode_picks(uint32_t num_receivers, const std::vector<uint8_t>& v, const std::vector<uint32_t>& admit,
                            CatchupPicks* out) {
  CatchupPicks p;
  uint32_t n = 0;
  if (v.size() < 20) return fail(WSYNC_ERR_PROTOCOL, "sender 0's catch-up picks: a word of %zu bytes", v.size());
  std::memcpy(&p.version, v.data(), 8);
  std::memcpy(&p.seq, v.data() + 8, 8);
  std::memcpy(&n, v.data() + 16, 4);
  if (n > admit.size() || v.size() != 20 + 8ull * n)
    return fail(WSYNC_ERR_PROTOCOL, "sender 0's catch-up picks: %u pairs in %zu bytes for %zu joiners", n, v.size(),
                admit.size());
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t j = 0, s = 0;
    std::memcpy(&j, v.data() + 20 + 8 * i, 4);
    std::memcpy(&s, v.data() + 24 + 8 * i, 4);
    const bool joiner = std::count(admit.begin(), admit.end(), j) == 1, twice = std::any_of(
        p.pairs.begin(), p.pairs.end(), [&](const std::pair<uint32_t, uint32_t>& q) { return q.first == j; });
    if (!joiner || twice || s < 1 || s > num_receivers || std::count(admit.begin(), admit.end(), s) != 0)
      return fail(WSYNC_ERR_PROTOCOL, "sender 0's catch-up picks pair joiner rank %u with source rank %u (joiners "
                  "of this batch: %zu, receivers 1..%u)", j, s, admit.size(), num_receivers);
    p.pairs.emplace_back(j, s);
  }
  *out = std::move(p);
  return WSYNC_OK;
}

namespace {

// This sender's digests of its parts of the committed version, for a joiner's CATCHUP.
void add_part_sums(const wsync_group_t* g, CatchupBody* c) {
  for (const auto& kv : g->members.committed_digests)
    for (const Members::PartDigest& d : kv.second.parts) {
      c->names.push_back(kv.first);
      c->sums.push_back(d.sum);
      std::vector<int64_t> box;
      for (int32_t i = 0; i < d.box.ndim; ++i) {
        box.push_back(d.box.offset[i]);
        box.push_back(d.box.extent[i]);
      }
      c->boxes.push_back(std::move(box));
    }
}

}  // namespace

std::string catchup_arrange_picked(wsync_group_t* g, Peer* joiner, const CatchupPicks* picks) {
  if (picks == nullptr || picks->version == 0) return " (it takes this update whole)";
  uint32_t source = 0;
  for (const auto& pr : picks->pairs)
    if (pr.first == joiner->rank) source = pr.second;
  if (source == 0)
    return "; no member with its boxes was free to catch it up to version " + std::to_string(picks->version) +
           ": it takes this update whole";
  const int64_t send_ms = std::min<int64_t>(g->cfg.timeout_ms, 1000);
  CatchupBody c;
  c.version = picks->version;
  c.world = g->cfg.group_name + ".catchup-b" + std::to_string(picks->seq) + "-r" + std::to_string(joiner->rank);
  c.budget_ms = static_cast<uint64_t>(std::max<int64_t>(g->cfg.timeout_ms / 2, 1));
  Peer* s = source <= g->members.peers.size() ? g->members.peers[source - 1].get() : nullptr;
  if (s != nullptr && !s->dropped && s->alive) {
    c.role = CatchupBody::kSource;
    c.peer = joiner->rank;
    if (s->conn.send(MsgType::kCatchup, encode_catchup(c), send_ms) != WSYNC_OK) clear_error();  // (gone: removed in turn)
  }
  c.role = CatchupBody::kJoiner;
  c.peer = source;
  if (mailbox_committed_version(g) == picks->version && !g->members.committed_digests.empty())
    add_part_sums(g, &c);
  if (c.names.empty())  // (the joiner commits nothing of the catch-up without every sender's sums)
    c.reason = "sender " + std::to_string(g->cfg.sender_rank) + " holds no digests of version " +
               std::to_string(picks->version);
  if (joiner->conn.send(MsgType::kCatchup, encode_catchup(c), send_ms) != WSYNC_OK) clear_error();
  joiner->catchup.running = true;
  joiner->catchup.source = source;
  joiner->catchup.source_ms = s != nullptr ? s->accepted_ms : 0;
  g->catchups.open.push_back({source, joiner->rank, c.world, c.version,
                              now_ms() + static_cast<int64_t>(c.budget_ms) + 1000});
  WSYNC_LOGI("group '%s': %s catches up to version %llu from receiver rank %u%s", g->cfg.group_name.c_str(),
             joiner->conn.peer_name().c_str(), static_cast<unsigned long long>(c.version), source,
             c.reason.empty() ? "" : (" (" + c.reason + ")").c_str());
  return "; it catches up to version " + std::to_string(c.version) + " from receiver rank " + std::to_string(source);
}

namespace {

// Tell `to` (a member still in, else nobody) that the catch-up `o` is off: CATCHUP_CANCEL in
// `role`, naming `other`, the peer that left, and why.
void cancel_catchup(wsync_group_t* g, uint32_t to, uint32_t role, uint32_t other, const CatchupBook::Open& o,
                    const std::string& why) {
  Peer* p = to >= 1 && to <= g->members.peers.size() ? g->members.peers[to - 1].get() : nullptr;
  if (p == nullptr || p->dropped || !p->alive) return;
  CatchupBody c;
  c.role = role;
  c.peer = other;
  c.version = o.version;
  c.world = o.world;
  c.reason = why;
  if (p->conn.send(MsgType::kCatchupCancel, encode_catchup(c), std::min<int64_t>(g->cfg.timeout_ms, 1000)) != WSYNC_OK)
    clear_error();  // (gone too: removed in its turn)
}

}  // namespace

void catchup_member_left(wsync_group_t* g, uint32_t rank, const std::string& why) {
  const int64_t now = now_ms();
  auto& open = g->catchups.open;
  open.erase(std::remove_if(open.begin(), open.end(), [&](const CatchupBook::Open& o) { return o.until_ms < now; }),
             open.end());
  for (auto it = open.begin(); it != open.end();) {
    if (it->joiner != rank && it->source != rank) {
      ++it;
      continue;
    }
    if (it->joiner == rank)  // (its source stops sending at once, not at its budget)
      cancel_catchup(g, it->source, CatchupBody::kSource, rank, *it, why);
    else
      cancel_catchup(g, it->joiner, CatchupBody::kJoiner, rank, *it, why);
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
  members_note_holds(g, s->rank, 0);
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
