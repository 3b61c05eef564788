#include "loader/plugin_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <set>

#include "common/error.h"

namespace wsync {
namespace {

// What differs between the two kinds of plugin; the rest of loading is shared.
struct Kind {
  const char* name;        // "transport"
  const char* entry;       // "wsync_transport_entry_v1"
  size_t sizes[WSYNC_PLUGIN_ABI_MINOR + 1];  // table size of plugin ABI 1.0, 1.1, ...
};

// Transport tables did not grow in 1.3, 1.6 and 1.7 (1.6 added the hint auth_key): a 1.2 table is
// a whole 1.3 table; adapter tables did not grow in 1.4, 1.5 and 1.6 (1.7 appended `held`).
const Kind kTransport = {"transport", "wsync_transport_entry_v1",
                         {WSYNC_TRANSPORT_V1_0_SIZE, WSYNC_TRANSPORT_V1_1_SIZE, WSYNC_TRANSPORT_V1_2_SIZE,
                          WSYNC_TRANSPORT_V1_2_SIZE, WSYNC_TRANSPORT_V1_4_SIZE, WSYNC_TRANSPORT_V1_5_SIZE,
                          WSYNC_TRANSPORT_V1_5_SIZE, WSYNC_TRANSPORT_V1_5_SIZE}};
const Kind kAdapter = {"adapter", "wsync_adapter_entry_v1",
                       {WSYNC_ADAPTER_V1_0_SIZE, WSYNC_ADAPTER_V1_1_SIZE, WSYNC_ADAPTER_V1_2_SIZE,
                        WSYNC_ADAPTER_V1_3_SIZE, WSYNC_ADAPTER_V1_3_SIZE, WSYNC_ADAPTER_V1_3_SIZE,
                        WSYNC_ADAPTER_V1_3_SIZE, WSYNC_ADAPTER_V1_7_SIZE}};

// The header every table starts with.
struct TableHead {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* name;
  const char* version;
  uint64_t caps;
};
static_assert(offsetof(wsync_transport_v1_t, caps) == offsetof(TableHead, caps), "table heads differ");
static_assert(offsetof(wsync_adapter_v1_t, caps) == offsetof(TableHead, caps), "table heads differ");

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool valid_name(const std::string& n) {
  return !n.empty() && std::all_of(n.begin(), n.end(), [](char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// dlopen one file and resolve the kind's entry; *why on failure.
wsync_status_t open_file(const Kind& k, const std::string& path, void** handle, void** sym, std::string* why) {
  // RTLD_LOCAL keeps each plugin's dependencies private; RTLD_NODELETE because transport libraries
  // register process-wide state that does not survive an unload.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h == nullptr) {
    const char* e = dlerror();
    *why = std::string("dlopen failed: ") + (e ? e : "?");
    return WSYNC_ERR_NOT_FOUND;
  }
  dlerror();
  void* s = dlsym(h, k.entry);
  if (s == nullptr) {
    dlclose(h);
    *why = std::string("it does not export ") + k.entry + " (is it a wsync " + k.name + " plugin?)";
    return WSYNC_ERR_NOT_FOUND;
  }
  *handle = h;
  *sym = s;
  return WSYNC_OK;
}

// The file of `name_or_path`: a path as given, else the first libwsync_<kind>_<name>.so found.
wsync_status_t find_and_open(const Kind& k, const std::string& name_or_path, void** handle, void** sym,
                             std::string* path_out) {
  if (name_or_path.empty()) return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s plugin name is empty", k.name);
  std::vector<std::string> candidates;
  if (name_or_path.find('/') != std::string::npos) {
    candidates.push_back(name_or_path);
  } else if (!valid_name(name_or_path)) {
    return fail(WSYNC_ERR_INVALID_ARGUMENT, "%s plugin name '%s' may only contain letters, digits, '_' and '-' (or give a "
                "path)", k.name, name_or_path.c_str());
  } else {
    for (const auto& d : plugin_search_dirs()) candidates.push_back(d + "/libwsync_" + k.name + "_" + name_or_path + ".so");
  }
  std::string tried;
  for (const auto& path : candidates) {
    std::string why = "no such file";
    if (!file_exists(path)) {
      WSYNC_LOGD("%s plugin '%s': %s: no such file", k.name, name_or_path.c_str(), path.c_str());
      tried += "\n  " + path + ": no such file";
      continue;
    }
    wsync_status_t st = open_file(k, path, handle, sym, &why);
    if (st == WSYNC_OK)
      WSYNC_LOGD("%s plugin '%s': loaded %s", k.name, name_or_path.c_str(), path.c_str());
    else
      WSYNC_LOGD("%s plugin '%s': %s: %s", k.name, name_or_path.c_str(), path.c_str(), why.c_str());
    if (st == WSYNC_OK) {
      *path_out = path;
      return WSYNC_OK;
    }
    if (why.compare(0, 6, "dlopen") != 0) return fail(st, "%s plugin file %s: %s", k.name, path.c_str(), why.c_str());
    tried += "\n  " + path + ": " + why;
  }
  if (candidates.empty()) tried = " (no folder to search: set WSYNC_PLUGIN_PATH)";
  return fail(WSYNC_ERR_NOT_FOUND, "%s plugin '%s' not found; tried:%s", k.name, name_or_path.c_str(), tried.c_str());
}

// Call the entry and check the table's head: size, ABI major, name (as asked for by name).
wsync_status_t call_entry(const Kind& k, const std::string& requested, const std::string& path, void* sym,
                          const TableHead** out) {
  using Entry = const void* (*)(const wsync_host_v1_t*);
  clear_error();
  auto* t = static_cast<const TableHead*>(reinterpret_cast<Entry>(sym)(host_table()));
  if (t == nullptr) {  // keep the plugin's own status when it gave one (a GPU plugin: NO_DEVICE)
    const wsync_status_t code = last_status() != WSYNC_OK ? last_status() : WSYNC_ERR_UNSUPPORTED;
    const std::string why = last_error().empty() ? "it gave no reason" : last_error();
    return fail(code, "%s plugin %s refused to load: %s", k.name, path.c_str(), why.c_str());
  }
  if (t->struct_size < k.sizes[0])
    return fail(WSYNC_ERR_VERSION_MISMATCH, "%s plugin %s returned a table of %u bytes, smaller than the %zu bytes of a "
                "v1.0 table", k.name, path.c_str(), t->struct_size, k.sizes[0]);
  if (t->abi_version != WSYNC_PLUGIN_ABI_VERSION)
    return fail(WSYNC_ERR_VERSION_MISMATCH, "%s plugin %s was built for plugin ABI %u, this wsync speaks plugin ABI %d",
                k.name, path.c_str(), t->abi_version, WSYNC_PLUGIN_ABI_VERSION);
  if (t->name == nullptr) return fail(WSYNC_ERR_UNSUPPORTED, "%s plugin %s has no name in its table", k.name, path.c_str());
  // A plugin found by name must call itself by that name: users name it in configs and receivers
  // load the transport the sender announces by its table name.
  if (requested.find('/') == std::string::npos && requested != t->name)
    return fail(WSYNC_ERR_UNSUPPORTED, "%s plugin file %s calls itself '%s', not '%s'", k.name, path.c_str(), t->name,
                requested.c_str());
  *out = t;
  return WSYNC_OK;
}

wsync_status_t require(const Kind& k, const std::string& path, const char* fn, const void* ptr) {
  if (ptr != nullptr) return WSYNC_OK;
  return fail(WSYNC_ERR_UNSUPPORTED, "%s plugin %s leaves the required function '%s' NULL", k.name, path.c_str(), fn);
}

wsync_status_t check_transport(const std::string& path, const wsync_transport_v1_t* t) {
  const std::pair<const char*, const void*> fns[] = {
      {"create", reinterpret_cast<const void*>(t->create)},         {"connect", reinterpret_cast<const void*>(t->connect)},
      {"send_post", reinterpret_cast<const void*>(t->send_post)},   {"send_wait", reinterpret_cast<const void*>(t->send_wait)},
      {"recv_post", reinterpret_cast<const void*>(t->recv_post)},   {"recv_wait", reinterpret_cast<const void*>(t->recv_wait)},
      {"forget_peer", reinterpret_cast<const void*>(t->forget_peer)}, {"destroy", reinterpret_cast<const void*>(t->destroy)}};
  for (const auto& f : fns)
    if (wsync_status_t st = require(kTransport, path, f.first, f.second)) return st;
  return WSYNC_OK;
}

wsync_status_t check_adapter(const std::string& path, const wsync_adapter_v1_t* t) {
  const std::pair<const char*, const void*> fns[] = {{"create", reinterpret_cast<const void*>(t->create)},
                                                     {"get_layout", reinterpret_cast<const void*>(t->get_layout)},
                                                     {"destroy", reinterpret_cast<const void*>(t->destroy)}};
  for (const auto& f : fns)
    if (wsync_status_t st = require(kAdapter, path, f.first, f.second)) return st;
  // An HTTP adapter is useless without its request builder: refuse it here, by name.
  if ((t->caps & WSYNC_ADAPTER_CAP_HTTP) && !(WSYNC_HAS_FIELD(t, wsync_adapter_v1_t, build_requests) && t->build_requests))
    return fail(WSYNC_ERR_UNSUPPORTED, "adapter plugin %s declares CAP_HTTP but its table has no 'build_requests'",
                path.c_str());
  return WSYNC_OK;
}

// Load one plugin: find, open, call the entry, check the head and the kind's required functions.
wsync_status_t load(const Kind& k, const std::string& name_or_path, const TableHead** table, std::string* path,
                    void** handle) {
  void* sym = nullptr;
  wsync_status_t st = find_and_open(k, name_or_path, handle, &sym, path);
  if (st == WSYNC_OK) st = call_entry(k, name_or_path, *path, sym, table);
  if (st != WSYNC_OK) return st;
  if (&k == &kTransport) st = check_transport(*path, reinterpret_cast<const wsync_transport_v1_t*>(*table));
  else st = check_adapter(*path, reinterpret_cast<const wsync_adapter_v1_t*>(*table));
  if (st == WSYNC_OK)
    WSYNC_LOGI("%s '%s' %s loaded from %s", k.name, (*table)->name, (*table)->version ? (*table)->version : "?",
               path->c_str());
  return st;
}

uint32_t minor_of(const Kind& k, uint32_t size) {
  uint32_t minor = 0;
  for (uint32_t i = 0; i <= WSYNC_PLUGIN_ABI_MINOR; ++i)
    if (size >= k.sizes[i]) minor = i;
  return minor;
}

// One file of the listing: load it like init would, and say what it is.
PluginDescription describe(const Kind& k, int32_t kind, const std::string& name, const std::string& path) {
  PluginDescription d;
  d.kind = kind;
  d.name = name;
  d.path = path;
  const TableHead* t = nullptr;
  void* handle = nullptr;
  std::string p, why;
  void* sym = nullptr;
  if (open_file(k, path, &handle, &sym, &why) == WSYNC_ERR_NOT_FOUND && why.compare(0, 6, "dlopen") == 0) {
    d.status = fail(WSYNC_ERR_NOT_FOUND, "%s plugin file %s: %s (a search by name skips it)", k.name, path.c_str(),
                    why.c_str());
    d.error = last_error();
    d.opens = false;
    return d;
  }
  d.status = load(k, path, &t, &p, &handle);
  if (d.status != WSYNC_OK) {
    d.error = last_error();
    return d;
  }
  d.version = t->version ? t->version : "";
  if (d.name != t->name) {  // what init would say when asked for it by name
    d.status = fail(WSYNC_ERR_UNSUPPORTED, "%s plugin file %s calls itself '%s', not '%s'", k.name, path.c_str(),
                    t->name, d.name.c_str());
    d.error = last_error();
  }
  d.caps = t->caps;
  d.abi_major = t->abi_version;
  d.abi_minor = minor_of(k, t->struct_size);
  const char* (*info)(void) = nullptr;
  if (&k == &kTransport) {
    auto* tt = reinterpret_cast<const wsync_transport_v1_t*>(t);
    info = WSYNC_HAS_FIELD(tt, wsync_transport_v1_t, runtime_info) ? tt->runtime_info : nullptr;
  } else {
    auto* at = reinterpret_cast<const wsync_adapter_v1_t*>(t);
    info = WSYNC_HAS_FIELD(at, wsync_adapter_v1_t, runtime_info) ? at->runtime_info : nullptr;
  }
  const char* text = info ? info() : nullptr;
  d.detail = text ? text : "";
  return d;
}

// "libwsync_<kind>_<name>.so" -> kind and name.
bool parse_file_name(const std::string& f, const Kind** k, int32_t* kind, std::string* name) {
  const std::string suffix = ".so";
  if (f.size() <= suffix.size() || f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  for (const Kind* c : {&kTransport, &kAdapter}) {
    const std::string prefix = std::string("libwsync_") + c->name + "_";
    if (f.compare(0, prefix.size(), prefix) != 0) continue;
    *name = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
    *k = c;
    *kind = c == &kTransport ? WSYNC_PLUGIN_KIND_TRANSPORT : WSYNC_PLUGIN_KIND_ADAPTER;
    return valid_name(*name);
  }
  return false;
}

}  // namespace

std::vector<std::string> plugin_search_dirs() {
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

std::string library_dir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&wsync_abi_version), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string f(info.dli_fname);
  size_t slash = f.rfind('/');
  return slash == std::string::npos ? std::string(".") : f.substr(0, slash);
}

// *out is filled only on success (a refused plugin stays mapped: plugins are never unloaded).
template <typename Loaded>
wsync_status_t load_as(const Kind& kind, const std::string& name_or_path, Loaded* out) {
  const TableHead* t = nullptr;
  std::string path;
  void* handle = nullptr;
  wsync_status_t st = load(kind, name_or_path, &t, &path, &handle);
  if (st != WSYNC_OK) return st;
  out->path = path;
  out->handle = handle;
  out->table = reinterpret_cast<decltype(out->table)>(t);
  return WSYNC_OK;
}

wsync_status_t load_transport(const std::string& name_or_path, LoadedTransport* out) {
  return load_as(kTransport, name_or_path, out);
}

wsync_status_t load_adapter(const std::string& name_or_path, LoadedAdapter* out) {
  return load_as(kAdapter, name_or_path, out);
}

std::vector<PluginDescription> describe_plugins() {
  std::vector<PluginDescription> out;
  std::set<std::pair<int32_t, std::string>> seen;
  for (const auto& dir : plugin_search_dirs()) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> files;
    while (dirent* e = readdir(d)) files.emplace_back(e->d_name);
    closedir(d);
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const Kind* k = nullptr;
      int32_t kind = 0;
      std::string name;
      if (!parse_file_name(f, &k, &kind, &name) || !file_exists(dir + "/" + f)) continue;
      out.push_back(describe(*k, kind, name, dir + "/" + f));
      // As a search by name goes: a file that does not even dlopen is passed over, not taken.
      if (out.back().opens) out.back().shadowed = !seen.insert({kind, name}).second;
    }
  }
  clear_error();
  return out;
}

}  // namespace wsync
