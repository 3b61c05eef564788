/* C11: the pinned layout of abi_layout.h as _Static_asserts, so a public struct whose field moved
 * or changed size, or that grew or shrank, or a size constant that changed, breaks the BUILD of
 * test_abi_layout (test_abi_layout.c checks the same table at run time and names the field).
 * The numbers are those of LP64 Linux (x86_64, aarch64); elsewhere nothing is asserted. */
#include "abi_layout.h"

#if defined(__LP64__)

#define ABI_S(T, size) _Static_assert(sizeof(T) == (size), "sizeof(" #T ") is no longer " #size);
#define ABI_F(T, f, off, size)                                                               \
  _Static_assert(offsetof(T, f) == (off), #T "." #f " moved: its offset is no longer " #off); \
  _Static_assert(sizeof(((T*)0)->f) == (size), #T "." #f " changed size: no longer " #size);
#define ABI_C(T, c, value, f)                                               \
  _Static_assert((c) == (value), #c " is no longer " #value);               \
  _Static_assert((c) == offsetof(T, f) + sizeof(((T*)0)->f), #c " does not end at " #T "." #f);
#define ABI_I(T, init)

WSYNC_ABI_LAYOUT(ABI_S, ABI_F, ABI_C, ABI_I)

#undef ABI_S
#undef ABI_F
#undef ABI_C
#undef ABI_I

/* Every *_STRUCT_SIZE is its struct's sizeof (no tail padding hides after the last field). */
_Static_assert(WSYNC_OPTION_STRUCT_SIZE == sizeof(wsync_option_t), "WSYNC_OPTION_STRUCT_SIZE");
_Static_assert(WSYNC_TENSOR_STRUCT_SIZE == sizeof(wsync_tensor_t), "WSYNC_TENSOR_STRUCT_SIZE");
_Static_assert(WSYNC_GROUP_CONFIG_STRUCT_SIZE == sizeof(wsync_group_config_t), "WSYNC_GROUP_CONFIG_STRUCT_SIZE");
_Static_assert(WSYNC_GROUP_STATS_STRUCT_SIZE == sizeof(wsync_group_stats_t), "WSYNC_GROUP_STATS_STRUCT_SIZE");
_Static_assert(WSYNC_RECEIVER_CONFIG_STRUCT_SIZE == sizeof(wsync_receiver_config_t),
               "WSYNC_RECEIVER_CONFIG_STRUCT_SIZE");
_Static_assert(WSYNC_RECEIVER_EVENT_STRUCT_SIZE == sizeof(wsync_receiver_event_t), "WSYNC_RECEIVER_EVENT_STRUCT_SIZE");
_Static_assert(WSYNC_RECEIVER_STATE_STRUCT_SIZE == sizeof(wsync_receiver_state_t), "WSYNC_RECEIVER_STATE_STRUCT_SIZE");
_Static_assert(WSYNC_MEMBER_EVENT_STRUCT_SIZE == sizeof(wsync_member_event_t), "WSYNC_MEMBER_EVENT_STRUCT_SIZE");
_Static_assert(WSYNC_PLUGIN_INFO_STRUCT_SIZE == sizeof(wsync_plugin_info_t), "WSYNC_PLUGIN_INFO_STRUCT_SIZE");
_Static_assert(WSYNC_HOST_STRUCT_SIZE == sizeof(wsync_host_v1_t), "WSYNC_HOST_STRUCT_SIZE");
_Static_assert(WSYNC_TRANSPORT_PARAMS_STRUCT_SIZE == sizeof(wsync_transport_params_t),
               "WSYNC_TRANSPORT_PARAMS_STRUCT_SIZE");
_Static_assert(WSYNC_BUFFER_STRUCT_SIZE == sizeof(wsync_buffer_t), "WSYNC_BUFFER_STRUCT_SIZE");
_Static_assert(WSYNC_LAYOUT_RULE_STRUCT_SIZE == sizeof(wsync_layout_rule_t), "WSYNC_LAYOUT_RULE_STRUCT_SIZE");
_Static_assert(WSYNC_ADAPTER_PARAMS_STRUCT_SIZE == sizeof(wsync_adapter_params_t), "WSYNC_ADAPTER_PARAMS_STRUCT_SIZE");
_Static_assert(WSYNC_ADAPTER_NEEDS_STRUCT_SIZE == sizeof(wsync_adapter_needs_t), "WSYNC_ADAPTER_NEEDS_STRUCT_SIZE");
_Static_assert(WSYNC_ENGINE_STEP_STRUCT_SIZE == sizeof(wsync_engine_step_t), "WSYNC_ENGINE_STEP_STRUCT_SIZE");
_Static_assert(WSYNC_HTTP_REQUEST_STRUCT_SIZE == sizeof(wsync_http_request_t), "WSYNC_HTTP_REQUEST_STRUCT_SIZE");
_Static_assert(WSYNC_TRANSPORT_V1_5_SIZE == sizeof(wsync_transport_v1_t), "WSYNC_TRANSPORT_V1_5_SIZE");
_Static_assert(WSYNC_ADAPTER_V1_7_SIZE == sizeof(wsync_adapter_v1_t), "WSYNC_ADAPTER_V1_7_SIZE");

/* Something for the linker, and for the run-time test to see that these asserts were compiled. */
int abi_layout_static_checked(void) { return 1; }

#else

int abi_layout_static_checked(void) { return 0; }

#endif
