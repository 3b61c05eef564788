// A library of the system loaded at run time, not linked (dlopen): the first of its usual file
// names that loads, or the one file an environment variable names. libcurl (http/curl_library)
// and libcrypto (common/auth) come this way, so libwsync loads without them and the portable
// wheel carries neither (docs/PYTHON.md).
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace wsync {

struct SystemLibrary {
  void* handle = nullptr;  // never closed: what it gives stays valid for the process
  std::string path;        // the name that loaded
  std::string why_not;     // when handle is null: every name tried and the loader's reason
};

// Loads the library: the file `env_var` names when it is set (and no other), else the first of
// `names` that loads.
SystemLibrary open_system_library(const char* env_var, std::initializer_list<const char*> names);

// *out = the symbol `name` of `lib` (null when absent); true when found.
template <typename F>
bool resolve_symbol(const SystemLibrary& lib, const char* name, F* out) {
  *out = lib.handle != nullptr ? reinterpret_cast<F>(dlsym(lib.handle, name)) : nullptr;
  return *out != nullptr;
}

}  // namespace wsync
