/* adapter_sglang: SGLang's disaggregated NCCL weight update over HTTP. The engine joins a torch
 * process group at rank_offset + tp_rank through the TCP store at master_address:master_port
 * (/init_weights_update_group); each bucket is one /update_weights_from_distributed with
 * load_format "flattened_bucket" and one broadcast of the bucket; the update ends with
 * /flush_cache and /update_weight_version.
 *
 * Layout: element offsets, one dtype per bucket, no padding. Older SGLang builds the receive
 * buffer with torch.cat of flattened tensors (one dtype); newer SGLang views it as uint8 and
 * accepts mixed dtypes, but lays one-dtype buckets out the same way, so this is read by both.
 *
 * Options (adapter.<key>):
 *   pause          0|1 (0)  PAUSE/RESUME send /pause_generation and /continue_generation
 *   pause_mode     abort|retract|in_place (unset: the engine's default, "abort"); sent as "mode"
 *   load_format    flattened_bucket (the only bucket format this adapter speaks; the per-tensor
 *                  format needs one broadcast per tensor, which the core does not send)
 *   set_version    0|1 (1)  FINALIZE posts /update_weight_version; 0 for SGLang releases that do
 *                  not have the route
 * Field names and defaults: SGLang io_struct.py / http_server.py; see /work/shared/PROTOCOLS.md. */
#include <stdlib.h>
#include <string.h>

#include "http_common.h"

#define ADAPTER "sglang"

static const char* const kOptions[] = {"pause", "pause_mode", "load_format", "set_version"};
static const char* const kPauseModes[] = {"abort", "retract", "in_place"};
static const char* const kLoadFormats[] = {"flattened_bucket"};

typedef struct sglang_adapter {
  hc_adapter_t base; /* first: the shared table entries see an hc_adapter_t */
  int pause;
  const char* pause_mode; /* NULL: send {} and let the engine pick its default */
  int set_version;
} sglang_adapter_t;

static wsync_status_t sglang_build(void* self, const wsync_engine_step_t* step);

static wsync_status_t sglang_create(const wsync_adapter_params_t* params, void** out) {
  sglang_adapter_t* a;
  const char* v;
  size_t idx;
  int pause = 0, set_version = 1;
  const char* pause_mode = NULL;
  wsync_status_t st;
  st = hc_check_create(ADAPTER, params, out, kOptions, sizeof kOptions / sizeof kOptions[0]);
  if (st != WSYNC_OK) return st;
  if ((v = hc_option(params, "pause")) != NULL && (st = hc_parse_bool(ADAPTER, "pause", v, &pause)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "pause_mode")) != NULL) {
    st = hc_parse_choice(ADAPTER, "pause_mode", v, kPauseModes, sizeof kPauseModes / sizeof kPauseModes[0], &idx);
    if (st != WSYNC_OK) return st;
    pause_mode = kPauseModes[idx];
  }
  if ((v = hc_option(params, "load_format")) != NULL &&
      (st = hc_parse_choice(ADAPTER, "load_format", v, kLoadFormats, 1, &idx)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "set_version")) != NULL &&
      (st = hc_parse_bool(ADAPTER, "set_version", v, &set_version)) != WSYNC_OK)
    return st;
  /* Its workers join a torch process group on the sender's store (see the top of this file). */
  a = (sglang_adapter_t*)hc_torch_adapter_new(sizeof *a, ADAPTER, sglang_build, params->group_name, &st);
  if (a == NULL) return st;
  a->pause = pause;
  a->pause_mode = pause_mode;
  a->set_version = set_version;
  *out = a;
  return WSYNC_OK;
}

static wsync_status_t sglang_get_layout(void* self, wsync_layout_rule_t* out) {
  return hc_layout_one_dtype(ADAPTER, self, out);
}

static wsync_status_t build(sglang_adapter_t* a, const wsync_engine_step_t* s) {
  hc_requests_t* l = &a->base.list;
  wsync_status_t st;
  cJSON* b;
  int ok;
  char version[32];
  switch (s->step) {
    case WSYNC_STEP_HEALTH:
      return hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/health", NULL, 1, WSYNC_REPLY_STATUS);

    case WSYNC_STEP_INIT:
      /* InitWeightsUpdateGroupReqInput. SGLang always joins through the torch TCP store, where the
       * transport put its id (the torch_group hint of get_needs). */
      return hc_add_torch_group_init(l, ADAPTER, s);

    case WSYNC_STEP_PAUSE:
      if (!a->pause) return WSYNC_OK;
      /* Newer SGLang requires a JSON body (PauseGenerationReqInput); older ignores it. */
      b = cJSON_CreateObject();
      ok = b != NULL && (a->pause_mode == NULL || hc_put(b, "mode", cJSON_CreateString(a->pause_mode)));
      if (!ok) return hc_oom(ADAPTER, b);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/pause_generation", b, 1, WSYNC_REPLY_JSON);

    case WSYNC_STEP_BEGIN_UPDATE:
      return WSYNC_OK; /* SGLang has no start-of-update route */

    case WSYNC_STEP_UPDATE:
      /* UpdateWeightsFromDistributedReqInput. flush_cache defaults to true there: the flush is
       * done once at FINALIZE instead; weight_version is set once at FINALIZE too. */
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
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/update_weights_from_distributed", b, 0,
                    WSYNC_REPLY_SUCCESS_FIELD);

    case WSYNC_STEP_FINALIZE:
      /* SGLang refuses the flush (400) while requests run or wait: idempotent, so the core
       * retries it. */
      if ((st = hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/flush_cache", NULL, 1, WSYNC_REPLY_STATUS)) != WSYNC_OK)
        return st;
      if (!a->set_version) return WSYNC_OK;
      /* UpdateWeightVersionReqInput: abort_all_requests defaults to true there. Reply
       * {"success": true, "message": ..., "new_version": ...}. Setting a value: idempotent. */
      hc_version_string(s->version, version, sizeof version);
      b = cJSON_CreateObject();
      ok = hc_put(b, "new_version", cJSON_CreateString(version));
      ok = ok && hc_put(b, "abort_all_requests", cJSON_CreateFalse());
      if (!ok) return hc_oom(ADAPTER, b);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/update_weight_version", b, 1, WSYNC_REPLY_SUCCESS_FIELD);

    case WSYNC_STEP_RESUME:
      if (!a->pause) return WSYNC_OK;
      /* ContinueGenerationReqInput: {} keeps torch_empty_cache at its default (true). */
      b = cJSON_CreateObject();
      if (b == NULL) return hc_oom(ADAPTER, NULL);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/continue_generation", b, 1, WSYNC_REPLY_JSON);

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
