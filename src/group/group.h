// The sender's group: state behind wsync_group_*.
//
//   init -> (send_start* / send_wait*, finalize)* -> destroy
//
// After init a group has its own thread, the pipeline (group_pipeline.cpp): it takes started
// batches and finalizes from a queue, in order, and runs the per-bucket protocol on them while the
// caller's thread is free (the asynchronous send). The caller's thread only checks and plans what
// it starts, queues it, and waits for results; everything that talks to receivers, the transport
// and the engines after init happens on the pipeline thread. wsync_group_abort may come from any
// thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/options.h"
#include "common/payload_hasher.h"
#include "common/secret.h"
#include "control/control_conn.h"
#include "group/group_declare.h"
#include "device/mem_block.h"
#include "http/engine_set.h"
#include "http/http_client.h"
#include "loader/plugin_loader.h"
#include "planner/bucket_planner.h"
#include "planner/delivery_plan.h"
#include "planner/ownership_plan.h"
#include "planner/route_planner.h"
#include "store/store_handle.h"
#include "store/tcp_store_server.h"

namespace wsync {

// The default piece size of senders that plan (option num_senders) with a route other than star,
// and of a one-sender group whose route relays (told in each ROUTE: group info announced 2 MiB
// before the receivers' hosts were known). Each hop of a chain costs a piece's time.
constexpr uint64_t kLanePieceBytes = 512u << 10;
// Many senders: how much longer than timeout_ms a sender waits for its members' COMMITTED (a
// receiver's answer may come through the other senders first); in an elastic group the senders
// wait for each other's word on a batch 2 x timeout_ms + this (senders_wait_ms, group_senders.cpp).
constexpr int64_t kSendersGraceMs = 2000;

class EngineCalls;  // group_engines.h
struct EngineRejoin;  // engine_members.h
struct InflightBucket;  // group_bucket.h
// The buckets on the wire, oldest first (group_bucket.h).
using Flight = std::deque<std::unique_ptr<InflightBucket>>;
class ControlWarnings;  // group_join.cpp: rate-limited warnings about control connections
struct ControlWarningsDeleter {
  void operator()(ControlWarnings* w) const;
};

// A receiver's catch-up (elastic groups; group_catchup.cpp).
struct PeerCatchup {
  bool failed = false;     // it said its catch-up failed (its removal is no update's loss)
  bool suspect = false;    // a catch-up from it failed since (it serves none until its next COMMITTED)
  bool running = false;    // paired with a catch-up source, no bucket answered since
  uint32_t source = 0;     // the rank it was sent to catch up from (0: none), and
  int64_t source_ms = 0;   // that source's accepted_ms (a later process may take the rank)
};

// Silence (group_bucket.cpp): timeout_ms bounds how long a receiver awaited by a bucket may make no
// progress (no READY, ACK, or PROGRESS whose count moved), not how long its share takes.
struct PeerSilence {
  int64_t heard_ms = 0;    // its last progress, or when the sender began to await it
  uint64_t progress = 0;   // the count of its last PROGRESS
  int64_t report_ms = 0;   // when its last PROGRESS came (it reports every 250 ms while it waits)
  bool caught_up = false;  // its last word: it holds every piece it asked for (a relay that waits on
                           // its children: not the one that stopped, while it reports)
};

struct Peer {
  uint32_t rank = 0;
  uint64_t buckets = 0;  // sent to it in the current update (many senders: not every bucket goes to all)
  uint32_t pid = 0;  // as the receiver claims it (nothing checks it)
  ControlConn conn;
  bool alive = true;
  bool dropped = false;            // membership=elastic: removed from the group after a failure
  bool left = false;               // closed its connection after answering every bucket on the wire
                                   // (the transport forgot it; its next message fails naming it)
  std::string addr;                // "ip:port" the connection came from
  uint32_t lane = 0;               // its JOINED's lane (receiver option lane; route planning)
  std::vector<uint8_t> nonce;      // the CHALLENGE sent to it
  int64_t accepted_ms = 0;         // when it connected (the HELLO deadline runs from here)
  int64_t welcomed_ms = 0;         // elastic: when the sender last did its part (WELCOME, then ROUTE): the
                                   // joiner's JOINED deadline runs from here, not from the sender's busy time
  uint64_t holds_version = 0;      // the last version it confirmed (COMMITTED); 0 before any
  PeerCatchup catchup;             // elastic: its catch-up (group_catchup.cpp)
  bool never_joined = false;       // elastic: a placeholder for a rank no receiver took yet
  bool blames_sender = false;      // many senders: its last word was SENDER_LOST (another sender failed;
                                   // the update fails, and it is not removed for it)
  bool route_told = false;         // elastic, relaying: a joiner's transport is connected and its ROUTE
                                   // sent; its second JOINED (relay transports wired) is awaited
  uint32_t route_parent = 0;       // elastic, relaying: the parent its ROUTE named (0: the sender)
  int64_t route_parent_ms = 0;     // that parent's accepted_ms (a later process may take its rank)
  bool route_fell_back = false;    // it could not reach that parent: told a second ROUTE (the sender)
  // Elastic, relaying: a re-plan between updates moves this member (group_route.cpp). route_moving:
  // its ROUTE_MOVE was sent and its answer (JOINED: wired in; NACK: it stays) not read yet;
  // route_move_to: the new parent (0: the sender), route_move_ms that relay's accepted_ms.
  // route_moved: it moved since it joined, holding route_moved_holds then (a removal before it
  // confirmed a later version counts against that place, as a joiner's does).
  bool route_moving = false;
  uint32_t route_move_to = 0;
  int64_t route_move_ms = 0;
  bool route_moved = false;
  uint64_t route_moved_holds = 0;
  bool joined = false;             // elastic, many senders: a joiner whose join is done, installed once
                                   // every sender has it (the update's first batch agrees which)
  PeerSilence silence;             // how long it made no progress (group_bucket.cpp)
};

// Many senders, elastic: the catch-ups of an update's joiners, as sender 0 picked them and every
// sender read them (group_catchup.cpp): `pairs` of (joiner, source) ranks, of committed `version`
// (0: nothing to catch up), in transport worlds named after the batch `seq`.
struct CatchupPicks {
  uint64_t version = 0, seq = 0;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
};

// One pipeline slot: host memory for host transports, CUDA memory (allocated at init) for
// transports that move device memory only.
struct StagingSlot {
  MemBlock mem;
};

// One started batch: the descriptors (names copied; the tensor memory is the caller's, borrowed
// until every bucket of it is released: packed into staging, or sent on its first hop), its plan,
// and how far the pipeline got with it (delivered: every receiver acknowledged every bucket).
struct Batch {
  uint64_t ticket = 0;
  std::vector<wsync_tensor_t> tensors;
  std::vector<std::string> names;  // tensors[i].name points here
  std::vector<PlanBucket> plan;
  // Many senders: per tensor, the full tensor's shape and the box of it this sender sends (only the
  // boxes the ownership plan gives this sender are left in `tensors`).
  std::vector<OwnedTensor> owned;
  // Many senders whose receivers need different boxes: `tensors` are cut in segments, each for
  // the receivers (ranks) that need exactly those boxes, planned into buckets of their own
  // (bucket i goes to segments[bucket_segment[i]].ranks); empty: every bucket to every receiver.
  struct Segment {
    size_t begin = 0, end = 0;
    std::vector<uint32_t> ranks;
  };
  std::vector<Segment> segments;
  std::vector<uint32_t> bucket_segment;
  std::vector<std::vector<uint8_t>> packed;  // boxes cut out of the caller's slice (several runs)
  // Many senders, elastic: the joiners every sender installs before this batch (its update's first),
  // and the members sender 0 picked to catch them up (group_catchup.cpp)
  std::vector<uint32_t> admit;
  CatchupPicks catchup;
  // Many senders: every tensor of this batch, whichever sender sends it (the ownership plan's)
  std::vector<std::string> planned;
  // HTTP engines of senders that plan (group_announce.cpp): one UPDATE names every tensor of the
  // batch whole, as the plan has them (names point into announced_names).
  std::vector<wsync_tensor_t> announced;
  std::vector<std::string> announced_names;
  PlanBucket announced_bucket;
  std::shared_ptr<EngineCalls> announce_calls;  // that UPDATE, while it runs
  bool announced_alone = false;                 // no bucket of it here: its UPDATE went on its own
  int64_t timeout_ms = 0;          // per wait for a receiver
  void* cuda_event = nullptr;      // recorded on the caller's stream at start (CUDA tensors only)
  size_t prepared = 0;             // buckets packed (or taken from the caller's memory) so far
  size_t released = 0;             // buckets that no longer read the caller's memory (packed, or sent)
  size_t delivered = 0;            // buckets every receiver acknowledged
  int64_t started_ms = 0;
  bool cuda_ordered = false;       // the copy stream waits for cuda_event already
};

// The batches the pipeline thread moves, oldest first.
using BatchList = std::deque<std::unique_ptr<Batch>>;

// A finalize handed to the pipeline thread; the caller waits for `done`.
struct FinalizeJob {
  uint64_t version = 0;
  int64_t timeout_ms = 0;
  uint64_t plan_digest = 0;  // senders that plan: the update's chain of agreed plan digests
};

struct Job {
  std::unique_ptr<Batch> batch;        // or:
  std::unique_ptr<FinalizeJob> finalize;
};

// A receiver removed from an elastic group (wsync_member_event_t).
struct MemberEvent {
  int32_t kind = 0;
  uint32_t rank = 0;
  wsync_status_t status = WSYNC_OK;
  uint64_t update = 0;
  std::string reason;
};

// The mailbox between the caller's thread and the pipeline thread (group_mailbox.cpp, under `mu`):
// the caller's side queues jobs and waits for results, the pipeline thread takes jobs and
// publishes results; both through the functions of group_mailbox.h.
struct Mailbox {
  mutable std::mutex mu;
  std::condition_variable cv;     // the pipeline thread waits for jobs; callers for results
  std::deque<Job> queue;          // started, not yet taken by the pipeline thread
  uint64_t next_ticket = 1;       // the ticket of the next started batch
  uint64_t released_ticket = 0;   // every batch up to this one released the caller's memory
  std::set<uint64_t> released_ahead;  // released, after one before them that has not
  uint64_t in_flight = 0;         // started batches whose memory the pipeline may still read
  bool finalize_done = false;     // the finalize job in flight finished, with finalize_status
  wsync_status_t finalize_status = WSYNC_OK;
  std::string finalize_why;
  wsync_status_t failed = WSYNC_OK;  // the group broke: the status and why, for every later call
  std::string failed_why;
  bool stop = false;              // destroy: the pipeline thread ends
  bool abort_handled = false;     // after wsync_group_abort: receivers told, engines' update ended
  bool idle = true;               // the pipeline thread waits for work
  wsync_group_stats_t stats = WSYNC_GROUP_STATS_INIT;
  int64_t busy_until_ms = 0;      // for stats.send_seconds: end of the last delivery
};

// ---- The parts of the group. Each is written by the file named in its comment (others read it,
// or ask that file through a function); options and the shape are read-only after init.

// Option engine_resume_on_failure: after a failed update, resume a paused engine server never (0),
// always (1), or when it holds one version (auto, the default).
enum class ResumeOnFailure { kNever, kAlways, kAuto };

// The caller's config and options as given (group_options.cpp). An option left out stays empty:
// init resolves it into GroupShape.
struct GroupOptions {
  std::string group_name;
  uint32_t num_receivers = 0;   // config->num_receivers
  bool elastic = false;         // option membership=elastic: a receiver that fails is removed
  uint32_t commit_quorum = 0;   // option commit_quorum (elastic): 0 = every member must hold the update
  uint32_t init_receivers = 0;  // option init_receivers (elastic): init waits for this many (0 = all)
  int64_t timeout_ms = 60000;
  uint32_t staging_buckets = 2;
  std::optional<uint32_t> window;       // buckets on the wire at once
  std::optional<uint64_t> piece_bytes;  // the pieces a bucket moves in (0 = whole)
  std::optional<RouteSpec> route;       // default auto
  std::optional<bool> verify_payload;   // default: on for host transports
  std::optional<uint64_t> bucket_bytes;
  int requested_device = -1;  // option 'device'; -1 = the current device at init
  std::string secret, secret_file;
  bool torch_clients = false;  // the store's torch mode
  std::optional<uint32_t> num_senders;  // given (1 too): the senders plan every batch
  uint32_t sender_rank = 0;
  std::string sender0_store;  // "host:port" of sender 0's store
  // HTTP engines
  std::string engines_spec;  // option 'engines'
  HttpOptions http;
  // option engine_receivers: "none" (an unmodified engine: its HTTP replies are the only
  // acknowledgements; no wsync control channel) or "wsync" (the engine embeds wsync receivers)
  bool engines_embed_wsync = false;
  ResumeOnFailure engines_resume_on_failure = ResumeOnFailure::kAuto;
  int64_t engine_recheck_ms = 2000;
};

// What init made of the options, the adapter and the transport (group_init.cpp).
struct GroupShape {
  uint32_t num_receivers = 0;   // ranks 1..num_receivers (HTTP engines: their GPUs)
  uint32_t init_receivers = 0;  // elastic: init waits for this many (0 = all)
  uint32_t staging_buckets = 2;
  // The pipeline (choose_pipeline): buckets on the wire at once, and the pieces a bucket moves in
  // (0 = whole). A transport without CAP_PIECES gets 1 and 0.
  uint32_t window = 0;
  uint64_t piece_bytes = 2u << 20;  // (kLanePieceBytes for senders that plan, unless route=star; one
                                    // sender that relays: route_piece_bytes)
  RouteSpec route_spec;
  bool verify_payload = false;
  LayoutRule rule;
  bool planned = false;       // many senders: the senders plan every batch (records, needs)
  uint32_t num_senders = 1;
  bool http_engines = false;  // the adapter has WSYNC_ADAPTER_CAP_HTTP
  bool device_staging = false;  // the transport moves CUDA memory only: staging is on the device
  bool staging_only = false;    // the transport sends from registered staging only
};

// The plugins (group_init.cpp).
struct GroupPlugins {
  LoadedAdapter adapter;
  void* adapter_self = nullptr;
  LoadedTransport transport;
  void* transport_self = nullptr;
  int transport_fd = -1;  // the transport's event fd, or -1: poll its waits in slices
};

// Rendezvous and control (group_init.cpp).
struct Rendezvous {
  std::unique_ptr<TcpStoreServer> store_server;
  std::unique_ptr<TcpStoreClient> store_client;
  wsync_store store_handle{nullptr};
  std::string store_addr;
  GroupSecret secret;  // what authenticates the group's members
  ControlListener listener;
};

// Routes (group_route.cpp): who forwards to whom, and who gets each bucket from whom.
struct Routes {
  RoutePlan plan;
  bool relays = false;    // the plan is not a star: receivers forward to their children
  DeliveryPlan delivery;  // from the plan (or every engine rank, without control channels)
  uint64_t piece_bytes = 0;  // told in every ROUTE (0: none; group info's holds)
  std::string sender_host;   // this host as the receivers see it (planning a joiner's place)
  // Elastic: by rank, the relay a joiner was last placed below when that place failed it (it could
  // not wire into the relay's world, or it left before confirming a version there); 0: none. Its
  // next join goes below the sender instead (the planner would name the same relay again).
  std::vector<uint32_t> failed_place;
  // Elastic: the members that stayed are re-planned between updates (route_replan), once the
  // membership changed (`replan_due`). By rank, the relay a move or a join below it failed that rank
  // at (0: none), that process of it: no re-plan moves it there again (a join that takes the place
  // clears it; a later process of the relay's rank may take it).
  bool replan_due = false;
  std::vector<std::pair<uint32_t, int64_t>> move_failed;  // (the relay's rank and accepted_ms)
  // The plan's parents, copied from `plan` whenever it changes (at init, when a member left and
  // the pipeline thread hung it and its subtree below the sender, and when a joiner was installed
  // below a relay): what the caller's thread
  // checks a batch's segments against (route_fits_segments), under parent_mu, since the pipeline
  // thread moves members in `plan` meanwhile.
  mutable std::mutex parent_mu;
  std::vector<uint32_t> parent;
  std::vector<uint32_t> lane;  // (by rank, 0 the sender's: each member's lane, for the refusal's words)
};

// The receivers (group_members.cpp). A rank's slot is made at init and kept; membership=elastic
// removes and readmits receivers in it.
struct Members {
  std::vector<std::unique_ptr<Peer>> peers;  // index = rank - 1
  std::vector<std::string> dropped_in_update;  // elastic: removed during the update in progress
  // The tensors the group has committed (elastic), each with the digest of its bytes as this sender
  // sent them (XXH3-64, taken when its batch was delivered): a joiner's catch-up must bring those it
  // registered, and what it brings must match these, not what its source says.
  // Many senders: per part this sender sent (its box cut to what receivers needed), the digest of
  // the part's bytes in the box's own row-major order; `sum` is then unused.
  struct PartDigest {
    Box box;
    uint64_t sum = 0;
  };
  struct TensorDigest {
    uint64_t nbytes = 0;
    uint64_t sum = 0;
    std::vector<PartDigest> parts;
  };
  std::unordered_map<std::string, TensorDigest> update_digests;     // of the update in progress
  std::unordered_map<std::string, TensorDigest> committed_digests;  // the latest of each committed tensor
  std::string digest_failed;  // why a tensor of the update in progress could not be hashed (then
                              // its commit clears committed_digests: no catch-up until the next)
  // What the caller reads (any thread, under `mu`): the member ranks now, and the receivers that
  // joined or left, in order, which the caller takes one by one (`taken`; `reason` is the text of
  // the one it took last).
  // `holds` (by rank - 1): the version each member last confirmed, 0 while it may serve no
  // catch-up (it left, or a catch-up from it failed); many senders' sender 0 picks catch-up
  // sources from it on the caller's thread.
  struct Book {
    mutable std::mutex mu;
    std::vector<uint32_t> ranks;
    std::vector<uint64_t> holds;
    std::vector<MemberEvent> events;
    size_t taken = 0;
    std::string reason;
  };
  Book book;
};

// Receivers on their way in (group_join.cpp; elastic: between updates, pipeline thread only).
struct Admission {
  std::vector<std::unique_ptr<Peer>> hello_pending;  // connected, HELLO not read yet
  std::vector<std::unique_ptr<Peer>> joining;        // welcomed, not yet members
  std::unique_ptr<ControlWarnings, ControlWarningsDeleter> warnings;  // rate limits
  // Many senders: the ranks of `joining` whose join is done (pipeline thread writes, the caller's
  // thread reads when it agrees an update's members with the other senders).
  std::mutex ready_mu;
  std::vector<uint32_t> ready;
};

// The catch-ups arranged (group_catchup.cpp).
struct CatchupBook {
  uint64_t arranged = 0;  // names each one's transport world
  struct Open {  // one arranged, maybe still running (until its budget ran out)
    uint32_t source = 0, joiner = 0;
    std::string world;
    uint64_t version = 0;
    int64_t until_ms = 0;
  };
  std::vector<Open> open;
};

// The pipeline thread and the update it runs (group_pipeline.cpp).
struct PipelineThread {
  std::thread thread;
  int wake_fd = -1;  // eventfd: abort and destroy wake the pipeline thread out of poll()
  std::atomic<bool> aborted{false};
  bool update_begun = false;             // a batch of the current update was taken: joiners wait for its end
  bool update_lost_members = false;      // the finalize failed because receivers left (elastic)
  bool update_committed_partly = false;  // ... after END_UPDATE: the others committed it
  // Elastic, one sender: no receiver is left to deliver the current update to (why). Its batches
  // are released unsent, its finalize fails saying so, and the next update takes the joiners.
  std::string update_void;
  // Elastic, many senders: another sender aborted the current update (a receiver let go of it and
  // said so, group_inbox.cpp): it fails here as a peer's failure and is void (mid-batch, once the
  // sends on the wire finished), and the group goes on.
  bool update_abandoned = false;
};

// Sequence numbers on the wire (group_bucket.cpp; pipeline thread).
struct Wire {
  uint64_t next_seq = 1;
  uint64_t update_id = 1;
  uint64_t bucket_in_update = 0;
  bool abort_announced = false;  // receivers were sent ABORT_UPDATE
  PayloadHasher sum_hasher;      // a bucket sent from the caller's memory, hashed while it moves
};

// Host staging (group_stage.cpp): a slot per bucket on the wire.
struct Staging {
  std::vector<StagingSlot> slots;
  uint64_t buckets_started = 0;  // picks the staging slot of the next bucket
  std::atomic<uint64_t> host_bytes{0};  // host staging held (stats)
};

// The device side (group_device.cpp); untouched by host-only groups.
struct DeviceSide {
  int device = -1;  // CUDA ordinal of staging and the copy stream
  std::atomic<void*> copy_stream{nullptr};  // packs buckets; made at init or by the first CUDA batch
  std::mutex event_mu;
  std::vector<void*> free_events;  // recycled per-batch events
  std::atomic<uint64_t> staging_bytes{0};  // CUDA staging held (stats)
};

// The caller's thread only (group_submit.cpp).
struct CallerSide {
  std::unordered_set<std::string> names_in_update;  // of batches started in this update
  void* stream = nullptr;                           // wsync_group_set_cuda_stream
};

// The declared update (group_declare.cpp): the caller's thread checks batches and the finalize
// against `caller`; `for_engines` is handed to the pipeline thread's open_update (under `mu`).
struct DeclaredSide {
  std::shared_ptr<const Declared> caller;
  std::mutex mu;
  std::shared_ptr<const Declared> for_engines;
};

// Many senders (group_senders.cpp).
struct Senders {
  std::unique_ptr<TcpStoreClient> client;  // sender 0's store (sender 0: its own)
  std::vector<std::string> addrs;          // each sender's store address, for messages and knocks
  std::vector<uint8_t> knock_armed;        // sender k's store answered a knock: a refusal later is its death
  // caller thread only: one planner per batch position in an update (batch i of every update is
  // usually the same tensors: its plan is reused), and that position
  std::vector<std::unique_ptr<OwnershipPlanner>> planners;
  size_t batch_in_update = 0;
  uint64_t plans_agreed = 0;               // batches whose plan was agreed
  uint64_t update_plan_digest = 0;         // chain of this update's agreed digests
  // elastic: the ranks whose needs this update's plans read (every sender's members and the
  // joiners all of them have), agreed at the update's first batch; empty: every rank
  std::vector<uint32_t> update_ranks;
  std::atomic<uint64_t> plans_computed{0};  // planner.computed(), for get_stats
};

// HTTP engines (group_engines.cpp; a server's table entry changes through engines_set_live and
// engines_mark_inited there). Its `returns` is engine_members.cpp's.
struct EngineSide {
  std::vector<EngineServer> servers;  // every listed server (elastic) or the healthy ones (fixed)
  OptionList transport_properties;    // what the adapter asked for (get_needs), as read
  std::atomic<bool> failed{false};    // an INIT request failed: stop waiting for receivers
  bool update_open = false;  // PAUSE / BEGIN_UPDATE were sent for this update
  bool paused = false;       // the PAUSE step of the open update sent requests
  bool paused_by_failure = false;  // a failure's abandon left servers paused (holding a mix, or
                                   // by the option): a later abandon (destroy) keeps them so
  bool joined = false;       // the INIT step was sent: destroy tears the engine side down
  // After a failure: what each server holds (adapter `held`, plugin ABI 1.7), by server index,
  // and whether this group resumed it (engines_abandon)
  struct Held {
    int32_t held = WSYNC_HELD_UNKNOWN;
    std::string words;
    bool paused = false;   // this update paused it
    bool resumed = false;  // and this group resumed it after the failure
  };
  std::vector<Held> held;
  // membership=elastic (engine_members.cpp; pipeline thread): servers dropped and brought back
  struct Returns {
    std::vector<std::shared_ptr<EngineRejoin>> by_server;  // each one's way back
    bool on = false;  // init is done: a failing server is dropped, not fatal
  };
  Returns returns;
};

}  // namespace wsync

// The group: its parts, each written by one file (see each part's comment).
struct wsync_group {
  wsync::GroupOptions cfg;
  wsync::GroupShape shape;
  wsync::GroupPlugins plugins;
  wsync::Rendezvous rdv;
  wsync::Routes route;
  wsync::Members members;
  wsync::Admission admission;
  wsync::CatchupBook catchups;
  wsync::Mailbox mailbox;  // between the caller's thread and the pipeline thread
  wsync::PipelineThread pipe;
  wsync::Wire wire;
  wsync::Staging staging;
  wsync::DeviceSide dev;
  wsync::CallerSide caller;
  wsync::DeclaredSide declared;
  wsync::Senders senders;
  wsync::EngineSide engines;
};
