// The control frames' bodies: the layout each side has always written (built here by hand, byte
// by byte, as the call sites in src/group and src/receiver write them), round trips, and the
// refusal of every truncated, oversized or overlong body with WSYNC_ERR_PROTOCOL and a message
// that names the frame and the field.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "control/frames.h"
#include "wsync_plugin.h"

namespace wsync {
namespace {

void Put(std::vector<uint8_t>& v, uint64_t x, int n) {
  for (int i = 0; i < n; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}
void PutStr(std::vector<uint8_t>& v, const std::string& s) {
  Put(v, s.size(), 4);
  v.insert(v.end(), s.begin(), s.end());
}
void PutBlob(std::vector<uint8_t>& v, const std::vector<uint8_t>& b) {
  Put(v, b.size(), 4);
  v.insert(v.end(), b.begin(), b.end());
}

// Every proper prefix of `body` is refused, naming the frame; `fields` (in order) must each be
// named by some prefix.
template <typename Body>
void EveryTruncationIsRefused(const std::vector<uint8_t>& body,
                              wsync_status_t (*decode)(const std::vector<uint8_t>&, Body*), const std::string& frame,
                              const std::vector<std::string>& fields) {
  std::vector<bool> named(fields.size(), false);
  for (size_t n = 0; n < body.size(); ++n) {
    std::vector<uint8_t> cut(body.begin(), body.begin() + static_cast<long>(n));
    Body out;
    ASSERT_EQ(decode(cut, &out), WSYNC_ERR_PROTOCOL) << frame << " cut to " << n;
    const std::string& m = last_error();
    EXPECT_EQ(m.rfind(frame + ": the " + std::to_string(n) + "-byte body ends inside ", 0), 0u) << m;
    for (size_t f = 0; f < fields.size(); ++f)
      if (m.find("ends inside " + fields[f] + " (") != std::string::npos) named[f] = true;
  }
  for (size_t f = 0; f < fields.size(); ++f) EXPECT_TRUE(named[f]) << frame << ": no prefix named " << fields[f];
}

TEST(Frames, ChallengeHelloWelcome) {
  const std::vector<uint8_t> tx_nonce(kNonceBytes, 0xA1), rx_nonce(kNonceBytes, 0xB2), proof(kMacBytes, 0xC3);
  std::vector<uint8_t> c;
  Put(c, kControlProtocolVersion, 4);
  PutBlob(c, tx_nonce);
  EXPECT_EQ(encode_challenge(ChallengeBody{kControlProtocolVersion, tx_nonce}), c);
  ChallengeBody cd;
  ASSERT_EQ(decode_challenge(c, &cd), WSYNC_OK) << last_error();
  EXPECT_EQ(cd.protocol, kControlProtocolVersion);
  EXPECT_EQ(cd.nonce, tx_nonce);
  EveryTruncationIsRefused(c, decode_challenge, "CHALLENGE", {"protocol", "nonce"});
  c.push_back(0);
  EXPECT_EQ(decode_challenge(c, &cd), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "CHALLENGE: 1 unexpected bytes after nonce at the end of the 41-byte body");
  std::vector<uint8_t> short_nonce;
  Put(short_nonce, kControlProtocolVersion, 4);
  PutBlob(short_nonce, std::vector<uint8_t>(5, 1));
  EXPECT_EQ(decode_challenge(short_nonce, &cd), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "CHALLENGE: nonce is 5 bytes, must be 32");
  std::vector<uint8_t> other;  // another protocol: only its version is read, for the caller's mismatch
  Put(other, 2, 4);
  Put(other, 0xFFFFFFFF, 4);
  ASSERT_EQ(decode_challenge(other, &cd), WSYNC_OK);
  EXPECT_EQ(cd.protocol, 2u);
  EXPECT_TRUE(cd.nonce.empty());

  std::vector<uint8_t> v;
  Put(v, kControlProtocolVersion, 4);
  Put(v, 3, 4);
  Put(v, 4242, 4);
  PutStr(v, "policy");
  PutBlob(v, rx_nonce);
  PutBlob(v, proof);
  HelloBody h{kControlProtocolVersion, 3, 4242, "policy", rx_nonce, proof};
  EXPECT_EQ(encode_hello(h), v);
  HelloBody d;
  ASSERT_EQ(decode_hello(v, &d), WSYNC_OK) << last_error();
  EXPECT_EQ(d.rank, 3u);
  EXPECT_EQ(d.pid, 4242u);
  EXPECT_EQ(d.group, "policy");
  EXPECT_EQ(d.nonce, rx_nonce);
  EXPECT_EQ(d.proof, proof);
  EveryTruncationIsRefused(v, decode_hello, "HELLO", {"protocol", "rank", "pid", "group", "nonce", "proof"});
  v.push_back(7);
  EXPECT_EQ(decode_hello(v, &d), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("HELLO: 1 unexpected bytes after proof"), std::string::npos) << last_error();

  h.group = std::string(kFrameMaxGroupBytes, 'g');
  ASSERT_EQ(decode_hello(encode_hello(h), &d), WSYNC_OK);
  EXPECT_EQ(d.group.size(), kFrameMaxGroupBytes);
  h.group += 'g';
  HelloBody untouched;
  untouched.rank = 99;
  EXPECT_EQ(decode_hello(encode_hello(h), &untouched), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "HELLO: group length 4097 exceeds the limit of 4096");
  EXPECT_EQ(untouched.rank, 99u) << "a failed decode leaves *out alone";
  h.group = "g";
  h.proof.push_back(0);
  EXPECT_EQ(decode_hello(encode_hello(h), &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "HELLO: proof length 33 exceeds the limit of 32");
  h.proof.resize(3);  // a short proof is read; proof_matches() refuses it
  ASSERT_EQ(decode_hello(encode_hello(h), &d), WSYNC_OK);
  h.nonce.resize(31);
  EXPECT_EQ(decode_hello(encode_hello(h), &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "HELLO: nonce is 31 bytes, must be 32");
  std::vector<uint8_t> old_hello;  // protocol 2: u32 protocol, rank, pid, str group
  Put(old_hello, 2, 4);
  Put(old_hello, 1, 4);
  Put(old_hello, 1, 4);
  PutStr(old_hello, "policy");
  ASSERT_EQ(decode_hello(old_hello, &d), WSYNC_OK);
  EXPECT_EQ(d.protocol, 2u);
  EXPECT_EQ(d.rank, 0u) << "only the version of another protocol is read";

  std::vector<uint8_t> w;
  Put(w, 3, 4);
  PutBlob(w, proof);
  EXPECT_EQ(encode_welcome(WelcomeBody{3, proof}), w);
  WelcomeBody wd;
  ASSERT_EQ(decode_welcome(w, &wd), WSYNC_OK);
  EXPECT_EQ(wd.world_size, 3u);
  EXPECT_EQ(wd.proof, proof);
  EveryTruncationIsRefused(w, decode_welcome, "WELCOME", {"world_size", "proof"});
  w.push_back(0);
  EXPECT_EQ(decode_welcome(w, &wd), WSYNC_ERR_PROTOCOL);
}

TEST(Frames, RejectCommittedEndUpdate) {
  std::vector<uint8_t> r;
  Put(r, static_cast<uint32_t>(WSYNC_ERR_REJECTED), 4);
  PutStr(r, "rank 3 already joined");
  EXPECT_EQ(encode_reject(RejectBody{WSYNC_ERR_REJECTED, "rank 3 already joined"}), r);
  RejectBody rd;
  ASSERT_EQ(decode_reject(r, &rd), WSYNC_OK);
  EXPECT_EQ(rd.status, WSYNC_ERR_REJECTED);
  EXPECT_EQ(rd.reason, "rank 3 already joined");
  EveryTruncationIsRefused(r, decode_reject, "REJECT", {"status", "reason"});
  std::vector<uint8_t> neg;
  Put(neg, static_cast<uint32_t>(-5), 4);
  PutStr(neg, "");
  ASSERT_EQ(decode_reject(neg, &rd), WSYNC_OK);
  EXPECT_EQ(rd.status, -5) << "values are the caller's to judge (wire_failure)";

  std::vector<uint8_t> c;
  Put(c, 0x0102030405060708ull, 8);
  EXPECT_EQ(encode_committed(CommittedBody{0x0102030405060708ull}), c);
  CommittedBody cd;
  ASSERT_EQ(decode_committed(c, &cd), WSYNC_OK);
  EXPECT_EQ(cd.version, 0x0102030405060708ull);
  EveryTruncationIsRefused(c, decode_committed, "COMMITTED", {"version"});

  std::vector<uint8_t> e;
  Put(e, 7, 8);
  Put(e, 11, 8);
  Put(e, 13, 8);
  EXPECT_EQ(encode_end_update(EndUpdateBody{7, 11, 13}), e);
  EndUpdateBody ed;
  ASSERT_EQ(decode_end_update(e, &ed), WSYNC_OK);
  EXPECT_EQ(ed.version, 7u);
  EXPECT_EQ(ed.update_id, 11u);
  EXPECT_EQ(ed.buckets, 13u);
  EveryTruncationIsRefused(e, decode_end_update, "END_UPDATE", {"version", "update_id", "buckets"});
  EXPECT_FALSE(ed.has_plan);

  // Senders that plan append the chain of their agreed plan digests; a part of it is refused, and
  // what may follow it (a later sender's field) is not.
  std::vector<uint8_t> ep = e;
  Put(ep, 0xfeedfacecafebeefull, 8);
  EXPECT_EQ(encode_end_update(EndUpdateBody{7, 11, 13, true, 0xfeedfacecafebeefull}), ep);
  ASSERT_EQ(decode_end_update(ep, &ed), WSYNC_OK);
  EXPECT_TRUE(ed.has_plan);
  EXPECT_EQ(ed.plan_digest, 0xfeedfacecafebeefull);
  EXPECT_EQ(ed.buckets, 13u);
  std::vector<uint8_t> cut(ep.begin(), ep.end() - 3);
  EXPECT_EQ(decode_end_update(cut, &ed), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(std::string::npos, last_error().find("plan_digest")) << last_error();
  ep.push_back(1);
  EXPECT_EQ(decode_end_update(ep, &ed), WSYNC_OK);
}

// JOINED: empty (no lane said, as before 0.10) or one u32 lane; anything else is refused.
TEST(Frames, JoinedSaysALaneOrNothing) {
  JoinedBody none;
  ASSERT_EQ(decode_joined({}, &none), WSYNC_OK);
  EXPECT_FALSE(none.has_lane);
  EXPECT_TRUE(encode_joined(none).empty());
  std::vector<uint8_t> j;
  Put(j, 0x00010203u, 4);
  JoinedBody said;
  said.has_lane = true;
  said.lane = 0x00010203u;
  EXPECT_EQ(encode_joined(said), j);
  JoinedBody got;
  ASSERT_EQ(decode_joined(j, &got), WSYNC_OK);
  EXPECT_TRUE(got.has_lane);
  EXPECT_EQ(got.lane, 0x00010203u);
  for (size_t n : {1, 2, 3, 5, 8}) {
    JoinedBody bad;
    EXPECT_EQ(decode_joined(std::vector<uint8_t>(n, 1), &bad), WSYNC_ERR_PROTOCOL) << n << " bytes";
    EXPECT_NE(std::string(last_error()).find("JOINED"), std::string::npos) << last_error();
  }
}

TEST(Frames, RouteMayTellThePieceSize) {
  RouteBody r;
  r.digest = 9;
  r.parent = 1;
  r.position = 1;
  r.parent_world = 2;
  r.children = {3};
  const std::vector<uint8_t> plain = encode_route(r);
  RouteBody got;
  ASSERT_EQ(decode_route(plain, &got), WSYNC_OK);
  EXPECT_FALSE(got.has_piece_bytes);
  r.has_piece_bytes = true;
  r.piece_bytes = 512u << 10;
  std::vector<uint8_t> told = encode_route(r);
  ASSERT_EQ(told.size(), plain.size() + 8);
  ASSERT_EQ(decode_route(told, &got), WSYNC_OK);
  EXPECT_TRUE(got.has_piece_bytes);
  EXPECT_EQ(got.piece_bytes, 512u << 10);
  for (uint64_t bad : std::vector<uint64_t>{0, 1000, (1ull << 30) + 1}) {
    r.piece_bytes = bad;
    EXPECT_EQ(decode_route(encode_route(r), &got), WSYNC_ERR_PROTOCOL) << bad;
    EXPECT_NE(std::string(last_error()).find("piece_bytes"), std::string::npos) << last_error();
  }
  told.push_back(0);
  EXPECT_EQ(decode_route(told, &got), WSYNC_ERR_PROTOCOL);
  std::vector<uint8_t> short_one(plain);
  short_one.insert(short_one.end(), {1, 2, 3});
  EXPECT_EQ(decode_route(short_one, &got), WSYNC_ERR_PROTOCOL);
}

// Elastic groups that relay (issue 39): flags after piece_bytes, which is 0 when the sender chose no
// piece size; flags 0 written out and unknown flags are refused.
TEST(Frames, RouteMayNumberRelayWorldsByRank) {
  RouteBody r;
  r.parent = 2;
  r.position = 5;
  r.parent_world = 9;
  r.flags = kRouteByRank;
  RouteBody got;
  const std::vector<uint8_t> flagged = encode_route(r);
  ASSERT_EQ(decode_route(flagged, &got), WSYNC_OK);
  EXPECT_EQ(got.flags, kRouteByRank);
  EXPECT_FALSE(got.has_piece_bytes);
  EXPECT_EQ(encode_route(got), flagged);
  r.has_piece_bytes = true;
  r.piece_bytes = 512u << 10;
  ASSERT_EQ(decode_route(encode_route(r), &got), WSYNC_OK);
  EXPECT_EQ(got.flags, kRouteByRank);
  EXPECT_EQ(got.piece_bytes, 512u << 10);
  for (uint32_t bad : {0u, 4u, 0x80000000u}) {
    std::vector<uint8_t> b = encode_route(r);
    b.resize(b.size() - 4);
    Put(b, bad, 4);
    EXPECT_EQ(decode_route(b, &got), WSYNC_ERR_PROTOCOL) << bad;
    EXPECT_NE(std::string(last_error()).find("flags"), std::string::npos) << last_error();
  }
  // kRouteFallback: wire_ms follows the flags, 1.., and only with kRouteByRank.
  r.flags = kRouteByRank | kRouteFallback;
  r.wire_ms = 1500;
  const std::vector<uint8_t> fallback = encode_route(r);
  ASSERT_EQ(decode_route(fallback, &got), WSYNC_OK);
  EXPECT_EQ(got.wire_ms, 1500u);
  EXPECT_EQ(encode_route(got), fallback);
  EXPECT_EQ(decode_route(std::vector<uint8_t>(fallback.begin(), fallback.end() - 1), &got), WSYNC_ERR_PROTOCOL);
  r.wire_ms = 0;
  EXPECT_EQ(decode_route(encode_route(r), &got), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(std::string(last_error()).find("wire_ms"), std::string::npos) << last_error();
  r.flags = kRouteFallback;
  r.wire_ms = 1500;
  EXPECT_EQ(decode_route(encode_route(r), &got), WSYNC_ERR_PROTOCOL);
}

TEST(Frames, RouteAddSaysOneRankExactly) {
  RouteDropBody got;
  ASSERT_EQ(decode_route_add(encode_route_drop({4}), &got), WSYNC_OK);
  EXPECT_EQ(got.rank, 4u);
  for (size_t n : {0, 3, 5}) {
    EXPECT_EQ(decode_route_add(std::vector<uint8_t>(n, 1), &got), WSYNC_ERR_PROTOCOL) << n << " bytes";
    EXPECT_NE(std::string(last_error()).find("ROUTE_ADD"), std::string::npos) << last_error();
  }
}

TEST(Frames, RouteMoveSaysAParentAndAWireTimeExactly) {
  RouteMoveBody got;
  ASSERT_EQ(decode_route_move(encode_route_move({0, 2500}), &got), WSYNC_OK);  // (0: below the sender)
  EXPECT_EQ(got.parent, 0u);
  EXPECT_EQ(got.wire_ms, 2500u);
  ASSERT_EQ(decode_route_move(encode_route_move({6, 1}), &got), WSYNC_OK);
  EXPECT_EQ(got.parent, 6u);
  for (size_t n : {0, 4, 7, 9}) {
    EXPECT_EQ(decode_route_move(std::vector<uint8_t>(n, 1), &got), WSYNC_ERR_PROTOCOL) << n << " bytes";
    EXPECT_NE(std::string(last_error()).find("ROUTE_MOVE"), std::string::npos) << last_error();
  }
  EXPECT_EQ(decode_route_move(encode_route_move({6, 0}), &got), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(std::string(last_error()).find("wire_ms is 0"), std::string::npos) << last_error();
}

TEST(Frames, RouteDropSaysOneRankExactly) {
  std::vector<uint8_t> d;
  Put(d, 7u, 4);
  EXPECT_EQ(encode_route_drop({7}), d);
  RouteDropBody got;
  ASSERT_EQ(decode_route_drop(d, &got), WSYNC_OK);
  EXPECT_EQ(got.rank, 7u);
  for (size_t n : {0, 1, 3, 5, 8}) {
    RouteDropBody bad;
    EXPECT_EQ(decode_route_drop(std::vector<uint8_t>(n, 1), &bad), WSYNC_ERR_PROTOCOL) << n << " bytes";
    EXPECT_NE(std::string(last_error()).find("ROUTE_DROP"), std::string::npos) << last_error();
  }
}

TEST(Frames, ManifestFrameAndReadyRefuseTrailingBytes) {
  const std::vector<uint8_t> record = {'W', 'S', 'M', 'F', 1, 2, 3};
  const std::vector<uint8_t> blob = {9, 8, 7};
  std::vector<uint8_t> m;
  Put(m, 41, 8);
  PutBlob(m, record);
  PutBlob(m, blob);
  EXPECT_EQ(encode_manifest_frame(ManifestFrameBody{41, record, blob}), m);
  ManifestFrameBody md;
  ASSERT_EQ(decode_manifest_frame(m, &md), WSYNC_OK) << last_error();
  EXPECT_EQ(md.seq, 41u);
  EXPECT_EQ(md.manifest, record);
  EXPECT_EQ(md.blob, blob);
  EveryTruncationIsRefused(m, decode_manifest_frame, "MANIFEST", {"seq", "manifest", "transport blob"});
  m.push_back(0);
  EXPECT_EQ(decode_manifest_frame(m, &md), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "MANIFEST: 1 unexpected bytes after transport blob at the end of the 27-byte body");

  std::vector<uint8_t> big;
  Put(big, 1, 8);
  PutBlob(big, {});
  PutBlob(big, std::vector<uint8_t>(WSYNC_BLOB_MAX_BYTES + 1, 0));
  EXPECT_EQ(decode_manifest_frame(big, &md), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "MANIFEST: transport blob length 4097 exceeds the limit of 4096");
  std::vector<uint8_t> huge;
  Put(huge, 1, 8);
  Put(huge, kControlMaxBody + 1ull, 4);  // a length past the frame limit is refused before any read
  EXPECT_EQ(decode_manifest_frame(huge, &md), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "MANIFEST: manifest length 67108865 exceeds the limit of 67108864");

  std::vector<uint8_t> rdy;
  Put(rdy, 5, 8);
  PutBlob(rdy, blob);
  EXPECT_EQ(encode_ready(ReadyBody{5, blob}), rdy);
  ReadyBody rd;
  ASSERT_EQ(decode_ready(rdy, &rd), WSYNC_OK);
  EXPECT_EQ(rd.seq, 5u);
  EXPECT_EQ(rd.blob, blob);
  EveryTruncationIsRefused(rdy, decode_ready, "READY", {"seq", "transport blob"});
  rdy.push_back(0);
  EXPECT_EQ(decode_ready(rdy, &rd), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("READY: 1 unexpected bytes after transport blob"), std::string::npos);
}

// The receiver writes NACK and ACK alike (send_status: seq, status, reason, blob). The sender
// reads a NACK's seq, status and reason; an ACK's blob only when the ACK says OK.
TEST(Frames, NackAndAck) {
  std::vector<uint8_t> nack;
  Put(nack, 3, 8);
  Put(nack, static_cast<uint32_t>(WSYNC_ERR_OUT_OF_MEMORY), 4);
  PutStr(nack, "no room for bucket 3");
  PutBlob(nack, {});
  EXPECT_EQ(encode_status(StatusBody{3, WSYNC_ERR_OUT_OF_MEMORY, "no room for bucket 3", {}}), nack);
  StatusBody d;
  ASSERT_EQ(decode_nack(nack, &d), WSYNC_OK) << last_error();
  EXPECT_EQ(d.seq, 3u);
  EXPECT_EQ(d.status, WSYNC_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(d.reason, "no room for bucket 3");
  EveryTruncationIsRefused(std::vector<uint8_t>(nack.begin(), nack.end() - 4), decode_nack, "NACK",
                           {"seq", "status", "reason"});
  std::vector<uint8_t> no_blob(nack.begin(), nack.end() - 4);  // the blob was never read
  EXPECT_EQ(decode_nack(no_blob, &d), WSYNC_OK);

  std::vector<uint8_t> ack;
  Put(ack, 4, 8);
  Put(ack, 0, 4);
  PutStr(ack, "");
  PutBlob(ack, {1, 2});
  EXPECT_EQ(encode_status(StatusBody{4, WSYNC_OK, "", {1, 2}}), ack);
  ASSERT_EQ(decode_ack(ack, &d), WSYNC_OK) << last_error();
  EXPECT_EQ(d.seq, 4u);
  EXPECT_EQ(d.status, WSYNC_OK);
  EXPECT_EQ(d.blob, (std::vector<uint8_t>{1, 2}));
  EveryTruncationIsRefused(ack, decode_ack, "ACK", {"seq", "status", "reason", "transport blob"});
  ack.push_back(0);
  EXPECT_EQ(decode_ack(ack, &d), WSYNC_ERR_PROTOCOL);

  std::vector<uint8_t> failed;  // a failed ACK: what follows the reason is not read
  Put(failed, 4, 8);
  Put(failed, static_cast<uint32_t>(WSYNC_ERR_IO), 4);
  PutStr(failed, "the transport gave up");
  failed.push_back(0xFF);
  ASSERT_EQ(decode_ack(failed, &d), WSYNC_OK) << last_error();
  EXPECT_EQ(d.status, WSYNC_ERR_IO);
  EXPECT_EQ(d.reason, "the transport gave up");
  EXPECT_TRUE(d.blob.empty());

  std::vector<uint8_t> long_reason;
  Put(long_reason, 4, 8);
  Put(long_reason, 1, 4);
  PutStr(long_reason, std::string(kFrameMaxReasonBytes + 1, 'r'));
  EXPECT_EQ(decode_nack(long_reason, &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "NACK: reason length 65537 exceeds the limit of 65536");
}

TEST(Frames, AbortUpdateAndReasonsCutAtTheLimit) {
  std::vector<uint8_t> a;
  PutStr(a, "receiver rank 2 failed");
  EXPECT_EQ(encode_abort_update(AbortUpdateBody{"receiver rank 2 failed"}), a);
  AbortUpdateBody d;
  ASSERT_EQ(decode_abort_update(a, &d), WSYNC_OK);
  EXPECT_EQ(d.reason, "receiver rank 2 failed");
  EveryTruncationIsRefused(a, decode_abort_update, "ABORT_UPDATE", {"reason"});

  // An over-long reason is cut so the peer still reads it, never inside a UTF-8 sequence.
  std::string reason(kFrameMaxReasonBytes - 1, 'x');
  reason += "\xc3\xa9tail";  // e-acute straddles the limit
  ASSERT_EQ(decode_abort_update(encode_abort_update(AbortUpdateBody{reason}), &d), WSYNC_OK) << last_error();
  EXPECT_EQ(d.reason, std::string(kFrameMaxReasonBytes - 1, 'x'));
  StatusBody s;
  ASSERT_EQ(decode_nack(encode_status(StatusBody{1, 2, std::string(100000, 'y'), {}}), &s), WSYNC_OK);
  EXPECT_EQ(s.reason.size(), kFrameMaxReasonBytes);
  RejectBody r;
  ASSERT_EQ(decode_reject(encode_reject(RejectBody{2, std::string(100000, 'z')}), &r), WSYNC_OK);
  EXPECT_EQ(r.reason.size(), kFrameMaxReasonBytes);
}

// Issue 22, finding 9b: a member's NACK printed its reason's ANSI escapes raw into the trainer's
// log. Every reason a peer sends comes out of the decoder printable: control characters (escapes,
// line breaks that forge log lines) and invalid UTF-8 as \xNN; other text as it was.
TEST(Frames, PeerReasonsComeOutPrintable) {
  const std::string hostile = "\x1b[31mred\x1b[0m\nwsync: forged line\r\x07\xc2\x9b" "2J \xff caf\xc3\xa9";
  const std::string shown = "\\x1b[31mred\\x1b[0m\\x0awsync: forged line\\x0d\\x07\\xc2\\x9b2J \\xff caf\xc3\xa9";
  StatusBody s;
  ASSERT_EQ(decode_nack(encode_status(StatusBody{1, WSYNC_ERR_IO, hostile, {}}), &s), WSYNC_OK) << last_error();
  EXPECT_EQ(s.reason, shown);
  ASSERT_EQ(decode_ack(encode_status(StatusBody{1, WSYNC_ERR_IO, hostile, {}}), &s), WSYNC_OK) << last_error();
  EXPECT_EQ(s.reason, shown);
  RejectBody r;
  ASSERT_EQ(decode_reject(encode_reject(RejectBody{WSYNC_ERR_REJECTED, hostile}), &r), WSYNC_OK) << last_error();
  EXPECT_EQ(r.reason, shown);
  AbortUpdateBody a;
  ASSERT_EQ(decode_abort_update(encode_abort_update(AbortUpdateBody{hostile}), &a), WSYNC_OK) << last_error();
  EXPECT_EQ(a.reason, shown);
}

// Issue 22, finding 9c: the sender's message named only the version it waited for.
// CATCHUP and CATCHUP_CANCEL (elastic groups): u32 role, u32 peer, u64 version, str world, u64
// budget_ms, str reason, u32 n, n x (str name, u64 sum: the sender's digest, protocol 4), and
// optionally (many senders) a box per name; every cut refused naming the field; later bytes
// ignored; an invalid name, a box count other than the names', a box of more than 8 dimensions or
// a negative value refused; a count the body cannot hold refused before anything is allocated.
TEST(Frames, Catchup) {
  std::vector<uint8_t> body;
  Put(body, CatchupBody::kSource, 4);
  Put(body, 3, 4);
  Put(body, 7, 8);
  PutStr(body, "g.catchup1");
  Put(body, 1500, 8);
  PutStr(body, "gone");
  Put(body, 1, 4);
  PutStr(body, "layer.0.w");
  Put(body, 0x0123456789abcdefull, 8);
  const CatchupBody want{CatchupBody::kSource, 3, 7, "g.catchup1", 1500, "gone", {"layer.0.w"}, {0x0123456789abcdefull}, {}};
  EXPECT_EQ(encode_catchup(want), body);
  CatchupBody out;
  ASSERT_EQ(decode_catchup(body, &out), WSYNC_OK) << last_error();
  EXPECT_EQ(out.role, want.role);
  EXPECT_EQ(out.peer, 3u);
  EXPECT_EQ(out.version, 7u);
  EXPECT_EQ(out.world, "g.catchup1");
  EXPECT_EQ(out.budget_ms, 1500u);
  EXPECT_EQ(out.reason, "gone");
  EXPECT_EQ(out.names, std::vector<std::string>{"layer.0.w"});
  EXPECT_EQ(out.sums, std::vector<uint64_t>{0x0123456789abcdefull});
  EveryTruncationIsRefused<CatchupBody>(body, decode_catchup, "CATCHUP",
                                        {"role", "peer", "version", "world", "budget_ms", "reason", "names count",
                                         "names", "sums"});
  std::vector<uint8_t> many(body.begin(), body.end() - (4 + 9 + 8 + 4));  // (up to the names count)
  Put(many, 1u << 20, 4);
  many.resize(many.size() + 64, 0);
  EXPECT_EQ(decode_catchup(many, &out), WSYNC_ERR_PROTOCOL);  // (a million names announced, 64 bytes sent)
  // Many senders: a box per name (i32 ndim, then offset and extent per dimension).
  CatchupBody boxed = want;
  boxed.boxes = {{0, 4, 2, 3}};
  std::vector<uint8_t> with_boxes = body;
  Put(with_boxes, 1, 4);
  Put(with_boxes, 2, 4);
  for (uint64_t v : {0, 4, 2, 3}) Put(with_boxes, v, 8);
  EXPECT_EQ(encode_catchup(boxed), with_boxes);
  ASSERT_EQ(decode_catchup(with_boxes, &out), WSYNC_OK) << last_error();
  EXPECT_EQ(out.boxes, boxed.boxes);
  for (size_t n = body.size() + 1; n < with_boxes.size(); ++n) {  // (a body cut inside the boxes)
    std::vector<uint8_t> cut(with_boxes.begin(), with_boxes.begin() + static_cast<long>(n));
    ASSERT_EQ(decode_catchup(cut, &out), WSYNC_ERR_PROTOCOL) << "cut to " << n;
    EXPECT_NE(last_error().find("ends inside box"), std::string::npos) << last_error();
  }
  std::vector<uint8_t> longer = with_boxes;
  longer.push_back(9);
  EXPECT_EQ(decode_catchup(longer, &out), WSYNC_OK) << "a later field is tolerated";
  std::vector<uint8_t> two = body;  // (two boxes for one name)
  Put(two, 2, 4);
  EXPECT_EQ(decode_catchup(two, &out), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("2 boxes for 1 names"), std::string::npos) << last_error();
  std::vector<uint8_t> deep = body;
  Put(deep, 1, 4);
  Put(deep, 9, 4);
  EXPECT_EQ(decode_catchup(deep, &out), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("9 dimensions"), std::string::npos) << last_error();
  std::vector<uint8_t> negative = body;
  Put(negative, 1, 4);
  Put(negative, 1, 4);
  Put(negative, 0, 8);
  Put(negative, static_cast<uint64_t>(-1), 8);
  EXPECT_EQ(decode_catchup(negative, &out), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("negative"), std::string::npos) << last_error();
  std::vector<uint8_t> huge;
  Put(huge, 2, 4);
  Put(huge, 1, 4);
  Put(huge, 1, 8);
  Put(huge, kFrameMaxGroupBytes + 65, 4);
  huge.resize(huge.size() + kFrameMaxGroupBytes + 65, 'a');
  EXPECT_EQ(decode_catchup(huge, &out), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("world"), std::string::npos) << last_error();
  std::vector<uint8_t> bad = body;
  bad[bad.size() - 9] = '\n';  // (a control character in the name, before its sum)
  EXPECT_EQ(decode_catchup(bad, &out), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("name 0 is invalid"), std::string::npos) << last_error();
}

TEST(Frames, ACommittedOfAnotherVersionNamesBoth) {
  const Frame committed{static_cast<uint16_t>(MsgType::kCommitted), encode_committed(CommittedBody{6})};
  EXPECT_EQ(check_committed(committed, 6, "receiver rank 1"), WSYNC_OK);
  EXPECT_EQ(check_committed(committed, 7, "receiver rank 1"), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "receiver rank 1 sent COMMITTED(version 6) while the sender waited for COMMITTED(version 7)");
  const Frame ready{static_cast<uint16_t>(MsgType::kReady), encode_ready(ReadyBody{7, {}})};
  EXPECT_EQ(check_committed(ready, 7, "receiver rank 1"), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "receiver rank 1 sent READY while the sender waited for COMMITTED(version 7)");
  const Frame cut{static_cast<uint16_t>(MsgType::kCommitted), {1, 2, 3}};
  EXPECT_EQ(check_committed(cut, 7, "receiver rank 1"), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("malformed COMMITTED"), std::string::npos) << last_error();
}

}  // namespace
}  // namespace wsync
