/* cipc_wire.c — encode and decode the two records transport 'cuda_ipc' keeps on the store (the
 * staging record and the post record; layouts in cipc_logic.h). Both are read from the network,
 * so decoding treats them as untrusted: exact lengths, bounded counts, overflow-free sums. */
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

/* ---- the post record ---- */

size_t cipc_post_encode(const cipc_post_t* p, uint8_t* buf, size_t cap) {
  size_t need, i;
  if (p == NULL || buf == NULL || p->count > CIPC_MAX_SLOTS) return 0;
  need = CIPC_POST_HEADER_BYTES + (size_t)p->count * CIPC_POST_ENTRY_BYTES;
  if (cap < need) return 0;
  memset(buf, 0, need);
  put32(buf + 0, CIPC_POST_MAGIC);
  put16(buf + 4, CIPC_WIRE_VERSION);
  put16(buf + 6, (uint16_t)p->count);
  put64(buf + 8, p->session);
  for (i = 0; i < p->count; ++i) {
    uint8_t* e = buf + CIPC_POST_HEADER_BYTES + i * CIPC_POST_ENTRY_BYTES;
    put64(e + 0, p->entries[i].seq);
    put32(e + 8, p->entries[i].slot);
    put64(e + 16, p->entries[i].offset);
    put64(e + 24, p->entries[i].len);
  }
  return need;
}

wsync_status_t cipc_post_decode(const uint8_t* buf, size_t len, const cipc_staging_t* staging, cipc_post_t* out,
                                char* err, size_t errcap) {
  uint32_t magic, count, i, j;
  uint16_t version;
  if (buf == NULL || len < CIPC_POST_HEADER_BYTES) {
    snprintf(err, errcap, "%zu bytes, shorter than the %u-byte header", len, CIPC_POST_HEADER_BYTES);
    return WSYNC_ERR_PROTOCOL;
  }
  magic = get32(buf);
  version = get16(buf + 4);
  count = get16(buf + 6);
  if (magic != CIPC_POST_MAGIC) {
    snprintf(err, errcap, "magic 0x%08x is not a cuda_ipc post record (0x%08x)", magic, CIPC_POST_MAGIC);
    return WSYNC_ERR_PROTOCOL;
  }
  if (version != CIPC_WIRE_VERSION) {
    snprintf(err, errcap, "record version %u, this plugin reads version %u", version, CIPC_WIRE_VERSION);
    return WSYNC_ERR_PROTOCOL;
  }
  if (count > staging->num_slots) {
    snprintf(err, errcap, "%u entries for %u staging slots", count, staging->num_slots);
    return WSYNC_ERR_PROTOCOL;
  }
  if (len != CIPC_POST_HEADER_BYTES + (size_t)count * CIPC_POST_ENTRY_BYTES) {
    snprintf(err, errcap, "%zu bytes for %u entries, expected %zu", len, count,
             CIPC_POST_HEADER_BYTES + (size_t)count * CIPC_POST_ENTRY_BYTES);
    return WSYNC_ERR_PROTOCOL;
  }
  out->session = get64(buf + 8);
  out->count = count;
  if (out->session != staging->session) {
    snprintf(err, errcap, "session %016llx, but the staging record is of session %016llx (a leftover of an "
             "earlier sender?)", (unsigned long long)out->session, (unsigned long long)staging->session);
    return WSYNC_ERR_PROTOCOL;
  }
  for (i = 0; i < count; ++i) {
    const uint8_t* e = buf + CIPC_POST_HEADER_BYTES + (size_t)i * CIPC_POST_ENTRY_BYTES;
    cipc_post_entry_t* d = &out->entries[i];
    d->seq = get64(e);
    d->slot = get32(e + 8);
    d->offset = get64(e + 16);
    d->len = get64(e + 24);
    if (d->seq == 0) {
      snprintf(err, errcap, "entry %u has bucket 0", i);
      return WSYNC_ERR_PROTOCOL;
    }
    if (d->slot >= staging->num_slots) {
      snprintf(err, errcap, "bucket %llu names slot %u of %u", (unsigned long long)d->seq, d->slot,
               staging->num_slots);
      return WSYNC_ERR_PROTOCOL;
    }
    if (d->offset > staging->slots[d->slot].size || d->len > staging->slots[d->slot].size - d->offset) {
      snprintf(err, errcap, "bucket %llu: %llu bytes at offset %llu run past the %llu-byte slot %u",
               (unsigned long long)d->seq, (unsigned long long)d->len, (unsigned long long)d->offset,
               (unsigned long long)staging->slots[d->slot].size, d->slot);
      return WSYNC_ERR_PROTOCOL;
    }
    for (j = 0; j < i; ++j)
      if (out->entries[j].slot == d->slot || out->entries[j].seq == d->seq) {
        snprintf(err, errcap, "entries %u and %u repeat slot %u or bucket %llu", j, i, d->slot,
                 (unsigned long long)d->seq);
        return WSYNC_ERR_PROTOCOL;
      }
  }
  return WSYNC_OK;
}

int cipc_post_find(const cipc_post_t* p, uint64_t seq, cipc_post_entry_t* out) {
  uint32_t i;
  int later = 0;
  for (i = 0; i < p->count; ++i) {
    if (p->entries[i].seq == seq) {
      if (out != NULL) *out = p->entries[i];
      return CIPC_POST_FOUND;
    }
    if (p->entries[i].seq > seq) later = 1;
  }
  /* Buckets are posted in order and a slot is reused only after every receiver copied its
   * bucket: a later bucket without ours means ours was posted without us, or we were dropped.
   * With one slot the record holds only the latest bucket, so the same reasoning holds. */
  return later ? CIPC_POST_PASSED : CIPC_POST_NOT_YET;
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
