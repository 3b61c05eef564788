// Compiled with -std=c++11 -Wall -Wextra -pedantic -Werror: the public headers are valid C++
// (extern "C" linkage, INIT macros usable as initialisers) and link against libwsync.
#include "wsync.h"
#include "wsync_plugin.h"

#include <cstdio>
#include <type_traits>

static_assert(std::is_standard_layout<wsync_tensor_t>::value, "wsync_tensor_t must be standard layout");
static_assert(std::is_standard_layout<wsync_group_config_t>::value, "config must be standard layout");
static_assert(std::is_trivially_copyable<wsync_receiver_event_t>::value, "event must be trivially copyable");
static_assert(std::is_trivially_copyable<wsync_receiver_state_t>::value, "state must be trivially copyable");
static_assert(WSYNC_STATUS_COUNT == WSYNC_ERR_REJECTED + 1, "status count");

namespace {
void log_sink(void*, int32_t, const char*) {}
}  // namespace

int main() {
  wsync_option_t o = WSYNC_OPTION("bucket_bytes", "4096");
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  wsync_group_config_t gc = WSYNC_GROUP_CONFIG_INIT;
  wsync_receiver_config_t rc = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_receiver_event_t ev = WSYNC_RECEIVER_EVENT_INIT;
  wsync_group_stats_t st = WSYNC_GROUP_STATS_INIT;
  wsync_receiver_state_t rs = WSYNC_RECEIVER_STATE_INIT;
  const wsync_option_t opts[] = {WSYNC_OPTION("a", "1"), WSYNC_OPTION("b", "2")};
  wsync_log_fn fn = &log_sink;
  wsync_set_log_callback(fn, nullptr, WSYNC_LOG_WARN);
  wsync_set_log_callback(nullptr, nullptr, 0);
  int bad = 0;
  bad += o.struct_size != sizeof o;
  bad += t.struct_size != sizeof t;
  bad += gc.struct_size != sizeof gc;
  bad += rc.struct_size != sizeof rc;
  bad += ev.struct_size != sizeof ev;
  bad += st.struct_size != sizeof st;
  bad += rs.struct_size != sizeof rs;
  bad += opts[1].struct_size != sizeof opts[1];
  bad += (wsync_abi_version() >> 16) != WSYNC_ABI_VERSION_MAJOR;
  bad += wsync_status_name(WSYNC_OK)[0] != 'W';
  if (bad) std::fprintf(stderr, "header_cxx: %d check(s) failed\n", bad);
  return bad;
}
