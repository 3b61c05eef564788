// The store's requests executed against the key-value state, one handler per query (torch's
// semantics, see store/store_wire.h). Every byte stored or replied is counted against the memory
// quota first (store_access.cpp); a refusal closes the client (a MULTI_SET keeps the pairs stored
// before the refused one, as a client that vanished halfway through would leave them).
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

// Replies larger than this (a huge MULTI_GET) close the client.
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

bool key_ready(const Impl& s, const std::string& k) {
  if (s.kv.count(k)) return true;
  auto q = s.queues.find(k);
  return q != s.queues.end() && !q->second.empty();
}

// Release a connection's WAIT once its last key is there; true when a reply was queued. The one
// byte is counted but never refused: the WAIT it answers was counted when it was registered.
bool release(Impl& s, uint64_t id, const std::string& key) {
  auto it = s.conns.find(id);
  if (it == s.conns.end() || it->second->dead) return false;
  Impl::Conn* c = it->second.get();
  if (!c->waiting.count(key)) return false;
  s.drop_waiting(c, key);
  if (!c->waiting.empty()) return false;
  s.reply_room(c, 1, /*force=*/true);
  c->out.u8(static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
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

// Reply helpers: room first (counted against the quota), then the bytes.
std::string reply_u8(Impl& s, Impl::Conn* c, uint8_t v) {
  std::string why = s.reply_room(c, 1);
  if (why.empty()) c->out.u8(v);
  return why;
}

std::string reply_i64(Impl& s, Impl::Conn* c, int64_t v) {
  std::string why = s.reply_room(c, 8);
  if (why.empty()) c->out.i64(v);
  return why;
}

std::string reply_payload(Impl& s, Impl::Conn* c, const std::vector<uint8_t>& v) {
  std::string why = s.reply_room(c, 8 + v.size());
  if (why.empty()) c->out.blob64(v.data(), v.size());
  return why;
}

// ---- one handler per query ---------------------------------------------------------------

using Handler = std::string (*)(Impl& s, Impl::Conn* c, Impl::Request& q);

std::string q_validate(Impl& s, Impl::Conn* c, Impl::Request& q) {
  if (!c->validated) return s.validate_first(c, q);
  return q.u32 == w::kValidationMagic ? "" : "VALIDATE with a wrong magic number";
}

std::string q_ping(Impl& s, Impl::Conn* c, Impl::Request& q) {
  std::string why = s.reply_room(c, 4);
  if (why.empty()) c->out.u32(q.u32);
  return why;
}

std::string q_set(Impl& s, Impl::Conn*, Impl::Request& q) { return s.kv_put(q.keys[0], std::move(q.values[0])); }

// torch: a missing key with an empty `expected` stores `desired`; a missing key with another
// `expected` stores nothing and replies `expected`; a present key is swapped when it equals
// `expected`. The reply is the value now stored.
std::string q_compare_set(Impl& s, Impl::Conn* c, Impl::Request& q) {
  const std::string& key = q.keys[0];
  std::vector<uint8_t>& expected = q.values[0];
  std::vector<uint8_t>& desired = q.values[1];
  auto it = s.kv.find(key);
  if (it == s.kv.end()) {
    std::string why = reply_payload(s, c, expected.empty() ? desired : expected);
    if (why.empty() && expected.empty()) why = s.kv_put(key, std::move(desired));
    return why;
  }
  if (it->second != expected) return reply_payload(s, c, it->second);
  std::string why = s.reply_room(c, 8 + desired.size());
  if (why.empty()) why = s.kv_put(key, std::move(desired));
  if (why.empty()) reply_payload(s, c, s.kv[key]);
  return why;
}

std::string q_get(Impl& s, Impl::Conn* c, Impl::Request& q) {
  auto it = s.kv.find(q.keys[0]);
  return reply_payload(s, c, it == s.kv.end() ? std::vector<uint8_t>() : it->second);  // libuv: empty when missing
}

std::vector<uint8_t> decimal(int64_t v) {
  const std::string text = std::to_string(v);  // counters are stored as decimal text, like torch
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string q_add(Impl& s, Impl::Conn* c, Impl::Request& q) {
  auto it = s.kv.find(q.keys[0]);
  int64_t v = q.i64;
  if (it != s.kv.end()) {
    int64_t old = 0;
    if (!parse_counter(it->second, &old))
      return "ADD on key '" + Impl::shown_key(q.keys[0]) + "' whose value is not an integer";
    v = static_cast<int64_t>(static_cast<uint64_t>(old) + static_cast<uint64_t>(q.i64));  // wraps like torch
  }
  std::string why = s.reply_room(c, 8);
  if (why.empty()) why = s.kv_put(q.keys[0], decimal(v));
  if (why.empty()) c->out.i64(v);
  return why;
}

std::string q_check(Impl& s, Impl::Conn* c, Impl::Request& q) {
  bool ready = std::all_of(q.keys.begin(), q.keys.end(), [&](const std::string& k) { return key_ready(s, k); });
  return reply_u8(s, c, static_cast<uint8_t>(ready ? w::CheckReply::READY : w::CheckReply::NOT_READY));
}

// Registers the connection as waiting on `key`; "" or the quota's refusal.
std::string add_waiting(Impl& s, Impl::Conn* c, const std::string& key) {
  if (!s.charge_conn(c, Impl::wait_cost(key)))
    return s.refusal("a WAIT on key '" + Impl::shown_key(key) + "'", Impl::wait_cost(key), s.conn_pool(c));
  c->waiting.insert(key);
  s.waiters[key].push_back(c->id);
  return "";
}

std::string q_wait(Impl& s, Impl::Conn* c, Impl::Request& q) {
  for (const std::string& k : q.keys) {
    if (key_ready(s, k) || c->waiting.count(k)) continue;
    std::string why = add_waiting(s, c, k);
    if (!why.empty()) return why;
  }
  if (c->waiting.empty()) return reply_u8(s, c, static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
  return "";
}

// Clients without the secret (torch mode) neither count nor list wsync's keys.
std::string q_num_keys(Impl& s, Impl::Conn* c, Impl::Request&) {
  const size_t n = s.sees_wsync_keys(c) ? s.kv.size() : s.kv.size() - s.wsync_keys;
  return reply_i64(s, c, static_cast<int64_t>(n));
}

std::string q_delete(Impl& s, Impl::Conn* c, Impl::Request& q) {
  const bool had = s.kv.count(q.keys[0]) > 0;
  std::string why = reply_i64(s, c, had ? 1 : 0);
  if (why.empty()) s.kv_erase(q.keys[0]);
  return why;
}

std::string q_append(Impl& s, Impl::Conn*, Impl::Request& q) {
  const std::string& key = q.keys[0];
  auto it = s.kv.find(key);
  if (it == s.kv.end()) return s.kv_put(key, std::move(q.values[0]));
  std::vector<uint8_t>& v = it->second;
  const std::vector<uint8_t>& add = q.values[0];
  if (v.size() + add.size() > StoreRequestParser::kMaxRequestBytes)
    return "APPEND would grow key '" + Impl::shown_key(key) + "' beyond " +
           std::to_string(StoreRequestParser::kMaxRequestBytes) + " bytes";
  const size_t need = v.size() + add.size(), cap = v.capacity();
  if (need > cap) {  // grow geometrically (repeated appends stay linear), counting the capacity
    const bool pool = s.torch_pool(key);
    size_t want = std::min<size_t>(std::max(need, cap + cap / 2), StoreRequestParser::kMaxRequestBytes);
    if (!s.charge(want - cap, pool)) {
      want = need;
      if (!s.charge(want - cap, pool))
        return s.refusal("APPEND of " + std::to_string(add.size()) + " bytes to key '" + Impl::shown_key(key) + "'",
                         want - cap, pool);
    }
    v.reserve(want);
  }
  v.insert(v.end(), add.begin(), add.end());
  wake_waiters(s, key);
  return "";
}

std::string q_multi_get(Impl& s, Impl::Conn* c, Impl::Request& q) {
  size_t total = 0;
  for (const std::string& k : q.keys) {
    auto it = s.kv.find(k);
    total += 8 + (it == s.kv.end() ? 0 : it->second.size());
  }
  if (total > kMaxReplyBytes) return "MULTI_GET reply of " + std::to_string(total) + " bytes is too large";
  std::string why = s.reply_room(c, total);
  if (!why.empty()) return why;
  for (const std::string& k : q.keys) {
    auto it = s.kv.find(k);
    if (it == s.kv.end()) c->out.u64(0);
    else c->out.blob64(it->second.data(), it->second.size());
  }
  return "";
}

std::string q_multi_set(Impl& s, Impl::Conn*, Impl::Request& q) {
  for (size_t i = 0; i < q.keys.size(); ++i) {
    std::string why = s.kv_put(q.keys[i], std::move(q.values[i]));
    if (!why.empty()) return why;
  }
  return "";
}

std::string q_cancel_wait(Impl& s, Impl::Conn* c, Impl::Request&) {
  s.clear_wait(c);
  return reply_u8(s, c, static_cast<uint8_t>(w::WaitReply::WAIT_CANCELED));
}

uint64_t item_cost(const std::vector<uint8_t>& v) { return v.capacity() + Impl::kEntryOverhead; }
uint64_t queue_cost(const std::string& key) { return key.size() + Impl::kEntryOverhead; }

std::string q_queue_push(Impl& s, Impl::Conn*, Impl::Request& q) {
  const std::string& key = q.keys[0];
  const bool pool = s.torch_pool(key);
  const bool fresh = s.queues.find(key) == s.queues.end();
  const uint64_t cost = item_cost(q.values[0]) + (fresh ? queue_cost(key) : 0);
  if (!s.charge(cost, pool))
    return s.refusal("QUEUE_PUSH of " + std::to_string(q.values[0].size()) + " bytes to key '" + Impl::shown_key(key) +
                     "'", cost, pool);
  s.queues[key].push_back(std::move(q.values[0]));
  wake_one_waiter(s, key);
  return "";
}

// Replies the queue's length before the pop, then the popped payload when there was one.
std::string q_queue_pop(Impl& s, Impl::Conn* c, Impl::Request& q) {
  const std::string& key = q.keys[0];
  auto it = s.queues.find(key);
  const int64_t len = it == s.queues.end() ? 0 : static_cast<int64_t>(it->second.size());
  std::string why = s.reply_room(c, 8 + (len > 0 ? 8 + it->second.front().size() : 0));
  if (!why.empty()) return why;
  c->out.i64(len);
  if (len > 0) {
    const std::vector<uint8_t>& v = it->second.front();
    c->out.blob64(v.data(), v.size());
    const bool pool = s.torch_pool(key);
    s.uncharge(item_cost(v), pool);
    it->second.pop_front();
    if (it->second.empty()) {
      s.uncharge(queue_cost(key), pool);
      s.queues.erase(it);
    }
  }
  return "";
}

std::string q_queue_len(Impl& s, Impl::Conn* c, Impl::Request& q) {
  auto it = s.queues.find(q.keys[0]);
  return reply_i64(s, c, it == s.queues.end() ? 0 : static_cast<int64_t>(it->second.size()));
}

// torch 2.12's BARRIER (store_wire.h): the arrival is counted without waking anyone, unless it
// completes the barrier.
std::string q_barrier(Impl& s, Impl::Conn* c, Impl::Request& q) {
  const std::string& key = q.keys[0];
  auto it = s.kv.find(key);
  int64_t count = 0;
  if (it != s.kv.end() && !parse_counter(it->second, &count))
    return "BARRIER on key '" + Impl::shown_key(key) + "' whose value is not an integer";
  count = static_cast<int64_t>(static_cast<uint64_t>(count) + 1u);  // wraps like torch
  const bool complete = count >= q.i64;
  std::string why = complete ? s.reply_room(c, 1) : std::string();
  if (why.empty()) why = s.kv_put(key, decimal(count), /*wake=*/false);
  if (!why.empty()) return why;
  if (complete) {
    c->out.u8(static_cast<uint8_t>(w::WaitReply::STOP_WAITING));
    wake_waiters(s, key);
    return "";
  }
  return c->waiting.count(key) ? "" : add_waiting(s, c, key);
}

std::string q_list(Impl& s, Impl::Conn* c, Impl::Request&) {
  const bool all = s.sees_wsync_keys(c);
  size_t n = 0, bytes = 8;
  for (const auto& kvp : s.kv)
    if (all || !w::is_wsync_key(kvp.first)) {
      ++n;
      bytes += 8 + kvp.first.size();
    }
  std::string why = s.reply_room(c, bytes);
  if (!why.empty()) return why;
  c->out.i64(static_cast<int64_t>(n));
  for (const auto& kvp : s.kv)
    if (all || !w::is_wsync_key(kvp.first)) c->out.str64(kvp.first);
  return "";
}

// Indexed by query type (store_wire.h, append-only).
const Handler kHandlers[] = {
    q_validate, q_set,       q_compare_set, q_get,        q_add,        q_check,     q_wait,     q_num_keys, q_delete,
    q_append,   q_multi_get, q_multi_set,   q_cancel_wait, q_ping,      q_queue_push, q_queue_pop, q_queue_len, q_list,
    q_barrier};
static_assert(sizeof kHandlers / sizeof kHandlers[0] == w::kMaxQuery + 1u, "a handler for every query type");

}  // namespace

void Impl::clear_wait(Conn* c) {
  for (const std::string& k : c->waiting) {
    uncharge_conn(c, wait_cost(k));
    auto it = waiters.find(k);
    if (it == waiters.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), c->id), v.end());
    if (v.empty()) waiters.erase(it);
  }
  std::unordered_set<std::string>().swap(c->waiting);  // a WAIT of many keys leaves no bucket array behind
}

// `key` arrived for c's WAIT (the caller already took c out of the key's waiter list).
void Impl::drop_waiting(Conn* c, const std::string& key) {
  if (c->waiting.erase(key)) uncharge_conn(c, wait_cost(key));
  if (c->waiting.empty() && c->waiting.bucket_count() > 64) std::unordered_set<std::string>().swap(c->waiting);
}

std::string Impl::kv_put(const std::string& key, std::vector<uint8_t> value, bool wake) {
  const bool pool = torch_pool(key);
  auto it = kv.find(key);
  const uint64_t cost = entry_cost(key, value);
  const uint64_t old = it == kv.end() ? 0 : entry_cost(key, it->second);
  if (cost > old && !charge(cost - old, pool))
    return refusal("a value of " + std::to_string(value.size()) + " bytes for key '" + shown_key(key) + "'", cost - old,
                   pool);
  if (old > cost) uncharge(old - cost, pool);
  if (it == kv.end()) {
    kv.emplace(key, std::move(value));
    if (w::is_wsync_key(key)) ++wsync_keys;
  } else {
    it->second = std::move(value);
  }
  if (wake) wake_waiters(*this, key);
  return "";
}

void Impl::kv_erase(const std::string& key) {
  auto it = kv.find(key);
  if (it == kv.end()) return;
  uncharge(entry_cost(key, it->second), torch_pool(key));
  if (w::is_wsync_key(key)) --wsync_keys;
  kv.erase(it);
}

std::string Impl::execute(Conn* c, Request& q) {
  // WSYNC_LOG_LEVEL=debug traces every key a client asks for (how the keys a torch process group
  // reads from the store are recorded).
  if (log_enabled(WSYNC_LOG_DEBUG) && !q.keys.empty()) {
    std::string keys;
    for (const auto& k : q.keys) keys += (keys.empty() ? "'" : ", '") + shown_key(k) + "'";
    WSYNC_LOGD("store server: %s from %s: %s", w::query_name(q.type), c->peer.c_str(), keys.c_str());
  }
  if (q.type == static_cast<uint8_t>(w::Query::AUTH)) return authenticate(c, q);
  if (q.type > w::kMaxQuery) return "unknown query type " + std::to_string(q.type);
  return kHandlers[q.type](*this, c, q);
}

}  // namespace wsync
