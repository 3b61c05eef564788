// ownership_plan.cpp — the many-sender plan: checks, coverage, digest, transfers (see the header).
#include "planner/ownership_plan.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "common/checksum.h"
#include "common/error.h"
#include "common/names.h"

namespace wsync {
namespace {

// The gap search looks at the cells that the boxes' edges cut a tensor into; past this many it
// names the number of unowned elements instead of a range of them.
constexpr uint64_t kMaxGapCells = 1ull << 20;

std::string shape_str(int32_t ndim, const int64_t* shape) {
  std::string s = "[";
  for (int32_t i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string what_of(int32_t dtype, int32_t ndim, const int64_t* shape) {
  return std::string(wsync_dtype_name(dtype)) + " " + shape_str(ndim, shape);
}

bool same_tensor(const TensorPlan& t, const OwnedTensor& o) {
  if (t.dtype != o.dtype || t.ndim != o.ndim) return false;
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] != o.shape[i]) return false;
  return true;
}

wsync_status_t check_one(uint32_t rank, const OwnedTensor& t) {
  std::string why = tensor_name_problem(t.name.c_str(), t.name.size());
  if (!why.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u: tensor '%s': %s", rank,
                printable_name(t.name.c_str(), t.name.size()).c_str(), why.c_str());
  if (wsync_dtype_size(t.dtype) == 0)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u: tensor '%s' has dtype %d, which is not a wsync dtype", rank,
                t.name.c_str(), t.dtype);
  if (t.ndim < 0 || t.ndim > WSYNC_MAX_NDIM)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u: tensor '%s' has %d dimensions (0..%d)", rank, t.name.c_str(),
                t.ndim, WSYNC_MAX_NDIM);
  int64_t elems = 1, bytes = 0;
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0 || __builtin_mul_overflow(elems, t.shape[i], &elems))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u: tensor '%s' has shape %s", rank, t.name.c_str(),
                  shape_str(t.ndim, t.shape).c_str());
  if (__builtin_mul_overflow(elems, static_cast<int64_t>(wsync_dtype_size(t.dtype)), &bytes))
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u: tensor '%s' %s has more bytes than an int64 counts", rank,
                t.name.c_str(), shape_str(t.ndim, t.shape).c_str());
  if (!box_within(t.box, t.ndim, t.shape, &why))
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u: the box %s it owns of tensor '%s' %s %s", rank,
                box_str(t.box).c_str(), t.name.c_str(), shape_str(t.ndim, t.shape).c_str(), why.c_str());
  return WSYNC_OK;
}

// Senders by rank, each checked on its own: distinct ranks, names unique within a sender.
wsync_status_t check_senders(const std::vector<SenderRecord>& senders, std::vector<const SenderRecord*>* by_rank) {
  by_rank->clear();
  for (const auto& s : senders) by_rank->push_back(&s);
  std::sort(by_rank->begin(), by_rank->end(), [](const SenderRecord* a, const SenderRecord* b) { return a->rank < b->rank; });
  for (size_t i = 1; i < by_rank->size(); ++i)
    if ((*by_rank)[i]->rank == (*by_rank)[i - 1]->rank)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "two records come from sender %u", (*by_rank)[i]->rank);
  for (const SenderRecord* s : *by_rank) {
    std::set<std::string> names;
    for (const auto& t : s->tensors) {
      wsync_status_t st = check_one(s->rank, t);
      if (st != WSYNC_OK) return st;
      if (!names.insert(t.name).second)
        return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u publishes tensor '%s' twice", s->rank, t.name.c_str());
    }
  }
  return WSYNC_OK;
}

struct Held {
  uint32_t sender;
  Box box;
  bool replica;
};

// Replica copies of one box collapse to the lowest sender's; any other overlap is refused.
wsync_status_t dedupe_and_check_overlaps(const TensorPlan& t, const std::vector<Held>& held, std::vector<Held>* kept) {
  kept->clear();
  for (const Held& h : held) {
    int64_t n = 0;
    if (box_elements(h.box, &n) && n == 0) continue;  // an empty shard (torch.chunk's padding) owns nothing
    bool dup = false;
    for (const Held& k : *kept) {
      Box common;
      if (!box_intersect(k.box, h.box, &common)) continue;
      if (k.replica && h.replica && box_equal(k.box, h.box)) {
        dup = true;
        break;
      }
      return fail(WSYNC_ERR_INVALID_ARGUMENT,
                  "tensor '%s' %s: senders %u and %u both own %s (sender %u owns %s%s, sender %u %s%s); a box held "
                  "by several senders must be the same box, marked replica on each",
                  t.name.c_str(), what_of(t.dtype, t.ndim, t.shape).c_str(), k.sender, h.sender, box_str(common).c_str(),
                  k.sender, box_str(k.box).c_str(), k.replica ? " as a replica" : "", h.sender, box_str(h.box).c_str(),
                  h.replica ? " as a replica" : "");
    }
    if (!dup) kept->push_back(h);
  }
  return WSYNC_OK;
}

bool covered(const std::vector<Held>& kept, int32_t ndim, const int64_t* point) {
  for (const Held& h : kept) {
    bool in = true;
    for (int32_t i = 0; i < ndim && in; ++i) in = point[i] >= h.box.offset[i] && point[i] < h.box.offset[i] + h.box.extent[i];
    if (in) return true;
  }
  return false;
}

// A range no sender owns, for the message: a cell between the boxes' edges that none covers.
std::string gap_of(const TensorPlan& t, const std::vector<Held>& kept, int64_t missing) {
  std::vector<int64_t> edges[WSYNC_MAX_NDIM];
  uint64_t cells = 1;
  for (int32_t i = 0; i < t.ndim; ++i) {
    edges[i] = {0, t.shape[i]};
    for (const Held& h : kept) {
      edges[i].push_back(h.box.offset[i]);
      edges[i].push_back(h.box.offset[i] + h.box.extent[i]);
    }
    std::sort(edges[i].begin(), edges[i].end());
    edges[i].erase(std::unique(edges[i].begin(), edges[i].end()), edges[i].end());
    cells *= edges[i].size() - 1;
    if (cells > kMaxGapCells) return std::to_string(missing) + " elements";
  }
  size_t idx[WSYNC_MAX_NDIM] = {0};
  for (uint64_t c = 0; c < cells; ++c) {
    int64_t corner[WSYNC_MAX_NDIM] = {0};
    Box cell;
    cell.ndim = t.ndim;
    for (int32_t i = 0; i < t.ndim; ++i) {
      corner[i] = edges[i][idx[i]];
      cell.offset[i] = corner[i];
      cell.extent[i] = edges[i][idx[i] + 1] - corner[i];
    }
    if (!covered(kept, t.ndim, corner)) return box_str(cell) + " (" + std::to_string(missing) + " elements in all)";
    for (int32_t i = t.ndim - 1; i >= 0; --i) {
      if (++idx[i] < edges[i].size() - 1) break;
      idx[i] = 0;
    }
  }
  return std::to_string(missing) + " elements";
}

bool box_before(const Box& a, const Box& b) {
  for (int32_t i = 0; i < a.ndim; ++i)
    if (a.offset[i] != b.offset[i]) return a.offset[i] < b.offset[i];
  return false;
}

void put_u64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), sizeof v); }

// A record's ndim is not checked yet when it is encoded: the loops never go past the arrays.
int32_t clamp_ndim(int32_t n) { return n < 0 ? 0 : (n > WSYNC_MAX_NDIM ? WSYNC_MAX_NDIM : n); }

void put_box(std::string* s, const Box& b) {
  put_u64(s, static_cast<uint64_t>(b.ndim));
  for (int32_t i = 0; i < clamp_ndim(b.ndim); ++i) {
    put_u64(s, static_cast<uint64_t>(b.offset[i]));
    put_u64(s, static_cast<uint64_t>(b.extent[i]));
  }
}

void put_tensor_head(std::string* s, const std::string& name, int32_t dtype, int32_t ndim, const int64_t* shape) {
  put_u64(s, name.size());
  s->append(name);
  put_u64(s, static_cast<uint64_t>(dtype));
  put_u64(s, static_cast<uint64_t>(ndim));
  for (int32_t i = 0; i < clamp_ndim(ndim); ++i) put_u64(s, static_cast<uint64_t>(shape[i]));
}

uint64_t digest_of(const OwnershipPlan& p) {
  std::string s = "wsync-ownership-plan-1";
  for (const auto& t : p.tensors) {
    put_tensor_head(&s, t.name, t.dtype, t.ndim, t.shape);
    put_u64(&s, t.owners.size());
    for (const auto& o : t.owners) {
      put_u64(&s, o.sender);
      put_box(&s, o.box);
    }
  }
  return checksum64(s.data(), s.size());
}

std::string encode_records(const std::vector<SenderRecord>& senders) {
  std::string s;
  for (const auto& r : senders) {
    put_u64(&s, r.rank);
    put_u64(&s, r.tensors.size());
    for (const auto& t : r.tensors) {
      put_tensor_head(&s, t.name, t.dtype, t.ndim, t.shape);
      put_box(&s, t.box);
      put_u64(&s, t.replica ? 1 : 0);
    }
  }
  return s;
}

}  // namespace

const TensorPlan* OwnershipPlan::find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const TensorPlan& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

wsync_status_t plan_ownership(const std::vector<SenderRecord>& senders, OwnershipPlan* out) {
  out->tensors.clear();
  out->digest = 0;
  std::vector<const SenderRecord*> by_rank;
  wsync_status_t st = check_senders(senders, &by_rank);
  if (st != WSYNC_OK) return st;
  // Every tensor as its first (lowest) sender describes it; the others must agree.
  std::map<std::string, TensorPlan> tensors;
  std::map<std::string, uint32_t> first;
  std::map<std::string, std::vector<Held>> held;
  for (const SenderRecord* s : by_rank)
    for (const auto& o : s->tensors) {
      auto it = tensors.find(o.name);
      if (it == tensors.end()) {
        TensorPlan t;
        t.name = o.name;
        t.dtype = o.dtype;
        t.ndim = o.ndim;
        std::memcpy(t.shape, o.shape, sizeof t.shape);
        tensors.emplace(o.name, t);
        first[o.name] = s->rank;
      } else if (!same_tensor(it->second, o)) {
        return fail(WSYNC_ERR_INVALID_ARGUMENT,
                    "tensor '%s': sender %u publishes it as %s, sender %u as %s; senders must agree on names, "
                    "dtypes and full shapes",
                    o.name.c_str(), first[o.name], what_of(it->second.dtype, it->second.ndim, it->second.shape).c_str(),
                    s->rank, what_of(o.dtype, o.ndim, o.shape).c_str());
      }
      held[o.name].push_back(Held{s->rank, o.box, o.replica});
    }
  OwnershipPlan plan;
  for (auto& kv : tensors) {
    TensorPlan& t = kv.second;
    std::vector<Held> kept;
    if ((st = dedupe_and_check_overlaps(t, held[t.name], &kept)) != WSYNC_OK) return st;
    int64_t total = 0, owned = 0;
    box_elements(full_box(t.ndim, t.shape), &total);  // checked in check_one
    for (const Held& h : kept) {
      int64_t n = 0;
      box_elements(h.box, &n);  // inside the tensor: no overflow, and disjoint: the sum <= total
      owned += n;
    }
    if (owned != total)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' %s: %s owned by no sender", t.name.c_str(),
                  what_of(t.dtype, t.ndim, t.shape).c_str(), gap_of(t, kept, total - owned).c_str());
    // An empty tensor (a 0 in its shape) still has to reach every receiver, as an empty tensor:
    // the lowest sender naming it owns it.
    if (total == 0) kept = {Held{held[t.name].front().sender, full_box(t.ndim, t.shape), false}};
    std::sort(kept.begin(), kept.end(), [](const Held& a, const Held& b) { return box_before(a.box, b.box); });
    for (const Held& h : kept) t.owners.push_back(Owner{h.sender, h.box});
    plan.tensors.push_back(std::move(t));
  }
  plan.digest = digest_of(plan);
  *out = std::move(plan);
  return WSYNC_OK;
}

wsync_status_t plan_transfers(const OwnershipPlan& plan, const std::vector<Need>& needs, std::vector<Transfer>* out) {
  out->clear();
  std::set<std::string> asked;
  std::vector<Transfer> all;
  for (uint32_t i = 0; i < needs.size(); ++i) {
    const Need& n = needs[i];
    const TensorPlan* t = plan.find(n.name);
    if (t == nullptr)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "a receiver asks for tensor '%s', which no sender publishes",
                  printable_name(n.name.c_str(), n.name.size()).c_str());
    if (!asked.insert(n.name).second)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "a receiver asks for tensor '%s' twice", n.name.c_str());
    const Box want = n.full ? full_box(t->ndim, t->shape) : n.box;
    std::string why;
    if (!box_within(want, t->ndim, t->shape, &why))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "a receiver asks for %s of tensor '%s' %s, which %s",
                  box_str(want).c_str(), n.name.c_str(), shape_str(t->ndim, t->shape).c_str(), why.c_str());
    const uint32_t ti = static_cast<uint32_t>(t - plan.tensors.data());
    int64_t elements = 0;
    box_elements(full_box(t->ndim, t->shape), &elements);
    for (const Owner& o : t->owners) {
      Box common;
      if (box_intersect(o.box, want, &common)) all.push_back(Transfer{o.sender, ti, i, common});
    }
    if (elements == 0 && !t->owners.empty()) all.push_back(Transfer{t->owners[0].sender, ti, i, want});
  }
  std::stable_sort(all.begin(), all.end(), [](const Transfer& a, const Transfer& b) { return a.sender < b.sender; });
  *out = std::move(all);
  return WSYNC_OK;
}

wsync_status_t OwnershipPlanner::plan(const std::vector<SenderRecord>& senders, const OwnershipPlan** out) {
  std::string input = encode_records(senders);
  if (!have_ || input != last_input_) {
    OwnershipPlan p;
    wsync_status_t st = plan_ownership(senders, &p);
    if (st != WSYNC_OK) return st;
    plan_ = std::move(p);
    last_input_ = std::move(input);
    have_ = true;
    ++computed_;
  }
  *out = &plan_;
  return WSYNC_OK;
}

}  // namespace wsync
