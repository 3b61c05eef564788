// The wsync side of the torch TCPStore interop test (store_interop.py drives it):
//   server       host wsync's store, print its port, answer "KEY" lookups read from stdin
//   client PORT  run every query of wsync's client against a torch TCPStore server
#include <cstdio>
#include <iostream>
#include <string>
#include "common/error.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
using namespace wsync;
#define CHECK_OK(x) do { wsync_status_t s_ = (x); if (s_ != WSYNC_OK) { printf("FAIL %s -> %s: %s\n", #x, wsync_status_name(s_), last_error().c_str()); return 1; } } while (0)
#define EXPECT(c) do { if (!(c)) { printf("FAIL %s\n", #c); return 1; } } while (0)
static std::string S(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }
int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s server | client PORT\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "server") {
    std::unique_ptr<TcpStoreServer> s;
    CHECK_OK(TcpStoreServer::start("127.0.0.1", 0, &s));
    printf("%u\n", s->port()); fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
      std::vector<uint8_t> v;
      if (s->get(line, &v)) printf("KEY %s = %s\n", line.c_str(), S(v).c_str()); else printf("KEY %s missing\n", line.c_str());
      fflush(stdout);
    }
    printf("connections=%zu keys=%lld\n", s->num_connections(), (long long)s->num_keys());
    return 0;
  }
  uint16_t port = (uint16_t)atoi(argv[2]);
  std::unique_ptr<TcpStoreClient> c;
  CHECK_OK(TcpStoreClient::connect("127.0.0.1", port, 5000, &c));
  CHECK_OK(c->ping());
  CHECK_OK(c->set("ours", "hello", 5));
  std::vector<uint8_t> v;
  CHECK_OK(c->get("from_torch", &v, 5000)); EXPECT(S(v) == "torch-value");
  int64_t n = 0;
  CHECK_OK(c->add("cnt", 5, &n)); EXPECT(n == 5);
  CHECK_OK(c->add("cnt", 2, &n)); EXPECT(n == 7);
  bool ready = false;
  CHECK_OK(c->check({"ours", "cnt"}, &ready)); EXPECT(ready);
  CHECK_OK(c->check({"nope"}, &ready)); EXPECT(!ready);
  wsync_status_t st = c->wait({"nope"}, 200); EXPECT(st == WSYNC_ERR_TIMEOUT);
  CHECK_OK(c->ping());
  std::vector<uint8_t> cur;
  CHECK_OK(c->compare_set("cas", {}, {'a'}, &cur)); EXPECT(S(cur) == "a");
  CHECK_OK(c->compare_set("cas", {'a'}, {'b'}, &cur)); EXPECT(S(cur) == "b");
  CHECK_OK(c->compare_set("cas", {'a'}, {'c'}, &cur)); EXPECT(S(cur) == "b");
  CHECK_OK(c->compare_set("cas_missing", {'x'}, {'y'}, &cur)); EXPECT(S(cur) == "x");
  bool del = false;
  CHECK_OK(c->delete_key("cas", &del)); EXPECT(del);
  CHECK_OK(c->delete_key("cas", &del)); EXPECT(!del);
  CHECK_OK(c->multi_set({"m1", "m2"}, {{'1'}, {'2', '2'}}));
  std::vector<std::vector<uint8_t>> vals;
  CHECK_OK(c->multi_get({"m2", "m1"}, &vals, 2000)); EXPECT(S(vals[0]) == "22" && S(vals[1]) == "1");
  CHECK_OK(c->append("m1", "x", 1));
  CHECK_OK(c->get("m1", &v, 1000)); EXPECT(S(v) == "1x");
  CHECK_OK(c->num_keys(&n)); printf("num_keys=%lld\n", (long long)n);
  CHECK_OK(c->set("done", "1", 1));
  printf("CLIENT OK\n");
  return 0;
}
