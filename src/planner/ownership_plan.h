// The ownership plan of a many-sender update: which sender owns which box of which tensor, agreed
// by every member before the first byte moves, and, for each receiver, which boxes it gets from
// which sender. It only plans; moving the boxes is the pipeline's job, and nothing here opens a
// socket.
//
// Inputs. Every sender describes what it publishes in an update: per tensor its name, dtype, the
// full tensor's shape, and the box it owns (the full tensor for one that is not sharded). A box
// held by several senders on purpose (DTensor's Replicate, the data-parallel copies of a TP shard)
// is marked `replica`: identical replica boxes are sent once, by the lowest sender rank holding
// them. Every receiver describes what it needs: per tensor the full tensor or a box of it (a TP
// shard of rows or columns).
//
// The checks, each refusing the plan with INVALID_ARGUMENT and a message naming the tensor, the
// senders and the range, before any byte moves:
//  - each sender: names unique, valid dtype, 0..8 dims, a box inside the full shape;
//  - senders agree: a tensor's dtype and full shape are the same wherever it is named;
//  - coverage: the distinct boxes of a tensor cover it exactly once: two senders' boxes that
//    overlap (and are not the same replica box) are refused naming the common range; elements no
//    sender owns are refused naming a range of them;
//  - a sender need not own anything of a tensor: only the union of the senders' boxes counts;
//  - receivers: every tensor asked for is published, and the box asked for is inside it.
//
// The digest identifies the plan (tensors in name order, each with its dtype, shape and owners'
// boxes): every member computes it from the same records and compares it, so a member that saw
// other records is caught before any byte moves. OwnershipPlanner keeps the last plan and reuses
// it when an update's records repeat the previous one's (the usual case: the same model every
// step), counting how often it computed one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/box.h"
#include "wsync.h"

namespace wsync {

struct OwnedTensor {
  std::string name;
  int32_t dtype = WSYNC_DTYPE_INVALID;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};  // the full tensor's
  Box box;                              // what this sender owns of it
  bool replica = false;                 // other senders may own the same box on purpose
};

// What sender `rank` (0..M-1) publishes in an update.
struct SenderRecord {
  uint32_t rank = 0;
  std::vector<OwnedTensor> tensors;
};

struct Owner {
  uint32_t sender = 0;
  Box box;
};

struct TensorPlan {
  std::string name;
  int32_t dtype = WSYNC_DTYPE_INVALID;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};
  std::vector<Owner> owners;  // disjoint, covering the tensor; in order of their boxes' offsets. An
                              // empty tensor (a 0 in its shape) has one: the lowest sender naming it
};

struct OwnershipPlan {
  std::vector<TensorPlan> tensors;  // by name
  uint64_t digest = 0;
  const TensorPlan* find(const std::string& name) const;
};

// Builds the plan from every sender's record (any order; ranks must be distinct). On failure
// *out is left empty and the status is INVALID_ARGUMENT with the message described above.
wsync_status_t plan_ownership(const std::vector<SenderRecord>& senders, OwnershipPlan* out);

// What a receiver needs of one tensor: the full tensor (full = true) or `box`.
struct Need {
  std::string name;
  bool full = true;
  Box box;
};

// One box a sender sends to a receiver, and where it lands: `box` is in full-tensor coordinates,
// inside both the sender's owned box and the receiver's needed box.
struct Transfer {
  uint32_t sender = 0;
  uint32_t tensor = 0;  // index into plan.tensors
  uint32_t need = 0;    // index into the receiver's needs
  Box box;
};

// The transfers that give a receiver exactly the bytes of its needs, each from the one sender that
// owns them: grouped by sender (ascending), then in the receiver's order of needs. A need naming
// a tensor no sender publishes, or a box outside the tensor, is refused (INVALID_ARGUMENT naming
// it), as is a tensor asked for twice.
wsync_status_t plan_transfers(const OwnershipPlan& plan, const std::vector<Need>& needs,
                              std::vector<Transfer>* out);

// Keeps the last plan: plan() returns it again, without checking or computing anything, when the
// records are byte for byte the previous call's; computed() counts the plans it built.
class OwnershipPlanner {
 public:
  wsync_status_t plan(const std::vector<SenderRecord>& senders, const OwnershipPlan** out);
  uint64_t computed() const { return computed_; }

 private:
  std::string last_input_;  // the records' canonical encoding, compared whole
  bool have_ = false;
  OwnershipPlan plan_;
  uint64_t computed_ = 0;
};

}  // namespace wsync
