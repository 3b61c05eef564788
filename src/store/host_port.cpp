#include "store/host_port.h"

#include "common/error.h"

namespace wsync {

wsync_status_t parse_host_port(const std::string& addr, std::string* host, uint16_t* port) {
  if (host == nullptr || port == nullptr)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "parse_host_port: NULL output for address '%s'", addr.c_str());
  std::string s = addr;
  const std::string scheme = "tcp://";
  if (s.compare(0, scheme.size(), scheme) == 0) s = s.substr(scheme.size());
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '/' || c == '\0')
      return fail(WSYNC_ERR_INVALID_ARGUMENT,
                  "store address '%s' is not host:port (e.g. 10.0.0.1:29500, tcp://host:29500, [::1]:29500)",
                  addr.c_str());
  }
  std::string h, p;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return fail(WSYNC_ERR_INVALID_ARGUMENT,
                  "store address '%s': a bracketed IPv6 host must look like [::1]:29500", addr.c_str());
    h = s.substr(1, close - 1);
    p = s.substr(close + 2);
    if (h.find(':') == std::string::npos)
      return fail(WSYNC_ERR_INVALID_ARGUMENT,
                  "store address '%s': brackets are only for IPv6 hosts", addr.c_str());
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "store address '%s' has no port (expected host:port)",
                  addr.c_str());
    h = s.substr(0, colon);
    p = s.substr(colon + 1);
    if (h.find(':') != std::string::npos)
      return fail(WSYNC_ERR_INVALID_ARGUMENT,
                  "store address '%s': write an IPv6 host in brackets, e.g. [::1]:29500", addr.c_str());
  }
  if (h.empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "store address '%s' has an empty host", addr.c_str());
  if (p.empty() || p.size() > 5)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "store address '%s' has no valid port (0..65535)", addr.c_str());
  unsigned long v = 0;
  for (char c : p) {
    if (c < '0' || c > '9')
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "store address '%s': port '%s' is not a number",
                  addr.c_str(), p.c_str());
    v = v * 10 + static_cast<unsigned long>(c - '0');
  }
  if (v > 65535)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "store address '%s': port %lu is out of range 0..65535",
                addr.c_str(), v);
  *host = h;
  *port = static_cast<uint16_t>(v);
  return WSYNC_OK;
}

std::string format_host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string host_of(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  return colon == std::string::npos ? addr : addr.substr(0, colon);
}

}  // namespace wsync
