#include "common/options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "common/error.h"

namespace wsync {

wsync_status_t copy_options(const wsync_option_t* options, uint64_t count, OptionList* out) {
  out->clear();
  if (count == 0) return WSYNC_OK;
  if (options == nullptr)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "options is NULL but num_options is %llu",
                static_cast<unsigned long long>(count));
  if (count > 4096)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "num_options %llu is more than the 4096 allowed",
                static_cast<unsigned long long>(count));
  const uint32_t stride = options[0].struct_size;
  const size_t need = offsetof(wsync_option_t, value) + sizeof(const char*);
  if (stride < need)
    return fail(WSYNC_ERR_INVALID_ARGUMENT,
                "options[0].struct_size is %u, smaller than the %zu bytes a key/value pair needs "
                "(initialise options with WSYNC_OPTION)", stride, need);
  const char* base = reinterpret_cast<const char*>(options);
  for (uint64_t i = 0; i < count; ++i) {
    wsync_option_t o;
    std::memcpy(&o, base + i * stride, sizeof o < stride ? sizeof o : stride);
    if (o.struct_size != stride)
      return fail(WSYNC_ERR_INVALID_ARGUMENT,
                  "options[%llu].struct_size is %u but options[0] has %u; all must be equal",
                  static_cast<unsigned long long>(i), o.struct_size, stride);
    if (o.key == nullptr || o.key[0] == '\0')
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "options[%llu] has a NULL or empty key",
                  static_cast<unsigned long long>(i));
    if (o.value == nullptr)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option '%s' has a NULL value", o.key);
    out->emplace_back(o.key, o.value);
  }
  return WSYNC_OK;
}

wsync_status_t parse_u64_option(const std::string& key, const std::string& value, uint64_t min,
                                uint64_t max, uint64_t* out) {
  const char* s = value.c_str();
  char* end = nullptr;
  errno = 0;
  if (value.empty() || value[0] < '0' || value[0] > '9') goto bad;  // no sign, no blanks
  if (value.find('\0') != std::string::npos) goto bad;  // strtoull would stop there: "1\0x" is not 1
  {
    unsigned long long n = std::strtoull(s, &end, 10);
    if (errno == ERANGE) goto range;
    if (errno != 0 || end == s) goto bad;
    uint64_t mult = 1;
    if (*end != '\0') {
      struct { const char* sfx; uint64_t m; } sfx[] = {
          {"k", 1000ull}, {"m", 1000000ull}, {"g", 1000000000ull},
          {"kib", 1ull << 10}, {"mib", 1ull << 20}, {"gib", 1ull << 30}};
      bool found = false;
      for (auto& e : sfx)
        if (strcasecmp(end, e.sfx) == 0) { mult = e.m; found = true; }
      if (!found) goto bad;
    }
    if (n > max / mult) goto range;
    uint64_t v = n * mult;
    if (v < min || v > max) goto range;
    *out = v;
    return WSYNC_OK;
  }
range:
  return fail(WSYNC_ERR_INVALID_ARGUMENT, "option '%s'='%s' is out of range %llu..%llu", key.c_str(),
              value.c_str(), static_cast<unsigned long long>(min), static_cast<unsigned long long>(max));
bad:
  return fail(WSYNC_ERR_INVALID_ARGUMENT,
              "option '%s'='%s' is not an unsigned integer (a K/M/G/KiB/MiB/GiB suffix is allowed)",
              key.c_str(), value.c_str());
}

wsync_status_t parse_bool_option(const std::string& key, const std::string& value, bool* out) {
  if (value.find('\0') != std::string::npos)  // the comparisons below would stop there: "1\0x" is not 1
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option '%s' has a NUL byte in its value; it is not a boolean (1/0, true/false)",
                key.c_str());
  const char* v = value.c_str();
  if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) {
    *out = true;
    return WSYNC_OK;
  }
  if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) {
    *out = false;
    return WSYNC_OK;
  }
  return fail(WSYNC_ERR_INVALID_ARGUMENT, "option '%s'='%s' is not a boolean (1/0, true/false)",
              key.c_str(), value.c_str());
}

std::vector<wsync_option_t> to_c_options(const OptionList& l) {
  std::vector<wsync_option_t> out;
  for (const auto& kv : l) out.push_back(WSYNC_OPTION(kv.first.c_str(), kv.second.c_str()));
  return out;
}

OptionList options_with_prefix(const OptionList& all, const std::string& prefix) {
  OptionList out;
  for (const auto& kv : all)
    if (kv.first.compare(0, prefix.size(), prefix) == 0)
      out.emplace_back(kv.first.substr(prefix.size()), kv.second);
  return out;
}

wsync_status_t check_out_struct(uint32_t size, const char* what, const char* init) {
  if (size >= 2 * sizeof(uint32_t) && size % 8 == 0) return WSYNC_OK;
  return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s->struct_size is %u; initialise with %s", what, size, init);
}

}  // namespace wsync
