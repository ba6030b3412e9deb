/* test_path_format.c -- canonical text of paths and references, and the round
 * trip format -> parse -> equal, for chosen keys and thousands of random ones. */
#include <stdarg.h>

#include "base/ob_path.h"
#include "test.h"

/* Independent of ob_path.c: canonical index or -1. */
static int64_t oracle_index(const char *k, size_t n) {
  uint64_t v = 0;
  if (n == 0 || n > 19 || (k[0] == '0' && n > 1))
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (k[i] < '0' || k[i] > '9')
      return -1;
    v = v * 10 + (uint64_t)(k[i] - '0');
  }
  return v > INT64_MAX ? -1 : (int64_t)v;
}

static void path_add(ob_path *p, const char *key, size_t len) {
  p->segs = realloc(p->segs, (p->n + 1) * sizeof *p->segs);
  ob_seg *g = &p->segs[p->n++];
  g->key = malloc(len + 1);
  memcpy(g->key, key, len);
  g->key[len] = '\0';
  g->keylen = len;
  g->index = oracle_index(key, len);
  g->hash = 0; /* made by hand: hashed when used */
}

/* A path from NUL-terminated keys, ending with NULL. */
static ob_path path_of(const char *first, ...) {
  ob_path p = {0, NULL};
  va_list ap;
  va_start(ap, first);
  for (const char *k = first; k; k = va_arg(ap, const char *))
    path_add(&p, k, strlen(k));
  va_end(ap);
  return p;
}

/* Formats p (as a bare path, or as a reference when kind is set), checks the
 * text, then that it parses back to p. */
static void check_format(const char *kind, ob_path p, const char *expected) {
  ob_buf b;
  ob_error err = {0};
  ob_buf_init(&b);
  if (kind)
    ob_ref_format(&b, kind, &p);
  else
    ob_path_format(&b, &p);
  CHECK_STR(b.data, expected);
  if (kind) {
    ob_expr e;
    CHECK_INT(ob_expr_parse(b.data, b.len, OB_EXPR_INPUT, &e, &err), OB_OK);
    CHECK(e.n == 1 && e.alts[0].n == 1 && strcmp(e.alts[0].refs[0].kind, kind) == 0 &&
          ob_path_equal(&e.alts[0].refs[0].path, &p));
    ob_expr_free(&e);
  } else {
    ob_path q;
    CHECK_INT(ob_path_parse(b.data, b.len, &q, &err), OB_OK);
    CHECK(ob_path_equal(&q, &p));
    ob_path_free(&q);
  }
  ob_buf_free(&b);
  ob_path_free(&p);
}

TEST(plain_paths) {
  check_format(NULL, path_of(NULL), "");
  check_format("state", path_of(NULL), "†state");
  check_format(NULL, path_of("a", NULL), "a");
  check_format(NULL, path_of("a", "b", "c", NULL), "a.b.c");
  check_format("state", path_of("a", "b", "c", NULL), "†state.a.b.c");
  check_format("data", path_of("user", "name", NULL), "†data.user.name");
  check_format(NULL, path_of("items", "0", "17", "01", NULL), "items.0.17.01");
  check_format("k", path_of("3", NULL), "†k.3");
  check_format(NULL, path_of("a\"b", "a\\b", "é", "日本", "😀", "a†b", "@$#", NULL),
               "a\"b.a\\b.é.日本.😀.a†b.@$#");
  check_format("s", path_of("\xff\xfe", "\x7f", NULL), "†s.\xff\xfe.\x7f");
}

TEST(bracketed_where_needed) {
  check_format(NULL, path_of("a b", NULL), "[\"a b\"]");
  check_format("state", path_of("a b", NULL), "†state[\"a b\"]");
  check_format("state", path_of("users", "a.b@x.com", "age", NULL),
               "†state.users[\"a.b@x.com\"].age");
  check_format(NULL, path_of("x", "a.b", "y", NULL), "x[\"a.b\"].y");
  check_format(NULL, path_of("", NULL), "[\"\"]");
  check_format("s", path_of("a", "", "b", NULL), "†s.a[\"\"].b");
  check_format(NULL, path_of("a]b", "[0]", "x|y", "x&y", "||", NULL),
               "[\"a]b\"][\"[0]\"][\"x|y\"][\"x&y\"][\"||\"]");
  check_format(NULL, path_of("say \"hi\"", NULL), "[\"say \\\"hi\\\"\"]");
  check_format(NULL, path_of("a\\ b", NULL), "[\"a\\\\ b\"]");
  check_format(NULL, path_of("tab\there", "nl\n", "\r\v\f", "\x01\x1f", NULL),
               "[\"tab\\u0009here\"][\"nl\\u000a\"][\"\\u000d\\u000b\\u000c\"][\"\\u0001\\u001f\"]");
  check_format(NULL, path_of("ключ с пробелом", NULL), "[\"ключ с пробелом\"]");
}

TEST(first_segment_with_a_dagger_is_bracketed_in_a_bare_path) {
  /* In an output expression a bare "†x" would read as a reference. */
  check_format(NULL, path_of("†x", "†y", NULL), "[\"†x\"].†y");
  check_format("state", path_of("†x", NULL), "†state.†x");
  check_format(NULL, path_of("x†", NULL), "x†");
}

TEST(nul_bytes_are_written_but_never_parse) {
  /* a key made by hand may hold NUL: it is written as \u0000, and the parser refuses it
   * (no JSON object key can hold one, so no document could be read back with it) */
  ob_path p = {0, NULL}, q;
  ob_buf b;
  ob_error err = {0};
  path_add(&p, "\0", 1);
  path_add(&p, "a\0b", 3);
  path_add(&p, "", 0);
  ob_buf_init(&b);
  ob_path_format(&b, &p);
  CHECK_STR(b.data, "[\"\\u0000\"][\"a\\u0000b\"][\"\"]");
  CHECK_INT(ob_path_parse(b.data, b.len, &q, &err), OB_ESYNTAX);
  CHECK(strstr(err.msg, "(a NUL byte) in a bracketed key") != NULL);
  ob_buf_free(&b);
  ob_path_free(&p);
}

TEST(format_appends) {
  ob_buf b;
  ob_path p = path_of("a", "b c", NULL);
  ob_buf_init(&b);
  ob_buf_add(&b, "path=", 5);
  ob_path_format(&b, &p);
  ob_buf_add(&b, " ref=", 5);
  ob_ref_format(&b, "state", &p);
  CHECK_STR(b.data, "path=a[\"b c\"] ref=†state.a[\"b c\"]");
  ob_buf_free(&b);
  ob_path_free(&p);

  /* The root gives an empty string, not a NULL buffer. */
  ob_buf_init(&b);
  ob_path_format(&b, &p);
  CHECK(b.data != NULL);
  CHECK_STR(b.data, "");
  ob_buf_free(&b);
}

TEST(noncanonical_text_formats_canonically) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"†state[3]", "†state.3"},
      {"†state[\"abc\"]", "†state.abc"},
      {"†state[\"a\\u0041\"]", "†state.aA"},
      {"†state[\"\\u00e9\\/\"]", "†state.é/"},
      {"†s[\"\\ud83d\\ude00\"][0][\"x\"]", "†s.😀.0.x"},
      {"  †s.a  ", "†s.a"},
      {"†s[\"a\\tb\"]", "†s[\"a\\u0009b\"]"},
      {"†s[\"\\\"\"]", "†s.\""},
      {"†s[\"\\\\\"]", "†s.\\"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ob_expr e;
    ob_error err = {0};
    ob_buf b;
    ob_buf_init(&b);
    CHECK_INT(ob_expr_parse(cases[i].in, strlen(cases[i].in), OB_EXPR_INPUT, &e, &err), OB_OK);
    if (e.n == 1) {
      ob_ref_format(&b, e.alts[0].refs[0].kind, &e.alts[0].refs[0].path);
      CHECK_STR(b.data, cases[i].out);
    }
    ob_expr_free(&e);
    ob_buf_free(&b);
  }
}

/* --- the property: random keys of random bytes survive format -> parse --- */

static uint64_t rng_state;
static uint32_t rnd(void) { /* xorshift64*, fixed seed: the same run every time */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32);
}

static size_t put_utf8(char *d, uint32_t cp) {
  size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  static const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (size_t i = n - 1; i > 0; i--, cp >>= 6)
    d[i] = (char)(0x80 | (cp & 0x3F));
  d[0] = (char)(lead[n] | cp);
  return n;
}

/* A random key: a mix of raw bytes, grammar characters, letters, digits and
 * UTF-8 of random code points. */
static size_t random_key(char *k) {
  static const char specials[] = ".[]|&\"\\ \t\n\r\v\f/'{}:";
  size_t n = 0, parts = rnd() % 7;
  if (rnd() % 8 == 0) { /* an index-like key: "0", "17", "01", a huge one */
    static const char *const idx[] = {"0", "17", "01", "00", "9223372036854775807",
                                      "9223372036854775808", "123456789012345678901"};
    const char *s = idx[rnd() % 7];
    memcpy(k, s, strlen(s));
    return strlen(s);
  }
  for (size_t i = 0; i < parts; i++) {
    switch (rnd() % 6) {
    case 0: k[n++] = (char)(1 + rnd() % 255); break; /* any byte but NUL (refused in a key) */
    case 1: k[n++] = specials[rnd() % (sizeof specials - 1)]; break;
    case 2: k[n++] = (char)('a' + rnd() % 26); break;
    case 3: k[n++] = (char)('0' + rnd() % 10); break;
    case 4: memcpy(k + n, OB_DAGGER, OB_DAGGER_LEN), n += OB_DAGGER_LEN; break;
    default: {
      uint32_t cp = rnd() % 0x110000;
      if (cp >= 0xD800 && cp <= 0xDFFF)
        cp = 0x20AC;
      n += put_utf8(k + n, cp);
    }
    }
  }
  return n;
}

static ob_path random_path(void) {
  ob_path p = {0, NULL};
  size_t n = rnd() % 7;
  for (size_t i = 0; i < n; i++) {
    char key[64];
    size_t len = random_key(key);
    path_add(&p, key, len);
  }
  return p;
}

static int indexes_match(const ob_path *p) {
  for (size_t i = 0; i < p->n; i++)
    if (p->segs[i].index != oracle_index(p->segs[i].key, p->segs[i].keylen) ||
        p->segs[i].key[p->segs[i].keylen] != '\0')
      return 0;
  return 1;
}

static const char *random_kind(char *buf) {
  static const char first[] = "abcxyzABCZ_";
  static const char rest[] = "abcz09_-ZA";
  size_t n = 1 + rnd() % 6;
  buf[0] = first[rnd() % (sizeof first - 1)];
  for (size_t i = 1; i < n; i++)
    buf[i] = rest[rnd() % (sizeof rest - 1)];
  buf[n] = '\0';
  return buf;
}

/* format -> ob_path_parse -> equal, and the text is stable once canonical.
 * Returns whether the text used a bracket, so the caller can see both forms. */
static int prop_bare(const ob_path *p) {
  ob_buf b, b2;
  ob_path q;
  ob_error err = {0};
  ob_buf_init(&b);
  ob_buf_init(&b2);
  ob_path_format(&b, p);
  int rc = ob_path_parse(b.data, b.len, &q, &err);
  CHECK_INT(rc, OB_OK);
  if (rc == OB_OK) {
    CHECK(ob_path_equal(&q, p));
    CHECK(indexes_match(&q));
    ob_path_format(&b2, &q);
    CHECK(b2.len == b.len && memcmp(b2.data, b.data, b.len) == 0);
    ob_path_free(&q);
  } else {
    fprintf(stderr, "    %s\n", err.msg);
  }
  int bracketed = memchr(b.data, '[', b.len) != NULL;
  ob_buf_free(&b);
  ob_buf_free(&b2);
  return bracketed;
}

/* ob_ref_format -> ob_expr_parse (input mode) -> same kind and path, text as formatted. */
static void prop_ref(const char *kind, const ob_path *p) {
  ob_buf b;
  ob_expr e;
  ob_error err = {0};
  ob_buf_init(&b);
  ob_ref_format(&b, kind, p);
  int rc = ob_expr_parse(b.data, b.len, OB_EXPR_INPUT, &e, &err);
  CHECK_INT(rc, OB_OK);
  if (rc == OB_OK) {
    const ob_reference *r = &e.alts[0].refs[0];
    CHECK(e.n == 1 && e.alts[0].n == 1);
    CHECK_STR(r->kind, kind);
    CHECK(ob_path_equal(&r->path, p));
    CHECK(indexes_match(&r->path));
    CHECK(strlen(r->text) == b.len && memcmp(r->text, b.data, b.len) == 0);
    ob_expr_free(&e);
  } else {
    fprintf(stderr, "    %s\n", err.msg);
  }
  ob_buf_free(&b);
}

/* Formatted parts joined into an output expression keep their boundaries:
 * "<bare p> && †k.<q> || <bare q>" gives back p, q and q. */
static void prop_expr(const char *kind, const ob_path *p, const ob_path *q) {
  ob_buf b;
  ob_expr e;
  ob_error err = {0};
  if (p->n == 0 || q->n == 0)
    return; /* an empty bare path is not a part */
  ob_buf_init(&b);
  ob_path_format(&b, p);
  ob_buf_add(&b, " && ", 4);
  ob_ref_format(&b, kind, q);
  ob_buf_add(&b, "||", 2);
  ob_path_format(&b, q);
  int rc = ob_expr_parse(b.data, b.len, OB_EXPR_OUTPUT, &e, &err);
  CHECK_INT(rc, OB_OK);
  if (rc == OB_OK) {
    CHECK(e.n == 2 && e.alts[0].n == 2 && e.alts[1].n == 1);
    if (e.n == 2 && e.alts[0].n == 2 && e.alts[1].n == 1) {
      CHECK_STR(e.alts[0].refs[0].kind, "state");
      CHECK(ob_path_equal(&e.alts[0].refs[0].path, p));
      CHECK_STR(e.alts[0].refs[1].kind, kind);
      CHECK(ob_path_equal(&e.alts[0].refs[1].path, q));
      CHECK_STR(e.alts[1].refs[0].kind, "state");
      CHECK(ob_path_equal(&e.alts[1].refs[0].path, q));
    }
    ob_expr_free(&e);
  } else {
    fprintf(stderr, "    %s\n", err.msg);
  }
  ob_buf_free(&b);
}

TEST(random_round_trips) {
  char kind[8];
  int bracketed = 0, plain = 0;
  rng_state = 0x2545F4914F6CDD1DULL;
  for (int iter = 0; iter < 5000; iter++) {
    ob_path p = random_path(), q = random_path(), c;
    random_kind(kind);
    if (prop_bare(&p))
      bracketed++;
    else if (p.n > 0)
      plain++;
    prop_ref(kind, &p);
    prop_expr(kind, &p, &q);
    CHECK_INT(ob_path_copy(&c, &p), OB_OK);
    CHECK(ob_path_equal(&c, &p) && indexes_match(&c));
    ob_path_free(&c);
    ob_path_free(&p);
    ob_path_free(&q);
  }
  CHECK(bracketed > 1000 && plain > 500); /* both forms well exercised */
}

int main(void) {
  RUN(plain_paths);
  RUN(bracketed_where_needed);
  RUN(first_segment_with_a_dagger_is_bracketed_in_a_bare_path);
  RUN(nul_bytes_are_written_but_never_parse);
  RUN(format_appends);
  RUN(noncanonical_text_formats_canonically);
  RUN(random_round_trips);
  return TEST_END();
}
