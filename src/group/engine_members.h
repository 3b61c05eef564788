// HTTP engines in an elastic group (membership=elastic with engine_receivers=wsync): every listed
// server keeps the ranks rank_offset..rank_offset+gpus-1 for the group's life. A server is live
// (every step goes to it) or dropped:
//
//   dropped   a step to it failed (it stopped answering, refused, timed out), or one of its
//             receivers left the group: its other receivers are removed with it, named; the
//             update goes on with the others (commit_quorum decides its commit). An update open
//             on it is abandoned (best effort, in the background), and resumed when
//             engine_resume_on_failure=1, as a failure does in a fixed group.
//   back      between updates, every engine_recheck_ms: HEALTH; once it answers PROBE, RESET and
//             INIT (its ranks, the group's world size); its receivers join like any (catch-up from
//             a peer, else the next update); live once INIT answered and all its ranks are members.
//
// A server down at init is dropped from the start. Pipeline thread only (init before it starts).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "group/group.h"

namespace wsync {

// A server's way back (one per server, in g->engines.returns.by_server).
struct EngineRejoin {
  enum Stage { kDown, kLeaving, kHealth, kProbe, kReset, kInit };
  Stage stage = kDown;
  std::unique_ptr<EngineCalls> calls;  // the requests of `stage`, in flight
  int64_t next_check_ms = 0;           // kDown: when to ask HEALTH again
  bool told_down = false;              // its failed health checks were logged once
  uint64_t failed_returns = 0;         // ways back that failed in a row at PROBE or INIT (a server
                                       // that answers its health check but nothing else): logged
                                       // at the first, second, fourth, ... of them
  bool resume_next = false;            // kLeaving: RESUME follows the ABANDON
  int64_t init_wait_until = 0;         // kInit, its receivers joined: how long its answer is waited for
};

// Elastic HTTP engines: a step to `server` failed with `st`/`why`. The server is dropped and its
// receivers removed (from `flight`'s waits too). WSYNC_OK to go on; a failure when no receiver is left.
wsync_status_t engine_server_failed(wsync_group_t* g, Flight* flight, size_t server, wsync_status_t st,
                                    const std::string& why);
// Receiver `rank` was removed (member_failed): its server is dropped, its other receivers removed.
void engines_rank_left(wsync_group_t* g, Flight* flight, uint32_t rank, const std::string& why);
// " (engine server <url>)" for a rank of an elastic HTTP group, unless `text` names that server;
// "" otherwise (member events name the server).
std::string engines_rank_note(const wsync_group_t* g, uint32_t rank, const std::string& text);
// Init: the servers that failed their health check start dropped.
void engines_start_elastic(wsync_group_t* g);
// Between updates, before receivers are admitted: each dropped server's way back one step on
// (requests run in the background; this never waits on them).
void engines_readmit(wsync_group_t* g);
// After receivers were admitted: a server whose INIT is in flight and whose ranks all joined waits
// for its INIT's answer (bounded) and is live then.
void engines_after_admit(wsync_group_t* g);
// Right before an update's first batch: a server on its way back whose receivers are members but
// whose INIT has not answered is waited for (bounded), else its receivers leave: every member's
// engine gets every step of the update.
void engines_before_update(wsync_group_t* g);
// Teardown: stop every way back in flight.
void engines_readmit_stop(wsync_group_t* g);

}  // namespace wsync
