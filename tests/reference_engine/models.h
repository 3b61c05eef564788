// models.h — the request models of SGLang's and LMDeploy's weight routes, per release family
// (SGLang managers/io_struct.py; LMDeploy serve/openai/protocol.py, identical 0.14–0.18).
#pragma once

#include "family.h"
#include "schemas.h"

namespace refeng {

ModelSpec sglang_init_model(const SglangFeatures& f);
ModelSpec sglang_update_model(const SglangFeatures& f);
ModelSpec sglang_destroy_model(const SglangFeatures& f);
ModelSpec sglang_pause_model(const SglangFeatures& f);      // 0.5.6+
ModelSpec sglang_continue_model(const SglangFeatures& f);   // 0.5.6+
ModelSpec sglang_weight_version_model(const SglangFeatures& f);
ModelSpec sglang_begin_model(const SglangFeatures& f);      // 0.5.21+
ModelSpec sglang_end_model(const SglangFeatures& f);        // 0.5.21+

ModelSpec lmdeploy_init_model();
ModelSpec lmdeploy_update_model();
ModelSpec lmdeploy_destroy_model();
ModelSpec lmdeploy_abort_model();

}  // namespace refeng
