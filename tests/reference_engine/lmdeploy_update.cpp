// lmdeploy_update.cpp — LMDeploy's disaggregated weight-update routes (0.14+, PyTorch backend,
// Ray executor): POST /init_weights_update_group, /update_weights_from_distributed,
// /destroy_weights_update_group. Each runs on every worker (model_agent/agent.py) and the
// replies are reduced per rank (lmdeploy_common.h); the three share one lock.
#include <cstdio>
#include <string>
#include <vector>

#include "lmdeploy_common.h"
#include "models.h"
#include "replies.h"
#include "router.h"
#include "tensors.h"

namespace refeng {
namespace {

const char* kPartial = ". The model weights are partially updated; please discard them and reload.";

void init_group(Shared& s, const httplib::Request& req, httplib::Response& res) {
  const char* op = "init_weights_update_group";
  JsonPtr b = lmdeploy_parse(s, req, res, lmdeploy_init_model());
  if (!b || lmdeploy_backend_refused(s, res) || lmdeploy_executor_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);
  JoinRequest j;
  j.master_address = get_str(b.get(), "master_address", "");
  j.master_port = get_int(b.get(), "master_port", 0);
  j.rank_offset = get_int(b.get(), "rank_offset", 0);
  j.world_size = get_int(b.get(), "world_size", 0);
  j.group_name = get_str(b.get(), "group_name", "");
  if (j.group_name.empty()) return lmdeploy_reduce(res, op, lmdeploy_all_ranks(s, false, "group_name cannot be empty"));
  if (s.engine.has_group(j.group_name))  // checked before any rendezvous; the group is untouched
    return lmdeploy_reduce(res, op, lmdeploy_all_ranks(s, false, "group " + py_str_repr(j.group_name) + " already initialized"));
  Outcome o = s.engine.init_group(j);
  std::vector<RankResult> ranks = o.ranks;
  if (ranks.empty()) ranks = lmdeploy_all_ranks(s, o.ok, o.message);
  for (auto& r : ranks)
    r.message = r.ok ? "Succeeded to initialize weights update group." : "Failed to initialize weights update group: " + r.message;
  if (!o.ok)  // a failed join registers the group on no rank
    for (auto& r : ranks)
      if (r.ok) r = {false, "Failed to initialize weights update group: the join failed on another rank (" + o.message + ")"};
  lmdeploy_reduce(res, op, ranks);
}

// What each worker does before its broadcast: torch.empty per zipped entry (lengths silently
// truncated), then the flattened bucket's one-dtype check. "" when it may receive.
std::string prepare(const cJSON* b, std::vector<TensorSpec>* specs) {
  bool differ = false;
  std::vector<RawTensor> raw = zip_tensors(cJSON_GetObjectItemCaseSensitive(b, "names"),
                                           cJSON_GetObjectItemCaseSensitive(b, "dtypes"),
                                           cJSON_GetObjectItemCaseSensitive(b, "shapes"), &differ);
  std::string err;
  if (!resolve_tensors(raw, specs, &err)) return err;
  std::string fmt;
  if (get_str_or_null(b, "load_format", &fmt) && fmt == "flattened_bucket") {
    bool same = true;
    for (const auto& t : *specs) same = same && t.dtype == specs->front().dtype;
    if (!same) {
      std::string list = "[";
      for (size_t i = 0; i < specs->size(); ++i) list += (i ? ", " : "") + torch_dtype_repr((*specs)[i].dtype);
      return "All tensors should have same dtype, but given " + list + "]";
    }
  }
  return "";
}

void update(Shared& s, const httplib::Request& req, httplib::Response& res) {
  const char* op = "update_weights_from_distributed";
  JsonPtr b = lmdeploy_parse(s, req, res, lmdeploy_update_model());
  if (!b || lmdeploy_backend_refused(s, res) || lmdeploy_executor_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);
  std::string group = get_str(b.get(), "group_name", "");
  if (!s.engine.has_group(group))  // first: "finalize only" needs a live group too
    return lmdeploy_reduce(res, op, lmdeploy_all_ranks(s, false, "group " + py_str_repr(group) +
                                                                     " not initialized. Call init_weights_update_group first."));
  if (s.take_failure()) return lmdeploy_reduce(res, op, lmdeploy_all_ranks(s, false, s.failure_message()));
  std::vector<TensorSpec> specs;
  if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(b.get(), "names")) > 0) {
    std::string err = prepare(b.get(), &specs);
    if (!err.empty()) return lmdeploy_reduce(res, op, lmdeploy_all_ranks(s, false, "Failed to update parameter online: " + err + kPartial));
    Outcome o = s.engine.wait_for_tensors(group, std::vector<std::vector<TensorSpec>>(s.engine.gpus(), specs), s.opt.timeout_ms);
    if (!o.ok) {
      std::vector<RankResult> ranks = o.ranks;
      for (auto& r : ranks)
        r.message = r.ok ? "Succeeded to update parameter online." : "Failed to update parameter online: " + r.message + kPartial;
      return lmdeploy_reduce(res, op, ranks);
    }
  }
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!specs.empty()) s.loaded_unfinished = true;  // in the model, not yet processed after loading
    if (get_bool(b.get(), "finished", false)) {  // finalize: post-load processing, CUDA graphs dropped
      ++s.finalized;
      s.loaded_unfinished = false;
    }
  }
  lmdeploy_reduce(res, op, lmdeploy_all_ranks(s, true, "Succeeded to update parameter online."));
}

void destroy_group(Shared& s, const httplib::Request& req, httplib::Response& res) {
  const char* op = "destroy_weights_update_group";
  JsonPtr b = lmdeploy_parse(s, req, res, lmdeploy_destroy_model());
  if (!b || lmdeploy_backend_refused(s, res) || lmdeploy_executor_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);  // queues behind a running update
  std::string group = get_str(b.get(), "group_name", "");
  Outcome o = s.engine.destroy_group(group);
  if (!o.ok) return lmdeploy_reduce(res, op, lmdeploy_all_ranks(s, false, "group " + py_str_repr(group) + " not initialized"));
  lmdeploy_reduce(res, op, lmdeploy_all_ranks(s, true, "Succeeded to destroy group " + py_str_repr(group) + "."));
}

}  // namespace

void add_lmdeploy_update_routes(Router& r, Shared& s) {
  if (!s.fam.lm.weight_routes) return;  // 0.13: Starlette's 404
  r.add("POST", "/init_weights_update_group",
        [&s](const httplib::Request& req, httplib::Response& res) { init_group(s, req, res); });
  r.add("POST", "/update_weights_from_distributed",
        [&s](const httplib::Request& req, httplib::Response& res) { update(s, req, res); });
  r.add("POST", "/destroy_weights_update_group",
        [&s](const httplib::Request& req, httplib::Response& res) { destroy_group(s, req, res); });
}

}  // namespace refeng
