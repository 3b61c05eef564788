// receiver_side.cpp — the embedded wsync receivers: joining a group from an init route, the
// per-rank receive loops that fill the engine's model, and the wait that update routes block on
// (see receiver_side.h).
#include "receiver_side.h"

#include <xxhash.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "json_util.h"

namespace refeng {
namespace {

std::string store_address(const std::string& host, int64_t port) {
  bool v6 = host.find(':') != std::string::npos && !(host.size() > 1 && host.front() == '[');
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string describe(int32_t dtype, const std::vector<int64_t>& shape) {
  std::string s = wsync_dtype_name(dtype);
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string status_text(const char* what, wsync_status_t st, const char* detail) {
  std::string s = std::string(what) + " failed: " + wsync_status_name(st);
  if (detail && *detail) s += std::string(": ") + detail;
  return s;
}

}  // namespace

Engine::Engine(int gpus, int64_t timeout_ms) : gpus_(gpus), timeout_ms_(timeout_ms), workers_(gpus) {}

Engine::~Engine() { shutdown(); }

Outcome Engine::init_group(const JoinRequest& req) {
  if (req.group_name.empty()) return {false, "Group name cannot be empty"};
  if (req.rank_offset < 1 || req.rank_offset + gpus_ > req.world_size)
    return {false, "ranks " + std::to_string(req.rank_offset) + ".." + std::to_string(req.rank_offset + gpus_ - 1) +
                       " of this engine (rank_offset " + std::to_string(req.rank_offset) + ", " + std::to_string(gpus_) +
                       " GPU(s)) do not fit in world_size " + std::to_string(req.world_size) +
                       " (rank 0 is the trainer)"};
  std::vector<std::unique_ptr<Group>> stale;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutting_down_) return {false, "the engine is shutting down"};
    if (joining_.count(req.group_name)) return {false, "group '" + req.group_name + "' is being initialized already"};
    auto it = groups_.find(req.group_name);
    if (it != groups_.end()) {
      for (auto& m : it->second->members)
        if (m->running) return {false, "group '" + req.group_name + "' already exists"};
      stale.push_back(std::move(it->second));  // its receivers all ended: replace it
      groups_.erase(it);
    }
    joining_.insert(req.group_name);
  }
  stop_and_join(stale);

  const std::string store = store_address(req.master_address, req.master_port);
  std::vector<wsync_receiver_t*> rx(gpus_, nullptr);
  std::vector<wsync_status_t> st(gpus_, WSYNC_OK);
  std::vector<std::string> err(gpus_);
  std::vector<std::thread> joiners;
  for (int i = 0; i < gpus_; ++i) {
    joiners.emplace_back([&, i] {  // all local ranks join at once: the sender waits for all of them
      wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
      cfg.rank = static_cast<uint32_t>(req.rank_offset + i);
      cfg.store_addr = store.c_str();
      cfg.group_name = req.group_name.c_str();
      cfg.timeout_ms = timeout_ms_;  // transport: the one the sender announces
      st[i] = wsync_receiver_init(&cfg, &rx[i]);
      if (st[i] != WSYNC_OK) err[i] = wsync_last_error();
    });
  }
  for (auto& t : joiners) t.join();

  std::string failure;
  for (int i = 0; i < gpus_; ++i)
    if (st[i] != WSYNC_OK) {
      if (!failure.empty()) failure += "; ";
      failure += "rank " + std::to_string(req.rank_offset + i) + ": " +
                 status_text("wsync_receiver_init", st[i], err[i].c_str());
    }
  std::unique_lock<std::mutex> lk(mu_);
  joining_.erase(req.group_name);
  if (failure.empty() && shutting_down_) failure = "the engine is shutting down";
  if (!failure.empty()) {
    lk.unlock();
    for (auto* r : rx) wsync_receiver_destroy(r);
    std::fprintf(stderr, "wsync-reference-engine: joining group '%s' at %s failed: %s\n", req.group_name.c_str(),
                 store.c_str(), failure.c_str());
    return {false, failure};
  }
  auto g = std::make_unique<Group>();
  g->name = req.group_name;
  g->store = store;
  for (int i = 0; i < gpus_; ++i) {
    auto m = std::make_unique<Member>();
    m->local = i;
    m->rank = static_cast<uint32_t>(req.rank_offset + i);
    m->rx = rx[i];
    workers_[i].rank = m->rank;
    g->members.push_back(std::move(m));
  }
  for (auto& m : g->members) m->loop = std::thread(&Engine::run_loop, this, m.get());
  groups_[req.group_name] = std::move(g);
  std::fprintf(stderr, "wsync-reference-engine: joined group '%s' at %s as rank(s) %" PRId64 "..%" PRId64 "\n",
               req.group_name.c_str(), store.c_str(), req.rank_offset, req.rank_offset + gpus_ - 1);
  return {true, ""};
}

void Engine::run_loop(Member* m) {
  std::string reason;
  while (!m->stop.load()) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    wsync_status_t st = wsync_receiver_next(m->rx, &ev, 200);
    if (st == WSYNC_ERR_TIMEOUT) continue;
    if (st != WSYNC_OK) { reason = status_text("wsync_receiver_next", st, wsync_last_error()); break; }
    if (ev.kind == WSYNC_EVENT_BUCKET) {
      // Copy the views out (they die at the next call), hash them, then publish under the lock.
      std::vector<std::pair<std::string, Tensor>> got;
      got.reserve(ev.num_tensors);
      for (uint64_t i = 0; i < ev.num_tensors && reason.empty(); ++i) {
        const wsync_tensor_t& t = ev.tensors[i];
        if (t.device_type == WSYNC_DEVICE_CUDA) {
          reason = std::string("tensor '") + t.name +
                   "' arrived in CUDA memory; the reference engine handles host memory only (use the ucx transport)";
          break;
        }
        Tensor x;
        x.dtype = t.dtype;
        x.shape.assign(t.shape, t.shape + (t.ndim > 0 ? t.ndim : 0));
        if (t.nbytes) x.bytes.assign(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.nbytes);
        x.xxh3 = XXH3_64bits(x.bytes.data(), x.bytes.size());
        x.fresh = true;
        got.emplace_back(t.name, std::move(x));
      }
      if (!reason.empty()) break;
      std::lock_guard<std::mutex> lk(mu_);
      auto& model = workers_[m->local].tensors;
      for (auto& kv : got) model[kv.first] = std::move(kv.second);
      ++m->buckets;
      cv_.notify_all();
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      // Apply first, then confirm: once the trainer's finalize returns, the engine already shows
      // the new version.
      {
        std::lock_guard<std::mutex> lk(mu_);
        workers_[m->local].committed_version = ev.version;
        ++m->commits;
        // The update is over: its arrivals can no longer satisfy a later update request (the
        // trainer collects the update requests' replies before it finalizes).
        for (auto& kv : workers_[m->local].tensors) kv.second.fresh = false;
      }
      st = wsync_receiver_commit(m->rx, ev.version);
      if (st != WSYNC_OK) { reason = status_text("wsync_receiver_commit", st, wsync_last_error()); break; }
    } else if (ev.kind == WSYNC_EVENT_ABORTED) {
      reason = "the sender aborted the update";
      std::lock_guard<std::mutex> lk(mu_);
      for (auto& kv : workers_[m->local].tensors) kv.second.fresh = false;  // the aborted update's data
      break;
    } else if (ev.kind == WSYNC_EVENT_CLOSED) {
      reason = "the sender closed the group";
      break;
    }
  }
  if (reason.empty()) reason = "the group was destroyed";
  wsync_receiver_destroy(m->rx);
  m->rx = nullptr;
  std::fprintf(stderr, "wsync-reference-engine: rank %u stopped receiving: %s\n", m->rank, reason.c_str());
  std::lock_guard<std::mutex> lk(mu_);
  m->running = false;
  m->end_reason = reason;
  cv_.notify_all();
}

void Engine::stop_and_join(std::vector<std::unique_ptr<Group>>& groups) {
  for (auto& g : groups)
    for (auto& m : g->members) m->stop = true;
  for (auto& g : groups)
    for (auto& m : g->members)
      if (m->loop.joinable()) m->loop.join();
  groups.clear();
}

Outcome Engine::destroy_group(const std::string& name) {
  std::vector<std::unique_ptr<Group>> gone;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = groups_.find(name);
    if (it == groups_.end()) return {false, "The group to be destroyed does not exist."};
    gone.push_back(std::move(it->second));
    groups_.erase(it);
    cv_.notify_all();
  }
  stop_and_join(gone);
  return {true, ""};
}

bool Engine::has_group(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  return groups_.count(name) != 0;
}

std::vector<std::string> Engine::group_names() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> out;
  for (auto& kv : groups_) out.push_back(kv.first);
  return out;
}

Outcome Engine::wait_for_tensors(const std::string& group, const std::vector<TensorSpec>& wants, int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (shutting_down_) return {false, "the engine is shutting down"};
    auto git = groups_.find(group);
    if (git == groups_.end()) return {false, "group '" + group + "' was destroyed while waiting for its tensors"};
    const Group& g = *git->second;
    std::string waiting_for;
    for (const TensorSpec& w : wants) {
      for (const auto& m : g.members) {
        auto& model = workers_[m->local].tensors;
        auto it = model.find(w.name);
        if (it != model.end() && it->second.fresh) {
          if (it->second.dtype != w.dtype || it->second.shape != w.shape)
            return {false, "tensor '" + w.name + "' arrived on rank " + std::to_string(m->rank) + " as " +
                               describe(it->second.dtype, it->second.shape) + ", but the request says " +
                               describe(w.dtype, w.shape)};
          continue;
        }
        if (!m->running)
          return {false, "rank " + std::to_string(m->rank) + " stopped receiving before tensor '" + w.name +
                             "' arrived: " + m->end_reason};
        if (waiting_for.empty()) waiting_for = "tensor '" + w.name + "' on rank " + std::to_string(m->rank);
      }
    }
    if (waiting_for.empty()) {  // everything is in: claim these arrivals
      for (const TensorSpec& w : wants)
        for (const auto& m : g.members) workers_[m->local].tensors[w.name].fresh = false;
      return {true, ""};
    }
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && std::chrono::steady_clock::now() >= deadline)
      return {false, "timed out after " + std::to_string(timeout_ms) + " ms waiting for " + waiting_for +
                         " to arrive through wsync"};
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

void Engine::shutdown() {
  std::vector<std::unique_ptr<Group>> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    shutting_down_ = true;
    for (auto& kv : groups_) all.push_back(std::move(kv.second));
    groups_.clear();
    cv_.notify_all();
  }
  stop_and_join(all);
}

}  // namespace refeng
