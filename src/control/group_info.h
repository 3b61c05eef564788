// What the sender announces in its store under kGroupInfoKey, so a receiver can check that it
// joins the right group before it opens any other connection.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "wsync.h"

namespace wsync {

constexpr const char* kGroupInfoKey = "wsync/group_info";

struct GroupInfo {
  uint32_t protocol = 0;
  std::string group_name;
  uint32_t world_size = 0;
  std::string transport;
  std::string control_host;
  uint16_t control_port = 0;
  // The sender's "transport.*" options (prefix removed): receivers apply them before their own,
  // so both sides of the data plane are configured alike.
  std::vector<std::pair<std::string, std::string>> transport_options;
  // Since wsync 0.7 (absent: 0 and 1): a bucket moves as transport messages of at most piece_bytes
  // (0: one message per bucket), and up to `window` buckets may be on the wire at once.
  uint64_t piece_bytes = 0;
  uint32_t window = 1;
  // Since wsync 0.7 (absent: "star"): the group option route. Anything but star: every receiver
  // waits for a ROUTE frame after its JOINED.
  std::string route = "star";
  // Since wsync 0.8 (absent: 1 and 0): the group has num_senders senders and this store is sender
  // sender_rank's; a receiver joins every sender (sender 0's store lists the others).
  uint32_t num_senders = 1;
  uint32_t sender_rank = 0;
  bool planned = false;  // "senders=" present: the senders plan (also one): receivers say their needs
};

constexpr uint32_t kMaxSenders = 4096;

// Bounds of the pipeline fields a receiver accepts (a sender refuses options outside them).
constexpr uint64_t kMinPieceBytes = 64u << 10;
constexpr uint64_t kMaxPieceBytes = 1ull << 30;
constexpr uint32_t kMaxWindow = 16;

std::vector<uint8_t> encode_group_info(const GroupInfo& g);
// Parses "key=value" lines; refuses anything malformed (a line without '=', a bad number, a
// missing field, a NUL byte anywhere, more than 64 KiB) with WSYNC_ERR_PROTOCOL. Unknown keys
// are ignored (a newer sender's); of a key given twice the last counts.
wsync_status_t decode_group_info(const std::vector<uint8_t>& data, GroupInfo* out);

}  // namespace wsync
