/* ob_path.h -- references (†kind.path), paths and the || / && expressions of plan-format §2-3.
 * Parsing only: reading and writing values at a path live in ob_doc.h. */
#ifndef OB_PATH_H
#define OB_PATH_H

#include <stddef.h>
#include <stdint.h>

#include "base/ob_error.h"
#include "base/ob_value.h"

/* One step of a path. Plain segments ("user", "17") and bracketed ones
 * (["a.b@x.com"], [3]) both end up here with their decoded key text. A parsed
 * key never holds a NUL byte (\u0000 is refused); one made by hand may. */
typedef struct ob_seg {
  char *key;     /* malloc'ed, NUL-terminated; may contain NUL bytes (use keylen) */
  size_t keylen;
  int64_t index; /* >= 0 when key is a canonical array index: "0", "17" (not "01",
                    not "-1", fits in int64); -1 otherwise. On an object the
                    segment is always the key text. */
  uint32_t hash; /* ob_key_hash(key, keylen), worked out once by the parser, so that
                    reads and writes in a wide object do not hash the key again;
                    0 in a segment made by hand: hashed when used (ob_seg_hash) */
} ob_seg;

/* The hash of a segment's key (ob_value.h's ob_key_hash). */
static inline uint32_t ob_seg_hash(const ob_seg *s) {
  return s->hash ? s->hash : ob_key_hash(s->key, s->keylen);
}

/* The most segments a parsed path may have (a longer one is a syntax error):
 * far beyond any document a person or a model writes, and small enough that
 * every walk along a path, and the output message that nests a value under it,
 * stays well inside the journal's nesting limit of 2048 levels (ob_json.c). */
#define OB_PATH_MAX_SEGS 1000

typedef struct ob_path {
  size_t n; /* 0 = the whole document */
  ob_seg *segs;
} ob_path;

/* (Not "ob_ref": that name is ob_value.h's reference-count increment.) */
typedef struct ob_reference {
  const char *kind; /* kind name: [A-Za-z_][A-Za-z0-9_-]* (a shared static copy for the
                     * common kinds once compacted: ob_kind_shared) */
  ob_path path;
  char *text;   /* the part as written, trimmed (e.g. "†state.failed" or "user.summary") */
  size_t pos;   /* 0-based character offset of the part in the parsed string */
} ob_reference;

typedef struct ob_alt { /* ref && ref && ... */
  size_t n;
  ob_reference *refs;
  char *text;   /* the alternative as written, trimmed */
} ob_alt;

typedef struct ob_expr { /* alt || alt || ... */
  size_t n;
  ob_alt *alts;
  void *block; /* a parsed expression lives in this one allocation (see ob_expr_parse) */
} ob_expr;

enum {
  OB_EXPR_INPUT = 0, /* every part must be a reference beginning with † */
  OB_EXPR_OUTPUT = 1 /* a part without † is a path in kind "state" (plan-format §3) */
};

/* Parses s[0..len) as an expression. The result (alternatives, references,
 * paths, keys, texts) lives in one contiguous allocation: a plan holds one
 * expression a reference, and a run touches each once, so they had better
 * not be spread over a dozen blocks (cache misses are most of a call's cost).
 * Its paths must not be freed on their own: ob_expr_free frees it all. */
/* Parses s[0..len) as an expression. On error returns OB_ESYNTAX with
 * err->pos the 0-based character (code point) offset of the problem and
 * err->msg naming what was expected there, e.g.
 *   `empty path segment at character 7 in "†state..x"`
 * (OB_ENOMEM if memory runs out); *out is then empty. On success fills *out
 * (free with ob_expr_free).
 *
 * Segments: a plain one is a run of bytes other than . [ ] | & and ASCII
 * control characters (white space included); a bracketed one, written with no
 * dot before it, is a JSON string (["a.b@x.com"], escapes decoded, \u0000
 * refused: no object key can hold it) or, as a convenience, a canonical index: [3] is the same segment
 * as .3 (and as ["3"]); [03], [-1] and indices beyond int64 are errors.
 * Bytes >= 0x80 are taken as they are (not checked as UTF-8). A part ends at
 * white space, "|", "&" or the end; "||" and "&&" need no blanks around them. */
int ob_expr_parse(const char *s, size_t len, int mode, ob_expr *out, ob_error *err);
void ob_expr_free(ob_expr *e);

/* The kinds that nearly every call reads or writes ("state", "input", "context") have
 * one static copy each, and a parsed expression's references point at it rather than at
 * bytes of their own: the log then knows its most used document by a pointer compare,
 * without reading the kind's text (ob_log.c's doc_find; three times a call). Gives that
 * copy for s[0..len), or NULL for any other kind. */
const char *ob_kind_shared(const char *s, size_t len);

/* Parses a bare path with no kind: "user.status", "users[\"a.b\"].age", "items.0".
 * The empty string is the empty path (the document root). Same errors as above. */
int ob_path_parse(const char *s, size_t len, ob_path *out, ob_error *err);
void ob_path_free(ob_path *p);
/* Deep copy; OB_ENOMEM (dst left empty) when memory runs out. */
int ob_path_copy(ob_path *dst, const ob_path *src);

/* Appends the canonical text of a path: segments joined by '.', a segment
 * that is empty or holds '.', '[', ']', '|', '&', white space or another
 * control character (or would otherwise not re-parse to itself: a first
 * segment beginning with †) written as a bracketed JSON string: '"' and '\\'
 * escaped, control bytes as \u00XX, every other byte as it is. Parsing the
 * text gives back an equal path. The root appends "" (b->data is then a
 * string). Aborts on out of memory, like every ob_buf function. */
void ob_path_format(ob_buf *b, const ob_path *p);
/* Appends "†kind" or "†kind.path" (the canonical form of a reference; a
 * bracketed first segment follows the kind directly: †state["a b"]). */
void ob_ref_format(ob_buf *b, const char *kind, const ob_path *p);

/* 1 when a is a prefix of b (equal paths included), comparing key text. */
int ob_path_is_prefix(const ob_path *a, const ob_path *b);
/* 1 when one of a, b is a prefix of the other (plan-format §5 dependency rule). */
int ob_path_overlaps(const ob_path *a, const ob_path *b);
int ob_path_equal(const ob_path *a, const ob_path *b);

/* Parameter strings (plan-format §2): a string beginning with "††" is a literal
 * (drop the first †); one beginning with a single "†" is a reference
 * expression; anything else is plain text. "†each" followed by '.', '[' or
 * nothing is an _each call's element or index (OB_STR_EACH): the engine puts
 * the element in place in each copy (ob_each.c), so every walk that resolves
 * references keeps it as written, as it does plain text. */
enum { OB_STR_PLAIN = 0, OB_STR_LITERAL = 1, OB_STR_EXPR = 2, OB_STR_EACH = 3 };
int ob_str_classify(const char *s, size_t len);

/* A copy of v with every reference expression string replaced by what `eval`
 * makes of it (a new value) and every "††" literal unescaped; the rest is shared,
 * not copied. Params, the output template and a call's big literal values (views)
 * all go through here. */
typedef ob_value *(*ob_eval_fn)(void *ud, const ob_value *expr_text);
ob_value *ob_str_substitute(const ob_value *v, ob_eval_fn eval, void *ud);

/* v made data a plan can hold as it is: every string beginning with † (at any depth)
 * escaped as a "††" literal, which ob_str_substitute gives back unescaped. A new
 * reference: v itself when it holds no such string, else a copy of the containers on
 * the way to one (the rest shared). What a tool's arguments (MCP) and an _each call's
 * elements become in the plans made of them. */
ob_value *ob_str_escape(const ob_value *v);

#define OB_DAGGER "\xE2\x80\xA0" /* U+2020, 3 bytes in UTF-8 */
#define OB_DAGGER_LEN 3

#endif
