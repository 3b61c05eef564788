// The records every member of a many-sender group publishes before an update (through the
// group's store): a sender's record (what it owns, ownership_plan.h's SenderRecord) and a
// receiver's needs (Need). A versioned, length-prefixed binary record, explicit little-endian,
// closed by an XXH3-64 checksum of everything before it, like the native manifest.
//
// Layout (all integers little-endian):
//   header   magic u32 "WSOR" | version u16 | kind u16 (1 sender, 2 needs) | total_len u32
//            | rank u32 | update_id u64 | count u32                                    (28 bytes)
//   sender entry  name_len u16 | name | dtype u8 | ndim u8 | flags u8 (bit 0 replica)
//                 | shape i64 x ndim | offset i64 x ndim | extent i64 x ndim
//   needs entry   name_len u16 | name | ndim u8 | flags u8 (bit 0 full)
//                 | (not full) offset i64 x ndim | extent i64 x ndim
//   trailer  XXH3-64 u64 of every preceding byte                                       (8 bytes)
//
// Decoding treats every byte as hostile: lengths, counts, names (the one name rule of
// common/names.h), dtypes, ndim, negative dims and unknown flags are refused with
// WSYNC_ERR_PROTOCOL naming the field and the entry; whether boxes fit their tensors and agree
// across senders is the plan's check (ownership_plan.h), which runs on the decoded records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "planner/ownership_plan.h"
#include "wsync.h"

namespace wsync {

constexpr uint32_t kOwnershipRecordMagic = 0x524F5357;  // "WSOR" little-endian
constexpr uint16_t kOwnershipRecordVersion = 1;
// At most this many tensors in one record (a model of a million tensors is far past any today).
constexpr uint32_t kOwnershipRecordMaxTensors = 1u << 20;

std::vector<uint8_t> encode_sender_record(const SenderRecord& r, uint64_t update_id);
std::vector<uint8_t> encode_needs(uint32_t rank, uint64_t update_id, const std::vector<Need>& needs);
// Where sender k lists its store's address in sender 0's store (receivers join it there).
inline std::string sender_key(uint32_t k) { return "wsync/senders/" + std::to_string(k); }
// Where receiver `rank` of `group` keeps its needs in sender 0's store (every sender reads them).
inline std::string needs_key(const std::string& group, uint32_t rank) {
  return "wsync/" + group + "/needs/" + std::to_string(rank);
}

// On success replace *out (and *update_id); on failure leave them untouched and return
// WSYNC_ERR_PROTOCOL (WSYNC_ERR_VERSION_MISMATCH for another format version).
wsync_status_t decode_sender_record(const uint8_t* data, size_t len, SenderRecord* out, uint64_t* update_id);
wsync_status_t decode_needs(const uint8_t* data, size_t len, uint32_t* rank, uint64_t* update_id,
                            std::vector<Need>* out);

}  // namespace wsync
