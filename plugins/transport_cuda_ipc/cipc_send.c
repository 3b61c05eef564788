/* cipc_send.c — the sender's half. describe_send records the slot's interprocess event on the
 * core's stream (the bucket's bytes are final there) and writes the bucket record the MANIFEST
 * carries; send_post books the bucket for its receivers; the done records that come back with the
 * receivers' ACKs (cipc_recv.c, peer_blob) free the slot; send_wait only reads the book. Nothing
 * per bucket touches the store, and no call synchronises the device. */
#include <stdio.h>
#include <string.h>

#include "cipc_transport.h"

/* The slot and offset of a send buffer, or INVALID_ARGUMENT naming why it is not a staging range. */
static wsync_status_t locate(cipc_transport_t* t, uint64_t seq, const wsync_buffer_t* buf, uint32_t* slot,
                             uint64_t* offset) {
  const int where = cipc_find_slot(t->ranges, t->num_slots, (uintptr_t)buf->data, buf->len, slot, offset);
  if (where == CIPC_SLOT_OUTSIDE)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': bucket %llu at %p (%llu bytes) is not inside a "
                    "staging buffer given to register_staging", (unsigned long long)seq, buf->data,
                    (unsigned long long)buf->len);
  if (where == CIPC_SLOT_STRADDLES)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': bucket %llu at %p (%llu bytes) starts at offset "
                    "%llu of staging slot %u and runs past its %llu bytes", (unsigned long long)seq, buf->data,
                    (unsigned long long)buf->len, (unsigned long long)*offset, *slot,
                    (unsigned long long)t->ranges[*slot].size);
  return WSYNC_OK;
}

static wsync_status_t check_sender(cipc_transport_t* t, const wsync_buffer_t* buf, const char* what) {
  if (t == NULL || buf == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': %s: NULL argument", what);
  if (t->rank != 0)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': %s on receiver rank %u", what, t->rank);
  if (!t->connected) return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': %s before connect", what);
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank 0: aborted");
  if (!WSYNC_HAS_FIELD(buf, wsync_buffer_t, len))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': %s: buffer struct_size %u is too small", what,
                    buf->struct_size);
  if (buf->device_type != WSYNC_DEVICE_CUDA)
    return wsp_fail(WSYNC_ERR_UNSUPPORTED, "transport 'cuda_ipc': %s: the bucket is not in CUDA memory (device type "
                    "%d); this transport sends only from the core's CUDA staging", what, (int)buf->device_type);
  return WSYNC_OK;
}

wsync_status_t cipc_describe_send(void* self, uint64_t seq, const wsync_buffer_t* buf, void* blob, uint64_t cap,
                                  uint64_t* len) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  cipc_post_entry_t e;
  cudaStream_t stream = NULL;
  char err[512];
  wsync_status_t rc;
  cudaError_t ce;
  if ((rc = check_sender(t, buf, "describe_send")) != WSYNC_OK) return rc;
  if (blob == NULL || len == NULL || cap < CIPC_BUCKET_BYTES)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': describe_send: no room for the %u-byte bucket "
                    "record", CIPC_BUCKET_BYTES);
  memset(&e, 0, sizeof e);
  e.seq = seq;
  e.len = buf->len;
  if ((rc = locate(t, seq, buf, &e.slot, &e.offset)) != WSYNC_OK) return rc;
  /* Checked before the event is recorded again: a receiver may still copy out of the slot. */
  if ((rc = cipc_book_check_post(&t->book, e.slot, seq, NULL, 0, err, sizeof err)) != WSYNC_OK)
    return wsp_fail(rc, "transport 'cuda_ipc': bucket %llu: %s", (unsigned long long)seq, err);
  if (WSYNC_HAS_FIELD(buf, wsync_buffer_t, stream)) stream = (cudaStream_t)buf->stream;
  if ((rc = cipc_set_device(t, "describe_send")) != WSYNC_OK) return rc;
  /* The receivers' copies wait for this on the GPU: they see every write queued on `stream`. */
  if ((ce = cudaEventRecord(t->events[e.slot], stream)) != cudaSuccess)
    return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': bucket %llu: recording the event of staging slot %u on "
                    "stream %p (CUDA device %d) failed: %s", (unsigned long long)seq, e.slot, (void*)stream, t->device,
                    cudaGetErrorString(ce));
  t->described = e;
  cipc_book_describe(&t->book, seq);
  *len = cipc_bucket_encode(t->info->session, &e, (uint8_t*)blob, (size_t)cap);
  return WSYNC_OK;
}

wsync_status_t cipc_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                              uint32_t num_ranks) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  const cipc_post_entry_t* d;
  char err[512];
  wsync_status_t rc;
  if ((rc = check_sender(t, buf, "send_post")) != WSYNC_OK) return rc;
  d = &t->described;
  if (d->seq != seq || d->len != buf->len || t->ranges[d->slot].base + d->offset != (uintptr_t)buf->data)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': send_post of bucket %llu, which describe_send did "
                    "not describe (this transport needs a core with plugin ABI 1.2 to call describe_send first)",
                    (unsigned long long)seq);
  if ((rc = cipc_book_post(&t->book, d->slot, seq, d->offset, d->len, ranks, num_ranks, err, sizeof err)) != WSYNC_OK)
    return wsp_fail(rc, "transport 'cuda_ipc': send_post of bucket %llu: %s", (unsigned long long)seq, err);
  return WSYNC_OK;
}

/* Non-blocking: the receivers' done records arrive through the core (peer_blob) between calls,
 * so waiting here could only delay them. TIMEOUT until every rank of the bucket reported. */
wsync_status_t cipc_send_wait(void* self, uint64_t seq, int64_t timeout_ms) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  uint32_t first = 0;
  int slot;
  (void)timeout_ms;
  if (t == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': send_wait on NULL");
  if (t->rank != 0)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': send_wait on receiver rank %u", t->rank);
  if (atomic_load(&t->aborted)) return wsp_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank 0: aborted");
  slot = cipc_book_slot_of(&t->book, seq);
  if (slot < 0 || cipc_book_pending(&t->book, (uint32_t)slot, &first) == 0) return WSYNC_OK;
  return wsp_fail(WSYNC_ERR_TIMEOUT, "transport 'cuda_ipc': bucket %llu (staging slot %d) has not been copied by rank "
                  "%u yet", (unsigned long long)seq, slot, first);
}

/* A receiver's done record (with its ACK): the slot of that bucket is free for it. */
wsync_status_t cipc_sender_blob(cipc_transport_t* t, uint64_t seq, uint32_t rank, int32_t kind, const void* blob,
                                uint64_t len) {
  char err[512];
  uint64_t done = 0;
  wsync_status_t rc;
  if (t->info == NULL)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': a record from rank %u before the staging was "
                    "registered", rank);
  if (kind != WSYNC_BLOB_ACK)
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u sent a record with message kind %d of bucket "
                    "%llu; only ACK carries one", rank, (int)kind, (unsigned long long)seq);
  if ((rc = cipc_done_decode((const uint8_t*)blob, (size_t)len, t->info->session, &done, err, sizeof err)) != WSYNC_OK)
    return wsp_fail(rc, "transport 'cuda_ipc': rank %u's record for bucket %llu: %s", rank, (unsigned long long)seq, err);
  if (done != seq)
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u reports bucket %llu copied in its ACK of bucket "
                    "%llu", rank, (unsigned long long)done, (unsigned long long)seq);
  if ((rc = cipc_book_done(&t->book, rank, done, err, sizeof err)) != WSYNC_OK)
    return wsp_fail(rc, "transport 'cuda_ipc': rank 0: %s", err);
  return WSYNC_OK;
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
