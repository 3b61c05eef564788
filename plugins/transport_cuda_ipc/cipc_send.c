/* cipc_send.c — the sender's half: post a bucket (record the slot's interprocess event on the
 * core's stream, publish the post record), wait until every receiver copied it out (their
 * done/<rank> values), and drop a dead receiver. No call synchronises the device. */
#include <stdio.h>
#include <string.h>

#include "cipc_transport.h"

wsync_status_t cipc_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                              uint32_t num_ranks) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  const size_t min_buf = offsetof(wsync_buffer_t, len) + sizeof(uint64_t);
  uint8_t rec[CIPC_POST_MAX_BYTES];
  char err[512];
  cipc_post_t post;
  cudaStream_t stream = NULL;
  uint64_t offset = 0;
  uint32_t slot = 0;
  wsync_status_t rc;
  cudaError_t e;
  int where;
  if (t == NULL || buf == NULL || (ranks == NULL && num_ranks > 0))
    return cipc_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': send_post: NULL argument");
  if (t->rank != 0)
    return cipc_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': send_post on receiver rank %u", t->rank);
  if (!t->connected) return cipc_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': send_post before connect");
  if (atomic_load(&t->aborted)) return cipc_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank 0: aborted");
  if (buf->struct_size < min_buf)
    return cipc_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': send_post: buffer struct_size %u is too small",
                     buf->struct_size);
  if (buf->device_type != WSYNC_DEVICE_CUDA)
    return cipc_fail(WSYNC_ERR_UNSUPPORTED, "transport 'cuda_ipc': bucket %llu is not in CUDA memory (device type "
                     "%d); this transport sends only from the core's CUDA staging", (unsigned long long)seq,
                     (int)buf->device_type);
  where = cipc_find_slot(t->ranges, t->num_slots, (uintptr_t)buf->data, buf->len, &slot, &offset);
  if (where == CIPC_SLOT_OUTSIDE)
    return cipc_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': bucket %llu at %p (%llu bytes) is not inside a "
                     "staging buffer given to register_staging", (unsigned long long)seq, buf->data,
                     (unsigned long long)buf->len);
  if (where == CIPC_SLOT_STRADDLES)
    return cipc_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': bucket %llu at %p (%llu bytes) starts at "
                     "offset %llu of staging slot %u and runs past its %llu bytes", (unsigned long long)seq,
                     buf->data, (unsigned long long)buf->len, (unsigned long long)offset, slot,
                     (unsigned long long)t->ranges[slot].size);
  /* Checked before the event is recorded again: a receiver may still wait on its last record. */
  if ((rc = cipc_book_check_post(&t->book, slot, seq, ranks, num_ranks, err, sizeof err)) != WSYNC_OK)
    return cipc_fail(rc, "transport 'cuda_ipc': send_post of bucket %llu: %s", (unsigned long long)seq, err);
  if (buf->struct_size >= offsetof(wsync_buffer_t, stream) + sizeof buf->stream) stream = (cudaStream_t)buf->stream;

  if ((rc = cipc_set_device(t, "send_post")) != WSYNC_OK) return rc;
  /* The receivers' copies wait for this on the GPU: they see every write queued on `stream`. */
  if ((e = cudaEventRecord(t->events[slot], stream)) != cudaSuccess)
    return cipc_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': bucket %llu: recording the event of staging slot %u on "
                     "stream %p (CUDA device %d) failed: %s", (unsigned long long)seq, slot, (void*)stream, t->device,
                     cudaGetErrorString(e));
  cipc_book_post(&t->book, slot, seq, offset, buf->len, ranks, num_ranks, err, sizeof err);
  cipc_book_post_record(&t->book, t->info->session, &post);
  if ((rc = cipc_host->store_set(t->store, t->key_post, rec, cipc_post_encode(&post, rec, sizeof rec))) != WSYNC_OK)
    return cipc_fail(rc, "transport 'cuda_ipc': bucket %llu: writing '%s' to the store failed", (unsigned long long)seq,
                     t->key_post);
  return WSYNC_OK;
}

/* Read done/<r> of every rank still pending on slot and apply it. */
static wsync_status_t poll_done(cipc_transport_t* t, uint32_t slot, int64_t deadline) {
  char key[CIPC_KEY_MAX], val[32], err[512];
  uint64_t len, v;
  uint32_t r;
  wsync_status_t rc;
  for (r = 1; r < t->world_size; ++r) {
    if (!cipc_book_is_pending(&t->book, slot, r)) continue;
    cipc_key(key, sizeof key, t->group, "done", r);
    rc = cipc_store_read(t, key, val, sizeof val, &len, cipc_poll_wait_ms(deadline));
    if (rc == WSYNC_ERR_TIMEOUT) continue;
    if (rc != WSYNC_OK) return rc == WSYNC_ERR_PROTOCOL ? rc : cipc_fail(rc, "transport 'cuda_ipc': rank 0: reading "
                                                                          "'%s' (rank %u) failed", key, r);
    if (cipc_parse_u64(val, (size_t)len, &v) != 0)
      return cipc_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank 0: store key '%s' of rank %u holds '%.*s', not "
                       "a bucket number", key, r, (int)len, val);
    if ((rc = cipc_book_done(&t->book, r, v, err, sizeof err)) != WSYNC_OK)
      return cipc_fail(rc, "transport 'cuda_ipc': rank 0: store key '%s': %s", key, err);
  }
  return WSYNC_OK;
}

wsync_status_t cipc_send_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  const int64_t deadline = cipc_deadline(timeout_ms);
  uint32_t first = 0;
  wsync_status_t rc;
  int slot;
  if (t == NULL) return cipc_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': send_wait on NULL");
  if (t->rank != 0)
    return cipc_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': send_wait on receiver rank %u", t->rank);
  slot = cipc_book_slot_of(&t->book, seq);
  if (slot < 0) return WSYNC_OK; /* never posted, or long done: nothing holds a slot for it */
  for (;;) {
    if (cipc_book_pending(&t->book, (uint32_t)slot, NULL) == 0) return WSYNC_OK;
    if (atomic_load(&t->aborted)) return cipc_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank 0: aborted");
    if ((rc = poll_done(t, (uint32_t)slot, deadline)) != WSYNC_OK) return rc;
    if (cipc_book_pending(&t->book, (uint32_t)slot, &first) == 0) return WSYNC_OK;
    if (cipc_now_us() >= deadline)
      return cipc_fail(WSYNC_ERR_TIMEOUT, "transport 'cuda_ipc': bucket %llu (staging slot %d) has not been copied by "
                       "rank %u yet", (unsigned long long)seq, slot, first);
    cipc_pause(t, deadline);
  }
}

void cipc_forget_peer(void* self, uint32_t rank) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  if (t == NULL || rank >= t->world_size || rank == t->rank) return;
  t->forgotten[rank] = 1; /* also ends the wait for it in connect */
  if (t->rank == 0) {
    if (t->book.world_size > 0) cipc_book_forget(&t->book, rank);
  } else if (rank == 0) {
    /* The sender is gone: a copy out of its staging may still be queued; give it a short,
     * bounded chance to end before the core reuses the regions. */
    cipc_cancel_recv(t, 500);
  }
}
