/* adapter_vllm: vLLM's native weight-transfer API (NCCL backend) over HTTP. One
 * /init_weight_transfer_engine per server covers all its workers (rank = dp_index*TP*PP + rank +
 * rank_offset); an update is /start_weight_update, one /update_weights per bucket (posted
 * concurrently with the bucket's broadcast), then /finish_weight_update with the version.
 *
 * Layout: vLLM "packed" mode. Tensors are appended as bytes (mixed dtypes, no padding) until the
 * running total EXCEEDS packed_buffer_size_bytes (strict >): the crossing tensor stays in the
 * chunk, and each chunk is one broadcast. vLLM recomputes the cuts from each /update_weights
 * list, so every bucket the core sends must be exactly one chunk of that rule: the core's
 * bucket_bytes must be at most packed_buffer_size_bytes (equal is best). UPDATE refuses a bucket
 * that vLLM would cut into more than one broadcast. With packed=0 vLLM does one broadcast per
 * tensor, so every bucket must hold one tensor (refused otherwise).
 *
 * vLLM rejects unknown keys inside init_info/update_info (dataclass(**dict)), so the field set
 * must match the server's generation (option api_version):
 *   3 (newest): init_info {master_address, master_port | nccl_unique_id_b64, rank_offset,
 *               world_size, packed, packed_buffer_size_bytes, packed_num_buffers};
 *               update_info {names, dtype_names, shapes}
 *   2:          init_info {master_address, master_port, rank_offset, world_size};
 *               update_info {names, dtype_names, shapes, packed, packed_buffer_size_bytes,
 *               packed_num_buffers}
 *   1:          as 2, but update_info carries only `packed` (the buffer size is vLLM's default,
 *               1 GiB: any other packed_buffer_size_bytes is refused)
 * nccl_unique_id_b64 exists only in generation 3 (that generation 2 lacks it is UNCONFIRMED): with
 * api_version 1 or 2, a transport that gives the id (nccl) is refused at INIT with a message, since
 * those generations rendezvous through their own process group, which no wsync transport serves.
 *
 * Options (adapter.<key>):
 *   pause                      0|1 (0)  PAUSE/RESUME send /pause?mode=... and /resume
 *   pause_mode                 abort|wait|keep (keep)
 *   packed                     0|1 (1)
 *   packed_buffer_size_bytes   1..2^53 (1073741824)
 *   packed_num_buffers         1..1024 (2)
 *   api_version                1|2|3 (3)
 *   lifecycle                  0|1 (1)  BEGIN_UPDATE/FINALIZE send /start_weight_update and
 *                              /finish_weight_update; 0 for vLLM routers without them (e.g. vllm
 *                              @1ace43ed), where the version is then not sent
 * DESTROY sends nothing: vLLM has no route to leave the weight-transfer group. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "http_common.h"

#define ADAPTER "vllm"
#define DEFAULT_PACKED_BUFFER_SIZE_BYTES 1073741824ull /* vLLM packed_tensor.py */
#define DEFAULT_PACKED_NUM_BUFFERS 2ull

static const char* const kOptions[] = {"pause",       "pause_mode", "packed", "packed_buffer_size_bytes",
                                       "packed_num_buffers", "api_version", "lifecycle"};
static const char* const kPauseModes[] = {"abort", "wait", "keep"};

typedef struct vllm_adapter {
  hc_adapter_t base; /* first: the shared table entries see an hc_adapter_t */
  int pause;
  const char* pause_mode;
  int packed;
  uint64_t buffer_bytes;
  uint64_t num_buffers;
  uint64_t api_version;
  int lifecycle;
} vllm_adapter_t;

static wsync_status_t vllm_build(void* self, const wsync_engine_step_t* step);

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
  tmp.api_version = 3;
  tmp.lifecycle = 1;
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
  if ((v = hc_option(params, "api_version")) != NULL &&
      (st = hc_parse_u64(ADAPTER, "api_version", v, 1, 3, &tmp.api_version)) != WSYNC_OK)
    return st;
  if ((v = hc_option(params, "lifecycle")) != NULL &&
      (st = hc_parse_bool(ADAPTER, "lifecycle", v, &tmp.lifecycle)) != WSYNC_OK)
    return st;
  if (tmp.api_version == 1 && tmp.buffer_bytes != DEFAULT_PACKED_BUFFER_SIZE_BYTES)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER,
                    "option 'adapter.packed_buffer_size_bytes' cannot be sent with api_version 1 (vLLM then uses "
                    "its default, %llu); use api_version 2 or 3, or leave it unset",
                    (unsigned long long)DEFAULT_PACKED_BUFFER_SIZE_BYTES);
  a = (vllm_adapter_t*)hc_adapter_new(sizeof *a, ADAPTER, vllm_build);
  if (a == NULL) return WSYNC_ERR_OUT_OF_MEMORY;
  tmp.base = a->base;
  *a = tmp;
  /* vLLM's workers take the NCCL id in the init request (nccl_unique_id_b64, where the transport
   * has one) and run a one-element all-reduce right after NCCL init: the sender must run it too. */
  hc_needs_property(&a->base, "nccl_unique_id_b64");
  hc_needs_hint(&a->base, "allreduce_after_init", "1");
  *out = a;
  return WSYNC_OK;
}

static wsync_status_t vllm_get_layout(void* self, wsync_layout_rule_t* out) {
  const vllm_adapter_t* a = (const vllm_adapter_t*)self;
  if (self == NULL || out == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "get_layout: NULL argument");
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

static wsync_status_t build_init(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  cJSON* body = cJSON_CreateObject();
  cJSON* info = cJSON_CreateObject();
  wsync_status_t st;
  int ok = 1;
  const char* id_b64 = hc_property(s, "nccl_unique_id_b64"); /* asked for in get_needs */
  if (id_b64 != NULL) {
    /* NCCLWeightTransferInitInfo: the unique id and master_address/master_port are mutually
     * exclusive ("pass nccl_unique_id_b64 OR master_address/master_port, not both"). */
    if (a->api_version < 3) {
      st = hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER,
                    "INIT step (server %u): the transport gave nccl_unique_id_b64, which vLLM takes only with "
                    "api_version 3 (configured: %llu)",
                    (unsigned)s->server_index, (unsigned long long)a->api_version);
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
  if (a->api_version >= 3) ok = ok && put_packed_fields(a, info);
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

static wsync_status_t build_update(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  cJSON* body;
  cJSON* info;
  wsync_status_t st;
  int ok;
  if ((st = check_one_chunk(a, s)) != WSYNC_OK) return st;
  body = cJSON_CreateObject();
  info = cJSON_CreateObject();
  ok = hc_put(info, "names", hc_names(s));
  ok = ok && hc_put(info, "dtype_names", hc_dtype_names(s));
  ok = ok && hc_put(info, "shapes", hc_shapes(s));
  if (a->api_version == 2) ok = ok && put_packed_fields(a, info);
  if (a->api_version == 1) ok = ok && hc_put(info, "packed", cJSON_CreateBool(a->packed));
  if (!ok) {
    cJSON_Delete(info);
    return hc_oom(ADAPTER, body);
  }
  if (!hc_put(body, "update_info", info)) return hc_oom(ADAPTER, body);
  return hc_add(&a->base.list, ADAPTER, WSYNC_HTTP_POST, "/update_weights", body, 0, WSYNC_REPLY_JSON);
}

static wsync_status_t build(vllm_adapter_t* a, const wsync_engine_step_t* s) {
  hc_requests_t* l = &a->base.list;
  cJSON* b;
  char buf[64];
  switch (s->step) {
    case WSYNC_STEP_HEALTH:
      return hc_add(l, ADAPTER, WSYNC_HTTP_GET, "/health", NULL, 1, WSYNC_REPLY_STATUS);
    case WSYNC_STEP_INIT:
      return build_init(a, s);
    case WSYNC_STEP_PAUSE:
      if (!a->pause) return WSYNC_OK;
      /* Query parameters only; reply {"status": "paused"}. */
      strcpy(buf, "/pause?mode=");
      strcat(buf, a->pause_mode);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, buf, NULL, 1, WSYNC_REPLY_JSON);
    case WSYNC_STEP_BEGIN_UPDATE:
      if (!a->lifecycle) return WSYNC_OK;
      /* No body parameter in current vLLM; some versions read is_checkpoint_format (default
       * true) from the body, which {} leaves at its default. */
      b = cJSON_CreateObject();
      if (b == NULL) return hc_oom(ADAPTER, NULL);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/start_weight_update", b, 0, WSYNC_REPLY_JSON);
    case WSYNC_STEP_UPDATE:
      return build_update(a, s);
    case WSYNC_STEP_FINALIZE:
      if (!a->lifecycle) return WSYNC_OK;
      hc_version_string(s->version, buf, sizeof buf);
      b = cJSON_CreateObject();
      if (!hc_put(b, "weight_version", cJSON_CreateString(buf))) return hc_oom(ADAPTER, b);
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/finish_weight_update", b, 0, WSYNC_REPLY_JSON);
    case WSYNC_STEP_RESUME:
      if (!a->pause) return WSYNC_OK;
      return hc_add(l, ADAPTER, WSYNC_HTTP_POST, "/resume", NULL, 1, WSYNC_REPLY_JSON);
    case WSYNC_STEP_DESTROY:
      return WSYNC_OK; /* vLLM has no route that tears the weight-transfer group down */
    default:
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, ADAPTER, "build_requests: unknown step %d", (int)s->step);
  }
}

static wsync_status_t vllm_build(void* self, const wsync_engine_step_t* step) {
  return build((vllm_adapter_t*)self, step);
}

HC_DEFINE_ADAPTER(kVllmAdapter, "vllm", vllm_create, vllm_get_layout)
