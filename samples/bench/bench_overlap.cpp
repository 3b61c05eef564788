// wsync-bench's overlap row: a trainer-like loop that, for each layer, gathers the layer's
// weights and sends them. "Gather" stands for an FSDP all-gather or a TP gather on the GPU, which
// leaves the host CPU idle: it is a wait as long as one layer's send. The blocking loop is
// gather k, send_batch k; the overlapped loop is send_start k, gather k+1, send_wait k, with the
// layers in two alternating buffers (a batch's memory is wsync's until its wait returns). With
// gather as long as send, the blocking loop takes 2x and a perfect overlap 1x.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_host.h"
#include "bench_overlap.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Layers {
  std::vector<std::string> names;
  std::vector<uint8_t> buf[2];  // layer k lives in buf[k % 2], as a gather's output would
  uint64_t bytes;
  Layers(size_t n, uint64_t layer_bytes) : bytes(layer_bytes) {
    for (size_t i = 0; i < n; ++i) names.push_back(HostPair::name(i));
    for (auto& b : buf) b.assign(layer_bytes, 0x5A);
  }
  wsync_tensor_t tensor(size_t k) { return host_tensor(names[k], buf[k % 2].data(), bytes); }
};

void gather(double secs) { std::this_thread::sleep_for(std::chrono::duration<double>(secs)); }

// One update, layer by layer with send_batch; returns seconds (0 on failure).
double blocking_update(wsync_group_t* g, Layers& l, uint64_t version, double gather_s) {
  auto t0 = Clock::now();
  for (size_t k = 0; k < l.names.size(); ++k) {
    gather(gather_s);
    wsync_tensor_t t = l.tensor(k);
    if (wsync_group_send_batch(g, &t, 1, -1) != WSYNC_OK) return 0;
  }
  return wsync_group_finalize(g, version, -1) == WSYNC_OK ? seconds_since(t0) : 0;
}

// The same update with layer k moving while layer k+1 is gathered.
double overlapped_update(wsync_group_t* g, Layers& l, uint64_t version, double gather_s) {
  auto t0 = Clock::now();
  gather(gather_s);
  for (size_t k = 0; k < l.names.size(); ++k) {
    wsync_tensor_t t = l.tensor(k);
    uint64_t ticket = 0;
    if (wsync_group_send_start(g, &t, 1, -1, &ticket) != WSYNC_OK) return 0;
    if (k + 1 < l.names.size()) gather(gather_s);
    if (wsync_group_send_wait(g, ticket, -1) != WSYNC_OK) return 0;
  }
  return wsync_group_finalize(g, version, -1) == WSYNC_OK ? seconds_since(t0) : 0;
}

}  // namespace

double overlap_row(const std::string& tls, size_t layers, uint64_t layer_mib, int repeat) {
  const uint64_t bytes = layer_mib << 20;
  HostPair pair(layers, bytes, bytes);
  if (!pair.group()) return 0;
  Layers l(layers, bytes);
  uint64_t version = 0;
  // One layer's send time, best of `repeat` updates without gathers: the gather is made as long.
  double send_s = 1e9;
  for (int r = 0; r < repeat + 1; ++r) {  // the first is a warm-up
    double s = blocking_update(pair.group(), l, ++version, 0);
    if (s <= 0) return 0;
    if (r > 0) send_s = std::min(send_s, s / layers);
  }
  double blocking = 1e9, overlapped = 1e9;
  for (int r = 0; r < repeat; ++r) {
    double b = blocking_update(pair.group(), l, ++version, send_s);
    double o = overlapped_update(pair.group(), l, ++version, send_s);
    if (b <= 0 || o <= 0) {
      std::fprintf(stderr, "bench: overlap update failed: %s\n", wsync_last_error());
      return 0;
    }
    blocking = std::min(blocking, b);
    overlapped = std::min(overlapped, o);
  }
  const double speedup = blocking / overlapped;
  // gather + send per layer against max(gather, send) plus the one gather nothing can hide.
  const double ideal = 2.0 * layers / (layers + 1.0);
  std::printf("%8s %6zu x %4llu MiB %10.1f %12.1f %14.1f %8.2f %8.2f\n", tls.c_str(), layers,
              static_cast<unsigned long long>(layer_mib), send_s * 1e3, blocking * 1e3, overlapped * 1e3, speedup,
              ideal);
  return speedup;
}

}  // namespace bench
