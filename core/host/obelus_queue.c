/* obelus_queue.c -- the C API's job queue (obelus.h): obelus_queue_* over the
 * queue client (ob_queue_client.c), translating its callbacks to the host's
 * signatures. Each submission and wait carries a small record of the host's
 * callback and data, freed once called back (or when the queue goes). */
#include <stdlib.h>
#include <string.h>

#include "host/ob_api.h"
#include "base/ob_mem.h"
#include "fleet/ob_queue_client.h"

typedef struct pending {
  obelus_queue *q;
  struct pending *next, **prevp; /* the queue's list: freed with it if never called */
  obelus_submit_cb submitted;
  obelus_job_cb finished;
  void *data;
} pending;

struct obelus_queue {
  ob_qclient *c;
  char *msg;
  pending *pend;
};

static pending *pending_new(obelus_queue *q, obelus_submit_cb s, obelus_job_cb f, void *data) {
  pending *p = ob_xcalloc(1, sizeof *p);
  *p = (pending){.q = q, .next = q->pend, .prevp = &q->pend, .submitted = s, .finished = f,
                 .data = data};
  if (q->pend)
    q->pend->prevp = &p->next;
  q->pend = p;
  return p;
}

static void pending_free(pending *p) {
  *p->prevp = p->next;
  if (p->next)
    p->next->prevp = p->prevp;
  free(p);
}

int obelus_queue_new(obelus_queue **out, uv_loop_t *loop, const char *redis_url,
                     const char *name) {
  if (!out)
    return OBELUS_EINVAL;
  *out = NULL;
  if (!loop || !redis_url)
    return OBELUS_EINVAL;
  ob_error err;
  ob_qclient *c = ob_qclient_new(loop, redis_url, name, &err);
  if (!c)
    return OBELUS_EINVAL;
  obelus_queue *q = ob_xcalloc(1, sizeof *q);
  q->c = c;
  q->msg = ob_xstrdup("");
  *out = q;
  return OBELUS_OK;
}

static void on_submitted(void *ud, const char *job, const char *why) {
  pending *p = ud;
  p->submitted(p->q, job, why, p->data);
  pending_free(p);
}

int obelus_queue_submit(obelus_queue *q, obelus_engine *e, const char *plan_json,
                        const char *input_json, const char *name, obelus_submit_cb cb,
                        void *data) {
  if (!q || !plan_json || !cb)
    return OBELUS_EINVAL;
  free(q->msg);
  q->msg = ob_xstrdup("");
  ob_value *inputs = NULL;
  if (input_json) {
    ob_error err;
    ob_value *in = ob_json_parse(input_json, strlen(input_json), &err);
    if (!in) {
      free(q->msg);
      q->msg = ob_xstrdup(err.msg);
      return OBELUS_EJSON;
    }
    inputs = ob_array_push(ob_array(), in);
  }
  pending *p = pending_new(q, cb, NULL, data);
  char *problems = NULL;
  int rc = ob_qclient_submit(q->c, ob_api_engine(e), plan_json, strlen(plan_json),
                             name ? name : "plan", inputs, on_submitted, p, &problems);
  ob_unref(inputs);
  if (rc != OB_OK) {
    pending_free(p);
    free(q->msg);
    q->msg = problems ? problems : ob_xstrdup("invalid plan");
    return OBELUS_EINVAL;
  }
  return OBELUS_OK;
}

static void on_finished(void *ud, const ob_queue_result *res, const char *why) {
  pending *p = ud;
  p->finished(p->q, res->job, res->exit, res->output ? res->output : "null",
              why ? why : res->error, p->data);
  pending_free(p);
}

int obelus_queue_wait(obelus_queue *q, const char *job, uint64_t timeout_ms, obelus_job_cb cb,
                      void *data) {
  if (!q || !job || !cb)
    return OBELUS_EINVAL;
  pending *p = pending_new(q, NULL, cb, data);
  if (!ob_qclient_wait(q->c, job, timeout_ms, on_finished, p)) {
    pending_free(p);
    return OBELUS_EINVAL;
  }
  return OBELUS_OK;
}

const char *obelus_queue_errmsg(const obelus_queue *q) { return q && q->msg ? q->msg : ""; }

void obelus_queue_free(obelus_queue *q) {
  if (!q)
    return;
  ob_qclient_free(q->c); /* calls nothing back */
  while (q->pend)
    pending_free(q->pend);
  free(q->msg);
  free(q);
}
