/* ob_cli_opts.c -- the `obelus` program's commands and options, in one table, and the
 * walk over a command's arguments that every parser of core/cli goes through.
 *
 * Design
 * ------
 * The table says, for each command, its line in `obelus --help` and how its arguments
 * complete; for each option, its name (and a short alias: -o, -h), whether it takes a
 * value and the value's name, how the value completes, a one-line help, and the set of
 * commands that take it (a bit per command: a name that means something else for some
 * commands, --format, --at, --journal, has a row per meaning). What reads it:
 *  - ob_cli_args_next, the getopt_long of the commands: `--opt=value` is `--opt value`,
 *    `--` ends the options (a file named -x is then an argument), the word after an
 *    option that takes a value is that value whatever it looks like, and an option is
 *    known only to the commands the table gives it. Every refusal is a usage error
 *    (exit 2), said once here, by name: an unknown option with the nearest of the
 *    command's (ob_suggest) or the commands that do take it, a missing value, a value
 *    given to a flag. Each command's parser then only matches the names the walk hands
 *    it (the table's spelling: "--output" for -o, "--help" for -h) and checks values.
 *  - main.c: the command (an unknown one gets the nearest, exit 2) and `obelus --help`'s
 *    list of commands (ob_cli_commands_help).
 *  - ob_cmd_completion.c: the bash and zsh completions, generated (completions/ holds
 *    their output, and a spec compares), and the table itself as JSON.
 * The sets are what each command does something with, read from its code: an option a
 * command would ignore is refused ("unknown option --events for tools"), so that the
 * line teaches. One exception, by design: `check` takes every option `run` does, so
 * that a run's command line is checked by changing its verb (only those that shape a
 * plan's checking count there: --tools, --latent, --approver, --plans-root, --input,
 * --max-calls, --lenient-schemas). --lenient-schemas goes with every command that loads
 * tools (run, check, resume, loop, tools, mcp, ui, submit, worker, fork, graph).
 *
 * Costs: the table is static data (a few KB); a walk is a scan of the option rows per
 * word (about 70 rows), a suggestion a distance per row, only when a word is unknown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_buf.h"
#include "base/ob_suggest.h"
#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"

/* The commands, in `obelus --help`'s order; an option's bits index this. */
enum { K_RUN, K_CHECK, K_LOOP, K_RESOLVE, K_SCHEMA, K_TOOLS, K_INIT, K_MCP, K_REPORT, K_UI,
       K_GRAPH, K_LOG, K_RESUME, K_FORK, K_COMPLETION, K_HELP, K_SUBMIT, K_WORKER, K_WAIT,
       K_STATUS, K_COUNT };

#define B(k) (1u << (k))
#define RUN B(K_RUN)
#define CHECK B(K_CHECK)
#define LOOP B(K_LOOP)
#define RESOLVE B(K_RESOLVE)
#define TOOLS B(K_TOOLS)
#define MCP B(K_MCP)
#define REPORT B(K_REPORT)
#define UI B(K_UI)
#define GRAPH B(K_GRAPH)
#define LOG B(K_LOG)
#define RESUME B(K_RESUME)
#define FORK B(K_FORK)
#define SUBMIT B(K_SUBMIT)
#define WORKER B(K_WORKER)
#define WAIT B(K_WAIT)
#define STATUS B(K_STATUS)
#define ALL ((1u << K_COUNT) - 1)
/* the commands that run a plan on this process (check takes what run takes) */
#define RUNS (RUN | CHECK | LOOP | RESUME | FORK)
/* ... and those that load tool files */
#define LOADS (RUNS | TOOLS | MCP | UI | SUBMIT | WORKER)

static const ob_cli_cmd cmds[K_COUNT] = {
    [K_RUN] = {"run", "PLAN [--tools PATH]... [--input JSON]", "run a plan, print its final output",
               "file", 0, NULL, NULL},
    [K_CHECK] = {"check", "PLAN [--tools PATH]...", "validate a plan without running it", "file",
                 0, NULL, NULL},
    [K_LOOP] = {"loop", "PLAN --planner FILE.lua", "plan, run, replan until an output", "file", 0,
                NULL, NULL},
    [K_RESOLVE] = {"resolve", "FILE EXPR [--at N] [--instance X]",
                   "what a reference reads over a log", "file", 0, NULL, NULL},
    [K_SCHEMA] = {"schema", "SCHEMA.json INSTANCE.json",
                  "validate JSON against a JSON Schema (draft-07)", "file", 0, NULL, NULL},
    [K_TOOLS] = {"tools", "--tools PATH... [--format F]",
                 "the tools for LLM APIs and MCP, or --plan-schema", NULL, 0, NULL, NULL},
    [K_INIT] = {"init", "DIR", "a new project: a plan, a tool and a test", "dir", 0, NULL, NULL},
    [K_MCP] = {"mcp", "--tools PATH...", "serve the tools and plans over MCP (stdio)", NULL, 0,
               NULL, NULL},
    [K_REPORT] = {"report", "JOURNAL -o FILE.html", "a run to look at: graph, timeline, calls",
                  "file", 0, NULL, NULL},
    [K_UI] = {"ui", "[--journals DIR]... [--port N]", "serve runs and their journals over HTTP",
              NULL, 0, NULL, NULL},
    [K_GRAPH] = {"graph", "PLAN [--format dot|mermaid]",
                 "print the dependency graph (Graphviz, Mermaid)", "file", 0, NULL, NULL},
    [K_LOG] = {"log", "JOURNAL [--at N]", "a run's journal as a timeline, or its documents at N",
               "file", 0, "--redis URL JOB", "a job's journal, as log prints it"},
    [K_RESUME] = {"resume", "JOURNAL [--tools PATH]...",
                  "take up a run killed midway from its journal", "file", 0, NULL, NULL},
    [K_FORK] = {"fork", "JOURNAL --from ID --journal NEW",
                "run again from a point of a run, with --set changes", "file", 0, NULL, NULL},
    [K_COMPLETION] = {"completion", "bash|zsh|json",
                      "shell completion, made from the commands' table", "bash zsh json", 0, NULL,
                      NULL},
    [K_HELP] = {"help", "[COMMAND]", "what obelus, or a command, takes", "@commands", 0, NULL,
                NULL},
    [K_SUBMIT] = {"submit", "PLAN --redis URL [--batch FILE]",
                  "queue a plan (or a batch of inputs) as jobs", "file", 1, NULL, NULL},
    [K_WORKER] = {"worker", "--redis URL --tools PATH...", "take jobs from the queue and run them",
                  NULL, 1, NULL, NULL},
    [K_WAIT] = {"wait", "--redis URL JOB...|--ids FILE|--batch ID",
                "block until jobs finish, print their outputs", NULL,
                1, NULL, NULL},
    [K_STATUS] = {"status", "--redis URL", "queued, running, done, failed; the workers", NULL, 1,
                  NULL, NULL},
};

static const ob_cli_opt opts[] = {
    {"--help", "-h", NULL, NULL, "what the command takes, with examples", ALL},
    /* what runs read */
    {"--tools", NULL, "PATH", "@tools", "a tool file (.lua) or a folder of them; repeatable",
     LOADS | GRAPH},
    {"--input", NULL, "JSON|@FILE", NULL, "an input document (JSON, or @FILE); repeatable",
     RUN | CHECK | LOOP | FORK | SUBMIT},
    {"--latent", NULL, "FILE", "@file", "a Lua file that sets the latent handler",
     LOADS},
    {"--approver", NULL, "FILE", "@file", "a Lua file that sets an approver", LOADS},
    {"--plans-root", NULL, "DIR", "@dir", "the folder every _delegate path must lead into",
     RUNS | WORKER | GRAPH},
    {"--lenient-schemas", NULL, NULL, NULL, "let tool schemas use keywords obelus does not know",
     LOADS | GRAPH},
    /* what runs write */
    {"--journal", NULL, "FILE", "@file", "the run's log as JSON Lines, written as it grows",
     RUN | CHECK | LOOP},
    {"--journal", NULL, "NEW", "@file", "the fork's own journal (the one forked is never written)",
     FORK},
    {"--journal", NULL, "J", "@file", "a run's journal: its plan, coloured by outcome", GRAPH},
    {"--overwrite", NULL, NULL, NULL, "replace an existing --journal file",
     RUN | CHECK | LOOP | FORK},
    {"--fsync", NULL, "LEVEL", "never batch always", "how durable the journal is", RUNS},
    {"--events", NULL, "FILE|-|stderr", "@file", "scheduler events as JSON Lines", RUNS},
    {"--approve", NULL, NULL, NULL, "ask on the terminal before each call starts", RUNS},
    /* limits */
    {"--concurrency", NULL, "N", NULL, "at most N calls running at once",
     RUNS | UI | WORKER},
    {"--threads", NULL, "N", NULL, "a plan's instances shared out over N threads", RUN | CHECK},
    {"--drain-timeout", NULL, "MS", NULL, "how long to wait for fire-and-forget calls",
     RUNS | MCP},
    {"--call-timeout", NULL, "MS", NULL, "a _timeout for every call that has none",
     RUNS | UI | WORKER},
    {"--max-depth", NULL, "N", NULL, "how deep plans may delegate to plans", RUNS | UI | WORKER},
    {"--max-memory", NULL, "MB", NULL, "the most memory a run may hold", RUNS | WORKER},
    {"--max-output", NULL, "KB", NULL, "the largest message a call may write",
     RUNS | UI | WORKER},
    {"--max-calls", NULL, "N", NULL, "the most calls in all", RUNS | UI | WORKER},
    {"--max-calls", NULL, "N", NULL, "the most calls to draw (0: no bound)", GRAPH},
    {"--max-slice", NULL, "MS", NULL, "how long a tool may run without yielding",
     RUNS | MCP | UI | WORKER},
    {"--http-max", NULL, "N", NULL, "obelus.http transfers at once", RUNS | WORKER},
    {"--http-max-bytes", NULL, "N", NULL, "the largest obelus.http answer body",
     RUNS | MCP | UI | WORKER},
    {"--http-allow-private", NULL, NULL, NULL, "let obelus.http reach link-local addresses",
     RUNS | MCP | UI | WORKER},
    /* one command's own */
    {"--force", NULL, NULL, NULL, "take the run up though its plan or tools changed", RESUME},
    {"--planner", NULL, "FILE.lua", "@file", "the Lua file that plans each step", LOOP},
    {"--max-steps", NULL, "N", NULL, "how many steps the planner is asked (default 10)", LOOP},
    {"--at", NULL, "N", NULL, "fork after the journal's first N messages", FORK},
    {"--at", NULL, "N", NULL, "the log as it was after its first N messages",
     LOG | RESOLVE},
    {"--from", NULL, "ID", NULL, "fork before this call and what follows from it", FORK},
    {"--set", NULL, "REF=JSON", NULL, "a change written before the fork goes on; repeatable",
     FORK},
    {"--instance", NULL, "X", NULL, "read instance X's view", RESOLVE},
    {"--format", NULL, "F", "json-schema openai anthropic mcp", "the shape the tools are printed in",
     TOOLS},
    {"--plan-schema", NULL, NULL, NULL, "a JSON Schema of a whole plan for these tools", TOOLS},
    {"--strict", NULL, NULL, NULL, "with --plan-schema: the subset OpenAI's strict structured "
     "outputs take", TOOLS},
    {"--format", NULL, "F", "dot mermaid svg", "dot (Graphviz), mermaid, or svg drawn by dot",
     GRAPH},
    {"--max-edges", NULL, "N", NULL, "refuse a plan with more dependencies (0: no bound)", GRAPH},
    {"--format", NULL, "F", "text trace otlp", "a timeline, Chrome trace events or OTLP spans",
     LOG},
    {"--output", "-o", "FILE.html", "@file", "the page to write", REPORT},
    /* servers */
    {"--http", NULL, NULL, NULL, "serve over Streamable HTTP, not stdio", MCP},
    {"--max-line", NULL, "BYTES", NULL, "the longest message taken (default 16 MB)", MCP},
    {"--journals", NULL, "DIR", "@dir", "a folder of journals; repeatable", UI},
    {"--bind", NULL, "ADDR", NULL, "the address to listen on (default 127.0.0.1)", MCP | UI},
    {"--port", NULL, "N", NULL, "the port (0: one the system picks)", MCP | UI},
    {"--token", NULL, "T", NULL, "the token every request must carry", MCP | UI},
    /* the queue in Redis */
    {"--redis", NULL, "URL", "redis://127.0.0.1:6379", "the queue's Redis: redis://HOST:PORT",
     SUBMIT | WORKER | WAIT | STATUS | UI | LOG},
    {"--queue", NULL, "NAME", NULL, "the queue (default obelus)",
     SUBMIT | WORKER | WAIT | STATUS | UI | LOG},
    {"--batch", NULL, "FILE.jsonl", "@file", "a job per line, each an input document", SUBMIT},
    {"--shard", NULL, "K", NULL, "a job per K instances", SUBMIT},
    {"--jobs", NULL, "N", NULL, "jobs at once (default 1)", WORKER},
    {"--claim-idle", NULL, "MS", NULL, "take over jobs pending this long", WORKER},
    {"--max-deliveries", NULL, "N", NULL, "fail as poison a job delivered N times", WORKER},
    {"--drain", NULL, NULL, NULL, "exit once the queue is empty", WORKER},
    {"--keep-journals", NULL, "D", NULL, "keep a finished job's journal this long (default 1h)",
     WORKER},
    {"--keep-results", NULL, "D", NULL, "keep a finished job's result this long (default 1d)",
     WORKER},
    {"--grace", NULL, "MS", NULL, "on SIGTERM, how long running jobs may finish", WORKER},
    {"--name", NULL, "NAME", NULL, "the worker's name in the group (default HOST:PID)", WORKER},
    {"--dir", NULL, "DIR", "@dir", "where running jobs' journals are kept", WORKER},
    {"--timeout", NULL, "MS", NULL, "stop waiting after MS", WAIT},
    {"--ids", NULL, "FILE|-", "@file", "the job ids to wait for, from a file or stdin (-)", WAIT},
    {"--batch", NULL, "ID", NULL, "the jobs of a batch (submit --batch says its id)", WAIT},
    {"--json", NULL, NULL, NULL, "the whole status as one JSON object", STATUS},
};

const ob_cli_cmd *ob_cli_cmds(size_t *n) {
  *n = K_COUNT;
  return cmds;
}

const ob_cli_opt *ob_cli_opts(size_t *n) {
  *n = sizeof opts / sizeof *opts;
  return opts;
}

const ob_cli_cmd *ob_cli_cmd_find(const char *name) {
  for (size_t i = 0; i < K_COUNT; i++)
    if (!strcmp(cmds[i].name, name))
      return &cmds[i];
  return NULL;
}

int ob_cli_opt_of(const ob_cli_opt *o, const ob_cli_cmd *c) {
  return (o->cmds >> (c - cmds)) & 1;
}

int ob_cli_unknown_command(const char *word) {
  ob_suggester s;
  ob_suggester_init(&s, word);
  for (size_t i = 0; i < K_COUNT; i++)
    ob_suggester_add(&s, cmds[i].name);
  const char *best = ob_suggester_best(&s);
  ob_buf b = {0};
  ob_buf_addf(&b, "obelus: unknown command '%s'", word);
  if (best) {
    ob_buf_addf(&b, "; did you mean '%s'?", best);
  } else { /* nothing near: the names, which say more than a pointer to them */
    ob_buf_addf(&b, "; the commands are");
    for (size_t i = 0; i < K_COUNT; i++)
      ob_buf_addf(&b, "%s %s", i ? (i + 1 == K_COUNT ? " and" : ",") : "", cmds[i].name);
  }
  ob_buf_addf(&b, "\n(`obelus --help` says what each does)\n");
  ob_fputs_escaped(stderr, b.data, b.len, OB_ESC_LINES);
  ob_buf_free(&b);
  return OB_EXIT_USAGE;
}

static void help_line(FILE *f, const char *name, const char *usage, const char *summary) {
  char left[128];
  snprintf(left, sizeof left, "%s %s", name, usage);
  fprintf(f, "  %-44s%s\n", left, summary);
}

void ob_cli_commands_help(FILE *f) {
  fputs("commands:\n", f);
  for (size_t i = 0; i < K_COUNT; i++)
    if (!cmds[i].fleet)
      help_line(f, cmds[i].name, cmds[i].usage, cmds[i].summary);
  fputs("\nmany machines (a job queue in Redis):\n", f);
  for (size_t i = 0; i < K_COUNT; i++)
    if (cmds[i].fleet)
      help_line(f, cmds[i].name, cmds[i].usage, cmds[i].summary);
  for (size_t i = 0; i < K_COUNT; i++)
    if (cmds[i].fleet_usage)
      help_line(f, cmds[i].name, cmds[i].fleet_usage, cmds[i].fleet_summary);
}

/* --- the walk ---------------------------------------------------------------------------- */

/* The row of option word (its first len bytes: before an '=') for command c, or NULL;
 * any command's when c is NULL. */
static const ob_cli_opt *find_opt(const ob_cli_cmd *c, const char *word, size_t len) {
  for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
    const ob_cli_opt *o = &opts[i];
    if (c && !ob_cli_opt_of(o, c))
      continue;
    if ((strlen(o->name) == len && !strncmp(o->name, word, len)) ||
        (o->alias && strlen(o->alias) == len && !strncmp(o->alias, word, len)))
      return o;
  }
  return NULL;
}

void ob_cli_args_start(ob_cli_args *a, int argc, char **argv) {
  memset(a, 0, sizeof *a);
  a->argc = argc;
  a->argv = argv;
  a->i = 1;
  a->cmdname = argc > 0 && argv[0] ? argv[0] : "obelus";
  a->cmd = ob_cli_cmd_find(a->cmdname);
}

/* "obelus CMD: unknown option W": the nearest of CMD's options, or the commands that
 * take it, and where the list is. */
static int unknown_option(const ob_cli_args *a, const char *word, size_t len) {
  char name[256];
  snprintf(name, sizeof name, "%.*s", (int)(len < 200 ? len : 200), word);
  ob_buf b = {0};
  ob_buf_addf(&b, "obelus: unknown option %s for %s", name, a->cmdname);
  size_t takers[K_COUNT], n = 0; /* the commands that take it, when it is another's */
  for (size_t i = 0; i < K_COUNT; i++)
    if (find_opt(&cmds[i], name, strlen(name)))
      takers[n++] = i;
  if (n) {
    ob_buf_addf(&b, " (");
    for (size_t k = 0; k < n; k++)
      ob_buf_addf(&b, "%s%s", !k ? "" : k + 1 == n ? " and " : ", ", cmds[takers[k]].name);
    ob_buf_addf(&b, " take%s it)", n == 1 ? "s" : "");
  } else {
    ob_suggester s;
    ob_suggester_init(&s, name);
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
      if (ob_cli_opt_of(&opts[i], a->cmd))
        ob_suggester_add(&s, opts[i].name);
    const char *best = ob_suggester_best(&s);
    if (best)
      ob_buf_addf(&b, "; did you mean %s?", best);
    else if (name[1] != '-')
      ob_buf_addf(&b, " (an argument that begins with -: put -- before it)");
  }
  ob_buf_addf(&b, "\n(try `obelus %s --help`)\n", a->cmdname);
  ob_fputs_escaped(stderr, b.data, b.len, OB_ESC_LINES);
  ob_buf_free(&b);
  return -1;
}

int ob_cli_args_next(ob_cli_args *a) {
  a->opt = a->val = NULL;
  if (a->i >= a->argc)
    return 0;
  const char *w = a->argv[a->i++];
  if (!a->rest && !strcmp(w, "--")) {
    a->rest = 1;
    if (a->i >= a->argc)
      return 0;
    w = a->argv[a->i++];
  }
  if (a->rest || w[0] != '-' || !w[1]) { /* an argument; "-" is standard input */
    a->val = w;
    return 1;
  }
  const char *eq = w[1] == '-' ? strchr(w, '=') : NULL;
  size_t len = eq ? (size_t)(eq - w) : strlen(w);
  if (!a->cmd) { /* an in-process call under a name the table does not know */
    a->opt = w;
    return 1;
  }
  const ob_cli_opt *o = find_opt(a->cmd, w, len);
  if (!o)
    return a->quiet ? -1 : unknown_option(a, w, len);
  a->opt = o->name;
  if (!o->value) {
    if (eq) {
      if (!a->quiet)
        ob_cli_usage_error(a->cmdname, "%s takes no value (%s)", o->name, w);
      return -1;
    }
    return 1;
  }
  if (eq) {
    a->val = eq + 1;
  } else if (a->i < a->argc) {
    a->val = a->argv[a->i++];
  } else {
    if (!a->quiet)
      ob_cli_usage_error(a->cmdname, "%s needs a value: %s %s", w, w, o->value);
    return -1;
  }
  return 1;
}

int ob_cli_args_has(int argc, char **argv, const char *opt) {
  ob_cli_args a;
  ob_cli_args_start(&a, argc, argv);
  a.quiet = 1;
  int k;
  while ((k = ob_cli_args_next(&a)) != 0) /* past an error too: the parser will say it */
    if (k > 0 && a.opt && !strcmp(a.opt, opt))
      return 1;
  return 0;
}

int ob_cli_args_unhandled(const ob_cli_args *a) {
  return ob_cli_usage_error(a->cmdname, "%s is in the table of options but not taken here",
                            a->opt ? a->opt : "?");
}
