/* ob_worker.c -- a worker of a job queue: Redis on the engine's loop, runs on the
 * engine (the data it reads and writes is laid out in ob_queue.h).
 *
 * Design
 * ------
 * This file is the worker as a whole; a job's own life (from its delivery to its
 * stored result) is ob_worker_job.c's. The jobs and what they share with the worker
 * (connection, names, plan cache, counts) are an ob_wjobs, the worker's first member
 * (js); the worker is the jobs' host (ob_wjob_host: their notes, the reaper), so that
 * ob_worker_job.c never includes this file's header (ob_worker_int.h).
 *
 * Two connections: `rd` blocks on XREADGROUP (COUNT: the free slots; BLOCK:
 * READ_BLOCK_MS, so that a silent network is noticed; DRAIN_BLOCK_MS with --drain,
 * whose empty answer starts the check that nothing is pending anywhere), `cmd`
 * (js.cmd) carries everything else in order. A read answered with an error (a jobs key that is not a stream) is
 * tried again after a backoff (100 ms doubling to 5 s), or, with --drain, ends the
 * worker with that error. A lost `rd` reads again once reconnected; a lost `cmd` re-ships every
 * running job's journal and every result not acknowledged (ob_worker_job.c).
 * Jobs keep running meanwhile.
 *
 * The tick (every claim_idle / 4, 20 ms to 5 s) claims the running jobs again to
 * this worker (XCLAIM JUSTID: their idle time starts over, so a live worker's job
 * is never taken), refreshes the worker's entry in ob:{Q}:workers (with how often
 * it does, so that status can tell a silent worker), looks for jobs pending
 * longer than claim_idle with other consumers (XPENDING IDLE), claims them
 * (XCLAIM: one claimant wins) and hands them to ob_wjob_take, and tells the
 * worker's status (o.on_status: `obelus worker` draws its live line from it). The
 * reaper, a zero timer, does what must not happen inside a callback of the
 * scheduler or of hiredis: ending settled runs, freeing ended jobs, sending
 * results, telling the status, and then reading more. The worker prints nothing:
 * its notes go to o.on_note.
 *
 * Stopping (SIGTERM through ob_worker_stop): no more reads; running jobs get
 * grace_ms, then are cancelled, their journals' last lines shipped, and handed
 * back: XCLAIM with a huge IDLE makes them claimable at once. The worker leaves
 * ob:{Q}:workers (HDEL) and ends once that is answered.
 *
 * Costs: two connections, four timers; per tick, an XCLAIM per stream of its
 * running jobs, an HSET, an XPENDING per stream. */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ob_mem.h"
#include "fleet/ob_worker_int.h"
#include "fleet/ob_worker_records.h"

#define READ_BLOCK_MS 2000
#define DRAIN_BLOCK_MS 50
#define READ_BACKOFF_MIN_MS 100
#define READ_BACKOFF_MAX_MS 5000

static void read_more(ob_worker *w);
static void maybe_end(ob_worker *w);

/* Notes and the status go to the options' callbacks (the line `obelus worker` draws on
 * a terminal is ob_cmd_worker.c's): a note is followed by the status, the ticks and the
 * reaper send it too, and on_last_reply a last one with ended set. */
static void status(ob_worker *w) {
  if (!w->o.on_status || w->ended)
    return;
  ob_worker_status st = {.name = w->js.me,
                         .running = w->js.running,
                         .done = w->js.stats.done,
                         .failed = w->js.stats.failed,
                         .claimed = w->js.stats.claimed,
                         .redis_up = ob_redis_is_up(w->js.cmd)};
  w->o.on_status(w->o.note_ud, &st);
}

static void note(ob_worker *w, const char *job, const char *msg) {
  if (!w->o.on_note)
    return;
  w->o.on_note(w->o.note_ud, job, msg);
  status(w);
}

static void reap(uv_timer_t *t) {
  ob_worker *w = t->data;
  w->reaping = 0;
  ob_wjob_reap_all(&w->js);
  status(w); /* results stored since: the counts changed */
  maybe_end(w);
  read_more(w);
}

static void schedule_reap(ob_worker *w) {
  if (!w->reaping && w->timers_open) {
    w->reaping = 1;
    uv_timer_start(&w->reaper, reap, 0, 0);
  }
}

/* The jobs' host (ob_wjob_host): their notes, and the reaper. */
static void host_say(void *ud, const char *job, const char *msg) { note(ud, job, msg); }

static void host_schedule_reap(void *ud) { schedule_reap(ud); }

/* --- reading and claiming ------------------------------------------------------------------- */

static size_t free_slots(const ob_worker *w) {
  size_t busy = w->js.running + w->claiming;
  return busy >= w->o.jobs ? 0 : w->o.jobs - busy;
}

static void drain_check(ob_worker *w);

static void on_reread(uv_timer_t *t) {
  ob_worker *w = t->data;
  w->read_waits = 0;
  read_more(w);
}

/* A read answered with an error other than NOGROUP (a jobs key of another type: a
 * string, a hash): no use asking again at once. With --drain the worker ends with
 * the error (what it was to drain cannot be read); else it reads again after
 * READ_BACKOFF_MIN_MS, doubling to READ_BACKOFF_MAX_MS while the error lasts. */
static void read_failed(ob_worker *w, const char *msg) {
  if (w->o.drain) {
    snprintf(w->why, sizeof w->why, "cannot read the jobs of queue %s: %s", w->js.queue, msg);
    w->js.stopping = 1;
    maybe_end(w);
    return;
  }
  w->read_backoff_ms = w->read_backoff_ms ? w->read_backoff_ms * 2 : READ_BACKOFF_MIN_MS;
  if (w->read_backoff_ms > READ_BACKOFF_MAX_MS)
    w->read_backoff_ms = READ_BACKOFF_MAX_MS;
  ob_wjob_say(&w->js, NULL, "reading jobs: %s; reading again in %" PRIu64 " ms", msg, w->read_backoff_ms);
  if (w->timers_open) {
    w->read_waits = 1;
    uv_timer_start(&w->reread, on_reread, w->read_backoff_ms, 0);
  }
}

static void on_read(void *ud, redisReply *rp, const char *why) {
  ob_worker *w = ud;
  (void)why;
  w->reading = 0;
  if (!rp || w->ended)
    return; /* lost: read again once up (on_up) */
  if (rp->type == REDIS_REPLY_ERROR) {
    if (!strncmp(rp->str, "NOGROUP", 7)) { /* the stream went: made again, read at once */
      ob_wjob_say(&w->js, NULL, "reading jobs: %s", rp->str);
      w->groups_ready = 0;
    } else {
      read_failed(w, rp->str);
      return;
    }
  } else if (rp->type == REDIS_REPLY_ARRAY) {
    w->read_backoff_ms = 0;
    for (size_t s = 0; s < rp->elements; s++) {
      redisReply *st = rp->element[s];
      if (st->elements != 2)
        continue;
      for (size_t e = 0; e < st->element[1]->elements; e++) {
        wjob *j = ob_wjob_new(&w->js, st->element[0]->str, st->element[1]->element[e]);
        if (j)
          ob_wjob_take(j);
      }
    }
  } else if (w->o.drain && rp->type == REDIS_REPLY_NIL) {
    drain_check(w); /* nothing new: is anything pending anywhere? */
  }
  read_more(w);
}

static void create_groups(ob_worker *w);

static void read_more(ob_worker *w) {
  if (w->reading || w->read_waits || w->js.stopping || w->ended || !ob_redis_is_up(w->rd))
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
  const char *argv[16] = {"XREADGROUP", "GROUP", OB_QUEUE_GROUP, w->js.me, "COUNT", count,
                          "BLOCK", block, "STREAMS"};
  int argc = 9;
  for (int i = 0; i < w->js.nstreams; i++)
    argv[argc++] = w->js.streams[i];
  for (int i = 0; i < w->js.nstreams; i++)
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
    ob_wjob_say(&w->js, NULL, "cannot make the consumer group: %s", rp->str);
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
  char *set = ob_queue_key(w->js.queue, "streams", NULL);
  for (int i = 0; i < w->js.nstreams; i++) {
    const char *argv[] = {"XGROUP", "CREATE", w->js.streams[i], OB_QUEUE_GROUP, "0", "MKSTREAM"};
    ob_redis_send(w->js.cmd, i + 1 == w->js.nstreams ? on_groups_made : on_group, w, 6, argv, NULL);
    ob_redis_send(w->js.cmd, ob_redis_ignore_reply, NULL, 3, (const char *[]){"SADD", set, w->js.streams[i]},
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
      wjob *j = ob_wjob_new(&w->js, c->stream, rp->element[e]);
      if (!j)
        continue;
      j->claimed = 1;
      j->deliveries = c->deliveries + 1;
      w->js.stats.claimed++;
      char *stats = ob_queue_key(w->js.queue, "stats", NULL);
      ob_redis_send(w->js.cmd, ob_redis_ignore_reply, NULL, 4,
                    (const char *[]){"HINCRBY", stats, "claimed", "1"}, NULL);
      free(stats);
      ob_wjob_say(&w->js, j->id, "taken over (its worker stopped answering; delivery %lld)",
          j->deliveries);
      ob_wjob_take(j);
    }
  }
  free(c->stream);
  free(c);
  maybe_end(w);
  read_more(w);
}

static int runs_entry(const ob_worker *w, const char *entry) {
  for (const wjob *j = w->js.jobs; j; j = j->next)
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
  if (rp && rp->type == REDIS_REPLY_ARRAY && !w->js.stopping && !w->ended) {
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
      const char *argv[] = {"XCLAIM", pr->stream, OB_QUEUE_GROUP, w->js.me, idle, p->element[0]->str};
      if (ob_redis_send(w->js.cmd, on_claimed, c, 6, argv, NULL) == OB_OK) {
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
  if (!n || w->js.stopping)
    return;
  char idle[32], count[32];
  snprintf(idle, sizeof idle, "%" PRIu64, w->o.claim_idle_ms);
  snprintf(count, sizeof count, "%zu", n);
  for (int i = 0; i < w->js.nstreams; i++) {
    pend_req *pr = ob_xmalloc(sizeof *pr);
    pr->w = w;
    pr->stream = ob_xstrdup(w->js.streams[i]);
    const char *argv[] = {"XPENDING", w->js.streams[i], OB_QUEUE_GROUP, "IDLE", idle, "-", "+", count};
    if (ob_redis_send(w->js.cmd, on_pending, pr, 8, argv, NULL) != OB_OK) {
      free(pr->stream);
      free(pr);
    }
  }
}

/* Claims this worker's running jobs again: their idle time starts over. */
static void keep_claims(ob_worker *w) {
  for (int i = 0; i < w->js.nstreams; i++) {
    const char **argv = ob_xmalloc((w->js.running + 8) * sizeof *argv);
    int argc = 0;
    argv[argc++] = "XCLAIM";
    argv[argc++] = w->js.streams[i];
    argv[argc++] = OB_QUEUE_GROUP;
    argv[argc++] = w->js.me;
    argv[argc++] = "0";
    int n = 0;
    for (wjob *j = w->js.jobs; j; j = j->next)
      if (j->state != J_DONE && !strcmp(j->stream, w->js.streams[i]) && (size_t)argc < w->js.running + 6) {
        argv[argc++] = j->entry;
        n++;
      }
    argv[argc++] = "JUSTID";
    if (n)
      ob_redis_send(w->js.cmd, ob_redis_ignore_reply, NULL, argc, argv, NULL);
    free(argv);
  }
}

static void announce(ob_worker *w) {
  char *key = ob_queue_key(w->js.queue, "workers", NULL);
  ob_buf b;
  ob_buf_init(&b);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  ob_buf_addf(&b, "{\"host\":");
  ob_json_write_string(&b, host, strlen(host));
  ob_buf_addf(&b, ",\"pid\":%ld,\"tools_id\":\"%s\",\"tools\":%s,\"jobs\":%zu,\"running\":%zu,"
                  "\"seen\":%" PRIu64 ",\"every_ms\":%" PRIu64 ",\"done\":%" PRIu64
                  ",\"failed\":%" PRIu64 ",\"claimed\":%" PRIu64 "}",
              (long)getpid(), w->tools_id, w->tools_json, w->o.jobs, w->js.running,
              ob_queue_now_ms(), w->tick_ms, w->js.stats.done, w->js.stats.failed, w->js.stats.claimed);
  ob_redis_send(w->js.cmd, ob_redis_ignore_reply, NULL, 4, (const char *[]){"HSET", key, w->js.me, b.data}, NULL);
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
  if (w->drain_checks == 0 && w->drain_pending == 0 && w->js.running == 0 && w->claiming == 0 &&
      !w->ended) {
    w->js.stopping = 1;
    maybe_end(w);
  }
}

static void drain_check(ob_worker *w) {
  if (!w->o.drain || w->js.running || w->claiming || w->drain_checks || !ob_redis_is_up(w->js.cmd))
    return;
  w->drain_pending = 0;
  for (int i = 0; i < w->js.nstreams; i++)
    if (ob_redis_send(w->js.cmd, on_drain_pending, w, 3,
                      (const char *[]){"XPENDING", w->js.streams[i], OB_QUEUE_GROUP}, NULL) == OB_OK)
      w->drain_checks++;
}

static void on_tick(uv_timer_t *t) {
  ob_worker *w = t->data;
  if (w->ended || !ob_redis_is_up(w->js.cmd))
    return;
  keep_claims(w);
  announce(w);
  status(w);
  claim_dead(w);
  ob_wrec_flush(&w->js); /* the journals held since the last tick, as records */
  /* no drain check here: only a read that found nothing new may start one (from the
   * tick, one could run before the first read delivered what was queued, see no
   * entry pending, and end the worker with its jobs unread) */
}

/* --- connections ---------------------------------------------------------------------------- */

static void cmd_up(void *ud) {
  ob_worker *w = ud;
  if (w->ever_up)
    ob_wjob_say(&w->js, NULL, "connected to %s again", ob_redis_url(w->js.cmd));
  w->ever_up = 1;
  if (!w->groups_ready)
    create_groups(w);
  for (wjob *j = w->js.jobs; j; j = j->next) /* a result to store carries its journal whole */
    if (j->state != J_DONE && j->state != J_FINISH && ((j->d && ob_drun_journal(j->d)) || j->jbuf.len))
      ob_wjob_resync(j);
  ob_wjob_send_finishes(&w->js);
  ob_wrec_flush(&w->js);
  announce(w);
  read_more(w);
}

static void cmd_down(void *ud, const char *why) {
  ob_worker *w = ud;
  if (!w->ever_up) {
    snprintf(w->why, sizeof w->why, "cannot reach Redis at %s: %s", ob_redis_url(w->js.cmd), why);
    w->js.stopping = 1;
    maybe_end(w);
    return;
  }
  ob_wjob_say(&w->js, NULL, "lost Redis at %s (%s); reconnecting", ob_redis_url(w->js.cmd), why);
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
  w->js.stopping = 1;
  if (grace_ms && w->js.running) {
    uv_timer_start(&w->grace, on_grace, grace_ms, 0);
    return;
  }
  /* hand back what runs: cancelled, journal shipped, made claimable at once */
  for (wjob *j = w->js.jobs; j; j = j->next) {
    if (j->state == J_DONE || j->state == J_FINISH)
      continue;
    if (j->d) {
      ob_drun_cancel(j->d);
      ob_drun_close_journal(j->d, NULL); /* its last flush is APPENDed */
    }
    const char *argv[] = {"XCLAIM", j->stream, OB_QUEUE_GROUP, w->js.me, "0", j->entry,
                          "IDLE", "9999999999", "JUSTID"};
    ob_redis_send(w->js.cmd, ob_redis_ignore_reply, NULL, 9, argv, NULL);
    note(w, j->id, "handed back");
    j->handed_back = 1;
    ob_wjob_done(j);
  }
  maybe_end(w);
}

static void on_last_reply(void *ud, redisReply *rp, const char *why) {
  ob_worker *w = ud;
  (void)rp;
  (void)why;
  if (w->o.on_status) { /* once: on_last_reply ends the worker */
    ob_worker_status st = {.name = w->js.me, .ended = 1};
    w->o.on_status(w->o.note_ud, &st);
  }
  w->ended = 1;
  if (w->on_end)
    w->on_end(w->ud, w->why[0] ? w->why : NULL);
}

static void maybe_end(ob_worker *w) {
  if (w->ended || !w->js.stopping || w->js.running || w->claiming)
    return;
  if (w->reaping)
    return; /* after the reap */
  uv_timer_stop(&w->tick);
  uv_timer_stop(&w->grace);
  uv_timer_stop(&w->reread);
  ob_wrec_flush(&w->js); /* the journals held, as records, before the end */
  if (ob_redis_is_up(w->js.cmd)) { /* gone from the workers' list; ended once that answers */
    char *key = ob_queue_key(w->js.queue, "workers", NULL);
    int ok = ob_redis_send(w->js.cmd, on_last_reply, w, 3, (const char *[]){"HDEL", key, w->js.me},
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
  w->js.e = e;
  w->js.loop = e->loop;
  w->o = *o;
  w->on_end = on_end;
  w->ud = ud;
  if (!w->o.jobs)
    w->o.jobs = 1;
  if (!w->o.claim_idle_ms)
    w->o.claim_idle_ms = OB_QUEUE_CLAIM_IDLE_MS;
  if (!w->o.max_deliveries)
    w->o.max_deliveries = OB_QUEUE_MAX_DELIVERIES;
  w->js.host = (ob_wjob_host){host_say, host_schedule_reap, w};
  w->js.run = &w->o.run;
  w->js.max_deliveries = w->o.max_deliveries;
  w->js.keep_journals_s = !o->keep_journals_s ? OB_WORKER_KEEP_JOURNALS_S
                          : o->keep_journals_s == OB_WORKER_KEEP_NONE ? 0 : o->keep_journals_s;
  w->js.keep_results_s = !o->keep_results_s || o->keep_results_s == OB_WORKER_KEEP_NONE
                             ? OB_WORKER_KEEP_RESULTS_S : o->keep_results_s;
  w->js.queue = ob_xstrdup(o->queue ? o->queue : OB_QUEUE_DEFAULT);
  if (o->name) {
    w->js.me = ob_xstrdup(o->name);
  } else {
    char host[200] = "";
    gethostname(host, sizeof host - 1);
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s:%ld", host, (long)getpid());
    w->js.me = b.data;
  }
  w->js.plans_root = ob_xstrdup(o->plans_root ? o->plans_root : ".");
  if (!(w->js.root = ob_plans_root(w->js.plans_root, err)))
    goto fail;
  if (o->dir) {
    w->js.dir = ob_xstrdup(o->dir);
    if (mkdir(w->js.dir, 0700) != 0 && errno != EEXIST) {
      ob_error_set(err, OB_EIO, 0, "%s: cannot make the folder: %s", w->js.dir, strerror(errno));
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
    w->js.dir = b.data;
    w->own_dir = 1;
  }
  ob_value *files = ob_engine_tool_files(e);
  ob_queue_tools_id(files, w->tools_id);
  ob_value *names = ob_queue_tools_names(files);
  w->tools_json = ob_json_print(names, OB_JSON_COMPACT, NULL);
  ob_unref(names);
  ob_unref(files);
  w->js.streams[w->js.nstreams++] = ob_queue_key(w->js.queue, "jobs", w->tools_id);
  w->js.streams[w->js.nstreams++] = ob_queue_key(w->js.queue, "jobs", NULL);
  /* a key of the queue: on a Redis Cluster, both connections go to its slot's node */
  ob_redis_handlers hc = {cmd_up, cmd_down, w, w->js.streams[1]},
                    hr = {rd_up, rd_down, w, w->js.streams[1]};
  if (!(w->js.cmd = ob_redis_open(w->js.loop, o->redis, &hc, err)) ||
      !(w->rd = ob_redis_open(w->js.loop, o->redis, &hr, err)))
    goto fail;
  uv_timer_init(w->js.loop, &w->tick);
  uv_timer_init(w->js.loop, &w->reaper);
  uv_timer_init(w->js.loop, &w->grace);
  uv_timer_init(w->js.loop, &w->reread);
  w->tick.data = w->reaper.data = w->grace.data = w->reread.data = w;
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
  ob_redis_close(w->js.cmd);
  free(w->js.queue);
  free(w->js.me);
  free(w->js.plans_root);
  free(w->js.root);
  if (w->js.dir && w->own_dir)
    rmdir(w->js.dir);
  free(w->js.dir);
  for (int i = 0; i < w->js.nstreams; i++)
    free(w->js.streams[i]);
  free(w->tools_json);
  free(w);
  return NULL;
}

void ob_worker_get_stats(const ob_worker *w, ob_worker_stats *out) { *out = w->js.stats; }

const char *ob_worker_name(const ob_worker *w) { return w->js.me; }

void ob_worker_free(ob_worker *w) {
  if (!w)
    return;
  while (w->js.jobs) {
    wjob *j = w->js.jobs;
    w->js.jobs = j->next;
    ob_wjob_free(j);
  }
  ob_redis_close(w->js.cmd);
  ob_redis_close(w->rd);
  ob_wrec_free(&w->js); /* after the close: a flush still out comes back to it */
  if (w->timers_open) {
    uv_close((uv_handle_t *)&w->tick, NULL);
    uv_close((uv_handle_t *)&w->reaper, NULL);
    uv_close((uv_handle_t *)&w->grace, NULL);
    uv_close((uv_handle_t *)&w->reread, NULL);
    uv_run(w->js.loop, UV_RUN_NOWAIT); /* the handles above live in w */
  }
  for (size_t i = 0; i < PLAN_CACHE; i++) {
    ob_unref(w->js.cache[i].value);
    ob_unref(w->js.cache[i].text);
  }
  if (w->own_dir)
    rmdir(w->js.dir);
  free(w->js.dir);
  free(w->js.queue);
  free(w->js.me);
  free(w->js.plans_root);
  free(w->js.root);
  for (int i = 0; i < w->js.nstreams; i++)
    free(w->js.streams[i]);
  free(w->tools_json);
  free(w);
}

