// The fake CUDA runtime and NCCL of fake_cuda_nccl.h.
#include "fake_cuda_nccl.h"

#include <cstdlib>
#include <cstring>

struct CUstream_st {
  int id;
};

struct CUevent_st {
  bool recorded;
  uint64_t need;  // completes when fake::g.released >= need
};

struct ncclComm {
  int rank;
  int pending;         // ncclInProgress answers left; -1 forever
  bool op_enqueuing;   // a collective answered ncclInProgress and has not finished enqueuing
};

namespace fake {

State g;
ncclComm* g_comm = nullptr;  // the last communicator created and alive

void Violation(const std::string& what) {
  g.violations++;
  g.violation_what.push_back(what);
}

void Reset() {
  for (auto& r : g.dev) std::free(r.first);
  g = State();
  g_comm = nullptr;
}

void* DevAlloc(size_t n) {
  char* p = static_cast<char*>(std::calloc(1, n ? n : 1));
  g.dev.emplace_back(p, n ? n : 1);
  return p;
}

void DevFree(void* p) {
  for (size_t i = 0; i < g.dev.size(); ++i)
    if (g.dev[i].first == p) {
      std::free(p);
      g.dev.erase(g.dev.begin() + static_cast<long>(i));
      return;
    }
  Violation("free of memory that is not fake device memory");
}

void ReleaseKernels() { g.released = g.kernels; }

void CompleteInit() {
  if (g_comm != nullptr) g_comm->pending = 0;
}

}  // namespace fake

using fake::g;
using fake::g_comm;

extern "C" {

// ---- CUDA runtime ------------------------------------------------------------------------------

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t) { return "fake CUDA error"; }
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* count) {
  *count = g.device_count;
  return g.device_count > 0 ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int) {
  *value = attr == cudaDevAttrMemoryPoolsSupported ? g.pools : 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  g.set_device_calls.push_back(device);
  g.current_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = g.current_device;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  *s = new CUstream_st{++g.streams_created};
  g.transport_stream = *s;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  g.streams_destroyed++;
  if (s == g.transport_stream) g.transport_stream = nullptr;
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) {
  g.stream_waits++;
  g.calls.push_back("wait");
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  *e = new CUevent_st{false, 0};
  g.events_created++;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  g.events_destroyed++;
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  const bool ours = s != nullptr && s == g.transport_stream;
  if (ours && g_comm != nullptr && g_comm->op_enqueuing)
    fake::Violation("event recorded on the transport's stream while a collective was still enqueuing");
  e->recorded = true;
  e->need = ours ? g.kernels : 0;
  g.calls.push_back(ours ? "record" : "record_caller");
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  return !e->recorded || g.released >= e->need ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind, cudaStream_t s) {
  if (s == g.transport_stream && g_comm != nullptr && g_comm->op_enqueuing)
    fake::Violation("copy queued on the transport's stream while a collective was still enqueuing");
  std::memcpy(dst, src, count);
  g.copies.push_back({dst, src, count});
  g.calls.push_back("copy");
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t n) {
  *p = fake::DevAlloc(n);
  g.calls.push_back("alloc");
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (p != nullptr) fake::DevFree(p);
  g.calls.push_back("free");
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* a, const void* p) {
  std::memset(a, 0, sizeof *a);
  a->type = cudaMemoryTypeUnregistered;
  a->device = -1;
  for (const auto& r : g.dev) {
    const char* c = static_cast<const char*>(p);
    if (c >= r.first && c < r.first + r.second) {
      a->type = cudaMemoryTypeDevice;
      a->device = g.ptr_device;
      a->devicePointer = const_cast<void*>(p);
    }
  }
  return cudaSuccess;
}

// ---- NCCL ----------------------------------------------------------------------------------------

const char* ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
const char* ncclGetLastError(ncclComm_t) { return "fake last error from NCCL"; }
ncclResult_t ncclGetVersion(int* v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) id->internal[i] = static_cast<char>(i * 7 + 3);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  g.inits++;
  g.init_blocking = config != nullptr ? config->blocking : -98;
  g.init_nranks = nranks;
  g.init_rank = rank;
  std::memcpy(g.init_id, id.internal, sizeof g.init_id);
  *comm = new ncclComm{rank, g.init_polls, false};
  g_comm = *comm;
  g.live_comms++;
  return g.init_blocking == 0 ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* a) {
  if (comm == nullptr || a == nullptr) return ncclInvalidArgument;
  g.async_polls++;
  if (g.async_error != ncclSuccess) {
    *a = g.async_error;
    return ncclSuccess;
  }
  if (comm->pending != 0) {
    if (comm->pending > 0) comm->pending--;
    *a = ncclInProgress;
    return ncclSuccess;
  }
  comm->op_enqueuing = false;
  *a = ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  g.aborts++;
  g.live_comms--;
  if (comm == g_comm) g_comm = nullptr;
  delete comm;
  fake::ReleaseKernels();  // the kernels see the abort flag and quit
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm->pending != 0) fake::Violation("ncclCommFinalize while a call was in progress");
  g.finalizes++;
  comm->pending = g.finalize_polls;
  return ncclInProgress;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm->pending != 0) fake::Violation("ncclCommDestroy before finalize finished");
  g.destroys++;
  g.live_comms--;
  if (comm == g_comm) g_comm = nullptr;
  delete comm;
  return ncclSuccess;
}

static ncclResult_t launch(ncclComm_t comm, const char* what) {
  if (comm->pending != 0) fake::Violation(std::string(what) + " while a call was in progress");
  g.kernels++;
  if (g.auto_complete) g.released = g.kernels;
  g.calls.push_back(what);
  if (g.in_progress_next > 0) {
    g.in_progress_next--;
    comm->pending = g.enqueue_polls;
    comm->op_enqueuing = true;
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  g.bcasts.push_back({send, recv, count, type, root, stream});
  if (comm->rank != root && g.bcast_source != nullptr) std::memcpy(recv, g.bcast_source, count);
  return launch(comm, "bcast");
}
ncclResult_t ncclAllReduce(const void*, void*, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t) {
  g.allreduces.push_back({count, type, op});
  return launch(comm, "allreduce");
}

}  // extern "C"
