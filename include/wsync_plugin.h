/*
 * wsync_plugin.h — the plugin ABI: what a transport or adapter plugin exports, and the host
 * table of core services it may use. See docs/PLUGINS.md for a guide and the error-code table.
 *
 * A plugin is a shared object named libwsync_transport_<name>.so or libwsync_adapter_<name>.so
 * that exports exactly one entry function:
 *
 *   const wsync_transport_v1_t* wsync_transport_entry_v1(const wsync_host_v1_t* host);
 *   const wsync_adapter_v1_t*   wsync_adapter_entry_v1(const wsync_host_v1_t* host);
 *
 * The entry returns a pointer to a constant table that lives as long as the plugin is loaded,
 * or NULL (after host->set_error) when the plugin cannot work in this process (e.g. no device).
 * Tables are append-only: a field added in a minor version is used by the core only when the
 * table's struct_size covers it and the pointer is non-NULL. A breaking change adds a _v2 entry
 * and the loader keeps adapting _v1.
 *
 * Threading: the core calls one plugin instance from one thread at a time, except `abort`,
 * which may come from any thread. Functions must not block longer than the timeout they are
 * given. Errors: return a WSYNC_ERR_* code and call host->set_error with a message that names
 * the thing at fault (peer rank, key, device, option).
 */
#ifndef WSYNC_PLUGIN_H_
#define WSYNC_PLUGIN_H_

#include "wsync.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WSYNC_PLUGIN_ABI_VERSION 1 /* the major; tables grow by appending */
#define WSYNC_PLUGIN_ABI_MINOR 7   /* 1: GPU fields and HTTP engines; 2: event fd, side channel, hints;
                                      3: engine probing, reset and abandon steps, take_reply;
                                      4: transport progress; 5: connect_peer (receivers that join
                                      later); 6: the hint auth_key; 7: the CHECK step and held
                                      (engines that check an update first, and say what they hold
                                      after a failure) */

/* Since 1.2. Does the versioned struct at `p` (which starts with struct_size) reach the end of
 * `field` of `type`? Read a field only when it does: an older peer passes a shorter struct. */
#define WSYNC_HAS_FIELD(p, type, field) ((p) != NULL && (p)->struct_size >= WSYNC_STRUCT_SIZE(type, field))

/* ---------------------------------------------------------------------------------------------
 * The host table: core services for plugins. Process-wide; valid while the plugin is loaded.
 * ------------------------------------------------------------------------------------------- */

typedef struct wsync_store wsync_store_t; /* opaque: a client of the group's rendezvous store */

typedef struct wsync_host_v1_t {
  uint32_t struct_size;
  uint32_t abi_version; /* WSYNC_PLUGIN_ABI_VERSION of the core */
  /* Log one formatted line through the core's sink (same levels as WSYNC_LOG_*). */
  void (*log)(int32_t level, const char* message);
  /* Set the calling thread's wsync_last_error() detail; returns `status` for convenience. */
  wsync_status_t (*set_error)(wsync_status_t status, const char* message);
  /* Store: keys are absolute (pick a prefix of your plugin's name); values are bytes. */
  wsync_status_t (*store_set)(wsync_store_t* store, const char* key, const void* value, uint64_t len);
  /* Wait up to timeout_ms for `key` to exist, then copy at most `cap` bytes into `buf` and set
   * *len to the value's full length (WSYNC_ERR_INVALID_ARGUMENT if it exceeds cap). */
  wsync_status_t (*store_get)(wsync_store_t* store, const char* key, void* buf, uint64_t cap,
                              uint64_t* len, int64_t timeout_ms);
  /* Atomically add `delta` to the integer at `key` (created as 0) and return the new value. */
  wsync_status_t (*store_add)(wsync_store_t* store, const char* key, int64_t delta, int64_t* out);
  /* Page-aligned host memory for staging; NULL on failure. */
  void* (*alloc_host)(uint64_t bytes);
  void (*free_host)(void* ptr, uint64_t bytes);
  /* Since 1.2: the plugin ABI minor of the core (WSYNC_PLUGIN_ABI_MINOR it was built with). A
   * plugin that needs a 1.2 core (the side channel, hints) checks it; an older core's table ends
   * before this field. */
  uint32_t abi_minor;
  uint32_t reserved0;
} wsync_host_v1_t;

#define WSYNC_HOST_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_host_v1_t, reserved0)

/* Since 1.2. True when `host` can serve a plugin that uses the host table up to `last_field`:
 * the same plugin ABI major and a table at least that large (a larger, newer table is fine). */
#define WSYNC_PLUGIN_HOST_USABLE(host, last_field) \
  ((host) != NULL && (host)->abi_version == WSYNC_PLUGIN_ABI_VERSION && WSYNC_HAS_FIELD(host, wsync_host_v1_t, last_field))

/* Since 1.2. The first line of every entry function: when `host` cannot serve a plugin that uses
 * the host table up to `last_field`, say why (through set_error, when the table has one) and
 * return NULL. `plugin` names the plugin in the message ("transport 'ucx'"). */
#define WSYNC_PLUGIN_CHECK_HOST(host, last_field, plugin)                                                         \
  do {                                                                                                            \
    if (!WSYNC_PLUGIN_HOST_USABLE(host, last_field)) {                                                            \
      if ((host) != NULL && WSYNC_HAS_FIELD(host, wsync_host_v1_t, set_error) && (host)->set_error != NULL)        \
        (host)->set_error(WSYNC_ERR_VERSION_MISMATCH, plugin ": this wsync core's host table is of another plugin " \
                          "ABI or older than the plugin needs (field '" #last_field "'); update libwsync");        \
      return NULL;                                                                                                \
    }                                                                                                             \
  } while (0)

/* ---------------------------------------------------------------------------------------------
 * Transport plugins: the data plane. They move one bucket's bytes from rank 0 to receivers.
 * Manifests, acknowledgements and peer liveness are handled by the core's control channel.
 * ------------------------------------------------------------------------------------------- */

#define WSYNC_TRANSPORT_CAP_HOST_MEMORY (1u << 0)      /* moves CPU memory */
#define WSYNC_TRANSPORT_CAP_CUDA_MEMORY (1u << 1)      /* moves CUDA device memory */
#define WSYNC_TRANSPORT_CAP_SCATTER_RECV (1u << 2)     /* recv places into an iov with no copy */
/* Since 1.1: send_post only ever gets ranges inside the buffers given to register_staging (the
 * core then never sends straight from a caller's tensor). CUDA IPC needs this: it exports its
 * staging once per group instead of a handle per tensor. */
#define WSYNC_TRANSPORT_CAP_STAGING_ONLY (1u << 3)
/* Retired in 1.2 (bit 4 stays reserved; the core ignores it). In 1.1 it made the core add two
 * transport options of its own; since 1.2 adapters ask for what their engine needs with
 * get_needs (transport hints), and the core forwards that without reading it. */
#define WSYNC_TRANSPORT_CAP_RETIRED_4 (1u << 4)
/* Since 1.4 (a capability bit: a core before 1.4 ignores it). Several sequence numbers may be
 * posted at once on either side and complete in any
 * order (send_post of seq+1 before send_wait(seq) answered, recv_post of seq+1 before
 * recv_wait(seq) answered), and each stays matched to its own. The core then moves a bucket as
 * pieces (consecutive sequence numbers, one message each: group option piece_bytes) and keeps up
 * to `window` buckets on the wire (group option window). Without it: one bucket, one message, one
 * at a time, as before. */
#define WSYNC_TRANSPORT_CAP_PIECES (1u << 5)
/* Since 1.4 (a capability bit: a core before wsync 0.8 ignores it). forget_peer(rank) leaves every
 * other rank working: their sends and receives go on, and later posts leave the forgotten rank
 * out. The core then may remove one receiver and go on (group option membership=elastic); without
 * it that option is refused (NCCL forgets a rank by aborting its communicator). */
#define WSYNC_TRANSPORT_CAP_FORGET_ONE (1u << 6)

/* The kinds of message a side-channel blob travels with (since 1.2, see describe_send). */
#define WSYNC_BLOB_MANIFEST 1 /* sender -> every receiver, before the bucket moves */
#define WSYNC_BLOB_READY 2    /* receiver -> sender, once its receive is posted */
#define WSYNC_BLOB_ACK 3      /* receiver -> sender, once the bucket's bytes are in place */
#define WSYNC_BLOB_MAX_BYTES 4096

typedef struct wsync_transport_params_t {
  uint32_t struct_size;
  uint32_t rank;                 /* 0 = sender */
  uint32_t world_size;           /* 1 + receivers */
  uint32_t reserved0;
  const char* group_name;
  wsync_store_t* store;          /* the group's store; valid until destroy */
  const wsync_option_t* options; /* "transport.<key>" options with the prefix removed */
  uint64_t num_options;
  int64_t timeout_ms;            /* for connect */
  /* Since plugin ABI 1.1 (read only when struct_size covers it; older cores: use the current
   * device). The CUDA ordinal, in this process, of the device the transport works on: the
   * sender's staging device, or the receiver's. -1 for a host-only group. */
  int32_t device_index;
  uint32_t reserved1;
  /* Since plugin ABI 1.2 (read only when struct_size covers them). Hints from the group's adapter:
   * what its engine needs from the data plane (nccl: torch_group, lazy_init,
   * allreduce_after_init). Apply the keys you know, ignore the others (a hint is not an option:
   * no error for an unknown key). The core drops a hint whose key the caller set as an option,
   * so options win. May be NULL when num_hints is 0. Since plugin ABI 1.4 the core adds the hint
   * "local_address" on both sides: the IP or host name this process was bound to (the sender's
   * store address as the user gave it, a receiver's end of its control connection); a transport
   * that listens should listen there only ("0.0.0.0", "::" or "" = everywhere). Since plugin ABI
   * 1.6 the core also adds the hint "auth_key" on both sides: 64 hex digits, a key derived from the
   * group secret (HMAC-SHA-256 of the secret under the label "wsync transport key"), the same in
   * every member of the group; a transport that opens connections of its own admits only peers
   * that prove it (mix the world's group_name into the proof). It is a secret: never log it, never
   * send it. Receivers get no other hint. */
  const wsync_option_t* hints;
  uint64_t num_hints;
} wsync_transport_params_t;

/* The hint and property keys the core and the bundled plugins share (since the 0.7.0 header;
 * the strings are the contract, the names keep them from being typed twice). */
#define WSYNC_HINT_LOCAL_ADDRESS "local_address"              /* core -> transport, both sides */
#define WSYNC_HINT_TORCH_GROUP "torch_group"                  /* adapter -> nccl */
#define WSYNC_HINT_LAZY_INIT "lazy_init"                      /* adapter -> nccl */
#define WSYNC_HINT_ALLREDUCE_AFTER_INIT "allreduce_after_init" /* adapter -> nccl */
#define WSYNC_HINT_JOIN_LATER "join_later"                    /* core -> transport, sender (1.5) */
#define WSYNC_HINT_AUTH_KEY "auth_key"                        /* core -> transport, both sides (1.6) */
#define WSYNC_PROPERTY_TORCH_STORE_KEY "torch_store_key"      /* nccl -> adapter */
#define WSYNC_PROPERTY_NCCL_UNIQUE_ID "nccl_unique_id_b64"    /* nccl -> adapter */

#define WSYNC_TRANSPORT_PARAMS_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_transport_params_t, num_hints)
#define WSYNC_TRANSPORT_PARAMS_INIT \
  {(uint32_t)WSYNC_TRANSPORT_PARAMS_STRUCT_SIZE, 0u, 0u, 0u, NULL, NULL, NULL, 0u, -1, -1, 0u, NULL, 0u}

/* One contiguous region of the sender's bucket. */
typedef struct wsync_buffer_t {
  uint32_t struct_size;
  int32_t device_type; /* WSYNC_DEVICE_* */
  int32_t device_index;
  int32_t reserved0;
  const void* data;
  uint64_t len;
  /* Since 1.1 (read only when struct_size covers it). For a CUDA buffer: the cudaStream_t on
   * which its bytes become ready. The transport orders its reads after the work queued there
   * when send_post is called (record an event on it and wait for that on its own stream); it
   * never synchronises the device. NULL for host buffers. */
  void* stream;
} wsync_buffer_t;

#define WSYNC_BUFFER_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_buffer_t, stream)
#define WSYNC_BUFFER_INIT {(uint32_t)WSYNC_BUFFER_STRUCT_SIZE, WSYNC_DEVICE_CPU, 0, 0, NULL, 0u, NULL}

/* One destination region on a receiver; the regions of one recv, in order, cover the bucket.
 * The one struct without struct_size, on purpose: like POSIX struct iovec it is a frozen
 * (pointer, length) pair passed in long arrays on the hot path, and it will never grow; a region
 * that needs more (a device, a memory key) would be a new type and a new function. */
typedef struct wsync_iov_t {
  void* base;
  uint64_t len;
} wsync_iov_t;

typedef struct wsync_transport_v1_t {
  uint32_t struct_size;
  uint32_t abi_version; /* WSYNC_PLUGIN_ABI_VERSION the plugin was built for */
  const char* name;     /* "ucx"; must match the file name */
  const char* version;  /* the plugin's release */
  uint64_t caps;        /* WSYNC_TRANSPORT_CAP_* */

  /* Create an instance; does not talk to peers yet. Unknown options: WSYNC_ERR_INVALID_ARGUMENT
   * naming the key. */
  wsync_status_t (*create)(const wsync_transport_params_t* params, void** out);
  /* Exchange addresses through the store and connect to the peers; every rank calls it.
   * Must return within timeout_ms (WSYNC_ERR_TIMEOUT naming the missing rank). */
  wsync_status_t (*connect)(void* self, int64_t timeout_ms);
  /* Sender: start moving `buf` to each rank in `ranks` as bucket `seq` (seq increases by one per
   * bucket over the life of the group). Does not block. `buf` stays valid until send_wait
   * reports completion or forget_peer/abort was called for every rank. */
  wsync_status_t (*send_post)(void* self, uint64_t seq, const wsync_buffer_t* buf,
                              const uint32_t* ranks, uint32_t num_ranks);
  /* Sender: wait up to timeout_ms for bucket `seq` to have left for every rank (the buffer may be
   * reused). WSYNC_ERR_TIMEOUT if not yet: the core calls again (with short slices). */
  wsync_status_t (*send_wait)(void* self, uint64_t seq, int64_t timeout_ms);
  /* Receiver: start receiving bucket `seq` into the regions of `iov` (copied during the call;
   * the regions themselves stay valid until recv_wait completes). */
  wsync_status_t (*recv_post)(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov);
  /* Receiver: wait up to timeout_ms for bucket `seq` to be fully in place. */
  wsync_status_t (*recv_wait)(void* self, uint64_t seq, int64_t timeout_ms);
  /* Sender: `rank` died or was dropped; cancel what is outstanding to it and never wait for it
   * again. Never blocks long. */
  void (*forget_peer)(void* self, uint32_t rank);
  /* Optional (may be NULL): make blocked calls return WSYNC_ERR_ABORTED. Any thread. */
  void (*abort)(void* self);
  /* Free everything. Accepts NULL. */
  void (*destroy)(void* self);

  /* ---- since plugin ABI 1.1; the core calls these only when struct_size covers them and the
   * pointer is non-NULL ---- */

  /* Optional. Sender: the core's staging buffers, given once after create and before connect
   * (they live until destroy). Every send_post of a transport with CAP_STAGING_ONLY points into
   * one of them. A transport that needs them and does not get them fails connect. The array is
   * stepped by bufs[0].struct_size, like every array of structs in the ABI. */
  wsync_status_t (*register_staging)(void* self, const wsync_buffer_t* bufs, uint32_t num_bufs);
  /* Optional. Copy a NUL-terminated property of the instance into buf (cap bytes, including the
   * NUL). Valid after create. Known keys are listed by each plugin (nccl: "nccl_unique_id_b64",
   * "torch_store_key"). WSYNC_ERR_NOT_FOUND for an unknown key, WSYNC_ERR_INVALID_ARGUMENT when
   * cap is too small. */
  wsync_status_t (*get_property)(void* self, const char* key, char* buf, uint64_t cap);

  /* ---- since plugin ABI 1.2; the core calls these only when struct_size covers them and the
   * pointer is non-NULL ---- */

  /* Optional: waiting without spinning. A file descriptor that becomes readable when the instance
   * has progress to make (UCX: ucp_worker_get_efd). Valid from connect until destroy; the core only
   * polls it, never reads or closes it. *fd = -1 (or no entry): the core calls the waits in short
   * slices instead. */
  wsync_status_t (*get_event_fd)(void* self, int32_t* fd);
  /* Optional, with get_event_fd. Called after a wait answered WSYNC_ERR_TIMEOUT, right before the
   * core blocks on the fd: *armed = 1 when the fd will signal the next event (the core sleeps on it),
   * 0 when there is work to do already (the core calls the wait again at once). */
  wsync_status_t (*arm)(void* self, int32_t* armed);
  /* Optional: the per-bucket side channel. Sender: called once the bytes of bucket `seq` are final
   * (packed: `buf` is what send_post will get, ready on buf->stream) and right before the core sends
   * the bucket's MANIFEST; up to `cap` (WSYNC_BLOB_MAX_BYTES) bytes written to `blob` (*len = 0:
   * nothing) travel with the MANIFEST to every receiver. The core's control channel carries them;
   * no store round trip per bucket. */
  wsync_status_t (*describe_send)(void* self, uint64_t seq, const wsync_buffer_t* buf, void* blob, uint64_t cap,
                                  uint64_t* len);
  /* Optional: the receiver's side. kind WSYNC_BLOB_READY: after recv_post, before READY is sent;
   * WSYNC_BLOB_ACK: after recv_wait succeeded, before ACK is sent. Same rules as describe_send. */
  wsync_status_t (*describe_recv)(void* self, uint64_t seq, int32_t kind, void* blob, uint64_t cap, uint64_t* len);
  /* Optional: a peer's blob arrived (only non-empty ones are delivered). Receiver: from rank 0 with
   * WSYNC_BLOB_MANIFEST, before recv_post of `seq`. Sender: from receiver `rank` with
   * WSYNC_BLOB_READY (before send_post) or WSYNC_BLOB_ACK (before the core next calls send_wait).
   * The bytes come from the network: check every field. A failure fails the bucket, and the core
   * names the rank. */
  wsync_status_t (*peer_blob)(void* self, uint64_t seq, uint32_t rank, int32_t kind, const void* blob, uint64_t len);
  /* Optional: one line on what the plugin finds in this process (its libraries' versions, devices),
   * for wsync-info and wsync_list_plugins. Static storage; no instance needed; must not fail. */
  const char* (*runtime_info)(void);
  /* Optional, since 1.4: move what is outstanding along once, without waiting. A receiver calls it
   * between buckets when its event fd fires: a transport may still owe the sender messages about
   * receives that completed (UCX's rendezvous acknowledgements, queued while its shared-memory FIFO
   * was full), and the sender's send_wait completes only once they went out. */
  wsync_status_t (*progress)(void* self);
  /* Optional, since 1.5 (membership=elastic, docs/ABI.md "Membership"). Sender: connect to
   * receiver `rank` alone, once it published its address for this group: a receiver that joins
   * after connect, or a new process that joins with the rank of one forgotten (forget_peer) before;
   * an endpoint left from before is replaced. Must return within timeout_ms (WSYNC_ERR_TIMEOUT
   * naming the rank). With hint WSYNC_HINT_JOIN_LATER ("1") the sender's connect only publishes its
   * own address and connects no receiver: the core calls connect_peer for each one that joins. */
  wsync_status_t (*connect_peer)(void* self, uint32_t rank, int64_t timeout_ms);
} wsync_transport_v1_t;

/* Table sizes of each plugin ABI minor (what a plugin built against that header reports). */
#define WSYNC_TRANSPORT_V1_0_SIZE WSYNC_STRUCT_SIZE(wsync_transport_v1_t, destroy)
#define WSYNC_TRANSPORT_V1_1_SIZE WSYNC_STRUCT_SIZE(wsync_transport_v1_t, get_property)
#define WSYNC_TRANSPORT_V1_2_SIZE WSYNC_STRUCT_SIZE(wsync_transport_v1_t, runtime_info)
#define WSYNC_TRANSPORT_V1_4_SIZE WSYNC_STRUCT_SIZE(wsync_transport_v1_t, progress)
#define WSYNC_TRANSPORT_V1_5_SIZE WSYNC_STRUCT_SIZE(wsync_transport_v1_t, connect_peer)

typedef const wsync_transport_v1_t* (*wsync_transport_entry_v1_fn)(const wsync_host_v1_t* host);

/* ---------------------------------------------------------------------------------------------
 * Adapter plugins: the control plane of one engine protocol. They return data (layout rules,
 * requests); the core does all I/O.
 * ------------------------------------------------------------------------------------------- */

#define WSYNC_ADAPTER_CAP_INBAND_MANIFEST (1u << 0) /* manifests travel on wsync's own channel */
/* Since 1.1: the engine is driven over HTTP; the adapter builds the requests (build_requests) and
 * the core sends them with libcurl and judges the replies. */
#define WSYNC_ADAPTER_CAP_HTTP (1u << 1)
/* Retired in 1.2 (bit 2 stays reserved; the core ignores it): an adapter asks for what its engine
 * needs from the transport with get_needs instead. */
#define WSYNC_ADAPTER_CAP_RETIRED_2 (1u << 2)

/* How the planner must lay tensors out in a bucket. */
#define WSYNC_LAYOUT_BYTES_MIXED 1       /* byte offsets, mixed dtypes in one bucket */
#define WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE 2 /* element offsets, one dtype per bucket, no padding */
#define WSYNC_LAYOUT_EXCEED_THEN_FLUSH 3 /* vLLM packed: the tensor that crosses stays in the chunk */

typedef struct wsync_layout_rule_t {
  uint32_t struct_size;
  int32_t kind;         /* WSYNC_LAYOUT_* */
  uint32_t alignment;   /* byte alignment of each entry's offset (power of two; 1 = none) */
  uint32_t allow_split; /* 1: a tensor larger than a bucket may be split across buckets */
  uint32_t reserved0;
  /* Since 1.1: the bucket size the engine protocol itself fixes (vLLM's packed_buffer_size_bytes:
   * both sides must cut at the same size), 0 = the group's bucket_bytes. A group whose
   * bucket_bytes option says otherwise is refused at init. */
  uint64_t bucket_bytes;
} wsync_layout_rule_t;

#define WSYNC_LAYOUT_RULE_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_layout_rule_t, bucket_bytes)
#define WSYNC_LAYOUT_RULE_INIT {(uint32_t)WSYNC_LAYOUT_RULE_STRUCT_SIZE, WSYNC_LAYOUT_BYTES_MIXED, 1u, 0u, 0u, 0u}

typedef struct wsync_adapter_params_t {
  uint32_t struct_size;
  uint32_t num_receivers;
  const char* group_name;
  const wsync_option_t* options; /* "adapter.<key>" options with the prefix removed */
  uint64_t num_options;
} wsync_adapter_params_t;

#define WSYNC_ADAPTER_PARAMS_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_adapter_params_t, num_options)
#define WSYNC_ADAPTER_PARAMS_INIT {(uint32_t)WSYNC_ADAPTER_PARAMS_STRUCT_SIZE, 0u, NULL, NULL, 0u}

/* Since 1.2: what an engine needs from the data plane, filled by the adapter's get_needs. The
 * core forwards it without reading the keys, so the core stays free of engine and transport
 * knowledge. */
typedef struct wsync_adapter_needs_t {
  uint32_t struct_size;
  uint32_t reserved0;
  /* Hints for the transport (wsync_transport_params_t.hints): e.g. torch_group=<group>, lazy_init=1
   * for engines whose torch process group reads the NCCL id from the store and creates its
   * communicator at the first collective; allreduce_after_init=1 for vLLM. Owned by the adapter,
   * valid until destroy. */
  const wsync_option_t* transport_hints;
  uint64_t num_transport_hints;
  /* Transport properties (get_property keys) the adapter's requests need, e.g.
   * "nccl_unique_id_b64": the core reads each one the transport has and passes them in every
   * wsync_engine_step_t (properties). A key the transport does not have is left out. */
  const char* const* transport_properties;
  uint64_t num_transport_properties;
} wsync_adapter_needs_t;

#define WSYNC_ADAPTER_NEEDS_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_adapter_needs_t, num_transport_properties)
#define WSYNC_ADAPTER_NEEDS_INIT {(uint32_t)WSYNC_ADAPTER_NEEDS_STRUCT_SIZE, 0u, NULL, 0u, NULL, 0u}

/* ---- since plugin ABI 1.1: HTTP engines ---- */

/* The steps of a group's life the core asks an HTTP adapter to build requests for. Each step is
 * built once per engine server; an empty list means "nothing to send at this step". */
#define WSYNC_STEP_HEALTH 1       /* before init: is the server up (any 2xx) */
#define WSYNC_STEP_INIT 2         /* join the weight-update group (sent concurrently with the data plane's connect) */
#define WSYNC_STEP_PAUSE 3        /* before the first batch of an update, when option adapter.pause=1 */
#define WSYNC_STEP_BEGIN_UPDATE 4 /* before the first batch of an update (vLLM start_weight_update) */
#define WSYNC_STEP_UPDATE 5       /* one bucket: posted concurrently with its transfer; the reply comes after it */
#define WSYNC_STEP_FINALIZE 6     /* after the last bucket: end-of-update markers, cache flush, version */
#define WSYNC_STEP_RESUME 7       /* after finalize, when option adapter.pause=1 */
#define WSYNC_STEP_DESTROY 8      /* at group destroy, also after a failure: leave the weight-update group */
/* Since plugin ABI 1.3; the core builds these only for an adapter whose table has take_reply. */
#define WSYNC_STEP_PROBE 9        /* after HEALTH, before INIT: ask what the server is (its release,
                                     its GPU count); replies of kind WSYNC_REPLY_TO_ADAPTER go to
                                     take_reply, which may refuse the server */
#define WSYNC_STEP_RESET 10       /* after PROBE, before INIT: clear what an earlier trainer may have
                                     left (an update begun, a group of this name). Best effort: every
                                     request is sent, a failure is logged, never fatal */
#define WSYNC_STEP_ABANDON 11     /* after a failure (or abort, or destroy) in the middle of an update:
                                     end the engine-side update so the server serves again. Best
                                     effort like RESET; update_index = buckets sent in the update */
/* Since plugin ABI 1.7; the core builds it only for an adapter whose table has `held`. */
#define WSYNC_STEP_CHECK 12       /* wsync_group_declare_update: the whole next update, before it is
                                     paused or begun, in names/dtypes/ndims/shapes (full shapes, in
                                     declaration order; bucket_bytes 0). The server checks it against
                                     its model without touching anything; answers of kind
                                     WSYNC_REPLY_TO_ADAPTER go to take_reply, which refuses the
                                     update by failing (WSYNC_ERR_INVALID_ARGUMENT, naming the
                                     tensors). An empty list: this server checks nothing */

typedef struct wsync_engine_step_t {
  uint32_t struct_size;
  int32_t step;                   /* WSYNC_STEP_* */
  uint32_t server_index;          /* 0-based, in the filtered server list */
  uint32_t server_gpus;           /* GPUs (receiver ranks) of this server */
  uint32_t rank_offset;           /* rank of its first GPU: 1 + GPUs of the servers before it */
  uint32_t world_size;            /* 1 + GPUs of all servers */
  const char* master_address;     /* the sender's store host (torch rendezvous / wsync receivers) */
  uint32_t master_port;           /* the sender's store port */
  uint32_t reserved0;
  const char* group_name;
  const char* retired_ptr0;       /* 1.1 carried a transport id here; since 1.2 always NULL: ask
                                     for transport properties with get_needs, read `properties` */
  /* UPDATE: this bucket's tensors in bucket order (whole tensors; HTTP adapters do not split);
   * CHECK (1.7): the declared update's tensors */
  uint64_t num_tensors;
  const char* const* names;
  const int32_t* dtypes;          /* WSYNC_DTYPE_* */
  const int32_t* ndims;
  const int64_t* shapes;          /* num_tensors x WSYNC_MAX_NDIM, row-major */
  uint64_t bucket_bytes;          /* payload bytes of this bucket */
  uint64_t update_index;          /* UPDATE: index of this bucket within the update, from 0 */
  uint64_t version;               /* FINALIZE: the version being committed */
  /* Since 1.2: the transport properties the adapter asked for in get_needs that the transport has
   * (key = property name, value = its text), at every step. */
  const wsync_option_t* properties;
  uint64_t num_properties;
} wsync_engine_step_t;

#define WSYNC_ENGINE_STEP_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_engine_step_t, num_properties)
#define WSYNC_ENGINE_STEP_INIT                                                                      \
  {(uint32_t)WSYNC_ENGINE_STEP_STRUCT_SIZE, 0, 0u, 0u, 0u, 0u, NULL, 0u, 0u, NULL, NULL, 0u, NULL, NULL, NULL, \
   NULL, 0u, 0u, 0u, NULL, 0u}

#define WSYNC_HTTP_GET 1
#define WSYNC_HTTP_POST 2

/* How the core judges a reply. Any non-2xx status, a connection failure or a timeout is always a
 * failure (after the bounded retries of an idempotent request), and so is a reply longer than
 * 1 MiB (16 MiB for WSYNC_REPLY_TO_ADAPTER). */
#define WSYNC_REPLY_STATUS 1  /* a 2xx status is success; the body is not read */
#define WSYNC_REPLY_SUCCESS_FIELD 2 /* also a JSON object whose "success" is true; its "message" is
                                       the engine's detail, quoted in errors */
#define WSYNC_REPLY_JSON 3    /* also a body that parses as JSON */
#define WSYNC_REPLY_TO_ADAPTER 4 /* since 1.3: any HTTP status is an answer (no answer at all, 401 and
                                    403 are failures as always): the status and body go to the
                                    adapter's take_reply, which judges them */

typedef struct wsync_http_request_t {
  uint32_t struct_size;
  int32_t method;      /* WSYNC_HTTP_* */
  const char* path;    /* "/route" with an optional "?query"; appended to the server's base URL */
  const char* body;    /* JSON text, or NULL for no body (still sent as Content-Type: application/json) */
  uint32_t idempotent; /* 1: the core may retry it (bounded, with back-off) on failure */
  int32_t reply;       /* WSYNC_REPLY_* */
} wsync_http_request_t;

#define WSYNC_HTTP_REQUEST_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_http_request_t, reply)
#define WSYNC_HTTP_REQUEST_INIT {(uint32_t)WSYNC_HTTP_REQUEST_STRUCT_SIZE, WSYNC_HTTP_POST, NULL, NULL, 0u, WSYNC_REPLY_STATUS}

typedef struct wsync_adapter_v1_t {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* name;
  const char* version;
  uint64_t caps; /* WSYNC_ADAPTER_CAP_* */

  wsync_status_t (*create)(const wsync_adapter_params_t* params, void** out);
  /* The bucket layout this engine protocol needs. */
  wsync_status_t (*get_layout)(void* self, wsync_layout_rule_t* out);
  void (*destroy)(void* self);

  /* ---- since plugin ABI 1.1 (read only when struct_size covers it) ---- */

  /* Required with CAP_HTTP. The requests of one step at one server, in sending order: *out points
   * to *num_out requests (0 is fine) owned by the adapter, valid until the next build_requests or
   * destroy. Must not do I/O. WSYNC_ERR_INVALID_ARGUMENT for a step it cannot express (naming it). */
  wsync_status_t (*build_requests)(void* self, const wsync_engine_step_t* step, const wsync_http_request_t** out,
                                   uint32_t* num_out);

  /* ---- since plugin ABI 1.2 (read only when struct_size covers it; optional) ---- */

  /* What the engine needs from the transport (hints and properties); `out` is the core's struct
   * (write only the fields its struct_size covers). Called once, after create. */
  wsync_status_t (*get_needs)(void* self, wsync_adapter_needs_t* out);
  /* As for transports: one line for wsync-info, static storage, no instance. */
  const char* (*runtime_info)(void);

  /* ---- since plugin ABI 1.3 (read only when struct_size covers it; optional) ---- */

  /* The answer to request `request_index` of `step` (the same step the requests were built for)
   * when its reply kind is WSYNC_REPLY_TO_ADAPTER: the HTTP status and the body (not
   * NUL-terminated; up to 16 MiB, untrusted). Called on the core's thread, once per such request,
   * server after server in order, after every server's requests of the step finished: never
   * concurrently, never during build_requests. WSYNC_OK to go on; any other status (after
   * set_error naming the server and the problem) fails the step and, at PROBE, the group's init.
   * Having it also tells the core this adapter knows the 1.3 steps. */
  wsync_status_t (*take_reply)(void* self, const wsync_engine_step_t* step, uint32_t request_index,
                               int32_t http_status, const char* body, uint64_t body_len);

  /* ---- since plugin ABI 1.7 (read only when struct_size covers it; optional) ---- */

  /* What server `server_index` holds after the ABANDON step's replies were taken (the core asks
   * once per server, after every ABANDON): WSYNC_HELD_ONE_VERSION (every parameter holds one
   * version: the update's failure touched nothing), WSYNC_HELD_MIX (some parameters hold the
   * failed update's values), or WSYNC_HELD_UNKNOWN. *words (may be left NULL): the server's own
   * words for it, owned by the adapter, valid until its next call. The core resumes generation
   * after a failure where the server holds one version (group option engine_resume_on_failure,
   * default auto). A RESUME step built after an ABANDON is that resume: the adapter may send what
   * ending the update still needs first. Having it also tells the core this adapter knows the
   * CHECK step. */
  int32_t (*held)(void* self, uint32_t server_index, const char** words);
} wsync_adapter_v1_t;

#define WSYNC_HELD_UNKNOWN 0
#define WSYNC_HELD_ONE_VERSION 1
#define WSYNC_HELD_MIX 2

#define WSYNC_ADAPTER_V1_0_SIZE WSYNC_STRUCT_SIZE(wsync_adapter_v1_t, destroy)
#define WSYNC_ADAPTER_V1_1_SIZE WSYNC_STRUCT_SIZE(wsync_adapter_v1_t, build_requests)
#define WSYNC_ADAPTER_V1_2_SIZE WSYNC_STRUCT_SIZE(wsync_adapter_v1_t, runtime_info)
#define WSYNC_ADAPTER_V1_3_SIZE WSYNC_STRUCT_SIZE(wsync_adapter_v1_t, take_reply)
#define WSYNC_ADAPTER_V1_7_SIZE WSYNC_STRUCT_SIZE(wsync_adapter_v1_t, held)

typedef const wsync_adapter_v1_t* (*wsync_adapter_entry_v1_fn)(const wsync_host_v1_t* host);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WSYNC_PLUGIN_H_ */
