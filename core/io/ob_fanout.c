/* ob_fanout.c -- the same bytes to many HTTP streams, in order.
 *
 * A live run's events go to each of its viewers (ob_ui_follow.c). A viewer that takes
 * gzip (a browser does) gets its own gzip stream, made of pieces each compressed once
 * for all such viewers (ob_gzip.h tells how pieces from anywhere join into one
 * stream); on this machine, 50 viewers cost a 10,000-call run a tenth of the bytes the
 * plain text would. Compressing a batch of records (300 KB: 1.5 ms) is still too long
 * for the loop the run goes on, so a piece over 16 KB is compressed on the loop's
 * thread pool (uv_queue_work), one at a time, by a compressor of its own; what is sent
 * meanwhile waits behind it in a queue, so every stream gets the events in the order
 * they were sent. Plain streams get them at once. A stream that joins while pieces
 * wait gets only those sent after it joined (its first bytes, the caller's, hold the
 * rest): each piece carries a number, each stream the first number it takes. Its sum
 * (CRC and length) counts only what it was sent, so its tail is right whenever it
 * ends.
 *
 * Costs: per stream, a small struct; per event, one copy of its bytes while gzip
 * streams exist and, for them, one compression and one crc32; per gzip stream and
 * piece, a crc32_combine. Two compressors (about 300 KB each) once a gzip stream has
 * joined. */
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "io/ob_fanout.h"

#define FANOUT_INLINE_MAX 16384 /* a piece compressed on the loop itself */

struct ob_fanout_sub {
  ob_httpd_stream *st;
  int gz;
  ob_gzip_sum sum;  /* what its gzip stream held so far */
  uint64_t from;    /* the first piece it takes */
  ob_fanout_sub *prev, *next;
};

typedef struct piece {
  struct piece *next;
  uint64_t seq;
  ob_buf text, gz;
  ob_gzip_sum sum;
  int rc;   /* compression: 0, or -1 failed */
  int done; /* compressed */
  int end;  /* not bytes: the streams end here */
} piece;

struct ob_fanout {
  uv_loop_t *loop;
  ob_fanout_sub *subs;
  size_t ngz;
  ob_gzip *gz_loop, *gz_work;
  piece *head, *tail;
  uint64_t seq; /* the next piece's */
  uv_work_t work;
  int working, freeing;
};

ob_fanout *ob_fanout_new(uv_loop_t *loop) {
  ob_fanout *f = ob_xcalloc(1, sizeof *f);
  f->loop = loop;
  f->work.data = f;
  return f;
}

/* The loop's compressor, made when first needed (NULL: zlib cannot be loaded). */
static ob_gzip *loop_gz(ob_fanout *f) {
  ob_error err;
  if (!f->gz_loop)
    f->gz_loop = ob_gzip_new(&err);
  return f->gz_loop;
}

int ob_fanout_piece(ob_fanout *f, const char *data, size_t len, ob_buf *out) {
  ob_gzip *g = loop_gz(f);
  return g ? ob_gzip_piece(g, data, len, out) : -1;
}

ob_fanout_sub *ob_fanout_join(ob_fanout *f, ob_httpd_stream *st, int gz, ob_gzip_sum sum) {
  ob_fanout_sub *s = ob_xcalloc(1, sizeof *s);
  s->st = st;
  s->gz = gz;
  s->sum = sum;
  s->from = f->seq;
  s->next = f->subs;
  if (f->subs)
    f->subs->prev = s;
  f->subs = s;
  f->ngz += gz != 0;
  return s;
}

void ob_fanout_leave(ob_fanout *f, ob_fanout_sub *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    f->subs = s->next;
  if (s->next)
    s->next->prev = s->prev;
  f->ngz -= s->gz != 0;
  free(s);
}

void ob_fanout_end_sub(ob_fanout_sub *s) {
  if (s->gz) {
    ob_buf t;
    ob_buf_init(&t);
    ob_gzip_tail(&t, s->sum);
    ob_httpd_stream_send(s->st, t.data, t.len);
    ob_buf_free(&t);
  }
  ob_httpd_stream_end(s->st);
}

static void piece_free(piece *p) {
  ob_buf_free(&p->text);
  ob_buf_free(&p->gz);
  free(p);
}

/* A compressed piece (or an end) to the gzip streams that take it. */
static void deliver(ob_fanout *f, const piece *p) {
  for (ob_fanout_sub *s = f->subs; s; s = s->next) {
    if (!s->gz || s->from > p->seq)
      continue;
    if (p->end)
      ob_fanout_end_sub(s);
    else if (p->rc) /* zlib failed: the stream ends; its viewer comes again */
      ob_httpd_stream_end(s->st);
    else if (ob_httpd_stream_send(s->st, p->gz.data, p->gz.len) == 0)
      ob_gzip_sum_add(&s->sum, p->sum);
  }
}

static void compress(ob_gzip *g, piece *p) {
  p->rc = g ? ob_gzip_piece(g, p->text.data, p->text.len, &p->gz) : -1;
  p->sum = ob_gzip_sum_of(p->text.data, p->text.len);
  p->done = 1;
}

static void on_work(uv_work_t *w) { /* a thread of the pool: the piece is its own */
  ob_fanout *f = w->data;
  compress(f->gz_work, f->head);
}

static void pump(ob_fanout *f);

static void on_worked(uv_work_t *w, int status) {
  ob_fanout *f = w->data;
  f->working = 0;
  if (status != 0) /* cancelled: it never ran */
    compress(NULL, f->head);
  if (f->freeing) {
    ob_fanout_free(f);
    return;
  }
  pump(f);
}

/* What is compressed goes, in order; then the next piece is compressed, here when it
 * is small, else by the pool. */
static void pump(ob_fanout *f) {
  while (f->head && !f->working) {
    piece *p = f->head;
    if (!p->done && !p->end) {
      if (p->text.len > FANOUT_INLINE_MAX) {
        ob_error err;
        if (!f->gz_work)
          f->gz_work = ob_gzip_new(&err);
        if (f->gz_work && uv_queue_work(f->loop, &f->work, on_work, on_worked) == 0) {
          f->working = 1;
          return;
        }
      }
      compress(loop_gz(f), p);
    }
    deliver(f, p);
    f->head = p->next;
    if (!f->head)
      f->tail = NULL;
    piece_free(p);
  }
}

static void enqueue(ob_fanout *f, piece *p) {
  p->seq = f->seq++;
  if (f->tail)
    f->tail->next = p;
  else
    f->head = p;
  f->tail = p;
  pump(f);
}

void ob_fanout_send(ob_fanout *f, const char *data, size_t len) {
  for (ob_fanout_sub *s = f->subs; s; s = s->next)
    if (!s->gz)
      ob_httpd_stream_send(s->st, data, len);
  if (!f->ngz) {
    f->seq++; /* (no gzip stream takes it: a stream that joins later starts after it) */
    return;
  }
  piece *p = ob_xcalloc(1, sizeof *p);
  ob_buf_init(&p->text);
  ob_buf_init(&p->gz);
  ob_buf_add(&p->text, data, len);
  enqueue(f, p);
}

void ob_fanout_end(ob_fanout *f) {
  for (ob_fanout_sub *s = f->subs; s; s = s->next)
    if (!s->gz)
      ob_httpd_stream_end(s->st);
  piece *p = ob_xcalloc(1, sizeof *p);
  ob_buf_init(&p->text);
  ob_buf_init(&p->gz);
  p->end = 1;
  enqueue(f, p);
}

void ob_fanout_free(ob_fanout *f) {
  if (!f)
    return;
  if (f->working) { /* the pool has a piece: freed when it comes back */
    f->freeing = 1;
    return;
  }
  while (f->head) {
    piece *p = f->head;
    f->head = p->next;
    piece_free(p);
  }
  while (f->subs) {
    ob_fanout_sub *s = f->subs;
    f->subs = s->next;
    free(s);
  }
  ob_gzip_free(f->gz_loop);
  ob_gzip_free(f->gz_work);
  free(f);
}
