/* ob_lua.c -- the Lua bridge: ob_value <-> Lua value with exact fidelity (plan-format §9).
 * Every tool call's params and results cross here, so both directions are tuned.
 *
 * Design
 * ------
 * null is the light userdata NULL. It is what lua-cjson uses for cjson.null,
 * so tools that `require "cjson"` read and write our nulls, and it costs no
 * allocation and no registry lookup to push or to recognise.
 *
 * Integers and reals map onto Lua 5.4's two number subtypes one to one, so
 * 1 and 1.0 stay apart in both directions (lua_isinteger decides).
 *
 * Arrays are tables with one shared metatable (registry "obelus.array"),
 * because a Lua table cannot otherwise tell an empty array from an empty
 * object, and because a table that *says* it is an array should never turn
 * into an object when a tool empties it. Cost: one lua_setmetatable an array.
 *
 * Lua tables forget insertion order, so a pushed object carries its key
 * list, a Lua array of its key strings, as its metatable. A key list is
 * known by its own metatable, the marker registry[&key_order_key], so a
 * metatable a tool sets instead is simply not a list (that object then
 * comes back with its keys sorted). An earlier version kept the lists in a
 * weak-keyed registry table instead; the metatable costs no table entry a
 * push and leaves the collector no ephemerons to clear (measured: 3-4% fewer
 * instructions for whole runs, and fewer collector cycles). Objects at one
 * depth usually share their keys (the records of an array, the same field
 * of each record), so the last list made at each of the first SHAPE_LEVELS
 * depths is kept and shared with the next object whose keys are equal, and
 * lists are also found across pushes by their keys' signature (the params
 * of every call of one tool): one list per shape, its keys already interned.
 * Measured against a build without records (best of 9 pushes of 100k flat
 * records, 10 MB of JSON; of 50k records of 4 nested objects, 8.6 MB; of one
 * object of 100k keys): the record adds ~5%, ~55% and ~30% to the push (one
 * weak-table entry per object was most of it, when the lists lived in a weak
 * table), and reading a recorded table back is no slower than sorting an
 * unrecorded one.
 *
 * Converting back, an object table with a record is read through its list
 * with raw gets, each key still present in its recorded place, then a
 * lua_next pass counts the keys: when there are no others (a value handed
 * back unchanged, or with values changed or keys removed) that is all.
 * Keys the tool added are then found, converted and sorted bytewise after
 * the recorded ones. A table without a record (built by the tool) comes
 * out sorted, deterministic whatever Lua's hash order.
 *
 * Safety: converting to C never raises a Lua error, because it holds C
 * references while it runs. It only uses API calls that cannot raise or
 * allocate in Lua (lua_next on a table it does not change, raw gets,
 * lua_tolstring on strings only, lua_checkstack), so no collection runs
 * either: the string pointers it keeps while it runs stay valid. Pushing to
 * Lua does allocate and may raise, but holds only borrowed C pointers, so a
 * Lua error leaks nothing; ob_lua_push_safe wraps it in a protected call
 * for callers that do hold resources.
 *
 * A call's params are the one place where a value may not become tables: below the
 * root, a value of OB_VIEW_MIN entries or more (counted at every depth, once resolved)
 * goes as a read-only view of the value itself (ob_view.c), so that a tool reading one
 * key of a 10 MB document does not pay for all of it; converting back takes a view as
 * its value (a reference). Deciding costs at most OB_VIEW_MIN steps a param.
 *
 * Whatever goes to C must be what a journal can hold and read back: keys are
 * valid UTF-8 without a NUL byte (jansson refuses "\u0000" in a key), strings
 * valid UTF-8, numbers finite; anything else fails the conversion, naming the
 * place, so a tool's result that could not be read back fails its call at once.
 *
 * Both directions recurse once per nesting level, bounded by OB_MAX_DEPTH
 * (a few hundred bytes of C stack a level), and check the Lua stack at each
 * level. A Lua table that contains itself is refused when it is met inside
 * itself (the tables open on the way down are kept by address: open_table).
 *
 * Allocation on the way back: one ob_value a node (the value store needs
 * them), keys shared through a small per-call cache keyed by the Lua string's
 * address (short Lua strings are interned, so equal keys share one ob_value),
 * and a scratch array for object members that lives on the C stack until an
 * object has more than INLINE_ENTRIES members in flight.
 */
#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/ob_lua.h"
#include "bridge/ob_lua_scalar.h"
#include "base/ob_mem.h"
#include "bridge/ob_pool.h"
#include "base/ob_path.h"
#include "bridge/ob_view.h"

/* registry[&key_order_key]: the marker, the metatable of every key list;
 * registry[&shapes_key]: key signature -> key list, weak values */
#define SHAPE_MAX_KEYS 32      /* wider objects get a list of their own */
#define KEY_CACHE 64 /* a power of two */
#define INLINE_ENTRIES 32
#define OPEN_BUCKETS 64 /* a power of two */
#define NO_RANK SIZE_MAX

/* --- registry ------------------------------------------------------------ */

/* The hot lookups use light-userdata keys (the address of these): no string
 * hashing or API string cache a push. The array metatable is also kept
 * under its name (OB_LUA_ARRAY_MT), for luaL_checkudata-style code. */
static const char array_mt_key = 0, key_order_key = 0, shapes_key = 0;

void ob_lua_push_array_mt(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &array_mt_key) == LUA_TTABLE)
    return;
  lua_pop(L, 1);
  luaL_newmetatable(L, OB_LUA_ARRAY_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &array_mt_key);
}

static void push_key_order(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &key_order_key) == LUA_TTABLE)
    return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "obelus.keylist");
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_order_key);
}

/* Pushes the table of key lists by signature: the params of every call of
 * one tool have the same keys, so their list is made once, not once a push. */
static void push_shapes(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &shapes_key) == LUA_TTABLE)
    return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 0);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &shapes_key);
}


int ob_lua_is_array(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE || !lua_checkstack(L, 2))
    return 0;
  idx = lua_absindex(L, idx);
  if (!lua_getmetatable(L, idx))
    return 0;
  ob_lua_push_array_mt(L);
  int is = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return is;
}

int ob_lua_traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg)
    msg = luaL_tolstring(L, 1, NULL);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* --- C to Lua ------------------------------------------------------------- */

/* Nesting levels whose last object's key list is remembered for reuse. */
#define SHAPE_LEVELS 16

typedef struct pusher {
  lua_State *L;
  int array_mt, order, shapes; /* absolute stack indices */
  int lists;           /* stack slots lists .. lists+levels-1: the key list of shape[d] */
  uint32_t levels;     /* depths whose last key list is kept: SHAPE_LEVELS, or fewer when
                          the value is shallower (a flat params object: one) */
  const ob_value *shape[SHAPE_LEVELS]; /* the last non-empty object pushed at depth d */
  /* ob_lua_push_call: a key list known for the root (stack index, or 0) and whose it is */
  int hint;
  const ob_value *hint_of;
  int hint_used;
  /* substituting a call's references: each string that is a reference
   * expression is replaced by vals[next++], each "††" literal unescaped */
  int subst;
  ob_value *const *vals;
  size_t nvals, next;
  /* ob_lua_push_call: a value below the root that is big enough once resolved
   * (ob_view_big) goes as a view (ob_view.c); 0 inside one known to be small */
  int views;
} pusher;

static void push_any(pusher *p, const ob_value *v, uint32_t depth);

/* A key of the params' top level that begins with "_": a meta-property. */
static int is_meta(const ob_value *k) { return ob_string_len(k) > 0 && ob_string_ptr(k)[0] == '_'; }

static int key_same(const ob_value *ka, const ob_value *kb) {
  if (ka == kb)
    return 1;
  size_t len = ob_string_len(ka);
  return len == ob_string_len(kb) && memcmp(ob_string_ptr(ka), ob_string_ptr(kb), len) == 0;
}

static int same_keys(const ob_value *a, const ob_value *b) {
  size_t n = ob_object_len(a);
  if (n != ob_object_len(b))
    return 0;
  if (n <= 8) { /* a call's params, mostly: keys by position, no iterators */
    ob_value *ka, *kb, *x;
    for (size_t i = 0; i < n; i++) {
      ob_object_at(a, i, &ka, &x);
      ob_object_at(b, i, &kb, &x);
      if (!key_same(ka, kb))
        return 0;
    }
    return 1;
  }
  ob_object_iter ia, ib;
  ob_value *ka, *kb, *x;
  ob_object_iter_init(&ia, a);
  ob_object_iter_init(&ib, b);
  while (ob_object_iter_next(&ia, &ka, &x) && ob_object_iter_next(&ib, &kb, &x))
    if (!key_same(ka, kb))
      return 0;
  return 1;
}

/* The signature of an object's keys (their number and hashes, in order); never 0. */
static lua_Integer signature(const ob_value *v) {
  uint64_t h = 1469598103934665603ull ^ ob_object_len(v);
  ob_object_iter it;
  ob_value *k, *x;
  ob_object_iter_init(&it, v);
  while (ob_object_iter_next(&it, &k, &x))
    h = (h ^ ob_string_hash(k)) * 1099511628211ull;
  h &= 0x3fffffffffffffull; /* a small positive integer key: the table's array or hash part */
  return (lua_Integer)(h ? h : 1);
}

/* Pushes the key list an earlier push made for objects with v's keys, when
 * the cache still has one and its keys are v's (a signature may collide). */
static int shape_list(pusher *p, const ob_value *v, lua_Integer sig) {
  lua_State *L = p->L;
  if (lua_rawgeti(L, p->shapes, sig) != LUA_TTABLE || lua_rawlen(L, -1) != ob_object_len(v)) {
    lua_pop(L, 1);
    return 0;
  }
  ob_object_iter it;
  ob_value *k, *x;
  lua_Integer i = 1;
  ob_object_iter_init(&it, v);
  while (ob_object_iter_next(&it, &k, &x)) {
    size_t len;
    lua_rawgeti(L, -1, i++);
    const char *s = lua_tolstring(L, -1, &len);
    int same = s && len == ob_string_len(k) && memcmp(s, ob_string_ptr(k), len) == 0;
    lua_pop(L, 1);
    if (!same) {
      lua_pop(L, 1);
      return 0;
    }
  }
  return 1;
}

/* Pushes object v with its key list recorded. Objects at one depth often
 * share their keys (records in an array, or the same field of each record),
 * so the list of the last object at each depth is kept on the stack and
 * shared when the next one has the same keys: no new list, and no hashing
 * of the keys again either, as they come from that list already interned. */
static void push_object(pusher *p, const ob_value *v, uint32_t depth) {
  lua_State *L = p->L;
  size_t n = ob_object_len(v);
  luaL_checkstack(L, 5, "obelus: value too deep for the Lua stack");
  lua_createtable(L, 0, n > INT_MAX ? INT_MAX : (int)n);
  if (n == 0)
    return; /* nothing to order: any keys added later come out sorted */
  int obj = lua_gettop(L), list;
  int cached = depth < p->levels;
  int reuse = cached && p->shape[depth] && same_keys(p->shape[depth], v);
  lua_Integer sig = 0;
  if (reuse) {
    lua_pushvalue(L, p->lists + (int)depth);
  } else if (depth == 0 && p->hint && same_keys(p->hint_of, v)) {
    reuse = p->hint_used = 1;
    lua_pushvalue(L, p->hint);
  } else if (n <= SHAPE_MAX_KEYS && (sig = signature(v), shape_list(p, v, sig))) {
    reuse = 1; /* a list made by an earlier push, now on the stack */
  } else {
    lua_createtable(L, n > INT_MAX ? INT_MAX : (int)n, 0);
    lua_pushvalue(L, p->order);
    lua_setmetatable(L, -2);
  }
  list = lua_gettop(L);
  ob_object_iter it;
  ob_value *k, *x;
  lua_Integer i = 1;
  ob_object_iter_init(&it, v);
  while (ob_object_iter_next(&it, &k, &x)) {
    if (reuse) {
      lua_rawgeti(L, list, i);
    } else {
      lua_pushlstring(L, ob_string_ptr(k), ob_string_len(k));
      lua_pushvalue(L, -1);
      lua_rawseti(L, list, i);
    }
    i++;
    if (depth == 0 && p->subst && is_meta(k)) {
      p->subst = 0; /* meta-properties are passed as written */
      push_any(p, x, depth + 1);
      p->subst = 1;
    } else {
      push_any(p, x, depth + 1);
    }
    lua_rawset(L, obj);
  }
  lua_pushvalue(L, list);
  lua_setmetatable(L, obj);
  if (!reuse && sig) { /* remember the new list for later pushes */
    lua_pushvalue(L, list);
    lua_rawseti(L, p->shapes, sig);
  }
  if (cached && (!reuse || depth == 0)) { /* the root's list stays for ob_lua_push_call */
    p->shape[depth] = v;
    lua_replace(L, p->lists + (int)depth);
  } else {
    lua_pop(L, 1);
  }
}

static void push_array(pusher *p, const ob_value *v, uint32_t depth) {
  lua_State *L = p->L;
  size_t n = ob_array_len(v);
  luaL_checkstack(L, 4, "obelus: value too deep for the Lua stack");
  lua_createtable(L, n > INT_MAX ? INT_MAX : (int)n, 0);
  int arr = lua_gettop(L);
  lua_pushvalue(L, p->array_mt);
  lua_setmetatable(L, arr);
  for (size_t i = 0; i < n; i++) {
    push_any(p, ob_array_get(v, i), depth + 1);
    lua_rawseti(L, arr, (lua_Integer)i + 1);
  }
}

/* A string of a call's params while substituting: what the call receives for it. */
/* A params string as the tool gets it: a "††" literal unescaped, a plain one as
 * it is (both pushed here); for a reference expression nothing is pushed and
 * the call's next reference value is returned (there must be one, and it must
 * fit below OB_MAX_DEPTH at depth) for the caller to push as it is. */
static const ob_value *param_string(lua_State *L, const ob_value *v, ob_value *const *vals,
                                    size_t nvals, size_t *next, uint32_t depth) {
  const char *s = ob_string_ptr(v);
  size_t n = ob_string_len(v);
  int cls = ob_str_classify(s, n);
  if (cls == OB_STR_LITERAL) {
    lua_pushlstring(L, s + OB_DAGGER_LEN, n - OB_DAGGER_LEN);
    return NULL;
  }
  if (cls != OB_STR_EXPR) {
    lua_pushlstring(L, s, n);
    return NULL;
  }
  if (*next >= nvals) /* fewer values than references: not reached */
    luaL_error(L, "obelus: a reference of the call has no value");
  const ob_value *x = vals[(*next)++];
  if (depth + ob_depth(x) > OB_MAX_DEPTH)
    luaL_error(L, "obelus: value nested deeper than %d levels", OB_MAX_DEPTH);
  return x;
}

static void push_param_string(pusher *p, const ob_value *v, uint32_t depth) {
  const ob_value *x = param_string(p->L, v, p->vals, p->nvals, &p->next, depth);
  if (x) {
    p->subst = 0; /* a value read from the log is passed as it is */
    push_any(p, x, depth);
    p->subst = 1;
  }
}

/* A container as tables, and all of it: no views below one that is not (its parts are
 * smaller still: no checks). */
static void push_tables(pusher *p, const ob_value *v, uint32_t depth) {
  p->views = 0;
  if (ob_typeof(v) == OB_ARRAY)
    push_array(p, v, depth);
  else
    push_object(p, v, depth);
  p->views = 1;
}

/* A value below the call's root, as the tool gets it (not substituting): a view when
 * big, else a table, and so is all of it (its parts are smaller still: no checks). */
static void push_viewable(pusher *p, const ob_value *v, uint32_t depth) {
  if (ob_view_big(v)) {
    ob_view_push(p->L, v);
    return;
  }
  push_tables(p, v, depth);
}

/* A container of the call as written, while substituting: its entries at every depth
 * once resolved (each reference counted as its value), until they reach limit. The
 * references met are counted from *next on, which this advances. */
static size_t resolved_count(const pusher *p, const ob_value *v, size_t *next, size_t limit) {
  int obj = ob_typeof(v) == OB_OBJECT;
  size_t n = obj ? ob_object_len(v) : ob_array_len(v), c = n;
  for (size_t i = 0; i < n && c < limit; i++) {
    ob_value *k, *x;
    if (obj)
      ob_object_at(v, i, &k, &x);
    else
      x = ob_array_get(v, i);
    ob_type t = ob_typeof(x);
    if (t == OB_ARRAY || t == OB_OBJECT)
      c += resolved_count(p, x, next, limit - c);
    else if (t == OB_STRING && *next < p->nvals &&
             ob_str_classify(ob_string_ptr(x), ob_string_len(x)) == OB_STR_EXPR)
      c += ob_view_count(p->vals[(*next)++], limit - c);
  }
  return c;
}

/* A reference of the call as the tool gets it: the call's next value. */
static ob_value *next_value(void *ud, const ob_value *expr_text) {
  pusher *p = ud;
  return ob_ref(p->next < p->nvals ? p->vals[p->next++] : (ob_value *)expr_text);
}

/* v as the tool gets it: each reference replaced by the call's next value, each "††"
 * literal unescaped (as ob_params.c resolves params). A new value. */
static ob_value *resolved(pusher *p, const ob_value *v) { return ob_str_substitute(v, next_value, p); }

/* A container written in the plan, below the root, while substituting: judged as
 * any value is, on what it resolves to, so that a tool sees the same
 * whether its params were resolved before (a schema, an approver, a retry) or not. A
 * big one is resolved (its references' values shared, not copied) and shown as a
 * view; a small one is pushed as tables, substituting, and so is all of it. */
static void push_literal(pusher *p, const ob_value *v, uint32_t depth) {
  size_t next = p->next;
  if (resolved_count(p, v, &next, OB_VIEW_MIN) >= OB_VIEW_MIN) {
    ob_value **slot = ob_view_push_slot(p->L); /* first: nothing to leak if it raises */
    ob_value *r = resolved(p, v);
    if (depth + ob_depth(r) > OB_MAX_DEPTH) {
      ob_unref(r);
      luaL_error(p->L, "obelus: value nested deeper than %d levels", OB_MAX_DEPTH);
    }
    *slot = r;
    return;
  }
  push_tables(p, v, depth);
}

static void push_any(pusher *p, const ob_value *v, uint32_t depth) {
  switch (ob_typeof(v)) {
  case OB_ARRAY:
  case OB_OBJECT:
    if (p->views && depth > 0 && !p->subst)
      push_viewable(p, v, depth);
    else if (p->views && depth > 0)
      push_literal(p, v, depth);
    else if (ob_typeof(v) == OB_ARRAY)
      push_array(p, v, depth);
    else
      push_object(p, v, depth);
    break;
  case OB_STRING:
    if (p->subst) {
      push_param_string(p, v, depth);
      break;
    }
    /* fall through */
  default: ob_lua_push_scalar(p->L, v); break;
  }
}

void ob_lua_push_tables(lua_State *L) {
  luaL_checkstack(L, 5, "obelus: Lua stack exhausted");
  ob_lua_push_array_mt(L);
  push_key_order(L);
  push_shapes(L);
}

void ob_lua_open(lua_State *L) {
  ob_lua_push_tables(L);
  lua_pop(L, 3);
}

/* Pushes v (an array or object): a slot for it, then (unless t gives them)
 * the registry tables, then the key list slots, then v's copy, which goes
 * down into its slot. Returns that slot; the caller drops what is above it
 * (the key list of the root is at p->lists until then). */
static int push_root(pusher *p, const ob_value *v, const ob_lua_tables *t) {
  lua_State *L = p->L;
  if (ob_depth(v) > OB_MAX_DEPTH) /* guards the C stack; the core never builds these */
    luaL_error(L, "obelus: value nested deeper than %d levels", OB_MAX_DEPTH);
  luaL_checkstack(L, SHAPE_LEVELS + 9, "obelus: Lua stack exhausted");
  lua_pushnil(L);
  int base = lua_gettop(L);
  if (t) {
    p->array_mt = t->array_mt, p->order = t->order, p->shapes = t->shapes;
  } else {
    ob_lua_push_tables(L);
    p->array_mt = base + 1, p->order = base + 2, p->shapes = base + 3;
  }
  p->lists = lua_gettop(L) + 1;
  p->levels = ob_depth(v) < SHAPE_LEVELS ? ob_depth(v) : SHAPE_LEVELS;
  lua_settop(L, p->lists + (int)p->levels - 1); /* the list slots, nil: no stack growth */
  memset(p->shape, 0, p->levels * sizeof *p->shape);
  push_any(p, v, 0);
  lua_replace(L, base);
  return base;
}

void ob_lua_push(lua_State *L, const ob_value *v) {
  ob_type t = ob_typeof(v);
  if (t != OB_ARRAY && t != OB_OBJECT) {
    ob_lua_push_scalar(L, v);
    return;
  }
  pusher p = {.L = L};
  lua_settop(L, push_root(&p, v, NULL));
}

/* The common case of ob_lua_push_call, in a few API calls: params of at most
 * 8 keys, the same keys as the tool's last call (their list is cached), every
 * value as written a scalar (a reference's value may be anything: it is passed
 * as it is). Returns 0, having pushed nothing, when the case does not apply. */
static int push_call_flat(lua_State *L, const ob_value *call, ob_value *const *vals,
                          size_t nvals, int subst, const ob_lua_keys *keys) {
  size_t n = ob_object_len(call);
  if (n > 8 || !keys->of || !same_keys(keys->of, call))
    return 0;
  ob_value *k, *v;
  for (size_t i = 0; i < n; i++) {
    ob_object_at(call, i, &k, &v);
    if (ob_typeof(v) == OB_ARRAY || ob_typeof(v) == OB_OBJECT)
      return 0;
  }
  luaL_checkstack(L, 4, "obelus: Lua stack exhausted");
  lua_createtable(L, 0, (int)n);
  lua_rawgeti(L, LUA_REGISTRYINDEX, keys->ref); /* the key list: also the metatable */
  size_t next = 0;
  for (size_t i = 0; i < n; i++) {
    ob_object_at(call, i, &k, &v);
    lua_rawgeti(L, -1, (lua_Integer)i + 1);
    if (subst && ob_typeof(v) == OB_STRING && !is_meta(k)) { /* meta: passed as written */
      const ob_value *x = param_string(L, v, vals, nvals, &next, 1);
      if (x && ob_view_big(x))
        ob_view_push(L, x);
      else if (x)
        ob_lua_push(L, x);
    } else {
      ob_lua_push_scalar(L, v);
    }
    lua_rawset(L, -4);
  }
  lua_setmetatable(L, -2);
  return 1;
}

void ob_lua_push_call(lua_State *L, const ob_value *call, ob_value *const *vals, size_t nvals,
                      int subst, ob_lua_keys *keys, const ob_lua_tables *tables) {
  if (ob_typeof(call) == OB_OBJECT && push_call_flat(L, call, vals, nvals, subst, keys))
    return;
  pusher p = {.L = L, .subst = subst, .vals = vals, .nvals = nvals, .views = 1};
  int cacheable = ob_typeof(call) == OB_OBJECT && ob_object_len(call) > 0;
  if (cacheable && keys->of) {
    luaL_checkstack(L, 1, "obelus: Lua stack exhausted");
    lua_rawgeti(L, LUA_REGISTRYINDEX, keys->ref);
    p.hint = lua_gettop(L);
    p.hint_of = keys->of;
  }
  if (ob_typeof(call) != OB_ARRAY && ob_typeof(call) != OB_OBJECT) {
    ob_lua_push_scalar(L, call);
  } else {
    int base = push_root(&p, call, tables);
    if (cacheable && !p.hint_used) { /* remember the root's key list for the next call */
      lua_pushvalue(L, p.lists);
      int ref = luaL_ref(L, LUA_REGISTRYINDEX);
      ob_lua_keys_free(L, keys);
      keys->of = ob_ref((ob_value *)call);
      keys->ref = ref;
    }
    lua_settop(L, base);
  }
  if (p.hint)
    lua_remove(L, p.hint);
}

void ob_lua_keys_free(lua_State *L, ob_lua_keys *keys) {
  if (!keys->of)
    return;
  if (L)
    luaL_unref(L, LUA_REGISTRYINDEX, keys->ref);
  ob_unref(keys->of);
  keys->of = NULL;
}

static int push_protected(lua_State *L) {
  ob_lua_push(L, (const ob_value *)lua_touserdata(L, 1));
  return 1;
}

int ob_lua_push_safe(lua_State *L, const ob_value *v, ob_error *err) {
  if (!lua_checkstack(L, 3))
    return ob_error_set(err, OB_ENOMEM, 0, "Lua stack exhausted");
  lua_pushcfunction(L, push_protected); /* a light C function: no allocation */
  lua_pushlightuserdata(L, (void *)v);
  int rc = lua_pcall(L, 1, 1, 0);
  if (rc == LUA_OK)
    return OB_OK;
  const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";
  int code = rc == LUA_ERRMEM ? OB_ENOMEM : OB_EDEPTH;
  ob_error_set(err, code, 0, "cannot push a value to Lua: %s", msg);
  lua_pop(L, 1);
  return code;
}

/* --- Lua to C ------------------------------------------------------------- */

/* Where the conversion is, as a chain through the C stack: written on the
 * way down at the cost of a few stores, read only to word an error. */
typedef struct where {
  const struct where *up;
  const char *key; /* an object member: its key; NULL: an array element */
  size_t keylen;
  lua_Integer index; /* 1-based, as the tool wrote it */
} where;

typedef struct entry { /* one converted object member awaiting its place */
  const char *key;     /* the Lua key's bytes (alive: the table holds it) */
  size_t len;
  ob_value *val;
  size_t rank;
} entry;

/* A table being converted (in conv_table's frame): the tables open on the way down,
 * by address, in OPEN_BUCKETS chains, so that a table met again inside itself is a
 * cycle, refused at once (and not only after OB_MAX_DEPTH levels of it: a table
 * holding itself twice would take 2^4096 steps to get there). Entries come and go
 * in stack order, so each one leaves its chain as it came: at the head. */
typedef struct open_table {
  const void *t;
  struct open_table *next;
} open_table;

typedef struct conv {
  lua_State *L;
  open_table *open[OPEN_BUCKETS];
  int array_mt, order; /* absolute stack indices, 0 when the registry has none */
  const char *root;
  ob_error *err;
  int checked; /* an engine's state (a tool's result): strings are held to its memory account */
  entry *ents; /* a stack of members: each object level uses [base, nents) */
  size_t nents, capents;
  struct {
    const char *s;
    ob_value *key;
  } keys[KEY_CACHE];
  entry inline_ents[INLINE_ENTRIES];
} conv;

static ob_value *conv_value(conv *c, int idx, uint32_t depth, const where *w);

/* Offset of the first byte that does not start a valid UTF-8 sequence
 * (overlong forms, surrogates and code points above U+10FFFF are invalid,
 * as for jansson), or n when all is valid. */
static size_t utf8_invalid_at(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < n) {
    if (n - i >= 8) { /* ASCII runs, 8 bytes at a time */
      uint64_t x;
      memcpy(&x, s + i, 8);
      if (!(x & 0x8080808080808080ull)) {
        i += 8;
        continue;
      }
    }
    unsigned char b = s[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    size_t len = ob_utf8_seq(s + i, n - i);
    if (!len)
      return i;
    i += len;
  }
  return n;
}

static int is_identifier(const char *s, size_t n) {
  if (!n || !(s[0] == '_' || ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z')))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!(s[i] == '_' || (s[i] >= '0' && s[i] <= '9') || ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z')))
      return 0;
  return 1;
}

/* A key as a JSON string, cut after `max` bytes. */
static void add_quoted(ob_buf *b, const char *s, size_t n, size_t max) {
  static const char hex[] = "0123456789abcdef";
  ob_buf_addc(b, '"');
  for (size_t i = 0; i < n && i < max; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\') {
      ob_buf_addc(b, '\\');
      ob_buf_addc(b, (char)ch);
    } else if (ch < 0x20 || ch == 0x7f) {
      char u[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
      ob_buf_add(b, u, 6);
    } else {
      ob_buf_addc(b, (char)ch);
    }
  }
  if (n > max)
    ob_buf_add(b, "...", 3);
  ob_buf_addc(b, '"');
}

static void add_where(ob_buf *b, const where *w) {
  if (!w)
    return;
  add_where(b, w->up);
  if (!w->key) {
    ob_buf_addf(b, "[%lld]", (long long)w->index);
  } else if (is_identifier(w->key, w->keylen)) {
    ob_buf_addc(b, '.');
    ob_buf_add(b, w->key, w->keylen);
  } else {
    ob_buf_addc(b, '[');
    add_quoted(b, w->key, w->keylen, 40);
    ob_buf_addc(b, ']');
  }
}

/* Fills c->err with "<where>: <what>" and returns NULL. A long place (a
 * cycle's thousands of steps) keeps its beginning and its end. */
static ob_value *fail(conv *c, const where *w, int code, const char *fmt, ...) {
  if (!c->err)
    return NULL;
  char what[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, c->root, strlen(c->root));
  add_where(&b, w);
  const size_t head = 100, tail = 80;
  if (b.len > head + tail + 5) {
    size_t h = head, t = b.len - tail; /* cut between steps, or at least between characters */
    while (h > head / 2 && b.data[h] != '.' && b.data[h] != '[')
      h--;
    while (h > 0 && ((unsigned char)b.data[h] & 0xC0) == 0x80)
      h--;
    while (t < b.len - tail / 2 && b.data[t] != '.' && b.data[t] != '[')
      t++;
    while (t < b.len && ((unsigned char)b.data[t] & 0xC0) == 0x80)
      t++;
    ob_error_set(c->err, code, 0, "%.*s[...]%.*s: %s", (int)h, b.data, (int)(b.len - t),
                 b.data + t, what);
  } else {
    ob_error_set(c->err, code, 0, "%.*s: %s", (int)b.len, b.data ? b.data : "", what);
  }
  ob_buf_free(&b);
  return NULL;
}

/* Describes the key at idx for an error message about its table. */
static void describe_key(lua_State *L, int idx, char *out, size_t outlen) {
  switch (lua_type(L, idx)) {
  case LUA_TSTRING: {
    ob_buf b;
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    ob_buf_init(&b);
    add_quoted(&b, s, n, 40);
    snprintf(out, outlen, "key %.*s", (int)b.len, b.data);
    ob_buf_free(&b);
    break;
  }
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx))
      snprintf(out, outlen, "key %lld", (long long)lua_tointeger(L, idx));
    else
      snprintf(out, outlen, "key %.17g", (double)lua_tonumber(L, idx));
    break;
  default: snprintf(out, outlen, "a %s key", lua_typename(L, lua_type(L, idx))); break;
  }
}

/* A new reference to an OB_STRING for the Lua key s. Equal short Lua strings
 * are one object, so a cache on the address shares one ob_value between all
 * members named alike (one allocation, one hash computed for a whole array
 * of records). The address cannot be reused while we run: nothing is
 * collected during a conversion. */
static ob_value *key_value(conv *c, const char *s, size_t len) {
  size_t h = ((uintptr_t)s >> 3) & (KEY_CACHE - 1);
  if (c->keys[h].s == s)
    return ob_ref(c->keys[h].key);
  ob_value *k = ob_string(s, len);
  ob_unref(c->keys[h].key);
  c->keys[h].s = s;
  c->keys[h].key = ob_ref(k);
  return k;
}

static void entry_push(conv *c, const char *key, size_t len, ob_value *val) {
  if (c->nents == c->capents) {
    size_t cap = c->capents * 2;
    entry *e;
    if (c->ents == c->inline_ents) {
      e = malloc(cap * sizeof *e);
      if (e)
        memcpy(e, c->ents, c->nents * sizeof *e);
    } else {
      e = realloc(c->ents, cap * sizeof *e);
    }
    if (!e)
      abort(); /* as everywhere in the core (ob_value.h) */
    c->ents = e;
    c->capents = cap;
  }
  c->ents[c->nents++] = (entry){key, len, val, NO_RANK};
}

static int keycmp(const char *a, size_t alen, const char *b, size_t blen) {
  int r = memcmp(a, b, alen < blen ? alen : blen);
  return r ? r : (alen > blen) - (alen < blen);
}

static int by_key(const void *x, const void *y) {
  const entry *a = x, *b = y;
  return keycmp(a->key, a->len, b->key, b->len);
}

static int by_rank(const void *x, const void *y) {
  const entry *a = x, *b = y;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Checks the key at idx (a string) and converts the value at the top as its
 * member; on success pushes an entry. Pops nothing. */
static int add_member(conv *c, int key, uint32_t depth, const where *w, size_t rank) {
  lua_State *L = c->L;
  size_t len;
  const char *k = lua_tolstring(L, key, &len);
  size_t bad = utf8_invalid_at(k, len);
  if (bad < len || memchr(k, '\0', len)) {
    char kd[80];
    describe_key(L, key, kd, sizeof kd);
    if (bad < len)
      fail(c, w, OB_EINVAL, "%s is not valid UTF-8 (byte %zu)", kd, bad);
    else /* JSON text cannot carry it in a key: the journal could not be read back */
      fail(c, w, OB_EINVAL, "%s holds a NUL byte (no JSON object key can)", kd);
    return 0;
  }
  where cw = {w, k, len, 0};
  ob_value *v = conv_value(c, lua_gettop(L), depth, &cw);
  if (!v)
    return 0;
  entry_push(c, k, len, v);
  c->ents[c->nents - 1].rank = rank;
  return 1;
}

/* Fails for a key that cannot name an object member. */
static int bad_object_key(conv *c, int key, const where *w) {
  char kd[80];
  describe_key(c->L, key, kd, sizeof kd);
  if (lua_isinteger(c->L, key))
    fail(c, w, OB_EINVAL, "cannot convert a table with both string and integer keys to JSON (%s)", kd);
  else
    fail(c, w, OB_EINVAL, "cannot convert a table with %s to JSON (keys must be strings, or exactly 1..n)", kd);
  return 0;
}

/* The object made of the entries [base, nents), in their order; pops them. */
static ob_value *build_object(conv *c, size_t base) {
  ob_value *o = ob_object();
  for (size_t i = base; i < c->nents; i++) {
    entry *e = &c->ents[i];
    ob_value *key = key_value(c, e->key, e->len);
    o = ob_object_setv(o, key, e->val);
    ob_unref(key);
  }
  c->nents = base;
  return o;
}

static void drop_entries(conv *c, size_t base) {
  for (size_t i = base; i < c->nents; i++)
    ob_unref(c->ents[i].val);
  c->nents = base;
}

/* The table at t, with no recorded order, whose first pair (a string key)
 * is on the stack, as an object with its keys sorted. Consumes the pair. */
static ob_value *conv_object(conv *c, int t, uint32_t depth, const where *w) {
  lua_State *L = c->L;
  size_t base = c->nents;
  do {
    int ok = lua_type(L, -2) == LUA_TSTRING ? add_member(c, lua_gettop(L) - 1, depth, w, NO_RANK)
                                            : bad_object_key(c, lua_gettop(L) - 1, w);
    lua_pop(L, 1);
    if (!ok) {
      lua_pop(L, 1);
      drop_entries(c, base);
      return NULL;
    }
  } while (lua_next(L, t));
  qsort(c->ents + base, c->nents - base, sizeof(entry), by_key);
  return build_object(c, base);
}

/* Adds, after the recorded members [base, base+n), the keys of t that its
 * record does not name, sorted. */
static int add_unrecorded(conv *c, int t, uint32_t depth, const where *w, size_t base, size_t n) {
  lua_State *L = c->L;
  qsort(c->ents + base, n, sizeof(entry), by_key); /* to look keys up; restored below */
  lua_pushnil(L);
  while (lua_next(L, t)) {
    int ok = 1;
    if (lua_type(L, -2) != LUA_TSTRING) {
      ok = bad_object_key(c, lua_gettop(L) - 1, w);
    } else {
      size_t len, lo = 0, hi = n;
      const char *k = lua_tolstring(L, -2, &len);
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = keycmp(c->ents[base + mid].key, c->ents[base + mid].len, k, len);
        if (r == 0)
          break;
        if (r < 0)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo >= hi) /* not recorded: a key the tool added */
        ok = add_member(c, lua_gettop(L) - 1, depth, w, NO_RANK);
    }
    lua_pop(L, 1);
    if (!ok) {
      lua_pop(L, 1);
      return 0;
    }
  }
  qsort(c->ents + base, n, sizeof(entry), by_rank);
  qsort(c->ents + base + n, c->nents - base - n, sizeof(entry), by_key);
  return 1;
}

/* The table at t, recorded with the key list at `list`: the recorded keys
 * still present in their recorded order, then any others sorted. Returns
 * NULL with *none set when no recorded key is left (the tool may have made
 * it an array: the caller classifies it afresh). */
static ob_value *conv_recorded(conv *c, int t, uint32_t depth, const where *w, int list, int *none) {
  lua_State *L = c->L;
  size_t base = c->nents;
  lua_Unsigned m = lua_rawlen(L, list);
  *none = 0;
  for (lua_Unsigned j = 1; j <= m; j++) {
    if (lua_rawgeti(L, list, (lua_Integer)j) != LUA_TSTRING) { /* only if someone edited the record */
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, -1);
    if (lua_rawget(L, t) == LUA_TNIL) { /* removed by the tool */
      lua_pop(L, 2);
      continue;
    }
    int ok = add_member(c, lua_gettop(L) - 1, depth, w, (size_t)j);
    lua_pop(L, 2);
    if (!ok)
      goto fail;
  }
  size_t present = c->nents - base, count = 0;
  if (!present) {
    *none = 1;
    return NULL;
  }
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (++count > present) {
      lua_pop(L, 1);
      break;
    }
  }
  if (count > present && !add_unrecorded(c, t, depth, w, base, present))
    goto fail;
  return build_object(c, base);
fail:
  drop_entries(c, base);
  return NULL;
}

/* The table at t as an array. `marked`: it carries the array metatable, so
 * its elements are 1..rawlen. Otherwise its first pair (an integer key) is
 * on the stack and its keys must be exactly 1..n. The fast path takes the
 * pairs as lua_next gives them, which is 1, 2, 3... for a table whose
 * elements sit in its array part; anything else falls back to counting the
 * keys and reading the rest by index. */
static ob_value *conv_array(conv *c, int t, uint32_t depth, const where *w, int marked) {
  lua_State *L = c->L;
  ob_value *a = ob_array();
  lua_Integer expect = 1;
  char kd[80];
  int more = 1;
  if (marked) {
    lua_pushnil(L);
    more = lua_next(L, t);
  }
  while (more && lua_isinteger(L, -2) && lua_tointeger(L, -2) == expect) {
    where cw = {w, NULL, 0, expect};
    ob_value *v = conv_value(c, lua_gettop(L), depth, &cw);
    lua_pop(L, 1);
    if (!v) {
      lua_pop(L, 1);
      goto fail;
    }
    a = ob_array_push(a, v);
    expect++;
    more = lua_next(L, t);
  }
  if (!more)
    return a; /* keys were exactly 1..expect-1, which is also the border */

  /* out of sequence: every remaining key must be an index we have not read */
  lua_pop(L, 1);
  lua_Integer n = marked ? (lua_Integer)lua_rawlen(L, t) : 0, count = expect - 1, max = count;
  do {
    int isint = lua_isinteger(L, -1);
    lua_Integer k = isint ? lua_tointeger(L, -1) : 0;
    if (!isint || k < expect || (marked && k > n)) {
      int type = lua_type(L, -1);
      describe_key(L, -1, kd, sizeof kd);
      lua_pop(L, 1);
      if (marked)
        fail(c, w, OB_EINVAL, "cannot convert an array with %s to JSON (its elements are 1..%lld)", kd,
             (long long)n);
      else if (type == LUA_TSTRING)
        fail(c, w, OB_EINVAL, "cannot convert a table with both string and integer keys to JSON (%s)", kd);
      else if (isint)
        fail(c, w, OB_EINVAL, "cannot convert a sparse array to JSON (%s; keys must be exactly 1..n)", kd);
      else
        fail(c, w, OB_EINVAL, "cannot convert a table with %s to JSON (keys must be strings, or exactly 1..n)",
             kd);
      goto fail;
    }
    count++;
    if (k > max)
      max = k;
    if ((more = lua_next(L, t)))
      lua_pop(L, 1);
  } while (more);
  if (!marked) {
    if (max != count) {
      fail(c, w, OB_EINVAL,
           "cannot convert a sparse array to JSON (key %lld in a table of %lld keys; keys must be exactly 1..n)",
           (long long)max, (long long)count);
      goto fail;
    }
    n = count;
  }
  for (lua_Integer i = expect; i <= n; i++) {
    where cw = {w, NULL, 0, i};
    if (lua_rawgeti(L, t, i) == LUA_TNIL) {
      lua_pop(L, 1);
      fail(c, &cw, OB_EINVAL, "nil in an array of %lld elements (arrays cannot have holes; use obelus.null)",
           (long long)n);
      goto fail;
    }
    ob_value *v = conv_value(c, lua_gettop(L), depth, &cw);
    lua_pop(L, 1);
    if (!v)
      goto fail;
    a = ob_array_push(a, v);
  }
  return a;
fail:
  ob_unref(a);
  return NULL;
}

static ob_value *conv_table_in(conv *c, int t, uint32_t depth, const where *w);

static ob_value *conv_table(conv *c, int t, uint32_t depth, const where *w) {
  if (depth > OB_MAX_DEPTH)
    return fail(c, w, OB_EDEPTH, "nested deeper than %d levels", OB_MAX_DEPTH);
  /* a table met along many paths (t = {t1, t1}, nested) is copied along each: the
   * account's limit holds at every table, not only at strings */
  if (c->checked && ob_mem_over())
    return fail(c, w, OB_ENOMEM, OB_MEM_LIMIT_FMT " (the result's tables)", ob_mem_limit_mb());
  open_table self = {lua_topointer(c->L, t), NULL};
  size_t h = ((uintptr_t)self.t >> 4) & (OPEN_BUCKETS - 1);
  for (const open_table *o = c->open[h]; o; o = o->next)
    if (o->t == self.t)
      return fail(c, w, OB_EDEPTH, "a table that contains itself cannot be converted to JSON");
  self.next = c->open[h];
  c->open[h] = &self;
  ob_value *r = conv_table_in(c, t, depth, w);
  c->open[h] = self.next;
  return r;
}

static ob_value *conv_table_in(conv *c, int t, uint32_t depth, const where *w) {
  lua_State *L = c->L;
  if (!lua_checkstack(L, 6))
    return fail(c, w, OB_ENOMEM, "out of Lua stack");
  int list = 0;
  if (lua_getmetatable(L, t)) {
    if (c->array_mt && lua_rawequal(L, -1, c->array_mt)) {
      lua_pop(L, 1);
      return conv_array(c, t, depth, w, 1);
    }
    /* a key list is known by its own metatable, the marker; a tool's metatable is ignored */
    int is_list = 0;
    if (c->order && lua_getmetatable(L, -1)) {
      is_list = lua_rawequal(L, -1, c->order);
      lua_pop(L, 1);
    }
    if (is_list)
      list = lua_gettop(L);
    else
      lua_pop(L, 1);
  }
  ob_value *r = NULL;
  int unordered = 1;
  if (list)
    r = conv_recorded(c, t, depth, w, list, &unordered);
  if (unordered) {
    lua_pushnil(L);
    if (!lua_next(L, t)) {
      r = ob_object();
    } else if (lua_type(L, -2) == LUA_TSTRING) {
      r = conv_object(c, t, depth, w);
    } else if (lua_isinteger(L, -2)) {
      r = conv_array(c, t, depth, w, 0);
    } else {
      char kd[80];
      describe_key(L, -2, kd, sizeof kd);
      lua_pop(L, 2);
      r = fail(c, w, OB_EINVAL, "cannot convert a table with %s to JSON (keys must be strings, or exactly 1..n)",
               kd);
    }
  }
  if (list)
    lua_pop(L, 1);
  return r;
}

static ob_value *conv_value(conv *c, int idx, uint32_t depth, const where *w) {
  lua_State *L = c->L;
  int type = lua_type(L, idx);
  switch (type) {
  case LUA_TBOOLEAN: return ob_bool(lua_toboolean(L, idx));
  case LUA_TNUMBER: {
    if (lua_isinteger(L, idx))
      return ob_int((int64_t)lua_tointeger(L, idx));
    double d = (double)lua_tonumber(L, idx);
    if (isfinite(d))
      return ob_real(d);
    return fail(c, w, OB_ETYPE, "cannot convert %s to JSON", isnan(d) ? "NaN" : d > 0 ? "inf" : "-inf");
  }
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    size_t bad = utf8_invalid_at(s, len);
    if (bad < len)
      return fail(c, w, OB_EINVAL, "cannot convert a string that is not valid UTF-8 to JSON (byte %zu)", bad);
    if (!c->checked)
      return ob_string(s, len);
    /* the memory account's limit holds here (ob_mem.h) */
    ob_value *v = ob_mem_would_pass(ob_mem_cur, len) ? NULL : ob_string_try(s, len);
    if (v)
      return v;
    /* refused by the account: the string with its header would pass it (the header's
     * size is the value module's; 256 bytes is more than any) */
    if (ob_mem_would_pass(ob_mem_cur, len + 256))
      return fail(c, w, OB_ENOMEM, OB_MEM_LIMIT_FMT " (a string of %zu bytes)", ob_mem_limit_mb(),
                  len);
    return fail(c, w, OB_ENOMEM, "out of memory (a string of %zu bytes)", len);
  }
  case LUA_TLIGHTUSERDATA:
    if (!lua_touserdata(L, idx))
      return ob_null();
    return fail(c, w, OB_ETYPE, "cannot convert a light userdata to JSON (JSON null is obelus.null)");
  case LUA_TTABLE: return conv_table(c, idx, depth + 1, w);
  case LUA_TUSERDATA: { /* a view (ob_view.c) is its value, as it is: no copy */
    ob_value *v = ob_view_value(L, idx);
    if (v && depth + ob_depth(v) > OB_MAX_DEPTH)
      return fail(c, w, OB_EDEPTH, "nested deeper than %d levels", OB_MAX_DEPTH);
    if (v)
      return ob_ref(v);
    return fail(c, w, OB_ETYPE, "cannot convert a userdata to JSON");
  }
  case LUA_TNIL: return fail(c, w, OB_ETYPE, "cannot convert nil to JSON (JSON null is obelus.null)");
  default: return fail(c, w, OB_ETYPE, "cannot convert a %s to JSON", lua_typename(L, type));
  }
}

ob_value *ob_lua_to_value_named(lua_State *L, int idx, const char *name, ob_error *err) {
  conv c;
  c.L = L;
  c.root = name ? name : "value";
  c.err = err;
  void *ud;
  c.checked = lua_getallocf(L, &ud) == ob_pool_lua_alloc; /* a host's own state is not */
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) /* a scalar needs none of the set-up below */
    return conv_value(&c, idx, 0, NULL);
  int top = lua_gettop(L);
  if (!lua_checkstack(L, 8))
    return fail(&c, NULL, OB_ENOMEM, "out of Lua stack");
  /* Looking up existing registry names allocates nothing: the names are
   * interned strings held by the registry itself. */
  c.array_mt = lua_rawgetp(L, LUA_REGISTRYINDEX, &array_mt_key) == LUA_TTABLE ? lua_gettop(L) : 0;
  c.order = lua_rawgetp(L, LUA_REGISTRYINDEX, &key_order_key) == LUA_TTABLE ? lua_gettop(L) : 0;
  c.ents = c.inline_ents;
  c.nents = 0;
  c.capents = INLINE_ENTRIES;
  memset(c.keys, 0, sizeof c.keys);
  memset(c.open, 0, sizeof c.open);
  ob_value *v = conv_value(&c, idx, 0, NULL);
  lua_settop(L, top);
  for (size_t i = 0; i < KEY_CACHE; i++)
    ob_unref(c.keys[i].key);
  if (c.ents != c.inline_ents)
    free(c.ents);
  return v;
}

ob_value *ob_lua_to_value(lua_State *L, int idx, ob_error *err) {
  return ob_lua_to_value_named(L, idx, NULL, err);
}

/* --- the functions obelus.core and a tool's `obelus` share (ob_luamod.c,
 * ob_runtime.c) ------------------------------------------------------------- */

/* Pushes text (malloc'ed) as a Lua string and frees it, even when Lua runs
 * out of memory doing so. */
typedef struct text {
  const char *s;
  size_t len;
} text;

static int push_text_protected(lua_State *L) {
  const text *t = lua_touserdata(L, 1);
  lua_pushlstring(L, t->s, t->len);
  return 1;
}

int ob_lua_push_text_and_free(lua_State *L, char *s, size_t len) {
  text t = {s, len};
  lua_pushcfunction(L, push_text_protected);
  lua_pushlightuserdata(L, &t);
  int rc = lua_pcall(L, 1, 1, 0);
  free(s);
  if (rc != LUA_OK)
    return lua_error(L);
  return 1;
}

/* Pushes v (a new reference, consumed) as a Lua value. */
int ob_lua_push_value_and_unref(lua_State *L, ob_value *v) {
  ob_error err;
  int rc = ob_lua_push_safe(L, v, &err);
  ob_unref(v);
  if (rc != OB_OK)
    return luaL_error(L, "%s", err.msg);
  return 1;
}

/* --- JSON text and arrays, as Lua functions --------------------------------- */

int ob_lua_decode(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  ob_error err;
  ob_value *v = ob_json_parse(s, len, &err);
  if (!v)
    return luaL_error(L, "invalid JSON: %s", err.msg);
  return ob_lua_push_value_and_unref(L, v);
}

int ob_lua_encode(lua_State *L) {
  luaL_checkany(L, 1);
  int flags = lua_toboolean(L, 2) ? OB_JSON_PRETTY : OB_JSON_COMPACT;
  ob_error err;
  ob_value *v = ob_lua_to_value(L, 1, &err);
  if (!v)
    return luaL_error(L, "%s", err.msg);
  size_t len;
  char *s = ob_json_print(v, flags, &len);
  ob_unref(v);
  return ob_lua_push_text_and_free(L, s, len);
}

/* array(t): marks t (or a new table) as an array and returns it. */
int ob_lua_array(lua_State *L) {
  if (lua_isnoneornil(L, 1))
    lua_newtable(L);
  else
    luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  ob_lua_push_array_mt(L);
  if (lua_getmetatable(L, 1) && !lua_rawequal(L, -1, -2))
    return luaL_error(L, "obelus.array: the table already has another metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

int ob_lua_totable(lua_State *L) {
  luaL_checkany(L, 1);
  ob_value *v = ob_view_value(L, 1);
  lua_settop(L, 1);
  if (v)
    ob_lua_push(L, v); /* the deep copy: array metatable, key lists */
  return 1;
}

void ob_lua_new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                      lua_CFunction gc, lua_CFunction close, lua_CFunction tostring) {
  if (luaL_newmetatable(L, name)) {
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
}
