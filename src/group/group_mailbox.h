// The mailbox between the caller's thread and the pipeline thread (part `mailbox` of wsync_group):
// started batches and finalizes go in, results come out. Every read and write of it is here,
// under its mutex; the callers on either side see only these functions.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "group/group.h"

namespace wsync {

// ---- The caller's thread (group_submit.cpp)

// Aborted, or broken by an earlier failure: nothing new may start, and the status says why (after
// an abort, once the pipeline thread ended the engines' update, bounded).
wsync_status_t mailbox_check_usable(wsync_group_t* g);
// Until fewer than staging_buckets batches are in flight (or the deadline), then check_usable.
wsync_status_t mailbox_wait_for_room(wsync_group_t* g, int64_t deadline, int64_t timeout_ms);
// Queue batch `b`: room first, then `before_post` (under the lock: the CUDA event recorded now sees
// what the caller queued until this call), then its ticket. `published`: the other senders counted
// it already, so a failure from here on breaks the group. `failed`: a failure met before this call
// (it breaks the group the same way, and is returned).
wsync_status_t mailbox_post_batch(wsync_group_t* g, std::unique_ptr<Batch> b, wsync_status_t failed, bool published,
                                  int64_t deadline, int64_t timeout_ms,
                                  const std::function<wsync_status_t(Batch*)>& before_post, uint64_t* ticket);
// Until batch `ticket` (and every one before it) released the caller's memory, or the group failed,
// or the deadline (*pending: still borrowed then; WSYNC_ERR_TIMEOUT without a message).
wsync_status_t mailbox_wait_ticket(wsync_group_t* g, uint64_t ticket, int64_t deadline, bool* pending);
// Queue the finalize and wait for it. *ended: the update ended (committed, or elastic: it failed
// because receivers left) and the group takes the next one; else the group broke.
wsync_status_t mailbox_finalize(wsync_group_t* g, std::unique_ptr<FinalizeJob> job, bool* ended);

// ---- The pipeline thread (group_pipeline.cpp)

enum class MailboxTake { kJob, kEmpty, kAbortPending, kStop };
// The next job, if one is queued (the pipeline is busy from here); kAbortPending: the group was
// aborted and nobody has handled it yet; kStop: the group is being destroyed.
MailboxTake mailbox_take(wsync_group_t* g, Job* job);
// The abort was handled (receivers told, engines' update ended); `why`, when not empty, is what
// later calls report.
void mailbox_abort_handled(wsync_group_t* g, const std::string& why);
// Busy without a job (elastic joins between updates): a destroy aborts rather than waits.
void mailbox_busy(wsync_group_t* g);
// Idle: wait a little (100 ms) for a job, unless one, a stop or an unhandled abort is there.
void mailbox_idle_wait(wsync_group_t* g);
// Batch `ticket` no longer reads the caller's memory; its waiters return once every batch before it
// did too (the pipeline has room for another).
void mailbox_released(wsync_group_t* g, uint64_t ticket);
// A job is queued and the group is not being destroyed (the pipeline thread may stop waiting on
// the oldest bucket to take it).
bool mailbox_has_job(wsync_group_t* g);
// Batch `b` was delivered: the stats.
void mailbox_delivered(wsync_group_t* g, const Batch& b);
// One more bucket delivered (stats).
void mailbox_bucket_done(wsync_group_t* g);
// The group broke with `st` and `why` (the first failure wins): the queued jobs come back in
// *dropped, nothing is in flight any more.
void mailbox_broken(wsync_group_t* g, wsync_status_t st, const std::string& why, std::deque<Job>* dropped);
// The failure that broke the group, as the status and error detail (WSYNC_OK: none).
wsync_status_t mailbox_failure(wsync_group_t* g);
// The finalize job ended with `st`: `committed` (the version is the group's now, maybe on some
// receivers only), `ended` (elastic: it failed because receivers left, and the group takes the next
// update; `why` is then the caller's message, else the group's failure is).
void mailbox_finalized(wsync_group_t* g, uint64_t version, wsync_status_t st, bool committed, bool ended,
                       const std::string& why);
// Before the pipeline thread starts.
void mailbox_open(wsync_group_t* g);
// Destroy: the pipeline thread ends at its next look; true when it is busy (or work is queued).
bool mailbox_stop(wsync_group_t* g);
// Wake every wait on the mailbox.
void mailbox_notify(wsync_group_t* g);

// ---- Readers (any thread)

wsync_group_stats_t mailbox_stats(const wsync_group_t* g);
uint64_t mailbox_committed_version(const wsync_group_t* g);
// Updates ended so far (the one in progress is this + 1).
uint64_t mailbox_updates(const wsync_group_t* g);
// Destroyed or broken: no more joining.
bool mailbox_closed(const wsync_group_t* g);

}  // namespace wsync
