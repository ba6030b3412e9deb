/* test_value_collisions.c -- wide objects whose keys share hashes: the value code
 * built with a 6-bit hash, so every key lands in a collision node or next to one. */
#define OB_TEST_WEAK_HASH 0x3Fu
#include "../../core/base/ob_value.c"

#include "test.h"

TEST(colliding_keys_stay_distinct_across_versions) {
  enum { N = 2000 };
  ob_value *o = ob_object(), *half = NULL;
  char key[32];
  for (int i = 0; i < N; i++) {
    int len = snprintf(key, sizeof key, "c%d", i);
    o = ob_object_set(o, key, (size_t)len, ob_int(i));
    if (i == N / 2)
      half = ob_ref(o);
  }
  for (int i = 0; i < N; i += 3) {
    int len = snprintf(key, sizeof key, "c%d", i);
    o = ob_object_set(o, key, (size_t)len, ob_int(-i));
  }
  int ok = ob_object_len(o) == N && ob_object_len(half) == N / 2 + 1;
  for (int i = 0; i < N; i++) {
    int len = snprintf(key, sizeof key, "c%d", i);
    ob_value *v = ob_object_get(o, key, (size_t)len);
    ok &= v && ob_int_value(v) == (i % 3 ? i : -i);
    ob_value *h = ob_object_get(half, key, (size_t)len);
    ok &= i <= N / 2 ? (h && ob_int_value(h) == i) : h == NULL;
  }
  CHECK(ok);
  CHECK(ob_object_get(o, "nope", 4) == NULL);
  ob_unref(half);
  ob_unref(o);
}

int main(void) {
  RUN(colliding_keys_stay_distinct_across_versions);
  return TEST_END();
}
