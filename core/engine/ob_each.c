/* ob_each.c -- _each: a call run once per element of a list read at run time.
 *
 * A call with "_each": "†state.articles" waits for that list like any
 * reference (the plan adds it to the call's reads: ob_plan.h), and when it
 * starts, runs once per element. The copies are a plan of their own, made
 * here and run as a delegated run is (ob_delegate.c's steps: ob_cdel_*):
 *
 *   {"each": "<id>", "plan": [
 *      {"_tool": T, "_id": "<id>[0]", <params>, "_retry", "_timeout", "_instance",
 *       "_outputPath": "†state.r"}, ...]}
 *
 * Each copy's params are the call's, resolved (its references read now, once,
 * for all copies), with "†each.value" (or a path below it) replaced by the
 * element and "†each.index" by its index; any string beginning with † in what
 * was read is escaped (††), so that nothing read becomes a reference. The
 * copies wait for nothing and run concurrently: _eachConcurrency bounds them
 * (their run's own bound, opt.max_running), the tree's --concurrency too.
 * _retry, _timeout and _instance are each copy's; the call itself is never
 * retried nor timed (its copies were).
 *
 * When every copy has settled, the call settles as one call does: all done,
 * their results gathered in the list's order into an array, written once at
 * the call's _outputPath (its method, its || alternatives); a copy failed, the
 * call's error names it ("copy <id>[3] failed: ..."), handled by the call's
 * last || alternative when it has one. An empty list writes [] at once. A list
 * that is not an array fails the call at run time.
 *
 * The copies' run is journaled under the call's scope, like a delegated run:
 * its plan (so resume takes it up as it was, and re-runs only the copies that
 * had not completed), and each copy's start, settled and progress records.
 * Its events reach the listener of the call's run (ids "<id>[i]", ev.each the
 * call), so hosts, the trace and the report see every copy.
 *
 * Costs: per copy, a call object of the plan (its params shared with the
 * call's where no †each string or † text sits in them), its reading as a plan
 * call (the output path, the same for all, is parsed once), and a run's call;
 * the call's list and its resolved params are read once. Gathering walks the
 * copies' log once: each copy's output message holds its result (the copies'
 * document at that path is only the last one's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_doc.h"
#include "engine/ob_resume.h"
#include "engine/ob_sched.h"
#include "log/ob_msg.h"

/* A "†each..." string (checked by the plan: †each.index, or †each.value and a path below
 * it) for copy i of element elem: a new value. A path the element does not have is null. */
static ob_value *each_value(const ob_value *text, const ob_value *elem, size_t i) {
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(ob_string_ptr(text), ob_string_len(text), OB_EXPR_INPUT, &e, &err) != OB_OK)
    return ob_null(); /* not reached: the plan parsed it */
  const ob_path *p = &e.alts[0].refs[0].path;
  ob_value *v;
  if (p->n && !strcmp(p->segs[0].key, "index")) {
    v = ob_int((int64_t)i);
  } else {
    ob_path below = {p->n ? p->n - 1 : 0, p->n ? p->segs + 1 : NULL};
    const ob_value *x = ob_doc_get(elem, &below, below.n);
    v = x ? ob_str_escape(x) : ob_null();
  }
  ob_expr_free(&e);
  return v;
}

/* A param of the call (resolved) as copy i has it. */
static ob_value *copy_param(const ob_value *v, const ob_value *elem, size_t i) {
  switch (ob_typeof(v)) {
  case OB_STRING:
    if (ob_str_classify(ob_string_ptr(v), ob_string_len(v)) == OB_STR_EACH)
      return each_value(v, elem, i);
    return ob_str_escape(v);
  case OB_ARRAY: {
    ob_value *a = ob_array();
    int same = 1;
    for (size_t k = 0; k < ob_array_len(v); k++) {
      ob_value *x = copy_param(ob_array_get(v, k), elem, i);
      same &= x == ob_array_get(v, k);
      a = ob_array_push(a, x);
    }
    if (same) {
      ob_unref(a);
      return ob_ref((ob_value *)v);
    }
    return a;
  }
  case OB_OBJECT: {
    ob_value *o = ob_object(), *k, *x;
    int same = 1;
    ob_object_iter it;
    ob_object_iter_init(&it, v);
    while (ob_object_iter_next(&it, &k, &x)) {
      ob_value *y = copy_param(x, elem, i);
      same &= y == x;
      o = ob_object_setv(o, k, y);
    }
    if (same) {
      ob_unref(o);
      return ob_ref((ob_value *)v);
    }
    return o;
  }
  default: return ob_ref((ob_value *)v);
  }
}

/* Where every copy writes its result, in their run's own log (state.r). */
#define EACH_KEY "r"

/* The meta-properties a copy keeps as the call wrote them. */
static int copy_keeps(const char *key) {
  return !strcmp(key, "_tool") || !strcmp(key, "_delegate") || !strcmp(key, "_scopes") ||
         !strcmp(key, "_retry") || !strcmp(key, "_timeout") || !strcmp(key, "_instance");
}

/* The plan of the copies (see the top). */
static ob_value *copies_plan(const ob_crun *c, const ob_value *params, const ob_value *list) {
  const ob_call *call = c->call;
  size_t n = ob_array_len(list), idlen = strlen(call->id);
  ob_value *calls = ob_array();
  char *id = ob_xmalloc(idlen + 24);
  memcpy(id, call->id, idlen);
  ob_value *out_path = ob_cstring(OB_DAGGER "state." EACH_KEY);
  for (size_t i = 0; i < n; i++) {
    const ob_value *elem = ob_array_get(list, i);
    ob_value *o = ob_object(), *k, *v;
    ob_object_iter it;
    ob_object_iter_init(&it, params);
    while (ob_object_iter_next(&it, &k, &v)) {
      const char *key = ob_string_ptr(k);
      if (key[0] != '_')
        o = ob_object_setv(o, k, copy_param(v, elem, i));
      else if (copy_keeps(key))
        o = ob_object_setv(o, k, ob_ref(v));
    }
    int len = snprintf(id + idlen, 24, "[%zu]", i);
    o = ob_object_set(o, "_id", 3, ob_string(id, idlen + (size_t)len));
    if (call->instance && !ob_object_get(o, "_instance", 9)) /* an instance's call */
      o = ob_object_set(o, "_instance", 9, ob_cstring(call->instance));
    if (call->has_output) /* one path for all: the plan reads it once (its memo) */
      o = ob_object_set(o, "_outputPath", 11, ob_ref(out_path));
    calls = ob_array_push(calls, o);
  }
  free(id);
  ob_unref(out_path);
  ob_value *plan = ob_object();
  plan = ob_object_set(plan, "each", 4, ob_cstring(call->id));
  plan = ob_object_set(plan, "plan", 4, calls);
  return plan;
}

/* The copies' events, to the listener of the call's run: as the call's own are (its
 * run's time), said to be a copy's (ev.each). Their run's end is the call's business. */
static void copy_event(void *ud, const ob_event *ev) {
  ob_crun *c = ud;
  ob_run *r = c->run;
  if (!r->opt.on_event || ev->type == OB_EV_RUN_DONE)
    return;
  ob_event copy = *ev;
  copy.t_ms = ob_run_now_ms(r);
  copy.each = c->call;
  r->opt.on_event(r->opt.ud, &copy);
}

/* Every copy settled (their run finished): the call settles as one call would. */
static void each_done(ob_crun *c, ob_run *sub) {
  const ob_call *call = c->call;
  if (sub->failed) {
    ob_buf why;
    ob_buf_init(&why);
    const char *id, *e;
    if (ob_cdel_first_error(sub, &id, &e)) {
      if (ob_cdel_chained(sub, id)) /* a copy's plan failed: the deepest cause */
        ob_buf_add(&why, e, strlen(e));
      else
        ob_buf_addf(&why, "copy %s failed: %s", id, e);
    }
    if (!why.len)
      ob_buf_addf(&why, "a copy of %s failed", call->id);
    if (sub->limit_failed && (!call->has_output || call->output.n < 2))
      c->run->limit_failed = 1;
    ob_crun_tool_error(c, why.data, NULL); /* each copy had its attempts */
    ob_buf_free(&why);
    return;
  }
  if (!call->has_output) {
    ob_crun_settle(c, OB_CALL_DONE, NULL);
    return;
  }
  /* each copy's result: its output message at the copies' path, by the copy's place in
   * their plan (the log holds every one, whichever wrote last) */
  size_t n = sub->plan->ncalls;
  ob_value **got = ob_xcalloc(n ? n : 1, sizeof *got);
  for (size_t i = 0; i < ob_log_len(sub->log); i++) {
    const ob_msg *m = ob_log_at(sub->log, i);
    if (m->type != OB_MSG_OUTPUT || !m->call || !m->path ||
        strcmp(ob_string_ptr(m->path), EACH_KEY))
      continue;
    const ob_value *id = ob_object_get(m->call, "_id", 3);
    const ob_call *copy = id && ob_typeof(id) == OB_STRING
                              ? ob_map_get(&sub->plan->ids, ob_string_ptr(id), ob_string_len(id))
                              : NULL;
    if (copy)
      got[copy - sub->plan->calls] = m->value;
  }
  ob_value *out = ob_array();
  for (size_t i = 0; i < n; i++)
    out = ob_array_push(out, got[i] ? ob_ref(got[i]) : ob_null());
  free(got);
  ob_crun_write_alt(c, 0, out);
  ob_unref(out);
}

void ob_crun_each(ob_crun *c, ob_value *params, ob_value *list) {
  ob_run *r = c->run;
  ob_call *call = c->call;
  if (!ob_cdel_begin(c, 0)) {
    ob_unref(params);
    ob_unref(list);
    return;
  }
  ob_cdel *d = c->del;
  d->done = each_done;
  d->link_only = 1;
  if (ob_typeof(list) != OB_ARRAY) {
    ob_value *text = ob_object_get(call->raw, "_each", 5);
    char why[512];
    snprintf(why, sizeof why, "_each: %.400s is %s, not a list (an array)", ob_string_ptr(text),
             ob_type_name(ob_typeof(list)));
    ob_unref(params);
    ob_unref(list);
    ob_crun_fail(c, "runtime", why);
    return;
  }
  ob_buf scope;
  ob_buf_init(&scope);
  ob_cdel_scope(c, &scope);
  ob_resume *rs = r->opt.resume && ob_resume_has_run(r->opt.resume, scope.data) ? r->opt.resume
                                                                                 : NULL;
  if (!rs && !ob_array_len(list)) { /* no copy: [] at once */
    ob_buf_free(&scope);
    ob_unref(params);
    ob_unref(list);
    if (!call->has_output) {
      ob_crun_settle(c, OB_CALL_DONE, NULL);
      return;
    }
    ob_value *empty = ob_array();
    ob_crun_write_alt(c, 0, empty);
    ob_unref(empty);
    return;
  }
  size_t max = r->opt.max_calls, used = r->opt.calls_used ? *r->opt.calls_used : 0;
  size_t n = ob_array_len(list);
  if (!rs && max && n > max - (used < max ? used : max)) { /* before any copy is made */
    char why[200];
    snprintf(why, sizeof why, "_each: its %zu copies would make %zu calls in all, more than "
             "--max-calls %zu", n, used + n, max);
    ob_buf_free(&scope);
    ob_unref(params);
    ob_unref(list);
    if (!call->has_output || call->output.n < 2) /* no retry; a || alternative receives it */
      r->limit_failed = 1;
    ob_crun_tool_error(c, why, NULL);
    return;
  }
  /* their structs charged before they are made (a list of a million is refused as the
   * account fills, not where malloc fails) */
  if (!rs && !ob_cdel_charge(c, n, scope.len)) {
    ob_buf_free(&scope);
    ob_unref(params);
    ob_unref(list);
    return;
  }
  /* resumed: the copies as they were made, and their run goes on */
  d->value = rs ? ob_ref((ob_value *)ob_resume_part_plan(rs, scope.data))
                : copies_plan(c, params, list);
  ob_unref(params);
  ob_unref(list);
  d->plan = ob_plan_read_within(d->value, r->plan->file, 0, max ? (used < max ? max - used : 1) : 0);
  d->plan->root = r->plans_root ? ob_xstrdup(r->plans_root) : NULL;
  if (d->plan->nerrors || (rs && !d->plan->copies_of)) {
    ob_buf why;
    ob_buf_init(&why);
    ob_buf_addf(&why, "its copies cannot run: %s",
                d->plan->nerrors ? d->plan->errors[0] : "the journal's plan of them is not one");
    ob_buf_free(&scope);
    ob_crun_fail(c, "runtime", why.data);
    ob_buf_free(&why);
    return;
  }
  for (size_t i = 0; i < d->plan->ncalls; i++) { /* the call's tool (or plan) is theirs */
    d->plan->calls[i].tool = call->delegate ? NULL : call->tool;
    if (!call->delegate) /* by its real name, also when the call gave its API name */
      d->plan->calls[i].tool_name = call->tool_name;
  }
  if (rs && !ob_cdel_charge(c, d->plan->over_limit ? 0 : d->plan->ncalls, scope.len)) {
    ob_buf_free(&scope);
    return;
  }
  ob_run_options opt = ob_cdel_options(c, scope.data, NULL);
  opt.max_running = call->each_concurrency;
  opt.on_event = copy_event;
  ob_error err;
  ob_run *sub = rs ? ob_resume_run(r->e, d->plan, rs, scope.data, &opt, &err)
                   : ob_run_new(r->e, d->plan, d->value, NULL, &opt, &err);
  ob_cdel_launch(c, sub, scope.data, &err);
  ob_buf_free(&scope);
}
