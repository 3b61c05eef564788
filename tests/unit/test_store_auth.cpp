// The store's group secret: wsync's AUTH (a mutual HMAC challenge-response), the access rules for
// connections without the secret (none by default; torch's keys only in torch mode), and the
// attacks of the review played against the default configuration: a peer without the secret must
// read nothing, write nothing, see no key, and leave a warning naming it.
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/auth.h"
#include "common/error.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "../common/store_test_client.h"

using wsync::StoreServerOptions;
using wsync::TcpStoreClient;
using wsync::TcpStoreServer;
using namespace wsync::test_store;
namespace ts = wsync::test_store;

namespace {

const std::string kSecret = "correct horse battery staple";
// What a group keeps in the store (control/group_info.h's key, a plugin's key): the model's
// whereabouts. The value stands for it.
const std::string kInfoKey = "wsync/group_info";
const std::string kNcclKey = "wsync/g0/nccl/unique_id";
const std::string kModel = std::string("weights at 10.0.0.7:4411, token ") + std::string(200, 'M');

std::string mac_of(const std::string& secret, const char* label, const Bytes& cn, const Bytes& sn) {
  wsync::Mac m = wsync::Hmac(secret).field(std::string(label)).field(cn).field(sn).finish();
  return std::string(m.begin(), m.end());
}

// Plays wsync's AUTH by hand on a validated raw connection: the verdict byte (0xFF: none).
// *server_ok tells whether the server's proof, which follows an accepted verdict, matched `secret`.
uint8_t raw_login(Raw& r, const std::string& secret, bool* server_ok = nullptr, Bytes* proof_sent = nullptr) {
  Bytes cn = wsync::random_bytes(32);
  r.send(Req(AUTH).raw(cn.data(), cn.size()).b);
  Bytes sn = r.recv(32);
  if (sn.size() != 32) return 0xFF;
  std::string proof = mac_of(secret, "wsync-store-client", cn, sn);
  if (proof_sent) *proof_sent = B(proof);
  r.send(Req(AUTH).raw(proof.data(), proof.size()).b);
  const uint8_t verdict = r.u8();
  if (verdict == 0) {  // the store's proof follows
    Bytes theirs = r.recv(32);
    if (server_ok) *server_ok = mac_of(secret, "wsync-store-server", cn, sn) == std::string(theirs.begin(), theirs.end());
  }
  return verdict;
}

class StoreAuthTest : public ::testing::Test {
 protected:
  void start(bool torch_clients = false) {
    StoreServerOptions o;
    o.secret = kSecret;
    o.torch_clients = torch_clients;
    ASSERT_EQ(TcpStoreServer::start("127.0.0.1", 0, o, &server_), WSYNC_OK) << wsync::last_error();
    port_ = server_->port();
    member_ = member();
    ASSERT_TRUE(member_);
    ASSERT_EQ(member_->set(kInfoKey, kModel.data(), kModel.size()), WSYNC_OK);
    ASSERT_EQ(member_->set(kNcclKey, "nccl-id-128-bytes", 17), WSYNC_OK);
  }
  void SetUp() override { start(); }
  std::unique_ptr<TcpStoreClient> member(const std::string& secret = kSecret) {
    std::unique_ptr<TcpStoreClient> c;
    EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", port_, 2000, secret, &c), WSYNC_OK) << wsync::last_error();
    return c;
  }
  // The group's keys are exactly as the member wrote them, and the store still serves members.
  void expect_intact() {
    auto m = member();
    ASSERT_TRUE(m);
    Bytes v;
    ASSERT_EQ(m->get(kInfoKey, &v, 1000), WSYNC_OK) << wsync::last_error();
    EXPECT_EQ(S(v), kModel);
    ASSERT_EQ(m->get(kNcclKey, &v, 1000), WSYNC_OK) << wsync::last_error();
    EXPECT_EQ(S(v), "nccl-id-128-bytes");
  }
  // Sends `bytes` on a fresh raw connection (VALIDATE + PING first, which are allowed) and
  // returns what came back before the server closed it; fails the test when it stays open.
  Bytes attack(const Bytes& bytes, const std::string& name) {
    Raw r(port_);
    r.send(Req(PING).u32(77).b);
    EXPECT_EQ(r.u32(), 77u) << name << ": PING is allowed before authenticating";
    r.send(bytes);
    Bytes got;
    EXPECT_TRUE(r.closed_by_peer(3000, &got)) << name << ": the connection stays open";
    return got;
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> member_;
  uint16_t port_ = 0;
};

// ---- the handshake ---------------------------------------------------------------------------

TEST_F(StoreAuthTest, MemberWithTheSecretCanDoEverything) {
  auto c = member();
  ASSERT_TRUE(c);
  Bytes v;
  ASSERT_EQ(c->get(kInfoKey, &v, 1000), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(S(v), kModel);
  int64_t n = 0;
  ASSERT_EQ(c->add("wsync/g0/joined", 1, &n), WSYNC_OK);
  EXPECT_EQ(n, 1);
  ASSERT_EQ(ts::num_keys(*c, &n), WSYNC_OK);
  EXPECT_EQ(n, 3);
  bool deleted = false;
  ASSERT_EQ(ts::delete_key(*c, "wsync/g0/joined", &deleted), WSYNC_OK);
  EXPECT_TRUE(deleted);
  EXPECT_EQ(server_->stats().handshaking, 0u);
}

TEST_F(StoreAuthTest, WrongSecretIsRefusedWithAClearMessageNamingBothSides) {
  LogCapture logs;
  std::unique_ptr<TcpStoreClient> c;
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", port_, 2000, "another group's secret", &c), WSYNC_ERR_REJECTED);
  EXPECT_FALSE(c);
  const std::string e = wsync::last_error();
  EXPECT_NE(e.find("the store at 127.0.0.1:" + std::to_string(port_) +
                   " refused this process's group secret (set the same secret as the sender: option secret or "
                   "WSYNC_GROUP_SECRET)"),
            std::string::npos)
      << e;
  // The server's warning names the peer (ip:port) and the reason.
  EXPECT_NE(logs.find({"closing connection from 127.0.0.1:", "failed the group-secret proof"}), "");
  expect_intact();
}

TEST_F(StoreAuthTest, AProofIsBoundToItsSessionAndItsSide) {
  // A correct login by hand: the server proves the secret, and accepts ours.
  Bytes proof;
  {
    Raw r(port_);
    bool server_ok = false;
    EXPECT_EQ(raw_login(r, kSecret, &server_ok, &proof), 0);
    EXPECT_TRUE(server_ok);
    r.send(Req(GET).str("/" + kInfoKey).b);  // and may now read wsync's keys
    EXPECT_EQ(S(r.payload()), kModel);
  }
  // Replaying that proof in a new session (new server nonce) is refused.
  {
    Raw r(port_);
    Bytes cn(32, 7);
    r.send(Req(AUTH).raw(cn.data(), cn.size()).b);
    Bytes sn = r.recv(32);
    ASSERT_EQ(sn.size(), 32u);
    r.send(Req(AUTH).raw(proof.data(), proof.size()).b);
    Bytes after;
    EXPECT_TRUE(r.closed_by_peer(3000, &after));
    EXPECT_EQ(Bytes{1}, after) << "only the verdict 'refused' may come back";
  }
  // Whoever merely reaches the store gets its nonce and nothing computed from the secret: no proof
  // to guess the secret from offline, nor to reflect back as the client's (the store proves the
  // secret only after the client did).
  {
    Raw r(port_);
    Bytes cn(32, 9);
    r.send(Req(AUTH).raw(cn.data(), cn.size()).b);
    Bytes sn = r.recv(32);
    ASSERT_EQ(sn.size(), 32u);
    EXPECT_TRUE(r.silent(300)) << "the store said more than its nonce before the client proved the secret";
    const std::string server_proof = mac_of(kSecret, "wsync-store-server", cn, sn);
    r.send(Req(AUTH).raw(server_proof.data(), server_proof.size()).b);  // a reflection of what it would say
    Bytes after;
    EXPECT_TRUE(r.closed_by_peer(3000, &after));
    EXPECT_EQ(Bytes{1}, after);
  }
  expect_intact();
}

// A fake store: torch's handshake, then an AUTH answer it cannot compute (random bytes), then it
// accepts whatever proof comes. The client must refuse it, and nothing it sent may contain the
// secret.
TEST(StoreAuth, ClientIsNotFooledByAStoreWithoutTheSecret) {
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof a;
  getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  const uint16_t port = ntohs(a.sin_port);
  Bytes heard;
  std::thread fake([&] {
    int fd = ::accept(lfd, nullptr, nullptr);
    auto read_n = [&](size_t n) {
      Bytes b(n);
      size_t off = 0;
      while (off < n) {
        ssize_t r = ::recv(fd, b.data() + off, n - off, 0);
        if (r <= 0) return Bytes();
        off += size_t(r);
      }
      heard.insert(heard.end(), b.begin(), b.end());
      return b;
    };
    Bytes hs = read_n(10);  // VALIDATE + magic, PING + nonce
    if (hs.size() == 10) ::send(fd, hs.data() + 6, 4, MSG_NOSIGNAL);
    read_n(33);  // AUTH + client nonce
    Bytes fake_nonce = wsync::random_bytes(32);
    ::send(fd, fake_nonce.data(), fake_nonce.size(), MSG_NOSIGNAL);
    read_n(33);  // AUTH + client proof
    Bytes accepted_and_fake_proof = wsync::random_bytes(33);
    accepted_and_fake_proof[0] = 0;  // "accepted", then a proof it cannot compute
    ::send(fd, accepted_and_fake_proof.data(), accepted_and_fake_proof.size(), MSG_NOSIGNAL);
    char sink[64];
    while (::recv(fd, sink, sizeof sink, 0) > 0) {
    }
    ::close(fd);
  });
  std::unique_ptr<TcpStoreClient> c;
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", port, 2000, kSecret, &c), WSYNC_ERR_REJECTED);
  EXPECT_FALSE(c);
  const std::string e = wsync::last_error();
  EXPECT_NE(e.find("the store at 127.0.0.1:" + std::to_string(port) + " does not know this group's secret"),
            std::string::npos)
      << e;
  fake.join();
  ::close(lfd);
  EXPECT_EQ(heard.size(), 10u + 33u + 33u);
  EXPECT_EQ(S(heard).find(kSecret), std::string::npos);  // the secret never went on the wire
}

TEST(StoreAuth, AStoreRunningWithoutASecretIsNotTrusted) {
  std::unique_ptr<TcpStoreServer> open_store;
  ASSERT_EQ(TcpStoreServer::start("127.0.0.1", 0, &open_store), WSYNC_OK);
  LogCapture logs;
  std::unique_ptr<TcpStoreClient> c;
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", open_store->port(), 2000, kSecret, &c), WSYNC_ERR_REJECTED);
  EXPECT_NE(wsync::last_error().find("does not know this group's secret"), std::string::npos) << wsync::last_error();
  EXPECT_NE(logs.find({"127.0.0.1:", "runs without a group secret"}), "");
}

// ---- a peer without the secret, default configuration ----------------------------------------

TEST_F(StoreAuthTest, RogueWithoutTheSecretReadsAndWritesNothing) {
  LogCapture logs;
  const std::string info = "/" + kInfoKey;
  struct Case {
    const char* name;
    Bytes bytes;
  } cases[] = {
      {"GET", Req(GET).str(info).b},
      {"SET", Req(SET).str(info).str("evil").b},
      {"SET of a key that is not wsync's", Req(SET).str("/free").str("x").b},
      {"LIST", Req(LIST).b},
      {"WAIT", Req(WAIT).u64(1).str(info).b},
      {"CHECK", Req(CHECK).u64(1).str(info).b},
      {"DELETE_KEY", Req(DELETE_KEY).str(info).b},
      {"COMPARE_SET", Req(COMPARE_SET).str(info).str(kModel).str("evil").b},
      {"ADD", Req(ADD).str("/wsync/g0/rank").u64(1).b},
      {"MULTI_GET", Req(MULTI_GET).u64(1).str(info).b},
      {"MULTI_SET", Req(MULTI_SET).u64(1).str(info).str("evil").b},
      {"APPEND", Req(APPEND).str(info).str("evil").b},
      {"GETNUMKEYS", Req(GETNUMKEYS).b},
      {"QUEUE_PUSH", Req(QUEUE_PUSH).str(info).str("evil").b},
      {"QUEUE_POP", Req(QUEUE_POP).str(info).b},
      {"BARRIER", Req(BARRIER).str(info).u64(1).b},
      {"a 64 MiB SET, announced", Req(SET).str("/big").u64(64ull << 20).b},
  };
  const uint64_t before = server_->memory_in_use();
  for (auto& cs : cases) {
    Bytes got = attack(cs.bytes, cs.name);
    EXPECT_TRUE(got.empty()) << cs.name << ": " << got.size() << " bytes came back";
  }
  EXPECT_LE(server_->memory_in_use(), before + 4096);
  EXPECT_NE(logs.find({"closing connection from 127.0.0.1:", "sent GET without proving the group secret"}), "");
  EXPECT_NE(logs.find({"sent LIST without proving the group secret"}), "");
  expect_intact();
  // Nothing was created either.
  int64_t n = 0;
  ASSERT_EQ(ts::num_keys(*member_, &n), WSYNC_OK);
  EXPECT_EQ(n, 2);
}

// A wsync process started without the secret (the option forgotten) connects (VALIDATE and PING
// are torch's handshake) but its first read is refused: the group's keys stay out of reach.
TEST_F(StoreAuthTest, WsyncClientWithoutTheSecretIsCutOffAtItsFirstRead) {
  LogCapture logs;
  std::unique_ptr<TcpStoreClient> c;
  ASSERT_EQ(TcpStoreClient::connect("127.0.0.1", port_, 2000, &c), WSYNC_OK) << wsync::last_error();
  Bytes v;
  wsync_status_t st = c->get(kInfoKey, &v, 1000);
  EXPECT_TRUE(st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_IO) << wsync_status_name(st);
  EXPECT_TRUE(v.empty());
  EXPECT_NE(logs.find({"127.0.0.1:", "sent WAIT without proving the group secret"}), "");
  expect_intact();
}

// ---- torch mode ------------------------------------------------------------------------------

class StoreTorchModeTest : public StoreAuthTest {
 protected:
  void SetUp() override { start(/*torch_clients=*/true); }
};

TEST_F(StoreTorchModeTest, TorchClientsUseTorchsKeysWithoutTheSecret) {
  Raw torch(port_);  // torch's TCPStore client: VALIDATE + PING, no AUTH
  torch.send(Req(PING).u32(4242).b);
  EXPECT_EQ(torch.u32(), 4242u);
  torch.send(Req(ADD).str("init/").u64(1).b);  // waitForWorkers
  EXPECT_EQ(torch.i64(), 1);
  torch.send(Req(SET).str("/default_pg/0").str("rank0-addr").b);
  torch.send(Req(WAIT).u64(1).str("/default_pg/0").b);
  EXPECT_EQ(torch.u8(), 0);
  torch.send(Req(GET).str("/default_pg/0").b);
  EXPECT_EQ(S(torch.payload()), "rank0-addr");
  torch.send(Req(COMPARE_SET).str("/default_pg/1").str("").str("x").b);
  EXPECT_EQ(S(torch.payload()), "x");
  torch.send(Req(CHECK).u64(2).str("/default_pg/0").str("/default_pg/1").b);
  EXPECT_EQ(torch.u8(), 0);
  torch.send(Req(MULTI_GET).u64(2).str("/default_pg/0").str("init/").b);
  EXPECT_EQ(S(torch.payload()), "rank0-addr");
  EXPECT_EQ(S(torch.payload()), "1");
  // LIST and GETNUMKEYS leave wsync's keys out.
  torch.send(Req(LIST).b);
  int64_t n = torch.i64();
  ASSERT_EQ(n, 3);
  std::set<std::string> listed;
  for (int64_t i = 0; i < n; ++i) listed.insert(S(torch.payload()));
  EXPECT_EQ(listed, (std::set<std::string>{"init/", "/default_pg/0", "/default_pg/1"}));
  torch.send(Req(GETNUMKEYS).b);
  EXPECT_EQ(torch.i64(), 3);
  torch.send(Req(DELETE_KEY).str("/default_pg/1").b);
  EXPECT_EQ(torch.i64(), 1);
  EXPECT_EQ(server_->stats().torch_clients, 1u);
  // A member sees everything.
  int64_t all = 0;
  ASSERT_EQ(ts::num_keys(*member_, &all), WSYNC_OK);
  EXPECT_EQ(all, 4);
  // The torch client, idle, is not closed as a handshake that never finished.
  EXPECT_EQ(server_->stats().handshaking, 0u);
}

TEST_F(StoreTorchModeTest, TorchClientsCannotTouchWsyncsKeys) {
  LogCapture logs;
  const std::string info = "/" + kInfoKey;
  struct Case {
    const char* name;
    Bytes bytes;
  } cases[] = {
      {"GET", Req(GET).str(info).b},
      {"SET", Req(SET).str(info).str("evil").b},
      {"WAIT", Req(WAIT).u64(1).str(info).b},
      {"CHECK", Req(CHECK).u64(1).str(info).b},
      {"DELETE_KEY", Req(DELETE_KEY).str(info).b},
      {"COMPARE_SET", Req(COMPARE_SET).str(info).str(kModel).str("evil").b},
      {"ADD", Req(ADD).str("/wsync/g0/rank").u64(1).b},
      {"MULTI_GET (a torch key, then wsync's)", Req(MULTI_GET).u64(2).str("init/").str(info).b},
      {"MULTI_SET", Req(MULTI_SET).u64(2).str("/ok").str("1").str(info).str("evil").b},
      {"APPEND", Req(APPEND).str(info).str("evil").b},
      {"QUEUE_PUSH", Req(QUEUE_PUSH).str(info).str("evil").b},
      {"QUEUE_POP", Req(QUEUE_POP).str(info).b},
      {"QUEUE_LEN", Req(QUEUE_LEN).str(info).b},
      {"BARRIER", Req(BARRIER).str(info).u64(1).b},
      // Refused at the key, before the value: the 64 MiB never has to be sent or held.
      {"SET of 64 MiB to a wsync key", Req(SET).str("/wsync/big").u64(64ull << 20).b},
  };
  const uint64_t before = server_->memory_in_use();
  for (auto& cs : cases) {
    Bytes got = attack(cs.bytes, cs.name);
    EXPECT_TRUE(got.empty()) << cs.name << ": " << got.size() << " bytes came back";
  }
  EXPECT_LE(server_->memory_in_use(), before + 4096);
  EXPECT_NE(logs.find({"closing connection from 127.0.0.1:", "sent GET on wsync's key '/wsync/group_info' without "
                                                             "proving the group secret"}),
            "");
  expect_intact();
  bool ready = true;  // MULTI_SET's first pair ("/ok") was not applied either: the request was refused whole
  ASSERT_EQ(ts::check(*member_, {"ok"}, &ready), WSYNC_OK);
  EXPECT_FALSE(ready);
}

TEST_F(StoreTorchModeTest, MembersStillAuthenticateAndSeeEverything) {
  auto m = member();
  ASSERT_TRUE(m);
  ASSERT_EQ(m->set("shared", "1", 1), WSYNC_OK);
  Raw torch(port_);
  torch.send(Req(LIST).b);
  ASSERT_EQ(torch.i64(), 1);
  EXPECT_EQ(S(torch.payload()), "/shared");
  Raw member_raw(port_);
  ASSERT_EQ(raw_login(member_raw, kSecret), 0);
  member_raw.send(Req(LIST).b);
  EXPECT_EQ(member_raw.i64(), 3);
  // A wrong secret is refused in torch mode too.
  std::unique_ptr<TcpStoreClient> bad;
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", port_, 2000, "wrong", &bad), WSYNC_ERR_REJECTED);
}

TEST(StoreAuth, OptionsOutOfRangeAreRefused) {
  StoreServerOptions o;
  o.secret = kSecret;
  o.max_unauthenticated = 0;
  std::unique_ptr<TcpStoreServer> s;
  EXPECT_EQ(TcpStoreServer::start("127.0.0.1", 0, o, &s), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(wsync::last_error().find("max_unauthenticated"), std::string::npos) << wsync::last_error();
  o.max_unauthenticated = 1;
  o.memory_quota = 100;
  EXPECT_EQ(TcpStoreServer::start("127.0.0.1", 0, o, &s), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(wsync::last_error().find("memory_quota"), std::string::npos) << wsync::last_error();
  EXPECT_FALSE(s);
}

}  // namespace
