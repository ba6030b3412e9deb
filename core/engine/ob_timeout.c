/* ob_timeout.c -- _timeout: an attempt of a call that runs too long is abandoned.
 *
 * A call with a _timeout (or any call, under the run's --call-timeout) gets a
 * libuv timer of its own when an attempt starts running, stopped and closed
 * when the attempt ends. When it fires first, the attempt is abandoned and
 * fails with "timeout after N ms", a runtime error like any other: retried
 * when _retry allows (ob_retry.c), else routed to a || alternative or the
 * call's error. A tool that does not yield cannot let the timer fire: the
 * watchdog (ob_watch.h) watches the attempt's deadline too, and stops the
 * tool at it, which ends here the same way (ob_timeout_expire).
 *
 * Abandoning must leave nothing of the attempt that can run later:
 *   - its coroutine is let go (never resumed again): a callback that would
 *     wake it finds nobody (ob_crun_of), and an obelus.sleep it waits in is
 *     skipped when due (the sleeper carries the attempt's serial);
 *   - the luv handles it made through obelus.uv are closed (the runtime
 *     module keeps them by attempt: runtime.lua's `abandon`), so no timer or
 *     socket callback of it runs; handles made outside the call's own
 *     coroutine (in a callback) or through require "luv" are not known;
 *   - a delegated plan it started is cancelled;
 *   - a C tool's handle of it is spent: completing it later does nothing
 *     while the call waits for its next attempt or has settled (a host that
 *     may complete an old attempt's handle later compares
 *     ob_call_handle_attempt, as obelus.c does).
 *
 * The limit counts from the attempt's start, not from the start of the loop's
 * iteration that started it (ob_timer_start_after): an attempt runs at least its
 * _timeout, and at most a millisecond more, before the timer can fire.
 *
 * Costs: a timer handle (made and closed) and a clock read per attempt of a call
 * with a limit; nothing for calls without one. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/ob_sched.h"

static void free_timer(uv_handle_t *h) { free(h); }

static uint32_t limit_ms(const ob_crun *c) {
  return c->call->timeout_ms ? c->call->timeout_ms : c->run->opt.call_timeout_ms;
}

static void timeout_fire(uv_timer_t *t) { ob_timeout_expire(t->data); }

void ob_timeout_expire(ob_crun *c) {
  if (c->state != OB_CALL_RUNNING || c->retry_wait)
    return;
  char why[64];
  snprintf(why, sizeof why, "timeout after %u ms", (unsigned)limit_ms(c));
  ob_crun_abandon(c);
  ob_crun_attempt_failed(c, why, NULL);
}

/* The call's timer, made on first use. NULL when out of memory. */
static uv_timer_t *call_timer(ob_crun *c) {
  if (!c->timer && (c->timer = malloc(sizeof *c->timer))) {
    uv_timer_init(c->run->e->loop, c->timer);
    c->timer->data = c;
  }
  return c->timer;
}

void ob_timeout_arm(ob_crun *c) {
  uint32_t ms = limit_ms(c);
  uv_timer_t *t = ms ? call_timer(c) : NULL;
  if (t)
    ob_timer_start_after(t, timeout_fire, ms);
}

/* Keeps the loop alive while a call stopped by a signal waits for what the
 * command makes of the signal (the run's cancel, a job handed back): its
 * loop must get to the signal, and must not find the call stalled first. */
static void held(uv_timer_t *t) { (void)t; }

void ob_timeout_hold(ob_crun *c) {
  uv_timer_t *t = call_timer(c);
  if (t)
    uv_timer_start(t, held, 1000, 1000);
}

void ob_timeout_disarm(ob_crun *c) {
  if (!c->timer)
    return;
  uv_timer_stop(c->timer);
  uv_close((uv_handle_t *)c->timer, free_timer); /* freed when the loop gets to it */
  c->timer = NULL;
}

/* Closes the luv handles the attempt made (runtime.lua's abandon(co, serial)). */
static void close_handles(ob_engine *e, lua_State *co, uint64_t serial) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->prim_ref);
  if (lua_getfield(L, -1, "abandon") == LUA_TFUNCTION) {
    lua_pushthread(co);
    lua_xmove(co, L, 1);
    lua_pushinteger(L, (lua_Integer)serial);
    if (ob_engine_pcall(L, 2, 0) != LUA_OK)
      ob_engine_note(e, "abandon", NULL, "closing an abandoned call's handles: %s",
                     lua_tostring(L, -1));
  }
  lua_settop(L, top);
}

void ob_crun_abandon(ob_crun *c) {
  if (c->co) {
    close_handles(c->run->e, c->co, c->serial);
    c->asleep = 0; /* its sleeper, when due, sees another serial or nobody */
    ob_crun_drop_coroutine(c);
  }
  if (ob_crun_sub(c))
    ob_run_cancel(ob_crun_sub(c));
  c->serial = 0; /* no later wake-up or sleep matches it */
}
