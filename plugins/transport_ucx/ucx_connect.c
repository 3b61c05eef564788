/* ucx_connect.c — worker-address exchange through the group's store, endpoint creation and
 * closing.
 *
 * Every rank publishes a record under "wsync/<group>/ucx/addr/<rank>": the magic "WSXA", its
 * random tag base (u64 little-endian, ucx_tags.c; used by receivers) and its worker address. The
 * store holds these only for members that proved the group secret. The sender
 * reads every receiver's and creates an endpoint to each; a receiver reads the sender's and
 * creates one back (so a dead sender is reported on it in error mode "peer"). Connecting does
 * not flush: wire-up finishes during the first transfer, when both sides progress, so a rank
 * that leaves connect early never stalls one that is still in it.
 *
 * Forgetting a peer (ucx_forget_peer) lives here too, beside closing its endpoint: it hands back
 * the peer's sends (ucx_send.c) and, on a receiver, cancels its receives (ucx_recv.c), then closes.
 * The data-plane files never call back into this one. */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ucx_transport.h"


static void addr_key(const ucx_transport_t* t, uint32_t rank, char* key, size_t cap) {
  snprintf(key, cap, "wsync/%s/ucx/addr/%u", t->group, rank);
}

#define ADDR_MAGIC "WSXA"
#define ADDR_HEADER 12 /* magic + tag base */

static wsync_status_t publish_address(ucx_transport_t* t) {
  ucp_address_t* addr = NULL;
  size_t len = 0;
  char key[512];
  wsync_status_t rc;
  uint8_t* rec;
  int i;
  ucs_status_t st = ucp_worker_get_address(t->worker, &addr, &len);
  if (st != UCS_OK)
    return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': ucp_worker_get_address failed: %s", ucs_status_string(st));
  if (t->rank != 0 && (rc = ucx_random_tag(&t->tag_base)) != WSYNC_OK) {
    ucp_worker_release_address(t->worker, addr);
    return rc;
  }
  rec = (uint8_t*)malloc(ADDR_HEADER + len);
  if (rec == NULL) {
    ucp_worker_release_address(t->worker, addr);
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
  }
  memcpy(rec, ADDR_MAGIC, 4);
  for (i = 0; i < 8; ++i) rec[4 + i] = (uint8_t)(t->tag_base >> (8 * i));
  memcpy(rec + ADDR_HEADER, addr, len);
  ucp_worker_release_address(t->worker, addr);
  addr_key(t, t->rank, key, sizeof key);
  rc = wsp_host()->store_set(t->store, key, rec, ADDR_HEADER + len);
  free(rec);
  if (rc != WSYNC_OK) return wsp_fail(rc, "transport 'ucx': publishing the worker address of rank %u failed", t->rank);
  return WSYNC_OK;
}

/* Read rank's record into a malloc'd buffer (*out) waiting until `deadline`; *tag_base gets its tag
 * base and *addr points at its worker address inside *out. */
static wsync_status_t fetch_address(ucx_transport_t* t, uint32_t rank, int64_t deadline, void** out,
                                    const void** addr, uint64_t* tag_base) {
  const uint8_t* rec;
  int i;
  char key[512];
  uint64_t cap = 4096, len = 0;
  int64_t left = deadline - wsp_now_ms();
  void* buf = malloc(cap);
  wsync_status_t rc;
  if (buf == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
  addr_key(t, rank, key, sizeof key);
  rc = wsp_host()->store_get(t->store, key, buf, cap, &len, left > 0 ? left : 0);
  if (rc == WSYNC_ERR_INVALID_ARGUMENT && len > cap) { /* larger than guessed (many devices) */
    void* big = realloc(buf, len);
    if (big == NULL) {
      free(buf);
      return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'ucx': out of memory");
    }
    buf = big;
    cap = len;
    rc = wsp_host()->store_get(t->store, key, buf, cap, &len, 0);
  }
  if (rc != WSYNC_OK) {
    free(buf);
    if (rc == WSYNC_ERR_TIMEOUT)
      return wsp_fail(rc, "transport 'ucx': rank %u did not publish its UCX address ('%s') in time", rank, key);
    return wsp_fail(rc, "transport 'ucx': reading the UCX address of rank %u ('%s') failed", rank, key);
  }
  rec = (const uint8_t*)buf;
  if (len <= ADDR_HEADER || memcmp(rec, ADDR_MAGIC, 4) != 0) {
    free(buf);
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'ucx': the UCX address record of rank %u ('%s', %llu bytes) is "
                    "malformed (a peer of an older wsync?)", rank, key, (unsigned long long)len);
  }
  *tag_base = 0;
  for (i = 0; i < 8; ++i) *tag_base |= (uint64_t)rec[4 + i] << (8 * i);
  *addr = rec + ADDR_HEADER;
  *out = buf;
  return WSYNC_OK;
}

static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  ucx_peer_t* peer = (ucx_peer_t*)arg;
  (void)ep;
  if (peer->failed == UCS_OK) peer->failed = status;
  wsp_log(WSYNC_LOG_WARN, "transport 'ucx': rank %u: endpoint to rank %u failed: %s", peer->owner->rank,
          peer->rank, ucs_status_string(status));
}

/* One DEBUG line naming the lanes UCX picked, from ucp_ep_print_info's report. */
static void log_lanes(ucx_transport_t* t, uint32_t rank, int peer_mode) {
  char* text = NULL;
  size_t size = 0;
  char line[1024];
  size_t used = 0;
  char* save = NULL;
  char* tok;
  FILE* f = open_memstream(&text, &size);
  if (f == NULL) return;
  ucp_ep_print_info(t->peers[rank].ep, f);
  fclose(f);
  line[0] = '\0';
  for (tok = strtok_r(text, "\n", &save); tok != NULL; tok = strtok_r(NULL, "\n", &save)) {
    const char* s = tok;
    while (*s == '#' || *s == ' ') ++s;
    if (strncmp(s, "lane[", 5) != 0 && strncmp(s, "tag_send:", 9) != 0) continue;
    used += (size_t)snprintf(line + used, used < sizeof line ? sizeof line - used : 0, "%s%s", used ? "; " : "", s);
    if (used >= sizeof line) break;
  }
  free(text);
  wsp_log(WSYNC_LOG_DEBUG, "transport 'ucx': rank %u -> rank %u (error mode %s): %s", t->rank, rank,
          peer_mode ? "peer" : "none", line);
}

static ucs_status_t try_create_ep(ucx_transport_t* t, uint32_t rank, const void* addr, int peer_mode) {
  ucp_ep_params_t ep;
  memset(&ep, 0, sizeof ep);
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = (const ucp_address_t*)addr;
  ep.err_mode = peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  if (peer_mode) {
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_handler.cb = on_ep_error;
    ep.err_handler.arg = &t->peers[rank];
  }
  return ucp_ep_create(t->worker, &ep, &t->peers[rank].ep);
}

/* In error mode "peer", a peer that offers only shared memory (every member on one host, see
 * ucx_context.c, while this side was not told so: a wildcard store address, or no hint) is
 * unreachable; it is reached in mode "none" then, where a dead peer is noticed by the core's
 * control connection instead of by UCX. */
static wsync_status_t create_ep(ucx_transport_t* t, uint32_t rank, const void* addr) {
  int peer_mode = t->err_mode_peer;
  ucs_status_t st = try_create_ep(t, rank, addr, peer_mode);
  if (st == UCS_ERR_UNREACHABLE && peer_mode) {
    wsp_log(WSYNC_LOG_INFO, "transport 'ucx': rank %u offers only transports without peer failure detection "
            "(shared memory); its endpoint uses error mode none", rank);
    peer_mode = 0;
    st = try_create_ep(t, rank, addr, peer_mode);
  }
  if (st != UCS_OK) {
    t->peers[rank].ep = NULL;
    return wsp_fail(ucx_status_to_wsync(st), "transport 'ucx': creating the endpoint to rank %u failed: %s", rank,
                    ucs_status_string(st));
  }
  log_lanes(t, rank, peer_mode);
  return WSYNC_OK;
}

wsync_status_t ucx_connect(void* self, int64_t timeout_ms) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  const int64_t deadline = wsp_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
  uint32_t first, last, r;
  wsync_status_t rc;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': connect on NULL");
  if (t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': already connected");
  rc = publish_address(t);
  if (rc != WSYNC_OK) return rc;
  first = t->rank == 0 ? 1 : 0;
  last = t->rank == 0 ? t->world_size - 1 : 0;
  for (r = first; r <= last && t->world_size > 1 && !t->join_later; ++r) {
    void* rec = NULL;
    const void* addr = NULL;
    uint64_t tag_base = 0;
    if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'ucx': aborted during connect");
    rc = fetch_address(t, r, deadline, &rec, &addr, &tag_base);
    if (rc != WSYNC_OK) return rc;
    t->peers[r].tag_base = tag_base;
    rc = create_ep(t, r, addr);
    free(rec);
    if (rc != WSYNC_OK) return rc;
  }
  t->connected = 1;
  return WSYNC_OK;
}

wsync_status_t ucx_connect_peer(void* self, uint32_t rank, int64_t timeout_ms) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  const int64_t deadline = wsp_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
  void* rec = NULL;
  const void* addr = NULL;
  uint64_t tag_base = 0;
  wsync_status_t rc;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': connect_peer on NULL");
  if (t->rank != 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': connect_peer is the sender's (rank 0)");
  if (!t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'ucx': connect_peer before connect");
  if (rank == 0 || rank >= t->world_size)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': connect_peer: rank %u is not a receiver of this "
                    "world (1..%u)", rank, t->world_size - 1);
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'ucx': aborted during connect_peer");
  rc = fetch_address(t, rank, deadline, &rec, &addr, &tag_base);
  if (rc != WSYNC_OK) return rc;
  if (t->peers[rank].ep != NULL) { /* an endpoint to a process that is gone: closed, never progressed here
                                     * (see ucx_destroy on closing a live peer's endpoint) */
    ucx_release_sends(t, rank);
    ucx_close_peer(t, rank);
  }
  t->peers[rank].tag_base = tag_base;
  t->peers[rank].failed = UCS_OK;
  t->peers[rank].forgotten = 0;
  rc = create_ep(t, rank, addr);
  free(rec);
  return rc;
}

void ucx_close_peer(ucx_transport_t* t, uint32_t rank) {
  ucp_request_param_t p;
  void* req;
  if (rank >= t->world_size || t->peers[rank].ep == NULL) return;
  memset(&p, 0, sizeof p);
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  req = ucp_ep_close_nbx(t->peers[rank].ep, &p);
  t->peers[rank].ep = NULL;
  /* A forced close is done when the call returns (UCX 1.13 to 1.22 return no request for it: the
   * lanes are discarded and what is left finishes on later progress or in ucp_worker_destroy).
   * Should a UCX return one, nothing of ours waits for it: UCX frees it when it completes. */
  if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
}

void ucx_forget_peer(void* self, uint32_t rank) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  if (t == NULL || rank >= t->world_size || rank == t->rank) return;
  t->peers[rank].forgotten = 1;
  /* Hand the requests back first: force-closing then completes them inside UCX, and no wait
   * of ours looks at them again. */
  ucx_release_sends(t, rank);
  if (t->rank != 0 && rank == 0) ucx_cancel_recvs(t);
  ucx_close_peer(t, rank);
  /* One progress call lets the force-close complete now in the common case; never a loop. A
   * forgotten peer that is alive has not closed its end yet (the core tells it afterwards), so
   * this progress cannot meet its goodbye; a later one could (see ucx_destroy). Today the core
   * forgets live peers only when it gives up on the group, and then only destroys it. */
  if (t->worker != NULL) ucp_worker_progress(t->worker);
}
