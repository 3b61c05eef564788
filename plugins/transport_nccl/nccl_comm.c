/* nccl_comm.c — the life of the communicator: the unique id through the store, the non-blocking
 * init with its deadline (or, with transport.lazy_init=1, left pending for the op queue to look
 * at), vLLM's all-reduce after init, and finalize/destroy or abort. */
#include <stdio.h>
#include <string.h>

#include "nccl_transport.h"

/* How long destroy lets a healthy communicator finalize before aborting it. */
#define NCCL_FINALIZE_BUDGET_MS 5000
/* Store reads are sliced so that abort() is noticed while a receiver waits for the id. */
#define NCCL_STORE_SLICE_MS 200

/* ---- the unique id ----------------------------------------------------------------------------- */

wsync_status_t nccl_publish_id(nccl_transport_t* t) {
  char why[768];
  wsync_status_t st;
  ncclResult_t r = ncclGetUniqueId(&t->id);
  if (r != ncclSuccess)
    return wsp_fail(WSYNC_ERR_IO, NCCL_TP ": rank 0: ncclGetUniqueId failed: %s", nccl_describe(NULL, r, why, sizeof why));
  t->have_id = 1;
  if (t->store == NULL) return WSYNC_OK; /* a world of one: nobody reads it */
  if ((st = wsp_host()->store_set(t->store, t->id_key, &t->id, sizeof t->id)) != WSYNC_OK)
    return wsp_fail(st, NCCL_TP ": rank 0: could not publish the NCCL unique id under store key '%s' (status %d)",
                     t->id_key, (int)st);
  if (t->torch_key[0] != '\0' &&
      (st = wsp_host()->store_set(t->store, t->torch_key, &t->id, sizeof t->id)) != WSYNC_OK)
    return wsp_fail(st, NCCL_TP ": rank 0: could not publish the NCCL unique id under the torch store key '%s' "
                     "(transport.torch_group '%s', status %d)", t->torch_key, t->opts.torch_group, (int)st);
  wsp_log(WSYNC_LOG_DEBUG, NCCL_TP ": rank 0: NCCL unique id published under '%s'%s%s%s", t->id_key,
           t->torch_key[0] ? " and torch key '" : "", t->torch_key, t->torch_key[0] ? "'" : "");
  return WSYNC_OK;
}

/* Receivers: wait for the id under t->id_key, in slices, watching abort. */
static wsync_status_t fetch_id(nccl_transport_t* t, int64_t deadline, int64_t timeout_ms) {
  unsigned char buf[NCCL_UNIQUE_ID_BYTES + 64];
  uint64_t len = 0;
  for (;;) {
    wsync_status_t st;
    int64_t slice = deadline - nccl_mono_ms();
    if (atomic_load(&t->aborted)) return nccl_on_abort(t);
    if (slice > NCCL_STORE_SLICE_MS) slice = NCCL_STORE_SLICE_MS;
    if (slice < 1) slice = 1;
    st = wsp_host()->store_get(t->store, t->id_key, buf, sizeof buf, &len, slice);
    if (st == WSYNC_OK) break;
    if (st == WSYNC_ERR_INVALID_ARGUMENT) /* longer than buf */
      return wsp_fail(WSYNC_ERR_PROTOCOL, NCCL_TP ": rank %u: store key '%s' holds %llu bytes, not the %d bytes of an "
                       "NCCL unique id", t->rank, t->id_key, (unsigned long long)len, NCCL_UNIQUE_ID_BYTES);
    if (st != WSYNC_ERR_TIMEOUT)
      return wsp_fail(st, NCCL_TP ": rank %u: reading the NCCL unique id from store key '%s' failed (status %d)",
                       t->rank, t->id_key, (int)st);
    if (nccl_mono_ms() >= deadline)
      return wsp_fail(WSYNC_ERR_TIMEOUT, NCCL_TP ": rank %u: no NCCL unique id under store key '%s' after %lld ms: "
                       "the sender (rank 0) has not created its nccl transport", t->rank, t->id_key,
                       (long long)timeout_ms);
  }
  if (len != NCCL_UNIQUE_ID_BYTES)
    return wsp_fail(WSYNC_ERR_PROTOCOL, NCCL_TP ": rank %u: store key '%s' holds %llu bytes, not the %d bytes of an "
                     "NCCL unique id", t->rank, t->id_key, (unsigned long long)len, NCCL_UNIQUE_ID_BYTES);
  memcpy(&t->id, buf, sizeof t->id);
  t->have_id = 1;
  return WSYNC_OK;
}

/* ---- polling the communicator ------------------------------------------------------------------ */

typedef struct comm_poll {
  nccl_transport_t* t;
  cudaEvent_t event; /* NULL: only the communicator's state */
  ncclResult_t nccl_err;
  cudaError_t cuda_err;
} comm_poll_t;

/* Done when the communicator has no call in progress (and the event, if any, has completed). */
static nccl_poll_state_t comm_state(void* arg) {
  comm_poll_t* c = (comm_poll_t*)arg;
  ncclResult_t a = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(c->t->comm, &a);
  if (r != ncclSuccess) a = r;
  if (a != ncclSuccess && a != ncclInProgress) {
    c->nccl_err = a;
    return NCCL_POLL_FAILED;
  }
  if (a == ncclInProgress) return NCCL_POLL_PENDING;
  if (c->event != NULL) {
    cudaError_t e = cudaEventQuery(c->event);
    if (e == cudaErrorNotReady) return NCCL_POLL_PENDING;
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      c->cuda_err = e;
      return NCCL_POLL_FAILED;
    }
  }
  return NCCL_POLL_DONE;
}

/* Wait for c (deadline, abort). Failures break the instance; the message says `what`. */
static wsync_status_t wait_comm(nccl_transport_t* t, comm_poll_t* c, int64_t deadline, int64_t timeout_ms,
                                const char* what, const char* timeout_msg) {
  char why[768];
  switch (nccl_poll(t, comm_state, c, deadline)) {
    case NCCL_WAIT_DONE:
      return WSYNC_OK;
    case NCCL_WAIT_ABORTED:
      return nccl_on_abort(t);
    case NCCL_WAIT_TIMEOUT:
      nccl_break(t, WSYNC_ERR_TIMEOUT, NCCL_TP ": %s (world size %u, this rank %u) was not complete after %lld ms: %s "
                 "(this rank is on cuda:%d)", what, t->world_size, t->rank, (long long)timeout_ms, timeout_msg, t->device);
      return nccl_broken(t);
    case NCCL_WAIT_FAILED:
    default:
      if (c->cuda_err != cudaSuccess)
        snprintf(why, sizeof why, "CUDA: %s", cudaGetErrorString(c->cuda_err));
      else
        nccl_describe(t, c->nccl_err, why, sizeof why);
      nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": %s (world size %u, this rank %u) failed on cuda:%d: %s", what,
                 t->world_size, t->rank, t->device, why);
      return nccl_broken(t);
  }
}

/* ---- device memory ----------------------------------------------------------------------------- */

wsync_status_t nccl_dev_alloc(nccl_transport_t* t, void** p, uint64_t bytes, const char* what) {
  cudaError_t e = t->mem_pools ? cudaMallocAsync(p, (size_t)bytes, t->stream) : cudaMalloc(p, (size_t)bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *p = NULL;
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, NCCL_TP ": rank %u: cannot allocate %llu bytes on cuda:%d for %s: %s",
                     t->rank, (unsigned long long)bytes, t->device, what, cudaGetErrorString(e));
  }
  return WSYNC_OK;
}

void nccl_dev_free(nccl_transport_t* t, void* p) {
  cudaError_t e;
  if (p == NULL) return;
  /* Stream-ordered: freed after the work already in our stream, without waiting for it. */
  e = t->mem_pools ? cudaFreeAsync(p, t->stream) : cudaFree(p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    wsp_log(WSYNC_LOG_WARN, NCCL_TP ": rank %u: freeing CUDA memory on cuda:%d failed: %s", t->rank, t->device,
             cudaGetErrorString(e));
  }
}

/* ---- connect ----------------------------------------------------------------------------------- */

/* vLLM issues a one-element float32 sum all-reduce right after ncclCommInitRank; a foreign
 * sender must issue the matching one or both sides hang. */
static wsync_status_t allreduce_after_init(nccl_transport_t* t, int64_t deadline, int64_t timeout_ms) {
  static const float kOne = 1.0f;
  comm_poll_t c;
  void* d = NULL;
  cudaEvent_t ev = NULL;
  cudaError_t e;
  ncclResult_t r;
  char why[768];
  wsync_status_t st;
  const char* what = "the one-float all-reduce after NCCL init (transport.allreduce_after_init=1)";
  if ((st = nccl_dev_alloc(t, &d, sizeof kOne, "the all-reduce after init")) != WSYNC_OK) return st;
  if ((e = cudaMemcpyAsync(d, &kOne, sizeof kOne, cudaMemcpyHostToDevice, t->stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    nccl_dev_free(t, d);
    return wsp_fail(WSYNC_ERR_IO, NCCL_TP ": rank %u: cudaMemcpyAsync for %s failed on cuda:%d: %s", t->rank, what,
                     t->device, cudaGetErrorString(e));
  }
  memset(&c, 0, sizeof c);
  c.t = t;
  r = ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, t->comm, t->stream);
  if (r != ncclSuccess && r != ncclInProgress) {
    nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: ncclAllReduce for %s failed: %s", t->rank, what,
               nccl_describe(t, r, why, sizeof why));
    nccl_dev_free(t, d);
    return nccl_broken(t);
  }
  /* ncclInProgress: still being enqueued; nothing may follow it in the stream before that ends. */
  if (r == ncclInProgress &&
      (st = wait_comm(t, &c, deadline, timeout_ms, what, "a rank did not issue it")) != WSYNC_OK) {
    nccl_dev_free(t, d);
    return st;
  }
  if ((st = nccl_event_get(t, &ev)) != WSYNC_OK) {
    nccl_dev_free(t, d);
    return st;
  }
  if ((e = cudaEventRecord(ev, t->stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    nccl_event_put(t, ev);
    nccl_dev_free(t, d);
    return wsp_fail(WSYNC_ERR_IO, NCCL_TP ": rank %u: cudaEventRecord on cuda:%d failed: %s", t->rank, t->device,
                     cudaGetErrorString(e));
  }
  c.event = ev;
  st = wait_comm(t, &c, deadline, timeout_ms, what, "a rank did not issue it");
  nccl_dev_free(t, d);
  nccl_event_put(t, ev);
  return st;
}

wsync_status_t nccl_connect(nccl_transport_t* t, int64_t timeout_ms) {
  const int64_t t0 = nccl_mono_ms();
  const int64_t tmo = t->opts.init_timeout_ms >= 0 ? t->opts.init_timeout_ms : timeout_ms;
  const int64_t deadline = nccl_deadline(t0, tmo);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclComm_t comm = NULL;
  comm_poll_t c;
  ncclResult_t r;
  cudaError_t e;
  char why[768];
  wsync_status_t st;
  int pools = 0, version = 0;

  if (t->connected || t->comm != NULL)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, NCCL_TP ": rank %u: connect was called twice", t->rank);
  if (atomic_load(&t->aborted)) return nccl_on_abort(t);
  if (t->broken_status != WSYNC_OK) return nccl_broken(t);
  if (t->rank != 0 && (st = fetch_id(t, deadline, tmo)) != WSYNC_OK) return st;
  if (!t->have_id) return wsp_fail(WSYNC_ERR_INTERNAL, NCCL_TP ": rank %u: no NCCL unique id (please report)", t->rank);

  /* Non-blocking: init runs on NCCL's own thread and we poll it, so a rank that never joins
   * costs a timeout and an ncclCommAbort, not a hung process. */
  cfg.blocking = 0;
  r = ncclCommInitRankConfig(&comm, (int)t->world_size, t->id, (int)t->rank, &cfg);
  t->comm = comm;
  if (r != ncclSuccess && r != ncclInProgress) {
    nccl_describe(t, r, why, sizeof why);
    nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": ncclCommInitRankConfig (world size %u, this rank %u, cuda:%d) failed: %s",
               t->world_size, t->rank, t->device, why);
    return nccl_broken(t);
  }
  memset(&c, 0, sizeof c);
  c.t = t;
  if (t->comm == NULL)
    return wsp_fail(WSYNC_ERR_INTERNAL, NCCL_TP ": rank %u: ncclCommInitRankConfig gave no communicator", t->rank);
  if (t->opts.lazy_init) {
    /* The peers join only at their first broadcast: the init stays pending and the op queue
     * looks at it (nccl_lazy_init_poll) before issuing anything. */
    t->init_pending = 1;
    t->init_deadline_ms = t->opts.init_timeout_ms >= 0 ? deadline : INT64_MAX;
  } else if ((st = wait_comm(t, &c, deadline, tmo, "NCCL communicator", "a rank never joined")) != WSYNC_OK) {
    return st;
  }

  if ((e = cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    (void)cudaGetLastError();
    t->stream = NULL;
    nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: cudaStreamCreateWithFlags on cuda:%d failed: %s", t->rank,
               t->device, cudaGetErrorString(e));
    return nccl_broken(t);
  }
  if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, t->device) != cudaSuccess) {
    (void)cudaGetLastError();
    pools = 0;
  }
  t->mem_pools = pools != 0;

  /* (lazy_init with allreduce_after_init is refused by nccl_parse_options.) */
  if (t->opts.allreduce_after_init && !t->init_pending && (st = allreduce_after_init(t, deadline, tmo)) != WSYNC_OK)
    return st;

  t->connected = 1;
  (void)ncclGetVersion(&version);
  if (t->init_pending) {
    wsp_log(WSYNC_LOG_INFO, NCCL_TP ": rank %u of %u on cuda:%d started the NCCL communicator's init without waiting "
             "for it (transport.lazy_init=1, NCCL %d): buckets are issued once every rank has joined", t->rank,
             t->world_size, t->device, version);
    return WSYNC_OK;
  }
  wsp_log(WSYNC_LOG_INFO, NCCL_TP ": rank %u of %u on cuda:%d joined the NCCL communicator in %lld ms (NCCL %d%s)",
           t->rank, t->world_size, t->device, (long long)(nccl_mono_ms() - t0), version,
           t->opts.allreduce_after_init ? ", all-reduce after init done" : "");
  return WSYNC_OK;
}

/* ---- lazy init --------------------------------------------------------------------------------- */

wsync_status_t nccl_lazy_init_poll(nccl_transport_t* t) {
  char why[768];
  ncclResult_t a = ncclSuccess, r;
  if (!t->init_pending) return WSYNC_OK;
  if (t->comm == NULL) { /* cannot happen: a break clears init_pending */
    t->init_pending = 0;
    return t->broken_status != WSYNC_OK ? nccl_broken(t) : WSYNC_OK;
  }
  r = ncclCommGetAsyncError(t->comm, &a);
  if (r != ncclSuccess) a = r;
  if (a == ncclInProgress) return WSYNC_OK;
  if (a == ncclSuccess) {
    t->init_pending = 0;
    wsp_log(WSYNC_LOG_INFO, NCCL_TP ": rank %u of %u on cuda:%d: the NCCL communicator's init completed "
             "(transport.lazy_init=1)", t->rank, t->world_size, t->device);
    return WSYNC_OK;
  }
  nccl_describe(t, a, why, sizeof why);
  nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: the NCCL communicator's init failed (lazy, world size %u, cuda:%d): "
             "%s; a rank never joined?", t->rank, t->world_size, t->device, why);
  return nccl_broken(t);
}

int nccl_lazy_init_expired(nccl_transport_t* t) {
  if (!t->init_pending || nccl_mono_ms() < t->init_deadline_ms) return 0;
  nccl_break(t, WSYNC_ERR_TIMEOUT, NCCL_TP ": rank %u: lazy NCCL init: rank(s) never joined within %lld ms "
             "(transport.init_timeout_ms, counted from connect; world size %u, cuda:%d)", t->rank,
             (long long)t->opts.init_timeout_ms, t->world_size, t->device);
  return 1;
}

/* ---- teardown ---------------------------------------------------------------------------------- */

void nccl_comm_close(nccl_transport_t* t, int idle) {
  comm_poll_t c;
  ncclResult_t r;
  if (t->comm == NULL) return;
  if (t->init_pending) {
    /* lazy_init: finalize only a communicator whose init has completed; one look, no wait. */
    ncclResult_t a = ncclSuccess;
    r = ncclCommGetAsyncError(t->comm, &a);
    if (r == ncclSuccess && a == ncclSuccess) t->init_pending = 0;
  }
  if (!idle || t->broken_status != WSYNC_OK || atomic_load(&t->aborted) || !t->connected || t->init_pending) {
    /* Work in flight, a failed or unfinished init, or an abort: nothing to flush politely. */
    r = ncclCommAbort(t->comm);
    t->comm = NULL;
    t->init_pending = 0;
    if (r != ncclSuccess)
      wsp_log(WSYNC_LOG_WARN, NCCL_TP ": rank %u: ncclCommAbort returned %s", t->rank, ncclGetErrorString(r));
    nccl_ops_drain(t, 2000);
    return;
  }
  r = ncclCommFinalize(t->comm);
  if (r == ncclSuccess || r == ncclInProgress) {
    memset(&c, 0, sizeof c);
    c.t = t;
    if (nccl_poll(t, comm_state, &c, nccl_deadline(nccl_mono_ms(), NCCL_FINALIZE_BUDGET_MS)) == NCCL_WAIT_DONE) {
      r = ncclCommDestroy(t->comm);
      t->comm = NULL;
      if (r != ncclSuccess)
        wsp_log(WSYNC_LOG_WARN, NCCL_TP ": rank %u: ncclCommDestroy returned %s", t->rank, ncclGetErrorString(r));
      return;
    }
    wsp_log(WSYNC_LOG_WARN, NCCL_TP ": rank %u: ncclCommFinalize did not finish within %d ms; aborting the "
             "communicator", t->rank, NCCL_FINALIZE_BUDGET_MS);
  } else {
    wsp_log(WSYNC_LOG_WARN, NCCL_TP ": rank %u: ncclCommFinalize returned %s; aborting the communicator", t->rank,
             ncclGetErrorString(r));
  }
  r = ncclCommAbort(t->comm);
  t->comm = NULL;
  if (r != ncclSuccess)
    wsp_log(WSYNC_LOG_WARN, NCCL_TP ": rank %u: ncclCommAbort returned %s", t->rank, ncclGetErrorString(r));
}
