/* ucx_plugin.c — transport 'ucx': the entry point, the function table, and the life of an
 * instance (create, abort, destroy). The data plane is in ucx_send.c / ucx_recv.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ucx_transport.h"


static wsync_status_t ucx_create(const wsync_transport_params_t* params, void** out) {
  ucx_transport_t* t;
  wsync_status_t rc;
  uint32_t r;
  if ((rc = wsp_check_transport_params("transport 'ucx'", params, out, "addresses")) != WSYNC_OK) return rc;
  if (params->options == NULL && params->num_options > 0)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': options is NULL");

  t = (ucx_transport_t*)calloc(1, sizeof *t);
  if (t == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
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
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
  }
  for (r = 0; r < t->world_size; ++r) {
    t->peers[r].owner = t;
    t->peers[r].rank = r;
    t->peers[r].failed = UCS_OK;
  }
  {
    const char* later = wsp_hint(params, WSYNC_HINT_JOIN_LATER);
    t->join_later = t->rank == 0 && later != NULL && strcmp(later, "1") == 0;
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

/* Hand back what is outstanding, close every endpoint, and destroy the worker without
 * progressing it in between: ucp_worker_destroy finishes the closes itself.
 *
 * Why no progress (the crash in cluster.kill_star, UCX 1.13.1 over TCP; that code is the same in
 * UCX 1.22): closing the endpoint to a peer that is alive while a bucket to it is half-sent
 * leaves UCX's TCP connection half-closed inside the worker: receive-only, its goodbye (CONN_FIN)
 * queued behind the unsent bytes, the socket watched for writability. When that peer closes in
 * turn (it was told the update is abandoned), its CONN_FIN arrives. A worker progress that finds
 * the socket readable and writable at once frees the endpoint on reading CONN_FIN
 * (uct_tcp_cm_handle_conn_fin) and then looks up its state again for the write event
 * (uct_tcp_iface_handle_events): a read of freed memory, then a call through whatever pointer
 * that byte selects. memcheck saw it on every such run; it crashed about one run in five. */
static void ucx_destroy(void* self) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  size_t i;
  uint32_t r;
  if (t == NULL) return;
  ucx_log_closing(1);
  if (t->worker != NULL) {
    for (i = 0; i < t->num_sends; ++i)
      if (t->sends[i].req != NULL) ucp_request_free(t->sends[i].req);
    t->num_sends = 0;
    ucx_cancel_recvs(t);
    for (r = 0; r < t->world_size; ++r) ucx_close_peer(t, r);
  }
  ucx_context_close(t);
  ucx_log_closing(-1);
  for (i = 0; i < t->num_kept_iovs; ++i) free(t->kept_iovs[i]);
  free(t->kept_iovs);
  free(t->sends);
  free(t->recvs);
  free(t->peers);
  free(t->group);
  free(t);
}

/* What wsync-info prints for this plugin: the UCX library it runs on, and the transports and
 * devices UCX sees here ("tcp/eth0 posix/memory ..."; UCX_TLS then picks among them). */
static const char* ucx_runtime_info(void) {
  static char text[1200];
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  snprintf(text, sizeof text, "UCX %u.%u.%u (%s); transports/devices: %s", major, minor, release,
           ucp_get_version_string(), ucx_devices_text());
  return text;
}

static const wsync_transport_v1_t kUcxTransport = {
    (uint32_t)sizeof(wsync_transport_v1_t),
    WSYNC_PLUGIN_ABI_VERSION,
    "ucx",
    WSYNC_PLUGIN_VERSION,
    WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_SCATTER_RECV | WSYNC_TRANSPORT_CAP_PIECES |
        WSYNC_TRANSPORT_CAP_FORGET_ONE,
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
    ucx_get_event_fd,
    ucx_arm,
    NULL, /* describe_send: UCX needs no per-bucket side channel */
    NULL, /* describe_recv */
    NULL, /* peer_blob */
    ucx_runtime_info,
    ucx_progress,
    ucx_connect_peer,
};

__attribute__((visibility("default"))) const wsync_transport_v1_t* wsync_transport_entry_v1(
    const wsync_host_v1_t* host) {
  WSYNC_PLUGIN_CHECK_HOST(host, store_get, "transport 'ucx'");
  wsp_set_host(host);
  ucx_log_route();
  return &kUcxTransport;
}
