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

wsync_status_t apply_core_option(wsync_group_t* g, const std::string& k, const std::string& v, std::string* addr_file,
                                 bool* known) {
  uint64_t n = 0;
  wsync_status_t st = WSYNC_OK;
  *known = true;
  if (k == "bucket_bytes") {
    st = parse_u64_option(k, v, kMinBucket, kMaxBucket, &g->rule.bucket_bytes);
    g->bucket_bytes_set = true;
  } else if (k == "staging_buckets") {
    if ((st = parse_u64_option(k, v, 2, 16, &n)) == WSYNC_OK) g->staging_buckets = static_cast<uint32_t>(n);
  } else if (k == "route") {
    st = parse_route(v, &g->route_spec);
    g->route_set = true;
  } else if (k == "window") {
    if ((st = parse_u64_option(k, v, 1, kMaxWindow, &n)) == WSYNC_OK) g->window = static_cast<uint32_t>(n);
  } else if (k == "piece_bytes") {
    st = parse_u64_option(k, v, 0, kMaxPieceBytes, &g->piece_bytes);
    if (st == WSYNC_OK && g->piece_bytes != 0 && g->piece_bytes < kMinPieceBytes)
      st = fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'piece_bytes' is %llu; it must be 0 (whole buckets) or %llu..%llu",
                static_cast<unsigned long long>(g->piece_bytes), static_cast<unsigned long long>(kMinPieceBytes),
                static_cast<unsigned long long>(kMaxPieceBytes));
    g->piece_bytes_set = true;
  } else if (k == "timeout_ms") {
    if ((st = parse_u64_option(k, v, 1, kMaxTimeoutMs, &n)) == WSYNC_OK) g->timeout_ms = static_cast<int64_t>(n);
  } else if (k == "device") {
    if ((st = parse_u64_option(k, v, 0, 1023, &n)) == WSYNC_OK) g->requested_device = static_cast<int>(n);
  } else if (k == "verify_payload") {
    st = parse_bool_option(k, v, &g->verify_payload);
    g->verify_payload_set = true;
  } else if (k == "secret") {
    g->secret_option = v;
  } else if (k == "secret_file") {
    if (v.empty()) st = fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'secret_file' is empty");
    g->secret_file_option = v;
  } else if (k == "torch_clients") {
    st = parse_bool_option(k, v, &g->torch_clients);
  } else if (k == "num_senders") {
    if ((st = parse_u64_option(k, v, 1, 4096, &n)) == WSYNC_OK) g->num_senders = static_cast<uint32_t>(n);
    g->planned = true;
  } else if (k == "sender_rank") {
    if ((st = parse_u64_option(k, v, 0, 4095, &n)) == WSYNC_OK) g->sender_rank = static_cast<uint32_t>(n);
  } else if (k == "sender0_store") {
    if (v.empty()) st = fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'sender0_store' is empty");
    g->sender0_store = v;
  } else if (k == "membership") {
    if (v != "fixed" && v != "elastic")
      st = fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'membership' is '%s'; use fixed (a receiver that fails breaks the "
                "group) or elastic (it is removed and the group goes on)", v.c_str());
    g->elastic = v == "elastic";
  } else if (k == "commit_quorum") {
    if ((st = parse_u64_option(k, v, 1, 4096, &n)) == WSYNC_OK) g->commit_quorum = static_cast<uint32_t>(n);
  } else if (k == "init_receivers") {
    if ((st = parse_u64_option(k, v, 1, 4096, &n)) == WSYNC_OK) g->init_receivers = static_cast<uint32_t>(n);
  } else if (k == "store_addr_file") {
    if (v.empty()) st = fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'store_addr_file' is empty");
    *addr_file = v;
  } else {
    *known = false;
  }
  return st;
}

}  // namespace

wsync_status_t apply_group_options(wsync_group_t* g, const OptionList& opts, std::string* addr_file) {
  for (const auto& kv : opts) {
    const std::string& k = kv.first;
    bool known = false;
    wsync_status_t st = apply_core_option(g, k, kv.second, addr_file, &known);
    if (!known && !engines_option(g, k, kv.second, &st) && k.compare(0, 10, "transport.") != 0 &&
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
