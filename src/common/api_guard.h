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

// body() -> wsync_status_t, exceptions turned into statuses; the caller's error detail is kept
// until the body sets one (host-table services).
template <typename Body>
wsync_status_t guard_status(const char* where, Body&& body) noexcept {
  try {
    throw_point(where);
    return body();
  } catch (...) {
    return fail_exception(where, std::current_exception());
  }
}

// An exported function: clear_error(), then the guarded body.
template <typename Body>
wsync_status_t api_call(const char* where, Body&& body) noexcept {
  clear_error();
  return guard_status(where, static_cast<Body&&>(body));
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

// The body of an exported *_init: `new T`, init(obj) (exceptions turned into statuses), *out set
// only on success; on failure dispose(obj) runs and the init's error is what the caller reads.
template <typename T, typename Init, typename Dispose>
wsync_status_t create_object(const char* where, const char* what, T** out, Init&& init, Dispose&& dispose) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = nullptr;
  T* obj = new (std::nothrow) T();
  if (obj == nullptr) return fail(WSYNC_ERR_OUT_OF_MEMORY, "cannot allocate %s", what);
  wsync_status_t st = guard_status(where, [&] { return init(obj); });
  if (st != WSYNC_OK) {
    const std::string why = last_error();
    dispose(obj);
    return fail_msg(st, why);
  }
  *out = obj;
  return WSYNC_OK;
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
