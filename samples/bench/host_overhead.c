/* wsync-host-overhead: the host cost of wsync's control path per tensor, for callgrind.
 *
 *   wsync-host-overhead --tensors N [--transport NAME_OR_PATH]
 *
 * One process: a sender on the main thread and a receiver on a second thread, joined over
 * loopback through wsync's real store and control channel. The receiver registers a buffer for
 * every tensor (so each one is looked up by name); the sender publishes N tiny tensors (fp32[4],
 * unique names) in one batch and finalizes one version. With the test transport 'stub' (which
 * moves no bytes, and so never spins) what is counted is wsync's own work per tensor: reading the
 * descriptors, checking names and shapes, planning, the manifest on both sides, the registration
 * lookups and the receiver's event. samples/bench/host_overhead.sh runs it under callgrind for two
 * values of N and prints (Ir(N2) - Ir(N1)) / (N2 - N1): instructions per tensor, fixed costs
 * removed. Exit 0 on success, 1 on any failure (the message is printed). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wsync.h"

typedef struct shared {
  char addr_file[64];
  uint64_t n;
  int status;
} shared_t;

static void name_of(uint64_t i, char* buf, size_t cap) {
  snprintf(buf, cap, "model.layers.%llu.self_attn.q_proj.weight", (unsigned long long)i);
}

static int fail(const char* what, wsync_status_t st) {
  fprintf(stderr, "wsync-host-overhead: %s: %s: %s\n", what, wsync_status_name(st), wsync_last_error());
  return 1;
}

static void* receiver_main(void* arg) {
  shared_t* s = (shared_t*)arg;
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_receiver_t* rx = NULL;
  wsync_tensor_t* regs = (wsync_tensor_t*)calloc(s->n, sizeof *regs);
  char* names = (char*)calloc(s->n, 64);
  float* data = (float*)calloc(s->n, 4 * sizeof(float));
  wsync_status_t st;
  uint64_t i;
  char addr[128] = {0};
  s->status = 1;
  for (i = 0; i < 30000 && addr[0] == '\0'; ++i) { /* up to 30 s for the sender to bind its store */
    FILE* f = fopen(s->addr_file, "r");
    if (f != NULL) {
      if (fgets(addr, sizeof addr, f) == NULL) addr[0] = '\0';
      fclose(f);
      addr[strcspn(addr, "\n")] = '\0';
    }
    if (addr[0] == '\0') usleep(1000);
  }
  cfg.rank = 1;
  cfg.store_addr = addr;
  cfg.group_name = "overhead";
  if ((st = wsync_receiver_init(&cfg, &rx)) != WSYNC_OK) {
    fail("receiver init", st);
    goto out;
  }
  for (i = 0; i < s->n; ++i) {
    wsync_tensor_t t = WSYNC_TENSOR_INIT;
    name_of(i, names + 64 * i, 64);
    t.name = names + 64 * i;
    t.dtype = WSYNC_DTYPE_FLOAT32;
    t.ndim = 1;
    t.shape[0] = 4;
    t.data = data + 4 * i;
    t.nbytes = 16;
    regs[i] = t;
  }
  if ((st = wsync_receiver_register(rx, regs, s->n)) != WSYNC_OK) {
    fail("register", st);
    goto out;
  }
  for (;;) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    if ((st = wsync_receiver_next(rx, &ev, 60000)) != WSYNC_OK) {
      fail("receiver next", st);
      goto out;
    }
    if (ev.kind == WSYNC_EVENT_COMMIT) {
      if ((st = wsync_receiver_commit(rx, ev.version)) != WSYNC_OK) {
        fail("commit", st);
        goto out;
      }
    } else if (ev.kind == WSYNC_EVENT_CLOSED) {
      break;
    }
  }
  s->status = 0;
out:
  wsync_receiver_destroy(rx);
  free(regs);
  free(names);
  free(data);
  return NULL;
}

int main(int argc, char** argv) {
  shared_t s;
  const char* transport = "stub";
  wsync_option_t opts[2] = {WSYNC_OPTION("timeout_ms", "60000"), WSYNC_OPTION("store_addr_file", "")};
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  wsync_group_t* g = NULL;
  wsync_tensor_t* t;
  char* names;
  float* data;
  pthread_t th;
  wsync_status_t st;
  uint64_t i;
  int a, rc = 1;
  memset(&s, 0, sizeof s);
  s.n = 1000;
  for (a = 1; a + 1 < argc; a += 2) {
    if (strcmp(argv[a], "--tensors") == 0) s.n = strtoull(argv[a + 1], NULL, 10);
    else if (strcmp(argv[a], "--transport") == 0) transport = argv[a + 1];
  }
  t = (wsync_tensor_t*)calloc(s.n, sizeof *t);
  names = (char*)calloc(s.n, 64);
  data = (float*)calloc(s.n, 4 * sizeof(float));
  pthread_create(&th, NULL, receiver_main, &s);
  cfg.num_receivers = 1;
  cfg.group_name = "overhead";
  cfg.store_addr = "127.0.0.1:0";
  cfg.transport = transport;
  /* The receiver thread reads the bound store address from this file (init blocks until it joined). */
  snprintf(s.addr_file, sizeof s.addr_file, "/tmp/wsync-overhead-%d.addr", (int)getpid());
  unlink(s.addr_file);
  opts[1].value = s.addr_file;
  cfg.options = opts;
  cfg.num_options = 2;
  cfg.timeout_ms = 60000;
  if ((st = wsync_group_init(&cfg, &g)) != WSYNC_OK) {
    fail("group init", st);
    goto out;
  }
  for (i = 0; i < s.n; ++i) {
    wsync_tensor_t x = WSYNC_TENSOR_INIT;
    name_of(i, names + 64 * i, 64);
    x.name = names + 64 * i;
    x.dtype = WSYNC_DTYPE_FLOAT32;
    x.ndim = 1;
    x.shape[0] = 4;
    x.data = data + 4 * i;
    x.nbytes = 16;
    t[i] = x;
  }
  if ((st = wsync_group_send_batch(g, t, s.n, -1)) != WSYNC_OK) {
    fail("send_batch", st);
    goto out;
  }
  if ((st = wsync_group_finalize(g, 1, -1)) != WSYNC_OK) {
    fail("finalize", st);
    goto out;
  }
  rc = 0;
out:
  wsync_group_destroy(g);
  pthread_join(th, NULL);
  unlink(s.addr_file);
  free(t);
  free(names);
  free(data);
  if (rc == 0 && s.status != 0) rc = 1;
  if (rc == 0) printf("wsync-host-overhead: %llu tensors sent and committed\n", (unsigned long long)s.n);
  return rc;
}
