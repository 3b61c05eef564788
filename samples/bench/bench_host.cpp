// See bench_host.h.
#include "bench_host.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace bench {
namespace {

std::string read_line(const std::string& path, int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream f(path);
    std::string l;
    if (f && std::getline(f, l) && !l.empty()) return l;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

int receiver_main(const std::string& addr_file, size_t layers, uint64_t layer_bytes) {
  std::string addr = read_line(addr_file, 30000);
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.rank = 1;
  cfg.store_addr = addr.c_str();
  cfg.group_name = "bench";
  cfg.timeout_ms = 120000;
  wsync_receiver_t* rx = nullptr;
  if (wsync_receiver_init(&cfg, &rx) != WSYNC_OK) {
    std::fprintf(stderr, "bench receiver: %s\n", wsync_last_error());
    return 1;
  }
  std::vector<std::vector<uint8_t>> bufs(layers, std::vector<uint8_t>(layer_bytes));
  std::vector<std::string> names;
  std::vector<wsync_tensor_t> regs;
  for (size_t i = 0; i < layers; ++i) names.push_back(HostPair::name(i));
  for (size_t i = 0; i < layers; ++i) regs.push_back(host_tensor(names[i], bufs[i].data(), layer_bytes));
  int rc = wsync_receiver_register(rx, regs.data(), regs.size()) == WSYNC_OK ? 0 : 1;
  while (rc == 0) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    if (wsync_receiver_next(rx, &ev, 120000) != WSYNC_OK) {
      std::fprintf(stderr, "bench receiver: %s\n", wsync_last_error());
      rc = 1;
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      wsync_receiver_commit(rx, ev.version);
    } else if (ev.kind == WSYNC_EVENT_CLOSED) {
      break;
    }
  }
  volatile uint8_t sink = bufs[0][layer_bytes / 2];  // the receive cannot be optimised away
  (void)sink;
  wsync_receiver_destroy(rx);
  return rc;
}

}  // namespace

wsync_tensor_t host_tensor(const std::string& name, void* data, uint64_t nbytes) {
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  t.name = name.c_str();
  t.dtype = WSYNC_DTYPE_UINT8;
  t.ndim = 1;
  t.shape[0] = static_cast<int64_t>(nbytes);
  t.data = data;
  t.nbytes = nbytes;
  return t;
}

HostPair::HostPair(size_t layers, uint64_t layer_bytes, uint64_t bucket_bytes, const char* verify_payload) {
  char dir[] = "/tmp/wsync-bench-XXXXXX";
  if (!mkdtemp(dir)) return;
  dir_ = dir;
  addr_file_ = dir_ + "/store.addr";
  std::fflush(stdout);
  child_ = fork();
  if (child_ == 0) _exit(receiver_main(addr_file_, layers, layer_bytes));
  const std::string bucket = std::to_string(bucket_bytes);
  wsync_option_t opts[3] = {WSYNC_OPTION("bucket_bytes", bucket.c_str()),
                            WSYNC_OPTION("store_addr_file", addr_file_.c_str()),
                            WSYNC_OPTION("verify_payload", verify_payload ? verify_payload : "")};
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = 1;
  cfg.group_name = "bench";
  cfg.options = opts;
  cfg.num_options = verify_payload ? 3 : 2;
  cfg.timeout_ms = 60000;
  if (wsync_group_init(&cfg, &g_) != WSYNC_OK) {
    std::fprintf(stderr, "bench: group init: %s\n", wsync_last_error());
    g_ = nullptr;
  }
}

HostPair::~HostPair() {
  wsync_group_destroy(g_);
  if (child_ > 0) {
    int status = 0;
    waitpid(child_, &status, 0);
  }
  if (!dir_.empty()) {
    std::remove(addr_file_.c_str());
    rmdir(dir_.c_str());
  }
}

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace bench
