/*
 * wsync-info: what this wsync installation is and what it can load, in the spirit of ucx_info.
 *
 * Prints the library's release and ABI (compared with the headers this program was built
 * against), the folders searched for plugins, and every plugin file found there: kind, name,
 * version, plugin ABI, capabilities, what the plugin sees in this process (libraries, devices),
 * whether an earlier file of the same name shadows it, and for a plugin that does not load, the
 * status and the reason init would give. `--json` prints the same facts as one JSON object for
 * scripts and bindings.
 *
 * Uses the public C ABI only (wsync.h; wsync_plugin.h for the names of the capability bits), so
 * it sees exactly what any program linked to libwsync sees.
 *
 * Exit status: 0 when the library loaded and answered (plugins that refuse to load are
 * information, not a failure), 1 when the library's ABI cannot serve this program or the listing
 * failed, 2 for bad arguments.
 */
#define _GNU_SOURCE /* dladdr: which libwsync file the dynamic linker picked */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wsync.h"
#include "wsync_plugin.h"

/* The listing functions appeared in ABI 1.2; an older library cannot answer them. */
#define INFO_NEEDS_ABI_MINOR 2

typedef struct cap_name {
  uint64_t bit;
  const char* name;
} cap_name_t;

static const cap_name_t kTransportCaps[] = {
    {WSYNC_TRANSPORT_CAP_HOST_MEMORY, "host_memory"},
    {WSYNC_TRANSPORT_CAP_CUDA_MEMORY, "cuda_memory"},
    {WSYNC_TRANSPORT_CAP_SCATTER_RECV, "scatter_recv"},
    {WSYNC_TRANSPORT_CAP_STAGING_ONLY, "staging_only"},
    {WSYNC_TRANSPORT_CAP_PIECES, "pieces"},
    {WSYNC_TRANSPORT_CAP_FORGET_ONE, "forget_one"},
};

static const cap_name_t kAdapterCaps[] = {
    {WSYNC_ADAPTER_CAP_INBAND_MANIFEST, "inband_manifest"},
    {WSYNC_ADAPTER_CAP_HTTP, "http"},
};

/* Everything gathered before printing, so both output formats print the same facts. */
typedef struct facts {
  const char* version;      /* wsync_version_string() */
  uint32_t abi;             /* wsync_abi_version() */
  int abi_ok;               /* the library can serve this program (same major, minor >= 1.2) */
  char library_path[4096];  /* "" when dladdr cannot tell */
  char* dirs;               /* our copy of wsync_plugin_dirs(), ':'-separated */
  wsync_plugin_info_t* plugins;
  uint64_t num_plugins;
  uint64_t num_load, num_refused, num_shadowed;
  wsync_status_t list_status; /* of wsync_list_plugins; WSYNC_OK when not called */
  char list_error[1024];
} facts_t;

/* ---------------------------------------------------------------------------------------------
 * Gathering
 * ------------------------------------------------------------------------------------------- */

static char* copy_string(const char* s) {
  size_t n = strlen(s) + 1;
  char* c = (char*)malloc(n);
  if (c != NULL) memcpy(c, s, n);
  return c;
}

static const char* kind_name(int32_t kind) {
  if (kind == WSYNC_PLUGIN_KIND_TRANSPORT) return "transport";
  if (kind == WSYNC_PLUGIN_KIND_ADAPTER) return "adapter";
  return "unknown";
}

static const char* dir_state(const char* dir) {
  struct stat st;
  if (stat(dir, &st) != 0) return "does not exist";
  if (!S_ISDIR(st.st_mode)) return "not a folder";
  return NULL;
}

/* The earlier entry a shadowed plugin loses to: the first of the same kind and name. */
static const wsync_plugin_info_t* shadowed_by(const facts_t* f, uint64_t i) {
  uint64_t j;
  for (j = 0; j < i; ++j)
    if (f->plugins[j].kind == f->plugins[i].kind && strcmp(f->plugins[j].name, f->plugins[i].name) == 0)
      return &f->plugins[j];
  return NULL;
}

/* wsync_list_plugins into an array we own. A folder can gain files between two calls, so the
 * size is asked again until the array holds everything (a few tries; each call loads them all). */
static wsync_status_t list_plugins(facts_t* f) {
  const wsync_plugin_info_t init = WSYNC_PLUGIN_INFO_INIT;
  uint64_t capacity = 32, count = 0, i;
  int attempt;
  for (attempt = 0; attempt < 4; ++attempt) {
    wsync_plugin_info_t* infos = (wsync_plugin_info_t*)malloc(capacity * sizeof *infos);
    wsync_status_t st;
    if (infos == NULL) {
      snprintf(f->list_error, sizeof f->list_error, "out of memory for %llu plugin entries",
               (unsigned long long)capacity);
      return WSYNC_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < capacity; ++i) infos[i] = init;
    st = wsync_list_plugins(infos, capacity, &count);
    if (st != WSYNC_OK) {
      snprintf(f->list_error, sizeof f->list_error, "%s", wsync_last_error());
      free(infos);
      return st;
    }
    if (count <= capacity) {
      f->plugins = infos;
      f->num_plugins = count;
      return WSYNC_OK;
    }
    free(infos);
    capacity = count + 8;
  }
  snprintf(f->list_error, sizeof f->list_error, "the plugin folders kept changing while they were listed");
  return WSYNC_ERR_INTERNAL;
}

static void gather(facts_t* f) {
  /* POSIX guarantees a function pointer fits a void*; the union says so without a cast ISO C
   * forbids. */
  union {
    uint32_t (*fn)(void);
    void* addr;
  } libwsync_function;
  Dl_info dl;
  uint64_t i;
  memset(f, 0, sizeof *f);
  f->version = wsync_version_string();
  f->abi = wsync_abi_version();
  f->abi_ok = (f->abi >> 16) == WSYNC_ABI_VERSION_MAJOR && (f->abi & 0xffffu) >= INFO_NEEDS_ABI_MINOR;
  /* A function of libwsync tells which file it came from: the first thing to check when an
   * older copy of the library shadows the one the user installed. */
  libwsync_function.fn = wsync_abi_version;
  if (dladdr(libwsync_function.addr, &dl) != 0 && dl.dli_fname != NULL)
    snprintf(f->library_path, sizeof f->library_path, "%s", dl.dli_fname);
  if (!f->abi_ok) return; /* the listing functions may be absent or different: do not call them */
  f->dirs = copy_string(wsync_plugin_dirs()); /* valid only until the next wsync call: copy it */
  f->list_status = list_plugins(f);
  for (i = 0; i < f->num_plugins; ++i) {
    if (f->plugins[i].status == WSYNC_OK) ++f->num_load;
    else ++f->num_refused;
    if (f->plugins[i].shadowed) ++f->num_shadowed;
  }
}

/* Calls fn(dir, ctx) for each folder of the ':'-separated list, in order. */
static void for_each_dir(const char* dirs, void (*fn)(const char* dir, int index, void* ctx), void* ctx) {
  const char* p = dirs;
  int index = 0;
  char dir[4096];
  if (dirs == NULL || *dirs == '\0') return;
  for (;;) {
    const char* colon = strchr(p, ':');
    size_t n = colon ? (size_t)(colon - p) : strlen(p);
    if (n >= sizeof dir) n = sizeof dir - 1;
    memcpy(dir, p, n);
    dir[n] = '\0';
    if (n > 0) fn(dir, index++, ctx);
    if (colon == NULL) break;
    p = colon + 1;
  }
}

/* ---------------------------------------------------------------------------------------------
 * Text output
 * ------------------------------------------------------------------------------------------- */

/* Prints `text`, indenting every line after the first by `indent` (errors can span lines). */
static void print_indented(const char* text, int indent) {
  const char* p;
  for (p = text; *p; ++p) {
    putchar(*p);
    if (*p == '\n' && p[1] != '\0') printf("%*s", indent, "");
  }
  putchar('\n');
}

static void print_caps_text(int32_t kind, uint64_t caps) {
  const cap_name_t* names = kind == WSYNC_PLUGIN_KIND_ADAPTER ? kAdapterCaps : kTransportCaps;
  size_t n = kind == WSYNC_PLUGIN_KIND_ADAPTER ? sizeof kAdapterCaps / sizeof kAdapterCaps[0]
                                               : sizeof kTransportCaps / sizeof kTransportCaps[0];
  size_t i;
  int first = 1;
  uint64_t rest = caps;
  if (kind != WSYNC_PLUGIN_KIND_ADAPTER && kind != WSYNC_PLUGIN_KIND_TRANSPORT) n = 0;
  for (i = 0; i < n; ++i) {
    if (!(caps & names[i].bit)) continue;
    printf("%s%s", first ? "" : ", ", names[i].name);
    first = 0;
    rest &= ~names[i].bit;
  }
  /* Bits this program has no name for (retired or newer than its header): show, do not hide. */
  if (rest != 0) printf("%s0x%llx", first ? "" : ", ", (unsigned long long)rest);
  else if (first) printf("(none)");
  putchar('\n');
}

static void print_dir_text(const char* dir, int index, void* ctx) {
  const char* state = dir_state(dir);
  (void)ctx;
  if (state) printf("  %d. %s  (%s)\n", index + 1, dir, state);
  else printf("  %d. %s\n", index + 1, dir);
}

static void print_plugin_text(const facts_t* f, uint64_t i) {
  const wsync_plugin_info_t* p = &f->plugins[i];
  printf("  %s %s", kind_name(p->kind), p->name);
  if (p->version[0] != '\0') printf(" %s", p->version);
  if (p->status == WSYNC_OK) printf(": loads");
  else printf(": refused, %s", wsync_status_name(p->status));
  printf("%s\n", p->shadowed ? " (shadowed)" : "");
  printf("    file:     %s\n", p->path);
  if (p->abi_major != 0) { /* the table was read: its ABI and caps mean something */
    printf("    ABI:      plugin ABI %u.%u\n", (unsigned)p->abi_major, (unsigned)p->abi_minor);
    printf("    caps:     ");
    print_caps_text(p->kind, p->caps);
  }
  if (p->detail[0] != '\0') {
    printf("    runtime:  ");
    print_indented(p->detail, 14);
  }
  if (p->status != WSYNC_OK) {
    printf("    error:    ");
    print_indented(p->error[0] ? p->error : "(no reason given)", 14);
  }
  if (p->shadowed) {
    const wsync_plugin_info_t* winner = shadowed_by(f, i);
    printf("    shadowed: by %s (an earlier folder; wsync loads that one for '%s')\n",
           winner ? winner->path : "an earlier file", p->name);
  }
}

static void print_text(const facts_t* f) {
  const uint32_t major = f->abi >> 16, minor = f->abi & 0xffffu;
  uint64_t i;
  printf("wsync %s, ABI %u.%u (wsync-info built against ABI %d.%d, plugin ABI %d.%d)\n", f->version,
         (unsigned)major, (unsigned)minor, WSYNC_ABI_VERSION_MAJOR, WSYNC_ABI_VERSION_MINOR,
         WSYNC_PLUGIN_ABI_VERSION, WSYNC_PLUGIN_ABI_MINOR);
  printf("library: %s\n", f->library_path[0] ? f->library_path : "(unknown)");
  if (!f->abi_ok) {
    printf("error: this libwsync speaks ABI %u.%u; wsync-info needs ABI %d.%d or a newer minor of the same major.\n"
           "       Another libwsync is probably found first (check LD_LIBRARY_PATH and the path above).\n",
           (unsigned)major, (unsigned)minor, WSYNC_ABI_VERSION_MAJOR, INFO_NEEDS_ABI_MINOR);
    return;
  }
  if (minor < WSYNC_ABI_VERSION_MINOR)
    printf("note: the library is older than the header wsync-info was built with (ABI %u.%u < %d.%d)\n",
           (unsigned)major, (unsigned)minor, WSYNC_ABI_VERSION_MAJOR, WSYNC_ABI_VERSION_MINOR);
  printf("plugin folders, in search order (WSYNC_PLUGIN_PATH, then beside libwsync):\n");
  if (f->dirs == NULL || f->dirs[0] == '\0') printf("  (none: set WSYNC_PLUGIN_PATH)\n");
  for_each_dir(f->dirs, print_dir_text, NULL);
  if (f->list_status != WSYNC_OK) {
    printf("error: wsync_list_plugins failed: %s: %s\n", wsync_status_name(f->list_status), f->list_error);
    return;
  }
  printf("plugins:\n");
  if (f->num_plugins == 0) printf("  (none found)\n");
  for (i = 0; i < f->num_plugins; ++i) print_plugin_text(f, i);
  printf("wsync-info: %llu plugin%s found, %llu load, %llu refused", (unsigned long long)f->num_plugins,
         f->num_plugins == 1 ? "" : "s", (unsigned long long)f->num_load, (unsigned long long)f->num_refused);
  if (f->num_shadowed) printf(", %llu shadowed", (unsigned long long)f->num_shadowed);
  putchar('\n');
}

/* ---------------------------------------------------------------------------------------------
 * JSON output (hand-written so the tool needs nothing but libc and libwsync)
 * ------------------------------------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 when it is not one (a stray byte,
 * an overlong form, a surrogate, a code point past U+10FFFF). */
static int utf8_sequence(const unsigned char* s) {
  uint32_t cp;
  int n, i;
  if (s[0] < 0x80) return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) n = 2, cp = s[0] & 0x1f;
  else if (s[0] >= 0xe0 && s[0] <= 0xef) n = 3, cp = s[0] & 0x0f;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4) n = 4, cp = s[0] & 0x07;
  else return 0;
  for (i = 1; i < n; ++i) {
    if ((s[i] & 0xc0) != 0x80) return 0; /* also stops at the terminating NUL */
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

/* A JSON string. Paths and dlerror() texts are bytes, not necessarily UTF-8: a byte that is not
 * part of valid UTF-8 becomes U+FFFD so that every JSON parser accepts the output. */
static void json_string(const char* text) {
  const unsigned char* s = (const unsigned char*)(text ? text : "");
  putchar('"');
  while (*s) {
    int n = utf8_sequence(s);
    if (n == 0) {
      fputs("\\ufffd", stdout);
      ++s;
      continue;
    }
    if (n > 1) {
      fwrite(s, 1, (size_t)n, stdout);
      s += n;
      continue;
    }
    switch (*s) {
      case '"': fputs("\\\"", stdout); break;
      case '\\': fputs("\\\\", stdout); break;
      case '\n': fputs("\\n", stdout); break;
      case '\r': fputs("\\r", stdout); break;
      case '\t': fputs("\\t", stdout); break;
      case '\b': fputs("\\b", stdout); break;
      case '\f': fputs("\\f", stdout); break;
      default:
        if (*s < 0x20) printf("\\u%04x", (unsigned)*s);
        else putchar(*s);
    }
    ++s;
  }
  putchar('"');
}

static void json_caps(int32_t kind, uint64_t caps) {
  const cap_name_t* names = kind == WSYNC_PLUGIN_KIND_ADAPTER ? kAdapterCaps : kTransportCaps;
  size_t n = kind == WSYNC_PLUGIN_KIND_ADAPTER ? sizeof kAdapterCaps / sizeof kAdapterCaps[0]
                                               : sizeof kTransportCaps / sizeof kTransportCaps[0];
  size_t i;
  int first = 1;
  uint64_t rest = caps;
  char hex[24];
  if (kind != WSYNC_PLUGIN_KIND_ADAPTER && kind != WSYNC_PLUGIN_KIND_TRANSPORT) n = 0;
  putchar('[');
  for (i = 0; i < n; ++i) {
    if (!(caps & names[i].bit)) continue;
    printf("%s", first ? "" : ", ");
    json_string(names[i].name);
    first = 0;
    rest &= ~names[i].bit;
  }
  if (rest != 0) { /* as in the text output: unnamed bits as one hex string */
    snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)rest);
    printf("%s", first ? "" : ", ");
    json_string(hex);
  }
  putchar(']');
}

static void print_dir_json(const char* dir, int index, void* ctx) {
  (void)ctx;
  printf("%s\n    {\"path\": ", index ? "," : "");
  json_string(dir);
  printf(", \"exists\": %s}", dir_state(dir) ? "false" : "true");
}

static void print_plugin_json(const facts_t* f, uint64_t i) {
  const wsync_plugin_info_t* p = &f->plugins[i];
  const wsync_plugin_info_t* winner = p->shadowed ? shadowed_by(f, i) : NULL;
  printf("    {\"kind\": ");
  json_string(kind_name(p->kind));
  printf(", \"name\": ");
  json_string(p->name);
  printf(", \"path\": ");
  json_string(p->path);
  printf(", \"version\": ");
  json_string(p->version);
  printf(",\n     \"loads\": %s, \"status\": ", p->status == WSYNC_OK ? "true" : "false");
  json_string(wsync_status_name(p->status));
  printf(", \"status_code\": %d, \"error\": ", (int)p->status);
  json_string(p->error);
  printf(",\n     \"abi_major\": %u, \"abi_minor\": %u, \"caps\": %llu, \"cap_names\": ", (unsigned)p->abi_major,
         (unsigned)p->abi_minor, (unsigned long long)p->caps);
  json_caps(p->kind, p->caps);
  printf(", \"detail\": ");
  json_string(p->detail);
  printf(",\n     \"shadowed\": %s, \"shadowed_by\": ", p->shadowed ? "true" : "false");
  if (winner) json_string(winner->path);
  else printf("null");
  printf("}");
}

static void print_json(const facts_t* f) {
  uint64_t i;
  printf("{\n  \"version\": ");
  json_string(f->version);
  printf(",\n  \"library\": ");
  if (f->library_path[0]) json_string(f->library_path);
  else printf("null");
  printf(",\n  \"abi\": {\"major\": %u, \"minor\": %u},\n", (unsigned)(f->abi >> 16), (unsigned)(f->abi & 0xffffu));
  printf("  \"header_abi\": {\"major\": %d, \"minor\": %d},\n", WSYNC_ABI_VERSION_MAJOR, WSYNC_ABI_VERSION_MINOR);
  printf("  \"header_plugin_abi\": {\"major\": %d, \"minor\": %d},\n", WSYNC_PLUGIN_ABI_VERSION,
         WSYNC_PLUGIN_ABI_MINOR);
  printf("  \"abi_compatible\": %s,\n  \"plugin_dirs\": [", f->abi_ok ? "true" : "false");
  for_each_dir(f->dirs, print_dir_json, NULL);
  printf("%s],\n", f->dirs && f->dirs[0] ? "\n  " : "");
  printf("  \"list_status\": ");
  json_string(wsync_status_name(f->list_status));
  printf(", \"list_error\": ");
  json_string(f->list_error);
  printf(",\n  \"plugins\": [%s", f->num_plugins ? "\n" : "");
  for (i = 0; i < f->num_plugins; ++i) {
    print_plugin_json(f, i);
    printf("%s", i + 1 < f->num_plugins ? ",\n" : "\n  ");
  }
  printf("],\n  \"summary\": {\"found\": %llu, \"load\": %llu, \"refused\": %llu, \"shadowed\": %llu}\n}\n",
         (unsigned long long)f->num_plugins, (unsigned long long)f->num_load, (unsigned long long)f->num_refused,
         (unsigned long long)f->num_shadowed);
}

/* ---------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------- */

static void usage(void) {
  printf(
      "usage: wsync-info [--json] [--help]\n"
      "\n"
      "Shows the wsync library this program loads (release, ABI), the folders searched for\n"
      "plugins and every transport and adapter plugin found there: whether it loads, its\n"
      "version, plugin ABI and capabilities, what it sees in this process (libraries, devices),\n"
      "and, when it does not load, why.\n"
      "\n"
      "  --json   the same facts as one JSON object\n"
      "  --help   this text\n"
      "\n"
      "Environment: WSYNC_PLUGIN_PATH (folders searched first, ':'-separated);\n"
      "WSYNC_LOG_LEVEL=debug also logs every load attempt on stderr.\n"
      "Exit status: 0 when the library answered (refusing plugins included), 1 when its ABI\n"
      "cannot serve this program, 2 for bad arguments.\n");
}

int main(int argc, char** argv) {
  facts_t f;
  int json = 0, i, rc;
  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage();
      return 0;
    } else {
      fprintf(stderr, "wsync-info: unknown argument '%s'\nusage: wsync-info [--json] [--help]\n", argv[i]);
      return 2;
    }
  }
  gather(&f);
  if (json) print_json(&f);
  else print_text(&f);
  rc = f.abi_ok && f.list_status == WSYNC_OK ? 0 : 1;
  free(f.plugins);
  free(f.dirs);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "wsync-info: cannot write the output\n");
    return 1;
  }
  return rc;
}
