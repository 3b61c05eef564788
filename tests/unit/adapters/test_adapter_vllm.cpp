// adapter_vllm: every step's requests against vLLM's weight-transfer API (api_router.py,
// NCCLWeightTransferInitInfo / update info of each generation): routes, methods, reply kinds,
// idempotency, and init_info / update_info field by field (vLLM rejects unknown keys there).
#include <string>
#include "adapter_test_util.h"

using namespace adapter_test;

namespace {

const wsync_adapter_v1_t* T() {
  static const wsync_adapter_v1_t* t = load("vllm");
  return t;
}

// 128 bytes of base64 (172 characters), standard alphabet.
const char kUid[] =
    "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9Q"
    "UVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn8=";

class VllmTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(T(), nullptr); }
};

Json body_of(const Built& b, size_t i = 0) { return parse(b.requests.at(i).body); }

TEST_F(VllmTest, Table) { expect_table(T(), "vllm"); }

TEST_F(VllmTest, LayoutIsExceedThenFlush) { expect_layout(T(), WSYNC_LAYOUT_EXCEED_THEN_FLUSH); }

// Packed: the bucket size is vLLM's packed_buffer_size_bytes, told to the core in the rule.
TEST_F(VllmTest, LayoutFixesTheBucketSizeToThePackedBuffer) {
  for (const char* size : {"1073741824", "262144"}) {
    Instance a(T(), {{"packed_buffer_size_bytes", size}});
    ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
    wsync_layout_rule_t rule = WSYNC_LAYOUT_RULE_INIT;
    ASSERT_EQ(T()->get_layout(a.self(), &rule), WSYNC_OK);
    EXPECT_EQ(rule.bucket_bytes, std::stoull(size));
  }
  Instance unpacked(T(), {{"packed", "0"}});
  ASSERT_EQ(unpacked.status(), WSYNC_OK) << unpacked.error();
  wsync_layout_rule_t rule = WSYNC_LAYOUT_RULE_INIT;
  ASSERT_EQ(T()->get_layout(unpacked.self(), &rule), WSYNC_OK);
  EXPECT_EQ(rule.bucket_bytes, 0u);
}

TEST_F(VllmTest, Health) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_HEALTH);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/health", false, 1, WSYNC_REPLY_STATUS);
}

TEST_F(VllmTest, InitWithTheStoreAddress) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_INIT);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/init_weight_transfer_engine", true, 0, WSYNC_REPLY_JSON);
  Json j = body_of(b);
  EXPECT_KEYS(j.get(), "init_info");
  const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "init_info");
  EXPECT_KEYS(info, "master_address", "master_port", "rank_offset", "world_size", "packed", "packed_buffer_size_bytes",
              "packed_num_buffers");
  expect_string(info, "master_address", "10.1.2.3");
  expect_int(info, "master_port", 29512);
  expect_int(info, "rank_offset", 3);
  expect_int(info, "world_size", 7);
  expect_bool(info, "packed", true);
  expect_int(info, "packed_buffer_size_bytes", 1073741824);
  expect_int(info, "packed_num_buffers", 2);
}

// vLLM takes the NCCL id in its init request and runs an all-reduce right after NCCL init: the
// adapter asks for the property and for the transport's all-reduce; nobody sets either by hand.
TEST_F(VllmTest, NeedsTheIdPropertyAndTheAllReduce) {
  Instance a(T(), {});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Needs n = needs_of(T(), a.self());
  EXPECT_EQ(n.hints, (std::vector<std::string>{"allreduce_after_init=1"}));
  EXPECT_EQ(n.properties, (std::vector<std::string>{"nccl_unique_id_b64"}));
}

TEST_F(VllmTest, InitWithTheUniqueIdLeavesOutTheAddress) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_INIT);
  s.property("nccl_unique_id_b64", kUid);  // master_address/master_port are set too: they must not be sent
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/init_weight_transfer_engine", true, 0, WSYNC_REPLY_JSON);
  Json j = body_of(b);
  EXPECT_KEYS(j.get(), "init_info");
  const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "init_info");
  EXPECT_KEYS(info, "rank_offset", "world_size", "nccl_unique_id_b64", "packed", "packed_buffer_size_bytes",
              "packed_num_buffers");
  EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(info, "master_address"), nullptr);
  EXPECT_EQ(cJSON_GetObjectItemCaseSensitive(info, "master_port"), nullptr);
  expect_string(info, "nccl_unique_id_b64", kUid);
  expect_int(info, "rank_offset", 3);
  expect_int(info, "world_size", 7);
  // The unique-id path needs no store: a missing address is fine there.
  s->master_address = nullptr;
  s->master_port = 0;
  Built b2 = build(T(), a.self(), s.get());
  EXPECT_EQ(b2.status, WSYNC_OK) << b2.error;
  EXPECT_EQ(b2.requests.at(0).body, b.requests.at(0).body);
}

TEST_F(VllmTest, InitRefusesABadUniqueId) {
  Instance a(T(), {});
  for (const char* bad : {"", "abc", "ab-_", "AB==CD==", "A==="}) {
    Step s(WSYNC_STEP_INIT);
    s.property("nccl_unique_id_b64", bad);
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_EQ(b.num_out, 0u);
    EXPECT_CONTAINS(b.error, "nccl_unique_id_b64 is not standard base64");
  }
}

TEST_F(VllmTest, InitOptions) {
  Instance a(T(), {{"packed", "0"}, {"packed_buffer_size_bytes", "536870912"}, {"packed_num_buffers", "4"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Step s(WSYNC_STEP_INIT);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 1u);
  Json j = body_of(b);
  const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "init_info");
  expect_bool(info, "packed", false);
  expect_int(info, "packed_buffer_size_bytes", 536870912);
  expect_int(info, "packed_num_buffers", 4);
  Instance big(T(), {{"packed_buffer_size_bytes", "8589934592"}});
  ASSERT_EQ(big.status(), WSYNC_OK) << big.error();
  Built b2 = build(T(), big.self(), s.get());
  EXPECT_CONTAINS(b2.requests.at(0).body, "\"packed_buffer_size_bytes\":8589934592");
}

TEST_F(VllmTest, OlderGenerationsKeepPackingOutOfInitInfo) {
  for (const char* gen : {"1", "2"}) {
    Instance a(T(), {{"api_version", gen}});
    ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
    Step s(WSYNC_STEP_INIT);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.num_out, 1u) << b.error;
    Json j = body_of(b);
    EXPECT_KEYS(j.get(), "init_info");
    EXPECT_KEYS(cJSON_GetObjectItemCaseSensitive(j.get(), "init_info"), "master_address", "master_port",
                "rank_offset", "world_size");
    // They have no nccl_unique_id_b64.
    s.property("nccl_unique_id_b64", kUid);
    Built r = build(T(), a.self(), s.get());
    EXPECT_EQ(r.status, WSYNC_ERR_INVALID_ARGUMENT) << gen;
    EXPECT_EQ(r.num_out, 0u);
    EXPECT_CONTAINS(r.error, std::string("vLLM takes only with api_version 3 (configured: ") + gen + ")");
  }
}

TEST_F(VllmTest, PauseAndResume) {
  {
    Instance a(T(), {});
    EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_PAUSE).empty());
    EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_RESUME).empty());
  }
  Instance a(T(), {{"pause", "1"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  {
    Step s(WSYNC_STEP_PAUSE);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.num_out, 1u);
    expect_request(b.requests[0], WSYNC_HTTP_POST, "/pause?mode=keep", false, 1, WSYNC_REPLY_JSON);
  }
  {
    Step s(WSYNC_STEP_RESUME);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.num_out, 1u);
    expect_request(b.requests[0], WSYNC_HTTP_POST, "/resume", false, 1, WSYNC_REPLY_JSON);
  }
  for (const char* mode : {"abort", "wait", "keep"}) {
    Instance m(T(), {{"pause", "1"}, {"pause_mode", mode}});
    EXPECT_EQ(routes(T(), m.self(), WSYNC_STEP_PAUSE),
              std::vector<std::string>{std::string("POST /pause?mode=") + mode});
  }
  Instance bad(T(), {{"pause_mode", "retract"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.pause_mode' must be one of abort, wait, keep, not 'retract'");
}

TEST_F(VllmTest, BeginUpdate) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_BEGIN_UPDATE);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/start_weight_update", true, 0, WSYNC_REPLY_JSON);
  EXPECT_EQ(b.requests[0].body, "{}");
}

TEST_F(VllmTest, UpdateBodyIsNewestGeneration) {
  Instance a(T(), {});
  // Mixed dtypes are fine in packed mode (bytes, no padding).
  Step s(WSYNC_STEP_UPDATE, {{"model.embed", WSYNC_DTYPE_BFLOAT16, {16, 4}},
                             {"model.scale", WSYNC_DTYPE_FLOAT32, {}},
                             {"model.q", WSYNC_DTYPE_FLOAT8_E4M3, {2, 3, 4}}});
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/update_weights", true, 0, WSYNC_REPLY_JSON);
  Json j = body_of(b);
  EXPECT_KEYS(j.get(), "update_info");
  const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "update_info");
  EXPECT_KEYS(info, "names", "dtype_names", "shapes");
  expect_strings(info, "names", {"model.embed", "model.scale", "model.q"});
  expect_strings(info, "dtype_names", {"bfloat16", "float32", "float8_e4m3fn"});
  expect_shapes(info, "shapes", {{16, 4}, {}, {2, 3, 4}});
}

TEST_F(VllmTest, UpdateBodyOfOlderGenerations) {
  Step s(WSYNC_STEP_UPDATE, {{"w", WSYNC_DTYPE_FLOAT16, {2}}});
  {
    Instance a(T(), {{"api_version", "2"}, {"packed_buffer_size_bytes", "4096"}, {"packed_num_buffers", "3"}});
    ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.num_out, 1u) << b.error;
    Json j = body_of(b);
    EXPECT_KEYS(j.get(), "update_info");
    const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "update_info");
    EXPECT_KEYS(info, "names", "dtype_names", "shapes", "packed", "packed_buffer_size_bytes", "packed_num_buffers");
    expect_bool(info, "packed", true);
    expect_int(info, "packed_buffer_size_bytes", 4096);
    expect_int(info, "packed_num_buffers", 3);
  }
  {
    Instance a(T(), {{"api_version", "1"}, {"packed", "0"}});
    ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.num_out, 1u) << b.error;
    Json j = body_of(b);
    const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "update_info");
    EXPECT_KEYS(info, "names", "dtype_names", "shapes", "packed");
    expect_bool(info, "packed", false);
    expect_strings(info, "dtype_names", {"float16"});
  }
  // Generation 1 cannot carry a buffer size: only vLLM's default is accepted.
  Instance def(T(), {{"api_version", "1"}, {"packed_buffer_size_bytes", "1073741824"}});
  EXPECT_EQ(def.status(), WSYNC_OK) << def.error();
  Instance bad(T(), {{"api_version", "1"}, {"packed_buffer_size_bytes", "536870912"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "'adapter.packed_buffer_size_bytes' cannot be sent with api_version 1");
}

// A bucket must be exactly one chunk of vLLM's rule: append, and cut once the total EXCEEDS the
// buffer size (the crossing tensor stays).
TEST_F(VllmTest, UpdateRefusesMoreThanOnePackedChunk) {
  Instance a(T(), {{"packed_buffer_size_bytes", "100"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  {  // 40 + 40 = 80 <= 100, the third crosses and is last: one chunk
    Step s(WSYNC_STEP_UPDATE, {{"a", WSYNC_DTYPE_FLOAT32, {10}}, {"b", WSYNC_DTYPE_FLOAT32, {10}},
                               {"c", WSYNC_DTYPE_FLOAT32, {10}}});
    EXPECT_EQ(build(T(), a.self(), s.get()).status, WSYNC_OK);
  }
  {  // exactly 100 is not "exceeds": the next tensor still belongs to the chunk
    Step s(WSYNC_STEP_UPDATE, {{"a", WSYNC_DTYPE_FLOAT32, {25}}, {"b", WSYNC_DTYPE_INT8, {1}}});
    EXPECT_EQ(build(T(), a.self(), s.get()).status, WSYNC_OK);
  }
  {  // one tensor larger than the buffer is one chunk
    Step s(WSYNC_STEP_UPDATE, {{"a", WSYNC_DTYPE_FLOAT64, {1000}}});
    EXPECT_EQ(build(T(), a.self(), s.get()).status, WSYNC_OK);
  }
  {  // 80 + 40 = 120 > 100 after "b", yet "c" follows: vLLM would expect two broadcasts
    Step s(WSYNC_STEP_UPDATE, {{"a", WSYNC_DTYPE_FLOAT32, {20}}, {"b", WSYNC_DTYPE_FLOAT32, {10}},
                               {"c", WSYNC_DTYPE_UINT8, {1}}});
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(b.num_out, 0u);
    EXPECT_CONTAINS(b.error, "after tensor 'b' it holds 120 bytes > packed_buffer_size_bytes 100, yet tensor 'c'");
  }
}

TEST_F(VllmTest, UnpackedNeedsOneTensorPerBucket) {
  Instance a(T(), {{"packed", "0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Step one(WSYNC_STEP_UPDATE, {{"a", WSYNC_DTYPE_FLOAT32, {10}}});
  EXPECT_EQ(build(T(), a.self(), one.get()).status, WSYNC_OK);
  Step two(WSYNC_STEP_UPDATE, {{"a", WSYNC_DTYPE_FLOAT32, {10}}, {"b", WSYNC_DTYPE_FLOAT32, {1}}});
  Built b = build(T(), a.self(), two.get());
  EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(b.error, "bucket 5 holds 2 tensors ('a', 'b', ...) but with packed=0");
}

TEST_F(VllmTest, Finalize) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_FINALIZE);
  s->version = 7;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/finish_weight_update", true, 0, WSYNC_REPLY_JSON);
  Json j = body_of(b);
  EXPECT_KEYS(j.get(), "weight_version");
  expect_string(j.get(), "weight_version", "7");
}

TEST_F(VllmTest, LifecycleOffSkipsStartAndFinish) {
  Instance a(T(), {{"lifecycle", "0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE).empty());
  EXPECT_TRUE(routes(T(), a.self(), WSYNC_STEP_FINALIZE).empty());
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_UPDATE), std::vector<std::string>{"POST /update_weights"});
}

TEST_F(VllmTest, DestroySendsNothing) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_DESTROY);
  s->group_name = nullptr;  // not needed
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_OK);
  EXPECT_EQ(b.num_out, 0u);
}

TEST_F(VllmTest, UnknownAndBadOptions) {
  expect_unknown_option(
      T(), "pause, pause_mode, packed, packed_buffer_size_bytes, packed_num_buffers, api_version, lifecycle");
  struct Bad {
    const char* key;
    const char* value;
    const char* needle;
  };
  for (const Bad& b : std::vector<Bad>{
           {"api_version", "4", "'adapter.api_version' must be a decimal integer in [1, 3], not '4'"},
           {"api_version", "0", "'adapter.api_version' must be a decimal integer in [1, 3], not '0'"},
           {"packed_num_buffers", "0", "'adapter.packed_num_buffers' must be a decimal integer in [1, 1024]"},
           {"packed_buffer_size_bytes", "0", "'adapter.packed_buffer_size_bytes' must be a decimal integer"},
           {"packed_buffer_size_bytes", "-1", "not '-1'"},
           {"packed_buffer_size_bytes", "1e9", "not '1e9'"},
           {"packed_buffer_size_bytes", "1 GiB", "not '1 GiB'"},
           {"packed_buffer_size_bytes", "99999999999999999999999", "not '99999999999999999999999'"},
           {"packed", "yes", "'adapter.packed' must be 0 or 1"},
           {"lifecycle", "2", "'adapter.lifecycle' must be 0 or 1"},
       }) {
    Instance a(T(), {{b.key, b.value}});
    EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT) << b.key << "=" << b.value;
    EXPECT_CONTAINS(a.error(), b.needle);
  }
}

TEST_F(VllmTest, StepValidation) { expect_step_validation(T()); }

TEST_F(VllmTest, LifecycleRouteTable) {
  Instance a(T(), {{"pause", "1"}});
  using V = std::vector<std::string>;
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_HEALTH), V{"GET /health"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_INIT), V{"POST /init_weight_transfer_engine"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_PAUSE), V{"POST /pause?mode=keep"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{"POST /start_weight_update"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_UPDATE), V{"POST /update_weights"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_FINALIZE), V{"POST /finish_weight_update"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{"POST /resume"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{});
}

}  // namespace
