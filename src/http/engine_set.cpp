// Engine server list: option parsing, rank offsets, and the concurrent per-server runner.
#include "http/engine_set.h"

#include <cctype>
#include <exception>
#include <new>
#include <set>
#include <system_error>
#include <thread>

#include "common/error.h"

namespace wsync {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

bool host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool ipv6_char(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.' || c == '%' ||
         std::isalnum(static_cast<unsigned char>(c));  // zone ids ("%eth0")
}

// "[addr]" or "[addr]:port" into *host and *port; false with *why on a malformed one.
bool split_ipv6_authority(const std::string& authority, std::string* host, std::string* port, std::string* why) {
  size_t close = authority.find(']');
  if (close == std::string::npos || close == 1) {
    *why = "IPv6 host '" + authority + "' is not of the form [addr]";
    return false;
  }
  *host = authority.substr(0, close + 1);
  for (size_t i = 1; i < close; ++i)
    if (!ipv6_char((*host)[i])) {
      *why = "IPv6 host '" + *host + "' has a bad character";
      return false;
    }
  std::string after = authority.substr(close + 1);
  if (after.empty()) return true;
  if (after[0] != ':') {
    *why = "unexpected '" + after + "' after the IPv6 host";
    return false;
  }
  *port = after.substr(1);
  if (port->empty()) *why = "the port after ':' is empty";
  return !port->empty();
}

// "host" or "host:port" into *host and *port; false with *why on a malformed one.
bool split_authority(const std::string& authority, std::string* host, std::string* port, std::string* why) {
  if (!authority.empty() && authority[0] == '[') return split_ipv6_authority(authority, host, port, why);
  size_t colon = authority.find(':');
  *host = authority.substr(0, colon);
  if (colon != std::string::npos) {
    *port = authority.substr(colon + 1);
    if (port->find(':') != std::string::npos) {
      *why = "host '" + authority + "' has several ':' (write an IPv6 address as [addr]:port)";
      return false;
    }
    if (port->empty()) {
      *why = "the port after ':' is empty";
      return false;
    }
  }
  if (host->empty()) {
    *why = "the host is empty";
    return false;
  }
  for (char c : *host)
    if (!host_char(c)) {
      *why = "host '" + *host + "' has a bad character '" + std::string(1, c) + "'";
      return false;
    }
  return true;
}

// Everything after "scheme://" that cannot be in a server URL; "" when there is none.
std::string refuse_rest(const std::string& rest, const std::string& authority, const std::string& path) {
  for (char c : rest) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return "it contains a space or control character";
  }
  if (authority.find('@') != std::string::npos)
    return "user info ('user@') is not allowed in the URL; give the API key as an option";
  if (path.find_first_of("?#") != std::string::npos) return "a query or fragment is not allowed in a server URL";
  return std::string();
}

// A port of 1..65535 without leading zeros; false with *why otherwise. An empty port stays empty.
bool normalise_port(std::string* port, std::string* why) {
  if (port->empty()) return true;
  if (!all_digits(*port) || port->size() > 5 || std::stoul(*port) == 0 || std::stoul(*port) > 65535) {
    *why = "port '" + *port + "' is not a number in 1..65535";
    return false;
  }
  *port = std::to_string(std::stoul(*port));
  return true;
}

// Check and normalise one URL; on error *why says what is wrong. *dup_key identifies the server
// (default port filled in) for the duplicate check.
bool parse_url(const std::string& raw, std::string* url, std::string* dup_key, std::string* why) {
  size_t sep = raw.find("://");
  if (sep == std::string::npos) {
    *why = "it does not start with http:// or https://";
    return false;
  }
  std::string scheme = lower(raw.substr(0, sep));
  if (scheme != "http" && scheme != "https") {
    *why = "scheme '" + raw.substr(0, sep) + "' is not http or https";
    return false;
  }
  std::string rest = raw.substr(sep + 3);
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? std::string() : rest.substr(slash);
  *why = refuse_rest(rest, authority, path);
  std::string host, port;
  if (!why->empty() || !split_authority(authority, &host, &port, why) || !normalise_port(&port, why)) return false;
  while (!path.empty() && path.back() == '/') path.pop_back();
  host = lower(host);
  *url = scheme + "://" + host + (port.empty() ? "" : ":" + port) + path;
  *dup_key = scheme + "://" + host + ":" + (port.empty() ? (scheme == "https" ? "443" : "80") : port) + path;
  return true;
}

}  // namespace

wsync_status_t parse_engine_servers(const std::string& key, const std::string& value,
                                    std::vector<EngineServer>* out) {
  const char* form = "'http://host:port[=gpus],http://host:port[=gpus],...'";
  if (trim(value).empty())
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "option %s is empty; list the engine servers as %s", key.c_str(), form);
  std::vector<EngineServer> servers;
  std::set<std::string> seen;
  size_t start = 0;
  for (size_t n = 1;; ++n) {
    size_t comma = value.find(',', start);
    std::string entry = trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (entry.empty())
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option %s: entry %zu is empty (in '%s'); list the engine servers as %s",
                  key.c_str(), n, value.c_str(), form);
    if (n > kMaxEngineServers)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option %s lists more than %zu engine servers", key.c_str(),
                  kMaxEngineServers);
    EngineServer s;
    std::string url_part = entry;
    size_t eq = entry.rfind('=');
    if (eq != std::string::npos) {
      url_part = trim(entry.substr(0, eq));
      std::string g = trim(entry.substr(eq + 1));
      if (!all_digits(g) || g.size() > 9 || std::stoul(g) == 0 || std::stoul(g) > kMaxEngineGpus)
        return fail(WSYNC_ERR_INVALID_ARGUMENT,
                    "option %s: entry %zu '%s' has GPU count '%s'; it must be a number in 1..%u", key.c_str(), n,
                    entry.c_str(), g.c_str(), kMaxEngineGpus);
      s.gpus = static_cast<uint32_t>(std::stoul(g));
    }
    std::string why, dup_key;
    if (!parse_url(url_part, &s.url, &dup_key, &why))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option %s: entry %zu '%s' is not a server URL: %s; expected %s",
                  key.c_str(), n, entry.c_str(), why.c_str(), form);
    if (!seen.insert(dup_key).second)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "option %s: entry %zu '%s' lists server %s a second time", key.c_str(),
                  n, entry.c_str(), s.url.c_str());
    servers.push_back(std::move(s));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  *out = std::move(servers);
  return WSYNC_OK;
}

wsync_status_t parse_engine_servers(const std::string& value, std::vector<EngineServer>* out) {
  return parse_engine_servers("engines", value, out);
}

uint32_t assign_rank_offsets(std::vector<EngineServer>* servers, bool every) {
  // At most kMaxEngineServers * kMaxEngineGpus = 2^24 ranks: no overflow.
  uint32_t next = 1;
  for (EngineServer& s : *servers) {
    if (!s.healthy && !every) {
      s.rank_offset = 0;
      continue;
    }
    s.rank_offset = next;
    next += s.gpus;
  }
  return next;
}

void for_each_server_concurrently(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  std::vector<size_t> inline_jobs;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    try {
      threads.emplace_back(fn, i);
    } catch (const std::system_error& e) {
      WSYNC_LOGW("could not start a thread for engine server %zu (%s); running it on the calling thread", i, e.what());
      inline_jobs.push_back(i);
    }
  }
  for (size_t i : inline_jobs) fn(i);
  for (std::thread& t : threads) t.join();
}

}  // namespace wsync
