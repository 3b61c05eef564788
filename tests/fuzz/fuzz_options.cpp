// libFuzzer target: the option parsers of the public ABI (common/options.h): copy_options over a
// caller's option array of any struct_size, parse_u64_option, parse_bool_option and
// options_with_prefix. Run by ctest as fuzz.options.
//
// Input: min u64 | max u64 | stride - 4 u8 | count u8 | then '\n'-separated "key=value" strings.
// Beyond "no crash, no UB, no leak": an accepted integer lies in [min, max] and reads back the
// same from its decimal text; a value is accepted only as a whole (never up to a NUL); copy_options
// returns exactly the pairs it was given.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/options.h"

namespace {

uint64_t le64(const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;
}

void check_u64(const std::string& key, const std::string& value, uint64_t min, uint64_t max) {
  uint64_t n = 0xFEEDFACE;
  if (wsync::parse_u64_option(key, value, min, max, &n) != WSYNC_OK) {
    if (n != 0xFEEDFACE) std::abort();  // a refusal leaves *out alone
    return;
  }
  if (n < min || n > max) std::abort();
  if (value.find('\0') != std::string::npos) std::abort();
  uint64_t again = 0;
  if (wsync::parse_u64_option(key, std::to_string(n), min, max, &again) != WSYNC_OK || again != n) std::abort();
}

void check_bool(const std::string& key, const std::string& value) {
  bool b = false;
  if (wsync::parse_bool_option(key, value, &b) != WSYNC_OK) return;
  if (value.find('\0') != std::string::npos || value.size() > 5) std::abort();
  bool again = !b;
  if (wsync::parse_bool_option(key, b ? "true" : "false", &again) != WSYNC_OK || again != b) std::abort();
}

// The pairs as a caller's array of `stride`-byte wsync_option_t (stride may be smaller or larger
// than this header's struct), every element's struct_size set to `stride`, as the ABI says.
void check_copy(const wsync::OptionList& pairs, uint32_t stride) {
  // A caller's array holds at least the first element's struct_size, whatever that says.
  std::vector<uint8_t> raw(pairs.size() * stride + sizeof(wsync_option_t));
  for (size_t i = 0; i < pairs.size(); ++i) {
    wsync_option_t o;
    o.struct_size = stride;
    o.key = pairs[i].first.c_str();
    o.value = pairs[i].second.c_str();
    std::memcpy(raw.data() + i * stride, &o, stride < sizeof o ? stride : sizeof o);
  }
  wsync::OptionList got;
  const wsync_status_t st =
      wsync::copy_options(reinterpret_cast<const wsync_option_t*>(raw.data()), pairs.size(), &got);
  if (st != WSYNC_OK) return;
  if (got.size() != pairs.size()) std::abort();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].first != pairs[i].first.c_str() || got[i].second != pairs[i].second.c_str()) std::abort();
  const std::vector<wsync_option_t> c = wsync::to_c_options(got);
  if (c.size() != got.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 18) return 0;
  const uint64_t min = le64(data), max = le64(data + 8);
  // Every element of a caller's array starts with its struct_size (4 bytes), which equals the
  // array's stride: strides from 4 (refused: no room for key and value) to 43 (a later header's).
  const uint32_t stride = 4 + data[16] % 40;
  const size_t count_cap = data[17];
  const std::string text(reinterpret_cast<const char*>(data + 18), size - 18);

  wsync::OptionList pairs;
  size_t pos = 0;
  while (pos <= text.size() && pairs.size() < count_cap) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const size_t eq = line.find('=');
    const std::string key = eq == std::string::npos ? line : line.substr(0, eq);
    const std::string value = eq == std::string::npos ? std::string() : line.substr(eq + 1);
    check_u64(key, value, min, max);
    check_bool(key, value);
    pairs.emplace_back(key, value);
  }
  check_copy(pairs, stride);
  // No array (count 0 with NULL) is fine; NULL with a count is refused.
  wsync::OptionList none;
  if (wsync::copy_options(nullptr, 0, &none) != WSYNC_OK || !none.empty()) std::abort();
  if (wsync::copy_options(nullptr, 1, &none) == WSYNC_OK) std::abort();
  for (const std::string& prefix : {std::string("transport."), std::string()}) {
    const wsync::OptionList sub = wsync::options_with_prefix(pairs, prefix);
    size_t j = 0;
    for (const auto& kv : pairs) {
      if (kv.first.compare(0, prefix.size(), prefix) != 0) continue;
      if (j >= sub.size() || prefix + sub[j].first != kv.first || sub[j].second != kv.second) std::abort();
      ++j;
    }
    if (j != sub.size()) std::abort();
  }
  return 0;
}
