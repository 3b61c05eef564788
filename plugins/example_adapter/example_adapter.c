/*
 * example_adapter.c — adapter 'example': a complete wsync adapter plugin for ExampleServe, an
 * imaginary inference engine that is driven over HTTP. It is the template to copy when you write
 * an adapter for your own engine (see README.md beside it).
 *
 * What an HTTP adapter is: pure data. The core asks it, step by step, for the HTTP requests to
 * send to one engine server (build_requests); the core sends them with libcurl, retries the
 * idempotent ones, and judges the replies the way each request says. The adapter does no I/O,
 * never blocks and links nothing but libc: it builds JSON text into buffers it owns.
 *
 * The ExampleServe protocol this file speaks (one row per WSYNC_STEP_*):
 *
 *   HEALTH        GET  /health                       2xx                   idempotent
 *   INIT          POST /weights/init_group   {...}   {"success": true}
 *   PAUSE         POST /generation/pause     (none)  2xx                   idempotent, if pause=1
 *   BEGIN_UPDATE  POST /weights/begin_update {...}   {"success": true}
 *   UPDATE        POST /weights/update_bucket {...}  {"success": true}
 *   FINALIZE      POST /weights/finalize     {...}   {"success": true}
 *                 POST /cache/flush          (none)  2xx                   idempotent, if flush_cache=1
 *   RESUME        POST /generation/resume    (none)  2xx                   idempotent, if pause=1
 *   DESTROY       POST /weights/destroy_group {...}  any JSON              idempotent
 *
 * Options ("adapter.<key>" in the group config; the core hands them over without the prefix):
 *
 *   alignment     byte alignment of each tensor in a bucket; a power of two, 1..4096 (default 256)
 *   flush_cache   "1" (default) or "0": send POST /cache/flush after finalize
 *   pause         "1": pause generation before an update and resume after it; "0" (default):
 *                 PAUSE and RESUME build no request. (The core asks for every step; an empty
 *                 list means "nothing to send". Users set it as the group option adapter.pause.)
 *
 * Anything else is refused with WSYNC_ERR_INVALID_ARGUMENT naming the key, so a typo in a user's
 * config fails at wsync_group_init instead of being silently ignored.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wsync_plugin.h"

#define EX_NAME "example"
#define EX_VERSION "0.1.0"
#define EX_MAX_REQUESTS 2 /* the most requests one step builds (FINALIZE: finalize + flush) */

/* The host table: the core's services (log, set_error, ...). Kept from the entry function, which
 * the core calls at every load (each group that loads the plugin), maybe while another thread of
 * the process logs through it: an atomic pointer (C11), stored with release, read with acquire. */
static _Atomic(const wsync_host_v1_t*) g_host;

static const wsync_host_v1_t* ex_host(void) { return atomic_load_explicit(&g_host, memory_order_acquire); }

/* ---------------------------------------------------------------------------------------------
 * Errors and logging: every failure returns a WSYNC_ERR_* code AND calls host->set_error with a
 * message naming what is at fault; that message is what the user reads in wsync_last_error().
 * ------------------------------------------------------------------------------------------- */

static wsync_status_t ex_fail(wsync_status_t status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

static wsync_status_t ex_fail(wsync_status_t status, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap); /* truncates safely; always NUL-terminated */
  va_end(ap);
  const wsync_host_v1_t* host = ex_host();
  return host != NULL ? host->set_error(status, msg) : status;
}

static void ex_log(int32_t level, const char* message) {
  const wsync_host_v1_t* host = ex_host();
  if (host != NULL && host->log != NULL) host->log(level, message);
}

/* ---------------------------------------------------------------------------------------------
 * A growable text buffer for JSON bodies. No JSON library: the plugin builds with nothing but
 * the installed wsync headers and libc. Every append checks for overflow and allocation failure;
 * after a failure the buffer stays "failed" and the caller reports WSYNC_ERR_OUT_OF_MEMORY.
 * ------------------------------------------------------------------------------------------- */

typedef struct ex_buf {
  char* data;
  size_t len;
  size_t cap;
  int failed;
} ex_buf_t;

static void buf_reset(ex_buf_t* b) {
  b->len = 0;
  b->failed = 0;
  if (b->data != NULL) b->data[0] = '\0';
}

static void buf_free(ex_buf_t* b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

static int buf_reserve(ex_buf_t* b, size_t extra) {
  size_t need, cap;
  char* p;
  if (b->failed) return 0;
  if (extra > (size_t)-1 - b->len - 1) { /* would overflow size_t */
    b->failed = 1;
    return 0;
  }
  need = b->len + extra + 1; /* + NUL */
  if (need <= b->cap) return 1;
  cap = b->cap ? b->cap : 256;
  while (cap < need) cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
  p = (char*)realloc(b->data, cap);
  if (p == NULL) {
    b->failed = 1;
    return 0;
  }
  b->data = p;
  b->cap = cap;
  return 1;
}

static void buf_append(ex_buf_t* b, const char* s, size_t n) {
  if (!buf_reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void buf_raw(ex_buf_t* b, const char* s) { buf_append(b, s, strlen(s)); }

static void buf_u64(ex_buf_t* b, unsigned long long v) {
  char tmp[32];
  int n = snprintf(tmp, sizeof tmp, "%llu", v);
  if (n > 0 && (size_t)n < sizeof tmp) buf_append(b, tmp, (size_t)n);
}

static void buf_i64(ex_buf_t* b, long long v) {
  char tmp[32];
  int n = snprintf(tmp, sizeof tmp, "%lld", v);
  if (n > 0 && (size_t)n < sizeof tmp) buf_append(b, tmp, (size_t)n);
}

/* A JSON string literal: quotes, backslashes and control characters are escaped; other bytes
 * (UTF-8 included) pass through. NULL becomes the JSON literal null. */
static void buf_str(ex_buf_t* b, const char* s) {
  const unsigned char* p;
  if (s == NULL) {
    buf_raw(b, "null");
    return;
  }
  buf_append(b, "\"", 1);
  for (p = (const unsigned char*)s; *p != '\0'; ++p) {
    char esc[7];
    switch (*p) {
      case '"': buf_append(b, "\\\"", 2); break;
      case '\\': buf_append(b, "\\\\", 2); break;
      case '\n': buf_append(b, "\\n", 2); break;
      case '\r': buf_append(b, "\\r", 2); break;
      case '\t': buf_append(b, "\\t", 2); break;
      default:
        if (*p < 0x20) {
          snprintf(esc, sizeof esc, "\\u%04x", (unsigned)*p);
          buf_append(b, esc, 6);
        } else {
          buf_append(b, (const char*)p, 1);
        }
    }
  }
  buf_append(b, "\"", 1);
}

/* The comma before a member or an element, unless it is the first one of its object/array. */
static void buf_sep(ex_buf_t* b) {
  if (b->len > 0 && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') buf_append(b, ",", 1);
}

/* Members of an object: ,"key":<value> */
static void buf_key(ex_buf_t* b, const char* key) {
  buf_sep(b);
  buf_str(b, key);
  buf_append(b, ":", 1);
}
static void field_str(ex_buf_t* b, const char* key, const char* value) {
  buf_key(b, key);
  buf_str(b, value);
}
static void field_u64(ex_buf_t* b, const char* key, unsigned long long value) {
  buf_key(b, key);
  buf_u64(b, value);
}

/* ---------------------------------------------------------------------------------------------
 * The instance
 * ------------------------------------------------------------------------------------------- */

typedef struct ex_adapter {
  uint32_t alignment;  /* option alignment */
  int flush_cache;     /* option flush_cache */
  int pause;           /* option pause */
  /* What build_requests returns lives here until the next build_requests or destroy. */
  wsync_http_request_t reqs[EX_MAX_REQUESTS];
  ex_buf_t bodies[EX_MAX_REQUESTS];
} ex_adapter_t;

/* Element type names as ExampleServe spells them (torch's names, from wsync.h's one table). */
static const char* dtype_name(int32_t dtype) {
  switch (dtype) {
#define EX_DTYPE_CASE(code, name, size) \
  case code: return name;
    WSYNC_DTYPE_TABLE(EX_DTYPE_CASE)
#undef EX_DTYPE_CASE
    default: return NULL;
  }
}

/* Parse a decimal option value in [lo, hi]; the error names the key and the value. */
static wsync_status_t parse_uint_option(const char* key, const char* value, unsigned long lo, unsigned long hi,
                                        unsigned long* out) {
  char* end = NULL;
  unsigned long v;
  if (value == NULL || value[0] < '0' || value[0] > '9')
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': option '%s' needs a number from %lu to %lu, "
                   "not '%s'", key, lo, hi, value ? value : "(null)");
  v = strtoul(value, &end, 10);
  if (*end != '\0' || v < lo || v > hi)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': option '%s' needs a number from %lu to %lu, "
                   "not '%s'", key, lo, hi, value);
  *out = v;
  return WSYNC_OK;
}

/* create: validate every "adapter.*" option and allocate the instance. No I/O. */
static wsync_status_t ex_create(const wsync_adapter_params_t* params, void** out) {
  ex_adapter_t* a;
  unsigned long alignment = 256, flush_cache = 1, pause = 0;
  size_t stride;
  uint64_t i;
  wsync_status_t st;
  if (out != NULL) *out = NULL;
  if (params == NULL || out == NULL)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': create: NULL argument");
  /* Read a field of a versioned struct only when its struct_size covers it. */
  if (params->struct_size < offsetof(wsync_adapter_params_t, num_options) + sizeof params->num_options)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': params struct_size %u is too small",
                   params->struct_size);
  if (params->num_options > 0 && params->options == NULL)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': %llu options but a NULL options array",
                   (unsigned long long)params->num_options);
  /* Arrays of structs are stepped by the struct_size of their first element (ABI rule). */
  stride = params->num_options > 0 ? params->options[0].struct_size : sizeof(wsync_option_t);
  if (params->num_options > 0 && stride < offsetof(wsync_option_t, value) + sizeof(const char*))
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': option struct_size %zu is too small", stride);
  for (i = 0; i < params->num_options; ++i) {
    const wsync_option_t* o = (const wsync_option_t*)(const void*)((const char*)params->options + i * stride);
    const char* key = o->key;
    if (key == NULL)
      return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': option %llu has a NULL key",
                     (unsigned long long)i);
    if (strcmp(key, "alignment") == 0) {
      if ((st = parse_uint_option(key, o->value, 1, 4096, &alignment)) != WSYNC_OK) return st;
      if ((alignment & (alignment - 1)) != 0)
        return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': option 'alignment' must be a power of "
                       "two, not %lu", alignment);
    } else if (strcmp(key, "flush_cache") == 0) {
      if ((st = parse_uint_option(key, o->value, 0, 1, &flush_cache)) != WSYNC_OK) return st;
    } else if (strcmp(key, "pause") == 0) {
      if ((st = parse_uint_option(key, o->value, 0, 1, &pause)) != WSYNC_OK) return st;
    } else {
      return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "' has no option '%.200s' (known: alignment, "
                     "flush_cache, pause)", key);
    }
  }
  a = (ex_adapter_t*)calloc(1, sizeof *a);
  if (a == NULL) return ex_fail(WSYNC_ERR_OUT_OF_MEMORY, "adapter '" EX_NAME "': out of memory");
  a->alignment = (uint32_t)alignment;
  a->flush_cache = (int)flush_cache;
  a->pause = (int)pause;
  {
    char line[160];
    snprintf(line, sizeof line, "adapter '" EX_NAME "': created (alignment %u, flush_cache %d, pause %d)",
             a->alignment, a->flush_cache, a->pause);
    ex_log(WSYNC_LOG_DEBUG, line);
  }
  *out = a;
  return WSYNC_OK;
}

/* get_layout: how the core packs tensors into a bucket. ExampleServe unpacks a bucket by walking
 * the tensor list of the UPDATE request: each tensor starts at the end of the previous one rounded
 * up to `alignment` (sent in the body too), dtypes mixed. It receives whole tensors only.
 *
 * `out` is the caller's struct: its struct_size says how much of it exists (a core built against
 * an older header passes a shorter one), so a field is written only when struct_size covers it. */
static wsync_status_t ex_get_layout(void* self, wsync_layout_rule_t* out) {
  const ex_adapter_t* a = (const ex_adapter_t*)self;
  if (a == NULL || out == NULL)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': get_layout: NULL argument");
  if (out->struct_size < offsetof(wsync_layout_rule_t, allow_split) + sizeof out->allow_split)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': get_layout: rule struct_size %u is too small",
                   out->struct_size);
  out->kind = WSYNC_LAYOUT_BYTES_MIXED;
  out->alignment = a->alignment;
  out->allow_split = 0; /* HTTP engines get whole tensors */
  /* Since 1.1: 0 = no bucket size imposed by the engine; the group's bucket_bytes option decides.
   * (vLLM's packed mode sets its buffer size here: both sides must cut at the same size.) */
  if (out->struct_size >= offsetof(wsync_layout_rule_t, bucket_bytes) + sizeof out->bucket_bytes) out->bucket_bytes = 0;
  return WSYNC_OK;
}

/* destroy: free everything; NULL is fine. */
static void ex_destroy(void* self) {
  ex_adapter_t* a = (ex_adapter_t*)self;
  int i;
  if (a == NULL) return;
  for (i = 0; i < EX_MAX_REQUESTS; ++i) buf_free(&a->bodies[i]);
  free(a);
}

/* ---------------------------------------------------------------------------------------------
 * build_requests: the requests of one step for one server
 * ------------------------------------------------------------------------------------------- */

/* The step fields this adapter reads; a core whose step struct is shorter is refused. */
#define EX_STEP_MIN_SIZE (offsetof(wsync_engine_step_t, version) + sizeof(uint64_t))

/* Fill request slot i; body is the slot's buffer (or NULL for no body). */
static void set_request(ex_adapter_t* a, uint32_t i, int32_t method, const char* path, int with_body,
                        uint32_t idempotent, int32_t reply) {
  wsync_http_request_t* r = &a->reqs[i];
  r->struct_size = (uint32_t)sizeof *r;
  r->method = method;
  r->path = path;
  r->body = with_body ? a->bodies[i].data : NULL;
  r->idempotent = idempotent;
  r->reply = reply;
}

/* The tensor list of an UPDATE step, checked before any of it is read. */
static wsync_status_t check_tensors(const wsync_engine_step_t* s) {
  uint64_t i;
  if (s->num_tensors == 0) return WSYNC_OK;
  if (s->names == NULL || s->dtypes == NULL || s->ndims == NULL || s->shapes == NULL)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': update bucket %llu has %llu tensors but a "
                   "NULL names, dtypes, ndims or shapes array", (unsigned long long)s->update_index,
                   (unsigned long long)s->num_tensors);
  for (i = 0; i < s->num_tensors; ++i) {
    if (s->names[i] == NULL)
      return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': tensor %llu of update bucket %llu has no "
                     "name", (unsigned long long)i, (unsigned long long)s->update_index);
    if (dtype_name(s->dtypes[i]) == NULL)
      return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': tensor '%.200s' has dtype %d, which "
                     "ExampleServe does not know", s->names[i], (int)s->dtypes[i]);
    if (s->ndims[i] < 0 || s->ndims[i] > WSYNC_MAX_NDIM)
      return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': tensor '%.200s' has ndim %d (0..%d)",
                     s->names[i], (int)s->ndims[i], WSYNC_MAX_NDIM);
  }
  return WSYNC_OK;
}

/* Since plugin ABI 1.2: the value of a transport property the core passes in the step (only those
 * asked for in ex_get_needs, and only when the transport has them), or NULL. `properties` is read
 * only when the step's struct_size covers it: an older core passes a shorter step. */
static const char* ex_property(const wsync_engine_step_t* s, const char* key) {
  uint64_t i;
  if (!WSYNC_HAS_FIELD(s, wsync_engine_step_t, num_properties) || s->properties == NULL) return NULL;
  for (i = 0; i < s->num_properties; ++i)
    if (s->properties[i].key != NULL && strcmp(s->properties[i].key, key) == 0) return s->properties[i].value;
  return NULL;
}

/* Since plugin ABI 1.2: what the engine needs from the transport. This imaginary engine takes the
 * transport's bootstrap id in its init request (when the transport has one), and asks for no
 * hints. The core forwards both without reading them. */
static const char* const kExProperties[] = {WSYNC_PROPERTY_NCCL_UNIQUE_ID};

static wsync_status_t ex_get_needs(void* self, wsync_adapter_needs_t* out) {
  if (self == NULL || out == NULL) return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': get_needs: NULL");
  if (!WSYNC_HAS_FIELD(out, wsync_adapter_needs_t, num_transport_properties))
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': get_needs: struct_size %u is too small",
                   out->struct_size);
  out->transport_hints = NULL;
  out->num_transport_hints = 0;
  out->transport_properties = kExProperties;
  out->num_transport_properties = 1;
  return WSYNC_OK;
}

/* INIT's body: where to rendezvous, which ranks the server's GPUs take, and the transport's
 * bootstrap id when it has one (the property asked for in ex_get_needs; else null). */
static wsync_status_t init_body(ex_buf_t* b, const wsync_engine_step_t* s) {
  if (s->master_address == NULL || s->group_name == NULL)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': the init step needs master_address and "
                   "group_name");
  buf_raw(b, "{");
  field_str(b, "group_name", s->group_name);
  field_str(b, "master_address", s->master_address);
  field_u64(b, "master_port", s->master_port);
  field_u64(b, "rank_offset", s->rank_offset);
  field_u64(b, "world_size", s->world_size);
  field_u64(b, "server_gpus", s->server_gpus);
  field_str(b, "nccl_unique_id_b64", ex_property(s, WSYNC_PROPERTY_NCCL_UNIQUE_ID));
  buf_raw(b, "}");
  return WSYNC_OK;
}

/* UPDATE's body: the bucket's tensors (name, dtype, shape) in bucket order. */
static wsync_status_t update_body(ex_buf_t* b, const wsync_engine_step_t* s, uint32_t alignment) {
  uint64_t i;
  int d;
  wsync_status_t st = check_tensors(s);
  if (st != WSYNC_OK) return st;
  buf_raw(b, "{");
  field_str(b, "group_name", s->group_name);
  field_u64(b, "update_index", s->update_index);
  field_u64(b, "bucket_bytes", s->bucket_bytes);
  field_u64(b, "alignment", alignment);
  buf_key(b, "tensors");
  buf_raw(b, "[");
  for (i = 0; i < s->num_tensors; ++i) {
    buf_sep(b);
    buf_raw(b, "{");
    field_str(b, "name", s->names[i]);
    field_str(b, "dtype", dtype_name(s->dtypes[i]));
    buf_key(b, "shape");
    buf_raw(b, "[");
    for (d = 0; d < s->ndims[i]; ++d) {
      buf_sep(b);
      buf_i64(b, (long long)s->shapes[i * WSYNC_MAX_NDIM + (uint64_t)d]);
    }
    buf_raw(b, "]}");
  }
  buf_raw(b, "]}");
  return WSYNC_OK;
}

static wsync_status_t ex_build_requests(void* self, const wsync_engine_step_t* s, const wsync_http_request_t** out,
                                        uint32_t* num_out) {
  ex_adapter_t* a = (ex_adapter_t*)self;
  ex_buf_t* b;
  uint32_t n = 0;
  int d;
  wsync_status_t st;
  if (out != NULL) *out = NULL;
  if (num_out != NULL) *num_out = 0;
  if (a == NULL || s == NULL || out == NULL || num_out == NULL)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': build_requests: NULL argument");
  if (s->struct_size < EX_STEP_MIN_SIZE)
    return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "': step struct_size %u is smaller than the %zu "
                   "bytes this adapter reads", s->struct_size, (size_t)EX_STEP_MIN_SIZE);
  for (d = 0; d < EX_MAX_REQUESTS; ++d) buf_reset(&a->bodies[d]);
  b = &a->bodies[0];

  switch (s->step) {
    case WSYNC_STEP_HEALTH:
      /* Is the server up? Any 2xx. Safe to retry. */
      set_request(a, n++, WSYNC_HTTP_GET, "/health", 0, 1, WSYNC_REPLY_STATUS);
      break;

    case WSYNC_STEP_INIT:
      /* Join the weight-update group. The core posts this while the data plane connects: the
       * engine's GPUs join as ranks rank_offset .. rank_offset + server_gpus - 1 of world_size,
       * rendezvous at master_address:master_port (the sender's store). The transport's bootstrap
       * id comes along when the transport has one (the property asked for in ex_get_needs; the
       * nccl transport does, else null). Not idempotent: joining twice is an error on most
       * engines. */
      if ((st = init_body(b, s)) != WSYNC_OK) return st;
      set_request(a, n++, WSYNC_HTTP_POST, "/weights/init_group", 1, 0, WSYNC_REPLY_SUCCESS_FIELD);
      break;

    case WSYNC_STEP_PAUSE:
      /* Before the first bucket of an update: stop scheduling new generations and let running
       * ones finish. Only with option pause=1; else nothing to send. No body; pausing twice is
       * harmless, so retries are allowed. */
      if (a->pause) set_request(a, n++, WSYNC_HTTP_POST, "/generation/pause", 0, 1, WSYNC_REPLY_STATUS);
      break;

    case WSYNC_STEP_BEGIN_UPDATE:
      /* Before the first bucket of an update: the engine prepares to receive. */
      buf_raw(b, "{");
      field_str(b, "group_name", s->group_name);
      buf_raw(b, "}");
      set_request(a, n++, WSYNC_HTTP_POST, "/weights/begin_update", 1, 0, WSYNC_REPLY_SUCCESS_FIELD);
      break;

    case WSYNC_STEP_UPDATE:
      /* One bucket: its tensors in bucket order. The core posts it before the bytes move and
       * collects the reply after, so the engine receives the bucket (from the transport) inside
       * this request and answers once the weights are loaded. Never retried: a bucket is
       * consumed once. */
      if ((st = update_body(b, s, a->alignment)) != WSYNC_OK) return st;
      set_request(a, n++, WSYNC_HTTP_POST, "/weights/update_bucket", 1, 0, WSYNC_REPLY_SUCCESS_FIELD);
      break;

    case WSYNC_STEP_FINALIZE:
      /* After the last bucket: commit the new weights as `version`, then (option flush_cache)
       * drop the prefix cache, which was computed with the old weights. Two requests, sent in
       * this order; the second only after the first succeeded. */
      buf_raw(b, "{");
      field_str(b, "group_name", s->group_name);
      field_u64(b, "version", s->version);
      buf_raw(b, "}");
      set_request(a, n++, WSYNC_HTTP_POST, "/weights/finalize", 1, 0, WSYNC_REPLY_SUCCESS_FIELD);
      if (a->flush_cache) set_request(a, n++, WSYNC_HTTP_POST, "/cache/flush", 0, 1, WSYNC_REPLY_STATUS);
      break;

    case WSYNC_STEP_RESUME:
      /* After the commit: serve again. Only with option pause=1. */
      if (a->pause) set_request(a, n++, WSYNC_HTTP_POST, "/generation/resume", 0, 1, WSYNC_REPLY_STATUS);
      break;

    case WSYNC_STEP_DESTROY:
      /* Leave the weight-update group (best effort at group destroy). Leaving twice is
       * harmless; any JSON reply is fine. */
      buf_raw(b, "{");
      field_str(b, "group_name", s->group_name);
      buf_raw(b, "}");
      set_request(a, n++, WSYNC_HTTP_POST, "/weights/destroy_group", 1, 1, WSYNC_REPLY_JSON);
      break;

    default:
      /* A step from a newer core: say so instead of guessing. */
      return ex_fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '" EX_NAME "' " EX_VERSION " cannot express step %d",
                     (int)s->step);
  }

  for (d = 0; d < EX_MAX_REQUESTS; ++d)
    if (a->bodies[d].failed)
      return ex_fail(WSYNC_ERR_OUT_OF_MEMORY, "adapter '" EX_NAME "': out of memory building step %d", (int)s->step);
  *out = a->reqs;
  *num_out = n;
  return WSYNC_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The table and the entry function: the one symbol the plugin exports.
 * ------------------------------------------------------------------------------------------- */

static const wsync_adapter_v1_t kExampleAdapter = {
    (uint32_t)sizeof(wsync_adapter_v1_t), /* struct_size: the table as this header knows it */
    WSYNC_PLUGIN_ABI_VERSION,             /* abi_version */
    EX_NAME,                              /* name: must match libwsync_adapter_<name>.so */
    EX_VERSION,                           /* version of this plugin */
    WSYNC_ADAPTER_CAP_HTTP,               /* caps: the core drives the engine over HTTP */
    ex_create,
    ex_get_layout,
    ex_destroy,
    ex_build_requests, /* since plugin ABI 1.1; required with CAP_HTTP */
    ex_get_needs,      /* since plugin ABI 1.2; optional */
    NULL,              /* runtime_info: nothing to report (since 1.2; optional) */
    NULL,              /* take_reply: reads no reply, so the core sends it no 1.3 step (optional) */
    NULL,              /* held: says nothing of what a server holds after a failure, so the core
                          sends it no CHECK step (since 1.7; optional) */
};

/* The only exported symbol (everything else is hidden by -fvisibility=hidden). */
__attribute__((visibility("default"))) const wsync_adapter_v1_t* wsync_adapter_entry_v1(const wsync_host_v1_t* host);

const wsync_adapter_v1_t* wsync_adapter_entry_v1(const wsync_host_v1_t* host) {
  /* Accept any host table of plugin ABI 1 at least as large as what this plugin calls (log,
   * set_error); a larger, newer one is fine. Refusals say why through set_error. */
  WSYNC_PLUGIN_CHECK_HOST(host, set_error, "adapter '" EX_NAME "'");
  atomic_store_explicit(&g_host, host, memory_order_release);
  return &kExampleAdapter;
}
