// Catch-up (elastic groups, docs/ABI.md "Membership"): a receiver that joins after a version
// committed gets that version from a member that holds it, before its first update. The sender
// only pairs them (a CATCHUP frame to each, ordered before any later update on both control
// connections); the bytes move between the two receivers (receiver_catchup.cpp).
#pragma once

#include <functional>
#include <string>

#include "group/group_internal.h"

namespace wsync {

// Many senders, elastic (docs/ABI.md "Catching up with many senders"): sender 0, on the caller's
// thread at an update's first batch, picks for each joiner of `admit` a member to catch it up: a
// member of `ranks` (the update's) that is no joiner, holds committed `version` (`holds`, by rank
// - 1: members_holds) and needs the same boxes (`same_needs`), lowest rank first, one joiner per
// source. Every sender reads the picks from sender 0's store (encode_picks / decode_picks) and, at
// the same batch, tells both of each pair (catchup_arrange_picked).
CatchupPicks catchup_pick(const std::vector<uint64_t>& holds, uint64_t version, uint64_t seq,
                          const std::vector<uint32_t>& admit, const std::vector<uint32_t>& ranks,
                          const std::function<bool(uint32_t, uint32_t)>& same_needs);
// u64 version | u64 seq | u32 n | n x (u32 joiner, u32 source).
std::vector<uint8_t> encode_picks(const CatchupPicks& p);
// Refused (PROTOCOL): a word cut short or longer, a rank outside 1..num_receivers, a joiner not in
// `admit`, a source that is a joiner, or a joiner twice.
wsync_status_t decode_picks(uint32_t num_receivers, const std::vector<uint8_t>& v, const std::vector<uint32_t>& admit,
                            CatchupPicks* out);

// Many senders (pipeline thread, every sender): joiner `joiner` is installed at this batch; when
// `picks` pair it with a source, the source is told to serve it (CATCHUP, role source) and the
// joiner to take it (CATCHUP, role joiner) with this sender's digests of its parts of the version
// (none, and why, when this sender holds no digests of it), both before this batch's MANIFESTs.
// Returns what happened, for the joiner's member event.
std::string catchup_arrange_picked(wsync_group_t* g, Peer* joiner, const CatchupPicks* picks);

// Between updates (pipeline thread), for `joiner`, which is about to become a member: when the
// group committed a version, pick a member to catch it up and send both their CATCHUP. A source
// serves one catch-up at a time: the candidates are the members that confirmed the version (its
// COMMITTED came; one caught up since has not), from which no catch-up failed since, and neither
// join at this
// boundary (`busy_ranks`) nor take part in a catch-up still running (as source or joiner); one on
// the joiner's host first, then the lowest rank. Returns what happened, for the joiner's member
// event ("" when there is nothing to catch up).
std::string catchup_arrange(wsync_group_t* g, Peer* joiner, const std::vector<uint32_t>& busy_ranks);

// Receiver `rank` left the group (`why`): the joiners it may still be catching up are told
// (CATCHUP_CANCEL), so that their catch-up fails at once, naming it, instead of at its budget; a
// catch-up it was taking is over: its source is told the same (CATCHUP_CANCEL, role source), so
// that it stops sending at once, and is free again.
void catchup_member_left(wsync_group_t* g, uint32_t rank, const std::string& why);

// Receiver `rank` answered a bucket of an update: any catch-up it served or took is over.
void catchup_done(wsync_group_t* g, uint32_t rank);

// The receiver's CATCHUP_FAILED (`f`): recorded as its failure (the status and message to remove it
// with), marked as no loss of the update in progress; its source serves no catch-up until its next
// COMMITTED (a hung or cut-off source looks alive between updates).
wsync_status_t catchup_failed(wsync_group_t* g, Peer* p, const Frame& f);

// A joiner in its catch-up whose connection is found closed (a send to it failed) may have said
// CATCHUP_FAILED before it closed: if that frame is still unread it is handled as above and true
// is returned (*st: the status to remove it with, its words the error message).
bool catchup_failed_unread(wsync_group_t* g, Peer* p, wsync_status_t* st);

}  // namespace wsync
