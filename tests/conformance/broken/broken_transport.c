/* Transports for the degraded suite of wsync-conformance (conformance.degraded). They move bytes
 * with memcpy between two instances of one process, which is all the suite's loopback check
 * needs. Built as libwsync_transport_<name>.so into build/lib/wsync-conformance-testing; never
 * installed.
 *
 *   (none)       "noabort"  correct, but leaves every optional function NULL (abort,
 *                           register_staging, get_property): it must still conform
 *   CB_CORRUPT   "corrupt"  flips one byte of every bucket: the loopback check must catch it
 *   CB_SILENT_FD "silentfd" an event fd (1.2) that never becomes readable although arm says
 *                           armed=1: a core sleeping on it would miss completions
 *   CB_FD_NO_ARM "fdnoarm"  get_event_fd without arm: the table check must refuse the pair
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef CB_SILENT_FD
#include <sys/eventfd.h>
#include <unistd.h>
#endif

#include "wsync_plugin.h"

#ifndef CB_NAME
#define CB_NAME "noabort"
#endif
#define CB_MAX_IOV 16
#define CB_SLOTS 8

/* (atomic: the entry runs at every load, maybe while another thread calls in) */
static _Atomic(const wsync_host_v1_t*) g_host;
#define HOST() atomic_load_explicit(&g_host, memory_order_acquire)

/* Process-wide: receives posted by receiver instances, found by the sender's send_wait. */
typedef struct cb_slot {
  int used, done;
  uint64_t seq;
  uint32_t rank;
  wsync_iov_t iov[CB_MAX_IOV];
  uint64_t num_iov;
} cb_slot_t;
static cb_slot_t g_slots[CB_SLOTS];
static int g_lock;

static void lock(void) {
  while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) {
  }
}
static void unlock(void) { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }

static void nap(void) {
  struct timespec ts = {0, 1000000}; /* 1 ms */
  nanosleep(&ts, NULL);
}

typedef struct cb_transport {
  uint32_t rank, world_size;
  uint64_t pending_seq;
  const void* pending_data;
  uint64_t pending_len;
  int pending;
  int event_fd; /* CB_SILENT_FD: an eventfd nobody writes */
} cb_transport_t;

static wsync_status_t cb_create(const wsync_transport_params_t* params, void** out) {
  cb_transport_t* t;
  uint64_t i;
  if (out != NULL) *out = NULL;
  if (params == NULL || out == NULL) return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "create: NULL argument");
  if (params->struct_size < offsetof(wsync_transport_params_t, timeout_ms) + sizeof params->timeout_ms)
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "transport '" CB_NAME "': params too small");
  if (params->world_size < 1 || params->rank >= params->world_size)
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "transport '" CB_NAME "': rank outside the world");
  if (params->num_options > 0 && params->options == NULL)
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "transport '" CB_NAME "': NULL options");
  for (i = 0; i < params->num_options; ++i) {
    char msg[300];
    const char* key = params->options[i].key ? params->options[i].key : "(null)";
    strcpy(msg, "transport '" CB_NAME "' has no option '");
    strncat(msg, key, 200);
    strcat(msg, "'");
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, msg);
  }
  t = (cb_transport_t*)calloc(1, sizeof *t);
  if (t == NULL) return HOST()->set_error(WSYNC_ERR_OUT_OF_MEMORY, "out of memory");
  t->rank = params->rank;
  t->world_size = params->world_size;
  t->event_fd = -1;
  *out = t;
  return WSYNC_OK;
}

static wsync_status_t cb_connect(void* self, int64_t timeout_ms) {
  (void)timeout_ms;
  return self ? WSYNC_OK : WSYNC_ERR_INVALID_ARGUMENT;
}

static wsync_status_t cb_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                                   uint32_t num_ranks) {
  cb_transport_t* t = (cb_transport_t*)self;
  (void)ranks, (void)num_ranks;
  if (t == NULL || buf == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  t->pending = 1;
  t->pending_seq = seq;
  t->pending_data = buf->data;
  t->pending_len = buf->len;
  return WSYNC_OK;
}

/* Completes the copy once the receiver's recv_post is there. */
static wsync_status_t cb_send_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  cb_transport_t* t = (cb_transport_t*)self;
  int i;
  (void)timeout_ms;
  if (t == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  if (!t->pending || t->pending_seq != seq) return WSYNC_OK;
  lock();
  for (i = 0; i < CB_SLOTS; ++i) {
    cb_slot_t* s = &g_slots[i];
    uint64_t k, off = 0;
    if (!s->used || s->done || s->seq != seq) continue;
    for (k = 0; k < s->num_iov && off < t->pending_len; ++k) {
      uint64_t n = s->iov[k].len < t->pending_len - off ? s->iov[k].len : t->pending_len - off;
      memcpy(s->iov[k].base, (const char*)t->pending_data + off, n);
      off += n;
    }
#ifdef CB_CORRUPT
    if (s->num_iov > 0 && s->iov[0].len > 0) ((unsigned char*)s->iov[0].base)[0] ^= 0x5a;
#endif
    s->done = 1;
    t->pending = 0;
    unlock();
    return WSYNC_OK;
  }
  unlock();
  nap();
  return WSYNC_ERR_TIMEOUT;
}

static wsync_status_t cb_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  cb_transport_t* t = (cb_transport_t*)self;
  int i;
  if (t == NULL || (iov == NULL && num_iov > 0) || num_iov > CB_MAX_IOV) return WSYNC_ERR_INVALID_ARGUMENT;
  lock();
  for (i = 0; i < CB_SLOTS; ++i) {
    cb_slot_t* s = &g_slots[i];
    if (s->used) continue;
    s->used = 1;
    s->done = 0;
    s->seq = seq;
    s->rank = t->rank;
    memcpy(s->iov, iov, num_iov * sizeof *iov);
    s->num_iov = num_iov;
    unlock();
    return WSYNC_OK;
  }
  unlock();
  return HOST()->set_error(WSYNC_ERR_OUT_OF_MEMORY, "transport '" CB_NAME "': too many posted receives");
}

static wsync_status_t cb_recv_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  cb_transport_t* t = (cb_transport_t*)self;
  int i;
  (void)timeout_ms;
  if (t == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  lock();
  for (i = 0; i < CB_SLOTS; ++i) {
    cb_slot_t* s = &g_slots[i];
    if (s->used && s->rank == t->rank && s->seq == seq && s->done) {
      s->used = 0;
      unlock();
      return WSYNC_OK;
    }
  }
  unlock();
  nap();
  return WSYNC_ERR_TIMEOUT;
}

static void cb_forget_peer(void* self, uint32_t rank) { (void)self, (void)rank; }

#if defined(CB_SILENT_FD) || defined(CB_FD_NO_ARM)
static wsync_status_t cb_get_event_fd(void* self, int32_t* fd) {
  cb_transport_t* t = (cb_transport_t*)self;
  if (t == NULL || fd == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
#ifdef CB_SILENT_FD
  if (t->event_fd < 0) t->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  *fd = t->event_fd;
#else
  *fd = -1;
#endif
  return WSYNC_OK;
}
#endif

#ifdef CB_SILENT_FD
static wsync_status_t cb_arm(void* self, int32_t* armed) {
  (void)self;
  *armed = 1; /* wrong: completions never make the fd readable */
  return WSYNC_OK;
}
#endif

static void cb_destroy(void* self) {
#ifdef CB_SILENT_FD
  cb_transport_t* t = (cb_transport_t*)self;
  if (t != NULL && t->event_fd >= 0) close(t->event_fd);
#endif
  free(self);
}

static const wsync_transport_v1_t kTable = {
    (uint32_t)sizeof(wsync_transport_v1_t),
    WSYNC_PLUGIN_ABI_VERSION,
    CB_NAME,
    "0.0.0-conformance",
    WSYNC_TRANSPORT_CAP_HOST_MEMORY,
    cb_create,
    cb_connect,
    cb_send_post,
    cb_send_wait,
    cb_recv_post,
    cb_recv_wait,
    cb_forget_peer,
    NULL, /* abort: optional */
    cb_destroy,
    NULL, /* register_staging: optional */
    NULL, /* get_property: optional */
#if defined(CB_SILENT_FD) || defined(CB_FD_NO_ARM)
    cb_get_event_fd,
#else
    NULL, /* get_event_fd: optional (1.2) */
#endif
#ifdef CB_SILENT_FD
    cb_arm,
#else
    NULL, /* arm */
#endif
    NULL, /* describe_send: optional (1.2) */
    NULL, /* describe_recv */
    NULL, /* peer_blob */
    NULL, /* runtime_info */
    NULL, /* progress (plugin ABI 1.4): nothing to move along between waits */
    NULL, /* connect_peer (plugin ABI 1.5): no receiver joins later */
};

__attribute__((visibility("default"))) const wsync_transport_v1_t* wsync_transport_entry_v1(const wsync_host_v1_t* host) {
  WSYNC_PLUGIN_CHECK_HOST(host, set_error, "a broken test plugin");
  atomic_store_explicit(&g_host, host, memory_order_release);
  return &kTable;
}
