/* A live group and receiver over the test-only "stub" transport (moves no bytes) in one
 * process: wsync_last_error is "" after successful calls, NULL/struct_size arguments against
 * live objects, receivers refused by a running group, plugin options reaching the plugin, and
 * group init timing out naming the missing rank. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <unistd.h>

#include "abi_test_util.h"

typedef struct addr_file {
  char path[128];
  char addr[128];
} addr_file_t;

static void addr_file_init(addr_file_t* f, const char* tag) {
  snprintf(f->path, sizeof f->path, "/tmp/wsync_abi_%s_%ld.addr", tag, (long)getpid());
  unlink(f->path);
  f->addr[0] = '\0';
}

/* Wait (up to 3 s) for the sender to write its store address; 1 when read. */
static int addr_file_wait(addr_file_t* f) {
  int64_t deadline = abi_now_ms() + 3000;
  while (abi_now_ms() < deadline) {
    FILE* fp = fopen(f->path, "r");
    if (fp != NULL) {
      char* nl;
      int ok = fgets(f->addr, sizeof f->addr, fp) != NULL;
      fclose(fp);
      if ((nl = strchr(f->addr, '\n')) != NULL) *nl = '\0';
      if (ok && f->addr[0] != '\0') return 1;
    }
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* ---- a sender running wsync_group_init on its own thread ----------------------------------- */

typedef struct sender {
  addr_file_t file;
  wsync_option_t opts[2];
  wsync_group_config_t cfg;
  pthread_t thread;
  wsync_group_t* group;
  wsync_status_t status;
  char error[2048]; /* the sender thread's wsync_last_error() after init */
} sender_t;

static void* sender_main(void* arg) {
  sender_t* s = (sender_t*)arg;
  s->status = wsync_group_init(&s->cfg, &s->group);
  snprintf(s->error, sizeof s->error, "%s", wsync_last_error());
  return NULL;
}

/* Start a 1-receiver group on the stub transport; extra_key/value: one more option or NULL. */
static void sender_start(sender_t* s, const char* tag, const char* extra_key, const char* extra_value) {
  wsync_group_config_t c = WSYNC_GROUP_CONFIG_INIT;
  wsync_option_t addr = WSYNC_OPTION("store_addr_file", NULL);
  memset(s, 0, sizeof *s);
  addr_file_init(&s->file, tag);
  addr.value = s->file.path;
  s->opts[0] = addr;
  c.num_receivers = 1;
  c.group_name = "abi-test";
  c.store_addr = "127.0.0.1:0";
  c.transport = "stub";
  c.options = s->opts;
  c.num_options = 1;
  c.timeout_ms = 3000;
  if (extra_key != NULL) {
    wsync_option_t o = WSYNC_OPTION(extra_key, extra_value);
    s->opts[1] = o;
    c.num_options = 2;
  }
  s->cfg = c;
  s->status = -1;
  abi_use_testing_plugins();
  assert_int_equal(pthread_create(&s->thread, NULL, sender_main, s), 0);
  if (!addr_file_wait(&s->file)) {
    pthread_join(s->thread, NULL);
    print_error("the sender wrote no store address: %s %s\n", wsync_status_name(s->status), s->error);
    fail();
  }
}

static void sender_join(sender_t* s) {
  pthread_join(s->thread, NULL);
  unlink(s->file.path);
}

static wsync_receiver_config_t rx_config(const char* addr, uint32_t rank) {
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  c.rank = rank;
  c.store_addr = addr;
  c.group_name = "abi-test";
  c.timeout_ms = 3000;
  return c;
}

/* Since 1.4: a receiver nothing was sent to is CLEAN, in place, with nothing touched or staged; a
 * short or odd struct_size is refused; an older caller's shorter struct gets only its fields. */
static void receiver_state_of_a_fresh_receiver(wsync_receiver_t* rx) {
  wsync_receiver_state_t rs = WSYNC_RECEIVER_STATE_INIT;
  unsigned char older[24];
  assert_status(wsync_receiver_get_state(rx, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  rs.struct_size = 4;
  assert_status(wsync_receiver_get_state(rx, &rs), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
  rs.struct_size = 20;
  assert_status(wsync_receiver_get_state(rx, &rs), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
  rs.struct_size = WSYNC_RECEIVER_STATE_STRUCT_SIZE;
  rs.staged_bytes = 77;
  assert_status(wsync_receiver_get_state(rx, &rs), WSYNC_OK);
  assert_string_equal(wsync_last_error(), "");
  assert_int_equal(rs.struct_size, WSYNC_RECEIVER_STATE_STRUCT_SIZE);
  assert_int_equal(rs.receive_mode, WSYNC_RECEIVE_IN_PLACE);
  assert_int_equal(rs.buffers, WSYNC_BUFFERS_CLEAN);
  assert_int_equal(rs.committed_version, 0);
  assert_int_equal(rs.pending_version, 0);
  assert_int_equal(rs.late_writes, 0);
  assert_int_equal(rs.num_touched, 0);
  assert_int_equal(rs.staged_bytes, 0);
  assert_int_equal(rs.num_senders, 1); /* since 1.5: one sender, which does not plan */
  assert_int_equal(rs.planned, 0);
  assert_true(rs.rank >= 1); /* since 1.5: its rank, as configured */
  assert_int_equal(rs.rank_assigned, 0);
  assert_null(wsync_receiver_touched_name(rx, 0));
  /* a caller whose struct ends at pending_version (24 bytes): nothing past it is written */
  memset(older, 0xAB, sizeof older);
  rs.struct_size = 24;
  memcpy(older, &rs.struct_size, sizeof rs.struct_size);
  assert_status(wsync_receiver_get_state(rx, (wsync_receiver_state_t*)(void*)older), WSYNC_OK);
  memcpy(&rs, older, sizeof older);
  assert_int_equal(rs.struct_size, 24);
  assert_int_equal(rs.receive_mode, WSYNC_RECEIVE_IN_PLACE);
  assert_int_equal(rs.pending_version, 0);
}

/* Since 1.4: names that are not valid UTF-8, or hold a control character, are refused at register
 * (naming the buffer printably), and nothing of the call is registered. */
static void register_refuses_bad_names(wsync_receiver_t* rx) {
  float w[4] = {0, 0, 0, 0};
  char long_name[1100];
  wsync_tensor_t t[2];
  const char* bad[] = {"bad\xff", "tab\there", "nl\n", "del\x7f", "overlong\xc0\xaf", "surrogate\xed\xa0\x80",
                       "c1\xc2\x85"};
  size_t i;
  for (i = 0; i < 2; ++i) {
    wsync_tensor_t d = WSYNC_TENSOR_INIT;
    d.name = "ok.w";
    d.dtype = WSYNC_DTYPE_FLOAT32;
    d.ndim = 1;
    d.shape[0] = 4;
    d.data = w;
    d.nbytes = sizeof w;
    t[i] = d;
  }
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    t[1].name = bad[i];
    assert_status(wsync_receiver_register(rx, t, 2), WSYNC_ERR_INVALID_ARGUMENT);
    assert_contains(wsync_last_error(), "not a valid tensor name");
  }
  t[1].name = "bad\xff";
  assert_status(wsync_receiver_register(rx, t, 2), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "bad\\xff"); /* printable: the byte as \xff */
  memset(long_name, 'a', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  t[1].name = long_name;
  assert_status(wsync_receiver_register(rx, t, 2), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "more than 1024");
  t[1].name = "layers.0.\xc3\xa9t\xc3\xa9"; /* valid UTF-8 (e-acute) is a name like any other */
  assert_status(wsync_receiver_register(rx, t, 2), WSYNC_OK);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void live_group_and_receiver(void** state) {
  sender_t s;
  wsync_receiver_config_t rc;
  wsync_receiver_t* rx = NULL;
  wsync_group_stats_t stats = WSYNC_GROUP_STATS_INIT;
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  int64_t t0, dt;
  (void)state;

  sender_start(&s, "live", NULL, NULL);
  rc = rx_config(s.file.addr, 1);
  assert_status(wsync_receiver_init(&rc, &rx), WSYNC_OK);
  assert_non_null(rx);
  assert_string_equal(wsync_last_error(), ""); /* success: "" on this thread */
  sender_join(&s);
  if (s.status != WSYNC_OK) print_error("group init: %s: %s\n", wsync_status_name(s.status), s.error);
  assert_int_equal(s.status, WSYNC_OK);
  assert_string_equal(s.error, "");
  assert_non_null(s.group);
  assert_string_equal(wsync_group_store_addr(s.group), s.file.addr);

  assert_status(wsync_group_get_stats(s.group, &stats), WSYNC_OK);
  assert_string_equal(wsync_last_error(), "");
  assert_int_equal(stats.num_receivers, 1);
  assert_int_equal(stats.committed_version, 0);
  assert_int_equal(stats.updates, 0);
  assert_int_equal(wsync_receiver_committed_version(rx), 0);

  /* NULL and struct_size mistakes against live objects */
  assert_status(wsync_group_get_stats(s.group, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  assert_true(strlen(wsync_last_error()) > 0);
  stats.struct_size = 0;
  assert_status(wsync_group_get_stats(s.group, &stats), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
  stats.struct_size = (uint32_t)sizeof stats;
  assert_status(wsync_group_send_batch(s.group, NULL, 1, 100), WSYNC_ERR_INVALID_ARGUMENT);
  assert_true(strlen(wsync_last_error()) > 0);
  assert_status(wsync_receiver_next(rx, NULL, 0), WSYNC_ERR_INVALID_ARGUMENT);
  assert_true(strlen(wsync_last_error()) > 0);
  ev.struct_size = 4;
  assert_status(wsync_receiver_next(rx, &ev, 0), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
  ev.struct_size = (uint32_t)sizeof ev;
  assert_status(wsync_receiver_register(rx, NULL, 1), WSYNC_ERR_INVALID_ARGUMENT);
  assert_true(strlen(wsync_last_error()) > 0);
  t.name = "w";
  t.dtype = WSYNC_DTYPE_FLOAT32;
  t.ndim = 1;
  t.shape[0] = 4;
  t.nbytes = 3; /* should be 16 */
  t.data = &stats;
  assert_status(wsync_receiver_register(rx, &t, 1), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "w");
  assert_status(wsync_receiver_commit(rx, 1), WSYNC_ERR_INVALID_STATE);
  receiver_state_of_a_fresh_receiver(rx);
  register_refuses_bad_names(rx);

  /* and a success clears the detail again */
  assert_status(wsync_group_get_stats(s.group, &stats), WSYNC_OK);
  assert_string_equal(wsync_last_error(), "");

  /* nothing sent: next times out within its timeout, and the receiver stays usable */
  t0 = abi_now_ms();
  assert_status(wsync_receiver_next(rx, &ev, 100), WSYNC_ERR_TIMEOUT);
  dt = abi_now_ms() - t0;
  assert_in_range(dt, 90, 600);
  /* wsync.h's timeout rule: WSYNC_TIMEOUT_NO_WAIT polls (at once), WSYNC_TIMEOUT_DEFAULT is -1 */
  assert_int_equal(WSYNC_TIMEOUT_NO_WAIT, 0);
  assert_int_equal(WSYNC_TIMEOUT_DEFAULT, -1);
  t0 = abi_now_ms();
  assert_status(wsync_receiver_next(rx, &ev, WSYNC_TIMEOUT_NO_WAIT), WSYNC_ERR_TIMEOUT);
  assert_in_range(abi_now_ms() - t0, 0, 50);

  /* the sender goes away: the receiver sees CLOSED */
  wsync_group_abort(s.group);
  wsync_group_abort(s.group); /* idempotent */
  wsync_group_destroy(s.group);
  ev.kind = -1;
  assert_status(wsync_receiver_next(rx, &ev, 2000), WSYNC_OK);
  assert_int_equal(ev.kind, WSYNC_EVENT_CLOSED);
  wsync_receiver_destroy(rx);
}

static void running_group_refuses_wrong_receivers(void** state) {
  sender_t s;
  wsync_receiver_config_t rc;
  wsync_receiver_t* rx = (wsync_receiver_t*)1;
  (void)state;
  sender_start(&s, "refuse", NULL, NULL);

  rc = rx_config(s.file.addr, 2); /* the group has receivers 1..1 */
  assert_status(wsync_receiver_init(&rc, &rx), WSYNC_ERR_REJECTED);
  assert_null(rx);
  assert_contains(wsync_last_error(), "rank 2");

  rc = rx_config(s.file.addr, 1);
  rc.group_name = "other-group";
  assert_status(wsync_receiver_init(&rc, &rx), WSYNC_ERR_REJECTED);
  assert_contains(wsync_last_error(), "other-group");
  assert_contains(wsync_last_error(), "abi-test");

  rc = rx_config(s.file.addr, 1);
  rc.transport = "abi99"; /* a broken plugin on the receiver side */
  assert_status(wsync_receiver_init(&rc, &rx), WSYNC_ERR_VERSION_MISMATCH);
  assert_contains(wsync_last_error(), "abi99");

  rc = rx_config(s.file.addr, 1);
  rc.transport = "nosuch";
  assert_status(wsync_receiver_init(&rc, &rx), WSYNC_ERR_NOT_FOUND);
  assert_contains(wsync_last_error(), "nosuch");

  /* the right one still gets in */
  rc = rx_config(s.file.addr, 1);
  assert_status(wsync_receiver_init(&rc, &rx), WSYNC_OK);
  sender_join(&s);
  if (s.status != WSYNC_OK) print_error("group init: %s: %s\n", wsync_status_name(s.status), s.error);
  assert_int_equal(s.status, WSYNC_OK);
  wsync_receiver_destroy(rx);
  wsync_group_destroy(s.group);
}

static void receiver_transport_option_reaches_the_plugin(void** state) {
  sender_t s;
  wsync_receiver_config_t rc;
  wsync_receiver_t* rx = (wsync_receiver_t*)1;
  wsync_option_t o = WSYNC_OPTION("transport.bogus_knob", "1");
  (void)state;
  sender_start(&s, "rxopt", NULL, NULL);
  rc = rx_config(s.file.addr, 1);
  rc.options = &o;
  rc.num_options = 1;
  assert_status(wsync_receiver_init(&rc, &rx), WSYNC_ERR_INVALID_ARGUMENT);
  assert_null(rx);
  assert_contains(wsync_last_error(), "bogus_knob");
  sender_join(&s);
  /* the sender is told why its receiver could not connect */
  assert_int_equal(s.status, WSYNC_ERR_INVALID_ARGUMENT);
  assert_null(s.group);
  assert_contains(s.error, "rank 1");
  assert_contains(s.error, "bogus_knob");
}

static void group_transport_option_reaches_the_plugin(void** state) {
  sender_t s;
  wsync_receiver_config_t rc;
  wsync_receiver_t* rx = NULL;
  (void)state;
  sender_start(&s, "gopt", "transport.bogus_knob", "1");
  rc = rx_config(s.file.addr, 1);
  (void)wsync_receiver_init(&rc, &rx); /* may win or lose the race with the sender's refusal */
  sender_join(&s);
  assert_int_equal(s.status, WSYNC_ERR_INVALID_ARGUMENT);
  assert_null(s.group);
  assert_contains(s.error, "bogus_knob");
  wsync_receiver_destroy(rx);
}

static void group_init_times_out_naming_the_missing_rank(void** state) {
  wsync_group_config_t c = WSYNC_GROUP_CONFIG_INIT;
  wsync_group_t* g = (wsync_group_t*)1;
  int64_t t0, dt;
  (void)state;
  abi_use_testing_plugins();
  c.num_receivers = 2;
  c.transport = "stub";
  c.timeout_ms = 300;
  t0 = abi_now_ms();
  assert_status(wsync_group_init(&c, &g), WSYNC_ERR_TIMEOUT);
  dt = abi_now_ms() - t0;
  print_message("group init without receivers returned after %lld ms (timeout 300)\n", (long long)dt);
  assert_null(g);
  assert_in_range(dt, 250, 300 + 500);
  assert_contains(wsync_last_error(), "1, 2");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(live_group_and_receiver),
      cmocka_unit_test(running_group_refuses_wrong_receivers),
      cmocka_unit_test(receiver_transport_option_reaches_the_plugin),
      cmocka_unit_test(group_transport_option_reaches_the_plugin),
      cmocka_unit_test(group_init_times_out_naming_the_missing_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
