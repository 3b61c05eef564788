/* wsync_set_log_callback: user_data first, formatted messages, level filtering, and NULL
 * restoring the default stderr sink (filtered by WSYNC_LOG_LEVEL). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <unistd.h>

#include "abi_test_util.h"

#define MAX_LINES 256

typedef struct captured {
  int magic;
  int count;
  int levels[MAX_LINES];
  char lines[MAX_LINES][1024];
} captured_t;

static captured_t g_cap;

static void capture(void* user_data, int32_t level, const char* message) {
  captured_t* c = (captured_t*)user_data;
  /* user_data comes first and is ours */
  if (c != &g_cap || c->magic != 0x5EED) {
    fprintf(stderr, "log callback got user_data %p, expected %p\n", user_data, (void*)&g_cap);
    abort();
  }
  if (c->count < MAX_LINES) {
    c->levels[c->count] = level;
    snprintf(c->lines[c->count], sizeof c->lines[0], "%s", message ? message : "(null)");
  }
  c->count++;
}

static void reset_capture(void) {
  memset(&g_cap, 0, sizeof g_cap);
  g_cap.magic = 0x5EED;
}

/* Index of the first captured line containing both strings, or -1. */
static int find_line(const char* a, const char* b) {
  int i;
  for (i = 0; i < g_cap.count && i < MAX_LINES; ++i)
    if (strstr(g_cap.lines[i], a) && (b == NULL || strstr(g_cap.lines[i], b))) return i;
  return -1;
}

static void dump_capture(void) {
  int i;
  for (i = 0; i < g_cap.count && i < MAX_LINES; ++i) print_message("  [%d] %s\n", g_cap.levels[i], g_cap.lines[i]);
}

/* A call that fails in the loader after logging its attempts. */
static void failing_init(void) {
  wsync_group_config_t c = abi_group_config("nosuch");
  wsync_group_t* g = NULL;
  abi_use_testing_plugins();
  assert_status(wsync_group_init(&c, &g), WSYNC_ERR_NOT_FOUND);
}

static int teardown(void** state) {
  (void)state;
  wsync_set_log_callback(NULL, NULL, 0);
  return 0;
}

static void debug_level_shows_the_loaders_attempts(void** state) {
  int i;
  (void)state;
  reset_capture();
  wsync_set_log_callback(capture, &g_cap, WSYNC_LOG_DEBUG);
  failing_init();
  if (find_line(WSYNC_TESTING_PLUGIN_DIR "/libwsync_transport_nosuch.so", "no such file") < 0) {
    dump_capture();
    print_error("no debug line names the file the loader tried\n");
    fail();
  }
  assert_true(find_line("/wsync/libwsync_transport_nosuch.so", "no such file") >= 0);
  for (i = 0; i < g_cap.count && i < MAX_LINES; ++i) {
    size_t n = strlen(g_cap.lines[i]);
    assert_in_range(g_cap.levels[i], WSYNC_LOG_ERROR, WSYNC_LOG_DEBUG);
    assert_true(n > 0);
    assert_true(g_cap.lines[i][n - 1] != '\n'); /* no trailing newline */
    assert_null(strstr(g_cap.lines[i], "%s"));  /* formatted, not a raw format string */
  }
}

static void level_filtering(void** state) {
  int i;
  (void)state;
  /* info: the adapter's "loaded" line, no debug lines */
  reset_capture();
  wsync_set_log_callback(capture, &g_cap, WSYNC_LOG_INFO);
  failing_init();
  for (i = 0; i < g_cap.count && i < MAX_LINES; ++i) assert_true(g_cap.levels[i] <= WSYNC_LOG_INFO);
  if (find_line("native", "loaded") < 0) {
    dump_capture();
    print_error("no info line says the native adapter was loaded\n");
    fail();
  }
  assert_int_equal(find_line("no such file", NULL), -1);

  /* warn: nothing of this call is worth a warning */
  reset_capture();
  wsync_set_log_callback(capture, &g_cap, WSYNC_LOG_WARN);
  failing_init();
  for (i = 0; i < g_cap.count && i < MAX_LINES; ++i) assert_true(g_cap.levels[i] <= WSYNC_LOG_WARN);
  assert_int_equal(find_line("no such file", NULL), -1);

  /* 0: nothing at all */
  reset_capture();
  wsync_set_log_callback(capture, &g_cap, 0);
  failing_init();
  assert_int_equal(g_cap.count, 0);
}

/* Runs failing_init() with fd 2 redirected to a file; returns what was written. */
static void stderr_of_failing_init(char* out, size_t cap) {
  char path[] = "/tmp/wsync_abi_log_XXXXXX";
  int fd = mkstemp(path);
  int saved;
  ssize_t n;
  assert_true(fd >= 0);
  fflush(stderr);
  saved = dup(2);
  assert_true(saved >= 0);
  assert_int_equal(dup2(fd, 2), 2);
  failing_init();
  fflush(stderr);
  assert_int_equal(dup2(saved, 2), 2);
  close(saved);
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  n = read(fd, out, cap - 1);
  out[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(path);
}

static void null_callback_restores_the_default_sink(void** state) {
  static char err[65536];
  (void)state;
  reset_capture();
  wsync_set_log_callback(capture, &g_cap, WSYNC_LOG_DEBUG);
  failing_init();
  assert_true(g_cap.count > 0);

  /* default sink, WSYNC_LOG_LEVEL=debug (read when the default is restored) */
  setenv("WSYNC_LOG_LEVEL", "debug", 1);
  reset_capture();
  wsync_set_log_callback(NULL, &g_cap, WSYNC_LOG_DEBUG);
  stderr_of_failing_init(err, sizeof err);
  assert_int_equal(g_cap.count, 0); /* the old callback is not called any more */
  assert_contains(err, "[wsync debug]");
  assert_contains(err, "libwsync_transport_nosuch.so");

  /* default sink, max_level 0: WSYNC_LOG_LEVEL=error decides, the loader's debug lines are gone */
  setenv("WSYNC_LOG_LEVEL", "error", 1);
  wsync_set_log_callback(NULL, NULL, 0);
  stderr_of_failing_init(err, sizeof err);
  assert_null(strstr(err, "[wsync debug]"));
  assert_null(strstr(err, "[wsync info]"));

  /* default sink with a level named: it wins over the environment (it was ignored before 0.7.0) */
  wsync_set_log_callback(NULL, NULL, WSYNC_LOG_DEBUG);
  stderr_of_failing_init(err, sizeof err);
  assert_contains(err, "[wsync debug]");
  wsync_set_log_callback(NULL, NULL, -5); /* not a level: the environment again */
  stderr_of_failing_init(err, sizeof err);
  assert_null(strstr(err, "[wsync debug]"));
  unsetenv("WSYNC_LOG_LEVEL");
  wsync_set_log_callback(NULL, NULL, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(debug_level_shows_the_loaders_attempts, teardown),
      cmocka_unit_test_teardown(level_filtering, teardown),
      cmocka_unit_test_teardown(null_callback_restores_the_default_sink, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
