// Loading a library of the system at run time (see system_library.h).
#include "common/system_library.h"

#include <cstdlib>

namespace wsync {

SystemLibrary open_system_library(const char* env_var, std::initializer_list<const char*> names) {
  SystemLibrary lib;
  const char* env = env_var != nullptr ? std::getenv(env_var) : nullptr;
  const bool asked = env != nullptr && env[0] != '\0';
  auto attempt = [&lib](const char* name) {
    lib.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib.handle != nullptr) {
      lib.path = name;
      lib.why_not.clear();
      return true;
    }
    const char* e = dlerror();
    lib.why_not += std::string(lib.why_not.empty() ? "" : "; ") + (e != nullptr ? e : name);
    return false;
  };
  if (asked) {
    attempt(env);  // asked for one file: no other
    return lib;
  }
  for (const char* name : names)
    if (attempt(name)) break;
  return lib;
}

}  // namespace wsync
