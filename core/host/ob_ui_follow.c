/* ob_ui_follow.c -- journals followed as they grow, for the viewers of a run's events.
 *
 * A journal viewed by anyone is followed once, whatever the number of its viewers: its
 * file is watched (inotify, through uv_fs_event), and looked at every 100 ms besides,
 * since the journal writer stores its lines through a shared mapping of the file, which
 * inotify does not see (ob_wal.c); what was appended is read from the offset reached,
 * whole lines only (a line being written waits for its newline), and only up to the
 * first zero byte: a live journal's file is grown ahead of its lines, zeros after them
 * (ob_wal.c). A change told is read 50 ms later, with what else came meanwhile: the
 * appends of a busy run are read in batches, not line by line. Each batch becomes one event, `event: records` with the lines as a JSON array
 * (they are JSON texts already: nothing is parsed but an end record), sent to every
 * viewer's stream. A viewer's first event is a snapshot (the run as GET /api/runs/{id}
 * gives it), built after the follower has read up to the file's end, so nothing is
 * lost between the two: a record the snapshot holds may come again in the first batch,
 * and applying it again changes nothing. Viewers share a snapshot (a page opened by
 * fifty people: a run of 10,000 calls is read once, not fifty times, on the loop the
 * run goes on): a viewer who comes later gets the snapshot made for an earlier one and
 * the records sent since, until those pass 4 MB (or the server's own knowledge of the
 * run changes: a call waits for approval); then a new snapshot is made. The top-level end record ends the streams
 * (`event: end`); a file cut shorter (a resume cuts a torn last line) is read on from
 * its new end.
 *
 * A viewer that reads too slowly is cut off by the server (ob_httpd.h), never let grow
 * the server's memory; it reconnects and gets a new snapshot. Every 15 s a comment line
 * keeps proxies from closing a quiet stream.
 *
 * Its viewers' streams are an ob_fanout: a client that takes gzip (a browser does) gets
 * a gzip stream made of pieces each compressed once for all of them, the big ones on
 * the loop's thread pool (ob_fanout.c); a viewer who comes gets the snapshot and the
 * tail as pieces too, kept for the next who comes. The snapshot leaves out what goes
 * without saying (ob_ui.c); with both, 50 viewers of a live 10,000-call run are each
 * sent 230 KB rather than 3 MB, and slow it by about 5% (bench/ui.lua).
 *
 * Costs: per followed journal, a descriptor, an inotify watch, a timer and the bytes of
 * a line not yet whole; per batch, one read and one event string shared by its
 * viewers (each stream queues its own copy), compressed once when gzip viewers have it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ob_mem.h"
#include "host/ob_ui_follow.h"
#include "io/ob_fanout.h"
#include "log/ob_journal.h"

#define FOLLOW_BATCH_MS 50  /* after a change is told, when it is read */
#define FOLLOW_POLL_MS 100  /* and without one, how often the file is looked at (a
                               journal written through a mapping tells inotify nothing) */
#define FOLLOW_PING_MS 15000
#define FOLLOW_TAIL_MAX ((size_t)4 << 20) /* records past a shared snapshot before a new one */

typedef struct journal journal;

typedef struct viewer {
  journal *j;
  ob_httpd_stream *st;
  ob_fanout_sub *sub; /* its place in the journal's fan-out */
  struct viewer *next;
} viewer;

struct journal {
  ob_ui_follow *f;
  char *path;
  int fd;
  long long off;      /* read up to here */
  ob_buf partial;     /* the start of a line not yet whole */
  ob_buf end;         /* once ended: the end event's data ({"exit": N}) */
  ob_buf snap;        /* the last snapshot's event (empty: none to share) */
  ob_buf tail;        /* the records events sent since it was made */
  ob_fanout *fan;     /* its viewers' streams */
  ob_buf snap_gz;     /* snap as a piece, once a viewer who takes gzip needed it */
  ob_buf tail_gz;     /* tail's first tail_gz_of bytes as a piece, likewise */
  size_t tail_gz_of;
  uv_fs_event_t ev;
  uv_timer_t tick;
  int watching, soon, ended, closing, open_handles;
  int refs;           /* its viewers, and 1 while its handles are open: freed at 0 */
  viewer *viewers;
  journal *next;
};

struct ob_ui_follow {
  uv_loop_t *loop;
  ob_ui_snapshot_fn snapshot;
  void *ud;
  journal *list;
  uv_timer_t ping;
  int closing, ping_open;
};

/* --- sending ------------------------------------------------------------------------ */

static void send_all(journal *j, const char *data, size_t len) {
  ob_fanout_send(j->fan, data, len);
}

static void send_event(journal *j, const char *name, const char *json, size_t len) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "event: %s\ndata: ", name);
  ob_buf_add(&b, json, len);
  ob_buf_add(&b, "\n\n", 2);
  send_all(j, b.data, b.len);
  ob_buf_free(&b);
}

/* The run's end: {"exit": N} told, and every stream ended once it is written. */
static void end_all(journal *j, const char *json, size_t len) {
  send_event(j, "end", json, len);
  j->ended = 1;
  ob_buf_add(&j->end, json, len); /* for those who come later */
  ob_fanout_end(j->fan);
}

/* --- reading ------------------------------------------------------------------------ */

/* The top-level run's end record ({"journal":"end", no scope}): its {"exit": N} in out. */
static int end_record(const char *line, size_t len, ob_buf *out) {
  static const char head[] = "{\"journal\":\"end\"";
  if (len < sizeof head - 1 || memcmp(line, head, sizeof head - 1) != 0)
    return 0;
  ob_error err;
  ob_value *v = ob_json_parse(line, len, &err);
  ob_jrec r;
  int top = v && ob_jrec_parse(v, &r, &err) == 1 && r.kind == OB_JREC_END && !r.scope &&
            !r.scope_path;
  if (top)
    ob_buf_addf(out, "{\"exit\":%lld}", r.has_exit ? (long long)r.exit : 0LL);
  ob_unref(v);
  return top;
}

/* Reads what was appended since the last time: its whole lines sent as one event. */
static void catch_up(journal *j) {
  if (j->ended || j->fd < 0)
    return;
  struct stat st;
  if (fstat(j->fd, &st) == 0 && st.st_size < j->off) { /* cut: read on from its end */
    j->off = st.st_size;
    j->partial.len = 0;
  }
  ob_buf batch, end;
  ob_buf_init(&batch);
  ob_buf_init(&end);
  char chunk[65536];
  for (;;) {
    ssize_t n = pread(j->fd, chunk, sizeof chunk, (off_t)j->off);
    if (n <= 0)
      break;
    const char *zero = memchr(chunk, '\0', (size_t)n); /* the file grown ahead: its lines end */
    if (zero)
      n = zero - chunk;
    j->off += n;
    size_t start = 0;
    for (const char *nl; (nl = memchr(chunk + start, '\n', (size_t)n - start)) != NULL;) {
      size_t i = (size_t)(nl - chunk);
      const char *line = chunk + start;
      size_t len = i - start;
      if (j->partial.len) { /* the line began in an earlier read */
        ob_buf_add(&j->partial, chunk + start, len);
        line = j->partial.data;
        len = j->partial.len;
      }
      if (len && (len < 11 || memcmp(line, "{\"journal\":", 11) == 0)) {
        /* a record (start, retry, settled, progress, scope, end...): the data messages
         * (outputs, errors: the bulk of a journal) are not sent; GET /api/runs/ID has them */
        ob_buf_addc(&batch, batch.len ? ',' : '[');
        ob_buf_add(&batch, line, len);
        if (end_record(line, len, &end)) {
          j->partial.len = 0;
          goto done; /* nothing after the end is the run's */
        }
      }
      j->partial.len = 0;
      start = i + 1;
    }
    ob_buf_add(&j->partial, chunk + start, (size_t)n - start);
    if (zero)
      break;
  }
done:
  if (batch.len) {
    ob_buf_addc(&batch, ']');
    send_event(j, "records", batch.data, batch.len);
    if (j->snap.len) { /* what a viewer given the shared snapshot gets after it */
      ob_buf_addf(&j->tail, "event: records\ndata: ");
      ob_buf_add(&j->tail, batch.data, batch.len);
      ob_buf_add(&j->tail, "\n\n", 2);
    }
  }
  if (end.len)
    end_all(j, end.data, end.len);
  ob_buf_free(&batch);
  ob_buf_free(&end);
}

static void on_tick(uv_timer_t *t) {
  journal *j = t->data;
  j->soon = 0;
  catch_up(j);
}

static void on_change(uv_fs_event_t *h, const char *name, int events, int status) {
  journal *j = h->data;
  (void)name;
  (void)events;
  if (status < 0 || j->soon || j->ended)
    return;
  j->soon = 1; /* read in a moment, with whatever else comes meanwhile */
  uv_timer_start(&j->tick, on_tick, FOLLOW_BATCH_MS, FOLLOW_POLL_MS);
}

/* --- journals and viewers ------------------------------------------------------------ */

static void journal_free(journal *j) {
  if (j->fd >= 0)
    close(j->fd);
  ob_buf_free(&j->partial);
  ob_buf_free(&j->end);
  ob_buf_free(&j->snap);
  ob_buf_free(&j->tail);
  ob_buf_free(&j->snap_gz);
  ob_buf_free(&j->tail_gz);
  ob_fanout_free(j->fan);
  free(j->path);
  free(j);
}

static void unref_journal(journal *j) {
  if (--j->refs == 0)
    journal_free(j);
}

static void handle_closed(uv_handle_t *h) {
  journal *j = h->data;
  if (--j->open_handles == 0)
    unref_journal(j);
}

/* Nobody views it any more (or the server closes): off the list, its handles closed;
 * it goes once they are and its last viewer has gone. */
static void journal_drop(journal *j) {
  ob_ui_follow *f = j->f;
  for (journal **p = &f->list; *p; p = &(*p)->next)
    if (*p == j) {
      *p = j->next;
      break;
    }
  j->closing = 1;
  j->open_handles = 1 + j->watching;
  if (j->watching)
    uv_close((uv_handle_t *)&j->ev, handle_closed);
  uv_close((uv_handle_t *)&j->tick, handle_closed);
}

static void viewer_gone(void *ud) {
  viewer *v = ud;
  journal *j = v->j;
  for (viewer **p = &j->viewers; *p; p = &(*p)->next)
    if (*p == v) {
      *p = v->next;
      break;
    }
  ob_fanout_leave(j->fan, v->sub);
  free(v);
  if (!j->viewers && !j->closing)
    journal_drop(j);
  unref_journal(j);
}

static journal *journal_find(ob_ui_follow *f, const char *path) {
  for (journal *j = f->list; j; j = j->next)
    if (!strcmp(j->path, path))
      return j;
  return NULL;
}

/* Where reading a file of size bytes on starts: the start of its last line (before the
 * zeros of a file grown ahead), whole or torn. A snapshot may have left a torn one out;
 * a whole one is read again (a record repeated changes nothing), so that a journal that
 * has ended is seen to have ended (its end record is its last line). */
static long long line_start(int fd, long long size) {
  char buf[4096];
  int text = 0, newline = 0; /* past the zeros; past the last line's own newline */
  for (long long at = size; at > 0;) {
    long long from = at > (long long)sizeof buf ? at - (long long)sizeof buf : 0;
    ssize_t n = pread(fd, buf, (size_t)(at - from), (off_t)from);
    if (n <= 0)
      return at;
    for (ssize_t i = n - 1; i >= 0; i--) {
      if (!text && buf[i] == '\0')
        continue;
      text = 1;
      if (buf[i] != '\n')
        newline = 1; /* in the last line's text */
      else if (newline)
        return from + i + 1;
      else
        newline = 1; /* the last line's own: the line before it ends at the next one */
    }
    at = from;
  }
  return 0;
}

static journal *journal_open(ob_ui_follow *f, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  journal *j = ob_xcalloc(1, sizeof *j);
  j->refs = 1; /* its handles */
  j->f = f;
  j->path = ob_xstrdup(path);
  j->fd = fd;
  j->off = line_start(fd, st.st_size); /* what comes is read from here */
  ob_buf_init(&j->partial);
  ob_buf_init(&j->end);
  ob_buf_init(&j->snap);
  ob_buf_init(&j->tail);
  ob_buf_init(&j->snap_gz);
  ob_buf_init(&j->tail_gz);
  j->fan = ob_fanout_new(f->loop);
  uv_timer_init(f->loop, &j->tick);
  j->tick.data = j;
  uv_timer_start(&j->tick, on_tick, FOLLOW_POLL_MS, FOLLOW_POLL_MS);
  if (uv_fs_event_init(f->loop, &j->ev) == 0) { /* if it cannot start, the poll alone */
    j->ev.data = j;
    j->watching = 1; /* (the handle is made: it is closed with the journal) */
    uv_fs_event_start(&j->ev, on_change, path, 0);
  }
  j->next = f->list;
  f->list = j;
  return j;
}

/* --- the API -------------------------------------------------------------------------- */

static void on_ping(uv_timer_t *t) {
  ob_ui_follow *f = t->data;
  for (journal *j = f->list; j; j = j->next)
    send_all(j, ": ping\n\n", 8);
}

ob_ui_follow *ob_ui_follow_new(uv_loop_t *loop, ob_ui_snapshot_fn snapshot, void *ud) {
  ob_ui_follow *f = ob_xcalloc(1, sizeof *f);
  f->loop = loop;
  f->snapshot = snapshot;
  f->ud = ud;
  uv_timer_init(loop, &f->ping);
  f->ping.data = f;
  f->ping_open = 1;
  uv_timer_start(&f->ping, on_ping, FOLLOW_PING_MS, FOLLOW_PING_MS);
  uv_unref((uv_handle_t *)&f->ping);
  return f;
}

/* What a viewer who comes gets first, into out: the shared snapshot, the records since,
 * the end if there was one; as they are, or (gz) as pieces of a gzip stream, its header
 * first, its tail after an end, *sum what its pieces held. -1: zlib cannot be had or
 * failed (out as it was). */
static int first_bytes(journal *j, int gz, ob_buf *out, ob_gzip_sum *sum) {
  ob_buf end;
  ob_buf_init(&end);
  if (j->ended) { /* the run had ended: the snapshot says all, and its end follows */
    ob_buf_addf(&end, "event: end\ndata: ");
    ob_buf_add(&end, j->end.data, j->end.len);
    ob_buf_add(&end, "\n\n", 2);
  }
  int rc = 0;
  if (!gz) {
    ob_buf_add(out, j->snap.data, j->snap.len);
    ob_buf_add(out, j->tail.data ? j->tail.data : "", j->tail.len);
    ob_buf_add(out, end.data ? end.data : "", end.len);
  } else {
    size_t was = out->len;
    if (!j->snap_gz.len)
      rc |= ob_fanout_piece(j->fan, j->snap.data, j->snap.len, &j->snap_gz);
    if (!rc && j->tail_gz_of != j->tail.len) { /* records came since it was made */
      j->tail_gz.len = 0;
      rc |= ob_fanout_piece(j->fan, j->tail.data ? j->tail.data : "", j->tail.len, &j->tail_gz);
      j->tail_gz_of = j->tail.len;
    }
    if (!rc) {
      ob_gzip_head(out);
      ob_buf_add(out, j->snap_gz.data, j->snap_gz.len);
      ob_buf_add(out, j->tail_gz.data ? j->tail_gz.data : "", j->tail_gz.len);
      *sum = ob_gzip_sum_of(j->snap.data, j->snap.len);
      ob_gzip_sum_add(sum, ob_gzip_sum_of(j->tail.data, j->tail.len));
      if (end.len) {
        rc |= ob_fanout_piece(j->fan, end.data, end.len, out);
        ob_gzip_sum_add(sum, ob_gzip_sum_of(end.data, end.len));
        ob_gzip_tail(out, *sum);
      }
    }
    if (rc) { /* a piece made in part must not be shared */
      j->snap_gz.len = j->tail_gz.len = j->tail_gz_of = 0;
      out->len = was;
    }
  }
  ob_buf_free(&end);
  return rc ? -1 : 0;
}

int ob_ui_follow_attach(ob_ui_follow *f, const char *path, int gzip, ob_httpd_res *res) {
  journal *j = journal_find(f, path);
  int fresh = !j;
  if (!j && !(j = journal_open(f, path))) {
    res->status = 404;
    ob_buf_addf(&res->body, "{\"error\":\"the journal cannot be read\"}");
    return -1;
  }
  catch_up(j); /* those who view it already are told all there is, first */
  if (!j->snap.len || j->tail.len > FOLLOW_TAIL_MAX) { /* else: shared, with what came since */
    j->snap.len = j->snap_gz.len = 0;
    ob_buf_addf(&j->snap, "retry: 1000\nevent: snapshot\ndata: ");
    if (f->snapshot(f->ud, path, &j->snap) != 0) {
      j->snap.len = 0;
      if (fresh)
        journal_drop(j);
      res->status = 404;
      ob_buf_addf(&res->body, "{\"error\":\"no run of that id\"}");
      return -1;
    }
    ob_buf_add(&j->snap, "\n\n", 2);
    j->tail.len = j->tail_gz.len = j->tail_gz_of = 0;
  }
  viewer *v = ob_xcalloc(1, sizeof *v);
  v->j = j;
  ob_gzip_sum sum = {0, 0};
  if (gzip && first_bytes(j, 1, &res->body, &sum) != 0)
    gzip = 0; /* without zlib: as it is */
  if (!gzip)
    first_bytes(j, 0, &res->body, &sum);
  res->content_type = "text/event-stream";
  if (gzip)
    snprintf(res->extra + strlen(res->extra), sizeof res->extra - strlen(res->extra),
             "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n");
  v->st = ob_httpd_res_stream(res, viewer_gone, v);
  v->sub = ob_fanout_join(j->fan, v->st, gzip, sum);
  v->next = j->viewers;
  j->viewers = v;
  j->refs++;
  if (j->ended)
    ob_httpd_stream_end(v->st);
  return 0;
}

void ob_ui_follow_push(ob_ui_follow *f, const char *path, const char *name, const char *json,
                       size_t len) {
  journal *j = journal_find(f, path);
  if (j)
    j->snap.len = j->snap_gz.len = 0; /* what the server knows changed: the next
                                          snapshot is made anew */
  if (j && !j->ended)
    send_event(j, name, json, len);
}

size_t ob_ui_follow_viewers(const ob_ui_follow *f, const char *path) {
  size_t n = 0;
  for (journal *j = f->list; j; j = j->next)
    if (!path || !strcmp(j->path, path))
      for (viewer *v = j->viewers; v; v = v->next)
        n++;
  return n;
}

void ob_ui_follow_close(ob_ui_follow *f) {
  if (!f || f->closing)
    return;
  f->closing = 1;
  while (f->list) { /* each goes when its handles are closed and its viewers gone */
    journal *j = f->list;
    for (viewer *v = j->viewers; v; v = v->next)
      ob_fanout_end_sub(v->sub);
    journal_drop(j);
  }
  if (f->ping_open) {
    f->ping_open = 0;
    uv_close((uv_handle_t *)&f->ping, NULL);
  }
}

void ob_ui_follow_free(ob_ui_follow *f) {
  if (!f)
    return;
  ob_ui_follow_close(f); /* (the loop must run for its handles before it is closed) */
  free(f);
}
