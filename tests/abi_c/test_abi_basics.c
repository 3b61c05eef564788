/* Status codes, versions, dtypes and wsync_last_error through the public C ABI only. */
#define _POSIX_C_SOURCE 200809L
#include "abi_test_util.h"

static void status_codes_have_distinct_names_and_docs(void** state) {
  int32_t i, j;
  (void)state;
  for (i = 0; i < WSYNC_STATUS_COUNT; ++i) {
    const char* name = wsync_status_name(i);
    const char* doc = wsync_status_doc(i);
    assert_non_null(name);
    assert_non_null(doc);
    assert_true(strlen(name) > strlen("WSYNC_"));
    assert_int_equal(strncmp(name, "WSYNC_", 6), 0);
    assert_true(strlen(doc) > 0);
    assert_string_not_equal(name, "WSYNC_ERR_UNKNOWN");
    for (j = 0; j < i; ++j) {
      assert_string_not_equal(name, wsync_status_name(j));
      assert_string_not_equal(doc, wsync_status_doc(j));
    }
  }
}

static void status_names_are_pinned(void** state) {
  (void)state;
  assert_string_equal(wsync_status_name(WSYNC_OK), "WSYNC_OK");
  assert_string_equal(wsync_status_name(WSYNC_ERR_INVALID_ARGUMENT), "WSYNC_ERR_INVALID_ARGUMENT");
  assert_string_equal(wsync_status_name(WSYNC_ERR_NOT_FOUND), "WSYNC_ERR_NOT_FOUND");
  assert_string_equal(wsync_status_name(WSYNC_ERR_VERSION_MISMATCH), "WSYNC_ERR_VERSION_MISMATCH");
  assert_string_equal(wsync_status_name(WSYNC_ERR_UNSUPPORTED), "WSYNC_ERR_UNSUPPORTED");
  assert_string_equal(wsync_status_name(WSYNC_ERR_TIMEOUT), "WSYNC_ERR_TIMEOUT");
  assert_string_equal(wsync_status_name(WSYNC_ERR_ABORTED), "WSYNC_ERR_ABORTED");
  assert_string_equal(wsync_status_name(WSYNC_ERR_PROTOCOL), "WSYNC_ERR_PROTOCOL");
  assert_string_equal(wsync_status_name(WSYNC_ERR_IO), "WSYNC_ERR_IO");
  assert_string_equal(wsync_status_name(WSYNC_ERR_PEER_FAILED), "WSYNC_ERR_PEER_FAILED");
  assert_string_equal(wsync_status_name(WSYNC_ERR_OUT_OF_MEMORY), "WSYNC_ERR_OUT_OF_MEMORY");
  assert_string_equal(wsync_status_name(WSYNC_ERR_INVALID_STATE), "WSYNC_ERR_INVALID_STATE");
  assert_string_equal(wsync_status_name(WSYNC_ERR_ENGINE), "WSYNC_ERR_ENGINE");
  assert_string_equal(wsync_status_name(WSYNC_ERR_INTERNAL), "WSYNC_ERR_INTERNAL");
  assert_string_equal(wsync_status_name(WSYNC_ERR_NO_DEVICE), "WSYNC_ERR_NO_DEVICE");
  assert_string_equal(wsync_status_name(WSYNC_ERR_REJECTED), "WSYNC_ERR_REJECTED");
  assert_int_equal(WSYNC_STATUS_COUNT, 16);
}

static void unknown_status_codes(void** state) {
  const int32_t bad[] = {-1, WSYNC_STATUS_COUNT, WSYNC_STATUS_COUNT + 1, 1000, INT32_MIN, INT32_MAX};
  size_t i;
  (void)state;
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_string_equal(wsync_status_name(bad[i]), "WSYNC_ERR_UNKNOWN");
    assert_non_null(wsync_status_doc(bad[i]));
    assert_true(strlen(wsync_status_doc(bad[i])) > 0);
  }
}

static void versions(void** state) {
  uint32_t v = wsync_abi_version();
  const char* s = wsync_version_string();
  (void)state;
  assert_int_equal(v >> 16, WSYNC_ABI_VERSION_MAJOR);
  assert_int_equal(WSYNC_ABI_VERSION, (WSYNC_ABI_VERSION_MAJOR << 16) | WSYNC_ABI_VERSION_MINOR);
  assert_non_null(s);
  assert_true(strlen(s) > 0);
  assert_non_null(strchr(s, '.')); /* "major.minor.patch" */
}

static void dtypes(void** state) {
  static const struct {
    int32_t code;
    uint32_t size;
    const char* name;
  } want[] = {
      {WSYNC_DTYPE_BOOL, 1, "bool"},          {WSYNC_DTYPE_INT8, 1, "int8"},
      {WSYNC_DTYPE_INT16, 2, "int16"},        {WSYNC_DTYPE_INT32, 4, "int32"},
      {WSYNC_DTYPE_INT64, 8, "int64"},        {WSYNC_DTYPE_UINT8, 1, "uint8"},
      {WSYNC_DTYPE_FLOAT16, 2, "float16"},    {WSYNC_DTYPE_BFLOAT16, 2, "bfloat16"},
      {WSYNC_DTYPE_FLOAT32, 4, "float32"},    {WSYNC_DTYPE_FLOAT64, 8, "float64"},
      {WSYNC_DTYPE_FLOAT8_E4M3, 1, "float8_e4m3fn"}, {WSYNC_DTYPE_FLOAT8_E5M2, 1, "float8_e5m2"},
  };
  const int32_t bad[] = {WSYNC_DTYPE_INVALID, -1, WSYNC_DTYPE_COUNT, 1000, INT32_MIN};
  size_t i;
  int seen[WSYNC_DTYPE_COUNT] = {0};
  (void)state;
  assert_int_equal(sizeof want / sizeof want[0], WSYNC_DTYPE_COUNT - 1);
  for (i = 0; i < sizeof want / sizeof want[0]; ++i) {
    assert_int_equal(wsync_dtype_size(want[i].code), want[i].size);
    assert_string_equal(wsync_dtype_name(want[i].code), want[i].name);
    seen[want[i].code] = 1;
  }
  for (i = 1; i < WSYNC_DTYPE_COUNT; ++i) assert_true(seen[i]); /* every code covered */
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_int_equal(wsync_dtype_size(bad[i]), 0);
    assert_string_equal(wsync_dtype_name(bad[i]), "invalid");
  }
}

static void last_error_names_the_problem(void** state) {
  wsync_group_config_t c = abi_group_config("nosuch");
  wsync_group_t* g = (wsync_group_t*)1;
  const char* e;
  (void)state;
  abi_use_testing_plugins();
  /* Fresh thread state: never NULL. */
  assert_non_null(wsync_last_error());

  c.num_receivers = 0;
  assert_status(wsync_group_init(&c, &g), WSYNC_ERR_INVALID_ARGUMENT);
  assert_null(g);
  e = wsync_last_error();
  assert_contains(e, "num_receivers");

  /* The detail survives calls that do not touch it (pure lookups, destroy(NULL)). */
  (void)wsync_status_name(WSYNC_OK);
  (void)wsync_dtype_size(WSYNC_DTYPE_FLOAT32);
  wsync_group_destroy(NULL);
  wsync_receiver_destroy(NULL);
  assert_contains(wsync_last_error(), "num_receivers");

  /* A different failure replaces it. */
  c.num_receivers = 1;
  assert_status(wsync_group_init(&c, &g), WSYNC_ERR_NOT_FOUND);
  assert_contains(wsync_last_error(), "nosuch");
  assert_null(strstr(wsync_last_error(), "num_receivers"));

  /* Stable until the next wsync call. ("" after a successful call needs a live group: see
   * test_abi_group.) */
  e = wsync_last_error();
  assert_string_equal(e, wsync_last_error());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(status_codes_have_distinct_names_and_docs),
      cmocka_unit_test(status_names_are_pinned),
      cmocka_unit_test(unknown_status_codes),
      cmocka_unit_test(versions),
      cmocka_unit_test(dtypes),
      cmocka_unit_test(last_error_names_the_problem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
