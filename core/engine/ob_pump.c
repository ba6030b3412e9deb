/* ob_pump.c -- the pump: the one place calls start, and what a start decides.
 *
 * The pump takes calls from the run's queue in order, up to --concurrency
 * running in the run's whole tree (its root's count, with the runs delegated
 * from it: see "--concurrency N is one bound" below), and never nests: a call that settles while the pump runs only
 * queues its followers, which this same loop then starts. Starting a call
 * decides, against the log as it is now: skipped (something upstream failed,
 * or a reference's writer did not write it: a branch not taken), failed (a
 * reference nothing writes, params that break the tool's schema), or run
 * (after the approver, when there is one; as a delegated plan, or the tool).
 *
 * It also asks the memory system ahead of time for what the next starts will
 * read (prefetch: hints only). Costs: O(1) per call besides its params. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "engine/ob_sched.h"

/* A parsed expression's block holds its records (an alternative 24 bytes, a
 * reference 40, a path segment 32) and then its strings: the kind and the keys
 * that stage 3 reads lie past the first two lines of one with two segments. */
#define EXPR_LINES 4

/* The path a call's result will take into a wide object's index: the first
 * `levels` nodes read, the next asked for (ob_log_prefetch_write). */
static void prefetch_write(const ob_run *r, const ob_call *call, int levels) {
  if (call->has_output) {
    const ob_reference *x = &call->output.alts[0].refs[0];
    ob_log_prefetch_write(r->log, x->kind, call->instance, &x->path, levels);
  }
}

/* What starting a call reads lies in a dozen small blocks of the plan, cold
 * in a big plan (each call is read once). The scheduler often knows which
 * call starts next (the queue holds it, or it waits only for the call now
 * running), so it asks for those blocks ahead, in stages, each reading only
 * what an earlier one brought in: 1 the call's structs, 2 the blocks they
 * point to, 3 what those point to. Hints only: nothing waits for them. */
static void prefetch_call(const ob_run *r, size_t i, int stage) {
  const ob_call *call = &r->plan->calls[i];
  if (stage == 1) {
    ob_prefetch_lines(&r->calls[i], 2);
    ob_prefetch_lines(call, 4);
  } else if (stage == 2) {
    ob_prefetch(call->raw);
    __builtin_prefetch(call->refs);
    ob_prefetch_lines(call->output.block, EXPR_LINES);
    __builtin_prefetch(call->output_text);
    __builtin_prefetch(call->id);
    __builtin_prefetch(call->deps);
    __builtin_prefetch(call->users);
  } else if (stage == 3) {
    ob_prefetch_members(call->raw);
    if (call->nrefs)
      ob_prefetch_lines(call->refs[0].expr.block, EXPR_LINES);
    if (call->has_output)
      ob_prefetch(call->output_text[0]);
    prefetch_write(r, call, 2); /* measured: a tenth of the cycles of a chain
                                   writing 100,000 keys */
  }
}

/* The followers of a call that wait for nothing else (of its first two: a
 * chain's next call) at one stage. */
void ob_run_prefetch_users(const ob_run *r, const ob_call *call, int stage) {
  for (size_t u = 0; u < call->nusers && u < 2; u++)
    if (r->calls[call->users[u]].pending == 1) /* else it does not start next */
      prefetch_call(r, call->users[u], stage);
}

/* The path the call's own result will take into a wide object's index, one
 * level deeper than stage 3 asked for it (when the call it waited for
 * completed, or the call before it in the queue started): that level is in
 * the cache by now, so the walk reads it without waiting and asks for the
 * next. Called as the tool starts, a tool's run ahead of the write. Measured
 * on chain 100000: with two levels only, the write's lookup waited on the
 * third for a sixth of the run. */
void ob_run_prefetch_write(const ob_run *r, const ob_call *call) { prefetch_write(r, call, 3); }

/* The calls queued behind position q: three ahead at stage 1, two at 2, one at 3. */
static void prefetch_queued(const ob_run *r, size_t q) {
  for (int stage = 1; stage <= 3; stage++)
    if (q + 4 - stage < r->qtail)
      prefetch_call(r, r->queue[q + 4 - stage], stage);
}

void ob_crun_go(ob_crun *c, ob_value *params, ob_value *list, ob_value **vals, size_t nvals) {
  ob_call *call = c->call;
  int retries = call->retry.attempts > 1 && !call->each; /* later attempts take the params kept */
  c->attempt++; /* 1, or one past the attempts a resumed journal recorded */
  if (retries)
    c->params = ob_ref(params);
  if (call->each) {
    ob_crun_each(c, params, list);
    return; /* ob_crun_each took them */
  } else if (call->delegate) {
    ob_crun_delegate(c, params);
    ob_unref(list);
    return; /* ob_crun_delegate took it */
  }
  ob_call_args args = {c, params, vals, nvals};
  ob_crun_run_tool(c, &args);
  ob_unref(params);
  ob_unref(list);
}

static void start(ob_crun *c) {
  ob_run *r = c->run;
  ob_call *call = c->call;
  ob_run_prefetch_users(r, call, 1);
  for (size_t d = 0; d < call->ndeps; d++) {
    ob_crun *dep = &r->calls[call->deps[d]];
    if (dep->state == OB_CALL_FAILED || (dep->state == OB_CALL_SKIPPED && dep->upstream_failed)) {
      c->upstream_failed = 1;
      char why[256];
      snprintf(why, sizeof why, "upstream failed: call %s (%s)", dep->call->id,
               dep->call->tool_name);
      ob_crun_settle(c, OB_CALL_SKIPPED, why);
      return;
    }
  }
  ob_resolver rs = {r, call, 0, 0, 0, {0}};
  ob_buf_init(&rs.why);
  /* Direct: a Lua tool that nothing but the tool itself looks at the params
   * of (no schema, no approver, no delegation) gets them pushed straight
   * from the call as written and its references' values: no params object. */
  /* an _each call's copies are each retried, checked and approved: the call is not */
  int retries = call->retry.attempts > 1 && !call->each; /* later attempts take the params kept */
  int direct = c->tool && !c->tool->fn && !c->tool->schema && !call->delegate && !call->each &&
               !c->raw && r->e->approver_ref == LUA_NOREF && !r->opt.approve && !retries;
  ob_value *vals_inline[8], **vals = NULL, *params = NULL, *list = NULL;
  if (direct) {
    vals = call->nrefs <= 8 ? vals_inline : ob_xmalloc(call->nrefs * sizeof *vals);
    for (size_t k = 0; k < call->nrefs; k++)
      vals[k] = ob_params_eval_ref(&rs, &call->refs[k]);
  } else {
    params = ob_params_resolve(&rs);
    if (call->each) /* its list: the last reference, after the params' (ob_plan.h) */
      list = ob_params_eval_ref(&rs, &call->refs[call->nrefs - 1]);
  }
  if (rs.skip || rs.missing ||
      (params && !call->each && ob_params_invalid(c->tool, params, &rs.why))) {
    if (rs.skip)
      ob_crun_settle(c, OB_CALL_SKIPPED, rs.why.data);
    else
      ob_crun_fail(c, "structural", rs.why.data);
  } else if (params && !call->each && (r->e->approver_ref != LUA_NOREF || r->opt.approve) &&
             !ob_crun_approve(c, &params)) {
    params = NULL; /* refused, the approver broke or was stopped by a signal: approve released
                      it and settled the call (or left it to the run's cancel) */
  } else {
    ob_crun_go(c, params, list, vals, direct ? call->nrefs : 0);
    params = list = NULL; /* taken */
  }
  ob_buf_free(&rs.why);
  ob_unref(params);
  ob_unref(list);
  for (size_t k = 0; vals && k < call->nrefs; k++)
    ob_unref(vals[k]);
  if (vals != vals_inline)
    free(vals);
}

void ob_crun_launch(ob_crun *c) {
  if (c->call->delegate) {
    ob_crun_delegate(c, ob_ref(c->params));
    return;
  }
  ob_call_args args = {c, c->params, NULL, 0};
  ob_crun_run_tool(c, &args);
}

/* --concurrency N is one bound for a run and every run delegated from it: the
 * count of calls holding a slot is its root's (ob_sched.h). A call holds one
 * from its start to its settling (between attempts too), except a delegating
 * call (or an _each call): it only waits for its run, whose calls need the slots (holding one
 * while waiting would deadlock a chain of delegations under --concurrency 1).
 * A run whose next call finds no slot joins the root's list of waiting runs;
 * each slot given back (ob_settle.c, ob_run.c's cancel) lets the first go on. */

/* r waits for a slot: at the end of its root's list, once. */
static void block(ob_run *r) {
  ob_run *root = r->root;
  if (r->bprevp)
    return;
  r->bnext = NULL;
  r->bprevp = root->btail;
  *root->btail = r;
  root->btail = &r->bnext;
}

void ob_run_unblock(ob_run *r) {
  if (!r->bprevp)
    return;
  *r->bprevp = r->bnext;
  if (r->bnext)
    r->bnext->bprevp = r->bprevp;
  else
    r->root->btail = r->bprevp;
  r->bnext = NULL;
  r->bprevp = NULL;
}

void ob_run_wake(ob_run *root) {
  size_t limit = root->opt.concurrency;
  if (root->waking)
    return; /* the loop below goes on with it */
  root->waking = 1;
  while (root->blocked && (!limit || root->busy < limit)) {
    ob_run *b = root->blocked;
    ob_run_unblock(b);
    ob_run_pump(b); /* back at the end of the list when it fills the slots again */
  }
  root->waking = 0;
}

void ob_run_pump(ob_run *r) {
  if (r->pumping)
    return;
  r->pumping = 1;
  ob_run *root = r->root;
  size_t started = 0, limit = root->opt.concurrency;
  while (r->qhead < r->qtail && !r->cancelled) {
    if (limit && root->busy >= limit) {
      block(r);
      break;
    }
    if (r->opt.max_running && r->running >= r->opt.max_running)
      break; /* its own bound (_eachConcurrency): a call of it settling pumps it again */
    if (r->always && ob_record_hold(r, r->calls[r->queue[r->qhead]].ready_seq))
      break; /* what it reads is not on disk yet: on_durable pumps again */
    if (++started % OB_GC_BURST_CALLS == 0)
      ob_gc_burst_check(r->e);
    prefetch_queued(r, r->qhead);
    ob_crun *c = &r->calls[r->queue[r->qhead++]];
    start(c);
    if (c->state == OB_CALL_RUNNING && !c->call->delegate && !c->call->each && !c->holds_slot) {
      c->holds_slot = 1; /* still running (a call that ended at once never held one) */
      root->busy++;
    }
  }
  r->pumping = 0;
}
