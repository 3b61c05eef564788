// sglang_session.cpp — SGLang's control routes around an update: POST /begin_weight_update and
// /end_weight_update (0.5.21+), /pause_generation, /continue_generation, GET|POST /flush_cache,
// POST /update_weight_version.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "models.h"
#include "replies.h"
#include "router.h"
#include "sglang_common.h"

namespace refeng {
namespace {

const char* kCacheFlushed =
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the "
    "operation will not be performed.)\n";

void add_session_routes(Router& r, Shared& s) {
  r.add("POST", "/begin_weight_update", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = sglang_parse(req, res, sglang_begin_model(s.fam.sg));
    if (!b) return;
    std::lock_guard<std::mutex> core(s.core);
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.session_open)
      return reply_success(res, false,
                           "a weight-update session is already open; call end_weight_update() first");
    s.session_open = true;
    s.session_selector = get_str(b.get(), "selector", "all");
    reply_success(res, true, "Success");
  });
  r.add("POST", "/end_weight_update", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = sglang_parse(req, res, sglang_end_model(s.fam.sg));
    if (!b) return;
    std::lock_guard<std::mutex> core(s.core);
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.session_open)
      return reply_success(res, false, "no weight-update session is open; call begin_weight_update() first");
    s.session_open = false;
    s.session_selector.clear();
    reply_success(res, true, "Success");
  });
}

void add_pause_routes(Router& r, Shared& s) {
  // 0.5.5 reads no body; 0.5.6+ requires one ({} is enough).
  r.add("POST", "/pause_generation", [&s](const httplib::Request& req, httplib::Response& res) {
    std::string mode = "abort";
    if (s.fam.sg.pause_body) {
      JsonPtr b = sglang_parse(req, res, sglang_pause_model(s.fam.sg));
      if (!b) return;
      mode = get_str(b.get(), "mode", "abort");
    }
    if (mode == "abort") s.note_abort("/pause_generation mode=abort");
    std::unique_lock<std::mutex> core(s.core, std::defer_lock);
    if (mode != "abort") core.lock();  // retract / in_place go through the scheduler
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.paused = true;
      s.pause_mode = mode;
    }
    sglang_status_ok(res, "Generation paused successfully.");
  });
  r.add("POST", "/continue_generation", [&s](const httplib::Request& req, httplib::Response& res) {
    if (s.fam.sg.continue_body && !sglang_parse(req, res, sglang_continue_model(s.fam.sg))) return;
    std::unique_lock<std::mutex> core(s.core, std::defer_lock);
    if (s.fam.sg.continue_body) core.lock();  // 0.5.6+ forwards to the scheduler
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.paused = false;
      s.pause_mode.clear();
    }
    s.cv.notify_all();
    sglang_status_ok(res, "Generation continued successfully.");
  });
}

// 0.5.10+: ?timeout=<float >= 0>, FastAPI-validated (a bad value is a 400 validation error).
bool flush_timeout(const httplib::Request& req, httplib::Response& res, double* out) {
  *out = 0;
  if (!req.has_param("timeout")) return true;
  std::string t = req.get_param_value("timeout");
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  std::vector<FieldError> errors;
  JsonPtr input(cJSON_CreateString(t.c_str()));
  if (t.empty() || *end != '\0') {
    add_error(&errors, "float_parsing", loc_path({"query", "timeout"}),
              "Input should be a valid number, unable to parse string as a number", input.get());
  } else if (v < 0) {
    JsonPtr ctx(cJSON_CreateObject());
    cJSON_AddNumberToObject(ctx.get(), "ge", 0.0);
    add_error(&errors, "greater_than_equal", loc_path({"query", "timeout"}), "Input should be greater than or equal to 0",
              input.get(), std::move(ctx));
  }
  if (!errors.empty()) { reply_sglang_validation(res, errors); return false; }
  *out = v;
  return true;
}

// --flush-busy N: the first N flushes find the scheduler busy (requests running or queued).
void flush(Shared& s, const httplib::Request& req, httplib::Response& res) {
  double timeout = 0;
  if (s.fam.sg.flush_timeout && !flush_timeout(req, res, &timeout)) return;
  bool busy;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.flush_in_progress) return reply_bare(res, 400, "Another flush_cache is already in progress.");
    busy = ++s.flush_calls <= s.opt.flush_busy;
    s.flush_in_progress = busy && timeout > 0;
  }
  if (!busy) {
    std::lock_guard<std::mutex> core(s.core);
    return reply_bare(res, 200, kCacheFlushed);
  }
  if (!s.fam.sg.flush_timeout) return reply_bare(res, 400, kCacheFlushed);  // <= 0.5.9: the same text
  if (timeout <= 0) return reply_bare(res, 400, "Flush cache failed.\n");
  std::this_thread::sleep_for(std::chrono::duration<double>(timeout));  // deferred until the deadline
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.flush_in_progress = false;
  }
  reply_bare(res, 400, "Timed out waiting for idle state.");
}

}  // namespace

void add_sglang_session_routes(Router& r, Shared& s) {
  if (s.fam.sg.sessions) add_session_routes(r, s);
  add_pause_routes(r, s);
  auto f = [&s](const httplib::Request& req, httplib::Response& res) { flush(s, req, res); };
  r.add("GET", "/flush_cache", f);
  r.add("POST", "/flush_cache", f);

  // abort_all_requests defaults to true: every running request is aborted first.
  r.add("POST", "/update_weight_version", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = sglang_parse(req, res, sglang_weight_version_model(s.fam.sg));
    if (!b) return;
    if (get_bool(b.get(), "abort_all_requests", true)) s.note_abort("/update_weight_version");
    std::unique_lock<std::mutex> core(s.core, std::defer_lock);
    if (s.fam.sg.version_needs_scheduler) core.lock();  // 0.5.19+: a scheduler round trip
    std::string v = get_str(b.get(), "new_version", "");
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.weight_version = v;
    }
    JsonPtr o(cJSON_CreateObject());
    cJSON_AddBoolToObject(o.get(), "success", true);
    cJSON_AddStringToObject(o.get(), "message", ("Weight version updated to " + v).c_str());
    cJSON_AddStringToObject(o.get(), "new_version", v.c_str());
    reply_json(res, 200, o.get());
  });
}

}  // namespace refeng
