// The fake CUDA runtime of fake_cuda_ipc.h: device memory, IPC handles that carry pointers, events,
// and streams that run their work in order (held streams do not run).
#include "fake_cuda_ipc.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>

struct CUevent_st {
  unsigned flags = 0;
  bool destroyed = false;
  CUevent_st* target = nullptr;  // opened from an IPC handle: the exporter's event, which holds the state
  uint64_t recorded = 0;         // records queued so far (a record's "generation")
  uint64_t completed = 0;        // the latest generation whose record has run
};

namespace {

struct Op {
  enum Kind { kWait, kCopy, kRecord, kWrite };
  explicit Op(Kind k) : kind(k) {}
  Kind kind;
  CUevent_st* ev = nullptr;  // kWait, kRecord: the event that holds the state (never an opened handle)
  uint64_t gen = 0;          // kWait: runs once ev->completed >= gen; kRecord: the generation it completes
  void* dst = nullptr;
  const void* src = nullptr;
  size_t len = 0;
  std::vector<uint8_t> bytes;  // kWrite
};

}  // namespace

struct CUstream_st {
  bool plugin = false;  // created by the plugin (cudaStreamCreateWithFlags), not by the test
  bool destroyed = false;
  bool held = false;
  std::deque<Op> ops;
};

namespace fake {

State g;

namespace {

struct Alloc {
  char* base;
  size_t size;
  int open;  // IPC mappings of it that are open
};

std::mutex g_mu;
std::vector<Alloc> g_allocs;
std::vector<std::unique_ptr<CUstream_st>> g_streams;
std::vector<std::unique_ptr<CUevent_st>> g_events;
CUstream_st g_default_stream;  // the legacy default stream (NULL, cudaStreamLegacy, cudaStreamPerThread)
thread_local int t_device = 0;

const char kMemMagic[8] = {'f', 'a', 'k', 'e', 'm', 'e', 'm', 0};
const char kEventMagic[8] = {'f', 'a', 'k', 'e', 'e', 'v', 't', 0};

void Violation(const std::string& what) {
  g.violations++;
  g.violation_what.push_back(what);
}

std::string Ptr(const void* p) {
  char b[32];
  std::snprintf(b, sizeof b, "%p", p);
  return b;
}

// The allocation [p, p+1) lies in, or nullptr.
Alloc* FindAlloc(const void* p) {
  const char* c = static_cast<const char*>(p);
  for (auto& a : g_allocs)
    if (c >= a.base && c < a.base + a.size) return &a;
  return nullptr;
}

CUstream_st* StreamOf(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return &g_default_stream;
  return s;
}

CUevent_st* Root(cudaEvent_t e) { return e->target != nullptr ? e->target : e; }

bool Known(cudaEvent_t e) {
  for (auto& p : g_events)
    if (p.get() == e) return true;
  return false;
}

// Checks that a copy reads `len` bytes of mapped device memory at src; "" or what is wrong.
std::string CheckSource(const void* src, size_t len) {
  Alloc* a = FindAlloc(src);
  if (a == nullptr) return "reads " + Ptr(src) + ", which is not (or no longer) fake device memory";
  if (static_cast<size_t>(static_cast<const char*>(src) - a->base) + len > a->size)
    return "reads " + std::to_string(len) + " bytes at " + Ptr(src) + ", past the end of its allocation";
  if (a->open == 0) return "reads " + Ptr(src) + " through no open IPC mapping";
  return "";
}

void Execute(Op& op) {
  switch (op.kind) {
    case Op::kWait:
      break;
    case Op::kRecord:
      op.ev->completed = std::max(op.ev->completed, op.gen);
      break;
    case Op::kCopy: {
      const std::string bad = CheckSource(op.src, op.len);
      if (!bad.empty()) {
        Violation("a queued copy ran when it " + bad);
        break;
      }
      std::memcpy(op.dst, op.src, op.len);
      g.copies_done++;
      break;
    }
    case Op::kWrite:
      std::memcpy(op.dst, op.bytes.data(), op.bytes.size());
      break;
  }
}

// Run whatever can run, stream by stream in order, until nothing moves. Work on a destroyed
// stream still runs (CUDA finishes it after cudaStreamDestroy); held streams do not run.
void Pump() {
  std::vector<CUstream_st*> all{&g_default_stream};
  for (auto& s : g_streams) all.push_back(s.get());
  for (bool progress = true; progress;) {
    progress = false;
    for (CUstream_st* s : all)
      while (!s->held && !s->ops.empty()) {
        Op& op = s->ops.front();
        if (op.kind == Op::kWait && op.ev->completed < op.gen) break;
        Execute(op);
        s->ops.pop_front();
        progress = true;
      }
  }
}

void Enqueue(cudaStream_t s, Op op) {
  CUstream_st* st = StreamOf(s);
  if (st->destroyed) Violation("work queued on a destroyed stream");
  st->ops.push_back(std::move(op));
  Pump();
}

// The fake cuMemGetAddressRange (driver API): the allocation a pointer lies in.
int FakeGetAddressRange(unsigned long long* base, size_t* size, unsigned long long ptr) {
  std::lock_guard<std::mutex> l(g_mu);
  Alloc* a = FindAlloc(reinterpret_cast<const void*>(static_cast<uintptr_t>(ptr)));
  if (a == nullptr) return 1;  // CUDA_ERROR_INVALID_VALUE
  *base = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(a->base));
  *size = a->size;
  return 0;
}

}  // namespace

std::mutex& Mutex() { return g_mu; }

void Reset() {
  std::lock_guard<std::mutex> l(g_mu);
  for (auto& a : g_allocs) std::free(a.base);
  g_allocs.clear();
  g_streams.clear();
  g_events.clear();
  g_default_stream.ops.clear();
  g_default_stream.held = false;
  g = State();
  for (int i = 0; i < 8; ++i) {
    std::array<uint8_t, 16> u{};
    for (int j = 0; j < 16; ++j) u[j] = static_cast<uint8_t>(0x11 * (i + 1) + j);
    g.uuids.push_back(u);
  }
}

void* DevAlloc(size_t n) {
  std::lock_guard<std::mutex> l(g_mu);
  char* p = static_cast<char*>(std::calloc(1, n ? n : 1));
  g_allocs.push_back({p, n ? n : 1, 0});
  return p;
}

void DevFree(void* p) {
  std::lock_guard<std::mutex> l(g_mu);
  for (size_t i = 0; i < g_allocs.size(); ++i)
    if (g_allocs[i].base == p) {
      if (g_allocs[i].open != 0) Violation("device memory freed while " + std::to_string(g_allocs[i].open) +
                                           " IPC mapping(s) of it are open");
      std::free(p);
      g_allocs.erase(g_allocs.begin() + static_cast<long>(i));
      return;
    }
  Violation("free of " + Ptr(p) + ", which is not fake device memory");
}

cudaStream_t NewStream() {
  std::lock_guard<std::mutex> l(g_mu);
  g_streams.push_back(std::make_unique<CUstream_st>());
  return g_streams.back().get();
}

void Write(cudaStream_t stream, void* dst, const std::vector<uint8_t>& bytes) {
  std::lock_guard<std::mutex> l(g_mu);
  Op op(Op::kWrite);
  op.dst = dst;
  op.bytes = bytes;
  Enqueue(stream, std::move(op));
}

void Hold(cudaStream_t stream) {
  std::lock_guard<std::mutex> l(g_mu);
  StreamOf(stream)->held = true;
}

void Release(cudaStream_t stream) {
  std::lock_guard<std::mutex> l(g_mu);
  StreamOf(stream)->held = false;
  Pump();
}

void ReleaseAll() {
  std::lock_guard<std::mutex> l(g_mu);
  g_default_stream.held = false;
  for (auto& s : g_streams) s->held = false;
  Pump();
}

size_t PendingOnPluginStreams() {
  std::lock_guard<std::mutex> l(g_mu);
  size_t n = 0;
  for (auto& s : g_streams)
    if (s->plugin) n += s->ops.size();
  return n;
}

}  // namespace fake

using fake::g;
using fake::g_mu;

extern "C" {

// ---- errors, versions, devices -------------------------------------------------------------------

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error (fake)";
    case cudaErrorInvalidValue: return "invalid argument (fake)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (fake)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (fake)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (fake)";
    case cudaErrorNotReady: return "device not ready (fake)";
    default: return "unknown error (fake)";
  }
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  std::lock_guard<std::mutex> l(g_mu);
  *count = g.device_count;
  return g.device_count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) {
  std::lock_guard<std::mutex> l(g_mu);
  if (device < 0 || device >= g.device_count) return cudaErrorInvalidDevice;
  fake::t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = fake::t_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  std::lock_guard<std::mutex> l(g_mu);
  if (device < 0 || device >= g.device_count || static_cast<size_t>(device) >= g.uuids.size())
    return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "Fake GPU %d", device);
  std::memcpy(prop->uuid.bytes, g.uuids[static_cast<size_t>(device)].data(), sizeof prop->uuid.bytes);
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int, unsigned long long,
                                             enum cudaDriverEntryPointQueryResult* driverStatus) {
  std::lock_guard<std::mutex> l(g_mu);
  const bool found = g.provide_range && std::strcmp(symbol, "cuMemGetAddressRange") == 0;
  *funcPtr = found ? reinterpret_cast<void*>(&fake::FakeGetAddressRange) : nullptr;
  if (driverStatus != nullptr) *driverStatus = found ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// ---- IPC ------------------------------------------------------------------------------------------

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  std::lock_guard<std::mutex> l(g_mu);
  fake::Alloc* a = fake::FindAlloc(devPtr);
  if (a == nullptr) return cudaErrorInvalidValue;  // not cudaMalloc memory
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, fake::kMemMagic, sizeof fake::kMemMagic);
  const uintptr_t base = reinterpret_cast<uintptr_t>(a->base);  // a handle always names the whole allocation
  std::memcpy(handle->reserved + 8, &base, sizeof base);
  g.mem_handles++;
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int) {
  std::lock_guard<std::mutex> l(g_mu);
  uintptr_t base = 0;
  if (std::memcmp(handle.reserved, fake::kMemMagic, sizeof fake::kMemMagic) != 0) return cudaErrorInvalidValue;
  std::memcpy(&base, handle.reserved + 8, sizeof base);
  fake::Alloc* a = fake::FindAlloc(reinterpret_cast<void*>(base));
  if (a == nullptr || reinterpret_cast<uintptr_t>(a->base) != base) return cudaErrorInvalidValue;  // freed since
  a->open++;
  g.mappings_opened++;
  *devPtr = a->base;  // CUDA maps the allocation and returns its base
  return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  std::lock_guard<std::mutex> l(g_mu);
  fake::Alloc* a = fake::FindAlloc(devPtr);
  if (a == nullptr || a->base != devPtr || a->open == 0) {
    fake::Violation("cudaIpcCloseMemHandle(" + fake::Ptr(devPtr) + ") of no open mapping");
    return cudaErrorInvalidValue;
  }
  a->open--;
  g.mappings_closed++;
  return cudaSuccess;
}

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  std::lock_guard<std::mutex> l(g_mu);
  if (event == nullptr || !fake::Known(event) || event->destroyed || event->target != nullptr ||
      (event->flags & (cudaEventInterprocess | cudaEventDisableTiming)) !=
          (cudaEventInterprocess | cudaEventDisableTiming))
    return cudaErrorInvalidResourceHandle;
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, fake::kEventMagic, sizeof fake::kEventMagic);
  const uintptr_t p = reinterpret_cast<uintptr_t>(event);
  std::memcpy(handle->reserved + 8, &p, sizeof p);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  std::lock_guard<std::mutex> l(g_mu);
  uintptr_t p = 0;
  if (std::memcmp(handle.reserved, fake::kEventMagic, sizeof fake::kEventMagic) != 0) return cudaErrorInvalidValue;
  std::memcpy(&p, handle.reserved + 8, sizeof p);
  cudaEvent_t src = reinterpret_cast<cudaEvent_t>(p);
  if (!fake::Known(src) || src->destroyed || src->target != nullptr) return cudaErrorInvalidResourceHandle;
  auto opened = std::make_unique<CUevent_st>();
  opened->flags = src->flags;
  opened->target = src;
  *event = opened.get();
  fake::g_events.push_back(std::move(opened));
  g.ipc_events_opened++;
  return cudaSuccess;
}

// ---- events ---------------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  std::lock_guard<std::mutex> l(g_mu);
  auto e = std::make_unique<CUevent_st>();
  e->flags = flags;
  *event = e.get();
  fake::g_events.push_back(std::move(e));
  g.events_created++;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::lock_guard<std::mutex> l(g_mu);
  if (event == nullptr || !fake::Known(event)) return cudaErrorInvalidResourceHandle;
  if (event->destroyed) {
    fake::Violation("an event destroyed twice");
    return cudaErrorInvalidResourceHandle;
  }
  event->destroyed = true;  // the object stays until Reset: queued work may still name it
  if (event->target != nullptr)
    g.ipc_events_destroyed++;
  else
    g.events_destroyed++;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard<std::mutex> l(g_mu);
  if (event == nullptr || !fake::Known(event) || event->destroyed) {
    fake::Violation("cudaEventRecord of a destroyed or unknown event");
    return cudaErrorInvalidResourceHandle;
  }
  CUevent_st* root = fake::Root(event);
  g.records++;
  Op op(Op::kRecord);
  op.ev = root;
  op.gen = ++root->recorded;
  fake::Enqueue(stream, std::move(op));
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::lock_guard<std::mutex> l(g_mu);
  if (event == nullptr || !fake::Known(event) || event->destroyed) {
    fake::Violation("cudaEventQuery of a destroyed or unknown event");
    return cudaErrorInvalidResourceHandle;
  }
  fake::Pump();
  const CUevent_st* root = fake::Root(event);
  return root->completed >= root->recorded ? cudaSuccess : cudaErrorNotReady;
}

// ---- streams and copies ---------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  std::lock_guard<std::mutex> l(g_mu);
  fake::g_streams.push_back(std::make_unique<CUstream_st>());
  fake::g_streams.back()->plugin = true;
  *stream = fake::g_streams.back().get();
  g.streams_created++;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard<std::mutex> l(g_mu);
  CUstream_st* s = fake::StreamOf(stream);
  if (s == &fake::g_default_stream || s->destroyed) {
    fake::Violation("cudaStreamDestroy of the default stream or of a destroyed stream");
    return cudaErrorInvalidResourceHandle;
  }
  s->destroyed = true;  // what is queued still runs, as in CUDA
  if (s->plugin) g.streams_destroyed++;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  std::lock_guard<std::mutex> l(g_mu);
  if (event == nullptr || !fake::Known(event) || event->destroyed) {
    fake::Violation("cudaStreamWaitEvent on a destroyed or unknown event");
    return cudaErrorInvalidResourceHandle;
  }
  g.stream_waits++;
  Op op(Op::kWait);
  op.ev = fake::Root(event);
  op.gen = op.ev->recorded;  // the event's latest record when the wait is queued; none: no wait
  fake::Enqueue(stream, std::move(op));
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind, cudaStream_t stream) {
  std::lock_guard<std::mutex> l(g_mu);
  if (g.fail_memcpy_in > 0 && --g.fail_memcpy_in == 0) return cudaErrorInvalidValue;
  const std::string bad = fake::CheckSource(src, count);
  if (!bad.empty()) fake::Violation("cudaMemcpyAsync " + bad);
  fake::Alloc* d = fake::FindAlloc(dst);
  if (d != nullptr && static_cast<size_t>(static_cast<char*>(dst) - d->base) + count > d->size)
    fake::Violation("cudaMemcpyAsync writes past the end of the destination's allocation");
  g.copies.push_back({dst, src, count, stream, fake::t_device});
  Op op(Op::kCopy);
  op.dst = dst;
  op.src = src;
  op.len = count;
  fake::Enqueue(stream, std::move(op));
  return cudaSuccess;
}

}  // extern "C"
