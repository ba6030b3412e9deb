/* test_value_array.c -- persistent vectors: get/set/push against a plain C model,
 * old versions unchanged after every update, in-place updates when unshared. */
#include "base/ob_value.h"
#include "test.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int matches(const ob_value *a, const int64_t *model, size_t n) {
  if (ob_array_len(a) != n)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (ob_int_value(ob_array_get(a, i)) != model[i])
      return 0;
  return 1;
}

TEST(push_builds_in_order) {
  ob_value *a = ob_array();
  for (int i = 0; i < 100000; i++)
    a = ob_array_push(a, ob_int(i));
  CHECK_INT(ob_array_len(a), 100000);
  int ok = 1;
  for (int i = 0; i < 100000; i++)
    ok &= ob_int_value(ob_array_get(a, (size_t)i)) == i;
  CHECK(ok);
  CHECK_INT(ob_depth(a), 1);
  ob_unref(a);
}

TEST(old_versions_survive_push_and_set) {
  enum { N = 3000, KEEP = 40 };
  static int64_t model[N];
  ob_value *versions[KEEP];
  int64_t *models[KEEP];
  size_t lens[KEEP];
  int nv = 0;
  ob_value *a = ob_array();
  size_t n = 0;
  for (int step = 0; step < N; step++) {
    if (n > 0 && rnd() % 3 == 0) {
      size_t i = rnd() % n;
      int64_t x = (int64_t)(rnd() % 1000000);
      model[i] = x;
      a = ob_array_set(a, i, ob_int(x));
    } else {
      model[n++] = step;
      a = ob_array_push(a, ob_int(step));
    }
    if (step % (N / KEEP) == 0 && nv < KEEP) {
      versions[nv] = ob_ref(a);
      models[nv] = malloc(n * sizeof(int64_t) + 1);
      memcpy(models[nv], model, n * sizeof(int64_t));
      lens[nv] = n;
      nv++;
    }
  }
  CHECK(matches(a, model, n));
  int ok = 1;
  for (int v = 0; v < nv; v++) {
    ok &= matches(versions[v], models[v], lens[v]);
    ob_unref(versions[v]);
    free(models[v]);
  }
  CHECK(ok);
  ob_unref(a);
}

TEST(unshared_update_is_in_place) {
  ob_value *a = ob_array_push(ob_array(), ob_int(1));
  ob_value *b = ob_array_push(a, ob_int(2));
  CHECK(a == b); /* rc was 1: same value updated */
  ob_value *c = ob_array_push(ob_ref(b), ob_int(3));
  CHECK(c != b);
  CHECK_INT(ob_array_len(b), 2);
  CHECK_INT(ob_array_len(c), 3);
  ob_unref(b);
  ob_unref(c);
}

TEST(depth_tracks_nesting) {
  ob_value *inner = ob_array_push(ob_array(), ob_array());
  CHECK_INT(ob_depth(inner), 2);
  ob_value *outer = ob_array_push(ob_array(), inner);
  CHECK_INT(ob_depth(outer), 3);
  CHECK_INT(ob_depth(ob_array()), 1);
  ob_value *zero = ob_int(0);
  CHECK_INT(ob_depth(zero), 0);
  ob_unref(zero);
  ob_unref(outer);
}

TEST(deep_nesting_frees_without_recursion) {
  ob_value *a = ob_array();
  for (int i = 0; i < 1000000; i++)
    a = ob_array_push(ob_array(), a);
  CHECK_INT(ob_depth(a), 1000001);
  ob_unref(a); /* would overflow the C stack if freeing recursed */
}

int main(void) {
  RUN(push_builds_in_order);
  RUN(old_versions_survive_push_and_set);
  RUN(unshared_update_is_in_place);
  RUN(depth_tracks_nesting);
  RUN(deep_nesting_frees_without_recursion);
  return TEST_END();
}
