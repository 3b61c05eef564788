// Inside TcpStoreServer: the connections and the key-value state one poll() thread serves.
// tcp_store_server.cpp runs the loop (accept, read, write, deadlines, close); store_access.cpp
// decides who may send what and keeps the memory account; store_queries.cpp executes requests
// against the state. Everything here is guarded by `mu`.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/bytes.h"
#include "store/store_request_parser.h"
#include "store/tcp_store_server.h"

namespace wsync {

struct TcpStoreServer::Impl {
  // Bookkeeping counted per connection on top of its buffers (the Conn, its poll slot, its maps).
  static constexpr size_t kConnOverhead = 512;
  // Bookkeeping counted per stored key or queued value on top of its bytes.
  static constexpr size_t kEntryOverhead = 64;
  // Unsent replies a connection in its handshake may have (PINGs it does not read): past this it
  // is closed, so idle handshakes cannot pin memory either.
  static constexpr size_t kHandshakeReplies = 4096;

  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;
    bool validated = false;      // opened with VALIDATE + magic
    bool authenticated = false;  // proved the secret (or the store has none)
    bool torch = false;          // torch mode: works without the secret, on torch's keys only
    bool auth_challenged = false;  // AUTH: answered the client's nonce, its proof is due
    bool dead = false;
    bool eof = false;  // the peer closed its side; finish the buffered requests, then close
    int64_t opened_ms = 0;
    int64_t last_read_ms = 0;
    uint8_t first[8] = {};  // the connection's first bytes, for the older-protocol message
    size_t first_n = 0;
    std::array<uint8_t, 32> client_nonce{}, server_nonce{};
    StoreRequestParser parser;
    std::vector<uint8_t> in;  // bytes read while the replies were above the high-water mark
    ByteWriter out;
    size_t out_off = 0;
    std::unordered_set<std::string> waiting;  // keys its pending WAIT still needs
    uint64_t charged = 0;      // bytes counted for this connection (overhead, buffers, waits, replies)
    uint64_t out_charged = 0;  // the part that is its reply buffer
    size_t out_pending() const { return out.size() - out_off; }
    bool handshaking() const { return !authenticated && !torch; }
  };

  using Request = StoreRequest;

  StoreServerOptions opt;  // the caps as lowered by the open-file limit
  std::string fd_limit_note;  // what that limit lowered, for refusals ("" when nothing)
  bool split_quota = false;  // torch mode with a secret: torch's share is capped (below)
  std::string host;
  uint16_t port = 0;
  int listen_fd = -1;
  int wake_rd = -1, wake_wr = -1;
  std::thread thread;
  std::atomic<bool> stopping{false};
  bool stopped = false;  // guarded by stop_mu
  std::mutex stop_mu;

  mutable std::mutex mu;  // everything below
  std::unordered_map<std::string, std::vector<uint8_t>> kv;
  std::unordered_map<std::string, std::deque<std::vector<uint8_t>>> queues;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;  // key -> connection ids
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  std::set<uint64_t> handshaking;  // ids of live connections in their handshake, oldest first
  size_t live = 0, torch_clients = 0;
  size_t wsync_keys = 0;  // keys of kv that are wsync's (hidden from clients without the secret)
  uint64_t next_id = 1;
  // The memory account (see tcp_store_server.h). `used` is everything; `used_out` the part in
  // reply buffers (everything else may use only write_limit(): a full store can still answer
  // reads); `used_torch` the part in torch's pool (torch's keys and the connections without the
  // secret), capped at torch_share() when split_quota.
  uint64_t used = 0, used_out = 0, used_torch = 0, conn_bytes = 0;
  uint64_t bytes_parsed = 0;  // of connections already closed; live ones add their parser's count
  uint64_t refused_bytes = 0;  // what the last refused parser allocation asked for
  uint64_t released_since_trim = 0;
  int64_t last_trim_ms = 0;
  // Warnings about closed connections: at most kWarnBurst a second, the rest counted and summed up.
  int64_t warn_window_ms = 0;
  int warn_in_window = 0;
  uint64_t warn_suppressed = 0;
  std::vector<uint8_t> scratch;  // the one read buffer, shared by every connection
  // Out of file descriptors: stop polling the listening socket for a moment instead of spinning.
  std::chrono::steady_clock::time_point accept_paused_until{};

  ~Impl();
  void wake();
  std::string where() const;

  // tcp_store_server.cpp: connections and the loop
  void run();
  void poll_once(std::vector<struct pollfd>* fds, std::vector<uint64_t>* ids);
  void accept_all();
  bool make_room(const std::string& peer);
  Conn* adopt(int fd, const std::string& peer);  // also the fuzz target's way in (fd -1)
  void read_conn(Conn* c);
  void flush_conn(Conn* c);
  void shrink_out(Conn* c);
  void consume(Conn* c, const uint8_t* p, size_t n);  // parse and execute, socket-free
  void park(Conn* c, const uint8_t* p, size_t n);
  void resume_parked(Conn* c);
  void service_pending();
  int64_t expire_handshakes(int64_t now);
  void reap();
  void close_conn(Conn* c, const std::string& why = std::string());
  void warn_closing(const Conn* c, const std::string& why);
  void flush_warnings(int64_t now);
  void trim_memory(int64_t now);

  // store_access.cpp: who may send what, the handshake's end, the memory account
  std::string admit_query(Conn* c, uint8_t type);
  std::string admit_key(Conn* c, const std::string& key, uint8_t type);
  static std::string older_protocol(const Conn* c);
  bool sees_wsync_keys(const Conn* c) const { return opt.secret.empty() || c->authenticated; }
  std::string validate_first(Conn* c, const Request& q);  // the connection's opening VALIDATE
  std::string authenticate(Conn* c, Request& q);         // the AUTH query, both steps
  void set_authenticated(Conn* c);
  bool become_torch_client(Conn* c);
  bool torch_pool(const std::string& key) const;
  // A connection's bytes are in torch's pool once it works as a torch client; before (in its
  // handshake) it can only send VALIDATE, PING and AUTH, and hold at most kHandshakeReplies.
  bool conn_pool(const Conn* c) const { return split_quota && c->torch; }
  uint64_t torch_share() const { return opt.memory_quota / 2; }
  uint64_t write_limit() const { return opt.memory_quota - opt.memory_quota / 4; }
  // reply: bytes of a reply buffer (may use the whole quota) rather than of data or requests.
  bool charge(uint64_t n, bool torch, bool reply = false);
  void uncharge(uint64_t n, bool torch, bool reply = false);
  bool charge_conn(Conn* c, uint64_t n, bool force = false, bool reply = false);  // force: never refused
  void uncharge_conn(Conn* c, uint64_t n, bool reply = false);
  std::string refusal(const std::string& what, uint64_t n, bool torch, bool reply = false) const;
  // Room for n more reply bytes in c->out (growing it geometrically); "" or the refusal.
  std::string reply_room(Conn* c, size_t n, bool force = false);
  static uint64_t entry_cost(const std::string& key, const std::vector<uint8_t>& v);
  static uint64_t wait_cost(const std::string& key);
  uint64_t recount_stored() const;  // kv + queues from scratch: the account's invariant
  static std::string shown_key(const std::string& key);  // printable and short, for log lines

  // store_queries.cpp: requests against the state. execute() returns "" or the reason to close.
  std::string execute(Conn* c, Request& q);
  std::string kv_put(const std::string& key, std::vector<uint8_t> value, bool wake = true);
  void kv_erase(const std::string& key);
  void clear_wait(Conn* c);
  void drop_waiting(Conn* c, const std::string& key);
};

}  // namespace wsync
