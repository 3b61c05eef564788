// A bound on how often one kind of warning is logged: a flood of connections (refused, dropped,
// closed) must not flood the process's log. The first `burst` lines of each window are logged;
// the rest are only counted, and the count is handed to a summary when the window ends.
#pragma once

#include <cstdint>
#include <functional>

namespace wsync {

class LogRateLimit {
 public:
  // summary(n, window_ms): called with the lines suppressed in a window that ended (n > 0).
  LogRateLimit(int burst, int64_t window_ms, std::function<void(uint64_t, int64_t)> summary)
      : burst_(burst), window_ms_(window_ms), summary_(std::move(summary)) {}

  // Whether one more line may be logged at now_ms (else it is counted). Ends the window first
  // when it is over.
  bool admit(int64_t now_ms);
  // Ends the window when it is over (force: now), giving the summary of what it suppressed. Call
  // it now and then even when nothing happens, and when the work that logged is done.
  void flush(int64_t now_ms, bool force = false);
  uint64_t suppressed() const { return suppressed_; }

 private:
  int burst_;
  int64_t window_ms_;
  std::function<void(uint64_t, int64_t)> summary_;
  int64_t window_start_ = INT64_MIN / 2;
  int in_window_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace wsync
