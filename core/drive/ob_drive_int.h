/* ob_drive_int.h -- what the driver's two files share (ob_drive.c: a driven run;
 * ob_drive_loop.c: an engine's runs, deferred work, stalls). Private to drive/. */
#ifndef OB_DRIVE_INT_H
#define OB_DRIVE_INT_H

#include "drive/ob_shard.h"
#include "engine/ob_resume.h"
#include "log/ob_wal.h"

/* as ob_drive.h names them (a file includes both: this header does not include that one) */
typedef struct ob_drun ob_drun;
typedef struct ob_drive ob_drive;

struct ob_drun {
  ob_engine *e;
  ob_plan *plan;
  ob_value *plan_value, *inputs;
  char *file;          /* the plan file (a resumed run's: the one its journal names), or NULL */
  ob_resume *resume;   /* the journal a run is taken up from, or NULL */
  ob_wal *journal;     /* what the run writes, or NULL */
  ob_run *run;         /* the scheduler's run, once made on one engine */
  ob_shards *shards;   /* the run on threads, once started */
  size_t threads;      /* asked for (src.threads); on_threads: the run goes on them */
  int may_thread, on_threads, cancelled, journal_ended;
  ob_run_options ro;   /* as made: the host's listeners replaced by the driver's */
  void (*on_event)(void *ud, const ob_event *ev); /* the host's */
  void (*on_done)(ob_run *r, void *ud);
  void *ud;
  size_t calls_used;   /* --max-calls, when the host has no count of its own */
  ob_drive *dv;        /* the engine's driver it is attached to, or NULL */
  void *host;          /* the host's handle of it (ob_drive_find) */
  ob_drun *next, **prevp; /* in dv's list */
};


/* --- taking the top-level run up (ob_drive_resume.c): the steps of
 * ob_drun_from_resume, ob_drun_open_journal and ob_drun_make for a resumed run --- */

/* The plan as it ran, made a plan (named name; NULL: the file the run named)
 * and checked against e's tools: its problems in ->errors. Its plans root
 * (_delegate) is plans_root, or, when NULL, the folder of the plan file the
 * run named. When it has none,
 * what changed since the run is described in why and counted in *nchanges
 * (the caller refuses to go on unless forced). *plan_value gets the plan's
 * value (a new reference): release it, and free the plan, after the run. */
ob_plan *ob_resume_check(ob_resume *rs, ob_engine *e, const char *name, const char *plans_root,
                         ob_value **plan_value, ob_buf *why, size_t *nchanges);
/* Makes the journal ready for what the resumed run appends: for a run that
 * did not end, opened to append under mode (locked: a journal another obelus
 * writes is refused; one that changed since it was read too), then cut back to
 * its last record
 * (*journal; the caller closes it after the run, ob_run_detach_journal first
 * if runs still use it); for a run that ended, nothing (*journal NULL). */
int ob_resume_open(const ob_resume *rs, uv_loop_t *loop, ob_fsync mode, ob_wal **journal,
                   ob_error *err);
/* The journal's top-level run on e, as the journal left it, writing to journal
 * (ob_resume_open's): sets ro's journal and resume. rs outlives the run. */
ob_run *ob_resume_start(ob_engine *e, ob_plan *plan, ob_resume *rs, ob_wal *journal,
                        ob_run_options *ro, ob_error *err);

/* Takes d off its driver's list (ob_drive_loop.c). */
void ob_drun_detach(ob_drun *d);

#endif
