// models.cpp — request models per release family (see models.h and the fact sheets' tables).
#include "models.h"

namespace refeng {
namespace {

ModelStyle sglang_style(const SglangFeatures& f) { return f.msgspec_models ? ModelStyle::kMsgspec : ModelStyle::kDataclass; }

const std::vector<std::string> kSelector = {"target", "draft", "all"};

}  // namespace

ModelSpec sglang_init_model(const SglangFeatures& f) {
  return {"InitWeightsUpdateGroupReqInput", sglang_style(f),
          {{"master_address", Kind::Str, true, false, {}},
           {"master_port", Kind::Int, true, false, {}},
           {"rank_offset", Kind::Int, true, false, {}},
           {"world_size", Kind::Int, true, false, {}},
           {"group_name", Kind::Str, false, false, {}},
           {"backend", Kind::Str, false, false, {}}}};
}

ModelSpec sglang_update_model(const SglangFeatures& f) {
  ModelSpec m{"UpdateWeightsFromDistributedReqInput", sglang_style(f),
              {{"names", Kind::StrList, true, false, {}},
               {"dtypes", Kind::StrList, true, false, {}},
               {"shapes", Kind::IntListList, true, false, {}},
               {"group_name", Kind::Str, false, false, {}},
               {"flush_cache", Kind::Bool, false, false, {}},
               {"abort_all_requests", Kind::Bool, false, false, {}},
               {"weight_version", Kind::Str, false, true, {}}}};
  if (f.load_format) m.fields.push_back({"load_format", Kind::Str, false, true, {}});
  if (f.torch_empty_cache) m.fields.push_back({"torch_empty_cache", Kind::Bool, false, false, {}});
  if (f.selector) m.fields.push_back({"selector", Kind::Str, false, false, kSelector});
  return m;
}

ModelSpec sglang_destroy_model(const SglangFeatures& f) {
  return {"DestroyWeightsUpdateGroupReqInput", sglang_style(f), {{"group_name", Kind::Str, false, false, {}}}};
}

ModelSpec sglang_pause_model(const SglangFeatures& f) {
  return {"PauseGenerationReqInput", sglang_style(f), {{"mode", Kind::Str, false, false, {"abort", "retract", "in_place"}}}};
}

ModelSpec sglang_continue_model(const SglangFeatures& f) {
  ModelSpec m{"ContinueGenerationReqInput", sglang_style(f), {}};
  if (f.continue_torch_empty_cache) m.fields.push_back({"torch_empty_cache", Kind::Bool, false, false, {}});
  return m;
}

ModelSpec sglang_weight_version_model(const SglangFeatures& f) {
  return {"UpdateWeightVersionReqInput", sglang_style(f),
          {{"new_version", Kind::Str, true, false, {}}, {"abort_all_requests", Kind::Bool, false, false, {}}}};
}

ModelSpec sglang_begin_model(const SglangFeatures& f) {
  return {"BeginWeightUpdateReqInput", sglang_style(f), {{"selector", Kind::Str, false, false, kSelector}}};
}

ModelSpec sglang_end_model(const SglangFeatures& f) { return {"EndWeightUpdateReqInput", sglang_style(f), {}}; }

ModelSpec lmdeploy_init_model() {
  return {"InitWeightsUpdateGroupRequest", ModelStyle::kBaseModel,
          {{"master_address", Kind::Str, true, false, {}},
           {"master_port", Kind::Int, true, false, {}},
           {"rank_offset", Kind::Int, true, false, {}},
           {"world_size", Kind::Int, true, false, {}},
           {"group_name", Kind::Str, true, false, {}},
           {"backend", Kind::Str, false, false, {}}}};
}

ModelSpec lmdeploy_update_model() {
  return {"UpdateWeightsFromDistributedRequest", ModelStyle::kBaseModel,
          {{"names", Kind::StrList, true, false, {}},
           {"dtypes", Kind::StrList, true, false, {}},
           {"shapes", Kind::IntListList, true, false, {}},
           {"group_name", Kind::Str, true, false, {}},
           {"load_format", Kind::Str, false, true, {}},
           {"finished", Kind::Bool, false, false, {}}}};
}

ModelSpec lmdeploy_destroy_model() {
  return {"DestroyWeightsUpdateGroupRequest", ModelStyle::kBaseModel, {{"group_name", Kind::Str, true, false, {}}}};
}

ModelSpec lmdeploy_abort_model() {
  return {"AbortRequest", ModelStyle::kBaseModel,
          {{"abort_all", Kind::Bool, false, false, {}},
           {"finished_reason", Kind::Object, false, true, {}},
           {"abort_message", Kind::Str, false, true, {}},
           {"session_id", Kind::Int, false, false, {}}}};
}

}  // namespace refeng
