// Which bytes of which tensor arrived in the current update on a receiver. Every chunk of a
// manifest (a whole tensor is one chunk) is checked here before its receive is posted and
// recorded once its bytes are in place; a tensor is complete only when its chunks tile it
// exactly. A chunk that reaches past its tensor, disagrees with earlier chunks on the tensor's
// size, or overlaps bytes already received is refused (a sender cannot make a receiver treat
// bytes it never sent as received, nor overwrite bytes it already sent). tests/fuzz's
// fuzz_receiver_chunks drives it with arbitrary chunk sequences.
#pragma once

#include <string>
#include <unordered_map>

#include "common/byte_ranges.h"
#include "manifest/manifest.h"
#include "wsync.h"

namespace wsync {

class Arrivals {
 public:
  // May chunk `e` (tensor e.name, e.length bytes at e.tensor_offset of its e.tensor_bytes) be
  // received? WSYNC_ERR_PROTOCOL, with a message naming the tensor and the ranges, when not.
  wsync_status_t check(const ManifestEntry& e) const;
  // The bytes of chunk `e` are in place: record them. The same refusals as check().
  wsync_status_t record(const ManifestEntry& e);
  // Every byte of tensor `name` arrived in this update, exactly once (false for a tensor of
  // which nothing arrived).
  bool complete(const std::string& name) const;
  // For messages: "bytes [a, b)", the first range of tensor `name` that did not arrive ("all of
  // its bytes" when no chunk of it did).
  std::string missing(const std::string& name) const;
  // The update ended (committed or dropped): nothing arrived yet.
  void clear() { tensors_.clear(); }
  bool empty() const { return tensors_.empty(); }

 private:
  std::unordered_map<std::string, ByteRanges> tensors_;
};

}  // namespace wsync
