#include "group/group_engines.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/api_guard.h"
#include "common/error.h"
#include "http/engine_set.h"
#include "http/http_client.h"
#include "http/reply.h"
#include "store/host_port.h"

namespace wsync {

namespace {

// A server's health check: the status and why.
struct Health {
  wsync_status_t status = WSYNC_OK;
  std::string why;
};

// HEALTH on every listed server, concurrently; quick or it fails (at most 10 s, one retry).
wsync_status_t check_health(wsync_group_t* g, std::vector<Health>* res) {
  std::vector<std::vector<OwnedRequest>> reqs(g->engines.servers.size());
  wsync_status_t st = WSYNC_OK;
  for (size_t i = 0; i < g->engines.servers.size(); ++i)
    if ((st = build_requests(g, StepView(g, i, WSYNC_STEP_HEALTH, nullptr, nullptr, 0), &reqs[i])) != WSYNC_OK)
      return st;
  res->assign(g->engines.servers.size(), Health());
  HttpOptions quick = g->cfg.http;
  quick.request_timeout_ms = std::min<int64_t>(quick.request_timeout_ms, 10000);
  quick.retries = std::min(quick.retries, 1);
  for_each_server_concurrently(g->engines.servers.size(), [&](size_t i) {
    Health& h = (*res)[i];
    try {  // an exception must not escape a thread: the server counts as failed
      for (const auto& r : reqs[i]) {
        wsync_http_request_t v = r.view();
        h.status = http_call(g->engines.servers[i].url, v, quick, &g->pipe.aborted, &h.why);
        if (h.status != WSYNC_OK) return;
      }
    } catch (...) {
      h.status = fail_exception("an engine health thread", std::current_exception());
      h.why = "internal error during the health check";
    }
  });
  // A server that refuses the API key is up but unusable as configured: that fails the init (the
  // key is usually wrong for every server) rather than shrinking the world.
  for (const Health& h : *res)
    if (h.status == WSYNC_ERR_REJECTED)
      return fail(WSYNC_ERR_REJECTED, "group '%s': %s", g->cfg.group_name.c_str(), h.why.c_str());
  return WSYNC_OK;
}

// Each server marked healthy (and live) or not, the unhealthy ones logged; the healthy ones' GPUs.
uint32_t mark_health(wsync_group_t* g, const std::vector<Health>& res, std::vector<EngineServer>* healthy,
                     std::string* down) {
  uint32_t healthy_gpus = 0;
  for (size_t i = 0; i < g->engines.servers.size(); ++i) {
    EngineServer& s = g->engines.servers[i];
    s.healthy = s.live = res[i].status == WSYNC_OK;
    if (s.healthy) {
      healthy->push_back(s);
      healthy_gpus += s.gpus;
      continue;
    }
    s.why_unhealthy = res[i].why;
    WSYNC_LOGW("group '%s': engine %s failed its health check and is left out%s: %s", g->cfg.group_name.c_str(),
               s.url.c_str(), g->cfg.elastic ? " until it answers (membership=elastic)" : "", res[i].why.c_str());
    *down += "\n  " + s.url + ": " + res[i].why;
  }
  return healthy_gpus;
}

}  // namespace

wsync_status_t engines_health(wsync_group_t* g, uint32_t configured, uint32_t* receivers, uint32_t* init_receivers) {
  if (g->cfg.engines_spec.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '%s' drives engines over HTTP: set the group option 'engines' "
                "(\"http://host:port=<gpus>,...\")", g->plugins.adapter.table->name);
  wsync_status_t st = parse_engine_servers(g->cfg.engines_spec, &g->engines.servers);
  if (st != WSYNC_OK) return st;
  uint32_t listed = 0;
  for (const auto& s : g->engines.servers) listed += s.gpus;
  if (configured != 0 && configured != listed)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->num_receivers is %u but the servers in 'engines' have %u GPU(s) "
                "in all; give 0 to take it from 'engines'", configured, listed);
  std::vector<Health> res;
  if ((st = check_health(g, &res)) != WSYNC_OK) return st;
  std::vector<EngineServer> healthy;
  std::string down;
  const uint32_t healthy_gpus = mark_health(g, res, &healthy, &down);
  if (healthy.empty())
    return fail(WSYNC_ERR_PEER_FAILED, "group '%s': no engine server passed its health check:%s", g->cfg.group_name.c_str(),
                down.c_str());
  // Elastic: every listed server keeps its ranks (one that is down joins with them later); init
  // waits for the healthy ones. Fixed: the world is the healthy servers.
  if (!g->cfg.elastic) g->engines.servers = std::move(healthy);
  uint32_t world = assign_rank_offsets(&g->engines.servers, g->cfg.elastic);
  *receivers = world - 1;
  if (g->cfg.elastic) *init_receivers = healthy_gpus;
  std::string list;
  for (const auto& s : g->engines.servers)
    list += (list.empty() ? "" : ", ") + s.url + " (ranks " + std::to_string(s.rank_offset) + ".." +
            std::to_string(s.rank_offset + s.gpus - 1) + (s.live ? ")" : ", down)");
  WSYNC_LOGI("group '%s': %zu engine server(s), world size %u: %s", g->cfg.group_name.c_str(), g->engines.servers.size(), world,
             list.c_str());
  return WSYNC_OK;
}

namespace {

// HTTP settings of the best-effort steps (reset, abandon, destroy): no retries, and each request
// bounded, so a wedged engine cannot hold a failure or a destroy for long.
constexpr int64_t kBestEffortTimeoutMs = 10000;

HttpOptions best_effort_http(const wsync_group_t* g) {
  HttpOptions h = g->cfg.http;
  h.request_timeout_ms = h.request_timeout_ms > 0 ? std::min(h.request_timeout_ms, kBestEffortTimeoutMs)
                                                  : kBestEffortTimeoutMs;
  h.retries = 0;
  return h;
}

}  // namespace

wsync_status_t engines_probe_and_reset(wsync_group_t* g) {
  if (!adapter_knows_engine_13(g)) return WSYNC_OK;
  wsync_status_t st = engines_step(g, WSYNC_STEP_PROBE);
  if (st != WSYNC_OK) return st;
  const HttpOptions http = best_effort_http(g);
  CallMode mode;
  mode.best_effort = true;
  mode.http = &http;
  size_t sent = 0;
  engines_step(g, WSYNC_STEP_RESET, 0, mode, &sent);  // best effort: never fails
  if (sent > 0)
    WSYNC_LOGI("group '%s': %zu reset request(s) sent to the engine servers (what an earlier trainer may have left)",
               g->cfg.group_name.c_str(), sent);
  clear_error();
  return WSYNC_OK;
}

namespace {

// After the ABANDON: what each live server holds (the adapter's `held`, plugin ABI 1.7), into
// g->engines.held (UNKNOWN for an older adapter).
void read_held(wsync_group_t* g) {
  const wsync_adapter_v1_t* t = g->plugins.adapter.table;
  const bool knows = adapter_knows_engine_17(g);
  g->engines.held.assign(g->engines.servers.size(), EngineSide::Held());
  for (size_t i = 0; i < g->engines.servers.size(); ++i) {
    if (!g->engines.servers[i].live || !knows) continue;
    const char* words = nullptr;
    const int32_t h = t->held(g->plugins.adapter_self, static_cast<uint32_t>(i), &words);
    EngineSide::Held& e = g->engines.held[i];
    e.held = h == WSYNC_HELD_ONE_VERSION || h == WSYNC_HELD_MIX ? h : WSYNC_HELD_UNKNOWN;
    if (words != nullptr) e.words.assign(words, strnlen(words, 4096));
  }
}

// Whether a paused server resumes after a failure (option engine_resume_on_failure): always (1),
// never (0), or (auto, the default) when it holds one version. `was_open` false: the update
// committed but its RESUME failed: every server holds that version.
bool resumes_after_failure(const wsync_group_t* g, size_t i, bool was_open) {
  switch (g->cfg.engines_resume_on_failure) {
    case ResumeOnFailure::kAlways: return true;
    case ResumeOnFailure::kNever: return false;
    default: return !was_open || (i < g->engines.held.size() && g->engines.held[i].held == WSYNC_HELD_ONE_VERSION);
  }
}

}  // namespace

void engines_abandon(wsync_group_t* g) {
  // Also after a committed update whose RESUME failed: nothing to end, but still paused.
  if (!g->shape.http_engines || (!g->engines.update_open && !g->engines.paused)) return;
  const bool was_open = g->engines.update_open;
  // Called again (a destroy, an abort after the failure): what the failure left stands; a server
  // left paused holding a mix must not be resumed now.
  if (!was_open && g->engines.paused_by_failure) return;
  g->engines.update_open = false;
  const HttpOptions http = best_effort_http(g);
  CallMode mode;
  mode.best_effort = true;
  mode.http = &http;
  if (was_open && adapter_knows_engine_13(g)) engines_step(g, WSYNC_STEP_ABANDON, 0, mode);
  if (was_open) read_held(g);
  else g->engines.held.assign(g->engines.servers.size(), EngineSide::Held());
  for (EngineSide::Held& h : g->engines.held) h.paused = g->engines.paused;
  if (g->engines.paused) {
    std::vector<size_t> resume;
    size_t live = 0;
    for (size_t i = 0; i < g->engines.servers.size(); ++i) {
      if (!g->engines.servers[i].live) continue;
      ++live;
      if (resumes_after_failure(g, i, was_open)) resume.push_back(i);
    }
    if (!resume.empty()) {
      mode.only = &resume;
      engines_step(g, WSYNC_STEP_RESUME, 0, mode);
      for (size_t i : resume) g->engines.held[i].resumed = true;
    }
    g->engines.paused = resume.size() < live;
    g->engines.paused_by_failure = was_open && g->engines.paused;
  }
  if (!was_open) {
    if (g->engines.paused) WSYNC_LOGW("group '%s': the engine servers' generation stays paused", g->cfg.group_name.c_str());
    return;
  }
  WSYNC_LOGW("group '%s': the update was %s on the engine servers%s", g->cfg.group_name.c_str(),
             adapter_knows_engine_13(g) ? "ended" : "left open (the adapter predates plugin ABI 1.3)",
             engines_failure_note(g, true).c_str());
}

wsync_status_t engines_check_declared(wsync_group_t* g, Flight* flight) {
  std::shared_ptr<const Declared> d = declared_take_for_engines(g);
  if (!d || !adapter_knows_engine_17(g)) return WSYNC_OK;
  CallMode mode;
  mode.flight = flight;
  EngineCalls calls;
  wsync_status_t st = calls.start(g, WSYNC_STEP_CHECK, &d->all, &d->tensors, 0, nullptr, mode);
  return st == WSYNC_OK ? calls.finish(flight) : st;
}

wsync_status_t open_update(wsync_group_t* g, Flight* flight) {
  if (!g->shape.http_engines || g->engines.update_open) return WSYNC_OK;
  // The declared update is checked first: a refusal leaves every server untouched (not paused).
  wsync_status_t cst = engines_check_declared(g, flight);
  if (cst != WSYNC_OK) return cst;
  // Open from the first request on: a failure in PAUSE or BEGIN_UPDATE is abandoned too.
  g->engines.update_open = true;
  g->engines.paused_by_failure = false;
  CallMode mode;
  mode.flight = flight;
  EngineCalls pause;
  wsync_status_t st = pause.start(g, WSYNC_STEP_PAUSE, nullptr, nullptr, 0, nullptr, mode);
  g->engines.paused = pause.sent() > 0;  // (known before it finishes: a server dropped in it is resumed)
  if (st == WSYNC_OK) st = pause.finish(flight);
  if (st == WSYNC_OK) st = engines_step(g, WSYNC_STEP_BEGIN_UPDATE, 0, mode);
  return st;
}

wsync_status_t engines_update_committed(wsync_group_t* g) {
  if (!g->shape.http_engines || !g->engines.update_open) return WSYNC_OK;
  g->engines.update_open = false;  // committed: nothing to abandon; a failed RESUME leaves `paused` set
  wsync_status_t st = engines_step(g, WSYNC_STEP_RESUME);
  if (st == WSYNC_OK) g->engines.paused = false;
  return st;
}

wsync_status_t engines_start_init(wsync_group_t* g, EngineCalls* calls) {
  g->engines.joined = g->shape.http_engines;  // from here on a destroy leaves the engines' group
  if (!g->shape.http_engines) return WSYNC_OK;
  return calls->start(g, WSYNC_STEP_INIT, nullptr, nullptr, 0, &g->engines.failed);
}

void engines_inits_sent(wsync_group_t* g) {
  for (auto& s : g->engines.servers) s.inited = s.inited || s.live;
}

void engines_set_live(wsync_group_t* g, size_t i, bool live) { g->engines.servers[i].live = live; }

void engines_mark_inited(wsync_group_t* g, size_t i) { g->engines.servers[i].inited = true; }

void engines_add_property(wsync_group_t* g, const std::string& key, const std::string& value) {
  g->engines.transport_properties.emplace_back(key, value);
}

void engines_resume_committed(wsync_group_t* g) {
  if (!g->shape.http_engines || !g->engines.update_open) return;
  g->engines.update_open = false;
  // As after a commit (the group's retries); elastic: a server whose RESUME fails is dropped
  // (WSYNC_OK unless none is left).
  if (engines_step(g, WSYNC_STEP_RESUME) == WSYNC_OK) g->engines.paused = false;
  else WSYNC_LOGW("group '%s': resuming the engine servers failed: %s", g->cfg.group_name.c_str(), last_error().c_str());
  clear_error();
}

namespace {

// One server's part of a failure's note: what it holds (its own words) and whether it serves.
std::string held_note(const std::string& url, const EngineSide::Held& h) {
  const bool one = h.held == WSYNC_HELD_ONE_VERSION;
  std::string n = "engine " + url + " holds " + (h.words.empty() ? (one ? "one version" : "a mix of two versions") : h.words);
  if (!h.paused) return n + (one ? " and serves it" : " and serves it (this group did not pause it: adapter.pause=0)");
  if (h.resumed) return n + (one ? " and serves again" : " and serves it (engine_resume_on_failure=1)");
  if (one) return n + " (its generation stays paused: engine_resume_on_failure=0)";
  return n + "; its generation stays paused: publish a complete version (from a new group), or set group option "
             "engine_resume_on_failure=1 to serve the mix";
}

}  // namespace

std::string engines_failure_note(const wsync_group_t* g, bool was_open) {
  was_open = was_open || g->engines.paused_by_failure;  // (asked again later: what the failure left)
  if (g->shape.http_engines && !was_open && g->engines.paused)  // committed, but its RESUME failed
    return " [the engine servers' generation stays paused (group option engine_resume_on_failure=1 resumes it)]";
  if (!g->shape.http_engines || !was_open) return std::string();
  // What each server said it holds (plugin ABI 1.7), server by server (at most 4 named).
  std::string said;
  size_t told = 0, more = 0;
  bool unknown = false;
  for (size_t i = 0; i < g->engines.servers.size(); ++i) {
    if (!g->engines.servers[i].live) continue;
    const EngineSide::Held h = i < g->engines.held.size() ? g->engines.held[i] : EngineSide::Held();
    if (h.held == WSYNC_HELD_UNKNOWN) {
      unknown = true;
      continue;
    }
    if (told == 4) {
      ++more;
      continue;
    }
    ++told;
    said += (said.empty() ? "" : "; ") + held_note(g->engines.servers[i].url, h);
  }
  if (more > 0) said += "; and " + std::to_string(more) + " more server(s)";
  if (!unknown && told > 0) return " [" + said + "]";
  std::string note = adapter_knows_engine_13(g)
                         ? " [the engine servers' update was ended; they hold a mix of weight versions until a complete update"
                         : " [the engine servers hold a mix of weight versions until a complete update (adapter '" +
                               std::string(g->plugins.adapter.table->name) + "' cannot end their update: it predates plugin ABI 1.3)";
  if (g->engines.paused)
    note += "; their generation stays paused (group option engine_resume_on_failure=1 resumes it)";
  if (!said.empty()) note += "; " + said;
  return note + "]";
}

}  // namespace wsync
