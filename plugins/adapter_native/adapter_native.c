/* adapter_native: wsync's own engine protocol. The engine embeds a wsync receiver, so there is
 * no HTTP: manifests travel in-band on the group's control channel and the bucket layout is
 * byte offsets with mixed dtypes, aligned so every tensor view is aligned for its dtype. */
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "wsync_plugin.h"

typedef struct native_adapter {
  uint32_t alignment;
} native_adapter_t;

static wsync_status_t native_create(const wsync_adapter_params_t* params, void** out) {
  native_adapter_t* a;
  uint64_t i;
  if (out != NULL) *out = NULL;
  if (params == NULL || out == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter 'native': create: NULL argument");
  if (!WSYNC_HAS_FIELD(params, wsync_adapter_params_t, num_options))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter 'native': params struct_size %u is too small",
                    params->struct_size);
  if (params->num_options > 0 && params->options == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter 'native': num_options > 0 but options is NULL");
  for (i = 0; i < params->num_options; ++i) /* no adapter options yet: name the key so a typo is caught */
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter 'native' has no option '%.200s'",
                    params->options[i].key ? params->options[i].key : "(null)");
  a = (native_adapter_t*)calloc(1, sizeof *a);
  if (a == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "adapter 'native': out of memory");
  a->alignment = 256; /* views of every dtype, and vector loads, stay aligned */
  *out = a;
  return WSYNC_OK;
}

static wsync_status_t native_get_layout(void* self, wsync_layout_rule_t* out) {
  native_adapter_t* a = (native_adapter_t*)self;
  if (a == NULL || out == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  out->struct_size = (uint32_t)sizeof *out;
  out->kind = WSYNC_LAYOUT_BYTES_MIXED;
  out->alignment = a->alignment;
  out->allow_split = 1;
  return WSYNC_OK;
}

static void native_destroy(void* self) { free(self); }

static const wsync_adapter_v1_t kNativeAdapter = {
    (uint32_t)sizeof(wsync_adapter_v1_t),
    WSYNC_PLUGIN_ABI_VERSION,
    "native",
    WSYNC_PLUGIN_VERSION,
    WSYNC_ADAPTER_CAP_INBAND_MANIFEST,
    native_create,
    native_get_layout,
    native_destroy,
    NULL, /* build_requests: not an HTTP engine */
    NULL, /* get_needs: the engine embeds a wsync receiver, which needs nothing from the transport */
    NULL, /* runtime_info */
    NULL, /* take_reply (1.3): reads no reply */
    NULL, /* held (1.7): no HTTP server */
};

__attribute__((visibility("default"))) const wsync_adapter_v1_t* wsync_adapter_entry_v1(const wsync_host_v1_t* host) {
  WSYNC_PLUGIN_CHECK_HOST(host, set_error, "adapter 'native'");
  wsp_set_host(host);
  return &kNativeAdapter;
}
