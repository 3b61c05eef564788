/* cipc_recv.c — the receiver's half, and the side channel's entry points on both sides. One
 * receive at a time, a small state machine so that recv_wait can return TIMEOUT anywhere and
 * resume on the next call:
 *
 *   DESCRIBED  peer_blob gave the sender's bucket record (checked against the staging)
 *   COPYING    recv_post queued, on our stream: a wait for the sender's slot event, one
 *              cudaMemcpyAsync per region (device or host memory, cudaMemcpyDefault), our event
 *   (idle)     recv_wait saw our event complete; describe_recv writes the done record the ACK
 *              carries back, which frees the slot on the sender
 *
 * The host never synchronises the device: it polls cudaEventQuery until the deadline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cipc_transport.h"

/* cipc_send.c */
wsync_status_t cipc_sender_blob(cipc_transport_t* t, uint64_t seq, uint32_t rank, int32_t kind, const void* blob,
                                uint64_t len);

static void finish(cipc_transport_t* t) {
  free(t->op.iov);
  memset(&t->op, 0, sizeof t->op);
}

/* The sender's bucket record for the next receive. */
static wsync_status_t receiver_blob(cipc_transport_t* t, uint64_t seq, uint32_t rank, int32_t kind, const void* blob,
                                    uint64_t len) {
  cipc_recv_op_t* op = &t->op;
  char err[512];
  wsync_status_t rc;
  if (rank != 0 || kind != WSYNC_BLOB_MANIFEST)
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u: a record from rank %u with message kind %d; "
                    "only the sender's MANIFEST carries one", t->rank, rank, (int)kind);
  if (!t->connected || t->peer == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': rank %u: a bucket record before connect", t->rank);
  if (op->state != CIPC_RECV_IDLE)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': rank %u: the record of bucket %llu came while bucket "
                    "%llu is still being received", t->rank, (unsigned long long)seq, (unsigned long long)op->seq);
  memset(op, 0, sizeof *op);
  if ((rc = cipc_bucket_decode((const uint8_t*)blob, (size_t)len, t->peer, seq, &op->entry, err, sizeof err)) != WSYNC_OK)
    return wsp_fail(rc, "transport 'cuda_ipc': rank %u: the sender's record of bucket %llu: %s", t->rank,
                    (unsigned long long)seq, err);
  op->seq = seq;
  op->state = CIPC_RECV_DESCRIBED;
  return WSYNC_OK;
}

wsync_status_t cipc_peer_blob(void* self, uint64_t seq, uint32_t rank, int32_t kind, const void* blob, uint64_t len) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  if (t == NULL || (blob == NULL && len > 0))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': peer_blob: NULL argument");
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank %u: aborted", t->rank);
  return t->rank == 0 ? cipc_sender_blob(t, seq, rank, kind, blob, len) : receiver_blob(t, seq, rank, kind, blob, len);
}

wsync_status_t cipc_describe_recv(void* self, uint64_t seq, int32_t kind, void* blob, uint64_t cap, uint64_t* len) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  if (t == NULL || blob == NULL || len == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': describe_recv: NULL argument");
  *len = 0;
  if (kind != WSYNC_BLOB_ACK) return WSYNC_OK; /* READY carries nothing */
  if (t->rank == 0 || t->peer == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': describe_recv on rank %u before connect", t->rank);
  *len = cipc_done_encode(t->peer->session, seq, (uint8_t*)blob, (size_t)cap);
  if (*len == 0)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': describe_recv: no room for the %u-byte done "
                    "record", CIPC_DONE_BYTES);
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
  if ((rc = cipc_set_device(t, "recv_post")) != WSYNC_OK) return rc; /* nothing queued */
  /* GPU-side ordering: our copies start once the sender's staging writes are done. */
  e = cudaStreamWaitEvent(t->stream, t->peer_events[s], 0);
  if (e != cudaSuccess)
    return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: bucket %llu: waiting for the event of staging slot "
                    "%u failed (cudaStreamWaitEvent: %s)", t->rank, (unsigned long long)op->seq, s,
                    cudaGetErrorString(e));
  for (i = 0; i < op->num_iov; ++i) {
    e = cudaMemcpyAsync(op->iov[i].base, src + cursor, (size_t)op->iov[i].len, cudaMemcpyDefault, t->stream);
    if (e != cudaSuccess) {
      op->event_recorded = cudaEventRecord(t->copied, t->stream) == cudaSuccess; /* what was queued, to wait on */
      op->state = CIPC_RECV_FAILED;
      op->failed = WSYNC_ERR_IO;
      return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: bucket %llu: copying region %llu (%p, %llu bytes) "
                      "out of staging slot %u failed (cudaMemcpyAsync: %s)", t->rank, (unsigned long long)op->seq,
                      (unsigned long long)i, op->iov[i].base, (unsigned long long)op->iov[i].len, s,
                      cudaGetErrorString(e));
    }
    cursor += op->iov[i].len;
  }
  if ((e = cudaEventRecord(t->copied, t->stream)) != cudaSuccess) {
    op->state = CIPC_RECV_FAILED;
    op->failed = WSYNC_ERR_IO;
    return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: bucket %llu: recording the copy event failed: %s",
                    t->rank, (unsigned long long)op->seq, cudaGetErrorString(e));
  }
  op->event_recorded = 1;
  op->state = CIPC_RECV_COPYING;
  return WSYNC_OK;
}

/* Keep the non-empty regions of `iov` (an owned copy) in the receive. */
static wsync_status_t take_regions(cipc_transport_t* t, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  cipc_recv_op_t* op = &t->op;
  char err[256];
  uint64_t total = 0, i;
  wsync_status_t rc;
  if ((rc = cipc_iov_total(iov, num_iov, &total, err, sizeof err)) != WSYNC_OK)
    return wsp_fail(rc, "transport 'cuda_ipc': rank %u: recv_post of bucket %llu: %s", t->rank, (unsigned long long)seq,
                    err);
  if (total != op->entry.len)
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u: bucket %llu from rank 0 has %llu bytes, the "
                    "receive expects %llu", t->rank, (unsigned long long)seq, (unsigned long long)op->entry.len,
                    (unsigned long long)total);
  if (num_iov > 0 && (op->iov = (wsync_iov_t*)malloc((size_t)num_iov * sizeof *op->iov)) == NULL)
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  op->num_iov = 0;
  for (i = 0; i < num_iov; ++i)
    if (iov[i].len > 0) op->iov[op->num_iov++] = iov[i];
  op->total = total;
  return WSYNC_OK;
}

wsync_status_t cipc_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  cipc_recv_op_t* op;
  wsync_status_t rc;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': recv_post on NULL");
  if (t->rank == 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': recv_post on the sender (rank 0)");
  if (!t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': recv_post before connect");
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank %u: aborted", t->rank);
  if (t->forgotten[0])
    return wsp_fail(WSYNC_ERR_PEER_FAILED, "transport 'cuda_ipc': rank %u: the sender (rank 0) was forgotten", t->rank);
  op = &t->op;
  if (op->state != CIPC_RECV_DESCRIBED || op->seq != seq)
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u: recv_post of bucket %llu, which the sender did "
                    "not describe (its MANIFEST carried no cuda_ipc bucket record)", t->rank, (unsigned long long)seq);
  if ((rc = take_regions(t, seq, iov, num_iov)) != WSYNC_OK) {
    finish(t);
    return rc;
  }
  if (op->total == 0) return WSYNC_OK; /* nothing moves (the sender describes no empty bucket either) */
  /* The core takes a failed recv_post as never posted: no recv_wait, no forget_peer, and the next
   * bucket's record must find no receive in progress. Copies already queued write into regions the
   * core takes back, so they get a bounded chance to end first. */
  if ((rc = start_copies(t)) != WSYNC_OK) cipc_cancel_recv(t, 500);
  return rc;
}

wsync_status_t cipc_recv_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  const int64_t deadline = wsp_deadline_us(timeout_ms);
  cipc_recv_op_t* op;
  cudaError_t e;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': recv_wait on NULL");
  op = &t->op;
  if (op->state == CIPC_RECV_IDLE || op->seq != seq)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': rank %u: recv_wait for bucket %llu, which was not "
                    "posted", t->rank, (unsigned long long)seq);
  if (op->state == CIPC_RECV_DESCRIBED && op->total == 0) {
    finish(t);
    return WSYNC_OK;
  }
  for (;;) {
    if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank %u: aborted", t->rank);
    if (op->state == CIPC_RECV_FAILED)
      return wsp_fail(op->failed, "transport 'cuda_ipc': rank %u: bucket %llu: queueing its copies failed earlier",
                      t->rank, (unsigned long long)seq);
    if (op->state != CIPC_RECV_COPYING)
      return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': rank %u: recv_wait for bucket %llu before "
                      "recv_post", t->rank, (unsigned long long)seq);
    (void)cudaSetDevice(t->device);
    e = cudaEventQuery(t->copied);
    if (e == cudaSuccess) {
      finish(t);
      return WSYNC_OK;
    }
    if (e != cudaErrorNotReady)
      return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: bucket %llu: the copy out of staging slot %u "
                      "failed: %s", t->rank, (unsigned long long)seq, op->entry.slot, cudaGetErrorString(e));
    if (wsp_now_us() >= deadline)
      return wsp_fail(WSYNC_ERR_TIMEOUT, "transport 'cuda_ipc': rank %u: bucket %llu is still being copied out of "
                      "staging slot %u", t->rank, (unsigned long long)seq, op->entry.slot);
    cipc_pause(t, deadline);
  }
}

void cipc_cancel_recv(cipc_transport_t* t, int64_t budget_ms) {
  cipc_recv_op_t* op = &t->op;
  if (op->state == CIPC_RECV_IDLE) return;
  if ((op->state == CIPC_RECV_COPYING || op->state == CIPC_RECV_FAILED) && op->event_recorded && t->copied != NULL) {
    const int64_t deadline = wsp_deadline_us(budget_ms);
    cudaError_t e;
    (void)cudaSetDevice(t->device);
    while ((e = cudaEventQuery(t->copied)) == cudaErrorNotReady && wsp_now_us() < deadline) cipc_pause(t, deadline);
    if (e == cudaErrorNotReady)
      wsp_log(WSYNC_LOG_WARN, "transport 'cuda_ipc': rank %u: bucket %llu is still being copied after %lld ms; "
              "abandoning it (its regions may still be written)", t->rank, (unsigned long long)op->seq,
              (long long)budget_ms);
  }
  finish(t);
}
