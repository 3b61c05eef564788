// routes_debug.cpp — test-only routes, NOT part of any engine's API:
//   GET    /debug/tensors   what each local rank holds: {"ranks":[{"rank","local_rank",
//                           "committed_version","groups":[..],"tensors":{name:{"dtype","shape",
//                           "xxh3" (16 hex digits of XXH3-64 of the bytes),"nbytes"}}}]}
//   GET    /debug/requests  every non-debug request received, in arrival order:
//                           [{"method","path","query","body","status"}]
//   DELETE /debug/requests  forget them
#include "replies.h"
#include "router.h"

namespace refeng {

void add_debug_routes(Router& r, Shared& s) {
  r.add("GET", "/debug/tensors", [&s](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(s.engine.debug_tensors_json(), "application/json");
  });
  r.add("GET", "/debug/requests", [&r](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(r.requests_json(), "application/json");
  });
  r.add("DELETE", "/debug/requests", [&r](const httplib::Request&, httplib::Response& res) {
    r.clear_requests();
    res.status = 200;
    res.set_content("{}", "application/json");
  });
}

}  // namespace refeng
