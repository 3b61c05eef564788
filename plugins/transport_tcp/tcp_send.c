/* tcp_send.c — rank 0's half: a piece becomes one chunk per stream (one chunk when it is small),
 * queued on the streams' writer threads, which write each chunk's header and bytes with sendmsg
 * straight from the caller's memory. send_wait answers once every chunk of the piece left for
 * every rank it was posted to; a rank whose connection failed is reported (and again on every
 * call) until the core forgets it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tcp_transport.h"

/* A piece this small goes on one stream: splitting it would cost more than it gains. */
#define TCP_SPLIT_MIN_BYTES ((uint64_t)1 << 20)

static void op_fail(tcp_send_op_t* op, wsync_status_t st, const char* why) {
  if (op->status == WSYNC_OK) {
    op->status = st;
    snprintf(op->why, sizeof op->why, "%s", why);
  }
}

static void chunk_done(tcp_transport_t* t, tcp_chunk_t* c) {
  if (--c->op->pending == 0) tcp_signal(t);
  free(c);
}

void tcp_drop_queue(tcp_transport_t* t, tcp_stream_t* s, const char* why) {
  while (s->head != NULL) {
    tcp_chunk_t* c = s->head;
    s->head = c->next;
    op_fail(c->op, WSYNC_ERR_PEER_FAILED, why);
    chunk_done(t, c);
  }
  s->tail = NULL;
}

void* tcp_writer_main(void* arg) {
  tcp_stream_t* s = (tcp_stream_t*)arg;
  tcp_peer_t* p = s->peer;
  tcp_transport_t* t = p->owner;
  pthread_mutex_lock(&t->mu);
  for (;;) {
    tcp_chunk_t* c;
    uint8_t header[TCP_CHUNK_HEADER_BYTES];
    int rc, err;
    while (!s->stop && s->head == NULL) pthread_cond_wait(&t->cond, &t->mu);
    if (s->stop) break;
    c = s->head;
    s->head = c->next;
    if (s->head == NULL) s->tail = NULL;
    if (p->failed != WSYNC_OK) {
      op_fail(c->op, p->failed, p->failed_why);
      chunk_done(t, c);
      continue;
    }
    pthread_mutex_unlock(&t->mu);
    tcp_chunk_header_encode(c->seq, c->offset, c->len, c->total, header);
    rc = tcp_write_all(s->fd, header, sizeof header, c->data, c->len);
    err = errno;
    pthread_mutex_lock(&t->mu);
    if (rc != 0) {
      char why[320];
      if (s->stop)
        snprintf(why, sizeof why, "its connection was closed (the receiver was forgotten)");
      else
        snprintf(why, sizeof why, "the connection to rank %u at %s failed: %s%s", p->rank, p->host, strerror(err),
                 err == EPIPE || err == ECONNRESET ? " (the receiver closed it: did its process die?)" : "");
      tcp_peer_fail(t, p, WSYNC_ERR_PEER_FAILED, why);
      op_fail(c->op, WSYNC_ERR_PEER_FAILED, why);
    }
    chunk_done(t, c);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* Free the finished ops (no chunk left) of bucket `seq`, or of rank `rank` (t->mu held). */
static void free_finished_ops(tcp_transport_t* t, int by_rank, uint64_t seq, uint32_t rank) {
  tcp_send_op_t *op, **link;
  for (link = &t->sends; (op = *link) != NULL;) {
    if (op->pending == 0 && (by_rank ? op->rank == rank : op->seq == seq)) {
      *link = op->next;
      free(op);
    } else {
      link = &op->next;
    }
  }
}

static tcp_send_op_t* find_op(tcp_transport_t* t, uint64_t seq, uint32_t rank) {
  tcp_send_op_t* op;
  for (op = t->sends; op != NULL; op = op->next)
    if (op->seq == seq && op->rank == rank) return op;
  return NULL;
}

static wsync_status_t check_post(tcp_transport_t* t, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                                 uint32_t num_ranks) {
  uint32_t i;
  if (t->rank != 0) return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": send_post on receiver rank %u", t->rank);
  if (!t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": send_post before connect");
  if (buf->device_type != 0 && buf->device_type != WSYNC_DEVICE_CPU)
    return wsp_fail(WSYNC_ERR_UNSUPPORTED, TCP_LABEL ": bucket %llu is in device memory (type %d); only host memory "
                    "is supported", (unsigned long long)seq, (int)buf->device_type);
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, TCP_LABEL ": aborted");
  for (i = 0; i < num_ranks; ++i) {
    const uint32_t r = ranks[i];
    if (r == 0 || r >= t->world_size)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": send_post to rank %u outside 1..%u", r, t->world_size - 1);
    if (t->peers[r].forgotten || !t->peers[r].active)
      return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": send_post to rank %u, which was forgotten or never "
                      "connected", r);
    if (find_op(t, seq, r) != NULL)
      return wsp_fail(WSYNC_ERR_INVALID_STATE, TCP_LABEL ": bucket %llu already posted to rank %u",
                      (unsigned long long)seq, r);
    {
      uint32_t j;
      for (j = 0; j < i; ++j)
        if (ranks[j] == r)
          return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": send_post names rank %u twice", r);
    }
  }
  return WSYNC_OK;
}

wsync_status_t tcp_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                             uint32_t num_ranks) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  tcp_send_op_t** ops;
  tcp_chunk_t** chunks;
  uint32_t i, k, nchunks;
  wsync_status_t st;
  if (t == NULL || buf == NULL || (ranks == NULL && num_ranks > 0) || (buf->data == NULL && buf->len > 0))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": send_post: NULL argument");
  nchunks = buf->len >= TCP_SPLIT_MIN_BYTES * 2 ? t->streams : 1;
  ops = (tcp_send_op_t**)calloc(num_ranks ? num_ranks : 1, sizeof *ops);
  chunks = (tcp_chunk_t**)calloc((size_t)(num_ranks ? num_ranks : 1) * nchunks, sizeof *chunks);
  st = ops != NULL && chunks != NULL ? WSYNC_OK : WSYNC_ERR_OUT_OF_MEMORY;
  for (i = 0; i < num_ranks && st == WSYNC_OK; ++i) {
    if ((ops[i] = (tcp_send_op_t*)calloc(1, sizeof **ops)) == NULL) st = WSYNC_ERR_OUT_OF_MEMORY;
    for (k = 0; k < nchunks && st == WSYNC_OK; ++k)
      if ((chunks[i * nchunks + k] = (tcp_chunk_t*)calloc(1, sizeof **chunks)) == NULL) st = WSYNC_ERR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&t->mu);
  if (st == WSYNC_OK)
    st = check_post(t, seq, buf, ranks, num_ranks);
  else
    st = wsp_fail(st, TCP_LABEL ": out of memory");
  for (i = 0; i < num_ranks && st == WSYNC_OK; ++i) {
    tcp_peer_t* p = &t->peers[ranks[i]];
    tcp_send_op_t* op = ops[i];
    /* Stripes of whole 4 KiB pages, the last one taking the rest; a small piece rides one stream. */
    const uint64_t stripe = nchunks > 1 ? (buf->len / nchunks) & ~(uint64_t)4095 : buf->len;
    op->seq = seq;
    op->rank = ranks[i];
    op->next = t->sends;
    t->sends = op;
    ops[i] = NULL;
    if (p->failed != WSYNC_OK) {
      op_fail(op, p->failed, p->failed_why);
      for (k = 0; k < nchunks; ++k) free(chunks[i * nchunks + k]);
      continue;
    }
    for (k = 0; k < nchunks; ++k) {
      tcp_chunk_t* c = chunks[i * nchunks + k];
      tcp_stream_t* s = &p->streams[nchunks > 1 ? k : (uint32_t)(seq % t->streams)];
      c->op = op;
      c->seq = seq;
      c->offset = stripe * k;
      c->len = k + 1 < nchunks ? stripe : buf->len - stripe * k;
      c->total = buf->len;
      c->data = (const uint8_t*)buf->data + c->offset;
      op->pending++;
      if (s->tail != NULL)
        s->tail->next = c;
      else
        s->head = c;
      s->tail = c;
    }
  }
  if (st == WSYNC_OK) pthread_cond_broadcast(&t->cond);
  pthread_mutex_unlock(&t->mu);
  if (st != WSYNC_OK) { /* nothing was queued: free what was made for it */
    for (i = 0; i < num_ranks && ops != NULL; ++i) {
      free(ops[i]);
      for (k = 0; k < nchunks && chunks != NULL; ++k) free(chunks[i * nchunks + k]);
    }
  }
  free(ops);
  free(chunks);
  return st;
}

wsync_status_t tcp_send_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  const int64_t deadline = wsp_deadline_ms(timeout_ms);
  tcp_send_op_t* op;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": send_wait on NULL");
  pthread_mutex_lock(&t->mu);
  for (;;) {
    const tcp_send_op_t* waiting = NULL;
    const uint64_t scan_gen = t->gen; /* what this look saw (arm compares with it) */
    int found = 0;
    for (op = t->sends; op != NULL; op = op->next) {
      if (op->seq != seq) continue;
      found = 1;
      if (t->peers[op->rank].forgotten) continue;
      if (op->status != WSYNC_OK) {
        char why[400];
        const wsync_status_t st = op->status;
        snprintf(why, sizeof why, "%s", op->why);
        pthread_mutex_unlock(&t->mu);
        return wsp_fail(st, TCP_LABEL ": sending bucket %llu to rank %u failed: %s", (unsigned long long)seq, op->rank,
                        why);
      }
      if (op->pending > 0 && waiting == NULL) waiting = op;
    }
    if (!found || waiting == NULL) break;
    if (atomic_load(&t->aborted)) {
      pthread_mutex_unlock(&t->mu);
      return wsp_fail(WSYNC_ERR_ABORTED, TCP_LABEL ": aborted");
    }
    if (tcp_wait_until(t, deadline) == ETIMEDOUT) {
      const uint32_t r = waiting->rank;
      char host[TCP_HOST_TEXT];
      snprintf(host, sizeof host, "%s", t->peers[r].host);
      t->seen_gen = scan_gen;
      pthread_mutex_unlock(&t->mu);
      return wsp_fail(WSYNC_ERR_TIMEOUT, TCP_LABEL ": bucket %llu has not left for rank %u at %s yet",
                      (unsigned long long)seq, r, host);
    }
  }
  /* Every op of seq is complete (or its rank forgotten): drop them. */
  free_finished_ops(t, 0, seq, 0);
  pthread_mutex_unlock(&t->mu);
  return WSYNC_OK;
}

void tcp_forget_peer(void* self, uint32_t rank) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  tcp_peer_t* p;
  if (t == NULL || rank >= t->world_size || rank == t->rank) return;
  pthread_mutex_lock(&t->mu);
  p = &t->peers[rank];
  p->forgotten = 1;
  if (p->failed == WSYNC_OK) {
    p->failed = WSYNC_ERR_PEER_FAILED;
    snprintf(p->failed_why, sizeof p->failed_why, "rank %u was forgotten", rank);
  }
  /* Joins its threads: when this returns no thread of ours reads the buffers posted to it or
   * writes into regions posted for it. */
  tcp_peer_stop(t, p);
  /* Its ops (failed by the stop) go now: a process that takes the rank later (connect_peer) must
   * not be blamed for them by a send_wait. */
  free_finished_ops(t, 1, 0, rank);
  pthread_mutex_unlock(&t->mu);
}

void tcp_free_sends(tcp_transport_t* t) {
  while (t->sends != NULL) {
    tcp_send_op_t* op = t->sends;
    t->sends = op->next;
    free(op);
  }
}
