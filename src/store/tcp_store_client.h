// A client of a torch-TCPStore-compatible server (wsync's own TcpStoreServer or torch's): what the
// core needs (set, get, add) plus the one request primitive they are built on, so the rest of
// torch's queries can be spoken without more code here (tests/common/store_test_client.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wsync.h"

namespace wsync {

// Thread-safe: one mutex serialises requests on the one connection. Every call is bounded in
// time: blocking calls take a timeout (negative = the client's op timeout); the others use the op
// timeout for the request/reply exchange. A server that vanished gives WSYNC_ERR_PEER_FAILED (or
// WSYNC_ERR_IO), a deadline WSYNC_ERR_TIMEOUT. After any error other than a wait/get timeout the
// connection is unusable and every later call fails fast with the same status.
class TcpStoreClient {
 public:
  static constexpr int64_t kDefaultTimeoutMs = 60000;

  // Connect (retrying every ~50-100 ms until timeout_ms passes: the server may not be up yet),
  // then the VALIDATE + PING handshake, then, with a non-empty group secret, wsync's AUTH
  // (store/store_wire.h): the store proves it knows the secret and so does this process; the
  // secret never goes on the wire. timeout_ms < 0 means kDefaultTimeoutMs. Errors, not retried:
  //   WSYNC_ERR_REJECTED "the store at host:port refused this process's group secret ..." when the
  //     store holds another secret; "... does not know this group's secret ..." when the store
  //     cannot prove it (a store without a secret, torch's own store, an impostor; a store that
  //     closes the connection on AUTH is retried twice first: a flooded store may have closed a
  //     connection still in its handshake to make room);
  //   WSYNC_ERR_PROTOCOL for a server that is not a TCPStore.
  // An empty secret skips AUTH (a store without a secret, or torch mode's torch-only keys).
  static wsync_status_t connect(const std::string& host, uint16_t port, int64_t timeout_ms,
                                const std::string& secret, std::unique_ptr<TcpStoreClient>* out);
  // No secret.
  static wsync_status_t connect(const std::string& host, uint16_t port, int64_t timeout_ms,
                                std::unique_ptr<TcpStoreClient>* out);
  ~TcpStoreClient();

  // Keys are user keys: like torch's TCPStore client, the client prefixes "/" on the wire.
  wsync_status_t set(const std::string& key, const void* data, size_t len);
  // WAIT (with timeout) then GET, like torch. A timeout is WSYNC_ERR_TIMEOUT naming the key; the
  // wait is cancelled the way torch does (CANCEL_WAIT) and the connection stays usable.
  wsync_status_t get(const std::string& key, std::vector<uint8_t>* out, int64_t timeout_ms);
  wsync_status_t add(const std::string& key, int64_t delta, int64_t* out);
  // WAIT for wire keys (already prefixed) with the cancel protocol; see get.
  wsync_status_t wait(const std::vector<std::string>& wire_keys, int64_t timeout_ms);

  // Reads one request's reply within `deadline` (now_ms clock).
  using ReplyFn = std::function<wsync_status_t(TcpStoreClient& c, int64_t deadline)>;
  // The primitive: send one encoded request (query byte + arguments) and read its reply with
  // `reply` (nullptr: the query has none), under the client's lock and op timeout. `what` names the
  // query in errors. A failure makes the connection unusable.
  wsync_status_t request(const char* what, const std::vector<uint8_t>& bytes, const ReplyFn& reply);
  // Reply readers for ReplyFn: exactly len bytes; a u64-length payload (at most 1 GiB).
  wsync_status_t recv_exact(void* buf, size_t len, int64_t deadline, const char* what);
  wsync_status_t recv_payload(std::vector<uint8_t>* out, int64_t deadline, const char* what);

  std::string address() const;  // "host:port" of the server
  static std::string wire_key(const std::string& key);

  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

 private:
  TcpStoreClient() = default;

  wsync_status_t handshake(int64_t deadline);
  wsync_status_t authenticate(const std::string& secret, int64_t deadline);
  wsync_status_t usable();
  wsync_status_t broken(wsync_status_t st);  // marks the connection unusable, returns st
  wsync_status_t send_all(const std::vector<uint8_t>& buf, int64_t deadline, const char* what);
  wsync_status_t exchange(const char* what, const std::vector<uint8_t>& bytes, const ReplyFn& reply);
  wsync_status_t do_wait(const std::vector<std::string>& wire_keys, int64_t timeout_ms);
  wsync_status_t cancel_wait(bool* arrived);
  int64_t op_deadline() const;

  int fd_ = -1;
  std::string host_;
  uint16_t port_ = 0;
  int64_t op_timeout_ms_ = kDefaultTimeoutMs;
  std::mutex mu_;
  wsync_status_t broken_status_ = WSYNC_OK;
  std::string broken_reason_;
};

}  // namespace wsync
