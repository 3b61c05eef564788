// vllm_info.h — vLLM's NCCL init_info / update_info dataclasses as each release builds them
// from the request's dicts (cls(**d): unknown or missing keys raise TypeError, which
// parse_*_info rewraps as "Invalid <x>_info for NCCLWeightTransferEngine: .."; __post_init__
// ValueErrors pass through as they are). The texts are the worker's exception messages; the
// routes wrap them into "Call to collective_rpc method failed: ..".
#pragma once

#include <string>
#include <vector>

#include "family.h"
#include "json_util.h"
#include "tensors.h"

namespace refeng {

struct VllmInit {
  std::string master_address;
  int64_t master_port = 0;
  int64_t rank_offset = 0;
  int64_t world_size = 0;
  bool unique_id = false;  // nccl_unique_id_b64 mode (0.30+)
  bool packed = false;
};

// NCCLWeightTransferInitInfo(**init_info) of the family. *err is the worker's message.
bool vllm_parse_init_info(const VllmFeatures& f, const cJSON* info, VllmInit* out, std::string* err);
// The wsync package's WsyncInitInfo(**init_info) (bindings/python/wsync/vllm/engine.py): store_addr
// "host:port", rank_offset, world_size, group_name (default "wsync"); *group gets group_name.
bool vllm_parse_wsync_init_info(const cJSON* info, VllmInit* out, std::string* group, std::string* err);

// One worker's NCCLWeightTransferUpdateInfo(**d) (d already picked from a list form). *names_given
// tells whether the lists were non-empty (0.33 reuses the previous metadata otherwise).
bool vllm_parse_update_info(const VllmFeatures& f, const cJSON* d, std::vector<RawTensor>* out, bool* names_given,
                            std::string* err);

}  // namespace refeng
