// adapter_lmdeploy: every step's requests against LMDeploy's weight-update routes (0.14 .. 0.18,
// field lists per /work/shared/PROTOCOLS.md): routes, methods, reply kinds, idempotency, bodies field
// by field, the finalize-only request (also at RESET, before the destroy); the PROBE answers (the
// status of POST /init_weights_update_group {} tells the family; GET /distserve/engine_info gives
// tp_size; a no-op /update_weights_from_distributed tells TurboMind, 501, from PyTorch).
#include "adapter_test_util.h"

using namespace adapter_test;

namespace {

using V = std::vector<std::string>;

const wsync_adapter_v1_t* T() {
  static const wsync_adapter_v1_t* t = load("lmdeploy");
  return t;
}

class LmdeployTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(T(), nullptr); }
};

// What LMDeploy's validation answers to {} (FastAPI 422 / LMDeploy's 400 envelope).
const char kValidation422[] = "{\"detail\": [{\"type\": \"missing\", \"loc\": [\"body\", \"group_name\"]}]}";
const char kValidation400[] = "{\"object\": \"error\", \"message\": \"group_name: Field required\", \"code\": 400}";

// GET /distserve/engine_info answers a JSON string that holds a JSON object.
std::string engine_info(const std::string& inner) {
  std::string quoted = "\"";
  for (char c : inner) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}
std::string engine_info_tp(int tp, const std::string& more = "") {
  return engine_info("{\"tp_size\": " + std::to_string(tp) + ", \"dp_size\": 1, \"pp_size\": 1" + more + "}");
}

// What the probe's no-op update gets: TurboMind refuses it in the handler, after validation (0.18.0
// management.py); PyTorch without a group of that name answers 400 "not initialized".
const char kTurbomind501[] =
    "{\"object\": \"error\", \"message\": \"Disaggregated weight-update endpoints require backend=\\\"pytorch\\\", "
    "got 'turbomind'.\", \"code\": 501}";
const char kNoGroup400[] =
    "{\"object\": \"error\", \"message\": \"Process group 'wsync_g' not initialized\", \"code\": 400}";

// PROBE request `index` at `server` ('engines' count `gpus`): build the step, then hand the answer.
Took answer(const Instance& a, uint32_t index, int32_t http_status, const std::string& body, uint32_t server = 1,
            uint32_t gpus = 2) {
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, server, gpus);
  return take(T(), a.self(), s.get(), index, http_status, body);
}

TEST_F(LmdeployTest, NeedsTheTorchGroupHints) {
  Instance a(T(), {});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  Needs n = needs_of(T(), a.self());
  EXPECT_EQ(n.hints, (V{"torch_group=wsync_test_group", "lazy_init=1"}));
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
  for (int kind : {WSYNC_STEP_INIT, WSYNC_STEP_UPDATE, WSYNC_STEP_FINALIZE, WSYNC_STEP_DESTROY, WSYNC_STEP_RESET,
                   WSYNC_STEP_ABANDON}) {
    Step s(kind, kind == WSYNC_STEP_UPDATE ? std::vector<Tensor>{{"w", WSYNC_DTYPE_BFLOAT16, {1}}}
                                           : std::vector<Tensor>{});
    s->group_name = "";
    Built b = build(T(), a.self(), s.get());
    EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT) << kind;
    EXPECT_EQ(b.num_out, 0u);
    EXPECT_CONTAINS(b.error, "(server 1): group_name is empty");
  }
}

// pause=1 is accepted, with a warning that says it does nothing; pause=0 says nothing.
TEST_F(LmdeployTest, PauseOptionWarnsThatItHasNoEffect) {
  {
    LogCapture log;
    Instance a(T(), {{"pause", "1"}});
    ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
    ASSERT_EQ(log.lines().size(), 1u) << log.text();
    EXPECT_CONTAINS(log.lines()[0], "adapter 'lmdeploy': option pause=1 has no effect: LMDeploy has no pause route");
  }
  LogCapture log;
  Instance a(T(), {{"pause", "0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  EXPECT_TRUE(log.lines().empty()) << log.text();
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

// An /update_weights_from_distributed with empty lists: the finalize-only request (finished=true),
// or the probe's no-op (finished=false), whose answer the adapter reads.
void expect_empty_update(const Request& r, bool finished, int32_t reply) {
  expect_request(r, WSYNC_HTTP_POST, "/update_weights_from_distributed", true, 0, reply);
  Json j = parse(r.body);
  EXPECT_KEYS(j.get(), "names", "dtypes", "shapes", "group_name", "load_format", "finished");
  expect_strings(j.get(), "names", {});
  expect_strings(j.get(), "dtypes", {});
  expect_shapes(j.get(), "shapes", {});
  expect_string(j.get(), "group_name", "wsync_g");
  expect_string(j.get(), "load_format", "flattened_bucket");
  expect_bool(j.get(), "finished", finished);
}

// The finalize-only request alone: empty lists, finished=true.
void expect_finalize_only(const Built& b) {
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 1u);
  expect_empty_update(b.requests[0], true, WSYNC_REPLY_SUCCESS_FIELD);
}

// The end of an update: the finalize-only request (LMDeploy has no version and no flush).
TEST_F(LmdeployTest, FinalizeOnlyRequest) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_FINALIZE);
  expect_finalize_only(build(T(), a.self(), s.get()));
}

// After a failure mid-update there is no undo: the finalize-only request runs LMDeploy's post-load
// processing on what arrived, so the engine serves consistently.
TEST_F(LmdeployTest, AbandonSendsTheFinalizeOnlyRequest) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_ABANDON);
  s->update_index = 3;
  expect_finalize_only(build(T(), a.self(), s.get()));
}

// RESET finishes an earlier trainer's update (the finalize-only request runs LMDeploy's post-load
// step), then leaves its group: the finish needs the group, so it goes first ("not initialized" is
// the usual answer to both: best effort).
TEST_F(LmdeployTest, ResetFinishesALeftoverUpdateThenDestroysTheGroup) {
  Instance a(T(), {{"pause", "1"}});
  Step s(WSYNC_STEP_RESET);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 2u);
  expect_empty_update(b.requests[0], true, WSYNC_REPLY_SUCCESS_FIELD);
  expect_request(b.requests[1], WSYNC_HTTP_POST, "/destroy_weights_update_group", true, 0,
                 WSYNC_REPLY_SUCCESS_FIELD);
  Json j = parse(b.requests[1].body);
  EXPECT_KEYS(j.get(), "group_name");
  expect_string(j.get(), "group_name", "wsync_g");
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

// ---- PROBE ----

// {} fails validation before the handler runs (no side effect); the engine info is a plain GET; the
// no-op update (empty lists, finished=false: no broadcast, no load, no post-load step) passes
// validation, so the handler's backend check answers it.
TEST_F(LmdeployTest, ProbePostsAnEmptyInitAsksTheEngineInfoThenPostsANoOpUpdate) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  Built b = build(T(), a.self(), s.get());
  ASSERT_EQ(b.status, WSYNC_OK) << b.error;
  ASSERT_EQ(b.num_out, 3u);
  expect_request(b.requests[0], WSYNC_HTTP_POST, "/init_weights_update_group", true, 0, WSYNC_REPLY_TO_ADAPTER);
  expect_empty_object(b.requests[0]);
  expect_request(b.requests[1], WSYNC_HTTP_GET, "/distserve/engine_info", false, 1, WSYNC_REPLY_TO_ADAPTER);
  expect_empty_update(b.requests[2], false, WSYNC_REPLY_TO_ADAPTER);
}

// The no-op update names the group: a PROBE without one is refused before anything is sent.
TEST_F(LmdeployTest, ProbeNeedsTheGroupName) {
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  s->group_name = "";
  Built b = build(T(), a.self(), s.get());
  EXPECT_EQ(b.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.num_out, 0u);
  EXPECT_CONTAINS(b.error, "(server 1): group_name is empty");
}

// 422 (0.14-0.15) and 400 (0.16-0.18) are the validation errors of supported releases; the body is
// not needed.
TEST_F(LmdeployTest, ProbeAcceptsTheValidationErrorsOfSupportedReleases) {
  for (const auto& c : {std::make_pair(422, std::string(kValidation422)), std::make_pair(400, std::string(kValidation400)),
                        std::make_pair(422, std::string("")), std::make_pair(400, std::string("not json"))}) {
    Instance a(T(), {});
    Took r = answer(a, 0, c.first, c.second);
    EXPECT_EQ(r.status, WSYNC_OK) << c.first << " " << c.second << ": " << r.error;
  }
}

// 404: no such route, LMDeploy 0.13 or older; refused naming the supported range.
TEST_F(LmdeployTest, ProbeRefusesAServerWithoutTheRoute) {
  Instance a(T(), {});
  Took r = answer(a, 0, 404, "{\"detail\": \"Not Found\"}");
  EXPECT_EQ(r.status, WSYNC_ERR_VERSION_MISMATCH);
  EXPECT_CONTAINS(r.error, "adapter 'lmdeploy'");
  EXPECT_CONTAINS(r.error, "the server has no /init_weights_update_group route: LMDeploy 0.13 or older");
  EXPECT_CONTAINS(r.error, "this adapter speaks LMDeploy 0.14 to 0.18");
}

// 501 to the no-op update: a TurboMind (non-PyTorch) backend has no distributed weight update;
// the refusal quotes LMDeploy's message, which names the backend.
TEST_F(LmdeployTest, ProbeRefusesANonPytorchBackend) {
  Instance a(T(), {});
  Took r = answer(a, 2, 501, kTurbomind501);
  EXPECT_EQ(r.status, WSYNC_ERR_UNSUPPORTED);
  EXPECT_CONTAINS(r.error, "adapter 'lmdeploy'");
  EXPECT_CONTAINS(r.error, "the server's backend has no distributed weight update (HTTP 501: ");
  EXPECT_CONTAINS(r.error, "require backend=\"pytorch\", got 'turbomind'.");
  EXPECT_CONTAINS(r.error, "start LMDeploy with --backend pytorch");
  // Without LMDeploy's message (a proxy's 501): still refused, saying what 501 means.
  for (const char* body : {"", "not json", "{\"detail\": \"Not Implemented\"}", "{\"message\": 501}"}) {
    Instance b(T(), {});
    Took q = answer(b, 2, 501, body);
    EXPECT_EQ(q.status, WSYNC_ERR_UNSUPPORTED) << body;
    EXPECT_CONTAINS(q.error, "(HTTP 501: a backend other than pytorch)");
    EXPECT_CONTAINS(q.error, "start LMDeploy with --backend pytorch");
  }
}

// PyTorch: 400 "not initialized" (no group of that name: the usual answer), 200 (an earlier
// trainer's group of that name: the no-op changes nothing), 500 (the default executor, whose
// routes fail: it is not told apart here). None is a refusal.
TEST_F(LmdeployTest, ProbeAcceptsAPytorchBackend) {
  for (const auto& c : {std::make_pair(400, std::string(kNoGroup400)),
                        std::make_pair(200, std::string("{\"success\": true, \"message\": \"Succeeded\"}")),
                        std::make_pair(500, std::string("Internal Server Error")), std::make_pair(400, std::string(""))}) {
    Instance a(T(), {});
    Took r = answer(a, 2, c.first, c.second);
    EXPECT_EQ(r.status, WSYNC_OK) << c.first << " " << c.second << ": " << r.error;
  }
}

// Anything else is not a validation error: not the LMDeploy we know (200 would mean {} was taken).
// 501 here is no backend answer either: LMDeploy validates {} before its backend check (the no-op
// update tells the backend).
TEST_F(LmdeployTest, ProbeRefusesOtherStatuses) {
  for (int status : {200, 201, 500, 501, 405, 0, -1}) {
    Instance a(T(), {});
    Took r = answer(a, 0, status, "{\"success\": true}");
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << status;
    EXPECT_CONTAINS(r.error, "probing /init_weights_update_group with {} answered HTTP " + std::to_string(status) +
                                 ", not a validation error (400 or 422)");
  }
}

// tp_size ranks join; it must equal the count in 'engines', and the message names both numbers.
TEST_F(LmdeployTest, ProbeReadsTheTpSizeOfTheEngineInfo) {
  Instance a(T(), {});
  EXPECT_EQ(answer(a, 1, 200, engine_info_tp(2), 1, 2).status, WSYNC_OK);
  Instance b(T(), {});
  EXPECT_EQ(answer(b, 1, 200, engine_info_tp(8), 1, 8).status, WSYNC_OK);
}

TEST_F(LmdeployTest, ProbeRefusesATpSizeOtherThanTheEnginesCount) {
  Instance a(T(), {});
  Took r = answer(a, 1, 200, engine_info_tp(4), 1, 2);
  EXPECT_EQ(r.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(r.error, "the server has tp_size 4 (4 GPU(s) join the weight-update group)");
  EXPECT_CONTAINS(r.error, "option 'engines' gives it 2");
  Instance b(T(), {});
  Took r1 = answer(b, 1, 200, engine_info_tp(1), 1, 8);
  EXPECT_EQ(r1.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(r1.error, "tp_size 1");
  EXPECT_CONTAINS(r1.error, "gives it 8");
}

TEST_F(LmdeployTest, ProbeRefusesDataParallelServers) {
  Instance a(T(), {});
  Took r = answer(a, 1, 200, engine_info("{\"tp_size\": 2, \"dp_size\": 2}"));
  EXPECT_EQ(r.status, WSYNC_ERR_UNSUPPORTED);
  EXPECT_CONTAINS(r.error, "the server runs dp_size 2");
  EXPECT_CONTAINS(r.error, "run one server per replica");
}

// A proxy that answers the object itself instead of a string holding it is read too.
TEST_F(LmdeployTest, ProbeReadsAnEngineInfoObject) {
  Instance a(T(), {});
  EXPECT_EQ(answer(a, 1, 200, "{\"tp_size\": 2}").status, WSYNC_OK);
  Instance b(T(), {});
  Took r = answer(b, 1, 200, "{\"tp_size\": 3}");
  EXPECT_EQ(r.status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(r.error, "tp_size 3");
}

TEST_F(LmdeployTest, ProbeRefusesAnEngineInfoWithoutATpSize) {
  const std::string deep(100000, '[');
  for (const std::string& body :
       {std::string(""), std::string("not json"), std::string("\"not json inside\""), engine_info("{}"),
        engine_info("{\"tp_size\": \"2\"}"), engine_info("{\"tp_size\": null}"), engine_info("{\"tp_size\": true}"),
        engine_info("[2]"), engine_info("\"{\\\"tp_size\\\": 2}\""), std::string("[\"{\\\"tp_size\\\": 2}\"]"),
        std::string("null"), std::string("2"), deep}) {
    Instance a(T(), {});
    Took r = answer(a, 1, 200, body);
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << body.substr(0, 60);
    EXPECT_CONTAINS(r.error, "GET /distserve/engine_info has no tp_size");
  }
}

// Negative, zero and enormous counts are never taken as a match.
TEST_F(LmdeployTest, ProbeRefusesANegativeOrHugeTpSize) {
  for (const char* tp : {"-2", "-1", "0", "1e300", "-1e300"}) {
    Instance a(T(), {});
    Took r = answer(a, 1, 200, engine_info(std::string("{\"tp_size\": ") + tp + "}"));
    EXPECT_NE(r.status, WSYNC_OK) << tp;
    EXPECT_CONTAINS(r.error, "tp_size");
  }
}

// tp_size must be an exact count (2^32 + 2, 2.5 are refused) and dp_size positive.
TEST_F(LmdeployTest, ProbeRefusesATpSizeThatIsNotAnExactCount) {
  for (const char* tp : {"4294967298", "2.5"}) {
    Instance a(T(), {});
    Took r = answer(a, 1, 200, engine_info(std::string("{\"tp_size\": ") + tp + "}"), 1, 2);
    EXPECT_NE(r.status, WSYNC_OK) << tp;
  }
  Instance a(T(), {});
  EXPECT_NE(answer(a, 1, 200, engine_info("{\"tp_size\": 2, \"dp_size\": -1}"), 1, 2).status, WSYNC_OK);
}

// A server that does not answer the engine info is not refused: its GPU count is not checked, and a
// warning names the server and the status.
TEST_F(LmdeployTest, ProbeWithoutEngineInfoDoesNotCheckTheGpus) {
  for (int status : {404, 500}) {
    Instance a(T(), {});
    LogCapture log;
    Took r = answer(a, 1, status, "Internal Server Error");
    EXPECT_EQ(r.status, WSYNC_OK) << status << ": " << r.error;
    ASSERT_EQ(log.lines().size(), 1u) << log.text();
    EXPECT_CONTAINS(log.lines()[0], std::to_string(WSYNC_LOG_WARN) + " adapter 'lmdeploy': server 1: GET "
                                    "/distserve/engine_info answered HTTP " + std::to_string(status));
    EXPECT_CONTAINS(log.lines()[0], "its GPU count is not checked");
  }
}

// The body is not NUL-terminated: only body_len bytes are read.
TEST_F(LmdeployTest, ProbeReadsOnlyTheBodyLength) {
  const std::string good = engine_info_tp(2);
  const std::string padded = good + "\"{\\\"tp_size\\\": 9}\"";
  Instance a(T(), {});
  Step s(WSYNC_STEP_PROBE);
  build_probe(T(), a.self(), s, 1, 2);
  EXPECT_EQ(take_raw(T(), a.self(), s.get(), 1, 200, padded.data(), good.size()).status, WSYNC_OK);
  EXPECT_EQ(take_raw(T(), a.self(), s.get(), 1, 200, good.data(), good.size() - 1).status, WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(take_raw(T(), a.self(), s.get(), 1, 200, nullptr, 0).status, WSYNC_ERR_PROTOCOL);
}

TEST_F(LmdeployTest, TakeReplyOutsideProbeIsIgnored) {
  Instance a(T(), {});
  for (int kind : {WSYNC_STEP_HEALTH, WSYNC_STEP_RESET, WSYNC_STEP_INIT, WSYNC_STEP_FINALIZE, WSYNC_STEP_ABANDON}) {
    Step s(kind);
    for (uint32_t index : {0u, 1u, 2u}) {
      Took r = take(T(), a.self(), s.get(), index, index == 2 ? 501 : 404, "not json");
      EXPECT_EQ(r.status, WSYNC_OK) << kind << ": " << r.error;
    }
  }
}

// ---- options ----

TEST_F(LmdeployTest, EngineVersionOptionAcceptsSupportedReleases) {
  for (const char* v : {"0.14.0", "0.15.1", "0.16", "v0.18.0"}) {
    Instance a(T(), {{"engine_version", v}});
    EXPECT_EQ(a.status(), WSYNC_OK) << v << ": " << a.error();
    EXPECT_NE(a.self(), nullptr);
  }
}

TEST_F(LmdeployTest, EngineVersionOptionOutsideTheRangeIsRefusedAtCreate) {
  for (const char* v : {"0.13.0", "0.19.0", "0.2.6", "1.0"}) {
    Instance a(T(), {{"engine_version", v}});
    EXPECT_EQ(a.status(), WSYNC_ERR_VERSION_MISMATCH) << v;
    EXPECT_EQ(a.self(), nullptr);
    EXPECT_CONTAINS(a.error(), "is not supported: this adapter speaks LMDeploy 0.14.0 to 0.18.x");
  }
  Instance bad(T(), {{"engine_version", "turbomind"}});
  EXPECT_EQ(bad.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(bad.error(), "option 'adapter.engine_version' is 'turbomind'; give a release");
}

// The option picks the family, not whether the server has the routes or the right backend.
TEST_F(LmdeployTest, EngineVersionOptionStillRefusesServersWithoutTheRoutes) {
  Instance a(T(), {{"engine_version", "0.16.0"}});
  ASSERT_EQ(a.status(), WSYNC_OK) << a.error();
  EXPECT_EQ(answer(a, 0, 404, "").status, WSYNC_ERR_VERSION_MISMATCH);
  EXPECT_EQ(answer(a, 0, 422, "").status, WSYNC_OK);
  EXPECT_EQ(answer(a, 1, 200, engine_info_tp(4), 1, 2).status, WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(answer(a, 2, 501, kTurbomind501).status, WSYNC_ERR_UNSUPPORTED);
  EXPECT_EQ(answer(a, 2, 400, kNoGroup400).status, WSYNC_OK);
}

TEST_F(LmdeployTest, UnknownAndBadOptions) {
  expect_unknown_option(T(), "pause, engine_version");
  Instance a(T(), {{"load_format", "flattened_bucket"}});  // an SGLang option, not LMDeploy's
  EXPECT_EQ(a.status(), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(a.error(), "unknown option 'adapter.load_format' (known: pause, engine_version)");
}

TEST_F(LmdeployTest, StepValidation) { expect_step_validation(T()); }

// The requests do not depend on the family: 0.14 and 0.18 get the same ones.
TEST_F(LmdeployTest, LifeIsTheSameInEveryFamily) {
  Instance old(T(), {{"pause", "1"}});
  ASSERT_EQ(answer(old, 0, 422, kValidation422).status, WSYNC_OK);
  ASSERT_EQ(answer(old, 1, 200, engine_info_tp(2)).status, WSYNC_OK);
  ASSERT_EQ(answer(old, 2, 400, kNoGroup400).status, WSYNC_OK);
  Instance cur(T(), {{"pause", "1"}});
  ASSERT_EQ(answer(cur, 0, 400, kValidation400).status, WSYNC_OK);
  ASSERT_EQ(answer(cur, 1, 200, engine_info_tp(2)).status, WSYNC_OK);
  ASSERT_EQ(answer(cur, 2, 400, kNoGroup400).status, WSYNC_OK);
  const V expected{"HEALTH GET /health",
                   "PROBE POST /init_weights_update_group",
                   "PROBE GET /distserve/engine_info",
                   "PROBE POST /update_weights_from_distributed",
                   "RESET POST /update_weights_from_distributed",
                   "RESET POST /destroy_weights_update_group",
                   "INIT POST /init_weights_update_group",
                   "UPDATE POST /update_weights_from_distributed",
                   "UPDATE POST /update_weights_from_distributed",
                   "FINALIZE POST /update_weights_from_distributed",
                   "DESTROY POST /destroy_weights_update_group"};
  EXPECT_EQ(life(T(), old.self()), expected);
  EXPECT_EQ(life(T(), cur.self()), expected);
  EXPECT_EQ(routes(T(), old.self(), WSYNC_STEP_ABANDON), V{"POST /update_weights_from_distributed"});
  EXPECT_EQ(routes(T(), cur.self(), WSYNC_STEP_ABANDON), V{"POST /update_weights_from_distributed"});
}

}  // namespace
