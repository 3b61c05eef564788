// adapter_lmdeploy: every step's requests against LMDeploy's weight-update routes (field lists per
// /work/shared/PROTOCOLS.md; LMDeploy's request models are UNCONFIRMED from source): routes,
// methods, reply kinds, idempotency, bodies field by field, the finalize-only request.
#include "adapter_test_util.h"

using namespace adapter_test;

namespace {

const wsync_adapter_v1_t* T() {
  static const wsync_adapter_v1_t* t = load("lmdeploy");
  return t;
}

class LmdeployTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(T(), nullptr); }
};

TEST_F(LmdeployTest, NeedsTheTorchGroupHints) {
  Instance a(T(), {});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Needs n = needs_of(T(), a.self());
  EXPECT_EQ(n.hints, (std::vector<std::string>{"torch_group=wsync_test_group", "lazy_init=1"}));
  EXPECT_TRUE(n.properties.empty());
}

TEST_F(LmdeployTest, Table) { expect_table(T(), "lmdeploy"); }

TEST_F(LmdeployTest, LayoutIsElementsOneDtype) { expect_layout(T(), WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE); }

TEST_F(LmdeployTest, Health) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_HEALTH);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/health", false, 1, WSYNC_REPLY_STATUS);
}

TEST_F(LmdeployTest, InitBody) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_INIT);
  s.property("nccl_unique_id_b64", "QUJD");  // not used: LMDeploy joins through the torch store
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

TEST_F(LmdeployTest, GroupNameIsRequired) {
  Instance a(T(), {});
  for (int kind : {WSYNC_STEP_INIT, WSYNC_STEP_UPDATE, WSYNC_STEP_FINALIZE, WSYNC_STEP_DESTROY}) {
    Step s(kind, kind == WSYNC_STEP_UPDATE ? std::vector<Tensor>{{"w", WSYNC_DTYPE_BFLOAT16, {1}}}
                                           : std::vector<Tensor>{});
    s->group_name = "";
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT) << kind;
    EXPECT_EQ(b.num_out, 0u);
    EXPECT_CONTAINS(b.error, "group_name is empty");
  }
}

// LMDeploy has no pause route: even with pause=1 nothing is sent.
TEST_F(LmdeployTest, PauseAndResumeSendNothing) {
  for (const char* p : {"0", "1"}) {
    Instance a(T(), {{"pause", p}});
    ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
    EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_PAUSE).empty()) << p;
    EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_RESUME).empty()) << p;
    EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE).empty()) << p;
  }
}

TEST_F(LmdeployTest, UpdateBody) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_UPDATE, {{"model.layers.0.mlp.w", WSYNC_DTYPE_FLOAT16, {11, 3}},
                             {"model.layers.0.b", WSYNC_DTYPE_FLOAT16, {3}},
                             {"model.s", WSYNC_DTYPE_FLOAT16, {}}});
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/update_weights_from_distributed", true, 0,
                 WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[0].body);
  EXPECT_KEYS(j.get(), "names", "dtypes", "shapes", "group_name", "load_format", "finished");
  expect_strings(j.get(), "names", {"model.layers.0.mlp.w", "model.layers.0.b", "model.s"});
  expect_strings(j.get(), "dtypes", {"float16", "float16", "float16"});
  expect_shapes(j.get(), "shapes", {{11, 3}, {3}, {}});
  expect_string(j.get(), "group_name", "wsync_g");
  expect_string(j.get(), "load_format", "flattened_bucket");
  expect_bool(j.get(), "finished", false);
}

TEST_F(LmdeployTest, UpdateRefusesMixedDtypes) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_UPDATE, {{"w.a", WSYNC_DTYPE_FLOAT8_E4M3, {4}}, {"w.scale", WSYNC_DTYPE_FLOAT32, {1}}});
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.num_out, 0u);
  EXPECT_CONTAINS(b.error, "adapter 'lmdeploy'");
  EXPECT_CONTAINS(b.error, "tensor 'w.scale' is float32 but tensor 'w.a' is float8_e4m3fn");
}

// The end of an update: the finalize-only request (empty lists, finished=true).
TEST_F(LmdeployTest, FinalizeOnlyRequest) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_FINALIZE);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/update_weights_from_distributed", true, 0,
                 WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[0].body);
  EXPECT_KEYS(j.get(), "names", "dtypes", "shapes", "group_name", "load_format", "finished");
  expect_strings(j.get(), "names", {});
  expect_strings(j.get(), "dtypes", {});
  expect_shapes(j.get(), "shapes", {});
  expect_string(j.get(), "group_name", "wsync_g");
  expect_string(j.get(), "load_format", "flattened_bucket");
  expect_bool(j.get(), "finished", true);
}

TEST_F(LmdeployTest, Destroy) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_DESTROY);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/destroy_weights_update_group", true, 0,
                 WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[0].body);
  EXPECT_KEYS(j.get(), "group_name");
  expect_string(j.get(), "group_name", "wsync_g");
}

TEST_F(LmdeployTest, UnknownAndBadOptions) {
  expect_unknown_option(T(), "pause");
  Instance a(T(), {{"load_format", "flattened_bucket"}});  // an SGLang option, not LMDeploy's
  EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(a.error(), "unknown option 'adapter.load_format' (known: pause)");
}

TEST_F(LmdeployTest, StepValidation) { expect_step_validation(T()); }

TEST_F(LmdeployTest, LifecycleRouteTable) {
  Instance a(T(), {{"pause", "1"}});
  using V = std::vector<std::string>;
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_HEALTH), V{"GET /health"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_INIT), V{"POST /init_weights_update_group"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_PAUSE), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_UPDATE), V{"POST /update_weights_from_distributed"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_FINALIZE), V{"POST /update_weights_from_distributed"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{"POST /destroy_weights_update_group"});
}

}  // namespace
