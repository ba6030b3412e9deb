/* ob_progress.c -- the progress line: "done 12 · running 3 · waiting 5 ·
 * skipped 1 · failed 0 · 1.2s", kept as the last line of stderr while calls
 * run, when stderr is a terminal.
 *
 * Design
 * ------
 * Anything else written to the terminal must erase the line first. The CLI's own
 * messages (the failure lines, notes, tracebacks: ob_cli.c) clear it through
 * ob_progress_clear. The tools write to the terminal too (io.stderr, print,
 * io.write): the line makes two streams (glibc's fopencookie) whose every write
 * erases the line first, and the CLI hands them to each engine as its tools'
 * standard files (ob_cli_engine_stdio) before the tools load. The process's own
 * stdout and stderr are left as they are. The line is redrawn on scheduler events at
 * most ten times a second, by a 100 ms timer (unref'd: it never keeps the loop
 * alive) for the elapsed time, always on run_done, and never after a partial
 * line a tool wrote (an answer may be awaited there). A loop runs one
 * plan after another: the counts of the runs that ended are kept as a base
 * the current run's counts are added to.
 *
 * A run on threads (ob_shard.h) has an engine per thread, whose tools write through
 * the same streams from their threads, so the line's state is kept under a lock:
 * each write through a stream and each draw take it (uncontended: a few ns).
 *
 * Costs: nothing when stderr is no terminal (no line, no streams). With one,
 * the tools' stderr is unbuffered and their stdout line-buffered, as the
 * process's, each write costing one more write(2) (the erase) only while the
 * line is shown; a draw
 * walks the run's calls (O(calls)) and happens at most ten times a second. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/ob_progress.h"

typedef struct pstream {
  ob_progress *pg;
  int fd;
} pstream;

struct ob_progress {
  FILE *err, *out;           /* the tools' streams (out NULL: stdout is no terminal) */
  pstream err_side, out_side;
  int shown;                 /* the line is on the screen */
  int at_line_start;         /* the last byte anyone wrote ended a line */
  int color;
  uv_timer_t timer;
  int timer_open;
  uint64_t t0, last_draw;    /* uv_hrtime(), ns */
  const ob_run *run;         /* the run drawn, or NULL between runs */
  size_t ncalls;
  size_t base[6];            /* by ob_call_state: the counts of loop steps already run */
  ob_progress_counts_fn counts; /* or the counts come from here (a run on threads) */
  void *counts_ud;
  pthread_mutex_t lock; /* the line's state: a run on threads writes to stderr from
                           its threads (a failed call's note) while the loop's draws */
};

/* The counts drawn: the base plus the run's calls, or what counts says. */
static int progress_counts(ob_progress *pg, size_t n[6]) {
  memcpy(n, pg->base, 6 * sizeof *n);
  if (pg->counts) {
    size_t c[6];
    pg->counts(pg->counts_ud, c);
    for (int i = 0; i < 6; i++)
      n[i] += c[i];
    return 1;
  }
  if (!pg->run)
    return 0;
  for (size_t i = 0; i < pg->ncalls; i++)
    n[ob_run_call_state(pg->run, i)]++;
  return 1;
}

/* The line of the process (one terminal: at most one line), for ob_progress_clear. */
static ob_progress *current;

static int write_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static void progress_erase(ob_progress *pg) {
  if (pg && pg->shown) {
    write_all(STDERR_FILENO, "\r\033[K", 4);
    pg->shown = 0;
  }
}

static ssize_t pstream_write(void *cookie, const char *buf, size_t size) {
  pstream *ps = cookie;
  if (!size)
    return 0;
  pthread_mutex_lock(&ps->pg->lock);
  progress_erase(ps->pg);
  int rc = write_all(ps->fd, buf, size);
  if (rc == 0)
    ps->pg->at_line_start = buf[size - 1] == '\n';
  pthread_mutex_unlock(&ps->pg->lock);
  return rc < 0 ? -1 : (ssize_t)size;
}

static FILE *pstream_open(pstream *ps, ob_progress *pg, int fd, int mode) {
  cookie_io_functions_t io = {.write = pstream_write};
  ps->pg = pg;
  ps->fd = fd;
  FILE *f = fopencookie(ps, "w", io);
  if (f)
    setvbuf(f, NULL, mode, BUFSIZ);
  return f;
}

/* The progress line, when stderr is a terminal that can erase a line and
 * nothing else needs it (--events stderr, --approve asking there). */
ob_progress *ob_progress_install(int approve, const char *events) {
  const char *term = getenv("TERM"), *nc = getenv("NO_COLOR");
  if (!isatty(STDERR_FILENO) || (term && !strcmp(term, "dumb")) || approve ||
      (events && !strcmp(events, "stderr")))
    return NULL;
  ob_progress *pg = calloc(1, sizeof *pg);
  if (!pg)
    abort();
  pg->at_line_start = 1;
  pg->color = !(nc && *nc);
  pthread_mutex_init(&pg->lock, NULL);
  if (!(pg->err = pstream_open(&pg->err_side, pg, STDERR_FILENO, _IONBF))) {
    pthread_mutex_destroy(&pg->lock);
    free(pg);
    return NULL;
  }
  if (isatty(STDOUT_FILENO))
    pg->out = pstream_open(&pg->out_side, pg, STDOUT_FILENO, _IOLBF);
  current = pg;
  return pg;
}

FILE *ob_progress_out(const ob_progress *pg) { return pg ? pg->out : NULL; }
FILE *ob_progress_err(const ob_progress *pg) { return pg ? pg->err : NULL; }

void ob_progress_clear(void) {
  ob_progress *pg = current;
  if (!pg)
    return;
  pthread_mutex_lock(&pg->lock);
  progress_erase(pg);
  pg->at_line_start = 1; /* the CLI writes whole lines: after its, a line begins */
  pthread_mutex_unlock(&pg->lock);
}

/* Closes the tools' streams and frees pg (after the engines, which hold the streams). */
void ob_progress_remove(ob_progress *pg) {
  if (!pg)
    return;
  current = NULL;
  progress_erase(pg);
  if (pg->out)
    fclose(pg->out);
  fclose(pg->err);
  pthread_mutex_destroy(&pg->lock);
  free(pg);
}

static void progress_draw_locked(ob_progress *pg);

static void progress_draw(ob_progress *pg) {
  pthread_mutex_lock(&pg->lock);
  progress_draw_locked(pg);
  pthread_mutex_unlock(&pg->lock);
}

static void progress_draw_locked(ob_progress *pg) {
  size_t n[6];
  if (!pg->at_line_start || !progress_counts(pg, n))
    return;
  uint64_t now = uv_hrtime();
  const char *red = pg->color && n[OB_CALL_FAILED] ? "\033[31m" : "";
  const char *off = *red ? "\033[0m" : "";
  char line[256];
  int len = snprintf(line, sizeof line,
                     "\rdone %zu \xC2\xB7 running %zu \xC2\xB7 waiting %zu \xC2\xB7 skipped %zu "
                     "\xC2\xB7 %sfailed %zu%s \xC2\xB7 %.1fs",
                     n[OB_CALL_DONE], n[OB_CALL_RUNNING], n[OB_CALL_WAITING] + n[OB_CALL_READY],
                     n[OB_CALL_SKIPPED], red, n[OB_CALL_FAILED], off,
                     (double)(now - pg->t0) / 1e9);
  if (len < 0 || (size_t)len >= sizeof line)
    return;
  /* a line wider than the terminal would wrap, and \r would not reach its start */
  struct winsize ws;
  size_t cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
  size_t shown = 0, cut = 0;
  for (size_t i = 1; i < (size_t)len; i++) {
    if (line[i] == '\033') { /* an SGR sequence takes no column */
      while (i < (size_t)len && line[i] != 'm')
        i++;
      continue;
    }
    if (((unsigned char)line[i] & 0xC0) != 0x80 && ++shown == cols) {
      cut = i;
      break;
    }
  }
  if (cut)
    len = (int)cut;
  write_all(STDERR_FILENO, line, (size_t)len);
  write_all(STDERR_FILENO, "\033[K", 3);
  if (cut && *off)
    write_all(STDERR_FILENO, off, strlen(off));
  pg->shown = 1;
  pg->last_draw = now;
}

static void progress_tick(uv_timer_t *t) { progress_draw(t->data); }

/* On a scheduler event: at most ten draws a second, but always the last. */
void ob_progress_event(ob_progress *pg, const ob_event *ev) {
  if (pg && (ev->type == OB_EV_RUN_DONE || uv_hrtime() - pg->last_draw >= 100000000u))
    progress_draw(pg);
}

void ob_progress_start(ob_progress *pg, uv_loop_t *loop) {
  if (!pg)
    return;
  pg->t0 = uv_hrtime();
  uv_timer_init(loop, &pg->timer);
  pg->timer.data = pg;
  uv_timer_start(&pg->timer, progress_tick, 100, 100);
  uv_unref((uv_handle_t *)&pg->timer);
  pg->timer_open = 1;
}

void ob_progress_close_timer(ob_progress *pg) {
  if (pg && pg->timer_open) {
    uv_close((uv_handle_t *)&pg->timer, NULL);
    pg->timer_open = 0;
  }
}

void ob_progress_set_run(ob_progress *pg, const ob_run *run, size_t ncalls) {
  if (pg) {
    pg->run = run;
    pg->ncalls = ncalls;
  }
}

void ob_progress_set_counts(ob_progress *pg, ob_progress_counts_fn fn, void *ud) {
  if (pg) {
    pg->counts = fn;
    pg->counts_ud = ud;
  }
}

/* A run ends: its counts join the base (loop runs several), the line goes. */
void ob_progress_end_run(ob_progress *pg) {
  if (!pg)
    return;
  size_t n[6];
  pthread_mutex_lock(&pg->lock);
  if (progress_counts(pg, n))
    memcpy(pg->base, n, sizeof n);
  pg->base[OB_CALL_RUNNING] = pg->base[OB_CALL_WAITING] = pg->base[OB_CALL_READY] = 0;
  pg->run = NULL;
  pg->counts = NULL;
  progress_erase(pg);
  pthread_mutex_unlock(&pg->lock);
}
