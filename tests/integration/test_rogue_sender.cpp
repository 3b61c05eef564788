// A hand-written sender that speaks wsync's wire protocols (real store, real control socket,
// real UCX transport) and knows the group secret (an insider, or a sender with a bug), but lies in
// its manifests. The receiver under test is the real one, in a
// child process; it must refuse every corrupted bucket with WSYNC_ERR_PROTOCOL, tell the sender
// why (NACK), and never write anything. Chunks that overlap are refused too, and the update they
// belong to never commits (issue 22 finding 4).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/checksum.h"
#include "common/error.h"
#include "control/control_auth.h"
#include "control/control_conn.h"
#include "control/frames.h"
#include "control/group_info.h"
#include "harness.h"
#include "loader/plugin_loader.h"
#include "manifest/manifest.h"
#include "planner/ownership_record.h"
#include "store/store_handle.h"
#include "store/tcp_store_server.h"

using namespace wsync;
using namespace harness;

namespace {

std::string secret() {
  const char* s = std::getenv("WSYNC_GROUP_SECRET");
  return s ? s : "";
}

StoreServerOptions authenticated_store() {
  StoreServerOptions o;
  o.secret = secret();
  return o;
}

struct Rogue {
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<TcpStoreClient> client;
  wsync_store store{nullptr};
  ControlListener listener;
  ControlConn conn;
  LoadedTransport transport;
  void* tself = nullptr;

  ~Rogue() {
    if (tself) transport.table->destroy(tself);
  }

  // Host a group of one receiver and admit it like a real sender would; with num_senders > 1, as
  // sender `sender_rank` of a group whose senders plan (no address file for ranks above 0).
  void start(const std::string& addr_file, uint32_t num_senders = 1, uint32_t sender_rank = 0) {
    ASSERT_EQ(WSYNC_OK, TcpStoreServer::start("127.0.0.1", 0, authenticated_store(), &server)) << last_error();
    ASSERT_EQ(WSYNC_OK, TcpStoreClient::connect("127.0.0.1", server->port(), 5000, secret(), &client)) << last_error();
    store.client = client.get();
    ASSERT_EQ(WSYNC_OK, listener.listen("127.0.0.1", 0));
    GroupInfo gi;
    gi.protocol = kControlProtocolVersion;
    gi.group_name = "rogue";
    gi.world_size = 2;
    gi.transport = "ucx";
    gi.control_host = "127.0.0.1";
    gi.control_port = listener.port();
    gi.num_senders = num_senders;
    gi.sender_rank = sender_rank;
    gi.planned = num_senders > 1;
    auto blob = encode_group_info(gi);
    ASSERT_EQ(WSYNC_OK, client->set(kGroupInfoKey, blob.data(), blob.size()));
    if (addr_file.empty()) return;
    FILE* f = std::fopen(addr_file.c_str(), "w");
    std::fprintf(f, "127.0.0.1:%u\n", server->port());
    std::fclose(f);
  }

  void admit() {
    int fd = -1;
    for (int i = 0; i < 500 && listener.accept(20, &fd) != WSYNC_OK; ++i) {
    }
    ASSERT_GE(fd, 0);
    conn.adopt(fd);
    const std::vector<uint8_t> nonce = random_bytes(kNonceBytes);
    ByteWriter c;
    c.u32(kControlProtocolVersion);
    c.blob32(nonce);
    ASSERT_EQ(WSYNC_OK, conn.send(MsgType::kChallenge, c.data(), 1000));
    Frame hello;
    ASSERT_EQ(WSYNC_OK, conn.recv(&hello, 5000));
    ASSERT_EQ(static_cast<uint16_t>(MsgType::kHello), hello.type);
    ByteReader hr(hello.body);
    uint32_t proto = 0, rank = 0, pid = 0;
    std::string group;
    std::vector<uint8_t> rx_nonce, proof;
    ASSERT_TRUE(hr.u32(&proto) && hr.u32(&rank) && hr.u32(&pid) && hr.str32(&group, 4096) &&
                hr.blob32(&rx_nonce, kNonceBytes) && hr.blob32(&proof, kMacBytes));
    ASSERT_TRUE(proof_matches(proof, control_hello_proof(secret(), group, rank, pid, nonce, rx_nonce)));
    const Mac mine = control_welcome_proof(secret(), group, rank, 2, nonce, rx_nonce);
    ByteWriter w;
    w.u32(2);
    w.blob32(mine.data(), mine.size());
    ASSERT_EQ(WSYNC_OK, conn.send(MsgType::kWelcome, w.data(), 1000));
    ASSERT_EQ(WSYNC_OK, load_transport("ucx", &transport)) << last_error();
    wsync_transport_params_t tp = WSYNC_TRANSPORT_PARAMS_INIT;
    tp.world_size = 2;
    tp.group_name = "rogue";
    tp.store = &store;
    tp.timeout_ms = 10000;
    ASSERT_EQ(WSYNC_OK, transport.table->create(&tp, &tself)) << last_error();
    ASSERT_EQ(WSYNC_OK, transport.table->connect(tself, 10000)) << last_error();
    Frame joined;
    ASSERT_EQ(WSYNC_OK, conn.recv(&joined, 10000));
    ASSERT_EQ(static_cast<uint16_t>(MsgType::kJoined), joined.type);
  }

  // MANIFEST frame for bucket `seq` with the manifest bytes `raw` and no transport blob.
  void post_manifest(const std::vector<uint8_t>& raw, uint64_t seq) {
    ByteWriter w;
    w.u64(seq);
    w.blob32(raw);
    w.blob32(nullptr, 0);  // no transport blob
    ASSERT_EQ(WSYNC_OK, conn.send(MsgType::kManifest, w.data(), 1000));
  }

  // The receiver's answer in `f` (a status frame): its type, status and reason.
  static void read_answer(const Frame& f, uint16_t* type, int32_t* code, std::string* why) {
    *type = f.type;
    ByteReader r(f.body);
    uint64_t got = 0;
    r.u64(&got);
    r.i32(code);
    r.str32(why, 1 << 16);
  }

  // The receiver's next answer, past its PROGRESS reports (control protocol 4: a receiver reports
  // the pieces it took while a bucket lands).
  wsync_status_t answer(Frame* f, int64_t timeout_ms) {
    for (;;) {
      wsync_status_t st = conn.recv(f, timeout_ms);
      if (st != WSYNC_OK || f->type != static_cast<uint16_t>(MsgType::kProgress)) return st;
    }
  }

  // Send a raw manifest and return the receiver's answer (type, status, reason).
  void send_manifest(const std::vector<uint8_t>& raw, uint64_t seq, uint16_t* type, int32_t* code, std::string* why) {
    post_manifest(raw, seq);
    Frame f;
    ASSERT_EQ(WSYNC_OK, answer(&f, 10000)) << last_error();
    read_answer(f, type, code, why);
  }

  // Send bucket `seq` (manifest `m`, its bytes `payload`) as a sender would: MANIFEST, then the
  // bytes once the receiver is READY. Returns the receiver's answer: its NACK, or its ACK.
  void send_bucket(const Manifest& m, const std::vector<uint8_t>& payload, uint64_t seq, uint16_t* type,
                   int32_t* code, std::string* why) {
    post_manifest(encode_manifest(m), seq);
    Frame f;
    ASSERT_EQ(WSYNC_OK, answer(&f, 10000)) << last_error();
    if (f.type == static_cast<uint16_t>(MsgType::kReady)) {
      wsync_buffer_t buf = WSYNC_BUFFER_INIT;
      buf.data = payload.data();
      buf.len = payload.size();
      const uint32_t rank = 1;
      ASSERT_EQ(WSYNC_OK, transport.table->send_post(tself, seq, &buf, &rank, 1)) << last_error();
      ASSERT_EQ(WSYNC_OK, transport.table->send_wait(tself, seq, 10000)) << last_error();
      ASSERT_EQ(WSYNC_OK, answer(&f, 10000)) << last_error();
    }
    read_answer(f, type, code, why);
  }

  // END_UPDATE; returns the type of the receiver's answer (COMMITTED or NACK).
  uint16_t end_update(uint64_t version, uint64_t update, uint64_t buckets) {
    EXPECT_EQ(WSYNC_OK, conn.send(MsgType::kEndUpdate, encode_end_update({version, update, buckets}), 1000));
    Frame f;
    EXPECT_EQ(WSYNC_OK, answer(&f, 10000)) << last_error();
    return f.type;
  }
};

Manifest good_manifest() {
  Manifest m;
  m.update_id = 1;
  m.bucket_index = 0;
  m.bucket_bytes = 4096;
  ManifestEntry e;
  e.name = "w";
  e.dtype = WSYNC_DTYPE_FLOAT32;
  e.ndim = 1;
  std::memset(e.shape, 0, sizeof e.shape);
  e.shape[0] = 1024;
  e.bucket_offset = 0;
  e.length = 4096;
  e.tensor_bytes = 4096;
  e.tensor_offset = 0;
  m.entries.push_back(e);
  return m;
}

// A receiver child that expects next() to fail with `expect` and a message containing `needle`.
pid_t expecting_receiver(const std::string& addr_file, wsync_status_t expect, const std::string& needle) {
  return spawn([=] {
    std::string addr = read_addr_file(addr_file, 10000);
    wsync_receiver_t* rx = nullptr;
    if (join(addr, 1, "rogue", 10000, &rx) != WSYNC_OK) {
      std::fprintf(stderr, "init: %s\n", wsync_last_error());
      return 1;
    }
    // A registered buffer: it must come out of a refused bucket untouched.
    std::vector<uint8_t> w(4096, 0x5A);
    wsync_tensor_t d = WSYNC_TENSOR_INIT;
    d.name = "w";
    d.dtype = WSYNC_DTYPE_FLOAT32;
    d.ndim = 1;
    d.shape[0] = 1024;
    d.data = w.data();
    d.nbytes = w.size();
    wsync_receiver_register(rx, &d, 1);
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    wsync_status_t st = wsync_receiver_next(rx, &ev, 10000);
    std::string msg = wsync_last_error();
    bool untouched = true;
    for (uint8_t b : w) untouched &= b == 0x5A;
    wsync_receiver_destroy(rx);
    if (st != expect || msg.find(needle) == std::string::npos || !untouched) {
      std::fprintf(stderr, "receiver got %s: %s (untouched=%d)\n", wsync_status_name(st), msg.c_str(), untouched);
      return 2;
    }
    return 0;
  });
}

class RogueSender : public ::testing::Test {
 protected:
  void SetUp() override { setenv("WSYNC_PLUGIN_PATH", WSYNC_TEST_PLUGIN_DIR, 1); }
};

void corrupted_case(std::vector<uint8_t> raw, const std::string& needle) {
  std::string addr_file = temp_dir() + "/store.addr";
  Rogue rogue;
  rogue.start(addr_file);
  pid_t rx = expecting_receiver(addr_file, WSYNC_ERR_PROTOCOL, needle);
  rogue.admit();
  uint16_t type = 0;
  int32_t code = 0;
  std::string why;
  rogue.send_manifest(raw, 1, &type, &code, &why);
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kNack), type);
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, code);
  EXPECT_NE(std::string::npos, why.find(needle)) << why;
  EXPECT_EQ(0, wait_child(rx, 15000));
}

// The sender said why (ABORT_UPDATE, then CLOSE) and reset its connection before this receiver
// read the MANIFEST in front of those words: the READY finds the connection gone, and the receiver
// still reports the sender's words (ABORTED, then CLOSED), not "the sender is gone". A fixed
// group's surviving receiver once failed integration.e2e this way under load.
TEST_F(RogueSender, ASenderThatSaidWhyBeforeItWentIsHeardThoughItsReadyFails) {
  std::string addr_file = temp_dir() + "/store.addr";
  Rogue rogue;
  rogue.start(addr_file);
  pid_t rx = spawn([=] {
    std::string addr = read_addr_file(addr_file, 10000);
    wsync_receiver_t* r = nullptr;
    if (join(addr, 1, "rogue", 10000, &r) != WSYNC_OK) {
      std::fprintf(stderr, "init: %s\n", wsync_last_error());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // (the sender says all and resets meanwhile)
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    wsync_status_t st = wsync_receiver_next(r, &ev, 10000);
    if (st != WSYNC_OK || ev.kind != WSYNC_EVENT_ABORTED) {
      std::fprintf(stderr, "first event: %s (kind %d): %s\n", wsync_status_name(st), ev.kind, wsync_last_error());
      return 2;
    }
    st = wsync_receiver_next(r, &ev, 10000);
    if (st != WSYNC_OK || ev.kind != WSYNC_EVENT_CLOSED) {
      std::fprintf(stderr, "second event: %s (kind %d): %s\n", wsync_status_name(st), ev.kind, wsync_last_error());
      return 3;
    }
    wsync_receiver_destroy(r);
    return 0;
  });
  rogue.admit();
  rogue.post_manifest(encode_manifest(good_manifest()), 1);
  ASSERT_EQ(WSYNC_OK, rogue.conn.send(MsgType::kAbortUpdate, encode_abort_update({"receiver rank 2 died"}), 1000));
  ASSERT_EQ(WSYNC_OK, rogue.conn.send(MsgType::kClose, {}, 1000));
  linger reset{1, 0};  // (closed with a reset: the receiver's READY then fails at once)
  ASSERT_EQ(0, setsockopt(rogue.conn.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset));
  rogue.conn.close();
  EXPECT_EQ(0, wait_child(rx, 20000));
}

TEST_F(RogueSender, FlippedByteFailsTheChecksum) {
  auto raw = encode_manifest(good_manifest());
  raw[raw.size() / 2] ^= 0x40;
  corrupted_case(raw, "checksum");
}

TEST_F(RogueSender, TruncatedManifestIsRefused) {
  auto raw = encode_manifest(good_manifest());
  raw.resize(raw.size() - 9);
  corrupted_case(raw, "manifest");
}

TEST_F(RogueSender, EntryPastTheBucketIsRefusedEvenWithAValidChecksum) {
  Manifest m = good_manifest();
  m.entries[0].bucket_offset = 4096;  // points past the 4096-byte bucket
  corrupted_case(encode_manifest(m), "w");
}

TEST_F(RogueSender, ShapeThatDisagreesWithTheRegistrationIsRefused) {
  Manifest m = good_manifest();
  m.entries[0].shape[0] = 512;
  m.entries[0].ndim = 2;
  m.entries[0].shape[1] = 2;  // same bytes, other shape
  corrupted_case(encode_manifest(m), "registered");
}

TEST_F(RogueSender, GarbageOnTheControlChannelIsAProtocolError) {
  std::string addr_file = temp_dir() + "/store.addr";
  Rogue rogue;
  rogue.start(addr_file);
  pid_t rx = expecting_receiver(addr_file, WSYNC_ERR_PROTOCOL, "malformed control frame");
  rogue.admit();
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(static_cast<ssize_t>(sizeof junk), ::write(rogue.conn.fd(), junk, sizeof junk));
  EXPECT_EQ(0, wait_child(rx, 15000));
}

}  // namespace

namespace {

// Review findings: a manifest may not make the receiver allocate or receive without bounds.
TEST_F(RogueSender, HugeBucketClaimIsRefusedNotAllocated) {
  Manifest m;
  m.update_id = 1;
  m.bucket_bytes = 1ull << 63;  // no entries: once a 2^63-byte padding buffer and a crash
  corrupted_case(encode_manifest(m), "more than");
}

TEST_F(RogueSender, TensorOfNearly2To64BytesIsRefused) {
  Manifest m = good_manifest();
  m.bucket_bytes = ~0ull;
  m.entries[0].name = "unregistered";
  m.entries[0].dtype = WSYNC_DTYPE_UINT8;
  m.entries[0].ndim = 2;
  m.entries[0].shape[0] = 3;
  m.entries[0].shape[1] = 6148914691236517205ll;  // 3 * this = 2^64 - 1: once a wrapped allocation
  m.entries[0].length = ~0ull;
  m.entries[0].tensor_bytes = ~0ull;
  corrupted_case(encode_manifest(m), "more than");
}

TEST_F(RogueSender, LargePaddingBetweenEntriesIsRefused) {
  Manifest m = good_manifest();
  m.entries[0].bucket_offset = 1u << 20;
  m.bucket_bytes = (1u << 20) + 4096;
  corrupted_case(encode_manifest(m), "padding");
}

TEST_F(RogueSender, EndOfUpdateWithAWrongBucketCountIsRefusedAndTheSenderTold) {
  std::string addr_file = temp_dir() + "/store.addr";
  Rogue rogue;
  rogue.start(addr_file);
  pid_t rx = expecting_receiver(addr_file, WSYNC_ERR_PROTOCOL, "after 5 buckets");
  rogue.admit();
  ByteWriter w;
  w.u64(1);  // version
  w.u64(1);  // update
  w.u64(5);  // buckets: the receiver got none
  ASSERT_EQ(WSYNC_OK, rogue.conn.send(MsgType::kEndUpdate, w.data(), 1000));
  Frame f;
  ASSERT_EQ(WSYNC_OK, rogue.answer(&f, 10000));
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kNack), f.type);
  EXPECT_EQ(0, wait_child(rx, 15000));
}

// Even from a store that knows the secret, a transport named there is a plugin name, never a path
// to load.
TEST_F(RogueSender, TransportPathInTheStoreIsNotLoaded) {
  std::string dir = temp_dir();
  std::unique_ptr<TcpStoreServer> server;
  ASSERT_EQ(WSYNC_OK, TcpStoreServer::start("127.0.0.1", 0, authenticated_store(), &server));
  std::unique_ptr<TcpStoreClient> client;
  ASSERT_EQ(WSYNC_OK, TcpStoreClient::connect("127.0.0.1", server->port(), 5000, secret(), &client));
  GroupInfo gi;
  gi.protocol = kControlProtocolVersion;
  gi.group_name = "rogue";
  gi.world_size = 2;
  gi.transport = std::string(WSYNC_TEST_PLUGIN_DIR) + "/libwsync_transport_ucx.so";
  gi.control_host = "127.0.0.1";
  gi.control_port = 1;
  auto blob = encode_group_info(gi);
  ASSERT_EQ(WSYNC_OK, client->set(kGroupInfoKey, blob.data(), blob.size()));
  std::string addr = "127.0.0.1:" + std::to_string(server->port());
  wsync_receiver_t* r = nullptr;
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, join(addr, 1, "rogue", 3000, &r));
  EXPECT_NE(std::string::npos, std::string(wsync_last_error()).find("not a plugin name")) << wsync_last_error();
  EXPECT_EQ(nullptr, r);
}

// A REJECT carrying status 0 must not read as success.
TEST_F(RogueSender, RejectWithStatusZeroIsStillARejection) {
  std::string addr_file = temp_dir() + "/store.addr";
  Rogue rogue;
  rogue.start(addr_file);
  pid_t rx = spawn([=] {
    std::string addr = read_addr_file(addr_file, 10000);
    wsync_receiver_t* r = nullptr;
    wsync_status_t st = join(addr, 1, "rogue", 5000, &r);
    return st == WSYNC_ERR_REJECTED && r == nullptr ? 0 : 1;
  });
  int fd = -1;
  for (int i = 0; i < 500 && rogue.listener.accept(20, &fd) != WSYNC_OK; ++i) {
  }
  ASSERT_GE(fd, 0);
  rogue.conn.adopt(fd);
  ByteWriter c;
  c.u32(kControlProtocolVersion);
  c.blob32(random_bytes(kNonceBytes));
  ASSERT_EQ(WSYNC_OK, rogue.conn.send(MsgType::kChallenge, c.data(), 1000));
  Frame hello;
  ASSERT_EQ(WSYNC_OK, rogue.conn.recv(&hello, 5000));
  ByteWriter w;
  w.i32(0);
  w.str32("go away, but say OK");
  ASSERT_EQ(WSYNC_OK, rogue.conn.send(MsgType::kReject, w.data(), 1000));
  EXPECT_EQ(0, wait_child(rx, 10000));
}

}  // namespace

namespace {

// Issue 22 finding 4: a member sends a split tensor as chunks that overlap, so their lengths add
// up to the tensor while some of its bytes never came. The real receiver, staged, must refuse the
// second chunk naming the tensor and both ranges, never commit that update, and leave its buffer
// holding the committed version's bytes.
constexpr uint64_t kX = 1024;  // tensor 'x': float32[256]

std::vector<uint8_t> version1_bytes() {
  std::vector<uint8_t> b(kX);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7 + 1);
  return b;
}

Manifest x_chunk(uint64_t update, uint64_t bucket, uint64_t tensor_offset, uint64_t length) {
  Manifest m;
  m.update_id = update;
  m.bucket_index = bucket;
  m.bucket_bytes = length;
  ManifestEntry e;
  e.name = "x";
  e.dtype = WSYNC_DTYPE_FLOAT32;
  e.ndim = 1;
  e.shape[0] = static_cast<int64_t>(kX / 4);
  e.length = length;
  e.tensor_bytes = kX;
  e.tensor_offset = tensor_offset;
  m.entries.push_back(e);
  return m;
}

// A staged receiver that commits what it is asked to, until next() fails; then it expects
// WSYNC_ERR_PROTOCOL with `needle`, and from the END_UPDATE that follows another refusal. Exits 0
// when version 1 is still the committed one and its buffer holds version 1's bytes exactly.
pid_t staged_receiver(const std::string& addr_file, const std::string& needle) {
  return spawn([=] {
    const std::string addr = read_addr_file(addr_file, 10000);
    wsync_option_t opts[] = {WSYNC_OPTION("receive_mode", "staged")};
    wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
    cfg.rank = 1;
    cfg.store_addr = addr.c_str();
    cfg.group_name = "rogue";
    cfg.timeout_ms = 10000;
    cfg.options = opts;
    cfg.num_options = 1;
    wsync_receiver_t* rx = nullptr;
    if (wsync_receiver_init(&cfg, &rx) != WSYNC_OK) {
      std::fprintf(stderr, "init: %s\n", wsync_last_error());
      return 1;
    }
    std::vector<uint8_t> x(kX, 0x5A);
    wsync_tensor_t d = WSYNC_TENSOR_INIT;
    d.name = "x";
    d.dtype = WSYNC_DTYPE_FLOAT32;
    d.ndim = 1;
    d.shape[0] = static_cast<int64_t>(kX / 4);
    d.data = x.data();
    d.nbytes = x.size();
    if (wsync_receiver_register(rx, &d, 1) != WSYNC_OK) return 1;
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    wsync_status_t st;
    while ((st = wsync_receiver_next(rx, &ev, 10000)) == WSYNC_OK)
      if (ev.kind == WSYNC_EVENT_COMMIT && wsync_receiver_commit(rx, ev.version) != WSYNC_OK) break;
    const std::string refused = wsync_last_error();
    const wsync_status_t end = wsync_receiver_next(rx, &ev, 10000);  // the rogue's END_UPDATE
    const std::string end_msg = wsync_last_error();
    const uint64_t committed = wsync_receiver_committed_version(rx);
    const bool same = checksum64(x.data(), x.size()) == checksum64(version1_bytes().data(), kX);
    wsync_receiver_destroy(rx);
    if (st != WSYNC_ERR_PROTOCOL || refused.find(needle) == std::string::npos || end != WSYNC_ERR_PROTOCOL ||
        committed != 1 || !same) {
      std::fprintf(stderr, "receiver: %s: %s; then %s: %s; committed %llu, buffer %s version 1\n",
                   wsync_status_name(st), refused.c_str(), wsync_status_name(end), end_msg.c_str(),
                   static_cast<unsigned long long>(committed), same ? "holds" : "does not hold");
      return 2;
    }
    return 0;
  });
}

// Version 1 arrives whole and commits; update 2 sends x[0, 512), then `second` (a chunk of 512
// bytes at `second`), which must be refused with `needle`, then END_UPDATE for the buckets the
// receiver acknowledged, which must be refused too.
void overlapping_chunks_case(uint64_t second, const std::string& needle) {
  std::string addr_file = temp_dir() + "/store.addr";
  Rogue rogue;
  rogue.start(addr_file);
  pid_t rx = staged_receiver(addr_file, needle);
  rogue.admit();
  uint16_t type = 0;
  int32_t code = 0;
  std::string why;
  rogue.send_bucket(x_chunk(1, 0, 0, kX), version1_bytes(), 1, &type, &code, &why);
  ASSERT_EQ(static_cast<uint16_t>(MsgType::kAck), type) << why;
  ASSERT_EQ(static_cast<uint16_t>(MsgType::kCommitted), rogue.end_update(1, 1, 1));
  const std::vector<uint8_t> half(kX / 2, 0xEE);
  rogue.send_bucket(x_chunk(2, 0, 0, kX / 2), half, 2, &type, &code, &why);
  ASSERT_EQ(static_cast<uint16_t>(MsgType::kAck), type) << why;
  rogue.send_bucket(x_chunk(2, 1, second, kX / 2), half, 3, &type, &code, &why);
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kNack), type);
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, code);
  EXPECT_NE(std::string::npos, why.find(needle)) << why;
  // The count of buckets the receiver acknowledged: what a sender says to get the version committed.
  const uint64_t acked = type == static_cast<uint16_t>(MsgType::kAck) ? 2 : 1;
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kNack), rogue.end_update(2, 2, acked));
  rogue.conn.close();  // a receiver still waiting for more hears that there is none
  EXPECT_EQ(0, wait_child(rx, 15000));
}

TEST_F(RogueSender, OverlappingChunksOfASplitTensorAreRefusedAndNeverCommitted) {
  overlapping_chunks_case(256, "tensor 'x': chunk [256, 768) overlaps bytes [0, 512) already received in this update");
}

TEST_F(RogueSender, ADuplicateChunkIsRefusedAndNeverCommitted) {
  overlapping_chunks_case(0, "tensor 'x': chunk [0, 512) overlaps bytes [0, 512) already received in this update");
}

// ---- Boxes: the hand-written sender sends what a many-sender group's senders will ------------
// w float32 [6, 4] comes as two row boxes, q bfloat16 [4, 6] as two column boxes, the first cut
// across two buckets; boxes of one tensor never share a bucket (names are unique in a manifest).
// The real receiver (staged, w registered, q not) must report w once it is whole, q once whole
// and exact (a view), and commit w's bytes exactly.
constexpr int64_t kWRows = 6, kWCols = 4, kQRows = 4, kQCols = 6;

std::vector<uint8_t> pattern(size_t n, int salt) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 7 + salt);
  return b;
}

// The packed bytes of `box` (its elements in its own row-major order) out of the whole tensor.
std::vector<uint8_t> packed(const std::vector<uint8_t>& whole, const Box& box, int64_t cols, uint32_t esize) {
  std::vector<uint8_t> out;
  for (int64_t r = box.offset[0]; r < box.offset[0] + box.extent[0]; ++r) {
    const size_t at = static_cast<size_t>((r * cols + box.offset[1]) * esize);
    out.insert(out.end(), whole.begin() + at, whole.begin() + at + box.extent[1] * esize);
  }
  return out;
}

ManifestEntry box_entry(const std::string& name, int32_t dtype, int64_t rows, int64_t cols, const Box& box,
                        uint64_t bucket_offset, uint64_t tensor_offset, uint64_t length) {
  ManifestEntry e;
  e.name = name;
  e.dtype = dtype;
  e.ndim = 2;
  e.shape[0] = rows;
  e.shape[1] = cols;
  e.box = box;
  e.tensor_bytes = static_cast<uint64_t>(box.extent[0] * box.extent[1]) * wsync_dtype_size(dtype);
  e.bucket_offset = bucket_offset;
  e.tensor_offset = tensor_offset;
  e.length = length;
  return e;
}

Box rows_of(int64_t r0, int64_t r1, int64_t cols) {
  Box b;
  b.ndim = 2;
  b.offset[0] = r0;
  b.extent[0] = r1 - r0;
  b.extent[1] = cols;
  return b;
}

Box cols_of(int64_t rows, int64_t c0, int64_t c1) {
  Box b;
  b.ndim = 2;
  b.extent[0] = rows;
  b.offset[1] = c0;
  b.extent[1] = c1 - c0;
  return b;
}

Manifest box_bucket(uint64_t bucket, std::vector<ManifestEntry> entries) {
  Manifest m;
  m.update_id = 1;
  m.bucket_index = bucket;
  m.flags = kManifestFlagBoxes;
  for (const auto& e : entries) m.bucket_bytes = std::max(m.bucket_bytes, e.bucket_offset + e.length);
  m.entries = std::move(entries);
  return m;
}

// A staged receiver with w registered: exits 0 when q was reported once, whole and exact, w
// became whole, version 1 committed and w's buffer holds its bytes exactly; with `needle`, when
// next() instead failed with WSYNC_ERR_PROTOCOL naming it and w's buffer was left untouched.
pid_t box_receiver(const std::string& addr_file, const std::string& needle) {
  return spawn([=] {
    const std::string addr = read_addr_file(addr_file, 10000);
    wsync_option_t opts[] = {WSYNC_OPTION("receive_mode", "staged")};
    wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
    cfg.rank = 1;
    cfg.store_addr = addr.c_str();
    cfg.group_name = "rogue";
    cfg.timeout_ms = 10000;
    cfg.options = opts;
    cfg.num_options = 1;
    wsync_receiver_t* rx = nullptr;
    if (wsync_receiver_init(&cfg, &rx) != WSYNC_OK) return 1;
    std::vector<uint8_t> w(kWRows * kWCols * 4, 0x5A);
    wsync_tensor_t d = WSYNC_TENSOR_INIT;
    d.name = "w";
    d.dtype = WSYNC_DTYPE_FLOAT32;
    d.ndim = 2;
    d.shape[0] = kWRows;
    d.shape[1] = kWCols;
    d.data = w.data();
    d.nbytes = w.size();
    if (wsync_receiver_register(rx, &d, 1) != WSYNC_OK) return 1;
    int w_seen = 0, q_seen = 0;
    bool q_exact = false;
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    wsync_status_t st;
    while ((st = wsync_receiver_next(rx, &ev, 10000)) == WSYNC_OK) {
      if (ev.kind == WSYNC_EVENT_BUCKET)
        for (uint64_t i = 0; i < ev.num_tensors; ++i) {
          const wsync_tensor_t& t = ev.tensors[i];
          if (std::string(t.name) == "w") ++w_seen;
          if (std::string(t.name) == "q") {
            ++q_seen;
            const std::vector<uint8_t> want = pattern(kQRows * kQCols * 2, 5);
            q_exact = t.nbytes == want.size() && std::memcmp(t.data, want.data(), want.size()) == 0;
          }
        }
      if (ev.kind == WSYNC_EVENT_COMMIT && wsync_receiver_commit(rx, ev.version) != WSYNC_OK) break;
      if (ev.kind == WSYNC_EVENT_COMMIT || ev.kind == WSYNC_EVENT_CLOSED) break;
    }
    const std::string msg = wsync_last_error();
    const uint64_t committed = wsync_receiver_committed_version(rx);
    wsync_receiver_destroy(rx);
    bool ok;
    if (needle.empty()) {
      ok = st == WSYNC_OK && w_seen == 1 && q_seen == 1 && q_exact && committed == 1 && w == pattern(w.size(), 3);
    } else {
      bool untouched = true;
      for (uint8_t b : w) untouched &= b == 0x5A;
      ok = st == WSYNC_ERR_PROTOCOL && msg.find(needle) != std::string::npos && untouched && committed == 0;
    }
    if (!ok)
      std::fprintf(stderr, "box receiver: %s: %s; w seen %d, q seen %d (exact %d), committed %llu\n",
                   wsync_status_name(st), msg.c_str(), w_seen, q_seen, q_exact, static_cast<unsigned long long>(committed));
    return ok ? 0 : 2;
  });
}

void send_expecting(Rogue& rogue, const Manifest& m, const std::vector<uint8_t>& payload, uint64_t seq, MsgType want) {
  uint16_t type = 0;
  int32_t code = 0;
  std::string why;
  rogue.send_bucket(m, payload, seq, &type, &code, &why);
  EXPECT_EQ(static_cast<uint16_t>(want), type) << "bucket " << m.bucket_index << ": " << why;
}

std::vector<uint8_t> cat2(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(RogueSender, BoxesFromSeveralOwnersAssembleWholeTensorsOnAStagedReceiver) {
  std::string addr_file = temp_dir() + "/store.addr";
  Rogue rogue;
  rogue.start(addr_file);
  pid_t rx = box_receiver(addr_file, "");
  rogue.admit();
  const std::vector<uint8_t> w = pattern(kWRows * kWCols * 4, 3), q = pattern(kQRows * kQCols * 2, 5);
  const Box w0 = rows_of(0, 3, kWCols), w1 = rows_of(3, 6, kWCols), q0 = cols_of(kQRows, 3, 6), q1 = cols_of(kQRows, 0, 3);
  const std::vector<uint8_t> pw0 = packed(w, w0, kWCols, 4), pw1 = packed(w, w1, kWCols, 4);
  const std::vector<uint8_t> pq0 = packed(q, q0, kQCols, 2), pq1 = packed(q, q1, kQCols, 2);
  const std::vector<uint8_t> pq0a(pq0.begin(), pq0.begin() + 10), pq0b(pq0.begin() + 10, pq0.end());
  send_expecting(rogue,
                 box_bucket(0, {box_entry("w", WSYNC_DTYPE_FLOAT32, kWRows, kWCols, w0, 0, 0, pw0.size()),
                                box_entry("q", WSYNC_DTYPE_BFLOAT16, kQRows, kQCols, q0, pw0.size(), 0, pq0a.size())}),
                 cat2(pw0, pq0a), 1, MsgType::kAck);
  send_expecting(rogue,
                 box_bucket(1, {box_entry("w", WSYNC_DTYPE_FLOAT32, kWRows, kWCols, w1, 0, 0, pw1.size()),
                                box_entry("q", WSYNC_DTYPE_BFLOAT16, kQRows, kQCols, q0, pw1.size(), pq0a.size(),
                                          pq0b.size())}),
                 cat2(pw1, pq0b), 2, MsgType::kAck);
  send_expecting(rogue, box_bucket(2, {box_entry("q", WSYNC_DTYPE_BFLOAT16, kQRows, kQCols, q1, 0, 0, pq1.size())}),
                 pq1, 3, MsgType::kAck);
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kCommitted), rogue.end_update(1, 1, 3));
  rogue.conn.close();
  EXPECT_EQ(0, wait_child(rx, 15000));
}

TEST_F(RogueSender, OverlappingBoxesAreRefusedNamingTheBytesAndNeverWritten) {
  std::string addr_file = temp_dir() + "/store.addr";
  Rogue rogue;
  rogue.start(addr_file);
  // Rows 0..4 then rows 3..6 of w: row 3 (bytes [48, 64) of the whole tensor) twice.
  pid_t rx = box_receiver(addr_file, "tensor 'w': chunk [48, 96) overlaps bytes [0, 64) already received");
  rogue.admit();
  const std::vector<uint8_t> w = pattern(kWRows * kWCols * 4, 3);
  const Box a = rows_of(0, 4, kWCols), b = rows_of(3, 6, kWCols);
  const std::vector<uint8_t> pa = packed(w, a, kWCols, 4), pb = packed(w, b, kWCols, 4);
  send_expecting(rogue, box_bucket(0, {box_entry("w", WSYNC_DTYPE_FLOAT32, kWRows, kWCols, a, 0, 0, pa.size())}), pa, 1,
                 MsgType::kAck);
  send_expecting(rogue, box_bucket(1, {box_entry("w", WSYNC_DTYPE_FLOAT32, kWRows, kWCols, b, 0, 0, pb.size())}), pb, 2,
                 MsgType::kNack);
  rogue.conn.close();
  EXPECT_EQ(0, wait_child(rx, 15000));
}

}  // namespace

// ---- Many senders: every receiver compares the plan its senders agreed on ----------------------
// Two hand-written senders of one group finalize version 1 (no buckets); each END_UPDATE carries
// that sender's chain of agreed plan digests. Equal chains commit; a sender whose chain differs (it
// sent by another plan) makes the receiver refuse the version, naming both plans, and NACK both.
void two_senders_finalize(uint64_t digest0, uint64_t digest1, bool expect_commit) {
  const std::string addr_file = temp_dir() + "/store.addr";
  Rogue s0, s1;
  s0.start(addr_file, 2, 0);
  s1.start("", 2, 1);
  const std::string s1_addr = "127.0.0.1:" + std::to_string(s1.server->port());
  ASSERT_EQ(WSYNC_OK, s0.client->set(sender_key(1), s1_addr.data(), s1_addr.size()));
  pid_t rx = spawn([=] {
    wsync_receiver_t* r = nullptr;
    if (join(read_addr_file(addr_file, 10000), 1, "rogue", 10000, &r) != WSYNC_OK) {
      std::fprintf(stderr, "init: %s\n", wsync_last_error());
      return 1;
    }
    wsync_receiver_state_t state = WSYNC_RECEIVER_STATE_INIT;
    wsync_receiver_get_state(r, &state);
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    wsync_status_t st = wsync_receiver_next(r, &ev, 10000);
    const std::string msg = wsync_last_error();
    bool ok = state.num_senders == 2 && state.planned == 1;
    if (expect_commit)
      ok = ok && st == WSYNC_OK && ev.kind == WSYNC_EVENT_COMMIT && wsync_receiver_commit(r, 1) == WSYNC_OK;
    else
      ok = ok && st == WSYNC_ERR_PROTOCOL && msg.find("not send version 1 by the same plan") != std::string::npos &&
           msg.find("00000000000000aa") != std::string::npos && msg.find("00000000000000bb") != std::string::npos &&
           wsync_receiver_committed_version(r) == 0;
    if (!ok)
      std::fprintf(stderr, "receiver: %s: %s (event %d, senders %u, planned %u)\n", wsync_status_name(st), msg.c_str(),
                   ev.kind, state.num_senders, state.planned);
    wsync_receiver_destroy(r);
    return ok ? 0 : 2;
  });
  s0.admit();
  s1.admit();
  ASSERT_EQ(WSYNC_OK, s0.conn.send(MsgType::kEndUpdate, encode_end_update({1, 1, 0, true, digest0}), 1000));
  ASSERT_EQ(WSYNC_OK, s1.conn.send(MsgType::kEndUpdate, encode_end_update({1, 1, 0, true, digest1}), 1000));
  for (Rogue* s : {&s0, &s1}) {
    Frame f;
    ASSERT_EQ(WSYNC_OK, s->answer(&f, 10000)) << last_error();
    EXPECT_EQ(static_cast<uint16_t>(expect_commit ? MsgType::kCommitted : MsgType::kNack), f.type);
  }
  EXPECT_EQ(0, wait_child(rx, 15000));
}

TEST_F(RogueSender, SendersWhoseAgreedPlansDifferAreRefusedAndNothingCommits) {
  two_senders_finalize(0xaa, 0xbb, false);
}

TEST_F(RogueSender, SendersThatAgreedOnOnePlanCommit) { two_senders_finalize(0xcc, 0xcc, true); }
