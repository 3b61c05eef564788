// Waiting on the pipeline thread without spinning a core: one poll() over the receivers' control
// sockets, the transport's event fd (armed first, so it signals the next event) and the group's
// wake fd (abort, destroy). A transport without an event fd is looked at every millisecond.
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "common/error.h"
#include "group/group_internal.h"

namespace wsync {
namespace {

constexpr int kNoFdSliceMs = 1;     // how often a transport without an event fd is polled
constexpr int kMaxSleepMs = 1000;   // a safety net: flags are re-read at least this often

// 1: the transport's fd will signal its next event; 0: it has work now (poll again at once).
int arm_transport(wsync_group_t* g) {
  const wsync_transport_v1_t* t = g->plugins.transport.table;
  auto arm = WSYNC_HAS_FIELD(t, wsync_transport_v1_t, arm) ? t->arm : nullptr;
  if (arm == nullptr) return 1;  // an fd without arm: level-triggered, always safe to sleep on
  int32_t armed = 0;
  if (arm(g->plugins.transport_self, &armed) != WSYNC_OK) return 0;
  return armed != 0;
}

}  // namespace

wsync_status_t poll_transport(wsync_group_t* g, uint64_t seq) {
  clear_error();
  wsync_status_t st = g->plugins.transport.table->send_wait(g->plugins.transport_self, seq, 0);
  if (st == WSYNC_OK || st == WSYNC_ERR_TIMEOUT) return st;
  const char* name = g->plugins.transport.table->name;
  return fail_msg(st, "transport '" + std::string(name) + "': " + plugin_error("transport", name));
}

void wait_for_progress(wsync_group_t* g, const WaitSet& w, int64_t deadline) {
  std::vector<pollfd> fds;
  fds.reserve(w.peers.size() + 2);
  fds.push_back(pollfd{g->pipe.wake_fd, POLLIN, 0});
  for (Peer* p : w.peers)
    if (p->conn.open()) fds.push_back(pollfd{p->conn.fd(), POLLIN, 0});
  int timeout = remaining_ms(deadline, kMaxSleepMs);
  if (w.transport_seq != 0) {
    if (g->plugins.transport_fd < 0)
      timeout = std::min(timeout, kNoFdSliceMs);
    else if (arm_transport(g))
      fds.push_back(pollfd{g->plugins.transport_fd, POLLIN, 0});
    else
      timeout = 0;
  }
  if (::poll(fds.data(), fds.size(), timeout) > 0 && (fds[0].revents & POLLIN)) {
    uint64_t n;
    ssize_t r = ::read(g->pipe.wake_fd, &n, sizeof n);  // an eventfd: one read resets it; the flags stay set
    (void)r;
  }
}

std::string peer_names(const std::vector<Peer*>& peers) {
  std::string s;
  for (Peer* p : peers) s += (s.empty() ? "" : ", ") + p->conn.peer_name();
  return s;
}

}  // namespace wsync
