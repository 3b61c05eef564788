// HTTP engines of senders that plan (docs/ABI.md "Many senders"): an engine's workers take each
// batch's boxes from every sender, so an UPDATE per bucket (one sender's buckets) would name
// tensors that other senders complete. Sender 0 alone drives the engines' HTTP dialogue, with one
// UPDATE per batch that names every tensor of the batch whole (the plan's names, dtypes and full
// shapes): posted with this sender's first bucket of the batch and collected after its last (the
// engines answer once every sender's boxes arrived), or on its own for a batch of which this
// sender sends nothing.
#include <memory>
#include <string>

#include "group/group_bucket.h"
#include "group/group_engines.h"
#include "group/group_internal.h"

namespace wsync {

void announce_build(const OwnershipPlan& plan, Batch* b) {
  b->announced.clear();
  b->announced_names.clear();
  b->announced_bucket = PlanBucket();
  b->announced_names.reserve(plan.tensors.size());  // announced[i].name points here
  for (const TensorPlan& t : plan.tensors) {
    b->announced_names.push_back(t.name);
    wsync_tensor_t d = WSYNC_TENSOR_INIT;
    d.name = b->announced_names.back().c_str();
    d.dtype = t.dtype;
    d.ndim = t.ndim;
    uint64_t n = wsync_dtype_size(t.dtype);
    for (int i = 0; i < t.ndim; ++i) {
      d.shape[i] = t.shape[i];
      n *= static_cast<uint64_t>(t.shape[i]);
    }
    d.nbytes = n;
    PlanEntry e;
    e.tensor_index = b->announced.size();
    e.length = n;
    b->announced_bucket.entries.push_back(e);
    b->announced_bucket.bytes += n;
    b->announced.push_back(d);
  }
}

wsync_status_t announce_start(wsync_group_t* g, Batch* b) {
  wsync_status_t st = open_update(g);
  if (st != WSYNC_OK || b->announced.empty()) return st;
  b->announce_calls = std::make_shared<EngineCalls>();
  const std::string about = "batch " + std::to_string(b->ticket) + " of update " + std::to_string(g->wire.update_id);
  CallMode mode;
  mode.about = about.c_str();  // (copied by start)
  return b->announce_calls->start(g, WSYNC_STEP_UPDATE, &b->announced_bucket, &b->announced, 0, nullptr, mode);
}

wsync_status_t announce_finish(Batch* b) {
  if (!b->announce_calls) return WSYNC_OK;
  wsync_status_t st = b->announce_calls->finish();
  b->announce_calls.reset();
  return st;
}

void announce_cancel(Batch* b) {
  if (b->announce_calls) b->announce_calls->cancel();
}

wsync_status_t announce_alone(wsync_group_t* g, Batch* b) {
  if (!g->shape.http_engines || !g->shape.planned || !b->plan.empty() || b->announced.empty() || b->announced_alone) return WSYNC_OK;
  b->announced_alone = true;
  wsync_status_t st = announce_start(g, b);
  if (st != WSYNC_OK) return st;
  return announce_finish(b);
}

wsync_status_t announce_before(wsync_group_t* g, const BatchList& active, const Batch* next) {
  for (const auto& b : active) {
    if (b.get() == next) break;
    wsync_status_t st = announce_alone(g, b.get());
    if (st != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

}  // namespace wsync
