#include "common/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>

namespace wsync {
namespace {

thread_local std::string t_last_error;
thread_local wsync_status_t t_last_status = WSYNC_OK;

struct LogSink {
  std::mutex mu;
  wsync_log_fn fn = nullptr;
  void* user_data = nullptr;
  int max_level = -1;  // -1: not yet read from the environment
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
  }
  if (fn != nullptr) {
    fn(ud, level, message);
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
  wsync::LogSink& s = wsync::sink();
  std::lock_guard<std::mutex> g(s.mu);
  s.fn = fn;
  s.user_data = user_data;
  s.max_level = fn != nullptr ? max_level : wsync::level_from_env();
}

}  // extern "C"
