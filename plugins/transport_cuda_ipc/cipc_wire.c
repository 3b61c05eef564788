/* cipc_wire.c — encode and decode the records of transport 'cuda_ipc' (layouts in cipc_logic.h):
 * the staging record it keeps on the store, and the bucket and done records the core carries per
 * bucket. All are read from the network, so decoding treats them as untrusted: exact lengths,
 * bounded counts, overflow-free sums. */
#include <stdio.h>
#include <string.h>

#include "cipc_logic.h"

/* ---- little-endian helpers ---- */

static void put16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t* p, uint32_t v) {
  int i;
  for (i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t* p, uint64_t v) {
  int i;
  for (i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t get64(const uint8_t* p) { return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32); }

/* ---- the staging record ---- */

size_t cipc_staging_encode(const cipc_staging_t* s, uint8_t* buf, size_t cap) {
  size_t need, i;
  uint8_t* p;
  if (s == NULL || buf == NULL || s->num_slots == 0 || s->num_slots > CIPC_MAX_SLOTS) return 0;
  need = CIPC_STAGING_HEADER_BYTES + (size_t)s->num_slots * CIPC_STAGING_SLOT_BYTES;
  if (cap < need) return 0;
  memset(buf, 0, need);
  put32(buf + 0, CIPC_STAGING_MAGIC);
  put16(buf + 4, CIPC_WIRE_VERSION);
  memcpy(buf + 8, s->uuid, CIPC_UUID_BYTES);
  put64(buf + 24, s->session);
  put32(buf + 32, s->pid);
  put32(buf + 36, (uint32_t)s->device);
  put32(buf + 40, s->num_slots);
  put32(buf + 44, CIPC_STAGING_SLOT_BYTES);
  for (i = 0; i < s->num_slots; ++i) {
    p = buf + CIPC_STAGING_HEADER_BYTES + i * CIPC_STAGING_SLOT_BYTES;
    put64(p + 0, s->slots[i].size);
    put64(p + 8, s->slots[i].alloc_offset);
    memcpy(p + 16, s->slots[i].mem_handle, CIPC_HANDLE_BYTES);
    memcpy(p + 16 + CIPC_HANDLE_BYTES, s->slots[i].event_handle, CIPC_HANDLE_BYTES);
  }
  return need;
}

wsync_status_t cipc_staging_decode(const uint8_t* buf, size_t len, cipc_staging_t* out, char* err, size_t errcap) {
  uint32_t magic, n, slot_bytes, i;
  uint16_t version;
  if (buf == NULL || len < CIPC_STAGING_HEADER_BYTES) {
    snprintf(err, errcap, "%zu bytes, shorter than the %u-byte header", len, CIPC_STAGING_HEADER_BYTES);
    return WSYNC_ERR_PROTOCOL;
  }
  magic = get32(buf);
  version = get16(buf + 4);
  if (magic != CIPC_STAGING_MAGIC) {
    snprintf(err, errcap, "magic 0x%08x is not a cuda_ipc staging record (0x%08x)", magic, CIPC_STAGING_MAGIC);
    return WSYNC_ERR_PROTOCOL;
  }
  if (version != CIPC_WIRE_VERSION) {
    snprintf(err, errcap, "record version %u, this plugin reads version %u (mixed wsync releases?)", version,
             CIPC_WIRE_VERSION);
    return WSYNC_ERR_PROTOCOL;
  }
  n = get32(buf + 40);
  slot_bytes = get32(buf + 44);
  if (slot_bytes != CIPC_STAGING_SLOT_BYTES) {
    snprintf(err, errcap, "slot records of %u bytes, expected %u", slot_bytes, CIPC_STAGING_SLOT_BYTES);
    return WSYNC_ERR_PROTOCOL;
  }
  if (n == 0 || n > CIPC_MAX_SLOTS) {
    snprintf(err, errcap, "%u staging slots, expected 1..%u", n, CIPC_MAX_SLOTS);
    return WSYNC_ERR_PROTOCOL;
  }
  if (len != CIPC_STAGING_HEADER_BYTES + (size_t)n * CIPC_STAGING_SLOT_BYTES) {
    snprintf(err, errcap, "%zu bytes for %u slots, expected %zu", len, n,
             CIPC_STAGING_HEADER_BYTES + (size_t)n * CIPC_STAGING_SLOT_BYTES);
    return WSYNC_ERR_PROTOCOL;
  }
  memset(out, 0, sizeof *out);
  memcpy(out->uuid, buf + 8, CIPC_UUID_BYTES);
  out->session = get64(buf + 24);
  out->pid = get32(buf + 32);
  out->device = (int32_t)get32(buf + 36);
  out->num_slots = n;
  for (i = 0; i < n; ++i) {
    const uint8_t* p = buf + CIPC_STAGING_HEADER_BYTES + (size_t)i * CIPC_STAGING_SLOT_BYTES;
    cipc_slot_desc_t* d = &out->slots[i];
    d->size = get64(p);
    d->alloc_offset = get64(p + 8);
    memcpy(d->mem_handle, p + 16, CIPC_HANDLE_BYTES);
    memcpy(d->event_handle, p + 16 + CIPC_HANDLE_BYTES, CIPC_HANDLE_BYTES);
    if (d->size == 0 || d->alloc_offset > UINT64_MAX - d->size) {
      snprintf(err, errcap, "slot %u has size %llu at offset %llu", i, (unsigned long long)d->size,
               (unsigned long long)d->alloc_offset);
      return WSYNC_ERR_PROTOCOL;
    }
  }
  return WSYNC_OK;
}

/* ---- the per-bucket records ---- */

/* magic u32, version u16, reserved u16, session u64 */
static void put_head(uint8_t* p, uint32_t magic, uint64_t session) {
  put32(p, magic);
  put16(p + 4, CIPC_WIRE_VERSION);
  put16(p + 6, 0);
  put64(p + 8, session);
}

static wsync_status_t check_head(const uint8_t* buf, size_t len, size_t want, uint32_t magic, const char* what,
                                 uint64_t session, char* err, size_t errcap) {
  if (buf == NULL || len != want) {
    snprintf(err, errcap, "a %s record of %zu bytes, expected %zu", what, len, want);
    return WSYNC_ERR_PROTOCOL;
  }
  if (get32(buf) != magic || get16(buf + 4) != CIPC_WIRE_VERSION) {
    snprintf(err, errcap, "not a version %u cuda_ipc %s record (magic 0x%08x, version %u)", CIPC_WIRE_VERSION, what,
             get32(buf), get16(buf + 4));
    return WSYNC_ERR_PROTOCOL;
  }
  if (get64(buf + 8) != session) {
    snprintf(err, errcap, "a %s record of session %016llx, but this group's is %016llx (a leftover of an earlier "
             "sender?)", what, (unsigned long long)get64(buf + 8), (unsigned long long)session);
    return WSYNC_ERR_PROTOCOL;
  }
  return WSYNC_OK;
}

size_t cipc_bucket_encode(uint64_t session, const cipc_post_entry_t* e, uint8_t* buf, size_t cap) {
  if (e == NULL || buf == NULL || cap < CIPC_BUCKET_BYTES) return 0;
  memset(buf, 0, CIPC_BUCKET_BYTES);
  put_head(buf, CIPC_BUCKET_MAGIC, session);
  put64(buf + 16, e->seq);
  put32(buf + 24, e->slot);
  put64(buf + 32, e->offset);
  put64(buf + 40, e->len);
  return CIPC_BUCKET_BYTES;
}

wsync_status_t cipc_bucket_decode(const uint8_t* buf, size_t len, const cipc_staging_t* staging, uint64_t expect_seq,
                                  cipc_post_entry_t* out, char* err, size_t errcap) {
  wsync_status_t rc = check_head(buf, len, CIPC_BUCKET_BYTES, CIPC_BUCKET_MAGIC, "bucket", staging->session, err, errcap);
  if (rc != WSYNC_OK) return rc;
  out->seq = get64(buf + 16);
  out->slot = get32(buf + 24);
  out->offset = get64(buf + 32);
  out->len = get64(buf + 40);
  if (out->seq != expect_seq) {
    snprintf(err, errcap, "the record describes bucket %llu, but it came with bucket %llu",
             (unsigned long long)out->seq, (unsigned long long)expect_seq);
    return WSYNC_ERR_PROTOCOL;
  }
  if (out->slot >= staging->num_slots) {
    snprintf(err, errcap, "bucket %llu names slot %u of %u", (unsigned long long)out->seq, out->slot, staging->num_slots);
    return WSYNC_ERR_PROTOCOL;
  }
  if (out->offset > staging->slots[out->slot].size || out->len > staging->slots[out->slot].size - out->offset) {
    snprintf(err, errcap, "bucket %llu: %llu bytes at offset %llu run past the %llu-byte slot %u",
             (unsigned long long)out->seq, (unsigned long long)out->len, (unsigned long long)out->offset,
             (unsigned long long)staging->slots[out->slot].size, out->slot);
    return WSYNC_ERR_PROTOCOL;
  }
  return WSYNC_OK;
}

size_t cipc_done_encode(uint64_t session, uint64_t seq, uint8_t* buf, size_t cap) {
  if (buf == NULL || cap < CIPC_DONE_BYTES) return 0;
  put_head(buf, CIPC_DONE_MAGIC, session);
  put64(buf + 16, seq);
  return CIPC_DONE_BYTES;
}

wsync_status_t cipc_done_decode(const uint8_t* buf, size_t len, uint64_t session, uint64_t* seq, char* err,
                                size_t errcap) {
  wsync_status_t rc = check_head(buf, len, CIPC_DONE_BYTES, CIPC_DONE_MAGIC, "done", session, err, errcap);
  if (rc == WSYNC_OK) *seq = get64(buf + 16);
  return rc;
}

wsync_status_t cipc_iov_total(const wsync_iov_t* iov, uint64_t n, uint64_t* total, char* err, size_t errcap) {
  uint64_t i, sum = 0;
  if (iov == NULL && n > 0) {
    snprintf(err, errcap, "%llu regions but no region list", (unsigned long long)n);
    return WSYNC_ERR_INVALID_ARGUMENT;
  }
  for (i = 0; i < n; ++i) {
    if (iov[i].base == NULL && iov[i].len > 0) {
      snprintf(err, errcap, "region %llu is NULL with %llu bytes", (unsigned long long)i,
               (unsigned long long)iov[i].len);
      return WSYNC_ERR_INVALID_ARGUMENT;
    }
    if (iov[i].len > UINT64_MAX - sum) {
      snprintf(err, errcap, "the regions' lengths overflow at region %llu", (unsigned long long)i);
      return WSYNC_ERR_INVALID_ARGUMENT;
    }
    sum += iov[i].len;
  }
  *total = sum;
  return WSYNC_OK;
}
