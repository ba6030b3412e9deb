/* ob_gc.c -- Lua's collector while thousands of calls wait: the engine's policy.
 *
 * Lua's collector is tuned for a program whose live heap is small next to
 * its garbage. A burst of waiting calls turns that around (each waiting
 * call's coroutine, params and ctx are live), and two rules below keep the
 * collector from walking the same live memory again and again: it turns
 * incremental with a longer pause while more than GC_MANY_CALLS calls are
 * alive, and it holds off during a burst of starts, working in the loop's
 * idle time instead. Each rule's measurement is at its code. Costs: O(1)
 * per call started or ended; the heap may grow further than Lua's default
 * would let it (bounded below). */
#include <lauxlib.h>
#include <stdlib.h>

#include "engine/ob_sched.h"

/* Lua's generational collector (the engine's default: calls make short-lived
 * tables) visits every live coroutine at every minor collection; with
 * thousands of calls waiting at once that is most of its work. Past
 * GC_MANY_CALLS live calls the collector turns incremental, and back to
 * generational when a run is freed with none left (the switch back costs a
 * full collection: not in the middle of a run). Measured on sleep 10000 100:
 * the start cascade ~10% shorter. Its pause is then GC_MANY_PAUSE (Lua's
 * default: 200): while thousands of calls wait, most of the heap is live and
 * grows, and each cycle walks all of it again; a cycle at every tripling
 * rather than every doubling. Measured on sleep 10000 100 (perf stat, 5
 * interleaved runs): 17% fewer cycles, the same peak RSS (a waiting call's
 * memory is live, not garbage); sleep 100000 200: 1,022 to 736 ms. The cost:
 * garbage made while that many calls wait may reach 3x the live heap, not 2x. */
#define GC_MANY_CALLS 1000
#define GC_MANY_PAUSE 300

void ob_gc_call_up(ob_engine *e) {
  if (++e->live_calls > GC_MANY_CALLS && !e->gc_incremental) {
    lua_gc(e->L, LUA_GCINC, GC_MANY_PAUSE, 0, 0);
    e->gc_incremental = 1;
  }
}

#define BURST_LIVE 256           /* calls alive (waiting, mostly) that make it a burst */
#define BURST_MIN_ROOM_KB 16384  /* a held collector lets the heap grow by its size, or this */
#define IDLE_MAX_MS 20           /* idle collection: at most this long a loop turn */

static void gc_release(ob_engine *e) {
  if (e->gc_held) {
    e->gc_held = 0;
    lua_gc(e->L, LUA_GCRESTART);
  }
}

/* A held collector whose heap outgrew the bound runs again; 1 when it was released. */
static int gc_release_past_bound(ob_engine *e) {
  if (!e->gc_held || lua_gc(e->L, LUA_GCCOUNT) <= e->gc_limit_kb)
    return 0;
  gc_release(e);
  return 1;
}

/* Collection owed by a burst, done while the loop has nothing due: a timer
 * (kept from holding the loop open) comes back every millisecond and works
 * for as long as the loop's next task is away, less a millisecond, at most
 * IDLE_MAX_MS at a time. */
static void gc_idle_cb(uv_timer_t *t) {
  ob_engine *e = t->data;
  if (!e->gc_held || gc_release_past_bound(e))
    return;
  int wait = uv_backend_timeout(e->loop); /* without this timer: it is not active now */
  if (wait < 0 || wait >= 2) {
    int budget_ms = wait < 0 || wait - 1 > IDLE_MAX_MS ? IDLE_MAX_MS : wait - 1;
    uint64_t t0 = uv_hrtime(), budget = (uint64_t)budget_ms * 1000000u;
    /* a step works even while the collector is stopped; a generational one
     * is a whole (minor) collection, an incremental one says when it ends a cycle */
    int finished = 0;
    do
      finished = lua_gc(e->L, LUA_GCSTEP, 0) || !e->gc_incremental;
    while (!finished && uv_hrtime() - t0 < budget);
    uv_update_time(e->loop); /* the wait ahead is measured from now */
    if (finished) { /* a whole cycle done: the collector runs as usual again */
      gc_release(e);
      return;
    }
  }
  uv_timer_start(t, gc_idle_cb, 1, 0);
}

/* A burst: many calls started in one pump while BURST_LIVE or more are alive
 * (they wait). Collecting in its middle finds little to free (what a waiting
 * call started with is live) and walks everything again each cycle; so the
 * collector holds off, until the heap has doubled (or grown 16 MB, when
 * smaller), and does its work while the loop has nothing due (gc_idle_cb).
 * Calls that finish at once (a chain) leave few alive: no burst. Measured on
 * sleep 10000 100 (8 interleaved runs): the start cascade ~30% shorter, loop
 * time median 151 to 144 ms, and 141 to 134 ms once the work went to idle
 * time rather than after; chain and fanout: unchanged.
 * Many calls woken at once by the sleepers' timer (ob_sleep.c) while as many
 * are alive are a burst too: the collector would otherwise sweep their garbage
 * in whatever runs next. Measured on sleep 10000 100 (11 interleaved runs): its
 * join 5.2 to 2.8 ms, loop time 115.6 to 112.6 ms, peak RSS +0.3 MB. */
static void gc_hold(ob_engine *e) {
  if (e->gc_held || !lua_gc(e->L, LUA_GCISRUNNING))
    return;
  if (!e->gc_idle) {
    if (!(e->gc_idle = malloc(sizeof *e->gc_idle)))
      return;
    uv_timer_init(e->loop, e->gc_idle);
    e->gc_idle->data = e;
  }
  int kb = lua_gc(e->L, LUA_GCCOUNT);
  e->gc_limit_kb = kb + (kb > BURST_MIN_ROOM_KB ? kb : BURST_MIN_ROOM_KB);
  lua_gc(e->L, LUA_GCSTOP);
  e->gc_held = 1;
  uv_timer_start(e->gc_idle, gc_idle_cb, 1, 0);
  uv_unref((uv_handle_t *)e->gc_idle);
}

void ob_gc_burst_check(ob_engine *e) {
  if (!e->gc_held && e->live_calls >= BURST_LIVE)
    gc_hold(e);
  else
    gc_release_past_bound(e);
}

void ob_gc_calls_gone(ob_engine *e) {
  gc_release(e);
  if (e->gc_incremental) { /* the burst is over (see ob_gc_call_up) */
    lua_gc(e->L, LUA_GCGEN, 0, 0);
    e->gc_incremental = 0;
  }
}
