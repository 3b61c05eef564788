/* wsync_receiver_init's refusals that need no sender: bad config fields, and a store address
 * where nothing answers (WSYNC_ERR_TIMEOUT within the timeout, measured). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "abi_test_util.h"

/* A TCP port on 127.0.0.1 bound by `*fd` (so no one else takes it), listening or not. */
static int reserve_port(int listening, int* fd) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(*fd >= 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  assert_int_equal(bind(*fd, (struct sockaddr*)&a, sizeof a), 0);
  if (listening) assert_int_equal(listen(*fd, 16), 0);
  assert_int_equal(getsockname(*fd, (struct sockaddr*)&a, &len), 0);
  return ntohs(a.sin_port);
}

static wsync_status_t rx_init_fails(const wsync_receiver_config_t* c) {
  wsync_receiver_t* rx = (wsync_receiver_t*)1;
  wsync_status_t st = wsync_receiver_init(c, &rx);
  assert_int_not_equal(st, WSYNC_OK);
  assert_null(rx);
  assert_true(strlen(wsync_last_error()) > 0);
  return st;
}

/* Init with the one receiver option key=value at a store nobody is asked for (the option is
 * checked first): the status, after rx_init_fails' checks. */
static wsync_status_t rx_init_with_option(const char* key, const char* value) {
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_option_t o = WSYNC_OPTION(key, value);
  c.rank = 1;
  c.timeout_ms = 100;
  c.store_addr = "127.0.0.1:1";
  c.options = &o;
  c.num_options = 1;
  return rx_init_fails(&c);
}

static void null_store_addr(void** state) {
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  (void)state;
  c.rank = 1;
  c.timeout_ms = 100;
  assert_status(rx_init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "store_addr");
}

/* Since 1.5 rank 0 asks an elastic group's sender to assign a rank: the config is accepted, and the
 * failure here is the store nobody listens on (before 1.5: INVALID_ARGUMENT naming the rank). */
static void rank_zero(void** state) {
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_status_t st;
  (void)state;
  c.rank = 0;
  c.store_addr = "127.0.0.1:1";
  c.timeout_ms = 100;
  st = rx_init_fails(&c);
  assert_true(st != WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "store");
}

static void short_struct_size(void** state) {
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  (void)state;
  c.rank = 1;
  c.store_addr = "127.0.0.1:1";
  c.struct_size = 4;
  assert_status(rx_init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
  c.struct_size = 0;
  assert_status(rx_init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
}

static void bad_store_addr_and_options(void** state) {
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_option_t o = WSYNC_OPTION("bucket_bytes", "4096"); /* a group option, not a receiver one */
  (void)state;
  c.rank = 1;
  c.timeout_ms = 100;
  c.store_addr = "localhost";
  assert_status(rx_init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "localhost");
  c.store_addr = "127.0.0.1:99999";
  assert_status(rx_init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "99999");
  c.store_addr = "127.0.0.1:1";
  c.options = &o;
  c.num_options = 1;
  assert_status(rx_init_fails(&c), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "bucket_bytes");
}

/* Since 1.4: receive_mode takes in_place or staged; anything else is refused naming the option
 * before anything is contacted. */
static void bad_receive_mode(void** state) {
  (void)state;
  assert_status(rx_init_with_option("receive_mode", "transactional"), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "receive_mode");
  assert_contains(wsync_last_error(), "transactional");
}

/* Since 1.5: lane takes a whole number 0..65535; anything else is refused naming the option before
 * anything is contacted. */
static void bad_lane(void** state) {
  const char* bad[] = {"-1", "65536", "tp0", ""};
  size_t i;
  (void)state;
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_status(rx_init_with_option("lane", bad[i]), WSYNC_ERR_INVALID_ARGUMENT);
    assert_contains(wsync_last_error(), "lane");
  }
}

/* Since 1.5: rejoin is a boolean; another value is refused naming the option before anything is
 * contacted. */
static void bad_rejoin(void** state) {
  (void)state;
  assert_status(rx_init_with_option("rejoin", "sometimes"), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "rejoin");
}

/* Nothing listens on the port (bound, not listening: connections are refused at once). The
 * receiver retries until its timeout, then returns WSYNC_ERR_TIMEOUT naming the address. */
static void nothing_listens_times_out_in_time(void** state) {
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  char addr[64];
  int fd;
  int port = reserve_port(0, &fd);
  int64_t t0, dt;
  (void)state;
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  c.rank = 1;
  c.store_addr = addr;
  c.timeout_ms = 300;
  t0 = abi_now_ms();
  assert_status(rx_init_fails(&c), WSYNC_ERR_TIMEOUT);
  dt = abi_now_ms() - t0;
  print_message("receiver init against a closed port returned after %lld ms (timeout 300)\n", (long long)dt);
  assert_in_range(dt, 250, 300 + 500);
  assert_contains(wsync_last_error(), addr);
  close(fd);
}

/* Something listens but never answers the store handshake: still a timeout, in time. */
static void silent_listener_times_out_in_time(void** state) {
  wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
  char addr[64];
  int fd;
  int port = reserve_port(1, &fd);
  int64_t t0, dt;
  (void)state;
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  c.rank = 1;
  c.store_addr = addr;
  c.timeout_ms = 300;
  t0 = abi_now_ms();
  assert_status(rx_init_fails(&c), WSYNC_ERR_TIMEOUT);
  dt = abi_now_ms() - t0;
  print_message("receiver init against a silent listener returned after %lld ms (timeout 300)\n", (long long)dt);
  assert_in_range(dt, 250, 300 + 500);
  assert_contains(wsync_last_error(), addr);
  close(fd);
}

/* Zero means default (since 1.2): config timeout_ms 0 takes the option timeout_ms, here 300 ms. A
 * silent listener (it accepts but never answers the store handshake) makes the wait last that long,
 * not 0 ms (the 1.1 meaning) and not the 60 s built-in default. */
static void zero_timeout_means_the_option(void** state) {
  wsync_receiver_config_t c;
  wsync_option_t opt = WSYNC_OPTION("timeout_ms", "300");
  char addr[64];
  int fd;
  int port = reserve_port(1, &fd);
  int64_t t0, dt;
  (void)state;
  memset(&c, 0, sizeof c);
  c.struct_size = WSYNC_RECEIVER_CONFIG_STRUCT_SIZE;
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  c.rank = 1;
  c.store_addr = addr;
  c.options = &opt;
  c.num_options = 1;
  t0 = abi_now_ms();
  assert_status(rx_init_fails(&c), WSYNC_ERR_TIMEOUT);
  dt = abi_now_ms() - t0;
  assert_in_range(dt, 250, 5000);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(null_store_addr),
      cmocka_unit_test(rank_zero),
      cmocka_unit_test(short_struct_size),
      cmocka_unit_test(bad_store_addr_and_options),
      cmocka_unit_test(bad_receive_mode),
      cmocka_unit_test(bad_lane),
      cmocka_unit_test(bad_rejoin),
      cmocka_unit_test(nothing_listens_times_out_in_time),
      cmocka_unit_test(silent_listener_times_out_in_time),
      cmocka_unit_test(zero_timeout_means_the_option),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
