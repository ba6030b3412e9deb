/* test_path_refs.c -- valid references and bare paths: kinds, plain and bracketed
 * segments, JSON escapes, array indices, unicode keys, string classification. */
#include "base/ob_path.h"
#include "test.h"

/* Parses from an exact-size heap copy (no NUL after it), so that ASan catches
 * any read past len. */
static int parse_exact(const char *s, size_t len, int mode, ob_expr *e, ob_error *err) {
  char *copy = malloc(len ? len : 1);
  memcpy(copy, s, len);
  int rc = ob_expr_parse(copy, len, mode, e, err);
  free(copy);
  return rc;
}

/* Parses a single reference; returns it (or NULL after a failed CHECK). */
static const ob_reference *one_ref(const char *s, int mode, ob_expr *e) {
  ob_error err = {0};
  int rc = parse_exact(s, strlen(s), mode, e, &err);
  if (rc != OB_OK) {
    fprintf(stderr, "  parse of %s failed: %s\n", s, err.msg);
    return NULL;
  }
  if (e->n != 1 || e->alts[0].n != 1)
    return NULL;
  return &e->alts[0].refs[0];
}

static int seg_is(const ob_path *p, size_t i, const char *key, size_t keylen, int64_t index) {
  if (i >= p->n)
    return 0;
  const ob_seg *g = &p->segs[i];
  return g->keylen == keylen && memcmp(g->key, key, keylen) == 0 && g->key[keylen] == '\0' &&
         g->index == index;
}

#define SEG(p, i, key, index) seg_is(p, i, key, sizeof key - 1, index)

TEST(kind_only) {
  ob_expr e;
  const ob_reference *r = one_ref("†state", OB_EXPR_INPUT, &e);
  CHECK(r != NULL);
  if (r) {
    CHECK_STR(r->kind, "state");
    CHECK_INT(r->path.n, 0);
    CHECK(r->path.segs == NULL);
    CHECK_STR(r->text, "†state");
    CHECK_INT(r->pos, 0);
    CHECK_STR(e.alts[0].text, "†state");
  }
  ob_expr_free(&e);
  CHECK_INT(e.n, 0);
  ob_expr_free(&e); /* freeing twice is harmless */
}

TEST(kind_characters) {
  static const char *const ok[] = {"†_", "†_x", "†A", "†a-b_9", "†state2", "†x-", "†Data_Set-1"};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    ob_expr e;
    const ob_reference *r = one_ref(ok[i], OB_EXPR_INPUT, &e);
    CHECK(r != NULL);
    if (r)
      CHECK_STR(r->kind, ok[i] + OB_DAGGER_LEN);
    ob_expr_free(&e);
  }
}

TEST(plain_segments) {
  ob_expr e;
  const ob_reference *r = one_ref("†data.user.name", OB_EXPR_INPUT, &e);
  CHECK(r != NULL);
  if (r) {
    CHECK_STR(r->kind, "data");
    CHECK_INT(r->path.n, 2);
    CHECK(SEG(&r->path, 0, "user", -1));
    CHECK(SEG(&r->path, 1, "name", -1));
    CHECK_STR(r->text, "†data.user.name");
  }
  ob_expr_free(&e);
}

TEST(plain_segments_allow_punctuation) {
  ob_expr e;
  const ob_reference *r = one_ref("†s.a-b_c:d/e@f$g\"h'i(j)k{l}m#n!o?p*q+r=s~t`u,v;w<x>y%z^",
                                  OB_EXPR_INPUT, &e);
  CHECK(r != NULL);
  if (r) {
    CHECK_INT(r->path.n, 1);
    CHECK(SEG(&r->path, 0, "a-b_c:d/e@f$g\"h'i(j)k{l}m#n!o?p*q+r=s~t`u,v;w<x>y%z^", -1));
  }
  ob_expr_free(&e);
  r = one_ref("†state.a\\b", OB_EXPR_INPUT, &e); /* a backslash is plain outside brackets */
  CHECK(r && SEG(&r->path, 0, "a\\b", -1));
  ob_expr_free(&e);
  r = one_ref("†state.a\x7f", OB_EXPR_INPUT, &e); /* DEL is not a control we refuse */
  CHECK(r && SEG(&r->path, 0, "a\x7f", -1));
  ob_expr_free(&e);
}

TEST(indices_only_in_canonical_form) {
  static const struct {
    const char *seg;
    int64_t index;
  } cases[] = {
      {"0", 0},
      {"7", 7},
      {"17", 17},
      {"100", 100},
      {"01", -1},
      {"00", -1},
      {"-1", -1},
      {"+1", -1},
      {"1e3", -1},
      {"1.5", -1}, /* two segments, checked below */
      {"9223372036854775807", INT64_MAX},
      {"9223372036854775808", -1},
      {"18446744073709551615", -1},
      {"18446744073709551616", -1},
      {"99999999999999999999999", -1},
      {"0x10", -1},
      {"１", -1}, /* fullwidth digit one */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[64];
    ob_expr e;
    if (strchr(cases[i].seg, '.'))
      continue;
    snprintf(text, sizeof text, "†state.items.%s", cases[i].seg);
    const ob_reference *r = one_ref(text, OB_EXPR_INPUT, &e);
    CHECK(r != NULL);
    if (r) {
      CHECK_INT(r->path.n, 2);
      CHECK(seg_is(&r->path, 1, cases[i].seg, strlen(cases[i].seg), cases[i].index));
    }
    ob_expr_free(&e);
  }
  ob_expr e;
  const ob_reference *r = one_ref("†state.1.5", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 2 && SEG(&r->path, 0, "1", 1) && SEG(&r->path, 1, "5", 5));
  ob_expr_free(&e);
}

TEST(bracketed_keys) {
  ob_expr e;
  const ob_reference *r = one_ref("†state.users[\"a.b@x.com\"].age", OB_EXPR_INPUT, &e);
  CHECK(r != NULL);
  if (r) {
    CHECK_INT(r->path.n, 3);
    CHECK(SEG(&r->path, 0, "users", -1));
    CHECK(SEG(&r->path, 1, "a.b@x.com", -1));
    CHECK(SEG(&r->path, 2, "age", -1));
    CHECK_STR(r->text, "†state.users[\"a.b@x.com\"].age");
  }
  ob_expr_free(&e);

  r = one_ref("†state[\"a b\"]", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 1 && SEG(&r->path, 0, "a b", -1));
  ob_expr_free(&e);

  r = one_ref("†state[\"a\"][\"b\"].c[\"d\"]", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 4 && SEG(&r->path, 0, "a", -1) && SEG(&r->path, 1, "b", -1) &&
        SEG(&r->path, 2, "c", -1) && SEG(&r->path, 3, "d", -1));
  ob_expr_free(&e);

  r = one_ref("†state[\"\"]", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 1 && r->path.segs[0].keylen == 0 && r->path.segs[0].index == -1);
  ob_expr_free(&e);

  /* Every delimiter is fine inside the string. */
  r = one_ref("†k[\"a]b\"][\"x|y&z\"][\"[0]\"][\" \\t\"][\"..\"][\"\xE2\x80\xA0x\"]",
              OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 6 && SEG(&r->path, 0, "a]b", -1) && SEG(&r->path, 1, "x|y&z", -1) &&
        SEG(&r->path, 2, "[0]", -1) && SEG(&r->path, 3, " \t", -1) &&
        SEG(&r->path, 4, "..", -1) && SEG(&r->path, 5, "†x", -1));
  ob_expr_free(&e);

  /* A digit string in brackets is a key text like any other: still an index. */
  r = one_ref("†state.a[\"3\"][\"03\"]", OB_EXPR_INPUT, &e);
  CHECK(r && SEG(&r->path, 1, "3", 3) && SEG(&r->path, 2, "03", -1));
  ob_expr_free(&e);
}

TEST(json_escapes_decode) {
  ob_expr e;
  const ob_reference *r =
      one_ref("†s[\"q\\\"uote\"][\"back\\\\slash\"][\"sl\\/ash\"][\"\\b\\f\\n\\r\\t\"]",
              OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 4);
  if (r && r->path.n == 4) {
    CHECK(SEG(&r->path, 0, "q\"uote", -1));
    CHECK(SEG(&r->path, 1, "back\\slash", -1));
    CHECK(SEG(&r->path, 2, "sl/ash", -1));
    CHECK(SEG(&r->path, 3, "\b\f\n\r\t", -1));
  }
  ob_expr_free(&e);

  r = one_ref("†s[\"\\u00e9\"][\"\\u20AC\"][\"\\ud83d\\ude00\"][\"\\u0041\\u007a\"][\"\\uFFFF\"]",
              OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 5);
  if (r && r->path.n == 5) {
    CHECK(SEG(&r->path, 0, "\xC3\xA9", -1));
    CHECK(SEG(&r->path, 1, "\xE2\x82\xAC", -1));
    CHECK(SEG(&r->path, 2, "\xF0\x9F\x98\x80", -1));
    CHECK(SEG(&r->path, 3, "Az", -1));
    CHECK(SEG(&r->path, 4, "\xEF\xBF\xBF", -1));
  }
  ob_expr_free(&e);

  /* Highest code point, and the surrogate pair decoding at its edges. */
  r = one_ref("†s[\"\\udbff\\udfff\"][\"\\ud800\\udc00\"][\"\\u0080\"][\"\\u07ff\"][\"\\u0800\"]",
              OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 5);
  if (r && r->path.n == 5) {
    CHECK(SEG(&r->path, 0, "\xF4\x8F\xBF\xBF", -1));
    CHECK(SEG(&r->path, 1, "\xF0\x90\x80\x80", -1));
    CHECK(SEG(&r->path, 2, "\xC2\x80", -1));
    CHECK(SEG(&r->path, 3, "\xDF\xBF", -1));
    CHECK(SEG(&r->path, 4, "\xE0\xA0\x80", -1));
  }
  ob_expr_free(&e);
}

TEST(nul_bytes_in_keys_are_refused) {
  /* no JSON object key can hold one: a document written there could not be read back */
  ob_expr e;
  ob_error err = {0};
  const char *s = "†s[\"a\\u0000b\"]";
  CHECK_INT(ob_expr_parse(s, strlen(s), OB_EXPR_INPUT, &e, &err), OB_ESYNTAX);
  CHECK(strstr(err.msg, "\\u0000 (a NUL byte) in a bracketed key") != NULL);
  s = "†s[\"\\u0001\"]"; /* other control characters are fine, escaped */
  CHECK_INT(ob_expr_parse(s, strlen(s), OB_EXPR_INPUT, &e, &err), OB_OK);
  ob_expr_free(&e);
}

TEST(a_path_has_at_most_1000_segments) {
  ob_buf b;
  ob_path p;
  ob_error err = {0};
  ob_buf_init(&b);
  ob_buf_add(&b, "a", 1);
  for (int i = 1; i < OB_PATH_MAX_SEGS; i++)
    ob_buf_add(&b, ".a", 2);
  CHECK_INT(ob_path_parse(b.data, b.len, &p, &err), OB_OK);
  CHECK_INT(p.n, OB_PATH_MAX_SEGS);
  ob_path_free(&p);
  ob_buf_add(&b, "[\"a\"]", 5);
  CHECK_INT(ob_path_parse(b.data, b.len, &p, &err), OB_ESYNTAX);
  CHECK(strstr(err.msg, "a path has at most 1000 segments") != NULL);
  ob_buf_free(&b);
}

TEST(bracketed_indices) {
  ob_expr e, e2;
  const ob_reference *r = one_ref("†state[3]", OB_EXPR_INPUT, &e);
  const ob_reference *r2 = one_ref("†state.3", OB_EXPR_INPUT, &e2);
  CHECK(r && r->path.n == 1 && SEG(&r->path, 0, "3", 3));
  CHECK(r && r2 && ob_path_equal(&r->path, &r2->path));
  ob_expr_free(&e);
  ob_expr_free(&e2);

  r = one_ref("†state.items[0].name[12][\"x\"][9223372036854775807]", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 6);
  if (r && r->path.n == 6) {
    CHECK(SEG(&r->path, 0, "items", -1));
    CHECK(SEG(&r->path, 1, "0", 0));
    CHECK(SEG(&r->path, 2, "name", -1));
    CHECK(SEG(&r->path, 3, "12", 12));
    CHECK(SEG(&r->path, 4, "x", -1));
    CHECK(SEG(&r->path, 5, "9223372036854775807", INT64_MAX));
  }
  ob_expr_free(&e);
}

TEST(unicode_keys) {
  ob_expr e;
  const ob_reference *r = one_ref("†state.имя.é.日本語.😀.€uro", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 5);
  if (r && r->path.n == 5) {
    CHECK(SEG(&r->path, 0, "имя", -1));
    CHECK(SEG(&r->path, 1, "é", -1));
    CHECK(SEG(&r->path, 2, "日本語", -1));
    CHECK(SEG(&r->path, 3, "😀", -1));
    CHECK(SEG(&r->path, 4, "€uro", -1));
  }
  ob_expr_free(&e);

  r = one_ref("†state[\"ключ с пробелом\"].a†b", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 2 && SEG(&r->path, 0, "ключ с пробелом", -1) &&
        SEG(&r->path, 1, "a†b", -1));
  ob_expr_free(&e);

  /* Non-ASCII white space (U+00A0, U+2003) is part of a key, not a separator. */
  r = one_ref("†state.a\xC2\xA0" "b\xE2\x80\x83", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 1 && SEG(&r->path, 0, "a\xC2\xA0" "b\xE2\x80\x83", -1));
  ob_expr_free(&e);
}

TEST(bytes_that_are_not_utf8_pass_through) {
  ob_expr e;
  const ob_reference *r = one_ref("†state.\xff\xfe.\xE2\x80[\"\xC0\xAF\"]", OB_EXPR_INPUT, &e);
  CHECK(r && r->path.n == 3 && SEG(&r->path, 0, "\xff\xfe", -1) &&
        SEG(&r->path, 1, "\xE2\x80", -1) && SEG(&r->path, 2, "\xC0\xAF", -1));
  ob_expr_free(&e);
}

TEST(length_not_nul_terminator_bounds_the_input) {
  ob_expr e;
  ob_error err = {0};
  const char *s = "†state.abcdef";
  CHECK_INT(parse_exact(s, OB_DAGGER_LEN + 8, OB_EXPR_INPUT, &e, &err), OB_OK);
  CHECK(e.n == 1 && e.alts[0].n == 1 && SEG(&e.alts[0].refs[0].path, 0, "ab", -1));
  CHECK_STR(e.alts[0].refs[0].text, "†state.ab");
  ob_expr_free(&e);
  /* An embedded NUL byte is a control character, not an end. */
  CHECK_INT(parse_exact("†s.a\0b", OB_DAGGER_LEN + 5, OB_EXPR_INPUT, &e, &err), OB_ESYNTAX);
  CHECK_INT(err.pos, 4);
}

TEST(error_record_untouched_on_success) {
  ob_expr e;
  ob_error err = {0};
  CHECK_INT(ob_expr_parse("†a.b", strlen("†a.b"), OB_EXPR_INPUT, &e, &err), OB_OK);
  CHECK_INT(err.code, OB_OK);
  ob_expr_free(&e);
  /* err may be NULL. */
  CHECK_INT(ob_expr_parse("†a.b", strlen("†a.b"), OB_EXPR_INPUT, &e, NULL), OB_OK);
  ob_expr_free(&e);
  CHECK_INT(ob_expr_parse("†", strlen("†"), OB_EXPR_INPUT, &e, NULL), OB_ESYNTAX);
}

TEST(bare_paths) {
  ob_path p;
  ob_error err = {0};
  CHECK_INT(ob_path_parse("", 0, &p, &err), OB_OK);
  CHECK_INT(p.n, 0);
  CHECK(p.segs == NULL);
  ob_path_free(&p);
  CHECK_INT(ob_path_parse(NULL, 0, &p, &err), OB_OK);
  CHECK_INT(p.n, 0);

  const char *s = "user.status";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_OK);
  CHECK(p.n == 2 && SEG(&p, 0, "user", -1) && SEG(&p, 1, "status", -1));
  ob_path_free(&p);

  s = "users[\"a.b\"].age";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_OK);
  CHECK(p.n == 3 && SEG(&p, 0, "users", -1) && SEG(&p, 1, "a.b", -1) && SEG(&p, 2, "age", -1));
  ob_path_free(&p);

  s = "items.0";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_OK);
  CHECK(p.n == 2 && SEG(&p, 1, "0", 0));
  ob_path_free(&p);

  s = "[\"a b\"].c";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_OK);
  CHECK(p.n == 2 && SEG(&p, 0, "a b", -1) && SEG(&p, 1, "c", -1));
  ob_path_free(&p);

  s = "[0][1].x";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_OK);
  CHECK(p.n == 3 && SEG(&p, 0, "0", 0) && SEG(&p, 1, "1", 1) && SEG(&p, 2, "x", -1));
  ob_path_free(&p);

  s = "0.1";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_OK);
  CHECK(p.n == 2 && SEG(&p, 0, "0", 0) && SEG(&p, 1, "1", 1));
  ob_path_free(&p);

  /* A bare path may hold a dagger: it has no kind to confuse it with. */
  s = "†x.y";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_OK);
  CHECK(p.n == 2 && SEG(&p, 0, "†x", -1));
  ob_path_free(&p);

  s = "[\"\"]";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_OK);
  CHECK(p.n == 1 && p.segs[0].keylen == 0);
  ob_path_free(&p);
}

TEST(long_paths_grow) {
  ob_buf b;
  ob_path p;
  ob_error err = {0};
  ob_buf_init(&b);
  for (int i = 0; i < OB_PATH_MAX_SEGS; i++) /* the longest a path may be */
    ob_buf_addf(&b, i % 3 == 2 ? "[%d]" : i ? ".k%d" : "k%d", i);
  CHECK_INT(ob_path_parse(b.data, b.len, &p, &err), OB_OK);
  CHECK_INT(p.n, 1000);
  CHECK(p.n == 1000 && SEG(&p, 999, "k999", -1) && SEG(&p, 2, "2", 2));
  ob_path_free(&p);
  ob_buf_free(&b);
}

TEST(classify_parameter_strings) {
  CHECK_INT(ob_str_classify("", 0), OB_STR_PLAIN);
  CHECK_INT(ob_str_classify(NULL, 0), OB_STR_PLAIN);
  CHECK_INT(ob_str_classify("x", 1), OB_STR_PLAIN);
  CHECK_INT(ob_str_classify("a†", strlen("a†")), OB_STR_PLAIN);
  CHECK_INT(ob_str_classify(" †a", strlen(" †a")), OB_STR_PLAIN);
  CHECK_INT(ob_str_classify("\xE2\x80", 2), OB_STR_PLAIN);
  CHECK_INT(ob_str_classify("\xE2\x80\xA1x", 4), OB_STR_PLAIN); /* ‡, not † */
  CHECK_INT(ob_str_classify("†", strlen("†")), OB_STR_EXPR);
  CHECK_INT(ob_str_classify("†x", strlen("†x")), OB_STR_EXPR);
  CHECK_INT(ob_str_classify("†\xE2\x80", 5), OB_STR_EXPR);
  CHECK_INT(ob_str_classify("††", strlen("††")), OB_STR_LITERAL);
  CHECK_INT(ob_str_classify("††x", strlen("††x")), OB_STR_LITERAL);
  CHECK_INT(ob_str_classify("†††x", strlen("†††x")), OB_STR_LITERAL);
  /* The length, not a NUL, bounds the check. */
  CHECK_INT(ob_str_classify("††x", 3), OB_STR_EXPR);
  CHECK_INT(ob_str_classify("††x", 2), OB_STR_PLAIN);
}

int main(void) {
  RUN(kind_only);
  RUN(kind_characters);
  RUN(plain_segments);
  RUN(plain_segments_allow_punctuation);
  RUN(indices_only_in_canonical_form);
  RUN(bracketed_keys);
  RUN(json_escapes_decode);
  RUN(nul_bytes_in_keys_are_refused);
  RUN(a_path_has_at_most_1000_segments);
  RUN(bracketed_indices);
  RUN(unicode_keys);
  RUN(bytes_that_are_not_utf8_pass_through);
  RUN(length_not_nul_terminator_bounds_the_input);
  RUN(error_record_untouched_on_success);
  RUN(bare_paths);
  RUN(long_paths_grow);
  RUN(classify_parameter_strings);
  return TEST_END();
}
