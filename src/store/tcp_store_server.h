// The rendezvous store the sender hosts: a server that speaks torch's TCPStore wire protocol
// (torch 2.5 .. 2.15: VALIDATE + PING handshake, BARRIER since 2.12; see store/store_wire.h), so
// torch-based engines can join a wsync sender's group with init_process_group("tcp://host:port").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wsync.h"

namespace wsync {

// One background thread runs a poll() loop over non-blocking sockets, so a slow or malicious
// client never blocks the others; WAIT parks only the waiting connection. A malformed request,
// an unknown query type, an oversized length or an older torch protocol closes that one
// connection with a log line naming the peer. The hosting process reads and writes the store
// through a TcpStoreClient like everyone else.
class TcpStoreServer {
 public:
  // Bind host:port (port 0 = a free port; host "0.0.0.0", "127.0.0.1", "::", "" (= every
  // address) or a name) and start serving on a background thread. Errors: INVALID_ARGUMENT
  // (host does not resolve), IO (bind/listen failed, e.g. the port is taken), naming host:port.
  static wsync_status_t start(const std::string& host, uint16_t port, std::unique_ptr<TcpStoreServer>* out);

  ~TcpStoreServer();  // stop()

  // Wake the loop, close every connection (clients see the peer vanish), join the thread.
  // Idempotent.
  void stop();

  uint16_t port() const;        // the bound port
  std::string address() const;  // "host:port" for clients; wildcard binds report 127.0.0.1

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  struct Impl;

 private:
  TcpStoreServer();
  std::unique_ptr<Impl> impl_;
};

}  // namespace wsync
