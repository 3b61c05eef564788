#include "common/clock.h"

#include <chrono>
#include <climits>

namespace wsync {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t deadline_after(int64_t timeout_ms) {
  const int64_t now = now_ms();
  if (timeout_ms <= 0) return now;
  return timeout_ms > INT64_MAX - now ? INT64_MAX : now + timeout_ms;
}

int remaining_ms(int64_t deadline, int64_t cap) {
  const int64_t left = deadline - now_ms();
  if (left <= 0) return 0;
  return static_cast<int>(left < cap ? left : cap);
}

int poll_slice(int64_t left_ms) {
  if (left_ms <= 0) return 0;
  return static_cast<int>(left_ms < 100 ? left_ms : 100);
}

}  // namespace wsync
