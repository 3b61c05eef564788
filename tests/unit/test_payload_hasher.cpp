// PayloadHasher (src/common/payload_hasher): the checksum the sender and the receiver take on a
// thread of their own. Ranges fed in order hash as their concatenation; idle() and the wake fd
// tell a waiting thread when the digest is ready; cancel() lets go of the memory; the thread runs
// 10 nice levels below its caller (the thread that moves the bytes goes first).
#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <poll.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cerrno>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/payload_hasher.h"

namespace {

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 9));
  return v;
}

// The nice value of each of this process's threads, by thread id (field 19 of
// /proc/self/task/<tid>/stat).
std::map<std::string, int> ThreadNiceValues() {
  std::map<std::string, int> out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string stat;
    std::getline(f, stat);
    const size_t close = stat.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    // fields 3.. follow the name; nice is field 19
    for (int i = 3; i <= 19 && (rest >> field); ++i) {
      if (i == 19) out[e->d_name] = std::stoi(field);
    }
  }
  closedir(d);
  return out;
}

TEST(PayloadHasher, RangesFedInOrderHashAsTheirConcatenation) {
  const auto data = Bytes(5 << 20, 7);
  wsync::PayloadHasher h;
  for (int round = 0; round < 2; ++round) {  // a reset starts over
    h.reset();
    h.feed(data.data(), 1000);
    h.feed(data.data() + 1000, 0);  // an empty range is nothing
    h.feed(data.data() + 1000, (3 << 20) - 1000);
    h.feed(data.data() + (3 << 20), data.size() - (3 << 20));
    EXPECT_EQ(XXH3_64bits(data.data(), data.size()), h.digest()) << "round " << round;
    EXPECT_TRUE(h.idle());
  }
  wsync::PayloadHasher fresh;  // nothing fed: the checksum of no bytes
  EXPECT_EQ(XXH3_64bits(nullptr, 0), fresh.digest());
}

TEST(PayloadHasher, TheWakeFdSignalsWhenEverythingFedIsHashed) {
  const auto data = Bytes(64 << 20, 3);
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  wsync::PayloadHasher h;
  h.reset();
  h.set_wake_fd(fd);
  for (size_t off = 0; off < data.size(); off += 1 << 20) h.feed(data.data() + off, 1 << 20);
  // A waiter that sleeps on the fd until the hasher is idle (as the sender's pipeline thread does:
  // a wake-up while ranges were still being fed is an early one, never a missing one).
  for (int wakes = 0; !h.idle(); ++wakes) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(1, poll(&p, 1, 10000)) << "no wake-up within 10 s while the hasher was busy";
    uint64_t n = 0;
    ASSERT_EQ(static_cast<ssize_t>(sizeof n), read(fd, &n, sizeof n));
    ASSERT_LT(wakes, 64) << "more wake-ups than ranges";
  }
  EXPECT_EQ(XXH3_64bits(data.data(), data.size()), h.digest());
  h.set_wake_fd(-1);
  close(fd);
}

TEST(PayloadHasher, CancelLetsGoOfTheMemoryAtOnce) {
  wsync::PayloadHasher h;
  h.reset();
  auto data = std::make_unique<std::vector<uint8_t>>(Bytes(256 << 20, 9));
  for (size_t off = 0; off < data->size(); off += 1 << 20) h.feed(data->data() + off, 1 << 20);
  const auto t0 = std::chrono::steady_clock::now();
  h.cancel();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(h.idle());
  data.reset();  // under ASan a read after this would be reported
  EXPECT_LT(ms, 1000) << "cancel waited for more than the range in progress";
  h.reset();  // and it hashes again afterwards
  const auto more = Bytes(4096, 1);
  h.feed(more.data(), more.size());
  EXPECT_EQ(XXH3_64bits(more.data(), more.size()), h.digest());
}

TEST(PayloadHasher, ItsThreadRunsTenNiceLevelsBelowItsCaller) {
  errno = 0;
  const int mine = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(0, errno);
  if (mine > 9) GTEST_SKIP() << "this process already runs at nice " << mine;
  const auto before = ThreadNiceValues();
  wsync::PayloadHasher h;
  h.reset();  // starts the thread
  const auto data = Bytes(1 << 20, 5);
  h.feed(data.data(), data.size());
  h.digest();  // the thread has run (and lowered its priority first)
  const auto after = ThreadNiceValues();
  // Threads that were not there before: the hasher's, at nice + 10. (Counting all threads at
  // nice + 10 raced with an earlier test's hasher thread still exiting: CI, under load.)
  int lowered = 0;
  for (const auto& kv : after) lowered += before.count(kv.first) == 0 && kv.second == mine + 10;
  EXPECT_EQ(1, lowered) << "no new thread at nice " << mine + 10 << " beside the caller's " << mine;
}

}  // namespace
