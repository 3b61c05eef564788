/* Transport "faulty": the real UCX transport plugin (loaded from WSYNC_FAULTY_UCX, its path at build
 * time) with one fault injected on the SENDING side, for tests of what receivers see when a bucket
 * goes wrong on the data plane. Every call is UCX's, except send_post of the n-th bucket this
 * process sends (1-based, counted over all its groups), when the file named by the environment
 * variable WSYNC_FAULTY_FILE holds "<fault> <n>":
 *
 *   corrupt <n>   send a copy of the bucket with one byte flipped (the caller's memory is left as
 *                 it is: the bytes change on their way, so a receiver with verify_payload sees a
 *                 payload checksum mismatch, also when the core hashes while the bytes move)
 *   stall <n>     send nothing: the receiver waits for the bytes until its timeout, and the
 *                 sender's send_wait answers "not yet" until the core gives up
 *   late <n>      send the bucket, but hide its completion: send_wait answers "not yet" until the
 *                 core forgets the peer (forget_peer), as when a receiver took the bytes, ACKed
 *                 and closed before the sender's transport saw its own send complete
 *   short <n>     send the bucket one byte short (the receiver's transport sees a message smaller
 *                 than it posted for)
 *   slow <ms>     every send waits <ms> milliseconds first: a slow link, whose buckets take long
 *                 while their pieces keep moving
 *
 * The file is read at every send_post, so a test writes it between updates. A process without
 * WSYNC_FAULTY_FILE (the receivers) runs plain UCX. Test-only; never installed. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wsync_plugin.h"

#define FT_EXPORT __attribute__((visibility("default")))

/* (atomic: the entry runs at every load, maybe while another thread calls in) */
static _Atomic(const wsync_host_v1_t*) g_host;
#define HOST() atomic_load_explicit(&g_host, memory_order_acquire)
static const wsync_transport_v1_t* g_ucx;
static wsync_transport_v1_t g_table;
static unsigned long g_sent;      /* send_post calls of this process */
static pid_t g_sent_pid;          /* the process g_sent counts for (a forked child starts at 0) */
static uint64_t g_stalled_seq;    /* the bucket never sent, 0: none */
static uint64_t g_late_seq;       /* the bucket whose completion is hidden until forget_peer, 0: none */

/* The fault for the send_post numbered `n`: 'c' (corrupt), 's' (stall), 'l' (late), 'h' (short), 'w' (slow:
 * *slow_ms) or 0. */
static int fault_for(unsigned long n, unsigned long* slow_ms) {
  const char* path = getenv("WSYNC_FAULTY_FILE");
  char kind[16] = {0};
  unsigned long at = 0;
  FILE* f;
  if (path == NULL || (f = fopen(path, "r")) == NULL) return 0;
  if (fscanf(f, "%15s %lu", kind, &at) != 2) at = 0;
  fclose(f);
  if (strcmp(kind, "slow") == 0) {
    *slow_ms = at;
    return 'w';
  }
  if (at != n) return 0;
  if (strcmp(kind, "corrupt") == 0) return 'c';
  if (strcmp(kind, "stall") == 0) return 's';
  if (strcmp(kind, "late") == 0) return 'l';
  if (strcmp(kind, "short") == 0) return 'h';
  return 0;
}

static wsync_status_t faulty_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                                       uint32_t num_ranks) {
  unsigned long slow_ms = 0;
  int fault;
  if (g_sent_pid != getpid()) {
    g_sent_pid = getpid();
    g_sent = 0;
  }
  fault = fault_for(++g_sent, &slow_ms);
  if (fault == 'w') {
    struct timespec ts = {(time_t)(slow_ms / 1000), (long)(slow_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (fault == 's') {
    g_stalled_seq = seq;
    return WSYNC_OK;
  }
  if (fault == 'l') g_late_seq = seq;
  if (fault == 'h' && buf->len > 0) {
    wsync_buffer_t cut = *buf;
    cut.len--;
    return g_ucx->send_post(self, seq, &cut, ranks, num_ranks);
  }
  if (fault == 'c' && buf->len > 0 && buf->device_type != WSYNC_DEVICE_CUDA) {
    static unsigned char* copy; /* kept until the next corruption: the send may read it until then */
    wsync_buffer_t bent = *buf;
    free(copy);
    if ((copy = (unsigned char*)malloc(buf->len)) == NULL)
      return HOST()->set_error(WSYNC_ERR_OUT_OF_MEMORY, "transport 'faulty': out of memory");
    memcpy(copy, buf->data, buf->len);
    copy[buf->len / 2] ^= 0x5A;
    bent.data = copy;
    return g_ucx->send_post(self, seq, &bent, ranks, num_ranks);
  }
  return g_ucx->send_post(self, seq, buf, ranks, num_ranks);
}

static wsync_status_t faulty_send_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  if (seq != 0 && (seq == g_stalled_seq || seq == g_late_seq)) {
    struct timespec ts = {0, 1000000L * (timeout_ms > 0 && timeout_ms < 20 ? timeout_ms : 20)};
    if (timeout_ms != 0) nanosleep(&ts, NULL);
    return HOST()->set_error(WSYNC_ERR_TIMEOUT, "transport 'faulty': bucket stalled on purpose");
  }
  return g_ucx->send_wait(self, seq, timeout_ms);
}

static void faulty_forget_peer(void* self, uint32_t rank) {
  g_late_seq = 0; /* the sends to it end (the tests' late buckets go to one receiver) */
  g_ucx->forget_peer(self, rank);
}

FT_EXPORT const wsync_transport_v1_t* wsync_transport_entry_v1(const wsync_host_v1_t* host) {
  void* lib;
  wsync_transport_entry_v1_fn entry;
  WSYNC_PLUGIN_CHECK_HOST(host, set_error, "transport 'faulty'");
  atomic_store_explicit(&g_host, host, memory_order_release);
  if (g_ucx != NULL) return &g_table;
  lib = dlopen(WSYNC_FAULTY_UCX, RTLD_NOW | RTLD_LOCAL);
  entry = lib ? (wsync_transport_entry_v1_fn)dlsym(lib, "wsync_transport_entry_v1") : NULL;
  if (entry == NULL || (g_ucx = entry(host)) == NULL) {
    host->set_error(WSYNC_ERR_NOT_FOUND, "transport 'faulty': cannot load the UCX plugin " WSYNC_FAULTY_UCX);
    return NULL;
  }
  memcpy(&g_table, g_ucx, g_ucx->struct_size < sizeof g_table ? g_ucx->struct_size : sizeof g_table);
  g_table.name = "faulty";
  g_table.send_post = faulty_send_post;
  g_table.send_wait = faulty_send_wait;
  g_table.forget_peer = faulty_forget_peer;
  return &g_table;
}
