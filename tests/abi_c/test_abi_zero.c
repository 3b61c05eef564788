/* Zero means default (ABI 1.2): every public struct built with memset(0), its struct_size (the
 * WSYNC_*_STRUCT_SIZE constant) and only the fields the call cannot guess, against the default
 * plugins found beside libwsync (transport "ucx", adapter "native"; WSYNC_PLUGIN_PATH is empty).
 *
 *  - A sender (this process) and a receiver (this program re-executed in a child process) move
 *    three versions of six tensors; the receiver compares every byte with the pattern of the
 *    version it commits and exits non-zero on any difference. One update uses the 1.2 async send
 *    (wsync_group_send_start / wsync_group_send_wait). The sender's stats must count it all.
 *  - A config timeout_ms of 0 is the option timeout_ms (not "do not wait", its 1.1 meaning): a
 *    receiver that never joins fails group init with WSYNC_ERR_TIMEOUT after ~300 ms, naming it.
 *  - wsync_list_plugins fills zeroed wsync_plugin_info_t entries. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi_test_util.h"
#include "wsync_plugin.h" /* WSYNC_PLUGIN_ABI_VERSION */

#define NUM_VERSIONS 3
#define NUM_TENSORS 6
#define BATCH_A 3 /* tensors [0, BATCH_A) go in the first batch of an update, the rest in the second */
#define WAIT_MS 20000

typedef struct spec {
  const char* name;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[3];
} spec_t;

static const spec_t g_specs[NUM_TENSORS] = {
    {"layers.0.weight", WSYNC_DTYPE_FLOAT32, 2, {64, 48, 0}},
    {"layers.0.bias", WSYNC_DTYPE_FLOAT32, 1, {64, 0, 0}},
    {"embed.weight", WSYNC_DTYPE_BFLOAT16, 2, {301, 17, 0}},
    {"step", WSYNC_DTYPE_INT64, 0, {0, 0, 0}}, /* a scalar */
    {"mask", WSYNC_DTYPE_UINT8, 3, {3, 5, 7}},
    {"empty", WSYNC_DTYPE_FLOAT16, 2, {0, 4, 0}}, /* empty and legal: nbytes 0, data NULL */
};

static uint64_t spec_nbytes(const spec_t* s) {
  uint64_t n = wsync_dtype_size(s->dtype);
  int32_t d;
  for (d = 0; d < s->ndim; ++d) n *= (uint64_t)s->shape[d];
  return n;
}

/* The byte `i` of tensor `k` at weight version `v`: different for every version. */
static uint8_t pattern(uint64_t v, int k, uint64_t i) {
  return (uint8_t)((i * 131u) ^ (v * 29u) ^ ((uint64_t)k * 71u) ^ (i >> 8));
}

static void fill(uint8_t* p, uint64_t n, uint64_t v, int k) {
  uint64_t i;
  for (i = 0; i < n; ++i) p[i] = pattern(v, k, i);
}

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* Wait (up to timeout_ms) for the sender to write "host:port" to `path`; 1 when read. */
static int read_addr_file(const char* path, char* addr, size_t cap, int64_t timeout_ms) {
  int64_t deadline = abi_now_ms() + timeout_ms;
  while (abi_now_ms() < deadline) {
    FILE* fp = fopen(path, "r");
    if (fp != NULL) {
      char* nl;
      int ok = fgets(addr, (int)cap, fp) != NULL;
      fclose(fp);
      if (ok && (nl = strchr(addr, '\n')) != NULL) *nl = '\0';
      if (ok && addr[0] != '\0') return 1;
    }
    sleep_ms(5);
  }
  return 0;
}

/* ---- the receiver: this program run as `test_abi_zero --receiver <addr file>` ---------------- */

#define RX_FAIL(...)                                    \
  do {                                                  \
    fprintf(stderr, "receiver: " __VA_ARGS__);          \
    fprintf(stderr, "\n");                              \
    rc = 1;                                             \
    goto out;                                           \
  } while (0)

static int receiver_main(const char* addr_path) {
  char addr[256];
  wsync_receiver_config_t c;
  wsync_receiver_event_t ev;
  wsync_receiver_t* rx = NULL;
  uint8_t* got[NUM_TENSORS] = {NULL};
  int seen[NUM_TENSORS] = {0};
  uint64_t commits = 0;
  int rc = 0, k;
  wsync_status_t st;

  if (!read_addr_file(addr_path, addr, sizeof addr, WAIT_MS)) {
    fprintf(stderr, "receiver: the sender wrote no store address to %s\n", addr_path);
    return 2;
  }
  for (k = 0; k < NUM_TENSORS; ++k) got[k] = (uint8_t*)malloc(spec_nbytes(&g_specs[k]) + 1);

  /* zero means default: only struct_size, rank and store_addr */
  memset(&c, 0, sizeof c);
  c.struct_size = WSYNC_RECEIVER_CONFIG_STRUCT_SIZE;
  c.rank = 1;
  c.store_addr = addr;
  st = wsync_receiver_init(&c, &rx);
  if (st != WSYNC_OK || rx == NULL) RX_FAIL("wsync_receiver_init: %s: %s", wsync_status_name(st), wsync_last_error());

  memset(&ev, 0, sizeof ev);
  ev.struct_size = WSYNC_RECEIVER_EVENT_STRUCT_SIZE;
  for (;;) {
    st = wsync_receiver_next(rx, &ev, WAIT_MS);
    if (st != WSYNC_OK) RX_FAIL("wsync_receiver_next: %s: %s", wsync_status_name(st), wsync_last_error());
    if (ev.struct_size != WSYNC_RECEIVER_EVENT_STRUCT_SIZE) RX_FAIL("the event's struct_size became %u", ev.struct_size);
    if (ev.kind == WSYNC_EVENT_BUCKET) {
      uint64_t i, stride;
      if (ev.num_tensors == 0) continue;
      if (ev.tensors == NULL) RX_FAIL("a BUCKET event of %llu tensors with tensors NULL", (unsigned long long)ev.num_tensors);
      stride = ev.tensors[0].struct_size; /* arrays are stepped by their first element's struct_size */
      if (stride < WSYNC_TENSOR_STRUCT_SIZE) RX_FAIL("event tensors carry struct_size %llu", (unsigned long long)stride);
      for (i = 0; i < ev.num_tensors; ++i) {
        const wsync_tensor_t* t = (const wsync_tensor_t*)(const void*)((const char*)ev.tensors + i * stride);
        const spec_t* s = NULL;
        int32_t d;
        for (k = 0; k < NUM_TENSORS; ++k)
          if (t->name != NULL && strcmp(t->name, g_specs[k].name) == 0) break;
        if (k == NUM_TENSORS) RX_FAIL("unexpected tensor '%s'", t->name ? t->name : "(null)");
        s = &g_specs[k];
        if (seen[k]) RX_FAIL("tensor '%s' arrived twice in update %llu", s->name, (unsigned long long)(commits + 1));
        if (t->struct_size != stride) RX_FAIL("tensor '%s': struct_size %u, the array's is %llu", s->name, t->struct_size,
                                              (unsigned long long)stride);
        if (t->dtype != s->dtype) RX_FAIL("tensor '%s': dtype %d, sent %d", s->name, t->dtype, s->dtype);
        if (t->ndim != s->ndim) RX_FAIL("tensor '%s': ndim %d, sent %d", s->name, t->ndim, s->ndim);
        for (d = 0; d < s->ndim; ++d)
          if (t->shape[d] != s->shape[d])
            RX_FAIL("tensor '%s': shape[%d] %lld, sent %lld", s->name, d, (long long)t->shape[d], (long long)s->shape[d]);
        if (t->nbytes != spec_nbytes(s))
          RX_FAIL("tensor '%s': nbytes %llu, sent %llu", s->name, (unsigned long long)t->nbytes,
                  (unsigned long long)spec_nbytes(s));
        if (t->device_type != WSYNC_DEVICE_CPU && t->device_type != 0)
          RX_FAIL("tensor '%s': device_type %d on a host-only group", s->name, t->device_type);
        if (t->nbytes > 0) {
          if (t->data == NULL) RX_FAIL("tensor '%s': data NULL", s->name);
          memcpy(got[k], t->data, t->nbytes); /* the view is valid until the next event */
        }
        if (ev.placed != NULL && ev.placed[i] != 0) RX_FAIL("tensor '%s' reported placed; nothing is registered", s->name);
        seen[k] = 1;
      }
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      if (ev.version != commits + 1)
        RX_FAIL("COMMIT of version %llu, expected %llu", (unsigned long long)ev.version, (unsigned long long)(commits + 1));
      for (k = 0; k < NUM_TENSORS; ++k) {
        uint64_t i, n = spec_nbytes(&g_specs[k]);
        if (!seen[k]) RX_FAIL("version %llu: tensor '%s' never arrived", (unsigned long long)ev.version, g_specs[k].name);
        for (i = 0; i < n; ++i)
          if (got[k][i] != pattern(ev.version, k, i))
            RX_FAIL("version %llu: tensor '%s' byte %llu is 0x%02x, sent 0x%02x", (unsigned long long)ev.version,
                    g_specs[k].name, (unsigned long long)i, got[k][i], pattern(ev.version, k, i));
        seen[k] = 0;
      }
      st = wsync_receiver_commit(rx, ev.version);
      if (st != WSYNC_OK) RX_FAIL("wsync_receiver_commit(%llu): %s: %s", (unsigned long long)ev.version,
                                  wsync_status_name(st), wsync_last_error());
      ++commits;
      if (wsync_receiver_committed_version(rx) != commits)
        RX_FAIL("committed_version %llu after committing %llu",
                (unsigned long long)wsync_receiver_committed_version(rx), (unsigned long long)commits);
    } else if (ev.kind == WSYNC_EVENT_CLOSED) {
      break;
    } else {
      RX_FAIL("unexpected event kind %d", ev.kind);
    }
  }
  if (commits != NUM_VERSIONS) RX_FAIL("the group closed after %llu commits, expected %d", (unsigned long long)commits,
                                       NUM_VERSIONS);
  fprintf(stderr, "receiver: %d versions received, every byte as sent\n", NUM_VERSIONS);
out:
  wsync_receiver_destroy(rx);
  for (k = 0; k < NUM_TENSORS; ++k) free(got[k]);
  return rc;
}

/* ---- the sender side ------------------------------------------------------------------------- */

static pid_t g_child = 0;   /* a receiver still running when a test fails: killed by the teardown */
static char g_addr_path[128]; /* and its address file, removed */

static pid_t spawn_receiver(const char* addr_path) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* a fresh process image: nothing of the parent's wsync/UCX state is inherited */
    execl("/proc/self/exe", "test_abi_zero", "--receiver", addr_path, (char*)NULL);
    fprintf(stderr, "exec /proc/self/exe: %s\n", strerror(errno));
    _exit(127);
  }
  g_child = pid;
  return pid;
}

/* The child's exit status (up to timeout_ms; then it is killed and -1 returned). */
static int wait_receiver(pid_t pid, int64_t timeout_ms) {
  int64_t deadline = abi_now_ms() + timeout_ms;
  int status = 0;
  g_child = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (abi_now_ms() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      print_error("the receiver did not exit within %lld ms; killed\n", (long long)timeout_ms);
      return -1;
    }
    sleep_ms(10);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  print_error("the receiver died of signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
  return -1;
}

/* One version's tensors: zeroed descriptors with only struct_size, name, dtype, ndim, shape, data
 * and nbytes (device_type 0 = CPU), over freshly filled memory. */
typedef struct update {
  wsync_tensor_t t[NUM_TENSORS];
  uint8_t* mem[NUM_TENSORS];
} update_t;

static void update_build(update_t* u, uint64_t version) {
  int k, d;
  memset(u, 0, sizeof *u);
  for (k = 0; k < NUM_TENSORS; ++k) {
    const spec_t* s = &g_specs[k];
    uint64_t n = spec_nbytes(s);
    wsync_tensor_t* t = &u->t[k];
    u->mem[k] = n > 0 ? (uint8_t*)malloc(n) : NULL;
    if (n > 0) {
      assert_non_null(u->mem[k]);
      fill(u->mem[k], n, version, k);
    }
    t->struct_size = WSYNC_TENSOR_STRUCT_SIZE;
    t->name = s->name;
    t->dtype = s->dtype;
    t->ndim = s->ndim;
    for (d = 0; d < s->ndim; ++d) t->shape[d] = s->shape[d];
    t->data = u->mem[k];
    t->nbytes = n;
  }
}

static void update_free(update_t* u) {
  int k;
  for (k = 0; k < NUM_TENSORS; ++k) free(u->mem[k]);
}

static void three_versions_through_zeroed_structs(void** state) {
  char* path = g_addr_path;
  wsync_option_t opt;
  wsync_group_config_t c;
  wsync_group_stats_t stats;
  wsync_group_t* g = NULL;
  update_t u;
  uint64_t v, t1 = 0, t2 = 0, total_bytes = 0;
  pid_t child;
  int k, code;
  wsync_status_t st;
  (void)state;

  for (k = 0; k < NUM_TENSORS; ++k) total_bytes += spec_nbytes(&g_specs[k]);
  snprintf(g_addr_path, sizeof g_addr_path, "/tmp/wsync_abi_zero_%ld.addr", (long)getpid());
  unlink(path);
  child = spawn_receiver(path);

  memset(&opt, 0, sizeof opt);
  opt.struct_size = WSYNC_OPTION_STRUCT_SIZE;
  opt.key = "store_addr_file";
  opt.value = path;
  memset(&c, 0, sizeof c);
  c.struct_size = WSYNC_GROUP_CONFIG_STRUCT_SIZE;
  c.num_receivers = 1;
  c.store_addr = "127.0.0.1:0";
  c.options = &opt;
  c.num_options = 1;
  st = wsync_group_init(&c, &g);
  if (st != WSYNC_OK) {
    print_error("wsync_group_init: %s: %s\n", wsync_status_name(st), wsync_last_error());
    wait_receiver(child, 0);
    unlink(path);
    fail();
  }
  assert_non_null(g);
  assert_string_equal(wsync_last_error(), "");

  for (v = 1; v <= NUM_VERSIONS; ++v) {
    update_build(&u, v);
    if (v == 2) {
      /* the 1.2 async send: both batches in flight, then one wait for the later ticket */
      assert_status(wsync_group_send_start(g, &u.t[0], BATCH_A, WAIT_MS, &t1), WSYNC_OK);
      assert_status(wsync_group_send_start(g, &u.t[BATCH_A], NUM_TENSORS - BATCH_A, WAIT_MS, &t2), WSYNC_OK);
      /* tickets count every started batch of the group, send_batch's included (2 in version 1) */
      assert_int_equal(t1, 3);
      assert_int_equal(t2, t1 + 1);
      assert_status(wsync_group_send_wait(g, t2, WAIT_MS), WSYNC_OK);
      assert_status(wsync_group_send_wait(g, t1, 0), WSYNC_OK); /* delivered before t2: at once */
    } else {
      /* a negative call timeout is the group's timeout_ms option (default 60000) */
      assert_status(wsync_group_send_batch(g, &u.t[0], BATCH_A, v == 1 ? -1 : WAIT_MS), WSYNC_OK);
      assert_status(wsync_group_send_batch(g, &u.t[BATCH_A], NUM_TENSORS - BATCH_A, WAIT_MS), WSYNC_OK);
    }
    assert_status(wsync_group_finalize(g, v, WAIT_MS), WSYNC_OK);
    update_free(&u);
  }

  memset(&stats, 0, sizeof stats);
  stats.struct_size = WSYNC_GROUP_STATS_STRUCT_SIZE;
  assert_status(wsync_group_get_stats(g, &stats), WSYNC_OK);
  print_message("stats: version %llu, %llu updates, %llu batches, %llu buckets, %llu tensors, %llu bytes, "
                "staging %llu bytes, %.3f s\n",
                (unsigned long long)stats.committed_version, (unsigned long long)stats.updates,
                (unsigned long long)stats.batches, (unsigned long long)stats.buckets,
                (unsigned long long)stats.tensors, (unsigned long long)stats.bytes,
                (unsigned long long)stats.staging_bytes, stats.send_seconds);
  assert_int_equal(stats.struct_size, WSYNC_GROUP_STATS_STRUCT_SIZE);
  assert_int_equal(stats.num_receivers, 1);
  assert_int_equal(stats.committed_version, NUM_VERSIONS);
  assert_int_equal(stats.updates, NUM_VERSIONS);
  assert_int_equal(stats.batches, 2 * NUM_VERSIONS);
  assert_int_equal(stats.tensors, NUM_TENSORS * NUM_VERSIONS);
  assert_int_equal(stats.bytes, total_bytes * NUM_VERSIONS);
  assert_true(stats.buckets >= NUM_VERSIONS);
  assert_int_equal(stats.device_staging_bytes, 0); /* host tensors only */

  wsync_group_destroy(g); /* the receiver sees CLOSED and exits */
  code = wait_receiver(child, WAIT_MS);
  unlink(path);
  if (code != 0) print_error("the receiver exited with %d (its reason is on stderr above)\n", code);
  assert_int_equal(code, 0);
}

/* 1 when `msg` names receiver rank `rank`: "rank 1", "rank(s) 1", "ranks 1, 2" ... */
static int names_rank(const char* msg, int rank) {
  const char* p = msg;
  while ((p = strstr(p, "rank")) != NULL) {
    const char* q = p + 4;
    char* end;
    long r;
    if (strncmp(q, "(s)", 3) == 0) q += 3;
    else if (*q == 's') ++q;
    while (*q == ' ' || *q == ':' || *q == '=') ++q;
    r = strtol(q, &end, 10);
    if (end != q && r == rank) return 1;
    p += 4;
  }
  return 0;
}

/* Config timeout_ms 0 = the option timeout_ms (here 300), not "do not wait" (1.1) and not 60 s. */
static void zero_timeout_waits_for_the_option(void** state) {
  wsync_option_t opt;
  wsync_group_config_t c;
  wsync_group_t* g = (wsync_group_t*)1;
  int64_t t0, dt;
  (void)state;
  memset(&opt, 0, sizeof opt);
  opt.struct_size = WSYNC_OPTION_STRUCT_SIZE;
  opt.key = "timeout_ms";
  opt.value = "300";
  memset(&c, 0, sizeof c); /* store_addr NULL = "127.0.0.1:0", timeout_ms 0 */
  c.struct_size = WSYNC_GROUP_CONFIG_STRUCT_SIZE;
  c.num_receivers = 1;
  c.options = &opt;
  c.num_options = 1;
  t0 = abi_now_ms();
  assert_status(wsync_group_init(&c, &g), WSYNC_ERR_TIMEOUT);
  dt = abi_now_ms() - t0;
  print_message("group init with config timeout_ms 0, option timeout_ms 300, no receiver: %lld ms: %s\n",
                (long long)dt, wsync_last_error());
  assert_null(g);
  assert_in_range(dt, 250, 4999);
  if (!names_rank(wsync_last_error(), 1)) {
    print_error("the timeout does not name the missing rank 1: \"%s\"\n", wsync_last_error());
    fail();
  }
}

/* wsync_list_plugins into zeroed entries; the default plugins are found beside libwsync. */
static void list_plugins_into_zeroed_infos(void** state) {
  enum { CAP = 32 };
  wsync_plugin_info_t infos[CAP];
  uint64_t count = 0, count0 = 0, i, n;
  const char* dirs;
  int ucx = 0, native = 0;
  (void)state;
  memset(infos, 0, sizeof infos);
  for (i = 0; i < CAP; ++i) infos[i].struct_size = WSYNC_PLUGIN_INFO_STRUCT_SIZE;
  assert_status(wsync_list_plugins(infos, CAP, &count), WSYNC_OK);
  dirs = wsync_plugin_dirs();
  print_message("%llu plugin(s) in \"%s\"\n", (unsigned long long)count, dirs);
  assert_true(count >= 2);
  n = count < CAP ? count : CAP;
  for (i = 0; i < n; ++i) {
    const wsync_plugin_info_t* p = &infos[i];
    assert_int_equal(p->struct_size, WSYNC_PLUGIN_INFO_STRUCT_SIZE);
    assert_non_null(p->name);
    assert_non_null(p->path);
    assert_non_null(p->version);
    assert_non_null(p->detail);
    assert_non_null(p->error);
    print_message("  %s %s: %s (%s) %s\n", p->kind == WSYNC_PLUGIN_KIND_TRANSPORT ? "transport" : "adapter", p->name,
                  p->path, wsync_status_name(p->status), p->error);
    assert_true(strlen(p->name) > 0);
    assert_contains(p->path, p->name);
    assert_true(p->kind == WSYNC_PLUGIN_KIND_TRANSPORT || p->kind == WSYNC_PLUGIN_KIND_ADAPTER);
    if (p->status == WSYNC_OK) {
      assert_string_equal(p->error, "");
      assert_int_equal(p->abi_major, WSYNC_PLUGIN_ABI_VERSION);
    } else {
      assert_true(strlen(p->error) > 0);
    }
    if (p->kind == WSYNC_PLUGIN_KIND_TRANSPORT && strcmp(p->name, "ucx") == 0 && !p->shadowed) {
      ++ucx;
      assert_status(p->status, WSYNC_OK);
      assert_true(strlen(p->version) > 0);
      assert_contains(dirs, "/wsync"); /* found in the folder beside libwsync */
    }
    if (p->kind == WSYNC_PLUGIN_KIND_ADAPTER && strcmp(p->name, "native") == 0 && !p->shadowed) {
      ++native;
      assert_status(p->status, WSYNC_OK);
      assert_true(strlen(p->version) > 0);
    }
  }
  assert_int_equal(ucx, 1);
  assert_int_equal(native, 1);
  /* capacity 0: only the count */
  assert_status(wsync_list_plugins(NULL, 0, &count0), WSYNC_OK);
  assert_int_equal(count0, count);
}

static int kill_leftover_receiver(void** state) {
  (void)state;
  if (g_child > 0) {
    kill(g_child, SIGKILL);
    waitpid(g_child, NULL, 0);
    g_child = 0;
  }
  if (g_addr_path[0] != '\0') unlink(g_addr_path);
  return 0;
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(three_versions_through_zeroed_structs, kill_leftover_receiver),
      cmocka_unit_test(zero_timeout_waits_for_the_option),
      cmocka_unit_test(list_plugins_into_zeroed_infos),
  };
  if (argc == 3 && strcmp(argv[1], "--receiver") == 0) return receiver_main(argv[2]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
