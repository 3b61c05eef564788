// Which transport a group gets when its config names none (wsync_group_config_t.transport NULL or
// "auto"). One table, here, so that the rule is read in one place (docs/SECURITY.md "What listens
// where"):
//
//   store address      this host              candidates, first that loads wins
//   loopback           any                    ucx (shared memory and CMA; no network listener), tcp
//   not loopback       has an RDMA device     ucx (which then leaves its own TCP transport out), tcp
//   not loopback       no RDMA device         tcp (wsync's own: every connection proves the secret)
//
// Why not UCX's TCP transport across hosts: UCX parses what reaches its TCP port before wsync sees
// anything, and UCX 1.13's error paths there abort the process (docs/SECURITY.md, RELIABILITY.md).
// The user can still name any transport; the choice is the sender's and is announced to receivers.
#pragma once

#include <string>
#include <vector>

#include "loader/plugin_loader.h"

namespace wsync {

struct TransportChoice {
  std::vector<std::string> candidates;  // in order
  std::string why;                      // for the log: which row of the table, and why
};

// The row of the table for a sender whose store binds `bind_host` (an address or name).
TransportChoice default_transport(const std::string& bind_host);

// Load `requested` when it is set and not "auto"; otherwise the first candidate of
// default_transport(bind_host) that loads (logged at INFO with the reason). The error of the last
// attempt when none loads.
wsync_status_t load_group_transport(const char* requested, const std::string& bind_host, LoadedTransport* out);

// True when this host has an RDMA device (an entry in /sys/class/infiniband: InfiniBand and RoCE).
bool host_has_rdma();

}  // namespace wsync
