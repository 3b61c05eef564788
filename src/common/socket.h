// The core's one place that sets up TCP sockets: resolving, listening, connecting with a deadline,
// and the options every socket of wsync gets (non-blocking, close-on-exec, no Nagle, no SIGPIPE).
// Used by the store (server and client) and the control channel.
#pragma once

#include <cstdint>
#include <string>

#include "wsync.h"

namespace wsync {

// Non-blocking, close-on-exec, TCP_NODELAY (and SO_NOSIGPIPE where it exists).
void tune_socket(int fd);

// Bind and listen on host:port ("" or "0.0.0.0" = every IPv4 address, "::" = every address; port
// 0 = a free one), non-blocking. *fd and *bound_port on success. Errors name host:port:
// INVALID_ARGUMENT (does not resolve), IO (bind/listen failed).
wsync_status_t tcp_listen(const std::string& host, uint16_t port, int backlog, int* fd, uint16_t* bound_port);

// One round of connection attempts to every address of host:port, each bounded by `deadline`
// (now_ms clock). On success *fd is a connected, tuned socket. On failure *why says what the last
// attempt saw ("Connection refused", "cannot resolve host: ...") and the status is TIMEOUT when the
// deadline passed, else IO (retryable: callers loop until their deadline). A bracketed IPv6 host
// is accepted. `bind_ip` (optional): the local address the connection leaves from.
wsync_status_t tcp_connect(const std::string& host, uint16_t port, int64_t deadline, int* fd, std::string* why,
                           const std::string& bind_ip = "");

// Accept one pending connection (non-blocking listener), tuned; -1 when none is pending.
// *peer gets "ip:port" of the other end when not NULL.
int tcp_accept(int listen_fd, std::string* peer);

// "ip:port" of the socket's peer ("unknown peer" when it cannot tell).
std::string peer_address(int fd);

// The IP address (no port, no brackets) of this end of a connected socket, "" when unknown.
std::string local_ip(int fd);

}  // namespace wsync
