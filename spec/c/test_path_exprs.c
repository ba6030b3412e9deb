/* test_path_exprs.c -- || and && expressions: precedence, white space, the text
 * and character position of each part, and the output mode's default kind. */
#include "base/ob_path.h"
#include "test.h"

static int parse_exact(const char *s, int mode, ob_expr *e) {
  size_t len = strlen(s);
  char *copy = malloc(len ? len : 1);
  ob_error err = {0};
  memcpy(copy, s, len);
  int rc = ob_expr_parse(copy, len, mode, e, &err);
  free(copy);
  if (rc)
    fprintf(stderr, "  parse failed: %s\n", err.msg);
  return rc;
}

/* Writes the shape of e as "kind:seg/seg & kind | kind" for compact checks. */
static void shape(const ob_expr *e, char *out, size_t cap) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, "", 0);
  for (size_t a = 0; a < e->n; a++) {
    if (a)
      ob_buf_add(&b, " | ", 3);
    for (size_t r = 0; r < e->alts[a].n; r++) {
      const ob_reference *ref = &e->alts[a].refs[r];
      if (r)
        ob_buf_add(&b, " & ", 3);
      ob_buf_addf(&b, "%s:", ref->kind);
      for (size_t i = 0; i < ref->path.n; i++)
        ob_buf_addf(&b, "%s%s", i ? "/" : "", ref->path.segs[i].key);
    }
  }
  snprintf(out, cap, "%s", b.data);
  ob_buf_free(&b);
}

#define SHAPE(text, mode, expected)                                                  \
  do {                                                                               \
    ob_expr e_;                                                                      \
    char got_[512];                                                                  \
    CHECK_INT(parse_exact(text, mode, &e_), OB_OK);                                  \
    shape(&e_, got_, sizeof got_);                                                   \
    CHECK_STR(got_, expected);                                                       \
    ob_expr_free(&e_);                                                               \
  } while (0)

TEST(or_and_and) {
  SHAPE("†a || †b", OB_EXPR_INPUT, "a: | b:");
  SHAPE("†a && †b", OB_EXPR_INPUT, "a: & b:");
  SHAPE("†a || †b || †c", OB_EXPR_INPUT, "a: | b: | c:");
  SHAPE("†a && †b && †c", OB_EXPR_INPUT, "a: & b: & c:");
}

TEST(and_binds_tighter_than_or) {
  SHAPE("†a && †b || †c && †d", OB_EXPR_INPUT, "a: & b: | c: & d:");
  SHAPE("†a || †b && †c", OB_EXPR_INPUT, "a: | b: & c:");
  SHAPE("†a && †b || †c", OB_EXPR_INPUT, "a: & b: | c:");
  SHAPE("†a || †b && †c || †d", OB_EXPR_INPUT, "a: | b: & c: | d:");

  ob_expr e;
  CHECK_INT(parse_exact("†a && †b || †c", OB_EXPR_INPUT, &e), OB_OK);
  CHECK_INT(e.n, 2);
  CHECK_INT(e.alts[0].n, 2);
  CHECK_INT(e.alts[1].n, 1);
  ob_expr_free(&e);
}

TEST(operators_need_no_white_space) {
  SHAPE("†a||†b&&†c", OB_EXPR_INPUT, "a: | b: & c:");
  SHAPE("†s.x||†s.y", OB_EXPR_INPUT, "s:x | s:y");
  SHAPE("†s[\"x\"]||†s[0]&&†t", OB_EXPR_INPUT, "s:x | s:0 & t:");
  SHAPE("†s.a.b&&†s[\"c d\"].e", OB_EXPR_INPUT, "s:a/b & s:c d/e");
}

TEST(white_space_is_ignored_around_operators_and_at_the_ends) {
  SHAPE("  †a  ", OB_EXPR_INPUT, "a:");
  SHAPE(" \t\r\n\v\f†a.b \t||\n\r†c&&\f\v†d.e \n", OB_EXPR_INPUT, "a:b | c: & d:e");
  ob_expr e;
  CHECK_INT(parse_exact("\n  †a.b   &&  †c   ||\t†d  \n", OB_EXPR_INPUT, &e), OB_OK);
  CHECK(e.n == 2);
  if (e.n == 2) {
    CHECK_STR(e.alts[0].text, "†a.b   &&  †c");
    CHECK_STR(e.alts[1].text, "†d");
    CHECK_STR(e.alts[0].refs[0].text, "†a.b");
    CHECK_STR(e.alts[0].refs[1].text, "†c");
    CHECK_INT(e.alts[0].refs[0].pos, 3);
    CHECK_INT(e.alts[0].refs[1].pos, 14);
    CHECK_INT(e.alts[1].refs[0].pos, 22);
  }
  ob_expr_free(&e);
}

TEST(part_text_and_character_positions) {
  ob_expr e;
  /* Positions count characters: † and é are one each. */
  CHECK_INT(parse_exact("†state.é || †x && †state.users[\"a.b\"].age", OB_EXPR_INPUT, &e),
            OB_OK);
  CHECK(e.n == 2 && e.alts[1].n == 2);
  if (e.n == 2 && e.alts[1].n == 2) {
    CHECK_INT(e.alts[0].refs[0].pos, 0);
    CHECK_STR(e.alts[0].refs[0].text, "†state.é");
    CHECK_INT(e.alts[1].refs[0].pos, 12);
    CHECK_STR(e.alts[1].refs[0].text, "†x");
    CHECK_INT(e.alts[1].refs[1].pos, 18);
    CHECK_STR(e.alts[1].refs[1].text, "†state.users[\"a.b\"].age");
    CHECK_STR(e.alts[0].text, "†state.é");
    CHECK_STR(e.alts[1].text, "†x && †state.users[\"a.b\"].age");
  }
  ob_expr_free(&e);

  /* A 4-byte character (emoji) counts as one; so does an invalid byte. */
  CHECK_INT(parse_exact("†s.😀\xff || †t", OB_EXPR_INPUT, &e), OB_OK);
  CHECK(e.n == 2 && e.alts[1].refs[0].pos == 9);
  ob_expr_free(&e);
}

TEST(the_seeds_branch_example) {
  ob_expr e;
  CHECK_INT(parse_exact("†state.ok || †state.failed", OB_EXPR_OUTPUT, &e), OB_OK);
  CHECK(e.n == 2);
  if (e.n == 2) {
    CHECK_STR(e.alts[0].text, "†state.ok");
    CHECK_STR(e.alts[1].text, "†state.failed");
  }
  ob_expr_free(&e);
}

TEST(output_mode_defaults_to_kind_state) {
  SHAPE("user.summary", OB_EXPR_OUTPUT, "state:user/summary");
  SHAPE("state", OB_EXPR_OUTPUT, "state:state");
  SHAPE("state.x", OB_EXPR_OUTPUT, "state:state/x");
  SHAPE("[\"a b\"].c", OB_EXPR_OUTPUT, "state:a b/c");
  SHAPE("[0].c", OB_EXPR_OUTPUT, "state:0/c");
  SHAPE("a && b || c", OB_EXPR_OUTPUT, "state:a & state:b | state:c");
  SHAPE("a&&b||c", OB_EXPR_OUTPUT, "state:a & state:b | state:c");
  SHAPE("  user.summary  ", OB_EXPR_OUTPUT, "state:user/summary");
  SHAPE("é.日本", OB_EXPR_OUTPUT, "state:é/日本");

  ob_expr e;
  CHECK_INT(parse_exact(" user.summary ", OB_EXPR_OUTPUT, &e), OB_OK);
  CHECK(e.n == 1 && e.alts[0].n == 1);
  if (e.n == 1 && e.alts[0].n == 1) {
    CHECK_STR(e.alts[0].refs[0].text, "user.summary");
    CHECK_STR(e.alts[0].refs[0].kind, "state");
    CHECK_INT(e.alts[0].refs[0].pos, 1);
  }
  ob_expr_free(&e);
}

TEST(output_mode_mixes_both_forms) {
  SHAPE("†data.x || user.y", OB_EXPR_OUTPUT, "data:x | state:user/y");
  SHAPE("a && †err.log && b.c", OB_EXPR_OUTPUT, "state:a & err:log & state:b/c");
  SHAPE("†state.ok || failed", OB_EXPR_OUTPUT, "state:ok | state:failed");
  SHAPE("†out", OB_EXPR_OUTPUT, "out:");

  /* Same meaning written both ways: equal paths and kinds. */
  ob_expr a, b;
  CHECK_INT(parse_exact("user.summary", OB_EXPR_OUTPUT, &a), OB_OK);
  CHECK_INT(parse_exact("†state.user.summary", OB_EXPR_OUTPUT, &b), OB_OK);
  CHECK_STR(a.alts[0].refs[0].kind, b.alts[0].refs[0].kind);
  CHECK(ob_path_equal(&a.alts[0].refs[0].path, &b.alts[0].refs[0].path));
  CHECK_STR(a.alts[0].refs[0].text, "user.summary");
  CHECK_STR(b.alts[0].refs[0].text, "†state.user.summary");
  ob_expr_free(&a);
  ob_expr_free(&b);
}

TEST(input_mode_refuses_bare_paths) {
  ob_expr e;
  ob_error err = {0};
  CHECK_INT(ob_expr_parse("user.summary", 12, OB_EXPR_INPUT, &e, &err), OB_ESYNTAX);
  CHECK_INT(err.pos, 0);
  CHECK_INT(e.n, 0);
  const char *s = "†a || b";
  CHECK_INT(ob_expr_parse(s, strlen(s), OB_EXPR_INPUT, &e, &err), OB_ESYNTAX);
  CHECK_INT(err.pos, 6);
}

TEST(many_parts) {
  ob_buf b;
  ob_expr e;
  ob_error err = {0};
  ob_buf_init(&b);
  for (int a = 0; a < 300; a++)
    for (int r = 0; r < 7; r++)
      ob_buf_addf(&b, "%s†k%d.p%d", r ? " && " : a ? " || " : "", a, r);
  CHECK_INT(ob_expr_parse(b.data, b.len, OB_EXPR_INPUT, &e, &err), OB_OK);
  CHECK_INT(e.n, 300);
  if (e.n == 300) {
    CHECK_INT(e.alts[299].n, 7);
    CHECK_STR(e.alts[299].refs[6].kind, "k299");
    CHECK_STR(e.alts[299].refs[6].path.segs[0].key, "p6");
    CHECK_STR(e.alts[299].text, "†k299.p0 && †k299.p1 && †k299.p2 && †k299.p3 && †k299.p4 "
                                "&& †k299.p5 && †k299.p6");
    /* "†k0.p0" is 6 characters, " && " 4 more. */
    CHECK_INT(e.alts[0].refs[1].pos, 10);
  }
  ob_expr_free(&e);
  ob_buf_free(&b);
}

int main(void) {
  RUN(or_and_and);
  RUN(and_binds_tighter_than_or);
  RUN(operators_need_no_white_space);
  RUN(white_space_is_ignored_around_operators_and_at_the_ends);
  RUN(part_text_and_character_positions);
  RUN(the_seeds_branch_example);
  RUN(output_mode_defaults_to_kind_state);
  RUN(output_mode_mixes_both_forms);
  RUN(input_mode_refuses_bare_paths);
  RUN(many_parts);
  return TEST_END();
}
