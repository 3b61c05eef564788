/* ucx_transport.h — the state of one UCX transport instance, shared by the plugin's files.
 *
 * One instance = one ucp context + one worker (workers are not shared between instances, so
 * several instances in one process, e.g. one per thread in tests, never touch each other).
 * Requests are polled (ucp_request_check_status / ucp_tag_recv_request_test), never completed
 * through callbacks: the op records can then live in plain growable arrays, and a forgotten
 * request is simply handed back with ucp_request_free.
 *
 * Endpoints are closed with UCP_EP_CLOSE_FLAG_FORCE (ucx_close_peer); destroy closes the last
 * ones and then destroys the worker without progressing it: see ucx_destroy (ucx_plugin.c) for
 * the UCX bug that makes a progress after closing dangerous over TCP.
 *
 * Data path in UCX 1.13 (protocol v1), as measured on loopback:
 *  - a contiguous receive of a large bucket is a rendezvous the receiver pulls (CMA get on one
 *    host, RDMA get with a NIC): it proceeds while the sender is busy elsewhere;
 *  - an IOV receive (several regions) makes UCX answer the rendezvous with RTR, and the sender
 *    pushes the bytes as active-message fragments: no zero-copy get, and only while the sender
 *    progresses (send_wait). On shared memory its bandwidth still matched the contiguous path;
 *  - a dead peer: see error_mode in ucx_context.c. */
#ifndef WSYNC_UCX_TRANSPORT_H_
#define WSYNC_UCX_TRANSPORT_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "plugin_util.h"
#include "wsync_plugin.h"

typedef struct ucx_transport ucx_transport_t;

/* One peer as seen from this rank (index = peer rank). */
typedef struct ucx_peer {
  ucx_transport_t* owner; /* for the endpoint error callback */
  uint32_t rank;
  ucp_ep_h ep;            /* NULL: no endpoint (self, not connected, or closed) */
  uint64_t tag_base;      /* sender: the receiver's published tag base */
  ucs_status_t failed;    /* UCS_OK, or what the error callback reported */
  int forgotten;          /* forget_peer was called: never wait for it again */
} ucx_peer_t;

typedef struct ucx_send_op {
  uint64_t seq;
  uint32_t rank;
  void* req;           /* NULL once complete */
  ucs_status_t status; /* final status once req == NULL */
} ucx_send_op_t;

typedef struct ucx_recv_op {
  uint64_t seq;
  void* req;           /* NULL once complete */
  ucs_status_t status; /* final status once req == NULL */
  size_t received;     /* bytes that arrived (valid once complete) */
  uint64_t expected;   /* sum of the iov lengths */
  ucp_dt_iov_t* iov;   /* owned; UCX reads it for the whole life of an IOV receive */
} ucx_recv_op_t;

struct ucx_transport {
  uint32_t rank;
  uint32_t world_size;
  char* group;
  wsync_store_t* store;
  int err_mode_peer; /* UCP_ERR_HANDLING_MODE_PEER on every endpoint */

  ucp_context_h context;
  ucp_worker_h worker;
  int event_fd;      /* ucp_worker_get_efd, or -1 when this UCX cannot wake us */
  ucx_peer_t* peers; /* [world_size] */
  int connected;
  int join_later; /* sender, hint join_later=1: connect connects no receiver; connect_peer each */

  ucx_send_op_t* sends;
  size_t num_sends, cap_sends;
  ucx_recv_op_t* recvs;
  size_t num_recvs, cap_recvs;
  ucp_dt_iov_t** kept_iovs; /* region lists of receives handed back early (ucx_keep_iov) */
  size_t num_kept_iovs, cap_kept_iovs;
  uint64_t tag_base; /* receiver: its random tag base (ucx_tags.c); bucket seq has tag base + seq */
  uint64_t foreign_dropped; /* messages under tags no member uses, dropped (ucx_foreign.c) */
  uint8_t scratch[256];     /* where dropped messages are received, truncated; never read */

  atomic_int aborted;
};

/* ucx_util.c */
/* Map a failed UCX status on a transfer to a wsync code. */
wsync_status_t ucx_status_to_wsync(ucs_status_t status);
/* Progress the worker until done(t, arg) returns non-zero, timeout_ms passes (WSYNC_ERR_TIMEOUT)
 * or abort is called (WSYNC_ERR_ABORTED). With timeout 0 it progresses once: the core then sleeps
 * on the worker's event fd (ucx_get_event_fd, ucx_arm) instead of spinning here. */
wsync_status_t ucx_progress_until(ucx_transport_t* t, int (*done)(ucx_transport_t*, void*), void* arg,
                                  int64_t timeout_ms);
/* Keep the region list of a receive handed back before it completed (canceled, or its sender
 * forgotten): UCX may read it until the worker is gone, so it is freed only at destroy. */
void ucx_keep_iov(ucx_transport_t* t, ucp_dt_iov_t* iov);

/* ucx_context.c */
wsync_status_t ucx_context_open(ucx_transport_t* t, const wsync_transport_params_t* params);
void ucx_context_close(ucx_transport_t* t);
/* The worker's event fd for the core to sleep on, and arming it (plugin ABI 1.2). */
wsync_status_t ucx_get_event_fd(void* self, int32_t* fd);
wsync_status_t ucx_arm(void* self, int32_t* armed);
/* Progress the worker until it has nothing to do now (plugin ABI 1.4 progress). */
wsync_status_t ucx_progress(void* self);

/* ucx_connect.c */
wsync_status_t ucx_connect(void* self, int64_t timeout_ms);
wsync_status_t ucx_connect_peer(void* self, uint32_t rank, int64_t timeout_ms);
/* Leave `rank` out for good: its sends handed back, (receiver, rank 0) every receive cancelled,
 * its endpoint force-closed, one progress call. Never blocks. */
void ucx_forget_peer(void* self, uint32_t rank);
/* Force-close the endpoint to `rank` (outstanding sends complete as canceled); never blocks and
 * never progresses the worker. */
void ucx_close_peer(ucx_transport_t* t, uint32_t rank);

/* ucx_send.c */
wsync_status_t ucx_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                             uint32_t num_ranks);
wsync_status_t ucx_send_wait(void* self, uint64_t seq, int64_t timeout_ms);
/* Hand back the send requests to `rank` (UCX completes them; no wait of ours looks at them again). */
void ucx_release_sends(ucx_transport_t* t, uint32_t rank);

/* ucx_recv.c */
wsync_status_t ucx_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov);
wsync_status_t ucx_recv_wait(void* self, uint64_t seq, int64_t timeout_ms);
/* Cancel every posted receive (the sender is gone); their memory is released at destroy. */
void ucx_cancel_recvs(ucx_transport_t* t);

/* ucx_tags.c */
/* A receiver's tag base: random high 32 bits (never all zero), low 32 bits zero. */
wsync_status_t ucx_random_tag(uint64_t* tag);
/* The bucket numbers a tag base has room for (below 2^32). */
#define UCX_MAX_SEQ 0xFFFFFFFFull

/* ucx_foreign.c */
/* Drop what UCX holds unexpected under tags no member uses (called on every progress). */
void ucx_drop_foreign(ucx_transport_t* t);

/* ucx_devices.c: "tl/device" pairs UCX sees in this process, space-separated (computed once). */
const char* ucx_devices_text(void);

/* ucx_log.c: UCX's own log lines through wsync's sink (once per process), and the count of
 * instances being destroyed (their UCX complaints about gone peers are logged at DEBUG). */
void ucx_log_route(void);
void ucx_log_closing(int delta);

#endif /* WSYNC_UCX_TRANSPORT_H_ */
