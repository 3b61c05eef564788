// Helpers for multi-process tests: fork children that run a function and report through their
// exit code and stderr; deterministic tensor sets whose every byte can be checked.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "synthetic_model.h"
#include "wsync.h"

namespace harness {

// Run fn in a child process; its return value is the exit code.
pid_t spawn(const std::function<int()>& fn);
// Wait for a child up to timeout_ms; returns its exit code, 128+signal, or -1 on timeout (the
// child is then killed).
int wait_child(pid_t pid, int timeout_ms);
// SIGSTOP to a child, and wait up to timeout_ms until it stopped (every thread: kill() returns
// before they are, and meanwhile the child still runs and answers). False when it did not stop.
bool stop_child(pid_t pid, int timeout_ms = 10000);

std::string temp_dir();
// Poll a file for a "host:port" line written by the sender (store_addr_file option).
std::string read_addr_file(const std::string& path, int timeout_ms);

// One tensor of `dtype` and `shape` (nbytes computed).
synth_tensor_t tensor_of(const std::string& name, int32_t dtype, std::vector<int64_t> shape);

// A tensor set with mixed dtypes, odd sizes, an empty tensor and one tensor of `big_bytes`.
std::vector<synth_tensor_t> tensor_set(size_t count, uint64_t big_bytes);

// Owns the bytes of a tensor set at one version, and gives descriptors for send_batch.
struct Model {
  std::vector<synth_tensor_t> spec;
  std::vector<std::vector<uint8_t>> data;
  std::vector<wsync_tensor_t> descs;
  void fill(uint64_t version);
};

wsync_tensor_t desc_of(const synth_tensor_t& t, void* data);

// wsync_receiver_init for `rank` of `group` at the store `addr` ("host:port"), with the receiver
// option local_address when one is given.
wsync_status_t join(const std::string& addr, uint32_t rank, const char* group, int64_t timeout_ms,
                    wsync_receiver_t** out, const std::string& local_address = "");

// A receiver loop: joins, optionally registers buffers, checks every tensor of every update
// against the expected bytes, commits, and returns 0 after `versions` commits and a CLOSED event.
struct ReceiverPlan {
  uint32_t rank = 1;
  std::string addr_file;
  std::string group = "it";
  std::vector<synth_tensor_t> spec;
  uint64_t versions = 1;
  bool register_buffers = false;
  int64_t timeout_ms = 20000;
  // Fault injection in the receiver process: SIGKILL itself after this many bucket events.
  int die_after_buckets = -1;
  // Receiver option local_address ("" = none): 127.0.0.2, 127.0.0.3, ... make receivers on this
  // host look like hosts of their own to the route planner (relays on loopback).
  std::string local_address;
  // Called after joining (and registering), before the first event is asked for.
  std::function<void()> before_first_event;
};
int run_receiver(const ReceiverPlan& plan);

}  // namespace harness
