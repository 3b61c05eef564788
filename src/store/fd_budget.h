// How many connections the store may hold without taking the file descriptors the rest of the
// process needs. Every connection costs the trainer one descriptor; established ones (members,
// torch clients) are never closed to make room, so their caps must fit under RLIMIT_NOFILE or a
// flood of idle torch clients leaves accept() failing with EMFILE for the real members.
//
// At start the store reads the soft limit and counts the descriptors in use, keeps a reserve for
// the process's other descriptors (kFdReserveBase plus kFdReservePerMember per member: its control
// connection, its transport's sockets), and of the rest (the budget) gives
//   max_connections      at most the whole budget,
//   max_unauthenticated  at most a quarter of it,
//   max_torch_clients    at most what is left after the handshakes and the members' room
//                        (a quarter of the budget, and never less than the members themselves),
// so members always find a descriptor, a place and, in torch mode, room no torch client can take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "store/tcp_store_server.h"

namespace wsync {

constexpr size_t kFdReserveBase = 64;
constexpr size_t kFdReservePerMember = 4;

struct FdBudget {
  uint64_t soft_limit = 0;  // RLIMIT_NOFILE's soft limit; 0 = unlimited (nothing is lowered)
  size_t in_use = 0;        // descriptors open when the store started
  size_t reserve = 0;       // kept for the rest of the process
  size_t budget = 0;        // for the store's connections
};

// The budget of this process now, for a group of `members`.
FdBudget current_fd_budget(size_t members);

// `o`'s caps lowered to fit `b` (see above); "" when nothing was lowered, else a sentence saying
// what was, for the log and for refusals.
std::string fit_to_fd_budget(const FdBudget& b, StoreServerOptions* o);

}  // namespace wsync
