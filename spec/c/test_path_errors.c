/* test_path_errors.c -- every malformed reference, path and expression: an
 * OB_ESYNTAX with the character position of the problem and a message that
 * says what was expected; never a crash, a leak or a wrong parse (fuzzed too). */
#include "base/ob_path.h"
#include "test.h"

enum { INPUT = OB_EXPR_INPUT, OUTPUT = OB_EXPR_OUTPUT, PATH = 2 };

/* Parses s[0..len) from an exact-size heap copy in one of the three modes. */
static int parse_any(const char *s, size_t len, int mode, ob_expr *e, ob_path *p,
                     ob_error *err) {
  char *copy = malloc(len ? len : 1);
  int rc;
  memcpy(copy, s, len);
  memset(e, 0, sizeof *e);
  memset(p, 0, sizeof *p);
  rc = mode == PATH ? ob_path_parse(copy, len, p, err) : ob_expr_parse(copy, len, mode, e, err);
  free(copy);
  return rc;
}

static const struct {
  int mode;
  const char *in;
  size_t pos;
  const char *what; /* a part of the message */
} cases[] = {
    /* empty */
    {INPUT, "", 0, "empty expression"},
    {INPUT, "   ", 0, "empty expression"},
    {OUTPUT, " \t\n", 0, "empty expression"},
    /* kinds */
    {INPUT, "†", 1, "expected a kind name after †"},
    {INPUT, "†.x", 1, "expected a kind name after †"},
    {INPUT, "†1x", 1, "expected a kind name after †"},
    {INPUT, "†-x", 1, "expected a kind name after †"},
    {INPUT, "† state", 1, "expected a kind name after †"},
    {INPUT, "††x", 1, "expected a kind name after †"},
    {INPUT, "†[\"a\"]", 1, "expected a kind name after †"},
    {INPUT, "†ключ.x", 1, "expected a kind name after †"},
    {OUTPUT, "a || †", 6, "expected a kind name after †"},
    {INPUT, "†state$", 6, "expected \".\", \"[\", \"||\", \"&&\" or the end after the kind name, found \"$\""},
    {INPUT, "†state\"x\"", 6, "after the kind name, found \"\\\"\""},
    {INPUT, "†stateé", 6, "after the kind name, found \"é\""},
    {INPUT, "†state†x", 6, "after the kind name, found \"†\""},
    {INPUT, "†a:b", 2, "after the kind name"},
    /* parts that are not references */
    {INPUT, ".x", 0, "expected a reference beginning with †, found \".\""},
    {INPUT, "state.x", 0, "expected a reference beginning with †, found \"s\""},
    {INPUT, "[\"a\"]", 0, "expected a reference beginning with †"},
    {INPUT, "|| †a", 0, "expected a reference beginning with †, found \"|\""},
    {INPUT, "\xE2\x80 †a", 0, "expected a reference beginning with †"},
    {INPUT, "†a || x", 6, "expected a reference beginning with †, found \"x\""},
    /* empty segments and dots */
    {INPUT, "†state..x", 7, "empty path segment"},
    {INPUT, "†state.", 7, "empty path segment"},
    {INPUT, "†state.a.", 9, "empty path segment"},
    {INPUT, "†state. x", 7, "empty path segment"},
    {INPUT, "†state.||†b", 7, "empty path segment"},
    {INPUT, "†state[\"a\"].", 12, "empty path segment"},
    {INPUT, "†state.[\"a\"]", 7, "\"[\" after \".\""},
    {INPUT, "†state.a.[0]", 9, "\"[\" after \".\""},
    /* stray brackets */
    {INPUT, "†state]", 6, "unexpected \"]\""},
    {INPUT, "†state.a]", 8, "unexpected \"]\""},
    {INPUT, "†state.a]b", 8, "unexpected \"]\""},
    {INPUT, "†state.]", 7, "unexpected \"]\""},
    {INPUT, "†state[\"a\"]]", 11, "unexpected \"]\""},
    /* after a bracket */
    {INPUT, "†state[\"a\"]x", 11, "expected \".\", \"[\", \"||\", \"&&\" or the end after \"]\", found \"x\""},
    {INPUT, "†state[0]x", 9, "after \"]\", found \"x\""},
    {INPUT, "†state[0]\"", 9, "after \"]\""},
    /* bracketed keys */
    {INPUT, "†state[\"abc", 6, "unterminated bracketed key"},
    {INPUT, "†state[\"", 6, "unterminated bracketed key"},
    {INPUT, "†state[\"abc\\\"]", 6, "unterminated bracketed key"},
    {INPUT, "†state[\"abc\\", 6, "unterminated bracketed key"},
    {INPUT, "†a.b[\"x\"][\"y", 9, "unterminated bracketed key"},
    {INPUT, "†state[\"a\"", 10, "expected \"]\" after the bracketed key, found the end"},
    {INPUT, "†state[\"a\"x]", 10, "expected \"]\" after the bracketed key, found \"x\""},
    {INPUT, "†state[\"a\" ]", 10, "expected \"]\" after the bracketed key, found \" \""},
    {INPUT, "†state[\"a\"\"b\"]", 10, "expected \"]\" after the bracketed key"},
    {INPUT, "†state[", 7, "expected a JSON string or an index after \"[\", found the end"},
    {INPUT, "†state[]", 7, "expected a JSON string or an index after \"[\", found \"]\""},
    {INPUT, "†state[a]", 7, "expected a JSON string or an index after \"[\", found \"a\""},
    {INPUT, "†state[ \"a\"]", 7, "expected a JSON string or an index"},
    {INPUT, "†state['a']", 7, "expected a JSON string or an index"},
    {INPUT, "†state[-1]", 7, "expected a JSON string or an index"},
    {INPUT, "†state[[0]]", 7, "expected a JSON string or an index"},
    /* JSON escapes */
    {INPUT, "†state[\"\\x\"]", 8, "invalid escape"},
    {INPUT, "†state[\"ab\\q\"]", 10, "invalid escape"},
    {INPUT, "†state[\"\\U0041\"]", 8, "invalid escape"},
    {INPUT, "†state[\"\\'\"]", 8, "invalid escape"},
    {INPUT, "†state[\"\\u12\"]", 8, "expected four hex digits after \"\\u\""},
    {INPUT, "†state[\"\\u12G4\"]", 8, "expected four hex digits"},
    {INPUT, "†state[\"\\u\"]", 8, "expected four hex digits"},
    {INPUT, "†state[\"\\u-123\"]", 8, "expected four hex digits"},
    {INPUT, "†state[\"\\ud800\"]", 8, "lone surrogate \"\\ud800\""},
    {INPUT, "†state[\"\\udc00\"]", 8, "lone surrogate \"\\udc00\""},
    {INPUT, "†state[\"\\uDFFF\"]", 8, "lone surrogate"},
    {INPUT, "†state[\"\\ud800\\u0041\"]", 8, "lone surrogate"},
    {INPUT, "†state[\"\\ud800\\udbff\"]", 8, "lone surrogate"},
    {INPUT, "†state[\"\\ud800x\"]", 8, "lone surrogate"},
    {INPUT, "†state[\"\\ud83d\\ude0\"]", 8, "lone surrogate"},
    {INPUT, "†state[\"a\\ud83d\"]", 9, "lone surrogate"},
    {INPUT, "†state[\"\\ude00\\ud83d\"]", 8, "lone surrogate"},
    {INPUT, "†state[\"a\tb\"]", 9, "control character in a bracketed key"},
    {INPUT, "†state[\"a\nb\"]", 9, "control character in a bracketed key"},
    {INPUT, "†state[\"\x1f\"]", 8, "control character in a bracketed key"},
    /* control characters in plain segments */
    {INPUT, "†state.a\x01" "b", 8, "control character \"\\u0001\" in a path segment"},
    {INPUT, "†state.\x1b", 7, "control character"},
    /* bracketed indices */
    {INPUT, "†state[01]", 7, "index with a leading zero"},
    {INPUT, "†state[00]", 7, "index with a leading zero"},
    {INPUT, "†state[1x]", 8, "expected \"]\" after the index, found \"x\""},
    {INPUT, "†state[1", 8, "expected \"]\" after the index, found the end"},
    {INPUT, "†state[1.5]", 8, "expected \"]\" after the index"},
    {INPUT, "†state[9223372036854775808]", 7, "index out of range"},
    {INPUT, "†state[99999999999999999999999]", 7, "index out of range"},
    /* operators */
    {INPUT, "†a |", 3, "expected \"||\" or \"&&\", found \"|\""},
    {INPUT, "†a | †b", 3, "a single \"|\" or \"&\" is not an operator"},
    {INPUT, "†a & †b", 3, "expected \"||\" or \"&&\", found \"&\""},
    {INPUT, "†a|†b", 2, "expected \"||\" or \"&&\""},
    {INPUT, "†a&†b", 2, "expected \"||\" or \"&&\""},
    {INPUT, "†a.b|c", 4, "expected \"||\" or \"&&\""},
    {INPUT, "†a †b", 3, "expected \"||\" or \"&&\", found \"†\""},
    {INPUT, "†a.b c", 5, "expected \"||\" or \"&&\", found \"c\""},
    {INPUT, "†a ||", 5, "expected a reference after \"||\""},
    {INPUT, "†a &&", 5, "expected a reference after \"&&\""},
    {INPUT, "†a || ", 6, "expected a reference after \"||\""},
    {INPUT, "†a&& \n", 6, "expected a reference after \"&&\""},
    {INPUT, "†a ||| †b", 5, "expected a reference beginning with †, found \"|\""},
    {INPUT, "†a &&& †b", 5, "expected a reference beginning with †, found \"&\""},
    {INPUT, "†a && || †b", 6, "expected a reference beginning with †, found \"|\""},
    {INPUT, "†a || && †b", 6, "expected a reference beginning with †"},
    {INPUT, "†a |& †b", 3, "expected \"||\" or \"&&\""},
    /* positions after multi-byte characters (counted in code points) */
    {INPUT, "†state.é..x", 9, "empty path segment"},
    {INPUT, "†state.日本語.[0]", 11, "\"[\" after \".\""},
    {INPUT, "†state.😀 x", 9, "expected \"||\" or \"&&\", found \"x\""},
    {INPUT, "†state[\"é\\q\"]", 9, "invalid escape"},
    {INPUT, "†state[\"😀😀\\ud800\"]", 10, "lone surrogate"},
    {INPUT, "†s.ключ || †t.日本 | †u", 17, "expected \"||\" or \"&&\""},
    {INPUT, "†state.\xff..x", 9, "empty path segment"},
    {INPUT, "†state.\xE2\x80..x", 10, "empty path segment"},
    {INPUT, "†state.\xF0\x9F\x98 ]", 11, "expected \"||\" or \"&&\""},
    /* output mode */
    {OUTPUT, ".x", 0, "empty path segment"},
    {OUTPUT, "a..b", 2, "empty path segment"},
    {OUTPUT, "a.", 2, "empty path segment"},
    {OUTPUT, "a ||", 4, "expected a reference after \"||\""},
    {OUTPUT, "|| a", 0, "expected a reference or a path, found \"|\""},
    {OUTPUT, "&& a", 0, "expected a reference or a path, found \"&\""},
    {OUTPUT, "a ||| b", 4, "expected a reference or a path"},
    {OUTPUT, "a b", 2, "expected \"||\" or \"&&\", found \"b\""},
    {OUTPUT, "]a", 0, "unexpected \"]\""},
    {OUTPUT, "a.[0]", 2, "\"[\" after \".\""},
    {OUTPUT, "a | b", 2, "expected \"||\" or \"&&\""},
    {OUTPUT, "[\"a\"]b", 5, "after \"]\", found \"b\""},
    {OUTPUT, "[01]", 1, "index with a leading zero"},
    {OUTPUT, "†.x || a", 1, "expected a kind name after †"},
    {OUTPUT, "user.summary || †state..x", 23, "empty path segment"},
    /* bare paths (ob_path_parse) */
    {PATH, ".", 0, "empty path segment"},
    {PATH, "a.", 2, "empty path segment"},
    {PATH, ".a", 0, "empty path segment"},
    {PATH, "a..b", 2, "empty path segment"},
    {PATH, " a", 0, "empty path segment"},
    {PATH, "a b", 1, "a path has no white space or operators, found \" \""},
    {PATH, "a ", 1, "a path has no white space"},
    {PATH, "a\tb", 1, "a path has no white space"},
    {PATH, "a|b", 1, "a path has no white space or operators, found \"|\""},
    {PATH, "a&&b", 1, "a path has no white space or operators, found \"&\""},
    {PATH, "a||b", 1, "found \"|\""},
    {PATH, "a]", 1, "unexpected \"]\""},
    {PATH, "]", 0, "unexpected \"]\""},
    {PATH, "[\"a\"]b", 5, "expected \".\", \"[\" or the end after \"]\", found \"b\""},
    {PATH, "[\"a\"] ", 5, "a path has no white space"},
    {PATH, "a[01]", 2, "index with a leading zero"},
    {PATH, "a.[\"b\"]", 2, "\"[\" after \".\""},
    {PATH, "[\"a", 0, "unterminated bracketed key"},
    {PATH, "[", 1, "expected a JSON string or an index after \"[\", found the end"},
    {PATH, "é.\x01", 2, "control character"},
};

TEST(every_malformed_form) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ob_expr e;
    ob_path p;
    ob_error err = {0};
    const char *in = cases[i].in;
    int rc = parse_any(in, strlen(in), cases[i].mode, &e, &p, &err);
    int ok = rc == OB_ESYNTAX && err.code == OB_ESYNTAX && err.pos == cases[i].pos &&
             strstr(err.msg, cases[i].what) != NULL && e.n == 0 && e.alts == NULL &&
             p.n == 0 && p.segs == NULL;
    char at[64];
    snprintf(at, sizeof at, " at character %zu in \"", cases[i].pos);
    ok = ok && strstr(err.msg, at) != NULL;
    CHECK(ok);
    if (!ok)
      fprintf(stderr, "    case %zu: input \"%s\": rc %d pos %zu msg: %s\n", i, in, rc, err.pos,
              err.msg);
    ob_expr_free(&e);
    ob_path_free(&p);
  }
}

TEST(exact_messages) {
  static const struct {
    int mode;
    const char *in, *msg;
  } exact[] = {
      {INPUT, "†.x",
       "expected a kind name after † at character 1 in \"†.x\"; a kind is a letter or \"_\", "
       "then letters, digits, \"_\" or \"-\""},
      {INPUT, "†state..x",
       "empty path segment at character 7 in \"†state..x\"; write [\"\"] for the empty key"},
      {INPUT, "†state[\"abc",
       "unterminated bracketed key at character 6 in \"†state[\\\"abc\"; end it with a quote and \"]\""},
      {INPUT, "†a | †b",
       "expected \"||\" or \"&&\", found \"|\" at character 3 in \"†a | †b\"; a single \"|\" or "
       "\"&\" is not an operator"},
      {INPUT, "  ",
       "empty expression at character 0 in \"  \"; expected a reference such as †state.x"},
      {INPUT, "†a\t|\n",
       "expected \"||\" or \"&&\", found \"|\" at character 3 in \"†a\\t|\\n\"; a single \"|\" or "
       "\"&\" is not an operator"},
      {INPUT, "†a.\x01",
       "control character \"\\u0001\" in a path segment at character 3 in \"†a.\\u0001\"; "
       "write the key as a bracketed JSON string instead"},
      {PATH, "a b",
       "a path has no white space or operators, found \" \" at character 1 in \"a b\"; write "
       "[\"a b\"] for a key that holds it"},
  };
  for (size_t i = 0; i < sizeof exact / sizeof *exact; i++) {
    ob_expr e;
    ob_path p;
    ob_error err = {0};
    CHECK_INT(parse_any(exact[i].in, strlen(exact[i].in), exact[i].mode, &e, &p, &err),
              OB_ESYNTAX);
    CHECK_STR(err.msg, exact[i].msg);
  }
}

TEST(long_input_is_quoted_in_part) {
  ob_buf b;
  ob_expr e;
  ob_error err = {0};
  ob_buf_init(&b);
  ob_buf_add(&b, "†state.", strlen("†state."));
  for (int i = 0; i < 400; i++)
    ob_buf_add(&b, "é", 2);
  ob_buf_add(&b, "..x", 3);
  CHECK_INT(ob_expr_parse(b.data, b.len, OB_EXPR_INPUT, &e, &err), OB_ESYNTAX);
  CHECK_INT(err.pos, 7 + 400 + 1);
  CHECK(strstr(err.msg, "empty path segment at character 408 in \"†state.éé") != NULL);
  CHECK(strstr(err.msg, "é...\"") != NULL); /* cut on a character boundary */
  CHECK(strlen(err.msg) < sizeof err.msg - 1);
  ob_buf_free(&b);
}

TEST(nothing_leaks_when_an_error_comes_late) {
  ob_expr e;
  ob_error err = {0};
  const char *s = "†a.b[\"c\"].d && †e.f[0] || †g.h.i && †j[\"k\"] || †l.m[\"\\ud800\"]";
  CHECK_INT(ob_expr_parse(s, strlen(s), OB_EXPR_INPUT, &e, &err), OB_ESYNTAX);
  CHECK_INT(e.n, 0);
  ob_path p;
  s = "a.b.c[\"d\"].e.f[0].g..";
  CHECK_INT(ob_path_parse(s, strlen(s), &p, &err), OB_ESYNTAX);
  CHECK_INT(p.n, 0);
  CHECK_INT(err.pos, 20);
}

/* --- fuzzing: random token soups must parse or fail cleanly, and what parses
 * must survive format -> parse unchanged --- */

static uint64_t rng_state;
static uint32_t rnd(void) { /* xorshift64*: a fixed seed gives the same run every time */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32);
}

static const char *const tokens[] = {
    "†",  "††", ".",  "[",      "]",      "\"",     "\\",       "|",    "||",       "&",
    "&&", " ",  "\t", "a",      "state",  "0",      "01",       "7",    "é",        "😀",
    "\\u", "d800", "\\ud83d\\ude00", "\xff", "\x01", "[\"", "\"]", "-",  "_",        "x.y",
    "\n", "[0]", "\\n", "\\\"", "00",     "9223372036854775808",    "†s.", "†s[\"", "]]"};

/* Fuzz inputs are valid UTF-8 plus lone 0xff bytes, never stray continuation
 * bytes, so counting the bytes that are not 10xxxxxx counts characters. */
static size_t count_chars(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

static int is_blank(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static void check_round_trip_ref(const ob_reference *r) {
  ob_buf b;
  ob_expr e;
  ob_error err = {0};
  ob_buf_init(&b);
  ob_ref_format(&b, r->kind, &r->path);
  int rc = ob_expr_parse(b.data, b.len, OB_EXPR_INPUT, &e, &err);
  CHECK_INT(rc, OB_OK);
  if (rc == OB_OK) {
    CHECK(e.n == 1 && e.alts[0].n == 1 && strcmp(e.alts[0].refs[0].kind, r->kind) == 0 &&
          ob_path_equal(&e.alts[0].refs[0].path, &r->path));
    ob_expr_free(&e);
  } else {
    fprintf(stderr, "    formatted %s: %s\n", b.data, err.msg);
  }
  ob_buf_free(&b);
}

static void check_parsed(const char *s, size_t n, int mode, const ob_expr *e, const ob_path *p) {
  if (mode == PATH) {
    ob_buf b;
    ob_path q;
    ob_error err = {0};
    ob_buf_init(&b);
    ob_path_format(&b, p);
    CHECK_INT(ob_path_parse(b.data, b.len, &q, &err), OB_OK);
    CHECK(ob_path_equal(p, &q));
    ob_path_free(&q);
    ob_buf_free(&b);
    return;
  }
  CHECK(e->n >= 1);
  for (size_t a = 0; a < e->n; a++) {
    const ob_alt *alt = &e->alts[a];
    size_t tl = strlen(alt->text);
    CHECK(alt->n >= 1 && tl > 0 && !is_blank(alt->text[0]) && !is_blank(alt->text[tl - 1]));
    for (size_t i = 0; i < alt->n; i++) {
      const ob_reference *r = &alt->refs[i];
      size_t rl = strlen(r->text);
      CHECK(r->kind[0] != '\0' && rl > 0);
      /* text is where pos says it is */
      size_t byte = 0, chars = 0;
      while (byte < n && chars < r->pos)
        if (++byte == n || ((unsigned char)s[byte] & 0xC0) != 0x80)
          chars++;
      CHECK(byte + rl <= n && memcmp(s + byte, r->text, rl) == 0);
      check_round_trip_ref(r);
    }
  }
}

static void fuzz_one(const char *s, size_t n) {
  for (int mode = INPUT; mode <= PATH; mode++) {
    ob_expr e;
    ob_path p;
    ob_error err = {0};
    int rc = parse_any(s, n, mode, &e, &p, &err);
    CHECK(rc == OB_OK || rc == OB_ESYNTAX);
    if (rc == OB_ESYNTAX) {
      CHECK(err.pos <= count_chars(s, n) && err.msg[0] != '\0');
      CHECK(e.n == 0 && p.n == 0);
    } else {
      check_parsed(s, n, mode, &e, &p);
    }
    ob_expr_free(&e);
    ob_path_free(&p);
  }
}

TEST(fuzz_token_soup) {
  char buf[256];
  int parsed = 0;
  rng_state = 0x9E3779B97F4A7C15ULL;
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = 0, ntok = 1 + rnd() % 12;
    for (size_t t = 0; t < ntok; t++) {
      const char *tok = tokens[rnd() % (sizeof tokens / sizeof *tokens)];
      size_t tl = strlen(tok);
      if (n + tl > sizeof buf)
        break;
      memcpy(buf + n, tok, tl);
      n += tl;
    }
    fuzz_one(buf, n);
    ob_expr e;
    ob_error err;
    parsed += ob_expr_parse(buf, n, OB_EXPR_OUTPUT, &e, &err) == OB_OK;
    ob_expr_free(&e);
  }
  CHECK(parsed > 500); /* the soup is not all errors */
}

/* Every string of up to 4 symbols over a small alphabet (5 costs 6 s under ASan). */
TEST(exhaustive_short_strings) {
  static const char *const alpha[] = {".", "[", "]", "\"", "\\", "|", "&", " ", "a", "0", "†", "\xff"};
  const size_t k = sizeof alpha / sizeof *alpha;
  char buf[4 * 3];
  for (size_t len = 0; len <= 4; len++) {
    size_t total = 1;
    for (size_t i = 0; i < len; i++)
      total *= k;
    for (size_t code = 0; code < total; code++) {
      size_t c = code, n = 0;
      for (size_t i = 0; i < len; i++, c /= k) {
        memcpy(buf + n, alpha[c % k], strlen(alpha[c % k]));
        n += strlen(alpha[c % k]);
      }
      fuzz_one(buf, n);
    }
  }
}

/* Truncating a valid expression anywhere gives a clean parse or a clean error. */
TEST(every_prefix_of_a_valid_expression) {
  const char *s = " †state.users[\"a.b@x.com\"][\"\\ud83d\\ude00\\n\"].age[3] && †d.é||"
                  "†k-1[0].x \t&& †_ ";
  size_t n = strlen(s);
  for (size_t i = 0; i <= n; i++)
    fuzz_one(s, i);
  ob_expr e;
  ob_error err;
  CHECK_INT(ob_expr_parse(s, n, OB_EXPR_INPUT, &e, &err), OB_OK);
  ob_expr_free(&e);
}

int main(void) {
  RUN(every_malformed_form);
  RUN(exact_messages);
  RUN(long_input_is_quoted_in_part);
  RUN(nothing_leaks_when_an_error_comes_late);
  RUN(fuzz_token_soup);
  RUN(exhaustive_short_strings);
  RUN(every_prefix_of_a_valid_expression);
  return TEST_END();
}
