// Finds, loads and checks transport and adapter plugins.
//
// Search order for a plugin given by name: every folder of WSYNC_PLUGIN_PATH (colon list), then
// the wsync/ folder beside the loaded libwsync (found with dladdr). A value containing '/' is a
// path and is loaded as is. Every attempt is logged at debug level, and a failure lists them all.
#pragma once

#include <string>

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

// The folder libwsync was loaded from ("" if unknown).
std::string library_dir();

// The process-wide host table handed to every plugin.
const wsync_host_v1_t* host_table();

}  // namespace wsync
