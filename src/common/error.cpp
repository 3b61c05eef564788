#include "common/error.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <strings.h>

#include "common/api_guard.h"

namespace wsync {
namespace {

thread_local std::string t_last_error;
thread_local wsync_status_t t_last_status = WSYNC_OK;

struct LogSink {
  std::mutex mu;
  std::condition_variable idle;  // signalled when the last call of a callback returns
  wsync_log_fn fn = nullptr;
  void* user_data = nullptr;
  int max_level = -1;  // -1: not yet read from the environment
  int calls = 0;       // calls of a callback in progress
};

LogSink& sink() {
  static LogSink s;
  return s;
}

int level_from_env() {
  const char* v = std::getenv("WSYNC_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return WSYNC_LOG_WARN;
  static const char* names[] = {"off", "error", "warn", "info", "debug", "trace"};
  for (int i = 0; i <= WSYNC_LOG_TRACE; ++i)
    if (strcasecmp(v, names[i]) == 0) return i;
  if (strcasecmp(v, "warning") == 0) return WSYNC_LOG_WARN;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (end != v && *end == '\0' && n >= 0 && n <= WSYNC_LOG_TRACE) return static_cast<int>(n);
  std::fprintf(stderr, "[wsync warn] WSYNC_LOG_LEVEL='%s' is not error|warn|info|debug|trace or 0..5; using warn\n", v);
  return WSYNC_LOG_WARN;
}

std::string vformat(const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  char small[512];
  int n = std::vsnprintf(small, sizeof small, fmt, ap);
  std::string out;
  if (n < 0) {
    out = fmt;
  } else if (static_cast<size_t>(n) < sizeof small) {
    out.assign(small, static_cast<size_t>(n));
  } else {
    out.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(&out[0], out.size(), fmt, ap2);
    out.resize(static_cast<size_t>(n));
  }
  va_end(ap2);
  return out;
}

}  // namespace

wsync_status_t fail(wsync_status_t status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string m = vformat(fmt, ap);
  va_end(ap);
  return fail_msg(status, m);
}

wsync_status_t fail_msg(wsync_status_t status, const std::string& message) {
  t_last_error = message;
  t_last_status = status;
  log(WSYNC_LOG_DEBUG, "error %s: %s", wsync_status_name(status), message.c_str());
  return status;
}

void clear_error() {
  t_last_error.clear();
  t_last_status = WSYNC_OK;
}
const std::string& last_error() { return t_last_error; }
wsync_status_t last_status() { return t_last_status; }

std::string plugin_error(const char* kind, const char* name) {
  const std::string& detail = last_error();
  const std::string prefix = std::string(kind) + " '" + name + "': ";
  return detail.compare(0, prefix.size(), prefix) == 0 ? detail.substr(prefix.size()) : detail;
}

void restore_error(wsync_status_t status, const std::string& message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();
  }
  t_last_status = status;
}

namespace {

std::atomic<ThrowHook> g_throw_hook{nullptr};

// "what()" of an exception, or a fixed text; never throws.
const char* describe(std::exception_ptr e, bool* oom) noexcept {
  *oom = false;
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    *oom = true;
    return "out of memory";
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

void set_throw_hook(ThrowHook hook) { g_throw_hook.store(hook); }

void throw_point(const char* where) {
  ThrowHook h = g_throw_hook.load(std::memory_order_relaxed);
  if (h != nullptr) h(where);
}

wsync_status_t fail_exception(const char* where, std::exception_ptr e) noexcept {
  bool oom = false;
  const char* what = describe(e, &oom);
  const wsync_status_t st = oom ? WSYNC_ERR_OUT_OF_MEMORY : WSYNC_ERR_INTERNAL;
  try {
    if (oom) return fail(st, "%s: out of memory", where);
    return fail(st, "%s: internal error: %s (please report it)", where, what);
  } catch (...) {
    t_last_error.clear();  // even the message could not be stored: keep the status
    t_last_status = st;
    return st;
  }
}

void log_exception(const char* where, std::exception_ptr e) noexcept {
  bool oom = false;
  const char* what = describe(e, &oom);
  try {
    log(WSYNC_LOG_ERROR, "%s: %s (ignored: the function has no status to return)", where, what);
  } catch (...) {
  }
}

bool log_enabled(int level) {
  LogSink& s = sink();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.max_level < 0) s.max_level = level_from_env();
  return level <= s.max_level;
}

void log_msg(int level, const char* message) {
  LogSink& s = sink();
  wsync_log_fn fn;
  void* ud;
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.max_level < 0) s.max_level = level_from_env();
    if (level > s.max_level) return;
    fn = s.fn;
    ud = s.user_data;
    if (fn != nullptr) ++s.calls;
  }
  if (fn != nullptr) {
    fn(ud, level, message);
    std::lock_guard<std::mutex> g(s.mu);
    if (--s.calls == 0) s.idle.notify_all();
    return;
  }
  static const char* tags[] = {"?", "error", "warn", "info", "debug", "trace"};
  const char* tag = (level >= 1 && level <= 5) ? tags[level] : tags[0];
  std::fprintf(stderr, "[wsync %s] %s\n", tag, message);
}

void log(int level, const char* fmt, ...) {
  if (!log_enabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  std::string m = vformat(fmt, ap);
  va_end(ap);
  log_msg(level, m.c_str());
}

}  // namespace wsync

extern "C" {

WSYNC_API const char* wsync_last_error(void) { return wsync::last_error().c_str(); }

WSYNC_API void wsync_set_log_callback(wsync_log_fn fn, void* user_data, int32_t max_level) {
  wsync::guard_void("wsync_set_log_callback", [&] {
    wsync::LogSink& s = wsync::sink();
    std::unique_lock<std::mutex> g(s.mu);
    s.fn = fn;
    s.user_data = user_data;
    // The default sink takes max_level too when it names a level; 0 (or anything outside 1..5)
    // leaves it to WSYNC_LOG_LEVEL.
    const bool named = max_level >= WSYNC_LOG_ERROR && max_level <= WSYNC_LOG_TRACE;
    s.max_level = fn != nullptr || named ? max_level : wsync::level_from_env();
    // Calls of the previous callback still running finish first (bounded: a callback that calls
    // this function itself, or never returns, is not waited for longer), so a caller that is
    // about to free what the callback uses (an interpreter at exit) may do so once this returns.
    s.idle.wait_for(g, std::chrono::seconds(2), [&] { return s.calls == 0; });
  });
}

}  // extern "C"
