#include "store/store_wire.h"

#include <cstring>

namespace wsync {
namespace store_wire {

const char* query_name(uint8_t q) {
  static const char* names[] = {"VALIDATE",   "SET",        "COMPARE_SET", "GET",       "ADD",
                                "CHECK",      "WAIT",       "GETNUMKEYS",  "DELETE_KEY", "APPEND",
                                "MULTI_GET",  "MULTI_SET",  "CANCEL_WAIT", "PING",      "QUEUE_PUSH",
                                "QUEUE_POP",  "QUEUE_LEN",  "LIST",        "BARRIER"};
  static_assert(sizeof names / sizeof names[0] == kMaxQuery + 1u, "a name for every query type");
  if (q == static_cast<uint8_t>(Query::AUTH)) return "AUTH";
  return q <= kMaxQuery ? names[q] : "UNKNOWN";
}

bool is_wsync_key(const std::string& wire_key) {
  static const size_t n = std::strlen(kWsyncKeyPrefix);
  return wire_key.size() >= n && wire_key.compare(0, n, kWsyncKeyPrefix) == 0;
}

}  // namespace store_wire
}  // namespace wsync
