// The exported wsync_group_* functions: argument checks, then the work in group_*.cpp, every one
// behind api_call (no C++ exception crosses into C).
#include <cstring>
#include <new>

#include <algorithm>

#include "common/api_guard.h"
#include "group/group_declare.h"
#include "group/group_internal.h"
#include "group/group_mailbox.h"
#include "group/group_members.h"

using namespace wsync;

extern "C" {

WSYNC_API wsync_status_t wsync_group_init(const wsync_group_config_t* config, wsync_group_t** out) {
  return api_call("wsync_group_init", [&] {
    return create_object(
        "wsync_group_init", "a group", out, [&](wsync_group_t* g) { return group_init(config, g); },
        [](wsync_group_t* g) {
          group_teardown(g);
          delete g;
        });
  });
}

WSYNC_API const char* wsync_group_store_addr(const wsync_group_t* group) {
  return group ? group->rdv.store_addr.c_str() : "";
}

WSYNC_API wsync_status_t wsync_group_send_batch(wsync_group_t* group, const wsync_tensor_t* tensors,
                                                uint64_t num_tensors, int64_t timeout_ms) {
  return api_call("wsync_group_send_batch", [&] {
    if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
    return group_send_batch(group, tensors, num_tensors, timeout_ms);
  });
}

WSYNC_API wsync_status_t wsync_group_send_start(wsync_group_t* group, const wsync_tensor_t* tensors,
                                                uint64_t num_tensors, int64_t timeout_ms, uint64_t* ticket) {
  return api_call("wsync_group_send_start", [&] {
    if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
    return group_send_start(group, tensors, num_tensors, timeout_ms, ticket);
  });
}

WSYNC_API wsync_status_t wsync_group_send_wait(wsync_group_t* group, uint64_t ticket, int64_t timeout_ms) {
  return api_call("wsync_group_send_wait", [&] {
    if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
    return group_send_wait(group, ticket, timeout_ms);
  });
}

WSYNC_API wsync_status_t wsync_group_declare_update(wsync_group_t* group, const wsync_tensor_t* tensors,
                                                    uint64_t num_tensors) {
  return api_call("wsync_group_declare_update", [&] {
    if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
    return group_declare_update(group, tensors, num_tensors);
  });
}

WSYNC_API wsync_status_t wsync_group_finalize(wsync_group_t* group, uint64_t version, int64_t timeout_ms) {
  return api_call("wsync_group_finalize", [&] {
    if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
    return group_finalize(group, version, timeout_ms);
  });
}

WSYNC_API wsync_status_t wsync_group_set_cuda_stream(wsync_group_t* group, void* stream) {
  return api_call("wsync_group_set_cuda_stream", [&] {
    if (group == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group is NULL");
    group_set_cuda_stream(group, stream);
    return WSYNC_OK;
  });
}

WSYNC_API void wsync_group_abort(wsync_group_t* group) {
  if (group == nullptr) return;
  guard_void("wsync_group_abort", [&] {
    pipeline_abort(group);
  });
}

WSYNC_API wsync_status_t wsync_group_get_stats(const wsync_group_t* group, wsync_group_stats_t* stats) {
  return api_call("wsync_group_get_stats", [&] {
    if (group == nullptr || stats == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group or stats is NULL");
    const uint32_t size = stats->struct_size;
    wsync_status_t st = check_out_struct(size, "stats", "WSYNC_GROUP_STATS_INIT");
    if (st != WSYNC_OK) return st;
    const wsync_group_t* g = group;
    wsync_group_stats_t s = mailbox_stats(g);
    members_counts(g, &s.members, &s.members_left);
    s.staging_bytes = g->staging.host_bytes.load();
    s.device_staging_bytes = g->dev.staging_bytes.load();
    s.plans_computed = g->senders.plans_computed.load();
    write_struct(s, size, stats);
    return WSYNC_OK;
  });
}

WSYNC_API wsync_status_t wsync_group_next_member_event(wsync_group_t* group, wsync_member_event_t* event) {
  return api_call("wsync_group_next_member_event", [&] {
    if (group == nullptr || event == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group or event is NULL");
    const uint32_t size = event->struct_size;
    wsync_status_t st = check_out_struct(size, "event", "WSYNC_MEMBER_EVENT_INIT");
    if (st != WSYNC_OK) return st;
    wsync_member_event_t e = WSYNC_MEMBER_EVENT_INIT;
    if (!members_take_event(group, &e)) return fail(WSYNC_ERR_NOT_FOUND, "no new member event");
    write_struct(e, size, event);
    return WSYNC_OK;
  });
}

WSYNC_API wsync_status_t wsync_group_members(const wsync_group_t* group, uint32_t* ranks, uint64_t capacity,
                                             uint64_t* count) {
  return api_call("wsync_group_members", [&] {
    if (group == nullptr || count == nullptr) return fail(WSYNC_ERR_INVALID_ARGUMENT, "group or count is NULL");
    if (capacity > 0 && ranks == nullptr)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "ranks is NULL but capacity is %llu", static_cast<unsigned long long>(capacity));
    const std::vector<uint32_t> m = members_ranks(group);
    *count = m.size();
    for (size_t i = 0; i < m.size() && i < capacity; ++i) ranks[i] = m[i];
    return WSYNC_OK;
  });
}

WSYNC_API void wsync_group_destroy(wsync_group_t* group) {
  if (group == nullptr) return;
  // Destroy never changes the caller's error detail (it is read first, outside the guard).
  const wsync_status_t saved_status = last_status();
  std::string saved;
  bool kept = false;
  try {
    saved = last_error();
    kept = true;
  } catch (...) {
  }
  // An exception mid-teardown leaves the group alive (leaked): freeing memory a transport may
  // still be reading or writing would be worse than the leak.
  guard_void("wsync_group_destroy", [&] {
    group_teardown(group);
    delete group;
  });
  if (kept) restore_error(saved_status, saved);
}

}  // extern "C"
