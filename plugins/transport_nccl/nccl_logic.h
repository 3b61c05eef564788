/* nccl_logic.h — the GPU-free logic of transport 'nccl': base64 of the unique id, the store keys,
 * option parsing and the deadline poll loop. No CUDA or NCCL header here, so the unit tests
 * compile nccl_logic.c on any machine (tests/unit/nccl/test_nccl_logic.cpp). */
#ifndef WSYNC_NCCL_LOGIC_H_
#define WSYNC_NCCL_LOGIC_H_

#include <stddef.h>
#include <stdint.h>

#include "wsync_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Same as NCCL_UNIQUE_ID_BYTES (nccl.h); nccl_transport.h checks they agree. */
#define NCCL_LOGIC_ID_BYTES 128
/* Characters of the base64 form of an id, without the NUL: 4 * ceil(128 / 3). */
#define NCCL_LOGIC_ID_B64_CHARS 172

/* ---- base64 (RFC 4648, standard alphabet, '=' padding) ---------------------------------------- */

/* Characters that encoding n bytes gives (no NUL). */
size_t nccl_b64_encoded_len(size_t n);
/* Encode n bytes into out (NUL-terminated). Returns the number of characters, or -1 when cap
 * cannot hold them and the NUL. */
int64_t nccl_b64_encode(const void* in, size_t n, char* out, size_t cap);
/* Decode len characters. Returns the number of bytes, or -1 when the text is not canonical
 * padded base64 (length not a multiple of 4, a character outside the alphabet, '=' anywhere but
 * the last one or two places) or does not fit in cap bytes. */
int64_t nccl_b64_decode(const char* in, size_t len, void* out, size_t cap);

/* ---- store keys -------------------------------------------------------------------------------- */

/* wsync's own key for the 128 raw bytes of the id: "wsync/<group>/nccl/unique_id". Returns the
 * length, or -1 when it does not fit in cap (with the NUL). */
int nccl_wsync_id_key(const char* group, char* out, size_t cap);

/* The user key (the TCPStore client adds the leading "/" on the wire, as torch's does) under
 * which a torch ProcessGroupNCCL of group `torch_group` reads the id of its first communicator:
 *
 *   <G>/<G>//cuda//0        e.g. "weight_update_group/weight_update_group//cuda//0"
 *
 * DERIVED FROM READING torch, NOT YET VERIFIED AGAINST A RUNNING torch (see
 * shared/PROTOCOLS.md, "Verifying the derived facts"). The chain, outermost first:
 *   - SGLang/LMDeploy rendezvous on the sender's TCPStore and wrap it in PrefixStore(G);
 *   - torch's _new_process_group_helper wraps PrefixStore(f"{G}/") and, per device type,
 *     PrefixStore("cuda/");
 *   - PrefixStore joins prefix + "/" + key, so "0" becomes "cuda/" "/" "0" = "cuda//0", then
 *     "G/" "/" "cuda//0" = "G//cuda//0", then "G" "/" "G//cuda//0";
 *   - ProcessGroupNCCL stores the id of its first communicator under key "0" (a counter; above
 *     128 ranks torch uses other keys).
 * Returns the length, or -1 when it does not fit in cap (with the NUL). */
int nccl_torch_id_key(const char* torch_group, char* out, size_t cap);

/* ---- options ----------------------------------------------------------------------------------- */

#define NCCL_TORCH_GROUP_MAX 255
#define NCCL_INIT_TIMEOUT_MAX_MS 86400000 /* one day */

typedef struct nccl_options {
  char torch_group[NCCL_TORCH_GROUP_MAX + 1]; /* "" = not set */
  int allreduce_after_init;                   /* 0 or 1 */
  int64_t init_timeout_ms;                    /* -1 = not set: connect's own timeout */
  int lazy_init;                              /* 0 or 1: connect does not wait for the init */
} nccl_options_t;

/* The list of known keys, for messages. */
#define NCCL_KNOWN_OPTIONS \
  "transport.torch_group, transport.allreduce_after_init, transport.init_timeout_ms, transport.lazy_init"

/* Parse the transport.* options (prefix removed). On failure returns WSYNC_ERR_INVALID_ARGUMENT
 * and writes a message naming the option into err. lazy_init=1 together with
 * allreduce_after_init=1 is refused (the all-reduce needs the communicator complete at connect). */
wsync_status_t nccl_parse_options(const wsync_option_t* opts, uint64_t num_opts, nccl_options_t* out, char* err,
                                  size_t err_cap);

/* Then the adapter's hints (plugin ABI 1.2, wsync_transport_params_t.hints): a hint sets a key the
 * options did not set; unknown keys and values that do not parse are ignored (a hint is not an
 * option). The combination check runs again on the result. */
wsync_status_t nccl_apply_hints(const wsync_option_t* opts, uint64_t num_opts, const wsync_option_t* hints,
                                uint64_t num_hints, nccl_options_t* out, char* err, size_t err_cap);

/* ---- deadline poll loop ------------------------------------------------------------------------ */

typedef enum nccl_poll_state {
  NCCL_POLL_PENDING = 0, /* not yet */
  NCCL_POLL_DONE = 1,    /* finished well */
  NCCL_POLL_FAILED = 2   /* finished badly; the state function recorded why */
} nccl_poll_state_t;

typedef enum nccl_wait_result {
  NCCL_WAIT_DONE = 0,
  NCCL_WAIT_TIMEOUT = 1,
  NCCL_WAIT_FAILED = 2,
  NCCL_WAIT_ABORTED = 3
} nccl_wait_result_t;

typedef struct nccl_poller {
  nccl_poll_state_t (*state)(void* arg); /* one non-blocking look at the work */
  int (*aborted)(void* arg);             /* non-zero once abort was called; NULL: never */
  int64_t (*now_ms)(void* arg);          /* a monotonic clock in milliseconds */
  void (*pause)(void* arg, uint64_t iteration); /* between two looks; NULL: none */
  void* arg;
} nccl_poller_t;

/* Look at the work until it is done, fails, abort is seen, or now_ms() reaches deadline_ms. The
 * abort flag is checked before each look, and the work is looked at at least once even when the
 * deadline has passed already (so a wait with timeout 0 still notices finished work). */
nccl_wait_result_t nccl_poll_until(const nccl_poller_t* p, int64_t deadline_ms);

/* now + timeout without overflow; a negative timeout counts as 0. */
int64_t nccl_deadline(int64_t now_ms, int64_t timeout_ms);

/* The pause the plugin uses: sched_yield for the first iterations (a broadcast of a bucket that
 * is nearly done), then 200 us sleeps (a peer that has not joined yet). */
void nccl_default_pause(void* arg, uint64_t iteration);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t nccl_mono_ms(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WSYNC_NCCL_LOGIC_H_ */
