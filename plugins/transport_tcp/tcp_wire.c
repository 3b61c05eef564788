/* tcp_wire.c — the chunk header, and whole reads and writes: blocking ones for the data threads,
 * deadline-bounded ones on non-blocking sockets for handshakes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp_transport.h"

#define CHUNK_MAGIC 0x44545357u /* "WSTD" */

static void put64(uint8_t* p, uint64_t v) {
  int i;
  for (i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  int i;
  for (i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

void tcp_chunk_header_encode(uint64_t seq, uint64_t offset, uint64_t len, uint64_t total,
                             uint8_t out[TCP_CHUNK_HEADER_BYTES]) {
  put64(out, CHUNK_MAGIC); /* magic in the low half, reserved (0) in the high half */
  put64(out + 8, seq);
  put64(out + 16, offset);
  put64(out + 24, len);
  put64(out + 32, total);
}

int tcp_chunk_header_decode(const uint8_t in[TCP_CHUNK_HEADER_BYTES], uint64_t* seq, uint64_t* offset, uint64_t* len,
                            uint64_t* total) {
  if (get64(in) != CHUNK_MAGIC) return -1;
  *seq = get64(in + 8);
  *offset = get64(in + 16);
  *len = get64(in + 24);
  *total = get64(in + 32);
  /* offset + len <= total, without overflow */
  if (*len > *total || *offset > *total - *len) return -1;
  return 0;
}

int tcp_write_all(int fd, const void* head, size_t head_len, const void* data, uint64_t len) {
  const uint8_t* h = (const uint8_t*)head;
  const uint8_t* d = (const uint8_t*)data;
  size_t hl = head_len;
  uint64_t dl = len;
  while (hl > 0 || dl > 0) {
    struct iovec v[2];
    struct msghdr m;
    int n = 0;
    ssize_t w;
    if (hl > 0) {
      v[n].iov_base = (void*)h;
      v[n++].iov_len = hl;
    }
    if (dl > 0) {
      v[n].iov_base = (void*)d;
      v[n++].iov_len = dl > (uint64_t)1 << 30 ? (size_t)1 << 30 : (size_t)dl;
    }
    memset(&m, 0, sizeof m);
    m.msg_iov = v;
    m.msg_iovlen = (size_t)n;
    w = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if ((size_t)w <= hl) {
      h += w;
      hl -= (size_t)w;
    } else {
      d += (size_t)w - hl;
      dl -= (size_t)w - hl;
      hl = 0;
    }
  }
  return 0;
}

int tcp_read_all(int fd, void* buf, size_t len) {
  uint8_t* p = (uint8_t*)buf;
  size_t got = 0;
  while (got < len) {
    ssize_t r = recv(fd, p + got, len - got, 0);
    if (r == 0) {
      if (got == 0) return 1;
      errno = ECONNRESET;
      return -1;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    got += (size_t)r;
  }
  return 0;
}

int tcp_readv_all(int fd, struct iovec* iov, int n) {
  while (n > 0) {
    ssize_t r = readv(fd, iov, n > IOV_MAX ? IOV_MAX : n);
    if (r == 0) {
      errno = ECONNRESET;
      return -1;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    while (n > 0 && (size_t)r >= iov->iov_len) {
      r -= (ssize_t)iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = (uint8_t*)iov->iov_base + r;
      iov->iov_len -= (size_t)r;
    }
  }
  return 0;
}

int tcp_set_blocking(int fd, int blocking) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl < 0) return -1;
  fl = blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK;
  return fcntl(fd, F_SETFL, fl);
}

void tcp_tune(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int tcp_io_deadline(int fd, void* buf, size_t len, int writing, int64_t deadline_ms) {
  uint8_t* p = (uint8_t*)buf;
  size_t done = 0;
  while (done < len) {
    ssize_t r = writing ? send(fd, p + done, len - done, MSG_NOSIGNAL) : recv(fd, p + done, len - done, 0);
    if (r > 0) {
      done += (size_t)r;
      continue;
    }
    if (r == 0 && !writing) {
      errno = ECONNRESET;
      return -1;
    }
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    {
      struct pollfd pfd;
      int64_t left = deadline_ms - wsp_now_ms();
      if (left <= 0) {
        errno = ETIMEDOUT;
        return -1;
      }
      pfd.fd = fd;
      pfd.events = writing ? POLLOUT : POLLIN;
      pfd.revents = 0;
      if (poll(&pfd, 1, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR) return -1;
    }
  }
  return 0;
}

void tcp_peer_text(int fd, char out[TCP_HOST_TEXT]) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char ip[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  snprintf(out, TCP_HOST_TEXT, "?");
  if (getpeername(fd, (struct sockaddr*)&ss, &sl) != 0) return;
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in* a = (const struct sockaddr_in*)&ss;
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
    port = ntohs(a->sin_port);
    snprintf(out, TCP_HOST_TEXT, "%s:%u", ip, port);
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6* a = (const struct sockaddr_in6*)&ss;
    inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
    port = ntohs(a->sin6_port);
    snprintf(out, TCP_HOST_TEXT, "[%s]:%u", ip, port);
  }
}
