/* ob_cmd_report.c -- `obelus report JOURNAL -o run.html`: a run to look at, in one
 * self-contained HTML file (no network, no external script or style): the run page of
 * the web app `obelus ui` serves (ui/app.js and ui/app.css, built into the library:
 * host/ob_ui_assets.h), inline, in its static mode: no server is asked anything, and no
 * button acts. It draws the run as the app does: the dependency graph coloured by
 * outcome, a timeline with a time axis (a bar per attempt, sub-plans' calls under the
 * call that delegated them), the calls, and a side panel for the chosen call.
 *
 * The data is embedded as JSON in <script type="application/json"> elements (every "<"
 * written "\u003c", so that no value can end one or open an HTML comment in it): the
 * run as ob_trace reads it (OB_TRACE_RUN) with its source, the graph's SVG when there is
 * one (report_graph_svg), and the documents at up to REPORT_POINTS messages of the log
 * (the slider's stops; only the last when they would weigh more than REPORT_STATES_MAX
 * or cost more than REPORT_REPLAY_MAX messages replayed).
 * -o the journal itself (ob_files: any name of the same file) is refused before it is
 * read; a page not written whole (a full disk) is exit 4 (OB_EXIT_WRITE).
 * Costs: the journal read twice (the trace, the log); the page is the data plus the
 * app (~60 KB). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"
#include "drive/ob_files.h"
#include "host/ob_graph.h"
#include "host/ob_trace.h"
#include "host/ob_ui_assets.h"
#include "log/ob_log.h"

#define REPORT_POINTS 9                       /* the documents at message 0, M/8, ..., M */
#define REPORT_STATES_MAX ((size_t)4 << 20) /* bytes of documents past which only M's */
#define REPORT_REPLAY_MAX 40000 /* messages replayed for the points in all (each point
                                   replays the log to it: ~35 us a message measured) */

/* The run's dependency graph as SVG, laid out by Graphviz's dot (host/ob_graph.h: each
 * call's node a <g class="node" id="..."> whose id is its call's "node" in the trace),
 * at most OB_GRAPH_MAX_CALLS calls drawn; NULL when there is none (dot missing, or it
 * failed): app.js then lays the graph out itself up to 400 calls. A new string. */
static char *report_graph_svg(const char *journal) {
  ob_buf dot, svg;
  ob_buf_init(&dot);
  ob_buf_init(&svg);
  ob_error err;
  char *out = NULL;
  if (ob_graph_journal_dot(journal, OB_GRAPH_MAX_CALLS, &dot, NULL, &err) == OB_OK &&
      ob_graph_svg_sync(dot.data, dot.len, &svg, &err) == OB_OK) {
    ob_buf_addc(&svg, '\0');
    const char *root = strstr(svg.data, "<svg"); /* no prolog: no DTD named, no comment */
    out = ob_xstrdup(root ? root : svg.data);
  }
  ob_buf_free(&dot);
  ob_buf_free(&svg);
  return out;
}

/* v as JSON, every '<' written \u003c (the same character inside a JSON string, where
 * alone it can be): nothing in it can end its <script> element or open a comment. */
static void put_json(FILE *f, const ob_value *v) {
  char *json = ob_json_print(v, OB_JSON_COMPACT, NULL);
  for (const char *p = json; *p; p++) {
    if (*p == '<')
      fputs("\\u003c", f);
    else
      fputc(*p, f);
  }
  free(json);
}

/* {"messages": M, "points": [{"at", "documents", ...}]}: the documents at up to
 * REPORT_POINTS messages, or at the last only when they are big; NULL when the log
 * cannot be read (the page then has no documents). */
static ob_value *report_states(const char *journal) {
  ob_log *log = ob_log_new();
  ob_error err;
  if (ob_journal_load(log, journal, NULL, &err) != OB_OK) {
    ob_log_free(log);
    return NULL;
  }
  size_t m = ob_log_len(log);
  ob_value *last = ob_log_documents(log, m);
  char *json = ob_json_print(last, OB_JSON_COMPACT, NULL);
  size_t size = strlen(json);
  free(json);
  ob_value *points = ob_array();
  if (m >= 1 && size * REPORT_POINTS <= REPORT_STATES_MAX && m * REPORT_POINTS / 2 <= REPORT_REPLAY_MAX) {
    size_t prev = (size_t)-1;
    for (size_t k = 0; k + 1 < REPORT_POINTS; k++) {
      size_t at = m * k / (REPORT_POINTS - 1);
      if (at == prev || at == m)
        continue;
      points = ob_array_push(points, ob_log_documents(log, at));
      prev = at;
    }
  }
  points = ob_array_push(points, last);
  ob_log_free(log);
  ob_value *o = ob_object_set(ob_object(), "messages", 8, ob_int((int64_t)m));
  return ob_object_set(o, "points", 6, points);
}

static const char page_head[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>obelus report</title>\n<style>\n";

static const char report_help[] =
    "usage: obelus report JOURNAL -o FILE.html\n"
    "\n"
    "Writes a run to look at as one self-contained HTML file (no network, no external\n"
    "script): the run page of `obelus ui`'s web app, without its buttons. The\n"
    "dependency graph coloured by outcome (done green, failed red, handled amber,\n"
    "skipped grey, never ran white); a timeline with a time axis, a bar per attempt\n"
    "(failed attempts red, retries visible), sub-plans' calls under the call that\n"
    "delegated them; the calls, each opening its params (as written and as read),\n"
    "output or error, attempts and progress; and the documents at a few points of\n"
    "the log. JOURNAL is a run's --journal (a torn last line is said on stderr and\n"
    "ignored). Exit 0; 2: the journal cannot be read, FILE cannot be made, or FILE\n"
    "is the journal; 4: FILE could not be written whole (a full disk).\n"
    "\n"
    "example:\n"
    "  obelus run plan.json --tools tools --journal run.jsonl\n"
    "  obelus report run.jsonl -o run.html\n";

int ob_cmd_report(int argc, char **argv) {
  const char *journal = NULL, *out = NULL;
  ob_cli_args args;
  ob_cli_args_start(&args, argc, argv);
  int k;
  while ((k = ob_cli_args_next(&args)) > 0) {
    if (args.opt && !strcmp(args.opt, "--help")) {
      fputs(report_help, stdout);
      return OB_EXIT_OK;
    } else if (args.opt && !strcmp(args.opt, "--output")) {
      out = args.val;
    } else if (args.opt) {
      return ob_cli_args_unhandled(&args);
    } else if (!journal) {
      journal = args.val;
    } else {
      return ob_cli_usage_error("report", "unexpected argument \"%s\"", args.val);
    }
  }
  if (k < 0)
    return OB_EXIT_USAGE;
  if (!journal || !out)
    return ob_cli_usage_error("report", "needs a JOURNAL and -o FILE.html");
  /* -o the journal itself (a link, another name) would replace the run by its page */
  ob_files *fs = ob_files_new();
  ob_files_add(fs, "the journal", journal);
  ob_buf why;
  ob_buf_init(&why);
  int bad = ob_files_clash(fs, "-o", out, &why);
  ob_files_free(fs);
  if (bad)
    fprintf(stderr, "obelus report: %s\n", why.data);
  ob_buf_free(&why);
  if (bad)
    return OB_EXIT_USAGE;
  ob_error err;
  ob_journal_info info;
  ob_value *run = ob_trace_build(journal, OB_TRACE_RUN, &info, &err);
  if (!run) {
    ob_eprintf("obelus report: %s\n", err.msg);
    return OB_EXIT_USAGE;
  }
  ob_cli_report_torn("obelus report", journal, &info);
  const char *css, *js, *type;
  size_t css_len, js_len;
  if (!ob_ui_asset("/app.css", &type, &css, &css_len) || !ob_ui_asset("/app.js", &type, &js, &js_len)) {
    ob_unref(run);
    ob_eprintf("obelus report: this build has no web app (ui/app.js) in it\n");
    return OB_EXIT_USAGE;
  }
  /* the page's run: as `obelus ui` gives it (GET /api/runs/ID), with no id */
  ob_value *detail = ob_object_set(ob_object(), "source", 6, ob_cstring(journal));
  detail = ob_object_set(detail, "run", 3, run);
  char *svg = report_graph_svg(journal);
  ob_value *states = report_states(journal);
  FILE *f = fopen(out, "w");
  if (!f) {
    ob_eprintf("obelus report: %s: cannot write it: %s\n", out, strerror(errno));
    ob_unref(detail);
    ob_unref(states);
    free(svg);
    return OB_EXIT_USAGE;
  }
  errno = 0; /* the first failed write's, kept to the end */
  fputs(page_head, f);
  fwrite(css, 1, css_len, f); /* ui/embed.lua refused any "</style" in it */
  fputs("</style>\n</head>\n<body class=\"report\">\n<div id=\"app\"></div>\n"
        "<script type=\"application/json\" id=\"obelus-run\">", f);
  put_json(f, detail);
  fputs("</script>\n", f);
  if (svg) {
    ob_value *s = ob_cstring(svg);
    fputs("<script type=\"application/json\" id=\"obelus-graph\">", f);
    put_json(f, s);
    fputs("</script>\n", f);
    ob_unref(s);
  }
  if (states) {
    fputs("<script type=\"application/json\" id=\"obelus-states\">", f);
    put_json(f, states);
    fputs("</script>\n", f);
  }
  fputs("<script>\n", f);
  fwrite(js, 1, js_len, f); /* and any "</script" or "<!--" in this */
  fputs("</script>\n</body>\n</html>\n", f);
  ob_unref(detail);
  ob_unref(states);
  free(svg);
  /* a write that failed midway (a full disk, /dev/full) set the stream's error: fclose
   * alone may not say it */
  int lost = fflush(f) == EOF || ferror(f);
  int saved = errno;
  lost |= fclose(f) != 0;
  if (lost) {
    ob_eprintf("obelus report: %s: cannot write it: %s\n", out,
               strerror(saved ? saved : errno ? errno : EIO));
    return OB_EXIT_WRITE;
  }
  return OB_EXIT_OK;
}
