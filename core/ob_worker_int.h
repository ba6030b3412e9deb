/* ob_worker_int.h -- what the worker's two files share: the worker and its jobs
 * (ob_worker.c: connections, reading, claiming, the tick, starting and stopping;
 * ob_worker_job.c: a job's life, from its delivery to its stored result). Internal
 * to them; ob_worker.h is the worker's interface. */
#ifndef OB_WORKER_INT_H
#define OB_WORKER_INT_H

#include <stdint.h>

#include "ob_queue.h"
#include "ob_resume.h"
#include "ob_wal.h"
#include "ob_worker.h"

#define PLAN_CACHE 64

typedef enum { J_FETCH, J_RESUME, J_RUN, J_RAN, J_FINISH, J_DONE } jstate;

typedef struct wjob {
  ob_worker *w;
  struct wjob *next;
  char *id, *stream, *entry, *name, *plan_hash, *jkey, *path;
  ob_value *inputs;
  char *holder;        /* "STREAM ENTRY": what the job's hash names as holding it */
  char *bad;           /* why its entry cannot run (ob_queue_entry_decode), or NULL */
  jstate state;
  int claimed, handed_back;
  int fetching, awaits_plan; /* its GET of the plan is out; another job's GET will do */
  int asks_plan;       /* its claim (the EVAL that marks it running) also GETs the plan */
  int replies;         /* replies still to come to commands sent with it as their ud: it
                          is not freed before (a job handed back meanwhile ignores them) */
  long long deliveries;
  ob_value *plan_value;
  ob_plan *plan;
  ob_run *run;
  ob_wal *wal;
  ob_resume *rs;
  ob_buf jbuf;         /* the journal as Redis holds it (what was shipped) */
  int exit;            /* the result */
  char *output, *error;
  int finish_sent;     /* the MULTI is out; 0 again when it was lost */
} wjob;

typedef struct cached_plan {
  char hash[17];
  ob_value *value;
} cached_plan;

struct ob_worker {
  ob_engine *e;
  uv_loop_t *loop;
  ob_worker_options o;
  char *queue, *me, *dir, *plans_root, *root; /* root: plans_root as a real path */
  int own_dir;
  ob_redis *cmd, *rd;
  char tools_id[17];
  char *tools_json;
  char *streams[2];
  int nstreams;
  wjob *jobs;
  size_t running;   /* jobs in any state but J_DONE */
  size_t claiming;  /* XCLAIMs out */
  int reading, groups_ready, ever_up, stopping, ended, reaping;
  uint64_t grace_deadline;
  uv_timer_t tick, reaper, grace, reread;
  uint64_t read_backoff_ms; /* after a read that failed: the wait before the next (0: none) */
  int read_waits;           /* the reread timer runs: no read before it fires */
  int timers_open;
  cached_plan cache[PLAN_CACHE];
  size_t cache_next;
  ob_worker_stats stats;
  void (*on_end)(void *ud, const char *why);
  void *ud;
  uint64_t tick_ms;  /* how often the tick runs (and the worker announces itself) */
  int drawn;         /* the live line is on the terminal */
  uint64_t drawn_at;
  int drain_checks; /* XPENDING replies awaited by a drain check */
  uint64_t drain_pending;
  char why[512];
};


/* ob_worker.c */
void ob_worker_say(ob_worker *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Redraws the live line (at most every PROGRESS_MS unless force). */
void ob_worker_draw(ob_worker *w, int force);
/* The reaper runs on the loop's next turn: ended jobs freed, results sent. */
void ob_worker_schedule_reap(ob_worker *w);
/* A reply nobody needs. */
void ob_worker_ignore_reply(void *ud, redisReply *rp, const char *why);

/* ob_worker_job.c */
/* A job from a stream entry ([id, [field, value, ...]]) added to w's jobs; NULL for an
 * entry deleted meanwhile. The entry is decoded and checked (ob_queue_job.h): a bad one
 * is still a job, whose result says what is wrong with it. */
wjob *ob_wjob_new(ob_worker *w, const char *stream, redisReply *entry);
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
/* The reaper's work on jobs: runs that settled get their results, ended jobs are
 * freed, results not sent are sent in batches. */
void ob_worker_reap_jobs(ob_worker *w);
/* Sends the results of the jobs that have one and have not sent it. */
void ob_worker_send_finishes(ob_worker *w);

#endif
