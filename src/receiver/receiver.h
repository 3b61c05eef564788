// One engine worker's side of a group: state behind wsync_receiver_*. The receiver is synchronous:
// wsync_receiver_next does the work of one event on the caller's thread.
//
//   receiver_api.cpp      the exported functions
//   receiver_init.cpp     joining: store, group info, control HELLO, transport connect, JOINED;
//                         wire_route: the relay transports
//   receiver_links.cpp    many senders: one link per sender, sharing RxShared; next() looks at
//                         every link; the commit once every sender finalized the same version
//   receiver_bucket.cpp   one bucket: manifest checks, where each byte goes, receive, ACK, event;
//                         a relay's forwarding
//   receiver_relay.cpp    a relay's children: their ranks in its relay world, ROUTE_DROP, ROUTE_ADD;
//                         its own parent moved (ROUTE_MOVE)
//   receiver_events.cpp   the other control messages (END_UPDATE, ABORT_UPDATE, CLOSE)
//   receiver_inbox.cpp    one inbox per link: its sender's frames, stale CATCHUP_CANCELs dropped once,
//                         ROUTE_DROP, ROUTE_ADD and ROUTE_MOVE taken
//   receiver_state.cpp    what an update did to the registered buffers: the tensors it touched,
//                         staged bytes (receive_mode staged) and their copy at commit, the state
//                         wsync_receiver_get_state reports
//   receiver_rejoin.cpp   receiver option rejoin: a sender that is gone is followed by its
//                         successor at the same store (a restarted trainer), same rank and buffers
//   receiver_catchup.cpp  catch-up: a source serves the committed version over a world of two; the
//                         joiner checks every tensor against the sender's digest (many senders:
//                         every sender's digests of its parts of the box the joiner holds)
//   receiver_wait.cpp     sleeping on the control socket and every transport instance, progressing
//                         those nothing else progresses
//   arrivals.cpp          which bytes of which tensor arrived in this update (arrivals.h)
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/options.h"
#include "control/control_conn.h"
#include "device/mem_block.h"
#include "loader/plugin_loader.h"
#include "manifest/manifest.h"
#include "common/pieces.h"
#include "receiver/arrivals.h"
#include "common/payload_hasher.h"
#include "store/store_handle.h"

namespace wsync {

struct Link;  // below

struct Registered {
  void* data = nullptr;
  uint64_t nbytes = 0;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};
  int32_t device_type = WSYNC_DEVICE_CPU;
  int32_t device_index = 0;
  // Many senders (ABI 1.5): registered as a slice (WSYNC_TENSOR_SLICE) of a tensor of full_shape;
  // `shape` is the slice's extent, and only its bytes are sent here.
  bool slice = false;
  Box box;
  int64_t full_shape[WSYNC_MAX_NDIM] = {0};
  // Its buffer holds the bytes of a committed version: a commit followed an update (or a catch-up)
  // that wrote it. Registering it (again) clears it. A catch-up source serves only these.
  bool held = false;
};

// A tensor that arrives in chunks over several buckets.
struct Assembly {
  MemBlock owned;  // when not registered (host or device, like the receiver's staging)
  uint8_t* dst = nullptr;
  uint64_t tensor_bytes = 0;  // which bytes arrived: wsync_receiver::arrived
  bool placed = false;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};
};

// One bucket between its MANIFEST and its event (receiver_bucket.cpp): posted, its pieces landing.
struct Incoming {
  uint64_t seq = 0;                     // the bucket's; piece i moves under seq + i
  Manifest m;
  std::vector<uint8_t> blob;            // the sender's transport blob
  std::string what;                     // "bucket 3 of update 1"
  std::vector<const Registered*> reg;   // per entry: its registration, or nullptr
  std::vector<uint8_t*> dst;            // per entry: where its bytes land
  std::vector<wsync_iov_t> iov;         // where the bucket's bytes go, in order
  uint64_t staging_need = 0, max_gap = 0;
  MemBlock staging;                     // unregistered whole tensors land here (views point here)
  std::vector<Piece> pieces;
  size_t landed = 0;                    // pieces in place
  size_t hashed = 0;                    // pieces handed to the hasher (in order, oldest bucket only)
  size_t hash_entry = 0;                // the first entry the hasher has not finished
  bool hashing = false;                 // the hasher was reset for this bucket
  bool sum_known = false;               // the payload checksum is known (in the manifest, or BUCKET_SUM came)
  uint64_t sum = 0;
  bool posted = false;                  // recv_post was called for its pieces
  MemBlock relay_block;                 // a relay receives the bucket here whole, forwards and places it
  std::vector<uint64_t> forwarding;     // pieces forwarded to the children, not yet sent
  int64_t deadline = 0;                 // for its bytes: timeout_ms after the last piece this link took
                                        // (from the first look at it; 0: not yet)
};

// What the links of a receiver share (receiver_links.cpp): a receiver of a many-sender group joins
// every sender with a link of its own (control connection, transport, buckets on the wire), and
// the links place bytes into the same registered buffers, assemblies and staged blocks, so a
// tensor whose boxes come from several senders completes once and commits once. A receiver of a
// one-sender group is one link and owns its RxShared alone.
struct RxShared {
  std::unordered_map<std::string, Registered> registry;
  std::unordered_map<std::string, Assembly> assembling;
  // Which bytes of which tensor (whole or split) arrived in this update: a tensor is complete, and
  // its staged bytes may be applied, only when its chunks tile it exactly. Cleared when the
  // update commits or is dropped.
  Arrivals arrived;
  // Which bytes buckets on the wire will bring (planned, not yet arrived): with `arrived`, what a
  // later manifest may not overlap.
  Arrivals claimed;
  // Buffers a receive was posted into when the transport gave up on it: UCX (for one) may still
  // write into them until the transport is destroyed, so they are freed only then.
  std::vector<MemBlock> graveyard;
  // Receiver option receive_mode: false = in_place (bytes of registered tensors are written
  // straight into the registered buffers), true = staged (they land in `staged_blocks` and are
  // copied into the registered buffers by wsync_receiver_commit only).
  bool staged = false;
  // Registered tensors this update wrote into (in place) or staged (staged mode), in the order of
  // their first bytes; `touched_set` holds the same names. In place, cleared by a commit only: after
  // a failure they name the buffers that may hold a mix. Staged, cleared by a commit (after the copy)
  // and by a failure (the staged bytes are dropped).
  std::vector<std::string> touched;
  std::unordered_set<std::string> touched_set;
  // Staged mode: one block per registered tensor (its size), reused by later updates; freed at
  // destroy (or moved to the graveyard when the transport gave up on a receive into it).
  std::unordered_map<std::string, MemBlock> staged_blocks;
  uint64_t staged_retired_bytes = 0;  // of staged blocks moved to the graveyard (freed at destroy)
  // In place: the transport gave up on a receive posted into registered buffers, and may still
  // write into them until it is destroyed (wsync_receiver_destroy).
  bool late_writes = false;
  // A staged copy at commit failed midway (CUDA error): the registered buffers hold a mix.
  bool apply_failed = false;
  // Why the current update may not commit here (empty: it may): ABORT_UPDATE came, or a bucket or
  // END_UPDATE was refused or failed here. Cleared when a later update starts (RELIABILITY.md: the
  // next update can start); today the sender breaks its group on a failure anyway.
  std::string update_void;
  uint64_t committed = 0;
  uint64_t update = 0;  // the update the shared state holds bytes of (its first manifest's update id)
  // Many senders: every link, link 0 (the receiver the caller holds, joined to sender 0) first.
  std::vector<Link*> links;
  int64_t first_end_ms = 0;  // when the first link of the current update asked for its commit
  uint64_t needs_published = 0;  // versions of this receiver's needs put in sender 0's store
  std::vector<uint8_t> needs_said;  // the last of them, without its version
  uint64_t commit_ready = 0;     // many senders: the version COMMIT reported (every sender finalized it,
                                 // or a catch-up took it: link 0's catchup_commit)
  std::string catchup_world;     // the last catch-up served or taken here (many senders: each sender
                                 // says it; the first word read does it, the others are dropped)
  std::string link_failed;   // a link failed: the receiver cannot take updates any more
  wsync_status_t link_status = WSYNC_OK;
  bool sender_lost = false;  // ... because its sender was lost (the others were told SENDER_LOST)
  bool rejoin = false;       // receiver option rejoin (receiver_rejoin.cpp)
};

// Receiver option rejoin (receiver_rejoin.cpp): what init was given, kept to join the sender's
// successor when the sender is gone (a trainer that restarts from its checkpoint).
struct RejoinConfig {
  std::string store_addr, group_name, transport;
  bool has_group_name = false, has_transport = false;
  OptionList options;
  uint32_t rank = 0;       // the rank init got (the one asked for, or the one assigned)
  int64_t timeout_ms = 0;  // the receiver's own (option timeout_ms)
  uint64_t rejoins = 0;    // senders joined since init
  bool due = false;        // the old links are gone and no successor joined yet
  // Many senders, one lost or closed: the control port of that group's sender 0, not joined again
  // (its survivors close it); forgotten once its store is gone
  std::string avoid_control;
};

// What a wsync_receiver_next call began with, to tell whether a sender's loss it met needs a word
// to the engine (receiver option rejoin).
struct RejoinWatch {
  bool on = false;
  bool reported = false;   // the engine had heard every loss there was (no update in flight unreported)
  uint64_t manifests = 0;  // MANIFESTs read over every link so far
};

// One link: this receiver joined to one sender (its control connection, transport world, buckets
// on the wire). A receiver of a one-sender group is one link; a many-sender receiver has one per
// sender (receiver_links.cpp), all placing bytes through the same RxShared.
struct Link {
  explicit Link(RxShared* shared) : sh(shared) {}
  RxShared* sh;  // the state the links share (the receiver's)
  uint32_t sender = 0;       // which sender this link is joined to
  uint32_t num_senders = 1;  // as the group info says
  bool planned = false;      // the group info says senders=: this receiver says what it needs
  std::string sender_addr;   // that sender's store, for messages
  int64_t last_frame_ms = 0;  // when its sender's last control frame came (which went silent first)
  // Progress (control protocol 4, PROGRESS): pieces this link took (landed, or forwarded by a
  // relay) since it joined, the count last reported to the sender and when.
  uint64_t progress_count = 0;
  uint64_t progress_sent = 0;
  int64_t progress_sent_ms = 0;

  uint32_t rank = 0;
  bool rank_assigned = false;  // the config asked for rank 0 and the sender assigned `rank`
  uint32_t world_size = 0;
  std::string group_name;
  int64_t timeout_ms = 60000;

  std::unique_ptr<TcpStoreClient> store_client;
  wsync_store store_handle{nullptr};
  LoadedTransport transport;
  void* transport_self = nullptr;
  int transport_fd = -1;  // the transport's event fd, or -1: its waits are polled in slices
  // Relays (group option route): the instance the bytes come from (transport_self, or this rank's
  // place in its parent's relay world) and the one this rank forwards them on (rank 0 of its own
  // relay world, to `children`), with their event fds.
  void* recv_self = nullptr;
  int recv_fd = -1;
  void* relay_self = nullptr;
  int relay_fd = -1;
  uint32_t parent = 0;
  std::vector<uint32_t> children;
  std::vector<bool> child_dropped;  // elastic: the sender said the child at this index left (ROUTE_DROP)
  // ROUTE flag kRouteByRank (elastic groups that relay): every relay world is the group's size and
  // numbers its members by their group ranks; this receiver's own is open even with no children,
  // so that the sender can place a joiner below it (ROUTE_ADD). Else children[i] is rank i + 1.
  bool relay_by_rank = false;
  // What a later transport instance needs (a catch-up's world: open_world): the transport's options
  // as at init, and the address this receiver's control connection leaves from.
  OptionList transport_opts;
  std::string local_ip;
  std::string transport_key;  // the hint auth_key (control_auth.h), derived from the group secret at init
  // Catch-up (receiver_catchup.cpp): a source keeps its last catch-up's instance until the next
  // one or destroy (it never closes an endpoint under a joiner still reading); a joiner's COMMIT
  // event of a catch-up is confirmed locally, the sender waits for no COMMITTED of it.
  void* catchup_self = nullptr;
  std::vector<uint8_t> catchup_keep;  // what catchup_self may still read (its head and MANIFESTs)
  bool catchup_commit = false;
  ControlConn conn;

  // Where unregistered bytes land: host memory, or CUDA memory on `device` when the transport
  // moves device memory only (views then point into device memory).
  int device = -1;
  bool device_memory = false;
  // Staging blocks for tensors that are not registered, one per bucket on the wire (the block of
  // the last event's bucket, which its views point into, until the next event); free ones wait here.
  std::vector<MemBlock> staging_pool;
  MemBlock ev_staging;
  std::vector<MemBlock> relay_pool;  // a relay's free relay blocks
  MemBlock scratch;  // padding between entries lands here

  // The pipeline the sender announced (group info): pieces per bucket, buckets on the wire at once.
  uint64_t piece_bytes = 0;
  uint32_t window = 1;
  // Buckets posted and not yet reported, oldest first (at most `window`).
  std::deque<std::unique_ptr<Incoming>> flight;

  // The last event's storage: its manifest (the tensors' names point into it), descriptors,
  // placed flags, and assemblies it completed.
  Manifest ev_manifest;
  std::vector<wsync_tensor_t> ev_tensors;
  std::vector<uint8_t> ev_placed;
  std::vector<MemBlock> ev_owned;

  uint64_t current_update = 0;
  uint64_t expected_bucket = 0;  // buckets of the current update reported (each ACKed)
  uint64_t accepted_bucket = 0;  // buckets of the current update whose MANIFEST was taken
  uint64_t manifests_taken = 0;  // every MANIFEST read since it joined, refused or not (rejoin: did this
                                 // call begin a bucket?)
  uint64_t pending_commit = 0;  // version announced by END_UPDATE, not yet committed
  // What that END_UPDATE said of the plan (senders that plan): the chain of the update's agreed
  // plan digests, compared across the senders before a version commits.
  bool end_has_plan = false;
  uint64_t end_plan_digest = 0;
  bool closed = false;
  // Receiver option rejoin: this link joins a restarted trainer. Once the sender's CHALLENGE came,
  // the join is seen through within the receiver's own timeout_ms, not the engine's call timeout: a
  // member given up after its HELLO was welcomed fails the sender's init. A group still announcing
  // `avoid_control` (the control port of the senders' group that lost one) is not joined.
  bool rejoining = false;
  std::string avoid_control;
  std::string control_endpoint;  // "host:port" of its sender's control port, as joined
  bool store_reached = false;    // its join reached the store (the group's announcement was asked for)
  bool avoided = false;          // its join found avoid_control announced
  std::string broken;
  // Last: destroyed first, so its thread stops before any memory it may read goes.
  PayloadHasher hasher;
};

}  // namespace wsync

// The receiver the caller holds: the shared state and its links, link 0 (joined to sender 0) first.
struct wsync_receiver {
  wsync::RxShared shared;
  wsync::RejoinConfig rejoin;  // (receiver option rejoin)
  std::vector<std::unique_ptr<wsync::Link>> links;  // made by init; a many-sender receiver's others by links_join
  wsync::Link* link0() const { return links.empty() ? nullptr : links[0].get(); }
};

namespace wsync {

// receiver_init.cpp
wsync_status_t receiver_init(const wsync_receiver_config_t* config, Link* rx);
// Create and connect one more instance of the receiver's transport: rank `rank` of `world` members
// under the name `group`, with the options of init, within timeout_ms.
// join_later: hint join_later (rank 0: connect connects nobody; connect_peer each).
wsync_status_t open_world(Link* rx, const std::string& group, uint32_t rank, uint32_t world,
                          int64_t timeout_ms, void** self, int* fd, bool join_later = false);
// A relay world: the members `relay` forwards to, under its own name in the store.
std::string relay_world(const std::string& group, uint32_t relay);
// receiver_relay.cpp
// The rank in this relay's world of children[i].
uint32_t relay_child_peer(const Link* rx, size_t i);
// The ranks in this relay's world of the children it feeds now (none dropped); empty when it has no
// relay world.
std::vector<uint32_t> relay_live_peers(const Link* rx);
bool relay_feeds_anyone(const Link* rx);
// " (in this relay's world rank 1 is receiver rank 3, ...)" where its world numbers the children
// 1..n, so that a transport's warning speaks the group's ranks too; "" when numbered by rank.
std::string relay_world_note(const Link* rx);
// ROUTE_DROP from the sender: a child of this relay left the group; it is fed no more (its place
// in the relay's world forgotten). A rank that is not a child: logged, nothing else.
void relay_drop_child(Link* rx, const Frame& f);
// ROUTE_ADD from the sender (between updates): a joiner was placed below this relay; the relay's
// world connects to it and every later bucket is forwarded to it too. One it cannot connect to is
// logged and not fed (the sender names that joiner when its bytes do not come).
void relay_add_child(Link* rx, const Frame& f);
// ROUTE_MOVE from the sender (between updates; the route re-planned around the members that
// stayed): take the bytes from another parent from the next update on. This receiver wires into
// that relay's world (or takes the sender's own), lets go of its side of the old one and answers
// JOINED; one it cannot wire into: it keeps its old place and answers NACK naming why.
void relay_move_parent(Link* rx, const Frame& f);
// receiver_catchup.cpp
// CATCHUP from the sender: as the source, send the registered tensors to the joiner (no event);
// as the joiner, take them and report COMMIT of the caught-up version (or refuse, naming why).
wsync_status_t catchup(Link* rx, const Frame& f, wsync_receiver_event_t* ev);
// receiver_inbox.cpp: one inbox per link (stale CATCHUP_CANCELs dropped, ROUTE_DROPs and ROUTE_ADDs taken
// wherever it reads)
// Read what the connection holds, without waiting; the words at the head that nobody waits for
// are handled.
void inbox_pump(Link* rx);
// The words at the head of what is buffered that nobody waits for are handled (nothing is read
// from the socket).
void inbox_drop_stale(Link* rx);
// The type of the next whole frame after inbox_pump, or 0.
uint16_t inbox_next_type(Link* rx);
// The same without reading the socket: of what is buffered already.
uint16_t inbox_buffered_type(Link* rx);
// The link's next frame within timeout_ms (ControlConn::recv's statuses), stale words skipped.
wsync_status_t inbox_recv(Link* rx, Frame* f, int64_t timeout_ms);
// receiver_events.cpp
wsync_status_t receiver_next(Link* rx, wsync_receiver_event_t* ev, int64_t timeout_ms);
// The last event's storage goes back (its views' staging to the pool).
void release_event(Link* rx);
// One control frame from the link's sender: a MANIFEST is accepted (its bucket goes on the wire,
// no event yet), END_UPDATE becomes COMMIT, ABORT_UPDATE ABORTED, CLOSE CLOSED.
wsync_status_t handle_frame(Link* rx, const Frame& f, wsync_receiver_event_t* ev);
// A frame still coming of an update this receiver voided (refused, its relay died, or another
// sender aborted it): a BUCKET_SUM, or a MANIFEST of that update, dropped rather than refused.
bool leftover_of_void_update(const Link* rx, const Frame& f);
// receiver_links.cpp (many senders)
// After link 0 joined sender 0: join senders 1..M-1 (their stores are listed in sender 0's).
wsync_status_t links_join(const wsync_receiver_config_t* config, wsync_receiver_t* receiver);
// wsync_receiver_next of a many-sender receiver: every link looked at in turn, COMMIT once every
// sender finalized the same version and every tensor is whole.
wsync_status_t links_next(Link* rx, wsync_receiver_event_t* ev, int64_t timeout_ms);
// wsync_receiver_commit of a many-sender receiver: COMMITTED on every link, applied once.
wsync_status_t links_commit(Link* rx, uint64_t version);
// What this receiver needs (the slices it registered; every other tensor whole), in sender 0's
// store, where every sender reads it before it plans a batch.
wsync_status_t links_publish_needs(Link* rx);
// receiver_rejoin.cpp (receiver option rejoin)
// After init: keep what joining again needs.
wsync_status_t rejoin_keep(const wsync_receiver_config_t* config, wsync_receiver_t* receiver);
// The sender is gone (its connection closed, nothing of it left unread, or it closed the group)
// and the receiver may join its successor.
bool rejoin_due(wsync_receiver_t* receiver);
// At the start of a wsync_receiver_next: whether the engine has heard every loss there is to hear
// (the update in flight, if any, was reported void already, or none was begun), and the MANIFESTs
// read so far.
RejoinWatch rejoin_watch(const wsync_receiver_t* receiver);
// The call met a sender's loss having taken no MANIFEST and owing the engine no news: the receiver
// rejoins in the same call.
bool rejoin_in_call(wsync_receiver_t* receiver, const RejoinWatch& w);
// The update in flight is dropped, every link closed, and the receiver joins the group at the same
// store (many senders: sender 0's, then the others) with the same rank within timeout_ms (negative:
// the receiver's timeout_ms), keeping its registered buffers and committed version. Not back in time:
// WSYNC_ERR_TIMEOUT naming the store; the next call tries again.
wsync_status_t rejoin(wsync_receiver_t* receiver, int64_t timeout_ms);
// Every transport instance of the link destroyed, its control connection and store client closed
// (receiver_api.cpp; destroy and rejoin).
void link_teardown(Link* l);

// receiver_bucket.cpp
// A MANIFEST: check it, post the receive of its pieces, READY; the bucket joins rx->flight.
wsync_status_t accept_manifest(Link* rx, const Frame& f);
// The oldest bucket in flight: wait for its pieces (taking the next MANIFESTs and BUCKET_SUMs
// meanwhile), verify, ACK, and report it as the BUCKET event.
wsync_status_t complete_bucket(Link* rx, wsync_receiver_event_t* ev);
// One non-blocking look at the oldest bucket in flight (many senders: every link is looked at in
// turn): *ready when it was reported as the BUCKET event; a failure is complete_bucket's.
wsync_status_t bucket_step(Link* rx, wsync_receiver_event_t* ev, bool* ready);
// The sender's connection holds (already read, nothing waited for) a word that is not a bucket's
// (ABORT_UPDATE, CLOSE) behind this update's MANIFESTs and BUCKET_SUMs, which are dropped.
bool sender_said_why_already(Link* rx);
// Refuse: tell the sender (NACK seq) and return the same error to the engine.
wsync_status_t refuse(Link* rx, uint64_t seq, wsync_status_t st);
// Send a status frame (NACK or ACK) with an optional transport blob.
void send_status(Link* rx, MsgType type, uint64_t seq, wsync_status_t code, const std::string& why,
                 const std::vector<uint8_t>& blob = {});
// The update ended without a commit (`why`): forget half-assembled tensors, which bytes arrived
// and staged bytes (their buffers go to the graveyard once the transport gave up, since it may
// still write into them); no END_UPDATE may commit it.
void drop_update(Link* rx, const std::string& why);

// receiver_wait.cpp
// Progress the transport instances nothing else progresses now (all: every one, e.g. between
// buckets; else only the group's world once the bytes come from a relay).
void progress_transports(Link* rx, bool all);
// Arm every transport instance and sleep on them and the control socket until one has something,
// `deadline`, or max_ms; false (at once) when an instance has work now.
bool sleep_on_transports(Link* rx, int64_t deadline, int max_ms);

// receiver_state.cpp
// The memory the bytes of registered tensor `name` (`bytes` long) land in, in staged mode: its
// staged block, allocated on first use (host or device memory, like the receiver's staging).
wsync_status_t staged_block(Link* rx, const std::string& name, uint64_t bytes, uint8_t** out);
// A transport of this receiver (any link's, with many senders) gave up on a posted receive: it may
// still write into what was posted, which therefore goes to the graveyard, never back to use.
bool may_still_write(const Link* rx);
// Bytes of registered tensor `name` were posted for receipt: remember it as touched.
void note_touched(Link* rx, const std::string& name);
// The update failed: staged bytes are dropped (the blocks are kept for reuse unless the transport
// may still write into them); in place, the touched buffers stay listed.
void drop_staged(Link* rx);
// Staged mode: every byte of every staged tensor arrived in this update (else WSYNC_ERR_PROTOCOL
// naming the tensor and the bytes missing). Asked at END_UPDATE and again before the commit tells
// the sender, so a staged block is never copied into a buffer with bytes that did not arrive.
wsync_status_t check_staged_arrived(const Link* rx);
// wsync_receiver_commit's work after the sender was told: staged mode copies every staged tensor
// into its registered buffer; both modes then forget the touched list and which bytes arrived.
wsync_status_t apply_commit(Link* rx);
// Fill `out` (the library's size) with the receiver's state.
void fill_state(const Link* rx, wsync_receiver_state_t* out);

}  // namespace wsync
