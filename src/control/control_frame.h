// The control channel between the sender and each receiver: small framed messages over TCP that
// carry everything except bucket bytes (join, manifests, readiness, acknowledgements, commits).
// Keeping them off the transport means every transport gets the same liveness detection: a
// receiver that dies closes its socket, and the sender knows at once which rank it was.
//
// Frame: magic u32 "WSYN", type u16, reserved u16, body_len u32, then the body. All integers
// little-endian. Bodies are written with ByteWriter and read with ByteReader (common/bytes.h),
// which bounds-checks every field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "wsync.h"

namespace wsync {

constexpr uint32_t kControlMagic = 0x4E595357;  // "WSYN"
// 2 (wsync 0.3): MANIFEST, READY and ACK carry a transport's side-channel blob.
// 3 (wsync 0.7): the sender opens with CHALLENGE; HELLO and WELCOME carry proofs of the group
//   secret (control/control_auth.h), so neither side trusts a peer that does not know it.
constexpr uint32_t kControlProtocolVersion = 4;
// Before a peer proved the secret its frames are small: a HELLO (group name <= 4096 bytes), a
// REJECT's reason (<= 64 KiB).
constexpr uint32_t kControlMaxBodyUnauthenticated = 72u << 10;
constexpr uint32_t kControlMaxBody = 64u << 20;
constexpr size_t kControlHeaderBytes = 12;

enum class MsgType : uint16_t {
  kHello = 1,        // rx->tx: u32 protocol, u32 rank, u32 pid, str group, bytes rx nonce, bytes proof
  kWelcome = 2,      // tx->rx: u32 world_size, bytes proof
  kReject = 3,       // tx->rx: i32 status, str reason
  kJoined = 4,       // rx->tx: transport is connected
  kManifest = 5,     // tx->rx: u64 seq, bytes manifest, bytes transport blob
  kReady = 6,        // rx->tx: u64 seq, bytes transport blob (receive posted)
  kNack = 7,         // rx->tx: u64 seq, i32 status, str reason (bucket refused)
  kAck = 8,          // rx->tx: u64 seq, i32 status, str reason, bytes transport blob (placed, or failed)
  kEndUpdate = 9,    // tx->rx: u64 version, u64 update_id, u64 buckets
  kCommitted = 10,   // rx->tx: u64 version
  kAbortUpdate = 11, // tx->rx: str reason
  kClose = 12,       // tx->rx: the group is destroyed
  kChallenge = 13,   // tx->rx, first on every connection: u32 protocol, bytes tx nonce
  // tx->rx (wsync 0.7, manifest flag kManifestFlagChecksumFollows): u64 seq, u64 checksum. The
  // payload checksum of a bucket whose bytes are already moving: the sender hashes while the bytes
  // travel, and the receiver compares before its ACK.
  kBucketSum = 14,
  // tx->rx after every JOINED, when the group relays (group info route is not star): u64 plan
  // digest, u32 parent, u32 position (this receiver's rank in its parent's relay world), u32
  // parent_world, u32 n, u32 children[n]. The receiver wires its relay transports and answers
  // JOINED again.
  kRoute = 15,
  // tx->rx between updates, elastic groups (ABI 1.5 development): u32 role (1 source, 2 joiner),
  // u32 peer rank, u64 version, str world, u64 budget_ms, str reason. The source sends the joiner its
  // registered tensors as they are at `version` over a transport world of two (source rank 0) named
  // `world`; the joiner takes them and commits `version` (docs/ABI.md "Membership", catch-up).
  kCatchup = 16,
  // tx->rx (ABI 1.5 development): the same body; the source of the joiner's catch-up in `world`
  // left the group (`reason` says why): the joiner stops waiting for its bytes. Ignored otherwise.
  kCatchupCancel = 17,
  // tx->rx (ABI 1.5 development), before WELCOME, to a receiver whose HELLO asked for any rank
  // (rank 0; elastic groups): u32 rank, the rank it is given. WELCOME's proof then binds that rank.
  kAssign = 18,
  // rx->tx (ABI 1.5 development): the body of a NACK (u64 seq 0, i32 status, str reason). The
  // receiver's catch-up failed: the sender removes it, naming the reason, without counting it
  // against the update in progress (it never held the group's version); it may join again.
  kCatchupFailed = 19,
  // rx->tx (control protocol 4): u64 landed, u64 waiting_seq. Every kProgressEveryMs while it
  // waits for a bucket: `landed` counts the pieces this receiver took (received, or forwarded by
  // a relay) since it joined; waiting_seq is the first piece it posted a receive for and does not
  // hold yet, 0 when it holds every piece it asked for (it waits on someone else: its children,
  // the sender). The sender's timeout_ms bounds silence, not size: a receiver whose count moves is
  // never timed out; one whose count stopped but that still reports holding everything is waiting
  // on someone else and is not the one named (docs/ABI.md "Timeouts").
  kProgress = 20,
  // tx->rx (control protocol 4, elastic groups that relay): u32 rank. Receiver `rank`, one this
  // relay forwards to, left the group: the relay forwards nothing more to it (its transport forgets
  // it) and goes on feeding the others. Taken wherever the link reads; ignored for a rank that is
  // not its child.
  kRouteDrop = 21,
  // rx->tx (control protocol 4, many senders): the body of a NACK (u64 seq 0, i32 status, str
  // reason). This receiver let go of the update because another sender failed (its connection
  // closed, it did not finalize in time, a bucket straight from it timed out or its transport
  // failed; the reason names it): the update fails, and the receiver is not to blame (an elastic
  // group does not remove it for this). A bucket lost below a relay is a NACK (the relay's loss).
  kSenderLost = 22,
  // tx->rx (control protocol 4, elastic groups of many senders): str reason. This sender removed the
  // receiver from the group (the reason says why); it closes the connection next. The receiver lets
  // go of the update and tells the other senders (a NACK naming this sender and the reason), so that
  // they remove it too.
  kRemoved = 23,
  // tx->rx (control protocol 4, issue 39: elastic groups that relay, ROUTE flag kRouteByRank), between
  // updates: u32 rank. Receiver `rank` was placed below this relay when it joined (its ROUTE named this
  // receiver its parent, and it wired itself into this relay's world): the relay connects to it
  // (transport connect_peer) and forwards every later bucket to it too. Sent where the joiner is
  // installed, before the first MANIFEST it takes part in.
  kRouteAdd = 24,
  // tx->rx (control protocol 4, issue 39: elastic groups that relay, ROUTE flag kRouteByRank), between
  // updates: u32 parent, u32 wire_ms. The sender re-planned its route around the members that
  // stayed: this receiver takes the bytes from `parent` (a relay, by its rank; 0: the sender) from
  // the next update on. It wires itself into that relay's world (as a joiner does, trying for at
  // most wire_ms), lets go of its side of the old one and answers JOINED; only then is the old relay
  // sent ROUTE_DROP and the new one ROUTE_ADD. One it cannot reach, its own rank, a child of its
  // own, a rank outside the world, or a receiver without a world numbered by rank: it keeps its
  // place and answers NACK with seq kRouteMoveNackSeq naming why (not seq 0: a refused update, which
  // a member of many senders may send meanwhile, stays one); the sender leaves it there. Taken
  // wherever the link reads.
  kRouteMove = 25,
};

// The seq of the NACK that refuses a ROUTE_MOVE (no bucket has it).
constexpr uint64_t kRouteMoveNackSeq = UINT64_MAX;

// How often a receiver reports progress while its count moves.
constexpr int64_t kProgressEveryMs = 250;

const char* msg_type_name(uint16_t type);

// A status code read from the wire: only a pinned failure code passes; 0 or an unknown value
// becomes `fallback`, so a peer can neither fake success nor hand out codes outside the ABI.
inline wsync_status_t wire_failure(int32_t code, wsync_status_t fallback) {
  return code > 0 && code < WSYNC_STATUS_COUNT ? code : fallback;
}

struct Frame {
  uint16_t type = 0;
  std::vector<uint8_t> body;
};

}  // namespace wsync
