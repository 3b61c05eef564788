/* ucx_devices.c — which UCX transports and devices this process sees ("tcp/eth0", "posix/memory"),
 * for the plugin's runtime_info: what wsync-info and `python -m wsync doctor` print. The same walk
 * as `ucx_info -d`, through UCT's public query functions; computed once per process. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <uct/api/uct.h>

#include "ucx_transport.h"

enum { kTextBytes = 1024 };
static char g_text[kTextBytes];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Appends "name/device" to g_text, or "..." once it is full. */
static void add(size_t* used, const char* tl, const char* dev) {
  const int n = snprintf(g_text + *used, kTextBytes - *used, "%s%s/%s", *used ? " " : "", tl, dev);
  if (n < 0 || (size_t)n >= kTextBytes - *used) {
    snprintf(g_text + kTextBytes - 5, 5, " ...");
    *used = kTextBytes - 1;
    return;
  }
  *used += (size_t)n;
}

/* The transport resources of one memory domain of `c`. */
static void add_md(uct_component_h c, const char* md_name, size_t* used) {
  uct_md_config_t* config = NULL;
  uct_md_h md = NULL;
  uct_tl_resource_desc_t* tls = NULL;
  unsigned num_tls = 0, i;
  if (uct_md_config_read(c, NULL, NULL, &config) != UCS_OK) return;
  const ucs_status_t st = uct_md_open(c, md_name, config, &md);
  uct_config_release(config);
  if (st != UCS_OK) return;
  if (uct_md_query_tl_resources(md, &tls, &num_tls) == UCS_OK) {
    for (i = 0; i < num_tls; ++i) add(used, tls[i].tl_name, tls[i].dev_name);
    uct_release_tl_resource_list(tls);
  }
  uct_md_close(md);
}

static void walk(void) {
  uct_component_h* comps = NULL;
  unsigned num = 0, i, j;
  size_t used = 0;
  if (uct_query_components(&comps, &num) != UCS_OK) {
    snprintf(g_text, sizeof g_text, "(UCT could not list its components)");
    return;
  }
  for (i = 0; i < num && used + 1 < kTextBytes; ++i) {
    uct_component_attr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(comps[i], &attr) != UCS_OK || attr.md_resource_count == 0 ||
        attr.md_resource_count > 64)
      continue;
    uct_md_resource_desc_t mds[attr.md_resource_count];
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds;
    if (uct_component_query(comps[i], &attr) != UCS_OK) continue;
    for (j = 0; j < attr.md_resource_count; ++j) add_md(comps[i], mds[j].md_name, &used);
  }
  uct_release_component_list(comps);
  if (used == 0) snprintf(g_text, sizeof g_text, "(none)");
}

const char* ucx_devices_text(void) {
  pthread_once(&g_once, walk);
  return g_text;
}
