/* cipc_util.c — the poll pause every wait of the plugin uses, bounded store reads, and the two
 * CUDA helpers shared by both sides (selecting the device, reading a device's UUID). */
#include <string.h>

#include "cipc_transport.h"

void cipc_pause(const cipc_transport_t* t, int64_t deadline_us) { wsp_sleep_us(t->opts.poll_us, deadline_us); }

int64_t cipc_poll_wait_ms(int64_t deadline_us) {
  const int64_t left_ms = (deadline_us - wsp_now_us()) / 1000;
  if (left_ms <= 0) return 0;
  return left_ms < 5 ? left_ms : 5;
}

wsync_status_t cipc_store_read(cipc_transport_t* t, const char* key, void* buf, uint64_t cap, uint64_t* len,
                               int64_t wait_ms) {
  wsync_status_t rc;
  *len = 0;
  rc = wsp_host()->store_get(t->store, key, buf, cap, len, wait_ms < 0 ? 0 : wait_ms);
  if (rc == WSYNC_ERR_INVALID_ARGUMENT && *len > cap)
    return wsp_fail(WSYNC_ERR_PROTOCOL, "transport 'cuda_ipc': rank %u: store key '%s' holds %llu bytes, more than "
                     "the %llu a cuda_ipc record can have", t->rank, key, (unsigned long long)*len,
                     (unsigned long long)cap);
  return rc; /* OK, TIMEOUT (the caller words it), or the store's own error */
}

wsync_status_t cipc_set_device(const cipc_transport_t* t, const char* what) {
  const cudaError_t e = cudaSetDevice(t->device);
  if (e != cudaSuccess)
    return wsp_fail(WSYNC_ERR_NO_DEVICE, "transport 'cuda_ipc': rank %u: %s: cudaSetDevice(%d) failed: %s", t->rank,
                     what, t->device, cudaGetErrorString(e));
  return WSYNC_OK;
}

cudaError_t cipc_device_uuid(int device, uint8_t out[CIPC_UUID_BYTES]) {
  struct cudaDeviceProp prop;
  const cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return e;
  memcpy(out, prop.uuid.bytes, CIPC_UUID_BYTES);
  return cudaSuccess;
}
