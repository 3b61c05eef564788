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
  if (params == NULL || out == NULL)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "create: params or out is NULL");
  st = hc_check_option_keys(ADAPTER, params, kOptions, sizeof kOptions / sizeof kOptions[0]);
  if (st != WSYNC_OK) return st;
  if ((v = hc_option(params, "pause")) != NULL && (st = hc_parse_bool(ADAPTER, "pause", v, &pause)) != WSYNC_OK)
    return st;
  if (pause)
    hc_log(WSYNC_LOG_WARN, ADAPTER,
           "option pause=1 has no effect: LMDeploy has no pause route (/abort_request needs "
           "--enable-abort-handling and does not hold new requests back)");
  a = (lmdeploy_adapter_t*)hc_adapter_new(sizeof *a, ADAPTER, lmdeploy_build);
  if (a == NULL) return WSYNC_ERR_OUT_OF_MEMORY;
  /* Its workers join a torch process group on the sender's store, like SGLang's. */
  if ((st = hc_needs_torch_group(&a->base, params->group_name)) != WSYNC_OK) {
    hc_adapter_destroy(a);
    return st;
  }
  a->pause = pause;
  *out = a;
  return WSYNC_OK;
}

static wsync_status_t lmdeploy_get_layout(void* self, wsync_layout_rule_t* out) {
  if (self == NULL || out == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "get_layout: NULL argument");
  out->struct_size = (uint32_t)sizeof *out;
  out->kind = WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE;
  out->alignment = 1;
  out->allow_split = 0;
  return WSYNC_OK;
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
  cJSON* b;
  int ok;
  switch (s->step) {
    case WSYNC_STEP_HEALTH:
      return hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/health", NULL, 1, WSYNC_REPLY_STATUS);

    case WSYNC_STEP_INIT:
      /* InitWeightsUpdateGroupRequest; nccl_unique_id_b64 is not used (torch TCP store). */
      if ((st = hc_check_rendezvous(ADAPTER, s)) != WSYNC_OK) return st;
      if ((st = hc_check_group_name(ADAPTER, s)) != WSYNC_OK) return st;
      b = cJSON_CreateObject();
      ok = hc_put(b, "master_address", cJSON_CreateString(s->master_address));
      ok = ok && hc_put(b, "master_port", hc_int(s->master_port));
      ok = ok && hc_put(b, "rank_offset", hc_int(s->rank_offset));
      ok = ok && hc_put(b, "world_size", hc_int(s->world_size));
      ok = ok && hc_put(b, "group_name", cJSON_CreateString(s->group_name));
      ok = ok && hc_put(b, "backend", cJSON_CreateString("nccl"));
      if (!ok) return hc_oom(ADAPTER, b);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/init_weights_update_group", b, 0, WSYNC_REPLY_SUCCESS_FIELD);

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
      if ((st = hc_check_group_name(ADAPTER, s)) != WSYNC_OK) return st;
      b = cJSON_CreateObject();
      if (!hc_put(b, "group_name", cJSON_CreateString(s->group_name))) return hc_oom(ADAPTER, b);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/destroy_weights_update_group", b, 0, WSYNC_REPLY_SUCCESS_FIELD);

    default:
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "build_requests: unknown step %d", (int)s->step);
  }
}

static wsync_status_t lmdeploy_build(void* self, const wsync_engine_step_t* step) {
  return build((lmdeploy_adapter_t*)self, step);
}

static const wsync_adapter_v1_t kLmdeployAdapter = {
    (uint32_t)sizeof(wsync_adapter_v1_t),
    WSYNC_PLUGIN_ABI_VERSION,
    ADAPTER,
    WSYNC_PLUGIN_VERSION,
    WSYNC_ADAPTER_CAP_HTTP,
    lmdeploy_create,
    lmdeploy_get_layout,
    hc_adapter_destroy,
    hc_adapter_build_requests,
    hc_adapter_get_needs,
    NULL, /* runtime_info */
};

HC_DEFINE_ENTRY(kLmdeployAdapter, "adapter 'lmdeploy'")
