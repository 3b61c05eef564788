// The default transport of a group (see loader/transport_choice.h for the table and why).
#include "loader/transport_choice.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstring>

#include "common/error.h"

namespace wsync {
namespace {

// Whether `host` names only loopback addresses ("127.0.0.1", "localhost", "::1"). A wildcard or an
// unknown name is not loopback: members may come from other hosts.
bool is_loopback(const std::string& host) {
  std::string bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  if (bare.empty() || bare == "0.0.0.0" || bare == "::") return false;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(bare.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  bool all = true;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr.s_addr);
      all = all && (a >> 24) == 127;
    } else if (ai->ai_family == AF_INET6) {
      const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr;
      all = all && IN6_IS_ADDR_LOOPBACK(&a);
    } else {
      all = false;
    }
  }
  freeaddrinfo(res);
  return all;
}

}  // namespace

bool host_has_rdma() {
  DIR* d = opendir("/sys/class/infiniband");
  if (d == nullptr) return false;
  bool any = false;
  while (dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) any = true;
  closedir(d);
  return any;
}

TransportChoice default_transport(const std::string& bind_host) {
  if (is_loopback(bind_host))
    return {{"ucx", "tcp"}, "the store is on loopback (" + bind_host + "): every member is on this host"};
  if (host_has_rdma())
    return {{"ucx", "tcp"}, "the store is on " + bind_host + " (members on other hosts) and this host has an RDMA "
                            "device"};
  return {{"tcp"}, "the store is on " + bind_host + " (members on other hosts) and this host has no RDMA device"};
}

wsync_status_t load_group_transport(const char* requested, const std::string& bind_host, LoadedTransport* out) {
  if (requested != nullptr && std::strcmp(requested, "auto") != 0) return load_transport(requested, out);
  const TransportChoice c = default_transport(bind_host);
  wsync_status_t st = WSYNC_ERR_NOT_FOUND;
  std::string tried;
  for (const auto& name : c.candidates) {
    if ((st = load_transport(name, out)) == WSYNC_OK) {
      WSYNC_LOGI("transport '%s', the default: %s%s", name.c_str(), c.why.c_str(), tried.c_str());
      clear_error();
      return WSYNC_OK;
    }
    tried += "; transport '" + name + "' did not load: " + last_error();
  }
  return fail(st, "no default transport loads (%s)%s", c.why.c_str(), tried.c_str());
}

}  // namespace wsync
