#include "control/group_info.h"

#include <cstdlib>

#include "common/error.h"
#include "common/names.h"

namespace wsync {

std::vector<uint8_t> encode_group_info(const GroupInfo& g) {
  std::string s = "protocol=" + std::to_string(g.protocol) + "\ngroup=" + g.group_name +
                  "\nworld_size=" + std::to_string(g.world_size) + "\ntransport=" + g.transport +
                  "\ncontrol_host=" + g.control_host + "\ncontrol_port=" + std::to_string(g.control_port) + "\n";
  if (g.piece_bytes) s += "piece_bytes=" + std::to_string(g.piece_bytes) + "\n";
  if (g.window > 1) s += "window=" + std::to_string(g.window) + "\n";
  if (g.route != "star") s += "route=" + g.route + "\n";
  if (g.planned || g.num_senders > 1)
    s += "senders=" + std::to_string(g.num_senders) + "\nsender_rank=" + std::to_string(g.sender_rank) + "\n";
  for (const auto& kv : g.transport_options) s += "transport." + kv.first + "=" + kv.second + "\n";
  return std::vector<uint8_t>(s.begin(), s.end());
}

static bool parse_uint(const std::string& v, uint64_t max, uint64_t* out) {
  if (v.empty() || v.size() > 20) return false;
  for (char c : v)
    if (c < '0' || c > '9') return false;
  unsigned long long n = std::strtoull(v.c_str(), nullptr, 10);
  if (n > max) return false;
  *out = n;
  return true;
}

// A line or value for a message: control characters escaped, cut after 64 bytes.
static std::string shown(const std::string& s) { return printable_name(s.data(), s.size()); }

wsync_status_t decode_group_info(const std::vector<uint8_t>& data, GroupInfo* out) {
  if (data.size() > 65536) return fail(WSYNC_ERR_PROTOCOL, "group info is %zu bytes, too large", data.size());
  std::string s(data.begin(), data.end());
  // Every value ends up as a C string (a host to connect to, a plugin's option): a NUL would cut
  // it short without a word.
  const size_t nul = s.find('\0');
  if (nul != std::string::npos)
    return fail(WSYNC_ERR_PROTOCOL, "group info has a NUL byte at offset %zu", nul);
  GroupInfo g;
  int seen = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    std::string line = s.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) return fail(WSYNC_ERR_PROTOCOL, "group info line '%s' has no '='", shown(line).c_str());
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    uint64_t n = 0;
    if (k == "protocol") {
      if (!parse_uint(v, 1u << 20, &n)) return fail(WSYNC_ERR_PROTOCOL, "group info protocol '%s' is not a number", shown(v).c_str());
      g.protocol = static_cast<uint32_t>(n);
      seen |= 1;
    } else if (k == "group") {
      g.group_name = v;
      seen |= 2;
    } else if (k == "world_size") {
      if (!parse_uint(v, 1u << 20, &n) || n < 2) return fail(WSYNC_ERR_PROTOCOL, "group info world_size '%s' is invalid", shown(v).c_str());
      g.world_size = static_cast<uint32_t>(n);
      seen |= 4;
    } else if (k == "transport") {
      g.transport = v;
      seen |= 8;
    } else if (k == "control_host") {
      g.control_host = v;
      seen |= 16;
    } else if (k == "control_port") {
      if (!parse_uint(v, 65535, &n) || n == 0) return fail(WSYNC_ERR_PROTOCOL, "group info control_port '%s' is invalid", shown(v).c_str());
      g.control_port = static_cast<uint16_t>(n);
      seen |= 32;
    } else if (k == "piece_bytes") {
      if (!parse_uint(v, kMaxPieceBytes, &n) || (n != 0 && n < kMinPieceBytes))
        return fail(WSYNC_ERR_PROTOCOL, "group info piece_bytes '%s' is invalid (0, or %llu..%llu)", shown(v).c_str(),
                    static_cast<unsigned long long>(kMinPieceBytes), static_cast<unsigned long long>(kMaxPieceBytes));
      g.piece_bytes = n;
    } else if (k == "route") {
      if (v.empty() || v.size() > 16) return fail(WSYNC_ERR_PROTOCOL, "group info route '%s' is invalid", shown(v).c_str());
      g.route = v;
    } else if (k == "window") {
      if (!parse_uint(v, kMaxWindow, &n) || n == 0)
        return fail(WSYNC_ERR_PROTOCOL, "group info window '%s' is invalid (1..%u)", shown(v).c_str(), kMaxWindow);
      g.window = static_cast<uint32_t>(n);
    } else if (k == "senders") {
      if (!parse_uint(v, kMaxSenders, &n) || n == 0)
        return fail(WSYNC_ERR_PROTOCOL, "group info senders '%s' is invalid (1..%u)", shown(v).c_str(), kMaxSenders);
      g.num_senders = static_cast<uint32_t>(n);
      g.planned = true;
    } else if (k == "sender_rank") {
      if (!parse_uint(v, kMaxSenders - 1, &n))
        return fail(WSYNC_ERR_PROTOCOL, "group info sender_rank '%s' is invalid", shown(v).c_str());
      g.sender_rank = static_cast<uint32_t>(n);
    } else if (k.compare(0, 10, "transport.") == 0 && k.size() > 10) {
      g.transport_options.emplace_back(k.substr(10), v);
    }  // unknown keys: written by a newer sender; ignored
  }
  if (seen != 63) return fail(WSYNC_ERR_PROTOCOL, "group info is missing fields (have mask 0x%x of 0x3f)", seen);
  if (g.sender_rank >= g.num_senders)
    return fail(WSYNC_ERR_PROTOCOL, "group info sender_rank %u is not below senders %u", g.sender_rank, g.num_senders);
  *out = g;
  return WSYNC_OK;
}

}  // namespace wsync
