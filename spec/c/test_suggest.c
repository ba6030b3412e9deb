/* test_suggest.c -- "did you mean" (ob_suggest.c): the distance counts insertions,
 * deletions, changes and a swap of neighbours as one each, and stops past its bound;
 * a suggestion is the nearest known name, only when near enough for the word's length,
 * never the word itself; the first of equals; names longer than the stack's rows. */
#include <stdlib.h>
#include <string.h>

#include "base/ob_suggest.h"
#include "test.h"

TEST(the_distance_counts_each_slip_once) {
  CHECK_INT(ob_suggest_distance("run", "run", 5), 0);
  CHECK_INT(ob_suggest_distance("runn", "run", 5), 1);     /* one inserted */
  CHECK_INT(ob_suggest_distance("rn", "run", 5), 1);       /* one deleted */
  CHECK_INT(ob_suggest_distance("rum", "run", 5), 1);      /* one changed */
  CHECK_INT(ob_suggest_distance("shema", "schema", 5), 1);
  CHECK_INT(ob_suggest_distance("citeis", "cities", 5), 1); /* two neighbours swapped */
  CHECK_INT(ob_suggest_distance("requird", "required", 5), 1);
  CHECK_INT(ob_suggest_distance("fromat", "format", 5), 1);
  CHECK_INT(ob_suggest_distance("", "abc", 5), 3);
  CHECK_INT(ob_suggest_distance("kitten", "sitting", 5), 3);
  CHECK_INT(ob_suggest_distance("Run", "run", 5), 1); /* case counts */
}

TEST(the_distance_stops_past_its_bound) {
  CHECK(ob_suggest_distance("abcdefgh", "zyxwvuts", 2) > 2);
  CHECK(ob_suggest_distance("a", "abcdefgh", 3) > 3); /* lengths alone */
  CHECK_INT(ob_suggest_distance("abcd", "abdc", 1), 1);
}

TEST(a_suggestion_is_the_nearest_name_near_enough) {
  static const char *const cmds[] = {"run", "check", "resume", "graph", "log", "ui", "report"};
  size_t n = sizeof cmds / sizeof *cmds;
  CHECK_STR(ob_suggest("runn", cmds, n), "run");
  CHECK_STR(ob_suggest("chekc", cmds, n), "check");
  CHECK_STR(ob_suggest("reprot", cmds, n), "report");
  CHECK_STR(ob_suggest("grahp", cmds, n), "graph");
  CHECK(ob_suggest("run", cmds, n) == NULL);      /* the word itself is not offered */
  CHECK(ob_suggest("x", cmds, n) == NULL);        /* too short to guess */
  CHECK(ob_suggest("deploy", cmds, n) == NULL);   /* nothing near */
  CHECK(ob_suggest("zz", NULL, 0) == NULL);
  static const char *const eq[] = {"ab", "ba"};
  CHECK_STR(ob_suggest("aa", eq, 2), "ab"); /* the first of equals */
}

TEST(long_names_past_the_stack_rows) {
  char a[201], b[201];
  memset(a, 'q', 200);
  a[200] = '\0';
  memcpy(b, a, sizeof a);
  b[100] = 'r';
  CHECK_INT(ob_suggest_distance(a, b, 10), 1);
  const char *names[] = {b};
  CHECK(ob_suggest(a, names, 1) == b);
  ob_suggester s;
  ob_suggester_init(&s, "tols");
  ob_suggester_add(&s, "tools");
  ob_suggester_add(&s, "tool");
  CHECK_STR(ob_suggester_best(&s), "tools"); /* the first of equals, one at a time */
}

int main(void) {
  RUN(the_distance_counts_each_slip_once);
  RUN(the_distance_stops_past_its_bound);
  RUN(a_suggestion_is_the_nearest_name_near_enough);
  RUN(long_names_past_the_stack_rows);
  return TEST_END();
}
