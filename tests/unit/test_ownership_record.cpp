// The many-sender records on the wire: round trips that plan to the same digest, and every hostile
// variant refused with WSYNC_ERR_PROTOCOL naming the field (each crafted record is re-checksummed,
// so the check under test, not the checksum, is what refuses it), every truncation and every
// flipped byte of a real record refused without reading past the input.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/error.h"
#include "planner/ownership_record.h"

namespace wsync {
namespace {

SenderRecord sample_sender() {
  SenderRecord r;
  r.rank = 2;
  OwnedTensor w;
  w.name = "layers.0.mlp.w";
  w.dtype = WSYNC_DTYPE_BFLOAT16;
  w.ndim = 2;
  w.shape[0] = 10;
  w.shape[1] = 4;
  EXPECT_EQ(WSYNC_OK, chunk_box(2, w.shape, 0, 4, 2, &w.box));
  r.tensors.push_back(w);
  OwnedTensor norm;
  norm.name = "norm";
  norm.dtype = WSYNC_DTYPE_FLOAT32;
  norm.ndim = 1;
  norm.shape[0] = 4;
  norm.box = full_box(1, norm.shape);
  norm.replica = true;
  r.tensors.push_back(norm);
  OwnedTensor step;
  step.name = "step";
  step.dtype = WSYNC_DTYPE_INT64;
  r.tensors.push_back(step);
  return r;
}

std::vector<Need> sample_needs() {
  Need full{"norm", true, Box{}};
  Need tp;
  tp.name = "layers.0.mlp.w";
  tp.full = false;
  tp.box.ndim = 2;
  tp.box.extent[0] = 10;
  tp.box.offset[1] = 2;
  tp.box.extent[1] = 2;
  return {tp, full};
}

// Re-checksum a record changed in place (the trailer is the last 8 bytes).
void reseal(std::vector<uint8_t>* b) {
  const uint32_t total = static_cast<uint32_t>(b->size());
  std::memcpy(b->data() + 8, &total, 4);
  const uint64_t sum = checksum64(b->data(), b->size() - 8);
  std::memcpy(b->data() + b->size() - 8, &sum, 8);
}

wsync_status_t decode(const std::vector<uint8_t>& b, std::string* msg) {
  SenderRecord r;
  uint64_t u = 0;
  const wsync_status_t st = decode_sender_record(b.data(), b.size(), &r, &u);
  *msg = last_error();
  return st;
}

TEST(OwnershipRecord, RoundTripsPlanToTheSameDigest) {
  const SenderRecord r = sample_sender();
  const std::vector<uint8_t> b = encode_sender_record(r, 7);
  SenderRecord back;
  uint64_t update = 0;
  ASSERT_EQ(WSYNC_OK, decode_sender_record(b.data(), b.size(), &back, &update)) << last_error();
  EXPECT_EQ(7u, update);
  ASSERT_EQ(r.tensors.size(), back.tensors.size());
  EXPECT_EQ(r.rank, back.rank);
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    EXPECT_EQ(r.tensors[i].name, back.tensors[i].name);
    EXPECT_EQ(r.tensors[i].dtype, back.tensors[i].dtype);
    EXPECT_TRUE(box_equal(r.tensors[i].box, back.tensors[i].box)) << box_str(back.tensors[i].box);
    EXPECT_EQ(r.tensors[i].replica, back.tensors[i].replica);
  }
  // Every rank's record: the decoded ones plan exactly as the originals.
  std::vector<SenderRecord> orig, decoded;
  for (uint32_t k = 0; k < 4; ++k) {
    SenderRecord s = sample_sender();
    s.rank = k;
    EXPECT_EQ(WSYNC_OK, chunk_box(2, s.tensors[0].shape, 0, 4, k, &s.tensors[0].box));
    if (k > 0) s.tensors.pop_back();  // "step" is sender 0's alone
    orig.push_back(s);
    const auto enc = encode_sender_record(s, 1);
    SenderRecord d;
    ASSERT_EQ(WSYNC_OK, decode_sender_record(enc.data(), enc.size(), &d, &update));
    decoded.push_back(d);
  }
  OwnershipPlan a, c;
  ASSERT_EQ(WSYNC_OK, plan_ownership(orig, &a)) << last_error();
  ASSERT_EQ(WSYNC_OK, plan_ownership(decoded, &c)) << last_error();
  EXPECT_EQ(a.digest, c.digest);

  const auto nb = encode_needs(5, 7, sample_needs());
  uint32_t rank = 0;
  std::vector<Need> needs;
  ASSERT_EQ(WSYNC_OK, decode_needs(nb.data(), nb.size(), &rank, &update, &needs)) << last_error();
  EXPECT_EQ(5u, rank);
  ASSERT_EQ(2u, needs.size());
  EXPECT_FALSE(needs[0].full);
  EXPECT_EQ("[0:10, 2:4]", box_str(needs[0].box));
  EXPECT_TRUE(needs[1].full);
  std::vector<Transfer> ts;
  EXPECT_EQ(WSYNC_OK, plan_transfers(a, needs, &ts)) << last_error();
}

TEST(OwnershipRecord, EveryTruncationAndFlippedByteIsRefused) {
  const std::vector<uint8_t> b = encode_sender_record(sample_sender(), 3);
  std::string msg;
  for (size_t n = 0; n < b.size(); ++n) {
    const std::vector<uint8_t> cut(b.begin(), b.begin() + n);
    EXPECT_EQ(WSYNC_ERR_PROTOCOL, decode(cut, &msg)) << n;
  }
  for (size_t i = 0; i < b.size(); ++i) {
    std::vector<uint8_t> x = b;
    x[i] ^= 0x40;
    const wsync_status_t st = decode(x, &msg);
    EXPECT_TRUE(st == WSYNC_ERR_PROTOCOL || st == WSYNC_ERR_VERSION_MISMATCH) << i << ": " << msg;
  }
  std::vector<uint8_t> x = b;
  x[12] ^= 1;  // the rank, inside the checksum
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, decode(x, &msg));
  EXPECT_NE(std::string::npos, msg.find("checksum")) << msg;
}

// Offsets into sample_sender()'s encoding: header 28 bytes, then entry 0:
// name_len(2) "layers.0.mlp.w"(14) dtype ndim flags, shape, offset, extent (2 x i64 each).
constexpr size_t kE0 = 28, kE0Dtype = kE0 + 2 + 14, kE0Ndim = kE0Dtype + 1, kE0Flags = kE0Ndim + 1,
                 kE0Shape = kE0Flags + 1, kE0Offset = kE0Shape + 16;

TEST(OwnershipRecord, CraftedRecordsAreRefusedNamingTheField) {
  const std::vector<uint8_t> good = encode_sender_record(sample_sender(), 3);
  std::string msg;
  auto crafted = [&](size_t at, std::vector<uint8_t> bytes, const std::string& want) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + at, bytes.data(), bytes.size());
    reseal(&b);
    EXPECT_EQ(WSYNC_ERR_PROTOCOL, decode(b, &msg)) << want;
    EXPECT_NE(std::string::npos, msg.find(want)) << "'" << want << "' missing from: " << msg;
  };
  crafted(kE0Dtype, {99}, "unknown dtype 99");
  crafted(kE0Ndim, {9}, "ndim 9 exceeds 8");
  crafted(kE0Flags, {0x82}, "unknown flags 0x82");
  crafted(kE0Shape, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "shape[0] is negative");
  crafted(kE0Offset, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "offset[0] is negative");
  crafted(kE0, {0, 0}, "name_len 0");
  crafted(kE0 + 2, {'a', 0x01}, "\\x01");
  crafted(kE0, {0xff, 0xff}, "name_len 65535");
  crafted(24, {0xff, 0xff, 0xff, 0x7f}, "tensors, more than");
  crafted(24, {4, 0, 0, 0}, "record ends inside");
  crafted(24, {2, 0, 0, 0}, "bytes after the last entry");
  crafted(6, {2, 0}, "record kind 2, expected 1");
  // The same name twice: entry 1 renamed to entry 0's name is not possible in place (lengths
  // differ), so build it.
  SenderRecord dup = sample_sender();
  dup.tensors[1].name = dup.tensors[0].name;
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, decode(encode_sender_record(dup, 1), &msg));
  EXPECT_NE(std::string::npos, msg.find("again")) << msg;
  std::vector<uint8_t> v = good;
  v[4] = 2;
  reseal(&v);
  EXPECT_EQ(WSYNC_ERR_VERSION_MISMATCH, decode(v, &msg));
  v = good;
  v[0] = 'X';
  reseal(&v);
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, decode(v, &msg));
  EXPECT_NE(std::string::npos, msg.find("bad magic")) << msg;
  // A needs record is not a sender record, and the other way round.
  const auto nb = encode_needs(1, 1, sample_needs());
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, decode(nb, &msg));
  uint32_t rank = 0;
  uint64_t u = 0;
  std::vector<Need> needs;
  EXPECT_EQ(WSYNC_ERR_PROTOCOL, decode_needs(good.data(), good.size(), &rank, &u, &needs));
  EXPECT_TRUE(needs.empty());
}

}  // namespace
}  // namespace wsync
