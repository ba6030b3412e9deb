/* ob_runtime.c -- where the engine meets the scheduler: the C half of the `obelus`
 * module tools require (sleep, wake, branch and message tables, the latent
 * handler and the approver), what builds every call's arguments, and the
 * watch over tools that do not yield.
 *
 * The engine (ob_engine.c) knows nothing of runs; it calls ob_runtime_open
 * when it is made and ob_runtime_close when it is freed, and those two are
 * the only way the scheduler's files enter it. The Lua half of the module
 * (lua/obelus/runtime.lua, compiled in) is built from the primitives here. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>

#include "ob_http_lua.h"
#include "ob_lua.h"
#include "ob_runtime.h"
#include "ob_sched.h"
#include "ob_view.h"
#include "ob_watch.h"

extern const char ob_runtime_lua[];
extern const size_t ob_runtime_lua_len;

/* set_latent(fn) and set_approver(fn): the upvalues are the engine and which one */
static int prim_set_handler(lua_State *L) {
  ob_engine *e = lua_touserdata(L, lua_upvalueindex(1));
  int *slot = lua_toboolean(L, lua_upvalueindex(2)) ? &e->approver_ref : &e->latent_ref;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_unref(L, LUA_REGISTRYINDEX, *slot);
  lua_pushvalue(L, 1);
  *slot = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* The primitives that need the engine (an upvalue), and those that do not. */
static const luaL_Reg engine_prims[] = {
    {"wake", ob_co_lua_wake}, {"sleep", ob_sleep_lua}, {"http_start", ob_http_lua_start},
    {NULL, NULL}};
static const luaL_Reg plain_prims[] = {
    {"totable", ob_view_lua_totable}, {"is_view", ob_view_lua_is_view},
    {"next", ob_view_lua_next},       {"is_call", ob_co_lua_is_call},
    {"attempt", ob_co_lua_attempt},   {"encode_check", ob_engine_lua_encode_check},
    {NULL, NULL}};

static int open_runtime(lua_State *L) {
  ob_engine *e = lua_touserdata(L, 1);
  if (luaL_loadbuffer(L, ob_runtime_lua, ob_runtime_lua_len, "=obelus/runtime.lua") != LUA_OK)
    return lua_error(L);
  lua_createtable(L, 0, 16);
  lua_pushlightuserdata(L, (void *)&ob_run_yield_token);
  lua_setfield(L, -2, "token");
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  ob_lua_push_array_mt(L);
  lua_setfield(L, -2, "array_mt");
  lua_pushlightuserdata(L, e);
  luaL_setfuncs(L, engine_prims, 1); /* each with the engine as its upvalue */
  luaL_setfuncs(L, plain_prims, 0);
  lua_pushlightuserdata(L, e);
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, prim_set_handler, 2);
  lua_setfield(L, -2, "set_latent");
  lua_pushlightuserdata(L, e);
  lua_pushboolean(L, 1);
  lua_pushcclosure(L, prim_set_handler, 2);
  lua_setfield(L, -2, "set_approver");
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "luv");
  lua_setfield(L, -3, "uv");
  lua_pop(L, 1);
  luaL_requiref(L, "obelus.core", luaopen_obelus_core, 0);
  lua_getfield(L, -1, "encode");
  lua_setfield(L, -3, "encode");
  lua_getfield(L, -1, "decode");
  lua_setfield(L, -3, "decode");
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  e->branch_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_setfield(L, -2, "branch_mt");
  lua_newtable(L);
  lua_pushvalue(L, -1);
  e->message_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_setfield(L, -2, "message_mt");
  lua_pushvalue(L, -1);
  e->prim_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* its abandon (ob_timeout.c) */
  lua_call(L, 1, 1); /* the module */
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "obelus");
  lua_pop(L, 1);
  lua_pushvalue(L, -1);
  e->runtime_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

int ob_runtime_open(ob_engine *e, ob_error *err) {
  lua_State *L = e->L;
  /* what builds a call's arguments on its coroutine, its upvalues what it
   * needs a call: the bridge's tables and ctx's metatable (no registry lookups) */
  ob_lua_push_tables(L);
  ob_ctx_push_meta(L, e);
  ob_co_push_prepare(L);
  e->body_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  e->watch = ob_watch_new(ob_co_slice_hook);
  e->pool = malloc(OB_ENGINE_POOL * sizeof *e->pool);
  if (!e->pool)
    abort();
  lua_newtable(L);
  e->anchor_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcfunction(L, open_runtime);
  lua_pushlightuserdata(L, e);
  if (ob_engine_pcall(L, 1, 0) != LUA_OK) {
    ob_error_set(err, OB_EINVAL, 0, "cannot start the obelus runtime: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return OB_EINVAL;
  }
  return OB_OK;
}

static void free_handle(uv_handle_t *h) { free(h); }

void ob_runtime_close(ob_engine *e) {
  e->gc_incremental = 0; /* no collector switch for a state about to close */
  while (e->runs)
    ob_run_free(e->runs);
  if (e->sleep_timer) /* freed by its close callback, when the loop gets to it */
    uv_close((uv_handle_t *)e->sleep_timer, free_handle);
  if (e->gc_idle)
    uv_close((uv_handle_t *)e->gc_idle, free_handle);
  e->sleep_timer = NULL;
  e->gc_idle = NULL;
  ob_watch_free(e->watch);
  e->watch = NULL;
}
