// libFuzzer target: the decoders of every control frame body (control/frames.h), as the sender
// and the receiver read them. Run by ctest as fuzz.control_frames.
//
// Input: frame type u8 (MsgType) | body...
// Beyond "no crash, no UB, no leak": every refusal is WSYNC_ERR_PROTOCOL with a message naming the
// frame; every length respects its limit; and a decoded body re-encodes to the bytes it was read
// from (all of them where the decoder refuses trailing bytes, a prefix where it ignores them).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "control/frames.h"
#include "wsync_plugin.h"

namespace {

using Bytes = std::vector<uint8_t>;

// `again` must equal `body` (exact) or be a prefix of it.
void same_bytes(const Bytes& body, const Bytes& again, bool exact) {
  if (exact ? again != body : (again.size() > body.size() || !std::equal(again.begin(), again.end(), body.begin())))
    std::abort();
}

// A peer's reason is made printable as it is decoded (control characters and invalid UTF-8 as
// \xNN, up to 4 bytes each): such a reason no longer encodes back to the bytes that came, so the
// round trip is checked only where nothing was escaped.
bool escaped(const std::string& reason) { return reason.find("\\x") != std::string::npos; }
template <typename T>
bool was_escaped(const T&) { return false; }
bool was_escaped(const wsync::RejectBody& b) { return escaped(b.reason); }
bool was_escaped(const wsync::AbortUpdateBody& b) { return escaped(b.reason); }
bool was_escaped(const wsync::RemovedBody& b) { return escaped(b.reason); }
bool was_escaped(const wsync::CatchupBody& b) { return escaped(b.reason); }

template <typename T>
void run(const Bytes& body, const char* frame, wsync_status_t (*decode)(const Bytes&, T*), Bytes (*encode)(const T&),
         bool exact, bool (*valid)(const T&)) {
  T out;
  const wsync_status_t st = decode(body, &out);
  if (st != WSYNC_OK) {
    if (st != WSYNC_ERR_PROTOCOL) std::abort();
    if (wsync::last_error().rfind(std::string(frame) + ": ", 0) != 0) std::abort();
    return;
  }
  if (!valid(out)) std::abort();
  if (!was_escaped(out)) same_bytes(body, encode(out), exact);
}

// Printable (no C0 or C1 control character, valid UTF-8) and at most the frame's limit, 4 bytes
// per escaped byte.
bool reason_ok(const std::string& r) {
  if (r.size() > 4 * static_cast<size_t>(wsync::kFrameMaxReasonBytes)) return false;
  if (!escaped(r) && r.size() > wsync::kFrameMaxReasonBytes) return false;
  for (size_t i = 0; i < r.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(r[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == 0xc2 && i + 1 < r.size() && static_cast<unsigned char>(r[i + 1]) < 0xa0) return false;  // C1
  }
  return true;
}
bool blob_ok(const Bytes& b) { return b.size() <= WSYNC_BLOB_MAX_BYTES; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Bytes body(data + 1, data + size);
  using namespace wsync;
  switch (static_cast<MsgType>(data[0] % 32)) {  // (every type, 1..25, and some unknown ones)
    case MsgType::kChallenge: {
      ChallengeBody out;
      const wsync_status_t st = decode_challenge(body, &out);
      if (st != WSYNC_OK) {
        if (st != WSYNC_ERR_PROTOCOL) std::abort();
        return 0;
      }
      if (out.protocol != kControlProtocolVersion) {  // only the version was read
        if (!out.nonce.empty()) std::abort();
        return 0;
      }
      if (out.nonce.size() != kNonceBytes) std::abort();
      same_bytes(body, encode_challenge(out), true);
      return 0;
    }
    case MsgType::kHello: {
      HelloBody out;
      const wsync_status_t st = decode_hello(body, &out);
      if (st != WSYNC_OK) {
        if (st != WSYNC_ERR_PROTOCOL || last_error().rfind("HELLO: ", 0) != 0) std::abort();
        return 0;
      }
      if (out.protocol != kControlProtocolVersion) {
        if (out.rank != 0 || !out.group.empty() || !out.nonce.empty() || !out.proof.empty()) std::abort();
        return 0;
      }
      if (out.group.size() > kFrameMaxGroupBytes || out.nonce.size() != kNonceBytes || out.proof.size() > kMacBytes)
        std::abort();
      same_bytes(body, encode_hello(out), true);
      return 0;
    }
    case MsgType::kWelcome:
      run<WelcomeBody>(body, "WELCOME", decode_welcome, encode_welcome, true,
                       [](const WelcomeBody& b) { return b.proof.size() <= kMacBytes; });
      return 0;
    case MsgType::kReject:
      run<RejectBody>(body, "REJECT", decode_reject, encode_reject, false,
                      [](const RejectBody& b) { return reason_ok(b.reason); });
      return 0;
    case MsgType::kManifest:
      run<ManifestFrameBody>(body, "MANIFEST", decode_manifest_frame, encode_manifest_frame, true,
                             [](const ManifestFrameBody& b) { return b.manifest.size() <= kControlMaxBody && blob_ok(b.blob); });
      return 0;
    case MsgType::kReady:
      run<ReadyBody>(body, "READY", decode_ready, encode_ready, true, [](const ReadyBody& b) { return blob_ok(b.blob); });
      return 0;
    case MsgType::kSenderLost:  // (a NACK's body)
    case MsgType::kNack: {
      // The NACK's blob is not read: compare up to the reason.
      StatusBody out;
      const wsync_status_t st = decode_nack(body, &out);
      if (st != WSYNC_OK) {
        if (st != WSYNC_ERR_PROTOCOL || last_error().rfind("NACK: ", 0) != 0) std::abort();
        return 0;
      }
      if (!reason_ok(out.reason) || !out.blob.empty()) std::abort();
      Bytes again = encode_status(out);
      again.resize(again.size() - 4);  // the empty blob's length
      if (!escaped(out.reason)) same_bytes(body, again, false);
      return 0;
    }
    case MsgType::kAck: {
      StatusBody out;
      const wsync_status_t st = decode_ack(body, &out);
      if (st != WSYNC_OK) {
        if (st != WSYNC_ERR_PROTOCOL || last_error().rfind("ACK: ", 0) != 0) std::abort();
        return 0;
      }
      if (!reason_ok(out.reason) || !blob_ok(out.blob)) std::abort();
      Bytes again = encode_status(out);
      if (escaped(out.reason)) return 0;
      if (out.status == WSYNC_OK) {
        same_bytes(body, again, true);
      } else {  // a failed ACK's blob is not read
        if (!out.blob.empty()) std::abort();
        again.resize(again.size() - 4);
        same_bytes(body, again, false);
      }
      return 0;
    }
    case MsgType::kEndUpdate:
      run<EndUpdateBody>(body, "END_UPDATE", decode_end_update, encode_end_update, false,
                         [](const EndUpdateBody&) { return true; });
      return 0;
    case MsgType::kCommitted:
      run<CommittedBody>(body, "COMMITTED", decode_committed, encode_committed, false,
                         [](const CommittedBody&) { return true; });
      return 0;
    case MsgType::kAbortUpdate:
      run<AbortUpdateBody>(body, "ABORT_UPDATE", decode_abort_update, encode_abort_update, false,
                           [](const AbortUpdateBody& b) { return reason_ok(b.reason); });
      return 0;
    case MsgType::kBucketSum:
      run<BucketSumBody>(body, "BUCKET_SUM", decode_bucket_sum, encode_bucket_sum, false,
                         [](const BucketSumBody&) { return true; });
      return 0;
    case MsgType::kProgress:
      run<ProgressBody>(body, "PROGRESS", decode_progress, encode_progress, true,
                        [](const ProgressBody&) { return true; });
      return 0;
    case MsgType::kRoute:
      run<RouteBody>(body, "ROUTE", decode_route, encode_route, true, [](const RouteBody& b) {
        return b.children.size() <= wsync::kFrameMaxChildren && (b.flags & ~(wsync::kRouteByRank | wsync::kRouteFallback)) == 0;
      });
      return 0;
    case MsgType::kRemoved:
      run<RemovedBody>(body, "REMOVED", decode_removed, encode_removed, false,
                       [](const RemovedBody& b) { return reason_ok(b.reason); });
      return 0;
    case MsgType::kRouteDrop:
      run<RouteDropBody>(body, "ROUTE_DROP", decode_route_drop, encode_route_drop, true,
                         [](const RouteDropBody&) { return true; });
      return 0;
    case MsgType::kRouteAdd:
      run<RouteDropBody>(body, "ROUTE_ADD", decode_route_add, encode_route_drop, true,
                         [](const RouteDropBody&) { return true; });
      return 0;
    case MsgType::kRouteMove:
      run<RouteMoveBody>(body, "ROUTE_MOVE", decode_route_move, encode_route_move, true,
                         [](const RouteMoveBody& b) { return b.wire_ms != 0; });
      return 0;
    case MsgType::kCatchup:
    case MsgType::kCatchupCancel:
      run<CatchupBody>(body, "CATCHUP", decode_catchup, encode_catchup, false, [](const CatchupBody& b) {
        return reason_ok(b.reason) && b.world.size() <= wsync::kFrameMaxGroupBytes + 64 &&
               b.names.size() <= wsync::kFrameMaxCatchupNames;
      });
      return 0;
    default:  // JOINED, CLOSE and unknown types carry nothing to decode
      return 0;
  }
}
