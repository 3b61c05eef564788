// adapter_sglang: every step's requests against SGLang's request models (io_struct.py): route,
// method, reply kind, idempotency, and each body field by field with no extra field; the PROBE
// answer (GET /server_info; /get_server_info is its deprecated alias) that picks the dialogue of each server (0.5.6 .. 0.5.20 without
// update sessions, 0.5.21 .. 0.5.23 with them) and checks its GPUs.
#include "adapter_test_util.h"

using namespace adapter_test;

namespace {

using V = std::vector<std::string>;

const wsync_adapter_v1_t* T() {
  static const wsync_adapter_v1_t* t = load("sglang");
  return t;
}

class SglangTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(T(), nullptr); }
};

// The interesting part of a /server_info answer (the real one has a hundred more fields).
std::string server_info(const std::string& version, int tp = 2, const std::string& more = "") {
  return "{\"model_path\": \"Qwen/Qwen3-8B\", \"version\": \"" + version + "\", \"tp_size\": " + std::to_string(tp) +
         ", \"pp_size\": 1, \"dp_size\": 1, \"enable_dp_attention\": false" + more + "}";
}

// PROBE at `server` (GPU count `gpus` in 'engines'): build it, then hand it the answer.
Took probe(const Instance& a, const std::string& body, uint32_t server = 1, uint32_t gpus = 2,
           int32_t http_status = 200) {
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, server, gpus);
  return take(T(), a.self(), s.get(), 0, http_status, body);
}

// An instance whose server 1 answered PROBE with `version` (2 GPUs).
void probed(const Instance& a, const std::string& version) {
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Took r = probe(a, server_info(version));
  ASSERT_EQ(r.status, WSYNC_OK) << r.error;
}

TEST_F(SglangTest, Table) { expect_table(T(), "sglang"); }

TEST_F(SglangTest, LayoutIsElementsOneDtype) { expect_layout(T(), WSYNC_LAYOUT_ELEMENTS_ONE_DTYPE); }

// Not /health: that generates a token, and so hangs and answers 503 on a paused server (one a dead
// trainer left paused). /model_info is answered by the tokenizer process in every release.
TEST_F(SglangTest, HealthAsksForTheModelInfo) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_HEALTH);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/model_info", false, 1, WSYNC_REPLY_STATUS);
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
  EXPECT_EQ(n.hints, (V{"torch_group=wsync_test_group", "lazy_init=1"}));
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

// The bucket request is the same in both families: the session is opened by its own route.
TEST_F(SglangTest, UpdateBodyIsTheSameWithAndWithoutSessions) {
  Instance old(T(), {});
  probed(old, "0.5.20");
  Instance cur(T(), {});
  probed(cur, "0.5.23");
  Step s(WSYNC_STEP_UPDATE, {{"w", WSYNC_DTYPE_FLOAT16, {3, 2}}});
  Built b1 = build(T(), old.self(), s.get());
  Built b2 = build(T(), cur.self(), s.get());
  ASSERT_EQ(b1.num_out, 1u) << b1.error;
  ASSERT_EQ(b2.num_out, 1u) << b2.error;
  EXPECT_EQ(b1.requests[0].path, "/update_weights_from_distributed");
  EXPECT_EQ(b1.requests[0].body, b2.requests[0].body);
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

TEST_F(SglangTest, UpdateNeedsAGroupName) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_UPDATE, {{"w", WSYNC_DTYPE_FLOAT16, {1}}});
  s->group_name = "";
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.num_out, 0u);
  EXPECT_CONTAINS(b.error, "UPDATE step (server 1): group_name is empty");
}

// ---- update sessions (0.5.21+): begin before the first bucket, end before the flush ----

// No PROBE answer (a core older than plugin ABI 1.3) and no option: the newest dialogue.
TEST_F(SglangTest, WithoutAProbeTheNewestReleaseIsSpoken) {
  Instance a(T(), {});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{"POST /begin_weight_update"});
}

TEST_F(SglangTest, BeginUpdateOpensASessionFrom0521) {
  for (const char* v : {"0.5.21", "0.5.22", "0.5.23"}) {
    Instance a(T(), {});
    probed(a, v);
    Step s(WSYNC_STEP_BEGIN_UPDATE);
    Built b = build(T(), a.self(), s.get());
    ASSERT_EQ(b.status, WSYNC_OK) << b.error;
    ASSERT_EQ(b.num_out, 1u) << v;
    expect_request(b.requests[0], WSYNC_HTTP_POST, "/begin_weight_update", true, 0, WSYNC_REPLY_SUCCESS_FIELD);
    expect_empty_object(b.requests[0]);
  }
}

TEST_F(SglangTest, BeginUpdateSendsNothingBefore0521) {
  for (const char* v : {"0.5.6", "0.5.15", "0.5.20"}) {
    Instance a(T(), {{"pause", "1"}});
    probed(a, v);
    Step s(WSYNC_STEP_BEGIN_UPDATE);
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_OK) << b.error;
    EXPECT_EQ(b.num_out, 0u) << v;
  }
}

TEST_F(SglangTest, FinalizeEndsTheSessionThenFlushesThenSetsTheVersion) {
  Instance a(T(), {});
  probed(a, "0.5.23");
  Step s(WSYNC_STEP_FINALIZE);
  s->version = 18446744073709551615ull;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 3u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/end_weight_update", true, 0, WSYNC_REPLY_SUCCESS_FIELD);
  expect_empty_object(b.requests[0]);
  // Refused (400) while requests run: idempotent so the core retries it.
  expect_request(b.requests[1], WSYNC_HTTP_GET, "/flush_cache", false, 1, WSYNC_REPLY_STATUS);
  expect_request(b.requests[2], WSYNC_HTTP_POST, "/update_weight_version", true, 1, WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[2].body);
  EXPECT_KEYS(j.get(), "new_version", "abort_all_requests");
  expect_string(j.get(), "new_version", "18446744073709551615");
  expect_bool(j.get(), "abort_all_requests", false);
}

TEST_F(SglangTest, FinalizeFlushesThenSetsTheVersionBefore0521) {
  Instance a(T(), {});
  probed(a, "0.5.20");
  Step s(WSYNC_STEP_FINALIZE);
  s->version = 7;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 2u);
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/flush_cache", false, 1, WSYNC_REPLY_STATUS);
  expect_request(b.requests[1], WSYNC_HTTP_POST, "/update_weight_version", true, 1, WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[1].body);
  expect_string(j.get(), "new_version", "7");
}

TEST_F(SglangTest, FinalizeWithoutTheVersionRoute) {
  Instance a(T(), {{"set_version", "0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_FINALIZE), (V{"POST /end_weight_update", "GET /flush_cache"}));
  Instance old(T(), {{"set_version", "0"}});
  probed(old, "0.5.20");
  EXPECT_EQ(routes(T(), old.self(), WSYNC_STEP_FINALIZE), V{"GET /flush_cache"});
  Instance bad(T(), {{"set_version", "maybe"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.set_version' must be 0 or 1");
}

// After a failure mid-update the open session is ended so the server serves again.
TEST_F(SglangTest, AbandonEndsTheSession) {
  Instance a(T(), {{"pause", "1"}});
  probed(a, "0.5.21");
  Step s(WSYNC_STEP_ABANDON);
  s->update_index = 3;
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/end_weight_update", true, 0, WSYNC_REPLY_SUCCESS_FIELD);
  expect_empty_object(b.requests[0]);
}

TEST_F(SglangTest, AbandonSendsNothingBefore0521) {
  Instance a(T(), {{"pause", "1"}});
  probed(a, "0.5.20");
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_ABANDON), V{});
}

// RESET clears what an earlier trainer left: its session, its group, and its pause (continued
// whatever this trainer's option pause says: a server left paused serves nothing).
TEST_F(SglangTest, ResetEndsTheSessionDestroysTheGroupAndContinues) {
  Instance a(T(), {});
  probed(a, "0.5.23");
  Step s(WSYNC_STEP_RESET);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 3u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/end_weight_update", true, 0, WSYNC_REPLY_SUCCESS_FIELD);
  expect_empty_object(b.requests[0]);
  expect_request(b.requests[1], WSYNC_HTTP_POST, "/destroy_weights_update_group", true, 0,
                 WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[1].body);
  EXPECT_KEYS(j.get(), "group_name");
  expect_string(j.get(), "group_name", "wsync_g");
  expect_request(b.requests[2], WSYNC_HTTP_POST, "/continue_generation", true, 1, WSYNC_REPLY_JSON);
  expect_empty_object(b.requests[2]);
}

TEST_F(SglangTest, ResetHasNoSessionRouteBefore0521) {
  Instance a(T(), {});
  probed(a, "0.5.20");
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET),
            (V{"POST /destroy_weights_update_group", "POST /continue_generation"}));
}

// The earlier trainer may have paused even when this one does not: RESET continues either way.
TEST_F(SglangTest, ResetContinuesWhateverThePauseOption) {
  for (const char* p : {"0", "1"}) {
    Instance a(T(), {{"pause", p}});
    probed(a, "0.5.23");
    EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_RESET),
              (V{"POST /end_weight_update", "POST /destroy_weights_update_group", "POST /continue_generation"}))
        << p;
  }
}

TEST_F(SglangTest, ResetNeedsAGroupName) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_RESET);
  s->group_name = nullptr;
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.num_out, 0u);
  EXPECT_CONTAINS(b.error, "RESET step (server 1): group_name is NULL");
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

// ---- PROBE: GET /server_info ----

TEST_F(SglangTest, ProbeAsksForTheServerInfo) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_request(b.requests[0], WSYNC_HTTP_GET, "/server_info", false, 1, WSYNC_REPLY_TO_ADAPTER);
}

TEST_F(SglangTest, ProbeAcceptsEverySupportedRelease) {
  for (const char* v : {"0.5.6", "0.5.10", "0.5.20", "0.5.21", "0.5.23", "0.5.23.post1", "v0.5.9", "0.5.22rc0"}) {
    Instance a(T(), {});
    Took r = probe(a, server_info(v));
    EXPECT_EQ(r.status, WSYNC_OK) << v << ": " << r.error;
  }
}

TEST_F(SglangTest, ProbeRefusesReleasesOutsideTheRange) {
  const std::pair<const char*, const char*> cases[] = {{"0.5.5", "SGLang 0.5.5 is not supported"},
                                                       {"0.4.10.post2", "SGLang 0.4.10 is not supported"},
                                                       {"0.5.24", "SGLang 0.5.24 is not supported"},
                                                       {"0.6.0", "SGLang 0.6.0 is not supported"},
                                                       {"1.0.0", "SGLang 1.0.0 is not supported"}};
  for (const auto& c : cases) {
    Instance a(T(), {});
    Took r = probe(a, server_info(c.first));
    EXPECT_EQ(r.status, WSYNC_ERR_VERSION_MISMATCH) << c.first;
    EXPECT_CONTAINS(r.error, "adapter 'sglang'");
    EXPECT_CONTAINS(r.error, c.second);
    EXPECT_CONTAINS(r.error, "this adapter speaks SGLang 0.5.6 to 0.5.23");
    EXPECT_CONTAINS(r.error, "adapter.engine_version");
  }
}

TEST_F(SglangTest, ProbeRefusesAnAnswerThatIsNotHttp200) {
  for (int status : {404, 500, 400, 204, 302}) {
    Instance a(T(), {});
    Took r = probe(a, server_info("0.5.23"), 1, 2, status);
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << status;
    EXPECT_CONTAINS(r.error, "GET /server_info answered HTTP " + std::to_string(status));
    EXPECT_CONTAINS(r.error, "is this an SGLang server (0.5.6 or later)?");
  }
}

TEST_F(SglangTest, ProbeRefusesAnswersThatAreNotAJsonObject) {
  const std::string deep(100000, '[');  // deeper than any parser should follow
  for (const std::string& body : {std::string(""), std::string("<html>Not Found</html>"), std::string("{"),
                                  std::string("[1, 2]"), std::string("\"0.5.23\""), std::string("null"),
                                  std::string("42"), std::string("{\"version\": \"0.5.23\", \"tp_size\": 1} junk"),
                                  deep}) {
    Instance a(T(), {});
    Took r = probe(a, body);
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << body.substr(0, 40);
    EXPECT_CONTAINS(r.error, "GET /server_info answered something that is not a JSON object");
  }
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, 1, 2);
  Took r = take_raw(T(), a.self(), s.get(), 0, 200, nullptr, 0);
  EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL);
  EXPECT_CONTAINS(r.error, "not a JSON object");
}

// The body is not NUL-terminated: only body_len bytes are read.
TEST_F(SglangTest, ProbeReadsOnlyTheBodyLength) {
  const std::string good = server_info("0.5.20");
  const std::string padded = good + "GARBAGE{{{";
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, 1, 2);
  Took r = take_raw(T(), a.self(), s.get(), 0, 200, padded.data(), good.size());
  ASSERT_EQ(r.status, WSYNC_OK) << r.error;
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{});  // 0.5.20 was read
  // One byte short is not JSON.
  Took cut = take_raw(T(), a.self(), s.get(), 0, 200, good.data(), good.size() - 1);
  EXPECT_EQ(cut.status, WSYNC_ERR_PROTOCOL);
}

TEST_F(SglangTest, ProbeRefusesAnswersWithoutARelease) {
  for (const std::string& version : {std::string(""), std::string(", \"version\": 0.523"),
                                     std::string(", \"version\": null"), std::string(", \"version\": \"\""),
                                     std::string(", \"version\": \"latest\""), std::string(", \"version\": \"5\""),
                                     std::string(", \"version\": [0, 5, 23]"),
                                     std::string(", \"version\": \"99999999999999999999.1\"")}) {
    Instance a(T(), {});
    Took r = probe(a, "{\"tp_size\": 2" + version + "}");
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << version;
    EXPECT_CONTAINS(r.error, "the server does not report a release (\"version\" of /server_info)");
    EXPECT_CONTAINS(r.error, "set option adapter.engine_version");
  }
}

// tp_size ranks join the weight-update group (rank_offset + tp_rank): it must equal the count in
// 'engines', and the message names both numbers.
TEST_F(SglangTest, ProbeRefusesATpSizeOtherThanTheEnginesCount) {
  Instance a(T(), {});
  Took r = probe(a, server_info("0.5.23", 4), 1, 2);
  EXPECT_EQ(r.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(r.error, "the server has tp_size 4 (4 GPU(s) join the weight-update group)");
  EXPECT_CONTAINS(r.error, "option 'engines' gives it 2");
  Instance b(T(), {});
  Took r1 = probe(b, server_info("0.5.23", 1), 1, 8);
  EXPECT_EQ(r1.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(r1.error, "tp_size 1");
  EXPECT_CONTAINS(r1.error, "gives it 8");
  Instance c(T(), {});
  EXPECT_EQ(probe(c, server_info("0.5.23", 8), 1, 8).status, WSYNC_OK);
}

TEST_F(SglangTest, ProbeRefusesAMissingOrMalformedTpSize) {
  for (const std::string& tp : {std::string(""), std::string(", \"tp_size\": \"2\""), std::string(", \"tp_size\": null"),
                                std::string(", \"tp_size\": true"), std::string(", \"tp_size\": 0"),
                                std::string(", \"tp_size\": -2"), std::string(", \"tp_size\": [2]")}) {
    Instance a(T(), {});
    Took r = probe(a, "{\"version\": \"0.5.23\"" + tp + "}");
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << tp;
    EXPECT_CONTAINS(r.error, "server info has no tp_size");
  }
}

// Numbers no int holds are refused, whatever the message (never taken as a GPU count).
TEST_F(SglangTest, ProbeRefusesAHugeTpSize) {
  for (const char* tp : {"1e300", "-1e300", "4294967298", "2147483650"}) {
    Instance a(T(), {});
    Took r = probe(a, std::string("{\"version\": \"0.5.23\", \"tp_size\": ") + tp + "}");
    EXPECT_NE(r.status, WSYNC_OK) << tp;
    EXPECT_CONTAINS(r.error, "tp_size");
  }
}

// pp_size > 1: every pipeline stage takes the same weight-update ranks.
TEST_F(SglangTest, ProbeRefusesPipelineParallelServers) {
  Instance a(T(), {});
  Took r = probe(a, "{\"version\": \"0.5.23\", \"tp_size\": 2, \"pp_size\": 2}");
  EXPECT_EQ(r.status, WSYNC_ERR_UNSUPPORTED);
  EXPECT_CONTAINS(r.error, "the server runs pp_size 2");
  EXPECT_CONTAINS(r.error, "use pp_size 1");
}

TEST_F(SglangTest, ProbeRefusesDataParallelWithoutDpAttention) {
  for (const char* dpa : {"", ", \"enable_dp_attention\": false", ", \"enable_dp_attention\": \"true\"",
                          ", \"enable_dp_attention\": 1"}) {
    Instance a(T(), {});
    Took r = probe(a, std::string("{\"version\": \"0.5.23\", \"tp_size\": 2, \"dp_size\": 4") + dpa + "}");
    EXPECT_EQ(r.status, WSYNC_ERR_UNSUPPORTED) << dpa;
    EXPECT_CONTAINS(r.error, "the server runs dp_size 4 replicas without DP attention");
  }
  Instance a(T(), {});
  Took ok = probe(a, "{\"version\": \"0.5.23\", \"tp_size\": 2, \"dp_size\": 2, \"enable_dp_attention\": true}");
  EXPECT_EQ(ok.status, WSYNC_OK) << ok.error;
}

TEST_F(SglangTest, ProbeWithoutPpAndDpFieldsIsOneStageOneReplica) {
  Instance a(T(), {});
  Took r = probe(a, "{\"version\": \"0.5.23\", \"tp_size\": 2}");
  EXPECT_EQ(r.status, WSYNC_OK) << r.error;
}

// A failed PROBE answer leaves the instance usable, and a later good one counts.
TEST_F(SglangTest, ProbeAfterARefusalStillWorks) {
  Instance a(T(), {});
  EXPECT_EQ(probe(a, "garbage").status, WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(probe(a, server_info("0.5.20")).status, WSYNC_OK);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_INIT), V{"POST /init_weights_update_group"});
}

// The core hands take_reply only PROBE answers; any other step's reply is not read.
TEST_F(SglangTest, TakeReplyOutsideProbeIsIgnored) {
  Instance a(T(), {});
  for (int kind : {WSYNC_STEP_HEALTH, WSYNC_STEP_RESET, WSYNC_STEP_INIT, WSYNC_STEP_FINALIZE, WSYNC_STEP_ABANDON}) {
    Step s(kind);
    Took r = take(T(), a.self(), s.get(), 0, 500, "not json");
    EXPECT_EQ(r.status, WSYNC_OK) << kind << ": " << r.error;
  }
  // and it changed nothing: still the newest dialogue
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{"POST /begin_weight_update"});
}

TEST_F(SglangTest, TakeReplyRefusesNullArguments) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  const std::string body = server_info("0.5.23");
  EXPECT_EQ(T()->take_reply(nullptr, s.get(), 0, 200, body.data(), body.size()), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(T()->take_reply(a.self(), nullptr, 0, 200, body.data(), body.size()), WSYNC_ERR_INVALID_ARGUMENT);
}

// Each server speaks its own release: one old and one new server in the same group.
TEST_F(SglangTest, EachServerSpeaksItsOwnRelease) {
  Instance a(T(), {});
  ASSERT_EQ(probe(a, server_info("0.5.20", 1), 0, 1).status, WSYNC_OK);
  ASSERT_EQ(probe(a, server_info("0.5.23", 4), 1, 4).status, WSYNC_OK);
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE, 0), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE, 1), V{"POST /begin_weight_update"});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_FINALIZE, 0), (V{"GET /flush_cache", "POST /update_weight_version"}));
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_FINALIZE, 1),
            (V{"POST /end_weight_update", "GET /flush_cache", "POST /update_weight_version"}));
  // A server never probed speaks the newest release.
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE, 7), V{"POST /begin_weight_update"});
}

// pp_size and dp_size must be counts (1e10, 2^32 + 2, -1, 0, 1.5 are refused, never cast).
TEST_F(SglangTest, ProbeRefusesPpAndDpSizesThatAreNotPositiveIntegers) {
  for (const char* key : {"pp_size", "dp_size"}) {
    for (const char* n : {"1e10", "4294967298", "-1", "0", "1.5"}) {
      Instance a(T(), {});
      Took r = probe(a, std::string("{\"version\": \"0.5.23\", \"tp_size\": 2, \"") + key + "\": " + n + "}");
      EXPECT_NE(r.status, WSYNC_OK) << key << " " << n;
      EXPECT_CONTAINS(r.error, key);
    }
  }
}

// A fractional tp_size is refused, not truncated.
TEST_F(SglangTest, ProbeRefusesAFractionalTpSize) {
  for (const char* tp : {"2.5", "2.0000001"}) {
    Instance a(T(), {});
    Took r = probe(a, std::string("{\"version\": \"0.5.23\", \"tp_size\": ") + tp + "}");
    EXPECT_NE(r.status, WSYNC_OK) << tp;
  }
}

// ---- option engine_version ----

TEST_F(SglangTest, EngineVersionOptionWithoutAProbe) {
  Instance a(T(), {{"engine_version", "0.5.20"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{});
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_ABANDON), V{});
}

// The forced release wins over what the server reports, and a server that reports none is fine.
TEST_F(SglangTest, EngineVersionOptionOverridesTheReportedRelease) {
  {
    Instance a(T(), {{"engine_version", "0.5.20"}});
    ASSERT_EQ(probe(a, server_info("0.5.23")).status, WSYNC_OK);
    EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{});
  }
  {
    Instance a(T(), {{"engine_version", "0.5.21"}});
    Took r = probe(a, "{\"tp_size\": 2, \"version\": \"a fork\"}");
    ASSERT_EQ(r.status, WSYNC_OK) << r.error;
    EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{"POST /begin_weight_update"});
  }
  {  // also over a release outside the range: the user said what to speak
    Instance a(T(), {{"engine_version", "0.5.23"}});
    EXPECT_EQ(probe(a, server_info("0.6.1")).status, WSYNC_OK);
  }
}

// The option does not skip the GPU check.
TEST_F(SglangTest, EngineVersionOptionStillChecksTheTpSize) {
  Instance a(T(), {{"engine_version", "0.5.23"}});
  Took r = probe(a, server_info("0.5.23", 4), 1, 2);
  EXPECT_EQ(r.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(r.error, "tp_size 4");
  EXPECT_CONTAINS(r.error, "gives it 2");
}

TEST_F(SglangTest, EngineVersionOptionOutsideTheRangeIsRefusedAtCreate) {
  for (const char* v : {"0.5.5", "0.5.24", "0.4.0", "1.0"}) {
    Instance a(T(), {{"engine_version", v}});
    EXPECT_EQ(a.status(), WSYNC_ERR_VERSION_MISMATCH) << v;
    EXPECT_EQ(a.self(), nullptr);
    EXPECT_CONTAINS(a.error(), "is not supported: this adapter speaks SGLang 0.5.6 to 0.5.23");
  }
}

TEST_F(SglangTest, EngineVersionOptionMustBeARelease) {
  for (const char* v : {"", "latest", "5", "v", "0.x.1", "1234567.1"}) {
    Instance a(T(), {{"engine_version", v}});
    EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT) << v;
    EXPECT_EQ(a.self(), nullptr);
    EXPECT_CONTAINS(a.error(), std::string("option 'adapter.engine_version' is '") + v + "'; give a release");
  }
}

// ---- options, validation, whole life ----

TEST_F(SglangTest, LoadFormatOption) {
  Instance ok(T(), {{"load_format", "flattened_bucket"}});
  EXPECT_EQ(ok.status(), WSYNC_OK) << ok.error();
  Instance bad(T(), {{"load_format", "direct"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.load_format' must be one of flattened_bucket, not 'direct'");
}

TEST_F(SglangTest, UnknownAndBadOptions) {
  expect_unknown_option(T(), "pause, pause_mode, load_format, set_version, engine_version");
}

TEST_F(SglangTest, StepValidation) { expect_step_validation(T()); }

// The whole life of a group at a 0.5.23 server, pause on: the session opens after the pause and
// before the first bucket, and ends before the flush.
TEST_F(SglangTest, LifeWithSessions) {
  Instance a(T(), {{"pause", "1"}});
  probed(a, "0.5.23");
  EXPECT_EQ(life(T(), a.self()), (V{"HEALTH GET /model_info",
                                    "PROBE GET /server_info",
                                    "RESET POST /end_weight_update",
                                    "RESET POST /destroy_weights_update_group",
                                    "RESET POST /continue_generation",
                                    "INIT POST /init_weights_update_group",
                                    "PAUSE POST /pause_generation",
                                    "BEGIN_UPDATE POST /begin_weight_update",
                                    "UPDATE POST /update_weights_from_distributed",
                                    "UPDATE POST /update_weights_from_distributed",
                                    "FINALIZE POST /end_weight_update",
                                    "FINALIZE GET /flush_cache",
                                    "FINALIZE POST /update_weight_version",
                                    "RESUME POST /continue_generation",
                                    "DESTROY POST /destroy_weights_update_group"}));
}

// The same at a 0.5.20 server: no session route anywhere.
TEST_F(SglangTest, LifeWithoutSessions) {
  Instance a(T(), {{"pause", "1"}});
  probed(a, "0.5.20");
  EXPECT_EQ(life(T(), a.self()), (V{"HEALTH GET /model_info",
                                    "PROBE GET /server_info",
                                    "RESET POST /destroy_weights_update_group",
                                    "RESET POST /continue_generation",
                                    "INIT POST /init_weights_update_group",
                                    "PAUSE POST /pause_generation",
                                    "UPDATE POST /update_weights_from_distributed",
                                    "UPDATE POST /update_weights_from_distributed",
                                    "FINALIZE GET /flush_cache",
                                    "FINALIZE POST /update_weight_version",
                                    "RESUME POST /continue_generation",
                                    "DESTROY POST /destroy_weights_update_group"}));
}

// Instances do not share request storage, nor what they learnt of servers.
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
  probed(a, "0.5.20");
  EXPECT_EQ(routes(T(), a.self(), WSYNC_STEP_BEGIN_UPDATE), V{});
  EXPECT_EQ(routes(T(), b.self(), WSYNC_STEP_BEGIN_UPDATE), V{"POST /begin_weight_update"});
}

}  // namespace
