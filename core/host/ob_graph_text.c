/* ob_graph_text.c -- the graph's model (ob_graph_int.h) written as Graphviz DOT or a
 * Mermaid flowchart, into an ob_buf.
 *
 * DOT: the top plan's nodes, then each run a call made as a dashed cluster holding the
 * call's node and the run's (nested for runs inside runs), an _each call linked to each
 * copy and a delegating call to the delegated plan's first calls by dotted lines, then
 * the edges. Every node carries id="call-..." (and class="<outcome>" once coloured):
 * ob_graph.h says the names. Mermaid: the same in a `flowchart TD`, runs as subgraphs,
 * fills as `style` lines at the end. Both escape every label: ids, tools and paths may
 * hold quotes, backslashes, `|`, `#`, `<` and control characters.
 *
 * Costs: the text, written once; edges made and written one at a time. */
#include <stdio.h>
#include <string.h>

#include "host/ob_graph_int.h"

/* The length of the control character at s: 1 for a C0 one or DEL, 2 for a C1 one
 * (U+0080..U+009F, UTF-8 C2 80..C2 9F: a terminal may take U+009B for CSI when the
 * drawing is shown with cat), 0 for anything else. Both printers write a space for it. */
static size_t control_len(const unsigned char *s) {
  if (*s < 0x20 || *s == 0x7f)
    return 1;
  return s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f ? 2 : 0;
}

/* --- DOT --------------------------------------------------------------------------- */

/* Inside a dot "..." string: \" and \\ are escapes, and a backslash before a
 * letter would be one of dot's label escapes (\N, \G, \l), so it is doubled. */
static void dot_string(ob_buf *out, const char *s) {
  ob_buf_addc(out, '"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      ob_buf_addc(out, '\\');
      ob_buf_addc(out, (char)ch);
    } else if (ch == '\n') {
      ob_buf_add(out, "\\n", 2);
    } else if (control_len((const unsigned char *)s)) {
      s += control_len((const unsigned char *)s) - 1;
      ob_buf_addc(out, ' ');
    } else {
      ob_buf_addc(out, (char)ch);
    }
  }
  ob_buf_addc(out, '"');
}

static void dot_edge(gdraw *d, const glevel *lv, const char *ind, const gedge *e) {
  ob_buf_addf(d->out, "%s%s%zu -> %s%zu [label=", ind, lv->name, e->from, lv->name, e->to);
  dot_string(d->out, e->label);
  if (e->cycle) /* on a dependency cycle */
    ob_buf_addf(d->out, ", color=\"#c00000\", fontcolor=\"#c00000\", penwidth=2, class=\"cycle\"");
  ob_buf_addf(d->out, e->branch ? ", style=dashed];\n" : "];\n");
}

/* A node: its label, shape and fill, then its id and class (ob_graph.h's names). The
 * nodes of runs (below the top) get the id and class in a statement of their own, after
 * the node's: their lines are as they were before nodes had ids. */
static void dot_node(ob_buf *out, const char *ind, const glevel *lv, size_t i) {
  const gnode *n = &lv->nodes[i];
  ob_buf_addf(out, "%s%s%zu [label=", ind, lv->name, i);
  dot_string(out, n->label);
  if (n->shape == SHAPE_DETACHED)
    ob_buf_addf(out, ", shape=cds");
  if (n->fill) {
    ob_buf_addf(out, ", style=\"rounded,filled\", fillcolor=");
    dot_string(out, n->fill);
  }
  if (lv->depth)
    ob_buf_addf(out, "];\n%s%s%zu [id=\"%s%zu\"", ind, lv->name, i, lv->idp, i);
  else
    ob_buf_addf(out, ", id=\"%s%zu\"", lv->idp, i);
  if (n->klass)
    ob_buf_addf(out, ", class=\"%s\"", n->klass);
  ob_buf_add(out, "];\n", 3);
}

/* The id of lv's "... N more" node: "more", or "more-<positions>" below a call. */
static void more_id(ob_buf *out, const glevel *lv) {
  size_t n = strlen(lv->idp); /* "call-" or "call-1-0-" */
  ob_buf_add(out, "more", 4);
  if (n > 5)
    ob_buf_add(out, lv->idp + 4, n - 5);
}

static void dot_level(gdraw *d, const glevel *lv, const char *ind);

/* The run node i of lv made, in a dashed box with it. */
static void dot_run(gdraw *d, const glevel *lv, size_t i, const char *ind) {
  const glevel *sub = lv->nodes[i].sub;
  ob_buf *out = d->out;
  if (!sub || (!sub->shown && !sub->more))
    return;
  char in[80];
  snprintf(in, sizeof in, "%s  ", ind);
  ob_buf_addf(out, "%ssubgraph cluster_%s%zu {\n%sstyle=dashed; label=", ind, lv->name, i, in);
  dot_string(out, sub->title);
  ob_buf_addf(out, ";\n%s%s%zu;\n", in, lv->name, i);
  for (size_t k = 0; k < sub->shown + (sub->more ? 1 : 0); k++) {
    if (k < sub->shown) {
      dot_node(out, in, sub, k);
    } else {
      ob_buf_addf(out, "%s%s%zu [label=", in, sub->name, k);
      dot_string(out, sub->more);
      ob_buf_addf(out, ", shape=plaintext];\n%s%s%zu [id=\"", in, sub->name, k);
      more_id(out, sub);
      ob_buf_add(out, "\"];\n", 4);
    }
    /* every copy linked to its call; a delegated plan's first calls (and the rest,
     * counted) to the call that delegated */
    if (sub->each || k == sub->shown || !sub->plan->calls[k].ndeps)
      ob_buf_addf(out, "%s%s%zu -> %s%zu [style=dotted, arrowhead=none];\n", in, lv->name, i,
                  sub->name, k);
  }
  dot_level(d, sub, in);
  ob_buf_addf(out, "%s}\n", ind);
}

/* A level's runs, then its edges. */
static void dot_level(gdraw *d, const glevel *lv, const char *ind) {
  if (lv->depth > OB_GRAPH_MAX_DEPTH)
    return;
  for (size_t i = 0; i < lv->shown; i++)
    dot_run(d, lv, i, ind);
  ob_graph_each_edge(d, lv, ind);
}

void ob_graph_dot(const ob_graph *g, ob_buf *out) {
  const glevel *top = &g->top;
  ob_buf_addf(out, "digraph plan {\n"
                   "  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
                   "  edge [fontname=\"Helvetica\", fontsize=10];\n");
  for (size_t i = 0; i < top->shown; i++)
    dot_node(out, "  ", top, i);
  if (top->more) {
    ob_buf_addf(out, "  nmore [label=");
    dot_string(out, top->more);
    ob_buf_addf(out, ", shape=plaintext, id=\"more\"];\n");
  }
  gdraw d = {out, dot_edge, 0, 0, g->max_edges};
  dot_level(&d, top, "  ");
  if (d.skipped) {
    ob_buf_addf(out, "  nnote [label=\"%zu more dependencies, not drawn (%zu are)\", "
                     "shape=plaintext, id=\"note\"];\n",
                d.skipped, d.edges);
  }
  ob_buf_add(out, "}\n", 2);
}

/* --- Mermaid ----------------------------------------------------------------------- */

/* Inside a Mermaid "..." label: quotes end it, `#...;` is an entity and `|`
 * ends an edge label, and labels may be read as HTML; so these are written as
 * entities. Lines are joined with <br>. */
static void mermaid_string(ob_buf *out, const char *s) {
  ob_buf_addc(out, '"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    switch (ch) {
    case '"': ob_buf_addf(out, "#quot;"); break;
    case '#': ob_buf_addf(out, "#35;"); break;
    case '|': ob_buf_addf(out, "#124;"); break;
    case '<': ob_buf_addf(out, "#lt;"); break;
    case '>': ob_buf_addf(out, "#gt;"); break;
    case '&': ob_buf_addf(out, "#amp;"); break;
    case '`': ob_buf_addf(out, "#96;"); break;
    case '\n': ob_buf_addf(out, "<br>"); break;
    default:
      if (control_len((const unsigned char *)s)) {
        s += control_len((const unsigned char *)s) - 1;
        ob_buf_addc(out, ' ');
      } else {
        ob_buf_addc(out, (char)ch);
      }
    }
  }
  ob_buf_addc(out, '"');
}

static void mermaid_edge(gdraw *d, const glevel *lv, const char *ind, const gedge *e) {
  (void)ind;
  ob_buf_addf(d->out, "    %s%zu %s", lv->name, e->from,
              e->cycle ? "==>" : e->branch ? "-.->" : "-->"); /* a cycle's edges thick */
  if (e->label[0]) {
    ob_buf_addc(d->out, '|');
    mermaid_string(d->out, e->label);
    ob_buf_addc(d->out, '|');
  }
  ob_buf_addf(d->out, " %s%zu\n", lv->name, e->to);
}

/* n0["..."] a box, n0>"..."] a flag: the fire-and-forget shape */
static void mermaid_node(ob_buf *out, const glevel *lv, size_t i) {
  const gnode *n = &lv->nodes[i];
  ob_buf_addf(out, "    %s%zu%s", lv->name, i, n->shape == SHAPE_DETACHED ? ">" : "[");
  mermaid_string(out, n->label);
  ob_buf_add(out, "]\n", 2);
}

static int drawn_run(const glevel *sub) {
  return sub && (sub->shown || sub->more) && sub->depth <= OB_GRAPH_MAX_DEPTH;
}

/* The run node i of lv made, as a subgraph of its nodes (and the runs they made, nested);
 * links and edges come after every block (mermaid_links): an edge written inside a
 * block would pull its nodes into that block. */
static void mermaid_block(ob_buf *out, const glevel *lv, size_t i) {
  const glevel *sub = lv->nodes[i].sub;
  if (!drawn_run(sub))
    return;
  ob_buf_addf(out, "    subgraph %s_%s%zu [", sub->each ? "each" : "run", lv->name, i);
  mermaid_string(out, sub->title);
  ob_buf_add(out, "]\n", 2);
  for (size_t k = 0; k < sub->shown; k++)
    mermaid_node(out, sub, k);
  if (sub->more) {
    ob_buf_addf(out, "    %s%zu[", sub->name, sub->shown);
    mermaid_string(out, sub->more);
    ob_buf_add(out, "]\n", 2);
  }
  for (size_t k = 0; k < sub->shown; k++)
    mermaid_block(out, sub, k);
  ob_buf_addf(out, "    end\n");
}

/* The run's links to the call that made it (every copy; a delegated plan's first calls
 * and its "more" node), its edges, then those of the runs inside it. */
static void mermaid_links(gdraw *d, const glevel *lv, size_t i) {
  const glevel *sub = lv->nodes[i].sub;
  if (!drawn_run(sub))
    return;
  for (size_t k = 0; k < sub->shown + (sub->more ? 1 : 0); k++)
    if (sub->each || k == sub->shown || !sub->plan->calls[k].ndeps)
      ob_buf_addf(d->out, "    %s%zu -.- %s%zu\n", lv->name, i, sub->name, k);
  ob_graph_each_edge(d, sub, "");
  for (size_t k = 0; k < sub->shown; k++)
    mermaid_links(d, sub, k);
}

static void mermaid_runs(gdraw *d, const glevel *lv) {
  for (size_t i = 0; i < lv->shown; i++) {
    mermaid_block(d->out, lv, i);
    mermaid_links(d, lv, i);
  }
}

static void mermaid_styles(ob_buf *out, const glevel *lv) {
  for (size_t i = 0; i < lv->shown; i++) {
    if (lv->nodes[i].fill)
      ob_buf_addf(out, "    style %s%zu fill:%s\n", lv->name, i, lv->nodes[i].fill);
    if (drawn_run(lv->nodes[i].sub))
      mermaid_styles(out, lv->nodes[i].sub);
  }
}

void ob_graph_mermaid(const ob_graph *g, ob_buf *out) {
  const glevel *top = &g->top;
  ob_buf_addf(out, "flowchart TD\n");
  for (size_t i = 0; i < top->shown; i++)
    mermaid_node(out, top, i);
  if (top->more) {
    ob_buf_addf(out, "    nmore[");
    mermaid_string(out, top->more);
    ob_buf_add(out, "]\n", 2);
  }
  gdraw d = {out, mermaid_edge, 0, 0, g->max_edges};
  mermaid_runs(&d, top);
  ob_graph_each_edge(&d, top, "");
  if (d.skipped)
    ob_buf_addf(out, "    nnote[\"%zu more dependencies, not drawn (%zu are)\"]\n", d.skipped,
                d.edges);
  mermaid_styles(out, top);
}
