/* ucx_plugin.c — transport 'ucx': the entry point, the function table, and the life of an
 * instance (create, abort, destroy). The data plane is in ucx_send.c / ucx_recv.c. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ucx_transport.h"

const wsync_host_v1_t* ucx_host;

static wsync_status_t ucx_create(const wsync_transport_params_t* params, void** out) {
  ucx_transport_t* t;
  wsync_status_t rc;
  uint32_t r;
  if (out != NULL) *out = NULL;
  if (params == NULL || out == NULL)
    return ucx_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': create: NULL argument");
  if (params->struct_size < offsetof(wsync_transport_params_t, timeout_ms) + sizeof params->timeout_ms)
    return ucx_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': params struct_size %u is too small",
                    params->struct_size);
  if (params->world_size < 1 || params->rank >= params->world_size)
    return ucx_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': rank %u is outside a world of %u", params->rank,
                    params->world_size);
  if (params->store == NULL && params->world_size > 1)
    return ucx_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': no store to exchange addresses through");
  if (params->options == NULL && params->num_options > 0)
    return ucx_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': options is NULL");

  t = (ucx_transport_t*)calloc(1, sizeof *t);
  if (t == NULL) return ucx_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
  t->rank = params->rank;
  t->world_size = params->world_size;
  t->store = params->store;
  t->group = strdup(params->group_name ? params->group_name : "wsync");
  t->peers = (ucx_peer_t*)calloc(params->world_size, sizeof *t->peers);
  atomic_init(&t->aborted, 0);
  if (t->group == NULL || t->peers == NULL) {
    free(t->group);
    free(t->peers);
    free(t);
    return ucx_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
  }
  for (r = 0; r < t->world_size; ++r) {
    t->peers[r].owner = t;
    t->peers[r].rank = r;
    t->peers[r].failed = UCS_OK;
  }
  rc = ucx_context_open(t, params);
  if (rc != WSYNC_OK) {
    free(t->group);
    free(t->peers);
    free(t);
    return rc;
  }
  *out = t;
  return WSYNC_OK;
}

static void ucx_abort(void* self) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  /* Any thread: only the flag; the waiting thread notices it in its progress loop. */
  if (t != NULL) atomic_store(&t->aborted, 1);
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Give pending close requests a short, bounded chance to finish before the worker goes. */
static void drain_zombies(ucx_transport_t* t, int64_t budget_ms) {
  const int64_t deadline = mono_ms() + budget_ms;
  size_t i, pending;
  do {
    ucp_worker_progress(t->worker);
    for (i = 0, pending = 0; i < t->num_zombies; ++i) {
      ucx_zombie_t* z = &t->zombies[i];
      if (z->req == NULL) continue;
      if (ucp_request_check_status(z->req) == UCS_INPROGRESS) {
        ++pending;
        continue;
      }
      ucp_request_free(z->req);
      z->req = NULL;
    }
  } while (pending > 0 && mono_ms() < deadline);
  for (i = 0; i < t->num_zombies; ++i)
    if (t->zombies[i].req != NULL) {
      ucp_request_free(t->zombies[i].req);
      t->zombies[i].req = NULL;
    }
}

static void ucx_destroy(void* self) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  size_t i;
  uint32_t r;
  if (t == NULL) return;
  if (t->worker != NULL) {
    for (i = 0; i < t->num_sends; ++i)
      if (t->sends[i].req != NULL) ucp_request_free(t->sends[i].req);
    t->num_sends = 0;
    ucx_cancel_recvs(t);
    for (r = 0; r < t->world_size; ++r) ucx_close_peer(t, r);
    drain_zombies(t, 200);
  }
  ucx_context_close(t);
  for (i = 0; i < t->num_zombies; ++i) free(t->zombies[i].iov);
  free(t->zombies);
  free(t->sends);
  free(t->recvs);
  free(t->peers);
  free(t->group);
  free(t);
}

static const wsync_transport_v1_t kUcxTransport = {
    (uint32_t)sizeof(wsync_transport_v1_t),
    WSYNC_PLUGIN_ABI_VERSION,
    "ucx",
    WSYNC_PLUGIN_VERSION,
    WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_SCATTER_RECV,
    ucx_create,
    ucx_connect,
    ucx_send_post,
    ucx_send_wait,
    ucx_recv_post,
    ucx_recv_wait,
    ucx_forget_peer,
    ucx_abort,
    ucx_destroy,
    NULL, /* register_staging: UCX sends from any host memory */
    NULL, /* get_property */
};

__attribute__((visibility("default"))) const wsync_transport_v1_t* wsync_transport_entry_v1(
    const wsync_host_v1_t* host) {
  if (host == NULL) return NULL;
  if (host->struct_size < sizeof(wsync_host_v1_t) || host->set_error == NULL || host->store_set == NULL ||
      host->store_get == NULL) {
    if (host->struct_size >= offsetof(wsync_host_v1_t, set_error) + sizeof host->set_error && host->set_error)
      host->set_error(WSYNC_ERR_VERSION_MISMATCH,
                      "transport 'ucx': the host table is too small or lacks set_error/store_set/store_get");
    return NULL;
  }
  ucx_host = host;
  return &kUcxTransport;
}
