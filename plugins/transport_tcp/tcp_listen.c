/* tcp_listen.c — rank 0's door: a listening socket on the address of the hint local_address, its
 * address published in the (authenticated) store, and the acceptor thread that admits
 * connections.
 *
 * The acceptor is the only code that meets a stranger. It keeps a fixed table of handshakes in
 * progress (kSlots): each gets the CHALLENGE at once and has kHandshakeMs to send a HELLO whose
 * proof verifies; a full table closes its oldest entry to make room. Nothing is allocated and no
 * field of a HELLO is believed before its proof verified; a connection that fails is closed and
 * counted (logged at powers of two, with the peer's address). A connection that proved the key
 * becomes one of the pending streams of its rank (tcp_peer_t.pending_*), where connect or
 * connect_peer takes it: the members' threads never wait on a stranger. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_transport.h"

enum { kSlots = 64, kHandshakeMs = 3000 };

typedef struct slot {
  int fd;
  int64_t deadline_ms;
  int64_t opened_ms;
  uint32_t got;
  uint8_t nonce[TCP_NONCE_BYTES];
  uint8_t hello[TCP_HELLO_BYTES];
} slot_t;

static int is_wildcard(const char* host) {
  return host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || strcmp(host, "[::]") == 0;
}

/* "host" without the brackets of "[v6]". */
static void bare_host(const char* host, char* out, size_t cap) {
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < cap) {
    memcpy(out, host + 1, n - 2);
    out[n - 2] = '\0';
  } else {
    snprintf(out, cap, "%s", host);
  }
}

/* Every address of this host's interfaces that are up (loopback last), comma-separated: what a
 * wildcard listener publishes. */
static void interface_addresses(char* out, size_t cap) {
  struct ifaddrs *ifs = NULL, *i;
  int pass;
  size_t n = 0;
  out[0] = '\0';
  if (getifaddrs(&ifs) != 0) return;
  for (pass = 0; pass < 2; ++pass)
    for (i = ifs; i != NULL; i = i->ifa_next) {
      char ip[INET6_ADDRSTRLEN];
      const int loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
      if (i->ifa_addr == NULL || !(i->ifa_flags & IFF_UP) || loop != (pass == 1)) continue;
      if (i->ifa_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in*)i->ifa_addr)->sin_addr, ip, sizeof ip);
      else
        continue; /* IPv6 link-local addresses need a scope; a v6 member binds its address */
      if (n + strlen(ip) + 2 >= cap) break;
      n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? "," : "", ip);
    }
  freeifaddrs(ifs);
}

static wsync_status_t open_listener(tcp_transport_t* t, char* hosts, size_t cap, unsigned* port) {
  struct addrinfo hints, *res = NULL;
  char bare[256];
  const char* host = t->local_address;
  int fd = -1, one = 1, rc;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  bare_host(is_wildcard(host) ? "" : host, bare, sizeof bare);
  rc = getaddrinfo(bare[0] ? bare : NULL, "0", &hints, &res);
  if (rc != 0 || res == NULL)
    return wsp_fail(WSYNC_ERR_IO, TCP_LABEL ": cannot resolve the address to listen on '%s': %s", host, gai_strerror(rc));
  fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr*)&ss, &sl) != 0 || tcp_set_blocking(fd, 0) != 0) {
    const int e = errno;
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return wsp_fail(WSYNC_ERR_IO, TCP_LABEL ": cannot listen on '%s': %s", host[0] ? host : "every interface",
                    strerror(e));
  }
  freeaddrinfo(res);
  *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&ss)->sin6_port : ((struct sockaddr_in*)&ss)->sin_port);
  if (bare[0])
    snprintf(hosts, cap, "%s", bare);
  else
    interface_addresses(hosts, cap);
  t->listen_fd = fd;
  return WSYNC_OK;
}

static void slot_close(slot_t* s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

/* Why a connection was closed before it proved the key; each reason is counted and logged at
 * powers of two of its count, so a flood costs a few log lines. */
static const char* const kRefusals[TCP_REFUSALS] = {
    "it did not prove the group secret", "it did not prove the group secret in time",
    "it closed before proving the group secret", "the handshake table was full and it was the oldest",
    "it proved the key but gave a rank or stream outside this world"};

static void refused(tcp_transport_t* t, int fd, int reason) {
  char who[TCP_HOST_TEXT];
  uint64_t n;
  tcp_peer_text(fd, who);
  pthread_mutex_lock(&t->mu);
  n = ++t->refused[reason];
  pthread_mutex_unlock(&t->mu);
  if ((n & (n - 1)) == 0)
    wsp_log(WSYNC_LOG_WARN, TCP_LABEL ": world '%s': closed a connection from %s: %s (%llu such so far; logged at "
            "powers of two)", t->world, who, kRefusals[reason], (unsigned long long)n);
}

/* A HELLO whose proof verified: it becomes a pending stream of its rank (t->mu taken here). */
static void admit(tcp_transport_t* t, slot_t* s, const tcp_hello_t* h) {
  uint8_t welcome[TCP_WELCOME_BYTES];
  tcp_peer_t* p;
  if (h->rank == 0 || h->rank >= t->world_size || h->streams != t->streams || h->stream >= t->streams) {
    refused(t, s->fd, TCP_REFUSED_RANK);
    slot_close(s);
    return;
  }
  if (tcp_welcome_encode(t, h, s->nonce, welcome) != 0 ||
      tcp_io_deadline(s->fd, welcome, sizeof welcome, 1, s->deadline_ms) != 0 || tcp_set_blocking(s->fd, 1) != 0) {
    slot_close(s);
    return;
  }
  tcp_tune(s->fd);
  pthread_mutex_lock(&t->mu);
  p = &t->peers[h->rank];
  if (p->pending_count > 0 && p->pending_instance != h->instance) { /* a newer process of this rank */
    uint32_t i;
    for (i = 0; i < TCP_MAX_STREAMS; ++i)
      if (p->pending_fd[i] >= 0) {
        close(p->pending_fd[i]);
        p->pending_fd[i] = -1;
      }
    p->pending_count = 0;
  }
  p->pending_instance = h->instance;
  if (p->pending_fd[h->stream] >= 0) {
    close(p->pending_fd[h->stream]);
    p->pending_count--;
  }
  p->pending_fd[h->stream] = s->fd;
  p->pending_count++;
  tcp_peer_text(s->fd, p->pending_host);
  s->fd = -1;
  tcp_signal(t);
  pthread_mutex_unlock(&t->mu);
}

static void take_bytes(tcp_transport_t* t, slot_t* s) {
  ssize_t r = recv(s->fd, s->hello + s->got, TCP_HELLO_BYTES - s->got, 0);
  tcp_hello_t h;
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    refused(t, s->fd, TCP_REFUSED_CLOSED);
    slot_close(s);
    return;
  }
  if (r < 0) return;
  s->got += (uint32_t)r;
  if (s->got < TCP_HELLO_BYTES) return;
  if (tcp_hello_verify(t, s->hello, s->nonce, &h) != 0) {
    refused(t, s->fd, TCP_REFUSED_PROOF);
    slot_close(s);
    return;
  }
  admit(t, s, &h);
}

/* 0, or -1 when accept failed for lack of descriptors or memory: the caller then leaves the
 * listener out of poll for a while (it stays readable, and polling it would spin). */
static int accept_one(tcp_transport_t* t, slot_t* slots) {
  uint8_t challenge[TCP_CHALLENGE_BYTES];
  slot_t* s = NULL;
  int i, fd = accept4(t->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM ? -1 : 0;
  for (i = 0; i < kSlots && s == NULL; ++i)
    if (slots[i].fd < 0) s = &slots[i];
  if (s == NULL) { /* full: the oldest handshake makes room */
    s = &slots[0];
    for (i = 1; i < kSlots; ++i)
      if (slots[i].opened_ms < s->opened_ms) s = &slots[i];
    refused(t, s->fd, TCP_REFUSED_FULL);
    slot_close(s);
  }
  s->fd = fd;
  s->got = 0;
  s->opened_ms = wsp_now_ms();
  s->deadline_ms = s->opened_ms + kHandshakeMs;
  if (tcp_random(s->nonce, sizeof s->nonce) != 0) {
    slot_close(s);
    return 0;
  }
  tcp_challenge_encode(s->nonce, challenge);
  if (send(fd, challenge, sizeof challenge, MSG_NOSIGNAL) != (ssize_t)sizeof challenge) slot_close(s);
  return 0;
}

static void* acceptor_main(void* arg) {
  tcp_transport_t* t = (tcp_transport_t*)arg;
  slot_t slots[kSlots];
  struct pollfd pfd[kSlots + 2];
  int64_t listen_again_ms = 0; /* out of descriptors: the listener rests until then */
  int i;
  for (i = 0; i < kSlots; ++i) slots[i].fd = -1;
  for (;;) {
    int n = 0, stop;
    int64_t now = wsp_now_ms(), next = now + 1000;
    pthread_mutex_lock(&t->mu);
    stop = t->stopping;
    pthread_mutex_unlock(&t->mu);
    if (stop) break;
    pfd[n].fd = t->wake_fd;
    pfd[n++].events = POLLIN;
    pfd[n].fd = now >= listen_again_ms ? t->listen_fd : -1; /* (poll ignores a negative fd) */
    pfd[n++].events = POLLIN;
    if (now < listen_again_ms && listen_again_ms < next) next = listen_again_ms;
    for (i = 0; i < kSlots; ++i) {
      if (slots[i].fd < 0) continue;
      if (now >= slots[i].deadline_ms) {
        refused(t, slots[i].fd, TCP_REFUSED_SLOW);
        slot_close(&slots[i]);
        continue;
      }
      if (slots[i].deadline_ms < next) next = slots[i].deadline_ms;
      pfd[n].fd = slots[i].fd;
      pfd[n++].events = POLLIN;
    }
    for (i = 0; i < n; ++i) pfd[i].revents = 0;
    if (poll(pfd, (nfds_t)n, (int)(next - now) + 1) <= 0) continue;
    if (pfd[0].revents) break;
    for (i = 0; i < kSlots; ++i) { /* slots first: a flood of new connections cannot starve them */
      int j;
      if (slots[i].fd < 0) continue;
      for (j = 2; j < n; ++j)
        if (pfd[j].fd == slots[i].fd && pfd[j].revents) take_bytes(t, &slots[i]);
    }
    if ((pfd[1].revents & POLLIN) && accept_one(t, slots) != 0) listen_again_ms = wsp_now_ms() + 100;
  }
  for (i = 0; i < kSlots; ++i) slot_close(&slots[i]);
  return NULL;
}

wsync_status_t tcp_listen_start(tcp_transport_t* t) {
  char hosts[400], key[600], value[512];
  unsigned port = 0;
  wsync_status_t st;
  if ((st = open_listener(t, hosts, sizeof hosts, &port)) != WSYNC_OK) return st;
  if (hosts[0] == '\0') snprintf(hosts, sizeof hosts, "127.0.0.1");
  snprintf(value, sizeof value, "wsync-tcp 1 %u %u %s", t->streams, port, hosts);
  snprintf(t->listen_text, sizeof t->listen_text, "%s port %u", hosts, port);
  t->wake_fd = eventfd(0, EFD_CLOEXEC);
  if (t->wake_fd < 0) return wsp_fail(WSYNC_ERR_IO, TCP_LABEL ": eventfd failed: %s", strerror(errno));
  if (pthread_create(&t->acceptor, NULL, acceptor_main, t) != 0)
    return wsp_fail(WSYNC_ERR_IO, TCP_LABEL ": cannot start the acceptor thread");
  t->acceptor_started = 1;
  tcp_addr_key(t, key, sizeof key);
  st = wsp_host()->store_set(t->store, key, value, strlen(value));
  if (st != WSYNC_OK) return wsp_fail(st, TCP_LABEL ": publishing this rank's address under '%s' failed", key);
  wsp_log(WSYNC_LOG_DEBUG, TCP_LABEL ": world '%s': listening on %s, %u stream(s) per receiver", t->world,
          t->listen_text, t->streams);
  return WSYNC_OK;
}

void tcp_listen_stop(tcp_transport_t* t) {
  uint64_t one = 1;
  pthread_mutex_lock(&t->mu);
  t->stopping = 1;
  pthread_mutex_unlock(&t->mu);
  if (t->acceptor_started) {
    (void)!write(t->wake_fd, &one, sizeof one);
    pthread_join(t->acceptor, NULL);
    t->acceptor_started = 0;
  }
  if (t->wake_fd >= 0) close(t->wake_fd);
  t->wake_fd = -1;
  if (t->listen_fd >= 0) close(t->listen_fd);
  t->listen_fd = -1;
}
