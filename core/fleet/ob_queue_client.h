/* ob_queue_client.h -- a host's handle on a job queue: submit plans and wait for
 * their results from the host's own loop, without the command line. What the C
 * API (obelus_queue_*, obelus_queue.c) and the Lua module (obelus.queue,
 * ob_luamod_queue.c) are made of; ob_queue_client.c tells how.
 *
 * One connection for submissions (made at once, in the background; those
 * submitted before it is up wait for it; those pending when a connection attempt
 * fails fail with the reason, naming the URL). Each wait has a connection of its
 * own, since it blocks on it, and goes on through reconnections.
 *
 * Costs: a connection per client and per wait in progress; a submission is
 * ob_queue_submit_start's two round trips. */
#ifndef OB_QUEUE_CLIENT_H
#define OB_QUEUE_CLIENT_H

#include <stdint.h>
#include <uv.h>

#include "engine/ob_engine.h"
#include "fleet/ob_queue.h"
#include "fleet/ob_queue_wait.h"

typedef struct ob_qclient ob_qclient;
typedef struct ob_qwait ob_qwait;

/* Called once per submission: the job id, or NULL and why. From the loop. */
typedef void (*ob_qclient_submit_cb)(void *ud, const char *job, const char *why);
/* Called once per wait: the job's result (res->exit -1 and why "timeout" when the
 * timeout passed first; why says what else went wrong). From the loop. */
typedef void (*ob_qclient_result_cb)(void *ud, const ob_queue_result *res, const char *why);

/* NULL with err for a bad URL or queue name. */
ob_qclient *ob_qclient_new(uv_loop_t *loop, const char *url, const char *queue, ob_error *err);

/* Validates and submits one job: plan_text (its name in messages: name), inputs
 * (an array of documents, or NULL), e (NULL: validate without tools; else against
 * e's tools, the job then going to workers with the same tool files). OB_OK (cb
 * will be called); OB_EINVAL when the plan is invalid, *problems (malloc'd) then
 * holding every problem, one a line (cb will not be called). */
int ob_qclient_submit(ob_qclient *c, ob_engine *e, const char *plan_text, size_t len,
                      const char *name, const ob_value *inputs, ob_qclient_submit_cb cb, void *ud,
                      char **problems);

/* Waits for job (timeout_ms 0: none). The wait ends with cb, or is cancelled. */
ob_qwait *ob_qclient_wait(ob_qclient *c, const char *job, uint64_t timeout_ms,
                          ob_qclient_result_cb cb, void *ud);
/* Ends a wait whose callback has not been called: it never will be. */
void ob_qwait_cancel(ob_qwait *w);

/* Frees the client: pending submissions and waits are dropped, their callbacks
 * never called. Its handles close on the loop's next turn. */
void ob_qclient_free(ob_qclient *c);

#endif
