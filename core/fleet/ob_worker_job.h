/* ob_worker_job.h -- a job's life in a worker (ob_worker_job.c), as the worker
 * (ob_worker.c) drives it: the jobs of a worker and what they share (ob_wjobs, which
 * the worker holds and fills), one job (wjob), and the job's functions. The job
 * reaches the worker only through the host's callbacks (ob_wjob_host): this header
 * and ob_worker_job.c never include the worker's own (ob_worker_int.h). */
#ifndef OB_WORKER_JOB_H
#define OB_WORKER_JOB_H

#include <stdint.h>

#include "fleet/ob_queue.h"
#include "io/ob_redis.h"
#include "engine/ob_resume.h"
#include "drive/ob_drive.h"
#include "log/ob_wal.h"
#include "fleet/ob_worker.h"

#define PLAN_CACHE 64

/* What a job asks of the worker that holds it. ud: the worker. */
typedef struct ob_wjob_host {
  /* A note about job (NULL: about the jobs as a whole), one line without its end. */
  void (*say)(void *ud, const char *job, const char *msg);
  /* The reaper runs on the loop's next turn: ended jobs freed (ob_wjob_reap_all),
   * results sent, the worker's status told again. */
  void (*schedule_reap)(void *ud);
  void *ud;
} ob_wjob_host;

typedef enum { J_FETCH, J_RESUME, J_RUN, J_RAN, J_FINISH, J_DONE } jstate;

typedef struct cached_plan {
  char hash[17];
  ob_value *value; /* parsed */
  ob_value *text;  /* as Redis holds it (a string): the dictionary of its jobs' records */
} cached_plan;

typedef struct wjob wjob;

/* The jobs of a worker and what they share: set up by the worker (ob_worker_start),
 * which keeps the connections, names and options in it for its own use too. */
typedef struct ob_wjobs {
  ob_wjob_host host;
  ob_engine *e;
  uv_loop_t *loop;
  ob_redis *cmd;        /* the connection that carries everything but the reads */
  const ob_run_options *run; /* every job's run options (the worker's o.run) */
  unsigned max_deliveries;
  /* how long a finished job's journal record and its result are kept (s; UINT64_MAX:
     forever; keep_journals 0: no record) */
  uint64_t keep_journals_s, keep_results_s;
  char *queue, *me, *dir, *plans_root, *root; /* root: plans_root as a real path */
  char *streams[2];
  int nstreams;
  int stopping;         /* the worker stops: a job taken meanwhile is handed back */
  wjob *jobs;
  size_t running;       /* jobs in any state but J_DONE */
  cached_plan cache[PLAN_CACHE];
  size_t cache_next;
  ob_worker_stats stats;
  struct ob_wrec *held; /* journals waiting for a record (ob_worker_records.h), or NULL */
} ob_wjobs;

struct wjob {
  ob_wjobs *w;
  struct wjob *next;
  char *id, *stream, *entry, *name, *plan_hash, *jkey, *path;
  char *batch;         /* the batch its entry names (its count of jobs left), or NULL */
  ob_value *inputs;
  char *holder;        /* "STREAM ENTRY": what the job's hash names as holding it */
  char *bad;           /* why its entry cannot run (ob_queue_entry_decode), or NULL */
  jstate state;
  int claimed, handed_back;
  int wrote_path;      /* its journal from Redis went into path (to be removed) */
  int fetching, awaits_plan; /* its GET of the plan is out; another job's GET will do */
  int asks_plan;       /* its claim (the EVAL that marks it running) also GETs the plan */
  int replies;         /* replies still to come to commands sent with it as their ud: it
                          is not freed before (a job handed back meanwhile ignores them) */
  long long deliveries;
  ob_value *plan_value; /* the plan fetched, until its run is prepared */
  ob_value *plan_text;  /* its text (a string), for the journal's record; or NULL */
  ob_drun *d;          /* its run (ob_drive.h: plan, journal, run), once prepared */
  ob_buf jbuf;         /* the journal: what was shipped to Redis, then what is to be */
  size_t shipped;      /* how much of jbuf was sent (SET, then APPENDs) */
  int exit;            /* the result */
  char *output, *error;
  int finish_sent;     /* the MULTI is out; 0 again when it was lost */
};

/* A note to the host (host.say): about job (NULL: the jobs, or the worker, as a whole),
 * printf-style. The worker's own notes go through it too. */
void ob_wjob_say(ob_wjobs *w, const char *job, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A job from a stream entry ([id, [field, value, ...]]) added to w's jobs; NULL for an
 * entry deleted meanwhile. The entry is decoded and checked (ob_queue_job.h): a bad one
 * is still a job, whose result says what is wrong with it. */
wjob *ob_wjob_new(ob_wjobs *w, const char *stream, redisReply *entry);
/* Claims it in Redis (one EVAL: marked running unless it is finished, or another
 * entry of the same id runs it; then this entry is acknowledged and dropped), then
 * fetches its plan, then runs (or resumes) it; a job delivered more than
 * --max-deliveries times is failed as poison instead, a malformed one with why. */
void ob_wjob_take(wjob *j);
void ob_wjob_free(wjob *j);
/* The job is over here (stored, handed back, or left pending): freed by the reaper. */
void ob_wjob_done(wjob *j);
/* Its journal SET whole in Redis from the job's copy (after a reconnection). */
void ob_wjob_resync(wjob *j);
/* What its journal gained since it was last shipped, sent (the first time SET, then
 * APPENDed). The reaper does it for every job still running, once a turn of the loop:
 * a job that ends in the same turn ships nothing but its record (ob_queue_journal.h). */
void ob_wjob_ship(wjob *j);
/* The reaper's work on jobs: runs that settled get their results, ended jobs are
 * freed, results not sent are sent in batches. */
void ob_wjob_reap_all(ob_wjobs *w);
/* Sends the results of the jobs that have one and have not sent it. */
void ob_wjob_send_finishes(ob_wjobs *w);

#endif
