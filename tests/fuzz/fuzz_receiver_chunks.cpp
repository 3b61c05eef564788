// libFuzzer target: a receiver's chunk bookkeeping (receiver/arrivals.h), driven the way
// receiver_bucket.cpp drives it, with arbitrary sequences of chunks: names, offsets, lengths and
// tensor sizes the sender claims. Run by ctest as fuzz.receiver_chunks.
//
// The invariant (issue 22 finding 4): whatever it calls complete was covered, exactly once, by the
// chunks it accepted — checked against an independent list of those chunks — and whatever they
// cover exactly is complete. Every accepted chunk lies inside its tensor.
//
// Input: a sequence of ops. op u8:
//   op & 3 == 3   the update is dropped (a bucket failed elsewhere): everything is forgotten
//   otherwise     a chunk: name u8 (one of four), then tensor_bytes, tensor_offset, length, each a
//                 u64 when op bit 2, 3, 4 (respectively) is set, else a u8 (small numbers make
//                 chunks that meet or overlap likely); op bit 5 closes the bucket after this chunk
//                 (its bytes arrived)
// The input's end closes the last bucket.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "receiver/arrivals.h"

namespace {

using wsync::ManifestEntry;

struct Chunk {
  uint64_t offset, length;
};

// The chunks accepted for one tensor in this update, kept as a plain list.
struct Shadow {
  uint64_t tensor_bytes = 0;
  std::vector<Chunk> chunks;

  // The chunks cover [0, tensor_bytes) exactly once: sorted, each starts where the last ended.
  bool tiles() const {
    std::vector<Chunk> c;
    for (const Chunk& x : chunks)
      if (x.length) c.push_back(x);
    std::sort(c.begin(), c.end(), [](const Chunk& a, const Chunk& b) { return a.offset < b.offset; });
    uint64_t at = 0;
    for (const Chunk& x : c) {
      if (x.offset != at || x.length > tensor_bytes - at) return false;
      at += x.length;
    }
    return at == tensor_bytes;
  }
};

class Receiver {
 public:
  // A chunk of the bucket being planned: checked as plan_placement checks it.
  void plan(const ManifestEntry& e) {
    for (const ManifestEntry& p : bucket_)
      if (p.name == e.name) return drop();  // decode_manifest refuses a name twice in one record
    if (arrived_.check(e) != WSYNC_OK) return drop();  // the bucket is refused: the update is dropped
    if (e.tensor_offset > e.tensor_bytes || e.length > e.tensor_bytes - e.tensor_offset) std::abort();
    auto it = shadow_.find(e.name);
    if (it != shadow_.end() && it->second.tensor_bytes != e.tensor_bytes) std::abort();
    bucket_.push_back(e);
  }

  // The bucket's bytes arrived: recorded as finish_bucket records them, then the invariant.
  void finish() {
    for (const ManifestEntry& e : bucket_) {
      if (arrived_.record(e) != WSYNC_OK) std::abort();  // check() accepted it in this bucket
      Shadow& s = shadow_[e.name];
      s.tensor_bytes = e.tensor_bytes;
      s.chunks.push_back(Chunk{e.tensor_offset, e.length});
    }
    bucket_.clear();
    for (const auto& kv : shadow_)
      if (arrived_.complete(kv.first) != kv.second.tiles()) std::abort();
  }

  void drop() {
    arrived_.clear();
    shadow_.clear();
    bucket_.clear();
  }

 private:
  wsync::Arrivals arrived_;
  std::map<std::string, Shadow> shadow_;
  std::vector<ManifestEntry> bucket_;
};

bool read_number(wsync::ByteReader& r, bool wide, uint64_t* out) {
  if (wide) return r.u64(out);
  uint8_t v = 0;
  if (!r.u8(&v)) return false;
  *out = v;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kNames[] = {"a", "b", "layers.0.weight", "lm_head.weight"};
  wsync::ByteReader r(data, size);
  Receiver rx;
  uint8_t op = 0, name = 0;
  while (r.u8(&op)) {
    if ((op & 3) == 3) {
      rx.drop();
      continue;
    }
    ManifestEntry e;
    if (!r.u8(&name) || !read_number(r, op & 4, &e.tensor_bytes) || !read_number(r, op & 8, &e.tensor_offset) ||
        !read_number(r, op & 16, &e.length))
      break;
    e.name = kNames[name % 4];
    rx.plan(e);
    if (op & 32) rx.finish();
  }
  rx.finish();
  return 0;
}
