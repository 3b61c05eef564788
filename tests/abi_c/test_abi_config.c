/* wsync_group_init's validation of its config: struct_size handling (short, "older header",
 * "newer header"), group options, and plugin loading (not found, and every broken test plugin
 * from plugins/testing refused with the right status and a message naming the fault).
 * Every case fails before any socket is opened, so each is fast. */
#define _POSIX_C_SOURCE 200809L
#include "abi_test_util.h"

#define TESTING_PLUGIN(kind, name) WSYNC_TESTING_PLUGIN_DIR "/libwsync_" kind "_" name ".so"

/* Runs wsync_group_init and checks the status and that *out stays NULL on failure. */
static wsync_status_t init_fails(const wsync_group_config_t* c) {
  wsync_group_t* g = (wsync_group_t*)1;
  wsync_status_t st = wsync_group_init(c, &g);
  assert_int_not_equal(st, WSYNC_OK);
  assert_null(g);
  assert_true(strlen(wsync_last_error()) > 0);
  return st;
}

static wsync_status_t init_with_option(const char* key, const char* value) {
  wsync_option_t o = WSYNC_OPTION(key, value);
  wsync_group_config_t c = abi_group_config("nosuch");
  c.options = &o;
  c.num_options = 1;
  return init_fails(&c);
}

/* ---- struct_size ---------------------------------------------------------------------------- */

/* Too small, or ending inside a field (12 and 20 cut the group_name / store_addr pointers in
 * half: once a crash). */
static void struct_size_too_small_is_refused(void** state) {
  const uint32_t sizes[] = {0, 1, 4, 7, 10, 12, 20};
  size_t i;
  (void)state;
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    wsync_group_config_t c = abi_group_config("nosuch");
    c.struct_size = sizes[i];
    assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
    assert_contains(wsync_last_error(), "struct_size");
  }
}

/* A caller built against an older header: struct_size covers only the first fields. The fields
 * beyond it hold garbage here and must not be read; the fields inside it must be. Reaching the
 * transport lookup (NOT_FOUND for "nosuch") proves num_receivers and transport were read. */
static void older_header_struct_is_read_as_far_as_it_goes(void** state) {
  const uint32_t sizes[] = {(uint32_t)offsetof(wsync_group_config_t, options),
                            (uint32_t)offsetof(wsync_group_config_t, adapter)};
  size_t i;
  (void)state;
  abi_use_testing_plugins();
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    wsync_group_config_t c;
    memset(&c, 0xA5, sizeof c); /* garbage everywhere, then the "old" fields */
    c.struct_size = sizes[i];
    c.num_receivers = 1;
    c.group_name = NULL;
    c.store_addr = NULL;
    c.transport = "nosuch";
    if (sizes[i] > offsetof(wsync_group_config_t, adapter)) c.adapter = NULL;
    assert_status(init_fails(&c), WSYNC_ERR_NOT_FOUND);
    assert_contains(wsync_last_error(), "nosuch");
    assert_contains(wsync_last_error(), "transport");
  }
}

/* A caller built against a newer header: struct_size larger than the library's struct. */
static void newer_header_struct_is_accepted(void** state) {
  union {
    wsync_group_config_t c;
    unsigned char bytes[sizeof(wsync_group_config_t) + 64];
  } u;
  wsync_group_config_t c = abi_group_config("nosuch");
  (void)state;
  memset(&u, 0x5A, sizeof u); /* fields the library does not know about: ignored */
  u.c = c;
  u.c.struct_size = (uint32_t)sizeof u;
  assert_status(init_fails(&u.c), WSYNC_ERR_NOT_FOUND);
  assert_contains(wsync_last_error(), "nosuch");
}

static void bad_fields_are_named(void** state) {
  wsync_group_config_t c = abi_group_config("nosuch");
  (void)state;
  c.num_receivers = 0;
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "num_receivers");
  c.num_receivers = 1;
  c.group_name = "a/b";
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "a/b");
  c.group_name = "";
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  c.group_name = NULL;
  c.store_addr = "no-port-here";
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "no-port-here");
}

/* ---- options -------------------------------------------------------------------------------- */

static void unknown_option_names_the_key(void** state) {
  (void)state;
  assert_status(init_with_option("bucket_size", "4096"), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "bucket_size");
  assert_status(init_with_option("Bucket_Bytes", "4096"), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "Bucket_Bytes");
}

static void bad_bucket_bytes(void** state) {
  const char* bad[] = {"abc", "1", "99999999999999999999", "", "-4096", "4096x", "2TiB", "1099511627777"};
  size_t i;
  (void)state;
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_status(init_with_option("bucket_bytes", bad[i]), WSYNC_ERR_INVALID_ARGUMENT);
    assert_contains(wsync_last_error(), "bucket_bytes");
  }
}

static void good_options_are_accepted(void** state) {
  /* Accepted values let init go on to the transport lookup, which fails with NOT_FOUND. */
  const char* kv[][2] = {
      {"bucket_bytes", "4096"},   {"bucket_bytes", "1MiB"},     {"bucket_bytes", "1099511627776"},
      {"staging_buckets", "2"},   {"timeout_ms", "1500"},       {"verify_payload", "1"},
      {"verify_payload", "false"}, {"transport.anything", "x"},
  };
  size_t i;
  (void)state;
  abi_use_testing_plugins();
  for (i = 0; i < sizeof kv / sizeof kv[0]; ++i) {
    wsync_status_t st = init_with_option(kv[i][0], kv[i][1]);
    if (st != WSYNC_ERR_NOT_FOUND) print_error("option %s=%s\n", kv[i][0], kv[i][1]);
    assert_status(st, WSYNC_ERR_NOT_FOUND);
    assert_contains(wsync_last_error(), "nosuch");
  }
}

static void bad_other_options(void** state) {
  (void)state;
  assert_status(init_with_option("verify_payload", "maybe"), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "verify_payload");
  assert_contains(wsync_last_error(), "maybe");
  assert_status(init_with_option("staging_buckets", "1"), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "staging_buckets");
  assert_status(init_with_option("timeout_ms", "0"), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "timeout_ms");
  assert_status(init_with_option("store_addr_file", ""), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "store_addr_file");
}

static void null_option_value_or_key(void** state) {
  wsync_option_t o[2] = {WSYNC_OPTION("bucket_bytes", "4096"), WSYNC_OPTION("verify_payload", NULL)};
  wsync_group_config_t c = abi_group_config("nosuch");
  (void)state;
  c.options = o;
  c.num_options = 2;
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "verify_payload");
  assert_contains(wsync_last_error(), "NULL");

  o[1].value = "1";
  o[1].key = NULL;
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "options[1]");
  o[1].key = "";
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "options[1]");
}

static void option_array_shape(void** state) {
  wsync_option_t o[2] = {WSYNC_OPTION("bucket_bytes", "4096"), WSYNC_OPTION("verify_payload", "1")};
  wsync_group_config_t c = abi_group_config("nosuch");
  (void)state;
  /* num_options without an array */
  c.options = NULL;
  c.num_options = 3;
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "options");
  /* an element struct_size too small to hold key and value */
  c.options = o;
  c.num_options = 2;
  o[0].struct_size = 0;
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
  /* elements of one array with different struct_size */
  o[0].struct_size = (uint32_t)sizeof(wsync_option_t);
  o[1].struct_size = (uint32_t)sizeof(wsync_option_t) + 8;
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
  /* options == NULL with num_options == 0 is fine */
  c.options = NULL;
  c.num_options = 0;
  abi_use_testing_plugins();
  assert_status(init_fails(&c), WSYNC_ERR_NOT_FOUND);
}

/* ---- plugins -------------------------------------------------------------------------------- */

static void plugin_not_found_lists_the_files_tried(void** state) {
  wsync_group_config_t c = abi_group_config("nosuch");
  (void)state;
  abi_use_testing_plugins();
  assert_status(init_fails(&c), WSYNC_ERR_NOT_FOUND);
  assert_contains(wsync_last_error(), "'nosuch'");
  assert_contains(wsync_last_error(), TESTING_PLUGIN("transport", "nosuch"));
  /* ... and the wsync/ folder beside libwsync */
  assert_contains(wsync_last_error(), "/wsync/libwsync_transport_nosuch.so");

  c.transport = NULL;
  c.adapter = "nosuch_adapter";
  assert_status(init_fails(&c), WSYNC_ERR_NOT_FOUND);
  assert_contains(wsync_last_error(), TESTING_PLUGIN("adapter", "nosuch_adapter"));

  c.adapter = NULL;
  c.transport = "/nonexistent/dir/libwsync_transport_x.so";
  assert_status(init_fails(&c), WSYNC_ERR_NOT_FOUND);
  assert_contains(wsync_last_error(), "/nonexistent/dir/libwsync_transport_x.so");
}

static void plugin_name_with_illegal_characters(void** state) {
  const char* bad[] = {"ucx;rm", "u cx", "ucx.so", "$HOME"};
  size_t i;
  (void)state;
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    wsync_group_config_t c = abi_group_config(bad[i]);
    assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
    assert_contains(wsync_last_error(), bad[i]);
  }
}

static void transport_built_for_abi_99(void** state) {
  wsync_group_config_t c = abi_group_config("abi99");
  (void)state;
  abi_use_testing_plugins();
  assert_status(init_fails(&c), WSYNC_ERR_VERSION_MISMATCH);
  assert_contains(wsync_last_error(), TESTING_PLUGIN("transport", "abi99"));
  assert_contains(wsync_last_error(), "99");
  /* the same plugin given by absolute path */
  unsetenv("WSYNC_PLUGIN_PATH");
  c.transport = TESTING_PLUGIN("transport", "abi99");
  assert_status(init_fails(&c), WSYNC_ERR_VERSION_MISMATCH);
  abi_use_testing_plugins();
}

static void transport_table_too_small(void** state) {
  wsync_group_config_t c = abi_group_config("smalltable");
  (void)state;
  abi_use_testing_plugins();
  assert_status(init_fails(&c), WSYNC_ERR_VERSION_MISMATCH);
  assert_contains(wsync_last_error(), TESTING_PLUGIN("transport", "smalltable"));
  assert_contains(wsync_last_error(), "bytes");
}

static void transport_without_entry_symbol(void** state) {
  wsync_group_config_t c = abi_group_config("noentry");
  (void)state;
  abi_use_testing_plugins();
  assert_status(init_fails(&c), WSYNC_ERR_NOT_FOUND);
  assert_contains(wsync_last_error(), TESTING_PLUGIN("transport", "noentry"));
  assert_contains(wsync_last_error(), "wsync_transport_entry_v1");
}

static void transport_refusing_without_a_gpu(void** state) {
  wsync_group_config_t c = abi_group_config("nocuda");
  (void)state;
  abi_use_testing_plugins();
  /* The plugin's own status comes through: a GPU plugin without a GPU says NO_DEVICE. */
  assert_status(init_fails(&c), WSYNC_ERR_NO_DEVICE);
  assert_contains(wsync_last_error(), TESTING_PLUGIN("transport", "nocuda"));
  assert_contains(wsync_last_error(), "no CUDA device");
}

static void transport_with_a_null_required_function(void** state) {
  wsync_group_config_t c = abi_group_config("nullfn");
  (void)state;
  abi_use_testing_plugins();
  assert_status(init_fails(&c), WSYNC_ERR_UNSUPPORTED);
  assert_contains(wsync_last_error(), TESTING_PLUGIN("transport", "nullfn"));
  assert_contains(wsync_last_error(), "send_post");
}

static void adapter_built_for_abi_99(void** state) {
  wsync_group_config_t c = abi_group_config("stub");
  (void)state;
  abi_use_testing_plugins();
  c.adapter = "abi99";
  assert_status(init_fails(&c), WSYNC_ERR_VERSION_MISMATCH);
  assert_contains(wsync_last_error(), TESTING_PLUGIN("adapter", "abi99"));
  assert_contains(wsync_last_error(), "99");
}

static void adapter_option_reaches_the_adapter(void** state) {
  wsync_option_t o = WSYNC_OPTION("adapter.bogus_knob", "1");
  wsync_group_config_t c = abi_group_config("stub");
  (void)state;
  c.options = &o;
  c.num_options = 1;
  /* the native adapter (beside libwsync) takes no options and names the key */
  assert_status(init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "bogus_knob");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(struct_size_too_small_is_refused),
      cmocka_unit_test(older_header_struct_is_read_as_far_as_it_goes),
      cmocka_unit_test(newer_header_struct_is_accepted),
      cmocka_unit_test(bad_fields_are_named),
      cmocka_unit_test(unknown_option_names_the_key),
      cmocka_unit_test(bad_bucket_bytes),
      cmocka_unit_test(good_options_are_accepted),
      cmocka_unit_test(bad_other_options),
      cmocka_unit_test(null_option_value_or_key),
      cmocka_unit_test(option_array_shape),
      cmocka_unit_test(plugin_not_found_lists_the_files_tried),
      cmocka_unit_test(plugin_name_with_illegal_characters),
      cmocka_unit_test(transport_built_for_abi_99),
      cmocka_unit_test(transport_table_too_small),
      cmocka_unit_test(transport_without_entry_symbol),
      cmocka_unit_test(transport_refusing_without_a_gpu),
      cmocka_unit_test(transport_with_a_null_required_function),
      cmocka_unit_test(adapter_built_for_abi_99),
      cmocka_unit_test(adapter_option_reaches_the_adapter),
  };
  abi_use_testing_plugins();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
