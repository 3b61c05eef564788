/* cipc_book.c — the sender's view of its staging slots (no CUDA): which slot a send_post range
 * lies in, which bucket each slot holds, and which receivers must still copy it out before the
 * core may write the slot again. Receivers report progress as done/<rank> = the last bucket
 * they copied; done values only grow, so an old or repeated one changes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cipc_logic.h"

int cipc_find_slot(const cipc_range_t* slots, uint32_t n, uintptr_t ptr, uint64_t len, uint32_t* slot,
                   uint64_t* offset) {
  uint32_t i;
  for (i = 0; i < n; ++i) {
    const uint64_t off = (uint64_t)(ptr - slots[i].base);
    if (ptr < slots[i].base || off > slots[i].size) continue;
    if (off == slots[i].size && len > 0) continue; /* starts one past the end: not in this slot */
    *slot = i;
    *offset = off;
    return len <= slots[i].size - off ? CIPC_SLOT_INSIDE : CIPC_SLOT_STRADDLES;
  }
  return CIPC_SLOT_OUTSIDE;
}

int cipc_ranges_overlap(const cipc_range_t* slots, uint32_t n, uint32_t* a, uint32_t* b) {
  uint32_t i, j;
  for (i = 0; i < n; ++i)
    for (j = i + 1; j < n; ++j) {
      const uintptr_t lo = slots[i].base > slots[j].base ? slots[i].base : slots[j].base;
      const uint64_t end_i = (uint64_t)slots[i].base + slots[i].size;
      const uint64_t end_j = (uint64_t)slots[j].base + slots[j].size;
      if ((uint64_t)lo < (end_i < end_j ? end_i : end_j)) {
        *a = i;
        *b = j;
        return 1;
      }
    }
  return 0;
}

int cipc_book_init(cipc_book_t* b, uint32_t world_size, uint32_t num_slots) {
  memset(b, 0, sizeof *b);
  b->world_size = world_size;
  b->num_slots = num_slots;
  b->done = (uint64_t*)calloc(world_size ? world_size : 1, sizeof *b->done);
  b->forgotten = (uint8_t*)calloc(world_size ? world_size : 1, 1);
  b->slot = (cipc_post_entry_t*)calloc(num_slots ? num_slots : 1, sizeof *b->slot);
  b->pending = (uint8_t*)calloc((size_t)(num_slots ? num_slots : 1) * (world_size ? world_size : 1), 1);
  if (b->done == NULL || b->forgotten == NULL || b->slot == NULL || b->pending == NULL) {
    cipc_book_free(b);
    return -1;
  }
  return 0;
}

void cipc_book_free(cipc_book_t* b) {
  free(b->done);
  free(b->forgotten);
  free(b->slot);
  free(b->pending);
  memset(b, 0, sizeof *b);
}

static uint8_t* pend(const cipc_book_t* b, uint32_t slot) { return b->pending + (size_t)slot * b->world_size; }

wsync_status_t cipc_book_check_post(const cipc_book_t* b, uint32_t slot, uint64_t seq, const uint32_t* ranks,
                                    uint32_t num_ranks, char* err, size_t errcap) {
  uint32_t i, j, first;
  if (slot >= b->num_slots) {
    snprintf(err, errcap, "slot %u does not exist (%u registered)", slot, b->num_slots);
    return WSYNC_ERR_INVALID_ARGUMENT;
  }
  if (seq <= b->last_posted) {
    snprintf(err, errcap, "bucket %llu posted after bucket %llu: buckets must be posted in increasing order",
             (unsigned long long)seq, (unsigned long long)b->last_posted);
    return WSYNC_ERR_INVALID_ARGUMENT;
  }
  if (cipc_book_pending(b, slot, &first) > 0) {
    snprintf(err, errcap, "staging slot %u still holds bucket %llu, which rank %u has not copied yet (send_wait "
             "must report it first)", slot, (unsigned long long)b->slot[slot].seq, first);
    return WSYNC_ERR_INVALID_STATE;
  }
  if (ranks == NULL && num_ranks > 0) {
    snprintf(err, errcap, "%u ranks but no rank list", num_ranks);
    return WSYNC_ERR_INVALID_ARGUMENT;
  }
  for (i = 0; i < num_ranks; ++i) {
    if (ranks[i] == 0 || ranks[i] >= b->world_size) {
      snprintf(err, errcap, "rank %u is not a receiver (1..%u)", ranks[i], b->world_size - 1);
      return WSYNC_ERR_INVALID_ARGUMENT;
    }
    for (j = 0; j < i; ++j)
      if (ranks[j] == ranks[i]) {
        snprintf(err, errcap, "rank %u is listed twice", ranks[i]);
        return WSYNC_ERR_INVALID_ARGUMENT;
      }
    if (b->forgotten[ranks[i]]) {
      snprintf(err, errcap, "rank %u was forgotten (forget_peer) and cannot be sent to again", ranks[i]);
      return WSYNC_ERR_INVALID_STATE;
    }
  }
  return WSYNC_OK;
}

wsync_status_t cipc_book_post(cipc_book_t* b, uint32_t slot, uint64_t seq, uint64_t offset, uint64_t len,
                              const uint32_t* ranks, uint32_t num_ranks, char* err, size_t errcap) {
  uint32_t i;
  const wsync_status_t rc = cipc_book_check_post(b, slot, seq, ranks, num_ranks, err, errcap);
  if (rc != WSYNC_OK) return rc;
  b->last_posted = seq;
  b->slot[slot].seq = seq;
  b->slot[slot].slot = slot;
  b->slot[slot].offset = offset;
  b->slot[slot].len = len;
  memset(pend(b, slot), 0, b->world_size);
  /* A rank that already reported this bucket copied (it copied from the described record) owes nothing. */
  for (i = 0; i < num_ranks; ++i) pend(b, slot)[ranks[i]] = b->done[ranks[i]] < seq;
  return WSYNC_OK;
}

void cipc_book_describe(cipc_book_t* b, uint64_t seq) {
  if (seq > b->last_described) b->last_described = seq;
}

wsync_status_t cipc_book_done(cipc_book_t* b, uint32_t rank, uint64_t value, char* err, size_t errcap) {
  uint32_t s;
  if (rank == 0 || rank >= b->world_size) {
    snprintf(err, errcap, "rank %u is not a receiver (1..%u)", rank, b->world_size - 1);
    return WSYNC_ERR_INVALID_ARGUMENT;
  }
  if (b->forgotten[rank]) return WSYNC_OK; /* gone: whatever it says no longer matters */
  if (value > b->last_posted && value > b->last_described) {
    snprintf(err, errcap, "rank %u reports bucket %llu copied, but the last bucket described or posted is %llu",
             rank, (unsigned long long)value,
             (unsigned long long)(b->last_posted > b->last_described ? b->last_posted : b->last_described));
    return WSYNC_ERR_PROTOCOL;
  }
  if (value <= b->done[rank]) return WSYNC_OK; /* stale or repeated */
  b->done[rank] = value;
  for (s = 0; s < b->num_slots; ++s)
    if (b->slot[s].seq != 0 && b->slot[s].seq <= value) pend(b, s)[rank] = 0;
  return WSYNC_OK;
}

int cipc_book_slot_of(const cipc_book_t* b, uint64_t seq) {
  uint32_t s;
  if (seq == 0) return -1;
  for (s = 0; s < b->num_slots; ++s)
    if (b->slot[s].seq == seq) return (int)s;
  return -1;
}

uint32_t cipc_book_pending(const cipc_book_t* b, uint32_t slot, uint32_t* first_rank) {
  uint32_t r, n = 0;
  if (slot >= b->num_slots) return 0;
  for (r = 1; r < b->world_size; ++r)
    if (pend(b, slot)[r]) {
      if (n == 0 && first_rank != NULL) *first_rank = r;
      ++n;
    }
  return n;
}

int cipc_book_is_pending(const cipc_book_t* b, uint32_t slot, uint32_t rank) {
  return slot < b->num_slots && rank < b->world_size && pend(b, slot)[rank] != 0;
}

void cipc_book_forget(cipc_book_t* b, uint32_t rank) {
  uint32_t s;
  if (rank >= b->world_size) return;
  b->forgotten[rank] = 1;
  for (s = 0; s < b->num_slots; ++s) pend(b, s)[rank] = 0;
}
