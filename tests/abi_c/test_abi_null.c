/* NULL arguments to every public function: WSYNC_ERR_INVALID_ARGUMENT naming the argument;
 * destroy/abort accept NULL; nothing crashes. (The same calls against live objects with a NULL
 * second argument are in test_abi_group.) */
#define _POSIX_C_SOURCE 200809L
#include "abi_test_util.h"

static void init_functions(void** state) {
  wsync_group_config_t gc = abi_group_config("nosuch");
  wsync_receiver_config_t rc = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_group_t* g = (wsync_group_t*)1;
  wsync_receiver_t* rx = (wsync_receiver_t*)1;
  (void)state;

  assert_status(wsync_group_init(NULL, &g), WSYNC_ERR_INVALID_ARGUMENT);
  assert_null(g); /* *out is NULL on failure */
  assert_contains(wsync_last_error(), "config");
  assert_status(wsync_group_init(&gc, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "out");
  assert_status(wsync_group_init(NULL, NULL), WSYNC_ERR_INVALID_ARGUMENT);

  assert_status(wsync_receiver_init(NULL, &rx), WSYNC_ERR_INVALID_ARGUMENT);
  assert_null(rx);
  assert_contains(wsync_last_error(), "config");
  rc.rank = 1;
  rc.store_addr = "127.0.0.1:1";
  assert_status(wsync_receiver_init(&rc, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "out");
  assert_status(wsync_receiver_init(NULL, NULL), WSYNC_ERR_INVALID_ARGUMENT);
}

static void group_functions(void** state) {
  wsync_group_stats_t stats = WSYNC_GROUP_STATS_INIT;
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  wsync_member_event_t ev = WSYNC_MEMBER_EVENT_INIT;
  uint32_t ranks[4];
  uint64_t count = 0;
  (void)state;
  assert_status(wsync_group_send_batch(NULL, &t, 1, 100), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "group");
  assert_status(wsync_group_send_batch(NULL, NULL, 0, 100), WSYNC_ERR_INVALID_ARGUMENT);
  assert_status(wsync_group_finalize(NULL, 1, 100), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "group");
  assert_status(wsync_group_get_stats(NULL, &stats), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "group");
  assert_status(wsync_group_get_stats(NULL, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  assert_status(wsync_group_next_member_event(NULL, &ev), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "group");
  assert_status(wsync_group_next_member_event(NULL, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  assert_status(wsync_group_members(NULL, ranks, 4, &count), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "group");
  assert_status(wsync_group_members(NULL, NULL, 0, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  /* Functions without a status: documented harmless answers. */
  assert_non_null(wsync_group_store_addr(NULL));
  assert_string_equal(wsync_group_store_addr(NULL), "");
  wsync_group_abort(NULL);
  wsync_group_destroy(NULL);
}

static void receiver_functions(void** state) {
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  wsync_receiver_state_t rs = WSYNC_RECEIVER_STATE_INIT;
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  (void)state;
  assert_status(wsync_receiver_register(NULL, &t, 1), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "receiver");
  assert_status(wsync_receiver_register(NULL, NULL, 0), WSYNC_ERR_INVALID_ARGUMENT);
  assert_status(wsync_receiver_next(NULL, &ev, 0), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "receiver");
  assert_status(wsync_receiver_next(NULL, NULL, 0), WSYNC_ERR_INVALID_ARGUMENT);
  assert_status(wsync_receiver_commit(NULL, 1), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "receiver");
  assert_int_equal(wsync_receiver_committed_version(NULL), 0);
  assert_status(wsync_receiver_get_state(NULL, &rs), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "receiver");
  assert_status(wsync_receiver_get_state(NULL, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  assert_null(wsync_receiver_touched_name(NULL, 0));
  wsync_receiver_destroy(NULL);
}

static void log_and_lookups_accept_anything(void** state) {
  (void)state;
  wsync_set_log_callback(NULL, NULL, WSYNC_LOG_TRACE); /* restores the default sink */
  wsync_set_log_callback(NULL, (void*)1, -5);
  assert_non_null(wsync_last_error());
  assert_non_null(wsync_status_name(-1));
  assert_non_null(wsync_status_doc(-1));
  assert_non_null(wsync_dtype_name(-1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(init_functions),
      cmocka_unit_test(group_functions),
      cmocka_unit_test(receiver_functions),
      cmocka_unit_test(log_and_lookups_accept_anything),
  };
  abi_use_testing_plugins();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
