// XXH3-64 of a byte range (see common/checksum.h).
#include "common/checksum.h"

#include <xxhash.h>

namespace wsync {

uint64_t checksum64(const void* data, size_t len) {
  static const uint8_t kEmpty = 0;
  return XXH3_64bits(data != nullptr ? data : &kEmpty, len);
}

}  // namespace wsync
