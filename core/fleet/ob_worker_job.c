/* ob_worker_job.c -- a job's life in a worker (ob_worker_job.h; the data it
 * reads and writes is laid out in ob_queue.h). The worker (ob_worker.c) is its host:
 * notes and the reaper go through ob_wjob_host's callbacks, so this file does not
 * include the worker's own header.
 *
 * A job's entry is decoded and checked first (ob_queue_job.h: a bad one still
 * becomes a job, whose result says what is wrong). A job goes FETCH (its claim: an
 * EVAL that marks it running unless it finished or another entry of its id holds
 * it, in which case the entry is acked and the job dropped; and its plan's text,
 * brought by the claim, or one GET per plan however many jobs of it arrive
 * together, parsed plans kept by hash) -> RUN (a run on the worker's
 * engine, whose journal goes to /dev/null and, at every flush, to the job's copy
 * and an APPEND to ob:{Q}:journal:ID) -> RAN (the run settled: from the reaper,
 * its end record and result) -> FINISH (results stored in batches: one MULTI per
 * loop turn, per job an EVAL that stores it unless the job has a result already,
 * one XACK per stream for all, the rate once; EXEC answered) -> DONE (freed by the reaper). A job taken over
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/ob_journal.h"
#include "base/ob_hash.h"
#include "base/ob_mem.h"
#include "plan/ob_plan.h"
#include "fleet/ob_queue_job.h"
#include "fleet/ob_queue_journal.h"
#include "fleet/ob_worker_job.h"
#include "fleet/ob_worker_records.h"
#include "drive/ob_drive.h"

/* --- the host -------------------------------------------------------------------------------- */

void ob_wjob_say(ob_wjobs *w, const char *job, const char *fmt, ...) {
  ob_buf b;
  ob_buf_init(&b);
  va_list ap;
  va_start(ap, fmt);
  ob_buf_vaddf(&b, fmt, ap);
  va_end(ap);
  w->host.say(w->host.ud, job, b.data ? b.data : "");
  ob_buf_free(&b);
}

static void schedule_reap(ob_wjobs *w) { w->host.schedule_reap(w->host.ud); }

/* --- plans ---------------------------------------------------------------------------------- */

static cached_plan *cache_get(ob_wjobs *w, const char *hash) {
  for (size_t i = 0; i < PLAN_CACHE; i++)
    if (w->cache[i].value && !strcmp(w->cache[i].hash, hash))
      return &w->cache[i];
  return NULL;
}

static void cache_put(ob_wjobs *w, const char *hash, ob_value *v, ob_value *text) {
  cached_plan *c = &w->cache[w->cache_next++ % PLAN_CACHE];
  ob_unref(c->value);
  ob_unref(c->text);
  snprintf(c->hash, sizeof c->hash, "%s", hash);
  c->value = ob_ref(v);
  c->text = ob_ref(text);
}

/* j's plan from the cache (a reference to its value and text each): 1, or 0 when it is
 * not kept. */
static int plan_from_cache(wjob *j) {
  cached_plan *c = j->plan_hash ? cache_get(j->w, j->plan_hash) : NULL;
  if (!c)
    return 0;
  j->plan_value = ob_ref(c->value);
  ob_unref(j->plan_text);
  j->plan_text = ob_ref(c->text);
  return 1;
}

/* --- jobs ----------------------------------------------------------------------------------- */

wjob *ob_wjob_new(ob_wjobs *w, const char *stream, redisReply *entry) {
  /* entry: [id, [field, value, ...]] */
  if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
      entry->element[0]->type != REDIS_REPLY_STRING ||
      entry->element[1]->type != REDIS_REPLY_ARRAY)
    return NULL; /* deleted meanwhile */
  wjob *j = ob_xcalloc(1, sizeof *j);
  j->w = w;
  j->stream = ob_xstrdup(stream);
  j->entry = ob_xstrdup(entry->element[0]->str);
  ob_buf hb;
  ob_buf_init(&hb);
  ob_buf_addf(&hb, "%s %s", stream, j->entry);
  j->holder = hb.data;
  redisReply *f = entry->element[1];
  const char **fv = ob_xcalloc(f->elements + 1, sizeof *fv);
  size_t *lens = ob_xcalloc(f->elements + 1, sizeof *lens);
  for (size_t k = 0; k < f->elements; k++)
    if (f->element[k]->type == REDIS_REPLY_STRING) {
      fv[k] = f->element[k]->str;
      lens[k] = f->element[k]->len;
    }
  ob_queue_entry e;
  if (ob_queue_entry_decode(fv, lens, f->elements, &e) != OB_OK) {
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "malformed job: its stream entry %s: %s", j->entry, e.error);
    j->bad = b.data;
  }
  free(fv);
  free(lens);
  /* no valid id: the failure is stored under the entry's id */
  j->id = e.id ? e.id : ob_xstrdup(j->entry);
  j->plan_hash = e.plan[0] ? ob_xstrdup(e.plan) : NULL;
  j->batch = e.batch[0] ? ob_xstrdup(e.batch) : NULL;
  j->name = e.name;
  j->inputs = e.inputs;
  e.id = e.name = NULL;
  e.inputs = NULL;
  ob_queue_entry_free(&e);
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
  ob_drun_free(j->d); /* its run, journal, plan and the journal it resumed */
  ob_unref(j->plan_value);
  ob_unref(j->plan_text);
  ob_unref(j->inputs);
  if (j->wrote_path) /* a resumed job's journal, taken from Redis */
    unlink(j->path);
  free(j->id);
  free(j->stream);
  free(j->entry);
  free(j->holder);
  free(j->name);
  free(j->plan_hash);
  free(j->batch);
  free(j->jkey);
  free(j->path);
  free(j->output);
  free(j->error);
  free(j->bad);
  ob_buf_free(&j->jbuf);
  free(j);
}


static void run_finish(wjob *j);

void ob_wjob_reap_all(ob_wjobs *w) {
  for (wjob **pp = &w->jobs; *pp;) {
    wjob *j = *pp;
    if (j->state == J_RAN)
      run_finish(j);
    else if (j->state == J_RUN || j->state == J_RESUME)
      ob_wjob_ship(j);
    if (j->state == J_DONE && !j->replies) {
      *pp = j->next;
      ob_wjob_free(j);
    } else {
      pp = &j->next;
    }
  }
  ob_wjob_send_finishes(w);
}

void ob_wjob_done(wjob *j) {
  j->state = J_DONE;
  j->w->running--;
  schedule_reap(j->w);
}
/* Results are stored in batches: every job that ended since the last loop turn, in
 * one MULTI (per job an EVAL of FINISH_SCRIPT; one XACK per stream for all; the rate
 * once), sent from the reaper. Its EXEC's answer ends them all; a connection lost
 * before it leaves them to be sent again once it is back. */
#define FINISH_BATCH 256

/* A job's result stored, its end added to the done stream and counted, unless it
 * already has one (a finished job's result is never replaced: the first result stands)
 * or another entry of its id holds it (that entry's run will store it). Its journal is
 * in a record written before in the same MULTI (ob_queue_journal.h), which its hash
 * names, or, for a job that ended with few others, as text in its journal key, its record
 * to come (ob_worker_records.h); when the record or text is not there (the bucket is a key of another type, the memory
 * is full), the job is stored failed, exit 4's cause said as `obelus run` says a
 * journal it cannot write, rather than done with its journal lost. The running
 * journal's key goes. The job's hash lets go of its entry and stream and expires
 * keep-results after now (a part's whole job too, from its last part's end); the plan's
 * count of jobs to come is taken down, and at none its text expires after the plan's
 * keep. Its batch's count of jobs left (when its entry names one) is taken down too,
 * and at none the record expires with the results; a count that this made (no such
 * batch: it went, or the entry was forged) is deleted at once. The count
 * in the stats hash comes last and may fail (junk there): the result is stored all the
 * same.
 * KEYS: the job's hash, the done stream, the stats hash, the running journal, the bucket,
 * the plans' counts, the plan's text, the whole job's hash (or the job's again), the
 * batch's record (or the job's hash again).
 * ARGV: holder, state, exit, output, finished, worker, done's MAXLEN, job id, the record's
 * field in the bucket ("": no journal; "-": one not kept; "+": its text in its journal
 * key, written before in the MULTI, for a record to come: ob_worker_records.h), the
 * result's keep (s; "": forever), the plan's keep
 * (the same), the plan's hash ("": none), the batch ("": none)[, error].
 * 1: stored, 2: stored failed (its journal is lost), 0: not stored. */
static const char FINISH_SCRIPT[] =
    "local st = redis.call('HGET', KEYS[1], 'state')\n"
    "if st == 'done' or st == 'failed' or st == 'sharded' then return 0 end\n"
    "local owner = redis.call('HGET', KEYS[1], 'entry')\n"
    "if owner and owner ~= ARGV[1] then return 0 end\n"
    "local state, exit, err, r = ARGV[2], ARGV[3], ARGV[14], 1\n"
    "local held = ARGV[9] == '+'\n"
    "if ARGV[9] ~= '' and ARGV[9] ~= '-' then\n"
    "  local ok, key = nil, KEYS[5]\n"
    "  if held then ok, key = redis.pcall('EXISTS', KEYS[4]), KEYS[4]\n"
    "  else ok = redis.pcall('HEXISTS', KEYS[5], ARGV[9]) end\n"
    "  if ok ~= 1 then\n"
    "    state, exit, r = 'failed', '1', 2\n"
    "    err = 'its journal could not be written to Redis (' .. key .. '): ' ..\n"
    "          (type(ok) == 'table' and tostring(ok.err) or 'it is not there')\n"
    "  end\n"
    "end\n"
    "if not held then redis.pcall('DEL', KEYS[4]) end\n"
    "redis.call('HSET', KEYS[1], 'state', state, 'exit', exit, 'output', ARGV[4],\n"
    "           'finished', ARGV[5], 'worker', ARGV[6])\n"
    "redis.call('HDEL', KEYS[1], 'entry', 'stream')\n"
    "if r == 1 and ARGV[9] ~= '' and not held then redis.call('HSET', KEYS[1], 'journal', ARGV[9]) end\n"
    "if err then redis.call('HSET', KEYS[1], 'error', err) end\n"
    "if ARGV[10] ~= '' then\n"
    "  redis.call('EXPIRE', KEYS[1], ARGV[10])\n"
    "  if KEYS[8] ~= KEYS[1] then redis.pcall('EXPIRE', KEYS[8], ARGV[10]) end\n"
    "end\n"
    "if ARGV[12] ~= '' then\n"
    "  local n = redis.pcall('HINCRBY', KEYS[6], ARGV[12], -1)\n"
    "  if type(n) ~= 'number' or n <= 0 then\n"
    "    redis.pcall('HDEL', KEYS[6], ARGV[12])\n"
    "    if ARGV[11] ~= '' then redis.pcall('EXPIRE', KEYS[7], ARGV[11]) end\n"
    "  end\n"
    "end\n"
    "if ARGV[13] ~= '' then\n"
    "  local n = redis.pcall('HINCRBY', KEYS[9], 'left', -1)\n"
    "  if type(n) == 'number' and n <= 0 then\n"
    "    if n < 0 and redis.call('HLEN', KEYS[9]) == 1 then redis.call('DEL', KEYS[9])\n"
    "    elseif ARGV[10] ~= '' then redis.call('EXPIRE', KEYS[9], ARGV[10]) end\n"
    "  end\n"
    "end\n"
    "redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*', 'job', ARGV[8], 'exit', exit)\n"
    "redis.pcall('HINCRBY', KEYS[3], state, 1)\n"
    "return r\n";

/* A stream's entries that no one needs any more let go: those before the first one
 * pending (delivered, not acknowledged), or, with none pending, every one the group
 * has read but the last. KEYS: the stream. ARGV: the group. */
static const char TRIM_SCRIPT[] =
    "local p = redis.call('XPENDING', KEYS[1], ARGV[1])\n"
    "local min = p[2]\n"
    "if not min then\n"
    "  local last = false\n"
    "  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do\n"
    "    for i = 1, #g, 2 do\n"
    "      if g[i] == 'name' and g[i + 1] ~= ARGV[1] then break end\n"
    "      if g[i] == 'last-delivered-id' then last = g[i + 1] end\n"
    "    end\n"
    "  end\n"
    "  if not last then return 0 end\n"
    "  min = last\n"
    "end\n"
    "return redis.call('XTRIM', KEYS[1], 'MINID', min)\n";

typedef struct finish_batch {
  ob_wjobs *w;
  size_t n;
  size_t skip; /* EXEC's replies before the jobs' (their records') */
  uint64_t now; /* when they finished */
  wjob *jobs[FINISH_BATCH];
  char held[FINISH_BATCH]; /* the job's journal went as text, for a record to come */
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
    /* EXEC's replies: the jobs' EVALs first, in order */
    size_t at = fb->skip + i;
    redisReply *r = rp->type == REDIS_REPLY_ARRAY && at < rp->elements ? rp->element[at] : NULL;
    if (r && r->type == REDIS_REPLY_ERROR) {
      ob_wjob_say(fb->w, j->id, "its result could not be stored: %s", r->str);
      fb->w->stats.failed++;
    } else if (r && r->type == REDIS_REPLY_INTEGER && r->integer == 2) {
      ob_wjob_say(fb->w, j->id, "its journal's record could not be written to Redis; stored "
                        "failed (its error says why)");
      fb->w->stats.failed++;
    } else if (r && r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
      ob_wjob_say(fb->w, j->id, "it already has a result, which stands; this run's (exit %d) "
                        "is dropped and its entry %s acked", j->exit, j->entry);
      fb->w->stats.refused++;
    } else {
      if (j->exit == 0)
        fb->w->stats.done++;
      else
        fb->w->stats.failed++;
      if (fb->held[i]) /* its text stored: held for a record */
        ob_wrec_hold(fb->w, j->id, fb->now, j->jbuf.data, j->jbuf.len, j->plan_text,
                     j->plan_hash);
    }
    ob_wjob_done(j);
  }
  if (rp && rp->type == REDIS_REPLY_ERROR)
    ob_wjob_say(fb->w, NULL, "storing results failed: %s", rp->str);
  free(fb);
}

static int cmd(ob_wjobs *w, int argc, const char **argv) {
  return ob_redis_send(w->cmd, ob_redis_ignore_reply, NULL, argc, argv, NULL) == OB_OK;
}

/* A number of seconds as text, or "" for forever. */
static void secs_text(char out[32], uint64_t s) {
  if (s == OB_WORKER_KEEP_FOREVER)
    out[0] = 0;
  else
    snprintf(out, 32, "%" PRIu64, s);
}

/* The key of the whole job whose part j is ("ID" of a part "ID.K"), or NULL. */
static char *whole_key(const ob_wjobs *w, const char *id) {
  const char *dot = strchr(id, '.');
  if (!dot || dot == id || strspn(id, "0123456789") != (size_t)(dot - id) ||
      !dot[1] || strspn(dot + 1, "0123456789") != strlen(dot + 1))
    return NULL;
  char whole[64];
  snprintf(whole, sizeof whole, "%.*s", (int)(dot - id), id);
  return ob_queue_key(w->queue, "job", whole);
}

/* j's FINISH_SCRIPT, inside the MULTI, its journal in record rec ("": none): 1, or 0
 * when the connection went. */
static int send_finish(ob_wjobs *w, wjob *j, uint64_t now, const char *done, const char *stats,
                       const char *keep, const char *rec) {
  char exit[8], nowms[32], keep_results[32], keep_plan[32];
  snprintf(exit, sizeof exit, "%d", j->exit);
  snprintf(nowms, sizeof nowms, "%" PRIu64, now);
  secs_text(keep_results, w->keep_results_s);
  /* the plan's text is a dictionary of its jobs' records, and what their results were
     of: kept as long as the longer */
  uint64_t kj = w->keep_journals_s, kr = w->keep_results_s;
  secs_text(keep_plan, kj == OB_WORKER_KEEP_FOREVER || kj > kr ? kj : kr);
  char *jk = ob_queue_key(w->queue, "job", j->id);
  char *bucket = ob_queue_journal_bucket(w->queue, now, w->me);
  char *refs = ob_queue_key(w->queue, "planrefs", NULL);
  char *pk = j->plan_hash ? ob_queue_key(w->queue, "plan", j->plan_hash) : ob_xstrdup(jk);
  char *whole = whole_key(w, j->id);
  char *bk = j->batch ? ob_queue_key(w->queue, "batch", j->batch) : NULL;
  const char *argv[26] = {"EVAL", FINISH_SCRIPT, "9", jk, done, stats, j->jkey, bucket, refs, pk,
                          whole ? whole : jk, bk ? bk : jk, j->holder,
                          j->exit ? "failed" : "done", exit, j->output ? j->output : "null",
                          nowms, w->me, keep, j->id, rec, keep_results, keep_plan,
                          j->plan_hash ? j->plan_hash : "", j->batch ? j->batch : "", j->error};
  int ok = ob_redis_send(w->cmd, ob_redis_ignore_reply, NULL, j->error ? 26 : 25, argv, NULL) ==
           OB_OK;
  free(bk);
  free(jk);
  free(bucket);
  free(refs);
  free(pk);
  free(whole);
  return ok;
}

/* The records of a batch's journals (ob_queue_journal.h), sent inside its MULTI: each job's
 * record's field into names[i] ("" for none). Returns how many commands were sent (their
 * replies come first in EXEC's), or -1 when the connection went. */
static int send_records(ob_wjobs *w, wjob **jobs, size_t n, uint64_t now, char (*names)[72]) {
  size_t journals = 0; /* of these jobs; each named "-" when none is kept */
  for (size_t i = 0; i < n; i++)
    journals += jobs[i]->jbuf.len > 0;
  int hold = journals < OB_WREC_DEFER_BELOW && w->keep_journals_s;
  for (size_t i = 0; i < n; i++)
    snprintf(names[i], sizeof names[i], "%s",
             !jobs[i]->jbuf.len ? "" : !w->keep_journals_s ? "-" : hold ? "+" : "");
  if (!journals || !w->keep_journals_s)
    return 0;
  int sent = 0;
  if (hold) { /* few: each as text, a record to come */
    char expire[32] = ""; /* as the record would be kept */
    if (w->keep_journals_s != OB_WORKER_KEEP_FOREVER)
      snprintf(expire, sizeof expire, "%" PRIu64, w->keep_journals_s);
    for (size_t i = 0; i < n; i++)
      if (jobs[i]->jbuf.len) {
        const char *argv[] = {"SET", jobs[i]->jkey, jobs[i]->jbuf.data, "EX", expire};
        const size_t lens[] = {3, strlen(jobs[i]->jkey), jobs[i]->jbuf.len, 2, strlen(expire)};
        if (ob_redis_send(w->cmd, ob_redis_ignore_reply, NULL, expire[0] ? 5 : 3, argv, lens) !=
            OB_OK)
          return -1;
        sent++;
      }
    return sent;
  }
  /* the bucket is this worker's: another worker that also ran one of these jobs stores
     its record in its own */
  char *bucket = ob_queue_journal_bucket(w->queue, now, w->me);
  ob_wrec_journal *v = ob_xmalloc(journals * sizeof *v);
  const char **field = ob_xmalloc(journals * sizeof *field);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (jobs[i]->jbuf.len)
      v[k++] = (ob_wrec_journal){jobs[i]->id, jobs[i]->jbuf.data, jobs[i]->jbuf.len,
                                 jobs[i]->plan_text, jobs[i]->plan_hash};
  sent = ob_wrec_send(w, bucket, v, journals, field);
  k = 0;
  for (size_t i = 0; sent >= 0 && i < n; i++)
    if (jobs[i]->jbuf.len)
      snprintf(names[i], sizeof names[i], "%s", field[k++]);
  free(field);
  free(v);
  free(bucket);
  return sent;
}

/* Sends the results of every job that has one and has not sent it. */
void ob_wjob_send_finishes(ob_wjobs *w) {
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
    char sec[32], keep[32];
    snprintf(sec, sizeof sec, "%" PRIu64, now / 1000);
    snprintf(keep, sizeof keep, "%d", OB_QUEUE_DONE_KEEP);
    char *rate = ob_queue_key(w->queue, "rate", sec);
    int ok = cmd(w, 1, (const char *[]){"MULTI"});
    char (*names)[72] = ob_xmalloc(fb->n * sizeof *names);
    int records = ok ? send_records(w, fb->jobs, fb->n, now, names) : -1;
    ok = records >= 0;
    fb->skip = ok ? (size_t)records : 0;
    fb->now = now;
    for (size_t i = 0; i < fb->n; i++)
      fb->held[i] = ok && !strcmp(names[i], "+");
    for (size_t i = 0; ok && i < fb->n; i++)
      ok = send_finish(w, fb->jobs[i], now, done, stats, keep, names[i]);
    free(names);
    for (int s = 0; ok && s < w->nstreams; s++) { /* one XACK per stream */
      const char **argv = ob_xmalloc((fb->n + 3) * sizeof *argv);
      int argc = 0;
      argv[argc++] = "XACK";
      argv[argc++] = w->streams[s];
      argv[argc++] = OB_QUEUE_GROUP;
      for (size_t i = 0; i < fb->n; i++)
        if (!strcmp(fb->jobs[i]->stream, w->streams[s]))
          argv[argc++] = fb->jobs[i]->entry;
      if (argc > 3) /* then what is acked, and before, let go */
        ok = cmd(w, argc, argv) &&
             cmd(w, 5, (const char *[]){"EVAL", TRIM_SCRIPT, "1", w->streams[s], OB_QUEUE_GROUP});
      free(argv);
    }
    char nall[32];
    snprintf(nall, sizeof nall, "%zu", fb->n);
    ok = ok && cmd(w, 3, (const char *[]){"INCRBY", rate, nall}) &&
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

/* A flush of the job's journal: kept in its copy, shipped to Redis by the reaper
 * (ob_wjob_ship) later in this turn of the loop, or with its result if the job ends
 * first. */
static void ship(void *ud, const char *bytes, size_t len) {
  wjob *j = ud;
  ob_buf_add(&j->jbuf, bytes, len);
  schedule_reap(j->w);
}

/* What the journal gained since it was last shipped: the first time SET (what the key
 * held before is no journal of this run: junk, a key of another type), then
 * APPENDed. A refused one leaves the key short of the journal; the job's result
 * carries the whole journal all the same. */
void ob_wjob_ship(wjob *j) {
  if (j->jbuf.len <= j->shipped || !ob_redis_is_up(j->w->cmd))
    return;
  const char *verb = j->shipped ? "APPEND" : "SET";
  if (ob_redis_send(j->w->cmd, on_tee_reply, NULL, 3,
                    (const char *[]){verb, j->jkey, j->jbuf.data + j->shipped},
                    (const size_t[]){strlen(verb), strlen(j->jkey), j->jbuf.len - j->shipped}) ==
      OB_OK)
    j->shipped = j->jbuf.len;
}

/* The journal SET whole in Redis, from the job's copy of it. */
void ob_wjob_resync(wjob *j) {
  if (j->d && ob_drun_journal(j->d))
    ob_wal_flush(ob_drun_journal(j->d)); /* what is buffered, to the copy too */
  j->shipped = 0;
  if (!j->jbuf.len) /* nothing yet: the key's old bytes (a run before a takeover) go */
    ob_redis_send(j->w->cmd, on_tee_reply, NULL, 2, (const char *[]){"DEL", j->jkey}, NULL);
  ob_wjob_ship(j);
}

/* The run has settled: its journal ended and closed, its result stored. From the
 * reaper, outside the scheduler. */
static void run_finish(wjob *j) {
  ob_drun_end_journal(j->d); /* written already unless the drain was cut short */
  int status = ob_drun_exit_status(j->d);
  ob_error err;
  if (ob_drun_close_journal(j->d, &err) != OB_OK)
    ob_wjob_say(j->w, j->id, "%s", err.msg);
  ob_value *out = ob_drun_output(j->d);
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

/* A job's notes and failures, said through the engine's note hook (the worker's
 * operator: `obelus worker` prints them, as `obelus run` does). */
static void on_run_event(void *ud, const ob_event *ev) {
  wjob *j = ud;
  ob_event_to_note(j->w->e, ev);
}

static ob_run_options job_run_options(wjob *j) {
  ob_run_options ro = *j->w->run;
  ro.plans_root = j->w->plans_root;
  ro.on_done = on_run_done;
  ro.on_event = on_run_event;
  ro.ud = j;
  return ro;
}

/* j's run made (its plan and journal ready) and started: 0, or -1 with its result
 * stored. */
static int job_start(wjob *j, jstate back) {
  ob_run_options ro = job_run_options(j);
  ob_error err;
  j->state = J_RUN;
  if (ob_drun_make(j->d, &ro, &err) != OB_OK) {
    j->state = back;
    job_invalid(j, NULL, err.msg);
    return -1;
  }
  ob_drun_start(j->d, NULL, NULL, NULL, 0, &err); /* on one engine: ob_run_start */
  return 0;
}

static void job_run(wjob *j) {
  ob_wjobs *w = j->w;
  ob_drive_source src = {.name = j->name, .plan = j->plan_value, .inputs = ob_ref(j->inputs),
                         .plans_root = w->root, .input_label = "--input", .numbered = 1};
  j->plan_value = NULL; /* the driver's */
  ob_error err;
  ob_drun_free(j->d); /* a journal that could not be resumed: run from the start */
  if (!(j->d = ob_drun_prepare(w->e, &src, &err))) {
    job_invalid(j, NULL, err.msg);
    return;
  }
  ob_plan *p = ob_drun_plan(j->d);
  ob_run_options ro = job_run_options(j); /* the calls counted with the worker's others */
  if (!p->nerrors && ob_run_count_calls(p, &ro, &err) != OB_OK)
    ob_plan_error(p, NULL, "%s", err.msg);
  if (p->nerrors) {
    job_invalid(j, p, NULL);
    return;
  }
  /* a fresh job's journal lives in Redis and in j->jbuf: no file (the wal writes to
   * /dev/null, and ships each flush) */
  if (ob_drun_open_journal(j->d, "/dev/null", 0, OB_FSYNC_NEVER, &err) != OB_OK) {
    job_invalid(j, NULL, err.msg);
    return;
  }
  ob_wal_set_tee(ob_drun_journal(j->d), ship, j);
  if (j->claimed) /* run again from scratch (taken over without a journal): a new one */
    ob_redis_send(w->cmd, on_tee_reply, NULL, 2, (const char *[]){"DEL", j->jkey}, NULL);
  job_start(j, J_FETCH);
}

/* A claimed job: its journal from Redis, resumed. */
static void job_resume(wjob *j, const char *text, size_t len) {
  ob_wjobs *w = j->w;
  ob_error err;
  FILE *f = fopen(j->path, "w");
  j->wrote_path = 1;
  if (!f || fwrite(text, 1, len, f) != len) {
    if (f)
      fclose(f);
    job_invalid(j, NULL, "cannot write the journal taken from Redis to the worker's folder");
    return;
  }
  fclose(f);
  ob_resume *rs = ob_resume_load(j->path, &err);
  if (!rs) {
    ob_wjob_say(w, j->id, "its journal cannot be resumed (%s); running it from the start", err.msg);
    job_run(j);
    return;
  }
  ob_buf why;
  ob_buf_init(&why);
  size_t changes;
  j->d = ob_drun_from_resume(w->e, rs, j->name, w->plans_root, &why, &changes);
  ob_buf_free(&why);
  ob_plan *p = ob_drun_plan(j->d);
  if (p->nerrors) {
    job_invalid(j, p, NULL);
    return;
  }
  /* what `obelus resume` checks before it touches the journal: a journal that
   * does not go with its plan (a hand-made or corrupted copy in Redis) fails
   * the job, its error naming the line, rather than re-running what it says
   * was done; then opened to append, cut back */
  int rc = ob_drun_open_journal(j->d, NULL, 0, OB_FSYNC_NEVER, &err);
  if (rc == OB_EINVAL) {
    char msg[sizeof err.msg + 40];
    size_t n = strlen(j->path); /* the worker's copy's name says nothing: the line does */
    const char *at = !strncmp(err.msg, j->path, n) && err.msg[n] == ':' ? err.msg + n + 1 : NULL;
    if (at)
      snprintf(msg, sizeof msg, "its journal cannot be resumed: line %s", at);
    else
      snprintf(msg, sizeof msg, "its journal cannot be resumed: %s", err.msg);
    job_invalid(j, NULL, msg);
    return;
  }
  if (rc != OB_OK) {
    job_invalid(j, NULL, err.msg);
    return;
  }
  ob_wal *wal = ob_drun_journal(j->d);
  if (wal) { /* Redis's copy as resume cut it, then the appends */
    ob_buf cut;
    ob_buf_init(&cut);
    if (ob_read_file(j->path, &cut, &err) == OB_OK)
      ob_buf_add(&j->jbuf, cut.data ? cut.data : "", ob_journal_len(cut.data ? cut.data : "", cut.len));
    ob_buf_free(&cut);
    ob_wjob_resync(j);
    ob_wal_set_tee(wal, ship, j);
  }
  job_start(j, J_RESUME);
}

/* A reply to a command sent for j: 0 when j was handed back meanwhile (the reply is
 * ignored; the reaper may free it now). */
static int reply_for(wjob *j) {
  j->replies--;
  if (j->state != J_DONE)
    return 1;
  schedule_reap(j->w);
  return 0;
}

static void on_journal(void *ud, redisReply *rp, const char *why) {
  wjob *j = ud;
  (void)why;
  if (!reply_for(j))
    return;
  if (!rp) { /* the connection went: left pending, taken over again later */
    j->handed_back = 1;
    ob_wjob_done(j);
    return;
  }
  const char *text = ob_redis_str(rp);
  if (rp->type == REDIS_REPLY_STRING && rp->len > 0)
    job_resume(j, text, rp->len);
  else
    job_run(j);
}

static void job_begin(wjob *j) {
  ob_wjobs *w = j->w;
  if (w->stopping) { /* taken as the worker stopped: left pending for another */
    j->handed_back = 1;
    ob_wjob_done(j);
    return;
  }
  if (j->claimed) {
    j->state = J_RESUME;
    if (ob_redis_send(w->cmd, on_journal, j, 2, (const char *[]){"GET", j->jkey}, NULL) != OB_OK)
      ob_wjob_done(j); /* down: it stays pending, claimed again later */
    else
      j->replies++;
    return;
  }
  job_run(j);
}

/* A plan's text parsed and kept by hash with its text (unless kept already): 0, or -1
 * with err when the text is gone or no JSON. */
static int plan_of(ob_wjobs *w, const char *hash, redisReply *rp, ob_error *err) {
  if (cache_get(w, hash))
    return 0;
  if (rp && rp->type == REDIS_REPLY_ERROR) { /* a key of another type: WRONGTYPE */
    char *pk = ob_queue_key(w->queue, "plan", hash);
    ob_error_set(err, OB_ETYPE, 0, "the job's plan key %s holds no text: %s", pk, rp->str);
    free(pk);
    ob_queue_text_clean(err->msg);
    return -1;
  }
  if (!rp || rp->type != REDIS_REPLY_STRING) {
    ob_error_set(err, OB_ENOENT, 0, "the job's plan is gone from Redis");
    return -1;
  }
  if (rp->len > OB_QUEUE_PLAN_MAX) {
    ob_error_set(err, OB_EINVAL, 0, "the job's plan is %zu bytes; at most %zu MB", (size_t)rp->len,
                 OB_QUEUE_PLAN_MAX >> 20);
    return -1;
  }
  ob_error perr;
  ob_value *v = ob_json_parse(rp->str, rp->len, &perr);
  if (!v) {
    ob_queue_text_clean(perr.msg);
    ob_error_set(err, OB_EJSON, 0, "the job's plan (its text in Redis) is not JSON: %s", perr.msg);
    return -1;
  }
  ob_value *text = ob_string(rp->str, rp->len);
  cache_put(w, hash, v, text);
  ob_unref(text);
  ob_unref(v);
  return 0;
}

/* The plan's text for j and every job that waits for the same plan. */
static void plan_arrived(wjob *j, redisReply *rp) {
  if (!rp) {
    j->handed_back = 1; /* the connection went: the job stays pending, for later */
    ob_wjob_done(j);
    return;
  }
  ob_error err = {0};
  if (plan_of(j->w, j->plan_hash, rp, &err) != 0 || !plan_from_cache(j)) {
    job_invalid(j, NULL, err.msg);
    return;
  }
  job_begin(j);
}

static void on_plan(void *ud, redisReply *rp, const char *why) {
  wjob *j = ud;
  ob_wjobs *w = j->w;
  (void)why;
  j->fetching = 0;
  char hash[17];
  snprintf(hash, sizeof hash, "%s", j->plan_hash);
  if (reply_for(j))
    plan_arrived(j, rp);
  for (wjob *o = w->jobs; o; o = o->next) /* whatever became of j */
    if (o->awaits_plan && o->state == J_FETCH && o->plan_hash && !strcmp(o->plan_hash, hash)) {
      o->awaits_plan = 0;
      plan_arrived(o, rp);
    }
}

/* The plan's text from Redis: one GET a plan however many jobs of it wait. */
static void fetch_plan(wjob *j) {
  ob_wjobs *w = j->w;
  for (wjob *o = w->jobs; o; o = o->next)
    if (o->fetching && o->plan_hash && !strcmp(o->plan_hash, j->plan_hash)) {
      j->awaits_plan = 1;
      return;
    }
  char *pk = ob_queue_key(w->queue, "plan", j->plan_hash);
  if (ob_redis_send(w->cmd, on_plan, j, 2, (const char *[]){"GET", pk}, NULL) != OB_OK) {
    j->handed_back = 1;
    ob_wjob_done(j);
  } else {
    j->fetching = 1;
    j->replies++;
  }
  free(pk);
}

/* Marks a job running in Redis, atomically, unless it must not run: it finished (its
 * result stands), it is a sharded job's whole, or another entry of the same id holds
 * it (running, or pending on a worker that died: that entry is taken over). Then
 * this entry is acknowledged and the job dropped. An entry that holds the job (a
 * takeover, a redelivery) gets it again, and so does a new entry when the holder is
 * gone from its stream or pending nowhere: "orphan", resumed from its journal. The plan's text comes back too when asked,
 * so that a job costs the round trips it did when this was an HSET and a GET.
 * KEYS: the job's hash, the entry's stream, the plan (or the job's hash again).
 * ARGV: worker, started, deliveries, claimed (0/1), entry, group, plan wanted (0/1),
 * holder ("STREAM ENTRY", stored as the hash's "entry").
 * Reply: {"ok"|"done"|"failed"|"sharded"|"busy", plan text, nil, or the error of a
 * plan key of another type[, the holder, or
 * "orphan"]}. */
static const char CLAIM_SCRIPT[] =
    "local st = redis.call('HGET', KEYS[1], 'state')\n"
    "local plan = false\n"
    "if ARGV[7] == '1' then\n"
    "  plan = redis.pcall('GET', KEYS[3])\n"
    "  if type(plan) == 'table' and plan.err then plan = {err = tostring(plan.err)}\n"
    "  elseif type(plan) ~= 'string' then plan = false end\n"
    "end\n"
    "if st == 'done' or st == 'failed' or st == 'sharded' then\n"
    "  redis.call('XACK', KEYS[2], ARGV[6], ARGV[5])\n"
    "  return {st, plan}\n"
    "end\n"
    "local orphan = false\n"
    "if st == 'running' then\n"
    "  local owner = redis.call('HGET', KEYS[1], 'entry')\n"
    "  if owner and owner ~= ARGV[8] then\n"
    "    local sp = string.find(owner, ' ', 1, true)\n"
    "    local held = true\n"
    "    if sp then\n"
    "      local e = string.sub(owner, sp + 1)\n"
    "      local s = string.sub(owner, 1, sp - 1)\n"
    "      local r = redis.pcall('XRANGE', s, e, e)\n"
    "      local p = redis.pcall('XPENDING', s, ARGV[6], e, e, 1)\n"
    "      local gone = type(r) == 'table' and r.err == nil and #r == 0\n"
    "      local idle = type(p) == 'table' and p.err == nil and #p == 0\n"
    "      held = not gone and not idle\n"
    "    end\n"
    "    if held then\n"
    "      redis.call('XACK', KEYS[2], ARGV[6], ARGV[5])\n"
    "      return {'busy', plan, owner}\n"
    "    end\n"
    "    orphan = 'orphan'\n"
    "  end\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'state', 'running', 'worker', ARGV[1], 'started', ARGV[2],\n"
    "           'entry', ARGV[8])\n"
    "if ARGV[3] ~= '1' then redis.call('HSET', KEYS[1], 'deliveries', ARGV[3]) end\n"
    "if ARGV[4] == '1' or orphan then redis.call('HSET', KEYS[1], 'claimed', '1') end\n"
    "return {'ok', plan, orphan}\n";

static void on_claim(void *ud, redisReply *rp, const char *why) {
  wjob *j = ud;
  ob_wjobs *w = j->w;
  int asked = j->asks_plan;
  j->asks_plan = 0;
  if (!reply_for(j))
    return; /* handed back meanwhile (the worker stopped): its entry is claimable */
  if (!rp) { /* the connection went: whether it was marked or not, the entry stays pending */
    j->handed_back = 1;
    ob_wjob_done(j);
    return;
  }
  if (rp->type != REDIS_REPLY_ARRAY || rp->elements < 2 ||
      rp->element[0]->type != REDIS_REPLY_STRING) {
    char msg[600];
    snprintf(msg, sizeof msg, "the job could not be marked running: %s",
             rp->type == REDIS_REPLY_ERROR ? rp->str : "an unexpected reply");
    ob_wjob_say(w, j->id, "%s; failed", msg);
    job_result(j, 2, NULL, msg); /* its entry is acknowledged with the result */
    return;
  }
  const char *st = rp->element[0]->str;
  redisReply *text = rp->element[1];
  ob_error err;
  if (asked) /* kept for the jobs of the same plan, whatever becomes of this one */
    plan_of(w, j->plan_hash, text, &err);
  if (strcmp(st, "ok")) { /* acknowledged by the script */
    if (!strcmp(st, "busy"))
      ob_wjob_say(w, j->id, "entry %s runs it already; entry %s of it is acked and ignored",
          rp->elements > 2 && rp->element[2]->str ? rp->element[2]->str : "?", j->entry);
    else if (!strcmp(st, "sharded"))
      ob_wjob_say(w, j->id, "a sharded job (its parts run, not it); entry %s of it is acked "
                    "and ignored", j->entry);
    else
      ob_wjob_say(w, j->id, "already finished (%s), its result stands; entry %s of it is "
                    "acked and ignored", st, j->entry);
    w->stats.refused++;
    ob_wjob_done(j);
    return;
  }
  if (rp->elements > 2 && rp->element[2]->type == REDIS_REPLY_STRING &&
      !strcmp(rp->element[2]->str, "orphan") && !j->claimed) {
    ob_wjob_say(w, j->id, "the entry that held it is gone; entry %s takes it over", j->entry);
    j->claimed = 1; /* resumed from its journal, as a takeover is */
  }
  if (j->deliveries > (long long)w->max_deliveries) {
    char why2[256];
    snprintf(why2, sizeof why2,
             "poison: delivered %lld times, and each time its worker ended before it finished",
             j->deliveries - 1);
    ob_wjob_say(w, j->id, "%s; failed", why2);
    w->stats.poisoned++;
    char *stats = ob_queue_key(w->queue, "stats", NULL);
    ob_redis_send(w->cmd, ob_redis_ignore_reply, NULL, 4,
                  (const char *[]){"HINCRBY", stats, "poisoned", "1"}, NULL);
    free(stats);
    job_result(j, 1, NULL, why2);
    return;
  }
  if (j->bad) {
    ob_wjob_say(w, j->id, "%s; failed", j->bad);
    job_result(j, 2, NULL, j->bad);
    return;
  }
  if (plan_from_cache(j)) {
    job_begin(j);
    return;
  }
  if (asked) /* its text was gone, or no JSON */
    plan_arrived(j, text);
  else
    fetch_plan(j);
  (void)why;
}

/* A job delivered to this worker: claimed (marked running), then its plan, then run. */
void ob_wjob_take(wjob *j) {
  ob_wjobs *w = j->w;
  if (!j->deliveries)
    j->deliveries = 1; /* a first delivery (XREADGROUP >) */
  j->state = J_FETCH;
  /* the claim brings the plan unless it is kept, or another job's claim or GET brings it */
  if (!j->bad && j->plan_hash && !cache_get(w, j->plan_hash)) {
    int other = 0;
    for (wjob *o = w->jobs; o && !other; o = o->next)
      other = o != j && (o->fetching || o->asks_plan) && o->plan_hash &&
              !strcmp(o->plan_hash, j->plan_hash);
    j->asks_plan = !other;
  }
  char *jk = ob_queue_key(w->queue, "job", j->id);
  char *pk = j->asks_plan ? ob_queue_key(w->queue, "plan", j->plan_hash) : ob_xstrdup(jk);
  char now[32], dl[32];
  snprintf(now, sizeof now, "%" PRIu64, ob_queue_now_ms());
  snprintf(dl, sizeof dl, "%lld", j->deliveries);
  const char *argv[] = {"EVAL", CLAIM_SCRIPT, "3", jk, j->stream, pk, w->me, now, dl,
                        j->claimed ? "1" : "0", j->entry, OB_QUEUE_GROUP,
                        j->asks_plan ? "1" : "0", j->holder};
  if (ob_redis_send(w->cmd, on_claim, j, 14, argv, NULL) != OB_OK) {
    j->asks_plan = 0;
    j->handed_back = 1; /* down: it stays pending, claimed again later */
    ob_wjob_done(j);
  } else {
    j->replies++;
  }
  free(jk);
  free(pk);
}
