/* ob_worker_records.c -- journals held for a later record (ob_worker_records.h).
 *
 * A record deflates the journals in it together (ob_queue_journal.h): each after the
 * first costs a few dozen bytes, but a journal alone costs its whole deflated self and a
 * field of its bucket, some 200 bytes for a trivial job. Jobs that end one at a time
 * (real work: calls that wait on the network, --jobs 1) would each pay that. So a batch of
 * results with fewer than OB_WREC_DEFER_BELOW journals stores each journal as text in its
 * job's journal key, in the results' MULTI (readers read it there, and it expires as the
 * record would), and the worker holds a copy. The held journals become records when they
 * reach RECORD_AT bytes or HOLD_MAX journals, at the worker's tick (every few seconds),
 * and when it stops: one MULTI writes the records (in the buckets of the minutes their
 * jobs finished in), names each in its job's hash and deletes its text, unless the job's
 * hash says another worker's result stands or it is gone.
 *
 * A lost connection or a failed EXEC leaves the held journals held, for the next flush;
 * a worker that dies holding some leaves their text, which expires. Nothing else waits
 * on a flush: results were stored before.
 *
 * Costs: the journals' text held in the worker (at most about RECORD_AT bytes and as
 * many as HOLD_MAX between ticks); per flush, one MULTI (a record and an EXPIRE a
 * minute's group, one script naming them all). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "fleet/ob_queue.h"
#include "fleet/ob_queue_journal.h"
#include "fleet/ob_worker_records.h"

#define RECORD_AT (OB_QUEUE_JOURNAL_RECORD / 2)
#define HOLD_MAX 256

typedef struct held {
  char *id;
  uint64_t finished;
  char *text;
  size_t len;
  ob_value *plan_text;
  char plan_hash[17];
} held;

struct ob_wrec {
  held *v;
  size_t n, cap, bytes;
  int out; /* a flush is out: its journals are in it, not in v */
};

static struct ob_wrec *state(ob_wjobs *w) {
  if (!w->held)
    w->held = ob_xcalloc(1, sizeof *w->held);
  return w->held;
}

static void push(struct ob_wrec *r, held h) {
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 16;
    r->v = ob_xrealloc(r->v, r->cap * sizeof *r->v);
  }
  r->v[r->n++] = h;
  r->bytes += h.len;
}

static void held_free(held *h) {
  free(h->id);
  free(h->text);
  ob_unref(h->plan_text);
}

void ob_wrec_hold(ob_wjobs *w, const char *id, uint64_t finished, const char *text, size_t len,
                  const ob_value *plan_text, const char *plan_hash) {
  struct ob_wrec *r = state(w);
  held h = {.id = ob_xstrdup(id), .finished = finished, .len = len,
            .plan_text = plan_text ? ob_ref((ob_value *)plan_text) : NULL};
  h.text = ob_xmalloc(len + 1);
  memcpy(h.text, text, len);
  snprintf(h.plan_hash, sizeof h.plan_hash, "%s", plan_hash ? plan_hash : "");
  push(r, h);
  if (r->bytes >= RECORD_AT || r->n >= HOLD_MAX)
    ob_wrec_flush(w);
}

size_t ob_wrec_held(const ob_wjobs *w) { return w->held ? w->held->n : 0; }

/* Names each journal of the flush in its job's hash and deletes its text, when its
 * record is in the bucket (a bucket of another type refused it: the text stays, and
 * expires) and the hash says this worker's result stands and names no journal yet.
 * KEYS: the bucket, then job hash and journal key, pairwise. ARGV: the worker, then each
 * job's record. */
static const char ATTACH_SCRIPT[] =
    "local n = 0\n"
    "for i = 2, #KEYS - 1, 2 do\n"
    "  local name = ARGV[i / 2 + 1]\n"
    "  local h = redis.pcall('HMGET', KEYS[i], 'state', 'worker', 'journal')\n"
    "  if type(h) == 'table' and not h.err and (h[1] == 'done' or h[1] == 'failed')\n"
    "     and h[2] == ARGV[1] and not h[3] and redis.pcall('HEXISTS', KEYS[1], name) == 1 then\n"
    "    redis.call('HSET', KEYS[i], 'journal', name)\n"
    "    redis.call('DEL', KEYS[i + 1])\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n\n";

typedef struct flush {
  ob_wjobs *w;
  held *v;
  size_t n;
} flush;

static void on_flushed(void *ud, redisReply *rp, const char *why) {
  flush *f = ud;
  (void)why;
  struct ob_wrec *r = state(f->w);
  r->out = 0;
  int ok = rp && rp->type == REDIS_REPLY_ARRAY;
  /* a record refused (its bucket a key of another type): those journals stay as text
     until it expires, which the script left; said once, not tried again */
  for (size_t i = 0; ok && i < rp->elements; i++)
    if (rp->element[i]->type == REDIS_REPLY_ERROR) {
      ob_wjob_say(f->w, NULL, "a record of finished jobs' journals could not be stored (%s); "
                  "their journals stay as text until they expire", rp->element[i]->str);
      break;
    }
  for (size_t i = 0; i < f->n; i++) {
    if (ok) {
      held_free(&f->v[i]);
    } else {
      push(r, f->v[i]); /* held still: the next flush sends them again */
    }
  }
  if (rp && rp->type == REDIS_REPLY_ERROR)
    ob_wjob_say(f->w, NULL, "storing journals' records failed: %s", rp->str);
  free(f->v);
  free(f);
}

static int cmd(ob_wjobs *w, int argc, const char **argv, const size_t *lens) {
  return ob_redis_send(w->cmd, ob_redis_ignore_reply, NULL, argc, argv, lens) == OB_OK;
}

int ob_wrec_send(ob_wjobs *w, const char *bucket, const ob_wrec_journal *v, size_t n,
                 const char **names) {
  ob_buf raw, rec;
  ob_buf_init(&raw);
  ob_buf_init(&rec);
  int sent = 0;
  for (size_t i = 0; i < n;) {
    size_t first = i, count = 0;
    raw.len = 0;
    for (; i < n && (!raw.len || raw.len + v[i].len <= OB_QUEUE_JOURNAL_RECORD); i++, count++) {
      ob_queue_journal_add(&raw, v[i].id, v[i].text, v[i].len);
      names[i] = v[first].id;
    }
    const ob_value *pt = v[first].plan_text;
    rec.len = 0;
    ob_queue_journal_pack(pt ? v[first].plan_hash : NULL, pt ? ob_string_ptr(pt) : NULL,
                          pt ? ob_string_len(pt) : 0, count, raw.data, raw.len, &rec);
    if (!cmd(w, 4, (const char *[]){"HSET", bucket, v[first].id, rec.data},
             (const size_t[]){4, strlen(bucket), strlen(v[first].id), rec.len})) {
      sent = -1;
      break;
    }
    sent++;
  }
  if (sent > 0 && w->keep_journals_s != OB_WORKER_KEEP_FOREVER) {
    char keep[32]; /* from its last record: each record is kept that long after its end */
    snprintf(keep, sizeof keep, "%" PRIu64, w->keep_journals_s);
    sent = cmd(w, 3, (const char *[]){"EXPIRE", bucket, keep}, NULL) ? sent + 1 : -1;
  }
  ob_buf_free(&raw);
  ob_buf_free(&rec);
  return sent;
}

/* One minute's journals (v[from..to)): their records, then the script naming them. */
static int send_minute(ob_wjobs *w, held *v, size_t from, size_t to) {
  size_t m = to - from;
  char *bucket = ob_queue_journal_bucket(w->queue, v[from].finished, w->me);
  const char **names = ob_xcalloc(m, sizeof *names);
  ob_wrec_journal *js = ob_xmalloc(m * sizeof *js);
  for (size_t i = 0; i < m; i++)
    js[i] = (ob_wrec_journal){v[from + i].id, v[from + i].text, v[from + i].len,
                              v[from + i].plan_text, v[from + i].plan_hash};
  int ok = ob_wrec_send(w, bucket, js, m, names) >= 0;
  if (ok) {
    size_t argc = 0;
    char nkeys[32];
    snprintf(nkeys, sizeof nkeys, "%zu", 2 * m + 1);
    const char **argv = ob_xmalloc((5 + 3 * m) * sizeof *argv);
    char **owned = ob_xmalloc(2 * m * sizeof *owned);
    argv[argc++] = "EVAL";
    argv[argc++] = ATTACH_SCRIPT;
    argv[argc++] = nkeys;
    argv[argc++] = bucket;
    for (size_t i = 0; i < m; i++) {
      argv[argc++] = owned[2 * i] = ob_queue_key(w->queue, "job", v[from + i].id);
      argv[argc++] = owned[2 * i + 1] = ob_queue_key(w->queue, "journal", v[from + i].id);
    }
    argv[argc++] = w->me;
    for (size_t i = 0; i < m; i++)
      argv[argc++] = names[i];
    ok = cmd(w, (int)argc, argv, NULL);
    for (size_t i = 0; i < 2 * m; i++)
      free(owned[i]);
    free(owned);
    free(argv);
  }
  free(js);
  free(names);
  free(bucket);
  return ok;
}

void ob_wrec_flush(ob_wjobs *w) {
  struct ob_wrec *r = w->held;
  if (!r || !r->n || r->out || !ob_redis_is_up(w->cmd))
    return;
  flush *f = ob_xmalloc(sizeof *f);
  f->w = w;
  f->v = r->v;
  f->n = r->n;
  r->v = NULL;
  r->n = r->cap = r->bytes = 0;
  r->out = 1;
  /* the journals of one minute go in its bucket: held in the order their jobs ended, so
     each minute's are together */
  int ok = cmd(w, 1, (const char *[]){"MULTI"}, NULL);
  for (size_t i = 0; ok && i < f->n;) {
    size_t from = i;
    uint64_t m = f->v[i].finished / OB_QUEUE_JOURNAL_BUCKET_MS;
    while (i < f->n && f->v[i].finished / OB_QUEUE_JOURNAL_BUCKET_MS == m)
      i++;
    ok = send_minute(w, f->v, from, i);
  }
  if (!ok || ob_redis_send(w->cmd, on_flushed, f, 1, (const char *[]){"EXEC"}, NULL) != OB_OK)
    on_flushed(f, NULL, "the connection was lost");
}

void ob_wrec_free(ob_wjobs *w) {
  struct ob_wrec *r = w->held;
  if (!r)
    return;
  for (size_t i = 0; i < r->n; i++)
    held_free(&r->v[i]);
  free(r->v);
  free(r);
  w->held = NULL;
}
