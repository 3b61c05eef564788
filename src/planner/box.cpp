// box.cpp — boxes of a tensor and their byte runs (see box.h).
#include "planner/box.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "common/error.h"

namespace wsync {
namespace {

// A box may cut a buffer into at most this many runs (a column slice of a tall matrix makes one
// run per row): beyond it the list alone would take gigabytes, so a peer's or a user's box that
// asks for it is refused rather than trusted.
constexpr uint64_t kMaxBoxRuns = 1ull << 24;

bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// A box's ndim may come from the wire: loops never go past the arrays.
bool dims_ok(const Box& b) { return b.ndim >= 0 && b.ndim <= WSYNC_MAX_NDIM; }

}  // namespace

Box full_box(int32_t ndim, const int64_t* shape) {
  Box b;
  b.ndim = ndim < 0 ? 0 : (ndim > WSYNC_MAX_NDIM ? WSYNC_MAX_NDIM : ndim);
  for (int32_t i = 0; i < b.ndim; ++i) b.extent[i] = shape[i];
  return b;
}

wsync_status_t chunk_box(int32_t ndim, const int64_t* shape, int32_t dim, uint32_t chunks, uint32_t index,
                         Box* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "chunk_box: out is NULL");
  if (ndim < 1 || ndim > WSYNC_MAX_NDIM)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "a chunk needs a tensor of 1..%d dimensions, not %d", WSYNC_MAX_NDIM,
                ndim);
  if (dim < 0 || dim >= ndim)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "chunk dimension %d is not one of the tensor's %d", dim, ndim);
  if (chunks == 0) return fail(WSYNC_ERR_INVALID_ARGUMENT, "a tensor cannot be cut into 0 chunks");
  if (index >= chunks)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "chunk %u of %u does not exist (chunks count from 0)", index, chunks);
  for (int32_t i = 0; i < ndim; ++i)
    if (shape[i] < 0) return fail(WSYNC_ERR_INVALID_ARGUMENT, "dimension %d of the shape is negative (%lld)", i,
                                  static_cast<long long>(shape[i]));
  Box b = full_box(ndim, shape);
  const int64_t n = shape[dim];
  const int64_t size = n / chunks + (n % chunks != 0 ? 1 : 0);  // ceil, as torch.chunk
  int64_t begin = 0;  // size * index may not fit when chunks is near 2^32: past n, the chunk is empty
  if (__builtin_mul_overflow(size, static_cast<int64_t>(index), &begin) || begin > n) begin = n;
  b.offset[dim] = begin;
  b.extent[dim] = begin >= n ? 0 : (n - begin < size ? n - begin : size);
  *out = b;
  return WSYNC_OK;
}

bool box_elements(const Box& b, int64_t* out) {
  if (!dims_ok(b)) return false;
  int64_t n = 1;
  for (int32_t i = 0; i < b.ndim; ++i)
    if (b.extent[i] < 0 || !mul_ok(n, b.extent[i], &n)) return false;
  *out = n;
  return true;
}

bool box_within(const Box& b, int32_t ndim, const int64_t* shape, std::string* why) {
  char msg[160];
  if (!dims_ok(b) || b.ndim != ndim) {
    std::snprintf(msg, sizeof msg, "has %d dimensions, the tensor %d", b.ndim, ndim);
    *why = msg;
    return false;
  }
  for (int32_t i = 0; i < ndim; ++i) {
    int64_t end = 0;
    if (b.offset[i] < 0 || b.extent[i] < 0 || __builtin_add_overflow(b.offset[i], b.extent[i], &end) ||
        end > shape[i]) {
      std::snprintf(msg, sizeof msg, "dimension %d spans [%lld, %lld + %lld) outside [0, %lld)", i,
                    static_cast<long long>(b.offset[i]), static_cast<long long>(b.offset[i]),
                    static_cast<long long>(b.extent[i]), static_cast<long long>(shape[i]));
      *why = msg;
      return false;
    }
  }
  int64_t n = 0;
  if (!box_elements(b, &n)) {
    *why = "has more elements than an int64 counts";
    return false;
  }
  return true;
}

bool box_intersect(const Box& a, const Box& b, Box* out) {
  if (!dims_ok(a) || a.ndim != b.ndim) return false;
  Box r;
  r.ndim = a.ndim;
  for (int32_t i = 0; i < a.ndim; ++i) {
    const int64_t lo = a.offset[i] > b.offset[i] ? a.offset[i] : b.offset[i];
    int64_t ea = 0, eb = 0;  // ends saturate: boxes that were not checked may not overflow here
    if (__builtin_add_overflow(a.offset[i], a.extent[i], &ea)) ea = INT64_MAX;
    if (__builtin_add_overflow(b.offset[i], b.extent[i], &eb)) eb = INT64_MAX;
    const int64_t hi = ea < eb ? ea : eb;
    if (hi <= lo) return false;
    r.offset[i] = lo;
    r.extent[i] = hi - lo;
  }
  *out = r;
  return true;
}

bool box_equal(const Box& a, const Box& b) {
  if (!dims_ok(a) || a.ndim != b.ndim) return false;
  for (int32_t i = 0; i < a.ndim; ++i)
    if (a.offset[i] != b.offset[i] || a.extent[i] != b.extent[i]) return false;
  return true;
}

std::string box_str(const Box& b) {
  if (!dims_ok(b)) return "(a box of " + std::to_string(b.ndim) + " dimensions)";
  std::string s = "[";
  for (int32_t i = 0; i < b.ndim; ++i) {
    if (i > 0) s += ", ";
    int64_t end = 0;  // a hostile box's end may not fit: then it is printed as a sum
    s += std::to_string(b.offset[i]) + ":" +
         (__builtin_add_overflow(b.offset[i], b.extent[i], &end) ? std::to_string(b.offset[i]) + "+" +
                                                                       std::to_string(b.extent[i])
                                                                 : std::to_string(end));
  }
  return s + "]";
}

namespace {

// How a box lies in a buffer: everything box_runs and box_window need, checked once.
struct Layout {
  int64_t elems = 0;                          // of the box
  int64_t stride[WSYNC_MAX_NDIM] = {0};        // of the buffer, in elements
  int32_t j = -1;                             // the innermost dimension the box does not span whole
  uint64_t run_bytes = 0;                     // every run's length
  uint64_t runs = 0;                          // how many
};

wsync_status_t layout_of(const Box& inner, const Box& outer, uint32_t elem_size, Layout* l) {
  if (elem_size == 0) return fail(WSYNC_ERR_INVALID_ARGUMENT, "box runs of an element of 0 bytes");
  if (inner.ndim != outer.ndim || inner.ndim < 0 || inner.ndim > WSYNC_MAX_NDIM)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "box %s has %d dimensions, the buffer's box %s %d",
                box_str(inner).c_str(), inner.ndim, box_str(outer).c_str(), outer.ndim);
  const int32_t d = inner.ndim;
  for (int32_t i = 0; i < d; ++i)
    if (inner.offset[i] < 0 || outer.offset[i] < 0 || inner.offset[i] < outer.offset[i] || inner.extent[i] < 0 ||
        outer.extent[i] < 0 ||
        inner.offset[i] - outer.offset[i] > outer.extent[i] - inner.extent[i])
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "box %s is not inside the buffer's box %s (dimension %d)",
                  box_str(inner).c_str(), box_str(outer).c_str(), i);
  int64_t n = 0, outer_n = 0, outer_bytes = 0;
  if (!box_elements(inner, &n) || !box_elements(outer, &outer_n) ||
      !mul_ok(outer_n, static_cast<int64_t>(elem_size), &outer_bytes))
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "box %s of a buffer %s: its byte count overflows", box_str(inner).c_str(),
                box_str(outer).c_str());
  l->elems = n;
  if (n == 0) return WSYNC_OK;
  // Strides of the buffer, in elements (they fit: the buffer's element count fits).
  int64_t s = 1;
  for (int32_t i = d - 1; i >= 0; --i) {
    l->stride[i] = s;
    s *= outer.extent[i];
  }
  // Everything inside dimension j is one run.
  l->j = d - 1;
  while (l->j >= 0 && inner.extent[l->j] == outer.extent[l->j]) --l->j;
  const int64_t run_elems = l->j < 0 ? n : inner.extent[l->j] * l->stride[l->j];
  l->run_bytes = static_cast<uint64_t>(run_elems) * elem_size;  // <= the buffer's bytes
  l->runs = 1;
  for (int32_t i = 0; i < l->j; ++i) l->runs *= static_cast<uint64_t>(inner.extent[i]);  // <= n: no overflow
  return WSYNC_OK;
}

// Where run k of the box starts in the buffer, in bytes.
uint64_t run_start(const Box& inner, const Box& outer, const Layout& l, uint64_t k, uint32_t elem_size) {
  int64_t at = l.j >= 0 ? (inner.offset[l.j] - outer.offset[l.j]) * l.stride[l.j] : 0;
  for (int32_t i = l.j - 1; i >= 0; --i) {  // k's position over dimensions [0, j), row-major
    const int64_t idx = static_cast<int64_t>(k % static_cast<uint64_t>(inner.extent[i]));
    k /= static_cast<uint64_t>(inner.extent[i]);
    at += (inner.offset[i] - outer.offset[i] + idx) * l.stride[i];
  }
  return static_cast<uint64_t>(at) * elem_size;
}

void push_run(std::vector<ByteRun>* out, ByteRun run) {
  if (!out->empty() && out->back().offset + out->back().length == run.offset)
    out->back().length += run.length;
  else
    out->push_back(run);
}

}  // namespace

wsync_status_t box_runs(const Box& inner, const Box& outer, uint32_t elem_size, std::vector<ByteRun>* out) {
  out->clear();
  Layout l;
  wsync_status_t st = layout_of(inner, outer, elem_size, &l);
  if (st != WSYNC_OK || l.elems == 0) return st;
  if (l.runs > kMaxBoxRuns)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "box %s of a buffer %s cuts it into %llu runs (at most %llu)",
                box_str(inner).c_str(), box_str(outer).c_str(), static_cast<unsigned long long>(l.runs),
                static_cast<unsigned long long>(kMaxBoxRuns));
  out->reserve(l.runs);
  for (uint64_t k = 0; k < l.runs; ++k) push_run(out, ByteRun{run_start(inner, outer, l, k, elem_size), l.run_bytes});
  return WSYNC_OK;
}

wsync_status_t box_window(const Box& inner, const Box& outer, uint32_t elem_size, uint64_t begin, uint64_t end,
                          uint64_t max_runs, std::vector<ByteRun>* out) {
  out->clear();
  Layout l;
  wsync_status_t st = layout_of(inner, outer, elem_size, &l);
  if (st != WSYNC_OK) return st;
  const uint64_t total = static_cast<uint64_t>(l.elems) * elem_size;  // <= the buffer's bytes
  if (begin > end || end > total)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "bytes [%llu, %llu) of box %s, which has %llu", static_cast<unsigned long long>(begin),
                static_cast<unsigned long long>(end), box_str(inner).c_str(), static_cast<unsigned long long>(total));
  if (begin == end) return WSYNC_OK;
  const uint64_t first = begin / l.run_bytes, last = (end - 1) / l.run_bytes;
  if (last - first >= max_runs)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "bytes [%llu, %llu) of box %s cross %llu runs (at most %llu)",
                static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end), box_str(inner).c_str(),
                static_cast<unsigned long long>(last - first + 1), static_cast<unsigned long long>(max_runs));
  for (uint64_t k = first; k <= last; ++k) {
    const uint64_t lo = std::max(begin, k * l.run_bytes), hi = std::min(end, (k + 1) * l.run_bytes);
    push_run(out, ByteRun{run_start(inner, outer, l, k, elem_size) + (lo - k * l.run_bytes), hi - lo});
  }
  return WSYNC_OK;
}

}  // namespace wsync
