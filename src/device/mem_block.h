// An owned block of staging memory: page-aligned host memory, or CUDA device memory (through
// the dlopen'd runtime). Move-only; frees itself.
#pragma once

#include <cstdint>

#include "wsync.h"

namespace wsync {

class MemBlock {
 public:
  MemBlock() = default;
  ~MemBlock() { reset(); }
  MemBlock(MemBlock&& o) noexcept { *this = static_cast<MemBlock&&>(o); }
  MemBlock& operator=(MemBlock&& o) noexcept;
  MemBlock(const MemBlock&) = delete;
  MemBlock& operator=(const MemBlock&) = delete;

  // device < 0: host memory; else CUDA memory on that ordinal. Reports WSYNC_ERR_OUT_OF_MEMORY
  // (or NO_DEVICE) through fail(). Zero bytes gives an empty block.
  static wsync_status_t alloc(uint64_t bytes, int device, MemBlock* out);
  void reset();

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  bool on_device() const { return device_ >= 0; }
  int device() const { return device_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  int device_ = -1;
};

}  // namespace wsync
