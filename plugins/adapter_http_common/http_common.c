/* http_common: shared helpers of the HTTP engine adapters; see http_common.h. */
#include "http_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wsync_status_t hc_error(wsync_status_t status, const char* adapter, const char* fmt, ...) {
  char prefix[128];
  va_list ap;
  wsync_status_t st;
  snprintf(prefix, sizeof prefix, "adapter '%s': ", adapter);
  va_start(ap, fmt);
  st = wsp_vfail(status, prefix, fmt, ap);
  va_end(ap);
  return st;
}

void hc_log(int32_t level, const char* adapter, const char* fmt, ...) {
  char prefix[128];
  va_list ap;
  snprintf(prefix, sizeof prefix, "adapter '%s': ", adapter);
  va_start(ap, fmt);
  wsp_vlog(level, prefix, fmt, ap);
  va_end(ap);
}

/* torch's dtype attribute names (the engines resolve them with getattr(torch, name)) and sizes,
 * from the header's one table, by code. */
#define HC_DTYPE_NAME(code, name, size) [code] = name,
static const char* const kDtypeNames[WSYNC_DTYPE_COUNT] = {WSYNC_DTYPE_TABLE(HC_DTYPE_NAME)};
#undef HC_DTYPE_NAME

const char* hc_dtype_name(int32_t dtype) {
  if (dtype <= 0 || dtype >= WSYNC_DTYPE_COUNT) return NULL;
  return kDtypeNames[dtype];
}

#define HC_DTYPE_SIZE(code, name, size) [code] = size,
static const uint32_t kDtypeSizes[WSYNC_DTYPE_COUNT] = {WSYNC_DTYPE_TABLE(HC_DTYPE_SIZE)};
#undef HC_DTYPE_SIZE

uint32_t hc_dtype_size(int32_t dtype) {
  if (dtype <= 0 || dtype >= WSYNC_DTYPE_COUNT) return 0;
  return kDtypeSizes[dtype];
}

int hc_tensor_bytes(const wsync_engine_step_t* step, uint64_t i, uint64_t* out) {
  uint64_t n = hc_dtype_size(step->dtypes[i]);
  int32_t d;
  for (d = 0; d < step->ndims[i]; ++d) {
    uint64_t dim = (uint64_t)step->shapes[i * WSYNC_MAX_NDIM + (uint64_t)d];
    if (dim != 0 && n > UINT64_MAX / dim) return 0;
    n *= dim;
  }
  *out = n;
  return 1;
}

const char* hc_step_name(int32_t step) {
  switch (step) {
    case WSYNC_STEP_HEALTH: return "HEALTH";
    case WSYNC_STEP_INIT: return "INIT";
    case WSYNC_STEP_PAUSE: return "PAUSE";
    case WSYNC_STEP_BEGIN_UPDATE: return "BEGIN_UPDATE";
    case WSYNC_STEP_UPDATE: return "UPDATE";
    case WSYNC_STEP_FINALIZE: return "FINALIZE";
    case WSYNC_STEP_RESUME: return "RESUME";
    case WSYNC_STEP_DESTROY: return "DESTROY";
    case WSYNC_STEP_PROBE: return "PROBE";
    case WSYNC_STEP_RESET: return "RESET";
    case WSYNC_STEP_ABANDON: return "ABANDON";
    case WSYNC_STEP_CHECK: return "CHECK";
    default: return "unknown";
  }
}

/* ---- options ---- */

static void join_known(char* buf, size_t cap, const char* const* known, size_t n) {
  size_t i, used = 0;
  buf[0] = '\0';
  for (i = 0; i < n; ++i) {
    int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", known[i]);
    if (w < 0 || (size_t)w >= cap - used) return;
    used += (size_t)w;
  }
}

wsync_status_t hc_check_option_keys(const char* adapter, const wsync_adapter_params_t* params,
                                    const char* const* known, size_t n) {
  uint64_t i;
  size_t k;
  char list[512];
  if (params->num_options > 0 && params->options == NULL)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "num_options is %" PRIu64 " but options is NULL",
                    params->num_options);
  for (i = 0; i < params->num_options; ++i) {
    const wsync_option_t* o = &params->options[i];
    int found = 0;
    if (o->key == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "option %" PRIu64 " has a NULL key", i);
    for (k = 0; k < n && !found; ++k) found = strcmp(o->key, known[k]) == 0;
    if (!found) {
      join_known(list, sizeof list, known, n);
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "unknown option 'adapter.%.200s' (known: %s)", o->key,
                      list);
    }
    if (o->value == NULL)
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "option 'adapter.%s' has a NULL value", o->key);
  }
  return WSYNC_OK;
}

const char* hc_option(const wsync_adapter_params_t* params, const char* key) {
  const char* v = NULL;
  uint64_t i;
  for (i = 0; i < params->num_options; ++i)
    if (params->options[i].key != NULL && strcmp(params->options[i].key, key) == 0) v = params->options[i].value;
  return v;
}

wsync_status_t hc_parse_bool(const char* adapter, const char* key, const char* value, int* out) {
  if (value != NULL && strcmp(value, "0") == 0) {
    *out = 0;
    return WSYNC_OK;
  }
  if (value != NULL && strcmp(value, "1") == 0) {
    *out = 1;
    return WSYNC_OK;
  }
  return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "option 'adapter.%s' must be 0 or 1, not '%.100s'", key,
                  value ? value : "(null)");
}

wsync_status_t hc_parse_u64(const char* adapter, const char* key, const char* value, uint64_t min,
                            uint64_t max, uint64_t* out) {
  char* end = NULL;
  unsigned long long v;
  if (value == NULL || value[0] < '0' || value[0] > '9') goto bad;
  errno = 0;
  v = strtoull(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < min || v > max) goto bad;
  *out = (uint64_t)v;
  return WSYNC_OK;
bad:
  return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter,
                  "option 'adapter.%s' must be a decimal integer in [%" PRIu64 ", %" PRIu64 "], not '%.100s'", key,
                  min, max, value ? value : "(null)");
}

wsync_status_t hc_parse_choice(const char* adapter, const char* key, const char* value,
                               const char* const* choices, size_t n, size_t* out) {
  size_t i;
  char list[256];
  for (i = 0; value != NULL && i < n; ++i) {
    if (strcmp(value, choices[i]) == 0) {
      *out = i;
      return WSYNC_OK;
    }
  }
  join_known(list, sizeof list, choices, n);
  return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "option 'adapter.%s' must be one of %s, not '%.100s'", key,
                  list, value ? value : "(null)");
}

/* ---- steps ---- */

wsync_status_t hc_check_step(const char* adapter, const wsync_engine_step_t* step) {
  uint64_t i;
  if (step == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "build_requests: step is NULL");
  if (!WSYNC_HAS_FIELD(step, wsync_engine_step_t, version))  /* the 1.1 step; `properties` is read when there */
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter,
                    "build_requests: step struct_size %u is smaller than a plugin ABI 1.1 step (%u bytes)",
                    (unsigned)step->struct_size, (unsigned)WSYNC_STRUCT_SIZE(wsync_engine_step_t, version));
  if (step->step < WSYNC_STEP_HEALTH || step->step > WSYNC_STEP_CHECK)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "build_requests: unknown step %d", (int)step->step);
  if (step->num_tensors > 0 &&
      (step->names == NULL || step->dtypes == NULL || step->ndims == NULL || step->shapes == NULL))
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "%s step has %" PRIu64 " tensors but a NULL %s array",
                    hc_step_name(step->step), step->num_tensors,
                    step->names == NULL    ? "names"
                    : step->dtypes == NULL ? "dtypes"
                    : step->ndims == NULL  ? "ndims"
                                           : "shapes");
  if (step->step != WSYNC_STEP_UPDATE && step->step != WSYNC_STEP_CHECK) return WSYNC_OK;
  if (step->num_tensors == 0 && step->step == WSYNC_STEP_UPDATE)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "UPDATE step (bucket %" PRIu64 ") has no tensors",
                    step->update_index);
  for (i = 0; i < step->num_tensors; ++i) {
    const char* name = step->names[i];
    int32_t d, nd = step->ndims[i];
    if (name == NULL || name[0] == '\0')
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "UPDATE step: tensor %" PRIu64 " has %s name", i,
                      name == NULL ? "a NULL" : "an empty");
    if (hc_dtype_name(step->dtypes[i]) == NULL)
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "UPDATE step: tensor '%.200s' has invalid dtype %d", name,
                      (int)step->dtypes[i]);
    if (nd < 0 || nd > WSYNC_MAX_NDIM)
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "UPDATE step: tensor '%.200s' has ndim %d (0..%d)", name,
                      (int)nd, WSYNC_MAX_NDIM);
    for (d = 0; d < nd; ++d) {
      if (step->shapes[i * WSYNC_MAX_NDIM + (uint64_t)d] < 0)
        return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter,
                        "UPDATE step: tensor '%.200s' has a negative dimension %d (%" PRId64 ")", name, (int)d,
                        step->shapes[i * WSYNC_MAX_NDIM + (uint64_t)d]);
    }
    {
      uint64_t bytes;
      if (!hc_tensor_bytes(step, i, &bytes))
        return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "UPDATE step: tensor '%.200s' has a size that overflows",
                        name);
    }
  }
  return WSYNC_OK;
}

wsync_status_t hc_check_one_dtype(const char* adapter, const wsync_engine_step_t* step) {
  uint64_t i;
  for (i = 1; i < step->num_tensors; ++i) {
    if (step->dtypes[i] != step->dtypes[0])
      return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter,
                      "UPDATE step: bucket %" PRIu64 " mixes dtypes: tensor '%.200s' is %s but tensor '%.200s' is %s "
                      "(this engine's flattened_bucket needs one dtype per bucket)",
                      step->update_index, step->names[i], hc_dtype_name(step->dtypes[i]), step->names[0],
                      hc_dtype_name(step->dtypes[0]));
  }
  return WSYNC_OK;
}

wsync_status_t hc_check_rendezvous(const char* adapter, const wsync_engine_step_t* step) {
  if (step->master_address == NULL || step->master_address[0] == '\0')
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "%s step (server %u): master_address is %s",
                    hc_step_name(step->step), (unsigned)step->server_index,
                    step->master_address == NULL ? "NULL" : "empty");
  if (step->master_port == 0 || step->master_port > 65535)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "%s step (server %u): master_port %u is not in 1..65535",
                    hc_step_name(step->step), (unsigned)step->server_index, (unsigned)step->master_port);
  return WSYNC_OK;
}

wsync_status_t hc_check_group_name(const char* adapter, const wsync_engine_step_t* step) {
  if (step->group_name == NULL || step->group_name[0] == '\0')
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "%s step (server %u): group_name is %s",
                    hc_step_name(step->step), (unsigned)step->server_index,
                    step->group_name == NULL ? "NULL" : "empty");
  return WSYNC_OK;
}

/* ---- request lists ---- */

void hc_reset(hc_requests_t* list) {
  uint32_t i;
  for (i = 0; i < list->num_owned; ++i) free(list->owned[i]);
  memset(list, 0, sizeof *list);
}

void hc_free(hc_requests_t* list) {
  if (list != NULL) hc_reset(list);
}

static char* copy_string(const char* s) {
  size_t n = strlen(s) + 1;
  char* c = (char*)malloc(n);
  if (c != NULL) memcpy(c, s, n);
  return c;
}

wsync_status_t hc_add(hc_requests_t* list, const char* adapter, int32_t method, const char* path,
                      cJSON* body, uint32_t idempotent, int32_t reply) {
  wsync_http_request_t* r;
  char* p;
  char* b = NULL;
  if (list->num >= HC_MAX_REQUESTS || list->num_owned + 2 > 2 * HC_MAX_REQUESTS) {
    cJSON_Delete(body);
    return hc_error(WSYNC_ERR_INTERNAL, adapter, "more than %d requests in one step", HC_MAX_REQUESTS);
  }
  p = copy_string(path);
  if (body != NULL) {
    b = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
  }
  if (p == NULL || (body != NULL && b == NULL)) {
    free(p);
    if (b != NULL) cJSON_free(b);
    return hc_error(WSYNC_ERR_OUT_OF_MEMORY, adapter, "out of memory building %s", path);
  }
  if (b != NULL) {
    /* cJSON_free may be a custom allocator: keep every owned string malloc'd. */
    char* c = copy_string(b);
    cJSON_free(b);
    if (c == NULL) {
      free(p);
      return hc_error(WSYNC_ERR_OUT_OF_MEMORY, adapter, "out of memory building %s", path);
    }
    b = c;
    list->owned[list->num_owned++] = b;
  }
  list->owned[list->num_owned++] = p;
  r = &list->req[list->num++];
  r->struct_size = (uint32_t)sizeof *r;
  r->method = method;
  r->path = p;
  r->body = b;
  r->idempotent = idempotent;
  r->reply = reply;
  return WSYNC_OK;
}

/* ---- JSON ---- */

wsync_status_t hc_oom(const char* adapter, cJSON* body) {
  cJSON_Delete(body);
  return hc_error(WSYNC_ERR_OUT_OF_MEMORY, adapter, "out of memory building a request");
}

cJSON* hc_int(int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRId64, v);
  return cJSON_CreateRaw(buf);
}

int hc_put(cJSON* obj, const char* key, cJSON* item) {
  if (obj == NULL || item == NULL) {
    cJSON_Delete(item);
    return 0;
  }
  if (!cJSON_AddItemToObject(obj, key, item)) {
    cJSON_Delete(item);
    return 0;
  }
  return 1;
}

static int push(cJSON* arr, cJSON* item) {
  if (item == NULL) return 0;
  if (!cJSON_AddItemToArray(arr, item)) {
    cJSON_Delete(item);
    return 0;
  }
  return 1;
}

cJSON* hc_names(const wsync_engine_step_t* step) {
  uint64_t i;
  cJSON* a = cJSON_CreateArray();
  for (i = 0; a != NULL && i < step->num_tensors; ++i) {
    if (!push(a, cJSON_CreateString(step->names[i]))) {
      cJSON_Delete(a);
      return NULL;
    }
  }
  return a;
}

cJSON* hc_dtype_names(const wsync_engine_step_t* step) {
  uint64_t i;
  cJSON* a = cJSON_CreateArray();
  for (i = 0; a != NULL && i < step->num_tensors; ++i) {
    if (!push(a, cJSON_CreateString(hc_dtype_name(step->dtypes[i])))) {
      cJSON_Delete(a);
      return NULL;
    }
  }
  return a;
}

cJSON* hc_shapes(const wsync_engine_step_t* step) {
  uint64_t i;
  int32_t d;
  cJSON* a = cJSON_CreateArray();
  for (i = 0; a != NULL && i < step->num_tensors; ++i) {
    cJSON* s = cJSON_CreateArray();
    for (d = 0; s != NULL && d < step->ndims[i]; ++d) {
      if (!push(s, hc_int(step->shapes[i * WSYNC_MAX_NDIM + (uint64_t)d]))) {
        cJSON_Delete(s);
        s = NULL;
      }
    }
    if (!push(a, s)) {
      cJSON_Delete(a);
      return NULL;
    }
  }
  return a;
}

void hc_version_string(uint64_t version, char* buf, size_t cap) { snprintf(buf, cap, "%" PRIu64, version); }

wsync_status_t hc_build_requests(const char* adapter, hc_requests_t* list, void* self, hc_build_fn build,
                                 const wsync_engine_step_t* step, const wsync_http_request_t** out,
                                 uint32_t* num_out) {
  wsync_status_t st;
  if (self == NULL || list == NULL || out == NULL || num_out == NULL)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "build_requests: NULL argument");
  hc_reset(list);
  *out = list->req;
  *num_out = 0;
  st = hc_check_step(adapter, step);
  if (st == WSYNC_OK) st = build(self, step);
  if (st != WSYNC_OK) {
    hc_reset(list);
    return st;
  }
  *num_out = list->num;
  return WSYNC_OK;
}

const char* hc_property(const wsync_engine_step_t* step, const char* key) {
  uint64_t i;
  if (step == NULL || !WSYNC_HAS_FIELD(step, wsync_engine_step_t, num_properties) || step->properties == NULL)
    return NULL;
  for (i = 0; i < step->num_properties; ++i)
    if (step->properties[i].key != NULL && strcmp(step->properties[i].key, key) == 0) return step->properties[i].value;
  return NULL;
}

void* hc_adapter_new(size_t size, const char* name, hc_build_fn build) {
  hc_adapter_t* a = (hc_adapter_t*)calloc(1, size);
  if (a == NULL) {
    hc_error(WSYNC_ERR_OUT_OF_MEMORY, name, "out of memory");
    return NULL;
  }
  a->name = name;
  a->build = build;
  return a;
}

void hc_adapter_destroy(void* self) {
  hc_adapter_t* a = (hc_adapter_t*)self;
  if (a == NULL) return;
  hc_free(&a->list);
  for (uint32_t i = 0; a->servers != NULL && i < a->num_servers; ++i) free(a->servers[i].held_words);
  free(a->servers);
  free(a);
}

wsync_status_t hc_adapter_build_requests(void* self, const wsync_engine_step_t* step, const wsync_http_request_t** out,
                                         uint32_t* num_out) {
  hc_adapter_t* a = (hc_adapter_t*)self;
  if (a == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, "?", "build_requests: NULL instance");
  if (step != NULL && step->step == WSYNC_STEP_CHECK && !a->checks_updates && out != NULL && num_out != NULL) {
    hc_reset(&a->list); /* an engine that checks no declared update: nothing to send */
    *out = a->list.req;
    *num_out = 0;
    return WSYNC_OK;
  }
  return hc_build_requests(a->name, &a->list, self, a->build, step, out, num_out);
}

wsync_status_t hc_check_create(const char* adapter, const wsync_adapter_params_t* params, void** out,
                               const char* const* known, size_t n) {
  if (out != NULL) *out = NULL;
  if (params == NULL || out == NULL)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "create: params or out is NULL");
  if (!WSYNC_HAS_FIELD(params, wsync_adapter_params_t, num_options))
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "create: params struct_size %u is too small",
                    params->struct_size);
  return hc_check_option_keys(adapter, params, known, n);
}

void* hc_torch_adapter_new(size_t size, const char* name, hc_build_fn build, const char* group_name,
                           wsync_status_t* st) {
  hc_adapter_t* a = (hc_adapter_t*)hc_adapter_new(size, name, build);
  if (a == NULL) {
    *st = WSYNC_ERR_OUT_OF_MEMORY;
    return NULL;
  }
  if ((*st = hc_needs_torch_group(a, group_name)) != WSYNC_OK) {
    hc_adapter_destroy(a);
    return NULL;
  }
  return a;
}

wsync_status_t hc_add_torch_group_init(hc_requests_t* list, const char* adapter, const wsync_engine_step_t* s) {
  wsync_status_t st;
  cJSON* b;
  int ok;
  if ((st = hc_check_rendezvous(adapter, s)) != WSYNC_OK) return st;
  if ((st = hc_check_group_name(adapter, s)) != WSYNC_OK) return st;
  b = cJSON_CreateObject();
  ok = hc_put(b, "master_address", cJSON_CreateString(s->master_address));
  ok = ok && hc_put(b, "master_port", hc_int(s->master_port));
  ok = ok && hc_put(b, "rank_offset", hc_int(s->rank_offset));
  ok = ok && hc_put(b, "world_size", hc_int(s->world_size));
  ok = ok && hc_put(b, "group_name", cJSON_CreateString(s->group_name));
  ok = ok && hc_put(b, "backend", cJSON_CreateString("nccl"));
  if (!ok) return hc_oom(adapter, b);
  return hc_add(list, adapter, WSYNC_HTTP_POST, "/init_weights_update_group", b, 0, WSYNC_REPLY_SUCCESS_FIELD);
}

wsync_status_t hc_add_destroy_group(hc_requests_t* list, const char* adapter, const wsync_engine_step_t* s) {
  wsync_status_t st;
  cJSON* b;
  if ((st = hc_check_group_name(adapter, s)) != WSYNC_OK) return st;
  b = cJSON_CreateObject();
  if (!hc_put(b, "group_name", cJSON_CreateString(s->group_name))) return hc_oom(adapter, b);
  return hc_add(list, adapter, WSYNC_HTTP_POST, "/destroy_weights_update_group", b, 0, WSYNC_REPLY_SUCCESS_FIELD);
}

wsync_status_t hc_layout_one_dtype(const char* adapter, const void* self, wsync_layout_rule_t* out) {
  if (self == NULL || out == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, adapter, "get_layout: NULL argument");
  out->kind = WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE; /* struct_size stays the core's */
  out->alignment = 1;
  out->allow_split = 0;
  return WSYNC_OK;
}

wsync_status_t hc_adapter_get_needs(void* self, wsync_adapter_needs_t* out) {
  const hc_adapter_t* a = (const hc_adapter_t*)self;
  if (a == NULL || out == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, "?", "get_needs: NULL argument");
  if (!WSYNC_HAS_FIELD(out, wsync_adapter_needs_t, num_transport_properties))
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, a->name, "get_needs: struct_size %u is too small",
                    (unsigned)out->struct_size);
  out->transport_hints = a->hints;
  out->num_transport_hints = a->num_hints;
  out->transport_properties = a->properties;
  out->num_transport_properties = a->num_properties;
  return WSYNC_OK;
}

void hc_needs_hint(hc_adapter_t* a, const char* key, const char* value) {
  if (a->num_hints >= HC_MAX_HINTS) return;
  wsync_option_t o = WSYNC_OPTION(key, value);
  a->hints[a->num_hints++] = o;
}

void hc_needs_property(hc_adapter_t* a, const char* key) {
  if (a->num_properties < HC_MAX_PROPERTIES) a->properties[a->num_properties++] = key;
}

wsync_status_t hc_needs_torch_group(hc_adapter_t* a, const char* group_name) {
  const char* g = group_name != NULL ? group_name : "wsync";
  if (strlen(g) >= sizeof a->group)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, a->name, "group name of %zu bytes is too long", strlen(g));
  strcpy(a->group, g);
  hc_needs_hint(a, WSYNC_HINT_TORCH_GROUP, a->group);
  hc_needs_hint(a, WSYNC_HINT_LAZY_INIT, "1");
  return WSYNC_OK;
}
