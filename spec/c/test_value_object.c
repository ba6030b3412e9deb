/* test_value_object.c -- ordered persistent objects: get/set against a model,
 * insertion order kept, old versions unchanged, small-to-wide transition, wide scale. */
#include "base/ob_value.h"
#include "test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* model: keys "k<id>" in insertion order with int values */
typedef struct model { int n; int ids[4096]; int64_t vals[4096]; } model;

static int model_find(const model *m, int id) {
  for (int i = 0; i < m->n; i++)
    if (m->ids[i] == id)
      return i;
  return -1;
}

static int matches(const ob_value *o, const model *m) {
  if ((int)ob_object_len(o) != m->n)
    return 0;
  char key[32];
  for (int i = 0; i < m->n; i++) {
    int len = snprintf(key, sizeof key, "k%d", m->ids[i]);
    ob_value *v = ob_object_get(o, key, (size_t)len);
    if (!v || ob_int_value(v) != m->vals[i])
      return 0;
    ob_value *k, *x;
    ob_object_at(o, (size_t)i, &k, &x);
    if (strcmp(ob_string_ptr(k), key) != 0 || x != v)
      return 0;
  }
  ob_object_iter it;
  ob_value *k, *x;
  int i = 0;
  ob_object_iter_init(&it, o);
  while (ob_object_iter_next(&it, &k, &x))
    if (ob_int_value(x) != m->vals[i++])
      return 0;
  return i == m->n && !ob_object_get(o, "absent", 6);
}

static void run_model(int nkeys, int steps) {
  static model m, saved[32];
  ob_value *versions[32];
  int nv = 0;
  memset(&m, 0, sizeof m);
  ob_value *o = ob_object();
  for (int s = 0; s < steps; s++) {
    int id = (int)(rnd() % (uint64_t)nkeys);
    int64_t val = (int64_t)(rnd() % 1000);
    char key[32];
    int len = snprintf(key, sizeof key, "k%d", id);
    o = ob_object_set(o, key, (size_t)len, ob_int(val));
    int at = model_find(&m, id);
    if (at < 0) {
      at = m.n++;
      m.ids[at] = id;
    }
    m.vals[at] = val;
    if (s % (steps / 30) == 0 && nv < 32) {
      versions[nv] = ob_ref(o);
      saved[nv++] = m;
    }
  }
  CHECK(matches(o, &m));
  int ok = 1;
  for (int v = 0; v < nv; v++) {
    ok &= matches(versions[v], &saved[v]);
    ob_unref(versions[v]);
  }
  CHECK(ok);
  ob_unref(o);
}

TEST(small_objects_match_model) { run_model(6, 300); }
TEST(objects_crossing_to_wide_match_model) { run_model(20, 600); }
TEST(wide_objects_match_model) { run_model(3000, 20000); }

TEST(existing_key_keeps_position) {
  ob_value *o = ob_object();
  o = ob_object_set(o, "b", 1, ob_int(1));
  o = ob_object_set(o, "a", 1, ob_int(2));
  o = ob_object_set(o, "b", 1, ob_int(3));
  ob_value *k, *v;
  ob_object_at(o, 0, &k, &v);
  CHECK_STR(ob_string_ptr(k), "b");
  CHECK_INT(ob_int_value(v), 3);
  ob_unref(o);
}

TEST(keys_with_nul_bytes_are_distinct) {
  ob_value *o = ob_object();
  o = ob_object_set(o, "a\0b", 3, ob_int(1));
  o = ob_object_set(o, "a", 1, ob_int(2));
  CHECK_INT(ob_object_len(o), 2);
  CHECK_INT(ob_int_value(ob_object_get(o, "a\0b", 3)), 1);
  CHECK(ob_object_get(o, "a\0c", 3) == NULL);
  ob_unref(o);
}

TEST(three_hundred_thousand_keys) {
  enum { N = 300000 };
  ob_value *o = ob_object();
  char key[32];
  for (int i = 0; i < N; i++) {
    int len = snprintf(key, sizeof key, "w%d", i);
    o = ob_object_set(o, key, (size_t)len, ob_int(i));
  }
  /* a kept version, then overwrite every other key in a copy */
  ob_value *copy = ob_ref(o);
  for (int i = 0; i < N; i += 2) {
    int len = snprintf(key, sizeof key, "w%d", i);
    copy = ob_object_set(copy, key, (size_t)len, ob_int(-i));
  }
  int ok = ob_object_len(o) == N && ob_object_len(copy) == N;
  for (int i = 0; i < N; i++) {
    int len = snprintf(key, sizeof key, "w%d", i);
    ob_value *a = ob_object_get(o, key, (size_t)len);
    ob_value *b = ob_object_get(copy, key, (size_t)len);
    ok &= a && ob_int_value(a) == i;
    ok &= b && ob_int_value(b) == (i % 2 ? i : -i);
    ob_value *k, *v;
    ob_object_at(o, (size_t)i, &k, &v);
    ok &= strcmp(ob_string_ptr(k), key) == 0;
  }
  CHECK(ok);
  ob_unref(o);
  ob_unref(copy);
}

TEST(equality_ignores_key_order_identity_does_not) {
  ob_value *a = ob_object_set(ob_object_set(ob_object(), "x", 1, ob_int(1)), "y", 1, ob_real(2.0));
  ob_value *b = ob_object_set(ob_object_set(ob_object(), "y", 1, ob_int(2)), "x", 1, ob_int(1));
  CHECK(ob_equal(a, b));
  CHECK(!ob_identical(a, b));
  CHECK(ob_identical(a, a));
  ob_unref(a);
  ob_unref(b);
}

int main(void) {
  RUN(small_objects_match_model);
  RUN(objects_crossing_to_wide_match_model);
  RUN(wide_objects_match_model);
  RUN(existing_key_keeps_position);
  RUN(keys_with_nul_bytes_are_distinct);
  RUN(three_hundred_thousand_keys);
  RUN(equality_ignores_key_order_identity_does_not);
  return TEST_END();
}
