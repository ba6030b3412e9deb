/* ob_runner.c -- the machinery `obelus run`, `check`, `resume` and `loop`
 * share, so that each command's file holds only what is its own.
 *
 * Design
 * ------
 * One options struct serves the four commands: ob_cmd_options_parse knows
 * every option, those of one command (--force, --planner, --max-steps)
 * accepted only for it, and the limits' ranges. ob_cmd_begin then builds what
 * run, check and loop start with, in an order that matters: the progress
 * line's stand-in streams first (Lua's io library takes the streams it finds
 * when the engine is made), then the engine, its tool files and latent
 * scripts, the plan, and every check a plan gets before anything runs
 * (tools, --input, --max-calls), all problems printed before exit 2.
 * ob_cmd_cleanup undoes it in the reverse order: the engine goes before the
 * plan its runs point into, the stand-in streams after the engine that held
 * them.
 *
 * The runner drives one run after another on the engine's loop (a loop's
 * steps share one): the journal and --events file a run writes to, SIGINT and
 * SIGTERM (unref'd handles: they cancel the run and stop the loop, and the
 * command exits 128 + the signal; a tool running without yielding is stopped
 * for the loop to get there, and a second signal exits at once with the same
 * status: ob_watch_catch_signals), and the drain of fire-and-forget calls,
 * waited for at most --drain-timeout after the awaited calls settle. A run
 * that can make no more progress (the loop has nothing left, yet calls wait)
 * has its waiting calls failed as stalled rather than hang. --max-calls counts
 * across every run the runner drives.
 *
 * The files a run writes (issue 26). Before anything runs, ob_cmd_check_files
 * compares the --journal and --events paths (ob_files: by st_dev/st_ino, so
 * through symbolic and hard links; by their folder's real path when they do not
 * exist yet) with every file the run reads -- the plan, the tool files and every
 * file of a --tools folder (and the modules in its subfolders), --latent/--approver/
 * --planner, --input @FILE, the plans it delegates to, each other, stdin when the
 * plan or an --input @- is read from it, and stdout/stderr, when they are regular
 * files -- and refuses a match, naming both; then an existing non-empty journal
 * unless --overwrite (ob_wal refuses it too, and locks). A journal that fails
 * mid-run has cancelled the run (ob_record_flush): the drive stops and says so,
 * exit 4 (OB_EXIT_WRITE), no output printed. A failed write of --events (each
 * line, and its close) or of stdout (ob_cmd_print_json checks fflush and ferror)
 * is an exit 4 too, once the run is over. SIGXFSZ is ignored, so that a file-size
 * limit is a write error (EFBIG) rather than a kill.
 *
 * Costs: per run, three libuv handles reused across runs and, with --events,
 * one JSON line and an fflush per scheduler event; nothing per call besides
 * what the scheduler's events cost. ob_cmd_check_files: a stat per file read,
 * only when a journal or events file is given. */
#include <errno.h>
#include <malloc.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drive/ob_files.h"
#include "base/ob_mem.h"
#include "fleet/ob_queue.h"
#include "cli/ob_cli_opts.h"
#include "cli/ob_runner.h"
#include "drive/ob_shard.h"
#include "bridge/ob_watch.h"
#include "engine/ob_fork.h"

int ob_cmd_options_parse_own(int argc, char **argv, ob_cmd_options *o, const char *help,
                             ob_cmd_own_fn own, void *ud) {
  memset(o, 0, sizeof *o);
  o->cmd = argv[0];
  o->argc = argc;
  o->argv = argv;
  /* a file grown past RLIMIT_FSIZE is a write error (EFBIG) to report, not a kill */
  signal(SIGXFSZ, SIG_IGN);
  o->drain_ms = 5000;
  o->fsync = OB_FSYNC_BATCH;
  o->max_steps = 10;
  o->inputs = ob_array();
  o->grace_ms = 30000;
  o->max_output_kb = OB_DEFAULT_MAX_OUTPUT_KB; /* limits on by default (ob_run.h says why) */
  o->max_calls = OB_DEFAULT_MAX_CALLS;
  int submit = !strcmp(o->cmd, "submit"), worker = !strcmp(o->cmd, "worker");
  int fleet = submit || worker;
  int ui = !strcmp(o->cmd, "ui");
  int tools = !strcmp(o->cmd, "tools") || !strcmp(o->cmd, "mcp") || ui;
  o->fork_at = -1;
  ob_cli_args args;
  ob_cli_args_start(&args, argc, argv);
  int k;
  while ((k = ob_cli_args_next(&args)) > 0) {
    const char *a = args.opt, *val = args.val;
    int mine;
    if (!a) {
      if (o->plan || worker || tools)
        return ob_cli_usage_error(o->cmd, "unexpected argument \"%s\"", val);
      o->plan = val;
    } else if (own && (mine = own(ud, a, val)) != 0) {
      if (mine != 1)
        return OB_EXIT_USAGE;
    } else if (!strcmp(a, "--help")) {
      fputs(help, stdout);
      return -1;
    } else if (!strcmp(a, "--tools")) {
      if (o->ntools == 64)
        return ob_cli_usage_error(o->cmd, "too many --tools");
      o->tools[o->ntools++] = val;
    } else if (!strcmp(a, "--at")) {
      size_t n;
      if (!ob_cli_parse_count(val, &n) || n > (size_t)1 << 62)
        return ob_cli_usage_error(o->cmd, "--at needs a number of messages");
      o->fork_at = (long long)n;
    } else if (!strcmp(a, "--from")) {
      o->fork_from = val;
    } else if (!strcmp(a, "--set")) {
      ob_error err;
      ob_value *pair = ob_fork_parse_set(val, &err);
      if (!pair)
        return ob_cli_usage_error(o->cmd, "%s", err.msg);
      o->sets = ob_array_push(o->sets ? o->sets : ob_array(), pair);
    } else if (!strcmp(a, "--force")) {
      o->force = 1;
    } else if (!strcmp(a, "--overwrite")) {
      o->overwrite = 1;
    } else if (!strcmp(a, "--approve")) {
      o->approve = 1;
    } else if (!strcmp(a, "--latent") || !strcmp(a, "--approver")) {
      if (o->nlatent == 16)
        return ob_cli_usage_error(o->cmd, "too many --latent and --approver files");
      o->latent[o->nlatent++] = val;
    } else if (!strcmp(a, "--journal")) {
      o->journal = val;
    } else if (!strcmp(a, "--fsync")) {
      if (ob_fsync_parse(val, &o->fsync) != OB_OK)
        return ob_cli_usage_error(o->cmd, "--fsync is never, batch or always, not \"%s\"", val);
    } else if (!strcmp(a, "--events")) {
      o->events = val;
    } else if (!strcmp(a, "--concurrency")) {
      if (!ob_cli_parse_count(val, &o->concurrency) || !o->concurrency)
        return ob_cli_usage_error(o->cmd, "--concurrency needs a number of calls, 1 or more");
    } else if (!strcmp(a, "--threads")) {
      if (!ob_cli_parse_count(val, &o->threads) || !o->threads || o->threads > 1024)
        return ob_cli_usage_error(o->cmd, "--threads needs a number from 1 to 1024");
    } else if (!strcmp(a, "--planner")) {
      o->planner = val;
    } else if (!strcmp(a, "--max-steps")) {
      if (!ob_cli_parse_count(val, &o->max_steps) || !o->max_steps || o->max_steps > 100000)
        return ob_cli_usage_error(o->cmd, "--max-steps needs a number from 1 to 100000");
    } else if (!strcmp(a, "--max-depth")) {
      size_t d;
      if (!ob_cli_parse_count(val, &d) || d < 1 || d > 10000)
        return ob_cli_usage_error(o->cmd, "--max-depth needs a number from 1 to 10000");
      o->max_depth = (int)d;
    } else if (!strcmp(a, "--plans-root")) {
      o->plans_root = val;
    } else if (!strcmp(a, "--call-timeout")) {
      if (!ob_cli_parse_count(val, &o->call_timeout_ms) || !o->call_timeout_ms ||
          o->call_timeout_ms > 2147483647u)
        return ob_cli_usage_error(o->cmd, "--call-timeout needs milliseconds, 1 or more");
    } else if (!strcmp(a, "--max-memory")) {
      if (!ob_cli_parse_count(val, &o->max_memory_mb) || !o->max_memory_mb ||
          o->max_memory_mb > 1048576)
        return ob_cli_usage_error(o->cmd, "--max-memory needs megabytes, from 1 to 1048576");
    } else if (!strcmp(a, "--max-output")) {
      if (!ob_cli_parse_count(val, &o->max_output_kb) || !o->max_output_kb ||
          o->max_output_kb > 1073741824)
        return ob_cli_usage_error(o->cmd, "--max-output needs kilobytes, from 1 to 1073741824");
    } else if (!strcmp(a, "--max-calls")) {
      if (!ob_cli_parse_count(val, &o->max_calls) || !o->max_calls)
        return ob_cli_usage_error(o->cmd, "--max-calls needs a number of calls, 1 or more");
    } else if (!strcmp(a, "--http-max")) {
      if (!ob_cli_parse_count(val, &o->http_max) || !o->http_max || o->http_max > 1000000)
        return ob_cli_usage_error(o->cmd, "--http-max needs a number of transfers, from 1 to "
                                          "1000000");
    } else if (!strcmp(a, "--http-max-bytes")) {
      if (!ob_cli_parse_count(val, &o->http_max_bytes) || !o->http_max_bytes)
        return ob_cli_usage_error(o->cmd, "--http-max-bytes needs a number of bytes, 1 or more");
    } else if (!strcmp(a, "--http-allow-private")) {
      o->http_allow_private = 1;
    } else if (!strcmp(a, "--lenient-schemas")) {
      o->lenient_schemas = 1;
    } else if (!strcmp(a, "--max-slice")) {
      if (!ob_cli_parse_count(val, &o->max_slice_ms) || o->max_slice_ms < 10 ||
          o->max_slice_ms > 86400000)
        return ob_cli_usage_error(o->cmd, "--max-slice needs milliseconds, from 10 to 86400000");
    } else if (!strcmp(a, "--drain-timeout")) {
      if (!ob_cli_parse_count(val, &o->drain_ms))
        return ob_cli_usage_error(o->cmd, "--drain-timeout needs milliseconds");
    } else if (!strcmp(a, "--redis")) {
      o->redis = val;
    } else if (!strcmp(a, "--queue")) {
      if (!ob_queue_name_ok(o->queue = val))
        return ob_cli_usage_error(o->cmd, "--queue: a name of 1 to 64 letters, digits, _ . -, "
                                          "not \"%s\"", o->queue);
    } else if (!strcmp(a, "--batch")) {
      o->batch = val;
    } else if (!strcmp(a, "--shard")) {
      if (!ob_cli_parse_count(val, &o->shard) || !o->shard)
        return ob_cli_usage_error(o->cmd, "--shard needs a number of instances, 1 or more");
    } else if (!strcmp(a, "--jobs")) {
      if (!ob_cli_parse_count(val, &o->jobs) || !o->jobs || o->jobs > 100000)
        return ob_cli_usage_error(o->cmd, "--jobs needs a number from 1 to 100000");
    } else if (!strcmp(a, "--claim-idle")) {
      if (!ob_cli_parse_count(val, &o->claim_idle_ms) || o->claim_idle_ms < 10)
        return ob_cli_usage_error(o->cmd, "--claim-idle needs milliseconds, 10 or more");
    } else if (!strcmp(a, "--max-deliveries")) {
      if (!ob_cli_parse_count(val, &o->max_deliveries) || !o->max_deliveries ||
          o->max_deliveries > 1000000)
        return ob_cli_usage_error(o->cmd, "--max-deliveries needs a number from 1 to 1000000");
    } else if (!strcmp(a, "--grace")) {
      if (!ob_cli_parse_count(val, &o->grace_ms))
        return ob_cli_usage_error(o->cmd, "--grace needs milliseconds");
    } else if (!strcmp(a, "--keep-journals") || !strcmp(a, "--keep-results")) {
      int journals = a[7] == 'j';
      uint64_t secs;
      if (!ob_cli_parse_duration(val, &secs) || (!journals && !secs))
        return ob_cli_usage_error(o->cmd, "%s needs a duration: seconds, or a number and s, m, "
                                          "h or d (90s, 30m, 1h, 7d), or forever%s", a,
                                  journals ? " (0: none kept)" : "; 1s at least");
      if (journals && !secs)
        o->keep_journals_none = 1;
      else
        *(journals ? &o->keep_journals_s : &o->keep_results_s) = secs;
    } else if (!strcmp(a, "--drain")) {
      o->drain = 1;
    } else if (!strcmp(a, "--name")) {
      o->name = val;
    } else if (!strcmp(a, "--dir")) {
      o->dir = val;
    } else if (!strcmp(a, "--format")) {
      o->format = val;
    } else if (!strcmp(a, "--plan-schema")) {
      o->plan_schema = 1;
    } else if (!strcmp(a, "--strict")) {
      o->strict = 1;
    } else if (!strcmp(a, "--input")) {
      ob_error err;
      const char *in = val;
      ob_value *v = in[0] == '@' ? ob_json_parse_file(in + 1, &err)
                                 : ob_json_parse(in, strlen(in), &err);
      if (!v)
        return ob_cli_usage_error(o->cmd, "--input: %s", err.msg);
      o->inputs = ob_array_push(o->inputs, v);
    } else {
      return ob_cli_args_unhandled(&args);
    }
  }
  if (k < 0)
    return OB_EXIT_USAGE;
  if (!o->plan && !worker && !tools)
    return ob_cli_usage_error(o->cmd, "needs a PLAN file");
  if (fleet && !o->redis)
    return ob_cli_usage_error(o->cmd, "needs --redis URL (redis://HOST:PORT)");
  if (worker && !o->ntools)
    return ob_cli_usage_error(o->cmd, "needs --tools PATH: the tool files its jobs call");
  if (!strcmp(o->cmd, "loop") && !o->planner)
    return ob_cli_usage_error(o->cmd, "needs --planner FILE.lua");
  return 0;
}

int ob_cmd_options_parse(int argc, char **argv, ob_cmd_options *o, const char *help) {
  return ob_cmd_options_parse_own(argc, argv, o, help, NULL, NULL);
}

/* The plans root (--plans-root, or PLAN's folder) as a real path in o->root:
 * OB_EXIT_OK, or 2 said on stderr. */
int ob_cmd_plans_root(ob_cmd_options *o) {
  char *dir = o->plans_root ? NULL : ob_plan_default_root(o->plan);
  ob_error err;
  o->root = ob_plans_root(o->plans_root ? o->plans_root : dir, &err);
  free(dir);
  if (o->root)
    return OB_EXIT_OK;
  fprintf(stderr, "obelus %s: %s%s\n", o->cmd, err.msg,
          o->plans_root ? "" : " (the folder of the plan; see --plans-root)");
  return OB_EXIT_USAGE;
}

int ob_cmd_load(const ob_cmd_options *o, ob_engine *e) {
  ob_error err;
  e->http_max_bytes = o->http_max_bytes; /* every command's engine comes through here */
  e->http_allow_private = o->http_allow_private;
  e->lenient_schemas = o->lenient_schemas;
  for (int i = 0; i < o->ntools; i++)
    if (ob_engine_load_tools(e, o->tools[i], &err) != OB_OK) {
      ob_eprintf("obelus %s: %s\n", o->cmd, err.msg);
      return OB_EXIT_USAGE;
    }
  for (int i = 0; i < o->nlatent; i++)
    if (ob_engine_load_script(e, o->latent[i], &err) != OB_OK) {
      ob_eprintf("obelus %s: %s\n", o->cmd, err.msg);
      return OB_EXIT_USAGE;
    }
  return OB_EXIT_OK;
}

void ob_cmd_engine_limits(const ob_cmd_options *o, ob_engine *e) {
  if (o->pg) /* the tools write through the progress line's streams, which erase it */
    ob_cli_engine_stdio(e, ob_progress_out(o->pg), ob_progress_err(o->pg));
  ob_engine_set_max_memory(e, o->max_memory_mb << 20);
  e->http_max = o->http_max;
  e->lenient_schemas = o->lenient_schemas; /* resume loads its journal's tools after this */
}

int ob_cmd_engine_load(const ob_cmd_options *o, ob_engine *e) {
  ob_cmd_engine_limits(o, e);
  return ob_cmd_load(o, e);
}

/* Whether `run` may go on threads, its plan aside (ob_drive_source.may_thread):
 * nothing but the plan and its journal can keep it on one engine. */
static int may_thread(const ob_cmd_options *o) { return !strcmp(o->cmd, "run") && !o->approve; }

/* Engine, tools, latent scripts, plan: everything `check`, `run` and `loop`
 * share. Prints the problems and returns 2 when something is invalid. */
static int prepare(ob_cmd_options *o, ob_engine **ep, ob_drun **dp) {
  ob_error err;
  *dp = NULL;
  ob_engine *e = *ep = ob_engine_new(NULL, &err);
  if (!e) {
    ob_eprintf("obelus %s: %s\n", o->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  ob_engine_set_note(e, ob_cli_note, NULL);
  if (ob_cmd_engine_load(o, e) != OB_EXIT_OK || ob_cmd_plans_root(o) != OB_EXIT_OK)
    return OB_EXIT_USAGE;
  ob_drive_source src = {.name = o->plan,
                         .file = o->plan,
                         .inputs = ob_ref(o->inputs),
                         .plans_root = o->root,
                         .input_label = "--input",
                         .numbered = 1,
                         .max_calls = o->max_calls,
                         .known_refs = !strcmp(o->cmd, "check"),
                         .may_thread = may_thread(o),
                         .threads = o->threads,
                         .concurrency = o->concurrency,
                         .journal_fsync = o->journal ? o->fsync : OB_FSYNC_NEVER};
  ob_drun *d = *dp = ob_drun_prepare(e, &src, &err);
  if (!d) {
    ob_eprintf("obelus %s: %s\n", o->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  const ob_plan *p = ob_drun_plan(d);
  for (size_t i = 0; i < p->nerrors; i++)
    ob_eprintf("%s\n", p->errors[i]);
  if (p->nerrors) {
    fprintf(stderr, "obelus %s: %zu problem%s, nothing ran\n", o->cmd, p->nerrors,
            p->nerrors == 1 ? "" : "s");
    return OB_EXIT_USAGE;
  }
  if (strcmp(o->cmd, "check"))
    return ob_cmd_check_files(o, d, o->plan, o->journal, o->events, 0);
  return OB_EXIT_OK;
}

/* What run, check and loop start with: the arguments, then the engine, tools
 * and plan. Returns -1 to go on, or the exit status (everything freed). */
int ob_cmd_begin(int argc, char **argv, const char *help, ob_cmd_options *o, ob_engine **e,
                 ob_drun **d) {
  int rc = ob_cmd_options_parse(argc, argv, o, help);
  if (rc) {
    ob_unref(o->inputs);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  if (strcmp(o->cmd, "check"))
    o->pg = ob_progress_install(o->approve, o->events);
  if ((rc = prepare(o, e, d)) != OB_EXIT_OK) {
    ob_cmd_cleanup(o, *e, *d);
    return rc;
  }
  return -1;
}

void ob_cmd_cleanup(ob_cmd_options *o, ob_engine *e, ob_drun *d) {
  ob_drun_free(d); /* its run, then the plan it points into; the engine is still there */
  ob_engine_free(e);
  ob_unref(o->inputs);
  free(o->root);
  o->root = NULL;
  ob_progress_remove(o->pg); /* Lua held the tools' streams until the engine went */
  o->pg = NULL;
}

static void on_done(ob_run *run, void *ud) {
  ob_runner *rn = ud;
  if (run) /* NULL: a run on threads has ended (ob_shards_wait waits for that) */
    ob_drain_done(&rn->drain);
}

int ob_cmd_events_file(const char *events) {
  return events && strcmp(events, "-") && strcmp(events, "stderr");
}

/* Where --events goes, as its messages name it. */
static const char *events_name(const char *events) {
  return !strcmp(events, "-") ? "stdout" : events;
}

/* A write to --events failed: said once; the run goes on, and exits 4. */
static void events_failed(ob_runner *rn) {
  rn->events_errno = errno ? errno : EIO;
  ob_progress_clear();
  fprintf(stderr, "obelus %s: cannot write the events to %s: %s\n", rn->o->cmd,
          events_name(rn->o->events), strerror(rn->events_errno));
}

/* One line of --events (o taken); a failed write said once. */
static void events_line(ob_runner *rn, ob_value *o) {
  char *text = ob_json_print(o, OB_JSON_COMPACT, NULL);
  if (!rn->events_errno) {
    errno = 0;
    if (fprintf(rn->events, "%s\n", text) < 0 || fflush(rn->events) == EOF ||
        ferror(rn->events))
      events_failed(rn);
  }
  free(text);
  ob_unref(o);
}

int ob_runner_print_output(ob_runner *rn, const ob_value *out) {
  if (!rn->events || rn->events != stdout)
    return ob_cmd_print_json(out);
  ob_value *o = ob_object_set(ob_object(), "event", 5, ob_cstring("output"));
  events_line(rn, ob_object_set(o, "data", 4, ob_ref((ob_value *)out)));
  return rn->events_errno ? OB_EXIT_WRITE : OB_EXIT_OK;
}


static void on_event(void *ud, const ob_event *ev) {
  ob_runner *rn = ud;
  ob_buf said;
  ob_buf_init(&said);
  const char *kind = ob_event_say(ev, &said);
  if (kind)
    ob_cli_say_note(kind, said.data);
  ob_buf_free(&said);
  ob_progress_event(rn->o->pg, ev);
  if (rn->events) {
    ob_value *o = ob_object();
    o = ob_object_set(o, "t_ms", 4, ob_real(ev->t_ms));
    o = ob_object_set(o, "event", 5, ob_cstring(ob_event_name(ev->type)));
    if (ev->note)
      o = ob_object_set(o, "note", 4, ob_cstring(ev->note));
    if (ev->call) {
      o = ob_object_set(o, "call", 4, ob_cstring(ev->call->id));
      o = ob_object_set(o, "tool", 4, ob_cstring(ev->call->tool_name));
    }
    if (ev->each)
      o = ob_object_set(o, "each", 4, ob_cstring(ev->each->id));
    if (ev->attempt)
      o = ob_object_set(o, "attempt", 7, ob_int(ev->attempt));
    if (ev->reason)
      o = ob_object_set(o, "reason", 6, ob_cstring(ev->reason));
    if (ev->data)
      o = ob_object_set(o, "data", 4, ob_ref((ob_value *)ev->data));
    if (ev->value) { /* what a done call wrote: whole, or its size when large */
      size_t size = ob_event_value_size(ev->value);
      o = size <= OB_EVENT_VALUE_MAX ? ob_object_set(o, "value", 5, ob_ref((ob_value *)ev->value))
                                     : ob_object_set(o, "size", 4, ob_int((int64_t)size));
    }
    if (ev->handled)
      o = ob_object_set(o, "handled", 7, ob_true());
    events_line(rn, o);
  }
  ob_drain_event(&rn->drain, ev); /* the last fire-and-forget call may have ended */
}

static void on_signal(uv_signal_t *s, int signum) {
  ob_runner *rn = s->data;
  rn->signum = signum;
  if (rn->drun) /* a run on threads: its tools stay stopped until the threads take it */
    ob_drun_cancel(rn->drun);
  else
    ob_run_cancel(rn->run);
  if (!rn->drun || !ob_drun_threads(rn->drun))
    ob_watch_interrupt_done(); /* taken: what runs now (callbacks closing) may finish */
  uv_stop(rn->e->loop);
}

/* Opens what a run writes to (journal, events) and the handles that drive it. */
int ob_runner_open(ob_runner *rn, ob_cmd_options *o, ob_engine *e, ob_wal **journal) {
  memset(rn, 0, sizeof *rn);
  rn->o = o;
  rn->e = e;
  ob_error err;
  if (journal)
    *journal = NULL;
  if (journal && o->journal &&
      !(*journal = ob_wal_open(e->loop, o->journal,
                               OB_WAL_CREATE | (o->overwrite ? OB_WAL_OVERWRITE : 0), o->fsync,
                               &err))) {
    fprintf(stderr, "obelus %s: cannot write the journal: %s\n", o->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  rn->journal = journal ? *journal : NULL;
  if (o->events) /* "-": stdout, where the output then comes as the last line */
    rn->events = !strcmp(o->events, "-")        ? stdout
                 : !strcmp(o->events, "stderr") ? stderr
                                                : fopen(o->events, "we");
  if (o->events && !rn->events) {
    fprintf(stderr, "obelus %s: cannot write the events to %s: %s\n", o->cmd, o->events,
            strerror(errno));
    return OB_EXIT_USAGE;
  }
  ob_drain_init(&rn->drain, e->loop, o->drain_ms);
  /* unreferenced: they must not keep the loop alive; a second signal exits at once */
  static char who[48]; /* a tool a stop cannot reach ends the process, saying so */
  snprintf(who, sizeof who, "obelus %.30s", o->cmd);
  ob_cli_signals(e->loop, rn->sig, on_signal, rn, 1, 2, who);
  ob_progress_start(o->pg, e->loop);
  rn->open = 1;
  return OB_EXIT_OK;
}

/* Closes the journal (its last lines made durable as --fsync says): 1 when it
 * failed (said on stderr), the run's record then incomplete. */
int ob_runner_journal_close(ob_engine *e, ob_wal **journal, const char *cmd) {
  ob_error err;
  if (*journal)
    ob_run_detach_journal(e, *journal);
  int failed = *journal && ob_wal_close(*journal, &err) != OB_OK;
  if (failed)
    fprintf(stderr, "obelus %s: the journal is incomplete: %s\n", cmd, err.msg);
  *journal = NULL;
  return failed;
}

int ob_runner_finish(ob_runner *rn, ob_wal **journal, int rc, ob_value *out) {
  if (ob_runner_journal_close(rn->e, journal, rn->o->cmd)) {
    rc = OB_EXIT_WRITE; /* its output is not on disk: nothing printed claims it */
  } else if (ob_runner_print_output(rn, out) != OB_EXIT_OK) {
    rc = OB_EXIT_WRITE;
  }
  ob_unref(out);
  return rc;
}

/* Closes the driven run's journal (ob_runner_journal_close's sentence when it fails):
 * 1 when it failed. */
static int drun_journal_close(ob_runner *rn, ob_drun *d) {
  ob_error err;
  if (!ob_drun_journal(d) || ob_drun_close_journal(d, &err) == OB_OK)
    return 0;
  fprintf(stderr, "obelus %s: the journal is incomplete: %s\n", rn->o->cmd, err.msg);
  return 1;
}

int ob_runner_close(ob_runner *rn, ob_wal **journal, int rc) {
  int failed = journal && *journal && ob_runner_journal_close(rn->e, journal, rn->o->cmd);
  failed |= rn->drun && drun_journal_close(rn, rn->drun);
  if (failed && (rc == OB_EXIT_OK || rc == OB_EXIT_FAIL))
    rc = OB_EXIT_WRITE;
  if (rn->open) {
    ob_drain_close(&rn->drain);
    ob_cli_signals_close(rn->sig);
    ob_progress_close_timer(rn->o->pg);
    uv_run(rn->e->loop, UV_RUN_NOWAIT);
  }
  if (rn->events) {
    errno = 0;
    if ((rn->events != stderr && rn->events != stdout ? fclose(rn->events)
                                                      : fflush(rn->events)) == EOF &&
        !rn->events_errno)
      events_failed(rn);
    rn->events = NULL;
  }
  if (rn->events_errno && (rc == OB_EXIT_OK || rc == OB_EXIT_FAIL))
    rc = OB_EXIT_WRITE;
  return rc;
}

/* Runs r until every awaited call has settled and the fire-and-forget ones are
 * drained (or the drain timeout passes). Returns 0, or 128 + the signal that
 * interrupted it. */
static int journal_failed(const ob_runner *rn) {
  return rn->journal && ob_wal_error(rn->journal) != NULL;
}

/* A signal the loop took, or one the watch saw that the loop has not taken
 * yet: an approver it stopped left its call unstarted, and the loop, with
 * nothing else to wait for, may end before libuv hands the signal over. */
static int signalled(void *ud) {
  ob_runner *rn = ud;
  if (!rn->signum)
    rn->signum = atomic_load(&ob_watch_interrupted);
  return rn->signum != 0 || journal_failed(ud);
}

/* The journal could not be written: the run was cancelled (ob_record_flush). */
static int say_journal_failed(const ob_runner *rn) {
  fprintf(stderr, "obelus %s: %s; the run was stopped: no call started after it, and none "
                  "that had not completed on disk counts as done (`obelus resume %s` takes "
                  "the run up once there is room)\n",
          rn->o->cmd, ob_wal_error(rn->journal), ob_wal_path(rn->journal));
  return OB_EXIT_WRITE;
}

static void say_abandoned(const ob_runner *rn, size_t n) {
  if (n)
    fprintf(stderr, "obelus %s: %zu fire-and-forget call%s still running after %zu ms: "
                    "abandoned\n", rn->o->cmd, n, n == 1 ? "" : "s", rn->o->drain_ms);
}

/* What a drive that ended says: the abandoned calls, a journal that failed, what kept
 * a part of a run on threads from running (error, or NULL), a signal. */
static int drive_ended(ob_runner *rn, size_t abandoned, const char *error) {
  ob_progress_end_run(rn->o->pg);
  say_abandoned(rn, abandoned);
  if (!rn->signum && journal_failed(rn))
    return say_journal_failed(rn);
  if (error)
    fprintf(stderr, "obelus %s: %s\n", rn->o->cmd, error);
  if (rn->signum) {
    fprintf(stderr, "obelus %s: interrupted by %s; running calls abandoned\n", rn->o->cmd,
            rn->signum == SIGINT ? "SIGINT" : "SIGTERM");
    return 128 + rn->signum;
  }
  return 0;
}

/* Drives r (on one engine) as ob_runner_drive says; d: its driven run, which starts it. */
static int drive(ob_runner *rn, ob_run *r, ob_drun *d, size_t ncalls) {
  rn->run = r;
  ob_progress_set_run(rn->o->pg, r, ncalls);
  ob_drain_start(&rn->drain, r);
  if (d)
    ob_drun_start(d, NULL, NULL, NULL, 0, &(ob_error){0}); /* on one engine: cannot fail */
  else
    ob_run_start(r);
  return drive_ended(rn, ob_drain_wait(&rn->drain, signalled, rn), NULL);
}

int ob_runner_drive(ob_runner *rn, ob_run *r, size_t ncalls) { return drive(rn, r, NULL, ncalls); }

static void shard_counts(void *ud, size_t n[6]) { ob_shards_counts(ud, n); }

/* Loads a part's engine as prepare() loads the command's (on the part's thread). */
static int shard_setup(void *ud, ob_engine *e, ob_error *err) {
  if (ob_cmd_engine_load(ud, e) == OB_EXIT_OK)
    return 0;
  ob_error_set(err, OB_EINVAL, 0, "(said above)");
  return -1;
}

/* d on threads as ob_shard.h tells, until every part has ended. */
static int drive_threads(ob_runner *rn, ob_drun *d) {
  /* each thread's heap grows 64 MB at a time rather than in small steps, each an
   * mprotect and a TLB flush on every core: a thread building its part of the plan
   * took 9-13 ms for 3,000 calls, 5 ms with this (measured; glibc's top_pad). The
   * command owns its process: a host's (the C API, the Lua module) is left alone. */
  mallopt(M_TOP_PAD, 64 << 20);
  ob_error err;
  if (ob_drun_start(d, shard_setup, rn->o, NULL, rn->o->drain_ms, &err) != OB_OK) {
    ob_eprintf("obelus %s: %s\n", rn->o->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  ob_shards *s = ob_drun_shards(d);
  ob_progress_set_counts(rn->o->pg, shard_counts, s);
  ob_shards_wait(s);
  ob_watch_interrupt_done(); /* every thread has taken the signal, if one came */
  return drive_ended(rn, ob_shards_abandoned(s), ob_shards_error(s));
}

int ob_runner_run(ob_runner *rn, ob_drun *d) {
  rn->drun = d;
  rn->journal = ob_drun_journal(d); /* its failure stops the drive */
  ob_run_options ro = ob_runner_run_options(rn->o, rn, NULL, NULL);
  ob_error err;
  if (ob_drun_make(d, &ro, &err) != OB_OK) { /* prepare() tried the context: unexpected */
    ob_eprintf("obelus %s: %s\n", rn->o->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  int rc = ob_drun_threads(d) ? drive_threads(rn, d)
                              : drive(rn, ob_drun_run(d), d, ob_drun_plan(d)->ncalls);
  if (rc)
    return rc;
  ob_drun_end_journal(d); /* when the drain timed out: what still ran is abandoned */
  rc = ob_drun_exit_status(d);
  ob_value *out = ob_drun_output(d);
  if (drun_journal_close(rn, d))
    rc = OB_EXIT_WRITE; /* its output is not on disk: nothing printed claims it */
  else if (ob_runner_print_output(rn, out) != OB_EXIT_OK)
    rc = OB_EXIT_WRITE;
  ob_unref(out);
  return rc;
}

ob_run_options ob_cmd_run_limits(const ob_cmd_options *o) {
  ob_run_options ro = {.concurrency = o->concurrency,
                       .max_depth = o->max_depth,
                       .call_timeout_ms = (uint32_t)o->call_timeout_ms,
                       .max_output = o->max_output_kb << 10,
                       .max_slice_ms = (unsigned)o->max_slice_ms,
                       .max_calls = o->max_calls};
  return ro;
}

/* The options of a run started from the command line (log: a shared log, or NULL). */
ob_run_options ob_runner_run_options(const ob_cmd_options *o, ob_runner *rn, ob_wal *journal,
                                     ob_log *log) {
  if (journal)
    rn->journal = journal; /* its failure stops the drive */
  ob_run_options ro = ob_cmd_run_limits(o);
  ro.approve = o->approve ? ob_cli_approve_tty : NULL;
  ro.calls_used = &rn->calls_used;
  ro.journal = journal;
  ro.log = log;
  ro.plans_root = o->root;
  ro.on_event = on_event;
  ro.on_done = on_done;
  ro.ud = rn;
  return ro;
}

int ob_cmd_print_json(const ob_value *v) {
  char *text = ob_json_print(v, OB_JSON_PRETTY, NULL);
  errno = 0;
  int bad = puts(text) == EOF;
  bad |= fflush(stdout) == EOF || ferror(stdout);
  free(text);
  if (!bad)
    return OB_EXIT_OK;
  fprintf(stderr, "obelus: cannot write the output to stdout: %s\n",
          strerror(errno ? errno : EIO));
  return OB_EXIT_WRITE;
}

/* --- the files a run writes against those it reads (ob_files) --- */

/* 1 when the written file path is one of fs (said on stderr). */
static int clash(const ob_cmd_options *o, const char *opt, const char *path, const ob_files *fs) {
  ob_buf why;
  ob_buf_init(&why);
  int bad = ob_files_clash(fs, opt, path, &why);
  if (bad)
    fprintf(stderr, "obelus %s: %s\n", o->cmd, why.data);
  ob_buf_free(&why);
  return bad;
}

static const char *stdin_is_plan(const char *plan_file) {
  return plan_file && !strcmp(plan_file, "-") ? "stdin (the plan read from it)"
                                              : "stdin (the --input @- read from it)";
}

int ob_cmd_check_files(const ob_cmd_options *o, const ob_drun *d, const char *plan_file,
                       const char *journal, const char *events, int append) {
  if (!journal && !ob_cmd_events_file(events))
    return OB_EXIT_OK;
  /* the plan (resume's: the file its journal names), the tool files loaded, the plans it
   * delegates to */
  ob_files *fs = ob_drun_files(d, "the plan");
  /* a plan or an input read from stdin redirected from a file is that file */
  int stdin_read = plan_file && !strcmp(plan_file, "-");
  for (int i = 0; i < o->ntools; i++)
    ob_files_add_tools(fs, o->tools[i]);
  for (int i = 0; i < o->nlatent; i++)
    ob_files_add(fs, "the --latent/--approver file", o->latent[i]);
  ob_files_add(fs, "the --planner file", o->planner);
  for (int i = 1; i + 1 < o->argc; i++)
    if (!strcmp(o->argv[i], "--input") && o->argv[i + 1][0] == '@') {
      stdin_read |= !strcmp(o->argv[i + 1], "@-");
      ob_files_add(fs, "the --input file", o->argv[++i] + 1);
    }
  if (stdin_read)
    ob_files_add_fd(fs, 0, stdin_is_plan(plan_file));
  ob_files_add_fd(fs, 1, "stdout");
  ob_files_add_fd(fs, 2, "stderr");
  int bad = 0;
  if (journal && !append)
    bad |= clash(o, "--journal", journal, fs);
  if (journal) /* resume's journal is read, and appended to: --events must not be it */
    ob_files_add(fs, append ? "the journal" : "--journal", journal);
  if (ob_cmd_events_file(events))
    bad |= clash(o, "--events", events, fs);
  ob_files_free(fs);
  struct stat st;
  if (!bad && journal && !append && !o->overwrite && stat(journal, &st) == 0 &&
      S_ISREG(st.st_mode) && st.st_size > 0) {
    fprintf(stderr, "obelus %s: %s exists and is not empty (a journal of an earlier run?): "
                    "not overwritten. `obelus resume %s` takes that run up; --overwrite "
                    "replaces the file\n", o->cmd, journal, journal);
    bad = 1;
  }
  return bad ? OB_EXIT_USAGE : OB_EXIT_OK;
}
