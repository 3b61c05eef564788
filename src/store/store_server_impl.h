// Inside TcpStoreServer: the connections and the key-value state one poll() thread serves.
// tcp_store_server.cpp runs the loop (accept, read, write, close); store_queries.cpp parses and
// executes requests against the state. Everything here is guarded by `mu`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/bytes.h"
#include "store/tcp_store_server.h"

namespace wsync {

struct TcpStoreServer::Impl {
  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;
    bool validated = false;
    bool dead = false;
    bool eof = false;  // the peer closed its side; finish the buffered requests, then close
    std::vector<uint8_t> in;
    size_t in_off = 0;
    size_t need = 0;  // don't re-parse until in.size() - in_off reaches this
    ByteWriter out;
    size_t out_off = 0;
    std::unordered_set<std::string> waiting;  // keys its pending WAIT still needs
    size_t out_pending() const { return out.size() - out_off; }
  };

  struct Request {
    uint8_t type = 0;
    std::vector<std::string> keys;
    std::vector<std::vector<uint8_t>> values;
    uint32_t u32 = 0;
    int64_t i64 = 0;
  };

  std::string host;
  uint16_t port = 0;
  int listen_fd = -1;
  int wake_rd = -1, wake_wr = -1;
  std::thread thread;
  std::atomic<bool> stopping{false};
  bool stopped = false;  // guarded by stop_mu
  std::mutex stop_mu;

  std::mutex mu;  // everything below
  std::unordered_map<std::string, std::vector<uint8_t>> kv;
  std::unordered_map<std::string, std::deque<std::vector<uint8_t>>> queues;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;  // key -> connection ids
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_id = 1;
  // Out of file descriptors: stop polling the listening socket for a moment instead of spinning.
  std::chrono::steady_clock::time_point accept_paused_until{};

  ~Impl();
  void wake();
  std::string where() const;

  // tcp_store_server.cpp: connections and the loop
  void run();
  void poll_once(std::vector<struct pollfd>* fds, std::vector<uint64_t>* ids);
  void accept_all();
  void read_conn(Conn* c);
  void flush_conn(Conn* c);
  void process_conn(Conn* c);
  bool validate_conn(Conn* c, const uint8_t* p, size_t avail);
  void compact_input(Conn* c);
  void service_pending();
  void reap();
  void close_conn(Conn* c, const std::string& why = std::string());

  // store_queries.cpp: requests against the state. parse() has no side effects; execute()
  // returns "" or the reason to close the connection.
  static bool parse(ByteReader& r, Request* q, std::string* bad);
  std::string execute(Conn* c, Request& q);
  void clear_wait(Conn* c);
};

}  // namespace wsync
