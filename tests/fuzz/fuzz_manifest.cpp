// libFuzzer target for the manifest decoder (not built by default). Build by hand, e.g.:
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
//     -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -DWSYNC_VERSION_STRING='"fuzz"' -Iinclude -Isrc \
//     tests/fuzz/fuzz_manifest.cpp src/manifest/manifest.cpp src/planner/bucket_planner.cpp \
//     src/common/error.cpp src/common/status.cpp -lxxhash -o fuzz_manifest
// FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION makes the decoder skip the checksum comparison so
// mutations reach the entry parser. A decoded record must re-encode to the same bytes (the
// encoding is canonical), the trailer aside when the checksum was skipped.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "manifest/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wsync::Manifest m;
  if (wsync::decode_manifest(data, size, &m) != WSYNC_OK) return 0;
  const std::vector<uint8_t> again = wsync::encode_manifest(m);
  if (again.size() != size) std::abort();
  const size_t body = size - wsync::kManifestTrailerBytes;
  if (!std::equal(again.begin(), again.begin() + static_cast<long>(body), data)) std::abort();
  return 0;
}
