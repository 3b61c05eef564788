// Judging an engine's reply to one request (per WSYNC_REPLY_*): a wsync status and a message
// that names the engine and the route and quotes the engine's own words.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include "http/http_client.h"
#include "wsync_plugin.h"

struct cJSON;

namespace wsync {

// 2^53: the largest magnitude up to which a JSON number (a double in cJSON) holds every integer.
constexpr long long kJsonMaxExactInteger = 9007199254740992LL;

// The integer in the JSON number `j` when it holds one exactly and it lies in [lo, hi]; else
// false with *why naming `field` and what it holds instead ("detail[0].loc[1] is 1.5, not an
// integer"). cJSON keeps every number as a double: an engine's 1e300, 1e999 (infinity), 2^63 or
// 1.5 reaches us as it is, and none of them may be cast to an integer unchecked.
bool json_integer(const cJSON* j, const std::string& field, long long lo, long long hi, long long* out,
                  std::string* why);

// At most `max` bytes of `body` for a message: control characters become spaces, runs of
// whitespace collapse, the ends are trimmed, a cut is marked with "..." (never inside a UTF-8
// sequence). "(empty body)" for an empty or all-blank body.
std::string body_excerpt(std::string_view body, size_t max = 300);

// The engine's own words in an error (or success) body: from a JSON object, "message" (string);
// else "error" (string, or object with a string "message"); else FastAPI's "detail" (string, or a
// list of {"loc":[...],"msg":...} rendered "body.field: msg" and joined by "; "). Anything else
// (not JSON, other shapes): body_excerpt(body). Capped at 1000 bytes, sanitised like an excerpt.
std::string engine_message(std::string_view body);

// Judge `result`, the outcome of `req` sent to the engine at `base_url` with `opts`. WSYNC_OK when
// it matches req.reply (*message then gets the engine's "message" for SUCCESS_FIELD, else is
// cleared). Otherwise the status (see docs in reply.cpp's table) with *message saying what
// failed. Does not record the error (no fail()).
wsync_status_t judge_reply(const std::string& base_url, const wsync_http_request_t& req,
                           const HttpOptions& opts, const HttpResult& result, std::string* message);

// http_perform + judge_reply. A failure is recorded with fail_msg on this thread and, when `why`
// is not NULL, also written to *why (cleared on success) for callers that keep the message
// themselves (per-server worker threads). `reply` (may be NULL) gets what the engine answered,
// also on failure.
wsync_status_t http_call(const std::string& base_url, const wsync_http_request_t& req, const HttpOptions& opts,
                         const std::atomic<bool>* abort_flag, std::string* why, HttpReply* reply = nullptr);

}  // namespace wsync
