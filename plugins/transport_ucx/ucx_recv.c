/* ucx_recv.c — the receiver's half: one tag receive (tag base + seq, ucx_tags.c) per bucket,
 * straight into the caller's regions (contiguous for one region, UCP_DATATYPE_IOV for several),
 * and the check that exactly the expected number of bytes arrived. */
#include <stdlib.h>
#include <string.h>

#include "ucx_transport.h"

static ucx_recv_op_t* find_recv(ucx_transport_t* t, uint64_t seq) {
  size_t i;
  for (i = 0; i < t->num_recvs; ++i)
    if (t->recvs[i].seq == seq) return &t->recvs[i];
  return NULL;
}

static void remove_recv(ucx_transport_t* t, ucx_recv_op_t* op) {
  size_t i = (size_t)(op - t->recvs);
  free(op->iov);
  memmove(&t->recvs[i], &t->recvs[i + 1], (t->num_recvs - i - 1) * sizeof *t->recvs);
  t->num_recvs--;
}

wsync_status_t ucx_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  ucp_request_param_t p;
  ucx_recv_op_t* op;
  ucp_dt_iov_t* regions = NULL;
  size_t n = 0;
  uint64_t i, total = 0;
  void* buffer = NULL;
  size_t count = 0;
  void* req;

  if (t == NULL || (iov == NULL && num_iov > 0))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': recv_post: NULL argument");
  if (t->rank == 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': recv_post on the sender (rank 0)");
  if (!t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': recv_post before connect");
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'ucx': aborted");
  if (find_recv(t, seq) != NULL)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': bucket %llu is already posted", (unsigned long long)seq);
  if (seq > UCX_MAX_SEQ)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': bucket %llu is beyond the %llu buckets one group can "
                    "move; create a new group", (unsigned long long)seq, (unsigned long long)UCX_MAX_SEQ);
  for (i = 0; i < num_iov; ++i) {
    if (iov[i].base == NULL && iov[i].len > 0)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': recv_post: region %llu of bucket %llu is NULL",
                      (unsigned long long)i, (unsigned long long)seq);
    total += iov[i].len;
  }
  if (wsp_reserve((void**)&t->recvs, &t->cap_recvs, t->num_recvs, sizeof *t->recvs) != 0)
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
  /* Drop empty regions and merge ones that touch: a list that is really one buffer gets the
   * contiguous receive, whose rendezvous is a zero-copy get (UCX 1.13 moves an IOV receive
   * with active messages that the sender must push, see ucx_transport.h). */
  if (num_iov > 0) {
    regions = (ucp_dt_iov_t*)malloc(num_iov * sizeof *regions);
    if (regions == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
  }
  for (i = 0; i < num_iov; ++i) {
    if (iov[i].len == 0) continue;
    if (n > 0 && (char*)regions[n - 1].buffer + regions[n - 1].length == (char*)iov[i].base) {
      regions[n - 1].length += (size_t)iov[i].len;
      continue;
    }
    regions[n].buffer = iov[i].base;
    regions[n].length = (size_t)iov[i].len;
    ++n;
  }

  memset(&p, 0, sizeof p);
  /* Always a request: UCX 1.13 completes an unexpected eager match immediately without filling
   * recv_info's length, and the length is what proves the bucket is whole. */
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.memory_type = UCS_MEMORY_TYPE_HOST;
  if (n <= 1) {
    buffer = n == 1 ? regions[0].buffer : NULL;
    count = (size_t)total;
    p.datatype = ucp_dt_make_contig(1);
    free(regions);
    regions = NULL;
  } else {
    buffer = regions;
    count = n;
    p.datatype = ucp_dt_make_iov();
  }
  req = ucp_tag_recv_nbx(t->worker, buffer, count, (ucp_tag_t)(t->tag_base + seq), (ucp_tag_t)-1, &p);
  if (UCS_PTR_IS_ERR(req)) {
    free(regions);
    return wsp_fail(ucx_status_to_wsync(UCS_PTR_STATUS(req)), "transport 'ucx': posting the receive of bucket %llu "
                    "failed: %s", (unsigned long long)seq, ucs_status_string(UCS_PTR_STATUS(req)));
  }
  op = &t->recvs[t->num_recvs++];
  op->seq = seq;
  op->req = req;
  op->status = UCS_OK;
  op->received = 0;
  op->expected = total;
  op->iov = regions;
  return WSYNC_OK;
}

static int recv_done(ucx_transport_t* t, void* arg) {
  ucx_recv_op_t* op = (ucx_recv_op_t*)arg;
  ucp_tag_recv_info_t info;
  ucs_status_t st;
  if (op->req == NULL) return 1;
  st = ucp_tag_recv_request_test(op->req, &info);
  if (st == UCS_INPROGRESS) return t->peers[0].failed != UCS_OK;
  ucp_request_free(op->req);
  op->req = NULL;
  op->status = st;
  op->received = st == UCS_OK ? info.length : 0;
  return 1;
}

wsync_status_t ucx_recv_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  ucx_recv_op_t* op;
  wsync_status_t rc;
  ucs_status_t st;
  unsigned long long got, want;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': recv_wait on NULL");
  op = find_recv(t, seq);
  if (op == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': recv_wait for bucket %llu, which was not posted",
                    (unsigned long long)seq);
  rc = ucx_progress_until(t, recv_done, op, timeout_ms);
  if (rc == WSYNC_ERR_ABORTED) return rc;
  if (op->req != NULL && t->peers[0].failed != UCS_OK)
    return wsp_fail(ucx_status_to_wsync(t->peers[0].failed), "transport 'ucx': rank 0 (the sender) failed while "
                    "bucket %llu was arriving: %s", (unsigned long long)seq, ucs_status_string(t->peers[0].failed));
  if (rc == WSYNC_ERR_TIMEOUT)
    return wsp_fail(rc, "transport 'ucx': bucket %llu (by sequence number) has not arrived from rank 0 (the sender) "
                    "yet", (unsigned long long)seq);
  st = op->status;
  got = op->received;
  want = op->expected;
  remove_recv(t, op); /* op is gone from here on */
  if (st == UCS_OK && got != want)
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'ucx': the message under bucket %llu's tag (by sequence number) "
                    "has %llu bytes, expected %llu", (unsigned long long)seq, got, want);
  if (st == UCS_ERR_MESSAGE_TRUNCATED)
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'ucx': the message under bucket %llu's tag (by sequence number) "
                    "is larger than the %llu bytes expected", (unsigned long long)seq, want);
  if (st != UCS_OK)
    return wsp_fail(ucx_status_to_wsync(st), "transport 'ucx': receiving bucket %llu (by sequence number) failed: %s",
                    (unsigned long long)seq, ucs_status_string(st));
  return WSYNC_OK;
}

void ucx_cancel_recvs(ucx_transport_t* t) {
  size_t i;
  for (i = 0; i < t->num_recvs; ++i) {
    ucx_recv_op_t* op = &t->recvs[i];
    if (op->req != NULL) {
      ucp_request_cancel(t->worker, op->req);
      ucp_request_free(op->req);
    }
    ucx_keep_iov(t, op->iov);
  }
  t->num_recvs = 0;
}
