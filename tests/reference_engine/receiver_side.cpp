// receiver_side.cpp — the embedded wsync receivers: joining a group from an init route, the
// per-rank receive loops that fill the engine's model, destroying, replacing and killing them
// (see receiver_side.h; the wait of update routes is in receiver_wait.cpp).
#include <xxhash.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "receiver_side.h"

namespace refeng {
namespace {

std::string store_address(const std::string& host, int64_t port) {
  bool v6 = host.find(':') != std::string::npos && !(host.size() > 1 && host.front() == '[');
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string status_text(const char* what, wsync_status_t st, const char* detail) {
  std::string s = std::string(what) + " failed: " + wsync_status_name(st);
  if (detail && *detail) s += std::string(": ") + detail;
  return s;
}

}  // namespace

Engine::Engine(int gpus, int64_t timeout_ms, bool register_model)
    : gpus_(gpus), timeout_ms_(timeout_ms), register_model_(register_model), workers_(gpus) {}

Engine::~Engine() { shutdown(); }

// Joins `req` with every local rank at once (the sender waits for all of them). On success
// *out holds the new group, its loops not started yet.
Outcome Engine::join(const JoinRequest& req, std::unique_ptr<Group>* out) {
  Outcome o;
  o.ranks.assign(gpus_, RankResult{});
  if (req.rank_offset < 1 || req.rank_offset + gpus_ > req.world_size) {
    std::string why = "ranks " + std::to_string(req.rank_offset) + ".." + std::to_string(req.rank_offset + gpus_ - 1) +
                      " of this engine (rank_offset " + std::to_string(req.rank_offset) + ", " + std::to_string(gpus_) +
                      " GPU(s)) do not fit in world_size " + std::to_string(req.world_size) + " (rank 0 is the trainer)";
    for (auto& r : o.ranks) r = {false, why};
    o.ok = false;
    o.message = why;
    return o;
  }
  const std::string store = store_address(req.master_address, req.master_port);
  std::vector<wsync_receiver_t*> rx(gpus_, nullptr);
  std::vector<std::thread> joiners;
  for (int i = 0; i < gpus_; ++i) {
    joiners.emplace_back([&, i] {
      wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
      cfg.rank = static_cast<uint32_t>(req.rank_offset + i);
      cfg.store_addr = store.c_str();
      cfg.group_name = req.group_name.c_str();
      cfg.timeout_ms = timeout_ms_;  // transport: the one the sender announces
      wsync_status_t st = wsync_receiver_init(&cfg, &rx[i]);
      if (st != WSYNC_OK) o.ranks[i] = {false, status_text("wsync_receiver_init", st, wsync_last_error())};
    });
  }
  for (auto& t : joiners) t.join();
  for (const auto& r : o.ranks)
    if (!r.ok && o.ok) { o.ok = false; o.message = r.message; }
  if (o.ok) {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutting_down_) { o.ok = false; o.message = "the engine is shutting down"; }
  }
  if (!o.ok) {
    for (auto* r : rx) wsync_receiver_destroy(r);
    std::fprintf(stderr, "wsync-reference-engine: joining group '%s' at %s failed: %s\n", req.group_name.c_str(),
                 store.c_str(), o.message.c_str());
    return o;
  }
  auto g = std::make_unique<Group>();
  g->name = req.group_name;
  g->store = store;
  for (int i = 0; i < gpus_; ++i) {
    auto m = std::make_unique<Member>();
    m->local = i;
    m->rank = static_cast<uint32_t>(req.rank_offset + i);
    m->rx = rx[i];
    g->members.push_back(std::move(m));
  }
  std::fprintf(stderr, "wsync-reference-engine: joined group '%s' at %s as rank(s) %" PRId64 "..%" PRId64 "\n",
               req.group_name.c_str(), store.c_str(), req.rank_offset, req.rank_offset + gpus_ - 1);
  *out = std::move(g);
  return o;
}

void Engine::start_loops(Group* g) {  // under mu_
  for (auto& m : g->members) {
    workers_[m->local].rank = m->rank;
    m->loop = std::thread(&Engine::run_loop, this, m.get());
  }
}

Outcome Engine::init_group(const JoinRequest& req) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutting_down_) return {false, "the engine is shutting down", {}};
    if (groups_.count(req.group_name) || joining_.count(req.group_name))
      return {false, "group '" + req.group_name + "' exists already", {}};
    joining_.insert(req.group_name);
  }
  std::unique_ptr<Group> g;
  Outcome o = join(req, &g);
  std::lock_guard<std::mutex> lk(mu_);
  joining_.erase(req.group_name);
  if (!o.ok) return o;
  start_loops(g.get());
  groups_[req.group_name] = std::move(g);
  return o;
}

Outcome Engine::replace_group(const JoinRequest& req) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutting_down_) return {false, "the engine is shutting down", {}};
  }
  std::unique_ptr<Group> g;
  Outcome o = join(req, &g);
  if (!o.ok) return o;
  std::vector<std::unique_ptr<Group>> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = groups_.find(req.group_name);
    if (it != groups_.end()) old.push_back(std::move(it->second));
    start_loops(g.get());
    groups_[req.group_name] = std::move(g);
    cv_.notify_all();
  }
  stop_and_join(old);  // the old trainer connection closes
  return o;
}

void Engine::run_loop(Member* m) {
  std::string reason;
  register_held(m);  // (before the first event: a catch-up places what is registered)
  while (!m->stop.load()) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    wsync_status_t st = wsync_receiver_next(m->rx, &ev, 200);
    if (st == WSYNC_ERR_TIMEOUT) continue;
    if (st != WSYNC_OK) { reason = status_text("wsync_receiver_next", st, wsync_last_error()); break; }
    if (ev.kind == WSYNC_EVENT_BUCKET) {
      if (!copy_bucket(m, ev, &reason)) break;
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      // Apply first, then confirm: once the trainer's finalize returns, the engine already shows
      // the new version. The update is over: its arrivals no longer satisfy a later request.
      rehash_registered(m);  // (written in place, maybe by a catch-up: no BUCKET said so)
      {
        std::unique_lock<std::mutex> lk(mu_);
        workers_[m->local].committed_version = ev.version;
        ++m->commits;
        end_update(lk, m->local);
      }
      st = wsync_receiver_commit(m->rx, ev.version);
      if (st != WSYNC_OK) { reason = status_text("wsync_receiver_commit", st, wsync_last_error()); break; }
      register_held(m);
    } else if (ev.kind == WSYNC_EVENT_ABORTED) {
      // The update ends; the receiver stays in the group (an elastic group takes the next update;
      // a broken fixed group closes, which ends this loop).
      std::unique_lock<std::mutex> lk(mu_);
      end_update(lk, m->local);  // the aborted update's data
    } else if (ev.kind == WSYNC_EVENT_CLOSED) {
      reason = "the sender closed the group";
      break;
    }
  }
  wsync_receiver_destroy(m->rx);  // closes the connection to the trainer
  m->rx = nullptr;
  std::lock_guard<std::mutex> lk(mu_);
  if (reason.empty()) reason = m->stop_reason.empty() ? "the group was destroyed" : m->stop_reason;
  std::fprintf(stderr, "wsync-reference-engine: rank %u stopped receiving: %s\n", m->rank, reason.c_str());
  m->running = false;
  m->end_reason = reason;
  cv_.notify_all();
}

// --register-model: the model tensors this receiver has not registered yet, registered (their
// bytes then stay where they are: copy_bucket never replaces a registered tensor's storage).
void Engine::register_held(Member* m) {
  if (!register_model_) return;
  std::vector<wsync_tensor_t> ts;
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& kv : workers_[m->local].tensors) {
      const Tensor& x = kv.second;
      if (m->registered.count(kv.first) || x.bytes.empty() || x.shape.size() > WSYNC_MAX_NDIM) continue;
      workers_[m->local].pinned.insert(kv.first);  // (from here its storage stays put)
      wsync_tensor_t t = WSYNC_TENSOR_INIT;
      t.name = kv.first.c_str();  // (map keys and the bytes stay put while registered)
      t.dtype = x.dtype;
      t.data = const_cast<uint8_t*>(x.bytes.data());
      t.nbytes = x.bytes.size();
      t.ndim = static_cast<int32_t>(x.shape.size());
      for (size_t d = 0; d < x.shape.size(); ++d) t.shape[d] = x.shape[d];
      ts.push_back(t);
      names.push_back(kv.first);
    }
  }
  if (ts.empty()) return;
  wsync_status_t st = wsync_receiver_register(m->rx, ts.data(), ts.size());
  if (st != WSYNC_OK) {
    std::fprintf(stderr, "wsync-reference-engine: rank %u could not register its model: %s\n", m->rank,
                 wsync_last_error());
    return;
  }
  m->registered.insert(names.begin(), names.end());
}

// The registered tensors' checksums, from their bytes (a catch-up writes them without a BUCKET).
void Engine::rehash_registered(Member* m) {
  if (m->registered.empty()) return;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& kv : workers_[m->local].tensors)
    if (m->registered.count(kv.first)) kv.second.xxh3 = XXH3_64bits(kv.second.bytes.data(), kv.second.bytes.size());
}

// Copies the views out (they die at the next call), hashes them, then publishes under the lock.
bool Engine::copy_bucket(Member* m, const wsync_receiver_event_t& ev, std::string* reason) {
  std::vector<std::pair<std::string, Tensor>> got;
  got.reserve(ev.num_tensors);
  for (uint64_t i = 0; i < ev.num_tensors; ++i) {
    const wsync_tensor_t& t = ev.tensors[i];
    if (t.device_type == WSYNC_DEVICE_CUDA) {
      *reason = std::string("tensor '") + t.name +
                "' arrived in CUDA memory; the reference engine handles host memory only (use the ucx transport)";
      return false;
    }
    Tensor x;
    x.dtype = t.dtype;
    x.shape.assign(t.shape, t.shape + (t.ndim > 0 ? t.ndim : 0));
    if (ev.placed != nullptr && ev.placed[i] == WSYNC_PLACED_IN_PLACE) {  // its registered storage holds it
      x.xxh3 = XXH3_64bits(t.data, t.nbytes);
      x.fresh = true;
      got.emplace_back(t.name, std::move(x));
      continue;
    }
    if (t.nbytes) x.bytes.assign(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.nbytes);
    x.xxh3 = XXH3_64bits(x.bytes.data(), x.bytes.size());
    x.fresh = true;
    got.emplace_back(t.name, std::move(x));
  }
  std::lock_guard<std::mutex> lk(mu_);
  Worker& w = workers_[m->local];
  for (size_t i = 0; i < got.size(); ++i) {
    auto& kv = got[i];
    auto it = w.tensors.find(kv.first);
    if (it == w.tensors.end() || !w.pinned.count(kv.first)) {
      w.tensors[kv.first] = std::move(kv.second);
      continue;
    }
    // A registered tensor: its storage stays (written in place, or copied into here).
    Tensor& have = it->second;
    const bool in_place = ev.placed != nullptr && ev.placed[i] == WSYNC_PLACED_IN_PLACE;
    if (!in_place) {
      if (kv.second.bytes.size() != have.bytes.size()) {
        *reason = "tensor '" + kv.first + "' arrived with " + std::to_string(kv.second.bytes.size()) +
                  " bytes, but its registered storage has " + std::to_string(have.bytes.size());
        return false;
      }
      std::copy(kv.second.bytes.begin(), kv.second.bytes.end(), have.bytes.begin());
    }
    have.dtype = kv.second.dtype;
    have.shape = kv.second.shape;
    have.xxh3 = kv.second.xxh3;
    have.fresh = true;
  }
  ++m->buckets;
  ++arrival_seq_;
  cv_.notify_all();
  return true;
}

// Under mu_: lets every waiting update request look at the arrivals so far (up to 2 s), then
// clears this worker's unclaimed arrivals.
void Engine::end_update(std::unique_lock<std::mutex>& lk, int local) {
  const uint64_t target = arrival_seq_;
  cv_.wait_for(lk, std::chrono::seconds(2), [&] {
    for (const auto& kv : waiter_seen_)
      if (kv.second < target) return false;
    return true;
  });
  for (auto& kv : workers_[local].tensors) kv.second.fresh = false;
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
    if (it == groups_.end()) return {false, "group '" + name + "' does not exist", {}};
    gone.push_back(std::move(it->second));
    groups_.erase(it);
    cv_.notify_all();
  }
  stop_and_join(gone);
  return {};
}

int Engine::kill_receiver(int local) {
  std::vector<const Member*> killed;
  std::unique_lock<std::mutex> lk(mu_);
  for (auto& kv : groups_)
    for (auto& m : kv.second->members)
      if (m->local == local && m->running) {
        m->stop_reason = "local rank " + std::to_string(local) + " was killed (POST /debug/kill_receiver)";
        m->stop = true;
        killed.push_back(m.get());
      }
  // Wait for the loops to destroy their receivers; a member whose group went away is gone too.
  cv_.wait(lk, [&] {
    for (const Member* k : killed)
      for (auto& kv : groups_)
        for (auto& m : kv.second->members)
          if (m.get() == k && m->running) return false;
    return true;
  });
  return static_cast<int>(killed.size());
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
