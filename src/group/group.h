// The sender's group: state machine behind wsync_group_* (init -> (send_batch* finalize)* ->
// destroy). One thread drives it; abort may come from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "control/control_conn.h"
#include "device/mem_block.h"
#include "http/engine_set.h"
#include "http/http_client.h"
#include "loader/plugin_loader.h"
#include "planner/bucket_planner.h"
#include "store/store_handle.h"
#include "store/tcp_store_server.h"

namespace wsync {

struct Peer {
  uint32_t rank = 0;
  uint32_t pid = 0;
  ControlConn conn;
  bool alive = true;
};

// One pipeline slot: host memory for host transports, CUDA memory (allocated at init) for
// transports that move device memory only.
struct StagingSlot {
  MemBlock mem;
};

}  // namespace wsync

struct wsync_group {
  // configuration
  std::string group_name;
  uint32_t num_receivers = 0;
  int64_t timeout_ms = 60000;
  uint32_t staging_buckets = 2;
  bool verify_payload = false;
  wsync::LayoutRule rule;
  int requested_device = -1;  // option 'device'; -1 = the current device at init
  bool bucket_bytes_set = false;  // the caller gave option bucket_bytes

  // plugins
  wsync::LoadedAdapter adapter;
  void* adapter_self = nullptr;
  wsync::LoadedTransport transport;
  void* transport_self = nullptr;

  // rendezvous and control
  std::unique_ptr<wsync::TcpStoreServer> store_server;
  std::unique_ptr<wsync::TcpStoreClient> store_client;
  wsync_store store_handle{nullptr};
  std::string store_addr;
  wsync::ControlListener listener;
  std::vector<std::unique_ptr<wsync::Peer>> peers;  // index = rank - 1

  // update state
  std::atomic<bool> aborted{false};
  bool abort_announced = false;  // receivers were sent ABORT_UPDATE
  uint64_t inflight_seq = 0;     // a bucket posted to the transport and not yet completed
  std::string broken;  // non-empty: the reason the group can no longer update
  uint64_t next_seq = 1;
  uint64_t update_id = 1;
  uint64_t bucket_in_update = 0;
  std::unordered_set<std::string> names_in_update;
  std::vector<wsync::StagingSlot> staging;

  // device side (group_device.cpp); untouched by host-only groups
  bool device_staging = false;  // the transport moves CUDA memory only: staging is on `device`
  bool staging_only = false;    // the transport sends from registered staging only
  int device = -1;              // CUDA ordinal of staging and the copy stream
  void* caller_stream = nullptr;  // wsync_group_set_cuda_stream
  void* copy_stream = nullptr;    // packs buckets
  void* caller_event = nullptr;   // recorded on caller_stream per batch

  // HTTP engines (group_engines.cpp); only for an adapter with WSYNC_ADAPTER_CAP_HTTP
  bool http_engines = false;
  std::string engines_spec;                 // option 'engines'
  std::vector<wsync::EngineServer> engines; // the healthy servers, used for every step
  wsync::HttpOptions http;
  std::string nccl_unique_id_b64;           // from the transport, for engines that take it
  bool update_open = false;                 // PAUSE / BEGIN_UPDATE were sent for this update
  // option engine_receivers: "none" (an unmodified engine: its HTTP replies are the only
  // acknowledgements; no wsync control channel) or "wsync" (the engine embeds wsync receivers)
  bool engines_embed_wsync = false;
  std::atomic<bool> engines_failed{false};  // an INIT request failed: stop waiting for receivers
  wsync_group_stats_t stats = WSYNC_GROUP_STATS_INIT;
};
