/* tcp_recv.c — a receiver's half: a reader thread per stream reads a chunk header, finds the
 * receive posted for its piece (waiting for the post while the bytes wait in the socket: TCP's
 * flow control holds the sender back), and reads the chunk's bytes with readv straight into the
 * posted regions. A piece is whole when chunks carrying exactly its size arrived. Every header is
 * checked against the posted receive (size, offset inside it) before a byte lands; a chunk for a
 * piece that was posted before and is gone (finished, or given up by the core) is read and dropped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tcp_transport.h"

static tcp_recv_op_t* find_recv(tcp_transport_t* t, uint64_t seq) {
  tcp_recv_op_t* op;
  for (op = t->recvs; op != NULL; op = op->next)
    if (op->seq == seq) return op;
  return NULL;
}

/* Whole: chunks carrying exactly its size arrived (an empty piece: its one empty chunk). */
static int recv_complete(const tcp_recv_op_t* op) {
  return op->status == WSYNC_OK && op->arrived && op->received == op->expected && op->users == 0;
}

static void free_recv(tcp_recv_op_t* op) {
  free(op->iov);
  free(op->starts);
  free(op);
}

/* Read and drop `len` bytes. */
static int drain(int fd, uint64_t len) {
  uint8_t scratch[65536];
  while (len > 0) {
    const size_t n = len > sizeof scratch ? sizeof scratch : (size_t)len;
    if (tcp_read_all(fd, scratch, n) != 0) return -1;
    len -= n;
  }
  return 0;
}

/* The regions of `op` covering [offset, offset + len), as iovecs (malloc'd; *n of them). */
static struct iovec* slice(const tcp_recv_op_t* op, uint64_t offset, uint64_t len, int* n) {
  uint64_t lo = 0, hi = op->num_iov, i, end = offset + len;
  struct iovec* v;
  int k = 0;
  while (lo + 1 < hi) { /* the last region starting at or before offset */
    const uint64_t mid = lo + (hi - lo) / 2;
    if (op->starts[mid] <= offset)
      lo = mid;
    else
      hi = mid;
  }
  for (i = lo; i < op->num_iov && op->starts[i] < end; ++i) ++k;
  v = (struct iovec*)malloc((size_t)(k ? k : 1) * sizeof *v);
  if (v == NULL) return NULL;
  k = 0;
  for (i = lo; i < op->num_iov && op->starts[i] < end; ++i) {
    const uint64_t a = op->starts[i] > offset ? op->starts[i] : offset;
    const uint64_t b = op->starts[i] + op->iov[i].len < end ? op->starts[i] + op->iov[i].len : end;
    if (b <= a) continue;
    v[k].iov_base = (uint8_t*)op->iov[i].base + (a - op->starts[i]);
    v[k++].iov_len = (size_t)(b - a);
  }
  *n = k;
  return v;
}

/* One chunk's bytes into `op` (t->mu held on entry and exit, released while reading). */
static int land(tcp_transport_t* t, tcp_stream_t* s, tcp_recv_op_t* op, uint64_t offset, uint64_t len) {
  struct iovec* v;
  int n = 0, rc;
  op->users++;
  pthread_mutex_unlock(&t->mu);
  v = slice(op, offset, len, &n);
  rc = v == NULL ? -1 : tcp_readv_all(s->fd, v, n);
  if (v == NULL) errno = ENOMEM;
  free(v);
  pthread_mutex_lock(&t->mu);
  op->users--;
  if (rc == 0) {
    op->received += len;
    op->arrived = 1;
    if (op->received > op->expected && op->status == WSYNC_OK) {
      op->status = WSYNC_ERR_PROTOCOL;
      snprintf(op->why, sizeof op->why, "rank 0 (the sender, at %s) sent chunks of bucket %llu (by sequence number) "
               "that overlap", s->peer->host, (unsigned long long)op->seq);
      tcp_peer_fail(t, s->peer, WSYNC_ERR_PROTOCOL, op->why);
    }
  }
  tcp_signal(t);
  return rc;
}

static void reader_failed(tcp_transport_t* t, tcp_stream_t* s, wsync_status_t st, const char* what, int err) {
  tcp_peer_t* p = s->peer;
  char why[320];
  if (s->stop) return; /* we were stopped: not the peer's doing */
  if (err == 0)
    snprintf(why, sizeof why, "rank 0 (the sender, at %s) %s", p->host, what);
  else
    snprintf(why, sizeof why, "rank 0 (the sender, at %s) %s: %s", p->host, what, strerror(err));
  tcp_peer_fail(t, p, st, why);
}

void* tcp_reader_main(void* arg) {
  tcp_stream_t* s = (tcp_stream_t*)arg;
  tcp_peer_t* p = s->peer;
  tcp_transport_t* t = p->owner;
  for (;;) {
    uint8_t header[TCP_CHUNK_HEADER_BYTES];
    uint64_t seq, offset, len, total;
    tcp_recv_op_t* op;
    int rc = tcp_read_all(s->fd, header, sizeof header), err = errno;
    pthread_mutex_lock(&t->mu);
    if (rc != 0) {
      reader_failed(t, s, WSYNC_ERR_PEER_FAILED, rc == 1 ? "closed the connection (did its process die?)" : "failed",
                    rc == 1 ? 0 : err);
      break;
    }
    if (tcp_chunk_header_decode(header, &seq, &offset, &len, &total) != 0) {
      reader_failed(t, s, WSYNC_ERR_PROTOCOL, "sent a malformed chunk header", 0);
      break;
    }
    for (;;) { /* the receive of this piece, once the core posted it */
      op = find_recv(t, seq);
      if (op != NULL || seq < t->max_posted || s->stop || p->failed != WSYNC_OK) break;
      pthread_cond_wait(&t->cond, &t->mu);
    }
    if (s->stop || p->failed != WSYNC_OK) break;
    if (op != NULL && op->status == WSYNC_OK && total != op->expected) {
      op->status = WSYNC_ERR_PROTOCOL;
      snprintf(op->why, sizeof op->why, "rank 0 (the sender, at %s) sent bucket %llu (by sequence number) as %llu "
               "bytes; %llu were expected", p->host, (unsigned long long)seq, (unsigned long long)total,
               (unsigned long long)op->expected);
      /* The sender is broken: its connection goes (a reader of another stream still landing a
       * chunk of this piece stops at once, so recv_wait's report is never followed by a write). */
      tcp_peer_fail(t, p, WSYNC_ERR_PROTOCOL, op->why);
      break;
    }
    if (op == NULL || op->status != WSYNC_OK) { /* not ours (any more): read and drop */
      pthread_mutex_unlock(&t->mu);
      rc = drain(s->fd, len);
      err = errno;
      pthread_mutex_lock(&t->mu);
    } else {
      rc = land(t, s, op, offset, len);
      err = errno;
    }
    if (rc != 0) {
      reader_failed(t, s, WSYNC_ERR_PEER_FAILED, "failed while a bucket was arriving", err);
      break;
    }
    pthread_mutex_unlock(&t->mu);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

wsync_status_t tcp_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  tcp_recv_op_t* op;
  uint64_t i, total = 0;
  if (t == NULL || (iov == NULL && num_iov > 0))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": recv_post: NULL argument");
  if (t->rank == 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": recv_post on the sender (rank 0)");
  if (!t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": recv_post before connect");
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, TCP_LABEL ": aborted");
  if (seq == UINT64_MAX) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": recv_post: bucket number too large");
  for (i = 0; i < num_iov; ++i) {
    if (iov[i].base == NULL && iov[i].len > 0)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": recv_post: region %llu of bucket %llu is NULL",
                      (unsigned long long)i, (unsigned long long)seq);
    if (iov[i].len > UINT64_MAX - total)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": recv_post: the regions of bucket %llu overflow",
                      (unsigned long long)seq);
    total += iov[i].len;
  }
  op = (tcp_recv_op_t*)calloc(1, sizeof *op);
  if (op != NULL && num_iov > 0) {
    op->iov = (wsync_iov_t*)malloc(num_iov * sizeof *op->iov);
    op->starts = (uint64_t*)malloc(num_iov * sizeof *op->starts);
  }
  if (op == NULL || (num_iov > 0 && (op->iov == NULL || op->starts == NULL))) {
    if (op != NULL) free_recv(op);
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, TCP_LABEL ": out of memory");
  }
  op->seq = seq;
  op->expected = total;
  op->num_iov = num_iov;
  for (i = 0, total = 0; i < num_iov; ++i) {
    op->iov[i] = iov[i];
    op->starts[i] = total;
    total += iov[i].len;
  }
  pthread_mutex_lock(&t->mu);
  if (find_recv(t, seq) != NULL) {
    pthread_mutex_unlock(&t->mu);
    free_recv(op);
    return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": bucket %llu is already posted", (unsigned long long)seq);
  }
  op->next = t->recvs;
  t->recvs = op;
  if (seq + 1 > t->max_posted) t->max_posted = seq + 1;
  pthread_cond_broadcast(&t->cond); /* a reader may wait for this post */
  pthread_mutex_unlock(&t->mu);
  return WSYNC_OK;
}

static void remove_recv(tcp_transport_t* t, tcp_recv_op_t* op) {
  tcp_recv_op_t** link;
  for (link = &t->recvs; *link != NULL; link = &(*link)->next)
    if (*link == op) {
      *link = op->next;
      break;
    }
  free_recv(op);
}

/* After a failure: wait until no reader writes into `op` (its socket is shut down, so this is short). */
static void wait_unused(tcp_transport_t* t, tcp_recv_op_t* op) {
  const int64_t until = wsp_deadline_ms(2000);
  while (op->users > 0 && tcp_wait_until(t, until) != ETIMEDOUT) {
  }
}

wsync_status_t tcp_recv_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  const int64_t deadline = wsp_deadline_ms(timeout_ms);
  tcp_recv_op_t* op;
  char why[400];
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": recv_wait on NULL");
  pthread_mutex_lock(&t->mu);
  op = find_recv(t, seq);
  if (op == NULL) {
    pthread_mutex_unlock(&t->mu);
    return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": recv_wait for bucket %llu, which was not posted",
                    (unsigned long long)seq);
  }
  for (;;) {
    const tcp_peer_t* p = &t->peers[0];
    const uint64_t scan_gen = t->gen; /* what this look saw (arm compares with it) */
    if (recv_complete(op)) {
      remove_recv(t, op);
      pthread_mutex_unlock(&t->mu);
      return WSYNC_OK;
    }
    if (op->status != WSYNC_OK) {
      const wsync_status_t st = op->status;
      wait_unused(t, op);
      snprintf(why, sizeof why, "%s", op->why);
      pthread_mutex_unlock(&t->mu);
      return wsp_fail(st, TCP_LABEL ": %s", why);
    }
    if (p->failed != WSYNC_OK) {
      const wsync_status_t st = p->failed;
      wait_unused(t, op);
      snprintf(why, sizeof why, "%s; bucket %llu (by sequence number) had %llu of its %llu bytes", p->failed_why,
               (unsigned long long)seq, (unsigned long long)op->received, (unsigned long long)op->expected);
      pthread_mutex_unlock(&t->mu);
      return wsp_fail(st, TCP_LABEL ": %s", why);
    }
    if (atomic_load(&t->aborted)) {
      wait_unused(t, op);  /* (abort shut the sockets down: the readers leave at once) */
      pthread_mutex_unlock(&t->mu);
      return wsp_fail(WSYNC_ERR_ABORTED, TCP_LABEL ": aborted");
    }
    if (tcp_wait_until(t, deadline) == ETIMEDOUT && !recv_complete(op)) {
      snprintf(why, sizeof why, "bucket %llu (by sequence number) has %llu of its %llu bytes from rank 0 (the sender, "
               "at %s) so far", (unsigned long long)seq, (unsigned long long)op->received,
               (unsigned long long)op->expected, p->host);
      t->seen_gen = scan_gen;
      pthread_mutex_unlock(&t->mu);
      return wsp_fail(WSYNC_ERR_TIMEOUT, TCP_LABEL ": %s", why);
    }
  }
}

void tcp_free_recvs(tcp_transport_t* t) {
  while (t->recvs != NULL) {
    tcp_recv_op_t* op = t->recvs;
    t->recvs = op->next;
    free_recv(op);
  }
}
