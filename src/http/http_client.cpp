// libcurl transfer of one engine request: a private multi handle per attempt, polled in 50 ms
// slices so that the abort flag stops a request quickly, plus bounded retries with back-off for
// idempotent requests.
#include "http/http_client.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include "common/error.h"
#include "http/curl_library.h"

namespace wsync {
namespace {

using Clock = std::chrono::steady_clock;

constexpr long kPollSliceMs = 50;          // how often the abort flag is looked at
constexpr int kMaxRetries = 10;
constexpr int64_t kMaxBackoffMs = 5000;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool aborted(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(std::memory_order_relaxed); }

struct EasyDeleter {
  void operator()(CURL* e) const { curl_library().easy_cleanup(e); }
};
struct MultiDeleter {
  void operator()(CURLM* m) const { curl_library().multi_cleanup(m); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_library().slist_free_all(l); }
};
using EasyPtr = std::unique_ptr<CURL, EasyDeleter>;
using MultiPtr = std::unique_ptr<CURLM, MultiDeleter>;
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

// State shared with libcurl's callbacks during one attempt.
struct Transfer {
  PagesString body;
  uint64_t received = 0;  // body bytes that came, kept or not
  uint64_t limit = kHttpMaxReplyBytes;
  uint64_t keep = kHttpMaxReplyBytes;
  bool too_large = false;
  bool out_of_memory = false;
  const std::atomic<bool>* abort_flag = nullptr;
};

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * count;
  if (t->received + len > t->limit) {
    t->too_large = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  t->received += len;
  try {
    if (t->body.size() < t->keep) t->body.append(data, std::min<uint64_t>(len, t->keep - t->body.size()));
  } catch (...) {  // no exception may cross libcurl
    t->out_of_memory = true;
    return 0;
  }
  return len;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return aborted(static_cast<Transfer*>(user)->abort_flag) ? 1 : 0;  // 1: CURLE_ABORTED_BY_CALLBACK
}

bool has_control_char(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

bool retryable(const HttpResult& r) {
  switch (r.outcome) {
    case HttpOutcome::kUnreachable:
    case HttpOutcome::kDisconnected:
    case HttpOutcome::kConnectTimeout:
      return true;
    case HttpOutcome::kReplied: {
      // Any refusal of an idempotent request may pass (SGLang answers /flush_cache with 400 while
      // requests run); only a missing or wrong API key and a missing route never will.
      long s = r.reply.status;
      return (s < 200 || s >= 300) && s != 401 && s != 403 && s != 404 && s != 405;
    }
    default:
      return false;
  }
}

HttpOutcome classify(CURLcode rc, CURL* easy, const Transfer& t) {
  switch (rc) {
    case CURLE_OK:
      return HttpOutcome::kReplied;
    case CURLE_ABORTED_BY_CALLBACK:
      return HttpOutcome::kAborted;
    case CURLE_FILESIZE_EXCEEDED:
      return HttpOutcome::kTooLarge;
    case CURLE_WRITE_ERROR:
      return t.too_large ? HttpOutcome::kTooLarge : HttpOutcome::kError;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      return HttpOutcome::kUnreachable;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
      return HttpOutcome::kDisconnected;
    case CURLE_OPERATION_TIMEDOUT: {
      curl_off_t connect_us = 0;
      curl_library().easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connect_us);
      return connect_us > 0 ? HttpOutcome::kTimeout : HttpOutcome::kConnectTimeout;
    }
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return HttpOutcome::kBadRequest;
    default:
      return HttpOutcome::kError;
  }
}

// Every option of one request on a fresh easy handle (errbuf and t outlive the transfer).
void set_request_options(CURL* e, const std::string& url, const wsync_http_request_t& req, const HttpOptions& opts,
                         curl_slist* headers, char* errbuf, Transfer* t) {
  const CurlLibrary& c = curl_library();
  c.easy_setopt(e, CURLOPT_URL, url.c_str());
  c.easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  c.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
#if LIBCURL_VERSION_NUM >= 0x075500
  if (c.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK)  // the system's libcurl is older than 7.85
#endif
    c.easy_setopt(e, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  c.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  c.easy_setopt(e, CURLOPT_USERAGENT, "wsync");
  c.easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  if (opts.connect_timeout_ms > 0) c.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opts.connect_timeout_ms));
  if (opts.request_timeout_ms > 0) c.easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(opts.request_timeout_ms));
  c.easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(t->limit));
  c.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  c.easy_setopt(e, CURLOPT_WRITEDATA, t);
  c.easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
  c.easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
  c.easy_setopt(e, CURLOPT_XFERINFODATA, t);
  if (req.method == WSYNC_HTTP_POST) {
    const char* body = req.body != nullptr ? req.body : "";
    c.easy_setopt(e, CURLOPT_POST, 1L);
    c.easy_setopt(e, CURLOPT_POSTFIELDS, body);
    c.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(std::strlen(body)));
  } else {
    c.easy_setopt(e, CURLOPT_HTTPGET, 1L);
  }
}

// How driving the transfer ended.
struct Drive {
  CURLMcode mc = CURLM_OK;
  CURLcode rc = CURLE_OK;
  bool done = false, stopped = false;
};

// Run the transfer on `multi` until it is done, the multi interface fails, or the abort flag is set
// (looked at every kPollSliceMs).
Drive drive(CURLM* multi, CURL* e, const std::atomic<bool>* abort_flag) {
  Drive d;
  d.mc = curl_library().multi_add_handle(multi, e);
  while (d.mc == CURLM_OK && !d.done) {
    int running = 0;
    d.mc = curl_library().multi_perform(multi, &running);
    if (d.mc != CURLM_OK) break;
    int left = 0;
    while (CURLMsg* msg = curl_library().multi_info_read(multi, &left)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == e) {
        d.rc = msg->data.result;
        d.done = true;
      }
    }
    if (d.done) break;
    if (aborted(abort_flag)) {
      d.stopped = true;
      break;
    }
    const CurlLibrary& cl = curl_library();
    if (cl.multi_poll != nullptr) {
      d.mc = cl.multi_poll(multi, nullptr, 0, kPollSliceMs, nullptr);
    } else {  // libcurl before 7.66: curl_multi_wait returns at once when it has no socket to wait on
      int fds = 0;
      d.mc = cl.multi_wait(multi, nullptr, 0, kPollSliceMs, &fds);
      if (d.mc == CURLM_OK && fds == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return d;
}

// The outcome and error words of a finished (or stopped) transfer.
void judge_transfer(const Drive& d, CURL* e, const Transfer& t, const char* errbuf, HttpResult* r) {
  if (d.mc != CURLM_OK && !d.done && !d.stopped) {
    r->outcome = HttpOutcome::kError;
    r->error = std::string("libcurl multi interface failed: ") + curl_library().multi_strerror(d.mc);
  } else if (d.stopped) {
    r->outcome = HttpOutcome::kAborted;
    r->error = "aborted";
  } else {
    r->outcome = classify(d.rc, e, t);
    if (d.rc != CURLE_OK) r->error = errbuf[0] != '\0' ? errbuf : curl_library().easy_strerror(d.rc);
    if (r->outcome == HttpOutcome::kAborted) r->error = "aborted";
    if (r->outcome == HttpOutcome::kTooLarge)
      r->error = "the reply is larger than " + std::to_string(t.limit >> 20) + " MiB";
  }
}

// One attempt: a fresh easy handle driven by a private multi handle.
HttpResult attempt(const std::string& url, const wsync_http_request_t& req, const HttpOptions& opts,
                   curl_slist* headers, const std::atomic<bool>* abort_flag) {
  HttpResult r;
  Transfer t;
  t.abort_flag = abort_flag;
  t.limit = http_reply_limit(req.reply);
  t.keep = http_reply_keep(req.reply);
  EasyPtr easy(curl_library().easy_init());
  MultiPtr multi(curl_library().multi_init());
  if (!easy || !multi) {
    r.outcome = HttpOutcome::kError;
    r.error = "libcurl could not create a handle (out of memory?)";
    return r;
  }
  char errbuf[CURL_ERROR_SIZE];
  errbuf[0] = '\0';
  CURL* e = easy.get();
  set_request_options(e, url, req, opts, headers, errbuf, &t);
  judge_transfer(drive(multi.get(), e, abort_flag), e, t, errbuf, &r);
  long status = 0;
  curl_library().easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  r.reply.status = status;
  char* ctype = nullptr;
  if (curl_library().easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ctype) == CURLE_OK && ctype != nullptr) r.reply.content_type = ctype;
  r.reply.body = std::move(t.body);
  curl_library().multi_remove_handle(multi.get(), e);
  if (t.out_of_memory) throw std::bad_alloc();  // the body could not be stored
  if (r.outcome != HttpOutcome::kReplied) http_release(&r.reply);  // nobody reads a failed body
  return r;
}

// Sleep `ms`, waking every 10 ms to look at the abort flag; false if aborted.
bool backoff_sleep(int64_t ms, const std::atomic<bool>* abort_flag) {
  auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < until) {
    if (aborted(abort_flag)) return false;
    auto left = until - Clock::now();
    std::this_thread::sleep_for(std::min<Clock::duration>(left, std::chrono::milliseconds(10)));
  }
  return !aborted(abort_flag);
}

const char* outcome_words(const HttpResult& r) {
  switch (r.outcome) {
    case HttpOutcome::kReplied: return "replied";
    case HttpOutcome::kUnreachable: return "unreachable";
    case HttpOutcome::kDisconnected: return "connection closed";
    case HttpOutcome::kConnectTimeout: return "connect timeout";
    case HttpOutcome::kTimeout: return "timeout";
    case HttpOutcome::kAborted: return "aborted";
    case HttpOutcome::kTooLarge: return "reply too large";
    case HttpOutcome::kBadRequest: return "bad request";
    case HttpOutcome::kError: return "error";
  }
  return "?";
}

}  // namespace

uint64_t http_reply_limit(int32_t reply_kind) {
  return reply_kind == WSYNC_REPLY_TO_ADAPTER ? kHttpMaxReplyBytes : kHttpMaxJudgedReplyBytes;
}

uint64_t http_reply_keep(int32_t reply_kind) {
  return reply_kind == WSYNC_REPLY_STATUS ? kHttpStatusBodyKeep : http_reply_limit(reply_kind);
}

void http_release(HttpReply* reply) { PagesString().swap(reply->body); }

const char* http_method_name(int32_t method) {
  switch (method) {
    case WSYNC_HTTP_GET: return "GET";
    case WSYNC_HTTP_POST: return "POST";
    default: return "?";
  }
}

std::string http_join_url(const std::string& base_url, const char* path) {
  std::string url = base_url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (path == nullptr || *path == '\0') return url + "/";
  if (*path != '/') url += '/';
  url += path;
  return url;
}

std::string http_request_problem(const wsync_http_request_t& req) {
  if (req.method != WSYNC_HTTP_GET && req.method != WSYNC_HTTP_POST)
    return "method " + std::to_string(req.method) + " is not WSYNC_HTTP_GET or WSYNC_HTTP_POST";
  if (req.path == nullptr) return "path is NULL";
  if (req.path[0] != '/') return std::string("path '") + req.path + "' does not start with '/'";
  for (const char* p = req.path; *p != '\0'; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c <= 0x20 || c == 0x7f) return std::string("path '") + req.path + "' contains a space or control character";
    if (c == '#') return std::string("path '") + req.path + "' contains a '#' fragment";
  }
  if (req.reply != WSYNC_REPLY_STATUS && req.reply != WSYNC_REPLY_SUCCESS_FIELD && req.reply != WSYNC_REPLY_JSON &&
      req.reply != WSYNC_REPLY_TO_ADAPTER)
    return "reply kind " + std::to_string(req.reply) + " is not a WSYNC_REPLY_* value";
  if (req.method == WSYNC_HTTP_GET && req.body != nullptr && req.body[0] != '\0')
    return std::string("GET ") + req.path + " has a body";
  return std::string();
}

HttpResult http_perform(const std::string& base_url, const wsync_http_request_t& req,
                        const HttpOptions& opts, const std::atomic<bool>* abort_flag) {
  auto start = Clock::now();
  HttpResult r;
  std::string problem = http_request_problem(req);
  if (problem.empty() && has_control_char(opts.api_key)) problem = "the API key contains a control character";
  if (problem.empty() && has_control_char(base_url)) problem = "the server URL contains a control character";
  if (!problem.empty()) {
    r.outcome = HttpOutcome::kBadRequest;
    r.error = problem;
    return r;
  }
  if (const CurlLibrary& cl = curl_library(); !cl.loaded()) {
    r.outcome = HttpOutcome::kError;
    r.error = cl.error;
    return r;
  }

  // Headers: JSON always on POST (LMDeploy refuses a POST without it, even an empty one); no
  // "Expect: 100-continue" round trip for large bodies.
  SlistPtr headers;
  auto add = [&headers](const std::string& h) {
    curl_slist* head = curl_library().slist_append(headers.get(), h.c_str());
    if (head == nullptr) throw std::bad_alloc();  // the old list is still owned by `headers`
    headers.release();
    headers.reset(head);
  };
  if (req.method == WSYNC_HTTP_POST) add("Content-Type: application/json");
  add("Expect:");
  if (!opts.api_key.empty()) add("Authorization: Bearer " + opts.api_key);

  const std::string url = http_join_url(base_url, req.path);
  const int retries = std::max(0, std::min(opts.retries, kMaxRetries));
  const char* method = http_method_name(req.method);
  for (int n = 0;; ++n) {
    if (aborted(abort_flag)) {
      r.outcome = HttpOutcome::kAborted;
      r.error = "aborted";
      break;
    }
    auto t0 = Clock::now();
    HttpResult a = attempt(url, req, opts, headers.get(), abort_flag);
    a.attempts = n + 1;
    WSYNC_LOGD("http: %s %s -> %s, HTTP %ld, %zu bytes, %lld ms (attempt %d)", method, url.c_str(), outcome_words(a),
               a.reply.status, a.reply.body.size(), static_cast<long long>(ms_since(t0)), n + 1);
    r = std::move(a);
    // A reply the adapter reads is an answer whatever its status: only a missing one is retried.
    const bool answered = req.reply == WSYNC_REPLY_TO_ADAPTER && r.outcome == HttpOutcome::kReplied;
    if (!req.idempotent || n >= retries || answered || !retryable(r)) break;
    int64_t backoff = std::max<int64_t>(0, opts.retry_backoff_ms);
    for (int i = 0; i < n && backoff < kMaxBackoffMs; ++i) backoff *= 2;
    backoff = std::min(backoff, kMaxBackoffMs);
    std::string why = r.outcome == HttpOutcome::kReplied ? "HTTP " + std::to_string(r.reply.status) : r.error;
    WSYNC_LOGW("http: %s %s failed (%s); retry %d of %d in %lld ms", method, url.c_str(), why.c_str(), n + 1, retries,
               static_cast<long long>(backoff));
    if (!backoff_sleep(backoff, abort_flag)) {
      r.outcome = HttpOutcome::kAborted;
      r.error = "aborted";
      break;
    }
  }
  r.elapsed_ms = ms_since(start);
  return r;
}

}  // namespace wsync
