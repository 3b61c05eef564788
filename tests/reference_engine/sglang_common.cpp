// sglang_common.cpp — see sglang_common.h.
#include "sglang_common.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "replies.h"

namespace refeng {

const char* const kSglangDefaultGroup = "weight_update_group";

JsonPtr sglang_parse(const httplib::Request& req, httplib::Response& res, const ModelSpec& spec) {
  Validated v = validate_model(req.body, req.get_header_value("Content-Type"), spec);
  if (v.internal_error) reply_internal_error(res);
  else if (!v.body) reply_sglang_validation(res, v.errors);
  return std::move(v.body);
}

void sglang_crash(const Shared& s, const std::string& exception) {
  std::fprintf(stderr,
               "wsync-reference-engine: emulating SGLang %s: Scheduler hit an exception: %s\n"
               "wsync-reference-engine: the scheduler sends SIGQUIT to the server; exiting with status 3\n",
               s.fam.version.c_str(), exception.c_str());
  std::fflush(nullptr);
  _exit(3);
}

bool sglang_dp_refused(Shared& s, httplib::Response& res) {
  if (s.opt.dp_size <= 1) return false;  // no DP attention here: dp_size > 1 means replicas
  std::fprintf(stderr, "wsync-reference-engine: AssertionError: %s\n",
               s.fam.sg.dp_replicas_text ? "data-parallel replicas are not supported for update weights from distributed"
                                         : "dp_size must be 1 or dp attention must be enabled for update weights from distributed");
  reply_internal_error(res);
  return true;
}

std::string sglang_update_failure(const SglangFeatures& f, const std::string& why) {
  if (f.receive_prefix) return "Failed to receive weights: " + why;
  return "Failed to update parameter online: " + why +
         ". The full weights of the ModelRunner are partially updated. Please discard the whole weights.";
}

std::string py_str_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + py_str_repr(v[i]);
  return s + "]";
}

void sglang_status_ok(httplib::Response& res, const char* message) {
  JsonPtr o(cJSON_CreateObject());
  cJSON_AddStringToObject(o.get(), "message", message);
  cJSON_AddStringToObject(o.get(), "status", "ok");
  reply_json(res, 200, o.get());
}

bool sglang_wait_generation(Shared& s, int timeout_s) {
  std::unique_lock<std::mutex> lk(s.mu);
  return s.cv.wait_for(lk, std::chrono::seconds(timeout_s), [&] { return (!s.paused && s.writer_held == 0) || s.stopping; }) &&
         !s.stopping;
}

WriterHold::WriterHold(Shared& s, bool hold) : s_(s), hold_(hold) {
  if (!hold_) return;
  std::lock_guard<std::mutex> lk(s_.mu);
  ++s_.writer_held;
}

WriterHold::~WriterHold() {
  if (!hold_) return;
  std::lock_guard<std::mutex> lk(s_.mu);
  --s_.writer_held;
  s_.cv.notify_all();
}

}  // namespace refeng
