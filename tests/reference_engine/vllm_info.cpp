// vllm_info.cpp — vLLM's init_info / update_info dataclasses per release (see vllm_info.h).
#include "vllm_info.h"

#include <cstring>

namespace refeng {
namespace {

const char* kEngine = "NCCLWeightTransferEngine";

// "'a'", "'a' and 'b'", "'a', 'b', and 'c'" (CPython's missing-argument list).
std::string py_and_list(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += v.size() == 2 ? " and " : (i + 1 == v.size() ? ", and " : ", ");
    s += "'" + v[i] + "'";
  }
  return s;
}

// cls(**d): the TypeError of an unexpected or missing keyword ("" when d fits).
std::string bind_error(const char* cls, const cJSON* d, const std::vector<const char*>& known,
                       const std::vector<const char*>& required, bool kw_only) {
  for (const cJSON* c = d->child; c; c = c->next) {
    bool ok = false;
    for (const char* k : known) ok = ok || std::strcmp(k, c->string) == 0;
    if (!ok) return std::string(cls) + ".__init__() got an unexpected keyword argument '" + c->string + "'";
  }
  std::vector<std::string> missing;
  for (const char* k : required)
    if (!cJSON_GetObjectItemCaseSensitive(d, k)) missing.push_back(k);
  if (missing.empty()) return "";
  return std::string(cls) + ".__init__() missing " + std::to_string(missing.size()) + " required " +
         (kw_only ? "keyword-only" : "positional") + " argument" + (missing.size() > 1 ? "s" : "") + ": " +
         py_and_list(missing);
}

bool truthy(const cJSON* v) {
  if (v == nullptr || cJSON_IsNull(v) || cJSON_IsFalse(v)) return false;
  if (cJSON_IsString(v)) return v->valuestring[0] != '\0';
  if (cJSON_IsNumber(v)) return v->valuedouble != 0;
  if (cJSON_IsArray(v) || cJSON_IsObject(v)) return cJSON_GetArraySize(v) > 0;
  return true;
}

// base64.b64decode(s, validate=True) length, or -1 when s is not standard base64.
long b64_decoded_len(const std::string& s) {
  if (s.size() % 4) return -1;
  size_t pad = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (c == '=' && i + 2 >= s.size()) { ++pad; continue; }
    if (!alpha || pad) return -1;
  }
  return static_cast<long>(s.size() / 4 * 3 - pad);
}

// decode_nccl_unique_id (0.30+): exactly one rendezvous mode.
bool check_rendezvous(const cJSON* info, bool* uid_mode, std::string* err) {
  const std::string ctx = "NCCLWeightTransferInitInfo";
  const cJSON* uid = cJSON_GetObjectItemCaseSensitive(info, "nccl_unique_id_b64");
  const cJSON* addr = cJSON_GetObjectItemCaseSensitive(info, "master_address");
  const cJSON* port = cJSON_GetObjectItemCaseSensitive(info, "master_port");
  bool has_uid = truthy(uid), has_addr = addr && !cJSON_IsNull(addr), has_port = port && !cJSON_IsNull(port);
  if (has_uid && (has_addr || has_port)) {
    *err = ctx + ": pass nccl_unique_id_b64 OR master_address/master_port, not both";
    return false;
  }
  if (!has_uid) {
    if (has_addr && has_port) return true;
    *err = ctx + ": need nccl_unique_id_b64, or both master_address and master_port (got master_address=" +
           py_repr(addr) + ", master_port=" + py_repr(port) + ")";
    return false;
  }
  long n = cJSON_IsString(uid) ? b64_decoded_len(uid->valuestring) : -1;
  if (n < 0) {
    *err = ctx + ": nccl_unique_id_b64 is not valid standard base64 (URL-safe base64 is not accepted)";
    return false;
  }
  if (n != 128) {
    *err = ctx + ": nccl_unique_id_b64 must decode to 128 bytes, got " + std::to_string(n);
    return false;
  }
  *uid_mode = true;
  return true;
}

}  // namespace

bool vllm_parse_init_info(const VllmFeatures& f, const cJSON* info, VllmInit* out, std::string* err) {
  const std::string prefix = std::string("Invalid init_info for ") + kEngine + ": ";
  if (!cJSON_IsObject(info)) {
    *err = prefix + "vllm.distributed.weight_transfer.nccl_common.NCCLWeightTransferInitInfo() argument after ** must "
                    "be a mapping, not " + py_type_name(info);
    return false;
  }
  std::vector<const char*> known = {"master_address", "master_port", "rank_offset", "world_size",
                                    "packed", "packed_buffer_size_bytes", "packed_num_buffers"};
  std::vector<const char*> required = {"master_address", "master_port", "rank_offset", "world_size"};
  if (f.unique_id_mode) {
    known.push_back("nccl_unique_id_b64");
    required = {"rank_offset", "world_size"};
  }
  std::string e = bind_error("NCCLWeightTransferInitInfo", info, known, required, f.unique_id_mode);
  if (!e.empty()) { *err = prefix + e; return false; }
  if (f.unique_id_mode && !check_rendezvous(info, &out->unique_id, err)) return false;
  out->packed = truthy(cJSON_GetObjectItemCaseSensitive(info, "packed"));
  if (out->unique_id) return true;
  // The dataclass checks no types; the TCP rendezvous needs these (wording is this engine's).
  const cJSON* addr = cJSON_GetObjectItemCaseSensitive(info, "master_address");
  const char* names[] = {"master_port", "rank_offset", "world_size"};
  int64_t* dst[] = {&out->master_port, &out->rank_offset, &out->world_size};
  if (!cJSON_IsString(addr)) { *err = std::string("master_address must be a str, got ") + py_type_name(addr); return false; }
  out->master_address = addr->valuestring;
  for (int i = 0; i < 3; ++i)
    if (!json_int(cJSON_GetObjectItemCaseSensitive(info, names[i]), dst[i])) {
      *err = std::string(names[i]) + " must be an int, got " + py_type_name(cJSON_GetObjectItemCaseSensitive(info, names[i]));
      return false;
    }
  return true;
}

bool vllm_parse_wsync_init_info(const cJSON* info, VllmInit* out, std::string* group, std::string* err) {
  const std::string prefix = std::string("Invalid init_info for WsyncWeightTransferEngine: ");
  if (!cJSON_IsObject(info)) {
    *err = prefix + "WsyncInitInfo() argument after ** must be a mapping, not " + py_type_name(info);
    return false;
  }
  std::string e = bind_error("WsyncInitInfo", info, {"store_addr", "rank_offset", "world_size", "group_name"},
                             {"store_addr", "rank_offset", "world_size"}, false);
  if (!e.empty()) { *err = prefix + e; return false; }
  const cJSON* addr = cJSON_GetObjectItemCaseSensitive(info, "store_addr");
  const std::string a = cJSON_IsString(addr) ? addr->valuestring : "";
  const size_t colon = a.rfind(':');
  const std::string digits = colon == std::string::npos ? "" : a.substr(colon + 1);
  bool ok = colon != std::string::npos && colon > 0 && !digits.empty() && digits.size() <= 5;
  int64_t port = 0;
  for (char c : digits) {
    ok = ok && c >= '0' && c <= '9';
    port = port * 10 + (c - '0');
  }
  if (!ok || port <= 0 || port > 65535) {
    *err = "init_info.store_addr must be 'host:port', got " + py_repr(addr);
    return false;
  }
  std::string host = a.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  out->master_address = host;
  out->master_port = port;
  const char* names[] = {"rank_offset", "world_size"};
  int64_t* dst[] = {&out->rank_offset, &out->world_size};
  for (int i = 0; i < 2; ++i)
    if (!json_int(cJSON_GetObjectItemCaseSensitive(info, names[i]), dst[i]) || *dst[i] < 1 || *dst[i] > 65536) {
      *err = std::string("init_info.") + names[i] + " must be an integer from 1 to 65536, got " +
             py_repr(cJSON_GetObjectItemCaseSensitive(info, names[i]));
      return false;
    }
  const cJSON* g = cJSON_GetObjectItemCaseSensitive(info, "group_name");
  *group = cJSON_IsString(g) ? g->valuestring : "wsync";
  return true;
}

bool vllm_parse_update_info(const VllmFeatures& f, const cJSON* d, std::vector<RawTensor>* out, bool* names_given,
                            std::string* err) {
  const std::string prefix = std::string("Invalid update_info for ") + kEngine + ": ";
  if (!cJSON_IsObject(d)) {
    *err = prefix + "vllm.distributed.weight_transfer.nccl_engine.NCCLWeightTransferUpdateInfo() argument after ** must "
                    "be a mapping, not " + py_type_name(d);
    return false;
  }
  std::vector<const char*> required;
  if (!f.update_reuse) required = {"names", "dtype_names", "shapes"};
  std::string e = bind_error("NCCLWeightTransferUpdateInfo", d, {"names", "dtype_names", "shapes"}, required, false);
  if (!e.empty()) { *err = prefix + e; return false; }
  const char* keys[] = {"names", "dtype_names", "shapes"};
  JsonPtr empty(cJSON_CreateArray());
  const cJSON* lists[3];
  for (int i = 0; i < 3; ++i) {
    const cJSON* v = cJSON_GetObjectItemCaseSensitive(d, keys[i]);
    lists[i] = v ? v : empty.get();
    if (!cJSON_IsArray(lists[i])) {  // __post_init__'s len() on a non-sequence
      *err = prefix + "object of type '" + py_type_name(lists[i]) + "' has no len()";
      return false;
    }
  }
  int n = cJSON_GetArraySize(lists[0]);
  for (int i = 1; i < 3; ++i)
    if (cJSON_GetArraySize(lists[i]) != n) {
      *err = std::string("`") + keys[i] + "` should be of the same size as `names`: got " +
             std::to_string(cJSON_GetArraySize(lists[i])) + " and " + std::to_string(n);
      return false;
    }
  for (const cJSON* c = lists[1]->child; c; c = c->next)
    if (!cJSON_IsString(c)) { *err = std::string("attribute name must be string, not '") + py_type_name(c) + "'"; return false; }
  for (const cJSON* c = lists[2]->child; c; c = c->next) {
    int64_t x;
    bool ok = cJSON_IsArray(c);
    for (const cJSON* k = ok ? c->child : nullptr; k; k = k->next) ok = ok && json_int(k, &x);
    if (!ok) { *err = "empty(): argument 'size' must be tuple of ints, but found element of type " + std::string(py_type_name(c)); return false; }
  }
  for (const cJSON* c = lists[0]->child; c; c = c->next)
    if (!cJSON_IsString(c)) { *err = "names must be strings, got " + std::string(py_type_name(c)); return false; }
  bool differ = false;
  *out = zip_tensors(lists[0], lists[1], lists[2], &differ);
  *names_given = n > 0;
  return true;
}

}  // namespace refeng
