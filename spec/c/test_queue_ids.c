/* test_queue_ids.c -- the set of job ids a wait awaits (ob_queue_ids.c): numbers kept as
 * runs (a batch of a million is one run, a few bytes), other ids as sorted texts; each
 * id once whatever how often it was added; look-ups and indexes both ways; numbers only
 * in canonical form ("007" is a text, not 7). */
#include <stdio.h>
#include <string.h>

#include "fleet/ob_queue_ids.h"
#include "test.h"

static size_t find(ob_queue_ids *s, const char *id) { return ob_queue_ids_find(s, id, strlen(id)); }

static const char *get(ob_queue_ids *s, size_t i) {
  static char buf[OB_QUEUE_IDS_TEXT_MAX + 1];
  ob_queue_ids_get(s, i, buf);
  return buf;
}

TEST(a_range_of_a_million_is_one_run) {
  ob_queue_ids *s = ob_queue_ids_new();
  ob_queue_ids_add_range(s, 1000001, 2000000);
  CHECK_INT(ob_queue_ids_seal(s), 1000000);
  CHECK(ob_queue_ids_bytes(s) < 256);
  CHECK_INT(find(s, "1000001"), 0);
  CHECK_INT(find(s, "2000000"), 999999);
  CHECK_INT(find(s, "1500000"), 499999);
  CHECK(find(s, "1000000") == OB_QUEUE_IDS_NONE);
  CHECK(find(s, "2000001") == OB_QUEUE_IDS_NONE);
  CHECK(find(s, "01500000") == OB_QUEUE_IDS_NONE);
  CHECK_STR(get(s, 0), "1000001");
  CHECK_STR(get(s, 999999), "2000000");
  ob_queue_ids_free(s);
}

TEST(ids_added_in_order_cost_nothing_each) {
  ob_queue_ids *s = ob_queue_ids_new();
  char buf[32];
  for (unsigned i = 1; i <= 1000000; i++) { /* what submit printed, read back: one run */
    int n = snprintf(buf, sizeof buf, "%u", i == 500000 ? 7 : i);
    ob_queue_ids_add(s, buf, (size_t)n);
  }
  CHECK(ob_queue_ids_bytes(s) < 1024); /* two runs and the 7 */
  CHECK_INT(ob_queue_ids_seal(s), 999999);
  CHECK(find(s, "500000") == OB_QUEUE_IDS_NONE);
  CHECK_INT(find(s, "500001"), 499999);
  CHECK(ob_queue_ids_bytes(s) < 256);
  ob_queue_ids_free(s);
}

TEST(each_id_once_numbers_first_then_texts) {
  ob_queue_ids *s = ob_queue_ids_new();
  const char *add[] = {"7", "3", "b-x", "5", "4", "7", "12.1", "a", "007", "b-x", "6", "20"};
  for (size_t i = 0; i < sizeof add / sizeof *add; i++)
    ob_queue_ids_add(s, add[i], strlen(add[i]));
  ob_queue_ids_add_range(s, 5, 9);
  ob_queue_ids_add_range(s, 10, 10);
  ob_queue_ids_add(s, "", 0); /* ignored */
  /* 3..10 and 20: nine numbers; then 007, 12.1, a, b-x */
  CHECK_INT(ob_queue_ids_seal(s), 13);
  const char *want[] = {"3", "4", "5", "6", "7", "8", "9", "10", "20", "007", "12.1", "a", "b-x"};
  for (size_t i = 0; i < 13; i++) {
    CHECK_STR(get(s, i), want[i]);
    CHECK_INT(find(s, want[i]), i);
  }
  CHECK(find(s, "2") == OB_QUEUE_IDS_NONE);
  CHECK(find(s, "11") == OB_QUEUE_IDS_NONE);
  CHECK(find(s, "21") == OB_QUEUE_IDS_NONE);
  CHECK(find(s, "b") == OB_QUEUE_IDS_NONE);
  CHECK(find(s, "b-xy") == OB_QUEUE_IDS_NONE);
  CHECK(find(s, "12") == OB_QUEUE_IDS_NONE);
  /* a look-up by length: "12.1" within a longer buffer */
  CHECK_INT(ob_queue_ids_find(s, "12.1.2", 4), 10);
  ob_queue_ids_add(s, "99", 2); /* sealed: nothing changes */
  CHECK_INT(ob_queue_ids_count(s), 13);
  ob_queue_ids_free(s);
}

TEST(scattered_numbers_cost_a_run_each) {
  ob_queue_ids *s = ob_queue_ids_new();
  char buf[32];
  for (unsigned i = 100000; i > 0; i--) { /* every other number, added backwards, twice */
    int n = snprintf(buf, sizeof buf, "%u", 2 * i);
    ob_queue_ids_add(s, buf, (size_t)n);
    ob_queue_ids_add(s, buf, (size_t)n);
  }
  CHECK_INT(ob_queue_ids_seal(s), 100000);
  CHECK(ob_queue_ids_bytes(s) <= 100000 * 16 + 256);
  CHECK_INT(find(s, "2"), 0);
  CHECK_INT(find(s, "200000"), 99999);
  CHECK(find(s, "3") == OB_QUEUE_IDS_NONE);
  CHECK_STR(get(s, 50000), "100002");
  ob_queue_ids_free(s);
}

TEST(numbers_in_canonical_form_only) {
  uint64_t n = 0;
  CHECK(ob_queue_ids_number("0", 1, &n) && n == 0);
  CHECK(ob_queue_ids_number("9999999999999999999", 19, &n) && n == 9999999999999999999ull);
  CHECK(!ob_queue_ids_number("10000000000000000000", 20, &n));
  CHECK(!ob_queue_ids_number("01", 2, &n));
  CHECK(!ob_queue_ids_number("1a", 2, &n));
  CHECK(!ob_queue_ids_number("", 0, &n));
  CHECK(!ob_queue_ids_number("-1", 2, &n));
}

int main(void) {
  RUN(a_range_of_a_million_is_one_run);
  RUN(ids_added_in_order_cost_nothing_each);
  RUN(each_id_once_numbers_first_then_texts);
  RUN(scattered_numbers_cost_a_run_each);
  RUN(numbers_in_canonical_form_only);
  return TEST_END();
}
