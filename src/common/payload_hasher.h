// A payload checksum off the moving thread: XXH3-64 over ranges fed in bucket order, on a thread
// of its own. The receiver hashes a bucket's pieces while the next ones land (on one host UCX's
// receiver copies the bytes itself, and a hash on the same thread would wait for that copy and
// the copy for the hash). The sender hashes a bucket while its pipeline thread moves it (over TCP
// the sender's progress does the socket copies, and a hash on that thread let the wire idle).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

namespace wsync {

class PayloadHasher {
 public:
  PayloadHasher() = default;
  ~PayloadHasher();
  PayloadHasher(const PayloadHasher&) = delete;
  PayloadHasher& operator=(const PayloadHasher&) = delete;

  // Start a new checksum (what was fed before is dropped, after the range in progress ends).
  void reset();
  // Hash [data, data + len) next; the memory stays valid until digest() or cancel() returned.
  void feed(const uint8_t* data, uint64_t len);
  // Wait until everything fed is hashed; the checksum of it all.
  uint64_t digest();
  // Drop what was fed and not hashed yet, and wait for the range in progress: afterwards the
  // hasher reads none of the memory it was given.
  void cancel();
  // Everything fed is hashed (digest() would not wait).
  bool idle();
  // An eventfd to write 1 to whenever the hasher turns idle (-1: none), so that a thread waiting
  // in poll() on other work wakes for the digest.
  void set_wake_fd(int fd);

 private:
  struct Range {
    const uint8_t* data;
    uint64_t len;
  };
  void run();
  void start_thread();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Range> queue_;
  bool busy_ = false;  // the thread is hashing a range taken from the queue
  bool stop_ = false;
  int wake_fd_ = -1;
  void* state_ = nullptr;  // XXH3_state_t
  std::thread thread_;
};

}  // namespace wsync
