// adapter_vllm: every step's requests against vLLM's weight-transfer API (0.28 .. 0.33; api_router.py,
// NCCLWeightTransferInitInfo): routes, methods, reply kinds, idempotency, and init_info / update_info
// field by field (vLLM rejects unknown keys there); the PROBE answers (GET /version, GET
// /get_world_size) that pick each server's dialogue and check its worker count, and the POST
// /collective_rpc question (is an update active?) that decides whether RESET finishes one.
#include <string>

#include "adapter_test_util.h"

using namespace adapter_test;

namespace {

using V = std::vector<std::string>;

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

std::string version_json(const std::string& v) { return "{\"version\": \"" + v + "\"}"; }
std::string world_json(const std::string& n) { return "{\"world_size\": " + n + "}"; }
// vLLM's /collective_rpc answer: one str() per worker, e.g. {"results": ["False", "True"]}.
std::string rpc_json(const std::vector<std::string>& results) {
  std::string r = "{\"results\": [";
  for (size_t i = 0; i < results.size(); ++i) r += (i ? ", \"" : "\"") + results[i] + "\"";
  return r + "]}";
}
const char kNotActive[] = "{\"results\": [\"False\", \"False\"]}";  // a fresh server's two workers

// PROBE request `index` at `server` ('engines' count `gpus`): build the step, then hand the answer.
Took answer(const Instance& a, uint32_t index, const std::string& body, uint32_t server = 1, uint32_t gpus = 2,
            int32_t http_status = 200) {
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, server, gpus);
  return take(T(), a.self(), s.get(), index, http_status, body);
}

// The PROBE answers of a healthy server at `server`: release `version`, `gpus` workers. The
// /collective_rpc question (request 2) is answered with `active` (HTTP `active_status`) when given;
// left unanswered, whether an update is active is unknown and RESET finishes as before.
void probed(const Instance& a, const std::string& version, uint32_t server = 1, uint32_t gpus = 2,
            const char* active = nullptr, int32_t active_status = 200) {
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, server, gpus);
  Took v = take(T(), a.self(), s.get(), 0, 200, version_json(version));
  ASSERT_EQ(v.status, WSYNC_OK) << v.error;
  Took w = take(T(), a.self(), s.get(), 1, 200, world_json(std::to_string(gpus)));
  ASSERT_EQ(w.status, WSYNC_OK) << w.error;
  if (active == nullptr) return;
  Took q = take(T(), a.self(), s.get(), 2, active_status, active);
  ASSERT_EQ(q.status, WSYNC_OK) << q.error;  // never a refusal: an unknown answer finishes as before
}

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

TEST_F(VllmTest, InitWithTheStoreAddressNeedsARendezvous) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_INIT);
  s->master_address = "";
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.num_out, 0u);
  EXPECT_CONTAINS(b.error, "INIT step (server 1): master_address is empty");
}

// vLLM takes the NCCL id in its init request and runs an all-reduce right after NCCL init: the
// adapter asks for the property and for the transport's all-reduce; nobody sets either by hand.
TEST_F(VllmTest, NeedsTheIdPropertyAndTheAllReduce) {
  Instance a(T(), {});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Needs n = needs_of(T(), a.self());
  EXPECT_EQ(n.hints, (V{"allreduce_after_init=1"}));
  EXPECT_EQ(n.properties, (V{"nccl_unique_id_b64"}));
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
    EXPECT_CONTAINS(b.error, "INIT step (server 1): nccl_unique_id_b64 is not standard base64");
  }
}

// nccl_unique_id_b64 came in 0.30: an older server with a transport that gives it is refused,
// naming its release and the one that takes the id.
TEST_F(VllmTest, InitRefusesTheUniqueIdBefore030) {
  for (const char* v : {"0.28.0", "0.29.2"}) {
    Instance a(T(), {});
    probed(a, v);
    Step s(WSYNC_STEP_INIT);
    s.property("nccl_unique_id_b64", kUid);
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_UNSUPPORTED) << v;
    EXPECT_EQ(b.num_out, 0u);
    EXPECT_CONTAINS(b.error, std::string("INIT step (server 1): the transport gives nccl_unique_id_b64, which vLLM ") +
                                 v + " does not take");
    EXPECT_CONTAINS(b.error, "use vLLM 0.30 or later");
  }
}

TEST_F(VllmTest, InitWithTheStoreAddressBefore030) {
  Instance a(T(), {});
  probed(a, "0.29.0");
  Step s(WSYNC_STEP_INIT);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  Json j = body_of(b);
  EXPECT_KEYS(cJSON_GetObjectItemCaseSensitive(j.get(), "init_info"), "master_address", "master_port", "rank_offset",
              "world_size", "packed", "packed_buffer_size_bytes", "packed_num_buffers");
}

TEST_F(VllmTest, InitTakesTheUniqueIdFrom030) {
  for (const char* v : {"0.30.0", "0.31.1", "0.33.0"}) {
    Instance a(T(), {});
    probed(a, v);
    Step s(WSYNC_STEP_INIT);
    s.property("nccl_unique_id_b64", kUid);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << v << ": " << b.error;
    Json j = body_of(b);
    expect_string(cJSON_GetObjectItemCaseSensitive(j.get(), "init_info"), "nccl_unique_id_b64", kUid);
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

// ---- pause (on by default: generating during an update crashes vLLM) ----

TEST_F(VllmTest, PauseIsOnByDefault) {
  Instance a(T(), {});
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
}

TEST_F(VllmTest, PauseOffSendsNothing) {
  Instance a(T(), {{"pause", "0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_PAUSE), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{});
}

TEST_F(VllmTest, PauseMode) {
  for (const char* mode : {"abort", "wait", "keep"}) {
    Instance m(T(), {{"pause_mode", mode}});
    EXPECT_EQ(routes(T(), m.self(), WSYNC_STEP_PAUSE), V{std::string("POST /pause?mode=") + mode});
  }
  Instance bad(T(), {{"pause_mode", "retract"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.pause_mode' must be one of abort, wait, keep, not 'retract'");
}

// ---- an update ----

TEST_F(VllmTest, BeginUpdate) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_BEGIN_UPDATE);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/start_weight_update", true, 0, WSYNC_REPLY_JSON);
  expect_empty_object(b.requests[0]);
}

TEST_F(VllmTest, UpdateBody) {
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

// Every supported release gets the same update_info (no packing fields there: vLLM rejects them).
TEST_F(VllmTest, UpdateBodyIsTheSameInEveryRelease) {
  Step s(WSYNC_STEP_UPDATE, {{"w", WSYNC_DTYPE_FLOAT16, {2}}});
  Instance newest(T(), {});
  Built ref = build(T(), newest.self(), s.get());
  ASSERT_EQ(ref.num_out, 1u) << ref.error;
  for (const char* v : {"0.28.0", "0.31.0"}) {
    Instance a(T(), {});
    probed(a, v);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.num_out, 1u) << b.error;
    EXPECT_EQ(b.requests[0].body, ref.requests[0].body) << v;
  }
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

TEST_F(VllmTest, FinalizeFinishesWithTheVersion) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_FINALIZE);
  s->version = 18446744073709551615ull;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/finish_weight_update", true, 0, WSYNC_REPLY_JSON);
  Json j = body_of(b);
  EXPECT_KEYS(j.get(), "weight_version");
  expect_string(j.get(), "weight_version", "18446744073709551615");
}

// After a failure the update is finished without a version: the engine keeps its label.
TEST_F(VllmTest, AbandonFinishesWithoutAVersion) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_ABANDON);
  s->update_index = 3;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/finish_weight_update", true, 0, WSYNC_REPLY_JSON);
  expect_empty_object(b.requests[0]);
}

// ---- RESET and DESTROY: /shutdown_weight_transfer_engine exists from 0.32 ----

TEST_F(VllmTest, ResetFinishesShutsDownAndResumesFrom032) {
  for (const char* v : {"0.32.0", "0.33.0"}) {
    Instance a(T(), {});
    probed(a, v);
    Step s(WSYNC_STEP_RESET);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << b.error;
    ASSERT_EQ(b.num_out, 3u) << v;
    expect_request(b.requests[0], WSYNC_HTTP_POST, "/finish_weight_update", true, 0, WSYNC_REPLY_JSON);
    expect_empty_object(b.requests[0]);
    expect_request(b.requests[1], WSYNC_HTTP_POST, "/shutdown_weight_transfer_engine", false, 0, WSYNC_REPLY_JSON);
    expect_request(b.requests[2], WSYNC_HTTP_POST, "/resume", false, 1, WSYNC_REPLY_JSON);
  }
}

TEST_F(VllmTest, ResetHasNoShutdownBefore032) {
  for (const char* v : {"0.28.0", "0.31.9"}) {
    Instance a(T(), {});
    probed(a, v);
    EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET), (V{"POST /finish_weight_update", "POST /resume"})) << v;
  }
}

// The earlier trainer may have paused even when this one does not: RESET resumes either way.
TEST_F(VllmTest, ResetResumesWhateverThePauseOption) {
  Instance a(T(), {{"pause", "0"}});
  probed(a, "0.33.0");
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET),
            (V{"POST /finish_weight_update", "POST /shutdown_weight_transfer_engine", "POST /resume"}));
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_PAUSE), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{});
}

// ---- RESET asks first: /finish_weight_update only where an update is active ----

// Some worker answers "True": an earlier trainer left an update active, and RESET ends it (without a
// version) before the shutdown and the resume.
TEST_F(VllmTest, ResetFinishesWhenAWorkerAnswersThatAnUpdateIsActive) {
  for (const auto& results : {V{"True", "True"}, V{"False", "True"}, V{"True"}}) {
    Instance a(T(), {});
    probed(a, "0.33.0", 1, 2, rpc_json(results).c_str());
    Step s(WSYNC_STEP_RESET);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << b.error;
    ASSERT_EQ(b.num_out, 3u) << rpc_json(results);
    expect_request(b.requests[0], WSYNC_HTTP_POST, "/finish_weight_update", true, 0, WSYNC_REPLY_JSON);
    expect_empty_object(b.requests[0]);
    expect_request(b.requests[1], WSYNC_HTTP_POST, "/shutdown_weight_transfer_engine", false, 0, WSYNC_REPLY_JSON);
    expect_request(b.requests[2], WSYNC_HTTP_POST, "/resume", false, 1, WSYNC_REPLY_JSON);
  }
}

// Every worker answers "False" (a fresh server): no finish, which vLLM would refuse and log as an
// ERROR; the group's shutdown and the resume are still sent.
TEST_F(VllmTest, ResetSendsNoFinishWhenEveryWorkerAnswersThatNoUpdateIsActive) {
  for (const char* v : {"0.28.0", "0.32.0", "0.33.0"}) {
    Instance a(T(), {});
    probed(a, v, 1, 2, kNotActive);
    const bool shutdown = std::string(v) != "0.28.0";
    EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET),
              (shutdown ? V{"POST /shutdown_weight_transfer_engine", "POST /resume"} : V{"POST /resume"}))
        << v;
  }
  Instance one(T(), {});
  probed(one, "0.33.0", 1, 1, "{\"results\": [\"False\"]}");
  EXPECT_EQ(routes(T(), one.self(), WSYNC_STEP_RESET), (V{"POST /shutdown_weight_transfer_engine", "POST /resume"}));
}

// An answer that says neither (another release, a proxy, a worker without the attribute) leaves it
// unknown: RESET finishes as before (vLLM's refusal is harmless there, only logged). The answer is
// never a refusal of the server.
TEST_F(VllmTest, ResetFinishesWhenTheAnswerIsMissingOrUnexpected) {
  const std::string deep(100000, '[');
  for (const std::string& body :
       {std::string(""), std::string("not json"), std::string("null"), std::string("{}"),
        std::string("[\"False\"]"), std::string("{\"results\": []}"), std::string("{\"results\": \"False\"}"),
        std::string("{\"results\": null}"), std::string("{\"results\": [false, false]}"),
        std::string("{\"results\": [null, null]}"), std::string("{\"results\": [\"false\", \"false\"]}"),
        std::string("{\"results\": [\"False\", 0]}"), std::string("{\"results\": [\"False\", \"None\"]}"),
        std::string("{\"Results\": [\"False\", \"False\"]}"), deep}) {
    Instance a(T(), {});
    probed(a, "0.33.0", 1, 2, body.c_str());
    EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET),
              (V{"POST /finish_weight_update", "POST /shutdown_weight_transfer_engine", "POST /resume"}))
        << body.substr(0, 60);
  }
}

// A question answered with anything but HTTP 200 (no /collective_rpc route: 404; vLLM's failed
// rpc: 500; no dev mode) is unknown too, whatever the body says; the probe still succeeds.
TEST_F(VllmTest, ResetFinishesWhenTheQuestionIsNotAnsweredHttp200) {
  for (int status : {404, 500, 400, 201, 0}) {
    Instance a(T(), {});
    probed(a, "0.33.0", 1, 2, kNotActive, status);
    EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET),
              (V{"POST /finish_weight_update", "POST /shutdown_weight_transfer_engine", "POST /resume"}))
        << status;
  }
}

// Each server's answer counts for that server only, and the latest answer counts.
TEST_F(VllmTest, ResetAsksEachServerItsOwnQuestion) {
  Instance a(T(), {});
  probed(a, "0.33.0", 0, 2, kNotActive);
  probed(a, "0.33.0", 1, 2, rpc_json({"False", "True"}).c_str());
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET, 0), (V{"POST /shutdown_weight_transfer_engine", "POST /resume"}));
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET, 1),
            (V{"POST /finish_weight_update", "POST /shutdown_weight_transfer_engine", "POST /resume"}));
  probed(a, "0.33.0", 1, 2, kNotActive);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET, 1), (V{"POST /shutdown_weight_transfer_engine", "POST /resume"}));
  probed(a, "0.33.0", 0, 2, "not json");
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET, 0),
            (V{"POST /finish_weight_update", "POST /shutdown_weight_transfer_engine", "POST /resume"}));
}

// The answer's body is not NUL-terminated: only body_len bytes are read.
TEST_F(VllmTest, TheUpdateQuestionReadsOnlyTheBodyLength) {
  const std::string good = kNotActive;
  const std::string padded = good + "{\"results\": [\"True\"]}";
  Instance a(T(), {});
  probed(a, "0.33.0");
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, 1, 2);
  ASSERT_EQ(take_raw(T(), a.self(), s.get(), 2, 200, padded.data(), good.size()).status, WSYNC_OK);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET), (V{"POST /shutdown_weight_transfer_engine", "POST /resume"}));
  ASSERT_EQ(take_raw(T(), a.self(), s.get(), 2, 200, good.data(), good.size() - 1).status, WSYNC_OK);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET),
            (V{"POST /finish_weight_update", "POST /shutdown_weight_transfer_engine", "POST /resume"}));
  ASSERT_EQ(take_raw(T(), a.self(), s.get(), 2, 200, nullptr, 0).status, WSYNC_OK);
}

TEST_F(VllmTest, DestroyShutsTheTransferEngineDownFrom032) {
  Instance a(T(), {});
  probed(a, "0.32.0");
  Step s(WSYNC_STEP_DESTROY);
  s->group_name = nullptr;  // not needed
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/shutdown_weight_transfer_engine", false, 0, WSYNC_REPLY_JSON);
}

TEST_F(VllmTest, DestroySendsNothingBefore032) {
  for (const char* v : {"0.28.0", "0.30.0", "0.31.2"}) {
    Instance a(T(), {});
    probed(a, v);
    EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{}) << v;
  }
}

// ---- PROBE: GET /version, GET /get_world_size, POST /collective_rpc ----

// The /collective_rpc question: getattr(worker, "_weight_update_active") in every worker; it only
// reads, so it may be retried.
void expect_update_active_question(const Request& r) {
  expect_request(r, WSYNC_HTTP_POST, "/collective_rpc", true, 1, WSYNC_REPLY_TO_ADAPTER);
  Json j = parse(r.body);
  EXPECT_KEYS(j.get(), "method", "args");
  expect_string(j.get(), "method", "__getattr__");
  expect_strings(j.get(), "args", {"_weight_update_active"});
}

TEST_F(VllmTest, ProbeAsksTheVersionTheWorldSizeThenWhetherAnUpdateIsActive) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 3u);
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/version", false, 1, WSYNC_REPLY_TO_ADAPTER);
  expect_request(b.requests[1], WSYNC_HTTP_GET, "/get_world_size", false, 1, WSYNC_REPLY_TO_ADAPTER);
  expect_update_active_question(b.requests[2]);
}

// With option engine_version the release is not asked; the worker count and the update still are
// (the question is then request 1).
TEST_F(VllmTest, ProbeWithAForcedReleaseAsksTheWorldSizeAndWhetherAnUpdateIsActive) {
  Instance a(T(), {{"engine_version", "0.31.0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Step s(WSYNC_STEP_PROBE);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.num_out, 2u);
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/get_world_size", false, 1, WSYNC_REPLY_TO_ADAPTER);
  expect_update_active_question(b.requests[1]);
  Took w = take(T(), a.self(), s.get(), 0, 200, world_json("3"));  // request 0 is the world size here
  EXPECT_EQ(w.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(w.error, "the server has 3 worker(s)");
  EXPECT_CONTAINS(w.error, "gives it 2");
  ASSERT_EQ(take(T(), a.self(), s.get(), 0, 200, world_json("2")).status, WSYNC_OK);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{});  // 0.31: no shutdown route
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET), (V{"POST /finish_weight_update", "POST /resume"}));
  ASSERT_EQ(take(T(), a.self(), s.get(), 1, 200, kNotActive).status, WSYNC_OK);  // request 1 is the question
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET), V{"POST /resume"});
}

TEST_F(VllmTest, ProbeAcceptsEverySupportedRelease) {
  for (const char* v : {"0.28.0", "0.29.1", "v0.30.0", "0.31.0rc1", "0.32.0+cu128", "0.33.0", "0.33.0.dev12+gabc"}) {
    Instance a(T(), {});
    Took r = answer(a, 0, version_json(v));
    EXPECT_EQ(r.status, WSYNC_OK) << v << ": " << r.error;
  }
}

TEST_F(VllmTest, ProbeRefusesReleasesOutsideTheRange) {
  const std::pair<const char*, const char*> cases[] = {{"0.27.1", "vLLM 0.27.1 is not supported"},
                                                       {"0.10.1.1", "vLLM 0.10.1 is not supported"},
                                                       {"0.34.0", "vLLM 0.34.0 is not supported"},
                                                       {"1.0.0", "vLLM 1.0.0 is not supported"}};
  for (const auto& c : cases) {
    Instance a(T(), {});
    Took r = answer(a, 0, version_json(c.first));
    EXPECT_EQ(r.status, WSYNC_ERR_VERSION_MISMATCH) << c.first;
    EXPECT_CONTAINS(r.error, "adapter 'vllm'");
    EXPECT_CONTAINS(r.error, c.second);
    EXPECT_CONTAINS(r.error, "this adapter speaks vLLM 0.28.0 to 0.33.x");
  }
}

// Every patch release of the newest minor is in range (0.33.x, 0.18.x).
TEST_F(VllmTest, ProbeAcceptsPatchReleasesOfTheNewestMinor) {
  for (const char* v : {"0.33.1", "0.33.2"}) {
    Instance a(T(), {});
    Took r = answer(a, 0, version_json(v));
    EXPECT_EQ(r.status, WSYNC_OK) << v << ": " << r.error;
  }
}

TEST_F(VllmTest, ProbeRefusesAVersionAnswerThatIsNotHttp200) {
  for (int status : {404, 500, 403}) {
    Instance a(T(), {});
    Took r = answer(a, 0, version_json("0.33.0"), 1, 2, status);
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << status;
    EXPECT_CONTAINS(r.error, "GET /version answered HTTP " + std::to_string(status));
    EXPECT_CONTAINS(r.error, "VLLM_SERVER_DEV_MODE=1");
  }
}

TEST_F(VllmTest, ProbeRefusesAWorldSizeAnswerThatIsNotHttp200) {
  Instance a(T(), {});
  Took r = answer(a, 1, world_json("2"), 1, 2, 404);
  EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL);
  EXPECT_CONTAINS(r.error, "GET /get_world_size answered HTTP 404 (is this vLLM, started with VLLM_SERVER_DEV_MODE=1?)");
}

TEST_F(VllmTest, ProbeRefusesAnswersThatAreNotAJsonObject) {
  const std::string deep(100000, '{');
  for (uint32_t index : {0u, 1u}) {
    const std::string route = index == 0 ? "GET /version" : "GET /get_world_size";
    for (const std::string& body : {std::string(""), std::string("0.33.0"), std::string("\"0.33.0\""),
                                    std::string("[2]"), std::string("null"), std::string("{\"version\":"), deep}) {
      Instance a(T(), {});
      Took r = answer(a, index, body);
      EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << route << " " << body.substr(0, 40);
      EXPECT_CONTAINS(r.error, route + " answered something that is not a JSON object");
    }
  }
}

TEST_F(VllmTest, ProbeRefusesAVersionAnswerWithoutARelease) {
  for (const std::string& body : {std::string("{}"), std::string("{\"version\": 0.33}"),
                                  std::string("{\"version\": null}"), std::string("{\"version\": \"dev\"}"),
                                  std::string("{\"Version\": \"0.33.0\"}"), std::string("{\"version\": [\"0.33.0\"]}")}) {
    Instance a(T(), {});
    Took r = answer(a, 0, body);
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << body;
    EXPECT_CONTAINS(r.error, "GET /version reports no release; set option adapter.engine_version");
  }
}

// The workers that join (GET /get_world_size) must equal the count in 'engines'; both numbers named.
TEST_F(VllmTest, ProbeRefusesAWorldSizeOtherThanTheEnginesCount) {
  Instance a(T(), {});
  Took r = answer(a, 1, world_json("4"), 1, 2);
  EXPECT_EQ(r.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(r.error, "the server has 4 worker(s) that join the weight transfer (GET /get_world_size)");
  EXPECT_CONTAINS(r.error, "option 'engines' gives it 2");
  Instance b(T(), {});
  Took r1 = answer(b, 1, world_json("1"), 1, 8);
  EXPECT_EQ(r1.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(r1.error, "has 1 worker(s)");
  EXPECT_CONTAINS(r1.error, "gives it 8");
  Instance c(T(), {});
  EXPECT_EQ(answer(c, 1, world_json("8"), 1, 8).status, WSYNC_OK);
}

TEST_F(VllmTest, ProbeRefusesAMissingOrMalformedWorldSize) {
  for (const std::string& body : {std::string("{}"), std::string("{\"world_size\": \"2\"}"),
                                  std::string("{\"world_size\": null}"), std::string("{\"world_size\": true}"),
                                  std::string("{\"world_size\": [2]}"), std::string("{\"size\": 2}")}) {
    Instance a(T(), {});
    Took r = answer(a, 1, body);
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << body;
    EXPECT_CONTAINS(r.error, "GET /get_world_size has no \"world_size\"");
  }
}

// Negative and enormous counts are never taken as a match.
TEST_F(VllmTest, ProbeRefusesANegativeOrHugeWorldSize) {
  for (const char* n : {"-1", "-2", "0", "1e300", "-1e300"}) {
    Instance a(T(), {});
    Took r = answer(a, 1, world_json(n));
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << n;
    EXPECT_CONTAINS(r.error, "\"world_size\" that is a count from 1 to 65536");
  }
}

// world_size must be an exact count: 2^32 + 2 and 2.5 are refused, never cast.
TEST_F(VllmTest, ProbeRefusesAWorldSizeThatIsNotAnExactCount) {
  for (const char* n : {"4294967298", "2.5", "2.0000001"}) {
    Instance a(T(), {});
    Took r = answer(a, 1, world_json(n), 1, 2);
    EXPECT_NE(r.status, WSYNC_OK) << n;
  }
}

// The body is not NUL-terminated: only body_len bytes are read.
TEST_F(VllmTest, ProbeReadsOnlyTheBodyLength) {
  const std::string good = version_json("0.31.0");
  const std::string padded = good + "{\"version\": \"9\"}";
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, 1, 2);
  ASSERT_EQ(take_raw(T(), a.self(), s.get(), 0, 200, padded.data(), good.size()).status, WSYNC_OK);
  ASSERT_EQ(take(T(), a.self(), s.get(), 1, 200, world_json("2")).status, WSYNC_OK);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{});  // 0.31 was read
  EXPECT_EQ(take_raw(T(), a.self(), s.get(), 0, 200, nullptr, 0).status, WSYNC_ERR_PROTOCOL);
}

// The release counts once the whole probe answered (the world size is its last request).
TEST_F(VllmTest, AReleaseCountsOnlyOnceTheWholeProbeAnswered) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, 1, 2);
  ASSERT_EQ(take(T(), a.self(), s.get(), 0, 200, version_json("0.31.0")).status, WSYNC_OK);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{"POST /shutdown_weight_transfer_engine"});
  ASSERT_EQ(take(T(), a.self(), s.get(), 1, 200, world_json("2")).status, WSYNC_OK);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{});
}

TEST_F(VllmTest, TakeReplyOutsideProbeIsIgnored) {
  Instance a(T(), {});
  for (int kind : {WSYNC_STEP_HEALTH, WSYNC_STEP_RESET, WSYNC_STEP_INIT, WSYNC_STEP_FINALIZE, WSYNC_STEP_ABANDON}) {
    Step s(kind);
    for (uint32_t index : {0u, 1u}) {
      Took r = take(T(), a.self(), s.get(), index, 500, version_json("0.28.0"));
      EXPECT_EQ(r.status, WSYNC_OK) << kind << ": " << r.error;
    }
  }
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{"POST /shutdown_weight_transfer_engine"});
}

TEST_F(VllmTest, EachServerSpeaksItsOwnRelease) {
  Instance a(T(), {});
  probed(a, "0.29.0", 0, 1);
  probed(a, "0.33.0", 1, 4);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY, 0), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY, 1), V{"POST /shutdown_weight_transfer_engine"});
  Step init(WSYNC_STEP_INIT);
  init.property("nccl_unique_id_b64", kUid);
  init->server_index = 0;
  EXPECT_EQ(build(T(), a.self(), init.get()).status, WSYNC_ERR_UNSUPPORTED);
  init->server_index = 1;
  EXPECT_EQ(build(T(), a.self(), init.get()).status, WSYNC_OK);
}

// ---- options ----

TEST_F(VllmTest, EngineVersionOptionWithoutAProbe) {
  Instance a(T(), {{"engine_version", "0.29.0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_DESTROY), V{});
  Step s(WSYNC_STEP_INIT);
  s.property("nccl_unique_id_b64", kUid);
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_ERR_UNSUPPORTED);
  EXPECT_CONTAINS(b.error, "vLLM 0.29.0 does not take");
}

TEST_F(VllmTest, EngineVersionOptionOutsideTheRangeIsRefusedAtCreate) {
  for (const char* v : {"0.27.0", "0.34.0", "0.9.2", "1.0"}) {
    Instance a(T(), {{"engine_version", v}});
    EXPECT_EQ(a.status(), WSYNC_ERR_VERSION_MISMATCH) << v;
    EXPECT_EQ(a.self(), nullptr);
    EXPECT_CONTAINS(a.error(), "is not supported: this adapter speaks vLLM 0.28.0 to 0.33.x");
  }
  Instance bad(T(), {{"engine_version", "newest"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.engine_version' is 'newest'; give a release");
}

// api_version and lifecycle are gone: the release read at PROBE picks the fields, and the update
// always starts and finishes.
TEST_F(VllmTest, RemovedOptionsAreUnknown) {
  for (const char* key : {"api_version", "lifecycle"}) {
    Instance a(T(), {{key, "1"}});
    EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT) << key;
    EXPECT_CONTAINS(a.error(), std::string("unknown option 'adapter.") + key + "'");
  }
}

TEST_F(VllmTest, UnknownAndBadOptions) {
  expect_unknown_option(
      T(), "pause, pause_mode, packed, packed_buffer_size_bytes, packed_num_buffers, engine_version, backend");
  struct Bad {
    const char* key;
    const char* value;
    const char* needle;
  };
  for (const Bad& b : std::vector<Bad>{
           {"packed_num_buffers", "0", "'adapter.packed_num_buffers' must be a decimal integer in [1, 1024]"},
           {"packed_num_buffers", "1025", "'adapter.packed_num_buffers' must be a decimal integer in [1, 1024]"},
           {"packed_buffer_size_bytes", "0", "'adapter.packed_buffer_size_bytes' must be a decimal integer"},
           {"packed_buffer_size_bytes", "-1", "not '-1'"},
           {"packed_buffer_size_bytes", "1e9", "not '1e9'"},
           {"packed_buffer_size_bytes", "1 GiB", "not '1 GiB'"},
           {"packed_buffer_size_bytes", "99999999999999999999999", "not '99999999999999999999999'"},
           {"packed", "yes", "'adapter.packed' must be 0 or 1"},
       }) {
    Instance a(T(), {{b.key, b.value}});
    EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT) << b.key << "=" << b.value;
    EXPECT_CONTAINS(a.error(), b.needle);
  }
}

TEST_F(VllmTest, StepValidation) { expect_step_validation(T()); }

// ---- option backend: nccl (vLLM's NCCL backend, the default) or wsync (the wsync Python package's
// weight-transfer backend: a wsync receiver in every worker, joining over the trainer's store) ----

// backend=nccl is the default: the same init body, needs and layout as no option at all.
TEST_F(VllmTest, BackendNcclIsTheDefault) {
  Instance dflt(T(), {});
  Instance nccl(T(), {{"backend", "nccl"}});
  ASSERT_EQ(nccl.status(), WSYNC_OK) << nccl.error();
  for (bool with_id : {false, true}) {
    Step s(WSYNC_STEP_INIT);
    if (with_id) s.property("nccl_unique_id_b64", kUid);
    Built a = build(T(), dflt.self(), s.get());
    Built b = build(T(), nccl.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << b.error;
    ASSERT_EQ(b.num_out, 1u);
    EXPECT_EQ(b.requests[0].body, a.requests.at(0).body);
  }
  Needs n = needs_of(T(), nccl.self());
  EXPECT_EQ(n.hints, (V{"allreduce_after_init=1"}));
  EXPECT_EQ(n.properties, (V{"nccl_unique_id_b64"}));
  wsync_layout_rule_t rule = WSYNC_LAYOUT_RULE_INIT;
  ASSERT_EQ(T()->get_layout(nccl.self(), &rule), WSYNC_OK);
  EXPECT_EQ(rule.kind, WSYNC_LAYOUT_EXCEED_THEN_FLUSH);
  EXPECT_EQ(rule.bucket_bytes, 1073741824u);
  // The packed options belong to this backend.
  Instance packed(T(), {{"backend", "nccl"}, {"packed", "0"}, {"packed_buffer_size_bytes", "4096"},
                        {"packed_num_buffers", "3"}});
  EXPECT_EQ(packed.status(), WSYNC_OK) << packed.error();
}

// init_info holds exactly the four fields of the wsync backend's init-info dataclass (vLLM builds
// it with **init_info: any other key is refused): the trainer's store, the group, the ranks.
TEST_F(VllmTest, WsyncBackendInitSendsTheStoreAndTheGroup) {
  Instance a(T(), {{"backend", "wsync"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Step s(WSYNC_STEP_INIT);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/init_weight_transfer_engine", true, 0, WSYNC_REPLY_JSON);
  EXPECT_EQ(b.requests[0].body,
            "{\"init_info\":{\"store_addr\":\"10.1.2.3:29512\",\"group_name\":\"wsync_g\",\"rank_offset\":3,"
            "\"world_size\":7}}");
  Json j = body_of(b);
  EXPECT_KEYS(j.get(), "init_info");
  const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "init_info");
  EXPECT_KEYS(info, "store_addr", "group_name", "rank_offset", "world_size");
  expect_string(info, "store_addr", "10.1.2.3:29512");
  expect_string(info, "group_name", "wsync_g");
  expect_int(info, "rank_offset", 3);
  expect_int(info, "world_size", 7);
  // Other values go through as they are.
  Step t(WSYNC_STEP_INIT);
  t->master_address = "trainer-0.cluster.local";
  t->master_port = 1;
  t->group_name = "rl/policy";
  t->rank_offset = 9;
  t->world_size = 4097;
  Built c = build(T(), a.self(), t.get());
  ASSERT_EQ(c.status, WSYNC_OK) << c.error;
  Json k = body_of(c);
  info = cJSON_GetObjectItemCaseSensitive(k.get(), "init_info");
  EXPECT_KEYS(info, "store_addr", "group_name", "rank_offset", "world_size");
  expect_string(info, "store_addr", "trainer-0.cluster.local:1");
  expect_string(info, "group_name", "rl/policy");
  expect_int(info, "rank_offset", 9);
  expect_int(info, "world_size", 4097);
}

TEST_F(VllmTest, WsyncBackendInitBracketsAnIpv6Host) {
  Instance a(T(), {{"backend", "wsync"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  const std::pair<const char*, const char*> cases[] = {{"::1", "[::1]:5000"},
                                                       {"fd00:1:2::7", "[fd00:1:2::7]:5000"},
                                                       {"[::1]", "[::1]:5000"},  // already bracketed
                                                       {"127.0.0.1", "127.0.0.1:5000"},
                                                       {"localhost", "localhost:5000"}};
  for (const auto& c : cases) {
    Step s(WSYNC_STEP_INIT);
    s->master_address = c.first;
    s->master_port = 5000;
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << c.first << ": " << b.error;
    Json j = body_of(b);
    const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "init_info");
    EXPECT_KEYS(info, "store_addr", "group_name", "rank_offset", "world_size");
    expect_string(info, "store_addr", c.second);
  }
}

// The store and the group are needed; a transport property (asked for by nobody here) is never sent,
// and every release takes the same body (the id rule of 0.28/0.29 is the NCCL backend's).
TEST_F(VllmTest, WsyncBackendInitNeedsTheStoreAndTheGroupName) {
  Instance a(T(), {{"backend", "wsync"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  {
    Step s(WSYNC_STEP_INIT);
    s->master_address = "";
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(b.num_out, 0u);
    EXPECT_CONTAINS(b.error, "INIT step (server 1): master_address is empty");
  }
  {
    Step s(WSYNC_STEP_INIT);
    s->master_port = 0;
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_CONTAINS(b.error, "master_port 0 is not in 1..65535");
  }
  for (const char* g : {"", static_cast<const char*>(nullptr)}) {
    Step s(WSYNC_STEP_INIT);
    s->group_name = g;
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(b.num_out, 0u);
    EXPECT_CONTAINS(b.error, std::string("INIT step (server 1): group_name is ") + (g ? "empty" : "NULL"));
  }
  Step ref(WSYNC_STEP_INIT);
  Built want = build(T(), a.self(), ref.get());
  ASSERT_EQ(want.status, WSYNC_OK) << want.error;
  for (const char* v : {"0.28.0", "0.29.2", "0.33.0"}) {
    Instance p(T(), {{"backend", "wsync"}});
    probed(p, v);
    Step s(WSYNC_STEP_INIT);
    s.property("nccl_unique_id_b64", kUid);
    Built b = build(T(), p.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << v << ": " << b.error;
    EXPECT_EQ(b.requests.at(0).body, want.requests.at(0).body) << v;
  }
}

// The wsync receivers join over the store: no NCCL id property, no all-reduce after init.
TEST_F(VllmTest, WsyncBackendNeedsNoIdPropertyNorAllReduce) {
  Instance a(T(), {{"backend", "wsync"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Needs n = needs_of(T(), a.self());
  EXPECT_EQ(n.hints, V{});
  EXPECT_EQ(n.properties, V{});
}

// No packing rule: byte offsets, mixed dtypes, and the group's own bucket_bytes (not forced).
TEST_F(VllmTest, WsyncBackendLayoutIsBytesMixedAtTheGroupsBucketSize) {
  Instance a(T(), {{"backend", "wsync"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  wsync_layout_rule_t rule = WSYNC_LAYOUT_RULE_INIT;
  rule.kind = -1;
  rule.alignment = 77;
  rule.allow_split = 9;
  ASSERT_EQ(T()->get_layout(a.self(), &rule), WSYNC_OK);
  EXPECT_EQ(rule.struct_size, sizeof(wsync_layout_rule_t));
  EXPECT_EQ(rule.kind, WSYNC_LAYOUT_BYTES_MIXED);
  EXPECT_EQ(rule.alignment, 1u);
  EXPECT_EQ(rule.allow_split, 0u);
  EXPECT_EQ(rule.bucket_bytes, 0u);
  wsync_layout_rule_t kept = WSYNC_LAYOUT_RULE_INIT;
  kept.bucket_bytes = 12345;  // whatever the core put there stays
  ASSERT_EQ(T()->get_layout(a.self(), &kept), WSYNC_OK);
  EXPECT_EQ(kept.bucket_bytes, 12345u);
  EXPECT_EQ(T()->get_layout(nullptr, &rule), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(T()->get_layout(a.self(), nullptr), WSYNC_ERR_INVALID_ARGUMENT);
}

// A bucket is one /update_weights whatever vLLM's packing would make of it; update_info as with nccl.
TEST_F(VllmTest, WsyncBackendUpdateHasNoPackingRule) {
  // 3 x 1 GiB: more than one chunk of the default 1 GiB packed buffer (nccl refuses it).
  Step s(WSYNC_STEP_UPDATE, {{"model.a", WSYNC_DTYPE_BFLOAT16, {536870912, 2}},
                             {"model.b", WSYNC_DTYPE_FLOAT32, {268435456, 2}},
                             {"model.c", WSYNC_DTYPE_UINT8, {7}}});
  Instance nccl(T(), {});
  Built refused = build(T(), nccl.self(), s.get());
  ASSERT_EQ(refused.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(refused.error, "is more than one vLLM packed chunk");
  Instance a(T(), {{"backend", "wsync"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/update_weights", true, 0, WSYNC_REPLY_JSON);
  Json j = body_of(b);
  EXPECT_KEYS(j.get(), "update_info");
  const cJSON* info = cJSON_GetObjectItemCaseSensitive(j.get(), "update_info");
  EXPECT_KEYS(info, "names", "dtype_names", "shapes");
  expect_strings(info, "names", {"model.a", "model.b", "model.c"});
  expect_strings(info, "dtype_names", {"bfloat16", "float32", "uint8"});
  expect_shapes(info, "shapes", {{536870912, 2}, {268435456, 2}, {7}});
  // The same update_info as the NCCL backend for a bucket both take.
  Step one(WSYNC_STEP_UPDATE, {{"w", WSYNC_DTYPE_FLOAT16, {2, 3}}, {"v", WSYNC_DTYPE_INT32, {}}});
  Built x = build(T(), nccl.self(), one.get());
  Built y = build(T(), a.self(), one.get());
  ASSERT_EQ(x.status, WSYNC_OK) << x.error;
  ASSERT_EQ(y.status, WSYNC_OK) << y.error;
  EXPECT_EQ(y.requests.at(0).body, x.requests.at(0).body);
}

// The packed options are the NCCL backend's: refused with backend=wsync, naming the option.
TEST_F(VllmTest, WsyncBackendRefusesThePackedOptions) {
  const std::pair<const char*, const char*> opts[] = {
      {"packed", "1"}, {"packed", "0"}, {"packed_buffer_size_bytes", "1073741824"}, {"packed_num_buffers", "2"}};
  for (const auto& o : opts) {
    for (bool backend_first : {true, false}) {
      Options list = backend_first ? Options{{"backend", "wsync"}, {o.first, o.second}}
                                   : Options{{o.first, o.second}, {"backend", "wsync"}};
      Instance a(T(), list);
      EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT) << o.first << "=" << o.second;
      EXPECT_EQ(a.self(), nullptr);
      EXPECT_CONTAINS(a.error(), std::string("option 'adapter.") + o.first + "' belongs to backend nccl");
      EXPECT_CONTAINS(a.error(), "backend=wsync");
    }
  }
}

TEST_F(VllmTest, BackendRefusesAnUnknownValue) {
  for (const char* v : {"foo", "", "NCCL", "Wsync", "nccl ", "gloo"}) {
    Instance a(T(), {{"backend", v}});
    EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT) << v;
    EXPECT_EQ(a.self(), nullptr);
    EXPECT_CONTAINS(a.error(), std::string("option 'adapter.backend' must be one of nccl, wsync, not '") + v + "'");
  }
}

// Every other step is the same for both backends (probe, reset, pause/resume, start/finish,
// shutdown); ABANDON and CHECK differ (below).
TEST_F(VllmTest, WsyncBackendLifeIsTheSameOtherwise) {
  for (const char* v : {"0.28.0", "0.32.0"}) {
    for (const char* pause : {"0", "1"}) {
      Instance nccl(T(), {{"pause", pause}});
      Instance a(T(), {{"backend", "wsync"}, {"pause", pause}});
      probed(nccl, v);
      probed(a, v);
      EXPECT_EQ(life(T(), a.self()), life(T(), nccl.self())) << v;
      for (int kind : {WSYNC_STEP_RESET, WSYNC_STEP_PAUSE, WSYNC_STEP_BEGIN_UPDATE, WSYNC_STEP_FINALIZE,
                       WSYNC_STEP_RESUME, WSYNC_STEP_DESTROY}) {
        Step s(kind);
        Built x = build(T(), nccl.self(), s.get());
        Built y = build(T(), a.self(), s.get());
        ASSERT_EQ(y.status, WSYNC_OK) << kind << ": " << y.error;
        ASSERT_EQ(y.num_out, x.num_out) << kind;
        for (size_t i = 0; i < x.requests.size(); ++i) {
          EXPECT_EQ(y.requests[i].path, x.requests[i].path) << kind;
          EXPECT_EQ(y.requests[i].body, x.requests[i].body) << kind;
          EXPECT_EQ(y.requests[i].idempotent, x.requests[i].idempotent) << kind;
          EXPECT_EQ(y.requests[i].reply, x.requests[i].reply) << kind;
        }
      }
    }
  }
  Instance forced(T(), {{"backend", "wsync"}, {"engine_version", "0.31.0"}});
  ASSERT_EQ(forced.status(), WSYNC_OK) << forced.error();
  EXPECT_EQ(routes(T(), forced.self(), WSYNC_STEP_DESTROY), V{});
  EXPECT_EQ(routes(T(), forced.self(), WSYNC_STEP_PROBE), (V{"GET /get_world_size", "POST /collective_rpc"}));
}

// ---- the whole life of a group, per release ----

TEST_F(VllmTest, LifeFrom032) {
  Instance a(T(), {});
  probed(a, "0.32.0");
  EXPECT_EQ(life(T(), a.self()), (V{"HEALTH GET /health",
                                    "PROBE GET /version",
                                    "PROBE GET /get_world_size",
                                    "PROBE POST /collective_rpc",
                                    "RESET POST /finish_weight_update",
                                    "RESET POST /shutdown_weight_transfer_engine",
                                    "RESET POST /resume",
                                    "INIT POST /init_weight_transfer_engine",
                                    "PAUSE POST /pause?mode=keep",
                                    "BEGIN_UPDATE POST /start_weight_update",
                                    "UPDATE POST /update_weights",
                                    "UPDATE POST /update_weights",
                                    "FINALIZE POST /finish_weight_update",
                                    "RESUME POST /resume",
                                    "DESTROY POST /shutdown_weight_transfer_engine"}));
}

TEST_F(VllmTest, LifeBefore032WithoutPause) {
  Instance a(T(), {{"pause", "0"}});
  probed(a, "0.28.0");
  EXPECT_EQ(life(T(), a.self()), (V{"HEALTH GET /health",
                                    "PROBE GET /version",
                                    "PROBE GET /get_world_size",
                                    "PROBE POST /collective_rpc",
                                    "RESET POST /finish_weight_update",
                                    "RESET POST /resume",
                                    "INIT POST /init_weight_transfer_engine",
                                    "BEGIN_UPDATE POST /start_weight_update",
                                    "UPDATE POST /update_weights",
                                    "UPDATE POST /update_weights",
                                    "FINALIZE POST /finish_weight_update"}));
}

}  // namespace

// ---- plugin ABI 1.7, backend=wsync: CHECK of a declared update, and ABANDON through the engine's
// own calls (POST /collective_rpc {"method": "weight_transfer_engine", "args": [call, ...]}) ----

namespace {

// A worker's answer dict to the engine's calls, as vLLM returns it: {"results": [dict, ...]}.
std::string dicts_json(const std::vector<std::string>& dicts) {
  std::string r = "{\"results\": [";
  for (size_t i = 0; i < dicts.size(); ++i) r += (i ? ", " : "") + dicts[i];
  return r + "]}";
}

// The engine call of request `r`: method weight_transfer_engine, args[0] = `call`; args[1] returned.
void expect_engine_call(const Request& r, const std::string& call, size_t nargs, uint32_t idempotent,
                        std::string* arg1 = nullptr) {
  expect_request(r, WSYNC_HTTP_POST, "/collective_rpc", true, idempotent, WSYNC_REPLY_TO_ADAPTER);
  Json j = parse(r.body);
  EXPECT_KEYS(j.get(), "args", "method");
  expect_string(j.get(), "method", "weight_transfer_engine");
  const cJSON* args = cJSON_GetObjectItemCaseSensitive(j.get(), "args");
  EXPECT_EQ(cJSON_GetArraySize(args), static_cast<int>(nargs));
  const cJSON* a0 = cJSON_GetArrayItem(args, 0);
  EXPECT_TRUE(cJSON_IsString(a0) && call == a0->valuestring) << r.body;
  const cJSON* a1 = cJSON_GetArrayItem(args, 1);
  if (arg1) *arg1 = cJSON_IsString(a1) ? a1->valuestring : "";
}

Took abandon_answer(const Instance& a, int32_t status, const std::string& body, uint32_t server = 1) {
  Step s(WSYNC_STEP_ABANDON);
  s->server_index = server;
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_OK) << b.error;
  return take(T(), a.self(), s.get(), 0, status, body);
}

int32_t held_of(const Instance& a, uint32_t server, std::string* words = nullptr) {
  const char* w = nullptr;
  int32_t h = T()->held(a.self(), server, &w);
  if (words) *words = w ? w : "";
  return h;
}

}  // namespace

TEST_F(VllmTest, TheTableSaysWhatAServerHolds) {
  ASSERT_GE(T()->struct_size, WSYNC_ADAPTER_V1_7_SIZE);
  ASSERT_NE(T()->held, nullptr);
  Instance a(T(), {{"backend", "wsync"}});
  EXPECT_EQ(held_of(a, 1), WSYNC_HELD_UNKNOWN);  // nothing abandoned yet
  EXPECT_EQ(held_of(a, 4000), WSYNC_HELD_UNKNOWN);
}

// The declared update goes to every worker's engine as JSON text {names, dtype_names, shapes}.
TEST_F(VllmTest, WsyncBackendChecksTheDeclaredUpdateThroughTheEngine) {
  Instance a(T(), {{"backend", "wsync"}});
  Step s(WSYNC_STEP_CHECK, {{"w", WSYNC_DTYPE_BFLOAT16, {64, 128}}, {"b", WSYNC_DTYPE_FLOAT32, {}}});
  s->update_index = 0;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  std::string text;
  expect_engine_call(b.requests[0], "wsync_check", 2, 1, &text);
  Json cat = parse(text);
  EXPECT_KEYS(cat.get(), "names", "dtype_names", "shapes");
  expect_strings(cat.get(), "names", {"w", "b"});
  expect_strings(cat.get(), "dtype_names", {"bfloat16", "float32"});
  char* shapes = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cat.get(), "shapes"));
  EXPECT_STREQ(shapes, "[[64,128],[]]");
  cJSON_free(shapes);
  // Every worker accepts: the update goes on.
  Took ok = take(T(), a.self(), s.get(), 0, 200, dicts_json({"{\"ok\": true, \"checked\": 2}", "{\"ok\": true}"}));
  EXPECT_EQ(ok.status, WSYNC_OK) << ok.error;
}

TEST_F(VllmTest, WsyncBackendRefusesTheUpdateWithTheEnginesWords) {
  Instance a(T(), {{"backend", "wsync"}});
  Step s(WSYNC_STEP_CHECK, {{"w", WSYNC_DTYPE_BFLOAT16, {64, 128}}});
  build(T(), a.self(), s.get());
  const std::string why = "tensor 'w' has shape [64, 128] but the served model wants [128, 64]";
  Took r = take(T(), a.self(), s.get(), 0, 200,
                dicts_json({"{\"ok\": true}", "{\"ok\": false, \"refused\": \"" + why + "\"}"}));
  EXPECT_EQ(r.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find(why), std::string::npos) << r.error;
  // An engine that cannot check (an older backend: vLLM's 500 "... not callable"), or an answer
  // that says nothing, fails the update before anything starts, naming what to do.
  for (const auto& [status, body] : std::vector<std::pair<int32_t, std::string>>{
           {500, "{\"error\": \"TypeError: object is not callable\"}"}, {200, "{\"results\": []}"}, {200, "[]"},
           {200, dicts_json({"{\"checked\": 1}"})}}) {
    Took t = take(T(), a.self(), s.get(), 0, status, body);
    EXPECT_NE(t.status, WSYNC_OK) << body;
    EXPECT_NE(t.status, WSYNC_ERR_INVALID_ARGUMENT) << body;
  }
  Took old = take(T(), a.self(), s.get(), 0, 500, "{\"error\": \"TypeError: object is not callable\"}");
  EXPECT_NE(old.error.find("wsync 0.8 or later"), std::string::npos) << old.error;
}

// backend=nccl (vLLM's own backend) checks nothing: no request at CHECK; neither does an adapter
// whose engine cannot (every HTTP adapter shares the entry).
TEST_F(VllmTest, NcclBackendSendsNothingAtCheck) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_CHECK, {{"w", WSYNC_DTYPE_BFLOAT16, {64, 128}}});
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  EXPECT_EQ(b.num_out, 0u);
}

// ABANDON asks every worker's engine to end its side and say what it holds; no
// /finish_weight_update (vLLM logs a rejected one with a traceback).
TEST_F(VllmTest, WsyncBackendAbandonAsksTheEngineWhatItHolds) {
  Instance a(T(), {{"backend", "wsync"}});
  Step s(WSYNC_STEP_ABANDON);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_engine_call(b.requests[0], "wsync_abandon", 1, 0);
  std::string words;
  // Every worker whole: one version, its words.
  Took r = abandon_answer(a, 200, dicts_json({"{\"whole\": true, \"holds\": \"version 3\", \"open\": false}",
                                              "{\"whole\": true, \"holds\": \"version 3\", \"open\": false}"}));
  EXPECT_EQ(r.status, WSYNC_OK) << r.error;
  EXPECT_EQ(held_of(a, 1, &words), WSYNC_HELD_ONE_VERSION);
  EXPECT_EQ(words, "version 3");
  // One worker holds a mix: the server does; both workers' words.
  r = abandon_answer(a, 200, dicts_json({"{\"whole\": true, \"holds\": \"version 3\", \"open\": false}",
                                         "{\"whole\": false, \"holds\": \"a mix: layer 0 new\", \"open\": true}"}));
  EXPECT_EQ(r.status, WSYNC_OK) << r.error;
  EXPECT_EQ(held_of(a, 1, &words), WSYNC_HELD_MIX);
  EXPECT_NE(words.find("version 3"), std::string::npos) << words;
  EXPECT_NE(words.find("a mix: layer 0 new"), std::string::npos) << words;
  // An answer that says neither (an older backend, a 500, a malformed dict): unknown, never a failure.
  for (const auto& [status, body] : std::vector<std::pair<int32_t, std::string>>{
           {500, "{\"error\": \"x\"}"}, {200, "{}"}, {200, dicts_json({"{\"whole\": 1, \"holds\": \"v\"}"})},
           {200, dicts_json({"{\"whole\": true}"})}, {200, "not json"}}) {
    Took t = abandon_answer(a, status, body);
    EXPECT_EQ(t.status, WSYNC_OK) << body << ": " << t.error;
    EXPECT_EQ(held_of(a, 1), WSYNC_HELD_UNKNOWN) << body;
  }
  // The nccl backend's ABANDON is vLLM's finish without a version, as before.
  Instance n(T(), {});
  EXPECT_EQ(routes(T(), n.self(), WSYNC_STEP_ABANDON), V{"POST /finish_weight_update"});
}

// The RESUME after an ABANDON whose worker still has its vLLM update open ends it first; the next
// RESUME (after a commit) is the plain one again.
TEST_F(VllmTest, WsyncBackendResumeAfterAnOpenAbandonFinishesFirst) {
  Instance a(T(), {{"backend", "wsync"}});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{"POST /resume"});
  Took r = abandon_answer(a, 200, dicts_json({"{\"whole\": true, \"holds\": \"version 3\", \"open\": true}"}));
  ASSERT_EQ(r.status, WSYNC_OK) << r.error;
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), (V{"POST /finish_weight_update", "POST /resume"}));
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{"POST /resume"});
  // Closed already: the resume alone.
  r = abandon_answer(a, 200, dicts_json({"{\"whole\": true, \"holds\": \"version 3\", \"open\": false}"}));
  ASSERT_EQ(r.status, WSYNC_OK) << r.error;
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{"POST /resume"});
  // Another server's state is its own.
  r = abandon_answer(a, 200, dicts_json({"{\"whole\": false, \"holds\": \"a mix\", \"open\": true}"}), 2);
  ASSERT_EQ(r.status, WSYNC_OK) << r.error;
  EXPECT_EQ(held_of(a, 2), WSYNC_HELD_MIX);
  EXPECT_EQ(held_of(a, 1), WSYNC_HELD_ONE_VERSION);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME, 1), V{"POST /resume"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME, 2), (V{"POST /finish_weight_update", "POST /resume"}));
  // Left paused (no RESUME), an elastic group's next update ends it before it starts, once.
  r = abandon_answer(a, 200, dicts_json({"{\"whole\": false, \"holds\": \"a mix\", \"open\": true}"}));
  ASSERT_EQ(r.status, WSYNC_OK) << r.error;
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE),
            (V{"POST /finish_weight_update", "POST /start_weight_update"}));
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{"POST /start_weight_update"});
  // A reset (a new trainer, or a dropped server coming back) ends it its own way: nothing stays.
  r = abandon_answer(a, 200, dicts_json({"{\"whole\": false, \"holds\": \"a mix\", \"open\": true}"}));
  ASSERT_EQ(r.status, WSYNC_OK) << r.error;
  routes(T(), a.self(), WSYNC_STEP_RESET);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESUME), V{"POST /resume"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{"POST /start_weight_update"});
}
