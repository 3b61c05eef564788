// The requests of one engine step: built by the adapter on the calling thread (it is not
// thread-safe), sent to every server at once (a thread each), judged, and, for replies the
// adapter asked to read (WSYNC_REPLY_TO_ADAPTER), handed to its take_reply in server order.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/api_guard.h"
#include "common/error.h"
#include "group/engine_members.h"
#include "group/group_engines.h"
#include "http/http_client.h"
#include "http/reply.h"
#include "store/host_port.h"

namespace wsync {

const char* step_name(int step) {
  switch (step) {
    case WSYNC_STEP_HEALTH: return "health check";
    case WSYNC_STEP_INIT: return "group init";
    case WSYNC_STEP_PAUSE: return "pause";
    case WSYNC_STEP_BEGIN_UPDATE: return "start of the update";
    case WSYNC_STEP_UPDATE: return "bucket update";
    case WSYNC_STEP_FINALIZE: return "end of the update";
    case WSYNC_STEP_RESUME: return "resume";
    case WSYNC_STEP_DESTROY: return "group destroy";
    case WSYNC_STEP_PROBE: return "probe";
    case WSYNC_STEP_RESET: return "reset";
    case WSYNC_STEP_ABANDON: return "abandoning the update";
    case WSYNC_STEP_CHECK: return "check of the declared update";
    default: return "step";
  }
}

bool adapter_knows_engine_13(const wsync_group_t* g) {
  const wsync_adapter_v1_t* t = g->plugins.adapter.table;
  return WSYNC_HAS_FIELD(t, wsync_adapter_v1_t, take_reply) && t->take_reply != nullptr;
}

bool adapter_knows_engine_17(const wsync_group_t* g) {
  const wsync_adapter_v1_t* t = g->plugins.adapter.table;
  return adapter_knows_engine_13(g) && WSYNC_HAS_FIELD(t, wsync_adapter_v1_t, held) && t->held != nullptr;
}

StepView::StepView(wsync_group_t* g, size_t index, int step, const PlanBucket* bucket,
                   const std::vector<wsync_tensor_t>* tensors, uint64_t version) {
  const EngineServer& s = g->engines.servers[index];
  es.step = step;
  es.server_index = static_cast<uint32_t>(index);
  es.server_gpus = s.gpus;
  es.rank_offset = s.rank_offset;
  es.world_size = g->shape.num_receivers + 1;
  uint16_t port = 0;
  parse_host_port(g->rdv.store_addr, &host_, &port);
  es.master_address = host_.c_str();
  es.master_port = port;
  es.group_name = g->cfg.group_name.c_str();
  es.version = version;
  es.update_index = g->wire.bucket_in_update;  // UPDATE: this bucket; ABANDON: buckets sent so far
  // The transport properties the adapter asked for (get_needs), as the transport gave them.
  props_ = to_c_options(g->engines.transport_properties);
  es.properties = props_.data();
  es.num_properties = props_.size();
  if (bucket == nullptr || tensors == nullptr) return;
  for (const auto& e : bucket->entries) {
    const wsync_tensor_t& t = (*tensors)[e.tensor_index];
    names_.push_back(t.name);
    dtypes_.push_back(t.dtype);
    ndims_.push_back(t.ndim);
    for (int d = 0; d < WSYNC_MAX_NDIM; ++d) shapes_.push_back(d < t.ndim ? t.shape[d] : 0);
  }
  es.num_tensors = names_.size();
  es.names = names_.data();
  es.dtypes = dtypes_.data();
  es.ndims = ndims_.data();
  es.shapes = shapes_.data();
  es.bucket_bytes = bucket->bytes;
}

wsync_status_t build_requests(wsync_group_t* g, const StepView& v, std::vector<OwnedRequest>* out) {
  const char* who = g->engines.servers[v.es.server_index].url.c_str();
  const wsync_http_request_t* reqs = nullptr;
  uint32_t n = 0;
  clear_error();
  wsync_status_t rc = g->plugins.adapter.table->build_requests(g->plugins.adapter_self, &v.es, &reqs, &n);
  if (rc != WSYNC_OK)
    return fail(rc, "adapter '%s' could not build the %s requests for %s: %s", g->plugins.adapter.table->name,
                step_name(v.es.step), who, last_error().c_str());
  if (n > 0 && reqs == nullptr)
    return fail(WSYNC_ERR_INTERNAL, "adapter '%s' returned %u requests but no array", g->plugins.adapter.table->name, n);
  out->clear();
  for (uint32_t i = 0; i < n; ++i) {
    const wsync_http_request_t& r = reqs[i];
    if (r.struct_size < WSYNC_STRUCT_SIZE(wsync_http_request_t, reply) || r.path == nullptr || r.path[0] != '/' ||
        (r.method != WSYNC_HTTP_GET && r.method != WSYNC_HTTP_POST))
      return fail(WSYNC_ERR_INTERNAL, "adapter '%s' built a malformed %s request %u (path, method or struct_size)",
                  g->plugins.adapter.table->name, step_name(v.es.step), i);
    if (r.reply == WSYNC_REPLY_TO_ADAPTER && !adapter_knows_engine_13(g))
      return fail(WSYNC_ERR_INTERNAL, "adapter '%s' asked to read the reply of %s request %u but has no take_reply",
                  g->plugins.adapter.table->name, step_name(v.es.step), i);
    OwnedRequest o;
    o.req = r;
    o.path = r.path;
    o.has_body = r.body != nullptr;
    if (o.has_body) o.body = r.body;
    out->push_back(std::move(o));
  }
  return WSYNC_OK;
}

namespace {

// One server's requests, in order, on a thread of their own. A best-effort step sends every
// request and only logs failures.
void run_server(EngineCalls::Result* res, const std::string& url, const HttpOptions& http,
                const std::atomic<bool>* stop, const char* what, std::atomic<bool>* failed, bool best_effort,
                const std::vector<OwnedRequest>& rq) {
  for (size_t k = 0; k < rq.size(); ++k) {
    wsync_http_request_t v = rq[k].view();
    std::string why;
    HttpReply rep;
    wsync_status_t s = http_call(url, v, http, stop, &why, &rep);
    if (s == WSYNC_OK && v.reply == WSYNC_REPLY_TO_ADAPTER)
      res->replies.push_back({static_cast<uint32_t>(k), static_cast<int32_t>(rep.status), std::move(rep.body)});
    http_release(&rep);
    if (s == WSYNC_OK) continue;
    if (best_effort) {
      WSYNC_LOGI("%s (best effort): %s", what, why.c_str());
      continue;
    }
    res->status = s;
    res->why = std::string(what) + ": " + why;
    if (failed) failed->store(true);
    return;
  }
}

}  // namespace

EngineCalls::~EngineCalls() { cancel(); }

namespace {

// The servers a step goes to: `only`, or every live one.
std::vector<size_t> step_servers(const wsync_group_t* g, const CallMode& mode) {
  if (mode.only != nullptr) return *mode.only;
  std::vector<size_t> v;
  for (size_t i = 0; i < g->engines.servers.size(); ++i)
    if (g->engines.servers[i].live) v.push_back(i);
  return v;
}

}  // namespace

wsync_status_t EngineCalls::start(wsync_group_t* g, int step, const PlanBucket* bucket,
                                  const std::vector<wsync_tensor_t>* tensors, uint64_t version,
                                  std::atomic<bool>* failed, const CallMode& mode) {
  cancel();
  g_ = g;
  step_ = step;
  bucket_ = bucket;
  tensors_ = tensors;
  version_ = version;
  sent_ = 0;
  // A best-effort step runs after a failure or an abort: the abort flag must not stop it.
  group_aborted_ = mode.best_effort ? nullptr : &g->pipe.aborted;
  // (during init a failing server fails the init, as in a fixed group)
  drop_failed_ = g->engines.returns.on && !mode.best_effort && mode.only == nullptr;
  const std::vector<size_t> servers = step_servers(g, mode);
  std::vector<std::vector<OwnedRequest>> reqs(servers.size());
  for (size_t k = 0; k < servers.size(); ++k) {
    wsync_status_t st = build_requests(g, StepView(g, servers[k], step, bucket, tensors, version), &reqs[k]);
    if (st != WSYNC_OK) return st;
  }
  const HttpOptions http = mode.http != nullptr ? *mode.http : g->cfg.http;
  for (size_t k = 0; k < servers.size(); ++k) {
    if (reqs[k].empty()) continue;
    sent_ += reqs[k].size();
    auto res = std::make_shared<Result>();
    res->server_index = static_cast<uint32_t>(servers[k]);
    results_.push_back(res);
    std::string url = g->engines.servers[servers[k]].url;
    std::string what = step_name(step);
    if (mode.about != nullptr) what += std::string(" of ") + mode.about;
    const bool best = mode.best_effort;
    threads_.emplace_back([res, url, http, what, failed, best, rq = std::move(reqs[k])] {
      try {  // an exception must not escape a thread (std::terminate): it fails this server's step
        run_server(res.get(), url, http, &res->stop, what.c_str(), failed, best, rq);
      } catch (...) {
        res->status = fail_exception("an engine request thread", std::current_exception());
        try {
          res->why = what + ": " + last_error();
        } catch (...) {
        }
        if (failed) failed->store(true);
      }
      res->done.store(true);
    });
  }
  return WSYNC_OK;
}

bool EngineCalls::done() const {
  for (const auto& r : results_)
    if (!r->done.load()) return false;
  return true;
}

wsync_status_t EngineCalls::finish(Flight* flight) {
  // Wait without blocking in join, so that wsync_group_abort can stop requests in flight.
  for (;;) {
    bool all = true;
    for (const auto& r : results_) {
      // Elastic: a server dropped meanwhile (its receiver left) is not waited for.
      if (drop_failed_ && !g_->engines.servers[r->server_index].live) r->stop.store(true);
      all = all && r->done.load();
    }
    if (all) break;
    if (group_aborted_ && group_aborted_->load())
      for (const auto& r : results_) r->stop.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  std::vector<std::shared_ptr<Result>> results;
  results.swap(results_);
  std::vector<std::shared_ptr<Result>> answered;
  for (const auto& r : results) {
    if (r->status == WSYNC_OK) {
      answered.push_back(r);
      continue;
    }
    if (!drop_failed_) return fail_msg(r->status, r->why);
    // Elastic: the server is dropped (once: it may have been for its receiver already).
    wsync_status_t st = engine_server_failed(g_, flight, r->server_index, r->status, r->why);
    if (st != WSYNC_OK) return st;
  }
  return hand_replies(answered);
}

// The replies the adapter asked to read, server after server, on this thread.
wsync_status_t EngineCalls::hand_replies(const std::vector<std::shared_ptr<Result>>& results) {
  for (const auto& r : results) {
    if (r->replies.empty()) continue;
    StepView v(g_, r->server_index, step_, bucket_, tensors_, version_);
    for (const auto& rep : r->replies) {
      clear_error();
      const wsync_adapter_v1_t* t = g_->plugins.adapter.table;
      wsync_status_t st = t->take_reply(g_->plugins.adapter_self, &v.es, rep.request_index, rep.http_status,
                                        rep.body.data(), rep.body.size());
      if (st != WSYNC_OK && step_ == WSYNC_STEP_CHECK)  // (the adapter's words quote the engine)
        return fail(st, "engine %s refused the declared update before anything was paused, sent or loaded: %s "
                    "[the engine servers were not touched: they serve the version they had]",
                    g_->engines.servers[r->server_index].url.c_str(), last_error().c_str());
      if (st != WSYNC_OK)
        return fail(st, "adapter '%s' refused the %s answer of engine %s: %s", t->name, step_name(step_),
                    g_->engines.servers[r->server_index].url.c_str(), last_error().c_str());
    }
  }
  return WSYNC_OK;
}

void EngineCalls::cancel() {
  if (threads_.empty()) return;
  for (const auto& r : results_) r->stop.store(true);
  for (auto& t : threads_) t.join();
  threads_.clear();
  results_.clear();
}

wsync_status_t engines_step(wsync_group_t* g, int step, uint64_t version, const CallMode& mode, size_t* sent) {
  EngineCalls calls;
  wsync_status_t st = calls.start(g, step, nullptr, nullptr, version, nullptr, mode);
  if (sent != nullptr) *sent = calls.sent();
  if (st != WSYNC_OK) return st;
  return calls.finish(mode.flight);
}

}  // namespace wsync
