// Many senders (docs/ARCHITECTURE.md, "Many senders"): a trainer rank that is one of M senders.
// Each sender keeps its own store, control listener and transport world for its receivers (the
// single-sender group, unchanged); what they share goes through sender 0's store:
//
//   wsync/senders/<k>                    sender k's own store address (receivers join it there)
//   wsync/<group>/plan/<slot>/<k>        sender k's record of a batch (ownership_record.h)
//   wsync/<group>/plan_digest/<slot>/<k> the digest of the plan sender k computed from all records
//
// A batch's records go in slot (batch number mod 4) and carry the batch number: a sender that
// writes batch s has seen every record of batch s-1, so every sender is done with s-4's slot.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

#include <xxhash.h>

#include "common/error.h"
#include "common/socket.h"
#include "group/group_catchup.h"
#include "group/group_internal.h"
#include "group/group_mailbox.h"
#include "group/group_members.h"
#include "planner/ownership_record.h"
#include "store/host_port.h"

namespace wsync {
namespace {

constexpr uint64_t kSlots = 4;

std::string slot_key(const wsync_group_t* g, const char* what, uint64_t seq, uint32_t k) {
  return "wsync/" + g->cfg.group_name + "/" + what + "/" + std::to_string(seq % kSlots) + "/" + std::to_string(k);
}

std::string sender_name(const wsync_group_t* g, uint32_t k) {
  std::string s = "sender " + std::to_string(k);
  if (k < g->senders.addrs.size() && !g->senders.addrs[k].empty()) s += " (store at " + g->senders.addrs[k] + ")";
  return s;
}

// This sender's record of a batch: per tensor its full shape and box (the whole tensor unless the
// descriptor is a slice).
wsync_status_t own_record(wsync_group_t* g, const Batch& b, SenderRecord* r) {
  r->rank = g->cfg.sender_rank;
  r->tensors.resize(b.tensors.size());
  for (size_t i = 0; i < b.tensors.size(); ++i) {
    const wsync_tensor_t& t = b.tensors[i];
    OwnedTensor& o = r->tensors[i];
    o.name = b.names[i];
    o.dtype = t.dtype;
    o.ndim = t.ndim;
    o.replica = (t.flags & WSYNC_TENSOR_REPLICA) != 0;
    if (t.flags & ~(WSYNC_TENSOR_SLICE | WSYNC_TENSOR_REPLICA))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' has unknown flags 0x%x", t.name, t.flags);
    if (t.flags & WSYNC_TENSOR_SLICE) {
      std::memcpy(o.shape, t.full_shape, sizeof o.shape);
      o.box.ndim = t.ndim;
      for (int d = 0; d < t.ndim; ++d) {
        o.box.offset[d] = t.box_offset[d];
        o.box.extent[d] = t.shape[d];
      }
    } else {
      std::memcpy(o.shape, t.shape, sizeof o.shape);
      o.box = full_box(t.ndim, t.shape);
    }
  }
  return WSYNC_OK;
}

// A knock at sender k's own store (not sender 0's, whose store this sender reads anyway): did it
// answer (connected), refuse (nothing listens: the process died), or neither (no address yet, a
// timeout: a hang or a partition, which the timeout bounds)?
enum class Knock { kAnswered, kRefused, kUnknown };

Knock knock_store(wsync_group_t* g, uint32_t k) {
  std::string host;
  uint16_t port = 0;
  if (k == 0 || g->senders.addrs[k].empty() || parse_host_port(g->senders.addrs[k], &host, &port) != WSYNC_OK) {
    clear_error();
    return Knock::kUnknown;
  }
  int fd = -1;
  std::string why;
  const wsync_status_t st = tcp_connect(host, port, deadline_after(500), &fd, &why);
  if (fd >= 0) ::close(fd);
  clear_error();
  if (st == WSYNC_OK) return Knock::kAnswered;
  return st == WSYNC_ERR_IO && why.find("refused") != std::string::npos ? Knock::kRefused : Knock::kUnknown;
}

// While this sender waits for sender k's word on batch `seq`: each second, sender k's store is
// knocked at, once a first knock was answered (a store this host cannot reach at all, a firewall's
// refusal included, is never taken for a death); PEER_FAILED naming it when it refuses.
wsync_status_t knock_at(wsync_group_t* g, uint32_t k, uint64_t seq, int64_t* knock) {
  if (now_ms() < *knock || k >= g->senders.knock_armed.size() || !g->senders.knock_armed[k]) return WSYNC_OK;
  *knock = deadline_after(1000);
  if (knock_store(g, k) != Knock::kRefused) return WSYNC_OK;
  return fail(WSYNC_ERR_PEER_FAILED, "%s is gone: its store refuses connections (the process died?) while this sender "
              "waited for its part of batch %llu", sender_name(g, k).c_str(), static_cast<unsigned long long>(seq));
}

// Sender k's record of batch `seq`, waiting for it until `deadline` (a slot holding an older
// batch's record is polled until the new one replaces it). Each second without it, sender k's
// store is knocked at: a sender that died fails the batch at once, naming it.
wsync_status_t read_record(wsync_group_t* g, uint64_t seq, uint32_t k, int64_t deadline, int64_t timeout_ms,
                           SenderRecord* out) {
  const std::string key = slot_key(g, "plan", seq, k);
  int64_t knock = deadline_after(1000);
  for (;;) {
    std::vector<uint8_t> v;
    wsync_status_t st = g->senders.client->get(key, &v, std::max<int64_t>(std::min<int64_t>(remaining_ms(deadline), 1000), 1));
    uint64_t got = 0;
    if (st == WSYNC_OK) {
      if ((st = decode_sender_record(v.data(), v.size(), out, &got)) != WSYNC_OK)
        return fail_msg(st, "the record of " + sender_name(g, k) + " for batch " + std::to_string(seq) + ": " +
                                last_error());
      if (got == seq && out->rank == k) return WSYNC_OK;
      if (got > seq || out->rank != k)
        return fail(WSYNC_ERR_PROTOCOL, "%s published batch %llu as rank %u where batch %llu was expected: the senders "
                    "disagree on how many batches this update has", sender_name(g, k).c_str(),
                    static_cast<unsigned long long>(got), out->rank, static_cast<unsigned long long>(seq));
    } else if (st != WSYNC_ERR_TIMEOUT) {
      return fail_msg(st, "reading the record of " + sender_name(g, k) + " from sender 0's store: " + last_error());
    }
    if (g->pipe.aborted.load()) return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted", g->cfg.group_name.c_str());
    if ((st = knock_at(g, k, seq, &knock)) != WSYNC_OK) return st;
    if (now_ms() >= deadline)
      return fail(WSYNC_ERR_PEER_FAILED, "%s did not publish its part of batch %llu within %lld ms (it died, hangs, is "
                  "cut off, or sends fewer batches)", sender_name(g, k).c_str(), static_cast<unsigned long long>(seq),
                  static_cast<long long>(timeout_ms));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Every sender computed the same digest from the same records.
wsync_status_t agree_digest(wsync_group_t* g, uint64_t seq, uint64_t digest, int64_t deadline, int64_t timeout_ms) {
  uint8_t mine[16];
  std::memcpy(mine, &seq, 8);
  std::memcpy(mine + 8, &digest, 8);
  wsync_status_t st = g->senders.client->set(slot_key(g, "plan_digest", seq, g->cfg.sender_rank), mine, sizeof mine);
  if (st != WSYNC_OK) return fail_msg(st, "publishing this sender's plan digest in sender 0's store: " + last_error());
  for (uint32_t k = 0; k < g->shape.num_senders; ++k) {
    if (k == g->cfg.sender_rank) continue;
    int64_t knock = deadline_after(1000);
    for (;;) {
      std::vector<uint8_t> v;
      st = g->senders.client->get(slot_key(g, "plan_digest", seq, k), &v,
                                  std::max<int64_t>(std::min<int64_t>(remaining_ms(deadline), 1000), 1));
      uint64_t got_seq = 0, got = 0;
      if (st == WSYNC_OK && v.size() == 16) {
        std::memcpy(&got_seq, v.data(), 8);
        std::memcpy(&got, v.data() + 8, 8);
        if (got_seq == seq) {
          if (got != digest)
            return fail(WSYNC_ERR_PROTOCOL, "the ownership plan of batch %llu, or the receivers' needs it read, "
                        "differs between sender %u (digest "
                        "%016llx) and %s (digest %016llx); nothing was sent", static_cast<unsigned long long>(seq),
                        g->cfg.sender_rank, static_cast<unsigned long long>(digest), sender_name(g, k).c_str(),
                        static_cast<unsigned long long>(got));
          break;
        }
      } else if (st != WSYNC_OK && st != WSYNC_ERR_TIMEOUT) {
        return fail_msg(st, "reading the plan digest of " + sender_name(g, k) + " from sender 0's store: " +
                                last_error());
      }
      if (g->pipe.aborted.load()) return fail(WSYNC_ERR_ABORTED, "group '%s' was aborted", g->cfg.group_name.c_str());
      if ((st = knock_at(g, k, seq, &knock)) != WSYNC_OK) return st;
      if (now_ms() >= deadline)
        return fail(WSYNC_ERR_PEER_FAILED, "%s did not confirm the plan of batch %llu within %lld ms",
                    sender_name(g, k).c_str(), static_cast<unsigned long long>(seq), static_cast<long long>(timeout_ms));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return WSYNC_OK;
}

// How long this sender waits for the others' word on a batch. In an elastic group another sender
// may be busy removing a member that went silent (a READY or an ACK not answered costs it timeout_ms,
// a COMMITTED timeout_ms + kSendersGraceMs, and only the senders it did not answer), so the others
// are waited for that much longer (found by the composed soak: a sender gave up on a live one that
// was removing a hung engine, between updates and in the middle of one). A sender that dies is
// named within a second (its store refuses the knock); one that hangs or is cut off, by the
// receivers within their timeout_ms (they tell every sender: SENDER_LOST).
int64_t senders_wait_ms(bool elastic, int64_t timeout_ms) {
  if (!elastic || timeout_ms >= (INT64_MAX - kSendersGraceMs) / 2) return timeout_ms;  // (a wait "forever" stays one)
  return 2 * timeout_ms + kSendersGraceMs;
}

// Many senders, elastic: at an update's first batch each sender says, before its record, its
// members and its joiners whose join is done (the slot "members": u64 seq | u32 n | n x u32 rank |
// u32 m | m x u32 rank). Every sender then reads the same words and agrees: the update's needs are
// read for every rank any sender has as a member or installs now, and the joiners that every sender
// has are installed by all of them before the batch (Batch::admit).
std::vector<uint8_t> encode_members(uint64_t seq, const std::vector<uint32_t>& members, const std::vector<uint32_t>& ready) {
  std::vector<uint8_t> out(8);
  std::memcpy(out.data(), &seq, 8);
  for (const std::vector<uint32_t>* list : {&members, &ready}) {
    const uint32_t n = static_cast<uint32_t>(list->size());
    out.insert(out.end(), reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 4);
    for (uint32_t r : *list) out.insert(out.end(), reinterpret_cast<const uint8_t*>(&r), reinterpret_cast<const uint8_t*>(&r) + 4);
  }
  return out;
}

wsync_status_t decode_members(const wsync_group_t* g, const std::vector<uint8_t>& v, uint64_t* seq,
                              std::vector<uint32_t>* members, std::vector<uint32_t>* ready) {
  size_t at = 8;
  if (v.size() < 8) return fail(WSYNC_ERR_PROTOCOL, "a members word of %zu bytes", v.size());
  std::memcpy(seq, v.data(), 8);
  for (std::vector<uint32_t>* list : {members, ready}) {
    uint32_t n = 0;
    if (v.size() - at < 4) return fail(WSYNC_ERR_PROTOCOL, "a members word cut short at byte %zu", at);
    std::memcpy(&n, v.data() + at, 4);
    at += 4;
    if (n > g->shape.num_receivers || v.size() - at < 4ull * n)
      return fail(WSYNC_ERR_PROTOCOL, "a members word lists %u ranks in %zu bytes (the group has %u receivers)", n,
                  v.size() - at, g->shape.num_receivers);
    list->resize(n);
    for (uint32_t i = 0; i < n; ++i, at += 4) {
      std::memcpy(&(*list)[i], v.data() + at, 4);
      if ((*list)[i] < 1 || (*list)[i] > g->shape.num_receivers)
        return fail(WSYNC_ERR_PROTOCOL, "a members word names rank %u (the group has receivers 1..%u)", (*list)[i],
                    g->shape.num_receivers);
    }
    std::sort(list->begin(), list->end());
  }
  return at == v.size() ? WSYNC_OK : fail(WSYNC_ERR_PROTOCOL, "a members word has %zu bytes after its lists", v.size() - at);
}

wsync_status_t say_members(wsync_group_t* g, uint64_t seq) {
  const std::vector<uint8_t> word = encode_members(seq, members_ranks(g), admission_ready(g));
  wsync_status_t st = g->senders.client->set(slot_key(g, "members", seq, g->cfg.sender_rank), word.data(), word.size());
  return st == WSYNC_OK ? st : fail_msg(st, "publishing this sender's members in sender 0's store: " + last_error());
}

// Every sender's members word of batch `seq` (each was set before its record, which was read).
wsync_status_t agree_members(wsync_group_t* g, uint64_t seq, int64_t deadline, Batch* b) {
  std::vector<uint32_t> ranks, admit;
  for (uint32_t k = 0; k < g->shape.num_senders; ++k) {
    std::vector<uint8_t> v;
    std::vector<uint32_t> members, ready;
    uint64_t got = 0;
    wsync_status_t st = g->senders.client->get(slot_key(g, "members", seq, k), &v, std::max<int64_t>(remaining_ms(deadline), 1));
    if (st == WSYNC_OK) st = decode_members(g, v, &got, &members, &ready);
    if (st == WSYNC_OK && got != seq)
      st = fail(WSYNC_ERR_PROTOCOL, "it holds batch %llu's, not batch %llu's", static_cast<unsigned long long>(got),
                static_cast<unsigned long long>(seq));
    if (st != WSYNC_OK)
      return fail_msg(st, "the members of " + sender_name(g, k) + " for batch " + std::to_string(seq) + ": " + last_error());
    ranks.insert(ranks.end(), members.begin(), members.end());
    if (k == 0) {
      admit = ready;
    } else {
      std::vector<uint32_t> both;
      std::set_intersection(admit.begin(), admit.end(), ready.begin(), ready.end(), std::back_inserter(both));
      admit.swap(both);
    }
  }
  ranks.insert(ranks.end(), admit.begin(), admit.end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  g->senders.update_ranks = std::move(ranks);
  b->admit = std::move(admit);
  return WSYNC_OK;
}

using NeedMap = std::unordered_map<std::string, Box>;  // tensor -> the box a receiver asked for

// Every receiver's needs, from sender 0's store (a receiver says them when it registers, or at its
// first wsync_receiver_next): the slices it asked for; every other tensor it takes whole.
wsync_status_t read_needs(wsync_group_t* g, int64_t deadline, int64_t timeout_ms, std::vector<NeedMap>* out,
                          uint64_t* digest) {
  out->assign(g->shape.num_receivers, NeedMap());
  *digest = 0;
  std::vector<uint32_t> all;  // (a fixed group: every rank; elastic: the update's, agreed)
  const std::vector<uint32_t>* ranks = &g->senders.update_ranks;
  if (!g->cfg.elastic) {
    for (uint32_t r = 1; r <= g->shape.num_receivers; ++r) all.push_back(r);
    ranks = &all;
  }
  for (uint32_t r : *ranks) {
    std::vector<uint8_t> v;
    wsync_status_t st = g->senders.client->get(needs_key(g->cfg.group_name, r), &v, std::max<int64_t>(remaining_ms(deadline), 1));
    if (st == WSYNC_ERR_TIMEOUT)
      return fail(WSYNC_ERR_PEER_FAILED, "receiver rank %u did not say what it needs within %lld ms (a receiver says it "
                  "when it registers its buffers or first calls wsync_receiver_next)", r, static_cast<long long>(timeout_ms));
    if (st != WSYNC_OK) return st;
    uint32_t rank = 0;
    uint64_t version = 0;
    std::vector<Need> needs;
    if ((st = decode_needs(v.data(), v.size(), &rank, &version, &needs)) != WSYNC_OK || rank != r)
      return fail(WSYNC_ERR_PROTOCOL, "the needs of receiver rank %u in sender 0's store are not its own: %s", r,
                  st != WSYNC_OK ? last_error().c_str() : ("they name rank " + std::to_string(rank)).c_str());
    for (const Need& n : needs)
      if (!n.full) (*out)[r - 1][n.name] = n.box;
    // What this sender read, in rank order: the needs, not the record's version (a receiver that
    // registers whole buffers mid-update says the same needs again under a newer version).
    const std::vector<uint8_t> canon = encode_needs(rank, 0, needs);
    *digest = XXH3_64bits_withSeed(canon.data(), canon.size(), *digest);
  }
  return WSYNC_OK;
}

bool same_needs(const NeedMap& a, const NeedMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& kv : a) {
    auto it = b.find(kv.first);
    if (it == b.end() || !box_equal(kv.second, it->second)) return false;
  }
  return true;
}

// The catch-ups of an update's joiners (group_catchup.cpp), at its first batch: sender 0 picks
// them, from the members that hold the committed version and need the same boxes, and says them in
// its store (slot "catchup") before its plan digest; the others read them once they read that
// digest (agree_digest), so the slot holds this batch's word. Every sender then tells both of each
// pair at this batch.
wsync_status_t say_catchups(wsync_group_t* g, uint64_t seq, const std::vector<NeedMap>& needs, Batch* b) {
  const auto same = [&](uint32_t x, uint32_t y) { return same_needs(needs[x - 1], needs[y - 1]); };
  b->catchup = catchup_pick(members_holds(g), mailbox_committed_version(g), seq, b->admit, g->senders.update_ranks,
                            same);
  const std::vector<uint8_t> word = encode_picks(b->catchup);
  wsync_status_t st = g->senders.client->set(slot_key(g, "catchup", seq, 0), word.data(), word.size());
  return st == WSYNC_OK ? st : fail_msg(st, "publishing the catch-up picks in this sender's store: " + last_error());
}

wsync_status_t read_catchups(wsync_group_t* g, uint64_t seq, int64_t deadline, Batch* b) {
  std::vector<uint8_t> v;
  wsync_status_t st = g->senders.client->get(slot_key(g, "catchup", seq, 0), &v, std::max<int64_t>(remaining_ms(deadline), 1));
  if (st == WSYNC_ERR_TIMEOUT)  // (the batch's record went out: the senders are out of step now)
    st = fail(WSYNC_ERR_PEER_FAILED, "they were not in its store within the senders' wait");
  if (st == WSYNC_OK) st = decode_picks(g->shape.num_receivers, v, b->admit, &b->catchup);
  if (st == WSYNC_OK && b->catchup.seq != seq)
    st = fail(WSYNC_ERR_PROTOCOL, "they are batch %llu's", static_cast<unsigned long long>(b->catchup.seq));
  if (st != WSYNC_OK)
    return fail_msg(st, "the catch-up picks of " + sender_name(g, 0) + " for batch " + std::to_string(seq) + ": " +
                            last_error());
  return WSYNC_OK;
}

// One box this sender sends: of tensor `tensor` (an index into the batch as the caller gave it).
struct Part {
  size_t tensor = 0;
  Box box;
};

// The descriptor of `part` of the caller's slice `t` (whose box is `owned`): a pointer into it when
// the part is one run of its bytes, else a copy packed into `b->packed`.
wsync_status_t cut_part(const wsync_tensor_t& t, const Box& owned, const Box& part, Batch* b, wsync_tensor_t* out) {
  *out = t;
  if (box_equal(part, owned)) return WSYNC_OK;
  std::vector<ByteRun> runs;
  wsync_status_t st = box_runs(part, owned, wsync_dtype_size(t.dtype), &runs);
  if (st != WSYNC_OK) return st;
  for (int d = 0; d < t.ndim; ++d) out->shape[d] = part.extent[d];
  uint64_t n = 0;
  for (const ByteRun& r : runs) n += r.length;
  out->nbytes = n;
  const uint8_t* base = static_cast<const uint8_t*>(t.data);
  if (runs.size() == 1) {
    out->data = const_cast<uint8_t*>(base + runs[0].offset);
    return WSYNC_OK;
  }
  if (t.device_type == WSYNC_DEVICE_CUDA)
    return fail(WSYNC_ERR_UNSUPPORTED, "tensor '%s': a receiver needs %s of it, which is not one run of this sender's "
                "slice %s; cutting it out of CUDA memory is not supported yet", t.name, box_str(part).c_str(),
                box_str(owned).c_str());
  b->packed.emplace_back(n);
  uint8_t* dst = b->packed.back().data();
  for (const ByteRun& r : runs) {
    std::memcpy(dst, base + r.offset, r.length);
    dst += r.length;
  }
  out->data = b->packed.back().data();
  return WSYNC_OK;
}

// The receivers grouped by what they get from this sender (keyed by its parts): the boxes of the
// `owned` tensors, each cut to what the receiver asked for. *all_whole: every receiver gets every
// box whole.
using NeedGroups = std::map<std::string, std::pair<std::vector<uint32_t>, std::vector<Part>>>;
wsync_status_t group_by_needs(wsync_group_t* g, const SenderRecord& mine, const std::vector<size_t>& owned,
                              const std::vector<NeedMap>& needs, NeedGroups* groups, bool* all_whole) {
  *all_whole = true;
  for (uint32_t r = 1; r <= g->shape.num_receivers; ++r) {
    std::vector<Part> parts;
    std::string key;
    for (size_t i : owned) {
      const OwnedTensor& o = mine.tensors[i];
      Part p{i, o.box};
      auto it = needs[r - 1].find(o.name);
      if (it != needs[r - 1].end()) {
        std::string why;
        if (!box_within(it->second, o.ndim, o.shape, &why))
          return fail(WSYNC_ERR_INVALID_ARGUMENT, "receiver rank %u asks for %s of tensor '%s', which does not fit its "
                      "full shape: %s", r, box_str(it->second).c_str(), o.name.c_str(), why.c_str());
        if (!box_intersect(o.box, it->second, &p.box)) continue;  // nothing of what it needs is ours
        *all_whole &= box_equal(p.box, o.box);
      }
      key += std::to_string(i) + box_str(p.box) + ";";
      parts.push_back(p);
    }
    auto& grp = (*groups)[key];
    grp.first.push_back(r);
    grp.second = std::move(parts);
  }
  return WSYNC_OK;
}

// What each receiver gets from this sender: the boxes the plan gives this sender, each cut to what
// the receiver asked for. Receivers that get the same boxes share a segment (its buckets go to
// them only); when all get all, the batch stays one broadcast.
wsync_status_t split_by_needs(wsync_group_t* g, const OwnershipPlan& plan, const SenderRecord& mine,
                              const std::vector<NeedMap>& needs, Batch* b) {
  std::vector<size_t> owned;  // the tensors of the caller's batch this sender sends
  for (size_t i = 0; i < mine.tensors.size(); ++i) {
    const TensorPlan* tp = plan.find(mine.tensors[i].name);
    bool owner = false;
    for (const Owner& o : tp ? tp->owners : std::vector<Owner>{})
      owner |= o.sender == g->cfg.sender_rank && box_equal(o.box, mine.tensors[i].box);
    if (owner) owned.push_back(i);
  }
  NeedGroups groups;
  bool all_whole = true;
  wsync_status_t st = group_by_needs(g, mine, owned, needs, &groups, &all_whole);
  if (st != WSYNC_OK) return st;
  std::vector<wsync_tensor_t> tensors;
  std::vector<std::string> names;
  std::vector<OwnedTensor> boxes;
  std::vector<Batch::Segment> segments;
  for (auto& kv : groups) {
    Batch::Segment seg;
    seg.begin = tensors.size();
    seg.ranks = kv.second.first;
    for (const Part& p : kv.second.second) {
      wsync_tensor_t t;
      if ((st = cut_part(b->tensors[p.tensor], mine.tensors[p.tensor].box, p.box, b, &t)) != WSYNC_OK) return st;
      tensors.push_back(t);
      names.push_back(b->names[p.tensor]);
      OwnedTensor o = mine.tensors[p.tensor];
      o.box = p.box;
      boxes.push_back(o);
    }
    seg.end = tensors.size();
    segments.push_back(std::move(seg));
  }
  b->tensors = std::move(tensors);
  b->names = std::move(names);
  b->owned = std::move(boxes);
  for (size_t i = 0; i < b->tensors.size(); ++i) b->tensors[i].name = b->names[i].c_str();
  // One segment for every receiver with every box whole: today's broadcast.
  if (all_whole && segments.size() == 1) return WSYNC_OK;
  std::vector<std::vector<uint32_t>> ranks;
  for (const Batch::Segment& seg : segments) ranks.push_back(seg.ranks);
  if ((st = route_fits_segments(g, ranks)) != WSYNC_OK) return st;
  b->segments = std::move(segments);
  return WSYNC_OK;
}

}  // namespace

wsync_status_t senders_check_options(wsync_group_t* g) {
  if (g->cfg.sender_rank >= g->shape.num_senders)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'sender_rank' is %u but the group has %u sender(s) (option "
                "'num_senders'): ranks are 0..%u", g->cfg.sender_rank, g->shape.num_senders, g->shape.num_senders - 1);
  if (g->cfg.sender_rank > 0 && g->cfg.sender0_store.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender rank %u needs option 'sender0_store' (\"host:port\" of sender 0's "
                "store, where the senders agree on each batch)", g->cfg.sender_rank);
  if (g->cfg.sender_rank == 0 && !g->cfg.sender0_store.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'sender0_store' is for senders 1..%u; sender 0 hosts that store "
                "itself (config->store_addr)", g->shape.num_senders - 1);
  if (g->shape.planned && !g->cfg.engines_spec.empty() && !g->cfg.engines_embed_wsync)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option num_senders needs HTTP engines whose workers embed wsync receivers "
                "(option engine_receivers=wsync, e.g. vLLM's wsync backend): unmodified engines receive over the one "
                "transport their adapter drives, from one sender");
  if (g->cfg.sender_rank > 0 && !g->cfg.engines_spec.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u cannot drive HTTP engines (option 'engines'): sender 0 alone "
                "talks to the engine servers; give sender %u num_receivers, the engines' workers, and their workers "
                "join it through sender 0's store", g->cfg.sender_rank, g->cfg.sender_rank);
  return WSYNC_OK;
}

wsync_status_t senders_open(wsync_group_t* g, const std::string& bind_host, int64_t deadline) {
  if (!g->shape.planned) return WSYNC_OK;
  g->senders.addrs.assign(g->shape.num_senders, "");
  g->senders.addrs[g->cfg.sender_rank] = g->rdv.store_addr;
  if (g->cfg.sender_rank > 0 && (bind_host == "0.0.0.0" || bind_host == "::" || bind_host == "[::]" || bind_host.empty()))
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender %u binds its store to '%s', a wildcard: receivers find a sender at "
                "its store's address, so give config->store_addr an address of this host they can reach",
                g->cfg.sender_rank, bind_host.c_str());
  wsync_status_t st;
  if (g->cfg.sender_rank == 0) {
    g->senders.client.reset();  // sender 0's own client does the work (g->rdv.store_client)
  } else {
    std::string host;
    uint16_t port = 0;
    if ((st = parse_host_port(g->cfg.sender0_store, &host, &port)) != WSYNC_OK) return st;
    if (port == 0)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option 'sender0_store' is '%s'; it needs sender 0's real port",
                  g->cfg.sender0_store.c_str());
    if ((st = TcpStoreClient::connect(host, port, std::max<int64_t>(remaining_ms(deadline), 1), g->rdv.secret.value,
                                      &g->senders.client)) != WSYNC_OK)
      return fail_msg(st, "sender " + std::to_string(g->cfg.sender_rank) + " cannot reach sender 0's store at " +
                              g->cfg.sender0_store + ": " + last_error());
  }
  TcpStoreClient* c = g->senders.client ? g->senders.client.get() : g->rdv.store_client.get();
  if ((st = c->set(sender_key(g->cfg.sender_rank), g->rdv.store_addr.data(), g->rdv.store_addr.size())) != WSYNC_OK) return st;
  WSYNC_LOGI("group '%s': sender %u of %u, its receivers join its store at %s", g->cfg.group_name.c_str(), g->cfg.sender_rank,
             g->shape.num_senders, g->rdv.store_addr.c_str());
  return WSYNC_OK;
}

namespace {

// Before a batch is planned: a group of one sender that does not plan takes no slice, sender 0
// has its second store client, and every descriptor is sound (the record is built from them).
wsync_status_t ready_to_plan(wsync_group_t* g, const Batch& b) {
  if (!g->shape.planned)
    for (const auto& t : b.tensors)
      if (t.flags & WSYNC_TENSOR_SLICE)
        return fail(WSYNC_ERR_INVALID_ARGUMENT, "tensor '%s' is a slice (WSYNC_TENSOR_SLICE) but group '%s' has one "
                    "sender, which must send whole tensors (option num_senders)", t.name, g->cfg.group_name.c_str());
  if (g->senders.client == nullptr && g->cfg.sender_rank == 0) {
    // Sender 0 talks to its own store through a second client: the group's own one is used by the
    // pipeline thread's transport, and a client serves one request at a time.
    std::string host;
    uint16_t port = 0;
    wsync_status_t st = parse_host_port(g->rdv.store_addr, &host, &port);
    if (st == WSYNC_OK) st = TcpStoreClient::connect(host, port, 5000, g->rdv.secret.value, &g->senders.client);
    if (st != WSYNC_OK) return st;
  }
  for (const auto& t : b.tensors) {
    wsync_status_t st = validate_tensor_shape(t.name, t.dtype, t.ndim, t.shape, t.nbytes);
    if (st != WSYNC_OK) return st;
  }
  return WSYNC_OK;
}

// What every sender agreed on for batch `seq`: its plan and needs digest, whether it is an
// update's first batch (`agree`: its members and joiners were agreed too), and the senders' wait.
struct BatchAgreed {
  uint64_t seq = 0, digest = 0;
  bool agree = false;
  int64_t deadline = 0, wait_ms = 0;
};

// The planned batch: the senders compare its digest (plan and needs), agree its joiners'
// catch-ups (an update's first batch), chain the digest for END_UPDATE (receivers compare it across
// senders), and then sender 0 builds the engines' UPDATE and each sender cuts its parts.
wsync_status_t finish_batch(wsync_group_t* g, const BatchAgreed& a, const OwnershipPlan& plan, const SenderRecord& mine,
                            const std::vector<NeedMap>& needs, Batch* b) {
  const bool picks = a.agree && !b->admit.empty();  // (sender 0 writes the picks only then)
  wsync_status_t st = picks && g->cfg.sender_rank == 0 ? say_catchups(g, a.seq, needs, b) : WSYNC_OK;
  if (st == WSYNC_OK) st = agree_digest(g, a.seq, a.digest, a.deadline, a.wait_ms);
  if (st == WSYNC_OK && picks && g->cfg.sender_rank != 0) st = read_catchups(g, a.seq, a.deadline, b);
  if (st != WSYNC_OK) return st;
  g->senders.update_plan_digest = XXH3_64bits_withSeed(&a.digest, sizeof a.digest, g->senders.update_plan_digest);
  for (const TensorPlan& t : plan.tensors) b->planned.push_back(t.name);  // (for its digests: group_members.cpp)
  if (g->shape.http_engines) announce_build(plan, b);  // sender 0: the engines' UPDATE of this batch
  return split_by_needs(g, plan, mine, needs, b);
}

}  // namespace

wsync_status_t senders_plan_batch(wsync_group_t* g, Batch* b, int64_t timeout_ms, bool* published) {
  *published = false;
  if (!g->shape.planned) {
    bool slices = false;
    for (const auto& t : b->tensors) slices |= (t.flags & WSYNC_TENSOR_SLICE) != 0;
    if (!slices) return WSYNC_OK;
  }
  wsync_status_t st = ready_to_plan(g, *b);
  if (st != WSYNC_OK) return st;
  SenderRecord mine;
  if ((st = own_record(g, *b, &mine)) != WSYNC_OK) return st;
  *published = true;  // from here on a failure leaves the senders out of step: it breaks the group
  const uint64_t seq = ++g->senders.plans_agreed;
  const bool agree = g->cfg.elastic && g->senders.batch_in_update == 0;  // (an update's members: at its first batch)
  if (agree && (st = say_members(g, seq)) != WSYNC_OK) return st;
  const std::vector<uint8_t> rec = encode_sender_record(mine, seq);
  if ((st = g->senders.client->set(slot_key(g, "plan", seq, g->cfg.sender_rank), rec.data(), rec.size())) != WSYNC_OK)
    return fail_msg(st, "publishing this sender's record in sender 0's store: " + last_error());
  const int64_t wait_ms = senders_wait_ms(g->cfg.elastic, timeout_ms);
  const int64_t deadline = deadline_after(wait_ms);
  std::vector<SenderRecord> all(g->shape.num_senders);
  for (uint32_t k = 0; k < g->shape.num_senders; ++k) {
    if (k == g->cfg.sender_rank) {
      all[k] = mine;
      continue;
    }
    if (g->senders.addrs[k].empty()) {  // for messages (where sender k is) and knocks
      std::vector<uint8_t> v;
      if (g->senders.client->get(sender_key(k), &v, 1) == WSYNC_OK) g->senders.addrs[k].assign(v.begin(), v.end());
      clear_error();
      g->senders.knock_armed.resize(g->shape.num_senders, 0);
      g->senders.knock_armed[k] = knock_store(g, k) == Knock::kAnswered;
    }
    if ((st = read_record(g, seq, k, deadline, wait_ms, &all[k])) != WSYNC_OK) return st;
  }
  if (agree && (st = agree_members(g, seq, deadline, b)) != WSYNC_OK) return st;
  const size_t at = g->senders.batch_in_update++;
  if (g->senders.planners.size() <= at) g->senders.planners.push_back(std::make_unique<OwnershipPlanner>());
  const uint64_t before = g->senders.planners[at]->computed();
  const OwnershipPlan* plan = nullptr;
  if ((st = g->senders.planners[at]->plan(all, &plan)) != WSYNC_OK)
    return fail_msg(st, "the senders' batch " + std::to_string(seq) + " cannot be planned, nothing was sent: " +
                            last_error());
  g->senders.plans_computed += g->senders.planners[at]->computed() - before;
  std::vector<NeedMap> needs;
  uint64_t needs_digest = 0;
  // (a receiver's needs: timeout_ms, not the senders' longer wait)
  if ((st = read_needs(g, std::min(deadline, deadline_after(timeout_ms)), timeout_ms, &needs, &needs_digest)) != WSYNC_OK)
    return st;
  // The senders compare the plan and the receivers' needs they read: all cut the same boxes.
  BatchAgreed a{seq, plan->digest ^ needs_digest, agree, deadline, wait_ms};
  return finish_batch(g, a, *plan, mine, needs, b);
}

void senders_close(wsync_group_t* g) { g->senders.client.reset(); }

void senders_update_ended(wsync_group_t* g) {
  g->senders.batch_in_update = 0;
  g->senders.update_plan_digest = 0;
}

}  // namespace wsync
