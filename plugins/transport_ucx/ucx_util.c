/* ucx_util.c — UCX statuses as wsync codes, the region lists kept until destroy, and the one
 * progress loop every wait of the plugin goes through. */
#include <sched.h>

#include "ucx_transport.h"

wsync_status_t ucx_status_to_wsync(ucs_status_t status) {
  switch (status) {
    case UCS_OK: return WSYNC_OK;
    case UCS_ERR_MESSAGE_TRUNCATED: return WSYNC_ERR_PROTOCOL;
    case UCS_ERR_NO_MEMORY: return WSYNC_ERR_OUT_OF_MEMORY;
    case UCS_ERR_CANCELED: return WSYNC_ERR_ABORTED;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
      return WSYNC_ERR_PEER_FAILED;
    default:
      if (UCS_IS_LINK_ERROR(status) || UCS_IS_ENDPOINT_ERROR(status)) return WSYNC_ERR_PEER_FAILED;
      return WSYNC_ERR_IO;
  }
}

wsync_status_t ucx_progress_until(ucx_transport_t* t, int (*done)(ucx_transport_t*, void*), void* arg,
                                  int64_t timeout_ms) {
  const int64_t deadline = wsp_deadline_ms(timeout_ms);
  unsigned idle = 0;
  for (;;) {
    if (atomic_load_explicit(&t->aborted, memory_order_relaxed))
      return wsp_fail(WSYNC_ERR_ABORTED, "transport 'ucx': aborted");
    /* Progress first, so that even timeout 0 moves things along once. */
    if (ucp_worker_progress(t->worker) != 0) {
      idle = 0;
      ucx_drop_foreign(t); /* something arrived: it may be foreign */
    } else if (++idle % 64 == 0) {
      ucx_drop_foreign(t); /* what a full drop left behind */
      /* Nothing to do locally (e.g. the peer is reading our buffer): let a co-located peer
       * have the core. This is not a sleep; it returns at once when nothing else runs. */
      sched_yield();
    }
    if (done(t, arg)) return WSYNC_OK;
    if (wsp_now_ms() >= deadline) return WSYNC_ERR_TIMEOUT;
  }
}

void ucx_keep_iov(ucx_transport_t* t, ucp_dt_iov_t* iov) {
  if (iov == NULL) return;
  if (wsp_reserve((void**)&t->kept_iovs, &t->cap_kept_iovs, t->num_kept_iovs, sizeof *t->kept_iovs) != 0) {
    /* Out of memory: leak rather than free memory UCX may still touch. */
    return;
  }
  t->kept_iovs[t->num_kept_iovs++] = iov;
}
