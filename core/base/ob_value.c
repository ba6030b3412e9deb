/* ob_value.c -- immutable, reference-counted JSON values with structural sharing.
 * Scalars, a persistent vector for arrays, an ordered hash trie for objects.
 *
 * Design
 * ------
 * Every document in the log is a tree of these values, and every write to the
 * log produces a new version of one document. Old versions stay readable (time
 * travel), so a write must copy only the path it touches, and a write into a
 * wide object (100,000 keys) must not copy the keys.
 *
 * Arrays are persistent vectors (as in Clojure): a 32-way trie of full
 * 32-element leaves plus a tail of up to 32 elements. get/set are
 * O(log32 n) (at most 7 levels for 2^32 elements); push is O(1) amortised:
 * it copies the tail (small) and, every 32 pushes, links the full tail into
 * the trie with a path copy.
 *
 * Objects keep their keys in insertion order. Up to SMALL_MAX keys they are a
 * flat array of (key, value) entries, scanned linearly: the common case, and
 * the cheapest. Above that an object is three persistent structures:
 *   keys   - a persistent vector of key strings, in insertion order;
 *   vals   - a persistent vector of values, parallel to keys;
 *   index  - a hash array mapped trie (HAMT) from key to its position.
 * There is no delete (the log is append-only, plan-format §4), so a key's position
 * never changes: overwriting a key touches only `vals` (one path copy), and a
 * new key pushes onto `keys` and `vals` and inserts into `index`. Lookup is a
 * HAMT walk (one 5-bit hash slice a level) then a vector get: O(log32 n).
 *
 * Ownership: update functions consume their arguments. When the caller holds
 * the only reference (rc == 1) the update happens in place, and so does any
 * node below it that is itself unshared; everything shared is path-copied.
 * This makes building a value (parsing, converting from Lua) as cheap as with
 * mutable structures, while versions kept by the log stay untouched.
 *
 * Freeing a deeply nested value would recurse once per level; ob_unref
 * instead defers nested frees to a per-thread work list, so any depth is
 * freed in constant stack.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_hash.h"
#include "base/ob_mem.h"
#include "base/ob_value.h"

#define IMMORTAL UINT32_MAX
#define SMALL_MAX 8
#define PV_BITS 5
#define PV_WIDTH 32
#define PV_MASK 31

struct ob_value {
  uint32_t rc;
  uint8_t type;
  uint8_t wide;   /* objects: 1 when in the keys/vals/index form */
  uint8_t hashed; /* strings: hash holds the hash of the bytes */
};

typedef struct int_value { ob_value h; int64_t i; } int_value;
typedef struct real_value { ob_value h; double d; } real_value;
/* A string's header is 16 bytes (a key of a few bytes fits a 32-byte block of
 * malloc's, not 48). A length of 4 GiB or more does not fit len: it is then
 * LEN_LONG, and the length is a size_t at the start of s, the bytes after it. */
typedef struct string_value {
  ob_value h;
  uint32_t hash;
  uint32_t len;
  char s[];
} string_value;

#ifndef OB_TEST_LEN_LONG
#define LEN_LONG UINT32_MAX
#else /* a test build: "long" strings from a few bytes on (spec/c/test_value_long_strings.c) */
#define LEN_LONG OB_TEST_LEN_LONG
#endif

static inline size_t str_len(const string_value *v) {
  size_t n = v->len;
  if (n == LEN_LONG)
    memcpy(&n, v->s, sizeof n);
  return n;
}

static inline const char *str_ptr(const string_value *v) {
  return v->len == LEN_LONG ? v->s + sizeof(size_t) : v->s;
}

/* --- persistent vector ------------------------------------------------- */

/* A trie node or a tail. Leaves and tails hold ob_value pointers, inner
 * nodes hold child nodes. `n` counts used slots, `cap` allocated ones. */
typedef struct pv_node {
  uint32_t rc;
  uint16_t n, cap;
  void *slot[];
} pv_node;

typedef struct pvec {
  size_t count;
  uint32_t shift;   /* root level: 0 = the root is a leaf */
  pv_node *root;    /* NULL while every element is in the tail */
  pv_node *tail;    /* NULL when count == 0 */
} pvec;

typedef struct array_value {
  ob_value h;
  uint32_t depth;
  pvec v;
} array_value;

/* --- objects ----------------------------------------------------------- */

typedef struct ob_entry { ob_value *key, *val; } ob_entry;

/* HAMT node. datamap marks slots holding a key (with its position), nodemap
 * slots holding a child. Keys come first in `slot`, two words each (key,
 * position), then children. A collision node (all 32 hash bits equal) keeps
 * an unordered list of (key, position) pairs in slot, with ncoll of them. */
typedef struct hnode {
  uint32_t rc;
  uint32_t datamap, nodemap;
  uint32_t ncoll; /* > 0 only in collision nodes */
  void *slot[];
} hnode;

/* The wide form's three structures. They lie where a small object's entries
 * would: an object is one form or the other, so a small one carries no room
 * for them (a call as written, 3 keys, is 72 bytes: two cache lines, not 144
 * bytes and three). */
typedef struct wide_part {
  pvec keys, vals;
  hnode *index;
} wide_part;

typedef struct object_value {
  ob_value h;
  uint32_t depth;
  uint32_t n;
  uint32_t cap; /* small form: room for cap entries */
  ob_entry e[]; /* small form: its entries; wide form: one wide_part (wide_of) */
} object_value;

static inline wide_part *wide_of(const object_value *o) {
  return (wide_part *)(void *)((char *)o + offsetof(object_value, e));
}

static ob_value null_v = {IMMORTAL, OB_NULL, 0, 0};
static ob_value true_v = {IMMORTAL, OB_TRUE, 0, 0};
static ob_value false_v = {IMMORTAL, OB_FALSE, 0, 0};
static array_value empty_array_v = {{IMMORTAL, OB_ARRAY, 0, 0}, 1, {0, 0, NULL, NULL}};
static object_value empty_object_v = {{IMMORTAL, OB_OBJECT, 0, 0}, 1, 0, 0};

/* --- reference counting and freeing ------------------------------------ */

static void value_free(ob_value *v);

/* Nested frees go to a work list instead of the C stack (see top comment). */
static _Thread_local struct {
  int active;
  size_t n, cap;
  ob_value **items;
  ob_value *inline_items[64];
} freeing;

ob_value *ob_ref(ob_value *v) {
  if (v && v->rc != IMMORTAL)
    v->rc++;
  return v;
}

void ob_unref(ob_value *v) {
  if (!v || v->rc == IMMORTAL || --v->rc)
    return;
  if (freeing.active) {
    if (freeing.n == freeing.cap) {
      size_t cap = freeing.cap * 2;
      if (freeing.items == freeing.inline_items) {
        ob_value **p = ob_xmalloc(cap * sizeof *p);
        memcpy(p, freeing.items, freeing.n * sizeof *p);
        freeing.items = p;
      } else {
        freeing.items = ob_xrealloc(freeing.items, cap * sizeof *freeing.items);
      }
      freeing.cap = cap;
    }
    freeing.items[freeing.n++] = v;
    return;
  }
  freeing.active = 1;
  freeing.items = freeing.inline_items;
  freeing.cap = 64;
  freeing.n = 0;
  value_free(v);
  while (freeing.n)
    value_free(freeing.items[--freeing.n]);
  if (freeing.items != freeing.inline_items)
    free(freeing.items);
  freeing.items = NULL;
  freeing.active = 0;
}

ob_type ob_typeof(const ob_value *v) { return (ob_type)v->type; }

const char *ob_type_name(ob_type t) {
  switch (t) {
  case OB_NULL: return "null";
  case OB_FALSE:
  case OB_TRUE: return "boolean";
  case OB_INT: return "integer";
  case OB_REAL: return "number";
  case OB_STRING: return "string";
  case OB_ARRAY: return "array";
  case OB_OBJECT: return "object";
  }
  return "?";
}

uint32_t ob_depth(const ob_value *v) {
  if (v->type == OB_ARRAY)
    return ((const array_value *)v)->depth;
  if (v->type == OB_OBJECT)
    return ((const object_value *)v)->depth;
  return 0;
}

static uint32_t depth_with(uint32_t depth, const ob_value *child) {
  uint32_t d = ob_depth(child) + 1;
  return d > depth ? d : depth;
}

/* --- scalars ----------------------------------------------------------- */

ob_value *ob_null(void) { return &null_v; }
ob_value *ob_true(void) { return &true_v; }
ob_value *ob_false(void) { return &false_v; }
ob_value *ob_bool(int b) { return b ? &true_v : &false_v; }

/* Small integers, made once: counts, flags and indices are most of a plan's
 * integers, and a tool returning one then allocates nothing; a join reading
 * thousands of them reads one cache line, not one each (-128 to 895). */
#define SMALL_INT_MIN (-128)
#define I1(n) {{IMMORTAL, OB_INT, 0, 0}, (n)}
#define I4(n) I1(n), I1((n) + 1), I1((n) + 2), I1((n) + 3)
#define I16(n) I4(n), I4((n) + 4), I4((n) + 8), I4((n) + 12)
#define I64(n) I16(n), I16((n) + 16), I16((n) + 32), I16((n) + 48)
#define I256(n) I64(n), I64((n) + 64), I64((n) + 128), I64((n) + 192)
static int_value small_ints[] = {I256(SMALL_INT_MIN), I256(SMALL_INT_MIN + 256),
                                 I256(SMALL_INT_MIN + 512), I256(SMALL_INT_MIN + 768)};
#undef I1
#undef I4
#undef I16
#undef I64
#undef I256

ob_value *ob_int(int64_t i) {
  if (i >= SMALL_INT_MIN && i < SMALL_INT_MIN + (int64_t)(sizeof small_ints / sizeof *small_ints))
    return &small_ints[i - SMALL_INT_MIN].h;
  int_value *v = ob_mem_alloc(sizeof *v);
  v->h = (ob_value){1, OB_INT, 0, 0};
  v->i = i;
  return &v->h;
}

ob_value *ob_real(double d) {
  real_value *v = ob_mem_alloc(sizeof *v);
  v->h = (ob_value){1, OB_REAL, 0, 0};
  v->d = d;
  return &v->h;
}

/* A string of len bytes, not filled: counted; NULL when out of memory, or
 * (checked) when it would pass the account's limit. */
static string_value *string_alloc(size_t len, int checked) {
  size_t head = len < LEN_LONG ? 0 : sizeof(size_t);
  if (len > SIZE_MAX / 2)
    return NULL; /* no string is that big: a length gone wrong */
  size_t n = sizeof(string_value) + head + len + 1;
  string_value *v = checked ? ob_mem_try_alloc(n) : ob_mem_counted(malloc(n));
  if (!v)
    return NULL;
  v->h = (ob_value){1, OB_STRING, 0, 0};
  v->hash = 0;
  v->len = head ? LEN_LONG : (uint32_t)len;
  if (head)
    memcpy(v->s, &len, sizeof len);
  return v;
}

static ob_value *string_fill(string_value *v, const char *s, size_t len) {
  char *b = v->s + (v->len == LEN_LONG ? sizeof(size_t) : 0);
  if (len)
    memcpy(b, s, len);
  b[len] = '\0';
  return &v->h;
}

ob_value *ob_string(const char *s, size_t len) {
  string_value *v = string_alloc(len, 0);
  if (!v)
    abort(); /* a copy of what the engine or a parsed file holds already (see ob_mem.h) */
  return string_fill(v, s, len);
}

ob_value *ob_string_try(const char *s, size_t len) {
  string_value *v = string_alloc(len, 1);
  return v ? string_fill(v, s, len) : NULL;
}

ob_value *ob_cstring(const char *s) { return ob_string(s, strlen(s)); }

int ob_is_number(const ob_value *v) { return v->type == OB_INT || v->type == OB_REAL; }

int64_t ob_int_value(const ob_value *v) {
  return v->type == OB_INT ? ((const int_value *)v)->i : (int64_t)((const real_value *)v)->d;
}

double ob_real_value(const ob_value *v) {
  return v->type == OB_REAL ? ((const real_value *)v)->d : (double)((const int_value *)v)->i;
}

const char *ob_string_ptr(const ob_value *v) { return str_ptr((const string_value *)v); }
size_t ob_string_len(const ob_value *v) { return str_len((const string_value *)v); }

/* ob_hash32: all 32 bits usable 5 at a time. */
static uint32_t hash_bytes(const char *s, size_t len) {
  uint32_t h = ob_hash32(s, len);
#ifdef OB_TEST_WEAK_HASH /* a test build that forces collisions, to exercise collision nodes */
  h &= OB_TEST_WEAK_HASH;
#endif
  return h;
}

static uint32_t string_hash(ob_value *key) {
  string_value *s = (string_value *)key;
  if (!s->h.hashed) {
    s->hash = hash_bytes(str_ptr(s), str_len(s));
    s->h.hashed = 1;
  }
  return s->hash;
}

uint32_t ob_string_hash(ob_value *s) { return string_hash(s); }

/* A lookup of 4 GiB or more: rare, and kept out of key_is so that key_is stays inlined
 * (measured: with it inside, GCC called key_is, 64 instructions more a fanout call). */
__attribute__((noinline, cold)) static int key_is_long(const string_value *k, const char *s,
                                                      size_t len) {
  return str_len(k) == len && memcmp(str_ptr(k), s, len) == 0;
}

/* Keys are mostly short, and two that differ mostly do at their first bytes: a byte loop
 * answers before a call to memcmp would have started (fan-out's small objects, h_find's
 * hash-equal keys). */
static inline int key_is(const ob_value *key, const char *s, size_t len) {
  const string_value *k = (const string_value *)key;
  if (len >= LEN_LONG) /* k->len alone cannot tell (see string_value) */
    return key_is_long(k, s, len);
  if (k->len != len) /* a long k's LEN_LONG included */
    return 0;
  if (len > 16)
    return memcmp(k->s, s, len) == 0;
  for (size_t i = 0; i < len; i++)
    if (k->s[i] != s[i])
      return 0;
  return 1;
}

/* --- persistent vector internals --------------------------------------- */

static pv_node *pv_alloc(uint16_t cap) {
  pv_node *n = ob_mem_alloc(sizeof *n + cap * sizeof(void *));
  n->rc = 1;
  n->n = 0;
  n->cap = cap;
  return n;
}

/* Drops one reference to a node; `level` 0 is a leaf (its slots are values). */
static void pv_release(pv_node *n, uint32_t level) {
  if (!n || --n->rc)
    return;
  for (uint16_t i = 0; i < n->n; i++) {
    if (level == 0)
      ob_unref(n->slot[i]);
    else
      pv_release(n->slot[i], level - PV_BITS);
  }
  ob_mem_free(n);
}

/* A node the caller may change: itself when unshared, else a copy whose
 * children are now shared by both (one reference to `n` is given up). */
static pv_node *pv_editable(pv_node *n, uint32_t level, uint16_t cap) {
  if (n->rc == 1 && n->cap >= cap)
    return n;
  if (cap < n->n)
    cap = n->n;
  pv_node *c = pv_alloc(cap);
  c->n = n->n;
  memcpy(c->slot, n->slot, n->n * sizeof(void *));
  if (n->rc == 1) { /* unshared but too small: move the children */
    ob_mem_free(n);
    return c;
  }
  for (uint16_t i = 0; i < c->n; i++) {
    if (level == 0)
      ob_ref(c->slot[i]);
    else
      ((pv_node *)c->slot[i])->rc++;
  }
  n->rc--;
  return c;
}

static size_t pv_tailoff(const pvec *v) { return v->tail ? v->count - v->tail->n : 0; }

static void *pv_get(const pvec *v, size_t i) {
  size_t off = pv_tailoff(v);
  if (i >= off)
    return v->tail->slot[i - off];
  const pv_node *n = v->root;
  for (uint32_t level = v->shift; level > 0; level -= PV_BITS)
    n = n->slot[(i >> level) & PV_MASK];
  return n->slot[i & PV_MASK];
}

/* The slots of the leaf (or tail) holding element i: elements [*base, *end). */
static void *const *pv_leaf(const pvec *v, size_t i, size_t *base, size_t *end) {
  size_t off = pv_tailoff(v);
  if (i >= off) {
    *base = off;
    *end = v->count;
    return v->tail->slot;
  }
  const pv_node *n = v->root;
  for (uint32_t level = v->shift; level > 0; level -= PV_BITS)
    n = n->slot[(i >> level) & PV_MASK];
  *base = i & ~(size_t)PV_MASK;
  *end = *base + PV_WIDTH;
  return n->slot;
}

static pv_node *pv_new_path(uint32_t level, pv_node *leaf) {
  if (level == 0)
    return leaf;
  pv_node *n = pv_alloc(PV_WIDTH);
  n->n = 1;
  n->slot[0] = pv_new_path(level - PV_BITS, leaf);
  return n;
}

/* Puts a full leaf at element offset idx into the subtree `n` at `level`. */
static pv_node *pv_push_leaf(pv_node *n, uint32_t level, size_t idx, pv_node *leaf) {
  n = pv_editable(n, level, PV_WIDTH);
  uint32_t sub = (idx >> level) & PV_MASK;
  if (level == PV_BITS) {
    n->slot[sub] = leaf;
  } else if (sub < n->n) {
    n->slot[sub] = pv_push_leaf(n->slot[sub], level - PV_BITS, idx, leaf);
    return n;
  } else {
    n->slot[sub] = pv_new_path(level - PV_BITS, leaf);
  }
  n->n = (uint16_t)(sub + 1);
  return n;
}

/* The vector header is owned by the caller; `x` is consumed. */
static void pv_push(pvec *v, void *x) {
  if (v->tail && v->tail->n < PV_WIDTH) {
    uint16_t want = v->tail->n + 1;
    if (want > v->tail->cap || v->tail->rc != 1) {
      uint16_t cap = v->tail->n * 2;
      want = cap < 4 ? 4 : cap > PV_WIDTH ? PV_WIDTH : cap;
    }
    v->tail = pv_editable(v->tail, 0, want);
    v->tail->slot[v->tail->n++] = x;
    v->count++;
    return;
  }
  if (v->tail) { /* the tail is full: move it into the trie */
    size_t off = pv_tailoff(v);
    pv_node *leaf = v->tail;
    if (!v->root) {
      v->root = leaf;
      v->shift = 0;
    } else if ((off >> PV_BITS) >= ((size_t)1 << v->shift)) {
      pv_node *r = pv_alloc(PV_WIDTH); /* the trie is full: grow a level */
      r->n = 2;
      r->slot[0] = v->root;
      r->slot[1] = pv_new_path(v->shift, leaf);
      v->root = r;
      v->shift += PV_BITS;
    } else {
      v->root = pv_push_leaf(v->root, v->shift, off, leaf);
    }
  }
  v->tail = pv_alloc(v->count < PV_WIDTH ? 4 : PV_WIDTH);
  v->tail->n = 1;
  v->tail->slot[0] = x;
  v->count++;
}

static pv_node *pv_set_rec(pv_node *n, uint32_t level, size_t i, void *x) {
  n = pv_editable(n, level, n->n);
  uint32_t sub = (i >> level) & PV_MASK;
  if (level == 0) {
    ob_unref(n->slot[sub]);
    n->slot[sub] = x;
  } else {
    n->slot[sub] = pv_set_rec(n->slot[sub], level - PV_BITS, i, x);
  }
  return n;
}

/* Replaces element i (consuming x, releasing the old element). */
static void pv_set(pvec *v, size_t i, void *x) {
  size_t off = pv_tailoff(v);
  if (i >= off) {
    v->tail = pv_editable(v->tail, 0, v->tail->n);
    ob_unref(v->tail->slot[i - off]);
    v->tail->slot[i - off] = x;
  } else {
    v->root = pv_set_rec(v->root, v->shift, i, x);
  }
}

static void pv_share(const pvec *v) {
  if (v->root)
    v->root->rc++;
  if (v->tail)
    v->tail->rc++;
}

static void pv_release_all(pvec *v) {
  pv_release(v->root, v->shift);
  pv_release(v->tail, 0);
}

/* --- arrays -------------------------------------------------------------- */

ob_value *ob_array(void) { return &empty_array_v.h; }

size_t ob_array_len(const ob_value *a) { return ((const array_value *)a)->v.count; }

ob_value *ob_array_get(const ob_value *a, size_t i) {
  return pv_get(&((const array_value *)a)->v, i);
}

/* An array value the caller may change (consumes one reference to a). */
static array_value *array_editable(ob_value *a) {
  array_value *src = (array_value *)a;
  if (a->rc == 1)
    return src;
  array_value *c = ob_mem_alloc(sizeof *c);
  c->h = (ob_value){1, OB_ARRAY, 0, 0};
  c->depth = src->depth;
  c->v = src->v;
  pv_share(&c->v);
  ob_unref(a);
  return c;
}

ob_value *ob_array_push(ob_value *a, ob_value *v) {
  array_value *arr = array_editable(a);
  arr->depth = depth_with(arr->depth, v);
  pv_push(&arr->v, v);
  return &arr->h;
}

ob_value *ob_array_set(ob_value *a, size_t i, ob_value *v) {
  array_value *arr = array_editable(a);
  arr->depth = depth_with(arr->depth, v);
  pv_set(&arr->v, i, v);
  return &arr->h;
}

/* --- the hash trie (key -> position) ------------------------------------- */

/* Bit count. The x86-64 baseline has no popcnt instruction (and GCC's builtin
 * is then a libgcc call), so on x86-64 the instruction is used where the CPU
 * has it (all since 2008-2011), asked once through GCC's CPU model, and the
 * bit trick below otherwise. Measured on chain 100000: 4.5% fewer
 * instructions a call (the trie's walks count bits at every level). */
static inline unsigned popcount(uint32_t x) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__POPCNT__)
  if (__builtin_cpu_supports("popcnt")) {
    uint32_t r;
    __asm__("popcnt %1, %0" : "=r"(r) : "r"(x) : "cc");
    return r;
  }
#elif defined(__POPCNT__)
  return (unsigned)__builtin_popcount(x);
#endif
  x = x - ((x >> 1) & 0x55555555u);
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  x = (x + (x >> 4)) & 0x0f0f0f0fu;
  return (x * 0x01010101u) >> 24;
}

/* Slots allocated for a node using `words` of them: a power of two (at least
 * 8), so that a node growing in place, one key at a time, is reallocated
 * only when it doubles, not at every insert (measured: malloc and realloc
 * were a tenth of a run writing 100,000 keys). At least 8, not 4: the
 * leaves of an object of 100,000 keys hold about 3 keys (6 words), so with
 * 4 a third of the inserts moved their leaf (1-4% of chain and fanout 100000,
 * four paired sets; 32 bytes more a leaf, about 11 a key). */
static size_t h_room(size_t words) {
  size_t room = 8;
  while (room < words)
    room *= 2;
  return room;
}

static hnode *h_alloc(uint32_t datamap, uint32_t nodemap, uint32_t ncoll) {
  size_t words = ncoll ? 2 * (size_t)ncoll : 2 * popcount(datamap) + popcount(nodemap);
  hnode *n = ob_mem_alloc(sizeof *n + h_room(words) * sizeof(void *));
  n->rc = 1;
  n->datamap = datamap;
  n->nodemap = nodemap;
  n->ncoll = ncoll;
  return n;
}

static size_t h_words(const hnode *n) {
  return n->ncoll ? 2 * (size_t)n->ncoll : 2 * popcount(n->datamap) + popcount(n->nodemap);
}

static void h_release(hnode *n) {
  if (!n || --n->rc)
    return;
  size_t nkeys = n->ncoll ? n->ncoll : popcount(n->datamap);
  for (size_t i = 0; i < nkeys; i++)
    ob_unref(n->slot[2 * i]);
  for (size_t i = 2 * nkeys; i < h_words(n); i++)
    h_release(n->slot[i]);
  ob_mem_free(n);
}

/* A copy of n with room for a different layout is made by the callers; this
 * one only handles "same layout, maybe shared". */
static hnode *h_editable(hnode *n) {
  if (n->rc == 1)
    return n;
  size_t words = h_words(n);
  hnode *c = h_alloc(n->datamap, n->nodemap, n->ncoll);
  memcpy(c->slot, n->slot, words * sizeof(void *));
  size_t nkeys = n->ncoll ? n->ncoll : popcount(n->datamap);
  for (size_t i = 0; i < nkeys; i++)
    ob_ref(c->slot[2 * i]);
  for (size_t i = 2 * nkeys; i < words; i++)
    ((hnode *)c->slot[i])->rc++;
  n->rc--;
  return c;
}

/* The word kept beside each key: its hash and its position, so that a
 * lookup or an insert meeting another key at the end of its path knows it
 * is another key without reading that key's string (a cache miss in a wide
 * object). Positions fit 32 bits, as an object counts its keys in 32 bits. */
static void *h_word(uint32_t hash, size_t pos) {
  return (void *)(uintptr_t)((uint64_t)hash << 32 | (uint32_t)pos);
}
static uint32_t h_word_hash(const void *w) { return (uint32_t)((uintptr_t)w >> 32); }
static long h_word_pos(const void *w) { return (long)(uint32_t)(uintptr_t)w; }

/* The slot of n holding the child for `bit` (set in n->nodemap): keys first, two words each. */
static unsigned h_child_at(const hnode *n, uint32_t bit) {
  return 2 * popcount(n->datamap) + popcount(n->nodemap & (bit - 1));
}

/* Position of the key, or -1. */
static long h_find(const hnode *n, uint32_t hash, const char *key, size_t len) {
  for (uint32_t shift = 0; n; shift += PV_BITS) {
    if (n->ncoll) {
      for (uint32_t i = 0; i < n->ncoll; i++)
        if (key_is(n->slot[2 * i], key, len))
          return h_word_pos(n->slot[2 * i + 1]);
      return -1;
    }
    uint32_t bit = 1u << ((hash >> shift) & PV_MASK);
    if (n->datamap & bit) {
      unsigned i = popcount(n->datamap & (bit - 1));
      const void *w = n->slot[2 * i + 1];
      return h_word_hash(w) == hash && key_is(n->slot[2 * i], key, len) ? h_word_pos(w) : -1;
    }
    if (!(n->nodemap & bit))
      return -1;
    n = n->slot[h_child_at(n, bit)];
  }
  return -1;
}

/* A node holding two keys that collided at the level above. */
static hnode *h_pair(ob_value *k1, uint32_t h1, void *p1, ob_value *k2, uint32_t h2, void *p2,
                     uint32_t shift) {
  if (shift >= 32) {
    hnode *n = h_alloc(0, 0, 2);
    n->slot[0] = k1, n->slot[1] = p1, n->slot[2] = k2, n->slot[3] = p2;
    return n;
  }
  uint32_t b1 = (h1 >> shift) & PV_MASK, b2 = (h2 >> shift) & PV_MASK;
  if (b1 == b2) {
    hnode *n = h_alloc(0, 1u << b1, 0);
    n->slot[0] = h_pair(k1, h1, p1, k2, h2, p2, shift + PV_BITS);
    return n;
  }
  hnode *n = h_alloc((1u << b1) | (1u << b2), 0, 0);
  int first = b1 < b2 ? 0 : 2;
  n->slot[first] = k1, n->slot[first + 1] = p1;
  n->slot[2 - first] = k2, n->slot[3 - first] = p2;
  return n;
}

/* Inserts a key known to be absent (consumes key and one reference to n). */
static hnode *h_insert(hnode *n, ob_value *key, uint32_t hash, size_t pos, uint32_t shift) {
  void *p = h_word(hash, pos);
  if (n->ncoll) {
    hnode *c = h_alloc(0, 0, n->ncoll + 1);
    memcpy(c->slot, n->slot, 2 * n->ncoll * sizeof(void *));
    c->slot[2 * n->ncoll] = key;
    c->slot[2 * n->ncoll + 1] = p;
    for (uint32_t i = 0; i < n->ncoll; i++)
      ob_ref(c->slot[2 * i]);
    h_release(n);
    return c;
  }
  uint32_t bit = 1u << ((hash >> shift) & PV_MASK);
  unsigned ndata = popcount(n->datamap);
  if (n->nodemap & bit) {
    n = h_editable(n);
    unsigned at = h_child_at(n, bit);
    n->slot[at] = h_insert(n->slot[at], key, hash, pos, shift + PV_BITS);
    return n;
  }
  unsigned di = popcount(n->datamap & (bit - 1));
  int shared = n->rc > 1;
  if (!shared && !(n->datamap & bit)) { /* ours, and a free slot: grow in place */
    size_t words = h_words(n);
    if (words + 2 > h_room(words))
      n = ob_mem_realloc(n, sizeof *n + h_room(words + 2) * sizeof(void *));
    memmove(n->slot + 2 * di + 2, n->slot + 2 * di, (words - 2 * di) * sizeof(void *));
    n->slot[2 * di] = key;
    n->slot[2 * di + 1] = p;
    n->datamap |= bit;
    return n;
  }
  hnode *c, *fresh_child = NULL;
  ob_value *fresh_key = NULL;
  if (n->datamap & bit) { /* a different key lives here: push both down a level */
    ob_value *old = n->slot[2 * di];
    fresh_child = h_pair(shared ? ob_ref(old) : old, h_word_hash(n->slot[2 * di + 1]),
                         n->slot[2 * di + 1], key,
                         hash, p, shift + PV_BITS);
    c = h_alloc(n->datamap & ~bit, n->nodemap | bit, 0);
    unsigned ni = popcount(c->nodemap & (bit - 1));
    memcpy(c->slot, n->slot, 2 * di * sizeof(void *));
    memcpy(c->slot + 2 * di, n->slot + 2 * di + 2, (2 * (ndata - di - 1) + ni) * sizeof(void *));
    size_t at = 2 * (ndata - 1) + ni;
    c->slot[at] = fresh_child;
    memcpy(c->slot + at + 1, n->slot + 2 * ndata + ni, (popcount(n->nodemap) - ni) * sizeof(void *));
  } else { /* an empty slot: the key goes right here */
    fresh_key = key;
    c = h_alloc(n->datamap | bit, n->nodemap, 0);
    memcpy(c->slot, n->slot, 2 * di * sizeof(void *));
    c->slot[2 * di] = key;
    c->slot[2 * di + 1] = p;
    memcpy(c->slot + 2 * di + 2, n->slot + 2 * di,
           (2 * (ndata - di) + popcount(n->nodemap)) * sizeof(void *));
  }
  if (!shared) { /* c took over n's references */
    ob_mem_free(n);
    return c;
  }
  n->rc--; /* n lives on elsewhere: what c copied from it is now shared */
  size_t nkeys = popcount(c->datamap);
  for (size_t i = 0; i < nkeys; i++)
    if (c->slot[2 * i] != fresh_key)
      ob_ref(c->slot[2 * i]);
  for (size_t i = 2 * nkeys; i < h_words(c); i++)
    if (c->slot[i] != fresh_child)
      ((hnode *)c->slot[i])->rc++;
  return c;
}

/* --- objects ------------------------------------------------------------- */

ob_value *ob_object(void) { return &empty_object_v.h; }

size_t ob_object_len(const ob_value *o) { return ((const object_value *)o)->n; }

static object_value *object_alloc(uint32_t cap) {
  object_value *o = ob_mem_alloc(sizeof *o + cap * sizeof(ob_entry));
  o->h = (ob_value){1, OB_OBJECT, 0, 0};
  o->depth = 1;
  o->n = 0;
  o->cap = cap;
  return o;
}

/* An empty wide object: its structures zeroed, no index yet. */
static object_value *wide_alloc(void) {
  object_value *o = ob_mem_alloc(sizeof *o + sizeof(wide_part));
  o->h = (ob_value){1, OB_OBJECT, 1, 0};
  o->depth = 1;
  o->n = 0;
  o->cap = 0;
  memset(wide_of(o), 0, sizeof(wide_part));
  return o;
}

static long small_find(const object_value *o, const char *key, size_t len) {
  for (uint32_t i = 0; i < o->n; i++)
    if (key_is(o->e[i].key, key, len))
      return i;
  return -1;
}

static long object_find(const object_value *o, const char *key, size_t len) {
  return o->h.wide ? h_find(wide_of(o)->index, hash_bytes(key, len), key, len) : small_find(o, key, len);
}

static long object_find_h(const object_value *o, const char *key, size_t len, uint32_t hash) {
  return o->h.wide ? h_find(wide_of(o)->index, hash, key, len) : small_find(o, key, len);
}

uint32_t ob_key_hash(const char *key, size_t keylen) { return hash_bytes(key, keylen); }

static ob_value *object_val(const object_value *obj, long i) {
  if (i < 0)
    return NULL;
  return obj->h.wide ? pv_get(&wide_of(obj)->vals, (size_t)i) : obj->e[i].val;
}

ob_value *ob_object_get(const ob_value *o, const char *key, size_t keylen) {
  const object_value *obj = (const object_value *)o;
  return object_val(obj, object_find(obj, key, keylen));
}

ob_value *ob_object_get_h(const ob_value *o, const char *key, size_t keylen, uint32_t hash) {
  const object_value *obj = (const object_value *)o;
  return object_val(obj, object_find_h(obj, key, keylen, hash));
}

void ob_object_at(const ob_value *o, size_t i, ob_value **key, ob_value **val) {
  const object_value *obj = (const object_value *)o;
  if (obj->h.wide) {
    *key = pv_get(&wide_of(obj)->keys, i);
    *val = pv_get(&wide_of(obj)->vals, i);
  } else {
    *key = obj->e[i].key;
    *val = obj->e[i].val;
  }
}

/* An object the caller may change, with room for `need` small entries
 * (consumes one reference to o). */
static object_value *object_editable(ob_value *o, uint32_t need) {
  object_value *src = (object_value *)o;
  if (o->rc == 1 && (o->wide || src->cap >= need))
    return src;
  if (o->rc == 1) { /* unshared small object: grow it in place */
    uint32_t cap = src->cap * 2 < need ? need : src->cap * 2;
    if (cap > SMALL_MAX)
      cap = SMALL_MAX;
    object_value *g = ob_mem_realloc(src, sizeof *g + cap * sizeof(ob_entry));
    g->cap = cap;
    return g;
  }
  object_value *c;
  if (o->wide) {
    c = wide_alloc();
    wide_part *cw = wide_of(c);
    *cw = *wide_of(src);
    pv_share(&cw->keys);
    pv_share(&cw->vals);
    cw->index->rc++;
  } else {
    uint32_t cap = need > src->n ? need : src->n;
    c = object_alloc(cap < 2 ? 2 : cap);
    for (uint32_t i = 0; i < src->n; i++) {
      c->e[i].key = ob_ref(src->e[i].key);
      c->e[i].val = ob_ref(src->e[i].val);
    }
  }
  c->n = src->n;
  c->depth = src->depth;
  ob_unref(o);
  return c;
}

/* Turns a full small object (exclusively owned) into the wide form. */
static object_value *object_widen(object_value *o) {
  object_value *w = wide_alloc();
  wide_part *ww = wide_of(w);
  w->n = o->n;
  w->depth = o->depth;
  ww->index = h_alloc(0, 0, 0);
  for (uint32_t i = 0; i < o->n; i++) {
    ob_value *k = o->e[i].key;
    pv_push(&ww->keys, k);
    pv_push(&ww->vals, o->e[i].val);
    ww->index = h_insert(ww->index, ob_ref(k), string_hash(k), i, 0);
  }
  ob_mem_free(o); /* entries moved, references and all */
  return w;
}

/* Sets key (found at position i, or -1 when new) to v. keyv is the key as a
 * string value when the caller has one; otherwise one is made only if the
 * key is new. Consumes o and v. */
static ob_value *object_put(ob_value *o, long i, ob_value *keyv, const char *k, size_t len,
                            ob_value *v) {
  object_value *obj = object_editable(o, i >= 0 ? 0 : ((object_value *)o)->n + 1);
  obj->depth = depth_with(obj->depth, v);
  if (i >= 0) {
    if (obj->h.wide) {
      pv_set(&wide_of(obj)->vals, (size_t)i, v);
    } else {
      ob_unref(obj->e[i].val);
      obj->e[i].val = v;
    }
    return &obj->h;
  }
  ob_value *key = keyv ? ob_ref(keyv) : ob_string(k, len);
  if (!obj->h.wide && obj->n == SMALL_MAX)
    obj = object_widen(obj);
  if (obj->h.wide) {
    wide_part *w = wide_of(obj);
    pv_push(&w->keys, ob_ref(key));
    pv_push(&w->vals, v);
    w->index = h_insert(w->index, key, string_hash(key), obj->n, 0);
  } else {
    obj->e[obj->n].key = key;
    obj->e[obj->n].val = v;
  }
  obj->n++;
  return &obj->h;
}

long ob_object_index(const ob_value *o, const char *key, size_t keylen) {
  return object_find((const object_value *)o, key, keylen);
}

long ob_object_index_h(const ob_value *o, const char *key, size_t keylen, uint32_t hash) {
  return object_find_h((const object_value *)o, key, keylen, hash);
}

ob_value *ob_object_add_h(ob_value *o, const char *key, size_t keylen, uint32_t hash,
                          ob_value *v) {
  ob_value *k = ob_string(key, keylen);
  string_value *s = (string_value *)k;
  s->hash = hash;
  s->h.hashed = 1;
  o = object_put(o, -1, k, key, keylen, v);
  ob_unref(k);
  return o;
}

ob_value *ob_object_set_at(ob_value *o, size_t i, ob_value *v) {
  return object_put(o, (long)i, NULL, NULL, 0, v);
}

ob_value **ob_object_slot(ob_value *o, size_t i) {
  object_value *obj = (object_value *)o;
  return o->rc == 1 && !o->wide && i < obj->n ? &obj->e[i].val : NULL;
}

void ob_object_slot_done(ob_value *o, size_t i) {
  object_value *obj = (object_value *)o;
  obj->depth = depth_with(obj->depth, obj->e[i].val);
}

ob_value *ob_object_add(ob_value *o, const char *key, size_t keylen, ob_value *v) {
  return object_put(o, -1, NULL, key, keylen, v);
}

ob_value *ob_object_setv(ob_value *o, ob_value *key, ob_value *v) {
  const char *k = ob_string_ptr(key);
  size_t len = ob_string_len(key);
  return object_put(o, object_find((object_value *)o, k, len), key, k, len, v);
}

ob_value *ob_object_set(ob_value *o, const char *key, size_t keylen, ob_value *v) {
  return object_put(o, object_find((object_value *)o, key, keylen), NULL, key, keylen, v);
}

void ob_prefetch(const ob_value *v) {
  /* both lines whatever v is: reading its type to choose would wait for the
   * very line asked for (measured: a twentieth of fanout's samples) */
  ob_prefetch_lines(v, 2);
}

void ob_prefetch_members(const ob_value *v) {
  if (!v || v->type != OB_OBJECT || v->wide)
    return;
  const object_value *o = (const object_value *)v;
  for (uint32_t i = 0; i < o->n; i++) {
    __builtin_prefetch(o->e[i].key);
    __builtin_prefetch(o->e[i].val);
  }
}

void ob_prefetch_key(const ob_value *v, uint32_t hash, int levels) {
  if (!v || v->type != OB_OBJECT || !v->wide)
    return;
  const hnode *n = wide_of((const object_value *)v)->index;
  for (uint32_t shift = 0; levels-- > 0 && !n->ncoll && shift < 32; shift += PV_BITS) {
    uint32_t bit = 1u << ((hash >> shift) & PV_MASK);
    if (!(n->nodemap & bit))
      return; /* the path ends in this node, already read */
    n = n->slot[h_child_at(n, bit)];
  }
  /* the whole of a node with up to 32 slots (272 bytes; most are smaller): the
   * next stage reads the one child slot its path takes, wherever it lies */
  ob_prefetch_lines(n, 5);
}

void ob_object_iter_init(ob_object_iter *it, const ob_value *o) {
  it->obj = o;
  it->i = it->base = it->end = 0;
  it->keys = it->vals = NULL;
}

void ob_object_iter_seek(ob_object_iter *it, size_t i) {
  it->i = i;
  it->base = it->end = 0; /* the next step finds its leaves afresh */
}

int ob_object_iter_next(ob_object_iter *it, ob_value **key, ob_value **val) {
  const object_value *o = (const object_value *)it->obj;
  size_t i = it->i;
  if (i >= o->n)
    return 0;
  it->i++;
  if (!o->h.wide) {
    *key = o->e[i].key;
    *val = o->e[i].val;
    return 1;
  }
  if (i >= it->end) { /* the next leaves: keys and vals have the same shape */
    it->keys = pv_leaf(&wide_of(o)->keys, i, &it->base, &it->end);
    it->vals = pv_leaf(&wide_of(o)->vals, i, &it->base, &it->end);
  }
  *key = it->keys[i - it->base];
  *val = it->vals[i - it->base];
  return 1;
}

/* --- freeing ----------------------------------------------------------- */

static void value_free(ob_value *v) {
  if (v->type == OB_ARRAY) {
    pv_release_all(&((array_value *)v)->v);
  } else if (v->type == OB_OBJECT) {
    object_value *o = (object_value *)v;
    if (v->wide) {
      pv_release_all(&wide_of(o)->keys);
      pv_release_all(&wide_of(o)->vals);
      h_release(wide_of(o)->index);
    } else {
      for (uint32_t i = 0; i < o->n; i++) {
        ob_unref(o->e[i].key);
        ob_unref(o->e[i].val);
      }
    }
  }
  ob_mem_free(v);
}

/* --- comparison -------------------------------------------------------- */

static int equal(const ob_value *a, const ob_value *b, int exact) {
  if (a == b)
    return 1;
  if (!exact && ob_is_number(a) && ob_is_number(b)) {
    if (a->type == OB_INT && b->type == OB_INT)
      return ob_int_value(a) == ob_int_value(b);
    return ob_real_value(a) == ob_real_value(b);
  }
  if (a->type != b->type)
    return 0;
  switch ((ob_type)a->type) {
  case OB_NULL:
  case OB_TRUE:
  case OB_FALSE: return 1;
  case OB_INT: return ob_int_value(a) == ob_int_value(b);
  case OB_REAL: return ob_real_value(a) == ob_real_value(b);
  case OB_STRING:
    return ob_string_len(a) == ob_string_len(b) &&
           memcmp(ob_string_ptr(a), ob_string_ptr(b), ob_string_len(a)) == 0;
  case OB_ARRAY: {
    size_t n = ob_array_len(a);
    if (n != ob_array_len(b))
      return 0;
    for (size_t i = 0; i < n; i++)
      if (!equal(ob_array_get(a, i), ob_array_get(b, i), exact))
        return 0;
    return 1;
  }
  case OB_OBJECT: {
    size_t n = ob_object_len(a);
    if (n != ob_object_len(b))
      return 0;
    ob_object_iter it;
    ob_value *k, *va, *kb, *vb;
    ob_object_iter_init(&it, a);
    for (size_t i = 0; ob_object_iter_next(&it, &k, &va); i++) {
      if (exact) {
        ob_object_at(b, i, &kb, &vb);
        if (!equal(k, kb, 1))
          return 0;
      } else {
        vb = ob_object_get(b, ob_string_ptr(k), ob_string_len(k));
        if (!vb)
          return 0;
      }
      if (!equal(va, vb, exact))
        return 0;
    }
    return 1;
  }
  }
  return 0;
}

int ob_equal(const ob_value *a, const ob_value *b) { return equal(a, b, 0); }
int ob_identical(const ob_value *a, const ob_value *b) { return equal(a, b, 1); }
