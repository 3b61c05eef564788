// options.h — the command line of wsync-reference-engine, parsed once in main() and read
// (never written) by every route afterwards.
#pragma once

#include <cstdint>
#include <string>

namespace refeng {

struct Options {
  std::string protocol;             // "sglang" | "vllm" | "lmdeploy"
  std::string host = "127.0.0.1";
  int port = -1;                    // 0 = any free port (see port_file)
  int gpus = 1;                     // local ranks: one embedded receiver each
  std::string api_key;              // empty = no auth
  std::string port_file;            // written with the bound port once listening
  int64_t timeout_ms = 60000;       // receiver join timeout, and how long an update waits for data
  // Test knobs (not behaviour of any real engine):
  int flush_busy = 0;               // the first N /flush_cache calls answer 400 (SGLang)
  bool fail_update = false;         // every update request fails with fail_update_message
  std::string fail_update_message;
  int vllm_error_status = 400;      // HTTP status of vLLM worker-side errors (400 or 500)
  std::string vllm_group = "weight_update_group";  // wsync group name the vLLM init joins
  int vllm_api_version = 3;                        // generation of vLLM's init_info/update_info
  bool enable_abort_handling = false;              // LMDeploy /abort_request (else 501)
};

// Parses argv into *out. Returns 0 to run, 1 when --help was printed, 2 on a usage error
// (message already printed to stderr).
int parse_options(int argc, char** argv, Options* out);

}  // namespace refeng
