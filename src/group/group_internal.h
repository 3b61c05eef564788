// The pieces of the sender's group and who calls them. Each file holds one job:
//
//   group_api.cpp       the exported wsync_group_* functions: argument checks, each behind api_call
//   group_options.cpp   the group options, each key parsed and range-checked
//   group_init.cpp      init, step by step (plugins, rendezvous, transport, joining), and teardown
//   group_join.cpp      accepting receivers on the control port (CHALLENGE, HELLO, JOINED)
//   group_route.cpp     the route: planned from the receivers' hosts, ROUTE to each, JOINED again
//   group_members.cpp   membership=elastic: a receiver that failed removed, member events, quorum
//   group_catchup.cpp   catch-up: a joiner paired with a member that holds the committed version
//   group_senders.cpp   many senders: each batch's records, the plan and its digest via sender 0
//   group_submit.cpp    the caller's side of send_start / send_wait / finalize
//   group_declare.cpp   the declared update: batches and finalize checked against it, and the
//                       engines' CHECK of it when the update opens
//   group_mailbox.cpp   the mailbox between the caller's thread and the pipeline thread
//   group_pipeline.cpp  the pipeline thread: jobs in order, delivery and failure bookkeeping
//   group_bucket.cpp    the buckets on the wire: MANIFEST -> READY -> send_post -> BUCKET_SUM, ACK
//   group_inbox.cpp     one inbox per member: every frame a receiver sends, unasked ones handled once
//   group_stage.cpp     making a bucket's bytes ready (zero copy, or packing into staging)
//   group_wait.cpp      waiting for receivers and the transport without spinning
//   group_device.cpp    CUDA staging, the copy stream, ordering after the caller's stream
//   group_engines.cpp   HTTP engines: the steps of a group's life (HEALTH, PROBE, RESET, ABANDON)
//   engine_calls.cpp    HTTP engines, one step: the adapter's requests, sent to every server
//   engine_members.cpp  HTTP engines of an elastic group: servers dropped and brought back
//   group_announce.cpp  HTTP engines of senders that plan: one UPDATE per batch, from sender 0
#pragma once

#include <string>
#include <vector>

#include "common/options.h"
#include "group/group.h"

namespace wsync {

// ---- group_options.cpp
// The config's own fields and its options, into g->cfg; `addr_file`: option store_addr_file.
wsync_status_t apply_group_config(const wsync_group_config_t& config, const OptionList& opts, wsync_group_t* g,
                                  std::string* addr_file);

// ---- group_init.cpp
wsync_status_t group_init(const wsync_group_config_t* config, wsync_group_t* g);
void group_teardown(wsync_group_t* g);

// ---- group_join.cpp
// Accept control connections until every rank sent a valid HELLO (or the deadline).
wsync_status_t accept_receivers(wsync_group_t* g, int64_t deadline);
// Wait until each receiver reports its transport connected (JOINED).
wsync_status_t wait_joined(wsync_group_t* g, int64_t deadline);
// membership=elastic, between updates (pipeline thread): connections that came meanwhile get
// their CHALLENGE, and those whose HELLO arrived and proves the secret are welcomed into
// g->admission.joining. Never waits: a HELLO not there yet is read at a later look.
void take_hellos(wsync_group_t* g);
// A welcomed receiver's JOINED (its transport connected), if it came; then the sender's transport
// connects to it (connect_peer), before `deadline`. WSYNC_ERR_TIMEOUT: no JOINED yet (look again
// later; the pipeline thread never waits for a joiner), any other error: it cannot join.
wsync_status_t join_one(wsync_group_t* g, Peer* p, int64_t deadline);
// The welcomed joiners, handed out to be joined; those not joined yet come back (a later look).
std::vector<std::unique_ptr<Peer>> admission_take_joining(wsync_group_t* g);
// (and publishes the ranks among them whose join is done: admission_ready)
void admission_keep_joining(wsync_group_t* g, std::vector<std::unique_ptr<Peer>> later);
// Many senders: the joiners whose join is done, waiting for every sender to have them (any thread).
std::vector<uint32_t> admission_ready(wsync_group_t* g);
// The transport connects to receiver `p` alone (plugin ABI 1.5 connect_peer), before `deadline`;
// a refusal names the transport and the receiver.
wsync_status_t connect_receiver(wsync_group_t* g, Peer* p, int64_t deadline);

// ---- group_submit.cpp (caller thread)
wsync_status_t group_send_start(wsync_group_t* g, const wsync_tensor_t* tensors, uint64_t n, int64_t timeout_ms,
                                uint64_t* ticket);
wsync_status_t group_send_wait(wsync_group_t* g, uint64_t ticket, int64_t timeout_ms);
wsync_status_t group_send_batch(wsync_group_t* g, const wsync_tensor_t* tensors, uint64_t n, int64_t timeout_ms);
wsync_status_t group_finalize(wsync_group_t* g, uint64_t version, int64_t timeout_ms);
void group_set_cuda_stream(wsync_group_t* g, void* stream);

// ---- group_pipeline.cpp
wsync_status_t pipeline_start(wsync_group_t* g);
// Ends the pipeline thread (batches in flight are abandoned: receivers told, tensors released).
void pipeline_stop(wsync_group_t* g);
// Wake the pipeline thread out of any wait (abort, destroy, a new job).
// Elastic, many senders: another sender aborted the current update (a receiver said so, inbox):
// it fails as a peer's failure and is voided, not the group (group_pipeline.cpp).
void pipeline_update_abandoned(wsync_group_t* g);
void pipeline_wake(wsync_group_t* g);
// wsync_group_abort (any thread): the flag, the transport's abort, and the pipeline thread woken.
void pipeline_abort(wsync_group_t* g);
// One more bucket of batch `b` no longer reads the caller's memory; the last one releases the
// batch to the caller (elastic: its tensors' digests are taken first).
void batch_bucket_released(wsync_group_t* g, Batch* b);

// ---- group_inbox.cpp (pipeline thread): one inbox per member
// What a member's next frame was, after its inbox handled the words nobody waits for.
enum class InboxWord {
  kNone,    // nothing there now (or only PROGRESS)
  kAnswer,  // a frame for the caller: READY, ACK or NACK of a bucket, COMMITTED, or anything else
  kGone,    // it closed, and that loses nothing (close_loses_nothing): it is left, not failed
};
// Where the sender is when it reads: what an unsolicited word means depends on it.
struct InboxContext {
  const char* during = "an update";  // for messages: "bucket 3 (...) of update 1", "the commit of version 2"
  bool close_loses_nothing = false;  // it answered every bucket on the wire and relays to nobody
  bool between_updates = false;      // no update is under way
};
// Reads `p`'s next frame: PROGRESS (its silence), CATCHUP_FAILED (its catch-up failed: its words,
// no update's loss), a NACK of seq 0 (it refused the whole update) and a close (peer_lost, or
// between updates its own failure; kGone when the close loses nothing) are handled here. A failure
// of the member comes back as its status, the message recorded, for member_failed.
wsync_status_t inbox_take(wsync_group_t* g, Peer* p, const InboxContext& ctx, Frame* f, InboxWord* word);

// ---- group_bucket.cpp (pipeline thread)
// A bucket between its MANIFEST and its delivery.
struct InflightBucket;
// Tell receivers the update is void (once per update); `why` is quoted to them.
void announce_abort(wsync_group_t* g, const std::string& why);
// The caller aborted the group: receivers in the middle of an update are told (announce_abort);
// between updates they have nothing to drop, and are not.
void announce_group_aborted(wsync_group_t* g);
// The update ended (committed, or failed and void everywhere): the next one has the next id.
void wire_next_update(wsync_group_t* g);
// A receiver's connection closed: forget it in the transport and say so (PEER_FAILED); a joiner
// whose unread CATCHUP_FAILED explains it is removed with its own words instead.
wsync_status_t peer_lost(wsync_group_t* g, Peer* p, const char* during);

// ---- group_route.cpp
// After every JOINED: plan the routes from the receivers' hosts, tell each its parent and children
// (ROUTE) when the group relays, and wait for each to wire its relay transports (JOINED again).
wsync_status_t route_members(wsync_group_t* g, int64_t deadline);
// The size of the pieces buckets move in: group info's (shape.piece_bytes), or the one the route
// chose and told in every ROUTE (one sender that relays, option piece_bytes not given: 512 KiB).
uint64_t route_piece_bytes(const wsync_group_t* g);
// Elastic groups that relay: a joiner takes a place in the route. The planner, run over the
// members and the joiner (their hosts and lanes, the group's route), names its parent: a member
// (a relay) or the sender. Tell it (its ROUTE: that parent, no children, flag kRouteByRank) before
// its second JOINED is read; nothing for a star. The place is taken when it is installed
// (route_install_joiner).
wsync_status_t route_tell_joiner(wsync_group_t* g, Peer* p, int64_t deadline);
// A joiner placed below a relay said NACK instead of JOINED (`why`: it could not reach the relay's
// world within its ROUTE's wire_ms): that place is remembered as failed, and it is told a second
// ROUTE, below the sender, whose JOINED the caller reads later.
wsync_status_t route_fall_back(wsync_group_t* g, Peer* p, const std::string& why, int64_t deadline);
// Where a joiner becomes a member: the place its ROUTE named is taken. Its relay, when it has one,
// is told (ROUTE_ADD, before the first MANIFEST the joiner takes part in) and the plan and the
// delivery move it below that relay. A relay that left meanwhile: WSYNC_ERR_PEER_FAILED naming it
// (the joiner, wired into a world nobody feeds, is not installed; it may join again).
wsync_status_t route_install_joiner(wsync_group_t* g, Peer* p);
// A joiner told its ROUTE could not join (it could not wire into its relay's world, or said
// nothing in time): its next join goes below the sender, not to the same relay again. A member
// removed before it confirmed a version below its relay counts the same (route_member_left).
void route_joiner_failed(wsync_group_t* g, const Peer* p);
// Receiver `rank` was removed: the receivers downstream of it (cut off with it, for the caller to
// remove, naming it), and the plan goes on without it: its relay (when it had one that is still a
// member) is told to feed it no more (ROUTE_DROP), and it and everything below it hang below the
// sender as leaves, where they take their place again when they rejoin. Nothing for a star.
std::vector<uint32_t> route_member_left(wsync_group_t* g, uint32_t rank);
// Elastic groups that relay, between updates, once the membership changed: the members that stayed
// are moved to where the planner, run over the members now, puts them (a chain comes back as a
// chain, a tree as the tree). A round asks each member it moves (ROUTE_MOVE: its new parent) and
// takes the move when it answers (route_move_answered); only moves that keep the route a tree
// whichever of them are taken go in one round, the others in the next. Not to a relay a move or a
// join failed that member at; a member catching up moves once it is done. True: it asked some.
bool route_replan(wsync_group_t* g);
// A member was asked to move and has not answered yet.
bool route_moves_pending(const wsync_group_t* g);
// How long the sender waits for a round's answers (timeout_ms, at most 10 s); a member tries its
// new relay's world for half of it (ROUTE_MOVE wire_ms), so its NACK comes in time.
int64_t route_move_budget_ms(const wsync_group_t* g);
// Its answer to ROUTE_MOVE (`f`): JOINED, it is wired into its new parent's world: the old relay is
// told to feed it no more (ROUTE_DROP), the new one to feed it (ROUTE_ADD), and the plan moves it
// (a new relay that left meanwhile: below the sender, asked again). A NACK: it stays where it was,
// and is not moved there again.
void route_move_answered(wsync_group_t* g, Peer* p, const Frame& f);
// For a message about `rank` failing: "; downstream of it (cut off with it): ranks 3, 4", or "".
std::string downstream_note(const wsync_group_t* g, uint32_t rank);
// "; fed by relay rank 1 (at 10.0.0.2:41234)" for a receiver whose bytes come through a relay,
// else "": a receiver that refuses a relayed piece, or waits for one, names who fed it.
std::string fed_by_note(const wsync_group_t* g, uint32_t rank);
// The receivers, every relay before the receivers downstream of it (breadth first along the
// route; rank order for a star): a relay's close is read before the closes it causes.
std::vector<Peer*> peers_upstream_first(const wsync_group_t* g);
// The receiver to blame for `p`'s close: the relay furthest upstream of `p` whose connection is
// closed too (its receivers give up when it dies, and one of them may be read first), else `p`.
Peer* first_failed_upstream(wsync_group_t* g, Peer* p);
// `rank` forwards the bytes to other receivers (the route has receivers downstream of it).
bool relays_to_others(const wsync_group_t* g, uint32_t rank);
// Many senders with relays: every relay's children take the same boxes from this sender as the
// relay (`segments`: the receivers grouped by what they take; each receiver in one), since a
// relay passes on every piece it gets. Else INVALID_ARGUMENT naming the two receivers, their lanes
// and the fix (receiver option lane), before anything is sent.
wsync_status_t route_fits_segments(const wsync_group_t* g, const std::vector<std::vector<uint32_t>>& segments);
// Of the receivers in `set` (that did not answer), those whose parent answered: the ones that
// failed; the others only wait behind them.
std::vector<Peer*> upstream_of_set(const wsync_group_t* g, const std::vector<Peer*>& set);

// ---- group_senders.cpp (many senders)
// Options num_senders, sender_rank and sender0_store agree with each other (after the options).
wsync_status_t senders_check_options(wsync_group_t* g);
// After the store is up: sender 0 lists itself in its store; another sender connects to sender
// 0's store and lists itself there (its own store's address, where receivers find it).
wsync_status_t senders_open(wsync_group_t* g, const std::string& bind_host, int64_t deadline);
// A batch of a many-sender group (or with slices): publish this sender's record of it, wait for
// every sender's, agree on the ownership plan (refusals name the tensor, the senders and the
// range; a digest every sender compares) and keep in `b` only what this sender owns.
// *published: this sender's record went out (a failure after it breaks the group: the other
// senders count this batch).
wsync_status_t senders_plan_batch(wsync_group_t* g, Batch* b, int64_t timeout_ms, bool* published);
// The update ended (caller thread): the next one's batches count from the first again.
void senders_update_ended(wsync_group_t* g);
// Teardown: sender 0's store client goes.
void senders_close(wsync_group_t* g);

// ---- group_announce.cpp (HTTP engines of senders that plan: one UPDATE per batch, sender 0 only)
// The batch's UPDATE names every tensor of `plan` whole (caller thread, once the plan is agreed).
void announce_build(const OwnershipPlan& plan, Batch* b);
// Pipeline thread: open the engines' update if needed and post the batch's UPDATE (with this
// sender's first bucket of it); collect it (after the last); stop waiting for it (a failure).
wsync_status_t announce_start(wsync_group_t* g, Batch* b);
wsync_status_t announce_finish(Batch* b);
void announce_cancel(Batch* b);
// A batch of which this sender sends no bucket: its UPDATE, posted and collected now (once).
wsync_status_t announce_alone(wsync_group_t* g, Batch* b);
// Before the first bucket of batch `next` goes out: announce_alone for every batch ahead of it in
// `active` (the engines handle their UPDATEs one at a time, in the order they come).
wsync_status_t announce_before(wsync_group_t* g, const BatchList& active, const Batch* next);

// ---- group_wait.cpp (pipeline thread)
// What a wait is waiting for: frames from some receivers, and/or a transport send to complete.
struct WaitSet {
  std::vector<Peer*> peers;     // receivers whose next frame is awaited
  uint64_t transport_seq = 0;   // != 0: send_wait(seq) must still answer OK
};
// Sleep until one of the awaited things may have happened: a frame or a closed connection from a
// receiver of `w`, the transport's event fd (armed), the wake fd (abort), or `deadline`.
void wait_for_progress(wsync_group_t* g, const WaitSet& w, int64_t deadline);
// One non-blocking look at the transport: OK when bucket `seq` is sent, TIMEOUT when not yet.
wsync_status_t poll_transport(wsync_group_t* g, uint64_t seq);
// The names of receivers in `peers`, for messages ("receiver rank 1 (pid 7), receiver rank 2 ...").
std::string peer_names(const std::vector<Peer*>& peers);

}  // namespace wsync
