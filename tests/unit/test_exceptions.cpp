// No C++ exception crosses the C boundary. Every exported function and every host-table callback
// runs behind a guard with a throw point named after it; this test makes each throw point throw
// (a std::runtime_error, std::bad_alloc, and a non-standard type), one function at a time, and
// checks the C caller sees a status and a message naming the function, never an exception. It
// also reads libwsync.so's export list, so a new export without a guard (and without a place in
// the short list of functions that cannot throw) fails here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/api_guard.h"
#include "common/error.h"
#include "loader/plugin_loader.h"
#include "wsync.h"
#include "wsync_plugin.h"

namespace {

// Which throw point throws, and how.
std::string g_target;
int g_kind = 0;  // 0: std::runtime_error, 1: std::bad_alloc, 2: an int
std::set<std::string> g_fired;

void hook(const char* where) {
  if (g_target != where) return;
  g_fired.insert(where);
  if (g_kind == 0) throw std::runtime_error("thrown by the test");
  if (g_kind == 1) throw std::bad_alloc();
  throw 42;
}

struct Armed {
  Armed(const char* where, int kind) {
    g_target = where;
    g_kind = kind;
    wsync::set_throw_hook(hook);
  }
  ~Armed() {
    wsync::set_throw_hook(nullptr);
    g_target.clear();
  }
};

// The status a guarded function must return for the thrown kind, and the words of its message.
void expect_converted(const char* fn, int kind, wsync_status_t st) {
  EXPECT_EQ(st, kind == 1 ? WSYNC_ERR_OUT_OF_MEMORY : WSYNC_ERR_INTERNAL) << fn;
  const std::string e = wsync_last_error();
  EXPECT_NE(e.find(fn), std::string::npos) << e;
  EXPECT_NE(e.find(kind == 1 ? "out of memory" : "internal error"), std::string::npos) << e;
  if (kind == 0) {
    EXPECT_NE(e.find("thrown by the test"), std::string::npos) << e;
  }
}

// A group of one receiver over the test transport 'stub' (moves no bytes; fast), for the functions
// that need a live group or receiver.
struct Pair {
  wsync_group_t* g = nullptr;
  wsync_receiver_t* rx = nullptr;
  Pair() {
    const std::string addr_file = "/tmp/wsync-exc-" + std::to_string(getpid()) + ".addr";
    std::remove(addr_file.c_str());
    std::thread receiver([&] {
      std::string addr;
      for (int i = 0; i < 3000 && addr.empty(); ++i) {
        if (FILE* f = std::fopen(addr_file.c_str(), "r")) {
          char buf[128] = {0};
          if (std::fgets(buf, sizeof buf, f)) addr = std::string(buf, std::strcspn(buf, "\n"));
          std::fclose(f);
        }
        if (addr.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      wsync_receiver_config_t c = WSYNC_RECEIVER_CONFIG_INIT;
      c.rank = 1;
      c.store_addr = addr.c_str();
      c.timeout_ms = 10000;
      EXPECT_EQ(wsync_receiver_init(&c, &rx), WSYNC_OK) << wsync_last_error();
    });
    // The stub moves no bytes, so there is no payload to checksum.
    wsync_option_t o[] = {WSYNC_OPTION("store_addr_file", addr_file.c_str()), WSYNC_OPTION("verify_payload", "0")};
    wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
    cfg.num_receivers = 1;
    cfg.transport = "stub";
    cfg.options = o;
    cfg.num_options = 2;
    cfg.timeout_ms = 10000;
    EXPECT_EQ(wsync_group_init(&cfg, &g), WSYNC_OK) << wsync_last_error();
    receiver.join();
    std::remove(addr_file.c_str());
  }
  ~Pair() {
    wsync_receiver_destroy(rx);
    wsync_group_destroy(g);
  }
};

class Exceptions : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    setenv("WSYNC_PLUGIN_PATH", WSYNC_TEST_TESTING_PLUGIN_DIR ":" WSYNC_TEST_PLUGIN_DIR, 1);
  }
};

TEST_P(Exceptions, ExportedFunctionsReturnAStatus) {
  const int kind = GetParam();
  Pair p;
  ASSERT_NE(p.g, nullptr);
  ASSERT_NE(p.rx, nullptr);
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  float x[4] = {1, 2, 3, 4};
  t.name = "w";
  t.dtype = WSYNC_DTYPE_FLOAT32;
  t.ndim = 1;
  t.shape[0] = 4;
  t.data = x;
  t.nbytes = sizeof x;
  uint64_t ticket = 0;
  wsync_group_stats_t stats = WSYNC_GROUP_STATS_INIT;
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  wsync_plugin_info_t info = WSYNC_PLUGIN_INFO_INIT;
  uint64_t count = 0;
  wsync_group_config_t gc = WSYNC_GROUP_CONFIG_INIT;
  wsync_receiver_config_t rc = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_group_t* g2 = nullptr;
  wsync_receiver_t* r2 = nullptr;
  struct Case {
    const char* fn;
    std::function<wsync_status_t()> call;
  } cases[] = {
      {"wsync_group_init", [&] { return wsync_group_init(&gc, &g2); }},
      {"wsync_group_send_batch", [&] { return wsync_group_send_batch(p.g, &t, 1, -1); }},
      {"wsync_group_send_start", [&] { return wsync_group_send_start(p.g, &t, 1, -1, &ticket); }},
      {"wsync_group_send_wait", [&] { return wsync_group_send_wait(p.g, 1, 0); }},
      {"wsync_group_finalize", [&] { return wsync_group_finalize(p.g, 1, -1); }},
      {"wsync_group_declare_update", [&] { return wsync_group_declare_update(p.g, &t, 1); }},
      {"wsync_group_set_cuda_stream", [&] { return wsync_group_set_cuda_stream(p.g, nullptr); }},
      {"wsync_group_get_stats", [&] { return wsync_group_get_stats(p.g, &stats); }},
      {"wsync_receiver_init", [&] { return wsync_receiver_init(&rc, &r2); }},
      {"wsync_receiver_register", [&] { return wsync_receiver_register(p.rx, &t, 1); }},
      {"wsync_receiver_next", [&] { return wsync_receiver_next(p.rx, &ev, 0); }},
      {"wsync_receiver_commit", [&] { return wsync_receiver_commit(p.rx, 1); }},
      {"wsync_receiver_get_state",
       [&] {
         wsync_receiver_state_t s = WSYNC_RECEIVER_STATE_INIT;
         return wsync_receiver_get_state(p.rx, &s);
       }},
      {"wsync_list_plugins", [&] { return wsync_list_plugins(&info, 1, &count); }},
      {"wsync_group_next_member_event",
       [&] {
         wsync_member_event_t e = WSYNC_MEMBER_EVENT_INIT;
         return wsync_group_next_member_event(p.g, &e);
       }},
      {"wsync_group_members",
       [&] {
         uint32_t r[4];
         return wsync_group_members(p.g, r, 4, &count);
       }},
  };
  for (const auto& c : cases) {
    {
      Armed a(c.fn, kind);
      expect_converted(c.fn, kind, c.call());
    }
    EXPECT_EQ(g2, nullptr);
    EXPECT_EQ(r2, nullptr);
  }
  // The group still works after all that: nothing was left half-done. (The receiver answers on a
  // thread of its own while the sender waits.)
  wsync_status_t rx_st = WSYNC_ERR_INTERNAL;
  std::thread rx([&] {
    wsync_receiver_event_t e = WSYNC_RECEIVER_EVENT_INIT;
    rx_st = wsync_receiver_next(p.rx, &e, 10000);
    if (rx_st == WSYNC_OK && (e.kind != WSYNC_EVENT_BUCKET || e.num_tensors != 1)) rx_st = WSYNC_ERR_PROTOCOL;
  });
  EXPECT_EQ(wsync_group_send_batch(p.g, &t, 1, 5000), WSYNC_OK) << wsync_last_error();
  rx.join();
  EXPECT_EQ(rx_st, WSYNC_OK);
}

TEST_P(Exceptions, FunctionsWithoutAStatusKeepTheCallersError) {
  const int kind = GetParam();
  auto* p = new Pair;
  ASSERT_NE(p->g, nullptr);
  wsync::fail(WSYNC_ERR_TIMEOUT, "the caller's own error");
  for (const char* fn : {"wsync_group_abort", "wsync_set_log_callback"}) {
    Armed a(fn, kind);
    if (std::string(fn) == "wsync_group_abort") {
      wsync_group_abort(p->g);
    } else {
      wsync_set_log_callback(nullptr, nullptr, 0);
    }
    EXPECT_STREQ(wsync_last_error(), "the caller's own error") << fn;
  }
  {
    Armed a("wsync_plugin_dirs", kind);
    EXPECT_STREQ(wsync_plugin_dirs(), "");  // the fallback, not a throw
  }
  {  // A throwing destroy leaves the object alive (it threw before tearing anything down) ...
    Armed a("wsync_receiver_destroy", kind);
    wsync_receiver_destroy(p->rx);
  }
  {
    Armed a("wsync_group_destroy", kind);
    wsync_group_destroy(p->g);
    EXPECT_STREQ(wsync_last_error(), "the caller's own error");
  }
  delete p;  // ... so destroying it again works and frees everything
  EXPECT_EQ(g_fired.count("wsync_group_destroy"), 1u);
}

TEST_P(Exceptions, HostTableCallbacksReturnAStatus) {
  const int kind = GetParam();
  const wsync_host_v1_t* h = wsync::host_table();
  uint64_t len = 0;
  int64_t v = 0;
  char buf[8];
  wsync_store_t* store = reinterpret_cast<wsync_store_t*>(&buf);  // never reached: the guard throws first
  const struct {
    const char* fn;
    std::function<wsync_status_t()> call;
  } cases[] = {
      {"host.set_error", [&] { return h->set_error(WSYNC_ERR_IO, "m"); }},
      {"host.store_set", [&] { return h->store_set(store, "k", "v", 1); }},
      {"host.store_get", [&] { return h->store_get(store, "k", buf, sizeof buf, &len, 0); }},
      {"host.store_add", [&] { return h->store_add(store, "k", 1, &v); }},
  };
  for (const auto& c : cases) {
    Armed a(c.fn, kind);
    wsync::clear_error();
    expect_converted(c.fn, kind, c.call());
  }
  {
    Armed a("host.log", kind);
    h->log(WSYNC_LOG_ERROR, "dropped, not thrown");
  }
  {
    Armed a("host.alloc_host", kind);
    EXPECT_EQ(h->alloc_host(4096), nullptr);
  }
  {
    Armed a("host.free_host", kind);
    h->free_host(nullptr, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, Exceptions, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param == 0 ? std::string("RuntimeError")
                                               : i.param == 1 ? std::string("BadAlloc") : std::string("NotAnException");
                         });

// Every function libwsync.so exports either runs behind a guard this test threw through, or is one
// of the few that cannot throw (table lookups and accessors that allocate nothing).
TEST(ExceptionsCoverage, EveryExportIsGuardedOrCannotThrow) {
  const std::set<std::string> cannot_throw = {
      "wsync_abi_version",     "wsync_version_string",      "wsync_status_name", "wsync_status_doc",
      "wsync_dtype_size",      "wsync_dtype_name",          "wsync_last_error",  "wsync_group_store_addr",
      "wsync_receiver_committed_version", "wsync_receiver_touched_name"};
  const std::set<std::string> guarded = {
      "wsync_group_init",      "wsync_group_send_batch", "wsync_group_send_start", "wsync_group_send_wait",
      "wsync_group_finalize",  "wsync_group_set_cuda_stream", "wsync_group_get_stats", "wsync_group_abort",
      "wsync_group_destroy",   "wsync_receiver_init",    "wsync_receiver_register", "wsync_receiver_next",
      "wsync_receiver_commit", "wsync_receiver_destroy", "wsync_list_plugins",    "wsync_plugin_dirs",
      "wsync_set_log_callback", "wsync_receiver_get_state", "wsync_group_next_member_event", "wsync_group_members",
      "wsync_group_declare_update"};
  FILE* f = popen("nm -D --defined-only " WSYNC_TEST_LIBWSYNC, "r");
  ASSERT_NE(f, nullptr);
  char line[512];
  int exports = 0;
  while (std::fgets(line, sizeof line, f)) {
    char type[8], name[400];
    unsigned long long addr;
    if (std::sscanf(line, "%llx %7s %399s", &addr, type, name) != 3) continue;
    std::string n(name);
    n = n.substr(0, n.find('@'));
    if (n.compare(0, 6, "wsync_") != 0) continue;
    ++exports;
    EXPECT_TRUE(guarded.count(n) || cannot_throw.count(n))
        << n << " is exported but neither guarded (add it to this test) nor known not to throw";
  }
  pclose(f);
  EXPECT_EQ(exports, static_cast<int>(guarded.size() + cannot_throw.size()));
}

}  // namespace
