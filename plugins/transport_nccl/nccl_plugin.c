/* nccl_plugin.c — transport 'nccl': the entry point, the function table, and the life of an
 * instance (create, abort, destroy, properties). Every function that does CUDA or NCCL work
 * makes the instance's device current first and gives the caller's thread its own back after.
 * The communicator is in nccl_comm.c, the data plane in nccl_ops.c. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_transport.h"


static wsync_status_t pick_device(const wsync_transport_params_t* params, int* out) {
  cudaError_t e;
  int count = 0, dev = -1;
  if ((e = cudaGetDeviceCount(&count)) != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    return wsp_fail(WSYNC_ERR_NO_DEVICE, NCCL_TP ": no CUDA device (cudaGetDeviceCount: %s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  }
  if (WSYNC_HAS_FIELD(params, wsync_transport_params_t, device_index) && params->device_index >= 0) {
    dev = params->device_index;
  } else if ((e = cudaGetDevice(&dev)) != cudaSuccess) {
    (void)cudaGetLastError();
    return wsp_fail(WSYNC_ERR_NO_DEVICE, NCCL_TP ": rank %u: no current CUDA device (cudaGetDevice: %s)", params->rank,
                     cudaGetErrorString(e));
  }
  if (dev >= count)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": rank %u: device_index %d is not a CUDA device of this "
                     "process (%d visible)", params->rank, dev, count);
  *out = dev;
  return WSYNC_OK;
}

static void free_instance(nccl_transport_t* t) {
  if (t == NULL) return;
  free(t->group);
  free(t);
}

static wsync_status_t tp_create(const wsync_transport_params_t* params, void** out) {
  char err[512];
  nccl_transport_t* t;
  wsync_status_t st;
  int prev;
  if ((st = wsp_check_transport_params(NCCL_TP, params, out, "the NCCL unique id")) != WSYNC_OK) return st;

  t = (nccl_transport_t*)calloc(1, sizeof *t);
  if (t == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, NCCL_TP ": out of memory");
  atomic_init(&t->aborted, 0);
  t->rank = params->rank;
  t->world_size = params->world_size;
  t->store = params->store;
  t->broken_status = WSYNC_OK;
  t->group = strdup(params->group_name != NULL ? params->group_name : "wsync");
  if (t->group == NULL) {
    free_instance(t);
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, NCCL_TP ": out of memory");
  }
  if (nccl_parse_options(params->options, params->num_options, &t->opts, err, sizeof err) != WSYNC_OK ||
      (WSYNC_HAS_FIELD(params, wsync_transport_params_t, num_hints) &&
       nccl_apply_hints(params->options, params->num_options, params->hints, params->num_hints, &t->opts, err,
                        sizeof err) != WSYNC_OK)) {
    free_instance(t);
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "%s", err);
  }
  if (nccl_wsync_id_key(t->group, t->id_key, sizeof t->id_key) < 0) {
    st = wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": the group name '%.64s...' is too long for a store key",
                   t->group);
    free_instance(t);
    return st;
  }
  if (t->opts.torch_group[0] != '\0') {
    if (nccl_torch_id_key(t->opts.torch_group, t->torch_key, sizeof t->torch_key) < 0) {
      free_instance(t); /* cannot happen: torch_group is at most 255 bytes */
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": option 'transport.torch_group' is too long");
    }
    if (t->store == NULL) {
      free_instance(t);
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": option 'transport.torch_group' needs the group's store, "
                       "and there is none");
    }
  }
  if ((st = pick_device(params, &t->device)) != WSYNC_OK) {
    free_instance(t);
    return st;
  }
  if (t->rank == 0) {
    /* The id exists from create on, so that an adapter can hand it to engines (vLLM's
     * nccl_unique_id_b64) before they join in connect. */
    if ((st = nccl_device_enter(t, &prev)) != WSYNC_OK) {
      free_instance(t);
      return st;
    }
    st = nccl_publish_id(t);
    nccl_device_leave(t, prev);
    if (st != WSYNC_OK) {
      free_instance(t);
      return st;
    }
  }
  wsp_log(WSYNC_LOG_DEBUG, NCCL_TP ": rank %u of %u created on cuda:%d (group '%s'%s%s%s)", t->rank, t->world_size,
           t->device, t->group, t->opts.torch_group[0] ? ", torch group '" : "", t->opts.torch_group,
           t->opts.torch_group[0] ? "'" : "");
  *out = t;
  return WSYNC_OK;
}

static void tp_abort(void* self) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  /* Any thread: only the flag. The owner thread's poll loops (and its next call) see it and
   * ncclCommAbort the communicator themselves. */
  if (t != NULL) atomic_store_explicit(&t->aborted, 1, memory_order_release);
}

static void tp_destroy(void* self) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  int prev = -1;
  if (t == NULL) return;
  if (nccl_device_enter(t, &prev) != WSYNC_OK) prev = -1; /* go on: free what can be freed */
  nccl_comm_close(t, nccl_ops_idle(t));
  if (t->scratch != NULL) nccl_dev_free(t, t->scratch);
  t->scratch = NULL;
  nccl_ops_free(t);
  if (t->stream != NULL && cudaStreamDestroy(t->stream) != cudaSuccess) (void)cudaGetLastError();
  t->stream = NULL;
  nccl_device_leave(t, prev);
  free_instance(t);
}

static wsync_status_t tp_get_property(void* self, const char* key, char* buf, uint64_t cap) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  char b64[NCCL_LOGIC_ID_B64_CHARS + 1];
  const char* value;
  size_t len;
  if (t == NULL || key == NULL || (buf == NULL && cap > 0))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": get_property: NULL argument");
  if (strcmp(key, WSYNC_PROPERTY_NCCL_UNIQUE_ID) == 0) {
    if (!t->have_id)
      return wsp_fail(WSYNC_ERR_INVALID_STATE, NCCL_TP ": rank %u has no NCCL unique id yet (a receiver reads it from "
                       "store key '%s' in connect)", t->rank, t->id_key);
    if (nccl_b64_encode(&t->id, sizeof t->id, b64, sizeof b64) < 0)
      return wsp_fail(WSYNC_ERR_INTERNAL, NCCL_TP ": base64 of the unique id failed (please report)");
    value = b64;
  } else if (strcmp(key, WSYNC_PROPERTY_TORCH_STORE_KEY) == 0) {
    if (t->torch_key[0] == '\0')
      return wsp_fail(WSYNC_ERR_NOT_FOUND, NCCL_TP ": property 'torch_store_key' is not set: the option "
                       "'transport.torch_group' was not given");
    value = t->torch_key;
  } else {
    return wsp_fail(WSYNC_ERR_NOT_FOUND, NCCL_TP ": unknown property '%s' (known: nccl_unique_id_b64, "
                     "torch_store_key)", key);
  }
  len = strlen(value);
  if (cap < (uint64_t)len + 1)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": property '%s' needs %zu bytes with its NUL; the buffer "
                     "holds %llu", key, len + 1, (unsigned long long)cap);
  memcpy(buf, value, len + 1);
  return WSYNC_OK;
}

/* ---- the table: device-scoped wrappers ---------------------------------------------------------- */

#define WITH_DEVICE(t, call)                                    \
  do {                                                          \
    int prev_;                                                  \
    wsync_status_t st_;                                         \
    if ((st_ = nccl_device_enter((t), &prev_)) != WSYNC_OK) return st_; \
    st_ = (call);                                               \
    nccl_device_leave((t), prev_);                              \
    return st_;                                                 \
  } while (0)

static wsync_status_t tp_connect(void* self, int64_t timeout_ms) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": connect on NULL");
  WITH_DEVICE(t, nccl_connect(t, timeout_ms));
}

static wsync_status_t tp_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                                   uint32_t num_ranks) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": send_post on NULL");
  WITH_DEVICE(t, nccl_send_post(t, seq, buf, ranks, num_ranks));
}

static wsync_status_t tp_send_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": send_wait on NULL");
  WITH_DEVICE(t, nccl_wait(t, NCCL_OP_SEND, seq, timeout_ms));
}

static wsync_status_t tp_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": recv_post on NULL");
  WITH_DEVICE(t, nccl_recv_post(t, seq, iov, num_iov));
}

static wsync_status_t tp_recv_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, NCCL_TP ": recv_wait on NULL");
  WITH_DEVICE(t, nccl_wait(t, NCCL_OP_RECV, seq, timeout_ms));
}

static void tp_forget_peer(void* self, uint32_t rank) {
  nccl_transport_t* t = (nccl_transport_t*)self;
  int prev = -1;
  if (t == NULL) return;
  if (nccl_device_enter(t, &prev) != WSYNC_OK) prev = -1;
  nccl_forget_peer(t, rank);
  nccl_device_leave(t, prev);
}

/* What wsync-info prints: the CUDA runtime and driver, the devices, and the NCCL library loaded. */
static const char* tp_runtime_info(void) {
  static char text[192];
  int rt = 0, drv = 0, count = 0, nccl = 0;
  if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
  if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  (void)cudaGetLastError();
  if (ncclGetVersion(&nccl) != ncclSuccess) nccl = 0;
  snprintf(text, sizeof text, "NCCL %d.%d.%d; CUDA runtime %d.%d, driver %d.%d, %d device(s)", nccl / 10000,
           nccl / 100 % 100, nccl % 100, rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, count);
  return text;
}

static const wsync_transport_v1_t kNcclTransport = {
    (uint32_t)sizeof(wsync_transport_v1_t),
    WSYNC_PLUGIN_ABI_VERSION,
    "nccl",
    WSYNC_PLUGIN_VERSION,
    WSYNC_TRANSPORT_CAP_CUDA_MEMORY,
    tp_create,
    tp_connect,
    tp_send_post,
    tp_send_wait,
    tp_recv_post,
    tp_recv_wait,
    tp_forget_peer,
    tp_abort,
    tp_destroy,
    NULL, /* register_staging: sends go straight from any CUDA buffer of the device */
    tp_get_property,
    NULL, /* get_event_fd: completion is a CUDA event, polled */
    NULL, /* arm */
    NULL, /* describe_send: NCCL needs no per-bucket side channel */
    NULL, /* describe_recv */
    NULL, /* peer_blob */
    tp_runtime_info,
    NULL, /* progress (plugin ABI 1.4): nothing to move along between waits */
    NULL, /* connect_peer (plugin ABI 1.5): no receiver joins later */
};

__attribute__((visibility("default"))) const wsync_transport_v1_t* wsync_transport_entry_v1(
    const wsync_host_v1_t* host) {
  cudaError_t e;
  int count = 0;
  WSYNC_PLUGIN_CHECK_HOST(host, store_get, "transport 'nccl'");
  wsp_set_host(host);
  /* Without a GPU or a driver this fails (or counts 0): refuse to load, never crash. */
  if ((e = cudaGetDeviceCount(&count)) != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    wsp_fail(WSYNC_ERR_NO_DEVICE, NCCL_TP ": no CUDA device (cudaGetDeviceCount: %s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return NULL;
  }
  return &kNcclTransport;
}
