/* ob_cmd_run.c -- `obelus run` and `obelus check`: load tools and a plan, validate
 * everything, and (run) execute it on a libuv loop, printing the final output.
 *
 * Both are thin: the options, the engine and plan they start with, and the
 * runner that drives the run (journal, --events, signals, drain, the progress
 * line on a terminal) are ob_runner.c's, shared with `resume` and `loop`.
 * What is left here is each command's help, check's summary line, and run's
 * exit status: 1 when some awaited call failed, or when the journal could not
 * be completed (the output is on disk before it is printed).
 *
 * Costs: check builds the engine and loads the tools to validate against
 * their schemas; run adds nothing to what the scheduler costs. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "cli/ob_cli.h"
#include "cli/ob_runner.h"
#include "drive/ob_shard.h"

static const char run_help[] =
    "usage: obelus run PLAN [--tools PATH]... [--input JSON|@FILE]... [--journal FILE]\n"
    "                  [--overwrite] [--events FILE|-|stderr] [--concurrency N] [--drain-timeout MS]\n"
    "                  [--latent FILE] [--max-depth N] [--plans-root DIR] [--approver FILE] [--approve]\n"
    "                  [--call-timeout MS] [--fsync never|batch|always] [--max-memory MB]\n"
    "                  [--max-output KB] [--max-calls N] [--max-slice MS] [--http-max N]\n"
    "                  [--http-max-bytes N] [--http-allow-private] [--threads N]\n"
    "                  [--lenient-schemas]\n"
    "\n"
    "Validates PLAN (a file, or - for standard input) against the tools, then\n"
    "runs every call as soon as its inputs exist, concurrently, and prints the\n"
    "final output as JSON on stdout.\n"
    "Exit 0: every awaited call done or skipped; 1: some call failed; 2: invalid\n"
    "plan, tool file or usage (nothing ran, stdout empty, no journal); 4: the\n"
    "journal, stdout or --events could not be written (disk full, I/O error): a run\n"
    "stopped by its journal is taken up with `obelus resume FILE`; 5: a tool could\n"
    "not be stopped (past --max-slice or its _timeout inside C code or a __gc\n"
    "finaliser: the process ended a second later, naming the call); 130/143:\n"
    "interrupted by SIGINT/SIGTERM.\n"
    "\n"
    "  --tools PATH        a tool file (.lua) or a folder of them; repeatable\n"
    "  --input JSON|@FILE  adds {\"type\":\"data\",\"kind\":\"input\",\"data\":JSON}; repeatable\n"
    "  --journal FILE      the log as JSON Lines, written as it grows; locked while\n"
    "                      written; never the plan, a tool or input file (exit 2)\n"
    "  --overwrite         replace an existing --journal FILE (else it is refused:\n"
    "                      `obelus resume FILE` takes its run up)\n"
    "  --fsync LEVEL       how durable the journal is: never, batch (default: on disk\n"
    "                      within 50 ms) or always (a result on disk before its readers)\n"
    "  --events FILE|-|stderr  scheduler events as JSON Lines: to FILE; - to stdout,\n"
    "                      where the output is then the last line, {\"event\":\"output\",\n"
    "                      \"data\":...} (obelus run ... --events - | jq); stderr to\n"
    "                      stderr, the output staying on stdout\n"
    "  --concurrency N     at most N calls running at once, delegated plans' calls\n"
    "                      included (default: unlimited)\n"
    "  --threads N         a plan with \"instances\": its instances shared out over N\n"
    "                      threads, an engine each (default: one per core)\n"
    "  --drain-timeout MS  how long to wait for fire-and-forget calls (default 5000)\n"
    "  --call-timeout MS   a _timeout for every call that has none (per attempt)\n"
    "  --latent FILE       a Lua file that sets the latent handler (obelus.set_latent)\n"
    "  --max-depth N       how deep plans may delegate to plans (_delegate; default 16)\n"
    "  --max-memory MB     the most memory the run may hold (Lua heap, values, log); the\n"
    "                      call that would pass it fails (default: half of ulimit -v, if set)\n"
    "  --max-output KB     the largest message a call may write; a larger result fails it,\n"
    "                      a longer error message is cut (default 65536: 64 MB)\n"
    "  --max-calls N       the most calls in all: instances, delegated plans, loop steps\n"
    "                      (default 1000000)\n"
    "  --max-slice MS      how long a tool may run without yielding (default 30000)\n"
    "  --http-max N        obelus.http transfers at once; the others wait their turn\n"
    "                      (default 100). A request's own defaults: timeout_ms 300000\n"
    "                      (5 min); a transfer slower than low_speed_limit 1 byte/s for\n"
    "                      low_speed_time 60 s is cut off\n"
    "  --http-max-bytes N  the largest obelus.http answer body (decoded) a request without\n"
    "                      max_bytes takes (default 67108864: 64 MB); a larger one fails it\n"
    "  --http-allow-private  let obelus.http connect to link-local and cloud metadata\n"
    "                      addresses (169.254.0.0/16, fe80::/10, 0.0.0.0, ...), denied by\n"
    "                      default\n"
    "  --plans-root DIR    the folder every _delegate path must lead into (default:\n"
    "                      PLAN's folder; the current directory for -)\n"
    "  --approver FILE     a Lua file that sets an approver (obelus.set_approver)\n"
    "  --approve           ask on the terminal before each call starts: y, n or e (edit)\n"
    "  --lenient-schemas   let a tool's schema use keywords and formats obelus does not\n"
    "                      know (by default a load error, with a did-you-mean; a keyword\n"
    "                      starting with x- is always allowed)\n"
    "\n"
    "examples:\n"
    "  obelus run plans/user-status/plan.json --tools plans/user-status/tools\n"
    "  obelus run plan.json --tools tools/ --input '{\"city\":\"Oslo\"}' --journal run.jsonl\n";

static const char check_help[] =
    "usage: obelus check PLAN [--tools PATH]... [--latent FILE] [--plans-root DIR]\n"
    "                    [--input JSON|@FILE]... [--max-calls N] [--lenient-schemas]\n"
    "                    [run options]\n"
    "\n"
    "Validates PLAN without running anything: its shape, every call against its\n"
    "tool's schema, every reference and output path, the dependency graph\n"
    "(cycles are named), and every plan it delegates to, which must lie inside\n"
    "the plans root (--plans-root DIR; default: PLAN's folder). Prints every\n"
    "problem as `file: call <id> (<tool>): <what>`. Exit 0 when valid, 2 otherwise.\n"
    "A tool's schema may use only the keywords and formats obelus knows, or keywords\n"
    "starting with x-; --lenient-schemas lets any through. check takes every option\n"
    "run does, so that a run's command line is checked by changing its verb; those\n"
    "that only matter to a running plan (--journal, --events, ...) change nothing.\n"
    "\n"
    "example:\n"
    "  obelus check plans/weather/plan.json --tools plans/weather/tools\n";

int ob_cmd_check(int argc, char **argv) {
  ob_cmd_options o;
  ob_engine *e;
  ob_drun *d;
  int rc = ob_cmd_begin(argc, argv, check_help, &o, &e, &d);
  if (rc >= 0)
    return rc;
  const ob_plan *p = ob_drun_plan(d);
  size_t edges = 0;
  for (size_t i = 0; i < p->ncalls; i++)
    edges += p->calls[i].ndeps;
  ob_fputs_escaped(stdout, o.plan, strlen(o.plan), 0); /* a file's name: any bytes */
  printf(": ok, %zu call%s, %zu dependenc%s\n", p->ncalls, p->ncalls == 1 ? "" : "s", edges,
         edges == 1 ? "y" : "ies");
  ob_cmd_cleanup(&o, e, d);
  return OB_EXIT_OK;
}

int ob_cmd_run(int argc, char **argv) {
  ob_cmd_options o;
  ob_engine *e;
  ob_drun *d;
  int rc = ob_cmd_begin(argc, argv, run_help, &o, &e, &d);
  if (rc >= 0)
    return rc;
  ob_runner rn;
  ob_error err;
  if ((rc = ob_runner_open(&rn, &o, e, NULL)) == OB_EXIT_OK) {
    if (o.journal && ob_drun_open_journal(d, o.journal, o.overwrite, o.fsync, &err) != OB_OK) {
      fprintf(stderr, "obelus run: cannot write the journal: %s\n", err.msg);
      rc = OB_EXIT_USAGE;
    } else {
      rc = ob_runner_run(&rn, d);
    }
  }
  rc = ob_runner_close(&rn, NULL, rc);
  ob_cmd_cleanup(&o, e, d);
  return rc;
}
