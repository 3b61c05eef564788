// The native manifest: round trips, the exact wire layout, and a decoder that refuses every kind
// of damaged or hostile record without reading out of bounds.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/error.h"
#include "manifest/manifest.h"
#include "planner/bucket_planner.h"
#include "../common/manifest_entry.h"

namespace wsync {
namespace {

using test_manifest::entry;

// ------------------------------------------------------------------------------------------
// An independent writer of the documented layout, able to write what encode_manifest never
// would (bad lengths, bad counts, 9 dims), so every check of the decoder can be reached.
// ------------------------------------------------------------------------------------------

struct RawEntry {
  std::string name;
  int name_len = -1;  // -1: name.size()
  uint8_t dtype = WSYNC_DTYPE_UINT8;
  uint8_t ndim = 1;
  std::vector<uint64_t> shape = {4};
  uint64_t bucket_offset = 0, length = 4, tensor_bytes = 4, tensor_offset = 0;
};

struct Raw {
  uint32_t magic = kManifestMagic;
  uint16_t version = kManifestVersion;
  uint16_t flags = 0;
  int64_t total_len = -1;  // -1: the real length
  uint64_t update_id = 9, bucket_index = 2, bucket_bytes = 64, payload_checksum = 0;
  int64_t num_entries = -1;  // -1: entries.size()
  std::vector<RawEntry> entries;
  std::vector<uint8_t> extra;  // bytes between the last entry and the trailer
};

void Put(std::vector<uint8_t>& v, uint64_t x, int n) {
  for (int i = 0; i < n; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

void Reseal(std::vector<uint8_t>& v, bool fix_total_len = true) {
  if (fix_total_len) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    for (int i = 0; i < 4; ++i) v[8 + i] = static_cast<uint8_t>(n >> (8 * i));
  }
  const uint64_t h = XXH3_64bits(v.data(), v.size() - 8);
  for (int i = 0; i < 8; ++i) v[v.size() - 8 + i] = static_cast<uint8_t>(h >> (8 * i));
}

std::vector<uint8_t> Build(const Raw& r) {
  std::vector<uint8_t> v;
  Put(v, r.magic, 4);
  Put(v, r.version, 2);
  Put(v, r.flags, 2);
  Put(v, 0, 4);
  Put(v, r.update_id, 8);
  Put(v, r.bucket_index, 8);
  Put(v, r.bucket_bytes, 8);
  Put(v, r.payload_checksum, 8);
  Put(v, r.num_entries >= 0 ? static_cast<uint64_t>(r.num_entries) : r.entries.size(), 4);
  for (const RawEntry& e : r.entries) {
    Put(v, e.name_len >= 0 ? static_cast<uint64_t>(e.name_len) : e.name.size(), 2);
    v.insert(v.end(), e.name.begin(), e.name.end());
    Put(v, e.dtype, 1);
    Put(v, e.ndim, 1);
    for (uint64_t d : e.shape) Put(v, d, 8);
    Put(v, e.bucket_offset, 8);
    Put(v, e.length, 8);
    Put(v, e.tensor_bytes, 8);
    Put(v, e.tensor_offset, 8);
  }
  v.insert(v.end(), r.extra.begin(), r.extra.end());
  Put(v, 0, 8);
  Reseal(v);
  if (r.total_len >= 0) {
    for (int i = 0; i < 4; ++i) v[8 + i] = static_cast<uint8_t>(static_cast<uint64_t>(r.total_len) >> (8 * i));
    Reseal(v, false);
  }
  return v;
}

RawEntry U8(const std::string& name, uint64_t off, uint64_t len) {
  RawEntry e;
  e.name = name;
  e.shape = {len};
  e.bucket_offset = off;
  e.length = len;
  e.tensor_bytes = len;
  return e;
}

Raw Good() {
  Raw r;
  r.entries = {U8("a", 0, 16), U8("b", 16, 8)};
  return r;
}

Manifest Sample() {
  Manifest m;
  m.update_id = 0x0102030405060708ull;
  m.bucket_index = 77;
  m.bucket_bytes = 4096;
  m.flags = kManifestFlagPayloadChecksum;
  m.payload_checksum = 0xDEADBEEFCAFEF00Dull;
  m.entries.push_back(entry("model.layers.0.eight_dims", WSYNC_DTYPE_FLOAT16, {1, 2, 1, 2, 1, 2, 1, 2}, 0, 32));
  m.entries.push_back(entry("empty", WSYNC_DTYPE_FLOAT32, {0, 7}, 32, 0));
  m.entries.push_back(entry("scalar", WSYNC_DTYPE_INT64, {}, 32, 8));
  m.entries.push_back(entry("split.chunk", WSYNC_DTYPE_BFLOAT16, {1000}, 64, 256, 512));
  m.entries.push_back(entry("fp8", WSYNC_DTYPE_FLOAT8_E4M3, {3, 5}, 320, 15));
  return m;
}

void ExpectSameManifest(const Manifest& a, const Manifest& b) {
  EXPECT_EQ(a.update_id, b.update_id);
  EXPECT_EQ(a.bucket_index, b.bucket_index);
  EXPECT_EQ(a.bucket_bytes, b.bucket_bytes);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.payload_checksum, b.payload_checksum);
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    const ManifestEntry& x = a.entries[i];
    const ManifestEntry& y = b.entries[i];
    EXPECT_EQ(x.name, y.name) << i;
    EXPECT_EQ(x.dtype, y.dtype) << i;
    EXPECT_EQ(x.ndim, y.ndim) << i;
    for (int d = 0; d < WSYNC_MAX_NDIM; ++d) EXPECT_EQ(x.shape[d], y.shape[d]) << i << " dim " << d;
    EXPECT_EQ(x.bucket_offset, y.bucket_offset) << i;
    EXPECT_EQ(x.length, y.length) << i;
    EXPECT_EQ(x.tensor_bytes, y.tensor_bytes) << i;
    EXPECT_EQ(x.tensor_offset, y.tensor_offset) << i;
  }
}

wsync_status_t Decode(const std::vector<uint8_t>& v, Manifest* out = nullptr) {
  Manifest local;
  return decode_manifest(v.data(), v.size(), out ? out : &local);
}

void ExpectProtocol(const std::vector<uint8_t>& v, const std::string& must_mention) {
  Manifest out;
  out.update_id = 12345;
  EXPECT_EQ(Decode(v, &out), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find(must_mention), std::string::npos) << "message: " << last_error();
  EXPECT_EQ(out.update_id, 12345u) << "a failed decode must leave *out alone";
}

// ------------------------------------------------------------------------------------------
// Round trips and layout
// ------------------------------------------------------------------------------------------

TEST(Manifest, RoundTrip) {
  const Manifest m = Sample();
  const std::vector<uint8_t> wire = encode_manifest(m);
  Manifest back;
  ASSERT_EQ(decode_manifest(wire.data(), wire.size(), &back), WSYNC_OK) << last_error();
  ExpectSameManifest(m, back);
  EXPECT_EQ(encode_manifest(back), wire);
}

TEST(Manifest, NoEntriesRoundTrips) {
  Manifest m;
  m.update_id = 3;
  const std::vector<uint8_t> wire = encode_manifest(m);
  EXPECT_EQ(wire.size(), kManifestHeaderBytes + kManifestTrailerBytes);
  Manifest back;
  back.entries.resize(3);
  ASSERT_EQ(decode_manifest(wire.data(), wire.size(), &back), WSYNC_OK) << last_error();
  ExpectSameManifest(m, back);
}

TEST(Manifest, WireLayoutIsTheDocumentedLittleEndianRecord) {
  Manifest m;
  m.update_id = 9;
  m.bucket_index = 2;
  m.bucket_bytes = 64;
  m.entries.push_back(entry("a", WSYNC_DTYPE_UINT8, {16}, 0, 16));
  m.entries.push_back(entry("b", WSYNC_DTYPE_UINT8, {8}, 16, 8));
  const std::vector<uint8_t> wire = encode_manifest(m);
  EXPECT_EQ(wire, Build(Good()));
  ASSERT_GE(wire.size(), 12u);
  EXPECT_EQ(std::memcmp(wire.data(), "WSMF", 4), 0);
  EXPECT_EQ(wire[4], 1);
  EXPECT_EQ(wire[5], 0);
  EXPECT_EQ(wire[8] | (wire[9] << 8) | (wire[10] << 16) | (static_cast<uint32_t>(wire[11]) << 24), wire.size());
}

TEST(Manifest, Checksum64IsXxh3) {
  const char text[] = "wsync";
  EXPECT_EQ(checksum64(text, 5), XXH3_64bits(text, 5));
  EXPECT_EQ(checksum64(nullptr, 0), XXH3_64bits("", 0));
}

TEST(Manifest, PlannedBucketsMakeValidManifests) {
  LayoutRule rule;
  rule.kind = WSYNC_LAYOUT_BYTES_MIXED;
  rule.alignment = 8;
  rule.allow_split = true;
  rule.bucket_bytes = 64;
  std::vector<PlanTensor> ts(4);
  ts[0].name = "a";
  ts[0].dtype = WSYNC_DTYPE_UINT8;
  ts[0].ndim = 1;
  ts[0].shape[0] = 10;
  ts[0].nbytes = 10;
  ts[1].name = "big";
  ts[1].dtype = WSYNC_DTYPE_FLOAT32;
  ts[1].ndim = 2;
  ts[1].shape[0] = 5;
  ts[1].shape[1] = 10;
  ts[1].nbytes = 200;
  ts[2].name = "empty";
  ts[2].dtype = WSYNC_DTYPE_FLOAT16;
  ts[2].ndim = 1;
  ts[2].nbytes = 0;
  ts[3].name = "c";
  ts[3].dtype = WSYNC_DTYPE_INT32;
  ts[3].ndim = 0;
  ts[3].nbytes = 4;
  std::vector<PlanBucket> plan;
  ASSERT_EQ(plan_buckets(rule, ts, &plan), WSYNC_OK) << last_error();
  uint64_t covered = 0;
  for (size_t b = 0; b < plan.size(); ++b) {
    Manifest m;
    m.bucket_index = b;
    m.bucket_bytes = plan[b].bytes;
    for (const PlanEntry& pe : plan[b].entries) {
      const PlanTensor& t = ts[pe.tensor_index];
      ManifestEntry e;
      e.name = t.name;
      e.dtype = t.dtype;
      e.ndim = t.ndim;
      std::memcpy(e.shape, t.shape, sizeof(e.shape));
      e.bucket_offset = pe.bucket_offset;
      e.length = pe.length;
      e.tensor_bytes = t.nbytes;
      e.tensor_offset = pe.tensor_offset;
      if (t.name == "big") covered += pe.length;
      m.entries.push_back(e);
    }
    const std::vector<uint8_t> wire = encode_manifest(m);
    Manifest back;
    ASSERT_EQ(decode_manifest(wire.data(), wire.size(), &back), WSYNC_OK) << "bucket " << b << ": " << last_error();
    ExpectSameManifest(m, back);
  }
  EXPECT_EQ(covered, 200u);
}

// ------------------------------------------------------------------------------------------
// Every corruption, refused with WSYNC_ERR_PROTOCOL and a message that names it
// ------------------------------------------------------------------------------------------

TEST(ManifestCorrupt, ShortBuffers) {
  const std::vector<uint8_t> good = Build(Good());
  for (size_t n : {0u, 1u, 3u, 4u, 5u, 6u, 47u, 55u}) {
    Manifest out;
    EXPECT_EQ(decode_manifest(good.data(), n, &out), WSYNC_ERR_PROTOCOL) << n;
  }
  Manifest out;
  EXPECT_EQ(decode_manifest(nullptr, 0, &out), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(decode_manifest(good.data(), good.size(), nullptr), WSYNC_ERR_INVALID_ARGUMENT);
}

TEST(ManifestCorrupt, Header) {
  {
    Raw r = Good();
    r.magic = 0x464D5358;
    ExpectProtocol(Build(r), "magic");
  }
  {
    Raw r = Good();
    r.total_len = static_cast<int64_t>(Build(Good()).size()) + 1;
    ExpectProtocol(Build(r), "total_len");
    r.total_len = 56;
    ExpectProtocol(Build(r), "total_len");
  }
  {
    std::vector<uint8_t> v = Build(Good());
    v[30] ^= 0x10;  // bucket_bytes, not resealed
    ExpectProtocol(v, "checksum");
  }
  {
    Raw r = Good();
    r.flags = 0x8000;
    ExpectProtocol(Build(r), "flags");
  }
  {
    Raw r = Good();
    r.num_entries = 1000000;
    ExpectProtocol(Build(r), "num_entries");
    r.num_entries = 0xFFFFFFFF;
    ExpectProtocol(Build(r), "num_entries");
    r.num_entries = 3;  // a third entry of zeros: name_len 0
    r.extra.assign(40, 0);
    ExpectProtocol(Build(r), "entry 2");
  }
  {
    Raw r = Good();
    r.num_entries = 1;  // the second entry becomes trailing garbage
    ExpectProtocol(Build(r), "trailing");
    Raw t = Good();
    t.extra = {0, 0, 0};
    ExpectProtocol(Build(t), "trailing");
  }
}

TEST(ManifestCorrupt, OtherVersionIsAVersionMismatch) {
  for (uint16_t version : {0, 2, 0xFFFF}) {
    Raw r = Good();
    r.version = version;
    std::vector<uint8_t> v = Build(r);
    Manifest out;
    EXPECT_EQ(decode_manifest(v.data(), v.size(), &out), WSYNC_ERR_VERSION_MISMATCH);
    EXPECT_NE(last_error().find("version " + std::to_string(version)), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("version 1"), std::string::npos) << last_error();
  }
}

TEST(ManifestCorrupt, Names) {
  {
    Raw r = Good();
    r.entries[1].name = "";
    ExpectProtocol(Build(r), "entry 1");
    ExpectProtocol(Build(r), "name_len is 0");
  }
  {
    Raw r = Good();
    r.entries[0].name = std::string(1025, 'n');
    ExpectProtocol(Build(r), "entry 0");
    r.entries[0].name = std::string(1024, 'n');
    EXPECT_EQ(Decode(Build(r)), WSYNC_OK) << last_error();
  }
  {
    Raw r = Good();
    r.entries[1].name_len = 1000;  // runs past the end
    ExpectProtocol(Build(r), "entry 1");
  }
  {
    Raw r = Good();
    r.entries[1].name = "a";
    ExpectProtocol(Build(r), "duplicate");
  }
}

// A name is what an engine keys its parameters by: bytes that would print, compare or hash as
// another name there (a NUL cutting "a\0b" to "a", a control character, invalid UTF-8) are
// refused on the wire, so neither the shape check nor the duplicate check can be bypassed.
TEST(ManifestCorrupt, NamesMustBeCleanUtf8) {
  {
    Raw r = Good();
    r.entries[1].name = std::string("b\0c", 3);
    ExpectProtocol(Build(r), "manifest entry 1: name 'b\\x00c': byte 1 is a NUL");
  }
  {
    // Two entries that an engine reading C strings would both call "a", of different shapes.
    Raw r;
    r.entries = {U8("a", 0, 16), U8(std::string("a\0b", 3), 16, 8)};
    ExpectProtocol(Build(r), "manifest entry 1: name 'a\\x00b': byte 1 is a NUL");
  }
  {
    Raw r = Good();
    r.entries[0].name = "w\xff\xfe";  // not UTF-8
    ExpectProtocol(Build(r), "manifest entry 0: name 'w\\xff\\xfe': byte 1 starts an invalid UTF-8 sequence");
    r.entries[0].name = "w\xc0\xaf";  // an overlong '/'
    ExpectProtocol(Build(r), "byte 1 starts an invalid UTF-8 sequence");
    r.entries[0].name = "w\xe2\x82";  // cut inside a sequence
    ExpectProtocol(Build(r), "byte 1 starts an invalid UTF-8 sequence");
  }
  {
    Raw r = Good();
    r.entries[1].name = "layer\n1";
    ExpectProtocol(Build(r), "manifest entry 1: name 'layer\\x0a1': byte 5 is the control character U+000A");
    r.entries[1].name = "del\x7f";
    ExpectProtocol(Build(r), "manifest entry 1");
    r.entries[1].name = "c1\xc2\x85";  // U+0085 NEL, a C1 control
    ExpectProtocol(Build(r), "control character");
  }
  {
    Raw r = Good();
    r.entries[1].name = "model.\xe5\xb1\x82.\xf0\x9f\x98\x80";  // non-ASCII UTF-8 is a fine name
    EXPECT_EQ(Decode(Build(r)), WSYNC_OK) << last_error();
  }
}

TEST(ManifestCorrupt, DtypeAndShape) {
  for (uint8_t dtype : {0, 13, 200}) {
    Raw r = Good();
    r.entries[1].dtype = dtype;
    ExpectProtocol(Build(r), "entry 1");
  }
  {
    Raw r = Good();
    r.entries[0].ndim = 9;
    r.entries[0].shape = {1, 1, 1, 1, 16, 1, 1, 1, 1};
    ExpectProtocol(Build(r), "ndim");
  }
  {
    Raw r = Good();
    r.entries[0].ndim = 2;
    r.entries[0].shape = {static_cast<uint64_t>(-4), static_cast<uint64_t>(-4)};  // 16 if read unsigned
    ExpectProtocol(Build(r), "negative");
  }
  {
    Raw r = Good();
    r.entries[0].ndim = 2;
    r.entries[0].shape = {1ull << 62, 1ull << 62};
    ExpectProtocol(Build(r), "overflow");
    r.entries[0].dtype = WSYNC_DTYPE_FLOAT64;
    r.entries[0].shape = {1ull << 61, 1};
    ExpectProtocol(Build(r), "overflow");
  }
  {
    Raw r = Good();
    r.entries[0].shape = {15};  // 15 bytes != tensor_bytes 16
    ExpectProtocol(Build(r), "tensor_bytes");
  }
  {
    Raw r = Good();
    r.entries[0].ndim = 3;  // shape list shorter than ndim: the rest of the entry is eaten as dims
    ExpectProtocol(Build(r), "entry");
  }
}

TEST(ManifestCorrupt, OffsetsAndLengths) {
  {
    Raw r = Good();
    r.entries[0].tensor_offset = 8;  // 8 + 16 > 16
    ExpectProtocol(Build(r), "tensor_offset");
    r.entries[0].tensor_offset = UINT64_MAX - 3;  // would wrap
    ExpectProtocol(Build(r), "tensor_offset");
  }
  {
    Raw r = Good();
    r.entries[1].bucket_offset = 60;  // 60 + 8 > 64
    ExpectProtocol(Build(r), "bucket_bytes");
    r.entries[1].bucket_offset = UINT64_MAX - 3;  // would wrap
    ExpectProtocol(Build(r), "bucket_bytes");
  }
  {
    Raw r = Good();
    r.entries[1].bucket_offset = 8;  // overlaps a = [0, 16)
    ExpectProtocol(Build(r), "entry 1");
    ExpectProtocol(Build(r), "overlaps");
  }
  {
    Raw r = Good();
    r.entries[0].bucket_offset = 32;  // a = [32, 48), then b = [16, 24): out of order
    ExpectProtocol(Build(r), "entry 1");
  }
  {
    Raw r = Good();
    RawEntry f;
    f.name = "f32";
    f.dtype = WSYNC_DTYPE_FLOAT32;
    f.shape = {4};
    f.tensor_bytes = 16;
    f.bucket_offset = 24;
    f.length = 6;
    r.entries.push_back(f);
    ExpectProtocol(Build(r), "entry 2");
    ExpectProtocol(Build(r), "multiple");
    r.entries[2].length = 8;
    r.entries[2].tensor_offset = 2;
    ExpectProtocol(Build(r), "multiple");
    r.entries[2].tensor_offset = 8;
    EXPECT_EQ(Decode(Build(r)), WSYNC_OK) << last_error();
  }
  {
    // Empty entries may share an offset with each other and with the next entry.
    Raw r = Good();
    RawEntry e0 = U8("e0", 24, 0), e1 = U8("e1", 24, 0), c = U8("c", 24, 4);
    r.entries.push_back(e0);
    r.entries.push_back(e1);
    r.entries.push_back(c);
    EXPECT_EQ(Decode(Build(r)), WSYNC_OK) << last_error();
  }
}

// ------------------------------------------------------------------------------------------
// Damage everywhere: flips, truncations, random bytes, structured mutations
// ------------------------------------------------------------------------------------------

TEST(ManifestDamage, EverySingleByteFlipIsRefused) {
  const std::vector<uint8_t> good = encode_manifest(Sample());
  ASSERT_EQ(Decode(good), WSYNC_OK);
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xFF}) {
      std::vector<uint8_t> v = good;
      v[i] ^= mask;
      const wsync_status_t st = Decode(v);
      if (i == 4 || i == 5) {
        EXPECT_EQ(st, WSYNC_ERR_VERSION_MISMATCH) << "byte " << i;
      } else {
        EXPECT_EQ(st, WSYNC_ERR_PROTOCOL) << "byte " << i << " mask " << int(mask);
      }
    }
  }
}

TEST(ManifestDamage, EveryTruncationIsRefused) {
  const std::vector<uint8_t> good = encode_manifest(Sample());
  for (size_t n = 0; n < good.size(); ++n) {
    // A copy of exactly n bytes, so a read past n is caught by ASan.
    std::vector<uint8_t> v(good.begin(), good.begin() + n);
    EXPECT_EQ(Decode(v), WSYNC_ERR_PROTOCOL) << "length " << n;
    if (n >= kManifestHeaderBytes + kManifestTrailerBytes) {
      // Also with total_len and checksum made consistent, so the entry parser meets the end.
      Reseal(v);
      EXPECT_EQ(Decode(v), WSYNC_ERR_PROTOCOL) << "resealed length " << n;
    }
  }
}

TEST(ManifestDamage, RandomBytesNeverCrash) {
  std::mt19937_64 rng(2024);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> v(rng() % 300);
    for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
    if (iter % 2 == 0 && v.size() >= 12) {  // get past the magic and version now and then
      v[0] = 'W';
      v[1] = 'S';
      v[2] = 'M';
      v[3] = 'F';
      v[4] = 1;
      v[5] = 0;
    }
    if (iter % 4 == 0 && v.size() >= kManifestHeaderBytes + kManifestTrailerBytes) Reseal(v);
    Manifest out;
    const wsync_status_t st = decode_manifest(v.data(), v.size(), &out);
    EXPECT_TRUE(st == WSYNC_ERR_PROTOCOL || st == WSYNC_ERR_VERSION_MISMATCH || st == WSYNC_OK) << st;
    if (st == WSYNC_OK) {
      EXPECT_EQ(encode_manifest(out), v);
    }
  }
}

TEST(ManifestDamage, MutatedResealedRecordsDecodeCanonicallyOrFail) {
  // Past the checksum, the parser itself is attacked: mutate a valid record, fix its length and
  // checksum, and require a clean refusal or a record that re-encodes to the same bytes.
  const std::vector<uint8_t> good = encode_manifest(Sample());
  std::mt19937_64 rng(99);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> v = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const size_t body = v.size() - kManifestTrailerBytes;
      const size_t at = 12 + rng() % (body - 12);  // keep magic, version, flags
      switch (rng() % 4) {
        case 0: v[at] = static_cast<uint8_t>(rng()); break;
        case 1: v[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 2: v.erase(v.begin() + static_cast<long>(at)); break;
        default: v.insert(v.begin() + static_cast<long>(at), static_cast<uint8_t>(rng())); break;
      }
    }
    Reseal(v);
    Manifest out;
    const wsync_status_t st = decode_manifest(v.data(), v.size(), &out);
    ASSERT_TRUE(st == WSYNC_ERR_PROTOCOL || st == WSYNC_OK) << st << " " << last_error();
    if (st == WSYNC_OK) {
      ++accepted;
      EXPECT_EQ(encode_manifest(out), v);
    }
  }
  // Most damage is caught; some (an id, an offset still in range) is legitimately valid.
  EXPECT_LT(accepted, 3000);
}

// Boxes (many senders): every entry names the box of the full tensor its bytes are from, and
// tensor_bytes / tensor_offset count in the box's packed bytes.
Manifest BoxSample() {
  Manifest m;
  m.update_id = 4;
  m.bucket_index = 1;
  m.flags = kManifestFlagBoxes | kManifestFlagPayloadChecksum;
  ManifestEntry rows = entry("w", WSYNC_DTYPE_FLOAT32, {10, 4}, 0, 48);
  rows.box.ndim = 2;
  rows.box.offset[0] = 3;
  rows.box.extent[0] = 3;
  rows.box.extent[1] = 4;
  rows.tensor_bytes = 48;
  ManifestEntry cols = entry("q", WSYNC_DTYPE_BFLOAT16, {8, 6}, 48, 16, 32);  // a chunk of a box
  cols.box.ndim = 2;
  cols.box.extent[0] = 8;
  cols.box.offset[1] = 3;
  cols.box.extent[1] = 3;
  cols.tensor_bytes = 8 * 3 * 2;
  m.entries = {rows, cols};
  m.bucket_bytes = 64;
  return m;
}

TEST(ManifestBoxes, RoundTripAndRefusals) {
  const Manifest m = BoxSample();
  const std::vector<uint8_t> b = encode_manifest(m);
  Manifest out;
  ASSERT_EQ(WSYNC_OK, decode_manifest(b.data(), b.size(), &out)) << last_error();
  ASSERT_EQ(2u, out.entries.size());
  EXPECT_EQ("[3:6, 0:4]", box_str(out.entries[0].box));
  EXPECT_EQ("[0:8, 3:6]", box_str(out.entries[1].box));
  EXPECT_EQ(48u, out.entries[1].tensor_bytes);
  EXPECT_EQ(encode_manifest(out), b);
  // Without the flag every entry's box is its whole tensor.
  const std::vector<uint8_t> plain = encode_manifest(Sample());
  ASSERT_EQ(WSYNC_OK, decode_manifest(plain.data(), plain.size(), &out));
  for (const auto& e : out.entries) EXPECT_TRUE(box_equal(e.box, full_box(e.ndim, e.shape))) << e.name;

  Manifest bad = BoxSample();
  bad.entries[0].box.extent[0] = 8;  // rows 3..11 of 10
  bad.entries[0].tensor_bytes = 8 * 4 * 4;
  std::vector<uint8_t> v = encode_manifest(bad);
  ExpectProtocol(v, "box [3:11, 0:4] of shape [0:10, 0:4]");
  bad = BoxSample();
  bad.entries[0].tensor_bytes = 160;  // the whole tensor's bytes, not the box's
  bad.entries[0].length = 48;
  ExpectProtocol(encode_manifest(bad), "tensor_bytes 160 but box and dtype give 48");
  bad = BoxSample();
  bad.entries[1].box.offset[1] = -1;
  ExpectProtocol(encode_manifest(bad), "entry 1 ('q'): box");
  v = encode_manifest(BoxSample());
  v.resize(v.size() - 8 - 8);  // cut inside the last box extent, keep a trailer's room
  v.resize(v.size() + 8);
  Reseal(v);
  ExpectProtocol(v, "box extent");
}

// What a receiver places: each box as the chunks of its whole tensor, in bucket order.
TEST(ManifestBoxes, ExpandIntoChunksOfWholeTensors) {
  Manifest m = BoxSample();
  ASSERT_EQ(WSYNC_OK, expand_boxes(&m)) << last_error();
  EXPECT_EQ(0u, m.flags & kManifestFlagBoxes);
  ASSERT_EQ(4u, m.entries.size());
  const ManifestEntry& w = m.entries[0];  // rows 3..6 of float32 [10, 4]: one run
  EXPECT_EQ("w", w.name);
  EXPECT_EQ(160u, w.tensor_bytes);
  EXPECT_EQ(48u, w.tensor_offset);
  EXPECT_EQ(48u, w.length);
  // Bytes [32, 48) of q's packed column box [0:8, 3:6] (bfloat16 [8, 6], 6 bytes a row): the last
  // 4 bytes of row 5's part, then rows 6 and 7's, at their places in the whole tensor.
  const uint64_t want[3][3] = {{68, 4, 48}, {78, 6, 52}, {90, 6, 58}};  // tensor_offset, length, bucket_offset
  for (int k = 0; k < 3; ++k) {
    const ManifestEntry& q = m.entries[1 + k];
    EXPECT_EQ("q", q.name);
    EXPECT_EQ(96u, q.tensor_bytes);
    EXPECT_EQ(want[k][0], q.tensor_offset) << k;
    EXPECT_EQ(want[k][1], q.length) << k;
    EXPECT_EQ(want[k][2], q.bucket_offset) << k;
  }
  Manifest small = BoxSample();
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, expand_boxes(&small, 2));
  EXPECT_NE(std::string::npos, last_error().find("at most 2 chunks")) << last_error();
  Manifest plain = Sample();
  const size_t n = plain.entries.size();
  ASSERT_EQ(WSYNC_OK, expand_boxes(&plain));
  EXPECT_EQ(n, plain.entries.size());
}

TEST(ManifestBoxes, MutatedResealedRecordsDecodeCanonicallyOrFail) {
  const std::vector<uint8_t> good = encode_manifest(BoxSample());
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> v = good;
    const size_t body = v.size() - kManifestTrailerBytes;
    const size_t at = 12 + rng() % (body - 12);
    v[at] = static_cast<uint8_t>(rng());
    Reseal(v);
    Manifest out;
    const wsync_status_t st = decode_manifest(v.data(), v.size(), &out);
    ASSERT_TRUE(st == WSYNC_ERR_PROTOCOL || st == WSYNC_OK) << st << " " << last_error();
    if (st == WSYNC_OK) {
      EXPECT_EQ(encode_manifest(out), v);
      for (const auto& e : out.entries) {
        std::string why;
        EXPECT_TRUE(box_within(e.box, e.ndim, e.shape, &why)) << why;
      }
    }
  }
}

}  // namespace
}  // namespace wsync
