/* ob_queue_wait.h -- waiting for jobs of a queue (ob_queue.h lays out its keys) to
 * finish: what `obelus wait`, the C API's obelus_queue_wait and the Lua module's
 * queue:wait are made of. Any number of jobs, in memory of a byte a job and the
 * set of their ids (ob_queue_ids.h); ob_queue_wait.c tells how and what it costs. */
#ifndef OB_QUEUE_WAIT_H
#define OB_QUEUE_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include "io/ob_redis.h"
#include "fleet/ob_queue_ids.h"

/* A finished job as `wait` prints it. */
typedef struct ob_queue_result {
  const char *job;
  int exit;             /* 0, 1, 2; -1: not finished (timed out) */
  const char *output;   /* JSON text ("null" when none) */
  const char *error;    /* why it failed without a result, or NULL */
  const char *state;    /* queued, running, done, failed; NULL: no such job */
} ob_queue_result;

typedef struct ob_queue_wait ob_queue_wait;
/* Called once per job (see ob_queue_wait_start for i and the order): finished, or
 * (when the wait ends by its timeout or is given up) as it stands. */
typedef void (*ob_queue_result_cb)(void *ud, size_t i, const ob_queue_result *res);
/* Called once at the end: why (NULL when every job finished; "timeout", or the
 * connection's trouble). */
typedef void (*ob_queue_wait_done_cb)(void *ud, const char *why);

/* Waits on r (a connection of its own: it blocks on it) for the jobs in ids (sealed;
 * the wait takes it) of queue q, reading ob:{q}:done with blocking XREADs.
 * order NULL: each job of ids once, as it finishes (i: its index in ids); jobs found
 * finished when the wait starts come first, in ids' order. Else order[0..norder)
 * (copied) are indexes into ids, an index possibly more than once: reported in that
 * order (i: the position in order), each as soon as it and those before it are
 * known. timeout_ms 0: none. The wait keeps going through reconnections; r's on_up
 * must call ob_queue_wait_reconnected. */
ob_queue_wait *ob_queue_wait_start(ob_redis *r, const char *q, ob_queue_ids *ids,
                                   const size_t *order, size_t norder, uint64_t timeout_ms,
                                   ob_queue_result_cb on_result, ob_queue_wait_done_cb on_done,
                                   void *ud);
void ob_queue_wait_reconnected(ob_queue_wait *w);
/* Stops a wait (no more callbacks) and frees it; also after its on_done. */
void ob_queue_wait_free(ob_queue_wait *w);

#endif
