/* ob_schema.c -- JSON Schema draft-07 validation over ob_values: a schema is compiled
 * once into a graph of nodes, then any number of instances are checked against it.
 *
 * Design
 * ------
 * Compiling turns every subschema of the schema value into a node (`snode`): the
 * keywords are read once, their types checked (an unusable schema is refused here,
 * never half-applied later), patterns compiled by PCRE2 (and JIT-compiled when the
 * platform allows), `properties` sorted for binary search, and the divisor of
 * `multipleOf` turned into a decimal. Nodes are keyed by (document, JSON pointer)
 * in a hash map, so every place in the schema has at most one node.
 *
 * `$ref` is resolved after the whole document has been walked, when every `$id`
 * is known. A ref is made absolute against the base URI in force where it is
 * written, its URI part looked up among the `$id`s (the schema itself has the
 * base "" unless its root says otherwise), and its fragment walked as a JSON
 * pointer from there. A pointer may lead to a place no keyword names (the suite
 * has `{"$ref": "#/tilda~0field"}`): that value is compiled then, as a schema of
 * its own. Recursive schemas cost nothing special: a ref is an edge in the graph,
 * so `{"items": {"$ref": "#"}}` compiles to two nodes. The draft-07 meta-schema
 * is built in (parsed and compiled only when a ref names it); nothing is fetched.
 *
 * Termination. Every keyword either moves to a part of the instance (properties,
 * items, ...: the instance gets smaller) or applies another schema to the same
 * instance ($ref, allOf, anyOf, oneOf, not, if/then/else, dependencies). A cycle
 * made only of the second kind would never end, whatever the instance, so it is
 * found at compile time (a depth-first search over those edges) and the schema
 * refused. Validation is then bounded by instance depth times schema size; it is
 * recursive, and a limit on nesting and on stack bytes turns an instance too
 * deep for the stack into a "depth" failure instead of a crash.
 *
 * Costs. Validation allocates nothing when only a yes/no answer is asked for
 * (res == NULL), except one PCRE2 match block when a pattern is used. A property
 * lookup is O(log p) in the schema's property count; each instance key is also
 * tried against every patternProperties regex. enum is O(n) ob_equal calls,
 * uniqueItems O(n^2) in the array's length (tool params are small; a hash would
 * pay off only on long arrays). Failure paths are built only when failures are
 * collected. Measured: a tool schema of five properties with a pattern, an
 * enum and an array compiles in about 15 us and checks its params in 0.6 us.
 *
 * Formats and strictness (issue 30). `format` is an assertion for the formats
 * the "formats" section lists, each a small hand-written reader of bytes (no
 * regex, no allocation; ipv6 by inet_pton, regex by compiling it with PCRE2,
 * which allocates); a compiled node keeps a pointer to its checker. Compiling
 * with OB_SCHEMA_STRICT (a tool's schema) also reads every key of every
 * schema object against the list of keywords and refuses the first unknown
 * one, and an unknown format, with the nearest known name (ob_suggest):
 * a misspelt keyword would otherwise check nothing, silently. That costs one
 * pass over the keys at compile time, nothing when validating.
 *
 * Numbers. Comparisons between integers and reals are exact (no conversion of
 * a large int64 to double). multipleOf works on decimals: each double is read
 * back as the shortest decimal that round-trips (what the JSON text said), and
 * divisibility of A*10^p by B*10^q is decided exactly with modular arithmetic,
 * so 0.0075 is a multiple of 0.0001 and 1e308 one of 0.5, with no epsilon.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/ob_mem.h"
#include "base/ob_schema.h"
#include "base/ob_suggest.h"

/* Nested validate() calls allowed in one validation, and stack bytes: whichever
 * is reached first makes the instance fail with keyword "depth". An instance
 * OB_MAX_DEPTH levels deep, with a $ref and an allOf at every level, takes
 * about 2 MB (4 MB under AddressSanitizer); threads on Linux get 8 MB. */
#define EVAL_DEPTH_MAX (4 * OB_MAX_DEPTH)
#ifndef EVAL_STACK_MAX
#define EVAL_STACK_MAX (4u << 20)
#endif
/* Schema nesting accepted by the compiler (it recurses once per level). */
#define COMPILE_DEPTH_MAX (OB_MAX_DEPTH + 64)

/* Compiling and validating recurse; helpers that need big locals (message
 * buffers, iterators) are kept out of the recursive functions' frames. */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

static const char META_URI[] = "http://json-schema.org/draft-07/schema";

/* --- types ------------------------------------------------------------- */

enum {
  TY_NULL = 1 << 0,
  TY_BOOLEAN = 1 << 1,
  TY_INTEGER = 1 << 2,
  TY_NUMBER = 1 << 3,
  TY_STRING = 1 << 4,
  TY_ARRAY = 1 << 5,
  TY_OBJECT = 1 << 6
};
static const char *const type_names[] = {"null",   "boolean", "integer", "number",
                                         "string", "array",   "object"};

enum { NODE_TRUE, NODE_FALSE, NODE_OBJECT };

/* Presence of the keywords whose value alone does not say it. */
enum {
  HAS_TYPE = 1 << 0,
  HAS_MIN_LENGTH = 1 << 1,
  HAS_MAX_LENGTH = 1 << 2,
  HAS_MIN_ITEMS = 1 << 3,
  HAS_MAX_ITEMS = 1 << 4,
  HAS_MIN_PROPS = 1 << 5,
  HAS_MAX_PROPS = 1 << 6,
  HAS_UNIQUE = 1 << 7,
  HAS_TUPLE = 1 << 8,
  /* summaries, so validate() skips whole families in one test */
  HAS_NUMBER_KW = 1 << 9,
  HAS_STRING_KW = 1 << 10,
  HAS_ARRAY_KW = 1 << 11,
  HAS_OBJECT_KW = 1 << 12,
  HAS_APPLICATOR_KW = 1 << 13
};

/* value = mant * 10^exp; mant has no trailing zero unless it is 0 */
typedef struct decimal {
  uint64_t mant;
  int exp;
} decimal;

typedef struct snode snode;

typedef struct named_schema {
  const ob_value *key;   /* the name, an OB_STRING of the schema */
  snode *schema;         /* properties; dependencies in schema form */
  const ob_value *names; /* dependencies in array form */
} named_schema;

typedef struct regex_schema {
  pcre2_code *re;
  snode *schema;
} regex_schema;

typedef struct schema_list {
  size_t n;
  snode **v;
} schema_list;

struct snode {
  int kind;
  int doc;        /* 0: the schema compiled; 1: the built-in meta-schema */
  char *ptr;      /* JSON pointer inside its document */
  size_t ptrlen;  /* keys may hold NULs, so the map compares lengths too */
  char *spath;    /* how failures name this place: ptr, or URI#ptr */
  const ob_value *src;
  char *ref_uri;  /* $ref made absolute; the node's other keywords are ignored */
  snode *ref;
  unsigned has, types;
  const ob_value *enum_values, *const_value;
  const ob_value *minimum, *maximum, *exclusive_minimum, *exclusive_maximum, *multiple_of;
  decimal multiple_dec;
  size_t min_length, max_length, min_items, max_items, min_props, max_props;
  pcre2_code *pattern;
  const ob_value *pattern_src;
  const struct format_def *format; /* a format that is checked, or NULL */
  named_schema *props; /* sorted by key bytes */
  size_t nprops;
  regex_schema *pattern_props;
  size_t npattern_props;
  snode *additional_props;
  const ob_value *required;
  named_schema *deps;
  size_t ndeps;
  snode *property_names;
  snode *items;
  schema_list tuple;
  snode *additional_items, *contains;
  schema_list all_of, any_of, one_of;
  snode *not_schema, *if_schema, *then_schema, *else_schema;
  unsigned char mark; /* cycle search: 0 unseen, 1 on the path, 2 done */
};

typedef struct id_entry {
  char *uri;  /* absolute, without fragment; or uri#name for a plain-name fragment */
  int doc;
  char *ptr;  /* where the identified schema is */
  size_t ptrlen;
  char *base; /* base URI in force there */
} id_entry;

struct ob_schema {
  ob_value *docs[2];
  size_t ndocs;
  snode **nodes; /* every node, in creation order */
  size_t nnodes, nodes_cap;
  snode **map; /* open addressing on (doc, ptr) */
  size_t map_cap;
  id_entry *ids;
  size_t nids, ids_cap;
  snode *root;
};

/* --- small helpers ----------------------------------------------------- */

/* Takes the buffer's text (an empty string when nothing was added). */
static char *buf_take(ob_buf *b) {
  char *s = b->data ? b->data : ob_xstrdup("");
  ob_buf_init(b);
  return s;
}

static void buf_truncate(ob_buf *b, size_t len) {
  if (b->data) {
    b->len = len;
    b->data[len] = '\0';
  }
}

static const ob_value *kw(const ob_value *o, const char *name) {
  return ob_object_get(o, name, strlen(name));
}

static int is_schema_value(const ob_value *v) {
  ob_type t = ob_typeof(v);
  return t == OB_OBJECT || t == OB_TRUE || t == OB_FALSE;
}

/* Appends a JSON pointer token, escaped (~ as ~0, / as ~1). */
static void ptr_add(ob_buf *b, const char *s, size_t len) {
  ob_buf_addc(b, '/');
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '~')
      ob_buf_add(b, "~0", 2);
    else if (s[i] == '/')
      ob_buf_add(b, "~1", 2);
    else
      ob_buf_addc(b, s[i]);
  }
}

static void ptr_add_index(ob_buf *b, size_t i) { ob_buf_addf(b, "/%zu", i); }

/* Appends v as compact JSON, cut at about 80 bytes: enough to recognise it. */
static void put_value(ob_buf *b, const ob_value *v) {
  size_t start = b->len;
  ob_json_write(b, v, OB_JSON_COMPACT);
  if (b->len - start > 80) {
    size_t cut = start + 72;
    while (cut > start && ((unsigned char)b->data[cut] & 0xC0) == 0x80)
      cut--; /* never split a UTF-8 sequence */
    buf_truncate(b, cut);
    ob_buf_add(b, "...", 3);
  }
}

/* --- URIs (just what $id and $ref need: RFC 3986 resolution) ------------ */

static size_t uri_scheme_len(const char *s) {
  if (!isalpha((unsigned char)s[0]))
    return 0;
  for (size_t i = 1; s[i]; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == ':')
      return i + 1;
    if (!isalnum(ch) && ch != '+' && ch != '-' && ch != '.')
      return 0;
  }
  return 0;
}

/* Removes "." and ".." segments from the path that starts at out[from]. */
static void uri_remove_dots(ob_buf *out, size_t from) {
  if (!out->data || !strstr(out->data + from, "."))
    return;
  char *path = ob_xstrdup(out->data + from);
  buf_truncate(out, from);
  size_t plen = strlen(path);
  size_t seg_start = 0;
  int absolute = path[0] == '/';
  ob_buf res;
  ob_buf_init(&res);
  if (absolute)
    ob_buf_addc(&res, '/');
  size_t i = absolute ? 1 : 0;
  seg_start = i;
  for (; i <= plen; i++) {
    if (i < plen && path[i] != '/')
      continue;
    size_t n = i - seg_start;
    const char *seg = path + seg_start;
    int last = i == plen;
    if (n == 1 && seg[0] == '.') {
      /* nothing */
    } else if (n == 2 && seg[0] == '.' && seg[1] == '.') {
      /* drop the previous segment (and its slash) */
      size_t keep = res.len;
      if (keep > (size_t)absolute) {
        keep--; /* the trailing slash */
        while (keep > (size_t)absolute && res.data[keep - 1] != '/')
          keep--;
        buf_truncate(&res, keep);
      }
    } else {
      ob_buf_add(&res, seg, n);
      if (!last)
        ob_buf_addc(&res, '/');
    }
    seg_start = i + 1;
  }
  if (res.data)
    ob_buf_add(out, res.data, res.len);
  ob_buf_free(&res);
  free(path);
}

/* ref made absolute against base (fragments of base never matter). */
static char *uri_resolve(const char *base, const char *ref) {
  ob_buf out;
  ob_buf_init(&out);
  size_t rlen = strcspn(ref, "#"); /* ref's part before its fragment */
  const char *rfrag = ref + rlen;
  size_t blen = strcspn(base, "#");
  if (uri_scheme_len(ref)) {
    ob_buf_add(&out, ref, rlen);
  } else if (rlen == 0) {
    ob_buf_add(&out, base, blen);
  } else {
    size_t scheme = uri_scheme_len(base);
    size_t path_start = scheme;
    int authority = base[scheme] == '/' && base[scheme + 1] == '/';
    if (authority)
      path_start = scheme + 2 + strcspn(base + scheme + 2, "/?#");
    if (ref[0] == '/' && ref[1] == '/') {
      ob_buf_add(&out, base, scheme);
      ob_buf_add(&out, ref, rlen);
    } else if (ref[0] == '/') {
      ob_buf_add(&out, base, path_start);
      ob_buf_add(&out, ref, rlen);
      uri_remove_dots(&out, path_start);
    } else {
      size_t path_end = path_start + strcspn(base + path_start, "?#");
      size_t dir_end = path_end;
      while (dir_end > path_start && base[dir_end - 1] != '/')
        dir_end--;
      ob_buf_add(&out, base, dir_end);
      if (dir_end == path_start && authority)
        ob_buf_addc(&out, '/');
      ob_buf_add(&out, ref, rlen);
      uri_remove_dots(&out, path_start);
    }
  }
  if (*rfrag && rfrag[1])
    ob_buf_add(&out, rfrag, strlen(rfrag)); /* an empty fragment means none */
  return buf_take(&out);
}

static int hexval(int ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* %XX-decodes a URI fragment; NULL when malformed or when it would hold a NUL. */
static char *percent_decode(const char *s) {
  ob_buf b;
  ob_buf_init(&b);
  for (size_t i = 0; s[i]; i++) {
    if (s[i] != '%') {
      ob_buf_addc(&b, s[i]);
      continue;
    }
    int hi = hexval((unsigned char)s[i + 1]), lo = hi < 0 ? -1 : hexval((unsigned char)s[i + 2]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
      ob_buf_free(&b);
      return NULL;
    }
    ob_buf_addc(&b, (char)(hi * 16 + lo));
    i += 2;
  }
  return buf_take(&b);
}

/* Decodes one JSON pointer token (~0 ~1) of p[0..n) into out; 0 when malformed. */
static int ptr_token_decode(const char *p, size_t n, ob_buf *out) {
  buf_truncate(out, 0);
  for (size_t i = 0; i < n; i++) {
    if (p[i] != '~') {
      ob_buf_addc(out, p[i]);
    } else if (i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
      ob_buf_addc(out, p[i + 1] == '0' ? '~' : '/');
      i++;
    } else {
      return 0;
    }
  }
  if (!out->data)
    ob_buf_add(out, "", 0);
  return 1;
}

/* --- the node map and the id table ------------------------------------- */

static size_t node_hash(int doc, const char *ptr, size_t len) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)doc;
  for (size_t i = 0; i < len; i++)
    h = (h ^ (unsigned char)ptr[i]) * 1099511628211ull;
  return (size_t)h;
}

static snode *map_get(const ob_schema *s, int doc, const char *ptr, size_t len) {
  if (!s->map_cap)
    return NULL;
  size_t mask = s->map_cap - 1;
  for (size_t i = node_hash(doc, ptr, len) & mask;; i = (i + 1) & mask) {
    snode *n = s->map[i];
    if (!n)
      return NULL;
    if (n->doc == doc && n->ptrlen == len && memcmp(n->ptr, ptr, len) == 0)
      return n;
  }
}

static void map_put(ob_schema *s, snode *n) {
  if ((s->nnodes + 1) * 2 > s->map_cap) {
    size_t cap = s->map_cap ? s->map_cap * 2 : 64;
    snode **m = ob_xcalloc(cap, sizeof *m);
    for (size_t i = 0; i < s->map_cap; i++) {
      snode *o = s->map[i];
      if (!o)
        continue;
      size_t j = node_hash(o->doc, o->ptr, o->ptrlen) & (cap - 1);
      while (m[j])
        j = (j + 1) & (cap - 1);
      m[j] = o;
    }
    free(s->map);
    s->map = m;
    s->map_cap = cap;
  }
  size_t j = node_hash(n->doc, n->ptr, n->ptrlen) & (s->map_cap - 1);
  while (s->map[j])
    j = (j + 1) & (s->map_cap - 1);
  s->map[j] = n;
}

static snode *node_new(ob_schema *s, int doc, const ob_buf *ptr, const ob_value *src) {
  snode *n = ob_xcalloc(1, sizeof *n);
  n->doc = doc;
  n->ptrlen = ptr->len;
  n->ptr = ob_xstrndup(ptr->data ? ptr->data : "", ptr->len);
  if (doc == 0) {
    n->spath = n->ptr;
  } else {
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s#%s", META_URI, n->ptr);
    n->spath = buf_take(&b);
  }
  n->src = src;
  n->kind = NODE_OBJECT;
  map_put(s, n);
  if (s->nnodes == s->nodes_cap) {
    s->nodes_cap = s->nodes_cap ? s->nodes_cap * 2 : 32;
    s->nodes = ob_xrealloc(s->nodes, s->nodes_cap * sizeof *s->nodes);
  }
  s->nodes[s->nnodes++] = n;
  return n;
}

static void node_free(snode *n) {
  if (n->spath != n->ptr)
    free(n->spath);
  free(n->ptr);
  free(n->ref_uri);
  if (n->pattern)
    pcre2_code_free(n->pattern);
  free(n->props);
  for (size_t i = 0; i < n->npattern_props; i++)
    pcre2_code_free(n->pattern_props[i].re);
  free(n->pattern_props);
  free(n->deps);
  free(n->tuple.v);
  free(n->all_of.v);
  free(n->any_of.v);
  free(n->one_of.v);
  free(n);
}

static id_entry *id_find(const ob_schema *s, const char *uri, size_t len) {
  for (size_t i = 0; i < s->nids; i++)
    if (strlen(s->ids[i].uri) == len && memcmp(s->ids[i].uri, uri, len) == 0)
      return &s->ids[i];
  return NULL;
}

/* The first declaration of an id wins; a schema declaring one twice is
 * ambiguous, and draft-07 leaves its behaviour undefined. */
static void id_add(ob_schema *s, const char *uri, int doc, const ob_buf *ptr, const char *base) {
  if (id_find(s, uri, strlen(uri)))
    return;
  if (s->nids == s->ids_cap) {
    s->ids_cap = s->ids_cap ? s->ids_cap * 2 : 8;
    s->ids = ob_xrealloc(s->ids, s->ids_cap * sizeof *s->ids);
  }
  id_entry *e = &s->ids[s->nids++];
  e->uri = ob_xstrdup(uri);
  e->doc = doc;
  e->ptrlen = ptr->len;
  e->ptr = ob_xstrndup(ptr->data ? ptr->data : "", ptr->len);
  e->base = ob_xstrdup(base);
}

/* --- numbers ----------------------------------------------------------- */

/* Exact comparison of an int64 with a double: no rounding of i to double. */
static int cmp_int_real(int64_t i, double d) {
  if (d >= 9223372036854775808.0)
    return -1;
  if (d < -9223372036854775808.0)
    return 1;
  double t = trunc(d); /* in range: converts exactly */
  int64_t ti = (int64_t)t;
  if (i != ti)
    return i < ti ? -1 : 1;
  return t < d ? -1 : t > d ? 1 : 0;
}

static int num_cmp(const ob_value *a, const ob_value *b) {
  int ai = ob_typeof(a) == OB_INT, bi = ob_typeof(b) == OB_INT;
  if (ai && bi) {
    int64_t x = ob_int_value(a), y = ob_int_value(b);
    return (x > y) - (x < y);
  }
  if (ai)
    return cmp_int_real(ob_int_value(a), ob_real_value(b));
  if (bi)
    return -cmp_int_real(ob_int_value(b), ob_real_value(a));
  double x = ob_real_value(a), y = ob_real_value(b);
  return (x > y) - (x < y);
}

static int is_integral(const ob_value *v) {
  if (ob_typeof(v) == OB_INT)
    return 1;
  if (ob_typeof(v) != OB_REAL)
    return 0;
  double d = ob_real_value(v);
  return isfinite(d) && floor(d) == d;
}

static decimal dec_normal(uint64_t mant, int exp) {
  decimal d = {mant, mant ? exp : 0};
  while (d.mant && d.mant % 10 == 0) {
    d.mant /= 10;
    d.exp++;
  }
  return d;
}

/* |v| as the shortest decimal that reads back as the same double: what the
 * JSON text most likely said. The sign never matters for divisibility. */
static decimal dec_of(const ob_value *v) {
  if (ob_typeof(v) == OB_INT) {
    int64_t i = ob_int_value(v);
    return dec_normal(i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i, 0);
  }
  double d = fabs(ob_real_value(v));
  char text[40];
  for (int prec = 0; prec <= 16; prec++) {
    snprintf(text, sizeof text, "%.*e", prec, d);
    if (strtod(text, NULL) == d)
      break;
  }
  /* text is "D.DDDDe[+-]XX" */
  uint64_t mant = 0;
  int frac_digits = 0, in_frac = 0;
  const char *p = text;
  for (; *p && *p != 'e'; p++) {
    if (*p == '.') {
      in_frac = 1;
      continue;
    }
    mant = mant * 10 + (uint64_t)(*p - '0');
    frac_digits += in_frac;
  }
  int exp = *p == 'e' ? atoi(p + 1) : 0;
  return dec_normal(mant, exp - frac_digits);
}

/* (a + b) mod m for a, b < m, without overflow */
static uint64_t addmod(uint64_t a, uint64_t b, uint64_t m) { return a >= m - b ? a - (m - b) : a + b; }

/* Is x a multiple of m (m > 0)? x = A*10^p, m = B*10^q, A and B without
 * trailing zeros. If p < q, B*10^(q-p) is a multiple of 10 and A is not, so
 * no; otherwise B must divide A*10^(p-q), computed mod B. */
static int dec_is_multiple(decimal x, decimal m) {
  if (x.mant == 0)
    return 1;
  if (m.mant == 0 || x.exp < m.exp)
    return 0;
  uint64_t r = x.mant % m.mant;
  for (int k = x.exp - m.exp; k > 0 && r; k--) {
    uint64_t acc = 0;
    for (int j = 0; j < 10; j++)
      acc = addmod(acc, r, m.mant);
    r = acc;
  }
  return r == 0;
}

static int is_multiple(const ob_value *v, const snode *n) {
  if (ob_typeof(v) == OB_INT && ob_typeof(n->multiple_of) == OB_INT)
    return ob_int_value(v) % ob_int_value(n->multiple_of) == 0;
  return dec_is_multiple(dec_of(v), n->multiple_dec);
}

/* --- formats ------------------------------------------------------------ */

/* `format` is an assertion for the formats below: a string that is not one
 * fails. Each check reads bytes (ASCII only: the idn- and iri- formats, which
 * allow more, are known but not checked); a value that is not a string passes,
 * as for every string keyword. The rules, short enough to state:
 *   date-time, date, time  RFC 3339 (full-date, full-time, date "T" time; T and
 *                          Z in either case; an offset is required; days per
 *                          month and leap years; :60 only at 23:59 UTC)
 *   email     local@domain: the local part a dot-atom of RFC 5322's atext (no
 *             leading, trailing or double dot) or a quoted string, at most 64
 *             bytes; the domain a hostname or an address literal, [1.2.3.4] or
 *             [IPv6:...]; at most 254 bytes in all (RFC 5321)
 *   hostname  RFC 1123: labels of letters, digits and hyphens, 1 to 63 bytes, no
 *             hyphen first or last; at most 253 bytes
 *   ipv4      a dotted quad, each part 0-255 in decimal, no leading zero
 *   ipv6      what inet_pton(AF_INET6) reads (RFC 4291 text, no zone)
 *   uri       scheme ":" then RFC 3986 characters only: unreserved, reserved,
 *             %HH; one "#" at most; brackets only in the authority
 *   uri-reference  the same, the scheme optional
 *   uuid      8-4-4-4-12 hexadecimal digits, either case (any version)
 *   regex     compiles as a `pattern` does (PCRE2, ECMA-262 options)
 *   json-pointer, relative-json-pointer  RFC 6901 and its draft extension */

typedef int (*format_fn)(const char *s, size_t n, ob_buf *why);

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* count ASCII digits at s[at..] as a number, or -1 */
static int read_num(const char *s, size_t n, size_t at, size_t count) {
  if (at + count > n)
    return -1;
  int v = 0;
  for (size_t i = 0; i < count; i++) {
    if (!is_digit(s[at + i]))
      return -1;
    v = v * 10 + (s[at + i] - '0');
  }
  return v;
}

/* YYYY-MM-DD at s[0..10); 1 when a real date */
static int full_date(const char *s, size_t n) {
  int y = read_num(s, n, 0, 4), m = read_num(s, n, 5, 2), d = read_num(s, n, 8, 2);
  if (y < 0 || m < 1 || m > 12 || d < 1 || s[4] != '-' || s[7] != '-')
    return 0;
  static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return d <= (m == 2 && !leap ? 28 : mdays[m - 1]);
}

/* HH:MM:SS[.frac](Z|+HH:MM|-HH:MM), all of s[0..n) */
static int full_time(const char *s, size_t n) {
  int h = read_num(s, n, 0, 2), m = read_num(s, n, 3, 2), sec = read_num(s, n, 6, 2);
  if (h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 60 || s[2] != ':' || s[5] != ':')
    return 0;
  size_t i = 8;
  if (i < n && s[i] == '.') {
    size_t start = ++i;
    while (i < n && is_digit(s[i]))
      i++;
    if (i == start)
      return 0;
  }
  int offset = 0; /* minutes east of UTC */
  if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
    offset = 0;
  } else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh = read_num(s, n, i + 1, 2), om = read_num(s, n, i + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59)
      return 0;
    offset = (s[i] == '+' ? 1 : -1) * (oh * 60 + om);
  } else {
    return 0;
  }
  if (sec == 60) { /* a leap second is the last of a UTC day */
    int utc = ((h * 60 + m - offset) % 1440 + 1440) % 1440;
    if (utc != 23 * 60 + 59)
      return 0;
  }
  return 1;
}

static int fmt_date(const char *s, size_t n, ob_buf *why) {
  (void)why;
  return n == 10 && full_date(s, n);
}

static int fmt_time(const char *s, size_t n, ob_buf *why) {
  (void)why;
  return full_time(s, n);
}

static int fmt_date_time(const char *s, size_t n, ob_buf *why) {
  (void)why;
  return n > 11 && full_date(s, 10) && (s[10] == 'T' || s[10] == 't') &&
         full_time(s + 11, n - 11);
}

static int hostname_ok(const char *s, size_t n) {
  if (n == 0 || n > 253)
    return 0;
  size_t label = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || s[i] == '.') {
      if (label == 0 || label > 63 || s[i - label] == '-' || s[i - 1] == '-')
        return 0;
      label = 0;
    } else if (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '-') {
      label++;
    } else {
      return 0;
    }
  }
  return 1;
}

static int fmt_hostname(const char *s, size_t n, ob_buf *why) {
  (void)why;
  return hostname_ok(s, n);
}

static int ipv4_ok(const char *s, size_t n) {
  size_t i = 0;
  for (int part = 0; part < 4; part++) {
    if (part && (i >= n || s[i++] != '.'))
      return 0;
    size_t start = i;
    int v = 0;
    while (i < n && is_digit(s[i]) && i - start < 3)
      v = v * 10 + (s[i++] - '0');
    size_t len = i - start;
    if (len == 0 || v > 255 || (len > 1 && s[start] == '0'))
      return 0;
  }
  return i == n;
}

static int fmt_ipv4(const char *s, size_t n, ob_buf *why) {
  (void)why;
  return ipv4_ok(s, n);
}

static int ipv6_ok(const char *s, size_t n) {
  char text[INET6_ADDRSTRLEN + 1];
  unsigned char addr[16];
  if (n >= sizeof text || memchr(s, '\0', n))
    return 0;
  memcpy(text, s, n);
  text[n] = '\0';
  return inet_pton(AF_INET6, text, addr) == 1;
}

static int fmt_ipv6(const char *s, size_t n, ob_buf *why) {
  (void)why;
  return ipv6_ok(s, n);
}

static int is_atext(char c) {
  return is_alpha(c) || is_digit(c) || (c && strchr("!#$%&'*+-/=?^_`{|}~", c));
}

static int fmt_email(const char *s, size_t n, ob_buf *why) {
  (void)why;
  if (n > 254)
    return 0;
  size_t i = 0;
  if (n && s[0] == '"') { /* quoted string: printable ASCII, \ escapes one */
    for (i = 1; i < n && s[i] != '"'; i++) {
      if (s[i] == '\\')
        i++;
      if (i >= n || s[i] < 32 || s[i] > 126)
        return 0;
    }
    if (i >= n)
      return 0;
    i++;
  } else { /* dot-atom */
    for (; i < n && s[i] != '@'; i++)
      if (!(is_atext(s[i]) || (s[i] == '.' && i > 0 && s[i - 1] != '.')))
        return 0;
    if (i == 0 || s[i - 1] == '.')
      return 0;
  }
  if (i > 64 || i >= n || s[i] != '@')
    return 0;
  const char *d = s + i + 1;
  size_t dn = n - i - 1;
  if (dn >= 2 && d[0] == '[' && d[dn - 1] == ']') {
    if (dn > 7 && memcmp(d + 1, "IPv6:", 5) == 0)
      return ipv6_ok(d + 6, dn - 7);
    return ipv4_ok(d + 1, dn - 2);
  }
  return hostname_ok(d, dn);
}

static int is_uri_char(char c) {
  return is_alpha(c) || is_digit(c) || (c && strchr("-._~:/?#[]@!$&'()*+,;=", c));
}

/* The part of a URI after its scheme and colon (or a whole relative
 * reference): RFC 3986's characters, %HH escapes, one fragment, brackets
 * only in the authority. */
static int uri_rest_ok(const char *s, size_t n) {
  size_t auth_end = 0; /* brackets are allowed in s[2..auth_end) */
  if (n >= 2 && s[0] == '/' && s[1] == '/') {
    auth_end = 2;
    while (auth_end < n && !strchr("/?#", s[auth_end]))
      auth_end++;
  }
  int fragment = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2]))
        return 0;
      i += 2;
    } else if (!is_uri_char(c)) {
      return 0;
    } else if ((c == '[' || c == ']') && i >= auth_end) {
      return 0;
    } else if (c == '#') {
      if (fragment++)
        return 0;
    }
  }
  return 1;
}

static size_t scheme_len(const char *s, size_t n) {
  if (n == 0 || !is_alpha(s[0]))
    return 0;
  for (size_t i = 1; i < n; i++) {
    if (s[i] == ':')
      return i + 1;
    if (!is_alpha(s[i]) && !is_digit(s[i]) && !strchr("+-.", s[i]))
      return 0;
  }
  return 0;
}

static int fmt_uri(const char *s, size_t n, ob_buf *why) {
  (void)why;
  size_t k = scheme_len(s, n);
  return k && uri_rest_ok(s + k, n - k);
}

static int fmt_uri_reference(const char *s, size_t n, ob_buf *why) {
  (void)why;
  size_t k = scheme_len(s, n);
  return uri_rest_ok(s + k, n - k);
}

static int fmt_uuid(const char *s, size_t n, ob_buf *why) {
  (void)why;
  if (n != 36)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' : !is_hex(s[i]))
      return 0;
  return 1;
}

static int pointer_ok(const char *s, size_t n) {
  if (n && s[0] != '/')
    return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] == '~' && (i + 1 >= n || (s[i + 1] != '0' && s[i + 1] != '1')))
      return 0;
  return 1;
}

static int fmt_json_pointer(const char *s, size_t n, ob_buf *why) {
  (void)why;
  return pointer_ok(s, n);
}

static int fmt_relative_json_pointer(const char *s, size_t n, ob_buf *why) {
  (void)why;
  size_t i = 0;
  while (i < n && is_digit(s[i]))
    i++;
  if (i == 0 || (i > 1 && s[0] == '0'))
    return 0;
  return (i + 1 == n && s[i] == '#') || pointer_ok(s + i, n - i);
}

static pcre2_code *regex_build(const char *s, size_t n, int *code, PCRE2_SIZE *off);

static int fmt_regex(const char *s, size_t n, ob_buf *why) {
  int code;
  PCRE2_SIZE off;
  pcre2_code *re = regex_build(s, n, &code, &off);
  if (re) {
    pcre2_code_free(re);
    return 1;
  }
  if (why) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    ob_buf_addf(why, ": %s at offset %zu", (char *)msg, (size_t)off);
  }
  return 0;
}

typedef struct format_def {
  const char *name;
  format_fn check; /* NULL: known, not checked */
  const char *what; /* "is not <what>" */
} format_def;

static const format_def formats[] = {
    {"date-time", fmt_date_time, "a date-time (RFC 3339: 2024-05-01T12:00:00Z)"},
    {"date", fmt_date, "a date (RFC 3339: 2024-05-01)"},
    {"time", fmt_time, "a time (RFC 3339, with its offset: 12:00:00Z)"},
    {"email", fmt_email, "an email address"},
    {"hostname", fmt_hostname, "a hostname (RFC 1123)"},
    {"ipv4", fmt_ipv4, "an IPv4 address"},
    {"ipv6", fmt_ipv6, "an IPv6 address"},
    {"uri", fmt_uri, "a URI (scheme:...)"},
    {"uuid", fmt_uuid, "a UUID (8-4-4-4-12 hexadecimal digits)"},
    {"regex", fmt_regex, "a regular expression"},
    {"uri-reference", fmt_uri_reference, "a URI reference"},
    {"json-pointer", fmt_json_pointer, "a JSON pointer"},
    {"relative-json-pointer", fmt_relative_json_pointer, "a relative JSON pointer"},
    /* draft-07's others: known, not checked */
    {"idn-email", NULL, NULL},
    {"idn-hostname", NULL, NULL},
    {"iri", NULL, NULL},
    {"iri-reference", NULL, NULL},
    {"uri-template", NULL, NULL},
};

/* --- compiling --------------------------------------------------------- */

typedef struct cctx {
  ob_schema *s;
  ob_error *err;
  int failed;
  ob_buf ptr; /* pointer of the place being compiled */
  int doc;
  size_t depth;
  unsigned flags; /* OB_SCHEMA_STRICT */
} cctx;

/* Records the first error: "<where>: <keyword>: <what>". */
static void cerr(cctx *cc, const char *keyword, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void cerr(cctx *cc, const char *keyword, const char *fmt, ...) {
  if (cc->failed)
    return;
  cc->failed = 1;
  char what[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  /* a place deep in a huge schema is cut in the middle: the message must
   * still say what is wrong */
  const char *ptr = cc->ptr.len ? cc->ptr.data : "";
  char where[160];
  size_t len = strlen(ptr);
  if (len <= 120)
    snprintf(where, sizeof where, "%s", ptr);
  else
    snprintf(where, sizeof where, "%.40s...%s", ptr, ptr + len - 70);
  if (cc->doc)
    ob_error_set(cc->err, OB_EINVAL, 0, "%s#%s: %s: %s", META_URI, where, keyword, what);
  else
    ob_error_set(cc->err, OB_EINVAL, 0, "%s: %s: %s", len ? where : "(root)", keyword, what);
}

/* Points cc at node n, so that an error is reported where n is. */
static void cc_at(cctx *cc, const snode *n) {
  cc->doc = n->doc;
  buf_truncate(&cc->ptr, 0);
  ob_buf_add(&cc->ptr, n->ptr, n->ptrlen);
}

static const char *tname(const ob_value *v) { return ob_type_name(ob_typeof(v)); }

static snode *compile_node(cctx *cc, const ob_value *v, const char *base);

/* Compiles the subschema v at ptr + "/seg" (+ "/seg2" when seg2 is not NULL). */
static snode *compile_sub(cctx *cc, const ob_value *v, const char *base, const char *seg,
                          const char *seg2, size_t seg2len) {
  size_t mark = cc->ptr.len;
  ptr_add(&cc->ptr, seg, strlen(seg));
  if (seg2)
    ptr_add(&cc->ptr, seg2, seg2len);
  snode *n = compile_node(cc, v, base);
  buf_truncate(&cc->ptr, mark);
  return n;
}

static snode *compile_sub_index(cctx *cc, const ob_value *v, const char *base, const char *seg,
                                size_t i) {
  size_t mark = cc->ptr.len;
  ptr_add(&cc->ptr, seg, strlen(seg));
  ptr_add_index(&cc->ptr, i);
  snode *n = compile_node(cc, v, base);
  buf_truncate(&cc->ptr, mark);
  return n;
}

/* A keyword whose value is a schema; NULL when absent (or on error). */
static snode *schema_kw(cctx *cc, const ob_value *o, const char *name, const char *base) {
  const ob_value *v = kw(o, name);
  if (!v || cc->failed)
    return NULL;
  if (!is_schema_value(v)) {
    cerr(cc, name, "must be a schema (an object or a boolean), not %s", tname(v));
    return NULL;
  }
  return compile_sub(cc, v, base, name, NULL, 0);
}

/* A keyword whose value is an object of schemas. Lua cannot tell an empty
 * table from an empty array, so an empty array is read as an empty object. */
static const ob_value *object_kw(cctx *cc, const ob_value *o, const char *name) {
  const ob_value *v = kw(o, name);
  if (!v || cc->failed)
    return NULL;
  if (ob_typeof(v) == OB_ARRAY && ob_array_len(v) == 0)
    return NULL;
  if (ob_typeof(v) != OB_OBJECT) {
    cerr(cc, name, "must be an object, not %s", tname(v));
    return NULL;
  }
  return v;
}

static NOINLINE int number_kw(cctx *cc, const ob_value *o, const char *name, const ob_value **out) {
  const ob_value *v = kw(o, name);
  if (!v)
    return 0;
  if (!ob_is_number(v)) {
    ob_type t = ob_typeof(v);
    cerr(cc, name, "must be a number, not %s%s", tname(v),
         (t == OB_TRUE || t == OB_FALSE) && name[0] == 'e'
             ? " (the boolean form is draft-04; draft-07 takes the bound itself)"
             : "");
    return 0;
  }
  *out = v;
  return 1;
}

/* minLength and friends: a non-negative integer (1.0 counts, as in JSON). */
static NOINLINE int count_kw(cctx *cc, const ob_value *o, const char *name, size_t *out) {
  const ob_value *v = kw(o, name);
  if (!v)
    return 0;
  if (!is_integral(v) || (ob_typeof(v) == OB_INT ? ob_int_value(v) < 0 : ob_real_value(v) < 0)) {
    ob_buf b;
    ob_buf_init(&b);
    put_value(&b, v);
    cerr(cc, name, "must be a non-negative integer, not %s", b.data);
    ob_buf_free(&b);
    return 0;
  }
  if (ob_typeof(v) == OB_INT)
    *out = (uint64_t)ob_int_value(v) > SIZE_MAX ? SIZE_MAX : (size_t)ob_int_value(v);
  else
    *out = ob_real_value(v) >= (double)SIZE_MAX ? SIZE_MAX : (size_t)ob_real_value(v);
  return 1;
}

/* An array of unique strings (required, dependencies); an empty object counts
 * as an empty array (Lua tables again). */
static NOINLINE const ob_value *string_array(cctx *cc, const char *name, const ob_value *v) {
  if (ob_typeof(v) == OB_OBJECT && ob_object_len(v) == 0)
    return ob_array();
  if (ob_typeof(v) != OB_ARRAY) {
    cerr(cc, name, "must be an array of strings, not %s", tname(v));
    return NULL;
  }
  size_t n = ob_array_len(v);
  for (size_t i = 0; i < n; i++) {
    const ob_value *e = ob_array_get(v, i);
    if (ob_typeof(e) != OB_STRING) {
      cerr(cc, name, "must be an array of strings, but item %zu is %s", i, tname(e));
      return NULL;
    }
    for (size_t j = 0; j < i; j++)
      if (ob_equal(e, ob_array_get(v, j))) {
        ob_buf b;
        ob_buf_init(&b);
        put_value(&b, e);
        cerr(cc, name, "%s appears twice (the names must be unique)", b.data);
        ob_buf_free(&b);
        return NULL;
      }
  }
  return v;
}

/* ECMA-262 semantics, as far as PCRE2 goes: \uHHHH escapes (ALT_BSUX), $ only
 * at the very end, code points rather than bytes; unanchored matching. An
 * instance string that is not valid UTF-8 simply does not match. */
static pcre2_code *regex_build(const char *s, size_t n, int *code, PCRE2_SIZE *off) {
  return pcre2_compile((PCRE2_SPTR)s, n,
                       PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY,
                       code, off, NULL);
}

static NOINLINE pcre2_code *regex_compile(cctx *cc, const char *keyword, const ob_value *pat) {
  int code;
  PCRE2_SIZE off;
  pcre2_code *re = regex_build(ob_string_ptr(pat), ob_string_len(pat), &code, &off);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    ob_buf b;
    ob_buf_init(&b);
    put_value(&b, pat);
    cerr(cc, keyword, "invalid regular expression %s: %s at offset %zu", b.data, (char *)msg,
         (size_t)off);
    ob_buf_free(&b);
    return NULL;
  }
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* best effort: the interpreter is the fallback */
  return re;
}

static int named_cmp(const void *a, const void *b) {
  const ob_value *x = ((const named_schema *)a)->key, *y = ((const named_schema *)b)->key;
  size_t xl = ob_string_len(x), yl = ob_string_len(y);
  int c = memcmp(ob_string_ptr(x), ob_string_ptr(y), xl < yl ? xl : yl);
  return c ? c : (xl > yl) - (xl < yl);
}

static int compile_list(cctx *cc, const ob_value *o, const char *name, const char *base,
                        schema_list *out) {
  const ob_value *v = kw(o, name);
  if (!v || cc->failed)
    return 0;
  if (ob_typeof(v) != OB_ARRAY || ob_array_len(v) == 0) {
    cerr(cc, name, "must be a non-empty array of schemas, not %s",
         ob_typeof(v) == OB_ARRAY ? "an empty array" : tname(v));
    return 0;
  }
  size_t n = ob_array_len(v);
  out->v = ob_xcalloc(n, sizeof *out->v);
  out->n = n;
  for (size_t i = 0; i < n && !cc->failed; i++) {
    out->v[i] = compile_sub_index(cc, ob_array_get(v, i), base, name, i);
  }
  return !cc->failed;
}

static NOINLINE void compile_type(cctx *cc, snode *n, const ob_value *v) {
  const ob_value *one = v;
  size_t count = 1;
  if (ob_typeof(v) == OB_ARRAY) {
    count = ob_array_len(v);
    if (count == 0) {
      cerr(cc, "type", "must not be an empty array");
      return;
    }
  } else if (ob_typeof(v) != OB_STRING) {
    cerr(cc, "type", "must be a type name or an array of them, not %s", tname(v));
    return;
  }
  for (size_t i = 0; i < count; i++) {
    if (ob_typeof(v) == OB_ARRAY)
      one = ob_array_get(v, i);
    if (ob_typeof(one) != OB_STRING) {
      cerr(cc, "type", "item %zu must be a type name, not %s", i, tname(one));
      return;
    }
    unsigned bit = 0;
    for (unsigned t = 0; t < sizeof type_names / sizeof *type_names; t++)
      if (strlen(type_names[t]) == ob_string_len(one) &&
          memcmp(type_names[t], ob_string_ptr(one), ob_string_len(one)) == 0)
        bit = 1u << t;
    ob_buf b;
    ob_buf_init(&b);
    put_value(&b, one);
    if (!bit)
      cerr(cc, "type", "unknown type %s (null, boolean, integer, number, string, array, object)",
           b.data);
    else if (n->types & bit)
      cerr(cc, "type", "%s appears twice", b.data);
    ob_buf_free(&b);
    if (cc->failed)
      return;
    n->types |= bit;
  }
  n->has |= HAS_TYPE;
}

/* The keywords a schema may use: draft-07's, the annotations, and $defs and
 * deprecated (the names later drafts gave definitions and a deprecation note). */
static const char *const known_keywords[] = {
    "$schema", "$id", "$ref", "$comment", "title", "description", "default", "examples",
    "readOnly", "writeOnly", "deprecated", "definitions", "$defs", "type", "enum", "const",
    "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
    "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "items",
    "additionalItems", "maxItems", "minItems", "uniqueItems", "contains", "maxProperties",
    "minProperties", "required", "properties", "patternProperties", "additionalProperties",
    "dependencies", "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not",
};

/* Keywords of drafts after 07 that this validator does not apply, and what
 * says the same in draft-07. */
static const char *const later_keywords[][2] = {
    {"dependentRequired", "\"dependencies\" with an array of names"},
    {"dependentSchemas", "\"dependencies\" with a schema"},
    {"prefixItems", "\"items\" with an array of schemas"},
    {"unevaluatedProperties", "\"additionalProperties\""},
    {"unevaluatedItems", "\"additionalItems\""},
    {"minContains", NULL},
    {"maxContains", NULL},
    {"$anchor", "\"$id\": \"#name\""},
    {"$dynamicRef", "\"$ref\""},
    {"$dynamicAnchor", NULL},
    {"$recursiveRef", "\"$ref\""},
    {"$recursiveAnchor", NULL},
    {"$vocabulary", NULL},
    {"contentSchema", NULL},
};

/* The key as the message names it: bare when plain, else as JSON. */
static void key_text(ob_buf *b, const ob_value *key) {
  const char *s = ob_string_ptr(key);
  size_t n = ob_string_len(key), i = 0;
  while (i < n && s[i] > 32 && s[i] < 127 && s[i] != '"')
    i++;
  if (n && i == n)
    ob_buf_add(b, s, n);
  else
    put_value(b, key);
}

/* Strict: every key of schema object o is a keyword, or starts with "x-". */
static NOINLINE void check_keywords(cctx *cc, const ob_value *o) {
  ob_object_iter it;
  ob_value *k, *val;
  ob_object_iter_init(&it, o);
  while (!cc->failed && ob_object_iter_next(&it, &k, &val)) {
    const char *name = ob_string_ptr(k);
    size_t len = ob_string_len(k);
    if (len >= 2 && name[0] == 'x' && name[1] == '-')
      continue;
    int known = strlen(name) == len; /* a key holding a NUL is no keyword */
    size_t i = 0;
    while (known && i < sizeof known_keywords / sizeof *known_keywords &&
           strcmp(known_keywords[i], name))
      i++;
    if (known && i < sizeof known_keywords / sizeof *known_keywords)
      continue;
    ob_buf b;
    ob_buf_init(&b);
    key_text(&b, k);
    const char *later = NULL, *instead = NULL;
    for (size_t j = 0; j < sizeof later_keywords / sizeof *later_keywords; j++)
      if (!strcmp(later_keywords[j][0], name))
        later = later_keywords[j][0], instead = later_keywords[j][1];
    if (later) {
      cerr(cc, b.data, "a keyword of a later draft than 07, which obelus implements%s%s%s",
           instead ? "; draft-07 says it with " : "", instead ? instead : "",
           " (a keyword of your own must start with \"x-\")");
    } else {
      const char *near = ob_suggest(name, known_keywords,
                                    sizeof known_keywords / sizeof *known_keywords);
      cerr(cc, b.data, "unknown keyword%s%s%s (a keyword of your own must start with \"x-\")",
           near ? "; did you mean \"" : "", near ? near : "", near ? "\"?" : "");
    }
    ob_buf_free(&b);
  }
}

static NOINLINE void compile_format(cctx *cc, snode *n, const ob_value *v) {
  if (ob_typeof(v) != OB_STRING) {
    cerr(cc, "format", "must be a string, not %s", tname(v));
    return;
  }
  const char *name = ob_string_ptr(v);
  size_t len = ob_string_len(v);
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
    if (strlen(formats[i].name) == len && !memcmp(formats[i].name, name, len)) {
      n->format = formats[i].check ? &formats[i] : NULL;
      return;
    }
  if (!(cc->flags & OB_SCHEMA_STRICT))
    return; /* an annotation then, as draft-07 allows */
  ob_suggester s;
  ob_suggester_init(&s, name);
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
    ob_suggester_add(&s, formats[i].name);
  const char *near = ob_suggester_best(&s);
  ob_buf b;
  ob_buf_init(&b);
  put_value(&b, v);
  cerr(cc, "format", "unknown format %s%s%s%s (checked: date-time, date, time, email, "
                     "hostname, ipv4, ipv6, uri, uri-reference, uuid, regex, json-pointer, "
                     "relative-json-pointer)",
       b.data, near ? "; did you mean \"" : "", near ? near : "", near ? "\"?" : "");
  ob_buf_free(&b);
}

static NOINLINE void compile_object_keywords(cctx *cc, snode *n, const ob_value *o, const char *base) {
  const ob_value *v;
  if ((v = object_kw(cc, o, "properties"))) {
    size_t len = ob_object_len(v);
    n->props = ob_xcalloc(len, sizeof *n->props);
    ob_object_iter it;
    ob_value *k, *val;
    ob_object_iter_init(&it, v);
    while (!cc->failed && ob_object_iter_next(&it, &k, &val)) {
      named_schema *p = &n->props[n->nprops++];
      p->key = k;
      p->schema = compile_sub(cc, val, base, "properties", ob_string_ptr(k), ob_string_len(k));
    }
    qsort(n->props, n->nprops, sizeof *n->props, named_cmp);
  }
  if ((v = object_kw(cc, o, "patternProperties"))) {
    size_t len = ob_object_len(v);
    n->pattern_props = ob_xcalloc(len, sizeof *n->pattern_props);
    ob_object_iter it;
    ob_value *k, *val;
    ob_object_iter_init(&it, v);
    while (!cc->failed && ob_object_iter_next(&it, &k, &val)) {
      pcre2_code *re = regex_compile(cc, "patternProperties", k);
      if (!re)
        return;
      regex_schema *p = &n->pattern_props[n->npattern_props++];
      p->re = re;
      p->schema = compile_sub(cc, val, base, "patternProperties", ob_string_ptr(k), ob_string_len(k));
    }
  }
  n->additional_props = schema_kw(cc, o, "additionalProperties", base);
  n->property_names = schema_kw(cc, o, "propertyNames", base);
  if ((v = kw(o, "required")) && !cc->failed)
    n->required = string_array(cc, "required", v);
  if (count_kw(cc, o, "minProperties", &n->min_props))
    n->has |= HAS_MIN_PROPS;
  if (count_kw(cc, o, "maxProperties", &n->max_props))
    n->has |= HAS_MAX_PROPS;
  if ((v = object_kw(cc, o, "dependencies"))) {
    size_t len = ob_object_len(v);
    n->deps = ob_xcalloc(len, sizeof *n->deps);
    ob_object_iter it;
    ob_value *k, *val;
    ob_object_iter_init(&it, v);
    while (!cc->failed && ob_object_iter_next(&it, &k, &val)) {
      named_schema *d = &n->deps[n->ndeps++];
      d->key = k;
      if (ob_typeof(val) == OB_ARRAY) {
        d->names = string_array(cc, "dependencies", val);
      } else if (is_schema_value(val)) {
        d->schema = compile_sub(cc, val, base, "dependencies", ob_string_ptr(k), ob_string_len(k));
      } else {
        ob_buf b;
        ob_buf_init(&b);
        put_value(&b, k);
        cerr(cc, "dependencies", "%s must be an array of property names or a schema, not %s",
             b.data, tname(val));
        ob_buf_free(&b);
      }
    }
  }
  if (n->props || n->pattern_props || n->additional_props || n->property_names || n->required ||
      n->deps || (n->has & (HAS_MIN_PROPS | HAS_MAX_PROPS)))
    n->has |= HAS_OBJECT_KW;
}

static NOINLINE void compile_array_keywords(cctx *cc, snode *n, const ob_value *o, const char *base) {
  const ob_value *v = kw(o, "items");
  if (v && ob_typeof(v) == OB_ARRAY) {
    size_t len = ob_array_len(v);
    n->tuple.v = ob_xcalloc(len, sizeof *n->tuple.v);
    n->tuple.n = len;
    n->has |= HAS_TUPLE;
    for (size_t i = 0; i < len && !cc->failed; i++) {
      n->tuple.v[i] = compile_sub_index(cc, ob_array_get(v, i), base, "items", i);
    }
  } else if (v && !cc->failed) {
    if (!is_schema_value(v)) {
      cerr(cc, "items", "must be a schema or an array of schemas, not %s", tname(v));
      return;
    }
    n->items = compile_sub(cc, v, base, "items", NULL, 0);
  }
  /* compiled (so its errors show) even where draft-07 ignores it: without a tuple */
  n->additional_items = schema_kw(cc, o, "additionalItems", base);
  n->contains = schema_kw(cc, o, "contains", base);
  if (count_kw(cc, o, "minItems", &n->min_items))
    n->has |= HAS_MIN_ITEMS;
  if (count_kw(cc, o, "maxItems", &n->max_items))
    n->has |= HAS_MAX_ITEMS;
  if ((v = kw(o, "uniqueItems"))) {
    if (ob_typeof(v) == OB_TRUE)
      n->has |= HAS_UNIQUE;
    else if (ob_typeof(v) != OB_FALSE)
      cerr(cc, "uniqueItems", "must be a boolean, not %s", tname(v));
  }
  if (n->items || (n->has & (HAS_TUPLE | HAS_MIN_ITEMS | HAS_MAX_ITEMS | HAS_UNIQUE)) ||
      n->contains)
    n->has |= HAS_ARRAY_KW;
}

static void compile_keywords(cctx *cc, snode *n, const ob_value *o, const char *base) {
  const ob_value *v;
  char *own_base = NULL;
  if ((v = kw(o, "$id"))) {
    if (ob_typeof(v) != OB_STRING) {
      cerr(cc, "$id", "must be a string, not %s", tname(v));
      return;
    }
    char *id = uri_resolve(base, ob_string_ptr(v));
    char *hash = strchr(id, '#');
    size_t ulen = hash ? (size_t)(hash - id) : strlen(id);
    own_base = ob_xstrndup(id, ulen);
    /* "#name" names this place inside the current resource; anything else
     * starts a new resource whose refs resolve against it */
    int anchor_only = hash && strlen(base) == ulen && memcmp(base, id, ulen) == 0;
    if (hash && hash[1] != '/')
      id_add(cc->s, id, cc->doc, &cc->ptr, own_base);
    if (!anchor_only)
      id_add(cc->s, own_base, cc->doc, &cc->ptr, own_base);
    free(id);
    base = own_base;
  }
  if ((v = kw(o, "type")))
    compile_type(cc, n, v);
  if ((v = kw(o, "enum")) && !cc->failed) {
    if (ob_typeof(v) == OB_OBJECT && ob_object_len(v) == 0)
      n->enum_values = ob_array();
    else if (ob_typeof(v) != OB_ARRAY)
      cerr(cc, "enum", "must be an array, not %s", tname(v));
    else
      n->enum_values = v;
  }
  n->const_value = kw(o, "const");

  int numeric = 0;
  numeric |= number_kw(cc, o, "minimum", &n->minimum);
  numeric |= number_kw(cc, o, "maximum", &n->maximum);
  numeric |= number_kw(cc, o, "exclusiveMinimum", &n->exclusive_minimum);
  numeric |= number_kw(cc, o, "exclusiveMaximum", &n->exclusive_maximum);
  if (number_kw(cc, o, "multipleOf", &n->multiple_of)) {
    if (ob_typeof(n->multiple_of) == OB_INT ? ob_int_value(n->multiple_of) <= 0
                                            : !(ob_real_value(n->multiple_of) > 0)) {
      cerr(cc, "multipleOf", "must be greater than 0");
      n->multiple_of = NULL;
    } else {
      n->multiple_dec = dec_of(n->multiple_of);
      numeric = 1;
    }
  }
  if (numeric)
    n->has |= HAS_NUMBER_KW;
  if (cc->failed)
    goto out;

  if (count_kw(cc, o, "minLength", &n->min_length))
    n->has |= HAS_MIN_LENGTH;
  if (count_kw(cc, o, "maxLength", &n->max_length))
    n->has |= HAS_MAX_LENGTH;
  if ((v = kw(o, "pattern")) && !cc->failed) {
    if (ob_typeof(v) != OB_STRING)
      cerr(cc, "pattern", "must be a string, not %s", tname(v));
    else {
      n->pattern = regex_compile(cc, "pattern", v);
      n->pattern_src = v;
    }
  }
  if ((v = kw(o, "format")) && !cc->failed)
    compile_format(cc, n, v);
  if (n->has & (HAS_MIN_LENGTH | HAS_MAX_LENGTH) || n->pattern || n->format)
    n->has |= HAS_STRING_KW;
  if (cc->failed)
    goto out;

  compile_array_keywords(cc, n, o, base);
  if (cc->failed)
    goto out;
  compile_object_keywords(cc, n, o, base);
  if (cc->failed)
    goto out;

  compile_list(cc, o, "allOf", base, &n->all_of);
  compile_list(cc, o, "anyOf", base, &n->any_of);
  compile_list(cc, o, "oneOf", base, &n->one_of);
  n->not_schema = schema_kw(cc, o, "not", base);
  n->if_schema = schema_kw(cc, o, "if", base);
  n->then_schema = schema_kw(cc, o, "then", base);
  n->else_schema = schema_kw(cc, o, "else", base);
  if (n->all_of.n || n->any_of.n || n->one_of.n || n->not_schema || n->if_schema || n->enum_values ||
      n->const_value)
    n->has |= HAS_APPLICATOR_KW;

  /* definitions (and $defs, their later name) hold schemas for $ref; compiled
   * now so their errors show and their $ids are known before refs are resolved */
  static const char *const defs[] = {"definitions", "$defs"};
  for (int d = 0; d < 2; d++) {
    if (!(v = object_kw(cc, o, defs[d])))
      continue;
    ob_object_iter it;
    ob_value *k, *val;
    ob_object_iter_init(&it, v);
    while (!cc->failed && ob_object_iter_next(&it, &k, &val)) {
      compile_sub(cc, val, base, defs[d], ob_string_ptr(k), ob_string_len(k));
    }
  }
out:
  free(own_base);
}

/* Compiles the schema v found at cc->ptr in document cc->doc. */
static snode *compile_node(cctx *cc, const ob_value *v, const char *base) {
  if (cc->failed)
    return NULL;
  snode *n = map_get(cc->s, cc->doc, cc->ptr.data ? cc->ptr.data : "", cc->ptr.len);
  if (n)
    return n;
  if (cc->depth >= COMPILE_DEPTH_MAX) {
    cerr(cc, "schema", "nested deeper than %d levels", COMPILE_DEPTH_MAX);
    return NULL;
  }
  n = node_new(cc->s, cc->doc, &cc->ptr, v);
  switch (ob_typeof(v)) {
  case OB_TRUE: n->kind = NODE_TRUE; break;
  case OB_FALSE: n->kind = NODE_FALSE; break;
  case OB_OBJECT: {
    if ((cc->flags & OB_SCHEMA_STRICT) && cc->doc == 0)
      check_keywords(cc, v);
    const ob_value *ref = kw(v, "$ref");
    if (ref) {
      /* draft-07: a $ref replaces its whole object, siblings included */
      if (ob_typeof(ref) != OB_STRING)
        cerr(cc, "$ref", "must be a string, not %s", tname(ref));
      else
        n->ref_uri = uri_resolve(base, ob_string_ptr(ref));
      break;
    }
    cc->depth++;
    compile_keywords(cc, n, v, base);
    cc->depth--;
    break;
  }
  default:
    cerr(cc, "schema", "must be an object or a boolean, not %s", tname(v));
    break;
  }
  return cc->failed ? NULL : n;
}

/* The built-in draft-07 meta-schema (the draft's own, with the same meaning). */
static const char META_TEXT[] =
    "{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
    "\"$id\":\"http://json-schema.org/draft-07/schema#\","
    "\"title\":\"Core schema meta-schema\","
    "\"definitions\":{"
    "\"schemaArray\":{\"type\":\"array\",\"minItems\":1,\"items\":{\"$ref\":\"#\"}},"
    "\"nonNegativeInteger\":{\"type\":\"integer\",\"minimum\":0},"
    "\"nonNegativeIntegerDefault0\":{\"allOf\":[{\"$ref\":\"#/definitions/nonNegativeInteger\"},"
    "{\"default\":0}]},"
    "\"simpleTypes\":{\"enum\":[\"array\",\"boolean\",\"integer\",\"null\",\"number\",\"object\","
    "\"string\"]},"
    "\"stringArray\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true,"
    "\"default\":[]}},"
    "\"type\":[\"object\",\"boolean\"],"
    "\"properties\":{"
    "\"$id\":{\"type\":\"string\",\"format\":\"uri-reference\"},"
    "\"$schema\":{\"type\":\"string\",\"format\":\"uri\"},"
    "\"$ref\":{\"type\":\"string\",\"format\":\"uri-reference\"},"
    "\"$comment\":{\"type\":\"string\"},"
    "\"title\":{\"type\":\"string\"},"
    "\"description\":{\"type\":\"string\"},"
    "\"default\":true,"
    "\"readOnly\":{\"type\":\"boolean\",\"default\":false},"
    "\"writeOnly\":{\"type\":\"boolean\",\"default\":false},"
    "\"examples\":{\"type\":\"array\",\"items\":true},"
    "\"multipleOf\":{\"type\":\"number\",\"exclusiveMinimum\":0},"
    "\"maximum\":{\"type\":\"number\"},"
    "\"exclusiveMaximum\":{\"type\":\"number\"},"
    "\"minimum\":{\"type\":\"number\"},"
    "\"exclusiveMinimum\":{\"type\":\"number\"},"
    "\"maxLength\":{\"$ref\":\"#/definitions/nonNegativeInteger\"},"
    "\"minLength\":{\"$ref\":\"#/definitions/nonNegativeIntegerDefault0\"},"
    "\"pattern\":{\"type\":\"string\",\"format\":\"regex\"},"
    "\"additionalItems\":{\"$ref\":\"#\"},"
    "\"items\":{\"anyOf\":[{\"$ref\":\"#\"},{\"$ref\":\"#/definitions/schemaArray\"}],"
    "\"default\":true},"
    "\"maxItems\":{\"$ref\":\"#/definitions/nonNegativeInteger\"},"
    "\"minItems\":{\"$ref\":\"#/definitions/nonNegativeIntegerDefault0\"},"
    "\"uniqueItems\":{\"type\":\"boolean\",\"default\":false},"
    "\"contains\":{\"$ref\":\"#\"},"
    "\"maxProperties\":{\"$ref\":\"#/definitions/nonNegativeInteger\"},"
    "\"minProperties\":{\"$ref\":\"#/definitions/nonNegativeIntegerDefault0\"},"
    "\"required\":{\"$ref\":\"#/definitions/stringArray\"},"
    "\"additionalProperties\":{\"$ref\":\"#\"},"
    "\"definitions\":{\"type\":\"object\",\"additionalProperties\":{\"$ref\":\"#\"},\"default\":{}},"
    "\"properties\":{\"type\":\"object\",\"additionalProperties\":{\"$ref\":\"#\"},\"default\":{}},"
    "\"patternProperties\":{\"type\":\"object\",\"additionalProperties\":{\"$ref\":\"#\"},"
    "\"propertyNames\":{\"format\":\"regex\"},\"default\":{}},"
    "\"dependencies\":{\"type\":\"object\",\"additionalProperties\":{\"anyOf\":[{\"$ref\":\"#\"},"
    "{\"$ref\":\"#/definitions/stringArray\"}]}},"
    "\"propertyNames\":{\"$ref\":\"#\"},"
    "\"const\":true,"
    "\"enum\":{\"type\":\"array\",\"items\":true},"
    "\"type\":{\"anyOf\":[{\"$ref\":\"#/definitions/simpleTypes\"},{\"type\":\"array\","
    "\"items\":{\"$ref\":\"#/definitions/simpleTypes\"},\"minItems\":1,\"uniqueItems\":true}]},"
    "\"format\":{\"type\":\"string\"},"
    "\"contentMediaType\":{\"type\":\"string\"},"
    "\"contentEncoding\":{\"type\":\"string\"},"
    "\"if\":{\"$ref\":\"#\"},"
    "\"then\":{\"$ref\":\"#\"},"
    "\"else\":{\"$ref\":\"#\"},"
    "\"allOf\":{\"$ref\":\"#/definitions/schemaArray\"},"
    "\"anyOf\":{\"$ref\":\"#/definitions/schemaArray\"},"
    "\"oneOf\":{\"$ref\":\"#/definitions/schemaArray\"},"
    "\"not\":{\"$ref\":\"#\"}},"
    "\"default\":true}";

static void load_meta(cctx *cc) {
  ob_schema *s = cc->s;
  ob_error perr;
  ob_value *meta = ob_json_parse(META_TEXT, sizeof META_TEXT - 1, &perr);
  if (!meta) {
    cerr(cc, "$ref", "the built-in meta-schema does not parse: %s", perr.msg);
    return;
  }
  s->docs[s->ndocs++] = meta;
  int saved_doc = cc->doc;
  cc->doc = 1;
  buf_truncate(&cc->ptr, 0);
  id_add(s, META_URI, 1, &cc->ptr, META_URI);
  cc->depth = 0;
  compile_node(cc, meta, META_URI);
  cc->doc = saved_doc;
}

/* Finds (compiling when needed) the node a $ref names. */
static snode *resolve_ref(cctx *cc, snode *n) {
  ob_schema *s = cc->s;
  const char *ref = n->ref_uri;
  const char *hash = strchr(ref, '#');
  size_t ulen = hash ? (size_t)(hash - ref) : strlen(ref);
  id_entry *e = NULL;
  char *frag = NULL;
  snode *target = NULL;
  ob_buf token, where;
  ob_buf_init(&token);
  ob_buf_init(&where);
  cc_at(cc, n);

  if (hash && hash[1] != '/') {
    e = id_find(s, ref, strlen(ref)); /* a plain-name fragment, "#foo" */
    frag = ob_xstrdup("");
  } else {
    frag = percent_decode(hash ? hash + 1 : "");
    if (!frag) {
      cerr(cc, "$ref", "\"%s\" has a malformed %%-escape", ref);
      goto out;
    }
    e = id_find(s, ref, ulen);
    if (!e && ulen == sizeof META_URI - 1 && memcmp(ref, META_URI, ulen) == 0 && s->ndocs < 2) {
      load_meta(cc);
      if (cc->failed)
        goto out;
      e = id_find(s, ref, ulen);
    }
  }
  if (!e) {
    cc_at(cc, n);
    if (uri_scheme_len(ref))
      cerr(cc, "$ref", "cannot resolve \"%s\": no schema here has that $id, and remote schemas "
                       "are never fetched",
           ref);
    else
      cerr(cc, "$ref", "cannot resolve \"%s\": no schema here has that $id", ref);
    goto out;
  }

  /* walk the fragment from the identified schema, following $ids for the base */
  snode *start = map_get(s, e->doc, e->ptr, e->ptrlen);
  const ob_value *v = start ? start->src : NULL;
  char *base = ob_xstrdup(e->base);
  ob_buf_add(&where, e->ptr, e->ptrlen);
  const char *p = frag;
  while (v && *p == '/') {
    const char *tok = p + 1;
    size_t tlen = strcspn(tok, "/");
    p = tok + tlen;
    if (!ptr_token_decode(tok, tlen, &token)) {
      v = NULL;
      break;
    }
    if (ob_typeof(v) == OB_OBJECT) {
      v = ob_object_get(v, token.data, token.len);
    } else if (ob_typeof(v) == OB_ARRAY) {
      char *end;
      unsigned long long i = strtoull(token.data, &end, 10);
      int digits = token.len > 0 && *end == '\0' && isdigit((unsigned char)token.data[0]) &&
                   (token.data[0] != '0' || token.len == 1);
      v = digits && i < ob_array_len(v) ? ob_array_get(v, (size_t)i) : NULL;
    } else {
      v = NULL;
    }
    ptr_add(&where, token.data, token.len);
    if (v && ob_typeof(v) == OB_OBJECT && !kw(v, "$ref")) {
      const ob_value *id = kw(v, "$id");
      if (id && ob_typeof(id) == OB_STRING) {
        char *nb = uri_resolve(base, ob_string_ptr(id));
        nb[strcspn(nb, "#")] = '\0';
        free(base);
        base = nb;
      }
    }
  }
  if (!v || *p) {
    free(base);
    cc_at(cc, n);
    cerr(cc, "$ref", "\"%s\" points to nothing in the schema", ref);
    goto out;
  }
  target = map_get(s, e->doc, where.data ? where.data : "", where.len);
  if (!target) {
    /* a place no keyword names: compile it as a schema in its own right */
    cc->doc = e->doc;
    buf_truncate(&cc->ptr, 0);
    ob_buf_add(&cc->ptr, where.data ? where.data : "", where.len);
    cc->depth = 0;
    target = compile_node(cc, v, base);
  }
  free(base);
out:
  free(frag);
  ob_buf_free(&token);
  ob_buf_free(&where);
  return target;
}

/* Sets *out to the i-th schema applied to the same instance as n (NULL for a
 * keyword n does not have); 0 once i is past the last. */
static int same_instance_child(const snode *n, size_t i, snode **out) {
  *out = NULL;
  if (n->ref) {
    *out = n->ref;
    return i == 0;
  }
  const schema_list *lists[3] = {&n->all_of, &n->any_of, &n->one_of};
  for (int l = 0; l < 3; l++) {
    if (i < lists[l]->n) {
      *out = lists[l]->v[i];
      return 1;
    }
    i -= lists[l]->n;
  }
  snode *const fixed[4] = {n->not_schema, n->if_schema, n->then_schema, n->else_schema};
  if (i < 4) {
    *out = fixed[i];
    return 1;
  }
  i -= 4;
  if (i < n->ndeps) {
    *out = n->deps[i].schema;
    return 1;
  }
  return 0;
}

/* Refuses schemas that could recurse forever on the same instance. Iterative:
 * a long chain of refs must not exhaust the C stack. */
static void check_cycles(cctx *cc) {
  ob_schema *s = cc->s;
  typedef struct frame {
    snode *n;
    size_t next;
  } frame;
  frame *stack = ob_xmalloc((s->nnodes + 1) * sizeof *stack);
  for (size_t r = 0; r < s->nnodes && !cc->failed; r++) {
    if (s->nodes[r]->mark)
      continue;
    size_t top = 0;
    stack[top++] = (frame){s->nodes[r], 0};
    s->nodes[r]->mark = 1;
    while (top && !cc->failed) {
      frame *f = &stack[top - 1];
      snode *c;
      if (!same_instance_child(f->n, f->next++, &c)) {
        f->n->mark = 2;
        top--;
      } else if (!c) {
        continue;
      } else if (c->mark == 1) {
        cc_at(cc, c);
        cerr(cc, "$ref", "this schema applies itself to the same value again (through %s): "
                         "validation would never end",
             f->n->ptrlen ? f->n->spath : "the root");
      } else if (c->mark == 0) {
        c->mark = 1;
        stack[top++] = (frame){c, 0};
      }
    }
  }
  free(stack);
}

ob_schema *ob_schema_compile(const ob_value *schema, ob_error *err) {
  return ob_schema_compile_with(schema, 0, err);
}

ob_schema *ob_schema_compile_with(const ob_value *schema, unsigned flags, ob_error *err) {
  if (!schema) {
    ob_error_set(err, OB_EINVAL, 0, "(root): schema: no schema given");
    return NULL;
  }
  ob_schema *s = ob_xcalloc(1, sizeof *s);
  s->docs[s->ndocs++] = ob_ref((ob_value *)schema); /* refcounts are not the value's content */
  cctx cc = {s, err, 0, {NULL, 0, 0}, 0, 0, flags};
  ob_buf_init(&cc.ptr);
  id_add(s, "", 0, &cc.ptr, "");
  s->root = compile_node(&cc, schema, "");
  /* resolve every ref; resolving may compile more nodes, which the loop reaches */
  for (size_t i = 0; i < s->nnodes && !cc.failed; i++) {
    snode *n = s->nodes[i];
    if (n->ref_uri && !n->ref)
      n->ref = resolve_ref(&cc, n);
  }
  if (!cc.failed)
    check_cycles(&cc);
  ob_buf_free(&cc.ptr);
  if (cc.failed) {
    ob_schema_free(s);
    return NULL;
  }
  return s;
}

void ob_schema_free(ob_schema *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->nnodes; i++)
    node_free(s->nodes[i]);
  free(s->nodes);
  free(s->map);
  for (size_t i = 0; i < s->nids; i++) {
    free(s->ids[i].uri);
    free(s->ids[i].ptr);
    free(s->ids[i].base);
  }
  free(s->ids);
  for (size_t i = 0; i < s->ndocs; i++)
    ob_unref(s->docs[i]);
  free(s);
}

/* --- validating -------------------------------------------------------- */

/* Validation recurses once per level of the instance (and once per schema
 * applied to the same value), so the frames on that path are kept small:
 * the checks and the message builders are separate functions, never inlined
 * into validate() (see NOINLINE), and the checks take no addresses of their
 * own locals. */

typedef struct vctx {
  ob_schema_result *res; /* NULL: answer only, stop at the first failure */
  ob_buf ipath;          /* instance path, kept only while collecting */
  pcre2_match_data *md;
  unsigned depth;
  uintptr_t stack_base;
  int too_deep_reported;
} vctx;

static int validate(vctx *c, const snode *n, const ob_value *v);

static void result_add(ob_schema_result *r, const char *ipath, const char *spath,
                       const char *keyword, char *msg) {
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 8;
    r->fail = ob_xrealloc(r->fail, r->cap * sizeof *r->fail);
  }
  ob_schema_failure *f = &r->fail[r->n++];
  f->instance_path = ob_xstrdup(ipath);
  f->schema_path = ob_xstrdup(spath);
  f->keyword = ob_xstrdup(keyword);
  f->message = msg;
}

/* Records a failure of `keyword` of n at the current instance path; takes msg. */
static void emit(vctx *c, const snode *n, const char *keyword, ob_buf *msg) {
  ob_buf sp;
  ob_buf_init(&sp);
  ob_buf_add(&sp, n->spath, strlen(n->spath));
  if (strcmp(keyword, "false") != 0 && strcmp(keyword, "depth") != 0)
    ptr_add(&sp, keyword, strlen(keyword));
  result_add(c->res, c->ipath.data ? c->ipath.data : "", sp.data ? sp.data : "", keyword,
             buf_take(msg));
  ob_buf_free(&sp);
}

/* The message builders below are called only while collecting (c->res set). */

static NOINLINE void fail_text(vctx *c, const snode *n, const char *keyword, const char *text) {
  ob_buf m;
  ob_buf_init(&m);
  ob_buf_add(&m, text, strlen(text));
  emit(c, n, keyword, &m);
}

/* "<value> <text> <other>", e.g. "3 is less than 18". */
static NOINLINE void fail_values(vctx *c, const snode *n, const char *keyword, const ob_value *v,
                                 const char *text, const ob_value *other) {
  ob_buf m;
  ob_buf_init(&m);
  put_value(&m, v);
  ob_buf_addf(&m, " %s ", text);
  put_value(&m, other);
  emit(c, n, keyword, &m);
}

/* "<pre><name><post>", e.g. `missing property "id"`. */
static NOINLINE void fail_name(vctx *c, const snode *n, const char *keyword, const char *pre,
                               const ob_value *name, const char *post) {
  ob_buf m;
  ob_buf_init(&m);
  ob_buf_add(&m, pre, strlen(pre));
  put_value(&m, name);
  ob_buf_add(&m, post, strlen(post));
  emit(c, n, keyword, &m);
}

static NOINLINE void fail_count(vctx *c, const snode *n, const char *keyword, const char *what,
                                size_t have, const char *cmp, size_t limit) {
  ob_buf m;
  ob_buf_init(&m);
  ob_buf_addf(&m, "%zu %s, %s %zu", have, what, cmp, limit);
  emit(c, n, keyword, &m);
}

static NOINLINE void fail_none(vctx *c, const snode *n, const char *keyword, size_t alternatives) {
  ob_buf m;
  ob_buf_init(&m);
  ob_buf_addf(&m, "matches none of the %zu alternatives", alternatives);
  emit(c, n, keyword, &m);
}

static NOINLINE void fail_pair(vctx *c, const snode *n, const char *keyword, const char *fmt,
                               size_t a, size_t b) {
  ob_buf m;
  ob_buf_init(&m);
  ob_buf_addf(&m, fmt, a, b);
  emit(c, n, keyword, &m);
}

static NOINLINE void fail_dependency(vctx *c, const snode *n, const ob_value *name,
                                     const ob_value *because) {
  ob_buf m;
  ob_buf_init(&m);
  ob_buf_add(&m, "property ", 9);
  put_value(&m, name);
  ob_buf_add(&m, " is required when ", 18);
  put_value(&m, because);
  ob_buf_add(&m, " is present", 11);
  emit(c, n, "dependencies", &m);
}

/* `"x" is not an email address (format: email)`, with the reason when there is one */
static NOINLINE void fail_format(vctx *c, const snode *n, const ob_value *v) {
  ob_buf m;
  ob_buf_init(&m);
  put_value(&m, v);
  ob_buf_addf(&m, " is not %s (format: %s)", n->format->what, n->format->name);
  n->format->check(ob_string_ptr(v), ob_string_len(v), &m);
  emit(c, n, "format", &m);
}

static NOINLINE void fail_types(vctx *c, const snode *n, const ob_value *v) {
  ob_buf m;
  ob_buf_init(&m);
  ob_buf_add(&m, "expected ", 9);
  int first = 1;
  for (unsigned t = 0; t < sizeof type_names / sizeof *type_names; t++) {
    if (!(n->types & (1u << t)))
      continue;
    if (!first)
      ob_buf_add(&m, " or ", 4);
    ob_buf_add(&m, type_names[t], strlen(type_names[t]));
    first = 0;
  }
  ob_buf_addf(&m, ", got %s", tname(v));
  emit(c, n, "type", &m);
}

/* propertyNames while collecting: the name is checked with its own failure
 * list, then each failure is reported at the object, naming the key (a key
 * has no instance path of its own). */
static NOINLINE int check_property_name_collecting(vctx *c, const snode *n, const ob_value *key) {
  ob_schema_result inner = {0, NULL, 0};
  ob_schema_result *saved = c->res;
  c->res = &inner;
  int ok = validate(c, n->property_names, key);
  c->res = saved;
  for (size_t i = 0; i < inner.n; i++) {
    ob_buf m;
    ob_buf_init(&m);
    ob_buf_add(&m, "property name ", 14);
    put_value(&m, key);
    ob_buf_addf(&m, ": %s: %s", inner.fail[i].keyword, inner.fail[i].message);
    emit(c, n, "propertyNames", &m);
  }
  ob_schema_result_free(&inner);
  return ok;
}

static void path_push_key(vctx *c, const ob_value *key) {
  if (c->res)
    ptr_add(&c->ipath, ob_string_ptr(key), ob_string_len(key));
}

static void path_push_index(vctx *c, size_t i) {
  if (c->res)
    ptr_add_index(&c->ipath, i);
}

static unsigned type_bits(const ob_value *v) {
  switch (ob_typeof(v)) {
  case OB_NULL: return TY_NULL;
  case OB_TRUE:
  case OB_FALSE: return TY_BOOLEAN;
  case OB_INT: return TY_INTEGER | TY_NUMBER;
  case OB_REAL: return TY_NUMBER | (is_integral(v) ? TY_INTEGER : 0);
  case OB_STRING: return TY_STRING;
  case OB_ARRAY: return TY_ARRAY;
  case OB_OBJECT: return TY_OBJECT;
  }
  return 0;
}

static int regex_match(vctx *c, const pcre2_code *re, const ob_value *str) {
  if (!c->md && !(c->md = pcre2_match_data_create(1, NULL)))
    abort();
  int rc = pcre2_match(re, (PCRE2_SPTR)ob_string_ptr(str), ob_string_len(str), 0, 0, c->md, NULL);
  return rc >= 0; /* a match limit hit counts as no match: the value is refused */
}

/* Same-instance evaluation with failures suppressed (anyOf, oneOf, not, if, contains). */
static int quietly(vctx *c, const snode *n, const ob_value *v) {
  ob_schema_result *saved = c->res;
  c->res = NULL;
  int ok = validate(c, n, v);
  c->res = saved;
  return ok;
}

/* Validates item i of array v against n, under the instance path ".../i". */
static int validate_item(vctx *c, const snode *n, const ob_value *v, size_t i) {
  size_t mark = c->ipath.len;
  path_push_index(c, i);
  int ok = validate(c, n, ob_array_get(v, i));
  buf_truncate(&c->ipath, mark);
  return ok;
}

/* In each check: on a failure, stop at once when only an answer is wanted;
 * otherwise record it and go on, to report everything. */
#define FAILED(record)                                                                     \
  do {                                                                                     \
    ok = 0;                                                                                \
    if (!c->res)                                                                           \
      return 0;                                                                            \
    record;                                                                                \
  } while (0)

static NOINLINE int check_number(vctx *c, const snode *n, const ob_value *v) {
  int ok = 1;
  if (n->minimum && num_cmp(v, n->minimum) < 0)
    FAILED(fail_values(c, n, "minimum", v, "is less than", n->minimum));
  if (n->maximum && num_cmp(v, n->maximum) > 0)
    FAILED(fail_values(c, n, "maximum", v, "is greater than", n->maximum));
  if (n->exclusive_minimum && num_cmp(v, n->exclusive_minimum) <= 0)
    FAILED(fail_values(c, n, "exclusiveMinimum", v, "is not greater than", n->exclusive_minimum));
  if (n->exclusive_maximum && num_cmp(v, n->exclusive_maximum) >= 0)
    FAILED(fail_values(c, n, "exclusiveMaximum", v, "is not less than", n->exclusive_maximum));
  if (n->multiple_of && !is_multiple(v, n))
    FAILED(fail_values(c, n, "multipleOf", v, "is not a multiple of", n->multiple_of));
  return ok;
}

static size_t utf8_length(const ob_value *v) {
  const unsigned char *p = (const unsigned char *)ob_string_ptr(v);
  size_t len = ob_string_len(v), count = 0;
  for (size_t i = 0; i < len; i++)
    count += (p[i] & 0xC0) != 0x80; /* every byte but a continuation starts a code point */
  return count;
}

static NOINLINE int check_string(vctx *c, const snode *n, const ob_value *v) {
  int ok = 1;
  if (n->has & (HAS_MIN_LENGTH | HAS_MAX_LENGTH)) {
    size_t len = utf8_length(v);
    if ((n->has & HAS_MIN_LENGTH) && len < n->min_length)
      FAILED(fail_count(c, n, "minLength", "characters", len, "fewer than", n->min_length));
    if ((n->has & HAS_MAX_LENGTH) && len > n->max_length)
      FAILED(fail_count(c, n, "maxLength", "characters", len, "more than", n->max_length));
  }
  if (n->pattern && !regex_match(c, n->pattern, v))
    FAILED(fail_values(c, n, "pattern", v, "does not match", n->pattern_src));
  if (n->format && !n->format->check(ob_string_ptr(v), ob_string_len(v), NULL))
    FAILED(fail_format(c, n, v));
  return ok;
}

static NOINLINE int check_array(vctx *c, const snode *n, const ob_value *v) {
  int ok = 1;
  size_t len = ob_array_len(v);
  if ((n->has & HAS_MIN_ITEMS) && len < n->min_items)
    FAILED(fail_count(c, n, "minItems", "items", len, "fewer than", n->min_items));
  if ((n->has & HAS_MAX_ITEMS) && len > n->max_items)
    FAILED(fail_count(c, n, "maxItems", "items", len, "more than", n->max_items));
  if (n->has & HAS_TUPLE) {
    size_t fixed = len < n->tuple.n ? len : n->tuple.n;
    for (size_t i = 0; i < fixed; i++)
      if (!validate_item(c, n->tuple.v[i], v, i))
        FAILED((void)0);
    const snode *extra = n->additional_items;
    while (extra && extra->ref)
      extra = extra->ref;
    if (extra && len > n->tuple.n) {
      if (extra->kind == NODE_FALSE) {
        FAILED(fail_count(c, n, "additionalItems", "items", len, "the tuple allows at most",
                          n->tuple.n));
      } else {
        for (size_t i = n->tuple.n; i < len; i++)
          if (!validate_item(c, extra, v, i))
            FAILED((void)0);
      }
    }
  } else if (n->items) {
    for (size_t i = 0; i < len; i++)
      if (!validate_item(c, n->items, v, i))
        FAILED((void)0);
  }
  if (n->contains) {
    int found = 0;
    for (size_t i = 0; i < len && !found; i++)
      found = quietly(c, n->contains, ob_array_get(v, i));
    if (!found)
      FAILED(fail_text(c, n, "contains",
                       len ? "no item matches the contains schema" : "the array is empty"));
  }
  if (n->has & HAS_UNIQUE) {
    for (size_t i = 1; i < len; i++) {
      const ob_value *a = ob_array_get(v, i);
      for (size_t j = 0; j < i; j++)
        if (ob_equal(a, ob_array_get(v, j))) {
          FAILED(fail_pair(c, n, "uniqueItems", "items %zu and %zu are equal", j, i));
          return 0; /* one pair is enough to say it */
        }
    }
  }
  return ok;
}

static const named_schema *find_prop(const snode *n, const ob_value *key) {
  const char *k = ob_string_ptr(key);
  size_t klen = ob_string_len(key), lo = 0, hi = n->nprops;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const ob_value *m = n->props[mid].key;
    size_t mlen = ob_string_len(m);
    int cmp = memcmp(k, ob_string_ptr(m), klen < mlen ? klen : mlen);
    if (!cmp)
      cmp = (klen > mlen) - (klen < mlen);
    if (!cmp)
      return &n->props[mid];
    if (cmp < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

/* properties, patternProperties, additionalProperties and propertyNames for
 * one member of the object. */
static int check_member(vctx *c, const snode *n, const snode *extra, const ob_value *key,
                        const ob_value *val) {
  int ok = 1, matched = 0;
  size_t mark = c->ipath.len;
  path_push_key(c, key);
  const named_schema *p = n->nprops ? find_prop(n, key) : NULL;
  if (p) {
    matched = 1;
    ok = validate(c, p->schema, val);
  }
  for (size_t i = 0; i < n->npattern_props && (ok || c->res); i++)
    if (regex_match(c, n->pattern_props[i].re, key)) {
      matched = 1;
      ok &= validate(c, n->pattern_props[i].schema, val);
    }
  if (!matched && extra && (ok || c->res)) {
    if (extra->kind == NODE_FALSE) {
      ok = 0;
      buf_truncate(&c->ipath, mark); /* reported at the object, naming the key */
      if (c->res)
        fail_name(c, n, "additionalProperties", "property ", key, " is not allowed");
    } else {
      ok &= validate(c, extra, val);
    }
  }
  buf_truncate(&c->ipath, mark);
  if (n->property_names && (ok || c->res))
    ok &= c->res ? check_property_name_collecting(c, n, key) : validate(c, n->property_names, key);
  return ok;
}

static NOINLINE int check_object(vctx *c, const snode *n, const ob_value *v) {
  int ok = 1;
  size_t len = ob_object_len(v);
  if ((n->has & HAS_MIN_PROPS) && len < n->min_props)
    FAILED(fail_count(c, n, "minProperties", "properties", len, "fewer than", n->min_props));
  if ((n->has & HAS_MAX_PROPS) && len > n->max_props)
    FAILED(fail_count(c, n, "maxProperties", "properties", len, "more than", n->max_props));
  if (n->required) {
    size_t nreq = ob_array_len(n->required);
    for (size_t i = 0; i < nreq; i++) {
      const ob_value *name = ob_array_get(n->required, i);
      if (!ob_object_get(v, ob_string_ptr(name), ob_string_len(name)))
        FAILED(fail_name(c, n, "required", "missing property ", name, ""));
    }
  }
  const snode *extra = n->additional_props;
  while (extra && extra->ref)
    extra = extra->ref;
  if (n->nprops || n->npattern_props || extra || n->property_names) {
    for (size_t i = 0; i < len; i++) {
      ob_value *key, *val;
      ob_object_at(v, i, &key, &val);
      if (!check_member(c, n, extra, key, val))
        FAILED((void)0);
    }
  }
  for (size_t i = 0; i < n->ndeps; i++) {
    const named_schema *d = &n->deps[i];
    if (!ob_object_get(v, ob_string_ptr(d->key), ob_string_len(d->key)))
      continue;
    if (d->schema) {
      if (!validate(c, d->schema, v))
        FAILED((void)0);
      continue;
    }
    size_t nnames = ob_array_len(d->names);
    for (size_t j = 0; j < nnames; j++) {
      const ob_value *name = ob_array_get(d->names, j);
      if (!ob_object_get(v, ob_string_ptr(name), ob_string_len(name)))
        FAILED(fail_dependency(c, n, name, d->key));
    }
  }
  return ok;
}

static NOINLINE int check_applicators(vctx *c, const snode *n, const ob_value *v) {
  int ok = 1;
  if (n->enum_values) {
    size_t count = ob_array_len(n->enum_values), i = 0;
    while (i < count && !ob_equal(v, ob_array_get(n->enum_values, i)))
      i++;
    if (i == count)
      FAILED(fail_values(c, n, "enum", v, "is not one of", n->enum_values));
  }
  if (n->const_value && !ob_equal(v, n->const_value))
    FAILED(fail_values(c, n, "const", v, "is not", n->const_value));
  for (size_t i = 0; i < n->all_of.n; i++)
    if (!validate(c, n->all_of.v[i], v))
      FAILED((void)0);
  if (n->any_of.n) {
    size_t i = 0;
    while (i < n->any_of.n && !quietly(c, n->any_of.v[i], v))
      i++;
    if (i == n->any_of.n)
      FAILED(fail_none(c, n, "anyOf", n->any_of.n));
  }
  if (n->one_of.n) {
    size_t matches = 0, first = 0, second = 0;
    for (size_t i = 0; i < n->one_of.n && matches < 2; i++) {
      if (quietly(c, n->one_of.v[i], v)) {
        if (matches++ == 0)
          first = i;
        else
          second = i;
      }
    }
    if (matches == 0)
      FAILED(fail_none(c, n, "oneOf", n->one_of.n));
    else if (matches > 1)
      FAILED(fail_pair(c, n, "oneOf", "matches alternatives %zu and %zu, but exactly one must match",
                       first, second));
  }
  if (n->not_schema && quietly(c, n->not_schema, v))
    FAILED(fail_text(c, n, "not", "matches the schema it must not match"));
  if (n->if_schema) {
    const snode *branch = quietly(c, n->if_schema, v) ? n->then_schema : n->else_schema;
    if (branch && !validate(c, branch, v))
      ok = 0;
  }
  return ok;
}

static NOINLINE int fail_too_deep(vctx *c, const snode *n) {
  if (c->res && !c->too_deep_reported) {
    c->too_deep_reported = 1;
    fail_text(c, n, "depth", "the value is nested too deeply to be validated");
  }
  return 0;
}

static int validate(vctx *c, const snode *n, const ob_value *v) {
  while (n->ref) /* refs form no cycle (checked at compile time) */
    n = n->ref;
  if (n->kind != NODE_OBJECT) {
    if (n->kind == NODE_TRUE)
      return 1;
    if (c->res)
      fail_text(c, n, "false", "no value is allowed here (the schema is false)");
    return 0;
  }
#if defined(__GNUC__)
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
#else
  char marker;
  uintptr_t here = (uintptr_t)&marker;
#endif
  uintptr_t used = here < c->stack_base ? c->stack_base - here : here - c->stack_base;
  if (c->depth >= EVAL_DEPTH_MAX || used > EVAL_STACK_MAX)
    return fail_too_deep(c, n);
  c->depth++;
  int ok = 1;
  unsigned has = n->has;
  if ((has & HAS_TYPE) && !(n->types & type_bits(v))) {
    ok = 0;
    if (!c->res)
      goto done;
    fail_types(c, n, v);
  }
  switch (ob_typeof(v)) {
  case OB_INT:
  case OB_REAL:
    if (has & HAS_NUMBER_KW)
      ok &= check_number(c, n, v);
    break;
  case OB_STRING:
    if (has & HAS_STRING_KW)
      ok &= check_string(c, n, v);
    break;
  case OB_ARRAY:
    if (has & HAS_ARRAY_KW)
      ok &= check_array(c, n, v);
    break;
  case OB_OBJECT:
    if (has & HAS_OBJECT_KW)
      ok &= check_object(c, n, v);
    break;
  default: break;
  }
  if ((ok || c->res) && (has & HAS_APPLICATOR_KW))
    ok &= check_applicators(c, n, v);
done:
  c->depth--;
  return ok;
}

static int run(const snode *n, const ob_value *instance, ob_schema_result *res) {
  vctx c;
  memset(&c, 0, sizeof c);
  c.res = res;
  ob_buf_init(&c.ipath);
#if defined(__GNUC__)
  c.stack_base = (uintptr_t)__builtin_frame_address(0);
#else
  c.stack_base = (uintptr_t)&c;
#endif
  if (res) {
    res->n = res->cap = 0;
    res->fail = NULL;
  }
  int ok = validate(&c, n, instance);
  ob_buf_free(&c.ipath);
  if (c.md)
    pcre2_match_data_free(c.md);
  return ok;
}

int ob_schema_validate(const ob_schema *s, const ob_value *instance, ob_schema_result *res) {
  return run(s->root, instance, res);
}

int ob_schema_validate_at(const ob_schema *s, const char *pointer, const ob_value *instance,
                          ob_schema_result *res) {
  if (res) {
    res->n = res->cap = 0;
    res->fail = NULL;
  }
  char *decoded = NULL;
  if (pointer[0] == '#') {
    decoded = percent_decode(pointer + 1);
    if (!decoded)
      return -1;
    pointer = decoded;
  }
  /* nodes are keyed by the escaped pointer, which is canonical once its
   * escapes are known to be well formed */
  int well_formed = pointer[0] == '\0' || pointer[0] == '/';
  for (const char *p = pointer; well_formed && *p; p++)
    if (*p == '~' && p[1] != '0' && p[1] != '1')
      well_formed = 0;
  snode *n = well_formed ? map_get(s, 0, pointer, strlen(pointer)) : NULL;
  free(decoded);
  if (!n)
    return -1;
  return run(n, instance, res);
}

void ob_schema_result_free(ob_schema_result *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->n; i++) {
    free(r->fail[i].instance_path);
    free(r->fail[i].schema_path);
    free(r->fail[i].keyword);
    free(r->fail[i].message);
  }
  free(r->fail);
  r->fail = NULL;
  r->n = r->cap = 0;
}

void ob_schema_failure_write(ob_buf *b, const ob_schema_failure *f) {
  const char *where = f->instance_path[0] ? f->instance_path : "(root)";
  ob_buf_addf(b, "%s: %s: %s", where, f->keyword, f->message);
}

const ob_value *ob_schema_ref_target(const ob_value *root, const char *ref) {
  if (!ref || ref[0] != '#')
    return NULL;
  char *ptr = percent_decode(ref + 1);
  if (!ptr)
    return NULL;
  const ob_value *v = root;
  const char *p = ptr;
  ob_buf tok;
  ob_buf_init(&tok);
  if (*p && *p != '/')
    v = NULL; /* a plain-name fragment ("#foo") is an $id's, not a place */
  while (v && *p == '/') {
    const char *end = strchr(p + 1, '/');
    size_t n = end ? (size_t)(end - p - 1) : strlen(p + 1);
    if (!ptr_token_decode(p + 1, n, &tok)) {
      v = NULL;
      break;
    }
    if (ob_typeof(v) == OB_OBJECT) {
      v = ob_object_get(v, tok.data, tok.len);
    } else if (ob_typeof(v) == OB_ARRAY) {
      char *e;
      unsigned long i = strtoul(tok.data, &e, 10);
      v = tok.len && !*e && i < ob_array_len(v) ? ob_array_get(v, i) : NULL;
    } else {
      v = NULL;
    }
    p += 1 + n;
  }
  ob_buf_free(&tok);
  free(ptr);
  return v;
}
