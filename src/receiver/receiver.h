// One engine worker's side of a group: state behind wsync_receiver_*. The receiver is synchronous:
// wsync_receiver_next does the work of one event on the caller's thread.
//
//   receiver_api.cpp     the exported functions
//   receiver_init.cpp    joining: store, group info, control HELLO, transport connect
//   receiver_bucket.cpp  one bucket: manifest checks, where each byte goes, receive, ACK, event
//   receiver_events.cpp  the other control messages (END_UPDATE, ABORT_UPDATE, CLOSE)
//   receiver_state.cpp   what an update did to the registered buffers: the tensors it touched,
//                        staged bytes (receive_mode staged) and their copy at commit, the state
//                        wsync_receiver_get_state reports
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "control/control_conn.h"
#include "device/mem_block.h"
#include "loader/plugin_loader.h"
#include "manifest/manifest.h"
#include "receiver/arrivals.h"
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
  uint64_t tensor_bytes = 0;  // which bytes arrived: wsync_receiver::arrived
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
  // Which bytes of which tensor (whole or split) arrived in this update: a tensor is complete, and
  // its staged bytes may be applied, only when its chunks tile it exactly. Cleared when the
  // update commits or is dropped.
  wsync::Arrivals arrived;
  // Buffers a receive was posted into when the transport gave up on it: UCX (for one) may still
  // write into them until the transport is destroyed, so they are freed only then.
  std::vector<wsync::MemBlock> graveyard;

  // Receiver option receive_mode: false = in_place (bytes of registered tensors are written
  // straight into the registered buffers), true = staged (they land in `staged_blocks` and are
  // copied into the registered buffers by wsync_receiver_commit only).
  bool staged = false;
  // Registered tensors this update wrote into (in place) or staged (staged mode), in the order of
  // their first bytes; `touched_set` holds the same names. In place, cleared by a commit only: after
  // a failure they name the buffers that may hold a mix. Staged, cleared by a commit (after the copy)
  // and by a failure (the staged bytes are dropped).
  std::vector<std::string> touched;
  std::unordered_set<std::string> touched_set;
  // Staged mode: one block per registered tensor (its size), reused by later updates; freed at
  // destroy (or moved to the graveyard when the transport gave up on a receive into it).
  std::unordered_map<std::string, wsync::MemBlock> staged_blocks;
  uint64_t staged_retired_bytes = 0;  // of staged blocks moved to the graveyard (freed at destroy)
  // In place: the transport gave up on a receive posted into registered buffers, and may still
  // write into them until it is destroyed (wsync_receiver_destroy).
  bool late_writes = false;
  // A staged copy at commit failed midway (CUDA error): the registered buffers hold a mix.
  bool apply_failed = false;

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
  // Why the current update may not commit here (empty: it may): ABORT_UPDATE came, or a bucket or
  // END_UPDATE was refused or failed here. Cleared when a later update starts (RELIABILITY.md: the
  // next update can start); today the sender breaks its group on a failure anyway.
  std::string update_void;
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
// The update ended without a commit (`why`): forget half-assembled tensors, which bytes arrived
// and staged bytes (their buffers go to the graveyard once the transport gave up, since it may
// still write into them); no END_UPDATE may commit it.
void drop_update(wsync_receiver_t* rx, const std::string& why);

// receiver_state.cpp
// The memory the bytes of registered tensor `name` (`bytes` long) land in, in staged mode: its
// staged block, allocated on first use (host or device memory, like the receiver's staging).
wsync_status_t staged_block(wsync_receiver_t* rx, const std::string& name, uint64_t bytes, uint8_t** out);
// Bytes of registered tensor `name` were posted for receipt: remember it as touched.
void note_touched(wsync_receiver_t* rx, const std::string& name);
// The update failed: staged bytes are dropped (the blocks are kept for reuse unless the transport
// may still write into them); in place, the touched buffers stay listed.
void drop_staged(wsync_receiver_t* rx);
// Staged mode: every byte of every staged tensor arrived in this update (else WSYNC_ERR_PROTOCOL
// naming the tensor and the bytes missing). Asked at END_UPDATE and again before the commit tells
// the sender, so a staged block is never copied into a buffer with bytes that did not arrive.
wsync_status_t check_staged_arrived(const wsync_receiver_t* rx);
// wsync_receiver_commit's work after the sender was told: staged mode copies every staged tensor
// into its registered buffer; both modes then forget the touched list and which bytes arrived.
wsync_status_t apply_commit(wsync_receiver_t* rx);
// Fill `out` (the library's size) with the receiver's state.
void fill_state(const wsync_receiver_t* rx, wsync_receiver_state_t* out);

}  // namespace wsync
