/* ob_cmd_worker.c -- `obelus worker`: a worker of a job queue in Redis, a thin
 * layer over ob_worker.c. It loads the tools, starts the worker on the engine's
 * loop, and turns signals into stops: the first SIGTERM or SIGINT stops taking
 * jobs and gives the running ones --grace ms to finish (then hands them back),
 * a second hands them back at once, a third exits at once (128 + the signal).
 * A tool running without yielding when a signal comes is stopped, so that the
 * loop takes the signal (ob_watch.h); its job is handed back at the end of
 * the grace. Exit 0 when it ended that way or drained;
 * 3 when Redis could not be reached at first; 2 for bad options or tools.
 *
 * The worker's notes (on_note) are printed on stderr, "obelus worker NAME: [job ID: ]
 * MSG"; on a terminal a live line (on_status) shows what runs and what has ended,
 * redrawn at most every PROGRESS_MS and after each note, erased ("\r\033[K") before
 * each note and at the end. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/ob_cli.h"
#include "cli/ob_runner.h"
#include "bridge/ob_watch.h"
#include "fleet/ob_worker.h"

static const char worker_help[] =
    "usage: obelus worker --redis URL --tools PATH... [--queue NAME] [--jobs N]\n"
    "                     [--claim-idle MS] [--max-deliveries N] [--drain] [--grace MS]\n"
    "                     [--keep-journals D] [--keep-results D]\n"
    "                     [--name NAME] [--dir DIR] [--plans-root DIR] [--latent FILE]\n"
    "                     [--call-timeout MS] [--max-memory MB] [--max-output KB]\n"
    "                     [--max-calls N] [--max-slice MS] [--http-max N] [--concurrency N]\n"
    "                     [--http-max-bytes N] [--http-allow-private]\n"
    "\n"
    "Takes jobs that `obelus submit` queued in Redis and runs them, up to N at once\n"
    "(their calls all concurrently on one loop), writing each job's journal into\n"
    "Redis as it goes and its result at the end. A job whose worker died (pending\n"
    "longer than --claim-idle) is taken over and resumed from its journal: calls it\n"
    "records as completed do not run again. Only jobs submitted with the same tool\n"
    "files as this worker's, or with none, are taken.\n"
    "\n"
    "  --redis URL          redis://[:PASSWORD@]HOST[:PORT][/DB]\n"
    "  --queue NAME         the queue (default obelus)\n"
    "  --jobs N             jobs at once (default 1)\n"
    "  --claim-idle MS      take over jobs pending this long (default 30000)\n"
    "  --max-deliveries N   a job delivered N times whose workers all died is failed as\n"
    "                       poison (default 5)\n"
    "  --drain              exit once the queue is empty and nothing is pending\n"
    "  --keep-journals D    how long a finished job's journal is kept in Redis, as a\n"
    "                       compact record (default 1h; 90s, 30m, 7d, forever; 0: none)\n"
    "  --keep-results D     how long a finished job's result is kept (default 1d)\n"
    "  --grace MS           on SIGTERM, how long running jobs may finish before they are\n"
    "                       handed back (default 30000); a second signal: at once;\n"
    "                       a third exits at once (a tool that never yields is\n"
    "                       stopped at the first, its job handed back)\n"
    "  --name NAME          the worker's name in the group (default HOST:PID)\n"
    "  --dir DIR            where running jobs' journals are kept (default: a new\n"
    "                       temporary folder)\n"
    "  --plans-root DIR     where jobs' _delegate plans are read (default: here)\n"
    "The limits (--call-timeout, --max-memory, ...) are `obelus run`'s, for every job.\n"
    "Exit 0: drained or stopped; 2: bad options or tools; 3: Redis unreachable.\n";

typedef struct worker_cli {
  ob_worker *w;
  uv_loop_t *loop;
  int ended, signals;
  size_t grace_ms;
  char why[600];
  int progress;      /* stderr is a terminal: keep the live line */
  int drawn;         /* the live line is on the terminal */
  int over;          /* the worker has ended: no line any more */
  uint64_t drawn_at;
} worker_cli;

/* The live line, at most every PROGRESS_MS (a note erases it: drawn again at once). */
#define PROGRESS_MS 100

static void erase(worker_cli *c) {
  if (c->drawn)
    fputs("\r\033[K", stderr);
  c->drawn = 0;
}

static void on_status(void *ud, const ob_worker_status *st) {
  worker_cli *c = ud;
  if (st->ended) {
    erase(c);
    c->over = 1;
  }
  if (!c->progress || c->over)
    return;
  uint64_t now = uv_now(c->loop);
  if (c->drawn && now - c->drawn_at < PROGRESS_MS)
    return;
  fprintf(stderr,
          "\r\033[K%s: %zu running · %" PRIu64 " done · %" PRIu64 " failed · %" PRIu64
          " taken over%s",
          st->name, st->running, st->done, st->failed, st->claimed,
          st->redis_up ? "" : " · reconnecting");
  fflush(stderr);
  c->drawn = 1;
  c->drawn_at = now;
}

/* A note on its own line (the worker sends its status next: the line comes back). */
static void on_note(void *ud, const char *job, const char *msg) {
  worker_cli *c = ud;
  erase(c);
  fprintf(stderr, "obelus worker %s: ", ob_worker_name(c->w));
  if (job)
    fprintf(stderr, "job %s: ", job);
  fputs(msg, stderr);
  fputc('\n', stderr);
  fflush(stderr);
}

static void on_end(void *ud, const char *why) {
  worker_cli *c = ud;
  c->ended = 1;
  if (why)
    snprintf(c->why, sizeof c->why, "%s", why);
}

static void on_signal(uv_signal_t *s, int signum) {
  worker_cli *c = s->data;
  c->signals++;
  ob_watch_interrupt_done(); /* taken: the running jobs' tools go on */
  fprintf(stderr, "obelus worker: %s: %s\n", signum == SIGINT ? "SIGINT" : "SIGTERM",
          c->signals == 1 ? "taking no more jobs, finishing the running ones"
                          : "handing the running jobs back");
  ob_worker_stop(c->w, c->signals == 1 ? c->grace_ms : 0);
}

int ob_cmd_worker(int argc, char **argv) {
  ob_cmd_options o;
  int rc = ob_cmd_options_parse(argc, argv, &o, worker_help);
  if (rc) {
    ob_unref(o.inputs);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  if (!e) {
    fprintf(stderr, "obelus worker: %s\n", err.msg);
    ob_unref(o.inputs);
    return OB_EXIT_USAGE;
  }
  ob_engine_set_note(e, ob_cli_note, NULL);
  rc = OB_EXIT_USAGE;
  ob_engine_set_max_memory(e, o.max_memory_mb << 20);
  e->http_max = o.http_max;
  if (ob_cmd_load(&o, e) != OB_EXIT_OK)
    goto done;
  ob_worker_options wo = {
      .redis = o.redis,
      .queue = o.queue,
      .name = o.name,
      .dir = o.dir,
      .plans_root = o.plans_root,
      .jobs = o.jobs,
      .claim_idle_ms = o.claim_idle_ms,
      .max_deliveries = (unsigned)o.max_deliveries,
      .drain = o.drain,
      .keep_journals_s = o.keep_journals_none ? OB_WORKER_KEEP_NONE
                         : o.keep_journals_s == UINT64_MAX ? OB_WORKER_KEEP_FOREVER
                                                           : o.keep_journals_s,
      .keep_results_s = o.keep_results_s == UINT64_MAX ? OB_WORKER_KEEP_FOREVER : o.keep_results_s,
      .run = {.concurrency = o.concurrency,
              .max_depth = o.max_depth,
              .call_timeout_ms = (uint32_t)o.call_timeout_ms,
              .max_output = o.max_output_kb << 10,
              .max_slice_ms = (unsigned)o.max_slice_ms,
              .max_calls = o.max_calls},
      .on_note = on_note,
      .on_status = on_status,
  };
  worker_cli c = {.grace_ms = o.grace_ms, .loop = e->loop, .progress = isatty(2)};
  wo.note_ud = &c;
  if (!(c.w = ob_worker_start(e, &wo, on_end, &c, &err))) {
    fprintf(stderr, "obelus worker: %s\n", err.msg);
    goto done;
  }
  uv_signal_t sig[2]; /* a stuck tool ends it: its jobs go to another worker (claim-idle) */
  ob_cli_signals(e->loop, sig, on_signal, &c, 0, 3, "obelus worker");
  while (!c.ended)
    uv_run(e->loop, UV_RUN_ONCE);
  ob_cli_signals_close(sig);
  ob_worker_stats st;
  ob_worker_get_stats(c.w, &st);
  ob_worker_free(c.w);
  if (c.why[0]) {
    fprintf(stderr, "obelus worker: %s\n", c.why);
    rc = OB_EXIT_UNAVAILABLE;
  } else {
    fprintf(stderr, "obelus worker: ended: %llu done, %llu failed, %llu taken over, %llu poison",
            (unsigned long long)st.done, (unsigned long long)st.failed,
            (unsigned long long)st.claimed, (unsigned long long)st.poisoned);
    if (st.refused) /* entries of jobs that had finished, or that another entry held */
      fprintf(stderr, ", %llu ignored", (unsigned long long)st.refused);
    fputc('\n', stderr);
    rc = OB_EXIT_OK;
  }
done:
  ob_engine_free(e);
  ob_unref(o.inputs);
  return rc;
}
