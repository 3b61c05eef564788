// family.h — which release family of which engine this process plays, computed once from
// --protocol and --engine-version (see family.cpp for the version ranges). Every route reads
// its behaviour from these flags, never from the version number itself, so the table in
// README.md and this struct say the same thing.
//
// Sources: the fact sheets read from the engines' released code (SGLang 0.5.5–0.5.23, vLLM
// 0.28–0.33, LMDeploy 0.13–0.18).
#pragma once

#include <string>

namespace refeng {

enum class Protocol { kSglang, kVllm, kLmdeploy };

struct Version {
  int major = 0, minor = 0, patch = 0;
};
bool operator<(const Version& a, const Version& b);
bool operator<=(const Version& a, const Version& b);

// How a request body that fails validation is answered.
enum class Validation {
  kSglang400,       // 400 {"object":"error","message":..,"type":"Bad Request","param":null,"code":400}
  kVllmManual,      // 0.28–0.31 init/update: json.loads by hand, HTTPException 400 {"error":{..}}
  kVllmFastapi,     // 0.32+: FastAPI Body(embed=True), 400 {"error":{..,"param":"body.x"}}
  kLmdeploy422,     // 0.14–0.15: 422 {"detail":[..],"body":..}
  kLmdeploy400,     // 0.16+: 400 {"message":"<loc>: <msg>","type":"invalid_request_error",..}
};

// SGLang's GET /get_weight_version and /weight_version.
enum class WeightVersionRoutes {
  kGetOnly,        // 0.5.5: /get_weight_version answers, /weight_version is 404
  kBoth,           // 0.5.6–0.5.7: both answer {"weight_version": ..}
  kDeprecated404,  // 0.5.8–0.5.20: both raise HTTPException(404, "... deprecated ...")
  kRemoved,        // 0.5.21+: plain 404 {"detail":"Not Found"}
};

struct SglangFeatures {
  bool server_info_route = false;        // GET /server_info and /model_info (0.5.6+)
  bool pause_body = false;               // PauseGenerationReqInput, body required (0.5.6+)
  bool continue_body = false;            // ContinueGenerationReqInput, body required (0.5.6+)
  bool continue_torch_empty_cache = false;  // 0.5.12+
  bool load_format = false;              // update field load_format (0.5.6+; 0.5.5 drops it)
  bool torch_empty_cache = false;        // update field torch_empty_cache (0.5.11+)
  bool selector = false;                 // update field selector (0.5.21+)
  bool msgspec_models = false;           // msgspec.Struct request models (0.5.15+)
  bool flush_timeout = false;            // /flush_cache?timeout= (0.5.10+)
  bool ready_route = false;              // GET /ready (0.5.20+)
  bool sessions = false;                 // begin/end_weight_update, required around updates (0.5.21+)
  bool unknown_group_crashes = false;    // update with an unknown group kills the scheduler (<=0.5.20)
  bool receive_prefix = false;           // failures read "Failed to receive weights: .." (0.5.21+)
  bool strict_bucket = false;            // FlattenedTensorBucket.empty checks before receiving (0.5.23)
  bool version_needs_scheduler = false;  // /update_weight_version round-trips the scheduler (0.5.19+)
  bool paused_skips_version = false;     // 0.5.6: the paused update path skips the weight_version record
  bool dp_replicas_text = false;         // 0.5.22+: dp assert names "data-parallel replicas"
  bool launch_command = false;           // server_info "launch_command" (0.5.20+)
  bool frontend_key = false;             // server_info "frontend":"python" (0.5.21+)
  bool kv_events_key = false;            // server_info "kv_events" (0.5.13+)
  bool startup_time_key = false;         // server_info "startup_time" (0.5.17+)
  bool attn_dp_key = false;              // server_info "attn_dp_size" (0.5.20+)
  WeightVersionRoutes weight_version_routes = WeightVersionRoutes::kRemoved;
};

struct VllmFeatures {
  bool unique_id_mode = false;    // init_info nccl_unique_id_b64, kw_only dataclass (0.30+)
  bool update_list = false;       // update_info may be a list indexed by worker rank (0.29+)
  bool update_reuse = false;      // empty update_info lists reuse the previous metadata (0.33)
  bool shutdown_route = false;    // POST /shutdown_weight_transfer_engine (0.32+)
  bool pause_wait_param = false;  // /pause?wait_for_inflight_requests (<=0.31)
  bool paused_rejects = false;    // new requests while paused (abort/wait) get 503 (0.33)
  bool dead_client_message = false;  // EngineDeadError's fixed client message (0.33)
};

struct LmdeployFeatures {
  bool weight_routes = false;  // init/update/destroy_weights_update_group (0.14+)
  bool ipc_route = false;      // GET|POST /update_weights_from_ipc (0.18)
  bool envelope_401 = false;   // 401 in the error envelope (0.16+), else {"error":"Unauthorized"}
};

struct Family {
  Protocol protocol = Protocol::kSglang;
  std::string protocol_name;  // "sglang" | "vllm" | "lmdeploy"
  std::string version;        // --engine-version as given ("0.5.23")
  Version v;
  std::string family;         // the release family, e.g. "0.5.21-0.5.23"
  Validation validation = Validation::kSglang400;
  SglangFeatures sg;
  VllmFeatures vl;
  LmdeployFeatures lm;
};

// The newest supported release of `protocol` ("0.5.23", "0.33.0", "0.18.0").
std::string default_version(const std::string& protocol);

// Fills *out from a protocol name and an "X.Y[.Z]" version. Returns false and sets *why when the
// protocol is unknown, the version does not parse, or it is outside the supported range.
bool make_family(const std::string& protocol, const std::string& version, Family* out, std::string* why);

}  // namespace refeng
