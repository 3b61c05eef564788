// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from the real
// encoders, so every seed is an input the code meets in practice. Run after a wire format
// changes, then commit the files:
//   build/fuzz/make_fuzz_seeds tests/fuzz/corpus
// (built with the fuzz targets; tests/fuzz/clang/CMakeLists.txt). Writes nothing else.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "control/control_frame.h"
#include "control/frames.h"
#include "control/group_info.h"
#include "manifest/manifest.h"
#include "planner/ownership_record.h"
#include "../common/manifest_entry.h"
#include "wsync_plugin.h"

namespace {

using Bytes = std::vector<uint8_t>;
std::string g_root;

void put(const std::string& target, const std::string& name, const Bytes& b) {
  const std::string dir = g_root + "/" + target;
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
}

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

Bytes le(uint64_t v, int n) {
  Bytes b;
  for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return b;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

using wsync::test_manifest::entry;

void manifests() {
  wsync::Manifest empty;
  empty.update_id = 1;
  put("manifest", "empty", wsync::encode_manifest(empty));
  wsync::Manifest m;
  m.update_id = 3;
  m.bucket_index = 1;
  m.bucket_bytes = 4096;
  m.entries.push_back(entry("model.embed_tokens.weight", WSYNC_DTYPE_BFLOAT16, {16, 64}, 0, 2048));
  m.entries.push_back(entry("model.layers.0.input_layernorm.weight", WSYNC_DTYPE_FLOAT32, {64}, 2048, 256));
  m.entries.push_back(entry("model.norm.empty", WSYNC_DTYPE_FLOAT32, {0, 7}, 2304, 0));
  m.entries.push_back(entry("scalar", WSYNC_DTYPE_INT64, {}, 2304, 8));
  put("manifest", "qwen_like", wsync::encode_manifest(m));
  wsync::Manifest s;
  s.update_id = 9;
  s.bucket_index = 4;
  s.bucket_bytes = 1024;
  s.flags = wsync::kManifestFlagPayloadChecksum;
  s.payload_checksum = 0x0123456789ABCDEFull;
  s.entries.push_back(entry("lm_head.weight", WSYNC_DTYPE_FLOAT16, {1000, 2}, 0, 1024, 2048));  // a chunk
  put("manifest", "split_chunk_checksum", wsync::encode_manifest(s));
  wsync::Manifest u;
  u.bucket_bytes = 64;
  u.entries.push_back(entry("model.\xe5\xb1\x82.0", WSYNC_DTYPE_FLOAT8_E4M3, {2, 2, 2, 2, 2, 2, 2, 2}, 0, 64));
  put("manifest", "utf8_eight_dims", wsync::encode_manifest(u));
  wsync::Manifest b;  // many senders: a row slab, and a chunk of a column box
  b.update_id = 2;
  b.bucket_bytes = 64;
  b.flags = wsync::kManifestFlagBoxes;
  wsync::ManifestEntry rows = entry("w", WSYNC_DTYPE_FLOAT32, {10, 4}, 0, 48);
  const int64_t w_shape[2] = {10, 4}, q_shape[2] = {8, 6};
  wsync::chunk_box(2, w_shape, 0, 4, 1, &rows.box);
  rows.tensor_bytes = 48;
  wsync::ManifestEntry cols = entry("q", WSYNC_DTYPE_BFLOAT16, {8, 6}, 48, 16, 32);
  wsync::chunk_box(2, q_shape, 1, 2, 1, &cols.box);
  cols.tensor_bytes = 48;
  b.entries = {rows, cols};
  put("manifest", "boxes", wsync::encode_manifest(b));
}

// fuzz_http_reply: outcome u8 | reply kind u8 | status u16 | flags u8 | excerpt max u8 | body
Bytes reply(uint8_t kind, uint16_t status, const std::string& body) {
  return cat({Bytes{0, static_cast<uint8_t>(kind - 1)}, le(status, 2), Bytes{0, 200}, bytes(body)});
}

void replies() {
  put("http_reply", "sglang_success", reply(WSYNC_REPLY_SUCCESS_FIELD, 200, R"({"success":true,"message":"Succeeded to update model weights."})"));
  put("http_reply", "sglang_failure", reply(WSYNC_REPLY_SUCCESS_FIELD, 200, R"({"success":false,"message":"Failed to update parameter online: boom."})"));
  put("http_reply", "fastapi_422", reply(WSYNC_REPLY_STATUS, 422,
      R"({"detail":[{"type":"missing","loc":["body","master_address"],"msg":"Field required","input":{}},)"
      R"({"type":"int_parsing","loc":["body","shapes",0,1],"msg":"Input should be a valid integer","input":"x"}]})"));
  put("http_reply", "vllm_error_object", reply(WSYNC_REPLY_JSON, 400, R"({"error":{"message":"y","type":"BadRequestError","param":null,"code":400}})"));
  put("http_reply", "lmdeploy_null", reply(WSYNC_REPLY_JSON, 200, "null"));
  put("http_reply", "plain_500", reply(WSYNC_REPLY_STATUS, 500, "Internal\tServer\r\nError\n"));
  put("http_reply", "auth_401", reply(WSYNC_REPLY_STATUS, 401, R"({"detail":"bad key"})"));
  put("http_reply", "utf8_cut", reply(WSYNC_REPLY_JSON, 503, std::string(190, 'x') + "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 tail"));
}

// fuzz_options: min u64 | max u64 | stride - 4 u8 | count u8 | "key=value\n"...
Bytes opts(uint64_t min, uint64_t max, const std::string& lines) {
  return cat({le(min, 8), le(max, 8), Bytes{static_cast<uint8_t>(sizeof(wsync_option_t) - 4), 32}, bytes(lines)});
}

void options() {
  put("options", "group", opts(1, 1ull << 40, "bucket_bytes=512MiB\ntimeout_ms=60000\nverify_payload=true\nstaging_buckets=2"));
  put("options", "suffixes", opts(0, UINT64_MAX, "a=1k\nb=2M\nc=3g\nd=4KiB\ne=5mib\nf=6GiB\ng=18446744073709551615"));
  put("options", "transport", opts(0, 1023, "transport.ucx_tls=tcp,sm\ntransport.rndv_thresh=8192\ndevice=0\nx=off"));
  put("options", "bad", opts(5, 10, "n=-1\nn= 7\nn=99999999999999999999999\nb=maybe\nn=0x10"));
}

void group_infos() {
  wsync::GroupInfo g;
  g.protocol = wsync::kControlProtocolVersion;
  g.group_name = "policy";
  g.world_size = 3;
  g.transport = "ucx";
  g.control_host = "127.0.0.1";
  g.control_port = 29501;
  put("group_info", "plain", wsync::encode_group_info(g));
  g.transport_options = {{"ucx_tls", "tcp,sm"}, {"rndv_thresh", "8192"}, {"k", "a=b"}};
  g.control_host = "10.0.0.7";
  put("group_info", "transport_options", wsync::encode_group_info(g));
  put("group_info", "newer_sender", bytes("protocol=3\ngroup=g\n\nworld_size=2\ntransport=cuda_ipc\ncontrol_host=::1\n"
                                          "control_port=1\nfuture_key=1\n"));
}

// One frame as ControlConn sends it.
Bytes frame(wsync::MsgType t, const Bytes& body) {
  return cat({le(wsync::kControlMagic, 4), le(static_cast<uint16_t>(t), 2), le(0, 2), le(body.size(), 4), body});
}

void frames() {
  using namespace wsync;
  const Bytes nonce(kNonceBytes, 0x5A), proof(kMacBytes, 0xA5), blob = {1, 2, 3, 4};
  wsync::Manifest m;
  m.bucket_bytes = 16;
  m.entries.push_back(entry("w", WSYNC_DTYPE_FLOAT32, {4}, 0, 16));
  const Bytes record = encode_manifest(m);
  struct {
    MsgType type;
    const char* name;
    Bytes body;
  } all[] = {
      {MsgType::kChallenge, "challenge", encode_challenge(ChallengeBody{kControlProtocolVersion, nonce})},
      {MsgType::kHello, "hello", encode_hello(HelloBody{kControlProtocolVersion, 1, 4242, "policy", nonce, proof})},
      {MsgType::kWelcome, "welcome", encode_welcome(WelcomeBody{3, proof})},
      {MsgType::kReject, "reject", encode_reject(RejectBody{WSYNC_ERR_REJECTED, "rank 1 already joined"})},
      {MsgType::kJoined, "joined", {}},
      {MsgType::kManifest, "manifest", encode_manifest_frame(ManifestFrameBody{7, record, blob})},
      {MsgType::kReady, "ready", encode_ready(ReadyBody{7, blob})},
      {MsgType::kNack, "nack", encode_status(StatusBody{7, WSYNC_ERR_OUT_OF_MEMORY, "no room", {}})},
      {MsgType::kAck, "ack", encode_status(StatusBody{7, WSYNC_OK, "", blob})},
      {MsgType::kAck, "ack_failed", encode_status(StatusBody{7, WSYNC_ERR_IO, "transport gave up", {}})},
      {MsgType::kEndUpdate, "end_update", encode_end_update(EndUpdateBody{1, 0, 3})},
      {MsgType::kCommitted, "committed", encode_committed(CommittedBody{1})},
      {MsgType::kAbortUpdate, "abort_update", encode_abort_update(AbortUpdateBody{"receiver rank 2 failed"})},
      {MsgType::kClose, "close", {}},
  };
  Bytes sender, receiver;
  for (const auto& f : all) {
    put("control_frames", f.name, cat({Bytes{static_cast<uint8_t>(f.type)}, f.body}));
    const bool from_sender = f.type == MsgType::kChallenge || f.type == MsgType::kWelcome || f.type == MsgType::kReject ||
                             f.type == MsgType::kManifest || f.type == MsgType::kEndUpdate ||
                             f.type == MsgType::kAbortUpdate || f.type == MsgType::kClose;
    Bytes& s = from_sender ? sender : receiver;
    const Bytes one = frame(f.type, f.body);
    s.insert(s.end(), one.begin(), one.end());
  }
  // fuzz_control_stream: flags u8 | the bytes one side sends
  put("control_stream", "sender", cat({Bytes{0}, sender}));
  put("control_stream", "receiver", cat({Bytes{0}, receiver}));
  put("control_stream", "handshake_unauthenticated",
      cat({Bytes{1}, frame(MsgType::kHello, encode_hello(HelloBody{kControlProtocolVersion, 2, 1, "g", nonce, proof}))}));
  Bytes cut = frame(MsgType::kManifest, encode_manifest_frame(ManifestFrameBody{8, record, {}}));
  cut.resize(cut.size() - 5);  // the peer died mid-frame
  put("control_stream", "cut_mid_frame", cat({Bytes{0}, frame(MsgType::kCommitted, encode_committed(CommittedBody{2})), cut}));
}

// fuzz_receiver_chunks: chunks (op u8 | name u8 | tensor_bytes u8 | tensor_offset u8 | length u8)
// and drops (op 3); op bit 5 closes the bucket.
Bytes chunk(uint8_t name, uint8_t tensor_bytes, uint8_t offset, uint8_t length, bool last_of_bucket = true) {
  return Bytes{static_cast<uint8_t>(last_of_bucket ? 32 : 0), name, tensor_bytes, offset, length};
}

void receiver_chunks() {
  put("receiver_chunks", "halves", cat({chunk(0, 128, 0, 64), chunk(0, 128, 64, 64)}));
  // Issue 22 finding 4: the same half twice adds up to the whole; a receiver counting lengths
  // calls the tensor complete with its second half never sent.
  put("receiver_chunks", "same_half_twice", cat({chunk(0, 128, 0, 64), chunk(0, 128, 0, 64)}));
  put("receiver_chunks", "overlap_adding_up", cat({chunk(0, 128, 0, 64), chunk(0, 128, 32, 64)}));
  put("receiver_chunks", "whole_then_chunk", cat({chunk(1, 64, 0, 64), chunk(1, 64, 0, 32)}));
  put("receiver_chunks", "two_tensors_one_bucket",
      cat({chunk(2, 96, 0, 48, false), chunk(3, 16, 8, 8), chunk(3, 16, 0, 8, false), chunk(2, 96, 48, 48)}));
  put("receiver_chunks", "dropped_then_again", cat({chunk(0, 128, 0, 64), Bytes{3}, chunk(0, 128, 64, 64)}));
  // tensor_offset + length wraps around 2^64 (u64 offset and length: op bits 3 and 4).
  put("receiver_chunks", "wrapping_end",
      cat({Bytes{32 | 8 | 16, 0, 128}, le(64, 8), le(~0ull - 10, 8), chunk(0, 128, 0, 128)}));
}

// Many-sender records: the first byte picks the decoder (0 a sender record, 1 a receiver's needs).
void ownership_records() {
  wsync::SenderRecord r;
  r.rank = 1;
  wsync::OwnedTensor w;
  w.name = "layers.0.w";
  w.dtype = WSYNC_DTYPE_BFLOAT16;
  w.ndim = 2;
  w.shape[0] = 10;
  w.shape[1] = 4;
  wsync::chunk_box(2, w.shape, 0, 4, 1, &w.box);
  r.tensors.push_back(w);
  wsync::OwnedTensor norm;
  norm.name = "norm";
  norm.dtype = WSYNC_DTYPE_FLOAT32;
  norm.ndim = 1;
  norm.shape[0] = 4;
  norm.box = wsync::full_box(1, norm.shape);
  norm.replica = true;
  r.tensors.push_back(norm);
  put("ownership_record", "sender", cat({Bytes{0}, wsync::encode_sender_record(r, 3)}));
  wsync::SenderRecord whole;
  whole.rank = 0;
  w.box = wsync::full_box(2, w.shape);
  whole.tensors.push_back(w);
  put("ownership_record", "sender_whole", cat({Bytes{0}, wsync::encode_sender_record(whole, 1)}));
  wsync::Need tp;
  tp.name = "w";
  tp.full = false;
  tp.box.ndim = 2;
  tp.box.extent[0] = 10;
  tp.box.offset[1] = 2;
  tp.box.extent[1] = 2;
  put("ownership_record", "needs", cat({Bytes{1}, wsync::encode_needs(2, 3, {tp, wsync::Need{"b", true, wsync::Box{}}})}));
  // The same records with a wrong checksum: the fuzzing build reads past it (fuzz_ownership_record).
  Bytes bad = cat({Bytes{0}, wsync::encode_sender_record(r, 3)});
  bad.back() ^= 0x5a;
  put("ownership_record", "sender_bad_checksum", bad);
  bad = cat({Bytes{1}, wsync::encode_needs(2, 3, {tp})});
  bad.back() ^= 0x5a;
  put("ownership_record", "needs_bad_checksum", bad);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT   (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  ::mkdir(g_root.c_str(), 0755);
  manifests();
  replies();
  options();
  group_infos();
  frames();
  receiver_chunks();
  ownership_records();
  return 0;
}
