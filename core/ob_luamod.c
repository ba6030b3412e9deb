/* ob_luamod.c -- the Lua C module `obelus.core`: JSON text through the bridge, the null and
 * array markers, and the message log as a userdata (for specs, tools and hosts). */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "ob_log.h"
#include "ob_lua.h"

#define LOG_MT "obelus.log"

/* Every function below follows one rule: all Lua calls that may raise (argument
 * checks, field reads) happen before it takes any C reference, and a Lua error
 * is raised only after every C reference is released. The message is copied
 * to Lua by luaL_error before the longjmp, so it may live in a local ob_error. */

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

static int push_text_and_free(lua_State *L, char *s, size_t len) {
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
static int push_value_and_unref(lua_State *L, ob_value *v) {
  ob_error err;
  int rc = ob_lua_push_safe(L, v, &err);
  ob_unref(v);
  if (rc != OB_OK)
    return luaL_error(L, "%s", err.msg);
  return 1;
}

/* --- JSON ----------------------------------------------------------------- */

static int core_decode(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  ob_error err;
  ob_value *v = ob_json_parse(s, len, &err);
  if (!v)
    return luaL_error(L, "invalid JSON: %s", err.msg);
  return push_value_and_unref(L, v);
}

static int core_encode(lua_State *L) {
  luaL_checkany(L, 1);
  int flags = lua_toboolean(L, 2) ? OB_JSON_PRETTY : OB_JSON_COMPACT;
  ob_error err;
  ob_value *v = ob_lua_to_value(L, 1, &err);
  if (!v)
    return luaL_error(L, "%s", err.msg);
  size_t len;
  char *s = ob_json_print(v, flags, &len);
  ob_unref(v);
  return push_text_and_free(L, s, len);
}

/* array(t): marks t (or a new table) as an array and returns it. */
static int core_array(lua_State *L) {
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

/* --- the log -------------------------------------------------------------- */

typedef struct lua_log {
  ob_log *log; /* NULL once closed */
} lua_log;

static ob_log *check_log(lua_State *L) {
  lua_log *l = luaL_checkudata(L, 1, LOG_MT);
  if (!l->log)
    luaL_error(L, "the log is closed");
  return l->log;
}

static int core_log(lua_State *L) {
  lua_log *l = lua_newuserdatauv(L, sizeof *l, 0);
  l->log = NULL; /* the metatable first: a log never exists without its __gc */
  luaL_setmetatable(L, LOG_MT);
  l->log = ob_log_new();
  return 1;
}

static int log_close(lua_State *L) {
  lua_log *l = luaL_checkudata(L, 1, LOG_MT);
  ob_log_free(l->log);
  l->log = NULL;
  return 0;
}

static int log_tostring(lua_State *L) {
  lua_log *l = luaL_checkudata(L, 1, LOG_MT);
  if (l->log)
    lua_pushfstring(L, "obelus.log (%I messages)", (lua_Integer)ob_log_len(l->log));
  else
    lua_pushliteral(L, "obelus.log (closed)");
  return 1;
}

static int log_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)ob_log_len(check_log(L)));
  return 1;
}

/* log:append(msg): msg a table or a JSON text. Returns its 0-based position. */
static int log_append(lua_State *L) {
  ob_log *log = check_log(L);
  luaL_checkany(L, 2);
  ob_error err;
  ob_value *msg;
  if (lua_type(L, 2) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, 2, &len);
    if (!(msg = ob_json_parse(s, len, &err)))
      return luaL_error(L, "invalid JSON: %s", err.msg);
  } else if (!(msg = ob_lua_to_value_named(L, 2, "message", &err))) {
    return luaL_error(L, "%s", err.msg);
  }
  long pos = ob_log_append(log, msg, &err);
  ob_unref(msg);
  if (pos < 0)
    return luaL_error(L, "%s", err.msg);
  lua_pushinteger(L, (lua_Integer)pos);
  return 1;
}

/* Reads opts[name] as a string without NUL bytes: def when absent. */
static const char *opt_string(lua_State *L, int opts, const char *fn, const char *name, const char *def) {
  int type = lua_getfield(L, opts, name);
  if (type == LUA_TNIL)
    return def;
  size_t len;
  const char *s = type == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  if (!s || strlen(s) != len)
    luaL_error(L, "%s: \"%s\" must be a string without NUL bytes, not %s", fn, name,
               s ? "one with a NUL byte" : luaL_typename(L, -1));
  return s;
}

static int valid_kind(const char *s) {
  if (!(*s == '_' || ((*s | 32) >= 'a' && (*s | 32) <= 'z')))
    return 0;
  for (s++; *s; s++)
    if (!(*s == '_' || *s == '-' || (*s >= '0' && *s <= '9') || ((*s | 32) >= 'a' && (*s | 32) <= 'z')))
      return 0;
  return 1;
}

/* log:append_output{kind=, instance=, path=, method=, value=, call=}: the
 * output message of a call, as the engine writes it. kind defaults to
 * "state", method to "set"; path (required, "" for the whole document) uses
 * SPEC 2's path syntax without a kind. Returns the position. */
static int log_append_output(lua_State *L) {
  static const char fn[] = "append_output";
  ob_log *log = check_log(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  const char *kind = opt_string(L, 2, fn, "kind", "state");
  const char *instance = opt_string(L, 2, fn, "instance", NULL);
  const char *method_name = opt_string(L, 2, fn, "method", "set");
  size_t pathlen;
  if (lua_getfield(L, 2, "path") != LUA_TSTRING)
    return luaL_error(L, "%s: \"path\" must be a string (\"\" for the whole document)", fn);
  const char *pathtext = lua_tolstring(L, -1, &pathlen);
  if (lua_getfield(L, 2, "value") == LUA_TNIL)
    return luaL_error(L, "%s: \"value\" is required (JSON null is obelus.null)", fn);
  int value_idx = lua_gettop(L);
  int call_idx = lua_getfield(L, 2, "call") == LUA_TNIL ? 0 : lua_gettop(L);
  if (!valid_kind(kind))
    return luaL_error(L, "%s: \"%s\" is not a kind name ([A-Za-z_][A-Za-z0-9_-]*)", fn, kind);
  int method = ob_method_parse(method_name, strlen(method_name));
  if (method < 0)
    return luaL_error(L, "%s: \"method\" must be one of set, merge, assign, push, concat (not \"%s\")", fn,
                      method_name);

  /* From here on C references are held: no Lua error until they are released. */
  ob_error err;
  ob_path path;
  if (ob_path_parse(pathtext, pathlen, &path, &err) != OB_OK)
    return luaL_error(L, "%s: path: %s", fn, err.msg);
  ob_value *value = ob_lua_to_value_named(L, value_idx, "value", &err), *call = NULL;
  long pos = -1;
  if (value && (!call_idx || (call = ob_lua_to_value_named(L, call_idx, "call", &err))))
    pos = ob_log_append_output(log, kind, instance, &path, (ob_method)method, value, call, &err);
  ob_unref(value);
  ob_unref(call);
  ob_path_free(&path);
  if (pos < 0)
    return luaL_error(L, "%s", err.msg);
  lua_pushinteger(L, (lua_Integer)pos);
  return 1;
}

/* log:message(i): the i-th message (0-based) as appended, or nil. */
static int log_message(lua_State *L) {
  ob_log *log = check_log(L);
  lua_Integer i = luaL_checkinteger(L, 2);
  if (i < 0 || (lua_Unsigned)i >= (lua_Unsigned)ob_log_len(log)) {
    lua_pushnil(L);
    return 1;
  }
  return push_value_and_unref(L, ob_log_message(log, (size_t)i));
}

/* log:resolve(expr [, {at = N, instance = "X"}]): the value, or nil when absent. */
static int log_resolve(lua_State *L) {
  static const char fn[] = "resolve";
  ob_log *log = check_log(L);
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  size_t at = OB_LOG_NOW;
  const char *instance = NULL;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    int type = lua_getfield(L, 3, "at");
    if (type != LUA_TNIL) {
      if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0)
        return luaL_error(L, "%s: \"at\" must be an integer >= 0", fn);
      at = (size_t)lua_tointeger(L, -1);
    }
    instance = opt_string(L, 3, fn, "instance", NULL);
  }
  ob_error err;
  ob_expr e;
  if (ob_expr_parse(s, len, OB_EXPR_INPUT, &e, &err) != OB_OK)
    return luaL_error(L, "%s", err.msg);
  ob_value *v = ob_log_eval(log, &e, instance, at);
  ob_expr_free(&e);
  if (!v) {
    lua_pushnil(L);
    return 1;
  }
  return push_value_and_unref(L, v);
}

static const luaL_Reg log_methods[] = {
    {"append", log_append},   {"append_output", log_append_output},
    {"len", log_len},         {"message", log_message},
    {"resolve", log_resolve}, {"close", log_close},
    {NULL, NULL}};

static const luaL_Reg core_functions[] = {
    {"decode", core_decode}, {"encode", core_encode}, {"array", core_array}, {"log", core_log},
    {NULL, NULL}};

int luaopen_obelus_core(lua_State *L) {
  ob_lua_open(L);
  if (luaL_newmetatable(L, LOG_MT)) {
    luaL_newlib(L, log_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, log_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, log_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, log_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  luaL_newlib(L, core_functions);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  ob_lua_push_array_mt(L);
  lua_setfield(L, -2, "array_mt");
  return 1;
}
