// libFuzzer target: judging an engine's HTTP reply (http/reply.h): body_excerpt, engine_message
// (the engine's words from SGLang/vLLM/FastAPI/LMDeploy JSON bodies, parsed by cJSON) and
// judge_reply over every transfer outcome and reply kind. Run by ctest as fuzz.http_reply.
//
// Input: outcome u8 | reply kind u8 | HTTP status u16 | flags u8 | excerpt max u8 | body...
// Beyond "no crash, no UB, no leak": excerpts and messages are bounded and free of control
// characters, never end inside a UTF-8 sequence of a valid body, and no reply a user would call a
// failure is judged WSYNC_OK.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "http/reply.h"

namespace {

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

bool has_control(const std::string& s) {
  for (char c : s) {
    const unsigned char b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) return true;
  }
  return false;
}

void check_excerpt(const std::string& body, const std::string& got, size_t max) {
  if (has_control(got)) std::abort();
  // At most `max` bytes of the body, each escaped one (C1 control, invalid UTF-8) as 4: \xNN.
  if (got != "(empty body)" && got.size() > 4 * max + 3) std::abort();
  if (valid_utf8(body) && !valid_utf8(got)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  const auto outcome = static_cast<wsync::HttpOutcome>(data[0] % 9);
  const int32_t kind = 1 + data[1] % 4;  // WSYNC_REPLY_STATUS .. WSYNC_REPLY_TO_ADAPTER
  const long status = static_cast<long>(data[2] | (data[3] << 8)) % 700;
  const bool with_key = data[4] & 1;
  const size_t max = data[5];
  const std::string body(reinterpret_cast<const char*>(data + 6), size - 6);

  check_excerpt(body, wsync::body_excerpt(body, max), max);
  const std::string words = wsync::engine_message(body);
  if (has_control(words) || words.size() > 4 * 1000 + 3) std::abort();
  if (valid_utf8(body) && !valid_utf8(words)) std::abort();

  wsync_http_request_t req = WSYNC_HTTP_REQUEST_INIT;
  req.method = WSYNC_HTTP_POST;
  req.path = "/update_weights";
  req.body = "{}";
  req.reply = kind;
  wsync::HttpOptions opts;
  if (with_key) opts.api_key = "k";
  wsync::HttpResult result;
  result.outcome = outcome;
  result.reply.status = status;
  result.reply.body.assign(body);
  result.reply.content_type = "application/json";
  result.error = "e";
  result.attempts = 1 + (data[4] >> 1) % 3;
  std::string message;
  const wsync_status_t st = wsync::judge_reply("http://127.0.0.1:1", req, opts, result, &message);
  const bool is_2xx = status >= 200 && status < 300;
  if (st == WSYNC_OK) {
    if (outcome != wsync::HttpOutcome::kReplied) std::abort();  // no reply is never success
    if (status == 401 || status == 403) std::abort();
    if (!is_2xx && kind != WSYNC_REPLY_TO_ADAPTER) std::abort();
  } else {
    if (st <= 0 || st >= WSYNC_STATUS_COUNT) std::abort();
    if (message.empty()) std::abort();  // every failure says what failed
  }
  return 0;
}
