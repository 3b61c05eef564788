// The wire protocol of torch's TCPStore (c10d), as spoken by torch 2.5 .. 2.15, shared by
// wsync's store server and client: query codes, reply codes and bounds. Requests and replies are
// encoded with common/bytes.h (u64-length strings and payloads).
//
// Verified against torch's own source (pytorch/pytorch and forks tracking main):
//  - torch/csrc/distributed/c10d/TCPStoreBackend.hpp
//      validationMagicNumber = 0x3C85F7CE (uint32);
//      enum class QueryType : uint8_t { VALIDATE=0, SET, COMPARE_SET, GET, ADD, CHECK, WAIT,
//        GETNUMKEYS, DELETE_KEY, APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT, PING=13,
//        QUEUE_PUSH, QUEUE_POP, QUEUE_LEN, LIST=17 }  (append-only; the queue ops and LIST
//        appeared after PING and only the libuv backend serves the queue ops);
//      CheckResponseType { READY=0, NOT_READY=1 }; WaitResponseType { STOP_WAITING=0,
//      WAIT_CANCELED=1 } (one byte each).
//  - torch/csrc/distributed/c10d/TCPStore.cpp (client, class TCPStore / SendBuffer)
//      every request = 1 byte query type, then arguments in native byte order; strings and
//      payloads are a uint64 length + bytes; key lists (CHECK, WAIT, MULTI_GET) are a uint64
//      count (MULTI_SET sends it as int64, same bits) then strings.
//      connect -> VALIDATE + uint32 magic (no reply) -> PING + uint32 nonce (getpid()), the
//      server echoes the uint32; a mismatch is a connect failure (retried until the timeout).
//      user keys go on the wire with keyPrefix_ "/" ; initKey_ = "init/" (NOT prefixed):
//      waitForWorkers() does ADD("init/", 1) when the store was given a worker count, and the
//      server-side store polls GET("init/") until it reaches that count.
//      get() = WAIT([key]) then GET; multiGet() = WAIT(keys) then MULTI_GET.
//      wait timeout: the client polls for the 1-byte WAIT reply; on timeout it sends
//      CANCEL_WAIT and reads one byte: WAIT_CANCELED, or STOP_WAITING (the keys arrived in
//      the race) followed by WAIT_CANCELED; then it raises "wait timeout ... keys: ...".
//      deleteKey() returns (int64 reply == 1); getNumKeys() reads an int64; check() reads the
//      1-byte CheckResponseType; compareSet() reads one payload.
//  - torch/csrc/distributed/c10d/TCPStoreBackend.cpp (legacy poll daemon) and
//    torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp (libuv daemon, default since 2.4):
//      the first request of a connection must be VALIDATE with the magic, else the client is
//      dropped ("miscellaneous client"); VALIDATE has no reply; PING echoes the uint32 nonce.
//      SET key,value: no reply; wakes waiters of key.
//      COMPARE_SET key,expected,desired -> payload: key missing & expected empty -> store
//        desired, reply desired; key missing & expected non-empty -> reply expected (store
//        unchanged); key present -> if value == expected store desired; reply the value now
//        stored.
//      GET key -> payload (libuv: empty payload for a missing key; legacy dropped the client).
//      ADD key,int64 delta -> int64 new value; the value is stored as decimal text
//        (std::to_string), an existing value is parsed with stoll; wakes waiters.
//      CHECK n,keys -> 1 byte READY/NOT_READY.  WAIT n,keys -> 1 byte STOP_WAITING now or when
//        the last missing key is set (SET/ADD/APPEND/MULTI_SET/COMPARE_SET wake waiters).
//      CANCEL_WAIT -> drops the connection's wait state, replies 1 byte WAIT_CANCELED.
//      GETNUMKEYS -> int64 number of keys.  DELETE_KEY key -> int64 number deleted (0 or 1).
//      APPEND key,value: appends (creates if missing), no reply.
//      MULTI_GET n,keys -> n payloads back to back.  MULTI_SET n,(key,value)*n: no reply.
//      QUEUE_PUSH key,value: no reply.  QUEUE_POP key -> int64 queue length before the pop,
//        then the popped payload only if that length was > 0.  QUEUE_LEN key -> int64.
//        LIST -> int64 count, then that many strings (all keys, prefixed as stored).
//      libuv bounds: key <= 8 KiB, payload <= 8 MiB, key count <= 128 Ki; an unknown query
//      type or a bound exceeded closes that client only. (wsync's bounds are below.)
//  - Checked end to end by hand (not in CI: needs torch) with torch 2.5.1 and 2.9.1: torch's
//    TCPStore client ran every query above against TcpStoreServer (incl. wait timeout + cancel,
//    queues on 2.9), two torch ranks formed a gloo group through it (agent-store mode) and
//    all-reduced; TcpStoreClient ran every query against torch's libuv and legacy servers.
//  - Older torch stores: before VALIDATE existed the enum began SET=0 (... WATCH_KEY ...),
//    and one intermediate release line prefixed every query with a 4-byte magic number. A
//    connection that does not open with the 5 bytes {0x00, CE F7 85 3C} speaks one of those.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace wsync {
namespace store_wire {

constexpr uint32_t kValidationMagic = 0x3C85F7CEu;

enum class Query : uint8_t {
  VALIDATE = 0,
  SET = 1,
  COMPARE_SET = 2,
  GET = 3,
  ADD = 4,
  CHECK = 5,
  WAIT = 6,
  GETNUMKEYS = 7,
  DELETE_KEY = 8,
  APPEND = 9,
  MULTI_GET = 10,
  MULTI_SET = 11,
  CANCEL_WAIT = 12,
  PING = 13,
  QUEUE_PUSH = 14,
  QUEUE_POP = 15,
  QUEUE_LEN = 16,
  LIST = 17,
  // torch 2.12+ (pytorch#174920; TCPStore::barrier): u64-length key, i64 world_size. The key's
  // value is a decimal counter shared with ADD; an arrival adds 1; when it reaches world_size
  // the caller gets STOP_WAITING and every waiter on the key (barrier or WAIT) is released;
  // otherwise the caller waits (CANCEL_WAIT ends it, the arrival stays counted). An arrival that
  // does not complete the barrier wakes no one; SET/ADD/APPEND of the key release its waiters.
  BARRIER = 18,
  // wsync only, far from torch's append-only range: the group-secret login (below). torch's
  // servers close a client that sends it ("unknown query type"), which wsync's client reports
  // as a store that does not know the group's secret.
  AUTH = 0xF0,
};
constexpr uint8_t kMaxQuery = 18;  // the last of torch's queries

// AUTH, a mutual challenge-response over HMAC-SHA-256 (common/auth.h); the secret never travels.
//   client -> AUTH + 32-byte nonce cn
//   server -> 32-byte nonce sn
//   client -> AUTH + HMAC(secret, kAuthClientLabel, cn, sn)
//   server -> 1 byte kAuthAccepted + HMAC(secret, kAuthServerLabel, cn, sn), or 1 byte
//             kAuthRefused and the server closes the connection.
// The server proves the secret only to a client that proved it: whoever merely reaches the store
// gets no value computed from the secret to guess it offline from. (A store a client was wrongly
// pointed at gets the client's proof; see docs/SECURITY.md.) A server without a secret closes the
// connection on the first AUTH. The distinct labels keep a proof made by one side from being
// replayed as the other's.
constexpr size_t kAuthBytes = 32;
constexpr const char* kAuthServerLabel = "wsync-store-server";
constexpr const char* kAuthClientLabel = "wsync-store-client";
constexpr uint8_t kAuthAccepted = 0;
constexpr uint8_t kAuthRefused = 1;

// wsync's keys on the wire: its client prefixes "/" to "wsync/...". Clients without the group
// secret (the torch-clients mode) can neither read nor write them, nor see them in LIST.
constexpr const char* kWsyncKeyPrefix = "/wsync/";
bool is_wsync_key(const std::string& wire_key);

enum class CheckReply : uint8_t { READY = 0, NOT_READY = 1 };
enum class WaitReply : uint8_t { STOP_WAITING = 0, WAIT_CANCELED = 1 };

// wsync's bounds on every length read from the socket.
constexpr uint64_t kMaxKeyLen = 64u * 1024u;            // 64 KiB
constexpr uint64_t kMaxValueLen = 64u * 1024u * 1024u;  // 64 MiB
constexpr uint64_t kMaxKeyCount = 65536u;

// The client prefixes user keys with this, like torch's TCPStore.
constexpr const char* kKeyPrefix = "/";
// torch's join counter key (sent without the prefix).
constexpr const char* kInitKey = "init/";

const char* query_name(uint8_t q);  // "AUTH" for AUTH, "UNKNOWN" past the table

}  // namespace store_wire
}  // namespace wsync
