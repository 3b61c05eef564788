// libcurl, loaded from the system when the first engine request is made (dlopen "libcurl.so.4"),
// not linked: the core then needs no libcurl to load, to move tensors or to talk to native
// engines, and the portable wheel needs no copy of it (docs/PYTHON.md). Every function the HTTP
// client calls is here; curl_multi_poll (libcurl 7.66+) falls back to curl_multi_wait where the
// system's libcurl is older (RHEL 8 ships 7.61).
#pragma once

// CURLOPT_PROTOCOLS stays: the fallback where the system's libcurl predates CURLOPT_PROTOCOLS_STR.
#define CURL_DISABLE_DEPRECATION 1
#include <curl/curl.h>

#include <string>

namespace wsync {

struct CurlLibrary {
  decltype(&curl_global_init) global_init = nullptr;
  decltype(&curl_easy_init) easy_init = nullptr;
  decltype(&curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&curl_easy_setopt) easy_setopt = nullptr;
  decltype(&curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&curl_easy_strerror) easy_strerror = nullptr;
  decltype(&curl_multi_init) multi_init = nullptr;
  decltype(&curl_multi_cleanup) multi_cleanup = nullptr;
  decltype(&curl_multi_add_handle) multi_add_handle = nullptr;
  decltype(&curl_multi_remove_handle) multi_remove_handle = nullptr;
  decltype(&curl_multi_perform) multi_perform = nullptr;
  decltype(&curl_multi_info_read) multi_info_read = nullptr;
  decltype(&curl_multi_wait) multi_wait = nullptr;
  decltype(&curl_multi_poll) multi_poll = nullptr;  // null before libcurl 7.66: multi_wait instead
  decltype(&curl_multi_strerror) multi_strerror = nullptr;
  decltype(&curl_slist_append) slist_append = nullptr;
  decltype(&curl_slist_free_all) slist_free_all = nullptr;
  std::string path;   // the file loaded, when loaded
  std::string error;  // why not, when not: every call above is then null
  bool loaded() const { return error.empty(); }
};

// The process's libcurl, loaded (and curl_global_init run) once, on the first call; never unloaded.
// WSYNC_LIBCURL names another file to load.
const CurlLibrary& curl_library();

}  // namespace wsync
