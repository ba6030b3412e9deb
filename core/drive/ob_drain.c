/* ob_drain.c -- a run's loop driven until it is done and drained (ob_drain.h).
 *
 * A run is done when its awaited calls have settled (on_done); its
 * fire-and-forget calls may still run. The loop then goes on until the last of
 * them ends (an event after on_done finds none pending) or the drain timeout
 * passes, whichever comes first; either stops the loop. uv_run may also return
 * because the loop has nothing left: if calls still wait then, nothing will
 * ever finish them, and they fail as stalled rather than hang.
 *
 * Costs: one timer per driver, reused across runs; per event after on_done, a
 * look at the run's count of pending fire-and-forget calls. */
#include "drive/ob_drain.h"

static void expired(uv_timer_t *t) {
  ob_drain *d = t->data;
  d->expired = 1;
  uv_stop(t->loop);
}

void ob_drain_init(ob_drain *d, uv_loop_t *loop, uint64_t ms) {
  uv_timer_init(loop, &d->timer);
  d->timer.data = d;
  d->run = NULL;
  d->ms = ms;
  d->started = d->expired = 0;
}

void ob_drain_close(ob_drain *d) { uv_close((uv_handle_t *)&d->timer, NULL); }

void ob_drain_start(ob_drain *d, ob_run *r) {
  d->run = r;
  d->started = d->expired = 0;
}

void ob_drain_done(ob_drain *d) {
  if (!ob_run_detached_pending(d->run)) {
    uv_stop(d->timer.loop);
  } else if (!d->started) {
    d->started = 1;
    uv_timer_start(&d->timer, expired, d->ms, 0);
  }
}

void ob_drain_event(ob_drain *d, const ob_event *ev) {
  (void)ev;
  if (d->run && d->started && ob_run_finished(d->run) && !ob_run_detached_pending(d->run))
    uv_stop(d->timer.loop);
}

size_t ob_drain_wait(ob_drain *d, int (*stop)(void *ud), void *ud) {
  ob_run *r = d->run;
  uv_loop_t *loop = d->timer.loop;
  for (;;) {
    if (!ob_run_finished(r) || ob_run_detached_pending(r))
      uv_run(loop, UV_RUN_DEFAULT);
    if ((stop && stop(ud)) || d->expired)
      break;
    if (ob_run_finished(r) && !ob_run_detached_pending(r))
      break;
    if (!uv_loop_alive(loop) && ob_run_fail_stalled(r) == 0)
      break;
  }
  uv_timer_stop(&d->timer);
  size_t abandoned = d->expired ? ob_run_detached_pending(r) : 0;
  ob_run_cancel(r);
  return abandoned;
}
