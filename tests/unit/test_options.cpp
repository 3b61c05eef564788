// The option parsers of the public ABI (common/options.h): what they accept, and that a value is
// judged as a whole, never up to an embedded NUL (a value from the wire, e.g. a sender's
// transport.* option in the group info, is a std::string that may hold one; found by
// tests/fuzz/fuzz_options.cpp's invariant).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/error.h"
#include "common/options.h"

namespace wsync {
namespace {

TEST(Options, UnsignedIntegersWithSuffixesAndRanges) {
  uint64_t n = 0;
  EXPECT_EQ(parse_u64_option("k", "512MiB", 0, UINT64_MAX, &n), WSYNC_OK);
  EXPECT_EQ(n, 512ull << 20);
  EXPECT_EQ(parse_u64_option("k", "3k", 0, UINT64_MAX, &n), WSYNC_OK);
  EXPECT_EQ(n, 3000u);
  EXPECT_EQ(parse_u64_option("k", "18446744073709551615", 0, UINT64_MAX, &n), WSYNC_OK);
  EXPECT_EQ(n, UINT64_MAX);
  EXPECT_EQ(parse_u64_option("k", "18446744073709551616", 0, UINT64_MAX, &n), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("out of range"), std::string::npos) << last_error();
  EXPECT_EQ(parse_u64_option("k", "17GiB", 0, UINT64_MAX >> 30, &n), WSYNC_ERR_INVALID_ARGUMENT);
  for (const char* bad : {"", "-1", " 7", "7 ", "0x10", "1.5", "7kb", "k"}) {
    EXPECT_EQ(parse_u64_option("bucket_bytes", bad, 0, UINT64_MAX, &n), WSYNC_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(last_error().find("option 'bucket_bytes'"), std::string::npos) << last_error();
  }
}

TEST(Options, AValueWithANulIsRefusedNotCutShort) {
  uint64_t n = 99;
  EXPECT_EQ(parse_u64_option("timeout_ms", std::string("10\0junk", 7), 1, 1000, &n), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(n, 99u);
  EXPECT_NE(last_error().find("option 'timeout_ms'"), std::string::npos) << last_error();
  EXPECT_EQ(parse_u64_option("timeout_ms", std::string("10\0", 3), 1, 1000, &n), WSYNC_ERR_INVALID_ARGUMENT);
  bool b = false;
  EXPECT_EQ(parse_bool_option("verify_payload", std::string("1\0no", 4), &b), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(b);
  EXPECT_NE(last_error().find("option 'verify_payload' has a NUL byte"), std::string::npos) << last_error();
  EXPECT_EQ(parse_bool_option("verify_payload", std::string("true\0", 5), &b), WSYNC_ERR_INVALID_ARGUMENT);
}

TEST(Options, Booleans) {
  bool b = false;
  for (const char* yes : {"1", "true", "TRUE", "yes", "On"}) {
    b = false;
    EXPECT_EQ(parse_bool_option("k", yes, &b), WSYNC_OK) << yes;
    EXPECT_TRUE(b) << yes;
  }
  for (const char* no : {"0", "false", "No", "OFF"}) {
    b = true;
    EXPECT_EQ(parse_bool_option("k", no, &b), WSYNC_OK) << no;
    EXPECT_FALSE(b) << no;
  }
  EXPECT_EQ(parse_bool_option("k", "", &b), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_bool_option("k", "2", &b), WSYNC_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace wsync
