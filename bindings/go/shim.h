/* The C shims of the Go binding: every fallible wsync call goes through one of these, which
 * copies wsync_last_error() into the result in the same C call that failed. A goroutine may move
 * to another OS thread between two cgo calls, and the error is thread-local, so Go cannot read it
 * with a second call. */
#ifndef WSYNC_GO_SHIM_H_
#define WSYNC_GO_SHIM_H_

#include <stdint.h>
#include <stdlib.h>

#include "wsync.h"

/* What a shim returns: the status and, on failure, a malloc'ed copy of wsync_last_error()
 * (NULL on success or when the copy failed). The caller frees message. */
typedef struct wsgo_status {
  wsync_status_t status;
  char* message;
} wsgo_status;

wsgo_status wsgo_group_init(const wsync_group_config_t* config, wsync_group_t** out);
wsgo_status wsgo_group_send_batch(wsync_group_t* group, const wsync_tensor_t* tensors, uint64_t num_tensors,
                                  int64_t timeout_ms);
wsgo_status wsgo_group_send_start(wsync_group_t* group, const wsync_tensor_t* tensors, uint64_t num_tensors,
                                  int64_t timeout_ms, uint64_t* ticket);
wsgo_status wsgo_group_send_wait(wsync_group_t* group, uint64_t ticket, int64_t timeout_ms);
wsgo_status wsgo_group_set_cuda_stream(wsync_group_t* group, uintptr_t stream);
wsgo_status wsgo_group_finalize(wsync_group_t* group, uint64_t version, int64_t timeout_ms);
wsgo_status wsgo_group_get_stats(const wsync_group_t* group, wsync_group_stats_t* stats);
wsgo_status wsgo_group_next_member_event(wsync_group_t* group, wsync_member_event_t* event);
wsgo_status wsgo_group_members(const wsync_group_t* group, uint32_t* ranks, uint64_t capacity, uint64_t* count);

wsgo_status wsgo_receiver_init(const wsync_receiver_config_t* config, wsync_receiver_t** out);
wsgo_status wsgo_receiver_register(wsync_receiver_t* rx, const wsync_tensor_t* buffers, uint64_t num_buffers);
wsgo_status wsgo_receiver_next(wsync_receiver_t* rx, wsync_receiver_event_t* event, int64_t timeout_ms);
wsgo_status wsgo_receiver_commit(wsync_receiver_t* rx, uint64_t version);
/* Since ABI 1.4: *state is set to WSYNC_RECEIVER_STATE_INIT, then filled. */
wsgo_status wsgo_receiver_get_state(const wsync_receiver_t* rx, wsync_receiver_state_t* state);

/* Routes wsync's log lines to the Go function behind the cgo.Handle `handle` (0 = the default
 * sink, stderr). Returns once calls of the previous callback in progress returned (see
 * wsync_set_log_callback). */
void wsgo_set_log_callback(uintptr_t handle, int32_t max_level);

/* Calloc'ed arrays of `n` initialised descriptors ({struct_size, ...} as the *_INIT macros). */
wsync_tensor_t* wsgo_tensors_new(uint64_t n);
wsync_option_t* wsgo_options_new(uint64_t n);
wsync_group_config_t* wsgo_group_config_new(void);
wsync_receiver_config_t* wsgo_receiver_config_new(void);
wsync_receiver_event_t* wsgo_receiver_event_new(void);
/* t->data = (void*)ptr: a device address, which Go holds as a uintptr. */
void wsgo_tensor_set_device_ptr(wsync_tensor_t* t, uintptr_t ptr);
/* Resets *event to WSYNC_RECEIVER_EVENT_INIT. */
void wsgo_receiver_event_reset(wsync_receiver_event_t* event);

#endif
