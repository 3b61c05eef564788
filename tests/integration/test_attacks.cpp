// The attack run's findings against the release before authentication, replayed against today's
// default configuration (a group secret shared through WSYNC_GROUP_SECRET, the store bound to
// 127.0.0.1). The sender and the receivers are real processes forked by the test; the attacker is
// the test process itself, or a process of its own where it needs UCX (docs/SECURITY.md has the
// threat model). Every process is forked before any of them brings UCX up.
//
// Finding 1, remote crash. Then: anyone who reached the store could write a UCX worker address
// under a member's key, "wsync/<group>/ucx/addr/<rank>", and the member passed it to
// ucp_ep_create, where UCX asserts and the process aborts. Now (Finding1_*): every write by a
// peer without the secret (none, or a wrong one) is refused by the store (the connection closed,
// nothing back, the sender's log names the peer; a wsync client with a wrong secret gets
// WSYNC_ERR_REJECTED), the genuine records stand, and the group inits and syncs with every
// tensor's checksum equal, nobody crashed.
//
// Finding 2, weight injection. Then: UCX receives matched tag = bucket number, so a peer that
// knew a receiver's UCX worker address could send bucket-sized messages under tags 0..N ahead of
// the sender and its bytes were committed. Now (Finding2_*): the receive tag is a random 64-bit
// base plus the bucket number, so messages under every guessed tag (0..N with and without common
// high bits, random ones; bucket-sized and short; 64 KiB and 1 MiB buckets; over shared memory
// and over TCP) never match: the receiver commits the sender's bytes (every checksum equal, the
// marker nowhere), the trainer reports success, and the receiver's UCX closes with the attacker's
// messages unmatched (proof that they arrived).
//
// Finding 3, model substitution. Then: anyone could rewrite "wsync/group_info" to point receivers
// at a rogue control port, and a rogue sender could feed a receiver. Now (Finding3_*): the store
// refuses every rewrite (SET, COMPARE_SET, DELETE, APPEND of a second control_port line,
// MULTI_SET) and the receiver joins the real sender; a rogue sender's store with another secret
// is refused by a receiver pointed at it (WSYNC_ERR_REJECTED naming that store and the failed
// secret proof); and a rogue that relays the store's login to the real store and then serves a
// forged group_info is stopped by the sender's WELCOME proof (WSYNC_ERR_REJECTED "did not prove
// the group secret").
//
// Finding 4, no authentication anywhere, and UCX listening on every interface. Then: a peer
// without anything could LIST and read every key (the model's whereabouts), write and delete
// them, set transport options for the receivers, and UCX's TCP listeners were open on every
// interface. Now (Finding4_*): against a running group's store, an outsider's every read, list,
// count, wait, delete, add, barrier or transport-option write is refused with nothing returned and
// the keys unchanged, a HELLO on the control port gets nothing back; and every TCP socket the
// sender and a receiver listen on is bound to 127.0.0.1 (or ::1), with UCX's default transports
// and with UCX_TLS=tcp (where UCX's own TCP listener must exist), on a machine that has another
// interface UCX could have listened on.
//
// (test_trust covers receivers with a wrong or no secret and a forged HELLO during init;
// tests/unit/test_store_auth covers every store query against a bare store.)
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "../common/store_test_client.h"
#include "common/auth.h"
#include "common/error.h"
#include "control/control_conn.h"
#include "control/frames.h"
#include "control/group_info.h"
#include "harness.h"
#include "store/host_port.h"
#include "store/tcp_store_client.h"

using namespace harness;
namespace ts = wsync::test_store;
using ts::Bytes;

namespace {

// The plugins of this build (the core is linked statically), and a secret for direct runs (ctest
// sets its own).
const int kEnvironment = [] {
  setenv("WSYNC_PLUGIN_PATH", WSYNC_TEST_PLUGIN_DIR, 1);
  setenv("WSYNC_GROUP_SECRET", "attacks-test-group-secret-0123456789abcdef", 0);
  return 0;
}();

const char kWrongSecret[] = "a-guessed-secret-that-is-long-enough";
// What the attacker's bytes look like: 16 bytes no tensor of the synthetic model contains.
const char kMarker[] = "ROGUE-UCX-BYTES!";
constexpr size_t kMarkerLen = 16;

std::string secret() {
  const char* s = std::getenv("WSYNC_GROUP_SECRET");
  return s ? s : "";
}

void touch(const std::string& path) { std::ofstream(path).put('1'); }

bool wait_for_file(const std::string& path, int timeout_ms) {
  for (int waited = 0; access(path.c_str(), F_OK) != 0; waited += 10) {
    if (waited > timeout_ms) return false;
    usleep(10000);
  }
  return true;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A child's log lines (and the messages of its failures) go to a file the test reads afterwards.
void log_to_file(const std::string& path, int32_t level) {
  FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return;
  setvbuf(f, nullptr, _IOLBF, 0);
  wsync_set_log_callback([](void* u, int32_t, const char* m) { std::fprintf(static_cast<FILE*>(u), "%s\n", m); }, f,
                         level);
}

void note(const std::string& path, const std::string& line) {
  std::ofstream(path, std::ios::app) << line << "\n";
  std::fprintf(stderr, "%s\n", line.c_str());
}

std::string ucx_addr_key(const std::string& group, uint32_t rank) {
  return "wsync/" + group + "/ucx/addr/" + std::to_string(rank);
}

// ---- the real group: a sender and receivers, each its own process ---------------------------

// Files in `dir`: store (the store's address), sender.log, sender.inited (every receiver joined),
// send (the test lets the sender send), go (the test lets the receivers join), rank<N>.log,
// rank<N>.joined.
struct GroupPlan {
  std::string dir = temp_dir();
  std::string group;
  uint32_t receivers = 1;
  std::vector<synth_tensor_t> spec;
  uint64_t bucket_bytes = 0;  // 0: the default
  std::vector<std::pair<std::string, std::string>> options;  // more group options
  std::vector<std::pair<std::string, std::string>> env;  // set in every member process
  bool receivers_wait_for_go = false;
  int32_t receiver_log_level = WSYNC_LOG_INFO;
  bool receiver_output_to_file = false;  // the receivers' stdout and stderr (UCX's own log) to rank<N>.out

  std::string file(const std::string& name) const { return dir + "/" + name; }
  std::string addr_file() const { return file("store"); }
};

GroupPlan plan(const std::string& group, uint32_t receivers, uint64_t big_bytes, uint64_t bucket_bytes) {
  GroupPlan p;
  p.group = group;
  p.receivers = receivers;
  p.spec = tensor_set(12, big_bytes);
  p.bucket_bytes = bucket_bytes;
  return p;
}

// Group init; after the test creates "send", one version of the model. 0 when everything
// succeeded; the reason of a failure is in sender.log.
int run_sender(const GroupPlan& p, int64_t init_timeout_ms = 30000) {
  for (const auto& e : p.env) setenv(e.first.c_str(), e.second.c_str(), 1);
  const std::string log = p.file("sender.log");
  log_to_file(log, WSYNC_LOG_INFO);
  Model m;
  m.spec = p.spec;
  m.fill(1);
  const std::string addr_file = p.addr_file(), bucket = std::to_string(p.bucket_bytes);
  std::vector<wsync_option_t> opts = {WSYNC_OPTION("store_addr_file", addr_file.c_str()),
                                      WSYNC_OPTION("timeout_ms", "20000")};
  if (p.bucket_bytes) opts.push_back(WSYNC_OPTION("bucket_bytes", bucket.c_str()));
  for (const auto& kv : p.options) opts.push_back(WSYNC_OPTION(kv.first.c_str(), kv.second.c_str()));
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = p.receivers;
  cfg.group_name = p.group.c_str();
  cfg.options = opts.data();
  cfg.num_options = opts.size();
  cfg.timeout_ms = init_timeout_ms;
  wsync_group_t* g = nullptr;
  wsync_status_t st = wsync_group_init(&cfg, &g);
  if (st != WSYNC_OK) {
    note(log, std::string("sender: init: ") + wsync_status_name(st) + ": " + wsync_last_error());
    return 1;
  }
  touch(p.file("sender.inited"));
  if (!wait_for_file(p.file("send"), 30000)) {
    note(log, "sender: the test never said send");
    wsync_group_destroy(g);
    return 2;
  }
  st = wsync_group_send_batch(g, m.descs.data(), m.descs.size(), 20000);
  if (st == WSYNC_OK) st = wsync_group_finalize(g, 1, 20000);
  if (st != WSYNC_OK) note(log, std::string("sender: send: ") + wsync_status_name(st) + ": " + wsync_last_error());
  wsync_group_destroy(g);
  return st == WSYNC_OK ? 0 : 3;
}

bool holds_marker(const void* data, uint64_t n) {
  return n >= kMarkerLen && memmem(data, n, kMarker, kMarkerLen) != nullptr;
}

// A receiver (after "go" when the plan says so) with every tensor registered (poisoned first), in
// place: the harshest mode, the bytes land straight in the engine's buffers. Every bucket and the
// commit are checked: no tensor holds the marker, every checksum equals the sender's. 0 when one
// version committed that way and the group closed.
int run_checked_receiver(const GroupPlan& p, uint32_t rank) {
  for (const auto& e : p.env) setenv(e.first.c_str(), e.second.c_str(), 1);
  const std::string log = p.file("rank" + std::to_string(rank) + ".log");
  log_to_file(log, p.receiver_log_level);
  if (p.receiver_output_to_file) {
    const int fd = ::open(p.file("rank" + std::to_string(rank) + ".out").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
  }
  if (p.receivers_wait_for_go && !wait_for_file(p.file("go"), 30000)) return 30;
  const std::string addr = read_addr_file(p.addr_file(), 20000);
  if (addr.empty()) return 10;
  wsync_receiver_t* rx = nullptr;
  wsync_status_t st = join(addr, rank, p.group.c_str(), 20000, &rx);
  if (st != WSYNC_OK) {
    note(log, "rank " + std::to_string(rank) + ": init: " + wsync_status_name(st) + ": " + wsync_last_error());
    return 11;
  }
  std::map<std::string, std::vector<uint8_t>> params;
  std::vector<wsync_tensor_t> regs;
  for (const auto& t : p.spec) {
    auto& b = params[t.name];
    b.assign(t.nbytes, 0xEE);
    regs.push_back(desc_of(t, t.nbytes ? b.data() : nullptr));
  }
  if (wsync_receiver_register(rx, regs.data(), regs.size()) != WSYNC_OK) return 12;
  touch(p.file("rank" + std::to_string(rank) + ".joined"));
  int rc = 0;
  uint64_t commits = 0;
  for (;;) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    st = wsync_receiver_next(rx, &ev, 20000);
    if (st != WSYNC_OK) {
      note(log, "rank " + std::to_string(rank) + ": next: " + wsync_status_name(st) + ": " + wsync_last_error());
      rc = 13;
      break;
    }
    if (ev.kind == WSYNC_EVENT_BUCKET) {
      for (uint64_t i = 0; i < ev.num_tensors; ++i)
        if (holds_marker(ev.tensors[i].data, ev.tensors[i].nbytes)) {
          note(log, "rank " + std::to_string(rank) + ": tensor " + ev.tensors[i].name + " holds the attacker's bytes");
          rc = 14;
        }
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      for (const auto& t : p.spec) {
        const auto& b = params[t.name];
        if (holds_marker(b.data(), b.size()) ||
            synth_checksum(b.data(), t.nbytes) != synth_expected_checksum(&t, ev.version)) {
          note(log, "rank " + std::to_string(rank) + ": version " + std::to_string(ev.version) + ": tensor " + t.name +
                        " is not the sender's");
          rc = 15;
        }
      }
      if (rc != 0) break;
      if (wsync_receiver_commit(rx, ev.version) != WSYNC_OK) {
        rc = 16;
        break;
      }
      ++commits;
    } else if (ev.kind == WSYNC_EVENT_CLOSED) {
      break;
    } else if (ev.kind == WSYNC_EVENT_ABORTED) {
      note(log, "rank " + std::to_string(rank) + ": the update was aborted");
      rc = 17;
      break;
    }
  }
  wsync_receiver_destroy(rx);
  if (rc == 0 && commits != 1) {
    note(log, "rank " + std::to_string(rank) + ": " + std::to_string(commits) + " commits, expected 1");
    rc = 18;
  }
  return rc;
}

// The children of one test; whatever is still running when the test ends (a failed ASSERT) is
// killed, so nothing outlives it.
struct Children {
  std::set<pid_t> running;
  pid_t spawn(const std::function<int()>& fn) {
    pid_t pid = harness::spawn(fn);
    running.insert(pid);
    return pid;
  }
  int wait(pid_t pid, int timeout_ms) {
    running.erase(pid);
    return wait_child(pid, timeout_ms);
  }
  ~Children() {
    for (pid_t pid : running) wait_child(pid, 0);  // kills and reaps
  }
};

// The sender and `p.receivers` receivers, forked (before this process brings anything up).
struct Group {
  GroupPlan p;
  Children kids;
  pid_t sender = -1;
  std::vector<pid_t> receivers;
  std::string addr;
  uint16_t store_port = 0;

  // The files stay for a failed test, to read.
  ~Group() {
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(p.dir);
  }
  explicit Group(GroupPlan plan_) : p(std::move(plan_)) {
    const GroupPlan& pp = p;
    sender = kids.spawn([&pp] { return run_sender(pp); });
    for (uint32_t r = 1; r <= p.receivers; ++r)
      receivers.push_back(kids.spawn([&pp, r] { return run_checked_receiver(pp, r); }));
  }
  // The store's address, once the sender wrote it.
  void find_store() {
    addr = read_addr_file(p.addr_file(), 20000);
    ASSERT_FALSE(addr.empty()) << "the sender wrote no store address; its log:\n" << slurp(p.file("sender.log"));
    std::string host;
    ASSERT_EQ(WSYNC_OK, wsync::parse_host_port(addr, &host, &store_port));
  }
  void wait_inited() {
    ASSERT_TRUE(wait_for_file(p.file("sender.inited"), 30000)) << "sender log:\n" << slurp(p.file("sender.log"));
  }
  // Lets the sender send, then every member must exit 0: the sender sent and finalized, every
  // receiver committed the sender's bytes. An exit by a signal is a crash.
  void finish() {
    touch(p.file("send"));
    int rc = kids.wait(sender, 60000);
    EXPECT_EQ(0, rc) << "sender " << (rc > 128 ? "crashed" : "failed") << "; its log:\n" << slurp(p.file("sender.log"));
    for (uint32_t r = 1; r <= receivers.size(); ++r) {
      rc = kids.wait(receivers[r - 1], 60000);
      EXPECT_EQ(0, rc) << "receiver rank " << r << (rc > 128 ? " crashed" : " failed") << "; its log:\n"
                       << slurp(p.file("rank" + std::to_string(r) + ".log"));
    }
  }
  std::string sender_log() const { return slurp(p.file("sender.log")); }
};

// ---- the attacker's and the test's store connections ---------------------------------------

// The test reading the store as a member (with the secret), to check what is there.
std::unique_ptr<wsync::TcpStoreClient> member(uint16_t port) {
  std::unique_ptr<wsync::TcpStoreClient> c;
  EXPECT_EQ(WSYNC_OK, wsync::TcpStoreClient::connect("127.0.0.1", port, 5000, secret(), &c)) << wsync::last_error();
  return c;
}

bool has_key(wsync::TcpStoreClient& c, const std::string& key) {
  bool ready = true;
  EXPECT_EQ(WSYNC_OK, ts::check(c, {key}, &ready)) << wsync::last_error();
  return ready;
}

Bytes value_of(wsync::TcpStoreClient& c, const std::string& key) {
  Bytes v;
  EXPECT_EQ(WSYNC_OK, c.get(key, &v, 5000)) << key << ": " << wsync::last_error();
  return v;
}

// Every key and its value, as a member sees them.
std::map<std::string, Bytes> everything(wsync::TcpStoreClient& c) {
  std::vector<Bytes> keys;
  wsync::ByteWriter b;
  b.u8(ts::LIST);
  EXPECT_EQ(WSYNC_OK, c.request("LIST", b.data(), [&](wsync::TcpStoreClient& cl, int64_t d) {
    int64_t n = 0;
    wsync_status_t st = cl.recv_exact(&n, sizeof n, d, "LIST");
    for (int64_t i = 0; st == WSYNC_OK && i < n; ++i) {
      keys.emplace_back();
      st = cl.recv_payload(&keys.back(), d, "LIST");
    }
    return st;
  })) << wsync::last_error();
  std::map<std::string, Bytes> out;
  for (const auto& k : keys) {
    Bytes v;
    EXPECT_TRUE(ts::lookup_wire(c, ts::S(k), &v)) << ts::S(k);
    out[ts::S(k)] = v;
  }
  return out;
}

uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// What one attempt of a peer without the secret got: the store must close the connection and
// send nothing back.
struct Attempt {
  std::string what;
  uint16_t port = 0;  // the attacker's end, which the sender's warning must name
  bool handshake = false, closed = false;
  size_t bytes_back = 0;
  bool refused() const { return handshake && closed && bytes_back == 0; }
};

std::ostream& operator<<(std::ostream& os, const Attempt& a) {
  return os << a.what << " from port " << a.port << ": handshake " << a.handshake << ", closed " << a.closed << ", "
            << a.bytes_back << " bytes back";
}

// torch's handshake (VALIDATE, PING: allowed to anyone), then `request`.
Attempt outsider(uint16_t store_port, const std::string& what, const Bytes& request) {
  ts::Raw r(store_port);
  Attempt a;
  a.what = what;
  a.port = local_port(r.fd());
  r.send(ts::Req(ts::PING).u32(77).b);
  a.handshake = r.u32() == 77;
  r.send(request);
  Bytes got;
  a.closed = r.closed_by_peer(3000, &got);
  a.bytes_back = got.size();
  return a;
}

// A peer with a wrong secret: its proof fails, and `request` follows right behind the proof,
// before the store's verdict could have been read. The verdict must be "refused", then nothing.
Attempt wrong_secret(uint16_t store_port, const std::string& what, const Bytes& request) {
  ts::Raw r(store_port);
  Attempt a;
  a.what = what + " behind a wrong-secret AUTH";
  a.port = local_port(r.fd());
  const Bytes cn = wsync::random_bytes(32);
  r.send(ts::Req(ts::AUTH).raw(cn.data(), cn.size()).b);
  const Bytes sn = r.recv(32);  // the store's nonce, and nothing computed from the secret
  a.handshake = sn.size() == 32;
  if (!a.handshake) return a;
  const wsync::Mac proof =
      wsync::Hmac(kWrongSecret).field(std::string("wsync-store-client")).field(cn).field(sn).finish();
  Bytes both = ts::Req(ts::AUTH).raw(proof.data(), proof.size()).b;
  both.insert(both.end(), request.begin(), request.end());
  r.send(both);
  Bytes got;
  a.closed = r.closed_by_peer(3000, &got);
  a.bytes_back = got.size() == 1 && got[0] == 1 ? 0 : got.size() + 1;  // only the verdict "refused" may come
  return a;
}

// The sender's warning about `a`: the store closed the connection from the attacker's address.
void expect_named(const std::string& log, const Attempt& a, const std::string& why) {
  const std::string peer = "closing connection from 127.0.0.1:" + std::to_string(a.port) + ": ";
  const size_t at = log.find(peer);
  ASSERT_NE(std::string::npos, at) << a << ": no warning names the peer in the sender's log:\n" << log;
  EXPECT_EQ(0u, log.compare(at + peer.size(), why.size(), why)) << a << ": " << log.substr(at, 300);
}

Bytes cat(const std::string& s) { return ts::B(s); }
Bytes cat(const Bytes& a, const Bytes& b) {
  Bytes out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// A thread that runs fn(stop) until the scope ends (also when an ASSERT leaves it early).
struct Background {
  std::atomic<bool> stop{false};
  std::thread thread;
  explicit Background(const std::function<void(const std::atomic<bool>&)>& fn) : thread([this, fn] { fn(stop); }) {}
  ~Background() {
    stop = true;
    thread.join();
  }
};

// ---- Finding 1 -----------------------------------------------------------------------------

// What the attack run wrote where a worker address belongs: random bytes, and "WSXA" records
// (the current framing, a tag base) around garbage and around a truncated address.
std::vector<Bytes> forged_address_records() {
  Bytes header = cat(cat("WSXA"), Bytes(8, 0));
  Bytes random = wsync::random_bytes(300);
  random[0] = 0x00;
  return {random, cat(header, wsync::random_bytes(240)), cat(header, Bytes{0x01, 0x02, 0x03})};
}

TEST(Attacks, Finding1_ForgedUcxAddressesAreRefusedAndTheGroupSyncs) {
  GroupPlan gp = plan("attacks-f1", 2, 1 << 20, 64 * 1024);
  gp.receivers_wait_for_go = true;
  Group g(gp);
  ASSERT_NO_FATAL_FAILURE(g.find_store());
  const std::string group = gp.group;
  const std::vector<Bytes> forged = forged_address_records();
  std::vector<std::string> keys;
  for (uint32_t r = 0; r <= 2; ++r) keys.push_back(ucx_addr_key(group, r));

  // Before any receiver joins: every way to write a key, from a peer without the secret.
  std::vector<Attempt> tries;
  for (size_t k = 0; k < keys.size(); ++k) {
    const std::string wk = "/" + keys[k];
    const Bytes& v = forged[k % forged.size()];
    tries.push_back(outsider(g.store_port, "SET " + wk, ts::Req(ts::SET).str(wk).str(ts::S(v)).b));
    tries.push_back(
        outsider(g.store_port, "COMPARE_SET " + wk, ts::Req(ts::COMPARE_SET).str(wk).str("").str(ts::S(v)).b));
    tries.push_back(outsider(g.store_port, "MULTI_SET " + wk, ts::Req(ts::MULTI_SET).u64(1).str(wk).str(ts::S(v)).b));
    tries.push_back(outsider(g.store_port, "APPEND " + wk, ts::Req(ts::APPEND).str(wk).str(ts::S(v)).b));
    tries.push_back(wrong_secret(g.store_port, "SET " + wk, ts::Req(ts::SET).str(wk).str(ts::S(forged[1])).b));
  }
  for (const auto& a : tries) EXPECT_TRUE(a.refused()) << a;

  // wsync's own client with a wrong secret is refused at connect, naming the store.
  std::unique_ptr<wsync::TcpStoreClient> wrong;
  EXPECT_EQ(WSYNC_ERR_REJECTED, wsync::TcpStoreClient::connect("127.0.0.1", g.store_port, 5000, kWrongSecret, &wrong));
  EXPECT_NE(std::string::npos,
            wsync::last_error().find("the store at " + g.addr + " refused this process's group secret"))
      << wsync::last_error();
  EXPECT_EQ(nullptr, wrong);
  // ... and without one its first write is its last: the store hangs up, the next request fails.
  std::unique_ptr<wsync::TcpStoreClient> none;
  ASSERT_EQ(WSYNC_OK, wsync::TcpStoreClient::connect("127.0.0.1", g.store_port, 5000, &none)) << wsync::last_error();
  none->set(keys[1], forged[1].data(), forged[1].size());
  int64_t n = 0;
  const wsync_status_t st = none->add("wsync/" + group + "/probe", 1, &n);
  EXPECT_TRUE(st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_IO)
      << wsync_status_name(st) << ": " << wsync::last_error();
  EXPECT_NE(std::string::npos, wsync::last_error().find(g.addr)) << wsync::last_error();

  auto m = member(g.store_port);
  ASSERT_TRUE(m);
  for (const auto& k : keys) EXPECT_FALSE(has_key(*m, k)) << k << " exists before its member published it";

  // Receivers join and the group inits while the attacker keeps writing forged records.
  std::vector<Attempt> during;
  {
    Background attacker([&](const std::atomic<bool>& stop) {
      for (size_t i = 0; !stop.load(); ++i) {
        const std::string wk = "/" + keys[i % keys.size()];
        during.push_back(
            outsider(g.store_port, "SET " + wk, ts::Req(ts::SET).str(wk).str(ts::S(forged[i % forged.size()])).b));
        usleep(20000);
      }
    });
    touch(gp.file("go"));
    ASSERT_NO_FATAL_FAILURE(g.wait_inited());
  }
  EXPECT_GE(during.size(), 1u);
  for (const auto& a : during) EXPECT_TRUE(a.refused()) << a;
  // The genuine records stand: framed, a real address behind the header, none of the forgeries.
  for (const auto& k : keys) {
    const Bytes rec = value_of(*m, k);
    EXPECT_GT(rec.size(), 12u + 32u) << k;
    EXPECT_EQ("WSXA", ts::S(Bytes(rec.begin(), rec.begin() + std::min<size_t>(4, rec.size())))) << k;
    for (const auto& f : forged) EXPECT_NE(f, rec) << k << " holds a forged record";
  }
  g.finish();

  // The sender's log names the attacker (the store names the first 20 connections it closes in a
  // second and counts the rest, so only the first attempts are looked up).
  const std::string log = g.sender_log();
  expect_named(log, tries[0], "it sent SET without proving the group secret");
  expect_named(log, tries[1], "it sent COMPARE_SET without proving the group secret");
  expect_named(log, tries[4], "it failed the group-secret proof");
}

// ---- Finding 3 -----------------------------------------------------------------------------

// A listening socket on 127.0.0.1 that nothing should ever reach; accept() never blocks.
struct RogueListener {
  int fd = -1;
  uint16_t port = 0;
  RogueListener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 16) == 0) port = local_port(fd);
  }
  bool reached() {
    int c = ::accept(fd, nullptr, nullptr);
    if (c >= 0) ::close(c);
    return c >= 0;
  }
  ~RogueListener() { ::close(fd); }
};

TEST(Attacks, Finding3_GroupInfoAndTransportOptionsCannotBeRewrittenWithoutTheSecret) {
  GroupPlan gp = plan("attacks-f3", 1, 256 * 1024, 64 * 1024);
  gp.receivers_wait_for_go = true;
  gp.receiver_log_level = WSYNC_LOG_DEBUG;  // the UCX plugin names the error mode it applied
  gp.options = {{"transport.error_mode", "peer"}};
  Group g(gp);
  ASSERT_NO_FATAL_FAILURE(g.find_store());
  RogueListener rogue;
  ASSERT_NE(0, rogue.port);
  auto m = member(g.store_port);
  ASSERT_TRUE(m);
  const Bytes original = value_of(*m, wsync::kGroupInfoKey);
  wsync::GroupInfo info;
  ASSERT_EQ(WSYNC_OK, wsync::decode_group_info(original, &info));
  wsync::GroupInfo evil = info;
  evil.control_port = rogue.port;
  evil.transport_options = {{"error_mode", "none"}};
  const std::string forged = ts::S(wsync::encode_group_info(evil));
  // Decoding keeps the last of a key given twice: an append would have redirected receivers.
  const std::string appended = "control_port=" + std::to_string(rogue.port) + "\ntransport.error_mode=none\n";
  const std::string wk = std::string("/") + wsync::kGroupInfoKey;
  const std::string option_key = "/wsync/" + gp.group + "/transport.error_mode";

  std::vector<Attempt> tries = {
      outsider(g.store_port, "SET group_info", ts::Req(ts::SET).str(wk).str(forged).b),
      outsider(g.store_port, "COMPARE_SET group_info",
               ts::Req(ts::COMPARE_SET).str(wk).str(ts::S(original)).str(forged).b),
      outsider(g.store_port, "DELETE_KEY group_info", ts::Req(ts::DELETE_KEY).str(wk).b),
      outsider(g.store_port, "APPEND group_info", ts::Req(ts::APPEND).str(wk).str(appended).b),
      outsider(g.store_port, "MULTI_SET group_info", ts::Req(ts::MULTI_SET).u64(1).str(wk).str(forged).b),
      outsider(g.store_port, "SET a transport option key", ts::Req(ts::SET).str(option_key).str("none").b),
      wrong_secret(g.store_port, "SET group_info", ts::Req(ts::SET).str(wk).str(forged).b),
  };
  for (const auto& a : tries) EXPECT_TRUE(a.refused()) << a;
  EXPECT_EQ(original, value_of(*m, wsync::kGroupInfoKey)) << "group_info was rewritten";
  EXPECT_FALSE(has_key(*m, option_key.substr(1)));

  touch(gp.file("go"));
  g.wait_inited();
  g.finish();
  EXPECT_FALSE(rogue.reached()) << "a receiver connected to the rogue control port";
  const std::string rx_log = slurp(gp.file("rank1.log"));
  EXPECT_NE(std::string::npos, rx_log.find("(error mode peer)")) << rx_log;
  EXPECT_EQ(std::string::npos, rx_log.find("(error mode none)")) << rx_log;
  const std::string log = g.sender_log();
  expect_named(log, tries[0], "it sent SET without proving the group secret");
  expect_named(log, tries[2], "it sent DELETE_KEY without proving the group secret");
  expect_named(log, tries[3], "it sent APPEND without proving the group secret");
  expect_named(log, tries[6], "it failed the group-secret proof");
}

// What a receiver process saw at init, written for the test: status, then the message.
int record_join(const std::string& addr_file, const std::string& group, const std::string& out) {
  const std::string addr = read_addr_file(addr_file, 20000);
  wsync_receiver_t* rx = nullptr;
  const wsync_status_t st = join(addr, 1, group.c_str(), 10000, &rx);
  std::ofstream(out) << wsync_status_name(st) << "\n" << wsync_last_error() << "\n" << addr;
  if (rx) wsync_receiver_destroy(rx);
  return 0;
}

// A rogue trainer (a real wsync sender with another secret) hosts its own store and group under
// the victim's group name; a receiver holding the real secret, pointed at the rogue's store, is
// refused before it reads anything (it never joins, so it cannot commit the rogue's weights).
TEST(Attacks, Finding3_ARogueSendersStoreIsRefusedByAReceiverWithTheRealSecret) {
  GroupPlan rogue = plan("attacks-f3-rogue", 1, 0, 0);
  rogue.options = {{"secret", "the-rogue-trainers-own-secret-0123"}};
  const std::string result = rogue.file("victim");
  Children kids;
  const pid_t sender = kids.spawn([&] { return run_sender(rogue, 20000); });
  const pid_t victim = kids.spawn([&] { return record_join(rogue.addr_file(), rogue.group, result); });
  EXPECT_EQ(0, kids.wait(victim, 30000));
  std::istringstream in(slurp(result));
  std::string status, message, addr;
  std::getline(in, status);
  std::getline(in, message);
  std::getline(in, addr);
  EXPECT_EQ("WSYNC_ERR_REJECTED", status) << message;
  EXPECT_NE(std::string::npos, message.find("the store at " + addr)) << message;
  EXPECT_NE(std::string::npos, message.find("refused this process's group secret")) << message;
  // The rogue's store checked the victim's proof against its own secret and refused it.
  std::string rogue_log;
  for (int i = 0; i < 500 && rogue_log.find("failed the group-secret proof") == std::string::npos; ++i, usleep(10000))
    rogue_log = slurp(rogue.file("sender.log"));
  EXPECT_NE(std::string::npos, rogue_log.find("failed the group-secret proof")) << rogue_log;
  kids.wait(sender, 0);  // the rogue would wait for a receiver until its timeout
  if (!HasFailure()) std::filesystem::remove_all(rogue.dir);
}

// Exactly n bytes from fd within the deadline, or fewer.
Bytes read_n(int fd, size_t n, int timeout_ms = 5000) {
  Bytes out;
  char buf[4096];
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < n) {
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, left) <= 0) break;
    const ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
    if (r <= 0) break;
    out.insert(out.end(), buf, buf + r);
  }
  return out;
}

bool relay(int from, int to, size_t n) {
  const Bytes b = read_n(from, n);
  return b.size() == n && ::send(to, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

uint64_t u64_of(const Bytes& b) {
  uint64_t v = 0;
  if (b.size() == 8) std::memcpy(&v, b.data(), 8);
  return v;
}

// One store request read from a wsync client: its query byte, and its keys (WAIT: a count, then
// keys; GET: one key).
bool read_request(int fd, uint8_t* type) {
  const Bytes t = read_n(fd, 1);
  if (t.size() != 1) return false;
  *type = t[0];
  uint64_t keys = 1;
  if (*type == ts::WAIT) keys = u64_of(read_n(fd, 8));
  for (uint64_t i = 0; i < keys && i < 16; ++i)
    if (read_n(fd, u64_of(read_n(fd, 8))).empty()) return false;
  return true;
}

// The rogue the victim was pointed at (a wrong store address) relays the store's login to the
// real store, so the victim's mutual AUTH succeeds, then answers the victim's read of group_info
// itself with a forgery pointing at its own control port, where it plays the sender without the
// secret. The WELCOME proof stops it: WSYNC_ERR_REJECTED naming the failed proof and the port.
// The real group then syncs with the real receiver.
TEST(Attacks, Finding3_AStoreRelayServingAForgedGroupInfoIsCaughtByTheSendersProof) {
  GroupPlan gp = plan("attacks-f3-relay", 1, 256 * 1024, 64 * 1024);
  gp.receivers_wait_for_go = true;
  const std::string rogue_addr_file = gp.file("rogue-store"), result = gp.file("victim");
  Group g(gp);
  const pid_t victim = g.kids.spawn([&] { return record_join(rogue_addr_file, gp.group, result); });
  ASSERT_NO_FATAL_FAILURE(g.find_store());

  wsync::ControlListener store_relay, control;
  ASSERT_EQ(WSYNC_OK, store_relay.listen("127.0.0.1", 0));
  ASSERT_EQ(WSYNC_OK, control.listen("127.0.0.1", 0));
  std::ofstream(rogue_addr_file) << "127.0.0.1:" << store_relay.port() << "\n";
  int accepted = -1;
  ASSERT_EQ(WSYNC_OK, store_relay.accept(10000, &accepted)) << "the victim never came";
  wsync::ControlConn victim_store;  // owns the socket
  victim_store.adopt(accepted);
  const int v = victim_store.fd();
  ts::Raw up(g.store_port, /*handshake=*/false);
  ASSERT_TRUE(up.ok());
  // VALIDATE + PING (10 bytes) -> echo (4); AUTH + nonce (33) -> nonce (32); AUTH + proof (33)
  // -> verdict + the store's proof (33): the real store and the victim prove the secret to each
  // other.
  ASSERT_TRUE(relay(v, up.fd(), 10) && relay(up.fd(), v, 4));
  ASSERT_TRUE(relay(v, up.fd(), 33) && relay(up.fd(), v, 32));
  ASSERT_TRUE(relay(v, up.fd(), 33) && relay(up.fd(), v, 33));
  wsync::GroupInfo evil;
  evil.protocol = wsync::kControlProtocolVersion;
  evil.group_name = gp.group;
  evil.world_size = 2;
  evil.transport = "ucx";
  evil.control_host = "127.0.0.1";
  evil.control_port = control.port();
  const Bytes forged = wsync::encode_group_info(evil);
  uint8_t type = 0;
  ASSERT_TRUE(read_request(v, &type));
  ASSERT_EQ(ts::WAIT, type);
  const uint8_t stop_waiting = 0;
  ::send(v, &stop_waiting, 1, MSG_NOSIGNAL);
  ASSERT_TRUE(read_request(v, &type));
  ASSERT_EQ(ts::GET, type);
  wsync::ByteWriter reply;  // GET's answer: a u64 length, then the value
  reply.blob64(forged.data(), forged.size());
  ::send(v, reply.data().data(), reply.data().size(), MSG_NOSIGNAL);

  int c = -1;
  ASSERT_EQ(WSYNC_OK, control.accept(10000, &c)) << "the victim did not come to the rogue control port";
  wsync::ControlConn conn;
  conn.adopt(c);
  ASSERT_EQ(
      WSYNC_OK,
      conn.send(wsync::MsgType::kChallenge,
                wsync::encode_challenge({wsync::kControlProtocolVersion, wsync::random_bytes(wsync::kNonceBytes)}),
                1000));
  wsync::Frame hello;
  ASSERT_EQ(WSYNC_OK, conn.recv(&hello, 10000)) << wsync::last_error();
  ASSERT_EQ(static_cast<uint16_t>(wsync::MsgType::kHello), hello.type);
  ASSERT_EQ(WSYNC_OK, conn.send(wsync::MsgType::kWelcome,
                                wsync::encode_welcome({2, wsync::random_bytes(wsync::kMacBytes)}), 1000));
  EXPECT_EQ(0, g.kids.wait(victim, 20000));
  std::istringstream in(slurp(result));
  std::string status, message;
  std::getline(in, status);
  std::getline(in, message);
  EXPECT_EQ("WSYNC_ERR_REJECTED", status) << message;
  EXPECT_NE(std::string::npos, message.find("the process at the sender's control port (127.0.0.1:" +
                                            std::to_string(control.port()) + ") did not prove the group secret"))
      << message;

  touch(gp.file("go"));
  g.wait_inited();
  g.finish();
}

// ---- Finding 4 -----------------------------------------------------------------------------

// Against a group that is up (every member joined, every key written): an outsider reads, lists,
// counts, waits for, deletes, adds to, barriers on and writes nothing, and its HELLO gets no
// WELCOME. The store's keys are exactly what they were, and the group syncs.
TEST(Attacks, Finding4_AnOutsiderReadsAndChangesNothingInARunningGroup) {
  GroupPlan gp = plan("attacks-f4", 1, 256 * 1024, 64 * 1024);
  Group g(gp);
  ASSERT_NO_FATAL_FAILURE(g.find_store());
  ASSERT_NO_FATAL_FAILURE(g.wait_inited());
  auto m = member(g.store_port);
  ASSERT_TRUE(m);
  const std::map<std::string, Bytes> before = everything(*m);
  const std::string info = std::string("/") + wsync::kGroupInfoKey;
  const std::string rx_addr = "/" + ucx_addr_key(gp.group, 1), tx_addr = "/" + ucx_addr_key(gp.group, 0);
  ASSERT_TRUE(before.count(info) && before.count(rx_addr) && before.count(tx_addr)) << before.size() << " keys";

  const std::vector<std::pair<std::string, Bytes>> queries = {
      {"LIST", ts::Req(ts::LIST).b},
      {"GETNUMKEYS", ts::Req(ts::GETNUMKEYS).b},
      {"GET", ts::Req(ts::GET).str(info).b},
      {"GET", ts::Req(ts::GET).str(rx_addr).b},
      {"MULTI_GET", ts::Req(ts::MULTI_GET).u64(2).str(info).str(tx_addr).b},
      {"CHECK", ts::Req(ts::CHECK).u64(1).str(rx_addr).b},
      {"WAIT", ts::Req(ts::WAIT).u64(1).str(tx_addr).b},
      {"QUEUE_POP", ts::Req(ts::QUEUE_POP).str(info).b},
      {"DELETE_KEY", ts::Req(ts::DELETE_KEY).str(rx_addr).b},
      {"ADD", ts::Req(ts::ADD).str("/wsync/" + gp.group + "/joined").u64(1).b},
      {"BARRIER", ts::Req(ts::BARRIER).str(info).u64(1).b},
      {"SET", ts::Req(ts::SET).str("/wsync/" + gp.group + "/transport.error_mode").str("none").b},
  };
  std::vector<Attempt> tries;
  for (const auto& q : queries) tries.push_back(outsider(g.store_port, q.first, q.second));
  for (const auto& a : tries) EXPECT_TRUE(a.refused()) << a;

  // The control port (an outsider would scan for it): once every rank has joined the sender takes
  // no more connections; it keeps the port bound (nobody else may take it), and a HELLO with a
  // made-up proof gets no WELCOME, nor anything else.
  wsync::GroupInfo gi;
  ASSERT_EQ(WSYNC_OK, wsync::decode_group_info(before.at(info), &gi));
  wsync::ControlConn conn;
  ASSERT_EQ(WSYNC_OK, wsync::ControlConn::connect("127.0.0.1", gi.control_port, 2000, &conn))
      << "the control port was released while group_info still announces it: " << wsync::last_error();
  {
    wsync::HelloBody hello;
    hello.protocol = wsync::kControlProtocolVersion;
    hello.rank = 1;
    hello.pid = static_cast<uint32_t>(getpid());
    hello.group = gp.group;
    hello.nonce = wsync::random_bytes(wsync::kNonceBytes);
    hello.proof = wsync::random_bytes(wsync::kMacBytes);
    conn.send(wsync::MsgType::kHello, wsync::encode_hello(hello), 1000);
    wsync::Frame f;
    EXPECT_EQ(WSYNC_ERR_TIMEOUT, conn.recv(&f, 1000)) << "a late connection got frame type " << f.type;
  }

  EXPECT_EQ(before, everything(*m)) << "the store's keys changed";
  g.finish();
  const std::string log = g.sender_log();
  for (size_t i = 0; i < tries.size(); ++i)
    expect_named(log, tries[i], "it sent " + queries[i].first + " without proving the group secret");
}

struct Listening {
  std::string addr;  // "ip:port"
  bool loopback = false;
};

// The TCP sockets in LISTEN state that process `pid` holds: /proc/<pid>/net/tcp{,6} (the network
// namespace's table) matched against the socket inodes of /proc/<pid>/fd.
std::vector<Listening> listening_sockets(pid_t pid) {
  std::set<std::string> inodes;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = opendir(fd_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      char target[256];
      const ssize_t n = readlink((fd_dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (std::strncmp(target, "socket:[", 8) == 0) inodes.insert(std::string(target + 8, std::strlen(target) - 9));
    }
    closedir(d);
  }
  std::vector<Listening> out;
  for (const char* table : {"tcp", "tcp6"}) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/net/" + table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream s(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      s >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A" || !inodes.count(inode)) continue;  // 0A: TCP_LISTEN
      const std::string hex = local.substr(0, local.find(':'));
      const unsigned port = std::stoul(local.substr(local.find(':') + 1), nullptr, 16);
      unsigned char ip[16] = {};
      for (size_t w = 0; w < hex.size() / 8; ++w) {  // 32-bit words in host (little-endian) order
        const uint32_t word = static_cast<uint32_t>(std::stoul(hex.substr(8 * w, 8), nullptr, 16));
        std::memcpy(ip + 4 * w, &word, 4);
      }
      char text[INET6_ADDRSTRLEN] = {};
      Listening l;
      if (hex.size() == 8) {
        inet_ntop(AF_INET, ip, text, sizeof text);
        l.loopback = ip[0] == 127;
      } else {
        inet_ntop(AF_INET6, ip, text, sizeof text);
        static const unsigned char kV6Loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        static const unsigned char kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
        l.loopback = std::memcmp(ip, kV6Loopback, 16) == 0 || (std::memcmp(ip, kV4Mapped, 12) == 0 && ip[12] == 127);
      }
      l.addr = std::string(text) + ":" + std::to_string(port);
      out.push_back(l);
    }
  }
  return out;
}

// An interface other than loopback that is up and has an address: somewhere UCX could listen.
std::string other_interface() {
  ifaddrs* ifs = nullptr;
  std::string name;
  if (getifaddrs(&ifs) != 0) return name;
  for (ifaddrs* i = ifs; i != nullptr && name.empty(); i = i->ifa_next)
    if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6) &&
        (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK))
      name = i->ifa_name;
  freeifaddrs(ifs);
  return name;
}

void expect_listening_only_on_loopback(const char* tls) {
  const std::string other = other_interface();
  if (other.empty()) GTEST_SKIP() << "no interface but loopback: nothing UCX could wrongly listen on";
  GroupPlan gp = plan(std::string("attacks-f4-listen-") + (tls ? tls : "default"), 1, 256 * 1024, 64 * 1024);
  if (tls) gp.env = {{"UCX_TLS", tls}};
  Group g(gp);
  ASSERT_NO_FATAL_FAILURE(g.find_store());
  ASSERT_NO_FATAL_FAILURE(g.wait_inited());
  ASSERT_TRUE(wait_for_file(gp.file("rank1.joined"), 20000)) << slurp(gp.file("rank1.log"));
  const std::vector<Listening> tx = listening_sockets(g.sender), rx = listening_sockets(g.receivers[0]);
  // The store and the control port at least: the inspection sees the sockets it is meant to see.
  EXPECT_GE(tx.size(), 2u);
  // With UCX_TLS=tcp UCX's TCP transport must be up and listening in both (else nothing was tested).
  if (tls) {
    EXPECT_GE(tx.size(), 3u);
    EXPECT_GE(rx.size(), 1u);
  }
  std::string seen;
  for (const auto& l : tx) seen += " sender:" + l.addr;
  for (const auto& l : rx) seen += " receiver:" + l.addr;
  std::fprintf(stderr, "listening (UCX_TLS=%s, other interface %s):%s\n", tls ? tls : "default", other.c_str(),
               seen.c_str());
  for (const auto& l : tx) EXPECT_TRUE(l.loopback) << "the sender listens on " << l.addr;
  for (const auto& l : rx) EXPECT_TRUE(l.loopback) << "the receiver listens on " << l.addr;
  g.finish();
}

TEST(Attacks, Finding4_TheGroupListensOnlyOnLoopback) { expect_listening_only_on_loopback(nullptr); }

TEST(Attacks, Finding4_TheGroupListensOnlyOnLoopbackWithUcxOverTcp) { expect_listening_only_on_loopback("tcp"); }

// ---- Finding 2 ------------------------------------------------------------------------------

// The attacker's UCX: a context of its own (transports `tls`, or UCX's default), a worker and an
// endpoint to the receiver's worker in error mode `mode`. It is never closed: the attacker's
// process exits without it, so UCX's complaints about sends that never completed (the point of
// the attack) stay out of the test's output.
struct RogueUcx {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
  std::vector<void*> requests;

  static void on_error(void*, ucp_ep_h, ucs_status_t) {}
  bool connect(const uint8_t* address, const char* tls, ucp_err_handling_mode_t mode) {
    ucp_config_t* config = nullptr;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return false;
    if (tls) ucp_config_modify(config, "TLS", tls);
    ucp_params_t cp{};
    cp.field_mask = UCP_PARAM_FIELD_FEATURES;
    cp.features = UCP_FEATURE_TAG;
    const ucs_status_t st = ucp_init(&cp, config, &context);
    ucp_config_release(config);
    if (st != UCS_OK) return false;
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucp_worker_create(context, &wp, &worker) != UCS_OK) return false;
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(address);
    ep_params.err_mode = mode;
    if (mode == UCP_ERR_HANDLING_MODE_PEER) {
      ep_params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep_params.err_handler.cb = on_error;
    }
    return ucp_ep_create(worker, &ep_params, &ep) == UCS_OK;
  }
  void send(const std::vector<uint8_t>& buf, size_t len, ucp_tag_t tag) {
    ucp_request_param_t p{};
    void* req = ucp_tag_send_nbx(ep, buf.data(), len, tag, &p);
    requests.push_back(UCS_PTR_IS_PTR(req) ? req : nullptr);
  }
};

// The attacker's process. It reads the receiver's worker address from the store with the secret:
// a stand-in for an attacker who learned it some other way (a sniffer, an old release's open
// store); the tag base beside it is what the attacker lacks. Over two endpoints (shared memory in
// UCX's default error mode, and TCP in error mode peer as the sender connects; those this UCX can
// open) it sends under every tag of the old scheme (0..N, with and without common high bits) and
// random tags, a bucket's worth of the marker each, plus short (eager) ones under 0..N; writes
// "injected" (counts), and keeps its worker progressing until the test writes "stop" (a matched
// rendezvous would pull its bytes then).
int run_injector(const GroupPlan& p, uint64_t bucket_bytes, uint64_t buckets) {
  if (!wait_for_file(p.file("sender.inited"), 30000)) return 2;
  const std::string addr = read_addr_file(p.addr_file(), 1000);
  std::string host;
  uint16_t port = 0;
  std::unique_ptr<wsync::TcpStoreClient> c;
  std::vector<uint8_t> record;
  if (wsync::parse_host_port(addr, &host, &port) != WSYNC_OK ||
      wsync::TcpStoreClient::connect(host, port, 5000, secret(), &c) != WSYNC_OK ||
      c->get(ucx_addr_key(p.group, 1), &record, 5000) != WSYNC_OK || record.size() <= 12)
    return 3;
  std::vector<uint64_t> tags;
  for (uint64_t high : {0ull, 1ull << 32, 1ull << 48, 1ull << 56, 1ull << 63, 0xFFFFFFFF00000000ull})
    for (uint64_t seq = 0; seq < buckets; ++seq) tags.push_back(high | seq);
  for (int i = 0; i < 64; ++i) {
    uint64_t t = 0;
    const Bytes r = wsync::random_bytes(8);
    std::memcpy(&t, r.data(), 8);
    tags.push_back(t);
  }
  std::vector<uint8_t> marker(bucket_bytes);
  for (size_t i = 0; i < marker.size(); ++i) marker[i] = static_cast<uint8_t>(kMarker[i % kMarkerLen]);
  std::vector<RogueUcx*> rogues;
  for (const bool shm : {true, false}) {
    RogueUcx* r = new RogueUcx;
    if (r->connect(record.data() + 12, shm ? "sm,self" : nullptr,
                   shm ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER))
      rogues.push_back(r);
  }
  if (rogues.empty()) return 4;
  for (RogueUcx* r : rogues) {
    for (uint64_t t : tags) r->send(marker, marker.size(), t);
    for (uint64_t seq = 0; seq < buckets; ++seq) r->send(marker, 1024, seq);
  }
  auto progress = [&] {
    unsigned n = 0;
    for (RogueUcx* r : rogues) n += ucp_worker_progress(r->worker);
    if (n == 0) usleep(200);
  };
  for (auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
       std::chrono::steady_clock::now() < until;)
    progress();
  size_t sent = 0;
  for (RogueUcx* r : rogues) sent += r->requests.size();
  std::ofstream(p.file("injected.tmp")) << sent << " " << rogues.size();
  std::rename(p.file("injected.tmp").c_str(), p.file("injected").c_str());
  for (int i = 0; i < 600000 && access(p.file("stop").c_str(), F_OK) != 0; ++i) progress();
  return 0;
}

size_t count_lines_with(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

void inject_then_sync(uint64_t bucket_bytes, uint64_t big_bytes) {
  GroupPlan gp = plan("attacks-f2-" + std::to_string(bucket_bytes), 1, big_bytes, bucket_bytes);
  gp.receiver_output_to_file = true;
  gp.env = {{"UCX_LOG_LEVEL", "warn"}};  // the receiver's UCX reports what it still held when it closes
  uint64_t total = 0;
  for (const auto& t : gp.spec) total += t.nbytes;
  const uint64_t buckets = 2 * (total / bucket_bytes) + 16;  // more than the update can have
  Group g(gp);
  const pid_t injector = g.kids.spawn([&] { return run_injector(gp, bucket_bytes, buckets); });
  ASSERT_TRUE(wait_for_file(gp.file("injected"), 30000)) << "the attacker did not get its messages out";
  size_t sent = 0, endpoints = 0;
  std::istringstream(slurp(gp.file("injected"))) >> sent >> endpoints;
  std::fprintf(stderr, "injected %zu messages over %zu endpoint(s)\n", sent, endpoints);
  g.finish();
  touch(gp.file("stop"));
  EXPECT_EQ(0, g.kids.wait(injector, 10000));
  // The attack was real: the attacker's messages reached the receiver, matched none, and were
  // dropped as they arrived (ucx_foreign.c) rather than kept until its worker closed.
  const std::string rx_log = slurp(gp.file("rank1.log"));
  const size_t drops = count_lines_with(rx_log, "under tags no member of the group uses");
  const size_t unmatched = count_lines_with(slurp(gp.file("rank1.out")), "was not matched");
  std::fprintf(stderr, "the receiver logged %zu drop line(s); its UCX closed with %zu unmatched messages\n", drops,
               unmatched);
  EXPECT_GT(drops, 0u) << "no injected message reached the receiver: the test attacked nothing\n" << rx_log;
}

TEST(Attacks, Finding2_GuessedTagsNeverReachASmallBucket) { inject_then_sync(64 * 1024, 2 << 20); }

TEST(Attacks, Finding2_GuessedTagsNeverReachALargeBucket) { inject_then_sync(1 << 20, 6 << 20); }

}  // namespace
