// Checks of an adapter plugin: the table, create/destroy, get_layout and, for HTTP adapters
// (WSYNC_ADAPTER_CAP_HTTP), build_requests for every step.
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "conformance.h"
#include "loader/plugin_loader.h"

namespace conformance {

namespace {

constexpr size_t kAdapterV10Size = offsetof(wsync_adapter_v1_t, destroy) + sizeof(void (*)(void*));
constexpr size_t kAdapterBuildRequestsEnd = offsetof(wsync_adapter_v1_t, build_requests) + sizeof(void*);
constexpr uint64_t kKnownAdapterCaps =
    WSYNC_ADAPTER_CAP_INBAND_MANIFEST | WSYNC_ADAPTER_CAP_HTTP | WSYNC_ADAPTER_CAP_RETIRED_2;
constexpr size_t kRuleV10Size = offsetof(wsync_layout_rule_t, allow_split) + sizeof(uint32_t);
constexpr size_t kRuleBucketBytesEnd = offsetof(wsync_layout_rule_t, bucket_bytes) + sizeof(uint64_t);
constexpr uint64_t kMinBucket = 4096, kMaxBucket = 1ull << 40;  // the core's limits on bucket_bytes
constexpr uint32_t kMaxRequests = 64;  // more requests than this for one step is a bug
const char kUnknownKey[] = "wsync_conformance_no_such_option";

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

const char* step_label(int step) {
  switch (step) {
    case WSYNC_STEP_HEALTH: return "HEALTH";
    case WSYNC_STEP_INIT: return "INIT";
    case WSYNC_STEP_PAUSE: return "PAUSE";
    case WSYNC_STEP_BEGIN_UPDATE: return "BEGIN_UPDATE";
    case WSYNC_STEP_UPDATE: return "UPDATE";
    case WSYNC_STEP_FINALIZE: return "FINALIZE";
    case WSYNC_STEP_RESUME: return "RESUME";
    case WSYNC_STEP_DESTROY: return "DESTROY";
    case WSYNC_STEP_PROBE: return "PROBE";
    case WSYNC_STEP_RESET: return "RESET";
    case WSYNC_STEP_ABANDON: return "ABANDON";
    case WSYNC_STEP_CHECK: return "CHECK";
    default: return "?";
  }
}

// 1.3: the adapter reads replies, and the core sends it PROBE, RESET and ABANDON.
bool has_take_reply(const wsync_adapter_v1_t* t) {
  return WSYNC_HAS_FIELD(t, wsync_adapter_v1_t, take_reply) && t->take_reply != nullptr;
}
// 1.7: it says what a server holds after ABANDON, and the core sends it CHECK.
bool has_held(const wsync_adapter_v1_t* t) { return WSYNC_HAS_FIELD(t, wsync_adapter_v1_t, held) && t->held != nullptr; }
int last_step(const wsync_adapter_v1_t* t) {
  return has_held(t) ? WSYNC_STEP_CHECK : has_take_reply(t) ? WSYNC_STEP_ABANDON : WSYNC_STEP_DESTROY;
}

bool has_http(const wsync_adapter_v1_t* t) {
  return (t->caps & WSYNC_ADAPTER_CAP_HTTP) && t->struct_size >= kAdapterBuildRequestsEnd && t->build_requests;
}

// The user's --option list as the ABI's option array (strings owned by the config).
std::vector<wsync_option_t> user_options(const Config& cfg) {
  std::vector<wsync_option_t> v;
  for (const auto& kv : cfg.options) {
    wsync_option_t o = WSYNC_OPTION(kv.first.c_str(), kv.second.c_str());
    v.push_back(o);
  }
  return v;
}

// A valid instance (with the user's options), or nullptr after a failure was reported.
void* create_valid(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  std::vector<wsync_option_t> opts = user_options(cfg);
  wsync_adapter_params_t p = WSYNC_ADAPTER_PARAMS_INIT;
  p.num_receivers = 3;
  p.group_name = "conformance";
  p.options = opts.empty() ? nullptr : opts.data();
  p.num_options = opts.size();
  void* self = nullptr;
  c.step("create with valid params" + std::string(opts.empty() ? "" : " and the --option list"));
  wsync_status_t st = t->create(&p, &self);
  if (st != WSYNC_OK) {
    c.fail("create with valid params failed: " + status_str(st) + ": " + last_error() +
           (opts.empty() ? " (an adapter that needs options: pass them with --option key=value)" : ""));
    return nullptr;
  }
  if (self == nullptr) {
    c.fail("create returned WSYNC_OK but no instance (*out is NULL)");
    return nullptr;
  }
  return self;
}

// ---- steps ------------------------------------------------------------------------------------

// A base64 text of 128 bytes, like an NCCL unique id.
std::string fake_nccl_id() {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned char b[129];
  for (int i = 0; i < 128; ++i) b[i] = static_cast<unsigned char>(i * 7 + 3);
  b[128] = 0;
  for (int i = 0; i < 128; i += 3) {
    unsigned v = (b[i] << 16) | ((i + 1 < 128 ? b[i + 1] : 0) << 8) | (i + 2 < 128 ? b[i + 2] : 0);
    out += a[(v >> 18) & 63];
    out += a[(v >> 12) & 63];
    out += i + 1 < 128 ? a[(v >> 6) & 63] : '=';
    out += i + 2 < 128 ? a[v & 63] : '=';
  }
  return out;
}

struct TensorSpec {
  std::string name;
  int32_t dtype;
  std::vector<int64_t> shape;
};

// One engine step with storage for what its pointers point to. Call wire() before use.
struct StepData {
  wsync_engine_step_t s;
  std::string master = "127.0.0.1", group = "conformance", nccl_id = fake_nccl_id();
  bool with_nccl_id = true;
  std::vector<TensorSpec> tensors;
  std::vector<const char*> names;
  std::vector<int32_t> dtypes, ndims;
  std::vector<int64_t> shapes;
  wsync_option_t id_property = WSYNC_OPTION("nccl_unique_id_b64", "");

  StepData(int step, int variant) {
    std::memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.step = step;
    if (variant == 0) {  // the first of two servers, 2 GPUs, with an NCCL id
      s.server_index = 0;
      s.server_gpus = 2;
      s.rank_offset = 1;
    } else {  // the second, 1 GPU, no NCCL id (another transport)
      s.server_index = 1;
      s.server_gpus = 1;
      s.rank_offset = 3;
      with_nccl_id = false;
    }
    s.world_size = 4;
    s.master_port = 29500;
    if (step == WSYNC_STEP_UPDATE) {
      tensors = {{"model.embed_tokens.weight", WSYNC_DTYPE_BFLOAT16, {32000, 4096}},
                 {"model.layers.0.input_layernorm.weight", WSYNC_DTYPE_FLOAT32, {4096}},
                 {"model.layers.0.mlp.experts.w13", WSYNC_DTYPE_FLOAT8_E4M3, {8, 2, 1408, 4096}},
                 {"model.step", WSYNC_DTYPE_INT64, {}}};
      s.update_index = static_cast<uint64_t>(variant) + 3;
      s.bucket_bytes = 32000ull * 4096 * 2 + 4096 * 4 + 8ull * 2 * 1408 * 4096 + 8;
    }
    if (step == WSYNC_STEP_FINALIZE) s.version = 7;
  }
  StepData(const StepData&) = delete;
  StepData& operator=(const StepData&) = delete;

  wsync_engine_step_t* wire() {
    s.master_address = master.c_str();
    s.group_name = group.c_str();
    // A transport property, as the core passes what get_needs asked for (plugin ABI 1.2).
    id_property.value = nccl_id.c_str();
    s.properties = with_nccl_id ? &id_property : nullptr;
    s.num_properties = with_nccl_id ? 1 : 0;
    names.clear(), dtypes.clear(), ndims.clear(), shapes.clear();
    for (const auto& t : tensors) {
      names.push_back(t.name.c_str());
      dtypes.push_back(t.dtype);
      ndims.push_back(static_cast<int32_t>(t.shape.size()));
      for (int d = 0; d < WSYNC_MAX_NDIM; ++d) shapes.push_back(d < static_cast<int>(t.shape.size()) ? t.shape[d] : 0);
    }
    s.num_tensors = tensors.size();
    s.names = tensors.empty() ? nullptr : names.data();
    s.dtypes = tensors.empty() ? nullptr : dtypes.data();
    s.ndims = tensors.empty() ? nullptr : ndims.data();
    s.shapes = tensors.empty() ? nullptr : shapes.data();
    return &s;
  }
};

uint64_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case WSYNC_DTYPE_BOOL: case WSYNC_DTYPE_INT8: case WSYNC_DTYPE_UINT8:
    case WSYNC_DTYPE_FLOAT8_E4M3: case WSYNC_DTYPE_FLOAT8_E5M2: return 1;
    case WSYNC_DTYPE_INT16: case WSYNC_DTYPE_FLOAT16: case WSYNC_DTYPE_BFLOAT16: return 2;
    case WSYNC_DTYPE_INT32: case WSYNC_DTYPE_FLOAT32: return 4;
    default: return 8;
  }
}

// Make an UPDATE step one the core could send to this adapter: the planner packs buckets by the
// adapter's layout rule, so an ELEMENTS_ONE_DTYPE adapter never sees two dtypes in a bucket.
// bucket_bytes follows the rule's alignment (BYTES_MIXED pads each offset).
void fit_layout(StepData* d, const wsync_layout_rule_t& rule) {
  if (d->tensors.empty()) return;
  if (rule.kind == WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE)
    for (auto& t : d->tensors) t.dtype = d->tensors[0].dtype;
  const uint64_t align = rule.kind == WSYNC_LAYOUT_BYTES_MIXED && rule.alignment > 0 ? rule.alignment : 1;
  uint64_t off = 0;
  for (const auto& t : d->tensors) {
    uint64_t n = dtype_bytes(t.dtype);
    for (int64_t e : t.shape) n *= static_cast<uint64_t>(e);
    off = (off + align - 1) / align * align + n;
  }
  d->s.bucket_bytes = off;
}

// The instance's layout rule (WSYNC_LAYOUT_RULE_INIT if get_layout fails: its own check says so).
wsync_layout_rule_t layout_of(const wsync_adapter_v1_t* t, void* self) {
  wsync_layout_rule_t r = WSYNC_LAYOUT_RULE_INIT;
  if (t->get_layout(self, &r) != WSYNC_OK) {
    wsync_layout_rule_t d = WSYNC_LAYOUT_RULE_INIT;
    r = d;
  }
  return r;
}

std::string preview(const char* body) {
  if (body == nullptr) return "(no body)";
  std::string b(body);
  return b.size() > 160 ? b.substr(0, 160) + "..." : b;
}

// The requests of one successful build_requests: everything the core will rely on. `json_fail`:
// a malformed body is a failure (else a warning, for the escaping check).
void check_requests(Ctx& c, const std::string& what, const wsync_http_request_t* reqs, uint32_t n, bool json_fail,
                    bool reads_replies) {
  if (n > kMaxRequests) {
    c.fail(what + ": " + std::to_string(n) + " requests (more than " + std::to_string(kMaxRequests) + " is a bug)");
    return;
  }
  if (n > 0 && reqs == nullptr) {
    c.fail(what + ": " + std::to_string(n) + " requests but *out is NULL");
    return;
  }
  if (n == 0) c.note(what + ": no request (nothing to send at this step)");
  for (uint32_t i = 0; i < n; ++i) {
    const wsync_http_request_t& r = reqs[i];
    const std::string w = what + " request " + std::to_string(i);
    // The core reads a request whose struct_size covers at least everything before `reply`.
    if (r.struct_size < offsetof(wsync_http_request_t, reply)) {
      c.fail(w + ": struct_size " + std::to_string(r.struct_size) + " is too small (set it to sizeof(wsync_http_request_t))");
      continue;
    }
    if (r.struct_size < sizeof(wsync_http_request_t))
      c.warn(w + ": struct_size " + std::to_string(r.struct_size) + " does not cover 'reply'; the core assumes WSYNC_REPLY_STATUS");
    if (r.method != WSYNC_HTTP_GET && r.method != WSYNC_HTTP_POST)
      c.fail(w + ": method " + std::to_string(r.method) + " is neither WSYNC_HTTP_GET nor WSYNC_HTTP_POST");
    if (r.path == nullptr) {
      c.fail(w + ": path is NULL");
    } else {
      std::string p(r.path);
      if (p.empty() || p[0] != '/') c.fail(w + ": path '" + p + "' does not start with '/'");
      for (unsigned char ch : p)
        if (ch <= 0x20 || ch == 0x7f) {
          c.fail(w + ": path '" + p + "' holds a space or control character (percent-encode it)");
          break;
        }
      if (p.size() > 8192) c.fail(w + ": path is " + std::to_string(p.size()) + " bytes long");
    }
    if (r.body != nullptr) {
      const char* b = r.body;
      while (*b == ' ' || *b == '\t' || *b == '\n' || *b == '\r') ++b;
      std::string why;
      if (*b != '{' && *b != '[') {
        c.fail(w + ": the body is not a JSON object or array: " + preview(r.body));
      } else if (!json_valid(r.body, &why)) {
        const std::string m = w + ": the body is not valid JSON (" + why + "): " + preview(r.body);
        if (json_fail)
          c.fail(m);
        else
          c.warn(m);
      }
      if (r.method == WSYNC_HTTP_GET) c.warn(w + ": a GET with a body (many servers ignore or refuse it)");
    }
    if (r.idempotent > 1) c.warn(w + ": idempotent is " + std::to_string(r.idempotent) + "; use 0 or 1");
    if (r.struct_size >= sizeof(wsync_http_request_t) && r.reply != WSYNC_REPLY_STATUS &&
        r.reply != WSYNC_REPLY_SUCCESS_FIELD && r.reply != WSYNC_REPLY_JSON && r.reply != WSYNC_REPLY_TO_ADAPTER)
      c.fail(w + ": reply kind " + std::to_string(r.reply) + " is not a WSYNC_REPLY_*");
    if (r.struct_size >= sizeof(wsync_http_request_t) && r.reply == WSYNC_REPLY_TO_ADAPTER && !reads_replies)
      c.fail(w + ": reply kind WSYNC_REPLY_TO_ADAPTER but the table has no take_reply to read it");
    c.note(w + ": " + (r.method == WSYNC_HTTP_GET ? "GET " : "POST ") + (r.path ? r.path : "(null)") +
           (r.idempotent ? " [idempotent]" : "") + " reply " + std::to_string(r.reply) + " body " + preview(r.body));
  }
}

// build_requests(step) must be refused and not crash.
void expect_step_refused(Ctx& c, const wsync_adapter_v1_t* t, void* self, const wsync_engine_step_t* s,
                         const std::string& what, bool advice_only = false) {
  const wsync_http_request_t* out = nullptr;
  uint32_t n = 0;
  c.step("build_requests(" + what + ")");
  ::wsync::clear_error();
  wsync_status_t st = t->build_requests(self, s, &out, &n);
  if (st == WSYNC_OK) {
    const std::string m = "build_requests(" + what + ") returned WSYNC_OK; it must be refused";
    if (advice_only)
      c.warn(m);
    else
      c.fail(m);
    return;
  }
  c.note("build_requests(" + what + ") -> " + status_str(st) + ": " + last_error());
  if (last_error().empty()) c.warn("build_requests(" + what + ") was refused without a message (call host->set_error)");
}

// ---- the checks --------------------------------------------------------------------------------

void check_load(Ctx& c, const Config& cfg) {
  ::wsync::LoadedAdapter a;
  c.step("load_adapter(" + cfg.path + ")");
  wsync_status_t st = ::wsync::load_adapter(cfg.path, &a);
  if (st == WSYNC_ERR_NO_DEVICE) {
    c.skip("no device: " + last_error());
    return;
  }
  if (st != WSYNC_OK) {
    c.fail("the loader refused it: " + status_str(st) + ": " + last_error());
    return;
  }
  c.expect(a.table != nullptr && a.handle != nullptr, "the loader returned OK without a table or handle");
  c.note("loaded from " + a.path);
}

void check_table(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  c.expect(t->struct_size >= kAdapterV10Size, "struct_size " + std::to_string(t->struct_size) +
                                                  " is smaller than a plugin ABI 1.0 table (" +
                                                  std::to_string(kAdapterV10Size) + ")");
  c.expect(t->abi_version == WSYNC_PLUGIN_ABI_VERSION,
           "abi_version is " + std::to_string(t->abi_version) + ", not " + std::to_string(WSYNC_PLUGIN_ABI_VERSION));
  if (c.expect(t->name != nullptr, "name is NULL")) {
    c.expect(cfg.name == t->name, std::string("the table calls itself '") + t->name + "' but the file is libwsync_adapter_" +
                                      cfg.name + ".so (users load it by that name; they must agree)");
    for (const char* p = t->name; *p; ++p)
      if (!(std::isalnum(static_cast<unsigned char>(*p)) || *p == '_' || *p == '-')) {
        c.fail(std::string("name '") + t->name + "' may only hold letters, digits, '_' and '-'");
        break;
      }
  }
  c.expect(t->version != nullptr && t->version[0] != '\0', "version is NULL or empty (give the plugin's release)");
  if (t->caps & ~kKnownAdapterCaps)
    c.fail("caps has unknown bits: " + hex(t->caps & ~kKnownAdapterCaps) + " (known: INBAND_MANIFEST, HTTP)");
  c.expect(t->create && t->get_layout && t->destroy, "a required function (create, get_layout, destroy) is NULL");
  if (t->caps & WSYNC_ADAPTER_CAP_HTTP) {
    if (t->struct_size < kAdapterBuildRequestsEnd)
      c.fail("caps has WSYNC_ADAPTER_CAP_HTTP but struct_size " + std::to_string(t->struct_size) +
             " does not cover build_requests (a 1.1 table is " + std::to_string(kAdapterBuildRequestsEnd) + " bytes)");
    else if (t->build_requests == nullptr)
      c.fail("caps has WSYNC_ADAPTER_CAP_HTTP but build_requests is NULL (required with CAP_HTTP)");
  }
  if (!(t->caps & (WSYNC_ADAPTER_CAP_HTTP | WSYNC_ADAPTER_CAP_INBAND_MANIFEST)))
    c.fail("caps has neither INBAND_MANIFEST nor HTTP: the core cannot drive such an engine");
  if ((t->caps & WSYNC_ADAPTER_CAP_HTTP) && (t->caps & WSYNC_ADAPTER_CAP_INBAND_MANIFEST))
    c.warn("caps has both HTTP and INBAND_MANIFEST; an engine is either driven over HTTP or embeds a wsync receiver");
  if (t->struct_size > sizeof(wsync_adapter_v1_t))
    c.note("the table (" + std::to_string(t->struct_size) + " bytes) is newer than this suite's header (" +
           std::to_string(sizeof(wsync_adapter_v1_t)) + "); the extra entries are not checked");
  c.note(std::string("adapter '") + (t->name ? t->name : "?") + "' " + (t->version ? t->version : "?") + ", caps " +
         hex(t->caps) + ", table " + std::to_string(t->struct_size) + " bytes");
}

void check_create_null(Ctx& c, const wsync_adapter_v1_t* t) {
  wsync_adapter_params_t p = WSYNC_ADAPTER_PARAMS_INIT;
  void* self = nullptr;
  c.step("create(NULL, &out)");
  c.refused(t->create(nullptr, &self), "create(NULL, &out)");
  if (self != nullptr) c.fail("create(NULL, &out) set *out");
  c.step("create(&params, NULL)");
  c.refused(t->create(&p, nullptr), "create(&params, NULL)");
}

void check_create_garbage(Ctx& c, const wsync_adapter_v1_t* t) {
  void* self = nullptr;
  {
    wsync_adapter_params_t p = WSYNC_ADAPTER_PARAMS_INIT;
    p.options = nullptr;
    p.num_options = 2;
    c.step("create with options = NULL and num_options = 2");
    c.refused(t->create(&p, &self), "create with options = NULL and num_options = 2");
    if (self) t->destroy(self), self = nullptr;
  }
  {
    wsync_option_t o[1] = {WSYNC_OPTION(nullptr, "1")};
    wsync_adapter_params_t p = WSYNC_ADAPTER_PARAMS_INIT;
    p.options = o;
    p.num_options = 1;
    c.step("create with an option whose key is NULL");
    c.refused(t->create(&p, &self), "create with an option whose key is NULL");
    if (self) t->destroy(self), self = nullptr;
  }
  {
    wsync_adapter_params_t p = WSYNC_ADAPTER_PARAMS_INIT;
    p.struct_size = 0;
    c.step("create with params.struct_size = 0");
    wsync_status_t st = t->create(&p, &self);
    if (st == WSYNC_OK)
      c.warn("create accepted params with struct_size 0; read a field only when struct_size covers it, and refuse "
             "params too small for the fields you need");
    if (self) t->destroy(self), self = nullptr;
  }
}

void check_unknown_option(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  std::vector<wsync_option_t> opts = user_options(cfg);
  wsync_option_t bad = WSYNC_OPTION(kUnknownKey, "1");
  opts.push_back(bad);
  wsync_adapter_params_t p = WSYNC_ADAPTER_PARAMS_INIT;
  p.group_name = "conformance";
  p.options = opts.data();
  p.num_options = opts.size();
  void* self = nullptr;
  c.step(std::string("create with the unknown option '") + kUnknownKey + "'");
  ::wsync::clear_error();
  wsync_status_t st = t->create(&p, &self);
  if (self != nullptr && st == WSYNC_OK) t->destroy(self);
  if (c.refused(st, std::string("create with the unknown option '") + kUnknownKey + "'", WSYNC_ERR_INVALID_ARGUMENT))
    c.expect(contains(last_error(), kUnknownKey),
             std::string("the error message does not name the key '") + kUnknownKey + "': \"" + last_error() + "\"");
}

void check_destroy_null(Ctx& c, const wsync_adapter_v1_t* t) {
  c.step("destroy(NULL)");
  t->destroy(nullptr);
}

void check_layout(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  void* a = create_valid(c, cfg, t);
  if (a == nullptr) return;
  void* b = create_valid(c, cfg, t);  // instances are independent
  wsync_layout_rule_t r = WSYNC_LAYOUT_RULE_INIT;
  r.kind = -1, r.alignment = 0, r.allow_split = 7;  // must all be written
  c.step("get_layout(self, &rule)");
  wsync_status_t st = t->get_layout(a, &r);
  if (st != WSYNC_OK) {
    c.fail("get_layout failed: " + status_str(st) + ": " + last_error());
  } else {
    c.expect(r.kind == WSYNC_LAYOUT_BYTES_MIXED || r.kind == WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE ||
                 r.kind == WSYNC_LAYOUT_EXCEED_THEN_FLUSH,
             "get_layout: kind " + std::to_string(r.kind) + " is not a WSYNC_LAYOUT_*");
    c.expect(r.alignment != 0 && (r.alignment & (r.alignment - 1)) == 0,
             "get_layout: alignment " + std::to_string(r.alignment) + " is not a power of two");
    if (r.alignment > (1u << 20)) c.warn("get_layout: alignment " + std::to_string(r.alignment) + " is above 1 MiB");
    c.expect(r.allow_split == 0 || r.allow_split == 1, "get_layout: allow_split " + std::to_string(r.allow_split) + " is not 0 or 1");
    if (r.struct_size >= kRuleBucketBytesEnd && r.bucket_bytes != 0 &&
        (r.bucket_bytes < kMinBucket || r.bucket_bytes > kMaxBucket))
      c.fail("get_layout: bucket_bytes " + std::to_string(r.bucket_bytes) + " is outside 4096..2^40 (0 = the group decides)");
    if ((t->caps & WSYNC_ADAPTER_CAP_HTTP) && r.allow_split)
      c.warn("get_layout: an HTTP adapter allows split tensors, but the engine step carries whole tensors only");
    c.note("layout: kind " + std::to_string(r.kind) + ", alignment " + std::to_string(r.alignment) + ", allow_split " +
           std::to_string(r.allow_split));
  }
  {
    // A core built against the plugin ABI 1.0 header passes a 16-byte rule: nothing past it may
    // be written (that would be the caller's stack).
    struct {
      wsync_layout_rule_t rule;
      unsigned char canary[32];
    } old;
    std::memset(&old, 0xa5, sizeof old);
    old.rule.struct_size = static_cast<uint32_t>(kRuleV10Size);
    c.step("get_layout(self, &rule) with a 1.0 rule (struct_size " + std::to_string(kRuleV10Size) + ")");
    wsync_status_t st10 = t->get_layout(a, &old.rule);
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&old);
    size_t first = 0;
    for (size_t i = kRuleV10Size; i < sizeof old && first == 0; ++i)
      if (bytes[i] != 0xa5) first = i;
    if (first != 0)
      c.fail("get_layout with a rule of struct_size " + std::to_string(kRuleV10Size) + " (plugin ABI 1.0) wrote past it, at byte " +
             std::to_string(first) + "; write a field only when out->struct_size covers it");
    else if (st10 != WSYNC_OK)
      c.warn("get_layout with a 1.0 rule (struct_size " + std::to_string(kRuleV10Size) + ") failed: " + status_str(st10) +
             " (an older core could not use this adapter)");
  }
  c.step("get_layout(self, NULL)");
  if (t->get_layout(a, nullptr) == WSYNC_OK) c.warn("get_layout(self, NULL) returned WSYNC_OK");
  c.step("destroy both instances");
  if (b) t->destroy(b);
  t->destroy(a);
}

void check_build_all_steps(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  void* self = create_valid(c, cfg, t);
  if (self == nullptr) return;
  c.step("get_layout");
  const wsync_layout_rule_t rule = layout_of(t, self);
  for (int variant = 0; variant < 2; ++variant) {
    for (int step = WSYNC_STEP_HEALTH; step <= last_step(t); ++step) {
      StepData d(step, variant);
      if (rule.kind == WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE && variant == 1)
        for (auto& ts : d.tensors) ts.dtype = WSYNC_DTYPE_FLOAT32;
      fit_layout(&d, rule);
      const std::string what = std::string(step_label(step)) + " (server " + std::to_string(variant) + ")";
      const wsync_http_request_t* out = nullptr;
      uint32_t n = 0;
      c.step("build_requests(" + what + ")");
      ::wsync::clear_error();
      wsync_status_t st = t->build_requests(self, d.wire(), &out, &n);
      if (st != WSYNC_OK) {
        c.fail("build_requests(" + what + ") with a well-formed step failed: " + status_str(st) + ": " + last_error());
        continue;
      }
      check_requests(c, what, out, n, true, has_take_reply(t));
    }
  }
  // An update of an empty bucket is not something the core sends; nothing is asserted about it.
  c.step("destroy");
  t->destroy(self);
}

void check_build_escaping(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  void* self = create_valid(c, cfg, t);
  if (self == nullptr) return;
  StepData d(WSYNC_STEP_UPDATE, 0);
  d.tensors = {{"weird \"quoted\" name", WSYNC_DTYPE_FLOAT32, {2}},
               {"back\\slash/and\ttab", WSYNC_DTYPE_FLOAT32, {2}},
               {"caf\xc3\xa9.\xe5\xb1\x82.weight", WSYNC_DTYPE_BFLOAT16, {2, 2}}};
  d.group = "group \"with\" quotes";
  c.step("get_layout");
  fit_layout(&d, layout_of(t, self));
  const wsync_http_request_t* out = nullptr;
  uint32_t n = 0;
  c.step("build_requests(UPDATE with names that need JSON escaping)");
  wsync_status_t st = t->build_requests(self, d.wire(), &out, &n);
  if (st != WSYNC_OK)
    c.warn("build_requests(UPDATE with names holding quotes, a backslash, a tab and UTF-8) failed: " + status_str(st) +
           ": " + last_error());
  else
    check_requests(c, "UPDATE with names that need escaping", out, n, false, has_take_reply(t));
  t->destroy(self);
}

void check_build_bad_struct_size(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  void* self = create_valid(c, cfg, t);
  if (self == nullptr) return;
  for (int step : {WSYNC_STEP_HEALTH, WSYNC_STEP_UPDATE}) {
    for (uint32_t size : {0u, 4u}) {
      StepData d(step, 0);
      wsync_engine_step_t* s = d.wire();
      s->struct_size = size;
      expect_step_refused(c, t, self, s, std::string(step_label(step)) + " with struct_size " + std::to_string(size));
    }
  }
  {
    // An update step that ends before its tensor arrays: the adapter cannot have them.
    StepData d(WSYNC_STEP_UPDATE, 0);
    wsync_engine_step_t* s = d.wire();
    s->struct_size = static_cast<uint32_t>(offsetof(wsync_engine_step_t, names));
    expect_step_refused(c, t, self, s, "UPDATE with a struct_size that ends before 'names'", true);
  }
  t->destroy(self);
}

// 1.3: the answers of PROBE are untrusted bytes from the network. Whatever they hold, take_reply
// returns a status (with a message when it refuses) and never crashes; the next steps still build.
void check_take_reply_garbage(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  if (!has_take_reply(t)) {
    c.skip("no take_reply (plugin ABI 1.2 or older): the core reads no reply for this adapter");
    return;
  }
  void* self = create_valid(c, cfg, t);
  if (self == nullptr) return;
  StepData d(WSYNC_STEP_PROBE, 0);
  const wsync_http_request_t* out = nullptr;
  uint32_t n = 0;
  c.step("build_requests(PROBE)");
  if (t->build_requests(self, d.wire(), &out, &n) != WSYNC_OK) {
    c.fail("build_requests(PROBE) failed: " + last_error());
    t->destroy(self);
    return;
  }
  const std::string big(1 << 20, '{');
  const struct {
    int32_t status;
    std::string body;
  } answers[] = {{200, "{}"}, {200, "not json"}, {200, "\"a string\""}, {200, "[1,2,3]"}, {404, "{\"detail\":\"Not Found\"}"},
                 {500, "Internal Server Error"}, {200, big}, {200, "{\"version\": 12, \"tp_size\": \"x\", \"world_size\": -1}"},
                 {200, "{\"version\": \"99999999999999999999.1\", \"tp_size\": 1e308}"}, {204, ""}};
  for (uint32_t i = 0; i < n; ++i) {
    if (out == nullptr || out[i].reply != WSYNC_REPLY_TO_ADAPTER) continue;
    for (const auto& a : answers) {
      c.step("take_reply(PROBE request " + std::to_string(i) + ", HTTP " + std::to_string(a.status) + ", " +
             std::to_string(a.body.size()) + " bytes)");
      ::wsync::clear_error();
      wsync_status_t st = t->take_reply(self, d.wire(), i, a.status, a.body.empty() ? nullptr : a.body.data(), a.body.size());
      if (st != WSYNC_OK && last_error().empty()) c.warn("take_reply refused an answer without a message");
    }
  }
  StepData init(WSYNC_STEP_INIT, 0);  // still usable after garbage
  c.step("build_requests(INIT) after the garbage");
  ::wsync::clear_error();
  (void)t->build_requests(self, init.wire(), &out, &n);
  t->destroy(self);
}

void check_build_unknown_step(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  void* self = create_valid(c, cfg, t);
  if (self == nullptr) return;
  for (int step : {0, last_step(t) + 1, -1, 1000, 0x7fffffff}) {
    StepData d(step, 0);
    const wsync_http_request_t* out = nullptr;
    uint32_t n = 0;
    const std::string what = "step " + std::to_string(step);
    c.step("build_requests(" + what + ")");
    ::wsync::clear_error();
    wsync_status_t st = t->build_requests(self, d.wire(), &out, &n);
    if (c.refused(st, "build_requests(" + what + ")", WSYNC_ERR_INVALID_ARGUMENT, true) && last_error().empty())
      c.warn("build_requests(" + what + ") was refused without a message (name the step)");
  }
  t->destroy(self);
}

void check_build_null_arrays(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  void* self = create_valid(c, cfg, t);
  if (self == nullptr) return;
  {
    StepData d(WSYNC_STEP_UPDATE, 0);
    wsync_engine_step_t* s = d.wire();
    s->names = nullptr, s->dtypes = nullptr, s->ndims = nullptr, s->shapes = nullptr;
    expect_step_refused(c, t, self, s, "UPDATE with num_tensors " + std::to_string(s->num_tensors) + " and NULL arrays");
  }
  const char* fields[] = {"names", "dtypes", "ndims", "shapes"};
  for (int f = 0; f < 4; ++f) {
    StepData d(WSYNC_STEP_UPDATE, 0);
    wsync_engine_step_t* s = d.wire();
    if (f == 0) s->names = nullptr;
    if (f == 1) s->dtypes = nullptr;
    if (f == 2) s->ndims = nullptr;
    if (f == 3) s->shapes = nullptr;
    expect_step_refused(c, t, self, s, std::string("UPDATE with ") + fields[f] + " = NULL");
  }
  {
    StepData d(WSYNC_STEP_UPDATE, 0);
    wsync_engine_step_t* s = d.wire();
    d.names[1] = nullptr;
    expect_step_refused(c, t, self, s, "UPDATE with names[1] = NULL", true);
  }
  {
    StepData d(WSYNC_STEP_UPDATE, 0);
    wsync_engine_step_t* s = d.wire();
    d.ndims[0] = WSYNC_MAX_NDIM + 1;
    expect_step_refused(c, t, self, s, "UPDATE with ndims[0] = WSYNC_MAX_NDIM + 1", true);
  }
  t->destroy(self);
}

void check_build_null_args(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  void* self = create_valid(c, cfg, t);
  if (self == nullptr) return;
  StepData d(WSYNC_STEP_HEALTH, 0);
  const wsync_http_request_t* out = nullptr;
  uint32_t n = 0;
  c.step("build_requests(self, NULL step, ...)");
  if (t->build_requests(self, nullptr, &out, &n) == WSYNC_OK) c.warn("build_requests with a NULL step returned WSYNC_OK");
  c.step("build_requests(self, step, NULL, &n)");
  if (t->build_requests(self, d.wire(), nullptr, &n) == WSYNC_OK) c.warn("build_requests with out = NULL returned WSYNC_OK");
  c.step("build_requests(self, step, &out, NULL)");
  if (t->build_requests(self, d.wire(), &out, nullptr) == WSYNC_OK)
    c.warn("build_requests with num_out = NULL returned WSYNC_OK");
  t->destroy(self);
}

// 1.2: what the adapter asks of the transport. The core forwards hints without reading them and
// asks the transport for each property, so every key must be a usable string.
void check_needs(Ctx& c, const Config& cfg, const wsync_adapter_v1_t* t) {
  if (!WSYNC_HAS_FIELD(t, wsync_adapter_v1_t, get_needs) || t->get_needs == nullptr) {
    c.skip("no get_needs (a table older than 1.2, or nothing to ask): the core passes no hints");
    return;
  }
  void* self = create_valid(c, cfg, t);
  if (self == nullptr) return;
  wsync_adapter_needs_t n = WSYNC_ADAPTER_NEEDS_INIT;
  c.step("get_needs");
  wsync_status_t st = t->get_needs(self, &n);
  if (c.expect(st == WSYNC_OK, "get_needs failed: " + status_str(st) + ": " + last_error())) {
    c.expect(n.num_transport_hints <= 64 && n.num_transport_properties <= 64, "more than 64 hints or properties");
    c.expect(n.num_transport_hints == 0 || n.transport_hints != nullptr, "num_transport_hints > 0 but the array is NULL");
    c.expect(n.num_transport_properties == 0 || n.transport_properties != nullptr,
             "num_transport_properties > 0 but the array is NULL");
    for (uint64_t i = 0; n.transport_hints && i < n.num_transport_hints && i < 64; ++i) {
      const wsync_option_t& h = n.transport_hints[i];
      if (!c.expect(h.key != nullptr && h.key[0] != '\0' && h.value != nullptr, "hint " + std::to_string(i) +
                                                                                 " has a NULL or empty key, or a NULL value"))
        continue;
      c.note(std::string("hint ") + h.key + "=" + h.value);
    }
    for (uint64_t i = 0; n.transport_properties && i < n.num_transport_properties && i < 64; ++i) {
      const char* k = n.transport_properties[i];
      if (c.expect(k != nullptr && k[0] != '\0', "property " + std::to_string(i) + " is NULL or empty"))
        c.note(std::string("property ") + k);
    }
  }
  c.step("get_needs(self, NULL)");
  st = t->get_needs(self, nullptr);
  c.expect(st != WSYNC_OK, "get_needs accepted a NULL output");
  c.step("destroy");
  t->destroy(self);
}

}  // namespace

Summary run_adapter_suite(const Config& cfg) {
  Summary sum;
  // 1. The load itself, isolated: an entry function that crashes must not take the suite down.
  CheckResult load = run_check(cfg, {"load: through the real loader (wsync::load_adapter)", [&](Ctx& c) { check_load(c, cfg); }});
  report(cfg, load, &sum);
  if (load.verdict == Verdict::Skip) {
    sum.no_device = true;
    if (!cfg.quiet) std::printf("skipped: no device (the plugin refuses to load without one)\n");
    return sum;
  }
  if (load.verdict == Verdict::Fail) return sum;
  ::wsync::LoadedAdapter la;
  if (::wsync::load_adapter(cfg.path, &la) != WSYNC_OK || la.table == nullptr) {  // now in this process
    ++sum.failed;
    return sum;
  }
  const wsync_adapter_v1_t* t = la.table;

  std::vector<Check> checks = {
      {"table: struct_size, abi_version, name, version, caps, required functions", [&](Ctx& c) { check_table(c, cfg, t); }},
      {"create: NULL params or NULL out is refused", [&](Ctx& c) { check_create_null(c, t); }},
      {"create: garbage options are refused (NULL array, NULL key)", [&](Ctx& c) { check_create_garbage(c, t); }},
      {"create: an unknown option is refused with WSYNC_ERR_INVALID_ARGUMENT naming the key",
       [&](Ctx& c) { check_unknown_option(c, cfg, t); }},
      {"destroy(NULL) is safe", [&](Ctx& c) { check_destroy_null(c, t); }},
      {"get_layout: a valid rule", [&](Ctx& c) { check_layout(c, cfg, t); }},
      {"get_needs: hints and properties are usable strings (1.2)", [&](Ctx& c) { check_needs(c, cfg, t); }},
  };
  for (const auto& ch : checks) report(cfg, run_check(cfg, ch), &sum);
  if (!has_http(t)) {
    CheckResult r;
    r.name = "build_requests: every step, bad steps";
    r.verdict = Verdict::Skip;
    r.records.emplace_back('S', (t->caps & WSYNC_ADAPTER_CAP_HTTP) ? "CAP_HTTP without build_requests (see the table check)"
                                                                    : "not an HTTP adapter (no WSYNC_ADAPTER_CAP_HTTP)");
    report(cfg, r, &sum);
    return sum;
  }
  std::vector<Check> http = {
      {"build_requests: every WSYNC_STEP_* builds well-formed requests", [&](Ctx& c) { check_build_all_steps(c, cfg, t); }},
      {"build_requests: tensor names that need JSON escaping still give valid JSON",
       [&](Ctx& c) { check_build_escaping(c, cfg, t); }},
      {"build_requests: a step with a bad struct_size is refused", [&](Ctx& c) { check_build_bad_struct_size(c, cfg, t); }},
      {"build_requests: an unknown step number is refused", [&](Ctx& c) { check_build_unknown_step(c, cfg, t); }},
      {"build_requests: an update step with NULL tensor arrays is refused", [&](Ctx& c) { check_build_null_arrays(c, cfg, t); }},
      {"build_requests: NULL arguments are refused", [&](Ctx& c) { check_build_null_args(c, cfg, t); }},
      {"take_reply: garbage answers to PROBE never crash it (1.3)", [&](Ctx& c) { check_take_reply_garbage(c, cfg, t); }},
  };
  for (const auto& ch : http) report(cfg, run_check(cfg, ch), &sum);
  return sum;
}

}  // namespace conformance
