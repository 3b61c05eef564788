// libFuzzer target: the control channel's framing (control/control_conn.h) as each side reads it
// from its socket: the input's bytes are what the peer sent, fed through a socketpair into
// ControlConn::recv until the peer's EOF; every frame that comes out goes through the body
// decoders of its type (control/frames.h). Run by ctest as fuzz.control_stream.
//
// Input: flags u8 (bit 0: the small limit of a peer that has not proved the secret yet) | stream...
// Beyond "no crash, no UB, no leak, no hang": the frames returned are exactly the input's
// frames, in order (header and body re-assembled equal the bytes sent, the reserved field
// aside), no body is over the limit, and the stream ends with the right status: PROTOCOL at a
// bad header, PEER_FAILED at EOF (with at most one incomplete frame left).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "control/control_conn.h"
#include "control/frames.h"

namespace {

using Bytes = std::vector<uint8_t>;

void decode_body(const wsync::Frame& f) {
  using namespace wsync;
  switch (static_cast<MsgType>(f.type)) {
    case MsgType::kChallenge: { ChallengeBody b; decode_challenge(f.body, &b); break; }
    case MsgType::kHello: { HelloBody b; decode_hello(f.body, &b); break; }
    case MsgType::kWelcome: { WelcomeBody b; decode_welcome(f.body, &b); break; }
    case MsgType::kReject: { RejectBody b; decode_reject(f.body, &b); break; }
    case MsgType::kManifest: { ManifestFrameBody b; decode_manifest_frame(f.body, &b); break; }
    case MsgType::kReady: { ReadyBody b; decode_ready(f.body, &b); break; }
    case MsgType::kNack: { StatusBody b; decode_nack(f.body, &b); break; }
    case MsgType::kAck: { StatusBody b; decode_ack(f.body, &b); break; }
    case MsgType::kEndUpdate: { EndUpdateBody b; decode_end_update(f.body, &b); break; }
    case MsgType::kCommitted: { CommittedBody b; decode_committed(f.body, &b); break; }
    case MsgType::kAbortUpdate: { AbortUpdateBody b; decode_abort_update(f.body, &b); break; }
    default: break;
  }
}

uint32_t le32(const uint8_t* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 65536) return 0;  // one write must fit the socket's buffer
  const uint32_t max_body = (data[0] & 1) ? wsync::kControlMaxBodyUnauthenticated : wsync::kControlMaxBody;
  const uint8_t* in = data + 1;
  const size_t n = size - 1;

  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
  for (size_t off = 0; off < n;) {
    const ssize_t k = ::send(fds[1], in + off, n - off, MSG_NOSIGNAL);
    if (k <= 0) std::abort();
    off += static_cast<size_t>(k);
  }
  ::close(fds[1]);  // the peer is done: EOF after its bytes

  wsync::ControlConn conn(fds[0]);
  conn.set_peer_name("the fuzzer");
  conn.set_max_body(max_body);
  size_t at = 0;  // input bytes the frames so far account for
  int idle = 0;
  for (;;) {
    wsync::Frame f;
    const wsync_status_t st = conn.recv(&f, 0);
    if (st == WSYNC_ERR_TIMEOUT) {  // no whole frame in this round; the bytes are all there
      if (++idle > 1000) std::abort();  // a reader that makes no progress would hang a peer
      continue;
    }
    idle = 0;
    const size_t left = n - at;
    if (st == WSYNC_OK) {
      if (f.body.size() > max_body || left < wsync::kControlHeaderBytes + f.body.size()) std::abort();
      if (le32(in + at) != wsync::kControlMagic || le32(in + at + 8) != f.body.size()) std::abort();
      if (f.type != static_cast<uint16_t>(in[at + 4] | (in[at + 5] << 8))) std::abort();
      if (!std::equal(f.body.begin(), f.body.end(), in + at + wsync::kControlHeaderBytes)) std::abort();
      at += wsync::kControlHeaderBytes + f.body.size();
      decode_body(f);
      continue;
    }
    if (st == WSYNC_ERR_PROTOCOL) {  // only a bad header at `at` may end the stream so
      if (left < wsync::kControlHeaderBytes) std::abort();
      if (le32(in + at) == wsync::kControlMagic && le32(in + at + 8) <= max_body) std::abort();
      break;
    }
    if (st == WSYNC_ERR_PEER_FAILED) {  // EOF: whatever is left is one incomplete frame
      if (left >= wsync::kControlHeaderBytes) {
        const uint32_t len = le32(in + at + 8);
        if (le32(in + at) != wsync::kControlMagic || len > max_body) std::abort();  // should have been PROTOCOL
        if (left >= wsync::kControlHeaderBytes + len) std::abort();                 // a whole frame was lost
      }
      break;
    }
    std::abort();  // no other status is possible here
  }
  return 0;
}
