/* test_map.c -- the string map (ob_map.c): a value put is got back, a second put
 * replaces it and returns the old one; keys are bytes (NUL inside, the empty key);
 * iteration gives every key once, in the order keys were first put, through every
 * doubling; 200,000 ids that differ only in their last characters ("a@i1", ...)
 * all stay distinct and found, and a missing key is not found. */
#include <stdio.h>
#include <string.h>

#include "base/ob_map.h"
#include "test.h"

TEST(a_put_value_is_got_back_and_a_second_put_replaces_it) {
  ob_map m;
  ob_map_init(&m);
  int a = 1, b = 2;
  CHECK(ob_map_get(&m, "x", 1) == NULL); /* an empty map */
  CHECK(ob_map_put(&m, "x", 1, &a) == NULL);
  CHECK(ob_map_get(&m, "x", 1) == &a);
  CHECK(ob_map_put(&m, "x", 1, &b) == &a);
  CHECK(ob_map_get(&m, "x", 1) == &b);
  CHECK_INT(m.n, 1);
  CHECK(ob_map_get(&m, "xy", 2) == NULL);
  CHECK(ob_map_get(&m, "", 0) == NULL);
  ob_map_free(&m);
  CHECK_INT(m.n, 0);
  CHECK(ob_map_get(&m, "x", 1) == NULL); /* freed is empty again */
}

TEST(keys_are_bytes_nul_inside_and_the_empty_key) {
  ob_map m;
  ob_map_init(&m);
  int a = 1, b = 2, c = 3;
  ob_map_put(&m, "k\0a", 3, &a);
  ob_map_put(&m, "k\0b", 3, &b);
  ob_map_put(&m, "", 0, &c);
  CHECK(ob_map_get(&m, "k\0a", 3) == &a);
  CHECK(ob_map_get(&m, "k\0b", 3) == &b);
  CHECK(ob_map_get(&m, "k", 1) == NULL);
  CHECK(ob_map_get(&m, "", 0) == &c);
  ob_map_entry *e;
  size_t i = 0;
  CHECK(ob_map_next(&m, &i, &e) && e->len == 3 && !memcmp(e->key, "k\0a", 3) && e->key[3] == 0);
  ob_map_free(&m);
}

TEST(iteration_is_in_the_order_keys_were_first_put) {
  ob_map m;
  ob_map_init(&m);
  static int vals[1000];
  char key[32];
  for (int i = 0; i < 1000; i++) { /* a descending order no hash keeps by chance */
    int n = snprintf(key, sizeof key, "key%d", 999 - i);
    vals[i] = i;
    ob_map_put(&m, key, (size_t)n, &vals[i]);
  }
  ob_map_put(&m, "key500", 6, &vals[0]); /* a replaced value keeps its place */
  size_t i = 0, seen = 0;
  ob_map_entry *e;
  int ordered = 1;
  while (ob_map_next(&m, &i, &e)) {
    snprintf(key, sizeof key, "key%d", 999 - (int)seen);
    ordered &= !strcmp(e->key, key);
    ordered &= e->val == (seen == 499 ? (void *)&vals[0] : (void *)&vals[seen]);
    seen++;
  }
  CHECK(ordered);
  CHECK_INT(seen, 1000);
  CHECK_INT(m.n, 1000);
  ob_map_free(&m);
}

TEST(two_hundred_thousand_near_identical_ids_stay_distinct) {
  ob_map m;
  ob_map_init(&m);
  enum { N = 200000 };
  char key[32];
  for (size_t i = 0; i < N; i++) {
    int n = snprintf(key, sizeof key, "a@i%zu", i);
    CHECK(ob_map_put(&m, key, (size_t)n, (void *)(i + 1)) == NULL);
  }
  CHECK_INT(m.n, N);
  int found = 1;
  for (size_t i = 0; i < N; i++) {
    int n = snprintf(key, sizeof key, "a@i%zu", i);
    found &= ob_map_get(&m, key, (size_t)n) == (void *)(i + 1);
    n = snprintf(key, sizeof key, "b@i%zu", i);
    found &= ob_map_get(&m, key, (size_t)n) == NULL;
  }
  CHECK(found);
  ob_map_free(&m);
}

int main(void) {
  RUN(a_put_value_is_got_back_and_a_second_put_replaces_it);
  RUN(keys_are_bytes_nul_inside_and_the_empty_key);
  RUN(iteration_is_in_the_order_keys_were_first_put);
  RUN(two_hundred_thousand_near_identical_ids_stay_distinct);
  return TEST_END();
}
