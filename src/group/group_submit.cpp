// The caller's side of the asynchronous send: send_start checks and plans a batch on the caller's
// thread (a refusal starts nothing and leaves the group usable), records the CUDA event, and
// queues it for the pipeline thread; send_wait and finalize wait for what the pipeline thread
// publishes. Nothing here talks to receivers or the transport.
#include <chrono>
#include <climits>
#include <cstring>

#include "common/error.h"
#include "common/tensors.h"
#include "group/group_declare.h"
#include "group/group_device.h"
#include "group/group_internal.h"
#include "group/group_mailbox.h"

namespace wsync {
namespace {

// The caller's descriptors, with names copied (the tensor memory stays the caller's).
wsync_status_t copy_batch(const wsync_tensor_t* tensors, uint64_t n, Batch* b) {
  wsync_status_t st = copy_tensor_descs(tensors, n, "tensors", &b->tensors);
  if (st != WSYNC_OK) return st;
  b->names.reserve(b->tensors.size());
  for (auto& t : b->tensors) b->names.emplace_back(t.name);
  for (size_t i = 0; i < b->tensors.size(); ++i) b->tensors[i].name = b->names[i].c_str();
  return WSYNC_OK;
}

// Names unique within the update (batches still in flight count), then the bucket plan.
wsync_status_t plan_batch(wsync_group_t* g, Batch* b) {
  std::vector<PlanTensor> pt(b->tensors.size());
  for (size_t i = 0; i < b->tensors.size(); ++i) {
    const wsync_tensor_t& t = b->tensors[i];
    if (g->caller.names_in_update.count(b->names[i]))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' was already sent in this update (names must be unique until "
                  "finalize)", t.name);
    pt[i].name = b->names[i];
    pt[i].dtype = t.dtype;
    pt[i].ndim = t.ndim;
    std::memcpy(pt[i].shape, t.shape, sizeof pt[i].shape);
    pt[i].nbytes = t.nbytes;
  }
  if (b->segments.empty()) return plan_buckets(g->shape.rule, pt, &b->plan);
  // Many senders, receivers that need different boxes: each segment is planned on its own, its
  // buckets for its receivers only.
  b->plan.clear();
  for (size_t s = 0; s < b->segments.size(); ++s) {
    const Batch::Segment& seg = b->segments[s];
    std::vector<PlanTensor> part(pt.begin() + static_cast<std::ptrdiff_t>(seg.begin),
                                 pt.begin() + static_cast<std::ptrdiff_t>(seg.end));
    std::vector<PlanBucket> plan;
    wsync_status_t st = plan_buckets(g->shape.rule, part, &plan);
    if (st != WSYNC_OK) return st;
    for (PlanBucket& pb : plan) {
      for (PlanEntry& e : pb.entries) e.tensor_index += static_cast<uint32_t>(seg.begin);
      b->plan.push_back(std::move(pb));
      b->bucket_segment.push_back(static_cast<uint32_t>(s));
    }
  }
  return WSYNC_OK;
}

// A wait the caller may skip (room in the pipeline, a ticket): 0 = do not block, < 0 = the default.
int64_t effective_timeout(wsync_group_t* g, int64_t timeout_ms) { return timeout_ms >= 0 ? timeout_ms : g->cfg.timeout_ms; }
// A wait for a receiver inside a batch or a commit cannot be skipped: 0 or < 0 = the default.
int64_t receiver_timeout(wsync_group_t* g, int64_t timeout_ms) { return timeout_ms > 0 ? timeout_ms : g->cfg.timeout_ms; }

}  // namespace

wsync_status_t group_send_start(wsync_group_t* g, const wsync_tensor_t* tensors, uint64_t n, int64_t timeout_ms,
                                uint64_t* ticket) {
  if (ticket == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "ticket is NULL");
  *ticket = 0;
  wsync_status_t st = mailbox_check_usable(g);
  if (st != WSYNC_OK) return st;
  auto b = std::make_unique<Batch>();
  b->timeout_ms = receiver_timeout(g, timeout_ms);
  const int64_t room_ms = effective_timeout(g, timeout_ms);
  st = copy_batch(tensors, n, b.get());
  if (st == WSYNC_OK) st = declared_check_batch(g, b->tensors);
  // Many senders: room in the pipeline first (a batch whose record went out must be queued).
  if (st == WSYNC_OK && g->shape.planned) st = mailbox_wait_for_room(g, deadline_after(room_ms), room_ms);
  // Many senders: every sender's part of this batch agreed before anything is queued (a failure
  // after its record went out breaks the group: see mailbox_post_batch).
  bool published = false;
  if (st == WSYNC_OK) st = senders_plan_batch(g, b.get(), b->timeout_ms, &published);
  if (st == WSYNC_OK) st = plan_batch(g, b.get());
  if (st == WSYNC_OK) st = device_check_batch(g, b->tensors);
  const auto before_post = [g](Batch* batch) {  // (this thread, under the mailbox's lock)
    // Now, not earlier: work the caller queues on its stream before this call returns is seen.
    wsync_status_t rst = device_record_caller(g, batch->tensors, &batch->cuda_event);
    if (rst != WSYNC_OK) return rst;
    batch->started_ms = now_ms();
    for (const auto& name : batch->names) g->caller.names_in_update.insert(name);
    return WSYNC_OK;
  };
  st = mailbox_post_batch(g, std::move(b), st, published, deadline_after(room_ms), room_ms, before_post, ticket);
  if (st == WSYNC_OK) pipeline_wake(g);  // (it may be waiting on the oldest bucket's ACKs: this goes first)
  return st;
}

namespace {

// A wait that ended because a receiver did not answer in time broke the update: that is the
// receiver's failure (PEER_FAILED, the message names it and the time). WSYNC_ERR_TIMEOUT from a
// group call only ever means "not yet" (send_wait) or "nothing was started" (send_start).
wsync_status_t as_peer_failure(wsync_status_t st) {
  return st == WSYNC_ERR_TIMEOUT ? fail_msg(WSYNC_ERR_PEER_FAILED, last_error()) : st;
}

}  // namespace

wsync_status_t group_send_wait(wsync_group_t* g, uint64_t ticket, int64_t timeout_ms) {
  const int64_t tmo = effective_timeout(g, timeout_ms);
  bool pending = false;
  wsync_status_t st = mailbox_wait_ticket(g, ticket, deadline_after(tmo), &pending);
  if (pending)
    return fail(WSYNC_ERR_TIMEOUT, "batch %llu of group '%s' is still in flight after %lld ms",
                static_cast<unsigned long long>(ticket), g->cfg.group_name.c_str(), static_cast<long long>(tmo));
  return as_peer_failure(st);
}

wsync_status_t group_send_batch(wsync_group_t* g, const wsync_tensor_t* tensors, uint64_t n, int64_t timeout_ms) {
  uint64_t ticket = 0;
  wsync_status_t st = group_send_start(g, tensors, n, timeout_ms, &ticket);
  if (st != WSYNC_OK) return st;
  // Until it is delivered or fails: every wait of the pipeline thread for it has its own deadline.
  bool pending = false;
  return as_peer_failure(mailbox_wait_ticket(g, ticket, INT64_MAX, &pending));
}

wsync_status_t group_finalize(wsync_group_t* g, uint64_t version, int64_t timeout_ms) {
  wsync_status_t st = WSYNC_OK;
  if (g->declared.caller) {  // (a broken group says its own failure first)
    if ((st = mailbox_check_usable(g)) == WSYNC_OK) st = declared_check_finalize(g);
    if (st != WSYNC_OK) return st;
  }
  auto job = std::make_unique<FinalizeJob>();
  job->version = version;
  job->timeout_ms = receiver_timeout(g, timeout_ms);
  job->plan_digest = g->senders.update_plan_digest;
  bool ended = false;
  st = mailbox_finalize(g, std::move(job), &ended);
  if (!ended) return as_peer_failure(st);
  // Committed, or (membership=elastic) failed because receivers left: either way the update ended
  // and the group takes the next one.
  g->caller.names_in_update.clear();
  declared_update_ended(g);
  senders_update_ended(g);
  return st;
}

void group_set_cuda_stream(wsync_group_t* g, void* stream) { g->caller.stream = stream; }

}  // namespace wsync
