/* ob_delegate.c -- delegation: a call that runs a plan (_delegate).
 *
 * The delegated plan runs as a run of its own on the same engine, in a clean
 * room: a fresh log holding only the kinds _scopes names (as the calling
 * call sees them) and the call's params as an input document. Its output is
 * the call's result, its failure the call's error; its whole log goes with
 * the call's output or error message (_log), so `obelus log` can show it.
 * Depth is bounded (--max-depth). The plan file is confined to the plans root
 * (ob_plan_read_delegate), checked again here though validation did: the
 * file may have changed since, and a host may start runs it never checked;
 * the sub-run and its plan keep the same root.
 *
 * Delegation goes through the loop: the delegated run is made here but
 * started from the run's idle callback (ob_run_kick), and its outcome reaches
 * the call the same way, a turn later. Nothing about a delegated run happens
 * inside the scheduler pass of the run above it, so the C stack stays flat
 * at any depth (--max-depth is the only bound), and a plan that delegates to
 * itself many times over ("a delegation bomb") still lets signals, timers and
 * other calls in between. A call waiting on its delegated run holds no
 * --concurrency slot (ob_pump.c): its run's calls need them.
 *
 * Costs: a plan load and a run per call; two turns of the loop. The run's,
 * its plan's and its calls' structs are charged to the engine's memory
 * account (an estimate, from the plan's size) before the run is made, and
 * released when it is freed: a delegation bomb fails its calls with "memory
 * limit of N MB reached (--max-memory)" as the account fills. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "log/ob_msg.h"
#include "engine/ob_resume.h"
#include "engine/ob_sched.h"


static void deliver(ob_crun *c, ob_run *sub);

int ob_cdel_first_error(const ob_run *sub, const char **id, const char **msg) {
  for (size_t i = 0; i < ob_log_len(sub->log); i++) {
    const ob_msg *m = ob_log_at(sub->log, i);
    if (m->type != OB_MSG_CONTEXT || strcmp(ob_string_ptr(m->kind), "error"))
      continue;
    ob_value *x = ob_object_get(m->value, "id", 2), *e = ob_object_get(m->value, "error", 5);
    if (ob_object_get(m->value, "detached", 8) || !x || ob_typeof(x) != OB_STRING || !e ||
        ob_typeof(e) != OB_STRING)
      continue;
    *id = ob_string_ptr(x);
    *msg = ob_string_ptr(e);
    return 1;
  }
  return 0;
}

int ob_cdel_chained(const ob_run *sub, const char *id) {
  const ob_call *call = ob_map_get(&sub->plan->ids, id, strlen(id));
  if (!call)
    return 0;
  const ob_crun *c = &sub->calls[call - sub->plan->calls];
  return c->del && c->del->run; /* it ran a plan of its own: its error tells that plan's */
}

/* The delegated plan settled: its output is the call's result; its failure
 * the call's error. Its messages go with the call's output or error (in the
 * journal, as the name of their scope: ob_record.c). A failure that comes of
 * a limit of the whole run (--max-depth, --max-calls), here or deeper, is not
 * tried again: another attempt would meet it too. */
static void delegate_done(ob_crun *c, ob_run *sub) {
  if (!c->del->link_only) {
    ob_value *sublog = ob_array();
    for (size_t i = 0; i < ob_log_len(sub->log); i++)
      sublog = ob_array_push(sublog, ob_log_message(sub->log, i));
    c->del->log = sublog;
  }
  ob_run_cancel(sub); /* its fire-and-forget calls end with it */
  c->run->journal_sub = c->del; /* its messages are in the journal already */
  if (c->del->done)
    c->del->done(c, sub); /* an _each call's (ob_each.c) */
  else
    deliver(c, sub);
  c->run->journal_sub = NULL;
}

static void deliver(ob_crun *c, ob_run *sub) {
  if (sub->failed) {
    ob_buf why;
    ob_buf_init(&why);
    ob_buf_addf(&why, "the delegated plan %s failed", c->call->delegate);
    const char *id, *e;
    if (ob_cdel_first_error(sub, &id, &e)) {
      if (ob_cdel_chained(sub, id)) { /* the deepest cause only */
        why.len = 0;
        ob_buf_add(&why, e, strlen(e));
      } else {
        ob_buf_addf(&why, ": call %s: %s", id, e);
      }
    }
    if (sub->limit_failed) { /* no retry; a || alternative still receives it */
      if (!c->call->has_output || c->call->output.n < 2)
        c->run->limit_failed = 1;
      ob_crun_tool_error(c, why.data, NULL);
    } else {
      ob_crun_attempt_failed(c, why.data, NULL);
    }
    ob_buf_free(&why);
    return;
  }
  if (!c->call->has_output) {
    ob_crun_settle(c, OB_CALL_DONE, NULL);
    return;
  }
  ob_value *out = ob_run_output(sub);
  ob_crun_write_alt(c, 0, out);
  ob_unref(out);
}

/* The delegated run finished (its on_done, deep in its scheduler): the loop
 * hands its outcome to the call, from a callback of its own. */
static void delegate_finished(ob_run *sub, void *ud) {
  ob_crun *c = ud;
  (void)sub;
  c->del->to_finish = 1;
  ob_run_kick(c->run, c);
}

void ob_crun_delegate_step(ob_crun *c) {
  ob_cdel *d = c->del;
  if (!d || (!d->to_start && !d->to_finish))
    return; /* asked for by an attempt since abandoned (ob_cdel_clear) */
  int start = d->to_start, finish = d->to_finish;
  d->to_start = d->to_finish = 0;
  if (!d->run || d->run->cancelled || c->state != OB_CALL_RUNNING)
    return;
  if (start)
    ob_run_start(d->run); /* when it finishes at once, its outcome comes next turn */
  else if (finish)
    delegate_done(c, d->run);
}

void ob_cdel_clear(ob_cdel *d) {
  ob_mem_release_to(d->acct, d->charged);
  ob_run_free(d->run); /* clears d->run through the run's parent pointer */
  ob_plan_free(d->plan);
  ob_unref(d->value);
  ob_unref(d->log);
  free(d->scope);
  *d = (ob_cdel){0};
}

int ob_cdel_begin(ob_crun *c, int timed) {
  ob_run *r = c->run;
  if (c->state != OB_CALL_RUNNING) { /* the first attempt */
    c->state = OB_CALL_RUNNING;
    r->running++;
    ob_run_emit(r, OB_EV_STARTED, c->call, NULL);
  }
  c->serial = ++r->e->attempt_serial;
  if (!c->del)
    c->del = ob_xcalloc(1, sizeof *c->del);
  ob_cdel_clear(c->del); /* an earlier attempt's run and plan */
  ob_record_start(c);
  if (ob_record_flush(r) != OB_OK) /* the journal failed: the run is cancelled */
    return 0;
  if (timed)
    ob_timeout_arm(c);
  int max_depth = r->opt.max_depth > 0 ? r->opt.max_depth : 16;
  if (r->opt.depth + 1 > max_depth) {
    char why[160];
    snprintf(why, sizeof why, "delegation deeper than %d levels (see --max-depth)", max_depth);
    r->limit_failed = 1;
    ob_crun_fail(c, "runtime", why);
    return 0;
  }
  return 1;
}

void ob_cdel_scope(const ob_crun *c, ob_buf *scope) {
  const ob_run *r = c->run;
  if (r->scope)
    ob_buf_addf(scope, "%s/", r->scope);
  else if (r->opt.step)
    ob_buf_addf(scope, "step %d/", r->opt.step);
  ob_buf_addf(scope, "%s", c->call->id);
}

int ob_cdel_charge(ob_crun *c, size_t ncalls, size_t scope_len) {
  ob_run *r = c->run;
  /* the delegated run's own structs, charged to the account before they are
   * made: a delegation bomb is refused as the account fills, as values are,
   * rather than left to abort where malloc fails (the bytes are an estimate,
   * a little above what a run, its plan and its calls take) */
  size_t need = sizeof(ob_run) + sizeof(ob_plan) + 1024 + 3 * (scope_len + 1) +
                ncalls * (sizeof(ob_crun) + sizeof(ob_call) + 512);
  if (ob_mem_charge_to(&r->e->mem, need) != 0) {
    char why[96];
    snprintf(why, sizeof why, OB_MEM_LIMIT_FMT, r->e->mem.limit >> 20);
    r->limit_failed = 1; /* so would another attempt */
    ob_crun_fail(c, "runtime", why);
    return 0;
  }
  c->del->acct = &r->e->mem;
  c->del->charged = need;
  return 1;
}

ob_run_options ob_cdel_options(ob_crun *c, const char *scope, const ob_value *pre) {
  ob_run *r = c->run;
  return (ob_run_options){.concurrency = r->opt.concurrency,
                          .depth = r->opt.depth + 1,
                          .max_depth = r->opt.max_depth > 0 ? r->opt.max_depth : 16,
                          .pre_context = pre,
                          .approve = r->opt.approve,
                          .approve_ud = r->opt.approve_ud,
                          .max_slice_ms = r->opt.max_slice_ms,
                          .call_timeout_ms = r->opt.call_timeout_ms,
                          .max_output = r->opt.max_output,
                          .max_calls = r->opt.max_calls,
                          .calls_used = r->opt.calls_used,
                          .journal = r->opt.journal,
                          .journal_scope = scope,
                          .journal_in = r->scope ? r : NULL,
                          .journal_call = c->call->id,
                          .resume = r->opt.resume,
                          .plans_root = r->plans_root,
                          .on_done = delegate_finished,
                          .ud = c};
}

void ob_cdel_launch(ob_crun *c, ob_run *sub, const char *scope, const ob_error *err) {
  ob_run *r = c->run;
  ob_cdel *d = c->del;
  d->run = sub;
  d->scope = ob_xstrdup(scope);
  if (!sub) {
    r->limit_failed = 1; /* --max-calls (or its input refused): so would another attempt */
    ob_crun_fail(c, "runtime", err->msg);
    return;
  }
  sub->parent = c;
  sub->root = r->root; /* one --concurrency for the whole tree */
  /* started by the loop, not from inside this pass of the scheduler: the C stack
   * does not grow with the depth, and a signal or a timer gets its turn */
  d->to_start = 1;
  ob_run_kick(r, c);
}

void ob_crun_delegate(ob_crun *c, ob_value *params) {
  ob_run *r = c->run;
  ob_call *call = c->call;
  if (!ob_cdel_begin(c, 1)) {
    ob_unref(params);
    return;
  }
  ob_cdel *d = c->del;
  /* its lines in the journal: "#1", "#1/#0" nested, "step 2/#1" in a loop's step */
  ob_buf scope;
  ob_buf_init(&scope);
  ob_cdel_scope(c, &scope);
  /* resumed: the plan as its run began, and that run goes on */
  ob_resume *rs = r->opt.resume && ob_resume_has_run(r->opt.resume, scope.data) ? r->opt.resume
                                                                                 : NULL;
  ob_error err;
  if (!rs)
    d->value = ob_plan_read_delegate(call, r->plans_root, &err);
  else if (ob_plan_confine_delegate(call, r->plans_root, &err) == OB_OK) /* the path still */
    d->value = ob_ref((ob_value *)ob_resume_part_plan(rs, scope.data));
  if (d->value) {
    size_t max = r->opt.max_calls, used = r->opt.calls_used ? *r->opt.calls_used : 0;
    /* past the calls left, none is read: ob_run_new refuses it with the limit's message */
    d->plan = ob_plan_read_within(d->value, call->delegate, 0,
                                  max ? (used < max ? max - used : 1) : 0);
    d->plan->root = r->plans_root ? ob_xstrdup(r->plans_root) : NULL;
    ob_plan_check_tools(d->plan, &r->e->tools, ob_engine_has_latent(r->e));
  }
  if (!d->plan || d->plan->nerrors) {
    ob_buf_free(&scope);
    ob_unref(params);
    ob_crun_fail(c, "runtime", d->plan ? d->plan->errors[0] : err.msg);
    return;
  }
  if (!ob_cdel_charge(c, d->plan->over_limit ? 0 : d->plan->ncalls, scope.len)) {
    ob_buf_free(&scope);
    ob_unref(params);
    return;
  }
  /* the clean room: only the kinds named by _scopes, as this call sees them,
   * then the call's own params as an input document */
  ob_value *pre = ob_array(), *k, *v;
  ob_path root = {0, NULL};
  for (size_t i = 0; i < call->nscopes; i++) {
    ob_value *doc = ob_log_read(r->log, call->scopes[i], call->instance, &root, OB_LOG_NOW);
    if (!doc)
      continue;
    pre = ob_array_push(pre, ob_msg_data(ob_cstring(call->scopes[i]), doc, NULL));
  }
  ob_value *args = ob_object();
  ob_object_iter it;
  ob_object_iter_init(&it, params);
  while (ob_object_iter_next(&it, &k, &v))
    if (ob_string_ptr(k)[0] != '_')
      args = ob_object_setv(args, k, ob_ref(v));
  ob_unref(params);
  ob_value *inputs = ob_array();
  if (ob_object_len(args))
    inputs = ob_array_push(inputs, ob_ref(args));
  ob_unref(args);
  ob_run_options opt = ob_cdel_options(c, scope.data, pre);
  ob_run *sub = rs ? ob_resume_run(r->e, d->plan, rs, scope.data, &opt, &err)
                   : ob_run_new(r->e, d->plan, d->value, inputs, &opt, &err);
  ob_unref(pre);
  ob_unref(inputs);
  ob_cdel_launch(c, sub, scope.data, &err);
  ob_buf_free(&scope);
}
