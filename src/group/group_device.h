// The sender's device side: CUDA staging, the copy stream that packs buckets, and ordering after
// the caller's stream. Everything goes through the dlopen'd runtime (device/cuda_rt.h), so a
// host-only group never touches CUDA.
#pragma once

#include <cstdint>

#include "group/group.h"

namespace wsync {

// At init, for a transport that moves CUDA memory only: pick the device, allocate the staging
// slots (staging_buckets x bucket_bytes, logged), create the copy stream.
wsync_status_t device_init_staging(wsync_group_t* g);

// Before reading CUDA tensors in a batch: make sure the copy stream exists (on the tensors'
// device for a host transport), record an event on the caller's stream and make the copy stream
// wait for it. Never synchronises the host with the device.
wsync_status_t device_begin_batch(wsync_group_t* g, int device);

// Queue a copy (any direction; unified addressing) / a memset of staging on the copy stream.
wsync_status_t device_copy(wsync_group_t* g, void* dst, const void* src, uint64_t n);
wsync_status_t device_zero(wsync_group_t* g, void* dst, uint64_t n);

// Wait on the host for the copies queued so far (the copy stream only; used when a host transport
// must read what the device copied).
wsync_status_t device_wait_copies(wsync_group_t* g);

// Grow a device staging slot (transports that are not STAGING_ONLY only).
wsync_status_t device_grow_slot(wsync_group_t* g, StagingSlot* slot, uint64_t bytes);

void device_teardown(wsync_group_t* g);

}  // namespace wsync
