// The group info a receiver reads from the store before it connects anywhere
// (control/group_info.h): round trips, and refusals that name the line, with what the record
// says made printable. A NUL byte is refused: every value ends up as a C string (the host to
// connect to, a transport option for the plugin), which a NUL would cut short without a word
// ("control_host=10.0.0.7\0evil" read as 10.0.0.7).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "control/group_info.h"

namespace wsync {
namespace {

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

const std::string kGood =
    "protocol=3\ngroup=policy\nworld_size=3\ntransport=ucx\ncontrol_host=127.0.0.1\ncontrol_port=29501\n";

TEST(GroupInfo, RoundTripWithTransportOptions) {
  GroupInfo g;
  g.protocol = 3;
  g.group_name = "policy";
  g.world_size = 3;
  g.transport = "ucx";
  g.control_host = "10.0.0.7";
  g.control_port = 29501;
  g.transport_options = {{"ucx_tls", "tcp,sm"}, {"k", "a=b"}};
  GroupInfo d;
  ASSERT_EQ(decode_group_info(encode_group_info(g), &d), WSYNC_OK) << last_error();
  EXPECT_EQ(d.protocol, 3u);
  EXPECT_EQ(d.group_name, "policy");
  EXPECT_EQ(d.world_size, 3u);
  EXPECT_EQ(d.transport, "ucx");
  EXPECT_EQ(d.control_host, "10.0.0.7");
  EXPECT_EQ(d.control_port, 29501);
  EXPECT_EQ(d.transport_options, g.transport_options);
  ASSERT_EQ(decode_group_info(bytes(kGood + "\nnewer_key=1\n"), &d), WSYNC_OK) << "unknown keys are a newer sender's";
}

TEST(GroupInfo, NulBytesAreRefused) {
  GroupInfo d;
  d.control_port = 7;
  std::string s = kGood;
  s.replace(s.find("127.0.0.1"), 9, std::string("10.0.0.7\0evil", 13));
  EXPECT_EQ(decode_group_info(bytes(s), &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "group info has a NUL byte at offset 72");
  EXPECT_EQ(d.control_port, 7) << "a refusal leaves *out alone";
  EXPECT_EQ(decode_group_info(bytes(kGood + std::string("transport.tls=tcp\0rdma\n", 23)), &d), WSYNC_ERR_PROTOCOL);
}

TEST(GroupInfo, MalformedLinesAreNamedPrintably) {
  GroupInfo d;
  EXPECT_EQ(decode_group_info(bytes(kGood + "garbage\x01\x1b[2J\n"), &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "group info line 'garbage\\x01\\x1b[2J' has no '='");
  std::string s = kGood;
  s.replace(s.find("29501"), 5, "0");
  EXPECT_EQ(decode_group_info(bytes(s), &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(last_error(), "group info control_port '0' is invalid");
  s = kGood;
  s.replace(s.find("world_size=3"), 12, "world_size=99999999999999999999");
  EXPECT_EQ(decode_group_info(bytes(s), &d), WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(decode_group_info(bytes("protocol=3\n"), &d), WSYNC_ERR_PROTOCOL);
  EXPECT_NE(last_error().find("missing fields"), std::string::npos);
  EXPECT_EQ(decode_group_info(std::vector<uint8_t>(65537, 'a'), &d), WSYNC_ERR_PROTOCOL);
}

}  // namespace
}  // namespace wsync
