// libFuzzer target for the store server's request handling: the incremental parser
// (store/store_request_parser.h) and everything behind it (access rules, queries, the memory
// account), without sockets. Input layout:
//   byte 0   configuration: bit 0 a group secret, bit 1 torch mode, bit 2 a small quota (64 KiB),
//            bit 3 the second connection has proved the secret
//   byte 1   seed of the piece sizes
//   rest     the bytes two clients send, in pieces alternating between them
// Checks (abort on failure):
//   - the parser gives the same events and requests whether the bytes come in one piece or in
//     many, parses each byte exactly once, and completes values with capacity == size;
//   - the memory account never passes the quota (beyond the per-connection bookkeeping counted
//     unconditionally), and once both clients left it equals the cost of what is stored, to the
//     byte; connection counters return to zero.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "store/store_request_parser.h"
#include "store/store_server_impl.h"
#include "store/store_wire.h"
#include "wsync.h"

namespace {

using wsync::StoreRequest;
using wsync::StoreRequestParser;
using Impl = wsync::TcpStoreServer::Impl;

void quiet(void*, int32_t, const char*) {}

struct Pieces {
  uint32_t state;
  size_t next() {  // 1 .. 64, mostly small
    state = state * 1103515245u + 12345u;
    const uint32_t r = state >> 16;
    return (r & 3) == 0 ? 1 + (r >> 2) % 64 : 1 + (r >> 2) % 7;
  }
};

// A running hash of everything the parser reported: cheaper than a text trace (std::hash runs in
// the uninstrumented standard library), and two parses that differ in any event or field differ
// here, barring a 64-bit collision.
struct Trace {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    const size_t x = std::hash<std::string_view>()(std::string_view(static_cast<const char*>(p), n));
    h = (h ^ x) * 1099511628211ull + n;
  }
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void request(const StoreRequest& q) {
    u64(q.type);
    u64(q.u32);
    u64(static_cast<uint64_t>(q.i64));
    u64(q.keys.size());
    for (const auto& k : q.keys) str(k);
    u64(q.values.size());
    for (const auto& v : q.values) {
      u64(v.size());
      bytes(v.data(), v.size());
    }
    bytes(q.blob.data(), q.blob.size());
  }
};

struct Parsed {
  uint64_t trace = 0;
  uint64_t bytes = 0;
  bool bad = false;
};

// Parses data cut into pieces (whole when pieces is null).
Parsed parse(const uint8_t* data, size_t size, Pieces* pieces) {
  StoreRequestParser p;
  Trace t;
  Parsed out;
  size_t off = 0;
  while (off < size && !out.bad) {
    size_t n = pieces ? std::min(size - off, pieces->next()) : size - off;
    const uint8_t* ptr = data + off;
    off += n;
    for (;;) {
      size_t used = 0;
      const StoreRequestParser::Event ev = p.next(ptr, n, &used);
      if (used > n) std::abort();
      ptr += used;
      n -= used;
      if (ev == StoreRequestParser::kNeedMore) {  // not traced: one per piece
        if (n != 0) std::abort();
        break;
      }
      t.u64(ev);
      if (ev == StoreRequestParser::kType) t.u64(p.request().type);
      if (ev == StoreRequestParser::kKey) t.str(p.request().keys.back());
      if (ev == StoreRequestParser::kBad) {
        t.str(p.error());
        out.bad = true;
        break;
      }
      if (ev == StoreRequestParser::kDone) {
        StoreRequest q;
        p.take(&q);
        t.request(q);
        for (const auto& v : q.values)
          if (v.capacity() != v.size()) std::abort();  // what the store's account counts
      }
    }
  }
  out.trace = t.h;
  out.bytes = p.bytes_parsed();
  return out;
}

void check_parser(const uint8_t* data, size_t size, uint32_t seed) {
  const Parsed whole = parse(data, size, nullptr);
  Pieces pieces{seed};
  const Parsed cut = parse(data, size, &pieces);
  if (whole.trace != cut.trace || whole.bad != cut.bad || whole.bytes != cut.bytes) std::abort();
  if (!whole.bad && whole.bytes != size) std::abort();  // every byte parsed, once
  if (whole.bytes > size) std::abort();
}

void check_server(uint8_t config, const uint8_t* data, size_t size, uint32_t seed) {
  Impl s;
  s.opt.secret = (config & 1) ? "fuzz secret" : "";
  s.opt.torch_clients = (config & 2) != 0;
  s.opt.memory_quota = (config & 4) ? (64u << 10) : (16u << 20);
  s.split_quota = !s.opt.secret.empty() && s.opt.torch_clients;
  std::lock_guard<std::mutex> g(s.mu);
  Impl::Conn* conns[2] = {s.adopt(-1, "fuzz:1"), s.adopt(-1, "fuzz:2")};
  if (config & 8) {
    conns[1]->validated = true;
    s.set_authenticated(conns[1]);
  }
  const uint64_t slack = 2 * Impl::kConnOverhead + 4096;  // counted unconditionally
  Pieces pieces{seed};
  size_t off = 0;
  for (int turn = 0; off < size; ++turn) {
    const size_t n = std::min(size - off, pieces.next());
    Impl::Conn* c = conns[turn & 1];
    if (!c->dead) {
      s.consume(c, data + off, n);
      if (!c->dead) {  // the replies went out
        c->out_off = c->out.size();
        s.shrink_out(c);
      }
    }
    off += n;
    if (s.used > s.opt.memory_quota + slack) std::abort();
    if (s.used_torch > s.used || s.used_out > s.used || s.conn_bytes > s.used) std::abort();
  }
  for (Impl::Conn* c : conns) s.close_conn(c);
  s.reap();
  if (s.used != s.recount_stored() || s.conn_bytes != 0 || s.used_out != 0) std::abort();
  if (s.used > s.opt.memory_quota) std::abort();
  if (s.live != 0 || !s.handshaking.empty() || s.torch_clients != 0 || !s.conns.empty() || !s.waiters.empty())
    std::abort();
  size_t wsync_keys = 0;
  for (const auto& e : s.kv) wsync_keys += wsync::store_wire::is_wsync_key(e.first);
  if (wsync_keys != s.wsync_keys) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool init = [] {
    wsync_set_log_callback(&quiet, nullptr, WSYNC_LOG_ERROR);
    return true;
  }();
  (void)init;
  if (size < 2) return 0;
  const uint8_t config = data[0];
  const uint32_t seed = data[1];
  check_parser(data + 2, size - 2, seed);
  check_server(config, data + 2, size - 2, seed);
  return 0;
}
