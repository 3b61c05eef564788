/* cipc_transport.h — the state of one 'cuda_ipc' transport instance, shared by the plugin's
 * CUDA-side files.
 *
 * Transport 'cuda_ipc' moves buckets between processes on the SAME GPU with CUDA IPC. The
 * sender (rank 0) exports the core's cudaMalloc'd staging slots once per group (one
 * cudaIpcMemHandle per allocation, one interprocess event per slot) through the store; each
 * receiver maps them. Per bucket nothing touches the store: the core's control channel carries
 * the plugin's records (plugin ABI 1.2 side channel):
 *
 *   sender describe_send:   cudaEventRecord(slot event, the core's stream); the bucket record
 *                           travels with the MANIFEST
 *   receiver peer_blob:     the bucket record (checked against the staging)
 *   receiver recv_post:     cudaStreamWaitEvent(own stream, slot event); cudaMemcpyAsync into
 *                           each region; record a local event
 *   receiver recv_wait:     poll the local event
 *   receiver describe_recv: the done record travels with the ACK
 *   sender peer_blob:       the done record marks the rank done; send_wait: every rank done ->
 *                           the slot is free
 *
 * The GPU orders the receiver's copies after the sender's staging writes; neither host waits on
 * the device beyond polling an event. Record layouts and store keys: cipc_logic.h.
 *
 * CUDA runtime: the plugin links libcudart_static privately. Device pointers, streams and
 * events are driver objects of the device's primary context, so they are shared with the
 * core's runtime (a cudaStream_t is a CUstream). Every function doing CUDA work starts with
 * cudaSetDevice(t->device): the core's thread may change the current device between calls. */
#ifndef WSYNC_CIPC_TRANSPORT_H_
#define WSYNC_CIPC_TRANSPORT_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cipc_logic.h"
#include "plugin_util.h"
#include "wsync_plugin.h"

/* The receiver's one receive in progress: a small state machine, so that recv_wait may return
 * TIMEOUT at any point and be called again for the same bucket. */
enum cipc_recv_state {
  CIPC_RECV_IDLE = 0,
  CIPC_RECV_DESCRIBED, /* the sender's bucket record arrived (peer_blob); recv_post comes next */
  CIPC_RECV_COPYING,   /* copies queued on our stream; polling the local event */
  CIPC_RECV_FAILED     /* queueing the copies failed; recv_post cancels the receive before it returns */
};

typedef struct cipc_recv_op {
  enum cipc_recv_state state;
  uint64_t seq;
  wsync_iov_t* iov; /* owned copy */
  uint64_t num_iov;
  uint64_t total;
  cipc_post_entry_t entry; /* where the bucket is, from the sender's bucket record */
  int event_recorded;      /* `copied` was recorded after the copies (COPYING / FAILED) */
  wsync_status_t failed;   /* CIPC_RECV_FAILED: the status to return */
} cipc_recv_op_t;

typedef struct cipc_transport {
  uint32_t rank;
  uint32_t world_size;
  char* group;
  wsync_store_t* store;
  cipc_options_t opts;
  int device; /* CUDA ordinal in this process: the sender's staging device / the mapped device */
  int connected;
  atomic_int aborted;
  uint8_t* forgotten; /* [world_size]: forget_peer was called for the rank */
  char key_staging[CIPC_KEY_MAX];

  /* sender */
  uint32_t num_slots;      /* 0 until register_staging */
  cipc_range_t* ranges;    /* [num_slots] the core's staging slots */
  cudaEvent_t* events;     /* [num_slots] interprocess events, one per slot */
  cipc_staging_t* info;    /* the staging record published at connect */
  cipc_book_t book;
  cipc_post_entry_t described; /* the bucket describe_send recorded the event for (seq 0: none) */

  /* receiver */
  cipc_staging_t* peer;    /* the sender's staging record */
  uint8_t** mapped;        /* [peer->num_slots] base of the mapped allocation of each slot */
  uint8_t* owns_mapping;   /* [peer->num_slots] 1: close mapped[i] at destroy (shared ones once) */
  cudaEvent_t* peer_events; /* [peer->num_slots] the sender's slot events, opened */
  cudaStream_t stream;     /* our own non-blocking copy stream */
  cudaEvent_t copied;      /* recorded after a bucket's copies */
  cipc_recv_op_t op;
} cipc_transport_t;

/* cipc_util.c */
/* Sleep the option's poll interval, never past deadline_us (wsp_now_us clock). */
void cipc_pause(const cipc_transport_t* t, int64_t deadline_us);
/* Read `key` waiting at most wait_ms for it to exist; TIMEOUT when it does not (no error set),
 * PROTOCOL (naming the key) when it holds more than cap bytes, other failures passed on. */
wsync_status_t cipc_store_read(cipc_transport_t* t, const char* key, void* buf, uint64_t cap, uint64_t* len,
                               int64_t wait_ms);
/* Short wait for a poll: what is left of the deadline, at most 5 ms. */
int64_t cipc_poll_wait_ms(int64_t deadline_us);
/* cudaSetDevice(t->device), failing with a message naming `what`. */
wsync_status_t cipc_set_device(const cipc_transport_t* t, const char* what);
/* The UUID of local ordinal `device`. */
cudaError_t cipc_device_uuid(int device, uint8_t out[CIPC_UUID_BYTES]);

/* cipc_staging.c (sender) */
wsync_status_t cipc_register_staging(void* self, const wsync_buffer_t* bufs, uint32_t num_bufs);
wsync_status_t cipc_connect_sender(cipc_transport_t* t, int64_t timeout_ms);
void cipc_release_sender(cipc_transport_t* t);

/* cipc_open.c (receiver) */
wsync_status_t cipc_connect_receiver(cipc_transport_t* t, int64_t timeout_ms);
void cipc_release_receiver(cipc_transport_t* t);

/* cipc_send.c */
wsync_status_t cipc_describe_send(void* self, uint64_t seq, const wsync_buffer_t* buf, void* blob, uint64_t cap,
                                  uint64_t* len);
wsync_status_t cipc_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                              uint32_t num_ranks);
wsync_status_t cipc_send_wait(void* self, uint64_t seq, int64_t timeout_ms);
void cipc_forget_peer(void* self, uint32_t rank);

/* cipc_recv.c */
/* The side channel: a peer's record (the sender's bucket record on a receiver, a receiver's done
 * record on the sender), and the receiver's own records. */
wsync_status_t cipc_peer_blob(void* self, uint64_t seq, uint32_t rank, int32_t kind, const void* blob, uint64_t len);
wsync_status_t cipc_describe_recv(void* self, uint64_t seq, int32_t kind, void* blob, uint64_t cap, uint64_t* len);
wsync_status_t cipc_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov);
wsync_status_t cipc_recv_wait(void* self, uint64_t seq, int64_t timeout_ms);
/* Drop the receive in progress, letting queued copies finish for at most budget_ms. */
void cipc_cancel_recv(cipc_transport_t* t, int64_t budget_ms);

#endif /* WSYNC_CIPC_TRANSPORT_H_ */
