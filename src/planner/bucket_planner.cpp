#include "planner/bucket_planner.h"

#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>

#include "common/error.h"
#include "common/shape_bytes.h"

namespace wsync {
namespace {

// "tensor #3 'w.q'" or "tensor 'w.q'": every message names the tensor; an over-long name is cut
// so the message stays readable.
std::string tensor_label(const std::string& name, int64_t index) {
  std::string shown = name.size() > 80 ? name.substr(0, 80) + "..." : name;
  std::string label = "tensor ";
  if (index >= 0) label += "#" + std::to_string(index) + " ";
  label += "'" + shown + "'";
  return label;
}

// The checks of one descriptor. The label naming the tensor is built only when one fails: this runs
// for every tensor of every batch.
wsync_status_t validate_one(const std::string& name, int32_t dtype, int32_t ndim, const int64_t* shape,
                            uint64_t nbytes, int64_t index) {
  const uint32_t esize = wsync_dtype_size(dtype);
  uint64_t expect = 0;
  const bool shape_ok = esize != 0 && ndim >= 0 && ndim <= WSYNC_MAX_NDIM && (ndim == 0 || shape != nullptr) &&
                        shape_nbytes(dtype, ndim, shape, &expect);
  const std::string name_problem = tensor_name_problem(name.data(), name.size());
  if (name_problem.empty() && shape_ok && expect == nbytes) return WSYNC_OK;
  const std::string who = tensor_label(printable_name(name.data(), name.size()), index);
  if (name.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: the name is empty (names are 1..%zu bytes)", who.c_str(),
                kMaxTensorNameBytes);
  if (name.size() > kMaxTensorNameBytes)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: the name is %zu bytes, longer than the %zu allowed",
                who.c_str(), name.size(), kMaxTensorNameBytes);
  if (!name_problem.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: %s (names are UTF-8 without NUL or control characters)", who.c_str(),
                name_problem.c_str());
  if (esize == 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d (WSYNC_DTYPE_* expected)", who.c_str(),
                static_cast<int>(dtype));
  if (ndim < 0 || ndim > WSYNC_MAX_NDIM)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: ndim %d is outside 0..%d", who.c_str(), static_cast<int>(ndim),
                WSYNC_MAX_NDIM);
  if (ndim > 0 && shape == nullptr)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: shape is NULL with ndim %d", who.c_str(), static_cast<int>(ndim));
  for (int32_t d = 0; d < ndim; ++d) {
    if (shape[d] < 0)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: dim %d is negative (%lld)", who.c_str(), static_cast<int>(d),
                  static_cast<long long>(shape[d]));
  }
  if (!shape_ok)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: the shape's byte size overflows 64 bits", who.c_str());
  return fail(WSYNC_ERR_INVALID_ARGUMENT,
              "%s: nbytes is %llu but the shape and dtype %s describe %llu bytes", who.c_str(),
              static_cast<unsigned long long>(nbytes), wsync_dtype_name(dtype),
              static_cast<unsigned long long>(expect));
}

const char* kind_name(int32_t kind) {
  switch (kind) {
    case WSYNC_LAYOUT_BYTES_MIXED: return "BYTES_MIXED";
    case WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE: return "ELEMENTS_ONE_DTYPE";
    case WSYNC_LAYOUT_EXCEED_THEN_FLUSH: return "EXCEED_THEN_FLUSH";
    default: return "unknown";
  }
}

wsync_status_t validate_rule(const LayoutRule& rule) {
  if (rule.kind != WSYNC_LAYOUT_BYTES_MIXED && rule.kind != WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE &&
      rule.kind != WSYNC_LAYOUT_EXCEED_THEN_FLUSH)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "layout rule: unknown kind %d (WSYNC_LAYOUT_* expected)",
                static_cast<int>(rule.kind));
  if (rule.alignment == 0 || (rule.alignment & (rule.alignment - 1)) != 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "layout rule: alignment %u is not a power of two", rule.alignment);
  if (rule.kind != WSYNC_LAYOUT_BYTES_MIXED && rule.alignment != 1)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "layout rule: kind %s has no padding, so alignment must be 1, not %u",
                kind_name(rule.kind), rule.alignment);
  if (rule.kind != WSYNC_LAYOUT_BYTES_MIXED && rule.allow_split)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "layout rule: kind %s never splits tensors; allow_split must be 0",
                kind_name(rule.kind));
  if (rule.bucket_bytes < 8)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "layout rule: bucket_bytes %llu is below the minimum of 8",
                static_cast<unsigned long long>(rule.bucket_bytes));
  return WSYNC_OK;
}

// The planner's state: the buckets so far and whether the last one still takes entries.
class Planner {
 public:
  Planner(const LayoutRule& rule, std::vector<PlanBucket>* out) : rule_(rule), out_(out) {}

  wsync_status_t add(uint32_t index, const PlanTensor& t) {
    if (t.nbytes == 0) return add_empty(index, t);
    switch (rule_.kind) {
      case WSYNC_LAYOUT_EXCEED_THEN_FLUSH: return add_exceed_then_flush(index, t);
      case WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE: return add_one_dtype(index, t);
      default:
        if (t.nbytes > rule_.bucket_bytes && rule_.allow_split) return add_split(index, t);
        return add_aligned(index, t);
    }
  }

 private:
  // Entries of length 0 need no alignment: they sit at the open bucket's current end so the
  // receiver learns about them with that bucket.
  wsync_status_t add_empty(uint32_t index, const PlanTensor& t) {
    if (open_ && rule_.kind == WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE && out_->back().dtype != t.dtype) close();
    if (!open_) open_bucket(t.dtype);
    place(index, cur_, 0, 0);
    return WSYNC_OK;
  }

  // vLLM packed (vllm/distributed/weight_transfer/packed_tensor.py, pack_tensors and its
  // broadcast consumer): append, then `if total_bytes > buffer_size_bytes: break`.
  // The comparison is strict, the crossing tensor stays in the chunk, and a last partial chunk
  // (any chunk with at least one tensor, even of 0 bytes) is broadcast when the iterator ends.
  wsync_status_t add_exceed_then_flush(uint32_t index, const PlanTensor& t) {
    if (!open_) open_bucket(t.dtype);
    if (t.nbytes > UINT64_MAX - cur_) return overflow(index, t);
    place(index, cur_, t.nbytes, 0);
    if (cur_ > rule_.bucket_bytes) close();
    return WSYNC_OK;
  }

  wsync_status_t add_one_dtype(uint32_t index, const PlanTensor& t) {
    if (open_ && out_->back().dtype != t.dtype) close();
    if (open_ && out_->back().bytes > 0 && !fits(cur_, t.nbytes)) close();
    if (!open_) open_bucket(t.dtype);
    if (t.nbytes > UINT64_MAX - cur_) return overflow(index, t);
    place(index, cur_, t.nbytes, 0);
    return WSYNC_OK;
  }

  // BYTES_MIXED without a split: a tensor larger than a bucket lands at offset 0 of a fresh
  // bucket (or one holding only empty tensors) and the next non-empty tensor closes it.
  wsync_status_t add_aligned(uint32_t index, const PlanTensor& t) {
    uint64_t off = 0;
    if (open_) {
      if (!align_up(cur_, &off)) return overflow(index, t);
      if (out_->back().bytes > 0 && !fits(off, t.nbytes)) {
        close();
        off = 0;
      }
    }
    if (!open_) open_bucket(t.dtype);
    if (t.nbytes > UINT64_MAX - off) return overflow(index, t);
    place(index, off, t.nbytes, 0);
    return WSYNC_OK;
  }

  // BYTES_MIXED, allow_split, nbytes > bucket_bytes: whole elements into the space left, then
  // whole buckets; the tail stays open for the following tensors.
  wsync_status_t add_split(uint32_t index, const PlanTensor& t) {
    const uint64_t esize = wsync_dtype_size(t.dtype);
    uint64_t remaining = t.nbytes;
    uint64_t tensor_offset = 0;
    while (remaining > 0) {
      if (!open_) open_bucket(t.dtype);
      uint64_t off = 0;
      if (!align_up(cur_, &off)) return overflow(index, t);
      const uint64_t space = off <= rule_.bucket_bytes ? rule_.bucket_bytes - off : 0;
      const uint64_t whole = space / esize * esize;
      const uint64_t take = remaining < whole ? remaining : whole;
      if (take == 0) {  // not one element fits here; a fresh bucket always takes one (>= 8 bytes)
        close();
        continue;
      }
      place(index, off, take, tensor_offset);
      tensor_offset += take;
      remaining -= take;
      if (remaining > 0) close();
    }
    return WSYNC_OK;
  }

  bool fits(uint64_t off, uint64_t n) const { return off <= rule_.bucket_bytes && n <= rule_.bucket_bytes - off; }

  bool align_up(uint64_t v, uint64_t* out) const {
    const uint64_t mask = rule_.alignment - 1;
    if (v > UINT64_MAX - mask) return false;
    *out = (v + mask) & ~mask;
    return true;
  }

  wsync_status_t overflow(uint32_t index, const PlanTensor& t) const {
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: bucket offsets overflow 64 bits (%llu bytes)",
                tensor_label(t.name, index).c_str(), static_cast<unsigned long long>(t.nbytes));
  }

  void open_bucket(int32_t dtype) {
    out_->emplace_back();
    out_->back().dtype = rule_.kind == WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE ? dtype : WSYNC_DTYPE_INVALID;
    open_ = true;
    cur_ = 0;
  }

  void close() { open_ = false; }

  void place(uint32_t index, uint64_t off, uint64_t len, uint64_t tensor_offset) {
    PlanBucket& b = out_->back();
    b.entries.push_back(PlanEntry{index, off, len, tensor_offset});
    cur_ = off + len;
    b.bytes = cur_;
  }

  const LayoutRule& rule_;
  std::vector<PlanBucket>* out_;
  bool open_ = false;
  uint64_t cur_ = 0;  // end of the open bucket's last entry
};

}  // namespace

wsync_status_t validate_tensor_shape(const std::string& name, int32_t dtype, int32_t ndim, const int64_t* shape,
                                     uint64_t nbytes) {
  return validate_one(name, dtype, ndim, shape, nbytes, -1);
}

wsync_status_t plan_buckets(const LayoutRule& rule, const std::vector<PlanTensor>& tensors,
                            std::vector<PlanBucket>* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "plan_buckets: out is NULL");
  out->clear();
  wsync_status_t st = validate_rule(rule);
  if (st != WSYNC_OK) return st;
  if (tensors.size() > UINT32_MAX)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "plan_buckets: %zu tensors in one batch, more than %u",
                tensors.size(), UINT32_MAX);

  std::unordered_set<std::string> names;
  names.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PlanTensor& t = tensors[i];
    st = validate_one(t.name, t.dtype, t.ndim, t.shape, t.nbytes, static_cast<int64_t>(i));
    if (st != WSYNC_OK) return st;
    if (!names.insert(t.name).second)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: the name appears twice in one batch",
                  tensor_label(t.name, static_cast<int64_t>(i)).c_str());
  }

  std::vector<PlanBucket> plan;
  Planner planner(rule, &plan);
  for (size_t i = 0; i < tensors.size(); ++i) {
    st = planner.add(static_cast<uint32_t>(i), tensors[i]);
    if (st != WSYNC_OK) return st;
  }
  *out = std::move(plan);
  return WSYNC_OK;
}


}  // namespace wsync
