// One engine worker's side of a group: state behind wsync_receiver_*.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/control_conn.h"
#include "device/mem_block.h"
#include "loader/plugin_loader.h"
#include "store/store_handle.h"

namespace wsync {

struct Registered {
  void* data = nullptr;
  uint64_t nbytes = 0;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};
  int32_t device_type = WSYNC_DEVICE_CPU;
  int32_t device_index = 0;
};

// A tensor that arrives in chunks over several buckets.
struct Assembly {
  MemBlock owned;  // when not registered (host or device, like the receiver's staging)
  uint8_t* dst = nullptr;
  uint64_t tensor_bytes = 0;
  uint64_t received = 0;
  bool placed = false;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};
};

}  // namespace wsync

struct wsync_receiver {
  uint32_t rank = 0;
  uint32_t world_size = 0;
  std::string group_name;
  int64_t timeout_ms = 60000;

  std::unique_ptr<wsync::TcpStoreClient> store_client;
  wsync_store store_handle{nullptr};
  wsync::LoadedTransport transport;
  void* transport_self = nullptr;
  wsync::ControlConn conn;

  std::map<std::string, wsync::Registered> registry;
  std::map<std::string, wsync::Assembly> assembling;
  // Buffers a receive was posted into when the transport gave up on it: UCX (for one) may still
  // write into them until the transport is destroyed, so they are freed only then.
  std::vector<wsync::MemBlock> graveyard;

  // Where unregistered bytes land: host memory, or CUDA memory on `device` when the transport
  // moves device memory only (views then point into device memory).
  int device = -1;
  bool device_memory = false;
  // Staging for tensors that are not registered; views point here until the next event.
  wsync::MemBlock staging;
  wsync::MemBlock scratch;  // padding between entries lands here

  // The last event's storage (names, descriptors, finished assemblies).
  std::vector<std::string> ev_names;
  std::vector<wsync_tensor_t> ev_tensors;
  std::vector<uint8_t> ev_placed;
  std::vector<wsync::MemBlock> ev_owned;

  uint64_t current_update = 0;
  uint64_t expected_bucket = 0;
  uint64_t pending_commit = 0;  // version announced by END_UPDATE, not yet committed
  uint64_t committed = 0;
  bool closed = false;
  std::string broken;
};
