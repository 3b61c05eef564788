// Control frame bodies (see control/frames.h).
#include "control/frames.h"

#include <algorithm>
#include <utility>

#include "common/bytes.h"
#include "common/error.h"
#include "common/names.h"
#include "control/group_info.h"
#include "wsync_plugin.h"

namespace wsync {
namespace {

// A ByteReader that remembers which field of which frame it failed on, for one message.
class BodyReader {
 public:
  BodyReader(const char* frame, const std::vector<uint8_t>& body) : frame_(frame), r_(body), size_(body.size()) {}

  bool u32(uint32_t* v, const char* field) { return note(r_.u32(v), field); }
  bool i32(int32_t* v, const char* field) { return note(r_.i32(v), field); }
  bool u64(uint64_t* v, const char* field) { return note(r_.u64(v), field); }
  bool i64(int64_t* v, const char* field) { return note(r_.i64(v), field); }
  bool str(std::string* v, uint32_t max, const char* field) { return note(r_.str32(v, max, field), field); }
  // Text the peer wrote for people (a reason): made printable here, once, so that no log line or
  // error message ever carries its control characters (common/names.h).
  bool text(std::string* v, uint32_t max, const char* field) {
    if (!str(v, max, field)) return false;
    *v = printable_text(*v);
    return true;
  }
  bool blob(std::vector<uint8_t>* v, uint32_t max, const char* field) { return note(r_.blob32(v, max, field), field); }
  // A field of fixed size: `v` (already read) must hold exactly `n` bytes.
  bool size_is(const std::vector<uint8_t>& v, size_t n, const char* field) {
    if (v.size() == n) return true;
    wrong_size_ = field;
    wrong_size_got_ = v.size();
    wrong_size_want_ = n;
    return false;
  }
  bool at_end() const { return r_.at_end(); }
  size_t left() const { return r_.left(); }
  // Nothing may follow `last`.
  bool end(const char* last) {
    if (r_.at_end()) return true;
    trailing_after_ = last;
    return false;
  }

  // The failure as WSYNC_ERR_PROTOCOL, recorded with fail().
  wsync_status_t error() const {
    if (wrong_size_ != nullptr)
      return fail(WSYNC_ERR_PROTOCOL, "%s: %s is %zu bytes, must be %zu", frame_, wrong_size_, wrong_size_got_,
                  wrong_size_want_);
    if (trailing_after_ != nullptr)
      return fail(WSYNC_ERR_PROTOCOL, "%s: %zu unexpected bytes after %s at the end of the %zu-byte body", frame_,
                  r_.left(), trailing_after_, size_);
    if (r_.state() == ByteReader::kBad)  // a length over its limit; ByteReader's words name the field
      return fail(WSYNC_ERR_PROTOCOL, "%s: %s", frame_, r_.error().c_str());
    return fail(WSYNC_ERR_PROTOCOL, "%s: the %zu-byte body ends inside %s (%zu bytes would be needed)", frame_, size_,
                field_ != nullptr ? field_ : "?", r_.need());
  }

 private:
  bool note(bool ok, const char* field) {
    if (!ok && field_ == nullptr) field_ = field;
    return ok;
  }

  const char* frame_;
  ByteReader r_;
  size_t size_;
  const char* field_ = nullptr;           // the field a read failed in
  const char* trailing_after_ = nullptr;  // end() found bytes after this field
  const char* wrong_size_ = nullptr;      // size_is() found this field of another size
  size_t wrong_size_got_ = 0, wrong_size_want_ = 0;
};

// `s` cut to at most `max` bytes, never inside a UTF-8 sequence.
std::string clip_reason(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // s[n] continues a sequence
  return s.substr(0, n);
}

template <typename T>
wsync_status_t done(T&& value, T* out) {
  *out = std::forward<T>(value);
  return WSYNC_OK;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Encoders

std::vector<uint8_t> encode_challenge(const ChallengeBody& b) {
  ByteWriter w;
  w.u32(b.protocol);
  w.blob32(b.nonce);
  return std::move(w.data());
}

std::vector<uint8_t> encode_hello(const HelloBody& b) {
  ByteWriter w;
  w.u32(b.protocol);
  w.u32(b.rank);
  w.u32(b.pid);
  w.str32(b.group);
  w.blob32(b.nonce);
  w.blob32(b.proof);
  return std::move(w.data());
}

std::vector<uint8_t> encode_welcome(const WelcomeBody& b) {
  ByteWriter w;
  w.u32(b.world_size);
  w.blob32(b.proof);
  return std::move(w.data());
}

std::vector<uint8_t> encode_reject(const RejectBody& b) {
  ByteWriter w;
  w.i32(b.status);
  w.str32(clip_reason(b.reason, kFrameMaxReasonBytes));
  return std::move(w.data());
}

std::vector<uint8_t> encode_manifest_frame(const ManifestFrameBody& b) {
  ByteWriter w;
  w.u64(b.seq);
  w.blob32(b.manifest);
  w.blob32(b.blob);
  return std::move(w.data());
}

std::vector<uint8_t> encode_ready(const ReadyBody& b) {
  ByteWriter w;
  w.u64(b.seq);
  w.blob32(b.blob);
  return std::move(w.data());
}

std::vector<uint8_t> encode_status(const StatusBody& b) {
  ByteWriter w;
  w.u64(b.seq);
  w.i32(b.status);
  w.str32(clip_reason(b.reason, kFrameMaxReasonBytes));
  w.blob32(b.blob);
  return std::move(w.data());
}

std::vector<uint8_t> encode_end_update(const EndUpdateBody& b) {
  ByteWriter w;
  w.u64(b.version);
  w.u64(b.update_id);
  w.u64(b.buckets);
  if (b.has_plan) w.u64(b.plan_digest);
  return std::move(w.data());
}

std::vector<uint8_t> encode_joined(const JoinedBody& b) {
  ByteWriter w;
  if (b.has_lane) w.u32(b.lane);
  return std::move(w.data());
}

std::vector<uint8_t> encode_route_drop(const RouteDropBody& b) {
  ByteWriter w;
  w.u32(b.rank);
  return std::move(w.data());
}

std::vector<uint8_t> encode_route_move(const RouteMoveBody& b) {
  ByteWriter w;
  w.u32(b.parent);
  w.u32(b.wire_ms);
  return std::move(w.data());
}

std::vector<uint8_t> encode_committed(const CommittedBody& b) {
  ByteWriter w;
  w.u64(b.version);
  return std::move(w.data());
}

std::vector<uint8_t> encode_progress(const ProgressBody& b) {
  ByteWriter w;
  w.u64(b.landed);
  w.u64(b.waiting_seq);
  return std::move(w.data());
}

std::vector<uint8_t> encode_bucket_sum(const BucketSumBody& b) {
  ByteWriter w;
  w.u64(b.seq);
  w.u64(b.checksum);
  return std::move(w.data());
}

std::vector<uint8_t> encode_route(const RouteBody& b) {
  ByteWriter w;
  w.u64(b.digest);
  w.u32(b.parent);
  w.u32(b.position);
  w.u32(b.parent_world);
  w.u32(static_cast<uint32_t>(b.children.size()));
  for (uint32_t c : b.children) w.u32(c);
  if (b.has_piece_bytes || b.flags != 0) w.u64(b.has_piece_bytes ? b.piece_bytes : 0);
  if (b.flags != 0) w.u32(b.flags);
  if (b.flags & kRouteFallback) w.u32(b.wire_ms);
  return std::move(w.data());
}

std::vector<uint8_t> encode_assign(const AssignBody& b) {
  ByteWriter w;
  w.u32(b.rank);
  return std::move(w.data());
}

std::vector<uint8_t> encode_catchup(const CatchupBody& b) {
  ByteWriter w;
  w.u32(b.role);
  w.u32(b.peer);
  w.u64(b.version);
  w.str32(b.world);
  w.u64(b.budget_ms);
  w.str32(clip_reason(b.reason, kFrameMaxReasonBytes));
  w.u32(static_cast<uint32_t>(b.names.size()));
  for (size_t i = 0; i < b.names.size(); ++i) {
    w.str32(b.names[i]);
    w.u64(i < b.sums.size() ? b.sums[i] : 0);
  }
  if (b.boxes.empty()) return std::move(w.data());
  w.u32(static_cast<uint32_t>(b.boxes.size()));
  for (const std::vector<int64_t>& box : b.boxes) {
    w.i32(static_cast<int32_t>(box.size() / 2));
    for (int64_t v : box) w.i64(v);
  }
  return std::move(w.data());
}

std::vector<uint8_t> encode_abort_update(const AbortUpdateBody& b) {
  ByteWriter w;
  w.str32(clip_reason(b.reason, kFrameMaxReasonBytes));
  return std::move(w.data());
}

std::vector<uint8_t> encode_removed(const RemovedBody& b) {
  ByteWriter w;
  w.str32(clip_reason(b.reason, kFrameMaxReasonBytes));
  return std::move(w.data());
}

// ---------------------------------------------------------------------------------------------
// Decoders

wsync_status_t decode_challenge(const std::vector<uint8_t>& body, ChallengeBody* out) {
  BodyReader r("CHALLENGE", body);
  ChallengeBody b;
  if (!r.u32(&b.protocol, "protocol")) return r.error();
  if (b.protocol != kControlProtocolVersion) return done(std::move(b), out);  // laid out otherwise
  if (!r.blob(&b.nonce, kNonceBytes, "nonce") || !r.size_is(b.nonce, kNonceBytes, "nonce") || !r.end("nonce"))
    return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_hello(const std::vector<uint8_t>& body, HelloBody* out) {
  BodyReader r("HELLO", body);
  HelloBody b;
  if (!r.u32(&b.protocol, "protocol")) return r.error();
  if (b.protocol != kControlProtocolVersion) return done(std::move(b), out);  // laid out otherwise
  if (!r.u32(&b.rank, "rank") || !r.u32(&b.pid, "pid") || !r.str(&b.group, kFrameMaxGroupBytes, "group") ||
      !r.blob(&b.nonce, kNonceBytes, "nonce") || !r.size_is(b.nonce, kNonceBytes, "nonce") ||
      !r.blob(&b.proof, kMacBytes, "proof") || !r.end("proof"))
    return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_welcome(const std::vector<uint8_t>& body, WelcomeBody* out) {
  BodyReader r("WELCOME", body);
  WelcomeBody b;
  if (!r.u32(&b.world_size, "world_size") || !r.blob(&b.proof, kMacBytes, "proof") || !r.end("proof"))
    return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_reject(const std::vector<uint8_t>& body, RejectBody* out) {
  BodyReader r("REJECT", body);
  RejectBody b;
  if (!r.i32(&b.status, "status") || !r.text(&b.reason, kFrameMaxReasonBytes, "reason")) return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_manifest_frame(const std::vector<uint8_t>& body, ManifestFrameBody* out) {
  BodyReader r("MANIFEST", body);
  ManifestFrameBody b;
  if (!r.u64(&b.seq, "seq") || !r.blob(&b.manifest, kControlMaxBody, "manifest") ||
      !r.blob(&b.blob, WSYNC_BLOB_MAX_BYTES, "transport blob") || !r.end("transport blob"))
    return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_ready(const std::vector<uint8_t>& body, ReadyBody* out) {
  BodyReader r("READY", body);
  ReadyBody b;
  if (!r.u64(&b.seq, "seq") || !r.blob(&b.blob, WSYNC_BLOB_MAX_BYTES, "transport blob") || !r.end("transport blob"))
    return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_nack(const std::vector<uint8_t>& body, StatusBody* out) {
  BodyReader r("NACK", body);
  StatusBody b;
  if (!r.u64(&b.seq, "seq") || !r.i32(&b.status, "status") || !r.text(&b.reason, kFrameMaxReasonBytes, "reason"))
    return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_ack(const std::vector<uint8_t>& body, StatusBody* out) {
  BodyReader r("ACK", body);
  StatusBody b;
  if (!r.u64(&b.seq, "seq") || !r.i32(&b.status, "status") || !r.text(&b.reason, kFrameMaxReasonBytes, "reason"))
    return r.error();
  if (b.status == WSYNC_OK &&
      (!r.blob(&b.blob, WSYNC_BLOB_MAX_BYTES, "transport blob") || !r.end("transport blob")))
    return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_end_update(const std::vector<uint8_t>& body, EndUpdateBody* out) {
  BodyReader r("END_UPDATE", body);
  EndUpdateBody b;
  if (!r.u64(&b.version, "version") || !r.u64(&b.update_id, "update_id") || !r.u64(&b.buckets, "buckets"))
    return r.error();
  if (!r.at_end()) {
    b.has_plan = true;
    if (!r.u64(&b.plan_digest, "plan_digest")) return r.error();  // (what may follow: a later sender's)
  }
  return done(std::move(b), out);
}

wsync_status_t decode_joined(const std::vector<uint8_t>& body, JoinedBody* out) {
  BodyReader r("JOINED", body);
  JoinedBody b;
  if (!body.empty()) {
    if (!r.u32(&b.lane, "lane") || !r.end("lane")) return r.error();
    b.has_lane = true;
  }
  return done(std::move(b), out);
}

namespace {

wsync_status_t decode_route_rank(const char* frame, const std::vector<uint8_t>& body, RouteDropBody* out) {
  BodyReader r(frame, body);
  RouteDropBody b;
  if (!r.u32(&b.rank, "rank") || !r.end("rank")) return r.error();
  return done(std::move(b), out);
}

}  // namespace

wsync_status_t decode_route_drop(const std::vector<uint8_t>& body, RouteDropBody* out) {
  return decode_route_rank("ROUTE_DROP", body, out);
}

wsync_status_t decode_route_add(const std::vector<uint8_t>& body, RouteDropBody* out) {
  return decode_route_rank("ROUTE_ADD", body, out);
}

wsync_status_t decode_route_move(const std::vector<uint8_t>& body, RouteMoveBody* out) {
  BodyReader r("ROUTE_MOVE", body);
  RouteMoveBody b;
  if (!r.u32(&b.parent, "parent") || !r.u32(&b.wire_ms, "wire_ms") || !r.end("wire_ms")) return r.error();
  if (b.wire_ms == 0) return fail(WSYNC_ERR_PROTOCOL, "ROUTE_MOVE: wire_ms is 0");
  return done(std::move(b), out);
}

wsync_status_t decode_committed(const std::vector<uint8_t>& body, CommittedBody* out) {
  BodyReader r("COMMITTED", body);
  CommittedBody b;
  if (!r.u64(&b.version, "version")) return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_progress(const std::vector<uint8_t>& body, ProgressBody* out) {
  BodyReader r("PROGRESS", body);
  ProgressBody b;
  if (!r.u64(&b.landed, "landed") || !r.u64(&b.waiting_seq, "waiting_seq") || !r.end("waiting_seq")) return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_bucket_sum(const std::vector<uint8_t>& body, BucketSumBody* out) {
  BodyReader r("BUCKET_SUM", body);
  BucketSumBody b;
  if (!r.u64(&b.seq, "seq") || !r.u64(&b.checksum, "checksum")) return r.error();
  return done(std::move(b), out);
}

namespace {

// ROUTE's optional tail (since issue 39): piece_bytes, then flags (and wire_ms with kRouteFallback).
wsync_status_t decode_route_tail(BodyReader& r, RouteBody* b) {
  if (!r.u64(&b->piece_bytes, "piece_bytes")) return r.error();
  if (!r.at_end()) {
    if (!r.u32(&b->flags, "flags")) return r.error();
    if (b->flags == 0) return fail(WSYNC_ERR_PROTOCOL, "ROUTE: flags 0 (no flags are written as none)");
    if (b->flags & ~(kRouteByRank | kRouteFallback)) return fail(WSYNC_ERR_PROTOCOL, "ROUTE: unknown flags 0x%x", b->flags);
    if ((b->flags & kRouteFallback) && !r.u32(&b->wire_ms, "wire_ms")) return r.error();
    if (!r.end((b->flags & kRouteFallback) ? "wire_ms" : "flags")) return r.error();
  }
  if ((b->flags & kRouteFallback) && (b->wire_ms == 0 || !(b->flags & kRouteByRank)))
    return fail(WSYNC_ERR_PROTOCOL, "ROUTE: flag fallback with wire_ms %u (1.. and only with flag by_rank)", b->wire_ms);
  if (b->piece_bytes == 0 && b->flags != 0) return WSYNC_OK;  // (flags, and no piece size chosen)
  if (b->piece_bytes < kMinPieceBytes || b->piece_bytes > kMaxPieceBytes)
    return fail(WSYNC_ERR_PROTOCOL, "ROUTE: piece_bytes %llu is outside %llu..%llu",
                static_cast<unsigned long long>(b->piece_bytes), static_cast<unsigned long long>(kMinPieceBytes),
                static_cast<unsigned long long>(kMaxPieceBytes));
  b->has_piece_bytes = true;
  return WSYNC_OK;
}

}  // namespace

wsync_status_t decode_route(const std::vector<uint8_t>& body, RouteBody* out) {
  BodyReader r("ROUTE", body);
  RouteBody b;
  uint32_t n = 0;
  if (!r.u64(&b.digest, "digest") || !r.u32(&b.parent, "parent") || !r.u32(&b.position, "position") ||
      !r.u32(&b.parent_world, "parent_world") || !r.u32(&n, "children count"))
    return r.error();
  if (n > kFrameMaxChildren)
    return fail(WSYNC_ERR_PROTOCOL, "ROUTE: %u children, more than the %u a relay may have", n, kFrameMaxChildren);
  b.children.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    if (!r.u32(&b.children[i], "children")) return r.error();
  wsync_status_t st = WSYNC_OK;
  if (!r.at_end() && (st = decode_route_tail(r, &b)) != WSYNC_OK) return st;
  return done(std::move(b), out);
}

wsync_status_t decode_assign(const std::vector<uint8_t>& body, AssignBody* out) {
  BodyReader r("ASSIGN", body);
  AssignBody b;
  if (!r.u32(&b.rank, "rank") || !r.end("rank")) return r.error();
  return done(std::move(b), out);
}

// CATCHUP's optional tail (many senders): u32 n (the names' count), n x (i32 ndim, ndim x (i64
// offset, i64 extent)), each value >= 0.
wsync_status_t decode_catchup_boxes(BodyReader& r, uint32_t n, CatchupBody* b) {
  uint32_t m = 0;
  if (!r.u32(&m, "boxes count")) return r.error();
  if (m != n) return fail(WSYNC_ERR_PROTOCOL, "CATCHUP: %u boxes for %u names", m, n);
  b->boxes.resize(m);
  for (uint32_t i = 0; i < m; ++i) {
    int32_t ndim = 0;
    if (!r.i32(&ndim, "box ndim")) return r.error();
    if (ndim < 0 || ndim > WSYNC_MAX_NDIM)
      return fail(WSYNC_ERR_PROTOCOL, "CATCHUP: box %u has %d dimensions (0..%d)", i, ndim, WSYNC_MAX_NDIM);
    b->boxes[i].resize(2 * static_cast<size_t>(ndim));
    for (int64_t& v : b->boxes[i])
      if (!r.i64(&v, "box")) return r.error();
    if (std::any_of(b->boxes[i].begin(), b->boxes[i].end(), [](int64_t v) { return v < 0; }))
      return fail(WSYNC_ERR_PROTOCOL, "CATCHUP: box %u of '%s' has a negative offset or extent", i, b->names[i].c_str());
  }
  return WSYNC_OK;
}

wsync_status_t decode_catchup(const std::vector<uint8_t>& body, CatchupBody* out) {
  BodyReader r("CATCHUP", body);
  CatchupBody b;
  if (!r.u32(&b.role, "role") || !r.u32(&b.peer, "peer") || !r.u64(&b.version, "version") ||
      !r.str(&b.world, kFrameMaxGroupBytes + 64, "world") || !r.u64(&b.budget_ms, "budget_ms") ||
      !r.text(&b.reason, kFrameMaxReasonBytes, "reason"))
    return r.error();
  uint32_t n = 0;
  if (!r.u32(&n, "names count")) return r.error();
  if (n > kFrameMaxCatchupNames)
    return fail(WSYNC_ERR_PROTOCOL, "CATCHUP: %u names, more than %u", n, kFrameMaxCatchupNames);
  // (each name takes at least its length and its sum: nothing is allocated beyond what the body holds)
  b.names.reserve(std::min<size_t>(n, r.left() / 12));
  b.sums.reserve(std::min<size_t>(n, r.left() / 12));
  for (uint32_t i = 0; i < n; ++i) {
    b.names.emplace_back();
    b.sums.emplace_back();
    if (!r.str(&b.names[i], static_cast<uint32_t>(kMaxTensorNameBytes), "names") || !r.u64(&b.sums[i], "sums"))
      return r.error();
    const std::string bad = tensor_name_problem(b.names[i].data(), b.names[i].size());
    if (!bad.empty()) return fail(WSYNC_ERR_PROTOCOL, "CATCHUP: name %u is invalid: %s", i, bad.c_str());
  }
  const wsync_status_t st = r.at_end() ? WSYNC_OK : decode_catchup_boxes(r, n, &b);
  return st != WSYNC_OK ? st : done(std::move(b), out);  // (later bytes: a later field)
}

wsync_status_t decode_abort_update(const std::vector<uint8_t>& body, AbortUpdateBody* out) {
  BodyReader r("ABORT_UPDATE", body);
  AbortUpdateBody b;
  if (!r.text(&b.reason, kFrameMaxReasonBytes, "reason")) return r.error();
  return done(std::move(b), out);
}

wsync_status_t decode_removed(const std::vector<uint8_t>& body, RemovedBody* out) {
  BodyReader r("REMOVED", body);
  RemovedBody b;
  if (!r.text(&b.reason, kFrameMaxReasonBytes, "reason")) return r.error();
  return done(std::move(b), out);
}

wsync_status_t check_committed(const Frame& f, uint64_t version, const std::string& who) {
  const unsigned long long want = version;
  if (f.type != static_cast<uint16_t>(MsgType::kCommitted))
    return fail(WSYNC_ERR_PROTOCOL, "%s sent %s while the sender waited for COMMITTED(version %llu)", who.c_str(),
                msg_type_name(f.type), want);
  CommittedBody c;
  if (decode_committed(f.body, &c) != WSYNC_OK)
    return fail(WSYNC_ERR_PROTOCOL, "%s sent a malformed COMMITTED while the sender waited for COMMITTED(version "
                "%llu): %s", who.c_str(), want, last_error().c_str());
  if (c.version != version)
    return fail(WSYNC_ERR_PROTOCOL, "%s sent COMMITTED(version %llu) while the sender waited for COMMITTED(version "
                "%llu)", who.c_str(), static_cast<unsigned long long>(c.version), want);
  return WSYNC_OK;
}

}  // namespace wsync
