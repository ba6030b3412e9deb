/* ob_retry.c -- _retry: another attempt after a runtime error or a timeout.
 *
 * `_retry` is the number of attempts in all (the first included) or
 * {attempts, delay_ms, backoff, max_delay_ms, jitter} (ob_plan.c validates
 * it). When an attempt fails at run time (the tool raised an error, yielded
 * its coroutine itself, a delegated plan failed, a C tool failed, or its
 * _timeout passed) and attempts remain, the call does not settle: it waits
 * delay_ms * backoff^(n-1) (at most max_delay_ms; with jitter, a uniform
 * draw between half of it and all of it, so that calls failing together do
 * not come back together; never NaN nor infinite, whatever the attempt) and runs again with the params resolved at its
 * first start: the same call, not a new reading of the log. Structural
 * errors (a reference nothing writes, params or a write that break a
 * schema, an invalid replacement) and refusals are never retried: another
 * attempt would meet them again. The error of the last attempt is the
 * call's error, handled by a || alternative like any other.
 *
 * While it waits, the call counts as running (it holds its --concurrency
 * slot) and ctx.attempt tells the next attempt its number. Each attempt is
 * said as it fails: a note "retry" of the run (ob_run_emit_note).
 *
 * Costs: nothing for calls without _retry; a call with one keeps its
 * resolved params for its whole life and uses one timer while it waits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/ob_sched.h"

static void free_timer(uv_handle_t *h) { free(h); }

static void retry_fire(uv_timer_t *t) {
  ob_crun *c = t->data;
  uv_close((uv_handle_t *)t, free_timer);
  c->timer = NULL;
  if (c->state != OB_CALL_RUNNING || !c->retry_wait || c->run->cancelled)
    return;
  c->retry_wait = 0;
  c->attempt++;
  ob_crun_launch(c);
}

/* The wait before attempt n + 1 (n >= 1), in ms: delay_ms * backoff^(n-1), at
 * most max_delay_ms. Worked out so that nothing overflows: a zero delay stays
 * zero whatever the power (0 * 2^1024 would be 0 * inf, NaN), and the power is
 * taken only while it can still stay under the cap (backoff >= 1, so once
 * over, always over), never as inf. */
static uint64_t retry_delay(const ob_retry *p, uint32_t n) {
  double cap = (double)p->max_delay_ms, d = (double)p->delay_ms;
  if (d > 0 && p->backoff > 1) {
    double steps = (double)(n - 1), room = log(cap / d) / log(p->backoff);
    d = !(steps <= room) ? cap : d * pow(p->backoff, steps);
  }
  if (!(d <= cap)) /* NaN cannot get here; if it did, it is the cap */
    d = cap;
  if (p->jitter && d > 0)
    d = d / 2 + (double)rand() / RAND_MAX * (d / 2);
  return d > 0 ? (uint64_t)d : 0;
}

void ob_crun_attempt_failed(ob_crun *c, const char *msg, const char *traceback) {
  const ob_retry *p = &c->call->retry;
  if (c->attempt >= p->attempts || c->run->cancelled) {
    ob_crun_tool_error(c, msg, traceback);
    return;
  }
  ob_timeout_disarm(c);
  ob_crun_abandon(c); /* what is left of the attempt (a finished coroutine, a sub-run) */
  uint64_t wait = retry_delay(p, c->attempt);
  ob_record_retry(c, msg, wait);
  if (!c->run->opt.depth)
    ob_run_emit_note(c->run, "retry", c->call,
                     "call %s (%s): attempt %u of %u failed: %s; again in %llu ms", c->call->id, c->call->tool_name, (unsigned)c->attempt, (unsigned)p->attempts, msg,
            (unsigned long long)wait);
  c->timer = malloc(sizeof *c->timer);
  if (!c->timer) {
    ob_crun_tool_error(c, msg, traceback);
    return;
  }
  uv_timer_init(c->run->e->loop, c->timer);
  c->timer->data = c;
  c->retry_wait = 1;
  ob_timer_start_after(c->timer, retry_fire, wait); /* from now, not the iteration's start */
}
