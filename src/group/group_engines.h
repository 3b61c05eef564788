// HTTP engines: a group whose adapter declares WSYNC_ADAPTER_CAP_HTTP drives engine servers over
// their own HTTP protocol. The adapter builds each step's requests (data only); the core sends
// them with its HTTP client (src/http), to every server concurrently, and judges replies.
//
//   init:      HEALTH (filter) -> rank offsets, world size -> PROBE (what each server is; the
//              adapter reads the replies) -> RESET (best effort: what a dead trainer left) ->
//              INIT, posted while receivers join
//   update:    CHECK of a declared update (1.7), PAUSE, BEGIN_UPDATE once; per bucket UPDATE, posted before the bucket moves and
//              collected after its ACKs (engines reply only once the bytes arrived)
//   finalize:  FINALIZE before the commit, RESUME after it
//   failure:   ABANDON (best effort), what each server holds (adapter `held`, 1.7), then RESUME
//              where engine_resume_on_failure says (auto: where the server holds one version)
//   destroy:   (ABANDON when an update is open), DESTROY, best effort
// PROBE, RESET and ABANDON are plugin ABI 1.3: only for an adapter that has take_reply; CHECK is
// 1.7: only for one that has held.
// membership=elastic: every step goes to the live servers only; dropping a server and bringing it
// back are in engine_members.h.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/heap.h"
#include "common/options.h"
#include "group/group.h"
#include "planner/bucket_planner.h"

namespace wsync {


// HEALTH on every listed server; the healthy ones, in order, get cumulative rank offsets from 1,
// and *receivers becomes the sum of their GPUs (elastic: every listed server keeps its ranks, and
// *init_receivers is the healthy ones' GPUs). Fails when none is healthy.
wsync_status_t engines_health(wsync_group_t* g, uint32_t configured_receivers, uint32_t* receivers,
                              uint32_t* init_receivers);
// PROBE (the adapter judges each server: release, GPU count), then RESET (best effort). Nothing
// for an adapter older than plugin ABI 1.3.
wsync_status_t engines_probe_and_reset(wsync_group_t* g);
// After a failure, an abort or a destroy in the middle of an update: ABANDON on every server,
// then RESUME if the group resumes on failure; best effort, bounded time. Nothing when no update
// is open. Pipeline thread (or teardown after it stopped).
void engines_abandon(wsync_group_t* g);
// An elastic update committed on some receivers but failed (too few confirmed): the engines ran
// its FINALIZE, so their generation resumes as after a commit (a server that fails it is dropped).
void engines_resume_committed(wsync_group_t* g);
// The declared update (wsync_group_declare_update), when there is one: CHECK on every live server
// before the update opens (plugin ABI 1.7 adapters); a refusal fails with the server's words.
wsync_status_t engines_check_declared(wsync_group_t* g, Flight* flight);
// HTTP engines: pause generation (if the adapter asks) and open the engine-side update, once per
// update (the first bucket, or the finalize of an update that sent none).
wsync_status_t open_update(wsync_group_t* g, Flight* flight = nullptr);
// The update committed: the engines' generation resumes (nothing when no engine update is open).
wsync_status_t engines_update_committed(wsync_group_t* g);
// Init: INIT goes to every live server (from here on a destroy leaves the engines' group).
wsync_status_t engines_start_init(wsync_group_t* g, EngineCalls* calls);
// Init: the INIT went to every live server (a destroy tears their side down).
void engines_inits_sent(wsync_group_t* g);
// The server table, as init and engine_members.cpp change it: server i takes part in updates (or
// is dropped); an INIT was sent to it; a transport property the adapter asked for.
void engines_set_live(wsync_group_t* g, size_t i, bool live);
void engines_mark_inited(wsync_group_t* g, size_t i);
void engines_add_property(wsync_group_t* g, const std::string& key, const std::string& value);
// What a failure message adds about the engines once engines_abandon ran ("" if nothing).
std::string engines_failure_note(const wsync_group_t* g, bool was_open);

// "health check", "group init", ... for messages.
const char* step_name(int step);
// The adapter knows plugin ABI 1.3's steps (it has take_reply).
bool adapter_knows_engine_13(const wsync_group_t* g);
// The adapter has `held` (plugin ABI 1.7): it knows the CHECK step and says what a server holds.
bool adapter_knows_engine_17(const wsync_group_t* g);

// The wsync_engine_step_t of one step at one server, with the storage it points into.
class StepView {
 public:
  StepView(wsync_group_t* g, size_t server, int step, const PlanBucket* bucket,
           const std::vector<wsync_tensor_t>* tensors, uint64_t version);
  StepView(const StepView&) = delete;
  StepView& operator=(const StepView&) = delete;
  wsync_engine_step_t es = WSYNC_ENGINE_STEP_INIT;

 private:
  std::string host_;
  std::vector<wsync_option_t> props_;
  std::vector<const char*> names_;
  std::vector<int32_t> dtypes_, ndims_;
  std::vector<int64_t> shapes_;
};

// A request copied out of the adapter (its strings live only until its next build_requests).
struct OwnedRequest {
  wsync_http_request_t req = WSYNC_HTTP_REQUEST_INIT;
  std::string path, body;
  bool has_body = false;
  wsync_http_request_t view() const {
    wsync_http_request_t r = req;
    r.path = path.c_str();
    r.body = has_body ? body.c_str() : nullptr;
    return r;
  }
};

// The adapter's requests for step `v`, checked and copied.
wsync_status_t build_requests(wsync_group_t* g, const StepView& v, std::vector<OwnedRequest>* out);

// How a step is sent: best effort (every request sent, failures only logged, not stopped by the
// group's abort flag), with other HTTP settings than the group's, to which servers.
struct CallMode {
  bool best_effort = false;
  const HttpOptions* http = nullptr;
  // Only these servers (by index; read in start()). Default: every live one (elastic groups drop
  // servers; a fixed group's are all live).
  const std::vector<size_t>* only = nullptr;
  // Elastic: a server whose request fails is dropped instead of failing the step; its receivers
  // are removed, from these buckets' waits too.
  Flight* flight = nullptr;
  // What the step is for, in its messages after the step's name ("bucket update of <about>"): a
  // bucket's request names the bucket, so that a server that does not answer says which one.
  const char* about = nullptr;
};

// Requests of one step for every server, sent concurrently in the background.
class EngineCalls {
 public:
  struct AdapterReply {
    uint32_t request_index;
    int32_t http_status;
    PagesString body;
  };
  struct Result {
    uint32_t server_index = 0;
    wsync_status_t status = WSYNC_OK;
    std::string why;
    std::vector<AdapterReply> replies;  // of WSYNC_REPLY_TO_ADAPTER requests
    std::atomic<bool> done{false};
    std::atomic<bool> stop{false};  // give up this server's requests (cancel, or it was dropped)
  };

  EngineCalls() = default;
  ~EngineCalls();
  EngineCalls(const EngineCalls&) = delete;
  EngineCalls& operator=(const EngineCalls&) = delete;
  // Build (on this thread: the adapter is not thread-safe) and start sending. `failed`, when
  // given, is set as soon as one server's request fails. `bucket` and `tensors` must outlive
  // finish().
  wsync_status_t start(wsync_group_t* g, int step, const PlanBucket* bucket, const std::vector<wsync_tensor_t>* tensors,
                       uint64_t version, std::atomic<bool>* failed = nullptr, const CallMode& mode = CallMode());
  // Wait for every server's replies; the first failure, naming the server and carrying its words.
  // Then the replies the adapter reads go to its take_reply, server after server. Elastic groups
  // stop waiting for a server dropped meanwhile, and drop a server that failed (see engine_members.h):
  // WSYNC_OK then, unless no receiver is left. `flight`: the buckets whose waits drop its receivers.
  wsync_status_t finish(Flight* flight = nullptr);
  // Every server answered (or failed): finish() returns at once.
  bool done() const;
  // Stop waiting (abandon replies; used when the data plane failed) and join.
  void cancel();
  bool running() const { return !threads_.empty(); }
  size_t sent() const { return sent_; }  // requests the adapter built for the last start

 private:
  wsync_status_t hand_replies(const std::vector<std::shared_ptr<Result>>& results);

  wsync_group_t* g_ = nullptr;
  int step_ = 0;
  const PlanBucket* bucket_ = nullptr;
  const std::vector<wsync_tensor_t>* tensors_ = nullptr;
  uint64_t version_ = 0;
  size_t sent_ = 0;
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<Result>> results_;
  const std::atomic<bool>* group_aborted_ = nullptr;  // wsync_group_abort stops the requests too
  bool drop_failed_ = false;                          // elastic, not best effort: failures drop servers
};

// start + finish; *sent (if given) gets how many requests the adapter built.
wsync_status_t engines_step(wsync_group_t* g, int step, uint64_t version = 0, const CallMode& mode = CallMode(),
                            size_t* sent = nullptr);

}  // namespace wsync
