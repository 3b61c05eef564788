#include "common/payload_hasher.h"

#include <unistd.h>
#include <xxhash.h>

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

void PayloadHasher::run() {
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
