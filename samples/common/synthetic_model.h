/* A synthetic LLM-shaped model for the samples: Qwen2-like names and shapes (28 layers, hidden
 * 1024), bf16 weights and fp32 norms, a 297 MiB embedding (larger than the demo's 256 MiB
 * bucket) and one empty tensor; about 1 GiB in all. Contents are a pure function of
 * (tensor, version), so an engine can check every byte it received without a side channel. */
#ifndef WSYNC_SAMPLES_SYNTHETIC_MODEL_H_
#define WSYNC_SAMPLES_SYNTHETIC_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#include "wsync.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct synth_tensor {
  char name[128];
  int32_t dtype;
  int32_t ndim;
  int64_t shape[WSYNC_MAX_NDIM];
  uint64_t nbytes;
} synth_tensor_t;

/* Fill `out` (capacity `cap`) with the model's tensors; returns how many there are. A scale
 * below 1.0 shrinks every dimension proportionally (for tests); 1.0 is the demo model. */
size_t synth_model_spec(double scale, synth_tensor_t* out, size_t cap);

/* Write the bytes of `t` at `version` into dst (t->nbytes bytes). */
void synth_fill(const synth_tensor_t* t, uint64_t version, void* dst);

/* XXH3-64 of the bytes synth_fill would write, computed in small pieces without a full copy. */
uint64_t synth_expected_checksum(const synth_tensor_t* t, uint64_t version);

/* XXH3-64 of bytes [offset, offset + len) of what synth_fill would write (a TP shard's rows). */
uint64_t synth_expected_range_checksum(const synth_tensor_t* t, uint64_t version, uint64_t offset, uint64_t len);

/* XXH3-64 of a buffer. */
uint64_t synth_checksum(const void* data, uint64_t n);

#ifdef __cplusplus
}
#endif

#endif
