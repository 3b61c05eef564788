// No C++ exception crosses the C boundary. Every exported function and every host-table callback
// runs its body through api_call / guard_void: an exception becomes a status with a message
// (std::bad_alloc: WSYNC_ERR_OUT_OF_MEMORY, anything else: WSYNC_ERR_INTERNAL), never a crash.
//
// Each guarded body first passes a throw point named after the function: tests install a hook that
// throws there (set_throw_hook) to prove, function by function, that the guard holds. Without a
// hook it costs one relaxed atomic load.
#pragma once

#include <exception>
#include <new>

#include "common/error.h"
#include "wsync.h"

namespace wsync {

using ThrowHook = void (*)(const char* where);
// Tests only: call `hook` at every throw point (nullptr removes it).
void set_throw_hook(ThrowHook hook);
void throw_point(const char* where);

// Record an exception caught at `where` as the calling thread's error; returns its status. Never
// throws (if even the message cannot be stored, the status alone is recorded).
wsync_status_t fail_exception(const char* where, std::exception_ptr e) noexcept;

// clear_error(), then body() -> wsync_status_t, exceptions turned into statuses.
template <typename Body>
wsync_status_t api_call(const char* where, Body&& body) noexcept {
  clear_error();
  try {
    throw_point(where);
    return body();
  } catch (...) {
    return fail_exception(where, std::current_exception());
  }
}

// The same for a callback that does not clear the caller's error first (host-table services).
template <typename Body>
wsync_status_t guard_status(const char* where, Body&& body) noexcept {
  try {
    throw_point(where);
    return body();
  } catch (...) {
    return fail_exception(where, std::current_exception());
  }
}

// For functions without a status (destroy, abort, log): an exception is logged and dropped.
// Such functions keep the caller's error detail (they never clear it).
template <typename Body>
void guard_void(const char* where, Body&& body) noexcept {
  try {
    throw_point(where);
    body();
  } catch (...) {
    log_exception(where, std::current_exception());
  }
}

// Any other value-returning function: `fallback` when the body throws.
template <typename T, typename Body>
T guard_value(const char* where, T fallback, Body&& body) noexcept {
  try {
    throw_point(where);
    return body();
  } catch (...) {
    log_exception(where, std::current_exception());
    return fallback;
  }
}

}  // namespace wsync
