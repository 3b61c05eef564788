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

// Log through the installed sink (callback, or stderr filtered by WSYNC_LOG_LEVEL).
void log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void log_msg(int level, const char* message);
bool log_enabled(int level);

}  // namespace wsync

// Run `stmt` (an assignment of a status) so that no C++ exception crosses the C ABI: an
// allocation failure becomes WSYNC_ERR_OUT_OF_MEMORY, anything else WSYNC_ERR_INTERNAL.
#define WSYNC_GUARD(stmt)                                                                      \
  do {                                                                                         \
    try {                                                                                      \
      stmt;                                                                                    \
    } catch (const std::bad_alloc&) {                                                          \
      return ::wsync::fail(WSYNC_ERR_OUT_OF_MEMORY, "out of memory");                          \
    } catch (const std::exception& e) {                                                        \
      return ::wsync::fail(WSYNC_ERR_INTERNAL, "internal error: %s (please report)", e.what()); \
    } catch (...) {                                                                            \
      return ::wsync::fail(WSYNC_ERR_INTERNAL, "internal error (please report)");              \
    }                                                                                          \
  } while (0)

#define WSYNC_LOGE(...) ::wsync::log(WSYNC_LOG_ERROR, __VA_ARGS__)
#define WSYNC_LOGW(...) ::wsync::log(WSYNC_LOG_WARN, __VA_ARGS__)
#define WSYNC_LOGI(...) ::wsync::log(WSYNC_LOG_INFO, __VA_ARGS__)
#define WSYNC_LOGD(...) \
  do { if (::wsync::log_enabled(WSYNC_LOG_DEBUG)) ::wsync::log(WSYNC_LOG_DEBUG, __VA_ARGS__); } while (0)
