// Thread-local error detail and the log sink: every failure in the core and in plugins goes
// through fail(), so wsync_last_error() always names what went wrong.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "wsync.h"

namespace wsync {

// Record `status` with a printf-style detail for wsync_last_error() on this thread; returns
// `status` so callers can write `return fail(WSYNC_ERR_X, "...", ...)`.
wsync_status_t fail(wsync_status_t status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Same, with an already formatted message.
wsync_status_t fail_msg(wsync_status_t status, const std::string& message);
// Clear the detail (done on entry to every public call).
void clear_error();
// Current detail of this thread, and the status it was recorded with (WSYNC_OK if none).
const std::string& last_error();
wsync_status_t last_status();
// The detail a plugin recorded, without the "<kind> '<name>': " it starts with (bundled plugins
// name themselves), for a caller whose own message names the plugin already.
std::string plugin_error(const char* kind, const char* name);
// Restore a detail saved earlier (destroy functions keep the caller's error). Never throws.
void restore_error(wsync_status_t status, const std::string& message) noexcept;
// Log an exception that a guarded function without a status swallowed. Never throws.
void log_exception(const char* where, std::exception_ptr e) noexcept;

// Log through the installed sink (callback, or stderr filtered by WSYNC_LOG_LEVEL).
void log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void log_msg(int level, const char* message);
bool log_enabled(int level);

}  // namespace wsync

#define WSYNC_LOGE(...) ::wsync::log(WSYNC_LOG_ERROR, __VA_ARGS__)
#define WSYNC_LOGW(...) ::wsync::log(WSYNC_LOG_WARN, __VA_ARGS__)
#define WSYNC_LOGI(...) ::wsync::log(WSYNC_LOG_INFO, __VA_ARGS__)
#define WSYNC_LOGD(...) \
  do { if (::wsync::log_enabled(WSYNC_LOG_DEBUG)) ::wsync::log(WSYNC_LOG_DEBUG, __VA_ARGS__); } while (0)
