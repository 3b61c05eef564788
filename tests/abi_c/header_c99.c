/* Compiled with -std=c99 -pedantic -Wall -Wextra -Werror: the public headers are plain C99.
 * Also checks, at run time, that every *_INIT macro gives struct_size == sizeof. */
#include "wsync.h"
#include "wsync_plugin.h"

#include <stdio.h>

/* C99 has no _Static_assert; a negative array size fails the build instead. */
#define ABI_STATIC_ASSERT(cond, tag) typedef char abi_static_assert_##tag[(cond) ? 1 : -1]
ABI_STATIC_ASSERT(offsetof(wsync_option_t, struct_size) == 0, option_first);
ABI_STATIC_ASSERT(offsetof(wsync_tensor_t, struct_size) == 0, tensor_first);
ABI_STATIC_ASSERT(offsetof(wsync_group_config_t, struct_size) == 0, group_config_first);
ABI_STATIC_ASSERT(offsetof(wsync_receiver_config_t, struct_size) == 0, receiver_config_first);
ABI_STATIC_ASSERT(offsetof(wsync_receiver_event_t, struct_size) == 0, event_first);
ABI_STATIC_ASSERT(offsetof(wsync_group_stats_t, struct_size) == 0, stats_first);
ABI_STATIC_ASSERT(offsetof(wsync_receiver_state_t, struct_size) == 0, receiver_state_first);
ABI_STATIC_ASSERT(sizeof(wsync_status_t) == 4, status_is_int32);
ABI_STATIC_ASSERT(WSYNC_STATUS_COUNT == WSYNC_ERR_REJECTED + 1, status_count);
ABI_STATIC_ASSERT(WSYNC_DTYPE_COUNT == WSYNC_DTYPE_FLOAT8_E5M2 + 1, dtype_count);

static int check(int ok, const char* what) {
  if (!ok) fprintf(stderr, "header_c99: %s\n", what);
  return ok ? 0 : 1;
}

int main(void) {
  wsync_option_t o = WSYNC_OPTION("bucket_bytes", "4096");
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  wsync_group_config_t gc = WSYNC_GROUP_CONFIG_INIT;
  wsync_receiver_config_t rc = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  wsync_group_stats_t st = WSYNC_GROUP_STATS_INIT;
  wsync_receiver_state_t rs = WSYNC_RECEIVER_STATE_INIT;
  wsync_transport_entry_v1_fn tfn = (wsync_transport_entry_v1_fn)0;
  wsync_adapter_entry_v1_fn afn = (wsync_adapter_entry_v1_fn)0;
  wsync_log_fn lfn = (wsync_log_fn)0;
  /* The plugin header's macros, all of them (-Wextra -Werror: a macro missing a field fails). */
  wsync_transport_params_t tp = WSYNC_TRANSPORT_PARAMS_INIT;
  wsync_buffer_t bu = WSYNC_BUFFER_INIT;
  wsync_layout_rule_t lr = WSYNC_LAYOUT_RULE_INIT;
  wsync_adapter_params_t ap = WSYNC_ADAPTER_PARAMS_INIT;
  wsync_http_request_t hr = WSYNC_HTTP_REQUEST_INIT;
  wsync_engine_step_t es = WSYNC_ENGINE_STEP_INIT;
  int bad = 0;
  bad += check(o.struct_size == sizeof o, "WSYNC_OPTION struct_size");
  bad += check(t.struct_size == sizeof t && t.device_type == WSYNC_DEVICE_CPU, "WSYNC_TENSOR_INIT");
  bad += check(gc.struct_size == sizeof gc && gc.timeout_ms < 0, "WSYNC_GROUP_CONFIG_INIT");
  bad += check(rc.struct_size == sizeof rc && rc.timeout_ms < 0, "WSYNC_RECEIVER_CONFIG_INIT");
  bad += check(ev.struct_size == sizeof ev && ev.kind == WSYNC_EVENT_NONE, "WSYNC_RECEIVER_EVENT_INIT");
  bad += check(st.struct_size == sizeof st, "WSYNC_GROUP_STATS_INIT");
  bad += check(rs.struct_size == sizeof rs && rs.buffers == 0 && rs.staged_bytes == 0, "WSYNC_RECEIVER_STATE_INIT");
  bad += check(WSYNC_PLACED_VIEW == 0 && WSYNC_PLACED_IN_PLACE == 1 && WSYNC_PLACED_STAGED == 2, "WSYNC_PLACED_*");
  bad += check(tfn == 0 && afn == 0 && lfn == 0, "function pointer types");
  bad += check(tp.struct_size == sizeof tp && tp.device_index == -1 && tp.timeout_ms == -1, "WSYNC_TRANSPORT_PARAMS_INIT");
  bad += check(bu.struct_size == sizeof bu && bu.stream == NULL && bu.device_type == WSYNC_DEVICE_CPU, "WSYNC_BUFFER_INIT");
  bad += check(lr.struct_size == sizeof lr && lr.bucket_bytes == 0, "WSYNC_LAYOUT_RULE_INIT");
  bad += check(ap.struct_size == sizeof ap, "WSYNC_ADAPTER_PARAMS_INIT");
  bad += check(hr.struct_size == sizeof hr && hr.method == WSYNC_HTTP_POST && hr.reply == WSYNC_REPLY_STATUS,
               "WSYNC_HTTP_REQUEST_INIT");
  bad += check(es.struct_size == sizeof es && es.names == NULL && es.version == 0, "WSYNC_ENGINE_STEP_INIT");
  bad += check((wsync_abi_version() >> 16) == WSYNC_ABI_VERSION_MAJOR, "wsync_abi_version major");
  return bad;
}
