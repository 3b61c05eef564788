// HTTP engines: a group whose adapter declares WSYNC_ADAPTER_CAP_HTTP drives engine servers over
// their own HTTP protocol. The adapter builds each step's requests (data only); this file sends
// them with the core's HTTP client (src/http), to every server concurrently, and judges replies.
//
//   init:      HEALTH (filter) -> rank offsets, world size -> INIT, posted while receivers join
//   update:    PAUSE, BEGIN_UPDATE once; per bucket UPDATE, posted before the bucket moves and
//              collected after its ACKs (engines reply only once the bytes arrived)
//   finalize:  FINALIZE before the commit, RESUME after it
//   destroy:   DESTROY, best effort
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/options.h"
#include "group/group.h"
#include "planner/bucket_planner.h"

namespace wsync {

// Options of an HTTP group: engines, engine_receivers, engine_api_key, engine_connect_timeout_ms,
// engine_timeout_ms, engine_retries. Returns true when `key` is one of them (st set on a bad value).
bool engines_option(wsync_group_t* g, const std::string& key, const std::string& value, wsync_status_t* st);

// HEALTH on every listed server; the healthy ones, in order, get cumulative rank offsets from 1,
// and g->num_receivers becomes the sum of their GPUs. Fails when none is healthy.
wsync_status_t engines_health(wsync_group_t* g, uint32_t configured_receivers);

// Requests of one step for every server, sent concurrently in the background.
class EngineCalls {
 public:
  EngineCalls() = default;
  ~EngineCalls();
  EngineCalls(const EngineCalls&) = delete;
  EngineCalls& operator=(const EngineCalls&) = delete;
  // Build (on this thread: the adapter is not thread-safe) and start sending.
  // `failed`, when given, is set as soon as one server's request fails.
  wsync_status_t start(wsync_group_t* g, int step, const PlanBucket* bucket, const std::vector<wsync_tensor_t>* tensors,
                       uint64_t version, std::atomic<bool>* failed = nullptr);
  // Wait for every server's replies; the first failure, naming the server and carrying its words.
  wsync_status_t finish();
  // Stop waiting (abandon replies; used when the data plane failed) and join.
  void cancel();
  bool running() const { return !threads_.empty(); }

 private:
  struct Result;
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<Result>> results_;
  std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(false);
  const std::atomic<bool>* group_aborted_ = nullptr;  // wsync_group_abort stops the requests too
};

// start + finish.
wsync_status_t engines_step(wsync_group_t* g, int step, uint64_t version = 0);

}  // namespace wsync
