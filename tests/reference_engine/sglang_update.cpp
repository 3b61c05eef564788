// sglang_update.cpp — SGLang's group routes: POST /init_weights_update_group,
// /update_weights_from_distributed, /destroy_weights_update_group, per release family (fact
// sheet §3-§4). The embedded receivers stand for the NCCL group; an update request replies once
// its tensors arrived through wsync (see receiver_side.h).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "models.h"
#include "replies.h"
#include "router.h"
#include "sglang_common.h"
#include "store_probe.h"
#include "tensors.h"

namespace refeng {
namespace {

// torch's view_dtype check, as a misaligned slice of a flattened bucket fails in .view(dtype)
// (<= 0.5.22, after the broadcast). Wording of ScalarType names from c10.
std::string view_error(int32_t dtype, int64_t offset) {
  static const struct { int32_t d; const char* n; } kNames[] = {
      {WSYNC_DTYPE_BOOL, "Bool"},         {WSYNC_DTYPE_INT8, "Char"},          {WSYNC_DTYPE_INT16, "Short"},
      {WSYNC_DTYPE_INT32, "Int"},         {WSYNC_DTYPE_INT64, "Long"},         {WSYNC_DTYPE_UINT8, "Byte"},
      {WSYNC_DTYPE_FLOAT16, "Half"},      {WSYNC_DTYPE_BFLOAT16, "BFloat16"},  {WSYNC_DTYPE_FLOAT32, "Float"},
      {WSYNC_DTYPE_FLOAT64, "Double"},    {WSYNC_DTYPE_FLOAT8_E4M3, "Float8_e4m3fn"},
      {WSYNC_DTYPE_FLOAT8_E5M2, "Float8_e5m2"}};
  const char* name = "?";
  for (const auto& k : kNames)
    if (k.d == dtype) name = k.n;
  return "self.storage_offset() must be divisible by " + std::to_string(wsync_dtype_size(dtype)) + " to view Byte as " +
         name + " (different element sizes), but got " + std::to_string(offset);
}

int64_t nbytes(const TensorSpec& t) {
  int64_t n = wsync_dtype_size(t.dtype);
  for (int64_t d : t.shape) n *= d;
  return n;
}

// Python's zip(a, b, c, strict=True) error for these lengths ("" when equal).
std::string zip_strict_error(int n, int d, int s) {
  int m = std::min(n, std::min(d, s));
  bool ex[3] = {n == m, d == m, s == m};
  const char* before[3] = {"", "argument 1", "arguments 1-2"};
  if (ex[0]) {
    for (int j = 1; j < 3; ++j)
      if (!ex[j]) return "zip() argument " + std::to_string(j + 1) + " is longer than " + before[j];
    return "";
  }
  for (int i = 1; i < 3; ++i)
    if (ex[i]) return "zip() argument " + std::to_string(i + 1) + " is shorter than " + before[i];
  return "";
}

// 0.5.23 FlattenedTensorBucket.empty: per tensor in order (dtype, negative dims, alignment),
// then zip(strict=True), then "empty bucket" — all before the broadcast.
bool strict_bucket(const std::vector<RawTensor>& raw, const std::string& zip_error, std::string* err) {
  int64_t offset = 0;
  for (const RawTensor& t : raw) {
    if (!t.dtype_error.empty()) { *err = t.dtype_error; return false; }
    for (int64_t d : t.spec.shape)
      if (d < 0) { *err = "Negative dimension in received tensor " + t.spec.name + ": " + torch_size_repr(t.spec.shape); return false; }
    if (offset % wsync_dtype_size(t.spec.dtype)) {
      *err = "Unaligned received tensor " + t.spec.name + ": byte offset " + std::to_string(offset) + ", dtype " +
             torch_dtype_repr(t.spec.dtype);
      return false;
    }
    offset += nbytes(t.spec);
  }
  if (!zip_error.empty()) { *err = zip_error; return false; }
  if (raw.empty()) { *err = "Cannot create empty tensor bucket"; return false; }
  return true;
}

// <= 0.5.22: the first misaligned tensor of a flattened bucket ("" when none).
std::string misaligned(const std::vector<TensorSpec>& specs) {
  int64_t offset = 0;
  for (const TensorSpec& t : specs) {
    if (offset % wsync_dtype_size(t.dtype)) return view_error(t.dtype, offset);
    offset += nbytes(t);
  }
  return "";
}

struct UpdatePlan {
  std::vector<TensorSpec> specs;
  std::string after_receive_error;  // fails once the data is in (<= 0.5.22 misaligned view)
};

// What the scheduler checks before it receives; false + *err (the 400 text) when it refuses.
bool plan_update(const Shared& s, const cJSON* b, UpdatePlan* plan, std::string* err) {
  const SglangFeatures& f = s.fam.sg;
  const cJSON* names = cJSON_GetObjectItemCaseSensitive(b, "names");
  const cJSON* dtypes = cJSON_GetObjectItemCaseSensitive(b, "dtypes");
  const cJSON* shapes = cJSON_GetObjectItemCaseSensitive(b, "shapes");
  bool differ = false;
  std::vector<RawTensor> raw = zip_tensors(names, dtypes, shapes, &differ);
  // The validated body keeps unknown fields: 0.5.5's model has no load_format and drops it.
  std::string fmt = get_str(b, "load_format", "");
  bool bucket = fmt == "flattened_bucket";
  if (!f.load_format && bucket && raw.size() > 1) {
    *err = sglang_update_failure(f, "SGLang " + s.fam.version + " ignores load_format='flattened_bucket' and expects one "
                                    "broadcast per tensor (" + std::to_string(raw.size()) +
                                    " tensors), but the trainer sends one flattened bucket "
                                    "(wsync-reference-engine refuses it instead of mismatching the broadcasts)");
    return false;
  }
  bucket = bucket && f.load_format;
  if (bucket && f.strict_bucket) {
    std::string zerr = differ ? zip_strict_error(cJSON_GetArraySize(names), cJSON_GetArraySize(dtypes),
                                                 cJSON_GetArraySize(shapes))
                              : "";
    if (!strict_bucket(raw, zerr, err)) { *err = sglang_update_failure(f, *err); return false; }
  }
  if (!resolve_tensors(raw, &plan->specs, err)) { *err = sglang_update_failure(f, *err); return false; }
  if (bucket && raw.empty()) {
    *err = sglang_update_failure(f, "torch.cat(): expected a non-empty list of Tensors");
    return false;
  }
  if (bucket && !f.strict_bucket) plan->after_receive_error = misaligned(plan->specs);
  return true;
}

// Runs an update that passed the scheduler's checks; answers the reply.
void run_update(Shared& s, const cJSON* b, const std::string& group, httplib::Response& res) {
  const SglangFeatures& f = s.fam.sg;
  UpdatePlan plan;
  std::string err;
  if (!plan_update(s, b, &plan, &err)) return reply_success(res, false, err);
  if (s.take_failure()) return reply_success(res, false, s.failure_message());
  std::vector<std::vector<TensorSpec>> wants(s.engine.gpus(), plan.specs);
  Outcome o = s.engine.wait_for_tensors(group, wants, s.opt.timeout_ms);
  if (!o.ok) return reply_success(res, false, sglang_update_failure(f, o.message));
  if (!plan.after_receive_error.empty()) return reply_success(res, false, sglang_update_failure(f, plan.after_receive_error));
  std::string message = "Succeeded to update parameter online.";
  std::string version;
  if (get_str_or_null(b, "weight_version", &version)) {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!(f.paused_skips_version && s.paused)) {
      s.weight_version = version;
      message += " Weight version updated to " + version + ".";
    }
  }
  reply_success(res, true, message);
}

void init_group(Shared& s, const httplib::Request& req, httplib::Response& res) {
  JsonPtr b = sglang_parse(req, res, sglang_init_model(s.fam.sg));
  if (!b || sglang_dp_refused(s, res)) return;
  JoinRequest j;
  j.master_address = get_str(b.get(), "master_address", "");
  j.master_port = get_int(b.get(), "master_port", 0);
  j.rank_offset = get_int(b.get(), "rank_offset", 0);
  j.world_size = get_int(b.get(), "world_size", 0);
  j.group_name = get_str(b.get(), "group_name", kSglangDefaultGroup);
  if (j.group_name.empty()) sglang_crash(s, "AssertionError: Group name cannot be empty");
  std::lock_guard<std::mutex> core(s.core);
  if (s.engine.has_group(j.group_name)) {
    // torch's _new_process_group_helper refuses the name, after the TCPStore rendezvous.
    std::string why = probe_store(j.master_address, j.master_port, s.opt.timeout_ms);
    if (why.empty()) why = "The specified group name has already been created, please use a different group name";
    return reply_success(res, false, "Failed to initialize custom process group: " + why + ".");
  }
  Outcome o = s.engine.init_group(j);
  if (o.ok) reply_success(res, true, "Succeeded to initialize custom process group.");
  else reply_success(res, false, "Failed to initialize custom process group: " + o.message + ".");
}

void update(Shared& s, const httplib::Request& req, httplib::Response& res) {
  const SglangFeatures& f = s.fam.sg;
  JsonPtr b = sglang_parse(req, res, sglang_update_model(f));
  if (!b || sglang_dp_refused(s, res)) return;
  if (get_bool(b.get(), "abort_all_requests", false)) s.note_abort("/update_weights_from_distributed");
  bool paused;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    paused = s.paused;
  }
  WriterHold writer(s, !paused);  // unpaused: under the writer lock, generation waits
  std::lock_guard<std::mutex> core(s.core);
  std::string group = get_str(b.get(), "group_name", kSglangDefaultGroup);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (f.sessions && !s.session_open)  // before any receive: the trainer's broadcast would hang
      return reply_success(res, false,
                           "update_weights_from_distributed must run between begin_weight_update() and "
                           "end_weight_update()");
  }
  if (!s.engine.has_group(group)) {
    std::string what = "Group " + group + " not in " + py_str_list(s.engine.group_names()) +
                       ". Please call `init_weights_update_group` first.";
    if (f.unknown_group_crashes) sglang_crash(s, "AssertionError: " + what);
    return reply_success(res, false, "Failed to receive weights: " + what);
  }
  run_update(s, b.get(), group, res);
}

}  // namespace

void add_sglang_update_routes(Router& r, Shared& s) {
  r.add("POST", "/init_weights_update_group",
        [&s](const httplib::Request& req, httplib::Response& res) { init_group(s, req, res); });
  r.add("POST", "/update_weights_from_distributed",
        [&s](const httplib::Request& req, httplib::Response& res) { update(s, req, res); });
  r.add("POST", "/destroy_weights_update_group", [&s](const httplib::Request& req, httplib::Response& res) {
    JsonPtr b = sglang_parse(req, res, sglang_destroy_model(s.fam.sg));
    if (!b || sglang_dp_refused(s, res)) return;
    std::lock_guard<std::mutex> core(s.core);
    Outcome o = s.engine.destroy_group(get_str(b.get(), "group_name", kSglangDefaultGroup));
    if (o.ok) reply_success(res, true, "Succeeded to destroy custom process group.");
    else reply_success(res, false, "The group to be destroyed does not exist.");
  });
}

}  // namespace refeng
