// Tests of the CUDA-free logic of transport 'cuda_ipc' (plugins/transport_cuda_ipc/cipc_logic.h):
// store keys, GPU UUIDs, numbers and options, the staging and post records (round trips, every
// truncation, corrupt fields), slot lookup by pointer range and the slot-reuse bookkeeping.
// No GPU and no CUDA header: the plugin's pure sources are compiled into this test.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cipc_logic.h"

namespace {

// ---- keys, UUIDs, numbers, options -------------------------------------------------------------

TEST(CudaIpcNames, StoreKeys) {
  char k[CIPC_KEY_MAX];
  ASSERT_EQ(cipc_key(k, sizeof k, "g1", "staging", -1), 0);
  EXPECT_STREQ(k, "wsync/g1/cuda_ipc/staging");
  ASSERT_EQ(cipc_key(k, sizeof k, "g1", "post", -1), 0);
  EXPECT_STREQ(k, "wsync/g1/cuda_ipc/post");
  ASSERT_EQ(cipc_key(k, sizeof k, "g1", "ready", 3), 0);
  EXPECT_STREQ(k, "wsync/g1/cuda_ipc/ready/3");
  ASSERT_EQ(cipc_key(k, sizeof k, "train-7", "done", 12), 0);
  EXPECT_STREQ(k, "wsync/train-7/cuda_ipc/done/12");
  // "wsync/g/cuda_ipc/post" is 21 characters: 22 bytes fit, 21 do not.
  char small[22];
  EXPECT_EQ(cipc_key(small, 22, "g", "post", -1), 0);
  EXPECT_STREQ(small, "wsync/g/cuda_ipc/post");
  EXPECT_EQ(cipc_key(small, 21, "g", "post", -1), -1);
  EXPECT_EQ(cipc_key(nullptr, 0, "g", "post", -1), -1);
}

TEST(CudaIpcNames, UuidFormat) {
  uint8_t u[16];
  for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(i);
  char s[CIPC_UUID_STR_LEN + 1];
  cipc_uuid_format(u, s);
  EXPECT_STREQ(s, "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
  EXPECT_EQ(std::strlen(s), static_cast<size_t>(CIPC_UUID_STR_LEN));
  const uint8_t real[16] = {0x5b, 0x2e, 0x9c, 0x1f, 0xa0, 0x4d, 0x7e, 0x33,
                            0x8f, 0xc1, 0xd2, 0xe3, 0xf4, 0x05, 0x16, 0xff};
  cipc_uuid_format(real, s);
  EXPECT_STREQ(s, "GPU-5b2e9c1f-a04d-7e33-8fc1-d2e3f40516ff");
}

TEST(CudaIpcNames, UuidMatch) {
  uint8_t list[3][16];
  for (int d = 0; d < 3; ++d)
    for (int i = 0; i < 16; ++i) list[d][i] = static_cast<uint8_t>(d * 16 + i);
  uint8_t want[16];
  std::memcpy(want, list[2], 16);
  EXPECT_EQ(cipc_uuid_find(want, list, 3), 2);
  EXPECT_EQ(cipc_uuid_find(want, list, 2), -1);  // device 2 not visible
  want[15] ^= 1;                                 // one bit off: another GPU
  EXPECT_EQ(cipc_uuid_find(want, list, 3), -1);
  EXPECT_EQ(cipc_uuid_find(list[0], list, 3), 0);
  EXPECT_EQ(cipc_uuid_find(list[0], list, 0), -1);
}

uint64_t Parse(const std::string& s, int* rc) {
  uint64_t v = 12345;
  *rc = cipc_parse_u64(s.data(), s.size(), &v);
  return v;
}

TEST(CudaIpcNames, ParseDecimal) {
  int rc = 0;
  EXPECT_EQ(Parse("0", &rc), 0u);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(Parse("42", &rc), 42u);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(Parse("007", &rc), 7u);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(Parse("18446744073709551615", &rc), UINT64_MAX);
  EXPECT_EQ(rc, 0);
  for (const char* bad : {"", "18446744073709551616", "99999999999999999999", "-1", "+1", " 1", "1 ", "1a",
                          "0x10", "000000000000000000001"}) {
    Parse(bad, &rc);
    EXPECT_EQ(rc, -1) << "'" << bad << "'";
  }
  uint64_t v = 0;
  EXPECT_EQ(cipc_parse_u64("123", 2, &v), 0);  // only len bytes count (store values are not NUL-terminated)
  EXPECT_EQ(v, 12u);
  EXPECT_EQ(cipc_parse_u64(nullptr, 1, &v), -1);
}

TEST(CudaIpcNames, SessionHex) {
  char s[17];
  cipc_session_hex(0x1234, s);
  EXPECT_STREQ(s, "0000000000001234");
  cipc_session_hex(0xfedcba9876543210ull, s);
  EXPECT_STREQ(s, "fedcba9876543210");
}

TEST(CudaIpcNames, Options) {
  cipc_options_t o;
  char err[256] = "";
  ASSERT_EQ(cipc_parse_options(nullptr, 0, &o, err, sizeof err), WSYNC_OK);
  EXPECT_EQ(o.poll_us, 100u);
  wsync_option_t a[] = {WSYNC_OPTION("poll_us", "0")};
  ASSERT_EQ(cipc_parse_options(a, 1, &o, err, sizeof err), WSYNC_OK);
  EXPECT_EQ(o.poll_us, 0u);
  wsync_option_t b[] = {WSYNC_OPTION("poll_us", "1000000")};
  ASSERT_EQ(cipc_parse_options(b, 1, &o, err, sizeof err), WSYNC_OK);
  EXPECT_EQ(o.poll_us, 1000000u);
  for (const char* bad : {"1000001", "abc", "", "-5", "10us"}) {
    wsync_option_t c[] = {WSYNC_OPTION("poll_us", bad)};
    EXPECT_EQ(cipc_parse_options(c, 1, &o, err, sizeof err), WSYNC_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(err).find("transport.poll_us"), std::string::npos) << err;
  }
  wsync_option_t d[] = {WSYNC_OPTION("poll_us", "10"), WSYNC_OPTION("shm_size", "1")};
  EXPECT_EQ(cipc_parse_options(d, 2, &o, err, sizeof err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("'transport.shm_size'"), std::string::npos) << err;
  EXPECT_EQ(cipc_parse_options(nullptr, 1, &o, err, sizeof err), WSYNC_ERR_INVALID_ARGUMENT);
}

// ---- the staging record ------------------------------------------------------------------------

cipc_staging_t MakeStaging(uint32_t n) {
  cipc_staging_t s;
  std::memset(&s, 0, sizeof s);
  for (int i = 0; i < 16; ++i) s.uuid[i] = static_cast<uint8_t>(0xA0 + i);
  s.session = 0x1122334455667788ull;
  s.pid = 4242;
  s.device = 3;
  s.num_slots = n;
  for (uint32_t i = 0; i < n; ++i) {
    s.slots[i].size = (1ull << 20) * (i + 1);
    s.slots[i].alloc_offset = 4096ull * i;
    for (int j = 0; j < CIPC_HANDLE_BYTES; ++j) {
      s.slots[i].mem_handle[j] = static_cast<uint8_t>(i * 7 + j);
      s.slots[i].event_handle[j] = static_cast<uint8_t>(255 - i * 5 - j);
    }
  }
  return s;
}

std::vector<uint8_t> Encode(const cipc_staging_t& s) {
  std::vector<uint8_t> b(CIPC_STAGING_MAX_BYTES);
  b.resize(cipc_staging_encode(&s, b.data(), b.size()));
  return b;
}

wsync_status_t DecodeStaging(const std::vector<uint8_t>& b, cipc_staging_t* out, std::string* why = nullptr) {
  char err[512] = "";
  const wsync_status_t rc = cipc_staging_decode(b.data(), b.size(), out, err, sizeof err);
  if (why) *why = err;
  return rc;
}

void Put32(std::vector<uint8_t>* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(std::vector<uint8_t>* b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

TEST(CudaIpcStaging, RoundTrip) {
  const cipc_staging_t s = MakeStaging(3);
  const std::vector<uint8_t> b = Encode(s);
  ASSERT_EQ(b.size(), 48u + 3u * 144u);
  EXPECT_EQ(std::memcmp(b.data(), "WCIS", 4), 0);  // the magic reads as text in a store dump
  EXPECT_EQ(b[4], 1);                              // version 1, little-endian
  EXPECT_EQ(b[5], 0);
  EXPECT_EQ(b[24], 0x88);  // session, little-endian
  EXPECT_EQ(b[31], 0x11);
  cipc_staging_t d;
  ASSERT_EQ(DecodeStaging(b, &d), WSYNC_OK);
  EXPECT_EQ(std::memcmp(d.uuid, s.uuid, 16), 0);
  EXPECT_EQ(d.session, s.session);
  EXPECT_EQ(d.pid, 4242u);
  EXPECT_EQ(d.device, 3);
  ASSERT_EQ(d.num_slots, 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.slots[i].size, (1ull << 20) * (i + 1));
    EXPECT_EQ(d.slots[i].alloc_offset, 4096ull * i);
    EXPECT_EQ(std::memcmp(d.slots[i].mem_handle, s.slots[i].mem_handle, 64), 0);
    EXPECT_EQ(std::memcmp(d.slots[i].event_handle, s.slots[i].event_handle, 64), 0);
  }
  // The largest record fits the documented maximum.
  EXPECT_EQ(Encode(MakeStaging(CIPC_MAX_SLOTS)).size(), static_cast<size_t>(CIPC_STAGING_MAX_BYTES));
}

TEST(CudaIpcStaging, EncodeRefusesBadInput) {
  cipc_staging_t s = MakeStaging(2);
  uint8_t buf[CIPC_STAGING_MAX_BYTES];
  EXPECT_EQ(cipc_staging_encode(&s, buf, 48 + 2 * 144 - 1), 0u);  // cap too small
  EXPECT_EQ(cipc_staging_encode(&s, buf, 48 + 2 * 144), 48u + 2 * 144);
  s.num_slots = 0;
  EXPECT_EQ(cipc_staging_encode(&s, buf, sizeof buf), 0u);
  s.num_slots = CIPC_MAX_SLOTS + 1;
  EXPECT_EQ(cipc_staging_encode(&s, buf, sizeof buf), 0u);
}

TEST(CudaIpcStaging, EveryTruncationAndExtensionIsRefused) {
  const std::vector<uint8_t> b = Encode(MakeStaging(2));
  cipc_staging_t d;
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<long>(n));
    EXPECT_EQ(DecodeStaging(cut, &d), WSYNC_ERR_PROTOCOL) << "length " << n;
  }
  std::vector<uint8_t> longer = b;
  longer.push_back(0);
  EXPECT_EQ(DecodeStaging(longer, &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(cipc_staging_decode(nullptr, 100, &d, nullptr, 0), WSYNC_ERR_PROTOCOL);
}

TEST(CudaIpcStaging, CorruptFieldsAreRefused) {
  const std::vector<uint8_t> good = Encode(MakeStaging(2));
  cipc_staging_t d;
  std::string why;

  std::vector<uint8_t> b = good;
  b[0] ^= 0xFF;
  EXPECT_EQ(DecodeStaging(b, &d, &why), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(why.find("magic"), std::string::npos) << why;

  b = good;
  b[4] = 2;  // version 2
  EXPECT_EQ(DecodeStaging(b, &d, &why), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(why.find("version 2"), std::string::npos) << why;

  b = good;
  Put32(&b, 44, 145);  // slot record size
  EXPECT_EQ(DecodeStaging(b, &d, &why), WSYNC_ERR_PROTOCOL);

  b = good;
  Put32(&b, 40, 0);  // no slot
  EXPECT_EQ(DecodeStaging(b, &d, &why), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(why.find("0 staging slots"), std::string::npos) << why;

  // An absurd count, with a length that matches it, is refused before anything is read.
  b.assign(48 + 1000 * 144, 0);
  std::memcpy(b.data(), good.data(), 48);
  Put32(&b, 40, 1000);
  EXPECT_EQ(DecodeStaging(b, &d, &why), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(why.find("1000 staging slots"), std::string::npos) << why;
  b = good;
  Put32(&b, 40, 0xFFFFFFFFu);
  EXPECT_EQ(DecodeStaging(b, &d), WSYNC_ERR_PROTOCOL);

  b = good;
  Put32(&b, 40, 3);  // says 3 slots, carries 2
  EXPECT_EQ(DecodeStaging(b, &d), WSYNC_ERR_PROTOCOL);

  b = good;
  Put64(&b, 48 + 144, 0);  // slot 1 has size 0
  EXPECT_EQ(DecodeStaging(b, &d, &why), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(why.find("slot 1"), std::string::npos) << why;

  b = good;
  Put64(&b, 48 + 8, UINT64_MAX);  // slot 0: offset + size overflows
  EXPECT_EQ(DecodeStaging(b, &d), WSYNC_ERR_PROTOCOL);

  EXPECT_EQ(DecodeStaging(good, &d), WSYNC_OK);  // the unmodified record still decodes
}

// ---- the per-bucket records (carried by the core's control channel) -----------------------------

std::vector<uint8_t> EncodeBucket(uint64_t session, const cipc_post_entry_t& e) {
  std::vector<uint8_t> b(CIPC_BUCKET_BYTES + 8);
  b.resize(cipc_bucket_encode(session, &e, b.data(), b.size()));
  return b;
}

wsync_status_t DecodeBucket(const std::vector<uint8_t>& b, const cipc_staging_t& s, uint64_t seq, cipc_post_entry_t* out,
                            std::string* why = nullptr) {
  char err[512] = "";
  const wsync_status_t rc = cipc_bucket_decode(b.data(), b.size(), &s, seq, out, err, sizeof err);
  if (why) *why = err;
  return rc;
}

TEST(CudaIpcRecords, BucketRoundTrip) {
  const cipc_staging_t s = MakeStaging(2);  // slot 0: 1 MiB, slot 1: 2 MiB
  const cipc_post_entry_t e = {8, 1, 0, s.slots[1].size};  // exactly the whole slot
  const std::vector<uint8_t> b = EncodeBucket(s.session, e);
  ASSERT_EQ(b.size(), 48u);
  EXPECT_EQ(std::memcmp(b.data(), "WCIB", 4), 0);
  cipc_post_entry_t d{};
  ASSERT_EQ(DecodeBucket(b, s, 8, &d), WSYNC_OK);
  EXPECT_EQ(d.seq, 8u);
  EXPECT_EQ(d.slot, 1u);
  EXPECT_EQ(d.offset, 0u);
  EXPECT_EQ(d.len, 2u << 20);
  std::vector<uint8_t> small(CIPC_BUCKET_BYTES - 1);
  EXPECT_EQ(cipc_bucket_encode(s.session, &e, small.data(), small.size()), 0u);  // no room
}

TEST(CudaIpcRecords, BucketEveryTruncationAndExtensionIsRefused) {
  const cipc_staging_t s = MakeStaging(2);
  const std::vector<uint8_t> b = EncodeBucket(s.session, {7, 0, 128, 1000});
  cipc_post_entry_t d;
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<long>(n));
    EXPECT_EQ(DecodeBucket(cut, s, 7, &d), WSYNC_ERR_PROTOCOL) << "length " << n;
  }
  std::vector<uint8_t> longer = b;
  longer.push_back(0);
  EXPECT_EQ(DecodeBucket(longer, s, 7, &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(DecodeBucket({}, s, 7, &d), WSYNC_ERR_PROTOCOL);
}

TEST(CudaIpcRecords, BucketCorruptFieldsAreRefused) {
  const cipc_staging_t s = MakeStaging(2);  // slot 0: 1 MiB, slot 1: 2 MiB
  const cipc_post_entry_t good = {7, 0, 128, 1000};
  cipc_post_entry_t d;
  std::string why;
  auto refused = [&](const cipc_post_entry_t& e, uint64_t seq = 7) {
    return DecodeBucket(EncodeBucket(s.session, e), s, seq, &d, &why) == WSYNC_ERR_PROTOCOL;
  };
  std::vector<uint8_t> b = EncodeBucket(s.session, good);
  b[1] ^= 0x40;
  EXPECT_EQ(DecodeBucket(b, s, 7, &d, &why), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(why.find("magic"), std::string::npos) << why;
  b = EncodeBucket(s.session, good);
  b[4] = 9;
  EXPECT_EQ(DecodeBucket(b, s, 7, &d, &why), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(why.find("version 9"), std::string::npos) << why;
  EXPECT_EQ(DecodeBucket(EncodeBucket(s.session ^ 1, good), s, 7, &d, &why), WSYNC_ERR_PROTOCOL);  // another sender
  EXPECT_NE(why.find("session"), std::string::npos) << why;
  EXPECT_TRUE(refused(good, 8));  // describes bucket 7 but came with bucket 8
  EXPECT_NE(why.find("came with bucket 8"), std::string::npos) << why;
  cipc_post_entry_t e = good;
  e.slot = 2;
  EXPECT_TRUE(refused(e));
  EXPECT_NE(why.find("slot 2 of 2"), std::string::npos) << why;
  e = good;
  e.offset = (1u << 20) - 999;  // offset + len = size + 1
  EXPECT_TRUE(refused(e));
  EXPECT_NE(why.find("run past"), std::string::npos) << why;
  e.offset = (1u << 20) - 1000;  // exactly to the end: fine
  EXPECT_EQ(DecodeBucket(EncodeBucket(s.session, e), s, 7, &d), WSYNC_OK);
  e = good;
  e.offset = (1u << 20) + 1;  // starts past the slot
  e.len = 0;
  EXPECT_TRUE(refused(e));
  e = good;
  e.offset = 1;
  e.len = UINT64_MAX;  // offset + len overflows
  EXPECT_TRUE(refused(e));
}

TEST(CudaIpcRecords, DoneRoundTripAndRefusals) {
  uint8_t b[CIPC_DONE_BYTES + 1];
  ASSERT_EQ(cipc_done_encode(0xabcdef, 42, b, sizeof b), 24u);
  EXPECT_EQ(std::memcmp(b, "WCID", 4), 0);
  uint64_t seq = 0;
  char err[512] = "";
  ASSERT_EQ(cipc_done_decode(b, 24, 0xabcdef, &seq, err, sizeof err), WSYNC_OK);
  EXPECT_EQ(seq, 42u);
  EXPECT_EQ(cipc_done_decode(b, 24, 0xabcdee, &seq, err, sizeof err), WSYNC_ERR_PROTOCOL);  // a leftover
  EXPECT_NE(std::string(err).find("session"), std::string::npos) << err;
  for (size_t n = 0; n < 24; ++n) EXPECT_EQ(cipc_done_decode(b, n, 0xabcdef, &seq, err, sizeof err), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(cipc_done_decode(b, 25, 0xabcdef, &seq, err, sizeof err), WSYNC_ERR_PROTOCOL);
  const cipc_post_entry_t e = {1, 0, 0, 1};
  std::vector<uint8_t> bucket = EncodeBucket(0xabcdef, e);
  EXPECT_EQ(cipc_done_decode(bucket.data(), 24, 0xabcdef, &seq, err, sizeof err), WSYNC_ERR_PROTOCOL);  // wrong magic
  EXPECT_EQ(cipc_done_encode(1, 1, b, 23), 0u);  // no room
}

TEST(CudaIpcRecords, RegionTotal) {
  char err[256] = "";
  uint64_t total = 99;
  char a[8], b[8];
  wsync_iov_t iov[3] = {{a, 8}, {nullptr, 0}, {b, 5}};
  ASSERT_EQ(cipc_iov_total(iov, 3, &total, err, sizeof err), WSYNC_OK);
  EXPECT_EQ(total, 13u);
  ASSERT_EQ(cipc_iov_total(nullptr, 0, &total, err, sizeof err), WSYNC_OK);
  EXPECT_EQ(total, 0u);
  iov[1].len = 1;  // NULL with a length
  EXPECT_EQ(cipc_iov_total(iov, 3, &total, err, sizeof err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("region 1"), std::string::npos) << err;
  wsync_iov_t big[2] = {{a, UINT64_MAX}, {b, 1}};
  EXPECT_EQ(cipc_iov_total(big, 2, &total, err, sizeof err), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cipc_iov_total(nullptr, 2, &total, err, sizeof err), WSYNC_ERR_INVALID_ARGUMENT);
}

// ---- slot lookup ----------------------------------------------------------------------------

TEST(CudaIpcSlots, FindByPointerRange) {
  const cipc_range_t slots[2] = {{0x10000, 0x1000}, {0x30000, 0x2000}};
  uint32_t slot = 99;
  uint64_t off = 99;
  EXPECT_EQ(cipc_find_slot(slots, 2, 0x10000, 0x1000, &slot, &off), CIPC_SLOT_INSIDE);  // the whole slot
  EXPECT_EQ(slot, 0u);
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(cipc_find_slot(slots, 2, 0x30010, 0x10, &slot, &off), CIPC_SLOT_INSIDE);
  EXPECT_EQ(slot, 1u);
  EXPECT_EQ(off, 0x10u);
  EXPECT_EQ(cipc_find_slot(slots, 2, 0x10ff0, 0x10, &slot, &off), CIPC_SLOT_INSIDE);  // ends at the end
  EXPECT_EQ(off, 0xff0u);
  EXPECT_EQ(cipc_find_slot(slots, 2, 0x10ff0, 0x11, &slot, &off), CIPC_SLOT_STRADDLES);  // one byte over
  EXPECT_EQ(slot, 0u);
  EXPECT_EQ(off, 0xff0u);
  EXPECT_EQ(cipc_find_slot(slots, 2, 0x31000, 0x100000, &slot, &off), CIPC_SLOT_STRADDLES);
  EXPECT_EQ(slot, 1u);
  EXPECT_EQ(cipc_find_slot(slots, 2, 0xffff, 1, &slot, &off), CIPC_SLOT_OUTSIDE);   // just before
  EXPECT_EQ(cipc_find_slot(slots, 2, 0xffff, 2, &slot, &off), CIPC_SLOT_OUTSIDE);   // starts before
  EXPECT_EQ(cipc_find_slot(slots, 2, 0x11000, 1, &slot, &off), CIPC_SLOT_OUTSIDE);  // one past the end
  EXPECT_EQ(cipc_find_slot(slots, 2, 0x20000, 16, &slot, &off), CIPC_SLOT_OUTSIDE); // between
  EXPECT_EQ(cipc_find_slot(slots, 2, 0x40000, 16, &slot, &off), CIPC_SLOT_OUTSIDE); // after
  EXPECT_EQ(cipc_find_slot(slots, 0, 0x10000, 1, &slot, &off), CIPC_SLOT_OUTSIDE);  // none registered
}

TEST(CudaIpcSlots, Overlap) {
  uint32_t a = 9, b = 9;
  const cipc_range_t apart[3] = {{0x1000, 0x1000}, {0x2000, 0x1000}, {0x8000, 0x10}};  // touching is fine
  EXPECT_EQ(cipc_ranges_overlap(apart, 3, &a, &b), 0);
  const cipc_range_t over[3] = {{0x1000, 0x1000}, {0x8000, 0x10}, {0x1fff, 0x10}};
  EXPECT_EQ(cipc_ranges_overlap(over, 3, &a, &b), 1);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 2u);
  const cipc_range_t inside[2] = {{0x1000, 0x1000}, {0x1100, 0x10}};
  EXPECT_EQ(cipc_ranges_overlap(inside, 2, &a, &b), 1);
}

// ---- slot reuse bookkeeping ---------------------------------------------------------------

class CudaIpcBook : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cipc_book_init(&b_, 4, 2), 0); }  // ranks 1..3, 2 slots
  void TearDown() override { cipc_book_free(&b_); }
  wsync_status_t Post(uint32_t slot, uint64_t seq, std::vector<uint32_t> ranks) {
    err_[0] = '\0';
    return cipc_book_post(&b_, slot, seq, 64, 100, ranks.data(), static_cast<uint32_t>(ranks.size()), err_,
                          sizeof err_);
  }
  wsync_status_t Done(uint32_t rank, uint64_t v) { return cipc_book_done(&b_, rank, v, err_, sizeof err_); }
  uint32_t Pending(uint32_t slot) { return cipc_book_pending(&b_, slot, nullptr); }
  cipc_book_t b_;
  char err_[512];
};

TEST_F(CudaIpcBook, SlotIsFreeOnlyWhenEveryRankReported) {
  ASSERT_EQ(Post(0, 1, {1, 2, 3}), WSYNC_OK);
  EXPECT_EQ(cipc_book_slot_of(&b_, 1), 0);
  uint32_t first = 0;
  EXPECT_EQ(cipc_book_pending(&b_, 0, &first), 3u);
  EXPECT_EQ(first, 1u);
  ASSERT_EQ(Done(1, 1), WSYNC_OK);
  ASSERT_EQ(Done(3, 1), WSYNC_OK);
  EXPECT_EQ(cipc_book_pending(&b_, 0, &first), 1u);
  EXPECT_EQ(first, 2u);
  EXPECT_TRUE(cipc_book_is_pending(&b_, 0, 2));
  EXPECT_FALSE(cipc_book_is_pending(&b_, 0, 1));
  // The slot is busy: posting into it again is refused and names the rank holding it.
  EXPECT_EQ(Post(0, 2, {1, 2, 3}), WSYNC_ERR_INVALID_STATE);
  EXPECT_NE(std::string(err_).find("rank 2"), std::string::npos) << err_;
  ASSERT_EQ(Done(2, 1), WSYNC_OK);
  EXPECT_EQ(Pending(0), 0u);
  EXPECT_EQ(Post(0, 2, {1, 2, 3}), WSYNC_OK);
}

TEST_F(CudaIpcBook, TwoSlotsAndStaleOrDuplicateDoneValues) {
  ASSERT_EQ(Post(0, 1, {1, 2, 3}), WSYNC_OK);
  ASSERT_EQ(Post(1, 2, {1, 2, 3}), WSYNC_OK);
  ASSERT_EQ(Done(2, 2), WSYNC_OK);  // rank 2 copied both buckets
  EXPECT_EQ(Pending(0), 2u);
  EXPECT_EQ(Pending(1), 2u);
  EXPECT_FALSE(cipc_book_is_pending(&b_, 0, 2));
  EXPECT_FALSE(cipc_book_is_pending(&b_, 1, 2));
  ASSERT_EQ(Done(1, 1), WSYNC_OK);
  ASSERT_EQ(Done(1, 1), WSYNC_OK);  // repeated: nothing changes
  ASSERT_EQ(Done(1, 0), WSYNC_OK);  // stale (the reset value): nothing changes
  EXPECT_EQ(Pending(0), 1u);
  EXPECT_TRUE(cipc_book_is_pending(&b_, 1, 1));
  EXPECT_EQ(b_.done[1], 1u);
  // A value beyond the last bucket posted is a leftover of another session: refused, not applied.
  EXPECT_EQ(Done(3, 5), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(std::string(err_).find("rank 3 reports bucket 5"), std::string::npos) << err_;
  EXPECT_TRUE(cipc_book_is_pending(&b_, 0, 3));
  EXPECT_EQ(Done(0, 1), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Done(4, 1), WSYNC_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(Done(3, 2), WSYNC_OK);
  EXPECT_EQ(Pending(0), 0u);
  EXPECT_EQ(Pending(1), 1u);  // rank 1 still has bucket 2 to copy
}

// The core reads replies while a bucket's MANIFEST is being answered, so a receiver's "copied"
// report for a bucket can arrive before the core's send_post of it: the record it copied from went
// out with describe_send. (On an H200 this failed the first real run: "rank 1 reports bucket 1
// copied, but the last bucket posted is 0".)
TEST_F(CudaIpcBook, DoneBeforePostIsAcceptedOnceDescribed) {
  EXPECT_EQ(Done(1, 1), WSYNC_ERR_PROTOCOL);  // not even described: a leftover or a confused receiver
  EXPECT_NE(std::string(err_).find("last bucket described or posted is 0"), std::string::npos) << err_;
  cipc_book_describe(&b_, 1);
  ASSERT_EQ(Done(1, 1), WSYNC_OK) << err_;
  EXPECT_EQ(Done(2, 2), WSYNC_ERR_PROTOCOL);  // bucket 2 was never described
  ASSERT_EQ(Post(0, 1, {1, 2, 3}), WSYNC_OK);
  EXPECT_FALSE(cipc_book_is_pending(&b_, 0, 1));  // it already copied: nothing owed
  EXPECT_TRUE(cipc_book_is_pending(&b_, 0, 2));
  EXPECT_EQ(Pending(0), 2u);
  ASSERT_EQ(Done(2, 1), WSYNC_OK);
  ASSERT_EQ(Done(3, 1), WSYNC_OK);
  EXPECT_EQ(Pending(0), 0u);
}

TEST_F(CudaIpcBook, ForgetPeerFreesItsSlots) {
  ASSERT_EQ(Post(0, 1, {1, 3}), WSYNC_OK);
  ASSERT_EQ(Post(1, 2, {1, 2, 3}), WSYNC_OK);
  ASSERT_EQ(Done(1, 2), WSYNC_OK);
  EXPECT_EQ(Pending(0), 1u);
  cipc_book_forget(&b_, 3);
  EXPECT_EQ(Pending(0), 0u);  // only rank 3 held it
  EXPECT_EQ(Pending(1), 1u);  // rank 2 still holds bucket 2
  ASSERT_EQ(Done(3, 2), WSYNC_OK);  // a forgotten rank's late report is ignored
  EXPECT_EQ(Post(0, 3, {1, 3}), WSYNC_ERR_INVALID_STATE);  // never sent to again
  EXPECT_NE(std::string(err_).find("rank 3 was forgotten"), std::string::npos) << err_;
  EXPECT_EQ(Post(0, 3, {1, 2}), WSYNC_OK);
  cipc_book_forget(&b_, 2);
  EXPECT_EQ(Pending(1), 0u);
  EXPECT_EQ(Pending(0), 1u);
  cipc_book_forget(&b_, 9);  // outside the world: ignored
}

TEST_F(CudaIpcBook, PostIsAllOrNothing) {
  EXPECT_EQ(Post(2, 1, {1}), WSYNC_ERR_INVALID_ARGUMENT);     // no slot 2
  EXPECT_EQ(Post(0, 0, {1}), WSYNC_ERR_INVALID_ARGUMENT);     // seq must grow from 0
  EXPECT_EQ(Post(0, 1, {1, 0}), WSYNC_ERR_INVALID_ARGUMENT);  // rank 0 is the sender
  EXPECT_EQ(Post(0, 1, {1, 4}), WSYNC_ERR_INVALID_ARGUMENT);  // outside the world
  EXPECT_EQ(Post(0, 1, {2, 1, 2}), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("rank 2 is listed twice"), std::string::npos) << err_;
  EXPECT_EQ(b_.last_posted, 0u);
  EXPECT_EQ(b_.slot[0].seq, 0u);
  EXPECT_EQ(Pending(0), 0u);
  EXPECT_EQ(cipc_book_check_post(&b_, 0, 5, nullptr, 0, err_, sizeof err_), WSYNC_OK);
  EXPECT_EQ(b_.last_posted, 0u);  // checking changes nothing
  ASSERT_EQ(Post(0, 5, {1}), WSYNC_OK);
  EXPECT_EQ(Post(1, 5, {1}), WSYNC_ERR_INVALID_ARGUMENT);  // not above the last bucket
  EXPECT_EQ(Post(1, 4, {1}), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Post(1, 6, {}), WSYNC_OK);  // nobody to wait for: free at once
  EXPECT_EQ(Pending(1), 0u);
  EXPECT_EQ(cipc_book_slot_of(&b_, 6), 1);
  EXPECT_EQ(cipc_book_slot_of(&b_, 0), -1);
  EXPECT_EQ(cipc_book_slot_of(&b_, 7), -1);
}

}  // namespace
