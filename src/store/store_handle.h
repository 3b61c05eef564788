// The opaque wsync_store_t of the plugin ABI: a store client shared by the core and plugins.
#pragma once

#include <memory>

#include "store/tcp_store_client.h"
#include "wsync_plugin.h"

struct wsync_store {
  wsync::TcpStoreClient* client;
};
