// Catch-up (elastic groups, docs/ABI.md "Membership"): a receiver that joins after a version
// committed gets that version from a member that holds it, before its first update. The sender
// only pairs them (a CATCHUP frame to each, ordered before any later update on both control
// connections); the bytes move between the two receivers (receiver_catchup.cpp).
#pragma once

#include <string>

#include "group/group_internal.h"

namespace wsync {

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
// catch-up it was taking is over (its source is free again).
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
