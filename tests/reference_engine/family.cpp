// family.cpp — version parsing and the feature flags of each release family (see family.h).
#include "family.h"

#include <cstdio>
#include <cstdlib>
#include <tuple>

namespace refeng {

bool operator<(const Version& a, const Version& b) {
  return std::tie(a.major, a.minor, a.patch) < std::tie(b.major, b.minor, b.patch);
}
bool operator<=(const Version& a, const Version& b) { return !(b < a); }

namespace {

bool parse_version(const std::string& s, Version* v) {
  int parts[3] = {0, 0, 0};
  int n = 0;
  size_t i = 0;
  while (i < s.size() && n < 3) {
    size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i || j - i > 6) return false;
    parts[n++] = std::atoi(s.substr(i, j - i).c_str());
    if (j == s.size()) { i = j; break; }
    if (s[j] != '.') return false;
    i = j + 1;
    if (i == s.size()) return false;  // "0.5."
  }
  if (i != s.size() || n < 2) return false;
  *v = {parts[0], parts[1], parts[2]};
  return true;
}

void sglang_features(const Version& v, Family* f) {
  auto at_least = [&](int patch) { return Version{0, 5, patch} <= v; };
  SglangFeatures& s = f->sg;
  s.server_info_route = at_least(6);
  s.pause_body = s.continue_body = at_least(6);
  s.continue_torch_empty_cache = at_least(12);
  s.load_format = at_least(6);
  s.torch_empty_cache = at_least(11);
  s.selector = s.sessions = s.receive_prefix = at_least(21);
  s.unknown_group_crashes = !at_least(21);
  s.msgspec_models = at_least(15);
  s.flush_timeout = at_least(10);
  s.ready_route = s.launch_command = s.attn_dp_key = at_least(20);
  s.frontend_key = at_least(21);
  s.kv_events_key = at_least(13);
  s.startup_time_key = at_least(17);
  s.strict_bucket = at_least(23);
  s.version_needs_scheduler = at_least(19);
  s.paused_skips_version = v.patch == 6;
  s.dp_replicas_text = at_least(22);
  s.weight_version_routes = !at_least(6)    ? WeightVersionRoutes::kGetOnly
                            : !at_least(8)  ? WeightVersionRoutes::kBoth
                            : !at_least(21) ? WeightVersionRoutes::kDeprecated404
                                            : WeightVersionRoutes::kRemoved;
  f->validation = Validation::kSglang400;
  f->family = !at_least(6) ? "0.5.5" : !at_least(11) ? "0.5.6-0.5.10" : !at_least(21) ? "0.5.11-0.5.20"
            : !at_least(22) ? "0.5.21" : !at_least(23) ? "0.5.22" : "0.5.23";
}

void vllm_features(const Version& v, Family* f) {
  int m = v.minor;
  VllmFeatures& s = f->vl;
  s.update_list = m >= 29;
  s.unique_id_mode = m >= 30;
  s.shutdown_route = m >= 32;
  s.pause_wait_param = m <= 31;
  s.update_reuse = s.paused_rejects = s.dead_client_message = m >= 33;
  f->validation = m >= 32 ? Validation::kVllmFastapi : Validation::kVllmManual;
  f->family = m == 28 ? "0.28" : m == 29 ? "0.29" : m <= 31 ? "0.30-0.31" : m == 32 ? "0.32" : "0.33";
}

void lmdeploy_features(const Version& v, Family* f) {
  int m = v.minor;
  LmdeployFeatures& s = f->lm;
  s.weight_routes = m >= 14;
  s.ipc_route = m >= 18;
  s.envelope_401 = m >= 16;
  f->validation = m >= 16 ? Validation::kLmdeploy400 : Validation::kLmdeploy422;
  f->family = m == 13 ? "0.13" : m <= 15 ? "0.14-0.15" : m <= 17 ? "0.16-0.17" : "0.18";
}

}  // namespace

std::string default_version(const std::string& protocol) {
  if (protocol == "sglang") return "0.5.23";
  if (protocol == "vllm") return "0.33.0";
  if (protocol == "lmdeploy") return "0.18.0";
  return "";
}

bool make_family(const std::string& protocol, const std::string& version, Family* out, std::string* why) {
  Family f;
  f.protocol_name = protocol;
  f.version = version;
  if (!parse_version(version, &f.v)) {
    *why = "--engine-version must look like X.Y.Z, got '" + version + "'";
    return false;
  }
  const Version& v = f.v;
  if (protocol == "sglang") {
    f.protocol = Protocol::kSglang;
    if (v < Version{0, 5, 5} || Version{0, 5, 23} < v) { *why = "sglang versions 0.5.5 to 0.5.23 are supported"; return false; }
    sglang_features(v, &f);
  } else if (protocol == "vllm") {
    f.protocol = Protocol::kVllm;
    if (v.major != 0 || v.minor < 28 || v.minor > 33) { *why = "vllm versions 0.28 to 0.33 are supported"; return false; }
    vllm_features(v, &f);
  } else if (protocol == "lmdeploy") {
    f.protocol = Protocol::kLmdeploy;
    if (v.major != 0 || v.minor < 13 || v.minor > 18) { *why = "lmdeploy versions 0.13 to 0.18 are supported"; return false; }
    lmdeploy_features(v, &f);
  } else {
    *why = "--protocol must be sglang, vllm or lmdeploy";
    return false;
  }
  *out = f;
  return true;
}

}  // namespace refeng
