/* main.c -- the `obelus` program: finds the command and hands it its arguments.
 * Each command lives in its own ob_cmd_*.c file; what it printed on stdout is
 * checked once it returns (a lost output is exit 4, OB_EXIT_WRITE). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ob_cli.h"

static const char main_help[] =
    "usage: obelus COMMAND [ARGS]\n"
    "\n"
    "obelus runs plans: JSON lists of tool calls wired together through an\n"
    "append-only message log, every call starting as soon as its inputs exist.\n"
    "\n"
    "commands:\n"
    "  run PLAN [--tools PATH]... [--input JSON]   run a plan, print its final output\n"
    "  check PLAN [--tools PATH]...                validate a plan without running it\n"
    "  loop PLAN --planner FILE.lua                plan, run, replan until an output\n"
    "  resolve FILE EXPR [--at N] [--instance X]   what a reference reads over a log\n"
    "  schema SCHEMA.json INSTANCE.json            validate JSON against a JSON Schema (draft-07)\n"
    "  tools --tools PATH... [--format F]          the tools for LLM APIs and MCP, or --plan-schema\n"
    "  init DIR                                    a new project: a plan, a tool and a test\n"
    "  mcp --tools PATH...                         serve the tools and plans over MCP (stdio)\n"
    "  report JOURNAL -o FILE.html                 a run to look at: graph, timeline, calls\n"
    "  ui [--journals DIR]... [--port N]           serve runs and their journals over HTTP\n"
    "  graph PLAN [--format dot|mermaid]           print the dependency graph (Graphviz, Mermaid)\n"
    "  log JOURNAL [--at N]                        a run's journal as a timeline, or its documents at N\n"
    "  resume JOURNAL [--tools PATH]...            take up a run killed midway from its journal\n"
    "  fork JOURNAL --from ID --journal NEW        run again from a point of a run, with --set changes\n"
    "\n"
    "many machines (a job queue in Redis):\n"
    "  submit PLAN --redis URL [--batch FILE]      queue a plan (or a batch of inputs) as jobs\n"
    "  worker --redis URL --tools PATH...          take jobs from the queue and run them\n"
    "  wait --redis URL JOB...                     block until jobs finish, print their outputs\n"
    "  status --redis URL                          queued, running, done, failed; the workers\n"
    "  log --redis URL JOB                         a job's journal, as log prints it\n"
    "\n"
    "`obelus COMMAND --help` tells more about each.\n";

/* `obelus log`: ob_cmd_log_redis with --redis, else ob_cmd_log. Here, the one place
 * that knows both, so that neither command's file calls the other's. */
static int log_command(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--redis"))
      return ob_cmd_log_redis(argc, argv);
  return ob_cmd_log(argc, argv);
}

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"run", ob_cmd_run},
    {"check", ob_cmd_check},
    {"loop", ob_cmd_loop},
    {"graph", ob_cmd_graph},
    {"resolve", ob_cmd_resolve},
    {"schema", ob_cmd_schema},
    {"log", log_command},
    {"resume", ob_cmd_resume},
    {"fork", ob_cmd_fork},
    {"ui", ob_cmd_ui},
    {"tools", ob_cmd_tools},
    {"init", ob_cmd_init},
    {"mcp", ob_cmd_mcp},
    {"report", ob_cmd_report},
    {"submit", ob_cmd_submit},
    {"worker", ob_cmd_worker},
    {"wait", ob_cmd_wait},
    {"status", ob_cmd_status},
};

/* What a command printed is its result: stdout that could not take it all (a full
 * disk, /dev/full, an I/O error) is exit 4, said on stderr -- unless the command
 * already ended with 4 (run and resume check their output themselves). */
static int finish(const char *cmd, int status) {
  errno = 0;
  if ((fflush(stdout) == EOF || ferror(stdout)) && status != OB_EXIT_WRITE) {
    fprintf(stderr, "obelus %s: cannot write the output to stdout: %s\n", cmd,
            strerror(errno ? errno : EIO));
    return OB_EXIT_WRITE;
  }
  return status;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    fputs(main_help, argc < 2 ? stderr : stdout);
    return argc < 2 ? OB_EXIT_USAGE : OB_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) {
#ifdef OB_GIT_REV /* OB_VERSION and OB_GIT_REV: the Makefile's (VERSION, GIT_REV) */
    puts("obelus " OB_VERSION " (git " OB_GIT_REV ")");
#else
    puts("obelus " OB_VERSION);
#endif
    return OB_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (!strcmp(argv[1], commands[i].name))
      return finish(argv[1], commands[i].run(argc - 1, argv + 1));
  fprintf(stderr, "obelus: unknown command \"%s\"\n\n%s", argv[1], main_help);
  return OB_EXIT_USAGE;
}
