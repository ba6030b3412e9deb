/* ob_json.c -- JSON text to ob_value (through jansson) and ob_value to JSON text.
 * Parsing is jansson's; printing is ours, so that reals print in their shortest exact form. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_map.h"
#include "base/ob_value.h"

/* jansson keeps object keys in insertion order (since 2.8) and, with
 * JSON_ALLOW_NUL, strings holding \u0000; it refuses invalid UTF-8, lone
 * surrogates, a \u0000 in an object key, and nesting deeper than
 * JSON_PARSER_MAX_DEPTH (2048). Integers beyond int64 are
 * refused too ("too big integer"), never silently rounded. A key that appears
 * twice in one object is refused (JSON_REJECT_DUPLICATES): every text read
 * here (a plan, an --input, a journal's line, a job) is an authority, and
 * last-wins would let {"_tool":"nosuch","_tool":"echo"} say one thing to a
 * reader and another to obelus. The message names the key, its line and column. */
/* Object keys repeat (every call of a plan has "_tool", "_outputPath" ...):
 * one string value per distinct key text serves every object of a parse. */
static ob_value *key_of(ob_map *keys, const char *k, size_t klen) {
  ob_value *v = ob_map_get(keys, k, klen);
  if (!v) {
    v = ob_string(k, klen);
    ob_map_put(keys, k, klen, v); /* the map holds one reference */
  }
  return v;
}

static ob_value *from_jansson(json_t *j, ob_map *keys) {
  switch (json_typeof(j)) {
  case JSON_NULL: return ob_null();
  case JSON_TRUE: return ob_true();
  case JSON_FALSE: return ob_false();
  case JSON_INTEGER: return ob_int((int64_t)json_integer_value(j));
  case JSON_REAL: return ob_real(json_real_value(j));
  case JSON_STRING: return ob_string(json_string_value(j), json_string_length(j));
  case JSON_ARRAY: {
    ob_value *a = ob_array();
    size_t i;
    json_t *x;
    json_array_foreach(j, i, x) a = ob_array_push(a, from_jansson(x, keys));
    return a;
  }
  case JSON_OBJECT: {
    ob_value *o = ob_object();
    const char *k;
    size_t klen;
    json_t *x;
    json_object_keylen_foreach(j, k, klen, x) o =
        ob_object_setv(o, key_of(keys, k, klen), from_jansson(x, keys));
    return o;
  }
  }
  return ob_null();
}

ob_value *ob_json_parse(const char *text, size_t len, ob_error *err) {
  json_error_t jerr;
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES,
                         &jerr);
  if (!j) {
    /* jansson says "duplicate object key near '"k"'": say which, and that it is refused */
    const char *hint = strstr(jerr.text, "duplicate object key")
                           ? " (a key may appear once in an object)"
                       : strstr(jerr.text, "maximum parsing depth")
                           ? " (JSON text may nest 2047 levels)"
                           : "";
    ob_error_set(err, OB_EJSON, (size_t)(jerr.line > 0 ? jerr.line : 0),
                 "line %d, column %d: %s%s", jerr.line, jerr.column, jerr.text, hint);
    return NULL;
  }
  ob_map keys;
  ob_map_init(&keys);
  ob_value *v = from_jansson(j, &keys);
  json_decref(j);
  size_t i = 0;
  ob_map_entry *e;
  while (ob_map_next(&keys, &i, &e))
    ob_unref(e->val);
  ob_map_free(&keys);
  return v;
}

ob_value *ob_json_parse_file(const char *path, ob_error *err) {
  ob_buf b;
  ob_buf_init(&b);
  if (ob_read_file(path, &b, err) != OB_OK) {
    ob_buf_free(&b);
    return NULL;
  }
  ob_error perr;
  ob_value *v = ob_json_parse(b.data ? b.data : "", b.len, &perr);
  ob_buf_free(&b);
  if (!v)
    ob_error_set(err, perr.code, perr.pos, "%s: %s", path, perr.msg);
  return v;
}

/* --- printing ---------------------------------------------------------- */

/* Whether any of the 8 bytes in w is below 0x20, '"', '\\' or above 0x7f (exact:
 * no false positives, whatever the other bytes hold). */
static inline int needs_escape8(uint64_t w) {
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  uint64_t q = w ^ (ones * '"'), bs = w ^ (ones * '\\');
  uint64_t below = (w - ones * 0x20) & ~w, zq = (q - ones) & ~q, zb = (bs - ones) & ~bs;
  return ((below | zq | zb | w) & highs) != 0;
}

/* Whether s[0..len) is ASCII with nothing to escape: 8 bytes at a time, the last 8 read
 * again if need be (a short string bytewise). */
static int plain_string(const char *s, size_t len) {
  static const unsigned char escaped[256] = {
      1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
      1, 1, ['"'] = 1, ['\\'] = 1};
  uint64_t w;
  if (len < 8) {
    unsigned char any = 0;
    for (size_t i = 0; i < len; i++)
      any |= escaped[(unsigned char)s[i]] | (unsigned char)s[i] >> 7; /* or above 0x7f */
    return !any;
  }
  for (size_t i = 0; i + 8 < len; i += 8) {
    memcpy(&w, s + i, 8);
    if (needs_escape8(w))
      return 0;
  }
  memcpy(&w, s + len - 8, 8);
  return !needs_escape8(w);
}

/* Text with bytes above 0x7f (checked as UTF-8 here) or to escape takes the
 * slow path, byte by byte. A byte that does not begin a valid UTF-8 sequence is
 * written as \ufffd (the replacement character): a value never holds one (the
 * bridge and the parser refuse them), but a message made in C may quote one (a
 * tool's error naming a bad key), and what is printed here must parse again:
 * one such byte would make a whole journal unreadable. */
void ob_json_write_string(ob_buf *b, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  ob_buf_reserve(b, len + 2); /* enough, unless something is to be escaped */
  if (plain_string(s, len)) { /* the usual case: copied as it is */
    char *p = b->data + b->len;
    p[0] = '"';
    memcpy(p + 1, s, len);
    p[len + 1] = '"';
    p[len + 2] = '\0';
    b->len += len + 2;
    return;
  }
  b->data[b->len++] = '"';
  size_t from = 0; /* s[from..i) is copied as it is, in one go */
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x80) {
      size_t n = ob_utf8_seq((const unsigned char *)s + i, len - i);
      if (n) {
        i += n - 1;
        continue;
      }
      ob_buf_add(b, s + from, i - from);
      from = i + 1;
      ob_buf_add(b, "\\ufffd", 6);
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    ob_buf_add(b, s + from, i - from);
    from = i + 1;
    char u[6] = {'\\', 0};
    size_t n = 2;
    switch (c) {
    case '"': u[1] = '"'; break;
    case '\\': u[1] = '\\'; break;
    case '\n': u[1] = 'n'; break;
    case '\r': u[1] = 'r'; break;
    case '\t': u[1] = 't'; break;
    case '\b': u[1] = 'b'; break;
    case '\f': u[1] = 'f'; break;
    default:
      memcpy(u + 1, "u00", 3);
      u[4] = hex[c >> 4];
      u[5] = hex[c & 15];
      n = 6;
    }
    ob_buf_add(b, u, n);
  }
  ob_buf_add(b, s + from, len - from);
  ob_buf_addc(b, '"');
}

/* An integer's digits (printf costs ten times more). */
static void write_int(ob_buf *b, int64_t n) {
  if (n < 0)
    ob_buf_addc(b, '-');
  ob_buf_add_uint(b, n < 0 ? -(uint64_t)n : (uint64_t)n);
}

/* The shortest of %.15g, %.16g, %.17g that reads back to the same double,
 * with ".0" added when it would otherwise read as an integer. */
static void write_real(ob_buf *b, double d) {
  char tmp[40];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (strtod(tmp, NULL) == d)
      break;
  }
  ob_buf_add(b, tmp, strlen(tmp));
  if (!strpbrk(tmp, ".eEn")) /* 'n': inf/nan never get here, but never print "inf.0" */
    ob_buf_add(b, ".0", 2);
}

static void indent(ob_buf *b, int level) {
  ob_buf_addc(b, '\n');
  for (int i = 0; i < level; i++)
    ob_buf_add(b, "  ", 2);
}

static void write_value(ob_buf *b, const ob_value *v, int flags, int level) {
  int pretty = flags & OB_JSON_PRETTY;
  switch (ob_typeof(v)) {
  case OB_NULL: ob_buf_add(b, "null", 4); break;
  case OB_TRUE: ob_buf_add(b, "true", 4); break;
  case OB_FALSE: ob_buf_add(b, "false", 5); break;
  case OB_INT: write_int(b, ob_int_value(v)); break;
  case OB_REAL: write_real(b, ob_real_value(v)); break;
  case OB_STRING: ob_json_write_string(b, ob_string_ptr(v), ob_string_len(v)); break;
  case OB_ARRAY: {
    size_t n = ob_array_len(v);
    ob_buf_addc(b, '[');
    for (size_t i = 0; i < n; i++) {
      if (i)
        ob_buf_addc(b, ',');
      if (pretty)
        indent(b, level + 1);
      write_value(b, ob_array_get(v, i), flags, level + 1);
    }
    if (pretty && n)
      indent(b, level);
    ob_buf_addc(b, ']');
    break;
  }
  case OB_OBJECT: {
    ob_object_iter it;
    ob_value *k, *x;
    int first = 1;
    ob_buf_addc(b, '{');
    ob_object_iter_init(&it, v);
    while (ob_object_iter_next(&it, &k, &x)) {
      if (!first)
        ob_buf_addc(b, ',');
      first = 0;
      if (pretty)
        indent(b, level + 1);
      ob_json_write_string(b, ob_string_ptr(k), ob_string_len(k));
      ob_buf_add(b, pretty ? ": " : ":", pretty ? 2 : 1);
      write_value(b, x, flags, level + 1);
    }
    if (pretty && !first)
      indent(b, level);
    ob_buf_addc(b, '}');
    break;
  }
  }
}

void ob_json_write(ob_buf *b, const ob_value *v, int flags) { write_value(b, v, flags, 0); }

char *ob_json_print(const ob_value *v, int flags, size_t *len) {
  ob_buf b;
  ob_buf_init(&b);
  write_value(&b, v, flags, 0);
  if (!b.data)
    ob_buf_add(&b, "", 0);
  if (len)
    *len = b.len;
  return b.data;
}

/* The length of v's compact JSON text, near enough (a number's digits, a
 * string's escapes) and counted only until it passes cap. */
size_t ob_json_size(const ob_value *v, size_t cap) {
  switch (ob_typeof(v)) {
  case OB_NULL:
  case OB_TRUE: return 4;
  case OB_FALSE: return 5;
  case OB_INT: {
    char d[32];
    return (size_t)snprintf(d, sizeof d, "%lld", (long long)ob_int_value(v));
  }
  case OB_REAL: return 24;
  case OB_STRING: {
    size_t n = ob_string_len(v) + 2;
    const unsigned char *s = (const unsigned char *)ob_string_ptr(v);
    for (size_t i = 0; i < ob_string_len(v) && n <= cap; i++)
      n += s[i] < 0x20 ? 5 : s[i] == '"' || s[i] == '\\';
    return n;
  }
  case OB_ARRAY: {
    size_t n = 2, len = ob_array_len(v);
    for (size_t i = 0; i < len && n <= cap; i++)
      n += ob_json_size(ob_array_get(v, i), cap - n) + (i > 0);
    return n;
  }
  case OB_OBJECT: {
    size_t n = 2;
    ob_object_iter it;
    ob_value *k, *x;
    ob_object_iter_init(&it, v);
    while (n <= cap && ob_object_iter_next(&it, &k, &x))
      n += ob_json_size(k, cap) + 1 + ob_json_size(x, cap) + (n > 2);
    return n;
  }
  }
  return 0;
}
