/* ob_co.c -- a call's coroutine: made or reused, resumed, dropped.
 *
 * Each Lua tool call runs in a coroutine of the engine's state. Coroutines
 * are kept from the collector in one engine table by slot (cheaper than a
 * registry reference each) and, when they returned normally, kept in a pool
 * of OB_ENGINE_POOL for the next call: a returned coroutine is as good as
 * new. A call finds itself from its coroutine through Lua's extra space,
 * which is cleared when the call lets go, so a late wake-up finds nobody.
 *
 * Every resume goes through ob_crun_resume: it reads what the coroutine did
 * (returned: write the result; yielded with the engine's token: wait; yielded
 * otherwise or raised: the call's error, with its traceback) and watches the
 * time a tool runs without yielding (ob_watch.h, or a count hook).
 *
 * Costs: per call, one coroutine from the pool (or one new thread), one
 * resume per wait.
 *
 * What a waiting call holds (a tool that called obelus.sleep; counted, not
 * guessed: `OBELUS_BENCH_ALLOCS=1 bench/obelus-bench sleep 100000 100` lists
 * every Lua block a run's start leaves live, by kind and size). The
 * coroutine is most of it, and most of that is fixed by Lua 5.4 itself:
 *
 *   bytes  what
 *     208  the coroutine's lua_State (Lua's thread object, 8 bytes of extra
 *          space for its call included)
 *     720  its stack: 45 slots of 16 bytes, Lua's first and smallest (40, and
 *          5 spare); the collector never shrinks a stack below it, and the
 *          C API cannot make one smaller
 *     128  two CallInfo records of 64: the tool's frame and the C function it
 *          waits in (obelus.sleep); see co_prepare
 *     160  its params table (3 keys: a 56-byte table in a 64-byte block, a
 *          hash part of 4 nodes of 24)
 *      48  the params' _outputPath string, new to each call (its keys and
 *          _tool's value are strings Lua has already)
 *      64  ctx (ob_ctx.c)
 *      21  its slot in the anchor table (16 bytes; the array grows by doubling)
 *      10  Lua's string table, grown for that new string (by doubling)
 *      32  its entry in the engine's sleepers (ob_sleep.c; 42 with the
 *          doubling slack of the queue's array), malloc'd
 *   -----
 *   ~1,390 a waiting call, on top of what every call of a run holds whether it
 *          waits or not: its ob_crun (160, ob_sched.h) and queue slot (8), and
 *          the plan's own call (ob_plan.c: ~690 bytes a call of three keys,
 *          and ~300 for the call as a JSON value). Nothing is written to the
 *          log while it waits. The coroutine alone (1,056) is the floor of a
 *          waiting Lua call in this design: a continuation needs its stack. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/ob_pool.h"
#include "engine/ob_runtime.h"
#include "engine/ob_sched.h"
#include "bridge/ob_lua.h"
#include "bridge/ob_view.h"
#include "bridge/ob_watch.h"

const char ob_run_yield_token = 0;

/* Anchors the coroutine on top of L's stack (popped) in a slot of the engine's table. */
static int anchor_coroutine(ob_engine *e, lua_State *L) {
  int slot = e->nfree ? e->free_slots[--e->nfree] : ++e->nslots;
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->anchor_ref);
  lua_rotate(L, -2, 1);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 1);
  return slot;
}

/* The coroutine in slot. */
static lua_State *anchored(ob_engine *e, int slot) {
  lua_State *L = e->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->anchor_ref);
  lua_rawgeti(L, -1, slot);
  lua_State *co = lua_tothread(L, -1);
  lua_pop(L, 2);
  return co;
}

/* Lets the collector have the coroutine in slot; the slot serves again. */
static void release_slot(ob_engine *e, int slot) {
  lua_State *L = e->L;
  if (e->nfree == e->capfree) {
    size_t cap = e->capfree ? 2 * e->capfree : 256;
    int *f = realloc(e->free_slots, cap * sizeof *f);
    if (!f)
      abort();
    e->free_slots = f;
    e->capfree = cap;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->anchor_ref);
  lua_pushnil(L);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 1);
  e->free_slots[e->nfree++] = slot;
}

void ob_crun_drop_coroutine(ob_crun *c) {
  if (!c->co)
    return;
  ob_engine *e = c->run->e;
  e->live_calls--;
  *(ob_crun **)lua_getextraspace(c->co) = NULL; /* late wake-ups find nobody */
  /* a coroutine that returned has no wait pending anywhere: it can serve again */
  if (lua_status(c->co) == LUA_OK && e->npool < OB_ENGINE_POOL) {
    lua_settop(c->co, 0);
    e->pool[e->npool++] = c->co_slot;
  } else {
    release_slot(e, c->co_slot);
  }
  c->co = NULL;
}


/* A tool that runs on without yielding would stop the whole loop. With the
 * engine's watch (ob_watch.h), this hook is set on the Lua thread running
 * once the watchdog saw it run past the run's limit or its attempt's
 * deadline, or a SIGINT/SIGTERM came: it raises the stop's error, and stays,
 * so that every later instruction raises it again until the resume ends
 * (ob_crun_resume then fails the attempt for that reason, whatever the tool
 * made of the error). Without a watch, it is a count hook on every coroutine:
 * every million Lua instructions it checks how long the call has run since
 * it was resumed, and past the limit raises the error, then at every
 * instruction. */
unsigned ob_run_slice_limit(const ob_run *r) {
  return r->opt.max_slice_ms ? r->opt.max_slice_ms : OB_RUN_MAX_SLICE_MS;
}

static const char engine_key = 0; /* registry: the engine, a light userdata */

void ob_co_set_engine(lua_State *L, ob_engine *e) {
  lua_pushlightuserdata(L, e);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &engine_key);
}

ob_engine *ob_co_engine(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &engine_key);
  ob_engine *e = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return e;
}

/* The error a stop raises (why: OB_STOP_*), into buf. */
static const char *stop_message(char *buf, size_t size, int why, unsigned limit_ms,
                                unsigned timeout_ms) {
  if (why == OB_STOP_TIMEOUT)
    snprintf(buf, size, "timeout after %u ms", timeout_ms);
  else if (why == OB_STOP_SIGNAL)
    snprintf(buf, size, "interrupted by %s", ob_watch_interrupted == SIGINT ? "SIGINT" : "SIGTERM");
  else
    snprintf(buf, size, "the tool ran %u ms without yielding (an endless loop?); obelus stopped it",
             limit_ms);
  return buf;
}

void ob_co_slice_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  ob_engine *e = ob_co_engine(L);
  ob_watch *w = e ? e->watch : NULL;
  char buf[128];
  if (w) {
    int why = atomic_load_explicit(&w->stop, memory_order_relaxed);
    if (!why) { /* a stop already over (a coroutine that was running then) */
      lua_sethook(L, NULL, 0, 0);
      return;
    }
    ob_crun *c = e->resuming;
    unsigned limit = atomic_load_explicit(&w->limit_ms, memory_order_relaxed);
    unsigned tmo = c ? (c->call->timeout_ms ? c->call->timeout_ms : c->run->opt.call_timeout_ms) : 0;
    luaL_error(L, "%s", stop_message(buf, sizeof buf, why, limit, tmo));
    return;
  }
  ob_crun *c = *(ob_crun **)lua_getextraspace(L);
  if (!c)
    return;
  unsigned limit = ob_run_slice_limit(c->run);
  if (c->slice_resume != c->resumes) { /* the first million of this resume: start */
    c->slice_resume = c->resumes;
    c->slice_start = uv_hrtime();
    return;
  } else if ((uv_hrtime() - c->slice_start) / 1000000u <= limit) {
    return;
  }
  lua_sethook(L, ob_co_slice_hook, LUA_MASKCOUNT, 1); /* a pcall that catches it gets it again */
  luaL_error(L, "%s", stop_message(buf, sizeof buf, OB_STOP_SLICE, limit, 0));
}

/* The call's attempt failed with the Lua error st left on top of co: its
 * message (a string as it is, a table as its JSON text) and traceback. */
static void co_failed(ob_crun *c, lua_State *co, int st) {
  ob_pool *pool = c->run->e->lua_pool;
  ob_buf msg;
  ob_buf_init(&msg);
  if (st == LUA_ERRMEM && pool->hit) {
    ob_buf_addf(&msg, "memory limit of %zu MB reached (--max-memory)", pool->max >> 20);
  } else if (lua_type(co, -1) == LUA_TSTRING) {
    ob_buf_add(&msg, lua_tostring(co, -1), lua_rawlen(co, -1));
  } else {
    ob_error err;
    ob_value *v = lua_istable(co, -1) || ob_view_value(co, -1)
                      ? ob_lua_to_value_named(co, -1, "error", &err)
                      : NULL;
    char *text = v ? ob_json_print(v, OB_JSON_COMPACT, NULL) : NULL;
    if (text)
      ob_buf_add(&msg, text, strlen(text));
    else
      ob_buf_addf(&msg, "(error object is a %s value)", luaL_typename(co, -1));
    free(text);
    ob_unref(v);
  }
  ob_buf_cut(&msg, ob_message_max(c->run->opt.max_output), "error message");
  lua_State *L = c->run->e->L;
  luaL_traceback(L, co, msg.data, 0);
  ob_crun_attempt_failed(c, msg.data, lua_tostring(L, -1));
  lua_pop(L, 1);
  ob_buf_free(&msg);
}


/* The resume of the call's coroutine co was stopped (why: OB_STOP_*): the
 * attempt fails for that reason, whatever the tool made of the error; a
 * signal's stop only lets go of the attempt (the run's cancel settles it). */
static void co_stopped(ob_crun *c, lua_State *co, int why) {
  if (why == OB_STOP_TIMEOUT) {
    ob_timeout_expire(c);
    return;
  }
  if (why == OB_STOP_SIGNAL) {
    ob_crun_abandon(c);
    ob_timeout_hold(c);
    return;
  }
  char buf[128];
  stop_message(buf, sizeof buf, why, ob_run_slice_limit(c->run), 0);
  lua_State *L = c->run->e->L;
  luaL_traceback(L, co, buf, 0);
  ob_crun_abandon(c);
  ob_crun_attempt_failed(c, buf, lua_tostring(L, -1));
  lua_pop(L, 1);
}

/* When the call's attempt times out, CLOCK_MONOTONIC ms (0: no _timeout):
 * the watchdog stops a tool that does not yield past it. */
static unsigned long long co_deadline(const ob_crun *c) {
  if (!c->timer || c->retry_wait || !uv_is_active((const uv_handle_t *)c->timer))
    return 0;
  return uv_now(c->run->e->loop) + uv_timer_get_due_in(c->timer);
}

void ob_crun_resume(ob_crun *c, lua_State *from, int nargs) {
  lua_State *co = c->co;
  ob_engine *e = c->run->e;
  int nres = 0;
  c->resumes++; /* the clock starts when the hook first fires: no clock read per resume */
  ob_watch *w = e->watch;
  ob_watch_outer outer = {0};
  ob_crun *was_resuming = e->resuming;
  if (w) {
    e->resuming = c;
    outer = ob_watch_enter(w, co, ob_run_slice_limit(c->run), co_deadline(c));
    ob_watch_name(w, c->call->id, c->call->tool_name);
  }
  ob_pool *pool = e->lua_pool;
  ob_mem_cur = pool->acct; /* what the call makes is its engine's (two engines on a thread) */
  size_t was = ob_pool_arm(pool);
  int st = lua_resume(co, from, nargs, &nres);
  ob_pool_disarm(pool, was);
  int why = OB_STOP_NONE;
  if (w) {
    why = ob_watch_leave(w, co, outer);
    e->resuming = was_resuming;
  }
  if (c->state != OB_CALL_RUNNING || c->co != co)
    return; /* cancelled meanwhile */
  if (why) {
    co_stopped(c, co, why);
    return;
  }
  if (st == LUA_YIELD) {
    int ours = nres >= 1 && lua_touserdata(co, -nres) == &ob_run_yield_token;
    lua_pop(co, nres);
    if (!ours)
      ob_crun_attempt_failed(c, "the tool yielded its coroutine itself: wait with obelus.sleep, "
                    "obelus.await or obelus.uv callbacks wrapped in obelus.await", NULL);
    return;
  }
  if (st == LUA_OK) {
    ob_crun_complete(c, nres);
    return;
  }
  co_failed(c, co, st);
}

/* Builds what the tool's run is called with on the call's fresh coroutine,
 * under a protected call (a Lua error while building them, such as passing
 * --max-memory, is the call's runtime error): the function, the params, for
 * a latent tool its table, and ctx. The coroutine then starts at the tool's
 * function itself, so a waiting call holds two CallInfo records (the tool's
 * frame and the C function it waits in), not three: this was the body of the
 * coroutine, a C function calling the tool (lua_callk), whose record stayed
 * beneath the tool's while it waited (64 bytes a waiting call, measured with
 * OBELUS_BENCH_ALLOCS). */
static int co_prepare(lua_State *co) {
  const ob_call_args *a = lua_touserdata(co, 1);
  ob_crun *c = a->c;
  ob_engine *e = c->run->e;
  const ob_call *call = c->call;
  ob_tool *t = (ob_tool *)c->tool; /* its key list cache changes: nothing else */
  static const ob_lua_tables tables = {lua_upvalueindex(1), lua_upvalueindex(2),
                                       lua_upvalueindex(3)};
  lua_settop(co, 0);
  luaL_checkstack(co, 8, "obelus: Lua stack exhausted");
  lua_rawgeti(co, LUA_REGISTRYINDEX, t->latent ? e->latent_ref : t->run_ref);
  if (a->params)
    ob_lua_push_call(co, a->params, NULL, 0, 0, &t->keys, &tables);
  else
    ob_lua_push_call(co, call->raw, a->vals, a->nvals, 1, &t->keys, &tables);
  if (t->latent) /* handler(call, tool, ctx) */
    lua_rawgeti(co, LUA_REGISTRYINDEX, t->table_ref);
  ob_ctx_push(co, c, lua_upvalueindex(4));
  return lua_gettop(co);
}

void ob_co_push_prepare(lua_State *L) { lua_pushcclosure(L, co_prepare, 4); }

/* Runs the call's tool: a C tool's function, or a coroutine for a Lua one. */
void ob_crun_run_tool(ob_crun *c, const ob_call_args *args) {
  ob_run *r = c->run;
  lua_State *L = r->e->L;
  if (c->state != OB_CALL_RUNNING) { /* the first attempt */
    c->state = OB_CALL_RUNNING;
    r->running++;
    if (c->detached)
      r->detached_running++;
    ob_run_emit(r, OB_EV_STARTED, c->call, NULL);
  }
  c->serial = ++r->e->attempt_serial;
  c->branched = 0;
  ob_record_start(c);
  if (ob_record_flush(r) != OB_OK) /* what it reads, and that it started, are in the file */
    return; /* first; if they cannot be, the tool never runs (the run is cancelled) */
  ob_timeout_arm(c);  /* before the tool runs: it may finish at once */
  if (c->tool->fn) { /* a tool written in C: it completes through its handle */
    c->tool->fn((ob_call_handle *)c, args->params, c->tool->fn_data);
    return;
  }
  lua_State *co;
  if (r->e->npool) {
    c->co_slot = r->e->pool[--r->e->npool];
    co = anchored(r->e, c->co_slot);
  } else {
    co = lua_newthread(L);
    c->co_slot = anchor_coroutine(r->e, L);
    if (!r->e->watch) /* the fallback (see ob_co_slice_hook): stays with the pooled thread */
      lua_sethook(co, ob_co_slice_hook, LUA_MASKCOUNT, 1000000);
  }
  c->co = co;
  ob_gc_call_up(r->e);
  *(ob_crun **)lua_getextraspace(co) = c;
  ob_run_prefetch_users(r, c->call, 2);
  ob_run_prefetch_write(r, c->call);
  lua_rawgeti(co, LUA_REGISTRYINDEX, r->e->body_ref);
  lua_pushlightuserdata(co, (void *)args);
  ob_pool *pool = r->e->lua_pool;
  size_t was = ob_pool_arm(pool);
  int st = lua_pcall(co, 1, LUA_MULTRET, 0);
  ob_pool_disarm(pool, was);
  if (st != LUA_OK)
    co_failed(c, co, st);
  else
    ob_crun_resume(c, L, lua_gettop(co) - 1); /* the tool's function, then its arguments */
}

ob_crun *ob_crun_of(lua_State *co) {
  ob_crun *c = *(ob_crun **)lua_getextraspace(co);
  return c && c->co == co && c->state == OB_CALL_RUNNING ? c : NULL;
}

int ob_co_lua_branched(lua_State *L) {
  ob_crun *c = ob_crun_of(L);
  if (c)
    c->branched = 1;
  return 0;
}

int ob_co_lua_is_call(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  lua_pushboolean(L, co && ob_crun_of(co) != NULL);
  return 1;
}

int ob_co_lua_wake(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  ob_crun *c = co ? ob_crun_of(co) : NULL;
  if (c && lua_status(co) == LUA_YIELD)
    ob_crun_resume(c, L, 0);
  return 0;
}

int ob_co_lua_owner(lua_State *L) {
  ob_engine *e = ob_co_engine(L);
  if (e) {
    e->cb_owner = lua_tothread(L, 1);
    e->cb_serial = (uint64_t)luaL_checkinteger(L, 2);
    e->cb_run = (uint64_t)luaL_optinteger(L, 3, 0);
  }
  return 0;
}

/* Whether the top-level run with that serial is still on the engine's list. */
static int run_live(const ob_engine *e, uint64_t serial) {
  for (const ob_run *r = e->runs; r; r = r->next)
    if (r->root == r && r->serial == serial)
      return 1;
  return 0;
}

int ob_co_lua_run_of(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  ob_crun *c = co ? ob_crun_of(co) : NULL;
  ob_engine *e = ob_co_engine(L);
  if (c)
    lua_pushinteger(L, (lua_Integer)c->run->root->serial);
  else if (e && e->cb_run && run_live(e, e->cb_run))
    lua_pushinteger(L, (lua_Integer)e->cb_run);
  else if (e && e->cb_run)
    lua_pushboolean(L, 0);
  else
    lua_pushnil(L);
  return 1;
}

int ob_co_callback_failed(ob_engine *e, lua_State *co, uint64_t serial, int st, int why) {
  if (!co || (st != LUA_ERRMEM && why == OB_STOP_NONE))
    return 0;
  ob_crun *c = ob_crun_of(co);
  if (!c || c->serial != serial || c->state != OB_CALL_RUNNING || c->co != co)
    return 1; /* its attempt has ended (a callback already queued when it failed for
               * this): nothing left to fail, and nothing to say twice */
  if (why != OB_STOP_NONE) { /* stopped in the callback: the attempt is, as in its resume */
    co_stopped(c, co, why);
    return 1;
  }
  char msg[96];
  ob_pool *pool = e->lua_pool;
  if (pool->hit)
    snprintf(msg, sizeof msg, "memory limit of %zu MB reached (--max-memory)", pool->max >> 20);
  else
    snprintf(msg, sizeof msg, "not enough memory (in a libuv callback of the tool)");
  ob_crun_abandon(c); /* its handles closed: no more of its callbacks */
  ob_crun_attempt_failed(c, msg, NULL);
  return 1;
}

int ob_co_lua_attempt(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  ob_crun *c = co ? ob_crun_of(co) : NULL;
  if (!c) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)c->serial);
  lua_pushinteger(L, (lua_Integer)c->run->root->serial);
  return 2;
}
