/* hc_engine.c — what the HTTP adapters learn of each engine server at PROBE (plugin ABI 1.3):
 * release strings, the supported range, per-server state, and the take_reply entry. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_common.h"

/* Leading decimal digits of *p as an int (at most 6 digits); -1 when there are none. */
static int take_number(const char** p) {
  int n = 0, digits = 0;
  while (isdigit((unsigned char)**p)) {
    if (++digits > 6) return -1;
    n = n * 10 + (**p - '0');
    ++*p;
  }
  return digits > 0 ? n : -1;
}

int hc_parse_version(const char* text, hc_version_t* out) {
  const char* p = text;
  hc_version_t v = {0, 0, 0};
  if (p == NULL || out == NULL) return -1;
  while (*p == ' ') ++p;
  if (*p == 'v' || *p == 'V') ++p;
  if ((v.major = take_number(&p)) < 0 || *p++ != '.' || (v.minor = take_number(&p)) < 0) return -1;
  if (*p == '.' && isdigit((unsigned char)p[1])) {
    ++p;
    if ((v.patch = take_number(&p)) < 0) return -1;
  }
  *out = v; /* anything after (".post1", "rc1", ".dev3+g...") is the same release family */
  return 0;
}

int hc_version_cmp(hc_version_t a, hc_version_t b) {
  if (a.major != b.major) return a.major < b.major ? -1 : 1;
  if (a.minor != b.minor) return a.minor < b.minor ? -1 : 1;
  if (a.patch != b.patch) return a.patch < b.patch ? -1 : 1;
  return 0;
}

void hc_version_text(hc_version_t v, char* buf, size_t cap) {
  if (v.patch == HC_ANY_PATCH)
    snprintf(buf, cap, "%d.%d.x", v.major, v.minor);
  else
    snprintf(buf, cap, "%d.%d.%d", v.major, v.minor, v.patch);
}

int hc_json_count(const cJSON* obj, const char* key, int lo, int hi, int* out) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(obj, key);
  double d;
  if (v == NULL || cJSON_IsNull(v)) return 0;
  if (!cJSON_IsNumber(v)) return -1;
  d = v->valuedouble;
  if (!(d >= (double)lo && d <= (double)hi)) return -1; /* NaN fails too; now d fits an int */
  if (d != (double)(int)d) return -1;                     /* a fraction */
  *out = (int)d;
  return 1;
}

hc_server_t* hc_server(hc_adapter_t* a, uint32_t index) {
  if (index >= 65536u) { /* the core lists at most 4096 servers */
    hc_error(WSYNC_ERR_INVALID_ARGUMENT, a->name, "server index %u is out of range", (unsigned)index);
    return NULL;
  }
  if (index >= a->num_servers) {
    uint32_t n = index + 1;
    hc_server_t* grown = (hc_server_t*)realloc(a->servers, n * sizeof *grown);
    if (grown == NULL) {
      hc_error(WSYNC_ERR_OUT_OF_MEMORY, a->name, "out of memory");
      return NULL;
    }
    memset(grown + a->num_servers, 0, (n - a->num_servers) * sizeof *grown);
    a->servers = grown;
    a->num_servers = n;
  }
  return &a->servers[index];
}

int32_t hc_adapter_held(void* self, uint32_t server_index, const char** words) {
  hc_adapter_t* a = (hc_adapter_t*)self;
  if (words != NULL) *words = NULL;
  if (a == NULL || server_index >= a->num_servers) return WSYNC_HELD_UNKNOWN;
  if (words != NULL) *words = a->servers[server_index].held_words;
  return a->servers[server_index].held;
}

wsync_status_t hc_set_held(hc_adapter_t* a, uint32_t index, int32_t held, const char* words) {
  hc_server_t* srv = hc_server(a, index);
  if (srv == NULL) return WSYNC_ERR_OUT_OF_MEMORY;
  free(srv->held_words);
  srv->held_words = NULL;
  srv->held = held;
  if (words != NULL && (srv->held_words = strdup(words)) == NULL)
    return hc_error(WSYNC_ERR_OUT_OF_MEMORY, a->name, "out of memory");
  return WSYNC_OK;
}

hc_version_t hc_server_version(hc_adapter_t* a, uint32_t index, hc_version_t newest) {
  if (index < a->num_servers && a->servers[index].known) return a->servers[index].version;
  return a->has_forced ? a->forced : newest;
}

wsync_status_t hc_set_forced_version(hc_adapter_t* a, const char* value) {
  if (hc_parse_version(value, &a->forced) != 0)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, a->name, "option 'adapter.engine_version' is '%.100s'; give a release "
                    "such as 0.5.23", value);
  a->has_forced = 1;
  return WSYNC_OK;
}

wsync_status_t hc_check_supported(const hc_adapter_t* a, const char* engine, hc_version_t v, hc_version_t lo,
                                  hc_version_t hi) {
  char got[32], low[32], high[32];
  if (hc_version_cmp(v, lo) >= 0 && hc_version_cmp(v, hi) <= 0) return WSYNC_OK;
  hc_version_text(v, got, sizeof got);
  hc_version_text(lo, low, sizeof low);
  hc_version_text(hi, high, sizeof high);
  return hc_error(WSYNC_ERR_VERSION_MISMATCH, a->name, "%s %s is not supported: this adapter speaks %s %s to %s (see "
                  "docs/ENGINES.md; option adapter.engine_version forces a dialogue)", engine, got, engine, low, high);
}

cJSON* hc_parse_body(const char* body, uint64_t len) {
  const char* end = NULL;
  cJSON* j;
  if (body == NULL || len == 0) return NULL;
  j = cJSON_ParseWithLengthOpts(body, (size_t)len, &end, 0);
  if (j == NULL || end == NULL) return j;
  for (; end < body + len; ++end) /* only whitespace may follow the value */
    if (!isspace((unsigned char)*end)) {
      cJSON_Delete(j);
      return NULL;
    }
  return j;
}

wsync_status_t hc_adapter_take_reply(void* self, const wsync_engine_step_t* step, uint32_t request_index,
                                     int32_t http_status, const char* body, uint64_t body_len) {
  hc_adapter_t* a = (hc_adapter_t*)self;
  if (a == NULL || step == NULL) return hc_error(WSYNC_ERR_INVALID_ARGUMENT, "?", "take_reply: NULL argument");
  if (a->take == NULL)
    return hc_error(WSYNC_ERR_INVALID_ARGUMENT, a->name, "take_reply: this adapter asked to read no reply");
  return a->take(self, step, request_index, http_status, body, body_len);
}
