/* nccl_util.c — NCCL errors in words, the current device, and breaking a communicator. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_transport.h"

const char* nccl_describe(nccl_transport_t* t, ncclResult_t r, char* buf, size_t cap) {
  const char* last = ncclGetLastError(t != NULL ? t->comm : NULL);
  if (last != NULL && last[0] != '\0')
    snprintf(buf, cap, "%s (NCCL result %d); NCCL's last error: %s", ncclGetErrorString(r), (int)r, last);
  else
    snprintf(buf, cap, "%s (NCCL result %d); run with NCCL_DEBUG=WARN for details", ncclGetErrorString(r), (int)r);
  return buf;
}

wsync_status_t nccl_device_enter(const nccl_transport_t* t, int* prev) {
  cudaError_t e;
  int cur = -1;
  *prev = -1;
  if (cudaGetDevice(&cur) != cudaSuccess) {
    (void)cudaGetLastError();
    cur = -1;
  }
  if (cur == t->device) return WSYNC_OK;
  if ((e = cudaSetDevice(t->device)) != cudaSuccess) {
    (void)cudaGetLastError();
    return wsp_fail(WSYNC_ERR_IO, NCCL_TP ": rank %u: cudaSetDevice(%d) failed: %s", t->rank, t->device,
                     cudaGetErrorString(e));
  }
  /* The caller's thread keeps its own current device (a trainer's torch code relies on it). */
  *prev = cur;
  return WSYNC_OK;
}

void nccl_device_leave(const nccl_transport_t* t, int prev) {
  if (prev >= 0 && prev != t->device && cudaSetDevice(prev) != cudaSuccess) (void)cudaGetLastError();
}

wsync_status_t nccl_broken(nccl_transport_t* t) { return wsp_fail(t->broken_status, "%s", t->broken_msg); }

void nccl_break(nccl_transport_t* t, wsync_status_t status, const char* fmt, ...) {
  if (t->broken_status == WSYNC_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->broken_msg, sizeof t->broken_msg, fmt, ap);
    va_end(ap);
    t->broken_status = status;
    wsp_log(WSYNC_LOG_WARN, "%s", t->broken_msg);
  }
  if (t->comm != NULL) {
    /* Sets NCCL's abort flag (kernels and proxy threads quit), joins its threads, frees the
     * communicator. Called only from the owner thread. */
    ncclResult_t r = ncclCommAbort(t->comm);
    t->comm = NULL;
    t->init_pending = 0; /* a pending lazy init ends with the communicator */
    if (r != ncclSuccess)
      wsp_log(WSYNC_LOG_WARN, NCCL_TP ": rank %u: ncclCommAbort returned %s", t->rank, ncclGetErrorString(r));
    /* Buckets still on the device may write into receive regions the core is about to reuse:
     * give the aborted kernels (and the copies behind them) a bounded chance to end. */
    nccl_ops_drain(t, 2000);
  }
}

wsync_status_t nccl_on_abort(nccl_transport_t* t) {
  nccl_break(t, WSYNC_ERR_ABORTED, NCCL_TP ": rank %u: aborted", t->rank);
  return wsp_fail(WSYNC_ERR_ABORTED, NCCL_TP ": rank %u: aborted", t->rank);
}

typedef struct poll_ctx {
  nccl_transport_t* t;
  nccl_poll_state_t (*state)(void*);
  void* arg;
} poll_ctx_t;

static nccl_poll_state_t ctx_state(void* arg) {
  poll_ctx_t* c = (poll_ctx_t*)arg;
  return c->state(c->arg);
}

static int ctx_aborted(void* arg) {
  poll_ctx_t* c = (poll_ctx_t*)arg;
  return atomic_load_explicit(&c->t->aborted, memory_order_acquire) != 0;
}

static int64_t ctx_now(void* arg) {
  (void)arg;
  return nccl_mono_ms();
}

nccl_wait_result_t nccl_poll(nccl_transport_t* t, nccl_poll_state_t (*state)(void*), void* arg, int64_t deadline) {
  poll_ctx_t c;
  nccl_poller_t p;
  c.t = t;
  c.state = state;
  c.arg = arg;
  p.state = ctx_state;
  p.aborted = ctx_aborted;
  p.now_ms = ctx_now;
  p.pause = nccl_default_pause;
  p.arg = &c;
  return nccl_poll_until(&p, deadline);
}
