#include <cstddef>
#include "loader/plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <vector>

#include "common/error.h"

namespace wsync {
namespace {

std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("WSYNC_PLUGIN_PATH")) {
    std::string s(env);
    size_t start = 0;
    while (start <= s.size()) {
      size_t colon = s.find(':', start);
      std::string d = s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!d.empty()) dirs.push_back(d);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  std::string lib = library_dir();
  if (!lib.empty()) dirs.push_back(lib + "/" WSYNC_PLUGIN_SUBDIR);
  return dirs;
}

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// dlopen `kind` plugin `name_or_path` and resolve `entry`; on failure the error lists attempts.
wsync_status_t open_plugin(const char* kind, const std::string& name_or_path, const char* entry,
                           void** handle_out, void** sym_out, std::string* path_out) {
  if (name_or_path.empty()) return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s plugin name is empty", kind);
  std::vector<std::string> candidates;
  if (name_or_path.find('/') != std::string::npos) {
    candidates.push_back(name_or_path);
  } else {
    for (char c : name_or_path)
      if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
        return fail(WSYNC_ERR_INVALID_ARGUMENT,
                    "%s plugin name '%s' may only contain letters, digits, '_' and '-' (or give a path)",
                    kind, name_or_path.c_str());
    for (const auto& d : search_dirs())
      candidates.push_back(d + "/libwsync_" + kind + "_" + name_or_path + ".so");
  }
  std::string tried;
  for (const auto& path : candidates) {
    if (!file_exists(path)) {
      WSYNC_LOGD("%s plugin '%s': %s: no such file", kind, name_or_path.c_str(), path.c_str());
      tried += "\n  " + path + ": no such file";
      continue;
    }
    // RTLD_LOCAL keeps each plugin's dependencies private; RTLD_NODELETE because transport
    // libraries (UCX, NCCL) register process-wide state that does not survive an unload.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h == nullptr) {
      const char* e = dlerror();
      WSYNC_LOGD("%s plugin '%s': %s: dlopen failed: %s", kind, name_or_path.c_str(), path.c_str(), e ? e : "?");
      tried += "\n  " + path + ": dlopen failed: " + (e ? e : "?");
      continue;
    }
    dlerror();
    void* sym = dlsym(h, entry);
    if (sym == nullptr) {
      dlclose(h);
      return fail(WSYNC_ERR_NOT_FOUND, "%s plugin file %s does not export %s (is it a wsync %s plugin?)",
                  kind, path.c_str(), entry, kind);
    }
    WSYNC_LOGD("%s plugin '%s': loaded %s", kind, name_or_path.c_str(), path.c_str());
    *handle_out = h;
    *sym_out = sym;
    *path_out = path;
    return WSYNC_OK;
  }
  if (candidates.empty())
    tried = " (no folder to search: set WSYNC_PLUGIN_PATH)";
  return fail(WSYNC_ERR_NOT_FOUND, "%s plugin '%s' not found; tried:%s", kind, name_or_path.c_str(),
              tried.c_str());
}

// Common header checks of a v1 table: size, ABI version, required functions.
template <typename Table>
wsync_status_t check_table(const char* kind, const std::string& path, const Table* t, size_t min_size) {
  if (t->struct_size < min_size)
    return fail(WSYNC_ERR_VERSION_MISMATCH,
                "%s plugin %s returned a table of %u bytes, smaller than the %zu bytes of a v1.0 table",
                kind, path.c_str(), t->struct_size, min_size);
  if (t->abi_version != WSYNC_PLUGIN_ABI_VERSION)
    return fail(WSYNC_ERR_VERSION_MISMATCH,
                "%s plugin %s was built for plugin ABI %u, this wsync speaks plugin ABI %d",
                kind, path.c_str(), t->abi_version, WSYNC_PLUGIN_ABI_VERSION);
  if (t->name == nullptr)
    return fail(WSYNC_ERR_UNSUPPORTED, "%s plugin %s has no name in its table", kind, path.c_str());
  return WSYNC_OK;
}

// The entry returned NULL: keep the plugin's own status when it gave one (a GPU plugin on a
// machine without a GPU says WSYNC_ERR_NO_DEVICE), else UNSUPPORTED.
wsync_status_t refused(const char* kind, const std::string& path) {
  wsync_status_t code = last_status() != WSYNC_OK ? last_status() : WSYNC_ERR_UNSUPPORTED;
  std::string why = last_error().empty() ? "it gave no reason" : last_error();
  return fail(code, "%s plugin %s refused to load: %s", kind, path.c_str(), why.c_str());
}

// A plugin found by name must call itself by that name: users name it in configs and receivers
// load the transport the sender announces by its table name.
wsync_status_t check_name(const char* kind, const std::string& requested, const std::string& path, const char* name) {
  if (requested.find('/') != std::string::npos || requested == name) return WSYNC_OK;
  return fail(WSYNC_ERR_UNSUPPORTED, "%s plugin file %s calls itself '%s', not '%s'", kind, path.c_str(), name,
              requested.c_str());
}

#define REQUIRE_FN(kind, path, t, fn)                                                        \
  if ((t)->fn == nullptr)                                                                    \
    return fail(WSYNC_ERR_UNSUPPORTED, "%s plugin %s leaves the required function '%s' NULL", \
                kind, (path).c_str(), #fn)

}  // namespace

std::string library_dir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&wsync_abi_version), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::string f(info.dli_fname);
  size_t slash = f.rfind('/');
  return slash == std::string::npos ? std::string(".") : f.substr(0, slash);
}

wsync_status_t load_transport(const std::string& name_or_path, LoadedTransport* out) {
  void* h = nullptr;
  void* sym = nullptr;
  std::string path;
  wsync_status_t st = open_plugin("transport", name_or_path, "wsync_transport_entry_v1", &h, &sym, &path);
  if (st != WSYNC_OK) return st;
  auto entry = reinterpret_cast<wsync_transport_entry_v1_fn>(sym);
  clear_error();
  const wsync_transport_v1_t* t = entry(host_table());
  if (t == nullptr) return refused("transport", path);
  // A 1.0 table ends at destroy; later fields are read only where struct_size covers them.
  st = check_table("transport", path, t, offsetof(wsync_transport_v1_t, destroy) + sizeof(t->destroy));
  if (st != WSYNC_OK) return st;
  if ((st = check_name("transport", name_or_path, path, t->name)) != WSYNC_OK) return st;
  REQUIRE_FN("transport", path, t, create);
  REQUIRE_FN("transport", path, t, connect);
  REQUIRE_FN("transport", path, t, send_post);
  REQUIRE_FN("transport", path, t, send_wait);
  REQUIRE_FN("transport", path, t, recv_post);
  REQUIRE_FN("transport", path, t, recv_wait);
  REQUIRE_FN("transport", path, t, forget_peer);
  REQUIRE_FN("transport", path, t, destroy);
  out->path = path;
  out->handle = h;
  out->table = t;
  WSYNC_LOGI("transport '%s' %s loaded from %s", t->name, t->version ? t->version : "?", path.c_str());
  return WSYNC_OK;
}

wsync_status_t load_adapter(const std::string& name_or_path, LoadedAdapter* out) {
  void* h = nullptr;
  void* sym = nullptr;
  std::string path;
  wsync_status_t st = open_plugin("adapter", name_or_path, "wsync_adapter_entry_v1", &h, &sym, &path);
  if (st != WSYNC_OK) return st;
  auto entry = reinterpret_cast<wsync_adapter_entry_v1_fn>(sym);
  clear_error();
  const wsync_adapter_v1_t* t = entry(host_table());
  if (t == nullptr) return refused("adapter", path);
  st = check_table("adapter", path, t, offsetof(wsync_adapter_v1_t, destroy) + sizeof(t->destroy));  // 1.0
  if (st != WSYNC_OK) return st;
  if ((st = check_name("adapter", name_or_path, path, t->name)) != WSYNC_OK) return st;
  REQUIRE_FN("adapter", path, t, create);
  REQUIRE_FN("adapter", path, t, get_layout);
  REQUIRE_FN("adapter", path, t, destroy);
  // An HTTP adapter is useless without its request builder: refuse it here, by name.
  if ((t->caps & WSYNC_ADAPTER_CAP_HTTP) &&
      (t->struct_size < offsetof(wsync_adapter_v1_t, build_requests) + sizeof(t->build_requests) ||
       t->build_requests == nullptr))
    return fail(WSYNC_ERR_UNSUPPORTED, "adapter plugin %s declares CAP_HTTP but its table has no 'build_requests'",
                path.c_str());
  out->path = path;
  out->handle = h;
  out->table = t;
  WSYNC_LOGI("adapter '%s' %s loaded from %s", t->name, t->version ? t->version : "?", path.c_str());
  return WSYNC_OK;
}

}  // namespace wsync
