// Loads libcurl at run time (see curl_library.h).
#include "http/curl_library.h"

#include <mutex>

#include "common/system_library.h"

namespace wsync {
namespace {

CurlLibrary load() {
  CurlLibrary c;
  const SystemLibrary lib = open_system_library("WSYNC_LIBCURL", {"libcurl.so.4", "libcurl-gnutls.so.4"});
  if (lib.handle == nullptr) {
    c.error = "libcurl could not be loaded (" + lib.why_not +
              "): wsync's HTTP engine adapters use the system's libcurl 7.61 or newer "
              "(Debian/Ubuntu: apt-get install libcurl4; RHEL/Rocky: dnf install libcurl)";
    return c;
  }
  c.path = lib.path;
  const char* missing = nullptr;
#define WSYNC_CURL_FN(field, sym) \
  if (missing == nullptr && !resolve_symbol(lib, #sym, &c.field)) missing = #sym;
  WSYNC_CURL_FN(global_init, curl_global_init)
  WSYNC_CURL_FN(easy_init, curl_easy_init)
  WSYNC_CURL_FN(easy_cleanup, curl_easy_cleanup)
  WSYNC_CURL_FN(easy_setopt, curl_easy_setopt)
  WSYNC_CURL_FN(easy_getinfo, curl_easy_getinfo)
  WSYNC_CURL_FN(easy_strerror, curl_easy_strerror)
  WSYNC_CURL_FN(multi_init, curl_multi_init)
  WSYNC_CURL_FN(multi_cleanup, curl_multi_cleanup)
  WSYNC_CURL_FN(multi_add_handle, curl_multi_add_handle)
  WSYNC_CURL_FN(multi_remove_handle, curl_multi_remove_handle)
  WSYNC_CURL_FN(multi_perform, curl_multi_perform)
  WSYNC_CURL_FN(multi_info_read, curl_multi_info_read)
  WSYNC_CURL_FN(multi_wait, curl_multi_wait)
  WSYNC_CURL_FN(multi_strerror, curl_multi_strerror)
  WSYNC_CURL_FN(slist_append, curl_slist_append)
  WSYNC_CURL_FN(slist_free_all, curl_slist_free_all)
#undef WSYNC_CURL_FN
  if (missing != nullptr) {
    c = CurlLibrary{};
    c.error = "the system's libcurl (" + lib.path + ") has no " + missing + ": it is older than 7.61";
    return c;
  }
  resolve_symbol(lib, "curl_multi_poll", &c.multi_poll);  // optional (7.66+)
  // curl_global_init is not thread-safe: it runs here, under the once of curl_library().
  if (CURLcode rc = c.global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK) {
    const std::string what = c.easy_strerror(rc);
    c = CurlLibrary{};
    c.error = "curl_global_init failed: " + what;
  }
  return c;
}

}  // namespace

const CurlLibrary& curl_library() {
  static std::once_flag once;
  static CurlLibrary lib;
  std::call_once(once, [] { lib = load(); });
  return lib;
}

}  // namespace wsync
