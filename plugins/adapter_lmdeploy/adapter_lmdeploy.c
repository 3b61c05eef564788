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
 * Releases 0.14 to 0.18 (the request models are the same in all of them; 0.13 and older have no
 * such routes). LMDeploy reports no release: PROBE tells the families apart without side effects
 * by posting {} to /init_weights_update_group, which fails validation before the handler runs:
 * 404 (0.13 or older: refused), 422 (0.14-0.15), 400 (0.16-0.18). The backend check runs in the
 * handler, after validation (serve/openai/endpoints/management.py), so that probe cannot tell a
 * TurboMind server: a third request passes validation and does nothing on PyTorch, a no-op
 * /update_weights_from_distributed (empty lists, finished=false: no broadcast, no load, no
 * post-load step; 400 "not initialized" without a group of that name): TurboMind answers 501
 * "... require backend=\"pytorch\", got 'turbomind'" and is refused as UNSUPPORTED. GET /distserve/engine_info (a JSON string holding a JSON object) gives tp_size, the
 * ranks that join, which must equal the count in 'engines'. The routes work only with the Ray
 * executor (multi-GPU servers, or --distributed-executor-backend ray); a single-GPU server on
 * the default executor answers 500.
 * After a failure (ABANDON) the finalize-only request runs the post-load processing on what
 * arrived (LMDeploy has no way to undo a partial update); DESTROY leaves the group. RESET sends the
 * finalize-only request first, then the destroy: LMDeploy runs its post-load step (and drops its
 * captured CUDA graphs) only on finished=true, and that request needs a registered group of its
 * name (agent.py looks the group up before anything else), which the destroy removes. So a dead
 * trainer's leftover update is finished when the new trainer uses its group name (the usual
 * restart); under another name LMDeploy offers no way to finish it (no group, no route without
 * one), and it stays loaded-but-unprocessed until this trainer's first finalize.
 * LMDeploy's weight routes require Content-Type: application/json, which the core always sends.
 *
 * Options (adapter.<key>):
 *   pause   0|1 (0)  accepted for symmetry with the other HTTP adapters, but PAUSE and RESUME send
 *           nothing: LMDeploy has no pause/continue route. Its only way to stop generation is
 *           /abort_request {"abort_all": true}, which answers 501 unless the server was started
 *           with --enable-abort-handling and does not hold new requests back; /sleep and /wakeup
 *           release the weights themselves.
 *   engine_version  a release (0.14..0.18) to assume instead of the family the probe finds */
#include <stdlib.h>
#include <string.h>

#include "http_common.h"

#define ADAPTER "lmdeploy"

static const char* const kOptions[] = {"pause", "engine_version"};
static const hc_version_t kOldest = {0, 14, 0}, kNewest = {0, 18, HC_ANY_PATCH}, kEnvelope = {0, 16, 0};

typedef struct lmdeploy_adapter {
  hc_adapter_t base; /* first: the shared table entries see an hc_adapter_t */
  int pause;
} lmdeploy_adapter_t;

static wsync_status_t lmdeploy_build(void* self, const wsync_engine_step_t* step);
static wsync_status_t lmdeploy_take(void* self, const wsync_engine_step_t* step, uint32_t request_index,
                                    int32_t http_status, const char* body, uint64_t body_len);

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
  a->base.take = lmdeploy_take;
  if ((v = hc_option(params, "engine_version")) != NULL &&
      ((st = hc_set_forced_version(&a->base, v)) != WSYNC_OK ||
       (st = hc_check_supported(&a->base, "LMDeploy", a->base.forced, kOldest, kNewest)) != WSYNC_OK)) {
    hc_adapter_destroy(a);
    return st;
  }
  *out = a;
  return WSYNC_OK;
}

static wsync_status_t lmdeploy_get_layout(void* self, wsync_layout_rule_t* out) {
  return hc_layout_one_dtype(ADAPTER, self, out);
}

static wsync_status_t add_update_to(lmdeploy_adapter_t* a, const wsync_engine_step_t* s, int finished, int empty,
                                    int32_t reply);

/* UpdateWeightsFromDistributedRequest: one bucket (finished=false), or the finalize-only request
 * (empty lists, finished=true). */
static wsync_status_t add_update(lmdeploy_adapter_t* a, const wsync_engine_step_t* s, int finished) {
  return add_update_to(a, s, finished, finished, WSYNC_REPLY_SUCCESS_FIELD);
}

/* The request with empty lists when `empty`; `reply` says who reads the answer. */
static wsync_status_t add_update_to(lmdeploy_adapter_t* a, const wsync_engine_step_t* s, int finished, int empty,
                                    int32_t reply) {
  cJSON* b = cJSON_CreateObject();
  int ok;
  if (empty) {
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
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/update_weights_from_distributed", b, 0, reply);
}

/* ---- PROBE ---- */

/* The family from how {} posted to /init_weights_update_group fails validation. */
/* The no-op update of the probe: TurboMind answers 501 after the body validated. */
static wsync_status_t take_backend(int32_t status, const char* body, uint64_t len) {
  cJSON* j;
  const cJSON* m;
  wsync_status_t st;
  if (status != 501) return WSYNC_OK; /* 200 (a group of this name exists) or 400 (none): PyTorch */
  j = hc_parse_body(body, len);
  m = cJSON_GetObjectItemCaseSensitive(j, "message");
  st = hc_error(WSYNC_ERR_UNSUPPORTED, ADAPTER, "the server's backend has no distributed weight update (HTTP 501: "
                "%s): start LMDeploy with --backend pytorch",
                cJSON_IsString(m) ? m->valuestring : "a backend other than pytorch");
  cJSON_Delete(j);
  return st;
}

static wsync_status_t take_family(lmdeploy_adapter_t* a, hc_server_t* srv, int32_t status) {
  const hc_version_t family = status == 422 ? kOldest : kEnvelope;
  if (status == 404)
    return hc_error(WSYNC_ERR_VERSION_MISMATCH, ADAPTER, "the server has no /init_weights_update_group route: "
                    "LMDeploy 0.13 or older (or not LMDeploy); this adapter speaks LMDeploy 0.14 to 0.18");
  if (status != 422 && status != 400)
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "probing /init_weights_update_group with {} answered HTTP %d, not "
                    "a validation error (400 or 422)", (int)status);
  srv->version = a->base.has_forced ? a->base.forced : family;
  return WSYNC_OK;
}

/* tp_size of GET /distserve/engine_info, whose body is a JSON string holding a JSON object. */
static wsync_status_t take_ranks(const wsync_engine_step_t* s, int32_t status, const char* body, uint64_t len) {
  cJSON* outer;
  cJSON* info;
  const cJSON* obj;
  int tp = 0, dp = 1, has_tp, has_dp;
  wsync_status_t st = WSYNC_OK;
  if (status != 200) {
    hc_log(WSYNC_LOG_WARN, ADAPTER, "server %u: GET /distserve/engine_info answered HTTP %d; its GPU count is not "
           "checked", (unsigned)s->server_index, (int)status);
    return WSYNC_OK;
  }
  outer = hc_parse_body(body, len);
  info = cJSON_IsString(outer) ? cJSON_Parse(outer->valuestring) : NULL;
  obj = info != NULL ? info : outer;
  has_tp = hc_json_count(obj, "tp_size", 1, 65536, &tp);
  has_dp = hc_json_count(obj, "dp_size", 1, 65536, &dp);
  if (has_tp != 1)
    st = hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "GET /distserve/engine_info has no tp_size that is a count from 1 to "
                  "65536");
  else if (has_dp < 0)
    st = hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "GET /distserve/engine_info has a dp_size that is not a count from 1 "
                  "to 65536");
  else if (dp > 1)
    st = hc_error(WSYNC_ERR_UNSUPPORTED, ADAPTER, "the server runs dp_size %d: its replicas would take the same "
                  "weight-update ranks; run one server per replica", dp);
  else if ((uint32_t)tp != s->server_gpus)
    st = hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "the server has tp_size %d (%d GPU(s) join the weight-update "
                  "group) but option 'engines' gives it %u; correct the count after its URL", tp, tp,
                  (unsigned)s->server_gpus);
  cJSON_Delete(info);
  cJSON_Delete(outer);
  return st;
}

static wsync_status_t lmdeploy_take(void* self, const wsync_engine_step_t* s, uint32_t request_index,
                                    int32_t http_status, const char* body, uint64_t body_len) {
  lmdeploy_adapter_t* a = (lmdeploy_adapter_t*)self;
  hc_server_t* srv = hc_server(&a->base, s->server_index);
  wsync_status_t st;
  if (srv == NULL) return WSYNC_ERR_OUT_OF_MEMORY;
  if (s->step != WSYNC_STEP_PROBE) return WSYNC_OK;
  if (request_index == 0) return take_family(a, srv, http_status);
  if (request_index == 1) return take_ranks(s, http_status, body, body_len);
  st = take_backend(http_status, body, body_len);
  srv->known = st == WSYNC_OK; /* the last request of the probe */
  return st;
}

static wsync_status_t add_probe(lmdeploy_adapter_t* a, const wsync_engine_step_t* s) {
  cJSON* b = cJSON_CreateObject(); /* fails validation before the handler: no side effect */
  wsync_status_t st;
  if (b == NULL) return hc_oom(ADAPTER, NULL);
  st = hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/init_weights_update_group", b, 0, WSYNC_REPLY_TO_ADAPTER);
  if (st == WSYNC_OK)
    st = hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_GET, "/distserve/engine_info", NULL, 1, WSYNC_REPLY_TO_ADAPTER);
  if (st == WSYNC_OK && (st = hc_check_group_name(ADAPTER, s)) == WSYNC_OK)
    st = add_update_to(a, s, 0, 1, WSYNC_REPLY_TO_ADAPTER); /* no-op on PyTorch; 501 on TurboMind */
  return st;
}

static wsync_status_t build(lmdeploy_adapter_t* a, const wsync_engine_step_t* s) {
  hc_requests_t* l = &a->base.list;
  wsync_status_t st;
  switch (s->step) {
    case WSYNC_STEP_HEALTH:
      return hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/health", NULL, 1, WSYNC_REPLY_STATUS);

    case WSYNC_STEP_PROBE:
      return add_probe(a, s);

    case WSYNC_STEP_RESET:
      /* An earlier trainer's update, then its group ("not initialized" is the usual answer to
       * both): the finish needs the group, so it goes first (see the top of this file). */
      if ((st = hc_check_group_name(ADAPTER, s)) != WSYNC_OK) return st;
      if ((st = add_update(a, s, 1)) != WSYNC_OK) return st;
      return hc_add_destroy_group(l, ADAPTER, s);

    case WSYNC_STEP_ABANDON: /* no undo: finalize what arrived so the engine serves consistently */
      if ((st = hc_check_group_name(ADAPTER, s)) != WSYNC_OK) return st;
      return add_update(a, s, 1);

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
