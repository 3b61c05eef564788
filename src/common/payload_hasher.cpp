#include "common/payload_hasher.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>

namespace wsync {

PayloadHasher::~PayloadHasher() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (state_ != nullptr) XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void PayloadHasher::start_thread() {
  if (state_ == nullptr) state_ = XXH3_createState();
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

namespace {

// The hash is not on the transfer's path until its last range: where cores are short (the same
// host's sender, receiver and their hashers on 2 cores) the thread that moves the bytes goes first.
// Measured on loopback, 2 cores, UCX sm at 256 MiB: 3,453-3,477 MiB/s against 2,845-3,168 at the
// caller's priority. Linux gives each thread its own nice value; a failure leaves it as it was.
void lower_this_threads_priority() {
  constexpr int kNicer = 10;
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno == 0) (void)::setpriority(PRIO_PROCESS, tid, std::min(19, now + kNicer));
}

}  // namespace

void PayloadHasher::run() {
  lower_this_threads_priority();
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Range r = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), r.data, r.len);
    lk.lock();
    busy_ = false;
    cv_.notify_all();
    if (queue_.empty() && wake_fd_ >= 0) {
      const uint64_t one = 1;
      ssize_t n = ::write(wake_fd_, &one, sizeof one);
      (void)n;
    }
  }
}

void PayloadHasher::reset() {
  cancel();
  std::lock_guard<std::mutex> lk(mu_);
  start_thread();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

void PayloadHasher::feed(const uint8_t* data, uint64_t len) {
  if (len == 0) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    start_thread();
    queue_.push_back(Range{data, len});
  }
  cv_.notify_all();
}

uint64_t PayloadHasher::digest() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [this] { return queue_.empty() && !busy_; });
  if (state_ == nullptr) return XXH3_64bits(nullptr, 0);
  return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_));
}

bool PayloadHasher::idle() {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.empty() && !busy_;
}

void PayloadHasher::set_wake_fd(int fd) {
  std::lock_guard<std::mutex> lk(mu_);
  wake_fd_ = fd;
}

void PayloadHasher::cancel() {
  std::unique_lock<std::mutex> lk(mu_);
  queue_.clear();
  cv_.wait(lk, [this] { return !busy_; });
}

}  // namespace wsync
