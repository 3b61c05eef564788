// Warnings bounded per window (see common/log_rate_limit.h).
#include "common/log_rate_limit.h"

namespace wsync {

bool LogRateLimit::admit(int64_t now_ms) {
  flush(now_ms);
  if (in_window_ < burst_) {
    ++in_window_;
    return true;
  }
  ++suppressed_;
  return false;
}

void LogRateLimit::flush(int64_t now_ms, bool force) {
  if (!force && now_ms - window_start_ < window_ms_) return;
  if (suppressed_ > 0 && summary_) summary_(suppressed_, window_ms_);
  window_start_ = now_ms;
  in_window_ = 0;
  suppressed_ = 0;
}

}  // namespace wsync
