/* ob_queue.c -- the client side of the job queue: names, submitting (the data and
 * its costs are described in ob_queue.h; waiting is ob_queue_wait.c).
 *
 * Submitting is two round trips whatever the batch: INCRBY of the id counter
 * (with the stream's group created, the plan texts stored and counted and, for a
 * batch, the batch counter INCRed in the same pipeline), then every job's HSET and
 * XADD pipelined (and the batch's record: its first and last ids, since one INCRBY
 * gave them all), and the callback once the last has answered. Nothing is queued
 * when a command of the first round fails. A connection lost halfway fails the
 * submission: the jobs already queued stay queued (and will run), but no id is
 * printed, so the submitter knows to look (status) before submitting again.
 *
 * A batch too big to hold at once is queued in parts (ob_queue_submit_opts): its ids
 * and batch id taken first in one round trip (ob_queue_reserve_start), then each part
 * submitted as above without the INCRBY, its first round storing and counting its own
 * jobs' plans; the first part writes the batch's record. Memory is then a part's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ob_hash.h"
#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "fleet/ob_queue.h"

#define REREAD_MS 10000

char *ob_queue_key(const char *q, const char *what, const char *id) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "ob:{%s}:%s%s%s", q, what, id ? ":" : "", id ? id : "");
  return b.data;
}

int ob_queue_name_ok(const char *q) {
  size_t n = strlen(q);
  if (!n || n > 64)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = q[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

void ob_queue_hash(const char *bytes, size_t len, char out[17]) {
  snprintf(out, 17, "%016" PRIx64, ob_fnv1a64(bytes, len));
}

uint64_t ob_queue_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A number in a worker's entry: an integer, or a string holding one; def otherwise. */
static long long entry_int(const ob_value *v, long long def) {
  if (v && ob_typeof(v) == OB_INT)
    return ob_int_value(v);
  if (v && ob_typeof(v) == OB_STRING && ob_string_len(v)) {
    char *end;
    long long n = strtoll(ob_string_ptr(v), &end, 10);
    if (!*end)
      return n;
  }
  return def;
}

int ob_queue_worker_live(const ob_value *info, uint64_t now) {
  if (!info || ob_typeof(info) != OB_OBJECT)
    return 0;
  long long seen = entry_int(ob_object_get(info, "seen", 4), 0);
  long long every = entry_int(ob_object_get(info, "every_ms", 8), 5000);
  uint64_t window = every > 0 && every * 3 > 1000 ? (uint64_t)every * 3 : 1000;
  return seen > 0 && (uint64_t)seen + window >= now;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static int by_name(const void *a, const void *b) {
  const ob_value *x = *(ob_value *const *)a, *y = *(ob_value *const *)b;
  ob_value *nx = ob_object_get(x, "name", 4), *ny = ob_object_get(y, "name", 4);
  return strcmp(ob_string_ptr(nx), ob_string_ptr(ny));
}

ob_value *ob_queue_tools_names(const ob_value *files) {
  size_t n = files ? ob_array_len(files) : 0;
  ob_value **items = ob_xmalloc((n + 1) * sizeof *items);
  for (size_t i = 0; i < n; i++) {
    const ob_value *f = ob_array_get(files, i);
    ob_value *file = ob_object_get(f, "file", 4), *hash = ob_object_get(f, "hash", 4),
             *size = ob_object_get(f, "size", 4);
    ob_value *o = ob_object();
    o = ob_object_set(o, "name", 4, ob_cstring(file ? base_name(ob_string_ptr(file)) : "?"));
    o = ob_object_set(o, "hash", 4, hash ? ob_ref(hash) : ob_null());
    o = ob_object_set(o, "size", 4, size ? ob_ref(size) : ob_null());
    items[i] = o;
  }
  qsort(items, n, sizeof *items, by_name);
  ob_value *list = ob_array();
  for (size_t i = 0; i < n; i++)
    list = ob_array_push(list, items[i]);
  free(items);
  return list;
}

void ob_queue_tools_id(const ob_value *files, char out[17]) {
  ob_value *names = ob_queue_tools_names(files);
  uint64_t h = ob_fnv1a64("tools", 5);
  for (size_t i = 0; i < ob_array_len(names); i++) {
    const ob_value *f = ob_array_get(names, i);
    const ob_value *name = ob_object_get(f, "name", 4), *hash = ob_object_get(f, "hash", 4);
    h = ob_fnv1a64_more(h, ob_string_ptr(name), ob_string_len(name) + 1);
    if (hash && ob_typeof(hash) == OB_STRING)
      h = ob_fnv1a64_more(h, ob_string_ptr(hash), ob_string_len(hash) + 1);
  }
  ob_unref(names);
  snprintf(out, 17, "%016" PRIx64, h);
}

/* --- submitting ------------------------------------------------------------------------- */

struct ob_queue_submit {
  ob_redis *r;
  char *q, *stream;
  const ob_queue_job *jobs;
  size_t n;
  char (*hashes)[17];
  char *tools_json;
  ob_queue_submit_cb cb;
  void *ud;
  size_t nparents;      /* jobs that are not parts: the ids they take */
  long long first;      /* the first of those ids: given, or what INCRBY gave */
  size_t waiting;       /* replies still to come in the current round */
  char *why;            /* the first failure */
  char **ids;
  long long batch_id;   /* > 0: the batch: given, or what INCR of batchseq gave */
  int record;           /* write the batch's record (first..batch_last) with the jobs */
  long long batch_last; /* given; else these jobs' last id */
};

static void submit_finish(ob_queue_submit *s) {
  char batch[32];
  snprintf(batch, sizeof batch, "%lld", s->batch_id);
  if (s->why)
    s->cb(s->ud, NULL, s->n, NULL, s->why);
  else
    s->cb(s->ud, s->ids, s->n, s->batch_id > 0 ? batch : NULL, NULL);
  for (size_t i = 0; s->ids && i < s->n; i++)
    free(s->ids[i]);
  free(s->ids);
  free(s->hashes);
  free(s->tools_json);
  free(s->q);
  free(s->stream);
  free(s->why);
  free(s);
}

static void submit_note(ob_queue_submit *s, redisReply *rp, const char *why, int busy_ok) {
  if (s->why)
    return;
  if (!rp)
    s->why = ob_xstrdup(why);
  else if (rp->type == REDIS_REPLY_ERROR && !(busy_ok && !strncmp(rp->str, "BUSYGROUP", 9)))
    s->why = ob_xstrdup(rp->str);
}

static void on_job_queued(void *ud, redisReply *rp, const char *why) {
  ob_queue_submit *s = ud;
  submit_note(s, rp, why, 0);
  if (--s->waiting == 0)
    submit_finish(s);
}

static void queue_jobs(ob_queue_submit *s) {
  long long first = s->first;
  s->ids = ob_xcalloc(s->n, sizeof *s->ids);
  /* a part's id is its parent's with .k */
  long long next = first;
  for (size_t i = 0; i < s->n; i++) {
    const ob_queue_job *j = &s->jobs[i];
    char buf[64];
    if (j->parent >= 0) {
      size_t k = 1;
      for (size_t m = (size_t)j->parent + 1; m < i; m++)
        k += s->jobs[m].parent == j->parent;
      snprintf(buf, sizeof buf, "%s.%zu", s->ids[j->parent], k);
    } else {
      snprintf(buf, sizeof buf, "%lld", next++);
    }
    s->ids[i] = ob_xstrdup(buf);
  }
  char now[32];
  snprintf(now, sizeof now, "%" PRIu64, ob_queue_now_ms());
  char bid[32];
  snprintf(bid, sizeof bid, "%lld", s->batch_id);
  if (s->batch_id > 0) {
    char *bk = ob_queue_key(s->q, "batch", bid);
    if (s->record) { /* one record, whatever the batch's size: its ids are first..last */
      char from[32], to[32], count[32];
      long long last = s->batch_last > 0 ? s->batch_last : next - 1;
      snprintf(from, sizeof from, "%lld", first);
      snprintf(to, sizeof to, "%lld", last);
      snprintf(count, sizeof count, "%lld", last - first + 1);
      const char *argv[] = {"HSET", bk, "first", from, "last", to, "count", count,
                            "submitted", now, "name", s->n ? s->jobs[0].name : ""};
      if (ob_redis_send(s->r, on_job_queued, s, 12, argv, NULL) == OB_OK)
        s->waiting++;
    }
    /* its jobs left to end: these entries' (the parts, not a sharded job's whole),
       counted before they are queued; kept until the last has ended (a part of the batch
       queued after it may have ended them all) */
    size_t entries = 0;
    for (size_t i = 0; i < s->n; i++)
      entries += !s->jobs[i].nparts;
    char left[32];
    snprintf(left, sizeof left, "%zu", entries);
    if (ob_redis_send(s->r, on_job_queued, s, 4, (const char *[]){"HINCRBY", bk, "left", left},
                      NULL) == OB_OK)
      s->waiting++;
    if (ob_redis_send(s->r, on_job_queued, s, 2, (const char *[]){"PERSIST", bk}, NULL) == OB_OK)
      s->waiting++;
    free(bk);
  }
  for (size_t i = 0; i < s->n; i++) {
    const ob_queue_job *j = &s->jobs[i];
    char *jk = ob_queue_key(s->q, "job", s->ids[i]);
    if (j->nparts) { /* a sharded job: runs nothing, its parts do */
      char parts[32];
      snprintf(parts, sizeof parts, "%zu", j->nparts);
      char *inst = ob_json_print(j->instances, OB_JSON_COMPACT, NULL);
      const char *argv[] = {"HSET", jk, "state", "sharded", "submitted", now, "parts", parts,
                            "instances", inst, "name", j->name};
      if (ob_redis_send(s->r, on_job_queued, s, 12, argv, NULL) == OB_OK)
        s->waiting++;
      free(inst);
      free(jk);
      continue;
    }
    const char *hargv[] = {"HSET", jk, "state", "queued", "submitted", now, "stream", s->stream,
                           "name", j->name, "plan", s->hashes[i]};
    if (ob_redis_send(s->r, on_job_queued, s, 12, hargv, NULL) == OB_OK)
      s->waiting++;
    char *inputs = j->inputs ? ob_json_print(j->inputs, OB_JSON_COMPACT, NULL) : NULL;
    const char *xargv[14] = {"XADD", s->stream, "*", "job", s->ids[i], "plan", s->hashes[i],
                             "name", j->name};
    int xc = 9;
    if (s->batch_id > 0) {
      xargv[xc++] = "batch";
      xargv[xc++] = bid;
    }
    if (inputs) {
      xargv[xc++] = "inputs";
      xargv[xc++] = inputs;
    }
    if (ob_redis_send(s->r, on_job_queued, s, xc, xargv, NULL) == OB_OK)
      s->waiting++;
    free(inputs);
    free(jk);
  }
  if (s->waiting == 0) {
    if (!s->why)
      s->why = ob_xstrdup("the connection was lost");
    submit_finish(s);
  }
}

/* One reply of the first round (the stream, the plans, the ids) in: when it was the
   last, the jobs are queued, unless something failed (then nothing is). */
static void prepared(ob_queue_submit *s) {
  if (--s->waiting)
    return;
  if (s->why || s->n == 0)
    submit_finish(s);
  else
    queue_jobs(s);
}

static void on_ids(void *ud, redisReply *rp, const char *why) {
  ob_queue_submit *s = ud;
  submit_note(s, rp, why, 0);
  long long last = ob_redis_int(rp, -1);
  if (!s->why && last < (long long)s->nparents)
    s->why = ob_xstrdup("the id counter is not a positive number");
  s->first = last - (long long)s->nparents + 1;
  prepared(s);
}

static void on_batch_id(void *ud, redisReply *rp, const char *why) {
  ob_queue_submit *s = ud;
  submit_note(s, rp, why, 0);
  s->batch_id = ob_redis_int(rp, -1);
  if (!s->why && s->batch_id < 1)
    s->why = ob_xstrdup("the batch counter is not a number");
  prepared(s);
}

static void on_prepared(void *ud, redisReply *rp, const char *why) {
  ob_queue_submit *s = ud;
  submit_note(s, rp, why, 1);
  prepared(s);
}

static void send_prepare(ob_queue_submit *s, int argc, const char **argv, const size_t *lens,
                         ob_redis_cb cb) {
  if (ob_redis_send(s->r, cb, s, argc, argv, lens) == OB_OK)
    s->waiting++;
  else if (!s->why)
    s->why = ob_xstrdup("the connection was lost");
}

int ob_queue_submit_with(ob_redis *r, const char *q, const ob_queue_job *jobs, size_t n,
                         const ob_queue_submit_opts *o, ob_queue_submit_cb cb, void *ud) {
  if (!ob_redis_is_up(r))
    return OB_EIO;
  ob_queue_submit *s = ob_xcalloc(1, sizeof *s);
  s->r = r;
  s->q = ob_xstrdup(q);
  s->stream = o->tools_id ? ob_queue_key(q, "jobs", o->tools_id) : ob_queue_key(q, "jobs", NULL);
  s->jobs = jobs;
  s->n = n;
  s->cb = cb;
  s->ud = ud;
  s->tools_json = o->tools ? ob_json_print(o->tools, OB_JSON_COMPACT, NULL) : NULL;
  s->hashes = ob_xcalloc(n ? n : 1, sizeof *s->hashes);
  /* the first round: every command of it answered before any job is queued, so that a
     failure in it (a lost connection, a key of the wrong type) queues none */
  const char *group[] = {"XGROUP", "CREATE", s->stream, OB_QUEUE_GROUP, "0", "MKSTREAM"};
  send_prepare(s, 6, group, NULL, on_prepared);
  char *streams = ob_queue_key(q, "streams", NULL);
  send_prepare(s, 3, (const char *[]){"SADD", streams, s->stream}, NULL, on_prepared);
  free(streams);
  if (o->tools_id && s->tools_json) { /* what status names when no worker has these files */
    char *sets = ob_queue_key(q, "toolsets", NULL);
    send_prepare(s, 4, (const char *[]){"HSET", sets, o->tools_id, s->tools_json}, NULL,
                 on_prepared);
    free(sets);
  }
  ob_map refs; /* plan hash -> how many of these jobs run it (as a pointer-sized count) */
  ob_map_init(&refs);
  for (size_t i = 0; i < n; i++) {
    if (jobs[i].parent < 0)
      s->nparents++;
    if (jobs[i].nparts)
      continue;
    ob_queue_hash(jobs[i].plan_text, jobs[i].plan_len, s->hashes[i]);
    uintptr_t had = (uintptr_t)ob_map_get(&refs, s->hashes[i], 16);
    ob_map_put(&refs, s->hashes[i], 16, (void *)(had + 1));
  }
  /* each plan: its references counted first, then its text stored and kept (PERSIST undoes
     the expiry that the last job of an earlier submission set); in that order a worker
     that ends the plan's last earlier job between them cannot leave it expiring. A batch
     queued in parts counts each part's jobs as it is queued, so the count never falls
     short of the jobs queued (and reaches the batch's once its last part is) */
  char *refs_key = ob_queue_key(q, "planrefs", NULL);
  ob_map_entry *me;
  for (size_t it = 0, i = 0; ob_map_next(&refs, &it, &me);) {
    while (jobs[i].nparts || strcmp(s->hashes[i], me->key))
      i++; /* the first job of this plan: its text */
    char count[32];
    snprintf(count, sizeof count, "%zu", (size_t)(uintptr_t)me->val);
    char *pk = ob_queue_key(q, "plan", s->hashes[i]);
    const char *argv[] = {"SET", pk, jobs[i].plan_text, "NX"};
    size_t lens[] = {3, strlen(pk), jobs[i].plan_len, 2};
    send_prepare(s, 4, (const char *[]){"HINCRBY", refs_key, me->key, count}, NULL, on_prepared);
    send_prepare(s, 4, argv, lens, on_prepared);
    send_prepare(s, 2, (const char *[]){"PERSIST", pk}, NULL, on_prepared);
    free(pk);
  }
  free(refs_key);
  ob_map_free(&refs);
  if (o->first > 0) { /* the ids taken ahead (ob_queue_reserve_start) */
    s->first = o->first;
    s->batch_id = o->batch_id;
    s->batch_last = o->batch_last;
    s->record = o->batch_id > 0 && o->batch_last >= o->first; /* the first part only */
  } else {
    s->record = o->batch && s->nparents > 0; /* no record of an empty batch */
    if (s->record) { /* its id taken with the jobs' */
      char *bseq = ob_queue_key(q, "batchseq", NULL);
      send_prepare(s, 2, (const char *[]){"INCR", bseq}, NULL, on_batch_id);
      free(bseq);
    }
    if (s->nparents) {
      char count[32];
      snprintf(count, sizeof count, "%zu", s->nparents);
      char *seq = ob_queue_key(q, "seq", NULL);
      send_prepare(s, 3, (const char *[]){"INCRBY", seq, count}, NULL, on_ids);
      free(seq);
    }
  }
  if (s->waiting == 0) { /* nothing was sent: the connection went down */
    free(s->hashes);
    free(s->tools_json);
    free(s->q);
    free(s->stream);
    free(s->why);
    free(s);
    return OB_EIO;
  }
  return OB_OK;
}

int ob_queue_submit_start(ob_redis *r, const char *q, const ob_queue_job *jobs, size_t n,
                          const char *tools_id, const ob_value *tools, int batch,
                          ob_queue_submit_cb cb, void *ud) {
  ob_queue_submit_opts o = {.tools_id = tools_id, .tools = tools, .batch = batch};
  return ob_queue_submit_with(r, q, jobs, n, &o, cb, ud);
}

/* --- ids taken ahead ---------------------------------------------------------------------- */

typedef struct reserve {
  ob_queue_reserve_cb cb;
  void *ud;
  size_t count, waiting;
  int batch;
  long long last, batch_id;
  char *why;
} reserve;

static void on_reserved(reserve *v, redisReply *rp, const char *why, long long *into) {
  if (!v->why && !rp)
    v->why = ob_xstrdup(why);
  else if (!v->why && rp->type == REDIS_REPLY_ERROR)
    v->why = ob_xstrdup(rp->str);
  else if (!v->why)
    *into = ob_redis_int(rp, -1);
  if (--v->waiting)
    return;
  if (!v->why && v->last < (long long)v->count)
    v->why = ob_xstrdup("the id counter is not a positive number");
  if (!v->why && v->batch && v->batch_id < 1)
    v->why = ob_xstrdup("the batch counter is not a number");
  if (v->why)
    v->cb(v->ud, 0, 0, v->why);
  else
    v->cb(v->ud, v->last - (long long)v->count + 1, v->batch_id, NULL);
  free(v->why);
  free(v);
}

static void on_reserved_ids(void *ud, redisReply *rp, const char *why) {
  reserve *v = ud;
  on_reserved(v, rp, why, &v->last);
}

static void on_reserved_batch(void *ud, redisReply *rp, const char *why) {
  reserve *v = ud;
  on_reserved(v, rp, why, &v->batch_id);
}

int ob_queue_reserve_start(ob_redis *r, const char *q, size_t count, int batch,
                           ob_queue_reserve_cb cb, void *ud) {
  if (!count || !ob_redis_is_up(r))
    return OB_EIO;
  reserve *v = ob_xcalloc(1, sizeof *v);
  *v = (reserve){.cb = cb, .ud = ud, .count = count, .batch = batch != 0, .last = -1};
  v->waiting = 1 + (size_t)v->batch; /* counted before either is sent: no early end */
  char n[32];
  snprintf(n, sizeof n, "%zu", count);
  char *seq = ob_queue_key(q, "seq", NULL), *bseq = ob_queue_key(q, "batchseq", NULL);
  int sent_batch = batch && ob_redis_send(r, on_reserved_batch, v, 2,
                                          (const char *[]){"INCR", bseq}, NULL) == OB_OK;
  int sent_ids = (sent_batch || !batch) &&
                 ob_redis_send(r, on_reserved_ids, v, 3, (const char *[]){"INCRBY", seq, n},
                               NULL) == OB_OK;
  free(seq);
  free(bseq);
  if (!sent_batch && !sent_ids) {
    free(v);
    return OB_EIO;
  }
  if (!sent_ids) { /* the INCR's reply ends it, with the failure */
    v->why = ob_xstrdup("the connection was lost");
    v->waiting--;
  }
  return OB_OK;
}
