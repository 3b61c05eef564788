// One bucket on its way through the pipeline thread (group_pipeline.cpp drives these in order):
//
//   bucket_prepare   its bytes are made ready: the caller's memory, or packed into a staging slot
//   bucket_send      MANIFEST (with the transport's blob) -> every READY -> send_post
//   bucket_complete  the transport's send finished and every receiver's ACK came: delivered
#pragma once

#include <cstdint>
#include <string>

#include "group/group.h"
#include "group/group_engines.h"

namespace wsync {

struct InflightBucket {
  Batch* batch = nullptr;
  size_t index = 0;              // in batch->plan
  size_t slot = 0;               // the staging slot it may pack into
  const uint8_t* data = nullptr;  // where its bytes are (staging, or the caller's tensor)
  bool on_device = false;        // data is CUDA memory on the group's device
  uint64_t checksum = 0;         // verify_payload
  uint64_t seq = 0;              // 0 until bucket_send gives it one
  bool posted = false;           // send_post was called and the send is not known complete
  std::string what;              // "bucket 3 (2 of 5 in batch 7) of update 1", for messages
  EngineCalls update_calls;      // HTTP engines: this bucket's UPDATE requests
};

wsync_status_t bucket_prepare(wsync_group_t* g, InflightBucket* b, uint64_t inflight_seq);
wsync_status_t bucket_send(wsync_group_t* g, InflightBucket* b);
wsync_status_t bucket_complete(wsync_group_t* g, InflightBucket* b);
// HTTP engines: pause generation (if the adapter asks) and open the engine-side update, once per
// update (the first bucket, or the finalize of an update that sent none).
wsync_status_t open_update(wsync_group_t* g);

}  // namespace wsync
