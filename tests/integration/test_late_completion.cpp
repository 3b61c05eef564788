// A receiver that takes a bucket, ACKs it and closes, before the sender's transport has seen its
// own send of that bucket complete. The bucket reached the receiver: the send that carried it
// must succeed, and the next one must fail naming the receiver, in well under the timeout.
//
// The race is real (it broke the Rust binding's test under load: the sender read the ACK, then the
// closed connection, while UCX had not yet reported the send done, and failed the bucket that had
// arrived). Transport 'faulty' makes it certain: its "late" fault hides a send's completion until
// the core forgets the peer (tests/integration/faulty_transport.c).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "wsync.h"

using namespace harness;

namespace {

constexpr int64_t kTimeoutMs = 10000;

wsync_tensor_t tensor(const char* name, std::vector<float>* data) {
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  t.name = name;
  t.dtype = WSYNC_DTYPE_FLOAT32;
  t.ndim = 1;
  t.shape[0] = static_cast<int64_t>(data->size());
  t.nbytes = data->size() * sizeof(float);
  t.data = data->data();
  return t;
}

#define SENDER_FAIL(code, ...)                                         \
  do {                                                                 \
    std::fprintf(stderr, "sender: " __VA_ARGS__);                      \
    std::fprintf(stderr, ": %s\n", wsync_last_error());                \
    return code;                                                       \
  } while (0)

// The trainer: bucket 0 with its completion hidden, then bucket 1 after the receiver left.
int run_sender(const std::string& dir) {
  const std::string fault_file = dir + "/fault", addr_file = dir + "/store.addr";
  setenv("WSYNC_FAULTY_FILE", fault_file.c_str(), 1);
  FILE* f = std::fopen(fault_file.c_str(), "w");
  std::fprintf(f, "late 1\n");  // the first send_post of this process: bucket 0
  std::fclose(f);
  const std::string timeout = std::to_string(kTimeoutMs);
  wsync_option_t opts[] = {WSYNC_OPTION("store_addr_file", addr_file.c_str()),
                           WSYNC_OPTION("timeout_ms", timeout.c_str())};
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = 1;
  cfg.group_name = "late";
  cfg.transport = "faulty";
  cfg.options = opts;
  cfg.num_options = 2;
  cfg.timeout_ms = 20000;
  wsync_group_t* g = nullptr;
  if (wsync_group_init(&cfg, &g) != WSYNC_OK) SENDER_FAIL(10, "init");
  std::vector<float> a(100, 1.0f), b(100, 2.0f);
  wsync_tensor_t ta = tensor("a", &a), tb = tensor("b", &b);
  if (wsync_group_send_batch(g, &ta, 1, -1) != WSYNC_OK)
    SENDER_FAIL(11, "bucket 0 reached the receiver (it ACKed), yet its send failed");
  const auto t0 = std::chrono::steady_clock::now();
  wsync_status_t st = wsync_group_send_batch(g, &tb, 1, -1);
  if (st == WSYNC_OK) st = wsync_group_finalize(g, 1, -1);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  const std::string why = wsync_last_error();
  std::fprintf(stderr, "sender: after the receiver left: %s after %lld ms: %s\n", wsync_status_name(st),
               static_cast<long long>(ms), why.c_str());
  if (st != WSYNC_ERR_PEER_FAILED) SENDER_FAIL(12, "bucket 1: expected WSYNC_ERR_PEER_FAILED");
  if (why.find("receiver rank 1") == std::string::npos || why.find("bucket 1") == std::string::npos)
    SENDER_FAIL(13, "bucket 1: the error must name receiver rank 1 and bucket 1");
  if (ms > kTimeoutMs / 2) SENDER_FAIL(14, "bucket 1: noticed only after %lld ms", static_cast<long long>(ms));
  wsync_group_destroy(g);
  return 0;
}

TEST(LateCompletion, AReceiverThatAckedAndClosedDidNotLoseItsBucket) {
  setenv("WSYNC_PLUGIN_PATH", WSYNC_TEST_FAULTY_DIR, 1);
  setenv("WSYNC_GROUP_SECRET", "late-completion-test-secret-0123456789abcdef", 0);
  const std::string dir = temp_dir();
  const pid_t sender = spawn([dir] { return run_sender(dir); });
  const std::string addr = read_addr_file(dir + "/store.addr", 20000);
  ASSERT_FALSE(addr.empty()) << "the sender wrote no store address";
  wsync_receiver_t* rx = nullptr;
  ASSERT_EQ(WSYNC_OK, join(addr, 1, "late", 20000, &rx)) << wsync_last_error();
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  ASSERT_EQ(WSYNC_OK, wsync_receiver_next(rx, &ev, kTimeoutMs)) << wsync_last_error();
  ASSERT_EQ(WSYNC_EVENT_BUCKET, ev.kind);
  ASSERT_EQ(1u, ev.num_tensors);
  const std::vector<float> want(100, 1.0f);
  EXPECT_EQ(0, std::memcmp(want.data(), ev.tensors[0].data, want.size() * sizeof(float))) << "bucket 0's bytes";
  wsync_receiver_destroy(rx);  // the ACK went out before the event: leave now
  EXPECT_EQ(0, wait_child(sender, 30000)) << "the sender's report is above";
}

}  // namespace
