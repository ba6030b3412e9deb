/* ob_queue_client.c -- submitting and waiting from a host's loop (ob_queue_client.h).
 *
 * A submission is a batch of one (ob_queue_batch: validated here, before anything
 * is sent) handed to ob_queue_submit_start once the client's connection is up.
 * A wait is an ob_queue_wait on a connection of its own. Waits and submissions
 * that have called back are freed by the client's reaper (a zero timer), never
 * from inside the hiredis callback that ended them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "fleet/ob_queue_batch.h"
#include "fleet/ob_queue_client.h"
#include "fleet/ob_queue_wait.h"

typedef struct sub {
  ob_qclient *c;
  struct sub *next;
  ob_queue_batch *b;
  ob_qclient_submit_cb cb;
  void *ud;
  int started, over, dropped;
} sub;

struct ob_qwait {
  ob_qclient *c;
  struct ob_qwait *next;
  ob_redis *r;
  ob_queue_wait *qw;
  char *job, *state;
  ob_qclient_result_cb cb;
  void *ud;
  int ever_up, over;
};

struct ob_qclient {
  uv_loop_t *loop;
  char *url, *queue;
  ob_redis *r;
  int up;
  sub *subs;
  ob_qwait *waits;
  uv_timer_t *reaper;
  int reaping;
};

static void reap(uv_timer_t *t);

static void schedule_reap(ob_qclient *c) {
  if (!c->reaping) {
    c->reaping = 1;
    uv_timer_start(c->reaper, reap, 0, 0);
  }
}

/* --- submissions ---------------------------------------------------------------------------- */

static void on_submitted(void *ud, char **ids, size_t n, const char *batch, const char *why) {
  sub *s = ud;
  (void)batch;
  s->over = 1;
  if (!s->dropped)
    s->cb(s->ud, ids && n ? ids[0] : NULL, why);
  schedule_reap(s->c);
}

static void start(sub *s) {
  ob_qclient *c = s->c;
  s->started = 1;
  if (ob_queue_submit_start(c->r, c->queue, s->b->jobs, s->b->njobs,
                            s->b->tools_id[0] ? s->b->tools_id : NULL, s->b->tools, 0,
                            on_submitted, s) != OB_OK) {
    s->over = 1;
    if (!s->dropped)
      s->cb(s->ud, NULL, "the connection to Redis was lost");
    schedule_reap(c);
  }
}

static void client_up(void *ud) {
  ob_qclient *c = ud;
  c->up = 1;
  for (sub *s = c->subs; s; s = s->next)
    if (!s->started && !s->over)
      start(s);
}

static void client_down(void *ud, const char *why) {
  ob_qclient *c = ud;
  c->up = 0;
  char msg[600];
  snprintf(msg, sizeof msg, "cannot reach Redis at %s: %s", c->url, why);
  for (sub *s = c->subs; s; s = s->next)
    if (!s->started && !s->over) {
      s->over = 1;
      s->cb(s->ud, NULL, msg);
    }
  schedule_reap(c);
}

int ob_qclient_submit(ob_qclient *c, ob_engine *e, const char *plan_text, size_t len,
                      const char *name, const ob_value *inputs, ob_qclient_submit_cb cb, void *ud,
                      char **problems) {
  *problems = NULL;
  ob_queue_batch *b = ob_queue_batch_new(plan_text, len, name, e, inputs, NULL, 0);
  if (b->nproblems) {
    ob_buf buf;
    ob_buf_init(&buf);
    for (size_t i = 0; i < b->nproblems; i++)
      ob_buf_addf(&buf, "%s%s", i ? "\n" : "", b->problems[i]);
    *problems = buf.data;
    ob_queue_batch_free(b);
    return OB_EINVAL;
  }
  sub *s = ob_xcalloc(1, sizeof *s);
  *s = (sub){.c = c, .next = c->subs, .b = b, .cb = cb, .ud = ud};
  c->subs = s;
  if (c->up)
    start(s);
  return OB_OK;
}

/* --- waits ---------------------------------------------------------------------------------- */

static void wait_result(void *ud, size_t i, const ob_queue_result *res) {
  ob_qwait *w = ud;
  (void)i;
  if (w->over)
    return;
  if (!res->state || res->exit >= 0) {
    w->over = 1;
    w->cb(w->ud, res, res->state ? NULL : "no such job");
    schedule_reap(w->c);
    return;
  }
  free(w->state); /* not finished: told with the reason the wait ends for */
  w->state = ob_xstrdup(res->state);
}

static void wait_done(void *ud, const char *why) {
  ob_qwait *w = ud;
  if (w->over)
    return;
  w->over = 1;
  ob_queue_result res = {.job = w->job, .exit = -1, .output = "null", .state = w->state};
  w->cb(w->ud, &res, why ? why : "no such job"); /* no why: it awaited nothing */
  schedule_reap(w->c);
}

static void wait_up(void *ud) {
  ob_qwait *w = ud;
  w->ever_up = 1;
  if (!w->over)
    ob_queue_wait_reconnected(w->qw);
}

static void wait_down(void *ud, const char *why) {
  ob_qwait *w = ud;
  if (w->ever_up || w->over)
    return; /* it reconnects */
  char msg[600];
  snprintf(msg, sizeof msg, "cannot reach Redis at %s: %s", w->c->url, why);
  w->over = 1;
  ob_queue_result res = {.job = w->job, .exit = -1, .output = "null", .state = NULL};
  w->cb(w->ud, &res, msg);
  schedule_reap(w->c);
}

ob_qwait *ob_qclient_wait(ob_qclient *c, const char *job, uint64_t timeout_ms,
                          ob_qclient_result_cb cb, void *ud) {
  ob_qwait *w = ob_xcalloc(1, sizeof *w);
  w->c = c;
  w->job = ob_xstrdup(job);
  w->cb = cb;
  w->ud = ud;
  char *key = ob_queue_key(c->queue, "seq", NULL);
  ob_redis_handlers h = {wait_up, wait_down, w, key};
  ob_error err;
  w->r = ob_redis_open(c->loop, c->url, &h, &err);
  free(key);
  if (!w->r) { /* the URL was good for c */
    free(w->job);
    free(w);
    return NULL;
  }
  ob_queue_ids *ids = ob_queue_ids_new();
  ob_queue_ids_add(ids, job, strlen(job));
  /* an id the set cannot hold ("", or too long): none awaited, and wait_done says
     there is no such job */
  w->qw = ob_queue_wait_start(w->r, c->queue, ids, NULL, 0, timeout_ms, wait_result, wait_done, w);
  w->next = c->waits;
  c->waits = w;
  return w;
}

void ob_qwait_cancel(ob_qwait *w) {
  if (!w || w->over)
    return;
  w->over = 1;
  schedule_reap(w->c);
}

static void free_wait(ob_qwait *w) {
  ob_queue_wait_free(w->qw);
  ob_redis_close(w->r);
  free(w->job);
  free(w->state);
  free(w);
}

/* --- the client ----------------------------------------------------------------------------- */

static void reap(uv_timer_t *t) {
  ob_qclient *c = t->data;
  c->reaping = 0;
  for (sub **pp = &c->subs; *pp;) {
    sub *s = *pp;
    if (s->over) {
      *pp = s->next;
      ob_queue_batch_free(s->b);
      free(s);
    } else {
      pp = &s->next;
    }
  }
  for (ob_qwait **pp = &c->waits; *pp;) {
    ob_qwait *w = *pp;
    if (w->over) {
      *pp = w->next;
      free_wait(w);
    } else {
      pp = &w->next;
    }
  }
}

ob_qclient *ob_qclient_new(uv_loop_t *loop, const char *url, const char *queue, ob_error *err) {
  if (queue && !ob_queue_name_ok(queue)) {
    ob_error_set(err, OB_EINVAL, 0, "\"%s\": a queue's name is 1 to 64 letters, digits, _ . -",
                 queue);
    return NULL;
  }
  ob_qclient *c = ob_xcalloc(1, sizeof *c);
  c->loop = loop;
  c->url = ob_xstrdup(url);
  c->queue = ob_xstrdup(queue ? queue : OB_QUEUE_DEFAULT);
  char *key = ob_queue_key(c->queue, "seq", NULL);
  ob_redis_handlers h = {client_up, client_down, c, key};
  c->r = ob_redis_open(loop, url, &h, err);
  free(key);
  if (!c->r) {
    free(c->url);
    free(c->queue);
    free(c);
    return NULL;
  }
  c->reaper = ob_xmalloc(sizeof *c->reaper);
  uv_timer_init(loop, c->reaper);
  c->reaper->data = c;
  return c;
}

static void free_handle(uv_handle_t *h) { free(h); }

void ob_qclient_free(ob_qclient *c) {
  if (!c)
    return;
  for (sub *s = c->subs; s; s = s->next) {
    s->dropped = 1;
    s->over = 1;
  }
  ob_redis_close(c->r); /* started submissions are called back ("closed"): dropped */
  while (c->subs) {
    sub *s = c->subs;
    c->subs = s->next;
    ob_queue_batch_free(s->b);
    free(s);
  }
  while (c->waits) {
    ob_qwait *w = c->waits;
    c->waits = w->next;
    w->over = 1;
    free_wait(w);
  }
  uv_close((uv_handle_t *)c->reaper, free_handle);
  free(c->url);
  free(c->queue);
  free(c);
}
