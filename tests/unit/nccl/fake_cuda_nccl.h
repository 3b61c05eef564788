// A fake CUDA runtime and NCCL, just big enough for transport 'nccl' (the functions it calls, with
// the real headers' signatures), so the plugin's queue, polling, abort and teardown logic runs in
// a unit test without a GPU. "Device memory" is host memory registered with fake::DevAlloc; a
// broadcast or all-reduce is a "kernel" that completes when the test says so (or at once).
//
// The fake also checks the rules of a non-blocking NCCL communicator that the plugin must keep:
// no NCCL call but ncclCommGetAsyncError/ncclCommAbort while a call is still being enqueued
// (ncclInProgress), and no event recorded on the transport's stream before that enqueue ended.
// Each breach is counted in State::violations.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fake {

struct Bcast {
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  int root;
  cudaStream_t stream;
};

struct AllReduce {
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
};

struct Copy {
  void* dst;
  const void* src;
  size_t len;
};

struct State {
  int device_count = 1;
  int current_device = 0;
  std::vector<int> set_device_calls;
  int pools = 1;  // cudaDevAttrMemoryPoolsSupported

  // The communicator.
  int init_polls = 0;       // ncclCommGetAsyncError answers ncclInProgress this often after init; -1: forever
  int enqueue_polls = 0;    // ... after a call that answered ncclInProgress
  int finalize_polls = 0;   // ... after ncclCommFinalize
  ncclResult_t async_error = ncclSuccess;  // injected asynchronous error
  int in_progress_next = 0; // the next this-many collectives answer ncclInProgress
  int init_blocking = -99;  // config.blocking seen by ncclCommInitRankConfig
  int init_nranks = -1, init_rank = -1;
  unsigned char init_id[NCCL_UNIQUE_ID_BYTES] = {};
  int inits = 0, aborts = 0, finalizes = 0, destroys = 0, live_comms = 0;
  int async_polls = 0;      // ncclCommGetAsyncError calls
  int violations = 0;
  std::vector<std::string> violation_what;

  std::vector<Bcast> bcasts;
  std::vector<AllReduce> allreduces;
  std::vector<Copy> copies;
  std::vector<std::string> calls;  // "bcast", "copy", "record", "wait", "alloc", "free" in order

  // Kernels: a broadcast/all-reduce adds one; an event recorded after it completes when released.
  bool auto_complete = true;
  uint64_t kernels = 0, released = 0;
  const unsigned char* bcast_source = nullptr;  // non-root ranks receive these bytes

  int events_created = 0, events_destroyed = 0, streams_created = 0, streams_destroyed = 0;
  int stream_waits = 0;
  cudaStream_t transport_stream = nullptr;  // the last stream created (the transport's)
  std::vector<std::pair<char*, size_t>> dev;  // "device memory"
  int ptr_device = 0;                          // the device cudaPointerGetAttributes reports
};

extern State g;

void Reset();
void* DevAlloc(size_t n);
void DevFree(void* p);
void ReleaseKernels();  // every kernel so far completes
void CompleteInit();    // the live communicator's call in progress (e.g. an init with init_polls = -1) ends now

}  // namespace fake
