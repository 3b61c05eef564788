/* nccl_logic.c — base64, store keys, options and the poll loop of transport 'nccl' (no CUDA). */
#define _POSIX_C_SOURCE 200809L

#include "nccl_logic.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- base64 ------------------------------------------------------------------------------------ */

static const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t nccl_b64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

int64_t nccl_b64_encode(const void* in, size_t n, char* out, size_t cap) {
  const unsigned char* p = (const unsigned char*)in;
  const size_t need = nccl_b64_encoded_len(n);
  size_t i, o = 0;
  if (out == NULL || cap < need + 1 || (p == NULL && n > 0)) return -1;
  for (i = 0; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    out[o++] = kB64[v >> 18 & 63];
    out[o++] = kB64[v >> 12 & 63];
    out[o++] = kB64[v >> 6 & 63];
    out[o++] = kB64[v & 63];
  }
  if (n - i == 1) {
    const uint32_t v = (uint32_t)p[i] << 16;
    out[o++] = kB64[v >> 18 & 63];
    out[o++] = kB64[v >> 12 & 63];
    out[o++] = '=';
    out[o++] = '=';
  } else if (n - i == 2) {
    const uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
    out[o++] = kB64[v >> 18 & 63];
    out[o++] = kB64[v >> 12 & 63];
    out[o++] = kB64[v >> 6 & 63];
    out[o++] = '=';
  }
  out[o] = '\0';
  return (int64_t)o;
}

static int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

int64_t nccl_b64_decode(const char* in, size_t len, void* out, size_t cap) {
  unsigned char* q = (unsigned char*)out;
  size_t i, o = 0, pad = 0, bytes;
  if ((in == NULL && len > 0) || len % 4 != 0) return -1;
  if (len >= 1 && in[len - 1] == '=') pad = 1;
  if (len >= 2 && in[len - 2] == '=') pad = 2;
  bytes = len / 4 * 3 - pad;
  if (bytes > cap || (q == NULL && bytes > 0)) return -1;
  for (i = 0; i < len; i += 4) {
    const int last = i + 4 == len;
    int v[4], k;
    uint32_t w;
    for (k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && last && k >= 4 - (int)pad) {
        v[k] = 0;
        continue;
      }
      if ((v[k] = b64_value(c)) < 0) return -1;
    }
    w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    /* Canonical form only: the bits a padded group leaves over must be zero. */
    if (last && pad == 1 && (w & 0xff) != 0) return -1;
    if (last && pad == 2 && (w & 0xffff) != 0) return -1;
    q[o++] = (unsigned char)(w >> 16);
    if (!(last && pad == 2)) q[o++] = (unsigned char)(w >> 8);
    if (!(last && pad >= 1)) q[o++] = (unsigned char)w;
  }
  return (int64_t)o;
}

/* ---- store keys -------------------------------------------------------------------------------- */

static int fit(int n, size_t cap) { return n < 0 || (size_t)n >= cap ? -1 : n; }

int nccl_wsync_id_key(const char* group, char* out, size_t cap) {
  if (group == NULL || out == NULL || cap == 0) return -1;
  return fit(snprintf(out, cap, "wsync/%s/nccl/unique_id", group), cap);
}

int nccl_torch_id_key(const char* torch_group, char* out, size_t cap) {
  /* PrefixStore(G) <- PrefixStore(G + "/") <- PrefixStore("cuda/") <- key "0"; see the header. */
  if (torch_group == NULL || out == NULL || cap == 0) return -1;
  return fit(snprintf(out, cap, "%s/%s//cuda//0", torch_group, torch_group), cap);
}

/* ---- options ----------------------------------------------------------------------------------- */

static wsync_status_t opt_fail(char* err, size_t cap, const char* fmt, const char* a, const char* b) {
  if (err != NULL && cap > 0) snprintf(err, cap, fmt, a, b);
  return WSYNC_ERR_INVALID_ARGUMENT;
}

/* A decimal integer in [lo, hi], the whole string, no sign other than nothing. */
static int parse_ms(const char* s, int64_t lo, int64_t hi, int64_t* out) {
  char* end = NULL;
  long long v;
  if (s == NULL || *s < '0' || *s > '9') return -1;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int64_t)v;
  return 0;
}

static wsync_status_t parse_flag(const char* k, const char* v, int* out, char* err, size_t err_cap) {
  if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0) {
    *out = v[0] == '1';
    return WSYNC_OK;
  }
  return opt_fail(err, err_cap, "transport nccl: option 'transport.%s' is '%s'; use 0 or 1", k, v);
}

/* One key; INVALID_ARGUMENT (err names it) for a bad value, NOT_FOUND for an unknown key. */
static wsync_status_t parse_one(const char* k, const char* v, nccl_options_t* out, char* err, size_t err_cap) {
  if (strcmp(k, WSYNC_HINT_TORCH_GROUP) == 0) {
    if (v[0] == '\0')
      return opt_fail(err, err_cap, "transport nccl: option 'transport.torch_group' is empty%s%s", "",
                      " (give the torch process group name, e.g. weight_update_group)");
    if (strlen(v) > NCCL_TORCH_GROUP_MAX)
      return opt_fail(err, err_cap, "transport nccl: option 'transport.torch_group' is longer than %s bytes%s", "255", "");
    memcpy(out->torch_group, v, strlen(v) + 1);
    return WSYNC_OK;
  }
  if (strcmp(k, WSYNC_HINT_ALLREDUCE_AFTER_INIT) == 0) return parse_flag(k, v, &out->allreduce_after_init, err, err_cap);
  if (strcmp(k, WSYNC_HINT_LAZY_INIT) == 0) return parse_flag(k, v, &out->lazy_init, err, err_cap);
  if (strcmp(k, "init_timeout_ms") == 0) {
    if (parse_ms(v, 1, NCCL_INIT_TIMEOUT_MAX_MS, &out->init_timeout_ms) == 0) return WSYNC_OK;
    return opt_fail(err, err_cap, "transport nccl: option 'transport.init_timeout_ms' is '%s'; use milliseconds from 1 "
                    "to %s", v, "86400000");
  }
  opt_fail(err, err_cap, "transport nccl: unknown option 'transport.%s' (known: %s)", k, NCCL_KNOWN_OPTIONS);
  return WSYNC_ERR_NOT_FOUND;
}

static wsync_status_t check_combination(const nccl_options_t* out, char* err, size_t err_cap) {
  if (out->lazy_init && out->allreduce_after_init)
    return opt_fail(err, err_cap,
                    "transport nccl: options 'transport.lazy_init=1' and 'transport.allreduce_after_init=1' cannot be "
                    "combined: the all-reduce needs the communicator complete at connect (vLLM, which wants it, "
                    "initialises eagerly)%s%s", "", "");
  return WSYNC_OK;
}

wsync_status_t nccl_parse_options(const wsync_option_t* opts, uint64_t num_opts, nccl_options_t* out, char* err,
                                  size_t err_cap) {
  uint64_t i;
  if (err != NULL && err_cap > 0) err[0] = '\0';
  if (out == NULL) return opt_fail(err, err_cap, "transport nccl: %s%s", "no options output", "");
  memset(out, 0, sizeof *out);
  out->init_timeout_ms = -1;
  if (opts == NULL && num_opts > 0) return opt_fail(err, err_cap, "transport nccl: %s%s", "options is NULL", "");
  for (i = 0; i < num_opts; ++i) {
    const char* k = opts[i].key;
    const char* v = opts[i].value;
    if (k == NULL || v == NULL)
      return opt_fail(err, err_cap, "transport nccl: option %s has a NULL key or value%s", k ? k : "(NULL)", "");
    if (parse_one(k, v, out, err, err_cap) != WSYNC_OK) return WSYNC_ERR_INVALID_ARGUMENT;
  }
  return check_combination(out, err, err_cap);
}

static int has_key(const wsync_option_t* opts, uint64_t n, const char* key) {
  uint64_t i;
  for (i = 0; i < n && opts != NULL; ++i)
    if (opts[i].key != NULL && strcmp(opts[i].key, key) == 0) return 1;
  return 0;
}

wsync_status_t nccl_apply_hints(const wsync_option_t* opts, uint64_t num_opts, const wsync_option_t* hints,
                                uint64_t num_hints, nccl_options_t* out, char* err, size_t err_cap) {
  uint64_t i;
  char ignored[256];
  for (i = 0; i < num_hints && hints != NULL; ++i) {
    const char* k = hints[i].key;
    const char* v = hints[i].value;
    if (k == NULL || v == NULL || has_key(opts, num_opts, k)) continue; /* an option of the caller wins */
    (void)parse_one(k, v, out, ignored, sizeof ignored);              /* hints are not options: no error */
  }
  return check_combination(out, err, err_cap);
}

/* ---- deadline poll loop ------------------------------------------------------------------------ */

int64_t nccl_deadline(int64_t now_ms, int64_t timeout_ms) {
  if (timeout_ms <= 0) return now_ms;
  if (now_ms > 0 && timeout_ms > INT64_MAX - now_ms) return INT64_MAX;
  return now_ms + timeout_ms;
}

nccl_wait_result_t nccl_poll_until(const nccl_poller_t* p, int64_t deadline_ms) {
  uint64_t iteration = 0;
  for (;;) {
    nccl_poll_state_t s;
    if (p->aborted != NULL && p->aborted(p->arg)) return NCCL_WAIT_ABORTED;
    s = p->state(p->arg);
    if (s == NCCL_POLL_DONE) return NCCL_WAIT_DONE;
    if (s == NCCL_POLL_FAILED) return NCCL_WAIT_FAILED;
    if (p->now_ms(p->arg) >= deadline_ms) return NCCL_WAIT_TIMEOUT;
    if (p->pause != NULL) p->pause(p->arg, iteration);
    ++iteration;
  }
}

void nccl_default_pause(void* arg, uint64_t iteration) {
  (void)arg;
  if (iteration < 256) {
    sched_yield();
  } else {
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, NULL);
  }
}

int64_t nccl_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
