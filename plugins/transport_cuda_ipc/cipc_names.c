/* cipc_names.c — names and small parsers of transport 'cuda_ipc' (no CUDA): store keys, the
 * "GPU-<uuid>" spelling nvidia-smi and CUDA_VISIBLE_DEVICES use, strict decimal numbers (the
 * done/<rank> values) and the transport.* options. */
#include <stdio.h>
#include <string.h>

#include "cipc_logic.h"

int cipc_key(char* buf, size_t cap, const char* group, const char* leaf, int64_t rank) {
  int n;
  if (buf == NULL || cap == 0) return -1;
  if (rank >= 0)
    n = snprintf(buf, cap, "wsync/%s/" CIPC_NAME "/%s/%lld", group ? group : "", leaf, (long long)rank);
  else
    n = snprintf(buf, cap, "wsync/%s/" CIPC_NAME "/%s", group ? group : "", leaf);
  return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

void cipc_uuid_format(const uint8_t uuid[CIPC_UUID_BYTES], char out[CIPC_UUID_STR_LEN + 1]) {
  static const char hex[] = "0123456789abcdef";
  size_t i, o = 0;
  memcpy(out, "GPU-", 4);
  o = 4;
  for (i = 0; i < CIPC_UUID_BYTES; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-'; /* 8-4-4-4-12 */
    out[o++] = hex[uuid[i] >> 4];
    out[o++] = hex[uuid[i] & 15];
  }
  out[o] = '\0';
}

int cipc_uuid_find(const uint8_t want[CIPC_UUID_BYTES], const uint8_t (*list)[CIPC_UUID_BYTES], int n) {
  int i;
  for (i = 0; i < n; ++i)
    if (memcmp(want, list[i], CIPC_UUID_BYTES) == 0) return i;
  return -1;
}

int cipc_parse_u64(const char* s, size_t len, uint64_t* out) {
  uint64_t v = 0;
  size_t i;
  if (s == NULL || len == 0 || len > 20) return -1;
  for (i = 0; i < len; ++i) {
    const unsigned d = (unsigned)(unsigned char)s[i] - '0';
    if (d > 9) return -1;
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

void cipc_session_hex(uint64_t session, char out[17]) {
  snprintf(out, 17, "%016llx", (unsigned long long)session);
}

wsync_status_t cipc_parse_options(const wsync_option_t* options, uint64_t num_options, cipc_options_t* out,
                                  char* err, size_t errcap) {
  uint64_t i;
  out->poll_us = 100;
  if (options == NULL && num_options > 0) {
    snprintf(err, errcap, "options is NULL but num_options is %llu", (unsigned long long)num_options);
    return WSYNC_ERR_INVALID_ARGUMENT;
  }
  for (i = 0; i < num_options; ++i) {
    const char* key = options[i].key;
    const char* value = options[i].value;
    if (key == NULL) {
      snprintf(err, errcap, "option %llu has no key", (unsigned long long)i);
      return WSYNC_ERR_INVALID_ARGUMENT;
    }
    if (strcmp(key, "poll_us") == 0) {
      uint64_t v = 0;
      if (value == NULL || cipc_parse_u64(value, strlen(value), &v) != 0 || v > 1000000) {
        snprintf(err, errcap, "option 'transport.poll_us' = '%s' is not a whole number of microseconds in 0..1000000",
                 value ? value : "(null)");
        return WSYNC_ERR_INVALID_ARGUMENT;
      }
      out->poll_us = (uint32_t)v;
      continue;
    }
    snprintf(err, errcap, "unknown option 'transport.%s' (transport 'cuda_ipc' knows: poll_us)", key);
    return WSYNC_ERR_INVALID_ARGUMENT;
  }
  return WSYNC_OK;
}
