// The core's one clock: milliseconds of the monotonic clock, and deadlines built from caller
// timeouts without overflow.
#pragma once

#include <cstdint>

namespace wsync {

int64_t now_ms();
// now + timeout_ms, saturating; a timeout <= 0 is "now" (already due).
int64_t deadline_after(int64_t timeout_ms);
// Milliseconds left until `deadline` (>= 0), as a poll() timeout, at most `cap` ms.
int remaining_ms(int64_t deadline, int64_t cap = 24ll * 3600 * 1000);
// A poll() timeout for "up to `left` ms" in slices of at most 100 ms, so flags are rechecked.
int poll_slice(int64_t left_ms);

}  // namespace wsync
