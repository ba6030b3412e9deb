/* ob_path.c -- parsing and printing references (†kind.path), bare paths and the
 * || / && expressions of plan-format §2-3; comparing paths by key text. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_path.h"

/*
 * Grammar, over bytes († is U+2020, the three bytes E2 80 A0):
 *
 *   expr    := ws* alt ( ws* "||" ws* alt )* ws*     ("||" binds looser)
 *   alt     := part ( ws* "&&" ws* part )*
 *   part    := ref | path          (path only in OB_EXPR_OUTPUT: kind "state")
 *   ref     := "†" kind tail
 *   kind    := [A-Za-z_] [A-Za-z0-9_-]*
 *   path    := ( plain | bracket ) tail      (ob_path_parse: also "")
 *   tail    := ( "." plain | bracket )*
 *   plain   := 1* any byte but . [ ] | & and ASCII controls (white space among them)
 *   bracket := "[" json-string "]"  |  "[" index "]"
 *   index   := "0" | [1-9] [0-9]*  fitting in int64 (same segment as plain "17")
 *   ws      := space, tab, LF, VT, FF, CR
 *
 * A part ends at white space, "|", "&" or the end of the input, so operators need
 * no surrounding blanks ("†a||†b"). After a "]" or a kind only ".", "[", the end of
 * the part or the end may come. Raw control bytes are refused (in a plain segment
 * they would be invisible; in a JSON string they are invalid), and so is \u0000
 * in a bracketed key (JSON text cannot carry a NUL in an object key, so a value
 * written there could never be read back from a journal). A path has at most
 * OB_PATH_MAX_SEGS segments (ob_path.h); bytes >= 0x80 pass
 * through unchecked, so every key, valid UTF-8 or not, has a text form that parses
 * back to it, which is what ob_path_format relies on.
 *
 * Costs: one left-to-right pass with one byte of look-ahead (two for operators),
 * no recursion, O(n) in the input length. Allocations: one per key, kind and text,
 * plus amortised doubling of the segment, ref and alternative arrays. Character
 * offsets (code points, an invalid byte counting as one) are computed only where
 * they are reported, from a cursor that only moves forward on success, so the
 * positions of all refs cost O(n) together. Comparisons are O(depth) memcmp's of
 * key text; formatting is O(total key bytes).
 */

typedef struct parser {
  const unsigned char *s;
  size_t len;
  size_t i;                    /* byte cursor */
  size_t mark_byte, mark_char; /* s[0..mark_byte) holds mark_char code points */
  ob_error *err;
} parser;

enum { QUOTE_MAX = 240 }; /* bytes of the input quoted in an error message */

/* --- characters --- */

static int is_ws(unsigned c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Bytes that end a plain segment (controls and white space are checked apart). */
static int is_delim(unsigned c) {
  return c == '.' || c == '[' || c == ']' || c == '|' || c == '&';
}

static int is_digit(unsigned c) { return c >= '0' && c <= '9'; }

static int is_kind_start(unsigned c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_kind_char(unsigned c) { return is_kind_start(c) || is_digit(c) || c == '-'; }

/* Length of the well-formed UTF-8 sequence at s, or 1 for a byte that does not
 * start one (so that broken input still advances one "character" a byte). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0], need;
  uint32_t min, cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    need = 1, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF)
    need = 2, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4)
    need = 3, min = 0x10000;
  else
    return 1;
  if (n <= need)
    return 1;
  cp = c & (0x3Fu >> need);
  for (unsigned k = 1; k <= need; k++) {
    if ((s[k] & 0xC0) != 0x80)
      return 1;
    cp = cp << 6 | (s[k] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 1;
  return need + 1;
}

/* Code points in s[0..byte). Moves the mark forward, so successive calls with
 * growing offsets cost O(n) in total. */
static size_t char_pos(parser *p, size_t byte) {
  if (byte < p->mark_byte)
    p->mark_byte = p->mark_char = 0;
  while (p->mark_byte < byte) {
    p->mark_byte += utf8_len(p->s + p->mark_byte, p->len - p->mark_byte);
    p->mark_char++;
  }
  return p->mark_char;
}

static int has_dagger(const parser *p) {
  return p->len - p->i >= OB_DAGGER_LEN && memcmp(p->s + p->i, OB_DAGGER, OB_DAGGER_LEN) == 0;
}

static int at_op(const parser *p, char op) {
  return p->len - p->i >= 2 && p->s[p->i] == op && p->s[p->i + 1] == op;
}

static void skip_ws(parser *p) {
  while (p->i < p->len && is_ws(p->s[p->i]))
    p->i++;
}

/* --- error messages --- */

/* Appends s[0..n) as a JSON-ish quoted string, at most `max` bytes of it, cut on
 * a character boundary, so that a message shows exactly what was parsed. */
static void add_quoted(ob_buf *b, const unsigned char *s, size_t n, size_t max) {
  size_t i = 0;
  ob_buf_addc(b, '"');
  while (i < n) {
    size_t k = utf8_len(s + i, n - i);
    unsigned c = s[i];
    if (i + k > max) {
      ob_buf_add(b, "...", 3);
      break;
    }
    if (c == '"' || c == '\\') {
      ob_buf_addc(b, '\\');
      ob_buf_addc(b, (char)c);
    } else if (c == '\n') {
      ob_buf_add(b, "\\n", 2);
    } else if (c == '\t') {
      ob_buf_add(b, "\\t", 2);
    } else if (c < 0x20) {
      ob_buf_addf(b, "\\u%04x", c);
    } else {
      ob_buf_add(b, (const char *)s + i, k);
    }
    i += k;
  }
  ob_buf_addc(b, '"');
}

/* Names the character at byte `at` for a message: "x", "\u0001" or `the end`. */
static void add_found(ob_buf *b, const parser *p, size_t at) {
  if (at >= p->len)
    ob_buf_add(b, "the end", 7);
  else
    add_quoted(b, p->s + at, utf8_len(p->s + at, p->len - at), 4);
}

/* Fills p->err with "<what>[, found <char>] at character N in "<input>"[; <hint>]"
 * and returns OB_ESYNTAX. `found` >= 0 names the character at `at`. */
static int syntax_error(parser *p, size_t at, int found, const char *hint, const char *fmt,
                        ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static int syntax_error(parser *p, size_t at, int found, const char *hint, const char *fmt,
                        ...) {
  char what[256];
  ob_buf b;
  va_list ap;
  size_t pos = char_pos(p, at);
  if (!p->err)
    return OB_ESYNTAX;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  ob_buf_init(&b);
  ob_buf_add(&b, what, strlen(what));
  if (found) {
    ob_buf_add(&b, ", found ", 8);
    add_found(&b, p, at);
  }
  ob_buf_addf(&b, " at character %zu in ", pos);
  add_quoted(&b, p->s, p->len, QUOTE_MAX);
  if (hint)
    ob_buf_addf(&b, "; %s", hint);
  ob_error_set(p->err, OB_ESYNTAX, pos, "%s", b.data);
  ob_buf_free(&b);
  return OB_ESYNTAX;
}

static int nomem(ob_error *err) {
  return ob_error_set(err, OB_ENOMEM, 0, "out of memory while parsing a path");
}

/* --- building the result --- */

static char *copy_bytes(const void *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    if (n)
      memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* Grows *arr (elements of `size` bytes, *cap of them) to hold n + 1, and zeroes
 * slot n, so that a half-built element is always safe to free. */
static void *grow(void *arr, size_t n, size_t *cap, size_t size) {
  char *a = arr;
  if (n == *cap) {
    size_t c = *cap ? *cap * 2 : 4;
    a = realloc(arr, c * size);
    if (!a)
      return NULL;
    *cap = c;
  }
  memset(a + n * size, 0, size);
  return a;
}

/* A canonical array index ("0", "17": no sign, no leading zero, <= INT64_MAX), or -1. */
static int64_t key_index(const char *k, size_t n) {
  uint64_t v = 0;
  if (n == 0 || n > 19 || (k[0] == '0' && n > 1))
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (!is_digit((unsigned char)k[i]))
      return -1;
    v = v * 10 + (uint64_t)(k[i] - '0'); /* 19 digits cannot wrap a uint64 */
  }
  return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
}

/* Appends a segment that owns key (malloc'ed, key[len] == 0); frees it on failure. */
static int seg_add(parser *p, ob_path *path, size_t *cap, char *key, size_t len) {
  ob_seg *segs;
  if (!key)
    return nomem(p->err);
  if (path->n >= OB_PATH_MAX_SEGS) {
    free(key);
    return syntax_error(p, p->i, 0, NULL, "a path has at most %d segments; this one goes on",
                        OB_PATH_MAX_SEGS);
  }
  segs = grow(path->segs, path->n, cap, sizeof *segs);
  if (!segs) {
    free(key);
    return nomem(p->err);
  }
  path->segs = segs;
  segs[path->n].key = key;
  segs[path->n].keylen = len;
  segs[path->n].index = key_index(key, len);
  segs[path->n].hash = ob_key_hash(key, len);
  path->n++;
  return OB_OK;
}

/* --- segments --- */

static int parse_plain(parser *p, ob_path *path, size_t *cap) {
  size_t start = p->i;
  while (p->i < p->len) {
    unsigned c = p->s[p->i];
    if (is_delim(c) || is_ws(c))
      break;
    if (c < 0x20)
      return syntax_error(p, p->i, 0, "write the key as a bracketed JSON string instead",
                          "control character \"\\u%04x\" in a path segment", c);
    p->i++;
  }
  if (p->i == start) {
    if (p->i < p->len && p->s[p->i] == ']')
      return syntax_error(p, p->i, 0, NULL, "unexpected \"]\"");
    return syntax_error(p, p->i, 0, "write [\"\"] for the empty key", "empty path segment");
  }
  return seg_add(p, path, cap, copy_bytes(p->s + start, p->i - start), p->i - start);
}

static int hex4(const unsigned char *s, uint32_t *out) {
  uint32_t v = 0;
  for (int k = 0; k < 4; k++) {
    unsigned c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else
      return 0;
  }
  *out = v;
  return 1;
}

static size_t utf8_put(char *d, uint32_t cp) {
  if (cp < 0x80) {
    d[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    d[0] = (char)(0xC0 | cp >> 6);
    d[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    d[0] = (char)(0xE0 | cp >> 12);
    d[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    d[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  d[0] = (char)(0xF0 | cp >> 18);
  d[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  d[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  d[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Decodes the \uXXXX escape (or surrogate pair) at s[j] (j < end, s[j] == '\\'):
 * stores the code point and returns the bytes consumed, or 0 with an error. */
static size_t decode_u(parser *p, size_t j, size_t end, uint32_t *cp) {
  uint32_t lo;
  if (end - j < 6 || !hex4(p->s + j + 2, cp)) {
    syntax_error(p, j, 0, NULL, "expected four hex digits after \"\\u\" in a bracketed key");
    return 0;
  }
  if (*cp >= 0xD800 && *cp <= 0xDBFF && end - j >= 12 && p->s[j + 6] == '\\' &&
      p->s[j + 7] == 'u' && hex4(p->s + j + 8, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    return 12;
  }
  if (*cp >= 0xD800 && *cp <= 0xDFFF) {
    syntax_error(p, j, 0, "a surrogate needs its pair, as in \\ud83d\\ude00",
                 "lone surrogate \"\\u%04x\" in a bracketed key", (unsigned)*cp);
    return 0;
  }
  return 6;
}

/* Decodes the JSON string s(q..end) (s[q] and s[end] the quotes) into key. The
 * decoded text is never longer than the escaped one, so key needs end - q bytes. */
static int decode_string(parser *p, size_t q, size_t end, char *key, size_t *keylen) {
  size_t j = q + 1, k = 0;
  while (j < end) {
    unsigned c = p->s[j];
    uint32_t cp;
    size_t used;
    if (c < 0x20)
      return syntax_error(p, j, 0, NULL,
                          "control character in a bracketed key: write it as \\u%04x", c);
    if (c != '\\') {
      key[k++] = (char)c;
      j++;
      continue;
    }
    switch (p->s[j + 1]) { /* j + 1 < end: the closing quote is never escaped */
    case '"': key[k++] = '"'; break;
    case '\\': key[k++] = '\\'; break;
    case '/': key[k++] = '/'; break;
    case 'b': key[k++] = '\b'; break;
    case 'f': key[k++] = '\f'; break;
    case 'n': key[k++] = '\n'; break;
    case 'r': key[k++] = '\r'; break;
    case 't': key[k++] = '\t'; break;
    case 'u':
      used = decode_u(p, j, end, &cp);
      if (!used)
        return OB_ESYNTAX;
      if (!cp) /* no JSON object key can hold it: the journal could not be read back */
        return syntax_error(p, j, 0, NULL, "\\u0000 (a NUL byte) in a bracketed key: "
                                           "no object key can hold it");
      k += utf8_put(key + k, cp);
      j += used;
      continue;
    default:
      return syntax_error(p, j, 0, "JSON allows \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
                          "invalid escape in a bracketed key");
    }
    j += 2;
  }
  key[k] = '\0';
  *keylen = k;
  return OB_OK;
}

/* ["..."]: p->i is on the quote, open on the bracket. */
static int parse_json_key(parser *p, size_t open, ob_path *path, size_t *cap) {
  size_t q = p->i, end = q + 1, keylen = 0;
  char *key;
  int rc;
  while (end < p->len && p->s[end] != '"')
    end += p->s[end] == '\\' ? 2 : 1;
  if (end >= p->len)
    return syntax_error(p, open, 0, "end it with a quote and \"]\"", "unterminated bracketed key");
  key = malloc(end - q);
  if (!key)
    return nomem(p->err);
  rc = decode_string(p, q, end, key, &keylen);
  if (rc) {
    free(key);
    return rc;
  }
  p->i = end + 1;
  if (p->i >= p->len || p->s[p->i] != ']') {
    free(key);
    return syntax_error(p, p->i, 1, NULL, "expected \"]\" after the bracketed key");
  }
  p->i++;
  return seg_add(p, path, cap, key, keylen);
}

/* [17]: the same segment as .17, offered because users write it. */
static int parse_index(parser *p, ob_path *path, size_t *cap) {
  size_t start = p->i, n;
  while (p->i < p->len && is_digit(p->s[p->i]))
    p->i++;
  n = p->i - start;
  if (n > 1 && p->s[start] == '0')
    return syntax_error(p, start, 0, "write [0], [17], or [\"01\"] for the key \"01\"",
                        "index with a leading zero");
  if (key_index((const char *)p->s + start, n) < 0)
    return syntax_error(p, start, 0, "write the key as a string: [\"...\"]",
                        "index out of range");
  if (p->i >= p->len || p->s[p->i] != ']')
    return syntax_error(p, p->i, 1, NULL, "expected \"]\" after the index");
  p->i++;
  return seg_add(p, path, cap, copy_bytes(p->s + start, n), n);
}

static int parse_bracket(parser *p, ob_path *path, size_t *cap) {
  size_t open = p->i++;
  if (p->i < p->len && p->s[p->i] == '"')
    return parse_json_key(p, open, path, cap);
  if (p->i < p->len && is_digit(p->s[p->i]))
    return parse_index(p, path, cap);
  return syntax_error(p, p->i, 1, NULL,
                      "expected a JSON string or an index after \"[\"");
}

/* The segments after a kind or a first segment. In an expression a part ends at
 * white space or an operator; in a bare path those are errors. `after` names
 * what precedes the cursor, for the message when an odd character follows it. */
static int parse_tail(parser *p, ob_path *path, size_t *cap, int in_expr, const char *after) {
  while (p->i < p->len) {
    unsigned c = p->s[p->i];
    int rc;
    if (c == '.') {
      p->i++;
      if (p->i < p->len && p->s[p->i] == '[')
        return syntax_error(p, p->i, 0,
                            "write a bracketed key right after the segment, with no dot: "
                            "a[\"b.c\"]",
                            "\"[\" after \".\"");
      rc = parse_plain(p, path, cap);
      after = "a segment";
    } else if (c == '[') {
      rc = parse_bracket(p, path, cap);
      after = "\"]\"";
    } else if (is_ws(c) || c == '|' || c == '&') {
      if (in_expr)
        return OB_OK;
      return syntax_error(p, p->i, 1, "write [\"a b\"] for a key that holds it",
                          "a path has no white space or operators");
    } else if (c == ']') {
      return syntax_error(p, p->i, 0, NULL, "unexpected \"]\"");
    } else if (in_expr) {
      return syntax_error(p, p->i, 1, NULL,
                          "expected \".\", \"[\", \"||\", \"&&\" or the end after %s", after);
    } else {
      return syntax_error(p, p->i, 1, NULL, "expected \".\", \"[\" or the end after %s",
                          after);
    }
    if (rc)
      return rc;
  }
  return OB_OK;
}

/* A path without a kind: a first segment (plain or bracketed), then the tail. */
static int parse_bare(parser *p, ob_path *path, size_t *cap, int in_expr) {
  int bracket = p->s[p->i] == '[';
  int rc = bracket ? parse_bracket(p, path, cap) : parse_plain(p, path, cap);
  if (rc)
    return rc;
  return parse_tail(p, path, cap, in_expr, bracket ? "\"]\"" : "a segment");
}

/* --- expressions --- */

static int parse_ref(parser *p, ob_reference *r) {
  size_t start, cap = 0;
  p->i += OB_DAGGER_LEN;
  start = p->i;
  if (p->i >= p->len || !is_kind_start(p->s[p->i]))
    return syntax_error(p, p->i, 0,
                        "a kind is a letter or \"_\", then letters, digits, \"_\" or \"-\"",
                        "expected a kind name after \xE2\x80\xA0");
  while (p->i < p->len && is_kind_char(p->s[p->i]))
    p->i++;
  r->kind = copy_bytes(p->s + start, p->i - start);
  if (!r->kind)
    return nomem(p->err);
  return parse_tail(p, &r->path, &cap, 1, "the kind name");
}

static int parse_part(parser *p, int mode, ob_reference *r) {
  size_t start = p->i, cap = 0;
  int rc;
  unsigned c = p->s[p->i];
  if (has_dagger(p)) {
    rc = parse_ref(p, r);
  } else if (mode == OB_EXPR_OUTPUT && c != '|' && c != '&') {
    r->kind = copy_bytes("state", 5);
    rc = r->kind ? parse_bare(p, &r->path, &cap, 1) : nomem(p->err);
  } else if (mode == OB_EXPR_OUTPUT) {
    rc = syntax_error(p, p->i, 1, NULL, "expected a reference or a path");
  } else {
    rc = syntax_error(p, p->i, 1, NULL, "expected a reference beginning with \xE2\x80\xA0");
  }
  if (rc)
    return rc;
  r->text = copy_bytes(p->s + start, p->i - start);
  if (!r->text)
    return nomem(p->err);
  r->pos = char_pos(p, start);
  return OB_OK;
}

/* After an operator: the next part must be there. */
static int after_op(parser *p, const char *op) {
  p->i += 2;
  skip_ws(p);
  if (p->i < p->len)
    return OB_OK;
  return syntax_error(p, p->i, 0, NULL, "expected a reference after \"%s\"", op);
}

/* Returns OB_OK at the end of the input or on a "||" (not consumed). */
static int parse_alt(parser *p, int mode, ob_alt *alt) {
  size_t cap = 0, start = p->i, end;
  int rc;
  for (;;) {
    ob_reference *refs = grow(alt->refs, alt->n, &cap, sizeof *refs);
    if (!refs)
      return nomem(p->err);
    alt->refs = refs;
    alt->n++;
    rc = parse_part(p, mode, &refs[alt->n - 1]);
    if (rc)
      return rc;
    end = p->i;
    skip_ws(p);
    if (p->i == p->len || at_op(p, '|'))
      break;
    if (!at_op(p, '&')) {
      unsigned c = p->s[p->i];
      const char *hint = c == '|' || c == '&' ? "a single \"|\" or \"&\" is not an operator"
                                              : NULL;
      return syntax_error(p, p->i, 1, hint, "expected \"||\" or \"&&\"");
    }
    if ((rc = after_op(p, "&&")))
      return rc;
  }
  alt->text = copy_bytes(p->s + start, end - start);
  return alt->text ? OB_OK : nomem(p->err);
}

static int parse_expr(parser *p, int mode, ob_expr *e) {
  size_t cap = 0;
  for (;;) {
    ob_alt *alts = grow(e->alts, e->n, &cap, sizeof *alts);
    int rc;
    if (!alts)
      return nomem(p->err);
    e->alts = alts;
    e->n++;
    rc = parse_alt(p, mode, &alts[e->n - 1]);
    if (rc)
      return rc;
    if (p->i == p->len)
      return OB_OK;
    if ((rc = after_op(p, "||")))
      return rc;
  }
}

static void parser_init(parser *p, const char *s, size_t len, ob_error *err) {
  memset(p, 0, sizeof *p);
  p->s = (const unsigned char *)(s ? s : "");
  p->len = s ? len : 0;
  p->err = err;
}

static void compact(ob_expr *e);

int ob_expr_parse(const char *s, size_t len, int mode, ob_expr *out, ob_error *err) {
  parser p;
  int rc;
  parser_init(&p, s, len, err);
  memset(out, 0, sizeof *out);
  skip_ws(&p);
  if (p.i == p.len)
    return syntax_error(&p, 0, 0, "expected a reference such as \xE2\x80\xA0state.x",
                        "empty expression");
  rc = parse_expr(&p, mode, out);
  if (rc)
    ob_expr_free(out);
  else
    compact(out);
  return rc;
}

const char *ob_kind_shared(const char *s, size_t len) {
  static const char *const kinds[] = {"state", "input", "context"};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (strlen(kinds[i]) == len && !memcmp(kinds[i], s, len))
      return kinds[i];
  return NULL;
}

/* Moves a freshly parsed expression into one allocation (see ob_path.h). */
static void compact(ob_expr *e) {
  size_t size = e->n * sizeof(ob_alt);
  for (size_t a = 0; a < e->n; a++) {
    const ob_alt *alt = &e->alts[a];
    size += alt->n * sizeof(ob_reference) + strlen(alt->text) + 1;
    for (size_t r = 0; r < alt->n; r++) {
      const ob_reference *ref = &alt->refs[r];
      size += strlen(ref->text) + 1 + ref->path.n * sizeof(ob_seg);
      if (!ob_kind_shared(ref->kind, strlen(ref->kind)))
        size += strlen(ref->kind) + 1;
      for (size_t k = 0; k < ref->path.n; k++)
        size += ref->path.segs[k].keylen + 1;
    }
  }
  /* the arrays first (pointer-aligned), then the bytes of every string */
  char *block = malloc(size), *at;
  if (!block)
    return; /* stays spread out: still a valid expression */
  ob_alt *alts = (ob_alt *)block;
  at = block + e->n * sizeof(ob_alt);
  for (size_t a = 0; a < e->n; a++) {
    alts[a] = e->alts[a];
    alts[a].refs = (ob_reference *)at;
    at += alts[a].n * sizeof(ob_reference);
    for (size_t r = 0; r < alts[a].n; r++) {
      alts[a].refs[r] = e->alts[a].refs[r];
      alts[a].refs[r].path.segs = alts[a].refs[r].path.n ? (ob_seg *)at : NULL;
      at += alts[a].refs[r].path.n * sizeof(ob_seg);
      for (size_t k = 0; k < alts[a].refs[r].path.n; k++)
        alts[a].refs[r].path.segs[k] = e->alts[a].refs[r].path.segs[k];
    }
  }
  for (size_t a = 0; a < e->n; a++) { /* now the strings */
    size_t n = strlen(alts[a].text) + 1;
    alts[a].text = memcpy(at, alts[a].text, n), at += n;
    for (size_t r = 0; r < alts[a].n; r++) {
      ob_reference *ref = &alts[a].refs[r];
      n = strlen(ref->kind) + 1;
      const char *shared = ob_kind_shared(ref->kind, n - 1);
      if (shared)
        ref->kind = shared;
      else
        ref->kind = memcpy(at, ref->kind, n), at += n;
      n = strlen(ref->text) + 1;
      ref->text = memcpy(at, ref->text, n), at += n;
      for (size_t k = 0; k < ref->path.n; k++) {
        ob_seg *seg = &ref->path.segs[k];
        seg->key = memcpy(at, seg->key, seg->keylen + 1), at += seg->keylen + 1;
      }
    }
  }
  ob_expr spread = *e; /* the old pieces go; their contents live on in the block */
  e->alts = alts;
  e->block = block;
  ob_expr_free(&spread);
}

void ob_expr_free(ob_expr *e) {
  if (e->block) {
    free(e->block);
    e->alts = NULL;
    e->block = NULL;
    e->n = 0;
    return;
  }
  for (size_t a = 0; a < e->n; a++) {
    ob_alt *alt = &e->alts[a];
    for (size_t r = 0; r < alt->n; r++) {
      free((char *)alt->refs[r].kind); /* spread out: every piece its own */
      ob_path_free(&alt->refs[r].path);
      free(alt->refs[r].text);
    }
    free(alt->refs);
    free(alt->text);
  }
  free(e->alts);
  e->alts = NULL;
  e->n = 0;
}

/* --- bare paths --- */

int ob_path_parse(const char *s, size_t len, ob_path *out, ob_error *err) {
  parser p;
  size_t cap = 0;
  int rc;
  parser_init(&p, s, len, err);
  memset(out, 0, sizeof *out);
  if (p.len == 0)
    return OB_OK;
  rc = parse_bare(&p, out, &cap, 0);
  if (rc)
    ob_path_free(out);
  return rc;
}

void ob_path_free(ob_path *p) {
  for (size_t i = 0; i < p->n; i++)
    free(p->segs[i].key);
  free(p->segs);
  p->segs = NULL;
  p->n = 0;
}

int ob_path_copy(ob_path *dst, const ob_path *src) {
  memset(dst, 0, sizeof *dst);
  if (src->n == 0)
    return OB_OK;
  dst->segs = calloc(src->n, sizeof *dst->segs);
  if (!dst->segs)
    return OB_ENOMEM;
  for (size_t i = 0; i < src->n; i++) {
    const ob_seg *g = &src->segs[i];
    ob_seg *d = &dst->segs[i];
    d->key = copy_bytes(g->key, g->keylen);
    if (!d->key) {
      dst->n = src->n; /* calloc'ed: the keys not yet copied are NULL */
      ob_path_free(dst);
      return OB_ENOMEM;
    }
    d->keylen = g->keylen;
    d->index = g->index;
    d->hash = g->hash;
  }
  dst->n = src->n;
  return OB_OK;
}

/* --- formatting --- */

/* Whether a key must be bracketed to parse back to itself. A first segment of a
 * bare path beginning with † would read as a reference in an output expression. */
static int needs_brackets(const ob_seg *g, int first_bare) {
  const unsigned char *k = (const unsigned char *)g->key;
  if (g->keylen == 0)
    return 1;
  for (size_t i = 0; i < g->keylen; i++)
    if (is_delim(k[i]) || k[i] <= ' ')
      return 1;
  return first_bare && g->keylen >= OB_DAGGER_LEN &&
         memcmp(k, OB_DAGGER, OB_DAGGER_LEN) == 0;
}

static void add_bracketed(ob_buf *b, const ob_seg *g) {
  const unsigned char *k = (const unsigned char *)g->key;
  size_t run = 0; /* bytes copied as they are, added in one go */
  ob_buf_add(b, "[\"", 2);
  for (size_t i = 0; i < g->keylen; i++) {
    if (k[i] >= 0x20 && k[i] != '"' && k[i] != '\\')
      continue;
    ob_buf_add(b, (const char *)k + run, i - run);
    if (k[i] < 0x20)
      ob_buf_addf(b, "\\u%04x", k[i]);
    else {
      ob_buf_addc(b, '\\');
      ob_buf_addc(b, (char)k[i]);
    }
    run = i + 1;
  }
  ob_buf_add(b, (const char *)k + run, g->keylen - run);
  ob_buf_add(b, "\"]", 2);
}

static void add_segs(ob_buf *b, const ob_path *p, int after_kind) {
  for (size_t i = 0; i < p->n; i++) {
    const ob_seg *g = &p->segs[i];
    int first_bare = i == 0 && !after_kind;
    if (needs_brackets(g, first_bare)) {
      add_bracketed(b, g);
      continue;
    }
    if (!first_bare)
      ob_buf_addc(b, '.');
    ob_buf_add(b, g->key, g->keylen);
  }
}

void ob_path_format(ob_buf *b, const ob_path *p) {
  ob_buf_add(b, "", 0); /* so that b->data is a string even for the root */
  add_segs(b, p, 0);
}

void ob_ref_format(ob_buf *b, const char *kind, const ob_path *p) {
  ob_buf_add(b, OB_DAGGER, OB_DAGGER_LEN);
  ob_buf_add(b, kind, strlen(kind));
  add_segs(b, p, 1);
}

/* --- comparing --- */

static int seg_equal(const ob_seg *a, const ob_seg *b) {
  return a->keylen == b->keylen && (a->keylen == 0 || memcmp(a->key, b->key, a->keylen) == 0);
}

int ob_path_is_prefix(const ob_path *a, const ob_path *b) {
  if (a->n > b->n)
    return 0;
  for (size_t i = 0; i < a->n; i++)
    if (!seg_equal(&a->segs[i], &b->segs[i]))
      return 0;
  return 1;
}

int ob_path_overlaps(const ob_path *a, const ob_path *b) {
  return a->n <= b->n ? ob_path_is_prefix(a, b) : ob_path_is_prefix(b, a);
}

int ob_path_equal(const ob_path *a, const ob_path *b) {
  return a->n == b->n && ob_path_is_prefix(a, b);
}

int ob_str_classify(const char *s, size_t len) {
  if (len < OB_DAGGER_LEN || memcmp(s, OB_DAGGER, OB_DAGGER_LEN) != 0)
    return OB_STR_PLAIN;
  if (len >= 2 * OB_DAGGER_LEN && memcmp(s + OB_DAGGER_LEN, OB_DAGGER, OB_DAGGER_LEN) == 0)
    return OB_STR_LITERAL;
  if (len >= OB_DAGGER_LEN + 4 && !memcmp(s + OB_DAGGER_LEN, "each", 4) &&
      (len == OB_DAGGER_LEN + 4 || s[OB_DAGGER_LEN + 4] == '.' || s[OB_DAGGER_LEN + 4] == '['))
    return OB_STR_EACH;
  return OB_STR_EXPR;
}

ob_value *ob_str_escape(const ob_value *v) {
  switch (ob_typeof(v)) {
  case OB_STRING: {
    size_t n = ob_string_len(v);
    if (n < OB_DAGGER_LEN || memcmp(ob_string_ptr(v), OB_DAGGER, OB_DAGGER_LEN))
      return ob_ref((ob_value *)v);
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_add(&b, OB_DAGGER, OB_DAGGER_LEN);
    ob_buf_add(&b, ob_string_ptr(v), n);
    ob_value *s = ob_string(b.data, b.len);
    ob_buf_free(&b);
    return s;
  }
  case OB_ARRAY: {
    size_t n = ob_array_len(v), i = 0;
    ob_value *x = NULL;
    for (; i < n; i++) { /* shared until the first that changes */
      x = ob_str_escape(ob_array_get(v, i));
      if (x != ob_array_get(v, i))
        break;
      ob_unref(x);
    }
    if (i == n)
      return ob_ref((ob_value *)v);
    ob_value *a = ob_array();
    for (size_t k = 0; k < i; k++)
      a = ob_array_push(a, ob_ref(ob_array_get(v, k)));
    a = ob_array_push(a, x);
    for (i++; i < n; i++)
      a = ob_array_push(a, ob_str_escape(ob_array_get(v, i)));
    return a;
  }
  case OB_OBJECT: {
    size_t n = ob_object_len(v), i = 0;
    ob_value *k, *x, *y = NULL;
    for (; i < n; i++) {
      ob_object_at(v, i, &k, &x);
      y = ob_str_escape(x);
      if (y != x)
        break;
      ob_unref(y);
    }
    if (i == n)
      return ob_ref((ob_value *)v);
    ob_value *o = ob_object();
    for (size_t j = 0; j < n; j++) {
      ob_object_at(v, j, &k, &x);
      o = ob_object_setv(o, k, j < i ? ob_ref(x) : j == i ? y : ob_str_escape(x));
    }
    return o;
  }
  default: return ob_ref((ob_value *)v);
  }
}

ob_value *ob_str_substitute(const ob_value *v, ob_eval_fn eval, void *ud) {
  switch (ob_typeof(v)) {
  case OB_STRING: {
    const char *s = ob_string_ptr(v);
    size_t n = ob_string_len(v);
    int cls = ob_str_classify(s, n);
    if (cls == OB_STR_LITERAL)
      return ob_string(s + OB_DAGGER_LEN, n - OB_DAGGER_LEN);
    return cls == OB_STR_EXPR ? eval(ud, v) : ob_ref((ob_value *)v);
  }
  case OB_ARRAY: {
    ob_value *a = ob_array();
    for (size_t i = 0; i < ob_array_len(v); i++)
      a = ob_array_push(a, ob_str_substitute(ob_array_get(v, i), eval, ud));
    return a;
  }
  case OB_OBJECT: {
    ob_value *o = ob_object(), *k, *x;
    ob_object_iter it;
    ob_object_iter_init(&it, v);
    while (ob_object_iter_next(&it, &k, &x))
      o = ob_object_setv(o, k, ob_str_substitute(x, eval, ud));
    return o;
  }
  default: return ob_ref((ob_value *)v);
  }
}
