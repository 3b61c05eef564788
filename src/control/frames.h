// The bodies of the control frames (control_frame.h), written and read in one place. Every
// decoder treats the body as hostile: it reads nothing outside it, bounds every length, and on
// failure returns WSYNC_ERR_PROTOCOL with a message naming the frame and the field ("HELLO: the
// 6-byte body ends inside rank (8 bytes would be needed)", "NACK: reason length 70000 exceeds
// the limit of 65536"), recorded with fail(), and leaves *out untouched. A decoder judges layout
// only (lengths, a nonce's fixed size, the protocol field that decides the rest of a handshake
// frame), never values (a rank, a sequence number, a status code): those are the caller's, with
// wire_failure() for status codes.
//
// Trailing bytes: the frames whose readers require the body to end after the last field
// (CHALLENGE, HELLO, WELCOME, ASSIGN, MANIFEST, READY, a successful ACK) refuse them; the others read
// their fields and ignore what follows, as every release so far has. The encoders write exactly
// the fields below, except that a reason longer than kFrameMaxReasonBytes is cut to it (at a
// UTF-8 boundary, so the peer reads the reason instead of refusing the frame); so
// decode(encode(x)) == x within the limits and, for a body decoded without trailing bytes,
// encode(decode(b)) == b.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/auth.h"
#include "control/control_frame.h"
#include "wsync.h"

namespace wsync {

// Limits of the variable-length fields; a longer one is refused.
constexpr uint32_t kFrameMaxGroupBytes = 4096;      // HELLO's group name
constexpr uint32_t kFrameMaxReasonBytes = 1u << 16; // REJECT's, NACK's, ACK's, ABORT_UPDATE's reason
// MANIFEST's manifest record: at most kControlMaxBody; transport blobs: WSYNC_BLOB_MAX_BYTES.

// The protocol field of CHALLENGE and HELLO decides the rest of their layout: a body of another
// protocol version decodes with only `protocol` read (the rest left empty), for the caller to
// refuse with WSYNC_ERR_VERSION_MISMATCH naming both versions.
struct ChallengeBody {  // tx->rx, first on every connection: u32 protocol, bytes tx nonce
  uint32_t protocol = 0;
  std::vector<uint8_t> nonce;  // exactly kNonceBytes
};

struct HelloBody {  // rx->tx: u32 protocol, u32 rank, u32 pid, str group, bytes rx nonce, bytes proof
  uint32_t protocol = 0;
  uint32_t rank = 0;
  uint32_t pid = 0;
  std::string group;
  std::vector<uint8_t> nonce;  // exactly kNonceBytes
  std::vector<uint8_t> proof;  // at most kMacBytes; proof_matches() checks it
};

struct WelcomeBody {  // tx->rx: u32 world_size, bytes proof
  uint32_t world_size = 0;
  std::vector<uint8_t> proof;  // at most kMacBytes
};

struct AssignBody {  // tx->rx: u32 rank
  uint32_t rank = 0;
};

struct RejectBody {  // tx->rx: i32 status, str reason
  int32_t status = 0;
  std::string reason;
};

struct ManifestFrameBody {  // tx->rx: u64 seq, bytes manifest, bytes transport blob
  uint64_t seq = 0;
  std::vector<uint8_t> manifest;  // a native manifest record (manifest/manifest.h), not decoded here
  std::vector<uint8_t> blob;
};

struct ReadyBody {  // rx->tx: u64 seq, bytes transport blob
  uint64_t seq = 0;
  std::vector<uint8_t> blob;
};

// NACK and ACK: u64 seq, i32 status, str reason, bytes transport blob. The receiver writes the
// blob in both (empty in a NACK); the sender reads it only from an ACK.
struct StatusBody {
  uint64_t seq = 0;
  int32_t status = 0;
  std::string reason;
  std::vector<uint8_t> blob;
};

struct EndUpdateBody {  // tx->rx: u64 version, u64 update_id, u64 buckets[, u64 plan_digest]
  uint64_t version = 0;
  uint64_t update_id = 0;
  uint64_t buckets = 0;
  // Since wsync 0.8, only from senders that plan: the chain of the plan digests the senders agreed
  // on for every batch of the update (receivers compare it across senders). Absent before.
  bool has_plan = false;
  uint64_t plan_digest = 0;
};

struct JoinedBody {  // rx->tx: empty, or u32 lane (since 0.10: the receiver option lane; empty = lane 0, unsaid)
  bool has_lane = false;
  uint32_t lane = 0;
};

struct RemovedBody {  // tx->rx: str reason (REMOVED)
  std::string reason;
};

struct RouteDropBody {  // tx->rx: u32 rank (ROUTE_DROP: a child of this relay that left; ROUTE_ADD: one it takes)
  uint32_t rank = 0;
};

struct RouteMoveBody {  // tx->rx: u32 parent (0: the sender), u32 wire_ms (1..: how long it tries that relay's world)
  uint32_t parent = 0;
  uint32_t wire_ms = 0;
};

struct CommittedBody {  // rx->tx: u64 version
  uint64_t version = 0;
};

struct ProgressBody {  // rx->tx: u64 landed, u64 waiting_seq
  uint64_t landed = 0;
  uint64_t waiting_seq = 0;
};

struct BucketSumBody {  // tx->rx: u64 seq, u64 checksum
  uint64_t seq = 0;
  uint64_t checksum = 0;
};

// tx->rx: u64 digest, u32 parent, u32 position, u32 parent_world, u32 n, u32 children[n]
struct RouteBody {
  uint64_t digest = 0;                 // of the route plan (planner/route_planner.h)
  uint32_t parent = 0;                 // 0: the sender
  uint32_t position = 0;               // this receiver's rank in its parent's relay world (1..)
  uint32_t parent_world = 0;           // 1 + the parent's children (unused when parent is 0)
  std::vector<uint32_t> children;      // the ranks this receiver forwards to, in relay-world order
  // Since issue 39 (optional, after the children): the piece size of this group's buckets, when the
  // sender chose it with the route (a one-sender group that relays and was not given piece_bytes:
  // kRoutePieceBytes); absent: group info's piece_bytes holds. 64 KiB .. 1 GiB.
  bool has_piece_bytes = false;
  uint64_t piece_bytes = 0;
  // Since issue 39 (optional, after piece_bytes, which is then 0 when not chosen): u32 flags. Flag
  // kRouteByRank (elastic groups): every relay world is as large as the group's (world_size) and
  // numbers its members by their group ranks: `position` is this receiver's rank, `parent_world`
  // the group's world size, and each member opens its own relay world (rank 0, hint join_later) even
  // with no children, so that a joiner can be placed below it between updates (ROUTE_ADD).
  uint32_t flags = 0;
  // Flag kRouteFallback (a joiner placed below a relay): u32 wire_ms follows the flags. The joiner
  // tries its parent's relay world for at most wire_ms; when it cannot reach it, it says NACK and
  // reads one more ROUTE, which places it below the sender.
  uint32_t wire_ms = 0;
};
constexpr uint32_t kRouteByRank = 1, kRouteFallback = 2;
constexpr uint32_t kFrameMaxChildren = 4096;

// CATCHUP and CATCHUP_CANCEL, tx->rx: u32 role, u32 peer, u64 version, str world, u64 budget_ms, str reason,
// u32 n, n x (str name, u64 sum), and optionally (many senders) u32 n again, n x (i32 ndim, ndim x
// (i64 offset, i64 extent)): the box of each name's sum
struct CatchupBody {
  static constexpr uint32_t kSource = 1, kJoiner = 2;
  uint32_t role = 0;     // kSource: send to `peer`; kJoiner: take from `peer`
  uint32_t peer = 0;     // the other receiver's rank
  uint64_t version = 0;  // the group's latest committed version, which the source holds
  std::string world;     // the transport world of the two (group name of the instance)
  uint64_t budget_ms = 0;  // the catch-up ends within this long (the sender's timeout_ms / 2)
  std::string reason;      // CATCHUP_CANCEL: why the source left (empty in CATCHUP)
  // CATCHUP to the joiner: the tensors the group has committed (those it registered must all come
  // for it to commit `version`), each with the XXH3-64 of its bytes as the sender sent them (what
  // the source's bytes must match, protocol 4). At most kFrameMaxCatchupNames.
  std::vector<std::string> names;
  std::vector<uint64_t> sums;  // one per name
  // Many senders: one box per name (a name may come once per box), the part of the full tensor
  // that sender sent to receivers needing it, its sum of that part's bytes in the box's own
  // row-major order; empty: each sum is of the whole tensor. A sender with no sums of `version`
  // sends no names and says why in `reason`. Each box as offset, extent per dimension (at most
  // WSYNC_MAX_NDIM dimensions, each value >= 0; whether it fits the tensor is the joiner's check).
  std::vector<std::vector<int64_t>> boxes;
};
constexpr uint32_t kFrameMaxCatchupNames = 1u << 20;

struct AbortUpdateBody {  // tx->rx: str reason
  std::string reason;
};

std::vector<uint8_t> encode_challenge(const ChallengeBody& b);
std::vector<uint8_t> encode_hello(const HelloBody& b);
std::vector<uint8_t> encode_welcome(const WelcomeBody& b);
std::vector<uint8_t> encode_reject(const RejectBody& b);
std::vector<uint8_t> encode_assign(const AssignBody& b);
std::vector<uint8_t> encode_manifest_frame(const ManifestFrameBody& b);
std::vector<uint8_t> encode_ready(const ReadyBody& b);
std::vector<uint8_t> encode_status(const StatusBody& b);  // NACK and ACK
std::vector<uint8_t> encode_end_update(const EndUpdateBody& b);
std::vector<uint8_t> encode_joined(const JoinedBody& b);
std::vector<uint8_t> encode_committed(const CommittedBody& b);
std::vector<uint8_t> encode_abort_update(const AbortUpdateBody& b);
std::vector<uint8_t> encode_bucket_sum(const BucketSumBody& b);
std::vector<uint8_t> encode_progress(const ProgressBody& b);
std::vector<uint8_t> encode_route(const RouteBody& b);
std::vector<uint8_t> encode_route_drop(const RouteDropBody& b);
std::vector<uint8_t> encode_route_move(const RouteMoveBody& b);
std::vector<uint8_t> encode_removed(const RemovedBody& b);
std::vector<uint8_t> encode_catchup(const CatchupBody& b);

// Trailing bytes refused (the handshake of protocol 3 is exact).
wsync_status_t decode_challenge(const std::vector<uint8_t>& body, ChallengeBody* out);
wsync_status_t decode_hello(const std::vector<uint8_t>& body, HelloBody* out);
wsync_status_t decode_welcome(const std::vector<uint8_t>& body, WelcomeBody* out);
wsync_status_t decode_assign(const std::vector<uint8_t>& body, AssignBody* out);
// The peer's reasons (REJECT, NACK, ACK, ABORT_UPDATE) come out printable: control characters
// and invalid UTF-8 as \xNN (common/names.h printable_text).
// Trailing bytes ignored.
wsync_status_t decode_reject(const std::vector<uint8_t>& body, RejectBody* out);
// seq, status and reason; what follows (the blob the receiver appends) is ignored, out->blob
// stays empty.
wsync_status_t decode_nack(const std::vector<uint8_t>& body, StatusBody* out);
// seq, status and reason; when status is WSYNC_OK also the blob, and then nothing may follow.
// A failed ACK's blob is never used, so, as before, it is not read.
wsync_status_t decode_ack(const std::vector<uint8_t>& body, StatusBody* out);
wsync_status_t decode_end_update(const std::vector<uint8_t>& body, EndUpdateBody* out);
wsync_status_t decode_joined(const std::vector<uint8_t>& body, JoinedBody* out);
wsync_status_t decode_committed(const std::vector<uint8_t>& body, CommittedBody* out);
wsync_status_t decode_abort_update(const std::vector<uint8_t>& body, AbortUpdateBody* out);
wsync_status_t decode_bucket_sum(const std::vector<uint8_t>& body, BucketSumBody* out);
wsync_status_t decode_progress(const std::vector<uint8_t>& body, ProgressBody* out);
// Trailing bytes refused (after the optional piece_bytes and flags; unknown flags refused); at most kFrameMaxChildren children.
wsync_status_t decode_route(const std::vector<uint8_t>& body, RouteBody* out);
// Trailing bytes refused.
wsync_status_t decode_route_drop(const std::vector<uint8_t>& body, RouteDropBody* out);
// ROUTE_ADD: the same body as ROUTE_DROP (encode_route_drop), named ROUTE_ADD in its messages.
wsync_status_t decode_route_add(const std::vector<uint8_t>& body, RouteDropBody* out);
// Trailing bytes refused; wire_ms 0 refused.
wsync_status_t decode_route_move(const std::vector<uint8_t>& body, RouteMoveBody* out);
// The reason comes out printable, as the other reasons; trailing bytes ignored.
wsync_status_t decode_removed(const std::vector<uint8_t>& body, RemovedBody* out);
// Trailing bytes ignored; the world name at most kFrameMaxGroupBytes + 64; each name a valid tensor
// name, at most kFrameMaxCatchupNames of them.
wsync_status_t decode_catchup(const std::vector<uint8_t>& body, CatchupBody* out);
// A receiver's answer to END_UPDATE(version) that is not NACK: OK when it is COMMITTED(version),
// else PROTOCOL with a message naming `who`, what came (the version it committed included) and
// the version that was expected.
wsync_status_t check_committed(const Frame& f, uint64_t version, const std::string& who);
// Trailing bytes refused.
wsync_status_t decode_manifest_frame(const std::vector<uint8_t>& body, ManifestFrameBody* out);
wsync_status_t decode_ready(const std::vector<uint8_t>& body, ReadyBody* out);

}  // namespace wsync
