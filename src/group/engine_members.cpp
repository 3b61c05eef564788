// See engine_members.h.
#include "group/engine_members.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/error.h"
#include "group/group_engines.h"
#include "group/group_members.h"

namespace wsync {
namespace {

bool elastic_engines(const wsync_group_t* g) { return g->engines.returns.on && !g->engines.servers.empty(); }

std::string ranks_of(const EngineServer& s) {
  return s.gpus == 1 ? "rank " + std::to_string(s.rank_offset)
                     : "ranks " + std::to_string(s.rank_offset) + ".." + std::to_string(s.rank_offset + s.gpus - 1);
}

EngineRejoin& rejoin(wsync_group_t* g, size_t i) {
  if (g->engines.returns.by_server.size() < g->engines.servers.size()) g->engines.returns.by_server.resize(g->engines.servers.size());
  if (!g->engines.returns.by_server[i]) g->engines.returns.by_server[i] = std::make_shared<EngineRejoin>();
  return *g->engines.returns.by_server[i];
}

// Every rank of the server is a member.
bool all_members(const wsync_group_t* g, const EngineServer& s) {
  for (uint32_t r = s.rank_offset; r < s.rank_offset + s.gpus; ++r)
    if (r == 0 || r > g->members.peers.size() || !g->members.peers[r - 1] || g->members.peers[r - 1]->dropped) return false;
  return true;
}

// Whether one of the server's ranks was welcomed and its JOINED has not been taken yet (the
// sender never waits for it: a later look installs it).
bool ranks_joining(const wsync_group_t* g, const EngineServer& s) {
  for (const auto& j : g->admission.joining)
    if (j->rank >= s.rank_offset && j->rank < s.rank_offset + s.gpus) return true;
  return false;
}

// Remove the server's receivers that are members, each named with `reason`.
void remove_ranks(wsync_group_t* g, Flight* flight, const EngineServer& s, wsync_status_t st, const std::string& reason) {
  for (uint32_t r = s.rank_offset; r < s.rank_offset + s.gpus; ++r) {
    if (r == 0 || r > g->members.peers.size() || !g->members.peers[r - 1] || g->members.peers[r - 1]->dropped) continue;
    fail(st, "%s", reason.c_str());
    if (member_failed(g, flight, g->members.peers[r - 1].get(), st) != WSYNC_OK) clear_error();  // (the caller counts who is left)
  }
}

// Start `step` on server i alone, as the next stage of its way back; false (and kDown) when the
// adapter could not build it.
bool start_stage(wsync_group_t* g, size_t i, EngineRejoin::Stage stage, int step, const HttpOptions& http,
                 bool best_effort) {
  EngineRejoin& r = rejoin(g, i);
  const std::vector<size_t> only{i};
  CallMode mode;
  mode.only = &only;
  mode.http = &http;
  mode.best_effort = best_effort;
  r.calls.reset(new EngineCalls());
  r.stage = stage;
  r.init_wait_until = 0;
  if (r.calls->start(g, step, nullptr, nullptr, 0, nullptr, mode) == WSYNC_OK) return true;
  WSYNC_LOGW("group '%s': engine server %s: %s", g->cfg.group_name.c_str(), g->engines.servers[i].url.c_str(), last_error().c_str());
  clear_error();
  r.calls.reset();
  r.stage = EngineRejoin::kDown;
  r.next_check_ms = now_ms() + g->cfg.engine_recheck_ms;
  return false;
}

// The HTTP settings of the steps that bring a server back: a health check is quick or it fails;
// the others as the group's, without retries (the next check retries).
HttpOptions quick_http(const wsync_group_t* g) {
  HttpOptions h = g->cfg.http;
  h.connect_timeout_ms = h.connect_timeout_ms > 0 ? std::min<int64_t>(h.connect_timeout_ms, 2000) : 2000;
  h.request_timeout_ms = h.request_timeout_ms > 0 ? std::min<int64_t>(h.request_timeout_ms, 5000) : 5000;
  h.retries = 0;
  return h;
}

HttpOptions rejoin_http(const wsync_group_t* g) {
  HttpOptions h = g->cfg.http;
  h.retries = 0;
  return h;
}

// A failed way back of the same server is logged at its 1st, 2nd, 4th, 8th, ... time in a row: a
// server that answers its health check and then fails (rogue, or misconfigured) every recheck
// must not write a warning per recheck.
bool count_failed_return(EngineRejoin& r, std::string* note) {
  const uint64_t n = ++r.failed_returns;
  if ((n & (n - 1)) != 0) return false;
  *note = n == 1 ? std::string() : " (" + std::to_string(n) + " ways back in a row failed; the next is logged at " +
                                        std::to_string(2 * n) + ")";
  return true;
}

void back_down(wsync_group_t* g, size_t i) {
  EngineRejoin& r = rejoin(g, i);
  r.calls.reset();
  r.stage = EngineRejoin::kDown;
  r.next_check_ms = now_ms() + g->cfg.engine_recheck_ms;
}

void drop_server(wsync_group_t* g, Flight* flight, size_t i, wsync_status_t st, const std::string& reason) {
  engines_set_live(g, i, false);
  const EngineServer& s = g->engines.servers[i];
  WSYNC_LOGW("group '%s': %s; its receivers (%s) leave the group and it is checked again every %lld ms", g->cfg.group_name.c_str(),
             reason.c_str(), ranks_of(s).c_str(), static_cast<long long>(g->cfg.engine_recheck_ms));
  remove_ranks(g, flight, s, st, reason);
  back_down(g, i);
  // What a failure does in a fixed group, for this server alone: its open update is ended, and its
  // generation resumed when the group resumes on failure. In the background: it may be wedged.
  const bool resume = g->engines.paused && g->cfg.engines_resume_on_failure == ResumeOnFailure::kAlways;
  if (g->engines.update_open && (adapter_knows_engine_13(g) || resume)) {
    HttpOptions h = quick_http(g);
    h.request_timeout_ms = std::min<int64_t>(g->cfg.http.request_timeout_ms > 0 ? g->cfg.http.request_timeout_ms : 10000, 10000);
    start_stage(g, i, EngineRejoin::kLeaving, adapter_knows_engine_13(g) ? WSYNC_STEP_ABANDON : WSYNC_STEP_RESUME, h,
                true);
    rejoin(g, i).next_check_ms = now_ms() + g->cfg.engine_recheck_ms;
    rejoin(g, i).resume_next = resume && adapter_knows_engine_13(g);
  }
}

// Server i's INIT answered: live when its ranks are all members, else back down (named).
void finish_init(wsync_group_t* g, size_t i) {
  EngineRejoin& r = rejoin(g, i);
  const EngineServer& s = g->engines.servers[i];
  wsync_status_t st = r.calls->finish();
  std::string why = st == WSYNC_OK ? std::string() : last_error();
  clear_error();
  if (st == WSYNC_OK && !all_members(g, s)) why = "its receivers (" + ranks_of(s) + ") did not all join";
  if (why.empty()) {
    engines_set_live(g, i, true);
    r.calls.reset();
    r.stage = EngineRejoin::kDown;
    r.told_down = false;
    r.failed_returns = 0;
    WSYNC_LOGI("group '%s': engine server %s is back (%s); it takes part from the next update",
               g->cfg.group_name.c_str(), s.url.c_str(), ranks_of(s).c_str());
    return;
  }
  const std::string reason = "engine server " + s.url + " could not be brought back: " + why;
  std::string note;
  if (count_failed_return(r, &note)) WSYNC_LOGW("group '%s': %s%s", g->cfg.group_name.c_str(), reason.c_str(), note.c_str());
  back_down(g, i);  // (first: the removals below must not take this for a way back still running)
  remove_ranks(g, nullptr, s, WSYNC_ERR_ENGINE, reason);
  members_committed(g);  // (between updates: no update's loss)
}

// Server i's stage `r.stage` answered (r.calls done): the next one.
void next_stage(wsync_group_t* g, size_t i) {
  EngineRejoin& r = rejoin(g, i);
  if (r.stage == EngineRejoin::kInit) {
    if (!all_members(g, g->engines.servers[i]) && ranks_joining(g, g->engines.servers[i])) return;  // (a later look: see above)
    return finish_init(g, i);
  }
  const EngineServer& s = g->engines.servers[i];
  const wsync_status_t st = r.calls->finish();
  const std::string why = st == WSYNC_OK ? std::string() : last_error();
  clear_error();
  r.calls.reset();
  switch (r.stage) {
    case EngineRejoin::kLeaving:
      if (r.resume_next) {  // ABANDON done; RESUME (engine_resume_on_failure=1)
        r.resume_next = false;
        start_stage(g, i, EngineRejoin::kLeaving, WSYNC_STEP_RESUME, quick_http(g), true);
        return;
      }
      r.stage = EngineRejoin::kDown;
      return;
    case EngineRejoin::kHealth:
      if (st != WSYNC_OK) {
        if (!r.told_down)
          WSYNC_LOGI("group '%s': engine server %s is still down: %s", g->cfg.group_name.c_str(), s.url.c_str(), why.c_str());
        r.told_down = true;
        return back_down(g, i);
      }
      if (r.failed_returns == 0 || (r.failed_returns & (r.failed_returns + 1)) == 0)  // (before a logged failure)
        WSYNC_LOGI("group '%s': engine server %s answers again; probing, resetting and initialising it",
                   g->cfg.group_name.c_str(), s.url.c_str());
      if (adapter_knows_engine_13(g)) {
        start_stage(g, i, EngineRejoin::kProbe, WSYNC_STEP_PROBE, rejoin_http(g), false);
        return;
      }
      break;  // (an adapter before plugin ABI 1.3: no probe, no reset)
    case EngineRejoin::kProbe:
      if (st != WSYNC_OK) {
        std::string note;
        if (count_failed_return(r, &note))
          WSYNC_LOGW("group '%s': engine server %s failed its probe: %s%s", g->cfg.group_name.c_str(), s.url.c_str(),
                     why.c_str(), note.c_str());
        return back_down(g, i);
      }
      start_stage(g, i, EngineRejoin::kReset, WSYNC_STEP_RESET, quick_http(g), true);
      return;
    default:
      break;  // kReset: best effort, then INIT
  }
  engines_mark_inited(g, i);  // (from here a destroy tears its side down)
  start_stage(g, i, EngineRejoin::kInit, WSYNC_STEP_INIT, rejoin_http(g), false);
}

}  // namespace

wsync_status_t engine_server_failed(wsync_group_t* g, Flight* flight, size_t server, wsync_status_t st,
                                    const std::string& why) {
  if (!elastic_engines(g) || g->pipe.aborted.load()) return fail_msg(st, why);
  if (!g->engines.servers[server].live) return WSYNC_OK;  // (dropped already, for its receiver: its request was stopped)
  if (st == WSYNC_ERR_ABORTED) return fail_msg(st, why);
  drop_server(g, flight, server, WSYNC_ERR_ENGINE, "engine server " + g->engines.servers[server].url + " was dropped: " + why);
  if (members_left_in(g) == 0)
    return fail(WSYNC_ERR_PEER_FAILED, "every receiver of group '%s' has left; the last engine server dropped: %s: %s",
                g->cfg.group_name.c_str(), g->engines.servers[server].url.c_str(), why.c_str());
  clear_error();
  return WSYNC_OK;
}

void engines_rank_left(wsync_group_t* g, Flight* flight, uint32_t rank, const std::string& why) {
  if (!elastic_engines(g)) return;
  for (size_t i = 0; i < g->engines.servers.size(); ++i) {
    const EngineServer& s = g->engines.servers[i];
    if (rank < s.rank_offset || rank >= s.rank_offset + s.gpus) continue;
    if (s.live) {
      drop_server(g, flight, i, WSYNC_ERR_PEER_FAILED,
                  "engine server " + s.url + " was dropped: its receiver rank " + std::to_string(rank) + " left (" +
                      why + ")");
    } else if (rejoin(g, i).stage == EngineRejoin::kInit) {  // on its way back: it starts over
      WSYNC_LOGW("group '%s': engine server %s is not brought back: its receiver rank %u left (%s)",
                 g->cfg.group_name.c_str(), s.url.c_str(), rank, why.c_str());
      back_down(g, i);  // (first: see finish_init)
      remove_ranks(g, flight, s, WSYNC_ERR_PEER_FAILED, "engine server " + s.url + " is not brought back: its "
                   "receiver rank " + std::to_string(rank) + " left");
    }
    return;
  }
}

std::string engines_rank_note(const wsync_group_t* g, uint32_t rank, const std::string& text) {
  if (!elastic_engines(g)) return std::string();
  for (const EngineServer& s : g->engines.servers)
    if (rank >= s.rank_offset && rank < s.rank_offset + s.gpus)
      return text.find(s.url) == std::string::npos ? " (engine server " + s.url + ")" : std::string();
  return std::string();
}

void engines_start_elastic(wsync_group_t* g) {
  g->engines.returns.on = g->shape.http_engines && g->cfg.elastic;
  if (!elastic_engines(g)) return;
  for (size_t i = 0; i < g->engines.servers.size(); ++i) {
    EngineRejoin& r = rejoin(g, i);
    if (g->engines.servers[i].live) continue;
    r.stage = EngineRejoin::kDown;
    r.next_check_ms = now_ms() + g->cfg.engine_recheck_ms;
    r.told_down = true;  // (its health check failed at init: logged then)
  }
}

void engines_readmit(wsync_group_t* g) {
  if (!elastic_engines(g)) return;
  for (size_t i = 0; i < g->engines.servers.size(); ++i) {
    if (g->engines.servers[i].live || g->pipe.aborted.load()) continue;
    EngineRejoin& r = rejoin(g, i);
    if (r.calls) {
      if (r.calls->done()) next_stage(g, i);
      continue;
    }
    if (r.stage == EngineRejoin::kDown && now_ms() >= r.next_check_ms)
      start_stage(g, i, EngineRejoin::kHealth, WSYNC_STEP_HEALTH, quick_http(g), false);
  }
}

namespace {

// Server i's receivers all joined: its engine answers its INIT right after. Wait for that, at most
// min(timeout_ms, 5 s) from the first time anyone waited for this INIT. True when it answered.
bool wait_init(wsync_group_t* g, size_t i) {
  EngineRejoin& r = rejoin(g, i);
  if (r.init_wait_until == 0) r.init_wait_until = now_ms() + std::min<int64_t>(g->cfg.timeout_ms, 5000);
  while (!r.calls->done() && now_ms() < r.init_wait_until && !g->pipe.aborted.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return r.calls->done();
}

}  // namespace

void engines_after_admit(wsync_group_t* g) {
  if (!elastic_engines(g)) return;
  for (size_t i = 0; i < g->engines.servers.size(); ++i) {
    EngineRejoin& r = rejoin(g, i);
    if (g->engines.servers[i].live || r.stage != EngineRejoin::kInit || !r.calls || !all_members(g, g->engines.servers[i])) continue;
    if (wait_init(g, i)) finish_init(g, i);  // (so that the server takes part in the next update)
  }
}

void engines_before_update(wsync_group_t* g) {
  if (!elastic_engines(g)) return;
  for (size_t i = 0; i < g->engines.servers.size(); ++i) {
    const EngineServer& s = g->engines.servers[i];
    bool any = false;
    for (uint32_t rk = s.rank_offset; rk < s.rank_offset + s.gpus && !any; ++rk)
      any = rk >= 1 && rk <= g->members.peers.size() && g->members.peers[rk - 1] && !g->members.peers[rk - 1]->dropped;
    if (s.live || !any) continue;
    // Its receivers are members but its INIT has not answered: wait for it when they all joined
    // (bounded; an INIT waiting for a rank still to be admitted cannot answer now), else they
    // leave, since no step of the update would reach their engine.
    EngineRejoin& r = rejoin(g, i);
    if (r.stage == EngineRejoin::kInit && r.calls && all_members(g, s) && wait_init(g, i)) {
      finish_init(g, i);
      continue;
    }
    const std::string reason = "engine server " + s.url + " could not be brought back: its init did not answer "
                               "before the next update";
    WSYNC_LOGW("group '%s': %s", g->cfg.group_name.c_str(), reason.c_str());
    back_down(g, i);
    remove_ranks(g, nullptr, s, WSYNC_ERR_TIMEOUT, reason);
    members_committed(g);  // (before the update: no update's loss)
  }
}

void engines_readmit_stop(wsync_group_t* g) {
  for (auto& r : g->engines.returns.by_server)
    if (r) r->calls.reset();  // (cancels and joins its requests)
}

}  // namespace wsync
