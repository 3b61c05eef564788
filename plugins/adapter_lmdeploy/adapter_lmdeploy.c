/* adapter_lmdeploy: LMDeploy's (PyTorch backend) disaggregated NCCL weight update over HTTP. Same
 * shape as SGLang's: the engine joins a torch process group through the TCP store at
 * master_address:master_port (/init_weights_update_group, group_name required), each bucket is one
 * /update_weights_from_distributed with load_format "flattened_bucket" and finished=false, and
 * the update ends with a "finalize only" request (empty lists, finished=true) that runs LMDeploy's
 * post-load processing; without it the engine is left half-updated. Non-PyTorch backends answer
 * 501.
 *
 * Layout: element offsets, ONE dtype per bucket (mixed dtypes are an error in LMDeploy's
 * flattened_bucket), no padding, no split.
 *
 * Field lists follow /work/shared/PROTOCOLS.md; LMDeploy's request models themselves
 * (InitWeightsUpdateGroupRequest, UpdateWeightsFromDistributedRequest,
 * DestroyWeightsUpdateGroupRequest) are UNCONFIRMED from source. LMDeploy's weight routes require
 * Content-Type: application/json, which the core always sends.
 *
 * Options (adapter.<key>):
 *   pause   0|1 (0)  accepted for symmetry with the other HTTP adapters, but PAUSE and RESUME send
 *           nothing: LMDeploy has no pause/continue route. Its only way to stop generation is
 *           /abort_request {"abort_all": true}, which answers 501 unless the server was started
 *           with --enable-abort-handling and does not hold new requests back; /sleep and /wakeup
 *           release the weights themselves. */
#include <stdlib.h>
#include <string.h>

#include "http_common.h"

#define ADAPTER "lmdeploy"

static const char* const kOptions[] = {"pause"};

typedef struct lmdeploy_adapter {
  hc_adapter_t base; /* first: the shared table entries see an hc_adapter_t */
  int pause;
} lmdeploy_adapter_t;

static wsync_status_t lmdeploy_build(void* self, const wsync_engine_step_t* step);

static wsync_status_t lmdeploy_create(const wsync_adapter_params_t* params, void** out) {
  lmdeploy_adapter_t* a;
  const char* v;
  int pause = 0;
  wsync_status_t st;
  st = hc_check_create(ADAPTER, params, out, kOptions, sizeof kOptions / sizeof kOptions[0]);
  if (st != WSYNC_OK) return st;
  if ((v = hc_option(params, "pause")) != NULL && (st = hc_parse_bool(ADAPTER, "pause", v, &pause)) != WSYNC_OK)
    return st;
  if (pause)
    hc_log(WSYNC_LOG_WARN, ADAPTER,
           "option pause=1 has no effect: LMDeploy has no pause route (/abort_request needs "
           "--enable-abort-handling and does not hold new requests back)");
  /* Its workers join a torch process group on the sender's store, like SGLang's. */
  a = (lmdeploy_adapter_t*)hc_torch_adapter_new(sizeof *a, ADAPTER, lmdeploy_build, params->group_name, &st);
  if (a == NULL) return st;
  a->pause = pause;
  *out = a;
  return WSYNC_OK;
}

static wsync_status_t lmdeploy_get_layout(void* self, wsync_layout_rule_t* out) {
  return hc_layout_one_dtype(ADAPTER, self, out);
}

/* UpdateWeightsFromDistributedRequest: one bucket (finished=false), or the finalize-only request
 * (empty lists, finished=true). */
static wsync_status_t add_update(lmdeploy_adapter_t* a, const wsync_engine_step_t* s, int finished) {
  cJSON* b = cJSON_CreateObject();
  int ok;
  if (finished) {
    ok = hc_put(b, "names", cJSON_CreateArray());
    ok = ok && hc_put(b, "dtypes", cJSON_CreateArray());
    ok = ok && hc_put(b, "shapes", cJSON_CreateArray());
  } else {
    ok = hc_put(b, "names", hc_names(s));
    ok = ok && hc_put(b, "dtypes", hc_dtype_names(s));
    ok = ok && hc_put(b, "shapes", hc_shapes(s));
  }
  ok = ok && hc_put(b, "group_name", cJSON_CreateString(s->group_name));
  ok = ok && hc_put(b, "load_format", cJSON_CreateString("flattened_bucket"));
  ok = ok && hc_put(b, "finished", cJSON_CreateBool(finished));
  if (!ok) return hc_oom(ADAPTER, b);
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/update_weights_from_distributed", b, 0,
                WSYNC_REPLY_SUCCESS_FIELD);
}

static wsync_status_t build(lmdeploy_adapter_t* a, const wsync_engine_step_t* s) {
  hc_requests_t* l = &a->base.list;
  wsync_status_t st;
  switch (s->step) {
    case WSYNC_STEP_HEALTH:
      return hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/health", NULL, 1, WSYNC_REPLY_STATUS);

    case WSYNC_STEP_INIT:
      /* InitWeightsUpdateGroupRequest (torch TCP store rendezvous). */
      return hc_add_torch_group_init(l, ADAPTER, s);

    case WSYNC_STEP_PAUSE:
    case WSYNC_STEP_RESUME:
      return WSYNC_OK; /* no pause route: see the option `pause` at the top of this file */

    case WSYNC_STEP_BEGIN_UPDATE:
      return WSYNC_OK; /* no start-of-update route */

    case WSYNC_STEP_UPDATE:
      if ((st = hc_check_one_dtype(ADAPTER, s)) != WSYNC_OK) return st;
      if ((st = hc_check_group_name(ADAPTER, s)) != WSYNC_OK) return st;
      return add_update(a, s, 0);

    case WSYNC_STEP_FINALIZE:
      /* LMDeploy has no version and no separate cache flush: the finalize-only request. */
      if ((st = hc_check_group_name(ADAPTER, s)) != WSYNC_OK) return st;
      return add_update(a, s, 1);

    case WSYNC_STEP_DESTROY:
      return hc_add_destroy_group(l, ADAPTER, s);

    default:
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "build_requests: unknown step %d", (int)s->step);
  }
}

static wsync_status_t lmdeploy_build(void* self, const wsync_engine_step_t* step) {
  return build((lmdeploy_adapter_t*)self, step);
}

HC_DEFINE_ADAPTER(kLmdeployAdapter, "lmdeploy", lmdeploy_create, lmdeploy_get_layout)
