// A trainer process and two engine processes on one GPU, over the cuda_ipc transport: several
// versions of a model in CUDA memory (with a tensor larger than a bucket, split across buckets),
// rank 1 taking the bytes into registered CUDA buffers and rank 2 taking device views. Every
// tensor of every version is copied back to the host and its checksum compared.
// Exit 0 = passed, 77 = no GPU here (skipped), anything else = failed.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "harness.h"
#include "wsync.h"

using namespace harness;

namespace {

constexpr uint64_t kVersions = 3;
constexpr uint64_t kBucket = 32ull << 20;

#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      std::fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);          \
      std::fprintf(stderr, "\n");                 \
      return 1;                                   \
    }                                             \
  } while (0)

int gpu_count_in_child() {
  pid_t p = spawn([] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 1;
  });
  return wait_child(p, 60000) == 0 ? 1 : 0;
}

// Checksum of a tensor's bytes on the device, through a host copy.
uint64_t device_checksum(const void* p, uint64_t n) {
  std::vector<uint8_t> h(n);
  if (n && cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
  return synth_checksum(h.data(), n);
}

int engine(const std::string& addr_file, uint32_t rank, const std::vector<synth_tensor_t>& spec, bool reg) {
  std::string addr = read_addr_file(addr_file, 60000);
  CHECK(!addr.empty(), "rank %u: no store address", rank);
  wsync_receiver_t* rx = nullptr;
  CHECK(join(addr, rank, "gpu", 60000, &rx) == WSYNC_OK, "rank %u join: %s", rank, wsync_last_error());
  std::vector<void*> bufs;
  if (reg) {
    std::vector<wsync_tensor_t> d;
    for (const auto& t : spec) {
      void* p = nullptr;
      if (t.nbytes) CHECK(cudaMalloc(&p, t.nbytes) == cudaSuccess, "cudaMalloc");
      bufs.push_back(p);
      wsync_tensor_t x = desc_of(t, p);
      x.device_type = WSYNC_DEVICE_CUDA;
      d.push_back(x);
    }
    CHECK(wsync_receiver_register(rx, d.data(), d.size()) == WSYNC_OK, "register: %s", wsync_last_error());
  }
  std::map<std::string, const synth_tensor_t*> by_name;
  for (const auto& t : spec) by_name[t.name] = &t;
  uint64_t version = 1, seen = 0;
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  for (;;) {
    wsync_status_t st = wsync_receiver_next(rx, &ev, 60000);
    CHECK(st == WSYNC_OK, "rank %u next: %s", rank, wsync_last_error());
    if (ev.kind == WSYNC_EVENT_CLOSED) break;
    if (ev.kind == WSYNC_EVENT_BUCKET) {
      for (uint64_t i = 0; i < ev.num_tensors; ++i) {
        const wsync_tensor_t& t = ev.tensors[i];
        auto it = by_name.find(t.name);
        CHECK(it != by_name.end(), "unknown tensor %s", t.name);
        CHECK(t.nbytes == 0 || t.device_type == WSYNC_DEVICE_CUDA, "tensor %s is not in CUDA memory", t.name);
        CHECK(ev.placed[i] == (reg ? 1 : 0), "tensor %s placed=%u", t.name, ev.placed[i]);
        uint64_t want = synth_expected_checksum(it->second, version);
        uint64_t got = device_checksum(t.data, t.nbytes);
        CHECK(got == want, "rank %u version %llu tensor %s: checksum %016llx, expected %016llx", rank,
              static_cast<unsigned long long>(version), t.name, static_cast<unsigned long long>(got),
              static_cast<unsigned long long>(want));
        ++seen;
      }
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      CHECK(ev.version == version, "commit of %llu, expected %llu", static_cast<unsigned long long>(ev.version),
            static_cast<unsigned long long>(version));
      CHECK(seen == spec.size(), "version %llu: %llu tensors arrived of %zu", static_cast<unsigned long long>(version),
            static_cast<unsigned long long>(seen), spec.size());
      CHECK(wsync_receiver_commit(rx, ev.version) == WSYNC_OK, "commit: %s", wsync_last_error());
      ++version;
      seen = 0;
    } else {
      CHECK(false, "rank %u: unexpected event %d", rank, ev.kind);
    }
  }
  CHECK(version == kVersions + 1, "rank %u committed %llu versions", rank, static_cast<unsigned long long>(version - 1));
  wsync_receiver_destroy(rx);
  for (void* p : bufs) cudaFree(p);
  std::printf("rank %u: %llu versions verified (%s)\n", rank, static_cast<unsigned long long>(kVersions),
              reg ? "registered CUDA buffers" : "device views");
  return 0;
}

int trainer(const std::string& addr_file, const std::vector<synth_tensor_t>& spec) {
  std::vector<wsync_option_t> opts = {WSYNC_OPTION("bucket_bytes", "33554432"),
                                      WSYNC_OPTION("store_addr_file", addr_file.c_str()),
                                      WSYNC_OPTION("timeout_ms", "60000")};
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = 2;
  cfg.group_name = "gpu";
  cfg.transport = "cuda_ipc";
  cfg.options = opts.data();
  cfg.num_options = opts.size();
  cfg.timeout_ms = 60000;
  wsync_group_t* g = nullptr;
  CHECK(wsync_group_init(&cfg, &g) == WSYNC_OK, "group init: %s", wsync_last_error());
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  CHECK(wsync_group_set_cuda_stream(g, stream) == WSYNC_OK, "set stream: %s", wsync_last_error());
  std::vector<void*> dev(spec.size(), nullptr);
  std::vector<uint8_t> host;
  for (size_t i = 0; i < spec.size(); ++i)
    if (spec[i].nbytes) CHECK(cudaMalloc(&dev[i], spec[i].nbytes) == cudaSuccess, "cudaMalloc");
  for (uint64_t v = 1; v <= kVersions; ++v) {
    std::vector<wsync_tensor_t> d;
    for (size_t i = 0; i < spec.size(); ++i) {
      host.resize(spec[i].nbytes);
      if (spec[i].nbytes) {
        synth_fill(&spec[i], v, host.data());
        // queued on the caller's stream: wsync must order its reads after it
        CHECK(cudaMemcpyAsync(dev[i], host.data(), spec[i].nbytes, cudaMemcpyHostToDevice, stream) == cudaSuccess,
              "upload");
        CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");  // host buffer is reused
      }
      wsync_tensor_t x = desc_of(spec[i], dev[i]);
      x.device_type = WSYNC_DEVICE_CUDA;
      d.push_back(x);
    }
    size_t half = d.size() / 2;
    CHECK(wsync_group_send_batch(g, d.data(), half, -1) == WSYNC_OK, "send v%llu: %s",
          static_cast<unsigned long long>(v), wsync_last_error());
    CHECK(wsync_group_send_batch(g, d.data() + half, d.size() - half, -1) == WSYNC_OK, "send v%llu: %s",
          static_cast<unsigned long long>(v), wsync_last_error());
    CHECK(wsync_group_finalize(g, v, -1) == WSYNC_OK, "finalize v%llu: %s", static_cast<unsigned long long>(v),
          wsync_last_error());
  }
  wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
  CHECK(wsync_group_get_stats(g, &s) == WSYNC_OK, "stats");
  CHECK(s.committed_version == kVersions, "committed %llu", static_cast<unsigned long long>(s.committed_version));
  CHECK(s.device_staging_bytes == 2 * kBucket, "device staging %llu bytes, expected %llu",
        static_cast<unsigned long long>(s.device_staging_bytes), static_cast<unsigned long long>(2 * kBucket));
  CHECK(s.staging_bytes == 0, "host staging %llu bytes", static_cast<unsigned long long>(s.staging_bytes));
  std::printf("trainer: %llu versions, %llu buckets, %.1f MiB per receiver, %.3f s in send_batch\n",
              static_cast<unsigned long long>(s.updates), static_cast<unsigned long long>(s.buckets),
              s.bytes / 1048576.0, s.send_seconds);
  wsync_group_destroy(g);
  for (void* p : dev) cudaFree(p);
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main() {
  if (!gpu_count_in_child()) {
    std::printf("SKIPPED: no CUDA device on this machine\n");
    return 77;
  }
  // 40 mixed-dtype tensors, an empty one, a scalar, and a 96 MiB tensor split over 32 MiB buckets
  std::vector<synth_tensor_t> spec = tensor_set(40, 96ull << 20);
  std::string dir = temp_dir();
  std::string addr_file = dir + "/store.addr";
  pid_t r1 = spawn([&] { return engine(addr_file, 1, spec, true); });
  pid_t r2 = spawn([&] { return engine(addr_file, 2, spec, false); });
  int rc = trainer(addr_file, spec);
  int c1 = wait_child(r1, 120000), c2 = wait_child(r2, 120000);
  std::printf("trainer %d, rank 1 %d, rank 2 %d\n", rc, c1, c2);
  return rc == 0 && c1 == 0 && c2 == 0 ? 0 : 1;
}
