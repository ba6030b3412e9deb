/* ob_queue.c -- the client side of the job queue: names, submitting, waiting
 * (the data and its costs are described in ob_queue.h).
 *
 * Submitting is two round trips whatever the batch: INCRBY of the id counter
 * (with the stream's group created and the plan texts stored in the same
 * pipeline), then every job's HSET and XADD pipelined, and the callback once
 * the last has answered. A connection lost halfway fails the submission: the
 * jobs already queued stay queued (and will run), but no id is printed, so the
 * submitter knows to look (status) before submitting again.
 *
 * Waiting reads the stream of finished jobs with blocking XREADs from the entry
 * that was last when the wait began, so a job that finishes between the first
 * look at its state and the first read is not missed; each read that names one
 * of ours is followed by an HMGET of its result. A read that blocks for
 * REREAD_MS without news is followed by a look at every job still awaited (the
 * done stream is trimmed: an entry trimmed before it was read would otherwise
 * be missed), so a wait is never stuck, and costs one command a job every
 * REREAD_MS at worst. A sharded job's parts are awaited each, and its result
 * is their outputs merged, its exit the worst of theirs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ob_hash.h"
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
  size_t nparents; /* jobs that are not parts: the ids INCRBY gave */
  size_t waiting; /* replies still to come in the current round */
  char *why;      /* the first failure */
  char **ids;
};

static void submit_finish(ob_queue_submit *s) {
  if (s->why)
    s->cb(s->ud, NULL, s->n, s->why);
  else
    s->cb(s->ud, s->ids, s->n, NULL);
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

static void queue_jobs(ob_queue_submit *s, long long last) {
  long long first = last - (long long)s->nparents + 1;
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
    const char *hargv[14] = {"HSET", jk, "state", "queued", "submitted", now, "stream", s->stream,
                             "name", j->name, "plan", s->hashes[i]};
    int hc = 12;
    if (s->tools_json) {
      hargv[hc++] = "tools";
      hargv[hc++] = s->tools_json;
    }
    if (ob_redis_send(s->r, on_job_queued, s, hc, hargv, NULL) == OB_OK)
      s->waiting++;
    char *inputs = j->inputs ? ob_json_print(j->inputs, OB_JSON_COMPACT, NULL) : NULL;
    const char *xargv[12] = {"XADD", s->stream, "*", "job", s->ids[i], "plan", s->hashes[i],
                             "name", j->name};
    int xc = 9;
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

static void on_ids(void *ud, redisReply *rp, const char *why) {
  ob_queue_submit *s = ud;
  submit_note(s, rp, why, 0);
  long long last = ob_redis_int(rp, -1);
  s->waiting--;
  if (!s->why && last > 0) {
    if (s->waiting) { /* should not be: INCRBY is sent last */
      s->why = ob_xstrdup("replies out of order");
    } else {
      queue_jobs(s, last);
      return;
    }
  }
  if (s->waiting == 0)
    submit_finish(s);
}

static void on_prepared(void *ud, redisReply *rp, const char *why) {
  ob_queue_submit *s = ud;
  submit_note(s, rp, why, 1);
  if (--s->waiting == 0)
    submit_finish(s); /* INCRBY was never sent */
}

int ob_queue_submit_start(ob_redis *r, const char *q, const ob_queue_job *jobs, size_t n,
                          const char *tools_id, const ob_value *tools, ob_queue_submit_cb cb,
                          void *ud) {
  if (!ob_redis_is_up(r))
    return OB_EIO;
  ob_queue_submit *s = ob_xcalloc(1, sizeof *s);
  s->r = r;
  s->q = ob_xstrdup(q);
  s->stream = tools_id ? ob_queue_key(q, "jobs", tools_id) : ob_queue_key(q, "jobs", NULL);
  s->jobs = jobs;
  s->n = n;
  s->cb = cb;
  s->ud = ud;
  s->tools_json = tools ? ob_json_print(tools, OB_JSON_COMPACT, NULL) : NULL;
  s->hashes = ob_xcalloc(n ? n : 1, sizeof *s->hashes);
  const char *group[] = {"XGROUP", "CREATE", s->stream, OB_QUEUE_GROUP, "0", "MKSTREAM"};
  if (ob_redis_send(r, on_prepared, s, 6, group, NULL) == OB_OK)
    s->waiting++;
  char *streams = ob_queue_key(q, "streams", NULL);
  if (ob_redis_send(r, on_prepared, s, 3, (const char *[]){"SADD", streams, s->stream}, NULL) ==
      OB_OK)
    s->waiting++;
  free(streams);
  if (tools_id && s->tools_json) { /* what status names when no worker has these files */
    char *sets = ob_queue_key(q, "toolsets", NULL);
    if (ob_redis_send(r, on_prepared, s, 4, (const char *[]){"HSET", sets, tools_id, s->tools_json},
                      NULL) == OB_OK)
      s->waiting++;
    free(sets);
  }
  size_t njobs = 0;
  for (size_t i = 0; i < n; i++) {
    if (jobs[i].parent < 0)
      njobs++;
    if (jobs[i].nparts)
      continue;
    ob_queue_hash(jobs[i].plan_text, jobs[i].plan_len, s->hashes[i]);
    int seen = 0;
    for (size_t k = 0; k < i && !seen; k++)
      seen = !jobs[k].nparts && !strcmp(s->hashes[k], s->hashes[i]);
    if (seen)
      continue;
    char *pk = ob_queue_key(q, "plan", s->hashes[i]);
    const char *argv[] = {"SET", pk, jobs[i].plan_text, "NX"};
    size_t lens[] = {3, strlen(pk), jobs[i].plan_len, 2};
    if (ob_redis_send(r, on_prepared, s, 4, argv, lens) == OB_OK)
      s->waiting++;
    free(pk);
  }
  char count[32];
  s->nparents = njobs;
  snprintf(count, sizeof count, "%zu", njobs);
  char *seq = ob_queue_key(q, "seq", NULL);
  int rc = ob_redis_send(r, on_ids, s, 3, (const char *[]){"INCRBY", seq, count}, NULL);
  free(seq);
  if (rc == OB_OK) {
    s->waiting++;
  } else if (s->waiting == 0) {
    free(s->hashes);
    free(s->tools_json);
    free(s->q);
    free(s->stream);
    free(s);
    return OB_EIO;
  } else if (!s->why) {
    s->why = ob_xstrdup("the connection was lost");
  }
  return OB_OK;
}

/* --- waiting ------------------------------------------------------------------------------ */

typedef struct part {
  char *id;
  int known, finished; /* its state read; finished */
  int exit;
  char *output, *error, *state;
} part;

typedef struct slot {
  char *id;
  part *parts; /* one for a plain job; a sharded job's parts */
  size_t nparts;
  int sharded; /* parts are the job's parts, not the job itself */
  int resolved; /* a plain job, or a sharded one whose parts are known */
  int missing;  /* no such job */
} slot;

struct ob_queue_wait {
  ob_redis *r;
  char *q, *done_key;
  slot *slots;
  size_t n, emitted;
  uint64_t deadline; /* ms since the epoch; 0: none */
  char last[64];     /* the done stream's last entry read */
  ob_queue_result_cb on_result;
  ob_queue_wait_done_cb on_done;
  void *ud;
  size_t outstanding; /* commands whose replies are awaited */
  unsigned epoch;     /* bumped at each restart: replies of an older epoch are ignored */
  int reading, ended, freed_in_cb, in_cb;
  uv_timer_t *timer;  /* the deadline while the connection is down */
};

typedef struct wreq {
  ob_queue_wait *w;
  unsigned epoch;
  size_t slot, part; /* which part an HMGET is for */
} wreq;

static void wait_read(ob_queue_wait *w);
static void wait_end(ob_queue_wait *w, const char *why);

static wreq *new_req(ob_queue_wait *w, size_t s, size_t p) {
  wreq *q = ob_xmalloc(sizeof *q);
  *q = (wreq){w, w->epoch, s, p};
  return q;
}

/* Emits the finished prefix, in order. */
static void emit_ready(ob_queue_wait *w, int all) {
  while (w->emitted < w->n && !w->ended) {
    slot *s = &w->slots[w->emitted];
    int done = s->missing || (s->resolved && s->nparts > 0);
    for (size_t k = 0; done && !s->missing && k < s->nparts; k++)
      done = s->parts[k].finished;
    if (!done && !all)
      return;
    ob_queue_result res = {.job = s->id, .exit = -1, .output = "null"};
    char *merged = NULL;
    if (s->missing) {
      res.state = NULL;
    } else if (!s->sharded) {
      part *p = &s->parts[0];
      res.state = p->state ? p->state : "queued";
      if (p->finished) {
        res.exit = p->exit;
        res.output = p->output ? p->output : "null";
        res.error = p->error;
      }
    } else {
      /* the parts' outputs (objects: instance id -> output) merged into one */
      ob_value *out = ob_object();
      int worst = 0, finished = 1;
      for (size_t k = 0; k < s->nparts; k++) {
        part *p = &s->parts[k];
        if (!p->finished) {
          finished = 0;
          continue;
        }
        if (p->exit > worst)
          worst = p->exit;
        if (p->error && !res.error)
          res.error = p->error;
        ob_value *o = p->output ? ob_json_parse(p->output, strlen(p->output), NULL) : NULL;
        if (o && ob_typeof(o) == OB_OBJECT) {
          ob_object_iter it;
          ob_value *key, *val;
          ob_object_iter_init(&it, o);
          while (ob_object_iter_next(&it, &key, &val))
            out = ob_object_setv(out, key, ob_ref(val));
        }
        ob_unref(o);
      }
      res.state = finished ? (worst ? "failed" : "done") : "running";
      if (finished) {
        res.exit = worst;
        merged = ob_json_print(out, OB_JSON_COMPACT, NULL);
        res.output = merged;
      }
      ob_unref(out);
    }
    w->emitted++;
    w->in_cb++;
    w->on_result(w->ud, w->emitted - 1, &res);
    w->in_cb--;
    free(merged);
  }
}

static int all_finished(const ob_queue_wait *w) { return w->emitted == w->n; }

static void free_part(part *p) {
  free(p->id);
  free(p->output);
  free(p->error);
  free(p->state);
}

static void take_state(part *p, redisReply *rp) {
  /* HMGET state exit output error */
  if (rp->type != REDIS_REPLY_ARRAY || rp->elements < 4)
    return;
  const char *state = ob_redis_str(rp->element[0]);
  p->known = 1;
  free(p->state);
  p->state = state ? ob_xstrdup(state) : NULL;
  if (state && (!strcmp(state, "done") || !strcmp(state, "failed"))) {
    p->finished = 1;
    /* what a worker stored, or anyone with access to Redis: checked before it is
     * printed as a result (an exit of 0 to 2, the output JSON) */
    long long ex = ob_redis_int(rp->element[1], 1);
    p->exit = ex >= 0 && ex <= 2 ? (int)ex : 1;
    const char *out = ob_redis_str(rp->element[2]), *err = ob_redis_str(rp->element[3]);
    free(p->output);
    free(p->error);
    p->output = NULL;
    p->error = err ? ob_xstrdup(err) : NULL;
    ob_value *v = out ? ob_json_parse(out, rp->element[2]->len, NULL) : NULL;
    if (v) {
      p->output = ob_xstrdup(out);
    } else if (out && !p->error) {
      p->exit = p->exit ? p->exit : 1;
      p->error = ob_xstrdup("the job's stored output is not JSON");
    }
    ob_unref(v);
  }
}

/* A job whose hash cannot be right (a sharded job of no or too many parts): failed, with why. */
static void broken(part *p, const char *why) {
  p->known = p->finished = 1;
  p->exit = 2;
  free(p->state);
  free(p->output);
  free(p->error);
  p->state = ob_xstrdup("failed");
  p->output = NULL;
  p->error = ob_xstrdup(why);
}

/* A reply of this wait: NULL when it is stale or the connection went (the
 * restart on reconnection takes over). */
static ob_queue_wait *reply_of(wreq *q, redisReply *rp) {
  ob_queue_wait *w = q->w;
  w->outstanding--;
  if (w->ended || q->epoch != w->epoch || !rp)
    return NULL;
  return w;
}

static void maybe_free(ob_queue_wait *w) {
  if (w->ended && w->outstanding == 0 && w->freed_in_cb) {
    for (size_t i = 0; i < w->n; i++) {
      for (size_t k = 0; k < w->slots[i].nparts; k++)
        free_part(&w->slots[i].parts[k]);
      free(w->slots[i].parts);
      free(w->slots[i].id);
    }
    free(w->slots);
    free(w->q);
    free(w->done_key);
    free(w);
  }
}

static void after_reply(ob_queue_wait *w) {
  if (w->ended || w->outstanding)
    return;
  emit_ready(w, 0);
  if (w->ended)
    return;
  if (all_finished(w)) {
    wait_end(w, NULL);
    return;
  }
  wait_read(w);
}

static void on_part_state(void *ud, redisReply *rp, const char *why) {
  wreq *q = ud;
  ob_queue_wait *w = reply_of(q, rp);
  (void)why;
  if (w && rp->type != REDIS_REPLY_ERROR)
    take_state(&w->slots[q->slot].parts[q->part], rp);
  else if (w) /* not a hash (WRONGTYPE): it will never finish */
    broken(&w->slots[q->slot].parts[q->part], "the job's record in Redis is broken: it is not a hash");
  ob_queue_wait *ow = q->w;
  free(q);
  if (w)
    after_reply(w);
  else
    maybe_free(ow);
}

static void ask_part(ob_queue_wait *w, size_t s, size_t p) {
  char *k = ob_queue_key(w->q, "job", w->slots[s].parts[p].id);
  wreq *q = new_req(w, s, p);
  if (ob_redis_send(w->r, on_part_state, q, 6,
                    (const char *[]){"HMGET", k, "state", "exit", "output", "error"},
                    NULL) == OB_OK)
    w->outstanding++;
  else
    free(q);
  free(k);
}

/* The job's own hash: its state, or that it is sharded (then its parts are asked). */
static void on_job_state(void *ud, redisReply *rp, const char *why) {
  wreq *q = ud;
  ob_queue_wait *w = reply_of(q, rp);
  (void)why;
  if (w && rp->type == REDIS_REPLY_ERROR) { /* not a hash (WRONGTYPE): it will never finish */
    w->slots[q->slot].resolved = 1;
    broken(&w->slots[q->slot].parts[0], "the job's record in Redis is broken: it is not a hash");
  } else if (w && rp->type == REDIS_REPLY_ARRAY && rp->elements == 5) {
    slot *s = &w->slots[q->slot];
    const char *state = ob_redis_str(rp->element[0]);
    if (!state) {
      s->missing = 1;
    } else if (!strcmp(state, "sharded") &&
               (ob_redis_int(rp->element[4], 0) < 1 ||
                ob_redis_int(rp->element[4], 0) > OB_QUEUE_PARTS_MAX)) {
      s->resolved = 1;
      broken(&s->parts[0], "the job's record in Redis is broken: a sharded job whose \"parts\" "
                           "is not a count of 1 to " OB_QUEUE_STR(OB_QUEUE_PARTS_MAX));
    } else if (!strcmp(state, "sharded")) {
      long long n = ob_redis_int(rp->element[4], 0);
      s->sharded = 1;
      s->resolved = 1;
      free_part(&s->parts[0]);
      free(s->parts);
      s->nparts = n > 0 ? (size_t)n : 0;
      s->parts = ob_xcalloc(s->nparts ? s->nparts : 1, sizeof *s->parts);
      for (size_t k = 0; k < s->nparts; k++) {
        char buf[96];
        snprintf(buf, sizeof buf, "%s.%zu", s->id, k + 1);
        s->parts[k].id = ob_xstrdup(buf);
        ask_part(w, q->slot, k);
      }
    } else {
      s->resolved = 1;
      take_state(&s->parts[0], rp);
    }
  }
  ob_queue_wait *ow = q->w;
  free(q);
  if (w)
    after_reply(w);
  else
    maybe_free(ow);
}

/* Looks at every job not finished: its hash (or its parts'). */
static void look_all(ob_queue_wait *w) {
  for (size_t i = w->emitted; i < w->n; i++) {
    slot *s = &w->slots[i];
    if (s->missing)
      continue;
    if (!s->resolved) {
      char *k = ob_queue_key(w->q, "job", s->id);
      wreq *q = new_req(w, i, 0);
      if (ob_redis_send(w->r, on_job_state, q, 7,
                        (const char *[]){"HMGET", k, "state", "exit", "output", "error", "parts"},
                        NULL) == OB_OK)
        w->outstanding++;
      else
        free(q);
      free(k);
      continue;
    }
    for (size_t k = 0; k < s->nparts; k++)
      if (!s->parts[k].finished)
        ask_part(w, i, k);
  }
}

/* The same for a reply that needs nothing of its request: the request freed, and the
 * wait too when it was freed meanwhile. */
static ob_queue_wait *take_reply(wreq *q, redisReply *rp) {
  ob_queue_wait *w = reply_of(q, rp), *ow = q->w;
  free(q);
  if (!w)
    maybe_free(ow);
  return w;
}

static void on_read(void *ud, redisReply *rp, const char *why) {
  ob_queue_wait *w = take_reply(ud, rp);
  (void)why;
  if (!w)
    return;
  w->reading = 0;
  if (rp->type == REDIS_REPLY_ERROR) {
    wait_end(w, rp->str);
    return;
  }
  if (rp->type == REDIS_REPLY_NIL) { /* blocked for REREAD_MS, or the deadline */
    if (w->deadline && ob_queue_now_ms() >= w->deadline) {
      wait_end(w, "timeout");
      return;
    }
    look_all(w);
    if (!w->outstanding)
      after_reply(w);
    return;
  }
  /* [[stream, [[id, [field, value, ...]], ...]]] */
  if (rp->type == REDIS_REPLY_ARRAY && rp->elements && rp->element[0]->elements == 2) {
    redisReply *entries = rp->element[0]->element[1];
    for (size_t e = 0; e < entries->elements; e++) {
      redisReply *en = entries->element[e];
      if (en->elements != 2)
        continue;
      snprintf(w->last, sizeof w->last, "%s", en->element[0]->str);
      redisReply *f = en->element[1];
      for (size_t k = 0; k + 1 < f->elements; k += 2) {
        if (strcmp(f->element[k]->str, "job"))
          continue;
        const char *job = f->element[k + 1]->str;
        for (size_t i = w->emitted; i < w->n; i++)
          for (size_t p = 0; p < w->slots[i].nparts; p++)
            if (!w->slots[i].parts[p].finished && w->slots[i].resolved &&
                !strcmp(w->slots[i].parts[p].id, job))
              ask_part(w, i, p);
      }
    }
  }
  if (!w->outstanding)
    after_reply(w);
}

static void wait_read(ob_queue_wait *w) {
  if (w->reading || w->ended)
    return;
  uint64_t block = REREAD_MS;
  if (w->deadline) {
    uint64_t now = ob_queue_now_ms();
    if (now >= w->deadline) {
      wait_end(w, "timeout");
      return;
    }
    if (w->deadline - now < block)
      block = w->deadline - now;
  }
  char ms[32];
  snprintf(ms, sizeof ms, "%" PRIu64, block ? block : 1);
  wreq *q = new_req(w, 0, 0);
  if (ob_redis_send(w->r, on_read, q, 8,
                    (const char *[]){"XREAD", "COUNT", "1000", "BLOCK", ms, "STREAMS", w->done_key,
                                     w->last},
                    NULL) == OB_OK) {
    w->outstanding++;
    w->reading = 1;
  } else {
    free(q); /* down: the reconnection restarts the wait */
  }
}

static void on_last(void *ud, redisReply *rp, const char *why) {
  ob_queue_wait *w = take_reply(ud, rp);
  (void)why;
  if (!w)
    return;
  /* XREVRANGE done + - COUNT 1: [[id, fields]] or [] */
  if (rp->type == REDIS_REPLY_ARRAY && rp->elements == 1 && rp->element[0]->elements == 2)
    snprintf(w->last, sizeof w->last, "%s", rp->element[0]->element[0]->str);
  look_all(w);
  if (!w->outstanding)
    after_reply(w);
}

static void wait_restart(ob_queue_wait *w) {
  w->epoch++;
  w->reading = 0;
  wreq *q = new_req(w, 0, 0);
  if (ob_redis_send(w->r, on_last, q, 6,
                    (const char *[]){"XREVRANGE", w->done_key, "+", "-", "COUNT", "1"},
                    NULL) == OB_OK)
    w->outstanding++;
  else
    free(q);
}

static void on_deadline(uv_timer_t *t) {
  ob_queue_wait *w = t->data;
  wait_end(w, "timeout");
}

static void close_timer(uv_handle_t *h) { free(h); }

static void wait_end(ob_queue_wait *w, const char *why) {
  if (w->ended)
    return;
  if (why) /* what is known so far, in order, the rest as not finished */
    emit_ready(w, 1);
  w->ended = 1;
  if (w->timer) {
    uv_close((uv_handle_t *)w->timer, close_timer);
    w->timer = NULL;
  }
  w->in_cb++;
  w->on_done(w->ud, why);
  w->in_cb--;
  maybe_free(w);
}

ob_queue_wait *ob_queue_wait_start(ob_redis *r, const char *q, const char *const *ids, size_t n,
                                   uint64_t timeout_ms, ob_queue_result_cb on_result,
                                   ob_queue_wait_done_cb on_done, void *ud) {
  ob_queue_wait *w = ob_xcalloc(1, sizeof *w);
  w->r = r;
  w->q = ob_xstrdup(q);
  w->done_key = ob_queue_key(q, "done", NULL);
  w->n = n;
  w->slots = ob_xcalloc(n ? n : 1, sizeof *w->slots);
  for (size_t i = 0; i < n; i++) {
    w->slots[i].id = ob_xstrdup(ids[i]);
    w->slots[i].nparts = 1;
    w->slots[i].parts = ob_xcalloc(1, sizeof(part));
    w->slots[i].parts[0].id = ob_xstrdup(ids[i]);
  }
  snprintf(w->last, sizeof w->last, "0-0");
  w->on_result = on_result;
  w->on_done = on_done;
  w->ud = ud;
  if (timeout_ms) {
    w->deadline = ob_queue_now_ms() + timeout_ms;
    /* the deadline also holds while the connection is down */
    w->timer = ob_xmalloc(sizeof *w->timer);
    uv_timer_init(ob_redis_loop(r), w->timer);
    w->timer->data = w;
    uv_timer_start(w->timer, on_deadline, timeout_ms + 50, 0);
  }
  if (ob_redis_is_up(r))
    wait_restart(w);
  return w;
}

void ob_queue_wait_reconnected(ob_queue_wait *w) {
  if (w && !w->ended)
    wait_restart(w);
}

void ob_queue_wait_free(ob_queue_wait *w) {
  if (!w)
    return;
  if (!w->ended) {
    w->ended = 1;
    if (w->timer) {
      uv_close((uv_handle_t *)w->timer, close_timer);
      w->timer = NULL;
    }
  }
  w->freed_in_cb = 1;
  maybe_free(w);
}
