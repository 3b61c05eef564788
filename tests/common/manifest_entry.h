// One native manifest entry for tests (unit tests, the fuzz seeds): `name`, `dtype`, `shape`, and
// where its bytes sit (bucket offset, length, offset within the tensor); tensor_bytes follows from
// dtype and shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace wsync {
namespace test_manifest {

inline ManifestEntry entry(const std::string& name, int32_t dtype, std::vector<int64_t> shape, uint64_t bucket_offset,
                           uint64_t length, uint64_t tensor_offset = 0) {
  ManifestEntry e;
  e.name = name;
  e.dtype = dtype;
  e.ndim = static_cast<int32_t>(shape.size());
  uint64_t n = wsync_dtype_size(dtype);
  for (size_t i = 0; i < shape.size(); ++i) {
    e.shape[i] = shape[i];
    n *= static_cast<uint64_t>(shape[i]);
  }
  e.tensor_bytes = n;
  e.bucket_offset = bucket_offset;
  e.length = length;
  e.tensor_offset = tensor_offset;
  return e;
}

}  // namespace test_manifest
}  // namespace wsync
