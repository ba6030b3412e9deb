/* test_value_scalars.c -- integers on both sides of the small-integer range (made once,
 * never freed) and beyond it keep their values through references, arrays, objects and
 * JSON text; a small one is shared, a large one is not. Under ASan: nothing leaks. */
#include "base/ob_value.h"
#include "test.h"

static const int64_t edges[] = {INT64_MIN, -1000, -129, -128, -127, -1, 0, 1, 2,
                                894,       895,   896,  1000, INT64_MAX};
#define NEDGES (sizeof edges / sizeof *edges)

TEST(every_integer_keeps_its_value) {
  for (size_t i = 0; i < NEDGES; i++) {
    ob_value *v = ob_int(edges[i]);
    CHECK(ob_typeof(v) == OB_INT);
    CHECK(ob_int_value(v) == edges[i]);
    ob_ref(v);
    ob_unref(v);
    CHECK(ob_int_value(v) == edges[i]); /* still there after a reference came and went */
    ob_unref(v);
  }
}

TEST(small_integers_are_shared_large_ones_are_not) {
  ob_value *a = ob_int(7), *b = ob_int(7), *c = ob_int(100000), *d = ob_int(100000);
  CHECK(a == b);
  CHECK(c != d);
  CHECK(ob_equal(c, d));
  ob_value *lo = ob_int(-128), *hi = ob_int(895), *below = ob_int(-129), *above = ob_int(896);
  CHECK(lo == ob_int(-128));
  CHECK(hi == ob_int(895));
  ob_value *below2 = ob_int(-129);
  CHECK(below != below2); /* allocated each time */
  ob_unref(below2);
  ob_unref(a), ob_unref(b), ob_unref(c), ob_unref(d);
  ob_unref(lo), ob_unref(hi), ob_unref(below), ob_unref(above);
}

TEST(integers_inside_containers_and_json) {
  ob_value *arr = ob_array(), *obj = ob_object();
  for (size_t i = 0; i < NEDGES; i++) {
    arr = ob_array_push(arr, ob_int(edges[i]));
    char key[8];
    snprintf(key, sizeof key, "k%zu", i);
    obj = ob_object_set(obj, key, strlen(key), ob_int(edges[i]));
  }
  ob_value *copy = ob_array_set(ob_ref(arr), 3, ob_int(5)); /* a new version shares the rest */
  for (size_t i = 0; i < NEDGES; i++) {
    CHECK(ob_int_value(ob_array_get(arr, i)) == edges[i]);
    CHECK(ob_int_value(ob_array_get(copy, i)) == (i == 3 ? 5 : edges[i]));
  }
  size_t len;
  char *text = ob_json_print(arr, OB_JSON_COMPACT, &len);
  CHECK_STR(text, "[-9223372036854775808,-1000,-129,-128,-127,-1,0,1,2,894,895,896,1000,"
                  "9223372036854775807]");
  free(text);
  ob_unref(copy);
  ob_unref(arr);
  ob_unref(obj);
}

int main(void) {
  RUN(every_integer_keeps_its_value);
  RUN(small_integers_are_shared_large_ones_are_not);
  RUN(integers_inside_containers_and_json);
  return TEST_END();
}
