// wsync-bench, GPU rows: a multi-GiB update over the cuda_ipc transport (trainer and engine
// process on one GPU) against cudaMemcpy device-to-device on the same GPU in the same run.
// Both are counted as bytes of the model per second. The engine takes the bytes into registered
// CUDA buffers ("placed": wsync packs into staging, the engine copies out — two device copies per
// byte, the colocated path every framework uses) or as device views of its own staging.
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_gpu.h"
#include "wsync.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kTensorBytes = 128ull << 20;

std::string wait_line(const std::string& path) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream f(path);
    std::string l;
    if (f && std::getline(f, l) && !l.empty()) return l;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

std::string tname(size_t i) { return "layers." + std::to_string(i) + ".weight"; }

wsync_tensor_t desc(const std::string& name, void* p) {
  wsync_tensor_t d = WSYNC_TENSOR_INIT;
  d.name = name.c_str();
  d.dtype = WSYNC_DTYPE_BFLOAT16;
  d.ndim = 1;
  d.shape[0] = static_cast<int64_t>(kTensorBytes / 2);
  d.data = p;
  d.nbytes = kTensorBytes;
  d.device_type = WSYNC_DEVICE_CUDA;
  return d;
}

int engine(const std::string& addr_file, size_t n, bool placed) {
  std::string addr = wait_line(addr_file);
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.rank = 1;
  cfg.store_addr = addr.c_str();
  cfg.group_name = "bench-gpu";
  cfg.timeout_ms = 120000;
  wsync_receiver_t* rx = nullptr;
  if (wsync_receiver_init(&cfg, &rx) != WSYNC_OK) {
    std::fprintf(stderr, "bench engine: %s\n", wsync_last_error());
    return 1;
  }
  std::vector<std::string> names;
  std::vector<void*> bufs;
  std::vector<wsync_tensor_t> d;
  for (size_t i = 0; placed && i < n; ++i) names.push_back(tname(i));
  for (size_t i = 0; placed && i < n; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, kTensorBytes) != cudaSuccess) return 1;
    bufs.push_back(p);
    d.push_back(desc(names[i], p));
  }
  if (placed && wsync_receiver_register(rx, d.data(), d.size()) != WSYNC_OK) return 1;
  for (;;) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    if (wsync_receiver_next(rx, &ev, 120000) != WSYNC_OK) {
      std::fprintf(stderr, "bench engine: %s\n", wsync_last_error());
      return 1;
    }
    if (ev.kind == WSYNC_EVENT_COMMIT) wsync_receiver_commit(rx, ev.version);
    if (ev.kind == WSYNC_EVENT_CLOSED) break;
  }
  wsync_receiver_destroy(rx);
  for (void* p : bufs) cudaFree(p);
  return 0;
}

// Bytes of the model per second over `iters` whole updates (after one warm-up).
double wsync_gbps(size_t n, bool placed, int iters) {
  char dir[] = "/tmp/wsync-bench-gpu-XXXXXX";
  if (!mkdtemp(dir)) return 0;
  std::string addr_file = std::string(dir) + "/store.addr";
  std::fflush(stdout);
  // The engine is a fresh program, not a fork: a child forked after this process touched CUDA (the
  // last row's tensors; wsync itself asks CUDA what memory a tensor is in) cannot use CUDA at all
  // ("initialization error", seen on the first real GPU run).
  const std::string count = std::to_string(n);
  pid_t child = fork();
  if (child == 0) {
    execl("/proc/self/exe", "wsync-bench", kEngineFlag, addr_file.c_str(), count.c_str(), placed ? "placed" : "views",
          static_cast<char*>(nullptr));
    std::fprintf(stderr, "bench: could not start the engine (/proc/self/exe): %s\n", std::strerror(errno));
    _exit(127);
  }
  wsync_option_t opts[2] = {WSYNC_OPTION("bucket_bytes", "536870912"), WSYNC_OPTION("store_addr_file", addr_file.c_str())};
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = 1;
  cfg.group_name = "bench-gpu";
  cfg.transport = "cuda_ipc";
  cfg.options = opts;
  cfg.num_options = 2;
  cfg.timeout_ms = 60000;
  wsync_group_t* g = nullptr;
  double result = 0;
  std::vector<void*> src(n, nullptr);
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(tname(i));
  if (wsync_group_init(&cfg, &g) != WSYNC_OK) {
    std::fprintf(stderr, "bench: group init: %s\n", wsync_last_error());
  } else {
    std::vector<wsync_tensor_t> d;
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      ok = cudaMalloc(&src[i], kTensorBytes) == cudaSuccess && cudaMemset(src[i], static_cast<int>(i), kTensorBytes) == cudaSuccess;
      d.push_back(desc(names[i], src[i]));
    }
    cudaDeviceSynchronize();  // setup only, outside the measured time
    uint64_t version = 0;
    Clock::time_point t0;
    for (int i = 0; i < 1 + iters && ok; ++i) {
      if (i == 1) t0 = Clock::now();
      ok = wsync_group_send_batch(g, d.data(), d.size(), -1) == WSYNC_OK && wsync_group_finalize(g, ++version, -1) == WSYNC_OK;
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!ok) std::fprintf(stderr, "bench: update failed: %s\n", wsync_last_error());
    else result = static_cast<double>(n * kTensorBytes) * iters / secs / 1e9;
  }
  wsync_group_destroy(g);
  for (void* p : src) cudaFree(p);
  int status = 0;
  waitpid(child, &status, 0);
  std::remove(addr_file.c_str());
  rmdir(dir);
  return result;
}

// cudaMemcpy device-to-device of the same total, as bytes copied per second.
double memcpy_gbps(uint64_t bytes, int iters) {
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);  // warm-up
  cudaEventRecord(e0);
  for (int i = 0; i < iters; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms > 0 ? static_cast<double>(bytes) * iters / (ms / 1e3) / 1e9 : 0;
}

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace

int bench_gpu_engine_main(int argc, char** argv) {
  if (argc != 5 || std::strcmp(argv[1], kEngineFlag) != 0) return 2;
  return engine(argv[2], std::strtoull(argv[3], nullptr, 10), std::strcmp(argv[4], "placed") == 0);
}

int bench_gpu_rows(const std::vector<uint64_t>& sizes_gib, int repeat, double* min_ratio) {
  if (!have_gpu()) {
    std::printf("\nGPU rows: skipped (no CUDA device)\n");
    return 1;
  }
  std::printf("\nwsync-bench GPU rows: cuda_ipc (trainer + engine process on one GPU) vs cudaMemcpy D2D, "
              "GB/s of model bytes, best of %d\n", repeat);
  std::printf("%10s %8s %12s %18s %7s\n", "update", "engine", "wsync GB/s", "cudaMemcpy GB/s", "ratio");
  *min_ratio = 1e9;
  std::vector<std::pair<double, std::string>> rows;
  for (uint64_t gib : sizes_gib)
    for (bool placed : {false, true}) {
      size_t n = static_cast<size_t>((gib << 30) / kTensorBytes);
      double w = 0;
      for (int r = 0; r < repeat; ++r) w = std::max(w, wsync_gbps(n, placed, 3));
      if (w <= 0) {  // the reason is printed above; the other rows would fail the same way
        std::printf("GPU rows: the %llu GiB %s run failed; no more GPU rows\nratio_vs_cudamemcpy: 0.000\n",
                    static_cast<unsigned long long>(gib), placed ? "placed" : "views");
        *min_ratio = 0;
        return 0;
      }
      rows.push_back({w, std::to_string(gib) + " GiB " + (placed ? "placed" : "views")});
    }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  double m = 0;
  for (int r = 0; r < repeat; ++r) m = std::max(m, memcpy_gbps(1ull << 30, 8));
  for (const auto& row : rows) {
    double ratio = m > 0 ? row.first / m : 0;
    *min_ratio = std::min(*min_ratio, ratio);
    std::printf("%19s %12.1f %18.1f %7.3f\n", row.second.c_str(), row.first, m, ratio);
  }
  std::printf("GPU: %s\nratio_vs_cudamemcpy: %.3f\n", prop.name, *min_ratio);
  return 0;
}
