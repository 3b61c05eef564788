// The sender's device side: CUDA staging, the copy stream that packs buckets, and ordering after
// the caller's stream. Everything goes through the dlopen'd runtime (device/cuda_rt.h), so a
// host-only group never touches CUDA.
//
// Ordering across threads: send_start records an event on the caller's stream (caller thread);
// the pipeline thread makes the copy stream wait for that event before it packs the batch. Each
// batch in flight has its own event (from a small pool), so a later batch's record never moves an
// earlier batch's wait.
#pragma once

#include <cstdint>
#include <vector>

#include "group/group.h"

namespace wsync {

// At init, for a transport that moves CUDA memory only: pick the device, allocate the staging
// slots (2 x bucket_bytes, logged), create the copy stream.
wsync_status_t device_init_staging(wsync_group_t* g);

// Caller thread, before a batch is started: its CUDA tensors are all on the group's device (which
// a host transport takes from the first CUDA batch unless option 'device' says), and
// verify_payload (host checksums) is not asked for with them.
wsync_status_t device_check_batch(wsync_group_t* g, const std::vector<wsync_tensor_t>& tensors);

// Caller thread, as the batch is started: for a batch with CUDA tensors, record an event on the
// caller's stream (*event; nullptr for a host batch). Never synchronises.
wsync_status_t device_record_caller(wsync_group_t* g, const std::vector<wsync_tensor_t>& tensors, void** event);

// Pipeline thread: make the copy stream wait for a batch's event before packing it.
wsync_status_t device_order_after(wsync_group_t* g, void* event);

// Queue a copy (any direction; unified addressing) / a memset of staging on the copy stream.
wsync_status_t device_copy(wsync_group_t* g, void* dst, const void* src, uint64_t n);
wsync_status_t device_zero(wsync_group_t* g, void* dst, uint64_t n);

// Wait on the host for the copies queued so far (the copy stream only; used when a host transport
// must read what the device copied, and after a failure).
wsync_status_t device_wait_copies(wsync_group_t* g);

// Grow a device staging slot (transports that are not STAGING_ONLY only).
wsync_status_t device_grow_slot(wsync_group_t* g, StagingSlot* slot, uint64_t bytes);

void device_teardown(wsync_group_t* g);
// A batch's event (device_record_caller) is done with: kept for a later batch (nullptr: nothing).
void device_recycle_event(wsync_group_t* g, void* event);

}  // namespace wsync
