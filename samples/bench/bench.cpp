// wsync-bench: wsync's bucket bandwidth over the UCX transport against ucx_perftest's tag_bw on
// the same UCX transports and message size, measured in the same run. Prints a table and ends
// with "ratio_vs_ucx_perftest: <min ratio over the rows>".
//
//   wsync-bench [--sizes-mib 64,256,1024] [--tls sm:tcp] [--iters N] [--repeat 3] [--perftest PATH]
//               [--overlap-layers 16] [--overlap-layer-mib 32] [--gpu auto|on|off] [--gpu-sizes-gib 4]
//
// Each --tls entry is a UCX_TLS value; both wsync and ucx_perftest run with it (set in the
// environment both inherit), so every row compares the two on the same UCX transport. A UCX_TLS
// already set in the environment replaces the list.
//
// wsync rows are whole updates (send_batch of one bucket-sized tensor + finalize) into a
// receiver process that registered the destination buffer, so the bytes land in place: every
// manifest, READY, ACK and commit round trip is inside the measured time. Each row also gives the
// sender's process CPU time over wall time during those updates. For the largest size on shared
// memory (the receiver does the copy), with verify_payload=0 (the checksum table's runs), it must
// stay under 0.30 ("sender_cpu_over_wall"): waiting must not cost a core. With the default
// checksum the sender also hashes each bucket once while it moves; that row's figure is printed
// beside it.
//
// The overlap table (bench_overlap.cpp) runs a trainer-like loop on the first UCX_TLS: blocking
// send_batch per layer against send_start/send_wait with the next layer gathered meanwhile, and
// ends with "overlap_speedup" (blocking time over overlapped time; must beat 1).
//
// Where wsync was built with CUDA and a GPU is present (--gpu auto), GPU rows follow: the
// cuda_ipc transport against cudaMemcpy device-to-device (bench_gpu.cpp), ending with
// "ratio_vs_cudamemcpy: <min ratio>". The exit status is non-zero when a figure misses its limit.
//
// The checksum table runs the largest size with verify_payload=0 and =1 (the default) and prints
// "checksum_cost: <largest cost>% (aim 5%)", reported, not enforced.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_host.h"
#include "bench_overlap.h"
#include "wsync.h"
#ifdef WSYNC_BENCH_CUDA
#include "bench_gpu.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct WsyncRun {
  double mibps = 0;         // bytes of the model per second
  double cpu_over_wall = 0;  // the sender's process CPU time over wall time during the updates
};

// `iters` whole updates of one `size`-byte tensor into a receiver process, in buckets of
// `bucket` bytes (0: one bucket), with the group option verify_payload (null: the default).
WsyncRun wsync_run(uint64_t size, int iters, int warmup, uint64_t bucket = 0, const char* verify = nullptr) {
  bench::HostPair pair(1, size, bucket ? bucket : size, verify);
  WsyncRun out;
  if (!pair.group()) return out;
  std::vector<uint8_t> src(size);
  for (uint64_t i = 0; i < size; i += 4096) src[i] = static_cast<uint8_t>(i >> 12);
  const std::string name = bench::HostPair::name(0);
  wsync_tensor_t t = bench::host_tensor(name, src.data(), size);
  uint64_t version = 0;
  bool ok = true;
  Clock::time_point t0;
  double cpu0 = 0;
  for (int i = 0; i < warmup + iters && ok; ++i) {
    if (i == warmup) {
      t0 = Clock::now();
      cpu0 = bench::process_cpu_seconds();
    }
    ok = wsync_group_send_batch(pair.group(), &t, 1, -1) == WSYNC_OK &&
         wsync_group_finalize(pair.group(), ++version, -1) == WSYNC_OK;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!ok) {
    std::fprintf(stderr, "bench: update failed: %s\n", wsync_last_error());
    return out;
  }
  out.mibps = static_cast<double>(size) * iters / secs / (1024.0 * 1024.0);
  out.cpu_over_wall = (bench::process_cpu_seconds() - cpu0) / secs;
  return out;
}

// ucx_perftest tag_bw between two processes on loopback with the given wait mode (-E poll|sleep);
// the "overall" bandwidth in MiB/s.
double perftest_mibps(const std::string& tool, uint64_t size, int iters, int warmup, int port, const char* wait_mode,
                      bool peer_errors) {
  std::string args = " -t tag_bw -s " + std::to_string(size) + " -n " + std::to_string(iters) + " -w " +
                     std::to_string(warmup) + " -p " + std::to_string(port) + " -E " + wait_mode +
                     (peer_errors ? " -e" : "");
  std::fflush(stdout);
  pid_t server = fork();
  if (server == 0) {
    std::string cmd = "exec " + tool + args + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::string cmd = tool + " 127.0.0.1" + args + " 2>&1";
  double mibps = 0;
  for (int attempt = 0; attempt < 5 && mibps == 0; ++attempt) {
    FILE* p = popen(cmd.c_str(), "r");
    char line[1024];
    while (p && std::fgets(line, sizeof line, p)) {
      if (std::strncmp(line, "Final:", 6) != 0) continue;
      std::istringstream in(line + 6);
      double v[6] = {0};
      for (double& x : v) in >> x;
      mibps = v[5];  // iterations, 50%ile, average, overall latency, average and overall bandwidth
    }
    if (p) pclose(p);
    if (mibps == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // server not up yet
  }
  kill(server, SIGTERM);
  int status = 0;
  waitpid(server, &status, 0);
  return mibps;
}

// The same rule as the UCX plugin's: every entry of the list is an intra-host memory transport.
bool shared_memory_only(const std::string& tls) {
  std::stringstream ss(tls);
  std::string t;
  bool any = false;
  while (std::getline(ss, t, ',')) {
    if (t.empty()) continue;
    if (t[0] == '^') return false;
    static const char* const kLocal[] = {"self", "sm", "shm", "mm", "posix", "sysv", "xpmem", "knem", "cma",
                                         "cuda_copy", "cuda_ipc", "rocm_copy", "rocm_ipc"};
    if (std::find(std::begin(kLocal), std::end(kLocal), t) == std::end(kLocal)) return false;
    any = true;
  }
  return any;
}

struct Options {
  std::vector<uint64_t> sizes_mib = {64, 256, 1024};
  std::vector<std::string> tls_list = {"sm", "tcp"};
  int iters = 0;
  int repeat = 3;
  std::string tool = "ucx_perftest";
  std::string gpu = "auto";
  std::vector<uint64_t> gpu_gib = {4};
  size_t overlap_layers = 16;
  uint64_t overlap_layer_mib = 32;
};

const char kUsage[] =
    "usage: wsync-bench [--sizes-mib 64,256,1024] [--tls sm:tcp] [--iters N] [--repeat 3] [--perftest PATH]\n"
    "                   [--overlap-layers 16] [--overlap-layer-mib 32] [--gpu auto|on|off] [--gpu-sizes-gib 4]\n"
    "Measures wsync's UCX transport against ucx_perftest on the same transports and sizes (docs/PERFORMANCE.md).\n"
    "--tls takes UCX_TLS values separated by ':' (a UCX_TLS in the environment replaces them). Without a group\n"
    "secret in the environment (WSYNC_GROUP_SECRET, WSYNC_GROUP_SECRET_FILE) the bench makes one for its own\n"
    "sender and receivers.\n";

// A whole number >= `min` from a flag's value, or false with a message naming the flag.
bool number(const std::string& flag, const std::string& v, uint64_t min, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = v.empty() || v[0] == '-' ? 0 : std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || errno != 0 || end == nullptr || *end != '\0' || n < min) {
    std::fprintf(stderr, "wsync-bench: %s takes a whole number >= %llu, not '%s'\n", flag.c_str(),
                 static_cast<unsigned long long>(min), v.c_str());
    return false;
  }
  *out = n;
  return true;
}

bool numbers(const std::string& flag, const std::string& v, std::vector<uint64_t>* out) {
  out->clear();
  std::stringstream ss(v);
  std::string item;
  uint64_t n = 0;
  while (std::getline(ss, item, ',')) {
    if (!number(flag, item, 1, &n)) return false;
    out->push_back(n);
  }
  if (out->empty()) std::fprintf(stderr, "wsync-bench: %s needs at least one number\n", flag.c_str());
  return !out->empty();
}

// -1: run with *o; otherwise the exit status (0 after --help, 2 for a bad command line).
int parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "wsync-bench: %s needs a value\n%s", a.c_str(), kUsage);
      return 2;
    }
    const std::string v = argv[i + 1];
    uint64_t n = 0;
    bool ok = true;
    if (a == "--sizes-mib") {
      ok = numbers(a, v, &o->sizes_mib);
    } else if (a == "--tls") {
      o->tls_list.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ':'))
        if (!item.empty()) o->tls_list.push_back(item);
      if (o->tls_list.empty()) {
        std::fprintf(stderr, "wsync-bench: --tls needs at least one UCX_TLS value\n");
        ok = false;
      }
    } else if (a == "--iters") {
      ok = number(a, v, 1, &n);
      o->iters = static_cast<int>(std::min<uint64_t>(n, 1u << 20));
    } else if (a == "--repeat") {
      ok = number(a, v, 1, &n);
      o->repeat = static_cast<int>(std::min<uint64_t>(n, 100));
    } else if (a == "--perftest") {
      o->tool = v;
    } else if (a == "--gpu") {
      o->gpu = v;
      if (v != "auto" && v != "on" && v != "off") {
        std::fprintf(stderr, "wsync-bench: --gpu takes auto, on or off, not '%s'\n", v.c_str());
        ok = false;
      }
    } else if (a == "--gpu-sizes-gib") {
      ok = numbers(a, v, &o->gpu_gib);
    } else if (a == "--overlap-layers") {
      ok = number(a, v, 2, &n);
      o->overlap_layers = n;
    } else if (a == "--overlap-layer-mib") {
      ok = number(a, v, 1, &n);
      o->overlap_layer_mib = n;
    } else {
      std::fprintf(stderr, "wsync-bench: unknown flag %s\n%s", a.c_str(), kUsage);
      return 2;
    }
    if (!ok) return 2;
  }
  if (const char* env = std::getenv("UCX_TLS")) o->tls_list = {env};
  return -1;
}

// The bench's sender and its receiver processes share a group secret like any group: the one in
// the environment, else one made here (the receivers are forked and inherit it).
void ensure_group_secret() {
  if (std::getenv("WSYNC_GROUP_SECRET") != nullptr || std::getenv("WSYNC_GROUP_SECRET_FILE") != nullptr) return;
  std::random_device rd;
  char hex[65];
  for (int i = 0; i < 32; ++i) std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned>(rd() & 0xff));
  setenv("WSYNC_GROUP_SECRET", hex, 1);
}

struct Figures {
  double min_ratio = 1e9;        // wsync over ucx_perftest, every row
  double max_cpu_local = 0;      // the sender's CPU/wall at the largest size, shared-memory rows
  double max_cpu_local_off = 0;  // the same with verify_payload=0, in one bucket (checksum table)
  bool any_local = false;
};

// One bandwidth row: wsync and ucx_perftest on the same UCX_TLS and size.
void bandwidth_row(const Options& o, const std::string& tls, uint64_t mib, int* port, Figures* f) {
  setenv("UCX_TLS", tls.c_str(), 1);
  // wsync's UCX transport runs endpoints with peer error handling unless every transport is
  // shared memory (its "auto" error mode); ucx_perftest -e does the same, so the two match.
  const bool local = shared_memory_only(tls);
  const uint64_t size = mib << 20;
  const int n = o.iters > 0 ? o.iters : std::max(6, static_cast<int>(2048 / mib));
  const int warm = 2;
  // Best of `repeat` runs on each side: this compares the two on the machine at its quietest.
  WsyncRun w;
  double p_poll = 0, p_sleep = 0;
  for (int r = 0; r < o.repeat; ++r) {
    WsyncRun run = wsync_run(size, n, warm);
    if (run.mibps > w.mibps) w = run;
    // The baseline is the better of ucx_perftest's two wait modes: on a machine with few cores
    // its busy-polling pair starves the kernel's copy, and "sleep" is then the faster one.
    p_poll = std::max(p_poll, perftest_mibps(o.tool, size, n, warm, (*port)++, "poll", !local));
    p_sleep = std::max(p_sleep, perftest_mibps(o.tool, size, n, warm, (*port)++, "sleep", !local));
  }
  const double p = std::max(p_poll, p_sleep);
  const double r = p > 0 ? w.mibps / p : 0;
  f->min_ratio = std::min(f->min_ratio, r);
  if (local && mib == o.sizes_mib.back()) {
    f->max_cpu_local = std::max(f->max_cpu_local, w.cpu_over_wall);
    f->any_local = true;
  }
  std::printf("%8s %6llu MiB %6d %12.1f %18.1f %7.3f %9.2f   (perftest%s -E poll %.1f, -E sleep %.1f)\n", tls.c_str(),
              static_cast<unsigned long long>(mib), n, w.mibps, p, r, w.cpu_over_wall, local ? "" : " -e", p_poll,
              p_sleep);
  std::fflush(stdout);
}

// What the payload checksum (verify_payload, on by default on host transports) costs: the same
// updates with it off and on, on every UCX_TLS, at the largest size, in one bucket and in 64 MiB
// buckets (where the sender hashes bucket k+1 while bucket k moves). Returns the largest cost.
double checksum_table(const Options& o, Figures* f) {
  const uint64_t mib = o.sizes_mib.back(), size = mib << 20;
  const int n = o.iters > 0 ? o.iters : std::max(6, static_cast<int>(2048 / mib));
  std::printf("\nchecksum: the default verify_payload=1 (XXH3-64 of every bucket, sender and receiver) against 0\n");
  std::printf("%8s %10s %10s %14s %14s %8s\n", "UCX_TLS", "size", "bucket", "off MiB/s", "on MiB/s", "cost");
  double worst = 0;
  for (const std::string& tls : o.tls_list) {
    setenv("UCX_TLS", tls.c_str(), 1);
    for (uint64_t bucket_mib : {mib, std::min<uint64_t>(64, mib)}) {
      WsyncRun off, on;  // best of `repeat`, alternating so both see the same machine
      for (int r = 0; r < o.repeat; ++r) {
        const WsyncRun a = wsync_run(size, n, 2, bucket_mib << 20, "0");
        const WsyncRun b = wsync_run(size, n, 2, bucket_mib << 20, "1");
        if (a.mibps > off.mibps) off = a;
        if (b.mibps > on.mibps) on = b;
      }
      const double cost = off.mibps > 0 ? 1.0 - on.mibps / off.mibps : 1.0;
      if (bucket_mib == mib && shared_memory_only(tls)) f->max_cpu_local_off = std::max(f->max_cpu_local_off, off.cpu_over_wall);
      worst = std::max(worst, cost);
      std::printf("%8s %6llu MiB %6llu MiB %14.1f %14.1f %7.1f%%\n", tls.c_str(), static_cast<unsigned long long>(mib),
                  static_cast<unsigned long long>(bucket_mib), off.mibps, on.mibps, 100 * cost);
      std::fflush(stdout);
      if (bucket_mib == mib && mib <= 64) break;  // one bucket and 64 MiB buckets are the same row
    }
  }
  return worst;
}

// The trainer-like loop on the first UCX_TLS of the list: blocking against overlapped.
double overlap_table(const Options& o) {
  setenv("UCX_TLS", o.tls_list.front().c_str(), 1);
  std::printf("\noverlap: per layer, gather k+1 (a wait as long as one layer's send) while layer k moves\n");
  std::printf("%8s %17s %10s %12s %14s %8s %8s\n", "UCX_TLS", "layers", "send ms", "blocking ms", "overlapped ms",
              "speedup", "ideal");
  const double s = bench::overlap_row(o.tls_list.front(), o.overlap_layers, o.overlap_layer_mib, o.repeat);
  std::printf("overlap_speedup: %.2f\n", s);
  return s;
}

int gpu_rows(const Options& o) {
  if (o.gpu == "off") return 0;
#ifdef WSYNC_BENCH_CUDA
  double gpu_ratio = 0;
  if (bench_gpu_rows(o.gpu_gib, o.repeat, &gpu_ratio) != 0) return o.gpu == "on" ? 1 : 0;
  return gpu_ratio > 0 ? 0 : 1;
#else
  std::printf("\nGPU rows: not built (wsync was configured without CUDA)\n");
  return o.gpu == "on" ? 1 : 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
#ifdef WSYNC_BENCH_CUDA
  if (argc > 1 && std::strcmp(argv[1], kEngineFlag) == 0) return bench_gpu_engine_main(argc, argv);
#endif
  Options o;
  const int done = parse_options(argc, argv, &o);
  if (done >= 0) return done;
  ensure_group_secret();
  std::printf("wsync-bench: wsync %s over its UCX transport vs ucx_perftest tag_bw, loopback, host memory\n",
              wsync_version_string());
  std::printf("each figure is the best of %d runs; MiB/s as ucx_perftest counts them; cpu/wall: the sender's\n"
              "process CPU time over wall time during wsync's updates\n", o.repeat);
  std::printf("%8s %10s %6s %12s %18s %7s %9s\n", "UCX_TLS", "size", "iters", "wsync MiB/s", "ucx_perftest MiB/s",
              "ratio", "cpu/wall");
  Figures f;
  int port = 13400 + static_cast<int>(getpid() % 1000);
  for (const std::string& tls : o.tls_list)
    for (uint64_t mib : o.sizes_mib) bandwidth_row(o, tls, mib, &port, &f);
  std::printf("ratio_vs_ucx_perftest: %.3f\n", f.min_ratio);
  int rc = f.min_ratio > 0 ? 0 : 1;
  // The payload checksum is on by default; its cost is reported against the aim of 5 % (a figure
  // to watch, not a limit: it depends on the machine's hashing speed against its copy speed).
  const double cost = checksum_table(o, &f);
  std::printf("checksum_cost: %.1f%% (aim 5%%)%s\n", 100 * cost, cost <= 0.05 ? "" : ": OVER THE AIM");
  if (f.any_local) {
    // The receiver does the copy (shared memory): the sender should mostly sleep.
    const bool ok = f.max_cpu_local_off < 0.3;
    std::printf("sender_cpu_over_wall: %.2f at %llu MiB, shared memory, checksum off (limit 0.30): %s; with the "
                "default checksum (the sender hashes each bucket once, while it moves): %.2f\n", f.max_cpu_local_off,
                static_cast<unsigned long long>(o.sizes_mib.back()), ok ? "ok" : "OVER", f.max_cpu_local);
    if (!ok) rc = 1;
  }
  if (overlap_table(o) <= 1.0) rc = 1;  // overlapping must beat the blocking loop
  if (gpu_rows(o) != 0) rc = 1;
  return rc;
}
