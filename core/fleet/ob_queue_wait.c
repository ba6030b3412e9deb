/* ob_queue_wait.c -- waiting for jobs to finish (ob_queue_wait.h), however many.
 *
 * What is known of each job is one byte (st[], by its index in the id set): not
 * looked at yet, queued, running, another state, sharded, finished, no such job,
 * broken, reported. A sharded job has a record (its parts' count and a bit per part:
 * finished) and a job in an unusual state its state's text; nothing else is kept
 * per job, and a result is read from Redis when it is reported, never held: a
 * million jobs of a batch (one run of ids) cost a megabyte.
 *
 * Where it learns from:
 *  - the done stream, read with blocking XREADs (COUNT READ_COUNT) from the entry
 *    that was last when the wait began (or reconnected): each entry names a job, or
 *    a part "ID.K" of a sharded one, that finished;
 *  - sweeps: a look at every job (and part) not known finished, SWEEP_CHUNK keys a
 *    script (SWEEP_SCRIPT: one HMGET per key inside Redis, a small answer each),
 *    SWEEP_INFLIGHT scripts at a time, the loop free between rounds. One at the
 *    start (jobs finished before the wait; no such job; sharded ones), one after a
 *    read that blocked REREAD_MS without news (the done stream is trimmed to about
 *    OB_QUEUE_DONE_KEEP entries, and hand-written hashes never pass through it), and
 *    one when a read suggests entries were trimmed before they were read (it came
 *    back full, and the stream's first entry is past where it read from). A sweep
 *    starts no sooner than SWEEP_DUTY times its predecessor's duration after it
 *    ended, so that sweeping a million jobs (a second or two of Redis) takes at
 *    most a tenth of Redis's time.
 * What it does with it: a job learnt finished is reported: its result read (one
 * HMGET, FETCH_MAX pipelined at a time) and handed to on_result; a sharded job whose
 * parts all finished has its parts' results read (FETCH_MAX at a time) and merged
 * into one object, its exit the worst of theirs. Without an order, jobs are
 * reported as they are learnt finished; with one, the finished prefix is read and
 * reported in order, the rest waiting for the job before them.
 *
 * Everything happens in rounds: the commands of a round are sent, and the next
 * round is chosen when the last has answered (step): reports first, then the
 * sweep under way, then a read. A reconnection starts over from the stream's new
 * end with a sweep; replies of an older connection are ignored (the epoch).
 *
 * Costs: memory, a byte a job plus the id set (16 bytes a run of consecutive ids)
 * plus, per sharded job, 24 bytes and a bit a part, plus a round's replies. Redis,
 * per job: an HMGET when it is reported (a sharded job: one per part), and a share
 * of one XREAD per READ_COUNT finished jobs; a sweep costs one HMGET per job not
 * known finished, inside scripts of SWEEP_CHUNK keys. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "base/ob_value.h"
#include "fleet/ob_queue.h"
#include "fleet/ob_queue_wait.h"

#define REREAD_MS 10000
#define READ_COUNT 1000
#define SWEEP_CHUNK 1000
#define SWEEP_INFLIGHT 4
#define FETCH_MAX 1000
#define SWEEP_DUTY 10
#define DEADLINE_GRACE_MS 2000

/* What is known of a job. */
enum {
  ST_NEW,      /* not looked at yet */
  ST_QUEUED,
  ST_RUNNING,
  ST_ODD,      /* another state (its text in odds) */
  ST_SHARDED,  /* its parts are awaited (a shard record) */
  ST_FINISHED, /* done or failed: its result to read and report */
  ST_MISSING,  /* no such job */
  ST_NOTHASH,  /* its key is not a hash */
  ST_BADPARTS, /* sharded, with no or too many parts */
  ST_SHOWN     /* reported (without an order) */
};

#define AWAITED(s) ((s) <= ST_ODD)

/* Per key, what a sweep needs: 0 no such key (or no state), -1 not a hash, the
 * state, or {"sharded", parts}. */
static const char SWEEP_SCRIPT[] =
    "local r = {}\n"
    "for i, k in ipairs(KEYS) do\n"
    "  local v = redis.pcall('HMGET', k, 'state', 'parts')\n"
    "  if v.err then r[i] = -1\n"
    "  elseif not v[1] then r[i] = 0\n"
    "  elseif v[1] == 'sharded' then r[i] = {'sharded', v[2] or ''}\n"
    "  else r[i] = v[1] end\n"
    "end\n"
    "return r\n";

static const char NOT_A_HASH[] = "the job's record in Redis is broken: it is not a hash";
static const char BAD_PARTS[] = "the job's record in Redis is broken: a sharded job whose "
                                "\"parts\" is not a count of 1 to " OB_QUEUE_STR(OB_QUEUE_PARTS_MAX);

typedef struct shard {
  size_t idx;
  uint32_t nparts, nfinished;
  uint8_t *bits; /* a bit per part: finished */
} shard;

typedef struct odd {
  size_t idx;
  char *state;
} odd;

/* What a sweep looks at: a job (part 0) or its part K. */
typedef struct target {
  size_t idx;
  uint32_t part;
} target;

enum { R_CURSOR, R_SWEEP, R_FETCH, R_PART, R_READ, R_FIRST };

struct ob_queue_wait {
  ob_redis *r;
  char *q, *done_key;
  ob_queue_ids *ids;
  size_t n;
  uint8_t *st;
  size_t *order, norder; /* the order given, or NULL */
  size_t emitted;        /* reported: positions of order, or jobs */
  size_t sent;           /* with an order: positions whose reading is sent */
  size_t *ready;         /* without: jobs to report, learnt in this order */
  size_t rhead, rsent, rtail, rcap;
  shard *shards; /* sorted by idx */
  size_t nshards, capshards;
  odd *odds; /* sorted by idx */
  size_t nodds, capodds;
  struct {       /* a sharded job's parts being read and merged */
    int on, stale;
    size_t idx;
    uint32_t sent, got;
    ob_value *out;
    int worst;
    char *error;
  } m;
  int sweeping, sweep_due, quiet;
  size_t sw_job, sw_shard;
  uint32_t sw_part;
  uint64_t sw_started, next_sweep; /* ms since the epoch */
  uint64_t deadline;               /* 0: none */
  int ending;                      /* the deadline passed: report what is known, then end */
  int graced;                      /* the deadline's timer gave the rounds their grace */
  int stood;                       /* a job not finished was reported as it stood */
  char last[64];                   /* the done stream's last entry read */
  char read_from[64];              /* where the read under way began */
  int read_full;                   /* it came back with READ_COUNT entries */
  ob_queue_result_cb on_result;
  ob_queue_wait_done_cb on_done;
  void *ud;
  size_t outstanding;
  unsigned epoch;
  int reading, ended, freed_in_cb;
  uv_timer_t *timer; /* the deadline while the connection is down */
};

typedef struct wreq {
  ob_queue_wait *w;
  unsigned epoch;
  int kind;
  size_t item; /* R_FETCH: the position (with an order) or the job; R_PART: the part */
  size_t ntargets;
  target targets[]; /* R_SWEEP */
} wreq;

static void step(ob_queue_wait *w);
static void wait_end(ob_queue_wait *w, const char *why);

/* --- small things ----------------------------------------------------------------------------- */

static wreq *new_req(ob_queue_wait *w, int kind, size_t item, size_t ntargets) {
  wreq *q = ob_xmalloc(sizeof *q + ntargets * sizeof(target));
  q->w = w;
  q->epoch = w->epoch;
  q->kind = kind;
  q->item = item;
  q->ntargets = ntargets;
  return q;
}

static shard *shard_of(ob_queue_wait *w, size_t idx) {
  size_t lo = 0, hi = w->nshards;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (w->shards[mid].idx == idx)
      return &w->shards[mid];
    if (w->shards[mid].idx < idx)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static void shard_add(ob_queue_wait *w, size_t idx, uint32_t nparts) {
  if (w->nshards == w->capshards) {
    w->capshards = w->capshards ? w->capshards * 2 : 8;
    w->shards = ob_xrealloc(w->shards, w->capshards * sizeof *w->shards);
  }
  size_t at = w->nshards;
  while (at > 0 && w->shards[at - 1].idx > idx)
    at--;
  memmove(&w->shards[at + 1], &w->shards[at], (w->nshards - at) * sizeof *w->shards);
  w->shards[at] = (shard){idx, nparts, 0, ob_xcalloc((nparts + 7) / 8, 1)};
  w->nshards++;
}

static odd *odd_of(ob_queue_wait *w, size_t idx, int make) {
  size_t at = w->nodds;
  while (at > 0 && w->odds[at - 1].idx > idx)
    at--;
  if (at > 0 && w->odds[at - 1].idx == idx)
    return &w->odds[at - 1];
  if (!make)
    return NULL;
  if (w->nodds == w->capodds) {
    w->capodds = w->capodds ? w->capodds * 2 : 8;
    w->odds = ob_xrealloc(w->odds, w->capodds * sizeof *w->odds);
  }
  memmove(&w->odds[at + 1], &w->odds[at], (w->nodds - at) * sizeof *w->odds);
  w->odds[at] = (odd){idx, NULL};
  w->nodds++;
  return &w->odds[at];
}

static int is_finished_state(const char *s) {
  return s && (!strcmp(s, "done") || !strcmp(s, "failed"));
}

/* A stream entry id's two numbers; 0-0 for what is not one. */
static void entry_id(const char *s, uint64_t *ms, uint64_t *seq) {
  char *end;
  *ms = strtoull(s, &end, 10);
  *seq = *end == '-' ? strtoull(end + 1, NULL, 10) : 0;
}

static int entry_after(const char *a, const char *b) {
  uint64_t am, as, bm, bs;
  entry_id(a, &am, &as);
  entry_id(b, &bm, &bs);
  return am > bm || (am == bm && as > bs);
}

/* --- reporting -------------------------------------------------------------------------------- */

static void report(ob_queue_wait *w, size_t i, const ob_queue_result *res) {
  w->emitted++;
  w->on_result(w->ud, i, res);
}

/* A job known to be broken or missing: its result, made here. */
static void known_result(ob_queue_wait *w, size_t idx, char *id, ob_queue_result *res) {
  ob_queue_ids_get(w->ids, idx, id);
  *res = (ob_queue_result){.job = id, .exit = -1, .output = "null"};
  switch (w->st[idx]) {
  case ST_MISSING:
    break; /* state NULL: no such job */
  case ST_NOTHASH:
  case ST_BADPARTS:
    res->exit = 2;
    res->state = "failed";
    res->error = w->st[idx] == ST_NOTHASH ? NOT_A_HASH : BAD_PARTS;
    break;
  default: { /* not finished: as it stands */
    odd *o = w->st[idx] == ST_ODD ? odd_of(w, idx, 0) : NULL;
    res->state = w->st[idx] == ST_RUNNING   ? "running"
                 : w->st[idx] == ST_SHARDED ? "running"
                 : w->st[idx] == ST_FINISHED ? "finished"
                 : o && o->state            ? o->state
                                            : "queued";
  }
  }
}

static int immediate(uint8_t s) { return s == ST_MISSING || s == ST_NOTHASH || s == ST_BADPARTS; }

/* A job learnt finished (or missing, broken, or a sharded one whose parts all
 * finished): reported at once when that needs no read, else queued for one;
 * with an order, the prefix's turn decides. */
static void learnt(ob_queue_wait *w, size_t idx) {
  if (w->order)
    return;
  if (immediate(w->st[idx])) {
    char id[OB_QUEUE_IDS_TEXT_MAX + 1];
    ob_queue_result res;
    known_result(w, idx, id, &res);
    w->st[idx] = ST_SHOWN;
    report(w, idx, &res);
    return;
  }
  if (w->rtail == w->rcap) {
    if (w->rhead > 0) { /* what is reported is dropped first */
      memmove(w->ready, w->ready + w->rhead, (w->rtail - w->rhead) * sizeof *w->ready);
      w->rtail -= w->rhead;
      w->rsent -= w->rhead;
      w->rhead = 0;
    }
    if (w->rtail == w->rcap) {
      w->rcap = w->rcap ? w->rcap * 2 : 1024;
      w->ready = ob_xrealloc(w->ready, w->rcap * sizeof *w->ready);
    }
  }
  w->ready[w->rtail++] = idx;
}

static void set_finished(ob_queue_wait *w, size_t idx) {
  if (!AWAITED(w->st[idx]))
    return;
  w->st[idx] = ST_FINISHED;
  learnt(w, idx);
}

static void part_finished(ob_queue_wait *w, shard *sh, uint32_t k) {
  if (k < 1 || k > sh->nparts || (sh->bits[(k - 1) / 8] & (1u << ((k - 1) % 8))))
    return;
  sh->bits[(k - 1) / 8] |= (uint8_t)(1u << ((k - 1) % 8));
  if (++sh->nfinished == sh->nparts)
    learnt(w, sh->idx);
}

static int shard_complete(ob_queue_wait *w, size_t idx) {
  shard *sh = w->st[idx] == ST_SHARDED ? shard_of(w, idx) : NULL;
  return sh && sh->nfinished == sh->nparts;
}

/* A job's stored result (HMGET state exit output error), checked: what a worker
 * stored, or anyone with access to Redis (an exit of 0 to 2, the output JSON).
 * 0 when the job is not finished after all. The texts are the reply's. */
static int stored_result(redisReply *rp, ob_queue_result *res) {
  if (rp->type == REDIS_REPLY_ERROR) { /* WRONGTYPE: the others end the wait (on_reply) */
    res->exit = 2;
    res->state = "failed";
    res->output = "null";
    res->error = NOT_A_HASH;
    return 1;
  }
  if (rp->type != REDIS_REPLY_ARRAY || rp->elements < 4)
    return 0;
  const char *state = ob_redis_str(rp->element[0]);
  if (!is_finished_state(state))
    return 0;
  long long ex = ob_redis_int(rp->element[1], 1);
  res->exit = ex >= 0 && ex <= 2 ? (int)ex : 1;
  res->state = state;
  const char *out = ob_redis_str(rp->element[2]), *err = ob_redis_str(rp->element[3]);
  res->error = err;
  res->output = "null";
  ob_value *v = out ? ob_json_parse(out, rp->element[2]->len, NULL) : NULL;
  if (v) {
    res->output = out;
  } else if (out && !err) {
    res->exit = res->exit ? res->exit : 1;
    res->error = "the job's stored output is not JSON";
  }
  ob_unref(v);
  return 1;
}

/* --- sending ---------------------------------------------------------------------------------- */

static void on_reply(void *ud, redisReply *rp, const char *why);

static int wsend(ob_queue_wait *w, wreq *q, int argc, const char **argv, const size_t *lens) {
  if (ob_redis_send(w->r, on_reply, q, argc, argv, lens) != OB_OK) {
    free(q); /* down: the reconnection starts over */
    return 0;
  }
  w->outstanding++;
  return 1;
}

/* The key of job idx (part k > 0: its part k), into b. */
static void job_key(ob_queue_wait *w, ob_buf *b, size_t idx, uint32_t k) {
  char id[OB_QUEUE_IDS_TEXT_MAX + 1];
  ob_queue_ids_get(w->ids, idx, id);
  ob_buf_addf(b, "ob:{%s}:job:%s", w->q, id);
  if (k)
    ob_buf_addf(b, ".%" PRIu32, k);
}

static int send_hmget(ob_queue_wait *w, int kind, size_t item, size_t idx, uint32_t k) {
  ob_buf key;
  ob_buf_init(&key);
  job_key(w, &key, idx, k);
  int ok = wsend(w, new_req(w, kind, item, 0), 6,
                (const char *[]){"HMGET", key.data, "state", "exit", "output", "error"}, NULL);
  ob_buf_free(&key);
  return ok;
}

/* --- merging a sharded job's parts ------------------------------------------------------------ */

static void merge_start(ob_queue_wait *w, size_t idx) {
  w->m.on = 1;
  w->m.stale = 0;
  w->m.idx = idx;
  w->m.sent = w->m.got = 0;
  w->m.out = ob_object();
  w->m.worst = 0;
  w->m.error = NULL;
}

static void merge_drop(ob_queue_wait *w) {
  ob_unref(w->m.out);
  free(w->m.error);
  w->m.out = NULL;
  w->m.error = NULL;
  w->m.on = 0;
}

static void merge_part(ob_queue_wait *w, uint32_t k, redisReply *rp) {
  shard *sh = shard_of(w, w->m.idx);
  ob_queue_result res = {0};
  if (!stored_result(rp, &res)) { /* not finished after all: awaited again */
    sh->bits[(k - 1) / 8] &= (uint8_t) ~(1u << ((k - 1) % 8));
    sh->nfinished--;
    w->m.stale = 1;
    return;
  }
  if (res.exit > w->m.worst)
    w->m.worst = res.exit;
  if (res.error && !w->m.error)
    w->m.error = ob_xstrdup(res.error);
  ob_value *o = ob_json_parse(res.output, strlen(res.output), NULL);
  if (o && ob_typeof(o) == OB_OBJECT) { /* instance id -> output */
    ob_object_iter it;
    ob_value *key, *val;
    ob_object_iter_init(&it, o);
    while (ob_object_iter_next(&it, &key, &val))
      w->m.out = ob_object_setv(w->m.out, key, ob_ref(val));
  }
  ob_unref(o);
}

/* A job read as finished was not after all: the round reads again (with an order,
 * from the first job not reported; without, past it in the ready list). */
static void read_again(ob_queue_wait *w) {
  if (w->order)
    w->sent = w->emitted;
  else
    w->rhead++;
}

/* A job's result, read: reported in its turn. */
static void read_done(ob_queue_wait *w, size_t idx, const ob_queue_result *res) {
  if (w->order) {
    report(w, w->emitted, res);
    return;
  }
  w->rhead++;
  w->st[idx] = ST_SHOWN;
  report(w, idx, res);
}

/* Every part answered: the job reported, or (a part not finished after all) left
 * to wait again. */
static void merge_end(ob_queue_wait *w) {
  size_t idx = w->m.idx;
  if (w->m.stale) {
    merge_drop(w);
    read_again(w);
    return;
  }
  char id[OB_QUEUE_IDS_TEXT_MAX + 1];
  ob_queue_ids_get(w->ids, idx, id);
  char *text = ob_json_print(w->m.out, OB_JSON_COMPACT, NULL);
  char *error = w->m.error;
  w->m.error = NULL;
  ob_queue_result res = {.job = id, .exit = w->m.worst, .output = text,
                         .error = error, .state = w->m.worst ? "failed" : "done"};
  merge_drop(w);
  read_done(w, idx, &res);
  free(text);
  free(error);
}

/* --- reporting rounds --------------------------------------------------------------------------- */

/* Sends the reads of the next results to report (or reports what needs none).
 * 1 when commands went out. */
static int pump(ob_queue_wait *w) {
  if (w->m.on) {
    shard *sh = shard_of(w, w->m.idx);
    size_t count = 0;
    while (w->m.sent < sh->nparts && count < FETCH_MAX) {
      w->m.sent++;
      count += send_hmget(w, R_PART, w->m.sent, sh->idx, w->m.sent);
    }
    return count > 0;
  }
  size_t count = 0;
  if (!w->order) {
    while (w->rsent < w->rtail && count < FETCH_MAX && !w->ended) {
      size_t idx = w->ready[w->rsent];
      if (w->st[idx] == ST_SHARDED) {
        if (count)
          break;
        w->rsent++;
        merge_start(w, idx);
        return pump(w);
      }
      w->rsent++;
      count += send_hmget(w, R_FETCH, idx, idx, 0);
    }
    return count > 0;
  }
  while (w->sent < w->norder && count < FETCH_MAX && !w->ended) {
    size_t idx = w->order[w->sent];
    uint8_t s = w->st[idx];
    /* past the deadline, a job not finished is reported as it stands, and those
       after it that are, with their results */
    int stands = w->ending && s != ST_FINISHED && !shard_complete(w, idx);
    if (immediate(s) || stands) {
      if (w->sent != w->emitted)
        break;
      w->stood |= stands && !immediate(s);
      char id[OB_QUEUE_IDS_TEXT_MAX + 1];
      ob_queue_result res;
      known_result(w, idx, id, &res);
      w->sent++;
      report(w, w->emitted, &res);
    } else if (s == ST_FINISHED) {
      count += send_hmget(w, R_FETCH, w->sent, idx, 0);
      w->sent++;
    } else if (shard_complete(w, idx)) {
      if (count || w->sent != w->emitted)
        break;
      w->sent++;
      merge_start(w, idx);
      return pump(w);
    } else {
      break;
    }
  }
  return count > 0;
}

static void on_fetch(ob_queue_wait *w, size_t item, redisReply *rp) {
  size_t idx = w->order ? w->order[item] : item;
  if (w->order && item != w->emitted)
    return; /* one before it was not finished after all: read again in its turn */
  ob_queue_result res = {0};
  char id[OB_QUEUE_IDS_TEXT_MAX + 1];
  if (!stored_result(rp, &res)) { /* not finished after all (a hash edited by hand) */
    const char *state = rp->type == REDIS_REPLY_ARRAY && rp->elements ? ob_redis_str(rp->element[0]) : NULL;
    w->st[idx] = !state ? ST_QUEUED : !strcmp(state, "running") ? ST_RUNNING : ST_QUEUED;
    read_again(w);
    return;
  }
  ob_queue_ids_get(w->ids, idx, id);
  res.job = id;
  read_done(w, idx, &res);
}

/* --- sweeps ------------------------------------------------------------------------------------- */

/* The next SWEEP_CHUNK targets of the sweep, into q; how many. */
static size_t sweep_take(ob_queue_wait *w, wreq *q) {
  size_t k = 0;
  while (k < SWEEP_CHUNK && w->sw_job < w->n) {
    if (AWAITED(w->st[w->sw_job]))
      q->targets[k++] = (target){w->sw_job, 0};
    w->sw_job++;
  }
  while (k < SWEEP_CHUNK && w->sw_shard < w->nshards) {
    shard *sh = &w->shards[w->sw_shard];
    if (w->st[sh->idx] != ST_SHARDED || sh->nfinished == sh->nparts || w->sw_part >= sh->nparts) {
      w->sw_shard++;
      w->sw_part = 0;
      continue;
    }
    uint32_t p = w->sw_part++;
    if (!(sh->bits[p / 8] & (1u << (p % 8))))
      q->targets[k++] = (target){sh->idx, p + 1};
  }
  return k;
}

/* Sends the sweep's next round: 1 when commands went out, 0 when it is over. */
static int sweep_round(ob_queue_wait *w) {
  size_t sent = 0;
  for (int c = 0; c < SWEEP_INFLIGHT; c++) {
    wreq *q = new_req(w, R_SWEEP, 0, SWEEP_CHUNK);
    size_t k = sweep_take(w, q);
    if (!k) {
      free(q);
      break;
    }
    q->ntargets = k;
    ob_buf keys;
    ob_buf_init(&keys);
    size_t *offs = ob_xmalloc(k * sizeof *offs);
    for (size_t i = 0; i < k; i++) {
      offs[i] = keys.len;
      job_key(w, &keys, q->targets[i].idx, q->targets[i].part);
      ob_buf_addc(&keys, '\0');
    }
    const char **argv = ob_xmalloc((k + 3) * sizeof *argv);
    size_t *lens = ob_xmalloc((k + 3) * sizeof *lens);
    char nk[32];
    snprintf(nk, sizeof nk, "%zu", k);
    argv[0] = "EVAL";
    argv[1] = SWEEP_SCRIPT;
    argv[2] = nk;
    for (size_t i = 0; i < k; i++)
      argv[3 + i] = keys.data + offs[i];
    for (size_t i = 0; i < k + 3; i++)
      lens[i] = strlen(argv[i]);
    sent += wsend(w, q, (int)(k + 3), argv, lens);
    free(argv);
    free(lens);
    free(offs);
    ob_buf_free(&keys);
  }
  if (!sent) {
    uint64_t now = ob_queue_now_ms();
    w->sweeping = 0;
    w->next_sweep = now + SWEEP_DUTY * (now - w->sw_started);
  }
  return sent > 0;
}

static void sweep_start(ob_queue_wait *w) {
  w->sweeping = 1;
  w->sweep_due = w->quiet = 0;
  w->sw_job = w->sw_shard = 0;
  w->sw_part = 0;
  w->sw_started = ob_queue_now_ms();
}

static void on_sweep(ob_queue_wait *w, wreq *q, redisReply *rp) {
  if (rp->type != REDIS_REPLY_ARRAY)
    return;
  for (size_t i = 0; i < q->ntargets && i < rp->elements && !w->ended; i++) {
    redisReply *e = rp->element[i];
    target t = q->targets[i];
    if (t.part) {
      shard *sh = w->st[t.idx] == ST_SHARDED ? shard_of(w, t.idx) : NULL;
      if (sh && ((e->type == REDIS_REPLY_INTEGER && e->integer < 0) ||
                 is_finished_state(ob_redis_str(e))))
        part_finished(w, sh, t.part);
      continue;
    }
    uint8_t *s = &w->st[t.idx];
    if (!AWAITED(*s))
      continue;
    if (e->type == REDIS_REPLY_INTEGER) {
      if (e->integer < 0) {
        *s = ST_NOTHASH;
        learnt(w, t.idx);
      } else if (*s == ST_NEW) { /* a job that vanished later is left waiting */
        *s = ST_MISSING;
        learnt(w, t.idx);
      }
    } else if (e->type == REDIS_REPLY_ARRAY) { /* {"sharded", parts} */
      long long parts = e->elements > 1 ? ob_redis_int(e->element[1], 0) : 0;
      if (parts < 1 || parts > OB_QUEUE_PARTS_MAX) {
        *s = ST_BADPARTS;
        learnt(w, t.idx);
      } else {
        *s = ST_SHARDED;
        shard_add(w, t.idx, (uint32_t)parts);
      }
    } else if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) {
      const char *state = e->str;
      if (is_finished_state(state)) {
        set_finished(w, t.idx);
      } else if (!strcmp(state, "queued")) {
        *s = ST_QUEUED;
      } else if (!strcmp(state, "running")) {
        *s = ST_RUNNING;
      } else {
        *s = ST_ODD;
        odd *o = odd_of(w, t.idx, 1);
        free(o->state);
        o->state = ob_xstrdup(state);
      }
    }
  }
}

/* --- the done stream ---------------------------------------------------------------------------- */

/* A job id read from the done stream: ours, or a part of a sharded one of ours. */
static void done_id(ob_queue_wait *w, const char *id, size_t len) {
  size_t idx = ob_queue_ids_find(w->ids, id, len);
  if (idx != OB_QUEUE_IDS_NONE)
    set_finished(w, idx);
  const char *dot = NULL;
  for (size_t i = len; i > 0 && !dot; i--)
    if (id[i - 1] == '.')
      dot = id + i - 1;
  uint64_t k;
  if (!dot || !w->nshards || !ob_queue_ids_number(dot + 1, len - (size_t)(dot + 1 - id), &k))
    return;
  size_t pidx = ob_queue_ids_find(w->ids, id, (size_t)(dot - id));
  shard *sh = pidx != OB_QUEUE_IDS_NONE && w->st[pidx] == ST_SHARDED ? shard_of(w, pidx) : NULL;
  if (sh && k <= UINT32_MAX)
    part_finished(w, sh, (uint32_t)k);
}

static void on_read(ob_queue_wait *w, redisReply *rp) {
  w->reading = 0;
  if (rp->type == REDIS_REPLY_ERROR) {
    wait_end(w, rp->str);
    return;
  }
  if (rp->type == REDIS_REPLY_NIL) { /* blocked without news */
    if (w->deadline && ob_queue_now_ms() >= w->deadline)
      w->ending = 1;
    w->quiet = 1;
    return;
  }
  /* [[stream, [[id, [field, value, ...]], ...]]] */
  if (rp->type != REDIS_REPLY_ARRAY || !rp->elements || rp->element[0]->type != REDIS_REPLY_ARRAY ||
      rp->element[0]->elements != 2)
    return;
  redisReply *entries = rp->element[0]->element[1];
  w->read_full = entries->elements >= READ_COUNT;
  for (size_t e = 0; e < entries->elements && !w->ended; e++) {
    redisReply *en = entries->element[e];
    if (en->type != REDIS_REPLY_ARRAY || en->elements != 2 || !ob_redis_str(en->element[0]))
      continue;
    snprintf(w->last, sizeof w->last, "%s", en->element[0]->str);
    redisReply *f = en->element[1];
    for (size_t k = 0; f->type == REDIS_REPLY_ARRAY && k + 1 < f->elements; k += 2) {
      const char *name = ob_redis_str(f->element[k]), *val = ob_redis_str(f->element[k + 1]);
      if (name && val && !strcmp(name, "job"))
        done_id(w, val, f->element[k + 1]->len);
    }
  }
}

/* The stream's first entry, asked right after a read: past where the read began,
 * after a full read, entries may have been trimmed before they were read. */
static void on_first(ob_queue_wait *w, redisReply *rp) {
  if (w->read_full && rp->type == REDIS_REPLY_ARRAY && rp->elements == 1 &&
      rp->element[0]->type == REDIS_REPLY_ARRAY && rp->element[0]->elements == 2 &&
      ob_redis_str(rp->element[0]->element[0]) &&
      entry_after(rp->element[0]->element[0]->str, w->read_from))
    w->sweep_due = 1;
  w->read_full = 0;
}

static void wait_read(ob_queue_wait *w) {
  if (w->reading || w->ended)
    return;
  uint64_t now = ob_queue_now_ms(), block = REREAD_MS;
  if (w->sweep_due && w->next_sweep > now && w->next_sweep - now < block)
    block = w->next_sweep - now;
  if (w->deadline && w->deadline <= now)
    block = 1;
  else if (w->deadline && w->deadline - now < block)
    block = w->deadline - now;
  char ms[32];
  snprintf(ms, sizeof ms, "%" PRIu64, block ? block : 1);
  snprintf(w->read_from, sizeof w->read_from, "%s", w->last);
  char count[16];
  snprintf(count, sizeof count, "%d", READ_COUNT);
  if (!wsend(w, new_req(w, R_READ, 0, 0), 8,
            (const char *[]){"XREAD", "COUNT", count, "BLOCK", ms, "STREAMS", w->done_key, w->last},
            NULL))
    return;
  w->reading = 1;
  wsend(w, new_req(w, R_FIRST, 0, 0), 6,
       (const char *[]){"XRANGE", w->done_key, "-", "+", "COUNT", "1"}, NULL);
}

/* --- the rounds --------------------------------------------------------------------------------- */

static int all_reported(const ob_queue_wait *w) {
  return w->emitted == (w->order ? w->norder : w->n);
}

/* The last reply of a round is in: the next round. */
static void step(ob_queue_wait *w) {
  if (w->ended || w->outstanding)
    return;
  uint64_t now = ob_queue_now_ms();
  if (w->deadline && now >= w->deadline)
    w->ending = 1;
  if (pump(w) || w->ended)
    return;
  if (all_reported(w)) { /* some, past the deadline, as they stood: it timed out */
    wait_end(w, w->stood ? "timeout" : NULL);
    return;
  }
  if (w->ending) {
    wait_end(w, "timeout");
    return;
  }
  if (w->sweeping && sweep_round(w))
    return;
  if ((w->sweep_due || w->quiet) && now >= w->next_sweep) {
    sweep_start(w);
    if (sweep_round(w))
      return;
  }
  if (w->quiet && now < w->next_sweep) /* quiet, too soon after the last sweep */
    w->sweep_due = 1;
  w->quiet = 0;
  wait_read(w);
}

static void maybe_free(ob_queue_wait *w) {
  if (!(w->ended && w->outstanding == 0 && w->freed_in_cb))
    return;
  for (size_t i = 0; i < w->nshards; i++)
    free(w->shards[i].bits);
  free(w->shards);
  for (size_t i = 0; i < w->nodds; i++)
    free(w->odds[i].state);
  free(w->odds);
  merge_drop(w);
  free(w->ready);
  free(w->order);
  free(w->st);
  ob_queue_ids_free(w->ids);
  free(w->q);
  free(w->done_key);
  free(w);
}

static void on_reply(void *ud, redisReply *rp, const char *why) {
  wreq *q = ud;
  ob_queue_wait *w = q->w;
  (void)why;
  w->outstanding--;
  if (w->ended || q->epoch != w->epoch || !rp) { /* stale, or the connection went */
    free(q);
    maybe_free(w);
    return;
  }
  /* an error where an answer was due (a script refused, LOADING, no permission) ends
     the wait with it, as a read's does; a job's key of another type is its own
     trouble (a broken job), and the stream's first entry is only a hint */
  if (rp->type == REDIS_REPLY_ERROR && q->kind != R_FIRST && q->kind != R_CURSOR &&
      !((q->kind == R_FETCH || q->kind == R_PART) && !strncmp(rp->str, "WRONGTYPE", 9))) {
    free(q);
    wait_end(w, rp->str);
    maybe_free(w);
    return;
  }
  switch (q->kind) {
  case R_CURSOR: /* XREVRANGE done + - COUNT 1: [[id, fields]] or [] */
    if (rp->type == REDIS_REPLY_ARRAY && rp->elements == 1 &&
        rp->element[0]->type == REDIS_REPLY_ARRAY && rp->element[0]->elements == 2 &&
        ob_redis_str(rp->element[0]->element[0]))
      snprintf(w->last, sizeof w->last, "%s", rp->element[0]->element[0]->str);
    break;
  case R_SWEEP:
    on_sweep(w, q, rp);
    break;
  case R_FETCH:
    on_fetch(w, q->item, rp);
    break;
  case R_PART:
    if (w->m.on) {
      merge_part(w, (uint32_t)q->item, rp);
      if (++w->m.got == shard_of(w, w->m.idx)->nparts)
        merge_end(w);
    }
    break;
  case R_READ:
    on_read(w, rp);
    break;
  case R_FIRST:
    on_first(w, rp);
    break;
  }
  free(q);
  step(w);
}

static void wait_restart(ob_queue_wait *w) {
  w->epoch++;
  w->reading = 0;
  w->sweeping = 0;
  w->sweep_due = 1;
  w->quiet = 0;
  w->next_sweep = 0;
  if (w->m.on)
    merge_drop(w);
  if (w->order)
    w->sent = w->emitted;
  else
    w->rsent = w->rhead;
  wsend(w, new_req(w, R_CURSOR, 0, 0), 6,
       (const char *[]){"XREVRANGE", w->done_key, "+", "-", "COUNT", "1"}, NULL);
}

static void close_timer(uv_handle_t *h) { free(h); }

static void wait_end(ob_queue_wait *w, const char *why) {
  if (w->ended)
    return;
  if (why) { /* what is not reported yet, as it stands */
    char id[OB_QUEUE_IDS_TEXT_MAX + 1];
    ob_queue_result res;
    if (w->order) {
      while (w->emitted < w->norder && !w->ended) {
        known_result(w, w->order[w->emitted], id, &res);
        report(w, w->emitted, &res);
      }
    } else {
      for (size_t idx = 0; idx < w->n && !w->ended; idx++)
        if (w->st[idx] != ST_SHOWN) {
          known_result(w, idx, id, &res);
          w->st[idx] = ST_SHOWN;
          report(w, idx, &res);
        }
    }
  }
  w->ended = 1;
  if (w->timer) {
    uv_close((uv_handle_t *)w->timer, close_timer);
    w->timer = NULL;
  }
  w->on_done(w->ud, why);
  maybe_free(w);
}

/* The deadline by the clock: while commands are answered, the rounds see it and end
 * the wait once what is known is reported; DEADLINE_GRACE_MS later, or with the
 * connection down, it ends here, what is not reported printed as it stands. */
static void on_deadline(uv_timer_t *t) {
  ob_queue_wait *w = t->data;
  if (!w->graced && w->outstanding && ob_redis_is_up(w->r)) {
    w->graced = w->ending = 1;
    uv_timer_start(t, on_deadline, DEADLINE_GRACE_MS, 0);
    return;
  }
  wait_end(w, "timeout");
}

ob_queue_wait *ob_queue_wait_start(ob_redis *r, const char *q, ob_queue_ids *ids,
                                   const size_t *order, size_t norder, uint64_t timeout_ms,
                                   ob_queue_result_cb on_result, ob_queue_wait_done_cb on_done,
                                   void *ud) {
  ob_queue_wait *w = ob_xcalloc(1, sizeof *w);
  w->r = r;
  w->q = ob_xstrdup(q);
  w->done_key = ob_queue_key(q, "done", NULL);
  w->ids = ids;
  w->n = ob_queue_ids_seal(ids);
  w->st = ob_xcalloc(w->n ? w->n : 1, 1);
  if (order) {
    w->order = ob_xmalloc((norder ? norder : 1) * sizeof *w->order);
    memcpy(w->order, order, norder * sizeof *order);
    w->norder = norder;
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
