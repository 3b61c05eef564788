// The control connection over real TCP on loopback: a peer's last words (an ABORT_UPDATE, a CLOSE)
// survive our own send failing because the peer closed (its close with our frame unread resets
// the connection): recv still returns them, then reports the connection closed.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "control/control_conn.h"
#include "control/frames.h"

namespace wsync {
namespace {

// A connected pair: `a` accepted by the listener, `b` connected to it.
void connect_pair(ControlConn* a, ControlConn* b) {
  ControlListener l;
  ASSERT_EQ(WSYNC_OK, l.listen("127.0.0.1", 0)) << last_error();
  ASSERT_EQ(WSYNC_OK, ControlConn::connect("127.0.0.1", l.port(), 2000, b)) << last_error();
  int fd = -1;
  ASSERT_EQ(WSYNC_OK, l.accept(2000, &fd)) << last_error();
  a->adopt(fd);
}

TEST(ControlConn, ThePeersLastWordsOutliveOurFailedSend) {
  ControlConn sender, receiver;
  connect_pair(&sender, &receiver);
  receiver.set_peer_name("the sender");
  // The receiver's ACK reaches the sender, which never reads it: it says why it gives up, says
  // goodbye and closes (with unread bytes: the kernel resets the connection).
  ASSERT_EQ(WSYNC_OK, receiver.send(MsgType::kAck, std::vector<uint8_t>(16, 1), 1000));
  ASSERT_EQ(WSYNC_OK, sender.send(MsgType::kAbortUpdate, encode_abort_update({"sender 1 failed"}), 1000));
  ASSERT_EQ(WSYNC_OK, sender.send(MsgType::kClose, {}, 1000));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  sender.close();
  // The receiver answers before reading: its send fails once the reset is in.
  wsync_status_t st = WSYNC_OK;
  for (int i = 0; i < 100 && st == WSYNC_OK; ++i) {
    st = receiver.send(MsgType::kAck, std::vector<uint8_t>(16, 2), 1000);
    if (st == WSYNC_OK) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(WSYNC_ERR_PEER_FAILED, st) << "the send never failed";
  EXPECT_NE(std::string::npos, last_error().find("the sender is gone")) << last_error();
  EXPECT_TRUE(receiver.closed());
  ASSERT_TRUE(receiver.has_frame()) << "the ABORT_UPDATE was dropped with the socket";
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kAbortUpdate), receiver.next_type());
  Frame f;
  ASSERT_EQ(WSYNC_OK, receiver.recv(&f, 0)) << last_error();
  AbortUpdateBody body;
  ASSERT_EQ(WSYNC_OK, decode_abort_update(f.body, &body));
  EXPECT_EQ("sender 1 failed", body.reason);
  ASSERT_EQ(WSYNC_OK, receiver.recv(&f, 0)) << last_error();
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kClose), f.type);
  EXPECT_EQ(WSYNC_ERR_PEER_FAILED, receiver.recv(&f, 0));
}

}  // namespace
}  // namespace wsync
