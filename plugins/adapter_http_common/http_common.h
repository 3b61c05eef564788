/* http_common: what the HTTP engine adapters (sglang, vllm, lmdeploy) share. Compiled INTO each
 * adapter plugin (there is no shared library, and plugins never link libwsync), so every plugin
 * has its own copy of the host pointer and of the dtype table below.
 *
 * - errors: hc_error formats a message and hands it to host->set_error;
 * - options: known-key check, 0|1, unsigned integers, one of a list;
 * - steps: validation of a wsync_engine_step_t (struct_size, step, tensor arrays, ndims, dtypes);
 * - requests: a small list of wsync_http_request_t whose strings the list owns until the next
 *   reset (build_requests) or free (destroy);
 * - JSON: names / torch dtype names / shapes arrays, exact int64 numbers. */
#ifndef WSYNC_HTTP_COMMON_H_
#define WSYNC_HTTP_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "plugin_util.h"
#include "wsync_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors (the host table itself is plugin_util's: wsp_set_host / wsp_host) ---- */

/* Formats "adapter '<adapter>': <fmt...>", passes it to host->set_error and returns `status`. */
wsync_status_t hc_error(wsync_status_t status, const char* adapter, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
void hc_log(int32_t level, const char* adapter, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/* torch's name of a WSYNC_DTYPE_* ("bfloat16", "float8_e4m3fn"); NULL for an invalid code. The
 * table matches wsync_dtype_name (src/common/status.cpp) row for row. */
const char* hc_dtype_name(int32_t dtype);
/* Bytes per element, matching wsync_dtype_size; 0 for an invalid code. */
uint32_t hc_dtype_size(int32_t dtype);
/* Payload bytes of tensor i of a checked UPDATE step (numel * itemsize); 0 on overflow. */
int hc_tensor_bytes(const wsync_engine_step_t* step, uint64_t i, uint64_t* out);
/* The name of a WSYNC_STEP_* ("INIT"), or "unknown". */
const char* hc_step_name(int32_t step);

/* ---- options ---- */

/* Every params->options[i].key must be one of `known` (n of them); otherwise INVALID_ARGUMENT
 * naming the key and listing the known ones. Also refuses a NULL key or value. */
wsync_status_t hc_check_option_keys(const char* adapter, const wsync_adapter_params_t* params,
                                    const char* const* known, size_t n);
/* The first checks of every create: params and out non-NULL (*out = NULL), params->struct_size
 * covering the 1.0 fields, every option key known. */
wsync_status_t hc_check_create(const char* adapter, const wsync_adapter_params_t* params, void** out,
                               const char* const* known, size_t n);
/* The value of the last option named `key`, or NULL. */
const char* hc_option(const wsync_adapter_params_t* params, const char* key);
/* "0" or "1". */
wsync_status_t hc_parse_bool(const char* adapter, const char* key, const char* value, int* out);
/* A decimal integer in [min, max]. */
wsync_status_t hc_parse_u64(const char* adapter, const char* key, const char* value, uint64_t min,
                            uint64_t max, uint64_t* out);
/* One of `choices` (n of them); *out is its index. */
wsync_status_t hc_parse_choice(const char* adapter, const char* key, const char* value,
                               const char* const* choices, size_t n, size_t* out);

/* ---- steps ---- */

/* The value of transport property `key` in the step (since 1.2, what get_needs asked for), or NULL. */
const char* hc_property(const wsync_engine_step_t* step, const char* key);

/* The checks every adapter needs: step non-NULL, struct_size covers the 1.1 struct, a known
 * WSYNC_STEP_*, and for UPDATE: at least one tensor, non-NULL arrays, names non-NULL and
 * non-empty, valid dtypes, ndims in 0..WSYNC_MAX_NDIM, no negative dimension. */
wsync_status_t hc_check_step(const char* adapter, const wsync_engine_step_t* step);
/* UPDATE: every tensor has the dtype of the first (ELEMENTS_ONE_DTYPE engines); otherwise
 * INVALID_ARGUMENT naming the first tensor of another dtype and the first tensor. */
wsync_status_t hc_check_one_dtype(const char* adapter, const wsync_engine_step_t* step);
/* INIT through torch's TCP rendezvous: master_address non-empty, master_port in 1..65535. */
wsync_status_t hc_check_rendezvous(const char* adapter, const wsync_engine_step_t* step);
/* group_name non-NULL and non-empty (the engines assert it). */
wsync_status_t hc_check_group_name(const char* adapter, const wsync_engine_step_t* step);

/* ---- request lists ---- */

#define HC_MAX_REQUESTS 4

typedef struct hc_requests {
  wsync_http_request_t req[HC_MAX_REQUESTS];
  char* owned[2 * HC_MAX_REQUESTS]; /* paths and bodies built for the current list */
  uint32_t num;
  uint32_t num_owned;
} hc_requests_t;

/* The common body of build_requests: check the arguments and the step, reset `list`, run
 * build(self, step), and hand out the list (left empty on failure). */
typedef wsync_status_t (*hc_build_fn)(void* self, const wsync_engine_step_t* step);
wsync_status_t hc_build_requests(const char* adapter, hc_requests_t* list, void* self, hc_build_fn build,
                                 const wsync_engine_step_t* step, const wsync_http_request_t** out,
                                 uint32_t* num_out);

/* Frees the strings of the previous list and empties it. */
void hc_reset(hc_requests_t* list);
/* Frees everything (the list itself is not freed). */
void hc_free(hc_requests_t* list);
/* Appends a request. `path` is copied. `body`, when non-NULL, is consumed (printed unformatted
 * and deleted, also on failure); NULL sends no body. */
wsync_status_t hc_add(hc_requests_t* list, const char* adapter, int32_t method, const char* path,
                      cJSON* body, uint32_t idempotent, int32_t reply);

/* ---- the adapter instance and its table entries ---- */

#define HC_MAX_HINTS 4
#define HC_MAX_PROPERTIES 2
#define HC_GROUP_MAX 257

/* ---- engine releases (plugin ABI 1.3: the PROBE step reads them) ---- */

typedef struct hc_version {
  int major, minor, patch;
} hc_version_t;

/* The release in a version string: "0.5.23", "v0.33.0", "0.5.15.post1", "0.33.0rc1",
 * "0.5.24.dev3+gabc" give their first three numbers (a missing patch is 0). 0 on success, -1
 * when the text does not start with <digits>.<digits>. */
int hc_parse_version(const char* text, hc_version_t* out);
int hc_version_cmp(hc_version_t a, hc_version_t b);
void hc_version_text(hc_version_t v, char* buf, size_t cap);

/* What an adapter learnt of one server at PROBE. */
typedef struct hc_server {
  int known;             /* the probe answered */
  hc_version_t version;  /* the release it speaks (reported or forced) */
  int nothing_left;      /* the probe found nothing an earlier trainer left open (an update):
                            RESET need not end it. 0 (unknown) ends it as before. */
  /* After an ABANDON (plugin ABI 1.7, adapters that set checks_updates): what the server holds
   * (WSYNC_HELD_*), its words (malloc'd, or NULL), and whether its update must still be ended
   * before it resumes (the RESUME built after the ABANDON sends that first). */
  int32_t held;
  char* held_words;
  int end_pending;
} hc_server_t;

/* take_reply of one adapter (see wsync_adapter_v1_t.take_reply). */
typedef wsync_status_t (*hc_reply_fn)(void* self, const wsync_engine_step_t* step, uint32_t request_index,
                                      int32_t http_status, const char* body, uint64_t body_len);

/* Every HTTP adapter's instance starts with this: the request list, the step builder, the reply
 * reader, what its engine needs from the transport (get_needs), and what it knows of each server. */
typedef struct hc_adapter {
  const char* name;  /* "sglang" */
  hc_build_fn build;
  hc_reply_fn take;         /* NULL: the adapter reads no reply */
  hc_server_t* servers;     /* by server_index, grown by hc_server */
  uint32_t num_servers;
  int has_forced;           /* option adapter.engine_version */
  hc_version_t forced;
  hc_requests_t list;
  wsync_option_t hints[HC_MAX_HINTS];
  uint64_t num_hints;
  const char* properties[HC_MAX_PROPERTIES];
  uint64_t num_properties;
  char group[HC_GROUP_MAX]; /* a hint's value: the group's name */
  int checks_updates;       /* builds the CHECK step (plugin ABI 1.7); others send nothing at CHECK */
} hc_adapter_t;

/* A zeroed instance of `size` bytes (>= sizeof(hc_adapter_t)) whose base is set up; NULL (after
 * set_error) when out of memory. */
void* hc_adapter_new(size_t size, const char* name, hc_build_fn build);
/* The table entries every HTTP adapter shares. */
void hc_adapter_destroy(void* self);
wsync_status_t hc_adapter_build_requests(void* self, const wsync_engine_step_t* step, const wsync_http_request_t** out,
                                         uint32_t* num_out);
wsync_status_t hc_adapter_get_needs(void* self, wsync_adapter_needs_t* out);
/* What engines whose workers join through torch's rendezvous need (SGLang, LMDeploy): the transport
 * publishes its id where a ProcessGroupNCCL of this group's name reads it (torch_group = the group),
 * and creates its communicator at the first transfer, like torch does (lazy_init = 1). */
wsync_status_t hc_needs_torch_group(hc_adapter_t* a, const char* group_name);
/* hc_adapter_new, then hc_needs_torch_group(group_name); NULL (after set_error, *st set) on failure. */
void* hc_torch_adapter_new(size_t size, const char* name, hc_build_fn build, const char* group_name,
                           wsync_status_t* st);
/* One more hint / transport property (static strings). */
void hc_needs_hint(hc_adapter_t* a, const char* key, const char* value);
void hc_needs_property(hc_adapter_t* a, const char* key);

/* ---- requests two engines share (SGLang's and LMDeploy's routes have the same bodies) ---- */

/* INIT: POST /init_weights_update_group {master_address, master_port, rank_offset, world_size,
 * group_name, backend: "nccl"}, after checking the rendezvous and the group name. */
wsync_status_t hc_add_torch_group_init(hc_requests_t* list, const char* adapter, const wsync_engine_step_t* step);
/* DESTROY: POST /destroy_weights_update_group {group_name} (not idempotent: a second destroy
 * answers success=false). */
wsync_status_t hc_add_destroy_group(hc_requests_t* list, const char* adapter, const wsync_engine_step_t* step);
/* get_layout for engines whose buckets hold elements of one dtype, unaligned, never split. */
wsync_status_t hc_layout_one_dtype(const char* adapter, const void* self, wsync_layout_rule_t* out);

/* The table of an HTTP adapter named `name` (a string literal) and its entry function. */
#define HC_DEFINE_ADAPTER(table, name, create_fn, get_layout_fn) \
  static const wsync_adapter_v1_t table = {                     \
      (uint32_t)sizeof(wsync_adapter_v1_t),                     \
      WSYNC_PLUGIN_ABI_VERSION,                                 \
      name,                                                     \
      WSYNC_PLUGIN_VERSION,                                     \
      WSYNC_ADAPTER_CAP_HTTP,                                   \
      create_fn,                                                \
      get_layout_fn,                                            \
      hc_adapter_destroy,                                       \
      hc_adapter_build_requests,                                \
      hc_adapter_get_needs,                                     \
      NULL, /* runtime_info */                                  \
      hc_adapter_take_reply,                                    \
      hc_adapter_held,                                          \
  };                                                            \
  HC_DEFINE_ENTRY(table, "adapter '" name "'")

/* The server's state (grown as needed); NULL after set_error when out of memory. */
hc_server_t* hc_server(hc_adapter_t* a, uint32_t index);
/* The release to speak with server `index`: what its probe reported, else the forced one, else
 * `newest` (a core older than plugin ABI 1.3 sends no PROBE). */
hc_version_t hc_server_version(hc_adapter_t* a, uint32_t index, hc_version_t newest);
/* Option adapter.engine_version: parse it into a->forced. */
wsync_status_t hc_set_forced_version(hc_adapter_t* a, const char* value);
/* VERSION_MISMATCH naming the release and the supported range when `v` is outside [lo, hi]. A
 * `hi` with patch HC_ANY_PATCH takes every patch release of its minor ("0.33.x"). */
#define HC_ANY_PATCH 2147483647
wsync_status_t hc_check_supported(const hc_adapter_t* a, const char* engine, hc_version_t v, hc_version_t lo,
                                  hc_version_t hi);
/* A count in a JSON reply: 1 and *out when `key` is an integer in [lo, hi]; 0 when it is absent
 * or null; -1 when it is anything else (a fraction, out of range, not a number). Never casts an
 * unchecked double. */
int hc_json_count(const cJSON* obj, const char* key, int lo, int hi, int* out);
/* A reply body as JSON (not NUL-terminated input); NULL when it is not JSON. */
cJSON* hc_parse_body(const char* body, uint64_t len);
/* The shared held entry (plugin ABI 1.7): what hc_set_held recorded for the server, else
 * WSYNC_HELD_UNKNOWN. */
int32_t hc_adapter_held(void* self, uint32_t server_index, const char** words);
/* Record what server `index` holds after an ABANDON (words copied; NULL for none). */
wsync_status_t hc_set_held(hc_adapter_t* a, uint32_t index, int32_t held, const char* words);
/* The shared take_reply entry: hands the reply to a->take. */
wsync_status_t hc_adapter_take_reply(void* self, const wsync_engine_step_t* step, uint32_t request_index,
                                     int32_t http_status, const char* body, uint64_t body_len);

/* The entry function of an HTTP adapter whose table is `table`. */
#define HC_DEFINE_ENTRY(table, label)                                                                     \
  __attribute__((visibility("default"))) const wsync_adapter_v1_t* wsync_adapter_entry_v1(const wsync_host_v1_t* host) { \
    WSYNC_PLUGIN_CHECK_HOST(host, set_error, label);                                                     \
    wsp_set_host(host);                                                                                  \
    return &table;                                                                                       \
  }

/* ---- JSON ---- */

/* Deletes a half-built body (NULL is fine) and returns OUT_OF_MEMORY after set_error. */
wsync_status_t hc_oom(const char* adapter, cJSON* body);

/* A number written exactly as the decimal integer (cJSON numbers are doubles: this keeps int64
 * values exact). NULL on failure. */
cJSON* hc_int(int64_t v);
/* cJSON_AddItemToObject that reports failure (and deletes `item` then). 0 on failure. */
int hc_put(cJSON* obj, const char* key, cJSON* item);
/* Arrays of the UPDATE step's tensors: names, torch dtype names, shapes ([[d0, d1], [], ...]). */
cJSON* hc_names(const wsync_engine_step_t* step);
cJSON* hc_dtype_names(const wsync_engine_step_t* step);
cJSON* hc_shapes(const wsync_engine_step_t* step);
/* The decimal text of a version ("42"); buf holds at least 21 bytes. */
void hc_version_string(uint64_t version, char* buf, size_t cap);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WSYNC_HTTP_COMMON_H_ */
