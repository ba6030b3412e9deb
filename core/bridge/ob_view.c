/* ob_view.c -- read-only views: a big JSON value handed to a tool without copying it.
 * A call's params that are big objects or arrays reach Lua as views (plan-format §9, docs/tools.md).
 *
 * Design
 * ------
 * A view is a full userdata holding one reference to an immutable ob_value (the
 * very value the log holds) and a metatable that makes it read like the table the
 * bridge would have built (ob_lua.c): v.key and v[i] (1-based) give scalars as Lua
 * values (null as obelus.null) and objects and arrays inside as views of their own;
 * #v is an array's length (0 for an object, as for a table with string keys only);
 * pairs(v) walks an object in its key order and an array 1..n; ipairs works as on a
 * table (Lua 5.4's ipairs indexes through __index). Plain next() refuses a userdata:
 * obelus.next(v, k) is next for views and tables alike. Writing raises an error that
 * says what to do: obelus.totable(v) is the deep copy the bridge used to make (it is
 * the bridge's: ob_lua_totable, so that this file needs only ob_lua_scalar.h of it).
 * Returning a view, alone or inside a table, gives back its value: ob_lua_to_value
 * takes a reference (ob_view_value), so the result is the same JSON, not a copy, and
 * cjson.encode in the engine's state prints a view with obelus's own printer
 * (runtime.lua wraps it). Views compare equal (==) when they show the same value.
 *
 * Which values become views (ob_lua_push_call): a value at any depth of a call's
 * params but the params object itself, when its entries counted at every depth, once
 * resolved, reach OB_VIEW_MIN (counting stops there: a few steps, whatever its size);
 * everything inside a view is a view too, whatever its size, so that nothing reached
 * through a view can be written to (a write into a copy would be lost when the view
 * is returned). Smaller values are tables, as before, and all they hold. The rule is
 * the resolved params', so a tool sees the same whether they were resolved before its
 * call (a schema, an approver, a retry) or are pushed from the call as written and
 * its references' values: a reference's value is judged as it is; a container written
 * in the plan is judged on what it resolves to, and when big, resolved (sharing its
 * references' values) and shown as a view.
 *
 * Costs: making a view is one userdata and one reference, O(1) whatever the value's
 * size. v.key is one lookup in the object's hash trie (O(log32 n)), v[i] one in the
 * array's vector (O(log32 n)); a scalar is pushed as the bridge would push it, a
 * container as a new view (one small userdata a read: v.a == v.a holds through
 * __eq, not through identity). pairs over an object keeps a cursor in the view: when
 * the key it is given is the one it handed out last (a generic for), the next entry
 * comes from the cursor, amortised O(1); any other key is found by its position in
 * the index, O(log32 n). Each key pushed is a Lua string interned as a table's key
 * would be. Lua's collector does not see the value's size: a view costs Lua about
 * 110 bytes, while the value may be megabytes; that is harmless here, as the log holds
 * the same value for the run's life anyway, and a view only delays its release
 * until the view is collected.
 *
 * The cut-off, OB_VIEW_MIN = 64, measured (bench/obelus-bench cutoff: a plain
 * lua_State; a value handed to a Lua function as the bridge's tables or as a view,
 * which reads one entry or walks all with pairs; ns, medians of 5; n entries counted
 * at every depth; records: n/5 records of 4 fields; bench/results/cutoff.txt):
 *
 *                 one entry              every entry
 *                 table   view           table   view   view/table
 *   object  16     1102    271            2059    1703   0.83
 *   object  64     3323    257            7192    5884   0.82
 *   array   16      454    225            1369    1667   1.22
 *   array   64     1243    178            4885    5864   1.20
 *   records 16     1208    368            3237    2978   0.92
 *   records 64     4120    381           10028    9874   0.98
 *   object 1024   69517    266          130184  136074   1.05
 *
 * A view costs the same 180-380 ns to hand over and read once, whatever the size; a
 * walk of all entries costs about what building and walking tables does (arrays 1.2x:
 * a table's own next is cheap). So views win from a handful of entries on, but below
 * 64 a table costs at most ~4 us, a call's worth, and tables keep plain Lua's semantics
 * (type, next, writes) for the small params nearly every tool gets: from 64 entries on
 * the view's saving is 6-13x on a partial read and its walk is within 20%.
 *
 * Measured in runs (bench/obelus-bench): 60 calls each reading one key of a
 * 150,000-key, 10 MB input document, 30-36 s before views (the whole document built as
 * tables for each call), 0.2-0.4 ms with them; fanout 100000's join, which walks a
 * 100,000-key object, from ~40 ms to ~10 ms.
 */
#include <lauxlib.h>
#include <string.h>

#include "bridge/ob_lua_scalar.h"
#include "bridge/ob_view.h"

typedef struct view {
  const char *tag; /* &view_tag: with the block's size, how a view is known (below) */
  ob_value *v;     /* our reference; NULL once collected */
  /* objects: where pairs left off, and the key it handed out last */
  ob_object_iter cur;
  const ob_value *cur_key;
} view;

static const char view_mt_key = 0; /* registry[&view_mt_key]: the views' metatable */
static const char view_tag = 0;

static const char read_only[] =
    "obelus: params are read-only; use obelus.totable(v) for a copy you can change";

/* --- which values ------------------------------------------------------------------ */

size_t ob_view_count(const ob_value *v, size_t limit) {
  ob_type t = ob_typeof(v);
  size_t n = t == OB_OBJECT ? ob_object_len(v) : t == OB_ARRAY ? ob_array_len(v) : 0;
  if (n >= limit || ob_depth(v) <= 1)
    return n;
  size_t c = n;
  for (size_t i = 0; i < n && c < limit; i++) {
    ob_value *k, *x;
    if (t == OB_OBJECT)
      ob_object_at(v, i, &k, &x); /* n < limit: a small object, or a few steps of a trie */
    else
      x = ob_array_get(v, i);
    if (ob_depth(x) > 0)
      c += ob_view_count(x, limit - c);
  }
  return c;
}

int ob_view_big(const ob_value *v) {
  ob_type t = ob_typeof(v);
  return (t == OB_OBJECT || t == OB_ARRAY) && ob_view_count(v, OB_VIEW_MIN) >= OB_VIEW_MIN;
}

/* --- making one -------------------------------------------------------------------- */

static void push_meta(lua_State *L);

/* Pushes a view of v with the metatable at mt. */
static void push_view(lua_State *L, const ob_value *v, int mt) {
  view *w = lua_newuserdatauv(L, sizeof *w, 0);
  w->tag = &view_tag;
  w->v = NULL;
  w->cur_key = NULL;
  lua_pushvalue(L, mt);
  lua_setmetatable(L, -2);
  w->v = ob_ref((ob_value *)v); /* last: a memory error above leaks nothing */
}

void ob_view_push(lua_State *L, const ob_value *v) {
  luaL_checkstack(L, 3, "obelus: Lua stack exhausted");
  push_meta(L);
  push_view(L, v, lua_gettop(L));
  lua_remove(L, -2);
}

ob_value **ob_view_push_slot(lua_State *L) {
  luaL_checkstack(L, 3, "obelus: Lua stack exhausted");
  push_meta(L);
  push_view(L, NULL, lua_gettop(L));
  lua_remove(L, -2);
  return &((view *)lua_touserdata(L, -1))->v;
}

/* Pushes what a view shows for x: a scalar as a Lua value, a container as a view. */
static void push_member(lua_State *L, const ob_value *x, int mt) {
  ob_type t = ob_typeof(x);
  if (t == OB_OBJECT || t == OB_ARRAY)
    push_view(L, x, mt);
  else
    ob_lua_push_scalar(L, x); /* as the bridge pushes it; cannot fail but for memory */
}

/* The view at idx, or NULL. A view is known by its block: a full userdata of a view's
 * size that starts with the address of view_tag, which only this file writes (Lua code
 * cannot make a userdata; C code could forge one, as it could do anything). Two API
 * calls, no metatable or registry lookup: pairs over a view checks it at every step. */
static view *as_view(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || lua_rawlen(L, idx) != sizeof(view))
    return NULL;
  view *w = lua_touserdata(L, idx);
  return w->tag == &view_tag && w->v ? w : NULL;
}

ob_value *ob_view_value(lua_State *L, int idx) {
  view *w = as_view(L, idx);
  return w ? w->v : NULL;
}

static view *check_view(lua_State *L, int idx) {
  view *w = as_view(L, idx);
  if (!w)
    luaL_typeerror(L, idx, "obelus view");
  return w;
}

/* --- reading ----------------------------------------------------------------------- */

static int view_index(lua_State *L) {
  view *w = check_view(L, 1);
  const ob_value *v = w->v, *x = NULL;
  if (ob_typeof(v) == OB_OBJECT) {
    if (lua_type(L, 2) == LUA_TSTRING) {
      size_t len;
      const char *k = lua_tolstring(L, 2, &len);
      x = ob_object_get(v, k, len);
    }
  } else if (lua_type(L, 2) == LUA_TNUMBER) { /* 1.0 reads [1], as in a table; "1" does not */
    int exact;
    lua_Integer i = lua_tointegerx(L, 2, &exact);
    if (exact && i >= 1 && (lua_Unsigned)i <= ob_array_len(v))
      x = ob_array_get(v, (size_t)i - 1);
  }
  if (x)
    push_member(L, x, lua_upvalueindex(1));
  else
    lua_pushnil(L);
  return 1;
}

static int view_newindex(lua_State *L) { return luaL_error(L, "%s", read_only); }

static int view_len(lua_State *L) {
  view *w = check_view(L, 1);
  lua_pushinteger(L, ob_typeof(w->v) == OB_ARRAY ? (lua_Integer)ob_array_len(w->v) : 0);
  return 1;
}

/* next(view, key), the view at 1 and the key at 2 (or none), with the metatable at mt:
 * pushes the next key and value, or nil. */
static int view_next_at(lua_State *L, view *w, int mt) {
  const ob_value *v = w->v;
  if (ob_typeof(v) == OB_ARRAY) {
    lua_Integer i = 0;
    if (!lua_isnoneornil(L, 2)) {
      int exact = lua_type(L, 2) == LUA_TNUMBER;
      i = exact ? lua_tointegerx(L, 2, &exact) : 0;
      if (!exact || i < 1 || (lua_Unsigned)i > ob_array_len(v))
        return luaL_error(L, "invalid key to 'next'");
    }
    if ((lua_Unsigned)i >= ob_array_len(v)) {
      lua_pushnil(L);
      return 1;
    }
    lua_pushinteger(L, i + 1);
    push_member(L, ob_array_get(v, (size_t)i), mt);
    return 2;
  }
  int kt = lua_type(L, 2);
  if (kt == LUA_TNIL || kt == LUA_TNONE) {
    ob_object_iter_init(&w->cur, v);
  } else {
    size_t len;
    const char *k = kt == LUA_TSTRING ? lua_tolstring(L, 2, &len) : NULL;
    const ob_value *last = w->cur_key;
    if (!k)
      return luaL_error(L, "invalid key to 'next'");
    if (!last || ob_string_len(last) != len || memcmp(ob_string_ptr(last), k, len) != 0) {
      long at = ob_object_index(v, k, len); /* not where the cursor is: find it */
      if (at < 0)
        return luaL_error(L, "invalid key to 'next'");
      ob_object_iter_init(&w->cur, v);
      ob_object_iter_seek(&w->cur, (size_t)at + 1);
    }
  }
  ob_value *key, *x;
  if (!ob_object_iter_next(&w->cur, &key, &x)) {
    w->cur_key = NULL;
    lua_pushnil(L);
    return 1;
  }
  w->cur_key = key;
  lua_pushlstring(L, ob_string_ptr(key), ob_string_len(key));
  push_member(L, x, mt);
  return 2;
}

static int view_next(lua_State *L) {
  return view_next_at(L, check_view(L, 1), lua_upvalueindex(1));
}

static int view_pairs(lua_State *L) {
  check_view(L, 1);
  lua_pushvalue(L, lua_upvalueindex(2)); /* view_next, made once */
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

static int view_eq(lua_State *L) {
  view *a = as_view(L, 1), *b = as_view(L, 2);
  lua_pushboolean(L, a && b && a->v == b->v);
  return 1;
}

static int view_tostring(lua_State *L) {
  view *w = check_view(L, 1);
  if (ob_typeof(w->v) == OB_ARRAY)
    lua_pushfstring(L, "obelus.view: array of %I (%p)", (lua_Integer)ob_array_len(w->v), (void *)w);
  else
    lua_pushfstring(L, "obelus.view: object of %I keys (%p)", (lua_Integer)ob_object_len(w->v),
                    (void *)w);
  return 1;
}

static int view_gc(lua_State *L) {
  view *w = lua_touserdata(L, 1);
  if (w) {
    ob_unref(w->v);
    w->v = NULL;
  }
  return 0;
}

/* Pushes the metatable, made on first use. Every metamethod has it as upvalue 1, for
 * the views it makes of what is inside (no registry lookup). */
static void push_meta(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &view_mt_key) == LUA_TTABLE)
    return;
  lua_pop(L, 1);
  luaL_checkstack(L, 6, "obelus: Lua stack exhausted");
  lua_createtable(L, 0, 10);
  int mt = lua_gettop(L);
  static const struct {
    const char *name;
    lua_CFunction fn;
  } methods[] = {{"__index", view_index},   {"__newindex", view_newindex},
                 {"__len", view_len},       {"__eq", view_eq},
                 {"__tostring", view_tostring}};
  for (size_t i = 0; i < sizeof methods / sizeof *methods; i++) {
    lua_pushvalue(L, mt);
    lua_pushcclosure(L, methods[i].fn, 1);
    lua_setfield(L, mt, methods[i].name);
  }
  lua_pushvalue(L, mt);
  lua_pushvalue(L, mt);
  lua_pushcclosure(L, view_next, 1);
  lua_pushcclosure(L, view_pairs, 2);
  lua_setfield(L, mt, "__pairs");
  lua_pushcfunction(L, view_gc);
  lua_setfield(L, mt, "__gc");
  lua_pushliteral(L, "obelus.view");
  lua_setfield(L, mt, "__name");
  lua_pushliteral(L, "obelus.view"); /* getmetatable(v) shows this; the table stays ours */
  lua_setfield(L, mt, "__metatable");
  lua_pushvalue(L, mt);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &view_mt_key);
}

/* --- the module's functions -------------------------------------------------------- */

int ob_view_lua_is_view(lua_State *L) {
  ob_value *v = ob_view_value(L, 1);
  if (v)
    lua_pushstring(L, ob_typeof(v) == OB_ARRAY ? "array" : "object");
  else
    lua_pushboolean(L, 0);
  return 1;
}

int ob_view_lua_next(lua_State *L) {
  if (ob_view_value(L, 1)) {
    lua_settop(L, 2);
    push_meta(L);
    return view_next_at(L, lua_touserdata(L, 1), 3);
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  if (lua_next(L, 1))
    return 2;
  lua_pushnil(L);
  return 1;
}
