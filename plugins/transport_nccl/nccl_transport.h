/* nccl_transport.h — the state of one NCCL transport instance, shared by the plugin's files.
 *
 * One instance = one NCCL communicator in which wsync rank r is NCCL rank r (0 = the sender, the
 * root of every broadcast), on one CUDA device, with one stream of its own.
 *
 * The communicator is non-blocking (ncclConfig_t.blocking = 0): no NCCL call ever blocks the
 * calling thread, so every wait is a poll loop that watches a deadline and the abort flag.
 * A non-blocking NCCL call may answer ncclInProgress: the call is still being enqueued (e.g. the
 * first broadcast sets up its connections with the peers). Until ncclCommGetAsyncError says
 * ncclSuccess nothing else may be called on the communicator and nothing that depends on the
 * call may be put on the stream. Hence the op queue: send_post/recv_post only queue a bucket,
 * and nccl_pump() (called from every post and wait) issues queued buckets in order, one
 * ncclBroadcast at a time, recording each bucket's done event only once its broadcast is in
 * the stream. Nothing here ever synchronises the stream or the device.
 *
 * Threading: the core calls an instance from one thread; abort() only sets `aborted`, and the
 * owner thread's poll loops (and its next call) see it, ncclCommAbort the communicator and
 * return WSYNC_ERR_ABORTED. NCCL is never called from the aborting thread.
 *
 * With transport.lazy_init=1 connect does not wait for the init either: it stays pending
 * (t->init_pending) and nccl_pump() looks at it once per call, issuing nothing until it is done. */
#ifndef WSYNC_NCCL_TRANSPORT_H_
#define WSYNC_NCCL_TRANSPORT_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "nccl_logic.h"
#include "plugin_util.h"
#include "wsync_plugin.h"

#if NCCL_UNIQUE_ID_BYTES != NCCL_LOGIC_ID_BYTES
#error "nccl.h and nccl_logic.h disagree on the size of an NCCL unique id"
#endif

#define NCCL_TP "transport nccl"


typedef enum nccl_op_kind { NCCL_OP_SEND = 1, NCCL_OP_RECV = 2 } nccl_op_kind_t;

typedef enum nccl_op_state {
  NCCL_OP_QUEUED = 0,    /* posted; its broadcast is not issued yet (an earlier one is enqueuing) */
  NCCL_OP_ENQUEUING = 1, /* ncclBroadcast answered ncclInProgress; done event not recorded yet */
  NCCL_OP_ISSUED = 2     /* the broadcast (and the copies out of scratch) and done are in the stream */
} nccl_op_state_t;

/* One bucket in flight. */
typedef struct nccl_op {
  uint64_t seq;
  nccl_op_kind_t kind;
  nccl_op_state_t state;
  void* data;          /* send: the bucket; recv: the one region, or NULL = into the scratch buffer */
  void* target;        /* what the broadcast was given (data, or the scratch buffer at issue) */
  uint64_t len;        /* bytes of the bucket */
  wsync_iov_t* iov;    /* recv into several regions: owned copy; copied out of the scratch */
  uint64_t num_iov;
  cudaEvent_t ready;   /* send: recorded on the caller's stream at send_post */
  cudaEvent_t done;    /* recorded on our stream after the op's last work */
} nccl_op_t;

struct nccl_transport {
  uint32_t rank;
  uint32_t world_size;
  int device;
  char* group;
  wsync_store_t* store;
  nccl_options_t opts;
  char id_key[512];    /* the wsync store key of the unique id */
  char torch_key[600]; /* "" unless transport.torch_group is set */

  ncclUniqueId id;
  int have_id;         /* rank 0: from create; receivers: after connect fetched it */

  ncclComm_t comm;     /* NULL before connect and after an abort */
  int connected;
  /* transport.lazy_init=1: connect started the non-blocking init and returned without waiting
   * for it (torch's ProcessGroupNCCL in newer SGLang/LMDeploy creates its communicator only at
   * the first broadcast). Set until ncclCommGetAsyncError first answers ncclSuccess; meanwhile
   * nothing is issued on the communicator (posted buckets stay queued, waits time out), and a
   * wait past init_deadline_ms breaks the instance with WSYNC_ERR_TIMEOUT. */
  int init_pending;
  int64_t init_deadline_ms; /* connect's start + transport.init_timeout_ms, or INT64_MAX (not set) */
  cudaStream_t stream; /* ours, non-blocking */
  int mem_pools;       /* the device has stream-ordered allocation (cudaMallocAsync) */
  void* scratch;       /* receiver: several regions are received here, then copied out */
  uint64_t scratch_bytes;

  nccl_op_t* ops;      /* in post order */
  size_t num_ops, cap_ops;
  cudaEvent_t* free_events; /* a pool, so buckets do not create and destroy events */
  size_t num_free_events, cap_free_events;

  /* Set once the communicator cannot be used any more (a peer was dropped, NCCL failed, abort):
   * every later post and wait returns broken_status with this message. */
  wsync_status_t broken_status;
  char broken_msg[768];

  atomic_int aborted;
};

typedef struct nccl_transport nccl_transport_t;

/* nccl_util.c */
/* "ncclSystemError: unhandled system error (run with NCCL_DEBUG=WARN for details); last NCCL
 * error: ..." for messages. */
const char* nccl_describe(nccl_transport_t* t, ncclResult_t r, char* buf, size_t cap);
/* Make t->device current on this thread; *prev gets the device to restore (-1: none). */
wsync_status_t nccl_device_enter(const nccl_transport_t* t, int* prev);
void nccl_device_leave(const nccl_transport_t* t, int prev);
/* The status and message of a broken instance, as a return value. */
wsync_status_t nccl_broken(nccl_transport_t* t);
/* Record that the communicator is unusable (first reason wins) and ncclCommAbort it from this,
 * the owner, thread; then give in-flight device work a bounded chance to stop. */
void nccl_break(nccl_transport_t* t, wsync_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Abort seen: break with WSYNC_ERR_ABORTED and return it. */
wsync_status_t nccl_on_abort(nccl_transport_t* t);
/* Poll a communicator-level condition with the deadline and the abort flag. */
nccl_wait_result_t nccl_poll(nccl_transport_t* t, nccl_poll_state_t (*state)(void*), void* arg, int64_t deadline);

/* nccl_comm.c */
/* Rank 0, at create: ncclGetUniqueId, and publish the 128 bytes under t->id_key (and t->torch_key). */
wsync_status_t nccl_publish_id(nccl_transport_t* t);
wsync_status_t nccl_connect(nccl_transport_t* t, int64_t timeout_ms);
/* lazy_init: one non-blocking look at the pending init. WSYNC_OK with t->init_pending cleared
 * once it completed, or still set while NCCL says ncclInProgress; an error breaks the instance
 * (the communicator is aborted) and is returned. Nothing to do when no init is pending. */
wsync_status_t nccl_lazy_init_poll(nccl_transport_t* t);
/* lazy_init: the init is still pending at or past t->init_deadline_ms: break the instance with
 * WSYNC_ERR_TIMEOUT (aborting the communicator) and return 1; else 0. */
int nccl_lazy_init_expired(nccl_transport_t* t);
/* Free the communicator: finalize and destroy when it is healthy and idle, else abort. */
void nccl_comm_close(nccl_transport_t* t, int idle);
/* Device memory for the scratch buffer: stream-ordered where the device supports it. */
wsync_status_t nccl_dev_alloc(nccl_transport_t* t, void** p, uint64_t bytes, const char* what);
void nccl_dev_free(nccl_transport_t* t, void* p);

/* nccl_ops.c */
wsync_status_t nccl_send_post(nccl_transport_t* t, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                              uint32_t num_ranks);
wsync_status_t nccl_recv_post(nccl_transport_t* t, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov);
wsync_status_t nccl_wait(nccl_transport_t* t, nccl_op_kind_t kind, uint64_t seq, int64_t timeout_ms);
void nccl_forget_peer(nccl_transport_t* t, uint32_t rank);
/* 1 when no bucket is queued or in flight on the device. */
int nccl_ops_idle(nccl_transport_t* t);
/* Wait (bounded) for every issued op's done event, e.g. after an abort told the kernels to stop. */
void nccl_ops_drain(nccl_transport_t* t, int64_t budget_ms);
/* A done/ready event from the pool (created when the pool is empty), and back. */
wsync_status_t nccl_event_get(nccl_transport_t* t, cudaEvent_t* ev);
void nccl_event_put(nccl_transport_t* t, cudaEvent_t ev);
/* Destroy the events of every op and of the pool. */
void nccl_ops_free(nccl_transport_t* t);

#endif /* WSYNC_NCCL_TRANSPORT_H_ */
