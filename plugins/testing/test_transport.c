/* A test-only transport plugin. One source, several variants chosen by compile definitions,
 * each built as its own libwsync_transport_<name>.so into build/lib/wsync-testing:
 *
 *   (none)                      "stub": a valid table; connect/send/recv succeed and move nothing
 *   TP_ABI_VERSION=99           the table claims plugin ABI 99
 *   TP_SMALL_TABLE              the table's struct_size is smaller than a v1 table
 *   TP_NO_ENTRY                 exports no wsync_transport_entry_v1 (a misspelled symbol instead)
 *   TP_REFUSE_NO_CUDA           the entry returns NULL after host->set_error("no CUDA device ...")
 *   TP_NULL_SEND_POST           the required function send_post is NULL
 *   TP_V10_TABLE                a plugin built against plugin ABI 1.0: its table ends at destroy
 *
 * Never installed. Only for tests of the loader and of the public ABI. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "wsync_plugin.h"

#ifndef TP_NAME
#define TP_NAME "stub"
#endif
#ifndef TP_ABI_VERSION
#define TP_ABI_VERSION WSYNC_PLUGIN_ABI_VERSION
#endif

#define TP_EXPORT __attribute__((visibility("default")))

/* (atomic: the entry runs at every load, maybe while another thread calls in) */
static _Atomic(const wsync_host_v1_t*) g_host;
#define HOST() atomic_load_explicit(&g_host, memory_order_acquire)

typedef struct stub_transport {
  uint32_t rank;
  volatile int aborted;
} stub_transport_t;

static wsync_status_t stub_create(const wsync_transport_params_t* params, void** out) {
  stub_transport_t* t;
  uint64_t i;
  if (params == NULL || out == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  if (params->options == NULL && params->num_options > 0)
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, "transport '" TP_NAME "': options is NULL but num_options "
                             "is not 0");
  for (i = 0; i < params->num_options; ++i) {
    /* The stub takes no options: name the key, as the plugin contract asks. */
    char msg[300];
    const char* key = params->options[i].key ? params->options[i].key : "(null)";
    strcpy(msg, "transport '" TP_NAME "' has no option '");
    strncat(msg, key, 200);
    strcat(msg, "'");
    return HOST()->set_error(WSYNC_ERR_INVALID_ARGUMENT, msg);
  }
  t = (stub_transport_t*)calloc(1, sizeof *t);
  if (t == NULL) return HOST()->set_error(WSYNC_ERR_OUT_OF_MEMORY, "transport '" TP_NAME "': out of memory");
  t->rank = params->rank;
  *out = t;
  return WSYNC_OK;
}

static wsync_status_t stub_connect(void* self, int64_t timeout_ms) {
  (void)timeout_ms;
  return self ? WSYNC_OK : WSYNC_ERR_INVALID_ARGUMENT;
}

static wsync_status_t stub_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                                     uint32_t num_ranks) {
  (void)seq, (void)buf, (void)ranks, (void)num_ranks;
  return self ? WSYNC_OK : WSYNC_ERR_INVALID_ARGUMENT;
}

static wsync_status_t stub_send_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  stub_transport_t* t = (stub_transport_t*)self;
  (void)seq, (void)timeout_ms;
  if (t == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  return t->aborted ? WSYNC_ERR_ABORTED : WSYNC_OK;
}

static wsync_status_t stub_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  uint64_t i;
  (void)seq;
  if (self == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  for (i = 0; i < num_iov; ++i)
    if (iov[i].base != NULL) memset(iov[i].base, 0, iov[i].len); /* moves no bytes: zeros */
  return WSYNC_OK;
}

static wsync_status_t stub_recv_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  stub_transport_t* t = (stub_transport_t*)self;
  (void)seq, (void)timeout_ms;
  if (t == NULL) return WSYNC_ERR_INVALID_ARGUMENT;
  return t->aborted ? WSYNC_ERR_ABORTED : WSYNC_OK;
}

static void stub_forget_peer(void* self, uint32_t rank) { (void)self, (void)rank; }

static void stub_abort(void* self) {
  if (self) ((stub_transport_t*)self)->aborted = 1;
}

static void stub_destroy(void* self) { free(self); }

static const wsync_transport_v1_t kTable = {
#ifdef TP_SMALL_TABLE
    (uint32_t)offsetof(wsync_transport_v1_t, send_post), /* an "older", truncated table */
#elif defined(TP_V10_TABLE)
    (uint32_t)offsetof(wsync_transport_v1_t, register_staging), /* 1.0 ended after destroy */
#else
    (uint32_t)sizeof(wsync_transport_v1_t),
#endif
    TP_ABI_VERSION,
    TP_NAME,
    "0.0.0-test",
    WSYNC_TRANSPORT_CAP_HOST_MEMORY,
    stub_create,
    stub_connect,
#ifdef TP_NULL_SEND_POST
    NULL,
#else
    stub_send_post,
#endif
    stub_send_wait,
    stub_recv_post,
    stub_recv_wait,
    stub_forget_peer,
    stub_abort,
    stub_destroy,
    NULL, /* register_staging */
    NULL, /* get_property */
    NULL, /* get_event_fd: the core polls in 1 ms slices */
    NULL, /* arm */
    NULL, /* describe_send: no side channel */
    NULL, /* describe_recv */
    NULL, /* peer_blob */
    NULL, /* runtime_info */
    NULL, /* progress (plugin ABI 1.4): nothing to move along between waits */
    NULL, /* connect_peer (plugin ABI 1.5): no receiver joins later */
};

#ifdef TP_NO_ENTRY
/* A near miss: the loader looks for wsync_transport_entry_v1 and must not take this. */
TP_EXPORT const wsync_transport_v1_t* wsync_transport_entry(const wsync_host_v1_t* host) {
  atomic_store_explicit(&g_host, host, memory_order_release);
  return &kTable;
}
#else
TP_EXPORT const wsync_transport_v1_t* wsync_transport_entry_v1(const wsync_host_v1_t* host) {
  WSYNC_PLUGIN_CHECK_HOST(host, set_error, "transport '" TP_NAME "'");
  atomic_store_explicit(&g_host, host, memory_order_release);
#ifdef TP_NULL_SEND_POST
  (void)stub_send_post; /* present, but the table leaves it NULL */
#endif
#ifdef TP_REFUSE_NO_CUDA
  /* How a GPU-only plugin refuses on a machine without a GPU. */
  (void)kTable;
  host->set_error(WSYNC_ERR_NO_DEVICE, "no CUDA device is visible to transport '" TP_NAME "' (cudaGetDeviceCount = 0)");
  return NULL;
#else
  return &kTable;
#endif
}
#endif
