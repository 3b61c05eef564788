// wsync_group_init / wsync_group_destroy / wsync_group_abort / stats: building and tearing
// down a group. The update path (send_batch, finalize) is in group_update.cpp.
#include <poll.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/options.h"
#include "control/group_info.h"
#include "group/group.h"
#include "group/group_device.h"
#include "group/group_engines.h"
#include "store/host_port.h"

using namespace wsync;

namespace {

constexpr uint64_t kMinBucket = 4096;
constexpr uint64_t kMaxBucket = 1ull << 40;

wsync_status_t apply_options(wsync_group_t* g, const OptionList& opts, std::string* addr_file) {
  for (const auto& kv : opts) {
    const std::string& k = kv.first;
    const std::string& v = kv.second;
    wsync_status_t st = WSYNC_OK;
    if (k == "bucket_bytes") {
      st = parse_u64_option(k, v, kMinBucket, kMaxBucket, &g->rule.bucket_bytes);
      g->bucket_bytes_set = true;
    } else if (k == "staging_buckets") {
      uint64_t n = 0;
      st = parse_u64_option(k, v, 2, 16, &n);
      g->staging_buckets = static_cast<uint32_t>(n);
    } else if (k == "timeout_ms") {
      uint64_t n = 0;
      st = parse_u64_option(k, v, 1, 24ull * 3600 * 1000, &n);
      g->timeout_ms = static_cast<int64_t>(n);
    } else if (k == "device") {
      uint64_t n = 0;
      st = parse_u64_option(k, v, 0, 1023, &n);
      g->requested_device = static_cast<int>(n);
    } else if (k == "verify_payload") {
      st = parse_bool_option(k, v, &g->verify_payload);
    } else if (k == "store_addr_file") {
      if (v.empty()) st = fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'store_addr_file' is empty");
      *addr_file = v;
    } else if (engines_option(g, k, v, &st)) {
      // HTTP engines (group_engines.cpp)
    } else if (k.compare(0, 10, "transport.") == 0 || k.compare(0, 8, "adapter.") == 0) {
      // validated by the plugin
    } else {
      st = fail(WSYNC_ERR_INVALID_ARGUMENT,
                "unknown group option '%s' (known: bucket_bytes, staging_buckets, timeout_ms, "
                "device, verify_payload, store_addr_file, engines, engine_receivers, engine_api_key, engine_connect_timeout_ms, "
                "engine_timeout_ms, engine_retries, transport.*, adapter.*)", k.c_str());
    }
    if (st != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

wsync_status_t write_addr_file(const std::string& path, const std::string& addr) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr)
    return fail(WSYNC_ERR_IO, "cannot write store_addr_file '%s': %s", tmp.c_str(), std::strerror(errno));
  std::fprintf(f, "%s\n", addr.c_str());
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return fail(WSYNC_ERR_IO, "cannot rename '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(errno));
  return WSYNC_OK;
}

// Handle one HELLO; on success the peer is placed at its rank. A refused receiver is told why
// and the sender keeps waiting for the right one.
void admit(wsync_group_t* g, std::unique_ptr<Peer> p, const Frame& f, int64_t timeout_ms) {
  ByteReader r(f.body);
  uint32_t proto = 0, rank = 0, pid = 0;
  std::string name;
  std::string reason;
  wsync_status_t code = WSYNC_ERR_REJECTED;
  if (f.type != static_cast<uint16_t>(MsgType::kHello) || !r.u32(&proto) || !r.u32(&rank) || !r.u32(&pid) ||
      !r.str(&name, 4096)) {
    reason = "the first message was not a valid HELLO";
    code = WSYNC_ERR_PROTOCOL;
  } else if (proto != kControlProtocolVersion) {
    reason = "receiver speaks control protocol " + std::to_string(proto) + ", the sender speaks " +
             std::to_string(kControlProtocolVersion);
    code = WSYNC_ERR_VERSION_MISMATCH;
  } else if (name != g->group_name) {
    reason = "receiver asked for group '" + name + "' but this sender hosts group '" + g->group_name + "'";
  } else if (rank < 1 || rank > g->num_receivers) {
    reason = "rank " + std::to_string(rank) + " is out of range: this group has receivers 1.." +
             std::to_string(g->num_receivers);
  } else if (g->peers[rank - 1]) {
    reason = "rank " + std::to_string(rank) + " already joined (pid " + std::to_string(g->peers[rank - 1]->pid) +
             "); each rank may join once";
  }
  if (!reason.empty()) {
    WSYNC_LOGW("group '%s': refused a receiver: %s", g->group_name.c_str(), reason.c_str());
    ByteWriter w;
    w.i32(code);
    w.str(reason);
    p->conn.send(MsgType::kReject, w.data(), timeout_ms);
    return;
  }
  p->rank = rank;
  p->pid = pid;
  p->conn.set_peer_name("receiver rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")");
  ByteWriter w;
  w.u32(g->num_receivers + 1);
  if (p->conn.send(MsgType::kWelcome, w.data(), timeout_ms) != WSYNC_OK) {
    WSYNC_LOGW("group '%s': rank %u left during its welcome", g->group_name.c_str(), rank);
    return;
  }
  WSYNC_LOGI("group '%s': receiver rank %u (pid %u) joined", g->group_name.c_str(), rank, pid);
  p->conn.set_abort_flag(&g->aborted);
  g->peers[rank - 1] = std::move(p);
}

std::string missing_ranks(wsync_group_t* g) {
  std::string s;
  for (uint32_t r = 1; r <= g->num_receivers; ++r)
    if (!g->peers[r - 1]) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// Accept control connections until every rank sent a valid HELLO.
wsync_status_t accept_receivers(wsync_group_t* g, int64_t deadline) {
  std::vector<std::unique_ptr<Peer>> pending;  // connected, HELLO not read yet
  uint32_t joined = 0;
  while (joined < g->num_receivers) {
    if (g->aborted.load()) return fail(WSYNC_ERR_ABORTED, "group init aborted");
    if (g->engines_failed.load()) return fail(WSYNC_ERR_ENGINE, "an engine refused to join the group");
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return fail(WSYNC_ERR_TIMEOUT, "group '%s': receiver rank(s) %s did not join in time (store at %s)",
                  g->group_name.c_str(), missing_ranks(g).c_str(), g->store_addr.c_str());
    int fd = -1;
    if (g->listener.accept(std::min<int64_t>(left, 20), &fd) == WSYNC_OK) {
      auto p = std::make_unique<Peer>();
      p->conn.adopt(fd);
      p->conn.set_peer_name("a joining receiver");
      pending.push_back(std::move(p));
    }
    for (size_t i = 0; i < pending.size();) {
      Frame f;
      wsync_status_t st = pending[i]->conn.recv(&f, 0);
      if (st == WSYNC_ERR_TIMEOUT) {
        ++i;
        continue;
      }
      std::unique_ptr<Peer> p = std::move(pending[i]);
      pending.erase(pending.begin() + static_cast<long>(i));
      if (st != WSYNC_OK) continue;  // closed before HELLO
      admit(g, std::move(p), f, std::max<int64_t>(left, 1000));
    }
    joined = 0;
    for (auto& p : g->peers) joined += p ? 1 : 0;
  }
  return WSYNC_OK;
}

// Wait until each receiver reports its transport connected (JOINED).
wsync_status_t wait_joined(wsync_group_t* g, int64_t deadline) {
  for (auto& p : g->peers) {
    for (;;) {
      if (g->aborted.load()) return fail(WSYNC_ERR_ABORTED, "group init aborted");
      if (g->engines_failed.load()) return fail(WSYNC_ERR_ENGINE, "an engine refused to join the group");
      int64_t left = deadline - now_ms();
      Frame f;
      wsync_status_t st = p->conn.recv(&f, std::max<int64_t>(0, std::min<int64_t>(left, 50)));
      if (st == WSYNC_ERR_TIMEOUT) {
        if (left <= 0)
          return fail(WSYNC_ERR_TIMEOUT, "group '%s': %s did not connect its transport in time",
                      g->group_name.c_str(), p->conn.peer_name().c_str());
        continue;
      }
      if (st != WSYNC_OK) return fail_msg(st, "group init: " + last_error());
      if (f.type == static_cast<uint16_t>(MsgType::kJoined)) break;
      if (f.type == static_cast<uint16_t>(MsgType::kNack)) {
        ByteReader r(f.body);
        uint64_t seq;
        int32_t code = WSYNC_ERR_INTERNAL;
        std::string why;
        r.u64(&seq);
        r.i32(&code);
        r.str(&why, 1 << 16);
        return fail(wire_failure(code, WSYNC_ERR_PROTOCOL), "group init: %s could not connect its transport: %s",
                    p->conn.peer_name().c_str(), why.c_str());
      }
      return fail(WSYNC_ERR_PROTOCOL, "group init: %s sent %s instead of JOINED", p->conn.peer_name().c_str(),
                  msg_type_name(f.type));
    }
  }
  return WSYNC_OK;
}

void teardown(wsync_group_t* g) {
  if (g->http_engines && g->adapter_self && !g->engines.empty()) {  // leave the engines' group: best effort
    g->http.request_timeout_ms = std::min<int64_t>(g->http.request_timeout_ms, 5000);
    g->http.retries = 0;
    if (engines_step(g, WSYNC_STEP_DESTROY) != WSYNC_OK)
      WSYNC_LOGW("group '%s': leaving the engines' weight-update group failed: %s", g->group_name.c_str(),
                 last_error().c_str());
  }
  std::vector<pollfd> fds;
  for (auto& p : g->peers)
    if (p && p->conn.open()) {
      p->conn.set_abort_flag(nullptr);
      p->conn.send(MsgType::kClose, {}, 200);
      p->conn.shutdown_and_drain();
      if (p->conn.open()) fds.push_back(pollfd{p->conn.fd(), POLLIN, 0});
    }
  // Give late messages (an error ACK in flight) a moment to land, so closing does not reset.
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 20) > 0)
    for (auto& p : g->peers)
      if (p && p->conn.open()) p->conn.shutdown_and_drain();
  if (g->transport_self) g->transport.table->destroy(g->transport_self);
  g->transport_self = nullptr;
  if (g->adapter_self) g->adapter.table->destroy(g->adapter_self);
  g->adapter_self = nullptr;
  g->peers.clear();
  g->listener.close();
  g->store_client.reset();
  if (g->store_server) g->store_server->stop();
  g->store_server.reset();
  device_teardown(g);
  g->staging.clear();
}

// Which memory the pipeline stages in, from what the transport moves: host memory (growing on
// use), or CUDA memory allocated now, bounded by staging_buckets x bucket_bytes.
wsync_status_t choose_staging(wsync_group_t* g) {
  const uint64_t caps = g->transport.table->caps;
  const char* name = g->transport.table->name;
  if (!(caps & (WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_CUDA_MEMORY)))
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' declares neither host nor CUDA memory", name);
  g->staging_only = (caps & WSYNC_TRANSPORT_CAP_STAGING_ONLY) != 0;
  g->device_staging = !(caps & WSYNC_TRANSPORT_CAP_HOST_MEMORY);
  if (g->staging_only && !g->device_staging)
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' declares CAP_STAGING_ONLY for host memory; wsync registers fixed "
                "staging only for transports that move CUDA memory only", name);
  if (!g->device_staging) return WSYNC_OK;
  if (g->verify_payload)
    return fail(WSYNC_ERR_UNSUPPORTED, "option verify_payload checksums bytes on the host; transport '%s' moves CUDA "
                "memory (compare checksums in the engine instead)", name);
  if (g->staging_only && !g->rule.allow_split)
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' sends from fixed staging buffers and must split tensors larger "
                "than a bucket, which adapter '%s' does not allow", name, g->adapter.table->name);
  return device_init_staging(g);
}

// Engines that read the NCCL id where torch looks (SGLang, LMDeploy) and a transport that can put
// it there (nccl): have it published under this group's name, unless the caller chose otherwise.
void add_torch_group(wsync_group_t* g, OptionList* t_opts) {
  if (!(g->adapter.table->caps & WSYNC_ADAPTER_CAP_TORCH_STORE_ID) ||
      !(g->transport.table->caps & WSYNC_TRANSPORT_CAP_TORCH_STORE_ID))
    return;
  bool group = false, lazy = false;
  for (const auto& kv : *t_opts) {
    group |= kv.first == "torch_group";
    lazy |= kv.first == "lazy_init";
  }
  if (!group) t_opts->push_back({"torch_group", g->group_name});
  // torch creates a ProcessGroupNCCL's communicator at its first collective, not at init.
  if (!lazy) t_opts->push_back({"lazy_init", "1"});
  WSYNC_LOGI("group '%s': transport '%s' publishes its id for torch and creates its communicator lazily, as "
             "adapter '%s' needs", g->group_name.c_str(), g->transport.table->name, g->adapter.table->name);
}

// The NCCL unique id, for engines that take it in their init request (vLLM).
void read_nccl_id(wsync_group_t* g) {
  const wsync_transport_v1_t* t = g->transport.table;
  if (t->struct_size < offsetof(wsync_transport_v1_t, get_property) + sizeof(void*) || t->get_property == nullptr)
    return;
  char b64[512];
  if (t->get_property(g->transport_self, "nccl_unique_id_b64", b64, sizeof b64) == WSYNC_OK) g->nccl_unique_id_b64 = b64;
  clear_error();
}

// A STAGING_ONLY transport learns the staging buffers once, before connect.
wsync_status_t register_staging(wsync_group_t* g) {
  if (!g->staging_only) return WSYNC_OK;
  const wsync_transport_v1_t* t = g->transport.table;
  if (t->struct_size < offsetof(wsync_transport_v1_t, register_staging) + sizeof(void*) || t->register_staging == nullptr)
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' declares CAP_STAGING_ONLY but has no register_staging", t->name);
  std::vector<wsync_buffer_t> bufs;
  for (const auto& s : g->staging) {
    wsync_buffer_t b = WSYNC_BUFFER_INIT;
    b.device_type = s.mem.on_device() ? WSYNC_DEVICE_CUDA : WSYNC_DEVICE_CPU;
    b.device_index = s.mem.on_device() ? s.mem.device() : 0;
    b.data = s.mem.data();
    b.len = s.mem.size();
    bufs.push_back(b);
  }
  clear_error();
  wsync_status_t st = t->register_staging(g->transport_self, bufs.data(), static_cast<uint32_t>(bufs.size()));
  if (st != WSYNC_OK) return fail(st, "transport '%s' register_staging failed: %s", t->name, last_error().c_str());
  return WSYNC_OK;
}

wsync_status_t group_init(const wsync_group_config_t* config, wsync_group_t* g) {
  const wsync_group_config_t defaults = WSYNC_GROUP_CONFIG_INIT;
  wsync_group_config_t cfg;
  wsync_status_t st = read_struct(config, "config", &cfg, defaults);
  if (st != WSYNC_OK) return st;
  if (cfg.num_receivers > 4096)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->num_receivers is %u; it must be 1..4096", cfg.num_receivers);
  g->num_receivers = cfg.num_receivers;
  g->group_name = cfg.group_name ? cfg.group_name : "wsync";
  if (g->group_name.empty() || g->group_name.size() > 256 || g->group_name.find_first_of("/\n=") != std::string::npos)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "group name '%s' must be 1..256 characters without '/', '=' or newlines",
                g->group_name.c_str());

  OptionList opts;
  if ((st = copy_options(cfg.options, cfg.num_options, &opts)) != WSYNC_OK) return st;
  std::string addr_file;
  if ((st = apply_options(g, opts, &addr_file)) != WSYNC_OK) return st;
  // config->timeout_ms bounds init only; later calls default to the timeout_ms option.
  const int64_t init_timeout = cfg.timeout_ms >= 0 ? cfg.timeout_ms : g->timeout_ms;
  const int64_t deadline = deadline_after(init_timeout);

  std::string host;
  uint16_t port = 0;
  if ((st = parse_host_port(cfg.store_addr ? cfg.store_addr : "127.0.0.1:0", &host, &port)) != WSYNC_OK) return st;

  // Plugins first: a missing one fails fast, before any socket is opened.
  if ((st = load_adapter(cfg.adapter ? cfg.adapter : "native", &g->adapter)) != WSYNC_OK) return st;
  OptionList adapter_opts = options_with_prefix(opts, "adapter.");
  std::vector<wsync_option_t> a_c = to_c_options(adapter_opts);
  wsync_adapter_params_t ap = {sizeof(wsync_adapter_params_t), g->num_receivers, g->group_name.c_str(),
                               a_c.data(), a_c.size()};
  clear_error();
  if ((st = g->adapter.table->create(&ap, &g->adapter_self)) != WSYNC_OK)
    return fail(st, "adapter '%s' create failed: %s", g->adapter.table->name, last_error().c_str());
  wsync_layout_rule_t lr = WSYNC_LAYOUT_RULE_INIT;
  if ((st = g->adapter.table->get_layout(g->adapter_self, &lr)) != WSYNC_OK)
    return fail(st, "adapter '%s' get_layout failed: %s", g->adapter.table->name, last_error().c_str());
  const wsync_adapter_v1_t* at = g->adapter.table;
  g->http_engines = (at->caps & WSYNC_ADAPTER_CAP_HTTP) != 0;
  if (g->http_engines &&
      (at->struct_size < offsetof(wsync_adapter_v1_t, build_requests) + sizeof(void*) || at->build_requests == nullptr))
    return fail(WSYNC_ERR_UNSUPPORTED, "adapter '%s' declares CAP_HTTP but has no build_requests", at->name);
  if (!g->http_engines && !(at->caps & WSYNC_ADAPTER_CAP_INBAND_MANIFEST))
    return fail(WSYNC_ERR_UNSUPPORTED, "adapter '%s' declares neither CAP_INBAND_MANIFEST nor CAP_HTTP", at->name);
  if (g->http_engines) {
    if ((st = engines_health(g, cfg.num_receivers)) != WSYNC_OK) return st;
  } else if (cfg.num_receivers < 1) {
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->num_receivers is %u; it must be 1..4096", cfg.num_receivers);
  }
  if (lr.struct_size >= offsetof(wsync_layout_rule_t, bucket_bytes) + sizeof(uint64_t) && lr.bucket_bytes != 0) {
    if (g->bucket_bytes_set && g->rule.bucket_bytes != lr.bucket_bytes)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option bucket_bytes is %llu but adapter '%s' cuts buckets at %llu bytes "
                  "(both sides must agree); drop bucket_bytes or set the adapter's size to match",
                  static_cast<unsigned long long>(g->rule.bucket_bytes), g->adapter.table->name,
                  static_cast<unsigned long long>(lr.bucket_bytes));
    if (lr.bucket_bytes < kMinBucket || lr.bucket_bytes > kMaxBucket)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '%s' asks for %llu-byte buckets, outside %llu..%llu",
                  g->adapter.table->name, static_cast<unsigned long long>(lr.bucket_bytes),
                  static_cast<unsigned long long>(kMinBucket), static_cast<unsigned long long>(kMaxBucket));
    g->rule.bucket_bytes = lr.bucket_bytes;
  }
  g->rule.kind = lr.kind;
  g->rule.alignment = lr.alignment ? lr.alignment : 1;
  g->rule.allow_split = lr.allow_split != 0;

  if ((st = load_transport(cfg.transport ? cfg.transport : "ucx", &g->transport)) != WSYNC_OK) return st;
  if ((st = choose_staging(g)) != WSYNC_OK) return st;

  // Rendezvous: the store, then the control listener announced in it.
  if ((st = TcpStoreServer::start(host, port, &g->store_server)) != WSYNC_OK) return st;
  g->store_addr = g->store_server->address();
  std::string s_host;
  uint16_t s_port = 0;
  parse_host_port(g->store_addr, &s_host, &s_port);
  if ((st = TcpStoreClient::connect(s_host, s_port, 5000, &g->store_client)) != WSYNC_OK) return st;
  g->store_handle.client = g->store_client.get();
  if ((st = g->listener.listen(host, 0)) != WSYNC_OK) return st;

  GroupInfo info;
  info.protocol = kControlProtocolVersion;
  info.group_name = g->group_name;
  info.world_size = g->num_receivers + 1;
  info.transport = g->transport.table->name;
  info.control_host = s_host;
  info.control_port = g->listener.port();
  for (const auto& kv : options_with_prefix(opts, "transport.")) {
    if (kv.first.find_first_of("=\n") != std::string::npos || kv.second.find('\n') != std::string::npos)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'transport.%s' may not contain '=' in its key or a newline",
                  kv.first.c_str());
    info.transport_options.push_back(kv);
  }
  std::vector<uint8_t> blob = encode_group_info(info);
  if ((st = g->store_client->set(kGroupInfoKey, blob.data(), blob.size())) != WSYNC_OK) return st;
  if (!addr_file.empty() && (st = write_addr_file(addr_file, g->store_addr)) != WSYNC_OK) return st;
  WSYNC_LOGI("group '%s': store at %s, waiting for %u receiver(s), transport '%s', adapter '%s', bucket %llu bytes",
             g->group_name.c_str(), g->store_addr.c_str(), g->num_receivers, g->transport.table->name,
             g->adapter.table->name, static_cast<unsigned long long>(g->rule.bucket_bytes));

  // The transport instance first (it talks to no peer yet): an engine may need what it made (the
  // NCCL unique id) in its init request.
  OptionList t_opts = options_with_prefix(opts, "transport.");
  add_torch_group(g, &t_opts);
  std::vector<wsync_option_t> t_c = to_c_options(t_opts);
  wsync_transport_params_t tp = {sizeof(wsync_transport_params_t), 0, g->num_receivers + 1, 0,
                                 g->group_name.c_str(), &g->store_handle, t_c.data(), t_c.size(),
                                 std::max<int64_t>(deadline - now_ms(), 1), g->device_staging ? g->device : -1, 0};
  clear_error();
  if ((st = g->transport.table->create(&tp, &g->transport_self)) != WSYNC_OK)
    return fail(st, "transport '%s' create failed: %s", g->transport.table->name, last_error().c_str());
  if ((st = register_staging(g)) != WSYNC_OK) return st;
  read_nccl_id(g);

  // HTTP engines are told to join now; they answer once joined, so the requests run while the
  // receivers are accepted and the transport connects.
  EngineCalls init_calls;
  if (g->http_engines && (st = init_calls.start(g, WSYNC_STEP_INIT, nullptr, nullptr, 0, &g->engines_failed)) != WSYNC_OK)
    return st;
  // Unmodified engines have no wsync receiver: no control channel, their HTTP replies are the
  // acknowledgements. Engines that embed one join it like any receiver.
  const bool control = !g->http_engines || g->engines_embed_wsync;
  if (control) {
    g->peers.resize(g->num_receivers);
    st = accept_receivers(g, deadline);
  }
  if (st == WSYNC_OK) {
    clear_error();
    if ((st = g->transport.table->connect(g->transport_self, std::max<int64_t>(deadline - now_ms(), 1))) != WSYNC_OK)
      st = fail(st, "transport '%s' connect failed: %s", g->transport.table->name, last_error().c_str());
  }
  if (st == WSYNC_OK && control) st = wait_joined(g, deadline);
  if (g->http_engines) {
    // An engine's own refusal explains a receiver that never joined best.
    std::string why = last_error();
    if (st != WSYNC_OK && !g->engines_failed.load()) init_calls.cancel();
    wsync_status_t hst = init_calls.finish();
    if (hst != WSYNC_OK) return hst;
    if (st != WSYNC_OK) return fail_msg(st, why);
  }
  if (st != WSYNC_OK) return st;

  if (!g->device_staging) g->staging.resize(g->staging_buckets);  // host slots grow on first use
  g->stats.num_receivers = g->num_receivers;
  WSYNC_LOGI("group '%s': all %u receiver(s) joined", g->group_name.c_str(), g->num_receivers);
  return WSYNC_OK;
}

}  // namespace

extern "C" {

WSYNC_API wsync_status_t wsync_group_init(const wsync_group_config_t* config, wsync_group_t** out) {
  clear_error();
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = nullptr;
  auto* g = new (std::nothrow) wsync_group();
  if (g == nullptr) return fail(WSYNC_ERR_OUT_OF_MEMORY, "cannot allocate a group");
  wsync_status_t st = WSYNC_ERR_INTERNAL;
  try {
    st = group_init(config, g);
  } catch (const std::bad_alloc&) {
    st = fail(WSYNC_ERR_OUT_OF_MEMORY, "out of memory during group init");
  } catch (...) {
    st = fail(WSYNC_ERR_INTERNAL, "internal error during group init (please report)");
  }
  if (st != WSYNC_OK) {
    std::string why = last_error();
    teardown(g);
    delete g;
    fail_msg(st, why);
    return st;
  }
  *out = g;
  return WSYNC_OK;
}

WSYNC_API const char* wsync_group_store_addr(const wsync_group_t* group) {
  return group ? group->store_addr.c_str() : "";
}

WSYNC_API void wsync_group_abort(wsync_group_t* group) {
  if (group == nullptr) return;
  group->aborted.store(true);
  if (group->transport_self && group->transport.table->abort) group->transport.table->abort(group->transport_self);
}

WSYNC_API wsync_status_t wsync_group_set_cuda_stream(wsync_group_t* group, void* stream) {
  clear_error();
  if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
  group->caller_stream = stream;
  return WSYNC_OK;
}

WSYNC_API wsync_status_t wsync_group_get_stats(const wsync_group_t* group, wsync_group_stats_t* stats) {
  clear_error();
  if (group == nullptr || stats == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group or stats is NULL");
  uint32_t size = stats->struct_size;
  if (size < 2 * sizeof(uint32_t))
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "stats->struct_size is %u; initialise with WSYNC_GROUP_STATS_INIT", size);
  wsync_group_stats_t s = group->stats;
  s.struct_size = size < sizeof s ? size : static_cast<uint32_t>(sizeof s);
  std::memcpy(stats, &s, s.struct_size);
  return WSYNC_OK;
}

WSYNC_API void wsync_group_destroy(wsync_group_t* group) {
  if (group == nullptr) return;
  std::string saved = last_error();
  teardown(group);
  delete group;
  if (!saved.empty()) fail_msg(WSYNC_OK, saved);  // destroy never changes the caller's error detail
}

}  // extern "C"
