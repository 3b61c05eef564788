// options.h — the command line of wsync-reference-engine, parsed once in main() and read
// (never written) by every route afterwards.
#pragma once

#include <cstdint>
#include <string>

#include "family.h"

namespace refeng {

struct Options {
  std::string protocol;             // "sglang" | "vllm" | "lmdeploy"
  std::string engine_version;       // --engine-version; default: the newest supported
  Family family;                    // computed from protocol + engine_version
  std::string host = "127.0.0.1";
  int port = -1;                    // 0 = any free port (see port_file)
  int gpus = 1;                     // local ranks: one embedded receiver each
  std::string api_key;              // empty = no auth
  std::string port_file;            // written with the bound port once listening
  int64_t timeout_ms = 60000;       // receiver join timeout, and how long an update waits for data
  // What the identity routes report (the engine still joins with --gpus ranks):
  int tp_size = 0;                  // sglang/lmdeploy tp_size; 0 = --gpus
  int pp_size = 1;                  // sglang pp_size
  int dp_size = 1;                  // sglang dp_size (> 1 without DP attention: weight routes 500)
  int world_size = 0;               // vllm /get_world_size; 0 = --gpus
  std::string lmdeploy_executor = "ray";  // "ray" | "uni" (uni: the weight routes answer 500)
  std::string lmdeploy_backend = "pytorch";  // "pytorch" | "turbomind" (turbomind: the weight routes 501)
  // Test knobs (not behaviour of any real engine):
  int flush_busy = 0;               // the first N /flush_cache calls find the scheduler busy (sglang)
  bool fail_update = false;         // every update request fails with fail_update_message
  std::string fail_update_message;
  int fail_update_count = -1;       // --fail-updates N: only the first N update requests fail (-1: all)
  bool register_model = false;      // --register-model: receivers register the model's tensors
  std::string vllm_group = "weight_update_group";  // wsync group name the vLLM init joins
  std::string vllm_backend = "nccl";               // "nccl" | "wsync": the init_info vLLM's init takes
  std::string wsync_refuse;                        // --wsync-refuse: the wsync check refuses this tensor
  bool enable_abort_handling = false;              // LMDeploy /abort_request (else 501)
};

// Parses argv into *out. Returns 0 to run, 1 when --help was printed, 2 on a usage error
// (message already printed to stderr).
int parse_options(int argc, char** argv, Options* out);

}  // namespace refeng
