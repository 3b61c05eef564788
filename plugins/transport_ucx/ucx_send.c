/* ucx_send.c — the sender's half: one tag send of the whole bucket per receiver, under that
 * receiver's tag base + seq (ucx_tags.c), completion by polling, and handing back the sends to a
 * receiver that is forgotten (ucx_release_sends; forgetting it is ucx_connect.c's). */
#include <string.h>

#include "ucx_transport.h"

wsync_status_t ucx_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                             uint32_t num_ranks) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  ucp_request_param_t p;
  size_t i, j;
  if (t == NULL || buf == NULL || (ranks == NULL && num_ranks > 0) || (buf->data == NULL && buf->len > 0))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': send_post: NULL argument");
  if (t->rank != 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': send_post on receiver rank %u", t->rank);
  if (!t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': send_post before connect");
  if (buf->device_type != 0 && buf->device_type != WSYNC_DEVICE_CPU)
    return wsp_fail(WSYNC_ERR_UNSUPPORTED, "transport 'ucx': bucket %llu is in device memory (type %d); only host "
                    "memory is supported", (unsigned long long)seq, (int)buf->device_type);
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'ucx': aborted");
  if (seq > UCX_MAX_SEQ)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': bucket %llu is beyond the %llu buckets one group can "
                    "move; create a new group", (unsigned long long)seq, (unsigned long long)UCX_MAX_SEQ);
  for (i = 0; i < num_ranks; ++i) {
    const uint32_t r = ranks[i];
    if (r == 0 || r >= t->world_size)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': send_post to rank %u outside 1..%u", r,
                      t->world_size - 1);
    if (t->peers[r].forgotten || t->peers[r].ep == NULL)
      return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': send_post to rank %u, which was forgotten", r);
    for (j = 0; j < t->num_sends; ++j)
      if (t->sends[j].seq == seq && t->sends[j].rank == r)
        return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': bucket %llu already posted to rank %u",
                        (unsigned long long)seq, r);
  }

  memset(&p, 0, sizeof p);
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.datatype = ucp_dt_make_contig(1);
  p.memory_type = UCS_MEMORY_TYPE_HOST;
  for (i = 0; i < num_ranks; ++i) {
    const uint32_t r = ranks[i];
    ucx_send_op_t* op;
    void* req;
    if (wsp_reserve((void**)&t->sends, &t->cap_sends, t->num_sends, sizeof *t->sends) != 0)
      return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
    req = ucp_tag_send_nbx(t->peers[r].ep, buf->data, (size_t)buf->len, (ucp_tag_t)(t->peers[r].tag_base + seq), &p);
    op = &t->sends[t->num_sends++];
    op->seq = seq;
    op->rank = r;
    if (UCS_PTR_IS_ERR(req)) {
      /* Reported by send_wait, so the core learns which rank failed in one place. */
      op->req = NULL;
      op->status = UCS_PTR_STATUS(req);
    } else {
      op->req = req; /* NULL: completed at once (small eager message) */
      op->status = UCS_OK;
    }
  }
  return WSYNC_OK;
}

/* Poll the ops of `seq`: 1 when each completed (successfully or not) or its rank failed. */
static int sends_done(ucx_transport_t* t, void* arg) {
  const uint64_t seq = *(const uint64_t*)arg;
  int done = 1;
  size_t i;
  for (i = 0; i < t->num_sends; ++i) {
    ucx_send_op_t* op = &t->sends[i];
    if (op->seq != seq) continue;
    if (op->req != NULL) {
      ucs_status_t st = ucp_request_check_status(op->req);
      if (st == UCS_INPROGRESS) {
        if (t->peers[op->rank].failed == UCS_OK) done = 0;
        continue;
      }
      ucp_request_free(op->req);
      op->req = NULL;
      op->status = st;
    }
  }
  return done;
}

wsync_status_t ucx_send_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  wsync_status_t rc;
  size_t i, kept;
  int found = 0;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': send_wait on NULL");
  for (i = 0; i < t->num_sends; ++i) found |= t->sends[i].seq == seq;
  if (!found) return WSYNC_OK; /* nothing posted, or every rank of it was forgotten */

  rc = ucx_progress_until(t, sends_done, &seq, timeout_ms);
  if (rc == WSYNC_ERR_ABORTED) return rc;
  /* A failed rank is reported first, and again on every call until the core forgets it. */
  for (i = 0; i < t->num_sends; ++i) {
    const ucx_send_op_t* op = &t->sends[i];
    ucs_status_t st;
    if (op->seq != seq) continue;
    st = op->req == NULL ? op->status : t->peers[op->rank].failed;
    if (st != UCS_OK)
      return wsp_fail(ucx_status_to_wsync(st), "transport 'ucx': sending bucket %llu to rank %u failed: %s",
                      (unsigned long long)seq, op->rank, ucs_status_string(st));
  }
  if (rc == WSYNC_ERR_TIMEOUT) {
    for (i = 0; i < t->num_sends; ++i)
      if (t->sends[i].seq == seq && t->sends[i].req != NULL)
        return wsp_fail(WSYNC_ERR_TIMEOUT, "transport 'ucx': bucket %llu has not reached rank %u yet",
                        (unsigned long long)seq, t->sends[i].rank);
  }
  /* Every op of seq completed: drop them. */
  for (i = 0, kept = 0; i < t->num_sends; ++i)
    if (t->sends[i].seq != seq) t->sends[kept++] = t->sends[i];
  t->num_sends = kept;
  return WSYNC_OK;
}

void ucx_release_sends(ucx_transport_t* t, uint32_t rank) {
  size_t i, kept;
  for (i = 0, kept = 0; i < t->num_sends; ++i) {
    ucx_send_op_t* op = &t->sends[i];
    if (op->rank != rank) {
      t->sends[kept++] = *op;
      continue;
    }
    if (op->req != NULL) ucp_request_free(op->req);
  }
  t->num_sends = kept;
}
