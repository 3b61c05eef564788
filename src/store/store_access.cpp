// The store server's gatekeeping: which queries and keys a connection may use (the rules are in
// tcp_store_server.h), the end of its handshake (VALIDATE, wsync's AUTH, torch mode), and the
// memory account every allocation on behalf of a client goes through.
#include <algorithm>
#include <cstring>

#include "common/auth.h"
#include "common/error.h"
#include "store/store_server_impl.h"
#include "store/store_wire.h"

namespace wsync {

namespace w = store_wire;
using Impl = TcpStoreServer::Impl;

namespace {

std::string hex_prefix(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

}  // namespace

std::string Impl::older_protocol(const Conn* c) {
  return "the client speaks an older torch store protocol (it did not open with VALIDATE + magic 0x3C85F7CE; first "
         "bytes " + hex_prefix(c->first, c->first_n) + "); use torch >= 2.5 or wsync's own store client";
}

// A key as it may appear in a log line: printable, at most 120 characters.
std::string Impl::shown_key(const std::string& key) {
  std::string s;
  for (size_t i = 0; i < key.size() && i < 120; ++i) {
    const unsigned char ch = static_cast<unsigned char>(key[i]);
    if (ch >= 0x20 && ch < 0x7f) {
      s += static_cast<char>(ch);
    } else {
      static const char* d = "0123456789abcdef";
      s += "\\x";
      s += d[ch >> 4];
      s += d[ch & 15];
    }
  }
  if (key.size() > 120) s += "... (" + std::to_string(key.size()) + " bytes)";
  return s;
}

// ---- who may send what -----------------------------------------------------------------------

// Called with each query type as soon as it is read; "" admits it, else the reason to close.
std::string Impl::admit_query(Conn* c, uint8_t type) {
  const std::string name = w::query_name(type);
  if (!c->validated) return type == static_cast<uint8_t>(w::Query::VALIDATE) ? "" : older_protocol(c);
  if (type == static_cast<uint8_t>(w::Query::AUTH)) {
    if (opt.secret.empty())
      return "it sent AUTH (wsync's group-secret login) but this store runs without a group secret; give the sender "
             "the same secret as this process";
    if (c->authenticated) return "it sent AUTH again after proving the group secret";
    return "";
  }
  if (c->authenticated || type == static_cast<uint8_t>(w::Query::VALIDATE)) return "";
  if (type == static_cast<uint8_t>(w::Query::PING)) {
    // torch's client connects with VALIDATE + PING: that finishes a torch worker's handshake. At
    // the cap the connection just stays in its handshake (a member's AUTH comes next).
    if (opt.torch_clients) become_torch_client(c);
    return "";
  }
  if (!opt.torch_clients)
    return "it sent " + name + " without proving the group secret; this store serves only processes that hold it "
           "(give this process the group's secret, or start the sender in its torch-clients mode for unmodified "
           "torch workers)";
  if (!become_torch_client(c))
    return "it sent " + name + " without the group secret while " + std::to_string(torch_clients) +
           " such clients are already connected (max_torch_clients" +
           (fd_limit_note.empty() ? std::string(")") : "; " + fd_limit_note + ")");
  return "";
}

// Called with each key as soon as it is read (before its value).
std::string Impl::admit_key(Conn* c, const std::string& key, uint8_t type) {
  if (sees_wsync_keys(c) || !w::is_wsync_key(key)) return "";
  return std::string("it sent ") + w::query_name(type) + " on wsync's key '" + shown_key(key) +
         "' without proving the group secret; wsync's keys are served only to processes that hold it";
}

// The first VALIDATE opens the connection; without a secret that is the whole handshake.
std::string Impl::validate_first(Conn* c, const Request& q) {
  if (q.u32 != w::kValidationMagic) return older_protocol(c);
  c->validated = true;
  if (opt.secret.empty()) set_authenticated(c);
  return "";
}

// AUTH (store_wire.h): first the client's nonce, answered with ours alone; then the client's
// proof, answered with one status byte and, only when the proof matched, our own proof. Nobody
// gets a value computed from the secret without having proved it first.
std::string Impl::authenticate(Conn* c, Request& q) {
  if (!c->auth_challenged) {
    c->client_nonce = q.blob;
    const std::vector<uint8_t> sn = random_bytes(w::kAuthBytes);
    std::copy(sn.begin(), sn.end(), c->server_nonce.begin());
    reply_room(c, w::kAuthBytes, /*force=*/true);  // once per connection: never refused
    c->out.raw(c->server_nonce.data(), c->server_nonce.size());
    c->auth_challenged = true;
    return "";
  }
  const Mac expect = Hmac(opt.secret)
                         .field(std::string(w::kAuthClientLabel))
                         .field(c->client_nonce.data(), c->client_nonce.size())
                         .field(c->server_nonce.data(), c->server_nonce.size())
                         .finish();
  const bool ok = equal_ct(expect.data(), q.blob.data(), expect.size());
  reply_room(c, 1 + w::kAuthBytes, /*force=*/true);
  c->out.u8(ok ? w::kAuthAccepted : w::kAuthRefused);
  if (ok) {
    const Mac proof = Hmac(opt.secret)
                          .field(std::string(w::kAuthServerLabel))
                          .field(c->client_nonce.data(), c->client_nonce.size())
                          .field(c->server_nonce.data(), c->server_nonce.size())
                          .finish();
    c->out.raw(proof.data(), proof.size());
  }
  if (!ok)
    return "it failed the group-secret proof (AUTH): it does not hold this group's secret; give it the sender's "
           "secret";
  set_authenticated(c);
  WSYNC_LOGD("store server %s: client %s proved the group secret", where().c_str(), c->peer.c_str());
  return "";
}

void Impl::set_authenticated(Conn* c) {
  if (c->authenticated) return;
  if (conn_pool(c)) used_torch -= std::min(used_torch, c->charged);  // its bytes move to the members' pool
  if (c->torch) --torch_clients;
  c->torch = false;
  handshaking.erase(c->id);
  c->authenticated = true;
}

bool Impl::become_torch_client(Conn* c) {
  if (c->torch) return true;
  if (!opt.torch_clients || c->authenticated || !c->validated || torch_clients >= opt.max_torch_clients) return false;
  c->torch = true;
  ++torch_clients;
  handshaking.erase(c->id);
  if (split_quota) used_torch += c->charged;  // its bytes join torch's pool
  return true;
}

// ---- the memory account ----------------------------------------------------------------------

bool Impl::torch_pool(const std::string& key) const { return split_quota && !w::is_wsync_key(key); }

bool Impl::charge(uint64_t n, bool torch, bool reply) {
  if (n > opt.memory_quota - std::min(used, opt.memory_quota)) return false;
  if (!reply && n > write_limit() - std::min(used - used_out, write_limit())) return false;
  if (torch && n > torch_share() - std::min(used_torch, torch_share())) return false;
  used += n;
  if (reply) used_out += n;
  if (torch) used_torch += n;
  return true;
}

void Impl::uncharge(uint64_t n, bool torch, bool reply) {
  used -= std::min(used, n);
  if (reply) used_out -= std::min(used_out, n);
  if (torch) used_torch -= std::min(used_torch, n);
  released_since_trim += n;
}

bool Impl::charge_conn(Conn* c, uint64_t n, bool force, bool reply) {
  const bool torch = conn_pool(c);
  if (force) {
    used += n;
    if (reply) used_out += n;
    if (torch) used_torch += n;
  } else if (!charge(n, torch, reply)) {
    return false;
  }
  c->charged += n;
  if (reply) c->out_charged += n;
  conn_bytes += n;
  return true;
}

void Impl::uncharge_conn(Conn* c, uint64_t n, bool reply) {
  n = std::min(n, reply ? c->out_charged : c->charged);
  uncharge(n, conn_pool(c), reply);
  c->charged -= n;
  if (reply) c->out_charged -= n;
  conn_bytes -= std::min(conn_bytes, n);
}

std::string Impl::refusal(const std::string& what, uint64_t n, bool torch, bool reply) const {
  if (torch && n > torch_share() - std::min(used_torch, torch_share()))
    return "the store's memory for clients without the group secret (half of its " +
           std::to_string(opt.memory_quota) + "-byte quota) is used up (" + std::to_string(used_torch) +
           " bytes in use): refusing " + what + " (" + std::to_string(n) + " more bytes)";
  const bool writes_full = !reply && n > write_limit() - std::min(used - used_out, write_limit());
  return "store memory quota of " + std::to_string(opt.memory_quota) + " bytes reached (" + std::to_string(used) +
         " bytes in use" +
         (writes_full ? ", of which requests and stored data may use three quarters; the rest is kept for replies"
                      : "") +
         "): refusing " + what + " (" + std::to_string(n) +
         " more bytes); the other clients are served, raise the store's memory_quota if the group needs more";
}

std::string Impl::reply_room(Conn* c, size_t n, bool force) {
  std::vector<uint8_t>& o = c->out.data();
  const size_t need = o.size() + n;
  const size_t cap = o.capacity();
  if (!force && c->handshaking() && c->out_pending() + n > kHandshakeReplies)
    return "it does not read the replies to its handshake (" + std::to_string(c->out_pending()) + " bytes unsent)";
  if (need <= cap) return "";
  size_t want = std::max(need, cap + cap / 2);
  if (!charge_conn(c, want - cap, force, /*reply=*/true)) {
    want = need;
    if (!charge_conn(c, want - cap, force, /*reply=*/true))
      return refusal("a reply of " + std::to_string(n) + " bytes", want - cap, conn_pool(c), /*reply=*/true);
  }
  o.reserve(want);
  if (o.capacity() > want) charge_conn(c, o.capacity() - want, /*force=*/true, /*reply=*/true);  // allocator rounding
  return "";
}

uint64_t Impl::entry_cost(const std::string& key, const std::vector<uint8_t>& v) {
  return key.size() + v.capacity() + kEntryOverhead;
}

uint64_t Impl::wait_cost(const std::string& key) { return 2 * (key.size() + kEntryOverhead); }

uint64_t Impl::recount_stored() const {
  uint64_t n = 0;
  for (const auto& e : kv) n += entry_cost(e.first, e.second);
  for (const auto& q : queues) {
    n += q.first.size() + kEntryOverhead;
    for (const auto& v : q.second) n += v.capacity() + kEntryOverhead;
  }
  return n;
}

}  // namespace wsync
