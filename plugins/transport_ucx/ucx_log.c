/* ucx_log.c — UCX's own log lines go through wsync's log sink, not UCX's stderr printer.
 *
 * UCX prints "[...] UCX ERROR ..." to stderr by itself (ucs_log_default_handler), bypassing the
 * callback an application set with wsync_set_log_callback: a receiver torn down after its group
 * closed, for one, printed a few lines about its closed endpoints. A handler pushed once per
 * process runs before UCX's own (UCX calls the newest first) and stops it, so every UCX line is
 * one wsync log line, "transport 'ucx': UCX <LEVEL> <file>:<line>: <text>", at a wsync level one
 * step below UCX's: UCX reports the failures it returns, which the plugin turns into a named wsync
 * error already, so its own line is detail (FATAL -> ERROR, ERROR -> WARN, WARN -> INFO, the rest
 * -> DEBUG). While an instance is being destroyed, UCX's complaints about peers that are gone are
 * expected and logged at DEBUG. UCX_LOG_LEVEL still chooses what UCX produces, and with
 * UCX_LOG_FILE set nothing is routed (UCX writes its file, as asked). The handler is the
 * process's: UCX lines of other UCX users in the process (NIXL, UCC) go to wsync's sink too, and
 * while any wsync instance is being destroyed their errors are logged at DEBUG as well.
 *
 * The plugin is never unloaded while the handler is installed (the core loads plugins with
 * RTLD_NODELETE, and the library is linked with -z nodelete for any other loader). */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <ucs/config/types.h>
#include <ucs/debug/log_def.h>

#include "ucx_transport.h"

static atomic_int g_closing; /* instances being destroyed right now */

static int32_t wsync_level(ucs_log_level_t level) {
  if (atomic_load(&g_closing) > 0 && level > UCS_LOG_LEVEL_FATAL) return WSYNC_LOG_DEBUG;
  switch (level) {
    case UCS_LOG_LEVEL_FATAL: return WSYNC_LOG_ERROR;
    case UCS_LOG_LEVEL_ERROR: return WSYNC_LOG_WARN;
    case UCS_LOG_LEVEL_WARN: return WSYNC_LOG_INFO;
    default: return WSYNC_LOG_DEBUG;
  }
}

static const char* level_name(ucs_log_level_t level) {
  switch (level) {
    case UCS_LOG_LEVEL_FATAL: return "FATAL";
    case UCS_LOG_LEVEL_ERROR: return "ERROR";
    case UCS_LOG_LEVEL_WARN: return "WARN";
    case UCS_LOG_LEVEL_DIAG: return "DIAG";
    case UCS_LOG_LEVEL_INFO: return "INFO";
    default: return "DEBUG";
  }
}

static ucs_log_func_rc_t route(const char* file, unsigned line, const char* function, ucs_log_level_t level,
                               const ucs_log_component_config_t* comp, const char* fmt, va_list ap) {
  char prefix[192];
  const char* base = file;
  (void)function;
  (void)comp;
  if (level == UCS_LOG_LEVEL_PRINT) return UCS_LOG_FUNC_RC_CONTINUE; /* ucs_print: UCX's own output, as it was */
  if (wsp_host() == NULL || wsp_host()->log == NULL) return UCS_LOG_FUNC_RC_CONTINUE; /* nowhere to route: UCX prints */
  for (const char* p = file; p != NULL && *p != '\0'; ++p)
    if (*p == '/') base = p + 1;
  snprintf(prefix, sizeof prefix, "transport 'ucx': UCX %s %s:%u: ", level_name(level), base != NULL ? base : "?",
           line);
  wsp_vlog(wsync_level(level), prefix, fmt, ap);
  return UCS_LOG_FUNC_RC_STOP;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* A user who points UCX's log at a file (UCX_LOG_FILE) keeps it there: nothing is routed. */
static void push(void) {
  const char* file = getenv("UCX_LOG_FILE");
  if (file == NULL || file[0] == '\0') ucs_log_push_handler(route);
}

void ucx_log_route(void) { pthread_once(&g_once, push); }

void ucx_log_closing(int delta) { atomic_fetch_add(&g_closing, delta); }
