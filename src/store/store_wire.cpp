#include "store/store_wire.h"


namespace wsync {
namespace store_wire {

const char* query_name(uint8_t q) {
  static const char* names[] = {"VALIDATE",   "SET",        "COMPARE_SET", "GET",       "ADD",
                                "CHECK",      "WAIT",       "GETNUMKEYS",  "DELETE_KEY", "APPEND",
                                "MULTI_GET",  "MULTI_SET",  "CANCEL_WAIT", "PING",      "QUEUE_PUSH",
                                "QUEUE_POP",  "QUEUE_LEN",  "LIST",        "BARRIER"};
  static_assert(sizeof names / sizeof names[0] == kMaxQuery + 1u, "a name for every query type");
  return q <= kMaxQuery ? names[q] : "UNKNOWN";
}

}  // namespace store_wire
}  // namespace wsync
