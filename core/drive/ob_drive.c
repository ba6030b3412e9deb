/* ob_drive.c -- the run driver every host shares (ob_drive.h): what `obelus run`, the C
 * API, the Lua module, MCP and the worker each once did for themselves, written once.
 *
 * Design
 * ------
 * A driven run (ob_drun) owns everything one run of a plan holds besides the engine:
 * the plan and its value, the inputs, the journal it writes (ob_wal), the journal it
 * was taken up from (ob_resume), and either the scheduler's run (ob_run) or a run on
 * threads (ob_shards). Its life is the same for every host, in this order:
 *
 *   prepare   the plan read (a file, or a value the host built: JSON text, a Lua
 *             table, an MCP request, a queue job) and checked against the engine's
 *             tools, inputs and --max-calls; its plans root fixed (a later chdir does
 *             not move it). A run that may go on threads reads its probe first
 *             (ob_shard_read_plan). Problems stay on the plan for the host to say in
 *             its own words; nothing is opened yet.
 *   journal   the host checks the files it writes against ob_drun_files (its own
 *             reads added), then the journal is opened: created, appended to a host's
 *             descriptor, or, for a run taken up, its own journal cut back to its last
 *             record (ob_drive_resume.c's steps).
 *   make      on threads when the plan has instances and ob_shard_threads gives it
 *             more than one, else the scheduler's run (new, or as the journal left it).
 *             The driver listens to the run's events and its end before the host
 *             does, so that the journal's end record is written when the last call
 *             settles and no fire-and-forget call runs, whatever the host.
 *   start     ob_run_start, or the threads (their engines made ready by the host's
 *             set-up function or from its list of loads).
 *   end       the end record once (ob_drun_end_journal: idempotent, only for a run
 *             that finished; the host calls it when it stops waiting for
 *             fire-and-forget calls), the journal detached and closed (its failure
 *             is the host's to report: the output is not on disk), the run freed.
 *
 * What stays with each host is what is its own: how it says problems (lines for a person, an
 * error code and a list, a Lua error, an MCP result), which events it hears and how it
 * hands them on (at once, or queued for its loop: obelus.c), how it waits (the CLI's
 * drain and signals, obelus_run_wait, run:wait, a job's end), and what it reads besides
 * the plan (the CLI's --input @FILE files, its stdout).
 *
 * Costs: per run, one allocation and the host's; per event, one function call before
 * the host's listener (the check for the end record reads two counters). Nothing per
 * call. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "drive/ob_drive.h"
#include "drive/ob_drive_int.h"

static ob_drun *drun_new(ob_engine *e) {
  ob_drun *d = calloc(1, sizeof *d);
  if (!d)
    abort();
  d->e = e;
  return d;
}

ob_drun *ob_drun_prepare(ob_engine *e, const ob_drive_source *src, ob_error *err) {
  ob_value *pv = src->plan, *inputs = src->inputs;
  if (!pv && !(pv = ob_json_parse_file(src->file, err))) {
    ob_unref(inputs);
    return NULL;
  }
  char *dir = src->plans_root || !src->file ? NULL : ob_plan_default_root(src->file);
  char *root = ob_plans_root(src->plans_root ? src->plans_root : dir, err);
  free(dir);
  if (!root) {
    ob_unref(pv);
    ob_unref(inputs);
    return NULL;
  }
  ob_drun *d = drun_new(e);
  d->plan_value = pv;
  d->inputs = inputs;
  d->may_thread = src->may_thread;
  d->threads = src->threads;
  if (src->file && !(d->file = strdup(src->file)))
    abort();
  /* the context and the inputs must read as messages: the run would refuse them
   * after the plan message, with nothing run; found here, they are listed with every
   * other problem (as `obelus check` does) */
  ob_plan_source ps = {.name = src->name ? src->name : src->file ? src->file : "plan",
                       .root = root,
                       .inputs = inputs,
                       .input_label = src->input_label ? src->input_label : "input",
                       .numbered = src->numbered,
                       .max_calls = src->max_calls,
                       .known_refs = src->known_refs};
  d->plan = src->may_thread ? ob_shard_read_plan(e, pv, &ps, src->threads, src->concurrency,
                                                  src->journal_fsync)
                             : ob_run_read_plan(e, pv, &ps, 0);
  free(root);
  return d;
}

ob_drun *ob_drun_prepare_resume(ob_engine *e, const char *path, const char *name,
                                const char *plans_root, ob_buf *why, size_t *nchanges,
                                ob_error *err) {
  *nchanges = 0;
  ob_resume *rs = ob_resume_load(path, err);
  if (!rs)
    return NULL;
  ob_resume_say(e, rs);
  if (ob_resume_loop(rs)) {
    ob_resume_free(rs);
    ob_error_set(err, OB_EINVAL, 0, "%s: a journal of `obelus loop`: resume it with `obelus "
                                    "resume %s`", path, path);
    return NULL;
  }
  return ob_drun_from_resume(e, rs, name, plans_root, why, nchanges);
}

ob_drun *ob_drun_prepare_fork(ob_engine *e, const ob_fork_options *fo, const char *name,
                              const char *plans_root, ob_buf *why, size_t *nchanges,
                              ob_fork_result *res, ob_error *err) {
  *nchanges = 0;
  if (ob_fork_write(fo, res, err) != OB_OK)
    return NULL;
  return ob_drun_prepare_resume(e, fo->journal, name, plans_root, why, nchanges, err);
}

ob_drun *ob_drun_from_resume(ob_engine *e, ob_resume *rs, const char *name,
                             const char *plans_root, ob_buf *why, size_t *nchanges) {
  ob_drun *d = drun_new(e);
  d->resume = rs;
  if (ob_resume_plan_file(rs) && !(d->file = strdup(ob_resume_plan_file(rs))))
    abort(); /* the plan file the run named: one of the files it reads */
  d->plan = ob_resume_check(rs, e, name, plans_root, &d->plan_value, why, nchanges);
  return d;
}

ob_plan *ob_drun_plan(const ob_drun *d) { return d->plan; }
ob_value *ob_drun_plan_value(const ob_drun *d) { return d->plan_value; }
ob_resume *ob_drun_resume(const ob_drun *d) { return d->resume; }

ob_files *ob_drun_files(const ob_drun *d, const char *plan_label) {
  ob_files *fs = ob_files_new();
  if (d->file)
    ob_files_add(fs, plan_label, d->file); /* "-" is skipped: stdin is the host's to add */
  ob_files_add_engine(fs, d->e);
  ob_files_add_delegates(fs, d->plan, d->plan->root);
  return fs;
}

int ob_drun_open_journal(ob_drun *d, const char *path, int overwrite, ob_fsync fsync,
                         ob_error *err) {
  if (d->resume) {
    int rc = ob_resume_verify(d->resume, d->plan, err); /* before the journal is touched */
    if (rc != OB_OK)
      return rc;
    if (ob_resume_open(d->resume, d->e->loop, fsync, &d->journal, err) == OB_OK)
      return OB_OK;
  } else if ((d->journal = ob_wal_open(d->e->loop, path,
                                       OB_WAL_CREATE | (overwrite ? OB_WAL_OVERWRITE : 0), fsync,
                                       err))) {
    return OB_OK;
  }
  return err->code = OB_EIO;
}

int ob_drun_open_journal_fd(ob_drun *d, int fd, ob_fsync fsync, ob_error *err) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int regular = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  d->journal = ob_wal_open(d->e->loop, path, regular ? OB_WAL_APPEND : OB_WAL_CREATE, fsync, err);
  return d->journal ? OB_OK : (err->code = OB_EIO);
}

ob_wal *ob_drun_journal(const ob_drun *d) { return d->journal; }

ob_wal *ob_drun_take_journal(ob_drun *d) {
  ob_wal *w = d->journal;
  d->journal = NULL;
  return w;
}

const char *ob_drun_journal_error(const ob_drun *d) {
  return d->journal ? ob_wal_error(d->journal) : NULL;
}

int ob_drun_threads(const ob_drun *d) { return d->on_threads; }
ob_run *ob_drun_run(const ob_drun *d) { return d->run; }
ob_shards *ob_drun_shards(const ob_drun *d) { return d->shards; }

int ob_drun_finished(const ob_drun *d) {
  if (d->on_threads)
    return d->shards && ob_shards_finished(d->shards);
  return d->run && ob_run_finished(d->run);
}

size_t ob_drun_detached(const ob_drun *d) {
  return d->run ? ob_run_detached_pending(d->run) : 0;
}

int ob_drun_exit_status(const ob_drun *d) {
  int recorded;
  if (d->resume && ob_resume_ended(d->resume, &recorded))
    return recorded; /* a journal of a run that had ended: its status as it was */
  if (d->on_threads)
    return d->shards && ob_shards_failed(d->shards) ? 1 : 0;
  return d->run && ob_run_failed(d->run) ? 1 : 0;
}

void ob_drun_end_journal(ob_drun *d) {
  if (!d->journal || d->journal_ended || !ob_drun_finished(d))
    return;
  d->journal_ended = 1;
  if (d->on_threads) /* a resumed run that had ended has no journal: nothing is written */
    ob_shards_journal_end(d->shards, ob_drun_exit_status(d));
  else
    ob_run_journal_end(d->run, ob_drun_exit_status(d));
}

/* The run's listeners: the end record when the last call settled (a fire-and-forget
 * one after the run's end: drun_done has the others), then the host's. */
static void drun_event(void *ud, const ob_event *ev) {
  ob_drun *d = ud;
  int settled = ev->type == OB_EV_DONE || ev->type == OB_EV_SKIPPED || ev->type == OB_EV_FAILED;
  if (settled && !d->cancelled && !d->on_threads && ob_run_finished(d->run) &&
      !ob_run_detached_pending(d->run))
    ob_drun_end_journal(d);
  if (d->on_event)
    d->on_event(d->ud, ev);
}

static void drun_done(ob_run *r, void *ud) {
  ob_drun *d = ud;
  if (!d->cancelled && (!r || !ob_run_detached_pending(r))) /* r NULL: every part ended */
    ob_drun_end_journal(d);
  if (d->on_done)
    d->on_done(r, d->ud);
}

int ob_drun_make(ob_drun *d, const ob_run_options *ro, ob_error *err) {
  d->ro = *ro;
  d->on_event = ro->on_event;
  d->on_done = ro->on_done;
  d->ud = ro->ud;
  d->ro.journal = d->journal;
  d->ro.plans_root = d->plan->root;
  if (!d->ro.calls_used)
    d->ro.calls_used = &d->calls_used;
  /* without a journal, events nobody hears are not made at all */
  d->ro.on_event = ro->on_event || d->journal ? drun_event : NULL;
  d->ro.on_done = drun_done;
  d->ro.ud = d;
  if (!d->resume && d->may_thread && ob_shard_threads(d->plan, d->threads, &d->ro) > 1) {
    d->on_threads = 1; /* the threads start with the run */
    return OB_OK;
  }
  if (d->plan->probe) { /* a probe read for threads the run does not get: read it whole */
    ob_error_set(err, OB_EINVAL, 0, "%s: the plan was read for threads it does not get",
                 d->plan->file);
    return OB_EINVAL;
  }
  d->run = d->resume ? ob_resume_start(d->e, d->plan, d->resume, d->journal, &d->ro, err)
                     : ob_run_new(d->e, d->plan, d->plan_value, d->inputs, &d->ro, err);
  return d->run ? OB_OK : err->code;
}

int ob_drun_start(ob_drun *d, ob_shard_setup_fn setup, void *setup_ud,
                  const ob_shard_loads *loads, size_t drain_ms, ob_error *err) {
  if (!d->on_threads) {
    ob_run_start(d->run);
    return OB_OK;
  }
  ob_shard_config cfg = {.threads = d->threads,
                         .e = d->e,
                         .plan = d->plan,
                         .plan_value = d->plan_value,
                         .inputs = d->inputs,
                         .opt = d->ro,
                         .setup = setup,
                         .setup_ud = setup_ud,
                         .loads = loads,
                         .drain_ms = drain_ms};
  if (!(d->shards = ob_shards_start(&cfg, err))) {
    d->cancelled = 1;
    return err->code;
  }
  return OB_OK;
}

void ob_drun_cancel(ob_drun *d) {
  if (d->cancelled)
    return;
  d->cancelled = 1;
  if (d->shards)
    ob_shards_cancel(d->shards); /* the threads' tools stay stopped until they take it */
  else if (d->run)
    ob_run_cancel(d->run);
}

int ob_drun_cancelled(const ob_drun *d) { return d->cancelled; }

ob_value *ob_drun_output(ob_drun *d) {
  if (d->on_threads)
    return d->shards && ob_shards_finished(d->shards) ? ob_shards_output(d->shards) : ob_null();
  return d->run ? ob_run_output(d->run) : ob_null();
}

int ob_drun_close_journal(ob_drun *d, ob_error *err) {
  if (!d->journal)
    return OB_OK;
  ob_run_detach_journal(d->e, d->journal);
  int rc = ob_wal_close(d->journal, err);
  d->journal = NULL;
  return rc;
}

void ob_drun_free(ob_drun *d) {
  if (!d)
    return;
  ob_drun_detach(d);
  if (d->shards) { /* its threads cancelled and joined; the loop is not run */
    ob_shards_cancel(d->shards);
    ob_shards_free(d->shards);
  }
  ob_run_free(d->run);
  if (d->journal) /* after its run: what it held is written as far as it goes */
    ob_wal_close(d->journal, &(ob_error){0});
  ob_plan_free(d->plan);
  ob_unref(d->plan_value);
  ob_unref(d->inputs);
  ob_resume_free(d->resume); /* after the run: its delegated runs read it */
  free(d->file);
  free(d);
}
