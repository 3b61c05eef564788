// The rendezvous store: torch-TCPStore wire compatibility (hand-built bytes), the client, and
// robustness of the server against slow, malformed and old-protocol clients.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"
#include "store/host_port.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "../common/store_test_client.h"

using wsync::TcpStoreClient;
using wsync::TcpStoreServer;
namespace ts = wsync::test_store;

namespace {

using Bytes = std::vector<uint8_t>;
// The raw-socket helpers (hand-built bytes, literal query numbers) and the warning capture are
// shared with test_store_auth.cpp and test_store_limits.cpp.
using namespace wsync::test_store;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(TcpStoreServer::start("127.0.0.1", 0, &server_), WSYNC_OK) << wsync::last_error();
    port_ = server_->port();
  }
  std::unique_ptr<TcpStoreClient> client(int64_t timeout_ms = 2000) {
    std::unique_ptr<TcpStoreClient> c;
    EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", port_, timeout_ms, &c), WSYNC_OK) << wsync::last_error();
    return c;
  }
  // What the server holds under `wire_key` (exactly as sent on the wire), read through a raw
  // connection of its own: false when the key does not exist.
  bool stored(const std::string& wire_key, Bytes* v) {
    Raw r(port_);
    r.send(Req(CHECK).u64(1).str(wire_key).b);
    if (r.u8() != 0) return false;
    r.send(Req(GET).str(wire_key).b);
    Bytes got = r.payload();
    if (v != nullptr) *v = got;
    return true;
  }
  // The server still serves: a fresh client can round-trip a value.
  void expect_serving(const std::string& key) {
    auto c = client();
    ASSERT_TRUE(c);
    ASSERT_EQ(c->set(key, "alive", 5), WSYNC_OK);
    Bytes v;
    ASSERT_EQ(c->get(key, &v, 1000), WSYNC_OK) << wsync::last_error();
    EXPECT_EQ(S(v), "alive");
  }
  std::unique_ptr<TcpStoreServer> server_;
  uint16_t port_ = 0;
};

// ---- addresses -----------------------------------------------------------------------------

TEST(StoreHostPort, ParsesTheAcceptedForms) {
  std::string h;
  uint16_t p = 0;
  ASSERT_EQ(wsync::parse_host_port("10.0.0.1:29500", &h, &p), WSYNC_OK);
  EXPECT_EQ(h, "10.0.0.1");
  EXPECT_EQ(p, 29500);
  ASSERT_EQ(wsync::parse_host_port("tcp://trainer-0.svc:1234", &h, &p), WSYNC_OK);
  EXPECT_EQ(h, "trainer-0.svc");
  EXPECT_EQ(p, 1234);
  ASSERT_EQ(wsync::parse_host_port("[::1]:65535", &h, &p), WSYNC_OK);
  EXPECT_EQ(h, "::1");
  EXPECT_EQ(p, 65535);
  ASSERT_EQ(wsync::parse_host_port("tcp://[fe80::1]:0", &h, &p), WSYNC_OK);
  EXPECT_EQ(h, "fe80::1");
  EXPECT_EQ(p, 0);
  EXPECT_EQ(wsync::format_host_port("::1", 5), "[::1]:5");
  EXPECT_EQ(wsync::format_host_port("a", 5), "a:5");
}

TEST(StoreHostPort, RefusesBadAddressesNamingThem) {
  const char* bad[] = {"", "host", "host:", ":80", "host:99999", "host:12a", "::1:80", "[::1]80", "[::1]:",
                       "http://h:1", "h o:1", "[host]:1", "host:-1"};
  for (const char* a : bad) {
    std::string h = "unchanged";
    uint16_t p = 7;
    EXPECT_EQ(wsync::parse_host_port(a, &h, &p), WSYNC_ERR_INVALID_ARGUMENT) << a;
    EXPECT_NE(wsync::last_error().find(std::string("'") + a + "'"), std::string::npos) << wsync::last_error();
    EXPECT_EQ(h, "unchanged");
    EXPECT_EQ(p, 7);
  }
}

// ---- the wire, byte by byte ----------------------------------------------------------------

TEST_F(StoreTest, WireValidateAndPingEcho) {
  Raw r(port_);
  ASSERT_TRUE(r.ok());
  r.send(Req(PING).u32(0xA1B2C3D4u).b);
  EXPECT_EQ(r.u32(), 0xA1B2C3D4u);
  r.send(Req(PING).u32(7).b);
  EXPECT_EQ(r.u32(), 7u);
  EXPECT_TRUE(r.silent(50));  // VALIDATE itself has no reply
}

TEST_F(StoreTest, WireSetGetAndMissingKey) {
  Raw r(port_);
  r.send(Req(SET).str("/k").str("value-1").b);
  r.send(Req(GET).str("/k").b);
  EXPECT_EQ(S(r.payload()), "value-1");
  r.send(Req(GET).str("/missing").b);  // torch's libuv backend: empty payload
  EXPECT_EQ(r.i64(), 0);
  Bytes v;
  ASSERT_TRUE(stored("/k", &v));  // the wire key is stored as sent
  EXPECT_EQ(S(v), "value-1");
}

TEST_F(StoreTest, WireAddRepliesInt64AndStoresDecimal) {
  Raw r(port_);
  r.send(Req(ADD).str("init/").u64(1).b);
  EXPECT_EQ(r.i64(), 1);
  r.send(Req(ADD).str("init/").u64(uint64_t(int64_t(41))).b);
  EXPECT_EQ(r.i64(), 42);
  r.send(Req(ADD).str("init/").u64(uint64_t(int64_t(-50))).b);
  EXPECT_EQ(r.i64(), -8);
  r.send(Req(GET).str("init/").b);
  EXPECT_EQ(S(r.payload()), "-8");
  r.send(Req(SET).str("n").str("100").b);
  r.send(Req(ADD).str("n").u64(5).b);
  EXPECT_EQ(r.i64(), 105);
}

TEST_F(StoreTest, WireCheckWaitNumKeysDelete) {
  Raw r(port_);
  r.send(Req(CHECK).u64(2).str("/a").str("/b").b);
  EXPECT_EQ(r.u8(), 1);  // NOT_READY
  r.send(Req(SET).str("/a").str("1").b);
  r.send(Req(SET).str("/b").str("2").b);
  r.send(Req(CHECK).u64(2).str("/a").str("/b").b);
  EXPECT_EQ(r.u8(), 0);  // READY
  r.send(Req(WAIT).u64(1).str("/a").b);
  EXPECT_EQ(r.u8(), 0);  // STOP_WAITING at once
  r.send(Req(GETNUMKEYS).b);
  EXPECT_EQ(r.i64(), 2);
  r.send(Req(DELETE_KEY).str("/a").b);
  EXPECT_EQ(r.i64(), 1);
  r.send(Req(DELETE_KEY).str("/a").b);
  EXPECT_EQ(r.i64(), 0);
  r.send(Req(GETNUMKEYS).b);
  EXPECT_EQ(r.i64(), 1);
}

TEST_F(StoreTest, WireWaitIsReleasedBySetFromAnotherConnection) {
  Raw waiter(port_), setter(port_);
  waiter.send(Req(WAIT).u64(2).str("/x").str("/y").b);
  EXPECT_TRUE(waiter.silent(100));
  setter.send(Req(SET).str("/x").str("1").b);
  EXPECT_TRUE(waiter.silent(100));  // still needs /y
  setter.send(Req(ADD).str("/y").u64(1).b);
  EXPECT_EQ(setter.i64(), 1);
  EXPECT_EQ(waiter.u8(), 0);  // STOP_WAITING
}

TEST_F(StoreTest, WireCancelWait) {
  Raw r(port_);
  r.send(Req(WAIT).u64(1).str("/never").b);
  EXPECT_TRUE(r.silent(50));
  r.send(Req(CANCEL_WAIT).b);
  EXPECT_EQ(r.u8(), 1);  // WAIT_CANCELED
  // The cancelled wait must not fire later.
  Raw other(port_);
  other.send(Req(SET).str("/never").str("now").b);
  r.send(Req(PING).u32(99).b);
  EXPECT_EQ(r.u32(), 99u);
  EXPECT_TRUE(r.silent(50));
}

// torch 2.12+'s BARRIER (query 18: key, i64 world size), as torch 2.12 and 2.15 behave on the wire.
TEST_F(StoreTest, WireBarrierReleasesEveryoneAtTheLastArrival) {
  Raw a(port_), b(port_), watcher(port_);
  watcher.send(Req(WAIT).u64(1).str("/bar").b);  // a plain WAIT on the key, before anyone arrives
  // The connections are served independently: give the WAIT time to be registered first (were
  // a's arrival first, the key would exist and the WAIT would return at once, as in torch).
  EXPECT_TRUE(watcher.silent(200));
  a.send(Req(BARRIER).str("/bar").u64(2).b);
  EXPECT_TRUE(a.silent(100));
  EXPECT_TRUE(watcher.silent(50));  // an arrival that does not complete the barrier wakes no one
  b.send(Req(BARRIER).str("/bar").u64(2).b);
  EXPECT_EQ(b.u8(), 0);  // STOP_WAITING to the last arrival ...
  EXPECT_EQ(a.u8(), 0);  // ... and to the one waiting
  EXPECT_EQ(watcher.u8(), 0);  // and to the WAIT on that key
  a.send(Req(GET).str("/bar").b);
  EXPECT_EQ(S(a.payload()), "2");  // the counter is the key's value
  a.send(Req(BARRIER).str("/bar").u64(2).b);  // not reusable: 3 >= 2 passes at once
  EXPECT_EQ(a.u8(), 0);
}

TEST_F(StoreTest, WireBarrierSharesTheCounterWithAddAndCancels) {
  Raw a(port_), b(port_);
  a.send(Req(ADD).str("/n").u64(5).b);
  EXPECT_EQ(a.i64(), 5);
  a.send(Req(BARRIER).str("/n").u64(2).b);  // 6 >= 2
  EXPECT_EQ(a.u8(), 0);
  a.send(Req(BARRIER).str("/t").u64(3).b);
  EXPECT_TRUE(a.silent(50));
  a.send(Req(CANCEL_WAIT).b);  // the client's timeout path
  EXPECT_EQ(a.u8(), 1);        // WAIT_CANCELED
  b.send(Req(BARRIER).str("/t").u64(2).b);  // the cancelled arrival still counts: 2 >= 2
  EXPECT_EQ(b.u8(), 0);
  EXPECT_TRUE(a.silent(50));  // and the cancelled one is not answered again
  a.send(Req(BARRIER).str("/s").u64(3).b);
  EXPECT_TRUE(a.silent(50));
  b.send(Req(SET).str("/s").str("x").b);  // SET of the key releases its barrier waiters
  EXPECT_EQ(a.u8(), 0);
  Raw bad(port_);  // a value that is not a number closes that client, like torch (stoll throws)
  bad.send(Req(BARRIER).str("/s").u64(2).b);
  EXPECT_TRUE(bad.closed_by_peer());
  expect_serving("after-barrier");
}

TEST_F(StoreTest, WireCompareSet) {
  Raw r(port_);
  // Missing key, empty expected: stores desired and replies it.
  r.send(Req(COMPARE_SET).str("/c").str("").str("first").b);
  EXPECT_EQ(S(r.payload()), "first");
  // Missing key, non-empty expected: replies expected, stores nothing.
  r.send(Req(COMPARE_SET).str("/m").str("exp").str("des").b);
  EXPECT_EQ(S(r.payload()), "exp");
  EXPECT_FALSE(stored("/m", nullptr));
  // Present, matching: swapped.
  r.send(Req(COMPARE_SET).str("/c").str("first").str("second").b);
  EXPECT_EQ(S(r.payload()), "second");
  // Present, not matching: unchanged, current value replied.
  r.send(Req(COMPARE_SET).str("/c").str("first").str("third").b);
  EXPECT_EQ(S(r.payload()), "second");
  Bytes v;
  ASSERT_TRUE(stored("/c", &v));
  EXPECT_EQ(S(v), "second");
}

TEST_F(StoreTest, WireMultiSetMultiGetAppend) {
  Raw r(port_);
  r.send(Req(MULTI_SET).u64(3).str("/k1").str("v1").str("/k2").str("").str("/k3").str("vvv3").b);
  r.send(Req(MULTI_GET).u64(3).str("/k3").str("/k1").str("/k2").b);
  EXPECT_EQ(S(r.payload()), "vvv3");
  EXPECT_EQ(S(r.payload()), "v1");
  EXPECT_EQ(S(r.payload()), "");
  r.send(Req(APPEND).str("/k1").str("+more").b);
  r.send(Req(APPEND).str("/new").str("abc").b);
  r.send(Req(MULTI_GET).u64(2).str("/k1").str("/new").b);
  EXPECT_EQ(S(r.payload()), "v1+more");
  EXPECT_EQ(S(r.payload()), "abc");
  EXPECT_TRUE(r.silent(50));  // SET, MULTI_SET and APPEND have no reply
}

TEST_F(StoreTest, WireQueuesAndList) {
  Raw r(port_);
  r.send(Req(QUEUE_POP).str("/q").b);
  EXPECT_EQ(r.i64(), 0);  // empty: length only
  r.send(Req(QUEUE_PUSH).str("/q").str("a").b);
  r.send(Req(QUEUE_PUSH).str("/q").str("b").b);
  r.send(Req(QUEUE_LEN).str("/q").b);
  EXPECT_EQ(r.i64(), 2);
  r.send(Req(QUEUE_POP).str("/q").b);
  EXPECT_EQ(r.i64(), 2);
  EXPECT_EQ(S(r.payload()), "a");
  r.send(Req(SET).str("/only").str("1").b);
  r.send(Req(LIST).b);
  EXPECT_EQ(r.i64(), 1);
  EXPECT_EQ(S(r.payload()), "/only");
}

TEST_F(StoreTest, WireRequestsSplitIntoSingleBytes) {
  Raw r(port_, /*handshake=*/false);
  Bytes all = Req(VALIDATE).u32(0x3C85F7CEu).b;
  Bytes set = Req(SET).str("/split").str(std::string(3000, 'z')).b;
  Bytes get = Req(GET).str("/split").b;
  all.insert(all.end(), set.begin(), set.end());
  all.insert(all.end(), get.begin(), get.end());
  for (size_t i = 0; i < all.size(); ++i) {
    r.send(Bytes{all[i]});
    if (i % 512 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(S(r.payload()), std::string(3000, 'z'));
}

// ---- the client ----------------------------------------------------------------------------

TEST_F(StoreTest, ClientEveryQuery) {
  auto c = client();
  ASSERT_TRUE(c);
  EXPECT_EQ(ts::ping(*c), WSYNC_OK);
  ASSERT_EQ(c->set("k", "hello", 5), WSYNC_OK);
  Bytes v;
  ASSERT_EQ(c->get("k", &v, 1000), WSYNC_OK);
  EXPECT_EQ(S(v), "hello");
  ASSERT_TRUE(stored("/k", &v));  // the client prefixes "/" like torch
  EXPECT_EQ(S(v), "hello");

  int64_t n = 0;
  ASSERT_EQ(c->add("cnt", 3, &n), WSYNC_OK);
  EXPECT_EQ(n, 3);
  ASSERT_EQ(c->add("cnt", -1, &n), WSYNC_OK);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(client()->add("cnt", 10, &n), WSYNC_OK);  // another connection sees the same counter
  EXPECT_EQ(n, 12);
  ASSERT_EQ(c->get("cnt", &v, 1000), WSYNC_OK);
  EXPECT_EQ(S(v), "12");

  bool ready = true;
  ASSERT_EQ(ts::check(*c, {"k", "nope"}, &ready), WSYNC_OK);
  EXPECT_FALSE(ready);
  ASSERT_EQ(ts::check(*c, {"k", "cnt"}, &ready), WSYNC_OK);
  EXPECT_TRUE(ready);
  EXPECT_EQ(ts::wait(*c, {"k", "cnt"}, 1000), WSYNC_OK);

  Bytes cur;
  ASSERT_EQ(ts::compare_set(*c, "cas", {}, B("one"), &cur), WSYNC_OK);
  EXPECT_EQ(S(cur), "one");
  ASSERT_EQ(ts::compare_set(*c, "cas", B("one"), B("two"), &cur), WSYNC_OK);
  EXPECT_EQ(S(cur), "two");
  ASSERT_EQ(ts::compare_set(*c, "cas", B("one"), B("three"), &cur), WSYNC_OK);
  EXPECT_EQ(S(cur), "two");
  ASSERT_EQ(ts::compare_set(*c, "absent", B("x"), B("y"), &cur), WSYNC_OK);
  EXPECT_EQ(S(cur), "x");

  int64_t keys = 0;
  ASSERT_EQ(ts::num_keys(*c, &keys), WSYNC_OK);
  EXPECT_EQ(keys, 3);  // /k, /cnt, /cas
  bool deleted = false;
  ASSERT_EQ(ts::delete_key(*c, "cas", &deleted), WSYNC_OK);
  EXPECT_TRUE(deleted);
  ASSERT_EQ(ts::delete_key(*c, "cas", &deleted), WSYNC_OK);
  EXPECT_FALSE(deleted);
  ASSERT_EQ(ts::num_keys(*c, &keys), WSYNC_OK);
  EXPECT_EQ(keys, 2);

  ASSERT_EQ(ts::multi_set(*c, {"m1", "m2", "m3"}, {B("a"), B(""), B(std::string(100000, 'q'))}), WSYNC_OK);
  std::vector<Bytes> vals;
  ASSERT_EQ(ts::multi_get(*c, {"m3", "m1", "m2"}, &vals, 1000), WSYNC_OK);
  ASSERT_EQ(vals.size(), 3u);
  EXPECT_EQ(S(vals[0]), std::string(100000, 'q'));
  EXPECT_EQ(S(vals[1]), "a");
  EXPECT_EQ(S(vals[2]), "");
  EXPECT_EQ(ts::multi_set(*c, {"a"}, {}), WSYNC_ERR_INVALID_ARGUMENT);

  ASSERT_EQ(ts::append(*c, "m1", "bc", 2), WSYNC_OK);
  ASSERT_EQ(c->get("m1", &v, 1000), WSYNC_OK);
  EXPECT_EQ(S(v), "abc");

  // A value of several MiB round-trips intact.
  std::string big(5u << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 131 + 7);
  ASSERT_EQ(c->set("big", big.data(), big.size()), WSYNC_OK);
  ASSERT_EQ(c->get("big", &v, 2000), WSYNC_OK);
  EXPECT_TRUE(S(v) == big);
}

TEST_F(StoreTest, WaitTimeoutLeavesTheConnectionUsable) {
  auto c = client();
  auto other = client();
  ASSERT_TRUE(c && other);
  auto t0 = Clock::now();
  EXPECT_EQ(ts::wait(*c, {"late"}, 150), WSYNC_ERR_TIMEOUT);
  EXPECT_GE(ms_since(t0), 140);
  EXPECT_LT(ms_since(t0), 2000);
  EXPECT_NE(wsync::last_error().find("'late'"), std::string::npos) << wsync::last_error();
  Bytes v;
  EXPECT_EQ(c->get("late", &v, 50), WSYNC_ERR_TIMEOUT);
  // The key now appears: a stale STOP_WAITING would corrupt the next reply; it must not come.
  ASSERT_EQ(other->set("late", "x", 1), WSYNC_OK);
  int64_t n = 0;
  ASSERT_EQ(c->add("after", 5, &n), WSYNC_OK);
  EXPECT_EQ(n, 5);
  ASSERT_EQ(c->get("late", &v, 1000), WSYNC_OK);
  EXPECT_EQ(S(v), "x");
  EXPECT_EQ(ts::ping(*c), WSYNC_OK);
}

TEST_F(StoreTest, GetIsReleasedByAnotherClientsSet) {
  auto waiter = client();
  auto setter = client();
  ASSERT_TRUE(waiter && setter);
  std::atomic<int> st{-1};
  Bytes got;
  auto t0 = Clock::now();
  std::thread t([&] { st = waiter->get("nccl_id", &got, 5000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(st.load(), -1);  // still blocked
  ASSERT_EQ(setter->set("nccl_id", "0123456789", 10), WSYNC_OK);
  t.join();
  EXPECT_EQ(st.load(), WSYNC_OK);
  EXPECT_EQ(S(got), "0123456789");
  EXPECT_LT(ms_since(t0), 3000);
}

TEST_F(StoreTest, SetAndAddFromAnotherClientReleaseAMultiKeyWait) {
  auto c = client();
  auto other = client();
  ASSERT_TRUE(c && other);
  std::atomic<int> st{-1};
  std::vector<Bytes> got;
  std::thread t([&] { st = ts::multi_get(*c, {"a", "b"}, &got, 5000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(other->set("a", "A", 1), WSYNC_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(st.load(), -1);
  int64_t n = 0;
  ASSERT_EQ(other->add("b", 7, &n), WSYNC_OK);
  EXPECT_EQ(n, 7);
  t.join();
  ASSERT_EQ(st.load(), WSYNC_OK);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(S(got[0]), "A");
  EXPECT_EQ(S(got[1]), "7");
}

TEST_F(StoreTest, ConcurrentAddsFromManyClientsGiveTheExactTotal) {
  constexpr int kClients = 48, kAdds = 50;
  std::vector<std::unique_ptr<TcpStoreClient>> cs(kClients);
  for (auto& c : cs) {
    c = client();
    ASSERT_TRUE(c);
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kClients; ++i) {
    ts.emplace_back([&, i] {
      int64_t prev = 0;
      for (int k = 0; k < kAdds; ++k) {
        int64_t v = 0;
        if (cs[i]->add("counter", 1, &v) != WSYNC_OK || v <= prev) ++failures;
        prev = v;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  Bytes v;
  ASSERT_TRUE(stored("/counter", &v));
  EXPECT_EQ(S(v), std::to_string(kClients * kAdds));
}

TEST_F(StoreTest, OneClientSharedByThreads) {
  auto c = client();
  ASSERT_TRUE(c);
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) {
        std::string key = "t" + std::to_string(i) + "_" + std::to_string(k);
        Bytes v;
        if (c->set(key, key.data(), key.size()) != WSYNC_OK || c->get(key, &v, 1000) != WSYNC_OK || S(v) != key) ++bad;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// ---- robustness ----------------------------------------------------------------------------

TEST_F(StoreTest, MalformedRequestsCloseOnlyThatConnection) {
  LogCapture logs;
  auto good = client();
  ASSERT_TRUE(good);
  struct Case {
    const char* name;
    Bytes bytes;
  } cases[] = {
      {"oversized key", Req(GET).u64(1ull << 40).b},
      {"key over 64 KiB", Req(SET).u64(64 * 1024 + 1).b},
      {"value over 64 MiB", Req(SET).str("/k").u64((64ull << 20) + 1).b},
      {"too many keys", Req(WAIT).u64(65537).b},
      {"unknown query type", Req(200).b},
      {"wrong VALIDATE magic later", Req(VALIDATE).u32(1).b},
  };
  for (auto& cs : cases) {
    Raw bad(port_);
    bad.send(cs.bytes);
    EXPECT_TRUE(bad.closed_by_peer()) << cs.name;
    int64_t n = 0;
    ASSERT_EQ(good->add("still", 1, &n), WSYNC_OK) << cs.name;
  }
  // ADD on a value that is not a number closes that client too, like torch (stoll throws).
  {
    Raw bad(port_);
    bad.send(Req(SET).str("/text").str("abc").b);
    bad.send(Req(ADD).str("/text").u64(1).b);
    EXPECT_TRUE(bad.closed_by_peer());
  }
  EXPECT_TRUE(logs.has("malformed request"));
  EXPECT_TRUE(logs.has("unknown query type 200"));
  EXPECT_TRUE(logs.has("not an integer"));
  int64_t n = 0;
  ASSERT_EQ(good->add("still", 1, &n), WSYNC_OK);
  EXPECT_EQ(n, 7);  // six cases above plus this one
  expect_serving("after-malformed");
}

TEST_F(StoreTest, OlderProtocolClientsAreClosedWithALogLine) {
  LogCapture logs;
  {
    Raw old(port_, /*handshake=*/false);  // torch < VALIDATE: SET=0, then a u64 key length
    old.send(Req(0).str("/key").str("v").b);
    EXPECT_TRUE(old.closed_by_peer());
  }
  {
    Raw old(port_, /*handshake=*/false);  // the 4-byte magic prefix line
    old.send(Req(0x7a).u32(0x01020304).b);
    EXPECT_TRUE(old.closed_by_peer());
  }
  EXPECT_TRUE(logs.has("older torch store protocol"));
  expect_serving("after-old");
}

TEST_F(StoreTest, SlowClientsDoNotBlockOthers) {
  Raw stalled(port_);
  stalled.send(Req(SET).str("/half").u64(1000).b);  // promises 1000 bytes, sends none
  Raw silent_open(port_, /*handshake=*/false);      // connects and says nothing
  Raw waiting(port_);
  waiting.send(Req(WAIT).u64(1).str("/never").b);
  auto t0 = Clock::now();
  expect_serving("beside-stalled");
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_FALSE(stored("/half", nullptr));
}

TEST_F(StoreTest, StoppedServerGivesClientErrorsNotHangs) {
  auto c = client();
  auto w = client();
  ASSERT_TRUE(c && w);
  std::atomic<int> wst{-1};
  std::thread t([&] { wst = ts::wait(*w, {"never"}, 10000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto t0 = Clock::now();
  server_->stop();
  t.join();
  EXPECT_TRUE(wst.load() == WSYNC_ERR_PEER_FAILED || wst.load() == WSYNC_ERR_IO) << wst.load();
  int64_t n = 0;
  wsync_status_t st = c->add("x", 1, &n);
  EXPECT_TRUE(st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_IO) << wsync_status_name(st);
  EXPECT_NE(wsync::last_error().find(std::to_string(port_)), std::string::npos) << wsync::last_error();
  Bytes v;
  st = c->get("x", &v, 5000);  // fails fast: the connection is known broken
  EXPECT_TRUE(st == WSYNC_ERR_PEER_FAILED || st == WSYNC_ERR_IO) << wsync_status_name(st);
  EXPECT_LT(ms_since(t0), 2000);
}

TEST_F(StoreTest, ConnectTimesOutWithoutAServer) {
  uint16_t dead_port = port_;
  server_.reset();  // nothing listens there now
  std::unique_ptr<TcpStoreClient> c;
  auto t0 = Clock::now();
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", dead_port, 300, &c), WSYNC_ERR_TIMEOUT);
  EXPECT_GE(ms_since(t0), 250);
  EXPECT_LT(ms_since(t0), 2000);
  EXPECT_FALSE(c);
  EXPECT_NE(wsync::last_error().find("127.0.0.1:" + std::to_string(dead_port)), std::string::npos)
      << wsync::last_error();
}

TEST_F(StoreTest, ConnectRetriesUntilTheServerComesUp) {
  uint16_t p = port_;
  server_.reset();
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(TcpStoreServer::start("127.0.0.1", p, &server_), WSYNC_OK) << wsync::last_error();
  });
  std::unique_ptr<TcpStoreClient> c;
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", p, 3000, &c), WSYNC_OK) << wsync::last_error();
  late.join();
  ASSERT_TRUE(c);
  EXPECT_EQ(ts::ping(*c), WSYNC_OK);
}

TEST(StoreConnect, AServerThatNeverAnswersTimesOut) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 4), 0);  // accepts in the kernel, never replies
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::unique_ptr<TcpStoreClient> c;
  auto t0 = Clock::now();
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", ntohs(a.sin_port), 300, &c), WSYNC_ERR_TIMEOUT);
  EXPECT_LT(ms_since(t0), 2000);
  EXPECT_NE(wsync::last_error().find("handshake"), std::string::npos) << wsync::last_error();
  ::close(fd);
}

TEST(StoreServer, BindsPortZeroAndWildcards) {
  std::unique_ptr<TcpStoreServer> s;
  ASSERT_EQ(TcpStoreServer::start("0.0.0.0", 0, &s), WSYNC_OK) << wsync::last_error();
  EXPECT_NE(s->port(), 0);
  EXPECT_EQ(s->address(), "127.0.0.1:" + std::to_string(s->port()));
  std::string h;
  uint16_t p = 0;
  ASSERT_EQ(wsync::parse_host_port(s->address(), &h, &p), WSYNC_OK);
  std::unique_ptr<TcpStoreClient> c;
  ASSERT_EQ(TcpStoreClient::connect(h, p, 2000, &c), WSYNC_OK) << wsync::last_error();
  EXPECT_EQ(ts::ping(*c), WSYNC_OK);

  // The same port twice: an IO error naming it.
  std::unique_ptr<TcpStoreServer> s2;
  EXPECT_EQ(TcpStoreServer::start("0.0.0.0", s->port(), &s2), WSYNC_ERR_IO);
  EXPECT_NE(wsync::last_error().find(std::to_string(s->port())), std::string::npos) << wsync::last_error();
  EXPECT_FALSE(s2);

  std::unique_ptr<TcpStoreServer> s3;
  ASSERT_EQ(TcpStoreServer::start("127.0.0.1", 0, &s3), WSYNC_OK);
  EXPECT_EQ(s3->address(), "127.0.0.1:" + std::to_string(s3->port()));
  EXPECT_NE(s3->port(), s->port());

  std::unique_ptr<TcpStoreServer> s4;
  EXPECT_EQ(TcpStoreServer::start("no-such-host.invalid", 0, &s4), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(wsync::last_error().find("no-such-host.invalid"), std::string::npos) << wsync::last_error();
}

TEST(StoreServer, Ipv6WildcardServesBothFamilies) {
  std::unique_ptr<TcpStoreServer> s;
  if (TcpStoreServer::start("::", 0, &s) != WSYNC_OK) GTEST_SKIP() << "no IPv6 here: " << wsync::last_error();
  EXPECT_EQ(s->address(), "127.0.0.1:" + std::to_string(s->port()));
  std::unique_ptr<TcpStoreClient> c4, c6;
  ASSERT_EQ(TcpStoreClient::connect("127.0.0.1", s->port(), 2000, &c4), WSYNC_OK) << wsync::last_error();
  ASSERT_EQ(c4->set("fam", "4", 1), WSYNC_OK);
  ASSERT_EQ(TcpStoreClient::connect("[::1]", s->port(), 2000, &c6), WSYNC_OK) << wsync::last_error();
  Bytes v;
  ASSERT_EQ(c6->get("fam", &v, 1000), WSYNC_OK);
  EXPECT_EQ(S(v), "4");
}

TEST(StoreServer, StopIsIdempotent) {
  std::unique_ptr<TcpStoreServer> s;
  ASSERT_EQ(TcpStoreServer::start("127.0.0.1", 0, &s), WSYNC_OK);
  s->stop();
  s->stop();
  std::unique_ptr<TcpStoreClient> c;
  EXPECT_EQ(TcpStoreClient::connect("127.0.0.1", s->port(), 200, &c), WSYNC_ERR_TIMEOUT);
}

}  // namespace
