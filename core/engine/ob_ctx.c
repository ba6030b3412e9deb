/* ob_ctx.c -- ctx, the second argument of a tool's run (plan-format §9). */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ob_sched.h"

/* A call's ctx is a small userdata read like a table: id, tool, index and
 * instance come from the call itself when asked for, and a tool may set
 * fields of its own. Measured on chain 100000: a table with those four
 * fields, its id string interned, was a sixth of the instructions of a call.
 * It names its call by run and position, and reads it only while that run
 * exists (after ob_run_free: index and the tool's own fields only).
 *
 * A waiting call keeps its ctx: 64 bytes in the pool's blocks (Lua's
 * userdata header, 32, and these 32). The engine and the tool's own fields
 * are not in it: the engine is an upvalue of the metamethods, and the fields
 * are in one table of the engine's, weakly keyed by ctx, made at a tool's
 * first `ctx.x = v` (few tools set any). With both inside it was 96 bytes
 * (a user value slot and the engine's pointer). */
typedef struct call_ctx {
  const ob_run *run;
  uint64_t serial; /* the run's: another run at the same address is not it */
  size_t i;        /* the call's position in run->calls (an instance's copies included) */
  size_t index;    /* ctx.index: its position in the plan as written */
} call_ctx;

/* The metamethods' upvalues: the engine, and the table of the tools' own fields. */
#define CTX_ENGINE lua_upvalueindex(1)
#define CTX_FIELDS lua_upvalueindex(2)

/* The call ctx names, or NULL when its run is gone. */
static const ob_crun *ctx_call(lua_State *L, const call_ctx *x) {
  const ob_engine *e = lua_touserdata(L, CTX_ENGINE);
  for (const ob_run *r = e->runs; r; r = r->next)
    if (r == x->run && r->serial == x->serial)
      return &r->calls[x->i];
  return NULL;
}

/* Pushes ctx's own field k (id, tool, index, instance); 0 when k is none of them. */
static int ctx_field(lua_State *L, const call_ctx *x, const char *k) {
  if (!strcmp(k, "index")) {
    lua_pushinteger(L, (lua_Integer)x->index);
    return 1;
  }
  const ob_crun *c = ctx_call(L, x);
  if (!strcmp(k, "attempt")) {
    lua_pushinteger(L, c ? (lua_Integer)c->attempt : 1);
    return 1;
  }
  const char *v = NULL;
  if (!strcmp(k, "id"))
    v = c ? c->call->id : NULL;
  else if (!strcmp(k, "tool"))
    v = c ? c->tool->name : NULL;
  else if (!strcmp(k, "instance"))
    v = c ? c->call->instance : NULL;
  else
    return 0;
  if (v)
    lua_pushstring(L, v);
  else
    lua_pushnil(L);
  return 1;
}

/* Pushes the tool's own fields of the ctx at idx (a table), or nil; returns its type. */
static int ctx_own(lua_State *L, int idx) {
  lua_pushvalue(L, idx);
  return lua_rawget(L, CTX_FIELDS);
}

static int ctx_index(lua_State *L) {
  const call_ctx *x = lua_touserdata(L, 1);
  if (ctx_own(L, 1) == LUA_TTABLE) { /* the tool's own fields come first */
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) != LUA_TNIL)
      return 1;
  }
  if (lua_type(L, 2) == LUA_TSTRING && ctx_field(L, x, lua_tostring(L, 2)))
    return 1;
  lua_pushnil(L);
  return 1;
}

static int ctx_newindex(lua_State *L) {
  if (ctx_own(L, 1) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, -2);
    lua_rawset(L, CTX_FIELDS);
  }
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_rawset(L, -3);
  return 0;
}

static int ctx_next(lua_State *L) {
  lua_settop(L, 2);
  if (lua_next(L, 1))
    return 2;
  lua_pushnil(L);
  return 1;
}

/* pairs(ctx): a table of everything ctx shows, walked like next. */
static int ctx_pairs(lua_State *L) {
  const call_ctx *x = lua_touserdata(L, 1);
  static const char *const keys[] = {"id", "tool", "index", "instance", "attempt"};
  lua_pushcfunction(L, ctx_next);
  lua_newtable(L);
  for (int k = 0; k < 5; k++) {
    ctx_field(L, x, keys[k]);
    lua_setfield(L, -2, keys[k]);
  }
  if (ctx_own(L, 1) == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, -5);
    }
  }
  lua_pop(L, 1);
  lua_pushnil(L);
  return 3;
}

static int ctx_tostring(lua_State *L) {
  const call_ctx *x = lua_touserdata(L, 1);
  const ob_crun *c = ctx_call(L, x);
  lua_pushfstring(L, "obelus.ctx: %s", c ? c->call->id : "(run freed)");
  return 1;
}

void ob_ctx_push(lua_State *co, const ob_crun *c, int meta) {
  call_ctx *x = lua_newuserdatauv(co, sizeof *x, 0);
  *x = (call_ctx){c->run, c->run->serial, (size_t)(c - c->run->calls), c->call->index};
  lua_pushvalue(co, meta);
  lua_setmetatable(co, -2);
}

void ob_ctx_push_meta(lua_State *L, ob_engine *e) {
  static const luaL_Reg mt[] = {{"__index", ctx_index},       {"__newindex", ctx_newindex},
                                {"__pairs", ctx_pairs},       {"__tostring", ctx_tostring},
                                {NULL, NULL}};
  lua_createtable(L, 0, 5);
  lua_pushlightuserdata(L, e);
  lua_createtable(L, 0, 0); /* the tools' own fields, by ctx: kept no longer than their ctx */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  luaL_setfuncs(L, mt, 2);
  lua_pushliteral(L, "obelus.ctx");
  lua_setfield(L, -2, "__name");
}
