/* ob_watch.h -- stops a tool that runs too long without yielding, at no cost
 * to the tools that don't.
 *
 * Lua stops running code only through a hook, and a count hook set on a
 * coroutine makes the VM check it at every instruction (measured: a tool
 * summing 30 million numbers ran 2.2 times slower under one). So the
 * coroutines of calls run without hooks, and a watchdog thread (one per
 * process, running while some engine has a watch) samples every watch: the coroutine in lua_resume and a
 * count of resumes, which the loop thread updates with plain stores at
 * each resume. When a watch shows the same resume for longer than its
 * limit, the watchdog sends the loop thread the signal OB_WATCH_SIGNAL, and
 * its handler sets a count hook on that coroutine, as lua.c does for
 * Ctrl-C; the hook (the caller's) raises the error in the tool.
 *
 * Precision: a tool is stopped between its limit and the limit plus a
 * quarter of it (the sampling period). Not available when the signal
 * already has a handler (the host's) or no thread can be started: then
 * ob_watch_new returns NULL and the caller falls back to a count hook.
 * Watches are reused, not freed, while the thread runs, so that a signal
 * still in flight when an engine goes finds valid memory; when the last
 * engine gives its watch back the thread ends, the watches are freed and
 * the signal is left ignored. glibc (pthread_sigqueue). */
#ifndef OB_WATCH_H
#define OB_WATCH_H

#include <lua.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define OB_WATCH_SIGNAL (SIGRTMAX - 2)

typedef struct ob_watch {
  _Atomic(lua_State *) co;  /* the coroutine in lua_resume now, or NULL */
  atomic_uint resumes;      /* resumes entered and left so far (the loop thread's) */
  atomic_uint limit_ms;     /* the running resume's limit (0: none) */
  atomic_uint target;       /* the resume the watchdog signalled about */
  atomic_int hooked;        /* the handler set the hook on co */
  _Atomic(pthread_t) thread; /* the loop thread */
  lua_Hook hook;            /* what the handler sets */
  /* the watchdog's, under its lock */
  int active;
  unsigned seen;            /* resumes at the first sample that saw them */
  unsigned long long seen_ms;
  int signalled;
  struct ob_watch *next;
} ob_watch;

/* A watch setting `hook` on an overdue coroutine, or NULL (not available). */
ob_watch *ob_watch_new(lua_Hook hook);
/* A run with this limit starts (the watchdog then samples often enough). */
void ob_watch_arm(ob_watch *w, unsigned limit_ms);
/* Gives the watch back (for reuse); NULL is allowed. */
void ob_watch_free(ob_watch *w);

/* The loop thread enters a resume of co (limit_ms 0: no limit); returns what
 * ob_watch_leave needs to restore an outer resume. */
static inline lua_State *ob_watch_enter(ob_watch *w, lua_State *co, unsigned limit_ms) {
  lua_State *outer = atomic_load_explicit(&w->co, memory_order_relaxed);
  if (!outer)
    atomic_store_explicit(&w->thread, pthread_self(), memory_order_relaxed);
  atomic_store_explicit(&w->limit_ms, limit_ms, memory_order_relaxed);
  atomic_store_explicit(&w->resumes, atomic_load_explicit(&w->resumes, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_store_explicit(&w->co, co, memory_order_release);
  return outer;
}

/* The resume of co returned (or yielded); the outer one, if any, goes on. */
static inline void ob_watch_leave(ob_watch *w, lua_State *co, lua_State *outer) {
  atomic_store_explicit(&w->resumes, atomic_load_explicit(&w->resumes, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_store_explicit(&w->co, outer, memory_order_release);
  if (atomic_load_explicit(&w->hooked, memory_order_acquire)) {
    atomic_store_explicit(&w->hooked, 0, memory_order_relaxed);
    lua_sethook(co, NULL, 0, 0); /* set too late to fire: the coroutine may serve again */
  }
}

#endif
