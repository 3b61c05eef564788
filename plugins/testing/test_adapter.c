/* A test-only adapter plugin: "stub" (valid, in-band manifests, mixed byte layout) or, with
 * TP_ABI_VERSION=99, one built for a plugin ABI this core does not speak. Never installed. */
#include <stdatomic.h>
#include <stdlib.h>

#include "wsync_plugin.h"

#ifndef TP_NAME
#define TP_NAME "stub"
#endif
#ifndef TP_ABI_VERSION
#define TP_ABI_VERSION WSYNC_PLUGIN_ABI_VERSION
#endif

/* (atomic: the entry runs at every load, maybe while another thread calls in) */
static _Atomic(const wsync_host_v1_t*) g_host;
#define HOST() atomic_load_explicit(&g_host, memory_order_acquire)

static wsync_status_t stub_create(const wsync_adapter_params_t* params, void** out) {
  if (params == NULL || out == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  if (params->options == NULL && params->num_options > 0)
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" TP_NAME "': options is NULL but num_options is "
                             "not 0");
  if (params->num_options != 0)
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" TP_NAME "' takes no options");
  *out = calloc(1, 16);
  return *out ? WSYNC_OK : WSYNC_ERR_OUT_OF_MEMORY;
}

static wsync_status_t stub_get_layout(void* self, wsync_layout_rule_t* out) {
  if (self == NULL || out == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  out->kind = WSYNC_LAYOUT_BYTES_MIXED;
  out->alignment = 64;
  out->allow_split = 1;
  return WSYNC_OK;
}

static void stub_destroy(void* self) { free(self); }

static const wsync_adapter_v1_t kTable = {
    (uint32_t)sizeof(wsync_adapter_v1_t),
    TP_ABI_VERSION,
    TP_NAME,
    "0.0.0-test",
    WSYNC_ADAPTER_CAP_INBAND_MANIFEST,
    stub_create,
    stub_get_layout,
    stub_destroy,
    NULL, /* build_requests: not an HTTP engine */
    NULL, /* get_needs: nothing to ask of the transport */
    NULL, /* runtime_info */
    NULL, /* take_reply (1.3): reads no reply */
    NULL, /* held (1.7) */
};

__attribute__((visibility("default"))) const wsync_adapter_v1_t* wsync_adapter_entry_v1(const wsync_host_v1_t* host) {
  WSYNC_PLUGIN_CHECK_HOST(host, set_error, "adapter '" TP_NAME "'");
  atomic_store_explicit(&g_host, host, memory_order_release);
  return &kTable;
}
