/* ob_worker.c -- a worker of a job queue: Redis on the engine's loop, runs on the
 * engine (the data it reads and writes is laid out in ob_queue.h).
 *
 * Design
 * ------
 * Two connections: `rd` blocks on XREADGROUP (COUNT: the free slots; BLOCK:
 * READ_BLOCK_MS, so that a silent network is noticed), `cmd` carries everything
 * else in order: a job's HSET running, its journal's APPENDs, its final MULTI.
 * Because one connection keeps order, a job's journal in Redis is always
 * complete up to its result.
 *
 * A job goes FETCH (its plan's text, once per plan: parsed plans are kept by
 * hash) -> RUN (a run on the engine, journaled to a local file whose every flush
 * is APPENDed to ob:{Q}:journal:ID) -> FINISH (MULTI: result, done entry, XACK,
 * counters; EXEC answered) -> freed. A job taken over from a dead worker goes
 * through RESUME first: its journal is read from Redis into the local file and
 * the run is made by ob_resume (completed calls are not run again), after the
 * Redis copy is replaced by the local one as ob_resume cut it.
 *
 * When `cmd` is lost, the journal bytes of that moment may or may not have
 * reached Redis; after the reconnection every running job's journal is SET again
 * whole from its local file (the truth while the worker lives), and every job
 * whose MULTI was not answered sends it again. When `rd` is lost, the read is
 * made again after reconnecting. Jobs keep running meanwhile.
 *
 * The tick (every TICK: claim_idle / 4, 20 ms to 5 s) claims the running jobs
 * again to this worker (their idle time starts over: a live worker's job is
 * never taken), refreshes the worker's entry in ob:{Q}:workers, looks for jobs
 * pending longer than claim_idle with other consumers (XPENDING IDLE), claims
 * them (XCLAIM: one claimant wins), and, with --drain, checks whether anything
 * is left.
 *
 * Runs are freed from the tick's reaper (a zero timer), never from inside their
 * on_done, which the scheduler calls with the run on its stack. */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ob_journal.h"
#include "ob_mem.h"
#include "ob_plan.h"
#include "ob_queue.h"
#include "ob_resume.h"
#include "ob_wal.h"
#include "ob_worker.h"

#define READ_BLOCK_MS 2000
#define DRAIN_BLOCK_MS 50
#define PLAN_CACHE 64

typedef enum { J_FETCH, J_RESUME, J_RUN, J_RAN, J_FINISH, J_DONE } jstate;

typedef struct wjob {
  ob_worker *w;
  struct wjob *next;
  char *id, *stream, *entry, *name, *plan_hash, *jkey, *path;
  ob_value *inputs;
  jstate state;
  int claimed, handed_back;
  int fetching, awaits_plan; /* its GET of the plan is out; another job's GET will do */
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
  uv_timer_t tick, reaper, grace;
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

static void read_more(ob_worker *w);
static void maybe_end(ob_worker *w);

static void say(ob_worker *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The live line (o.progress: a terminal): what runs and what has ended, redrawn at
 * most every PROGRESS_MS and after each note, erased before each note and at the end. */
#define PROGRESS_MS 100

static void erase(ob_worker *w) {
  if (w->drawn)
    fputs("\r\033[K", w->o.say);
  w->drawn = 0;
}

static void draw(ob_worker *w, int force) {
  if (!w->o.progress || !w->o.say || w->ended)
    return;
  uint64_t now = uv_now(w->loop);
  if (!force && w->drawn && now - w->drawn_at < PROGRESS_MS)
    return;
  fprintf(w->o.say,
          "\r\033[K%s: %zu running · %" PRIu64 " done · %" PRIu64 " failed · %" PRIu64
          " taken over%s",
          w->me, w->running, w->stats.done, w->stats.failed, w->stats.claimed,
          ob_redis_is_up(w->cmd) ? "" : " · reconnecting");
  fflush(w->o.say);
  w->drawn = 1;
  w->drawn_at = now;
}

static void say(ob_worker *w, const char *fmt, ...) {
  if (!w->o.say)
    return;
  erase(w);
  va_list ap;
  va_start(ap, fmt);
  fprintf(w->o.say, "obelus worker %s: ", w->me);
  vfprintf(w->o.say, fmt, ap);
  fputc('\n', w->o.say);
  fflush(w->o.say);
  va_end(ap);
  draw(w, 1);
}

static void ignore_reply(void *ud, redisReply *rp, const char *why) {
  (void)ud;
  (void)rp;
  (void)why;
}

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

static wjob *job_new(ob_worker *w, const char *stream, redisReply *entry) {
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

static void job_free(wjob *j) {
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
static void send_finishes(ob_worker *w);

static void reap(uv_timer_t *t) {
  ob_worker *w = t->data;
  w->reaping = 0;
  for (wjob **pp = &w->jobs; *pp;) {
    wjob *j = *pp;
    if (j->state == J_RAN)
      run_finish(j);
    if (j->state == J_DONE) {
      *pp = j->next;
      job_free(j);
    } else {
      pp = &j->next;
    }
  }
  send_finishes(w);
  maybe_end(w);
  read_more(w);
}

static void schedule_reap(ob_worker *w) {
  if (!w->reaping && w->timers_open) {
    w->reaping = 1;
    uv_timer_start(&w->reaper, reap, 0, 0);
  }
}

static void job_done(wjob *j) {
  j->state = J_DONE;
  j->w->running--;
  schedule_reap(j->w);
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
    job_done(j);
  }
  draw(fb->w, 0);
  if (rp && rp->type == REDIS_REPLY_ERROR)
    say(fb->w, "storing results failed: %s", rp->str);
  free(fb);
}

static int cmd(ob_worker *w, int argc, const char **argv) {
  return ob_redis_send(w->cmd, ignore_reply, NULL, argc, argv, NULL) == OB_OK;
}

/* Sends the results of every job that has one and has not sent it. */
static void send_finishes(ob_worker *w) {
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
  schedule_reap(j->w); /* sent with the others that end in this turn of the loop */
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
static void resync_journal(wjob *j) {
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
      say(w, "job %s: %s", j->id, err.msg);
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
  schedule_reap(j->w);
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
  ob_plan *p = j->plan = ob_plan_from_value(j->plan_value, j->name);
  ob_error err;
  p->root = ob_xstrdup(w->root);
  ob_plan_check_tools(p, &w->e->tools, ob_engine_has_latent(w->e));
  ob_run_check_messages(p, j->inputs, "--input", 1);
  ob_run_options ro = job_run_options(j);
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
    say(w, "job %s: its journal cannot be resumed (%s); running it from the start", j->id,
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
    resync_journal(j);
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
    job_done(j);
    return;
  }
  if (j->claimed) {
    j->state = J_RESUME;
    if (ob_redis_send(w->cmd, on_journal, j, 2, (const char *[]){"GET", j->jkey}, NULL) != OB_OK)
      job_done(j); /* down: it stays pending, claimed again later */
    return;
  }
  job_run(j);
}

/* The plan's text for j and every job that waits for the same plan. */
static void plan_arrived(wjob *j, redisReply *rp) {
  if (!rp) {
    j->handed_back = 1; /* the connection went: the job stays pending, for later */
    job_done(j);
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
static void job_take(wjob *j) {
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
  ob_redis_send(w->cmd, ignore_reply, NULL, argc, argv, NULL);
  free(jk);
  if (j->deliveries > (long long)w->o.max_deliveries) {
    char why[256];
    snprintf(why, sizeof why,
             "poison: delivered %lld times, and each time its worker ended before it finished",
             j->deliveries - 1);
    say(w, "job %s: %s; failed", j->id, why);
    w->stats.poisoned++;
    char *stats = ob_queue_key(w->queue, "stats", NULL);
    ob_redis_send(w->cmd, ignore_reply, NULL, 4,
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
    job_done(j);
  } else {
    j->fetching = 1;
  }
  free(pk);
}

/* --- reading and claiming ------------------------------------------------------------------- */

static size_t free_slots(const ob_worker *w) {
  size_t busy = w->running + w->claiming;
  return busy >= w->o.jobs ? 0 : w->o.jobs - busy;
}

static void drain_check(ob_worker *w);

static void on_read(void *ud, redisReply *rp, const char *why) {
  ob_worker *w = ud;
  (void)why;
  w->reading = 0;
  if (!rp || w->ended)
    return; /* lost: read again once up (on_up) */
  if (rp->type == REDIS_REPLY_ERROR) {
    say(w, "reading jobs: %s", rp->str);
    if (!strncmp(rp->str, "NOGROUP", 7))
      w->groups_ready = 0;
  } else if (rp->type == REDIS_REPLY_ARRAY) {
    for (size_t s = 0; s < rp->elements; s++) {
      redisReply *st = rp->element[s];
      if (st->elements != 2)
        continue;
      for (size_t e = 0; e < st->element[1]->elements; e++) {
        wjob *j = job_new(w, st->element[0]->str, st->element[1]->element[e]);
        if (j)
          job_take(j);
      }
    }
  } else if (w->o.drain && rp->type == REDIS_REPLY_NIL) {
    drain_check(w); /* nothing new: is anything pending anywhere? */
  }
  read_more(w);
}

static void create_groups(ob_worker *w);

static void read_more(ob_worker *w) {
  if (w->reading || w->stopping || w->ended || !ob_redis_is_up(w->rd))
    return;
  if (!w->groups_ready) {
    create_groups(w);
    return;
  }
  size_t n = free_slots(w);
  if (!n)
    return;
  char count[32], block[32];
  snprintf(count, sizeof count, "%zu", n);
  snprintf(block, sizeof block, "%d", w->o.drain ? DRAIN_BLOCK_MS : READ_BLOCK_MS);
  const char *argv[16] = {"XREADGROUP", "GROUP", OB_QUEUE_GROUP, w->me, "COUNT", count,
                          "BLOCK", block, "STREAMS"};
  int argc = 9;
  for (int i = 0; i < w->nstreams; i++)
    argv[argc++] = w->streams[i];
  for (int i = 0; i < w->nstreams; i++)
    argv[argc++] = ">";
  if (ob_redis_send(w->rd, on_read, w, argc, argv, NULL) == OB_OK)
    w->reading = 1;
}

static void on_group(void *ud, redisReply *rp, const char *why) {
  ob_worker *w = ud;
  (void)why;
  if (!rp)
    return;
  if (rp->type == REDIS_REPLY_ERROR && strncmp(rp->str, "BUSYGROUP", 9))
    say(w, "cannot make the consumer group: %s", rp->str);
}

static void on_groups_made(void *ud, redisReply *rp, const char *why) {
  ob_worker *w = ud;
  on_group(ud, rp, why);
  if (!rp)
    return;
  w->groups_ready = 1;
  read_more(w);
}

static void create_groups(ob_worker *w) {
  char *set = ob_queue_key(w->queue, "streams", NULL);
  for (int i = 0; i < w->nstreams; i++) {
    const char *argv[] = {"XGROUP", "CREATE", w->streams[i], OB_QUEUE_GROUP, "0", "MKSTREAM"};
    ob_redis_send(w->cmd, i + 1 == w->nstreams ? on_groups_made : on_group, w, 6, argv, NULL);
    ob_redis_send(w->cmd, ignore_reply, NULL, 3, (const char *[]){"SADD", set, w->streams[i]},
                  NULL);
  }
  free(set);
}

typedef struct claim_req {
  ob_worker *w;
  char *stream;
  long long deliveries;
} claim_req;

static void on_claimed(void *ud, redisReply *rp, const char *why) {
  claim_req *c = ud;
  ob_worker *w = c->w;
  (void)why;
  w->claiming--;
  if (rp && rp->type == REDIS_REPLY_ARRAY && !w->ended) {
    for (size_t e = 0; e < rp->elements; e++) {
      wjob *j = job_new(w, c->stream, rp->element[e]);
      if (!j)
        continue;
      j->claimed = 1;
      j->deliveries = c->deliveries + 1;
      w->stats.claimed++;
      char *stats = ob_queue_key(w->queue, "stats", NULL);
      ob_redis_send(w->cmd, ignore_reply, NULL, 4,
                    (const char *[]){"HINCRBY", stats, "claimed", "1"}, NULL);
      free(stats);
      say(w, "job %s: taken over (its worker stopped answering; delivery %lld)", j->id,
          j->deliveries);
      job_take(j);
    }
  }
  free(c->stream);
  free(c);
  maybe_end(w);
  read_more(w);
}

static int runs_entry(const ob_worker *w, const char *entry) {
  for (const wjob *j = w->jobs; j; j = j->next)
    if (j->state != J_DONE && !strcmp(j->entry, entry))
      return 1;
  return 0;
}

typedef struct pend_req {
  ob_worker *w;
  char *stream;
} pend_req;

static void on_pending(void *ud, redisReply *rp, const char *why) {
  pend_req *pr = ud;
  ob_worker *w = pr->w;
  (void)why;
  /* [[entry, consumer, idle, deliveries], ...] */
  if (rp && rp->type == REDIS_REPLY_ARRAY && !w->stopping && !w->ended) {
    char idle[32];
    snprintf(idle, sizeof idle, "%" PRIu64, w->o.claim_idle_ms);
    for (size_t e = 0; e < rp->elements && free_slots(w); e++) {
      redisReply *p = rp->element[e];
      if (p->elements != 4 || runs_entry(w, p->element[0]->str))
        continue;
      claim_req *c = ob_xmalloc(sizeof *c);
      c->w = w;
      c->stream = ob_xstrdup(pr->stream);
      c->deliveries = p->element[3]->integer;
      const char *argv[] = {"XCLAIM", pr->stream, OB_QUEUE_GROUP, w->me, idle, p->element[0]->str};
      if (ob_redis_send(w->cmd, on_claimed, c, 6, argv, NULL) == OB_OK) {
        w->claiming++;
      } else {
        free(c->stream);
        free(c);
      }
    }
  }
  free(pr->stream);
  free(pr);
}

static void claim_dead(ob_worker *w) {
  size_t n = free_slots(w);
  if (!n || w->stopping)
    return;
  char idle[32], count[32];
  snprintf(idle, sizeof idle, "%" PRIu64, w->o.claim_idle_ms);
  snprintf(count, sizeof count, "%zu", n);
  for (int i = 0; i < w->nstreams; i++) {
    pend_req *pr = ob_xmalloc(sizeof *pr);
    pr->w = w;
    pr->stream = ob_xstrdup(w->streams[i]);
    const char *argv[] = {"XPENDING", w->streams[i], OB_QUEUE_GROUP, "IDLE", idle, "-", "+", count};
    if (ob_redis_send(w->cmd, on_pending, pr, 8, argv, NULL) != OB_OK) {
      free(pr->stream);
      free(pr);
    }
  }
}

/* Claims this worker's running jobs again: their idle time starts over. */
static void keep_claims(ob_worker *w) {
  for (int i = 0; i < w->nstreams; i++) {
    const char **argv = ob_xmalloc((w->running + 8) * sizeof *argv);
    int argc = 0;
    argv[argc++] = "XCLAIM";
    argv[argc++] = w->streams[i];
    argv[argc++] = OB_QUEUE_GROUP;
    argv[argc++] = w->me;
    argv[argc++] = "0";
    int n = 0;
    for (wjob *j = w->jobs; j; j = j->next)
      if (j->state != J_DONE && !strcmp(j->stream, w->streams[i]) && (size_t)argc < w->running + 6) {
        argv[argc++] = j->entry;
        n++;
      }
    argv[argc++] = "JUSTID";
    if (n)
      ob_redis_send(w->cmd, ignore_reply, NULL, argc, argv, NULL);
    free(argv);
  }
}

static void announce(ob_worker *w) {
  char *key = ob_queue_key(w->queue, "workers", NULL);
  ob_buf b;
  ob_buf_init(&b);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  ob_buf_addf(&b, "{\"host\":");
  ob_json_write_string(&b, host, strlen(host));
  ob_buf_addf(&b, ",\"pid\":%ld,\"tools_id\":\"%s\",\"tools\":%s,\"jobs\":%zu,\"running\":%zu,"
                  "\"seen\":%" PRIu64 ",\"every_ms\":%" PRIu64 ",\"done\":%" PRIu64
                  ",\"failed\":%" PRIu64 ",\"claimed\":%" PRIu64 "}",
              (long)getpid(), w->tools_id, w->tools_json, w->o.jobs, w->running,
              ob_queue_now_ms(), w->tick_ms, w->stats.done, w->stats.failed, w->stats.claimed);
  ob_redis_send(w->cmd, ignore_reply, NULL, 4, (const char *[]){"HSET", key, w->me, b.data}, NULL);
  ob_buf_free(&b);
  free(key);
}

/* --drain: ends when nothing runs here, nothing is left to read and nothing is
 * pending anywhere in the group. */
static void on_drain_pending(void *ud, redisReply *rp, const char *why) {
  ob_worker *w = ud;
  (void)why;
  w->drain_checks--;
  /* XPENDING summary: [count, min, max, consumers] */
  if (!rp || rp->type != REDIS_REPLY_ARRAY || rp->elements < 1)
    w->drain_pending++;
  else
    w->drain_pending += (uint64_t)ob_redis_int(rp->element[0], 1);
  if (w->drain_checks == 0 && w->drain_pending == 0 && w->running == 0 && w->claiming == 0 &&
      !w->ended) {
    w->stopping = 1;
    maybe_end(w);
  }
}

static void drain_check(ob_worker *w) {
  if (!w->o.drain || w->running || w->claiming || w->drain_checks || !ob_redis_is_up(w->cmd))
    return;
  w->drain_pending = 0;
  for (int i = 0; i < w->nstreams; i++)
    if (ob_redis_send(w->cmd, on_drain_pending, w, 3,
                      (const char *[]){"XPENDING", w->streams[i], OB_QUEUE_GROUP}, NULL) == OB_OK)
      w->drain_checks++;
}

static void on_tick(uv_timer_t *t) {
  ob_worker *w = t->data;
  if (w->ended || !ob_redis_is_up(w->cmd))
    return;
  keep_claims(w);
  announce(w);
  draw(w, 0);
  claim_dead(w);
  drain_check(w);
}

/* --- connections ---------------------------------------------------------------------------- */

static void cmd_up(void *ud) {
  ob_worker *w = ud;
  if (w->ever_up)
    say(w, "connected to %s again", ob_redis_url(w->cmd));
  w->ever_up = 1;
  if (!w->groups_ready)
    create_groups(w);
  for (wjob *j = w->jobs; j; j = j->next)
    if (j->state == J_RUN && j->wal)
      resync_journal(j);
  send_finishes(w);
  announce(w);
  read_more(w);
}

static void cmd_down(void *ud, const char *why) {
  ob_worker *w = ud;
  if (!w->ever_up) {
    snprintf(w->why, sizeof w->why, "cannot reach Redis at %s: %s", ob_redis_url(w->cmd), why);
    w->stopping = 1;
    maybe_end(w);
    return;
  }
  say(w, "lost Redis at %s (%s); reconnecting", ob_redis_url(w->cmd), why);
}

static void rd_up(void *ud) { read_more(ud); }
static void rd_down(void *ud, const char *why) {
  (void)ud;
  (void)why;
}

/* --- starting and ending -------------------------------------------------------------------- */

static void on_grace(uv_timer_t *t) {
  ob_worker *w = t->data;
  ob_worker_stop(w, 0);
}

void ob_worker_stop(ob_worker *w, uint64_t grace_ms) {
  if (w->ended)
    return;
  w->stopping = 1;
  if (grace_ms && w->running) {
    uv_timer_start(&w->grace, on_grace, grace_ms, 0);
    return;
  }
  /* hand back what runs: cancelled, journal shipped, made claimable at once */
  for (wjob *j = w->jobs; j; j = j->next) {
    if (j->state == J_DONE || j->state == J_FINISH)
      continue;
    if (j->run)
      ob_run_cancel(j->run);
    if (j->wal) {
      ob_run_detach_journal(w->e, j->wal);
      ob_wal_close(j->wal, NULL); /* its last flush is APPENDed */
      j->wal = NULL;
    }
    const char *argv[] = {"XCLAIM", j->stream, OB_QUEUE_GROUP, w->me, "0", j->entry,
                          "IDLE", "9999999999", "JUSTID"};
    ob_redis_send(w->cmd, ignore_reply, NULL, 9, argv, NULL);
    say(w, "job %s: handed back", j->id);
    j->handed_back = 1;
    job_done(j);
  }
  maybe_end(w);
}

static void on_last_reply(void *ud, redisReply *rp, const char *why) {
  ob_worker *w = ud;
  (void)rp;
  (void)why;
  if (w->o.say)
    erase(w);
  w->ended = 1;
  if (w->on_end)
    w->on_end(w->ud, w->why[0] ? w->why : NULL);
}

static void maybe_end(ob_worker *w) {
  if (w->ended || !w->stopping || w->running || w->claiming)
    return;
  if (w->reaping)
    return; /* after the reap */
  uv_timer_stop(&w->tick);
  uv_timer_stop(&w->grace);
  if (ob_redis_is_up(w->cmd)) { /* gone from the workers' list; ended once that answers */
    char *key = ob_queue_key(w->queue, "workers", NULL);
    int ok = ob_redis_send(w->cmd, on_last_reply, w, 3, (const char *[]){"HDEL", key, w->me},
                           NULL) == OB_OK;
    free(key);
    if (ok) {
      w->ended = -1; /* ending: on_last_reply sets 1 */
      return;
    }
  }
  on_last_reply(w, NULL, NULL);
}

ob_worker *ob_worker_start(ob_engine *e, const ob_worker_options *o,
                           void (*on_end)(void *ud, const char *why), void *ud, ob_error *err) {
  ob_worker *w = ob_xcalloc(1, sizeof *w);
  w->e = e;
  w->loop = e->loop;
  w->o = *o;
  w->on_end = on_end;
  w->ud = ud;
  if (!w->o.jobs)
    w->o.jobs = 1;
  if (!w->o.claim_idle_ms)
    w->o.claim_idle_ms = OB_QUEUE_CLAIM_IDLE_MS;
  if (!w->o.max_deliveries)
    w->o.max_deliveries = OB_QUEUE_MAX_DELIVERIES;
  w->queue = ob_xstrdup(o->queue ? o->queue : OB_QUEUE_DEFAULT);
  if (o->name) {
    w->me = ob_xstrdup(o->name);
  } else {
    char host[200] = "";
    gethostname(host, sizeof host - 1);
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s:%ld", host, (long)getpid());
    w->me = b.data;
  }
  w->plans_root = ob_xstrdup(o->plans_root ? o->plans_root : ".");
  if (!(w->root = ob_plans_root(w->plans_root, err)))
    goto fail;
  if (o->dir) {
    w->dir = ob_xstrdup(o->dir);
    if (mkdir(w->dir, 0700) != 0 && errno != EEXIST) {
      ob_error_set(err, OB_EIO, 0, "%s: cannot make the folder: %s", w->dir, strerror(errno));
      goto fail;
    }
  } else {
    const char *tmp = getenv("TMPDIR");
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s/obelus-worker-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(b.data)) {
      ob_error_set(err, OB_EIO, 0, "%s: cannot make a folder: %s", b.data, strerror(errno));
      ob_buf_free(&b);
      goto fail;
    }
    w->dir = b.data;
    w->own_dir = 1;
  }
  ob_value *files = ob_engine_tool_files(e);
  ob_queue_tools_id(files, w->tools_id);
  ob_value *names = ob_queue_tools_names(files);
  w->tools_json = ob_json_print(names, OB_JSON_COMPACT, NULL);
  ob_unref(names);
  ob_unref(files);
  w->streams[w->nstreams++] = ob_queue_key(w->queue, "jobs", w->tools_id);
  w->streams[w->nstreams++] = ob_queue_key(w->queue, "jobs", NULL);
  ob_redis_handlers hc = {cmd_up, cmd_down, w}, hr = {rd_up, rd_down, w};
  if (!(w->cmd = ob_redis_open(w->loop, o->redis, &hc, err)) ||
      !(w->rd = ob_redis_open(w->loop, o->redis, &hr, err)))
    goto fail;
  uv_timer_init(w->loop, &w->tick);
  uv_timer_init(w->loop, &w->reaper);
  uv_timer_init(w->loop, &w->grace);
  w->tick.data = w->reaper.data = w->grace.data = w;
  w->timers_open = 1;
  uint64_t every = w->o.claim_idle_ms / 4;
  if (every < 20)
    every = 20;
  if (every > 5000)
    every = 5000;
  w->tick_ms = every;
  uv_timer_start(&w->tick, on_tick, every, every);
  return w;
fail:
  ob_redis_close(w->cmd);
  free(w->queue);
  free(w->me);
  free(w->plans_root);
  free(w->root);
  if (w->dir && w->own_dir)
    rmdir(w->dir);
  free(w->dir);
  for (int i = 0; i < w->nstreams; i++)
    free(w->streams[i]);
  free(w->tools_json);
  free(w);
  return NULL;
}

void ob_worker_get_stats(const ob_worker *w, ob_worker_stats *out) { *out = w->stats; }

void ob_worker_free(ob_worker *w) {
  if (!w)
    return;
  while (w->jobs) {
    wjob *j = w->jobs;
    w->jobs = j->next;
    job_free(j);
  }
  ob_redis_close(w->cmd);
  ob_redis_close(w->rd);
  if (w->timers_open) {
    uv_close((uv_handle_t *)&w->tick, NULL);
    uv_close((uv_handle_t *)&w->reaper, NULL);
    uv_close((uv_handle_t *)&w->grace, NULL);
    uv_run(w->loop, UV_RUN_NOWAIT); /* the handles above live in w */
  }
  for (size_t i = 0; i < PLAN_CACHE; i++)
    ob_unref(w->cache[i].value);
  if (w->own_dir)
    rmdir(w->dir);
  free(w->dir);
  free(w->queue);
  free(w->me);
  free(w->plans_root);
  free(w->root);
  for (int i = 0; i < w->nstreams; i++)
    free(w->streams[i]);
  free(w->tools_json);
  free(w);
}
