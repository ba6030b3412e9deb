/* ob_lua.h -- the Lua bridge: ob_value <-> Lua value, exactly (plan-format §9).
 * Every tool call's params go in through ob_lua_push and its result comes back through ob_lua_to_value. */
#ifndef OB_LUA_H
#define OB_LUA_H

#include <lauxlib.h>
#include <lua.h>

#include "base/ob_error.h"
#include "base/ob_value.h"

/*
 * How JSON looks in Lua:
 *
 *   null     obelus.null: the light userdata NULL (the same value as cjson.null)
 *   integer  a Lua integer;  a real: a Lua float (1.0 stays a float)
 *   string   a Lua string (may hold NUL bytes; UTF-8)
 *   array    a table with elements 1..n and the shared array metatable
 *            (registry["obelus.array"]), so that it stays an array when empty
 *   object   a table whose metatable is its key list (the order of its
 *            keys), so that converting it back gives its original keys in their original
 *            order (those still present), then keys added in Lua, sorted
 *            bytewise. A table built in Lua has no record: all its keys
 *            come out sorted.
 *
 * A call's params (ob_lua_push_call) are the exception: there a value below the root
 * with OB_VIEW_MIN entries or more (counted at every depth, once resolved) is a
 * read-only view (ob_view.h), and converting back takes a view as the value it shows.
 *
 * All per-state data (the array metatable, the key-list marker, the cache of
 * key lists) lives in the registry of the lua_State, so two engines in one
 * process are independent. The keys are light userdata (addresses in this
 * code): fast, but two copies of this code loaded into ONE lua_State would
 * not share them (the array metatable is also registered by name, and
 * ob_lua_push_array_mt finds it by either).
 */

/* Registry name of the array metatable (luaL_newmetatable's name). */
#define OB_LUA_ARRAY_MT "obelus.array"

/* Creates the registry entries the bridge uses, when missing. Idempotent.
 * ob_lua_push calls it itself; hosts may call it once up front. May raise a
 * Lua memory error. */
void ob_lua_open(lua_State *L);

/* Pushes the array metatable (creating it when missing). */
void ob_lua_push_array_mt(lua_State *L);

/* 1 when the value at idx is a table carrying the array metatable. */
int ob_lua_is_array(lua_State *L, int idx);

/* Pushes a fresh Lua copy of v (borrowed): a snapshot, nothing done to it
 * in Lua changes v. Pushes exactly one value. Holds no C resources while it
 * runs, so the only Lua error it can raise (out of memory, or a C value
 * nested deeper than OB_MAX_DEPTH, which the core never builds) leaks
 * nothing; call it where a Lua error is acceptable. */
void ob_lua_push(lua_State *L, const ob_value *v);

/* The key list of the last object pushed by ob_lua_push_call with this
 * cache (of: a reference to that object, ref: the list's registry
 * reference), so that the params of every call of a tool, which share their
 * keys, share one list found by comparing key pointers. Zeroed: empty. */
typedef struct ob_lua_keys {
  ob_value *of;
  int ref;
} ob_lua_keys;

/* Where ob_lua_push_call finds the bridge's tables without a registry lookup
 * (stack or upvalue indices of what ob_lua_push_tables pushes), or NULL. */
typedef struct ob_lua_tables {
  int array_mt, order, shapes;
} ob_lua_tables;
/* Pushes the bridge's three tables (array metatable, key list marker, key
 * lists by signature), in that order: for a C closure's upvalues. */
void ob_lua_push_tables(lua_State *L);

/* Pushes a call's params (raw: the call as written, borrowed), as
 * ob_lua_push does but for big values below the root (views: ob_view.h),
 * with (subst) each string that is a reference expression
 * replaced by the next of vals (resolved in the order ob_plan found the
 * references) and each "††" literal unescaped, except under the top-level
 * keys that begin with '_' (meta-properties are passed as written). Raises
 * Lua errors as ob_lua_push: call it inside the call's coroutine. */
void ob_lua_push_call(lua_State *L, const ob_value *raw, ob_value *const *vals, size_t nvals,
                      int subst, ob_lua_keys *keys, const ob_lua_tables *tables);
/* Empties a cache (L NULL: the state is gone, only the C reference is dropped). */
void ob_lua_keys_free(lua_State *L, ob_lua_keys *keys);

/* The same in protected mode, for C code that holds resources: OB_OK and one
 * value pushed, or a negative code with err filled and nothing pushed. */
int ob_lua_push_safe(lua_State *L, const ob_value *v, ob_error *err);

/* Converts the Lua value at idx to a new ob_value, or returns NULL with err
 * filled. Never raises a Lua error, never leaves anything on the Lua stack,
 * never changes the Lua value. The rules:
 *   - a table with the array metatable: elements 1..n, n its raw length
 *     (a nil in 1..n, or any other key, is an error);
 *   - any other table (its metatable, if any, is ignored: raw access only):
 *     empty -> {}, keys exactly 1..n -> array, all keys strings -> object
 *     (each valid UTF-8 without a NUL byte, else OB_EINVAL),
 *     anything else (mixed keys, sparse integer keys, float, boolean or
 *     table keys) -> OB_EINVAL;
 *   - integer -> OB_INT; float -> OB_REAL (NaN, inf -> OB_ETYPE);
 *     boolean; string (must be valid UTF-8, else OB_EINVAL); obelus.null;
 *   - a view (ob_view.h): a new reference to its value, as it is;
 *   - nil, functions, coroutines, other userdata -> OB_ETYPE;
 *   - a table met again inside itself (a cycle), or nested deeper than
 *     OB_MAX_DEPTH -> OB_EDEPTH.
 * The message names the place, from the root named "value", with Lua's
 * 1-based indices: `value.items[3]: cannot convert a function to JSON`. */
ob_value *ob_lua_to_value(lua_State *L, int idx, ob_error *err);

/* Same, with the root named `name` in messages ("result", "message", ...). */
ob_value *ob_lua_to_value_named(lua_State *L, int idx, const char *name, ob_error *err);

/* A message handler for lua_pcall: the error message (or a value's
 * tostring) with a traceback of where it was raised. */
int ob_lua_traceback(lua_State *L);

/* Lua functions the host module (obelus.core) and a tool's `obelus` both give:
 * decode(text) -> value (raises "invalid JSON: ..."); encode(value [, pretty]) ->
 * text; array([t]) -> t marked a JSON array (raises when t has another metatable). */
int ob_lua_decode(lua_State *L);
int ob_lua_encode(lua_State *L);
int ob_lua_array(lua_State *L);
/* totable(v): a deep copy of a view (ob_view.h) as plain tables, as ob_lua_push makes
 * them (array metatable, key lists); anything else is returned unchanged. Given by the
 * runtime and obelus.core. */
int ob_lua_totable(lua_State *L);
/* Makes the metatable `name` (luaL_newmetatable; nothing when it exists): methods as
 * __index, and __gc, __close, __tostring. For a host's userdata classes. */
void ob_lua_new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                      lua_CFunction gc, lua_CFunction close, lua_CFunction tostring);
/* Push s (malloc'ed, freed even when Lua runs out of memory pushing it) as a string;
 * push v (a reference, consumed) as a Lua value, raising what stops it. Return 1. */
int ob_lua_push_text_and_free(lua_State *L, char *s, size_t len);
int ob_lua_push_value_and_unref(lua_State *L, ob_value *v);

#endif
