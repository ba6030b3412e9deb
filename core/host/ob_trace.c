/* ob_trace.c -- a journal as a Chrome trace, OTLP/JSON spans, or the run the report
 * draws (ob_trace.h).
 *
 * One pass over the journal gathers every call, top-level or delegated (a call
 * is known by its scope and id): its attempts (start and retry/settled records,
 * with their "t"), its state, and its outputs and errors (the messages between
 * its last record and its settled one, in its scope). Each plan message (the top
 * one, and each delegated run's: the first of its scope's "msg" lines, again when a
 * retried delegation runs its plan again) gives its calls' params and tools, looked
 * up by id in a map made once per plan message; the top one, made an ob_plan, gives
 * the dependency graph the flow arrows and "deps" follow, and the calls' positions.
 * Then the calls are written out in the order they first appeared.
 *
 * For the run (OB_TRACE_RUN) each plan message's run also keeps its documents as
 * they are (an ob_log without history, fed the run's messages without their _call,
 * _log and _date: only what writes documents), so that when a call's first start
 * record comes, its references are read from them then: its params as it read them.
 * A call settled done whose only output is its own error, written by its last `||`
 * alternative (the engine's {"error", "tool", "call"}), was handled. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_hash.h"
#include "log/ob_journal.h"
#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "log/ob_log.h"
#include "plan/ob_plan.h"
#include "host/ob_trace.h"

typedef struct attempt {
  uint64_t start, end;
  unsigned n;
  char *error; /* a retried attempt's error */
  ob_value *progress; /* what it sent (obelus.emit): [{"t": us, "data": V}], or NULL */
} attempt;

/* A plan message of the journal: the top one, or one a delegated run (an _each call's
 * copies) wrote in its scope. */
typedef struct splan {
  ob_value *msg;      /* {"type":"plan",...} */
  const ob_value *calls; /* its list of calls (borrowed from msg), or NULL */
  ob_map ids;         /* a call's id (its _id, or "#<i>") -> its position in calls + 1 */
  int indexed;        /* ids made (when first asked) */
  ob_plan *plan;      /* read when a position is asked of a plan with "instances" */
  ob_log *log;        /* its run's documents as they are now (OB_TRACE_RUN), or NULL */
  struct splan *next; /* every one made, to be freed */
} splan;

typedef struct tcall {
  char *id, *scope; /* scope "" at the top */
  const char *tool, *instance;
  const ob_value *params; /* borrowed from the plan value, or NULL */
  ob_value *resolved;     /* params as its first attempt read them (OB_TRACE_RUN), or NULL */
  splan *sp;              /* the plan message it belongs to */
  attempt *at;
  size_t nat;
  const char *state;
  uint64_t settled;
  ob_value *outputs; /* array */
  char *error;
  long plan_index; /* a top-level call's position in the plan (ob_plan's calls), else -1 */
  long parent;     /* the index in calls of the call whose run it is, or -1 */
  char *node;      /* its graph node's id (ob_graph.h), once made */
  int tid, pid;
} tcall;

typedef struct pend {
  char *scope;
  ob_value *msg;
} pend;

typedef struct trace {
  ob_trace_format format;
  ob_value *plan_msg; /* {"type":"plan",...} */
  splan *top;         /* plan_msg's */
  splan *plans;       /* every splan made */
  ob_plan *plan;
  ob_map by_key; /* scope \x1f id -> index + 1 */
  tcall *calls;
  size_t ncalls;
  pend *pending;
  size_t npending;
  ob_map scope_plans; /* scope -> its latest plan message (splan *) */
  int exit;           /* the end record's, or -1 */
  uint64_t t0, t1;
} trace;

static char *key_of(const char *scope, const char *id) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%s\x1f%s", scope, id);
  return b.data;
}

static const char *str_of(const ob_value *o, const char *k) {
  const ob_value *v = o ? ob_object_get(o, k, strlen(k)) : NULL;
  return v && ob_typeof(v) == OB_STRING ? ob_string_ptr(v) : NULL;
}

static splan *splan_new(trace *t, const ob_value *msg) {
  splan *sp = ob_xcalloc(1, sizeof *sp);
  sp->msg = ob_ref((ob_value *)msg);
  const ob_value *p = ob_object_get(msg, "plan", 4);
  if (p && ob_typeof(p) == OB_OBJECT)
    p = ob_object_get(p, "plan", 4);
  sp->calls = p && ob_typeof(p) == OB_ARRAY ? p : NULL;
  ob_map_init(&sp->ids);
  if (t->format == OB_TRACE_RUN) {
    sp->log = ob_log_new();
    ob_log_keep_history(sp->log, 0); /* read as it is when each call starts */
  }
  sp->next = t->plans;
  t->plans = sp;
  return sp;
}

static void splan_free(splan *sp) {
  ob_unref(sp->msg);
  ob_map_free(&sp->ids);
  ob_plan_free(sp->plan);
  if (sp->log)
    ob_log_free(sp->log);
  free(sp);
}

/* The position in sp's calls of call id (its _id, or "#<i>"; an instance's copy
 * "<id>@<instance>" is its call's), or -1. The ids are mapped when first asked: once
 * per plan message, not a walk of the plan per call. */
static long position_of(splan *sp, const char *id) {
  if (!sp || !sp->calls)
    return -1;
  if (!sp->indexed) {
    sp->indexed = 1;
    for (size_t i = 0; i < ob_array_len(sp->calls); i++) {
      const char *cid = str_of(ob_array_get(sp->calls, i), "_id");
      char idx[32];
      if (!cid) {
        snprintf(idx, sizeof idx, "#%zu", i);
        cid = idx;
      }
      if (!ob_map_get(&sp->ids, cid, strlen(cid)))
        ob_map_put(&sp->ids, cid, strlen(cid), (void *)(uintptr_t)(i + 1));
    }
  }
  size_t k = (size_t)(uintptr_t)ob_map_get(&sp->ids, id, strlen(id));
  const char *at = strchr(id, '@');
  if (!k && at) /* a copy of a call without _instance, "<id>@<instance>" */
    k = (size_t)(uintptr_t)ob_map_get(&sp->ids, id, (size_t)(at - id));
  return (long)k - 1;
}

/* The call as written (in sp's plan) of call id, or NULL. */
static const ob_value *find_call(splan *sp, const char *id) {
  long k = position_of(sp, id);
  return k < 0 ? NULL : ob_array_get(sp->calls, (size_t)k);
}

/* The call known by scope and id, or NULL: never made here. */
static tcall *find_call_of(const trace *t, const char *scope, const char *id) {
  char *k = key_of(scope, id);
  size_t idx = (size_t)(uintptr_t)ob_map_get(&t->by_key, k, strlen(k));
  free(k);
  return idx ? &t->calls[idx - 1] : NULL;
}

/* The call that delegated the plan of scope ("a/b": call b of the plan call a
 * delegated), or NULL. */
static tcall *delegating_call(const trace *t, const char *scope) {
  char *ps = ob_xstrdup(scope);
  char *slash = strrchr(ps, '/');
  tcall *c;
  if (!slash) {
    c = find_call_of(t, "", ps);
  } else {
    *slash = '\0';
    c = find_call_of(t, ps, slash + 1);
  }
  free(ps);
  return c;
}

static tcall *call_of(trace *t, const char *scope, const char *id) {
  char *k = key_of(scope, id);
  size_t idx = (size_t)(uintptr_t)ob_map_get(&t->by_key, k, strlen(k));
  if (idx) {
    free(k);
    return &t->calls[idx - 1];
  }
  t->calls = ob_xrealloc(t->calls, (t->ncalls + 1) * sizeof *t->calls);
  tcall *c = &t->calls[t->ncalls++];
  memset(c, 0, sizeof *c);
  c->id = ob_xstrdup(id);
  c->scope = ob_xstrdup(scope);
  c->outputs = ob_array();
  c->plan_index = -1;
  c->parent = -1;
  c->state = "running";
  c->sp = *scope ? ob_map_get(&t->scope_plans, scope, strlen(scope)) : t->top;
  const ob_value *raw = find_call(c->sp, id);
  c->params = raw;
  c->tool = str_of(raw, "_tool");
  if (!c->tool && str_of(raw, "_delegate"))
    c->tool = "delegate";
  const char *at = strchr(c->id, '@');
  c->instance = at ? at + 1 : str_of(raw, "_instance");
  if (!*scope && t->plan) {
    ob_call *pc = ob_map_get(&t->plan->ids, id, strlen(id));
    if (pc) /* its position: an instance's copies share their call's index */
      c->plan_index = (long)(pc - t->plan->calls);
  }
  ob_map_put(&t->by_key, k, strlen(k), (void *)(uintptr_t)t->ncalls);
  free(k);
  return c;
}

static void note_time(trace *t, uint64_t at) {
  if (!at)
    return;
  if (!t->t0 || at < t->t0)
    t->t0 = at;
  if (at > t->t1)
    t->t1 = at;
}

/* --- what a call read, and an error a || alternative received -------------------------- */

typedef struct reading {
  ob_log *log;
  const char *instance;
} reading;

/* A reference's value in the log as it is (an absent one: null, as the engine passes it). */
static ob_value *read_ref(void *ud, const ob_value *text) {
  reading *r = ud;
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(ob_string_ptr(text), ob_string_len(text), OB_EXPR_INPUT, &e, &err) != OB_OK)
    return ob_null();
  ob_value *v = ob_log_eval(r->log, &e, r->instance, OB_LOG_NOW);
  ob_expr_free(&e);
  return v ? v : ob_null();
}

/* The call's params as it read them when its first attempt started: its references
 * resolved against its run's documents as they are now (the messages before its start
 * record), "††" literals unescaped, meta-properties as written (ob_params.c's rule). */
static ob_value *resolve_now(const tcall *c) {
  const ob_value *raw = c->params;
  if (!raw || ob_typeof(raw) != OB_OBJECT || !c->sp || !c->sp->log)
    return NULL;
  reading r = {c->sp->log, c->instance};
  ob_value *o = ob_object(), *k, *x;
  ob_object_iter it;
  ob_object_iter_init(&it, raw);
  int same = 1;
  while (ob_object_iter_next(&it, &k, &x)) {
    ob_value *y = ob_string_ptr(k)[0] == '_' ? ob_ref(x) : ob_str_substitute(x, read_ref, &r);
    same &= y == x;
    o = ob_object_setv(o, k, y);
  }
  if (same) { /* nothing to resolve: the call as written, shared */
    ob_unref(o);
    return ob_ref((ob_value *)raw);
  }
  return o;
}

/* When msg (an output message of call c, which settled done) is the error of c that its
 * last `||` alternative received (ob_write.c's ob_crun_tool_error: {"error", "tool",
 * "call"} written at that alternative's path), the error's text; else NULL. A tool that
 * chose that branch itself with that very object is taken for one too. */
static const char *handled_error(const tcall *c, const ob_value *msg) {
  const char *out = str_of(c->params, "_outputPath"), *kind = str_of(msg, "kind");
  const char *path = str_of(msg, "_path");
  const ob_value *data = ob_object_get(msg, "data", 4);
  if (!out || !strstr(out, "||") || !kind || !path || !data)
    return NULL;
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(out, strlen(out), OB_EXPR_OUTPUT, &e, &err) != OB_OK)
    return NULL;
  const char *text = NULL;
  const ob_alt *last = &e.alts[e.n - 1];
  ob_buf b;
  ob_buf_init(&b);
  for (size_t r = 0; e.n >= 2 && r < last->n && !text; r++) {
    const ob_reference *ref = &last->refs[r];
    b.len = 0;
    ob_path_format(&b, &ref->path);
    if (strcmp(ref->kind, kind) || strcmp(b.data ? b.data : "", path))
      continue;
    const ob_value *v = data; /* the value nested under its path */
    for (size_t k = 0; v && k < ref->path.n; k++)
      v = ob_typeof(v) == OB_OBJECT
              ? ob_object_get(v, ref->path.segs[k].key, ref->path.segs[k].keylen)
              : NULL;
    if (!v || ob_typeof(v) != OB_OBJECT || ob_object_len(v) != 3)
      continue;
    const char *m = str_of(v, "error"), *tool = str_of(v, "tool"), *id = str_of(v, "call");
    if (m && tool && id && !strcmp(id, c->id))
      text = m;
  }
  ob_buf_free(&b);
  ob_expr_free(&e);
  return text;
}

/* The messages of scope that came since the call's last record: its outputs and
 * errors. A call settled done whose only output is its error, received by its last ||
 * alternative, was handled. */
static void take_pending(trace *t, tcall *c) {
  size_t keep = 0;
  int others = 0;
  char *handled = NULL;
  for (size_t i = 0; i < t->npending; i++) {
    pend *p = &t->pending[i];
    if (strcmp(p->scope, c->scope)) {
      t->pending[keep++] = *p;
      continue;
    }
    const ob_value *kind = ob_object_get(p->msg, "kind", 4);
    const ob_value *data = ob_object_get(p->msg, "data", 4);
    if (kind && ob_typeof(kind) == OB_STRING && !strcmp(ob_string_ptr(kind), "error")) {
      const char *e = str_of(data, "error");
      free(c->error);
      c->error = ob_xstrdup(e ? e : "error");
    } else if (data) {
      c->outputs = ob_array_push(c->outputs, ob_ref((ob_value *)data));
      const char *h = !strcmp(c->state, "done") ? handled_error(c, p->msg) : NULL;
      if (h && !handled)
        handled = ob_xstrdup(h);
      else if (!h)
        others = 1;
    }
    free(p->scope);
    ob_unref(p->msg);
  }
  t->npending = keep;
  if (handled && !others) {
    c->state = "handled";
    free(c->error);
    c->error = handled;
  } else {
    free(handled);
  }
}

/* A message of scope's run (plan message aside): its documents take it in. */
static void log_message(trace *t, const char *scope, const ob_value *m) {
  splan *sp = *scope ? ob_map_get(&t->scope_plans, scope, strlen(scope)) : t->top;
  if (!sp || !sp->log)
    return;
  /* what writes the documents only: a call's copy (_call), its run's messages (_log) and
   * the date would be held by the log for nothing */
  ob_value *slim = ob_object(), *k, *x;
  ob_object_iter it;
  ob_object_iter_init(&it, m);
  while (ob_object_iter_next(&it, &k, &x)) {
    const char *name = ob_string_ptr(k);
    if (strcmp(name, "_call") && strcmp(name, "_log") && strcmp(name, "_date"))
      slim = ob_object_setv(slim, k, ob_ref(x));
  }
  ob_error err; /* one its log refuses changes nothing: the run had refused it too */
  ob_log_append(sp->log, slim, &err);
  ob_unref(slim);
}

static int each_line(void *ud, const ob_journal_line *l, ob_error *err) {
  trace *t = ud;
  const ob_value *v = l->value;
  (void)err;
  if (ob_typeof(v) != OB_OBJECT)
    return OB_OK;
  if (!l->is_record) {
    if (!t->plan_msg) {
      t->plan_msg = ob_ref((ob_value *)v);
      t->top = splan_new(t, v);
      log_message(t, "", v);
      return OB_OK;
    }
    log_message(t, "", v);
    t->pending = ob_xrealloc(t->pending, (t->npending + 1) * sizeof *t->pending);
    t->pending[t->npending++] = (pend){ob_xstrdup(""), ob_ref((ob_value *)v)};
    return OB_OK;
  }
  ob_jrec rec;
  ob_jrec_parse(v, &rec, NULL); /* a record: l->is_record */
  const char *scope = rec.scope_path ? rec.scope_path : "";
  if (rec.kind == OB_JREC_MSG) {
    const ob_value *m = rec.msg;
    if (!m || ob_typeof(m) != OB_OBJECT)
      return OB_OK;
    const char *type = str_of(m, "type");
    if (type && !strcmp(type, "plan")) { /* the run (again: a retried delegation) */
      splan *sp = splan_new(t, m);
      ob_map_put(&t->scope_plans, scope, strlen(scope), sp);
      log_message(t, scope, m);
      return OB_OK;
    }
    log_message(t, scope, m);
    t->pending = ob_xrealloc(t->pending, (t->npending + 1) * sizeof *t->pending);
    t->pending[t->npending++] = (pend){ob_xstrdup(scope), ob_ref((ob_value *)m)};
    return OB_OK;
  }
  if (rec.kind == OB_JREC_RUN || rec.kind == OB_JREC_RESUME) { /* what came before: context, input */
    size_t keep = 0;
    for (size_t i = 0; i < t->npending; i++) {
      if (strcmp(t->pending[i].scope, scope)) {
        t->pending[keep++] = t->pending[i];
        continue;
      }
      free(t->pending[i].scope);
      ob_unref(t->pending[i].msg);
    }
    t->npending = keep;
    return OB_OK;
  }
  if (rec.kind == OB_JREC_END) {
    if (!*scope && rec.has_exit)
      t->exit = (int)rec.exit;
    return OB_OK;
  }
  const char *id = rec.id;
  if (!id)
    return OB_OK;
  uint64_t at = rec.t_us;
  note_time(t, at);
  tcall *c = call_of(t, scope, id);
  if (rec.kind == OB_JREC_START) {
    unsigned n = rec.has_attempt && rec.attempt > 0 ? (unsigned)rec.attempt : 0;
    if (!c->nat && !c->resolved)
      c->resolved = resolve_now(c); /* what its run's documents hold now */
    c->at = ob_xrealloc(c->at, (c->nat + 1) * sizeof *c->at);
    c->at[c->nat++] = (attempt){at, 0, n, NULL, NULL};
    c->state = "running";
  } else if (rec.kind == OB_JREC_PROGRESS && c->nat && rec.data) {
    attempt *a = &c->at[c->nat - 1]; /* sent while its attempt ran: the latest */
    ob_value *p = ob_object_set(ob_object(), "t", 1, ob_int((int64_t)at));
    p = ob_object_set(p, "data", 4, ob_ref((ob_value *)rec.data));
    a->progress = ob_array_push(a->progress ? a->progress : ob_array(), p);
  } else if (rec.kind == OB_JREC_RETRY && c->nat) {
    attempt *a = &c->at[c->nat - 1];
    a->end = at;
    const char *e = rec.error;
    a->error = ob_xstrdup(e ? e : "failed");
  } else if (rec.kind == OB_JREC_SETTLED) {
    if (c->nat && !c->at[c->nat - 1].end)
      c->at[c->nat - 1].end = at;
    const char *st = rec.state;
    c->state = !st ? "done" : !strcmp(st, "failed") ? "failed" : !strcmp(st, "skipped") ? "skipped" : "done";
    c->settled = at;
    take_pending(t, c);
  }
  return OB_OK;
}

static void trace_free(trace *t) {
  for (size_t i = 0; i < t->ncalls; i++) {
    tcall *c = &t->calls[i];
    for (size_t k = 0; k < c->nat; k++) {
      free(c->at[k].error);
      ob_unref(c->at[k].progress);
    }
    free(c->at);
    free(c->id);
    free(c->scope);
    free(c->error);
    free(c->node);
    ob_unref(c->resolved);
    ob_unref(c->outputs);
  }
  free(t->calls);
  for (size_t i = 0; i < t->npending; i++) {
    free(t->pending[i].scope);
    ob_unref(t->pending[i].msg);
  }
  free(t->pending);
  while (t->plans) {
    splan *next = t->plans->next;
    splan_free(t->plans);
    t->plans = next;
  }
  ob_map_free(&t->scope_plans);
  ob_map_free(&t->by_key);
  ob_plan_free(t->plan);
  ob_unref(t->plan_msg);
}

/* --- Chrome trace events ----------------------------------------------------------------- */

static uint64_t rel(const trace *t, uint64_t at) { return at && at >= t->t0 ? at - t->t0 : 0; }

static ob_value *call_name(const tcall *c) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%s%s%s (%s)", c->scope, *c->scope ? " \xE2\x80\xBA " : "", c->id,
              c->tool ? c->tool : "?");
  ob_value *v = ob_string(b.data, b.len);
  ob_buf_free(&b);
  return v;
}

/* A call's outputs: the one value, or the list when it wrote several. */
static ob_value *outputs_value(const tcall *c) {
  size_t n = ob_array_len(c->outputs);
  return n == 1 ? ob_ref(ob_array_get(c->outputs, 0)) : ob_ref(c->outputs);
}

static ob_value *meta_event(const char *what, int pid, int tid, const char *name, int sort) {
  ob_value *e = ob_object();
  e = ob_object_set(e, "name", 4, ob_cstring(what));
  e = ob_object_set(e, "ph", 2, ob_cstring("M"));
  e = ob_object_set(e, "pid", 3, ob_int(pid));
  if (tid >= 0)
    e = ob_object_set(e, "tid", 3, ob_int(tid));
  ob_value *args = ob_object();
  if (name)
    args = ob_object_set(args, "name", 4, ob_cstring(name));
  else
    args = ob_object_set(args, "sort_index", 10, ob_int(sort));
  return ob_object_set(e, "args", 4, args);
}

static ob_value *chrome(trace *t) {
  ob_value *ev = ob_array();
  /* a process per instance (the global calls and delegated ones under their root's) */
  ob_map pids;
  ob_map_init(&pids);
  int npids = 0;
  const char *file = str_of(t->plan_msg, "file");
  for (size_t i = 0; i < t->ncalls; i++) {
    tcall *c = &t->calls[i];
    const char *inst = c->instance;
    if (*c->scope) { /* under the top-level call that delegated */
      char root[256];
      snprintf(root, sizeof root, "%s", c->scope);
      root[strcspn(root, "/")] = '\0';
      const tcall *top = find_call_of(t, "", root);
      inst = top ? top->instance : NULL;
    }
    const char *pk = inst ? inst : "";
    int pid = (int)(uintptr_t)ob_map_get(&pids, pk, strlen(pk));
    if (!pid) {
      pid = ++npids;
      ob_map_put(&pids, pk, strlen(pk), (void *)(uintptr_t)pid);
      char name[300];
      if (inst)
        snprintf(name, sizeof name, "instance %s", inst);
      else
        snprintf(name, sizeof name, "plan %s", file ? file : "");
      ev = ob_array_push(ev, meta_event("process_name", pid, -1, name, 0));
      ev = ob_array_push(ev, meta_event("process_sort_index", pid, -1, NULL, pid));
    }
    c->pid = pid;
    c->tid = (int)i + 1;
    ob_value *tn = call_name(c);
    ev = ob_array_push(ev, meta_event("thread_name", pid, c->tid, ob_string_ptr(tn), 0));
    ob_unref(tn);
    ev = ob_array_push(ev, meta_event("thread_sort_index", pid, c->tid, NULL, c->tid));
  }
  ob_map_free(&pids);
  for (size_t i = 0; i < t->ncalls; i++) {
    tcall *c = &t->calls[i];
    for (size_t k = 0; k < c->nat; k++) {
      attempt *a = &c->at[k];
      int last = k + 1 == c->nat;
      uint64_t end = a->end ? a->end : t->t1;
      ob_value *args = ob_object();
      args = ob_object_set(args, "call", 4, ob_cstring(c->id));
      if (*c->scope)
        args = ob_object_set(args, "scope", 5, ob_cstring(c->scope));
      args = ob_object_set(args, "tool", 4, ob_cstring(c->tool ? c->tool : "?"));
      args = ob_object_set(args, "attempt", 7, ob_int(a->n ? a->n : (int64_t)k + 1));
      args = ob_object_set(args, "state", 5, ob_cstring(last ? c->state : "retried"));
      if (c->params)
        args = ob_object_set(args, "params", 6, ob_ref((ob_value *)c->params));
      if (last && ob_array_len(c->outputs))
        args = ob_object_set(args, "output", 6, outputs_value(c));
      const char *err = last ? c->error : a->error;
      if (err)
        args = ob_object_set(args, "error", 5, ob_cstring(err));
      ob_value *e = ob_object();
      e = ob_object_set(e, "name", 4, call_name(c));
      e = ob_object_set(e, "cat", 3, ob_cstring(last && !strcmp(c->state, "failed") ? "failed" : "call"));
      e = ob_object_set(e, "ph", 2, ob_cstring("X"));
      e = ob_object_set(e, "ts", 2, ob_int((int64_t)rel(t, a->start)));
      e = ob_object_set(e, "dur", 3, ob_int((int64_t)(end > a->start ? end - a->start : 1)));
      e = ob_object_set(e, "pid", 3, ob_int(c->pid));
      e = ob_object_set(e, "tid", 3, ob_int(c->tid));
      e = ob_object_set(e, "args", 4, args);
      ev = ob_array_push(ev, e);
      for (size_t j = 0; a->progress && j < ob_array_len(a->progress); j++) {
        const ob_value *p = ob_array_get(a->progress, j); /* what it sent: an instant */
        ob_value *pe = ob_object();
        pe = ob_object_set(pe, "name", 4, ob_cstring("progress"));
        pe = ob_object_set(pe, "cat", 3, ob_cstring("progress"));
        pe = ob_object_set(pe, "ph", 2, ob_cstring("i"));
        pe = ob_object_set(pe, "s", 1, ob_cstring("t"));
        pe = ob_object_set(pe, "ts", 2,
                           ob_int((int64_t)rel(t, (uint64_t)ob_int_value(ob_object_get(p, "t", 1)))));
        pe = ob_object_set(pe, "pid", 3, ob_int(c->pid));
        pe = ob_object_set(pe, "tid", 3, ob_int(c->tid));
        ob_value *pa = ob_object_set(ob_object(), "call", 4, ob_cstring(c->id));
        pa = ob_object_set(pa, "attempt", 7, ob_int((int64_t)(a->n ? a->n : k + 1)));
        pa = ob_object_set(pa, "data", 4, ob_ref(ob_object_get(p, "data", 4)));
        pe = ob_object_set(pe, "args", 4, pa);
        ev = ob_array_push(ev, pe);
      }
    }
    if (!c->nat) { /* skipped, or settled without running: a mark */
      ob_value *e = ob_object();
      e = ob_object_set(e, "name", 4, call_name(c));
      e = ob_object_set(e, "cat", 3, ob_cstring(c->state));
      e = ob_object_set(e, "ph", 2, ob_cstring("i"));
      e = ob_object_set(e, "s", 1, ob_cstring("t"));
      e = ob_object_set(e, "ts", 2, ob_int((int64_t)rel(t, c->settled)));
      e = ob_object_set(e, "pid", 3, ob_int(c->pid));
      e = ob_object_set(e, "tid", 3, ob_int(c->tid));
      ob_value *args = ob_object_set(ob_object(), "state", 5, ob_cstring(c->state));
      if (c->error)
        args = ob_object_set(args, "error", 5, ob_cstring(c->error));
      e = ob_object_set(e, "args", 4, args);
      ev = ob_array_push(ev, e);
    }
  }
  /* flow arrows: from the end of each writer to the start of each reader */
  int flow = 0;
  for (size_t i = 0; t->plan && i < t->ncalls; i++) {
    tcall *r = &t->calls[i];
    if (r->plan_index < 0 || !r->nat)
      continue;
    const ob_call *pc = &t->plan->calls[r->plan_index];
    for (size_t d = 0; d < pc->ndeps; d++) {
      tcall *w = find_call_of(t, "", t->plan->calls[pc->deps[d]].id);
      if (!w || !w->nat)
        continue;
      attempt *wa = &w->at[w->nat - 1];
      uint64_t wend = rel(t, wa->end ? wa->end : t->t1);
      uint64_t wts = wend > rel(t, wa->start) ? wend - 1 : rel(t, wa->start);
      flow++;
      for (int side = 0; side < 2; side++) {
        ob_value *e = ob_object();
        e = ob_object_set(e, "name", 4, ob_cstring("reads"));
        e = ob_object_set(e, "cat", 3, ob_cstring("data"));
        e = ob_object_set(e, "ph", 2, ob_cstring(side ? "f" : "s"));
        if (side)
          e = ob_object_set(e, "bp", 2, ob_cstring("e"));
        e = ob_object_set(e, "id", 2, ob_int(flow));
        e = ob_object_set(e, "ts", 2, ob_int((int64_t)(side ? rel(t, r->at[0].start) : wts)));
        e = ob_object_set(e, "pid", 3, ob_int(side ? r->pid : w->pid));
        e = ob_object_set(e, "tid", 3, ob_int(side ? r->tid : w->tid));
        ev = ob_array_push(ev, e);
      }
    }
  }
  ob_value *o = ob_object_set(ob_object(), "traceEvents", 11, ev);
  o = ob_object_set(o, "displayTimeUnit", 15, ob_cstring("ms"));
  ob_value *other = ob_object_set(ob_object(), "plan", 4, ob_cstring(file ? file : ""));
  if (t->exit >= 0)
    other = ob_object_set(other, "exit", 4, ob_int(t->exit));
  return ob_object_set(o, "otherData", 9, other);
}

/* --- OTLP/JSON ------------------------------------------------------------------------------ */

static ob_value *hex_id(uint64_t seed, const char *s, int words) {
  char out[33];
  uint64_t h = ob_fnv1a64_more(seed, s, strlen(s));
  snprintf(out, sizeof out, "%016" PRIx64, h);
  if (words == 2) {
    uint64_t h2 = ob_fnv1a64_more(h ^ 0x9e3779b97f4a7c15ull, s, strlen(s));
    snprintf(out + 16, sizeof out - 16, "%016" PRIx64, h2);
  }
  return ob_cstring(out);
}

static ob_value *nanos(uint64_t us) {
  char b[32];
  snprintf(b, sizeof b, "%" PRIu64 "000", us);
  return ob_cstring(b);
}

static ob_value *attr(ob_value *list, const char *key, ob_value *typed_value) {
  ob_value *a = ob_object_set(ob_object(), "key", 3, ob_cstring(key));
  return ob_array_push(list, ob_object_set(a, "value", 5, typed_value));
}

static ob_value *sval(const char *s) {
  return ob_object_set(ob_object(), "stringValue", 11, ob_cstring(s));
}

static ob_value *jval(const ob_value *v) {
  char *text = ob_json_print(v, OB_JSON_COMPACT, NULL);
  ob_value *s = sval(text);
  free(text);
  return s;
}

static ob_value *ival(int64_t n) {
  char b[32];
  snprintf(b, sizeof b, "%" PRId64, n);
  return ob_object_set(ob_object(), "intValue", 8, ob_cstring(b)); /* int64: a string in JSON */
}

static ob_value *span_id(const trace *t, const char *scope, const char *id, size_t nth) {
  char buf[600];
  snprintf(buf, sizeof buf, "%s\x1f%s\x1f%zu", scope, id, nth);
  return hex_id(t->t0, buf, 1);
}

static ob_value *otlp(trace *t) {
  const char *file = str_of(t->plan_msg, "file");
  char seed[512];
  snprintf(seed, sizeof seed, "%s\x1f%" PRIu64, file ? file : "", t->t0);
  ob_value *trace_id = hex_id(0, seed, 2);
  ob_value *run_id = hex_id(1, seed, 1);
  ob_value *spans = ob_array();
  ob_value *run = ob_object();
  run = ob_object_set(run, "traceId", 7, ob_ref(trace_id));
  run = ob_object_set(run, "spanId", 6, ob_ref(run_id));
  char name[300];
  snprintf(name, sizeof name, "run %s", file ? file : "plan");
  run = ob_object_set(run, "name", 4, ob_cstring(name));
  run = ob_object_set(run, "kind", 4, ob_int(1)); /* SPAN_KIND_INTERNAL */
  run = ob_object_set(run, "startTimeUnixNano", 17, nanos(t->t0));
  run = ob_object_set(run, "endTimeUnixNano", 15, nanos(t->t1));
  ob_value *ra = attr(ob_array(), "obelus.plan.file", sval(file ? file : ""));
  if (t->exit >= 0)
    ra = attr(ra, "obelus.exit", ival(t->exit));
  run = ob_object_set(run, "attributes", 10, ra);
  run = ob_object_set(run, "status", 6,
                      ob_object_set(ob_object(), "code", 4, ob_int(t->exit > 0 ? 2 : t->exit == 0 ? 1 : 0)));
  spans = ob_array_push(spans, run);
  for (size_t i = 0; i < t->ncalls; i++) {
    tcall *c = &t->calls[i];
    ob_value *parent = ob_ref(run_id);
    if (*c->scope) { /* the delegating call's last attempt */
      const tcall *pc = delegating_call(t, c->scope);
      if (pc) {
        ob_unref(parent);
        parent = span_id(t, pc->scope, pc->id, pc->nat ? pc->nat : 1);
      }
    }
    size_t n = c->nat ? c->nat : 1;
    for (size_t k = 0; k < n; k++) {
      attempt *a = c->nat ? &c->at[k] : NULL;
      int last = k + 1 == n;
      uint64_t start = a ? a->start : c->settled, end = a ? (a->end ? a->end : t->t1) : c->settled;
      ob_value *s = ob_object();
      s = ob_object_set(s, "traceId", 7, ob_ref(trace_id));
      s = ob_object_set(s, "spanId", 6, span_id(t, c->scope, c->id, k + 1));
      s = ob_object_set(s, "parentSpanId", 12, ob_ref(parent));
      s = ob_object_set(s, "name", 4, call_name(c));
      s = ob_object_set(s, "kind", 4, ob_int(1));
      s = ob_object_set(s, "startTimeUnixNano", 17, nanos(start));
      s = ob_object_set(s, "endTimeUnixNano", 15, nanos(end >= start ? end : start));
      ob_value *at = attr(ob_array(), "obelus.call.id", sval(c->id));
      at = attr(at, "obelus.call.tool", sval(c->tool ? c->tool : "?"));
      at = attr(at, "obelus.call.attempt", ival((int64_t)(a && a->n ? a->n : k + 1)));
      at = attr(at, "obelus.call.state", sval(last ? c->state : "retried"));
      if (c->instance)
        at = attr(at, "obelus.instance", sval(c->instance));
      if (*c->scope)
        at = attr(at, "obelus.scope", sval(c->scope));
      if (c->params)
        at = attr(at, "obelus.call.params", jval(c->params));
      if (last && ob_array_len(c->outputs)) {
        ob_value *o = outputs_value(c);
        at = attr(at, "obelus.call.output", jval(o));
        ob_unref(o);
      }
      if (last && c->error && !strcmp(c->state, "handled"))
        at = attr(at, "obelus.call.handled_error", sval(c->error));
      s = ob_object_set(s, "attributes", 10, at);
      if (a && a->progress) { /* what the attempt sent: the span's events */
        ob_value *evs = ob_array();
        for (size_t j = 0; j < ob_array_len(a->progress); j++) {
          const ob_value *p = ob_array_get(a->progress, j);
          ob_value *pe = ob_object_set(ob_object(), "timeUnixNano", 12,
                                       nanos((uint64_t)ob_int_value(ob_object_get(p, "t", 1))));
          pe = ob_object_set(pe, "name", 4, ob_cstring("progress"));
          pe = ob_object_set(pe, "attributes", 10,
                             attr(ob_array(), "obelus.progress.data", jval(ob_object_get(p, "data", 4))));
          evs = ob_array_push(evs, pe);
        }
        s = ob_object_set(s, "events", 6, evs);
      }
      const char *err = last ? c->error : (a ? a->error : NULL);
      if (last && !strcmp(c->state, "handled"))
        err = NULL; /* the run went on: not the span's error (its attribute says it) */
      ob_value *st = ob_object_set(ob_object(), "code", 4, ob_int(err ? 2 : 1));
      if (err)
        st = ob_object_set(st, "message", 7, ob_cstring(err));
      s = ob_object_set(s, "status", 6, st);
      spans = ob_array_push(spans, s);
    }
    ob_unref(parent);
  }
  ob_unref(trace_id);
  ob_unref(run_id);
  ob_value *scope = ob_object_set(ob_object_set(ob_object(), "name", 4, ob_cstring("obelus")),
                                  "version", 7, ob_cstring(OB_VERSION));
  ob_value *ss = ob_object_set(ob_object_set(ob_object(), "scope", 5, scope), "spans", 5, spans);
  ob_value *res = ob_object_set(ob_object(), "attributes", 10,
                                attr(ob_array(), "service.name", sval("obelus")));
  ob_value *rs = ob_object_set(ob_object_set(ob_object(), "resource", 8, res), "scopeSpans", 10,
                               ob_array_push(ob_array(), ss));
  return ob_object_set(ob_object(), "resourceSpans", 13, ob_array_push(ob_array(), rs));
}

/* --- the run, for the report ---------------------------------------------------------------- */

/* The position of call id in its run's plan as ob_graph numbers it: as read (ob_plan's
 * calls, every instance's copy its own) when the plan has "instances", else its place
 * in the list. -1 when the plan does not hold it. */
static long run_position(splan *sp, const char *id) {
  const ob_value *pv = sp ? ob_object_get(sp->msg, "plan", 4) : NULL;
  if (!pv || ob_typeof(pv) != OB_OBJECT || !ob_object_get(pv, "instances", 9))
    return position_of(sp, id);
  if (!sp->plan) {
    const char *file = str_of(sp->msg, "file");
    sp->plan = ob_plan_from_value(pv, file ? file : "plan");
  }
  ob_call *pc = ob_map_get(&sp->plan->ids, id, strlen(id));
  return pc ? (long)(pc - sp->plan->calls) : -1;
}

/* Call i's parent (the call whose run it is: the delegating call, the _each call) and
 * graph node id (ob_graph.h: "call-<i>", "call-<i>-<k>" below it, ...), or NULL when it
 * has none (a call its plan does not hold). Parents come before their runs' calls;
 * depth bounds the walk up all the same. */
static const char *node_of(trace *t, size_t i, int depth) {
  tcall *c = &t->calls[i];
  if (c->node || depth > 4096)
    return c->node;
  ob_buf b;
  ob_buf_init(&b);
  if (!*c->scope) {
    if (c->plan_index >= 0)
      ob_buf_addf(&b, "call-%ld", c->plan_index);
  } else {
    const tcall *pc = delegating_call(t, c->scope);
    c->parent = pc ? (long)(pc - t->calls) : -1;
    const char *up = pc ? node_of(t, (size_t)c->parent, depth + 1) : NULL;
    long k = up ? run_position(c->sp, c->id) : -1;
    if (k >= 0)
      ob_buf_addf(&b, "%s-%ld", up, k);
  }
  c->node = b.data; /* NULL when nothing was added */
  return c->node;
}

static ob_value *run_data(trace *t) {
  ob_value *calls = ob_array();
  for (size_t i = 0; i < t->ncalls; i++)
    node_of(t, i, 0); /* parents too */
  for (size_t i = 0; i < t->ncalls; i++) {
    tcall *c = &t->calls[i];
    ob_value *o = ob_object_set(ob_object(), "id", 2, ob_cstring(c->id));
    o = ob_object_set(o, "scope", 5, ob_cstring(c->scope));
    o = ob_object_set(o, "tool", 4, ob_cstring(c->tool ? c->tool : "?"));
    o = ob_object_set(o, "instance", 8, c->instance ? ob_cstring(c->instance) : ob_null());
    o = ob_object_set(o, "state", 5, ob_cstring(c->state));
    ob_value *at = ob_array(), *sent = ob_array();
    for (size_t k = 0; k < c->nat; k++) {
      attempt *a = &c->at[k];
      for (size_t j = 0; a->progress && j < ob_array_len(a->progress); j++) {
        const ob_value *p = ob_array_get(a->progress, j); /* [attempt, when, value] */
        ob_value *y = ob_array_push(ob_array(), ob_int((int64_t)(a->n ? a->n : k + 1)));
        y = ob_array_push(y, ob_int((int64_t)rel(t, (uint64_t)ob_int_value(ob_object_get(p, "t", 1)))));
        sent = ob_array_push(sent, ob_array_push(y, ob_ref(ob_object_get(p, "data", 4))));
      }
      ob_value *x = ob_array_push(ob_array(), ob_int((int64_t)rel(t, a->start)));
      x = ob_array_push(x, ob_int((int64_t)rel(t, a->end ? a->end : t->t1)));
      x = ob_array_push(x, a->error ? ob_cstring(a->error) : ob_null());
      at = ob_array_push(at, x);
    }
    o = ob_object_set(o, "attempts", 8, at);
    o = ob_object_set(o, "progress", 8, sent);
    o = ob_object_set(o, "settled", 7, ob_int((int64_t)rel(t, c->settled)));
    o = ob_object_set(o, "params", 6, c->params ? ob_ref((ob_value *)c->params) : ob_null());
    o = ob_object_set(o, "resolved", 8, c->resolved ? ob_ref(c->resolved) : ob_null());
    o = ob_object_set(o, "output", 6, ob_array_len(c->outputs) ? outputs_value(c) : ob_null());
    o = ob_object_set(o, "error", 5, c->error ? ob_cstring(c->error) : ob_null());
    ob_value *deps = ob_array();
    if (t->plan && c->plan_index >= 0) {
      const ob_call *pc = &t->plan->calls[c->plan_index];
      for (size_t d = 0; d < pc->ndeps; d++) {
        const tcall *w = find_call_of(t, "", t->plan->calls[pc->deps[d]].id);
        if (w)
          deps = ob_array_push(deps, ob_int((int64_t)(w - t->calls)));
      }
    }
    o = ob_object_set(o, "deps", 4, deps);
    o = ob_object_set(o, "parent", 6, c->parent >= 0 ? ob_int(c->parent) : ob_null());
    const char *node = node_of(t, i, 0);
    o = ob_object_set(o, "node", 4, node ? ob_cstring(node) : ob_null());
    calls = ob_array_push(calls, o);
  }
  const char *file = str_of(t->plan_msg, "file");
  ob_value *r = ob_object_set(ob_object(), "plan", 4, ob_cstring(file ? file : ""));
  r = ob_object_set(r, "exit", 4, t->exit >= 0 ? ob_int(t->exit) : ob_null());
  r = ob_object_set(r, "duration_us", 11, ob_int((int64_t)rel(t, t->t1)));
  r = ob_object_set(r, "t0_us", 5, ob_int((int64_t)t->t0)); /* the first start, since 1970 */
  return ob_object_set(r, "calls", 5, calls);
}

/* The trace of a journal read from the file at path (text NULL) or from text. */
static ob_value *build(const char *path, const char *text, size_t len, ob_trace_format format,
                       ob_journal_info *info_out, ob_error *err) {
  trace t;
  memset(&t, 0, sizeof t);
  t.format = format;
  t.exit = -1;
  ob_map_init(&t.by_key);
  ob_map_init(&t.scope_plans);
  ob_journal_info info;
  int rc = text ? ob_journal_read_text(path, text, len, each_line, &t, &info, err)
                : ob_journal_read(path, each_line, &t, &info, err);
  if (rc == OB_OK && !t.plan_msg)
    rc = ob_error_set(err, OB_EINVAL, 0, "%s: not a journal (no plan message)", path);
  if (rc != OB_OK) {
    trace_free(&t);
    return NULL;
  }
  if (info_out)
    *info_out = info;
  const ob_value *pv = ob_object_get(t.plan_msg, "plan", 4);
  const char *file = str_of(t.plan_msg, "file");
  if (pv) {
    t.plan = ob_plan_from_value(pv, file ? file : "plan");
    /* calls seen before the plan was made: their indices now */
    for (size_t i = 0; i < t.ncalls; i++)
      if (!*t.calls[i].scope) {
        ob_call *pc = ob_map_get(&t.plan->ids, t.calls[i].id, strlen(t.calls[i].id));
        t.calls[i].plan_index = pc ? (long)(pc - t.plan->calls) : -1;
      }
  }
  /* calls never started nor settled (an interrupted run): the plan's, as never ran */
  if (t.plan)
    for (size_t i = 0; i < t.plan->ncalls; i++) {
      tcall *c = call_of(&t, "", t.plan->calls[i].id);
      c->plan_index = (long)i;
      if (!c->nat && !c->settled)
        c->state = "never ran";
    }
  ob_value *out = format == OB_TRACE_OTLP ? otlp(&t) : format == OB_TRACE_RUN ? run_data(&t) : chrome(&t);
  trace_free(&t);
  return out;
}

ob_value *ob_trace_build(const char *path, ob_trace_format format, ob_journal_info *info_out,
                         ob_error *err) {
  return build(path, NULL, 0, format, info_out, err);
}

ob_value *ob_trace_build_text(const char *name, const char *text, size_t len,
                              ob_trace_format format, ob_journal_info *info_out, ob_error *err) {
  return build(name, text ? text : "", len, format, info_out, err);
}
