// receiver_wait.cpp — how an update request meets its data (Engine::wait_for_tensors, see
// receiver_side.h), and the engine's debug views of its model and receivers.
#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "receiver_side.h"

namespace refeng {
namespace {

std::string describe(int32_t dtype, const std::vector<int64_t>& shape) {
  std::string s = wsync_dtype_name(dtype);
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

// Under mu_: is every tensor of `wants` fresh on this member's worker? *why says what is missing
// (kPending) or what went wrong (kFailed).
Engine::RankState Engine::rank_state(const Member& m, const std::vector<TensorSpec>& wants, std::string* why) {
  const auto& model = workers_[m.local].tensors;
  for (const TensorSpec& w : wants) {
    auto it = model.find(w.name);
    if (it != model.end() && it->second.fresh) {
      if (it->second.dtype != w.dtype || it->second.shape != w.shape) {
        *why = "tensor '" + w.name + "' arrived on rank " + std::to_string(m.rank) + " as " +
               describe(it->second.dtype, it->second.shape) + ", but the request says " + describe(w.dtype, w.shape);
        return RankState::kFailed;
      }
      continue;
    }
    if (!m.running) {
      *why = "rank " + std::to_string(m.rank) + " stopped receiving before tensor '" + w.name + "' arrived: " + m.end_reason;
      return RankState::kFailed;
    }
    *why = "tensor '" + w.name + "' on rank " + std::to_string(m.rank);
    return RankState::kPending;
  }
  return RankState::kDone;
}

Outcome Engine::wait_for_tensors(const std::string& group, const std::vector<std::vector<TensorSpec>>& wants,
                                 int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Outcome o;
  o.ranks.assign(gpus_, RankResult{});
  auto fail_all = [&](const std::string& why) {
    for (auto& r : o.ranks) r = {false, why};
    o.ok = false;
    o.message = why;
    return o;
  };
  std::unique_lock<std::mutex> lk(mu_);
  const uint64_t me = next_waiter_++;
  struct Leave {  // this waiter no longer holds back the end of an update
    Engine* e;
    uint64_t id;
    ~Leave() { e->waiter_seen_.erase(id); e->cv_.notify_all(); }
  } leave{this, me};
  for (;;) {
    waiter_seen_[me] = arrival_seq_;  // looked at every arrival so far (below)
    if (shutting_down_) return fail_all("the engine is shutting down");
    auto git = groups_.find(group);
    if (git == groups_.end()) return fail_all("group '" + group + "' was destroyed while waiting for its tensors");
    const Group& g = *git->second;
    std::vector<RankState> state(gpus_, RankState::kDone);
    std::vector<std::string> why(gpus_);
    bool pending = false, failed = false;
    for (const auto& m : g.members) {
      state[m->local] = rank_state(*m, wants[m->local], &why[m->local]);
      pending = pending || state[m->local] == RankState::kPending;
      failed = failed || state[m->local] == RankState::kFailed;
    }
    bool timed_out = pending && std::chrono::steady_clock::now() >= deadline;
    if (!pending || failed || timed_out) {
      std::string first_failure;
      for (int i = 0; i < gpus_; ++i) {
        if (state[i] == RankState::kFailed && first_failure.empty()) first_failure = why[i];
      }
      for (int i = 0; i < gpus_; ++i) {
        if (state[i] == RankState::kDone) {  // claim these arrivals
          for (const TensorSpec& w : wants[i]) workers_[i].tensors[w.name].fresh = false;
          continue;
        }
        std::string msg = state[i] == RankState::kFailed ? why[i]
                          : timed_out ? "timed out after " + std::to_string(timeout_ms) + " ms waiting for " + why[i] +
                                            " to arrive through wsync"
                                      : "the update failed on another rank before " + why[i] + " arrived (" +
                                            first_failure + ")";
        o.ranks[i] = {false, msg};
        if (o.ok) { o.ok = false; o.message = msg; }
      }
      return o;
    }
    cv_.notify_all();  // an end_update may wait for this look
    cv_.wait_until(lk, deadline);
  }
}

std::string Engine::debug_tensors_json() {
  JsonPtr root(cJSON_CreateObject());
  cJSON* ranks = cJSON_AddArrayToObject(root.get(), "ranks");
  std::lock_guard<std::mutex> lk(mu_);
  for (int i = 0; i < gpus_; ++i) {
    const Worker& w = workers_[i];
    cJSON* r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "rank", w.rank);
    cJSON_AddNumberToObject(r, "local_rank", i);
    cJSON_AddNumberToObject(r, "committed_version", static_cast<double>(w.committed_version));
    cJSON* groups = cJSON_AddArrayToObject(r, "groups");
    for (const auto& kv : groups_)
      for (const auto& m : kv.second->members)
        if (m->local == i) {
          cJSON* g = cJSON_CreateObject();
          cJSON_AddStringToObject(g, "name", kv.first.c_str());
          cJSON_AddStringToObject(g, "store", kv.second->store.c_str());
          cJSON_AddNumberToObject(g, "rank", m->rank);
          cJSON_AddBoolToObject(g, "running", m->running);
          if (!m->running) cJSON_AddStringToObject(g, "ended", m->end_reason.c_str());
          cJSON_AddNumberToObject(g, "buckets", static_cast<double>(m->buckets));
          cJSON_AddNumberToObject(g, "commits", static_cast<double>(m->commits));
          cJSON_AddItemToArray(groups, g);
        }
    cJSON* tensors = cJSON_AddObjectToObject(r, "tensors");
    for (const auto& kv : w.tensors) {
      cJSON* t = cJSON_CreateObject();
      cJSON_AddStringToObject(t, "dtype", wsync_dtype_name(kv.second.dtype));
      cJSON* shape = cJSON_AddArrayToObject(t, "shape");
      for (int64_t d : kv.second.shape) cJSON_AddItemToArray(shape, cJSON_CreateNumber(static_cast<double>(d)));
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016" PRIx64, static_cast<uint64_t>(kv.second.xxh3));
      cJSON_AddStringToObject(t, "xxh3", hex);
      cJSON_AddNumberToObject(t, "nbytes", static_cast<double>(kv.second.bytes.size()));
      cJSON_AddItemToObject(tensors, kv.first.c_str(), t);
    }
    cJSON_AddItemToArray(ranks, r);
  }
  return json_print(root.get());
}

JsonPtr Engine::receivers_json() {
  JsonPtr arr(cJSON_CreateArray());
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& kv : groups_)
    for (const auto& m : kv.second->members) {
      cJSON* o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "group", kv.first.c_str());
      cJSON_AddStringToObject(o, "store", kv.second->store.c_str());
      cJSON_AddNumberToObject(o, "local_rank", m->local);
      cJSON_AddNumberToObject(o, "rank", m->rank);
      cJSON_AddBoolToObject(o, "running", m->running);
      if (m->running) cJSON_AddNullToObject(o, "end_reason");
      else cJSON_AddStringToObject(o, "end_reason", m->end_reason.c_str());
      cJSON_AddNumberToObject(o, "buckets", static_cast<double>(m->buckets));
      cJSON_AddNumberToObject(o, "commits", static_cast<double>(m->commits));
      cJSON_AddItemToArray(arr.get(), o);
    }
  return arr;
}

int Engine::receivers_running() {
  std::lock_guard<std::mutex> lk(mu_);
  int n = 0;
  for (const auto& kv : groups_)
    for (const auto& m : kv.second->members) n += m->running ? 1 : 0;
  return n;
}

}  // namespace refeng
