/* cipc_plugin.c — transport 'cuda_ipc': the entry point (refuses to load without a CUDA
 * device), the function table, and the life of an instance (create, connect, abort, destroy,
 * get_property). The sender's side is in cipc_staging.c / cipc_send.c, the receiver's in
 * cipc_open.c / cipc_recv.c; the protocol is described in cipc_transport.h and cipc_logic.h. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cipc_transport.h"


static void free_instance(cipc_transport_t* t) {
  cipc_book_free(&t->book);
  free(t->forgotten);
  free(t->group);
  free(t);
}

static wsync_status_t cipc_create(const wsync_transport_params_t* params, void** out) {
  cipc_transport_t* t;
  cipc_options_t opts;
  char err[512];
  wsync_status_t rc;
  int device = -1;
  if ((rc = wsp_check_transport_params("transport 'cuda_ipc'", params, out, "the IPC handles")) != WSYNC_OK)
    return rc;
  rc = cipc_parse_options(params->options, params->num_options, &opts, err, sizeof err);
  if (rc != WSYNC_OK) return wsp_fail(rc, "transport 'cuda_ipc': %s", err);

  /* The device: the core's choice when this core passes one, else the current device. On the
   * receiver it is replaced at connect by the ordinal that sees the sender's GPU. */
  if (WSYNC_HAS_FIELD(params, wsync_transport_params_t, device_index) && params->device_index >= 0) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || params->device_index >= count)
      return wsp_fail(WSYNC_ERR_NO_DEVICE, "transport 'cuda_ipc': rank %u: CUDA device %d does not exist here (%d "
                       "visible%s%s)", params->rank, params->device_index, count, e != cudaSuccess ? ": " : "",
                       e != cudaSuccess ? cudaGetErrorString(e) : "");
    device = params->device_index;
  } else {
    const cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess)
      return wsp_fail(WSYNC_ERR_NO_DEVICE, "transport 'cuda_ipc': rank %u: cudaGetDevice failed: %s", params->rank,
                       cudaGetErrorString(e));
  }

  t = (cipc_transport_t*)calloc(1, sizeof *t);
  if (t == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  t->rank = params->rank;
  t->world_size = params->world_size;
  t->store = params->store;
  t->opts = opts;
  t->device = device;
  atomic_init(&t->aborted, 0);
  t->group = strdup(params->group_name ? params->group_name : "wsync");
  t->forgotten = (uint8_t*)calloc(params->world_size, 1);
  if (t->group == NULL || t->forgotten == NULL) {
    free_instance(t);
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  }
  if (cipc_key(t->key_staging, sizeof t->key_staging, t->group, "staging", -1) != 0) {
    free_instance(t);
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': the group name '%.64s...' is too long for a "
                     "store key", params->group_name);
  }
  *out = t;
  return WSYNC_OK;
}

static wsync_status_t cipc_connect(void* self, int64_t timeout_ms) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  wsync_status_t rc;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': connect on NULL");
  if (t->connected)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': rank %u is already connected", t->rank);
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank %u: aborted", t->rank);
  rc = t->rank == 0 ? cipc_connect_sender(t, timeout_ms) : cipc_connect_receiver(t, timeout_ms);
  if (rc == WSYNC_OK) t->connected = 1;
  return rc;
}

static void cipc_abort(void* self) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  /* Any thread: only the flag; every wait loop of the plugin looks at it. */
  if (t != NULL) atomic_store(&t->aborted, 1);
}

static void cipc_destroy(void* self) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  if (t == NULL) return;
  if (t->rank == 0)
    cipc_release_sender(t);
  else
    cipc_release_receiver(t);
  free_instance(t);
}

static wsync_status_t cipc_get_property(void* self, const char* key, char* buf, uint64_t cap) {
  (void)buf;
  (void)cap;
  if (self == NULL || key == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': get_property: NULL instance or key");
  return wsp_fail(WSYNC_ERR_NOT_FOUND, "transport 'cuda_ipc' has no property '%s' (it publishes none)", key);
}

/* What wsync-info prints: the CUDA runtime and driver, and the devices. */
static const char* cipc_runtime_info(void) {
  static char text[128];
  int rt = 0, drv = 0, count = 0;
  if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
  if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  (void)cudaGetLastError();
  snprintf(text, sizeof text, "CUDA runtime %d.%d, driver %d.%d, %d device(s)", rt / 1000, rt % 1000 / 10, drv / 1000,
           drv % 1000 / 10, count);
  return text;
}

static const wsync_transport_v1_t kCudaIpcTransport = {
    (uint32_t)sizeof(wsync_transport_v1_t),
    WSYNC_PLUGIN_ABI_VERSION,
    CIPC_NAME,
    WSYNC_PLUGIN_VERSION,
    WSYNC_TRANSPORT_CAP_CUDA_MEMORY | WSYNC_TRANSPORT_CAP_STAGING_ONLY | WSYNC_TRANSPORT_CAP_SCATTER_RECV,
    cipc_create,
    cipc_connect,
    cipc_send_post,
    cipc_send_wait,
    cipc_recv_post,
    cipc_recv_wait,
    cipc_forget_peer,
    cipc_abort,
    cipc_destroy,
    cipc_register_staging,
    cipc_get_property,
    NULL, /* get_event_fd: completion comes with the receivers' ACKs (sender) or a CUDA event (receiver) */
    NULL, /* arm */
    cipc_describe_send,
    cipc_describe_recv,
    cipc_peer_blob,
    cipc_runtime_info,
    NULL, /* progress (plugin ABI 1.4): nothing to move along between waits */
    NULL, /* connect_peer (plugin ABI 1.5): no receiver joins later */
};

__attribute__((visibility("default"))) const wsync_transport_v1_t* wsync_transport_entry_v1(
    const wsync_host_v1_t* host) {
  int count = 0;
  cudaError_t e;
  /* The per-bucket records need a core that carries them (plugin ABI 1.2). */
  WSYNC_PLUGIN_CHECK_HOST(host, abi_minor, "transport 'cuda_ipc'");
  if (host->abi_minor < 2) {
    host->set_error(WSYNC_ERR_VERSION_MISMATCH, "transport 'cuda_ipc' needs a wsync core with plugin ABI 1.2 or newer "
                    "(its per-bucket side channel)");
    return NULL;
  }
  wsp_set_host(host);
  /* Without a driver libcudart_static answers with an error here; it never crashes. */
  e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    wsp_fail(WSYNC_ERR_NO_DEVICE, "transport 'cuda_ipc': no CUDA device (cudaGetDeviceCount: %s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return NULL;
  }
  return &kCudaIpcTransport;
}
