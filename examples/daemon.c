/* daemon.c -- an example host: an automation daemon that watches a folder and runs
 * every plan file dropped into it, writing the answer beside the plan.
 *
 *   daemon [--tools PATH]... [--once N] [--timeout MS] FOLDER
 *
 * For each FOLDER/NAME.json (not a dotfile, not a result) it writes
 * NAME.json.result.json, the run's final output, once the run is done; a plan
 * that cannot run (bad JSON, unknown tool, a cycle ...) gets NAME.json.error.txt
 * with every problem instead, and so does a run in which calls failed (next to
 * its result). Dropping a changed plan runs it again. Plans already answered
 * (a result newer than the plan) are left alone when the daemon starts.
 *
 * --once N stops after N plans were answered (exit 0); --timeout MS gives up
 * after MS milliseconds (exit 1): both for tests and scripts. Otherwise it runs
 * until SIGINT or SIGTERM (exit 0).
 *
 * Everything happens on one libuv loop: the folder watch (uv_fs_event), a short
 * settle timer per file (a plan being copied in arrives in pieces; it is read
 * once it has been quiet for SETTLE_MS), and every run, side by side, on one
 * engine. Uses only the public API, <obelus.h>. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup, st_mtim; and uv.h needs POSIX types */
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <obelus.h>

#define SETTLE_MS 100
#define MAX_TOOLS 16

typedef struct watcher watcher;

/* One plan file of the folder, known since it was first seen. */
typedef struct job {
  struct job *next;
  watcher *d;
  char *name;               /* file name within the folder */
  uv_timer_t settle;        /* fires once the file has been quiet for SETTLE_MS */
  obelus_run *run;          /* while a run of it is going on */
  struct timespec answered; /* mtime of the version last answered; 0: none */
  char *failures;           /* failed calls of the current run, one a line */
  size_t nfailures;
  uint64_t started_ms;
} job;

struct watcher {
  uv_loop_t loop;
  obelus_engine *engine;
  const char *folder;
  uv_fs_event_t watch;
  uv_signal_t sigint, sigterm;
  uv_timer_t timeout;
  job *jobs;
  long once;     /* stop after this many answers; 0: never */
  long answered; /* plans answered so far (results and errors) */
  int status;    /* the exit status */
};

/* ---- files beside the plan ---- */

static char *path_of(const watcher *d, const char *name, const char *suffix) {
  size_t n = strlen(d->folder) + strlen(name) + strlen(suffix) + 3;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/%s%s", d->folder, name, suffix);
  return p;
}

/* Writes text to FOLDER/NAME+suffix through a dotfile and a rename, so that
 * whoever watches the folder never reads half an answer. */
static void write_beside(const watcher *d, const char *name, const char *suffix, const char *text) {
  char *dest = path_of(d, name, suffix);
  size_t n = strlen(d->folder) + strlen(name) + strlen(suffix) + 8;
  char *tmp = malloc(n);
  if (!dest || !tmp)
    goto out;
  snprintf(tmp, n, "%s/.%s%s.tmp", d->folder, name, suffix);
  FILE *f = fopen(tmp, "w");
  if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0 || fclose(f) != 0 || rename(tmp, dest) != 0)
    fprintf(stderr, "daemon: cannot write %s\n", dest);
out:
  free(dest);
  free(tmp);
}

static void remove_beside(const watcher *d, const char *name, const char *suffix) {
  char *p = path_of(d, name, suffix);
  if (p)
    remove(p);
  free(p);
}

static int newer_or_same(struct timespec a, struct timespec b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec >= b.tv_nsec);
}

static int is_plan_name(const char *name) {
  size_t n = strlen(name);
  return name[0] != '.' && n > 5 && !strcmp(name + n - 5, ".json") &&
         !(n > 12 && !strcmp(name + n - 12, ".result.json"));
}

/* ---- answering ---- */

static void stop(watcher *d, int status) {
  d->status = status;
  uv_stop(&d->loop);
}

static void answered(job *j) {
  watcher *d = j->d;
  d->answered++;
  if (d->once && d->answered >= d->once)
    stop(d, 0);
}

static void on_event(obelus_run *run, const obelus_event *ev, void *data) {
  job *j = data;
  (void)run;
  if (ev->type != OBELUS_EVENT_FAILED)
    return;
  size_t add = strlen(ev->call_id) + strlen(ev->tool) + strlen(ev->reason ? ev->reason : "") + 16;
  char *grown = realloc(j->failures, j->nfailures + add);
  if (!grown)
    return;
  j->failures = grown;
  j->nfailures += (size_t)snprintf(j->failures + j->nfailures, add, "call %s (%s): %s\n",
                                   ev->call_id, ev->tool, ev->reason ? ev->reason : "failed");
}

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  job *j = data;
  watcher *d = j->d;
  write_beside(d, j->name, ".result.json", output);
  if (status == 0)
    remove_beside(d, j->name, ".error.txt"); /* an earlier version's problems are gone */
  else
    write_beside(d, j->name, ".error.txt", j->failures ? j->failures : "some call failed");
  printf("daemon: %s -> %s.result.json (%s, %llu ms)\n", j->name, j->name,
         status == 0 ? "ok" : "some calls failed",
         (unsigned long long)(uv_now(&d->loop) - j->started_ms));
  fflush(stdout);
  free(j->failures);
  j->failures = NULL;
  j->nfailures = 0;
  j->run = NULL;
  obelus_run_free(run); /* allowed from the completion callback */
  answered(j);
}

/* The file has been quiet for SETTLE_MS: run it, unless this version was answered. */
static void on_settled(uv_timer_t *t) {
  job *j = t->data;
  watcher *d = j->d;
  if (j->run) { /* changed while running: look again once this run is over */
    uv_timer_start(&j->settle, on_settled, SETTLE_MS, 0);
    return;
  }
  char *path = path_of(d, j->name, "");
  struct stat st;
  if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
      (j->answered.tv_sec && newer_or_same(j->answered, st.st_mtim))) {
    free(path); /* gone, not a file, or answered already */
    return;
  }
  j->answered = st.st_mtim;
  j->started_ms = uv_now(&d->loop);
  obelus_run_options opt = {.name = j->name, .on_event = on_event, .on_done = on_done, .data = j};
  int rc = obelus_run_new_file(d->engine, &j->run, path, &opt);
  if (rc == OBELUS_OK)
    rc = obelus_run_start(j->run);
  if (rc != OBELUS_OK) {
    write_beside(d, j->name, ".error.txt", obelus_engine_errmsg(d->engine));
    remove_beside(d, j->name, ".result.json");
    size_t np = obelus_engine_nproblems(d->engine);
    if (np)
      printf("daemon: %s -> %s.error.txt (%zu problem%s)\n", j->name, j->name, np, np == 1 ? "" : "s");
    else
      printf("daemon: %s -> %s.error.txt (%s)\n", j->name, j->name, obelus_strerror(rc));
    fflush(stdout);
    obelus_run_free(j->run);
    j->run = NULL;
    answered(j);
  }
  free(path);
}

static job *job_for(watcher *d, const char *name) {
  for (job *j = d->jobs; j; j = j->next)
    if (!strcmp(j->name, name))
      return j;
  job *j = calloc(1, sizeof *j);
  if (!j || !(j->name = strdup(name))) {
    free(j);
    return NULL;
  }
  j->d = d;
  uv_timer_init(&d->loop, &j->settle);
  j->settle.data = j;
  j->next = d->jobs;
  d->jobs = j;
  return j;
}

/* Something happened to NAME: (re)start its settle timer. at_start: the daemon
 * is starting, and a plan with an answer newer than itself counts as answered. */
static void touched(watcher *d, const char *name, int at_start) {
  if (!is_plan_name(name))
    return;
  job *j = job_for(d, name);
  if (!j)
    return;
  if (at_start) {
    const char *suffixes[] = {".result.json", ".error.txt"};
    char *plan = path_of(d, name, "");
    struct stat ps, rs;
    for (int i = 0; i < 2 && plan; i++) {
      char *ans = path_of(d, name, suffixes[i]);
      if (ans && stat(plan, &ps) == 0 && stat(ans, &rs) == 0 && newer_or_same(rs.st_mtim, ps.st_mtim))
        j->answered = ps.st_mtim;
      free(ans);
    }
    free(plan);
  }
  uv_timer_start(&j->settle, on_settled, SETTLE_MS, 0);
}

static int scan(watcher *d, int at_start) {
  uv_fs_t req;
  uv_dirent_t ent;
  int rc = uv_fs_scandir(&d->loop, &req, d->folder, 0, NULL); /* once, at start: sync is fine */
  if (rc < 0)
    return rc;
  while (uv_fs_scandir_next(&req, &ent) != UV_EOF)
    touched(d, ent.name, at_start);
  uv_fs_req_cleanup(&req);
  return 0;
}

static void on_change(uv_fs_event_t *h, const char *filename, int events, int status) {
  watcher *d = h->data;
  (void)events;
  if (status < 0) {
    fprintf(stderr, "daemon: watching %s: %s\n", d->folder, uv_strerror(status));
    stop(d, 1);
  } else if (filename)
    touched(d, filename, 0);
  else
    scan(d, 0); /* the platform did not say which file: look at them all */
}

static void on_signal(uv_signal_t *s, int signum) {
  (void)signum;
  stop(s->data, 0);
}

static void on_timeout(uv_timer_t *t) {
  watcher *d = t->data;
  fprintf(stderr, "daemon: timed out with %ld of %ld plans answered\n", d->answered, d->once);
  stop(d, 1);
}

static void job_closed(uv_handle_t *h) {
  job *j = h->data;
  free(j->failures);
  free(j->name);
  free(j);
}

static int usage(void) {
  fprintf(stderr, "usage: daemon [--tools PATH]... [--once N] [--timeout MS] FOLDER\n");
  return 2;
}

int main(int argc, char **argv) {
  watcher d = {.status = 0};
  const char *tools[MAX_TOOLS];
  int ntools = 0;
  long timeout_ms = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--tools") && i + 1 < argc && ntools < MAX_TOOLS)
      tools[ntools++] = argv[++i];
    else if (!strcmp(argv[i], "--once") && i + 1 < argc)
      d.once = strtol(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
      timeout_ms = strtol(argv[++i], NULL, 10);
    else if (argv[i][0] == '-' || d.folder)
      return usage();
    else
      d.folder = argv[i];
  }
  if (!d.folder || d.once < 0 || timeout_ms < 0)
    return usage();

  uv_loop_init(&d.loop);
  if (obelus_engine_new(&d.engine, &d.loop) < 0) {
    fprintf(stderr, "daemon: no engine\n");
    return 2;
  }
  for (int i = 0; i < ntools; i++)
    if (obelus_engine_load_tools(d.engine, tools[i]) < 0) {
      fprintf(stderr, "daemon: %s\n", obelus_engine_errmsg(d.engine));
      obelus_engine_free(d.engine);
      return 2;
    }

  uv_fs_event_init(&d.loop, &d.watch);
  d.watch.data = &d;
  int rc = uv_fs_event_start(&d.watch, on_change, d.folder, 0);
  if (rc == 0)
    rc = scan(&d, 1); /* after the watch starts: a plan dropped in between is seen twice, not never */
  if (rc < 0) {
    fprintf(stderr, "daemon: cannot watch %s: %s\n", d.folder, uv_strerror(rc));
    d.status = 2;
  } else {
    uv_signal_init(&d.loop, &d.sigint);
    uv_signal_init(&d.loop, &d.sigterm);
    d.sigint.data = d.sigterm.data = &d;
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_timer_init(&d.loop, &d.timeout);
    d.timeout.data = &d;
    if (timeout_ms)
      uv_timer_start(&d.timeout, on_timeout, (uint64_t)timeout_ms, 0);
    printf("daemon: watching %s\n", d.folder);
    fflush(stdout);
    uv_run(&d.loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&d.sigint, NULL);
    uv_close((uv_handle_t *)&d.sigterm, NULL);
    uv_close((uv_handle_t *)&d.timeout, NULL);
  }

  /* Shutting down, outside every callback: runs still going are abandoned. */
  uv_close((uv_handle_t *)&d.watch, NULL);
  for (job *j = d.jobs, *next; j; j = next) {
    next = j->next;
    obelus_run_free(j->run);
    uv_close((uv_handle_t *)&j->settle, job_closed);
  }
  obelus_engine_free(d.engine);
  uv_run(&d.loop, UV_RUN_NOWAIT); /* every handle closes; the jobs are freed */
  if (uv_loop_close(&d.loop) != 0)
    fprintf(stderr, "daemon: handles left open on the loop\n");
  return d.status;
}
