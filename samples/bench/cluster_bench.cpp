// wsync-cluster-bench: one side of a whole-update benchmark across hosts (scripts/cluster-bench.sh
// runs it on an emulated cluster, docs/CLUSTER.md). The sender hosts the store and publishes
// --iters versions of a model of --mib MiB (uint8 tensors of --tensor-mib MiB each) to
// --receivers receivers, each of which registered one buffer per tensor (the bytes land in place)
// and commits every version. Uses only include/wsync.h.
//
//   wsync-cluster-bench --role sender --receivers N --store HOST:PORT [--mib 256] [--tensor-mib 32]
//                       [--iters 3] [--warmup 1] [--batches 1] [--timeout-ms 120000]
//                       [--option key=value ...] [--transport auto|tcp|ucx]
//   wsync-cluster-bench --role receiver --rank R --store HOST:PORT [--mib 256] [--tensor-mib 32]
//                       [--timeout-ms 120000]
//
// Many senders (scripts/senders-bench.sh): --senders M --sender-rank K on each of M senders, the
// others than 0 with --sender0-store HOST:PORT (sender 0's --store). Sender K publishes its
// torch.chunk of every tensor (a slice; WSYNC_TENSOR_SLICE) and hosts its own store at --store;
// receivers give sender 0's store and take the full tensors, or with --tp T (T > 1) their TP
// shard only: receiver R registers torch.chunk (R - 1) % T of every tensor as a slice, and says
// lane (R - 1) % T (its TP rank: with relays, each sender's shard goes down its own lane).
//
// An iteration is --batches send_batch calls (the tensors in that many groups, in order, as a
// trainer publishes layer by layer) plus finalize: every manifest, READY, ACK and commit round trip
// is inside it. The sender ends with one line for scripts:
//   cluster-bench: receivers=N mib=M iters=K batches=B median_s=S min_s=S max_s=S cpu_s=C
// and each receiver with "cluster-bench: rank=R versions=V cpu_s=C" (cpu_s: the process's user +
// system CPU seconds, every thread, from start to end). Every member needs the group secret
// (WSYNC_GROUP_SECRET or WSYNC_GROUP_SECRET_FILE; the script makes one). Exit: 0, 1 on a failed
// update (wsync's message on stderr), 2 on a bad command line.
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wsync.h"

namespace {

const char kUsage[] =
    "usage: wsync-cluster-bench --role sender --receivers N --store HOST:PORT [--mib 256] [--tensor-mib 32]\n"
    "                           [--iters 3] [--warmup 1] [--batches 1] [--timeout-ms 120000] [--option key=value ...]\n"
    "                           [--transport auto|tcp|ucx]   (the sender's; receivers take what it announces)\n"
    "       wsync-cluster-bench --role receiver --rank R --store HOST:PORT [--mib 256] [--tensor-mib 32]\n"
    "                           [--timeout-ms 120000]\n"
    "       many senders: --senders M --sender-rank K [--sender0-store HOST:PORT] on each sender,\n"
    "                     [--tp T] on each receiver (its TP shard only)\n"
    "One side of a whole-update benchmark across hosts; scripts/cluster-bench.sh runs both on an emulated\n"
    "cluster (docs/CLUSTER.md). The sender hosts the store at HOST:PORT (an address of its host). Every member\n"
    "needs the group secret in WSYNC_GROUP_SECRET or WSYNC_GROUP_SECRET_FILE.\n";

const char kGroup[] = "cluster-bench";

struct Options {
  std::string role, store, sender0_store, transport;
  uint64_t receivers = 0, rank = 0, mib = 256, tensor_mib = 32, iters = 3, warmup = 1, timeout_ms = 120000;
  uint64_t batches = 1;  // send_batch calls per version (the tensors split in that many groups)
  uint64_t senders = 1, sender_rank = 0, tp = 1;
  bool senders_given = false;  // --senders on the command line: the senders plan (also one)
  std::vector<std::pair<std::string, std::string>> options;  // --option key=value, in order
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int usage_error(const std::string& what) {
  std::fprintf(stderr, "wsync-cluster-bench: %s\n%s", what.c_str(), kUsage);
  return 2;
}

// A whole number in [min, max] from a flag's value, or false.
bool whole_number(const std::string& v, uint64_t min, uint64_t max, uint64_t* out) {
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || n < min || n > max) return false;
  *out = n;
  return true;
}

// One flag and its value into *o; an empty string, or what is wrong with them.
std::string take_flag(const std::string& a, const std::string& v, Options* o) {
  struct Number {
    const char* flag;
    uint64_t* field;
    uint64_t min, max;
  } const numbers[] = {{"--receivers", &o->receivers, 1, 4096}, {"--rank", &o->rank, 1, 4096},
                       {"--mib", &o->mib, 1, 1 << 20},          {"--tensor-mib", &o->tensor_mib, 1, 1 << 20},
                       {"--iters", &o->iters, 1, 1000},        {"--warmup", &o->warmup, 0, 100},
                       {"--timeout-ms", &o->timeout_ms, 1, 24ull * 3600 * 1000},
                       {"--senders", &o->senders, 1, 4096}, {"--sender-rank", &o->sender_rank, 0, 4095},
                       {"--tp", &o->tp, 1, 64}, {"--batches", &o->batches, 1, 4096}};
  for (const Number& n : numbers) {
    if (a != n.flag) continue;
    if (a == "--senders") o->senders_given = true;
    if (whole_number(v, n.min, n.max, n.field)) return "";
    return a + " takes a whole number " + std::to_string(n.min) + ".." + std::to_string(n.max) + ", not '" + v + "'";
  }
  if (a == "--role") {
    o->role = v;
    return v == "sender" || v == "receiver" ? "" : "--role takes sender or receiver, not '" + v + "'";
  }
  if (a == "--store") {
    o->store = v;
    return "";
  }
  if (a == "--transport") {
    o->transport = v;
    return "";
  }
  if (a == "--sender0-store") {
    o->sender0_store = v;
    return "";
  }
  if (a == "--option") {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) return "--option takes key=value, not '" + v + "'";
    o->options.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    return "";
  }
  return "unknown flag " + a;
}

// -1: run with *o; otherwise the exit status (0 after --help, 2 for a bad command line).
int parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.rfind("--", 0) != 0) return usage_error("unexpected argument '" + a + "'");
    if (i + 1 >= argc) return usage_error(a + " needs a value");
    const std::string why = take_flag(a, argv[i + 1], o);
    if (!why.empty()) return usage_error(why);
  }
  if (o->role.empty()) return usage_error("--role sender or --role receiver is required");
  if (o->store.empty()) return usage_error("--store HOST:PORT is required");
  if (o->role == "sender" && o->receivers == 0) return usage_error("the sender needs --receivers N");
  if (o->role == "receiver" && o->rank == 0) return usage_error("a receiver needs --rank R (1..N)");
  if (o->role == "receiver" && !o->options.empty()) return usage_error("--option is the sender's (group options)");
  if (o->tensor_mib > o->mib) o->tensor_mib = o->mib;
  if (o->sender_rank >= o->senders) return usage_error("--sender-rank must be below --senders");
  if ((o->sender_rank > 0) != !o->sender0_store.empty())
    return usage_error("senders 1..M-1, and only they, need --sender0-store HOST:PORT");
  return -1;
}

// The model: tensors of tensor_mib MiB (the last one may be smaller), mib MiB in all.
// Sender K of M holds chunk K of each (torch.chunk rounding) and describes it as a slice; so does
// a receiver of a TP shard (chunk R of T) when it registers.
struct Model {
  std::vector<std::string> names;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<int64_t> full, offset;  // per tensor: its full length and where this chunk starts
  bool slices = false;

  Model(uint64_t mib, uint64_t tensor_mib, uint64_t senders = 1, uint64_t rank = 0) : slices(senders > 1) {
    for (uint64_t off = 0; off < mib; off += tensor_mib) {
      names.push_back("layers." + std::to_string(names.size()) + ".weight");
      const int64_t n = static_cast<int64_t>(std::min(tensor_mib, mib - off) << 20);
      const int64_t size = (n + static_cast<int64_t>(senders) - 1) / static_cast<int64_t>(senders);
      const int64_t b = std::min<int64_t>(n, size * static_cast<int64_t>(rank)), e = std::min<int64_t>(n, b + size);
      full.push_back(n);
      offset.push_back(b);
      bytes.emplace_back(static_cast<size_t>(e - b));
    }
  }
  // Descriptors of every tensor (they point into this model).
  std::vector<wsync_tensor_t> tensors() {
    std::vector<wsync_tensor_t> out;
    for (size_t i = 0; i < names.size(); ++i) {
      wsync_tensor_t t = WSYNC_TENSOR_INIT;
      t.name = names[i].c_str();
      t.dtype = WSYNC_DTYPE_UINT8;
      t.ndim = 1;
      t.shape[0] = static_cast<int64_t>(bytes[i].size());
      t.data = bytes[i].data();
      t.nbytes = bytes[i].size();
      if (slices) {
        t.flags = WSYNC_TENSOR_SLICE;
        t.full_shape[0] = full[i];
        t.box_offset[0] = offset[i];
      }
      out.push_back(t);
    }
    return out;
  }
  // New contents for version v (every page written, so none is the shared zero page).
  void fill(uint64_t v) {
    for (auto& b : bytes)
      for (size_t i = 0; i < b.size(); i += 512) b[i] = static_cast<uint8_t>(v * 131 + i / 512);
  }
};

int wsync_failed(const char* role, const char* what) {
  std::fprintf(stderr, "wsync-cluster-bench %s: %s failed: %s\n", role, what, wsync_last_error());
  return 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One whole update: every tensor in `batches` send_batch calls (as even as the tensors allow, in
// order), then finalize as `version`. Seconds, or < 0 on failure.
double timed_update(wsync_group_t* g, std::vector<wsync_tensor_t>& tensors, uint64_t batches, uint64_t version) {
  const double t0 = now_s();
  const size_t n = tensors.size();
  const size_t b = static_cast<size_t>(std::min<uint64_t>(batches, n));
  for (size_t k = 0, from = 0; k < b; ++k) {
    const size_t to = n * (k + 1) / b;
    if (wsync_group_send_batch(g, tensors.data() + from, to - from, -1) != WSYNC_OK) return -1;
    from = to;
  }
  if (wsync_group_finalize(g, version, -1) != WSYNC_OK) return -1;
  return now_s() - t0;
}

int run_sender(const Options& o) {
  Model model(o.mib, o.tensor_mib, o.senders, o.sender_rank);
  std::vector<wsync_tensor_t> tensors = model.tensors();
  const std::string timeout = std::to_string(o.timeout_ms), m = std::to_string(o.senders),
                    k = std::to_string(o.sender_rank);
  std::vector<wsync_option_t> opts = {WSYNC_OPTION("timeout_ms", timeout.c_str())};
  if (o.senders_given) {  // (one sender too: it then sends TP receivers their shard only)
    opts.push_back(WSYNC_OPTION("num_senders", m.c_str()));
    opts.push_back(WSYNC_OPTION("sender_rank", k.c_str()));
  }
  if (!o.sender0_store.empty()) opts.push_back(WSYNC_OPTION("sender0_store", o.sender0_store.c_str()));
  for (const auto& kv : o.options) opts.push_back(WSYNC_OPTION(kv.first.c_str(), kv.second.c_str()));
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = static_cast<uint32_t>(o.receivers);
  cfg.group_name = kGroup;
  cfg.store_addr = o.store.c_str();
  cfg.transport = o.transport.empty() ? nullptr : o.transport.c_str();
  cfg.options = opts.data();
  cfg.num_options = opts.size();
  cfg.timeout_ms = static_cast<int64_t>(o.timeout_ms);
  wsync_group_t* g = nullptr;
  if (wsync_group_init(&cfg, &g) != WSYNC_OK) return wsync_failed("sender", "wsync_group_init");
  std::vector<double> secs;
  for (uint64_t v = 1; v <= o.warmup + o.iters; ++v) {
    model.fill(v);
    const double s = timed_update(g, tensors, o.batches, v);
    if (s < 0) {
      const int rc = wsync_failed("sender", "update");
      wsync_group_destroy(g);
      return rc;
    }
    if (v > o.warmup) secs.push_back(s);
  }
  wsync_group_destroy(g);
  std::printf("cluster-bench: receivers=%llu mib=%llu iters=%llu batches=%llu median_s=%.3f min_s=%.3f max_s=%.3f "
              "cpu_s=%.2f\n", static_cast<unsigned long long>(o.receivers), static_cast<unsigned long long>(o.mib),
              static_cast<unsigned long long>(o.iters),
              static_cast<unsigned long long>(std::min<uint64_t>(o.batches, tensors.size())), median(secs), *std::min_element(secs.begin(), secs.end()),
              *std::max_element(secs.begin(), secs.end()), cpu_seconds());
  return 0;
}

// Commits every version until the sender closes the group; the number committed, or -1.
int64_t receive_versions(wsync_receiver_t* rx, int64_t timeout_ms) {
  int64_t versions = 0;
  for (;;) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    if (wsync_receiver_next(rx, &ev, timeout_ms) != WSYNC_OK) return -1;
    if (ev.kind == WSYNC_EVENT_CLOSED) return versions;
    if (ev.kind != WSYNC_EVENT_COMMIT) continue;
    if (wsync_receiver_commit(rx, ev.version) != WSYNC_OK) return -1;
    ++versions;
  }
}

int run_receiver(const Options& o) {
  Model model(o.mib, o.tensor_mib, o.tp, (o.rank - 1) % o.tp);  // --tp: its shard, a slice
  model.fill(0);  // the buffers exist in memory before the first update, as an engine's would
  std::vector<wsync_tensor_t> tensors = model.tensors();
  // The receiver's own waits (a bucket, a sender that does not finalize) use the same timeout.
  const std::string timeout = std::to_string(o.timeout_ms), lane = std::to_string((o.rank - 1) % o.tp);
  // Its lane is its TP rank: relays between replicas pass each shard on to the same TP rank.
  wsync_option_t opts[] = {WSYNC_OPTION("timeout_ms", timeout.c_str()), WSYNC_OPTION("lane", lane.c_str())};
  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.options = opts;
  cfg.num_options = 2;
  cfg.rank = static_cast<uint32_t>(o.rank);
  cfg.store_addr = o.store.c_str();
  cfg.group_name = kGroup;
  cfg.timeout_ms = static_cast<int64_t>(o.timeout_ms);
  wsync_receiver_t* rx = nullptr;
  if (wsync_receiver_init(&cfg, &rx) != WSYNC_OK) return wsync_failed("receiver", "wsync_receiver_init");
  if (wsync_receiver_register(rx, tensors.data(), tensors.size()) != WSYNC_OK) {
    const int rc = wsync_failed("receiver", "wsync_receiver_register");
    wsync_receiver_destroy(rx);
    return rc;
  }
  // Each event is awaited a little longer than the group's own timeouts, which name the cause.
  const int64_t versions = receive_versions(rx, static_cast<int64_t>(o.timeout_ms) + 5000);
  const int rc = versions < 0 ? wsync_failed("receiver", "an update") : 0;
  wsync_receiver_destroy(rx);
  if (rc == 0)
    std::printf("cluster-bench: rank=%llu versions=%lld cpu_s=%.2f\n", static_cast<unsigned long long>(o.rank),
                static_cast<long long>(versions), cpu_seconds());
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const int done = parse_options(argc, argv, &o);
  if (done >= 0) return done;
  return o.role == "sender" ? run_sender(o) : run_receiver(o);
}
