// Membership (docs/ABI.md "Membership"). With option membership=elastic a receiver that fails (its
// connection or process ended, it did not answer within timeout_ms, it refused a bucket) is removed
// from the group instead of breaking it: the transport forgets it, its control connection closes
// (it sees the group end), the buckets on the wire stop waiting for it, and a member event names
// it. The update in progress goes on with the others; at its commit it commits when enough of them
// remain (option commit_quorum; default: all), otherwise it fails naming who left, the others are
// told to drop it, and the group takes the next update.
#pragma once

#include <string>
#include <vector>

#include "group/group_bucket.h"

namespace wsync {

// A receiver failed with `st` (the message already recorded with fail()). Fixed membership: the
// failure, as it was. Elastic: `p` is removed (from `flight`'s waits too, when given) and WSYNC_OK
// comes back, so that the caller goes on without it; the failure again when no receiver is left.
wsync_status_t member_failed(wsync_group_t* g, Flight* flight, Peer* p, wsync_status_t st);

// Options membership and commit_quorum agree with the rest (after every option was read).
wsync_status_t members_check_options(wsync_group_t* g);
// membership=elastic needs a transport that forgets one rank and keeps the others (CAP_FORGET_ONE).
wsync_status_t members_check_transport(wsync_group_t* g);
// Init: a slot per rank, empty until its receiver is welcomed (members_seat: HELLO checked).
void members_open_slots(wsync_group_t* g);
void members_seat(wsync_group_t* g, std::unique_ptr<Peer> p);
// Teardown: every receiver is told the group closed (CLOSE, then a half-close and a drain, so the
// last frames are not lost to a TCP reset), and forgotten.
void members_close(wsync_group_t* g);
// Every receiver joined: they are the members.
void members_init(wsync_group_t* g);
// Init is done waiting (option init_receivers): the ranks that did not join hold a placeholder that
// reads as removed (dropped, not alive), so that they may join between updates.
void members_absent(wsync_group_t* g);
// Can receivers join after init (the transport connects one receiver later: connect_peer)?
bool members_can_join(const wsync_group_t* g);
// Between updates (pipeline thread; nothing when the group is fixed, an update is under way, or the
// group failed): receivers that came since join. Each one's JOINED is awaited and the transport
// connects to it; it then is a member (a WSYNC_MEMBER_JOINED event) and takes the next update. One
// that fails to join is named in a warning and left out (it may try again). Many senders: a joiner
// whose join is done waits (admission_ready) until the first batch of an update whose `agreed`
// joiners (every sender has them: senders_plan_batch) name it; nullptr between updates. `picks`:
// the catch-ups of those joiners (every sender tells the source and the joiner of each). Then the
// route is re-planned around the members that stayed (route_replan); before an update's first
// batch, every member asked to move answers or is removed.
void members_admit(wsync_group_t* g, const std::vector<uint32_t>* agreed = nullptr, const CatchupPicks* picks = nullptr);
// An update without batches (its finalize first): the members a re-plan asked to move while idle
// answer first (their answer would come where the commit's is read), or are removed. No new round.
void members_settle_moves(wsync_group_t* g);

// The receivers still in the group.
uint32_t members_left_in(const wsync_group_t* g);

// ---- What the caller reads (any thread)
// The member ranks now, in order (unmodified HTTP engines: every rank).
std::vector<uint32_t> members_ranks(const wsync_group_t* g);
// How many are members now, and how many receivers left the group so far (stats).
void members_counts(const wsync_group_t* g, uint32_t* members, uint32_t* left);
// The next member event, its reason valid until the next call; false when there is none new.
bool members_take_event(wsync_group_t* g, wsync_member_event_t* e);

// Before END_UPDATE: may the update commit on the members left? When receivers were removed
// during it and fewer than the quorum remain, the update fails here naming them (the caller then
// ends it with end_failed_update).
wsync_status_t members_may_commit(wsync_group_t* g, uint64_t version);

// An elastic update that failed because receivers left: the others are told to drop it (staged
// receivers keep their bytes) and the group is ready for the next update.
void end_failed_update(wsync_group_t* g, const std::string& why);

// Elastic groups (pipeline thread): the digest of every tensor of delivered batch `b`, as this
// sender sent it, for the catch-ups of later joiners (what a source serves is checked against these).
// Many senders: one digest per part (the box cut for the receivers that needed it).
void members_record_digests(wsync_group_t* g, const Batch& b);

// Member `rank` confirmed `version` (0: it may serve no catch-up now: it left, or a catch-up from
// it failed), for members_holds (pipeline thread writes).
void members_note_holds(wsync_group_t* g, uint32_t rank, uint64_t version);
// What each member holds, by rank - 1 (any thread).
std::vector<uint64_t> members_holds(const wsync_group_t* g);

// After a commit (or between updates): the update's removals are history.
void members_committed(wsync_group_t* g);

// The finalize of `version` ended (pipeline thread): when it committed, the tensors it carried
// join the group's committed names (what a catch-up must bring); either way they are forgotten.
void members_update_ended(wsync_group_t* g, uint64_t version);

}  // namespace wsync
