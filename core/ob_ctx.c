/* ob_ctx.c -- ctx, the second argument of a tool's run (SPEC 7). */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ob_sched.h"

/* A call's ctx is a small userdata read like a table: id, tool, index and
 * instance come from the call itself when asked for, and a tool may set
 * fields of its own (kept in the userdata's user value). Measured on chain
 * 100000: a table with those four fields, its id string interned, was a
 * sixth of the instructions of a call. It names its call by run and
 * position, and reads it only while that run exists (after ob_run_free:
 * index and the tool's own fields only). */
typedef struct call_ctx {
  ob_engine *e;
  const ob_run *run;
  uint64_t serial; /* the run's: another run at the same address is not it */
  size_t i;        /* the call's position in run->calls (an instance's copies included) */
  size_t index;    /* ctx.index: its position in the plan as written */
} call_ctx;

/* The call ctx names, or NULL when its run is gone. */
static const ob_crun *ctx_call(const call_ctx *x) {
  for (const ob_run *r = x->e->runs; r; r = r->next)
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
  const ob_crun *c = ctx_call(x);
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

static int ctx_index(lua_State *L) {
  const call_ctx *x = lua_touserdata(L, 1);
  if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE) { /* the tool's own fields come first */
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
  if (lua_getiuservalue(L, 1, 1) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, 1, 1);
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
  if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE) {
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
  const ob_crun *c = ctx_call(x);
  lua_pushfstring(L, "obelus.ctx: %s", c ? c->call->id : "(run freed)");
  return 1;
}

void ob_ctx_push(lua_State *co, const ob_crun *c, int meta) {
  call_ctx *x = lua_newuserdatauv(co, sizeof *x, 1);
  *x = (call_ctx){c->run->e, c->run, c->run->serial, (size_t)(c - c->run->calls), c->call->index};
  lua_pushvalue(co, meta);
  lua_setmetatable(co, -2);
}

void ob_ctx_push_meta(lua_State *L) {
  static const luaL_Reg mt[] = {{"__index", ctx_index},       {"__newindex", ctx_newindex},
                                {"__pairs", ctx_pairs},       {"__tostring", ctx_tostring},
                                {NULL, NULL}};
  luaL_newlib(L, mt);
  lua_pushliteral(L, "obelus.ctx");
  lua_setfield(L, -2, "__name");
}
