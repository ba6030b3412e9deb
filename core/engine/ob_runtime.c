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
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/ob_http_lua.h"
#include "bridge/ob_lua.h"
#include "engine/ob_runtime.h"
#include "engine/ob_sched.h"
#include "bridge/ob_view.h"
#include "bridge/ob_watch.h"

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

/* The children tools spawn (obelus.uv.spawn, runtime.lua): each in a process
 * group of its own, tracked where a signal handler finds it (ob_watch.h), and
 * killed with its group when its attempt is abandoned or the engine goes.
 * child_track(pid) -> slot; child_untrack(slot); child_kill(pid, slot);
 * child_group(pid) -> whether the group still has a process (its leader may
 * have exited and left others in it). */
static int prim_child_track(lua_State *L) {
  lua_Integer pid = luaL_checkinteger(L, 1);
  lua_pushlightuserdata(L, pid > 0 && pid <= 0x7fffffff ? (void *)ob_watch_child_add((pid_t)pid)
                                                        : NULL);
  return 1;
}

static int prim_child_untrack(lua_State *L) {
  ob_watch_child_remove(lua_touserdata(L, 1));
  return 0;
}

static int prim_child_group(lua_State *L) {
  lua_Integer pid = luaL_checkinteger(L, 1);
  lua_pushboolean(L, pid > 0 && pid <= 0x7fffffff && (kill(-(pid_t)pid, 0) == 0 || errno == EPERM));
  return 1;
}

static int prim_child_kill(lua_State *L) {
  lua_Integer pid = luaL_checkinteger(L, 1);
  if (pid > 0 && pid <= 0x7fffffff)
    kill(-(pid_t)pid, SIGKILL); /* the group: what the child started goes with it */
  ob_watch_child_remove(lua_touserdata(L, 2));
  return 0;
}

/* coroutine.resume and coroutine.wrap as tools see them: Lua's, except that
 * the engine's watch follows the coroutine resumed (ob_watch_nest), so that a
 * tool spinning inside a coroutine it made is stopped as in its own. */
static int watched_resume(lua_State *L, lua_State *co, int narg, ob_engine *e) {
  if (!lua_checkstack(co, narg)) {
    lua_pushliteral(L, "too many arguments to resume");
    return -1;
  }
  lua_xmove(L, co, narg);
  lua_State *outer = e->watch ? ob_watch_nest(e->watch, co) : NULL;
  int nres, st = lua_resume(co, L, narg, &nres);
  if (e->watch)
    ob_watch_unnest(e->watch, outer);
  if (st == LUA_OK || st == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) {
      lua_pop(co, nres);
      lua_pushliteral(L, "too many results to resume");
      return -1;
    }
    lua_xmove(co, L, nres);
    return nres;
  }
  lua_xmove(co, L, 1);
  return -1;
}

static int co_resume(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  luaL_argexpected(L, co, 1, "coroutine");
  int r = watched_resume(L, co, lua_gettop(L) - 1, lua_touserdata(L, lua_upvalueindex(1)));
  if (r < 0) {
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, -(r + 1));
  return r + 1;
}

static int co_wrapped(lua_State *L) {
  lua_State *co = lua_tothread(L, lua_upvalueindex(1));
  int r = watched_resume(L, co, lua_gettop(L), lua_touserdata(L, lua_upvalueindex(2)));
  if (r >= 0)
    return r;
  int st = lua_status(co);
  if (st != LUA_OK && st != LUA_YIELD) { /* an error in the coroutine: close it */
    st = lua_resetthread(co);
    lua_xmove(co, L, 1);
  }
  if (st != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

static int co_wrap(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State *co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushcclosure(L, co_wrapped, 2);
  return 1;
}

/* Hooks are the engine's: a tool that could set or clear them could stop
 * the watchdog stopping it. debug.sethook fails; debug.gethook sees none. */
static int no_sethook(lua_State *L) {
  return luaL_error(L, "debug.sethook is not available to tools: obelus stops tools that run "
                       "too long through hooks");
}

static int no_gethook(lua_State *L) {
  lua_pushnil(L);
  return 1;
}

/* xpcall as tools see it: Lua's, except for its message handler while the
 * watch stops the tool. Lua calls the handler where the error was raised,
 * and the stop's error is raised in a hook, where hooks are off: a handler
 * that loops would never be stopped. So the handler is wrapped: while a stop
 * is pending it is not called, and the stop's error goes on unchanged (as
 * it would through a pcall); otherwise it is called as Lua would. */
static int watched_handler(lua_State *L) {
  ob_engine *e = lua_touserdata(L, lua_upvalueindex(1));
  if (e->watch && atomic_load_explicit(&e->watch->stop, memory_order_relaxed)) {
    lua_settop(L, 1);
    return 1;
  }
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int xpcall_done(lua_State *L, int status, lua_KContext base) {
  (void)status;
  return lua_gettop(L) - (int)base;
}

static int watched_xpcall(lua_State *L) {
  if (lua_type(L, 2) == LUA_TFUNCTION) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, watched_handler, 2);
    lua_replace(L, 2);
  }
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(2)); /* Lua's xpcall: its checks, its continuation */
  lua_insert(L, 1);
  lua_callk(L, n, LUA_MULTRET, 0, xpcall_done);
  return xpcall_done(L, LUA_OK, 0);
}

/* Puts the engine's coroutine.resume, coroutine.wrap, xpcall, debug.sethook
 * and debug.gethook in place of Lua's (the tables are those `require` answers). */
static void guard_libs(lua_State *L, ob_engine *e) {
  lua_getglobal(L, "coroutine");
  if (lua_istable(L, -1)) {
    lua_pushlightuserdata(L, e);
    lua_pushcclosure(L, co_resume, 1);
    lua_setfield(L, -2, "resume");
    lua_pushlightuserdata(L, e);
    lua_pushcclosure(L, co_wrap, 1);
    lua_setfield(L, -2, "wrap");
  }
  lua_pop(L, 1);
  lua_getglobal(L, "xpcall");
  if (lua_isfunction(L, -1)) {
    lua_pushlightuserdata(L, e);
    lua_insert(L, -2);
    lua_pushcclosure(L, watched_xpcall, 2);
    lua_setglobal(L, "xpcall");
  } else {
    lua_pop(L, 1);
  }
  lua_getglobal(L, "debug");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, no_sethook);
    lua_setfield(L, -2, "sethook");
    lua_pushcfunction(L, no_gethook);
    lua_setfield(L, -2, "gethook");
  }
  lua_pop(L, 1);
}

/* The primitives that need the engine (an upvalue), and those that do not. */
static const luaL_Reg engine_prims[] = {
    {"wake", ob_co_lua_wake}, {"sleep", ob_sleep_lua}, {"http_start", ob_http_lua_start},
    {NULL, NULL}};
static const luaL_Reg plain_prims[] = {
    {"totable", ob_lua_totable},        {"is_view", ob_view_lua_is_view},
    {"next", ob_view_lua_next},         {"is_call", ob_co_lua_is_call},
    {"attempt", ob_co_lua_attempt},     {"owner", ob_co_lua_owner},
    {"run_of", ob_co_lua_run_of},       {"branched", ob_co_lua_branched},
    {"child_track", prim_child_track},
    {"child_untrack", prim_child_untrack}, {"child_kill", prim_child_kill},
    {"child_group", prim_child_group},
    {"encode_check", ob_engine_lua_encode_check},
    {"emit", ob_emit_lua},
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
  lua_pushcfunction(L, ob_lua_encode); /* the bridge's, as obelus.core gives them */
  lua_setfield(L, -2, "encode");
  lua_pushcfunction(L, ob_lua_decode);
  lua_setfield(L, -2, "decode");
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
  ob_co_set_engine(L, e);
  guard_libs(L, e);
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

/* Kills the children tools spawned that are still tracked (runtime.lua's
 * kill_children): the runs are over. */
static void kill_children(ob_engine *e) {
  lua_State *L = e->L;
  if (!L || e->prim_ref == LUA_NOREF)
    return;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->prim_ref);
  if (lua_getfield(L, -1, "kill_children") == LUA_TFUNCTION &&
      ob_engine_pcall(L, 0, 0) != LUA_OK)
    ob_engine_note(e, "children", NULL, "killing the tools' children: %s", lua_tostring(L, -1));
  lua_settop(L, top);
}

void ob_runtime_close(ob_engine *e) {
  e->gc_incremental = 0; /* no collector switch for a state about to close */
  while (e->runs)
    ob_run_free(e->runs);
  kill_children(e);
  if (e->sleep_timer) /* freed by its close callback, when the loop gets to it */
    uv_close((uv_handle_t *)e->sleep_timer, free_handle);
  if (e->gc_idle)
    uv_close((uv_handle_t *)e->gc_idle, free_handle);
  e->sleep_timer = NULL;
  e->gc_idle = NULL;
  ob_watch_free(e->watch);
  e->watch = NULL;
}
