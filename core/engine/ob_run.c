/* ob_run.c -- the scheduler: one execution of a plan (plan-format §5, 9), its life.
 *
 * Design
 * ------
 * Each call keeps a count of the calls it depends on that have not settled.
 * When that count reaches zero the call is queued (ob_settle.c); the pump
 * (ob_pump.c) starts queued calls (up to --concurrency) the moment they are
 * queued, so a fast branch's follower starts while a slow sibling still runs:
 * there are no rounds.
 *
 * Starting a call resolves its params against the log as it is then
 * (ob_params.c), and decides: skip (an upstream call failed, or a branch not
 * taken), fail (a structural error), or run. Running means a Lua coroutine on
 * the engine's state (ob_co.c): it runs until it finishes or yields through
 * obelus.sleep/await; the timer or callback that ends the wait resumes it. A
 * call that finishes has its result written (ob_write.c: its output messages
 * appended) and settles, which queues the calls waiting for it.
 *
 * This file holds what belongs to the run as a whole: making it (the plan,
 * context and input messages first in its log), starting, cancelling and
 * freeing it, the journal of its log, and its final output. ob_sched.h lists
 * the other files of the scheduler, one concern each.
 *
 * A run and the runs delegated from it form a tree as deep as --max-depth
 * (10,000): cancelling and freeing walk it with a worklist, never by
 * recursion, and delegation itself goes through the loop (ob_run_kick: a
 * delegated run starts, and its outcome reaches its call, from the run's idle
 * callback, at most OB_RUN_KICKS such steps a turn for the whole tree), so no
 * C stack grows with the depth and the loop turns during a delegation bomb.
 *
 * Costs per call: O(deps + users) bookkeeping, one coroutine, the params'
 * conversion to Lua and the result's back, and one path copy per write.
 * Per delegation: an idle handle per delegating run, two turns of the loop;
 * cancel and free O(runs in the tree) time and a pointer each of memory. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "log/ob_msg.h"
#include "plan/ob_order.h"
#include "engine/ob_sched.h"
#include "bridge/ob_watch.h"

const char *ob_call_state_name(ob_call_state s) {
  static const char *const names[] = {"waiting", "ready", "running", "done", "failed", "skipped"};
  return names[s];
}

const char *ob_event_name(ob_event_type type) {
  static const char *const names[] = {"ready",    "started", "done", "skipped",
                                      "failed",   "run_done", "note", "progress"};
  return (unsigned)type < sizeof names / sizeof *names ? names[type] : "unknown";
}

size_t ob_event_value_size(const ob_value *v) {
  size_t n = ob_json_size(v, OB_EVENT_VALUE_MAX);
  return n <= OB_EVENT_VALUE_MAX ? n : ob_json_size(v, SIZE_MAX);
}

const char *ob_event_say(const ob_event *ev, ob_buf *out) {
  if (ev->type == OB_EV_NOTE) {
    ob_buf_addf(out, "%s", ev->reason ? ev->reason : "");
    return ev->note ? ev->note : "note";
  }
  if (ev->type == OB_EV_FAILED && ev->phase && ev->call) {
    ob_buf_addf(out, "call %s (%s) failed%s (%s): %s", ev->call->id, ev->call->tool_name,
                ev->detached ? " [fire-and-forget]" : "", ev->phase, ev->reason ? ev->reason : "");
    return "failed";
  }
  return NULL;
}

void ob_event_to_note(ob_engine *e, const ob_event *ev) {
  ob_buf b;
  ob_buf_init(&b);
  const char *kind = ob_event_say(ev, &b);
  if (kind)
    ob_engine_note(e, kind, ev->call ? ev->call->id : NULL, "%s", b.data);
  ob_buf_free(&b);
}

double ob_run_now_ms(const ob_run *r) { return (double)(uv_hrtime() - r->t0) / 1e6; }

void ob_run_emit(ob_run *r, ob_event_type type, const ob_call *c, const char *reason) {
  if (!r->opt.on_event)
    return;
  ob_event ev = {.type = type, .call = c, .reason = reason, .t_ms = ob_run_now_ms(r),
                 .attempt = c ? r->calls[c - r->plan->calls].attempt : 0};
  r->opt.on_event(r->opt.ud, &ev);
}

void ob_run_emit_note(ob_run *r, const char *kind, const ob_call *c, const char *fmt, ...) {
  ob_run *root = r->root ? r->root : r; /* a delegated run has no listener of its own */
  if (!root->opt.on_event)
    return;
  ob_buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  ob_buf_vaddf(&b, fmt, ap);
  va_end(ap);
  ob_event ev = {.type = OB_EV_NOTE, .call = c, .reason = b.data ? b.data : "",
                 .t_ms = ob_run_now_ms(root), .note = kind, .attempt = c ? r->calls[c - r->plan->calls].attempt : 0};
  root->opt.on_event(root->opt.ud, &ev);
  ob_buf_free(&b);
}

/* Writes the messages appended since the last time to the journal. */
void ob_run_sync_journal(ob_run *r) {
  if (!r->opt.journal) {
    r->journaled = ob_log_len(r->log);
    return;
  }
  for (; r->journaled < ob_log_len(r->log); r->journaled++)
    ob_record_message(r, r->journaled);
}

long ob_run_append(ob_run *r, ob_value *msg, ob_error *err) {
  long rc = ob_log_append(r->log, msg, err);
  ob_run_sync_journal(r);
  return rc;
}

/* --- the run ----------------------------------------------------------------------------- */

/* {"type":"data","kind":"input","data":<data>}: how an input enters the log. */
static ob_value *input_message(const ob_value *data) {
  return ob_msg_data(ob_cstring("input"), ob_ref((ob_value *)data), NULL);
}

/* ob_run_check_messages, and (known) ob_plan_check_known on the messages read. */
static size_t check_given(ob_plan *plan, const ob_value *inputs, const char *input_label,
                          int numbered, int known) {
  size_t before = plan->nerrors;
  ob_log *scratch = ob_log_new();
  ob_error err;
  for (size_t i = 0; i < ob_array_len(plan->context); i++)
    if (ob_log_append(scratch, ob_array_get(plan->context, i), &err) < 0)
      ob_plan_error(plan, NULL, "context[%zu]: %s", i, err.msg);
  for (size_t i = 0; inputs && i < ob_array_len(inputs); i++) {
    const ob_value *in = ob_array_get(inputs, i);
    if (ob_depth(in) > OB_JOURNAL_MAX_DEPTH) { /* as for a plan: its journal line could not be read back */
      char label[64];
      if (numbered)
        snprintf(label, sizeof label, " #%zu", i + 1);
      ob_plan_error(plan, NULL, "%s%s: nested %u levels deep: at most %d", input_label,
                    numbered ? label : "", (unsigned)ob_depth(in), OB_JOURNAL_MAX_DEPTH);
      continue;
    }
    ob_value *m = input_message(in);
    if (ob_log_append(scratch, m, &err) < 0) {
      if (numbered)
        ob_plan_error(plan, NULL, "%s #%zu: %s", input_label, i + 1, err.msg);
      else
        ob_plan_error(plan, NULL, "%s: %s", input_label, err.msg);
    }
    ob_unref(m);
  }
  if (known)
    ob_plan_check_known(plan, scratch, inputs ? ob_array_len(inputs) : 0, input_label);
  ob_log_free(scratch);
  return plan->nerrors - before;
}

size_t ob_run_check_messages(ob_plan *plan, const ob_value *inputs, const char *input_label,
                             int numbered) {
  return check_given(plan, inputs, input_label, numbered, 0);
}

ob_plan *ob_run_read_plan(const ob_engine *e, const ob_value *v, const ob_plan_source *src,
                          int probe) {
  ob_plan *p = ob_plan_read_within(v, src->name, probe, src->max_calls);
  p->root = src->root ? ob_xstrdup(src->root) : NULL;
  ob_plan_check_tools(p, &e->tools, ob_engine_has_latent(e));
  check_given(p, src->inputs, src->input_label, src->numbered, src->known_refs);
  ob_run_options count = {.max_calls = src->max_calls};
  ob_error err;
  if (ob_run_count_calls(p, &count, &err) != OB_OK)
    ob_plan_error(p, NULL, "%s", err.msg);
  return p;
}

ob_run *ob_run_alloc(ob_engine *e, ob_plan *plan, const ob_run_options *opt) {
  ob_run *r = calloc(1, sizeof *r);
  if (!r)
    abort();
  r->e = e;
  r->plan = plan;
  r->log = opt->log;
  if (!r->log) {
    r->log = ob_log_new();
    ob_log_keep_history(r->log, opt->time_travel);
    /* the plan's record, an output a call, its context's messages, the input's */
    ob_log_reserve(r->log, plan->ncalls + ob_array_len(plan->context) + 2);
  }
  r->journaled = ob_log_len(r->log); /* a shared log's older messages are journaled already */
  r->opt = *opt;
  r->scope = opt->journal_scope ? ob_xstrdup(opt->journal_scope) : NULL;
  const char *root = opt->plans_root ? opt->plans_root : plan->root;
  r->plans_root = root ? ob_xstrdup(root) : NULL;
  r->opt.plans_root = r->plans_root;
  r->always = opt->journal && ob_wal_mode(opt->journal) == OB_FSYNC_ALWAYS;
  ob_map_init(&r->schemas);
  /* on a cache line's start, so that each call's first 64 bytes are one line */
  r->calls = ob_xcalloc_aligned(plan->ncalls, sizeof *r->calls, 64);
  r->queue = ob_xcalloc(plan->ncalls, sizeof *r->queue);
  r->serial = ++e->run_serial;
  r->root = r; /* a delegated run's is set by its delegating call (ob_delegate.c) */
  r->btail = &r->blocked;
  r->next = e->runs;
  if (e->runs)
    e->runs->prevp = &r->next;
  r->prevp = &e->runs;
  e->runs = r;

  for (size_t i = 0; i < plan->ncalls; i++) {
    ob_crun *c = &r->calls[i];
    c->run = r;
    c->call = &plan->calls[i];
    c->pending = c->call->ndeps;
    c->co_slot = LUA_NOREF;
    c->tool = c->call->tool;
    c->detached = !c->call->has_output && c->tool && !c->tool->latent;
    if (!c->detached)
      r->nawaited++;
    else
      r->detached_unsettled++;
  }
  return r;
}

int ob_run_count_calls(const ob_plan *plan, const ob_run_options *opt, ob_error *err) {
  if (!opt->max_calls)
    return OB_OK;
  size_t used = opt->calls_used ? *opt->calls_used : 0;
  size_t n = plan->ncalls_all; /* a probe's whole plan */
  if (n > opt->max_calls - (used < opt->max_calls ? used : opt->max_calls)) {
    if (used)
      ob_error_set(err, OB_EINVAL, 0, "%s: its %zu calls would make %zu in all, more than "
                   "--max-calls %zu", plan->file, n, used + n, opt->max_calls);
    else
      ob_error_set(err, OB_EINVAL, 0, "the plan has %zu calls (instances counted), more than "
                   "--max-calls %zu", n, opt->max_calls);
    return OB_EINVAL;
  }
  if (opt->calls_used)
    *opt->calls_used += n;
  return OB_OK;
}

ob_run *ob_run_new(ob_engine *e, ob_plan *plan, const ob_value *plan_value,
                   const ob_value *inputs, const ob_run_options *opt, ob_error *err) {
  if (ob_run_count_calls(plan, opt, err) != OB_OK)
    return NULL;
  ob_run *r = ob_run_alloc(e, plan, opt);
  ob_value *pm = ob_msg_plan(plan_value, plan->file);
  long rc = ob_run_append(r, pm, err);
  ob_unref(pm);
  for (size_t i = 0; rc >= 0 && opt->pre_context && i < ob_array_len(opt->pre_context); i++)
    rc = ob_run_append(r, ob_array_get(opt->pre_context, i), err);
  for (size_t i = 0; rc >= 0 && i < ob_array_len(plan->context); i++) {
    ob_error e2;
    if ((rc = ob_run_append(r, ob_array_get(plan->context, i), &e2)) < 0)
      ob_error_set(err, (int)rc, i, "%s: context[%zu]: %s", plan->file, i, e2.msg);
  }
  for (size_t i = 0; rc >= 0 && inputs && i < ob_array_len(inputs); i++) {
    ob_value *m = input_message(ob_array_get(inputs, i));
    ob_error e2;
    if ((rc = ob_run_append(r, m, &e2)) < 0)
      ob_error_set(err, (int)rc, i, "--input #%zu: %s", i + 1, e2.msg);
    ob_unref(m);
  }
  if (rc < 0) {
    ob_run_free(r);
    return NULL;
  }
  ob_record_run(r);
  return r;
}

static void journal_prepare(uv_prepare_t *p) { ob_record_flush(p->data); }
static void free_prepare(uv_handle_t *h) { free(h); }

void ob_run_start(ob_run *r) {
  r->t0 = uv_hrtime();
  if (r->opt.journal && !r->scope && (r->jprep = malloc(sizeof *r->jprep))) {
    uv_prepare_init(r->e->loop, r->jprep); /* the loop is about to wait: the file has it all */
    r->jprep->data = r;
    uv_prepare_start(r->jprep, journal_prepare);
    uv_unref((uv_handle_t *)r->jprep);
  }
  if (r->e->watch)
    ob_watch_arm(r->e->watch, ob_run_slice_limit(r));
  for (size_t i = 0; i < r->nreruns; i++) {
    ob_run_emit_note(r, "rerun", r->reruns[i].call, "%s", r->reruns[i].text);
    free(r->reruns[i].text);
  }
  free(r->reruns);
  r->reruns = NULL;
  r->nreruns = 0;
  if (r->settled_awaited == r->nawaited && !r->finished) { /* nothing to await (or resumed) */
    r->finished = 1;
    ob_run_emit(r, OB_EV_RUN_DONE, NULL, NULL);
    if (r->opt.on_done)
      r->opt.on_done(r, r->opt.ud);
  }
  for (size_t i = 0; i < r->plan->ncalls; i++)
    if (r->calls[i].pending == 0 && r->calls[i].state == OB_CALL_WAITING)
      ob_crun_enqueue(r, &r->calls[i]);
  ob_run_pump(r);
}

void ob_run_detach_journal(ob_engine *e, ob_wal *w) {
  for (ob_run *r = e->runs; r; r = r->next) {
    if (r->opt.journal != w)
      continue;
    ob_record_flush(r);
    if (r->jprep)
      uv_close((uv_handle_t *)r->jprep, free_prepare);
    r->jprep = NULL;
    r->opt.journal = NULL;
    r->always = 0;
    r->hold_seq = 0;
  }
}

/* --- delegation through the loop ----------------------------------------------------- */

/* The most delegation steps (a delegated run started, an outcome delivered) a
 * tree of runs takes in one turn of the loop (one millisecond of its clock, when
 * turns are quicker): a plan that delegates to itself four times over has 4^k
 * runs to start at depth k, and the loop must still see a signal or a timer
 * between them. The rest wait for the next turn, in order. */
#define OB_RUN_KICKS 256

static void kick_fire(uv_idle_t *h) {
  ob_run *r = h->data, *root = r->root;
  uint64_t now = uv_now(r->e->loop);
  if (root->kick_ms != now) {
    root->kick_ms = now;
    root->kick_n = 0;
  }
  size_t n = r->nkicks, left = OB_RUN_KICKS - (root->kick_n < OB_RUN_KICKS ? root->kick_n
                                                                           : OB_RUN_KICKS);
  if (n > left)
    n = left; /* the idle handle stays on: the rest next turn */
  if (!n)
    return;
  root->kick_n += n;
  /* the calls asked for so far; what they ask for next waits for the next turn */
  size_t *list = ob_xmalloc(n * sizeof *list);
  memcpy(list, r->kicks, n * sizeof *list);
  memmove(r->kicks, r->kicks + n, (r->nkicks - n) * sizeof *list);
  r->nkicks -= n;
  if (!r->nkicks)
    uv_idle_stop(h);
  for (size_t i = 0; i < n && !r->cancelled; i++)
    ob_crun_delegate_step(&r->calls[list[i]]);
  free(list);
}

static void free_handle(uv_handle_t *h) { free(h); }

void ob_run_kick(ob_run *r, ob_crun *c) {
  if (!r->kick) {
    r->kick = ob_xmalloc(sizeof *r->kick);
    uv_idle_init(r->e->loop, r->kick);
    r->kick->data = r;
  }
  if (r->nkicks == r->capkicks) {
    r->capkicks = r->capkicks ? 2 * r->capkicks : 4;
    r->kicks = ob_xrealloc(r->kicks, r->capkicks * sizeof *r->kicks);
  }
  r->kicks[r->nkicks++] = (size_t)(c - r->calls);
  uv_idle_start(r->kick, kick_fire); /* the loop polls without waiting while it is on */
}

/* --- cancel and free, without recursion over the delegation depth ------------------- */

/* A run and the runs delegated from it, at any depth, in an array (breadth first):
 * an explicit worklist, so a chain of --max-depth runs needs no C stack. Runs
 * already cancelled, and what was delegated from them, are left out when
 * `live` (they were cancelled whole). */
static ob_run **run_tree(ob_run *r, int live, size_t *n) {
  size_t cap = 16, len = 0;
  ob_run **all = ob_xmalloc(cap * sizeof *all);
  all[len++] = r;
  for (size_t k = 0; k < len; k++) {
    ob_run *x = all[k];
    for (size_t i = 0; i < x->plan->ncalls; i++) {
      ob_run *sub = ob_crun_sub(&x->calls[i]);
      if (!sub || (live && sub->cancelled))
        continue;
      if (len == cap)
        all = ob_xrealloc(all, (cap *= 2) * sizeof *all);
      all[len++] = sub;
    }
  }
  *n = len;
  return all;
}

/* Cancels r alone: its delegated runs are cancelled already (or by the caller). */
static void cancel_one(ob_run *r) {
  r->cancelled = 1;
  ob_sleep_forget(r);
  if (r->kick)
    uv_idle_stop(r->kick);
  ob_run_unblock(r);
  for (size_t i = 0; i < r->plan->ncalls; i++) {
    ob_crun *c = &r->calls[i];
    ob_timeout_disarm(c);
    c->retry_wait = 0;
    if (c->state == OB_CALL_RUNNING)
      ob_crun_abandon(c); /* its luv handles closed (its delegated run is cancelled) */
    ob_crun_drop_coroutine(c);
    if (c->holds_slot) { /* given back to the runs of the tree that go on */
      c->holds_slot = 0;
      r->root->busy--;
    }
  }
}

void ob_run_cancel(ob_run *r) {
  if (r->cancelled)
    return; /* whole: what was delegated from it too */
  size_t n;
  ob_run **all = run_tree(r, 1, &n);
  for (size_t k = 0; k < n; k++)
    all[k]->cancelled = 1; /* first, so that abandoning a call cancels nothing twice */
  for (size_t k = 0; k < n; k++)
    cancel_one(all[k]);
  free(all);
  if (!r->root->cancelled) /* a delegated run, abandoned: its slots go to the others */
    ob_run_wake(r->root);
}

/* Frees r alone: the runs delegated from it are freed already. */
static void free_one(ob_run *r) {
  for (size_t k = 0; k < r->plan->ncalls; k++) {
    ob_crun *c = &r->calls[k];
    if (c->del) {
      ob_cdel_clear(c->del); /* its run is gone: its plan and messages */
      free(c->del);
    }
    ob_unref(c->raw);
    ob_unref(c->params);
  }
  if (r->parent)
    r->parent->del->run = NULL;
  for (size_t i = 0; i < r->nreruns; i++) /* never started */
    free(r->reruns[i].text);
  free(r->reruns);
  ob_record_flush(r);
  if (r->jprep)
    uv_close((uv_handle_t *)r->jprep, free_prepare);
  r->jprep = NULL;
  if (r->kick)
    uv_close((uv_handle_t *)r->kick, free_handle);
  free(r->kicks);
  free(r->scope);
  free(r->plans_root);
  *r->prevp = r->next;
  if (r->next)
    r->next->prevp = r->prevp;
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&r->schemas, &i, &me))
    ob_schema_free(me->val);
  ob_map_free(&r->schemas);
  if (!r->opt.log)
    ob_log_free(r->log);
  free(r->calls);
  free(r->queue);
  free(r);
}

/* The processes the tools of r's tree spawned that still run (or their groups) get
 * SIGKILL: the run has ended, and nothing it started outlives it, whether the
 * engine goes on (obelus mcp, a worker, the Lua module) or not. The attempts
 * abandoned killed theirs already; these are the children of attempts that ended
 * with the tool's return (runtime.lua's kill_children(run)). */
static void kill_children(ob_run *r) {
  ob_engine *e = r->e;
  lua_State *L = e->L;
  if (!L || e->prim_ref == LUA_NOREF)
    return;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->prim_ref);
  if (lua_getfield(L, -1, "kill_children") == LUA_TFUNCTION) {
    lua_pushinteger(L, (lua_Integer)r->serial);
    if (ob_engine_pcall(L, 1, 0) != LUA_OK)
      ob_engine_note(r->e, "children", NULL, "killing the tools' children: %s",
                     lua_tostring(L, -1)); /* the engine's: the run is being freed */
  }
  lua_settop(L, top);
}

void ob_run_free(ob_run *r) {
  if (!r)
    return;
  ob_engine *e = r->e;
  ob_run_cancel(r);
  if (r->root == r)
    kill_children(r);
  size_t n;
  ob_run **all = run_tree(r, 0, &n);
  while (n) /* the deepest first: a plan outlives its run, a run its delegated ones */
    free_one(all[--n]);
  free(all);
  if (e->live_calls == 0) /* no call is left waiting: the collector works as usual */
    ob_gc_calls_gone(e);
}

ob_log *ob_run_log(ob_run *r) { return r->log; }
int ob_run_finished(const ob_run *r) { return r->finished; }
int ob_run_failed(const ob_run *r) { return r->failed; }
size_t ob_run_detached_pending(const ob_run *r) { return r->detached_unsettled; }
size_t ob_run_running(const ob_run *r) { return r->running; }
ob_call_state ob_run_call_state(const ob_run *r, size_t i) { return r->calls[i].state; }

size_t ob_run_fail_stalled(ob_run *r) {
  size_t n = 0;
  for (size_t i = 0; i < r->plan->ncalls; i++) {
    ob_crun *c = &r->calls[i];
    if (c->state != OB_CALL_RUNNING)
      continue;
    n++;
    ob_crun_fail(c, "runtime", "stalled: the tool waits for a callback that can no longer come "
                       "(nothing is pending on the loop)");
  }
  return n;
}

/* The output's key order is the plan's (ob_order.h): state objects are re-keyed as they
 * are read for it, so that it does not depend on the order parallel writes landed. */
typedef struct template_eval {
  ob_run *run;
  const char *inst;
  const ob_order *order;
} template_eval;

/* An output template's reference, read in inst's view; absent is null. As ob_log_eval,
 * knowing which part gave the value (its path places it in the order). */
static ob_value *eval_template(void *ud, const ob_value *text) {
  template_eval *t = ud;
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(ob_string_ptr(text), ob_string_len(text), OB_EXPR_INPUT, &e, &err) != OB_OK)
    return ob_null(); /* validation already reported it */
  ob_value *x = NULL;
  for (size_t a = 0; a < e.n && !x; a++)
    for (size_t k = 0; k < e.alts[a].n; k++) {
      const ob_reference *ref = &e.alts[a].refs[k];
      ob_unref(x);
      if (!(x = ob_log_read(t->run->log, ref->kind, t->inst, &ref->path, OB_LOG_NOW)))
        break;
      if (k + 1 == e.alts[a].n && !strcmp(ref->kind, "state"))
        x = ob_order_apply(t->order, ob_order_at(t->order, &ref->path), x);
    }
  ob_expr_free(&e);
  return x ? x : ob_null();
}

static ob_value *output_in(ob_run *r, const char *inst, const ob_order *order) {
  if (r->plan->output) {
    template_eval t = {r, inst, order};
    return ob_str_substitute(r->plan->output, eval_template, &t);
  }
  ob_path root = {0, NULL};
  ob_value *s = ob_log_read(r->log, "state", inst, &root, OB_LOG_NOW);
  return s ? ob_order_apply(order, 0, s) : ob_object();
}

ob_value *ob_run_output(ob_run *r) {
  ob_order *order = ob_order_new(r->plan);
  ob_value *o;
  if (!r->plan->ninstances) {
    o = output_in(r, NULL, order);
  } else {
    o = ob_object(); /* instance id -> that instance's result */
    for (size_t i = 0; i < r->plan->ninstances; i++) {
      const char *inst = r->plan->instances[i];
      o = ob_object_set(o, inst, strlen(inst), output_in(r, inst, order));
    }
  }
  ob_order_free(order);
  return o;
}
