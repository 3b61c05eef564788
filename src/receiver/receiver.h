// One engine worker's side of a group: state behind wsync_receiver_*. The receiver is synchronous:
// wsync_receiver_next does the work of one event on the caller's thread.
//
//   receiver_api.cpp     the exported functions
//   receiver_init.cpp    joining: store, group info, control HELLO, transport connect
//   receiver_bucket.cpp  one bucket: manifest checks, where each byte goes, receive, ACK, event
//   receiver_events.cpp  the other control messages (END_UPDATE, ABORT_UPDATE, CLOSE)
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/control_conn.h"
#include "device/mem_block.h"
#include "loader/plugin_loader.h"
#include "manifest/manifest.h"
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
  int transport_fd = -1;  // the transport's event fd, or -1: its waits are polled in slices
  wsync::ControlConn conn;

  std::unordered_map<std::string, wsync::Registered> registry;
  std::unordered_map<std::string, wsync::Assembly> assembling;
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

  // The last event's storage: its manifest (the tensors' names point into it), descriptors,
  // placed flags, and assemblies it completed.
  wsync::Manifest ev_manifest;
  std::vector<wsync_tensor_t> ev_tensors;
  std::vector<uint8_t> ev_placed;
  std::vector<wsync::MemBlock> ev_owned;

  uint64_t current_update = 0;
  uint64_t expected_bucket = 0;
  uint64_t pending_commit = 0;  // version announced by END_UPDATE, not yet committed
  bool update_voided = false;   // ABORT_UPDATE came: no END_UPDATE may commit this update
  uint64_t committed = 0;
  bool closed = false;
  std::string broken;
};

namespace wsync {

// receiver_init.cpp
wsync_status_t receiver_init(const wsync_receiver_config_t* config, wsync_receiver_t* rx);
// receiver_events.cpp
wsync_status_t receiver_next(wsync_receiver_t* rx, wsync_receiver_event_t* ev, int64_t timeout_ms);
// receiver_bucket.cpp
wsync_status_t handle_manifest(wsync_receiver_t* rx, const Frame& f, wsync_receiver_event_t* ev);
// Refuse: tell the sender (NACK seq) and return the same error to the engine.
wsync_status_t refuse(wsync_receiver_t* rx, uint64_t seq, wsync_status_t st);
// Send a status frame (NACK or ACK) with an optional transport blob.
void send_status(wsync_receiver_t* rx, MsgType type, uint64_t seq, wsync_status_t code, const std::string& why,
                 const std::vector<uint8_t>& blob = {});
// Forget half-assembled tensors (their buffers go to the graveyard once the transport gave up).
void drop_assemblies(wsync_receiver_t* rx);

}  // namespace wsync
