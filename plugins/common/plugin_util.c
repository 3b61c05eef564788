/* plugin_util.c — see plugin_util.h. */
#include "plugin_util.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Atomic: the core calls a plugin's entry at every load (a group and a receiver in one process,
 * on different threads, load the same plugin), while the plugin's other threads log and fail
 * through the table (TSan saw the entry's store race with a UCX log line's read). */
static _Atomic(const wsync_host_v1_t*) g_host;

void wsp_set_host(const wsync_host_v1_t* host) { atomic_store_explicit(&g_host, host, memory_order_release); }
const wsync_host_v1_t* wsp_host(void) { return atomic_load_explicit(&g_host, memory_order_acquire); }

wsync_status_t wsp_vfail(wsync_status_t status, const char* prefix, const char* fmt, va_list ap) {
  char msg[1024];
  int n = snprintf(msg, sizeof msg, "%s", prefix != NULL ? prefix : "");
  if (n < 0 || (size_t)n >= sizeof msg) n = 0;
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  const wsync_host_v1_t* host = wsp_host();
  return host != NULL && host->set_error != NULL ? host->set_error(status, msg) : status;
}

wsync_status_t wsp_fail(wsync_status_t status, const char* fmt, ...) {
  va_list ap;
  wsync_status_t st;
  va_start(ap, fmt);
  st = wsp_vfail(status, NULL, fmt, ap);
  va_end(ap);
  return st;
}

void wsp_vlog(int32_t level, const char* prefix, const char* fmt, va_list ap) {
  char msg[1024];
  int n;
  const wsync_host_v1_t* host = wsp_host();
  if (host == NULL || host->log == NULL) return;
  n = snprintf(msg, sizeof msg, "%s", prefix != NULL ? prefix : "");
  if (n < 0 || (size_t)n >= sizeof msg) n = 0;
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  host->log(level, msg);
}

void wsp_log(int32_t level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  wsp_vlog(level, NULL, fmt, ap);
  va_end(ap);
}

int64_t wsp_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t wsp_now_ms(void) { return wsp_now_us() / 1000; }

static int64_t clamp_timeout_ms(int64_t timeout_ms) {
  const int64_t cap_ms = (int64_t)1 << 40;
  if (timeout_ms < 0) return 0;
  return timeout_ms > cap_ms ? cap_ms : timeout_ms;
}

int64_t wsp_deadline_ms(int64_t timeout_ms) { return wsp_now_ms() + clamp_timeout_ms(timeout_ms); }
int64_t wsp_deadline_us(int64_t timeout_ms) { return wsp_now_us() + clamp_timeout_ms(timeout_ms) * 1000; }

void wsp_sleep_us(int64_t us, int64_t deadline_us) {
  const int64_t left = deadline_us - wsp_now_us();
  struct timespec ts;
  if (us > left) us = left;
  if (us <= 0) return;
  ts.tv_sec = (time_t)(us / 1000000);
  ts.tv_nsec = (long)(us % 1000000) * 1000;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

const char* wsp_hint(const wsync_transport_params_t* params, const char* key) {
  uint64_t i;
  if (!WSYNC_HAS_FIELD(params, wsync_transport_params_t, num_hints) || params->hints == NULL) return NULL;
  for (i = 0; i < params->num_hints; ++i) {
    const size_t stride = params->hints[0].struct_size ? params->hints[0].struct_size : sizeof(wsync_option_t);
    const wsync_option_t* h = (const wsync_option_t*)((const char*)params->hints + i * stride);
    if (h->key != NULL && h->value != NULL && strcmp(h->key, key) == 0) return h->value;
  }
  return NULL;
}

int wsp_reserve(void** arr, size_t* cap, size_t count, size_t size) {
  size_t ncap;
  void* p;
  if (count < *cap) return 0;
  ncap = *cap ? *cap * 2 : 8;
  while (ncap <= count) ncap *= 2;
  p = realloc(*arr, ncap * size);
  if (p == NULL) return -1;
  *arr = p;
  *cap = ncap;
  return 0;
}

wsync_status_t wsp_check_transport_params(const char* label, const wsync_transport_params_t* params, void** out,
                                          const char* store_use) {
  if (out != NULL) *out = NULL;
  if (params == NULL || out == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: create: NULL argument", label);
  if (!WSYNC_HAS_FIELD(params, wsync_transport_params_t, timeout_ms))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: params struct_size %u is too small", label, params->struct_size);
  if (params->world_size < 1 || params->world_size > INT_MAX || params->rank >= params->world_size)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: rank %u is outside a world of %u", label, params->rank,
                    params->world_size);
  if (params->store == NULL && params->world_size > 1)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: rank %u: no store to exchange %s through", label, params->rank,
                    store_use);
  return WSYNC_OK;
}
