/* ob_drive_int.h -- what the driver's two files share (ob_drive.c: a driven run;
 * ob_drive_loop.c: an engine's runs, deferred work, stalls). Private to drive/. */
#ifndef OB_DRIVE_INT_H
#define OB_DRIVE_INT_H

#include "drive/ob_drive.h"

struct ob_drun {
  ob_engine *e;
  ob_plan *plan;
  ob_value *plan_value, *inputs;
  char *file;          /* the plan file, or NULL */
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


/* Takes d off its driver's list (ob_drive_loop.c). */
void ob_drun_detach(ob_drun *d);

#endif
