// The native manifest: what one bucket holds, sent ahead of the bucket's bytes on wsync's own
// control channel. A versioned, length-prefixed binary record, explicit little-endian, closed by
// an XXH3-64 checksum of everything before it.
//
// Layout (all integers little-endian):
//   header   magic u32 "WSMF" | version u16 | flags u16 | total_len u32 (whole record incl. trailer)
//            | update_id u64 | bucket_index u64 | bucket_bytes u64 | payload_checksum u64
//            | num_entries u32                                                    (48 bytes)
//   entry    name_len u16 | name bytes | dtype u8 | ndim u8 | shape i64 x ndim
//            | bucket_offset u64 | length u64 | tensor_bytes u64 | tensor_offset u64
//            | (flag kManifestFlagBoxes) box offset i64 x ndim | box extent i64 x ndim
//   trailer  XXH3-64 u64 of every preceding byte                                   (8 bytes)
//
// Boxes (many senders, issue 24): with kManifestFlagBoxes every entry carries the box of the
// full tensor (`shape`) it holds bytes of, and tensor_bytes / tensor_offset count in the box's
// own packed bytes (its elements in row-major order of the box, planner/box.h): tensor_bytes is
// the box's byte size, and a box cut across buckets comes in chunks of that packed form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/box.h"
#include "wsync.h"

namespace wsync {

constexpr uint32_t kManifestMagic = 0x464D5357;  // "WSMF" little-endian
constexpr uint16_t kManifestVersion = 1;
// payload_checksum holds XXH3-64 of the bucket's bytes (group option verify_payload).
constexpr uint32_t kManifestFlagPayloadChecksum = 1u << 0;
// Since wsync 0.7, with kManifestFlagPayloadChecksum: payload_checksum is 0 here and the checksum
// comes in a BUCKET_SUM frame once the bytes are moving (the sender hashes while they travel).
constexpr uint32_t kManifestFlagChecksumFollows = 1u << 1;
// Since wsync 0.8 (many senders): every entry carries a box (see the layout above). A receiver
// places them through expand_boxes; a 0.7 receiver refuses the record ("unknown flags 0x0004").
constexpr uint32_t kManifestFlagBoxes = 1u << 2;
// Flags this version knows; a record with any other bit is refused (a flag may change meaning).
constexpr uint32_t kManifestKnownFlags =
    kManifestFlagPayloadChecksum | kManifestFlagChecksumFollows | kManifestFlagBoxes;

constexpr size_t kManifestHeaderBytes = 48;
constexpr size_t kManifestTrailerBytes = 8;
constexpr size_t kManifestMaxNameBytes = 1024;

struct ManifestEntry {
  std::string name;
  int32_t dtype = WSYNC_DTYPE_INVALID;
  int32_t ndim = 0;
  int64_t shape[WSYNC_MAX_NDIM] = {0};  // dims past ndim are 0 after decoding
  uint64_t bucket_offset = 0;           // where this entry's bytes start in the bucket
  uint64_t length = 0;                  // bytes of this entry in the bucket
  uint64_t tensor_bytes = 0;            // the whole tensor's bytes (= length unless split)
  uint64_t tensor_offset = 0;           // where this chunk starts inside the tensor (0 unless split)
  Box box;                              // kManifestFlagBoxes: the box of `shape` this entry's bytes are
                                        // from (tensor_bytes and tensor_offset count in its packed bytes)
};

struct Manifest {
  uint64_t update_id = 0;
  uint64_t bucket_index = 0;
  uint64_t bucket_bytes = 0;  // this bucket's payload size (may exceed the configured size)
  uint32_t flags = 0;         // kManifestFlag*; only the low 16 bits travel
  uint64_t payload_checksum = 0;
  std::vector<ManifestEntry> entries;
};

// Encodes `m`. Precondition (the sender plans and validates first): names of 1..1024 bytes,
// known dtypes, ndim 0..8, flags within kManifestKnownFlags, and a record under 4 GiB. A record
// breaking them is still written, but decode_manifest refuses it.
std::vector<uint8_t> encode_manifest(const Manifest& m);

// Decodes a record received from the wire, treating every byte as hostile; reads nothing outside
// [data, data + len). On success replaces *out; on failure leaves it untouched and returns
// WSYNC_ERR_PROTOCOL (message naming the field and entry index) or WSYNC_ERR_VERSION_MISMATCH
// (another format version), or WSYNC_ERR_INVALID_ARGUMENT for out == NULL.
// Checks: sizes, total_len == len, magic, version, checksum, known flags, entry count, each
// entry's name (1..1024 bytes of valid UTF-8 without NUL or control characters, per
// common/names.h, and unique in the record), dtype, ndim, dims >= 0, shape bytes ==
// tensor_bytes, length and tensor_offset multiples of the dtype size, tensor_offset + length <=
// tensor_bytes, bucket_offset + length <= bucket_bytes, entries in increasing, non-overlapping
// offset order (empty entries may share an offset), no trailing bytes. With kManifestFlagBoxes:
// each box inside its shape, and tensor_bytes the box's bytes instead of the shape's.
wsync_status_t decode_manifest(const uint8_t* data, size_t len, Manifest* out);

// A manifest with boxes as the chunks of whole tensors it amounts to: every entry whose box is
// not its whole tensor becomes one chunk per run of the box its bytes cover (planner/box.h), in
// the same bucket order, with tensor_bytes and tensor_offset counting in the whole tensor; the
// flag is cleared. A receiver then places, checks and completes them as split tensors: bytes
// that overlap are refused, and a tensor is complete when its boxes tile it. WSYNC_ERR_PROTOCOL
// (naming the entry) when the chunks would number more than max_entries. No-op without the flag.
// `frame`, when given, names the box of a tensor this receiver holds (a slice it registered), or
// nullptr for the whole tensor: an entry of such a tensor becomes chunks of the slice (shape: its
// extent; offsets in its packed bytes), and an entry reaching outside it is refused naming both.
constexpr size_t kManifestMaxExpandedEntries = 1u << 20;
using BoxFrame = const Box* (*)(const void* ctx, const std::string& name);
wsync_status_t expand_boxes(Manifest* m, size_t max_entries = kManifestMaxExpandedEntries, BoxFrame frame = nullptr,
                            const void* ctx = nullptr);

}  // namespace wsync
