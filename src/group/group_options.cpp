// The group options (docs/ABI.md, "Group options"): each key parsed and range-checked, a bad value
// or an unknown key refused naming the key.
#include "common/error.h"
#include "control/group_info.h"
#include "group/group_engines.h"
#include "group/group_internal.h"

namespace wsync {
namespace {

constexpr uint64_t kMinBucket = 4096;
constexpr uint64_t kMaxBucket = 1ull << 40;
constexpr uint64_t kMaxTimeoutMs = 24ull * 3600 * 1000;

// Setters for the table below: a number in [lo, hi] into a field of type T.
template <typename T>
wsync_status_t number(const std::string& k, const std::string& v, uint64_t lo, uint64_t hi, T* out) {
  uint64_t n = 0;
  wsync_status_t st = parse_u64_option(k, v, lo, hi, &n);
  if (st == WSYNC_OK) *out = static_cast<T>(n);
  return st;
}
template <typename T>
wsync_status_t number(const std::string& k, const std::string& v, uint64_t lo, uint64_t hi, std::optional<T>* out) {
  T n{};
  wsync_status_t st = number(k, v, lo, hi, &n);
  if (st == WSYNC_OK) *out = n;
  return st;
}
wsync_status_t nonempty(const std::string& k, const std::string& v, std::string* out) {
  *out = v;
  return v.empty() ? fail(WSYNC_ERR_INVALID_ARGUMENT, "option '%s' is empty", k.c_str()) : WSYNC_OK;
}

wsync_status_t piece_bytes(const std::string& k, const std::string& v, GroupOptions* o) {
  uint64_t n = 0;
  wsync_status_t st = parse_u64_option(k, v, 0, kMaxPieceBytes, &n);
  if (st == WSYNC_OK && n != 0 && n < kMinPieceBytes)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'piece_bytes' is %llu; it must be 0 (whole buckets) or %llu..%llu",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(kMinPieceBytes),
                static_cast<unsigned long long>(kMaxPieceBytes));
  if (st == WSYNC_OK) o->piece_bytes = n;
  return st;
}

wsync_status_t membership(const std::string& v, GroupOptions* o) {
  o->elastic = v == "elastic";
  if (v == "fixed" || v == "elastic") return WSYNC_OK;
  return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'membership' is '%s'; use fixed (a receiver that fails breaks the "
              "group) or elastic (it is removed and the group goes on)", v.c_str());
}

wsync_status_t engine_receivers(const std::string& v, GroupOptions* o) {
  o->engines_embed_wsync = v == "wsync";
  if (v == "none" || v == "wsync") return WSYNC_OK;
  return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'engine_receivers' is '%s'; use 'none' (unmodified engines) or "
              "'wsync' (engines that embed a wsync receiver)", v.c_str());
}

// One group option: its key and how its value is read into the options.
struct CoreOption {
  const char* key;
  wsync_status_t (*apply)(const std::string& k, const std::string& v, GroupOptions* o);
};

const CoreOption kCoreOptions[] = {
    {"bucket_bytes", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, kMinBucket, kMaxBucket, &o->bucket_bytes); }},
    {"staging_buckets", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 2, 16, &o->staging_buckets); }},
    {"route",
     [](auto&, auto& v, GroupOptions* o) {
       RouteSpec r;
       wsync_status_t st = parse_route(v, &r);
       if (st == WSYNC_OK) o->route = r;
       return st;
     }},
    {"window", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 1, kMaxWindow, &o->window); }},
    {"piece_bytes", piece_bytes},
    {"timeout_ms", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 1, kMaxTimeoutMs, &o->timeout_ms); }},
    {"device", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 0, 1023, &o->requested_device); }},
    {"verify_payload",
     [](auto& k, auto& v, GroupOptions* o) {
       bool b = false;
       wsync_status_t st = parse_bool_option(k, v, &b);
       if (st == WSYNC_OK) o->verify_payload = b;
       return st;
     }},
    {"secret",
     [](auto&, auto& v, GroupOptions* o) {
       o->secret = v;
       return WSYNC_OK;
     }},
    {"secret_file", [](auto& k, auto& v, GroupOptions* o) { return nonempty(k, v, &o->secret_file); }},
    {"torch_clients", [](auto& k, auto& v, GroupOptions* o) { return parse_bool_option(k, v, &o->torch_clients); }},
    {"num_senders", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 1, 4096, &o->num_senders); }},
    {"sender_rank", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 0, 4095, &o->sender_rank); }},
    {"sender0_store", [](auto& k, auto& v, GroupOptions* o) { return nonempty(k, v, &o->sender0_store); }},
    {"membership", [](auto&, auto& v, GroupOptions* o) { return membership(v, o); }},
    {"commit_quorum", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 1, 4096, &o->commit_quorum); }},
    {"init_receivers", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 1, 4096, &o->init_receivers); }},
    // HTTP engines
    {"engines",
     [](auto&, auto& v, GroupOptions* o) {
       o->engines_spec = v;
       return WSYNC_OK;
     }},
    {"engine_receivers", [](auto&, auto& v, GroupOptions* o) { return engine_receivers(v, o); }},
    {"engine_api_key",
     [](auto&, auto& v, GroupOptions* o) {
       o->http.api_key = v;
       return WSYNC_OK;
     }},
    {"engine_connect_timeout_ms",
     [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 1, 3600 * 1000, &o->http.connect_timeout_ms); }},
    {"engine_timeout_ms",
     [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 1, kMaxTimeoutMs, &o->http.request_timeout_ms); }},
    {"engine_retries", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 0, 100, &o->http.retries); }},
    {"engine_recheck_ms", [](auto& k, auto& v, GroupOptions* o) { return number(k, v, 100, 3600 * 1000, &o->engine_recheck_ms); }},
    {"engine_resume_on_failure",
     [](auto& k, auto& v, GroupOptions* o) {
       if (v == "auto") {
         o->engines_resume_on_failure = ResumeOnFailure::kAuto;
         return WSYNC_OK;
       }
       uint64_t n = 0;
       wsync_status_t st = parse_u64_option(k, v, 0, 1, &n);
       if (st != WSYNC_OK) return fail(st, "option '%s' must be 0, 1 or auto, got '%s'", k.c_str(), v.c_str());
       o->engines_resume_on_failure = n == 1 ? ResumeOnFailure::kAlways : ResumeOnFailure::kNever;
       return WSYNC_OK;
     }},
};

wsync_status_t apply_core_option(wsync_group_t* g, const std::string& k, const std::string& v, std::string* addr_file,
                                 bool* known) {
  *known = true;
  if (k == "store_addr_file") return nonempty(k, v, addr_file);
  for (const CoreOption& o : kCoreOptions)
    if (k == o.key) return o.apply(k, v, &g->cfg);
  *known = false;
  return WSYNC_OK;
}

}  // namespace

wsync_status_t apply_group_config(const wsync_group_config_t& c, const OptionList& opts, wsync_group_t* g,
                                  std::string* addr_file) {
  if (c.num_receivers > 4096)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->num_receivers is %u; it must be 1..4096", c.num_receivers);
  g->cfg.num_receivers = c.num_receivers;
  g->cfg.group_name = c.group_name ? c.group_name : "wsync";
  if (g->cfg.group_name.empty() || g->cfg.group_name.size() > 256 ||
      g->cfg.group_name.find_first_of("/\n=") != std::string::npos)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "group name '%s' must be 1..256 characters without '/', '=' or newlines",
                g->cfg.group_name.c_str());
  for (const auto& kv : opts) {
    const std::string& k = kv.first;
    bool known = false;
    wsync_status_t st = apply_core_option(g, k, kv.second, addr_file, &known);
    if (!known && k.compare(0, 10, "transport.") != 0 &&
        k.compare(0, 8, "adapter.") != 0)  // transport.* and adapter.* are validated by the plugin
      st = fail(WSYNC_ERR_INVALID_ARGUMENT,
                "unknown group option '%s' (known: bucket_bytes, staging_buckets, window, piece_bytes, route, timeout_ms, device, verify_payload, "
                "store_addr_file, secret, secret_file, torch_clients, num_senders, sender_rank, sender0_store, membership, commit_quorum, init_receivers, engines, engine_receivers, engine_api_key, engine_connect_timeout_ms, "
                "engine_timeout_ms, engine_retries, engine_resume_on_failure, transport.*, adapter.*)", k.c_str());
    if (st != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

}  // namespace wsync
