// wsync-bench's host-memory pieces shared by its rows: a receiver process that registers one
// buffer per tensor (the bytes land in place) and a sending group connected to it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "wsync.h"

namespace bench {

// A uint8 tensor descriptor of `nbytes` at `data`, named `name` (kept alive by the caller).
wsync_tensor_t host_tensor(const std::string& name, void* data, uint64_t nbytes);

// One sender (this process) and one receiver process that registers `layers` buffers of
// `layer_bytes` named name(0..layers-1), commits every version and exits at CLOSED.
// `verify_payload`: the group option's value ("0", "1"), or null for wsync's default.
class HostPair {
 public:
  HostPair(size_t layers, uint64_t layer_bytes, uint64_t bucket_bytes, const char* verify_payload = nullptr);
  ~HostPair();
  HostPair(const HostPair&) = delete;
  HostPair& operator=(const HostPair&) = delete;
  wsync_group_t* group() const { return g_; }  // null when init failed (the reason is printed)
  static std::string name(size_t i) { return "layers." + std::to_string(i) + ".weight"; }

 private:
  std::string dir_, addr_file_;
  pid_t child_ = -1;
  wsync_group_t* g_ = nullptr;
};

// CPU seconds (user + system, every thread) this process has used so far.
double process_cpu_seconds();

}  // namespace bench
