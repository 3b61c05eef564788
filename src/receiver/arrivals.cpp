#include "receiver/arrivals.h"

#include "common/error.h"

namespace wsync {
namespace {

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

// Why `verdict` (not kAdded) refuses chunk `e`; `clash` is the held range it overlaps.
wsync_status_t refusal(const ManifestEntry& e, ByteRanges::Add verdict, const ByteRange& clash) {
  if (verdict == ByteRanges::Add::kOutOfBounds)
    return fail(WSYNC_ERR_PROTOCOL, "tensor '%s': a chunk of %llu bytes at offset %llu reaches past its %llu bytes",
                e.name.c_str(), ull(e.length), ull(e.tensor_offset), ull(e.tensor_bytes));
  // kOverlap: the chunk is in bounds, so its end does not overflow.
  const ByteRange chunk{e.tensor_offset, e.tensor_offset + e.length};
  return fail(WSYNC_ERR_PROTOCOL, "tensor '%s': chunk %s overlaps bytes %s already received in this update",
              e.name.c_str(), range_str(chunk).c_str(), range_str(clash).c_str());
}

}  // namespace

wsync_status_t Arrivals::check(const ManifestEntry& e) const {
  auto it = tensors_.find(e.name);
  const ByteRanges none(e.tensor_bytes);
  const ByteRanges& got = it == tensors_.end() ? none : it->second;
  if (got.size() != e.tensor_bytes)
    return fail(WSYNC_ERR_PROTOCOL, "tensor '%s': a chunk says it has %llu bytes, an earlier chunk in this update "
                "said %llu", e.name.c_str(), ull(e.tensor_bytes), ull(got.size()));
  ByteRange clash;
  const ByteRanges::Add verdict = got.check(e.tensor_offset, e.length, &clash);
  return verdict == ByteRanges::Add::kAdded ? WSYNC_OK : refusal(e, verdict, clash);
}

wsync_status_t Arrivals::record(const ManifestEntry& e) {
  wsync_status_t st = check(e);
  if (st != WSYNC_OK) return st;
  tensors_.emplace(e.name, ByteRanges(e.tensor_bytes)).first->second.add(e.tensor_offset, e.length);
  return WSYNC_OK;
}

bool Arrivals::complete(const std::string& name) const {
  auto it = tensors_.find(name);
  return it != tensors_.end() && it->second.complete();
}

std::string Arrivals::missing(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? "all of its bytes" : "bytes " + range_str(it->second.first_gap());
}

}  // namespace wsync
