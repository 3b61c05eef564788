// router.cpp — the single dispatcher: request log, API-key check, route lookup, 404/405, and
// a last-resort 500 so a handler bug never takes the process down (see router.h).
#include "router.h"

#include <cctype>
#include <cstdio>
#include <exception>

#include "replies.h"

namespace refeng {

void Router::add(const std::string& method, const std::string& path, Fn fn) {
  routes_[{method, path}] = std::move(fn);
}

void Router::install(httplib::Server& svr) {
  auto d = [this](const httplib::Request& req, httplib::Response& res) { dispatch(req, res); };
  svr.Get(".*", d);  // answers HEAD too
  svr.Post(".*", d);
  svr.Put(".*", d);
  svr.Patch(".*", d);
  svr.Delete(".*", d);
  svr.Options(".*", d);
  // A POST without Content-Length or Transfer-Encoding has no body (RFC 9112 6.3), but
  // cpp-httplib 0.11 reads it until the connection closes and answers 400 after its read timeout.
  // Such requests (curl -X POST) are dispatched here, before httplib tries to read a body.
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    bool body_method = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "DELETE";
    if (!body_method || req.has_header("Content-Length") || req.has_header("Transfer-Encoding"))
      return httplib::Server::HandlerResponse::Unhandled;
    dispatch(req, res);
    if (res.status == -1) res.status = 200;
    return httplib::Server::HandlerResponse::Handled;
  });
}

namespace {
bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
}  // namespace

// Where each engine's middleware asks for the key: SGLang everything but /health*, /ready*,
// /metrics*; vLLM only /v1, /v2, /inference, /cohere (its dev routes are open); LMDeploy
// everything but /health, /docs, /redoc, /nodes. OPTIONS and /debug/* pass.
bool Router::authorized(const httplib::Request& req) const {
  if (opt_.api_key.empty() || req.method == "OPTIONS" || starts_with(req.path, "/debug/")) return true;
  const std::string& p = req.path;
  switch (opt_.family.protocol) {
    case Protocol::kSglang:
      if (starts_with(p, "/health") || starts_with(p, "/ready") || starts_with(p, "/metrics")) return true;
      break;
    case Protocol::kVllm:
      if (!starts_with(p, "/v1") && !starts_with(p, "/v2") && !starts_with(p, "/inference") && !starts_with(p, "/cohere"))
        return true;
      break;
    case Protocol::kLmdeploy:
      if (starts_with(p, "/health") || starts_with(p, "/docs") || starts_with(p, "/redoc") || starts_with(p, "/nodes"))
        return true;
      break;
  }
  std::string h = req.get_header_value("Authorization");
  size_t sp = h.find(' ');
  if (sp == std::string::npos) return false;
  std::string scheme = h.substr(0, sp);
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme == "bearer" && h.substr(sp + 1) == opt_.api_key;
}

void Router::dispatch(const httplib::Request& req, httplib::Response& res) {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  const bool debug = starts_with(req.path, "/debug/");
  uint64_t seq = 0;
  if (!debug) {
    std::lock_guard<std::mutex> lk(log_mu_);
    size_t q = req.target.find('?');
    seq = next_seq_++;
    log_.push_back({seq, req.method, req.path, q == std::string::npos ? "" : req.target.substr(q + 1), req.body, -1});
  }
  try {
    if (!authorized(req)) {
      reply_unauthorized(res, opt_.family);
    } else {
      auto it = routes_.find({method, req.path});
      if (it != routes_.end()) {
        it->second(req, res);
      } else {
        bool other_method = false;
        for (const auto& kv : routes_) other_method = other_method || kv.first.second == req.path;
        if (other_method) reply_detail(res, 405, "Method Not Allowed");
        else reply_detail(res, 404, "Not Found");
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wsync-reference-engine: %s %s: internal error: %s\n", req.method.c_str(), req.path.c_str(),
                 e.what());
    reply_internal_error(res);
  }
  if (!debug) {
    std::lock_guard<std::mutex> lk(log_mu_);
    for (auto it = log_.rbegin(); it != log_.rend(); ++it)
      if (it->seq == seq) { it->status = res.status; break; }
  }
}

std::string Router::requests_json() {
  JsonPtr arr(cJSON_CreateArray());
  std::lock_guard<std::mutex> lk(log_mu_);
  for (const Logged& l : log_) {
    cJSON* o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", l.method.c_str());
    cJSON_AddStringToObject(o, "path", l.path.c_str());
    cJSON_AddStringToObject(o, "query", l.query.c_str());
    cJSON_AddStringToObject(o, "body", l.body.c_str());
    if (l.status < 0) cJSON_AddNullToObject(o, "status");
    else cJSON_AddNumberToObject(o, "status", l.status);
    cJSON_AddItemToArray(arr.get(), o);
  }
  return json_print(arr.get());
}

void Router::clear_requests() {
  std::lock_guard<std::mutex> lk(log_mu_);
  log_.clear();
}

}  // namespace refeng
