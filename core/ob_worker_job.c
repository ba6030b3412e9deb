/* ob_worker_job.c -- a job's life in a worker (ob_worker_int.h; the data it
 * reads and writes is laid out in ob_queue.h).
 *
 * A job goes FETCH (its plan's text: one GET per plan however many jobs of it
 * arrive together, parsed plans kept by hash) -> RUN (a run on the worker's
 * engine, whose journal goes to /dev/null and, at every flush, to the job's copy
 * and an APPEND to ob:{Q}:journal:ID) -> RAN (the run settled: from the reaper,
 * its end record and result) -> FINISH (results stored in batches: one MULTI per
 * loop turn, per job an HSET and an XADD, one XACK per stream for all, the
 * counters once; EXEC answered) -> DONE (freed by the reaper). A job taken over
 * from a dead worker goes through RESUME first: its journal is read from Redis
 * into a file in the worker's folder, ob_resume cuts it back to its last record
 * and the run is made from it (completed calls are not run again), after Redis's
 * copy is replaced by the cut one; it then appends to both.
 *
 * Because one connection (`cmd`) carries a job's HSET, its APPENDs and its MULTI
 * in order, its journal in Redis is complete up to its result. When `cmd` is
 * lost, APPENDs of that moment may or may not have arrived: the worker SETs each
 * running job's journal again whole from its copy once reconnected
 * (ob_wjob_resync), and sends again every result whose EXEC did not answer.
 *
 * Runs are ended and freed from the reaper, never from inside their on_done,
 * which the scheduler calls with the run on its stack. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ob_journal.h"
#include "ob_mem.h"
#include "ob_plan.h"
#include "ob_worker_int.h"

/* --- plans ---------------------------------------------------------------------------------- */

static ob_value *cache_get(ob_worker *w, const char *hash) {
  for (size_t i = 0; i < PLAN_CACHE; i++)
    if (w->cache[i].value && !strcmp(w->cache[i].hash, hash))
      return w->cache[i].value;
  return NULL;
}

static void cache_put(ob_worker *w, const char *hash, ob_value *v) {
  cached_plan *c = &w->cache[w->cache_next++ % PLAN_CACHE];
  ob_unref(c->value);
  snprintf(c->hash, sizeof c->hash, "%s", hash);
  c->value = ob_ref(v);
}

/* --- jobs ----------------------------------------------------------------------------------- */

wjob *ob_wjob_new(ob_worker *w, const char *stream, redisReply *entry) {
  /* entry: [id, [field, value, ...]] */
  if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
      entry->element[1]->type != REDIS_REPLY_ARRAY)
    return NULL; /* deleted meanwhile */
  wjob *j = ob_xcalloc(1, sizeof *j);
  j->w = w;
  j->stream = ob_xstrdup(stream);
  j->entry = ob_xstrdup(entry->element[0]->str);
  redisReply *f = entry->element[1];
  for (size_t k = 0; k + 1 < f->elements; k += 2) {
    const char *name = f->element[k]->str, *val = f->element[k + 1]->str;
    if (!strcmp(name, "job"))
      j->id = ob_xstrdup(val);
    else if (!strcmp(name, "plan"))
      j->plan_hash = ob_xstrdup(val);
    else if (!strcmp(name, "name"))
      j->name = ob_xstrdup(val);
    else if (!strcmp(name, "inputs"))
      j->inputs = ob_json_parse(val, f->element[k + 1]->len, NULL);
  }
  if (!j->name)
    j->name = ob_xstrdup("plan.json");
  if (!j->id)
    j->id = ob_xstrdup(j->entry);
  j->jkey = ob_queue_key(w->queue, "journal", j->id);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%s/job-%s.jsonl", w->dir, j->id);
  j->path = b.data;
  j->next = w->jobs;
  w->jobs = j;
  w->running++;
  return j;
}

void ob_wjob_free(wjob *j) {
  if (j->run)
    ob_run_free(j->run);
  if (j->wal) {
    ob_run_detach_journal(j->w->e, j->wal);
    ob_wal_close(j->wal, NULL);
  }
  ob_resume_free(j->rs);
  ob_plan_free(j->plan);
  ob_unref(j->plan_value);
  ob_unref(j->inputs);
  unlink(j->path);
  free(j->id);
  free(j->stream);
  free(j->entry);
  free(j->name);
  free(j->plan_hash);
  free(j->jkey);
  free(j->path);
  free(j->output);
  free(j->error);
  ob_buf_free(&j->jbuf);
  free(j);
}


static void run_finish(wjob *j);

void ob_worker_reap_jobs(ob_worker *w) {
  for (wjob **pp = &w->jobs; *pp;) {
    wjob *j = *pp;
    if (j->state == J_RAN)
      run_finish(j);
    if (j->state == J_DONE) {
      *pp = j->next;
      ob_wjob_free(j);
    } else {
      pp = &j->next;
    }
  }
  ob_worker_send_finishes(w);
}

void ob_wjob_done(wjob *j) {
  j->state = J_DONE;
  j->w->running--;
  ob_worker_schedule_reap(j->w);
}
/* Results are stored in batches: every job that ended since the last loop turn, in
 * one MULTI (per job an HSET and an XADD; one XACK per stream for all; the counters
 * once), sent from the reaper. Its EXEC's answer ends them all; a connection lost
 * before it leaves them to be sent again once it is back. */
#define FINISH_BATCH 256

typedef struct finish_batch {
  ob_worker *w;
  size_t n;
  wjob *jobs[FINISH_BATCH];
} finish_batch;

static void on_exec(void *ud, redisReply *rp, const char *why) {
  finish_batch *fb = ud;
  (void)why;
  for (size_t i = 0; i < fb->n; i++) {
    wjob *j = fb->jobs[i];
    if (!rp || rp->type == REDIS_REPLY_ERROR || rp->type == REDIS_REPLY_NIL) {
      j->finish_sent = 0; /* sent again: at the next reap, or once reconnected */
      continue;
    }
    if (j->exit == 0)
      fb->w->stats.done++;
    else
      fb->w->stats.failed++;
    ob_wjob_done(j);
  }
  ob_worker_draw(fb->w, 0);
  if (rp && rp->type == REDIS_REPLY_ERROR)
    ob_worker_say(fb->w, "storing results failed: %s", rp->str);
  free(fb);
}

static int cmd(ob_worker *w, int argc, const char **argv) {
  return ob_redis_send(w->cmd, ob_worker_ignore_reply, NULL, argc, argv, NULL) == OB_OK;
}

/* Sends the results of every job that has one and has not sent it. */
void ob_worker_send_finishes(ob_worker *w) {
  if (!ob_redis_is_up(w->cmd))
    return;
  for (;;) {
    finish_batch *fb = ob_xmalloc(sizeof *fb);
    fb->w = w;
    fb->n = 0;
    for (wjob *j = w->jobs; j && fb->n < FINISH_BATCH; j = j->next)
      if (j->state == J_FINISH && !j->finish_sent)
        fb->jobs[fb->n++] = j;
    if (!fb->n) {
      free(fb);
      return;
    }
    char *done = ob_queue_key(w->queue, "done", NULL), *stats = ob_queue_key(w->queue, "stats", NULL);
    uint64_t now = ob_queue_now_ms();
    char nowms[32], sec[32], keep[32], ndone[32], nfailed[32];
    snprintf(nowms, sizeof nowms, "%" PRIu64, now);
    snprintf(sec, sizeof sec, "%" PRIu64, now / 1000);
    snprintf(keep, sizeof keep, "%d", OB_QUEUE_DONE_KEEP);
    char *rate = ob_queue_key(w->queue, "rate", sec);
    int ok = cmd(w, 1, (const char *[]){"MULTI"});
    size_t failed = 0;
    for (size_t i = 0; ok && i < fb->n; i++) {
      wjob *j = fb->jobs[i];
      char exit[8];
      snprintf(exit, sizeof exit, "%d", j->exit);
      failed += j->exit != 0;
      char *jk = ob_queue_key(w->queue, "job", j->id);
      const char *h[16] = {"HSET", jk, "state", j->exit ? "failed" : "done", "exit", exit,
                           "output", j->output ? j->output : "null", "finished", nowms,
                           "worker", w->me};
      int hc = 12;
      if (j->error) {
        h[hc++] = "error";
        h[hc++] = j->error;
      }
      ok = cmd(w, hc, h) &&
           cmd(w, 10, (const char *[]){"XADD", done, "MAXLEN", "~", keep, "*", "job", j->id, "exit",
                                        exit});
      free(jk);
    }
    for (int s = 0; ok && s < w->nstreams; s++) { /* one XACK per stream */
      const char **argv = ob_xmalloc((fb->n + 3) * sizeof *argv);
      int argc = 0;
      argv[argc++] = "XACK";
      argv[argc++] = w->streams[s];
      argv[argc++] = OB_QUEUE_GROUP;
      for (size_t i = 0; i < fb->n; i++)
        if (!strcmp(fb->jobs[i]->stream, w->streams[s]))
          argv[argc++] = fb->jobs[i]->entry;
      if (argc > 3)
        ok = cmd(w, argc, argv);
      free(argv);
    }
    char nall[32];
    snprintf(ndone, sizeof ndone, "%zu", fb->n - failed);
    snprintf(nfailed, sizeof nfailed, "%zu", failed);
    snprintf(nall, sizeof nall, "%zu", fb->n);
    ok = ok && cmd(w, 4, (const char *[]){"HINCRBY", stats, "done", ndone}) &&
         cmd(w, 4, (const char *[]){"HINCRBY", stats, "failed", nfailed}) &&
         cmd(w, 3, (const char *[]){"INCRBY", rate, nall}) &&
         cmd(w, 3, (const char *[]){"EXPIRE", rate, "120"});
    free(done);
    free(stats);
    free(rate);
    if (!ok) { /* the connection went: on_up sends them again */
      free(fb);
      return;
    }
    for (size_t i = 0; i < fb->n; i++)
      fb->jobs[i]->finish_sent = 1;
    if (ob_redis_send(w->cmd, on_exec, fb, 1, (const char *[]){"EXEC"}, NULL) != OB_OK) {
      for (size_t i = 0; i < fb->n; i++)
        fb->jobs[i]->finish_sent = 0;
      free(fb);
      return;
    }
  }
}

/* Ends a job with a result that no run made (invalid plan, poison). */
static void job_result(wjob *j, int exit, const char *output, const char *error) {
  j->exit = exit;
  free(j->output);
  free(j->error);
  j->output = output ? ob_xstrdup(output) : NULL;
  j->error = error ? ob_xstrdup(error) : NULL;
  j->state = J_FINISH;
  ob_worker_schedule_reap(j->w); /* sent with the others that end in this turn of the loop */
}

static void on_tee_reply(void *ud, redisReply *rp, const char *why) {
  (void)ud;
  (void)rp;
  (void)why; /* a lost APPEND: the reconnection SETs the journal whole */
}

static void ship(void *ud, const char *bytes, size_t len) {
  wjob *j = ud;
  ob_worker *w = j->w;
  ob_buf_add(&j->jbuf, bytes, len);
  ob_redis_send(w->cmd, on_tee_reply, NULL, 3, (const char *[]){"APPEND", j->jkey, bytes},
                (const size_t[]){6, strlen(j->jkey), len});
}

/* The journal SET whole in Redis, from the job's copy of it. */
void ob_wjob_resync(wjob *j) {
  if (j->wal)
    ob_wal_flush(j->wal); /* ships what is buffered, to the copy too */
  ob_redis_send(j->w->cmd, on_tee_reply, NULL, 3,
                (const char *[]){"SET", j->jkey, j->jbuf.data ? j->jbuf.data : ""},
                (const size_t[]){3, strlen(j->jkey), j->jbuf.len});
}

/* The run has settled: its journal ended and closed, its result stored. From the
 * reaper, outside the scheduler. */
static void run_finish(wjob *j) {
  ob_worker *w = j->w;
  ob_run *r = j->run;
  int status = j->rs ? ob_resume_finish(j->rs, r) : (ob_run_failed(r) ? 1 : 0);
  if (!j->rs)
    ob_run_journal_end(r, status);
  if (j->wal) {
    ob_run_detach_journal(w->e, j->wal);
    ob_error err;
    if (ob_wal_close(j->wal, &err) != OB_OK)
      ob_worker_say(w, "job %s: %s", j->id, err.msg);
    j->wal = NULL;
  }
  ob_value *out = ob_run_output(r);
  char *text = ob_json_print(out, OB_JSON_COMPACT, NULL);
  ob_unref(out);
  job_result(j, status, text, NULL);
  free(text);
}

static void on_run_done(ob_run *r, void *ud) {
  wjob *j = ud;
  (void)r;
  if (j->state != J_RUN)
    return;
  j->state = J_RAN;
  ob_worker_schedule_reap(j->w);
}

/* Problems of a plan found on the worker: the job's result, exit 2. */
static void job_invalid(wjob *j, ob_plan *p, const char *extra) {
  ob_value *list = ob_array();
  for (size_t i = 0; p && i < p->nerrors; i++)
    list = ob_array_push(list, ob_cstring(p->errors[i]));
  if (extra)
    list = ob_array_push(list, ob_cstring(extra));
  char *text = ob_json_print(list, OB_JSON_COMPACT, NULL);
  ob_unref(list);
  job_result(j, 2, text, NULL);
  free(text);
}

static ob_run_options job_run_options(wjob *j) {
  ob_run_options ro = j->w->o.run;
  ro.plans_root = j->w->plans_root;
  ro.on_done = on_run_done;
  ro.ud = j;
  return ro;
}

static void job_run(wjob *j) {
  ob_worker *w = j->w;
  ob_plan_source src = {.name = j->name, .root = w->root, .inputs = j->inputs,
                        .input_label = "--input", .numbered = 1};
  ob_plan *p = j->plan = ob_run_read_plan(w->e, j->plan_value, &src, 0);
  ob_error err;
  ob_run_options ro = job_run_options(j); /* the calls counted with the worker's others */
  if (!p->nerrors && ob_run_count_calls(p, &ro, &err) != OB_OK)
    ob_plan_error(p, NULL, "%s", err.msg);
  if (p->nerrors) {
    job_invalid(j, p, NULL);
    return;
  }
  /* a fresh job's journal lives in Redis and in j->jbuf: no file (the wal writes to
   * /dev/null, and ships each flush) */
  if (!(j->wal = ob_wal_open(w->loop, "/dev/null", OB_WAL_CREATE, OB_FSYNC_NEVER, &err))) {
    job_invalid(j, NULL, err.msg);
    return;
  }
  ob_wal_set_tee(j->wal, ship, j);
  if (j->claimed) /* run again from scratch (taken over without a journal): a new one */
    ob_redis_send(w->cmd, on_tee_reply, NULL, 2, (const char *[]){"DEL", j->jkey}, NULL);
  ro.journal = j->wal;
  j->state = J_RUN;
  if (!(j->run = ob_run_new(w->e, p, j->plan_value, j->inputs, &ro, &err))) {
    j->state = J_FETCH;
    job_invalid(j, NULL, err.msg);
    return;
  }
  ob_run_start(j->run);
}

/* A claimed job: its journal from Redis, resumed. */
static void job_resume(wjob *j, const char *text, size_t len) {
  ob_worker *w = j->w;
  ob_error err;
  FILE *f = fopen(j->path, "w");
  if (!f || fwrite(text, 1, len, f) != len) {
    if (f)
      fclose(f);
    job_invalid(j, NULL, "cannot write the journal taken from Redis to the worker's folder");
    return;
  }
  fclose(f);
  if (!(j->rs = ob_resume_load(j->path, &err))) {
    ob_worker_say(w, "job %s: its journal cannot be resumed (%s); running it from the start", j->id,
        err.msg);
    job_run(j);
    return;
  }
  ob_buf why;
  ob_buf_init(&why);
  size_t changes;
  ob_value *pv;
  ob_plan *p = j->plan = ob_resume_check(j->rs, w->e, j->name, w->plans_root, &pv, &why, &changes);
  ob_unref(j->plan_value);
  j->plan_value = pv;
  ob_buf_free(&why);
  if (p->nerrors) {
    job_invalid(j, p, NULL);
    return;
  }
  if (ob_resume_open(j->rs, w->loop, OB_FSYNC_NEVER, &j->wal, &err) != OB_OK) {
    job_invalid(j, NULL, err.msg);
    return;
  }
  if (j->wal) { /* Redis's copy as resume cut it, then the appends */
    ob_buf cut;
    ob_buf_init(&cut);
    if (ob_read_file(j->path, &cut, &err) == OB_OK)
      ob_buf_add(&j->jbuf, cut.data ? cut.data : "", ob_journal_len(cut.data ? cut.data : "", cut.len));
    ob_buf_free(&cut);
    ob_wjob_resync(j);
    ob_wal_set_tee(j->wal, ship, j);
  }
  ob_run_options ro = job_run_options(j);
  j->state = J_RUN;
  if (!(j->run = ob_resume_start(w->e, p, j->rs, j->wal, &ro, &err))) {
    j->state = J_RESUME;
    job_invalid(j, NULL, err.msg);
    return;
  }
  ob_run_start(j->run);
}

static void on_journal(void *ud, redisReply *rp, const char *why) {
  wjob *j = ud;
  if (!rp) {
    job_result(j, 1, NULL, why); /* cannot happen often: the job is handed back below */
    return;
  }
  const char *text = ob_redis_str(rp);
  if (rp->type == REDIS_REPLY_STRING && rp->len > 0)
    job_resume(j, text, rp->len);
  else
    job_run(j);
}

static void job_begin(wjob *j) {
  ob_worker *w = j->w;
  if (w->stopping) { /* taken as the worker stopped: left pending for another */
    j->handed_back = 1;
    ob_wjob_done(j);
    return;
  }
  if (j->claimed) {
    j->state = J_RESUME;
    if (ob_redis_send(w->cmd, on_journal, j, 2, (const char *[]){"GET", j->jkey}, NULL) != OB_OK)
      ob_wjob_done(j); /* down: it stays pending, claimed again later */
    return;
  }
  job_run(j);
}

/* The plan's text for j and every job that waits for the same plan. */
static void plan_arrived(wjob *j, redisReply *rp) {
  if (!rp) {
    j->handed_back = 1; /* the connection went: the job stays pending, for later */
    ob_wjob_done(j);
    return;
  }
  if (rp->type != REDIS_REPLY_STRING) {
    job_invalid(j, NULL, "the job's plan is gone from Redis");
    return;
  }
  ob_value *v = cache_get(j->w, j->plan_hash);
  ob_error err;
  if (!v && !(v = ob_json_parse(rp->str, rp->len, &err))) {
    job_invalid(j, NULL, err.msg);
    return;
  }
  if (!cache_get(j->w, j->plan_hash)) {
    cache_put(j->w, j->plan_hash, v);
    ob_unref(v);
  }
  j->plan_value = ob_ref(v);
  job_begin(j);
}

static void on_plan(void *ud, redisReply *rp, const char *why) {
  wjob *j = ud;
  ob_worker *w = j->w;
  (void)why;
  j->fetching = 0;
  char hash[17];
  snprintf(hash, sizeof hash, "%s", j->plan_hash);
  plan_arrived(j, rp);
  for (wjob *o = w->jobs; o; o = o->next)
    if (o->awaits_plan && o->state == J_FETCH && !strcmp(o->plan_hash, hash)) {
      o->awaits_plan = 0;
      plan_arrived(o, rp);
    }
}

/* A job delivered to this worker: marked running, then its plan, then run. */
void ob_wjob_take(wjob *j) {
  ob_worker *w = j->w;
  char *jk = ob_queue_key(w->queue, "job", j->id);
  char now[32];
  snprintf(now, sizeof now, "%" PRIu64, ob_queue_now_ms());
  if (!j->deliveries)
    j->deliveries = 1; /* a first delivery (XREADGROUP >) */
  char dl[32];
  snprintf(dl, sizeof dl, "%lld", j->deliveries);
  const char *argv[12] = {"HSET", jk, "state", "running", "worker", w->me, "started", now,
                          "deliveries", dl};
  int argc = 10;
  if (j->claimed) {
    argv[argc++] = "claimed";
    argv[argc++] = "1";
  }
  ob_redis_send(w->cmd, ob_worker_ignore_reply, NULL, argc, argv, NULL);
  free(jk);
  if (j->deliveries > (long long)w->o.max_deliveries) {
    char why[256];
    snprintf(why, sizeof why,
             "poison: delivered %lld times, and each time its worker ended before it finished",
             j->deliveries - 1);
    ob_worker_say(w, "job %s: %s; failed", j->id, why);
    w->stats.poisoned++;
    char *stats = ob_queue_key(w->queue, "stats", NULL);
    ob_redis_send(w->cmd, ob_worker_ignore_reply, NULL, 4,
                  (const char *[]){"HINCRBY", stats, "poisoned", "1"}, NULL);
    free(stats);
    job_result(j, 1, NULL, why);
    return;
  }
  j->state = J_FETCH;
  if ((j->plan_value = ob_ref(cache_get(w, j->plan_hash ? j->plan_hash : "")))) {
    job_begin(j);
    return;
  }
  if (!j->plan_hash) {
    job_invalid(j, NULL, "the job names no plan");
    return;
  }
  for (wjob *o = w->jobs; o; o = o->next)
    if (o->fetching && !strcmp(o->plan_hash, j->plan_hash)) { /* one GET a plan */
      j->awaits_plan = 1;
      return;
    }
  char *pk = ob_queue_key(w->queue, "plan", j->plan_hash);
  if (ob_redis_send(w->cmd, on_plan, j, 2, (const char *[]){"GET", pk}, NULL) != OB_OK) {
    j->handed_back = 1;
    ob_wjob_done(j);
  } else {
    j->fetching = 1;
  }
  free(pk);
}

