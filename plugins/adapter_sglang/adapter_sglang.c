/* adapter_sglang: SGLang's disaggregated NCCL weight update over HTTP, SGLang 0.5.6 to 0.5.23.
 * The engine joins a torch process group at rank_offset + tp_rank through the TCP store at
 * master_address:master_port (/init_weights_update_group); each bucket is one
 * /update_weights_from_distributed with load_format "flattened_bucket" (0.5.6+) and one broadcast
 * of the bucket; the update ends with /flush_cache and /update_weight_version.
 *
 * Releases (read at PROBE from GET /server_info, "version"; see docs/ENGINES.md):
 *   0.5.6 .. 0.5.20   no update sessions
 *   0.5.21 .. 0.5.23  buckets only between POST /begin_weight_update and /end_weight_update (a
 *                     bucket outside a session gets 400 before the engine receives anything)
 *   0.5.5 and older   refused: they ignore load_format and expect one broadcast per tensor
 * The probe also checks the server's GPUs: tp_size ranks join (rank_offset + tp_rank), so
 * tp_size must equal the count in 'engines'; pp_size > 1 and dp_size > 1 without DP attention
 * make ranks collide and are refused.
 *
 * Layout: element offsets, one dtype per bucket, no padding: every offset is a multiple of the
 * element size (0.5.23 refuses a bucket otherwise).
 *
 * Options (adapter.<key>):
 *   pause           0|1 (0)  PAUSE/RESUME send /pause_generation and /continue_generation
 *   pause_mode      abort|retract|in_place (unset: the engine's default, "abort"); sent as "mode"
 *   load_format     flattened_bucket (the only bucket format this adapter speaks)
 *   set_version     0|1 (1)  FINALIZE posts /update_weight_version
 *   engine_version  a release to speak with every server instead of the one it reports
 * Field names and defaults: SGLang io_struct.py / http_server.py; see /work/shared/PROTOCOLS.md. */
#include <stdlib.h>
#include <string.h>

#include "http_common.h"

#define ADAPTER "sglang"

static const char* const kOptions[] = {"pause", "pause_mode", "load_format", "set_version", "engine_version"};
static const char* const kPauseModes[] = {"abort", "retract", "in_place"};
static const char* const kLoadFormats[] = {"flattened_bucket"};
static const hc_version_t kOldest = {0, 5, 6}, kNewest = {0, 5, 23}, kSessions = {0, 5, 21};

typedef struct sglang_adapter {
  hc_adapter_t base; /* first: the shared table entries see an hc_adapter_t */
  int pause;
  const char* pause_mode; /* NULL: send {} and let the engine pick its default */
  int set_version;
} sglang_adapter_t;

static wsync_status_t sglang_build(void* self, const wsync_engine_step_t* step);
static wsync_status_t sglang_take(void* self, const wsync_engine_step_t* step, uint32_t request_index,
                                  int32_t http_status, const char* body, uint64_t body_len);

static wsync_status_t parse_options(const wsync_adapter_params_t* params, sglang_adapter_t* tmp) {
  const char* v;
  size_t idx;
  wsync_status_t st;
  if ((v = hc_option(params, "pause")) != NULL && (st = hc_parse_bool(ADAPTER, "pause", v, &tmp->pause)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "pause_mode")) != NULL) {
    st = hc_parse_choice(ADAPTER, "pause_mode", v, kPauseModes, sizeof kPauseModes / sizeof kPauseModes[0], &idx);
    if (st != WSYNC_OK) return st;
    tmp->pause_mode = kPauseModes[idx];
  }
  if ((v = hc_option(params, "load_format")) != NULL &&
      (st = hc_parse_choice(ADAPTER, "load_format", v, kLoadFormats, 1, &idx)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "set_version")) != NULL &&
      (st = hc_parse_bool(ADAPTER, "set_version", v, &tmp->set_version)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "engine_version")) != NULL) {
    if ((st = hc_set_forced_version(&tmp->base, v)) != WSYNC_OK) return st;
    if ((st = hc_check_supported(&tmp->base, "SGLang", tmp->base.forced, kOldest, kNewest)) != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

static wsync_status_t sglang_create(const wsync_adapter_params_t* params, void** out) {
  sglang_adapter_t tmp, *a;
  wsync_status_t st = hc_check_create(ADAPTER, params, out, kOptions, sizeof kOptions / sizeof kOptions[0]);
  if (st != WSYNC_OK) return st;
  memset(&tmp, 0, sizeof tmp);
  tmp.base.name = ADAPTER;
  tmp.set_version = 1;
  if ((st = parse_options(params, &tmp)) != WSYNC_OK) return st;
  /* Its workers join a torch process group on the sender's store (see the top of this file). */
  a = (sglang_adapter_t*)hc_torch_adapter_new(sizeof *a, ADAPTER, sglang_build, params->group_name, &st);
  if (a == NULL) return st;
  a->pause = tmp.pause;
  a->pause_mode = tmp.pause_mode;
  a->set_version = tmp.set_version;
  a->base.has_forced = tmp.base.has_forced;
  a->base.forced = tmp.base.forced;
  a->base.take = sglang_take;
  *out = a;
  return WSYNC_OK;
}

static wsync_status_t sglang_get_layout(void* self, wsync_layout_rule_t* out) {
  return hc_layout_one_dtype(ADAPTER, self, out);
}

/* ---- PROBE: what the server is ---- */

/* The ranks this server contributes (tp_size), checked against what 'engines' says. Counts must
 * be integers from 1 to 65536 (anything else is refused, never cast). */
static wsync_status_t check_ranks(const cJSON* info, const wsync_engine_step_t* s) {
  int tp = 0, pp = 1, dp = 1;
  const cJSON* dpa = cJSON_GetObjectItemCaseSensitive(info, "enable_dp_attention");
  if (hc_json_count(info, "tp_size", 1, 65536, &tp) != 1)
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "server info has no tp_size that is a count from 1 to 65536");
  if (hc_json_count(info, "pp_size", 1, 65536, &pp) < 0 || hc_json_count(info, "dp_size", 1, 65536, &dp) < 0)
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "server info has a pp_size or dp_size that is not a count from 1 to "
                    "65536");
  if (pp > 1)
    return hc_error(WSYNC_ERR_UNSUPPORTED, ADAPTER, "the server runs pp_size %d: SGLang gives every pipeline stage "
                    "the same weight-update ranks (rank_offset + tp_rank), so they collide; use pp_size 1", pp);
  if (dp > 1 && !cJSON_IsTrue(dpa))
    return hc_error(WSYNC_ERR_UNSUPPORTED, ADAPTER, "the server runs dp_size %d replicas without DP attention, which "
                    "SGLang's weight update refuses; run one server per replica", dp);
  if ((uint32_t)tp != s->server_gpus)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "the server has tp_size %d (%d GPU(s) join the weight-update "
                    "group) but option 'engines' gives it %u; correct the count after its URL", tp, tp,
                    (unsigned)s->server_gpus);
  return WSYNC_OK;
}

static wsync_status_t sglang_take(void* self, const wsync_engine_step_t* s, uint32_t request_index,
                                  int32_t http_status, const char* body, uint64_t body_len) {
  sglang_adapter_t* a = (sglang_adapter_t*)self;
  hc_server_t* srv = hc_server(&a->base, s->server_index);
  cJSON* info;
  const cJSON* ver;
  wsync_status_t st;
  (void)request_index; /* PROBE sends one request */
  if (srv == NULL) return WSYNC_ERR_OUT_OF_MEMORY;
  if (s->step != WSYNC_STEP_PROBE) return WSYNC_OK;
  if (http_status != 200)
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "GET /server_info answered HTTP %d; is this an SGLang server "
                    "(0.5.6 or later)?", (int)http_status);
  if ((info = hc_parse_body(body, body_len)) == NULL || !cJSON_IsObject(info)) {
    cJSON_Delete(info);
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "GET /server_info answered something that is not a JSON object");
  }
  ver = cJSON_GetObjectItemCaseSensitive(info, "version");
  if (a->base.has_forced) {
    srv->version = a->base.forced;
  } else if (!cJSON_IsString(ver) || hc_parse_version(ver->valuestring, &srv->version) != 0) {
    cJSON_Delete(info);
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "the server does not report a release (\"version\" of "
                    "/server_info); set option adapter.engine_version");
  }
  st = hc_check_supported(&a->base, "SGLang", srv->version, kOldest, kNewest);
  if (st == WSYNC_OK) st = check_ranks(info, s);
  cJSON_Delete(info);
  srv->known = st == WSYNC_OK;
  return st;
}

/* ---- the requests of each step ---- */

static wsync_status_t add_session(hc_requests_t* l, const char* route) {
  cJSON* b = cJSON_CreateObject();
  if (b == NULL) return hc_oom(ADAPTER, NULL);
  return hc_add(l, ADAPTER, WSYNC_HTTP_POST, route, b, 0, WSYNC_REPLY_SUCCESS_FIELD);
}

/* UpdateWeightsFromDistributedReqInput. flush_cache defaults to true there: the flush is done
 * once at FINALIZE instead; weight_version is set once at FINALIZE too. */
static wsync_status_t add_update(hc_requests_t* l, const wsync_engine_step_t* s) {
  wsync_status_t st;
  cJSON* b;
  int ok;
  if ((st = hc_check_one_dtype(ADAPTER, s)) != WSYNC_OK) return st;
  if ((st = hc_check_group_name(ADAPTER, s)) != WSYNC_OK) return st;
  b = cJSON_CreateObject();
  ok = hc_put(b, "names", hc_names(s));
  ok = ok && hc_put(b, "dtypes", hc_dtype_names(s));
  ok = ok && hc_put(b, "shapes", hc_shapes(s));
  ok = ok && hc_put(b, "group_name", cJSON_CreateString(s->group_name));
  ok = ok && hc_put(b, "flush_cache", cJSON_CreateFalse());
  ok = ok && hc_put(b, "abort_all_requests", cJSON_CreateFalse());
  ok = ok && hc_put(b, "weight_version", cJSON_CreateNull());
  ok = ok && hc_put(b, "load_format", cJSON_CreateString("flattened_bucket"));
  if (!ok) return hc_oom(ADAPTER, b);
  return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/update_weights_from_distributed", b, 0, WSYNC_REPLY_SUCCESS_FIELD);
}

/* End of an update: the session first (0.5.21+), then the flush (refused with 400 while requests
 * run or wait: idempotent, so the core retries it), then UpdateWeightVersionReqInput
 * (abort_all_requests defaults to true there). */
static wsync_status_t add_finalize(sglang_adapter_t* a, const wsync_engine_step_t* s, int sessions) {
  hc_requests_t* l = &a->base.list;
  wsync_status_t st;
  cJSON* b;
  int ok;
  char version[32];
  if (sessions && (st = add_session(l, "/end_weight_update")) != WSYNC_OK) return st;
  if ((st = hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/flush_cache", NULL, 1, WSYNC_REPLY_STATUS)) != WSYNC_OK) return st;
  if (!a->set_version) return WSYNC_OK;
  hc_version_string(s->version, version, sizeof version);
  b = cJSON_CreateObject();
  ok = hc_put(b, "new_version", cJSON_CreateString(version));
  ok = ok && hc_put(b, "abort_all_requests", cJSON_CreateFalse());
  if (!ok) return hc_oom(ADAPTER, b);
  return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/update_weight_version", b, 1, WSYNC_REPLY_SUCCESS_FIELD);
}

static wsync_status_t add_pause(sglang_adapter_t* a) {
  /* PauseGenerationReqInput: a JSON body is required (0.5.6+). */
  cJSON* b = cJSON_CreateObject();
  if (b == NULL || (a->pause_mode != NULL && !hc_put(b, "mode", cJSON_CreateString(a->pause_mode))))
    return hc_oom(ADAPTER, b);
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/pause_generation", b, 1, WSYNC_REPLY_JSON);
}

static wsync_status_t add_resume(sglang_adapter_t* a) {
  /* ContinueGenerationReqInput: {} keeps torch_empty_cache at its default (true). */
  cJSON* b = cJSON_CreateObject();
  if (b == NULL) return hc_oom(ADAPTER, NULL);
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/continue_generation", b, 1, WSYNC_REPLY_JSON);
}

/* RESET: an earlier trainer's session and group (best effort: "no session" and "does not exist"
 * are the usual answers), and its pause (continued whatever this trainer's option pause says: the
 * earlier one may have paused, and a server left paused serves nothing). */
static wsync_status_t add_reset(sglang_adapter_t* a, const wsync_engine_step_t* s, int sessions) {
  wsync_status_t st;
  if (sessions && (st = add_session(&a->base.list, "/end_weight_update")) != WSYNC_OK) return st;
  if ((st = hc_add_destroy_group(&a->base.list, ADAPTER, s)) != WSYNC_OK) return st;
  return add_resume(a);
}

static wsync_status_t build(sglang_adapter_t* a, const wsync_engine_step_t* s) {
  hc_requests_t* l = &a->base.list;
  const int sessions = hc_version_cmp(hc_server_version(&a->base, s->server_index, kNewest), kSessions) >= 0;
  switch (s->step) {
    case WSYNC_STEP_HEALTH:
      /* Not /health: that generates one token (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION, on by
       * default) and so hangs for 20 s and answers 503 on a server that is paused, e.g. left
       * paused by a trainer that died. /model_info is answered by the tokenizer process in every
       * supported release (0.5.6 .. 0.5.23; /get_model_info, its deprecated alias, logs a warning
       * since 0.5.6 and "will be removed"; 0.5.5 and older have only that one, and so fail here). */
      return hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/model_info", NULL, 1, WSYNC_REPLY_STATUS);
    case WSYNC_STEP_PROBE: /* the release and the ranks; /server_info is in every supported release */
      return hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/server_info", NULL, 1, WSYNC_REPLY_TO_ADAPTER);
    case WSYNC_STEP_RESET:
      return add_reset(a, s, sessions);
    case WSYNC_STEP_INIT:
      /* InitWeightsUpdateGroupReqInput. SGLang always joins through the torch TCP store, where the
       * transport put its id (the torch_group hint of get_needs). */
      return hc_add_torch_group_init(l, ADAPTER, s);
    case WSYNC_STEP_PAUSE:
      return a->pause ? add_pause(a) : WSYNC_OK;
    case WSYNC_STEP_BEGIN_UPDATE:
      return sessions ? add_session(l, "/begin_weight_update") : WSYNC_OK;
    case WSYNC_STEP_UPDATE:
      return add_update(l, s);
    case WSYNC_STEP_FINALIZE:
      return add_finalize(a, s, sessions);
    case WSYNC_STEP_ABANDON: /* the open session ends; what arrived stays loaded */
      return sessions ? add_session(l, "/end_weight_update") : WSYNC_OK;
    case WSYNC_STEP_RESUME:
      return a->pause ? add_resume(a) : WSYNC_OK;
    case WSYNC_STEP_DESTROY:
      /* A second destroy answers success=false ("does not exist"): not idempotent. */
      return hc_add_destroy_group(l, ADAPTER, s);
    default:
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "build_requests: unknown step %d", (int)s->step);
  }
}

static wsync_status_t sglang_build(void* self, const wsync_engine_step_t* step) {
  return build((sglang_adapter_t*)self, step);
}

HC_DEFINE_ADAPTER(kSglangAdapter, "sglang", sglang_create, sglang_get_layout)
