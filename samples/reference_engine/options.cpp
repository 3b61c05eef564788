// options.cpp — parses and checks the flags of wsync-reference-engine (see usage()).
#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace refeng {
namespace {

void usage(FILE* f) {
  std::fprintf(f,
      "usage: wsync-reference-engine --protocol sglang|vllm|lmdeploy --port P [--host 127.0.0.1]\n"
      "                              [--gpus N] [--api-key KEY] [--port-file PATH] [--timeout-ms 60000]\n"
      "                              [--flush-busy N] [--fail-update MESSAGE] [--vllm-group NAME]\n"
      "                              [--vllm-api-version 1|2|3] [--vllm-error-status 400|500]\n"
      "                              [--enable-abort-handling]\n"
      "\n"
      "An engine process for testing wsync's HTTP adapters: it serves the weight-update routes of\n"
      "the chosen engine with that engine's request schemas and replies, and joins the trainer's\n"
      "wsync group with one embedded receiver per local rank (--gpus) when the init route is called.\n"
      "\n"
      "  --port 0                 bind any free port; --port-file PATH receives it once listening\n"
      "  --timeout-ms MS          receiver join timeout and how long an update waits for its data\n"
      "  --flush-busy N           the first N /flush_cache calls answer 400 \"Flush cache failed.\" (sglang)\n"
      "  --fail-update MESSAGE    every update request fails with MESSAGE\n"
      "  --vllm-group NAME        wsync group name joined by vLLM's init (default weight_update_group)\n"
      "  --vllm-api-version N     vLLM generation of init_info/update_info keys: 1, 2 or 3 (default, newest)\n"
      "  --vllm-error-status S    status of vLLM worker-side errors: 400 (default) or 500\n"
      "  --enable-abort-handling  lmdeploy: /abort_request answers instead of 501\n"
      "Debug routes (not part of any engine): GET /debug/tensors, GET|DELETE /debug/requests.\n");
}

bool to_int(const std::string& s, long long lo, long long hi, long long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

int parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") { usage(stdout); return 1; }
    if (a == "--enable-abort-handling") { o->enable_abort_handling = true; continue; }
    if (i + 1 >= argc) { std::fprintf(stderr, "wsync-reference-engine: %s needs a value\n", a.c_str()); return 2; }
    std::string v = argv[++i];
    long long n = 0;
    auto bad = [&]() { std::fprintf(stderr, "wsync-reference-engine: bad value for %s: '%s'\n", a.c_str(), v.c_str()); return 2; };
    if (a == "--protocol") o->protocol = v;
    else if (a == "--host") o->host = v;
    else if (a == "--port") { if (!to_int(v, 0, 65535, &n)) return bad(); o->port = (int)n; }
    else if (a == "--gpus") { if (!to_int(v, 1, 64, &n)) return bad(); o->gpus = (int)n; }
    else if (a == "--api-key") o->api_key = v;
    else if (a == "--port-file") o->port_file = v;
    else if (a == "--timeout-ms") { if (!to_int(v, 1, 3600000, &n)) return bad(); o->timeout_ms = n; }
    else if (a == "--flush-busy") { if (!to_int(v, 0, 1000000, &n)) return bad(); o->flush_busy = (int)n; }
    else if (a == "--fail-update") { o->fail_update = true; o->fail_update_message = v; }
    else if (a == "--vllm-group") { if (v.empty()) return bad(); o->vllm_group = v; }
    else if (a == "--vllm-api-version") { if (!to_int(v, 1, 3, &n)) return bad(); o->vllm_api_version = (int)n; }
    else if (a == "--vllm-error-status") {
      if (v != "400" && v != "500") return bad();
      o->vllm_error_status = v == "400" ? 400 : 500;
    } else {
      std::fprintf(stderr, "wsync-reference-engine: unknown flag %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (o->protocol != "sglang" && o->protocol != "vllm" && o->protocol != "lmdeploy") {
    std::fprintf(stderr, "wsync-reference-engine: --protocol must be sglang, vllm or lmdeploy\n");
    return 2;
  }
  if (o->port < 0) {
    std::fprintf(stderr, "wsync-reference-engine: --port is required (0 picks a free port)\n");
    return 2;
  }
  return 0;
}

}  // namespace refeng
