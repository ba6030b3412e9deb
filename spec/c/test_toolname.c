/* test_toolname.c -- tool names as LLM APIs take them (ob_toolname.c): the pattern;
 * a name that fits keeps itself; each other character (a UTF-8 sequence as one) becomes
 * '_'; a sanitized name two tools share, or a real name has, goes to neither, nor does
 * a long one: they get 55 characters, '_' and FNV-1a 64's low 32 bits in hex, a next
 * round when even that is taken; the names do not depend on the load order; resolving
 * takes the real name first, then the API name. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/ob_hash.h"
#include "base/ob_map.h"
#include "plan/ob_toolname.h"
#include "test.h"

/* A set of tools: each name's value is the name itself. */
static void put_all(ob_map *m, const char *const *names, size_t n) {
  ob_map_init(m);
  for (size_t i = 0; i < n; i++)
    ob_map_put(m, names[i], strlen(names[i]), (void *)names[i]);
}

static const char *api_of(const char *const *names, size_t n, const char *real, char *out, size_t cap) {
  ob_map m;
  put_all(&m, names, n);
  ob_toolnames tn;
  ob_toolnames_init(&tn, &m);
  const char *a = ob_toolnames_api(&tn, real);
  snprintf(out, cap, "%s", a ? a : "(none)");
  ob_toolnames_free(&tn);
  ob_map_free(&m);
  return out;
}

/* The hashed form, computed here from the rule's words. */
static void hashed(const char *real, const char *sanitized, const char *round, char *out, size_t cap) {
  uint64_t h = ob_fnv1a64(real, strlen(real));
  if (round)
    h = ob_fnv1a64_more(h, round, strlen(round));
  snprintf(out, cap, "%.55s_%08x", sanitized, (unsigned)(h & 0xffffffffu));
}

TEST(the_pattern) {
  CHECK(ob_toolname_ok("checkWeather", 12));
  CHECK(ob_toolname_ok("a-b_C9", 6));
  CHECK(!ob_toolname_ok("", 0));
  CHECK(!ob_toolname_ok("a.b", 3));
  CHECK(!ob_toolname_ok("a b", 3));
  CHECK(!ob_toolname_ok("m\xC3\xA9t\xC3\xA9o", 7));
  char long_name[66];
  memset(long_name, 'x', 65);
  long_name[65] = '\0';
  CHECK(ob_toolname_ok(long_name, 64));
  CHECK(!ob_toolname_ok(long_name, 65));
}

TEST(names_that_fit_keep_themselves_others_are_sanitized) {
  static const char *const names[] = {"checkWeather", "weather.lookup now", "m\xC3\xA9t\xC3\xA9o",
                                      "a/c", "x\xE2\x80\xA0y"};
  char buf[80];
  CHECK_STR(api_of(names, 5, "checkWeather", buf, sizeof buf), "checkWeather");
  CHECK_STR(api_of(names, 5, "weather.lookup now", buf, sizeof buf), "weather_lookup_now");
  CHECK_STR(api_of(names, 5, "m\xC3\xA9t\xC3\xA9o", buf, sizeof buf), "m_t_o"); /* one _ a letter */
  CHECK_STR(api_of(names, 5, "a/c", buf, sizeof buf), "a_c");
  CHECK_STR(api_of(names, 5, "x\xE2\x80\xA0y", buf, sizeof buf), "x_y");
  CHECK_STR(api_of(names, 5, "nope", buf, sizeof buf), "(none)");
}

TEST(a_shared_or_taken_name_goes_to_neither) {
  static const char *const pair[] = {"c.d", "c d"};
  char buf[80], want[80];
  hashed("c.d", "c_d", NULL, want, sizeof want);
  CHECK_STR(api_of(pair, 2, "c.d", buf, sizeof buf), want);
  hashed("c d", "c_d", NULL, want, sizeof want);
  CHECK_STR(api_of(pair, 2, "c d", buf, sizeof buf), want);
  /* a real name that fits wins its name: "a.b" may not have "a_b" */
  static const char *const taken[] = {"a.b", "a_b"};
  CHECK_STR(api_of(taken, 2, "a_b", buf, sizeof buf), "a_b");
  hashed("a.b", "a_b", NULL, want, sizeof want);
  CHECK_STR(api_of(taken, 2, "a.b", buf, sizeof buf), want);
}

TEST(a_long_name_is_cut_with_its_hash) {
  char real[200], san[200], want[80], buf[80];
  for (int i = 0; i < 20; i++)
    memcpy(real + 5 * i, "ab.cd", 5), memcpy(san + 5 * i, "ab_cd", 5);
  real[100] = san[100] = '\0';
  const char *names[] = {real};
  hashed(real, san, NULL, want, sizeof want);
  CHECK_STR(api_of(names, 1, real, buf, sizeof buf), want);
  CHECK_INT(strlen(buf), 64);
  /* a name of letters alone, 65 long: cut too */
  char letters[66];
  memset(letters, 'q', 65);
  letters[65] = '\0';
  const char *one[] = {letters};
  hashed(letters, letters, NULL, want, sizeof want);
  CHECK_STR(api_of(one, 1, letters, buf, sizeof buf), want);
}

TEST(a_hashed_name_already_taken_takes_the_next_round) {
  char first[80], second[80], buf[80];
  hashed("c.d", "c_d", NULL, first, sizeof first); /* what "c.d" would get */
  hashed("c.d", "c_d", "#1", second, sizeof second);
  const char *names[] = {"c.d", "c d", first};
  CHECK_STR(api_of(names, 3, first, buf, sizeof buf), first); /* a real name, it fits */
  CHECK_STR(api_of(names, 3, "c.d", buf, sizeof buf), second);
}

TEST(the_names_do_not_depend_on_the_load_order) {
  static const char *const one[] = {"a.b", "a b", "a_b", "z.z", "m\xC3\xA9t\xC3\xA9o"};
  static const char *const two[] = {"m\xC3\xA9t\xC3\xA9o", "z.z", "a_b", "a b", "a.b"};
  for (size_t i = 0; i < 5; i++) {
    char x[80], y[80];
    api_of(one, 5, one[i], x, sizeof x);
    api_of(two, 5, one[i], y, sizeof y);
    CHECK_STR(x, y);
  }
}

TEST(resolving_takes_the_real_name_first_then_the_api_name) {
  static const char *const names[] = {"a.b", "a_b", "weather.lookup now"};
  ob_map m;
  put_all(&m, names, 3);
  ob_toolname_resolver r;
  ob_toolname_resolver_init(&r, &m);
  CHECK(ob_toolname_resolve(&r, "a_b", 3) == names[1]); /* the real one, not a.b */
  CHECK(!r.made); /* a real name needs no names made */
  CHECK(ob_toolname_resolve(&r, "weather_lookup_now", 18) == names[2]);
  CHECK(ob_toolname_resolve(&r, "weather.lookup now", 18) == names[2]);
  char want[80];
  hashed("a.b", "a_b", NULL, want, sizeof want);
  CHECK(ob_toolname_resolve(&r, want, strlen(want)) == names[0]);
  CHECK(ob_toolname_resolve(&r, "nope", 4) == NULL);
  CHECK(ob_toolname_resolve(&r, "no pe", 5) == NULL);
  ob_toolname_resolver_free(&r);
  ob_map_free(&m);
}

int main(void) {
  RUN(the_pattern);
  RUN(names_that_fit_keep_themselves_others_are_sanitized);
  RUN(a_shared_or_taken_name_goes_to_neither);
  RUN(a_long_name_is_cut_with_its_hash);
  RUN(a_hashed_name_already_taken_takes_the_next_round);
  RUN(the_names_do_not_depend_on_the_load_order);
  RUN(resolving_takes_the_real_name_first_then_the_api_name);
  return TEST_END();
}
