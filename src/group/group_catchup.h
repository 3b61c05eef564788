// Catch-up (elastic groups, docs/ABI.md "Membership"): a receiver that joins after a version
// committed gets that version from a member that holds it, before its first update. The sender
// only pairs them (a CATCHUP frame to each, ordered before any later update on both control
// connections); the bytes move between the two receivers (receiver_catchup.cpp).
#pragma once

#include <string>

#include "group/group_internal.h"

namespace wsync {

// Between updates (pipeline thread), for `joiner`, which is about to become a member: when the
// group committed a version, pick a member to catch it up (one on the joiner's host first, then the
// one with the fewest catch-ups to serve at this boundary, then the lowest rank), excluding
// `busy_ranks` (receivers joining at this boundary), and send both their CATCHUP. Returns what
// happened, for the joiner's member event ("" when there is nothing to catch up).
std::string catchup_arrange(wsync_group_t* g, Peer* joiner, const std::vector<uint32_t>& busy_ranks);

// Receiver `rank` left the group (`why`): the joiners it may still be catching up are told
// (CATCHUP_CANCEL), so that their catch-up fails at once, naming it, instead of at its budget.
void catchup_source_left(wsync_group_t* g, uint32_t rank, const std::string& why);

}  // namespace wsync
