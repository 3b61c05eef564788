// See group_mailbox.h.
#include "group/group_mailbox.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "group/group_internal.h"

namespace wsync {
namespace {

using Lock = std::unique_lock<std::mutex>;

// check_usable with the lock held (see the header).
wsync_status_t usable_locked(wsync_group_t* g, Lock& lk) {
  Mailbox& m = g->mailbox;
  if (g->pipe.aborted.load()) {
    pipeline_wake(g);  // the pipeline thread tells the receivers and ends the engines' update
    const int64_t until = now_ms() + 60000;
    while (g->shape.http_engines && !m.abort_handled && !m.stop && now_ms() < until)
      m.cv.wait_for(lk, std::chrono::milliseconds(50));
    if (m.failed == WSYNC_ERR_ABORTED) return fail_msg(WSYNC_ERR_ABORTED, m.failed_why);
    return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted", g->cfg.group_name.c_str());
  }
  // The failure that broke the group, with its status (a receiver that did not answer in time is
  // PEER_FAILED, as send_wait reports it: TIMEOUT from these calls means "nothing started yet").
  if (m.failed != WSYNC_OK)
    return fail(m.failed == WSYNC_ERR_TIMEOUT ? WSYNC_ERR_PEER_FAILED : m.failed,
                "group '%s' cannot update any more: %s; destroy it and create a new one", g->cfg.group_name.c_str(),
                m.failed_why.c_str());
  return WSYNC_OK;
}

wsync_status_t room_locked(wsync_group_t* g, Lock& lk, int64_t deadline, int64_t timeout_ms) {
  Mailbox& m = g->mailbox;
  while (m.in_flight >= g->shape.staging_buckets && m.failed == WSYNC_OK && !g->pipe.aborted.load()) {
    if (now_ms() >= deadline)
      return fail(WSYNC_ERR_TIMEOUT, "group '%s': %llu batches are in flight (the most, option staging_buckets) and "
                  "none of them freed its tensors within %lld ms; nothing was started", g->cfg.group_name.c_str(),
                  static_cast<unsigned long long>(m.in_flight), static_cast<long long>(timeout_ms));
    m.cv.wait_for(lk, std::chrono::milliseconds(std::min(remaining_ms(deadline), 100)));
  }
  return usable_locked(g, lk);
}

// The first failure of the group wins; later calls report it.
void record_failure(Mailbox& m, wsync_status_t st, const std::string& why) {
  if (m.failed != WSYNC_OK) return;
  m.failed = st;
  m.failed_why = why;
}

}  // namespace

wsync_status_t mailbox_check_usable(wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  return usable_locked(g, lk);
}

wsync_status_t mailbox_wait_for_room(wsync_group_t* g, int64_t deadline, int64_t timeout_ms) {
  Lock lk(g->mailbox.mu);
  return room_locked(g, lk, deadline, timeout_ms);
}

wsync_status_t mailbox_post_batch(wsync_group_t* g, std::unique_ptr<Batch> b, wsync_status_t failed, bool published,
                                  int64_t deadline, int64_t timeout_ms,
                                  const std::function<wsync_status_t(Batch*)>& before_post, uint64_t* ticket) {
  Mailbox& m = g->mailbox;
  // The other senders count a batch whose record went out: a failure after that would leave every
  // later batch out of step, so it breaks the group.
  const auto broken = [&m, published](wsync_status_t st) {  // (under the lock)
    if (!published) return st;
    const std::string why = last_error();
    record_failure(m, st, why);
    return fail_msg(st, why);
  };
  Lock lk(m.mu);
  if (failed != WSYNC_OK) return broken(failed);
  wsync_status_t st = room_locked(g, lk, deadline, timeout_ms);
  if (st == WSYNC_OK) st = before_post(b.get());
  if (st != WSYNC_OK) return broken(st);
  b->ticket = m.next_ticket++;
  *ticket = b->ticket;
  m.in_flight++;
  Job job;
  job.batch = std::move(b);
  m.queue.push_back(std::move(job));
  m.cv.notify_all();
  return WSYNC_OK;
}

wsync_status_t mailbox_wait_ticket(wsync_group_t* g, uint64_t ticket, int64_t deadline, bool* pending) {
  *pending = false;
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  if (ticket == 0 || ticket >= m.next_ticket)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "ticket %llu was never handed out by group '%s' (the last one is %llu)",
                static_cast<unsigned long long>(ticket), g->cfg.group_name.c_str(),
                static_cast<unsigned long long>(m.next_ticket - 1));
  for (;;) {
    if (m.released_ticket >= ticket) return WSYNC_OK;
    if (m.failed != WSYNC_OK) return fail_msg(m.failed, m.failed_why);
    if (now_ms() >= deadline) {
      *pending = true;
      return WSYNC_ERR_TIMEOUT;
    }
    m.cv.wait_for(lk, std::chrono::milliseconds(std::min(remaining_ms(deadline), 100)));
  }
}

wsync_status_t mailbox_finalize(wsync_group_t* g, std::unique_ptr<FinalizeJob> job, bool* ended) {
  *ended = false;
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  wsync_status_t st = usable_locked(g, lk);
  if (st != WSYNC_OK) return st;
  if (job->version <= m.stats.committed_version)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "version %llu is not greater than the committed version %llu",
                static_cast<unsigned long long>(job->version), static_cast<unsigned long long>(m.stats.committed_version));
  m.finalize_done = false;
  Job j;
  j.finalize = std::move(job);
  m.queue.push_back(std::move(j));
  m.cv.notify_all();
  // Batches in flight are delivered first; every wait of the pipeline thread has its deadline.
  while (!m.finalize_done && m.failed == WSYNC_OK) m.cv.wait_for(lk, std::chrono::milliseconds(100));
  if (m.finalize_done && m.failed == WSYNC_OK) {
    *ended = true;
    return m.finalize_status == WSYNC_OK ? WSYNC_OK : fail_msg(m.finalize_status, m.finalize_why);
  }
  return fail_msg(m.failed != WSYNC_OK ? m.failed : m.finalize_status, m.failed_why);
}

MailboxTake mailbox_take(wsync_group_t* g, Job* job) {
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  if (m.stop) return MailboxTake::kStop;
  if (!m.queue.empty()) {
    *job = std::move(m.queue.front());
    m.queue.pop_front();
    m.idle = false;
    return MailboxTake::kJob;
  }
  return g->pipe.aborted.load() && !m.abort_handled ? MailboxTake::kAbortPending : MailboxTake::kEmpty;
}

void mailbox_abort_handled(wsync_group_t* g, const std::string& why) {
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  if (!why.empty()) record_failure(m, WSYNC_ERR_ABORTED, why);
  m.abort_handled = true;
  m.cv.notify_all();
}

void mailbox_busy(wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  g->mailbox.idle = false;
}

void mailbox_idle_wait(wsync_group_t* g) {
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  if (!m.queue.empty() || m.stop || (g->pipe.aborted.load() && !m.abort_handled)) return;
  m.idle = true;
  m.cv.notify_all();
  m.cv.wait_for(lk, std::chrono::milliseconds(100));
}

void mailbox_delivered(wsync_group_t* g, const Batch& b) {
  uint64_t bytes = 0;
  for (const auto& t : b.tensors) bytes += t.nbytes;
  const int64_t now = now_ms();
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  m.stats.batches++;
  m.stats.tensors += b.tensors.size();
  m.stats.bytes += bytes;
  m.stats.send_seconds += (now - std::max(b.started_ms, m.busy_until_ms)) / 1000.0;  // busy time, overlaps once
  m.busy_until_ms = now;
  m.cv.notify_all();
}

void mailbox_released(wsync_group_t* g, uint64_t ticket) {
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  if (ticket <= m.released_ticket || !m.released_ahead.insert(ticket).second) return;
  if (m.in_flight > 0) m.in_flight--;
  while (!m.released_ahead.empty() && *m.released_ahead.begin() == m.released_ticket + 1) {
    m.released_ticket++;
    m.released_ahead.erase(m.released_ahead.begin());
  }
  m.cv.notify_all();
}

bool mailbox_has_job(wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  return !g->mailbox.queue.empty() && !g->mailbox.stop;
}

void mailbox_bucket_done(wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  g->mailbox.stats.buckets++;
}

void mailbox_broken(wsync_group_t* g, wsync_status_t st, const std::string& why, std::deque<Job>* dropped) {
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  record_failure(m, st, why);
  if (dropped != nullptr) dropped->swap(m.queue);
  m.in_flight = 0;
  if (g->pipe.aborted.load()) m.abort_handled = true;  // told and abandoned by the caller of this
  m.cv.notify_all();
}

wsync_status_t mailbox_failure(wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  return g->mailbox.failed == WSYNC_OK ? WSYNC_OK : fail_msg(g->mailbox.failed, g->mailbox.failed_why);
}

void mailbox_finalized(wsync_group_t* g, uint64_t version, wsync_status_t st, bool committed, bool ended,
                       const std::string& why) {
  Mailbox& m = g->mailbox;
  Lock lk(m.mu);
  if (committed) m.stats.committed_version = version;
  if (committed || ended) m.stats.updates++;  // (one that failed but ended: the next is another update)
  m.finalize_status = st;
  m.finalize_why = st == WSYNC_OK ? std::string() : ended ? why : m.failed_why;
  m.finalize_done = true;
  m.cv.notify_all();
}

void mailbox_open(wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  g->mailbox.stats.num_receivers = g->shape.num_receivers;
}

bool mailbox_stop(wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  g->mailbox.stop = true;
  return !g->mailbox.idle || !g->mailbox.queue.empty();
}

void mailbox_notify(wsync_group_t* g) { g->mailbox.cv.notify_all(); }

wsync_group_stats_t mailbox_stats(const wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  return g->mailbox.stats;
}

uint64_t mailbox_committed_version(const wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  return g->mailbox.stats.committed_version;
}

uint64_t mailbox_updates(const wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  return g->mailbox.stats.updates;
}

bool mailbox_closed(const wsync_group_t* g) {
  Lock lk(g->mailbox.mu);
  return g->mailbox.stop || g->mailbox.failed != WSYNC_OK;
}

}  // namespace wsync
