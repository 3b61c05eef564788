// The core's HTTP layer against a real HTTP server (cpp-httplib on 127.0.0.1): request shape
// (headers, body, method, path), reply judgement with the engine's own words (SGLang, vLLM,
// FastAPI, LMDeploy bodies), timeouts, abort, retries, and the engine server list.
#include <cstdlib>
#include <stdexcept>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <cjson/cJSON.h>

#include "common/error.h"
#include "http/engine_set.h"
#include "http/http_client.h"
#include "http/reply.h"

using namespace wsync;

namespace {

using Clock = std::chrono::steady_clock;
int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// A real HTTP server on 127.0.0.1 and an ephemeral port, serving from its own thread.
struct TestServer {
  httplib::Server svr;
  std::thread thread;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<int> hits{0};

  void start() {
    port = svr.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port, 0);
    thread = std::thread([this] { svr.listen_after_bind(); });
    auto t0 = Clock::now();
    while (!svr.is_running() && ms_since(t0) < 5000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(svr.is_running());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  // Sleep in a handler, cut short when the test ends (so stop() does not wait for it).
  void nap(int64_t ms) {
    auto t0 = Clock::now();
    while (!stopping && ms_since(t0) < ms) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~TestServer() {
    stopping = true;
    svr.stop();
    if (thread.joinable()) thread.join();
  }
};

wsync_http_request_t make_req(int32_t method, const char* path, const char* body, int32_t reply,
                              bool idempotent = false) {
  wsync_http_request_t r = WSYNC_HTTP_REQUEST_INIT;
  r.method = method;
  r.path = path;
  r.body = body;
  r.reply = reply;
  r.idempotent = idempotent ? 1u : 0u;
  return r;
}

struct Sent {
  wsync_status_t status;
  std::string message;  // wsync_last_error() after the call
  HttpReply reply;
  int64_t ms;
};

Sent send(const std::string& url, const wsync_http_request_t& req, const HttpOptions& opts = HttpOptions(),
          const std::atomic<bool>* abort_flag = nullptr) {
  clear_error();
  Sent s;
  auto t0 = Clock::now();
  s.status = http_call(url, req, opts, abort_flag, nullptr, &s.reply);
  s.ms = ms_since(t0);
  s.message = last_error();
  return s;
}

// A port on 127.0.0.1 that nothing listens on (bound, then closed).
int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

void json_reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

// ------------------------------------------------------------------------------------------------
// Request shape

TEST(HttpRequest, PostWithoutBodyCarriesJsonContentTypeAndBearerKey) {
  TestServer s;
  std::mutex mu;
  std::string ctype, auth, body, clen, method;
  s.svr.Post("/wakeup", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> g(mu);
    ++s.hits;
    ctype = req.get_header_value("Content-Type");
    auth = req.get_header_value("Authorization");
    clen = req.get_header_value("Content-Length");
    body = req.body;
    method = req.method;
    res.status = 200;
  });
  s.start();
  HttpOptions o;
  o.api_key = "k";
  Sent r = send(s.url(), make_req(WSYNC_HTTP_POST, "/wakeup", nullptr, WSYNC_REPLY_STATUS), o);
  ASSERT_EQ(r.status, WSYNC_OK) << r.message;
  std::lock_guard<std::mutex> g(mu);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(method, "POST");
  EXPECT_EQ(ctype, "application/json");
  EXPECT_EQ(auth, "Bearer k");
  EXPECT_EQ(clen, "0");
  EXPECT_EQ(body, "");
  EXPECT_EQ(r.reply.status, 200);
}

TEST(HttpRequest, PostBodyGetQueryNoKeyAndTrailingSlashBase) {
  TestServer s;
  std::mutex mu;
  std::string post_body, post_ctype, get_ctype, get_auth, get_param, get_path;
  bool get_has_auth = true;
  s.svr.Post("/update_weights", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> g(mu);
    post_body = req.body;
    post_ctype = req.get_header_value("Content-Type");
    json_reply(res, 200, R"({"message":"Weights updated"})");
  });
  s.svr.Get("/flush_cache", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> g(mu);
    get_ctype = req.get_header_value("Content-Type");
    get_has_auth = req.has_header("Authorization");
    get_param = req.get_param_value("timeout");
    get_path = req.path;
    res.set_content("Cache flushed.\n", "text/plain");
  });
  s.start();
  const char* body = R"({"update_info":{"names":["w"],"dtype_names":["bfloat16"],"shapes":[[2,3]]}})";
  Sent p = send(s.url() + "/", make_req(WSYNC_HTTP_POST, "/update_weights", body, WSYNC_REPLY_JSON));
  ASSERT_EQ(p.status, WSYNC_OK) << p.message;
  EXPECT_EQ(p.reply.body, R"({"message":"Weights updated"})");
  EXPECT_EQ(p.reply.content_type, "application/json");
  Sent g = send(s.url(), make_req(WSYNC_HTTP_GET, "/flush_cache?timeout=0", nullptr, WSYNC_REPLY_STATUS));
  ASSERT_EQ(g.status, WSYNC_OK) << g.message;
  EXPECT_EQ(g.reply.body, "Cache flushed.\n");
  std::lock_guard<std::mutex> lk(mu);
  EXPECT_EQ(post_body, body);
  EXPECT_EQ(post_ctype, "application/json");
  EXPECT_EQ(get_ctype, "");  // a GET carries no body and no Content-Type
  EXPECT_FALSE(get_has_auth);
  EXPECT_EQ(get_param, "0");
  EXPECT_EQ(get_path, "/flush_cache");
}

TEST(HttpRequest, JoinUrlAndMalformedRequestsAreRefusedWithoutSending) {
  EXPECT_EQ(http_join_url("http://h:1", "/a?b=c"), "http://h:1/a?b=c");
  EXPECT_EQ(http_join_url("http://h:1/", "/a"), "http://h:1/a");
  EXPECT_EQ(http_join_url("http://h:1/v1//", "/a"), "http://h:1/v1/a");

  TestServer s;
  s.svr.Post(".*", [&](const httplib::Request&, httplib::Response& res) { ++s.hits; res.status = 200; });
  s.start();
  Sent a = send(s.url(), make_req(WSYNC_HTTP_POST, "route", nullptr, WSYNC_REPLY_STATUS));
  EXPECT_EQ(a.status, WSYNC_ERR_INTERNAL);
  EXPECT_NE(a.message.find("path 'route' does not start with '/'"), std::string::npos) << a.message;
  Sent b = send(s.url(), make_req(3, "/x", nullptr, WSYNC_REPLY_STATUS));
  EXPECT_EQ(b.status, WSYNC_ERR_INTERNAL);
  EXPECT_NE(b.message.find("method 3"), std::string::npos) << b.message;
  Sent c = send(s.url(), make_req(WSYNC_HTTP_POST, "/x", nullptr, 9));
  EXPECT_EQ(c.status, WSYNC_ERR_INTERNAL);
  EXPECT_NE(c.message.find("reply kind 9"), std::string::npos) << c.message;
  Sent d = send(s.url(), make_req(WSYNC_HTTP_POST, "/a b", nullptr, WSYNC_REPLY_STATUS));
  EXPECT_EQ(d.status, WSYNC_ERR_INTERNAL);
  Sent e = send(s.url(), make_req(WSYNC_HTTP_GET, "/x", "{}", WSYNC_REPLY_STATUS));
  EXPECT_EQ(e.status, WSYNC_ERR_INTERNAL);
  EXPECT_NE(e.message.find("GET /x has a body"), std::string::npos) << e.message;
  HttpOptions bad_key;
  bad_key.api_key = "k\r\nX-Evil: 1";
  Sent f = send(s.url(), make_req(WSYNC_HTTP_POST, "/x", nullptr, WSYNC_REPLY_STATUS), bad_key);
  EXPECT_EQ(f.status, WSYNC_ERR_INTERNAL);
  EXPECT_NE(f.message.find("API key contains a control character"), std::string::npos) << f.message;
  EXPECT_EQ(s.hits, 0);
}

// ------------------------------------------------------------------------------------------------
// Reply judgement against real replies

struct JudgeServer : TestServer {
  JudgeServer() {
    svr.Post("/ok_success", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 200, R"({"success":true,"message":"Succeeded to update parameter online."})");
    });
    svr.Post("/update_weights_from_distributed", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 200, R"({"success":false,"message":"Failed to update parameter online: boom."})");
    });
    svr.Post("/sgl_400_success", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 400, R"({"success":false,"message":"Failed to initialize custom process group: x."})");
    });
    svr.Post("/sgl_error_response", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 400, R"({"object":"error","message":"m","type":"Bad Request","param":null,"code":400})");
    });
    svr.Post("/fastapi_422", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 422,
                 R"({"detail":[{"type":"missing","loc":["body","master_address"],"msg":"Field required","input":{}},)"
                 R"({"type":"int_parsing","loc":["body","shapes",0,1],"msg":"Input should be a valid integer","input":"x"}]})");
    });
    svr.Post("/vllm_error", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 400, R"({"error":"x"})");
    });
    svr.Post("/vllm_error_object", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 400, R"({"error":{"message":"y","type":"BadRequestError","param":null,"code":400}})");
    });
    svr.Get("/detail_string", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 404, R"({"detail":"Not Found"})");
    });
    svr.Post("/plain_500", [](const httplib::Request&, httplib::Response& res) {
      res.status = 500;
      res.set_content("Internal\tServer\r\nError\n", "text/plain");
    });
    svr.Post("/auth", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 401, R"({"detail":"bad key"})");
    });
    svr.Post("/forbidden", [](const httplib::Request&, httplib::Response& res) {
      res.status = 403;
      res.set_content("nope", "text/plain");
    });
    svr.Post("/html_200", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("<html>ok</html>", "text/html");
    });
    svr.Post("/no_success", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 200, R"({"message":"Weights updated"})");
    });
    svr.Post("/success_string", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 200, R"({"success":"true"})");
    });
    svr.Post("/json_array", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 200, R"([true])");
    });
    svr.Post("/json_null", [](const httplib::Request&, httplib::Response& res) { json_reply(res, 200, "null"); });
    svr.Post("/json_trailing", [](const httplib::Request&, httplib::Response& res) {
      json_reply(res, 200, R"({"success":true} x)");
    });
    svr.Post("/empty_200", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
    start();
  }
};

TEST(HttpReplyJudge, SuccessFieldTrueIsOk) {
  JudgeServer s;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_POST, "/ok_success", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(r.status, WSYNC_OK) << r.message;
  EXPECT_EQ(r.message, "");
  // judge_reply hands back the engine's message on success
  HttpResult res = http_perform(s.url(), make_req(WSYNC_HTTP_POST, "/ok_success", "{}", WSYNC_REPLY_SUCCESS_FIELD),
                                HttpOptions(), nullptr);
  std::string m;
  EXPECT_EQ(judge_reply(s.url(), make_req(WSYNC_HTTP_POST, "/ok_success", "{}", WSYNC_REPLY_SUCCESS_FIELD),
                        HttpOptions(), res, &m),
            WSYNC_OK);
  EXPECT_EQ(m, "Succeeded to update parameter online.");
  EXPECT_EQ(res.attempts, 1);
}

TEST(HttpReplyJudge, SuccessFalseCarriesTheEngineMessage) {
  JudgeServer s;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_POST, "/update_weights_from_distributed", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(r.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(r.message, "engine " + s.url() +
                           " answered POST /update_weights_from_distributed with success=false: Failed to update "
                           "parameter online: boom.");
  // The same body with HTTP 400 (SGLang's failure status): judged by the status first.
  Sent b = send(s.url(), make_req(WSYNC_HTTP_POST, "/sgl_400_success", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(b.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(b.message, "engine " + s.url() +
                           " answered POST /sgl_400_success with HTTP 400: Failed to initialize custom process group: x.");
}

TEST(HttpReplyJudge, ErrorBodiesOfSGLangVllmFastApi) {
  JudgeServer s;
  const std::string e = "engine " + s.url();
  Sent a = send(s.url(), make_req(WSYNC_HTTP_POST, "/sgl_error_response", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(a.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(a.message, e + " answered POST /sgl_error_response with HTTP 400: m");
  Sent b = send(s.url(), make_req(WSYNC_HTTP_POST, "/fastapi_422", "{}", WSYNC_REPLY_STATUS));
  EXPECT_EQ(b.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(b.message, e + " answered POST /fastapi_422 with HTTP 422: body.master_address: Field required; "
                           "body.shapes.0.1: Input should be a valid integer");
  Sent c = send(s.url(), make_req(WSYNC_HTTP_POST, "/vllm_error", "{}", WSYNC_REPLY_JSON));
  EXPECT_EQ(c.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(c.message, e + " answered POST /vllm_error with HTTP 400: x");
  Sent d = send(s.url(), make_req(WSYNC_HTTP_POST, "/vllm_error_object", "{}", WSYNC_REPLY_JSON));
  EXPECT_EQ(d.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(d.message, e + " answered POST /vllm_error_object with HTTP 400: y");
  Sent f = send(s.url(), make_req(WSYNC_HTTP_GET, "/detail_string", nullptr, WSYNC_REPLY_JSON));
  EXPECT_EQ(f.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(f.message, e + " answered GET /detail_string with HTTP 404: Not Found");
  Sent g = send(s.url(), make_req(WSYNC_HTTP_POST, "/plain_500", "{}", WSYNC_REPLY_STATUS));
  EXPECT_EQ(g.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(g.message, e + " answered POST /plain_500 with HTTP 500: Internal Server Error");
  EXPECT_EQ(g.reply.status, 500);
  EXPECT_EQ(g.reply.body, "Internal\tServer\r\nError\n");  // the raw body is kept for the caller
  Sent h = send(s.url(), make_req(WSYNC_HTTP_POST, "/nowhere", "{}", WSYNC_REPLY_STATUS));
  EXPECT_EQ(h.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(h.reply.status, 404);
  EXPECT_EQ(h.message.rfind(e + " answered POST /nowhere with HTTP 404: ", 0), 0u) << h.message;
}

TEST(HttpReplyJudge, AuthFailuresAreRejected) {
  JudgeServer s;
  const std::string e = "engine " + s.url();
  HttpOptions o;
  o.api_key = "wrong";
  Sent a = send(s.url(), make_req(WSYNC_HTTP_POST, "/auth", "{}", WSYNC_REPLY_SUCCESS_FIELD), o);
  EXPECT_EQ(a.status, WSYNC_ERR_REJECTED);
  EXPECT_EQ(a.message, e + " refused the API key of group option engine_api_key (HTTP 401 to POST /auth): bad key");
  Sent b = send(s.url(), make_req(WSYNC_HTTP_POST, "/auth", "{}", WSYNC_REPLY_STATUS));
  EXPECT_EQ(b.status, WSYNC_ERR_REJECTED);
  EXPECT_EQ(b.message, e + " requires an API key, and group option engine_api_key is not set (HTTP 401 to POST /auth): bad key");
  Sent c = send(s.url(), make_req(WSYNC_HTTP_POST, "/forbidden", "{}", WSYNC_REPLY_STATUS), o);
  EXPECT_EQ(c.status, WSYNC_ERR_REJECTED);
  EXPECT_EQ(c.message, e + " refused the API key of group option engine_api_key (HTTP 403 to POST /forbidden): nope");
}

TEST(HttpReplyJudge, WrongShapesAreProtocolErrorsNeverSuccess) {
  JudgeServer s;
  const std::string e = "engine " + s.url();
  Sent a = send(s.url(), make_req(WSYNC_HTTP_POST, "/html_200", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(a.status, WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(a.message, e + " answered POST /html_200 (HTTP 200, Content-Type text/html) with a body that is not "
                           "JSON: <html>ok</html>");
  Sent b = send(s.url(), make_req(WSYNC_HTTP_POST, "/html_200", "{}", WSYNC_REPLY_JSON));
  EXPECT_EQ(b.status, WSYNC_ERR_PROTOCOL);
  Sent c = send(s.url(), make_req(WSYNC_HTTP_POST, "/html_200", "{}", WSYNC_REPLY_STATUS));
  EXPECT_EQ(c.status, WSYNC_OK) << c.message;  // STATUS does not read the body
  Sent d = send(s.url(), make_req(WSYNC_HTTP_POST, "/no_success", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(d.status, WSYNC_ERR_PROTOCOL);
  EXPECT_EQ(d.message, e + " answered POST /no_success (HTTP 200) without a boolean \"success\" field: "
                           "{\"message\":\"Weights updated\"}");
  Sent f = send(s.url(), make_req(WSYNC_HTTP_POST, "/success_string", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(f.status, WSYNC_ERR_PROTOCOL);
  Sent g = send(s.url(), make_req(WSYNC_HTTP_POST, "/json_array", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(g.status, WSYNC_ERR_PROTOCOL);
  Sent h = send(s.url(), make_req(WSYNC_HTTP_POST, "/json_null", "{}", WSYNC_REPLY_JSON));
  EXPECT_EQ(h.status, WSYNC_OK) << h.message;  // LMDeploy /update_weights answers `null`
  Sent i = send(s.url(), make_req(WSYNC_HTTP_POST, "/json_null", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(i.status, WSYNC_ERR_PROTOCOL);
  Sent j = send(s.url(), make_req(WSYNC_HTTP_POST, "/json_trailing", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(j.status, WSYNC_ERR_PROTOCOL);
  Sent k = send(s.url(), make_req(WSYNC_HTTP_POST, "/empty_200", nullptr, WSYNC_REPLY_JSON));
  EXPECT_EQ(k.status, WSYNC_ERR_PROTOCOL);
  EXPECT_NE(k.message.find("not JSON: (empty body)"), std::string::npos) << k.message;
  Sent l = send(s.url(), make_req(WSYNC_HTTP_POST, "/empty_200", nullptr, WSYNC_REPLY_STATUS));
  EXPECT_EQ(l.status, WSYNC_OK) << l.message;
}

// A server whose every route answers with a body that never ends (64 KiB chunks), and one whose
// routes answer with bodies of exactly the sizes the limits allow.
void serve_big_replies(TestServer& s) {
  s.svr.Post("/endless", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      if (s.stopping) {
        sink.done();
        return true;
      }
      static const std::string chunk(64 << 10, 'b');  // small: the server's own memory stays flat
      return sink.write(chunk.data(), chunk.size());
    });
  });
  s.svr.Post("/mib_plus_one", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content("\"" + std::string((1u << 20) - 1, 'a') + "\"", "application/json");
  });
  s.svr.Post("/adapter_max", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(16u << 20, 'c'), "text/plain");
  });
  s.svr.Post("/refusal_of_a_mib", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 500;
    res.set_content(std::string(1u << 20, 'd'), "text/plain");
  });
}

// What the core judges itself is refused past 1 MiB; what the adapter reads, past 16 MiB (the
// plugin contract); of a status-only reply only its start is kept.
TEST(HttpReplyJudge, OversizedRepliesAreRefusedByKind) {
  TestServer s;
  serve_big_replies(s);
  s.start();
  for (int32_t kind : {WSYNC_REPLY_STATUS, WSYNC_REPLY_SUCCESS_FIELD, WSYNC_REPLY_JSON}) {
    Sent r = send(s.url(), make_req(WSYNC_HTTP_POST, "/endless", nullptr, kind));
    EXPECT_EQ(r.status, WSYNC_ERR_PROTOCOL) << kind;
    EXPECT_NE(r.message.find("answered POST /endless with a reply larger than 1 MiB"), std::string::npos) << r.message;
    EXPECT_EQ(r.reply.body.capacity() < 1024, true) << "a refused body is freed, not handed back";
  }
  Sent big = send(s.url(), make_req(WSYNC_HTTP_POST, "/mib_plus_one", nullptr, WSYNC_REPLY_JSON));
  EXPECT_EQ(big.status, WSYNC_ERR_PROTOCOL);
  EXPECT_NE(big.message.find("larger than 1 MiB"), std::string::npos) << big.message;
  Sent endless = send(s.url(), make_req(WSYNC_HTTP_POST, "/endless", nullptr, WSYNC_REPLY_TO_ADAPTER));
  EXPECT_EQ(endless.status, WSYNC_ERR_PROTOCOL);
  EXPECT_NE(endless.message.find("with a reply larger than 16 MiB"), std::string::npos) << endless.message;
  Sent most = send(s.url(), make_req(WSYNC_HTTP_POST, "/adapter_max", nullptr, WSYNC_REPLY_TO_ADAPTER));
  EXPECT_EQ(most.status, WSYNC_OK) << most.message;
  EXPECT_EQ(most.reply.body.size(), 16u << 20);
  Sent refusal = send(s.url(), make_req(WSYNC_HTTP_POST, "/refusal_of_a_mib", nullptr, WSYNC_REPLY_STATUS));
  EXPECT_EQ(refusal.status, WSYNC_ERR_ENGINE);
  EXPECT_NE(refusal.message.find("HTTP 500: dddd"), std::string::npos) << refusal.message.substr(0, 200);
  EXPECT_EQ(refusal.reply.body.size(), kHttpStatusBodyKeep);
}

[[maybe_unused]] size_t rss_bytes() {  // (unused under a sanitizer)
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  fclose(f);
  return size_t(resident) * size_t(sysconf(_SC_PAGESIZE));
}

// The review's rogue engine server (every route answering without end, at every recheck) grew a
// trainer from 21 to 136 MB for as long as it ran. Each refused reply is freed, and the heap given
// back, when its call ends: 8 callers at once, 3 rounds, leave the process about where it was.
TEST(HttpReplyJudge, RefusedRepliesAreFreedWhenTheCallEnds) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WSYNC_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(WSYNC_TEST_SANITIZED)
  // (TSan's allocator keeps freed memory and its shadow too: 18 MiB more after the 24 calls)
  GTEST_SKIP() << "a sanitizer's allocator keeps freed memory (ASan's quarantine, TSan's): RSS says nothing here";
#else
  TestServer s;
  serve_big_replies(s);
  s.start();
  // Warm up libcurl and the server's threads.
  (void)send(s.url(), make_req(WSYNC_HTTP_POST, "/mib_plus_one", nullptr, WSYNC_REPLY_JSON));
  const size_t rss0 = rss_bytes();
  std::atomic<int> refused{0};
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> callers;
    for (int i = 0; i < 8; ++i)
      callers.emplace_back([&, i] {
        int32_t kind = i % 2 == 0 ? WSYNC_REPLY_TO_ADAPTER : WSYNC_REPLY_JSON;
        std::string why;
        if (http_call(s.url(), make_req(WSYNC_HTTP_POST, "/endless", nullptr, kind), HttpOptions(), nullptr, &why,
                      nullptr) == WSYNC_ERR_PROTOCOL)
          refused++;
      });
    for (auto& t : callers) t.join();
  }
  EXPECT_EQ(refused.load(), 24);
  const size_t rss1 = rss_bytes();
  EXPECT_LT(rss1 > rss0 ? rss1 - rss0 : 0, size_t(16) << 20) << "RSS grew by " << ((rss1 - rss0) >> 20) << " MiB";
#endif
}

TEST(HttpReplyJudge, MessagesAndExcerpts) {
  EXPECT_EQ(body_excerpt(""), "(empty body)");
  EXPECT_EQ(body_excerpt(" \r\n\t "), "(empty body)");
  EXPECT_EQ(body_excerpt("  a\n\nb\x01" "c \x7f"), "a b c");
  EXPECT_EQ(body_excerpt(std::string(400, 'x')), std::string(300, 'x') + "...");
  EXPECT_EQ(body_excerpt("abcdef", 6), "abcdef");
  EXPECT_EQ(body_excerpt("abcdefg", 6), "abcdef...");
  // "\xc3\xa9" is one character (e-acute): never cut in the middle
  EXPECT_EQ(body_excerpt("abcde\xc3\xa9z", 6), "abcde...");
  EXPECT_EQ(body_excerpt("abcd\xc3\xa9z", 6), "abcd\xc3\xa9...");
  EXPECT_EQ(engine_message(R"({"message":"a\nb"})"), "a b");
  EXPECT_EQ(engine_message(R"({"message":"","error":"e"})"), "e");
  EXPECT_EQ(engine_message(R"({"detail":[{"msg":"Field required"}]})"), "Field required");
  EXPECT_EQ(engine_message(R"({"detail":{"reason":"r"}})"), R"({"reason":"r"})");
  EXPECT_EQ(engine_message(R"({"status":"ok"})"), R"({"status":"ok"})");
  EXPECT_EQ(engine_message("not json"), "not json");
  EXPECT_EQ(engine_message("{\"message\":\"" + std::string(2000, 'm') + "\"}"), std::string(1000, 'm') + "...");
}

// An engine's numbers are doubles in cJSON: a list index in a FastAPI "loc" that is not an integer
// (a fraction, 1e300, 2^63, an overflow to infinity) was cast to long long unchecked (undefined
// behaviour; on x86 "-9223372036854775808"). Now the reply keeps its status (WSYNC_ERR_ENGINE for
// a 422) and the message names the field instead of inventing an index.
TEST(HttpReplyJudge, NumbersFromTheEngineAreRangeChecked) {
  const struct {
    const char* number;
    const char* shown;
  } cases[] = {
      {"1.5", "detail[0].loc[1] is 1.5, not an integer"},
      {"1e300", "detail[0].loc[1] is 1e+300, not an integer in"},
      {"-1e300", "detail[0].loc[1] is -1e+300, not an integer in"},
      {"1e999", "detail[0].loc[1] is inf, not an integer in"},  // strtod overflows to infinity
      {"9223372036854775808", "detail[0].loc[1] is 9.223372036854776e+18, not an integer in"},  // 2^63
      {"9007199254740994", "detail[0].loc[1] is 9007199254740994, outside"},  // past 2^53: not exact
  };
  for (const auto& c : cases) {
    HttpResult r;
    r.outcome = HttpOutcome::kReplied;
    r.attempts = 1;
    r.reply.status = 422;
    r.reply.body.assign(std::string(R"({"detail":[{"loc":["body",)") + c.number + R"(],"msg":"Field required"}]})");
    std::string message;
    const wsync_http_request_t req = make_req(WSYNC_HTTP_POST, "/update", "{}", WSYNC_REPLY_SUCCESS_FIELD);
    EXPECT_EQ(judge_reply("http://e:1", req, HttpOptions(), r, &message), WSYNC_ERR_ENGINE) << c.number;
    EXPECT_NE(message.find(std::string("HTTP 422: body.<") + c.shown), std::string::npos) << c.number << ": " << message;
    EXPECT_NE(message.find(">: Field required"), std::string::npos) << message;
    EXPECT_EQ(message.find("-9223372036854775808"), std::string::npos) << message;
  }
  // Integers are still shown as indexes, negative ones too.
  EXPECT_EQ(engine_message(R"({"detail":[{"loc":["body",3,-1,0.0],"msg":"m"}]})"), "body.3.-1.0: m");
  EXPECT_EQ(engine_message(R"({"detail":[{"msg":"a"},{"loc":[2.5],"msg":"b"}]})"),
            "a; <detail[1].loc[0] is 2.5, not an integer>: b");
}

TEST(HttpReplyJudge, JsonIntegerRefusesWhatDoesNotFit) {
  const double values[] = {NAN, INFINITY, -INFINITY, 1e300, -1e300, 9223372036854775808.0, -9223372036854775808.0 * 2,
                           0.5, -0.25, 4.000000001};
  for (double v : values) {
    cJSON* j = cJSON_CreateNumber(v);
    long long n = 42;
    std::string why;
    EXPECT_FALSE(json_integer(j, "field.x", LLONG_MIN, LLONG_MAX, &n, &why)) << v;
    EXPECT_EQ(n, 42) << v;
    EXPECT_EQ(why.rfind("field.x is ", 0), 0u) << why;
    cJSON_Delete(j);
  }
  struct {
    double v;
    long long lo, hi;
    bool ok;
  } ranged[] = {{-9223372036854775808.0, LLONG_MIN, LLONG_MAX, true}, {7, 0, 7, true}, {8, 0, 7, false},
                {-1, 0, 7, false}, {0, 0, 0, true}};
  for (const auto& c : ranged) {
    cJSON* j = cJSON_CreateNumber(c.v);
    long long n = 0;
    std::string why;
    EXPECT_EQ(json_integer(j, "f", c.lo, c.hi, &n, &why), c.ok) << c.v << " " << why;
    if (c.ok) {
      EXPECT_EQ(static_cast<double>(n), c.v);
    }
    cJSON_Delete(j);
  }
  cJSON* s = cJSON_CreateString("7");
  long long n = 0;
  std::string why;
  EXPECT_FALSE(json_integer(s, "f", 0, 10, &n, &why));
  EXPECT_EQ(why, "f is not a number");
  cJSON_Delete(s);
}

// ------------------------------------------------------------------------------------------------
// Failures of the transfer: down, timeouts, abort

TEST(HttpFailures, ServerDownIsPeerFailedQuickly) {
  int port = closed_port();
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  Sent r = send(url, make_req(WSYNC_HTTP_POST, "/init_weights_update_group", "{}", WSYNC_REPLY_SUCCESS_FIELD));
  EXPECT_EQ(r.status, WSYNC_ERR_PEER_FAILED);
  EXPECT_EQ(r.message.rfind("engine " + url + " is not reachable: ", 0), 0u) << r.message;
  EXPECT_NE(r.message.find("(POST /init_weights_update_group)"), std::string::npos) << r.message;
  EXPECT_LT(r.ms, 1000);
  EXPECT_EQ(r.reply.status, 0);
  HttpResult res = http_perform(url, make_req(WSYNC_HTTP_POST, "/x", nullptr, WSYNC_REPLY_STATUS), HttpOptions(), nullptr);
  EXPECT_EQ(res.outcome, HttpOutcome::kUnreachable);
  EXPECT_EQ(res.attempts, 1);  // not idempotent: not retried
  Sent dns = send("http://no-such-host.invalid:1", make_req(WSYNC_HTTP_GET, "/health", nullptr, WSYNC_REPLY_STATUS));
  EXPECT_EQ(dns.status, WSYNC_ERR_PEER_FAILED) << dns.message;
}

TEST(HttpFailures, SlowHandlerTimesOut) {
  TestServer s;
  s.svr.Post("/update_weights", [&](const httplib::Request&, httplib::Response& res) {
    s.nap(5000);
    res.status = 200;
  });
  s.start();
  HttpOptions o;
  o.request_timeout_ms = 300;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_POST, "/update_weights", "{}", WSYNC_REPLY_STATUS), o);
  EXPECT_EQ(r.status, WSYNC_ERR_TIMEOUT);
  EXPECT_EQ(r.message, "engine " + s.url() + " did not answer POST /update_weights within 300 ms");
  EXPECT_GE(r.ms, 290);
  EXPECT_LT(r.ms, 1000);
}

TEST(HttpFailures, TimeoutOfAnIdempotentRequestIsNotRetried) {
  TestServer s;
  s.svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    ++s.hits;
    s.nap(5000);
    res.status = 200;
  });
  s.start();
  HttpOptions o;
  o.request_timeout_ms = 200;
  o.retry_backoff_ms = 1;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_GET, "/health", nullptr, WSYNC_REPLY_STATUS, true), o);
  EXPECT_EQ(r.status, WSYNC_ERR_TIMEOUT);
  EXPECT_LT(r.ms, 900);
  EXPECT_EQ(s.hits, 1);
}

// A listener whose accept queue is full: the kernel drops new SYNs, so a connect hangs.
TEST(HttpFailures, NoConnectionInTimeIsTimeout) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 0), 0);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::vector<int> fillers;
  bool hangs = false;
  for (int i = 0; i < 8 && !hangs; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fillers.push_back(fd);
    pollfd p{fd, POLLOUT, 0};
    hangs = ::poll(&p, 1, 200) == 0;
  }
  if (!hangs) {
    for (int fd : fillers) ::close(fd);
    ::close(lfd);
    GTEST_SKIP() << "this kernel completes connections to a full accept queue";
  }
  std::string url = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  HttpOptions o;
  o.connect_timeout_ms = 300;
  Sent r = send(url, make_req(WSYNC_HTTP_POST, "/init", "{}", WSYNC_REPLY_STATUS), o);
  EXPECT_EQ(r.status, WSYNC_ERR_TIMEOUT);
  EXPECT_EQ(r.message, "engine " + url + " did not accept a connection within 300 ms (POST /init)");
  EXPECT_LT(r.ms, 1000);
  for (int fd : fillers) ::close(fd);
  ::close(lfd);
}

TEST(HttpFailures, AbortFlagStopsASlowRequestFast) {
  TestServer s;
  s.svr.Post("/init_weight_transfer_engine", [&](const httplib::Request&, httplib::Response& res) {
    s.nap(10000);
    res.status = 200;
  });
  s.start();
  std::atomic<bool> abort_flag{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    abort_flag = true;
  });
  HttpOptions o;
  o.request_timeout_ms = 20000;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_POST, "/init_weight_transfer_engine", "{}", WSYNC_REPLY_STATUS), o,
                &abort_flag);
  stopper.join();
  EXPECT_EQ(r.status, WSYNC_ERR_ABORTED);
  EXPECT_EQ(r.message, "POST /init_weight_transfer_engine to engine " + s.url() + " was aborted");
  EXPECT_GE(r.ms, 190);
  EXPECT_LT(r.ms, 1000);
  // Already set: nothing is sent.
  Sent again = send(s.url(), make_req(WSYNC_HTTP_POST, "/x", "{}", WSYNC_REPLY_STATUS), o, &abort_flag);
  EXPECT_EQ(again.status, WSYNC_ERR_ABORTED);
  EXPECT_LT(again.ms, 100);
}

TEST(HttpFailures, AbortFlagStopsTheRetryBackoff) {
  TestServer s;
  s.svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    ++s.hits;
    res.status = 503;
  });
  s.start();
  std::atomic<bool> abort_flag{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    abort_flag = true;
  });
  HttpOptions o;
  o.retry_backoff_ms = 3000;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_GET, "/health", nullptr, WSYNC_REPLY_STATUS, true), o, &abort_flag);
  stopper.join();
  EXPECT_EQ(r.status, WSYNC_ERR_ABORTED);
  EXPECT_LT(r.ms, 1000);
  EXPECT_EQ(s.hits, 1);
}

// ------------------------------------------------------------------------------------------------
// Retries

TEST(HttpRetries, IdempotentRequestRetriedAfterTwoFailuresThenSucceeds) {
  TestServer s;
  s.svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    int n = ++s.hits;
    res.status = n <= 2 ? 503 : 200;
  });
  s.start();
  HttpOptions o;
  o.retries = 3;
  o.retry_backoff_ms = 20;
  auto req = make_req(WSYNC_HTTP_GET, "/health", nullptr, WSYNC_REPLY_STATUS, true);
  HttpResult res = http_perform(s.url(), req, o, nullptr);
  EXPECT_EQ(res.outcome, HttpOutcome::kReplied);
  EXPECT_EQ(res.reply.status, 200);
  EXPECT_EQ(res.attempts, 3);
  EXPECT_EQ(s.hits, 3);
  EXPECT_GE(res.elapsed_ms, 20 + 40);  // back-off 20 ms, then 40 ms
  std::string m;
  EXPECT_EQ(judge_reply(s.url(), req, o, res, &m), WSYNC_OK) << m;
}

TEST(HttpRetries, RetriesAreBoundedAndCounted) {
  TestServer s;
  s.svr.Post("/flush_cache", [&](const httplib::Request&, httplib::Response& res) {
    ++s.hits;
    res.status = 500;
    res.set_content("Flush cache failed.\n", "text/plain");
  });
  s.start();
  HttpOptions o;
  o.retries = 2;
  o.retry_backoff_ms = 1;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_POST, "/flush_cache", nullptr, WSYNC_REPLY_STATUS, true), o);
  EXPECT_EQ(r.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(r.message, "engine " + s.url() + " answered POST /flush_cache with HTTP 500: Flush cache failed. (after 3 attempts)");
  EXPECT_EQ(s.hits, 3);
}

TEST(HttpRetries, NonIdempotentRequestIsSentExactlyOnce) {
  TestServer s;
  s.svr.Post("/update_weights_from_distributed", [&](const httplib::Request&, httplib::Response& res) {
    ++s.hits;
    res.status = 503;
  });
  s.start();
  HttpOptions o;
  o.retries = 3;
  o.retry_backoff_ms = 1;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_POST, "/update_weights_from_distributed", "{}", WSYNC_REPLY_SUCCESS_FIELD), o);
  EXPECT_EQ(r.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(s.hits, 1);
}

// An idempotent request refused with 400 is retried (SGLang's /flush_cache while requests run);
// a wrong key (401) or a missing route (404) never passes, so it is not.
TEST(HttpRetries, RefusalsAreRetriedButAuthAndMissingRoutesAreNot) {
  TestServer s;
  s.svr.Get("/model_info", [&](const httplib::Request&, httplib::Response& res) {
    ++s.hits;
    json_reply(res, 400, R"({"message":"bad"})");
  });
  s.svr.Get("/auth", [&](const httplib::Request&, httplib::Response& res) {
    ++s.hits;
    json_reply(res, 401, R"({"error":"Unauthorized"})");
  });
  s.start();
  HttpOptions o;
  o.retry_backoff_ms = 1;
  o.retries = 2;
  Sent r = send(s.url(), make_req(WSYNC_HTTP_GET, "/model_info", nullptr, WSYNC_REPLY_JSON, true), o);
  EXPECT_EQ(r.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(r.message, "engine " + s.url() + " answered GET /model_info with HTTP 400: bad (after 3 attempts)");
  EXPECT_EQ(s.hits, 3);
  s.hits = 0;
  r = send(s.url(), make_req(WSYNC_HTTP_GET, "/auth", nullptr, WSYNC_REPLY_JSON, true), o);
  EXPECT_EQ(r.status, WSYNC_ERR_REJECTED);
  EXPECT_EQ(s.hits, 1);
  s.hits = 0;
  r = send(s.url(), make_req(WSYNC_HTTP_GET, "/no_such_route", nullptr, WSYNC_REPLY_JSON, true), o);
  EXPECT_EQ(r.status, WSYNC_ERR_ENGINE);
  EXPECT_EQ(s.hits, 0);
}

TEST(HttpRetries, IdempotentRequestToADownServerIsRetried) {
  int port = closed_port();
  HttpOptions o;
  o.retries = 2;
  o.retry_backoff_ms = 10;
  HttpResult res = http_perform("http://127.0.0.1:" + std::to_string(port),
                                make_req(WSYNC_HTTP_GET, "/health", nullptr, WSYNC_REPLY_STATUS, true), o, nullptr);
  EXPECT_EQ(res.outcome, HttpOutcome::kUnreachable);
  EXPECT_EQ(res.attempts, 3);
  EXPECT_GE(res.elapsed_ms, 10 + 20);
}

// ------------------------------------------------------------------------------------------------
// Engine server list

TEST(EngineSet, ParsesNormalisesAndAssignsOffsets) {
  std::vector<EngineServer> v;
  ASSERT_EQ(parse_engine_servers("adapter.servers", " http://h1:8001=2, HTTP://H2:8002 ,https://h3:9/=4,http://[::1]:7=3", &v),
            WSYNC_OK)
      << last_error();
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].url, "http://h1:8001");
  EXPECT_EQ(v[0].gpus, 2u);
  EXPECT_EQ(v[1].url, "http://h2:8002");
  EXPECT_EQ(v[1].gpus, 1u);
  EXPECT_EQ(v[2].url, "https://h3:9");
  EXPECT_EQ(v[2].gpus, 4u);
  EXPECT_EQ(v[3].url, "http://[::1]:7");
  EXPECT_EQ(v[3].gpus, 3u);
  EXPECT_EQ(assign_rank_offsets(&v), 11u);
  EXPECT_EQ(v[0].rank_offset, 1u);
  EXPECT_EQ(v[1].rank_offset, 3u);
  EXPECT_EQ(v[2].rank_offset, 4u);
  EXPECT_EQ(v[3].rank_offset, 8u);

  std::vector<EngineServer> w;
  ASSERT_EQ(parse_engine_servers("k", "http://a:1=2,http://b:2/prefix/,http://c:3 = 4", &w), WSYNC_OK) << last_error();
  EXPECT_EQ(w[1].url, "http://b:2/prefix");
  w[1].healthy = false;
  w[1].why_unhealthy = "down";
  EXPECT_EQ(assign_rank_offsets(&w), 7u);
  EXPECT_EQ(w[0].rank_offset, 1u);
  EXPECT_EQ(w[1].rank_offset, 0u);
  EXPECT_EQ(w[2].rank_offset, 3u);
  w[1].healthy = true;  // back: offsets are recomputed from scratch
  EXPECT_EQ(assign_rank_offsets(&w), 8u);
  EXPECT_EQ(w[2].rank_offset, 4u);
  // Elastic: every server keeps its ranks, down or not (it joins with them later).
  w[1].healthy = false;
  EXPECT_EQ(assign_rank_offsets(&w, true), 8u);
  EXPECT_EQ(w[1].rank_offset, 3u);
  EXPECT_EQ(w[2].rank_offset, 4u);

  std::vector<EngineServer> one;
  ASSERT_EQ(parse_engine_servers("k", "http://localhost=4096", &one), WSYNC_OK) << last_error();
  EXPECT_EQ(one[0].url, "http://localhost");
  EXPECT_EQ(assign_rank_offsets(&one), 4097u);
}

TEST(EngineSet, BadInputsAreRefusedNamingTheEntry) {
  struct Case {
    const char* value;
    const char* expect;
  } cases[] = {
      {"", "option adapter.servers is empty"},
      {"  ", "option adapter.servers is empty"},
      {"http://a:1,,http://b:2", "entry 2 is empty"},
      {"http://a:1,", "entry 2 is empty"},
      {"ftp://a:1", "entry 1 'ftp://a:1' is not a server URL: scheme 'ftp' is not http or https"},
      {"http://a:1,a:2", "entry 2 'a:2' is not a server URL: it does not start with http:// or https://"},
      {"http://a:1=0", "entry 1 'http://a:1=0' has GPU count '0'; it must be a number in 1..4096"},
      {"http://a:1=4097", "entry 1 'http://a:1=4097' has GPU count '4097'"},
      {"http://a:1=x", "entry 1 'http://a:1=x' has GPU count 'x'"},
      {"http://a:1=-1", "has GPU count '-1'"},
      {"http://a:1=", "has GPU count ''"},
      {"http://a:1,http://b:2,http://A:1/", "entry 3 'http://A:1/' lists server http://a:1 a second time"},
      {"http://a,http://a:80", "entry 2 'http://a:80' lists server http://a:80 a second time"},
      {"http://a:0", "port '0' is not a number in 1..65535"},
      {"http://a:70000", "port '70000' is not a number in 1..65535"},
      {"http://a:", "the port after ':' is empty"},
      {"http://:1", "the host is empty"},
      {"http://u:p@a:1", "user info"},
      {"http://a:1/x?y", "a query or fragment is not allowed"},
      {"http://a b:1", "entry 1 'http://a b:1' is not a server URL: it contains a space"},
      {"http://::1:8000", "write an IPv6 address as [addr]:port"},
  };
  for (const Case& c : cases) {
    std::vector<EngineServer> out(1);
    out[0].url = "untouched";
    clear_error();
    EXPECT_EQ(parse_engine_servers("adapter.servers", c.value, &out), WSYNC_ERR_INVALID_ARGUMENT) << c.value;
    EXPECT_NE(last_error().find(c.expect), std::string::npos) << "value '" << c.value << "': " << last_error();
    EXPECT_NE(last_error().find("adapter.servers"), std::string::npos) << last_error();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].url, "untouched");
  }
}

TEST(EngineSet, OneStepPostedToAllServersInParallel) {
  TestServer a, b;
  for (TestServer* s : {&a, &b}) {
    s->svr.Post("/update_weights_from_distributed", [s](const httplib::Request&, httplib::Response& res) {
      ++s->hits;
      s->nap(300);
      json_reply(res, 200, R"({"success":true,"message":"ok"})");
    });
    s->start();
  }
  std::vector<EngineServer> v;
  ASSERT_EQ(parse_engine_servers("k", a.url() + "=2," + b.url() + "=1", &v), WSYNC_OK) << last_error();
  EXPECT_EQ(assign_rank_offsets(&v), 4u);
  auto t0 = Clock::now();
  std::vector<wsync_status_t> st(v.size(), WSYNC_ERR_INTERNAL);
  for_each_server_concurrently(v.size(), [&](size_t i) {
    st[i] = http_call(v[i].url, make_req(WSYNC_HTTP_POST, "/update_weights_from_distributed", "{}",
                                         WSYNC_REPLY_SUCCESS_FIELD),
                      HttpOptions(), nullptr, nullptr, nullptr);
  });
  EXPECT_LT(ms_since(t0), 580);
  for (wsync_status_t s : st) EXPECT_EQ(s, WSYNC_OK);
  EXPECT_EQ(a.hits, 1);
  EXPECT_EQ(b.hits, 1);
}

TEST(EngineSet, BareConcurrentRunnerAndHttpCallWithWhy) {
  TestServer s;
  s.svr.Post("/x", [&](const httplib::Request&, httplib::Response& res) {
    ++s.hits;
    s.nap(300);
    json_reply(res, 400, R"({"message":"no"})");
  });
  s.start();
  std::vector<std::string> why(3);
  std::vector<wsync_status_t> st(3, WSYNC_OK);
  auto t0 = Clock::now();
  for_each_server_concurrently(3, [&](size_t i) {
    st[i] = http_call(s.url(), make_req(WSYNC_HTTP_POST, "/x", "{}", WSYNC_REPLY_SUCCESS_FIELD), HttpOptions(), nullptr,
                      &why[i]);
  });
  EXPECT_LT(ms_since(t0), 580);
  EXPECT_EQ(s.hits, 3);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(st[i], WSYNC_ERR_ENGINE);
    EXPECT_EQ(why[i], "engine " + s.url() + " answered POST /x with HTTP 400: no");
  }
  std::vector<EngineServer> v;
  ASSERT_EQ(parse_engine_servers("http://a:1=0", &v), WSYNC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error().rfind("option engines: entry 1 'http://a:1=0' has GPU count '0'", 0), 0u) << last_error();
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// libcurl is the system's, loaded at the first request: without it a request fails with a message
// that says so and how to install it (ctest unit.test_http_client_without_libcurl runs this with
// WSYNC_LIBCURL naming a file that does not exist; the other runs skip it).

TEST(WithoutLibcurl, ARequestFailsNamingLibcurl) {
  if (std::getenv("WSYNC_TEST_WITHOUT_LIBCURL") == nullptr) GTEST_SKIP() << "run by unit.test_http_client_without_libcurl";
  Sent r = send("http://127.0.0.1:9", make_req(WSYNC_HTTP_GET, "/health", nullptr, WSYNC_REPLY_STATUS));
  EXPECT_NE(r.status, WSYNC_OK);
  EXPECT_NE(r.message.find("libcurl could not be loaded"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("apt-get install libcurl4"), std::string::npos) << r.message;
}
