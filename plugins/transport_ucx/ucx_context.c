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
 * UCX_* environment variables apply as usual (tls overrides UCX_TLS). There is no pass-through
 * of other UCX variables: UCX 1.13 accepts any name in ucp_config_modify and only warns later,
 * so a typo could not be refused here. */
#include <stdlib.h>
#include <string.h>

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

static wsync_status_t apply_option(ucp_config_t* config, const wsync_option_t* opt, int* err_mode,
                                   const char** tls) {
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
  } else {
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'ucx' has no option '%s' (known: tls, error_mode)", key);
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
  const char* tls = NULL;
  uint64_t i;

  st = ucp_config_read(NULL, NULL, &config);
  if (st != UCS_OK)
    return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': reading the UCX configuration failed: %s",
                    ucs_status_string(st));
  for (i = 0; i < params->num_options && rc == WSYNC_OK; ++i) {
    /* Options are stepped by the struct_size of the first element (ABI rule). */
    const size_t stride = params->options[0].struct_size ? params->options[0].struct_size : sizeof(wsync_option_t);
    rc = apply_option(config, (const wsync_option_t*)((const char*)params->options + i * stride), &err_mode, &tls);
  }
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

void ucx_context_close(ucx_transport_t* t) {
  if (t->worker != NULL) ucp_worker_destroy(t->worker);
  if (t->context != NULL) ucp_cleanup(t->context);
  t->worker = NULL;
  t->context = NULL;
}
