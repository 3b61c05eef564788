// wsync_group_init, step by step: the config and options, the adapter (its layout and what its
// engine needs), the transport, the rendezvous (store and control port), the transport instance,
// the receivers joining, and finally the pipeline thread. Also the teardown that undoes them.
#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "control/control_auth.h"
#include "control/group_info.h"
#include "group/group_device.h"
#include "group/engine_members.h"
#include "group/group_engines.h"
#include "group/group_members.h"
#include "group/group_internal.h"
#include "loader/transport_choice.h"
#include "store/host_port.h"

namespace wsync {
namespace {

constexpr uint64_t kMinBucket = 4096;
constexpr uint64_t kMaxBucket = 1ull << 40;

// What init needs from the caller's config beyond the group's own fields.
struct InitArgs {
  wsync_group_config_t cfg;
  OptionList opts;
  std::string addr_file;
  std::string host;
  uint16_t port = 0;
  int64_t deadline = 0;
};

// The options as given, before the adapter and the transport say more: the shape starts from them.
void shape_from_options(wsync_group_t* g) {
  const GroupOptions& o = g->cfg;
  GroupShape& s = g->shape;
  s.num_receivers = o.num_receivers;
  s.init_receivers = o.init_receivers;
  s.staging_buckets = o.staging_buckets;
  s.window = o.window.value_or(0);
  if (o.route) s.route_spec = *o.route;
  // Elastic groups relay only when asked to (option route): a relay that leaves takes the update
  // of the members below it along (they leave and catch up), a star loses only the one.
  if (o.elastic && !o.route) s.route_spec.shape = RouteShape::kStar;
  if (o.piece_bytes) s.piece_bytes = *o.piece_bytes;
  // Senders that plan and may relay (lanes): a bucket per lane and batch is a few pieces, and
  // each of its relays' hops costs a piece's time; smaller pieces keep a lane's chain full
  // (docs/PERFORMANCE.md "lanes": 0.56 of the floor with 2 MiB pieces, 0.87 with 512 KiB).
  else if (o.num_senders && s.route_spec.shape != RouteShape::kStar) s.piece_bytes = kLanePieceBytes;
  if (o.bucket_bytes) s.rule.bucket_bytes = *o.bucket_bytes;
  s.planned = o.num_senders.has_value();
  s.num_senders = o.num_senders.value_or(1);
}

wsync_status_t read_config(const wsync_group_config_t* config, wsync_group_t* g, InitArgs* a) {
  const wsync_group_config_t defaults = WSYNC_GROUP_CONFIG_INIT;
  wsync_status_t st = read_struct(config, "config", &a->cfg, defaults);
  if (st != WSYNC_OK) return st;
  if ((st = copy_options(a->cfg.options, a->cfg.num_options, &a->opts)) != WSYNC_OK) return st;
  if ((st = apply_group_config(a->cfg, a->opts, g, &a->addr_file)) != WSYNC_OK) return st;
  shape_from_options(g);
  if ((st = senders_check_options(g)) != WSYNC_OK) return st;
  if ((st = members_check_options(g)) != WSYNC_OK) return st;
  // Zero means default: config->timeout_ms 0 or < 0 takes the option timeout_ms. It bounds init
  // only; later calls default to the option.
  a->deadline = deadline_after(a->cfg.timeout_ms > 0 ? a->cfg.timeout_ms : g->cfg.timeout_ms);
  return parse_host_port(a->cfg.store_addr ? a->cfg.store_addr : "127.0.0.1:0", &a->host, &a->port);
}

// The adapter's layout rule becomes the planner's; a bucket size the engine protocol fixes wins
// over the default and must agree with the caller's.
wsync_status_t apply_layout(wsync_group_t* g, const wsync_layout_rule_t& lr) {
  const char* name = g->plugins.adapter.table->name;
  if (lr.struct_size >= WSYNC_STRUCT_SIZE(wsync_layout_rule_t, bucket_bytes) && lr.bucket_bytes != 0) {
    if (g->cfg.bucket_bytes && *g->cfg.bucket_bytes != lr.bucket_bytes)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option bucket_bytes is %llu but adapter '%s' cuts buckets at %llu bytes "
                  "(both sides must agree); drop bucket_bytes or set the adapter's size to match",
                  static_cast<unsigned long long>(g->shape.rule.bucket_bytes), name,
                  static_cast<unsigned long long>(lr.bucket_bytes));
    if (lr.bucket_bytes < kMinBucket || lr.bucket_bytes > kMaxBucket)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "adapter '%s' asks for %llu-byte buckets, outside %llu..%llu", name,
                  static_cast<unsigned long long>(lr.bucket_bytes), static_cast<unsigned long long>(kMinBucket),
                  static_cast<unsigned long long>(kMaxBucket));
    g->shape.rule.bucket_bytes = lr.bucket_bytes;
  }
  g->shape.rule.kind = lr.kind;
  g->shape.rule.alignment = lr.alignment ? lr.alignment : 1;
  g->shape.rule.allow_split = lr.allow_split != 0;
  return WSYNC_OK;
}

// The adapter: load, create with the adapter.* options, its layout, and (HTTP engines) the
// servers' health, which also fixes the number of receivers.
wsync_status_t setup_adapter(wsync_group_t* g, const InitArgs& a) {
  wsync_status_t st = load_adapter(a.cfg.adapter ? a.cfg.adapter : "native", &g->plugins.adapter);
  if (st != WSYNC_OK) return st;
  const wsync_adapter_v1_t* at = g->plugins.adapter.table;
  OptionList adapter_opts = options_with_prefix(a.opts, "adapter.");
  std::vector<wsync_option_t> a_c = to_c_options(adapter_opts);
  wsync_adapter_params_t ap = WSYNC_ADAPTER_PARAMS_INIT;
  ap.num_receivers = g->shape.num_receivers;
  ap.group_name = g->cfg.group_name.c_str();
  ap.options = a_c.data();
  ap.num_options = a_c.size();
  clear_error();
  if ((st = at->create(&ap, &g->plugins.adapter_self)) != WSYNC_OK)
    return fail(st, "adapter '%s' create failed: %s", at->name, plugin_error("adapter", at->name).c_str());
  wsync_layout_rule_t lr = WSYNC_LAYOUT_RULE_INIT;
  if ((st = at->get_layout(g->plugins.adapter_self, &lr)) != WSYNC_OK)
    return fail(st, "adapter '%s' get_layout failed: %s", at->name,
                plugin_error("adapter", at->name).c_str());
  g->shape.http_engines = (at->caps & WSYNC_ADAPTER_CAP_HTTP) != 0;  // the loader checked build_requests
  if (!g->shape.http_engines && !(at->caps & WSYNC_ADAPTER_CAP_INBAND_MANIFEST))
    return fail(WSYNC_ERR_UNSUPPORTED, "adapter '%s' declares neither CAP_INBAND_MANIFEST nor CAP_HTTP", at->name);
  if (g->shape.http_engines) {
    if ((st = engines_health(g, a.cfg.num_receivers, &g->shape.num_receivers, &g->shape.init_receivers)) != WSYNC_OK) return st;
    if ((st = engines_probe_and_reset(g)) != WSYNC_OK) return st;
  } else if (a.cfg.num_receivers < 1) {
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->num_receivers is %u; it must be 1..4096", a.cfg.num_receivers);
  }
  return apply_layout(g, lr);
}

// Which memory the pipeline stages in, from what the transport moves: host memory (growing on
// use), or CUDA memory allocated now, bounded by staging_buckets x bucket_bytes.
wsync_status_t choose_staging(wsync_group_t* g) {
  const uint64_t caps = g->plugins.transport.table->caps;
  const char* name = g->plugins.transport.table->name;
  if (!(caps & (WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_CUDA_MEMORY)))
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' declares neither host nor CUDA memory", name);
  g->shape.staging_only = (caps & WSYNC_TRANSPORT_CAP_STAGING_ONLY) != 0;
  g->shape.device_staging = !(caps & WSYNC_TRANSPORT_CAP_HOST_MEMORY);
  if (g->shape.staging_only && !g->shape.device_staging)
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' declares CAP_STAGING_ONLY for host memory; wsync registers fixed "
                "staging only for transports that move CUDA memory only", name);
  // Payload checksums are on by default where the bytes travel through host memory.
  g->shape.verify_payload = g->cfg.verify_payload.value_or(!g->shape.device_staging);
  if (!g->shape.device_staging) return WSYNC_OK;
  if (g->shape.verify_payload)
    return fail(WSYNC_ERR_UNSUPPORTED, "option verify_payload checksums bytes on the host; transport '%s' moves CUDA "
                "memory (compare checksums in the engine instead)", name);
  if (g->shape.staging_only && !g->shape.rule.allow_split)
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' sends from fixed staging buffers and must split tensors larger "
                "than a bucket, which adapter '%s' does not allow", name, g->plugins.adapter.table->name);
  return device_init_staging(g);
}

// How buckets move: up to `window` on the wire at once, each in pieces of piece_bytes, where the
// transport can keep several messages apart (CAP_PIECES). HTTP engines take one bucket per request
// and answer it once its bytes are in: one bucket at a time (an engine that refuses a bucket stops
// reading the next), and unmodified ones (no wsync receiver) whole. Host staging has a slot for
// every bucket on the wire.
wsync_status_t choose_pipeline(wsync_group_t* g) {
  const bool window_set = g->shape.window != 0;
  if (!window_set) g->shape.window = g->shape.staging_buckets;
  const bool pieces = (g->plugins.transport.table->caps & WSYNC_TRANSPORT_CAP_PIECES) != 0;
  const bool whole = !pieces || (g->shape.http_engines && !g->cfg.engines_embed_wsync);
  if (whole && g->cfg.piece_bytes.value_or(0) != 0)
    return fail(WSYNC_ERR_UNSUPPORTED, "option piece_bytes needs a transport that keeps several messages apart "
                "(CAP_PIECES) and receivers that embed wsync; transport '%s'%s moves whole buckets",
                g->plugins.transport.table->name, pieces ? " with unmodified HTTP engines" : "");
  if ((!pieces || g->shape.http_engines) && window_set && g->shape.window > 1)
    return fail(WSYNC_ERR_UNSUPPORTED, "option window needs a transport that keeps several messages apart "
                "(CAP_PIECES) and receivers that are not HTTP engines; transport '%s'%s moves one bucket at a time",
                g->plugins.transport.table->name, pieces ? " with HTTP engines" : "");
  if (whole) g->shape.piece_bytes = 0;
  if (!pieces || g->shape.http_engines) g->shape.window = 1;
  // Relays forward pieces over the group's transport, and only receivers that embed wsync can.
  const bool star = route_spec_text(g->shape.route_spec) == "star";
  if (!star && (!pieces || g->shape.http_engines || g->shape.piece_bytes == 0)) {
    if (g->cfg.route)
      return fail(WSYNC_ERR_UNSUPPORTED, "option route=%s needs a transport that moves pieces (CAP_PIECES, piece_bytes "
                  "above 0) and receivers that are not HTTP engines; transport '%s' here can only send from the sender "
                  "(route=star)", route_spec_text(g->shape.route_spec).c_str(), g->plugins.transport.table->name);
    g->shape.route_spec.shape = RouteShape::kStar;  // the default, where relays cannot work
  }
  g->shape.staging_buckets = std::max(g->shape.staging_buckets, g->shape.window);
  return WSYNC_OK;
}

// The group secret: given (option, file, environment) or generated here. Receivers without it
// cannot join; only the explicit torch mode lets unmodified torch workers use the store.
wsync_status_t find_secret(wsync_group_t* g) {
  wsync_status_t st = find_group_secret(g->cfg.secret, g->cfg.secret_file, true, &g->rdv.secret);
  if (st != WSYNC_OK) return st;
  const bool torch_only = g->shape.http_engines && !g->cfg.engines_embed_wsync;
  if (g->rdv.secret.origin == "generated" && !torch_only)
    WSYNC_LOGW("group '%s': no group secret was given, so one was generated that no receiver knows; give the sender and "
               "its receivers the same secret (option secret or secret_file, or WSYNC_GROUP_SECRET)",
               g->cfg.group_name.c_str());
  else
    WSYNC_LOGI("group '%s': members authenticate with the group secret (%s)%s", g->cfg.group_name.c_str(),
               g->rdv.secret.origin.c_str(), g->cfg.torch_clients ? "; torch clients may use the store's non-wsync keys" : "");
  return WSYNC_OK;
}

// The store, a client of it for this process, the control listener, and the group's announcement.
wsync_status_t open_rendezvous(wsync_group_t* g, const InitArgs& a) {
  wsync_status_t st = find_secret(g);
  if (st != WSYNC_OK) return st;
  StoreServerOptions so;
  so.secret = g->rdv.secret.value;
  so.torch_clients = g->cfg.torch_clients;
  // the receivers and this process's own clients; sender 0's store also serves the other senders
  so.members = g->shape.num_receivers + 2 + (g->cfg.sender_rank == 0 ? g->shape.num_senders - 1 : 0);
  if ((st = TcpStoreServer::start(a.host, a.port, so, &g->rdv.store_server)) != WSYNC_OK) return st;
  g->rdv.store_addr = g->rdv.store_server->address();
  std::string s_host;
  uint16_t s_port = 0;
  parse_host_port(g->rdv.store_addr, &s_host, &s_port);
  if ((st = TcpStoreClient::connect(s_host, s_port, 5000, g->rdv.secret.value, &g->rdv.store_client)) != WSYNC_OK) return st;
  g->rdv.store_handle.client = g->rdv.store_client.get();
  if ((st = g->rdv.listener.listen(a.host, 0)) != WSYNC_OK) return st;
  GroupInfo info;
  info.protocol = kControlProtocolVersion;
  info.group_name = g->cfg.group_name;
  info.world_size = g->shape.num_receivers + 1;
  info.transport = g->plugins.transport.table->name;
  info.control_host = s_host;
  info.control_port = g->rdv.listener.port();
  info.piece_bytes = g->shape.piece_bytes;
  info.window = g->shape.window;
  info.route = route_spec_text(g->shape.route_spec);
  info.num_senders = g->shape.num_senders;
  info.planned = g->shape.planned;
  info.sender_rank = g->cfg.sender_rank;
  for (const auto& kv : options_with_prefix(a.opts, "transport.")) {
    if (kv.first.find_first_of("=\n") != std::string::npos || kv.second.find('\n') != std::string::npos)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'transport.%s' may not contain '=' in its key or a newline",
                  kv.first.c_str());
    info.transport_options.push_back(kv);
  }
  std::vector<uint8_t> blob = encode_group_info(info);
  if ((st = g->rdv.store_client->set(kGroupInfoKey, blob.data(), blob.size())) != WSYNC_OK) return st;
  WSYNC_LOGI("group '%s': store at %s, waiting for %u receiver(s), transport '%s', adapter '%s', bucket %llu bytes",
             g->cfg.group_name.c_str(), g->rdv.store_addr.c_str(), g->shape.num_receivers, g->plugins.transport.table->name,
             g->plugins.adapter.table->name, static_cast<unsigned long long>(g->shape.rule.bucket_bytes));
  if (a.addr_file.empty()) return WSYNC_OK;
  return write_file_atomic(a.addr_file, g->rdv.store_addr + "\n", 0644, "store_addr_file");
}

// What the adapter says its engine needs from the data plane (since plugin ABI 1.2): hints for the
// transport and the transport properties its requests carry. Read, never interpreted here.
wsync_status_t adapter_needs(wsync_group_t* g, const OptionList& options, OptionList* hints,
                             std::vector<std::string>* properties) {
  const wsync_adapter_v1_t* at = g->plugins.adapter.table;
  auto get_needs = WSYNC_HAS_FIELD(at, wsync_adapter_v1_t, get_needs) ? at->get_needs : nullptr;
  if (get_needs == nullptr) return WSYNC_OK;
  wsync_adapter_needs_t needs = WSYNC_ADAPTER_NEEDS_INIT;
  clear_error();
  wsync_status_t st = get_needs(g->plugins.adapter_self, &needs);
  if (st != WSYNC_OK) return fail(st, "adapter '%s' get_needs failed: %s", at->name,
                                    plugin_error("adapter", at->name).c_str());
  OptionList given;
  if ((st = copy_options(needs.transport_hints, needs.num_transport_hints, &given)) != WSYNC_OK)
    return fail_msg(st, "adapter '" + std::string(at->name) + "' gave malformed transport hints: " + last_error());
  for (const auto& h : given) {
    bool overridden = false;  // the caller's transport.<key> wins over a hint
    for (const auto& o : options) overridden |= o.first == h.first;
    if (!overridden) hints->push_back(h);
  }
  for (uint64_t i = 0; i < needs.num_transport_properties && needs.transport_properties != nullptr; ++i)
    if (needs.transport_properties[i] != nullptr) properties->push_back(needs.transport_properties[i]);
  return WSYNC_OK;
}

// The properties the adapter asked for that the transport has (an engine's init request may need
// what the transport made at create, before anyone connects).
void read_properties(wsync_group_t* g, const std::vector<std::string>& keys) {
  const wsync_transport_v1_t* t = g->plugins.transport.table;
  auto get_property = WSYNC_HAS_FIELD(t, wsync_transport_v1_t, get_property) ? t->get_property : nullptr;
  for (const auto& k : keys) {
    char buf[1024];
    if (get_property != nullptr && get_property(g->plugins.transport_self, k.c_str(), buf, sizeof buf) == WSYNC_OK) {
      buf[sizeof buf - 1] = '\0';
      engines_add_property(g, k, buf);
    } else {
      WSYNC_LOGD("group '%s': transport '%s' has no property '%s' for adapter '%s'", g->cfg.group_name.c_str(), t->name,
                 k.c_str(), g->plugins.adapter.table->name);
    }
  }
  clear_error();
}

// A STAGING_ONLY transport learns the staging buffers once, before connect.
wsync_status_t register_staging(wsync_group_t* g) {
  if (!g->shape.staging_only) return WSYNC_OK;
  const wsync_transport_v1_t* t = g->plugins.transport.table;
  auto reg = WSYNC_HAS_FIELD(t, wsync_transport_v1_t, register_staging) ? t->register_staging : nullptr;
  if (reg == nullptr)
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' declares CAP_STAGING_ONLY but has no register_staging", t->name);
  std::vector<wsync_buffer_t> bufs;
  for (const auto& s : g->staging.slots) {
    wsync_buffer_t b = WSYNC_BUFFER_INIT;
    b.device_type = s.mem.on_device() ? WSYNC_DEVICE_CUDA : WSYNC_DEVICE_CPU;
    b.device_index = s.mem.on_device() ? s.mem.device() : 0;
    b.data = s.mem.data();
    b.len = s.mem.size();
    bufs.push_back(b);
  }
  clear_error();
  wsync_status_t st = reg(g->plugins.transport_self, bufs.data(), static_cast<uint32_t>(bufs.size()));
  return st == WSYNC_OK ? st : fail(st, "transport '%s' register_staging failed: %s", t->name,
                                           plugin_error("transport", t->name).c_str());
}

// The transport instance (it talks to no peer yet): an engine may need what it made in its init
// request. Hints from the adapter go in unread.
wsync_status_t create_transport(wsync_group_t* g, const InitArgs& a) {
  const OptionList t_opts = options_with_prefix(a.opts, "transport.");
  OptionList hints;
  std::vector<std::string> properties;
  wsync_status_t st = adapter_needs(g, t_opts, &hints, &properties);
  if (st != WSYNC_OK) return st;
  hints.emplace_back(WSYNC_HINT_LOCAL_ADDRESS, a.host);  // where the user bound the store: the transport listens there too
  hints.emplace_back(WSYNC_HINT_AUTH_KEY, transport_auth_key(g->rdv.secret.value));  // what its own connections prove
  if (members_can_join(g)) hints.emplace_back(WSYNC_HINT_JOIN_LATER, "1");  // elastic: connect_peer per receiver
  std::vector<wsync_option_t> t_c = to_c_options(t_opts), h_c = to_c_options(hints);
  wsync_transport_params_t tp = WSYNC_TRANSPORT_PARAMS_INIT;
  tp.rank = 0;
  tp.world_size = g->shape.num_receivers + 1;
  tp.group_name = g->cfg.group_name.c_str();
  tp.store = &g->rdv.store_handle;
  tp.options = t_c.data();
  tp.num_options = t_c.size();
  tp.timeout_ms = std::max<int64_t>(a.deadline - now_ms(), 1);
  tp.device_index = g->shape.device_staging ? g->dev.device : -1;
  tp.hints = h_c.data();
  tp.num_hints = h_c.size();
  clear_error();
  if ((st = g->plugins.transport.table->create(&tp, &g->plugins.transport_self)) != WSYNC_OK)
    return fail(st, "transport '%s' create failed: %s", g->plugins.transport.table->name,
                plugin_error("transport", g->plugins.transport.table->name).c_str());
  if ((st = register_staging(g)) != WSYNC_OK) return st;
  read_properties(g, properties);
  return WSYNC_OK;
}

// After connect: the transport's event fd, so waits sleep instead of spinning.
wsync_status_t read_event_fd(wsync_group_t* g) {
  const wsync_transport_v1_t* t = g->plugins.transport.table;
  auto get_fd = WSYNC_HAS_FIELD(t, wsync_transport_v1_t, get_event_fd) ? t->get_event_fd : nullptr;
  int32_t fd = -1;
  if (get_fd != nullptr && get_fd(g->plugins.transport_self, &fd) != WSYNC_OK) {
    WSYNC_LOGW("group '%s': transport '%s' has no event fd (%s); its waits are polled", g->cfg.group_name.c_str(), t->name,
               last_error().c_str());
    fd = -1;
  }
  g->plugins.transport_fd = fd;
  clear_error();
  return WSYNC_OK;
}

// Elastic (hint join_later): the transport connects to each receiver that joined, one by one.
wsync_status_t connect_members(wsync_group_t* g, int64_t deadline) {
  for (const auto& p : g->members.peers) {
    if (p->dropped) continue;
    wsync_status_t st = connect_receiver(g, p.get(), deadline);
    if (st != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

// Receivers join (control channel) while HTTP engines are told to join; then the transport connects.
wsync_status_t join(wsync_group_t* g, int64_t deadline) {
  EngineCalls init_calls;
  wsync_status_t st = WSYNC_OK;
  if ((st = engines_start_init(g, &init_calls)) != WSYNC_OK) return st;
  // Unmodified engines have no wsync receiver: no control channel, their HTTP replies are the
  // acknowledgements. Engines that embed one join it like any receiver.
  const bool control = !g->shape.http_engines || g->cfg.engines_embed_wsync;
  if (control) {
    members_open_slots(g);
    st = accept_receivers(g, deadline);
  }
  if (st == WSYNC_OK) {
    clear_error();
    if ((st = g->plugins.transport.table->connect(g->plugins.transport_self, std::max<int64_t>(deadline - now_ms(), 1))) != WSYNC_OK)
      st = fail(st, "transport '%s' connect failed: %s", g->plugins.transport.table->name,
                plugin_error("transport", g->plugins.transport.table->name).c_str());
  }
  if (st == WSYNC_OK && control && members_can_join(g)) st = connect_members(g, deadline);
  if (st == WSYNC_OK && control) st = wait_joined(g, deadline);
  if (!g->shape.http_engines) return st;
  engines_inits_sent(g);
  // An engine's own refusal explains a receiver that never joined best.
  std::string why = last_error();
  if (st != WSYNC_OK && !g->engines.failed.load()) init_calls.cancel();
  wsync_status_t hst = init_calls.finish();
  if (hst != WSYNC_OK) return hst;
  return st == WSYNC_OK ? st : fail_msg(st, why);
}

}  // namespace

wsync_status_t group_init(const wsync_group_config_t* config, wsync_group_t* g) {
  InitArgs a;
  wsync_status_t st = read_config(config, g, &a);
  if (st == WSYNC_OK) st = setup_adapter(g, a);  // plugins first: a missing one fails before any socket
  if (st == WSYNC_OK) st = load_group_transport(a.cfg.transport, a.host, &g->plugins.transport);
  if (st == WSYNC_OK) st = members_check_transport(g);
  if (st == WSYNC_OK) st = choose_staging(g);
  if (st == WSYNC_OK) st = choose_pipeline(g);
  if (st == WSYNC_OK) st = open_rendezvous(g, a);
  if (st == WSYNC_OK) st = senders_open(g, a.host, a.deadline);
  if (st == WSYNC_OK) st = create_transport(g, a);
  if (st == WSYNC_OK) st = join(g, a.deadline);
  if (st == WSYNC_OK) st = route_members(g, a.deadline);
  if (st == WSYNC_OK) st = read_event_fd(g);
  if (st != WSYNC_OK) return st;
  if (!g->shape.device_staging) staging_open_host(g);
  members_init(g);
  engines_start_elastic(g);
  WSYNC_LOGI("group '%s': %zu of %u receiver(s) joined", g->cfg.group_name.c_str(), members_ranks(g).size(),
             g->shape.num_receivers);
  return pipeline_start(g);
}

void group_teardown(wsync_group_t* g) {
  pipeline_stop(g);
  // Only a group that sent INIT tears the engine side down: one refused at the probe must not
  // destroy a group of the same name that another trainer runs on those servers.
  if (g->shape.http_engines && g->engines.joined && g->plugins.adapter_self && !g->engines.servers.empty()) {
    engines_readmit_stop(g);  // (elastic: servers on their way back stop there)
    engines_abandon(g);  // an update still open (destroyed mid-update): end it on the engines first
    // Leave the engines' group, also after a failure: best effort, each request bounded; every
    // server that was sent INIT (elastic: dropped ones too, they may hold the group).
    HttpOptions quick = g->cfg.http;
    quick.request_timeout_ms = std::min<int64_t>(quick.request_timeout_ms, 5000);
    quick.retries = 0;
    std::vector<size_t> inited;
    for (size_t i = 0; i < g->engines.servers.size(); ++i)
      if (g->engines.servers[i].inited) inited.push_back(i);
    CallMode mode;
    mode.best_effort = true;
    mode.only = &inited;
    mode.http = &quick;
    engines_step(g, WSYNC_STEP_DESTROY, 0, mode);
  }
  members_close(g);
  if (g->plugins.transport_self) g->plugins.transport.table->destroy(g->plugins.transport_self);
  g->plugins.transport_self = nullptr;
  if (g->plugins.adapter_self) g->plugins.adapter.table->destroy(g->plugins.adapter_self);
  g->plugins.adapter_self = nullptr;
  g->rdv.listener.close();
  g->rdv.store_client.reset();
  senders_close(g);
  if (g->rdv.store_server) g->rdv.store_server->stop();
  g->rdv.store_server.reset();
  device_teardown(g);
  staging_close(g);
}

}  // namespace wsync
