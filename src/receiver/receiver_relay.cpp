// A relay's children (group option route): who this receiver forwards to, by which rank of its
// relay world, and the changes the sender makes between buckets (ROUTE_DROP: a child left or
// moved) and between updates (elastic groups: ROUTE_ADD, a joiner placed or a member moved below
// this relay; ROUTE_MOVE, this receiver's own parent changes).
#include <algorithm>

#include "common/error.h"
#include "control/frames.h"
#include "receiver/receiver.h"

namespace wsync {

uint32_t relay_child_peer(const Link* rx, size_t i) {
  return rx->relay_by_rank ? rx->children[i] : static_cast<uint32_t>(i + 1);
}

std::vector<uint32_t> relay_live_peers(const Link* rx) {
  std::vector<uint32_t> out;
  if (rx->relay_self == nullptr) return out;
  for (size_t i = 0; i < rx->children.size(); ++i)
    if (i >= rx->child_dropped.size() || !rx->child_dropped[i]) out.push_back(relay_child_peer(rx, i));
  return out;
}

bool relay_feeds_anyone(const Link* rx) { return !relay_live_peers(rx).empty(); }

std::string relay_world_note(const Link* rx) {
  if (rx->relay_by_rank) return "";  // (its world numbers them by their group ranks)
  std::string s;
  for (size_t i = 0; i < rx->children.size(); ++i)
    s += (i == 0 ? " (in this relay's world rank " : ", rank ") + std::to_string(i + 1) + " is receiver rank " +
         std::to_string(rx->children[i]);
  return s.empty() ? s : s + ")";
}

void relay_drop_child(Link* rx, const Frame& f) {
  RouteDropBody d;
  if (decode_route_drop(f.body, &d) != WSYNC_OK) {
    WSYNC_LOGW("receiver rank %u: the sender's ROUTE_DROP is malformed (ignored): %s", rx->rank, last_error().c_str());
    clear_error();
    return;
  }
  const auto it = std::find(rx->children.begin(), rx->children.end(), d.rank);
  if (it == rx->children.end() || rx->relay_self == nullptr) {
    WSYNC_LOGW("receiver rank %u: the sender says receiver rank %u left, which it does not forward to (ignored)",
               rx->rank, d.rank);
    return;
  }
  const size_t i = static_cast<size_t>(it - rx->children.begin());
  if (rx->child_dropped.size() < rx->children.size()) rx->child_dropped.resize(rx->children.size(), false);
  if (rx->child_dropped[i]) return;
  rx->child_dropped[i] = true;
  const wsync_transport_v1_t* t = rx->transport.table;
  if ((t->caps & WSYNC_TRANSPORT_CAP_FORGET_ONE) && t->forget_peer != nullptr)
    t->forget_peer(rx->relay_self, relay_child_peer(rx, i));  // (its sends in flight fail for it alone)
  WSYNC_LOGW("receiver rank %u: receiver rank %u, which it forwards to, is not below it any more (it left the group, "
             "or the sender moved it); forwarding to the others only", rx->rank, d.rank);
}

void relay_add_child(Link* rx, const Frame& f) {
  RouteDropBody d;
  if (decode_route_add(f.body, &d) != WSYNC_OK) {
    WSYNC_LOGW("receiver rank %u: the sender's ROUTE_ADD is malformed (ignored): %s", rx->rank, last_error().c_str());
    clear_error();
    return;
  }
  const wsync_transport_v1_t* t = rx->transport.table;
  const bool can = rx->relay_by_rank && rx->relay_self != nullptr &&
                   WSYNC_HAS_FIELD(t, wsync_transport_v1_t, connect_peer) && t->connect_peer != nullptr;
  if (!can || d.rank == 0 || d.rank == rx->rank || d.rank == rx->parent || d.rank >= rx->world_size) {
    WSYNC_LOGW("receiver rank %u: the sender's ROUTE_ADD of receiver rank %u is refused (ignored: the sender names "
               "that receiver when its bytes do not come): %s", rx->rank, d.rank,
               can ? "not a rank this relay can feed" : "this receiver has no relay world numbered by ranks");
    return;
  }
  clear_error();
  // (the joiner wired itself into this world before its JOINED, which came before this frame: its
  // address is in the store; the wait is bounded all the same)
  if (t->connect_peer(rx->relay_self, d.rank, std::min<int64_t>(rx->timeout_ms, 10000)) != WSYNC_OK) {
    WSYNC_LOGW("receiver rank %u: cannot forward to receiver rank %u, placed below it: %s (the sender names that "
               "receiver when its bytes do not come)", rx->rank, d.rank, plugin_error("transport", t->name).c_str());
    clear_error();
    return;
  }
  const auto it = std::find(rx->children.begin(), rx->children.end(), d.rank);
  if (rx->child_dropped.size() < rx->children.size()) rx->child_dropped.resize(rx->children.size(), false);
  if (it == rx->children.end()) {
    rx->children.push_back(d.rank);
    rx->child_dropped.push_back(false);
  } else {
    rx->child_dropped[static_cast<size_t>(it - rx->children.begin())] = false;
  }
  WSYNC_LOGI("receiver rank %u: receiver rank %u is placed below it; forwarding to %zu receiver(s)", rx->rank, d.rank,
             relay_live_peers(rx).size());
}

namespace {

// This receiver's answer to a ROUTE_MOVE: JOINED (wired in), or a NACK saying why it stays.
void answer_move(Link* rx, wsync_status_t st, const std::string& why) {
  if (st != WSYNC_OK) {
    send_status(rx, MsgType::kNack, kRouteMoveNackSeq, st, why);
    return;
  }
  if (rx->conn.send(MsgType::kJoined, {}, std::min<int64_t>(rx->timeout_ms, 1000)) != WSYNC_OK)
    clear_error();  // (a connection that broke: the link's next read says so)
}

}  // namespace

void relay_move_parent(Link* rx, const Frame& f) {
  RouteMoveBody d;
  if (decode_route_move(f.body, &d) != WSYNC_OK) {
    const std::string why = last_error();
    clear_error();
    WSYNC_LOGW("receiver rank %u: the sender's ROUTE_MOVE is malformed: %s", rx->rank, why.c_str());
    answer_move(rx, WSYNC_ERR_PROTOCOL, why);
    return;
  }
  const uint32_t to = d.parent, from = rx->parent;
  const std::vector<uint32_t> below = relay_live_peers(rx);
  const bool by_rank = rx->relay_by_rank && rx->transport_self != nullptr;
  if (!by_rank || to == rx->rank || to >= rx->world_size || std::find(below.begin(), below.end(), to) != below.end()) {
    const std::string why = "ROUTE_MOVE to rank " + std::to_string(to) + " refused: " +
                            (by_rank ? "its own rank, one it forwards to, or outside the group"
                                     : "this receiver has no relay world numbered by ranks");
    WSYNC_LOGW("receiver rank %u: the sender's %s", rx->rank, why.c_str());
    answer_move(rx, WSYNC_ERR_PROTOCOL, why);
    return;
  }
  void* self = rx->transport_self;  // (below the sender: the world every member joined at init)
  int fd = rx->transport_fd;
  if (to != 0 && to != from) {
    clear_error();
    const wsync_status_t st = open_world(rx, relay_world(rx->group_name, to), rx->rank, rx->world_size,
                                         std::min<int64_t>(d.wire_ms, 10000), &self, &fd);
    if (st != WSYNC_OK) {
      const std::string why = "cannot reach relay rank " + std::to_string(to) + ": " + last_error();
      clear_error();
      WSYNC_LOGW("receiver rank %u: stays below %s: %s", rx->rank, from == 0 ? "the sender" : ("rank " + std::to_string(from)).c_str(),
                 why.c_str());
      answer_move(rx, st, why);
      return;
    }
  } else if (to != 0) {  // (already there)
    self = rx->recv_self;
    fd = rx->recv_fd;
  }
  void* old = rx->recv_self;
  rx->recv_self = self;
  rx->recv_fd = fd;
  if (old != nullptr && old != self && old != rx->transport_self) rx->transport.table->destroy(old);
  rx->parent = to;
  WSYNC_LOGI("receiver rank %u: takes the bytes from rank %u from the next update on (was rank %u): the sender "
             "re-planned its route", rx->rank, to, from);
  answer_move(rx, WSYNC_OK, "");
}

}  // namespace wsync
