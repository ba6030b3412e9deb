/* ob_settle.c -- settling a call: done, failed or skipped, and what follows.
 *
 * A call settles once. Settling gives back its coroutine, tells the listener,
 * counts it against the run's awaited calls (the run is finished when all
 * have settled), and lowers the pending count of each call that reads it:
 * those that reach zero are queued, and the pump starts them. Its
 * --concurrency slot, when it held one, goes back to its tree of runs: the
 * runs waiting for one go on (ob_run_wake). A call that
 * settles while the pump runs only queues (the pump never nests), so a chain
 * of calls that finish at once runs in constant C stack. A failure is also a
 * message (kind error) in the log, written before the call settles.
 *
 * Costs: O(users) per call settled; one error message per failure. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ob_sched.h"
#include "log/ob_msg.h"

void ob_crun_enqueue(ob_run *r, ob_crun *c) {
  c->state = OB_CALL_READY;
  if (r->always) /* what it reads is in the journal's lines so far */
    c->ready_seq = ob_wal_seq(r->opt.journal);
  r->queue[r->qtail++] = (size_t)(c - r->calls);
  ob_run_emit(r, OB_EV_READY, c->call, NULL);
}

void ob_crun_settle(ob_crun *c, ob_call_state st, const char *reason) {
  ob_run *r = c->run;
  int freed = c->holds_slot; /* its --concurrency slot (ob_pump.c) */
  if (freed) {
    c->holds_slot = 0;
    r->root->busy--;
  }
  if (c->state == OB_CALL_RUNNING) {
    r->running--;
    if (c->detached)
      r->detached_running--;
  }
  if (c->detached && c->state < OB_CALL_DONE) /* waiting, ready or running until now */
    r->detached_unsettled--;
  c->state = st;
  c->retry_wait = 0;
  ob_timeout_disarm(c);
  ob_crun_drop_coroutine(c);
  ob_record_settled(c);
  if (r->opt.on_event) {
    ob_event ev = {st == OB_CALL_DONE ? OB_EV_DONE : st == OB_CALL_SKIPPED ? OB_EV_SKIPPED : OB_EV_FAILED,
                   c->call, reason, ob_run_now_ms(r), NULL,
                   st == OB_CALL_FAILED ? c->fail_phase : NULL, c->detached, NULL, c->attempt,
                   st == OB_CALL_DONE ? r->written : NULL, st == OB_CALL_DONE && r->handled, NULL};
    r->opt.on_event(r->opt.ud, &ev);
  }
  c->fail_phase = NULL;
  if (!c->detached)
    r->settled_awaited++;
  for (size_t u = 0; u < c->call->nusers; u++) {
    ob_crun *user = &r->calls[c->call->users[u]];
    if (--user->pending == 0 && !r->cancelled)
      ob_crun_enqueue(r, user);
  }
  if (!r->finished && r->settled_awaited == r->nawaited) {
    r->finished = 1;
    ob_record_flush(r);
    ob_run_emit(r, OB_EV_RUN_DONE, NULL, NULL);
    if (r->opt.on_done)
      r->opt.on_done(r, r->opt.ud);
  }
  ob_run_pump(r);
  if (freed) /* the runs of the tree waiting for a slot (its own followers first) */
    ob_run_wake(r->root);
}

/* Appends the error message of a call and settles it as failed. */
void ob_crun_fail(ob_crun *c, const char *phase, const char *msg) {
  ob_run *r = c->run;
  ob_buf cut; /* a message over the limit (ob_message_max) is cut, and says so */
  ob_buf_init(&cut);
  if (strlen(msg) > ob_message_max(r->opt.max_output) + 100) { /* not cut yet (note: < 100) */
    ob_buf_add(&cut, msg, strlen(msg));
    ob_buf_cut(&cut, ob_message_max(r->opt.max_output), "error message");
    msg = cut.data;
  }
  ob_value *m = ob_msg_error(ob_crun_raw(c), c->call->id, msg, phase, c->detached,
                            c->call->instance, ob_crun_sublog(c));
  ob_error err;
  if (ob_run_append(r, m, &err) < 0)
    ob_run_emit_note(r, "record", c->call, "could not record an error: %s", err.msg);
  ob_unref(m);
  /* the event says the phase: the CLI prints "call X (T) failed (phase): msg" from it, for
   * the top-level run (a delegated plan's failures reach its caller's) */
  c->fail_phase = phase;
  if (!c->detached)
    r->failed = 1;
  ob_crun_settle(c, OB_CALL_FAILED, msg);
  ob_buf_free(&cut);
}
