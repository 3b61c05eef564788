// Which bytes of a region [0, size) are held: a set of disjoint half-open ranges, adjacent ones
// merged. A receiver keeps one per tensor of an update (receiver/arrivals.h) to know which bytes
// arrived, so that a tensor counts as complete only when every byte arrived, each exactly once —
// never because chunk lengths add up to its size.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wsync {

struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;  // one past the last byte
};

// "[begin, end)", as messages print a range.
std::string range_str(const ByteRange& r);

class ByteRanges {
 public:
  enum class Add { kAdded, kOutOfBounds, kOverlap };

  explicit ByteRanges(uint64_t size = 0) : size_(size) {}

  uint64_t size() const { return size_; }
  // Bytes held (the sum of the ranges' lengths).
  uint64_t held() const { return held_; }
  // The ranges tile [0, size) exactly (an empty region is complete).
  bool complete() const;
  // What add() would answer, without adding. An empty range (length 0) never overlaps and is in
  // bounds when offset <= size. kOutOfBounds when [offset, offset + length) reaches past size
  // (computed without overflow); kOverlap when it shares a byte with a held range, then *clash
  // (when not NULL) is that held range.
  Add check(uint64_t offset, uint64_t length, ByteRange* clash = nullptr) const;
  // Holds [offset, offset + length) when check() says kAdded; otherwise changes nothing.
  Add add(uint64_t offset, uint64_t length, ByteRange* clash = nullptr);
  // The first range of [0, size) not held; empty (begin == end == size) when complete.
  ByteRange first_gap() const;
  // The held ranges in increasing order.
  std::vector<ByteRange> ranges() const;

 private:
  uint64_t size_ = 0;
  uint64_t held_ = 0;
  std::map<uint64_t, uint64_t> ranges_;  // begin -> end; disjoint and never adjacent
};

}  // namespace wsync
