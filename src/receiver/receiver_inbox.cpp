// One inbox per link: the frames its sender sends are read through here once the receiver joined,
// and the words nobody waits for are handled here once, wherever the link happens to be reading: a
// CATCHUP_CANCEL for a catch-up that is over (the sender cancels when the source left; a catch-up
// still running reads its own cancel, receiver_catchup.cpp) is dropped; a ROUTE_DROP (a child of
// this relay left the group or moved, mid-update or between updates), a ROUTE_ADD (a joiner placed
// or a member moved below this relay, between updates) and a ROUTE_MOVE (this receiver's own parent
// changes, between updates) are taken.
#include <algorithm>

#include "common/clock.h"
#include "control/frames.h"
#include "receiver/receiver.h"

namespace wsync {
namespace {

bool aside(uint16_t type) {
  return type == static_cast<uint16_t>(MsgType::kCatchupCancel) || type == static_cast<uint16_t>(MsgType::kRouteDrop) ||
         type == static_cast<uint16_t>(MsgType::kRouteAdd) || type == static_cast<uint16_t>(MsgType::kRouteMove);
}

bool stale_next(const Link* rx) { return rx->conn.has_frame() && aside(rx->conn.next_type()); }

void take_aside(Link* rx, const Frame& f) {
  if (f.type == static_cast<uint16_t>(MsgType::kRouteDrop)) relay_drop_child(rx, f);
  if (f.type == static_cast<uint16_t>(MsgType::kRouteAdd)) relay_add_child(rx, f);
  if (f.type == static_cast<uint16_t>(MsgType::kRouteMove)) relay_move_parent(rx, f);
}

}  // namespace

void inbox_pump(Link* rx) {
  rx->conn.pump();
  inbox_drop_stale(rx);
}

void inbox_drop_stale(Link* rx) {
  while (stale_next(rx)) {
    Frame stale;
    if (rx->conn.recv(&stale, 0) != WSYNC_OK) return;
    take_aside(rx, stale);
  }
}

uint16_t inbox_next_type(Link* rx) {
  inbox_pump(rx);
  return rx->conn.has_frame() ? rx->conn.next_type() : 0;
}

uint16_t inbox_buffered_type(Link* rx) {
  inbox_drop_stale(rx);
  return rx->conn.has_frame() ? rx->conn.next_type() : 0;
}

wsync_status_t inbox_recv(Link* rx, Frame* f, int64_t timeout_ms) {
  const int64_t deadline = deadline_after(timeout_ms);
  for (;;) {
    wsync_status_t st = rx->conn.recv(f, std::max<int64_t>(deadline - now_ms(), 0));
    if (st != WSYNC_OK || !aside(f->type)) return st;
    take_aside(rx, *f);
  }
}

}  // namespace wsync
