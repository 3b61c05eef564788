// receiver_side.h — the engine's embedded wsync receivers and its "model".
//
// The engine has --gpus local ranks ("workers"). Each worker owns a model: a map name ->
// {dtype, shape, bytes} that persists across groups. init_group() joins a wsync group with one
// receiver per worker (rank = rank_offset + i, concurrently, blocking until all joined); each
// receiver then runs one loop thread that copies every arriving tensor into its worker's model,
// commits on COMMIT, ends the update on ABORTED, and stops on CLOSED/error (destroying its receiver). A group stays
// registered after its receivers stopped (a real engine keeps the name of a process group whose
// peer died) until destroy_group() or replace_group().
//
// Update routes call wait_for_tensors(): it blocks until every tensor named for a worker has a
// *fresh* arrival on that worker (arrived and not yet claimed by an earlier update request),
// checks its dtype and shape, and claims those arrivals. So an update request may come before or
// after its data, and the reply is sent only once the data is in, like the real engines (which
// reply after their broadcast). A COMMIT (or ABORTED) ends an update: arrivals not claimed by
// then stop counting, so data sent without update requests never satisfies a later one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "json_util.h"
#include "tensors.h"
#include "wsync.h"

namespace refeng {

struct RankResult {
  bool ok = true;
  std::string message;  // why this rank failed ("" when ok)
};

struct Outcome {
  bool ok = true;
  std::string message;            // the first failure ("" on success)
  std::vector<RankResult> ranks;  // per local rank, when the operation ran on the workers
};

struct JoinRequest {
  std::string master_address;
  int64_t master_port = 0;
  int64_t rank_offset = 0;
  int64_t world_size = 0;
  std::string group_name;
};

class Engine {
 public:
  // register_model: each receiver registers the tensors its worker's model holds (before its first
  // event, and those new after each commit), so that they are written in place and can serve a
  // peer's catch-up (--register-model).
  Engine(int gpus, int64_t timeout_ms, bool register_model = false);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int gpus() const { return gpus_; }

  // Joins group `req.group_name` with every local rank; blocks until all joined or failed.
  // Fails when the name is registered already (the caller answers in its engine's words first).
  Outcome init_group(const JoinRequest& req);
  // Joins a new group under `req.group_name`; only once it joined, the old group of that name
  // (if any) is destroyed and replaced. A failed join leaves the old one in place (vLLM).
  Outcome replace_group(const JoinRequest& req);
  // Stops the group's receivers and forgets the name. Fails when no such group is registered.
  Outcome destroy_group(const std::string& name);
  bool has_group(const std::string& name);
  std::vector<std::string> group_names();

  // Blocks until each local rank r has every tensor of wants[r] (see the file comment). Fails
  // fast on a rank whose receiver stopped before its data came. wants.size() == gpus().
  Outcome wait_for_tensors(const std::string& group, const std::vector<std::vector<TensorSpec>>& wants,
                           int64_t timeout_ms);

  // Destroys local rank `local`'s receivers at once (all groups), as if its worker process died:
  // the connection to the trainer closes. Returns how many receivers it stopped.
  int kill_receiver(int local);

  // {"ranks":[{"rank","local_rank","committed_version","groups":[..],"tensors":{name:{dtype,shape,xxh3}}}]}
  std::string debug_tensors_json();
  // [{"group","local_rank","rank","running","end_reason","buckets","commits"}]
  JsonPtr receivers_json();
  int receivers_running();

  // Wakes every waiter (they fail), stops and destroys every receiver; later inits fail.
  // Idempotent; safe while requests run.
  void shutdown();

 private:
  struct Tensor {
    int32_t dtype = 0;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
    uint64_t xxh3 = 0;
    bool fresh = false;  // arrived and not yet claimed by an update request
  };
  struct Worker {
    uint32_t rank = 0;               // global rank in the last group joined
    uint64_t committed_version = 0;  // last version committed by any of its receivers
    std::map<std::string, Tensor> tensors;
    // --register-model: tensors some receiver of this worker registered; their storage is never
    // replaced (a bucket from another group is copied into it), so no registration dangles.
    std::set<std::string> pinned;
  };
  struct Member {  // one worker's receiver in one group
    int local = 0;
    uint32_t rank = 0;
    wsync_receiver_t* rx = nullptr;  // owned by the loop thread once it runs
    std::thread loop;
    std::atomic<bool> stop{false};
    bool running = true;             // guarded by mu_
    std::string stop_reason;         // why stop was set (guarded by mu_)
    std::string end_reason;          // guarded by mu_
    uint64_t buckets = 0, commits = 0;
    std::set<std::string> registered;  // (loop thread) model tensors its receiver writes in place
  };
  struct Group {
    std::string name, store;
    std::vector<std::unique_ptr<Member>> members;
  };
  enum class RankState { kPending, kDone, kFailed };

  Outcome join(const JoinRequest& req, std::unique_ptr<Group>* out);
  void start_loops(Group* g);
  void run_loop(Member* m);
  bool copy_bucket(Member* m, const wsync_receiver_event_t& ev, std::string* reason);
  void register_held(Member* m);
  void rehash_registered(Member* m);
  void end_update(std::unique_lock<std::mutex>& lk, int local);
  RankState rank_state(const Member& m, const std::vector<TensorSpec>& wants, std::string* why);
  static void stop_and_join(std::vector<std::unique_ptr<Group>>& groups);

  const int gpus_;
  const int64_t timeout_ms_;
  const bool register_model_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool shutting_down_ = false;
  std::vector<Worker> workers_;
  std::map<std::string, std::unique_ptr<Group>> groups_;
  std::set<std::string> joining_;
  // An update request waiting for data sees every arrival before the COMMIT (or ABORTED) that
  // ends its update clears it: arrivals are numbered, each waiter records the last number it
  // looked at, and end_update() waits (briefly) until every waiter saw the latest.
  uint64_t arrival_seq_ = 0;
  uint64_t next_waiter_ = 0;
  std::map<uint64_t, uint64_t> waiter_seen_;
};

}  // namespace refeng
