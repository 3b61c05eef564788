/* wsync_list_plugins and wsync_plugin_dirs (ABI 1.2) through the public C ABI only: the argument
 * checks, the struct_size contract of the output array (an older, shorter struct is stepped by
 * its own size and nothing past it is written), the statuses and errors of the deliberately
 * broken test plugins (build/lib/wsync-testing), shadowing and the search order. */
#define _POSIX_C_SOURCE 200809L
#include "abi_test_util.h"

#include <unistd.h> /* rmdir */

#include "wsync_plugin.h"

#define GUARD_BYTE 0xa5
#define GUARD_LEN 64
#define MAX_PLUGINS 128

/* A plugin expected in build/lib/wsync-testing, and what the listing must say about it. */
typedef struct expected {
  int32_t kind;
  const char* name;
  wsync_status_t status;
  const char* error_part; /* a piece of the reason; NULL for a plugin that loads */
} expected_t;

static const expected_t kTesting[] = {
    {WSYNC_PLUGIN_KIND_TRANSPORT, "stub", WSYNC_OK, NULL},
    {WSYNC_PLUGIN_KIND_TRANSPORT, "v10", WSYNC_OK, NULL},
    {WSYNC_PLUGIN_KIND_TRANSPORT, "abi99", WSYNC_ERR_VERSION_MISMATCH, "plugin ABI 99"},
    {WSYNC_PLUGIN_KIND_TRANSPORT, "smalltable", WSYNC_ERR_VERSION_MISMATCH, "smaller than"},
    {WSYNC_PLUGIN_KIND_TRANSPORT, "noentry", WSYNC_ERR_NOT_FOUND, "wsync_transport_entry_v1"},
    {WSYNC_PLUGIN_KIND_TRANSPORT, "nocuda", WSYNC_ERR_NO_DEVICE, "no CUDA device"},
    {WSYNC_PLUGIN_KIND_TRANSPORT, "nullfn", WSYNC_ERR_UNSUPPORTED, "send_post"},
    {WSYNC_PLUGIN_KIND_ADAPTER, "stub", WSYNC_OK, NULL},
    {WSYNC_PLUGIN_KIND_ADAPTER, "abi99", WSYNC_ERR_VERSION_MISMATCH, "plugin ABI 99"},
};
#define NUM_TESTING (sizeof kTesting / sizeof kTesting[0])

static int starts_with(const char* s, const char* prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The full listing into `infos` (MAX_PLUGINS entries, current struct size); returns the count. */
static uint64_t list_all(wsync_plugin_info_t* infos) {
  const wsync_plugin_info_t init = WSYNC_PLUGIN_INFO_INIT;
  uint64_t i, count = 0;
  for (i = 0; i < MAX_PLUGINS; ++i) infos[i] = init;
  assert_status(wsync_list_plugins(infos, MAX_PLUGINS, &count), WSYNC_OK);
  assert_true(count <= MAX_PLUGINS);
  return count;
}

/* The index of the first entry of this kind and name at or after `from`, or -1. */
static long find_plugin(const wsync_plugin_info_t* infos, uint64_t count, uint64_t from, int32_t kind,
                        const char* name) {
  uint64_t i;
  for (i = from; i < count; ++i)
    if (infos[i].kind == kind && strcmp(infos[i].name, name) == 0) return (long)i;
  return -1;
}

static void capacity_zero_gives_the_count(void** state) {
  wsync_plugin_info_t infos[MAX_PLUGINS];
  uint64_t count = 12345, again;
  (void)state;
  setenv("WSYNC_PLUGIN_PATH", "", 1);
  assert_status(wsync_list_plugins(NULL, 0, &count), WSYNC_OK);
  assert_string_equal(wsync_last_error(), "");
  /* The bundled folder beside libwsync always has at least the native adapter. */
  assert_true(count >= 1);
  assert_true(count <= MAX_PLUGINS);
  again = list_all(infos);
  assert_int_equal(again, count);
  assert_true(find_plugin(infos, again, 0, WSYNC_PLUGIN_KIND_ADAPTER, "native") >= 0);
  /* A capacity of 0 with a non-NULL array writes nothing either. */
  memset(infos, GUARD_BYTE, sizeof infos[0]);
  assert_status(wsync_list_plugins(infos, 0, &again), WSYNC_OK);
  assert_int_equal(again, count);
  assert_int_equal(((const unsigned char*)infos)[0], GUARD_BYTE);
}

static void bad_arguments_are_refused_with_a_message(void** state) {
  wsync_plugin_info_t infos[2] = {WSYNC_PLUGIN_INFO_INIT, WSYNC_PLUGIN_INFO_INIT};
  uint64_t count = 77;
  (void)state;
  assert_status(wsync_list_plugins(NULL, 0, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "count");
  assert_status(wsync_list_plugins(infos, 2, NULL), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "count");
  assert_status(wsync_list_plugins(NULL, 2, &count), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "infos");
  /* An uninitialised array: struct_size 0 cannot be stepped through. */
  infos[0].struct_size = 0;
  assert_status(wsync_list_plugins(infos, 2, &count), WSYNC_ERR_INVALID_ARGUMENT);
  assert_contains(wsync_last_error(), "struct_size");
  assert_int_equal(infos[0].struct_size, 0);
  assert_null(infos[0].name);
  /* The failed calls leave *count alone; a good call afterwards clears the error. */
  assert_int_equal(count, 77);
  assert_status(wsync_list_plugins(NULL, 0, &count), WSYNC_OK);
  assert_string_equal(wsync_last_error(), "");
}

/* A caller built when the struct ended at `caps`: entries are stepped by that size, each gets
 * exactly that many bytes, and the bytes around the array stay as they were. */
static void older_struct_size_is_honoured(void** state) {
  const uint32_t old_size = (uint32_t)WSYNC_STRUCT_SIZE(wsync_plugin_info_t, caps);
  wsync_plugin_info_t full[MAX_PLUGINS];
  char names[MAX_PLUGINS][64];
  int32_t kinds[MAX_PLUGINS];
  uint64_t caps[MAX_PLUGINS];
  uint64_t count, capacities[2], capacity, got = 0, i;
  unsigned char* buf;
  size_t bytes, b, round;
  (void)state;
  assert_true(old_size < sizeof(wsync_plugin_info_t));
  abi_use_testing_plugins(); /* several entries, so the stepping shows */
  count = list_all(full);
  assert_true(count >= NUM_TESTING);
  for (i = 0; i < count; ++i) { /* the strings live only until the next listing: copy them */
    snprintf(names[i], sizeof names[i], "%s", full[i].name);
    kinds[i] = full[i].kind;
    caps[i] = full[i].caps;
  }

  /* Room for every entry, then a capacity smaller than the count: the array is filled and *count
   * still says how many exist. */
  capacities[0] = count;
  capacities[1] = count - 2;
  for (round = 0; round < 2; ++round) {
    capacity = capacities[round];
    bytes = GUARD_LEN + (size_t)capacity * old_size + GUARD_LEN;
    buf = (unsigned char*)malloc(bytes);
    assert_non_null(buf);
    memset(buf, GUARD_BYTE, bytes);
    memcpy(buf + GUARD_LEN, &old_size, sizeof old_size); /* only infos[0].struct_size is read */
    assert_status(wsync_list_plugins((wsync_plugin_info_t*)(buf + GUARD_LEN), capacity, &got), WSYNC_OK);
    assert_int_equal(got, count);
    for (b = 0; b < GUARD_LEN; ++b) {
      assert_int_equal(buf[b], GUARD_BYTE);
      assert_int_equal(buf[GUARD_LEN + (size_t)capacity * old_size + b], GUARD_BYTE);
    }
    for (i = 0; i < capacity && i < count; ++i) {
      /* Read by field offsets: an entry of the older size is not a whole wsync_plugin_info_t. */
      const unsigned char* e = buf + GUARD_LEN + (size_t)i * old_size;
      uint32_t size;
      int32_t kind;
      const char* name;
      const char* error;
      uint64_t c;
      memcpy(&size, e + offsetof(wsync_plugin_info_t, struct_size), sizeof size);
      memcpy(&kind, e + offsetof(wsync_plugin_info_t, kind), sizeof kind);
      memcpy(&name, e + offsetof(wsync_plugin_info_t, name), sizeof name);
      memcpy(&error, e + offsetof(wsync_plugin_info_t, error), sizeof error);
      memcpy(&c, e + offsetof(wsync_plugin_info_t, caps), sizeof c);
      assert_int_equal(size, old_size);
      assert_int_equal(kind, kinds[i]);
      assert_non_null(name);
      assert_string_equal(name, names[i]);
      assert_non_null(error);
      assert_true(c == caps[i]);
    }
    free(buf);
  }
}

/* A caller built against a newer header (a longer struct): the fields this library knows are
 * written, the rest of each entry is left alone. */
static void newer_struct_size_is_stepped_through(void** state) {
  const uint32_t new_size = (uint32_t)sizeof(wsync_plugin_info_t) + 16;
  uint64_t count = 0, got = 0, i;
  unsigned char* buf;
  size_t bytes, b, round;
  (void)state;
  abi_use_testing_plugins();
  assert_status(wsync_list_plugins(NULL, 0, &count), WSYNC_OK);
  assert_true(count >= 2);
  bytes = (size_t)count * new_size + GUARD_LEN;
  buf = (unsigned char*)malloc(bytes);
  assert_non_null(buf);
  memset(buf, GUARD_BYTE, bytes);
  memcpy(buf, &new_size, sizeof new_size);
  for (round = 0; round < 2; ++round) { /* the same array twice: it is stepped the same way again */
    assert_status(wsync_list_plugins((wsync_plugin_info_t*)buf, count, &got), WSYNC_OK);
    assert_int_equal(got, count);
    for (i = 0; i < count; ++i) {
      const wsync_plugin_info_t* e = (const wsync_plugin_info_t*)(buf + (size_t)i * new_size);
      assert_int_equal(e->struct_size, new_size); /* the caller's size, not the library's */
      assert_non_null(e->name);
      assert_non_null(e->path);
      assert_true(e->kind == WSYNC_PLUGIN_KIND_TRANSPORT || e->kind == WSYNC_PLUGIN_KIND_ADAPTER);
      for (b = sizeof(wsync_plugin_info_t); b < new_size; ++b)
        assert_int_equal(((const unsigned char*)e)[b], GUARD_BYTE);
    }
    for (b = 0; b < GUARD_LEN; ++b) assert_int_equal(buf[(size_t)count * new_size + b], GUARD_BYTE);
  }
  free(buf);
}

/* A struct_size that ends at a 4-byte field (an older header's struct ending at abi_major): the
 * entries lie as in that caller's C array, 8-byte aligned, and the padding is not written. */
static void a_size_off_the_alignment_is_stepped_like_an_array(void** state) {
  const uint32_t size = (uint32_t)WSYNC_STRUCT_SIZE(wsync_plugin_info_t, abi_major);
  const size_t stride = ((size_t)size + 7u) & ~(size_t)7u;
  wsync_plugin_info_t full[MAX_PLUGINS];
  uint64_t count, got = 0, i;
  unsigned char* buf;
  size_t b;
  (void)state;
  assert_true(size % 8 != 0);
  abi_use_testing_plugins();
  count = list_all(full);
  buf = (unsigned char*)malloc((size_t)count * stride);
  assert_non_null(buf);
  memset(buf, GUARD_BYTE, (size_t)count * stride);
  memcpy(buf, &size, sizeof size);
  assert_status(wsync_list_plugins((wsync_plugin_info_t*)buf, count, &got), WSYNC_OK);
  assert_int_equal(got, count);
  for (i = 0; i < count; ++i) {
    const unsigned char* e = buf + (size_t)i * stride;
    uint32_t s, major;
    const char* name;
    memcpy(&s, e + offsetof(wsync_plugin_info_t, struct_size), sizeof s);
    memcpy(&name, e + offsetof(wsync_plugin_info_t, name), sizeof name);
    memcpy(&major, e + offsetof(wsync_plugin_info_t, abi_major), sizeof major);
    assert_int_equal(s, size);
    assert_non_null(name);
    assert_int_equal(major, full[i].abi_major);
    for (b = size; b < stride; ++b) assert_int_equal(e[b], GUARD_BYTE);
  }
  free(buf);
}

static void broken_plugins_are_listed_with_their_status(void** state) {
  wsync_plugin_info_t infos[MAX_PLUGINS];
  uint64_t count, i, last_testing = 0, first_other = MAX_PLUGINS;
  size_t k;
  char file[256];
  (void)state;
  abi_use_testing_plugins();
  count = list_all(infos);
  for (k = 0; k < NUM_TESTING; ++k) {
    const expected_t* x = &kTesting[k];
    long at = find_plugin(infos, count, 0, x->kind, x->name);
    const wsync_plugin_info_t* p;
    if (at < 0) {
      print_error("the listing lacks %s '%s' from %s\n", x->kind == WSYNC_PLUGIN_KIND_ADAPTER ? "adapter" : "transport",
                  x->name, WSYNC_TESTING_PLUGIN_DIR);
      fail();
    }
    p = &infos[at];
    assert_int_equal(p->struct_size, WSYNC_PLUGIN_INFO_STRUCT_SIZE);
    assert_true(starts_with(p->path, WSYNC_TESTING_PLUGIN_DIR "/"));
    snprintf(file, sizeof file, "/libwsync_%s_%s.so", x->kind == WSYNC_PLUGIN_KIND_ADAPTER ? "adapter" : "transport",
             x->name);
    assert_true(ends_with(p->path, file));
    assert_status(p->status, x->status);
    assert_int_equal(p->shadowed, 0);
    assert_non_null(p->version);
    assert_non_null(p->detail);
    assert_non_null(p->error);
    if (x->status == WSYNC_OK) {
      assert_string_equal(p->error, "");
      assert_string_equal(p->version, "0.0.0-test");
      assert_int_equal(p->abi_major, WSYNC_PLUGIN_ABI_VERSION);
    } else {
      assert_true(strlen(p->error) > 0);
      assert_contains(p->error, x->error_part);
      assert_contains(p->error, file + 1); /* the reason names the file */
      assert_string_equal(p->version, "");
      assert_int_equal(p->abi_major, 0);
    }
  }
  /* Table details of the ones that load. */
  i = (uint64_t)find_plugin(infos, count, 0, WSYNC_PLUGIN_KIND_TRANSPORT, "stub");
  assert_true(infos[i].caps == WSYNC_TRANSPORT_CAP_HOST_MEMORY);
  assert_int_equal(infos[i].abi_minor, WSYNC_PLUGIN_ABI_MINOR);
  i = (uint64_t)find_plugin(infos, count, 0, WSYNC_PLUGIN_KIND_TRANSPORT, "v10");
  assert_int_equal(infos[i].abi_minor, 0); /* its table ends at destroy */
  assert_string_equal(infos[i].detail, "");
  i = (uint64_t)find_plugin(infos, count, 0, WSYNC_PLUGIN_KIND_ADAPTER, "stub");
  assert_true(infos[i].caps == WSYNC_ADAPTER_CAP_INBAND_MANIFEST);
  /* Search order: every file of WSYNC_PLUGIN_PATH before the bundled folder's. */
  for (i = 0; i < count; ++i) {
    if (starts_with(infos[i].path, WSYNC_TESTING_PLUGIN_DIR "/")) last_testing = i;
    else if (first_other == MAX_PLUGINS) first_other = i;
  }
  assert_true(first_other == MAX_PLUGINS || last_testing < first_other);
  assert_string_equal(wsync_last_error(), ""); /* refusals are data, not a failed call */
}

/* The same folder twice: each file of the second pass loses to the first. */
static void a_later_copy_is_shadowed(void** state) {
  wsync_plugin_info_t infos[MAX_PLUGINS];
  uint64_t count;
  long first, second;
  (void)state;
  setenv("WSYNC_PLUGIN_PATH", WSYNC_TESTING_PLUGIN_DIR ":" WSYNC_TESTING_PLUGIN_DIR, 1);
  count = list_all(infos);
  first = find_plugin(infos, count, 0, WSYNC_PLUGIN_KIND_TRANSPORT, "stub");
  assert_true(first >= 0);
  second = find_plugin(infos, count, (uint64_t)first + 1, WSYNC_PLUGIN_KIND_TRANSPORT, "stub");
  assert_true(second > first);
  assert_int_equal(infos[first].shadowed, 0);
  assert_int_equal(infos[second].shadowed, 1);
  assert_status(infos[second].status, WSYNC_OK); /* shadowed, but described like any other */
  /* A refused plugin is shadowed the same way. */
  first = find_plugin(infos, count, 0, WSYNC_PLUGIN_KIND_TRANSPORT, "abi99");
  second = find_plugin(infos, count, (uint64_t)first + 1, WSYNC_PLUGIN_KIND_TRANSPORT, "abi99");
  assert_true(first >= 0 && second > first);
  assert_int_equal(infos[first].shadowed, 0);
  assert_int_equal(infos[second].shadowed, 1);
  /* Kinds are separate name spaces: the adapter 'stub' is not shadowed by the transport 'stub'. */
  first = find_plugin(infos, count, 0, WSYNC_PLUGIN_KIND_ADAPTER, "stub");
  assert_true(first >= 0);
  assert_int_equal(infos[first].shadowed, 0);
}

/* A file that does not even dlopen (not an ELF file) in an earlier folder: a search by name passes
 * over it, so it shadows nothing; it is listed as refused, and the real plugin is not shadowed. */
static void a_file_that_does_not_open_shadows_nothing(void** state) {
  wsync_plugin_info_t infos[MAX_PLUGINS];
  char dir[] = "/tmp/wsync-abi-plugins-XXXXXX";
  char junk[256], path[512];
  uint64_t count;
  long first, second;
  FILE* f;
  (void)state;
  assert_non_null(mkdtemp(dir));
  snprintf(junk, sizeof junk, "%s/libwsync_transport_stub.so", dir);
  f = fopen(junk, "w");
  assert_non_null(f);
  fputs("not a shared object\n", f);
  fclose(f);
  snprintf(path, sizeof path, "%s:%s", dir, WSYNC_TESTING_PLUGIN_DIR);
  setenv("WSYNC_PLUGIN_PATH", path, 1);
  count = list_all(infos);
  remove(junk);
  rmdir(dir);
  first = find_plugin(infos, count, 0, WSYNC_PLUGIN_KIND_TRANSPORT, "stub");
  assert_true(first >= 0);
  assert_string_equal(infos[first].path, junk);
  assert_status(infos[first].status, WSYNC_ERR_NOT_FOUND);
  assert_contains(infos[first].error, "dlopen");
  assert_int_equal(infos[first].shadowed, 0);
  second = find_plugin(infos, count, (uint64_t)first + 1, WSYNC_PLUGIN_KIND_TRANSPORT, "stub");
  assert_true(second > first);
  assert_status(infos[second].status, WSYNC_OK);
  assert_int_equal(infos[second].shadowed, 0); /* this is the one wsync loads */
}

static void plugin_dirs_in_search_order(void** state) {
  const char* dirs;
  (void)state;
  abi_use_testing_plugins();
  dirs = wsync_plugin_dirs();
  assert_non_null(dirs);
  assert_true(starts_with(dirs, WSYNC_TESTING_PLUGIN_DIR ":"));
  assert_true(ends_with(dirs, "/wsync")); /* then the folder beside libwsync */
  setenv("WSYNC_PLUGIN_PATH", "/nonexistent/a::" WSYNC_TESTING_PLUGIN_DIR, 1); /* empty entries are skipped */
  dirs = wsync_plugin_dirs();
  assert_true(starts_with(dirs, "/nonexistent/a:" WSYNC_TESTING_PLUGIN_DIR ":"));
  setenv("WSYNC_PLUGIN_PATH", "", 1);
  dirs = wsync_plugin_dirs();
  assert_non_null(dirs);
  assert_null(strstr(dirs, WSYNC_TESTING_PLUGIN_DIR));
  assert_true(ends_with(dirs, "/wsync"));
  assert_null(strchr(dirs, ':')); /* one folder only */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(capacity_zero_gives_the_count),
      cmocka_unit_test(bad_arguments_are_refused_with_a_message),
      cmocka_unit_test(older_struct_size_is_honoured),
      cmocka_unit_test(newer_struct_size_is_stepped_through),
      cmocka_unit_test(a_size_off_the_alignment_is_stepped_like_an_array),
      cmocka_unit_test(broken_plugins_are_listed_with_their_status),
      cmocka_unit_test(a_later_copy_is_shadowed),
      cmocka_unit_test(a_file_that_does_not_open_shadows_nothing),
      cmocka_unit_test(plugin_dirs_in_search_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
