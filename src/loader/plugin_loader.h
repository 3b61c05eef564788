// Finds, loads and checks transport and adapter plugins.
//
// Search order for a plugin given by name: every folder of WSYNC_PLUGIN_PATH (colon list), then
// the wsync/ folder beside the loaded libwsync (found with dladdr). A value containing '/' is a
// path and is loaded as is. Every attempt is logged at debug level, and a failure lists them all.
#pragma once

#include <string>
#include <vector>

#include "wsync_plugin.h"

namespace wsync {

struct LoadedTransport {
  std::string path;
  void* handle = nullptr;
  const wsync_transport_v1_t* table = nullptr;
};

struct LoadedAdapter {
  std::string path;
  void* handle = nullptr;
  const wsync_adapter_v1_t* table = nullptr;
};

wsync_status_t load_transport(const std::string& name_or_path, LoadedTransport* out);
wsync_status_t load_adapter(const std::string& name_or_path, LoadedAdapter* out);

// The folder libwsync was loaded from ("" if unknown), and the folders searched, in order.
std::string library_dir();
std::vector<std::string> plugin_search_dirs();

// One plugin file, as wsync_list_plugins describes it.
struct PluginDescription {
  int32_t kind = 0;  // WSYNC_PLUGIN_KIND_*
  std::string name, path, version, detail, error;
  uint64_t caps = 0;
  uint32_t abi_major = 0, abi_minor = 0;
  wsync_status_t status = WSYNC_OK;
  bool shadowed = false;
  bool opens = true;  // false: dlopen fails, so a search by name passes over this file
};

// Every libwsync_{transport,adapter}_*.so in the search folders, loaded and described.
std::vector<PluginDescription> describe_plugins();

// The process-wide host table handed to every plugin.
const wsync_host_v1_t* host_table();

}  // namespace wsync
