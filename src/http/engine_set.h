// The engine servers of an HTTP group: parsing the option that lists them, the receiver ranks
// each one gets, and running one step on all of them concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wsync.h"

namespace wsync {

struct EngineServer {
  std::string url;          // "http://host:port" (scheme lower-cased, no trailing '/')
  uint32_t gpus = 1;        // receiver ranks this server contributes
  uint32_t rank_offset = 0; // rank of its first GPU; 0 while unassigned or unhealthy
  bool healthy = true;
  std::string why_unhealthy;
  // membership=elastic: the server takes part in updates (every step goes to it). A server that
  // failed, or whose receivers left, is dropped (not live) and brought back between updates.
  bool live = true;
  bool inited = false;  // an INIT was sent to it: a destroy tears its side down
};

constexpr uint32_t kMaxEngineGpus = 4096;    // per server
constexpr size_t kMaxEngineServers = 4096;

// Parse "http://h1:p1=2, http://h2:p2" (entries split by ',', spaces trimmed, "=<gpus>" optional,
// default 1). Only http:// and https:// with a host; an optional port 1..65535 and path prefix;
// no user info, query or fragment; gpus 1..kMaxEngineGpus; no two entries with the same URL.
// `key` names the option in messages. WSYNC_ERR_INVALID_ARGUMENT naming the entry on bad input
// (*out untouched then).
wsync_status_t parse_engine_servers(const std::string& key, const std::string& value,
                                    std::vector<EngineServer>* out);

// The same for the group option "engines" (messages name that key).
wsync_status_t parse_engine_servers(const std::string& value, std::vector<EngineServer>* out);

// Give the healthy servers (`every`: all of them), in order, consecutive rank offsets from 1 (the
// sender is rank 0); the others get 0. Returns world_size = 1 + the GPUs of those servers.
uint32_t assign_rank_offsets(std::vector<EngineServer>* servers, bool every = false);

// fn(0) .. fn(n-1) at the same time, one std::thread each, all joined before it
// returns. fn must not throw (an escaping exception ends the process, as in any std::thread); a
// thread that cannot be started runs its fn on the calling thread after the others started.
void for_each_server_concurrently(size_t n, const std::function<void(size_t)>& fn);

}  // namespace wsync
