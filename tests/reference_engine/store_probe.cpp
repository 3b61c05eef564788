// store_probe.cpp — see store_probe.h.
#include "store_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace refeng {
namespace {

bool connect_once(const std::string& host, int64_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string h = host.size() > 1 && host.front() == '[' ? host.substr(1, host.size() - 2) : host;
  if (getaddrinfo(h.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return false;
  bool ok = false;
  for (addrinfo* a = res; a && !ok; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

}  // namespace

std::string probe_store(const std::string& host, int64_t port, int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (port > 0 && port < 65536 && connect_once(host, port)) return "";
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "The client socket has timed out after " + std::to_string(timeout_ms) + "ms while trying to connect to (" + host +
         ", " + std::to_string(port) + ").";
}

}  // namespace refeng
