// state.h — the engine-level state the routes share: what a real server keeps between requests
// (pause flag, update session, weight version, ...), and the lock that stands for the engine's
// single control loop.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "options.h"
#include "receiver_side.h"
#include "tensors.h"

namespace refeng {

struct Shared {
  Shared(const Options& o, Engine& e)
      : opt(o), fam(o.family), engine(e), fail_updates_left(o.fail_update_count), fail_on(o.fail_update),
        fail_message(o.fail_update_message) {}
  const Options& opt;
  const Family& fam;
  Engine& engine;

  // The engine's one control loop: SGLang's scheduler, vLLM's EngineCore busy loop, LMDeploy's
  // weights-update asyncio.Lock. Requests that go through it wait for the one in progress (an
  // update waiting for its data holds it), as on the real servers.
  std::mutex core;

  std::mutex mu;               // guards everything below
  std::condition_variable cv;  // paused generation waits here for a resume
  std::string weight_version = "default";  // SGLang ServerArgs / vLLM EngineCore default
  bool paused = false;
  std::string pause_mode;      // "" while not paused
  int writer_held = 0;         // SGLang: updates holding the writer lock (generation waits)
  bool session_open = false;   // SGLang 0.5.21+ weight-update session
  std::string session_selector;
  bool update_active = false;  // vLLM _weight_update_active
  uint64_t loaded_in_update = 0;  // vLLM, backend wsync: /update_weights answered since the start
  std::string held = "the weights it started with";  // vLLM, backend wsync: the engine's words
  uint64_t unmatched_finishes = 0;  // vLLM: /finish_weight_update refused (no update active): the
                                    // real server logs an ERROR traceback for each
  bool dead = false;           // vLLM: the engine core died (generation on meta tensors)
  bool stopping = false;       // SIGTERM: waiting requests give up
  bool sleeping = false;       // LMDeploy
  std::set<std::string> sleeping_tags;
  int flush_calls = 0;         // --flush-busy counts these
  bool flush_in_progress = false;
  uint64_t aborted_requests = 0;  // abort-all operations performed (see README)
  std::string last_abort;         // which request did the last one
  uint64_t finalized = 0;         // LMDeploy finished=true updates
  bool loaded_unfinished = false; // LMDeploy: buckets loaded since the last finished=true (the
                                  // post-load step and the CUDA-graph reset have not run on them)
  uint64_t completions = 0;       // vLLM /v1/completions answered
  // vLLM 0.33: the previous update_info's tensors per local rank (empty lists reuse them).
  std::vector<std::vector<TensorSpec>> last_update;
  bool packed = false;            // vLLM init_info.packed (recorded only: wsync carries the bytes)

  int fail_updates_left;          // --fail-updates: refusals still to give (-1: unlimited)
  bool fail_on;                   // --fail-update, or armed by POST /debug/fail_updates
  std::string fail_message;

  // Whether this update request is to fail with failure_message() (counts --fail-updates).
  bool take_failure() {
    std::lock_guard<std::mutex> lk(mu);
    if (!fail_on) return false;
    if (fail_updates_left < 0) return true;
    if (fail_updates_left == 0) return false;
    --fail_updates_left;
    return true;
  }

  std::string failure_message() {
    std::lock_guard<std::mutex> lk(mu);
    return fail_message;
  }

  // Records an abort-all (SGLang abort_all_requests, pause mode abort, ...). Locks mu.
  void note_abort(const std::string& by) {
    std::lock_guard<std::mutex> lk(mu);
    ++aborted_requests;
    last_abort = by;
  }
};

}  // namespace refeng
