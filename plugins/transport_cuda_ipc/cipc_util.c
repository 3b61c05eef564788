/* cipc_util.c — error and log formatting, the clock and the poll pause every wait of the plugin
 * uses, bounded store reads, and the two CUDA helpers shared by both sides (selecting the
 * device, reading a device's UUID). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cipc_transport.h"

wsync_status_t cipc_fail(wsync_status_t status, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return cipc_host->set_error(status, msg);
}

void cipc_log(int32_t level, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  if (cipc_host->log == NULL) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cipc_host->log(level, msg);
}

int64_t cipc_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t cipc_deadline(int64_t timeout_ms) {
  /* Cap far below overflow: a "forever" timeout is still a deadline. */
  const int64_t cap_ms = (int64_t)1 << 40;
  if (timeout_ms < 0) timeout_ms = 0;
  if (timeout_ms > cap_ms) timeout_ms = cap_ms;
  return cipc_now_us() + timeout_ms * 1000;
}

void cipc_pause(const cipc_transport_t* t, int64_t deadline_us) {
  int64_t us = t->opts.poll_us;
  const int64_t left = deadline_us - cipc_now_us();
  struct timespec ts;
  if (us > left) us = left;
  if (us <= 0) return;
  ts.tv_sec = (time_t)(us / 1000000);
  ts.tv_nsec = (long)(us % 1000000) * 1000;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int64_t cipc_poll_wait_ms(int64_t deadline_us) {
  const int64_t left_ms = (deadline_us - cipc_now_us()) / 1000;
  if (left_ms <= 0) return 0;
  return left_ms < 5 ? left_ms : 5;
}

wsync_status_t cipc_store_read(cipc_transport_t* t, const char* key, void* buf, uint64_t cap, uint64_t* len,
                               int64_t wait_ms) {
  wsync_status_t rc;
  *len = 0;
  rc = cipc_host->store_get(t->store, key, buf, cap, len, wait_ms < 0 ? 0 : wait_ms);
  if (rc == WSYNC_ERR_INVALID_ARGUMENT && *len > cap)
    return cipc_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u: store key '%s' holds %llu bytes, more than "
                     "the %llu a cuda_ipc record can have", t->rank, key, (unsigned long long)*len,
                     (unsigned long long)cap);
  return rc; /* OK, TIMEOUT (the caller words it), or the store's own error */
}

wsync_status_t cipc_set_device(const cipc_transport_t* t, const char* what) {
  const cudaError_t e = cudaSetDevice(t->device);
  if (e != cudaSuccess)
    return cipc_fail(WSYNC_ERR_NO_DEVICE, "transport 'cuda_ipc': rank %u: %s: cudaSetDevice(%d) failed: %s", t->rank,
                     what, t->device, cudaGetErrorString(e));
  return WSYNC_OK;
}

cudaError_t cipc_device_uuid(int device, uint8_t out[CIPC_UUID_BYTES]) {
  struct cudaDeviceProp prop;
  const cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return e;
  memcpy(out, prop.uuid.bytes, CIPC_UUID_BYTES);
  return cudaSuccess;
}
