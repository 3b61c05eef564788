#include "harness.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace harness {

pid_t spawn(const std::function<int()>& fn) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // A test process that dies (a sanitizer's halt, a crash) takes its children with it: an
    // orphaned receiver waiting for its sender would otherwise keep ctest waiting for its timeout.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(97);
    int rc = 99;
    try {
      rc = fn();
    } catch (...) {
      rc = 98;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(rc);
  }
  return pid;
}

int wait_child(pid_t pid, int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -2;
    }
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool stop_child(pid_t pid, int timeout_ms) {
  if (kill(pid, SIGSTOP) != 0) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    // (the kernel tells the parent once the last thread stopped; looked at without reaping, so
    // that a child that exited instead is still there for wait_child)
    siginfo_t si{};
    if (waitid(P_PID, static_cast<id_t>(pid), &si, WSTOPPED | WEXITED | WNOHANG | WNOWAIT) != 0 && errno != EINTR)
      return false;
    if (si.si_pid == pid && si.si_code == CLD_STOPPED) {
      int status = 0;  // (takes the stop's report)
      return waitpid(pid, &status, WNOHANG | WUNTRACED) == pid && WIFSTOPPED(status);
    }
    if (si.si_pid == pid || std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

namespace {

// The directories temp_dir made, removed when the process that made them exits (a forked child
// that calls exit() leaves them: its parent still uses them).
struct TempDirs {
  std::mutex mu;
  std::vector<std::string> dirs;
  pid_t owner = getpid();
  ~TempDirs() {
    if (getpid() != owner) return;
    std::lock_guard<std::mutex> lk(mu);
    for (const std::string& d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
};

TempDirs& temp_dirs() {
  static TempDirs t;  // (destroyed at exit)
  return t;
}

}  // namespace

std::string temp_dir() {
  char tmpl[] = "/tmp/wsync-it-XXXXXX";
  char* d = mkdtemp(tmpl);
  if (d == nullptr) return "/tmp";
  TempDirs& t = temp_dirs();
  std::lock_guard<std::mutex> lk(t.mu);
  t.dirs.push_back(d);
  return d;
}

std::string read_addr_file(const std::string& path, int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream f(path);
    std::string line;
    if (f && std::getline(f, line) && !line.empty()) return line;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

synth_tensor_t tensor_of(const std::string& name, int32_t dtype, std::vector<int64_t> shape) {
  synth_tensor_t t;
  std::memset(&t, 0, sizeof t);
  std::snprintf(t.name, sizeof t.name, "%s", name.c_str());
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  uint64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    t.shape[i] = shape[i];
    n *= static_cast<uint64_t>(shape[i]);
  }
  t.nbytes = n * wsync_dtype_size(dtype);
  return t;
}

std::vector<synth_tensor_t> tensor_set(size_t count, uint64_t big_bytes) {
  static const int32_t dtypes[] = {WSYNC_DTYPE_BFLOAT16, WSYNC_DTYPE_FLOAT32, WSYNC_DTYPE_INT8, WSYNC_DTYPE_FLOAT16,
                                   WSYNC_DTYPE_FLOAT8_E4M3, WSYNC_DTYPE_INT64, WSYNC_DTYPE_FLOAT64, WSYNC_DTYPE_BOOL};
  std::vector<synth_tensor_t> out;
  for (size_t i = 0; i < count; ++i) {
    int32_t dt = dtypes[i % 8];
    int64_t rows = 1 + static_cast<int64_t>((i * 37) % 61);
    int64_t cols = 1 + static_cast<int64_t>((i * 101) % 997);
    out.push_back(tensor_of("layers." + std::to_string(i) + ".weight", dt, {rows, cols}));
  }
  out.push_back(tensor_of("empty.bias", WSYNC_DTYPE_FLOAT32, {0}));
  out.push_back(tensor_of("scalar.temperature", WSYNC_DTYPE_FLOAT32, {}));
  if (big_bytes) out.push_back(tensor_of("embed.weight", WSYNC_DTYPE_BFLOAT16, {static_cast<int64_t>(big_bytes / 256), 128}));
  return out;
}

wsync_tensor_t desc_of(const synth_tensor_t& t, void* data) {
  wsync_tensor_t d = WSYNC_TENSOR_INIT;
  d.name = t.name;
  d.dtype = t.dtype;
  d.ndim = t.ndim;
  std::memcpy(d.shape, t.shape, sizeof d.shape);
  d.data = data;
  d.nbytes = t.nbytes;
  return d;
}

wsync_status_t join(const std::string& addr, uint32_t rank, const char* group, int64_t timeout_ms,
                    wsync_receiver_t** out, const std::string& local_address) {
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.rank = rank;
  cfg.store_addr = addr.c_str();
  cfg.group_name = group;
  cfg.timeout_ms = timeout_ms;
  wsync_option_t opt = WSYNC_OPTION("local_address", local_address.c_str());
  if (!local_address.empty()) {
    cfg.options = &opt;
    cfg.num_options = 1;
  }
  return wsync_receiver_init(&cfg, out);
}

void Model::fill(uint64_t version) {
  data.resize(spec.size());
  descs.clear();
  for (size_t i = 0; i < spec.size(); ++i) {
    data[i].resize(spec[i].nbytes);
    if (spec[i].nbytes) synth_fill(&spec[i], version, data[i].data());
    descs.push_back(desc_of(spec[i], spec[i].nbytes ? data[i].data() : nullptr));
  }
}

int run_receiver(const ReceiverPlan& plan) {
  std::string addr = read_addr_file(plan.addr_file, 20000);
  if (addr.empty()) {
    std::fprintf(stderr, "rank %u: no store address\n", plan.rank);
    return 10;
  }
  wsync_receiver_t* rx = nullptr;
  wsync_status_t st = join(addr, plan.rank, plan.group.c_str(), plan.timeout_ms, &rx, plan.local_address);
  if (st != WSYNC_OK) {
    std::fprintf(stderr, "rank %u: init: %s: %s\n", plan.rank, wsync_status_name(st), wsync_last_error());
    return 11;
  }
  std::map<std::string, std::vector<uint8_t>> params;
  if (plan.register_buffers) {
    std::vector<wsync_tensor_t> regs;
    for (const auto& t : plan.spec) {
      auto& b = params[t.name];
      b.assign(t.nbytes, 0xEE);  // poison: every byte must be overwritten
      regs.push_back(desc_of(t, t.nbytes ? b.data() : nullptr));
    }
    if ((st = wsync_receiver_register(rx, regs.data(), regs.size())) != WSYNC_OK) {
      std::fprintf(stderr, "rank %u: register: %s\n", plan.rank, wsync_last_error());
      return 12;
    }
  }
  if (plan.before_first_event) plan.before_first_event();
  std::map<std::string, uint64_t> got;
  uint64_t commits = 0;
  int buckets = 0;
  int rc = 0;
  for (;;) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    st = wsync_receiver_next(rx, &ev, plan.timeout_ms);
    if (st == WSYNC_ERR_ABORTED) {  // the sender gave up on a bucket in flight
      got.clear();
      continue;
    }
    if (st != WSYNC_OK) {
      std::fprintf(stderr, "rank %u: next: %s: %s\n", plan.rank, wsync_status_name(st), wsync_last_error());
      rc = 13;
      break;
    }
    if (ev.kind == WSYNC_EVENT_BUCKET) {
      if (plan.die_after_buckets >= 0 && ++buckets > plan.die_after_buckets) raise(SIGKILL);
      for (uint64_t i = 0; i < ev.num_tensors; ++i) {
        const wsync_tensor_t& t = ev.tensors[i];
        if (got.count(t.name)) {
          std::fprintf(stderr, "rank %u: tensor %s reported twice\n", plan.rank, t.name);
          rc = 14;
        }
        got[t.name] = ev.placed[i] ? 0 : synth_checksum(t.data, t.nbytes);
        if (plan.register_buffers != (ev.placed[i] != 0)) {
          std::fprintf(stderr, "rank %u: tensor %s placed=%d\n", plan.rank, t.name, ev.placed[i]);
          rc = 15;
        }
      }
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      for (const auto& t : plan.spec) {
        auto it = got.find(t.name);
        if (it == got.end()) {
          std::fprintf(stderr, "rank %u: version %llu: tensor %s missing\n", plan.rank,
                       static_cast<unsigned long long>(ev.version), t.name);
          rc = 16;
          continue;
        }
        uint64_t have = plan.register_buffers ? synth_checksum(params[t.name].data(), t.nbytes) : it->second;
        if (have != synth_expected_checksum(&t, ev.version)) {
          std::fprintf(stderr, "rank %u: version %llu: tensor %s differs\n", plan.rank,
                       static_cast<unsigned long long>(ev.version), t.name);
          rc = 17;
        }
      }
      if (got.size() != plan.spec.size()) rc = rc ? rc : 18;
      got.clear();
      if (rc != 0) break;
      if ((st = wsync_receiver_commit(rx, ev.version)) != WSYNC_OK) {
        rc = 19;
        break;
      }
      ++commits;
      if (wsync_receiver_committed_version(rx) != ev.version) rc = 20;
    } else if (ev.kind == WSYNC_EVENT_CLOSED) {
      break;
    } else if (ev.kind == WSYNC_EVENT_ABORTED) {
      got.clear();
    }
  }
  wsync_receiver_destroy(rx);
  if (rc == 0 && commits != plan.versions) {
    std::fprintf(stderr, "rank %u: %llu commits, expected %llu\n", plan.rank, static_cast<unsigned long long>(commits),
                 static_cast<unsigned long long>(plan.versions));
    rc = 21;
  }
  return rc;
}

}  // namespace harness
