/* cipc_staging.c — the sender's setup: export the core's staging slots (register_staging) and
 * publish them once per group (connect).
 *
 * register_staging: per slot, the IPC handle of the cudaMalloc allocation it lies in (one per
 * allocation; the slot's offset in it travels beside) and one interprocess event.
 * connect: publishes the staging record with a fresh random session (so nothing of an earlier
 * session on the same store counts), then waits until every receiver set ready/<r> to that
 * session, i.e. mapped every slot. This is the only store traffic of the transport: per bucket
 * its records travel on the core's control channel (cipc_send.c, cipc_recv.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cipc_transport.h"

/* cuMemGetAddressRange (driver API), reached through the runtime: the allocation a pointer
 * lies in. CUresult is an int-sized enum and CUdeviceptr an unsigned long long on 64-bit. */
typedef int (*cipc_get_range_fn)(unsigned long long* base, size_t* size, unsigned long long ptr);

static cipc_get_range_fn get_range_fn(void) {
  void* fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return NULL;
  return (cipc_get_range_fn)fn;
}

static uint64_t new_session(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) s = 0;
  /* splitmix64 over whatever we have (also the fallback when getrandom is unavailable) */
  s ^= (uint64_t)wsp_now_us() ^ ((uint64_t)getpid() << 32);
  s += 0x9E3779B97F4A7C15ull;
  s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9ull;
  s = (s ^ (s >> 27)) * 0x94D049BB133111EBull;
  s ^= s >> 31;
  return s ? s : 1;
}

void cipc_release_sender(cipc_transport_t* t) {
  uint32_t i;
  if (t->events != NULL) {
    /* The slots themselves belong to the core; only our events go. Errors are ignored: the
     * device may be gone already. */
    (void)cudaSetDevice(t->device);
    for (i = 0; i < t->num_slots; ++i)
      if (t->events[i] != NULL) (void)cudaEventDestroy(t->events[i]);
  }
  free(t->events);
  free(t->ranges);
  free(t->info);
  t->events = NULL;
  t->ranges = NULL;
  t->info = NULL;
  t->num_slots = 0;
}

/* Fill info->slots[i] for staging buffer i: the allocation's IPC handle (shared with an earlier
 * slot in the same allocation), the slot's offset in it, a fresh interprocess event. */
static wsync_status_t export_slot(cipc_transport_t* t, uint32_t i, cipc_get_range_fn range) {
  cipc_slot_desc_t* d = &t->info->slots[i];
  unsigned long long base = (unsigned long long)t->ranges[i].base;
  size_t alloc_size = 0;
  cudaIpcMemHandle_t mh;
  cudaIpcEventHandle_t eh;
  cudaError_t e;
  uint32_t j;
  if (range != NULL && range(&base, &alloc_size, (unsigned long long)t->ranges[i].base) != 0) {
    base = (unsigned long long)t->ranges[i].base; /* not ours to judge: cudaIpcGetMemHandle decides */
    alloc_size = 0;
  }
  d->size = t->ranges[i].size;
  d->alloc_offset = (uint64_t)t->ranges[i].base - base;
  if (alloc_size != 0 && d->alloc_offset + d->size > alloc_size)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': rank 0: staging buffer %u (%p, %llu bytes) "
                     "runs past the end of its CUDA allocation", i, (void*)t->ranges[i].base,
                     (unsigned long long)d->size);
  for (j = 0; j < i; ++j)
    if ((uint64_t)t->ranges[j].base - t->info->slots[j].alloc_offset == base) break;
  if (j < i) {
    memcpy(d->mem_handle, t->info->slots[j].mem_handle, CIPC_HANDLE_BYTES);
  } else {
    e = cudaIpcGetMemHandle(&mh, (void*)(uintptr_t)base);
    if (e != cudaSuccess)
      return wsp_fail(WSYNC_ERR_UNSUPPORTED, "transport 'cuda_ipc': rank 0: staging buffer %u (%p on CUDA device %d) "
                       "cannot be exported with CUDA IPC (cudaIpcGetMemHandle: %s): it is not a cudaMalloc "
                       "allocation (virtual-memory or expandable-segment memory cannot be shared this way); "
                       "wsync's staging must be cudaMalloc memory", i, (void*)t->ranges[i].base, t->device,
                       cudaGetErrorString(e));
    memcpy(d->mem_handle, &mh, CIPC_HANDLE_BYTES);
  }
  e = cudaEventCreateWithFlags(&t->events[i], cudaEventDisableTiming | cudaEventInterprocess);
  if (e != cudaSuccess) {
    t->events[i] = NULL;
    return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank 0: creating the interprocess event of staging slot %u "
                     "on CUDA device %d failed: %s", i, t->device, cudaGetErrorString(e));
  }
  e = cudaIpcGetEventHandle(&eh, t->events[i]);
  if (e != cudaSuccess)
    return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank 0: cudaIpcGetEventHandle for staging slot %u failed: %s",
                     i, cudaGetErrorString(e));
  memcpy(d->event_handle, &eh, CIPC_HANDLE_BYTES);
  return WSYNC_OK;
}

wsync_status_t cipc_register_staging(void* self, const wsync_buffer_t* bufs, uint32_t num_bufs) {
  cipc_transport_t* t = (cipc_transport_t*)self;
  const size_t min_buf = offsetof(wsync_buffer_t, len) + sizeof(uint64_t);
  cipc_get_range_fn range;
  wsync_status_t rc;
  uint32_t i, a, b;
  if (t == NULL || (bufs == NULL && num_bufs > 0))
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': register_staging: NULL argument");
  if (t->rank != 0)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': register_staging on receiver rank %u (only the "
                     "sender has staging)", t->rank);
  if (t->num_slots > 0 || t->connected)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': register_staging called twice or after connect; "
                     "the staging is exported once per group");
  if (num_bufs == 0 || num_bufs > CIPC_MAX_SLOTS)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': register_staging got %u buffers, expected "
                     "1..%u", num_bufs, CIPC_MAX_SLOTS);
  /* Stepped by bufs[0].struct_size: a newer core's buffer struct may be longer than ours. */
  if (bufs[0].struct_size < min_buf || bufs[0].struct_size % 8 != 0)
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': staging buffer 0 has struct_size %u",
                     bufs[0].struct_size);
#define CIPC_BUF(i) ((const wsync_buffer_t*)((const char*)bufs + (size_t)(i) * bufs[0].struct_size))
  for (i = 0; i < num_bufs; ++i) {
    const wsync_buffer_t* s = CIPC_BUF(i);
    if (s->struct_size != bufs[0].struct_size)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': staging buffer %u has struct_size %u", i,
                       s->struct_size);
    if (s->device_type != WSYNC_DEVICE_CUDA)
      return wsp_fail(WSYNC_ERR_UNSUPPORTED, "transport 'cuda_ipc': staging buffer %u is not CUDA memory (device "
                       "type %d); this transport moves CUDA device memory only", i, (int)s->device_type);
    if (s->data == NULL || s->len == 0)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': staging buffer %u is empty (%p, %llu bytes)",
                       i, s->data, (unsigned long long)s->len);
    if (s->device_index != t->device)
      return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': staging buffer %u is on CUDA device %d, but "
                       "the transport was created for device %d", i, (int)s->device_index, t->device);
  }
  if ((rc = cipc_set_device(t, "register_staging")) != WSYNC_OK) return rc;
  t->ranges = (cipc_range_t*)calloc(num_bufs, sizeof *t->ranges);
  t->events = (cudaEvent_t*)calloc(num_bufs, sizeof *t->events);
  t->info = (cipc_staging_t*)calloc(1, sizeof *t->info);
  if (t->ranges == NULL || t->events == NULL || t->info == NULL || cipc_book_init(&t->book, t->world_size, num_bufs)) {
    t->num_slots = num_bufs;
    cipc_release_sender(t);
    cipc_book_free(&t->book);
    return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  }
  t->num_slots = num_bufs; /* from here on cipc_release_sender undoes what was made */
  for (i = 1; i < t->world_size; ++i)
    if (t->forgotten[i]) cipc_book_forget(&t->book, i); /* forget_peer may come first */
  for (i = 0; i < num_bufs; ++i) {
    t->ranges[i].base = (uintptr_t)CIPC_BUF(i)->data;
    t->ranges[i].size = CIPC_BUF(i)->len;
  }
  if (cipc_ranges_overlap(t->ranges, num_bufs, &a, &b)) {
    cipc_release_sender(t);
    cipc_book_free(&t->book);
    return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, "transport 'cuda_ipc': staging buffers %u and %u overlap", a, b);
  }
  range = get_range_fn();
  if (range == NULL)
    wsp_log(WSYNC_LOG_DEBUG, "transport 'cuda_ipc': cuMemGetAddressRange is not available; each staging buffer is "
             "taken to start its own allocation");
  t->info->num_slots = num_bufs;
  for (i = 0; i < num_bufs; ++i)
    if ((rc = export_slot(t, i, range)) != WSYNC_OK) {
      cipc_release_sender(t);
      cipc_book_free(&t->book);
      return rc;
    }
  return WSYNC_OK;
}

/* Set ready[r] for every receiver that answered for this session; the number still missing. */
static wsync_status_t poll_ready(cipc_transport_t* t, uint8_t* ready, int64_t deadline, uint32_t* missing) {
  char key[CIPC_KEY_MAX], want[17], got[32];
  uint64_t len;
  uint32_t r;
  wsync_status_t rc;
  cipc_session_hex(t->info->session, want);
  *missing = 0;
  for (r = 1; r < t->world_size; ++r) {
    if (ready[r] || t->forgotten[r]) continue;
    cipc_key(key, sizeof key, t->group, "ready", r);
    rc = cipc_store_read(t, key, got, sizeof got, &len, cipc_poll_wait_ms(deadline));
    if (rc == WSYNC_OK && len == 16 && memcmp(got, want, 16) == 0) {
      ready[r] = 1;
      continue;
    }
    if (rc != WSYNC_OK && rc != WSYNC_ERR_TIMEOUT && rc != WSYNC_ERR_PROTOCOL)
      return wsp_fail(rc, "transport 'cuda_ipc': rank 0: reading '%s' (rank %u) from the store failed", key, r);
    ++*missing; /* absent, or left by an earlier session */
  }
  return WSYNC_OK;
}

static wsync_status_t wait_ready(cipc_transport_t* t, int64_t timeout_ms) {
  const int64_t deadline = wsp_deadline_us(timeout_ms);
  uint8_t* ready = (uint8_t*)calloc(t->world_size, 1);
  char list[256];
  size_t used = 0;
  uint32_t missing = 0, r, shown = 0;
  wsync_status_t rc;
  if (ready == NULL) return wsp_fail(WSYNC_ERR_OUT_OF_MEMORY, "transport 'cuda_ipc': out of memory");
  for (;;) {
    if ((rc = poll_ready(t, ready, deadline, &missing)) != WSYNC_OK || missing == 0) break;
    if (atomic_load(&t->aborted)) {
      rc = wsp_fail(WSYNC_ERR_ABORTED, "transport 'cuda_ipc': rank 0: aborted while waiting for receivers to map "
                     "the staging");
      break;
    }
    if (wsp_now_us() >= deadline) {
      list[0] = '\0';
      for (r = 1; r < t->world_size && used < sizeof list; ++r) {
        if (ready[r] || t->forgotten[r]) continue;
        if (shown++ == 16) {
          snprintf(list + used, sizeof list - used, ", ...");
          break;
        }
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%u", used ? ", " : "", r);
      }
      rc = wsp_fail(WSYNC_ERR_TIMEOUT, "transport 'cuda_ipc': rank 0: rank%s %s did not map the CUDA IPC staging "
                     "within %lld ms (no 'wsync/%s/cuda_ipc/ready/<rank>' for this session); are they running, with "
                     "transport 'cuda_ipc', on the same GPU?", missing > 1 ? "s" : "", list, (long long)timeout_ms,
                     t->group);
      break;
    }
    cipc_pause(t, deadline);
  }
  free(ready);
  return rc;
}

wsync_status_t cipc_connect_sender(cipc_transport_t* t, int64_t timeout_ms) {
  uint8_t blob[CIPC_STAGING_MAX_BYTES];
  char uuid[CIPC_UUID_STR_LEN + 1];
  size_t n;
  wsync_status_t rc;
  cudaError_t e;
  if (t->num_slots == 0)
    return wsp_fail(WSYNC_ERR_INVALID_STATE, "transport 'cuda_ipc': rank 0: connect before register_staging; this "
                     "transport sends only from the core's CUDA staging (CAP_STAGING_ONLY), which must be "
                     "registered first (a core older than plugin ABI 1.1 cannot use it)");
  if ((rc = cipc_set_device(t, "connect")) != WSYNC_OK) return rc;
  if ((e = cipc_device_uuid(t->device, t->info->uuid)) != cudaSuccess)
    return wsp_fail(WSYNC_ERR_IO, "transport 'cuda_ipc': rank 0: reading the UUID of CUDA device %d failed: %s",
                     t->device, cudaGetErrorString(e));
  t->info->session = new_session();
  t->info->pid = (uint32_t)getpid();
  t->info->device = t->device;

  n = cipc_staging_encode(t->info, blob, sizeof blob);
  if ((rc = wsp_host()->store_set(t->store, t->key_staging, blob, n)) != WSYNC_OK)
    return wsp_fail(rc, "transport 'cuda_ipc': rank 0: publishing the staging record '%s' failed", t->key_staging);
  cipc_uuid_format(t->info->uuid, uuid);
  wsp_log(WSYNC_LOG_DEBUG, "transport 'cuda_ipc': rank 0: exported %u staging slots on CUDA device %d (%s), session "
           "%016llx", t->num_slots, t->device, uuid, (unsigned long long)t->info->session);
  return wait_ready(t, timeout_ms);
}
