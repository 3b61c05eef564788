/* ucx_context.c — turn the "transport.*" options into a UCX configuration, and open the ucp
 * context and worker of one instance.
 *
 * Options (keys arrive without the "transport." prefix):
 *   tls         UCX_TLS for this context only, e.g. "tcp" or "sm" (default: UCX chooses)
 *   error_mode  "auto" (default), "peer" or "none": the UCP error handling mode of every
 *               endpoint. "peer" makes a dead peer fail requests instead of hanging them. But in
 *               UCX 1.13 no shared-memory transport (sysv, posix, cma) handles peer failure, so
 *               "peer" moves same-host traffic to TCP (about 3.7 instead of 6 GB/s on loopback
 *               here), and "none" is unsafe on TCP: a killed peer can trip a UCX assertion that
 *               aborts the surviving process. "auto" therefore picks "none" when the transports
 *               (tls, else UCX_TLS) are all shared memory (where a dead peer only stalls: waits
 *               time out and forget_peer works), and "peer" otherwise.
 *   net_devices UCX_NET_DEVICES for this context only, e.g. "lo" or "eth0,ib0".
 * Where UCX listens: when that hint is a loopback address, every member is on this host (the
 * store or the sender is reachable only from here), so unless tls or UCX_TLS says otherwise UCX
 * gets only its intra-host transports ("sm,self"): no network transport, no TCP listener, no door
 * for a process outside the group (docs/SECURITY.md); shared memory is also the fastest path
 * here. (Not with error_mode "peer", which needs TCP: see above.) Otherwise, unless net_devices or UCX_NET_DEVICES says otherwise, the network transports
 * use only the interface that holds the address the core passes as the hint "local_address" (the
 * sender's store bind address, a receiver's end of its control connection). A wildcard or unknown
 * address leaves UCX's default (every interface).
 * UCX_* environment variables apply as usual (tls overrides UCX_TLS). There is no pass-through
 * of other UCX variables: UCX 1.13 accepts any name in ucp_config_modify and only warns later,
 * so a typo could not be refused here. */
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ucx_transport.h"

enum { ERR_MODE_AUTO, ERR_MODE_PEER, ERR_MODE_NONE };

/* Whether every entry of a UCX_TLS list is an intra-host transport. */
static int tls_is_shared_memory_only(const char* tls) {
  static const char* const kLocal[] = {"self", "sm", "shm", "mm", "posix", "sysv", "xpmem", "knem", "cma",
                                       "cuda_copy", "cuda_ipc", "rocm_copy", "rocm_ipc"};
  const char* p = tls;
  if (tls == NULL || *tls == '\0') return 0;
  while (*p != '\0') {
    size_t len = strcspn(p, ","), i;
    int known = 0;
    for (i = 0; i < sizeof kLocal / sizeof kLocal[0]; ++i)
      known |= strlen(kLocal[i]) == len && strncmp(p, kLocal[i], len) == 0;
    if (!known) return 0; /* a network transport, "all", or an exclusion ("^tcp") */
    p += len;
    if (*p == ',') ++p;
  }
  return 1;
}

/* Whether two socket addresses hold the same IP (ports ignored). */
static int same_ip(const struct sockaddr* a, const struct sockaddr* b) {
  if (a == NULL || b == NULL || a->sa_family != b->sa_family) return 0;
  if (a->sa_family == AF_INET)
    return ((const struct sockaddr_in*)a)->sin_addr.s_addr == ((const struct sockaddr_in*)b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6*)a)->sin6_addr, &((const struct sockaddr_in6*)b)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
  return 0;
}

static int is_wildcard(const char* host) {
  return host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || strcmp(host, "[::]") == 0;
}

/* The name of the interface holding `host` (an address or a name), in ifname[IF_NAMESIZE], and
 * whether it is a loopback interface; 0 when none does (or it is a wildcard). */
static int interface_of(const char* host, char* ifname, int* loopback) {
  struct addrinfo hints, *res = NULL, *ai;
  struct ifaddrs *ifs = NULL, *i;
  char bare[256];
  size_t n = strlen(host);
  int found = 0;
  if (is_wildcard(host) || n >= sizeof bare) return 0;
  if (host[0] == '[' && n > 2 && host[n - 1] == ']') { /* "[::1]" */
    memcpy(bare, host + 1, n - 2);
    bare[n - 2] = '\0';
  } else {
    memcpy(bare, host, n + 1);
  }
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(bare, NULL, &hints, &res) != 0) return 0;
  if (getifaddrs(&ifs) == 0) {
    for (ai = res; ai != NULL && !found; ai = ai->ai_next)
      for (i = ifs; i != NULL && !found; i = i->ifa_next)
        if (same_ip(ai->ai_addr, i->ifa_addr) && strlen(i->ifa_name) < IF_NAMESIZE) {
          strcpy(ifname, i->ifa_name);
          *loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
          found = 1;
        }
    freeifaddrs(ifs);
  }
  freeaddrinfo(res);
  return found;
}

/* Whether this host has an RDMA device (InfiniBand or RoCE: an entry in /sys/class/infiniband). */
static int host_has_rdma(void) {
  DIR* d = opendir("/sys/class/infiniband");
  struct dirent* e;
  int any = 0;
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) any = 1;
  closedir(d);
  return any;
}

/* Across hosts with RDMA, UCX's own TCP transport stays out unless tls or UCX_TLS asks for it: it
 * would open a TCP port whose error paths abort the process in UCX 1.13 (docs/SECURITY.md), and
 * RDMA carries the bytes anyway. Without RDMA the core picks transport 'tcp' by default; a user
 * who names 'ucx' there gets UCX's TCP as asked. */
static wsync_status_t exclude_tcp_with_rdma(ucp_config_t* config, const char** tls) {
  static const char kNoTcp[] = "^tcp";
  ucs_status_t st;
  if (*tls != NULL || getenv("UCX_TLS") != NULL || !host_has_rdma()) return WSYNC_OK;
  st = ucp_config_modify(config, "TLS", kNoTcp);
  if (st != UCS_OK)
    return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': cannot leave UCX's TCP transport out (%s): %s", kNoTcp,
                    ucs_status_string(st));
  *tls = kNoTcp;
  wsp_log(WSYNC_LOG_DEBUG, "transport 'ucx': this host has RDMA: UCX's TCP transport is left out (no TCP listener)");
  return WSYNC_OK;
}

/* Keep UCX's network transports on the interface the user bound, or off altogether when every
 * member is on this host (see the header comment). *tls is updated when this sets UCX_TLS. */
static wsync_status_t restrict_interfaces(ucp_config_t* config, const wsync_transport_params_t* params,
                                          int net_devices_set, int err_mode, const char** tls) {
  static const char kHostOnly[] = "sm,self";
  const char* addr = wsp_hint(params, WSYNC_HINT_LOCAL_ADDRESS);
  char ifname[IF_NAMESIZE];
  int loopback = 0;
  ucs_status_t st;
  if (addr == NULL) return WSYNC_OK;
  if (!interface_of(addr, ifname, &loopback)) {
    if (!is_wildcard(addr) && !net_devices_set && getenv("UCX_NET_DEVICES") == NULL)
      wsp_log(WSYNC_LOG_INFO, "transport 'ucx': no interface holds %s; UCX may listen on every interface", addr);
    return exclude_tcp_with_rdma(config, tls);
  }
  /* error_mode "peer" asks for what no shared-memory transport of UCX 1.13 gives: keep TCP then. */
  if (loopback && *tls == NULL && getenv("UCX_TLS") == NULL && err_mode != ERR_MODE_PEER) {
    st = ucp_config_modify(config, "TLS", kHostOnly);
    if (st != UCS_OK)
      return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': cannot restrict UCX to its intra-host transports (%s): %s", kHostOnly,
                      ucs_status_string(st));
    *tls = kHostOnly;
    wsp_log(WSYNC_LOG_DEBUG, "transport 'ucx': every member is on this host (%s is loopback): transports %s, "
            "no network listener", addr, kHostOnly);
    return WSYNC_OK;
  }
  if (!loopback) {
    const wsync_status_t rc = exclude_tcp_with_rdma(config, tls);
    if (rc != WSYNC_OK) return rc;
  }
  if (net_devices_set || getenv("UCX_NET_DEVICES") != NULL) return WSYNC_OK;
  st = ucp_config_modify(config, "NET_DEVICES", ifname);
  if (st != UCS_OK)
    return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': cannot restrict UCX to interface '%s': %s", ifname, ucs_status_string(st));
  wsp_log(WSYNC_LOG_DEBUG, "transport 'ucx': network transports on interface %s (holds %s)", ifname, addr);
  return WSYNC_OK;
}

static wsync_status_t apply_option(ucp_config_t* config, const wsync_option_t* opt, int* err_mode,
                                   const char** tls, int* net_devices_set) {
  const char* key = opt->key ? opt->key : "(null)";
  ucs_status_t st;
  if (opt->key == NULL || opt->value == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': option '%s' has no value", key);
  if (strcmp(key, "tls") == 0) {
    if (opt->value[0] == '\0')
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': option 'tls' is empty");
    st = ucp_config_modify(config, "TLS", opt->value);
    if (st != UCS_OK)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': option 'tls'='%s' refused by UCX: %s",
                      opt->value, ucs_status_string(st));
    *tls = opt->value;
  } else if (strcmp(key, "error_mode") == 0) {
    if (strcmp(opt->value, "auto") == 0) {
      *err_mode = ERR_MODE_AUTO;
    } else if (strcmp(opt->value, "peer") == 0) {
      *err_mode = ERR_MODE_PEER;
    } else if (strcmp(opt->value, "none") == 0) {
      *err_mode = ERR_MODE_NONE;
    } else {
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT,
                      "transport 'ucx': option 'error_mode' must be 'auto', 'peer' or 'none', not '%s'", opt->value);
    }
  } else if (strcmp(key, "net_devices") == 0) {
    if (opt->value[0] == '\0')
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': option 'net_devices' is empty");
    st = ucp_config_modify(config, "NET_DEVICES", opt->value);
    if (st != UCS_OK)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': option 'net_devices'='%s' refused by UCX: %s",
                      opt->value, ucs_status_string(st));
    *net_devices_set = 1;
  } else {
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': there is no option '%s' (known: tls, error_mode, "
                    "net_devices)", key);
  }
  return WSYNC_OK;
}

wsync_status_t ucx_context_open(ucx_transport_t* t, const wsync_transport_params_t* params) {
  ucp_config_t* config = NULL;
  ucp_params_t cp;
  ucp_worker_params_t wp;
  ucs_status_t st;
  wsync_status_t rc = WSYNC_OK;
  int err_mode = ERR_MODE_AUTO;
  int net_devices_set = 0;
  const char* tls = NULL;
  uint64_t i;

  st = ucp_config_read(NULL, NULL, &config);
  if (st != UCS_OK)
    return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': reading the UCX configuration failed: %s",
                    ucs_status_string(st));
  for (i = 0; i < params->num_options && rc == WSYNC_OK; ++i) {
    /* Options are stepped by the struct_size of the first element (ABI rule). */
    const size_t stride = params->options[0].struct_size ? params->options[0].struct_size : sizeof(wsync_option_t);
    rc = apply_option(config, (const wsync_option_t*)((const char*)params->options + i * stride), &err_mode, &tls,
                      &net_devices_set);
  }
  if (rc == WSYNC_OK) rc = restrict_interfaces(config, params, net_devices_set, err_mode, &tls);
  if (rc != WSYNC_OK) {
    ucp_config_release(config);
    return rc;
  }
  if (err_mode == ERR_MODE_AUTO) err_mode = tls_is_shared_memory_only(tls ? tls : getenv("UCX_TLS")) ? ERR_MODE_NONE
                                                                                                    : ERR_MODE_PEER;
  t->err_mode_peer = err_mode == ERR_MODE_PEER;

  memset(&cp, 0, sizeof cp);
  cp.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                  UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  /* WAKEUP: the worker gets an event fd the core sleeps on, instead of spinning a core while a
   * bucket moves. Where UCX cannot (a transport without events), fall back to polling. */
  cp.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  cp.estimated_num_eps = params->world_size;
  cp.mt_workers_shared = 0;
  cp.name = "wsync";
  st = ucp_init(&cp, config, &t->context);
  if (st != UCS_OK) {
    wsp_log(WSYNC_LOG_INFO, "transport 'ucx': ucp_init with wakeup failed (%s); waits will poll", ucs_status_string(st));
    cp.features = UCP_FEATURE_TAG;
    st = ucp_init(&cp, config, &t->context);
  }
  ucp_config_release(config);
  if (st != UCS_OK)
    return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': ucp_init failed: %s (check the 'tls' option and UCX_TLS)",
                    ucs_status_string(st));

  memset(&wp, 0, sizeof wp);
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  /* The core calls an instance from one thread at a time, but not always the same thread. */
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(t->context, &wp, &t->worker);
  if (st != UCS_OK) {
    ucp_cleanup(t->context);
    t->context = NULL;
    return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': ucp_worker_create failed: %s", ucs_status_string(st));
  }
  t->event_fd = -1;
  if ((cp.features & UCP_FEATURE_WAKEUP) && (st = ucp_worker_get_efd(t->worker, &t->event_fd)) != UCS_OK) {
    wsp_log(WSYNC_LOG_INFO, "transport 'ucx': no worker event fd (%s); waits will poll", ucs_status_string(st));
    t->event_fd = -1;
  }
  return WSYNC_OK;
}

wsync_status_t ucx_get_event_fd(void* self, int32_t* fd) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  if (t == NULL || fd == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': get_event_fd: NULL argument");
  *fd = t->event_fd;
  return WSYNC_OK;
}

wsync_status_t ucx_arm(void* self, int32_t* armed) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  ucs_status_t st;
  if (t == NULL || armed == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': arm: NULL argument");
  *armed = 0;
  if (t->event_fd < 0) return WSYNC_OK;
  /* BUSY: events arrived since the last progress; the core progresses again before it sleeps. */
  st = ucp_worker_arm(t->worker);
  if (st == UCS_OK) *armed = 1;
  else if (st != UCS_ERR_BUSY)
    return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': ucp_worker_arm failed: %s", ucs_status_string(st));
  return WSYNC_OK;
}

wsync_status_t ucx_progress(void* self) {
  ucx_transport_t* t = (ucx_transport_t*)self;
  unsigned rounds = 0;
  if (t == NULL || t->worker == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx': progress on NULL");
  /* Until the worker has nothing more to do right now (bounded: never a loop on a busy worker). */
  while (ucp_worker_progress(t->worker) != 0 && ++rounds < 64) {
  }
  ucx_drop_foreign(t);
  return WSYNC_OK;
}

void ucx_context_close(ucx_transport_t* t) {
  if (t->worker != NULL) ucp_worker_destroy(t->worker);
  if (t->context != NULL) ucp_cleanup(t->context);
  t->worker = NULL;
  t->context = NULL;
}
