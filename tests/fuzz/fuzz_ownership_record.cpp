// libFuzzer target: decode_sender_record and decode_needs (planner/ownership_record.h), the
// records every member of a many-sender group reads from the store before an update, and the plan
// built from what they accept. Run by ctest as fuzz.ownership_record. The first byte picks the
// decoder (even: a sender record, odd: a receiver's needs); the rest is the record.
//
// Beyond "no crash, no UB, no leak": an accepted record has valid names, 0..8 dims and no
// negative dimension; encoding it again decodes to the same record; and planning with it (a
// sender record as the group's only sender, needs against a fixed plan) either succeeds or
// refuses, without reading out of bounds however its boxes lie.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/checksum.h"
#include "common/error.h"
#include "common/names.h"
#include "planner/ownership_record.h"

namespace {

bool same_box(const wsync::Box& a, const wsync::Box& b) { return wsync::box_equal(a, b) || (a.ndim == 0 && b.ndim == 0); }

void check_name(const std::string& n) {
  if (!wsync::tensor_name_problem(n.data(), n.size()).empty()) std::abort();
}

void sender(const uint8_t* data, size_t size) {
  wsync::SenderRecord r;
  uint64_t update = 0;
  if (wsync::decode_sender_record(data, size, &r, &update) != WSYNC_OK) return;
  for (const auto& t : r.tensors) {
    check_name(t.name);
    if (t.ndim < 0 || t.ndim > WSYNC_MAX_NDIM || t.box.ndim != t.ndim) std::abort();
    for (int32_t d = 0; d < t.ndim; ++d)
      if (t.shape[d] < 0 || t.box.offset[d] < 0 || t.box.extent[d] < 0) std::abort();
  }
  const std::vector<uint8_t> again = wsync::encode_sender_record(r, update);
  wsync::SenderRecord back;
  uint64_t u2 = 0;
  if (wsync::decode_sender_record(again.data(), again.size(), &back, &u2) != WSYNC_OK || u2 != update ||
      back.rank != r.rank || back.tensors.size() != r.tensors.size())
    std::abort();
  for (size_t i = 0; i < r.tensors.size(); ++i)
    if (back.tensors[i].name != r.tensors[i].name || !same_box(back.tensors[i].box, r.tensors[i].box) ||
        back.tensors[i].replica != r.tensors[i].replica)
      std::abort();
  wsync::OwnershipPlan p;
  if (wsync::plan_ownership({r}, &p) != WSYNC_OK) return;
  std::vector<wsync::Need> needs;
  for (const auto& t : p.tensors) needs.push_back(wsync::Need{t.name, true, wsync::Box{}});
  std::vector<wsync::Transfer> ts;
  if (wsync::plan_transfers(p, needs, &ts) != WSYNC_OK) std::abort();  // a valid plan serves full needs
}

void needs(const uint8_t* data, size_t size) {
  uint32_t rank = 0;
  uint64_t update = 0;
  std::vector<wsync::Need> n;
  if (wsync::decode_needs(data, size, &rank, &update, &n) != WSYNC_OK) return;
  for (const auto& x : n) {
    check_name(x.name);
    if (x.box.ndim < 0 || x.box.ndim > WSYNC_MAX_NDIM) std::abort();
  }
  // A fixed plan: "w" [10, 4] in two row shards, "b" [4] whole.
  std::vector<wsync::SenderRecord> recs(2);
  for (uint32_t k = 0; k < 2; ++k) {
    recs[k].rank = k;
    wsync::OwnedTensor w;
    w.name = "w";
    w.dtype = WSYNC_DTYPE_FLOAT32;
    w.ndim = 2;
    w.shape[0] = 10;
    w.shape[1] = 4;
    if (wsync::chunk_box(2, w.shape, 0, 2, k, &w.box) != WSYNC_OK) std::abort();
    recs[k].tensors.push_back(w);
  }
  wsync::OwnedTensor b;
  b.name = "b";
  b.dtype = WSYNC_DTYPE_FLOAT32;
  b.ndim = 1;
  b.shape[0] = 4;
  b.box = wsync::full_box(1, b.shape);
  recs[0].tensors.push_back(b);
  wsync::OwnershipPlan p;
  if (wsync::plan_ownership(recs, &p) != WSYNC_OK) std::abort();
  std::vector<wsync::Transfer> ts;
  if (wsync::plan_transfers(p, n, &ts) != WSYNC_OK) return;
  for (const auto& t : ts) {  // each transfer lies in its owner's box and the need's box
    std::vector<wsync::ByteRun> runs;
    const wsync::Box want = n[t.need].full ? wsync::full_box(p.tensors[t.tensor].ndim, p.tensors[t.tensor].shape)
                                           : n[t.need].box;
    if (wsync::box_runs(t.box, want, 4, &runs) != WSYNC_OK) std::abort();
  }
}

// The fuzzer must see past the record's checksum (a mutation almost never keeps it right): in
// this build a record decodes exactly as it would with its trailer made right. A decoder that
// still checks the sum ends here on the corpus's bad_checksum seeds.
void checksum_is_no_wall(const uint8_t* data, size_t size) {
  if (size < 8) return;
  std::vector<uint8_t> right(data, data + size);
  const uint64_t sum = wsync::checksum64(right.data(), size - 8);
  std::memcpy(right.data() + size - 8, &sum, 8);
  wsync::SenderRecord r;
  uint32_t rank = 0;
  uint64_t update = 0;
  std::vector<wsync::Need> n;
  const bool as_is = data[0] % 2 == 0 ? wsync::decode_sender_record(data + 1, size - 1, &r, &update) == WSYNC_OK
                                      : wsync::decode_needs(data + 1, size - 1, &rank, &update, &n) == WSYNC_OK;
  const bool made_right = data[0] % 2 == 0
                              ? wsync::decode_sender_record(right.data() + 1, size - 1, &r, &update) == WSYNC_OK
                              : wsync::decode_needs(right.data() + 1, size - 1, &rank, &update, &n) == WSYNC_OK;
  if (as_is != made_right) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  checksum_is_no_wall(data, size);
  if (data[0] % 2 == 0)
    sender(data + 1, size - 1);
  else
    needs(data + 1, size - 1);
  wsync::clear_error();
  return 0;
}
