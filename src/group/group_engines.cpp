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

// A request copied out of the adapter (its strings live only until its next build_requests).
struct OwnedRequest {
  wsync_http_request_t req = WSYNC_HTTP_REQUEST_INIT;
  std::string path, body;
  bool has_body = false;
  wsync_http_request_t view() const {
    wsync_http_request_t r = req;
    r.path = path.c_str();
    r.body = has_body ? body.c_str() : nullptr;
    return r;
  }
};

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
    default: return "step";
  }
}

// The tensors of one bucket as the step's parallel arrays.
struct StepTensors {
  std::vector<const char*> names;
  std::vector<int32_t> dtypes, ndims;
  std::vector<int64_t> shapes;
};

wsync_status_t build(wsync_group_t* g, size_t index, int step, const PlanBucket* bucket,
                     const std::vector<wsync_tensor_t>* tensors, uint64_t version, std::vector<OwnedRequest>* out) {
  const EngineServer& s = g->engines[index];
  wsync_engine_step_t es = WSYNC_ENGINE_STEP_INIT;
  es.step = step;
  es.server_index = static_cast<uint32_t>(index);
  es.server_gpus = s.gpus;
  es.rank_offset = s.rank_offset;
  es.world_size = g->num_receivers + 1;
  std::string host;
  uint16_t port = 0;
  parse_host_port(g->store_addr, &host, &port);
  es.master_address = host.c_str();
  es.master_port = port;
  es.group_name = g->group_name.c_str();
  es.version = version;
  // The transport properties the adapter asked for (get_needs), as the transport gave them.
  std::vector<wsync_option_t> props = to_c_options(g->transport_properties);
  es.properties = props.data();
  es.num_properties = props.size();
  StepTensors st;
  if (bucket != nullptr && tensors != nullptr) {
    for (const auto& e : bucket->entries) {
      const wsync_tensor_t& t = (*tensors)[e.tensor_index];
      st.names.push_back(t.name);
      st.dtypes.push_back(t.dtype);
      st.ndims.push_back(t.ndim);
      for (int d = 0; d < WSYNC_MAX_NDIM; ++d) st.shapes.push_back(d < t.ndim ? t.shape[d] : 0);
    }
    es.num_tensors = st.names.size();
    es.names = st.names.data();
    es.dtypes = st.dtypes.data();
    es.ndims = st.ndims.data();
    es.shapes = st.shapes.data();
    es.bucket_bytes = bucket->bytes;
    es.update_index = g->bucket_in_update;
  }
  const wsync_http_request_t* reqs = nullptr;
  uint32_t n = 0;
  clear_error();
  wsync_status_t rc = g->adapter.table->build_requests(g->adapter_self, &es, &reqs, &n);
  if (rc != WSYNC_OK)
    return fail(rc, "adapter '%s' could not build the %s requests for %s: %s", g->adapter.table->name,
                step_name(step), s.url.c_str(), last_error().c_str());
  if (n > 0 && reqs == nullptr)
    return fail(WSYNC_ERR_INTERNAL, "adapter '%s' returned %u requests but no array", g->adapter.table->name, n);
  out->clear();
  for (uint32_t i = 0; i < n; ++i) {
    const wsync_http_request_t& r = reqs[i];
    if (r.struct_size < WSYNC_STRUCT_SIZE(wsync_http_request_t, reply) || r.path == nullptr || r.path[0] != '/' ||
        (r.method != WSYNC_HTTP_GET && r.method != WSYNC_HTTP_POST))
      return fail(WSYNC_ERR_INTERNAL, "adapter '%s' built a malformed %s request %u (path, method or struct_size)",
                  g->adapter.table->name, step_name(step), i);
    OwnedRequest o;
    o.req = r;
    o.path = r.path;
    o.has_body = r.body != nullptr;
    if (o.has_body) o.body = r.body;
    out->push_back(std::move(o));
  }
  return WSYNC_OK;
}

}  // namespace

struct EngineCalls::Result {
  wsync_status_t status = WSYNC_OK;
  std::string why;
  std::atomic<bool> done{false};
};

bool engines_option(wsync_group_t* g, const std::string& k, const std::string& v, wsync_status_t* st) {
  uint64_t n = 0;
  if (k == "engines") {
    g->engines_spec = v;
  } else if (k == "engine_receivers") {
    if (v == "none" || v == "wsync")
      g->engines_embed_wsync = v == "wsync";
    else
      *st = fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'engine_receivers' is '%s'; use 'none' (unmodified engines) or "
                 "'wsync' (engines that embed a wsync receiver)", v.c_str());
  } else if (k == "engine_api_key") {
    g->http.api_key = v;
  } else if (k == "engine_connect_timeout_ms") {
    if ((*st = parse_u64_option(k, v, 1, 3600 * 1000, &n)) == WSYNC_OK) g->http.connect_timeout_ms = static_cast<int64_t>(n);
  } else if (k == "engine_timeout_ms") {
    if ((*st = parse_u64_option(k, v, 1, 24ull * 3600 * 1000, &n)) == WSYNC_OK) g->http.request_timeout_ms = static_cast<int64_t>(n);
  } else if (k == "engine_retries") {
    if ((*st = parse_u64_option(k, v, 0, 100, &n)) == WSYNC_OK) g->http.retries = static_cast<int>(n);
  } else {
    return false;
  }
  return true;
}

wsync_status_t engines_health(wsync_group_t* g, uint32_t configured) {
  if (g->engines_spec.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '%s' drives engines over HTTP: set the group option 'engines' "
                "(\"http://host:port=<gpus>,...\")", g->adapter.table->name);
  wsync_status_t st = parse_engine_servers(g->engines_spec, &g->engines);
  if (st != WSYNC_OK) return st;
  uint32_t listed = 0;
  for (const auto& s : g->engines) listed += s.gpus;
  if (configured != 0 && configured != listed)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->num_receivers is %u but the servers in 'engines' have %u GPU(s) "
                "in all; give 0 to take it from 'engines'", configured, listed);
  // Health: every listed server, concurrently; the unhealthy ones are left out everywhere after.
  std::vector<std::vector<OwnedRequest>> reqs(g->engines.size());
  for (size_t i = 0; i < g->engines.size(); ++i)
    if ((st = build(g, i, WSYNC_STEP_HEALTH, nullptr, nullptr, 0, &reqs[i])) != WSYNC_OK) return st;
  struct Health {
    wsync_status_t status = WSYNC_OK;
    std::string why;
  };
  std::vector<Health> res(g->engines.size());
  // A health check is quick or it fails: at most 10 s, one retry.
  HttpOptions quick = g->http;
  quick.request_timeout_ms = std::min<int64_t>(quick.request_timeout_ms, 10000);
  quick.retries = std::min(quick.retries, 1);
  for_each_server_concurrently(g->engines.size(), [&](size_t i) {
    try {  // an exception must not escape a thread: the server counts as failed
      for (const auto& r : reqs[i]) {
        wsync_http_request_t v = r.view();
        std::string why;
        wsync_status_t s = http_call(g->engines[i].url, v, quick, &g->aborted, &why);
        if (s != WSYNC_OK) {
          res[i].status = s;
          res[i].why = why;
          return;
        }
      }
    } catch (...) {
      res[i].status = fail_exception("an engine health thread", std::current_exception());
      res[i].why = "internal error during the health check";
    }
  });
  std::vector<EngineServer> healthy;
  std::string down;
  for (size_t i = 0; i < g->engines.size(); ++i) {
    if (res[i].status == WSYNC_OK) {
      healthy.push_back(g->engines[i]);
      continue;
    }
    WSYNC_LOGW("group '%s': engine %s failed its health check and is left out: %s", g->group_name.c_str(),
               g->engines[i].url.c_str(), res[i].why.c_str());
    down += "\n  " + g->engines[i].url + ": " + res[i].why;
  }
  if (healthy.empty())
    return fail(WSYNC_ERR_PEER_FAILED, "group '%s': no engine server passed its health check:%s", g->group_name.c_str(),
                down.c_str());
  g->engines = std::move(healthy);
  uint32_t world = assign_rank_offsets(&g->engines);
  g->num_receivers = world - 1;
  std::string list;
  for (const auto& s : g->engines)
    list += (list.empty() ? "" : ", ") + s.url + " (ranks " + std::to_string(s.rank_offset) + ".." +
            std::to_string(s.rank_offset + s.gpus - 1) + ")";
  WSYNC_LOGI("group '%s': %zu engine server(s), world size %u: %s", g->group_name.c_str(), g->engines.size(), world,
             list.c_str());
  return WSYNC_OK;
}

EngineCalls::~EngineCalls() { cancel(); }

wsync_status_t EngineCalls::start(wsync_group_t* g, int step, const PlanBucket* bucket,
                                  const std::vector<wsync_tensor_t>* tensors, uint64_t version,
                                  std::atomic<bool>* failed) {
  cancel();
  stop_->store(false);
  group_aborted_ = &g->aborted;
  std::vector<std::vector<OwnedRequest>> reqs(g->engines.size());
  for (size_t i = 0; i < g->engines.size(); ++i) {
    wsync_status_t st = build(g, i, step, bucket, tensors, version, &reqs[i]);
    if (st != WSYNC_OK) return st;
  }
  for (size_t i = 0; i < g->engines.size(); ++i) {
    if (reqs[i].empty()) continue;
    auto res = std::make_shared<Result>();
    results_.push_back(res);
    std::string url = g->engines[i].url;
    HttpOptions http = g->http;
    auto stop = stop_;
    const char* what = step_name(step);
    threads_.emplace_back([res, url, http, stop, what, failed, rq = std::move(reqs[i])] {
      try {  // an exception must not escape a thread (std::terminate): it fails this server's step
        for (const auto& r : rq) {
          wsync_http_request_t v = r.view();
          std::string why;
          wsync_status_t s = http_call(url, v, http, stop.get(), &why);
          if (s != WSYNC_OK) {
            res->status = s;
            res->why = std::string(what) + ": " + why;
            if (failed) failed->store(true);
            break;
          }
        }
      } catch (...) {
        res->status = fail_exception("an engine request thread", std::current_exception());
        try {
          res->why = std::string(what) + ": " + last_error();
        } catch (...) {
        }
        if (failed) failed->store(true);
      }
      res->done.store(true);
    });
  }
  return WSYNC_OK;
}

wsync_status_t EngineCalls::finish() {
  // Wait without blocking in join, so that wsync_group_abort can stop requests in flight.
  for (;;) {
    bool all = true;
    for (const auto& r : results_) all = all && r->done.load();
    if (all) break;
    if (group_aborted_ && group_aborted_->load()) stop_->store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  wsync_status_t st = WSYNC_OK;
  std::string why;
  for (const auto& r : results_)
    if (r->status != WSYNC_OK && st == WSYNC_OK) {
      st = r->status;
      why = r->why;
    }
  results_.clear();
  return st == WSYNC_OK ? WSYNC_OK : fail_msg(st, why);
}

void EngineCalls::cancel() {
  if (threads_.empty()) return;
  stop_->store(true);
  for (auto& t : threads_) t.join();
  threads_.clear();
  results_.clear();
}

wsync_status_t engines_step(wsync_group_t* g, int step, uint64_t version) {
  EngineCalls calls;
  wsync_status_t st = calls.start(g, step, nullptr, nullptr, version);
  if (st != WSYNC_OK) return st;
  return calls.finish();
}

}  // namespace wsync
