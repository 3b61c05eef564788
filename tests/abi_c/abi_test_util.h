/* Helpers shared by the C ABI tests (pure C99 + POSIX; no wsync internals). */
#ifndef WSYNC_ABI_TEST_UTIL_H_
#define WSYNC_ABI_TEST_UTIL_H_

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "wsync.h"

#ifndef WSYNC_TESTING_PLUGIN_DIR
#error "WSYNC_TESTING_PLUGIN_DIR (build/lib/wsync-testing) must be defined by the build"
#endif

/* Fails the test, printing both strings, unless `needle` occurs in `hay`. */
#define assert_contains(hay, needle)                                                        \
  do {                                                                                      \
    const char* h_ = (hay);                                                                 \
    const char* n_ = (needle);                                                              \
    if (h_ == NULL || strstr(h_, n_) == NULL) {                                             \
      print_error("expected \"%s\" in \"%s\"\n", n_, h_ ? h_ : "(null)");                   \
      fail();                                                                               \
    }                                                                                       \
  } while (0)

/* Fails unless `st` equals `want`, printing the names and wsync_last_error(). */
#define assert_status(st, want)                                                                 \
  do {                                                                                          \
    wsync_status_t s_ = (st);                                                                   \
    wsync_status_t w_ = (want);                                                                 \
    if (s_ != w_) {                                                                             \
      print_error("status %s (%d), expected %s (%d); last error: \"%s\"\n", wsync_status_name(s_), \
                  (int)s_, wsync_status_name(w_), (int)w_, wsync_last_error());                 \
      fail();                                                                                   \
    }                                                                                           \
  } while (0)

static inline int64_t abi_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Point the loader at the test-only plugins (build/lib/wsync-testing). */
static inline void abi_use_testing_plugins(void) { setenv("WSYNC_PLUGIN_PATH", WSYNC_TESTING_PLUGIN_DIR, 1); }

/* A group config that gets as far as loading plugins: one receiver, a short timeout. */
static inline wsync_group_config_t abi_group_config(const char* transport) {
  wsync_group_config_t c = WSYNC_GROUP_CONFIG_INIT;
  c.num_receivers = 1;
  c.transport = transport;
  c.timeout_ms = 200;
  return c;
}

#endif /* WSYNC_ABI_TEST_UTIL_H_ */
