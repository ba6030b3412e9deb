/* ob_graph.h -- a plan's dependency graph, or a run's, as Graphviz DOT or a Mermaid
 * flowchart (ob_graph.c), and DOT laid out as SVG by Graphviz's `dot` run as a child
 * process (ob_graph_svg.c). What `obelus graph` prints, `obelus report` and `obelus ui`
 * draw.
 *
 * The graph: one node per call (its id, its tool, its instance, "each †list" for an
 * _each call; a fire-and-forget call has an arrow-shaped node), one edge from each
 * call to each call that reads what it writes, labelled with the linking paths; an
 * edge through one `||` alternative of the writer is dashed. With a journal each node
 * is filled by its call's outcome in that run, the outcome on its label's last line
 * (done green, failed red, skipped grey, never ran white; a call whose error a `||`
 * alternative received wrote there: done), and the runs a call made are drawn in a
 * dashed box with it, each call of them by its outcome: an _each call's copies
 * (labelled "_each": at most OB_GRAPH_MAX_COPIES of them, the rest counted in a
 * "... N more copies" node) and a delegated plan's calls with their own edges
 * (labelled "_delegate FILE"), as deep as OB_GRAPH_MAX_DEPTH. A run is known from its
 * delegating call's output or error message (its "_log"): a delegation still running
 * has none yet, and is drawn as its node alone.
 *
 * NODE NAMES (stable, for a page that maps a drawn node back to a call). A node is
 * named by the positions of its call, from the top plan down: "n<i>" for call i of the
 * plan (its position in the plan as read, every instance's copy of a call its own
 * position: ob_plan's calls), "n<i>c<k>" for call k of the run call n<i> made (the k-th
 * _each copy; the k-th call of the delegated plan), "n<i>c<k>c<m>" below that, and so
 * on. In DOT each node carries id="call-<i>", "call-<i>-<k>", ... (the same positions)
 * and, when a journal coloured it, class="<outcome>" (done, failed, skipped,
 * never-ran, no-record); Graphviz's SVG puts the id on the node's <g> (with class
 * "node <outcome>") and its name in the node's <title>. ob_trace.h's OB_TRACE_RUN gives
 * every call the same id ("node"). A "... N more" node is named after the positions it
 * stands for (n<i>c<k>, k the first not drawn; "nmore" at the top) with id "more" or
 * "more-<i>"; it is no call's.
 *
 * BOUNDS. max_calls bounds the nodes drawn (0: none): the plan's calls first, in plan
 * order, then the runs' calls as the journal tells them; the calls past it are counted
 * in a "... N more calls" node (how many failed too) and their edges left out. A UI
 * should ask for OB_GRAPH_MAX_CALLS: Graphviz lays out a couple of thousand nodes in
 * seconds, a hundred thousand not in minutes. The edges drawn between those calls are
 * bounded too (max_edges; the rest counted on a note node). The command line refuses a
 * plan with more dependencies than --max-edges before drawing (ob_graph_links).
 *
 * Costs: the nodes' labels in memory, and the text built whole in an ob_buf (edges are
 * made one at a time, never held). With a journal: the journal read once (its messages
 * held while the graph is built: ob_journal_load), and each run a call made read as a
 * plan. Drawing SVG: the DOT text and the SVG in memory (at most OB_GRAPH_SVG_MAX), and
 * one `dot` process for at most OB_GRAPH_SVG_TIMEOUT_MS. */
#ifndef OB_GRAPH_H
#define OB_GRAPH_H

#include <uv.h>

#include "base/ob_buf.h"
#include "base/ob_error.h"
#include "base/ob_value.h"
#include "log/ob_journal.h"
#include "plan/ob_plan.h"

#define OB_GRAPH_MAX_CALLS ((size_t)2000)   /* what a UI asks for: see BOUNDS above */
#define OB_GRAPH_MAX_EDGES ((size_t)10000)  /* the command line's --max-edges default */
#define OB_GRAPH_MAX_COPIES 24              /* an _each call's copies drawn */
#define OB_GRAPH_MAX_DEPTH 16               /* runs inside runs drawn */
#define OB_GRAPH_SVG_TIMEOUT_MS 20000       /* dot killed (SIGKILL) past it */
#define OB_GRAPH_SVG_MAX ((size_t)64 << 20) /* an SVG larger than this is refused */

typedef struct ob_graph ob_graph;

/* The graph of plan p (borrowed: it must outlive the graph; its problems, if any, are
 * the caller's to refuse), at most max_calls nodes drawn (0: all). */
ob_graph *ob_graph_new(const ob_plan *p, size_t max_calls);
/* Edges drawn at most (0: all; the default OB_GRAPH_MAX_EDGES). */
void ob_graph_set_max_edges(ob_graph *g, size_t max_edges);
void ob_graph_free(ob_graph *g);

/* The dependencies (writer, reader pairs) between p's calls: what a bound on edges
 * counts. */
size_t ob_graph_links(const ob_plan *p);

/* Colours g by the run the journal at path records (as above), and reads the runs its
 * calls made. plan_value (may be NULL): the plan g's was read from; when the journal's
 * plan message holds another, *other (when other is not NULL) gets what names the
 * journal's plan: its file, or "another plan" (malloc'd; NULL otherwise), and calls are
 * matched by id. info (may be NULL): what reading the journal found (a torn last line,
 * for the caller to say). OB_OK, or an error code with err (the journal unusable; g
 * unchanged). */
int ob_graph_color(ob_graph *g, const char *path, const ob_value *plan_value,
                   ob_journal_info *info, char **other, ob_error *err);

/* The graph's text, added to out. */
void ob_graph_dot(const ob_graph *g, ob_buf *out);
void ob_graph_mermaid(const ob_graph *g, ob_buf *out);

/* The graph of the run the journal at path records, its plan read from the journal's
 * plan message (no plan file needed; the graph owns it), coloured (ob_graph_color), at
 * most max_calls nodes drawn (0: all). NULL with err when the journal cannot be read or
 * holds no plan message. */
ob_graph *ob_graph_from_journal(const char *path, size_t max_calls, ob_journal_info *info,
                                ob_error *err);
/* The same from a journal already read into log (ob_journal_load_text: a fleet job's
 * journal): name stands for its file. */
ob_graph *ob_graph_from_log(ob_log *log, const char *name, size_t max_calls,
                            ob_error *err);
/* The plan g draws. */
const ob_plan *ob_graph_plan(const ob_graph *g);

/* The DOT of the run the journal at path records, its plan read from the journal's
 * plan message (no plan file needed): what `obelus graph --journal J` prints and the UI
 * draws. At most max_calls nodes (0: OB_GRAPH_MAX_CALLS) and OB_GRAPH_MAX_EDGES edges.
 * OB_OK with the text added to out, or an error code with err. */
int ob_graph_journal_dot(const char *path, size_t max_calls, ob_buf *out,
                         ob_journal_info *info, ob_error *err);

/* --- SVG by Graphviz (ob_graph_svg.c) ------------------------------------------------- */

/* ok 1: svg[0..len) is the drawing (NUL-terminated; borrowed for the call), err NULL.
 * ok 0: err says why (dot is not installed, took more than OB_GRAPH_SVG_TIMEOUT_MS, wrote
 * more than OB_GRAPH_SVG_MAX, failed: its exit status and the first line of what it
 * said on its standard error), svg NULL. */
typedef void (*ob_graph_svg_cb)(void *ud, int ok, const char *svg, size_t len, const char *err);

/* Runs `dot -Tsvg` (found on PATH) as a child process on loop: dot[0..len) (copied: the
 * caller may free it at once) written to its standard input, its standard output read.
 * cb is called exactly once, from the loop, never before this returns; by then every
 * handle the job opened is closed. The loop must run until then (at most
 * OB_GRAPH_SVG_TIMEOUT_MS and a little). Writing to a dot that died raises no SIGPIPE
 * (the input is a socket written with MSG_NOSIGNAL). */
void ob_graph_svg(uv_loop_t *loop, const char *dot, size_t len, ob_graph_svg_cb cb, void *ud);

/* The same, blocking (a loop of its own): OB_OK with the SVG added to svg, or an error
 * code with err saying why. For `obelus report` and `obelus graph --format svg`. */
int ob_graph_svg_sync(const char *dot, size_t len, ob_buf *svg, ob_error *err);

/* The SVG of the run the journal at path records (ob_graph_journal_dot, then
 * ob_graph_svg): OB_OK and cb called later, once; or an error code with err when the
 * journal cannot be read (cb never called). The journal is read before this returns. */
int ob_graph_journal_svg(uv_loop_t *loop, const char *path, size_t max_calls,
                         ob_graph_svg_cb cb, void *ud, ob_error *err);

#endif
