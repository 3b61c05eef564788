// A client of a torch-TCPStore-compatible server (wsync's own TcpStoreServer or torch's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wsync.h"

namespace wsync {

// Thread-safe: one mutex serialises requests on the one connection. Every call is bounded in
// time: blocking calls take a timeout (negative = the client's op timeout, see set_timeout);
// the others use the op timeout for the request/reply exchange. A server that vanished gives
// WSYNC_ERR_PEER_FAILED (or WSYNC_ERR_IO), a deadline WSYNC_ERR_TIMEOUT. After any error other
// than a wait/get timeout the connection is unusable and every later call fails fast with the
// same status.
class TcpStoreClient {
 public:
  static constexpr int64_t kDefaultTimeoutMs = 60000;

  // Connect (retrying every ~50-100 ms until timeout_ms passes: the server may not be up yet),
  // then the VALIDATE + PING handshake. timeout_ms < 0 means kDefaultTimeoutMs.
  static wsync_status_t connect(const std::string& host, uint16_t port, int64_t timeout_ms,
                                std::unique_ptr<TcpStoreClient>* out);
  ~TcpStoreClient();

  // Keys are user keys: like torch's TCPStore client, the client prefixes "/" on the wire.
  wsync_status_t set(const std::string& key, const void* data, size_t len);
  // WAIT (with timeout) then GET, like torch.
  wsync_status_t get(const std::string& key, std::vector<uint8_t>* out, int64_t timeout_ms);
  wsync_status_t add(const std::string& key, int64_t delta, int64_t* out);
  wsync_status_t check(const std::vector<std::string>& keys, bool* ready);
  // WSYNC_ERR_TIMEOUT naming the keys; the wait is cancelled the way torch does (CANCEL_WAIT)
  // and the connection stays usable. If the keys arrive while cancelling, returns WSYNC_OK.
  wsync_status_t wait(const std::vector<std::string>& keys, int64_t timeout_ms);
  // torch semantics: *current receives the value stored after the call (== desired when the
  // swap happened); a missing key with a non-empty `expected` reports `expected` back.
  wsync_status_t compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                             const std::vector<uint8_t>& desired, std::vector<uint8_t>* current);
  wsync_status_t delete_key(const std::string& key, bool* deleted);
  wsync_status_t num_keys(int64_t* out);
  wsync_status_t multi_get(const std::vector<std::string>& keys, std::vector<std::vector<uint8_t>>* out,
                           int64_t timeout_ms);
  wsync_status_t multi_set(const std::vector<std::string>& keys, const std::vector<std::vector<uint8_t>>& values);
  wsync_status_t ping();

  // Extras.
  wsync_status_t append(const std::string& key, const void* data, size_t len);
  // Op timeout for requests without their own timeout (and for the cancel exchange).
  void set_timeout(int64_t timeout_ms);
  std::string address() const;  // "host:port" of the server

  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

 private:
  TcpStoreClient() = default;

  wsync_status_t usable();
  wsync_status_t broken(wsync_status_t st);  // marks the connection unusable, returns st
  wsync_status_t send_all(const std::vector<uint8_t>& buf, int64_t deadline_ms, const char* what);
  wsync_status_t recv_all(void* buf, size_t len, int64_t deadline_ms, const char* what);
  wsync_status_t recv_payload(std::vector<uint8_t>* out, int64_t deadline_ms, const char* what);
  wsync_status_t do_wait(const std::vector<std::string>& wire_keys, int64_t timeout_ms);
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
