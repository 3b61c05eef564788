// The caller's side of the asynchronous send: send_start checks and plans a batch on the caller's
// thread (a refusal starts nothing and leaves the group usable), records the CUDA event, and
// queues it for the pipeline thread; send_wait and finalize wait for what the pipeline thread
// publishes. Nothing here talks to receivers or the transport.
#include <chrono>
#include <climits>
#include <cstring>

#include "common/error.h"
#include "common/tensors.h"
#include "group/group_device.h"
#include "group/group_internal.h"

namespace wsync {
namespace {

using Lock = std::unique_lock<std::mutex>;

// Aborted, or broken by an earlier failure: nothing new may start, and the call says why with the
// failure's own status. After an abort the call waits
// (bounded, as the best-effort requests are) until the pipeline thread ended the engines' update,
// so that the caller may count on it and read what state the engines were left in.
wsync_status_t check_usable(wsync_group_t* g, Lock& lk) {
  if (g->pipe.aborted.load()) {
    pipeline_wake(g);  // the pipeline thread tells the receivers and ends the engines' update
    const int64_t until = now_ms() + 60000;
    while (g->shape.http_engines && !g->shared.abort_handled && !g->shared.stop && now_ms() < until)
      g->shared.cv.wait_for(lk, std::chrono::milliseconds(50));
    if (g->shared.failed == WSYNC_ERR_ABORTED) return fail_msg(WSYNC_ERR_ABORTED, g->shared.failed_why);
    return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted", g->cfg.group_name.c_str());
  }
  // The failure that broke the group, with its status (a receiver that did not answer in time is
  // PEER_FAILED, as send_wait reports it: TIMEOUT from these calls means "nothing started yet").
  if (g->shared.failed != WSYNC_OK)
    return fail(g->shared.failed == WSYNC_ERR_TIMEOUT ? WSYNC_ERR_PEER_FAILED : g->shared.failed,
                "group '%s' cannot update any more: %s; destroy it and create a new one", g->cfg.group_name.c_str(),
                g->shared.failed_why.c_str());
  return WSYNC_OK;
}

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

// Wait (up to the deadline) until fewer than staging_buckets batches are in flight.
wsync_status_t wait_for_room(wsync_group_t* g, Lock& lk, int64_t deadline, int64_t timeout_ms) {
  PipelineShared& s = g->shared;
  while (s.in_flight >= g->shape.staging_buckets && s.failed == WSYNC_OK && !g->pipe.aborted.load()) {
    if (now_ms() >= deadline)
      return fail(WSYNC_ERR_TIMEOUT, "group '%s': %llu batches are in flight (the most, option staging_buckets) and "
                  "none was delivered within %lld ms; nothing was started", g->cfg.group_name.c_str(),
                  static_cast<unsigned long long>(s.in_flight), static_cast<long long>(timeout_ms));
    s.cv.wait_for(lk, std::chrono::milliseconds(std::min(remaining_ms(deadline), 100)));
  }
  return check_usable(g, lk);
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
  {
    Lock lk(g->shared.mu);
    wsync_status_t st = check_usable(g, lk);
    if (st != WSYNC_OK) return st;
  }
  auto b = std::make_unique<Batch>();
  b->timeout_ms = receiver_timeout(g, timeout_ms);
  const int64_t room_ms = effective_timeout(g, timeout_ms);
  wsync_status_t st = copy_batch(tensors, n, b.get());
  // Many senders: room in the pipeline first (a batch whose record went out must be queued).
  if (st == WSYNC_OK && g->shape.planned) {
    Lock lk(g->shared.mu);
    st = wait_for_room(g, lk, deadline_after(room_ms), room_ms);
  }
  // Many senders: every sender's part of this batch agreed before anything is queued.
  bool published = false;
  if (st == WSYNC_OK) st = senders_plan_batch(g, b.get(), b->timeout_ms, &published);
  if (st == WSYNC_OK) st = plan_batch(g, b.get());
  if (st == WSYNC_OK) st = device_check_batch(g, b->tensors);
  // The other senders count a batch whose record went out: a failure after that would leave every
  // later batch out of step, so it breaks the group.
  const auto broken = [g, published](wsync_status_t failed) {  // (under the lock)
    if (!published) return failed;
    const std::string why = last_error();
    if (g->shared.failed == WSYNC_OK) {
      g->shared.failed = failed;
      g->shared.failed_why = why;
    }
    return fail_msg(failed, why);
  };
  Lock lk(g->shared.mu);
  if (st != WSYNC_OK) return broken(st);
  if ((st = wait_for_room(g, lk, deadline_after(room_ms), room_ms)) != WSYNC_OK) return broken(st);
  // Now, not earlier: work the caller queues on its stream before this call returns is seen.
  if ((st = device_record_caller(g, b->tensors, &b->cuda_event)) != WSYNC_OK) return broken(st);
  b->ticket = g->shared.next_ticket++;
  b->started_ms = now_ms();
  for (const auto& name : b->names) g->caller.names_in_update.insert(name);
  *ticket = b->ticket;
  g->shared.in_flight++;
  Job job;
  job.batch = std::move(b);
  g->shared.queue.push_back(std::move(job));
  g->shared.cv.notify_all();
  return WSYNC_OK;
}

namespace {

// A wait that ended because a receiver did not answer in time broke the update: that is the
// receiver's failure (PEER_FAILED, the message names it and the time). WSYNC_ERR_TIMEOUT from a
// group call only ever means "not yet" (send_wait) or "nothing was started" (send_start).
wsync_status_t as_peer_failure(wsync_status_t st) {
  return st == WSYNC_ERR_TIMEOUT ? fail_msg(WSYNC_ERR_PEER_FAILED, last_error()) : st;
}

// Until batch `ticket` is delivered or failed, or the deadline (*pending: still in flight then;
// the status is WSYNC_ERR_TIMEOUT without a message).
wsync_status_t wait_ticket(wsync_group_t* g, uint64_t ticket, int64_t deadline, bool* pending) {
  *pending = false;
  Lock lk(g->shared.mu);
  PipelineShared& s = g->shared;
  if (ticket == 0 || ticket >= s.next_ticket)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "ticket %llu was never handed out by group '%s' (the last one is %llu)",
                static_cast<unsigned long long>(ticket), g->cfg.group_name.c_str(),
                static_cast<unsigned long long>(s.next_ticket - 1));
  for (;;) {
    if (s.delivered_ticket >= ticket) return WSYNC_OK;
    if (s.failed != WSYNC_OK) return fail_msg(s.failed, s.failed_why);
    if (now_ms() >= deadline) {
      *pending = true;
      return WSYNC_ERR_TIMEOUT;
    }
    s.cv.wait_for(lk, std::chrono::milliseconds(std::min(remaining_ms(deadline), 100)));
  }
}

}  // namespace

wsync_status_t group_send_wait(wsync_group_t* g, uint64_t ticket, int64_t timeout_ms) {
  const int64_t tmo = effective_timeout(g, timeout_ms);
  bool pending = false;
  wsync_status_t st = wait_ticket(g, ticket, deadline_after(tmo), &pending);
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
  return as_peer_failure(wait_ticket(g, ticket, INT64_MAX, &pending));
}

wsync_status_t group_finalize(wsync_group_t* g, uint64_t version, int64_t timeout_ms) {
  Lock lk(g->shared.mu);
  PipelineShared& s = g->shared;
  wsync_status_t st = check_usable(g, lk);
  if (st != WSYNC_OK) return st;
  if (version <= s.stats.committed_version)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "version %llu is not greater than the committed version %llu",
                static_cast<unsigned long long>(version), static_cast<unsigned long long>(s.stats.committed_version));
  Job job;
  job.finalize = std::make_unique<FinalizeJob>();
  job.finalize->version = version;
  job.finalize->timeout_ms = receiver_timeout(g, timeout_ms);
  job.finalize->plan_digest = g->senders.update_plan_digest;
  s.finalize_done = false;
  s.queue.push_back(std::move(job));
  s.cv.notify_all();
  // Batches in flight are delivered first; every wait of the pipeline thread has its deadline.
  while (!s.finalize_done && s.failed == WSYNC_OK) s.cv.wait_for(lk, std::chrono::milliseconds(100));
  if (s.finalize_done && s.failed == WSYNC_OK) {
    // Committed, or (membership=elastic) failed because receivers left: either way the update
    // ended and the group takes the next one.
    g->caller.names_in_update.clear();
    senders_update_ended(g);
    if (s.finalize_status == WSYNC_OK) return WSYNC_OK;
    return fail_msg(s.finalize_status, s.finalize_why);
  }
  fail_msg(s.failed != WSYNC_OK ? s.failed : s.finalize_status, s.failed_why);
  return as_peer_failure(s.failed != WSYNC_OK ? s.failed : s.finalize_status);
}

void group_set_cuda_stream(wsync_group_t* g, void* stream) { g->caller.stream = stream; }

}  // namespace wsync
