// vllm_transfer.cpp — vLLM's weight-transfer routes (dev mode): POST /init_weight_transfer_engine,
// /start_weight_update, /update_weights, /finish_weight_update, /shutdown_weight_transfer_engine
// (0.32+), with the worker's state machine (_weight_update_active) and its exact messages. Every
// worker-side failure is a 500 "Call to collective_rpc method failed: .." (vllm_common.h).
//
// vLLM's init_info names no group: the embedded receivers join the wsync group --vllm-group.
// The unique-id mode (nccl_unique_id_b64 alone, 0.30+) passes vLLM's checks and is then refused:
// this engine joins over the trainer's store only.
#include <string>
#include <vector>

#include "replies.h"
#include "router.h"
#include "vllm_common.h"
#include "vllm_info.h"

namespace refeng {
namespace {

void init_engine(Shared& s, const httplib::Request& req, httplib::Response& res) {
  JsonPtr body;
  cJSON* info = nullptr;
  bool ok = s.fam.validation == Validation::kVllmManual ? vllm_manual_body(req, res, "init_info", &body, &info)
                                                        : vllm_embed_body(req, res, "init_info", "dict", &body, &info);
  if (!ok || vllm_dead_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);
  VllmInit in;
  std::string err, group = s.opt.vllm_group;
  const bool wsync_backend = s.opt.vllm_backend == "wsync";
  if (wsync_backend ? !vllm_parse_wsync_init_info(info, &in, &group, &err) : !vllm_parse_init_info(s.fam.vl, info, &in, &err))
    return vllm_rpc_failure(s, res, err);
  if (group != s.opt.vllm_group)  // the update routes wait on --vllm-group's receivers
    return vllm_rpc_failure(s, res, "wsync-reference-engine joins group '" + s.opt.vllm_group + "' (--vllm-group), "
                            "not '" + group + "'");
  if (in.unique_id)
    return vllm_rpc_failure(s, res,
                            "NCCLWeightTransferInitInfo: wsync-reference-engine cannot join by nccl_unique_id_b64; pass "
                            "master_address and master_port (its receivers join over the trainer's store)");
  JoinRequest j;
  j.master_address = in.master_address;
  j.master_port = in.master_port;
  j.rank_offset = in.rank_offset;
  j.world_size = in.world_size;
  j.group_name = s.opt.vllm_group;
  Outcome o = s.engine.replace_group(j);  // allowed at any time, even during an update
  if (!o.ok) return vllm_rpc_failure(s, res, o.message);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.packed = in.packed;
    if (s.fam.vl.update_reuse) s.last_update.assign(s.engine.gpus(), {});  // 0.33 clears the cache
  }
  reply_vllm_message(res, "Weight transfer initialized");
}

void start_update(Shared& s, httplib::Response& res) {  // any body is ignored
  if (vllm_dead_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.update_active)
    return vllm_rpc_failure(s, res,
                            "start_weight_update called while a weight update is already active. Call "
                            "finish_weight_update first.");
  s.update_active = true;  // the layers sit on meta tensors from here
  s.loaded_in_update = 0;
  reply_vllm_message(res, "Weight update started");
}

// One worker's tensors: update_info itself, or its entry of the list form (0.29+).
bool worker_tensors(Shared& s, const cJSON* info, int rank, std::vector<TensorSpec>* out, std::string* err) {
  const cJSON* d = info;
  if (cJSON_IsArray(info) && s.fam.vl.update_list) {
    d = cJSON_GetArrayItem(info, rank);  // data_parallel_index * world_size + rank
    if (d == nullptr) { *err = "list index out of range"; return false; }
  }
  std::vector<RawTensor> raw;
  bool given = true;
  if (!vllm_parse_update_info(s.fam.vl, d, &raw, &given, err)) return false;
  if (!s.engine.has_group(s.opt.vllm_group)) {
    *err = "NCCL weight transfer not initialized. Call init_transfer_engine() first.";
    return false;
  }
  if (!resolve_tensors(raw, out, err)) return false;  // getattr(torch, ..) / torch.empty
  if (s.fam.vl.update_reuse) {
    std::lock_guard<std::mutex> lk(s.mu);
    s.last_update.resize(s.engine.gpus());
    if (given) s.last_update[rank] = *out;
    else *out = s.last_update[rank];
  }
  return true;
}

// Inside the worker's try: any failure ends the session (_weight_update_active = False).
void update_weights(Shared& s, const httplib::Request& req, httplib::Response& res) {
  JsonPtr body;
  cJSON* info = nullptr;
  bool ok = s.fam.validation == Validation::kVllmManual ? vllm_manual_body(req, res, "update_info", &body, &info)
                                                        : vllm_embed_body(req, res, "update_info", "dict_or_list", &body, &info);
  if (!ok || vllm_dead_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.update_active) return vllm_rpc_failure(s, res, "start_weight_update must be called before update_weights.");
  }
  auto abort_session = [&](const std::string& why) {
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.update_active = false;  // the layers not yet reloaded stay on meta tensors
    }
    vllm_rpc_failure(s, res, why);
  };
  std::vector<std::vector<TensorSpec>> wants(s.engine.gpus());
  std::string err;
  for (int r = 0; r < s.engine.gpus(); ++r)  // the mp executor reports the first failed rank
    if (!worker_tensors(s, info, r, &wants[r], &err)) return abort_session(err);
  if (s.take_failure()) return abort_session(s.failure_message());
  Outcome o = s.engine.wait_for_tensors(s.opt.vllm_group, wants, s.opt.timeout_ms);
  if (!o.ok) return abort_session(o.message);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    ++s.loaded_in_update;
  }
  reply_vllm_message(res, "Weights updated");
}

void finish_update(Shared& s, const httplib::Request& req, httplib::Response& res) {
  JsonPtr body;
  cJSON* version = nullptr;
  if (!vllm_embed_body(req, res, "weight_version", "str_or_none", &body, &version) || vllm_dead_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.update_active) {
    ++s.unmatched_finishes;  // vLLM logs this worker error with its traceback
    return vllm_rpc_failure(s, res, "finish_weight_update called without a matching start_weight_update.");
  }
  s.update_active = false;
  if (version) s.weight_version = version->valuestring;  // only after the workers finished
  if (version) s.held = "version " + s.weight_version;
  reply_vllm_message(res, "Weight update finished");
}

void shutdown_transfer(Shared& s, httplib::Response& res) {
  if (vllm_dead_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.update_active) return vllm_rpc_failure(s, res, "Cannot release a trainer connection during a weight update");
  }
  s.engine.destroy_group(s.opt.vllm_group);  // nothing initialised: a silent no-op
  reply_vllm_message(res, "Weight transfer shut down");
}

// backend wsync: engine(call, ...) in every worker (the wsync Python backend's __call__): a
// declared update's check ("wsync_check", JSON {names, dtype_names, shapes}: --wsync-refuse NAME
// refuses NAME) and the abandon after a failure ("wsync_abandon": whole while no /update_weights
// of the update was answered; open = vLLM's update still active). One dict per worker.
void wsync_engine_call(Shared& s, const cJSON* args, httplib::Response& res) {
  const std::string call = cJSON_GetArrayItem(args, 0)->valuestring;
  const cJSON* a1 = cJSON_GetArrayItem(args, 1);
  JsonPtr o(cJSON_CreateObject());
  cJSON* results = cJSON_AddArrayToObject(o.get(), "results");
  std::lock_guard<std::mutex> lk(s.mu);
  for (int i = 0; i < s.engine.gpus(); ++i) {
    cJSON* d = cJSON_CreateObject();
    if (call == "wsync_check" && cJSON_IsString(a1) && cJSON_GetArraySize(args) == 2) {
      JsonPtr cat(cJSON_Parse(a1->valuestring));
      const cJSON* names = cat ? cJSON_GetObjectItemCaseSensitive(cat.get(), "names") : nullptr;
      bool refused = false;
      const cJSON* n;
      cJSON_ArrayForEach(n, names) refused = refused || (cJSON_IsString(n) && s.opt.wsync_refuse == n->valuestring);
      cJSON_AddBoolToObject(d, "ok", cat && cJSON_IsArray(names) && !refused);
      if (refused)
        cJSON_AddStringToObject(d, "refused", ("tensor '" + s.opt.wsync_refuse + "' has a shape the served model "
                                               "does not have").c_str());
    } else if (call == "wsync_abandon" && cJSON_GetArraySize(args) == 1) {
      const bool whole = s.loaded_in_update == 0;
      if (!whole) s.held = "a mix of two versions (" + std::to_string(s.loaded_in_update) + " bucket(s) of the failed update)";
      cJSON_AddBoolToObject(d, "whole", whole);
      cJSON_AddStringToObject(d, "holds", s.held.c_str());
      cJSON_AddBoolToObject(d, "open", s.update_active);
    } else {
      cJSON_Delete(d);
      return vllm_rpc_failure(s, res, "wsync: the weight_transfer_engine call takes wsync_check or wsync_abandon");
    }
    cJSON_AddItemToArray(results, d);
  }
  reply_json(res, 200, o.get());
}

// POST /collective_rpc (dev mode): {"method", "args", "kwargs", "timeout"}; each worker runs
// getattr(worker_wrapper, method)(*args). Emulated: "__getattr__" of "_weight_update_active" (the
// wrapper hands it to the worker: {"results": ["True", ...]}, one per worker, as str()); any other
// method fails in the worker as vLLM's run_method does.
void collective_rpc(Shared& s, const httplib::Request& req, httplib::Response& res) {
  JsonPtr b(cJSON_Parse(req.body.c_str()));
  if (!b) return reply_detail(res, 400, "JSON decode error: Expecting value");
  if (!cJSON_IsObject(b.get())) return reply_detail(res, 400, "Request body must be a JSON object");
  const cJSON* m = cJSON_GetObjectItemCaseSensitive(b.get(), "method");
  if (m == nullptr || cJSON_IsNull(m)) return reply_detail(res, 400, "Missing 'method' in request body");
  const cJSON* args = cJSON_GetObjectItemCaseSensitive(b.get(), "args");
  const cJSON* a0 = cJSON_IsArray(args) ? cJSON_GetArrayItem(args, 0) : nullptr;
  const std::string method = cJSON_IsString(m) ? m->valuestring : "";
  if (vllm_dead_refused(s, res)) return;
  std::lock_guard<std::mutex> core(s.core);
  if (method == "weight_transfer_engine" && s.opt.vllm_backend == "wsync" && cJSON_IsString(a0))
    return wsync_engine_call(s, args, res);
  if (method != "__getattr__" || !cJSON_IsString(a0) || std::string(a0->valuestring) != "_weight_update_active" ||
      cJSON_GetArraySize(args) != 1)
    return vllm_rpc_failure(s, res, "Method " + py_str_repr(method) + " is not implemented.");
  std::lock_guard<std::mutex> lk(s.mu);
  JsonPtr o(cJSON_CreateObject());
  cJSON* results = cJSON_AddArrayToObject(o.get(), "results");
  for (int i = 0; i < s.engine.gpus(); ++i)
    cJSON_AddItemToArray(results, cJSON_CreateString(s.update_active ? "True" : "False"));
  reply_json(res, 200, o.get());
}

}  // namespace

void add_vllm_transfer_routes(Router& r, Shared& s) {
  r.add("POST", "/init_weight_transfer_engine",
        [&s](const httplib::Request& req, httplib::Response& res) { init_engine(s, req, res); });
  r.add("POST", "/start_weight_update", [&s](const httplib::Request&, httplib::Response& res) { start_update(s, res); });
  r.add("POST", "/update_weights",
        [&s](const httplib::Request& req, httplib::Response& res) { update_weights(s, req, res); });
  r.add("POST", "/finish_weight_update",
        [&s](const httplib::Request& req, httplib::Response& res) { finish_update(s, req, res); });
  r.add("POST", "/collective_rpc",
        [&s](const httplib::Request& req, httplib::Response& res) { collective_rpc(s, req, res); });
  if (s.fam.vl.shutdown_route)
    r.add("POST", "/shutdown_weight_transfer_engine",
          [&s](const httplib::Request&, httplib::Response& res) { shutdown_transfer(s, res); });
}

}  // namespace refeng
