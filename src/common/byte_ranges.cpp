#include "common/byte_ranges.h"

#include <iterator>

namespace wsync {

std::string range_str(const ByteRange& r) {
  return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}

bool ByteRanges::complete() const {
  if (size_ == 0) return ranges_.empty();
  return ranges_.size() == 1 && ranges_.begin()->first == 0 && ranges_.begin()->second == size_;
}

ByteRanges::Add ByteRanges::check(uint64_t offset, uint64_t length, ByteRange* clash) const {
  if (offset > size_ || length > size_ - offset) return Add::kOutOfBounds;
  if (length == 0) return Add::kAdded;
  const uint64_t end = offset + length;  // <= size_: cannot overflow
  auto next = ranges_.upper_bound(offset);  // the first range starting after offset
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);  // starts at or before offset
    if (prev->second > offset) {
      if (clash) *clash = ByteRange{prev->first, prev->second};
      return Add::kOverlap;
    }
  }
  if (next != ranges_.end() && next->first < end) {
    if (clash) *clash = ByteRange{next->first, next->second};
    return Add::kOverlap;
  }
  return Add::kAdded;
}

ByteRanges::Add ByteRanges::add(uint64_t offset, uint64_t length, ByteRange* clash) {
  const Add verdict = check(offset, length, clash);
  if (verdict != Add::kAdded || length == 0) return verdict;
  uint64_t begin = offset, end = offset + length;
  auto next = ranges_.lower_bound(end);  // check(): nothing starts inside [offset, end)
  if (next != ranges_.end() && next->first == end) {  // touches the range after it: merge
    end = next->second;
    next = ranges_.erase(next);
  }
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->second == begin) {  // touches the range before it: merge
      begin = prev->first;
      ranges_.erase(prev);
    }
  }
  ranges_[begin] = end;
  held_ += length;
  return Add::kAdded;
}

ByteRange ByteRanges::first_gap() const {
  uint64_t at = 0;
  for (const auto& r : ranges_) {
    if (r.first > at) return ByteRange{at, r.first};
    at = r.second;
  }
  return ByteRange{at, size_};
}

std::vector<ByteRange> ByteRanges::ranges() const {
  std::vector<ByteRange> out;
  out.reserve(ranges_.size());
  for (const auto& r : ranges_) out.push_back(ByteRange{r.first, r.second});
  return out;
}

}  // namespace wsync
