/* Adapters that are wrong on purpose, for the degraded suite of wsync-conformance (conformance.degraded).
 * One source; each variant is built as libwsync_adapter_<name>.so into
 * build/lib/wsync-conformance-testing. Never installed.
 *
 *   CB_SMALL_TABLE      "smalltable"  struct_size ends before destroy       -> loader: VERSION_MISMATCH
 *   CB_NULL_GET_LAYOUT  "nullfn"      get_layout is NULL                    -> loader: UNSUPPORTED naming it
 *   CB_V10_TABLE        "v10"         a plugin ABI 1.0 table (ends at destroy), in-band -> loads, conforms
 *   CB_HTTP_NO_BUILD    "httpnobuild" CAP_HTTP but build_requests NULL      -> the suite fails it
 *   CB_BAD_REQUESTS     "badrequests" CAP_HTTP with malformed requests      -> the suite fails it
 *   CB_CRASHY           "crashy"      create dereferences NULL params       -> the suite reports the crash
 *   CB_MISNAMED         "misnamed"    the table says "other"               -> the suite fails it
 *   CB_LAYOUT_OVERRUN   "overrun"     get_layout writes bucket_bytes whatever the caller's
 *                                     struct_size (an older core's stack) -> the suite fails it
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "wsync_plugin.h"

#ifndef CB_NAME
#define CB_NAME "broken"
#endif

/* (atomic: the entry runs at every load, maybe while another thread calls in) */
static _Atomic(const wsync_host_v1_t*) g_host;
#define HOST() atomic_load_explicit(&g_host, memory_order_acquire)

static wsync_status_t cb_create(const wsync_adapter_params_t* params, void** out) {
#ifdef CB_CRASHY
  /* Reads params before looking at it: create(NULL, ...) crashes. */
  if (params->num_options > 1000) return WSYNC_ERR_INVALID_ARGUMENT;
#endif
  if (params == NULL || out == NULL) return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "create: NULL argument");
  if (params->struct_size < sizeof *params) return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "params too small");
  if (params->num_options > 0) {
    const char* key = params->options != NULL && params->options[0].key != NULL ? params->options[0].key : "(null)";
    char msg[300];
    strcpy(msg, "adapter '" CB_NAME "' has no option '");
    strncat(msg, key, 200);
    strcat(msg, "'");
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, msg);
  }
  *out = calloc(1, 64);
  return *out ? WSYNC_OK : WSYNC_ERR_OUT_OF_MEMORY;
}

static wsync_status_t cb_get_layout(void* self, wsync_layout_rule_t* out) {
  if (self == NULL || out == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  out->kind = WSYNC_LAYOUT_BYTES_MIXED;
  out->alignment = 64;
  out->allow_split = 0;
#ifdef CB_LAYOUT_OVERRUN
  out->bucket_bytes = 1u << 20; /* without looking at out->struct_size */
#endif
  return WSYNC_OK;
}

static void cb_destroy(void* self) { free(self); }

#ifdef CB_BAD_REQUESTS
/* Everything a careless adapter gets wrong: a path without '/', a body that is not JSON, an
 * unknown reply kind. */
static wsync_status_t cb_build_requests(void* self, const wsync_engine_step_t* step, const wsync_http_request_t** out,
                                        uint32_t* num_out) {
  static wsync_http_request_t reqs[3];
  if (self == NULL || step == NULL || out == NULL || num_out == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  if (step->struct_size < sizeof *step || step->step < WSYNC_STEP_HEALTH || step->step > WSYNC_STEP_DESTROY)
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "bad step");
  if (step->num_tensors > 0 && (step->names == NULL || step->dtypes == NULL || step->ndims == NULL || step->shapes == NULL))
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "NULL tensor arrays");
  reqs[0].struct_size = sizeof reqs[0], reqs[0].method = WSYNC_HTTP_POST, reqs[0].path = "update_weights";
  reqs[0].body = "{\"name\": \"unterminated}", reqs[0].idempotent = 0, reqs[0].reply = WSYNC_REPLY_STATUS;
  reqs[1].struct_size = sizeof reqs[1], reqs[1].method = 3, reqs[1].path = "/ok";
  reqs[1].body = NULL, reqs[1].idempotent = 0, reqs[1].reply = 42;
  reqs[2].struct_size = sizeof reqs[2], reqs[2].method = WSYNC_HTTP_POST, reqs[2].path = "/with space";
  reqs[2].body = "42", reqs[2].idempotent = 0, reqs[2].reply = WSYNC_REPLY_JSON;
  *out = reqs;
  *num_out = 3;
  return WSYNC_OK;
}
#endif

#if defined(CB_HTTP_NO_BUILD) || defined(CB_BAD_REQUESTS)
#define CB_CAPS WSYNC_ADAPTER_CAP_HTTP
#else
#define CB_CAPS WSYNC_ADAPTER_CAP_INBAND_MANIFEST
#endif

#ifdef CB_MISNAMED
#define CB_TABLE_NAME "other"
#else
#define CB_TABLE_NAME CB_NAME
#endif

static const wsync_adapter_v1_t kTable = {
#if defined(CB_SMALL_TABLE)
    (uint32_t)offsetof(wsync_adapter_v1_t, get_layout),
#elif defined(CB_V10_TABLE)
    (uint32_t)offsetof(wsync_adapter_v1_t, build_requests),
#else
    (uint32_t)sizeof(wsync_adapter_v1_t),
#endif
    WSYNC_PLUGIN_ABI_VERSION,
    CB_TABLE_NAME,
    "0.0.0-conformance",
    CB_CAPS,
    cb_create,
#ifdef CB_NULL_GET_LAYOUT
    NULL,
#else
    cb_get_layout,
#endif
    cb_destroy,
#ifdef CB_BAD_REQUESTS
    cb_build_requests,
#else
    NULL,
#endif
    NULL, /* get_needs: optional (1.2) */
    NULL, /* runtime_info */
    NULL, /* take_reply (1.3): reads no reply */
    NULL, /* held (1.7): says nothing after an abandon */
};

__attribute__((visibility("default"))) const wsync_adapter_v1_t* wsync_adapter_entry_v1(const wsync_host_v1_t* host) {
  WSYNC_PLUGIN_CHECK_HOST(host, set_error, "a broken test plugin");
  atomic_store_explicit(&g_host, host, memory_order_release);
#ifdef CB_NULL_GET_LAYOUT
  (void)cb_get_layout;
#endif
  return &kTable;
}
