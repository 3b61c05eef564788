// The core's HTTP client for engine servers (libcurl): performs one adapter-built request
// (wsync_http_request_t) against a server's base URL, with timeouts, an abort flag, an optional
// API key and bounded retries of idempotent requests. It does not judge the reply's content:
// that is http/reply.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "common/heap.h"
#include "wsync_plugin.h"

namespace wsync {

// Per-group settings of the HTTP client.
struct HttpOptions {
  std::string api_key;                // sent as "Authorization: Bearer <key>" when not empty
  int64_t connect_timeout_ms = 5000;  // <= 0: libcurl's default (300 s)
  int64_t request_timeout_ms = 60000; // whole request, per attempt; <= 0: no limit
  int retries = 3;                    // more attempts of an idempotent request (clamped to 0..10)
  int64_t retry_backoff_ms = 200;     // before retry n: backoff * 2^(n-1), at most 5 s
};

// What the server answered.
struct HttpReply {
  long status = 0;           // HTTP status; 0 when no reply came
  PagesString body;          // at most http_reply_keep(kind) bytes of it (large ones off the heap)
  std::string content_type;  // as sent ("application/json; charset=utf-8"), or empty
};

// Replies larger than this are refused (HttpOutcome::kTooLarge), by reply kind: the adapter may
// read up to 16 MiB (docs/PLUGINS.md); what the core judges itself (a status, a "success"
// field, JSON) is a small object, refused past 1 MiB.
constexpr uint64_t kHttpMaxReplyBytes = 16ull << 20;
constexpr uint64_t kHttpMaxJudgedReplyBytes = 1ull << 20;
uint64_t http_reply_limit(int32_t reply_kind);
// Of a WSYNC_REPLY_STATUS reply only the start is kept (for the message of a refusal).
constexpr uint64_t kHttpStatusBodyKeep = 64ull << 10;
uint64_t http_reply_keep(int32_t reply_kind);

// Free a reply's body now: a burst of big replies (a rogue server, every route, every recheck)
// must not stay in the process.
void http_release(HttpReply* reply);

// How one request ended at the transport level.
enum class HttpOutcome {
  kReplied,        // a status line came (any status, 2xx or not): see reply
  kUnreachable,    // DNS failed, connection refused: the server is not there
  kDisconnected,   // connected, then the server closed/reset the connection before replying
  kConnectTimeout, // no connection within connect_timeout_ms
  kTimeout,        // connected, but no complete reply within request_timeout_ms
  kAborted,        // the abort flag was set
  kTooLarge,       // the reply body exceeds http_reply_limit(kind)
  kBadRequest,     // the request itself is malformed (bad method, path, URL): a caller bug
  kError,          // any other libcurl failure (TLS, out of memory, ...)
};

struct HttpResult {
  HttpOutcome outcome = HttpOutcome::kError;
  HttpReply reply;        // of the last attempt
  std::string error;      // libcurl's words (or ours) when outcome != kReplied
  int attempts = 0;       // attempts made (1 + retries used)
  int64_t elapsed_ms = 0; // all attempts and back-offs together
};

// "GET" / "POST" / "?" for a WSYNC_HTTP_* value.
const char* http_method_name(int32_t method);

// base_url ("http://host:port", trailing '/' tolerated) + path ("/route?query").
std::string http_join_url(const std::string& base_url, const char* path);

// Empty when `req` is well formed (method GET/POST, path starting with '/' and free of spaces
// and control characters, a known WSYNC_REPLY_*, no body on a GET); else why not.
std::string http_request_problem(const wsync_http_request_t& req);

// Perform `req` against `base_url`. POST always carries "Content-Type: application/json" (also
// with no body). `abort_flag` (may be NULL) is polled every ~50 ms and during back-off; once it
// is true the request stops with kAborted. A request with idempotent=1 is tried again, up to
// opts.retries times, after kUnreachable, kDisconnected, kConnectTimeout, or a reply that is not
// 2xx other than 401, 403, 404 and 405 (SGLang refuses /flush_cache with 400 while requests run);
// a 2xx, those four and kTimeout end it; with WSYNC_REPLY_TO_ADAPTER any reply ends it. A
// non-idempotent request is sent exactly once. Thread-safe; never throws except std::bad_alloc.
HttpResult http_perform(const std::string& base_url, const wsync_http_request_t& req,
                        const HttpOptions& opts, const std::atomic<bool>* abort_flag);

}  // namespace wsync
