// Waiting on a receiver without spinning: the control socket and every transport instance the
// receiver holds (its place in the group's world, its parent relay's world, its own relay world),
// each armed before the sleep. An instance nothing else progresses (the group's world, once this
// receiver takes its bytes from a relay) is progressed here: its peers' messages (UCX's keepalives,
// acknowledgements) must not pile up on the other side.
#include <poll.h>

#include "common/error.h"
#include "receiver/receiver.h"

namespace wsync {
namespace {

struct Instance {
  void* self;
  int fd;
};

// The distinct instances, the one the bytes come from first.
int instances(const Link* rx, Instance out[3]) {
  int n = 0;
  if (rx->recv_self != nullptr) out[n++] = {rx->recv_self, rx->recv_fd};
  if (rx->transport_self != nullptr && rx->transport_self != rx->recv_self) out[n++] = {rx->transport_self, rx->transport_fd};
  if (rx->relay_self != nullptr) out[n++] = {rx->relay_self, rx->relay_fd};
  return n;
}

}  // namespace

void progress_transports(Link* rx, bool all) {
  const wsync_transport_v1_t* t = rx->transport.table;
  auto progress = WSYNC_HAS_FIELD(t, wsync_transport_v1_t, progress) ? t->progress : nullptr;
  if (progress == nullptr) return;
  Instance in[3];
  const int n = instances(rx, in);
  for (int i = 0; i < n; ++i)  // (the instance the bytes come from is progressed by their waits)
    if (all || (in[i].self == rx->transport_self && in[i].self != rx->recv_self)) progress(in[i].self);
}

bool sleep_on_transports(Link* rx, int64_t deadline, int max_ms) {
  const wsync_transport_v1_t* t = rx->transport.table;
  auto arm = WSYNC_HAS_FIELD(t, wsync_transport_v1_t, arm) ? t->arm : nullptr;
  Instance in[3];
  const int n = instances(rx, in);
  pollfd fds[4] = {{rx->conn.fd(), POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
  bool every_fd = true;
  for (int i = 0; i < n; ++i) {
    int32_t armed = 1;
    if (arm != nullptr && arm(in[i].self, &armed) != WSYNC_OK) armed = 0;
    if (!armed) return false;  // work now: the caller progresses again
    fds[i + 1].fd = in[i].fd;
    every_fd &= in[i].fd >= 0;
  }
  ::poll(fds, static_cast<nfds_t>(n + 1), remaining_ms(deadline, every_fd ? max_ms : 20));
  return true;
}

}  // namespace wsync
