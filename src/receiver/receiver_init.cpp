// A receiver joining its group, step by step: its config and options; the group's announcement
// in the sender's store (name, rank and protocol checked before any other connection); its
// transport plugin and device; HELLO on the control port; the transport connected; JOINED.
#include <unistd.h>

#include <algorithm>

#include "common/error.h"
#include "common/options.h"
#include "common/secret.h"
#include "common/socket.h"
#include "control/control_auth.h"
#include "control/frames.h"
#include "control/group_info.h"
#include "device/cuda_rt.h"
#include "planner/ownership_record.h"
#include "receiver/receiver.h"
#include "store/host_port.h"

namespace wsync {
namespace {

struct JoinArgs {
  wsync_receiver_config_t cfg;
  OptionList opts;
  std::string host;  // the store's
  uint16_t port = 0;
  int64_t timeout_ms = 0;
  int64_t deadline = 0;
  GroupInfo info;
  std::string secret_option, secret_file_option;
  std::string local_address;  // receiver option local_address: the control connection leaves from it
  JoinedBody joined;          // receiver option lane, said in JOINED
  GroupSecret secret;
};

int64_t left(const JoinArgs& a) { return std::max<int64_t>(a.deadline - now_ms(), 1); }

bool is_local_host(const std::string& h) {
  return h == "127.0.0.1" || h == "localhost" || h == "::1" || h == "0.0.0.0" || h == "::" || h.empty();
}

wsync_status_t apply_options(Link* rx, const OptionList& opts, JoinArgs* a) {
  for (const auto& kv : opts) {
    uint64_t n = 0;
    wsync_status_t st = WSYNC_OK;
    if (kv.first == "timeout_ms") {
      if ((st = parse_u64_option(kv.first, kv.second, 1, 24ull * 3600 * 1000, &n)) == WSYNC_OK)
        rx->timeout_ms = static_cast<int64_t>(n);
    } else if (kv.first == "device") {
      if ((st = parse_u64_option(kv.first, kv.second, 0, 1023, &n)) == WSYNC_OK) rx->device = static_cast<int>(n);
    } else if (kv.first == "receive_mode") {
      if (kv.second == "staged" || kv.second == "in_place")
        rx->sh->staged = kv.second == "staged";
      else
        st = fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver option 'receive_mode' is '%s'; use 'in_place' (the default) "
                  "or 'staged'", kv.second.c_str());
    } else if (kv.first == "local_address") {  // the address this host is known by (relays group by it)
      if (kv.second.empty()) st = fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver option 'local_address' is empty");
      a->local_address = kv.second;
    } else if (kv.first == "lane") {  // receivers that take the same boxes (a TP rank): relays stay in it
      if ((st = parse_u64_option(kv.first, kv.second, 0, 65535, &n)) == WSYNC_OK) {
        a->joined.has_lane = true;
        a->joined.lane = static_cast<uint32_t>(n);
      }
    } else if (kv.first == "rejoin") {  // a sender that is gone: the next next() joins its successor
      bool on = false;
      if ((st = parse_bool_option(kv.first, kv.second, &on)) == WSYNC_OK) rx->sh->rejoin = on;
    } else if (kv.first == "secret") {
      a->secret_option = kv.second;
    } else if (kv.first == "secret_file") {
      if (kv.second.empty()) st = fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'secret_file' is empty");
      a->secret_file_option = kv.second;
    } else if (kv.first.compare(0, 10, "transport.") != 0) {
      st = fail(WSYNC_ERR_INVALID_ARGUMENT, "unknown receiver option '%s' (known: timeout_ms, device, receive_mode, "
                "local_address, lane, rejoin, secret, secret_file, transport.*)", kv.first.c_str());
    }
    if (st != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

wsync_status_t read_config(const wsync_receiver_config_t* config, Link* rx, JoinArgs* a) {
  const wsync_receiver_config_t defaults = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_status_t st = read_struct(config, "config", &a->cfg, defaults);
  if (st != WSYNC_OK) return st;
  if (a->cfg.store_addr == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "config->store_addr is NULL");
  // (rank 0: any rank; an elastic group's sender assigns one at the join)
  rx->rank = a->cfg.rank;
  rx->group_name = a->cfg.group_name ? a->cfg.group_name : "wsync";
  if ((st = copy_options(a->cfg.options, a->cfg.num_options, &a->opts)) != WSYNC_OK) return st;
  if ((st = apply_options(rx, a->opts, a)) != WSYNC_OK) return st;
  if ((st = find_group_secret(a->secret_option, a->secret_file_option, false, &a->secret)) != WSYNC_OK) return st;
  rx->transport_key = transport_auth_key(a->secret.value);
  // Zero means default: 0 or < 0 takes the option timeout_ms.
  a->timeout_ms = a->cfg.timeout_ms > 0 ? a->cfg.timeout_ms : rx->timeout_ms;
  a->deadline = deadline_after(a->timeout_ms);
  return parse_host_port(a->cfg.store_addr, &a->host, &a->port);
}

wsync_status_t read_group_info(Link* rx, JoinArgs* a) {
  const char* addr = a->cfg.store_addr;
  wsync_status_t st = TcpStoreClient::connect(a->host, a->port, a->timeout_ms, a->secret.value, &rx->store_client);
  if (st != WSYNC_OK) return fail_msg(st, "cannot reach the group's store at " + std::string(addr) + ": " + last_error());
  rx->store_handle.client = rx->store_client.get();
  rx->store_reached = true;
  std::vector<uint8_t> blob;
  if ((st = rx->store_client->get(kGroupInfoKey, &blob, left(*a))) != WSYNC_OK)
    return fail_msg(st, "the store at " + std::string(addr) + " announced no wsync group: " + last_error());
  if ((st = decode_group_info(blob, &a->info)) != WSYNC_OK) return st;
  if (a->info.group_name != rx->group_name)
    return fail(WSYNC_ERR_REJECTED, "this receiver asked for group '%s' but the store at %s hosts group '%s'",
                rx->group_name.c_str(), addr, a->info.group_name.c_str());
  if (a->info.protocol != kControlProtocolVersion)
    return fail(WSYNC_ERR_VERSION_MISMATCH, "the sender speaks control protocol %u, this receiver speaks %u (use the "
                "same wsync release on both sides)", a->info.protocol, kControlProtocolVersion);
  if (a->cfg.rank >= a->info.world_size)
    return fail(WSYNC_ERR_REJECTED, "rank %u is out of range: group '%s' has receivers 1..%u", a->cfg.rank,
                rx->group_name.c_str(), a->info.world_size - 1);
  rx->world_size = a->info.world_size;
  rx->num_senders = a->info.num_senders;
  rx->planned = a->info.planned;
  rx->sender = a->info.sender_rank;
  rx->sender_addr = addr;
  rx->piece_bytes = a->info.piece_bytes;
  rx->window = a->info.window;
  return WSYNC_OK;
}

// Many senders: a receiver greets sender 0 only once every other sender listed its store in sender
// 0's, so that it can join them all (links_join): one that greeted sender 0 and then gave up on a
// sender not up yet would fail sender 0's init (a trainer whose ranks restart one by one).
wsync_status_t wait_senders_listed(Link* rx, const JoinArgs& a) {
  if (a.info.num_senders <= 1 || a.info.sender_rank != 0) return WSYNC_OK;
  for (uint32_t k = 1; k < a.info.num_senders; ++k) {
    std::vector<uint8_t> v;
    wsync_status_t st = rx->store_client->get(sender_key(k), &v, left(a));
    if (st != WSYNC_OK)
      return fail_msg(st, "sender " + std::to_string(k) + " of " + std::to_string(a.info.num_senders) +
                              " never listed its store in sender 0's (" + a.cfg.store_addr + "): " + last_error());
  }
  return WSYNC_OK;
}

// The transport the sender announced (a name from the unauthenticated store is only ever a plugin
// name, never a path), and where its bytes land: host memory, or this receiver's CUDA device.
wsync_status_t load_group_transport(Link* rx, const JoinArgs& a) {
  const std::string& announced = a.info.transport;
  if (a.cfg.transport == nullptr &&
      (announced.empty() ||
       announced.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos))
    return fail(WSYNC_ERR_PROTOCOL, "the store at %s announces transport '%s', which is not a plugin name",
                a.cfg.store_addr, announced.c_str());
  wsync_status_t st = load_transport(a.cfg.transport ? a.cfg.transport : announced, &rx->transport);
  if (st != WSYNC_OK) return st;
  const wsync_transport_v1_t* t = rx->transport.table;
  if (std::string(t->name) != announced)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "the group uses transport '%s' but this receiver loaded '%s' (%s)",
                announced.c_str(), t->name, rx->transport.path.c_str());
  if (!(t->caps & (WSYNC_TRANSPORT_CAP_HOST_MEMORY | WSYNC_TRANSPORT_CAP_CUDA_MEMORY)))
    return fail(WSYNC_ERR_UNSUPPORTED, "transport '%s' declares neither host nor CUDA memory", t->name);
  if ((rx->piece_bytes != 0 || rx->window > 1) && !(t->caps & WSYNC_TRANSPORT_CAP_PIECES))
    return fail(WSYNC_ERR_VERSION_MISMATCH, "the sender moves buckets in pieces of %llu bytes, %u at a time, which "
                "this receiver's transport '%s' (%s) cannot keep apart (no CAP_PIECES); use the same transport release "
                "on both sides", static_cast<unsigned long long>(rx->piece_bytes), rx->window, t->name,
                rx->transport.path.c_str());
  rx->device_memory = !(t->caps & WSYNC_TRANSPORT_CAP_HOST_MEMORY);
  if (!rx->device_memory) {
    rx->device = -1;
    return WSYNC_OK;
  }
  const CudaRt* rt = cuda_runtime();
  if (rt == nullptr)
    return fail_msg(last_status(), "transport '" + std::string(t->name) + "' moves CUDA memory, but " + last_error());
  return cuda_pick_device(rt, rx->device, &rx->device);
}

// The sender's REJECT, as this receiver's error.
wsync_status_t rejected(const JoinArgs& a, const Frame& f) {
  RejectBody reject;
  if (decode_reject(f.body, &reject) != WSYNC_OK)
    return fail(WSYNC_ERR_PROTOCOL, "the sender refused rank %u with a malformed REJECT: %s", a.cfg.rank,
                last_error().c_str());
  return fail(wire_failure(reject.status, WSYNC_ERR_REJECTED), "the sender refused rank %u: %s", a.cfg.rank,
              reject.reason.c_str());
}

// The sender's CHALLENGE: its protocol and nonce.
wsync_status_t read_challenge(Link* rx, const JoinArgs& a, std::vector<uint8_t>* nonce) {
  Frame f;
  wsync_status_t st = rx->conn.recv(&f, std::max<int64_t>(a.deadline - now_ms(), 0));
  if (st == WSYNC_ERR_TIMEOUT)
    return fail(WSYNC_ERR_TIMEOUT, "the sender's control port did not open rank %u's join within %lld ms", a.cfg.rank,
                static_cast<long long>(a.timeout_ms));
  if (st != WSYNC_OK) return st;
  if (f.type == static_cast<uint16_t>(MsgType::kReject)) return rejected(a, f);
  if (f.type != static_cast<uint16_t>(MsgType::kChallenge))
    return fail(WSYNC_ERR_VERSION_MISMATCH, "the sender opened the join with %s, not CHALLENGE: it speaks an older control "
                "protocol than %u (use the same wsync release on both sides)", msg_type_name(f.type),
                kControlProtocolVersion);
  ChallengeBody challenge;
  if (decode_challenge(f.body, &challenge) != WSYNC_OK)
    return fail(WSYNC_ERR_PROTOCOL, "the sender's CHALLENGE is malformed: %s", last_error().c_str());
  if (challenge.protocol != kControlProtocolVersion)
    return fail(WSYNC_ERR_VERSION_MISMATCH, "the sender speaks control protocol %u, this receiver speaks %u (use the "
                "same wsync release on both sides)", challenge.protocol, kControlProtocolVersion);
  *nonce = std::move(challenge.nonce);
  return WSYNC_OK;
}

// HELLO on the control port (proving the secret); WELCOME with the sender's proof, or REJECT with
// the sender's reason.
// ASSIGN (the sender gives a receiver that asked for any rank its rank), then the next frame.
wsync_status_t take_assigned_rank(Link* rx, JoinArgs& a, Frame* f) {
  AssignBody assign;
  if (a.cfg.rank != 0)
    return fail(WSYNC_ERR_PROTOCOL, "the sender assigned a rank to rank %u, which asked for its own", a.cfg.rank);
  if (decode_assign(f->body, &assign) != WSYNC_OK)
    return fail(WSYNC_ERR_PROTOCOL, "the sender's ASSIGN is malformed: %s", last_error().c_str());
  if (assign.rank < 1 || assign.rank >= rx->world_size)
    return fail(WSYNC_ERR_PROTOCOL, "the sender assigned rank %u, outside 1..%u", assign.rank, rx->world_size - 1);
  a.cfg.rank = rx->rank = assign.rank;  // (WELCOME's proof must bind it)
  rx->rank_assigned = true;
  wsync_status_t st = rx->conn.recv(f, std::max<int64_t>(a.deadline - now_ms(), 0));
  if (st == WSYNC_ERR_TIMEOUT)
    return fail(WSYNC_ERR_TIMEOUT, "the sender did not welcome rank %u within %lld ms", a.cfg.rank,
                static_cast<long long>(a.timeout_ms));
  return st;
}

wsync_status_t hello(Link* rx, JoinArgs& a) {
  // A sender bound to a wildcard or loopback address announces 127.0.0.1; a receiver on another
  // host reaches the control port where it reached the store.
  std::string control_host = a.info.control_host;
  if (is_local_host(control_host) && !is_local_host(a.host)) control_host = a.host;
  const std::string endpoint = control_host + ":" + std::to_string(a.info.control_port);
  if (rx->rejoining && endpoint == rx->avoid_control) {  // (receiver option rejoin, many senders)
    rx->avoided = true;
    return fail(WSYNC_ERR_TIMEOUT, "the store at %s still announces the group whose sender was lost (control port "
                "%s): waiting for the restarted trainer", a.cfg.store_addr, endpoint.c_str());
  }
  rx->control_endpoint = endpoint;
  wsync_status_t st = ControlConn::connect(control_host, a.info.control_port, left(a), &rx->conn, a.local_address);
  if (st != WSYNC_OK) return fail_msg(st, "cannot reach the sender's control port: " + last_error());
  rx->conn.set_peer_name("the sender of group '" + rx->group_name + "'");
  rx->conn.set_max_body(kControlMaxBodyUnauthenticated);
  std::vector<uint8_t> tx_nonce;
  if ((st = read_challenge(rx, a, &tx_nonce)) != WSYNC_OK) return st;
  if (rx->rejoining) {  // a HELLO said is answered: from here the join is seen through (Link::rejoining)
    a.deadline = std::max(a.deadline, deadline_after(rx->timeout_ms));
    a.timeout_ms = std::max(a.timeout_ms, rx->timeout_ms);
  }
  const uint32_t pid = static_cast<uint32_t>(getpid());
  const std::vector<uint8_t> rx_nonce = random_bytes(kNonceBytes);
  const Mac proof = control_hello_proof(a.secret.value, rx->group_name, a.cfg.rank, pid, tx_nonce, rx_nonce);
  const HelloBody body{kControlProtocolVersion, a.cfg.rank, pid, rx->group_name, rx_nonce,
                       std::vector<uint8_t>(proof.begin(), proof.end())};
  if ((st = rx->conn.send(MsgType::kHello, encode_hello(body), a.timeout_ms)) != WSYNC_OK) return st;
  Frame f;
  st = rx->conn.recv(&f, std::max<int64_t>(a.deadline - now_ms(), 0));
  if (st == WSYNC_ERR_TIMEOUT)
    return fail(WSYNC_ERR_TIMEOUT, "the sender did not answer rank %u's join within %lld ms", a.cfg.rank,
                static_cast<long long>(a.timeout_ms));
  if (st != WSYNC_OK) return st;
  if (f.type == static_cast<uint16_t>(MsgType::kAssign) && (st = take_assigned_rank(rx, a, &f)) != WSYNC_OK) return st;
  if (f.type == static_cast<uint16_t>(MsgType::kReject)) return rejected(a, f);
  if (f.type != static_cast<uint16_t>(MsgType::kWelcome))
    return fail(WSYNC_ERR_PROTOCOL, "the sender answered the join with %s, not WELCOME", msg_type_name(f.type));
  WelcomeBody welcome;
  if (decode_welcome(f.body, &welcome) != WSYNC_OK)
    return fail(WSYNC_ERR_PROTOCOL, "the sender answered the join with a malformed WELCOME: %s", last_error().c_str());
  if (!proof_matches(welcome.proof, control_welcome_proof(a.secret.value, rx->group_name, a.cfg.rank,
                                                          welcome.world_size, tx_nonce, rx_nonce)))
    return fail(WSYNC_ERR_REJECTED, "the process at the sender's control port (%s:%u) did not prove the group secret; "
                "refusing to take weights from it", control_host.c_str(), a.info.control_port);
  if (welcome.world_size != rx->world_size)
    return fail(WSYNC_ERR_PROTOCOL, "the sender's WELCOME says the group has %u members, its group_info said %u",
                welcome.world_size, rx->world_size);
  rx->conn.set_max_body(kControlMaxBody);
  return WSYNC_OK;
}

// The sender's transport options first, then this receiver's own (a later key wins).
OptionList transport_options(const JoinArgs& a) {
  const OptionList mine = options_with_prefix(a.opts, "transport.");
  OptionList out;
  for (const auto& kv : a.info.transport_options)
    if (std::none_of(mine.begin(), mine.end(), [&](const OptionList::value_type& m) { return m.first == kv.first; }))
      out.push_back(kv);
  out.insert(out.end(), mine.begin(), mine.end());
  return out;
}

// Create and connect one transport instance: rank `rank` of `world` members under `group`; a
// failure is also told to the sender (NACK), which is waiting for JOINED.
wsync_status_t open_transport(Link* rx, const JoinArgs& a, const std::string& group, uint32_t rank,
                              uint32_t world, void** self, int* fd, bool join_later = false, int64_t within_ms = -1) {
  if (rx->transport_opts.empty() && rx->local_ip.empty()) {
    rx->transport_opts = transport_options(a);
    // This receiver's end of its control connection: the transport listens on that interface only.
    rx->local_ip = local_ip(rx->conn.fd());
  }
  const int64_t budget = within_ms >= 0 ? std::min<int64_t>(within_ms, left(a)) : left(a);
  wsync_status_t st = open_world(rx, group, rank, world, budget, self, fd, join_later);
  if (st != WSYNC_OK) {
    const std::string why = last_error();
    send_status(rx, MsgType::kNack, 0, st, why);
    return fail_msg(st, why);
  }
  return WSYNC_OK;
}

wsync_status_t connect_transport(Link* rx, const JoinArgs& a) {
  wsync_status_t st = open_transport(rx, a, rx->group_name, a.cfg.rank, rx->world_size, &rx->transport_self,
                                     &rx->transport_fd);
  if (st != WSYNC_OK) return st;
  rx->recv_self = rx->transport_self;
  rx->recv_fd = rx->transport_fd;
  clear_error();
  return rx->conn.send(MsgType::kJoined, encode_joined(a.joined), a.timeout_ms);
}

wsync_status_t check_route(const Link* rx, const RouteBody& r) {
  const uint32_t me = rx->rank, n = rx->world_size;
  if (r.parent == me || r.parent >= n || (r.parent != 0 && (r.position == 0 || r.position >= r.parent_world ||
                                                           r.parent_world > n)))
    return fail(WSYNC_ERR_PROTOCOL, "the sender's ROUTE for rank %u is inconsistent (parent %u, position %u of %u)", me,
                r.parent, r.position, r.parent_world);
  if (r.children.size() >= n)
    return fail(WSYNC_ERR_PROTOCOL, "the sender's ROUTE gives rank %u %zu children in a group of %u", me,
                r.children.size(), n);
  for (uint32_t c : r.children)
    if (c == 0 || c == me || c >= n || c == r.parent)
      return fail(WSYNC_ERR_PROTOCOL, "the sender's ROUTE gives rank %u child %u", me, c);
  std::vector<uint32_t> sorted(r.children);
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return fail(WSYNC_ERR_PROTOCOL, "the sender's ROUTE gives rank %u a child twice", me);
  if ((r.flags & kRouteByRank) && (r.parent_world != n || (r.parent != 0 && r.position != me)))
    return fail(WSYNC_ERR_PROTOCOL, "the sender's ROUTE numbers relay worlds by rank but gives rank %u position %u "
                "of %u (a group of %u)", me, r.position, r.parent_world, n);
  return WSYNC_OK;
}

// ROUTE flag kRouteByRank: the relay worlds connect to children one by one (connect_peer), which
// this receiver's transport must have (its sender's has; a receiver may load another build).
wsync_status_t can_relay_by_rank(Link* rx) {
  const wsync_transport_v1_t* t = rx->transport.table;
  if (WSYNC_HAS_FIELD(t, wsync_transport_v1_t, connect_peer) && t->connect_peer != nullptr) return WSYNC_OK;
  const std::string why = "transport '" + std::string(t->name) + "' of this receiver has no connect_peer, which an "
                          "elastic group's relays need (its sender's has: a different build of the plugin?)";
  send_status(rx, MsgType::kNack, 0, WSYNC_ERR_UNSUPPORTED, why);
  return fail_msg(WSYNC_ERR_UNSUPPORTED, why);
}

// Elastic: this receiver's own relay world is opened even with no children (a joiner may be placed
// below it later, ROUTE_ADD), as large as the group's, and connects to each child by its rank.
wsync_status_t open_own_world_by_rank(Link* rx, const JoinArgs& a, const RouteBody& r) {
  wsync_status_t st = open_transport(rx, a, relay_world(rx->group_name, rx->rank), 0, rx->world_size, &rx->relay_self,
                                     &rx->relay_fd, true);
  if (st != WSYNC_OK) return st;
  const wsync_transport_v1_t* t = rx->transport.table;
  for (uint32_t c : r.children) {
    clear_error();
    if ((st = t->connect_peer(rx->relay_self, c, left(a))) != WSYNC_OK) {
      const std::string why = "transport '" + std::string(t->name) + "': connecting to receiver rank " +
                              std::to_string(c) + ", which this relay feeds: " + plugin_error("transport", t->name);
      send_status(rx, MsgType::kNack, 0, st, why);
      return fail_msg(st, why);
    }
  }
  return WSYNC_OK;
}

// The sender's ROUTE for this receiver, checked and taken.
wsync_status_t read_route(Link* rx, const JoinArgs& a, RouteBody* r) {
  Frame f;
  wsync_status_t st = rx->conn.recv(&f, left(a));
  if (st != WSYNC_OK) return fail_msg(st, "waiting for the sender's ROUTE: " + last_error());
  RemovedBody removed;  // (many senders: this sender gave up on the join; it may be tried again)
  if (f.type == static_cast<uint16_t>(MsgType::kRemoved) && decode_removed(f.body, &removed) == WSYNC_OK)
    return fail(WSYNC_ERR_REJECTED, "the sender removed receiver rank %u while it joined: %s", rx->rank,
                removed.reason.c_str());
  if (f.type != static_cast<uint16_t>(MsgType::kRoute))
    return fail(WSYNC_ERR_PROTOCOL, "the sender sent %s where its ROUTE was expected", msg_type_name(f.type));
  if ((st = decode_route(f.body, r)) != WSYNC_OK || (st = check_route(rx, *r)) != WSYNC_OK) return st;
  rx->parent = r->parent;
  rx->children = r->children;
  if (r->has_piece_bytes) rx->piece_bytes = r->piece_bytes;  // (the sender chose it with the route)
  rx->child_dropped.assign(r->children.size(), false);
  rx->relay_by_rank = (r->flags & kRouteByRank) != 0;
  return rx->relay_by_rank ? can_relay_by_rank(rx) : WSYNC_OK;
}

// This receiver's side of its parent's relay world (its parent is a receiver). A joiner placed
// below a relay (flag kRouteFallback) tries for wire_ms; out of reach, it says so (NACK) and takes
// the sender's second ROUTE, below the sender.
wsync_status_t join_parent_world(Link* rx, const JoinArgs& a, RouteBody* r) {
  const bool fallback = (r->flags & kRouteFallback) != 0;
  wsync_status_t st = open_transport(rx, a, relay_world(rx->group_name, r->parent), r->position, r->parent_world,
                                     &rx->recv_self, &rx->recv_fd, false, fallback ? r->wire_ms : -1);
  if (st == WSYNC_OK || !fallback || left(a) <= 0) return st;
  const uint32_t relay = r->parent;
  WSYNC_LOGW("receiver rank %u: cannot reach relay rank %u, its place in the route, within %u ms (%s); the sender "
             "places it below itself", rx->rank, relay, r->wire_ms, last_error().c_str());
  clear_error();
  rx->recv_self = rx->transport_self;  // (the bytes come from the sender after all)
  rx->recv_fd = rx->transport_fd;
  if ((st = read_route(rx, a, r)) != WSYNC_OK) return st;
  if (r->parent != 0)
    return fail(WSYNC_ERR_PROTOCOL, "the sender's second ROUTE for rank %u names relay rank %u again (after relay rank "
                "%u was out of reach, it must name the sender)", rx->rank, r->parent, relay);
  return WSYNC_OK;
}

// A group that relays: take this receiver's ROUTE, join its parent's relay world (when its parent
// is not the sender) and open its own for its children, then JOINED again.
wsync_status_t wire_route(Link* rx, const JoinArgs& a) {
  if (a.info.route == "star") return WSYNC_OK;
  RouteBody r;
  wsync_status_t st = read_route(rx, a, &r);
  // Parent side first: a relay's own world connects only when all its children joined theirs.
  if (st == WSYNC_OK && r.parent != 0) st = join_parent_world(rx, a, &r);
  if (st != WSYNC_OK) return st;
  if (rx->relay_by_rank) {
    if ((st = open_own_world_by_rank(rx, a, r)) != WSYNC_OK) return st;
  } else if (!r.children.empty() &&
             (st = open_transport(rx, a, relay_world(rx->group_name, rx->rank), 0,
                                  static_cast<uint32_t>(r.children.size() + 1), &rx->relay_self, &rx->relay_fd)) !=
                 WSYNC_OK) {
    return st;
  }
  if (r.parent != 0 || !r.children.empty())
    WSYNC_LOGI("receiver rank %u: takes the bytes from rank %u and forwards them to %zu receiver(s)", rx->rank, r.parent,
               r.children.size());
  clear_error();
  return rx->conn.send(MsgType::kJoined, {}, a.timeout_ms);
}

}  // namespace

std::string relay_world(const std::string& group, uint32_t relay) { return group + ".relay" + std::to_string(relay); }

wsync_status_t open_world(Link* rx, const std::string& group, uint32_t rank, uint32_t world,
                          int64_t timeout_ms, void** self, int* fd, bool join_later) {
  const wsync_transport_v1_t* t = rx->transport.table;
  OptionList hints = {{WSYNC_HINT_LOCAL_ADDRESS, rx->local_ip}, {WSYNC_HINT_AUTH_KEY, rx->transport_key}};
  if (join_later) hints.emplace_back(WSYNC_HINT_JOIN_LATER, "1");
  std::vector<wsync_option_t> t_c = to_c_options(rx->transport_opts), h_c = to_c_options(hints);
  wsync_transport_params_t tp = WSYNC_TRANSPORT_PARAMS_INIT;
  tp.rank = rank;
  tp.world_size = world;
  tp.group_name = group.c_str();
  tp.store = &rx->store_handle;
  tp.options = t_c.data();
  tp.num_options = t_c.size();
  tp.timeout_ms = timeout_ms;
  tp.device_index = rx->device;
  tp.hints = h_c.data();
  tp.num_hints = h_c.size();
  *self = nullptr;
  clear_error();
  wsync_status_t st = t->create(&tp, self);
  if (st == WSYNC_OK) {
    clear_error();
    st = t->connect(*self, timeout_ms);
  }
  if (st != WSYNC_OK) {
    const std::string why = "transport '" + std::string(t->name) + "': " + plugin_error("transport", t->name);
    if (*self != nullptr) t->destroy(*self);
    *self = nullptr;
    return fail_msg(st, why);
  }
  int32_t efd = -1;
  auto get_fd = WSYNC_HAS_FIELD(t, wsync_transport_v1_t, get_event_fd) ? t->get_event_fd : nullptr;
  if (get_fd != nullptr && get_fd(*self, &efd) != WSYNC_OK) efd = -1;
  *fd = efd;
  return WSYNC_OK;
}

wsync_status_t receiver_init(const wsync_receiver_config_t* config, Link* rx) {
  JoinArgs a;
  wsync_status_t st = read_config(config, rx, &a);
  if (st == WSYNC_OK) st = read_group_info(rx, &a);
  if (st == WSYNC_OK) st = wait_senders_listed(rx, a);
  if (st == WSYNC_OK) st = load_group_transport(rx, a);
  if (st == WSYNC_OK) st = hello(rx, a);
  if (st == WSYNC_OK) st = connect_transport(rx, a);
  if (st == WSYNC_OK) st = wire_route(rx, a);
  if (st != WSYNC_OK) return st;
  WSYNC_LOGI("receiver rank %u joined group '%s' (world %u) via transport '%s'", rx->rank, rx->group_name.c_str(),
             rx->world_size, rx->transport.table->name);
  return WSYNC_OK;
}

}  // namespace wsync
