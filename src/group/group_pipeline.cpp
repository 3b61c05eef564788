// The pipeline thread: it takes started batches and finalizes from the queue, in order, and moves
// them. Buckets are a stream across batches: while bucket k is on the wire the next one is packed,
// from the same batch or from the next batch already started. A batch is delivered when all its
// buckets are; delivery and failure are published to the callers through the mailbox (group_mailbox.h).
//
// A failure breaks the group: the bucket on the wire is cancelled with every receiver (its bytes
// may be the caller's), queued copies are waited for, receivers are told the update is void, and
// every batch in flight and every later call reports the failure. Elastic groups go on instead when
// receivers left (the update commits by quorum or fails at its finalize; with nobody left, its
// batches are released unsent: void_update).
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <deque>

#include "common/api_guard.h"
#include "common/error.h"
#include "control/frames.h"
#include "group/engine_members.h"
#include "group/group_bucket.h"
#include "group/group_device.h"
#include "group/group_internal.h"
#include "group/group_mailbox.h"
#include "group/group_catchup.h"
#include "group/group_members.h"

namespace wsync {
namespace {

// Take the next job: block while there is none (an abort in the middle of an update is announced
// to receivers meanwhile); false when the group is being destroyed.
bool take_job(wsync_group_t* g, Job* job, bool block) {
  for (;;) {
    const MailboxTake took = mailbox_take(g, job);
    if (took == MailboxTake::kStop) return false;
    if (took == MailboxTake::kJob) return true;
    if (!block) return false;
    if (took == MailboxTake::kAbortPending) {
      announce_group_aborted(g);  // (once: nothing if a failure announced it)
      const bool engines_open = g->engines.update_open;
      engines_abandon(g);  // an engine-side update begun: end it (nothing when none is open)
      const std::string note = engines_failure_note(g, engines_open);  // (later calls report the engines' state)
      mailbox_abort_handled(g, note.empty() ? note : "group '" + g->cfg.group_name + "' was aborted" + note);
      continue;
    }
    if (g->cfg.elastic && !g->pipe.update_begun) {  // between updates: receivers that came join now
      mailbox_busy(g);  // (busy meanwhile: a destroy aborts it rather than wait for it)
      members_admit(g);
    }
    mailbox_idle_wait(g);  // (at once when a job, a stop or an abort came meanwhile)
  }
}

void release_event(wsync_group_t* g, Batch* b) {
  device_recycle_event(g, b->cuda_event);
  b->cuda_event = nullptr;
}

// Publish every batch at the front whose buckets are all delivered.
wsync_status_t deliver_finished(wsync_group_t* g, BatchList* active) {
  while (!active->empty() && active->front()->delivered == active->front()->plan.size()) {
    wsync_status_t st = announce_alone(g, active->front().get());  // no bucket of it here: its UPDATE now
    if (st != WSYNC_OK) return st;
    std::unique_ptr<Batch> b = std::move(active->front());
    active->pop_front();
    release_event(g, b.get());
    mailbox_delivered(g, *b);
  }
  return WSYNC_OK;
}

// Batch `b` joins the stream (one without buckets reads no memory: released at once).
void activate(wsync_group_t* g, BatchList* active, std::unique_ptr<Batch> b) {
  Batch* batch = b.get();
  active->push_back(std::move(b));
  if (batch->plan.empty()) mailbox_released(g, batch->ticket);
}

// The next bucket of the stream (its batch's next one, or the first of a batch taken from the
// queue now), or nullptr. A finalize met in the queue is kept in *held: it runs after the batches.
std::unique_ptr<InflightBucket> next_bucket(wsync_group_t* g, BatchList* active, Job* held) {
  for (;;) {
    for (auto& b : *active)
      if (b->prepared < b->plan.size()) {
        auto ib = std::make_unique<InflightBucket>();
        ib->batch = b.get();
        ib->index = b->prepared++;
        ib->slot = staging_next_slot(g);
        return ib;
      }
    if (held->finalize) return nullptr;
    Job job;
    if (!take_job(g, &job, false)) return nullptr;
    if (job.finalize) {
      *held = std::move(job);
      return nullptr;
    }
    activate(g, active, std::move(job.batch));
  }
}

// After a failure: nothing may read the caller's memory once the failure is published.
void break_group(wsync_group_t* g, Flight* flight, wsync_status_t st, BatchList* active) {
  std::string why = last_error();
  const bool engines_open = g->engines.update_open;
  bool posted = false;
  if (flight != nullptr)
    for (auto& b : *flight) posted |= b->posted;
  // The receivers hear why first: a receiver of many senders whose transport to this one fails
  // (the forgets below) then reports this abort, which names the cause, not this sender.
  announce_abort(g, g->pipe.aborted.load() ? "the sender aborted the group" : why);
  if (posted && g->plugins.transport_self) {  // the buckets on the wire are cancelled with every receiver
    for (auto& p : g->members.peers)
      if (p->alive) g->plugins.transport.table->forget_peer(g->plugins.transport_self, p->rank);
    if (g->members.peers.empty())  // unmodified HTTP engines: the bucket went to every engine rank
      for (uint32_t r : g->route.delivery.children(0)) g->plugins.transport.table->forget_peer(g->plugins.transport_self, r);
  }
  if (flight != nullptr)
    for (auto& b : *flight) {
      b->posted = false;
      b->update_calls.cancel();
    }
  for (auto& b : *active) announce_cancel(b.get());
  if (g->dev.copy_stream != nullptr && device_wait_copies(g) != WSYNC_OK)
    WSYNC_LOGW("group '%s': waiting for wsync's copy stream after a failure: %s", g->cfg.group_name.c_str(),
               last_error().c_str());
  engines_abandon(g);  // the engines' update ends too (best effort, bounded)
  why += engines_failure_note(g, engines_open);
  for (auto& b : *active) release_event(g, b.get());
  active->clear();
  std::deque<Job> dropped;
  mailbox_broken(g, st, why, &dropped);
  for (auto& j : dropped)
    if (j.batch) release_event(g, j.batch.get());
}

// Elastic groups whose every receiver left: nobody to deliver to, nothing to break. (Many senders
// go on agreeing on every batch on their callers' threads meanwhile; each voids the update when it
// has lost them all. HTTP engines: the dropped servers are checked again between updates.)
bool nobody_left(const wsync_group_t* g) {
  return g->cfg.elastic && !g->pipe.aborted.load() && members_left_in(g) == 0;
}

// The current update has nobody left to go to (`why`): what is on the wire is cancelled as after a
// failure (every member's transport peer was forgotten as it left), the batches in flight and any
// later batch of the update are released unsent, and its finalize fails with `why`; the group is
// not broken: the next update takes the receivers that join meanwhile.
void void_update(wsync_group_t* g, Flight* flight, BatchList* active, const std::string& why) {
  WSYNC_LOGW("group '%s': %s; the update's batches are released unsent and its finalize fails; the next update "
             "takes the receivers that join meanwhile", g->cfg.group_name.c_str(), why.c_str());
  g->pipe.update_void = why;
  if (flight != nullptr)
    for (auto& b : *flight) b->update_calls.cancel();
  if (g->dev.copy_stream != nullptr && device_wait_copies(g) != WSYNC_OK)
    WSYNC_LOGW("group '%s': waiting for wsync's copy stream after the last receiver left: %s",
               g->cfg.group_name.c_str(), last_error().c_str());
  for (auto& b : *active) {
    announce_cancel(b.get());
    release_event(g, b.get());
    mailbox_released(g, b->ticket);
  }
  active->clear();
  clear_error();
}

// The update's batches failed (`st`): void when nobody is left, or when another sender abandoned
// the update (what is on the wire here finishes first; a send that cannot finish breaks the group,
// as any failure); else the group breaks.
void batches_failed(wsync_group_t* g, Flight* flight, BatchList* active, wsync_status_t st) {
  if (nobody_left(g)) return void_update(g, flight, active, last_error());
  if (g->pipe.update_abandoned) {
    const std::string why = last_error();
    if ((st = flight_drain_sends(g, flight)) == WSYNC_OK) return void_update(g, flight, active, why);
  }
  break_group(g, flight, st, active);
}

// Move every batch of the stream, starting with `first`, until none is left to move: the next
// bucket is packed while the flight moves (when a staging slot is free), sent when the window has
// room, and the oldest of the flight is completed when neither can go on.
void run_batches(wsync_group_t* g, std::unique_ptr<Batch> first, Job* held) {
  BatchList active;
  activate(g, &active, std::move(first));
  Flight flight;
  std::unique_ptr<InflightBucket> ready;  // prepared, not sent yet
  const auto progress = [g, &flight] { return flight_progress(g, &flight); };
  // While the oldest bucket awaits its ACKs, a batch the caller started meanwhile (its last one's
  // memory was released) goes on the wire as soon as there is room: no drain between batches.
  const auto give_way = [g, &ready, &flight, held] {
    return !ready && !held->finalize && flight.size() < g->shape.staging_buckets && mailbox_has_job(g);
  };
  wsync_status_t st = WSYNC_OK;
  for (;;) {
    if (!ready && flight.size() < g->shape.staging_buckets && (ready = next_bucket(g, &active, held)) &&
        (st = bucket_prepare(g, ready.get(), progress)) != WSYNC_OK)
      break;
    if (ready && flight.size() < g->shape.window) {
      // (senders that plan, HTTP engines: an earlier batch of which this sender sends nothing
      // gets its UPDATE first, so that the engines see them in batch order)
      if ((st = announce_before(g, active, ready->batch)) != WSYNC_OK) break;
      flight.push_back(std::move(ready));
      if ((st = bucket_send(g, &flight)) != WSYNC_OK) break;
      continue;
    }
    if (flight.empty()) break;
    bool done = false;
    if ((st = bucket_complete(g, &flight, give_way, &done)) != WSYNC_OK) break;
    if (!done) continue;
    flight.front()->batch->delivered++;
    flight.pop_front();
    mailbox_bucket_done(g);
    if ((st = deliver_finished(g, &active)) != WSYNC_OK) break;
  }
  if (st == WSYNC_OK) st = deliver_finished(g, &active);  // batches without buckets
  if (st != WSYNC_OK) batches_failed(g, &flight, &active, st);
}

// One receiver's answer to END_UPDATE, if it has come (*done: it committed `version`).
wsync_status_t take_committed(wsync_group_t* g, Peer* p, uint64_t version, const std::string& what, bool* done) {
  *done = false;
  InboxContext ctx;
  ctx.during = what.c_str();
  Frame f;
  InboxWord word = InboxWord::kNone;
  wsync_status_t st = inbox_take(g, p, ctx, &f, &word);
  if (st != WSYNC_OK || word != InboxWord::kAnswer) return st;
  if (f.type == static_cast<uint16_t>(MsgType::kNack)) {
    StatusBody nack;
    if (decode_nack(f.body, &nack) != WSYNC_OK)
      return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed NACK to %s: %s", p->conn.peer_name().c_str(), what.c_str(),
                  last_error().c_str());
    return fail(wire_failure(nack.status, WSYNC_ERR_PROTOCOL), "%s refused %s: %s", p->conn.peer_name().c_str(),
                what.c_str(), nack.reason.c_str());
  }
  if ((st = check_committed(f, version, p->conn.peer_name())) != WSYNC_OK) return st;
  p->holds_version = version;  // (a catch-up source must hold the group's version)
  p->catchup.suspect = false;
  members_note_holds(g, p->rank, version);
  *done = true;
  return WSYNC_OK;
}


// END_UPDATE to every member (a receiver that cannot be told fails as a member).
wsync_status_t send_end_update(wsync_group_t* g, const FinalizeJob& job, const std::string& what) {
  wsync_status_t st = WSYNC_OK;
  for (auto& p : g->members.peers) {
    if (p->dropped) continue;
    // Many senders: each receiver was sent only the buckets of the boxes it needs.
    const uint64_t buckets = g->shape.planned ? p->buckets : g->wire.bucket_in_update;
    const std::vector<uint8_t> body =
        encode_end_update({job.version, g->wire.update_id, buckets, g->shape.planned, job.plan_digest});
    if ((st = p->conn.send(MsgType::kEndUpdate, body, job.timeout_ms)) != WSYNC_OK) {
      if (st == WSYNC_ERR_PEER_FAILED) st = peer_lost(g, p.get(), what.c_str());
      if ((st = member_failed(g, nullptr, p.get(), st)) != WSYNC_OK) return st;
    }
  }
  return WSYNC_OK;
}

// The members that did not answer COMMITTED within wait_ms fail (elastic: each is removed).
wsync_status_t committed_timed_out(wsync_group_t* g, const WaitSet& ws, const std::string& what, int64_t wait_ms) {
  wsync_status_t st = fail(WSYNC_ERR_TIMEOUT, "%s did not answer COMMITTED of %s within %lld ms",
                           peer_names(ws.peers).c_str(), what.c_str(), static_cast<long long>(wait_ms));
  if (!g->cfg.elastic) return st;
  for (Peer* p : ws.peers) {
    st = fail(WSYNC_ERR_TIMEOUT, "%s did not answer COMMITTED of %s within %lld ms", p->conn.peer_name().c_str(),
              what.c_str(), static_cast<long long>(wait_ms));
    if ((st = member_failed(g, nullptr, p, st)) != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

// Every member's COMMITTED of the version, taken in whatever order they come: a receiver that
// answered early must not keep poll() waking while an earlier rank is still applying.
wsync_status_t await_committed(wsync_group_t* g, const FinalizeJob& job, const std::string& what) {
  // Many senders: a receiver commits once every sender finalized, and names a sender that did not
  // within timeout_ms of the first; we wait a little longer, so its NACK says who it was.
  const int64_t wait_ms = job.timeout_ms + (g->shape.num_senders > 1 && job.timeout_ms < INT64_MAX - kSendersGraceMs
                                                ? kSendersGraceMs : 0);
  const int64_t deadline = deadline_after(wait_ms);
  WaitSet ws;
  for (auto& p : g->members.peers)
    if (!p->dropped) ws.peers.push_back(p.get());
  wsync_status_t st = WSYNC_OK;
  while (!ws.peers.empty()) {
    for (size_t i = 0; i < ws.peers.size();) {
      bool done = ws.peers[i]->dropped;  // (elastic: removed meanwhile, e.g. below a relay that left)
      if (!done && (st = take_committed(g, ws.peers[i], job.version, what, &done)) != WSYNC_OK) {
        if ((st = member_failed(g, nullptr, ws.peers[i], st)) != WSYNC_OK) return st;
        done = true;  // (elastic: removed)
      }
      if (done) ws.peers.erase(ws.peers.begin() + static_cast<std::ptrdiff_t>(i));
      else ++i;
    }
    if (ws.peers.empty()) break;
    if (g->pipe.aborted.load())
      return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted during %s", g->cfg.group_name.c_str(), what.c_str());
    if (now_ms() >= deadline) return committed_timed_out(g, ws, what, wait_ms);
    wait_for_progress(g, ws, deadline);
  }
  return WSYNC_OK;
}

// Elastic: receivers that left after END_UPDATE (from `lost_before` on) did not confirm; the others
// committed. Still at least the quorum (or, without one, nobody lost): committed; else the caller
// hears who left.
wsync_status_t check_late_losses(wsync_group_t* g, const FinalizeJob& job, size_t lost_before) {
  const std::vector<std::string>& lost = g->members.dropped_in_update;
  if (lost.size() <= lost_before || members_may_commit(g, job.version) == WSYNC_OK) return WSYNC_OK;
  g->pipe.update_lost_members = true;
  g->pipe.update_committed_partly = true;
  std::string left;
  for (size_t i = lost_before; i < lost.size(); ++i) left += (left.empty() ? "" : "; ") + lost[i];
  return fail(WSYNC_ERR_PEER_FAILED, "version %llu was committed on the %u receiver(s) left, fewer than %s: %s did "
              "not confirm it (%s)", static_cast<unsigned long long>(job.version), members_left_in(g),
              g->cfg.commit_quorum ? ("the quorum of " + std::to_string(g->cfg.commit_quorum)).c_str() : "all of them",
              lost.size() - lost_before == 1 ? "a receiver" : "receivers", left.c_str());
}

// The commit: the engines' finalize, END_UPDATE to the members, their COMMITTED, then the engines
// resume. Elastic: whether enough members are left is asked before END_UPDATE and after.
wsync_status_t commit(wsync_group_t* g, const FinalizeJob& job) {
  const std::string what = "the commit of version " + std::to_string(job.version);
  wsync_status_t st = WSYNC_OK;
  // HTTP engines: their end-of-update markers (cache flush, version, LMDeploy's finished) first.
  // An update without buckets still opens first: the engines' finalize needs its start (SGLang's
  // session, vLLM's start_weight_update).
  if (g->shape.http_engines && (st = open_update(g)) != WSYNC_OK) return st;
  if (g->shape.http_engines && (st = engines_step(g, WSYNC_STEP_FINALIZE, job.version)) != WSYNC_OK) return st;
  // Elastic membership: receivers removed during the update; enough left to commit?
  if ((st = members_may_commit(g, job.version)) != WSYNC_OK) {
    g->pipe.update_lost_members = true;
    return st;
  }
  const size_t lost_before = g->members.dropped_in_update.size();  // (removals from here on: after the decision)
  if ((st = send_end_update(g, job, what)) != WSYNC_OK) return st;
  if ((st = await_committed(g, job, what)) != WSYNC_OK) return st;
  if ((st = check_late_losses(g, job, lost_before)) != WSYNC_OK) return st;
  // (HTTP engines: the last server may be dropped at its RESUME, after every receiver committed)
  if ((st = engines_update_committed(g)) != WSYNC_OK && nobody_left(g)) {
    g->pipe.update_lost_members = g->pipe.update_committed_partly = true;
    st = fail_msg(st, "version " + std::to_string(job.version) + " was committed on every receiver, then " + last_error());
  }
  return st;
}

void run_finalize(wsync_group_t* g, const FinalizeJob& job) {
  // A batch before it failed (the group is broken, receivers were told to drop the update): never
  // commit what they do not all have.
  wsync_status_t st = mailbox_failure(g);
  const bool broken = st != WSYNC_OK;
  g->pipe.update_lost_members = g->pipe.update_committed_partly = false;
  if (!broken && g->pipe.aborted.load()) {
    st = fail(WSYNC_ERR_ABORTED, "group '%s' was aborted", g->cfg.group_name.c_str());
  } else if (!broken && !g->pipe.update_void.empty()) {  // (nobody was left to deliver it to)
    st = fail(WSYNC_ERR_PEER_FAILED, "version %llu does not commit: %s", static_cast<unsigned long long>(job.version),
              g->pipe.update_void.c_str());
    g->pipe.update_lost_members = true;
  } else if (!broken) {
    st = commit(g, job);
    g->pipe.update_lost_members |= st != WSYNC_OK && g->pipe.update_abandoned;  // (another sender aborted it)
    if (st != WSYNC_OK && nobody_left(g) && !g->pipe.update_lost_members) {  // (the last left during the commit)
      g->pipe.update_lost_members = true;
      st = fail_msg(st, "version " + std::to_string(job.version) + " does not commit: " + last_error());
    }
  }
  const bool partly = g->pipe.update_committed_partly;
  if (broken) {
    // nothing more to do: the failure was published by break_group
  } else if (st != WSYNC_OK && g->pipe.update_lost_members) {
    // Elastic: receivers left and too few remain; the others drop the update (those that committed
    // it keep it) and the group takes the next one.
    const std::string why = last_error();
    if (partly) {
      engines_resume_committed(g);  // (HTTP engines: the live ones committed it at FINALIZE)
      members_committed(g);
      wire_next_update(g);
    } else {
      end_failed_update(g, why);
      engines_abandon(g);  // (HTTP engines: the live servers' update ends, as after any failure)
    }
    fail_msg(st, why);
    WSYNC_LOGW("group '%s': %s", g->cfg.group_name.c_str(), why.c_str());
  } else if (st != WSYNC_OK) {
    BatchList none;
    break_group(g, nullptr, st, &none);
  } else {
    wire_next_update(g);
    members_committed(g);
    WSYNC_LOGI("group '%s': version %llu committed on %u receiver(s)", g->cfg.group_name.c_str(),
               static_cast<unsigned long long>(job.version), g->shape.num_receivers - static_cast<uint32_t>(g->members.peers.size()) +
               members_left_in(g));
  }
  mailbox_finalized(g, job.version, st, st == WSYNC_OK || partly, g->pipe.update_lost_members,
                    st == WSYNC_OK ? std::string() : last_error());
}

void pipeline_main(wsync_group_t* g) {
  Job held;
  for (;;) {
    Job job;
    if (held.finalize) {
      job = std::move(held);
      held = Job();
    } else if (!take_job(g, &job, true)) {
      return;
    }
    if (job.batch) {
      if (!g->pipe.update_begun) {  // the update's first batch: receivers that came meanwhile join first
        members_admit(g, &job.batch->admit, &job.batch->catchup);
        engines_before_update(g);  // (HTTP engines: no member whose server is not live)
        g->pipe.update_begun = true;
        if (nobody_left(g))
          g->pipe.update_void = "no receiver is in group '" + g->cfg.group_name + "' (they left or have not joined yet)";
      }
      if (g->pipe.update_void.empty()) {
        run_batches(g, std::move(job.batch), &held);
      } else {  // (released unsent: see void_update)
        release_event(g, job.batch.get());
        mailbox_released(g, job.batch->ticket);
      }
    } else if (job.finalize) {
      if (!g->pipe.update_begun) {  // (an update without batches)
        members_settle_moves(g);
        engines_before_update(g);
      }
      run_finalize(g, *job.finalize);
      members_update_ended(g, job.finalize->version);
      g->pipe.update_begun = false;
      g->pipe.update_void.clear();
      g->pipe.update_abandoned = false;
    }
  }
}

}  // namespace

wsync_status_t pipeline_start(wsync_group_t* g) {
  mailbox_open(g);
  g->pipe.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (g->pipe.wake_fd < 0) return fail(WSYNC_ERR_IO, "group '%s': cannot create its wake-up eventfd", g->cfg.group_name.c_str());
  try {
    g->pipe.thread = std::thread([g] {
      try {
        pipeline_main(g);
      } catch (...) {
        const wsync_status_t st = fail_exception("wsync pipeline thread", std::current_exception());
        try {
          BatchList none;
          break_group(g, nullptr, st, &none);  // (the flight was the pipeline's: nothing of it is known here)
        } catch (...) {  // even the failure could not be published in full: publish the status alone
          mailbox_broken(g, st, std::string(), nullptr);
        }
      }
    });
  } catch (const std::exception& e) {
    return fail(WSYNC_ERR_INTERNAL, "group '%s': cannot start its pipeline thread: %s", g->cfg.group_name.c_str(), e.what());
  }
  return WSYNC_OK;
}

void pipeline_update_abandoned(wsync_group_t* g) { g->pipe.update_abandoned = true; }

void pipeline_wake(wsync_group_t* g) {
  if (g->pipe.wake_fd >= 0) {
    uint64_t one = 1;
    ssize_t r = ::write(g->pipe.wake_fd, &one, sizeof one);
    (void)r;
  }
  mailbox_notify(g);
}

void batch_bucket_released(wsync_group_t* g, Batch* b) {
  if (++b->released < b->plan.size()) return;
  if (g->cfg.elastic) members_record_digests(g, *b);  // (before the caller has its memory back)
  mailbox_released(g, b->ticket);
}

void pipeline_abort(wsync_group_t* g) {
  g->pipe.aborted.store(true);
  if (g->plugins.transport_self && g->plugins.transport.table->abort) g->plugins.transport.table->abort(g->plugins.transport_self);
  pipeline_wake(g);
}

void pipeline_stop(wsync_group_t* g) {
  if (g->pipe.thread.joinable()) {
    const bool busy = mailbox_stop(g);
    // Batches still in flight are abandoned: the pipeline thread sees the abort in its next wait,
    // cancels what is on the wire and tells the receivers. An idle group needs none of that.
    const bool abort_now = busy && !g->pipe.aborted.load();
    if (abort_now) {
      g->pipe.aborted.store(true);
      if (g->plugins.transport_self && g->plugins.transport.table->abort) g->plugins.transport.table->abort(g->plugins.transport_self);
    }
    pipeline_wake(g);
    g->pipe.thread.join();
    if (abort_now) g->pipe.aborted.store(false);  // the rest of the teardown (leaving the engines) is not aborted
  }
  if (g->pipe.wake_fd >= 0) ::close(g->pipe.wake_fd);
  g->pipe.wake_fd = -1;
}

}  // namespace wsync
