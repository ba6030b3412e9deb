/* test_path_compare.c -- prefix, overlap and equality of paths by key text (the
 * dependency rule of plan-format §5), and deep copies. */
#include "base/ob_path.h"
#include "test.h"

/* Parses a bare path; the test fails loudly if it does not parse. */
static ob_path P(const char *s) {
  ob_path p;
  ob_error err = {0};
  if (ob_path_parse(s, strlen(s), &p, &err) != OB_OK) {
    fprintf(stderr, "  cannot parse %s: %s\n", s, err.msg);
    exit(1);
  }
  return p;
}

/* Checks is_prefix(a, b), is_prefix(b, a), overlaps both ways and equal both ways. */
static void rel(const char *sa, const char *sb, int a_pre_b, int b_pre_a) {
  ob_path a = P(sa), b = P(sb);
  int ok = ob_path_is_prefix(&a, &b) == a_pre_b && ob_path_is_prefix(&b, &a) == b_pre_a &&
           ob_path_overlaps(&a, &b) == (a_pre_b || b_pre_a) &&
           ob_path_overlaps(&b, &a) == (a_pre_b || b_pre_a) &&
           ob_path_equal(&a, &b) == (a_pre_b && b_pre_a) &&
           ob_path_equal(&b, &a) == (a_pre_b && b_pre_a);
  CHECK(ok);
  if (!ok)
    fprintf(stderr, "    %s vs %s\n", sa, sb);
  ob_path_free(&a);
  ob_path_free(&b);
}

TEST(root_is_a_prefix_of_everything) {
  rel("", "", 1, 1);
  rel("", "a", 1, 0);
  rel("", "a.b.c", 1, 0);
  rel("", "[\"\"]", 1, 0);
}

TEST(prefix_by_whole_segments) {
  rel("a", "a", 1, 1);
  rel("a.b", "a.b.c", 1, 0);
  rel("a.b", "a.c", 0, 0);
  rel("a.b.c", "a.b.d", 0, 0);
  rel("a", "b.a", 0, 0);
  /* "user" is not a prefix of "username": segments, not bytes. */
  rel("user", "username", 0, 0);
  rel("a.b", "a.bc", 0, 0);
  rel("a.b", "a[\"b.c\"]", 0, 0);
}

TEST(the_fan_out_writes_of_spec_5) {
  rel("out", "out.w0", 1, 0);
  rel("out.w0", "out.w1", 0, 0);
  rel("out.w1", "out.w10", 0, 0);
  rel("out.w99999", "out.w99999.x", 1, 0);
}

TEST(written_forms_of_one_key_compare_equal) {
  rel("a[3]", "a.3", 1, 1);
  rel("a[\"3\"]", "a.3", 1, 1);
  rel("a[\"b\"]", "a.b", 1, 1);
  rel("[\"a\"].b", "a.b", 1, 1);
  rel("a[\"\\u00e9\"]", "a.é", 1, 1);
  rel("a[\"\\ud83d\\ude00\"]", "a.😀", 1, 1);
  /* Different text, different keys, even when they look like the same number. */
  rel("a.03", "a.3", 0, 0);
  rel("a[0]", "a.00", 0, 0);
}

TEST(keys_with_control_bytes_compare_by_length_and_bytes) {
  /* (\u0000 is refused in a key: test_path_refs) */
  rel("[\"a\\u0001b\"]", "[\"a\\u0001c\"]", 0, 0);
  rel("[\"a\\u0001b\"]", "[\"a\\u0001b\"]", 1, 1);
  rel("[\"a\\u0001\"]", "a", 0, 0);
  rel("[\"\\u0001\"]", "[\"\"]", 0, 0);
  rel("[\"\"]", "[\"\"].x", 1, 0);
  rel("ab", "[\"ab\\u0001\"]", 0, 0);
}

TEST(paths_from_references_compare_like_bare_paths) {
  ob_expr e;
  ob_error err = {0};
  const char *s = "†state.user && †state.user.name || †data.user";
  CHECK_INT(ob_expr_parse(s, strlen(s), OB_EXPR_INPUT, &e, &err), OB_OK);
  const ob_path *user = &e.alts[0].refs[0].path, *name = &e.alts[0].refs[1].path,
                *data_user = &e.alts[1].refs[0].path;
  CHECK(ob_path_is_prefix(user, name));
  CHECK(!ob_path_is_prefix(name, user));
  CHECK(ob_path_overlaps(name, user));
  /* Kinds are compared by the caller; the paths alone are equal. */
  CHECK(ob_path_equal(user, data_user));
  ob_expr_free(&e);
}

TEST(copies_are_deep_and_equal) {
  ob_path a = P("users[\"a.b@x.com\"][\"x\\u0001y\"].items.17.01"), c;
  CHECK_INT(ob_path_copy(&c, &a), OB_OK);
  CHECK(ob_path_equal(&a, &c));
  CHECK_INT(c.n, 6);
  CHECK(c.segs != a.segs);
  for (size_t i = 0; i < c.n; i++) {
    CHECK(c.segs[i].key != a.segs[i].key);
    CHECK_INT(c.segs[i].index, a.segs[i].index);
    CHECK(c.segs[i].key[c.segs[i].keylen] == '\0');
  }
  CHECK_INT(c.segs[4].index, 17);
  CHECK_INT(c.segs[5].index, -1);
  CHECK_INT(c.segs[2].keylen, 3);
  /* Changing the original leaves the copy alone. */
  a.segs[0].key[0] = 'X';
  CHECK(!ob_path_equal(&a, &c));
  CHECK_STR(c.segs[0].key, "users");
  ob_path_free(&a);
  ob_path_free(&c);

  ob_path root = P(""), rc;
  CHECK_INT(ob_path_copy(&rc, &root), OB_OK);
  CHECK(rc.n == 0 && rc.segs == NULL && ob_path_equal(&rc, &root));
  ob_path_free(&rc);
  ob_path_free(&root);
}

TEST(free_is_idempotent) {
  ob_path a = P("a.b");
  ob_path_free(&a);
  CHECK(a.n == 0 && a.segs == NULL);
  ob_path_free(&a);
}

int main(void) {
  RUN(root_is_a_prefix_of_everything);
  RUN(prefix_by_whole_segments);
  RUN(the_fan_out_writes_of_spec_5);
  RUN(written_forms_of_one_key_compare_equal);
  RUN(keys_with_control_bytes_compare_by_length_and_bytes);
  RUN(paths_from_references_compare_like_bare_paths);
  RUN(copies_are_deep_and_equal);
  RUN(free_is_idempotent);
  return TEST_END();
}
