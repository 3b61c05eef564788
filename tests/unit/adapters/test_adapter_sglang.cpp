// adapter_sglang: every step's requests against SGLang's request models (io_struct.py): route,
// method, reply kind, idempotency, and each body field by field with no extra field.
#include "adapter_test_util.h"

using namespace adapter_test;

namespace {

const wsync_adapter_v1_t* T() {
  static const wsync_adapter_v1_t* t = load("sglang");
  return t;
}

class SglangTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(T(), nullptr); }
};

TEST_F(SglangTest, Table) { expect_table(T(), "sglang"); }

TEST_F(SglangTest, LayoutIsElementsOneDtype) { expect_layout(T(), WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE); }

TEST_F(SglangTest, Health) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_HEALTH);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/health", false, 1, WSYNC_REPLY_STATUS);
}

TEST_F(SglangTest, InitBody) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_INIT);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/init_weights_update_group", true, 0, WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[0].body);
  EXPECT_KEYS(j.get(), "master_address", "master_port", "rank_offset", "world_size", "group_name", "backend");
  expect_string(j.get(), "master_address", "10.1.2.3");
  expect_int(j.get(), "master_port", 29512);
  expect_int(j.get(), "rank_offset", 3);
  expect_int(j.get(), "world_size", 7);
  expect_string(j.get(), "group_name", "wsync_g");
  expect_string(j.get(), "backend", "nccl");
}

// SGLang's workers join a torch process group on the sender's store: the transport must publish its
// id where that group reads it and create its communicator lazily. The adapter says so; the core
// forwards it to the transport without reading it.
TEST_F(SglangTest, NeedsTheTorchGroupHints) {
  Instance a(T(), {});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Needs n = needs_of(T(), a.self());
  EXPECT_EQ(n.hints, (std::vector<std::string>{"torch_group=wsync_test_group", "lazy_init=1"}));
  EXPECT_TRUE(n.properties.empty());
}

TEST_F(SglangTest, InitIgnoresTheNcclUniqueId) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_INIT);
  s.property("nccl_unique_id_b64", "QUJD");
  s->rank_offset = 1;
  s->world_size = 3;
  s->master_port = 1;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  Json j = parse(b.requests[0].body);
  EXPECT_KEYS(j.get(), "master_address", "master_port", "rank_offset", "world_size", "group_name", "backend");
  expect_int(j.get(), "master_port", 1);
  expect_int(j.get(), "rank_offset", 1);
  expect_int(j.get(), "world_size", 3);
}

TEST_F(SglangTest, InitNeedsAGroupName) {
  Instance a(T(), {});
  for (const char* g : {static_cast<const char*>(nullptr), ""}) {
    Step s(WSYNC_STEP_INIT);
    s->group_name = g;
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(b.num_out, 0u);
    EXPECT_CONTAINS(b.error, "INIT step (server 1): group_name is");
  }
}

TEST_F(SglangTest, PauseAndResumeOnlyWithThePauseOption) {
  {
    Instance a(T(), {});
    EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_PAUSE).empty());
    EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_RESUME).empty());
  }
  {
    Instance a(T(), {{"pause", "0"}});
    ASSERT_EQ(a.status(), WSYNC_OK);
    EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_PAUSE).empty());
  }
  Instance a(T(), {{"pause", "1"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  {
    Step s(WSYNC_STEP_PAUSE);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << b.error;
    ASSERT_EQ(b.num_out, 1u);
    // Newer SGLang requires a JSON body; {} leaves mode at the engine's default.
    expect_request(b.requests[0], WSYNC_HTTP_POST, "/pause_generation", true, 1, WSYNC_REPLY_JSON);
    EXPECT_EQ(b.requests[0].body, "{}");
  }
  {
    Step s(WSYNC_STEP_RESUME);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << b.error;
    ASSERT_EQ(b.num_out, 1u);
    expect_request(b.requests[0], WSYNC_HTTP_POST, "/continue_generation", true, 1, WSYNC_REPLY_JSON);
    EXPECT_EQ(b.requests[0].body, "{}");
  }
}

TEST_F(SglangTest, PauseMode) {
  for (const char* mode : {"abort", "retract", "in_place"}) {
    Instance a(T(), {{"pause", "1"}, {"pause_mode", mode}});
    ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
    Step s(WSYNC_STEP_PAUSE);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.num_out, 1u);
    Json j = parse(b.requests[0].body);
    EXPECT_KEYS(j.get(), "mode");
    expect_string(j.get(), "mode", mode);
  }
  Instance bad(T(), {{"pause_mode", "keep"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.pause_mode' must be one of abort, retract, in_place, not 'keep'");
}

TEST_F(SglangTest, BeginUpdateSendsNothing) {
  Instance a(T(), {{"pause", "1"}});
  Step s(WSYNC_STEP_BEGIN_UPDATE);
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_OK);
  EXPECT_EQ(b.num_out, 0u);
}

TEST_F(SglangTest, UpdateBody) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_UPDATE, {{"model.layers.0.w", WSYNC_DTYPE_BFLOAT16, {4, 8}},
                             {"model.norm", WSYNC_DTYPE_BFLOAT16, {8}},
                             {"scalar", WSYNC_DTYPE_BFLOAT16, {}},
                             {"big", WSYNC_DTYPE_BFLOAT16, {5000000000LL, 1, 2, 3, 4, 5, 6, 7}}});
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/update_weights_from_distributed", true, 0,
                 WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[0].body);
  EXPECT_KEYS(j.get(), "names", "dtypes", "shapes", "group_name", "flush_cache", "abort_all_requests",
              "weight_version", "load_format");
  expect_strings(j.get(), "names", {"model.layers.0.w", "model.norm", "scalar", "big"});
  expect_strings(j.get(), "dtypes", {"bfloat16", "bfloat16", "bfloat16", "bfloat16"});
  expect_shapes(j.get(), "shapes", {{4, 8}, {8}, {}, {5000000000LL, 1, 2, 3, 4, 5, 6, 7}});
  expect_string(j.get(), "group_name", "wsync_g");
  expect_bool(j.get(), "flush_cache", false);
  expect_bool(j.get(), "abort_all_requests", false);
  expect_null(j.get(), "weight_version");
  expect_string(j.get(), "load_format", "flattened_bucket");
  // int64 dimensions are written exactly, not as doubles ("5e+09").
  EXPECT_CONTAINS(b.requests[0].body, "[5000000000,1,2,3,4,5,6,7]");
}

TEST_F(SglangTest, UpdateDtypeNamesAreTorchNames) {
  const std::vector<std::pair<int32_t, std::string>> all = {
      {WSYNC_DTYPE_BOOL, "bool"},         {WSYNC_DTYPE_INT8, "int8"},         {WSYNC_DTYPE_INT16, "int16"},
      {WSYNC_DTYPE_INT32, "int32"},       {WSYNC_DTYPE_INT64, "int64"},       {WSYNC_DTYPE_UINT8, "uint8"},
      {WSYNC_DTYPE_FLOAT16, "float16"},   {WSYNC_DTYPE_BFLOAT16, "bfloat16"}, {WSYNC_DTYPE_FLOAT32, "float32"},
      {WSYNC_DTYPE_FLOAT64, "float64"},   {WSYNC_DTYPE_FLOAT8_E4M3, "float8_e4m3fn"},
      {WSYNC_DTYPE_FLOAT8_E5M2, "float8_e5m2"}};
  ASSERT_EQ(all.size(), static_cast<size_t>(WSYNC_DTYPE_COUNT - 1));
  Instance a(T(), {});
  for (const auto& d : all) {
    EXPECT_STREQ(wsync_dtype_name(d.first), d.second.c_str()) << "the core's table moved";
    Step s(WSYNC_STEP_UPDATE, {{"x", d.first, {3}}, {"y", d.first, {1}}});
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << b.error;
    Json j = parse(b.requests[0].body);
    expect_strings(j.get(), "dtypes", {d.second, d.second});
  }
}

TEST_F(SglangTest, UpdateRefusesMixedDtypes) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_UPDATE, {{"w.a", WSYNC_DTYPE_BFLOAT16, {4}},
                             {"w.b", WSYNC_DTYPE_BFLOAT16, {4}},
                             {"w.c", WSYNC_DTYPE_FLOAT32, {4}}});
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.num_out, 0u);
  EXPECT_CONTAINS(b.error, "adapter 'sglang'");
  EXPECT_CONTAINS(b.error, "bucket 5 mixes dtypes: tensor 'w.c' is float32 but tensor 'w.a' is bfloat16");
}

TEST_F(SglangTest, FinalizeFlushesThenSetsTheVersion) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_FINALIZE);
  s->version = 18446744073709551615ull;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 2u);
  // Refused (400) while requests run: idempotent so the core retries it.
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/flush_cache", false, 1, WSYNC_REPLY_STATUS);
  expect_request(b.requests[1], WSYNC_HTTP_POST, "/update_weight_version", true, 1, WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[1].body);
  EXPECT_KEYS(j.get(), "new_version", "abort_all_requests");
  expect_string(j.get(), "new_version", "18446744073709551615");
  expect_bool(j.get(), "abort_all_requests", false);
}

TEST_F(SglangTest, FinalizeWithoutTheVersionRoute) {
  Instance a(T(), {{"set_version", "0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_FINALIZE), (std::vector<std::string>{"GET /flush_cache"}));
  Instance bad(T(), {{"set_version", "maybe"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.set_version' must be 0 or 1");
}

TEST_F(SglangTest, Destroy) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_DESTROY);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/destroy_weights_update_group", true, 0,
                 WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[0].body);
  EXPECT_KEYS(j.get(), "group_name");
  expect_string(j.get(), "group_name", "wsync_g");
}

TEST_F(SglangTest, LoadFormatOption) {
  Instance ok(T(), {{"load_format", "flattened_bucket"}});
  EXPECT_EQ(ok.status(), WSYNC_OK) << ok.error();
  Instance bad(T(), {{"load_format", "direct"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.load_format' must be one of flattened_bucket, not 'direct'");
}

TEST_F(SglangTest, UnknownAndBadOptions) { expect_unknown_option(T(), "pause, pause_mode, load_format, set_version"); }

TEST_F(SglangTest, StepValidation) { expect_step_validation(T()); }

// The whole life of a group, with pause on: the route table in order.
TEST_F(SglangTest, LifecycleRouteTable) {
  Instance a(T(), {{"pause", "1"}});
  using V = std::vector<std::string>;
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_HEALTH), V{"GET /health"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_INIT), V{"POST /init_weights_update_group"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_PAUSE), V{"POST /pause_generation"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_UPDATE), V{"POST /update_weights_from_distributed"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_FINALIZE), (V{"GET /flush_cache", "POST /update_weight_version"}));
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{"POST /continue_generation"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{"POST /destroy_weights_update_group"});
}

// Instances do not share request storage.
TEST_F(SglangTest, InstancesAreIndependent) {
  Instance a(T(), {});
  Instance b(T(), {});
  const wsync_http_request_t* ra = nullptr;
  const wsync_http_request_t* rb = nullptr;
  uint32_t na = 0, nb = 0;
  Step init(WSYNC_STEP_INIT);
  Step destroy(WSYNC_STEP_DESTROY);
  ASSERT_EQ(T()->build_requests(a.self(), init.get(), &ra, &na), WSYNC_OK);
  ASSERT_EQ(T()->build_requests(b.self(), destroy.get(), &rb, &nb), WSYNC_OK);
  ASSERT_EQ(na, 1u);
  ASSERT_EQ(nb, 1u);
  EXPECT_STREQ(ra[0].path, "/init_weights_update_group");
  EXPECT_STREQ(rb[0].path, "/destroy_weights_update_group");
}

}  // namespace
