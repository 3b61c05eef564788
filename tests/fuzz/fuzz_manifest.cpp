// libFuzzer target: the native manifest decoder (manifest/manifest.h), the record a receiver
// decodes from every MANIFEST frame. Built and run by ctest as fuzz.manifest (tests/fuzz); the
// build defines FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, which makes the decoder skip the
// checksum comparison so mutations reach the entry parser.
//
// Beyond "no crash, no UB, no leak": a decoded record re-encodes to the same bytes (the encoding
// is canonical; the trailer aside, as its checksum was not compared), and every name it accepts
// passes the tensor-name rule (common/names.h) and is unique.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/names.h"
#include "manifest/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wsync::Manifest m;
  if (wsync::decode_manifest(data, size, &m) != WSYNC_OK) return 0;
  const std::vector<uint8_t> again = wsync::encode_manifest(m);
  if (again.size() != size) std::abort();
  const size_t body = size - wsync::kManifestTrailerBytes;
  if (!std::equal(again.begin(), again.begin() + static_cast<long>(body), data)) std::abort();
  std::set<std::string> names;
  for (const wsync::ManifestEntry& e : m.entries) {
    if (!wsync::tensor_name_problem(e.name.data(), e.name.size()).empty()) std::abort();
    if (!names.insert(e.name).second) std::abort();
    if (e.bucket_offset + e.length > m.bucket_bytes) std::abort();
  }
  return 0;
}
