/* ob_drain.h -- driving a run's loop until its awaited calls have settled and its
 * fire-and-forget calls are drained, or a drain timeout passes: what the CLI's
 * runner does on the command's engine and each thread of a run on threads does
 * on its own (ob_runner.c, ob_shard.c). */
#ifndef OB_DRAIN_H
#define OB_DRAIN_H

#include <uv.h>

#include "engine/ob_run.h"

typedef struct ob_drain {
  uv_timer_t timer; /* the drain timeout, started when the awaited calls settle */
  ob_run *run;      /* the run driven (ob_drain_start), or NULL */
  uint64_t ms;      /* how long fire-and-forget calls may outlast the awaited ones */
  int started, expired;
} ob_drain;

/* Makes d's timer on loop (closed with ob_drain_close); ms: the drain timeout. */
void ob_drain_init(ob_drain *d, uv_loop_t *loop, uint64_t ms);
/* Closes the timer (its memory is d's: keep d until the loop has run the close). */
void ob_drain_close(ob_drain *d);

/* Drives run r from now on: call before ob_run_start(r). */
void ob_drain_start(ob_drain *d, ob_run *r);
/* The run's on_done: stops the loop, or starts the drain timeout when
 * fire-and-forget calls still run. */
void ob_drain_done(ob_drain *d);
/* A scheduler event of the run: once it is done, the last fire-and-forget call
 * ending stops the loop. */
void ob_drain_event(ob_drain *d, const ob_event *ev);
/* Runs the loop until the run is done and drained, the drain timeout passes,
 * nothing can go on (calls still waiting are failed as stalled), or stop(ud)
 * says so after a turn (a signal, a cancel; stop may be NULL); then cancels
 * what still runs. Returns the fire-and-forget calls abandoned at the timeout
 * (0 when none, or stopped). */
size_t ob_drain_wait(ob_drain *d, int (*stop)(void *ud), void *ud);

#endif
