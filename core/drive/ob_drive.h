/* ob_drive.h -- the run driver every host shares: a plan prepared (read, checked, its
 * journal opened), made and started on one engine or on threads, its journal ended once
 * and closed; runs taken up again from a journal (ob_drive.c, ob_drive_resume.c); and an
 * engine's runs for a host whose callbacks must not run inside the scheduler: deferred
 * work, stalls (ob_drive_loop.c). `obelus run` and `resume`, the C API (obelus.c), the Lua
 * module (ob_luamod.c), MCP (ob_mcp.c) and the worker (ob_worker_job.c) all drive runs
 * through it. */
#ifndef OB_DRIVE_H
#define OB_DRIVE_H

#include "drive/ob_files.h"
#include "drive/ob_shard.h"
#include "engine/ob_fork.h"
#include "engine/ob_resume.h"
#include "log/ob_wal.h"

/* --- a driven run --------------------------------------------------------------------- */

typedef struct ob_drun ob_drun;

/* What to run: a plan file or a plan value, its inputs, and how it is checked. */
typedef struct ob_drive_source {
  const char *name;        /* how messages name the plan: the file, "plan", a tool */
  const char *file;        /* the plan file (read when plan is NULL), or NULL */
  ob_value *plan;          /* the plan as a value (taken), or NULL: read file */
  ob_value *inputs;        /* an array of the input's data (taken), or NULL */
  const char *plans_root;  /* the folder _delegate paths lead into; NULL: the plan
                              file's folder, or the current directory */
  const char *input_label; /* how a problem names an input ("--input", "input") */
  int numbered;            /* ... with its number ("--input #2") */
  size_t max_calls;        /* 0: no limit */
  int known_refs;          /* as ob_plan_source's (`obelus check`) */
  int may_thread;          /* 1: the run may go on threads (its probe is read first:
                              ob_shard_read_plan); the host has ruled out what keeps a
                              run on one engine whatever the plan (a terminal, C tools) */
  size_t threads;          /* with may_thread: how many are asked for (0: one per core
                              when the plan has instances; ob_shard_threads decides) */
  size_t concurrency;      /* with may_thread: the run's --concurrency */
  ob_fsync journal_fsync;  /* with threads: the fsync of the journal the run will write
                              (OB_FSYNC_NEVER: none) */
} ob_drive_source;

/* The plan of src read and checked against e's tools (ob_run_read_plan, or
 * ob_shard_read_plan for threads): a run prepared, not made. Its problems are in
 * ob_drun_plan(d)->errors (nothing may run while there are some). NULL with err when
 * what is not a plan problem fails: the file cannot be read or is not JSON (err's
 * message starts with the path), the plans root does not exist. src's values are
 * taken either way. */
ob_drun *ob_drun_prepare(ob_engine *e, const ob_drive_source *src, ob_error *err);

/* The top-level run the journal at path tells of, prepared to be taken up as
 * ob_drive_resume.c's steps 1-2 say: the journal read (its notes said through the
 * engine's note hook), a journal of `obelus loop` refused (OB_EINVAL, naming `obelus
 * resume`), the plan as it ran made and checked against e's tools (problems in
 * ob_drun_plan(d)->errors); what changed since is described in why and counted in
 * *nchanges (refuse unless forced). NULL with err when the journal cannot be read. */
ob_drun *ob_drun_prepare_resume(ob_engine *e, const char *path, const char *name,
                                const char *plans_root, ob_buf *why, size_t *nchanges,
                                ob_error *err);
/* The same from a journal read already (rs, taken): for `obelus resume`, which loads
 * the tool files the journal names before the plan is checked, and takes the journals
 * of `obelus loop` up its own way. */
ob_drun *ob_drun_from_resume(ob_engine *e, ob_resume *rs, const char *name,
                             const char *plans_root, ob_buf *why, size_t *nchanges);

/* A fork of a journal (ob_fork.h: fo says the source, the point, the changes and the
 * new journal) written, then prepared as ob_drun_prepare_resume prepares the new
 * journal: `obelus fork`, obelus_fork and engine:fork all write it with ob_fork_write
 * and take it up as a resume. What changed since the source's run is said in why, for
 * the host to say (a fork is not refused for it). NULL with err. */
ob_drun *ob_drun_prepare_fork(ob_engine *e, const ob_fork_options *fo, const char *name,
                              const char *plans_root, ob_buf *why, size_t *nchanges,
                              ob_fork_result *res, ob_error *err);

ob_plan *ob_drun_plan(const ob_drun *d);
ob_value *ob_drun_plan_value(const ob_drun *d);
ob_resume *ob_drun_resume(const ob_drun *d); /* NULL for a new run */

/* The files the run reads: the plan file (when it has one: said as plan_label, "the
 * plan file"), the engine's tool files and every plan it delegates to. A host adds its
 * own, then asks ob_files_clash of the file it writes. Free with ob_files_free. */
ob_files *ob_drun_files(const ob_drun *d, const char *plan_label);

/* The journal the run writes: path created (an existing non-empty file refused,
 * unless overwrite; a file another obelus writes refused: ob_wal locks it) under
 * fsync. For a resumed run, path is NULL: its own journal, checked to be as it was
 * read (ob_resume_verify) and opened to append, or none for a run that had ended.
 * OB_OK; OB_EINVAL when the journal resumed is not as the run left it; OB_EIO when the
 * file cannot be opened (err says why; nothing opened). */
int ob_drun_open_journal(ob_drun *d, const char *path, int overwrite, ob_fsync fsync,
                         ob_error *err);
/* Or the journal written to the file of a host's descriptor fd, flushed by the host
 * (a regular file appended to, its torn last line cut; a pipe written as it is):
 * OB_OK, or OB_EIO. */
int ob_drun_open_journal_fd(ob_drun *d, int fd, ob_fsync fsync, ob_error *err);
ob_wal *ob_drun_journal(const ob_drun *d); /* NULL: none */
/* The journal handed to the caller, who closes it (`obelus loop`'s steps go on
 * writing it); the run must not be made. */
ob_wal *ob_drun_take_journal(ob_drun *d);
/* Why the journal could not be written (the run was then stopped: ob_record_flush),
 * or NULL. */
const char *ob_drun_journal_error(const ob_drun *d);

/* Makes the run with the options ro: on threads when src allowed them and
 * ob_shard_threads gives it more than one, else the scheduler's run (ob_run_new, or
 * ob_resume_start for a resumed run). The driver sets ro's journal, resume, plans
 * root and calls_used (unless ro has one), and listens to its events and its end,
 * then hands them to ro's on_event and on_done (on threads, on_done gets run NULL).
 * OB_OK, or the code with err filled (the run is still prepared: free it). */
int ob_drun_make(ob_drun *d, const ob_run_options *ro, ob_error *err);

/* Starts the run made. On threads, the parts' engines are made ready with setup
 * (setup_ud), or with loads, and wait drain_ms for their fire-and-forget calls.
 * OB_OK, or the code with err filled (the run on threads could not start). */
int ob_drun_start(ob_drun *d, ob_shard_setup_fn setup, void *setup_ud,
                  const ob_shard_loads *loads, size_t drain_ms, ob_error *err);

int ob_drun_threads(const ob_drun *d);     /* 1: the run is on threads */
ob_run *ob_drun_run(const ob_drun *d);     /* the scheduler's run; NULL on threads */
ob_shards *ob_drun_shards(const ob_drun *d); /* the run on threads, once started */

/* Every awaited call settled (on threads: every part has ended). */
int ob_drun_finished(const ob_drun *d);
/* Fire-and-forget calls still running (on threads: each part drains its own). */
size_t ob_drun_detached(const ob_drun *d);
/* Once finished: the exit status, the recorded one for a journal of a run that had
 * ended, else 1 when some awaited call failed, 0 otherwise. */
int ob_drun_exit_status(const ob_drun *d);
/* Abandons what still runs (every part on threads); nothing more is written but the
 * end record, which the host writes (ob_drun_end_journal) when it wants one. */
void ob_drun_cancel(ob_drun *d);
int ob_drun_cancelled(const ob_drun *d);
/* The run's output (plan-format §5) once finished: a new reference. */
ob_value *ob_drun_output(ob_drun *d);

/* The journal's end record with the exit status, written once, only for a run that
 * finished: the driver writes it itself when the last call settles (no
 * fire-and-forget call left); a host calls it when it stops waiting for those (the
 * drain timed out, the run is cancelled or freed after finishing). A journal without
 * one is of a run that did not finish: resume takes it up. */
void ob_drun_end_journal(ob_drun *d);
/* Detaches the journal from the engine and closes it (its last lines made durable as
 * its fsync says): OB_OK, or the code with err filled (the run's record is then
 * incomplete). */
int ob_drun_close_journal(ob_drun *d, ob_error *err);

/* Frees the run and everything it holds: a run on threads is cancelled and joined,
 * the journal closed (without an end record), the plan, its value, the inputs and
 * the journal read. Not from inside one of its callbacks. */
void ob_drun_free(ob_drun *d);

/* --- an engine's runs (ob_drive_loop.c): work deferred out of the scheduler's stack,
 * and stalls --- */

/* One per engine, for a host whose callbacks must not run inside the scheduler (the C
 * API, the Lua module): its driven runs, one uv_idle that does the host's deferred work
 * on the next turn of the loop, and one uv_check that fails the calls nothing can wake
 * any more (the loop has nothing left, yet they wait). */
typedef struct ob_drive ob_drive;

typedef struct ob_drive_host {
  /* The host's deferred work (events queued, runs to free, cancels asked from inside a
   * callback), called from the loop outside every obelus function, after
   * ob_drive_defer. It may defer again (next turn). */
  void (*flush)(void *ud);
  /* Nonzero while the host's callbacks are on the stack (the scheduler under them):
   * no flush and no stall check then. NULL: never. */
  int (*busy)(void *ud);
  void *ud;
} ob_drive_host;

/* The driver of engine e's runs: its handles are made on e's loop, unreferenced (they
 * never keep the loop alive). With check_stalls, every turn of the loop ends with
 * ob_drive_fail_stalled. */
ob_drive *ob_drive_new(ob_engine *e, const ob_drive_host *host, int check_stalls);
/* Closes its handles (their memory freed when libuv has closed them: run the loop
 * once more, or free the engine, whose own loop is run to its end) and detaches its
 * runs. Before the engine is freed; a host that closed every handle of the loop
 * (uv_walk) already is taken care of. */
void ob_drive_free(ob_drive *dv);
/* The host's flush on the next turn of the loop. */
void ob_drive_defer(ob_drive *dv);
/* The host's deferred work now, when it is not busy (a module call from outside every
 * callback). */
void ob_drive_flush(ob_drive *dv);

/* d becomes one of dv's runs (taken off when freed); host: the host's own handle of
 * it, for ob_drive_find. */
void ob_drun_attach(ob_drun *d, ob_drive *dv, void *host);
/* The host's handle of the run whose scheduler's run is r (ob_call_handle_run): what a
 * C tool's call finds its host's run by. NULL when none. */
void *ob_drive_find(const ob_drive *dv, const ob_run *r);
/* dv's runs, newest first: ob_drun_next(d) is NULL after the last; ob_drun_host(d) the
 * host's handle. Freeing d takes it off (take the next one first). */
ob_drun *ob_drive_runs(const ob_drive *dv);
ob_drun *ob_drun_next(const ob_drun *d);
void *ob_drun_host(const ob_drun *d);
/* While the loop has nothing left that could wake them, the awaited calls of dv's runs
 * that still wait fail as stalled, one run after the other (their failures may give
 * the loop work again: then it stops). Not while the host is busy. Returns how many
 * calls failed. */
size_t ob_drive_fail_stalled(ob_drive *dv);
/* The same for one run: its waiting calls fail as stalled (the caller has found the
 * loop with nothing left). Returns how many failed (0 for a cancelled run, or one on
 * threads). */
size_t ob_drun_fail_stalled(ob_drun *d);

#endif
