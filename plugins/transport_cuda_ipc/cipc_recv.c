/* cipc_recv.c — the receiver's half: one receive at a time, driven as a state machine so that
 * recv_wait can return TIMEOUT anywhere and resume on the next call:
 *
 *   WAIT_POST  poll the post record until it names our bucket (PROTOCOL if it moved past it)
 *   COPYING    queued on our stream: wait for the sender's slot event, one cudaMemcpyAsync per
 *              region (device or host memory, cudaMemcpyDefault), record `copied`; poll it
 *   REPORT     write done/<rank> = seq: the sender may now reuse the slot
 *
 * The host never synchronises the device: it polls cudaEventQuery until the deadline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cipc_transport.h"

wsync_status_t cipc_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  cipc_recv_op_t* op;
  char err[256];
  uint64_t total = 0, i, n = 0;
  wsync_status_t rc;
  if (t == NULL) return cipc_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': recv_post on NULL");
  if (t->rank == 0) return cipc_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': recv_post on the sender (rank 0)");
  if (!t->connected) return cipc_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': recv_post before connect");
  if (atomic_load(&t->aborted)) return cipc_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank %u: aborted", t->rank);
  if (t->forgotten[0])
    return cipc_fail(WSYNC_ERR_PEER_FAILED, "transport 'cuda_ipc': rank %u: the sender (rank 0) was forgotten",
                     t->rank);
  op = &t->op;
  if (op->state != CIPC_RECV_IDLE)
    return cipc_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': rank %u: recv_post of bucket %llu while bucket "
                     "%llu is still being received (one at a time)", t->rank, (unsigned long long)seq,
                     (unsigned long long)op->seq);
  if (seq == 0) return cipc_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': recv_post of bucket 0");
  if ((rc = cipc_iov_total(iov, num_iov, &total, err, sizeof err)) != WSYNC_OK)
    return cipc_fail(rc, "transport 'cuda_ipc': rank %u: recv_post of bucket %llu: %s", t->rank,
                     (unsigned long long)seq, err);
  memset(op, 0, sizeof *op);
  if (num_iov > 0) {
    op->iov = (wsync_iov_t*)malloc((size_t)num_iov * sizeof *op->iov);
    if (op->iov == NULL) return cipc_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  }
  for (i = 0; i < num_iov; ++i)
    if (iov[i].len > 0) op->iov[n++] = iov[i];
  op->num_iov = n;
  op->total = total;
  op->seq = seq;
  op->state = CIPC_RECV_WAIT_POST;
  return WSYNC_OK;
}

/* Queue the bucket's copies on our stream; COPYING, or FAILED with the error set. */
static wsync_status_t start_copies(cipc_transport_t* t) {
  cipc_recv_op_t* op = &t->op;
  const uint32_t s = op->entry.slot;
  const uint8_t* src = t->mapped[s] + t->peer->slots[s].alloc_offset + op->entry.offset;
  uint64_t i, cursor = 0;
  wsync_status_t rc;
  cudaError_t e;
  if ((rc = cipc_set_device(t, "recv_wait")) != WSYNC_OK) return rc; /* nothing queued: stays WAIT_POST */
  /* GPU-side ordering: our copies start once the sender's staging writes are done. */
  e = cudaStreamWaitEvent(t->stream, t->peer_events[s], 0);
  if (e != cudaSuccess)
    return cipc_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: bucket %llu: waiting for the event of staging slot "
                     "%u failed (cudaStreamWaitEvent: %s)", t->rank, (unsigned long long)op->seq, s,
                     cudaGetErrorString(e));
  for (i = 0; i < op->num_iov; ++i) {
    e = cudaMemcpyAsync(op->iov[i].base, src + cursor, (size_t)op->iov[i].len, cudaMemcpyDefault, t->stream);
    if (e != cudaSuccess) {
      op->event_recorded = cudaEventRecord(t->copied, t->stream) == cudaSuccess; /* what was queued, to wait on */
      op->state = CIPC_RECV_FAILED;
      op->failed = WSYNC_ERR_IO;
      return cipc_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: bucket %llu: copying region %llu (%p, %llu bytes) "
                       "out of staging slot %u failed (cudaMemcpyAsync: %s)", t->rank, (unsigned long long)op->seq,
                       (unsigned long long)i, op->iov[i].base, (unsigned long long)op->iov[i].len, s,
                       cudaGetErrorString(e));
    }
    cursor += op->iov[i].len;
  }
  if ((e = cudaEventRecord(t->copied, t->stream)) != cudaSuccess) {
    op->state = CIPC_RECV_FAILED;
    op->failed = WSYNC_ERR_IO;
    return cipc_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: bucket %llu: recording the copy event failed: %s",
                     t->rank, (unsigned long long)op->seq, cudaGetErrorString(e));
  }
  op->event_recorded = 1;
  op->state = CIPC_RECV_COPYING;
  return WSYNC_OK;
}

/* One look at the post record: OK once the copies are queued, TIMEOUT when not posted yet. */
static wsync_status_t look_for_post(cipc_transport_t* t, int64_t deadline) {
  cipc_recv_op_t* op = &t->op;
  uint8_t rec[CIPC_POST_MAX_BYTES];
  char err[512];
  cipc_post_t post;
  uint64_t len = 0;
  wsync_status_t rc = cipc_store_read(t, t->key_post, rec, sizeof rec, &len, cipc_poll_wait_ms(deadline));
  if (rc == WSYNC_ERR_TIMEOUT) return rc;
  if (rc != WSYNC_OK)
    return rc == WSYNC_ERR_PROTOCOL ? rc : cipc_fail(rc, "transport 'cuda_ipc': rank %u: reading '%s' failed", t->rank,
                                                     t->key_post);
  if ((rc = cipc_post_decode(rec, (size_t)len, t->peer, &post, err, sizeof err)) != WSYNC_OK)
    return cipc_fail(rc, "transport 'cuda_ipc': rank %u: the post record at store key '%s' is malformed: %s", t->rank,
                     t->key_post, err);
  switch (cipc_post_find(&post, op->seq, &op->entry)) {
    case CIPC_POST_NOT_YET:
      return WSYNC_ERR_TIMEOUT;
    case CIPC_POST_PASSED:
      return cipc_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u: rank 0 has moved past bucket %llu (store "
                       "key '%s' names only later buckets); was this rank dropped by the sender?", t->rank,
                       (unsigned long long)op->seq, t->key_post);
    default:
      break;
  }
  if (op->entry.len != op->total)
    return cipc_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u: bucket %llu from rank 0 has %llu bytes, the "
                     "receive expects %llu", t->rank, (unsigned long long)op->seq,
                     (unsigned long long)op->entry.len, (unsigned long long)op->total);
  return start_copies(t);
}

static void finish(cipc_transport_t* t) {
  free(t->op.iov);
  memset(&t->op, 0, sizeof t->op);
}

wsync_status_t cipc_recv_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  const int64_t deadline = cipc_deadline(timeout_ms);
  cipc_recv_op_t* op;
  char key[CIPC_KEY_MAX], val[24];
  wsync_status_t rc;
  cudaError_t e;
  if (t == NULL) return cipc_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': recv_wait on NULL");
  op = &t->op;
  if (op->state == CIPC_RECV_IDLE || op->seq != seq)
    return cipc_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': rank %u: recv_wait for bucket %llu, which was not "
                     "posted", t->rank, (unsigned long long)seq);
  if (op->total == 0) { /* nothing moves (the sender posts no empty bucket either) */
    finish(t);
    return WSYNC_OK;
  }
  for (;;) {
    if (atomic_load(&t->aborted))
      return cipc_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank %u: aborted", t->rank);
    switch (op->state) {
      case CIPC_RECV_FAILED:
        return cipc_fail(op->failed, "transport 'cuda_ipc': rank %u: bucket %llu: queueing its copies failed earlier",
                         t->rank, (unsigned long long)seq);
      case CIPC_RECV_WAIT_POST:
        rc = look_for_post(t, deadline);
        if (rc == WSYNC_OK) continue;
        if (rc != WSYNC_ERR_TIMEOUT) return rc;
        break;
      case CIPC_RECV_COPYING:
        (void)cudaSetDevice(t->device);
        e = cudaEventQuery(t->copied);
        if (e == cudaSuccess) {
          op->state = CIPC_RECV_REPORT;
          continue;
        }
        if (e != cudaErrorNotReady)
          return cipc_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: bucket %llu: the copy out of staging slot %u "
                           "failed: %s", t->rank, (unsigned long long)seq, op->entry.slot, cudaGetErrorString(e));
        break;
      case CIPC_RECV_REPORT:
        cipc_key(key, sizeof key, t->group, "done", t->rank);
        snprintf(val, sizeof val, "%llu", (unsigned long long)seq);
        if ((rc = cipc_host->store_set(t->store, key, val, strlen(val))) != WSYNC_OK)
          return cipc_fail(rc, "transport 'cuda_ipc': rank %u: bucket %llu: writing '%s' to the store failed", t->rank,
                           (unsigned long long)seq, key);
        finish(t);
        return WSYNC_OK;
      default:
        return cipc_fail(WSYNC_ERR_INTERNAL, "transport 'cuda_ipc': rank %u: receive in state %d", t->rank,
                         (int)op->state);
    }
    if (cipc_now_us() >= deadline) {
      if (op->state == CIPC_RECV_WAIT_POST)
        return cipc_fail(WSYNC_ERR_TIMEOUT, "transport 'cuda_ipc': rank %u: rank 0 has not posted bucket %llu yet "
                         "(store key '%s')", t->rank, (unsigned long long)seq, t->key_post);
      return cipc_fail(WSYNC_ERR_TIMEOUT, "transport 'cuda_ipc': rank %u: bucket %llu is still being copied out of "
                       "staging slot %u", t->rank, (unsigned long long)seq, op->entry.slot);
    }
    cipc_pause(t, deadline);
  }
}

void cipc_cancel_recv(cipc_transport_t* t, int64_t budget_ms) {
  cipc_recv_op_t* op = &t->op;
  if (op->state == CIPC_RECV_IDLE) return;
  if ((op->state == CIPC_RECV_COPYING || op->state == CIPC_RECV_FAILED) && op->event_recorded && t->copied != NULL) {
    const int64_t deadline = cipc_deadline(budget_ms);
    cudaError_t e;
    (void)cudaSetDevice(t->device);
    while ((e = cudaEventQuery(t->copied)) == cudaErrorNotReady && cipc_now_us() < deadline) cipc_pause(t, deadline);
    if (e == cudaErrorNotReady)
      cipc_log(WSYNC_LOG_WARN, "transport 'cuda_ipc': rank %u: bucket %llu is still being copied after %lld ms; "
               "abandoning it (its regions may still be written)", t->rank, (unsigned long long)op->seq,
               (long long)budget_ms);
  }
  finish(t);
}
