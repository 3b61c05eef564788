/* adapter_vllm: vLLM's native weight-transfer API over HTTP, with vLLM's NCCL backend
 * (backend=nccl, the default) or the wsync backend (backend=wsync). One
 * /init_weight_transfer_engine per server covers all its workers (rank = dp_index*TP*PP + rank +
 * rank_offset); an update is /start_weight_update, one /update_weights per bucket (posted
 * concurrently with the bucket's broadcast), then /finish_weight_update with the version.
 *
 * backend=wsync: the servers run the weight-transfer backend named "wsync" that the wsync Python
 * package registers (vllm.general_plugins; docs/VLLM.md): every worker runs a wsync receiver that
 * joins the trainer's group over the trainer's store (use with the group option
 * engine_receivers=wsync and any wsync transport). init_info is exactly {store_addr "host:port"
 * ("[v6]:port"), group_name, rank_offset, world_size}; update_info as below. No packing rule
 * (layout BYTES_MIXED, the group's bucket_bytes), no NCCL id, no all-reduce after init; the
 * packed options are refused. Every other route is the same for both backends.
 *
 * Layout (backend=nccl): vLLM "packed" mode. Tensors are appended as bytes (mixed dtypes, no
 * padding) until the running total EXCEEDS packed_buffer_size_bytes (strict >): the crossing
 * tensor stays in the chunk, and each chunk is one broadcast. vLLM recomputes the cuts from each
 * /update_weights list, so every bucket the core sends must be exactly one chunk of that rule: the
 * core's bucket_bytes must be at most packed_buffer_size_bytes (equal is best). UPDATE refuses a
 * bucket that vLLM would cut into more than one broadcast. With packed=0 vLLM does one broadcast
 * per tensor, so every bucket must hold one tensor (refused otherwise).
 *
 * Releases (read at PROBE from GET /version; see docs/ENGINES.md): 0.28 to 0.33. vLLM rejects
 * unknown keys inside init_info/update_info (dataclass(**dict)), so the field set follows the
 * release (backend=nccl): init_info {master_address, master_port | nccl_unique_id_b64 (0.30+), rank_offset,
 * world_size, packed, packed_buffer_size_bytes, packed_num_buffers}; update_info {names,
 * dtype_names, shapes}. 0.28 and 0.29 have no nccl_unique_id_b64: a transport that gives the id
 * (nccl) is refused at INIT, since those releases rendezvous through vLLM's own
 * StatelessProcessGroup, which no wsync transport serves (engines that embed wsync receivers
 * join over the sender's store and work). POST /shutdown_weight_transfer_engine (0.32+) leaves the
 * group at DESTROY and clears an earlier trainer's at RESET. The probe also compares GET
 * /get_world_size (the workers that join) with the count in 'engines'.
 *
 * RESET asks before it finishes: vLLM's worker refuses /finish_weight_update when no update is
 * active and logs that refusal as an ERROR with its traceback, so a blind finish at every trainer
 * start filled fresh servers' logs with errors. vLLM has no route that reports the worker's
 * _weight_update_active (GET /weight_info gives only the version, /is_paused only the pause), but
 * the dev route POST /collective_rpc runs getattr(worker_wrapper, method)(*args) in every worker
 * (vllm/v1/serial_utils.py run_method; the wrapper's __getattr__ hands names to the worker), so
 * the probe posts {"method": "__getattr__", "args": ["_weight_update_active"]} and reads
 * {"results": ["True"|"False", ...]}: RESET finishes only where some worker answered "True".
 * Where the answer is anything else (a release without that attribute or route) it finishes as
 * before (a refusal there is harmless, only logged).
 *
 * Between /start_weight_update and /finish_weight_update vLLM keeps layers on the meta device:
 * generating then crashes the engine, so this adapter pauses by default. After a failure
 * (ABANDON) /finish_weight_update without a version ends the update (backend=nccl).
 *
 * backend=wsync also talks to the backend's engine object itself, through the same dev route:
 * POST /collective_rpc {"method": "weight_transfer_engine", "args": [call, ...]} makes every
 * worker call its engine (engine(call, ...)) and answers {"results": [dict per worker]}:
 *   CHECK (a declared update, plugin ABI 1.7)  args ["wsync_check", "<{names, dtype_names,
 *       shapes} as JSON>"]: each worker checks the whole update against the served model before
 *       anything is paused or begun; {"ok": false, "refused": "..."} refuses the update.
 *   ABANDON  args ["wsync_abandon"]: each worker ends its side of the update and answers what it
 *       holds ({"whole", "holds", "open"}; held). No /finish_weight_update here: vLLM's worker
 *       already ended its update after a failed /update_weights and logs a rejected finish with
 *       a traceback. Where a worker says its vLLM update is still open, the RESUME that follows
 *       (where the group resumes: engine_resume_on_failure) sends /finish_weight_update first;
 *       a server left paused is ended by the next trainer's RESET.
 *
 * Options (adapter.<key>):
 *   pause                      0|1 (1)  PAUSE/RESUME send /pause?mode=... and /resume
 *   pause_mode                 abort|wait|keep (keep)
 *   packed                     0|1 (1)               backend nccl only
 *   packed_buffer_size_bytes   1..2^53 (1073741824)  backend nccl only
 *   packed_num_buffers         1..1024 (2)           backend nccl only
 *   engine_version             a release to speak with every server instead of the one it reports
 *   backend                    nccl|wsync (nccl)  the servers' weight-transfer backend
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_common.h"

#define ADAPTER "vllm"
#define DEFAULT_PACKED_BUFFER_SIZE_BYTES 1073741824ull /* vLLM packed_tensor.py */
#define DEFAULT_PACKED_NUM_BUFFERS 2ull

static const char* const kOptions[] = {"pause",       "pause_mode", "packed", "packed_buffer_size_bytes",
                                       "packed_num_buffers", "engine_version", "backend"};
static const char* const kPauseModes[] = {"abort", "wait", "keep"};
static const char* const kBackends[] = {"nccl", "wsync"}; /* index 1: backend=wsync */
static const char* const kPackedOptions[] = {"packed", "packed_buffer_size_bytes", "packed_num_buffers"};
static const hc_version_t kOldest = {0, 28, 0}, kNewest = {0, 33, HC_ANY_PATCH};
static const hc_version_t kUniqueId = {0, 30, 0}, kShutdown = {0, 32, 0};

typedef struct vllm_adapter {
  hc_adapter_t base; /* first: the shared table entries see an hc_adapter_t */
  int pause;
  const char* pause_mode;
  int packed;
  uint64_t buffer_bytes;
  uint64_t num_buffers;
  int wsync_backend; /* option backend=wsync: the servers run the wsync weight-transfer backend */
} vllm_adapter_t;

static wsync_status_t vllm_build(void* self, const wsync_engine_step_t* step);
static wsync_status_t vllm_take(void* self, const wsync_engine_step_t* step, uint32_t request_index,
                                int32_t http_status, const char* body, uint64_t body_len);

/* backend=wsync: the packed options are vLLM's NCCL backend's. */
static wsync_status_t refuse_packed_options(const wsync_adapter_params_t* params) {
  size_t idx;
  for (idx = 0; idx < sizeof kPackedOptions / sizeof kPackedOptions[0]; ++idx)
    if (hc_option(params, kPackedOptions[idx]) != NULL)
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER,
                      "option 'adapter.%s' belongs to backend nccl (vLLM's packed NCCL broadcast); with "
                      "backend=wsync the bytes move over the wsync transport in the group's buckets (option "
                      "bucket_bytes): leave it out",
                      kPackedOptions[idx]);
  return WSYNC_OK;
}

static wsync_status_t vllm_create(const wsync_adapter_params_t* params, void** out) {
  vllm_adapter_t tmp, *a;
  const char* v;
  size_t idx;
  wsync_status_t st;
  st = hc_check_create(ADAPTER, params, out, kOptions, sizeof kOptions / sizeof kOptions[0]);
  if (st != WSYNC_OK) return st;
  memset(&tmp, 0, sizeof tmp);
  tmp.pause_mode = "keep";
  tmp.packed = 1;
  tmp.buffer_bytes = DEFAULT_PACKED_BUFFER_SIZE_BYTES;
  tmp.num_buffers = DEFAULT_PACKED_NUM_BUFFERS;
  tmp.pause = 1; /* generating during an update crashes vLLM */
  tmp.base.name = ADAPTER;
  if ((v = hc_option(params, "backend")) != NULL) {
    st = hc_parse_choice(ADAPTER, "backend", v, kBackends, sizeof kBackends / sizeof kBackends[0], &idx);
    if (st != WSYNC_OK) return st;
    tmp.wsync_backend = idx == 1;
  }
  if (tmp.wsync_backend && (st = refuse_packed_options(params)) != WSYNC_OK) return st;
  if ((v = hc_option(params, "pause")) != NULL && (st = hc_parse_bool(ADAPTER, "pause", v, &tmp.pause)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "pause_mode")) != NULL) {
    st = hc_parse_choice(ADAPTER, "pause_mode", v, kPauseModes, sizeof kPauseModes / sizeof kPauseModes[0], &idx);
    if (st != WSYNC_OK) return st;
    tmp.pause_mode = kPauseModes[idx];
  }
  if ((v = hc_option(params, "packed")) != NULL && (st = hc_parse_bool(ADAPTER, "packed", v, &tmp.packed)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "packed_buffer_size_bytes")) != NULL &&
      (st = hc_parse_u64(ADAPTER, "packed_buffer_size_bytes", v, 1, 1ull << 53, &tmp.buffer_bytes)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "packed_num_buffers")) != NULL &&
      (st = hc_parse_u64(ADAPTER, "packed_num_buffers", v, 1, 1024, &tmp.num_buffers)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "engine_version")) != NULL) {
    if ((st = hc_set_forced_version(&tmp.base, v)) != WSYNC_OK) return st;
    if ((st = hc_check_supported(&tmp.base, "vLLM", tmp.base.forced, kOldest, kNewest)) != WSYNC_OK) return st;
  }
  a = (vllm_adapter_t*)hc_adapter_new(sizeof *a, ADAPTER, vllm_build);
  if (a == NULL) return WSYNC_ERR_OUT_OF_MEMORY;
  tmp.base.build = a->base.build;
  tmp.base.take = vllm_take;
  tmp.base.checks_updates = tmp.wsync_backend; /* CHECK: the wsync backend's engine checks a declared update */
  *a = tmp;
  /* vLLM's workers take the NCCL id in the init request (nccl_unique_id_b64, where the transport
   * has one) and run a one-element all-reduce right after NCCL init: the sender must run it too.
   * The wsync backend's receivers join over the store and need neither. */
  if (!a->wsync_backend) {
    hc_needs_property(&a->base, WSYNC_PROPERTY_NCCL_UNIQUE_ID);
    hc_needs_hint(&a->base, WSYNC_HINT_ALLREDUCE_AFTER_INIT, "1");
  }
  *out = a;
  return WSYNC_OK;
}

static wsync_status_t vllm_get_layout(void* self, wsync_layout_rule_t* out) {
  const vllm_adapter_t* a = (const vllm_adapter_t*)self;
  if (self == NULL || out == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "get_layout: NULL argument");
  if (a->wsync_backend) {
    /* A wsync transport moves the core's buckets as they are: no packing rule, and the group's
     * own bucket_bytes applies (the field is left as the core set it). */
    out->kind = WSYNC_LAYOUT_BYTES_MIXED;
    out->alignment = 1;
    out->allow_split = 0;
    return WSYNC_OK;
  }
  out->kind = WSYNC_LAYOUT_EXCEED_THEN_FLUSH;
  out->alignment = 1;
  out->allow_split = 0;
  /* Packed: vLLM's workers recompute the cuts at packed_buffer_size_bytes, so the core's buckets
   * must be cut at exactly that size (a core older than 1.1 has no such field: set bucket_bytes). */
  if (a->packed && WSYNC_HAS_FIELD(out, wsync_layout_rule_t, bucket_bytes))
    out->bucket_bytes = a->buffer_bytes;
  return WSYNC_OK;
}

/* Standard base64 (vLLM decodes with b64decode(validate=True): no URL-safe alphabet). */
static int is_std_base64(const char* s) {
  size_t n = strlen(s), i, pad = 0;
  if (n == 0 || n % 4 != 0) return 0;
  for (i = 0; i < n; ++i) {
    char c = s[i];
    if (c == '=') {
      ++pad;
      continue;
    }
    if (pad > 0) return 0; /* data after padding */
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/'))
      return 0;
  }
  return pad <= 2;
}

/* The bucket must be one chunk of vLLM's packing rule (see the top of this file). */
static wsync_status_t check_one_chunk(const vllm_adapter_t* a, const wsync_engine_step_t* s) {
  uint64_t i, running = 0, bytes;
  if (!a->packed) {
    if (s->num_tensors != 1)
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER,
                      "UPDATE step: bucket %llu holds %llu tensors ('%.200s', '%.200s', ...) but with packed=0 vLLM "
                      "receives one broadcast per tensor: every bucket must hold one tensor",
                      (unsigned long long)s->update_index, (unsigned long long)s->num_tensors, s->names[0],
                      s->names[1]);
    return WSYNC_OK;
  }
  for (i = 0; i + 1 < s->num_tensors; ++i) {
    hc_tensor_bytes(s, i, &bytes); /* cannot overflow: hc_check_step */
    running = bytes > UINT64_MAX - running ? UINT64_MAX : running + bytes;
    if (running > a->buffer_bytes)
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER,
                      "UPDATE step: bucket %llu is more than one vLLM packed chunk: after tensor '%.200s' it holds "
                      "%llu bytes > packed_buffer_size_bytes %llu, yet tensor '%.200s' follows (bucket_bytes must "
                      "not exceed packed_buffer_size_bytes)",
                      (unsigned long long)s->update_index, s->names[i], (unsigned long long)running,
                      (unsigned long long)a->buffer_bytes, s->names[i + 1]);
  }
  return WSYNC_OK;
}

static int put_packed_fields(const vllm_adapter_t* a, cJSON* o) {
  int ok = hc_put(o, "packed", cJSON_CreateBool(a->packed));
  ok = ok && hc_put(o, "packed_buffer_size_bytes", hc_int((int64_t)a->buffer_bytes));
  ok = ok && hc_put(o, "packed_num_buffers", hc_int((int64_t)a->num_buffers));
  return ok;
}

static wsync_status_t build_init(vllm_adapter_t* a, const wsync_engine_step_t* s, hc_version_t release) {
  cJSON* body = cJSON_CreateObject();
  cJSON* info = cJSON_CreateObject();
  wsync_status_t st;
  int ok = 1;
  const char* id_b64 = hc_property(s, WSYNC_PROPERTY_NCCL_UNIQUE_ID); /* asked for in get_needs */
  if (id_b64 != NULL) {
    /* NCCLWeightTransferInitInfo: the unique id and master_address/master_port are mutually
     * exclusive ("pass nccl_unique_id_b64 OR master_address/master_port, not both"). */
    if (hc_version_cmp(release, kUniqueId) < 0) {
      char text[32];
      hc_version_text(release, text, sizeof text);
      st = hc_error(WSYNC_ERR_UNSUPPORTED, ADAPTER,
                    "INIT step (server %u): the transport gives nccl_unique_id_b64, which vLLM %s does not take "
                    "(0.30 and later do; 0.28 and 0.29 rendezvous through vLLM's own process group, which the "
                    "nccl transport does not serve): use vLLM 0.30 or later with transport nccl",
                    (unsigned)s->server_index, text);
      goto fail;
    }
    if (!is_std_base64(id_b64)) {
      st = hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER,
                    "INIT step (server %u): nccl_unique_id_b64 is not standard base64", (unsigned)s->server_index);
      goto fail;
    }
    ok = hc_put(info, "rank_offset", hc_int(s->rank_offset));
    ok = ok && hc_put(info, "world_size", hc_int(s->world_size));
    ok = ok && hc_put(info, "nccl_unique_id_b64", cJSON_CreateString(id_b64));
  } else {
    if ((st = hc_check_rendezvous(ADAPTER, s)) != WSYNC_OK) goto fail;
    ok = hc_put(info, "master_address", cJSON_CreateString(s->master_address));
    ok = ok && hc_put(info, "master_port", hc_int(s->master_port));
    ok = ok && hc_put(info, "rank_offset", hc_int(s->rank_offset));
    ok = ok && hc_put(info, "world_size", hc_int(s->world_size));
  }
  ok = ok && put_packed_fields(a, info);
  if (!ok) {
    cJSON_Delete(info);
    return hc_oom(ADAPTER, body);
  }
  if (!hc_put(body, "init_info", info)) return hc_oom(ADAPTER, body); /* hc_put freed info */
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/init_weight_transfer_engine", body, 0, WSYNC_REPLY_JSON);
fail:
  cJSON_Delete(info);
  cJSON_Delete(body);
  return st;
}

/* backend=wsync: init_info {store_addr, group_name, rank_offset, world_size}, nothing else (the
 * backend's dataclass refuses unknown keys). store_addr is the sender's store, "host:port" with an
 * IPv6 literal in brackets. */
static wsync_status_t build_init_wsync(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  cJSON* body;
  cJSON* info;
  char* addr;
  size_t cap;
  int ok, v6;
  wsync_status_t st;
  if ((st = hc_check_rendezvous(ADAPTER, s)) != WSYNC_OK) return st;
  if ((st = hc_check_group_name(ADAPTER, s)) != WSYNC_OK) return st;
  v6 = strchr(s->master_address, ':') != NULL && s->master_address[0] != '[';
  cap = strlen(s->master_address) + 16; /* brackets, ':', 5 digits, NUL */
  if ((addr = (char*)malloc(cap)) == NULL) return hc_oom(ADAPTER, NULL);
  snprintf(addr, cap, v6 ? "[%s]:%u" : "%s:%u", s->master_address, (unsigned)s->master_port);
  body = cJSON_CreateObject();
  info = cJSON_CreateObject();
  ok = hc_put(info, "store_addr", cJSON_CreateString(addr));
  free(addr);
  ok = ok && hc_put(info, "group_name", cJSON_CreateString(s->group_name));
  ok = ok && hc_put(info, "rank_offset", hc_int(s->rank_offset));
  ok = ok && hc_put(info, "world_size", hc_int(s->world_size));
  if (!ok) {
    cJSON_Delete(info);
    return hc_oom(ADAPTER, body);
  }
  if (!hc_put(body, "init_info", info)) return hc_oom(ADAPTER, body); /* hc_put freed info */
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/init_weight_transfer_engine", body, 0, WSYNC_REPLY_JSON);
}

static wsync_status_t build_update(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  cJSON* body;
  cJSON* info;
  wsync_status_t st;
  int ok;
  if (!a->wsync_backend && (st = check_one_chunk(a, s)) != WSYNC_OK) return st; /* wsync: no packing rule */
  body = cJSON_CreateObject();
  info = cJSON_CreateObject();
  ok = hc_put(info, "names", hc_names(s));
  ok = ok && hc_put(info, "dtype_names", hc_dtype_names(s));
  ok = ok && hc_put(info, "shapes", hc_shapes(s));
  if (!ok) {
    cJSON_Delete(info);
    return hc_oom(ADAPTER, body);
  }
  if (!hc_put(body, "update_info", info)) return hc_oom(ADAPTER, body);
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/update_weights", body, 0, WSYNC_REPLY_JSON);
}

/* ---- PROBE: the release (GET /version) and the workers that join (GET /get_world_size) ---- */

static wsync_status_t take_version(vllm_adapter_t* a, hc_server_t* srv, const cJSON* j) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(j, "version");
  if (!cJSON_IsString(v) || hc_parse_version(v->valuestring, &srv->version) != 0)
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "GET /version reports no release; set option adapter.engine_version");
  return hc_check_supported(&a->base, "vLLM", srv->version, kOldest, kNewest);
}

static wsync_status_t take_world_size(const wsync_engine_step_t* s, const cJSON* j) {
  int w = 0;
  if (hc_json_count(j, "world_size", 1, 65536, &w) != 1)
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "GET /get_world_size has no \"world_size\" that is a count from 1 "
                    "to 65536");
  if ((uint32_t)w != s->server_gpus)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "the server has %d worker(s) that join the weight transfer "
                    "(GET /get_world_size) but option 'engines' gives it %u; correct the count after its URL", w,
                    (unsigned)s->server_gpus);
  return WSYNC_OK;
}

/* The probe's POST /collective_rpc: 1 when some worker's _weight_update_active is True, 0 when
 * every worker answered False, -1 when the answer says neither. */
static int update_active_answer(int32_t http_status, const char* body, uint64_t body_len) {
  cJSON* j;
  const cJSON* r;
  const cJSON* e;
  int any = 0, n = 0, ok = 1;
  if (http_status != 200 || (j = hc_parse_body(body, body_len)) == NULL) return -1;
  r = cJSON_GetObjectItemCaseSensitive(j, "results");
  cJSON_ArrayForEach(e, r) {
    ++n;
    if (cJSON_IsString(e) && strcmp(e->valuestring, "True") == 0) any = 1;
    else if (!cJSON_IsString(e) || strcmp(e->valuestring, "False") != 0) ok = 0;
  }
  cJSON_Delete(j);
  return !cJSON_IsArray(r) || n == 0 || !ok ? -1 : any;
}

static wsync_status_t take_check(vllm_adapter_t* a, const wsync_engine_step_t* s, int32_t http_status,
                                 const char* body, uint64_t body_len);
static wsync_status_t take_abandon(vllm_adapter_t* a, const wsync_engine_step_t* s, int32_t http_status,
                                   const char* body, uint64_t body_len);

static wsync_status_t vllm_take(void* self, const wsync_engine_step_t* s, uint32_t request_index,
                                int32_t http_status, const char* body, uint64_t body_len) {
  vllm_adapter_t* a = (vllm_adapter_t*)self;
  hc_server_t* srv = hc_server(&a->base, s->server_index);
  const uint32_t last = a->base.has_forced ? 1 : 2; /* the index of the /collective_rpc question */
  const int world = a->base.has_forced ? request_index == 0 : request_index == 1; /* forced: no /version */
  cJSON* j;
  wsync_status_t st;
  if (srv == NULL) return WSYNC_ERR_OUT_OF_MEMORY;
  if (s->step == WSYNC_STEP_CHECK) return take_check(a, s, http_status, body, body_len);
  if (s->step == WSYNC_STEP_ABANDON) return take_abandon(a, s, http_status, body, body_len);
  if (s->step != WSYNC_STEP_PROBE) return WSYNC_OK;
  if (request_index == last) {
    srv->nothing_left = update_active_answer(http_status, body, body_len) == 0;
    return WSYNC_OK;
  }
  if (http_status != 200)
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "GET %s answered HTTP %d (is this vLLM, started with "
                    "VLLM_SERVER_DEV_MODE=1?)", world ? "/get_world_size" : "/version", (int)http_status);
  if ((j = hc_parse_body(body, body_len)) == NULL || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return hc_error(WSYNC_ERR_PROTOCOL, ADAPTER, "GET %s answered something that is not a JSON object",
                    world ? "/get_world_size" : "/version");
  }
  st = world ? take_world_size(s, j) : take_version(a, srv, j);
  cJSON_Delete(j);
  if (st != WSYNC_OK) return st;
  if (a->base.has_forced) srv->version = a->base.forced;
  srv->known = world; /* the last request of the probe that must answer */
  return WSYNC_OK;
}

/* ---- the requests of each step ---- */

static wsync_status_t add_probe(vllm_adapter_t* a) {
  wsync_status_t st = WSYNC_OK;
  cJSON* b;
  if (!a->base.has_forced)
    st = hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_GET, "/version", NULL, 1, WSYNC_REPLY_TO_ADAPTER);
  if (st == WSYNC_OK)
    st = hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_GET, "/get_world_size", NULL, 1, WSYNC_REPLY_TO_ADAPTER);
  if (st != WSYNC_OK) return st;
  /* Whether an earlier trainer left an update active (see the top of this file): only reads. */
  b = cJSON_CreateObject();
  if (b == NULL || !hc_put(b, "method", cJSON_CreateString("__getattr__")) ||
      !hc_put(b, "args", cJSON_CreateArray()) ||
      !cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(b, "args"), cJSON_CreateString("_weight_update_active")))
    return hc_oom(ADAPTER, b);
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/collective_rpc", b, 1, WSYNC_REPLY_TO_ADAPTER);
}

/* POST /finish_weight_update {"weight_version": v}; ABANDON and RESET send no version (an update
 * ended without one keeps the engine's label, and restores the old weights if nothing loaded). */
static wsync_status_t add_finish(vllm_adapter_t* a, const wsync_engine_step_t* s, int with_version) {
  char buf[32];
  cJSON* b = cJSON_CreateObject();
  if (b == NULL) return hc_oom(ADAPTER, NULL);
  if (with_version) {
    hc_version_string(s->version, buf, sizeof buf);
    if (!hc_put(b, "weight_version", cJSON_CreateString(buf))) return hc_oom(ADAPTER, b);
  }
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/finish_weight_update", b, 0, WSYNC_REPLY_JSON);
}

static wsync_status_t add_pause(vllm_adapter_t* a) {
  char buf[64]; /* query parameters only; reply {"status": "paused"} */
  snprintf(buf, sizeof buf, "/pause?mode=%s", a->pause_mode);
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, buf, NULL, 1, WSYNC_REPLY_JSON);
}

static wsync_status_t add_shutdown(vllm_adapter_t* a, hc_version_t release) {
  if (hc_version_cmp(release, kShutdown) < 0) return WSYNC_OK; /* 0.28-0.31: no such route; re-init is allowed */
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/shutdown_weight_transfer_engine", NULL, 0,
                WSYNC_REPLY_JSON);
}

/* RESET: an update an earlier trainer left active, its transfer group, and its pause (resumed
 * whatever this trainer's option pause says: the earlier one may have paused, and a server left
 * paused serves nothing). */
static wsync_status_t add_reset(vllm_adapter_t* a, const wsync_engine_step_t* s, hc_version_t release) {
  hc_server_t* srv = hc_server(&a->base, s->server_index);
  wsync_status_t st = srv == NULL ? WSYNC_ERR_OUT_OF_MEMORY : WSYNC_OK;
  if (st == WSYNC_OK && !srv->nothing_left) st = add_finish(a, s, 0); /* none active: vLLM would log an error */
  if (st == WSYNC_OK) st = add_shutdown(a, release);
  if (st == WSYNC_OK) st = hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/resume", NULL, 1, WSYNC_REPLY_JSON);
  return st;
}

/* ---- backend=wsync: the engine's own calls (see the top of this file) ---- */

/* The "results" array of a /collective_rpc answer, or NULL (the body is kept in *owner). */
static const cJSON* rpc_results(int32_t http_status, const char* body, uint64_t body_len, cJSON** owner) {
  const cJSON* r;
  *owner = NULL;
  if (http_status != 200 || (*owner = hc_parse_body(body, body_len)) == NULL) return NULL;
  r = cJSON_GetObjectItemCaseSensitive(*owner, "results");
  return cJSON_IsArray(r) && cJSON_GetArraySize(r) > 0 ? r : NULL;
}

/* The engine's reply text for a message: the start of the body, printable bytes only. */
static void quote_body(const char* body, uint64_t body_len, char* out, size_t cap) {
  size_t i, n = body_len < cap - 1 ? (size_t)body_len : cap - 1;
  for (i = 0; i < n; ++i) out[i] = body[i] >= 32 && body[i] < 127 ? body[i] : ' ';
  out[n] = '\0';
}

/* An engine's words for a message or a log line: printable ASCII kept, anything else a space. */
static void printable(char* text) {
  for (; *text; ++text)
    if ((unsigned char)*text < 32 || (unsigned char)*text == 127) *text = ' ';
}

static wsync_status_t take_check(vllm_adapter_t* a, const wsync_engine_step_t* s, int32_t http_status,
                                 const char* body, uint64_t body_len) {
  cJSON* j;
  const cJSON* e;
  const cJSON* r = rpc_results(http_status, body, body_len, &j);
  char quoted[240];
  wsync_status_t st = WSYNC_OK;
  (void)s;
  if (r == NULL) {
    cJSON_Delete(j);
    quote_body(body, body_len, quoted, sizeof quoted);
    return hc_error(WSYNC_ERR_ENGINE, ADAPTER, "it could not check the declared update (HTTP %d: %s); its wsync backend "
                    "must be wsync 0.8 or later, in a server started with VLLM_SERVER_DEV_MODE=1",
                    (int)http_status, quoted);
  }
  cJSON_ArrayForEach(e, r) {
    const cJSON* ok = cJSON_GetObjectItemCaseSensitive(e, "ok");
    const cJSON* why = cJSON_GetObjectItemCaseSensitive(e, "refused");
    if (cJSON_IsTrue(ok)) continue;
    if (cJSON_IsFalse(ok) && cJSON_IsString(why)) printable(why->valuestring);
    st = hc_error(cJSON_IsFalse(ok) ? WSYNC_ERR_INVALID_ARGUMENT : WSYNC_ERR_PROTOCOL, ADAPTER, "%.2000s",
                  cJSON_IsFalse(ok) && cJSON_IsString(why) ? why->valuestring
                                                           : "a worker's answer to the check has no \"ok\"");
    break;
  }
  cJSON_Delete(j);
  (void)a;
  return st;
}

/* What the server holds after ABANDON: one version where every worker is whole, a mix where one
 * is not; its words (the workers' own, joined when they differ); and whether a worker's vLLM
 * update is still open (ended by the RESUME that follows). A reply that says none of it: unknown. */
static wsync_status_t take_abandon(vllm_adapter_t* a, const wsync_engine_step_t* s, int32_t http_status,
                                   const char* body, uint64_t body_len) {
  cJSON* j;
  const cJSON* e;
  const cJSON* r = rpc_results(http_status, body, body_len, &j);
  hc_server_t* srv = hc_server(&a->base, s->server_index);
  char words[1024] = "";
  int32_t held = WSYNC_HELD_ONE_VERSION;
  int open = 0, k = 0;
  wsync_status_t st;
  if (srv == NULL) {
    cJSON_Delete(j);
    return WSYNC_ERR_OUT_OF_MEMORY;
  }
  if (r == NULL) held = WSYNC_HELD_UNKNOWN;
  cJSON_ArrayForEach(e, r) {
    const cJSON* whole = cJSON_GetObjectItemCaseSensitive(e, "whole");
    const cJSON* holds = cJSON_GetObjectItemCaseSensitive(e, "holds");
    const size_t used = strlen(words);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "open"))) open = 1;
    if (!cJSON_IsBool(whole) || !cJSON_IsString(holds)) {
      held = WSYNC_HELD_UNKNOWN;
      break;
    }
    if (cJSON_IsFalse(whole)) held = WSYNC_HELD_MIX;
    if (k++ == 0) snprintf(words, sizeof words, "%s", holds->valuestring);
    else if (strstr(words, holds->valuestring) == NULL && used + 16 < sizeof words)
      snprintf(words + used, sizeof words - used, "; worker %d: %s", k - 1, holds->valuestring);
  }
  cJSON_Delete(j);
  srv->end_pending = open;
  printable(words);
  st = hc_set_held(&a->base, s->server_index, held, held == WSYNC_HELD_UNKNOWN ? NULL : words);
  return st;
}

/* CHECK: the declared update as {"names", "dtype_names", "shapes"} JSON text, the engine call's
 * second argument. */
static wsync_status_t add_check(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  cJSON* cat = cJSON_CreateObject();
  cJSON* b;
  cJSON* args;
  char* text;
  int ok = cat != NULL && hc_put(cat, "names", hc_names(s));
  ok = ok && hc_put(cat, "dtype_names", hc_dtype_names(s));
  ok = ok && hc_put(cat, "shapes", hc_shapes(s));
  text = ok ? cJSON_PrintUnformatted(cat) : NULL;
  cJSON_Delete(cat);
  if (text == NULL) return hc_oom(ADAPTER, NULL);
  b = cJSON_CreateObject();
  args = cJSON_CreateArray();
  ok = b != NULL && args != NULL && cJSON_AddItemToArray(args, cJSON_CreateString("wsync_check")) &&
       cJSON_AddItemToArray(args, cJSON_CreateString(text));
  free(text);
  if (!ok) {
    cJSON_Delete(args);
    return hc_oom(ADAPTER, b);
  }
  if (!hc_put(b, "args", args) || !hc_put(b, "method", cJSON_CreateString("weight_transfer_engine")))
    return hc_oom(ADAPTER, b); /* (hc_put frees what it could not add) */
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/collective_rpc", b, 1, WSYNC_REPLY_TO_ADAPTER);
}

/* ABANDON (backend=wsync): engine("wsync_abandon"); what it says is read by take_abandon. */
static wsync_status_t add_abandon_wsync(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  cJSON* b = cJSON_CreateObject();
  cJSON* args = cJSON_CreateArray();
  wsync_status_t st = hc_set_held(&a->base, s->server_index, WSYNC_HELD_UNKNOWN, NULL);
  if (st != WSYNC_OK || b == NULL || args == NULL || !cJSON_AddItemToArray(args, cJSON_CreateString("wsync_abandon"))) {
    cJSON_Delete(args);
    cJSON_Delete(b);
    return st != WSYNC_OK ? st : hc_oom(ADAPTER, NULL);
  }
  a->base.servers[s->server_index].end_pending = 0; /* (hc_set_held made the entry) */
  if (!hc_put(b, "args", args) || !hc_put(b, "method", cJSON_CreateString("weight_transfer_engine")))
    return hc_oom(ADAPTER, b); /* (hc_put frees what it could not add) */
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/collective_rpc", b, 0, WSYNC_REPLY_TO_ADAPTER);
}

/* Whether the server's vLLM update is still open after an ABANDON (then cleared: the caller's
 * request ends it). */
static int end_pending_taken(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  hc_server_t* srv = s->server_index < a->base.num_servers ? &a->base.servers[s->server_index] : NULL;
  int pending = srv != NULL && srv->end_pending;
  if (pending) srv->end_pending = 0;
  return pending;
}

/* RESUME: after an ABANDON whose server still has its vLLM update open, end it first. */
static wsync_status_t add_resume(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  wsync_status_t st = end_pending_taken(a, s) ? add_finish(a, s, 0) : WSYNC_OK;
  if (st == WSYNC_OK && a->pause) st = hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/resume", NULL, 1, WSYNC_REPLY_JSON);
  return st;
}

static wsync_status_t build(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  hc_requests_t* l = &a->base.list;
  const hc_version_t release = hc_server_version(&a->base, s->server_index, kNewest);
  cJSON* b;
  wsync_status_t st;
  switch (s->step) {
    case WSYNC_STEP_HEALTH:
      return hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/health", NULL, 1, WSYNC_REPLY_STATUS);
    case WSYNC_STEP_PROBE:
      return add_probe(a);
    case WSYNC_STEP_RESET:
      (void)end_pending_taken(a, s); /* the reset asks and ends what is open itself */
      return add_reset(a, s, release);
    case WSYNC_STEP_INIT:
      return a->wsync_backend ? build_init_wsync(a, s) : build_init(a, s, release);
    case WSYNC_STEP_PAUSE:
      return a->pause ? add_pause(a) : WSYNC_OK;
    case WSYNC_STEP_BEGIN_UPDATE:
      /* A failed update whose vLLM update is still open here (left paused, or an elastic group
       * going on after it): end it first, or vLLM refuses the start. */
      if (end_pending_taken(a, s) && (st = add_finish(a, s, 0)) != WSYNC_OK) return st;
      /* No body parameter in current vLLM; {} leaves any body field at its default. */
      b = cJSON_CreateObject();
      if (b == NULL) return hc_oom(ADAPTER, NULL);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/start_weight_update", b, 0, WSYNC_REPLY_JSON);
    case WSYNC_STEP_UPDATE:
      return build_update(a, s);
    case WSYNC_STEP_FINALIZE:
      return add_finish(a, s, 1);
    case WSYNC_STEP_ABANDON:
      return a->wsync_backend ? add_abandon_wsync(a, s) : add_finish(a, s, 0);
    case WSYNC_STEP_RESUME:
      return add_resume(a, s);
    case WSYNC_STEP_CHECK:
      return a->wsync_backend ? add_check(a, s) : WSYNC_OK;
    case WSYNC_STEP_DESTROY:
      return add_shutdown(a, release);
    default:
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "build_requests: unknown step %d", (int)s->step);
  }
}

static wsync_status_t vllm_build(void* self, const wsync_engine_step_t* step) {
  return build((vllm_adapter_t*)self, step);
}

HC_DEFINE_ADAPTER(kVllmAdapter, "vllm", vllm_create, vllm_get_layout)
