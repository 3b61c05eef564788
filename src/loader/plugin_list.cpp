// wsync_plugin_dirs and wsync_list_plugins: what wsync-info prints, for any program or binding.
// The strings handed out live in thread-local storage until the next call on the same thread.
#include <cstring>

#include "common/api_guard.h"
#include "loader/plugin_loader.h"

using namespace wsync;

namespace {

thread_local std::string t_dirs;
thread_local std::vector<PluginDescription> t_plugins;

void fill(const PluginDescription& d, wsync_plugin_info_t* out) {
  wsync_plugin_info_t info = WSYNC_PLUGIN_INFO_INIT;
  info.kind = d.kind;
  info.name = d.name.c_str();
  info.path = d.path.c_str();
  info.version = d.version.c_str();
  info.detail = d.detail.c_str();
  info.error = d.error.c_str();
  info.caps = d.caps;
  info.abi_major = d.abi_major;
  info.abi_minor = d.abi_minor;
  info.status = d.status;
  info.shadowed = d.shadowed ? 1u : 0u;
  // The caller's struct may be older (shorter) or newer (longer): its struct_size says how much of it
  // exists, and stays as the caller set it (a second call on the same array steps the same way).
  const uint32_t size = out->struct_size < sizeof info ? out->struct_size : static_cast<uint32_t>(sizeof info);
  info.struct_size = out->struct_size;
  std::memcpy(out, &info, size);
}

}  // namespace

extern "C" {

WSYNC_API const char* wsync_plugin_dirs(void) {
  return guard_value<const char*>("wsync_plugin_dirs", "", [] {
    t_dirs.clear();
    for (const auto& d : plugin_search_dirs()) t_dirs += (t_dirs.empty() ? "" : ":") + d;
    return t_dirs.c_str();
  });
}

WSYNC_API wsync_status_t wsync_list_plugins(wsync_plugin_info_t* infos, uint64_t capacity, uint64_t* count) {
  return api_call("wsync_list_plugins", [&] {
    if (count == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "count is NULL");
    if (capacity > 0 && infos == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "infos is NULL but capacity is %llu",
                                                      static_cast<unsigned long long>(capacity));
    const uint32_t size = capacity > 0 ? infos[0].struct_size : 0;
    if (capacity > 0 && size < WSYNC_STRUCT_SIZE(wsync_plugin_info_t, name))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "infos[0].struct_size is %u; initialise with WSYNC_PLUGIN_INFO_INIT", size);
    // Entries lie as a C array of the caller's struct lies: struct_size (which ends at its last
    // field) rounded up to the struct's 8-byte alignment.
    const uint64_t stride = (static_cast<uint64_t>(size) + 7) & ~uint64_t{7};
    t_plugins = describe_plugins();
    *count = t_plugins.size();
    char* base = reinterpret_cast<char*>(infos);
    for (uint64_t i = 0; i < capacity && i < t_plugins.size(); ++i) {
      auto* out = reinterpret_cast<wsync_plugin_info_t*>(base + i * stride);
      out->struct_size = size;
      fill(t_plugins[i], out);
    }
    clear_error();
    return WSYNC_OK;
  });
}

}  // extern "C"
