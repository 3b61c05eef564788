// One bucket on its way through the pipeline thread (group_pipeline.cpp drives these in order,
// up to `window` of them on the wire at once: the flight):
//
//   bucket_prepare   its bytes are made ready: the caller's memory, or packed into a staging slot
//   bucket_send      MANIFEST (with the transport's blob) -> every READY -> send_post of each piece
//                    -> (a checksum that follows) BUCKET_SUM; it joins the flight
//   bucket_complete  the oldest bucket of the flight: the transport's send of every piece finished
//                    and every receiver's ACK came: delivered
//
// Replies are taken for the whole flight whenever the thread waits: a receiver answers READY for
// a bucket while it still lands the one before, and ACKs in order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/pieces.h"
#include "group/group.h"
#include "group/group_engines.h"

namespace wsync {

struct InflightBucket {
  Batch* batch = nullptr;
  size_t index = 0;              // in batch->plan
  size_t slot = 0;               // the staging slot it may pack into
  const uint8_t* data = nullptr;  // where its bytes are (staging, or the caller's tensor)
  bool from_caller = false;      // data is the caller's tensor (no copy)
  bool on_device = false;        // data is CUDA memory on the group's device
  uint64_t checksum = 0;         // verify_payload
  bool sum_follows = false;      // verify_payload, bytes sent from the caller's memory: hashed while they move
  bool sum_taken = false;        // ... and that hash is done
  bool released = false;         // it no longer reads the caller's memory: packed into host staging,
                                 // or (from_caller) every piece sent and hashed, or acknowledged
  uint64_t seq = 0;              // 0 until bucket_send gives it one; piece i moves under seq + i
  uint64_t number = 0;           // its index in the update (the manifest's bucket_index)
  std::vector<Piece> pieces;
  std::vector<uint64_t> unsent;  // pieces posted whose send the transport has not finished
  size_t next_piece = 0;         // pieces posted so far (at most kPiecesOnTheWire unsent at once)
  bool posted = false;           // send_post was called for some piece (the caller's bytes may be read)
  bool moving = false;           // every READY came and its pieces are being posted: from here its
                                 // receivers owe progress on its bytes (before, they wait on the sender)
  BucketDelivery delivery;       // who must hold its bytes, and whom the sender posts to (the plan's)
  std::vector<Peer*> want_ready, want_ack;  // receivers whose READY / ACK has not come
  int64_t deadline = 0;          // for what is awaited now (READY, then the ACKs and the send)
  std::string what;              // "bucket 3 (2 of 5 in batch 7) of update 1", for messages
  EngineCalls update_calls;      // HTTP engines: this bucket's UPDATE requests
};

// Bucket `b` no longer reads the caller's memory (once; its batch counts it: batch_bucket_released).
void bucket_release(wsync_group_t* g, InflightBucket* b);
// The staging slots (group_stage.cpp). Host: one per staging bucket, each grown on first use.
// Device: `count` slots of `bytes` each on CUDA device `device` (*held: the bytes allocated).
void staging_open_host(wsync_group_t* g);
wsync_status_t staging_open_device(wsync_group_t* g, size_t count, uint64_t bytes, int device, uint64_t* held);
void staging_close(wsync_group_t* g);
// The staging slot of the next bucket to go out: they take turns.
size_t staging_next_slot(wsync_group_t* g);
// `progress` is called between pieces of packing, so the flight keeps moving.
wsync_status_t bucket_prepare(wsync_group_t* g, InflightBucket* b, const std::function<wsync_status_t()>& progress);
// The newest bucket of the flight (pushed by the caller, so a failure finds it there).
wsync_status_t bucket_send(wsync_group_t* g, Flight* flight);
// The oldest bucket of the flight, once every receiver acknowledged it (*done); or earlier, without
// it (*done false), as soon as `give_way()` says the caller has more to send.
wsync_status_t bucket_complete(wsync_group_t* g, Flight* flight, const std::function<bool()>& give_way, bool* done);
// One look, without waiting: the receivers' replies and the transport's sends, for the flight.
wsync_status_t flight_progress(wsync_group_t* g, Flight* flight);
// The update was abandoned (elastic, many senders: another sender aborted it) while buckets of it
// were on the wire here: the sends posted so far finish (each went to receivers that said READY,
// whose receives stay posted after they let go of the update), each within its batch's timeout, and
// no more are posted; then nothing reads the caller's memory or staging for them. A send that fails
// or does not finish returns its failure (the caller breaks the group, as it did before).
wsync_status_t flight_drain_sends(wsync_group_t* g, Flight* flight);

}  // namespace wsync
