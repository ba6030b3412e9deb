/* ob_luamod.c -- the Lua C module `obelus.core`: JSON text through the bridge, the null and
 * array markers, the message log as a userdata, and engines and runs for stock Lua scripts. */
#include <assert.h>
#include <lauxlib.h>
#include <lua.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* luv.h has one old-style declaration */
#include <luv/luv.h>
#pragma GCC diagnostic pop
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/ob_engine.h"
#include "log/ob_log.h"
#include "bridge/ob_lua.h"
#include "drive/ob_files.h"
#include "host/ob_luamod.h"
#include "host/ob_luamod_queue.h"
#include "engine/ob_resume.h"
#include "drive/ob_drive.h"
#include "engine/ob_run.h"
#include "drive/ob_shard.h"
#include "bridge/ob_view.h"
#include "log/ob_wal.h"

#define LOG_MT "obelus.log"
#define ENGINE_MT "obelus.engine"
#define RUN_MT "obelus.run"

/* Every function below follows one rule: all Lua calls that may raise (argument
 * checks, field reads) happen before it takes any C reference, and a Lua error
 * is raised only after every C reference is released. The message is copied
 * to Lua by luaL_error before the longjmp, so it may live in a local ob_error. */

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

/* A file name argument: a NUL inside would open the name cut short ("t.lua\0x" as t.lua). */
static const char *check_file(lua_State *L, int idx) {
  size_t len;
  const char *s = luaL_checklstring(L, idx, &len);
  if (strlen(s) != len)
    luaL_argerror(L, idx, "a file name holds no NUL byte (\\u0000)");
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
 * plan-format §2's path syntax without a kind. Returns the position. */
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
  return ob_lua_push_value_and_unref(L, ob_log_message(log, (size_t)i));
}

/* Reads the expression at index 2 over log, with the options at index 3
 * ({at = N, instance = "X"}): pushes the value, or nil when absent. `at`
 * needs a log that keeps its history (history 0: refused). */
static int resolve_in(lua_State *L, ob_log *log, const char *fn, int history) {
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
      if (!history)
        return luaL_error(L, "%s: \"at\" needs a run started with time_travel = true", fn);
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
  return ob_lua_push_value_and_unref(L, v);
}

/* log:resolve(expr [, {at = N, instance = "X"}]): the value, or nil when absent. */
static int log_resolve(lua_State *L) { return resolve_in(L, check_log(L), "resolve", 1); }

/* --- engines and runs ------------------------------------------------------
 *
 * obelus.engine{...} makes an ob_engine on luv's loop (the loop `require
 * "luv"` gives this state); the engine makes its own lua_State for the
 * tools, so the userdata here only hold C pointers. engine:run(plan, opts)
 * starts a run at once; luv's loop drives it: uv.run(), or run:wait().
 * engine:resume(journal, opts) starts the run a journal tells of where it
 * stopped (ob_drive_resume.c, as `obelus resume`): a run like any other.
 *
 * The choices, and why:
 *  - Errors raise, as everywhere in this module: bad arguments, tool files
 *    that do not load, an invalid plan (the message lists every problem).
 *    engine:check answers true, or nil and the list of problems: finding
 *    them is what it is for. A question a run cannot answer yet answers nil
 *    and why: status() and output() give nil, "running" before the end.
 *  - A run that has not finished is anchored in the registry: a script may
 *    drop it and still get on_event and on_done. Once every call is settled
 *    (fire-and-forget ones too) or it is cancelled, it is collectable. A run
 *    holds its engine (user value 1): an engine is never collected while a
 *    run of it is reachable, and engine:close() closes its runs first. A run
 *    owns its plan, so the plan outlives it.
 *  - The engine calls on_event and on_done from deep inside its scheduler.
 *    A callback may do anything but free what the scheduler stands on:
 *    run:cancel(), run:close() and engine:close() called from a callback are
 *    carried out at the next turn of the loop (an idle handle), as is the
 *    letting go of finished runs. An error raised by a callback is a Lua
 *    warning on the host's state (lua_warning: its warn function decides)
 *    and the run goes on. The engine's own notes go to on_note (default:
 *    a Lua warning too).
 *  - A call waiting for something that can no longer happen (nothing is left
 *    on the loop) fails as a stall, as in `obelus run`: a check handle looks
 *    at the end of every loop iteration, and run:wait(), status() and
 *    output() look once the loop has stopped.
 *  - A journal ends as `obelus run`'s does, with the end record, once the run
 *    has finished and no fire-and-forget call runs (or when it is cancelled
 *    or closed after finishing): a journal without one is of a run that did
 *    not finish, which engine:resume takes up.
 *  - Tool code may leave libuv handles or requests pending on the loop when
 *    its engine closes; luv will call back into the engine's Lua state for
 *    them. So closing an engine closes those handles, and then, outside the
 *    loop, turns the loop until luv is done with them (other callbacks on
 *    the loop may run meanwhile); inside the loop, a timer frees the engine
 *    once they are done.
 */

enum { RUN_UV_ENGINE = 1, RUN_UV_ON_EVENT, RUN_UV_ON_DONE };

typedef struct lua_engine lua_engine;
typedef struct lua_run lua_run;

/* One per Lua state that loads the module (registry["obelus.host"]): how
 * many callbacks of any of its engines are in progress. Turning the loop
 * ourselves is only allowed at 0. */
typedef struct host {
  int busy;
} host;
#define HOST_KEY "obelus.host"

/* An engine closed with its tools' libuv work pending: freed when that is done. It
 * lives outside Lua's memory, and outlives the engine's userdata. */
typedef struct reaper {
  uv_timer_t t;
  ob_engine *zombie;
} reaper;

struct lua_engine {
  ob_engine *e;      /* NULL once closed */
  ob_drive *dv;      /* its runs (begun, not closed: ob_drun_host is the lua_run), the
                        turn of the loop for deferred work, stalls; NULL once closed */
  lua_State *L;      /* where callbacks run: the main thread, or the thread in a module call */
  host *host;        /* (registry memory: valid until lua_close has run every finalizer) */
  int busy;          /* callbacks into Lua in progress: the scheduler is on the C stack */
  int close_pending;
  int note_ref;      /* registry: the on_note option, or LUA_NOREF (lua_warning) */
  ob_shard_loads loads; /* what was loaded, in order: a run on threads' engines load it again */
};

struct lua_run {
  ob_drun *d;       /* the driven run (ob_drive.h: plan, journal, run); NULL once closed */
  lua_engine *eng;  /* NULL once closed (user value 1 keeps it alive) */
  int anchor;       /* registry reference while it runs, else LUA_NOREF */
  int history;      /* time_travel: reads as of a position */
  int cancelled;    /* cancel was carried out (nothing more happens to it) */
  int cancel_pending, close_pending;
};

/* Made and not closed (on one engine, or started on threads). */
static int run_open(const lua_run *r) {
  return r->d && (ob_drun_run(r->d) || ob_drun_shards(r->d));
}

/* Every awaited call settled (on threads: every thread has ended). */
static int run_finished(const lua_run *r) { return r->d && ob_drun_finished(r->d); }

/* Fire-and-forget calls still running (on threads, each drains its own before it ends). */
static size_t run_detached(const lua_run *r) { return r->d ? ob_drun_detached(r->d) : 0; }

/* Why the journal could not be written (the run was stopped), or NULL. */
static const char *journal_error(const lua_run *r) {
  return r->d ? ob_drun_journal_error(r->d) : NULL;
}

/* Whether uv.run() is running in this state (luv records its mode). */
static int loop_running(lua_State *L) { return luv_context(L)->mode != -1; }

/* Every awaited call settled and no fire-and-forget call left, or cancelled:
 * nothing more will happen to the run. */
static int run_settled(const lua_run *r) {
  return run_open(r) && (r->cancelled || (run_finished(r) && !run_detached(r)));
}

/* --- closing, work deferred out of callbacks, stalls ------------------------- */

/* How much libuv work of the engine's tools is pending (closing its handles
 * first when close is set): ob_engine_uv_pending. */
static lua_Integer tool_uv_pending(ob_engine *e, int close) {
  return (lua_Integer)ob_engine_uv_pending(e, close);
}

static void reaper_closed(uv_handle_t *t) { free(t); }

static void reaper_tick(uv_timer_t *t) {
  reaper *rp = (reaper *)t;
  if (tool_uv_pending(rp->zombie, 0))
    return;
  ob_engine_free(rp->zombie);
  uv_close((uv_handle_t *)t, reaper_closed);
}

static void unanchor(lua_State *L, lua_run *r) {
  luaL_unref(L, LUA_REGISTRYINDEX, r->anchor);
  r->anchor = LUA_NOREF;
}

/* Frees what the run holds and takes it off its engine's list. Not from
 * inside a callback of the engine (the scheduler would stand on freed memory). */
static void free_run(lua_State *L, lua_run *r) {
  if (r->d) /* a run that finished: what still ran is abandoned */
    ob_drun_end_journal(r->d);
  /* threads joined, the run, its journal (before the engine), its plan, the journal read */
  ob_drun_free(r->d);
  r->d = NULL;
  if (r->anchor != LUA_NOREF)
    unanchor(L, r);
  r->eng = NULL;
}

static void close_engine(lua_engine *eng) {
  while (eng->dv && ob_drive_runs(eng->dv))
    free_run(eng->L, ob_drun_host(ob_drive_runs(eng->dv)));
  if (eng->e)
    ob_engine_set_note(eng->e, NULL, NULL); /* what its closing says is dropped */
  luaL_unref(eng->L, LUA_REGISTRYINDEX, eng->note_ref);
  eng->note_ref = LUA_NOREF;
  ob_shard_loads_clear(&eng->loads);
  ob_drive_free(eng->dv); /* its handles close on the loop */
  ob_engine *e = eng->e;
  eng->e = NULL;
  eng->dv = NULL;
  eng->close_pending = 0;
  if (e && tool_uv_pending(e, 1) && !eng->host->busy && !loop_running(eng->L)) {
    /* luv will call back into the engine's Lua state: outside the loop, let
     * it do so now (at lua_close too, before luv closes its loop) */
    while (uv_run(e->loop, UV_RUN_ONCE) && tool_uv_pending(e, 0))
      ;
  }
  if (e && tool_uv_pending(e, 0)) {
    /* inside the loop: keep the engine's Lua state until luv is done with it */
    reaper *rp = calloc(1, sizeof *rp);
    if (!rp)
      abort();
    rp->zombie = e;
    uv_timer_init(e->loop, &rp->t);
    uv_timer_start(&rp->t, reaper_tick, 1, 1);
    return;
  }
  ob_engine_free(e);
}

/* Carries out what callbacks deferred (the driver's flush: ob_drive_defer). Only
 * where the scheduler is not on the C stack: the driver's turn of the loop, or a
 * module call outside callbacks (ob_drive_flush). */
static void flush(void *ud) {
  lua_engine *eng = ud;
  if (eng->busy || !eng->e)
    return;
  for (ob_drun *d = ob_drive_runs(eng->dv), *next; d; d = next) {
    next = ob_drun_next(d); /* nothing here runs Lua: the list changes only as we change it */
    lua_run *r = ob_drun_host(d);
    if (r->close_pending) {
      free_run(eng->L, r);
      continue;
    }
    if (r->cancel_pending && run_open(r)) {
      r->cancel_pending = 0;
      r->cancelled = 1;
      ob_drun_cancel(r->d);
      ob_drun_end_journal(r->d);
    }
    if (r->anchor != LUA_NOREF && run_settled(r))
      unanchor(eng->L, r);
  }
  if (eng->close_pending)
    close_engine(eng);
}

static int engine_busy(void *ud) { return ((lua_engine *)ud)->busy; }

static void defer(lua_engine *eng) {
  if (eng->dv)
    ob_drive_defer(eng->dv);
}

/* A module call from Lua outside every callback: deferred work is done,
 * and, when the loop has stopped, stalled calls fail. */
static void safe_point(lua_State *L, lua_engine *eng) {
  if (!eng || eng->busy || !eng->e)
    return;
  lua_State *saved = eng->L;
  eng->L = L;
  if (!loop_running(L))
    ob_drive_fail_stalled(eng->dv);
  if (eng->dv) /* a callback of a stalled call may have closed the engine */
    ob_drive_flush(eng->dv);
  eng->L = saved;
}

/* --- callbacks from the scheduler ----------------------------------------------- */

typedef struct delivery {
  lua_run *r;
  const ob_event *ev; /* NULL: on_done */
} delivery;

static int deliver_protected(lua_State *L) {
  const delivery *d = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, d->r->anchor);
  if (lua_getiuservalue(L, -1, d->ev ? RUN_UV_ON_EVENT : RUN_UV_ON_DONE) == LUA_TNIL)
    return 0;
  if (!d->ev) {
    lua_pushvalue(L, -2);
  } else {
    const ob_event *ev = d->ev;
    lua_createtable(L, 0, 5);
    lua_pushstring(L, ob_event_name(ev->type));
    lua_setfield(L, -2, "event");
    lua_pushnumber(L, ev->t_ms);
    lua_setfield(L, -2, "t_ms");
    if (ev->call) {
      lua_pushstring(L, ev->call->id);
      lua_setfield(L, -2, "call");
      lua_pushstring(L, ev->call->tool_name);
      lua_setfield(L, -2, "tool");
    }
    if (ev->reason) {
      lua_pushstring(L, ev->reason);
      lua_setfield(L, -2, "reason");
    }
    if (ev->note) {
      lua_pushstring(L, ev->note);
      lua_setfield(L, -2, "note");
    }
    if (ev->attempt) {
      lua_pushinteger(L, (lua_Integer)ev->attempt);
      lua_setfield(L, -2, "attempt");
    }
    if (ev->data) {
      ob_lua_push(L, ev->data);
      lua_setfield(L, -2, "data");
    }
    if (ev->value) { /* a done call's value: whole, or its size when large */
      size_t size = ob_event_value_size(ev->value);
      if (size <= OB_EVENT_VALUE_MAX)
        ob_lua_push(L, ev->value);
      else
        lua_pushinteger(L, (lua_Integer)size);
      lua_setfield(L, -2, size <= OB_EVENT_VALUE_MAX ? "value" : "size");
    }
    if (ev->handled) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "handled");
    }
    if (ev->each) {
      lua_pushstring(L, ev->each->id);
      lua_setfield(L, -2, "each");
    }
  }
  lua_call(L, 1, 0);
  return 0;
}

/* Calls the run's on_event (ev) or on_done (ev NULL) in protected mode. */
static void deliver(lua_run *r, const ob_event *ev) {
  lua_engine *eng = r->eng;
  lua_State *L = eng->L;
  if (r->anchor == LUA_NOREF || !lua_checkstack(L, 4))
    return;
  int top = lua_gettop(L);
  delivery d = {r, ev};
  eng->busy++;
  eng->host->busy++;
  lua_pushcfunction(L, ob_lua_traceback);
  lua_pushcfunction(L, deliver_protected);
  lua_pushlightuserdata(L, &d);
  if (lua_pcall(L, 1, 0, top + 1) != LUA_OK) { /* the host's warn function decides */
    lua_pushfstring(L, "obelus: error in %s (run of %s): %s", ev ? "on_event" : "on_done",
                    ob_drun_plan(r->d)->file, lua_isstring(L, -1) ? lua_tostring(L, -1) : "(not a string)");
    lua_warning(L, lua_tostring(L, -1), 0);
  }
  lua_settop(L, top);
  eng->host->busy--;
  eng->busy--;
}

/* The run's listeners (after the driver's, which ends the journal when the last call
 * settled): the Lua callbacks, then what waited for the run to settle. */
static void run_on_event(void *ud, const ob_event *ev) {
  lua_run *r = ud;
  deliver(r, ev);
  if (run_settled(r))
    defer(r->eng);
}

static void run_on_done(ob_run *run, void *ud) {
  lua_run *r = ud;
  (void)run; /* NULL: a run on threads has ended */
  deliver(r, NULL);
  if (run_settled(r))
    defer(r->eng);
}

/* --- engines --------------------------------------------------------------------- */

typedef struct note_args {
  lua_engine *eng;
  const char *kind, *call_id, *msg;
} note_args;

static int note_protected(lua_State *L) {
  const note_args *a = lua_touserdata(L, 1);
  if (a->eng->note_ref == LUA_NOREF) { /* the default: a warning, "obelus: MSG" */
    lua_pushfstring(L, "obelus: %s", a->msg);
    lua_warning(L, lua_tostring(L, -1), 0);
    return 0;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, a->eng->note_ref);
  lua_pushstring(L, a->kind);
  if (a->call_id)
    lua_pushstring(L, a->call_id);
  else
    lua_pushnil(L);
  lua_pushstring(L, a->msg);
  lua_call(L, 3, 0);
  return 0;
}

/* The engine's notes (ob_engine_note): on_note(kind, call, msg), or a Lua warning. */
static void engine_note(void *ud, const char *kind, const char *call_id, const char *msg) {
  lua_engine *eng = ud;
  lua_State *L = eng->L;
  if (!lua_checkstack(L, 6))
    return;
  int top = lua_gettop(L);
  note_args a = {eng, kind, call_id, msg};
  eng->busy++;
  eng->host->busy++;
  lua_pushcfunction(L, ob_lua_traceback);
  lua_pushcfunction(L, note_protected);
  lua_pushlightuserdata(L, &a);
  if (lua_pcall(L, 1, 0, top + 1) != LUA_OK) {
    lua_pushfstring(L, "obelus: error in on_note: %s",
                    lua_isstring(L, -1) ? lua_tostring(L, -1) : "(not a string)");
    lua_warning(L, lua_tostring(L, -1), 0);
  }
  lua_settop(L, top);
  eng->host->busy--;
  eng->busy--;
}

static lua_engine *check_engine(lua_State *L, int idx) {
  lua_engine *eng = luaL_checkudata(L, idx, ENGINE_MT);
  if (!eng->e || eng->close_pending)
    luaL_error(L, "the engine is closed");
  return eng;
}

static ob_engine *hook_check_engine(lua_State *L, int idx) { return check_engine(L, idx)->e; }

static int hook_busy(lua_State *L) {
  int busy = 0;
  if (lua_getfield(L, LUA_REGISTRYINDEX, HOST_KEY) == LUA_TUSERDATA)
    busy = ((host *)lua_touserdata(L, -1))->busy;
  lua_pop(L, 1);
  return busy;
}

static int engine_load_tools(lua_State *L) {
  lua_engine *eng = check_engine(L, 1);
  const char *path = check_file(L, 2);
  ob_error err;
  if (ob_engine_load_tools(eng->e, path, &err) != OB_OK)
    return luaL_error(L, "%s", err.msg);
  ob_shard_loads_add(&eng->loads, 't', path);
  lua_settop(L, 1);
  return 1;
}

static int engine_load_script(lua_State *L) {
  lua_engine *eng = check_engine(L, 1);
  const char *path = check_file(L, 2);
  ob_error err;
  if (ob_engine_load_script(eng->e, path, &err) != OB_OK)
    return luaL_error(L, "%s", err.msg);
  ob_shard_loads_add(&eng->loads, 's', path);
  lua_settop(L, 1);
  return 1;
}

/* Calls method(engine, path) for opts[name]: a path or a list of paths. */
static void load_each(lua_State *L, int eng_idx, int opts, const char *name, lua_CFunction method) {
  int type = lua_getfield(L, opts, name);
  int list = lua_gettop(L);
  if (type == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (type != LUA_TSTRING && type != LUA_TTABLE)
    luaL_error(L, "obelus.engine: \"%s\" must be a path or a list of paths, not %s", name,
               luaL_typename(L, -1));
  lua_Integer n = type == LUA_TSTRING ? 1 : luaL_len(L, list);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_pushcfunction(L, method);
    lua_pushvalue(L, eng_idx);
    if (type == LUA_TSTRING)
      lua_pushvalue(L, list);
    else if (lua_geti(L, list, i) != LUA_TSTRING)
      luaL_error(L, "obelus.engine: %s[%I] must be a path, not %s", name, i, luaL_typename(L, -1));
    lua_call(L, 2, 0);
  }
  lua_pop(L, 1);
}

static lua_Integer opt_count(lua_State *L, int opts, const char *fn, const char *name,
                             lua_Integer lo, lua_Integer hi);

/* obelus.engine([{tools = path|{paths}, scripts = path|{paths}, max_memory_mb = n}]): a new
 * engine on luv's loop, with those tool files (or folders of them) and
 * scripts (obelus.set_latent, obelus.set_approver) loaded. */
static int core_engine(lua_State *L) {
  lua_settop(L, 1);
  if (!lua_isnil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING ||
          (strcmp(lua_tostring(L, -1), "tools") && strcmp(lua_tostring(L, -1), "scripts") &&
           strcmp(lua_tostring(L, -1), "max_memory_mb") &&
           strcmp(lua_tostring(L, -1), "http_max") &&
           strcmp(lua_tostring(L, -1), "http_max_bytes") &&
           strcmp(lua_tostring(L, -1), "http_allow_private") &&
           strcmp(lua_tostring(L, -1), "on_note")))
        return luaL_error(L, "obelus.engine: unknown option %s (known: tools, scripts, "
                             "max_memory_mb, http_max, http_max_bytes, http_allow_private, "
                             "on_note)",
                          luaL_tolstring(L, -1, NULL));
    }
  }
  /* luv first: its loop is the engine's, and it must be finalized after the
   * engine. Its loop lives as long as its module does, so the first luv module
   * is held here for good: a host that drops luv (package.loaded.luv = nil, as
   * busted does between spec files) and requires it again must not take the
   * loop from under the engines on it */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luv");
  lua_call(L, 1, 1);
  if (lua_getfield(L, LUA_REGISTRYINDEX, "obelus.luv") == LUA_TNIL) {
    lua_pushvalue(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, "obelus.luv");
  }
  lua_pop(L, 2);
  uv_loop_t *loop = luv_loop(L);
  if (!loop)
    return luaL_error(L, "obelus.engine: luv has no loop");

  lua_engine *eng = lua_newuserdatauv(L, sizeof *eng, 0);
  memset(eng, 0, sizeof *eng); /* the metatable first: an engine never exists without its __gc */
  eng->note_ref = LUA_NOREF;
  luaL_setmetatable(L, ENGINE_MT);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  eng->L = lua_tothread(L, -1);
  lua_getfield(L, LUA_REGISTRYINDEX, HOST_KEY);
  eng->host = lua_touserdata(L, -1);
  lua_pop(L, 2);
  ob_error err;
  if (!(eng->e = ob_engine_new(loop, &err)))
    return luaL_error(L, "obelus.engine: %s", err.msg);
  ob_engine_set_note(eng->e, engine_note, eng);
  /* deferred work on the next turn of the loop, and a stall check at the end of each */
  eng->dv = ob_drive_new(eng->e, &(ob_drive_host){.flush = flush, .busy = engine_busy, .ud = eng},
                         1);
  if (!lua_isnil(L, 1)) {
    int idx = lua_gettop(L);
    lua_Integer mb = opt_count(L, 1, "obelus.engine", "max_memory_mb", 1, 1048576);
    ob_engine_set_max_memory(eng->e, (size_t)mb << 20);
    eng->e->http_max = (size_t)opt_count(L, 1, "obelus.engine", "http_max", 1, 1000000);
    eng->e->http_max_bytes =
        (size_t)opt_count(L, 1, "obelus.engine", "http_max_bytes", 1, LUA_MAXINTEGER);
    if (lua_getfield(L, 1, "http_allow_private") != LUA_TNIL && !lua_isboolean(L, -1))
      return luaL_error(L, "obelus.engine: http_allow_private must be true or false");
    eng->e->http_allow_private = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, 1, "on_note") != LUA_TNIL) {
      if (!lua_isfunction(L, -1))
        return luaL_error(L, "obelus.engine: on_note must be a function(kind, call, msg)");
      eng->note_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    } else {
      lua_pop(L, 1);
    }
    load_each(L, idx, 1, "tools", engine_load_tools);
    load_each(L, idx, 1, "scripts", engine_load_script);
  }
  return 1;
}

static int engine_close(lua_State *L) {
  lua_engine *eng = luaL_checkudata(L, 1, ENGINE_MT);
  if (!eng->e)
    return 0;
  if (eng->busy) { /* the scheduler is on the C stack: at the next turn of the loop */
    eng->close_pending = 1;
    defer(eng);
    return 0;
  }
  close_engine(eng);
  return 0;
}

/* __gc: nothing of a collectable engine is on the C stack (a callback's run
 * is anchored, and holds its engine), so it closes at once. */
static int engine_gc(lua_State *L) {
  lua_engine *eng = luaL_checkudata(L, 1, ENGINE_MT);
  if (eng->e || eng->dv)
    close_engine(eng);
  return 0;
}

static int engine_tostring(lua_State *L) {
  lua_engine *eng = luaL_checkudata(L, 1, ENGINE_MT);
  if (eng->e && !eng->close_pending)
    lua_pushfstring(L, "obelus.engine (%I tools)", (lua_Integer)eng->e->tools.n);
  else
    lua_pushliteral(L, "obelus.engine (closed)");
  return 1;
}

/* --- plans, checked ---------------------------------------------------------------- */

typedef struct run_options {
  int input;         /* stack index of opts.input, or 0 */
  int force;         /* engine:resume: take the journal up even if files changed */
  const char *name;  /* the plan's name in messages, for a plan given as a table */
  const char *journal;
  const char *plans_root; /* NULL: the plan file's folder, or the cwd for a table */
  ob_fsync fsync;
  lua_Integer concurrency, max_depth;
  lua_Integer call_timeout_ms, max_output_kb, max_calls; /* 0: none */
  lua_Integer threads; /* engine:run: instances over this many threads (0: one engine) */
  int time_travel;
  int overwrite; /* engine:run: an existing non-empty journal may be replaced */
} run_options;

static lua_Integer opt_count(lua_State *L, int opts, const char *fn, const char *name,
                             lua_Integer lo, lua_Integer hi) {
  int type = lua_getfield(L, opts, name);
  lua_Integer n = type == LUA_TNIL ? 0 : lua_tointeger(L, -1);
  if (type != LUA_TNIL && (!lua_isinteger(L, -1) || n < lo || n > hi))
    luaL_error(L, "%s: \"%s\" must be an integer from %I to %I", fn, name, lo, hi);
  lua_pop(L, 1);
  return n;
}

/* Reads the options table at opts (may be nil); everything a run takes, so
 * that check and run accept the same table; with resume, what engine:resume
 * takes (no input and no journal: the run's own; force). Leaves the values
 * it keeps an index of (input, on_event, on_done) on the stack. */
static void read_run_options(lua_State *L, int opts, const char *fn, run_options *o, int *on_event,
                             int *on_done, int resume) {
  static const char *const known_run[] = {"input",       "name",      "journal",     "fsync",
                                          "concurrency", "max_depth", "time_travel", "on_event",
                                          "on_done",     "plans_root", "call_timeout_ms",
                                          "max_output_kb", "max_calls", "threads",
                                          "overwrite", NULL};
  static const char *const known_resume[] = {"name",        "fsync",    "force",
                                             "concurrency", "max_depth", "time_travel",
                                             "on_event",    "on_done",  "plans_root",
                                             "call_timeout_ms", "max_output_kb", "max_calls",
                                             NULL};
  const char *const *known = resume ? known_resume : known_run;
  memset(o, 0, sizeof *o);
  o->fsync = OB_FSYNC_BATCH;
  /* the CLI's defaults (ob_run.h), with or without a table */
  o->max_output_kb = (lua_Integer)OB_DEFAULT_MAX_OUTPUT_KB;
  o->max_calls = (lua_Integer)OB_DEFAULT_MAX_CALLS;
  *on_event = *on_done = 0;
  if (lua_isnoneornil(L, opts))
    return;
  luaL_checktype(L, opts, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, opts)) {
    lua_pop(L, 1);
    int ok = 0;
    for (int i = 0; known[i] && !ok; i++)
      ok = lua_type(L, -1) == LUA_TSTRING && !strcmp(lua_tostring(L, -1), known[i]);
    if (!ok && resume && lua_type(L, -1) == LUA_TSTRING &&
        (!strcmp(lua_tostring(L, -1), "input") || !strcmp(lua_tostring(L, -1), "journal")))
      luaL_error(L, "%s: \"%s\" is the run's: it appends to the journal it resumes and reads "
                    "its inputs from it", fn, lua_tostring(L, -1));
    if (!ok) { /* "fn: unknown option X (known: a, b, ...)", the list from known */
      luaL_Buffer b;
      const char *name = luaL_tolstring(L, -1, NULL);
      luaL_buffinit(L, &b);
      lua_pushfstring(L, "%s: unknown option %s (known: ", fn, name);
      luaL_addvalue(&b);
      for (int i = 0; known[i]; i++) {
        if (i)
          luaL_addstring(&b, ", ");
        luaL_addstring(&b, known[i]);
      }
      luaL_addchar(&b, ')');
      luaL_pushresult(&b);
      lua_error(L);
    }
  }
  o->name = opt_string(L, opts, fn, "name", NULL);
  o->journal = opt_string(L, opts, fn, "journal", NULL);
  o->plans_root = opt_string(L, opts, fn, "plans_root", NULL);
  const char *fsync = opt_string(L, opts, fn, "fsync", "batch");
  if (ob_fsync_parse(fsync, &o->fsync) != OB_OK)
    luaL_error(L, "%s: \"fsync\" is never, batch or always, not \"%s\"", fn, fsync);
  o->concurrency = opt_count(L, opts, fn, "concurrency", 1, LUA_MAXINTEGER);
  o->max_depth = opt_count(L, opts, fn, "max_depth", 1, 10000);
  o->call_timeout_ms = opt_count(L, opts, fn, "call_timeout_ms", 1, 2147483647);
  lua_Integer kb = opt_count(L, opts, fn, "max_output_kb", 1, 1073741824);
  lua_Integer calls = opt_count(L, opts, fn, "max_calls", 1, LUA_MAXINTEGER);
  if (kb) /* 0: not given, the default stays */
    o->max_output_kb = kb;
  if (calls)
    o->max_calls = calls;
  o->threads = opt_count(L, opts, fn, "threads", 1, 1024);
  lua_getfield(L, opts, "overwrite");
  o->overwrite = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, opts, "time_travel");
  o->time_travel = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, opts, "force");
  o->force = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, opts, "input") != LUA_TNIL)
    o->input = lua_gettop(L);
  else
    lua_pop(L, 1);
  const char *cbs[2] = {"on_event", "on_done"};
  int *idx[2] = {on_event, on_done};
  for (int i = 0; i < 2; i++) {
    int type = lua_getfield(L, opts, cbs[i]);
    if (type == LUA_TNIL) {
      lua_pop(L, 1);
    } else if (type != LUA_TFUNCTION && !luaL_getmetafield(L, -1, "__call")) {
      luaL_error(L, "%s: \"%s\" must be a function, not %s", fn, cbs[i], luaL_typename(L, -1));
    } else {
      if (type != LUA_TFUNCTION)
        lua_pop(L, 1); /* the __call field */
      *idx[i] = lua_gettop(L);
    }
  }
}

/* A new run userdata (not started, not on its engine's list) holding the plan
 * at plan_idx (a file path, or a table) checked against eng's tools. Every C
 * resource is the userdata's from the start, so a Lua error frees it (__gc).
 * Pushes the userdata. */
/* A new run userdata, holding nothing yet (pushed). */
static lua_run *new_run(lua_State *L) {
  lua_run *r = lua_newuserdatauv(L, sizeof *r, 3);
  memset(r, 0, sizeof *r);
  r->anchor = LUA_NOREF;
  luaL_setmetatable(L, RUN_MT);
  return r;
}

static lua_run *prepare(lua_State *L, lua_engine *eng, int plan_idx, const run_options *o,
                        const char *fn, int may_thread) {
  lua_run *r = new_run(L);
  int file = lua_type(L, plan_idx) == LUA_TSTRING;
  if (!file && lua_type(L, plan_idx) != LUA_TTABLE)
    luaL_error(L, "%s: the plan must be a file name or a table, not %s", fn,
               luaL_typename(L, plan_idx));
  ob_error err;
  ob_value *inputs = ob_array(), *pv = NULL;
  if (o->input) {
    ob_value *in = ob_lua_to_value_named(L, o->input, "input", &err);
    if (!in) {
      ob_unref(inputs);
      luaL_error(L, "%s: %s", fn, err.msg);
    }
    inputs = ob_array_push(inputs, in);
  }
  if (!file && !(pv = ob_lua_to_value_named(L, plan_idx, "plan", &err))) {
    ob_unref(inputs);
    luaL_error(L, "%s: %s", fn, err.msg);
  }
  /* the plans root: opts.plans_root, else the plan file's folder, else the cwd; a run
   * that may go on threads reads a probe (ob_shard_read_plan), a check and a run that
   * cannot the whole plan */
  ob_drive_source src = {.name = file ? lua_tostring(L, plan_idx) : o->name ? o->name : "plan",
                         .file = file ? lua_tostring(L, plan_idx) : NULL,
                         .plan = pv,
                         .inputs = inputs,
                         .plans_root = o->plans_root,
                         .input_label = "input",
                         .max_calls = (size_t)o->max_calls,
                         .may_thread = may_thread && o->threads > 1,
                         .threads = (size_t)o->threads,
                         .concurrency = (size_t)o->concurrency,
                         .journal_fsync = o->journal ? o->fsync : OB_FSYNC_NEVER};
  if (!(r->d = ob_drun_prepare(eng->e, &src, &err))) /* pv and inputs freed */
    luaL_error(L, "%s: %s", fn, err.msg);
  return r;
}

/* engine:check(plan [, opts]): true, or nil and the list of problems
 * ("file: call <id> (<tool>): <what>"). Runs nothing. */
static int engine_check(lua_State *L) {
  lua_engine *eng = check_engine(L, 1);
  luaL_checkany(L, 2);
  lua_settop(L, 3);
  run_options o;
  int on_event, on_done;
  read_run_options(L, 3, "engine:check", &o, &on_event, &on_done, 0);
  lua_run *r = prepare(L, eng, 2, &o, "engine:check", 0);
  const ob_plan *p = ob_drun_plan(r->d);
  if (!p->nerrors) {
    lua_pushboolean(L, 1);
  } else {
    lua_pushnil(L);
    lua_createtable(L, (int)p->nerrors, 0);
    for (size_t i = 0; i < p->nerrors; i++) {
      lua_pushstring(L, p->errors[i]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
  }
  int n = p->nerrors ? 2 : 1;
  free_run(L, r); /* now rather than at the next collection */
  return n;
}

/* The run at idx (its userdata) holds its engine and the callbacks at
 * on_event and on_done (stack indices, or 0). */
static void hold_callbacks(lua_State *L, int idx, int eng_idx, int on_event, int on_done) {
  lua_pushvalue(L, eng_idx);
  lua_setiuservalue(L, idx, RUN_UV_ENGINE);
  if (on_event) {
    lua_pushvalue(L, on_event);
    lua_setiuservalue(L, idx, RUN_UV_ON_EVENT);
  }
  if (on_done) {
    lua_pushvalue(L, on_done);
    lua_setiuservalue(L, idx, RUN_UV_ON_DONE);
  }
}

/* Raises the plan's problems, every one, when it has any. */
static void raise_problems(lua_State *L, const ob_plan *p, const char *fn) {
  if (!p->nerrors)
    return;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < p->nerrors; i++) {
    luaL_addstring(&b, p->errors[i]);
    luaL_addchar(&b, '\n');
  }
  lua_pushfstring(L, "%s: %I problem%s, nothing ran", fn, (lua_Integer)p->nerrors,
                  p->nerrors == 1 ? "" : "s");
  luaL_addvalue(&b);
  luaL_pushresult(&b);
  lua_error(L);
}

/* Makes the scheduler's run of r (at idx, its plan checked, its journal open):
 * a new one, or the one its journal tells of (r->resume); puts it on the
 * engine's list, anchors it and starts it. Returns the run (left on top). */
static int begin_run(lua_State *L, lua_engine *eng, lua_run *r, int idx, const run_options *o,
                     const char *fn) {
  r->eng = eng;
  ob_drun_attach(r->d, eng->dv, r); /* one of the engine's runs (deferred work, stalls) */
  r->history = o->time_travel;
  ob_run_options ro = {.concurrency = (size_t)o->concurrency,
                       .max_depth = (int)o->max_depth,
                       .time_travel = o->time_travel,
                       .call_timeout_ms = (uint32_t)o->call_timeout_ms,
                       .max_output = (size_t)o->max_output_kb << 10,
                       .max_calls = (size_t)o->max_calls,
                       .on_event = run_on_event,
                       .on_done = run_on_done,
                       .ud = r};
  ob_error err;
  if (ob_drun_make(r->d, &ro, &err) != OB_OK) /* prepare tried the context: unexpected */
    return luaL_error(L, "%s: %s", fn, err.msg);
  if (ob_drun_threads(r->d)) { /* the parts' engines load what this one loaded */
    if (ob_drun_start(r->d, NULL, NULL, &eng->loads, 5000, &err) != OB_OK)
      return luaL_error(L, "%s: %s", fn, err.msg);
    lua_pushvalue(L, idx);
    r->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, idx);
    return 1;
  }
  lua_pushvalue(L, idx);
  r->anchor = luaL_ref(L, LUA_REGISTRYINDEX); /* nothing below raises: it stays anchored until settled */
  lua_State *saved = eng->L;
  eng->L = L;
  eng->busy++; /* calls start now: deferred work waits for the loop */
  eng->host->busy++;
  ob_drun_start(r->d, NULL, NULL, NULL, 0, &err); /* on one engine: ob_run_start */
  eng->host->busy--;
  eng->busy--;
  eng->L = saved;
  if (run_settled(r))
    defer(eng);
  lua_settop(L, idx);
  return 1;
}

/* engine:run(plan [, opts]): validates the plan (an error lists every
 * problem; nothing runs) and starts it. Returns the run. */
static int engine_run(lua_State *L) {
  static const char fn[] = "engine:run";
  lua_engine *eng = check_engine(L, 1);
  luaL_checkany(L, 2);
  lua_settop(L, 3);
  run_options o;
  int on_event, on_done;
  read_run_options(L, 3, fn, &o, &on_event, &on_done, 0);
  safe_point(L, eng);
  if (!eng->e)
    return luaL_error(L, "the engine is closed");
  lua_run *r = prepare(L, eng, 2, &o, fn, 1);
  int idx = lua_gettop(L);
  hold_callbacks(L, idx, 1, on_event, on_done);
  raise_problems(L, ob_drun_plan(r->d), fn);
  ob_error err;
  /* a journal that is a file the run reads (the plan, a tool file, a delegated
   * plan) would destroy it: refused before the file is opened, as the CLI does */
  if (o.journal) {
    ob_files *fs = ob_drun_files(r->d, "the plan file");
    ob_buf why;
    ob_buf_init(&why);
    int bad = ob_files_clash(fs, "the journal", o.journal, &why);
    ob_files_free(fs);
    if (bad) {
      lua_pushfstring(L, "%s: %s", fn, why.data);
      ob_buf_free(&why);
      return lua_error(L);
    }
    ob_buf_free(&why);
  }
  /* an existing non-empty file is never truncated: refused unless overwrite */
  if (o.journal && ob_drun_open_journal(r->d, o.journal, o.overwrite, o.fsync, &err) != OB_OK)
    return luaL_error(L, "%s: cannot write the journal: %s%s", fn, err.msg,
                      o.overwrite ? "" : " (overwrite = true replaces an existing file)");
  return begin_run(L, eng, r, idx, &o, fn);
}

/* engine:resume(journal [, opts]): takes up the run whose journal (engine:run's
 * journal option, `obelus run --journal`) is the file journal, as `obelus
 * resume` does: its log rebuilt, only the calls that did not complete run
 * (one that had started runs again), appending to the same journal; it ends
 * as the uninterrupted run would have. A journal of a run that ended: the
 * run finishes at once with the status and output it had, running nothing.
 * opts as engine:run's, but input and journal (the run's own) and with force
 * (take it up even when the plan or tool files changed since). Raises for a
 * journal that cannot be read, an invalid plan (every problem), a changed
 * file without force, a journal of `obelus loop`. Returns the run. */
static int engine_resume(lua_State *L) {
  static const char fn[] = "engine:resume";
  lua_engine *eng = check_engine(L, 1);
  const char *path = check_file(L, 2);
  lua_settop(L, 3);
  run_options o;
  int on_event, on_done;
  read_run_options(L, 3, fn, &o, &on_event, &on_done, 1);
  safe_point(L, eng);
  if (!eng->e)
    return luaL_error(L, "the engine is closed");
  lua_run *r = new_run(L); /* from here on it holds every C resource (freed by __gc) */
  int idx = lua_gettop(L);
  hold_callbacks(L, idx, 1, on_event, on_done);
  ob_error err;
  ob_buf why;
  ob_buf_init(&why);
  size_t changes;
  if (!(r->d = ob_drun_prepare_resume(eng->e, path, o.name, o.plans_root, &why, &changes,
                                      &err))) {
    ob_buf_free(&why);
    return luaL_error(L, "%s: %s", fn, err.msg); /* a journal of `obelus loop` too */
  }
  if (changes && !o.force) {
    ob_buf msg;
    ob_buf_init(&msg);
    ob_buf_addf(&msg, "%s: %s: %s; nothing ran (force = true resumes anyway)", fn, path,
                why.data);
    ob_buf_free(&why);
    ob_lua_push_text_and_free(L, msg.data, msg.len);
    return lua_error(L);
  }
  ob_buf_free(&why);
  raise_problems(L, ob_drun_plan(r->d), fn);
  /* checked to be as the run left it, before it is touched; opened to append */
  if (ob_drun_open_journal(r->d, NULL, 0, o.fsync, &err) != OB_OK)
    return luaL_error(L, "%s: %s", fn, err.msg);
  return begin_run(L, eng, r, idx, &o, fn);
}

/* engine:fork(journal, opts): a new run from a point of the run journal tells of, with
 * changes, as `obelus fork` does (ob_fork.c): opts.journal (the fork's own, required),
 * opts.from (a call id) or opts.at (a number of messages), opts.set (a table from a
 * reference, "†state.city", to its new value), opts.input (an input document),
 * opts.overwrite; the rest as engine:resume's (no force: files changed since are said
 * as a note "changed", not refused). journal is never written. Raises for a bad point,
 * a change that does not parse, a journal that cannot be read or written. Returns the
 * run (start it and wait for it like any; engine:resume takes a killed fork up). */
static int engine_fork(lua_State *L) {
  static const char fn[] = "engine:fork";
  lua_engine *eng = check_engine(L, 1);
  const char *path = check_file(L, 2);
  lua_settop(L, 3);
  luaL_checktype(L, 3, LUA_TTABLE);
  /* the fork's own options, taken out of a copy of the table that then holds the run's */
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, 3)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_settable(L, 4);
  }
  ob_fork_options fo = {.source = path, .at = -1, .fsync = OB_FSYNC_BATCH};
  lua_getfield(L, 4, "journal");
  fo.journal = lua_tostring(L, -1);
  if (lua_type(L, -1) != LUA_TSTRING)
    return luaL_error(L, "%s: opts.journal must be the path of the fork's own journal", fn);
  lua_getfield(L, 4, "from");
  if (!lua_isnil(L, -1) && !(fo.from = lua_tostring(L, -1)))
    return luaL_error(L, "%s: opts.from must be a call id", fn);
  lua_getfield(L, 4, "at");
  if (!lua_isnil(L, -1)) {
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0)
      return luaL_error(L, "%s: opts.at must be a number of messages", fn);
    fo.at = (long long)lua_tointeger(L, -1);
  }
  lua_getfield(L, 4, "overwrite");
  fo.overwrite = lua_toboolean(L, -1);
  ob_error err;
  ob_value *sets = ob_array(), *inputs = ob_array();
  lua_getfield(L, 4, "set");
  int set_idx = lua_gettop(L);
  if (!lua_isnil(L, set_idx)) {
    luaL_checktype(L, set_idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, set_idx)) {
      ob_expr e;
      size_t n;
      const char *ref = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &n) : NULL;
      ob_value *v = NULL;
      if (!ref || ob_expr_parse(ref, n, OB_EXPR_INPUT, &e, &err) != OB_OK) {
        ob_unref(sets);
        ob_unref(inputs);
        return luaL_error(L, "%s: opts.set's keys are references (\"" OB_DAGGER "state.x\")%s%s",
                          fn, ref ? ": " : "", ref ? err.msg : "");
      }
      ob_expr_free(&e);
      if (!(v = ob_lua_to_value_named(L, lua_gettop(L), "set", &err))) {
        ob_unref(sets);
        ob_unref(inputs);
        return luaL_error(L, "%s: %s", fn, err.msg);
      }
      ob_value *pair = ob_array_push(ob_array(), ob_string(ref, n));
      sets = ob_array_push(sets, ob_array_push(pair, v));
      lua_pop(L, 1);
    }
  }
  lua_getfield(L, 4, "input");
  if (!lua_isnil(L, -1)) {
    ob_value *in = ob_lua_to_value_named(L, lua_gettop(L), "input", &err);
    if (!in) {
      ob_unref(sets);
      ob_unref(inputs);
      return luaL_error(L, "%s: %s", fn, err.msg);
    }
    inputs = ob_array_push(inputs, in);
  }
  static const char *const fork_own[] = {"journal", "from", "at", "set", "input", "overwrite"};
  for (size_t i = 0; i < sizeof fork_own / sizeof *fork_own; i++) {
    lua_pushnil(L);
    lua_setfield(L, 4, fork_own[i]);
  }
  fo.sets = sets;
  fo.inputs = inputs;
  lua_settop(L, 4);
  lua_replace(L, 3); /* the run's options, as engine:resume reads them */
  run_options o;
  int on_event, on_done;
  read_run_options(L, 3, fn, &o, &on_event, &on_done, 1);
  fo.fsync = o.fsync;
  safe_point(L, eng);
  if (!eng->e) {
    ob_unref(sets);
    ob_unref(inputs);
    return luaL_error(L, "the engine is closed");
  }
  lua_run *r = new_run(L); /* from here on it holds every C resource (freed by __gc) */
  int idx = lua_gettop(L);
  hold_callbacks(L, idx, 1, on_event, on_done);
  ob_buf why;
  ob_buf_init(&why);
  size_t changes;
  ob_fork_result res;
  r->d = ob_drun_prepare_fork(eng->e, &fo, o.name, o.plans_root, &why, &changes, &res, &err);
  ob_unref(sets);
  ob_unref(inputs);
  if (!r->d) {
    ob_buf_free(&why);
    return luaL_error(L, "%s: %s", fn, err.msg);
  }
  if (changes)
    ob_engine_note(eng->e, "changed", NULL, "%s", why.data);
  ob_buf_free(&why);
  raise_problems(L, ob_drun_plan(r->d), fn);
  if (ob_drun_open_journal(r->d, NULL, 0, o.fsync, &err) != OB_OK)
    return luaL_error(L, "%s: %s", fn, err.msg);
  return begin_run(L, eng, r, idx, &o, fn);
}

/* --- runs ------------------------------------------------------------------------- */

static lua_run *to_run(lua_State *L) { return luaL_checkudata(L, 1, RUN_MT); }

/* Pushes the status: 0 or 1 once every awaited call settled (1: some call
 * failed), else nil and "running", "cancelled" or "closed". */
static int push_status(lua_State *L, const lua_run *r) {
  if (journal_error(r)) { /* the run was stopped (ob_record_flush) */
    lua_pushnil(L);
    lua_pushfstring(L, "%s; the run was stopped", journal_error(r));
    return 2;
  }
  if (run_finished(r)) {
    lua_pushinteger(L, ob_drun_exit_status(r->d));
    return 1;
  }
  lua_pushnil(L);
  lua_pushstring(L, !run_open(r) || r->close_pending ? "closed" : r->cancelled ? "cancelled" : "running");
  return 2;
}

static int run_status(lua_State *L) {
  lua_run *r = to_run(L);
  safe_point(L, r->eng);
  return push_status(L, r);
}

/* run:wait(): turns luv's loop (uv.run("once")) until the run's awaited calls
 * have settled; returns the status. Not from inside the loop. */
static int run_wait(lua_State *L) {
  lua_run *r = to_run(L);
  lua_settop(L, 1);
  for (;;) {
    lua_engine *eng = r->eng; /* the run's user value keeps it alive */
    if (!eng || !run_open(r))
      break;
    if (eng->busy)
      return luaL_error(L, "run:wait() inside a callback of its engine: the loop is already "
                           "running (use on_done)");
    if (loop_running(L))
      return luaL_error(L, "run:wait() while uv.run() is running: wait outside the loop, or "
                           "use on_done");
    safe_point(L, eng);
    if (!run_open(r) || r->cancelled || run_finished(r) || !eng->e ||
        !uv_loop_alive(eng->e->loop) || journal_error(r))
      break;
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "luv");
    lua_getfield(L, -1, "run");
    lua_pushliteral(L, "once");
    lua_State *saved = eng->L;
    eng->L = L;
    int rc = lua_pcall(L, 1, 0, 0);
    eng->L = saved;
    if (rc != LUA_OK)
      return lua_error(L);
    lua_settop(L, 1);
  }
  safe_point(L, r->eng);
  return push_status(L, r);
}

/* run:output(): the final output (plan-format §5) once every awaited call settled,
 * else nil and why. */
static int run_output(lua_State *L) {
  lua_run *r = to_run(L);
  safe_point(L, r->eng);
  if (!run_finished(r))
    return push_status(L, r);
  return ob_lua_push_value_and_unref(L, ob_drun_output(r->d));
}

static ob_run *check_open_run(lua_State *L) {
  lua_run *r = to_run(L);
  if (r->d && ob_drun_threads(r->d))
    luaL_error(L, "a run on threads has a log on each thread, none to read here (read its "
                  "output)");
  if (!r->d || !ob_drun_run(r->d))
    luaL_error(L, "the run is closed");
  return ob_drun_run(r->d);
}

/* run:resolve(expr [, {at = N, instance = "X"}]): a reference read over the
 * run's log as it is now (or as of message N, with time_travel); nil when absent. */
static int run_resolve(lua_State *L) {
  ob_run *run = check_open_run(L);
  return resolve_in(L, ob_run_log(run), "run:resolve", to_run(L)->history);
}

/* run:messages(): the run's log so far, a list of messages. */
static int run_messages(lua_State *L) {
  ob_log *log = ob_run_log(check_open_run(L));
  size_t n = ob_log_len(log);
  lua_createtable(L, n < INT32_MAX ? (int)n : 0, 0);
  for (size_t i = 0; i < n; i++) {
    ob_lua_push_value_and_unref(L, ob_log_message(log, i));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* run:cancel(): abandons the calls still running; nothing more is written.
 * A run not finished then has the status nil, "cancelled". */
static int run_cancel(lua_State *L) {
  lua_run *r = to_run(L);
  if (!run_open(r) || r->cancelled)
    return 0;
  if (r->eng->busy) {
    r->cancel_pending = 1;
    defer(r->eng);
    return 0;
  }
  r->cancelled = 1;
  ob_drun_cancel(r->d);
  ob_drun_end_journal(r->d); /* a run that finished: what still ran is abandoned */
  if (r->anchor != LUA_NOREF)
    unanchor(L, r);
  return 0;
}

/* run:close() and __close: cancels and frees the run (its log included). */
static int run_close(lua_State *L) {
  lua_run *r = to_run(L);
  if (r->eng && r->eng->busy) {
    r->close_pending = 1;
    defer(r->eng);
    return 0;
  }
  if (r->d)
    free_run(L, r);
  return 0;
}

/* __gc: a run is collectable only when anchored by nobody, so never while
 * its scheduler calls back; or at lua_close, outside every callback. */
static int run_gc(lua_State *L) {
  lua_run *r = to_run(L);
  free_run(L, r);
  return 0;
}

static int run_tostring(lua_State *L) {
  lua_run *r = to_run(L);
  if (!run_open(r)) {
    lua_pushliteral(L, "obelus.run (closed)");
    return 1;
  }
  const char *state = run_finished(r) ? (ob_drun_exit_status(r->d) ? "failed" : "done")
                      : r->cancelled          ? "cancelled"
                                              : "running";
  lua_pushfstring(L, "obelus.run (%s: %s)", ob_drun_plan(r->d)->file, state);
  return 1;
}

static const luaL_Reg engine_methods[] = {
    {"load_tools", engine_load_tools}, {"load_script", engine_load_script},
    {"check", engine_check},           {"run", engine_run},
    {"resume", engine_resume},         {"fork", engine_fork},
    {"close", engine_close},
    {NULL, NULL}};

static const luaL_Reg run_methods[] = {
    {"status", run_status},   {"wait", run_wait},         {"output", run_output},
    {"resolve", run_resolve}, {"messages", run_messages}, {"cancel", run_cancel},
    {"close", run_close},     {NULL, NULL}};


static const luaL_Reg log_methods[] = {
    {"append", log_append},   {"append_output", log_append_output},
    {"len", log_len},         {"message", log_message},
    {"resolve", log_resolve}, {"close", log_close},
    {NULL, NULL}};

static const luaL_Reg core_functions[] = {
    {"decode", ob_lua_decode}, {"encode", ob_lua_encode}, {"array", ob_lua_array},
    {"log", core_log},       {"engine", core_engine}, {"totable", ob_lua_totable},
    {"is_view", ob_view_lua_is_view}, {"next", ob_view_lua_next}, {NULL, NULL}};

int luaopen_obelus_core(lua_State *L) {
  ob_lua_open(L);
  if (lua_getfield(L, LUA_REGISTRYINDEX, HOST_KEY) != LUA_TUSERDATA) {
    host *h = lua_newuserdatauv(L, sizeof *h, 0);
    h->busy = 0;
    lua_setfield(L, LUA_REGISTRYINDEX, HOST_KEY);
  }
  lua_pop(L, 1);
  ob_lua_new_class(L, LOG_MT, log_methods, log_close, log_close, log_tostring);
  ob_lua_new_class(L, ENGINE_MT, engine_methods, engine_gc, engine_close, engine_tostring);
  ob_lua_new_class(L, RUN_MT, run_methods, run_gc, run_close, run_tostring);
  luaL_newlib(L, core_functions);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  ob_lua_push_array_mt(L);
  lua_setfield(L, -2, "array_mt");
  static const ob_luamod_hooks hooks = {hook_check_engine, hook_busy};
  ob_luamod_queue_open(L, &hooks);
  return 1;
}
