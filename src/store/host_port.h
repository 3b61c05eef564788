// Parsing of store addresses ("host:port", "tcp://host:port", "[v6]:port").
#pragma once

#include <cstdint>
#include <string>

#include "wsync.h"

namespace wsync {

// Split `addr` into host and port. Accepts "host:port", "tcp://host:port" and "[::1]:port"
// (the brackets are removed from *host). The port is decimal 0..65535. Bad input gives
// WSYNC_ERR_INVALID_ARGUMENT with a message naming the address; outputs are untouched then.
wsync_status_t parse_host_port(const std::string& addr, std::string* host, uint16_t* port);

// The host of a peer's "ip:port" as a socket reports it (everything before the last ':'; the whole
// text when there is none): the key that tells members on one host from members on another.
std::string host_of(const std::string& addr);

// The inverse: "host:port", or "[host]:port" when host contains ':'.
std::string format_host_port(const std::string& host, uint16_t port);

}  // namespace wsync
