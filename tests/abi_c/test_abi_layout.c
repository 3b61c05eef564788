/* The pinned layout of every public struct (abi_layout.h), at run time: which field of which
 * struct moved or changed size, each *_STRUCT_SIZE constant against sizeof and against the pinned
 * offsets, the plugin table sizes of each minor (WSYNC_TRANSPORT_V1_x_SIZE, WSYNC_ADAPTER_V1_x_SIZE)
 * and every *_INIT macro's struct_size. abi_layout_static.c, linked in, asserts the same numbers
 * at build time (C11). The pinned numbers are those of LP64 Linux; elsewhere only the
 * platform-independent checks run. */
#define _POSIX_C_SOURCE 200809L
#include "abi_layout.h"
#include "abi_test_util.h"

int abi_layout_static_checked(void); /* abi_layout_static.c: 1 when its asserts were compiled */

#if defined(__LP64__)
#define ABI_PINNED 1
#else
#define ABI_PINNED 0
#endif

/* ---- the table as arrays ------------------------------------------------------------------- */

typedef struct struct_row {
  const char* type;
  size_t pinned_size;
  size_t size;
} struct_row_t;

typedef struct field_row {
  const char* type;
  const char* field;
  size_t pinned_offset, pinned_size; /* from the table */
  size_t offset, size;               /* what this compiler makes of the header */
} field_row_t;

typedef struct const_row {
  const char* type;
  const char* name;
  const char* field; /* the field it must end at */
  size_t pinned_value;
  size_t value;            /* the constant as the header defines it */
  size_t field_end;        /* offsetof + sizeof of `field` by this compiler */
  size_t type_size;        /* sizeof(type) */
} const_row_t;

#define ABI_NONE2(a, b)
#define ABI_NONE4(a, b, c, d)

#define ABI_S(T, sz) {#T, (size_t)(sz), sizeof(T)},
static const struct_row_t g_structs[] = {WSYNC_ABI_LAYOUT(ABI_S, ABI_NONE4, ABI_NONE4, ABI_NONE2)};
#undef ABI_S

#define ABI_F(T, f, off, sz) {#T, #f, (size_t)(off), (size_t)(sz), offsetof(T, f), sizeof(((T*)0)->f)},
static const field_row_t g_fields[] = {WSYNC_ABI_LAYOUT(ABI_NONE2, ABI_F, ABI_NONE4, ABI_NONE2)};
#undef ABI_F

#define ABI_C(T, c, v, f) {#T, #c, #f, (size_t)(v), (size_t)(c), offsetof(T, f) + sizeof(((T*)0)->f), sizeof(T)},
static const const_row_t g_consts[] = {WSYNC_ABI_LAYOUT(ABI_NONE2, ABI_NONE4, ABI_C, ABI_NONE2)};
#undef ABI_C

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const struct_row_t* find_struct(const char* type) {
  size_t i;
  for (i = 0; i < COUNT(g_structs); ++i)
    if (strcmp(g_structs[i].type, type) == 0) return &g_structs[i];
  return NULL;
}

static const field_row_t* find_field(const char* type, const char* field) {
  size_t i;
  for (i = 0; i < COUNT(g_fields); ++i)
    if (strcmp(g_fields[i].type, type) == 0 && strcmp(g_fields[i].field, field) == 0) return &g_fields[i];
  return NULL;
}

/* The last field row of `type` (the table lists fields in declaration order). */
static const field_row_t* last_field(const char* type) {
  const field_row_t* last = NULL;
  size_t i;
  for (i = 0; i < COUNT(g_fields); ++i)
    if (strcmp(g_fields[i].type, type) == 0) last = &g_fields[i];
  return last;
}

/* The *_STRUCT_SIZE-like constant of `type`: the one that ends at its last field. */
static const const_row_t* full_size_const(const char* type) {
  const field_row_t* last = last_field(type);
  size_t i;
  for (i = 0; last != NULL && i < COUNT(g_consts); ++i)
    if (strcmp(g_consts[i].type, type) == 0 && strcmp(g_consts[i].field, last->field) == 0) return &g_consts[i];
  return NULL;
}

/* Natural alignment of a field from its size: scalars are aligned to their size, arrays and
 * anything larger than 8 bytes (here: wsync_tensor_t.shape) to 8. */
static size_t natural_align(size_t size) {
  if (size == 1 || size == 2 || size == 4 || size == 8) return size;
  return 8;
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* ---- the pinned numbers -------------------------------------------------------------------- */

static void every_field_is_where_it_was_pinned(void** state) {
  size_t i;
  int bad = 0;
  (void)state;
  if (!ABI_PINNED) {
    print_message("not LP64: the pinned offsets are not checked on this platform\n");
    skip();
  }
  assert_int_equal(abi_layout_static_checked(), 1); /* the build-time asserts ran as well */
  for (i = 0; i < COUNT(g_fields); ++i) {
    const field_row_t* f = &g_fields[i];
    if (f->offset != f->pinned_offset) {
      print_error("%s.%s moved: offset %zu, pinned at %zu\n", f->type, f->field, f->offset, f->pinned_offset);
      ++bad;
    }
    if (f->size != f->pinned_size) {
      print_error("%s.%s changed size: %zu bytes, pinned at %zu\n", f->type, f->field, f->size, f->pinned_size);
      ++bad;
    }
  }
  for (i = 0; i < COUNT(g_structs); ++i) {
    const struct_row_t* s = &g_structs[i];
    if (s->size != s->pinned_size) {
      print_error("sizeof(%s) is %zu, pinned at %zu\n", s->type, s->size, s->pinned_size);
      ++bad;
    }
  }
  if (bad) {
    print_error("%d layout difference(s) from the pinned ABI 1.%d layout (tests/abi_c/abi_layout.h)\n", bad,
                WSYNC_ABI_VERSION_MINOR);
    fail();
  }
}

static void size_constants_are_pinned(void** state) {
  size_t i;
  int bad = 0;
  (void)state;
  for (i = 0; i < COUNT(g_consts); ++i) {
    const const_row_t* c = &g_consts[i];
    const field_row_t* f = find_field(c->type, c->field);
    const field_row_t* last = last_field(c->type);
    if (f == NULL) { /* a table typo, not an ABI change */
      print_error("%s: the table has no row for %s.%s\n", c->name, c->type, c->field);
      ++bad;
      continue;
    }
    /* WSYNC_STRUCT_SIZE(type, field) of the header's own definition */
    if (c->value != c->field_end) {
      print_error("%s = %zu does not end at %s.%s (which ends at %zu)\n", c->name, c->value, c->type, c->field,
                  c->field_end);
      ++bad;
    }
    /* against the pinned numbers: the value, and the end of the pinned field */
    if (ABI_PINNED && c->value != c->pinned_value) {
      print_error("%s = %zu, pinned at %zu\n", c->name, c->value, c->pinned_value);
      ++bad;
    }
    if (c->pinned_value != f->pinned_offset + f->pinned_size) {
      print_error("table: %s pinned at %zu but %s.%s is pinned to end at %zu\n", c->name, c->pinned_value, c->type,
                  c->field, f->pinned_offset + f->pinned_size);
      ++bad;
    }
    /* the constant of the struct's last field is its sizeof: no hidden tail padding */
    if (f == last && c->value != c->type_size) {
      print_error("%s = %zu but sizeof(%s) = %zu\n", c->name, c->value, c->type, c->type_size);
      ++bad;
    }
  }
  if (bad) fail();
}

/* Each minor's table size ends right before the first field of the next minor, so
 * WSYNC_HAS_FIELD sees exactly the functions of that minor. */
static void plugin_table_sizes_of_each_minor(void** state) {
  wsync_transport_v1_t t;
  wsync_adapter_v1_t a;
  const wsync_transport_v1_t* tp = &t;
  const wsync_adapter_v1_t* ap = &a;
  (void)state;
  memset(&t, 0, sizeof t);
  memset(&a, 0, sizeof a);

  assert_int_equal(WSYNC_TRANSPORT_V1_0_SIZE, offsetof(wsync_transport_v1_t, register_staging));
  assert_int_equal(WSYNC_TRANSPORT_V1_1_SIZE, offsetof(wsync_transport_v1_t, get_event_fd));
  assert_int_equal(WSYNC_TRANSPORT_V1_2_SIZE, offsetof(wsync_transport_v1_t, progress));
  assert_int_equal(WSYNC_TRANSPORT_V1_4_SIZE, offsetof(wsync_transport_v1_t, connect_peer));
  assert_int_equal(WSYNC_TRANSPORT_V1_5_SIZE, sizeof(wsync_transport_v1_t));
  assert_int_equal(WSYNC_ADAPTER_V1_0_SIZE, offsetof(wsync_adapter_v1_t, build_requests));
  assert_int_equal(WSYNC_ADAPTER_V1_1_SIZE, offsetof(wsync_adapter_v1_t, get_needs));
  assert_int_equal(WSYNC_ADAPTER_V1_2_SIZE, offsetof(wsync_adapter_v1_t, take_reply));
  assert_int_equal(WSYNC_ADAPTER_V1_3_SIZE, offsetof(wsync_adapter_v1_t, held));
  assert_int_equal(WSYNC_ADAPTER_V1_7_SIZE, sizeof(wsync_adapter_v1_t));
  if (ABI_PINNED) {
    assert_int_equal(WSYNC_TRANSPORT_V1_0_SIZE, find_field("wsync_transport_v1_t", "register_staging")->pinned_offset);
    assert_int_equal(WSYNC_TRANSPORT_V1_1_SIZE, find_field("wsync_transport_v1_t", "get_event_fd")->pinned_offset);
    assert_int_equal(WSYNC_TRANSPORT_V1_2_SIZE, find_field("wsync_transport_v1_t", "progress")->pinned_offset);
    assert_int_equal(WSYNC_TRANSPORT_V1_4_SIZE, find_field("wsync_transport_v1_t", "connect_peer")->pinned_offset);
    assert_int_equal(WSYNC_TRANSPORT_V1_5_SIZE, find_struct("wsync_transport_v1_t")->pinned_size);
    assert_int_equal(WSYNC_ADAPTER_V1_0_SIZE, find_field("wsync_adapter_v1_t", "build_requests")->pinned_offset);
    assert_int_equal(WSYNC_ADAPTER_V1_1_SIZE, find_field("wsync_adapter_v1_t", "get_needs")->pinned_offset);
    assert_int_equal(WSYNC_ADAPTER_V1_2_SIZE, find_field("wsync_adapter_v1_t", "take_reply")->pinned_offset);
    assert_int_equal(WSYNC_ADAPTER_V1_3_SIZE, find_field("wsync_adapter_v1_t", "held")->pinned_offset);
    assert_int_equal(WSYNC_ADAPTER_V1_7_SIZE, find_struct("wsync_adapter_v1_t")->pinned_size);
    assert_int_equal(WSYNC_TRANSPORT_V1_0_SIZE, 104);
    assert_int_equal(WSYNC_TRANSPORT_V1_1_SIZE, 120);
    assert_int_equal(WSYNC_TRANSPORT_V1_2_SIZE, 168);
    assert_int_equal(WSYNC_ADAPTER_V1_0_SIZE, 56);
    assert_int_equal(WSYNC_ADAPTER_V1_1_SIZE, 64);
    assert_int_equal(WSYNC_ADAPTER_V1_2_SIZE, 80);
    assert_int_equal(WSYNC_ADAPTER_V1_3_SIZE, 88);
    assert_int_equal(WSYNC_ADAPTER_V1_7_SIZE, 96);
  }

  t.struct_size = (uint32_t)WSYNC_TRANSPORT_V1_0_SIZE; /* a plugin built against the 1.0 header */
  assert_true(WSYNC_HAS_FIELD(tp, wsync_transport_v1_t, destroy));
  assert_false(WSYNC_HAS_FIELD(tp, wsync_transport_v1_t, register_staging));
  t.struct_size = (uint32_t)WSYNC_TRANSPORT_V1_1_SIZE;
  assert_true(WSYNC_HAS_FIELD(tp, wsync_transport_v1_t, get_property));
  assert_false(WSYNC_HAS_FIELD(tp, wsync_transport_v1_t, get_event_fd));
  t.struct_size = (uint32_t)WSYNC_TRANSPORT_V1_2_SIZE;
  assert_true(WSYNC_HAS_FIELD(tp, wsync_transport_v1_t, runtime_info));

  a.struct_size = (uint32_t)WSYNC_ADAPTER_V1_0_SIZE;
  assert_true(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, destroy));
  assert_false(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, build_requests));
  a.struct_size = (uint32_t)WSYNC_ADAPTER_V1_1_SIZE;
  assert_true(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, build_requests));
  assert_false(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, get_needs));
  a.struct_size = (uint32_t)WSYNC_ADAPTER_V1_2_SIZE;
  assert_true(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, runtime_info));
  assert_false(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, take_reply));
  a.struct_size = (uint32_t)WSYNC_ADAPTER_V1_3_SIZE;
  assert_true(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, take_reply));
  assert_false(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, held));
  a.struct_size = (uint32_t)WSYNC_ADAPTER_V1_7_SIZE;
  assert_true(WSYNC_HAS_FIELD(ap, wsync_adapter_v1_t, held));
}

/* ---- *_INIT ---------------------------------------------------------------------------------- */

static void init_macros_set_struct_size(void** state) {
  int bad = 0;
  int seen = 0;
  (void)state;
#define ABI_I(T, init)                                                                                   \
  do {                                                                                                   \
    T v_ = init;                                                                                         \
    const const_row_t* c_ = full_size_const(#T);                                                         \
    ++seen;                                                                                              \
    if (c_ == NULL) {                                                                                    \
      print_error("%s has an INIT macro but no size constant ending at its last field\n", #T);          \
      ++bad;                                                                                             \
    } else if ((size_t)v_.struct_size != c_->value || (size_t)v_.struct_size != sizeof(T)) {             \
      print_error("the INIT macro of %s sets struct_size %u; %s = %zu, sizeof = %zu\n", #T,              \
                  (unsigned)v_.struct_size, c_->name, c_->value, sizeof(T));                              \
      ++bad;                                                                                             \
    } else if (ABI_PINNED && (size_t)v_.struct_size != find_struct(#T)->pinned_size) {                  \
      print_error("the INIT macro of %s sets struct_size %u, pinned %zu\n", #T, (unsigned)v_.struct_size, \
                  find_struct(#T)->pinned_size);                                                         \
      ++bad;                                                                                             \
    }                                                                                                    \
  } while (0);
  WSYNC_ABI_LAYOUT(ABI_NONE2, ABI_NONE4, ABI_NONE4, ABI_I)
#undef ABI_I
  assert_int_equal(seen, 16); /* every struct but iov, host, transport_v1 and adapter_v1 */
  if (bad) fail();
}

/* A few defaults the INIT macros promise (the rest of their fields: header_c99). */
static void init_macro_defaults(void** state) {
  wsync_tensor_t t = WSYNC_TENSOR_INIT;
  wsync_group_config_t g = WSYNC_GROUP_CONFIG_INIT;
  wsync_receiver_config_t r = WSYNC_RECEIVER_CONFIG_INIT;
  wsync_option_t o = WSYNC_OPTION("key", "value");
  (void)state;
  assert_int_equal(t.device_type, WSYNC_DEVICE_CPU);
  assert_int_equal(t.dtype, WSYNC_DTYPE_INVALID);
  assert_true(g.timeout_ms < 0);
  assert_true(r.timeout_ms < 0);
  assert_string_equal(o.key, "key");
  assert_string_equal(o.value, "value");
  assert_int_equal(o.reserved0, 0);
}

/* ---- the table itself is complete ------------------------------------------------------------ */

/* Each struct's rows start at 0, follow one another with only the padding natural alignment needs,
 * and end (rounded to the struct's alignment) at its sizeof: a field left out of the table, or
 * added to a header without a row, shows as a gap or a short struct. Every struct but wsync_iov_t
 * starts with uint32_t struct_size and has a size constant ending at its last field. */
static void table_covers_every_field(void** state) {
  size_t i, j;
  int bad = 0;
  (void)state;
  assert_int_equal(COUNT(g_structs), WSYNC_ABI_LAYOUT_NUM_STRUCTS);
  for (i = 0; i < COUNT(g_structs); ++i) {
    const struct_row_t* s = &g_structs[i];
    const field_row_t* first = NULL;
    size_t end = 0, max_align = 1, nfields = 0;
    for (j = 0; j < COUNT(g_fields); ++j) {
      const field_row_t* f = &g_fields[j];
      size_t a;
      if (strcmp(f->type, s->type) != 0) continue;
      a = natural_align(f->size);
      if (first == NULL) first = f;
      if (f->offset != round_up(end, a)) {
        print_error("%s.%s is at %zu, expected %zu after the previous field: a field is missing from the table "
                    "(tests/abi_c/abi_layout.h) or the rows are out of order\n",
                    s->type, f->field, f->offset, round_up(end, a));
        ++bad;
      }
      end = f->offset + f->size;
      if (a > max_align) max_align = a;
      ++nfields;
    }
    if (nfields == 0) {
      print_error("%s has no field rows\n", s->type);
      ++bad;
      continue;
    }
    if (round_up(end, max_align) != s->size) {
      print_error("the rows of %s end at %zu but sizeof is %zu: a field is missing from the table\n", s->type, end,
                  s->size);
      ++bad;
    }
    if (strcmp(s->type, "wsync_iov_t") == 0) {
      if (strcmp(first->field, "base") != 0 || nfields != 2) {
        print_error("wsync_iov_t is frozen as {base, len}\n");
        ++bad;
      }
      continue;
    }
    if (strcmp(first->field, "struct_size") != 0 || first->offset != 0 || first->size != 4) {
      print_error("%s does not start with uint32_t struct_size\n", s->type);
      ++bad;
    }
    if (full_size_const(s->type) == NULL) {
      print_error("%s has no size constant ending at its last field %s\n", s->type, last_field(s->type)->field);
      ++bad;
    }
  }
  if (bad) fail();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_field_is_where_it_was_pinned),
      cmocka_unit_test(size_constants_are_pinned),
      cmocka_unit_test(plugin_table_sizes_of_each_minor),
      cmocka_unit_test(init_macros_set_struct_size),
      cmocka_unit_test(init_macro_defaults),
      cmocka_unit_test(table_covers_every_field),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
