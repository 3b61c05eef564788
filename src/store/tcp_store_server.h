// The rendezvous store the sender hosts: a server that speaks torch's TCPStore wire protocol
// (torch 2.5 .. 2.15: VALIDATE + PING handshake, BARRIER since 2.12; see store/store_wire.h), so
// torch-based engines can join a wsync sender's group with init_process_group("tcp://host:port").
//
// Who may do what (StoreServerOptions::secret set, the default for a group):
//  - A connection must open with VALIDATE (torch's magic) and finish its handshake within
//    handshake_ms; with a secret, the handshake ends with wsync's AUTH (store_wire.h): a mutual
//    HMAC challenge-response, the secret never on the wire. A wrong proof is refused (one status
//    byte) and the connection closed with a warning naming the peer.
//  - Until it has proved the secret a connection may only send VALIDATE, PING and AUTH; anything
//    else closes it with a warning naming the peer and the query.
//  - torch_clients (the explicit torch-compatibility mode, for unmodified torch workers that cannot
//    hold a secret): a connection without the secret may also use every torch query, but only on
//    keys that are not wsync's. wsync's keys are the wire keys starting with "/wsync/" (the client
//    prefixes "/" to "wsync/..."): reading, writing, waiting on, deleting, comparing-and-setting,
//    queueing on or checking one closes the connection with a warning naming the peer and the key
//    (checked as soon as the key arrives, before its value); LIST leaves them out and GETNUMKEYS
//    does not count them. torch's own keys ("init/", "/default_pg/...", "/<prefix>/0", ...) are
//    shared freely among those clients: torch mode trusts the network with torch's rendezvous,
//    exactly as torch itself does, and nothing more.
//  - A connection that proved the secret may do everything.
// Without a secret (tests, tools) every validated connection may do everything.
//
// Exhaustion: every byte of a request is parsed once however it is split (store_request_parser.h);
// buffers grow with the bytes that actually arrived and shrink when drained; everything the store
// holds (keys, values, queues, pending waits, partial requests, unsent replies, per-connection
// bookkeeping) is counted against memory_quota, and a request that would pass it closes that
// client with a warning "store memory quota of N bytes reached ..." while the others go on.
// Requests and stored data may use three quarters of the quota; the last quarter is kept for
// replies, so a store that is full still answers reads (of its largest value, by default). In
// torch mode, torch's keys and the connections without the secret together get at most half the
// quota, so torch clients can never fill the memory wsync's own keys need. Closing a connection
// returns everything it held (and, after large releases, the allocator's free memory to the OS).
//
// Connections: a connection still in its handshake is closed after handshake_ms, or sooner when it
// sends nothing for idle_ms. At most max_unauthenticated connections may be in their handshake;
// one more closes the oldest of them, so a flood of idle or slow connections only ever churns among
// themselves while a member's fresh connection, which authenticates in one round trip, gets through
// (members, once authenticated, are never evicted). Established connections (members, and torch
// clients in torch mode) may stay idle for the group's life: torch keeps its store connection open
// between rendezvous steps and cannot reconnect. In torch mode at most max_torch_clients
// connections may work without the secret. At max_connections in all, a new connection evicts the
// oldest one still in its handshake, or is refused when there is none. The three caps are lowered
// at start to fit the process's open-file limit with room kept for the members
// (store/fd_budget.h), so no flood can leave accept() without a descriptor for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wsync.h"

namespace wsync {

struct StoreServerOptions {
  // The group secret; empty = no authentication (tests and tools only: anyone who can reach the
  // port can read and rewrite every key).
  std::string secret;
  // Serve unmodified torch workers without the secret, on torch's keys only (see above).
  bool torch_clients = false;
  // Bytes for everything the store holds. 256 MiB: four times the largest value a request may
  // carry (64 MiB), and thousands of times what a group needs (wsync's keys are a few KiB per rank,
  // torch's rendezvous keys a few hundred bytes), while a hostile or buggy client can cost the
  // trainer at most this much.
  uint64_t memory_quota = 256ull << 20;
  // A connection must finish VALIDATE (and, with a secret, AUTH) within this: 10 s is 100 times a
  // loaded network's round trip and short enough that idle sockets cannot pile up.
  int64_t handshake_ms = 10000;
  // A connection in its handshake that sends nothing for this long is closed.
  int64_t idle_ms = 5000;
  // All connections. Each costs two file descriptors in the trainer when its peer is local.
  size_t max_connections = 4096;
  // Connections still in their handshake (see above: the oldest is closed to make room).
  size_t max_unauthenticated = 256;
  // torch mode: connections working without the secret (torch workers, one or two per rank).
  size_t max_torch_clients = 2048;
  // The group's members (the hosting process's own client and one per receiver): the three caps
  // above are lowered at start to fit the process's open-file limit, keeping descriptors and
  // places for them that no flood of handshakes or torch clients can take (store/fd_budget.h).
  size_t members = 1;
};

// What the server holds and has done, for tests and diagnostics.
struct StoreServerStats {
  uint64_t memory_in_use = 0;     // bytes counted against the quota
  uint64_t memory_quota = 0;
  uint64_t connection_bytes = 0;  // the part held by connections (bookkeeping, buffers, waits)
  size_t connections = 0;         // open connections
  size_t handshaking = 0;         // of which still in their handshake
  size_t torch_clients = 0;       // of which working without the secret (torch mode)
  // The caps in force: the options', lowered to fit the open-file limit (store/fd_budget.h).
  size_t max_connections = 0, max_unauthenticated = 0, max_torch_clients = 0;
  uint64_t bytes_parsed = 0;      // request bytes parsed since start: each byte exactly once
  uint64_t cpu_ns = 0;            // CPU time of the server thread so far
};

// One background thread runs a poll() loop over non-blocking sockets, so a slow or malicious
// client never blocks the others; WAIT parks only the waiting connection. A malformed request,
// an unknown query type, an oversized length, a refused query or an older torch protocol closes
// that one connection with a log line naming the peer. The hosting process reads and writes the
// store through a TcpStoreClient like everyone else.
class TcpStoreServer {
 public:
  // Bind host:port (port 0 = a free port; host "0.0.0.0", "127.0.0.1", "::", "" (= every
  // address) or a name) and start serving on a background thread. Errors: INVALID_ARGUMENT
  // (host does not resolve, an option out of range), IO (bind/listen failed, e.g. the port is
  // taken), naming host:port.
  static wsync_status_t start(const std::string& host, uint16_t port, const StoreServerOptions& options,
                              std::unique_ptr<TcpStoreServer>* out);
  // No secret, default limits (tests and tools).
  static wsync_status_t start(const std::string& host, uint16_t port, std::unique_ptr<TcpStoreServer>* out);

  ~TcpStoreServer();  // stop()

  // Wake the loop, close every connection (clients see the peer vanish), join the thread.
  // Idempotent.
  void stop();

  uint16_t port() const;        // the bound port
  std::string address() const;  // "host:port" for clients; wildcard binds report 127.0.0.1

  // Thread-safe snapshots.
  uint64_t memory_in_use() const;
  StoreServerStats stats() const;

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  struct Impl;

 private:
  TcpStoreServer();
  std::unique_ptr<Impl> impl_;
};

}  // namespace wsync
