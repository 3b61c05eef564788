// wsync-reference-engine — a test double of SGLang, vLLM and LMDeploy servers, for testing
// wsync's HTTP adapters end to end.
//
//   wsync-reference-engine --protocol sglang|vllm|lmdeploy --port P [--engine-version X.Y.Z]
//                          [--gpus N] [--api-key KEY] [--port-file PATH] [...] (see --help)
//
// It serves the chosen release's weight-update routes as strictly as that release does
// (family.h picks the behaviour; sglang_*.cpp, vllm_*.cpp, lmdeploy_*.cpp), and embeds one wsync
// receiver per local rank (receiver_side.cpp): the init route joins the trainer's wsync group
// over the store at master_address:master_port, the receivers copy every arriving tensor into the
// engine's model, and update routes reply once their tensors are in. This file: the HTTP server
// and clean shutdown on SIGTERM/SIGINT (stop serving, destroy the receivers, exit 0).
#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "options.h"
#include "receiver_side.h"
#include "router.h"
#include "wsync.h"

namespace {

bool write_port_file(const std::string& path, int port) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return false;
    f << port << "\n";
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;  // readers never see a partial file
}

void add_routes(refeng::Router& r, refeng::Shared& s) {
  switch (s.fam.protocol) {
    case refeng::Protocol::kSglang:
      refeng::add_sglang_identity_routes(r, s);
      refeng::add_sglang_session_routes(r, s);
      refeng::add_sglang_update_routes(r, s);
      break;
    case refeng::Protocol::kVllm:
      refeng::add_vllm_identity_routes(r, s);
      refeng::add_vllm_generation_routes(r, s);
      refeng::add_vllm_transfer_routes(r, s);
      break;
    case refeng::Protocol::kLmdeploy:
      refeng::add_lmdeploy_identity_routes(r, s);
      refeng::add_lmdeploy_update_routes(r, s);
      break;
  }
  refeng::add_debug_routes(r, s);
}

std::mutex g_exit_mu;
std::condition_variable g_exit_cv;
bool g_exited = false;

}  // namespace

int main(int argc, char** argv) {
  refeng::Options opt;
  int rc = refeng::parse_options(argc, argv, &opt);
  if (rc == 1) return 0;
  if (rc != 0) return rc;

  // SIGTERM/SIGINT are taken by one thread with sigwait; block them before any thread starts so
  // every thread (ours, httplib's and wsync's) inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if ((wsync_abi_version() >> 16) != WSYNC_ABI_VERSION_MAJOR) {
    std::fprintf(stderr, "wsync-reference-engine: libwsync ABI %u.%u, built against %d.%d\n", wsync_abi_version() >> 16,
                 wsync_abi_version() & 0xffff, WSYNC_ABI_VERSION_MAJOR, WSYNC_ABI_VERSION_MINOR);
    return 1;
  }

  refeng::Engine engine(opt.gpus, opt.timeout_ms, opt.register_model);
  refeng::Shared shared(opt, engine);
  refeng::Router router(opt);
  add_routes(router, shared);

  httplib::Server svr;
  // Init and update handlers block (up to --timeout-ms) while the trainer's data flows: give
  // them plenty of threads so /health, /debug and the other ranks' calls still get through.
  svr.new_task_queue = [] { return new httplib::ThreadPool(64); };
  router.install(svr);

  int port = opt.port;
  if (port == 0) {
    port = svr.bind_to_any_port(opt.host);
    if (port <= 0) {
      std::fprintf(stderr, "wsync-reference-engine: cannot bind %s:0\n", opt.host.c_str());
      return 1;
    }
  } else if (!svr.bind_to_port(opt.host, port)) {
    std::fprintf(stderr, "wsync-reference-engine: cannot bind %s:%d\n", opt.host.c_str(), port);
    return 1;
  }
  if (!opt.port_file.empty() && !write_port_file(opt.port_file, port)) {
    std::fprintf(stderr, "wsync-reference-engine: cannot write the port file %s\n", opt.port_file.c_str());
    return 1;
  }

  std::thread([&svr, &engine, &shared, sigs]() {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "wsync-reference-engine: signal %d: shutting down\n", sig);
    engine.shutdown();  // blocked update requests return at once; receivers are destroyed
    {
      std::lock_guard<std::mutex> lk(shared.mu);
      shared.stopping = true;  // queued generation and health checks give up
    }
    shared.cv.notify_all();
    svr.stop();
    // An init request whose receivers are still joining (wsync_receiver_init cannot be
    // interrupted) holds its handler thread up to --timeout-ms, and the server waits for its
    // handlers: exit anyway after a grace period. The receivers were destroyed above.
    std::unique_lock<std::mutex> lk(g_exit_mu);
    if (!g_exit_cv.wait_for(lk, std::chrono::seconds(5), [] { return g_exited; })) {
      std::fprintf(stderr, "wsync-reference-engine: a request still blocks after 5 s (a receiver joining?); exiting\n");
      std::fflush(stdout);
      _exit(0);
    }
  }).detach();

  std::printf("wsync-reference-engine: serving %s %s routes (family %s) on %s:%d with %d local rank(s)\n",
              opt.protocol.c_str(), opt.family.version.c_str(), opt.family.family.c_str(), opt.host.c_str(), port, opt.gpus);
  std::fflush(stdout);
  bool ok = svr.listen_after_bind();
  engine.shutdown();  // stop the receive loops, destroy the receivers
  {
    std::lock_guard<std::mutex> lk(g_exit_mu);
    g_exited = true;
  }
  g_exit_cv.notify_all();
  std::printf("wsync-reference-engine: stopped\n");
  std::fflush(stdout);
  return ok ? 0 : 1;
}
