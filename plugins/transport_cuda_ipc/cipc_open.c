/* cipc_open.c — the receiver's setup (connect) and teardown.
 *
 * connect: read the sender's staging record, find the local CUDA ordinal of the sender's GPU by
 * UUID (the two processes usually see different CUDA_VISIBLE_DEVICES), map every slot's
 * allocation (cudaIpcOpenMemHandle, once per allocation) and open every slot's event, create
 * our copy stream and event, then tell the sender with ready/<rank> = the session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cipc_transport.h"

/* Wait for the staging record until the deadline, in short slices so abort is seen. */
static wsync_status_t fetch_staging(cipc_transport_t* t, int64_t timeout_ms, uint8_t* blob, uint64_t* len) {
  const int64_t deadline = wsp_deadline_us(timeout_ms);
  wsync_status_t rc;
  for (;;) {
    int64_t left_ms = (deadline - wsp_now_us()) / 1000;
    if (atomic_load(&t->aborted))
      return wsp_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank %u: aborted during connect", t->rank);
    rc = cipc_store_read(t, t->key_staging, blob, CIPC_STAGING_MAX_BYTES, len, left_ms < 50 ? left_ms : 50);
    if (rc == WSYNC_OK) return WSYNC_OK;
    if (rc == WSYNC_ERR_PROTOCOL) return rc; /* too large: already worded */
    if (rc != WSYNC_ERR_TIMEOUT)
      return wsp_fail(rc, "transport 'cuda_ipc': rank %u: reading '%s' from the store failed", t->rank,
                       t->key_staging);
    if (wsp_now_us() >= deadline)
      return wsp_fail(WSYNC_ERR_TIMEOUT, "transport 'cuda_ipc': rank %u: rank 0 did not publish its CUDA IPC staging "
                       "('%s') within %lld ms", t->rank, t->key_staging, (long long)timeout_ms);
  }
}

/* The local ordinal whose UUID is the sender's, or NO_DEVICE naming the UUID. */
static wsync_status_t find_device(cipc_transport_t* t, int* out) {
  uint8_t(*uuids)[CIPC_UUID_BYTES];
  char want[CIPC_UUID_STR_LEN + 1];
  const char* cvd = getenv("CUDA_VISIBLE_DEVICES");
  int count = 0, i, found;
  cudaError_t e = cudaGetDeviceCount(&count);
  cipc_uuid_format(t->peer->uuid, want);
  if (e != cudaSuccess || count <= 0)
    return wsp_fail(WSYNC_ERR_NO_DEVICE, "transport 'cuda_ipc': rank %u: the sender's staging is on %s, and this "
                     "process sees no CUDA device (cudaGetDeviceCount: %s)", t->rank, want,
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  uuids = (uint8_t(*)[CIPC_UUID_BYTES])calloc((size_t)count, CIPC_UUID_BYTES);
  if (uuids == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  for (i = 0; i < count; ++i)
    if ((e = cipc_device_uuid(i, uuids[i])) != cudaSuccess) {
      free(uuids);
      return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: reading the UUID of CUDA device %d failed: %s",
                       t->rank, i, cudaGetErrorString(e));
    }
  found = cipc_uuid_find(t->peer->uuid, (const uint8_t(*)[CIPC_UUID_BYTES])uuids, count);
  free(uuids);
  if (found < 0)
    return wsp_fail(WSYNC_ERR_NO_DEVICE, "transport 'cuda_ipc': rank %u: the sender's staging is on %s, which this "
                     "process does not see (CUDA_VISIBLE_DEVICES=%s); cuda_ipc needs the trainer and the engine on "
                     "the same GPU", t->rank, want, cvd ? cvd : "unset");
  *out = found;
  return WSYNC_OK;
}

/* Map every slot and open its event; on failure what was opened stays recorded for release. */
static wsync_status_t open_slots(cipc_transport_t* t) {
  const uint32_t n = t->peer->num_slots;
  uint32_t i, j;
  cudaError_t e;
  t->mapped = (uint8_t**)calloc(n, sizeof *t->mapped);
  t->owns_mapping = (uint8_t*)calloc(n, 1);
  t->peer_events = (cudaEvent_t*)calloc(n, sizeof *t->peer_events);
  if (t->mapped == NULL || t->owns_mapping == NULL || t->peer_events == NULL)
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  for (i = 0; i < n; ++i) {
    const cipc_slot_desc_t* d = &t->peer->slots[i];
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    for (j = 0; j < i; ++j) /* several slots in one allocation: map it once */
      if (memcmp(t->peer->slots[j].mem_handle, d->mem_handle, CIPC_HANDLE_BYTES) == 0) break;
    if (j < i) {
      t->mapped[i] = t->mapped[j];
    } else {
      void* p = NULL;
      memcpy(&mh, d->mem_handle, sizeof mh);
      e = cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess)
        return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: mapping staging slot %u of the sender (pid %u) "
                         "on CUDA device %d failed (cudaIpcOpenMemHandle: %s); is the sender still running, and do "
                         "both processes share the host's IPC and PID namespaces (containers: --ipc=host "
                         "--pid=host)?", t->rank, i, t->peer->pid, t->device, cudaGetErrorString(e));
      t->mapped[i] = (uint8_t*)p;
      t->owns_mapping[i] = 1;
    }
    memcpy(&eh, d->event_handle, sizeof eh);
    e = cudaIpcOpenEventHandle(&t->peer_events[i], eh);
    if (e != cudaSuccess) {
      t->peer_events[i] = NULL;
      return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: opening the event of staging slot %u of the "
                       "sender (pid %u) failed (cudaIpcOpenEventHandle: %s)", t->rank, i, t->peer->pid,
                       cudaGetErrorString(e));
    }
  }
  if ((e = cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    t->stream = NULL;
    return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: creating a stream on CUDA device %d failed: %s",
                     t->rank, t->device, cudaGetErrorString(e));
  }
  if ((e = cudaEventCreateWithFlags(&t->copied, cudaEventDisableTiming)) != cudaSuccess) {
    t->copied = NULL;
    return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank %u: creating an event on CUDA device %d failed: %s",
                     t->rank, t->device, cudaGetErrorString(e));
  }
  return WSYNC_OK;
}

wsync_status_t cipc_connect_receiver(cipc_transport_t* t, int64_t timeout_ms) {
  uint8_t blob[CIPC_STAGING_MAX_BYTES];
  char err[512], key[CIPC_KEY_MAX], session[17], uuid[CIPC_UUID_STR_LEN + 1];
  uint64_t len = 0;
  int device = -1;
  wsync_status_t rc;
  if (t->forgotten[0])
    return wsp_fail(WSYNC_ERR_PEER_FAILED, "transport 'cuda_ipc': rank %u: the sender (rank 0) was forgotten",
                     t->rank);
  if ((rc = fetch_staging(t, timeout_ms, blob, &len)) != WSYNC_OK) return rc;
  t->peer = (cipc_staging_t*)calloc(1, sizeof *t->peer);
  if (t->peer == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  if ((rc = cipc_staging_decode(blob, (size_t)len, t->peer, err, sizeof err)) != WSYNC_OK) {
    free(t->peer);
    t->peer = NULL;
    return wsp_fail(rc, "transport 'cuda_ipc': rank %u: the staging record at store key '%s' is malformed: %s",
                     t->rank, t->key_staging, err);
  }
  if (t->peer->pid == (uint32_t)getpid())
    wsp_log(WSYNC_LOG_WARN, "transport 'cuda_ipc': rank %u: the sender is this same process (pid %u); CUDA IPC "
             "handles cannot be opened by the process that exported them", t->rank, t->peer->pid);
  if ((rc = find_device(t, &device)) != WSYNC_OK) goto fail;
  if (device != t->device)
    wsp_log(WSYNC_LOG_INFO, "transport 'cuda_ipc': rank %u: the sender's GPU is CUDA device %d here; the receive "
             "regions were announced on device %d", t->rank, device, t->device);
  t->device = device;
  if ((rc = cipc_set_device(t, "connect")) != WSYNC_OK) goto fail;
  if ((rc = open_slots(t)) != WSYNC_OK) goto fail;

  cipc_key(key, sizeof key, t->group, "ready", t->rank);
  cipc_session_hex(t->peer->session, session);
  if ((rc = wsp_host()->store_set(t->store, key, session, 16)) != WSYNC_OK) {
    rc = wsp_fail(rc, "transport 'cuda_ipc': rank %u: writing '%s' to the store failed", t->rank, key);
    goto fail;
  }
  cipc_uuid_format(t->peer->uuid, uuid);
  wsp_log(WSYNC_LOG_DEBUG, "transport 'cuda_ipc': rank %u: mapped %u staging slots of the sender (pid %u) on CUDA "
           "device %d (%s)", t->rank, t->peer->num_slots, t->peer->pid, t->device, uuid);
  return WSYNC_OK;

fail: /* undo the mappings so that a later connect starts clean; the error detail stays */
  cipc_release_receiver(t);
  return rc;
}

void cipc_release_receiver(cipc_transport_t* t) {
  uint32_t i, n = t->peer != NULL ? t->peer->num_slots : 0;
  if (t->peer != NULL) {
    (void)cudaSetDevice(t->device);
    cipc_cancel_recv(t, 1000); /* queued copies read the mappings: let them end first */
    if (t->copied != NULL) (void)cudaEventDestroy(t->copied);
    if (t->stream != NULL) (void)cudaStreamDestroy(t->stream);
    for (i = 0; i < n; ++i) {
      if (t->peer_events != NULL && t->peer_events[i] != NULL) (void)cudaEventDestroy(t->peer_events[i]);
      if (t->owns_mapping != NULL && t->owns_mapping[i] && t->mapped[i] != NULL)
        (void)cudaIpcCloseMemHandle(t->mapped[i]);
    }
  }
  cipc_cancel_recv(t, 0); /* frees the region list when nothing was mapped */
  free(t->peer_events);
  free(t->owns_mapping);
  free(t->mapped);
  free(t->peer);
  t->peer_events = NULL;
  t->owns_mapping = NULL;
  t->mapped = NULL;
  t->peer = NULL;
  t->copied = NULL;
  t->stream = NULL;
}
