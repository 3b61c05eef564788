/*
 * wsync.h — the public, stable C ABI of wsync.
 *
 * wsync moves freshly trained weights from an RL trainer (the "sender", rank 0 of a group)
 * into running inference engines (the "receivers", ranks 1..W-1).
 *
 * ABI rules (see docs/ABI.md for the full policy):
 *  - Status codes are pinned forever; a retired code keeps its number and name.
 *  - Every public struct starts with `uint32_t struct_size` and has a WSYNC_*_INIT macro and a
 *    WSYNC_*_STRUCT_SIZE constant (the size up to its last field, as PJRT does). The library
 *    reads min(struct_size, its own size) bytes and defaults the rest, so a caller built against
 *    an older header keeps working when fields are appended.
 *  - Zero means default (since 1.2): a config struct that is all zero but for struct_size and
 *    the fields the call cannot guess (marked "required") works, with the defaults written next
 *    to each field. A timeout_ms field of a config struct: 0 or negative = the default.
 *  - Arrays of structs (tensors, options) are stepped through by the struct_size of their
 *    first element, exactly (no rounding); every element of one array must carry the same
 *    struct_size. That holds both ways: for arrays passed in, and for the arrays the library fills
 *    (the tensors of a wsync_receiver_event_t carry the library's own struct_size, which may be
 *    larger than this header's). Every struct_size is a multiple of 8 (each struct is a sequence
 *    of 8-byte words); a reader refuses a smaller size than the fields it reads, or one that is
 *    not a multiple of 8.
 *  - Strings and option arrays passed in are copied during the call unless a comment says
 *    otherwise. Returned pointers state their lifetime next to the function.
 *  - Destroy functions accept NULL and never fail.
 *  - Every blocking call takes a timeout in milliseconds as an argument, with one rule (the
 *    same in every binding; see "Timeouts" below): WSYNC_TIMEOUT_DEFAULT (negative) is the
 *    group's or receiver's "timeout_ms" option, WSYNC_TIMEOUT_NO_WAIT (0) asks the call not to
 *    block, and there is no "wait forever".
 *  - Only wsync_* symbols are exported. This header needs nothing but <stddef.h>/<stdint.h>
 *    and compiles as C99 and C++.
 */
#ifndef WSYNC_H_
#define WSYNC_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define WSYNC_API
#else
#define WSYNC_API __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------------------
 * Versions
 * ------------------------------------------------------------------------------------------- */

/* ABI major: bumped only by a breaking change (the soname is libwsync.so.<major>).
 * ABI minor: bumped when functions, struct fields, status codes, dtypes or options are appended
 * (1.3: the group option engine_resume_on_failure; 1.4: the receiver option receive_mode,
 * wsync_receiver_state_t, wsync_receiver_get_state, wsync_receiver_touched_name and the
 * WSYNC_PLACED_* values; 1.6: wsync_group_declare_update and engine_resume_on_failure=auto). */
#define WSYNC_ABI_VERSION_MAJOR 1
#define WSYNC_ABI_VERSION_MINOR 6
#define WSYNC_ABI_VERSION ((WSYNC_ABI_VERSION_MAJOR << 16) | WSYNC_ABI_VERSION_MINOR)

/* ---------------------------------------------------------------------------------------------
 * Timeouts (the constants are new in the 0.7.0 header; their meanings hold since ABI 1.2)
 *
 * The timeout_ms argument of every blocking call means:
 *   WSYNC_TIMEOUT_DEFAULT (-1, or any negative)  the group's or receiver's "timeout_ms" option
 *                                                (60000 unless set)
 *   WSYNC_TIMEOUT_NO_WAIT (0)                    do not block. A call that can answer "not yet"
 *                                                does so at once with WSYNC_ERR_TIMEOUT
 *                                                (wsync_receiver_next, wsync_group_send_wait, the
 *                                                wait for room in the pipeline of
 *                                                wsync_group_send_start and _send_batch: a full
 *                                                pipeline starts nothing). A wait for a peer's
 *                                                answer cannot be skipped (a peer cannot answer in
 *                                                no time): there 0 is the default (each wait for a
 *                                                receiver inside send_batch, a started batch or
 *                                                wsync_group_finalize, and wsync_group_init)
 *   positive                                     at most that many milliseconds (on the sender:
 *                                                for each wait for a receiver, not the whole call)
 * A timeout_ms field of a config struct is 0 or negative for the default (zero means default).
 * WSYNC_ERR_TIMEOUT from a call on a group only ever means "not yet" or "nothing was started":
 * a receiver that did not answer in time broke the update and is WSYNC_ERR_PEER_FAILED, naming
 * it and the time (since 1.4; before, send_batch and finalize returned WSYNC_ERR_TIMEOUT).
 * ------------------------------------------------------------------------------------------- */
#define WSYNC_TIMEOUT_DEFAULT (-1)
#define WSYNC_TIMEOUT_NO_WAIT 0

/* Since 1.2. The size of `type` up to and including `field`: the struct_size a caller built
 * against the header whose struct ended at `field` passes. Each public struct has a
 * WSYNC_<NAME>_STRUCT_SIZE built from its current last field; a test pins it to sizeof. */
#define WSYNC_STRUCT_SIZE(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* (major << 16) | minor of the library actually loaded. Compare its major with
 * WSYNC_ABI_VERSION_MAJOR before use. Thread-safe; never fails. */
WSYNC_API uint32_t wsync_abi_version(void);

/* The library's release, e.g. "0.3.0". Static storage; thread-safe. */
WSYNC_API const char* wsync_version_string(void);

/* ---------------------------------------------------------------------------------------------
 * Status codes and errors
 * ------------------------------------------------------------------------------------------- */

typedef int32_t wsync_status_t;

/* Pinned forever. New codes are appended; retired codes keep their number. */
#define WSYNC_OK 0
#define WSYNC_ERR_INVALID_ARGUMENT 1 /* a NULL, a bad option value, a wrong struct_size */
#define WSYNC_ERR_NOT_FOUND 2        /* a plugin file, a symbol, a key, a tensor name */
#define WSYNC_ERR_VERSION_MISMATCH 3 /* a plugin or peer speaks another ABI/protocol version */
#define WSYNC_ERR_UNSUPPORTED 4      /* the plugin or transport cannot do what was asked */
#define WSYNC_ERR_TIMEOUT 5          /* a deadline passed: a peer did not answer in time */
#define WSYNC_ERR_ABORTED 6          /* wsync_group_abort / the peer aborted */
#define WSYNC_ERR_PROTOCOL 7         /* malformed or corrupted data from the wire */
#define WSYNC_ERR_IO 8               /* a socket, file or transport operation failed */
#define WSYNC_ERR_PEER_FAILED 9      /* a peer process died or closed its connection */
#define WSYNC_ERR_OUT_OF_MEMORY 10   /* an allocation failed */
#define WSYNC_ERR_INVALID_STATE 11   /* the call is not allowed now (e.g. commit before data) */
#define WSYNC_ERR_ENGINE 12          /* the inference engine refused the request */
#define WSYNC_ERR_INTERNAL 13        /* a bug in wsync or a plugin; please report it */
#define WSYNC_ERR_NO_DEVICE 14       /* no CUDA device where one is needed */
#define WSYNC_ERR_REJECTED 15        /* the group refused a receiver (wrong group, rank) */
#define WSYNC_STATUS_COUNT 16        /* one past the largest code; grows with new codes */

/* "WSYNC_OK", "WSYNC_ERR_TIMEOUT", ... ; "WSYNC_ERR_UNKNOWN" for a value that is not a code.
 * Static storage; thread-safe; never NULL. */
WSYNC_API const char* wsync_status_name(wsync_status_t status);

/* A one-line, human-readable description of the status code (not of the last failure).
 * Static storage; never NULL. */
WSYNC_API const char* wsync_status_doc(wsync_status_t status);

/* Detail of the last failing wsync call made on the calling thread: what failed, naming the
 * key, tensor, file, rank or URL involved. "" when the last call on this thread succeeded.
 * The pointer stays valid until the next wsync call on the same thread. Never NULL. */
WSYNC_API const char* wsync_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Logging
 * ------------------------------------------------------------------------------------------- */

#define WSYNC_LOG_ERROR 1
#define WSYNC_LOG_WARN 2
#define WSYNC_LOG_INFO 3
#define WSYNC_LOG_DEBUG 4
#define WSYNC_LOG_TRACE 5

/* Receives one already formatted message (no trailing newline). May be called from any
 * wsync thread, concurrently; the message pointer is valid only during the call. */
typedef void (*wsync_log_fn)(void* user_data, int32_t level, const char* message);

/* Route all library and plugin log lines with level <= max_level to `fn`. fn == NULL restores
 * the default sink, stderr: with max_level WSYNC_LOG_ERROR..WSYNC_LOG_TRACE it prints the lines
 * up to that level; with 0 (or any other value) the environment variable WSYNC_LOG_LEVEL
 * (error|warn|info|debug|trace or 1..5; default warn) says which (before 1.4, max_level was
 * ignored with fn == NULL). Thread-safe; takes effect at once. Since release 0.5.0 (ABI 1.3)
 * it returns once the calls of the previous callback that were in progress returned (it
 * waits at most 2 s, and not at all when none is), so what that callback uses may be freed then. */
WSYNC_API void wsync_set_log_callback(wsync_log_fn fn, void* user_data, int32_t max_level);

/* ---------------------------------------------------------------------------------------------
 * Options: open-ended string knobs, validated by the call that takes them
 * ------------------------------------------------------------------------------------------- */

typedef struct wsync_option_t {
  uint32_t struct_size;
  uint32_t reserved0;
  const char* key;   /* e.g. "bucket_bytes" */
  const char* value; /* e.g. "536870912" */
} wsync_option_t;

#define WSYNC_OPTION_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_option_t, value)
#define WSYNC_OPTION(k, v) {(uint32_t)WSYNC_OPTION_STRUCT_SIZE, 0u, (k), (v)}

/* Group options (see docs/ABI.md for the full table):
 *   bucket_bytes      bucket size in bytes (default 536870912 = 512 MiB; 4096..2^40)
 *   staging_buckets   staging buffers per group, >= 2 (default 2); also how many batches may be
 *                     in flight at once (wsync_group_send_start)
 *   timeout_ms        default timeout of blocking calls (default 60000)
 *   verify_payload    checksum every bucket's bytes end to end (since 1.4 the default is "1"
 *                     on transports that move host memory, "0" on CUDA transports)
 *   store_addr_file   path the sender writes "host:port" of its bound store to (for port 0),
 *                     atomically: the file is whole or absent, a failure is WSYNC_ERR_IO
 *   secret            since 1.4: the group secret every member proves (16..4096 bytes); else
 *   secret_file       a file holding it, else the environment WSYNC_GROUP_SECRET or
 *                     WSYNC_GROUP_SECRET_FILE; with none, the sender generates one (and writes
 *                     it to secret_file when that file does not exist). See docs/SECURITY.md
 *   torch_clients     "1": unmodified torch workers may use the store without the secret, on
 *                     torch's keys only (default "0"; docs/SECURITY.md says what it exposes)
 *   num_senders       since 1.5: the group's senders, 1..4096 (docs/ABI.md "Many senders");
 *                     given (1 too), the senders plan every batch and send each receiver the
 *                     boxes it registered
 *   sender_rank       since 1.5: this sender's rank, 0..num_senders-1 (default 0)
 *   sender0_store     since 1.5, senders 1..num_senders-1 only: "host:port" of sender 0's store
 *   membership        since 1.5: fixed (default: any receiver's failure breaks the group) or
 *                     elastic (a receiver that fails is removed, named in a member event, and the
 *                     group stays usable; docs/ABI.md "Membership")
 *   commit_quorum     since 1.5, elastic only: 1..num_receivers; an update during which receivers
 *                     were removed still commits on the others when at least this many of them
 *                     hold every byte (default: all of them, i.e. such an update fails)
 *   init_receivers    since 1.5, elastic only: 1..num_receivers; init returns once this many
 *                     receivers joined (default: all); the others, and any receiver that left,
 *                     join (again, with their rank) between updates
 * Unknown keys are refused with WSYNC_ERR_INVALID_ARGUMENT naming the key; keys starting with
 * "transport." or "adapter." are passed to that plugin, which validates them. */

/* ---------------------------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------------------------- */

/* Element types. Pinned forever. */
#define WSYNC_DTYPE_INVALID 0
#define WSYNC_DTYPE_BOOL 1
#define WSYNC_DTYPE_INT8 2
#define WSYNC_DTYPE_INT16 3
#define WSYNC_DTYPE_INT32 4
#define WSYNC_DTYPE_INT64 5
#define WSYNC_DTYPE_UINT8 6
#define WSYNC_DTYPE_FLOAT16 7
#define WSYNC_DTYPE_BFLOAT16 8
#define WSYNC_DTYPE_FLOAT32 9
#define WSYNC_DTYPE_FLOAT64 10
#define WSYNC_DTYPE_FLOAT8_E4M3 11 /* e4m3fn */
#define WSYNC_DTYPE_FLOAT8_E5M2 12
#define WSYNC_DTYPE_COUNT 13

/* The one dtype table (since the 0.7.0 header): X(code, torch's name, bytes per element), a row
 * per valid code in order. wsync_dtype_name and wsync_dtype_size answer from it, the bundled
 * plugins build their tables from it, and each binding's tests compare its own against the
 * library's answers. A new dtype is a new row here and nowhere else in C. */
#define WSYNC_DTYPE_TABLE(X)                      \
  X(WSYNC_DTYPE_BOOL, "bool", 1)                  \
  X(WSYNC_DTYPE_INT8, "int8", 1)                  \
  X(WSYNC_DTYPE_INT16, "int16", 2)                \
  X(WSYNC_DTYPE_INT32, "int32", 4)                \
  X(WSYNC_DTYPE_INT64, "int64", 8)                \
  X(WSYNC_DTYPE_UINT8, "uint8", 1)                \
  X(WSYNC_DTYPE_FLOAT16, "float16", 2)            \
  X(WSYNC_DTYPE_BFLOAT16, "bfloat16", 2)          \
  X(WSYNC_DTYPE_FLOAT32, "float32", 4)            \
  X(WSYNC_DTYPE_FLOAT64, "float64", 8)            \
  X(WSYNC_DTYPE_FLOAT8_E4M3, "float8_e4m3fn", 1)  \
  X(WSYNC_DTYPE_FLOAT8_E5M2, "float8_e5m2", 1)

/* Bytes per element of a dtype, 0 for an unknown one. */
WSYNC_API uint32_t wsync_dtype_size(int32_t dtype);
/* torch's name of a dtype ("bfloat16", "float32", "float8_e4m3fn", ...), "invalid" if unknown.
 * Static storage. */
WSYNC_API const char* wsync_dtype_name(int32_t dtype);

/* Device types: the DLPack codes. */
#define WSYNC_DEVICE_CPU 1
#define WSYNC_DEVICE_CUDA 2

#define WSYNC_MAX_NDIM 8

/* A flat tensor descriptor: a dense, C-contiguous tensor. `nbytes` must equal
 * product(shape) * wsync_dtype_size(dtype); a tensor with a 0 in its shape is empty and legal.
 * Ownership: `name` and `data` are borrowed from the caller for the duration of the call that
 * takes the descriptor, unless that call says otherwise. */
typedef struct wsync_tensor_t {
  uint32_t struct_size;
  int32_t dtype;        /* required: WSYNC_DTYPE_* */
  const char* name;     /* required: UTF-8, 1..1024 bytes, no NUL inside, unique within one update */
  void* data;           /* required unless nbytes == 0 */
  uint64_t nbytes;      /* product(shape) * wsync_dtype_size(dtype) */
  int32_t ndim;         /* 0..WSYNC_MAX_NDIM; 0 is a scalar */
  int32_t device_type;  /* WSYNC_DEVICE_*; 0 means CPU */
  int32_t device_index; /* CUDA ordinal in the calling process; ignored for CPU */
  int32_t reserved0;
  int64_t shape[WSYNC_MAX_NDIM];
  /* Since 1.5 (many senders, docs/ABI.md "Many senders"). A caller built against 1.4 or older
   * passes a smaller struct_size and gets flags 0: a whole tensor. */
  uint32_t flags;       /* WSYNC_TENSOR_SLICE, WSYNC_TENSOR_REPLICA */
  uint32_t reserved1;
  /* With WSYNC_TENSOR_SLICE: `shape` is the slice's extent (data holds its elements, dense, in
   * row-major order), full_shape the whole tensor's shape and box_offset where the slice starts
   * in it, per dimension. Without it both are ignored. */
  int64_t full_shape[WSYNC_MAX_NDIM];
  int64_t box_offset[WSYNC_MAX_NDIM];
} wsync_tensor_t;

/* wsync_tensor_t.flags (since 1.5) */
#define WSYNC_TENSOR_SLICE 1u   /* the descriptor holds a box of the full tensor (above) */
#define WSYNC_TENSOR_REPLICA 2u /* a sender: other senders hold the same box (data parallel); it
                                   moves once, from the lowest sender rank that holds it */

#define WSYNC_TENSOR_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_tensor_t, box_offset)
#define WSYNC_TENSOR_INIT \
  {(uint32_t)WSYNC_TENSOR_STRUCT_SIZE, WSYNC_DTYPE_INVALID, NULL, NULL, 0u, 0, WSYNC_DEVICE_CPU, 0, 0, {0}, 0u, 0u, \
   {0}, {0}}

/* ---------------------------------------------------------------------------------------------
 * Sender half: the trainer
 * ------------------------------------------------------------------------------------------- */

typedef struct wsync_group wsync_group_t; /* opaque */

typedef struct wsync_group_config_t {
  uint32_t struct_size;
  uint32_t num_receivers;        /* required: receivers expected to join; world size = 1 +
                                    num_receivers. With an HTTP engine adapter (since 1.1): 0 = the
                                    GPUs of the healthy servers in option "engines" */
  const char* group_name;        /* NULL = "wsync"; receivers must name the same group */
  const char* store_addr;        /* "host:port" to host the rendezvous store on; port 0 picks a
                                    free port (see the store_addr_file option and
                                    wsync_group_store_addr); NULL = "127.0.0.1:0" */
  const char* transport;         /* plugin name ("tcp", "ucx") or absolute path to the .so; NULL or
                                    "auto" = the default: ucx when store_addr is a loopback address,
                                    tcp across hosts without RDMA (docs/ABI.md; until 0.7: "ucx") */
  const char* adapter;           /* plugin name ("native") or absolute path; NULL = "native" */
  const wsync_option_t* options; /* may be NULL when num_options == 0 */
  uint64_t num_options;
  int64_t timeout_ms;            /* how long init waits for every receiver; 0 or < 0 = the
                                    option timeout_ms (60000 unless set). Until 1.1, 0 meant "do
                                    not wait" */
} wsync_group_config_t;

#define WSYNC_GROUP_CONFIG_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_group_config_t, timeout_ms)
#define WSYNC_GROUP_CONFIG_INIT \
  {(uint32_t)WSYNC_GROUP_CONFIG_STRUCT_SIZE, 0u, NULL, NULL, NULL, NULL, NULL, 0u, -1}

/* Create a group: load the transport and adapter plugins, host the rendezvous store, wait
 * until all `num_receivers` receivers joined (each rank 1..num_receivers exactly once; with
 * membership=elastic and option init_receivers=K, until K of them joined: the others join between
 * updates), and bring the transport up. Blocks up to config->timeout_ms. On success *out owns the group
 * (free with wsync_group_destroy); on failure *out is NULL and wsync_last_error() names the
 * receiver, option or plugin at fault. Call from one thread; the group is not thread-safe
 * except for wsync_group_abort. */
WSYNC_API wsync_status_t wsync_group_init(const wsync_group_config_t* config, wsync_group_t** out);

/* "host:port" the group's store listens on (useful with port 0). Lives as long as the group. */
WSYNC_API const char* wsync_group_store_addr(const wsync_group_t* group);

/* Send one batch of tensors of the current update to every receiver. The tensors are planned
 * into buckets and packed into staging or sent on their first hop before the call returns (since
 * 1.5; before, acknowledged by every receiver): wsync_group_finalize waits for their delivery.
 * Tensor memory is borrowed only during the call. Names must be unique within an update.
 * A failure names the receiver (rank) or tensor at fault; after a failure the update is
 * broken: the next successful finalize is impossible, destroy the group. Every later send_start,
 * send_batch and finalize returns that failure's status and reason (since 1.4; before,
 * WSYNC_ERR_INVALID_STATE). A receiver that did not answer in time is WSYNC_ERR_PEER_FAILED,
 * here and later, as from send_wait (since 1.4; before, WSYNC_ERR_TIMEOUT here).
 * timeout_ms bounds each wait for a receiver, not the whole call (WSYNC_TIMEOUT_NO_WAIT or
 * WSYNC_TIMEOUT_DEFAULT: the group's timeout_ms option; a receiver cannot be waited for in no
 * time), and, as in send_start, the wait for room when staging_buckets batches are in flight
 * (WSYNC_TIMEOUT_NO_WAIT: none; WSYNC_ERR_TIMEOUT then, nothing started).
 * Since 1.2 this is wsync_group_send_start followed by waiting for that batch; while it waits
 * the calling thread sleeps (no core is spun). */
WSYNC_API wsync_status_t wsync_group_send_batch(wsync_group_t* group, const wsync_tensor_t* tensors,
                                                uint64_t num_tensors, int64_t timeout_ms);

/* Since 1.2: the asynchronous send. Start moving one batch and return without waiting for it, so
 * the caller can produce the next batch (an FSDP all-gather, a TP gather) while this one moves.
 * The group's own thread plans, packs and moves the batches in the order they were started.
 *
 * Checks first, and on any refusal starts nothing and leaves the group usable: the descriptors,
 * shapes, names (unique within the update, counting batches still in flight), devices.
 * *ticket (required) gets the batch's number: 1 for the first batch of the group, then one more
 * per started batch.
 *
 * Ownership: the descriptors and names are copied during the call; the tensor MEMORY is borrowed
 * until wsync_group_send_wait for this ticket (or a later one) returns anything but
 * WSYNC_ERR_TIMEOUT, or until wsync_group_destroy returns. Do not free or overwrite it before.
 * For CUDA tensors an event is recorded on the stream set with wsync_group_set_cuda_stream during
 * this call: work queued on that stream before the call is seen, work queued after it is not.
 *
 * Depth: at most the option staging_buckets batches (default 2) are borrowed (started, tensors
 * not yet released). When that many are, the call first waits, up to timeout_ms, for the oldest
 * to be released; if none was it
 * returns WSYNC_ERR_TIMEOUT and starts nothing. A batch that failed stops the pipeline: the
 * failure is reported by the wait (and by this call, for batches started after it).
 *
 * timeout_ms: for the depth wait above (0: do not wait for room; negative: the group's
 * timeout_ms option), and then for each wait of this batch for a receiver (0 or negative: the
 * group's timeout_ms option). */
WSYNC_API wsync_status_t wsync_group_send_start(wsync_group_t* group, const wsync_tensor_t* tensors,
                                                uint64_t num_tensors, int64_t timeout_ms, uint64_t* ticket);

/* Since 1.2: wait up to timeout_ms for batch `ticket` to be released: wsync no longer reads its
 * tensors (or those of any batch started before it): each bucket is packed into host staging or
 * sent on its first hop (since 1.5; before, acknowledged by every receiver). Delivery to every
 * receiver is what wsync_group_finalize waits for.
 *   WSYNC_OK              released; wsync no longer reads the batch's tensors
 *   WSYNC_ERR_TIMEOUT     not yet (timeout_ms 0: never blocks, a test); still in flight and
 *                         borrowed; wait again
 *   any other status      the batch failed, or an earlier one did, or the group was aborted
 *                         (WSYNC_ERR_ABORTED): the group is broken (see send_batch). wsync no
 *                         longer reads the tensors of this or any earlier batch. Every later
 *                         wait returns the same status and message. A receiver that did not
 *                         answer in time is reported as WSYNC_ERR_PEER_FAILED here (the
 *                         message names it and the time): TIMEOUT from this call only ever
 *                         means "not yet".
 * A ticket never handed out: WSYNC_ERR_INVALID_ARGUMENT. Waiting again for a released ticket
 * returns WSYNC_OK at once. timeout_ms < 0 = the group's timeout_ms option.
 * Threading: like every call on a group but abort, from one thread at a time (any thread).
 * wsync_group_abort from another thread makes a wait in progress return WSYNC_ERR_ABORTED soon. */
WSYNC_API wsync_status_t wsync_group_send_wait(wsync_group_t* group, uint64_t ticket, int64_t timeout_ms);

/* Since 1.1. The cudaStream_t (passed as void*) that produces the tensors of the following
 * send_batch and send_start calls; NULL = the legacy default stream (the initial value). Before it reads a CUDA
 * tensor, send_batch records an event on this stream and makes its own copy stream wait for it:
 * work queued on `stream` before the call is seen, nothing is synchronised on the host and the
 * device is never synchronised. When send_batch returns, wsync no longer reads the tensors. */
WSYNC_API wsync_status_t wsync_group_set_cuda_stream(wsync_group_t* group, void* stream);

/* Since 1.6: declare the whole next update before its first batch: every tensor it will send,
 * whole (name, dtype, and the full tensor's shape: `full_shape` for a WSYNC_TENSOR_SLICE
 * descriptor, else `shape`; data and nbytes are not read and may be NULL/0). Returns at once:
 *   WSYNC_OK                   declared
 *   WSYNC_ERR_INVALID_ARGUMENT a bad descriptor or a name twice (nothing declared)
 *   WSYNC_ERR_INVALID_STATE    a batch of this update was already started (declare before the
 *                              first send_batch/send_start of the update); a broken group
 *                              returns its failure's status
 * HTTP engines whose adapter checks updates (plugin ABI 1.7: vLLM with backend=wsync) check the
 * declaration against the served model when the update opens, before anything is paused, begun,
 * sent or loaded: a refusal fails the update's first batch (WSYNC_ERR_INVALID_ARGUMENT quoting
 * the engine: the tensors, their shapes and dtypes; reported by that batch's wait, a later send or
 * the finalize, as any batch's failure) with every engine untouched and serving, and the group
 * is broken as after any failure (create a new one). Many senders: sender 0 (which drives the
 * engines) declares the whole update, every tensor whole; another sender may declare too, which
 * only checks its own batches against its declaration. Once declared, the update's
 * batches may only send declared tensors with the declared dtype and full shape (anything else is
 * refused before it moves, WSYNC_ERR_INVALID_ARGUMENT, the group usable), and with one sender
 * (num_senders=1) wsync_group_finalize refuses, naming them, while declared tensors were not sent
 * (the group usable: send them, then finalize). The declaration ends with the update. Declaring
 * is optional; without it each engine checks each bucket as it comes, and a bucket refused late
 * can leave earlier ones loaded (docs/VLLM.md, "When an update fails"). Same threading rules as
 * send_batch. */
WSYNC_API wsync_status_t wsync_group_declare_update(wsync_group_t* group, const wsync_tensor_t* tensors,
                                                    uint64_t num_tensors);

/* Close the current update as weight version `version` (must be greater than the last
 * committed one): every receiver is told, commits, and confirms; returns only when all did
 * (membership=elastic: all those still in the group; see docs/ABI.md "Membership").
 * Batches still in flight are delivered first (a failed one fails the finalize). The next
 * send_batch starts a new update. timeout_ms bounds each wait for a receiver (0 or negative:
 * the group's timeout_ms option). A receiver that did not commit in time is
 * WSYNC_ERR_PEER_FAILED naming it (since 1.4; before, WSYNC_ERR_TIMEOUT). */
WSYNC_API wsync_status_t wsync_group_finalize(wsync_group_t* group, uint64_t version,
                                              int64_t timeout_ms);

/* Make any call in progress on the group return WSYNC_ERR_ABORTED soon (within ~100 ms), and
 * every later send_start, send_batch and finalize, and every wait for a batch not released
 * before the abort (get_stats, and waits for batches delivered before it, still answer).
 * Receivers in the middle of an update get WSYNC_EVENT_ABORTED (the update never commits);
 * between updates they are told nothing until wsync_group_destroy closes the group
 * (WSYNC_EVENT_CLOSED). Safe from any thread (it sets flags and wakes the group's thread) until
 * wsync_group_destroy starts; idempotent. NULL is ignored. */
WSYNC_API void wsync_group_abort(wsync_group_t* group);

/* Counters of a group, for logs and benchmarks. */
typedef struct wsync_group_stats_t {
  uint32_t struct_size;
  uint32_t num_receivers;
  uint64_t committed_version; /* 0 before the first finalize */
  uint64_t updates;           /* finalized updates (membership=elastic: also those that failed
                                 because receivers left; the group went on) */
  uint64_t batches;           /* delivered batches (send_batch and send_start), over all updates */
  uint64_t buckets;           /* buckets moved, over all updates */
  uint64_t tensors;           /* tensors sent (a split tensor counts once) */
  uint64_t bytes;             /* tensor bytes sent per receiver */
  uint64_t staging_bytes;     /* host staging memory held by the group */
  double send_seconds;        /* wall time batches were in flight (from a start to its delivery;
                                 overlapping batches count once) */
  uint64_t device_staging_bytes; /* since 1.1: CUDA staging memory held by the group */
  uint64_t plans_computed;       /* since 1.5, many senders: ownership plans this sender computed; a
                                    batch whose senders' records repeat the previous batch's reuses
                                    its plan and does not count */
  uint32_t members;              /* since 1.5: the receivers in the group now (num_receivers less
                                    those removed and those not joined yet: option
                                    membership=elastic) */
  uint32_t members_left;         /* since 1.5: receivers removed since init */
} wsync_group_stats_t;

#define WSYNC_GROUP_STATS_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_group_stats_t, members_left)
#define WSYNC_GROUP_STATS_INIT {(uint32_t)WSYNC_GROUP_STATS_STRUCT_SIZE, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0.0, 0u, 0u, 0u, 0u}

/* Fill *stats (honouring stats->struct_size). Since 1.2 safe while batches are in flight (the
 * counters then include what has been delivered so far). */
WSYNC_API wsync_status_t wsync_group_get_stats(const wsync_group_t* group, wsync_group_stats_t* stats);

/* Since 1.5: membership (option membership=elastic; docs/ABI.md "Membership"). */
#define WSYNC_MEMBER_JOINED 1 /* a receiver joined between updates (elastic; not those of init) */
#define WSYNC_MEMBER_LEFT 2   /* a receiver was removed from the group */

typedef struct wsync_member_event_t {
  uint32_t struct_size;
  int32_t kind;        /* WSYNC_MEMBER_LEFT or WSYNC_MEMBER_JOINED */
  uint32_t rank;       /* the receiver's rank */
  int32_t status;      /* LEFT: what removed it: WSYNC_ERR_PEER_FAILED (its process or connection
                          ended), WSYNC_ERR_TIMEOUT (it did not answer within timeout_ms), or the
                          status of its refusal (WSYNC_ERR_PROTOCOL, ...); JOINED: WSYNC_OK */
  uint64_t update;     /* LEFT: the number of the update it was removed in (1 for the first update;
                          wsync_group_stats_t.updates + 1 while that update ran); JOINED: the
                          first update it takes part in */
  const char* reason;  /* what happened, naming the receiver (rank, address); owned by the group,
                          valid until the next wsync_group_next_member_event or destroy */
} wsync_member_event_t;

#define WSYNC_MEMBER_EVENT_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_member_event_t, reason)
#define WSYNC_MEMBER_EVENT_INIT {(uint32_t)WSYNC_MEMBER_EVENT_STRUCT_SIZE, 0, 0u, 0, 0u, NULL}

/* The oldest member event not yet taken: WSYNC_OK and *event filled (honouring struct_size), or
 * WSYNC_ERR_NOT_FOUND when none is new. Never blocks; safe while batches are in flight (the
 * pipeline adds events as it removes receivers). Like other calls, one thread at a time. */
WSYNC_API wsync_status_t wsync_group_next_member_event(wsync_group_t* group, wsync_member_event_t* event);

/* The ranks of the receivers in the group now, ascending: up to `capacity` are written to `ranks`
 * (NULL allowed when capacity is 0) and *count (required) gets how many there are. Never blocks. */
WSYNC_API wsync_status_t wsync_group_members(const wsync_group_t* group, uint32_t* ranks, uint64_t capacity,
                                             uint64_t* count);

/* Tear the group down: receivers are told the group closed, the store stops, plugins are
 * unloaded. Batches still in flight are abandoned (receivers are told) and their tensors are no
 * longer read once this returns. Accepts NULL; never fails; must not race with any other call on
 * the group, wsync_group_abort included: a thread that may abort the group must be done with it
 * (joined) before destroy starts. */
WSYNC_API void wsync_group_destroy(wsync_group_t* group);

/* ---------------------------------------------------------------------------------------------
 * Receiver half: one engine worker
 * ------------------------------------------------------------------------------------------- */

typedef struct wsync_receiver wsync_receiver_t; /* opaque */

typedef struct wsync_receiver_config_t {
  uint32_t struct_size;
  uint32_t rank;                 /* 1..num_receivers of the group; since 1.5, 0 asks a group with
                                    membership=elastic to assign the lowest free rank (read it back
                                    with wsync_receiver_get_state) */
  const char* store_addr;        /* required: the sender's store, "host:port" */
  const char* group_name;        /* NULL = "wsync"; must equal the sender's */
  const char* transport;         /* NULL = the one the sender announces; else a name or path */
  const wsync_option_t* options; /* receiver options (below); may be NULL */
  uint64_t num_options;
  int64_t timeout_ms;            /* how long init waits for the store and the sender; 0 or < 0 =
                                    the option timeout_ms (60000 unless set). Until 1.1, 0 meant
                                    "do not wait" */
} wsync_receiver_config_t;

#define WSYNC_RECEIVER_CONFIG_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_receiver_config_t, timeout_ms)
#define WSYNC_RECEIVER_CONFIG_INIT \
  {(uint32_t)WSYNC_RECEIVER_CONFIG_STRUCT_SIZE, 0u, NULL, NULL, NULL, NULL, 0u, -1}

/* Receiver options (see docs/ABI.md):
 *   timeout_ms      default timeout of the receiver's waits (default 60000)
 *   device          the CUDA ordinal the receiver works on when its transport moves CUDA memory
 *   receive_mode    "in_place" (the default) or "staged" (since 1.4). in_place: the bytes of a
 *                   registered tensor are written straight into its registered buffer as they
 *                   arrive; a failed update can leave registered buffers partly written (see
 *                   wsync_receiver_get_state). staged: they land in wsync-owned staging (host or
 *                   CUDA memory, like the registered buffers), are checksummed there when the
 *                   sender asks for it, and are copied into the registered buffers only by
 *                   wsync_receiver_commit: until then, and through any failure, the registered
 *                   buffers keep their bytes. Costs one staging copy of every registered tensor
 *                   the updates carry (kept for reuse; reported as staged_bytes).
 *   lane            since 1.5: 0..65535 (default 0). Many senders with relays: receivers that
 *                   take the same boxes (the same TP rank of every replica) give the same lane;
 *                   each lane is routed on its own and relays stay in it (docs/ABI.md "Lanes")
 *   rejoin          since 1.5: 0 (default) or 1. 1: once the sender is gone (a trainer killed
 *                   or ended; many senders: one of them lost or closed), wsync_receiver_next
 *                   joins the restarted trainer at the same store_addr (sender 0's) with the same
 *                   rank, keeping registered buffers and the committed version; until it is up it
 *                   returns WSYNC_ERR_TIMEOUT within its timeout (a join a sender answered is seen
 *                   through within the option timeout_ms: docs/ABI.md "A trainer that restarts")
 *   secret, secret_file  the group secret (else the environment: WSYNC_GROUP_SECRET or
 *                   WSYNC_GROUP_SECRET_FILE); see docs/SECURITY.md
 *   transport.<key> overrides the value the sender announced for that transport option
 * Unknown keys are refused with WSYNC_ERR_INVALID_ARGUMENT naming the key. */

/* Join a group: connect to the store (retrying until timeout), check the group name and rank
 * with the sender (a mismatch returns WSYNC_ERR_REJECTED with the reason), and bring the
 * transport up. On success *out owns the receiver (free with wsync_receiver_destroy).
 * A receiver is used from one thread at a time. */
WSYNC_API wsync_status_t wsync_receiver_init(const wsync_receiver_config_t* config,
                                             wsync_receiver_t** out);

/* Register parameter buffers by name. When a later bucket carries a tensor of a registered
 * name, its bytes are written straight into that buffer (no second copy; in receive_mode staged:
 * into staging, copied into the buffer at wsync_receiver_commit) and the tensor is reported as
 * placed. dtype, shape and nbytes of the incoming tensor must equal the registration, else the
 * bucket is refused with WSYNC_ERR_PROTOCOL naming the tensor. Names must be valid UTF-8 of 1..1024
 * bytes without NUL or control characters (since 1.4 refused with WSYNC_ERR_INVALID_ARGUMENT
 * otherwise); the call registers all buffers or none.
 * The buffers are borrowed until wsync_receiver_destroy or re-registration of the same name;
 * the names are copied. A name whose staged bytes wait for commit cannot be registered again
 * (WSYNC_ERR_INVALID_STATE) until that commit, or the update's failure, is over.
 * Note: in receive_mode in_place, writes are not transactional — a failed update can leave
 * registered buffers partly written (the version is then not committed); wsync_receiver_get_state
 * says so (WSYNC_BUFFERS_MIXED) and wsync_receiver_touched_name names them.
 * Since 1.5, a buffer with WSYNC_TENSOR_SLICE (shape: the slice's extent; full_shape, box_offset)
 * holds that slice only, and only its bytes are sent to this receiver, when the senders plan
 * (group option num_senders); otherwise WSYNC_ERR_UNSUPPORTED. See docs/ABI.md "Many senders".
 * When the senders plan they wait, at each batch, for every receiver's needs: a receiver says them
 * here, or at its first wsync_receiver_next. One that first calls next only once an update began
 * (an engine answering the update's HTTP request) calls this with no buffers (num_buffers 0)
 * after init: every tensor it has not registered as a slice comes whole. */
WSYNC_API wsync_status_t wsync_receiver_register(wsync_receiver_t* rx, const wsync_tensor_t* buffers,
                                                 uint64_t num_buffers);

/* What wsync_receiver_next returned. */
#define WSYNC_EVENT_NONE 0
#define WSYNC_EVENT_BUCKET 1 /* tensors arrived: see tensors / placed */
#define WSYNC_EVENT_COMMIT 2 /* the sender finalized `version`: apply, then wsync_receiver_commit */
#define WSYNC_EVENT_CLOSED 3 /* the sender destroyed the group; destroy the receiver */
#define WSYNC_EVENT_ABORTED 4 /* the sender aborted the current update: it never commits (staged
                                 or views: the previous weights stand; in place: see
                                 wsync_receiver_get_state) */

typedef struct wsync_receiver_event_t {
  uint32_t struct_size;
  int32_t kind;                   /* WSYNC_EVENT_* */
  uint64_t version;               /* for COMMIT: the version to commit */
  uint64_t bucket_index;          /* for BUCKET: index within the update, from 0 */
  uint64_t num_tensors;           /* for BUCKET: entries in `tensors` */
  const wsync_tensor_t* tensors;  /* for BUCKET: complete tensors of this event. Views into
                                     wsync memory, or the registered buffers for placed ones.
                                     Valid until the next wsync_receiver_next / destroy. */
  const uint8_t* placed;          /* for BUCKET: WSYNC_PLACED_* of tensors[i]: 0 a view, 1 written
                                     into its registered buffer, 2 staged for it (receive_mode
                                     staged; tensors[i].data is the registered buffer, which gets
                                     the bytes at wsync_receiver_commit). Test it as != 0 for "the
                                     registered buffer is (or will be) updated" */
  uint64_t bytes;                 /* for BUCKET: payload bytes of the bucket */
} wsync_receiver_event_t;

#define WSYNC_RECEIVER_EVENT_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_receiver_event_t, bytes)
#define WSYNC_RECEIVER_EVENT_INIT \
  {(uint32_t)WSYNC_RECEIVER_EVENT_STRUCT_SIZE, WSYNC_EVENT_NONE, 0u, 0u, 0u, NULL, NULL, 0u}

/* The values of wsync_receiver_event_t::placed (the names since 1.4; 2 is new in 1.4). */
#define WSYNC_PLACED_VIEW 0     /* a view into wsync memory, valid until the next event */
#define WSYNC_PLACED_IN_PLACE 1 /* written into its registered buffer */
#define WSYNC_PLACED_STAGED 2   /* staged; its registered buffer gets the bytes at commit */

/* Wait up to timeout_ms for the next event and describe it in *event. A tensor split across
 * buckets is reported once, in the event of its last chunk. The calling thread sleeps while it
 * waits (on the control socket and the transport's event descriptor). Statuses:
 *   WSYNC_OK                 *event says what happened
 *   WSYNC_ERR_TIMEOUT        no message arrived within timeout_ms: nothing changed, the receiver
 *                            stays usable and the update may still complete. Also when a bucket's
 *                            bytes did not arrive within the receiver's timeout_ms option: the
 *                            message says so, and then the update is over (as below)
 *   WSYNC_ERR_ABORTED        the sender abandoned a bucket while its bytes were arriving (it was
 *                            aborted, another receiver failed, or it was destroyed); the next call
 *                            usually returns the WSYNC_EVENT_ABORTED or WSYNC_EVENT_CLOSED behind it
 *   WSYNC_ERR_PEER_FAILED    the sender vanished (process died, connection closed)
 *   WSYNC_ERR_PROTOCOL       corrupted or refused data: the update is refused and the sender told
 *   WSYNC_ERR_INVALID_STATE  a COMMIT is waiting for wsync_receiver_commit, or an earlier failure
 *                            left the receiver unable to take more buckets (the message says which)
 *   WSYNC_ERR_INVALID_ARGUMENT  rx or event is NULL, or event->struct_size is not set (use
 *                            WSYNC_RECEIVER_EVENT_INIT): nothing changed
 *   WSYNC_ERR_UNSUPPORTED    the sender asked for what this receiver cannot do (a payload checksum
 *                            of bytes in device memory)
 *   WSYNC_ERR_VERSION_MISMATCH  the sender's transport sent side-channel data in a format this
 *                            receiver's transport does not know
 *   WSYNC_ERR_IO, WSYNC_ERR_OUT_OF_MEMORY, WSYNC_ERR_NO_DEVICE
 *                            the transport could not post or finish a receive, or memory for
 *                            staging was not there (the message names the transport and why)
 *   WSYNC_ERR_INTERNAL       a fault inside wsync or a plugin (the message says where)
 * No other status. Any failure but a plain TIMEOUT, INVALID_ARGUMENT (and INVALID_STATE for a
 * waiting COMMIT) ends the update on
 * this receiver: it never commits. In receive_mode staged the registered buffers are untouched
 * and the staged bytes dropped. In place, the registered tensors written so far hold new, old or
 * mixed bytes: wsync_receiver_get_state reports WSYNC_BUFFERS_MIXED, and late_writes = 1 when the
 * transport gave up on a receive into them — it may then still write into those buffers until
 * wsync_receiver_destroy returns, so destroy the receiver before repairing them. The sender's
 * group is broken after any of these: destroy this receiver once it is closed (or gone) and join
 * the sender's next group with a new one. */
WSYNC_API wsync_status_t wsync_receiver_next(wsync_receiver_t* rx, wsync_receiver_event_t* event,
                                             int64_t timeout_ms);

/* Confirm that version `version` (from the last COMMIT event) is applied. The sender's
 * wsync_group_finalize returns once every receiver confirmed. In receive_mode staged this call also
 * applies the version: it tells the sender, then copies every staged tensor into its registered
 * buffer (for CUDA buffers on the legacy default stream, synchronised before it returns), so the
 * registered buffers change only here, once the sender finalized the version and every byte of it
 * arrived (and was checksummed when the sender asked for it); an engine that serves from them
 * pauses around this call. If the sender cannot be told (it died), nothing is copied: the buffers
 * keep the previous version and the call fails. A failed copy (a CUDA error) fails the call with
 * the version committed and the buffers WSYNC_BUFFERS_MIXED. */
WSYNC_API wsync_status_t wsync_receiver_commit(wsync_receiver_t* rx, uint64_t version);

/* The last version this receiver committed, 0 before any. */
WSYNC_API uint64_t wsync_receiver_committed_version(const wsync_receiver_t* rx);

/* Since 1.4: what the updates did to the registered buffers, so an engine can refuse to serve
 * until the next commit. */
#define WSYNC_RECEIVE_IN_PLACE 1 /* receiver option receive_mode=in_place (the default) */
#define WSYNC_RECEIVE_STAGED 2   /* receive_mode=staged */

#define WSYNC_BUFFERS_CLEAN 1 /* no update wrote into a registered buffer since the last commit (or
                                 since the receiver was created): each holds what it held then — the
                                 committed version, or what the engine put there */
#define WSYNC_BUFFERS_MIXED 2 /* since the last commit an update wrote into the registered buffers
                                 wsync_receiver_touched_name names (in place): an update arriving,
                                 one waiting for its commit (pending_version), or one that failed.
                                 They may hold new, old or mixed bytes until the next commit */

typedef struct wsync_receiver_state_t {
  uint32_t struct_size;
  int32_t receive_mode;       /* WSYNC_RECEIVE_IN_PLACE or WSYNC_RECEIVE_STAGED */
  uint64_t committed_version; /* as wsync_receiver_committed_version */
  uint64_t pending_version;   /* the version of a COMMIT event not yet confirmed, else 0 */
  int32_t buffers;            /* WSYNC_BUFFERS_CLEAN or WSYNC_BUFFERS_MIXED. Staged mode stays
                                 CLEAN through every failure; MIXED only after a copy at commit
                                 failed midway */
  int32_t late_writes;        /* 1: the transport gave up on a receive posted into registered
                                 buffers and may still write into them until
                                 wsync_receiver_destroy returns (in place only; else 0) */
  uint64_t num_touched;       /* in place: registered tensors written since the last commit (the
                                 MIXED ones); staged: registered tensors staged for the update in
                                 progress, copied at the next commit (0 after a failure) */
  uint64_t staged_bytes;      /* staging memory staged mode holds for registered tensors (host or
                                 CUDA memory, like the registered buffers), kept for later updates
                                 until wsync_receiver_destroy; 0 in place */
  uint32_t num_senders;       /* since 1.5: the senders this receiver joined (1, or the group's
                                 num_senders: docs/ABI.md "Many senders"); a caller built against
                                 1.4 does not see it (struct_size) */
  uint32_t planned;           /* since 1.5: 1 when the senders plan (option num_senders, also 1):
                                 they wait for this receiver's needs, which it says when it
                                 registers (wsync_receiver_register, also with no buffers) or
                                 first calls wsync_receiver_next */
  uint32_t rank;              /* since 1.5: this receiver's rank (the config's, or the one an elastic
                                 group's sender assigned when the config asked for rank 0) */
  uint32_t rank_assigned;     /* since 1.5: 1 when the sender assigned `rank` */
} wsync_receiver_state_t;

#define WSYNC_RECEIVER_STATE_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_receiver_state_t, rank_assigned)
#define WSYNC_RECEIVER_STATE_INIT {(uint32_t)WSYNC_RECEIVER_STATE_STRUCT_SIZE, 0, 0u, 0u, 0, 0, 0u, 0u, 0u, 0u, 0u, 0u}

/* Since 1.4. Fill *state, honouring state->struct_size (at least 8 and a multiple of 8, else
 * WSYNC_ERR_INVALID_ARGUMENT): min(struct_size, the library's size) bytes are written and
 * struct_size is set to that number. Never blocks. Like every call on a receiver, not while
 * another call on the same receiver runs; call it after wsync_receiver_next returned (a failure
 * included) and publish what it says to the threads that serve. */
WSYNC_API wsync_status_t wsync_receiver_get_state(const wsync_receiver_t* rx, wsync_receiver_state_t* state);

/* Since 1.4. The name of touched tensor `index` (0 .. num_touched-1 of wsync_receiver_get_state),
 * in the order their first bytes were posted; NULL for an index out of range or a NULL rx. Owned
 * by the receiver: valid until the next wsync_receiver_next, wsync_receiver_commit,
 * wsync_receiver_register or wsync_receiver_destroy on it. Never fails otherwise, never blocks. */
WSYNC_API const char* wsync_receiver_touched_name(const wsync_receiver_t* rx, uint64_t index);

/* Leave the group and free everything. Accepts NULL; never fails. */
WSYNC_API void wsync_receiver_destroy(wsync_receiver_t* rx);

/* ---------------------------------------------------------------------------------------------
 * Plugins: what this process can load (since 1.2; what the wsync-info program prints)
 * ------------------------------------------------------------------------------------------- */

#define WSYNC_PLUGIN_KIND_TRANSPORT 1
#define WSYNC_PLUGIN_KIND_ADAPTER 2

/* One plugin file found in the plugin folders. Strings are never NULL. */
typedef struct wsync_plugin_info_t {
  uint32_t struct_size;
  int32_t kind;           /* WSYNC_PLUGIN_KIND_* */
  const char* name;       /* from the file name libwsync_<kind>_<name>.so */
  const char* path;       /* the file */
  const char* version;    /* the plugin's release; "" when it did not load */
  const char* detail;     /* what the plugin reports about its libraries and devices ("UCX
                             1.13.1"); "" when it reports nothing */
  const char* error;      /* "" when it loads; else why not, in the words init would use */
  uint64_t caps;          /* WSYNC_TRANSPORT_CAP_* or WSYNC_ADAPTER_CAP_* (wsync_plugin.h) */
  uint32_t abi_major;     /* the plugin ABI its table was built for (0 when it did not load) */
  uint32_t abi_minor;     /* the newest minor its table's size covers */
  wsync_status_t status;  /* WSYNC_OK when it loads, else the status init would return */
  uint32_t shadowed;      /* 1: a file of the same kind and name in an earlier folder is the one
                             wsync loads, not this one (a file that fails to dlopen shadows
                             nothing: a search by name passes over it) */
} wsync_plugin_info_t;

#define WSYNC_PLUGIN_INFO_STRUCT_SIZE WSYNC_STRUCT_SIZE(wsync_plugin_info_t, shadowed)
#define WSYNC_PLUGIN_INFO_INIT \
  {(uint32_t)WSYNC_PLUGIN_INFO_STRUCT_SIZE, 0, NULL, NULL, NULL, NULL, NULL, 0u, 0u, 0u, 0, 0u}

/* Since 1.2. The folders searched for plugins, in search order, joined by ':' (WSYNC_PLUGIN_PATH
 * first, then the wsync/ folder beside the loaded libwsync); "" when there is none. Valid until
 * the next wsync call on the same thread. Never NULL. */
WSYNC_API const char* wsync_plugin_dirs(void);

/* Since 1.2. Load every libwsync_transport_*.so and libwsync_adapter_*.so in the plugin folders
 * and describe each, in search order. Writes at most `capacity` entries to `infos`, an array of
 * the caller's wsync_plugin_info_t: set infos[0].struct_size (e.g. WSYNC_PLUGIN_INFO_INIT);
 * entries lie as in a C array (struct_size rounded up to 8 bytes apart), each gets struct_size
 * set to that same value, so a caller with an older or newer header keeps working. *count
 * (required) gets the number of files found, which may be more than capacity (call again with a
 * larger array). infos may be NULL when capacity is 0. The strings stay valid until the next
 * wsync_list_plugins call on the same thread. A plugin that fails to load is listed with its
 * status and error; the call itself fails only for bad arguments (or out of memory).
 * Thread-safe. */
WSYNC_API wsync_status_t wsync_list_plugins(wsync_plugin_info_t* infos, uint64_t capacity, uint64_t* count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WSYNC_H_ */
