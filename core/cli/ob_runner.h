/* ob_runner.h -- what `obelus run`, `check`, `resume` and `loop` share: their
 * options and how they are parsed, the engine and plan they start with, and
 * the runner that drives a run on the loop (journal, --events, signals,
 * drain, the progress line). Internal to those commands; ob_runner.c tells
 * how. */
#ifndef OB_RUNNER_H
#define OB_RUNNER_H

#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#include "drive/ob_drain.h"
#include "drive/ob_drive.h"

#include "cli/ob_cli.h"
#include "engine/ob_engine.h"
#include "cli/ob_progress.h"
#include "engine/ob_run.h"
#include "log/ob_wal.h"

typedef struct ob_cmd_options {
  const char *cmd, *plan, *journal, *events, *planner;
  const char *plans_root; /* --plans-root as given, or NULL */
  char *root;             /* the plans root resolved (ob_cmd_plans_root), or NULL before */
  size_t max_steps;
  const char *tools[64], *latent[16];
  int ntools, nlatent;
  ob_value *inputs; /* array */
  size_t concurrency, drain_ms, call_timeout_ms;
  size_t max_memory_mb, max_output_kb, max_calls; /* limits (0: none) */
  size_t max_slice_ms; /* the watchdog's (0: its default) */
  size_t http_max;     /* obelus.http's transfers at once (0: the default) */
  size_t http_max_bytes; /* --http-max-bytes: a body's limit (0: the default) */
  int http_allow_private; /* --http-allow-private */
  int lenient_schemas;    /* --lenient-schemas: tools' schemas may hold unknown keywords */
  int max_depth;
  int approve, force;
  int overwrite;   /* run, loop --overwrite: an existing journal may be replaced */
  int argc;        /* the command's arguments (for the --input @FILE files) */
  char **argv;
  ob_fsync fsync;  /* the journal's durability (--fsync) */
  /* submit and worker (ob_cmd_submit.c, ob_cmd_worker.c) */
  const char *redis, *queue, *batch, *name, *dir;
  size_t threads; /* run --threads (0: the default) */
  size_t shard, jobs, claim_idle_ms, max_deliveries, grace_ms;
  uint64_t keep_journals_s, keep_results_s; /* worker: 0 unless given (UINT64_MAX: forever) */
  int keep_journals_none;                   /* worker --keep-journals 0 */
  int drain;
  /* tools (ob_cmd_tools.c) */
  const char *format;
  int plan_schema;
  int strict; /* --strict: the plan schema in OpenAI's strict subset */
  ob_progress *pg; /* the progress line, or NULL (not a terminal, --events -, --approve) */
  /* fork (ob_cmd_resume.c) */
  long long fork_at; /* --at N (-1: not given) */
  const char *fork_from; /* --from ID */
  ob_value *sets;    /* --set: an array of [reference, value] (to unref), or NULL */
} ob_cmd_options;

/* Parses argv (argv[0] the command: run, check, resume, loop, fork, tools, mcp, ui,
 * submit or worker) into o, which then holds o->inputs (to unref) whatever the
 * outcome. Which options a command takes is the table's (ob_cli_opts.c): the walk
 * (ob_cli_args_next) refuses the others. Returns 0 to go on, -1 when the help was
 * printed (exit 0), or OB_EXIT_USAGE said on stderr. */
int ob_cmd_options_parse(int argc, char **argv, ob_cmd_options *o, const char *help);

/* The same, each option first offered to own (a command's own options: mcp's, ui's),
 * which returns 1 when it took it, 0 when not, or OB_EXIT_USAGE (said). */
typedef int (*ob_cmd_own_fn)(void *ud, const char *opt, const char *val);
int ob_cmd_options_parse_own(int argc, char **argv, ob_cmd_options *o, const char *help,
                             ob_cmd_own_fn own, void *ud);

/* The run options' limits as o gives them (concurrency, max_depth, call_timeout_ms,
 * max_output, max_slice_ms, max_calls), the rest zero: what every command's runs obey. */
ob_run_options ob_cmd_run_limits(const ob_cmd_options *o);

/* The plans root (--plans-root, or PLAN's folder) as a real path in o->root:
 * OB_EXIT_OK, or 2 said on stderr. */
int ob_cmd_plans_root(ob_cmd_options *o);

/* Loads --tools and then --latent/--approver files into e, in order: OB_EXIT_OK, or
 * 2 with the first failure said on stderr ("obelus CMD: ..."). */
int ob_cmd_load(const ob_cmd_options *o, ob_engine *e);

/* The command's streams and limits in engine e (the progress line's streams,
 * --max-memory, --http-max), then its files (ob_cmd_load): OB_EXIT_OK, or 2 said. A
 * run on threads makes each part's engine ready with it too. */
void ob_cmd_engine_limits(const ob_cmd_options *o, ob_engine *e);
int ob_cmd_engine_load(const ob_cmd_options *o, ob_engine *e);

/* What run, check and loop start with: the arguments, the progress line (not
 * for check), then the engine, tools, latent scripts and the plan prepared (a
 * driven run, ob_drive.h), every problem printed, and for run and loop the files
 * it writes checked. Returns -1 to go on (then ob_cmd_cleanup at the end), or the
 * exit status (everything freed). */
int ob_cmd_begin(int argc, char **argv, const char *help, ob_cmd_options *o, ob_engine **e,
                 ob_drun **d);

/* Frees the driven run (its run, plan, journal), then the engine (the runs left on it),
 * the inputs and the root, then removes the progress line. Any may be NULL. */
void ob_cmd_cleanup(ob_cmd_options *o, ob_engine *e, ob_drun *d);

/* 1 when --events names a file (not "-", stdout, nor "stderr"). */
int ob_cmd_events_file(const char *events);

/* Prints v as pretty JSON and a newline on stdout, and flushes it: a command's
 * output. OB_EXIT_OK, or OB_EXIT_WRITE said on stderr when stdout could not be
 * written (a full disk, /dev/full, a closed pipe). */
int ob_cmd_print_json(const ob_value *v);

/* The files a run writes (journal: the path, or NULL; events: the path, NULL or
 * "-") against every file it reads: the plan file (plan_file, NULL for none or
 * "-"), the tool files loaded in e and every file of a --tools folder, --latent,
 * --approver and --planner files, the --input @FILE files, the plans p delegates
 * to (and those they do, as resolved against the plans root), each other, and
 * stdout or stderr when they are regular files. A match (the same file, through a
 * symbolic or hard link too) is refused, both named. Then a journal that exists
 * and is not empty is refused unless append (resume) or --overwrite.
 * OB_EXIT_OK, or 2 said on stderr. */
int ob_cmd_check_files(const ob_cmd_options *o, const ob_drun *d, const char *plan_file,
                       const char *journal, const char *events, int append);

/* Drives runs on the engine's loop, one after another (a loop's steps). */
typedef struct ob_runner {
  ob_cmd_options *o;
  ob_engine *e;
  ob_drun *drun;    /* the driven run (run, resume), or NULL (a loop's steps) */
  ob_run *run;      /* the scheduler's run driven now, or NULL (on threads) */
  ob_wal *journal;  /* the run's journal, or NULL: its failure stops the drive */
  FILE *events;
  int events_errno; /* a write to --events failed (said once): the exit is 4 */
  uv_signal_t sig[2]; /* SIGINT, SIGTERM (ob_cli_signals) */
  ob_drain drain; /* fire-and-forget calls, waited for at most --drain-timeout */
  int signum, open;
  size_t calls_used; /* --max-calls: calls of every run so far (delegated, loop steps) */
} ob_runner;

/* Opens what a run writes to (o->journal into *journal, unless journal is NULL;
 * --events) and the handles that drive it: OB_EXIT_OK, or 2 said on stderr.
 * ob_runner_close either way. */
int ob_runner_open(ob_runner *rn, ob_cmd_options *o, ob_engine *e, ob_wal **journal);

/* The driven run d (its journal open: ob_drun_open_journal) made, started and
 * driven as ob_runner_drive says, on one engine or on threads, then ended: its
 * journal's end record, the journal closed, the output printed. Returns the exit
 * status: 0, 1 (a call failed), 128 + a signal, OB_EXIT_WRITE, or 2 (said) when it
 * could not be made or started. */
int ob_runner_run(ob_runner *rn, ob_drun *d);

/* The options of a run started from the command line (log: a shared log, or NULL). */
ob_run_options ob_runner_run_options(const ob_cmd_options *o, ob_runner *rn, ob_wal *journal,
                                     ob_log *log);

/* Starts r and runs the loop until every awaited call has settled and the
 * fire-and-forget ones are drained (or --drain-timeout passes). Returns 0, or
 * 128 + the signal (SIGINT, SIGTERM) that interrupted it, or OB_EXIT_WRITE when
 * rn->journal could not be written (said on stderr; the run was cancelled: no
 * call started after the failure). */
int ob_runner_drive(ob_runner *rn, ob_run *r, size_t ncalls);

/* Closes *journal, if open, and the runner's handles and --events file. Returns
 * rc, made OB_EXIT_WRITE when it was 0 or 1 and --events could not be written. */
int ob_runner_close(ob_runner *rn, ob_wal **journal, int rc);

/* Closes the journal (its last lines made durable as --fsync says): 1 when it
 * failed (said on stderr as cmd's), the run's record then incomplete. */
int ob_runner_journal_close(ob_engine *e, ob_wal **journal, const char *cmd);

/* A command's ending once its journal's "end" line is written (rc: 0, or 1 when a
 * call failed): the journal closed, so the output is on disk first (a journal left
 * incomplete: exit 4 and no output), then out printed (taken). Returns the exit
 * status: 4 too when stdout could not be written. */
int ob_runner_finish(ob_runner *rn, ob_wal **journal, int rc, ob_value *out);

/* A command's output: pretty JSON on stdout (ob_cmd_print_json), or, when --events
 * goes to stdout (-), the events' last line {"event":"output","data":V}.
 * OB_EXIT_OK, or OB_EXIT_WRITE said on stderr. */
int ob_runner_print_output(ob_runner *rn, const ob_value *out);

#endif
