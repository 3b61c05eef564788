// wsync sample engine (C++): one engine worker that embeds a wsync receiver. It owns a model
// laid out like the trainer's, registers its parameter buffers so bytes land in place, and
// after every update checks each tensor's checksum against what the trainer published for
// that version before it commits.
//
//   wsync-sample-engine --rank 1 (--store HOST:PORT | --store-file PATH) [--views] [--scale 1.0]
//                       [--staged] [--rejoin] [--until-version V] [--until-file PATH] [--tp T]
//
// --rejoin: the receiver option rejoin. A trainer that dies or ends is followed by the next one at
// the same store (the engine keeps serving meanwhile: a failed update, a failed commit or a wait
// is printed, not fatal); the engine ends at a CLOSED once it committed --until-version (default: the first CLOSED)
// and, with --until-file, once that file exists.
// --tp T: one TP-T engine worker, TP rank (rank - 1) % T: it registers only its rows of every
// tensor (torch.chunk over dim 0, as a slice; a tensor without rows whole, by every TP rank), checks
// those bytes, and takes lane (its TP rank), so that relays between replicas pass each shard on
// to the same TP rank of the next replica.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "synthetic_model.h"
#include "wsync.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string read_store_file(const std::string& path, double timeout_s) {
  double until = now_s() + timeout_s;
  while (now_s() < until) {
    std::ifstream f(path);
    std::string addr;
    if (f && std::getline(f, addr) && !addr.empty()) return addr;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

int fail(int rank, const char* what, wsync_status_t st) {
  std::fprintf(stderr, "engine rank %d: %s failed: %s: %s\n", rank, what, wsync_status_name(st), wsync_last_error());
  return 1;
}

// What this engine worker holds of a tensor: bytes [offset, offset + len) of it (all of it, or
// with --tp its rows: row-major, so a contiguous range).
struct Part {
  const synth_tensor_t* t;
  int64_t row0 = 0, rows = 0;  // with --tp: its rows (a slice); rows 0: the whole tensor
  uint64_t offset = 0, len = 0;
  uint64_t expected(uint64_t version) const { return synth_expected_range_checksum(t, version, offset, len); }
};

// The parts of TP rank `tp_rank` of `tp` (rows chunk, torch.chunk rounding), or every tensor whole.
std::vector<Part> parts_of(const std::vector<synth_tensor_t>& spec, int tp, int tp_rank) {
  std::vector<Part> out;
  for (const auto& t : spec) {
    Part p{&t};
    p.len = t.nbytes;
    const int64_t rows = t.ndim > 0 ? t.shape[0] : 0;
    if (tp > 1 && rows > 0) {
      const int64_t chunk = (rows + tp - 1) / tp, b = std::min(rows, chunk * tp_rank), e = std::min(rows, b + chunk);
      if (e == b) continue;  // (none of its rows here)
      const uint64_t row = t.nbytes / static_cast<uint64_t>(rows);
      p.row0 = b;
      p.rows = e - b;
      p.offset = static_cast<uint64_t>(b) * row;
      p.len = static_cast<uint64_t>(e - b) * row;
    }  // (a tensor without rows: every TP rank's, whole, as replicated weights are)
    out.push_back(p);
  }
  return out;
}

// Staged mode: after an update failed, the registered buffers must still hold the committed
// version exactly. Prints the verdict; false when a buffer differs.
bool kept_committed(int rank, const std::vector<Part>& spec, std::map<std::string, std::vector<uint8_t>>& params,
                    uint64_t version) {
  if (version == 0) return true;
  size_t differ = 0;
  for (const auto& p : spec)
    if (synth_checksum(params[p.t->name].data(), p.len) != p.expected(version)) ++differ;
  std::printf("engine rank %d: staged: %s\n", rank,
              differ == 0 ? ("every buffer still holds version " + std::to_string(version) + " bit for bit").c_str()
                          : (std::to_string(differ) + " buffers no longer hold version " + std::to_string(version)).c_str());
  std::fflush(stdout);
  return differ == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = 1, tp = 1;
  std::string store, store_file, until_file;
  bool views = false, staged = false, rejoin = false;
  double scale = 1.0;
  uint64_t until_version = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--views") { views = true; continue; }
    if (a == "--staged") { staged = true; continue; }  // receive_mode=staged (registered buffers)
    if (a == "--rejoin") { rejoin = true; continue; }  // receiver option rejoin
    if (i + 1 >= argc) { std::fprintf(stderr, "engine: %s needs a value\n", a.c_str()); return 2; }
    std::string v = argv[++i];
    if (a == "--rank") rank = std::atoi(v.c_str());
    else if (a == "--store") store = v;
    else if (a == "--store-file") store_file = v;
    else if (a == "--scale") scale = std::atof(v.c_str());
    else if (a == "--until-version") until_version = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--until-file") until_file = v;
    else if (a == "--tp") tp = std::atoi(v.c_str());
    else { std::fprintf(stderr, "engine: unknown flag %s\n", a.c_str()); return 2; }
  }
  if (store.empty() && !store_file.empty()) store = read_store_file(store_file, 60);
  if (store.empty()) { std::fprintf(stderr, "engine rank %d: no store address (--store or --store-file)\n", rank); return 2; }
  if (tp < 1 || tp > 64 || (tp > 1 && views)) {
    std::fprintf(stderr, "engine: --tp takes 1..64, and a TP shard needs registered buffers (not --views)\n");
    return 2;
  }

  std::vector<synth_tensor_t> model(1024);
  model.resize(synth_model_spec(scale, model.data(), model.size()));
  const std::vector<Part> spec = parts_of(model, tp, (rank - 1) % tp);
  const std::string lane = std::to_string((rank - 1) % tp);

  wsync_receiver_config_t cfg = WSYNC_RECEIVER_CONFIG_INIT;
  cfg.rank = static_cast<uint32_t>(rank);
  cfg.store_addr = store.c_str();
  cfg.group_name = "demo";
  cfg.timeout_ms = 60000;
  std::vector<wsync_option_t> opts;
  if (staged && !views) opts.push_back(WSYNC_OPTION("receive_mode", "staged"));
  if (rejoin) opts.push_back(WSYNC_OPTION("rejoin", "1"));
  if (tp > 1) opts.push_back(WSYNC_OPTION("lane", lane.c_str()));
  cfg.options = opts.empty() ? nullptr : opts.data();
  cfg.num_options = opts.size();
  wsync_receiver_t* rx = nullptr;
  wsync_status_t st = wsync_receiver_init(&cfg, &rx);
  if (st != WSYNC_OK) return fail(rank, "wsync_receiver_init", st);

  // The engine's parameters: registered, so the transport writes straight into them.
  std::map<std::string, std::vector<uint8_t>> params;
  if (!views) {
    std::vector<wsync_tensor_t> regs;
    for (const auto& p : spec) {
      const synth_tensor_t& t = *p.t;
      auto& buf = params[t.name];
      buf.resize(p.len);
      wsync_tensor_t d = WSYNC_TENSOR_INIT;
      d.name = t.name;
      d.dtype = t.dtype;
      d.ndim = t.ndim;
      std::memcpy(d.shape, t.shape, sizeof d.shape);
      d.data = buf.data();
      d.nbytes = p.len;
      if (p.rows > 0) {  // its TP shard: a box of the full tensor
        d.flags = WSYNC_TENSOR_SLICE;
        std::memcpy(d.full_shape, t.shape, sizeof d.full_shape);
        d.box_offset[0] = p.row0;
        d.shape[0] = p.rows;
      }
      regs.push_back(d);
    }
    st = wsync_receiver_register(rx, regs.data(), regs.size());
    if (st != WSYNC_OK) return fail(rank, "wsync_receiver_register", st);
  }
  std::printf("engine rank %d: joined group 'demo' at %s (%s%s)\n", rank, store.c_str(),
              views ? "views" : staged ? "staged, into registered parameters at commit" : "in-place into registered parameters",
              tp > 1 ? (", TP rank " + lane + " of " + std::to_string(tp) + ", lane " + lane).c_str() : "");
  std::fflush(stdout);

  std::map<std::string, uint64_t> got;  // name -> checksum of the bytes received this update
  uint64_t bytes = 0;
  double t0 = 0;
  // With --rejoin an update lost (`what` failed: the trainer died, or a sender died before a commit
  // could tell it, docs/ABI.md "A trainer that restarts") is not the engine's end: keep serving the
  // version before and take the next trainer's. 0: go on; else the exit code.
  const auto keep_serving = [&](const std::string& what, wsync_status_t st, const std::string& why) {
    std::printf("engine rank %d: %s failed (%s); keeping version %llu: %s\n", rank, what.c_str(),
                wsync_status_name(st), static_cast<unsigned long long>(wsync_receiver_committed_version(rx)),
                why.c_str());
    std::fflush(stdout);
    got.clear();
    bytes = 0;
    if (staged && !views && !kept_committed(rank, spec, params, wsync_receiver_committed_version(rx))) {
      wsync_receiver_destroy(rx);
      return 3;
    }
    return 0;
  };
  const auto commit_failed = [&](uint64_t version, wsync_status_t st) {
    const std::string why = wsync_last_error();  // (the next call clears it)
    wsync_receiver_state_t state = WSYNC_RECEIVER_STATE_INIT;
    if (!rejoin || wsync_receiver_get_state(rx, &state) != WSYNC_OK || state.pending_version != 0) {
      // (still pending: the receiver is stuck)
      std::fprintf(stderr, "engine rank %d: wsync_receiver_commit failed: %s: %s\n", rank, wsync_status_name(st),
                   why.c_str());
      wsync_receiver_destroy(rx);
      return 1;
    }
    return keep_serving("the commit of version " + std::to_string(version), st, why);
  };
  for (;;) {
    wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
    st = wsync_receiver_next(rx, &ev, rejoin ? 5000 : 120000);
    if (st == WSYNC_ERR_TIMEOUT && rejoin) continue;  // (a wait, not a failure: an update may go on)
    if (st != WSYNC_OK && rejoin) {  // the trainer is gone (or not back yet): keep serving
      if (const int rc = keep_serving("an update", st, wsync_last_error())) return rc;
      continue;
    }
    if (st != WSYNC_OK) {
      int rc = fail(rank, "wsync_receiver_next", st);
      if (staged && !views && !kept_committed(rank, spec, params, wsync_receiver_committed_version(rx))) rc = 3;
      wsync_receiver_destroy(rx);
      return rc;
    }
    if (ev.kind == WSYNC_EVENT_BUCKET) {
      if (got.empty() && bytes == 0) t0 = now_s();
      bytes += ev.bytes;
      for (uint64_t i = 0; i < ev.num_tensors; ++i) {
        const wsync_tensor_t& t = ev.tensors[i];
        if (t.device_type == WSYNC_DEVICE_CUDA) {  // a GPU transport: see tests/gpu for checks on the device
          std::fprintf(stderr, "engine rank %u: tensor '%s' arrived in CUDA memory; this sample checks host memory "
                       "only (use the ucx transport)\n", rank, t.name);
          wsync_receiver_destroy(rx);
          return 1;
        }
        // Placed tensors are checked at commit, in the engine's own buffers; views now, before
        // the next call releases them.
        got[t.name] = ev.placed[i] ? 0 : synth_checksum(t.data, t.nbytes);
      }
    } else if (ev.kind == WSYNC_EVENT_COMMIT) {
      // (a COMMIT with no bucket before it: an elastic group's catch-up, copied from a peer into
      // the registered buffers)
      const bool caught_up = got.empty() && bytes == 0;
      double dt = caught_up ? 0 : now_s() - t0;
      size_t bad = 0, missing = 0;
      // Staged: the registered buffers get the update at the commit; check them after it.
      if (staged && !views && (st = wsync_receiver_commit(rx, ev.version)) != WSYNC_OK) {
        if (const int rc = commit_failed(ev.version, st)) return rc;
        continue;
      }
      for (const auto& p : spec) {
        const char* name = p.t->name;
        auto it = got.find(name);
        if (it == got.end() && (views || !caught_up)) { ++missing; continue; }
        if (!views && caught_up) got[name] = 0;
        uint64_t have = views ? it->second : synth_checksum(params[name].data(), p.len);
        if (have != p.expected(ev.version)) {
          if (bad++ < 3) std::fprintf(stderr, "engine rank %d: tensor '%s' differs from version %llu\n", rank, name,
                                      static_cast<unsigned long long>(ev.version));
        }
      }
      bool ok = bad == 0 && missing == 0 && got.size() == spec.size();
      uint64_t tensor_bytes = 0;
      for (const auto& p : spec) tensor_bytes += p.len;
      // (t=: the wall clock, which every host of an emulated cluster shares: a soak reads when each
      // engine first held a version)
      std::printf("engine rank %d: version %llu: %zu tensors%s, %.2f GB in %.2f s (%.2f GB/s) t=%.3f %s\n", rank,
                  static_cast<unsigned long long>(ev.version), got.size(), caught_up ? " (caught up from a peer)" : "",
                  tensor_bytes / 1e9, dt,
                  dt > 0 ? tensor_bytes / 1e9 / dt : 0.0, wall_s(), ok ? "verified" : "CHECKSUM MISMATCH");
      std::fflush(stdout);
      if (!ok) {
        std::fprintf(stderr, "engine rank %d: %zu tensors differ, %zu missing; not committing\n", rank, bad, missing);
        wsync_receiver_destroy(rx);
        return 1;
      }
      if (!(staged && !views) && (st = wsync_receiver_commit(rx, ev.version)) != WSYNC_OK) {
        if (const int rc = commit_failed(ev.version, st)) return rc;
        continue;
      }
      got.clear();
      bytes = 0;
    } else if (ev.kind == WSYNC_EVENT_ABORTED) {
      std::printf("engine rank %d: the trainer aborted an update; keeping version %llu\n", rank,
                  static_cast<unsigned long long>(wsync_receiver_committed_version(rx)));
      std::fflush(stdout);
      got.clear();
      bytes = 0;  // (a catch-up's COMMIT may come next: no bucket of this update counts then)
      if (staged && !views && !kept_committed(rank, spec, params, wsync_receiver_committed_version(rx))) {
        wsync_receiver_destroy(rx);
        return 3;
      }
    } else if (ev.kind == WSYNC_EVENT_CLOSED) {
      std::printf("engine rank %d: trainer closed the group at version %llu\n", rank,
                  static_cast<unsigned long long>(wsync_receiver_committed_version(rx)));
      std::fflush(stdout);
      if (rejoin && (wsync_receiver_committed_version(rx) < until_version ||
                     (!until_file.empty() && access(until_file.c_str(), F_OK) != 0)))
        continue;  // the next trainer
      break;
    }
  }
  wsync_receiver_destroy(rx);
  return 0;
}
