// The bucket planner: one algorithm, parameterised by the adapter's layout rule, that assigns
// every tensor of a batch (in caller order) a place in a sequence of buckets. It only plans;
// packing bytes and moving them is the pipeline's job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/names.h"  // kMaxTensorNameBytes, the one name check
#include "wsync.h"
#include "wsync_plugin.h"

namespace wsync {

struct LayoutRule {
  int32_t kind = WSYNC_LAYOUT_BYTES_MIXED;
  // Byte alignment of each non-empty entry's offset (power of two). Only BYTES_MIXED pads;
  // the other kinds require 1.
  uint32_t alignment = 1;
  // BYTES_MIXED only: a tensor larger than bucket_bytes may be cut into chunks.
  bool allow_split = false;
  // Target payload size of one bucket (>= 8, so one element of any dtype fits a fresh bucket).
  uint64_t bucket_bytes = 512ull << 20;
};

struct PlanTensor {
  std::string name;
  int32_t dtype = WSYNC_DTYPE_INVALID;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};
  uint64_t nbytes = 0;
};

struct PlanEntry {
  uint32_t tensor_index = 0;   // index into the tensors given to plan_buckets
  uint64_t bucket_offset = 0;  // byte offset of this entry inside the bucket
  uint64_t length = 0;         // bytes of this entry (the whole tensor unless split)
  uint64_t tensor_offset = 0;  // byte offset of this chunk inside the tensor; 0 unless split
};

struct PlanBucket {
  std::vector<PlanEntry> entries;
  uint64_t bytes = 0;                   // payload size = end of the last entry
  int32_t dtype = WSYNC_DTYPE_INVALID;  // the single dtype for ELEMENTS_ONE_DTYPE, else INVALID
};

// Plans `tensors` into `*out` (replaced; left empty on failure). Caller order is preserved:
// concatenating the buckets' entries gives the tensors in order, a split tensor's chunks
// consecutively and covering it exactly once.
//
// Layout kinds:
//  - BYTES_MIXED: entries at offsets aligned to rule.alignment, mixed dtypes. A tensor that fits
//    a bucket but not the space left closes the bucket. A tensor larger than bucket_bytes is, with
//    allow_split, cut into chunks whose lengths are multiples of its dtype size: first the space
//    left in the current bucket (if one element fits), then whole buckets, the tail staying in a
//    bucket shared with the following tensors; without allow_split it gets a bucket whose payload
//    is only that tensor (bytes may then exceed bucket_bytes).
//  - ELEMENTS_ONE_DTYPE (LMDeploy, older SGLang flattened_bucket): no padding, one dtype per
//    bucket (a dtype change, even by an empty tensor, closes the bucket), never split, an
//    oversize tensor gets a bucket of its own.
//  - EXCEED_THEN_FLUSH (vLLM packed): no padding, mixed dtypes, never split; after appending a
//    tensor, the bucket is flushed if its total is > bucket_bytes (the crossing tensor stays);
//    the last partial bucket is kept.
// Empty tensors (nbytes 0) are entries of length 0 at the current offset of the open bucket;
// they open a bucket only when none is open (start of the batch, after a vLLM flush, or on an
// ELEMENTS_ONE_DTYPE dtype change), so a bucket of 0 bytes holds only empty tensors. No tensors:
// no buckets.
//
// Errors: WSYNC_ERR_INVALID_ARGUMENT for a bad rule or a bad tensor (see validate_tensor_shape;
// also duplicate names), the message naming the tensor and its index.
wsync_status_t plan_buckets(const LayoutRule& rule, const std::vector<PlanTensor>& tensors,
                            std::vector<PlanBucket>* out);

// Checks one tensor descriptor: non-empty name of at most kMaxTensorNameBytes, known dtype,
// 0 <= ndim <= WSYNC_MAX_NDIM, dims >= 0, product(shape) * dtype size == nbytes without overflow.
// `shape` may be NULL when ndim == 0. WSYNC_ERR_INVALID_ARGUMENT naming the tensor on failure.
wsync_status_t validate_tensor_shape(const std::string& name, int32_t dtype, int32_t ndim,
                                     const int64_t* shape, uint64_t nbytes);


}  // namespace wsync
