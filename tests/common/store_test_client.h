// The rest of torch's TCPStore queries, spoken through TcpStoreClient::request: what tests need
// to exercise every query of wsync's store server (and of torch's), while the core only carries
// the three it uses (set, get, add).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/error.h"
#include "store/store_wire.h"
#include "store/tcp_store_client.h"

namespace wsync {
namespace test_store {

namespace w = store_wire;
using Bytes = std::vector<uint8_t>;

inline ByteWriter start(w::Query q) {
  ByteWriter b;
  b.u8(static_cast<uint8_t>(q));
  return b;
}

inline void put_keys(ByteWriter* b, const std::vector<std::string>& keys) {
  b->u64(keys.size());
  for (const auto& k : keys) b->str64(TcpStoreClient::wire_key(k));
}

inline wsync_status_t ping(TcpStoreClient& c, uint32_t nonce = 0x5157u) {
  ByteWriter b = start(w::Query::PING);
  b.u32(nonce);
  uint32_t echo = 0;
  wsync_status_t st = c.request("PING", b.data(), [&](TcpStoreClient& cl, int64_t d) {
    return cl.recv_exact(&echo, sizeof echo, d, "PING");
  });
  if (st == WSYNC_OK && echo != nonce) return fail(WSYNC_ERR_PROTOCOL, "PING echoed %u instead of %u", echo, nonce);
  return st;
}

inline wsync_status_t check(TcpStoreClient& c, const std::vector<std::string>& keys, bool* ready) {
  ByteWriter b = start(w::Query::CHECK);
  put_keys(&b, keys);
  uint8_t r = 0;
  wsync_status_t st = c.request("CHECK", b.data(), [&](TcpStoreClient& cl, int64_t d) { return cl.recv_exact(&r, 1, d, "CHECK"); });
  if (st != WSYNC_OK) return st;
  if (r > 1) return fail(WSYNC_ERR_PROTOCOL, "CHECK answered %u", unsigned(r));
  *ready = r == static_cast<uint8_t>(w::CheckReply::READY);
  return WSYNC_OK;
}

inline wsync_status_t wait(TcpStoreClient& c, const std::vector<std::string>& keys, int64_t timeout_ms) {
  std::vector<std::string> wk;
  for (const auto& k : keys) wk.push_back(TcpStoreClient::wire_key(k));
  return c.wait(wk, timeout_ms);
}

inline wsync_status_t compare_set(TcpStoreClient& c, const std::string& key, const Bytes& expected, const Bytes& desired,
                                  Bytes* current) {
  ByteWriter b = start(w::Query::COMPARE_SET);
  b.str64(TcpStoreClient::wire_key(key));
  b.blob64(expected.data(), expected.size());
  b.blob64(desired.data(), desired.size());
  return c.request("COMPARE_SET", b.data(),
                   [&](TcpStoreClient& cl, int64_t d) { return cl.recv_payload(current, d, "COMPARE_SET"); });
}

inline wsync_status_t delete_key(TcpStoreClient& c, const std::string& key, bool* deleted) {
  ByteWriter b = start(w::Query::DELETE_KEY);
  b.str64(TcpStoreClient::wire_key(key));
  int64_t n = 0;
  wsync_status_t st = c.request("DELETE_KEY", b.data(), [&](TcpStoreClient& cl, int64_t d) {
    return cl.recv_exact(&n, sizeof n, d, "DELETE_KEY");
  });
  *deleted = n == 1;
  return st;
}

inline wsync_status_t num_keys(TcpStoreClient& c, int64_t* out) {
  ByteWriter b = start(w::Query::GETNUMKEYS);
  return c.request("GETNUMKEYS", b.data(), [&](TcpStoreClient& cl, int64_t d) {
    return cl.recv_exact(out, sizeof *out, d, "GETNUMKEYS");
  });
}

inline wsync_status_t multi_get(TcpStoreClient& c, const std::vector<std::string>& keys, std::vector<Bytes>* out,
                                int64_t timeout_ms) {
  wsync_status_t st = wait(c, keys, timeout_ms);
  if (st != WSYNC_OK) return st;
  ByteWriter b = start(w::Query::MULTI_GET);
  put_keys(&b, keys);
  out->assign(keys.size(), Bytes());
  return c.request("MULTI_GET", b.data(), [&](TcpStoreClient& cl, int64_t d) {
    for (auto& v : *out) {
      wsync_status_t s = cl.recv_payload(&v, d, "MULTI_GET");
      if (s != WSYNC_OK) return s;
    }
    return WSYNC_OK;
  });
}

inline wsync_status_t multi_set(TcpStoreClient& c, const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "multi_set: %zu keys but %zu values", keys.size(), values.size());
  ByteWriter b = start(w::Query::MULTI_SET);
  b.i64(static_cast<int64_t>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    b.str64(TcpStoreClient::wire_key(keys[i]));
    b.blob64(values[i].data(), values[i].size());
  }
  return c.request("MULTI_SET", b.data(), nullptr);
}

inline wsync_status_t append(TcpStoreClient& c, const std::string& key, const void* data, size_t len) {
  ByteWriter b = start(w::Query::APPEND);
  b.str64(TcpStoreClient::wire_key(key));
  b.blob64(data, len);
  return c.request("APPEND", b.data(), nullptr);
}

// The value stored under `wire_key` exactly as sent on the wire (no "/" added): false when the key
// does not exist. For looking at what another client (torch) stored.
inline bool lookup_wire(TcpStoreClient& c, const std::string& wire_key, Bytes* v) {
  ByteWriter chk = start(w::Query::CHECK);
  chk.u64(1);
  chk.str64(wire_key);
  uint8_t r = 1;
  if (c.request("CHECK", chk.data(), [&](TcpStoreClient& cl, int64_t d) { return cl.recv_exact(&r, 1, d, "CHECK"); }) !=
          WSYNC_OK ||
      r != static_cast<uint8_t>(w::CheckReply::READY))
    return false;
  ByteWriter get = start(w::Query::GET);
  get.str64(wire_key);
  return c.request("GET", get.data(), [&](TcpStoreClient& cl, int64_t d) { return cl.recv_payload(v, d, "GET"); }) ==
         WSYNC_OK;
}

}  // namespace test_store
}  // namespace wsync
