// Checks of a transport plugin: the table, create/destroy (arguments, options, rank and world),
// the optional functions, and, for host-memory transports, two buckets moved between two ranks
// in this process over a real rendezvous store.
#include <poll.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/error.h"
#include "conformance.h"
#include "loader/plugin_loader.h"
#include "store/store_handle.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace conformance {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kTransportV10Size = offsetof(wsync_transport_v1_t, destroy) + sizeof(void (*)(void*));
constexpr size_t kRegisterStagingEnd = offsetof(wsync_transport_v1_t, register_staging) + sizeof(void*);
constexpr size_t kGetPropertyEnd = offsetof(wsync_transport_v1_t, get_property) + sizeof(void*);
constexpr uint64_t kKnownTransportCaps = WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_CUDA_MEMORY |
                                         WSYNC_TRANSPORT_CAP_SCATTER_RECV | WSYNC_TRANSPORT_CAP_STAGING_ONLY |
                                         WSYNC_TRANSPORT_CAP_RETIRED_4 | WSYNC_TRANSPORT_CAP_PIECES |
                                         WSYNC_TRANSPORT_CAP_FORGET_ONE;
const char kUnknownKey[] = "wsync_conformance_no_such_option";

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

bool has_register_staging(const wsync_transport_v1_t* t) {
  return t->struct_size >= kRegisterStagingEnd && t->register_staging != nullptr;
}
bool has_get_property(const wsync_transport_v1_t* t) {
  return t->struct_size >= kGetPropertyEnd && t->get_property != nullptr;
}
constexpr size_t kV12Size = WSYNC_TRANSPORT_V1_2_SIZE;
bool has_event_fd(const wsync_transport_v1_t* t) {
  return t->struct_size >= kV12Size && t->get_event_fd != nullptr && t->arm != nullptr;
}
bool cuda_only(const wsync_transport_v1_t* t) {
  return !(t->caps & WSYNC_TRANSPORT_CAP_HOST_MEMORY) && (t->caps & WSYNC_TRANSPORT_CAP_CUDA_MEMORY);
}

// A rendezvous store (wsync's own TCP store on 127.0.0.1) and one client per rank.
class Stores {
 public:
  bool start(Ctx& c, int ranks) {
    c.step("starting a rendezvous store on 127.0.0.1");
    wsync_status_t st = ::wsync::TcpStoreServer::start("127.0.0.1", 0, &server_);
    if (st != WSYNC_OK) {
      c.fail("could not start the store (not the plugin's fault): " + last_error());
      return false;
    }
    for (int r = 0; r < ranks; ++r) {
      std::unique_ptr<::wsync::TcpStoreClient> cl;
      if ((st = ::wsync::TcpStoreClient::connect("127.0.0.1", server_->port(), 5000, &cl)) != WSYNC_OK) {
        c.fail("could not connect to the store (not the plugin's fault): " + last_error());
        return false;
      }
      clients_.push_back(std::move(cl));
    }
    handles_.resize(ranks);
    for (int r = 0; r < ranks; ++r) handles_[r].client = clients_[r].get();
    return true;
  }
  wsync_store_t* get(int rank) { return &handles_[rank]; }

 private:
  std::unique_ptr<::wsync::TcpStoreServer> server_;
  std::vector<std::unique_ptr<::wsync::TcpStoreClient>> clients_;
  std::vector<wsync_store> handles_;
};

// The hint every core since plugin ABI 1.6 gives (a key derived from the group secret; one per
// run of the suite here): a transport that admits connections of its own needs it.
const std::string& auth_key_hint() {
  static const std::string key = ::wsync::to_hex(::wsync::random_bytes(32).data(), 32);
  return key;
}

struct Params {
  wsync_transport_params_t p;
  std::vector<wsync_option_t> opts;
  std::vector<wsync_option_t> hints;
  Params(const Config& cfg, const wsync_transport_v1_t* t, uint32_t rank, uint32_t world, wsync_store_t* store) {
    wsync_transport_params_t init = WSYNC_TRANSPORT_PARAMS_INIT;
    p = init;
    p.rank = rank;
    p.world_size = world;
    p.group_name = "conformance";
    p.store = store;
    p.timeout_ms = 10000;
    p.device_index = cuda_only(t) ? 0 : -1;
    for (const auto& kv : cfg.options) {
      wsync_option_t o = WSYNC_OPTION(kv.first.c_str(), kv.second.c_str());
      opts.push_back(o);
    }
    wsync_option_t h = WSYNC_OPTION(WSYNC_HINT_AUTH_KEY, auth_key_hint().c_str());
    hints.push_back(h);
    wire();
  }
  Params(const Params&) = delete;
  Params& operator=(const Params&) = delete;
  wsync_transport_params_t* wire() {
    p.options = opts.empty() ? nullptr : opts.data();
    p.num_options = opts.size();
    p.hints = hints.data();
    p.num_hints = hints.size();
    return &p;
  }
};

// create with valid params; WSYNC_ERR_NO_DEVICE makes the check a skip. nullptr on failure.
void* create_valid(Ctx& c, const Config& cfg, const wsync_transport_v1_t* t, uint32_t rank, uint32_t world,
                   wsync_store_t* store) {
  Params p(cfg, t, rank, world, store);
  void* self = nullptr;
  const std::string what = "create(rank " + std::to_string(rank) + " of " + std::to_string(world) + ")";
  c.step(what);
  ::wsync::clear_error();
  wsync_status_t st = t->create(p.wire(), &self);
  if (st == WSYNC_ERR_NO_DEVICE) {
    c.skip("no device: " + what + ": " + last_error());
    return nullptr;
  }
  if (st != WSYNC_OK) {
    c.fail(what + " with valid params failed: " + status_str(st) + ": " + last_error() +
           (cfg.options.empty() ? " (a transport that needs options: pass them with --option key=value)" : ""));
    return nullptr;
  }
  if (self == nullptr) c.fail(what + " returned WSYNC_OK but no instance (*out is NULL)");
  return self;
}

// ---- the checks --------------------------------------------------------------------------------

void check_load(Ctx& c, const Config& cfg) {
  ::wsync::LoadedTransport l;
  c.step("load_transport(" + cfg.path + ")");
  wsync_status_t st = ::wsync::load_transport(cfg.path, &l);
  if (st == WSYNC_ERR_NO_DEVICE) {
    c.skip("no device: " + last_error());
    return;
  }
  if (st != WSYNC_OK) {
    c.fail("the loader refused it: " + status_str(st) + ": " + last_error());
    return;
  }
  c.expect(l.table != nullptr && l.handle != nullptr, "the loader returned OK without a table or handle");
  c.note("loaded from " + l.path);
}

// The 1.2 entries come in working sets: an event fd needs arm; a blob written on one side must be
// read on the other (peer_blob); runtime_info is one short line.
void check_v12_entries(Ctx& c, const wsync_transport_v1_t* t) {
  if (t->struct_size < kV12Size) {
    c.note("a table older than plugin ABI 1.2: no event fd, no side channel (the core polls in slices)");
    return;
  }
  if ((t->get_event_fd != nullptr) != (t->arm != nullptr))
    c.fail("get_event_fd and arm come together (the core arms the fd before it sleeps on it)");
  if ((t->describe_send != nullptr || t->describe_recv != nullptr) && t->peer_blob == nullptr)
    c.fail("describe_send/describe_recv write blobs but peer_blob, which reads them on the other side, is NULL");
  if (t->runtime_info != nullptr) {
    const char* info = t->runtime_info();
    if (c.expect(info != nullptr, "runtime_info returned NULL (return \"\" when there is nothing to say)")) {
      const size_t n = std::strlen(info);
      c.expect(n < 1024 && std::strchr(info, '\n') == nullptr, "runtime_info is not one short line");
      c.note(std::string("runtime_info: ") + info);
    }
  }
}

void check_table(Ctx& c, const Config& cfg, const wsync_transport_v1_t* t) {
  c.expect(t->struct_size >= kTransportV10Size, "struct_size " + std::to_string(t->struct_size) +
                                                    " is smaller than a plugin ABI 1.0 table (" +
                                                    std::to_string(kTransportV10Size) + ")");
  c.expect(t->abi_version == WSYNC_PLUGIN_ABI_VERSION,
           "abi_version is " + std::to_string(t->abi_version) + ", not " + std::to_string(WSYNC_PLUGIN_ABI_VERSION));
  if (c.expect(t->name != nullptr, "name is NULL")) {
    c.expect(cfg.name == t->name, std::string("the table calls itself '") + t->name +
                                      "' but the file is libwsync_transport_" + cfg.name +
                                      ".so (receivers load the transport by the name the sender announces)");
    for (const char* p = t->name; *p; ++p)
      if (!(std::isalnum(static_cast<unsigned char>(*p)) || *p == '_' || *p == '-')) {
        c.fail(std::string("name '") + t->name + "' may only hold letters, digits, '_' and '-'");
        break;
      }
  }
  c.expect(t->version != nullptr && t->version[0] != '\0', "version is NULL or empty (give the plugin's release)");
  if (t->caps & ~kKnownTransportCaps)
    c.fail("caps has unknown bits: " + hex(t->caps & ~kKnownTransportCaps) +
           " (known: HOST_MEMORY, CUDA_MEMORY, SCATTER_RECV, STAGING_ONLY, PIECES)");
  c.expect(t->caps & (WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_CUDA_MEMORY),
           "caps has neither HOST_MEMORY nor CUDA_MEMORY: the transport moves no memory at all");
  struct Fn {
    const char* name;
    bool set;
  } required[] = {{"create", t->create != nullptr},       {"connect", t->connect != nullptr},
                  {"send_post", t->send_post != nullptr}, {"send_wait", t->send_wait != nullptr},
                  {"recv_post", t->recv_post != nullptr}, {"recv_wait", t->recv_wait != nullptr},
                  {"forget_peer", t->forget_peer != nullptr}, {"destroy", t->destroy != nullptr}};
  for (const auto& f : required) c.expect(f.set, std::string("the required function '") + f.name + "' is NULL");
  if ((t->caps & WSYNC_TRANSPORT_CAP_STAGING_ONLY) && !has_register_staging(t))
    c.fail("caps has STAGING_ONLY but register_staging is absent (NULL, or beyond struct_size)");
  check_v12_entries(c, t);
  if (t->struct_size > sizeof(wsync_transport_v1_t))
    c.note("the table (" + std::to_string(t->struct_size) + " bytes) is newer than this suite's header (" +
           std::to_string(sizeof(wsync_transport_v1_t)) + "); the extra entries are not checked");
  c.note(std::string("transport '") + (t->name ? t->name : "?") + "' " + (t->version ? t->version : "?") + ", caps " +
         hex(t->caps) + ", table " + std::to_string(t->struct_size) + " bytes; optional: abort " +
         (t->abort ? "yes" : "no") + ", register_staging " + (has_register_staging(t) ? "yes" : "no") +
         ", get_property " + (has_get_property(t) ? "yes" : "no"));
}

void check_create_null(Ctx& c, const Config& cfg, const wsync_transport_v1_t* t) {
  Stores s;
  if (!s.start(c, 1)) return;
  Params p(cfg, t, 0, 1, s.get(0));
  void* self = nullptr;
  c.step("create(NULL, &out)");
  c.refused(t->create(nullptr, &self), "create(NULL, &out)");
  if (self != nullptr) c.fail("create(NULL, &out) set *out");
  c.step("create(&params, NULL)");
  c.refused(t->create(p.wire(), nullptr), "create(&params, NULL)");
}

void check_create_garbage(Ctx& c, const Config& cfg, const wsync_transport_v1_t* t) {
  Stores s;
  if (!s.start(c, 1)) return;
  void* self = nullptr;
  {
    Params p(cfg, t, 0, 1, s.get(0));
    p.wire();
    p.p.options = nullptr;
    p.p.num_options = 2;
    c.step("create with options = NULL and num_options = 2");
    c.refused(t->create(&p.p, &self), "create with options = NULL and num_options = 2");
    if (self) t->destroy(self), self = nullptr;
  }
  {
    Params p(cfg, t, 0, 1, s.get(0));
    wsync_option_t o = WSYNC_OPTION(nullptr, "1");
    p.opts.insert(p.opts.begin(), o);
    c.step("create with an option whose key is NULL");
    c.refused(t->create(p.wire(), &self), "create with an option whose key is NULL");
    if (self) t->destroy(self), self = nullptr;
  }
  {
    Params p(cfg, t, 0, 1, s.get(0));
    p.wire();
    p.p.struct_size = 0;
    c.step("create with params.struct_size = 0");
    if (t->create(&p.p, &self) == WSYNC_OK)
      c.warn("create accepted params with struct_size 0; read a field only when struct_size covers it");
    if (self) t->destroy(self), self = nullptr;
  }
}

void check_unknown_option(Ctx& c, const Config& cfg, const wsync_transport_v1_t* t) {
  Stores s;
  if (!s.start(c, 1)) return;
  Params p(cfg, t, 0, 1, s.get(0));
  wsync_option_t bad = WSYNC_OPTION(kUnknownKey, "1");
  p.opts.push_back(bad);
  void* self = nullptr;
  const std::string what = std::string("create with the unknown option '") + kUnknownKey + "'";
  c.step(what);
  ::wsync::clear_error();
  wsync_status_t st = t->create(p.wire(), &self);
  if (st == WSYNC_OK && self != nullptr) t->destroy(self);
  if (st == WSYNC_ERR_NO_DEVICE) {
    c.skip("no device: " + what + " returned WSYNC_ERR_NO_DEVICE before looking at the options: " + last_error());
    return;
  }
  if (c.refused(st, what, WSYNC_ERR_INVALID_ARGUMENT))
    c.expect(contains(last_error(), kUnknownKey),
             std::string("the error message does not name the key '") + kUnknownKey + "': \"" + last_error() + "\"");
}

void check_rank_world(Ctx& c, const Config& cfg, const wsync_transport_v1_t* t) {
  Stores s;
  if (!s.start(c, 1)) return;
  struct Case {
    uint32_t rank, world;
  } cases[] = {{1, 1}, {2, 2}, {7, 3}, {0, 0}, {1, 0}};
  for (const auto& k : cases) {
    Params p(cfg, t, k.rank, k.world, s.get(0));
    void* self = nullptr;
    const std::string what = "create(rank " + std::to_string(k.rank) + " of a world of " + std::to_string(k.world) + ")";
    c.step(what);
    ::wsync::clear_error();
    wsync_status_t st = t->create(p.wire(), &self);
    if (st == WSYNC_OK && self != nullptr) t->destroy(self);
    c.refused(st, what, WSYNC_ERR_INVALID_ARGUMENT, true);
  }
}

void check_destroy_null(Ctx& c, const wsync_transport_v1_t* t) {
  c.step("destroy(NULL)");
  t->destroy(nullptr);
}

void check_lifecycle(Ctx& c, const Config& cfg, const wsync_transport_v1_t* t) {
  Stores s;
  if (!s.start(c, 2)) return;
  void* sender = create_valid(c, cfg, t, 0, 2, s.get(0));
  if (sender == nullptr) return;
  void* receiver = create_valid(c, cfg, t, 1, 2, s.get(1));
  if (has_get_property(t)) {
    char buf[256];
    const std::string key = "wsync_conformance_no_such_property";
    c.step("get_property(self, '" + key + "', buf, 256)");
    ::wsync::clear_error();
    wsync_status_t st = t->get_property(sender, key.c_str(), buf, sizeof buf);
    c.refused(st, "get_property('" + key + "')", WSYNC_ERR_NOT_FOUND);
    c.step("get_property(self, NULL, buf, 256)");
    if (t->get_property(sender, nullptr, buf, sizeof buf) == WSYNC_OK) c.warn("get_property with a NULL key returned WSYNC_OK");
  } else {
    c.note("get_property: absent (optional)");
  }
  if (t->abort != nullptr) {
    c.step("abort(self) twice, then destroy");
    t->abort(sender);
    t->abort(sender);
  } else {
    c.note("abort: absent (optional)");
  }
  c.step("destroy(sender)");
  t->destroy(sender);
  if (receiver != nullptr) {
    c.step("destroy(receiver)");
    t->destroy(receiver);
  }
}

// Waits on one connected instance as the core does: with an event fd (1.2), wait(0), arm, and
// sleep on the fd; without one, wait in 20 ms slices. A sleep on the fd that runs out while the
// very next wait(0) succeeds means the fd did not signal progress: that is reported.
class Waiter {
 public:
  Waiter(const wsync_transport_v1_t* t, void* self) : t_(t), self_(self) {
    int32_t fd = -1;
    if (has_event_fd(t) && t->get_event_fd(self, &fd) == WSYNC_OK) fd_ = fd;
  }
  int fd() const { return fd_; }
  template <typename Fn>  // Fn: wsync_status_t(int64_t timeout_ms)
  wsync_status_t wait(Fn fn, Clock::time_point deadline, std::string* why) {
    for (;;) {
      wsync_status_t st = fn(fd_ >= 0 ? 0 : 20);
      if (st != WSYNC_ERR_TIMEOUT) return st;
      if (Clock::now() >= deadline) return WSYNC_ERR_TIMEOUT;
      if (fd_ < 0) continue;
      int32_t armed = 0;
      if ((st = t_->arm(self_, &armed)) != WSYNC_OK) {
        *why = "arm failed: " + status_str(st) + ": " + last_error();
        return st;
      }
      if (!armed) continue;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, kSilentMs) == 0 && fn(0) == WSYNC_OK) {
        *why = "the event fd stayed silent for " + std::to_string(kSilentMs) +
               " ms after arm answered armed=1, yet the operation had completed (the core would sleep through it)";
        return WSYNC_ERR_INTERNAL;
      }
    }
  }

 private:
  static constexpr int kSilentMs = 3000;
  const wsync_transport_v1_t* t_;
  void* self_;
  int fd_ = -1;
};

void fill(std::vector<uint8_t>* v, uint64_t seq) {
  for (size_t i = 0; i < v->size(); ++i) (*v)[i] = static_cast<uint8_t>((i * 131 + seq * 17 + (i >> 12)) & 0xff);
}

void check_loopback(Ctx& c, const Config& cfg, const wsync_transport_v1_t* t) {
  if (!(t->caps & WSYNC_TRANSPORT_CAP_HOST_MEMORY)) {
    c.skip("not a host-memory transport; its data path needs a device and is not checked here");
    return;
  }
  if (!cfg.loopback) {
    c.skip("--no-loopback");
    return;
  }
  Stores s;
  if (!s.start(c, 2)) return;
  void* tx = create_valid(c, cfg, t, 0, 2, s.get(0));
  if (tx == nullptr) return;
  void* rx = create_valid(c, cfg, t, 1, 2, s.get(1));
  if (rx == nullptr) {
    t->destroy(tx);
    return;
  }
  const size_t kBytes = (1u << 20) + 3;  // odd on purpose
  std::vector<uint8_t> src(kBytes), dst(kBytes);
  if (t->caps & WSYNC_TRANSPORT_CAP_STAGING_ONLY) {
    wsync_buffer_t b = WSYNC_BUFFER_INIT;
    b.data = src.data();
    b.len = src.size();
    c.step("register_staging(sender, 1 host buffer)");
    wsync_status_t st = t->register_staging(tx, &b, 1);
    if (st != WSYNC_OK) c.fail("register_staging failed: " + status_str(st) + ": " + last_error());
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(cfg.timeout_ms > 4000 ? cfg.timeout_ms - 3000 : 1000);
  const int kBuckets = 2;
  std::atomic<int> posted{-1};  // the last seq the receiver posted
  std::atomic<bool> rx_failed{false};
  std::string rx_error;
  wsync_status_t rx_conn = WSYNC_OK;
  std::thread receiver([&] {
    rx_conn = t->connect(rx, 10000);
    if (rx_conn != WSYNC_OK) {
      rx_error = "connect(rank 1) failed: " + status_str(rx_conn) + ": " + last_error();
      rx_failed = true;
      return;
    }
    Waiter rx_waiter(t, rx);
    for (int seq = 0; seq < kBuckets; ++seq) {
      std::memset(dst.data(), 0, dst.size());
      // Three uneven regions that cover the bucket.
      wsync_iov_t iov[3] = {{dst.data(), 1000}, {dst.data() + 1000, 4096}, {dst.data() + 5096, kBytes - 5096}};
      wsync_status_t st = t->recv_post(rx, static_cast<uint64_t>(seq), iov, 3);
      if (st != WSYNC_OK) {
        rx_error = "recv_post(seq " + std::to_string(seq) + ") failed: " + status_str(st) + ": " + last_error();
        rx_failed = true;
        return;
      }
      posted = seq;
      std::string why;
      st = rx_waiter.wait([&](int64_t ms) { return t->recv_wait(rx, static_cast<uint64_t>(seq), ms); }, deadline, &why);
      if (st != WSYNC_OK) {
        rx_error = "recv_wait(seq " + std::to_string(seq) + ") failed: " +
                   (why.empty() ? status_str(st) + ": " + last_error() : why);
        rx_failed = true;
        return;
      }
      std::vector<uint8_t> want(kBytes);
      fill(&want, static_cast<uint64_t>(seq));
      if (dst != want) {
        size_t i = 0;
        while (i < kBytes && dst[i] == want[i]) ++i;
        rx_error = "bucket " + std::to_string(seq) + " arrived with wrong bytes (first difference at byte " +
                   std::to_string(i) + ")";
        rx_failed = true;
        return;
      }
    }
  });
  c.step("connect(rank 0) while rank 1 connects");
  wsync_status_t st = t->connect(tx, 10000);
  if (st != WSYNC_OK) {
    c.fail("connect(rank 0) failed: " + status_str(st) + ": " + last_error());
  } else {
    Waiter tx_waiter(t, tx);
    if (has_event_fd(t)) c.note("event fd of rank 0: " + std::to_string(tx_waiter.fd()) + " (waits sleep on it)");
    for (int seq = 0; seq < kBuckets && !rx_failed; ++seq) {
      fill(&src, static_cast<uint64_t>(seq));
      while (posted.load() < seq && !rx_failed && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (rx_failed) break;
      if (posted.load() < seq) {
        c.fail("the receiver never posted bucket " + std::to_string(seq));
        break;
      }
      wsync_buffer_t b = WSYNC_BUFFER_INIT;
      b.data = src.data();
      b.len = src.size();
      const uint32_t ranks[1] = {1};
      c.step("send_post(seq " + std::to_string(seq) + ", " + std::to_string(kBytes) + " bytes, to rank 1)");
      if ((st = t->send_post(tx, static_cast<uint64_t>(seq), &b, ranks, 1)) != WSYNC_OK) {
        c.fail("send_post(seq " + std::to_string(seq) + ") failed: " + status_str(st) + ": " + last_error());
        break;
      }
      c.step("send_wait(seq " + std::to_string(seq) + ")" + (tx_waiter.fd() >= 0 ? ", sleeping on the event fd" : " in 20 ms slices"));
      std::string why;
      st = tx_waiter.wait([&](int64_t ms) { return t->send_wait(tx, static_cast<uint64_t>(seq), ms); }, deadline, &why);
      if (st != WSYNC_OK) {
        c.fail("send_wait(seq " + std::to_string(seq) + ") failed: " +
               (why.empty() ? status_str(st) + ": " + last_error() : why));
        break;
      }
    }
  }
  if (st != WSYNC_OK && t->abort != nullptr) t->abort(rx);  // unblock the receiver
  c.step("waiting for the receiver thread");
  receiver.join();
  if (rx_failed) c.fail(rx_error);
  if (st == WSYNC_OK && !rx_failed)
    c.note(std::to_string(kBuckets) + " buckets of " + std::to_string(kBytes) + " bytes moved and verified");
  c.step("forget_peer(sender, 1)");
  t->forget_peer(tx, 1);
  c.step("destroy(receiver), destroy(sender)");
  t->destroy(rx);
  t->destroy(tx);
}

}  // namespace

Summary run_transport_suite(const Config& cfg) {
  Summary sum;
  CheckResult load =
      run_check(cfg, {"load: through the real loader (wsync::load_transport)", [&](Ctx& c) { check_load(c, cfg); }});
  report(cfg, load, &sum);
  if (load.verdict == Verdict::Skip) {
    sum.no_device = true;
    if (!cfg.quiet) std::printf("skipped: no device (the plugin refuses to load without one)\n");
    return sum;
  }
  if (load.verdict == Verdict::Fail) return sum;
  ::wsync::LoadedTransport lt;
  if (::wsync::load_transport(cfg.path, &lt) != WSYNC_OK || lt.table == nullptr) {
    ++sum.failed;
    return sum;
  }
  const wsync_transport_v1_t* t = lt.table;
  // Loading a device transport initialised CUDA in this process (its entry point counts the
  // devices), and a child forked after that cannot use CUDA ("initialization error", seen on the
  // first real GPU run): its checks run here, where a crash ends the run.
  Config run_cfg = cfg;
  if (cfg.fork && !(t->caps & WSYNC_TRANSPORT_CAP_HOST_MEMORY)) {
    run_cfg.fork = false;
    if (!cfg.quiet) std::printf("note: a device transport: its checks run in this process, not in forked children\n");
  }
  std::vector<Check> checks = {
      {"table: struct_size, abi_version, name, version, caps, required functions", [&](Ctx& c) { check_table(c, cfg, t); }},
      {"create: NULL params or NULL out is refused", [&](Ctx& c) { check_create_null(c, cfg, t); }},
      {"create: garbage options are refused (NULL array, NULL key)", [&](Ctx& c) { check_create_garbage(c, cfg, t); }},
      {"create: an unknown option is refused with WSYNC_ERR_INVALID_ARGUMENT naming the key",
       [&](Ctx& c) { check_unknown_option(c, cfg, t); }},
      {"create: a rank outside the world, or an empty world, is refused", [&](Ctx& c) { check_rank_world(c, cfg, t); }},
      {"destroy(NULL) is safe", [&](Ctx& c) { check_destroy_null(c, t); }},
      {"create, optional functions (get_property, abort), destroy", [&](Ctx& c) { check_lifecycle(c, cfg, t); }},
      {"loopback: two buckets from rank 0 to rank 1 in this process, verified", [&](Ctx& c) { check_loopback(c, cfg, t); }},
  };
  for (const auto& ch : checks) report(cfg, run_check(run_cfg, ch), &sum);
  return sum;
}

}  // namespace conformance
