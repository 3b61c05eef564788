// The store's requests: parsing one from a connection's bytes, and executing it against the
// key-value state, one handler per query (torch's semantics, see store/store_wire.h).
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "common/error.h"
#include "store/store_server_impl.h"
#include "store/store_wire.h"

namespace wsync {

namespace w = store_wire;
using Impl = TcpStoreServer::Impl;

namespace {

// A whole request (all its fields) must fit in this many bytes; MULTI_SET is the only request
// that can approach it. Replies larger than kMaxReplyBytes (a huge MULTI_GET) close the client.
constexpr size_t kMaxRequestBytes = 256u * 1024u * 1024u;
constexpr size_t kMaxReplyBytes = 512u * 1024u * 1024u;

// torch parses stored counters with std::stoll: optional leading space and sign, then digits;
// trailing text is ignored. Returns false when there are no digits or the value overflows.
bool parse_counter(const std::vector<uint8_t>& v, int64_t* out) {
  size_t i = 0, n = v.size();
  while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r' || v[i] == '\f' || v[i] == '\v')) ++i;
  bool neg = false;
  if (i < n && (v[i] == '+' || v[i] == '-')) neg = (v[i++] == '-');
  if (i >= n || v[i] < '0' || v[i] > '9') return false;
  uint64_t mag = 0;
  const uint64_t limit = neg ? (uint64_t(INT64_MAX) + 1u) : uint64_t(INT64_MAX);
  for (; i < n && v[i] >= '0' && v[i] <= '9'; ++i) {
    uint64_t dgt = uint64_t(v[i] - '0');
    if (mag > (limit - dgt) / 10u) return false;
    mag = mag * 10u + dgt;
  }
  *out = neg ? static_cast<int64_t>(0u - mag) : static_cast<int64_t>(mag);
  return true;
}

void reply_u8(Impl::Conn* c, uint8_t v) { c->out.u8(v); }
void reply_payload(Impl::Conn* c, const std::vector<uint8_t>& v) { c->out.blob64(v.data(), v.size()); }

bool key_ready(const Impl& s, const std::string& k) {
  if (s.kv.count(k)) return true;
  auto q = s.queues.find(k);
  return q != s.queues.end() && !q->second.empty();
}

// Release a connection's WAIT once its last key is there; true when a reply was queued.
bool release(Impl& s, uint64_t id, const std::string& key) {
  auto c = s.conns.find(id);
  if (c == s.conns.end() || !c->second->waiting.erase(key) || !c->second->waiting.empty()) return false;
  reply_u8(c->second.get(), static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
  return true;
}

void wake_waiters(Impl& s, const std::string& key) {
  auto it = s.waiters.find(key);
  if (it == s.waiters.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  s.waiters.erase(it);
  bool any = false;
  for (uint64_t id : ids) any |= release(s, id, key);
  if (any) s.wake();  // flush from the loop
}

// Queue pushes release one waiter, like torch's libuv backend.
void wake_one_waiter(Impl& s, const std::string& key) {
  auto it = s.waiters.find(key);
  if (it == s.waiters.end()) return;
  auto& ids = it->second;
  while (!ids.empty()) {
    uint64_t id = ids.front();
    ids.erase(ids.begin());
    auto c = s.conns.find(id);
    if (c == s.conns.end() || !c->second->waiting.count(key)) continue;
    if (release(s, id, key)) s.wake();
    break;
  }
  if (ids.empty()) s.waiters.erase(it);
}

void do_set(Impl& s, const std::string& key, std::vector<uint8_t> value) {
  s.kv[key] = std::move(value);
  wake_waiters(s, key);
}

// ---- one handler per query ---------------------------------------------------------------

using Handler = std::string (*)(Impl& s, Impl::Conn* c, Impl::Request& q);

std::string q_validate(Impl&, Impl::Conn*, Impl::Request& q) {
  return q.u32 == w::kValidationMagic ? "" : "VALIDATE with a wrong magic number";
}

std::string q_ping(Impl&, Impl::Conn* c, Impl::Request& q) {
  c->out.u32(q.u32);
  return "";
}

std::string q_set(Impl& s, Impl::Conn*, Impl::Request& q) {
  do_set(s, q.keys[0], std::move(q.values[0]));
  return "";
}

// torch: a missing key with an empty `expected` stores `desired`; a missing key with another
// `expected` stores nothing and replies `expected`; a present key is swapped when it equals
// `expected`. The reply is the value now stored.
std::string q_compare_set(Impl& s, Impl::Conn* c, Impl::Request& q) {
  const std::string& key = q.keys[0];
  std::vector<uint8_t>& expected = q.values[0];
  std::vector<uint8_t>& desired = q.values[1];
  auto it = s.kv.find(key);
  if (it == s.kv.end()) {
    reply_payload(c, expected.empty() ? desired : expected);
    if (expected.empty()) do_set(s, key, std::move(desired));
  } else if (it->second == expected) {
    it->second = std::move(desired);
    reply_payload(c, it->second);
    wake_waiters(s, key);
  } else {
    reply_payload(c, it->second);
  }
  return "";
}

std::string q_get(Impl& s, Impl::Conn* c, Impl::Request& q) {
  auto it = s.kv.find(q.keys[0]);
  reply_payload(c, it == s.kv.end() ? std::vector<uint8_t>() : it->second);  // libuv: empty when missing
  return "";
}

std::string q_add(Impl& s, Impl::Conn* c, Impl::Request& q) {
  auto it = s.kv.find(q.keys[0]);
  int64_t v = q.i64;
  if (it != s.kv.end()) {
    int64_t old = 0;
    if (!parse_counter(it->second, &old)) return "ADD on key '" + q.keys[0] + "' whose value is not an integer";
    v = static_cast<int64_t>(static_cast<uint64_t>(old) + static_cast<uint64_t>(q.i64));  // wraps like torch
  }
  const std::string text = std::to_string(v);  // stored as decimal text, like torch
  do_set(s, q.keys[0], std::vector<uint8_t>(text.begin(), text.end()));
  c->out.i64(v);
  return "";
}

std::string q_check(Impl& s, Impl::Conn* c, Impl::Request& q) {
  bool ready = std::all_of(q.keys.begin(), q.keys.end(), [&](const std::string& k) { return key_ready(s, k); });
  reply_u8(c, static_cast<uint8_t>(ready ? w::CheckReply::READY : w::CheckReply::NOT_READY));
  return "";
}

std::string q_wait(Impl& s, Impl::Conn* c, Impl::Request& q) {
  for (const std::string& k : q.keys) {
    if (key_ready(s, k) || c->waiting.count(k)) continue;
    c->waiting.insert(k);
    s.waiters[k].push_back(c->id);
  }
  if (c->waiting.empty()) reply_u8(c, static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
  return "";
}

std::string q_num_keys(Impl& s, Impl::Conn* c, Impl::Request&) {
  c->out.i64(static_cast<int64_t>(s.kv.size()));
  return "";
}

std::string q_delete(Impl& s, Impl::Conn* c, Impl::Request& q) {
  c->out.i64(static_cast<int64_t>(s.kv.erase(q.keys[0])));
  return "";
}

std::string q_append(Impl& s, Impl::Conn*, Impl::Request& q) {
  auto it = s.kv.find(q.keys[0]);
  if (it == s.kv.end()) {
    s.kv[q.keys[0]] = std::move(q.values[0]);
  } else {
    if (it->second.size() + q.values[0].size() > kMaxRequestBytes)
      return "APPEND would grow key '" + q.keys[0] + "' beyond " + std::to_string(kMaxRequestBytes) + " bytes";
    it->second.insert(it->second.end(), q.values[0].begin(), q.values[0].end());
  }
  wake_waiters(s, q.keys[0]);
  return "";
}

std::string q_multi_get(Impl& s, Impl::Conn* c, Impl::Request& q) {
  size_t total = 0;
  for (const std::string& k : q.keys) {
    auto it = s.kv.find(k);
    total += 8 + (it == s.kv.end() ? 0 : it->second.size());
  }
  if (total > kMaxReplyBytes) return "MULTI_GET reply of " + std::to_string(total) + " bytes is too large";
  c->out.reserve(c->out.size() + total);
  for (const std::string& k : q.keys) {
    auto it = s.kv.find(k);
    reply_payload(c, it == s.kv.end() ? std::vector<uint8_t>() : it->second);
  }
  return "";
}

std::string q_multi_set(Impl& s, Impl::Conn*, Impl::Request& q) {
  for (size_t i = 0; i < q.keys.size(); ++i) do_set(s, q.keys[i], std::move(q.values[i]));
  return "";
}

std::string q_cancel_wait(Impl& s, Impl::Conn* c, Impl::Request&) {
  s.clear_wait(c);
  reply_u8(c, static_cast<uint8_t>(w::WaitReply::WAIT_CANCELED));
  return "";
}

std::string q_queue_push(Impl& s, Impl::Conn*, Impl::Request& q) {
  s.queues[q.keys[0]].push_back(std::move(q.values[0]));
  wake_one_waiter(s, q.keys[0]);
  return "";
}

// Replies the queue's length before the pop, then the popped payload when there was one.
std::string q_queue_pop(Impl& s, Impl::Conn* c, Impl::Request& q) {
  auto it = s.queues.find(q.keys[0]);
  int64_t len = it == s.queues.end() ? 0 : static_cast<int64_t>(it->second.size());
  c->out.i64(len);
  if (len > 0) {
    reply_payload(c, it->second.front());
    it->second.pop_front();
    if (it->second.empty()) s.queues.erase(it);
  }
  return "";
}

std::string q_queue_len(Impl& s, Impl::Conn* c, Impl::Request& q) {
  auto it = s.queues.find(q.keys[0]);
  c->out.i64(it == s.queues.end() ? 0 : static_cast<int64_t>(it->second.size()));
  return "";
}

// torch 2.12's BARRIER (store_wire.h): the arrival is counted without waking anyone, unless it
// completes the barrier.
std::string q_barrier(Impl& s, Impl::Conn* c, Impl::Request& q) {
  const std::string& key = q.keys[0];
  auto it = s.kv.find(key);
  int64_t count = 0;
  if (it != s.kv.end() && !parse_counter(it->second, &count))
    return "BARRIER on key '" + key + "' whose value is not an integer";
  count = static_cast<int64_t>(static_cast<uint64_t>(count) + 1u);  // wraps like torch
  const std::string text = std::to_string(count);
  s.kv[key] = std::vector<uint8_t>(text.begin(), text.end());
  if (count >= q.i64) {
    reply_u8(c, static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
    wake_waiters(s, key);
    return "";
  }
  if (c->waiting.insert(key).second) s.waiters[key].push_back(c->id);
  return "";
}

std::string q_list(Impl& s, Impl::Conn* c, Impl::Request&) {
  c->out.i64(static_cast<int64_t>(s.kv.size()));
  for (const auto& kvp : s.kv) c->out.str64(kvp.first);
  return "";
}

// Indexed by query type (store_wire.h, append-only).
const Handler kHandlers[] = {
    q_validate, q_set,       q_compare_set, q_get,        q_add,        q_check,     q_wait,     q_num_keys, q_delete,
    q_append,   q_multi_get, q_multi_set,   q_cancel_wait, q_ping,      q_queue_push, q_queue_pop, q_queue_len, q_list,
    q_barrier};
static_assert(sizeof kHandlers / sizeof kHandlers[0] == w::kMaxQuery + 1u, "a handler for every query type");

// ---- parsing -------------------------------------------------------------------------------

bool read_key(ByteReader& r, Impl::Request* q) {
  std::string k;
  if (!r.str64(&k, w::kMaxKeyLen, "key")) return false;
  q->keys.push_back(std::move(k));
  return true;
}

bool read_value(ByteReader& r, Impl::Request* q, const char* what) {
  std::vector<uint8_t> v;
  if (!r.blob64(&v, w::kMaxValueLen, what)) return false;
  q->values.push_back(std::move(v));
  return true;
}

bool read_keys(ByteReader& r, Impl::Request* q) {
  uint64_t n = 0;
  if (!r.count64(&n, w::kMaxKeyCount, "key count")) return false;
  q->keys.reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i)
    if (!read_key(r, q)) return false;
  return true;
}

bool read_pairs(ByteReader& r, Impl::Request* q, std::string* bad) {
  uint64_t n = 0;
  if (!r.count64(&n, w::kMaxKeyCount, "key count")) return false;
  for (uint64_t i = 0; i < n; ++i) {
    if (!read_key(r, q) || !read_value(r, q, "value")) return false;
    if (r.pos() > kMaxRequestBytes) {
      *bad = "MULTI_SET request exceeds " + std::to_string(kMaxRequestBytes) + " bytes";
      return false;
    }
  }
  return true;
}

}  // namespace

void Impl::clear_wait(Conn* c) {
  for (const std::string& k : c->waiting) {
    auto it = waiters.find(k);
    if (it == waiters.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), c->id), v.end());
    if (v.empty()) waiters.erase(it);
  }
  c->waiting.clear();
}

bool Impl::parse(ByteReader& r, Request* q, std::string* bad) {
  if (!r.u8(&q->type)) return false;
  switch (static_cast<w::Query>(q->type)) {
    case w::Query::VALIDATE:
    case w::Query::PING:
      return r.u32(&q->u32);
    case w::Query::SET:
    case w::Query::APPEND:
    case w::Query::QUEUE_PUSH:
      return read_key(r, q) && read_value(r, q, "value");
    case w::Query::COMPARE_SET:
      return read_key(r, q) && read_value(r, q, "expected value") && read_value(r, q, "desired value");
    case w::Query::GET:
    case w::Query::DELETE_KEY:
    case w::Query::QUEUE_POP:
    case w::Query::QUEUE_LEN:
      return read_key(r, q);
    case w::Query::ADD:
    case w::Query::BARRIER:
      return read_key(r, q) && r.i64(&q->i64);
    case w::Query::CHECK:
    case w::Query::WAIT:
    case w::Query::MULTI_GET:
      return read_keys(r, q);
    case w::Query::MULTI_SET:
      return read_pairs(r, q, bad);
    case w::Query::GETNUMKEYS:
    case w::Query::CANCEL_WAIT:
    case w::Query::LIST:
      return true;
  }
  *bad = "unknown query type " + std::to_string(q->type);
  return false;
}

std::string Impl::execute(Conn* c, Request& q) {
  // WSYNC_LOG_LEVEL=debug traces every key a client asks for (how the keys a torch process group
  // reads from the store are recorded).
  if (log_enabled(WSYNC_LOG_DEBUG) && !q.keys.empty()) {
    std::string keys;
    for (const auto& k : q.keys) keys += (keys.empty() ? "'" : ", '") + k + "'";
    WSYNC_LOGD("store server: %s from %s: %s", w::query_name(q.type), c->peer.c_str(), keys.c_str());
  }
  if (q.type > w::kMaxQuery) return "unknown query type " + std::to_string(q.type);
  return kHandlers[q.type](*this, c, q);
}

}  // namespace wsync
