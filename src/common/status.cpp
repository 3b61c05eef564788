// Status names and docs, and dtype facts: static tables, pinned with the codes in wsync.h.
#include "wsync.h"

namespace {

struct StatusInfo {
  const char* name;
  const char* doc;
};

// Index = status code. Append only; a retired code keeps its row.
const StatusInfo kStatus[WSYNC_STATUS_COUNT] = {
    {"WSYNC_OK", "success"},
    {"WSYNC_ERR_INVALID_ARGUMENT", "an argument, option value or struct_size is not acceptable"},
    {"WSYNC_ERR_NOT_FOUND", "a plugin file, symbol, key or tensor name was not found"},
    {"WSYNC_ERR_VERSION_MISMATCH", "a plugin or peer speaks another ABI or protocol version"},
    {"WSYNC_ERR_UNSUPPORTED", "the plugin or transport cannot do what was asked"},
    {"WSYNC_ERR_TIMEOUT", "a deadline passed before a peer answered"},
    {"WSYNC_ERR_ABORTED", "the group was aborted"},
    {"WSYNC_ERR_PROTOCOL", "malformed or corrupted data arrived from the wire"},
    {"WSYNC_ERR_IO", "a socket, file or transport operation failed"},
    {"WSYNC_ERR_PEER_FAILED", "a peer process died or closed its connection"},
    {"WSYNC_ERR_OUT_OF_MEMORY", "an allocation failed"},
    {"WSYNC_ERR_INVALID_STATE", "the call is not allowed in the object's current state"},
    {"WSYNC_ERR_ENGINE", "the inference engine refused the request"},
    {"WSYNC_ERR_INTERNAL", "an internal error in wsync or a plugin"},
    {"WSYNC_ERR_NO_DEVICE", "no CUDA device is available where one is needed"},
    {"WSYNC_ERR_REJECTED", "the group refused the receiver (wrong group name or rank)"},
};

struct DtypeInfo {
  const char* name;
  uint32_t size;
};

// Rows in code order from the header's one table (the static_assert below keeps them so).
#define WSYNC_DTYPE_ROW(code, name, size) {name, size},
const DtypeInfo kDtype[WSYNC_DTYPE_COUNT] = {{"invalid", 0}, WSYNC_DTYPE_TABLE(WSYNC_DTYPE_ROW)};
#undef WSYNC_DTYPE_ROW
// kDtype is indexed by code: row i of the table must be code i + 1, every code once.
#define WSYNC_DTYPE_CODE(code, name, size) code,
constexpr int32_t kDtypeCodes[] = {WSYNC_DTYPE_TABLE(WSYNC_DTYPE_CODE)};
#undef WSYNC_DTYPE_CODE
constexpr bool dtype_rows_in_code_order() {
  for (size_t i = 0; i < sizeof kDtypeCodes / sizeof kDtypeCodes[0]; ++i)
    if (kDtypeCodes[i] != static_cast<int32_t>(i + 1)) return false;
  return sizeof kDtypeCodes / sizeof kDtypeCodes[0] == WSYNC_DTYPE_COUNT - 1;
}
static_assert(dtype_rows_in_code_order(), "WSYNC_DTYPE_TABLE: one row per code, in code order from 1");

}  // namespace

extern "C" {

WSYNC_API const char* wsync_status_name(wsync_status_t status) {
  if (status < 0 || status >= WSYNC_STATUS_COUNT) return "WSYNC_ERR_UNKNOWN";
  return kStatus[status].name;
}

WSYNC_API const char* wsync_status_doc(wsync_status_t status) {
  if (status < 0 || status >= WSYNC_STATUS_COUNT) return "not a wsync status code";
  return kStatus[status].doc;
}

WSYNC_API uint32_t wsync_dtype_size(int32_t dtype) {
  if (dtype <= 0 || dtype >= WSYNC_DTYPE_COUNT) return 0;
  return kDtype[dtype].size;
}

WSYNC_API const char* wsync_dtype_name(int32_t dtype) {
  if (dtype <= 0 || dtype >= WSYNC_DTYPE_COUNT) return "invalid";
  return kDtype[dtype].name;
}

WSYNC_API uint32_t wsync_abi_version(void) { return WSYNC_ABI_VERSION; }

WSYNC_API const char* wsync_version_string(void) { return WSYNC_VERSION_STRING; }

}  // extern "C"
