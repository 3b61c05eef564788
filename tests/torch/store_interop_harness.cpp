// The wsync side of the torch TCPStore interop test (store_interop.py drives it):
//   server               host wsync's store, print its port, answer "KEY" lookups read from stdin
//   server-torch SECRET  the same with a group secret and torch mode (torch_clients): a member
//                        (holding the secret) has set wsync/probe before the port is printed
//   server-secret SECRET the same with a group secret and without torch mode
//   client PORT          run every query of wsync's client against a torch TCPStore server
#include <cstdio>
#include <iostream>
#include <string>
#include "common/error.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "../common/store_test_client.h"
using namespace wsync;
namespace ts = wsync::test_store;
#define CHECK_OK(x) do { wsync_status_t s_ = (x); if (s_ != WSYNC_OK) { printf("FAIL %s -> %s: %s\n", #x, wsync_status_name(s_), last_error().c_str()); return 1; } } while (0)
#define EXPECT(c) do { if (!(c)) { printf("FAIL %s\n", #c); return 1; } } while (0)
static std::string S(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }
int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s server | client PORT\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "server" || mode == "server-torch" || mode == "server-secret") {
    StoreServerOptions o;
    if (mode != "server") {
      if (argc < 3) return 2;
      o.secret = argv[2];
      o.torch_clients = mode == "server-torch";
    }
    std::unique_ptr<TcpStoreServer> s;
    CHECK_OK(TcpStoreServer::start("127.0.0.1", 0, o, &s));
    // Lookups go through a client of this process's own (a member, when there is a secret), like
    // any other reader of the store.
    std::unique_ptr<TcpStoreClient> look;
    CHECK_OK(TcpStoreClient::connect("127.0.0.1", s->port(), 5000, o.secret, &look));
    if (!o.secret.empty()) CHECK_OK(look->set("wsync/probe", "member-only", 11));
    printf("%u\n", s->port()); fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
      std::vector<uint8_t> v;
      if (ts::lookup_wire(*look, line, &v)) printf("KEY %s = %s\n", line.c_str(), S(v).c_str()); else printf("KEY %s missing\n", line.c_str());
      fflush(stdout);
    }
    int64_t keys = 0;
    CHECK_OK(ts::num_keys(*look, &keys));
    printf("keys=%lld\n", (long long)keys);
    return 0;
  }
  uint16_t port = (uint16_t)atoi(argv[2]);
  std::unique_ptr<TcpStoreClient> c;
  CHECK_OK(TcpStoreClient::connect("127.0.0.1", port, 5000, &c));
  CHECK_OK(ts::ping(*c));
  CHECK_OK(c->set("ours", "hello", 5));
  std::vector<uint8_t> v;
  CHECK_OK(c->get("from_torch", &v, 5000)); EXPECT(S(v) == "torch-value");
  int64_t n = 0;
  CHECK_OK(c->add("cnt", 5, &n)); EXPECT(n == 5);
  CHECK_OK(c->add("cnt", 2, &n)); EXPECT(n == 7);
  bool ready = false;
  CHECK_OK(ts::check(*c, {"ours", "cnt"}, &ready)); EXPECT(ready);
  CHECK_OK(ts::check(*c, {"nope"}, &ready)); EXPECT(!ready);
  wsync_status_t st = ts::wait(*c, {"nope"}, 200); EXPECT(st == WSYNC_ERR_TIMEOUT);
  CHECK_OK(ts::ping(*c));
  std::vector<uint8_t> cur;
  CHECK_OK(ts::compare_set(*c, "cas", {}, {'a'}, &cur)); EXPECT(S(cur) == "a");
  CHECK_OK(ts::compare_set(*c, "cas", {'a'}, {'b'}, &cur)); EXPECT(S(cur) == "b");
  CHECK_OK(ts::compare_set(*c, "cas", {'a'}, {'c'}, &cur)); EXPECT(S(cur) == "b");
  CHECK_OK(ts::compare_set(*c, "cas_missing", {'x'}, {'y'}, &cur)); EXPECT(S(cur) == "x");
  bool del = false;
  CHECK_OK(ts::delete_key(*c, "cas", &del)); EXPECT(del);
  CHECK_OK(ts::delete_key(*c, "cas", &del)); EXPECT(!del);
  CHECK_OK(ts::multi_set(*c, {"m1", "m2"}, {{'1'}, {'2', '2'}}));
  std::vector<std::vector<uint8_t>> vals;
  CHECK_OK(ts::multi_get(*c, {"m2", "m1"}, &vals, 2000)); EXPECT(S(vals[0]) == "22" && S(vals[1]) == "1");
  CHECK_OK(ts::append(*c, "m1", "x", 1));
  CHECK_OK(c->get("m1", &v, 1000)); EXPECT(S(v) == "1x");
  CHECK_OK(ts::num_keys(*c, &n)); printf("num_keys=%lld\n", (long long)n);
  CHECK_OK(c->set("done", "1", 1));
  printf("CLIENT OK\n");
  return 0;
}
