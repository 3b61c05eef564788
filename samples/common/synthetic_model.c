#include "synthetic_model.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static int64_t scaled(int64_t d, double scale) {
  int64_t v = (int64_t)((double)d * scale);
  return v < 1 ? 1 : v;
}

static void add(synth_tensor_t* out, size_t cap, size_t* n, const char* name, int32_t dtype, int32_t ndim,
                int64_t d0, int64_t d1) {
  if (*n < cap) {
    synth_tensor_t* t = &out[*n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    uint64_t elems = 1;
    for (int i = 0; i < ndim; ++i) elems *= (uint64_t)t->shape[i];
    t->nbytes = elems * wsync_dtype_size(dtype);
  }
  ++*n;
}

size_t synth_model_spec(double scale, synth_tensor_t* out, size_t cap) {
  const int layers = 28;
  const int64_t hidden = scaled(1024, scale), inter = scaled(2816, scale), vocab = scaled(151936, scale);
  const int64_t kv = hidden / 4 > 0 ? hidden / 4 : 1;
  size_t n = 0;
  char name[128];
  add(out, cap, &n, "model.embed_tokens.weight", WSYNC_DTYPE_BFLOAT16, 2, vocab, hidden);
  for (int l = 0; l < layers; ++l) {
#define LAYER(fmt, dt, nd, a, b)                                   \
  snprintf(name, sizeof name, "model.layers.%d." fmt, l);           \
  add(out, cap, &n, name, dt, nd, a, b)
    LAYER("input_layernorm.weight", WSYNC_DTYPE_FLOAT32, 1, hidden, 0);
    LAYER("self_attn.q_proj.weight", WSYNC_DTYPE_BFLOAT16, 2, hidden, hidden);
    LAYER("self_attn.q_proj.bias", WSYNC_DTYPE_BFLOAT16, 1, hidden, 0);
    LAYER("self_attn.k_proj.weight", WSYNC_DTYPE_BFLOAT16, 2, kv, hidden);
    LAYER("self_attn.k_proj.bias", WSYNC_DTYPE_BFLOAT16, 1, kv, 0);
    LAYER("self_attn.v_proj.weight", WSYNC_DTYPE_BFLOAT16, 2, kv, hidden);
    LAYER("self_attn.v_proj.bias", WSYNC_DTYPE_BFLOAT16, 1, kv, 0);
    LAYER("self_attn.o_proj.weight", WSYNC_DTYPE_BFLOAT16, 2, hidden, hidden);
    LAYER("post_attention_layernorm.weight", WSYNC_DTYPE_FLOAT32, 1, hidden, 0);
    LAYER("mlp.gate_proj.weight", WSYNC_DTYPE_BFLOAT16, 2, inter, hidden);
    LAYER("mlp.up_proj.weight", WSYNC_DTYPE_BFLOAT16, 2, inter, hidden);
    LAYER("mlp.down_proj.weight", WSYNC_DTYPE_BFLOAT16, 2, hidden, inter);
#undef LAYER
  }
  add(out, cap, &n, "model.norm.weight", WSYNC_DTYPE_FLOAT32, 1, hidden, 0);
  /* An empty tensor: engines must still be told about it. */
  add(out, cap, &n, "model.rotary_emb.unused_cache", WSYNC_DTYPE_FLOAT32, 2, 0, hidden);
  add(out, cap, &n, "lm_head.weight", WSYNC_DTYPE_BFLOAT16, 2, scaled(32000, scale), hidden);
  return n;
}

static uint64_t tensor_seed(const synth_tensor_t* t, uint64_t version) {
  return XXH3_64bits(t->name, strlen(t->name)) ^ (version * 0xD1B54A32D192ED03ull);
}

static void fill_range(uint64_t seed, uint64_t word0, uint64_t nwords, uint64_t* dst) {
  for (uint64_t i = 0; i < nwords; ++i) dst[i] = splitmix64(seed + word0 + i);
}

void synth_fill(const synth_tensor_t* t, uint64_t version, void* dst) {
  uint64_t seed = tensor_seed(t, version);
  uint64_t words = t->nbytes / 8, tail = t->nbytes % 8;
  fill_range(seed, 0, words, (uint64_t*)dst);
  if (tail) {
    uint64_t w = splitmix64(seed + words);
    memcpy((uint8_t*)dst + words * 8, &w, tail);
  }
}

uint64_t synth_expected_checksum(const synth_tensor_t* t, uint64_t version) {
  enum { kChunkWords = 1 << 15 };
  static __thread uint64_t buf[kChunkWords];
  uint64_t seed = tensor_seed(t, version);
  uint64_t words = t->nbytes / 8, tail = t->nbytes % 8;
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  for (uint64_t w = 0; w < words; w += kChunkWords) {
    uint64_t n = words - w < kChunkWords ? words - w : kChunkWords;
    fill_range(seed, w, n, buf);
    XXH3_64bits_update(s, buf, n * 8);
  }
  if (tail) {
    uint64_t w = splitmix64(seed + words);
    XXH3_64bits_update(s, &w, tail);
  }
  uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

uint64_t synth_expected_range_checksum(const synth_tensor_t* t, uint64_t version, uint64_t offset, uint64_t len) {
  enum { kChunkWords = 1 << 15 };
  static __thread uint64_t buf[kChunkWords + 1];
  uint64_t seed = tensor_seed(t, version);
  if (offset > t->nbytes) offset = t->nbytes;
  if (len > t->nbytes - offset) len = t->nbytes - offset;
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  /* Word w holds bytes [8w, 8w + 8) (the last word's tail too, as synth_fill writes it). */
  for (uint64_t at = offset, end = offset + len; at < end;) {
    uint64_t w0 = at / 8, skip = at % 8;
    uint64_t n = (end - at + skip + 7) / 8;
    if (n > kChunkWords) n = kChunkWords;
    fill_range(seed, w0, n, buf);
    uint64_t take = n * 8 - skip;
    if (take > end - at) take = end - at;
    XXH3_64bits_update(s, (const uint8_t*)buf + skip, take);
    at += take;
  }
  uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

uint64_t synth_checksum(const void* data, uint64_t n) { return XXH3_64bits(data, n); }
