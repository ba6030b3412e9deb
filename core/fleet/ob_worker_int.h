/* ob_worker_int.h -- the worker's own data (ob_worker.c only). Its jobs, and what
 * they share with it, are an ob_wjobs (ob_worker_job.h), the worker's first member;
 * ob_worker.h is the worker's interface. */
#ifndef OB_WORKER_INT_H
#define OB_WORKER_INT_H

#include <stdint.h>

#include "fleet/ob_worker_job.h"

struct ob_worker {
  ob_wjobs js; /* its jobs, and what they share with it: first */
  ob_worker_options o;
  int own_dir;
  ob_redis *rd; /* blocks on XREADGROUP; js.cmd carries the rest */
  char tools_id[17];
  char *tools_json;
  size_t claiming;  /* XCLAIMs out */
  int reading, groups_ready, ever_up, ended, reaping;
  uint64_t grace_deadline;
  uv_timer_t tick, reaper, grace, reread;
  uint64_t read_backoff_ms; /* after a read that failed: the wait before the next (0: none) */
  int read_waits;           /* the reread timer runs: no read before it fires */
  int timers_open;
  void (*on_end)(void *ud, const char *why);
  void *ud;
  uint64_t tick_ms;  /* how often the tick runs (and the worker announces itself) */
  int drain_checks; /* XPENDING replies awaited by a drain check */
  uint64_t drain_pending;
  char why[512];
};

#endif
