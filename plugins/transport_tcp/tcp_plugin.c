/* tcp_plugin.c — transport 'tcp': the entry point, the function table, options and hints, and the
 * life of an instance (create, abort, destroy). See tcp_transport.h for the design.
 *
 * Options (keys arrive without the "transport." prefix):
 *   streams   TCP connections per receiver, 1..16 (default 1: one stream fills the emulated
 *             cluster's shaped NICs, and two made 4 senders into 2 receivers 20 % slower there, the
 *             receivers' ports taking twice the flows; on loopback two moved 3.5 GB/s against one's
 *             2.6; docs/PERFORMANCE.md). Rank 0's value is published, so receivers use the sender's.
 * Hints: auth_key (required: the core derives it from the group secret; without it the plugin
 * refuses to create, it would have nothing to admit connections with), local_address (rank 0
 * listens there only), join_later. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_transport.h"

#define TCP_DEFAULT_STREAMS 1

static int hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = tolower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static wsync_status_t read_options(tcp_transport_t* t, const wsync_transport_params_t* params) {
  uint64_t i;
  t->streams = TCP_DEFAULT_STREAMS;
  if (params->options == NULL && params->num_options > 0)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": options is NULL");
  for (i = 0; i < params->num_options; ++i) {
    const size_t stride = params->options[0].struct_size ? params->options[0].struct_size : sizeof(wsync_option_t);
    const wsync_option_t* o = (const wsync_option_t*)((const char*)params->options + i * stride);
    if (o->key == NULL || o->value == NULL)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": option %llu has a NULL key or value", (unsigned long long)i);
    if (strcmp(o->key, "streams") == 0) {
      char* end = NULL;
      const unsigned long v = strtoul(o->value, &end, 10);
      if (o->value[0] == '\0' || *end != '\0' || v < 1 || v > TCP_MAX_STREAMS)
        return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": option 'transport.streams' is '%s'; use 1..%d",
                        o->value, TCP_MAX_STREAMS);
      t->streams = (uint32_t)v;
    } else {
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": unknown option 'transport.%s' (this transport has: "
                      "streams)", o->key);
    }
  }
  return WSYNC_OK;
}

static wsync_status_t read_hints(tcp_transport_t* t, const wsync_transport_params_t* params) {
  const char* key = wsp_hint(params, WSYNC_HINT_AUTH_KEY);
  const char* addr = wsp_hint(params, WSYNC_HINT_LOCAL_ADDRESS);
  const char* later = wsp_hint(params, WSYNC_HINT_JOIN_LATER);
  size_t i;
  t->join_later = t->rank == 0 && later != NULL && strcmp(later, "1") == 0;
  if (addr != NULL) {
    if (strlen(addr) >= sizeof t->local_address)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": hint local_address is too long");
    snprintf(t->local_address, sizeof t->local_address, "%s", addr);
  }
  if (key == NULL)
    return wsp_fail(WSYNC_ERR_UNSUPPORTED, TCP_LABEL ": the core gave no hint '" WSYNC_HINT_AUTH_KEY "' to admit "
                    "connections with (it needs a wsync core of plugin ABI 1.6 or newer); refusing to listen without it");
  if (strlen(key) != 2 * TCP_KEY_BYTES)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": hint '" WSYNC_HINT_AUTH_KEY "' is not %d hex digits",
                    2 * TCP_KEY_BYTES);
  for (i = 0; i < TCP_KEY_BYTES; ++i) {
    const int hi = hex_value((unsigned char)key[2 * i]), lo = hex_value((unsigned char)key[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": hint '" WSYNC_HINT_AUTH_KEY "' is not hex");
    t->key[i] = (uint8_t)(hi << 4 | lo);
  }
  if (!tcp_crypto_available())
    return wsp_fail(WSYNC_ERR_UNSUPPORTED, TCP_LABEL ": HMAC-SHA-256 needs the system's libcrypto (OpenSSL 3 or 1.1), "
                    "which could not be loaded (Debian/Ubuntu: apt-get install libssl3; RHEL/Rocky: dnf install "
                    "openssl-libs)");
  return WSYNC_OK;
}

static void tcp_destroy(void* self);

static wsync_status_t tcp_create(const wsync_transport_params_t* params, void** out) {
  tcp_transport_t* t;
  wsync_status_t rc;
  uint32_t r, i;
  pthread_condattr_t ca;
  if ((rc = wsp_check_transport_params(TCP_LABEL, params, out, "addresses")) != WSYNC_OK) return rc;
  t = (tcp_transport_t*)calloc(1, sizeof *t);
  if (t == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, TCP_LABEL ": out of memory");
  t->rank = params->rank;
  t->world_size = params->world_size;
  t->store = params->store;
  t->listen_fd = -1;
  t->wake_fd = -1;
  t->event_fd = -1;
  atomic_init(&t->aborted, 0);
  pthread_mutex_init(&t->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cond, &ca);
  pthread_condattr_destroy(&ca);
  t->world = strdup(params->group_name ? params->group_name : "wsync");
  t->peers = (tcp_peer_t*)calloc(params->world_size, sizeof *t->peers);
  if (t->world == NULL || t->peers == NULL) {
    tcp_destroy(t);
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, TCP_LABEL ": out of memory");
  }
  for (r = 0; r < t->world_size; ++r) {
    t->peers[r].owner = t;
    t->peers[r].rank = r;
    for (i = 0; i < TCP_MAX_STREAMS; ++i) t->peers[r].pending_fd[i] = -1;
  }
  if ((rc = read_options(t, params)) != WSYNC_OK || (rc = read_hints(t, params)) != WSYNC_OK ||
      (rc = tcp_events_open(t)) != WSYNC_OK) {
    tcp_destroy(t);
    return rc;
  }
  if (strlen(t->world) > 400) {
    tcp_destroy(t);
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": the group name is longer than 400 bytes");
  }
  if (tcp_random(&t->instance, sizeof t->instance) != 0) {
    tcp_destroy(t);
    return wsp_fail(WSYNC_ERR_IO, TCP_LABEL ": no random bytes from the system");
  }
  *out = t;
  return WSYNC_OK;
}

/* Any thread. Every peer's sockets are shut down too: a writer blocked in sendmsg (reading the
 * caller's buffer) or a reader in readv (writing its regions) returns at once, so the caller may
 * reuse them once the waits answered ABORTED. */
static void tcp_abort(void* self) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  uint32_t r;
  if (t == NULL) return;
  atomic_store(&t->aborted, 1);
  pthread_mutex_lock(&t->mu);
  for (r = 0; r < t->world_size; ++r)
    if (r != t->rank && t->peers[r].streams != NULL) tcp_peer_fail(t, &t->peers[r], WSYNC_ERR_ABORTED, "aborted");
  tcp_signal(t);
  pthread_mutex_unlock(&t->mu);
}

/* Stop the acceptor, then every peer's threads (their sockets shut down first, so nobody blocks),
 * and free. */
static void tcp_destroy(void* self) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  uint32_t r, i;
  if (t == NULL) return;
  tcp_listen_stop(t);
  if (t->peers != NULL) {
    pthread_mutex_lock(&t->mu);
    for (r = 0; r < t->world_size; ++r) {
      tcp_peer_t* p = &t->peers[r];
      tcp_peer_stop(t, p);
      for (i = 0; i < TCP_MAX_STREAMS; ++i)
        if (p->pending_fd[i] >= 0) close(p->pending_fd[i]);
    }
    pthread_mutex_unlock(&t->mu);
  }
  tcp_free_sends(t);
  tcp_free_recvs(t);
  tcp_events_close(t);
  pthread_cond_destroy(&t->cond);
  pthread_mutex_destroy(&t->mu);
  free(t->peers);
  free(t->world);
  free(t);
}

static const char* tcp_runtime_info(void) {
  static char text[200];
  snprintf(text, sizeof text, "wsync's own TCP transport: connections prove the group secret; %d stream(s) per "
           "receiver by default (option streams, 1..%d)", TCP_DEFAULT_STREAMS, TCP_MAX_STREAMS);
  return text;
}

static const wsync_transport_v1_t kTcpTransport = {
    (uint32_t)sizeof(wsync_transport_v1_t),
    WSYNC_PLUGIN_ABI_VERSION,
    "tcp",
    WSYNC_PLUGIN_VERSION,
    WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_SCATTER_RECV | WSYNC_TRANSPORT_CAP_PIECES |
        WSYNC_TRANSPORT_CAP_FORGET_ONE,
    tcp_create,
    tcp_connect,
    tcp_send_post,
    tcp_send_wait,
    tcp_recv_post,
    tcp_recv_wait,
    tcp_forget_peer,
    tcp_abort,
    tcp_destroy,
    NULL, /* register_staging: sends from any host memory */
    NULL, /* get_property */
    tcp_get_event_fd,
    tcp_arm,
    NULL, /* describe_send: no side channel */
    NULL, /* describe_recv */
    NULL, /* peer_blob */
    tcp_runtime_info,
    NULL, /* progress: the threads move everything */
    tcp_connect_peer,
};

__attribute__((visibility("default"))) const wsync_transport_v1_t* wsync_transport_entry_v1(
    const wsync_host_v1_t* host) {
  WSYNC_PLUGIN_CHECK_HOST(host, store_get, TCP_LABEL);
  wsp_set_host(host);
  return &kTcpTransport;
}
