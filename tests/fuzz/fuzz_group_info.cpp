// libFuzzer target: decode_group_info (control/group_info.h), what a receiver reads from the
// group's store before it connects anywhere. Run by ctest as fuzz.group_info.
//
// Beyond "no crash, no UB, no leak": an accepted record has every field in range and no NUL
// anywhere, and encode_group_info of it decodes to the same record (decode is not canonical:
// unknown keys, blank lines and repeated keys are dropped).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "control/group_info.h"

namespace {

bool same(const wsync::GroupInfo& a, const wsync::GroupInfo& b) {
  return a.protocol == b.protocol && a.group_name == b.group_name && a.world_size == b.world_size &&
         a.transport == b.transport && a.control_host == b.control_host && a.control_port == b.control_port &&
         a.transport_options == b.transport_options;
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> in(data, data + size);
  wsync::GroupInfo g;
  if (wsync::decode_group_info(in, &g) != WSYNC_OK) return 0;
  if (g.world_size < 2 || g.world_size > (1u << 20) || g.control_port == 0 || g.protocol > (1u << 20)) std::abort();
  if (has_nul(g.group_name) || has_nul(g.transport) || has_nul(g.control_host)) std::abort();
  for (const auto& kv : g.transport_options)
    if (kv.first.empty() || has_nul(kv.first) || has_nul(kv.second)) std::abort();
  wsync::GroupInfo again;
  if (wsync::decode_group_info(wsync::encode_group_info(g), &again) != WSYNC_OK) std::abort();
  if (!same(g, again)) std::abort();
  return 0;
}
