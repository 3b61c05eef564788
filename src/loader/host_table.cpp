// The host table: core services plugins reach without linking libwsync. Every callback runs behind
// a guard, so no C++ exception (an allocation failing in a store call, say) unwinds into a
// plugin's C code.
#include <cstdlib>
#include <cstring>

#include "common/api_guard.h"
#include "loader/plugin_loader.h"
#include "store/store_handle.h"

namespace wsync {
namespace {

void host_log(int32_t level, const char* message) {
  guard_void("host.log", [&] { log_msg(level, message ? message : ""); });
}

wsync_status_t host_set_error(wsync_status_t status, const char* message) {
  return guard_status("host.set_error", [&] { return fail_msg(status, message ? message : ""); });
}

wsync_status_t host_store_set(wsync_store_t* store, const char* key, const void* value, uint64_t len) {
  return guard_status("host.store_set", [&] {
    if (store == nullptr || key == nullptr || (value == nullptr && len != 0))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "store_set: NULL store, key or value");
    return store->client->set(key, value, len);
  });
}

wsync_status_t host_store_get(wsync_store_t* store, const char* key, void* buf, uint64_t cap, uint64_t* len,
                              int64_t timeout_ms) {
  return guard_status("host.store_get", [&] {
    if (store == nullptr || key == nullptr || len == nullptr || (buf == nullptr && cap != 0))
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "store_get: NULL store, key, buffer or length");
    std::vector<uint8_t> v;
    wsync_status_t st = store->client->get(key, &v, timeout_ms);
    if (st != WSYNC_OK) return st;
    *len = v.size();
    if (v.size() > cap)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "store key '%s' holds %zu bytes, more than the %llu-byte buffer", key,
                  v.size(), static_cast<unsigned long long>(cap));
    if (!v.empty()) std::memcpy(buf, v.data(), v.size());
    return WSYNC_OK;
  });
}

wsync_status_t host_store_add(wsync_store_t* store, const char* key, int64_t delta, int64_t* out) {
  return guard_status("host.store_add", [&] {
    if (store == nullptr || key == nullptr || out == nullptr)
      return fail(WSYNC_ERR_INVALID_ARGUMENT, "store_add: NULL store, key or output");
    return store->client->add(key, delta, out);
  });
}

void* host_alloc(uint64_t bytes) {
  return guard_value<void*>("host.alloc_host", nullptr, [&]() -> void* {
    const uint64_t page = 4096;
    if (bytes > UINT64_MAX - page) return nullptr;  // rounding up would wrap around
    uint64_t rounded = (bytes + page - 1) / page * page;
    return std::aligned_alloc(page, rounded == 0 ? page : rounded);
  });
}

void host_free(void* p, uint64_t) {
  guard_void("host.free_host", [&] { std::free(p); });
}

const wsync_host_v1_t kHost = {
    static_cast<uint32_t>(WSYNC_HOST_STRUCT_SIZE),
    WSYNC_PLUGIN_ABI_VERSION,
    host_log,
    host_set_error,
    host_store_set,
    host_store_get,
    host_store_add,
    host_alloc,
    host_free,
    WSYNC_PLUGIN_ABI_MINOR,
    0u,
};

}  // namespace

const wsync_host_v1_t* host_table() { return &kHost; }

}  // namespace wsync
