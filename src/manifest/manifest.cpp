#include "manifest/manifest.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/names.h"
#include "common/shape_bytes.h"

namespace wsync {
namespace {

static_assert(kManifestMaxNameBytes == kMaxTensorNameBytes, "one limit for tensor names everywhere");

// Smallest possible entry: name_len, a 1-byte name, dtype, ndim (0), then four u64.
constexpr size_t kMinEntryBytes = 2 + 1 + 1 + 1 + 4 * 8;

uint64_t load_le(const uint8_t* p, size_t n) {
  uint64_t x = 0;
  std::memcpy(&x, p, n);  // little-endian host (common/bytes.h)
  return x;
}

#define WSYNC_MF_SHORT(what, idx) \
  fail(WSYNC_ERR_PROTOCOL, "manifest entry %u: record ends inside %s", static_cast<unsigned>(idx), what)

wsync_status_t decode_entry(ByteReader& r, uint32_t i, uint64_t bucket_bytes, bool boxes, ManifestEntry* e) {
  uint16_t name_len = 0;
  if (!r.u16(&name_len)) return WSYNC_MF_SHORT("name_len", i);
  if (name_len == 0)
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u: name_len is 0 (names are 1..%zu bytes)", i,
                kManifestMaxNameBytes);
  if (name_len > kManifestMaxNameBytes)
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u: name_len %u exceeds %zu", i, name_len,
                kManifestMaxNameBytes);
  if (!r.raw(name_len, &e->name))
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u: name of %u bytes runs past the end of the record", i,
                name_len);
  // The same rule as the sender's and the receiver's register: a NUL, a control character or
  // invalid UTF-8 would let two different names print, compare or hash as one in an engine.
  const std::string problem = tensor_name_problem(e->name.data(), e->name.size());
  if (!problem.empty())
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u: name '%s': %s", i,
                printable_name(e->name.data(), e->name.size()).c_str(), problem.c_str());
  const char* name = e->name.c_str();  // checked above: no NUL, printable

  uint8_t dtype = 0, ndim = 0;
  if (!r.u8(&dtype)) return WSYNC_MF_SHORT("dtype", i);
  const uint64_t esize = wsync_dtype_size(dtype);
  if (esize == 0) return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): unknown dtype %u", i, name, dtype);
  if (!r.u8(&ndim)) return WSYNC_MF_SHORT("ndim", i);
  if (ndim > WSYNC_MAX_NDIM)
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): ndim %u exceeds %d", i, name, ndim, WSYNC_MAX_NDIM);
  e->dtype = dtype;
  e->ndim = ndim;
  for (int d = 0; d < WSYNC_MAX_NDIM; ++d) e->shape[d] = 0;
  for (int d = 0; d < ndim; ++d) {
    uint64_t raw = 0;
    if (!r.u64(&raw)) return WSYNC_MF_SHORT("shape", i);
    const int64_t dim = static_cast<int64_t>(raw);
    if (dim < 0)
      return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): shape[%d] is negative (%lld)", i, name, d,
                  static_cast<long long>(dim));
    e->shape[d] = dim;
  }
  if (!r.u64(&e->bucket_offset)) return WSYNC_MF_SHORT("bucket_offset", i);
  if (!r.u64(&e->length)) return WSYNC_MF_SHORT("length", i);
  if (!r.u64(&e->tensor_bytes)) return WSYNC_MF_SHORT("tensor_bytes", i);
  if (!r.u64(&e->tensor_offset)) return WSYNC_MF_SHORT("tensor_offset", i);

  uint64_t shape_bytes = 0;
  if (!shape_nbytes(e->dtype, e->ndim, e->shape, &shape_bytes))
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): shape byte size overflows 64 bits", i, name);
  e->box = full_box(e->ndim, e->shape);
  if (boxes) {
    for (int d = 0; d < ndim; ++d)
      if (!r.i64(&e->box.offset[d])) return WSYNC_MF_SHORT("box offset", i);
    for (int d = 0; d < ndim; ++d)
      if (!r.i64(&e->box.extent[d])) return WSYNC_MF_SHORT("box extent", i);
    std::string why;
    if (!box_within(e->box, e->ndim, e->shape, &why))
      return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): box %s of shape %s %s", i, name,
                  box_str(e->box).c_str(), box_str(full_box(e->ndim, e->shape)).c_str(), why.c_str());
    int64_t elems = 0;
    box_elements(e->box, &elems);  // inside a shape whose bytes fit 64 bits
    shape_bytes = static_cast<uint64_t>(elems) * esize;
  }
  if (shape_bytes != e->tensor_bytes)
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): tensor_bytes %llu but %s and dtype give %llu", i,
                name, static_cast<unsigned long long>(e->tensor_bytes), boxes ? "box" : "shape",
                static_cast<unsigned long long>(shape_bytes));
  if (e->length % esize != 0 || e->tensor_offset % esize != 0)
    return fail(WSYNC_ERR_PROTOCOL,
                "manifest entry %u ('%s'): length %llu / tensor_offset %llu not a multiple of the %s size %llu", i,
                name, static_cast<unsigned long long>(e->length), static_cast<unsigned long long>(e->tensor_offset),
                wsync_dtype_name(e->dtype), static_cast<unsigned long long>(esize));
  if (e->tensor_offset > e->tensor_bytes || e->length > e->tensor_bytes - e->tensor_offset)
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): tensor_offset %llu + length %llu exceeds tensor_bytes %llu",
                i, name, static_cast<unsigned long long>(e->tensor_offset),
                static_cast<unsigned long long>(e->length), static_cast<unsigned long long>(e->tensor_bytes));
  if (e->bucket_offset > bucket_bytes || e->length > bucket_bytes - e->bucket_offset)
    return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): bucket_offset %llu + length %llu exceeds bucket_bytes %llu",
                i, name, static_cast<unsigned long long>(e->bucket_offset),
                static_cast<unsigned long long>(e->length), static_cast<unsigned long long>(bucket_bytes));
  return WSYNC_OK;
}

#undef WSYNC_MF_SHORT

}  // namespace

std::vector<uint8_t> encode_manifest(const Manifest& m) {
  ByteWriter w;
  w.u32(kManifestMagic);
  w.u16(kManifestVersion);
  w.u16(static_cast<uint16_t>(m.flags));
  const size_t total_len_at = w.size();
  w.u32(0);  // total_len, patched below
  w.u64(m.update_id);
  w.u64(m.bucket_index);
  w.u64(m.bucket_bytes);
  w.u64(m.payload_checksum);
  w.u32(static_cast<uint32_t>(m.entries.size()));
  for (const ManifestEntry& e : m.entries) {
    w.u16(static_cast<uint16_t>(e.name.size()));
    w.raw(e.name.data(), static_cast<uint16_t>(e.name.size()));
    w.u8(static_cast<uint8_t>(e.dtype));
    const int ndim = e.ndim < 0 ? 0 : (e.ndim > WSYNC_MAX_NDIM ? WSYNC_MAX_NDIM : e.ndim);
    w.u8(static_cast<uint8_t>(ndim));
    for (int d = 0; d < ndim; ++d) w.u64(static_cast<uint64_t>(e.shape[d]));
    w.u64(e.bucket_offset);
    w.u64(e.length);
    w.u64(e.tensor_bytes);
    w.u64(e.tensor_offset);
    if (m.flags & kManifestFlagBoxes) {
      for (int d = 0; d < ndim; ++d) w.i64(e.box.offset[d]);
      for (int d = 0; d < ndim; ++d) w.i64(e.box.extent[d]);
    }
  }
  w.patch_u32(total_len_at, static_cast<uint32_t>(w.size() + kManifestTrailerBytes));
  w.u64(checksum64(w.data().data(), w.size()));
  return std::move(w.data());
}

wsync_status_t expand_boxes(Manifest* m, size_t max_entries, BoxFrame frame, const void* ctx) {
  if (!(m->flags & kManifestFlagBoxes)) return WSYNC_OK;
  std::vector<ManifestEntry> out;
  for (size_t i = 0; i < m->entries.size(); ++i) {
    ManifestEntry e = m->entries[i];
    Box whole = full_box(e.ndim, e.shape);
    const Box* held = frame != nullptr ? frame(ctx, e.name) : nullptr;
    if (held != nullptr) {  // this receiver holds a slice: the slice is the tensor here
      Box common;
      if (held->ndim != e.ndim || !box_intersect(e.box, *held, &common) || !box_equal(common, e.box))
        return fail(WSYNC_ERR_PROTOCOL, "manifest entry %zu: the sender sends %s of tensor '%s', but this receiver holds "
                    "only %s of it", i, box_str(e.box).c_str(), e.name.c_str(), box_str(*held).c_str());
      for (int d = 0; d < e.ndim; ++d) {
        e.box.offset[d] -= held->offset[d];
        e.shape[d] = held->extent[d];
      }
      whole = full_box(e.ndim, e.shape);
    }
    if (box_equal(e.box, whole)) {
      out.push_back(e);
    } else {
      // Only the runs this entry's bytes reach are computed (a forged tall column box costs its
      // window, not a run per row), and no more than the bucket may still hold.
      std::vector<ByteRun> window;
      const uint64_t room = max_entries - std::min(max_entries, out.size());
      if (box_window(e.box, whole, wsync_dtype_size(e.dtype), e.tensor_offset, e.tensor_offset + e.length, room,
                     &window) != WSYNC_OK)
        return fail(WSYNC_ERR_PROTOCOL, "manifest entry %zu ('%s'): %s (at most %zu chunks in one bucket)", i,
                    e.name.c_str(), last_error().c_str(), max_entries);
      uint64_t shape_bytes = 0;
      shape_nbytes(e.dtype, e.ndim, e.shape, &shape_bytes);  // checked by the decoder
      uint64_t at = e.bucket_offset;
      for (const ByteRun& w : window) {
        ManifestEntry c = e;
        c.box = whole;
        c.tensor_bytes = shape_bytes;
        c.tensor_offset = w.offset;
        c.length = w.length;
        c.bucket_offset = at;
        at += w.length;
        out.push_back(std::move(c));
      }
    }
  }
  m->entries = std::move(out);
  m->flags &= ~kManifestFlagBoxes;
  return WSYNC_OK;
}

wsync_status_t decode_manifest(const uint8_t* data, size_t len, Manifest* out) {
  if (out == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "decode_manifest: out is NULL");
  if (data == nullptr && len != 0) return fail(WSYNC_ERR_INVALID_ARGUMENT, "decode_manifest: data is NULL");

  // Magic and version first: a record of another version may be laid out differently, so its
  // length and checksum mean nothing to us.
  if (len < 4) return fail(WSYNC_ERR_PROTOCOL, "manifest: %zu bytes, too short for the magic", len);
  const uint32_t magic = static_cast<uint32_t>(load_le(data, 4));
  if (magic != kManifestMagic)
    return fail(WSYNC_ERR_PROTOCOL, "manifest: bad magic 0x%08x (expected 0x%08x \"WSMF\")", magic, kManifestMagic);
  if (len < 6) return fail(WSYNC_ERR_PROTOCOL, "manifest: %zu bytes, too short for the version", len);
  const uint16_t version = static_cast<uint16_t>(load_le(data + 4, 2));
  if (version != kManifestVersion)
    return fail(WSYNC_ERR_VERSION_MISMATCH,
                "manifest: format version %u received, this wsync reads only version %u", version, kManifestVersion);
  if (len < kManifestHeaderBytes + kManifestTrailerBytes)
    return fail(WSYNC_ERR_PROTOCOL, "manifest: %zu bytes, shorter than the %zu-byte header and trailer", len,
                kManifestHeaderBytes + kManifestTrailerBytes);
  const uint32_t total_len = static_cast<uint32_t>(load_le(data + 8, 4));
  if (total_len != len)
    return fail(WSYNC_ERR_PROTOCOL, "manifest: total_len %u but %zu bytes received", total_len, len);
  const size_t body = len - kManifestTrailerBytes;
  const uint64_t want = load_le(data + body, 8);
  const uint64_t got = checksum64(data, body);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION  // lets a fuzzer reach the parser (tests/fuzz)
  const bool checksum_ok = true;
#else
  const bool checksum_ok = want == got;
#endif
  if (!checksum_ok)
    return fail(WSYNC_ERR_PROTOCOL, "manifest: checksum mismatch (trailer 0x%016llx, computed 0x%016llx)",
                static_cast<unsigned long long>(want), static_cast<unsigned long long>(got));

  ByteReader r(data, body);
  Manifest m;
  uint32_t skip32 = 0;
  uint16_t skip16 = 0, flags = 0;
  uint32_t num_entries = 0;
  // Sizes were checked above: the header reads cannot fail.
  r.u32(&skip32);
  r.u16(&skip16);
  r.u16(&flags);
  r.u32(&skip32);
  r.u64(&m.update_id);
  r.u64(&m.bucket_index);
  r.u64(&m.bucket_bytes);
  r.u64(&m.payload_checksum);
  r.u32(&num_entries);
  m.flags = flags;
  if ((m.flags & ~kManifestKnownFlags) != 0)
    return fail(WSYNC_ERR_PROTOCOL, "manifest: unknown flags 0x%04x (version %u knows 0x%04x)", m.flags,
                kManifestVersion, kManifestKnownFlags);
  if (num_entries > r.left() / kMinEntryBytes)
    return fail(WSYNC_ERR_PROTOCOL, "manifest: num_entries %u cannot fit in the %zu bytes left", num_entries,
                r.left());

  m.entries.resize(num_entries);
  std::unordered_set<std::string> names;
  names.reserve(num_entries);
  uint64_t prev_end = 0;
  for (uint32_t i = 0; i < num_entries; ++i) {
    ManifestEntry& e = m.entries[i];
    wsync_status_t st = decode_entry(r, i, m.bucket_bytes, (m.flags & kManifestFlagBoxes) != 0, &e);
    if (st != WSYNC_OK) return st;
    if (e.bucket_offset < prev_end)
      return fail(WSYNC_ERR_PROTOCOL,
                  "manifest entry %u ('%s'): bucket_offset %llu overlaps or precedes the previous entry's end %llu",
                  i, e.name.c_str(), static_cast<unsigned long long>(e.bucket_offset),
                  static_cast<unsigned long long>(prev_end));
    prev_end = e.bucket_offset + e.length;  // cannot overflow: both are <= bucket_bytes
    if (!names.insert(e.name).second)
      return fail(WSYNC_ERR_PROTOCOL, "manifest entry %u ('%s'): duplicate name", i, e.name.c_str());
  }
  if (r.left() != 0)
    return fail(WSYNC_ERR_PROTOCOL, "manifest: %zu trailing bytes after entry %u", r.left(), num_entries);
  *out = std::move(m);
  return WSYNC_OK;
}

}  // namespace wsync
