/* cipc_logic.h — the CUDA-free logic of transport 'cuda_ipc', unit-tested without a GPU:
 * store key names, GPU UUIDs, options (cipc_names.c), the two records it publishes on the
 * store (cipc_wire.c), and the sender's slot lookup and buffer-reuse bookkeeping (cipc_book.c).
 * Nothing here includes a CUDA header: CUDA IPC handles are opaque 64-byte arrays.
 *
 * Protocol on the group's store (keys are user keys; every integer is little-endian):
 *
 *   wsync/<group>/cuda_ipc/staging   rank 0, once per group at connect: the staging record
 *       u32 magic 'WCIS'  u16 version (1)  u16 reserved (0)
 *       u8[16] GPU UUID   u64 session (random per connect)  u32 sender pid  i32 sender ordinal
 *       u32 num_slots (1..CIPC_MAX_SLOTS)  u32 slot record bytes (144)
 *       num_slots x { u64 size  u64 offset of the slot in its cudaMalloc allocation
 *                     u8[64] cudaIpcMemHandle_t of that allocation
 *                     u8[64] cudaIpcEventHandle_t of the slot's interprocess event }
 *   wsync/<group>/cuda_ipc/ready/<r>  rank r >= 1 after opening every handle: the session as 16
 *       lowercase hex digits (a value from another session does not count)
 * Both are written once per group, at connect.
 *
 * Per bucket, nothing touches the store (plugin ABI 1.2): the core's control channel carries two
 * small records, the transport's side-channel blobs (describe_send / describe_recv / peer_blob):
 *
 *   bucket record, with the MANIFEST (rank 0 -> every receiver): where bucket `seq` lies
 *       u32 magic 'WCIB'  u16 version (1)  u16 reserved (0)  u64 session  u64 seq
 *       u32 slot  u32 reserved (0)  u64 offset in the slot  u64 len                     (48 bytes)
 *   done record, with the ACK (receiver -> rank 0): its copy of bucket `seq` completed, so the
 *       slot may be reused once every receiver sent one
 *       u32 magic 'WCID'  u16 version (1)  u16 reserved (0)  u64 session  u64 seq       (24 bytes)
 */
#ifndef WSYNC_CIPC_LOGIC_H_
#define WSYNC_CIPC_LOGIC_H_

#include <stddef.h>
#include <stdint.h>

#include "wsync_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CIPC_NAME "cuda_ipc"
#define CIPC_UUID_BYTES 16
#define CIPC_UUID_STR_LEN 40 /* "GPU-" + 36; buffers need one more for the NUL */
#define CIPC_HANDLE_BYTES 64 /* sizeof(cudaIpcMemHandle_t) == sizeof(cudaIpcEventHandle_t) */
#define CIPC_MAX_SLOTS 64u
#define CIPC_WIRE_VERSION 1u
#define CIPC_STAGING_MAGIC 0x53494357u /* "WCIS" */
#define CIPC_BUCKET_MAGIC 0x42494357u  /* "WCIB" */
#define CIPC_DONE_MAGIC 0x44494357u    /* "WCID" */
#define CIPC_STAGING_HEADER_BYTES 48u
#define CIPC_STAGING_SLOT_BYTES 144u
#define CIPC_STAGING_MAX_BYTES (CIPC_STAGING_HEADER_BYTES + CIPC_MAX_SLOTS * CIPC_STAGING_SLOT_BYTES)
#define CIPC_BUCKET_BYTES 48u
#define CIPC_DONE_BYTES 24u
#define CIPC_KEY_MAX 512

/* ---- cipc_names.c: keys, UUIDs, numbers, options ---------------------------------------- */

/* "wsync/<group>/cuda_ipc/<leaf>" or, for rank >= 0, ".../<leaf>/<rank>". 0, or -1 when it
 * does not fit in cap bytes. */
int cipc_key(char* buf, size_t cap, const char* group, const char* leaf, int64_t rank);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lowercase hex, as nvidia-smi -L prints it). */
void cipc_uuid_format(const uint8_t uuid[CIPC_UUID_BYTES], char out[CIPC_UUID_STR_LEN + 1]);
/* Index of the first entry of `list` (n UUIDs) equal to `want`, or -1. */
int cipc_uuid_find(const uint8_t want[CIPC_UUID_BYTES], const uint8_t (*list)[CIPC_UUID_BYTES], int n);

/* Strict unsigned decimal (1..20 digits, no sign, no space, no overflow) of len bytes. 0 or -1. */
int cipc_parse_u64(const char* s, size_t len, uint64_t* out);
/* The session as 16 lowercase hex digits (out: 17 bytes). */
void cipc_session_hex(uint64_t session, char out[17]);

typedef struct cipc_options {
  uint32_t poll_us; /* "poll_us": pause between two store polls, microseconds (default 100) */
} cipc_options_t;

/* Parse the transport.* options. WSYNC_ERR_INVALID_ARGUMENT with a message in err naming the
 * key for an unknown key or a bad value. */
wsync_status_t cipc_parse_options(const wsync_option_t* options, uint64_t num_options, cipc_options_t* out,
                                  char* err, size_t errcap);

/* ---- cipc_wire.c: the staging record and the per-bucket records ---------------------------- */

typedef struct cipc_slot_desc {
  uint64_t size;         /* bytes the core may send from this slot */
  uint64_t alloc_offset; /* where the slot starts in the allocation mem_handle maps */
  uint8_t mem_handle[CIPC_HANDLE_BYTES];
  uint8_t event_handle[CIPC_HANDLE_BYTES];
} cipc_slot_desc_t;

typedef struct cipc_staging {
  uint8_t uuid[CIPC_UUID_BYTES];
  uint64_t session;
  uint32_t pid;
  int32_t device; /* the sender's CUDA ordinal, in the sender's process (for messages) */
  uint32_t num_slots;
  cipc_slot_desc_t slots[CIPC_MAX_SLOTS];
} cipc_staging_t;

/* Encode into buf (cap >= CIPC_STAGING_MAX_BYTES is always enough); the length, or 0 when
 * s is invalid (no slot, too many) or cap is too small. */
size_t cipc_staging_encode(const cipc_staging_t* s, uint8_t* buf, size_t cap);
/* Decode an untrusted record: WSYNC_ERR_PROTOCOL with the reason in err for a wrong magic,
 * version or length, a slot count of 0 or over CIPC_MAX_SLOTS, an empty slot, an overflow. */
wsync_status_t cipc_staging_decode(const uint8_t* buf, size_t len, cipc_staging_t* out, char* err, size_t errcap);

/* A bucket in a slot: what the sender's book keeps per slot, and what the bucket record carries. */
typedef struct cipc_post_entry {
  uint64_t seq;
  uint32_t slot;
  uint64_t offset;
  uint64_t len;
} cipc_post_entry_t;

/* The bucket record; the length (CIPC_BUCKET_BYTES), or 0 when cap is too small. */
size_t cipc_bucket_encode(uint64_t session, const cipc_post_entry_t* e, uint8_t* buf, size_t cap);
/* Decode an untrusted bucket record and check it against the staging it refers to: the exact
 * length, magic and version, the session, seq == expect_seq, the slot index, offset + len inside
 * the slot. WSYNC_ERR_PROTOCOL with the reason in err otherwise. */
wsync_status_t cipc_bucket_decode(const uint8_t* buf, size_t len, const cipc_staging_t* staging, uint64_t expect_seq,
                                  cipc_post_entry_t* out, char* err, size_t errcap);
/* The done record; the length (CIPC_DONE_BYTES), or 0 when cap is too small. */
size_t cipc_done_encode(uint64_t session, uint64_t seq, uint8_t* buf, size_t cap);
/* Decode an untrusted done record of `session`: *seq gets the bucket it reports copied. */
wsync_status_t cipc_done_decode(const uint8_t* buf, size_t len, uint64_t session, uint64_t* seq, char* err,
                                size_t errcap);

/* Sum of the regions' lengths into *total. WSYNC_ERR_INVALID_ARGUMENT (err says which region)
 * for a NULL region with a length, or a sum that overflows. */
wsync_status_t cipc_iov_total(const wsync_iov_t* iov, uint64_t n, uint64_t* total, char* err, size_t errcap);

/* ---- cipc_book.c: slots and their reuse -------------------------------------------------- */

typedef struct cipc_range {
  uintptr_t base;
  uint64_t size;
} cipc_range_t;

#define CIPC_SLOT_INSIDE 0
#define CIPC_SLOT_STRADDLES 1 /* starts in a slot and runs past its end */
#define CIPC_SLOT_OUTSIDE 2
/* Which slot [ptr, ptr+len) lies in (*slot, *offset set for INSIDE and STRADDLES). */
int cipc_find_slot(const cipc_range_t* slots, uint32_t n, uintptr_t ptr, uint64_t len, uint32_t* slot,
                   uint64_t* offset);
/* 1 (and *a < *b set) when two of the ranges overlap, else 0. */
int cipc_ranges_overlap(const cipc_range_t* slots, uint32_t n, uint32_t* a, uint32_t* b);

/* The sender's bookkeeping: which bucket each slot holds and which receivers must still copy
 * it out. A slot may be reused once every rank it was posted to (and not forgotten since)
 * reported done >= its seq. */
typedef struct cipc_book {
  uint32_t world_size;
  uint32_t num_slots;
  uint64_t last_posted; /* highest seq posted, 0 = none */
  uint64_t last_described; /* highest seq described (its record sent): receivers may copy it before its post */
  uint64_t* done;       /* [world_size]: highest seq each rank reported done */
  uint8_t* forgotten;   /* [world_size] */
  cipc_post_entry_t* slot; /* [num_slots]: the slot's latest bucket (seq 0 = never used) */
  uint8_t* pending;     /* [num_slots * world_size]: 1 = rank must still copy slot's bucket */
} cipc_book_t;

/* 0, or -1 when out of memory. */
int cipc_book_init(cipc_book_t* b, uint32_t world_size, uint32_t num_slots);
void cipc_book_free(cipc_book_t* b);
/* Would cipc_book_post accept this? (Checked before the slot's event is recorded again.) */
wsync_status_t cipc_book_check_post(const cipc_book_t* b, uint32_t slot, uint64_t seq, const uint32_t* ranks,
                                    uint32_t num_ranks, char* err, size_t errcap);
/* Record bucket seq in slot for ranks (all or nothing). INVALID_ARGUMENT: bad slot, seq not
 * above the last one, rank 0, outside the world or twice; INVALID_STATE: the slot still holds
 * a bucket some rank has not copied, or a rank was forgotten. */
wsync_status_t cipc_book_post(cipc_book_t* b, uint32_t slot, uint64_t seq, uint64_t offset, uint64_t len,
                              const uint32_t* ranks, uint32_t num_ranks, char* err, size_t errcap);
/* Bucket seq's record went out (describe_send): a receiver may copy it, and say so, before the
 * core's send_post for it (the core reads replies while the bucket's MANIFEST is answered). */
void cipc_book_describe(cipc_book_t* b, uint64_t seq);
/* Apply rank's done value: stale or repeated values change nothing; a value above the last seq
 * posted or described is WSYNC_ERR_PROTOCOL (a leftover of another session, or a confused
 * receiver). */
wsync_status_t cipc_book_done(cipc_book_t* b, uint32_t rank, uint64_t value, char* err, size_t errcap);
/* The slot holding bucket seq, or -1 (never posted, or the slot moved on). */
int cipc_book_slot_of(const cipc_book_t* b, uint64_t seq);
/* How many ranks still have to copy out of slot; *first_rank (if not NULL) gets the lowest. */
uint32_t cipc_book_pending(const cipc_book_t* b, uint32_t slot, uint32_t* first_rank);
/* 1 when rank must still copy slot's bucket. */
int cipc_book_is_pending(const cipc_book_t* b, uint32_t slot, uint32_t rank);
/* The rank is gone: it is removed from every pending set and never waited for again. */
void cipc_book_forget(cipc_book_t* b, uint32_t rank);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WSYNC_CIPC_LOGIC_H_ */
