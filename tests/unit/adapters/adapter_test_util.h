// Shared helpers of the HTTP adapter tests: load a built adapter plugin through the core's loader,
// create instances with options, build the requests of a step, and check JSON bodies field by
// field (exact key sets, JSON types and values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <cJSON.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "loader/plugin_loader.h"
#include "wsync_plugin.h"

namespace adapter_test {

#define EXPECT_CONTAINS(hay, needle) \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos) << "\"" << (needle) << "\" not in:\n" << (hay)

using Options = std::vector<std::pair<std::string, std::string>>;

// The plugin built into build/lib/wsync, loaded once per process by path.
inline const wsync_adapter_v1_t* load(const std::string& name) {
  wsync::LoadedAdapter la;
  std::string path = std::string(WSYNC_TEST_PLUGIN_DIR) + "/libwsync_adapter_" + name + ".so";
  wsync_status_t st = wsync::load_adapter(path, &la);
  EXPECT_EQ(st, WSYNC_OK) << wsync::last_error();
  return st == WSYNC_OK ? la.table : nullptr;
}

// One adapter instance, destroyed with the object.
class Instance {
 public:
  Instance(const wsync_adapter_v1_t* t, const Options& opts, uint32_t num_receivers = 4) : t_(t) {
    std::vector<wsync_option_t> o;
    for (const auto& kv : opts) o.push_back(WSYNC_OPTION(kv.first.c_str(), kv.second.c_str()));
    wsync_adapter_params_t p = WSYNC_ADAPTER_PARAMS_INIT;
    p.num_receivers = num_receivers;
    p.group_name = "wsync_test_group";
    p.options = o.empty() ? nullptr : o.data();
    p.num_options = o.size();
    status_ = t_->create(&p, &self_);
    error_ = status_ == WSYNC_OK ? "" : wsync::last_error();
  }
  ~Instance() {
    if (self_ != nullptr) t_->destroy(self_);
  }
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  void* self() const { return self_; }
  wsync_status_t status() const { return status_; }
  const std::string& error() const { return error_; }

 private:
  const wsync_adapter_v1_t* t_;
  void* self_ = nullptr;
  wsync_status_t status_ = WSYNC_OK;
  std::string error_;
};

struct Tensor {
  std::string name;
  int32_t dtype;
  std::vector<int64_t> shape;
};

// A step and the storage its pointers refer to. Defaults are distinct, recognisable values.
class Step {
 public:
  explicit Step(int32_t kind, std::vector<Tensor> tensors = {}) : tensors_(std::move(tensors)) {
    std::memset(&s_, 0, sizeof s_);
    s_.struct_size = static_cast<uint32_t>(sizeof s_);
    s_.step = kind;
    s_.server_index = 1;
    s_.server_gpus = 2;
    s_.rank_offset = 3;
    s_.world_size = 7;
    s_.master_address = "10.1.2.3";
    s_.master_port = 29512;
    s_.group_name = "wsync_g";
    s_.bucket_bytes = 0;
    s_.update_index = 5;
    s_.version = 42;
    for (const auto& t : tensors_) {
      name_ptrs_.push_back(t.name.c_str());
      dtypes_.push_back(t.dtype);
      ndims_.push_back(static_cast<int32_t>(t.shape.size()));
      for (int d = 0; d < WSYNC_MAX_NDIM; ++d)
        shapes_.push_back(d < static_cast<int>(t.shape.size()) ? t.shape[static_cast<size_t>(d)] : 0);
    }
    s_.num_tensors = tensors_.size();
    if (!tensors_.empty()) {
      s_.names = name_ptrs_.data();
      s_.dtypes = dtypes_.data();
      s_.ndims = ndims_.data();
      s_.shapes = shapes_.data();
    }
  }
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;
  wsync_engine_step_t* operator->() { return &s_; }
  wsync_engine_step_t* get() { return &s_; }
  std::vector<int32_t>& ndims() { return ndims_; }
  std::vector<int64_t>& shapes() { return shapes_; }
  std::vector<int32_t>& dtypes() { return dtypes_; }
  std::vector<const char*>& names() { return name_ptrs_; }
  // A transport property the core passes in the step (plugin ABI 1.2, what get_needs asked for).
  void property(const char* key, const char* value) {
    props_.push_back(WSYNC_OPTION(key, value));
    s_.properties = props_.data();
    s_.num_properties = props_.size();
  }

 private:
  wsync_engine_step_t s_;
  std::vector<wsync_option_t> props_;
  std::vector<Tensor> tensors_;
  std::vector<const char*> name_ptrs_;
  std::vector<int32_t> dtypes_;
  std::vector<int32_t> ndims_;
  std::vector<int64_t> shapes_;
};

// A copy of one built request.
struct Request {
  uint32_t struct_size;
  int32_t method;
  std::string path;
  bool has_body;
  std::string body;
  uint32_t idempotent;
  int32_t reply;
};

struct Built {
  wsync_status_t status;
  std::string error;
  uint32_t num_out;
  std::vector<Request> requests;
};

inline Built build(const wsync_adapter_v1_t* t, void* self, const wsync_engine_step_t* step) {
  Built b;
  const wsync_http_request_t* out = nullptr;
  uint32_t n = 12345;
  b.status = t->build_requests(self, step, &out, &n);
  b.error = b.status == WSYNC_OK ? "" : wsync::last_error();
  b.num_out = n;
  if (b.status == WSYNC_OK && n > 0) {
    EXPECT_NE(out, nullptr);
    for (uint32_t i = 0; out != nullptr && i < n; ++i) {
      Request r;
      r.struct_size = out[i].struct_size;
      r.method = out[i].method;
      r.path = out[i].path ? out[i].path : "(null)";
      r.has_body = out[i].body != nullptr;
      r.body = out[i].body ? out[i].body : "";
      r.idempotent = out[i].idempotent;
      r.reply = out[i].reply;
      b.requests.push_back(r);
    }
  }
  return b;
}

// ---- JSON ----

struct JsonDeleter {
  void operator()(cJSON* j) const { cJSON_Delete(j); }
};
using Json = std::unique_ptr<cJSON, JsonDeleter>;

inline Json parse(const std::string& text) {
  Json j(cJSON_Parse(text.c_str()));
  EXPECT_NE(j.get(), nullptr) << "not JSON: " << text;
  return j;
}

// The object's keys, in order (duplicates kept, so a duplicate shows).
inline std::vector<std::string> keys_of(const cJSON* obj) {
  std::vector<std::string> k;
  for (const cJSON* c = obj ? obj->child : nullptr; c != nullptr; c = c->next) k.push_back(c->string ? c->string : "");
  return k;
}

// The object has exactly these keys (in this order: the adapters write a fixed order), no others.
#define EXPECT_KEYS(obj, ...)                                                      \
  do {                                                                             \
    ASSERT_TRUE(cJSON_IsObject(obj));                                              \
    EXPECT_EQ(::adapter_test::keys_of(obj), (std::vector<std::string>{__VA_ARGS__})); \
  } while (0)

inline const cJSON* field(const cJSON* obj, const char* key) {
  const cJSON* f = cJSON_GetObjectItemCaseSensitive(obj, key);
  EXPECT_NE(f, nullptr) << "no field '" << key << "'";
  return f;
}

inline void expect_string(const cJSON* obj, const char* key, const std::string& value) {
  const cJSON* f = field(obj, key);
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(cJSON_IsString(f)) << key << " is not a string";
  EXPECT_EQ(std::string(f->valuestring), value) << key;
}

inline void expect_int(const cJSON* obj, const char* key, int64_t value) {
  const cJSON* f = field(obj, key);
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(cJSON_IsNumber(f)) << key << " is not a number";
  EXPECT_EQ(f->valuedouble, static_cast<double>(value)) << key;
}

inline void expect_bool(const cJSON* obj, const char* key, bool value) {
  const cJSON* f = field(obj, key);
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(cJSON_IsBool(f)) << key << " is not a bool";
  EXPECT_EQ(cJSON_IsTrue(f) != 0, value) << key;
}

inline void expect_null(const cJSON* obj, const char* key) {
  const cJSON* f = field(obj, key);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(cJSON_IsNull(f)) << key << " is not null";
}

inline void expect_strings(const cJSON* obj, const char* key, const std::vector<std::string>& values) {
  const cJSON* f = field(obj, key);
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(cJSON_IsArray(f)) << key << " is not an array";
  std::vector<std::string> got;
  for (const cJSON* c = f->child; c != nullptr; c = c->next) {
    ASSERT_TRUE(cJSON_IsString(c)) << key << " holds a non-string";
    got.push_back(c->valuestring);
  }
  EXPECT_EQ(got, values) << key;
}

inline void expect_shapes(const cJSON* obj, const char* key, const std::vector<std::vector<int64_t>>& values) {
  const cJSON* f = field(obj, key);
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(cJSON_IsArray(f)) << key << " is not an array";
  std::vector<std::vector<int64_t>> got;
  for (const cJSON* c = f->child; c != nullptr; c = c->next) {
    ASSERT_TRUE(cJSON_IsArray(c)) << key << " holds a non-array";
    std::vector<int64_t> dims;
    for (const cJSON* d = c->child; d != nullptr; d = d->next) {
      ASSERT_TRUE(cJSON_IsNumber(d)) << key << " holds a non-number dimension";
      ASSERT_EQ(d->valuedouble, static_cast<double>(static_cast<int64_t>(d->valuedouble))) << "not an integer";
      dims.push_back(static_cast<int64_t>(d->valuedouble));
    }
    got.push_back(dims);
  }
  EXPECT_EQ(got, values) << key;
}

// ---- request shape ----

inline void expect_request(const Request& r, int32_t method, const std::string& path, bool has_body,
                           uint32_t idempotent, int32_t reply) {
  EXPECT_EQ(r.struct_size, sizeof(wsync_http_request_t));
  EXPECT_EQ(r.method, method) << path;
  EXPECT_EQ(r.path, path);
  EXPECT_EQ(r.has_body, has_body) << path << " body: " << r.body;
  EXPECT_EQ(r.idempotent, idempotent) << path;
  EXPECT_EQ(r.reply, reply) << path;
}

// The common table checks: name, caps (HTTP only), ABI, and a struct_size that covers
// take_reply (plugin ABI 1.3: the core then sends PROBE, RESET and ABANDON).
inline void expect_table(const wsync_adapter_v1_t* t, const char* name) {
  ASSERT_NE(t, nullptr);
  EXPECT_STREQ(t->name, name);
  EXPECT_NE(t->version, nullptr);
  EXPECT_EQ(t->abi_version, static_cast<uint32_t>(WSYNC_PLUGIN_ABI_VERSION));
  EXPECT_EQ(t->caps, static_cast<uint64_t>(WSYNC_ADAPTER_CAP_HTTP));
  EXPECT_EQ(t->struct_size, sizeof(wsync_adapter_v1_t));
  EXPECT_NE(t->get_needs, nullptr);
  EXPECT_GE(t->struct_size, offsetof(wsync_adapter_v1_t, build_requests) + sizeof(t->build_requests));
  EXPECT_NE(t->create, nullptr);
  EXPECT_NE(t->get_layout, nullptr);
  EXPECT_NE(t->destroy, nullptr);
  EXPECT_NE(t->build_requests, nullptr);
  EXPECT_GE(t->struct_size, static_cast<uint32_t>(WSYNC_ADAPTER_V1_3_SIZE));
  EXPECT_NE(t->take_reply, nullptr);
}

// What an adapter asks of the transport (get_needs), as key=value strings and property keys.
struct Needs {
  std::vector<std::string> hints;
  std::vector<std::string> properties;
};

inline Needs needs_of(const wsync_adapter_v1_t* t, void* self) {
  Needs n;
  wsync_adapter_needs_t out = WSYNC_ADAPTER_NEEDS_INIT;
  EXPECT_EQ(t->get_needs(self, &out), WSYNC_OK);
  for (uint64_t i = 0; i < out.num_transport_hints; ++i)
    n.hints.push_back(std::string(out.transport_hints[i].key) + "=" + out.transport_hints[i].value);
  for (uint64_t i = 0; i < out.num_transport_properties; ++i) n.properties.push_back(out.transport_properties[i]);
  return n;
}

inline void expect_layout(const wsync_adapter_v1_t* t, int32_t kind) {
  Instance a(t, {});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  wsync_layout_rule_t rule = WSYNC_LAYOUT_RULE_INIT;
  rule.kind = -1;
  rule.alignment = 77;
  rule.allow_split = 9;
  ASSERT_EQ(t->get_layout(a.self(), &rule), WSYNC_OK);
  EXPECT_EQ(rule.struct_size, sizeof(wsync_layout_rule_t));
  EXPECT_EQ(rule.kind, kind);
  EXPECT_EQ(rule.alignment, 1u);
  EXPECT_EQ(rule.allow_split, 0u);
  EXPECT_EQ(t->get_layout(nullptr, &rule), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t->get_layout(a.self(), nullptr), WSYNC_ERR_INVALID_ARGUMENT);
}

// Every malformed step is refused with INVALID_ARGUMENT, a message naming the problem, and
// no requests; none crashes.
inline void expect_step_validation(const wsync_adapter_v1_t* t) {
  Instance a(t, {});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  const std::vector<Tensor> two = {{"w.a", WSYNC_DTYPE_BFLOAT16, {4, 8}}, {"w.b", WSYNC_DTYPE_BFLOAT16, {8}}};
  auto refused = [&](Step& s, const std::string& needle) {
    Built b = build(t, a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT) << needle;
    EXPECT_EQ(b.num_out, 0u) << needle;
    EXPECT_CONTAINS(b.error, needle);
  };
  {
    Built b = build(t, a.self(), nullptr);
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_CONTAINS(b.error, "step is NULL");
  }
  {
    const wsync_http_request_t* out = nullptr;
    uint32_t n = 0;
    Step s(WSYNC_STEP_HEALTH);
    EXPECT_EQ(t->build_requests(nullptr, s.get(), &out, &n), WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(t->build_requests(a.self(), s.get(), nullptr, &n), WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(t->build_requests(a.self(), s.get(), &out, nullptr), WSYNC_ERR_INVALID_ARGUMENT);
  }
  { Step s(WSYNC_STEP_HEALTH); s->struct_size = offsetof(wsync_engine_step_t, version); refused(s, "struct_size"); }
  { Step s(0); refused(s, "unknown step 0"); }
  { Step s(WSYNC_STEP_CHECK + 1); refused(s, "unknown step 13"); }
  { Step s(1000); refused(s, "unknown step 1000"); }
  { Step s(-1); refused(s, "unknown step -1"); }
  { Step s(WSYNC_STEP_UPDATE); refused(s, "no tensors"); }
  { Step s(WSYNC_STEP_UPDATE, two); s->names = nullptr; refused(s, "NULL names array"); }
  { Step s(WSYNC_STEP_UPDATE, two); s->dtypes = nullptr; refused(s, "NULL dtypes array"); }
  { Step s(WSYNC_STEP_UPDATE, two); s->ndims = nullptr; refused(s, "NULL ndims array"); }
  { Step s(WSYNC_STEP_UPDATE, two); s->shapes = nullptr; refused(s, "NULL shapes array"); }
  { Step s(WSYNC_STEP_FINALIZE, two); s->names = nullptr; refused(s, "FINALIZE step has 2 tensors but a NULL names"); }
  { Step s(WSYNC_STEP_UPDATE, two); s.names()[1] = nullptr; refused(s, "tensor 1 has a NULL name"); }
  { Step s(WSYNC_STEP_UPDATE, two); s.names()[0] = ""; refused(s, "tensor 0 has an empty name"); }
  { Step s(WSYNC_STEP_UPDATE, two); s.ndims()[1] = 9; refused(s, "'w.b' has ndim 9"); }
  { Step s(WSYNC_STEP_UPDATE, two); s.ndims()[1] = -1; refused(s, "'w.b' has ndim -1"); }
  { Step s(WSYNC_STEP_UPDATE, two); s.dtypes()[0] = 0; s.dtypes()[1] = 0; refused(s, "'w.a' has invalid dtype 0"); }
  { Step s(WSYNC_STEP_UPDATE, two); s.dtypes()[0] = 13; s.dtypes()[1] = 13; refused(s, "'w.a' has invalid dtype 13"); }
  { Step s(WSYNC_STEP_UPDATE, two); s.shapes()[1] = -8; refused(s, "'w.a' has a negative dimension 1 (-8)"); }
  {
    Step s(WSYNC_STEP_UPDATE, {{"huge", WSYNC_DTYPE_FLOAT64, {INT64_MAX, 4}}});
    refused(s, "'huge' has a size that overflows");
  }
  { Step s(WSYNC_STEP_INIT); s->master_address = nullptr; refused(s, "master_address is NULL"); }
  { Step s(WSYNC_STEP_INIT); s->master_address = ""; refused(s, "master_address is empty"); }
  { Step s(WSYNC_STEP_INIT); s->master_port = 0; refused(s, "master_port 0 is not in 1..65535"); }
  { Step s(WSYNC_STEP_INIT); s->master_port = 65536; refused(s, "master_port 65536 is not in 1..65535"); }
  // After a refusal the instance still works.
  {
    Step s(WSYNC_STEP_HEALTH);
    Built b = build(t, a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_OK);
    EXPECT_EQ(b.num_out, 1u);
  }
}

// Unknown or malformed options are refused at create, naming the key (and, for an unknown key,
// every known one).
inline void expect_unknown_option(const wsync_adapter_v1_t* t, const std::string& known_list) {
  {
    Instance a(t, {{"bogus_key", "1"}});
    EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(a.self(), nullptr);
    EXPECT_CONTAINS(a.error(), "unknown option 'adapter.bogus_key'");
    EXPECT_CONTAINS(a.error(), "(known: " + known_list + ")");
  }
  {
    Instance a(t, {{"adapter.pause", "1"}});  // the core strips the prefix; a leftover one is a typo
    EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_CONTAINS(a.error(), "adapter.adapter.pause");
  }
  for (const char* v : {"2", "", "yes", "01", "true"}) {
    Instance a(t, {{"pause", v}});
    EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT) << v;
    EXPECT_CONTAINS(a.error(), "option 'adapter.pause' must be 0 or 1");
  }
  {
    wsync_adapter_params_t p = WSYNC_ADAPTER_PARAMS_INIT;
    void* self = nullptr;
    p.num_options = 1;  // options NULL
    EXPECT_EQ(t->create(&p, &self), WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(self, nullptr);
    EXPECT_EQ(t->create(nullptr, &self), WSYNC_ERR_INVALID_ARGUMENT);
    p.num_options = 0;
    EXPECT_EQ(t->create(&p, nullptr), WSYNC_ERR_INVALID_ARGUMENT);
  }
  t->destroy(nullptr);  // accepted
}

// The requests of `kind` with default step values (server 1 unless told), for tests that only look
// at routes: "METHOD /path" each.
inline std::vector<std::string> routes(const wsync_adapter_v1_t* t, void* self, int32_t kind, uint32_t server = 1) {
  std::vector<Tensor> one = {{"w", WSYNC_DTYPE_BFLOAT16, {2, 2}}};
  Step s(kind, kind == WSYNC_STEP_UPDATE ? one : std::vector<Tensor>{});
  s->server_index = server;
  Built b = build(t, self, s.get());
  EXPECT_EQ(b.status, WSYNC_OK) << b.error;
  std::vector<std::string> r;
  for (const auto& q : b.requests) r.push_back(std::string(q.method == WSYNC_HTTP_GET ? "GET " : "POST ") + q.path);
  return r;
}

// The routes of a group's whole life at one server with one successful update of two buckets, step
// after step in the order the core sends them, each prefixed with its step: "BEGIN_UPDATE POST /x".
// The release of the server is whatever the instance learnt before (a PROBE answer, the option).
inline std::vector<std::string> life(const wsync_adapter_v1_t* t, void* self, uint32_t server = 1) {
  const std::pair<int32_t, const char*> steps[] = {
      {WSYNC_STEP_HEALTH, "HEALTH"}, {WSYNC_STEP_PROBE, "PROBE"},       {WSYNC_STEP_RESET, "RESET"},
      {WSYNC_STEP_INIT, "INIT"},     {WSYNC_STEP_PAUSE, "PAUSE"},       {WSYNC_STEP_BEGIN_UPDATE, "BEGIN_UPDATE"},
      {WSYNC_STEP_UPDATE, "UPDATE"}, {WSYNC_STEP_UPDATE, "UPDATE"},     {WSYNC_STEP_FINALIZE, "FINALIZE"},
      {WSYNC_STEP_RESUME, "RESUME"}, {WSYNC_STEP_DESTROY, "DESTROY"}};
  std::vector<std::string> r;
  for (const auto& st : steps)
    for (const auto& q : routes(t, self, st.first, server)) r.push_back(std::string(st.second) + " " + q);
  return r;
}

// ---- take_reply (plugin ABI 1.3) ----

struct Took {
  wsync_status_t status;
  std::string error;
};

// Hands an answer to take_reply as the core does, after the step's requests were built. The body
// goes in a heap block of exactly `len` bytes with no NUL after it, so a read past it shows under
// valgrind. A NULL body passes NULL.
inline Took take_raw(const wsync_adapter_v1_t* t, void* self, const wsync_engine_step_t* step, uint32_t index,
                     int32_t http_status, const char* body, uint64_t len) {
  std::unique_ptr<char[]> copy;
  if (body != nullptr) {
    copy.reset(new char[len > 0 ? len : 1]);
    std::memcpy(copy.get(), body, len);
  }
  ::wsync::clear_error();
  Took r;
  r.status = t->take_reply(self, step, index, http_status, copy.get(), len);
  r.error = r.status == WSYNC_OK ? "" : ::wsync::last_error();
  return r;
}

inline Took take(const wsync_adapter_v1_t* t, void* self, const wsync_engine_step_t* step, uint32_t index,
                 int32_t http_status, const std::string& body) {
  return take_raw(t, self, step, index, http_status, body.data(), body.size());
}

// A PROBE step at `server` whose 'engines' count is `gpus`; its requests are built first, as the core
// does before any answer comes.
inline void build_probe(const wsync_adapter_v1_t* t, void* self, Step& s, uint32_t server, uint32_t gpus) {
  s->server_index = server;
  s->server_gpus = gpus;
  Built b = build(t, self, s.get());
  EXPECT_EQ(b.status, WSYNC_OK) << b.error;
}

// The log lines (warn and worse) written while it lives; the default sink comes back after.
class LogCapture {
 public:
  LogCapture() { wsync_set_log_callback(&LogCapture::sink, this, WSYNC_LOG_WARN); }
  ~LogCapture() { wsync_set_log_callback(nullptr, nullptr, 0); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  const std::vector<std::string>& lines() const { return lines_; }
  std::string text() const {
    std::string t;
    for (const auto& l : lines_) t += l + "\n";
    return t;
  }

 private:
  static void sink(void* self, int32_t level, const char* message) {
    static_cast<LogCapture*>(self)->lines_.push_back(std::to_string(level) + " " + message);
  }
  std::vector<std::string> lines_;
};

// The body is exactly the empty object {}.
inline void expect_empty_object(const Request& r) {
  EXPECT_TRUE(r.has_body) << r.path;
  EXPECT_EQ(r.body, "{}") << r.path;
}

}  // namespace adapter_test
