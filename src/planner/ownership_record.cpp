// ownership_record.cpp — the records of a many-sender plan on the wire (see the header).
#include "planner/ownership_record.h"

#include <cstring>
#include <unordered_set>

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/names.h"

namespace wsync {
namespace {

constexpr size_t kHeaderBytes = 28;
constexpr size_t kTrailerBytes = 8;
constexpr uint16_t kKindSender = 1;
constexpr uint16_t kKindNeeds = 2;
constexpr uint8_t kFlagReplica = 1;
constexpr uint8_t kFlagFull = 1;

ByteWriter header(uint16_t kind, uint32_t rank, uint64_t update_id, uint32_t count) {
  ByteWriter w;
  w.u32(kOwnershipRecordMagic);
  w.u16(kOwnershipRecordVersion);
  w.u16(kind);
  w.u32(0);  // total_len, patched at the end
  w.u32(rank);
  w.u64(update_id);
  w.u32(count);
  return w;
}

std::vector<uint8_t> close(ByteWriter& w) {
  w.patch_u32(8, static_cast<uint32_t>(w.size() + kTrailerBytes));
  const uint64_t sum = checksum64(w.data().data(), w.size());
  w.u64(sum);
  return std::move(w.data());
}

void put_name(ByteWriter& w, const std::string& name) {
  w.u16(static_cast<uint16_t>(name.size()));
  w.raw(name.data(), name.size());
}

// The checks every record shares: magic, version, kind, length, checksum. On success *r is
// positioned after the header, before the entries, and reads only up to the trailer.
wsync_status_t open(const uint8_t* data, size_t len, uint16_t want_kind, const char* what, uint32_t* rank,
                    uint64_t* update_id, uint32_t* count) {
  if (data == nullptr && len != 0) return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s: no data", what);
  if (len < kHeaderBytes + kTrailerBytes)
    return fail(WSYNC_ERR_PROTOCOL, "%s: %zu bytes, shorter than a header and a trailer (%zu)", what, len,
                kHeaderBytes + kTrailerBytes);
  ByteReader r(data, len);
  uint32_t magic = 0, total = 0;
  uint16_t version = 0, kind = 0;
  r.u32(&magic);
  r.u16(&version);
  r.u16(&kind);
  r.u32(&total);
  r.u32(rank);
  r.u64(update_id);
  r.u32(count);
  if (magic != kOwnershipRecordMagic)
    return fail(WSYNC_ERR_PROTOCOL, "%s: bad magic 0x%08x (expected 0x%08x \"WSOR\")", what, magic,
                kOwnershipRecordMagic);
  if (version != kOwnershipRecordVersion)
    return fail(WSYNC_ERR_VERSION_MISMATCH, "%s: format version %u received, this wsync reads only version %u", what,
                version, kOwnershipRecordVersion);
  if (kind != want_kind) return fail(WSYNC_ERR_PROTOCOL, "%s: record kind %u, expected %u", what, kind, want_kind);
  if (total != len) return fail(WSYNC_ERR_PROTOCOL, "%s: total_len %u but %zu bytes arrived", what, total, len);
  uint64_t sum = 0;
  std::memcpy(&sum, data + len - kTrailerBytes, kTrailerBytes);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION  // lets a fuzzer reach the parser (tests/fuzz)
  const bool checksum_ok = true;
#else
  const bool checksum_ok = sum == checksum64(data, len - kTrailerBytes);
#endif
  if (!checksum_ok) return fail(WSYNC_ERR_PROTOCOL, "%s: checksum mismatch (the record was corrupted)", what);
  if (*count > kOwnershipRecordMaxTensors)
    return fail(WSYNC_ERR_PROTOCOL, "%s: %u tensors, more than %u", what, *count, kOwnershipRecordMaxTensors);
  return WSYNC_OK;
}

#define WSYNC_OR_SHORT(field) \
  fail(WSYNC_ERR_PROTOCOL, "%s entry %u: record ends inside %s", what, i, field)

wsync_status_t read_name(ByteReader& r, const char* what, uint32_t i, std::string* name) {
  uint16_t n = 0;
  if (!r.u16(&n)) return WSYNC_OR_SHORT("name_len");
  if (n == 0 || n > kMaxTensorNameBytes)
    return fail(WSYNC_ERR_PROTOCOL, "%s entry %u: name_len %u (names are 1..%zu bytes)", what, i, n,
                kMaxTensorNameBytes);
  if (!r.raw(n, name)) return WSYNC_OR_SHORT("the name");
  const std::string problem = tensor_name_problem(name->data(), name->size());
  if (!problem.empty())
    return fail(WSYNC_ERR_PROTOCOL, "%s entry %u: name '%s': %s", what, i,
                printable_name(name->data(), name->size()).c_str(), problem.c_str());
  return WSYNC_OK;
}

wsync_status_t read_dims(ByteReader& r, const char* what, uint32_t i, const char* field, int32_t ndim, int64_t* out,
                         bool non_negative) {
  for (int32_t d = 0; d < ndim; ++d) {
    if (!r.i64(&out[d])) return WSYNC_OR_SHORT(field);
    if (non_negative && out[d] < 0)
      return fail(WSYNC_ERR_PROTOCOL, "%s entry %u: %s[%d] is negative (%lld)", what, i, field, d,
                  static_cast<long long>(out[d]));
  }
  return WSYNC_OK;
}

wsync_status_t read_ndim(ByteReader& r, const char* what, uint32_t i, int32_t* ndim) {
  uint8_t n = 0;
  if (!r.u8(&n)) return WSYNC_OR_SHORT("ndim");
  if (n > WSYNC_MAX_NDIM) return fail(WSYNC_ERR_PROTOCOL, "%s entry %u: ndim %u exceeds %d", what, i, n, WSYNC_MAX_NDIM);
  *ndim = n;
  return WSYNC_OK;
}

wsync_status_t read_owned(ByteReader& r, const char* what, uint32_t i, OwnedTensor* t) {
  wsync_status_t st = read_name(r, what, i, &t->name);
  if (st != WSYNC_OK) return st;
  uint8_t dtype = 0, flags = 0;
  if (!r.u8(&dtype)) return WSYNC_OR_SHORT("dtype");
  if (wsync_dtype_size(dtype) == 0)
    return fail(WSYNC_ERR_PROTOCOL, "%s entry %u ('%s'): unknown dtype %u", what, i, t->name.c_str(), dtype);
  t->dtype = dtype;
  if ((st = read_ndim(r, what, i, &t->ndim)) != WSYNC_OK) return st;
  if (!r.u8(&flags)) return WSYNC_OR_SHORT("flags");
  if (flags & ~kFlagReplica)
    return fail(WSYNC_ERR_PROTOCOL, "%s entry %u ('%s'): unknown flags 0x%02x", what, i, t->name.c_str(), flags);
  t->replica = (flags & kFlagReplica) != 0;
  t->box.ndim = t->ndim;
  if ((st = read_dims(r, what, i, "shape", t->ndim, t->shape, true)) != WSYNC_OK) return st;
  if ((st = read_dims(r, what, i, "offset", t->ndim, t->box.offset, true)) != WSYNC_OK) return st;
  return read_dims(r, what, i, "extent", t->ndim, t->box.extent, true);
}

wsync_status_t read_need(ByteReader& r, const char* what, uint32_t i, Need* n) {
  wsync_status_t st = read_name(r, what, i, &n->name);
  if (st != WSYNC_OK) return st;
  int32_t ndim = 0;
  uint8_t flags = 0;
  if ((st = read_ndim(r, what, i, &ndim)) != WSYNC_OK) return st;
  if (!r.u8(&flags)) return WSYNC_OR_SHORT("flags");
  if (flags & ~kFlagFull)
    return fail(WSYNC_ERR_PROTOCOL, "%s entry %u ('%s'): unknown flags 0x%02x", what, i, n->name.c_str(), flags);
  n->full = (flags & kFlagFull) != 0;
  n->box = Box();
  n->box.ndim = ndim;
  if (n->full) return WSYNC_OK;
  if ((st = read_dims(r, what, i, "offset", ndim, n->box.offset, true)) != WSYNC_OK) return st;
  return read_dims(r, what, i, "extent", ndim, n->box.extent, true);
}

template <typename T, typename ReadFn>
wsync_status_t read_entries(const uint8_t* data, size_t len, uint32_t count, const char* what, ReadFn read_one,
                            std::vector<T>* out) {
  ByteReader r(data + kHeaderBytes, len - kHeaderBytes - kTrailerBytes);
  std::vector<T> v;
  std::unordered_set<std::string> names;
  v.reserve(count < 4096 ? count : 4096);  // a count is a claim, not an allocation
  for (uint32_t i = 0; i < count; ++i) {
    T t;
    wsync_status_t st = read_one(r, what, i, &t);
    if (st != WSYNC_OK) return st;
    if (!names.insert(t.name).second)
      return fail(WSYNC_ERR_PROTOCOL, "%s entry %u: tensor '%s' again", what, i, t.name.c_str());
    v.push_back(std::move(t));
  }
  if (!r.at_end()) return fail(WSYNC_ERR_PROTOCOL, "%s: %zu bytes after the last entry", what, r.left());
  *out = std::move(v);
  return WSYNC_OK;
}

}  // namespace

std::vector<uint8_t> encode_sender_record(const SenderRecord& rec, uint64_t update_id) {
  ByteWriter w = header(kKindSender, rec.rank, update_id, static_cast<uint32_t>(rec.tensors.size()));
  for (const OwnedTensor& t : rec.tensors) {  // unchecked records: loops stay inside the arrays
    const int32_t nd = t.ndim < 0 ? 0 : (t.ndim > WSYNC_MAX_NDIM ? WSYNC_MAX_NDIM : t.ndim);
    put_name(w, t.name);
    w.u8(static_cast<uint8_t>(t.dtype));
    w.u8(static_cast<uint8_t>(nd));
    w.u8(t.replica ? kFlagReplica : 0);
    for (int32_t d = 0; d < nd; ++d) w.i64(t.shape[d]);
    for (int32_t d = 0; d < nd; ++d) w.i64(t.box.offset[d]);
    for (int32_t d = 0; d < nd; ++d) w.i64(t.box.extent[d]);
  }
  return close(w);
}

std::vector<uint8_t> encode_needs(uint32_t rank, uint64_t update_id, const std::vector<Need>& needs) {
  ByteWriter w = header(kKindNeeds, rank, update_id, static_cast<uint32_t>(needs.size()));
  for (const Need& n : needs) {
    const int32_t nd = n.full || n.box.ndim < 0 ? 0 : (n.box.ndim > WSYNC_MAX_NDIM ? WSYNC_MAX_NDIM : n.box.ndim);
    put_name(w, n.name);
    w.u8(static_cast<uint8_t>(nd));
    w.u8(n.full ? kFlagFull : 0);
    if (n.full) continue;
    for (int32_t d = 0; d < nd; ++d) w.i64(n.box.offset[d]);
    for (int32_t d = 0; d < nd; ++d) w.i64(n.box.extent[d]);
  }
  return close(w);
}

wsync_status_t decode_sender_record(const uint8_t* data, size_t len, SenderRecord* out, uint64_t* update_id) {
  if (out == nullptr || update_id == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "sender record: no output");
  uint32_t rank = 0, count = 0;
  uint64_t update = 0;
  wsync_status_t st = open(data, len, kKindSender, "sender record", &rank, &update, &count);
  if (st != WSYNC_OK) return st;
  std::vector<OwnedTensor> tensors;
  if ((st = read_entries<OwnedTensor>(data, len, count, "sender record", read_owned, &tensors)) != WSYNC_OK)
    return st;
  out->rank = rank;
  out->tensors = std::move(tensors);
  *update_id = update;
  return WSYNC_OK;
}

wsync_status_t decode_needs(const uint8_t* data, size_t len, uint32_t* rank, uint64_t* update_id,
                            std::vector<Need>* out) {
  if (out == nullptr || rank == nullptr || update_id == nullptr)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "needs record: no output");
  uint32_t r = 0, count = 0;
  uint64_t update = 0;
  wsync_status_t st = open(data, len, kKindNeeds, "needs record", &r, &update, &count);
  if (st != WSYNC_OK) return st;
  std::vector<Need> needs;
  if ((st = read_entries<Need>(data, len, count, "needs record", read_need, &needs)) != WSYNC_OK) return st;
  *rank = r;
  *update_id = update;
  *out = std::move(needs);
  return WSYNC_OK;
}

}  // namespace wsync
