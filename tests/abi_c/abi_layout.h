/* The pinned layout of every public struct of wsync.h and wsync_plugin.h on LP64 Linux (x86_64,
 * aarch64): ONE X-macro table, used by abi_layout_static.c (C11 _Static_assert: a moved or resized
 * field breaks the build) and by test_abi_layout.c (the same checks at run time, naming the field).
 *
 * The numbers were computed by hand from the headers (pointers, int64, uint64 and double are 8
 * bytes, int32 and uint32 4, natural alignment) and checked with a compiled program. They are
 * PINNED: never edit a number to make a test pass. A field may only be APPENDED to a struct (then
 * add its row, move the struct's sizeof and its *_STRUCT_SIZE row, and bump the ABI minor); any
 * other change to this table is an ABI break.
 *
 * WSYNC_ABI_LAYOUT(S, F, C, I) expands, for each struct, to
 *   S(type, expected_sizeof)                       once, first
 *   F(type, field, expected_offset, expected_size) each field, in declaration order
 *   C(type, constant, expected_value, up_to_field) each size constant of the struct: the pinned
 *                                                  value, and the field it must end at
 *   I(type, initializer)                           each *_INIT macro (WSYNC_OPTION for options):
 *                                                  its struct_size must be the *_STRUCT_SIZE
 * Define the four macros (any may expand to nothing), expand the table, undefine them.
 * wsync_iov_t has no struct_size on purpose (a frozen pair, like struct iovec): layout only.
 * wsync_host_v1_t, wsync_transport_v1_t and wsync_adapter_v1_t have no *_INIT macro. */
#ifndef WSYNC_ABI_LAYOUT_H_
#define WSYNC_ABI_LAYOUT_H_

#include <stddef.h>

#include "wsync.h"
#include "wsync_plugin.h"

/* clang-format off */
#define WSYNC_ABI_LAYOUT(S, F, C, I) \
  /* ---- wsync.h ---- */ \
  S(wsync_option_t, 24) \
  F(wsync_option_t, struct_size, 0, 4) \
  F(wsync_option_t, reserved0, 4, 4) \
  F(wsync_option_t, key, 8, 8) \
  F(wsync_option_t, value, 16, 8) \
  C(wsync_option_t, WSYNC_OPTION_STRUCT_SIZE, 24, value) \
  I(wsync_option_t, WSYNC_OPTION("k", "v")) \
  \
  S(wsync_tensor_t, 248) \
  F(wsync_tensor_t, struct_size, 0, 4) \
  F(wsync_tensor_t, dtype, 4, 4) \
  F(wsync_tensor_t, name, 8, 8) \
  F(wsync_tensor_t, data, 16, 8) \
  F(wsync_tensor_t, nbytes, 24, 8) \
  F(wsync_tensor_t, ndim, 32, 4) \
  F(wsync_tensor_t, device_type, 36, 4) \
  F(wsync_tensor_t, device_index, 40, 4) \
  F(wsync_tensor_t, reserved0, 44, 4) \
  F(wsync_tensor_t, shape, 48, 64) \
  F(wsync_tensor_t, flags, 112, 4) \
  F(wsync_tensor_t, reserved1, 116, 4) \
  F(wsync_tensor_t, full_shape, 120, 64) \
  F(wsync_tensor_t, box_offset, 184, 64) \
  C(wsync_tensor_t, WSYNC_TENSOR_STRUCT_SIZE, 248, box_offset) \
  I(wsync_tensor_t, WSYNC_TENSOR_INIT) \
  \
  S(wsync_group_config_t, 64) \
  F(wsync_group_config_t, struct_size, 0, 4) \
  F(wsync_group_config_t, num_receivers, 4, 4) \
  F(wsync_group_config_t, group_name, 8, 8) \
  F(wsync_group_config_t, store_addr, 16, 8) \
  F(wsync_group_config_t, transport, 24, 8) \
  F(wsync_group_config_t, adapter, 32, 8) \
  F(wsync_group_config_t, options, 40, 8) \
  F(wsync_group_config_t, num_options, 48, 8) \
  F(wsync_group_config_t, timeout_ms, 56, 8) \
  C(wsync_group_config_t, WSYNC_GROUP_CONFIG_STRUCT_SIZE, 64, timeout_ms) \
  I(wsync_group_config_t, WSYNC_GROUP_CONFIG_INIT) \
  \
  S(wsync_group_stats_t, 96) \
  F(wsync_group_stats_t, struct_size, 0, 4) \
  F(wsync_group_stats_t, num_receivers, 4, 4) \
  F(wsync_group_stats_t, committed_version, 8, 8) \
  F(wsync_group_stats_t, updates, 16, 8) \
  F(wsync_group_stats_t, batches, 24, 8) \
  F(wsync_group_stats_t, buckets, 32, 8) \
  F(wsync_group_stats_t, tensors, 40, 8) \
  F(wsync_group_stats_t, bytes, 48, 8) \
  F(wsync_group_stats_t, staging_bytes, 56, 8) \
  F(wsync_group_stats_t, send_seconds, 64, 8) \
  F(wsync_group_stats_t, device_staging_bytes, 72, 8) \
  F(wsync_group_stats_t, plans_computed, 80, 8) \
  F(wsync_group_stats_t, members, 88, 4) \
  F(wsync_group_stats_t, members_left, 92, 4) \
  C(wsync_group_stats_t, WSYNC_GROUP_STATS_STRUCT_SIZE, 96, members_left) \
  I(wsync_group_stats_t, WSYNC_GROUP_STATS_INIT) \
  \
  S(wsync_receiver_config_t, 56) \
  F(wsync_receiver_config_t, struct_size, 0, 4) \
  F(wsync_receiver_config_t, rank, 4, 4) \
  F(wsync_receiver_config_t, store_addr, 8, 8) \
  F(wsync_receiver_config_t, group_name, 16, 8) \
  F(wsync_receiver_config_t, transport, 24, 8) \
  F(wsync_receiver_config_t, options, 32, 8) \
  F(wsync_receiver_config_t, num_options, 40, 8) \
  F(wsync_receiver_config_t, timeout_ms, 48, 8) \
  C(wsync_receiver_config_t, WSYNC_RECEIVER_CONFIG_STRUCT_SIZE, 56, timeout_ms) \
  I(wsync_receiver_config_t, WSYNC_RECEIVER_CONFIG_INIT) \
  \
  S(wsync_receiver_event_t, 56) \
  F(wsync_receiver_event_t, struct_size, 0, 4) \
  F(wsync_receiver_event_t, kind, 4, 4) \
  F(wsync_receiver_event_t, version, 8, 8) \
  F(wsync_receiver_event_t, bucket_index, 16, 8) \
  F(wsync_receiver_event_t, num_tensors, 24, 8) \
  F(wsync_receiver_event_t, tensors, 32, 8) \
  F(wsync_receiver_event_t, placed, 40, 8) \
  F(wsync_receiver_event_t, bytes, 48, 8) \
  C(wsync_receiver_event_t, WSYNC_RECEIVER_EVENT_STRUCT_SIZE, 56, bytes) \
  I(wsync_receiver_event_t, WSYNC_RECEIVER_EVENT_INIT) \
  \
  /* since 1.4 */ \
  S(wsync_receiver_state_t, 64) \
  F(wsync_receiver_state_t, struct_size, 0, 4) \
  F(wsync_receiver_state_t, receive_mode, 4, 4) \
  F(wsync_receiver_state_t, committed_version, 8, 8) \
  F(wsync_receiver_state_t, pending_version, 16, 8) \
  F(wsync_receiver_state_t, buffers, 24, 4) \
  F(wsync_receiver_state_t, late_writes, 28, 4) \
  F(wsync_receiver_state_t, num_touched, 32, 8) \
  F(wsync_receiver_state_t, staged_bytes, 40, 8) \
  F(wsync_receiver_state_t, num_senders, 48, 4) \
  F(wsync_receiver_state_t, planned, 52, 4) \
  F(wsync_receiver_state_t, rank, 56, 4) \
  F(wsync_receiver_state_t, rank_assigned, 60, 4) \
  C(wsync_receiver_state_t, WSYNC_RECEIVER_STATE_STRUCT_SIZE, 64, rank_assigned) \
  I(wsync_receiver_state_t, WSYNC_RECEIVER_STATE_INIT) \
  \
  S(wsync_member_event_t, 32) \
  F(wsync_member_event_t, struct_size, 0, 4) \
  F(wsync_member_event_t, kind, 4, 4) \
  F(wsync_member_event_t, rank, 8, 4) \
  F(wsync_member_event_t, status, 12, 4) \
  F(wsync_member_event_t, update, 16, 8) \
  F(wsync_member_event_t, reason, 24, 8) \
  C(wsync_member_event_t, WSYNC_MEMBER_EVENT_STRUCT_SIZE, 32, reason) \
  I(wsync_member_event_t, WSYNC_MEMBER_EVENT_INIT) \
  \
  S(wsync_plugin_info_t, 72) \
  F(wsync_plugin_info_t, struct_size, 0, 4) \
  F(wsync_plugin_info_t, kind, 4, 4) \
  F(wsync_plugin_info_t, name, 8, 8) \
  F(wsync_plugin_info_t, path, 16, 8) \
  F(wsync_plugin_info_t, version, 24, 8) \
  F(wsync_plugin_info_t, detail, 32, 8) \
  F(wsync_plugin_info_t, error, 40, 8) \
  F(wsync_plugin_info_t, caps, 48, 8) \
  F(wsync_plugin_info_t, abi_major, 56, 4) \
  F(wsync_plugin_info_t, abi_minor, 60, 4) \
  F(wsync_plugin_info_t, status, 64, 4) \
  F(wsync_plugin_info_t, shadowed, 68, 4) \
  C(wsync_plugin_info_t, WSYNC_PLUGIN_INFO_STRUCT_SIZE, 72, shadowed) \
  I(wsync_plugin_info_t, WSYNC_PLUGIN_INFO_INIT) \
  \
  /* ---- wsync_plugin.h ---- */ \
  S(wsync_host_v1_t, 72) \
  F(wsync_host_v1_t, struct_size, 0, 4) \
  F(wsync_host_v1_t, abi_version, 4, 4) \
  F(wsync_host_v1_t, log, 8, 8) \
  F(wsync_host_v1_t, set_error, 16, 8) \
  F(wsync_host_v1_t, store_set, 24, 8) \
  F(wsync_host_v1_t, store_get, 32, 8) \
  F(wsync_host_v1_t, store_add, 40, 8) \
  F(wsync_host_v1_t, alloc_host, 48, 8) \
  F(wsync_host_v1_t, free_host, 56, 8) \
  F(wsync_host_v1_t, abi_minor, 64, 4) \
  F(wsync_host_v1_t, reserved0, 68, 4) \
  C(wsync_host_v1_t, WSYNC_HOST_STRUCT_SIZE, 72, reserved0) \
  \
  S(wsync_transport_params_t, 80) \
  F(wsync_transport_params_t, struct_size, 0, 4) \
  F(wsync_transport_params_t, rank, 4, 4) \
  F(wsync_transport_params_t, world_size, 8, 4) \
  F(wsync_transport_params_t, reserved0, 12, 4) \
  F(wsync_transport_params_t, group_name, 16, 8) \
  F(wsync_transport_params_t, store, 24, 8) \
  F(wsync_transport_params_t, options, 32, 8) \
  F(wsync_transport_params_t, num_options, 40, 8) \
  F(wsync_transport_params_t, timeout_ms, 48, 8) \
  F(wsync_transport_params_t, device_index, 56, 4) \
  F(wsync_transport_params_t, reserved1, 60, 4) \
  F(wsync_transport_params_t, hints, 64, 8) \
  F(wsync_transport_params_t, num_hints, 72, 8) \
  C(wsync_transport_params_t, WSYNC_TRANSPORT_PARAMS_STRUCT_SIZE, 80, num_hints) \
  I(wsync_transport_params_t, WSYNC_TRANSPORT_PARAMS_INIT) \
  \
  S(wsync_buffer_t, 40) \
  F(wsync_buffer_t, struct_size, 0, 4) \
  F(wsync_buffer_t, device_type, 4, 4) \
  F(wsync_buffer_t, device_index, 8, 4) \
  F(wsync_buffer_t, reserved0, 12, 4) \
  F(wsync_buffer_t, data, 16, 8) \
  F(wsync_buffer_t, len, 24, 8) \
  F(wsync_buffer_t, stream, 32, 8) \
  C(wsync_buffer_t, WSYNC_BUFFER_STRUCT_SIZE, 40, stream) \
  I(wsync_buffer_t, WSYNC_BUFFER_INIT) \
  \
  S(wsync_iov_t, 16) \
  F(wsync_iov_t, base, 0, 8) \
  F(wsync_iov_t, len, 8, 8) \
  \
  S(wsync_transport_v1_t, 184) \
  F(wsync_transport_v1_t, struct_size, 0, 4) \
  F(wsync_transport_v1_t, abi_version, 4, 4) \
  F(wsync_transport_v1_t, name, 8, 8) \
  F(wsync_transport_v1_t, version, 16, 8) \
  F(wsync_transport_v1_t, caps, 24, 8) \
  F(wsync_transport_v1_t, create, 32, 8) \
  F(wsync_transport_v1_t, connect, 40, 8) \
  F(wsync_transport_v1_t, send_post, 48, 8) \
  F(wsync_transport_v1_t, send_wait, 56, 8) \
  F(wsync_transport_v1_t, recv_post, 64, 8) \
  F(wsync_transport_v1_t, recv_wait, 72, 8) \
  F(wsync_transport_v1_t, forget_peer, 80, 8) \
  F(wsync_transport_v1_t, abort, 88, 8) \
  F(wsync_transport_v1_t, destroy, 96, 8) \
  F(wsync_transport_v1_t, register_staging, 104, 8) \
  F(wsync_transport_v1_t, get_property, 112, 8) \
  F(wsync_transport_v1_t, get_event_fd, 120, 8) \
  F(wsync_transport_v1_t, arm, 128, 8) \
  F(wsync_transport_v1_t, describe_send, 136, 8) \
  F(wsync_transport_v1_t, describe_recv, 144, 8) \
  F(wsync_transport_v1_t, peer_blob, 152, 8) \
  F(wsync_transport_v1_t, runtime_info, 160, 8) \
  F(wsync_transport_v1_t, progress, 168, 8) \
  F(wsync_transport_v1_t, connect_peer, 176, 8) \
  C(wsync_transport_v1_t, WSYNC_TRANSPORT_V1_0_SIZE, 104, destroy) \
  C(wsync_transport_v1_t, WSYNC_TRANSPORT_V1_1_SIZE, 120, get_property) \
  C(wsync_transport_v1_t, WSYNC_TRANSPORT_V1_2_SIZE, 168, runtime_info) \
  C(wsync_transport_v1_t, WSYNC_TRANSPORT_V1_4_SIZE, 176, progress) \
  C(wsync_transport_v1_t, WSYNC_TRANSPORT_V1_5_SIZE, 184, connect_peer) \
  \
  S(wsync_layout_rule_t, 32) \
  F(wsync_layout_rule_t, struct_size, 0, 4) \
  F(wsync_layout_rule_t, kind, 4, 4) \
  F(wsync_layout_rule_t, alignment, 8, 4) \
  F(wsync_layout_rule_t, allow_split, 12, 4) \
  F(wsync_layout_rule_t, reserved0, 16, 4) \
  /* 4 bytes of padding at 20: bucket_bytes (since 1.1) is 8-aligned */ \
  F(wsync_layout_rule_t, bucket_bytes, 24, 8) \
  C(wsync_layout_rule_t, WSYNC_LAYOUT_RULE_STRUCT_SIZE, 32, bucket_bytes) \
  I(wsync_layout_rule_t, WSYNC_LAYOUT_RULE_INIT) \
  \
  S(wsync_adapter_params_t, 32) \
  F(wsync_adapter_params_t, struct_size, 0, 4) \
  F(wsync_adapter_params_t, num_receivers, 4, 4) \
  F(wsync_adapter_params_t, group_name, 8, 8) \
  F(wsync_adapter_params_t, options, 16, 8) \
  F(wsync_adapter_params_t, num_options, 24, 8) \
  C(wsync_adapter_params_t, WSYNC_ADAPTER_PARAMS_STRUCT_SIZE, 32, num_options) \
  I(wsync_adapter_params_t, WSYNC_ADAPTER_PARAMS_INIT) \
  \
  S(wsync_adapter_needs_t, 40) \
  F(wsync_adapter_needs_t, struct_size, 0, 4) \
  F(wsync_adapter_needs_t, reserved0, 4, 4) \
  F(wsync_adapter_needs_t, transport_hints, 8, 8) \
  F(wsync_adapter_needs_t, num_transport_hints, 16, 8) \
  F(wsync_adapter_needs_t, transport_properties, 24, 8) \
  F(wsync_adapter_needs_t, num_transport_properties, 32, 8) \
  C(wsync_adapter_needs_t, WSYNC_ADAPTER_NEEDS_STRUCT_SIZE, 40, num_transport_properties) \
  I(wsync_adapter_needs_t, WSYNC_ADAPTER_NEEDS_INIT) \
  \
  S(wsync_engine_step_t, 136) \
  F(wsync_engine_step_t, struct_size, 0, 4) \
  F(wsync_engine_step_t, step, 4, 4) \
  F(wsync_engine_step_t, server_index, 8, 4) \
  F(wsync_engine_step_t, server_gpus, 12, 4) \
  F(wsync_engine_step_t, rank_offset, 16, 4) \
  F(wsync_engine_step_t, world_size, 20, 4) \
  F(wsync_engine_step_t, master_address, 24, 8) \
  F(wsync_engine_step_t, master_port, 32, 4) \
  F(wsync_engine_step_t, reserved0, 36, 4) \
  F(wsync_engine_step_t, group_name, 40, 8) \
  F(wsync_engine_step_t, retired_ptr0, 48, 8) \
  F(wsync_engine_step_t, num_tensors, 56, 8) \
  F(wsync_engine_step_t, names, 64, 8) \
  F(wsync_engine_step_t, dtypes, 72, 8) \
  F(wsync_engine_step_t, ndims, 80, 8) \
  F(wsync_engine_step_t, shapes, 88, 8) \
  F(wsync_engine_step_t, bucket_bytes, 96, 8) \
  F(wsync_engine_step_t, update_index, 104, 8) \
  F(wsync_engine_step_t, version, 112, 8) \
  F(wsync_engine_step_t, properties, 120, 8) \
  F(wsync_engine_step_t, num_properties, 128, 8) \
  C(wsync_engine_step_t, WSYNC_ENGINE_STEP_STRUCT_SIZE, 136, num_properties) \
  I(wsync_engine_step_t, WSYNC_ENGINE_STEP_INIT) \
  \
  S(wsync_http_request_t, 32) \
  F(wsync_http_request_t, struct_size, 0, 4) \
  F(wsync_http_request_t, method, 4, 4) \
  F(wsync_http_request_t, path, 8, 8) \
  F(wsync_http_request_t, body, 16, 8) \
  F(wsync_http_request_t, idempotent, 24, 4) \
  F(wsync_http_request_t, reply, 28, 4) \
  C(wsync_http_request_t, WSYNC_HTTP_REQUEST_STRUCT_SIZE, 32, reply) \
  I(wsync_http_request_t, WSYNC_HTTP_REQUEST_INIT) \
  \
  S(wsync_adapter_v1_t, 96) \
  F(wsync_adapter_v1_t, struct_size, 0, 4) \
  F(wsync_adapter_v1_t, abi_version, 4, 4) \
  F(wsync_adapter_v1_t, name, 8, 8) \
  F(wsync_adapter_v1_t, version, 16, 8) \
  F(wsync_adapter_v1_t, caps, 24, 8) \
  F(wsync_adapter_v1_t, create, 32, 8) \
  F(wsync_adapter_v1_t, get_layout, 40, 8) \
  F(wsync_adapter_v1_t, destroy, 48, 8) \
  F(wsync_adapter_v1_t, build_requests, 56, 8) \
  F(wsync_adapter_v1_t, get_needs, 64, 8) \
  F(wsync_adapter_v1_t, runtime_info, 72, 8) \
  F(wsync_adapter_v1_t, take_reply, 80, 8) \
  F(wsync_adapter_v1_t, held, 88, 8) \
  C(wsync_adapter_v1_t, WSYNC_ADAPTER_V1_0_SIZE, 56, destroy) \
  C(wsync_adapter_v1_t, WSYNC_ADAPTER_V1_1_SIZE, 64, build_requests) \
  C(wsync_adapter_v1_t, WSYNC_ADAPTER_V1_2_SIZE, 80, runtime_info) \
  C(wsync_adapter_v1_t, WSYNC_ADAPTER_V1_3_SIZE, 88, take_reply) \
  C(wsync_adapter_v1_t, WSYNC_ADAPTER_V1_7_SIZE, 96, held)
/* clang-format on */

/* The number of structs in the table (every public struct of both headers). */
#define WSYNC_ABI_LAYOUT_NUM_STRUCTS 20

#endif /* WSYNC_ABI_LAYOUT_H_ */
