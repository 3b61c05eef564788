// Reply judgement: maps a transfer outcome and an engine's reply to a wsync status and a message.
//
//   outcome / reply                                  status                 message starts
//   2xx, STATUS                                      WSYNC_OK
//   2xx, JSON, body parses as JSON                   WSYNC_OK
//   2xx, SUCCESS_FIELD, {"success": true, ...}       WSYNC_OK               (*message = "message")
//   2xx, JSON or SUCCESS_FIELD, body not JSON        WSYNC_ERR_PROTOCOL     "... with a body that is not JSON"
//   2xx, SUCCESS_FIELD, no boolean "success"         WSYNC_ERR_PROTOCOL     "... without a boolean \"success\""
//   2xx, SUCCESS_FIELD, "success": false             WSYNC_ERR_ENGINE       "... with success=false: <message>"
//   HTTP 401 / 403                                   WSYNC_ERR_REJECTED     "... refused the API key of group option engine_api_key (HTTP 401)"
//   any other non-2xx (3xx, 4xx, 5xx)                WSYNC_ERR_ENGINE       "... with HTTP 400: <message>"
//   refused / DNS failure                            WSYNC_ERR_PEER_FAILED  "engine U is not reachable: <curl>"
//   connection closed before a complete reply        WSYNC_ERR_PEER_FAILED  "... closed the connection during"
//   no connection within connect_timeout_ms          WSYNC_ERR_TIMEOUT      "... did not accept a connection"
//   no reply within request_timeout_ms               WSYNC_ERR_TIMEOUT      "... did not answer M /p within N ms"
//   abort flag                                       WSYNC_ERR_ABORTED
//   reply body > 16 MiB                              WSYNC_ERR_PROTOCOL
//   malformed request (adapter/core bug)             WSYNC_ERR_INTERNAL
//   other libcurl failures (TLS, ...)                WSYNC_ERR_IO
#include "http/reply.h"

#include <cjson/cJSON.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "common/names.h"

namespace wsync {
namespace {

constexpr size_t kMaxMessageBytes = 1000;

struct JsonDeleter {
  void operator()(cJSON* j) const { cJSON_Delete(j); }
};
using JsonPtr = std::unique_ptr<cJSON, JsonDeleter>;

// Strict parse of the whole body (no trailing garbage, no embedded NUL); NULL if not JSON.
// `text` holds `size` bytes followed by a NUL (a string's c_str()).
JsonPtr parse_json(const char* text, size_t size) {
  if (size == 0 || std::memchr(text, '\0', size) != nullptr) return nullptr;
  const char* end = nullptr;
  // +1: the terminating NUL, which cJSON's require_null_terminated checks for.
  return JsonPtr(cJSON_ParseWithLengthOpts(text, size + 1, &end, 1));
}

std::string json_text(const cJSON* j) {
  char* s = cJSON_PrintUnformatted(j);
  if (s == nullptr) return std::string();
  std::string out(s);
  cJSON_free(s);
  return out;
}

// One FastAPI/pydantic error item (detail[index]): "body.field: msg". A number in "loc" is a
// list index; one that is not an integer (1.5, 1e300, an overflow to infinity) is named, never
// converted.
std::string detail_item(const cJSON* item, size_t index) {
  if (cJSON_IsString(item)) return item->valuestring;
  if (!cJSON_IsObject(item)) return json_text(item);
  const cJSON* msg = cJSON_GetObjectItemCaseSensitive(item, "msg");
  const cJSON* loc = cJSON_GetObjectItemCaseSensitive(item, "loc");
  std::string where;
  if (cJSON_IsArray(loc)) {
    const cJSON* part = nullptr;
    size_t k = 0;
    cJSON_ArrayForEach(part, loc) {
      if (!where.empty()) where += '.';
      if (cJSON_IsString(part)) {
        where += part->valuestring;
      } else if (cJSON_IsNumber(part)) {
        long long n = 0;
        std::string why;
        const std::string field = "detail[" + std::to_string(index) + "].loc[" + std::to_string(k) + "]";
        where += json_integer(part, field, -kJsonMaxExactInteger, kJsonMaxExactInteger, &n, &why) ? std::to_string(n)
                                                                                                     : "<" + why + ">";
      } else {
        where += json_text(part);
      }
      ++k;
    }
  }
  std::string text = cJSON_IsString(msg) ? std::string(msg->valuestring) : json_text(item);
  return where.empty() ? text : where + ": " + text;
}

// The engine's words in a parsed JSON body; empty if it has none of the known fields.
std::string message_from_json(const cJSON* root) {
  if (!cJSON_IsObject(root)) return std::string();
  const cJSON* m = cJSON_GetObjectItemCaseSensitive(root, "message");
  if (cJSON_IsString(m) && m->valuestring[0] != '\0') return m->valuestring;
  const cJSON* e = cJSON_GetObjectItemCaseSensitive(root, "error");
  if (cJSON_IsString(e) && e->valuestring[0] != '\0') return e->valuestring;
  if (cJSON_IsObject(e)) {
    const cJSON* em = cJSON_GetObjectItemCaseSensitive(e, "message");
    if (cJSON_IsString(em) && em->valuestring[0] != '\0') return em->valuestring;
  }
  const cJSON* d = cJSON_GetObjectItemCaseSensitive(root, "detail");
  if (cJSON_IsString(d) && d->valuestring[0] != '\0') return d->valuestring;
  if (cJSON_IsArray(d) && cJSON_GetArraySize(d) > 0) {
    std::string out;
    const cJSON* item = nullptr;
    size_t index = 0;
    cJSON_ArrayForEach(item, d) {
      if (!out.empty()) out += "; ";
      out += detail_item(item, index++);
    }
    return out;
  }
  if (d != nullptr && !cJSON_IsNull(d)) return json_text(d);
  return std::string();
}

std::string route(const wsync_http_request_t& req) {
  return std::string(http_method_name(req.method)) + " " + (req.path != nullptr ? req.path : "(null)");
}

std::string attempts_note(const HttpResult& r) {
  return r.attempts > 1 ? " (after " + std::to_string(r.attempts) + " attempts)" : std::string();
}

bool is_2xx(long status) { return status >= 200 && status < 300; }

// The shortest "%g" text that reads back as `d` (1e+300, not 1.0000000000000001e+300).
std::string shortest_text(double d) {
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  return buf;  // NaN never compares equal: "nan" after the last round
}

}  // namespace

bool json_integer(const cJSON* j, const std::string& field, long long lo, long long hi, long long* out,
                  std::string* why) {
  if (!cJSON_IsNumber(j)) {
    *why = field + " is not a number";
    return false;
  }
  const double d = j->valuedouble;
  const std::string text = shortest_text(d);
  // -2^63 and 2^63 are exact doubles, and every double in [-2^63, 2^63) converts to a long long;
  // NaN fails both comparisons.
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
    *why = field + " is " + text + ", not an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    return false;
  }
  const long long n = static_cast<long long>(d);
  if (static_cast<double>(n) != d) {
    *why = field + " is " + text + ", not an integer";
    return false;
  }
  if (n < lo || n > hi) {
    *why = field + " is " + std::to_string(n) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi);
    return false;
  }
  *out = n;
  return true;
}

std::string body_excerpt(std::string_view body, size_t max) {
  std::string out;
  out.reserve(body.size() < max ? body.size() : max);
  bool space = false;
  size_t i = 0;
  for (; i < body.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(body[i]);
    bool blank = c < 0x20 || c == 0x7f || c == ' ';
    if (blank) {
      space = !out.empty();  // leading blanks are dropped; inner runs become one space
      continue;
    }
    if (out.size() + (space ? 1 : 0) >= max) break;
    if (space) out += ' ';
    space = false;
    out += static_cast<char>(c);
  }
  if (i < body.size()) {  // cut: do not end inside a UTF-8 sequence
    size_t start = out.size(), cont = 0;
    while (start > 0 && cont < 3 && (static_cast<unsigned char>(out[start - 1]) & 0xC0) == 0x80) --start, ++cont;
    if (start > 0) {
      unsigned char lead = static_cast<unsigned char>(out[start - 1]);
      size_t need = (lead & 0xE0) == 0xC0 ? 1 : (lead & 0xF0) == 0xE0 ? 2 : (lead & 0xF8) == 0xF0 ? 3 : 0;
      if (need > cont) out.resize(start - 1);  // a lead byte whose sequence was cut
    }
    out += "...";
  }
  if (out.empty()) return "(empty body)";
  return printable_text(out);  // what the C0 pass above leaves: C1 controls, invalid UTF-8
}

std::string engine_message(std::string_view body) {
  const std::string text(body);  // NUL-terminated for the parser (an error body: small)
  JsonPtr root = parse_json(text.c_str(), text.size());
  std::string m = root ? message_from_json(root.get()) : std::string();
  if (m.empty()) return body_excerpt(body);
  return body_excerpt(m, kMaxMessageBytes);
}

wsync_status_t judge_reply(const std::string& base_url, const wsync_http_request_t& req,
                           const HttpOptions& opts, const HttpResult& result, std::string* message) {
  message->clear();
  const std::string who = "engine " + base_url;
  const std::string what = route(req);
  const std::string tries = attempts_note(result);
  const HttpReply& rep = result.reply;
  switch (result.outcome) {
    case HttpOutcome::kReplied:
      break;
    case HttpOutcome::kUnreachable:
      *message = who + " is not reachable: " + result.error + " (" + what + ")" + tries;
      return WSYNC_ERR_PEER_FAILED;
    case HttpOutcome::kDisconnected:
      *message = who + " closed the connection during " + what + ": " + result.error + tries;
      return WSYNC_ERR_PEER_FAILED;
    case HttpOutcome::kConnectTimeout:
      *message = who + " did not accept a connection within " + std::to_string(opts.connect_timeout_ms) + " ms (" +
                 what + ")" + tries;
      return WSYNC_ERR_TIMEOUT;
    case HttpOutcome::kTimeout:
      *message = who + " did not answer " + what + " within " + std::to_string(opts.request_timeout_ms) + " ms" + tries;
      return WSYNC_ERR_TIMEOUT;
    case HttpOutcome::kAborted:
      *message = what + " to " + who + " was aborted";
      return WSYNC_ERR_ABORTED;
    case HttpOutcome::kTooLarge:
      *message = who + " answered " + what + " with a reply larger than " + std::to_string(http_reply_limit(req.reply) >> 20) +
                 " MiB (HTTP " + std::to_string(rep.status) + ")";
      return WSYNC_ERR_PROTOCOL;
    case HttpOutcome::kBadRequest:
      *message = "the request " + what + " for " + who + " is malformed: " + result.error +
                 " (a bug in the engine adapter or wsync; please report)";
      return WSYNC_ERR_INTERNAL;
    case HttpOutcome::kError:
      *message = what + " to " + who + " failed: " + result.error + tries;
      return WSYNC_ERR_IO;
  }

  const std::string http = "HTTP " + std::to_string(rep.status);
  if (rep.status == 401 || rep.status == 403) {
    *message = who + (opts.api_key.empty() ? " requires an API key, and group option engine_api_key is not set ("
                                       : " refused the API key of group option engine_api_key (") +
               http + " to " + what + "): " + engine_message(std::string_view(rep.body.data(), rep.body.size()));
    return WSYNC_ERR_REJECTED;
  }
  if (req.reply == WSYNC_REPLY_TO_ADAPTER) return WSYNC_OK;  // the adapter judges any status
  if (!is_2xx(rep.status)) {
    *message = who + " answered " + what + " with " + http + ": " + engine_message(std::string_view(rep.body.data(), rep.body.size())) + tries;
    return WSYNC_ERR_ENGINE;
  }
  if (req.reply == WSYNC_REPLY_STATUS) return WSYNC_OK;

  JsonPtr root = parse_json(rep.body.c_str(), rep.body.size());
  if (!root) {
    std::string ctype = rep.content_type.empty() ? std::string() : ", Content-Type " + rep.content_type;
    *message = who + " answered " + what + " (" + http + ctype + ") with a body that is not JSON: " +
               body_excerpt(std::string_view(rep.body.data(), rep.body.size()));
    return WSYNC_ERR_PROTOCOL;
  }
  if (req.reply == WSYNC_REPLY_JSON) return WSYNC_OK;

  // WSYNC_REPLY_SUCCESS_FIELD
  const cJSON* ok = cJSON_IsObject(root.get()) ? cJSON_GetObjectItemCaseSensitive(root.get(), "success") : nullptr;
  if (!cJSON_IsBool(ok)) {
    *message = who + " answered " + what + " (" + http + ") without a boolean \"success\" field: " +
               body_excerpt(std::string_view(rep.body.data(), rep.body.size()));
    return WSYNC_ERR_PROTOCOL;
  }
  std::string words = message_from_json(root.get());
  if (cJSON_IsFalse(ok)) {
    *message = who + " answered " + what + " with success=false: " +
               (words.empty() ? body_excerpt(std::string_view(rep.body.data(), rep.body.size())) : body_excerpt(words, kMaxMessageBytes));
    return WSYNC_ERR_ENGINE;
  }
  *message = body_excerpt(words, kMaxMessageBytes);
  if (words.empty()) message->clear();
  return WSYNC_OK;
}

wsync_status_t http_call(const std::string& base_url, const wsync_http_request_t& req, const HttpOptions& opts,
                         const std::atomic<bool>* abort_flag, std::string* why, HttpReply* reply) {
  HttpResult result = http_perform(base_url, req, opts, abort_flag);
  std::string message;
  wsync_status_t st = judge_reply(base_url, req, opts, result, &message);
  if (reply != nullptr)
    *reply = std::move(result.reply);
  else
    http_release(&result.reply);
  if (st != WSYNC_OK) {
    if (why != nullptr) *why = message;
    return fail_msg(st, message);
  }
  if (why != nullptr) why->clear();
  if (!message.empty())
    WSYNC_LOGD("engine %s: %s %s: %s", base_url.c_str(), http_method_name(req.method), req.path, message.c_str());
  return WSYNC_OK;
}

}  // namespace wsync
