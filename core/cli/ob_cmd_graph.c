/* ob_cmd_graph.c -- `obelus graph PLAN [--format dot|mermaid] [--tools PATH]...`:
 * the plan's dependency DAG as Graphviz dot or a Mermaid flowchart.
 *
 * The work is split in two so that later options can decorate the drawing
 * without touching either syntax: build_graph() turns the plan into a small
 * model (nodes with a label, a shape and a fill), each_edge() makes the edges
 * (a label and a style) one at a time, and one printer per format writes them. Node names are n0,
 * n1, ... by plan position, never the call id: ids may hold quotes, spaces or
 * `#`, which neither syntax accepts bare, and the real id is in the label.
 *
 * Edge labels say what flows: for an edge A -> B, every reference part B reads
 * that overlaps a path A writes (same kind, one path a prefix of the other,
 * SPEC 5) gives a line "†kind.written", or "†kind.written → †kind.read" when
 * B reads a different (shorter or longer) path. A writer with `||` branches
 * gets one dashed edge per alternative a reader depends on, labelled from
 * that alternative alone; fan-out (`&&`) and single paths are solid edges.
 * The dependency itself comes from the plan (call->users), so scopes are
 * already right: a global writer feeds its instanced readers, one instance's
 * writer never feeds another instance.
 *
 * With --journal, each node is filled by the call's outcome in that run
 * (outcome_from_journal below says how a message is matched to its call), and an
 * _each call's copies (its message's _log: their run's messages) are drawn in a
 * cluster with it.
 *
 * Costs: the nodes' labels in memory; edges are made and printed one at a time (a
 * plan of n writers and m readers that all link has n*m of them: never held). A plan
 * with more dependencies than --max-edges (10000 by default) is refused before
 * anything is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "cli/ob_cli.h"
#include "engine/ob_engine.h"
#include "log/ob_journal.h"
#include "log/ob_log.h"
#include "plan/ob_plan.h"
#include "engine/ob_run.h"

static const char graph_help[] =
    "usage: obelus graph PLAN [--format dot|mermaid] [--tools PATH]... [--journal J]\n"
    "                    [--plans-root DIR] [--max-edges N]\n"
    "\n"
    "Prints the dependency graph of PLAN: one node per call (its id and tool),\n"
    "one edge from each call to each call that reads what it writes, labelled\n"
    "with the path that links them (\"written \xE2\x86\x92 read\" when they differ).\n"
    "Edges from a call with `||` branches are dashed, one per alternative;\n"
    "calls with no _outputPath (fire-and-forget) have an arrow-shaped node.\n"
    "Nothing runs and no tool is needed; with --tools the calls are also checked\n"
    "against the tools' schemas. Exit 0 when drawn, 2 when the plan is invalid\n"
    "(every problem on stderr, stdout empty) or on usage errors.\n"
    "\n"
    "  --format dot|mermaid  Graphviz dot (default) or a Mermaid `flowchart TD`\n"
    "  --tools PATH          a tool file (.lua) or a folder of them; repeatable\n"
    "  --journal J           colour each call by its outcome in the run journal J\n"
    "                        (`run --journal J`): done green, failed red, skipped\n"
    "                        grey, never ran white. A journal records outputs and\n"
    "                        errors, not skips: a call without a record whose\n"
    "                        dependencies all settled counts as skipped, one whose\n"
    "                        dependencies did not as never ran; a fire-and-forget\n"
    "                        call that did not fail is left white (it writes\n"
    "                        nothing to tell). The outcome is also the node's last\n"
    "                        label line. An _each call's copies are drawn in a box\n"
    "                        with it, each by its outcome (24 at most, the rest\n"
    "                        counted).\n"
    "  --plans-root DIR      with --tools, where delegated plans must lie (as for\n"
    "                        run; default: PLAN's folder)\n"
    "  --max-edges N         refuse (exit 2, nothing drawn) a plan with more than N\n"
    "                        dependencies between its calls (default 10000; 0: no\n"
    "                        bound); edges are printed as they are made, never held\n"
    "\n"
    "examples:\n"
    "  obelus graph plan.json | dot -Tsvg > plan.svg\n"
    "  obelus graph plan.json --format mermaid > plan.mmd\n"
    "  obelus graph plans/weather/plan.json --tools plans/weather/tools\n"
    "  obelus run plan.json --tools tools/ --journal run.jsonl\n"
    "  obelus graph plan.json --journal run.jsonl | dot -Tsvg > run.svg\n";

enum { FORMAT_DOT, FORMAT_MERMAID };

/* The most dependencies drawn by default: Graphviz lays out a few thousand edges in
 * seconds; a plan past this is refused unless --max-edges says otherwise. */
#define GRAPH_MAX_EDGES ((size_t)10000)

/* --- the model ---------------------------------------------------------------- */

typedef enum { SHAPE_CALL, SHAPE_DETACHED } node_shape;

/* Attributes are kept apart from any syntax so that a later option (colouring
 * by outcome from a journal) only sets fields here. */
typedef struct gnode {
  char *label;      /* lines joined by '\n', not escaped */
  node_shape shape;
  const char *fill; /* a colour such as "#d4f4d4", or NULL for the default */
  /* an _each call's copies as a journal tells them (--journal): drawn in a cluster with
   * the call, the first GRAPH_MAX_COPIES of them, and one node for the rest */
  size_t ncopies, nmore;
  char **copy_label;
  const char **copy_fill;
} gnode;

#define GRAPH_MAX_COPIES 24

/* Edges are not kept: each is made and printed in turn (each_edge), so a plan whose
 * calls read many writers costs its drawing's text, not that text in memory too. */
typedef struct gedge {
  size_t from, to;  /* plan positions */
  const char *label; /* lines joined by '\n', not escaped; "" for none */
  int branch;       /* through one `||` alternative of the writer: dashed */
} gedge;

typedef struct graph {
  size_t nnodes;
  gnode *nodes;
  const ob_plan *plan;
} graph;

typedef void (*edge_fn)(FILE *out, const gedge *e);

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

static void build_graph(graph *g, const ob_plan *p) {
  memset(g, 0, sizeof *g);
  g->plan = p;
  g->nnodes = p->ncalls;
  g->nodes = ob_xcalloc(p->ncalls, sizeof *g->nodes);
  for (size_t i = 0; i < p->ncalls; i++) {
    const ob_call *c = &p->calls[i];
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s\n%s", c->id, c->tool_name);
    if (c->instance)
      ob_buf_addf(&b, "\ninstance %s", c->instance);
    const ob_value *each = c->each ? ob_object_get(c->raw, "_each", 5) : NULL;
    if (each && ob_typeof(each) == OB_STRING) /* a map: once per element of that list */
      ob_buf_addf(&b, "\neach %s", ob_string_ptr(each));
    g->nodes[i].label = b.data;
    /* SPEC 5: fire-and-forget needs a run function; without --tools we cannot
     * tell, and a latent "thought" is the rarer case */
    g->nodes[i].shape = !c->has_output && !(c->tool && c->tool->latent) ? SHAPE_DETACHED
                                                                        : SHAPE_CALL;
  }
}

static void emit(FILE *out, edge_fn fn, size_t from, size_t to, ob_buf *label, int branch) {
  gedge e = {from, to, label->data ? label->data : "", branch};
  fn(out, &e);
  label->len = 0;
  if (label->data)
    label->data[0] = '\0';
}

/* Every edge, writers in plan order, then their readers in plan order (users ascend). */
static void each_edge(const ob_plan *p, FILE *out, edge_fn fn) {
  ob_buf label;
  ob_buf_init(&label);
  for (size_t a = 0; a < p->ncalls; a++) {
    const ob_call *w = &p->calls[a];
    for (size_t u = 0; u < w->nusers; u++) {
      const ob_call *r = &p->calls[w->users[u]];
      if (w->output.n < 2) {
        for (size_t k = 0; k < w->output.n; k++)
          label_links(&label, &w->output.alts[k], r);
        emit(out, fn, a, r->index, &label, 0);
        continue;
      }
      int any = 0;
      for (size_t k = 0; k < w->output.n; k++) {
        label_links(&label, &w->output.alts[k], r);
        if (label.len) {
          emit(out, fn, a, r->index, &label, 1);
          any = 1;
        }
      }
      if (!any) /* cannot happen while deps follow the same rule */
        emit(out, fn, a, r->index, &label, 1);
    }
  }
  ob_buf_free(&label);
}

/* The dependencies (writer, reader pairs): what the edge bound counts. */
static size_t count_links(const ob_plan *p) {
  size_t n = 0;
  for (size_t a = 0; a < p->ncalls; a++)
    n += p->calls[a].nusers;
  return n;
}

static void free_graph(graph *g) {
  for (size_t i = 0; i < g->nnodes; i++) {
    free(g->nodes[i].label);
    for (size_t k = 0; k < g->nodes[i].ncopies + (g->nodes[i].nmore ? 1 : 0); k++)
      free(g->nodes[i].copy_label[k]);
    free(g->nodes[i].copy_label);
    free(g->nodes[i].copy_fill);
  }
  free(g->nodes);
}

/* --- outcomes from a journal --------------------------------------------------- */

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
    if (in_scope(&p->calls[i], instance) && ob_equal(p->calls[i].raw, call))
      return &p->calls[i];
  return NULL;
}

static const char *outcome_fill(int outcome) {
  return outcome == OUTCOME_DONE     ? FILL_DONE
         : outcome == OUTCOME_FAILED ? FILL_FAILED
                                     : NULL;
}

/* An _each call's copies from its message's _log (the copies' run's messages: their
 * plan first, then each copy's output or error): a label and a fill each, in the
 * list's order; a copy with neither never ran (its run was cut short). */
static void copies_from(gnode *n, const ob_value *sublog) {
  const ob_value *pm = ob_array_len(sublog) ? ob_array_get(sublog, 0) : NULL;
  const ob_value *pv = pm && ob_typeof(pm) == OB_OBJECT ? ob_object_get(pm, "plan", 4) : NULL;
  const ob_value *calls = pv && ob_typeof(pv) == OB_OBJECT ? ob_object_get(pv, "plan", 4) : NULL;
  if (!calls || ob_typeof(calls) != OB_ARRAY || !ob_object_get(pv, "each", 4))
    return;
  for (size_t k = 0; k < n->ncopies + (n->nmore ? 1 : 0); k++) /* a message before told them */
    free(n->copy_label[k]);
  free(n->copy_label);
  free(n->copy_fill);
  size_t total = ob_array_len(calls), shown = total < GRAPH_MAX_COPIES ? total : GRAPH_MAX_COPIES;
  int *out = ob_xcalloc(total ? total : 1, sizeof *out);
  ob_map at; /* copy id -> its position + 1 */
  ob_map_init(&at);
  for (size_t k = 0; k < total; k++) {
    const ob_value *id = ob_object_get(ob_array_get(calls, k), "_id", 3);
    if (id && ob_typeof(id) == OB_STRING)
      ob_map_put(&at, ob_string_ptr(id), ob_string_len(id), (void *)(uintptr_t)(k + 1));
  }
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
  }
  n->ncopies = shown;
  n->copy_label = ob_xcalloc(shown + 1, sizeof *n->copy_label); /* the last: "... N more" */
  n->copy_fill = ob_xcalloc(shown ? shown : 1, sizeof *n->copy_fill);
  for (size_t k = 0; k < shown; k++) {
    const ob_value *c = ob_array_get(calls, k), *id = ob_object_get(c, "_id", 3);
    const ob_value *tool = ob_object_get(c, "_tool", 5);
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s\n%s\n%s", id && ob_typeof(id) == OB_STRING ? ob_string_ptr(id) : "?",
                tool && ob_typeof(tool) == OB_STRING ? ob_string_ptr(tool) : "delegate",
                out[k] == OUTCOME_DONE ? "done" : out[k] == OUTCOME_FAILED ? "failed" : "never ran");
    n->copy_label[k] = b.data;
    n->copy_fill[k] = outcome_fill(out[k]);
  }
  n->nmore = total - shown;
  if (n->nmore) { /* the rest, counted: a drawing of 100,000 copies is not readable */
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "... %zu more copies", n->nmore);
    size_t f = 0;
    for (size_t k = shown; k < total; k++)
      f += out[k] == OUTCOME_FAILED;
    if (f)
      ob_buf_addf(&b, "\n%zu failed", f);
    n->copy_label[shown] = b.data;
  }
  ob_map_free(&at);
  free(out);
}

/* Each call's outcome in the journal's log: done when some output message
 * came from it, failed when some error message names it (failure wins: a
 * failed call writes nothing, so both only meet in a journal of several
 * runs). Messages of delegated runs (_log) belong to other plans: ignored. */
static void outcomes(const ob_plan *p, ob_log *log, int *out, graph *g) {
  for (size_t i = 0; i < ob_log_len(log); i++) {
    const ob_msg *m = ob_log_at(log, i);
    const ob_call *c = NULL;
    int outcome = OUTCOME_NONE;
    if (m->type == OB_MSG_OUTPUT) {
      c = call_named(p, NULL, m->call, m->instance);
      outcome = OUTCOME_DONE;
    } else if (m->type == OB_MSG_CONTEXT && !strcmp(ob_string_ptr(m->kind), "error") &&
               ob_typeof(m->value) == OB_OBJECT) {
      const ob_value *id = ob_object_get(m->value, "id", 2);
      c = call_named(p, id && ob_typeof(id) == OB_STRING ? ob_string_ptr(id) : NULL,
                     ob_object_get(m->value, "call", 4), m->instance);
      outcome = OUTCOME_FAILED;
    }
    /* an instance's copies share their index: the position in calls tells them apart */
    if (c && outcome > out[c - p->calls])
      out[c - p->calls] = outcome;
    const ob_value *sublog = m->sublog ? m->sublog
                             : m->raw  ? ob_object_get(m->raw, "_log", 4)
                                       : NULL;
    if (c && c->each && sublog && ob_typeof(sublog) == OB_ARRAY) /* its copies' messages */
      copies_from(&g->nodes[c - p->calls], sublog);
  }
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

/* The first plan message of the log, when it holds a plan other than v. */
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

/* Fills every node by its call's outcome and says it on the label's last line. */
static int colour_by_journal(graph *g, const ob_plan *p, const char *plan_file,
                             const char *journal) {
  ob_error err;
  ob_log *log = ob_log_new();
  ob_log_keep_history(log, 0); /* only read as it ends */
  ob_journal_info info;
  if (ob_journal_load(log, journal, &info, &err) != OB_OK) {
    ob_eprintf("obelus graph: %s\n", err.msg);
    ob_log_free(log);
    return OB_EXIT_USAGE;
  }
  ob_cli_report_torn("obelus graph", journal, &info);
  ob_value *v = ob_json_parse_file(plan_file, &err);
  const char *other = v ? other_plan(log, v) : NULL;
  if (other)
    ob_eprintf("obelus graph: warning: %s is the journal of a run of %s, whose plan is not "
                    "%s's; calls are matched by id\n",
            journal, other, plan_file);
  ob_unref(v);
  int *out = ob_xcalloc(p->ncalls, sizeof *out);
  outcomes(p, log, out, g);
  infer_skips(p, out);
  for (size_t i = 0; i < g->nnodes; i++) {
    gnode *n = &g->nodes[i];
    const char *what;
    if (out[i] == OUTCOME_FAILED) {
      n->fill = FILL_FAILED;
      what = "failed";
    } else if (out[i] == OUTCOME_DONE) {
      n->fill = FILL_DONE;
      what = "done";
    } else if (!p->calls[i].has_output) {
      what = "no record (writes nothing)"; /* fire-and-forget or a thought: left white */
    } else if (out[i] == OUTCOME_SKIPPED) {
      n->fill = FILL_NOT_RUN;
      what = "skipped";
    } else {
      what = "never ran"; /* left white */
    }
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s\n%s", n->label, what);
    free(n->label);
    n->label = b.data;
  }
  free(out);
  ob_log_free(log);
  return OB_EXIT_OK;
}

/* --- printers ------------------------------------------------------------------- */

/* The length of the control character at s: 1 for a C0 one or DEL, 2 for a C1 one
 * (U+0080..U+009F, UTF-8 C2 80..C2 9F: a terminal may take U+009B for CSI when the
 * drawing is shown with cat), 0 for anything else. Both printers write a space for it. */
static size_t control_len(const unsigned char *s) {
  if (*s < 0x20 || *s == 0x7f)
    return 1;
  return s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f ? 2 : 0;
}

/* Inside a dot "..." string: \" and \\ are escapes, and a backslash before a
 * letter would be one of dot's label escapes (\N, \G, \l), so it is doubled. */
static void dot_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(out, "\\%c", ch);
    else if (ch == '\n')
      fputs("\\n", out);
    else if (control_len((const unsigned char *)s)) {
      s += control_len((const unsigned char *)s) - 1;
      fputc(' ', out);
    } else
      fputc(ch, out);
  }
  fputc('"', out);
}

static void dot_edge(FILE *out, const gedge *e) {
  fprintf(out, "  n%zu -> n%zu [label=", e->from, e->to);
  dot_string(out, e->label);
  fputs(e->branch ? ", style=dashed];\n" : "];\n", out);
}

static void print_dot(FILE *out, const graph *g) {
  fputs("digraph plan {\n"
        "  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
        "  edge [fontname=\"Helvetica\", fontsize=10];\n",
        out);
  for (size_t i = 0; i < g->nnodes; i++) {
    const gnode *n = &g->nodes[i];
    fprintf(out, "  n%zu [label=", i);
    dot_string(out, n->label);
    if (n->shape == SHAPE_DETACHED)
      fputs(", shape=cds", out);
    if (n->fill) {
      fputs(", style=\"rounded,filled\", fillcolor=", out);
      dot_string(out, n->fill);
    }
    fputs("];\n", out);
  }
  for (size_t i = 0; i < g->nnodes; i++) { /* an _each call's copies, in a box with it */
    const gnode *n = &g->nodes[i];
    if (!n->ncopies && !n->nmore)
      continue;
    fprintf(out, "  subgraph cluster_n%zu {\n    style=dashed; label=", i);
    dot_string(out, "_each");
    fprintf(out, ";\n    n%zu;\n", i);
    for (size_t k = 0; k < n->ncopies + (n->nmore ? 1 : 0); k++) {
      fprintf(out, "    n%zuc%zu [label=", i, k);
      dot_string(out, n->copy_label[k]);
      if (k < n->ncopies && n->copy_fill[k]) {
        fputs(", style=\"rounded,filled\", fillcolor=", out);
        dot_string(out, n->copy_fill[k]);
      } else if (k == n->ncopies) {
        fputs(", shape=plaintext", out);
      }
      fputs("];\n", out);
      fprintf(out, "    n%zu -> n%zuc%zu [style=dotted, arrowhead=none];\n", i, i, k);
    }
    fputs("  }\n", out);
  }
  each_edge(g->plan, out, dot_edge);
  fputs("}\n", out);
}

/* Inside a Mermaid "..." label: quotes end it, `#...;` is an entity and `|`
 * ends an edge label, and labels may be read as HTML; so these are written as
 * entities. Lines are joined with <br>. */
static void mermaid_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    switch (ch) {
    case '"': fputs("#quot;", out); break;
    case '#': fputs("#35;", out); break;
    case '|': fputs("#124;", out); break;
    case '<': fputs("#lt;", out); break;
    case '>': fputs("#gt;", out); break;
    case '&': fputs("#amp;", out); break;
    case '`': fputs("#96;", out); break;
    case '\n': fputs("<br>", out); break;
    default:
      if (control_len((const unsigned char *)s)) {
        s += control_len((const unsigned char *)s) - 1;
        fputc(' ', out);
      } else {
        fputc(ch, out);
      }
    }
  }
  fputc('"', out);
}

static void mermaid_edge(FILE *out, const gedge *e) {
  fprintf(out, "    n%zu %s", e->from, e->branch ? "-.->" : "-->");
  if (e->label[0]) {
    fputc('|', out);
    mermaid_string(out, e->label);
    fputc('|', out);
  }
  fprintf(out, " n%zu\n", e->to);
}

static void print_mermaid(FILE *out, const graph *g) {
  fputs("flowchart TD\n", out);
  for (size_t i = 0; i < g->nnodes; i++) {
    const gnode *n = &g->nodes[i];
    /* n0["..."] a box, n0>"..."] a flag: the fire-and-forget shape */
    fprintf(out, "    n%zu%s", i, n->shape == SHAPE_DETACHED ? ">" : "[");
    mermaid_string(out, n->label);
    fputs("]\n", out);
  }
  for (size_t i = 0; i < g->nnodes; i++) { /* an _each call's copies, in a subgraph */
    const gnode *n = &g->nodes[i];
    if (!n->ncopies && !n->nmore)
      continue;
    fprintf(out, "    subgraph each_n%zu [\"_each\"]\n", i);
    for (size_t k = 0; k < n->ncopies + (n->nmore ? 1 : 0); k++) {
      fprintf(out, "    n%zuc%zu[", i, k);
      mermaid_string(out, n->copy_label[k]);
      fputs("]\n", out);
    }
    fputs("    end\n", out);
    for (size_t k = 0; k < n->ncopies + (n->nmore ? 1 : 0); k++)
      fprintf(out, "    n%zu -.- n%zuc%zu\n", i, i, k);
  }
  each_edge(g->plan, out, mermaid_edge);
  for (size_t i = 0; i < g->nnodes; i++) {
    if (g->nodes[i].fill)
      fprintf(out, "    style n%zu fill:%s\n", i, g->nodes[i].fill);
    for (size_t k = 0; k < g->nodes[i].ncopies; k++)
      if (g->nodes[i].copy_fill[k])
        fprintf(out, "    style n%zuc%zu fill:%s\n", i, k, g->nodes[i].copy_fill[k]);
  }
}

/* --- the command ---------------------------------------------------------------- */

/* The plan's problems that need no tools are in p->errors already; tools add
 * theirs, and the context must read as messages (as `check` requires). */
static void check_more(ob_plan *p, ob_engine *e) {
  if (e)
    /* 1: the latent handler is a run-time matter (`run --latent`); nothing runs here */
    ob_plan_check_tools(p, &e->tools, 1);
  ob_run_check_messages(p, NULL, "input", 0);
}

int ob_cmd_graph(int argc, char **argv) {
  const char *file = NULL, *journal = NULL, *plans_root = NULL;
  size_t max_edges = GRAPH_MAX_EDGES;
  const char *tools[64];
  int ntools = 0, format = FORMAT_DOT;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(graph_help, stdout);
      return OB_EXIT_OK;
    } else if (!strcmp(a, "--format")) {
      if (++i == argc)
        return ob_cli_usage_error("graph", "--format needs dot or mermaid");
      if (!strcmp(argv[i], "dot"))
        format = FORMAT_DOT;
      else if (!strcmp(argv[i], "mermaid"))
        format = FORMAT_MERMAID;
      else
        return ob_cli_usage_error("graph", "unknown format \"%s\" (dot or mermaid)", argv[i]);
    } else if (!strcmp(a, "--tools")) {
      if (++i == argc)
        return ob_cli_usage_error("graph", "--tools needs a file or folder");
      if (ntools == 64)
        return ob_cli_usage_error("graph", "too many --tools");
      tools[ntools++] = argv[i];
    } else if (!strcmp(a, "--journal")) {
      if (++i == argc)
        return ob_cli_usage_error("graph", "--journal needs a journal file (run --journal)");
      journal = argv[i];
    } else if (!strcmp(a, "--max-edges")) {
      if (++i == argc || !ob_cli_parse_count(argv[i], &max_edges))
        return ob_cli_usage_error("graph", "--max-edges needs a number of edges (0: no bound)");
    } else if (!strcmp(a, "--plans-root")) {
      if (++i == argc)
        return ob_cli_usage_error("graph", "--plans-root needs a folder");
      plans_root = argv[i];
    } else if (a[0] == '-' && a[1] == '-') {
      return ob_cli_usage_error("graph", "unknown option %s", a);
    } else if (!file) {
      file = a;
    } else {
      return ob_cli_usage_error("graph", "unexpected argument \"%s\"", a);
    }
  }
  if (!file)
    return ob_cli_usage_error("graph", "needs a PLAN file");

  ob_error err;
  ob_engine *e = NULL;
  if (ntools && !(e = ob_engine_new(NULL, &err))) {
    ob_eprintf("obelus graph: %s\n", err.msg);
    return OB_EXIT_USAGE;
  }
  if (e)
    ob_engine_set_note(e, ob_cli_note, NULL);
  for (int i = 0; i < ntools; i++)
    if (ob_engine_load_tools(e, tools[i], &err) != OB_OK) {
      ob_eprintf("obelus graph: %s\n", err.msg);
      ob_engine_free(e);
      return OB_EXIT_USAGE;
    }
  ob_plan *p = ob_plan_load(file, &err);
  char *dir = p && !plans_root ? ob_plan_default_root(file) : NULL;
  if (p && !(p->root = ob_plans_root(plans_root ? plans_root : dir, &err))) {
    ob_plan_free(p);
    p = NULL;
  }
  free(dir);
  if (!p) {
    ob_eprintf("obelus graph: %s\n", err.msg);
    ob_engine_free(e);
    return OB_EXIT_USAGE;
  }
  check_more(p, e);
  int rc = OB_EXIT_OK;
  if (p->nerrors) {
    for (size_t i = 0; i < p->nerrors; i++)
      ob_eprintf("%s\n", p->errors[i]);
    fprintf(stderr, "obelus graph: %zu problem%s, nothing drawn\n", p->nerrors,
            p->nerrors == 1 ? "" : "s");
    rc = OB_EXIT_USAGE;
  } else if (max_edges && count_links(p) > max_edges) {
    ob_eprintf("obelus graph: %s has %zu dependencies between its %zu calls, more than "
                    "--max-edges %zu draws (a drawing that big is not readable); nothing drawn: "
                    "raise --max-edges, or 0 to draw it whatever its size\n",
            file, count_links(p), p->ncalls, max_edges);
    rc = OB_EXIT_USAGE;
  } else {
    graph g;
    build_graph(&g, p);
    if (journal)
      rc = colour_by_journal(&g, p, file, journal);
    if (rc == OB_EXIT_OK && format == FORMAT_DOT)
      print_dot(stdout, &g);
    else if (rc == OB_EXIT_OK)
      print_mermaid(stdout, &g);
    free_graph(&g);
  }
  ob_plan_free(p);
  if (e)
    ob_engine_free(e);
  return rc;
}
