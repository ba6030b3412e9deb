/* ob_worker.h -- a worker of a job queue (ob_queue.h): takes jobs from Redis
 * through the consumer group, runs up to --jobs of them at once on one engine
 * and its loop, ships each job's journal to Redis as it is written, stores the
 * result and acknowledges the job in one MULTI, takes over the jobs of workers
 * that died (resuming them from their journals in Redis), and fails poison jobs.
 * ob_worker.c tells how; `obelus worker` (ob_cmd_worker.c) is a thin layer over it.
 *
 * Costs: two Redis connections (one blocks on XREADGROUP), one timer; per job
 * running, a run, a local journal file (under dir; removed when the job ends)
 * and its copy in Redis. */
#ifndef OB_WORKER_H
#define OB_WORKER_H

#include <stdint.h>

#include "engine/ob_engine.h"
#include "engine/ob_run.h"

typedef struct ob_worker ob_worker;

#define OB_WORKER_KEEP_JOURNALS_S 3600
#define OB_WORKER_KEEP_RESULTS_S 86400
#define OB_WORKER_KEEP_FOREVER UINT64_MAX
#define OB_WORKER_KEEP_NONE (UINT64_MAX - 1)

/* What a live status line shows (ob_worker_options.on_status). */
typedef struct ob_worker_status {
  const char *name;  /* the worker's name (its consumer in the group) */
  size_t running;    /* jobs running here */
  uint64_t done, failed, claimed; /* jobs ended so far; claimed: taken over */
  int redis_up;      /* 0 while reconnecting */
  int ended;         /* the last status: the worker has ended (a line is erased) */
} ob_worker_status;

typedef struct ob_worker_options {
  const char *redis;      /* the URL */
  const char *queue;      /* NULL: OB_QUEUE_DEFAULT */
  const char *name;       /* the consumer's name; NULL: host:pid */
  const char *dir;        /* where local journals go; NULL: a temporary folder */
  const char *plans_root; /* where jobs' _delegate paths lead (NULL: the current folder) */
  size_t jobs;            /* at most this many at once (0: 1) */
  uint64_t claim_idle_ms; /* a job pending longer is taken over (0: the default) */
  unsigned max_deliveries; /* a job delivered this many times is poison (0: the default) */
  int drain;              /* end once the queue is empty and nothing is pending */
  /* How long a finished job's journal (its compact record) and its result are kept
   * in Redis, in seconds: 0, the defaults (OB_WORKER_KEEP_JOURNALS_S,
   * OB_WORKER_KEEP_RESULTS_S); OB_WORKER_KEEP_FOREVER; for journals, OB_WORKER_KEEP_NONE
   * keeps none. A job's plan is kept as long as the longer of the two after its last
   * job ended. */
  uint64_t keep_journals_s, keep_results_s;
  ob_run_options run;     /* every job's run options (limits); journal, on_done, ud,
                             plans_root are the worker's */
  /* Notes (what the worker does that its operator should know: a job taken over, a
   * result refused, Redis lost...), one line each without its end; job: the job it is
   * about, or NULL. NULL: none. */
  void (*on_note)(void *note_ud, const char *job, const char *msg);
  /* The worker's status, after each note, at each tick and each reap (often: a line
   * drawn from it throttles itself), and once with ended set. NULL: none. */
  void (*on_status)(void *note_ud, const ob_worker_status *st);
  void *note_ud;
} ob_worker_options;

/* What the worker reports when it ends. */
typedef struct ob_worker_stats {
  uint64_t done, failed, claimed, poisoned, refused;
} ob_worker_stats;

/* Starts a worker on e's loop (e's tools are the worker's). on_end is called once,
 * from the loop, when the worker has ended: drained (--drain), stopped
 * (ob_worker_stop) with its jobs finished or handed back, or unable to reach Redis
 * at first (why says so, naming the URL). NULL with err for bad options. */
ob_worker *ob_worker_start(ob_engine *e, const ob_worker_options *o,
                           void (*on_end)(void *ud, const char *why), void *ud, ob_error *err);

/* Stops taking jobs. grace_ms: how long running jobs may go on to finish; then
 * they are cancelled and handed back (made claimable at once, resumed from their
 * journals by another worker). 0: hand back at once. */
void ob_worker_stop(ob_worker *w, uint64_t grace_ms);

void ob_worker_get_stats(const ob_worker *w, ob_worker_stats *out);

/* The worker's name (its consumer in the group: o.name, or HOST:PID); w's. */
const char *ob_worker_name(const ob_worker *w);

/* Frees an ended worker (after on_end). */
void ob_worker_free(ob_worker *w);

#endif
