/* ob_graph.c -- a plan's dependency graph, or a run's, as DOT or Mermaid (ob_graph.h).
 *
 * The work is split in two so that a journal can decorate the drawing without
 * touching either syntax: the model (a level of nodes per plan: a label, a shape, a
 * fill, the run the call made as a level below it) is built here, edges are made one
 * at a time from the plan (each_edge), and one printer per format writes them
 * (ob_graph_text.c). Node names are positions, never the call id: ids may hold
 * quotes, spaces or `#`, which neither syntax accepts bare, and the real id is in the
 * label (ob_graph.h says the names).
 *
 * Edge labels say what flows: for an edge A -> B, every reference part B reads
 * that overlaps a path A writes (same kind, one path a prefix of the other,
 * plan-format §5) gives a line "†kind.written", or "†kind.written → †kind.read" when
 * B reads a different (shorter or longer) path. A writer with `||` branches
 * gets one dashed edge per alternative a reader depends on, labelled from
 * that alternative alone; fan-out (`&&`) and single paths are solid edges.
 * The dependency itself comes from the plan (call->users, positions in its calls),
 * so scopes are already right: a global writer feeds its instanced readers, one
 * instance's writer never feeds another instance.
 *
 * Outcomes from a journal: each call is filled by the messages its run left (an output
 * message came from it: done; an error message names it: failed; outcome_of below says
 * how a message is matched to its call); a call without either whose dependencies all
 * settled was skipped, one whose dependencies did not was never reached (infer_skips).
 * A call's message carries the messages of the run it made (_log: that run's plan
 * message first): an _each call's copies (a plan with "each") are read as they were
 * (labels from the copies' plan, outcomes from their messages), a delegated plan is
 * read as a plan and coloured the same way as the top one, with its own edges.
 *
 * Costs: the nodes drawn and their labels; a delegated run's plan read once per drawn
 * level; an _each call's copies walked once per message that tells them (their map of
 * ids: O(copies)). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "host/ob_graph_int.h"
#include "log/ob_log.h"
#include "plan/ob_nulls.h"

/* --- the model ------------------------------------------------------------------ */

/* A level named name/idp (the node names and ids of its calls: name + position), its
 * nodes allocated for `shown` of them. */
static glevel *level_new(const char *name, const char *idp, int depth) {
  glevel *lv = ob_xcalloc(1, sizeof *lv);
  lv->name = ob_xstrdup(name);
  lv->idp = ob_xstrdup(idp);
  lv->depth = depth;
  return lv;
}

static void level_clear(glevel *lv) {
  for (size_t i = 0; i < lv->shown; i++) {
    free(lv->nodes[i].label);
    if (lv->nodes[i].sub) {
      level_clear(lv->nodes[i].sub);
      free(lv->nodes[i].sub);
    }
  }
  free(lv->nodes);
  free(lv->more);
  free(lv->title);
  free(lv->name);
  free(lv->idp);
  ob_plan_free(lv->owned);
}

/* The nodes a level and those below it draw: what it takes from the budget. */
static size_t level_count(const glevel *lv) {
  size_t n = lv->shown;
  for (size_t i = 0; i < lv->shown; i++)
    if (lv->nodes[i].sub)
      n += level_count(lv->nodes[i].sub);
  return n;
}

/* How many of total calls a level may draw now (at most cap; 0: no cap besides the
 * budget), taken from the budget. */
static size_t take(ob_graph *g, size_t total, size_t cap) {
  size_t n = cap && total > cap ? cap : total;
  if (n > g->budget)
    n = g->budget;
  if (g->budget != SIZE_MAX)
    g->budget -= n;
  return n;
}

/* Labels and shapes of a plan level's first lv->shown calls. */
static void plan_nodes(glevel *lv, const ob_plan *p) {
  lv->plan = p;
  lv->total = p->ncalls;
  lv->nodes = ob_xcalloc(lv->shown ? lv->shown : 1, sizeof *lv->nodes);
  for (size_t i = 0; i < lv->shown; i++) {
    const ob_call *c = &p->calls[i];
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s\n%s", c->id, c->tool_name);
    if (c->instance)
      ob_buf_addf(&b, "\ninstance %s", c->instance);
    const ob_value *each = c->each ? ob_object_get(c->raw, "_each", 5) : NULL;
    if (each && ob_typeof(each) == OB_STRING) /* a map: once per element of that list */
      ob_buf_addf(&b, "\neach %s", ob_string_ptr(each));
    lv->nodes[i].label = b.data;
    /* plan-format §5: fire-and-forget needs a run function; without --tools we cannot
     * tell, and a latent "thought" is the rarer case */
    lv->nodes[i].shape = !c->has_output && !(c->tool && c->tool->latent) ? SHAPE_DETACHED
                                                                         : SHAPE_CALL;
  }
  if (lv->shown < lv->total) {
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "... %zu more calls", lv->total - lv->shown);
    lv->more = b.data;
  }
}

ob_graph *ob_graph_new(const ob_plan *p, size_t max_calls) {
  ob_graph *g = ob_xcalloc(1, sizeof *g);
  g->budget = max_calls ? max_calls : SIZE_MAX;
  g->max_edges = OB_GRAPH_MAX_EDGES;
  glevel *top = level_new("n", "call-", 0);
  g->top = *top;
  free(top);
  g->top.shown = take(g, p->ncalls, 0);
  plan_nodes(&g->top, p);
  return g;
}

void ob_graph_set_max_edges(ob_graph *g, size_t max_edges) { g->max_edges = max_edges; }

const ob_plan *ob_graph_plan(const ob_graph *g) { return g->top.plan; }

void ob_graph_free(ob_graph *g) {
  if (!g)
    return;
  level_clear(&g->top);
  free(g);
}

size_t ob_graph_links(const ob_plan *p) {
  size_t n = 0;
  for (size_t a = 0; a < p->ncalls; a++)
    n += p->calls[a].nusers;
  return n;
}

/* --- edges ---------------------------------------------------------------------- */

/* 1 when `line` is already one of the '\n'-separated lines of b. */
static int has_line(const ob_buf *b, const char *line, size_t n) {
  for (size_t at = 0; b->data && at < b->len;) {
    const char *end = memchr(b->data + at, '\n', b->len - at);
    size_t len = end ? (size_t)(end - (b->data + at)) : b->len - at;
    if (len == n && !memcmp(b->data + at, line, n))
      return 1;
    at += len + 1;
  }
  return 0;
}

/* Adds to label a line for every part of `alt` (a writer's alternative) that
 * overlaps a part some reference of `reader` reads. */
static void label_links(ob_buf *label, const ob_alt *alt, const ob_call *reader) {
  ob_buf line;
  ob_buf_init(&line);
  for (size_t w = 0; w < alt->n; w++) {
    const ob_reference *wr = &alt->refs[w];
    for (size_t r = 0; r < reader->nrefs; r++) {
      const ob_expr *e = &reader->refs[r].expr;
      for (size_t a = 0; a < e->n; a++)
        for (size_t k = 0; k < e->alts[a].n; k++) {
          const ob_reference *rd = &e->alts[a].refs[k];
          if (strcmp(wr->kind, rd->kind) || !ob_path_overlaps(&wr->path, &rd->path))
            continue;
          line.len = 0;
          ob_ref_format(&line, wr->kind, &wr->path);
          if (!ob_path_equal(&wr->path, &rd->path)) {
            ob_buf_add(&line, " \xE2\x86\x92 ", 5); /* → */
            ob_ref_format(&line, rd->kind, &rd->path);
          }
          if (has_line(label, line.data, line.len))
            continue;
          if (label->len)
            ob_buf_addc(label, '\n');
          ob_buf_add(label, line.data, line.len);
        }
    }
  }
  ob_buf_free(&line);
}

static void emit(gdraw *d, const glevel *lv, const char *ind, size_t from, size_t to,
                 ob_buf *label, int branch, const size_t *scc) {
  if (d->max_edges && d->edges >= d->max_edges) {
    d->skipped++;
  } else {
    gedge e = {from, to, label->data ? label->data : "", branch,
               scc && scc[from] == scc[to]};
    d->edge(d, lv, ind, &e);
    d->edges++;
  }
  label->len = 0;
  if (label->data)
    label->data[0] = '\0';
}

/* The strongly connected components of the level's drawn calls, the edges being each
 * call's users: scc[i] the component of call i, a number shared only by calls on one
 * cycle (a call alone off any cycle has one of its own); NULL when the plan has no
 * cycle (nothing to mark). Tarjan's algorithm, without recursion (a chain of 100,000
 * calls): O(calls + edges). */
static size_t *cycles_of(const ob_plan *p, size_t n) {
  if (!p->ncycles || !n)
    return NULL;
  size_t *index = ob_xmalloc(n * sizeof *index), *low = ob_xmalloc(n * sizeof *low);
  size_t *scc = ob_xmalloc(n * sizeof *scc), *stack = ob_xmalloc(n * sizeof *stack);
  size_t *call_at = ob_xmalloc(n * sizeof *call_at), *next_user = ob_xmalloc(n * sizeof *next_user);
  unsigned char *on = ob_xcalloc(n, 1);
  const size_t unseen = (size_t)-1;
  for (size_t i = 0; i < n; i++)
    index[i] = unseen;
  size_t counter = 0, sp = 0, comps = 0;
  for (size_t root = 0; root < n; root++) {
    if (index[root] != unseen)
      continue;
    size_t depth = 0;
    call_at[depth++] = root;
    index[root] = low[root] = counter++;
    next_user[root] = 0;
    stack[sp++] = root;
    on[root] = 1;
    while (depth) {
      size_t v = call_at[depth - 1];
      const ob_call *c = &p->calls[v];
      if (next_user[v] < c->nusers) {
        size_t w = c->users[next_user[v]++];
        if (w >= n)
          continue;
        if (index[w] == unseen) { /* down to w */
          index[w] = low[w] = counter++;
          next_user[w] = 0;
          stack[sp++] = w;
          on[w] = 1;
          call_at[depth++] = w;
        } else if (on[w] && index[w] < low[v]) {
          low[v] = index[w];
        }
        continue;
      }
      if (low[v] == index[v]) { /* v roots a component: off the stack down to it */
        size_t w;
        do {
          w = stack[--sp];
          on[w] = 0;
          scc[w] = comps;
        } while (w != v);
        comps++;
      }
      depth--;
      if (depth && low[v] < low[call_at[depth - 1]])
        low[call_at[depth - 1]] = low[v];
    }
  }
  free(index);
  free(low);
  free(stack);
  free(call_at);
  free(next_user);
  free(on);
  return scc;
}

/* Every edge between the level's drawn calls, writers in plan order, then their readers
 * in plan order (users ascend). An instance's copies of a call share its index: the
 * position in calls tells them apart. An edge on a dependency cycle (its ends in one
 * strongly connected component) is marked. */
void ob_graph_each_edge(gdraw *d, const glevel *lv, const char *ind) {
  const ob_plan *p = lv->plan;
  if (!p)
    return;
  size_t *scc = cycles_of(p, lv->shown);
  ob_buf label;
  ob_buf_init(&label);
  for (size_t a = 0; a < lv->shown; a++) {
    const ob_call *w = &p->calls[a];
    for (size_t u = 0; u < w->nusers; u++) {
      size_t to = w->users[u];
      if (to >= lv->shown)
        continue;
      const ob_call *r = &p->calls[to];
      if (w->output.n < 2) {
        for (size_t k = 0; k < w->output.n; k++)
          label_links(&label, &w->output.alts[k], r);
        emit(d, lv, ind, a, to, &label, 0, scc);
        continue;
      }
      int any = 0;
      for (size_t k = 0; k < w->output.n; k++) {
        label_links(&label, &w->output.alts[k], r);
        if (label.len) {
          emit(d, lv, ind, a, to, &label, 1, scc);
          any = 1;
        }
      }
      if (!any) /* cannot happen while deps follow the same rule */
        emit(d, lv, ind, a, to, &label, 1, scc);
    }
  }
  ob_buf_free(&label);
  free(scc);
}

/* --- outcomes from a journal ------------------------------------------------------ */

/* Light fills, so that the black labels stay readable in both syntaxes. */
#define FILL_DONE "#c6efce"
#define FILL_FAILED "#ffc7ce"
#define FILL_NOT_RUN "#e0e0e0"

enum { OUTCOME_NONE, OUTCOME_DONE, OUTCOME_FAILED, OUTCOME_SKIPPED };

static int in_scope(const ob_call *c, const ob_value *instance) {
  return c->instance ? instance && !strcmp(c->instance, ob_string_ptr(instance)) : !instance;
}

/* The call of p that a message names. An id names the call with that id (an
 * error message's "id" is the id the run gave the call; an output's
 * _call._id gets "@<instance>" appended for an instance's copy of a call
 * without its own _instance, as the run named it). A _call without _id is
 * matched by position: the first call of the plan, in the message's scope,
 * written exactly like it (JSON equality), which is the call whose default id
 * "#<index>" the run used. NULL when none: a journal of another plan. */
static const ob_call *call_named(const ob_plan *p, const char *id, const ob_value *call,
                                 const ob_value *instance) {
  if (id)
    return ob_map_get(&p->ids, id, strlen(id));
  if (!call)
    return NULL;
  const ob_value *cid = ob_typeof(call) == OB_OBJECT ? ob_object_get(call, "_id", 3) : NULL;
  if (cid && ob_typeof(cid) == OB_STRING) {
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_add(&b, ob_string_ptr(cid), ob_string_len(cid));
    if (instance && !ob_object_get(call, "_instance", 9))
      ob_buf_addf(&b, "@%s", ob_string_ptr(instance));
    ob_buf_addc(&b, '\0');
    const ob_call *c = ob_map_get(&p->ids, b.data, b.len - 1);
    ob_buf_free(&b);
    return c;
  }
  for (size_t i = 0; i < p->ncalls; i++)
    if (in_scope(&p->calls[i], instance) && ob_nulls_same_call(p->calls[i].raw, call))
      return &p->calls[i];
  return NULL;
}

static const char *outcome_fill(int outcome) {
  return outcome == OUTCOME_DONE     ? FILL_DONE
         : outcome == OUTCOME_FAILED ? FILL_FAILED
                                     : NULL;
}

static const ob_value *array_or_null(const ob_value *v) {
  return v && ob_typeof(v) == OB_ARRAY ? v : NULL;
}

/* A message's "_log" (the run its call made), when it is a list of messages. */
static const ob_value *sublog_of(const ob_value *raw) {
  return raw && ob_typeof(raw) == OB_OBJECT ? array_or_null(ob_object_get(raw, "_log", 4))
                                            : NULL;
}

static void read_run(ob_graph *g, glevel *lv, size_t k, const ob_value *sublog);

/* An _each call's copies from its message's _log (the copies' run's messages: their
 * plan first, then each copy's output or error): a label and a fill each, in the
 * list's order; a copy with neither never ran (its run was cut short). */
static void copies_from(ob_graph *g, glevel *lv, const ob_value *calls, const ob_value *sublog) {
  size_t total = ob_array_len(calls);
  lv->each = 1;
  lv->title = ob_xstrdup("_each");
  lv->total = total;
  lv->shown = take(g, total, OB_GRAPH_MAX_COPIES);
  int *out = ob_xcalloc(total ? total : 1, sizeof *out);
  ob_map at; /* copy id -> its position + 1 */
  ob_map_init(&at);
  for (size_t k = 0; k < total; k++) {
    const ob_value *id = ob_object_get(ob_array_get(calls, k), "_id", 3);
    if (id && ob_typeof(id) == OB_STRING)
      ob_map_put(&at, ob_string_ptr(id), ob_string_len(id), (void *)(uintptr_t)(k + 1));
  }
  lv->nodes = ob_xcalloc(lv->shown ? lv->shown : 1, sizeof *lv->nodes);
  for (size_t i = 1; i < ob_array_len(sublog); i++) {
    const ob_value *m = ob_array_get(sublog, i), *call, *data, *id = NULL;
    int outcome = OUTCOME_DONE;
    if ((call = ob_object_get(m, "_call", 5)) && ob_typeof(call) == OB_OBJECT) {
      id = ob_object_get(call, "_id", 3);
    } else if ((data = ob_object_get(m, "data", 4)) && ob_typeof(data) == OB_OBJECT &&
               ob_object_get(data, "error", 5)) {
      id = ob_object_get(data, "id", 2);
      outcome = OUTCOME_FAILED;
    }
    uintptr_t k = id && ob_typeof(id) == OB_STRING
                      ? (uintptr_t)ob_map_get(&at, ob_string_ptr(id), ob_string_len(id))
                      : 0;
    if (k && outcome > out[k - 1])
      out[k - 1] = outcome;
    const ob_value *deeper = sublog_of(m);
    if (k && k - 1 < lv->shown && deeper) /* a copy that made a run of its own */
      read_run(g, lv, k - 1, deeper);
  }
  for (size_t k = 0; k < lv->shown; k++) {
    const ob_value *c = ob_array_get(calls, k), *id = ob_object_get(c, "_id", 3);
    const ob_value *tool = ob_object_get(c, "_tool", 5);
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s\n%s\n%s", id && ob_typeof(id) == OB_STRING ? ob_string_ptr(id) : "?",
                tool && ob_typeof(tool) == OB_STRING ? ob_string_ptr(tool) : "delegate",
                out[k] == OUTCOME_DONE ? "done" : out[k] == OUTCOME_FAILED ? "failed" : "never ran");
    lv->nodes[k].label = b.data;
    lv->nodes[k].shape = SHAPE_CALL;
    lv->nodes[k].fill = outcome_fill(out[k]);
    lv->nodes[k].klass = out[k] == OUTCOME_DONE ? "done" : out[k] == OUTCOME_FAILED ? "failed"
                                                                                    : "never-ran";
  }
  if (total > lv->shown) { /* the rest, counted: a drawing of 100,000 copies is not readable */
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "... %zu more copies", total - lv->shown);
    size_t f = 0;
    for (size_t k = lv->shown; k < total; k++)
      f += out[k] == OUTCOME_FAILED;
    if (f)
      ob_buf_addf(&b, "\n%zu failed", f);
    lv->more = b.data;
  }
  ob_map_free(&at);
  free(out);
}

/* A journal records outputs and errors, not skips. A call with no record
 * whose dependencies all settled (done, failed or skipped themselves) was
 * ready, so the scheduler decided about it: skipped (or, if the run was
 * interrupted right then, cut short). One with a dependency that never
 * settled was never reached. Repeated until nothing changes: dependencies
 * may come later in the plan than their readers. */
static void infer_skips(const ob_plan *p, int *out) {
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t i = 0; i < p->ncalls; i++) {
      const ob_call *c = &p->calls[i];
      if (out[i] != OUTCOME_NONE || !c->ndeps)
        continue;
      size_t settled = 0;
      for (size_t d = 0; d < c->ndeps; d++)
        settled += out[c->deps[d]] != OUTCOME_NONE;
      if (settled == c->ndeps) {
        out[i] = OUTCOME_SKIPPED;
        changed = 1;
      }
    }
  }
}

/* Fills every drawn node of a plan level by its call's outcome (out: one per call of
 * its plan) and says it on the label's last line; counts the failed among the rest. */
static void paint(glevel *lv, int *out) {
  infer_skips(lv->plan, out);
  for (size_t i = 0; i < lv->shown; i++) {
    gnode *n = &lv->nodes[i];
    const char *what;
    if (out[i] == OUTCOME_FAILED) {
      n->fill = FILL_FAILED;
      what = n->klass = "failed";
    } else if (out[i] == OUTCOME_DONE) {
      n->fill = FILL_DONE;
      what = n->klass = "done";
    } else if (!lv->plan->calls[i].has_output) {
      what = "no record (writes nothing)"; /* fire-and-forget or a thought: left white */
      n->klass = "no-record";
    } else if (out[i] == OUTCOME_SKIPPED) {
      n->fill = FILL_NOT_RUN;
      what = n->klass = "skipped";
    } else {
      what = "never ran"; /* left white */
      n->klass = "never-ran";
    }
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s\n%s", n->label, what);
    free(n->label);
    n->label = b.data;
  }
  size_t f = 0;
  for (size_t i = lv->shown; i < lv->total; i++)
    f += out[i] == OUTCOME_FAILED;
  if (lv->more && f) {
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s\n%zu failed", lv->more, f);
    free(lv->more);
    lv->more = b.data;
  }
}

/* A call that makes a run of its own, whose messages _log holds. */
static int makes_runs(const ob_call *c) {
  return c->each || ob_object_get(c->raw, "_delegate", 9);
}

/* Notes the outcome of call c (of lv's plan) and, when its message holds the run it
 * made, reads that run below its node. */
static void note(ob_graph *g, glevel *lv, int *out, const ob_call *c, int outcome,
                 const ob_value *sublog) {
  if (!c)
    return;
  size_t i = (size_t)(c - lv->plan->calls);
  if (outcome > out[i])
    out[i] = outcome;
  if (sublog && i < lv->shown && makes_runs(c))
    read_run(g, lv, i, sublog);
}

/* A delegated run's calls from its messages (its plan message first), coloured as the
 * top plan's are: outputs (their _call) done, error messages failed. */
static void delegated_from(ob_graph *g, glevel *lv, const ob_value *pm, const ob_value *pv,
                           const ob_value *sublog) {
  const char *file = ob_typeof(ob_object_get(pm, "file", 4)) == OB_STRING
                         ? ob_string_ptr(ob_object_get(pm, "file", 4))
                         : "plan";
  lv->owned = ob_plan_from_value(pv, file);
  ob_buf t;
  ob_buf_init(&t);
  ob_buf_addf(&t, "_delegate %s", file);
  lv->title = t.data;
  lv->shown = take(g, lv->owned->ncalls, 0);
  plan_nodes(lv, lv->owned);
  int *out = ob_xcalloc(lv->owned->ncalls ? lv->owned->ncalls : 1, sizeof *out);
  for (size_t i = 1; i < ob_array_len(sublog); i++) {
    const ob_value *m = ob_array_get(sublog, i), *call, *data, *kind;
    if (ob_typeof(m) != OB_OBJECT)
      continue;
    const ob_value *inst = ob_object_get(m, "_instance", 9);
    if (inst && ob_typeof(inst) != OB_STRING)
      inst = NULL;
    if ((call = ob_object_get(m, "_call", 5)) && ob_typeof(call) == OB_OBJECT) {
      note(g, lv, out, call_named(lv->plan, NULL, call, inst), OUTCOME_DONE, sublog_of(m));
    } else if ((kind = ob_object_get(m, "kind", 4)) && ob_typeof(kind) == OB_STRING &&
               !strcmp(ob_string_ptr(kind), "error") && (data = ob_object_get(m, "data", 4)) &&
               ob_typeof(data) == OB_OBJECT) {
      const ob_value *id = ob_object_get(data, "id", 2);
      note(g, lv, out,
           call_named(lv->plan, id && ob_typeof(id) == OB_STRING ? ob_string_ptr(id) : NULL,
                      ob_object_get(data, "call", 4), inst),
           OUTCOME_FAILED, sublog_of(m));
    }
  }
  paint(lv, out);
  free(out);
}

/* The run node k of lv made, from its message's _log, as a level below it (replacing one
 * a message before told: the last attempt's run is drawn). Nothing when the budget or
 * the depth is spent, or the log holds no plan message. */
static void read_run(ob_graph *g, glevel *lv, size_t k, const ob_value *sublog) {
  gnode *n = &lv->nodes[k];
  if (n->sub) { /* told again: its nodes go back to the budget */
    if (g->budget != SIZE_MAX)
      g->budget += level_count(n->sub);
    level_clear(n->sub);
    free(n->sub);
    n->sub = NULL;
  }
  const ob_value *pm = ob_array_len(sublog) ? ob_array_get(sublog, 0) : NULL;
  const ob_value *pv = pm && ob_typeof(pm) == OB_OBJECT ? ob_object_get(pm, "plan", 4) : NULL;
  if (!pv || lv->depth >= OB_GRAPH_MAX_DEPTH || !g->budget)
    return;
  const ob_value *calls = ob_typeof(pv) == OB_OBJECT ? ob_object_get(pv, "plan", 4) : NULL;
  int each = calls && ob_typeof(calls) == OB_ARRAY && ob_object_get(pv, "each", 4);
  ob_buf name, idp;
  ob_buf_init(&name);
  ob_buf_init(&idp);
  ob_buf_addf(&name, "%s%zuc", lv->name, k);
  ob_buf_addf(&idp, "%s%zu-", lv->idp, k);
  glevel *sub = level_new(name.data, idp.data, lv->depth + 1);
  ob_buf_free(&name);
  ob_buf_free(&idp);
  n->sub = sub;
  if (each)
    copies_from(g, sub, calls, sublog);
  else
    delegated_from(g, sub, pm, pv, sublog);
}

/* Each call's outcome in the journal's log: done when some output message
 * came from it, failed when some error message names it (failure wins: a
 * failed call writes nothing, so both only meet in a journal of several
 * runs). The runs calls made (_log) are read below their nodes. */
static void outcomes(ob_graph *g, ob_log *log, int *out) {
  glevel *lv = &g->top;
  for (size_t i = 0; i < ob_log_len(log); i++) {
    const ob_msg *m = ob_log_at(log, i);
    const ob_call *c = NULL;
    int outcome = OUTCOME_NONE;
    if (m->type == OB_MSG_OUTPUT) {
      c = call_named(lv->plan, NULL, m->call, m->instance);
      outcome = OUTCOME_DONE;
    } else if (m->type == OB_MSG_CONTEXT && !strcmp(ob_string_ptr(m->kind), "error") &&
               ob_typeof(m->value) == OB_OBJECT) {
      const ob_value *id = ob_object_get(m->value, "id", 2);
      c = call_named(lv->plan, id && ob_typeof(id) == OB_STRING ? ob_string_ptr(id) : NULL,
                     ob_object_get(m->value, "call", 4), m->instance);
      outcome = OUTCOME_FAILED;
    }
    const ob_value *sublog = m->sublog ? array_or_null(m->sublog) : sublog_of(m->raw);
    note(g, lv, out, c, outcome, sublog);
  }
}

/* The first plan message of the log, when it holds a plan other than v: the file it
 * names ("another plan" when none). NULL when the plans are the same. */
static const char *other_plan(ob_log *log, const ob_value *v) {
  for (size_t i = 0; i < ob_log_len(log); i++) {
    const ob_msg *m = ob_log_at(log, i);
    if (m->type != OB_MSG_OTHER)
      continue;
    const ob_value *pv = ob_object_get(m->raw, "plan", 4);
    const ob_value *f = ob_object_get(m->raw, "file", 4);
    if (!pv || ob_equal(pv, v))
      return NULL;
    return f && ob_typeof(f) == OB_STRING ? ob_string_ptr(f) : "another plan";
  }
  return NULL;
}

static void color_from_log(ob_graph *g, ob_log *log) {
  int *out = ob_xcalloc(g->top.total ? g->top.total : 1, sizeof *out);
  outcomes(g, log, out);
  paint(&g->top, out);
  free(out);
}

static ob_log *load(const char *path, ob_journal_info *info, ob_error *err) {
  ob_log *log = ob_log_new();
  ob_log_keep_history(log, 0); /* only read as it ends */
  ob_journal_info local;
  if (ob_journal_load(log, path, info ? info : &local, err) != OB_OK) {
    ob_log_free(log);
    return NULL;
  }
  return log;
}

int ob_graph_color(ob_graph *g, const char *path, const ob_value *plan_value,
                   ob_journal_info *info, char **other, ob_error *err) {
  if (other)
    *other = NULL;
  ob_log *log = load(path, info, err);
  if (!log)
    return err->code ? err->code : OB_EIO;
  const char *o = plan_value ? other_plan(log, plan_value) : NULL;
  if (o && other)
    *other = ob_xstrdup(o);
  color_from_log(g, log);
  ob_log_free(log);
  return OB_OK;
}

ob_graph *ob_graph_from_journal(const char *path, size_t max_calls, ob_journal_info *info,
                                ob_error *err) {
  ob_log *log = load(path, info, err);
  if (!log)
    return NULL;
  ob_graph *g = ob_graph_from_log(log, path, max_calls, err);
  ob_log_free(log);
  return g;
}

ob_graph *ob_graph_from_log(ob_log *log, const char *name, size_t max_calls,
                            ob_error *err) {
  const char *path = name;
  const ob_value *pm = NULL;
  for (size_t i = 0; i < ob_log_len(log) && !pm; i++) {
    const ob_msg *m = ob_log_at(log, i);
    if (m->type == OB_MSG_OTHER && m->raw && ob_object_get(m->raw, "plan", 4))
      pm = m->raw;
  }
  if (!pm) {
    ob_error_set(err, OB_EINVAL, 0, "%s: not a run's journal (no plan message)", path);
    return NULL;
  }
  const ob_value *f = ob_object_get(pm, "file", 4);
  ob_plan *p = ob_plan_from_value(ob_object_get(pm, "plan", 4),
                                  f && ob_typeof(f) == OB_STRING ? ob_string_ptr(f) : path);
  ob_graph *g = ob_graph_new(p, max_calls);
  g->top.owned = p;
  color_from_log(g, log);
  return g;
}

int ob_graph_journal_dot(const char *path, size_t max_calls, ob_buf *out,
                         ob_journal_info *info, ob_error *err) {
  ob_graph *g = ob_graph_from_journal(path, max_calls ? max_calls : OB_GRAPH_MAX_CALLS, info, err);
  if (!g)
    return err->code ? err->code : OB_EINVAL;
  ob_graph_dot(g, out);
  ob_graph_free(g);
  return OB_OK;
}
