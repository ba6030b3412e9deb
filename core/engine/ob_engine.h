/* ob_engine.h -- the long-lived engine: a libuv loop, one Lua state with the tools
 * loaded into it, and the runs (ob_run.h) it executes. One engine per host; no globals. */
#ifndef OB_ENGINE_H
#define OB_ENGINE_H

#include <lua.h>
#include <stdio.h>
#include <uv.h>

#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "plan/ob_plan.h"

typedef struct ob_run ob_run;

/* Finished coroutines kept for reuse: a new Lua thread per call costs an
 * allocation and garbage to collect; a returned one is as good as new. */
#define OB_ENGINE_POOL 256

/* Default for ob_run_options.max_slice_ms: 30 s of Lua without a yield (also the
 * watch's limit for a tool's callback before any run has started). */
#define OB_RUN_MAX_SLICE_MS 30000

typedef struct ob_sleeper {
  uint64_t due, seq; /* when it wakes (uv_hrtime's clock, us); order of falling asleep */
  void *call;        /* the call asleep (ob_sched.h's) */
  uint64_t serial;   /* the call's attempt that sleeps (a later attempt is not woken) */
} ob_sleeper;

/* What the engine says about itself, outside any run, for people: kind names it
 * ("callback_error", "http", "children", "abandon"), call_id the call when there is one
 * (else NULL), msg the text (no "obelus: " and no newline). The host decides where it goes
 * (the CLI prints it). */
typedef void (*ob_note_fn)(void *ud, const char *kind, const char *call_id, const char *msg);

typedef struct ob_engine {
  uv_loop_t *loop;
  ob_note_fn note;   /* the host's (ob_engine_set_note), or NULL: notes are dropped */
  void *note_ud;
  int own_loop;      /* the engine made the loop and closes it */
  lua_State *L;      /* every tool and every call's coroutine live here */
  struct ob_pool *lua_pool; /* L's allocator (ob_pool.h) */
  ob_mem mem;        /* the memory account of the engine's runs (ob_mem.h): Lua heap, values, log */
  ob_map tools;      /* name -> ob_tool* */
  ob_map file_ids;   /* a tool file's path -> what ob_engine_tool_files last read of it */
  int runtime_ref;   /* registry: the `obelus` module table tools require */
  int latent_ref;    /* registry: the latent handler, or LUA_NOREF */
  int approver_ref;  /* registry: the approver (obelus.set_approver), or LUA_NOREF */
  int branch_mt_ref, message_mt_ref;
  ob_run *runs;      /* runs not yet freed (a list through ob_run.next) */
  uint64_t run_serial; /* runs made so far (ob_run.c tells runs apart by it) */
  uint64_t attempt_serial; /* attempts of calls started so far (ob_co.c) */
  int prim_ref;      /* registry: the primitives table the runtime module was built from */
  int *pool;         /* anchor slots of finished coroutines, ready for the next call */
  /* call coroutines are kept from the collector in one table, by slot (ob_run.c):
   * cheaper than a registry reference each (no length to find, no free list in Lua) */
  int anchor_ref;    /* registry: that table */
  int *free_slots;   /* slots given back, reused first */
  size_t nfree, capfree;
  int nslots;        /* slots used so far */
  size_t npool;
  size_t live_calls; /* call coroutines in use (running or waiting) */
  int gc_incremental; /* Lua's collector switched to incremental (see ob_run.c) */
  int body_ref;      /* registry: the C closure that builds a call's arguments (ob_co.c) */
  struct ob_http *http;   /* obelus.http's transfers (ob_http.h): made at the first
                             request, NULL before (and once the engine is freed) */
  size_t http_max;        /* transfers at once (ob_http_set_max; 0: its default) */
  size_t http_max_bytes;  /* a body's limit when a request gives none (0: its default) */
  int http_allow_private; /* connect to link-local and metadata addresses too */
  int lenient_schemas;    /* tools' schemas compiled without OB_SCHEMA_STRICT: unknown
                             keywords and formats let through (--lenient-schemas) */
  struct ob_watch *watch; /* stops tools that do not yield (ob_watch.h); NULL: a count
                             hook on each coroutine does instead */
  struct ob_crun *resuming; /* the call whose coroutine is being resumed (ob_co.c) */
  /* while a tool's libuv callback runs: the call attempt that gave it (its
   * coroutine and attempt serial; runtime.lua's tie sets them), so that a
   * memory error in it fails that call (luv_callback_pcall); NULL: none */
  lua_State *cb_owner;
  uint64_t cb_serial;
  uint64_t cb_run; /* the serial of its run (the tree's root), 0: none */
  /* obelus.sleep: one timer for the whole engine and the calls asleep, by
   * (due, seq): no timer handle to make and close per sleep. A sleep due no
   * earlier than the last one queued (the common case: calls sleeping alike)
   * joins a queue kept in order; any other goes to a min-heap. */
  uv_timer_t *sleep_timer;
  struct ob_sleeper *sleepers;   /* the heap */
  size_t nsleepers, capsleepers;
  struct ob_sleeper *queue;      /* in order from queue_head to queue_tail */
  size_t queue_head, queue_tail, capqueue;
  uint64_t sleep_seq;
  /* Lua's collector, stopped while a burst of calls starts (their memory is
   * live), does its work while the loop has nothing due (ob_run.c) */
  uv_timer_t *gc_idle;
  int gc_held;       /* 1: stopped by a burst, collection owed */
  int gc_limit_kb;   /* past this heap size the collector runs again regardless */
  uv_timer_t *reaper; /* freed on a host's loop with tools' libuv work pending: lets the
                         Lua state go once luv is done with it (ob_engine_free) */
} ob_engine;

/* A new engine on loop (NULL: the engine makes and owns one). NULL with err
 * filled when Lua or luv cannot start. */
ob_engine *ob_engine_new(uv_loop_t *loop, ob_error *err);
/* Frees the engine, its runs and its Lua state. Handles tools left open
 * (obelus.uv) are closed. On a loop the engine owns, at once. On a host's
 * loop, when tools left libuv work pending, their handles are closed while
 * the Lua state lives and the state is closed once luv has called back for
 * them all and for the requests in flight: the next turn of the loop, or
 * the turn after the last request completes. */
void ob_engine_free(ob_engine *e);
/* --max-memory: the most the engine's memory account may hold (0: no limit):
 * its Lua state, values, the message log (ob_mem.h). The Lua allocation that
 * would pass it while a tool runs fails, and so does a result or a write
 * that would pass it; the call that asked fails with "memory limit of N MB
 * reached (--max-memory)" and the run goes on. Between calls (the
 * scheduler's own work) nothing is refused. */
/* The engine's HTTP client (obelus.http, obelus_http_start), made at the
 * first request with http_max; NULL with err when libcurl cannot start. */
struct ob_http *ob_engine_http(ob_engine *e, ob_error *err);
void ob_engine_set_max_memory(ob_engine *e, size_t bytes); /* 0: the default (ob_engine.c) */
/* Installs the host's note hook (NULL: notes are dropped). */
void ob_engine_set_note(ob_engine *e, ob_note_fn fn, void *ud);
/* Says a note through the host's hook, formatted; nothing when there is none. */
void ob_engine_note(ob_engine *e, const char *kind, const char *call_id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* For runtime.lua's cjson.encode: raises "memory limit of N MB reached
 * (--max-memory)" when the JSON text of argument 1 would not fit in the
 * memory account's room (lua-cjson's buffers are the C allocator's). */
int ob_engine_lua_encode_check(lua_State *L);

/* The libuv handles and requests the engine's tools opened through luv that
 * luv still holds (it calls back into the Lua state for each); with close
 * set, closes the handles not closing yet, through luv. */
size_t ob_engine_uv_pending(ob_engine *e, int close);

/* The first step of ob_engine_free, for a caller that frees runs of its own
 * before the engine (obelus.c): the handles their calls hold are closed
 * after it, so they too are done before the state goes on the next turn.
 * Freeing the engine is then a must. */
void ob_engine_free_begin(ob_engine *e);

/* Loads tools from a .lua file, or from every *.lua file of a folder (in
 * name order). A file returns one tool table or a list of them (plan-format §9).
 * Returns OB_OK, or a negative code with err naming the file (and line when
 * Lua knows it): syntax errors, errors raised while loading, bad tool
 * tables, schemas that are not usable, a name defined twice. */
int ob_engine_load_tools(ob_engine *e, const char *path, ob_error *err);

/* Registers a tool written in C: fn(h, params, data) runs it (params are the
 * resolved call, meta-properties included, borrowed for the call's length)
 * and completes it, then or later, with ob_call_complete (ob_run.h).
 * schema (borrowed, may be NULL) is its JSON Schema. Errors as for files. */
int ob_engine_add_tool(ob_engine *e, const char *name, const ob_value *schema, ob_tool_fn fn,
                       void *data, ob_error *err);

/* Runs a Lua file whose job is to configure the engine (the latent handler
 * through obelus.set_latent, ...). Errors as for tools. */
int ob_engine_load_script(ob_engine *e, const char *path, ob_error *err);

int ob_engine_has_latent(const ob_engine *e);

/* {"file": its realpath, "size": N, "hash": FNV-1a as 16 hex digits} of the file at
 * path (size and hash missing when it cannot be read): what a journal records
 * of the files a run depends on, for resume to tell a changed one. */
ob_value *ob_file_identity(const char *path);

/* The tool files loaded, each {"file", "size", "hash"} (hash: FNV-1a 64 of
 * the content, in hex), in name order: what resume compares. New reference. */
ob_value *ob_engine_tool_files(const ob_engine *e);

/* lua_pcall with a traceback; on error leaves the message on the stack. */
int ob_engine_pcall(lua_State *L, int nargs, int nres);

#endif
