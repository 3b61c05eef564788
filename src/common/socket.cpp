#include "common/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/error.h"

namespace wsync {
namespace {

std::string unbracket(const std::string& host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

std::string where(const std::string& host, uint16_t port) {
  const std::string h = host.empty() ? "0.0.0.0" : host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
}

int resolve(const std::string& host, uint16_t port, bool passive, addrinfo** out) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const std::string h = unbracket(host);
  return ::getaddrinfo(h.empty() ? nullptr : h.c_str(), std::to_string(port).c_str(), &hints, out);
}

std::string sockaddr_text(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "unknown peer";
}

// A non-blocking connect to one address, waiting for it until `deadline`; the fd or -1 (*why set).
// Bind `fd` (of `family`) to the local address `ip` (port chosen by the kernel); false with *why.
bool bind_local(int fd, int family, const std::string& ip, std::string* why) {
  addrinfo* la = nullptr;
  if (resolve(ip, 0, false, &la) != 0 || la == nullptr) {
    *why = "cannot resolve the local address '" + ip + "'";
    return false;
  }
  bool ok = false;
  for (addrinfo* a = la; a != nullptr && !ok; a = a->ai_next)
    ok = a->ai_family == family && ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
  if (!ok) *why = "cannot bind to the local address '" + ip + "': " + std::strerror(errno);
  freeaddrinfo(la);
  return ok;
}

int connect_one(const addrinfo* ai, int64_t deadline, std::string* why, const std::string& bind_ip) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) {
    *why = std::strerror(errno);
    return -1;
  }
  if (!bind_ip.empty() && !bind_local(fd, ai->ai_family, bind_ip, why)) {
    ::close(fd);
    return -1;
  }
  int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && (errno == EINPROGRESS || errno == EINTR)) {
    pollfd pfd{fd, POLLOUT, 0};
    int n;
    do {
      n = ::poll(&pfd, 1, remaining_ms(deadline));
    } while (n < 0 && errno == EINTR);
    int err = 0;
    socklen_t len = sizeof err;
    if (n > 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    rc = n > 0 && err == 0 ? 0 : -1;
    errno = n > 0 ? err : (n == 0 ? ETIMEDOUT : errno);
  }
  if (rc != 0) {
    *why = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  tune_socket(fd);
  return fd;
}

}  // namespace

void tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
  setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}

wsync_status_t tcp_listen(const std::string& host, uint16_t port, int backlog, int* fd_out, uint16_t* bound_port) {
  addrinfo* ai = nullptr;
  int gai = resolve(host, port, true, &ai);
  if (gai != 0 || ai == nullptr)
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "cannot resolve the address to listen on, %s: %s", where(host, port).c_str(),
                gai_strerror(gai));
  std::string last = "no address";
  for (addrinfo* a = ai; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, backlog) != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl);
    *bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
    freeaddrinfo(ai);
    *fd_out = fd;
    return WSYNC_OK;
  }
  freeaddrinfo(ai);
  return fail(WSYNC_ERR_IO, "cannot listen on %s: %s (is the port already in use?)", where(host, port).c_str(),
              last.c_str());
}

wsync_status_t tcp_connect(const std::string& host, uint16_t port, int64_t deadline, int* fd, std::string* why,
                           const std::string& bind_ip) {
  addrinfo* ai = nullptr;
  int gai = resolve(host, port, false, &ai);
  if (gai != 0 || ai == nullptr) {
    *why = std::string("cannot resolve host: ") + gai_strerror(gai);
    return now_ms() >= deadline ? WSYNC_ERR_TIMEOUT : WSYNC_ERR_IO;
  }
  for (addrinfo* a = ai; a != nullptr; a = a->ai_next) {
    if ((*fd = connect_one(a, deadline, why, bind_ip)) >= 0) {
      freeaddrinfo(ai);
      return WSYNC_OK;
    }
  }
  freeaddrinfo(ai);
  return now_ms() >= deadline ? WSYNC_ERR_TIMEOUT : WSYNC_ERR_IO;
}

int tcp_accept(int listen_fd, std::string* peer) {
  sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int fd;
  do {
    fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  tune_socket(fd);
  if (peer != nullptr) *peer = sockaddr_text(ss);
  return fd;
}

std::string peer_address(int fd) {
  sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown peer";
  return sockaddr_text(ss);
}

std::string local_ip(int fd) {
  sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6) inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

}  // namespace wsync
