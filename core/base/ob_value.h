/* ob_value.h -- immutable, reference-counted JSON values with structural sharing.
 * The engine's hot data: every document in the log is built from these. */
#ifndef OB_VALUE_H
#define OB_VALUE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/ob_buf.h"
#include "base/ob_error.h"

/*
 * Ownership, in one paragraph (read it before using anything below):
 *
 *  - A function that returns `ob_value *` returns a NEW reference, except the
 *    getters (ob_array_get, ob_object_get, ob_object_at), which return BORROWED
 *    pointers, valid while the container they came from is alive and unchanged.
 *  - Update functions (ob_array_push, ob_array_set, ob_object_set) CONSUME
 *    their container and value arguments and return a new reference to the
 *    updated container. When the container's reference count is 1 the update
 *    happens in place (nobody else can see it); otherwise only the path to the
 *    changed slot is copied and the rest is shared. To keep the old version,
 *    pass ob_ref(c).
 *  - Every other argument is borrowed.
 *  - null, true, false, the empty array and the empty object are immortal:
 *    ob_ref/ob_unref on them are no-ops.
 *  - Reference counts are not atomic: a value belongs to one thread at a time.
 *  - On allocation failure the process aborts (as Lua's default allocator
 *    does for the core structures); no function returns NULL for ENOMEM.
 *
 * Costs: ob_array_get/set/push are O(log32 n) (a persistent vector: 32-way
 * trie plus tail); ob_object_get/set are O(log32 n) for wide objects (a hash
 * array mapped trie keyed by the key's hash, plus a persistent vector of keys
 * that keeps insertion order) and O(n) with n <= 8 for small flat objects.
 */

typedef enum ob_type {
  OB_NULL,
  OB_FALSE,
  OB_TRUE,
  OB_INT,
  OB_REAL,
  OB_STRING,
  OB_ARRAY,
  OB_OBJECT
} ob_type;

typedef struct ob_value ob_value;

ob_type ob_typeof(const ob_value *v);
const char *ob_type_name(ob_type t); /* "null", "boolean", "integer", "number", "string", "array", "object" */

ob_value *ob_ref(ob_value *v); /* returns v; NULL is allowed */
void ob_unref(ob_value *v);    /* NULL is allowed */

/* Nesting depth: 0 for scalars, 1 for a container of scalars, ... For a
 * container updated in place or by path copy it is an upper bound that never
 * shrinks: safe to compare against OB_MAX_DEPTH before recursing. */
uint32_t ob_depth(const ob_value *v);

/* --- scalars --- */
ob_value *ob_null(void);
ob_value *ob_true(void);
ob_value *ob_false(void);
ob_value *ob_bool(int b);
ob_value *ob_int(int64_t i);
ob_value *ob_real(double d); /* d must be finite */
ob_value *ob_string(const char *s, size_t len); /* copies; s need not end in NUL */
/* ob_string for a length a plan or tool chose: NULL when out of memory or when it
 * would pass the memory account's limit (ob_mem.h), an error of the call. */
ob_value *ob_string_try(const char *s, size_t len);
ob_value *ob_cstring(const char *s);

int ob_is_number(const ob_value *v); /* OB_INT or OB_REAL */
int64_t ob_int_value(const ob_value *v);
double ob_real_value(const ob_value *v);   /* OB_REAL, or an OB_INT converted */
const char *ob_string_ptr(const ob_value *v); /* always NUL-terminated, may hold NULs */
size_t ob_string_len(const ob_value *v);
/* A hash of the string's bytes (computed once, then kept with the string). */
uint32_t ob_string_hash(ob_value *v);

/* --- arrays (persistent vector) --- */
ob_value *ob_array(void); /* the empty array */
size_t ob_array_len(const ob_value *a);
ob_value *ob_array_get(const ob_value *a, size_t i); /* borrowed; i < len */
ob_value *ob_array_push(ob_value *a, ob_value *v);   /* consumes a, v */
ob_value *ob_array_set(ob_value *a, size_t i, ob_value *v); /* consumes a, v; i < len */

/* --- objects (insertion-ordered persistent map) --- */
ob_value *ob_object(void); /* the empty object */
size_t ob_object_len(const ob_value *o);
ob_value *ob_object_get(const ob_value *o, const char *key, size_t keylen); /* borrowed or NULL */
/* Existing keys keep their position; new keys go last. Consumes o and v. */
ob_value *ob_object_set(ob_value *o, const char *key, size_t keylen, ob_value *v);
/* Same, with the key given as an OB_STRING value (borrowed): saves a copy. */
ob_value *ob_object_setv(ob_value *o, ob_value *key, ob_value *v);
/* Position of key in insertion order, or -1: one lookup, after which the
 * position-based calls below need no hashing at all. */
long ob_object_index(const ob_value *o, const char *key, size_t keylen);
/* Replaces the value at position i (i < len). Consumes o and v. */
ob_value *ob_object_set_at(ob_value *o, size_t i, ob_value *v);
/* The slot of the value at position i of o, for o's only owner to change in place
 * (o unshared and small: at most 8 keys); NULL otherwise. After changing it, call
 * ob_object_slot_done (o's nesting depth takes the new value into account). */
ob_value **ob_object_slot(ob_value *o, size_t i);
void ob_object_slot_done(ob_value *o, size_t i);
/* Adds a key known to be absent (not checked). Consumes o and v. */
ob_value *ob_object_add(ob_value *o, const char *key, size_t keylen, ob_value *v);

/* i-th entry in insertion order, i < len. Borrowed pointers. O(log32 n). */
void ob_object_at(const ob_value *o, size_t i, ob_value **key, ob_value **val);

/* Cache hints for a scheduler that knows what it reads next (no effect on values):
 * ob_prefetch asks for v's first bytes; ob_prefetch_members, once v itself is in
 * the cache, for the keys and values of a small object or the elements of a short
 * array. NULL is allowed. */
void ob_prefetch(const ob_value *v);
/* Asks for n cache lines (64 bytes) from p on; NULL: none. Reads nothing. */
static inline void ob_prefetch_lines(const void *p, int n) {
  for (int k = 0; p && k < n; k++)
    __builtin_prefetch((const char *)p + 64 * k);
}
void ob_prefetch_members(const ob_value *v);
/* For a wide object o (others: nothing), the path of the key with this hash
 * (ob_key_hash) in its index:
 * reads the first `levels` nodes of it (cached by an earlier call with
 * levels - 1, or near the root) and asks for the whole of the next. */
void ob_prefetch_key(const ob_value *o, uint32_t hash, int levels);
/* The hash objects index their keys by (a wide object's hash trie). Callers that
 * look the same key up often keep it and use the _h forms below, which take it. */
uint32_t ob_key_hash(const char *key, size_t keylen);
ob_value *ob_object_get_h(const ob_value *o, const char *key, size_t keylen, uint32_t hash);
long ob_object_index_h(const ob_value *o, const char *key, size_t keylen, uint32_t hash);
/* ob_object_add for a key whose hash is known (the new key string keeps it). */
ob_value *ob_object_add_h(ob_value *o, const char *key, size_t keylen, uint32_t hash,
                          ob_value *v);

/* Iterates an object in insertion order (amortised O(1) a step for wide ones).
 *   ob_object_iter it; ob_value *k, *v;
 *   ob_object_iter_init(&it, o);
 *   while (ob_object_iter_next(&it, &k, &v)) ...                          */
typedef struct ob_object_iter {
  const ob_value *obj;
  size_t i;
  /* wide objects: the vectors' leaves holding entries [base, end) (internal) */
  void *const *keys, *const *vals;
  size_t base, end;
} ob_object_iter;
void ob_object_iter_init(ob_object_iter *it, const ob_value *o);
int ob_object_iter_next(ob_object_iter *it, ob_value **key, ob_value **val);
/* Moves the iterator so that its next step gives the entry at position i (i <= len). */
void ob_object_iter_seek(ob_object_iter *it, size_t i);

/* --- comparison --- */
/* JSON equality: numbers compare by value (1 == 1.0), objects ignore key order. */
int ob_equal(const ob_value *a, const ob_value *b);
/* Exact identity of the JSON text: like ob_equal but 1 != 1.0 and key order matters. */
int ob_identical(const ob_value *a, const ob_value *b);

/* --- JSON text (ob_json.c) --- */
/* Parses JSON text (any value at the top). NULL on error with err filled
 * (OB_EJSON, pos = line). Integers stay integers, key order is kept,
 * \u0000 is allowed in strings. */
ob_value *ob_json_parse(const char *text, size_t len, ob_error *err);
/* Reads and parses a whole file ("-": standard input). */
ob_value *ob_json_parse_file(const char *path, ob_error *err);

enum {
  OB_JSON_COMPACT = 0,
  OB_JSON_PRETTY = 1 /* two-space indent, one member a line */
};
/* Prints v as JSON. Returns a malloc'ed NUL-terminated string (free with free())
 * and its length in *len when len is not NULL. Reals always print with a '.'
 * or an exponent, in the shortest form that reads back to the same double. */
char *ob_json_print(const ob_value *v, int flags, size_t *len);

/* Appends v as JSON to b. */
void ob_json_write(ob_buf *b, const ob_value *v, int flags);
/* Appends s (len bytes) to b as a JSON string, quotes included. */
void ob_json_write_string(ob_buf *b, const char *s, size_t len);
/* The length of v's compact JSON text, near enough (a number's digits, a string's
 * escapes) and counted only until it passes cap: what --max-output is checked by. */
size_t ob_json_size(const ob_value *v, size_t cap);

#endif
