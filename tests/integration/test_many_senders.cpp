// Many senders (ABI 1.5, issue 24) over the public ABI, every member a process on loopback with
// the real store, control channel and UCX: M trainer ranks each publish the slices they own
// (rows, columns, replicas), N receivers register full tensors (in place or staged) or take views,
// and every byte of every version is checked. Then the plan refusals, the reuse of a repeated
// plan, and a sender that dies or hangs mid-update.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <functional>
#include <thread>
#include <vector>

#include "harness.h"
#include "wsync.h"

using namespace harness;

namespace {

constexpr const char* kGroup = "many";

double secs_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// How a tensor is split over the senders: rows (dim 0, torch.chunk), columns (dim 1), or every
// sender holds all of it (a replica).
enum class Split { kRows, kCols, kReplica };

struct Spec {
  synth_tensor_t t;
  Split split;
};

std::vector<Spec> model() {
  return {{tensor_of("embed.weight", WSYNC_DTYPE_FLOAT32, {1000, 96}), Split::kRows},
          {tensor_of("layer.0.qkv", WSYNC_DTYPE_BFLOAT16, {64, 300}), Split::kCols},
          {tensor_of("layer.0.bias", WSYNC_DTYPE_INT64, {10}), Split::kRows},  // 3,3,3,1 over 4
          {tensor_of("norm.weight", WSYNC_DTYPE_FLOAT32, {96}), Split::kReplica},
          {tensor_of("layer.1.w", WSYNC_DTYPE_FLOAT16, {2, 3, 257}), Split::kRows}};
}

// Partial updates (a trainer that publishes only what changed): versions after the first carry
// only these tensors; every other keeps version 1.
bool in_partial(const std::string& name) { return name == "layer.0.bias" || name == "norm.weight" || name == "layer.1.w"; }
uint64_t version_of(const std::string& name, uint64_t committed, bool partial) {
  return partial && !in_partial(name) && committed > 0 ? 1 : committed;
}

// torch.chunk of n over m: chunk k's [begin, end).
void chunk(int64_t n, uint32_t m, uint32_t k, int64_t* begin, int64_t* end) {
  const int64_t size = (n + m - 1) / m;
  *begin = std::min<int64_t>(n, size * k);
  *end = std::min<int64_t>(n, *begin + size);
}

// Sender k's slice of `s` at `version`: its bytes (packed) and its descriptor.
struct Slice {
  std::vector<uint8_t> bytes;
  wsync_tensor_t desc = WSYNC_TENSOR_INIT;
};

Slice slice_of(const Spec& s, uint32_t m, uint32_t k, uint64_t version) {
  std::vector<uint8_t> full(s.t.nbytes);
  synth_fill(&s.t, version, full.data());
  Slice out;
  wsync_tensor_t& d = out.desc;
  d.name = s.t.name;
  d.dtype = s.t.dtype;
  d.ndim = s.t.ndim;
  std::memcpy(d.full_shape, s.t.shape, sizeof d.full_shape);
  std::memcpy(d.shape, s.t.shape, sizeof d.shape);
  const uint64_t esize = wsync_dtype_size(s.t.dtype);
  if (s.split == Split::kReplica) {
    out.bytes = full;
    d.flags = WSYNC_TENSOR_REPLICA;
  } else {
    const int dim = s.split == Split::kRows ? 0 : 1;
    int64_t b = 0, e = 0;
    chunk(s.t.shape[dim], m, k, &b, &e);
    d.flags = WSYNC_TENSOR_SLICE;
    d.box_offset[dim] = b;
    d.shape[dim] = e - b;
    // rows of the outer dims, each a run of the inner ones
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < dim; ++i) outer *= s.t.shape[i];
    for (int i = dim + 1; i < s.t.ndim; ++i) inner *= s.t.shape[i];
    for (int64_t o = 0; o < outer; ++o) {
      const uint8_t* from = full.data() + ((o * s.t.shape[dim] + b) * inner) * esize;
      out.bytes.insert(out.bytes.end(), from, from + (e - b) * inner * esize);
    }
  }
  uint64_t n = esize;
  for (int i = 0; i < d.ndim; ++i) n *= static_cast<uint64_t>(d.shape[i]);
  d.nbytes = n;
  return out;
}

struct SenderPlan {
  uint32_t m = 2, k = 0, receivers = 3;
  std::string dir;  // addr files: <dir>/s<k>.addr
  uint64_t versions = 2;
  int64_t timeout_ms = 20000;
  uint64_t bucket_bytes = 64 << 10;
  // Faults: before finalizing this version, die (SIGKILL) or hang (SIGSTOP).
  uint64_t die_at = 0, hang_at = 0;
  // A plan refusal: this sender claims rows [0, 6) of embed.weight whatever its rank (overlap),
  // or claims no part of layer.0.bias (gap), or gives norm.weight another shape (disagreement).
  enum class Lie { kNone, kOverlap, kGap, kShape } lie = Lie::kNone;
  std::string expect_error;  // the lie's refusal must name this (exit 0 when it does)
  std::string route;         // option route, when given
  // membership=elastic with this commit_quorum (0: fixed); then these receivers must have left the
  // group, each member event's reason naming its text, and no other (exit 7 otherwise).
  uint32_t quorum = 0;
  std::vector<std::pair<uint32_t, std::string>> lefts;
  // The update must fail naming this, and nobody left the group (exit 0 when so, 8 otherwise).
  std::string fail_reason;
  // membership=elastic: option init_receivers, a pause after each version (a training step, when
  // receivers join), and a receiver that must have joined by the end (a JOINED event; exit 9 if not)
  uint32_t init_receivers = 0;
  int interval_ms = 0;
  uint32_t expect_joined = 0;
  // Every receiver is lost: a finalize that fails because nobody is left ("every receiver … has
  // left", "no receiver is in group") is counted, not fatal; at least one must, and the last
  // version must commit (exit 10 otherwise).
  bool nobody_at_times = false;
  // Versions after the first carry only the in_partial tensors; sender 0 marks each committed
  // version with a file <dir>/v<version>.done.
  bool partial = false;
  // The JOINED event of expect_joined must say it catches up from a peer (exit 11 if not).
  bool expect_catchup = false;
  // Publish past `versions` (at most 60 more) until expect_joined is installed: every sender reads
  // its JOINED event at the same update (they agree on the joiners), so all publish alike; each
  // writes the last version to <dir>/last before it closes (RxPlan::until_last). The test then
  // depends on the order of the join, not on how many versions it takes.
  bool until_joined = false;
};

std::string addr_file(const std::string& dir, uint32_t k) { return dir + "/s" + std::to_string(k) + ".addr"; }

// A sender that finished every version waits (up to 10 s) for the other senders to finish theirs
// before it closes its group: a receiver ends when a sender closes, and a sender still reading its
// member events would otherwise see that receiver leave "between updates" (an extra LEFT event:
// integration.many_senders failed this way under ASan, sender 1 slower than sender 0 to get there).
void wait_other_senders(const SenderPlan& p, uint64_t last) {
  if (p.until_joined)
    if (FILE* f = std::fopen((p.dir + "/last").c_str(), "w")) {
      std::fprintf(f, "%llu\n", static_cast<unsigned long long>(last));
      std::fclose(f);
    }
  const std::string mine = p.dir + "/s" + std::to_string(p.k) + ".done";
  if (FILE* f = std::fopen(mine.c_str(), "w")) std::fclose(f);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (uint32_t k = 0; k < p.m; ++k) {
    const std::string theirs = p.dir + "/s" + std::to_string(k) + ".done";
    while (access(theirs.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A sender process: exit 0 after every version was finalized (or, with a lie, after the batch was
// refused with the expected message); 3 on a failure, printed.
int run_sender(const SenderPlan& p) {
  std::string s0;
  if (p.k > 0 && (s0 = read_addr_file(addr_file(p.dir, 0), 20000)).empty()) return 5;
  const std::string af = addr_file(p.dir, p.k), m = std::to_string(p.m), k = std::to_string(p.k),
                    tm = std::to_string(p.timeout_ms), bb = std::to_string(p.bucket_bytes);
  std::vector<wsync_option_t> opts = {WSYNC_OPTION("store_addr_file", af.c_str()), WSYNC_OPTION("num_senders", m.c_str()),
                                      WSYNC_OPTION("sender_rank", k.c_str()), WSYNC_OPTION("timeout_ms", tm.c_str()),
                                      WSYNC_OPTION("bucket_bytes", bb.c_str())};
  if (p.k > 0) opts.push_back(WSYNC_OPTION("sender0_store", s0.c_str()));
  if (!p.route.empty()) opts.push_back(WSYNC_OPTION("route", p.route.c_str()));
  const std::string quorum = std::to_string(p.quorum);
  if (p.quorum != 0) {
    opts.push_back(WSYNC_OPTION("membership", "elastic"));
    opts.push_back(WSYNC_OPTION("commit_quorum", quorum.c_str()));
  }
  const std::string init = std::to_string(p.init_receivers);
  if (p.init_receivers != 0) opts.push_back(WSYNC_OPTION("init_receivers", init.c_str()));
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = p.receivers;
  cfg.group_name = kGroup;
  cfg.options = opts.data();
  cfg.num_options = opts.size();
  wsync_group_t* g = nullptr;
  wsync_status_t st = wsync_group_init(&cfg, &g);
  if (st != WSYNC_OK) {
    std::fprintf(stderr, "sender %u: init: %s: %s\n", p.k, wsync_status_name(st), wsync_last_error());
    return 3;
  }
  const std::vector<Spec> specs = model();
  uint64_t nobody_failures = 0, last = 0;
  std::vector<wsync_member_event_t> events;  // (read as they come: until_joined looks after every version)
  auto joined = [&p, &events] {
    for (const auto& e : events)
      if (e.kind == WSYNC_MEMBER_JOINED && e.rank == p.expect_joined &&
          (!p.expect_catchup || std::strstr(e.reason, "it catches up to version") != nullptr))
        return true;
    return false;
  };
  auto more = [&p, &joined](uint64_t v) {
    return v <= p.versions || (p.until_joined && v <= p.versions + 60 && !joined());
  };
  for (uint64_t v = 1; more(v) && st == WSYNC_OK; ++v) {
    std::vector<Slice> slices;
    for (const auto& s : specs) slices.push_back(slice_of(s, p.m, p.k, v));
    std::vector<wsync_tensor_t> descs;
    for (auto& sl : slices) {
      sl.desc.data = sl.bytes.data();
      if (p.lie == SenderPlan::Lie::kOverlap && std::strcmp(sl.desc.name, "embed.weight") == 0) {
        sl.desc.box_offset[0] = 0;
        sl.desc.shape[0] = 6;
        sl.desc.nbytes = 6 * 96 * 4;
      }
      if (p.lie == SenderPlan::Lie::kShape && std::strcmp(sl.desc.name, "norm.weight") == 0) {
        sl.desc.shape[0] = sl.desc.full_shape[0] = 95;
        sl.desc.nbytes = 95 * 4;
      }
      if (p.lie == SenderPlan::Lie::kGap && std::strcmp(sl.desc.name, "layer.0.bias") == 0) continue;
      if (p.partial && v > 1 && !in_partial(sl.desc.name)) continue;
      descs.push_back(sl.desc);
    }
    // Two batches per version: the boxes of one tensor never straddle them.
    const size_t half = descs.size() / 2;
    st = wsync_group_send_batch(g, descs.data(), half, -1);
    if (st == WSYNC_OK) st = wsync_group_send_batch(g, descs.data() + half, descs.size() - half, -1);
    if (st != WSYNC_OK) break;
    if (v == p.die_at) raise(SIGKILL);
    if (v == p.hang_at) raise(SIGSTOP);
    st = wsync_group_finalize(g, v, -1);
    if (st == WSYNC_ERR_PEER_FAILED && p.nobody_at_times && v < p.versions &&
        (std::strstr(wsync_last_error(), "every receiver of group") || std::strstr(wsync_last_error(), "no receiver is in group"))) {
      std::printf("sender %u: version %llu: %s\n", p.k, static_cast<unsigned long long>(v), wsync_last_error());
      ++nobody_failures;
      st = WSYNC_OK;
    }
    if (st == WSYNC_OK && p.partial && p.k == 0)
      if (FILE* f = std::fopen((p.dir + "/v" + std::to_string(v) + ".done").c_str(), "w")) std::fclose(f);
    if (st == WSYNC_OK) last = v;
    if (p.expect_joined != 0)
      for (wsync_member_event_t e = WSYNC_MEMBER_EVENT_INIT; wsync_group_next_member_event(g, &e) == WSYNC_OK;
           e = WSYNC_MEMBER_EVENT_INIT) {
        std::printf("sender %u: member event: kind %d rank %u update %llu: %s\n", p.k, e.kind, e.rank,
                    static_cast<unsigned long long>(e.update), e.reason);
        events.push_back(e);
      }
    if (p.interval_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(p.interval_ms));
  }
  const std::string why = st == WSYNC_OK ? "" : wsync_last_error();
  if (st != WSYNC_OK) std::fprintf(stderr, "sender %u: %s: %s\n", p.k, wsync_status_name(st), why.c_str());
  int rc = st == WSYNC_OK ? 0 : 3;
  if (!p.expect_error.empty())
    rc = st == WSYNC_ERR_INVALID_ARGUMENT && why.find(p.expect_error) != std::string::npos ? 0 : 4;
  if (!p.fail_reason.empty()) {
    wsync_member_event_t e = WSYNC_MEMBER_EVENT_INIT;
    const bool none_left = wsync_group_next_member_event(g, &e) == WSYNC_ERR_NOT_FOUND;
    if (!none_left) std::fprintf(stderr, "sender %u: receiver rank %u left: %s\n", p.k, e.rank, e.reason);
    rc = st != WSYNC_OK && why.find(p.fail_reason) != std::string::npos && none_left ? 0 : 8;
  }
  if (st == WSYNC_OK) {
    wsync_group_stats_t stats = WSYNC_GROUP_STATS_INIT;
    wsync_group_get_stats(g, &stats);
    std::printf("sender %u: batches %llu, plans computed %llu\n", p.k, static_cast<unsigned long long>(stats.batches),
                static_cast<unsigned long long>(stats.plans_computed));
    // Two batches per version, each the same every version: two plans, then reused (partial: two
    // more for the versions after the first).
    if (stats.plans_computed != std::min<uint64_t>(p.partial ? 4 : 2, 2 * last)) rc = 6;
    if (p.nobody_at_times && (nobody_failures == 0 || stats.committed_version != p.versions)) rc = 10;
    if (p.expect_joined != 0 && (!joined() || stats.members != p.receivers)) rc = p.expect_catchup ? 11 : 9;
    if (!p.lefts.empty()) {
      size_t matched = 0, events = 0;
      for (wsync_member_event_t e = WSYNC_MEMBER_EVENT_INIT; wsync_group_next_member_event(g, &e) == WSYNC_OK;
           e = WSYNC_MEMBER_EVENT_INIT, ++events) {
        std::printf("sender %u: member event: kind %d rank %u: %s\n", p.k, e.kind, e.rank, e.reason);
        for (const auto& want : p.lefts)
          matched += e.kind == WSYNC_MEMBER_LEFT && e.rank == want.first && std::strstr(e.reason, want.second.c_str());
      }
      const uint32_t n = static_cast<uint32_t>(p.lefts.size());
      if (matched != n || events != n || stats.members != p.receivers - n || stats.members_left != n) rc = 7;
    }
    wait_other_senders(p, last);
  }
  wsync_group_destroy(g);
  return rc;
}

// How a receiver takes the bytes.
enum class Take { kInPlace, kStaged, kViews };

struct RxPlan {
  uint32_t rank = 1;
  std::string dir;
  Take take = Take::kInPlace;
  uint64_t versions = 2;
  int64_t timeout_ms = 20000;
  // A fault test: the update after `versions` must fail naming `expect_error`; the registered
  // buffers must then still hold version `versions`, bit for bit.
  std::string expect_error;
  double max_seconds = 0;  // the failure must be reported within this many seconds of the commit
  bool expect_abort = false;  // the failure must come as another sender's ABORT_UPDATE, not its own timeout
  // A TP-2 engine worker: -1 takes whole tensors; 0 or 1 registers its half of embed.weight's
  // columns and of layer.0.qkv's rows (the senders split those by rows and by columns), and the
  // other tensors whole.
  int tp = -1;
  // Relays: the address its connections leave from (its own "host" on loopback), and its lane.
  std::string local_address, lane;
  // Killed (SIGKILL) or stopped (SIGSTOP) at version die_at's / hang_at's first bucket.
  uint64_t die_at = 0, hang_at = 0;
  // A receiver that stops answering: at the first bucket of version `sleep_at` that carries
  // tensor `sleep_on` it sleeps sleep_ms.
  uint64_t sleep_at = 0;
  int sleep_ms = 0;
  std::string sleep_on;
  bool partial = false;  // the senders' versions after the first carry the in_partial tensors only
  // A source whose copy changed after its commit: after committing this version it flips a byte of
  // its embed.weight (no longer checked here).
  uint64_t tamper_at = 0;
  // The senders published until a joiner was in (SenderPlan::until_joined): the last version is the
  // one in <dir>/last, not `versions`.
  bool until_last = false;
};

// The last version senders with until_joined published (0 when they wrote none).
uint64_t last_published(const std::string& dir) {
  unsigned long long v = 0;
  if (FILE* f = std::fopen((dir + "/last").c_str(), "r")) {
    if (std::fscanf(f, "%llu", &v) != 1) v = 0;
    std::fclose(f);
  }
  return v;
}

// The TP-2 half `tp` a receiver holds of tensor `s` (dim 1 of embed.weight, dim 0 of qkv), or false.
bool tp_half(const Spec& s, int tp, int* dim, int64_t* begin, int64_t* extent) {
  if (tp < 0) return false;
  const std::string name = s.t.name;
  if (name != "embed.weight" && name != "layer.0.qkv") return false;
  *dim = name == "embed.weight" ? 1 : 0;
  *extent = s.t.shape[*dim] / 2;
  *begin = *extent * tp;
  return true;
}

// The bytes of that half of the full tensor at `version`, packed.
std::vector<uint8_t> half_bytes(const Spec& s, int dim, int64_t begin, int64_t extent, uint64_t version) {
  std::vector<uint8_t> full(s.t.nbytes), out;
  synth_fill(&s.t, version, full.data());
  const uint64_t esize = wsync_dtype_size(s.t.dtype);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= s.t.shape[i];
  for (int i = dim + 1; i < s.t.ndim; ++i) inner *= s.t.shape[i];
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* from = full.data() + ((o * s.t.shape[dim] + begin) * inner) * esize;
    out.insert(out.end(), from, from + extent * inner * esize);
  }
  return out;
}

bool equal_full(const synth_tensor_t& t, uint64_t version, const void* data, uint64_t nbytes) {
  if (nbytes != t.nbytes) return false;
  std::vector<uint8_t> want(t.nbytes);
  synth_fill(&t, version, want.data());
  return std::memcmp(want.data(), data, t.nbytes) == 0;
}

// A receiver process: exit 0 when every version committed with every byte right (and, for a
// fault, the next update failed as expected with the buffers intact); 1 otherwise, printed.
int run_receiver_of(RxPlan p) {
  const std::string addr = read_addr_file(addr_file(p.dir, 0), 20000);
  wsync_receiver_t* rx = nullptr;
  const std::string tm = std::to_string(p.timeout_ms);
  std::vector<wsync_option_t> opts = {WSYNC_OPTION("receive_mode", p.take == Take::kStaged ? "staged" : "in_place"),
                                      WSYNC_OPTION("timeout_ms", tm.c_str())};
  if (!p.local_address.empty()) opts.push_back(WSYNC_OPTION("local_address", p.local_address.c_str()));
  if (!p.lane.empty()) opts.push_back(WSYNC_OPTION("lane", p.lane.c_str()));
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.rank = p.rank;
  cfg.store_addr = addr.c_str();
  cfg.group_name = kGroup;
  cfg.options = opts.data();
  cfg.num_options = opts.size();
  wsync_status_t st = wsync_receiver_init(&cfg, &rx);
  if (st != WSYNC_OK) {
    std::fprintf(stderr, "receiver %u: init: %s\n", p.rank, wsync_last_error());
    return 1;
  }
  const std::vector<Spec> specs = model();
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<int> half_dim(specs.size(), -1);
  std::vector<int64_t> half_begin(specs.size()), half_extent(specs.size());
  if (p.take != Take::kViews) {
    std::vector<wsync_tensor_t> descs;
    for (size_t i = 0; i < specs.size(); ++i) {
      int dim = 0;
      int64_t begin = 0, extent = 0;
      wsync_tensor_t d = WSYNC_TENSOR_INIT;
      if (tp_half(specs[i], p.tp, &dim, &begin, &extent)) {
        half_dim[i] = dim;
        half_begin[i] = begin;
        half_extent[i] = extent;
        bufs.emplace_back(specs[i].t.nbytes / 2);
        d = desc_of(specs[i].t, bufs[i].data());
        d.flags = WSYNC_TENSOR_SLICE;
        std::memcpy(d.full_shape, specs[i].t.shape, sizeof d.full_shape);
        d.shape[dim] = extent;
        d.box_offset[dim] = begin;
        d.nbytes = specs[i].t.nbytes / 2;
      } else {
        bufs.emplace_back(specs[i].t.nbytes);
        d = desc_of(specs[i].t, bufs[i].data());
      }
      descs.push_back(d);
    }
    if (wsync_receiver_register(rx, descs.data(), descs.size()) != WSYNC_OK) {
      std::fprintf(stderr, "receiver %u: register: %s\n", p.rank, wsync_last_error());
      return 1;
    }
  }
  // Every registered buffer holds `version` (a half: that half of it).
  auto holds = [&](size_t j, uint64_t version) {
    version = version_of(specs[j].t.name, version, p.partial);
    if (half_dim[j] < 0) return equal_full(specs[j].t, version, bufs[j].data(), bufs[j].size());
    return half_bytes(specs[j], half_dim[j], half_begin[j], half_extent[j], version) == bufs[j];
  };
  int bad = 0;
  bool aborted = false;
  uint64_t committed = 0;
  std::vector<int> seen(specs.size());
  auto t_commit = std::chrono::steady_clock::now();
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  while ((st = wsync_receiver_next(rx, &ev, p.timeout_ms + 5000)) == WSYNC_OK && ev.kind != WSYNC_EVENT_CLOSED) {
    if (ev.kind == WSYNC_EVENT_BUCKET) {
      if (p.die_at == committed + 1) raise(SIGKILL);
      if (p.hang_at == committed + 1) raise(SIGSTOP);
      bool carries = false;
      for (uint64_t i = 0; i < ev.num_tensors; ++i)
        carries |= p.sleep_on == reinterpret_cast<const wsync_tensor_t*>(reinterpret_cast<const char*>(ev.tensors) +
                                                                         i * ev.tensors[0].struct_size)->name;
      if (p.sleep_at == committed + 1 && p.sleep_ms > 0 && carries) {
        std::this_thread::sleep_for(std::chrono::milliseconds(p.sleep_ms));
        p.sleep_ms = 0;  // (once)
      }
      for (uint64_t i = 0; i < ev.num_tensors; ++i) {
        const wsync_tensor_t* t = reinterpret_cast<const wsync_tensor_t*>(reinterpret_cast<const char*>(ev.tensors) +
                                                                           i * ev.tensors[0].struct_size);
        for (size_t j = 0; j < specs.size(); ++j)
          if (std::strcmp(specs[j].t.name, t->name) == 0) {
            seen[j]++;
            if (p.take == Take::kViews && !equal_full(specs[j].t, committed + 1, t->data, t->nbytes)) {
              std::fprintf(stderr, "receiver %u: view of %s differs in version %llu\n", p.rank, t->name,
                           static_cast<unsigned long long>(committed + 1));
              bad = 1;
            }
          }
      }
    } else if (ev.kind == WSYNC_EVENT_ABORTED) {
      aborted = true;  // another sender gave up first (its reason, logged, names the failed one)
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      for (size_t j = 0; j < specs.size(); ++j) {
        if (seen[j] != (p.partial && ev.version > 1 && !in_partial(specs[j].t.name) ? 0 : 1)) {
          std::fprintf(stderr, "receiver %u: %s reported %d times in version %llu\n", p.rank, specs[j].t.name,
                       seen[j], static_cast<unsigned long long>(ev.version));
          bad = 1;
        }
        seen[j] = 0;
      }
      if ((st = wsync_receiver_commit(rx, ev.version)) != WSYNC_OK) break;
      committed = ev.version;
      t_commit = std::chrono::steady_clock::now();
      for (size_t j = 0; j < bufs.size(); ++j)
        if ((p.tamper_at == 0 || committed <= p.tamper_at || j != 0) && !holds(j, committed)) {
          std::fprintf(stderr, "receiver %u: %s differs after commit %llu\n", p.rank, specs[j].t.name,
                       static_cast<unsigned long long>(committed));
          bad = 1;
        }
      if (committed == p.tamper_at) bufs[0][7] ^= 0x5a;  // (embed.weight: written after its commit)
    }
  }
  const std::string why = st == WSYNC_OK ? "" : wsync_last_error();
  if (p.expect_error.empty()) {
    if (st != WSYNC_OK) std::fprintf(stderr, "receiver %u: %s: %s\n", p.rank, wsync_status_name(st), why.c_str());
    bad |= st != WSYNC_OK || committed != (p.until_last ? last_published(p.dir) : p.versions);
  } else {
    const double took = secs_since(t_commit);
    std::fprintf(stderr, "receiver %u: failed after %.2f s: %s: %s\n", p.rank, took, wsync_status_name(st), why.c_str());
    // Either this receiver names the failed sender itself, or it read the abort of a sender that
    // gave up because of it first, and then the close: the update never committed either way.
    const bool named = st != WSYNC_OK && why.find(p.expect_error) != std::string::npos;
    bad |= !(named || (st == WSYNC_OK && aborted)) || committed != p.versions;
    if (p.expect_abort && !(st == WSYNC_OK && aborted)) {
      std::fprintf(stderr, "receiver %u: expected sender 0's ABORT_UPDATE, not a failure of its own\n", p.rank);
      bad = 1;
    }
    if (p.max_seconds > 0 && took > p.max_seconds) bad = 1;
    if (p.take == Take::kStaged)  // staged: the failed update left the buffers at the last version
      for (size_t j = 0; j < bufs.size(); ++j)
        if (!holds(j, committed)) {
          std::fprintf(stderr, "receiver %u: %s lost version %llu\n", p.rank, specs[j].t.name,
                       static_cast<unsigned long long>(committed));
          bad = 1;
        }
  }
  wsync_receiver_destroy(rx);
  return bad;
}

struct Cluster {
  std::string dir = temp_dir();
  std::vector<pid_t> senders, receivers;
  ~Cluster() {
    for (pid_t p : senders) kill(p, SIGKILL);
    for (pid_t p : receivers) kill(p, SIGKILL);
  }
};

// Spawns senders 0..m-1 (option num_senders m, each for n receivers) and receivers 1..n of `c`,
// each plan given its rank and folder first, then filled in by `sender` / `receiver`.
void spawn_group(Cluster* c, uint32_t m, uint32_t n, const std::function<void(uint32_t, SenderPlan*)>& sender,
                 const std::function<void(uint32_t, RxPlan*)>& receiver) {
  for (uint32_t k = 0; k < m; ++k) {
    SenderPlan p;
    p.m = m;
    p.k = k;
    p.receivers = n;
    p.dir = c->dir;
    sender(k, &p);
    c->senders.push_back(spawn([p] { return run_sender(p); }));
  }
  for (uint32_t r = 1; r <= n; ++r) {
    RxPlan p;
    p.rank = r;
    p.dir = c->dir;
    receiver(r, &p);
    c->receivers.push_back(spawn([p] { return run_receiver_of(p); }));
  }
}

}  // namespace

// 2 senders (rows, columns, a replica, a 3,3,3,1-style uneven split) × 3 receivers: in place,
// staged, and views. Every byte of both versions arrives, every tensor is reported once per
// version, and each sender computed two plans (one per batch) and reused them for version 2.
TEST(ManySenders, TwoSendersThreeReceiversGetEveryByteOfEveryVersion) {
  Cluster c;
  for (uint32_t k = 0; k < 2; ++k) {
    SenderPlan p;
    p.k = k;
    p.dir = c.dir;
    c.senders.push_back(spawn([p] { return run_sender(p); }));
  }
  const Take takes[] = {Take::kInPlace, Take::kStaged, Take::kViews};
  for (uint32_t r = 1; r <= 3; ++r) {
    RxPlan p;
    p.rank = r;
    p.dir = c.dir;
    p.take = takes[r - 1];
    c.receivers.push_back(spawn([p] { return run_receiver_of(p); }));
  }
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0);
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 60000), 0);
  c.senders.clear();
  c.receivers.clear();
}

// Four senders, one receiver: the uneven split (10 rows over 4 are 3,3,3,1) and a sender owning
// nothing of a tensor (2 rows of layer.1.w over 4).
TEST(ManySenders, FourSendersSplitUnevenly) {
  Cluster c;
  for (uint32_t k = 0; k < 4; ++k) {
    SenderPlan p;
    p.m = 4;
    p.k = k;
    p.receivers = 1;
    p.dir = c.dir;
    c.senders.push_back(spawn([p] { return run_sender(p); }));
  }
  RxPlan r;
  r.dir = c.dir;
  c.receivers.push_back(spawn([r] { return run_receiver_of(r); }));
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0);
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 60000), 0);
  c.senders.clear();
  c.receivers.clear();
}

// TP-2 engine workers: 2 senders (embed.weight by rows, qkv by columns) and 4 receivers, two per
// TP rank, each registering its half of embed.weight's columns and of qkv's rows: every receiver
// takes a part of each sender's slice (cut out of it: several runs), only its half arrives (a byte
// outside it would be refused), and one receiver per TP rank is staged.
// Lanes: each receiver on a "host" of its own (an address of loopback), so that route=auto relays:
// with lanes, TP rank t of one replica forwards to TP rank t of the next.
enum class Hosts { kOne, kOwnLanes, kOwnNoLanes };

void tp2(uint32_t m, Hosts hosts = Hosts::kOne, const std::string& expect_error = "") {
  Cluster c;
  for (uint32_t k = 0; k < m; ++k) {
    SenderPlan p;
    p.m = m;
    p.k = k;
    p.receivers = 4;
    p.dir = c.dir;
    p.expect_error = expect_error;
    c.senders.push_back(spawn([p] { return run_sender(p); }));
  }
  for (uint32_t r = 1; r <= 4; ++r) {
    RxPlan p;
    p.rank = r;
    p.dir = c.dir;
    p.tp = r <= 2 ? 0 : 1;
    p.take = r % 2 ? Take::kInPlace : Take::kStaged;
    if (hosts != Hosts::kOne) p.local_address = "127.0.0." + std::to_string(r + 1);
    if (hosts == Hosts::kOwnLanes) p.lane = std::to_string(p.tp);
    if (!expect_error.empty()) p.versions = 0;
    c.receivers.push_back(spawn([p] { return run_receiver_of(p); }));
  }
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0);
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 60000), 0);
  c.senders.clear();
  c.receivers.clear();
}

TEST(ManySenders, TP2ReceiversGetOnlyTheirHalfFromEverySender) { tp2(2); }

// One sender that plans (option num_senders=1) serves TP-2 receivers the same way.
TEST(ManySenders, OneSenderThatPlansSendsTP2ReceiversTheirHalfOnly) { tp2(1); }

// Many senders × relays (lanes): the receivers on four hosts, lane = TP rank, route auto. Each
// sender sends its half-slices once per lane, to the lane's first host, which relays them to the
// same TP rank of the other replica; every byte is checked as above.
TEST(ManySenders, LanesRelayEachTPHalfToTheSameTPRankOfTheNextReplica) { tp2(2, Hosts::kOwnLanes); }

// The same receivers without lanes: a relay would pass on the half its child did not ask for, so
// the first batch is refused before a byte moves, naming the relay, its child and the option.
TEST(ManySenders, RelaysBetweenReceiversTakingDifferentBoxesAreRefusedNamingTheLaneOption) {
  tp2(2, Hosts::kOwnNoLanes, "receiver option lane");
}

namespace {

// Sender 1 lies; both senders' first batch is refused with INVALID_ARGUMENT naming `what`, before
// any byte moved (the receiver sees the group close without an update).
void expect_refusal(SenderPlan::Lie lie, const std::string& what) {
  Cluster c;
  for (uint32_t k = 0; k < 2; ++k) {
    SenderPlan p;
    p.k = k;
    p.receivers = 1;
    p.dir = c.dir;
    p.expect_error = what;
    if (k == 1) p.lie = lie;
    c.senders.push_back(spawn([p] { return run_sender(p); }));
  }
  RxPlan r;
  r.dir = c.dir;
  r.versions = 0;
  c.receivers.push_back(spawn([r] { return run_receiver_of(r); }));
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0) << "the refusal must name: " << what;
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 60000), 0);
  c.senders.clear();
  c.receivers.clear();
}

}  // namespace

TEST(ManySenders, OverlappingSlicesAreRefusedNamingTheTensorSendersAndRange) {
  expect_refusal(SenderPlan::Lie::kOverlap, "embed.weight");
}

TEST(ManySenders, AGapIsRefusedNamingTheTensorAndTheRangeNobodyOwns) {
  expect_refusal(SenderPlan::Lie::kGap, "layer.0.bias");
}

TEST(ManySenders, SendersThatDisagreeOnAShapeAreRefused) { expect_refusal(SenderPlan::Lie::kShape, "norm.weight"); }

namespace {

// Version 1 commits; sender 1 then dies or hangs before finalizing version 2. Sender 0's finalize
// and every receiver fail naming sender 1 within timeout_ms + 1 s; staged receivers keep version 1.
void sender_fault(bool hang) {
  Cluster c;
  const int64_t timeout_ms = 3000;
  for (uint32_t k = 0; k < 2; ++k) {
    SenderPlan p;
    p.k = k;
    p.dir = c.dir;
    p.timeout_ms = timeout_ms;
    if (k == 1) (hang ? p.hang_at : p.die_at) = 2;
    c.senders.push_back(spawn([p] { return run_sender(p); }));
  }
  const Take takes[] = {Take::kStaged, Take::kStaged, Take::kInPlace};
  for (uint32_t r = 1; r <= 3; ++r) {
    RxPlan p;
    p.rank = r;
    p.dir = c.dir;
    p.take = takes[r - 1];
    p.versions = 1;
    p.timeout_ms = timeout_ms;
    p.expect_error = "sender 1";
    // from version 1's commit: sender 1's second version, then timeout_ms (hung) + 1 s
    p.max_seconds = (timeout_ms + 1000) / 1000.0 + 1.0;
    c.receivers.push_back(spawn([p] { return run_receiver_of(p); }));
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_child(c.senders[0], 30000), 3) << "sender 0's finalize must fail";
  std::printf("sender 0 failed after %.2f s\n", secs_since(t0));
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 30000), 0);
  if (hang) kill(c.senders[1], SIGKILL);
  wait_child(c.senders[1], 5000);
  c.senders.clear();
  c.receivers.clear();
}

}  // namespace

TEST(ManySenders, ASenderKilledMidUpdateIsNamedAndNothingCommits) { sender_fault(false); }

// Sender 1 hangs before finalizing version 2, after its buckets landed. Every receiver holds sender
// 0's finalize and waits for sender 1's: receivers 2 and 3 (timeout 3 s) give up and refuse the
// commit, sender 0 gives up and aborts the update everywhere. Receiver 1 (timeout 20 s) must read
// that ABORT_UPDATE on sender 0's link, which already finalized, at once: not sit out its own
// timeout (the cluster's senders_hang row missed its bound this way, 1 run in 20).
TEST(ManySenders, AReceiverHoldingOneSendersFinalizeHearsItsAbortAtOnce) {
  Cluster c;
  for (uint32_t k = 0; k < 2; ++k) {
    SenderPlan p;
    p.k = k;
    p.dir = c.dir;
    p.timeout_ms = 20000;
    if (k == 1) p.hang_at = 2;
    c.senders.push_back(spawn([p] { return run_sender(p); }));
  }
  for (uint32_t r = 1; r <= 3; ++r) {
    RxPlan p;
    p.rank = r;
    p.dir = c.dir;
    p.take = Take::kStaged;
    p.versions = 1;
    p.timeout_ms = r == 1 ? 20000 : 3000;
    p.expect_error = "sender 1";
    p.expect_abort = r == 1;
    c.receivers.push_back(spawn([p] { return run_receiver_of(p); }));
  }
  EXPECT_EQ(wait_child(c.senders[0], 60000), 3) << "sender 0's finalize must fail";
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 60000), 0);
  kill(c.senders[1], SIGKILL);
  wait_child(c.senders[1], 5000);
  c.senders.clear();
  c.receivers.clear();
}

TEST(ManySenders, ASenderHungMidUpdateIsNamedWithinItsTimeoutAndNothingCommits) { sender_fault(true); }

// membership=elastic with two senders: receiver 3 stops answering for 5 s once version 2's last
// bucket arrived, before it reads the finalize; sender 0 (timeout_ms 2 s) removes it when its
// COMMITTED does not come within 4 s. Sender 1 (timeout_ms 20 s) would wait its own 22 s; instead
// receiver 3, when it wakes, reads sender 0's REMOVED after its END_UPDATE (before it merges the
// commit) and tells sender 1, which removes it at once naming sender 0's reason. Version 2 commits
// on receivers 1 and 2 (quorum 2) through both senders, and version 3 after it; receiver 3 learns it
// was removed (WSYNC_ERR_REJECTED) and keeps version 1.
TEST(ManySenders, ElasticAReceiverOneSenderRemovesIsRemovedByTheOthersToo) {
  Cluster c;
  spawn_group(
      &c, 2, 3,
      [](uint32_t k, SenderPlan* p) {
        p->versions = 3;
        p->quorum = 2;
        p->timeout_ms = k == 0 ? 2000 : 20000;
        p->lefts = {{3, k == 0 ? "did not answer COMMITTED" : "removed from group 'many' by its sender"}};
      },
      [](uint32_t r, RxPlan* p) {
        p->take = Take::kStaged;
        p->versions = r == 3 ? 1 : 3;
        if (r == 3) {
          p->sleep_at = 2;
          p->sleep_ms = 5000;
          p->sleep_on = "layer.1.w";  // (in the second batch, the last)
          p->expect_error = "removed from group 'many' by its sender";
        }
      });
  const auto t0 = std::chrono::steady_clock::now();
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0);
  EXPECT_LT(secs_since(t0), 20.0) << "sender 1 waited its own timeout instead of hearing receiver 3's word";
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 60000), 0);
  c.senders.clear();
  c.receivers.clear();
}

// membership=elastic with two senders, sender 1 killed before finalizing version 2: a sender's
// death is not the receivers' doing. Sender 0 removes nobody (the receivers say SENDER_LOST, naming
// sender 1), its finalize fails naming sender 1, and the staged receivers keep version 1.
TEST(ManySenders, ElasticASenderKilledMidUpdateFailsTheUpdateAndRemovesNobody) {
  Cluster c;
  spawn_group(
      &c, 2, 3,
      [](uint32_t k, SenderPlan* p) {
        p->timeout_ms = 3000;
        p->quorum = 2;
        if (k == 1) p->die_at = 2;
        if (k == 0) p->fail_reason = "sender 1";
      },
      [](uint32_t, RxPlan* p) {
        p->take = Take::kStaged;
        p->versions = 1;
        p->timeout_ms = 3000;
        // (which sender a receiver names depends on whose close it meets first: sender 0 gives up and
        // closes once a receiver told it; what matters here is sender 0's word, and version 1 kept)
        p->expect_error = "sender ";
      });
  EXPECT_EQ(wait_child(c.senders[0], 30000), 0) << "sender 0's finalize must fail naming sender 1, nobody removed";
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 30000), 0);
  wait_child(c.senders[1], 5000);
  c.senders.clear();
  c.receivers.clear();
}

// Every feature at once, on loopback: membership=elastic, two senders, TP-2 receivers on hosts of
// their own in two lanes (route=auto given: ranks 1 -> 2 carry TP rank 0's half, 3 -> 4 TP rank 1's).
// Relay rank 1 is killed in version 2: both senders remove it and rank 2 below it ("fed by relay
// rank 1"), version 2 commits on ranks 3 and 4 (quorum 2) and version 3 after it, every half
// checked; rank 2 learns it was cut off and keeps version 1.
void elastic_lanes(bool hang) {
  Cluster c;
  spawn_group(
      &c, 2, 4,
      [hang](uint32_t, SenderPlan* p) {
        p->versions = 3;
        p->quorum = 2;
        p->timeout_ms = 5000;
        p->lefts = {{1, hang ? "made no progress within 5000 ms" : "closed its connection"}, {2, "fed by relay rank 1"}};
        p->route = "auto";  // (an elastic group relays when asked to)
      },
      [hang](uint32_t r, RxPlan* p) {
        p->tp = r <= 2 ? 0 : 1;
        p->take = Take::kStaged;
        p->local_address = "127.0.0." + std::to_string(r + 1);
        p->lane = std::to_string(p->tp);
        p->versions = r <= 2 ? 1 : 3;
        p->timeout_ms = 5000;
        if (r == 1) (hang ? p->hang_at : p->die_at) = 2;
        // (cut off: removed by a sender naming the relay, or its own bucket below the relay failed
        // first: "the bytes of sender 1 (…) through relay rank 1 stopped: …")
        if (r == 2) p->expect_error = "relay rank 1";
      });
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0);
  if (hang) kill(c.receivers[0], SIGKILL);
  EXPECT_NE(wait_child(c.receivers[0], 60000), 0) << "rank 1 was killed";
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(wait_child(c.receivers[i], 60000), 0) << "rank " << i + 1;
  c.senders.clear();
  c.receivers.clear();
}

TEST(ManySenders, ElasticLanesARelayKilledTakesItsLaneAndTheOtherLaneCommits) { elastic_lanes(false); }

// The same with relay rank 1 hung: both senders name it at their timeout and remove rank 2 with it;
// rank 2, whose bucket below the hung relay may time out first, says so as its own loss (a NACK),
// not as a sender's failure, so no sender fails the update for it.
TEST(ManySenders, ElasticLanesARelayHungTakesItsLaneAndTheOtherLaneCommits) { elastic_lanes(true); }


namespace {

// A receiver that joins an elastic group of many senders after init, as rank `rank`, half a second
// after the group is up: every version it commits is checked byte for byte (its registered buffers
// against the full tensors), the versions it commits rise, and it commits `last` (0: the one the
// senders wrote in <dir>/last). Exit 0 so, 1 not.
int run_joiner(const std::string& dir, uint32_t rank, uint64_t last, int delay_ms = 500) {
  const std::string addr = read_addr_file(addr_file(dir, 0), 20000);
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  wsync_option_t opts[] = {WSYNC_OPTION("timeout_ms", "20000")};
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.rank = rank;
  cfg.store_addr = addr.c_str();
  cfg.group_name = kGroup;
  cfg.options = opts;
  cfg.num_options = 1;
  wsync_receiver_t* rx = nullptr;
  if (wsync_receiver_init(&cfg, &rx) != WSYNC_OK) {
    std::fprintf(stderr, "joiner %u: init: %s\n", rank, wsync_last_error());
    return 1;
  }
  const std::vector<Spec> specs = model();
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<wsync_tensor_t> descs;
  for (const auto& s : specs) bufs.emplace_back(s.t.nbytes);
  for (size_t i = 0; i < specs.size(); ++i) descs.push_back(desc_of(specs[i].t, bufs[i].data()));
  if (wsync_receiver_register(rx, descs.data(), descs.size()) != WSYNC_OK) {
    std::fprintf(stderr, "joiner %u: register: %s\n", rank, wsync_last_error());
    return 1;
  }
  uint64_t committed = 0, commits = 0;
  int bad = 0;
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  wsync_status_t st;
  while ((st = wsync_receiver_next(rx, &ev, 25000)) == WSYNC_OK && ev.kind != WSYNC_EVENT_CLOSED) {
    if (ev.kind != WSYNC_EVENT_COMMIT) continue;
    if (ev.version <= committed || wsync_receiver_commit(rx, ev.version) != WSYNC_OK) {
      std::fprintf(stderr, "joiner %u: version %llu after %llu: %s\n", rank, static_cast<unsigned long long>(ev.version),
                   static_cast<unsigned long long>(committed), wsync_last_error());
      bad = 1;
      break;
    }
    committed = ev.version;
    ++commits;
    for (size_t i = 0; i < specs.size(); ++i)
      if (!equal_full(specs[i].t, committed, bufs[i].data(), bufs[i].size())) {
        std::fprintf(stderr, "joiner %u: %s differs from version %llu\n", rank, specs[i].t.name,
                     static_cast<unsigned long long>(committed));
        bad = 1;
      }
  }
  if (st != WSYNC_OK) std::fprintf(stderr, "joiner %u: %s: %s\n", rank, wsync_status_name(st), wsync_last_error());
  std::printf("joiner %u: committed %llu versions, the last %llu\n", rank, static_cast<unsigned long long>(commits),
              static_cast<unsigned long long>(committed));
  wsync_receiver_destroy(rx);
  return bad || committed != (last != 0 ? last : last_published(dir)) ? 1 : 0;
}

// A TP-2 worker (half `tp` of embed.weight and layer.0.qkv, the rest whole, in place or staged)
// that joins once sender 0 committed version `after` of partial updates (they carry the in_partial
// tensors only: its halves of embed.weight and qkv, and layer.0.qkv, can only come from a peer).
// Its first commit must be a catch-up (no BUCKET before it) to a version >= `after`; after every
// commit each buffer holds, byte for byte, the version its tensor last changed in; it commits
// `last` (0: the one the senders wrote in <dir>/last). Exit 0 so, 1 not.
// With `refused`: its catch-up must fail naming embed.weight's box and the sender's digest (its
// source's copy was changed after its commit), and it commits nothing.
int run_tp_joiner(const std::string& dir, uint32_t rank, int tp, bool staged, uint64_t after, uint64_t last,
                  bool refused = false) {
  const std::string addr = read_addr_file(addr_file(dir, 0), 20000);
  const std::string mark = dir + "/v" + std::to_string(after) + ".done";
  for (int i = 0; i < 3000 && access(mark.c_str(), F_OK) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  wsync_option_t opts[] = {WSYNC_OPTION("timeout_ms", "20000"), WSYNC_OPTION("receive_mode", staged ? "staged" : "in_place")};
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.rank = rank;
  cfg.store_addr = addr.c_str();
  cfg.group_name = kGroup;
  cfg.options = opts;
  cfg.num_options = 2;
  wsync_receiver_t* rx = nullptr;
  if (wsync_receiver_init(&cfg, &rx) != WSYNC_OK) {
    std::fprintf(stderr, "joiner %u: init: %s\n", rank, wsync_last_error());
    return 1;
  }
  const std::vector<Spec> specs = model();
  std::vector<std::vector<uint8_t>> bufs(specs.size());
  std::vector<wsync_tensor_t> descs;
  std::vector<int> dims(specs.size(), -1);
  std::vector<int64_t> begins(specs.size()), extents(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    if (tp_half(specs[i], tp, &dims[i], &begins[i], &extents[i])) {
      bufs[i].resize(specs[i].t.nbytes / 2);
      wsync_tensor_t d = desc_of(specs[i].t, bufs[i].data());
      d.flags = WSYNC_TENSOR_SLICE;
      std::memcpy(d.full_shape, specs[i].t.shape, sizeof d.full_shape);
      d.shape[dims[i]] = extents[i];
      d.box_offset[dims[i]] = begins[i];
      d.nbytes = bufs[i].size();
      descs.push_back(d);
    } else {
      dims[i] = -1;
      bufs[i].resize(specs[i].t.nbytes);
      descs.push_back(desc_of(specs[i].t, bufs[i].data()));
    }
  }
  if (wsync_receiver_register(rx, descs.data(), descs.size()) != WSYNC_OK) {
    std::fprintf(stderr, "joiner %u: register: %s\n", rank, wsync_last_error());
    return 1;
  }
  uint64_t committed = 0, buckets = 0;
  bool caught_up = false;
  int bad = 0;
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  wsync_status_t st;
  while ((st = wsync_receiver_next(rx, &ev, 25000)) == WSYNC_OK && ev.kind != WSYNC_EVENT_CLOSED) {
    if (ev.kind == WSYNC_EVENT_BUCKET) ++buckets;
    if (ev.kind != WSYNC_EVENT_COMMIT) continue;
    if (committed == 0) caught_up = buckets == 0 && ev.version >= after;
    if (ev.version <= committed || wsync_receiver_commit(rx, ev.version) != WSYNC_OK) {
      std::fprintf(stderr, "joiner %u: version %llu after %llu: %s\n", rank, static_cast<unsigned long long>(ev.version),
                   static_cast<unsigned long long>(committed), wsync_last_error());
      bad = 1;
      break;
    }
    committed = ev.version;
    for (size_t i = 0; i < specs.size(); ++i) {
      const uint64_t v = version_of(specs[i].t.name, committed, true);
      const bool ok = dims[i] < 0 ? equal_full(specs[i].t, v, bufs[i].data(), bufs[i].size())
                                  : half_bytes(specs[i], dims[i], begins[i], extents[i], v) == bufs[i];
      if (!ok) {
        std::fprintf(stderr, "joiner %u: %s differs from version %llu after commit %llu\n", rank, specs[i].t.name,
                     static_cast<unsigned long long>(v), static_cast<unsigned long long>(committed));
        bad = 1;
      }
    }
  }
  const std::string why = st != WSYNC_OK ? wsync_last_error() : "";
  if (st != WSYNC_OK) std::fprintf(stderr, "joiner %u: %s: %s\n", rank, wsync_status_name(st), why.c_str());
  std::printf("joiner %u: caught up from a peer: %s; the last version %llu\n", rank, caught_up ? "yes" : "no",
              static_cast<unsigned long long>(committed));
  wsync_receiver_destroy(rx);
  if (refused)
    return st == WSYNC_ERR_PROTOCOL && committed == 0 &&
                   why.find("of tensor 'embed.weight' from receiver rank 1 (the catch-up source) is not version") !=
                       std::string::npos &&
                   why.find("as the sender sent it") != std::string::npos
               ? 0
               : 1;
  return bad || !caught_up || committed != (last != 0 ? last : last_published(dir)) ? 1 : 0;
}

}  // namespace

// membership=elastic with two senders and init_receivers 2 of 3: rank 3 joins after init. Both
// senders have it before the same update (they agree on the joiners at its first batch), it takes
// that update whole from both and every later one, each checked byte for byte; both senders report
// it joined, and ranks 1 and 2 commit every version.
TEST(ManySenders, ElasticAReceiverJoinsAfterInitAndTakesTheNextUpdateFromEverySender) {
  Cluster c;
  spawn_group(
      &c, 2, 2,
      [](uint32_t, SenderPlan* p) {
        p->receivers = 3;
        p->versions = 6;
        p->quorum = 1;
        p->init_receivers = 2;
        p->interval_ms = 300;
        p->expect_joined = 3;
        p->until_joined = true;
      },
      [](uint32_t r, RxPlan* p) {
        p->take = r == 1 ? Take::kInPlace : Take::kStaged;
        p->versions = 6;
        p->until_last = true;
      });
  const std::string dir = c.dir;
  c.receivers.push_back(spawn([dir] { return run_joiner(dir, 3, 0); }));
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0);
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 60000), 0);
  c.senders.clear();
  c.receivers.clear();
}

// membership=elastic with two senders: both receivers are killed at version 2, so each sender loses
// every member: version 2 fails at its finalize ("every receiver … has left"), the versions while
// nobody is in the group fail saying so, and neither sender breaks its group. Rank 3 joins 2.5 s in
// (a dozen versions before the last);
// both senders take it at the same update, which it takes whole from both, and the last version
// commits on it, every byte checked.
TEST(ManySenders, ElasticLosingEveryReceiverFailsTheUpdateAndAJoinerTakesTheNext) {
  Cluster c;
  spawn_group(
      &c, 2, 2,
      [](uint32_t, SenderPlan* p) {
        p->receivers = 3;
        p->versions = 24;  // (about 0.35 s a version while nobody is in the group: the joiner comes by the 9th)
        p->quorum = 1;
        p->init_receivers = 2;
        p->interval_ms = 300;
        p->timeout_ms = 5000;
        p->nobody_at_times = true;
      },
      [](uint32_t, RxPlan* p) {
        p->take = Take::kStaged;
        p->versions = 1;
        p->die_at = 2;
      });
  const std::string dir = c.dir;
  pid_t joiner = spawn([dir] { return run_joiner(dir, 3, 24, 2500); });
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0);
  EXPECT_EQ(wait_child(joiner, 60000), 0) << "the joiner";
  for (pid_t p : c.receivers) EXPECT_NE(wait_child(p, 60000), 0) << "a receiver was killed";
  c.senders.clear();
  c.receivers.clear();
}

namespace {

// Two senders publish partial updates (after version 1 only the in_partial tensors) into TP-2
// workers 1 and 2 (rank 1 flips a byte of its embed.weight half after committing version 1 when
// `tampered`); worker 3 (TP rank 0, staged) joins once version 2 committed.
void tp_joiner_catches_up(bool tampered) {
  Cluster c;
  spawn_group(
      &c, 2, 2,
      [tampered](uint32_t, SenderPlan* p) {
        p->receivers = 3;
        p->versions = 8;
        p->quorum = 1;
        p->init_receivers = 2;
        p->interval_ms = 300;
        p->partial = true;
        if (tampered) return;
        p->expect_joined = 3;
        p->expect_catchup = true;
        p->until_joined = true;
      },
      [tampered](uint32_t r, RxPlan* p) {
        p->tp = r == 1 ? 0 : 1;
        p->versions = 8;
        p->partial = true;
        p->until_last = !tampered;
        if (tampered && r == 1) p->tamper_at = 1;
      });
  const std::string dir = c.dir;
  c.receivers.push_back(spawn([dir, tampered] { return run_tp_joiner(dir, 3, 0, !tampered, 2, tampered ? 8 : 0, tampered); }));
  for (pid_t p : c.senders) EXPECT_EQ(wait_child(p, 60000), 0);
  for (pid_t p : c.receivers) EXPECT_EQ(wait_child(p, 60000), 0);
  c.senders.clear();
  c.receivers.clear();
}

}  // namespace

// Issue 39 item 4: a joiner of many senders catches up its own boxes from a peer. Sender 0 picks
// rank 1 (same boxes, holds the version), every sender tells both with its own digests of its
// parts, and rank 3 takes its halves and the other tensors from rank 1, each checked against both
// senders' digests, before the next update: its first commit is that version (no bucket before
// it), its halves of version 1 included, which no later update carries. Every version after it
// commits on it, byte for byte; both senders name the catch-up in its JOINED event. The senders
// publish until they installed it (SenderPlan::until_joined): the test waits on the join's order,
// not on how many versions it takes.
TEST(ManySenders, ElasticAJoinerCatchesUpItsTPBoxesFromAPeerCheckedAgainstEverySender) { tp_joiner_catches_up(false); }

// The same with a source whose copy of embed.weight changed after its commit (rank 1 flips a byte
// of its half after committing version 1, which no later update rewrites): the joiner's catch-up
// is refused, naming the box of embed.weight, the source and the senders' digest; it commits
// nothing, and the group goes on with ranks 1 and 2.
TEST(ManySenders, ElasticACatchUpFromAPeerWhoseBoxChangedIsRefusedNamingIt) { tp_joiner_catches_up(true); }
