/* ob_watch.h -- stops a tool that runs too long without yielding, at no cost
 * to the tools that don't; lets SIGINT and SIGTERM reach a tool that never
 * yields; kills the process groups of the children tools spawned.
 *
 * Lua stops running code only through a hook, and a count hook set on a
 * coroutine makes the VM check it at every instruction (measured: a tool
 * summing 30 million numbers ran 2.2 times slower under one). So the
 * coroutines of calls run without hooks, and a watchdog thread (one per
 * process, running while some engine has a watch) samples every watch: the
 * Lua thread running now, a count of resumes, which the loop thread updates
 * with plain stores at each resume, and the running attempt's _timeout
 * deadline. When a watch shows the same resume for longer than its limit, or
 * past its deadline, or a SIGINT/SIGTERM came, the watchdog sends the loop
 * thread the signal OB_WATCH_SIGNAL with why, and its handler sets a count
 * hook of 1 on the running Lua thread, as lua.c does for Ctrl-C; the hook
 * (the caller's) raises the error in the tool.
 *
 * A stop cannot be caught: until the resume returns, the hook stays and
 * raises again at every instruction (a pcall that catches it gets it again),
 * and the caller (ob_co.c) fails the attempt with the stop's reason whatever
 * the tool made of the error. Coroutines a tool makes are followed
 * (ob_watch_nest, from the engine's coroutine.resume and coroutine.wrap): the
 * hook goes on the one running, and follows the stop from one to the other.
 * While the stop is pending the watchdog sends its signal again every period
 * (a hook that went missing is set again). Tools cannot touch hooks: the
 * engine's debug.sethook refuses (ob_runtime.c).
 *
 * Precision: a tool is stopped between its limit and the limit plus a
 * quarter of it (the sampling period, 250 ms at most); a deadline or a
 * signal within 250 ms. Cost: the thread wakes every 250 ms once an engine
 * has run a call (nothing is done per resume but plain stores). Not available when the signal already has a handler
 * (the host's) or no thread can be started: then ob_watch_new returns NULL
 * and the caller falls back to a count hook. Watches are reused, not freed,
 * while the thread runs, so that a signal still in flight when an engine goes
 * finds valid memory; when the last engine gives its watch back the thread
 * ends, the watches are freed and the signal is left ignored. glibc
 * (pthread_sigqueue). */
#ifndef OB_WATCH_H
#define OB_WATCH_H

#include <lua.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/types.h>

#define OB_WATCH_SIGNAL (SIGRTMAX - 2)

/* Why a resume is being stopped. */
enum { OB_STOP_NONE, OB_STOP_SLICE, OB_STOP_TIMEOUT, OB_STOP_SIGNAL };

typedef struct ob_watch {
  _Atomic(lua_State *) co;  /* the Lua thread running in the resume now, or NULL */
  atomic_uint resumes;      /* resumes entered and left so far (the loop thread's) */
  atomic_uint limit_ms;     /* the running resume's limit (0: none) */
  _Atomic unsigned long long deadline_ms; /* its attempt's _timeout, CLOCK_MONOTONIC (0: none) */
  atomic_uint target;       /* the resume the watchdog signalled about */
  atomic_int want;          /* and why (OB_STOP_*) */
  atomic_int stop;          /* the running resume is being stopped, and why (loop thread's) */
  _Atomic(pthread_t) thread; /* the loop thread */
  lua_Hook hook;            /* what the handler sets */
  /* what runs, for a message: the call's id and tool (NULL: not a call's) */
  _Atomic(const char *) id, tool;
  /* the watchdog's, under its lock */
  int active;
  unsigned seen;            /* resumes at the first sample that saw them */
  unsigned long long seen_ms;
  int stopping;             /* a stop was sent for resume stop_n, first at stop_ms */
  unsigned stop_n;
  unsigned long long stop_ms;
  struct ob_watch *next;
} ob_watch;

/* What ob_watch_leave restores: the resume this one is nested in, if any. */
typedef struct ob_watch_outer {
  lua_State *co;
  unsigned limit_ms;
  unsigned long long deadline_ms;
  const char *id, *tool;
} ob_watch_outer;

/* A watch setting `hook` on an overdue coroutine, or NULL (not available). */
ob_watch *ob_watch_new(lua_Hook hook);
/* A run with this limit starts (the watchdog then samples often enough). */
void ob_watch_arm(ob_watch *w, unsigned limit_ms);
/* Gives the watch back (for reuse); NULL is allowed. */
void ob_watch_free(ob_watch *w);

/* A SIGINT or SIGTERM came and the loop has not taken it yet (0: none). */
extern atomic_int ob_watch_interrupted;

/* The loop thread enters a resume of co (limit_ms 0: no limit; deadline_ms:
 * CLOCK_MONOTONIC ms its attempt times out at, 0: none). */
static inline ob_watch_outer ob_watch_enter(ob_watch *w, lua_State *co, unsigned limit_ms,
                                            unsigned long long deadline_ms) {
  ob_watch_outer o = {atomic_load_explicit(&w->co, memory_order_relaxed),
                      atomic_load_explicit(&w->limit_ms, memory_order_relaxed),
                      atomic_load_explicit(&w->deadline_ms, memory_order_relaxed),
                      atomic_load_explicit(&w->id, memory_order_relaxed),
                      atomic_load_explicit(&w->tool, memory_order_relaxed)};
  atomic_store_explicit(&w->id, NULL, memory_order_relaxed);
  atomic_store_explicit(&w->tool, NULL, memory_order_relaxed);
  if (!o.co)
    atomic_store_explicit(&w->thread, pthread_self(), memory_order_relaxed);
  atomic_store_explicit(&w->limit_ms, limit_ms, memory_order_relaxed);
  atomic_store_explicit(&w->deadline_ms, deadline_ms, memory_order_relaxed);
  atomic_store_explicit(&w->stop, OB_STOP_NONE, memory_order_relaxed);
  atomic_store_explicit(&w->resumes, atomic_load_explicit(&w->resumes, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_store_explicit(&w->co, co, memory_order_release);
  if (atomic_load_explicit(&ob_watch_interrupted, memory_order_relaxed)) {
    /* a signal the loop has not taken yet: nothing more runs before it does */
    atomic_store_explicit(&w->stop, OB_STOP_SIGNAL, memory_order_relaxed);
    lua_sethook(co, w->hook, LUA_MASKCOUNT, 1);
  }
  return o;
}

/* The resume of co returned (or yielded); the outer one, if any, goes on.
 * Returns why the resume was stopped (OB_STOP_*), OB_STOP_NONE when not. */
static inline int ob_watch_leave(ob_watch *w, lua_State *co, ob_watch_outer o) {
  atomic_store_explicit(&w->resumes, atomic_load_explicit(&w->resumes, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_store_explicit(&w->co, o.co, memory_order_release);
  atomic_store_explicit(&w->limit_ms, o.limit_ms, memory_order_relaxed);
  atomic_store_explicit(&w->deadline_ms, o.deadline_ms, memory_order_relaxed);
  atomic_store_explicit(&w->id, o.id, memory_order_relaxed);
  atomic_store_explicit(&w->tool, o.tool, memory_order_relaxed);
  int why = atomic_exchange_explicit(&w->stop, OB_STOP_NONE, memory_order_relaxed);
  if (why)
    lua_sethook(co, NULL, 0, 0); /* the coroutine may serve again */
  return why;
}

/* The resume just entered is call id's, of tool (for the message of a stop
 * that does not take: ob_watch_exit_stuck); strings that outlive the resume. */
static inline void ob_watch_name(ob_watch *w, const char *id, const char *tool) {
  atomic_store_explicit(&w->id, id, memory_order_relaxed);
  atomic_store_explicit(&w->tool, tool, memory_order_relaxed);
}

/* A coroutine the tool made (inner) runs now, from the running one: the
 * hook must find it. Returns what ob_watch_unnest needs (NULL: no resume of
 * the engine's is watched, nothing to do). */
static inline lua_State *ob_watch_nest(ob_watch *w, lua_State *inner) {
  lua_State *outer = atomic_load_explicit(&w->co, memory_order_relaxed);
  if (outer) {
    atomic_store_explicit(&w->co, inner, memory_order_release);
    if (atomic_load_explicit(&w->stop, memory_order_relaxed))
      lua_sethook(inner, w->hook, LUA_MASKCOUNT, 1);
  }
  return outer;
}

/* The inner coroutine returned or yielded to outer; a stop goes on in outer. */
static inline void ob_watch_unnest(ob_watch *w, lua_State *outer) {
  if (!outer)
    return;
  atomic_store_explicit(&w->co, outer, memory_order_release);
  if (atomic_load_explicit(&w->stop, memory_order_relaxed))
    lua_sethook(outer, w->hook, LUA_MASKCOUNT, 1);
}

/* --- SIGINT and SIGTERM ------------------------------------------------------
 * ob_watch_catch_signals, called once the command's uv_signal handles for
 * SIGINT and SIGTERM are started, puts a handler in front of libuv's: it
 * calls libuv's (the loop takes the signal as before) and has the watchdog
 * stop the Lua code running now (OB_STOP_SIGNAL), so that the loop gets to
 * it within 250 ms even while a tool never yields. The exit_after-th signal
 * (0: never) kills the process groups of the tools' children and exits at
 * once with 128 + the signal. */
void ob_watch_catch_signals(int exit_after);
/* A stop that does not take. Lua stops code only between instructions of
 * its VM, and not at all where it runs with hooks off (a finaliser, an
 * xpcall message handler the engine could not wrap) or in C (a pattern that
 * backtracks for hours inside one string.match, a C module's loop): such a
 * tool would hold the loop, and the process, forever. With this set (the
 * CLI's commands; hosts are left to decide), the watchdog ends the process
 * once a stop has been sent for one resume and not taken for
 * OB_WATCH_STUCK_MS (a signal's or a _timeout's), or for as long as the
 * slice itself, if longer (the slice's): it hands why to say ("call ID (TOOL)
 * ...", one line without its newline; called on the watchdog's thread while
 * the loop thread is stuck: it may only write(2) or the like), kills the
 * tools' children's groups and exits with 128 + the signal, or OB_EXIT_STUCK
 * for a slice or a _timeout. The journal is then as a kill leaves it: resume
 * takes it up (and runs that call again). say NULL: never exit. */
#define OB_WATCH_STUCK_MS 1000
#define OB_EXIT_STUCK 5
typedef void (*ob_watch_say_fn)(void *ud, const char *msg);
void ob_watch_exit_stuck(ob_watch_say_fn say, void *ud);

/* The loop took the signal (a command that goes on after one: the worker):
 * Lua code runs unstopped again. */
void ob_watch_interrupt_done(void);

/* --- children --------------------------------------------------------------
 * The process groups of the children tools spawned (obelus.uv.spawn puts each
 * in its own, and so does os.execute: ob_exec.c), kept where a signal handler
 * can read them. */
/* Tracks group pgid: the slot to untrack it with, NULL when out of memory. */
_Atomic(pid_t) *ob_watch_child_add(pid_t pgid);
/* Stops tracking the slot's group (NULL is allowed). */
void ob_watch_child_remove(_Atomic(pid_t) *slot);
/* SIGKILL to every group tracked (async-signal-safe). */
void ob_watch_children_kill(void);

#endif
