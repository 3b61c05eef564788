#include "shim.h"

#include <string.h>

#include "_cgo_export.h"

static wsgo_status result(wsync_status_t st) {
  wsgo_status r = {st, NULL};
  /* Read in the same C call, on the same thread, as the call that failed. */
  if (st != WSYNC_OK) r.message = strdup(wsync_last_error());
  return r;
}

wsgo_status wsgo_group_init(const wsync_group_config_t* config, wsync_group_t** out) {
  return result(wsync_group_init(config, out));
}

wsgo_status wsgo_group_send_batch(wsync_group_t* group, const wsync_tensor_t* tensors, uint64_t num_tensors,
                                  int64_t timeout_ms) {
  return result(wsync_group_send_batch(group, tensors, num_tensors, timeout_ms));
}

wsgo_status wsgo_group_send_start(wsync_group_t* group, const wsync_tensor_t* tensors, uint64_t num_tensors,
                                  int64_t timeout_ms, uint64_t* ticket) {
  return result(wsync_group_send_start(group, tensors, num_tensors, timeout_ms, ticket));
}

wsgo_status wsgo_group_send_wait(wsync_group_t* group, uint64_t ticket, int64_t timeout_ms) {
  return result(wsync_group_send_wait(group, ticket, timeout_ms));
}

wsgo_status wsgo_group_set_cuda_stream(wsync_group_t* group, uintptr_t stream) {
  return result(wsync_group_set_cuda_stream(group, (void*)stream));
}

wsgo_status wsgo_group_finalize(wsync_group_t* group, uint64_t version, int64_t timeout_ms) {
  return result(wsync_group_finalize(group, version, timeout_ms));
}

wsgo_status wsgo_group_get_stats(const wsync_group_t* group, wsync_group_stats_t* stats) {
  return result(wsync_group_get_stats(group, stats));
}

wsgo_status wsgo_group_next_member_event(wsync_group_t* group, wsync_member_event_t* event) {
  event->struct_size = WSYNC_MEMBER_EVENT_STRUCT_SIZE;
  return result(wsync_group_next_member_event(group, event));
}

wsgo_status wsgo_group_members(const wsync_group_t* group, uint32_t* ranks, uint64_t capacity, uint64_t* count) {
  return result(wsync_group_members(group, ranks, capacity, count));
}

wsgo_status wsgo_receiver_init(const wsync_receiver_config_t* config, wsync_receiver_t** out) {
  return result(wsync_receiver_init(config, out));
}

wsgo_status wsgo_receiver_register(wsync_receiver_t* rx, const wsync_tensor_t* buffers, uint64_t num_buffers) {
  return result(wsync_receiver_register(rx, buffers, num_buffers));
}

wsgo_status wsgo_receiver_next(wsync_receiver_t* rx, wsync_receiver_event_t* event, int64_t timeout_ms) {
  return result(wsync_receiver_next(rx, event, timeout_ms));
}

wsgo_status wsgo_receiver_commit(wsync_receiver_t* rx, uint64_t version) {
  return result(wsync_receiver_commit(rx, version));
}

wsgo_status wsgo_receiver_get_state(const wsync_receiver_t* rx, wsync_receiver_state_t* state) {
  const wsync_receiver_state_t init = WSYNC_RECEIVER_STATE_INIT;
  *state = init;
  return result(wsync_receiver_get_state(rx, state));
}

/* wsync's callback: forwards to the exported Go function with the handle it was given. */
static void wsgo_log_trampoline(void* user_data, int32_t level, const char* message) {
  wsgoLog((uintptr_t)user_data, level, (char*)message);
}

void wsgo_set_log_callback(uintptr_t handle, int32_t max_level) {
  if (handle == 0)
    wsync_set_log_callback(NULL, NULL, max_level);
  else
    wsync_set_log_callback(wsgo_log_trampoline, (void*)handle, max_level);
}

wsync_tensor_t* wsgo_tensors_new(uint64_t n) {
  if (n == 0) n = 1;
  wsync_tensor_t* t = calloc(n, sizeof *t);
  if (t == NULL) return NULL;
  const wsync_tensor_t init = WSYNC_TENSOR_INIT;
  for (uint64_t i = 0; i < n; ++i) t[i] = init;
  return t;
}

wsync_option_t* wsgo_options_new(uint64_t n) {
  if (n == 0) n = 1;
  wsync_option_t* o = calloc(n, sizeof *o);
  if (o == NULL) return NULL;
  for (uint64_t i = 0; i < n; ++i) o[i].struct_size = (uint32_t)WSYNC_OPTION_STRUCT_SIZE;
  return o;
}

wsync_group_config_t* wsgo_group_config_new(void) {
  wsync_group_config_t* c = malloc(sizeof *c);
  if (c == NULL) return NULL;
  const wsync_group_config_t init = WSYNC_GROUP_CONFIG_INIT;
  *c = init;
  return c;
}

wsync_receiver_config_t* wsgo_receiver_config_new(void) {
  wsync_receiver_config_t* c = malloc(sizeof *c);
  if (c == NULL) return NULL;
  const wsync_receiver_config_t init = WSYNC_RECEIVER_CONFIG_INIT;
  *c = init;
  return c;
}

wsync_receiver_event_t* wsgo_receiver_event_new(void) {
  wsync_receiver_event_t* e = malloc(sizeof *e);
  if (e != NULL) wsgo_receiver_event_reset(e);
  return e;
}

void wsgo_tensor_set_device_ptr(wsync_tensor_t* t, uintptr_t ptr) { t->data = (void*)ptr; }

void wsgo_receiver_event_reset(wsync_receiver_event_t* event) {
  const wsync_receiver_event_t init = WSYNC_RECEIVER_EVENT_INIT;
  *event = init;
}
