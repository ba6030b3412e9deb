/* ob_graph_svg.c -- DOT laid out as SVG by Graphviz: `dot -Tsvg` as a child process
 * on a libuv loop (ob_graph.h's ob_graph_svg), bounded in time and in output.
 *
 * Design. One job per drawing: the DOT text (copied) goes to dot's standard input, its
 * standard output is gathered, the start of its standard error kept for the message
 * when it fails. The input is one end of a socket pair (the other is dot's stdin),
 * written here from a uv_poll_t with send(MSG_NOSIGNAL): a dot that dies before reading
 * it all (a syntax error, a kill) makes the write fail with EPIPE rather than raise a
 * SIGPIPE that would end the whole process (libuv's own writes would). Standard output
 * and error are libuv pipes. A timer kills dot (SIGKILL) after OB_GRAPH_SVG_TIMEOUT_MS;
 * output past OB_GRAPH_SVG_MAX kills it too. The job ends when dot has exited and both
 * its outputs are at their end: every handle is closed, and when the last one is, the
 * callback is called (so a caller may stop its loop in it) and the job freed. A spawn
 * that fails (dot not on PATH) ends the same way, from the close callbacks: the
 * callback never runs inside ob_graph_svg.
 *
 * ob_graph_svg_sync runs a job on a loop of its own. ob_graph_journal_svg reads the
 * journal into DOT first (ob_graph.c), on the caller's thread.
 *
 * Costs: the DOT text copied once, the SVG gathered in memory (at most
 * OB_GRAPH_SVG_MAX), 64 KB of read buffer; one process, five handles. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/ob_mem.h"
#include "host/ob_graph.h"

#define ERR_KEPT 2048        /* what dot says on its standard error, kept for the message */
#define READ_CHUNK (64 << 10) /* one read at a time into the job's buffer */

typedef struct svg_job {
  uv_process_t proc;
  uv_pipe_t out, err;
  uv_poll_t poll; /* the input socket's writability */
  uv_timer_t timer;
  int in_fd;      /* our end of dot's stdin, -1 once closed */
  int polling;    /* poll initialised and not yet closed */
  int open;       /* handles not yet closed */
  int ending;     /* the handles are closing: the callback comes when the last one is */
  char *dot;
  size_t len, sent;
  ob_buf svg, errtext;
  int exited, out_done, err_done, timed_out, too_big;
  int64_t status;
  int term_signal;
  char why[300]; /* set when the spawn failed */
  ob_graph_svg_cb cb;
  void *ud;
  char rbuf[READ_CHUNK];
} svg_job;

static void deliver(svg_job *j) {
  ob_buf msg;
  ob_buf_init(&msg);
  if (j->why[0]) {
    ob_buf_addf(&msg, "%s", j->why);
  } else if (j->timed_out) {
    ob_buf_addf(&msg, "Graphviz's dot took more than %d s to lay the graph out (killed); "
                      "draw fewer calls",
                OB_GRAPH_SVG_TIMEOUT_MS / 1000);
  } else if (j->too_big) {
    ob_buf_addf(&msg, "Graphviz's dot wrote more than %zu MB of SVG (killed); draw fewer calls",
                OB_GRAPH_SVG_MAX >> 20);
  } else if (j->term_signal || j->status) {
    if (j->term_signal)
      ob_buf_addf(&msg, "Graphviz's dot was killed by signal %d", j->term_signal);
    else
      ob_buf_addf(&msg, "Graphviz's dot failed (exit %d)", (int)j->status);
    if (j->errtext.len) { /* its first line says why */
      size_t n = strcspn(j->errtext.data, "\n");
      ob_buf_addf(&msg, ": ");
      ob_buf_add_escaped(&msg, j->errtext.data, n, 0);
    }
  } else if (!j->svg.len) {
    ob_buf_addf(&msg, "Graphviz's dot wrote nothing");
  }
  if (msg.len)
    j->cb(j->ud, 0, NULL, 0, msg.data);
  else
    j->cb(j->ud, 1, j->svg.data, j->svg.len, NULL);
  ob_buf_free(&msg);
  ob_buf_free(&j->svg);
  ob_buf_free(&j->errtext);
  free(j->dot);
  free(j);
}

static void on_close(uv_handle_t *h) {
  svg_job *j = h->data;
  if (--j->open == 0 && j->ending)
    deliver(j);
}

static void close_poll(uv_handle_t *h) {
  svg_job *j = h->data;
  close(j->in_fd); /* after the poll handle lets go of it */
  j->in_fd = -1;
  on_close(h);
}

/* No more input for dot: its stdin ends (EOF now, the descriptor once the poll is
 * closed). */
static void stop_writing(svg_job *j) {
  if (!j->polling)
    return;
  j->polling = 0;
  shutdown(j->in_fd, SHUT_WR);
  uv_poll_stop(&j->poll);
  uv_close((uv_handle_t *)&j->poll, close_poll);
}

static void close_all(svg_job *j) {
  j->ending = 1;
  j->open++; /* held while closing, so that the count cannot reach 0 midway */
  stop_writing(j);
  uv_handle_t *hs[] = {(uv_handle_t *)&j->proc, (uv_handle_t *)&j->out, (uv_handle_t *)&j->err,
                       (uv_handle_t *)&j->timer};
  for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
    if (!uv_is_closing(hs[i]))
      uv_close(hs[i], on_close);
  if (--j->open == 0)
    deliver(j); /* not reached: the closes above call back later */
}

static void check_done(svg_job *j) {
  if (j->exited && j->out_done && j->err_done && !j->ending)
    close_all(j);
}

static void kill_dot(svg_job *j) {
  if (!j->exited)
    uv_process_kill(&j->proc, SIGKILL);
}

static void on_writable(uv_poll_t *p, int status, int events) {
  svg_job *j = p->data;
  (void)events;
  if (status < 0) {
    stop_writing(j);
    return;
  }
  while (j->sent < j->len) {
    size_t n = j->len - j->sent;
    ssize_t w = send(j->in_fd, j->dot + j->sent, n > READ_CHUNK ? READ_CHUNK : n,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      j->sent += (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return; /* called again when there is room */
    } else {
      break; /* dot is gone (EPIPE): its exit status says why */
    }
  }
  stop_writing(j);
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf) {
  svg_job *j = h->data;
  (void)want;
  *buf = uv_buf_init(j->rbuf, sizeof j->rbuf);
}

static void on_out(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  svg_job *j = s->data;
  (void)buf;
  if (n > 0 && j->svg.len + (size_t)n > OB_GRAPH_SVG_MAX) {
    j->too_big = 1;
    kill_dot(j);
    n = UV_EOF;
  }
  if (n > 0) {
    ob_buf_add(&j->svg, j->rbuf, (size_t)n);
  } else if (n < 0) {
    uv_read_stop(s);
    j->out_done = 1;
    check_done(j);
  }
}

static void on_err(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  svg_job *j = s->data;
  (void)buf;
  if (n > 0 && j->errtext.len < ERR_KEPT) {
    size_t room = ERR_KEPT - j->errtext.len;
    ob_buf_add(&j->errtext, j->rbuf, (size_t)n < room ? (size_t)n : room);
  } else if (n < 0) {
    uv_read_stop(s);
    j->err_done = 1;
    check_done(j);
  }
}

static void on_exit_(uv_process_t *p, int64_t status, int term_signal) {
  svg_job *j = p->data;
  j->exited = 1;
  j->status = status;
  j->term_signal = term_signal;
  check_done(j);
}

static void on_timer(uv_timer_t *t) {
  svg_job *j = t->data;
  j->timed_out = 1;
  kill_dot(j);
  /* what it wrote is not waited for any more: its exit is enough */
  if (!j->out_done)
    uv_read_stop((uv_stream_t *)&j->out);
  if (!j->err_done)
    uv_read_stop((uv_stream_t *)&j->err);
  j->out_done = j->err_done = 1;
  check_done(j);
}

void ob_graph_svg(uv_loop_t *loop, const char *dot, size_t len, ob_graph_svg_cb cb, void *ud) {
  svg_job *j = ob_xcalloc(1, sizeof *j);
  j->cb = cb;
  j->ud = ud;
  j->dot = ob_xmalloc(len ? len : 1);
  if (len)
    memcpy(j->dot, dot, len);
  j->len = len;
  j->in_fd = -1;
  ob_buf_init(&j->svg);
  ob_buf_init(&j->errtext);
  uv_pipe_init(loop, &j->out, 0);
  uv_pipe_init(loop, &j->err, 0);
  uv_timer_init(loop, &j->timer);
  j->proc.data = j->out.data = j->err.data = j->timer.data = j->poll.data = j;
  j->open = 4; /* out, err, timer, and the process (initialised by uv_spawn either way) */

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    snprintf(j->why, sizeof j->why, "cannot run Graphviz's dot: socketpair: %s", strerror(errno));
    uv_close((uv_handle_t *)&j->out, on_close);
    uv_close((uv_handle_t *)&j->err, on_close);
    uv_close((uv_handle_t *)&j->timer, on_close);
    j->open = 3;
    j->ending = 1;
    return;
  }
  fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK); /* ours only: dot's blocks */
  char *args[] = {"dot", "-Tsvg", NULL};
  uv_stdio_container_t io[3];
  io[0].flags = UV_INHERIT_FD;
  io[0].data.fd = sv[1];
  io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  io[1].data.stream = (uv_stream_t *)&j->out;
  io[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  io[2].data.stream = (uv_stream_t *)&j->err;
  uv_process_options_t o;
  memset(&o, 0, sizeof o);
  o.file = "dot";
  o.args = args;
  o.stdio = io;
  o.stdio_count = 3;
  o.exit_cb = on_exit_;
  int rc = uv_spawn(loop, &j->proc, &o);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    if (rc == UV_ENOENT)
      snprintf(j->why, sizeof j->why,
               "Graphviz's dot is not installed (no dot program on PATH): install graphviz");
    else
      snprintf(j->why, sizeof j->why, "cannot run Graphviz's dot: %s", uv_strerror(rc));
    j->exited = j->out_done = j->err_done = 1;
    close_all(j);
    return;
  }
  j->in_fd = sv[0];
  uv_poll_init(loop, &j->poll, j->in_fd);
  j->poll.data = j;
  j->polling = 1;
  j->open++;
  uv_poll_start(&j->poll, UV_WRITABLE, on_writable);
  uv_read_start((uv_stream_t *)&j->out, on_alloc, on_out);
  uv_read_start((uv_stream_t *)&j->err, on_alloc, on_err);
  uv_timer_start(&j->timer, on_timer, OB_GRAPH_SVG_TIMEOUT_MS, 0);
}

typedef struct sync_result {
  ob_buf *svg;
  ob_error *err;
  int rc;
} sync_result;

static void sync_done(void *ud, int ok, const char *svg, size_t len, const char *err) {
  sync_result *r = ud;
  if (ok) {
    ob_buf_add(r->svg, svg, len);
    r->rc = OB_OK;
  } else {
    r->rc = ob_error_set(r->err, OB_EIO, 0, "%s", err);
  }
}

int ob_graph_svg_sync(const char *dot, size_t len, ob_buf *svg, ob_error *err) {
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0)
    return ob_error_set(err, OB_EIO, 0, "cannot run Graphviz's dot: no event loop");
  sync_result r = {svg, err, OB_EIO};
  ob_graph_svg(&loop, dot, len, sync_done, &r);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return r.rc;
}

int ob_graph_journal_svg(uv_loop_t *loop, const char *path, size_t max_calls,
                         ob_graph_svg_cb cb, void *ud, ob_error *err) {
  ob_buf dot;
  ob_buf_init(&dot);
  int rc = ob_graph_journal_dot(path, max_calls, &dot, NULL, err);
  if (rc == OB_OK)
    ob_graph_svg(loop, dot.data, dot.len, cb, ud);
  ob_buf_free(&dot);
  return rc;
}
