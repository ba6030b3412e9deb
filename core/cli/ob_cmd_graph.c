/* ob_cmd_graph.c -- `obelus graph PLAN [--format dot|mermaid|svg] [--tools PATH]...
 * [--journal J]` and `obelus graph --journal J`: the plan's dependency DAG, or a run's,
 * as Graphviz dot, a Mermaid flowchart, or SVG laid out by Graphviz.
 *
 * A thin layer over host/ob_graph.h, which builds the drawing (its header says what is
 * drawn and how nodes are named): the options, the plan file read and checked (with
 * --tools, against the tools), the journal's problems said, the text printed. Without
 * PLAN the plan is the one the journal's plan message holds. --format svg hands the dot
 * text to Graphviz's `dot` (ob_graph_svg_sync: at most 20 s, 64 MB of SVG).
 *
 * Costs: the drawing's text in memory (a plan of n writers and m readers that all link
 * has n*m edges): a plan with more dependencies than --max-edges (10000 by default) is
 * refused before anything is drawn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"
#include "engine/ob_engine.h"
#include "engine/ob_run.h"
#include "host/ob_graph.h"
#include "log/ob_journal.h"
#include "plan/ob_plan.h"

static const char graph_help[] =
    "usage: obelus graph PLAN [--format dot|mermaid] [--tools PATH]... [--journal J]\n"
    "                    [--plans-root DIR] [--max-edges N] [--max-calls N]\n"
    "                    [--lenient-schemas]\n"
    "       obelus graph --journal J [--format dot|mermaid|svg] [--max-edges N]\n"
    "                    [--max-calls N]\n"
    "\n"
    "Prints the dependency graph of PLAN (without PLAN: of the plan the journal J\n"
    "ran, as its first line holds it): one node per call (its id and tool),\n"
    "one edge from each call to each call that reads what it writes, labelled\n"
    "with the path that links them (\"written \xE2\x86\x92 read\" when they differ).\n"
    "Edges from a call with `||` branches are dashed, one per alternative;\n"
    "calls with no _outputPath (fire-and-forget) have an arrow-shaped node.\n"
    "Nothing runs and no tool is needed; with --tools the calls are also checked\n"
    "against the tools' schemas. Exit 0 when drawn, 2 when the plan is invalid\n"
    "(every problem on stderr, stdout empty; a plan whose only problems are\n"
    "dependency cycles is drawn, the cycles' edges red, then refused) or on usage\n"
    "errors.\n"
    "\n"
    "  --format dot|mermaid|svg  Graphviz dot (default), a Mermaid `flowchart TD`,\n"
    "                        or SVG laid out by Graphviz's dot (which must be\n"
    "                        installed; killed after 20 s or 64 MB of SVG; exit 1\n"
    "                        when it fails). In dot and SVG every node has the id\n"
    "                        call-<i> (i: the call's position in the plan; below a\n"
    "                        call, call-<i>-<k>: the k-th call of the run it made)\n"
    "  --tools PATH          a tool file (.lua) or a folder of them; repeatable\n"
    "  --lenient-schemas     let the tools' schemas use unknown keywords and formats\n"
    "  --journal J           colour each call by its outcome in the run journal J\n"
    "                        (`run --journal J`): done green, failed red, skipped\n"
    "                        grey, never ran white. A journal records outputs and\n"
    "                        errors, not skips: a call without a record whose\n"
    "                        dependencies all settled counts as skipped, one whose\n"
    "                        dependencies did not as never ran; a fire-and-forget\n"
    "                        call that did not fail is left white (it writes\n"
    "                        nothing to tell). The outcome is also the node's last\n"
    "                        label line. The runs calls made are drawn in a box\n"
    "                        with their call, each call by its outcome: an _each\n"
    "                        call's copies (24 at most, the rest counted) and a\n"
    "                        delegated plan's calls with their edges.\n"
    "  --plans-root DIR      with --tools, where delegated plans must lie (as for\n"
    "                        run; default: PLAN's folder)\n"
    "  --max-edges N         refuse (exit 2, nothing drawn) a plan with more than N\n"
    "                        dependencies between its calls (default 10000; 0: no\n"
    "                        bound)\n"
    "  --max-calls N         draw the first N calls (the plan's, then those of the\n"
    "                        runs they made), the rest counted in a \"... N more\n"
    "                        calls\" node (default 0: all)\n"
    "\n"
    "examples:\n"
    "  obelus graph plan.json | dot -Tsvg > plan.svg\n"
    "  obelus graph plan.json --format mermaid > plan.mmd\n"
    "  obelus graph plans/weather/plan.json --tools plans/weather/tools\n"
    "  obelus run plan.json --tools tools/ --journal run.jsonl\n"
    "  obelus graph plan.json --journal run.jsonl | dot -Tsvg > run.svg\n"
    "  obelus graph --journal run.jsonl --format svg > run.svg\n";

enum { FORMAT_DOT, FORMAT_MERMAID, FORMAT_SVG };

/* --- the command ---------------------------------------------------------------- */

/* The plan's problems that need no tools are in p->errors already; tools add
 * theirs, and the context must read as messages (as `check` requires). */
static void check_more(ob_plan *p, ob_engine *e) {
  if (e)
    /* 1: the latent handler is a run-time matter (`run --latent`); nothing runs here */
    ob_plan_check_tools(p, &e->tools, 1);
  ob_run_check_messages(p, NULL, "input", 0);
}

/* Prints g in format: 0, or 1 when dot could not make the SVG (said on stderr). */
static int print_graph(const ob_graph *g, int format) {
  ob_buf text;
  ob_buf_init(&text);
  int rc = OB_EXIT_OK;
  if (format == FORMAT_MERMAID) {
    ob_graph_mermaid(g, &text);
  } else {
    ob_graph_dot(g, &text);
    if (format == FORMAT_SVG) {
      ob_buf svg;
      ob_error err;
      ob_buf_init(&svg);
      if (ob_graph_svg_sync(text.data, text.len, &svg, &err) != OB_OK) {
        ob_eprintf("obelus graph: %s\n", err.msg);
        rc = OB_EXIT_FAIL;
      }
      ob_buf_free(&text);
      text = svg;
    }
  }
  if (rc == OB_EXIT_OK && text.len)
    fwrite(text.data, 1, text.len, stdout);
  ob_buf_free(&text);
  return rc;
}

static int too_many_edges(const char *what, const ob_plan *p, size_t max_edges) {
  size_t links = ob_graph_links(p);
  if (!max_edges || links <= max_edges)
    return 0;
  ob_eprintf("obelus graph: %s has %zu dependencies between its %zu calls, more than "
             "--max-edges %zu draws (a drawing that big is not readable); nothing drawn: "
             "raise --max-edges, or 0 to draw it whatever its size\n",
             what, links, p->ncalls, max_edges);
  return 1;
}

/* `obelus graph --journal J`: the plan the journal ran, coloured by it. */
static int graph_journal(const char *journal, int format, size_t max_edges, size_t max_calls) {
  ob_error err;
  ob_journal_info info;
  ob_graph *g = ob_graph_from_journal(journal, max_calls, &info, &err);
  if (!g) {
    ob_eprintf("obelus graph: %s\n", err.msg);
    return OB_EXIT_USAGE;
  }
  ob_cli_report_torn("obelus graph", journal, &info);
  int rc = OB_EXIT_USAGE;
  if (!too_many_edges(journal, ob_graph_plan(g), max_edges)) {
    ob_graph_set_max_edges(g, 0); /* counted above */
    rc = print_graph(g, format);
  }
  ob_graph_free(g);
  return rc;
}

int ob_cmd_graph(int argc, char **argv) {
  const char *file = NULL, *journal = NULL, *plans_root = NULL;
  size_t max_edges = OB_GRAPH_MAX_EDGES, max_calls = 0;
  const char *tools[64];
  int ntools = 0, format = FORMAT_DOT, lenient_schemas = 0;
  ob_cli_args args;
  ob_cli_args_start(&args, argc, argv);
  int k;
  while ((k = ob_cli_args_next(&args)) > 0) {
    const char *a = args.opt, *val = args.val;
    if (!a) {
      if (file)
        return ob_cli_usage_error("graph", "unexpected argument \"%s\"", val);
      file = val;
    } else if (!strcmp(a, "--help")) {
      fputs(graph_help, stdout);
      return OB_EXIT_OK;
    } else if (!strcmp(a, "--format")) {
      if (!strcmp(val, "dot"))
        format = FORMAT_DOT;
      else if (!strcmp(val, "mermaid"))
        format = FORMAT_MERMAID;
      else if (!strcmp(val, "svg"))
        format = FORMAT_SVG;
      else
        return ob_cli_usage_error("graph", "unknown format \"%s\" (dot, mermaid or svg)", val);
    } else if (!strcmp(a, "--tools")) {
      if (ntools == 64)
        return ob_cli_usage_error("graph", "too many --tools");
      tools[ntools++] = val;
    } else if (!strcmp(a, "--journal")) {
      journal = val;
    } else if (!strcmp(a, "--max-edges")) {
      if (!ob_cli_parse_count(val, &max_edges))
        return ob_cli_usage_error("graph", "--max-edges needs a number of edges (0: no bound)");
    } else if (!strcmp(a, "--max-calls")) {
      if (!ob_cli_parse_count(val, &max_calls))
        return ob_cli_usage_error("graph", "--max-calls needs a number of calls (0: no bound)");
    } else if (!strcmp(a, "--plans-root")) {
      plans_root = val;
    } else if (!strcmp(a, "--lenient-schemas")) {
      lenient_schemas = 1;
    } else {
      return ob_cli_args_unhandled(&args);
    }
  }
  if (k < 0)
    return OB_EXIT_USAGE;
  if (!file && !journal)
    return ob_cli_usage_error("graph", "needs a PLAN file (or --journal J)");
  if (!file && (ntools || plans_root))
    return ob_cli_usage_error("graph", "--tools and --plans-root check a PLAN file: give one");
  if (!file)
    return graph_journal(journal, format, max_edges, max_calls);

  ob_error err;
  ob_engine *e = NULL;
  if (ntools && !(e = ob_engine_new(NULL, &err))) {
    ob_eprintf("obelus graph: %s\n", err.msg);
    return OB_EXIT_USAGE;
  }
  if (e) {
    ob_engine_set_note(e, ob_cli_note, NULL);
    e->lenient_schemas = lenient_schemas;
  }
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
  /* a plan whose only problems are dependency cycles is drawn, its cycles marked, and
   * is still refused (exit 2): the picture shows where the loop is */
  int cyclic = p->nerrors && p->nerrors == p->ncycles;
  if (p->nerrors) {
    for (size_t i = 0; i < p->nerrors; i++)
      ob_eprintf("%s\n", p->errors[i]);
    fprintf(stderr, "obelus graph: %zu problem%s, %s\n", p->nerrors, p->nerrors == 1 ? "" : "s",
            cyclic ? "drawn with each cycle's edges in red" : "nothing drawn");
  }
  if (p->nerrors && !cyclic) {
    rc = OB_EXIT_USAGE;
  } else if (too_many_edges(file, p, max_edges)) {
    rc = OB_EXIT_USAGE;
  } else {
    ob_graph *g = ob_graph_new(p, max_calls);
    ob_graph_set_max_edges(g, 0); /* counted above */
    if (journal) {
      ob_journal_info info;
      char *other = NULL;
      ob_value *v = ob_json_parse_file(file, &err);
      if (ob_graph_color(g, journal, v, &info, &other, &err) != OB_OK) {
        ob_eprintf("obelus graph: %s\n", err.msg);
        rc = OB_EXIT_USAGE;
      } else {
        ob_cli_report_torn("obelus graph", journal, &info);
        if (other)
          ob_eprintf("obelus graph: warning: %s is the journal of a run of %s, whose plan is not "
                     "%s's; calls are matched by id\n",
                     journal, other, file);
      }
      free(other);
      ob_unref(v);
    }
    if (rc == OB_EXIT_OK)
      rc = print_graph(g, format);
    if (cyclic && rc == OB_EXIT_OK)
      rc = OB_EXIT_USAGE;
    ob_graph_free(g);
  }
  ob_plan_free(p);
  if (e)
    ob_engine_free(e);
  return rc;
}
