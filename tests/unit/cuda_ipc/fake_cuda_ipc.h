// A fake CUDA runtime, just big enough for transport 'cuda_ipc' (exactly the cudart functions the
// plugin calls, with the real headers' signatures), so that the plugin's protocol runs in a unit
// test without a GPU. Sender and receiver instances live in ONE process (on different threads), so
// an IPC handle can simply carry a pointer:
//
//   device memory       host memory from fake::DevAlloc; cudaIpcGetMemHandle encodes the base of
//                       the allocation a pointer lies in, cudaIpcOpenMemHandle decodes it (and counts
//                       the mapping, which cudaIpcCloseMemHandle must undo)
//   interprocess events fake event objects; cudaIpcGetEventHandle encodes the event's address (only
//                       for an event created DisableTiming | Interprocess, as CUDA requires),
//                       cudaIpcOpenEventHandle returns a second handle to the SAME event
//   streams             in-order queues of operations (wait, copy, record). Work runs as soon as it
//                       can, except on a stream the test holds (fake::Hold): a record queued there
//                       does not complete, so a cudaStreamWaitEvent on that event holds back
//                       everything queued after it on its own stream. That is how a test checks
//                       that a receiver does not copy before the sender's bytes are final.
//
// The fake also checks rules the plugin must keep, counting each breach in State::violations: a
// copy reads only device memory that is mapped (and stays inside its allocation), destroyed
// events are not used again, an IPC mapping is not closed twice.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace fake {

// A copy the plugin queued with cudaMemcpyAsync.
struct Copy {
  void* dst;
  const void* src;
  size_t len;
  cudaStream_t stream;
  int device;  // the calling thread's current device when it was queued
};

struct State {
  int device_count = 1;
  std::vector<std::array<uint8_t, 16>> uuids;  // per ordinal; Reset() fills 8 distinct ones
  // cudaGetDriverEntryPointByVersion finds cuMemGetAddressRange (a fake one); else "not found".
  bool provide_range = false;
  int fail_memcpy_in = 0;  // the n-th next cudaMemcpyAsync fails (1 = the next one); 0: none fails

  int violations = 0;
  std::vector<std::string> violation_what;

  std::vector<Copy> copies;  // queued, in order
  int copies_done = 0;       // executed
  int records = 0;           // cudaEventRecord calls
  int stream_waits = 0;      // cudaStreamWaitEvent calls
  int events_created = 0, events_destroyed = 0;  // cudaEventCreateWithFlags / cudaEventDestroy of those
  int ipc_events_opened = 0, ipc_events_destroyed = 0;
  int streams_created = 0, streams_destroyed = 0;  // the plugin's streams (not the test's)
  int mem_handles = 0;                             // cudaIpcGetMemHandle calls
  int mappings_opened = 0, mappings_closed = 0;
};

extern State g;
// Every fake function takes it; a test reads g while no other thread calls the fake, or under it.
std::mutex& Mutex();

// Frees everything the previous test left (memory, streams, events) and starts a fresh State.
void Reset();
// "cudaMalloc": zeroed host memory that the fake treats as device memory.
void* DevAlloc(size_t n);
void DevFree(void* p);
// A stream of the test's own (the core's copy stream), not counted as the plugin's.
cudaStream_t NewStream();
// Queue a write of `bytes` to dst on `stream` (the core packing a bucket into staging).
void Write(cudaStream_t stream, void* dst, const std::vector<uint8_t>& bytes);
// Hold a stream: nothing queued on it runs until Release.
void Hold(cudaStream_t stream);
void Release(cudaStream_t stream);
void ReleaseAll();
// Operations still queued on the plugin's streams.
size_t PendingOnPluginStreams();

}  // namespace fake
