/* plugin_util.h — what every bundled plugin needs from outside its own job: the host table, failing
 * with a message, logging, a monotonic clock and deadlines, and growable arrays. Compiled into each
 * plugin (a static library, hidden symbols: every plugin has its own copy of the host pointer;
 * plugins never link libwsync or each other). Third-party plugins may copy it. */
#ifndef WSYNC_PLUGIN_UTIL_H_
#define WSYNC_PLUGIN_UTIL_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "wsync_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bundled plugins' release (the project's version, from the build). */
#ifndef WSYNC_PLUGIN_VERSION
#define WSYNC_PLUGIN_VERSION "unknown"
#endif

/* The host table given to the entry function (after WSYNC_PLUGIN_CHECK_HOST accepted it). */
void wsp_set_host(const wsync_host_v1_t* host);
const wsync_host_v1_t* wsp_host(void);

/* Format a message, hand it to host->set_error (what wsync_last_error() shows), return `status`. */
wsync_status_t wsp_fail(wsync_status_t status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a prefix ("adapter 'vllm': ") and a va_list. */
wsync_status_t wsp_vfail(wsync_status_t status, const char* prefix, const char* fmt, va_list ap);
/* One already formatted line through the core's log sink (WSYNC_LOG_*). */
void wsp_log(int32_t level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void wsp_vlog(int32_t level, const char* prefix, const char* fmt, va_list ap);

/* The monotonic clock, and deadlines from a caller's timeout (negative counts as 0; capped far
 * below overflow, so a "forever" timeout is still a deadline). */
int64_t wsp_now_ms(void);
int64_t wsp_now_us(void);
int64_t wsp_deadline_ms(int64_t timeout_ms);
int64_t wsp_deadline_us(int64_t timeout_ms);
/* Sleep `us` microseconds, never past deadline_us (wsp_now_us clock). */
void wsp_sleep_us(int64_t us, int64_t deadline_us);

/* The checks every transport's create starts with: *out = NULL (when out is not NULL), out and
 * params non-NULL, params large enough for timeout_ms, rank inside a world of 1..INT_MAX, and a
 * store when there are peers. `label` prefixes the message ("transport 'ucx'"); `store_use` says
 * what the store is for ("addresses"). WSYNC_OK or INVALID_ARGUMENT with the message set. */
wsync_status_t wsp_check_transport_params(const char* label, const wsync_transport_params_t* params, void** out,
                                          const char* store_use);

/* The value of hint `key` given to a transport's create (plugin ABI 1.2 hints), or NULL when it is
 * absent or the core's params predate hints. The array is stepped by its first element's
 * struct_size, as every array of structs in the ABI. */
const char* wsp_hint(const wsync_transport_params_t* params, const char* key);

/* Grow *arr (elements of `size` bytes, capacity *cap) so that index `count` fits; 0, or -1 when out
 * of memory (*arr unchanged then). */
int wsp_reserve(void** arr, size_t* cap, size_t count, size_t size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WSYNC_PLUGIN_UTIL_H_ */
