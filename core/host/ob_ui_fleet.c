/* ob_ui_fleet.c -- a fleet's queue in Redis sampled for `obelus ui` (what it serves:
 * ob_ui_fleet.h).
 *
 * Design
 * ------
 * One ob_redis connection (asynchronous, on the host's loop; it reconnects by itself)
 * and a timer. Every second, unless one is still out, a sample: a few commands
 * pipelined, in two steps, each waiting for all its answers:
 *   1. GET ob:{Q}:seq, SMEMBERS ob:{Q}:streams, HGETALL ob:{Q}:workers, HGETALL
 *      ob:{Q}:stats; every FLEET_MEMORY_EVERY samples, INFO memory and what a finished
 *      job costs Redis (ob_queue_memory.h: the queue's "redis_bytes" and "job_bytes");
 *   2. per stream XINFO GROUPS, XPENDING (the summary), XLEN; an HMGET of the job hash
 *      of each listed job that has not ended (an ended job's hash does not change: its
 *      result is never replaced), and a STRLEN of up to 16 journals to read (below).
 * The window of listed jobs is the newest ids the counter gave out, down from seq, a
 * sharded job by its parts (its hash, read once, names how many). What was read of the
 * jobs is forgotten when Redis looks replaced or emptied (a new connection; fewer ids
 * given out, or fewer jobs ended, than the sample before saw): ids are given out again
 * from 1 then. The sample's answers make the value GET /api/fleet serves, built once per
 * sample and kept: a request only adds the "redis" state to it. A sample that loses its
 * connection leaves the last one as it was, and the state says why; one not answered in
 * 5 s (a Redis stopped, a network that swallows packets) drops the connection and makes
 * another.
 *
 * The runs' "calls" and "failed" come from the jobs' journals: a journal is read (GET,
 * outside the sample's steps, its answer applied when it comes) once its job has ended,
 * and while it runs at most every 5 s when its length changed (and not past 8 MB); at
 * most 16 a sample, newest first. One run's detail (ob_ui_fleet_run) is read when asked,
 * synchronously, on a blocking hiredis connection of its own, with timeouts: the HTTP
 * handler answers at once (an asynchronous read would need ob_httpd_res_stream, whose
 * headers, status included, go before the answer is known, so a missing job could not be
 * a 404), and a GET of a journal on a Redis that answers the sampler takes a millisecond
 * or so. What bounds its stall of the loop: 2 s to connect, 2 s for each answer to start;
 * none while the sampler finds Redis unreachable, nor for 5 s after this connection
 * failed (it fails at once then). A connection found closed (Redis restarted since it
 * was made) is made again once, at once. SIGPIPE is held back around it (hiredis writes
 * with write(), and a host need not ignore the signal).
 *
 * Costs: per sample, 4 + 3 per stream commands, plus an HMGET per listed job not ended
 * (none in a queue of ended jobs, up to 500 in a backlog of waiting ones) and up to 16
 * STRLENs; no KEYS, SCAN or read of a whole stream: each command is O(1) or O(what it
 * returns) (workers, streams, consumers). Measured with INFO commandstats against a
 * queue of 100,000 done jobs (2 streams, no worker; 2026-11-28): 61 us of Redis's time a
 * sample once the listed jobs' journals are read (GET 11, SMEMBERS 17, the HGETALLs 9,
 * XINFO GROUPS 21, XPENDING 3, XLEN 1), 100-140 us a sample in the first half minute
 * while they are; a backlog of 100,000 waiting jobs, 820 us a sample (its 500 HMGETs,
 * 1.5 us each). This process: 1.2-1.6 ms of CPU a sample (mostly making the value: 500 jobs,
 * 600 rate points). Memory: up to 500 jobs (an error kept to 1 KB each), 600 rate
 * points, 100 poison jobs, and the last sample's value (about 50 KB as JSON). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "fleet/ob_queue.h"
#include "fleet/ob_queue_journal.h"
#include "fleet/ob_queue_memory.h"
#include "host/ob_trace.h"
#include "host/ob_ui_fleet.h"
#include "io/ob_redis.h"

#define FLEET_EVERY_MS 1000     /* a sample every */
#define FLEET_RATES 600         /* rate points kept: 10 minutes */
#define FLEET_JOBS 500          /* jobs listed */
#define FLEET_POISON 100        /* poison jobs kept */
#define FLEET_MEMORY_EVERY 5    /* Redis's memory looked at every 5th sample */
#define FLEET_STALL_MS 5000     /* a sample not answered by then: the connection is made again */
#define FLEET_READS 16          /* journals read a sample */
#define FLEET_REREAD_MS 5000    /* a running job's journal read again at most this often */
#define FLEET_BIG ((long long)8 << 20) /* a running job's journal past this: read once ended */
#define FLEET_ERROR_MAX 1024    /* bytes of a job's error kept */
#define FLEET_STEPS 5000        /* ids looked at to fill the window */
#define FLEET_SYNC_S 2          /* the blocking connection's timeouts */
#define FLEET_SYNC_PAUSE_MS 5000 /* after it failed: no new attempt for this long */

typedef struct fjob {
  char *id;
  char state[12];      /* queued, running, done, failed, sharded; "": no hash (yet) */
  char *worker, *error;
  long long started, ended, deliveries, parts; /* -1: not there */
  int final;           /* done, failed, sharded: its hash is not read again */
  /* from its journal */
  int reading;         /* a GET of it out */
  int read_final;      /* read after the job ended: its counts are its last */
  long long jlen;      /* the length read (-1: not read) */
  uint64_t read_at;
  long long calls, failed_calls, t0, t1; /* -1: not known */
} fjob;

typedef struct rate_pt {
  uint64_t t;
  double done, failed;
} rate_pt;

typedef struct poison_job {
  char *id, *error;
  long long deliveries;
} poison_job;

typedef struct sample sample;

struct ob_ui_fleet {
  uv_loop_t *loop;
  char *url, *queue;
  ob_redis_addr addr;
  ob_redis *r;
  uv_timer_t tick;
  int closing, tick_open, free_asked;
  char state[320];      /* "ok" or "unreachable: ..." */
  sample *out;          /* the sample in flight, or NULL */
  uint64_t samples, sampled;
  /* what the samples found */
  fjob **jobs;          /* the window, newest first (sharded wholes among them, not listed) */
  size_t njobs;
  long long seq;        /* the last id given out, as of the last sample */
  unsigned connects;    /* the connection's count of connections then */
  rate_pt rates[FLEET_RATES];
  size_t rate_first, nrates;
  long long prev_done, prev_failed;
  uint64_t prev_t;
  int have_prev;
  poison_job poison[FLEET_POISON]; /* newest first */
  size_t npoison;
  ob_value *live;       /* worker name -> true when live, as of the last sample */
  long long used_bytes; /* Redis's used_memory, as of the last look (-1: not known) */
  long long job_bytes;  /* what a finished job costs it (ob_queue_memory.h; -1: none) */
  ob_value *snap;       /* GET /api/fleet's body as of the last sample (its "redis" aside) */
  /* ob_ui_fleet_run's blocking connection */
  redisContext *sync;
  uint64_t sync_failed_at;
  char sync_why[256];
};

/* --- helpers --------------------------------------------------------------------------------- */

static char *key(const ob_ui_fleet *f, const char *what, const char *id) {
  return ob_queue_key(f->queue, what, id);
}

static void set_state(ob_ui_fleet *f, const char *why) {
  if (!why)
    snprintf(f->state, sizeof f->state, "ok");
  else
    snprintf(f->state, sizeof f->state, "unreachable: %s", why);
}

/* A reply's integer (a string holding one too), or def. */
static long long rint_(const redisReply *rp, long long def) { return ob_redis_int(rp, def); }

static int is_str(const redisReply *rp) {
  return rp && (rp->type == REDIS_REPLY_STRING || rp->type == REDIS_REPLY_STATUS);
}

static ob_value *int_or_null(long long n) { return n >= 0 ? ob_int(n) : ob_null(); }

/* An id as a job's can be: 1 to 64 of [A-Za-z0-9_.-] (ob_queue_job.h's rule). */
static int job_id_ok(const char *id) {
  size_t n = strlen(id);
  if (!n || n > 64)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

static fjob *fjob_new(const char *id) {
  fjob *j = ob_xcalloc(1, sizeof *j);
  j->id = ob_xstrdup(id);
  j->started = j->ended = j->deliveries = j->parts = -1;
  j->jlen = j->calls = j->failed_calls = j->t0 = j->t1 = -1;
  return j;
}

static void fjob_free(fjob *j) {
  if (!j)
    return;
  free(j->id);
  free(j->worker);
  free(j->error);
  free(j);
}

static fjob *find_job(const ob_ui_fleet *f, const char *id) {
  for (size_t i = 0; i < f->njobs; i++)
    if (!strcmp(f->jobs[i]->id, id))
      return f->jobs[i];
  return NULL;
}

static int is_poison(const fjob *j) {
  return !strcmp(j->state, "failed") && j->error && !strncmp(j->error, "poison:", 7);
}

/* --- a sample ---------------------------------------------------------------------------------- */

typedef struct fstream {
  char *key;
  long long len;       /* XLEN (-1: no answer) */
  int groups_ok;       /* XINFO GROUPS answered without an error */
  int group;           /* the group "workers" is there */
  long long lag, read; /* its lag (-1: Redis could not tell) and entries-read (-1) */
  long long pending;   /* XPENDING's count */
} fstream;

struct sample {
  ob_ui_fleet *f;
  int step, pending, lost;
  char why[256];
  uint64_t t0;
  long long seq;
  fstream *streams;
  size_t nstreams;
  ob_value *workers;   /* name -> its entry parsed (null when it is no JSON object) */
  long long done, failed, poisoned;
  ob_value *held;      /* consumer -> jobs it holds (XPENDING) */
  int reads;           /* journals asked for in this sample */
};

typedef void (*take_fn)(sample *s, void *arg, const redisReply *rp);

typedef struct req {
  sample *s;
  take_fn take;
  void *arg;
} req;

static void sample_step(sample *s);

static void on_reply(void *ud, redisReply *rp, const char *why) {
  req *q = ud;
  sample *s = q->s;
  if (!rp && !s->lost) {
    s->lost = 1;
    snprintf(s->why, sizeof s->why, "%s", why ? why : "the connection was lost");
  } else if (rp && !s->lost) {
    q->take(s, q->arg, rp);
  }
  free(q);
  if (--s->pending == 0)
    sample_step(s);
}

static void send_cmd(sample *s, take_fn take, void *arg, int argc, const char **argv) {
  if (s->lost)
    return;
  req *q = ob_xmalloc(sizeof *q);
  *q = (req){s, take, arg};
  s->pending++;
  if (ob_redis_send(s->f->r, on_reply, q, argc, argv, NULL) != OB_OK) {
    s->pending--;
    free(q);
    s->lost = 1;
    snprintf(s->why, sizeof s->why, "%s",
             *ob_redis_why(s->f->r) ? ob_redis_why(s->f->r) : "the connection was lost");
  }
}

static void take_seq(sample *s, void *arg, const redisReply *rp) {
  (void)arg;
  s->seq = rint_(rp, 0);
}

static void take_streams(sample *s, void *arg, const redisReply *rp) {
  (void)arg;
  if (rp->type != REDIS_REPLY_ARRAY)
    return;
  s->streams = ob_xcalloc(rp->elements ? rp->elements : 1, sizeof *s->streams);
  for (size_t i = 0; i < rp->elements; i++)
    if (is_str(rp->element[i])) {
      fstream *st = &s->streams[s->nstreams++];
      st->key = ob_xstrndup(rp->element[i]->str, rp->element[i]->len);
      st->len = st->lag = st->read = -1;
    }
}

static void take_workers(sample *s, void *arg, const redisReply *rp) {
  (void)arg;
  for (size_t i = 0; rp->type == REDIS_REPLY_ARRAY && i + 1 < rp->elements; i += 2) {
    const redisReply *k = rp->element[i], *v = rp->element[i + 1];
    if (!is_str(k))
      continue;
    ob_value *info = is_str(v) ? ob_json_parse(v->str, v->len, NULL) : NULL;
    if (!info || ob_typeof(info) != OB_OBJECT) {
      ob_unref(info);
      info = ob_null();
    }
    s->workers = ob_object_set(s->workers, k->str, k->len, info);
  }
}

/* Redis's memory and a finished job's (looked at every FLEET_MEMORY_EVERY samples). */
static void take_info(sample *s, void *arg, const redisReply *rp) {
  (void)arg;
  s->f->used_bytes = ob_queue_memory_used(ob_redis_str(rp));
}

static void take_memory(sample *s, void *arg, const redisReply *rp) {
  (void)arg;
  ob_queue_memory m;
  s->f->job_bytes = ob_queue_memory_reply(rp, &m) == 0 ? ob_queue_memory_per_job(&m) : -1;
}

static void take_stats(sample *s, void *arg, const redisReply *rp) {
  (void)arg;
  for (size_t i = 0; rp->type == REDIS_REPLY_ARRAY && i + 1 < rp->elements; i += 2) {
    const char *k = ob_redis_str(rp->element[i]);
    long long n = rint_(rp->element[i + 1], 0);
    if (!k)
      continue;
    if (!strcmp(k, "done"))
      s->done = n;
    else if (!strcmp(k, "failed"))
      s->failed = n;
    else if (!strcmp(k, "poisoned"))
      s->poisoned = n;
  }
}

static void take_len(sample *s, void *arg, const redisReply *rp) {
  (void)s;
  fstream *st = arg;
  st->len = rp->type == REDIS_REPLY_INTEGER ? rp->integer : -1;
}

/* XINFO GROUPS: [[name, N, consumers, N, pending, N, last-delivered-id, ID, entries-read,
 * N|nil, lag, N|nil], ...] */
static void take_groups(sample *s, void *arg, const redisReply *rp) {
  (void)s;
  fstream *st = arg;
  if (rp->type != REDIS_REPLY_ARRAY)
    return;
  st->groups_ok = 1;
  for (size_t g = 0; g < rp->elements; g++) {
    const redisReply *gr = rp->element[g];
    int ours = 0;
    long long lag = -1, read = -1;
    for (size_t i = 0; gr->type == REDIS_REPLY_ARRAY && i + 1 < gr->elements; i += 2) {
      const char *k = ob_redis_str(gr->element[i]);
      const redisReply *v = gr->element[i + 1];
      if (!k)
        continue;
      if (!strcmp(k, "name"))
        ours = is_str(v) && !strcmp(v->str, OB_QUEUE_GROUP);
      else if (!strcmp(k, "lag"))
        lag = v->type == REDIS_REPLY_INTEGER ? v->integer : -1;
      else if (!strcmp(k, "entries-read"))
        read = v->type == REDIS_REPLY_INTEGER ? v->integer : -1;
    }
    if (ours) {
      st->group = 1;
      st->lag = lag;
      st->read = read;
    }
  }
}

/* XPENDING's summary: [count, min, max, [[consumer, count], ...]] */
static void take_pending(sample *s, void *arg, const redisReply *rp) {
  fstream *st = arg;
  if (rp->type != REDIS_REPLY_ARRAY || rp->elements != 4)
    return;
  st->pending = rint_(rp->element[0], 0);
  const redisReply *cons = rp->element[3];
  for (size_t k = 0; cons->type == REDIS_REPLY_ARRAY && k < cons->elements; k++) {
    const redisReply *pair = cons->element[k];
    if (pair->type != REDIS_REPLY_ARRAY || pair->elements != 2 || !is_str(pair->element[0]))
      continue;
    const char *who = pair->element[0]->str;
    size_t wl = pair->element[0]->len;
    const ob_value *had = ob_object_get(s->held, who, wl);
    long long n = rint_(pair->element[1], 0) + (had ? ob_int_value(had) : 0);
    s->held = ob_object_set(s->held, who, wl, ob_int(n));
  }
}

/* HMGET job state worker started finished deliveries error parts */
static void take_job(sample *s, void *arg, const redisReply *rp) {
  (void)s;
  fjob *j = arg;
  if (rp->type != REDIS_REPLY_ARRAY || rp->elements != 7)
    return;
  redisReply **e = rp->element;
  const char *st = is_str(e[0]) ? e[0]->str : "";
  static const char *const known[] = {"queued", "running", "done", "failed", "sharded"};
  int ok = 0;
  for (size_t i = 0; i < sizeof known / sizeof *known; i++)
    ok |= !strcmp(st, known[i]);
  snprintf(j->state, sizeof j->state, "%s", ok ? st : "");
  free(j->worker);
  j->worker = is_str(e[1]) ? ob_xstrndup(e[1]->str, e[1]->len) : NULL;
  j->started = rint_(e[2], -1);
  j->ended = rint_(e[3], -1);
  j->deliveries = rint_(e[4], -1);
  free(j->error);
  j->error = is_str(e[5]) ? ob_xstrndup(e[5]->str, e[5]->len > FLEET_ERROR_MAX ? FLEET_ERROR_MAX
                                                                                : e[5]->len)
                          : NULL;
  j->parts = rint_(e[6], -1);
  j->final = !strcmp(j->state, "done") || !strcmp(j->state, "failed") ||
             !strcmp(j->state, "sharded");
}

/* --- journals ---------------------------------------------------------------------------------- */

typedef struct jread {
  ob_ui_fleet *f;
  char *id;
  int final; /* asked after the job ended */
} jread;

/* A run's counts as GET /api/runs gives them (ob_ui.c's summary): its top calls (not a
 * sub-plan's nor an _each copy's), those failed, its first start and its end. */
static void summarize(fjob *j, const ob_value *run) {
  const ob_value *calls = ob_object_get(run, "calls", 5), *exit = ob_object_get(run, "exit", 4);
  const ob_value *t0 = ob_object_get(run, "t0_us", 5), *dur = ob_object_get(run, "duration_us", 11);
  long long n = 0, failed = 0;
  for (size_t i = 0; calls && ob_typeof(calls) == OB_ARRAY && i < ob_array_len(calls); i++) {
    const ob_value *c = ob_array_get(calls, i), *scope = ob_object_get(c, "scope", 5);
    const ob_value *st = ob_object_get(c, "state", 5);
    if (scope && ob_typeof(scope) == OB_STRING && ob_string_len(scope))
      continue;
    n++;
    failed += st && ob_typeof(st) == OB_STRING && !strcmp(ob_string_ptr(st), "failed");
  }
  j->calls = n;
  j->failed_calls = failed;
  long long start = t0 && ob_typeof(t0) == OB_INT ? ob_int_value(t0) / 1000 : 0;
  j->t0 = start ? start : -1;
  j->t1 = start && exit && ob_typeof(exit) == OB_INT && dur && ob_typeof(dur) == OB_INT
              ? start + ob_int_value(dur) / 1000
              : -1;
}

static void on_journal(void *ud, redisReply *rp, const char *why) {
  jread *jr = ud;
  (void)why;
  fjob *j = jr->f->closing ? NULL : find_job(jr->f, jr->id);
  ob_buf text;
  ob_buf_init(&text);
  ob_error err;
  int kind = rp ? ob_queue_journal_reply(rp, jr->id, &text, NULL, 0, &err) : OB_QJ_BAD;
  if (j) {
    j->reading = 0;
    if (rp && kind != OB_QJ_BAD) {
      j->read_at = ob_queue_now_ms();
      j->jlen = (long long)text.len;
      j->read_final = jr->final;
      ob_value *run = NULL;
      if (text.len) {
        char *name = key(jr->f, "journal", jr->id);
        run = ob_trace_build_text(name, text.data, text.len, OB_TRACE_RUN, NULL, NULL);
        free(name);
      }
      if (run) {
        summarize(j, run);
        ob_unref(run);
      } else { /* none yet, none kept, or not a journal (a run writes its plan first) */
        j->calls = j->failed_calls = 0;
        j->t0 = j->t1 = -1;
      }
    }
  }
  ob_buf_free(&text);
  free(jr->id);
  free(jr);
}

static void read_journal(ob_ui_fleet *f, fjob *j) {
  jread *jr = ob_xmalloc(sizeof *jr);
  *jr = (jread){f, ob_xstrdup(j->id), j->final};
  ob_queue_journal_args ja;
  ob_queue_journal_args_make(&ja, f->queue, j->id);
  if (ob_redis_send(f->r, on_journal, jr, 9, ja.argv, NULL) == OB_OK) {
    j->reading = 1;
  } else {
    free(jr->id);
    free(jr);
  }
  ob_queue_journal_args_free(&ja);
}

/* STRLEN of a journal to read: read when its job ended, or (running) when it grew and is
 * not past FLEET_BIG. */
static void take_jlen(sample *s, void *arg, const redisReply *rp) {
  fjob *j = arg;
  long long len = rp->type == REDIS_REPLY_INTEGER ? rp->integer : -1;
  if (len < 0 || j->reading)
    return;
  if (!j->final && (len == j->jlen || len > FLEET_BIG)) {
    j->read_at = ob_queue_now_ms(); /* unchanged, or too big for now: looked at again later */
    return;
  }
  read_journal(s->f, j);
}

/* Journals worth reading now, newest first, up to FLEET_READS: an ended job's once, a
 * running one's every FLEET_REREAD_MS at most. */
static void ask_journals(sample *s) {
  ob_ui_fleet *f = s->f;
  uint64_t now = ob_queue_now_ms();
  for (size_t i = 0; i < f->njobs && s->reads < FLEET_READS; i++) {
    fjob *j = f->jobs[i];
    int ended = !strcmp(j->state, "done") || !strcmp(j->state, "failed");
    int running = !strcmp(j->state, "running");
    if (j->reading || !(ended || running))
      continue;
    if (ended && j->read_final)
      continue;
    if (running && j->jlen >= 0 && now - j->read_at < FLEET_REREAD_MS)
      continue;
    char *k = key(f, "journal", j->id);
    send_cmd(s, take_jlen, j, 2, (const char *[]){"STRLEN", k});
    free(k);
    s->reads++;
  }
}

/* --- the window of listed jobs ------------------------------------------------------------------- */

static fjob *take_from(ob_map *old, const char *id) {
  fjob *j = ob_map_get(old, id, strlen(id));
  if (j) {
    ob_map_put(old, id, strlen(id), NULL);
    return j;
  }
  return fjob_new(id);
}

/* The newest ids, from seq down, a sharded job followed by its parts: up to FLEET_JOBS
 * listed. Jobs already known keep what was read of them. */
static void make_window(ob_ui_fleet *f, long long seq) {
  ob_map old;
  ob_map_init(&old);
  for (size_t i = 0; i < f->njobs; i++)
    ob_map_put(&old, f->jobs[i]->id, strlen(f->jobs[i]->id), f->jobs[i]);
  size_t cap = 64, n = 0, listed = 0, steps = 0;
  fjob **list = ob_xmalloc(cap * sizeof *list);
  for (long long id = seq; id >= 1 && listed < FLEET_JOBS && steps < FLEET_STEPS; id--, steps++) {
    char num[24];
    snprintf(num, sizeof num, "%lld", id);
    fjob *j = take_from(&old, num);
    if (n == cap)
      list = ob_xrealloc(list, (cap *= 2) * sizeof *list);
    list[n++] = j;
    if (strcmp(j->state, "sharded") || j->parts <= 0) {
      listed++;
      continue;
    }
    for (long long p = j->parts; p >= 1 && listed < FLEET_JOBS && steps < FLEET_STEPS; p--, steps++) {
      char part[48];
      snprintf(part, sizeof part, "%s.%lld", num, p);
      if (n == cap)
        list = ob_xrealloc(list, (cap *= 2) * sizeof *list);
      list[n++] = take_from(&old, part);
      listed++;
    }
  }
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&old, &i, &me))
    fjob_free(me->val);
  ob_map_free(&old);
  free(f->jobs);
  f->jobs = list;
  f->njobs = n;
}

/* --- what a sample makes -------------------------------------------------------------------------- */

static int by_name(const void *a, const void *b) {
  const ob_value *x = ob_object_get(*(ob_value *const *)a, "name", 4);
  const ob_value *y = ob_object_get(*(ob_value *const *)b, "name", 4);
  return strcmp(ob_string_ptr(x), ob_string_ptr(y));
}

static long long info_int(const ob_value *info, const char *k) {
  const ob_value *v = ob_typeof(info) == OB_OBJECT ? ob_object_get(info, k, strlen(k)) : NULL;
  if (v && ob_typeof(v) == OB_INT && ob_int_value(v) >= 0)
    return ob_int_value(v);
  return -1;
}

static ob_value *workers_value(ob_ui_fleet *f, sample *s, uint64_t now) {
  size_t n = ob_object_len(s->workers) + ob_object_len(s->held), m = 0;
  ob_value **items = ob_xmalloc((n ? n : 1) * sizeof *items);
  ob_value *live = ob_object();
  ob_object_iter it;
  ob_value *k, *info;
  ob_object_iter_init(&it, s->workers);
  while (ob_object_iter_next(&it, &k, &info)) {
    int is_live = ob_queue_worker_live(info, now);
    const ob_value *held = ob_object_get(s->held, ob_string_ptr(k), ob_string_len(k));
    ob_value *w = ob_object_set(ob_object(), "name", 4, ob_ref(k));
    w = ob_object_set(w, "state", 5, ob_cstring(is_live ? "live" : "silent"));
    w = ob_object_set(w, "running", 7, ob_int(held ? ob_int_value(held) : 0));
    w = ob_object_set(w, "done", 4, int_or_null(info_int(info, "done")));
    w = ob_object_set(w, "failed", 6, int_or_null(info_int(info, "failed")));
    w = ob_object_set(w, "taken_over", 10, int_or_null(info_int(info, "claimed")));
    w = ob_object_set(w, "last_seen", 9, int_or_null(info_int(info, "seen")));
    items[m++] = w;
    if (is_live)
      live = ob_object_setv(live, k, ob_true());
  }
  /* consumers holding jobs without an entry: gone before they wrote one (or it was
     removed) */
  ob_value *held;
  ob_object_iter_init(&it, s->held);
  while (ob_object_iter_next(&it, &k, &held)) {
    if (ob_object_get(s->workers, ob_string_ptr(k), ob_string_len(k)) || ob_int_value(held) <= 0)
      continue;
    ob_value *w = ob_object_set(ob_object(), "name", 4, ob_ref(k));
    w = ob_object_set(w, "state", 5, ob_cstring("silent"));
    w = ob_object_set(w, "running", 7, ob_ref(held));
    w = ob_object_set(w, "done", 4, ob_null());
    w = ob_object_set(w, "failed", 6, ob_null());
    w = ob_object_set(w, "taken_over", 10, ob_null());
    w = ob_object_set(w, "last_seen", 9, ob_null());
    items[m++] = w;
  }
  qsort(items, m, sizeof *items, by_name);
  ob_value *list = ob_array();
  for (size_t i = 0; i < m; i++)
    list = ob_array_push(list, items[i]);
  free(items);
  ob_unref(f->live);
  f->live = live;
  return list;
}

static ob_value *queues_value(ob_ui_fleet *f, sample *s) {
  long long waiting = 0, running = 0;
  for (size_t i = 0; i < s->nstreams; i++) {
    const fstream *st = &s->streams[i];
    long long len = st->len > 0 ? st->len : 0, lag;
    if (!st->groups_ok || !st->group)
      lag = len; /* no group yet: nothing was ever taken */
    else if (st->lag >= 0)
      lag = st->lag;
    else
      lag = st->read >= 0 ? len - st->read : 0;
    waiting += lag > 0 ? lag : 0;
    running += st->pending > 0 ? st->pending : 0;
  }
  ob_value *q = ob_object_set(ob_object(), "name", 4, ob_cstring(f->queue));
  q = ob_object_set(q, "waiting", 7, ob_int(waiting));
  q = ob_object_set(q, "running", 7, ob_int(running));
  q = ob_object_set(q, "done", 4, ob_int(s->done));
  q = ob_object_set(q, "failed", 6, ob_int(s->failed));
  q = ob_object_set(q, "poison", 6, ob_int(s->poisoned));
  q = ob_object_set(q, "redis_bytes", 11, int_or_null(f->used_bytes));
  q = ob_object_set(q, "job_bytes", 9, int_or_null(f->job_bytes));
  return ob_array_push(ob_array(), q);
}

static void add_rate(ob_ui_fleet *f, sample *s, uint64_t now) {
  if (f->have_prev && now > f->prev_t) {
    double dt = (double)(now - f->prev_t) / 1000.0;
    long long dd = s->done - f->prev_done, df = s->failed - f->prev_failed;
    rate_pt p = {now, dd > 0 ? (double)dd / dt : 0.0, df > 0 ? (double)df / dt : 0.0};
    if (f->nrates == FLEET_RATES) {
      f->rates[f->rate_first] = p;
      f->rate_first = (f->rate_first + 1) % FLEET_RATES;
    } else {
      f->rates[(f->rate_first + f->nrates++) % FLEET_RATES] = p;
    }
  }
  f->have_prev = 1;
  f->prev_t = now;
  f->prev_done = s->done;
  f->prev_failed = s->failed;
}

/* A rate rounded to 3 decimals (an integer when it is one). */
static ob_value *rate_num(double r) {
  double x = (double)(long long)(r * 1000.0 + 0.5) / 1000.0;
  return x == (double)(long long)x ? ob_int((long long)x) : ob_real(x);
}

static ob_value *rates_value(const ob_ui_fleet *f) {
  ob_value *list = ob_array();
  for (size_t i = 0; i < f->nrates; i++) {
    const rate_pt *p = &f->rates[(f->rate_first + i) % FLEET_RATES];
    ob_value *o = ob_object_set(ob_object(), "t", 1, ob_int((long long)p->t));
    o = ob_object_set(o, "done", 4, rate_num(p->done));
    o = ob_object_set(o, "failed", 6, rate_num(p->failed));
    list = ob_array_push(list, o);
  }
  return list;
}

static void note_poison(ob_ui_fleet *f) {
  for (size_t i = f->njobs; i-- > 0;) { /* oldest first: the newest ends first in the list */
    const fjob *j = f->jobs[i];
    if (!is_poison(j))
      continue;
    int known = 0;
    for (size_t k = 0; k < f->npoison && !known; k++)
      known = !strcmp(f->poison[k].id, j->id);
    if (known)
      continue;
    if (f->npoison == FLEET_POISON) {
      free(f->poison[FLEET_POISON - 1].id);
      free(f->poison[FLEET_POISON - 1].error);
      f->npoison--;
    }
    memmove(&f->poison[1], &f->poison[0], f->npoison * sizeof *f->poison);
    f->poison[0] = (poison_job){ob_xstrdup(j->id), ob_xstrdup(j->error), j->deliveries};
    f->npoison++;
  }
}

static ob_value *poison_value(const ob_ui_fleet *f) {
  ob_value *list = ob_array();
  for (size_t i = 0; i < f->npoison; i++) {
    ob_value *o = ob_object_set(ob_object(), "job", 3, ob_cstring(f->poison[i].id));
    o = ob_object_set(o, "deliveries", 10, int_or_null(f->poison[i].deliveries));
    o = ob_object_set(o, "error", 5, ob_cstring(f->poison[i].error));
    list = ob_array_push(list, o);
  }
  return list;
}

/* A job's state as the page says it ("" when it is not listed: no hash, or a sharded
 * job's whole). */
static const char *listed_state(const fjob *j) {
  if (!strcmp(j->state, "queued"))
    return "waiting";
  if (is_poison(j))
    return "poison";
  if (!strcmp(j->state, "running") || !strcmp(j->state, "done") || !strcmp(j->state, "failed"))
    return j->state;
  return "";
}

static ob_value *jobs_value(const ob_ui_fleet *f) {
  ob_value *list = ob_array();
  for (size_t i = 0; i < f->njobs; i++) {
    const fjob *j = f->jobs[i];
    const char *st = listed_state(j);
    if (!*st)
      continue;
    int waiting = !strcmp(st, "waiting");
    ob_value *o = ob_object_set(ob_object(), "job", 3, ob_cstring(j->id));
    o = ob_object_set(o, "state", 5, ob_cstring(st));
    o = ob_object_set(o, "worker", 6, j->worker && !waiting ? ob_cstring(j->worker) : ob_null());
    o = ob_object_set(o, "started", 7, waiting ? ob_null() : int_or_null(j->started));
    o = ob_object_set(o, "ended", 5, int_or_null(j->final ? j->ended : -1));
    list = ob_array_push(list, o);
  }
  return list;
}

/* The body as of the last sample, "redis" left for the request to fill. */
static void make_snapshot(ob_ui_fleet *f, ob_value *workers, ob_value *queues) {
  ob_value *o = ob_object_set(ob_object(), "redis", 5, ob_null());
  o = ob_object_set(o, "queue", 5, ob_cstring(f->queue));
  o = ob_object_set(o, "sampled", 7, f->samples ? ob_int((long long)f->sampled) : ob_null());
  o = ob_object_set(o, "workers", 7, workers);
  o = ob_object_set(o, "queues", 6, queues);
  o = ob_object_set(o, "rate", 4, rates_value(f));
  o = ob_object_set(o, "poison", 6, poison_value(f));
  o = ob_object_set(o, "jobs", 4, jobs_value(f));
  ob_unref(f->snap);
  f->snap = o;
}

static void commit(ob_ui_fleet *f, sample *s) {
  uint64_t now = ob_queue_now_ms();
  f->samples++;
  f->sampled = now;
  set_state(f, NULL);
  add_rate(f, s, now);
  note_poison(f);
  make_snapshot(f, workers_value(f, s, now), queues_value(f, s));
}

/* --- the steps ------------------------------------------------------------------------------------- */

static void sample_free(sample *s) {
  for (size_t i = 0; i < s->nstreams; i++)
    free(s->streams[i].key);
  free(s->streams);
  ob_unref(s->workers);
  ob_unref(s->held);
  free(s);
}

static void sample_end(sample *s) {
  ob_ui_fleet *f = s->f;
  f->out = NULL;
  if (s->lost && !f->closing)
    set_state(f, s->why);
  else if (!s->lost)
    commit(f, s);
  sample_free(s);
}

/* The second step: the streams, the listed jobs not ended, journals. */
static void step_two(sample *s) {
  ob_ui_fleet *f = s->f;
  /* another Redis (a connection made since), or this one emptied (ids given out again
     from 1: fewer given out, or fewer jobs ended, than the sample before saw): what was
     read of the jobs may not be theirs */
  if (s->seq < f->seq || ob_redis_connects(f->r) != f->connects ||
      (f->have_prev && (s->done < f->prev_done || s->failed < f->prev_failed))) {
    for (size_t i = 0; i < f->njobs; i++)
      fjob_free(f->jobs[i]);
    f->njobs = 0;
  }
  f->seq = s->seq;
  f->connects = ob_redis_connects(f->r);
  make_window(f, s->seq);
  for (size_t i = 0; i < s->nstreams; i++) {
    fstream *st = &s->streams[i];
    send_cmd(s, take_groups, st, 3, (const char *[]){"XINFO", "GROUPS", st->key});
    send_cmd(s, take_pending, st, 3, (const char *[]){"XPENDING", st->key, OB_QUEUE_GROUP});
    send_cmd(s, take_len, st, 2, (const char *[]){"XLEN", st->key});
  }
  for (size_t i = 0; i < f->njobs; i++) {
    fjob *j = f->jobs[i];
    if (j->final)
      continue;
    char *k = key(f, "job", j->id);
    send_cmd(s, take_job, j, 9,
             (const char *[]){"HMGET", k, "state", "worker", "started", "finished", "deliveries",
                              "error", "parts"});
    free(k);
  }
  ask_journals(s);
}

static void sample_step(sample *s) {
  if (s->lost || s->f->closing || s->step == 2) {
    sample_end(s);
    return;
  }
  s->step = 2;
  s->pending++; /* held while the step's commands go out */
  step_two(s);
  if (--s->pending == 0)
    sample_step(s);
}

static void sample_start(ob_ui_fleet *f) {
  if (f->out || f->closing || !ob_redis_is_up(f->r))
    return;
  sample *s = ob_xcalloc(1, sizeof *s);
  s->f = f;
  s->step = 1;
  s->t0 = ob_queue_now_ms();
  s->workers = ob_object();
  s->held = ob_object();
  f->out = s;
  char *kseq = key(f, "seq", NULL), *kstreams = key(f, "streams", NULL),
       *kworkers = key(f, "workers", NULL), *kstats = key(f, "stats", NULL);
  s->pending++;
  send_cmd(s, take_seq, NULL, 2, (const char *[]){"GET", kseq});
  send_cmd(s, take_streams, NULL, 2, (const char *[]){"SMEMBERS", kstreams});
  send_cmd(s, take_workers, NULL, 2, (const char *[]){"HGETALL", kworkers});
  send_cmd(s, take_stats, NULL, 2, (const char *[]){"HGETALL", kstats});
  if (f->samples % FLEET_MEMORY_EVERY == 0) { /* some 100 MEMORY USAGE: not every second */
    ob_queue_memory_args ma;
    ob_queue_memory_args_make(&ma, f->queue);
    send_cmd(s, take_info, NULL, 2, (const char *[]){"INFO", "memory"});
    send_cmd(s, take_memory, NULL, 9, ma.argv);
    ob_queue_memory_args_free(&ma);
  }
  free(kseq);
  free(kstreams);
  free(kworkers);
  free(kstats);
  if (--s->pending == 0)
    sample_step(s);
}

/* --- the connection and the timer ----------------------------------------------------------------- */

static void on_up(void *ud) { sample_start(ud); }

static void on_down(void *ud, const char *why) {
  ob_ui_fleet *f = ud;
  if (!f->closing)
    set_state(f, why);
}

static void connect_redis(ob_ui_fleet *f) {
  char *k = key(f, "seq", NULL); /* on a Redis Cluster: to the node of the queue's slot */
  ob_redis_handlers h = {on_up, on_down, f, k};
  ob_error err;
  f->r = ob_redis_open(f->loop, f->url, &h, &err); /* the URL was parsed already */
  free(k);
}

static void on_tick(uv_timer_t *t) {
  ob_ui_fleet *f = t->data;
  if (f->closing)
    return;
  if (!f->r) { /* out of memory when it was made */
    connect_redis(f);
    return;
  }
  if (f->out && ob_queue_now_ms() - f->out->t0 >= FLEET_STALL_MS) {
    /* no answer: the connection is given up (the sample ends with it) and made again */
    ob_redis_close(f->r);
    connect_redis(f);
    set_state(f, "Redis did not answer within 5 s");
    return;
  }
  if (!f->out && !ob_redis_is_up(f->r)) {
    const char *why = ob_redis_why(f->r);
    if (strncmp(f->state, "unreachable", 11))
      set_state(f, *why ? why : "not connected yet");
    return;
  }
  sample_start(f);
}

ob_ui_fleet *ob_ui_fleet_new(uv_loop_t *loop, const char *redis_url, const char *queue,
                             ob_error *err) {
  queue = queue ? queue : OB_QUEUE_DEFAULT;
  if (!ob_queue_name_ok(queue)) {
    ob_error_set(err, OB_EINVAL, 0, "--queue %s: a name of 1 to 64 letters, digits, _ . -", queue);
    return NULL;
  }
  ob_redis_addr addr;
  if (!redis_url || ob_redis_url_parse(redis_url, &addr, err) != OB_OK) {
    if (!redis_url)
      ob_error_set(err, OB_EINVAL, 0, "no Redis URL");
    return NULL;
  }
  ob_ui_fleet *f = ob_xcalloc(1, sizeof *f);
  f->loop = loop;
  f->url = ob_xstrdup(redis_url);
  f->queue = ob_xstrdup(queue);
  f->addr = addr;
  f->live = ob_object();
  f->used_bytes = f->job_bytes = -1;
  set_state(f, "not connected yet");
  make_snapshot(f, ob_array(), ob_array());
  connect_redis(f);
  if (!f->r) { /* out of memory: ob_redis_open's only failure once the URL parsed */
    ob_error_set(err, OB_ENOMEM, 0, "out of memory");
    ob_unref(f->snap);
    ob_unref(f->live);
    free(f->url);
    free(f->queue);
    free(f);
    return NULL;
  }
  uv_timer_init(loop, &f->tick);
  f->tick.data = f;
  f->tick_open = 1;
  uv_timer_start(&f->tick, on_tick, FLEET_EVERY_MS, FLEET_EVERY_MS);
  return f;
}

uint64_t ob_ui_fleet_samples(const ob_ui_fleet *f) { return f->samples; }

ob_value *ob_ui_fleet_snapshot(ob_ui_fleet *f) {
  return ob_object_set(ob_ref(f->snap), "redis", 5, ob_cstring(f->state));
}

/* --- runs -------------------------------------------------------------------------------------------- */

ob_value *ob_ui_fleet_runs(ob_ui_fleet *f) {
  ob_value *list = ob_array();
  for (size_t i = 0; i < f->njobs; i++) {
    const fjob *j = f->jobs[i];
    const char *st = j->state;
    if (strcmp(st, "running") && strcmp(st, "done") && strcmp(st, "failed"))
      continue;
    if (!strcmp(st, "running") &&
        !(j->worker && ob_object_get(f->live, j->worker, strlen(j->worker))))
      st = "killed-resumable";
    char name[80];
    snprintf(name, sizeof name, "job-%s", j->id);
    ob_value *o = ob_object_set(ob_object(), "id", 2, ob_cstring(name));
    snprintf(name, sizeof name, "job:%s", j->id);
    o = ob_object_set(o, "source", 6, ob_cstring(name));
    o = ob_object_set(o, "state", 5, ob_cstring(st));
    o = ob_object_set(o, "started", 7, int_or_null(j->t0 >= 0 ? j->t0 : j->started));
    o = ob_object_set(o, "ended", 5,
                      int_or_null(!j->final ? -1 : j->read_final && j->t1 >= 0 ? j->t1 : j->ended));
    o = ob_object_set(o, "calls", 5, int_or_null(j->calls));
    o = ob_object_set(o, "failed", 6, int_or_null(j->failed_calls));
    list = ob_array_push(list, o);
  }
  return list;
}

/* A command on the blocking connection whose answer only says whether it went well:
 * NULL, or why not (in buf). */
static const char *sync_cmd(redisContext *c, int argc, const char **argv, char *buf, size_t size) {
  redisReply *rp = redisCommandArgv(c, argc, argv, NULL);
  if (!rp)
    snprintf(buf, size, "%s", c->errstr[0] ? c->errstr : "no answer");
  else if (rp->type == REDIS_REPLY_ERROR)
    snprintf(buf, size, "%s", rp->str);
  int bad = !rp || rp->type == REDIS_REPLY_ERROR;
  freeReplyObject(rp);
  return bad ? buf : NULL;
}

/* The blocking connection, made (or made again) when needed: connected, AUTH and SELECT
 * as the URL says. */
static redisContext *sync_conn(ob_ui_fleet *f, ob_error *err) {
  if (f->sync && !f->sync->err)
    return f->sync;
  if (f->sync) {
    redisFree(f->sync);
    f->sync = NULL;
  }
  uint64_t now = ob_queue_now_ms();
  if (f->sync_failed_at && now - f->sync_failed_at < FLEET_SYNC_PAUSE_MS) {
    ob_error_set(err, OB_EIO, 0, "Redis at %s is unreachable: %s", f->url, f->sync_why);
    return NULL;
  }
  struct timeval tv = {FLEET_SYNC_S, 0};
  redisContext *c = redisConnectWithTimeout(f->addr.host, f->addr.port, tv);
  char *buf = f->sync_why;
  size_t size = sizeof f->sync_why;
  const char *why = NULL;
  if (!c || c->err)
    why = (snprintf(buf, size, "%s", c ? c->errstr : "out of memory"), buf);
  else if (redisSetTimeout(c, tv) != REDIS_OK)
    why = (snprintf(buf, size, "cannot set its timeouts"), buf);
  if (!why && f->addr.password[0]) {
    const char *av[] = {"AUTH", f->addr.user[0] ? f->addr.user : f->addr.password,
                        f->addr.password};
    why = sync_cmd(c, f->addr.user[0] ? 3 : 2, av, buf, size);
  }
  if (!why && f->addr.db) {
    char db[16];
    snprintf(db, sizeof db, "%d", f->addr.db);
    why = sync_cmd(c, 2, (const char *[]){"SELECT", db}, buf, size);
  }
  if (why) {
    f->sync_failed_at = now;
    ob_error_set(err, OB_EIO, 0, "Redis at %s is unreachable: %s", f->url, f->sync_why);
    if (c)
      redisFree(c);
    return NULL;
  }
  f->sync_failed_at = 0;
  return f->sync = c;
}

/* The connection failed while in use: dropped, and not tried again for a while. */
static void sync_lost(ob_ui_fleet *f, ob_error *err) {
  snprintf(f->sync_why, sizeof f->sync_why, "%s",
           f->sync && f->sync->errstr[0] ? f->sync->errstr : "no answer");
  f->sync_failed_at = ob_queue_now_ms();
  if (f->sync)
    redisFree(f->sync);
  f->sync = NULL;
  ob_error_set(err, OB_EIO, 0, "Redis at %s is unreachable: %s", f->url, f->sync_why);
}

/* One exchange on the blocking connection: the job hash's state and the journal (read as
 * ob_queue_journal.h says), pipelined. OB_OK with both replies; or the connection failed
 * (*stale when it was made before and failed otherwise than by the timeout: a Redis
 * restarted since, worth a new one). */
static int exchange(redisContext *c, const char *queue, const char *id, const char *jk,
                    redisReply **hash, redisReply **text, int *stale) {
  redisAppendCommandArgv(c, 4, (const char *[]){"HMGET", jk, "state", "parts"}, NULL);
  ob_queue_journal_args ja;
  ob_queue_journal_args_make(&ja, queue, id);
  redisAppendCommandArgv(c, 9, ja.argv, NULL);
  ob_queue_journal_args_free(&ja);
  void *r1 = NULL, *r2 = NULL;
  int ok = redisGetReply(c, &r1) == REDIS_OK && redisGetReply(c, &r2) == REDIS_OK;
  int e = errno;
  *hash = r1;
  *text = r2;
  *stale = !ok && !(c->err == REDIS_ERR_IO && (e == EAGAIN || e == EWOULDBLOCK));
  return ok ? OB_OK : OB_EIO;
}

/* The journal's text from the exchange's replies into out: OB_OK, or an error code with
 * err saying why there is none. */
static int text_of(ob_ui_fleet *f, const char *id, const redisReply *hash,
                   const redisReply *text, ob_buf *out, ob_error *err) {
  ob_error jerr;
  int kind = ob_queue_journal_reply(text, id, out, NULL, 0, &jerr);
  if (kind == OB_QJ_TEXT)
    return OB_OK;
  const redisReply *st = hash->type == REDIS_REPLY_ARRAY && hash->elements == 2 ? hash->element[0]
                                                                                  : NULL;
  if (kind == OB_QJ_BAD)
    ob_error_set(err, OB_EINVAL, 0, "job %s's journal cannot be read: %s", id, jerr.msg);
  else if (kind == OB_QJ_GONE)
    ob_error_set(err, OB_ENOENT, 0, "job %s has ended and its journal is no longer kept "
                 "(workers keep it --keep-journals: an hour unless told)", id);
  else if (!is_str(st))
    ob_error_set(err, OB_ENOENT, 0, "no job %s in queue %s", id, f->queue);
  else if (!strcmp(st->str, "sharded"))
    ob_error_set(err, OB_ENOENT, 0, "job %s is sharded: its parts (%s.1 ...) are the runs", id, id);
  else
    ob_error_set(err, OB_ENOENT, 0, "job %s has no journal (it is %s: not started, or it "
                 "failed before it ran)", id, st->str);
  return err->code;
}

ob_value *ob_ui_fleet_run(ob_ui_fleet *f, const char *job_id, ob_error *err) {
  ob_buf text;
  ob_buf_init(&text);
  char *name = NULL;
  ob_value *run = NULL;
  if (ob_ui_fleet_journal(f, job_id, &text, &name, err) == OB_OK)
    run = ob_trace_build_text(name, text.data, text.len, OB_TRACE_RUN, NULL, err);
  free(name);
  ob_buf_free(&text);
  return run;
}

int ob_ui_fleet_journal(ob_ui_fleet *f, const char *job_id, ob_buf *out, char **name,
                        ob_error *err) {
  *name = NULL;
  const char *id = job_id && !strncmp(job_id, "job-", 4) ? job_id + 4 : job_id;
  if (!id || !job_id_ok(id)) {
    return ob_error_set(err, OB_EINVAL, 0, "not a job id: 1 to 64 letters, digits, _ . -");
  }
  if (f->closing)
    return ob_error_set(err, OB_EIO, 0, "closed");
  if (!f->samples || strcmp(f->state, "ok"))
    return ob_error_set(err, OB_EIO, 0, "Redis at %s is %s", f->url,
                        strcmp(f->state, "ok") ? f->state : "not reached yet");
  /* a write to a Redis gone raises SIGPIPE (hiredis writes with write()), which the host
     may not ignore: held back meanwhile, and one raised taken before it is let through */
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  char *jk = key(f, "job", id), *lk = key(f, "journal", id);
  int rc = OB_EIO;
  for (int attempt = 0; attempt < 2; attempt++) {
    int reused = f->sync != NULL && !f->sync->err, stale = 0;
    redisContext *c = sync_conn(f, err);
    if (!c)
      break;
    redisReply *hash = NULL, *text = NULL;
    if (exchange(c, f->queue, id, jk, &hash, &text, &stale) == OB_OK) {
      rc = text_of(f, id, hash, text, out, err);
      attempt = 2;
    } else if (reused && stale && attempt == 0) {
      redisFree(f->sync); /* made before Redis went away: a new one, once */
      f->sync = NULL;
    } else {
      sync_lost(f, err);
      attempt = 2;
    }
    freeReplyObject(hash);
    freeReplyObject(text);
  }
  free(jk);
  if (rc == OB_OK)
    *name = lk; /* what errors about its lines name */
  else
    free(lk);
  sigset_t pending;
  struct timespec zero = {0, 0};
  if (!sigismember(&old, SIGPIPE) && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE))
    sigtimedwait(&pipe_set, NULL, &zero);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* --- the end -------------------------------------------------------------------------------------- */

static void release(ob_ui_fleet *f) {
  for (size_t i = 0; i < f->njobs; i++)
    fjob_free(f->jobs[i]);
  free(f->jobs);
  for (size_t i = 0; i < f->npoison; i++) {
    free(f->poison[i].id);
    free(f->poison[i].error);
  }
  ob_unref(f->snap);
  ob_unref(f->live);
  if (f->sync)
    redisFree(f->sync);
  free(f->url);
  free(f->queue);
  free(f);
}

static void tick_closed(uv_handle_t *h) {
  ob_ui_fleet *f = h->data;
  f->tick_open = 0;
  if (f->free_asked)
    release(f);
}

void ob_ui_fleet_close(ob_ui_fleet *f) {
  if (!f || f->closing)
    return;
  f->closing = 1;
  ob_redis_close(f->r); /* the sample out, journals asked for: called back now, "closed" */
  f->r = NULL;
  if (f->sync) {
    redisFree(f->sync);
    f->sync = NULL;
  }
  uv_timer_stop(&f->tick);
  uv_close((uv_handle_t *)&f->tick, tick_closed);
}

void ob_ui_fleet_free(ob_ui_fleet *f) {
  if (!f)
    return;
  ob_ui_fleet_close(f);
  if (f->tick_open)
    f->free_asked = 1; /* the timer's close callback frees it */
  else
    release(f);
}
