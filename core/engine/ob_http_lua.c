/* ob_http_lua.c -- obelus.http's C half: prim.http_start(opts, done) starts
 * a transfer on the engine's ob_http (made at the first request) and returns
 * it as a userdata with close() and is_closing(), the two methods the
 * runtime's abandon uses on a call's luv handles; lua/obelus/runtime.lua
 * builds http.request, get, post, json and download on it, waiting with
 * obelus.await.
 *
 * done(response) or done(nil, message) is called once from the loop when the
 * transfer ends, unless the transfer was closed first (the call's _timeout
 * passed, its run was cancelled, the engine is freed): then never. The
 * userdata and done are kept in the registry while the transfer runs, so
 * that a tool dropping them changes nothing.
 *
 * Costs: the options read into C once; the answer copied into a Lua string
 * once (headers into a table of lower-case names). */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ob_engine.h"
#include "io/ob_http.h"
#include "engine/ob_http_lua.h"
#include "base/ob_mem.h"

#define XFER_MT "obelus.http_transfer"

typedef struct lxfer {
  ob_http_xfer *x; /* NULL once ended or closed */
  ob_engine *e;
  int done_ref, self_ref;
} lxfer;

static void release(lua_State *L, lxfer *lx) {
  lx->x = NULL;
  luaL_unref(L, LUA_REGISTRYINDEX, lx->done_ref);
  luaL_unref(L, LUA_REGISTRYINDEX, lx->self_ref);
  lx->done_ref = lx->self_ref = LUA_NOREF;
}

/* The answer as a Lua table, built under lua_pcall: a body the Lua state cannot
 * hold (its --max-memory, or the process's memory) is an error of the call,
 * never a panic of a state with no protected call around it (the loop's). */
static int push_response(lua_State *L) {
  const ob_http_response *res = lua_touserdata(L, 1);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, res->status);
  lua_setfield(L, -2, "status");
  lua_createtable(L, 0, (int)res->nheaders);
  for (size_t i = 0; i < res->nheaders; i++) {
    /* a name given twice: its values joined, as HTTP allows for most */
    if (lua_getfield(L, -1, res->names[i]) == LUA_TSTRING) {
      lua_pushliteral(L, ", ");
      lua_pushstring(L, res->values[i]);
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
      lua_pushstring(L, res->values[i]);
    }
    lua_setfield(L, -2, res->names[i]);
  }
  lua_setfield(L, -2, "headers");
  if (res->body) {
    lua_pushlstring(L, res->body, res->body_len);
    lua_setfield(L, -2, "body");
  }
  lua_pushinteger(L, (lua_Integer)res->body_len);
  lua_setfield(L, -2, "bytes");
  lua_pushstring(L, res->url);
  lua_setfield(L, -2, "url");
  lua_pushstring(L, res->version);
  lua_setfield(L, -2, "version");
  return 1;
}

static void on_done(void *ud, const ob_http_response *res) {
  lxfer *lx = ud;
  ob_engine *e = lx->e; /* lx may be collected while the callback runs */
  lua_State *L = e->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, lx->done_ref);
  int nargs = 1;
  if (!res->error) {
    lua_pushcfunction(L, push_response);
    lua_pushlightuserdata(L, (void *)res);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
      const char *why = lua_tostring(L, -1);
      lua_pushfstring(L, "%s: the answer (%I bytes) could not be held: %s",
                      res->url ? res->url : "?", (lua_Integer)res->body_len, why ? why : "?");
      lua_remove(L, -2);
      lua_pushnil(L);
      lua_insert(L, -2);
      nargs = 2;
    }
  } else {
    lua_pushnil(L);
    lua_pushstring(L, res->error);
    nargs = 2;
  }
  release(L, lx);
  if (ob_engine_pcall(L, nargs, 0) != LUA_OK) {
    ob_engine_note(e, "http", NULL, "http: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

static int xfer_close(lua_State *L) {
  lxfer *lx = luaL_checkudata(L, 1, XFER_MT);
  if (lx->x && lx->e->http)
    ob_http_cancel(lx->x);
  if (lx->x || lx->done_ref != LUA_NOREF)
    release(L, lx);
  return 0;
}

static int xfer_is_closing(lua_State *L) {
  lxfer *lx = luaL_checkudata(L, 1, XFER_MT);
  lua_pushboolean(L, lx->x == NULL);
  return 1;
}

/* A string option, read as C reads it: one with a NUL inside (a URL, a method
 * or a path cut short at it, silently) is refused. */
static const char *opt_str(lua_State *L, int t, const char *k) {
  int type = lua_getfield(L, t, k);
  const char *s = NULL;
  size_t len = 0;
  if (type == LUA_TSTRING)
    s = lua_tolstring(L, -1, &len); /* stays valid: opts holds it */
  else if (type != LUA_TNIL)
    luaL_error(L, "obelus.http: %s must be a string, not %s", k, luaL_typename(L, -1));
  if (s && strlen(s) != len)
    luaL_error(L, "obelus.http: %s has a NUL byte", k);
  lua_pop(L, 1);
  return s;
}

static lua_Integer opt_int(lua_State *L, int t, const char *k) {
  int type = lua_getfield(L, t, k);
  lua_Integer n = 0;
  if (type != LUA_TNIL && (!lua_isinteger(L, -1) || (n = lua_tointeger(L, -1)) < 0))
    luaL_error(L, "obelus.http: %s must be a whole number, 0 or more", k);
  lua_pop(L, 1);
  return n;
}

/* prim.http_start(opts, done) -> transfer */
int ob_http_lua_start(lua_State *L) {
  ob_engine *e = lua_touserdata(L, lua_upvalueindex(1));
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  ob_http_request rq = {0};
  rq.url = opt_str(L, 1, "url");
  if (!rq.url)
    return luaL_error(L, "obelus.http: url is missing");
  rq.method = opt_str(L, 1, "method");
  rq.ca_file = opt_str(L, 1, "ca_file");
  rq.download = opt_str(L, 1, "download");
  rq.timeout_ms = (unsigned long)opt_int(L, 1, "timeout_ms");
  rq.max_bytes = (size_t)opt_int(L, 1, "max_bytes");
  rq.low_speed_limit = (unsigned long)opt_int(L, 1, "low_speed_limit");
  rq.low_speed_time = (unsigned long)opt_int(L, 1, "low_speed_time");
  lua_getfield(L, 1, "follow");
  rq.follow = lua_isnil(L, -1) || lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, 1, "body") == LUA_TSTRING) {
    rq.body = lua_tolstring(L, -1, &rq.body_len);
    rq.has_body = 1;
  } else if (!lua_isnil(L, -1)) {
    return luaL_error(L, "obelus.http: body must be a string (http.json sends a value)");
  } /* left on the stack: the body lives until the transfer has copied it */
  ob_buf lines; /* "Name: value\0" each */
  ob_buf_init(&lines);
  size_t n = 0;
  if (lua_getfield(L, 1, "headers") == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1)) {
        ob_buf_free(&lines);
        return luaL_error(L, "obelus.http: headers must map names to strings");
      }
      size_t klen, vlen;
      const char *k = lua_tolstring(L, -2, &klen), *v = lua_tolstring(L, -1, &vlen);
      /* the name checked here, where its end is known ("a:b" would pass in
       * the line as name "a"); the value's CR and LF by ob_http_check, its NUL
       * here (it would cut the line short) */
      char q[400];
      if (!ob_http_is_token(k, klen)) {
        ob_buf_free(&lines);
        return luaL_error(L, "obelus.http: header name %s is not an HTTP token (letters, "
                             "digits or !#$%%&'*+-.^_`|~)", ob_http_quote(q, sizeof q, k, klen));
      }
      if (strlen(v) != vlen) {
        ob_buf_free(&lines);
        return luaL_error(L, "obelus.http: header %s: its value has a NUL byte", k);
      }
      ob_buf_addf(&lines, "%s: %s", k, v);
      ob_buf_addc(&lines, '\0');
      n++;
      lua_pop(L, 1);
    }
  } else if (!lua_isnil(L, -1)) {
    return luaL_error(L, "obelus.http: headers must be a table");
  }
  lua_pop(L, 1);
  const char **hv = ob_xcalloc(n + 1, sizeof *hv);
  for (size_t i = 0, off = 0; i < n; i++) {
    hv[i] = lines.data + off;
    off += strlen(hv[i]) + 1;
  }
  rq.headers = hv;
  rq.nheaders = n;
  ob_error err;
  if (!ob_engine_http(e, &err)) {
    free(hv);
    ob_buf_free(&lines);
    return luaL_error(L, "obelus.http: %s", err.msg);
  }
  lxfer *lx = lua_newuserdatauv(L, sizeof *lx, 0);
  lx->x = NULL;
  lx->e = e;
  lx->done_ref = lx->self_ref = LUA_NOREF;
  if (luaL_newmetatable(L, XFER_MT)) {
    lua_pushcfunction(L, xfer_close);
    lua_setfield(L, -2, "__gc");
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, xfer_close);
    lua_setfield(L, -2, "close");
    lua_pushcfunction(L, xfer_is_closing);
    lua_setfield(L, -2, "is_closing");
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  lx->x = ob_http_start(e->http, &rq, on_done, lx, &err);
  free(hv);
  ob_buf_free(&lines);
  if (!lx->x)
    return luaL_error(L, "%s", err.msg);
  lua_pushvalue(L, 2);
  lx->done_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, -1);
  lx->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 1;
}
