/* ob_sched.h -- the scheduler's inside: a run and its calls as the files of the
 * scheduler share them. Not for hosts (they have ob_run.h and obelus.h).
 *
 * The scheduler is one concern per file, each with its design on top:
 *   ob_run.c       a run's life: made, started, cancelled, freed; its output
 *   ob_settle.c    settling a call (done, failed, skipped) and queueing its followers
 *   ob_pump.c      the pump: the one place calls start; what a start decides
 *   ob_params.c    resolving a call's params against the log
 *   ob_co.c        a call's coroutine: made or reused, resumed, dropped
 *   ob_ctx.c       ctx, the second argument of a tool's run
 *   ob_write.c     writing a call's result to the log
 *   ob_approve.c   approval: a human or a rule before a call starts
 *   ob_delegate.c  delegation: a call that runs a plan
 *   ob_each.c      _each: a call run once per element of a list read at run time
 *   ob_ctool.c     tools written in C: their handles
 *   ob_timeout.c   _timeout: an attempt that runs too long is abandoned
 *   ob_retry.c     _retry: another attempt after a runtime error or a timeout
 *   ob_sleep.c     obelus.sleep: the engine's queue and heap of sleepers
 *   ob_gc.c        Lua's collector while thousands of calls wait
 *   ob_runtime.c   where the engine meets the scheduler: the `obelus` module's primitives
 *   ob_record.c    the journal as a run writes it (through log/'s vocabulary)
 * Each depends on this header and the ones below it (engine, log, plan), never
 * on one another's files: what they call of each other is declared here.
 *
 * THE RING. These files call one another round: a call's life goes through them and
 * comes back (a settle queues followers the pump starts; a timeout fails an attempt a
 * retry starts again; a delegated run settles its caller). It is the one circle of
 * core/ (make layers and docs/architecture.md), kept inside engine/ behind this header.
 * A line joins two files that call each other both ways (nm over their objects):
 *
 *                            ob_delegate
 *                                 |
 *      ob_record ------------- ob_run ------------- ob_timeout ---- ob_retry
 *          |                  /      \                   |
 *          |           ob_settle      ob_co --------------+
 *          |                  \      /
 *          +----------------- ob_pump
 *
 *      ob_engine ---- ob_runtime     (the seam by which the engine opens the scheduler:
 *                                     ob_runtime.h, the engine's one include of it)
 *
 * The other files of engine/ (params, ctx, write, approve, ctool, sleep, gc, exec,
 * http_lua, resume) are called by the ring or call into it one way only, and nothing
 * below engine/ calls into it. */
#ifndef OB_SCHED_H
#define OB_SCHED_H

#include <lua.h>
#include <stdint.h>

#include "engine/ob_engine.h"
#include "log/ob_log.h"
#include "engine/ob_run.h"
#include "log/ob_wal.h"

/* A delegating call's plan and run (ob_delegate.c), made by its first attempt. */
typedef struct ob_cdel {
  ob_run *run;     /* the delegated plan's run (kept until this run is freed) */
  ob_plan *plan;
  ob_value *value; /* the plan as read */
  ob_value *log;   /* its messages, attached to this call's output or error */
  char *scope;     /* its run's scope in the journal ("#1", "#1/#0"; ob_record.c) */
  struct ob_mem *acct; /* the engine's memory account, charged `charged` bytes for */
  size_t charged;      /* the run's and plan's structs (ob_crun_delegate) */
  void (*done)(struct ob_crun *c, ob_run *run); /* what its run's end does, when not the
                                                  delegation's (an _each call's: ob_each.c) */
  uint8_t link_only; /* an _each call's: its output or error carries no _log in memory
                        (its copies' messages would be built as JSON, one each: 100,000
                        copies took a fifth of the run); in the journal it names their
                        scope all the same (ob_record.c), so readers of it see them */
  uint8_t to_start;  /* its run waits for the loop to start it (ob_run_kick) */
  uint8_t to_finish; /* its run finished: the loop hands its outcome to the call */
} ob_cdel;

/* A call of a run as the scheduler holds it. A C tool's handle
 * (ob_call_handle) is one of these. 128 bytes, each on a cache line's start (the
 * run's array is aligned): what starting, resuming and settling a call read lie
 * in its first line. */
typedef struct ob_crun {
  _Alignas(64) ob_run *run;
  ob_call *call;
  const ob_tool *tool; /* what runs: the call's tool, or the approver's replacement's */
  ob_value *raw;       /* the approver's replacement call, or NULL (the call as written) */
  lua_State *co;       /* while running */
  uint32_t pending;    /* dependencies not settled yet */
  int co_slot;         /* its slot in the engine's anchor table (or LUA_NOREF) */
  uint8_t state;       /* an ob_call_state */
  uint8_t upstream_failed; /* skipped because something upstream failed */
  uint8_t detached;    /* fire-and-forget: not awaited */
  uint8_t asleep;      /* in the engine's sleep heap (obelus.sleep) */
  uint8_t retry_wait;  /* between two attempts: waiting for the next (ob_retry.c) */
  uint8_t holds_slot;  /* counts against the --concurrency of its run's tree (ob_pump.c) */
  uint8_t awaiting;    /* its approval put off (OB_APPROVE_LATER): params holds its params */
  uint8_t branched;    /* this attempt called obelus.branch (ob_co_lua_branched) */
  uint32_t attempt;    /* the attempt running or last run, from 1 (ctx.attempt) */
  uint32_t resumes, slice_resume; /* resumes so far; the one slice_start belongs to */
  uint64_t slice_start; /* when the slice hook first fired in this resume */
  uint64_t serial;     /* the engine's count of attempts when this one started: tells
                          an attempt's sleeps and luv handles from a later one's */
  uv_timer_t *timer;   /* the attempt's _timeout, or the wait before the next attempt */
  ob_value *params;    /* the params resolved at the start, kept for later attempts */
  uint64_t ready_seq;  /* --fsync always: the journal's last line when it became ready */
  ob_cdel *del;        /* a delegating call's, or NULL */
  const char *fail_phase; /* set by ob_crun_fail for the OB_EV_FAILED it settles with */
} ob_crun;

/* A delegating call's run, and the messages it left (NULL: none). */
static inline ob_run *ob_crun_sub(const ob_crun *c) { return c->del ? c->del->run : NULL; }
static inline ob_value *ob_crun_sublog(const ob_crun *c) { return c->del ? c->del->log : NULL; }

/* The call as it runs: the approver's replacement, or the call as written. */
static inline const ob_value *ob_crun_raw(const ob_crun *c) {
  return c->raw ? c->raw : c->call->raw;
}

struct ob_run {
  ob_engine *e;
  ob_plan *plan;
  ob_log *log;
  ob_run_options opt;
  ob_crun *calls;
  size_t nawaited, settled_awaited, running, detached_running;
  size_t detached_unsettled; /* fire-and-forget calls not settled yet: waiting, queued or
                                running (ob_run_detached_pending) */
  size_t *queue, qhead, qtail; /* each call is queued at most once */
  int pumping, finished, failed, cancelled;
  int limit_failed; /* a call failed of a limit of the whole run (--max-depth,
                       --max-calls), here or in a run delegated from here */
  size_t journaled;
  uint64_t t0;
  const ob_value *written; /* while a call settles done: the value it wrote (its event's) */
  int handled;      /* ... and whether that was an error a || alternative received */
  unsigned suggested; /* structural errors given a nearest path (ob_params.c: a bound) */
  ob_map schemas;   /* schema value (by address) -> compiled */
  ob_crun *parent;  /* the call that delegated to this run, or NULL */
  ob_run *next, **prevp;
  uint64_t serial;  /* the engine's count of runs when this one was made */
  char *scope;      /* a delegated run's scope in the journal, or NULL (ob_record.c) */
  uint64_t scope_no; /* its number in the journal's lines (0: not defined yet; ob_record.c) */
  char *plans_root; /* opt.plans_root or the plan's root (copied), or NULL: the cwd */
  uv_prepare_t *jprep; /* flushes the journal when the loop is about to wait */
  int always;          /* --fsync always: a call starts once what it reads is on disk */
  uint64_t hold_seq;   /* held back until this journal line is durable (0: not held) */
  uint64_t durable_seq; /* the journal's durable line, as last asked */
  /* Delegation goes through the loop (ob_delegate.c): a delegated run is started,
   * and its outcome handed to its call, from this idle handle's callback, never
   * from inside the scheduler pass that asked for it; so the C stack stays flat
   * however deep plans delegate, and signals, timers and I/O get their turn. */
  uv_idle_t *kick;     /* made at the first delegation */
  size_t *kicks, nkicks, capkicks; /* indices of calls with a to_start or to_finish */
  uint64_t kick_ms;    /* root: the loop's time of the turn kick_n counts (uv_now) */
  size_t kick_n;       /* root: delegation steps done in that turn (OB_RUN_KICKS caps it) */
  /* --concurrency bounds the whole tree of runs (the run a host started and every
   * run delegated from it): the counts live in its root. */
  ob_run *root;        /* the run the host started (itself, or the delegating one's root) */
  size_t busy;         /* root: calls holding a slot in the whole tree */
  ob_run *blocked, **btail; /* root: the runs whose queue waits for a slot, in order */
  ob_run *bnext, **bprevp;  /* r's place in its root's list (bprevp NULL: not in it) */
  int waking;          /* root: handing freed slots out (never nests) */
  const ob_cdel *journal_sub; /* the delegation whose outcome is being written: a message
                                 carrying its messages names their scope in the journal
                                 rather than holding them again (ob_record.c) */
  /* A resumed run's calls that had started and run again: ob_run_start says each as
   * a note "rerun" (a delegated run's root is known only by then) and frees them. */
  struct ob_rerun { const ob_call *call; char *text; } *reruns;
  size_t nreruns;
};

/* --- ob_run.c ---------------------------------------------------------------- */

/* A run of plan with no message appended yet (ob_run_new appends the plan,
 * context and inputs; resume rebuilds its log from a journal instead). */
ob_run *ob_run_alloc(ob_engine *e, ob_plan *plan, const ob_run_options *opt);
/* Tells whoever listens (opt.on_event). */
void ob_run_emit(ob_run *r, ob_event_type type, const ob_call *c, const char *reason);
/* An event's time: milliseconds since run r started. */
double ob_run_now_ms(const ob_run *r);
/* Says a note (OB_EV_NOTE) of kind about r, and c when not NULL, on the listener of r's
 * root (a delegated run has none of its own); dropped when there is none. */
void ob_run_emit_note(ob_run *r, const char *kind, const ob_call *c, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Appends a message to the run's log, and to its journal. */
long ob_run_append(ob_run *r, ob_value *msg, ob_error *err);
/* Writes the messages appended since the last time to the journal. */
void ob_run_sync_journal(ob_run *r);
/* Asks the loop to come back for call c's delegation (its to_start or to_finish),
 * in a callback of its own: the scheduler pass that asked ends first. */
void ob_run_kick(ob_run *r, ob_crun *c);
/* What the kick does for a delegating call (ob_delegate.c). */
void ob_crun_delegate_step(ob_crun *c);
/* The run's limit on a tool running without yielding, in ms. */
unsigned ob_run_slice_limit(const ob_run *r);

/* --- ob_record.c: the journal (write-ahead records) ------------------------- */

/* Message i of the run's log, as a line (wrapped in a delegated run's scope). */
void ob_record_message(ob_run *r, size_t i);
void ob_record_run(ob_run *r);
void ob_record_start(ob_crun *c);
void ob_record_retry(ob_crun *c, const char *error, uint64_t delay_ms);
void ob_record_settled(ob_crun *c);
/* A "progress" record: the call's attempt sent data (obelus.emit). */
void ob_record_progress(ob_crun *c, const ob_value *data);
/* Hands what was written to the file (before a tool runs, the loop waits, the run
 * ends). OB_OK; or OB_EIO when the journal failed: then the top-level run is
 * cancelled and the loop stopped, and nothing may start. */
int ob_record_flush(ob_run *r);
/* --fsync always: 1 when journal line seq is not on disk yet; the run is pumped
 * again once it is. 0: go on. */
int ob_record_hold(ob_run *r, uint64_t seq);

/* --- ob_settle.c ------------------------------------------------------------- */

void ob_crun_enqueue(ob_run *r, ob_crun *c);
/* The call is done, failed or skipped: its followers may start. */
void ob_crun_settle(ob_crun *c, ob_call_state st, const char *reason);
/* Appends the call's error message and settles it as failed. */
void ob_crun_fail(ob_crun *c, const char *phase, const char *msg);

/* --- ob_pump.c --------------------------------------------------------------- */

/* Starts queued calls (up to the concurrency); never nests. */
void ob_run_pump(ob_run *r);
/* Slots came free in the tree of runs of root: the runs waiting for one go on,
 * in the order they began to wait; never nests. */
void ob_run_wake(ob_run *root);
/* Takes r out of its root's runs waiting for a slot (cancelled or freed). */
void ob_run_unblock(ob_run *r);
/* Asks ahead for what starting the call's followers reads (stage 1 to 3). */
void ob_run_prefetch_users(const ob_run *r, const ob_call *call, int stage);
/* Asks ahead for the deeper part of the call's own write path (see ob_pump.c). */
void ob_run_prefetch_write(const ob_run *r, const ob_call *call);

/* --- ob_params.c ------------------------------------------------------------- */

typedef struct ob_resolver {
  ob_run *run;
  const ob_call *call; /* whose refs are resolved: the call, or an approver's replacement */
  size_t next;         /* the next of call->refs, in walk order (as ob_plan found them) */
  int skip;            /* an absent part has a writer: a branch not taken */
  int missing;         /* an absent part nobody writes: a structural error */
  ob_buf why;
} ob_resolver;

/* A reference's value now (an absent one: null, and noted as a skip or a structural error). */
ob_value *ob_params_eval_ref(ob_resolver *rs, const ob_param_ref *ref);
/* The call with its references resolved; meta-properties kept as written. */
ob_value *ob_params_resolve(ob_resolver *rs);
/* The schema view of resolved params fails? Describes the first failures. */
int ob_params_invalid(const ob_tool *t, const ob_value *params, ob_buf *why);

/* --- ob_co.c ----------------------------------------------------------------- */

/* What a call's coroutine starts from: the params as an object (params),
 * or the call as written with its references' values (vals, direct). */
typedef struct ob_call_args {
  ob_crun *c;
  const ob_value *params;
  ob_value *const *vals;
  size_t nvals;
} ob_call_args;

/* Runs the call's tool: a C tool's function, or a coroutine for a Lua one. */
void ob_crun_run_tool(ob_crun *c, const ob_call_args *args);
/* Resumes the call's coroutine (from: the state that resumes it). */
void ob_crun_resume(ob_crun *c, lua_State *from, int nargs);
/* Gives the call's coroutine back (to the pool, or to the collector). */
void ob_crun_drop_coroutine(ob_crun *c);
/* The running call whose own coroutine co is, or NULL. */
ob_crun *ob_crun_of(lua_State *co);
/* The token every wait of a call yields with (a tool yielding by itself is an error). */
extern const char ob_run_yield_token;
/* Replaces the four values on top of L (the three tables of
 * ob_lua_push_tables, then ctx's metatable, ob_ctx_push_meta) with the C
 * closure that builds a call's arguments on its coroutine, from its
 * ob_call_args (a light userdata): the tool's function, params (tool), ctx. */
void ob_co_push_prepare(lua_State *L);
/* The hook that stops a tool running too long without yielding: set by the
 * engine's watch when it is overdue, or (without a watch) a count hook on
 * every coroutine that checks the clock every million instructions. */
void ob_co_slice_hook(lua_State *L, lua_Debug *ar);
int ob_co_lua_wake(lua_State *L);    /* wake(co): resume a call's coroutine */
int ob_co_lua_is_call(lua_State *L); /* is_call(co): is co a running call's own coroutine? */
/* attempt(co): the serial of co's call's attempt and of its run (the tree's root), or nil */
int ob_co_lua_attempt(lua_State *L);
/* owner(co, serial, run): the libuv callback running now was given by that attempt
 * of that run (runtime.lua's tie; read by ob_co_callback_failed and run_of) */
int ob_co_lua_owner(lua_State *L);
/* run_of(co): the serial of the run a child spawned here belongs to: co's call's
 * run, else the run of the libuv callback running (owner); false when that run
 * has ended, nil when neither (runtime.lua's spawn) */
int ob_co_lua_run_of(lua_State *L);
/* branched(): obelus.branch was called by the running call's own coroutine (the caller):
 * its value must be what the attempt returns (ob_crun_complete) */
int ob_co_lua_branched(lua_State *L);

/* --- ob_ctx.c ---------------------------------------------------------------- */

/* Pushes the metatable of the ctx a tool's run gets (engine e's). */
void ob_ctx_push_meta(lua_State *L, ob_engine *e);
/* Pushes the call's ctx onto co; meta is the index of ctx's metatable there. */
void ob_ctx_push(lua_State *co, const ob_crun *c, int meta);

/* --- ob_write.c -------------------------------------------------------------- */

/* The tool returned nres values (on top of its coroutine): write them, settle. */
void ob_crun_complete(ob_crun *c, int nres);
/* Writes value (borrowed) to each path of alternative `alt` and settles the call. */
void ob_crun_write_alt(ob_crun *c, size_t alt, ob_value *value);
/* The tool failed: routed to the last || alternative, or the call's runtime error. */
void ob_crun_tool_error(ob_crun *c, const char *msg, const char *traceback);

/* --- ob_timeout.c, ob_retry.c ------------------------------------------------ */

/* Starts t to call cb once, no sooner than ms from now. The loop's clock is as old as
 * its iteration, which may have started thousands of calls (a _timeout counted from
 * there ended a call that had barely begun): it is brought up to date first, and a
 * millisecond is added for its whole milliseconds. A clock read (some 20 ns). */
static inline void ob_timer_start_after(uv_timer_t *t, uv_timer_cb cb, uint64_t ms) {
  uv_update_time(t->loop);
  uv_timer_start(t, cb, ms + 1, 0);
}

/* The attempt starts running: its _timeout (or the run's default) starts too. */
void ob_timeout_arm(ob_crun *c);
/* Stops and lets go of the call's timer (the attempt ended). */
void ob_timeout_disarm(ob_crun *c);
/* The attempt's _timeout passed: abandoned, failed with "timeout after N ms"
 * (its timer, or the watchdog's stop of a tool that does not yield). */
void ob_timeout_expire(ob_crun *c);
/* The attempt was stopped by SIGINT/SIGTERM: the call waits, its loop kept
 * alive, until the command's answer to the signal settles it (a cancel). */
void ob_timeout_hold(ob_crun *c);
/* Lets go of the running attempt: its coroutine (with its sleeps and the
 * luv handles it made), its delegated run; a C tool's late completion of it
 * is ignored. The call stays running: the caller settles or retries it. */
void ob_crun_abandon(ob_crun *c);
/* The attempt failed at run time (the tool's error, a timeout): another
 * attempt when _retry allows, else the call's error (ob_crun_tool_error). */
void ob_crun_attempt_failed(ob_crun *c, const char *msg, const char *traceback);
/* The call's next attempt starts now, with the params of the first. */
void ob_crun_launch(ob_crun *c);

/* --- ob_approve.c, ob_delegate.c ------------------------------------------- */

/* Asks whoever approves; settles the call itself (and releases *params) when
 * it may not run. 1: go on with *params (perhaps a replacement's). */
int ob_crun_approve(ob_crun *c, ob_value **params);
/* A call allowed to run (approved, or nothing to approve): its attempt, then its tool,
 * its delegated plan or its copies (ob_pump.c). Takes params and list. */
void ob_crun_go(ob_crun *c, ob_value *params, ob_value *list, ob_value **vals, size_t nvals);
/* Starts the delegated plan of the call (takes params). */
void ob_crun_delegate(ob_crun *c, ob_value *params);
/* The steps of a call that runs a plan of its own (a delegation, an _each call's
 * copies): the attempt begins (running, its start journaled; timed: its _timeout
 * armed); 0 when the call cannot go on (the journal failed, or --max-depth: failed). */
int ob_cdel_begin(ob_crun *c, int timed);
/* Its run's scope in the journal: "#1", "#1/#0" nested, "step 2/#1" in a loop's step. */
void ob_cdel_scope(const ob_crun *c, ob_buf *scope);
/* Charges the engine's memory account for a run of ncalls calls; 0: the call failed. */
int ob_cdel_charge(ob_crun *c, size_t ncalls, size_t scope_len);
/* The run options of its run: the caller's limits, journal and hooks, and its end. */
ob_run_options ob_cdel_options(ob_crun *c, const char *scope, const ob_value *pre);
/* Takes its run (made, or NULL with err: the call fails) and has the loop start it. */
void ob_cdel_launch(ob_crun *c, ob_run *sub, const char *scope, const ob_error *err);
/* 1 when call id of run sub failed because a plan it ran failed (a delegation, an _each
 * call's copies): its error message tells the deepest cause already, and the run above
 * passes it on as it is rather than wrapping it again at every level. */
int ob_cdel_chained(const ob_run *sub, const char *id);
/* The first error of an awaited call of run sub (its log's first error message that
 * is not a fire-and-forget call's): 1 with *id and *msg (borrowed from the log), or 0. */
int ob_cdel_first_error(const ob_run *sub, const char **id, const char **msg);
/* Starts the copies of an _each call over list (takes params and list). */
void ob_crun_each(ob_crun *c, ob_value *params, ob_value *list);
/* Frees what an attempt of a delegating call made (its run, plan, plan value and
 * messages) and leaves d empty, for the next attempt or to be freed itself. */
void ob_cdel_clear(ob_cdel *d);

/* --- ob_sleep.c -------------------------------------------------------------- */

int ob_sleep_lua(lua_State *L); /* sleep(ms): yield until the engine's sleep timer says */
/* Takes the calls of run r out of the engine's sleepers (cancelled or freed). */
void ob_sleep_forget(ob_run *r);

/* --- ob_emit.c: a call's partial results (obelus.emit) ---------------------- */

int ob_emit_lua(lua_State *L); /* emit(value): an OB_EV_PROGRESS event and a record */

/* --- ob_gc.c ----------------------------------------------------------------- */

#define OB_GC_BURST_CALLS 64 /* a burst is looked for every this many calls started or woken */
/* A call's coroutine came alive. */
void ob_gc_call_up(ob_engine *e);
/* The pump started, or the sleep timer woke, OB_GC_BURST_CALLS more calls: a burst? */
void ob_gc_burst_check(ob_engine *e);
/* A run was freed with no call left alive in the engine. */
void ob_gc_calls_gone(ob_engine *e);

#endif
