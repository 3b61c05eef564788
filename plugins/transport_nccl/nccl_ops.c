/* nccl_ops.c — the data plane: buckets are queued by send_post/recv_post, issued in order by
 * nccl_pump() as one ncclBroadcast each on our stream (root = rank 0), and completed by polling
 * their done events. See nccl_transport.h for why issuing is deferred. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_transport.h"

/* ---- events ------------------------------------------------------------------------------------ */

wsync_status_t nccl_event_get(nccl_transport_t* t, cudaEvent_t* ev) {
  cudaError_t e;
  if (t->num_free_events > 0) {
    *ev = t->free_events[--t->num_free_events];
    return WSYNC_OK;
  }
  if ((e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming)) != cudaSuccess) {
    (void)cudaGetLastError();
    *ev = NULL;
    return wsp_fail(WSYNC_ERR_IO, NCCL_TP ": rank %u: cudaEventCreateWithFlags on cuda:%d failed: %s", t->rank,
                     t->device, cudaGetErrorString(e));
  }
  return WSYNC_OK;
}

void nccl_event_put(nccl_transport_t* t, cudaEvent_t ev) {
  if (ev == NULL) return;
  if (wsp_reserve((void**)&t->free_events, &t->cap_free_events, t->num_free_events, sizeof *t->free_events) != 0) {
    cudaEventDestroy(ev);
    return;
  }
  t->free_events[t->num_free_events++] = ev;
}

/* ---- the queue --------------------------------------------------------------------------------- */

static nccl_op_t* find_op(nccl_transport_t* t, nccl_op_kind_t kind, uint64_t seq) {
  size_t i;
  for (i = 0; i < t->num_ops; ++i)
    if (t->ops[i].kind == kind && t->ops[i].seq == seq) return &t->ops[i];
  return NULL;
}

static void release_op(nccl_transport_t* t, nccl_op_t* op) {
  nccl_event_put(t, op->ready);
  nccl_event_put(t, op->done);
  free(op->iov);
  op->ready = op->done = NULL;
  op->iov = NULL;
}

static void remove_op(nccl_transport_t* t, nccl_op_t* op) {
  const size_t i = (size_t)(op - t->ops);
  release_op(t, op);
  memmove(&t->ops[i], &t->ops[i + 1], (t->num_ops - i - 1) * sizeof *t->ops);
  t->num_ops--;
}

/* A new op at the tail, with its events. */
static wsync_status_t push_op(nccl_transport_t* t, nccl_op_kind_t kind, uint64_t seq, nccl_op_t** out) {
  nccl_op_t* op;
  wsync_status_t st;
  *out = NULL;
  if (wsp_reserve((void**)&t->ops, &t->cap_ops, t->num_ops, sizeof *t->ops) != 0)
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, NCCL_TP ": rank %u: out of memory", t->rank);
  op = &t->ops[t->num_ops];
  memset(op, 0, sizeof *op);
  op->kind = kind;
  op->seq = seq;
  op->state = NCCL_OP_QUEUED;
  if ((st = nccl_event_get(t, &op->done)) != WSYNC_OK) return st;
  if (kind == NCCL_OP_SEND && (st = nccl_event_get(t, &op->ready)) != WSYNC_OK) {
    nccl_event_put(t, op->done);
    return st;
  }
  t->num_ops++;
  *out = op;
  return WSYNC_OK;
}

/* The broadcast of op is in the stream: add the copies out of the scratch and the done event. */
static wsync_status_t finish_issue(nccl_transport_t* t, nccl_op_t* op) {
  cudaError_t e;
  uint64_t i, off = 0;
  if (op->iov != NULL) {
    for (i = 0; i < op->num_iov; ++i) {
      e = cudaMemcpyAsync(op->iov[i].base, (char*)op->target + off, (size_t)op->iov[i].len, cudaMemcpyDeviceToDevice,
                          t->stream);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: copying region %llu of bucket %llu (%llu bytes at %p) out of "
                   "the scratch buffer on cuda:%d failed: %s", t->rank, (unsigned long long)i,
                   (unsigned long long)op->seq, (unsigned long long)op->iov[i].len, op->iov[i].base, t->device,
                   cudaGetErrorString(e));
        return nccl_broken(t);
      }
      off += op->iov[i].len;
    }
  }
  if ((e = cudaEventRecord(op->done, t->stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: cudaEventRecord after bucket %llu on cuda:%d failed: %s", t->rank,
               (unsigned long long)op->seq, t->device, cudaGetErrorString(e));
    return nccl_broken(t);
  }
  op->state = NCCL_OP_ISSUED;
  return WSYNC_OK;
}

/* Issue op's broadcast. Leaves it ENQUEUING when NCCL answers ncclInProgress. */
static wsync_status_t issue(nccl_transport_t* t, nccl_op_t* op) {
  char why[768];
  cudaError_t e;
  ncclResult_t r;
  wsync_status_t st;
  if (op->kind == NCCL_OP_SEND && (e = cudaStreamWaitEvent(t->stream, op->ready, 0)) != cudaSuccess) {
    (void)cudaGetLastError();
    nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank 0: ordering bucket %llu after the caller's stream failed on cuda:%d "
               "(cudaStreamWaitEvent): %s", (unsigned long long)op->seq, t->device, cudaGetErrorString(e));
    return nccl_broken(t);
  }
  if (op->len == 0) return finish_issue(t, op); /* nothing to move; every rank skips it alike */
  op->target = op->data;
  if (op->target == NULL) {
    if (t->scratch_bytes < op->len) {
      nccl_dev_free(t, t->scratch); /* stream-ordered: after the buckets that still use it */
      t->scratch = NULL;
      t->scratch_bytes = 0;
      if ((st = nccl_dev_alloc(t, &t->scratch, op->len, "the receive scratch buffer")) != WSYNC_OK) {
        nccl_break(t, st, NCCL_TP ": rank %u: cannot allocate the %llu-byte receive scratch buffer on cuda:%d for bucket "
                   "%llu", t->rank, (unsigned long long)op->len, t->device, (unsigned long long)op->seq);
        return nccl_broken(t);
      }
      t->scratch_bytes = op->len;
    }
    op->target = t->scratch;
  }
  /* In place on the root: NCCL reads the bucket there and writes it into every other rank. */
  r = ncclBroadcast(op->target, op->target, (size_t)op->len, ncclUint8, 0, t->comm, t->stream);
  if (r == ncclSuccess) return finish_issue(t, op);
  if (r == ncclInProgress) {
    op->state = NCCL_OP_ENQUEUING;
    return WSYNC_OK;
  }
  nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: ncclBroadcast of bucket %llu (%llu bytes, cuda:%d) failed: %s",
             t->rank, (unsigned long long)op->seq, (unsigned long long)op->len, t->device,
             nccl_describe(t, r, why, sizeof why));
  return nccl_broken(t);
}

/* Move the queue along without blocking: finish the enqueue in progress, issue what is queued,
 * in post order. With a lazy init still pending (transport.lazy_init=1) nothing may be called
 * on the communicator yet: one look at the init, and the queue stays as it is until it is done. */
static wsync_status_t pump(nccl_transport_t* t) {
  char why[768];
  size_t i;
  wsync_status_t st;
  if (t->broken_status != WSYNC_OK) return nccl_broken(t);
  if (t->init_pending) {
    if ((st = nccl_lazy_init_poll(t)) != WSYNC_OK) return st;
    if (t->init_pending) return WSYNC_OK;
  }
  for (i = 0; i < t->num_ops; ++i) {
    nccl_op_t* op = &t->ops[i];
    if (op->state == NCCL_OP_ISSUED) continue;
    if (op->state == NCCL_OP_ENQUEUING) {
      ncclResult_t a = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(t->comm, &a);
      if (r != ncclSuccess) a = r;
      if (a == ncclInProgress) return WSYNC_OK;
      if (a != ncclSuccess) {
        nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: enqueuing the broadcast of bucket %llu (cuda:%d) failed: %s",
                   t->rank, (unsigned long long)op->seq, t->device, nccl_describe(t, a, why, sizeof why));
        return nccl_broken(t);
      }
      if ((st = finish_issue(t, op)) != WSYNC_OK) return st;
      continue;
    }
    if ((st = issue(t, op)) != WSYNC_OK) return st;
    if (op->state == NCCL_OP_ENQUEUING) return WSYNC_OK;
  }
  return WSYNC_OK;
}

/* ---- checks shared by the posts ---------------------------------------------------------------- */

static wsync_status_t usable(nccl_transport_t* t, const char* what) {
  if (atomic_load(&t->aborted)) return nccl_on_abort(t);
  if (t->broken_status != WSYNC_OK) return nccl_broken(t);
  if (!t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, NCCL_TP ": rank %u: %s before connect", t->rank, what);
  return WSYNC_OK;
}

/* 0 when p .. p+len is CUDA memory of t->device (device or managed). */
static int on_our_device(const nccl_transport_t* t, const void* p, int* type, int* dev) {
  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  *type = -1;
  *dev = -1;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  *type = (int)a.type;
  *dev = a.device;
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return -1;
  return a.device == t->device ? 0 : -1;
}

/* ---- sender ------------------------------------------------------------------------------------ */

wsync_status_t nccl_send_post(nccl_transport_t* t, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                              uint32_t num_ranks) {
  const unsigned long long s = (unsigned long long)seq;
  unsigned char* seen;
  cudaStream_t caller = NULL;
  cudaError_t e;
  nccl_op_t* op;
  wsync_status_t st;
  uint32_t i;
  int type, dev;
  if (buf == NULL || (ranks == NULL && num_ranks > 0))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": send_post: NULL argument");
  if (t->rank != 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, NCCL_TP ": send_post on receiver rank %u", t->rank);
  if ((st = usable(t, "send_post")) != WSYNC_OK) return st;
  if (buf->device_type != WSYNC_DEVICE_CUDA)
    return wsp_fail(WSYNC_ERR_UNSUPPORTED, NCCL_TP ": bucket %llu is in host memory (device type %d); nccl moves "
                     "device memory only", s, (int)buf->device_type);
  if (buf->device_index != t->device)
    return wsp_fail(WSYNC_ERR_UNSUPPORTED, NCCL_TP ": bucket %llu is on cuda:%d but this transport works on cuda:%d",
                     s, (int)buf->device_index, t->device);
  if (buf->data == NULL && buf->len > 0)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": bucket %llu has %llu bytes at NULL", s,
                     (unsigned long long)buf->len);
  if (buf->len > 0 && on_our_device(t, buf->data, &type, &dev) != 0)
    return wsp_fail(WSYNC_ERR_UNSUPPORTED, NCCL_TP ": bucket %llu at %p is not CUDA memory of cuda:%d (CUDA pointer "
                     "type %d, device %d); nccl moves device memory only", s, buf->data, t->device, type, dev);

  /* NCCL broadcasts to the whole communicator: every receiver, every time. */
  if ((seen = (unsigned char*)calloc(t->world_size, 1)) == NULL)
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, NCCL_TP ": out of memory");
  for (i = 0; i < num_ranks; ++i) {
    const uint32_t r = ranks[i];
    if (r == 0 || r >= t->world_size) {
      free(seen);
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": send_post of bucket %llu to rank %u, outside 1..%u", s, r,
                       t->world_size - 1);
    }
    if (seen[r]) {
      free(seen);
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": send_post of bucket %llu names rank %u twice", s, r);
    }
    seen[r] = 1;
  }
  for (i = 1; i < t->world_size; ++i)
    if (!seen[i]) {
      free(seen);
      return wsp_fail(WSYNC_ERR_UNSUPPORTED, NCCL_TP ": bucket %llu: rank %u was dropped; an NCCL group cannot "
                       "continue without it", s, i);
    }
  free(seen);
  if (find_op(t, NCCL_OP_SEND, seq) != NULL)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, NCCL_TP ": bucket %llu was already posted", s);

  if (buf->struct_size >= offsetof(wsync_buffer_t, stream) + sizeof buf->stream) caller = (cudaStream_t)buf->stream;
  if ((st = push_op(t, NCCL_OP_SEND, seq, &op)) != WSYNC_OK) return st;
  op->data = (void*)buf->data;
  op->len = buf->len;
  /* Captures the caller's work queued so far (the packing of this bucket); our stream waits for
   * it when the broadcast is issued. */
  if ((e = cudaEventRecord(op->ready, caller)) != cudaSuccess) {
    (void)cudaGetLastError();
    remove_op(t, op);
    return wsp_fail(WSYNC_ERR_IO, NCCL_TP ": rank 0: cudaEventRecord on the caller's stream %p (cuda:%d) for bucket "
                     "%llu failed: %s", (void*)caller, t->device, s, cudaGetErrorString(e));
  }
  return pump(t);
}

/* ---- receiver ---------------------------------------------------------------------------------- */

wsync_status_t nccl_recv_post(nccl_transport_t* t, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  const unsigned long long s = (unsigned long long)seq;
  uint64_t i, total = 0, nonempty = 0, k;
  const wsync_iov_t* single = NULL;
  nccl_op_t* op;
  wsync_status_t st;
  int type, dev;
  if (iov == NULL && num_iov > 0) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": recv_post: NULL iov");
  if (t->rank == 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, NCCL_TP ": recv_post on the sender (rank 0)");
  if ((st = usable(t, "recv_post")) != WSYNC_OK) return st;
  if (find_op(t, NCCL_OP_RECV, seq) != NULL)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, NCCL_TP ": rank %u: bucket %llu was already posted", t->rank, s);
  for (i = 0; i < num_iov; ++i) {
    if (iov[i].len == 0) continue;
    if (iov[i].base == NULL)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": rank %u: region %llu of bucket %llu has %llu bytes at NULL",
                       t->rank, (unsigned long long)i, s, (unsigned long long)iov[i].len);
    if (total + iov[i].len < total)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": rank %u: the regions of bucket %llu overflow 64 bits",
                       t->rank, s);
    if (on_our_device(t, iov[i].base, &type, &dev) != 0)
      return wsp_fail(WSYNC_ERR_UNSUPPORTED, NCCL_TP ": rank %u: region %llu of bucket %llu at %p is not CUDA memory "
                       "of cuda:%d (CUDA pointer type %d, device %d); nccl receives into device memory only", t->rank,
                       (unsigned long long)i, s, iov[i].base, t->device, type, dev);
    total += iov[i].len;
    ++nonempty;
    single = &iov[i];
  }
  if ((st = push_op(t, NCCL_OP_RECV, seq, &op)) != WSYNC_OK) return st;
  op->len = total;
  if (nonempty == 1) {
    op->data = single->base; /* straight into the one region */
  } else if (nonempty > 1) {
    /* Into the scratch buffer, then one device-to-device copy per region (same stream). */
    op->iov = (wsync_iov_t*)malloc((size_t)nonempty * sizeof *op->iov);
    if (op->iov == NULL) {
      remove_op(t, op);
      return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, NCCL_TP ": rank %u: out of memory", t->rank);
    }
    for (i = 0, k = 0; i < num_iov; ++i)
      if (iov[i].len > 0) op->iov[k++] = iov[i];
    op->num_iov = nonempty;
  }
  return pump(t);
}

/* ---- waiting ----------------------------------------------------------------------------------- */

typedef struct op_poll {
  nccl_transport_t* t;
  nccl_op_kind_t kind;
  uint64_t seq;
} op_poll_t;

static nccl_poll_state_t op_state(void* arg) {
  op_poll_t* c = (op_poll_t*)arg;
  nccl_transport_t* t = c->t;
  char why[768];
  nccl_op_t* op;
  ncclResult_t a = ncclSuccess, r;
  cudaError_t e;
  if (pump(t) != WSYNC_OK) return NCCL_POLL_FAILED;
  if (nccl_lazy_init_expired(t)) return NCCL_POLL_FAILED;
  op = find_op(t, c->kind, c->seq);
  if (op == NULL) return NCCL_POLL_DONE;
  if (op->state != NCCL_OP_ISSUED) return NCCL_POLL_PENDING;
  e = cudaEventQuery(op->done);
  if (e != cudaSuccess && e != cudaErrorNotReady) {
    (void)cudaGetLastError();
    nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: bucket %llu failed on cuda:%d: %s", t->rank,
               (unsigned long long)c->seq, t->device, cudaGetErrorString(e));
    return NCCL_POLL_FAILED;
  }
  /* Looked at after the event: a kernel that NCCL stopped because of an error completes too. */
  r = ncclCommGetAsyncError(t->comm, &a);
  if (r != ncclSuccess) a = r;
  if (a != ncclSuccess && a != ncclInProgress) {
    nccl_break(t, WSYNC_ERR_IO, NCCL_TP ": rank %u: NCCL reported an error while bucket %llu was in flight (world size "
               "%u, cuda:%d): %s", t->rank, (unsigned long long)c->seq, t->world_size, t->device,
               nccl_describe(t, a, why, sizeof why));
    return NCCL_POLL_FAILED;
  }
  return e == cudaSuccess ? NCCL_POLL_DONE : NCCL_POLL_PENDING;
}

wsync_status_t nccl_wait(nccl_transport_t* t, nccl_op_kind_t kind, uint64_t seq, int64_t timeout_ms) {
  const char* what = kind == NCCL_OP_SEND ? "send_wait" : "recv_wait";
  op_poll_t c;
  nccl_op_t* op;
  wsync_status_t st;
  if ((st = usable(t, what)) != WSYNC_OK) return st;
  if (find_op(t, kind, seq) == NULL) return WSYNC_OK; /* nothing posted under seq */
  c.t = t;
  c.kind = kind;
  c.seq = seq;
  switch (nccl_poll(t, op_state, &c, nccl_deadline(nccl_mono_ms(), timeout_ms))) {
    case NCCL_WAIT_DONE:
      if ((op = find_op(t, kind, seq)) != NULL) remove_op(t, op);
      return WSYNC_OK;
    case NCCL_WAIT_ABORTED:
      return nccl_on_abort(t);
    case NCCL_WAIT_FAILED:
      return nccl_broken(t);
    case NCCL_WAIT_TIMEOUT:
    default:
      op = find_op(t, kind, seq);
      if (t->init_pending)
        return wsp_fail(WSYNC_ERR_TIMEOUT, NCCL_TP ": rank %u: bucket %llu (%llu bytes) is queued: the NCCL "
                         "communicator's init is still pending (transport.lazy_init=1; every rank of the world of %u "
                         "must join)", t->rank, (unsigned long long)seq, (unsigned long long)(op ? op->len : 0),
                         t->world_size);
      return wsp_fail(WSYNC_ERR_TIMEOUT, NCCL_TP ": rank %u: the broadcast of bucket %llu (%llu bytes) is not %s yet "
                       "(it needs every rank of the world of %u)", t->rank, (unsigned long long)seq,
                       (unsigned long long)(op ? op->len : 0),
                       op == NULL || op->state == NCCL_OP_ISSUED ? "complete" : "enqueued", t->world_size);
  }
}

/* ---- peers, teardown --------------------------------------------------------------------------- */

void nccl_forget_peer(nccl_transport_t* t, uint32_t rank) {
  if (rank >= t->world_size || rank == t->rank) return;
  /* NCCL has no way to go on without a rank: the communicator is over for everyone. */
  nccl_break(t, WSYNC_ERR_PEER_FAILED, NCCL_TP ": rank %u%s was dropped; an NCCL group cannot continue without it "
             "(this rank %u, world size %u)", rank, rank == 0 ? " (the sender)" : "", t->rank, t->world_size);
}

int nccl_ops_idle(nccl_transport_t* t) {
  size_t i;
  for (i = 0; i < t->num_ops; ++i) {
    cudaError_t e;
    if (t->ops[i].state != NCCL_OP_ISSUED) return 0;
    e = cudaEventQuery(t->ops[i].done);
    if (e == cudaErrorNotReady) return 0;
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
  }
  return 1;
}

void nccl_ops_drain(nccl_transport_t* t, int64_t budget_ms) {
  const int64_t deadline = nccl_deadline(nccl_mono_ms(), budget_ms);
  uint64_t iteration = 0;
  for (;;) {
    size_t i, pending = 0;
    for (i = 0; i < t->num_ops; ++i) {
      /* Never-recorded events (queued, enqueuing) report success: nothing of theirs runs. */
      cudaError_t e = cudaEventQuery(t->ops[i].done);
      if (e == cudaErrorNotReady)
        ++pending;
      else if (e != cudaSuccess)
        (void)cudaGetLastError();
    }
    if (pending == 0) return;
    if (nccl_mono_ms() >= deadline) {
      wsp_log(WSYNC_LOG_WARN, NCCL_TP ": rank %u: %zu bucket(s) still on cuda:%d %lld ms after the communicator was "
               "aborted", t->rank, pending, t->device, (long long)budget_ms);
      return;
    }
    nccl_default_pause(NULL, iteration++);
  }
}

void nccl_ops_free(nccl_transport_t* t) {
  size_t i;
  for (i = 0; i < t->num_ops; ++i) {
    if (t->ops[i].ready != NULL) cudaEventDestroy(t->ops[i].ready);
    if (t->ops[i].done != NULL) cudaEventDestroy(t->ops[i].done);
    free(t->ops[i].iov);
  }
  free(t->ops);
  t->ops = NULL;
  t->num_ops = t->cap_ops = 0;
  for (i = 0; i < t->num_free_events; ++i) cudaEventDestroy(t->free_events[i]);
  free(t->free_events);
  t->free_events = NULL;
  t->num_free_events = t->cap_free_events = 0;
}
