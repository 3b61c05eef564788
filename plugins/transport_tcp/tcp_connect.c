/* tcp_connect.c — bringing a world up: rank 0 listens (tcp_listen.c) and takes the connections of
 * each receiver once they proved the key (connect: all of them; connect_peer: one, for a receiver
 * that joins later or comes back); a receiver reads rank 0's address from the store and opens its
 * streams, checking rank 0's proof before it reads a byte of data. Also the life of a peer's
 * streams: started, failed, stopped. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_transport.h"

void tcp_addr_key(const tcp_transport_t* t, char* out, size_t cap) {
  snprintf(out, cap, "wsync/tcp/%s/addr", t->world);
}

void tcp_peer_fail(tcp_transport_t* t, tcp_peer_t* p, wsync_status_t status, const char* why) {
  uint32_t i;
  if (p->failed == WSYNC_OK) {
    p->failed = status;
    snprintf(p->failed_why, sizeof p->failed_why, "%s", why);
  }
  if (p->streams != NULL)
    for (i = 0; i < t->streams; ++i)
      if (p->streams[i].fd >= 0) shutdown(p->streams[i].fd, SHUT_RDWR);
  tcp_signal(t);
}

void tcp_peer_stop(tcp_transport_t* t, tcp_peer_t* p) {
  tcp_stream_t* s = p->streams;
  uint32_t i;
  if (s == NULL) return;
  p->active = 0;
  p->streams = NULL; /* nobody queues on them from here on */
  for (i = 0; i < t->streams; ++i) {
    s[i].stop = 1;
    if (s[i].fd >= 0) shutdown(s[i].fd, SHUT_RDWR);
  }
  pthread_cond_broadcast(&t->cond);
  pthread_mutex_unlock(&t->mu);
  for (i = 0; i < t->streams; ++i)
    if (s[i].started) pthread_join(s[i].thread, NULL);
  pthread_mutex_lock(&t->mu);
  for (i = 0; i < t->streams; ++i) {
    tcp_drop_queue(t, &s[i], "its connection was closed (the receiver was forgotten or replaced)");
    if (s[i].fd >= 0) close(s[i].fd);
  }
  free(s);
  tcp_signal(t);
}

/* Give `p` the connections `fds` and start a thread on each (t->mu held). */
static wsync_status_t activate(tcp_transport_t* t, tcp_peer_t* p, const int* fds, const char* host) {
  tcp_stream_t* s = (tcp_stream_t*)calloc(t->streams, sizeof *s);
  uint32_t i;
  if (s == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, TCP_LABEL ": out of memory");
  for (i = 0; i < t->streams; ++i) {
    s[i].peer = p;
    s[i].index = i;
    s[i].fd = fds[i];
  }
  p->streams = s;
  p->active = 1;
  p->forgotten = 0;
  p->failed = WSYNC_OK;
  p->failed_why[0] = '\0';
  snprintf(p->host, sizeof p->host, "%s", host);
  for (i = 0; i < t->streams; ++i) {
    if (pthread_create(&s[i].thread, NULL, t->rank == 0 ? tcp_writer_main : tcp_reader_main, &s[i]) != 0) {
      tcp_peer_fail(t, p, WSYNC_ERR_IO, "a thread for its connection could not be started");
      break;
    }
    s[i].started = 1;
  }
  return p->failed == WSYNC_OK ? WSYNC_OK : wsp_fail(p->failed, TCP_LABEL ": rank %u: %s", p->rank, p->failed_why);
}

static int pending_complete(const tcp_transport_t* t, const tcp_peer_t* p) { return p->pending_count == t->streams; }

/* Rank 0: rank `r`'s pending connections become its streams (t->mu held). */
static wsync_status_t take_pending(tcp_transport_t* t, uint32_t r) {
  tcp_peer_t* p = &t->peers[r];
  int fds[TCP_MAX_STREAMS];
  char host[TCP_HOST_TEXT];
  uint32_t i;
  /* Taken first: stopping the old streams releases t->mu, and the acceptor may meanwhile start a
   * pending set of yet another process of this rank. */
  for (i = 0; i < t->streams; ++i) {
    fds[i] = p->pending_fd[i];
    p->pending_fd[i] = -1;
  }
  p->pending_count = 0;
  snprintf(host, sizeof host, "%s", p->pending_host);
  if (p->streams != NULL) tcp_peer_stop(t, p); /* a process of this rank from before */
  return activate(t, p, fds, host);
}

static wsync_status_t sender_connect(tcp_transport_t* t, int64_t timeout_ms) {
  const int64_t deadline = wsp_deadline_ms(timeout_ms);
  wsync_status_t st;
  uint32_t r;
  if ((st = tcp_listen_start(t)) != WSYNC_OK) return st;
  pthread_mutex_lock(&t->mu);
  t->connected = 1;
  if (t->join_later) {
    pthread_mutex_unlock(&t->mu);
    return WSYNC_OK;
  }
  for (;;) {
    uint32_t missing = 0;
    for (r = 1; r < t->world_size; ++r) missing += !pending_complete(t, &t->peers[r]);
    if (missing == 0 || atomic_load(&t->aborted) || tcp_wait_until(t, deadline) == ETIMEDOUT) break;
  }
  for (r = 1; r < t->world_size; ++r)
    if (!pending_complete(t, &t->peers[r])) {
      char list[256];
      size_t n = 0;
      uint32_t q;
      list[0] = '\0';
      for (q = r; q < t->world_size && n + 16 < sizeof list; ++q)
        if (!pending_complete(t, &t->peers[q])) n += (size_t)snprintf(list + n, sizeof list - n, "%s%u", n ? ", " : "", q);
      pthread_mutex_unlock(&t->mu);
      if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, TCP_LABEL ": aborted while connecting");
      return wsp_fail(WSYNC_ERR_TIMEOUT, TCP_LABEL ": world '%s': receiver rank(s) %s did not connect to %s within "
                      "%lld ms", t->world, list, t->listen_text, (long long)timeout_ms);
    }
  for (r = 1; r < t->world_size && st == WSYNC_OK; ++r) st = take_pending(t, r);
  pthread_mutex_unlock(&t->mu);
  return st;
}

wsync_status_t tcp_connect_peer(void* self, uint32_t rank, int64_t timeout_ms) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  const int64_t deadline = wsp_deadline_ms(timeout_ms);
  wsync_status_t st;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": connect_peer on NULL");
  if (t->rank != 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": connect_peer on receiver rank %u", t->rank);
  if (rank == 0 || rank >= t->world_size)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": connect_peer to rank %u outside 1..%u", rank,
                    t->world_size - 1);
  pthread_mutex_lock(&t->mu);
  if (!t->connected) {
    pthread_mutex_unlock(&t->mu);
    return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": connect_peer before connect");
  }
  while (!pending_complete(t, &t->peers[rank]) && !atomic_load(&t->aborted) && tcp_wait_until(t, deadline) != ETIMEDOUT) {
  }
  if (!pending_complete(t, &t->peers[rank])) {
    pthread_mutex_unlock(&t->mu);
    if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, TCP_LABEL ": aborted while connecting");
    return wsp_fail(WSYNC_ERR_TIMEOUT, TCP_LABEL ": world '%s': receiver rank %u did not connect to %s within %lld ms",
                    t->world, rank, t->listen_text, (long long)timeout_ms);
  }
  st = take_pending(t, rank);
  pthread_mutex_unlock(&t->mu);
  return st;
}

/* ---- the receiver's side ---- */

typedef struct published {
  uint32_t streams;
  unsigned port;
  char hosts[400];
} published_t;

static wsync_status_t read_published(tcp_transport_t* t, int64_t timeout_ms, published_t* out) {
  char key[600], value[512], hosts[400];
  uint64_t len = 0;
  unsigned version = 0, streams = 0, port = 0;
  int used = 0;
  wsync_status_t st;
  tcp_addr_key(t, key, sizeof key);
  st = wsp_host()->store_get(t->store, key, value, sizeof value - 1, &len, timeout_ms);
  if (st != WSYNC_OK)
    return wsp_fail(st, TCP_LABEL ": world '%s': rank 0's address (store key '%s') did not appear within %lld ms",
                    t->world, key, (long long)timeout_ms);
  value[len] = '\0';
  if (sscanf(value, "wsync-tcp %u %u %u %399s%n", &version, &streams, &port, hosts, &used) != 4 || version != 1 ||
      streams == 0 || streams > TCP_MAX_STREAMS || port == 0 || port > 65535 || (size_t)used != len)
    return wsp_fail(WSYNC_ERR_PROTOCOL, TCP_LABEL ": world '%s': rank 0's address under '%s' is malformed or of "
                    "another version of this plugin", t->world, key);
  out->streams = streams;
  out->port = port;
  snprintf(out->hosts, sizeof out->hosts, "%s", hosts);
  return WSYNC_OK;
}

/* A connected socket to host:port (non-blocking), or -1 with errno; gives up at abort. */
static int dial(tcp_transport_t* t, const char* host, unsigned port, int64_t deadline_ms) {
  struct addrinfo hints, *res = NULL, *ai;
  char service[16];
  int fd = -1, err = ECONNREFUSED;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(service, sizeof service, "%u", port);
  if (getaddrinfo(host, service, &hints, &res) != 0) {
    errno = EHOSTUNREACH;
    return -1;
  }
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS) {
      struct pollfd pfd;
      int so = 0, ready = 0;
      socklen_t sl = sizeof so;
      int64_t left;
      pfd.fd = fd;
      pfd.events = POLLOUT;
      /* In slices of 100 ms, so that an abort is heard. */
      while (!ready && !atomic_load(&t->aborted) && (left = deadline_ms - wsp_now_ms()) > 0) {
        pfd.revents = 0;
        ready = poll(&pfd, 1, (int)(left > 100 ? 100 : left)) == 1;
      }
      if (ready && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so == 0) break;
      err = so != 0 ? so : ETIMEDOUT;
    } else {
      err = errno;
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) errno = err;
  return fd;
}

/* One stream: dial, CHALLENGE, HELLO, WELCOME. The connected, blocking socket, or -1 with *why. */
static int open_stream(tcp_transport_t* t, const published_t* pub, uint32_t stream, int64_t deadline_ms, char* why,
                       size_t cap) {
  char hosts[400];
  char* save = NULL;
  const char* host;
  int last_err = 0;
  snprintf(hosts, sizeof hosts, "%s", pub->hosts);
  for (host = strtok_r(hosts, ",", &save); host != NULL; host = strtok_r(NULL, ",", &save)) {
    uint8_t challenge[TCP_CHALLENGE_BYTES], hello[TCP_HELLO_BYTES], welcome[TCP_WELCOME_BYTES];
    uint8_t server_nonce[TCP_NONCE_BYTES];
    tcp_hello_t h;
    /* A live listener answers in a round trip; 5 s at most per attempt, so that the caller's loop
     * hears an abort between attempts. */
    const int64_t hs_deadline = deadline_ms < wsp_now_ms() + 5000 ? deadline_ms : wsp_now_ms() + 5000;
    int fd = dial(t, host, pub->port, deadline_ms);
    if (fd < 0) {
      last_err = errno;
      snprintf(why, cap, "connecting to %s port %u failed: %s", host, pub->port, strerror(last_err));
      continue;
    }
    h.rank = t->rank;
    h.stream = stream;
    h.streams = pub->streams;
    h.instance = t->instance;
    errno = 0;
    if (tcp_io_deadline(fd, challenge, sizeof challenge, 0, hs_deadline) != 0 ||
        tcp_challenge_decode(challenge, server_nonce) != 0 || tcp_random(h.nonce, sizeof h.nonce) != 0 ||
        tcp_hello_encode(t, &h, server_nonce, hello) != 0 ||
        tcp_io_deadline(fd, hello, sizeof hello, 1, hs_deadline) != 0 ||
        tcp_io_deadline(fd, welcome, sizeof welcome, 0, hs_deadline) != 0) {
      snprintf(why, cap, "the handshake with %s port %u failed: %s", host, pub->port,
               errno ? strerror(errno) : "not a wsync tcp listener");
      close(fd);
      continue;
    }
    if (tcp_welcome_verify(t, &h, server_nonce, welcome) != 0) {
      snprintf(why, cap, "%s port %u did not prove the group secret (not this group's rank 0)", host, pub->port);
      close(fd);
      continue;
    }
    if (tcp_set_blocking(fd, 1) != 0) {
      close(fd);
      continue;
    }
    tcp_tune(fd);
    return fd;
  }
  return -1;
}

static wsync_status_t receiver_connect(tcp_transport_t* t, int64_t timeout_ms) {
  const int64_t deadline = wsp_deadline_ms(timeout_ms);
  published_t pub;
  int fds[TCP_MAX_STREAMS];
  char why[400] = "no address to try", host[TCP_HOST_TEXT];
  uint32_t i, n = 0;
  wsync_status_t st;
  if ((st = read_published(t, timeout_ms, &pub)) != WSYNC_OK) return st;
  t->streams = pub.streams;
  while (n < pub.streams && !atomic_load(&t->aborted)) {
    int fd = open_stream(t, &pub, n, deadline, why, sizeof why);
    if (fd >= 0) {
      fds[n++] = fd;
      continue;
    }
    if (wsp_now_ms() >= deadline) break;
    wsp_sleep_us(100000, wsp_deadline_us(deadline - wsp_now_ms()));
  }
  if (n < pub.streams) {
    for (i = 0; i < n; ++i) close(fds[i]);
    if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, TCP_LABEL ": aborted while connecting");
    return wsp_fail(WSYNC_ERR_TIMEOUT, TCP_LABEL ": world '%s', rank %u: could not reach rank 0 within %lld ms: %s",
                    t->world, t->rank, (long long)timeout_ms, why);
  }
  tcp_peer_text(fds[0], host);
  pthread_mutex_lock(&t->mu);
  st = activate(t, &t->peers[0], fds, host);
  t->connected = st == WSYNC_OK;
  pthread_mutex_unlock(&t->mu);
  return st;
}

wsync_status_t tcp_connect(void* self, int64_t timeout_ms) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": connect on NULL");
  if (t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": connect called twice");
  if (t->world_size == 1) {
    t->connected = 1;
    return WSYNC_OK;
  }
  return t->rank == 0 ? sender_connect(t, timeout_ms) : receiver_connect(t, timeout_ms);
}
