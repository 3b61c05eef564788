// options.cpp — parses and checks the flags of wsync-reference-engine (see usage()).
#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace refeng {
namespace {

void usage(FILE* f) {
  std::fprintf(f,
      "usage: wsync-reference-engine --protocol sglang|vllm|lmdeploy --port P [--engine-version X.Y.Z]\n"
      "                              [--host 127.0.0.1] [--gpus N] [--api-key KEY] [--port-file PATH]\n"
      "                              [--timeout-ms 60000] [--tp-size N] [--pp-size N] [--dp-size N]\n"
      "                              [--world-size N] [--lmdeploy-executor ray|uni] [--flush-busy N]\n"
      "                              [--lmdeploy-backend pytorch|turbomind]\n"
      "                              [--fail-update MESSAGE [--fail-updates N]] [--vllm-group NAME]\n"
      "                              [--enable-abort-handling] [--register-model]\n"
      "\n"
      "A test double of an SGLang, vLLM or LMDeploy server: it serves the weight-update routes of\n"
      "the chosen release (--engine-version) as strictly as that release does, and joins the\n"
      "trainer's wsync group with one embedded receiver per local rank (--gpus).\n"
      "\n"
      "  --engine-version V       sglang 0.5.5-0.5.23 (default 0.5.23), vllm 0.28-0.33 (default\n"
      "                           0.33.0), lmdeploy 0.13-0.18 (default 0.18.0)\n"
      "  --port 0                 bind any free port; --port-file PATH receives it once listening\n"
      "  --timeout-ms MS          receiver join timeout and how long an update waits for its data\n"
      "  --tp-size/--pp-size/--dp-size N   what sglang's server info (and lmdeploy's engine_info\n"
      "                           tp_size) report; tp defaults to --gpus\n"
      "  --world-size N           what vllm's /get_world_size reports (default --gpus)\n"
      "  --lmdeploy-executor E    ray (default) or uni: uni answers the weight routes 500, as\n"
      "                           LMDeploy's uni/mp executors do\n"
      "  --lmdeploy-backend B     pytorch (default) or turbomind: the weight routes validate the\n"
      "                           body, then answer 501 naming the backend, as LMDeploy does\n"
      "  --flush-busy N           the first N /flush_cache calls find the scheduler busy (sglang)\n"
      "  --fail-update MESSAGE    every update request fails with MESSAGE (--fail-updates N: only\n"
      "                           the first N do, then the engine works again)\n"
      "  --vllm-group NAME        wsync group name joined by vLLM's init (default weight_update_group)\n"
      "  --wsync-refuse NAME      --vllm-backend wsync: the engine's check of a declared update refuses\n"
      "                           tensor NAME (as a shape the served model does not have)\n"
      "  --vllm-backend B         nccl (default) or wsync: vLLM's weight-transfer backend, which\n"
      "                           sets init_info's fields (wsync: store_addr, group_name, rank_offset,\n"
      "                           world_size, as the wsync package's backend takes them)\n"
      "  --enable-abort-handling  lmdeploy: /abort_request answers instead of 501\n"
      "  --register-model         each receiver registers the model tensors its worker holds (at\n"
      "                           its first event, and new ones after each commit): they are\n"
      "                           written in place, and a peer that joins later catches up from them\n"
      "Debug routes (not part of any engine): GET /debug/tensors, GET|DELETE /debug/requests,\n"
      "GET /debug/state, POST /debug/kill_receiver?rank=R,\n"
      "POST /debug/fail_updates?count=N&message=M.\n");
}

bool to_int(const std::string& s, long long lo, long long hi, long long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// One flag with its value; returns 0 when taken, 2 on a bad value or an unknown flag.
int take(Options* o, const std::string& a, const std::string& v) {
  long long n = 0;
  auto bad = [&]() { std::fprintf(stderr, "wsync-reference-engine: bad value for %s: '%s'\n", a.c_str(), v.c_str()); return 2; };
  auto num = [&](long long lo, long long hi, int* dst) { if (!to_int(v, lo, hi, &n)) return bad(); *dst = (int)n; return 0; };
  if (a == "--protocol") o->protocol = v;
  else if (a == "--engine-version") o->engine_version = v;
  else if (a == "--host") o->host = v;
  else if (a == "--port") return num(0, 65535, &o->port);
  else if (a == "--gpus") return num(1, 64, &o->gpus);
  else if (a == "--api-key") o->api_key = v;
  else if (a == "--port-file") o->port_file = v;
  else if (a == "--timeout-ms") { if (!to_int(v, 1, 3600000, &n)) return bad(); o->timeout_ms = n; }
  else if (a == "--tp-size") return num(1, 1024, &o->tp_size);
  else if (a == "--pp-size") return num(1, 1024, &o->pp_size);
  else if (a == "--dp-size") return num(1, 1024, &o->dp_size);
  else if (a == "--world-size") return num(1, 65536, &o->world_size);
  else if (a == "--lmdeploy-executor") { if (v != "ray" && v != "uni") return bad(); o->lmdeploy_executor = v; }
  else if (a == "--lmdeploy-backend") { if (v != "pytorch" && v != "turbomind") return bad(); o->lmdeploy_backend = v; }
  else if (a == "--flush-busy") return num(0, 1000000, &o->flush_busy);
  else if (a == "--fail-update") { o->fail_update = true; o->fail_update_message = v; }
  else if (a == "--fail-updates") return num(0, 1000000, &o->fail_update_count);
  else if (a == "--vllm-group") { if (v.empty()) return bad(); o->vllm_group = v; }
  else if (a == "--vllm-backend") { if (v != "nccl" && v != "wsync") return bad(); o->vllm_backend = v; }
  else if (a == "--wsync-refuse") { if (v.empty()) return bad(); o->wsync_refuse = v; }
  else {
    std::fprintf(stderr, "wsync-reference-engine: unknown flag %s (see --help)\n", a.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") { usage(stdout); return 1; }
    if (a == "--enable-abort-handling") { o->enable_abort_handling = true; continue; }
    if (a == "--register-model") { o->register_model = true; continue; }
    if (i + 1 >= argc) { std::fprintf(stderr, "wsync-reference-engine: %s needs a value\n", a.c_str()); return 2; }
    if (int rc = take(o, a, argv[++i])) return rc;
  }
  if (o->protocol != "sglang" && o->protocol != "vllm" && o->protocol != "lmdeploy") {
    std::fprintf(stderr, "wsync-reference-engine: --protocol must be sglang, vllm or lmdeploy\n");
    return 2;
  }
  if (o->engine_version.empty()) o->engine_version = default_version(o->protocol);
  std::string why;
  if (!make_family(o->protocol, o->engine_version, &o->family, &why)) {
    std::fprintf(stderr, "wsync-reference-engine: %s\n", why.c_str());
    return 2;
  }
  if (o->tp_size == 0) o->tp_size = o->gpus;
  if (o->world_size == 0) o->world_size = o->gpus;
  if (o->port < 0) {
    std::fprintf(stderr, "wsync-reference-engine: --port is required (0 picks a free port)\n");
    return 2;
  }
  return 0;
}

}  // namespace refeng
