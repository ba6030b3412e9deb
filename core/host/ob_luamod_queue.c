/* ob_luamod_queue.c -- obelus.queue in the Lua module: a job queue in Redis from a
 * Lua host, on luv's loop (the engines' loop), over the queue client
 * (ob_queue_client.c).
 *
 *   local q = obelus.queue{ redis = "redis://127.0.0.1:6379", queue = "obelus" }
 *   local id = q:submit("plan.json", { input = { city = "Oslo" }, engine = e })
 *   local res = q:wait(id, { timeout_ms = 5000 })  -- { job, exit, output, error, state }
 *   q:submit(plan, { on_done = function(id, err) ... end })   -- from the loop instead
 *   q:wait(id, { on_done = function(res) ... end })
 *   q:close()
 *
 * Without on_done, submit and wait turn luv's loop (uv.run "once") until their answer,
 * like run:wait(): not from inside the loop. With it, they return at once and the
 * function is called from the loop. Each operation is a record outside Lua's memory
 * (the client calls back into it), listed on its queue so that closing the queue frees
 * the ones that will never be called back, and their functions' references.
 *
 * What it needs of the module's engines (an engine argument, whether one of their
 * callbacks is running) comes as hooks (ob_luamod_queue.h), so that this file does not
 * include ob_luamod.h: ob_luamod_queue_open keeps the hooks' address as an upvalue of
 * obelus.queue, and each queue keeps it too (q->hooks), for its methods. An error in an
 * on_done goes to lua_warning: the host's warn function decides whether, and where, it
 * shows (stock Lua's prints it once warn("@on") turned warnings on). */
#include <lauxlib.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* luv.h has one old-style declaration */
#include <luv/luv.h>
#pragma GCC diagnostic pop
#include <stdlib.h>
#include <string.h>

#include "bridge/ob_lua.h"
#include "host/ob_luamod_queue.h"
#include "base/ob_mem.h"
#include "fleet/ob_queue_client.h"

#define QUEUE_MT "obelus.queue"

typedef struct op op;

typedef struct lua_queue {
  ob_qclient *c; /* NULL once closed */
  lua_State *L;  /* the main thread: where callbacks run */
  const ob_luamod_hooks *hooks; /* the module's: see the top of this file */
  op *ops;
} lua_queue;

struct op {
  lua_queue *q;
  op *next, **prevp;
  int fn;   /* on_done's reference, or LUA_NOREF (a blocking call polls `done`) */
  int done;
  int exit;
  char *job, *why, *output, *error, *state;
};

static op *op_new(lua_queue *q, int fn) {
  op *o = ob_xcalloc(1, sizeof *o);
  o->q = q;
  o->fn = fn;
  o->next = q->ops;
  o->prevp = &q->ops;
  if (q->ops)
    q->ops->prevp = &o->next;
  q->ops = o;
  return o;
}

static void op_free(op *o) {
  *o->prevp = o->next;
  if (o->next)
    o->next->prevp = o->prevp;
  if (o->fn != LUA_NOREF && o->q->L)
    luaL_unref(o->q->L, LUA_REGISTRYINDEX, o->fn);
  free(o->job);
  free(o->why);
  free(o->output);
  free(o->error);
  free(o->state);
  free(o);
}

static lua_queue *check_queue(lua_State *L) {
  lua_queue *q = luaL_checkudata(L, 1, QUEUE_MT);
  if (!q->c)
    luaL_error(L, "the queue is closed");
  return q;
}

/* A result as a table: { job, exit, output, error, state }. */
static void push_result(lua_State *L, const op *o) {
  lua_createtable(L, 0, 5);
  lua_pushstring(L, o->job);
  lua_setfield(L, -2, "job");
  if (o->exit >= 0) {
    lua_pushinteger(L, o->exit);
    lua_setfield(L, -2, "exit");
    ob_value *v = o->output ? ob_json_parse(o->output, strlen(o->output), NULL) : NULL;
    if (v) {
      ob_lua_push(L, v);
      ob_unref(v);
      lua_setfield(L, -2, "output");
    }
  }
  const char *err = o->why ? o->why : o->error;
  if (err) {
    lua_pushstring(L, err);
    lua_setfield(L, -2, "error");
  }
  if (o->state) {
    lua_pushstring(L, o->state);
    lua_setfield(L, -2, "state");
  }
}

/* Calls o's on_done with what its push function pushes, in protected mode. */
static void deliver(op *o, int nargs_submit) {
  lua_State *L = o->q->L;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, o->fn);
  int n = 1;
  if (nargs_submit) {
    if (o->job)
      lua_pushstring(L, o->job);
    else
      lua_pushnil(L);
    if (o->why)
      lua_pushstring(L, o->why);
    else
      lua_pushnil(L);
    n = 2;
  } else {
    push_result(L, o);
  }
  if (lua_pcall(L, n, 0, 0) != LUA_OK) { /* in two pieces: nothing to allocate */
    lua_warning(L, "obelus: error in a queue's on_done: ", 1);
    lua_warning(L, lua_isstring(L, -1) ? lua_tostring(L, -1) : "(not a string)", 0);
  }
  lua_settop(L, top);
}

static void on_submitted(void *ud, const char *job, const char *why) {
  op *o = ud;
  o->done = 1;
  o->job = job ? ob_xstrdup(job) : NULL;
  o->why = why ? ob_xstrdup(why) : NULL;
  if (o->fn != LUA_NOREF) {
    deliver(o, 1);
    op_free(o);
  }
}

static void on_finished(void *ud, const ob_queue_result *res, const char *why) {
  op *o = ud;
  o->done = 1;
  o->job = ob_xstrdup(res->job);
  o->exit = res->exit;
  o->output = res->output ? ob_xstrdup(res->output) : NULL;
  o->error = res->error ? ob_xstrdup(res->error) : NULL;
  o->state = res->state ? ob_xstrdup(res->state) : NULL;
  o->why = why ? ob_xstrdup(why) : NULL;
  if (o->fn != LUA_NOREF) {
    deliver(o, 0);
    op_free(o);
  }
}

/* Turns luv's loop until o is done (or the queue closes). */
static void turn_until(lua_State *L, lua_queue *q, op *o, const char *what) {
  if (q->hooks->busy(L) || luv_context(L)->mode != -1)
    luaL_error(L, "%s while the loop is running (inside a callback, or uv.run()): give "
                  "opts.on_done instead",
               what);
  while (!o->done && q->c) {
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "luv");
    lua_getfield(L, -1, "run");
    lua_pushliteral(L, "once");
    lua_call(L, 1, 0);
    lua_pop(L, 2);
  }
}

/* The on_done function of opts (at idx), referenced, or LUA_NOREF. */
static int take_on_done(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE)
    return LUA_NOREF;
  lua_getfield(L, idx, "on_done");
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return LUA_NOREF;
  }
  luaL_checktype(L, -1, LUA_TFUNCTION);
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

/* q:submit(plan, opts): the job's id (raises when invalid or unreachable); with
 * opts.on_done, nothing (on_done(id, err) later). */
static int queue_submit(lua_State *L) {
  lua_queue *q = check_queue(L);
  if (!lua_isnoneornil(L, 3))
    luaL_checktype(L, 3, LUA_TTABLE);
  ob_buf text;
  ob_buf_init(&text);
  ob_error err;
  const char *name = "plan";
  if (lua_type(L, 2) == LUA_TSTRING) {
    name = lua_tostring(L, 2);
    if (ob_read_file(name, &text, &err) != OB_OK)
      return luaL_error(L, "queue:submit: %s", err.msg);
  } else {
    luaL_checktype(L, 2, LUA_TTABLE);
    ob_value *v = ob_lua_to_value(L, 2, &err);
    if (!v)
      return luaL_error(L, "queue:submit: the plan: %s", err.msg);
    ob_json_write(&text, v, OB_JSON_COMPACT);
    ob_unref(v);
  }
  ob_engine *e = NULL;
  ob_value *inputs = NULL;
  if (lua_type(L, 3) == LUA_TTABLE) {
    if (lua_getfield(L, 3, "name") == LUA_TSTRING)
      name = lua_tostring(L, -1); /* stays on the stack: alive */
    if (lua_getfield(L, 3, "engine") != LUA_TNIL)
      e = q->hooks->check_engine(L, lua_gettop(L));
    if (lua_getfield(L, 3, "input") != LUA_TNIL) {
      ob_value *in = ob_lua_to_value(L, -1, &err);
      if (!in) {
        ob_buf_free(&text);
        return luaL_error(L, "queue:submit: the input: %s", err.msg);
      }
      inputs = ob_array_push(ob_array(), in);
    }
  }
  int fn = take_on_done(L, 3);
  op *o = op_new(q, fn);
  char *problems = NULL;
  int rc = ob_qclient_submit(q->c, e, text.data ? text.data : "", text.len, name, inputs,
                             on_submitted, o, &problems);
  ob_buf_free(&text);
  ob_unref(inputs);
  if (rc != OB_OK) {
    op_free(o);
    lua_pushstring(L, problems ? problems : "invalid plan");
    free(problems);
    return lua_error(L);
  }
  if (fn != LUA_NOREF)
    return 0;
  turn_until(L, q, o, "queue:submit");
  if (!o->done)
    return luaL_error(L, "queue:submit: the queue was closed");
  if (!o->job) {
    lua_pushfstring(L, "queue:submit: %s", o->why ? o->why : "failed");
    op_free(o);
    return lua_error(L);
  }
  lua_pushstring(L, o->job);
  op_free(o);
  return 1;
}

/* q:wait(job, opts): the result table; with opts.on_done, nothing (on_done(res)). */
static int queue_wait(lua_State *L) {
  lua_queue *q = check_queue(L);
  const char *job = luaL_checkstring(L, 2);
  lua_Integer timeout = 0;
  if (lua_type(L, 3) == LUA_TTABLE) {
    if (lua_getfield(L, 3, "timeout_ms") != LUA_TNIL) {
      timeout = luaL_checkinteger(L, -1);
      luaL_argcheck(L, timeout >= 0, 3, "timeout_ms is 0 or more");
    }
    lua_pop(L, 1);
  } else if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
  }
  int fn = take_on_done(L, 3);
  op *o = op_new(q, fn);
  if (!ob_qclient_wait(q->c, job, (uint64_t)timeout, on_finished, o)) {
    op_free(o);
    return luaL_error(L, "queue:wait: cannot connect");
  }
  if (fn != LUA_NOREF)
    return 0;
  turn_until(L, q, o, "queue:wait");
  if (!o->done)
    return luaL_error(L, "queue:wait: the queue was closed");
  push_result(L, o);
  op_free(o);
  return 1;
}

static int queue_close(lua_State *L) {
  lua_queue *q = luaL_checkudata(L, 1, QUEUE_MT);
  if (q->c) {
    ob_qclient_free(q->c); /* calls nothing back */
    q->c = NULL;
  }
  while (q->ops)
    op_free(q->ops);
  return 0;
}

static int queue_tostring(lua_State *L) {
  lua_queue *q = luaL_checkudata(L, 1, QUEUE_MT);
  lua_pushstring(L, q->c ? "obelus.queue" : "obelus.queue (closed)");
  return 1;
}

/* obelus.queue{ redis = URL, queue = NAME } */
static int core_queue(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "redis");
  const char *url = lua_tostring(L, -1);
  if (!url)
    return luaL_error(L, "obelus.queue: needs redis = URL (redis://HOST:PORT)");
  lua_getfield(L, 1, "queue");
  const char *name = lua_tostring(L, -1);
  lua_getglobal(L, "require"); /* luv's loop is the one engines run on */
  lua_pushliteral(L, "luv");
  lua_call(L, 1, 0);
  uv_loop_t *loop = luv_loop(L);
  lua_queue *q = lua_newuserdatauv(L, sizeof *q, 0);
  memset(q, 0, sizeof *q);
  luaL_setmetatable(L, QUEUE_MT);
  q->hooks = lua_touserdata(L, lua_upvalueindex(1));
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  q->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  ob_error err;
  if (!(q->c = ob_qclient_new(loop, url, name, &err)))
    return luaL_error(L, "obelus.queue: %s", err.msg);
  return 1;
}

static const luaL_Reg queue_methods[] = {
    {"submit", queue_submit}, {"wait", queue_wait}, {"close", queue_close}, {NULL, NULL}};

void ob_luamod_queue_open(lua_State *L, const ob_luamod_hooks *h) {
  ob_lua_new_class(L, QUEUE_MT, queue_methods, queue_close, queue_close, queue_tostring);
  lua_pushlightuserdata(L, (void *)h); /* read only: the cast drops const for Lua's API */
  lua_pushcclosure(L, core_queue, 1);
  lua_setfield(L, -2, "queue");
}
