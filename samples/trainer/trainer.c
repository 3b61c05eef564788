/* wsync sample trainer (C): publishes a synthetic ~1 GiB model to N engines as weight versions
 * 1..V, each with different contents, in several batches per update, and prints what it did.
 * The flags are in kUsage below (wsync-sample-trainer --help prints them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "synthetic_model.h"
#include "wsync.h"

#define MAX_TENSORS 1024
#define BATCH 64

static const char kUsage[] =
    "usage: wsync-sample-trainer --receivers 2 [--store 127.0.0.1:0] [--store-file PATH] [--versions 3]\n"
    "                            [--bucket-mib 256] [--transport auto|tcp|ucx] [--tls sm|tcp|...] [--timeout-ms 60000]\n"
    "                            [--scale 1.0] [--until-file PATH] [--interval-ms 0] [--keep-going 0]\n"
    "                            [--option KEY=VALUE]... [--first-version 1] [--die-in 0]\n"
    "                            [--senders 1 --sender-rank 0 --sender0-store HOST:PORT]\n"
    "\n"
    "  --senders M         one rank of a trainer of M ranks (options num_senders, sender_rank): rank K\n"
    "  --sender-rank K     publishes rows chunk K of every tensor (torch.chunk over dim 0), the engines\n"
    "                      take whole tensors; ranks K > 0 find the group at --sender0-store (rank 0's\n"
    "                      --store). A trainer's ranks restart together: after one dies, the others fail\n"
    "                      naming it, and all are started again (--first-version)\n"
    "  --first-version N   the first version published (a trainer restarted from its checkpoint goes on\n"
    "                      from there; engines with the receiver option rejoin take it without a restart)\n"
    "  --die-in V          SIGKILL this process after the third batch of version V (a crash, for tests; by\n"
    "                      then the first batch was delivered: every engine holds part of V)\n"
    "  --interval-ms N     pause N ms after each version (the time a training step takes; receivers of an\n"
    "                      elastic group join in such a pause)\n"
    "  --keep-going 1      a version that fails at its finalize because engines left (membership=elastic,\n"
    "                      WSYNC_ERR_PEER_FAILED) is reported and the next one published, through the same\n"
    "                      group (a soak); a fourth such failure in a row ends the trainer\n"
    "  --until-file PATH   after the --versions, keep publishing new versions until PATH exists (a soak,\n"
    "                      or a group kept busy while a test does something to it)\n"
    "  --option KEY=VALUE  any group option, passed to wsync_group_init as it is (repeatable), e.g.\n"
    "                      --option route=chain --option window=4 --option transport.streams=2;\n"
    "                      they come after the options the other flags set, so one given twice (e.g.\n"
    "                      --option timeout_ms=5000 with --timeout-ms) takes the --option's value.\n"
    "                      The group refuses an unknown key naming it (docs/ABI.md lists the keys)\n";

/* Member events (membership=elastic), each once, as they come. */
static void print_member_events(wsync_group_t* g) {
  for (wsync_member_event_t e = WSYNC_MEMBER_EVENT_INIT; wsync_group_next_member_event(g, &e) == WSYNC_OK;
       e = (wsync_member_event_t)WSYNC_MEMBER_EVENT_INIT)
    if (e.kind == WSYNC_MEMBER_JOINED)
      printf("trainer: engine rank %u joined the group from update %llu: %s\n", e.rank, (unsigned long long)e.update,
             e.reason);
    else
      printf("trainer: engine rank %u left the group during update %llu (%s): %s\n", e.rank,
             (unsigned long long)e.update, wsync_status_name(e.status), e.reason);
  fflush(stdout);
}

/* Many senders: rank k's rows of a tensor (torch.chunk over dim 0); 0 when it holds none of it. A
 * tensor without rows (a scalar, an empty one) is rank 0's, whole. */
static int slice_rows(wsync_tensor_t* d, const int64_t* shape, unsigned m, unsigned k) {
  const int64_t rows = d->ndim > 0 ? shape[0] : 0, chunk = (rows + m - 1) / m;
  const int64_t begin = chunk * k < rows ? chunk * k : rows, end = begin + chunk < rows ? begin + chunk : rows;
  if (rows == 0) return k == 0;
  if (end == begin) return 0;
  const uint64_t row = d->nbytes / (uint64_t)rows;
  memcpy(d->full_shape, shape, sizeof d->full_shape);
  d->flags = WSYNC_TENSOR_SLICE;
  d->box_offset[0] = begin;
  d->shape[0] = end - begin;
  d->data = (char*)d->data + (uint64_t)begin * row;
  d->nbytes = (uint64_t)(end - begin) * row;
  return 1;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pause_ms(long ms) {
  if (ms <= 0) return;
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void free_model(void** data, size_t n) {
  for (size_t i = 0; i < n; ++i) free(data[i]);
  free(data);
}

static int die(const char* what, wsync_status_t st) {
  fprintf(stderr, "trainer: %s failed: %s: %s\n", what, wsync_status_name(st), wsync_last_error());
  return 1;
}

/* "KEY=VALUE" of --option into *opt: the key is a copy (free_options frees it), the value points
 * into arg. 0 when arg has no '=' or nothing before it. */
static int parse_option(const char* arg, wsync_option_t* opt) {
  const char* eq = strchr(arg, '=');
  if (eq == NULL || eq == arg) return 0;
  char* key = malloc((size_t)(eq - arg) + 1);
  if (key == NULL) {
    fprintf(stderr, "trainer: out of memory\n");
    exit(1);
  }
  memcpy(key, arg, (size_t)(eq - arg));
  key[eq - arg] = '\0';
  wsync_option_t o = WSYNC_OPTION(key, eq + 1);
  *opt = o;
  return 1;
}

/* Frees the options parse_option made and returns `code` (main's exit status). */
static int free_options(wsync_option_t* extra, uint64_t n, int code) {
  for (uint64_t i = 0; i < n; ++i) free((char*)extra[i].key);
  free(extra);
  return code;
}

int main(int argc, char** argv) {
  unsigned receivers = 2, versions = 3, first = 1, die_in = 0, senders = 1, sender_rank = 0;
  const char* sender0_store = NULL;
  char senders_s[16], rank_s[16];
  const char* store = "127.0.0.1:0";
  const char* store_file = NULL;
  const char* transport = NULL; /* the default: ucx on one host, tcp across hosts without RDMA */
  const char* tls = NULL;
  const char* until_file = NULL;
  long interval_ms = 0;
  int keep_going = 0;
  char bucket[32] = "268435456";
  char timeout[32] = "60000";
  double scale = 1.0;
  /* --option entries, in order; they go after the options of the other flags (see kUsage). */
  wsync_option_t* extra = calloc((size_t)argc, sizeof *extra);
  uint64_t nextra = 0;
  if (extra == NULL) {
    fprintf(stderr, "trainer: out of memory\n");
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(kUsage, stdout);
      return free_options(extra, nextra, 0);
    }
    if (v == NULL) {
      fprintf(stderr, "trainer: %s needs a value\n%s", a, kUsage);
      return free_options(extra, nextra, 2);
    }
    if (!strcmp(a, "--receivers")) receivers = (unsigned)atoi(v);
    else if (!strcmp(a, "--versions")) versions = (unsigned)atoi(v);
    else if (!strcmp(a, "--first-version")) first = (unsigned)atoi(v);
    else if (!strcmp(a, "--die-in")) die_in = (unsigned)atoi(v);
    else if (!strcmp(a, "--senders")) senders = (unsigned)atoi(v);
    else if (!strcmp(a, "--sender-rank")) sender_rank = (unsigned)atoi(v);
    else if (!strcmp(a, "--sender0-store")) sender0_store = v;
    else if (!strcmp(a, "--store")) store = v;
    else if (!strcmp(a, "--store-file")) store_file = v;
    else if (!strcmp(a, "--transport")) transport = v;
    else if (!strcmp(a, "--tls")) tls = v; /* UCX transports, announced to the engines too */
    else if (!strcmp(a, "--bucket-mib")) snprintf(bucket, sizeof bucket, "%llu", (unsigned long long)atoll(v) << 20);
    else if (!strcmp(a, "--timeout-ms")) snprintf(timeout, sizeof timeout, "%s", v);
    else if (!strcmp(a, "--scale")) scale = atof(v);
    else if (!strcmp(a, "--until-file")) until_file = v;
    else if (!strcmp(a, "--interval-ms")) interval_ms = atol(v);
    else if (!strcmp(a, "--keep-going")) keep_going = atoi(v);
    else if (!strcmp(a, "--option")) {
      if (!parse_option(v, &extra[nextra])) {
        fprintf(stderr, "trainer: --option takes KEY=VALUE (e.g. --option route=chain), not '%s'\n", v);
        return free_options(extra, nextra, 2);
      }
      ++nextra;
    } else {
      fprintf(stderr, "trainer: unknown flag %s\n%s", a, kUsage);
      return free_options(extra, nextra, 2);
    }
    ++i;
  }

  static synth_tensor_t spec[MAX_TENSORS];
  size_t n = synth_model_spec(scale, spec, MAX_TENSORS);
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += spec[i].nbytes;
  void** data = calloc(n, sizeof *data);
  for (size_t i = 0; i < n; ++i) data[i] = spec[i].nbytes ? malloc(spec[i].nbytes) : NULL;

  if (senders == 0 || sender_rank >= senders || (sender_rank > 0 && sender0_store == NULL)) {
    fprintf(stderr, "trainer: --sender-rank must be below --senders, and ranks above 0 need --sender0-store\n");
    return free_options(extra, nextra, 2);
  }
  wsync_option_t* opts = calloc(7 + nextra, sizeof *opts);
  uint64_t nopts = 0;
  if (opts == NULL) {
    fprintf(stderr, "trainer: out of memory\n");
    return free_options(extra, nextra, 1);
  }
  wsync_option_t o1 = WSYNC_OPTION("bucket_bytes", bucket), o2 = WSYNC_OPTION("timeout_ms", timeout),
                 o3 = WSYNC_OPTION("store_addr_file", store_file), o4 = WSYNC_OPTION("transport.tls", tls);
  opts[nopts++] = o1;
  opts[nopts++] = o2;
  if (store_file) opts[nopts++] = o3;
  if (tls) opts[nopts++] = o4;
  snprintf(senders_s, sizeof senders_s, "%u", senders);
  snprintf(rank_s, sizeof rank_s, "%u", sender_rank);
  wsync_option_t o5 = WSYNC_OPTION("num_senders", senders_s), o6 = WSYNC_OPTION("sender_rank", rank_s),
                 o7 = WSYNC_OPTION("sender0_store", sender0_store);
  if (senders > 1) {
    opts[nopts++] = o5;
    opts[nopts++] = o6;
    if (sender0_store) opts[nopts++] = o7;
  }
  for (uint64_t i = 0; i < nextra; ++i) opts[nopts++] = extra[i];
  wsync_group_config_t cfg = WSYNC_GROUP_CONFIG_INIT;
  cfg.num_receivers = receivers;
  cfg.group_name = "demo";
  cfg.store_addr = store;
  cfg.transport = transport != NULL ? transport : tls != NULL ? "ucx" : NULL; /* --tls means UCX */
  cfg.adapter = "native";
  cfg.options = opts;
  cfg.num_options = nopts;
  printf("trainer: model of %zu tensors, %.2f GB; waiting for %u engine(s)\n", n, total / 1e9, receivers);
  fflush(stdout);
  wsync_group_t* g = NULL;
  wsync_status_t st = wsync_group_init(&cfg, &g);
  free(opts); /* init copied the options */
  free_options(extra, nextra, 0);
  if (st != WSYNC_OK) {
    free_model(data, n);
    return die("wsync_group_init", st);
  }
  printf("trainer: group 'demo' up, store at %s\n", wsync_group_store_addr(g));
  fflush(stdout);

  wsync_tensor_t* t = calloc(n, sizeof *t);
  wsync_tensor_t* mine = calloc(BATCH, sizeof *mine); /* (many senders: this rank's boxes of a batch) */
  int failed_in_a_row = 0;
  if (first == 0) first = 1;
  for (unsigned v = first; v < first + versions || (until_file != NULL && access(until_file, F_OK) != 0); ++v) {
    for (size_t i = 0; i < n; ++i) {
      if (spec[i].nbytes) synth_fill(&spec[i], v, data[i]); /* "train a step" */
      wsync_tensor_t d = WSYNC_TENSOR_INIT;
      d.name = spec[i].name;
      d.dtype = spec[i].dtype;
      d.ndim = spec[i].ndim;
      memcpy(d.shape, spec[i].shape, sizeof d.shape);
      d.data = data[i];
      d.nbytes = spec[i].nbytes;
      t[i] = d;
    }
    double t0 = now_s();
    for (size_t off = 0; off < n; off += BATCH) {
      size_t cnt = n - off < BATCH ? n - off : BATCH, held = 0;
      if (senders > 1) /* (every rank's batch i holds the same tensors' boxes) */
        for (size_t i = off; i < off + cnt; ++i) {
          wsync_tensor_t d = t[i];
          if (slice_rows(&d, spec[i].shape, senders, sender_rank)) mine[held++] = d;
        }
      st = senders > 1 ? wsync_group_send_batch(g, mine, held, -1) : wsync_group_send_batch(g, t + off, cnt, -1);
      if (st != WSYNC_OK) break;
      /* (the third batch, or the last when there are fewer: with the default two staging buffers
       * its send_batch returned once the first batch was delivered, so every engine holds part of
       * version v, and must report its loss) */
      if (v == die_in && off / BATCH == ((n - 1) / BATCH < 2 ? (n - 1) / BATCH : 2)) {
        printf("trainer: dying in version %u (--die-in)\n", v);
        fflush(stdout);
        raise(SIGKILL);
      }
    }
    if (st != WSYNC_OK) {
      die("wsync_group_send_batch", st);
      break;
    }
    st = wsync_group_finalize(g, v, -1);
    if (st == WSYNC_ERR_PEER_FAILED && keep_going) { /* engines left (elastic): the group goes on */
      printf("trainer: version %u failed: %s: %s\n", v, wsync_status_name(st), wsync_last_error());
      print_member_events(g);
      if (++failed_in_a_row <= 3) {
        st = WSYNC_OK;
        pause_ms(interval_ms);
        continue;
      }
    }
    if (st != WSYNC_OK) {
      die("wsync_group_finalize", st);
      break;
    }
    failed_in_a_row = 0;
    double dt = now_s() - t0;
    wsync_group_stats_t now = WSYNC_GROUP_STATS_INIT;
    wsync_group_get_stats(g, &now); /* option membership=elastic: engines that failed were removed */
    printf("trainer: version %u committed on %u engine(s): %zu tensors, %.2f GB in %.2f s (%.2f GB/s per engine)\n", v,
           now.members, n, total / 1e9, dt, total / 1e9 / dt);
    if (keep_going) printf("trainer: version %u committed at t=%.3f\n", v, wall_s()); /* (a soak's clock) */
    print_member_events(g);
    pause_ms(interval_ms);
  }
  print_member_events(g); /* (those of the last pause) */
  if (st == WSYNC_OK) {
    wsync_group_stats_t s = WSYNC_GROUP_STATS_INIT;
    wsync_group_get_stats(g, &s);
    printf("trainer: done: %llu updates, %llu buckets, staging %.0f MiB\n", (unsigned long long)s.updates,
           (unsigned long long)s.buckets, s.staging_bytes / 1048576.0);
  }
  wsync_group_destroy(g);
  free_model(data, n);
  free(t);
  free(mine);
  return st == WSYNC_OK ? 0 : 1;
}
