// The store's connection caps under the open-file limit (see store/fd_budget.h).
#include "store/fd_budget.h"

#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>

namespace wsync {
namespace {

// Past this the caps (thousands) cannot reach the limit: nothing is counted.
constexpr uint64_t kCountUpTo = 1u << 16;

}  // namespace

FdBudget current_fd_budget(size_t members) {
  FdBudget b;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= kCountUpTo) return b;
  b.soft_limit = rl.rlim_cur;
  for (int fd = 0; static_cast<uint64_t>(fd) < b.soft_limit; ++fd) b.in_use += ::fcntl(fd, F_GETFD) != -1;
  b.reserve = kFdReserveBase + kFdReservePerMember * members;
  const uint64_t taken = b.in_use + b.reserve;
  b.budget = b.soft_limit > taken ? static_cast<size_t>(b.soft_limit - taken) : 0;
  return b;
}

std::string fit_to_fd_budget(const FdBudget& b, StoreServerOptions* o) {
  if (b.soft_limit == 0) return "";
  const size_t budget = std::max<size_t>(b.budget, 1);
  const size_t conns = std::min(o->max_connections, budget);
  const size_t unauth = std::min(o->max_unauthenticated, std::max<size_t>(budget / 4, 1));
  const size_t room = std::max(o->members, budget / 4);
  const size_t torch = std::min(o->max_torch_clients, budget > unauth + room ? budget - unauth - room : 0);
  std::string lowered;
  auto note = [&](const char* name, size_t from, size_t to) {
    if (to == from) return;
    lowered += (lowered.empty() ? "" : ", ") + std::string(name) + " from " + std::to_string(from) + " to " +
               std::to_string(to);
  };
  note("max_connections", o->max_connections, conns);
  note("max_unauthenticated", o->max_unauthenticated, unauth);
  if (o->torch_clients) note("max_torch_clients", o->max_torch_clients, torch);
  o->max_connections = conns;
  o->max_unauthenticated = unauth;
  o->max_torch_clients = torch;
  if (lowered.empty()) return "";
  return "the open-file limit (ulimit -n " + std::to_string(b.soft_limit) + ", " + std::to_string(b.in_use) +
         " open, " + std::to_string(b.reserve) + " kept for the rest of the process) lowered " + lowered +
         " (raise ulimit -n for more)";
}

}  // namespace wsync
