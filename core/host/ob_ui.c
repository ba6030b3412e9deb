/* ob_ui.c -- `obelus ui`: runs and their journals served over HTTP on the engine's loop.
 *
 * The API (the web app will use only it; scripts can too):
 *   GET /api/runs        every journal found under the --journals folders (*.jsonl, at
 *                        any depth, regular files only: a symbolic link is not followed
 *                        out), newest first, each {"id", "source" (its path in its
 *                        folder), "dir" (the folder's number), "state" (running, done,
 *                        failed, killed-resumable), "started", "ended" (ms since 1970, or
 *                        null), "calls", "failed", "plan"}
 *   GET /api/runs/{id}   one run as `obelus report` draws it (ob_trace.h's OB_TRACE_RUN:
 *                        its plan file, exit, every call with its state, attempts and
 *                        times, params, output or error, progress; sub-plans' calls with
 *                        their scope), plus its summary above; ?calls=light: each call
 *                        without params, resolved, output and error (ob_ui_store.h), what
 *                        the page draws first
 *   GET /api/runs/{id}/calls/{i}   the call at index i of the run's calls, whole
 *   GET /api/runs/{id}/state?at=N   the documents as of message N, as `obelus log --at N`
 *                        prints them ({"at", "documents", "instances"}), and "messages"
 *                        (how many the journal holds); without at, as it ends
 * An id is a digest of the folder's number and the path in it: a request names no path,
 * so nothing outside the folders can be asked for. A run whose journal another process
 * holds locked (ob_wal's flock) is running; one without an end record that nobody holds
 * was killed and can be resumed.
 *
 *   GET /api/runs/{id}/events   Server-Sent Events: a snapshot (the run as above, less
 *                        params, outputs and what goes without saying), then the journal's
 *                        records as they come, and its end (ob_ui_follow.c); gzip when the
 *                        client takes it
 *   POST /api/runs, /api/runs/{id}/cancel, approve, resume, fork   runs this server
 *                        drives, with the tools of --tools (ob_ui_runs.c)
 *
 * Security (the rules of ob_http_auth.h, shared with `obelus mcp --http`). It listens on
 * 127.0.0.1 unless told otherwise; any other address needs a token (one is made when
 * none is given, and the CLI says it), and with a token every /api request must carry
 * it: "Authorization: Bearer T", the cookie obelus_token=T, or ?token=T (which sets
 * that cookie, so a link opens the app). A request without it is answered 401. A POST
 * from a web page is taken only from an origin of this machine (or of the address it
 * listens on), never from a name (DNS rebinding): 403.
 *
 * Costs: a journal is read (ob_trace_build) once per change of its size or time, its
 * summary kept, and its run as text for the newest asked (ob_ui_store.c: the page of a
 * 100,000-call run kept is a copy of 11 MB); the log of the last journal asked for its
 * documents is kept likewise (the slider asks one point after another); the folders
 * are walked at every list. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "host/ob_graph.h"
#include "host/ob_http_auth.h"
#include "host/ob_trace.h"
#include "host/ob_ui.h"
#include "host/ob_ui_assets.h"
#include "host/ob_ui_fleet.h"
#include "host/ob_ui_follow.h"
#include "host/ob_ui_runs.h"
#include "host/ob_ui_store.h"
#include "io/ob_httpd.h"
#include "log/ob_journal.h"
#include "log/ob_log.h"

#define UI_MAX_DEPTH 32 /* folders below a --journals folder walked at most */
/* the runs kept read as text, the newest asked first, while their journals total this
 * much (ob_ui_store.h: a 100,000-call run's journal is 43 MB, its text 50 MB) */
#define UI_RUNS_KEPT_BYTES ((long long)256 << 20)

struct ob_ui {
  ob_httpd *http;
  char **dirs;
  size_t ndirs;
  char *token;
  ob_ui_store *store;  /* the journals read: summaries, and runs as text */
  ob_log *log;         /* the log of the journal last asked for its documents (log_of) */
  char *log_path;
  long long log_size, log_mtime;
  ob_map index;        /* id -> absolute path (char *), as the last walk found them */
  ob_ui_follow *follow; /* the journals viewed live */
  ob_ui_runs *runs;    /* the runs this server drives (NULL: no --tools) */
  ob_ui_fleet *fleet;  /* the fleet's queue (NULL: no --redis) */
  uv_loop_t *loop;
  int token_made;      /* the token was made here (ob_ui_token) */
  char *bind;          /* the address it listens on (the Origin check's) */
};

/* --- ids ---------------------------------------------------------------------------- */

/* 64-bit FNV-1a of the folder's number and the path in it, as 16 hex digits. */
static void run_id(size_t dir, const char *rel, char out[17]) {
  uint64_t h = 1469598103934665603ULL;
  char head[24];
  int n = snprintf(head, sizeof head, "%zu:", dir);
  for (int i = 0; i < n; i++)
    h = (h ^ (unsigned char)head[i]) * 1099511628211ULL;
  for (const char *s = rel; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* --- the folders ---------------------------------------------------------------------- */

typedef void (*found_fn)(ob_ui *u, size_t dir, const char *rel, const char *path,
                         const struct stat *st, void *ud);

/* Every regular *.jsonl file under folder dir (no link followed), at most UI_MAX_DEPTH
 * folders down. */
static void walk(ob_ui *u, size_t dir, ob_buf *rel, int depth, found_fn fn, void *ud) {
  ob_buf path;
  ob_buf_init(&path);
  ob_buf_addf(&path, "%s%s%s", u->dirs[dir], rel->len ? "/" : "", rel->len ? rel->data : "");
  DIR *d = opendir(path.data);
  ob_buf_free(&path);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue; /* ., .., and hidden files (a journal being written aside: .name.tmp) */
    size_t len = rel->len;
    if (len)
      ob_buf_addc(rel, '/');
    ob_buf_add(rel, e->d_name, strlen(e->d_name));
    ob_buf full;
    ob_buf_init(&full);
    ob_buf_addf(&full, "%s/%s", u->dirs[dir], rel->data);
    struct stat st;
    if (lstat(full.data, &st) == 0) {
      size_t n = strlen(e->d_name);
      if (S_ISDIR(st.st_mode) && depth < UI_MAX_DEPTH)
        walk(u, dir, rel, depth + 1, fn, ud);
      else if (S_ISREG(st.st_mode) && n > 6 && !strcmp(e->d_name + n - 6, ".jsonl"))
        fn(u, dir, rel->data, full.data, &st, ud);
    }
    ob_buf_free(&full);
    rel->len = len;
    if (rel->data)
      rel->data[len] = '\0';
  }
  closedir(d);
}

static void walk_all(ob_ui *u, found_fn fn, void *ud) {
  for (size_t i = 0; i < u->ndirs; i++) {
    ob_buf rel;
    ob_buf_init(&rel);
    walk(u, i, &rel, 0, fn, ud);
    ob_buf_free(&rel);
  }
}

static ob_value *listed(size_t dir, const char *rel, const ob_value *sum) {
  char id[17];
  run_id(dir, rel, id);
  ob_value *o = ob_object_set(ob_object(), "id", 2, ob_cstring(id));
  o = ob_object_set(o, "source", 6, ob_cstring(rel));
  o = ob_object_set(o, "dir", 3, ob_int((int64_t)dir));
  ob_object_iter it;
  ob_value *k, *v;
  ob_object_iter_init(&it, sum);
  while (ob_object_iter_next(&it, &k, &v))
    o = ob_object_setv(o, k, ob_ref(v));
  return o;
}

static void index_one(ob_ui *u, size_t dir, const char *rel, const char *path,
                      const struct stat *st, void *ud);
static ob_value *with_live(ob_ui *u, const char *path, ob_value *o);

static void add_listed(ob_ui *u, size_t dir, const char *rel, const char *path,
                       const struct stat *st, void *ud) {
  ob_value **list = ud;
  const ob_value *sum = ob_ui_store_summary(u->store, path, st);
  index_one(u, dir, rel, path, st, NULL);
  if (sum)
    *list = ob_array_push(*list, with_live(u, path, listed(dir, rel, sum)));
}

static int newest_first(const void *a, const void *b) {
  const ob_value *x = ob_object_get(*(ob_value *const *)a, "started", 7);
  const ob_value *y = ob_object_get(*(ob_value *const *)b, "started", 7);
  long long p = x && ob_typeof(x) == OB_INT ? ob_int_value(x) : 0;
  long long q = y && ob_typeof(y) == OB_INT ? ob_int_value(y) : 0;
  return p < q ? 1 : p > q ? -1 : 0;
}

/* Every journal's id and path, as a walk finds them. */
static void index_one(ob_ui *u, size_t dir, const char *rel, const char *path,
                      const struct stat *st, void *ud) {
  char id[17];
  (void)st;
  (void)ud;
  run_id(dir, rel, id);
  char *old = ob_map_get(&u->index, id, 16);
  if (old && !strcmp(old, path))
    return;
  free(old);
  ob_map_put(&u->index, id, 16, ob_xstrdup(path));
}

/* The path of the journal of run id (a new string), or NULL: from the index, which a
 * walk of the folders refreshes when id is not in it or its file is gone. */
static char *path_of(ob_ui *u, const char *id) {
  for (int tries = 0; tries < 2; tries++) {
    const char *p = ob_map_get(&u->index, id, 16);
    struct stat st;
    if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode))
      return ob_xstrdup(p);
    if (tries == 0)
      walk_all(u, index_one, NULL);
  }
  return NULL;
}

/* The folder path is under, and its path in it (a pointer into path), or -1. */
static long dir_of(const ob_ui *u, const char *path, const char **rel) {
  for (size_t i = 0; i < u->ndirs; i++) {
    size_t n = strlen(u->dirs[i]);
    if (!strncmp(path, u->dirs[i], n) && path[n] == '/') {
      *rel = path + n + 1;
      return (long)i;
    }
  }
  return -1;
}

/* What only this process knows of a run it drives: its calls waiting for an answer. */
static ob_value *with_live(ob_ui *u, const char *path, ob_value *o) {
  if (u->runs && ob_ui_runs_live(u->runs, path))
    o = ob_object_set(o, "here", 4, ob_true()); /* it can be cancelled here */
  ob_value *w = u->runs ? ob_ui_runs_waiting(u->runs, path) : NULL;
  if (w) {
    o = ob_object_set(o, "state", 5, ob_cstring("waiting-approval"));
    o = ob_object_set(o, "waiting", 7, w);
  }
  return o;
}

/* The run whose journal is path, with its summary, as JSON into out: whole (GET
 * /api/runs/{id}), or light (?calls=light, and the snapshot a viewer of its events gets
 * first: ob_ui_store.h). -1 when it is not a journal (out as it was). */
static int detail(ob_ui *u, const char *path, int lite, ob_buf *out) {
  const char *rel;
  long dir = dir_of(u, path, &rel);
  struct stat st;
  const ob_value *sum = NULL;
  const ob_ui_run *run = NULL;
  if (dir < 0 || lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
      !(run = ob_ui_store_run(u->store, path, &st, &sum)))
    return -1;
  ob_value *o = with_live(u, path, listed((size_t)dir, rel, sum));
  ob_json_write(out, o, OB_JSON_COMPACT); /* {...}: the run goes in before its '}' */
  ob_unref(o);
  out->len--;
  ob_buf_add(out, ",\"run\":", 7);
  const ob_buf *text = lite ? &run->light : &run->full;
  ob_buf_add(out, text->data, text->len);
  ob_buf_addc(out, '}');
  return 0;
}

static int snapshot(void *ud, const char *path, ob_buf *out) { return detail(ud, path, 1, out); }

/* --- requests ---------------------------------------------------------------------------- */

static void reply_error(ob_httpd_res *res, int status, const char *msg) {
  res->status = status;
  ob_value *o = ob_object_set(ob_object(), "error", 5, ob_cstring(msg));
  ob_json_write(&res->body, o, OB_JSON_COMPACT);
  ob_unref(o);
}

static void reply_value(ob_httpd_res *res, ob_value *v) {
  ob_json_write(&res->body, v, OB_JSON_COMPACT);
  ob_unref(v);
}

/* GET /api/runs/{id}/calls/{i}: the call at index i of the run's calls, whole (as GET
 * /api/runs/{id} has it): what the page's panel shows of a call of a light run. */
static void one_call(ob_ui *u, const char *path, const char *index, ob_httpd_res *res) {
  char *end;
  unsigned long long i = strtoull(index, &end, 10);
  struct stat st;
  const ob_value *sum;
  const ob_ui_run *run = *index >= '0' && *index <= '9' && !*end && lstat(path, &st) == 0 &&
                                 S_ISREG(st.st_mode)
                             ? ob_ui_store_run(u->store, path, &st, &sum)
                             : NULL;
  if (!run || i >= run->ncalls)
    reply_error(res, 404, "no call of that index in the run");
  else
    ob_buf_add(&res->body, run->full.data + run->at[2 * i], run->at[2 * i + 1] - run->at[2 * i]);
}

/* GET /api/runs/{id}/state?at=N: the documents as of message N (`obelus log --at N`);
 * without at, as the journal ends. */
/* The log of the journal at path, the last one read kept while the file stays as it
 * was: the slider asks for one point after another (a 100,000-call journal is read in
 * 3 s). NULL with err when it cannot be read. */
static ob_log *log_of(ob_ui *u, const char *path, ob_error *err) {
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
    ob_error_set(err, OB_EIO, 0, "the journal cannot be read");
    return NULL;
  }
  long long mt = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
  if (u->log && !strcmp(u->log_path, path) && u->log_size == (long long)st.st_size &&
      u->log_mtime == mt)
    return u->log;
  ob_log_free(u->log);
  free(u->log_path);
  u->log = NULL;
  u->log_path = NULL;
  ob_log *log = ob_log_new();
  if (ob_journal_load(log, path, NULL, err) != OB_OK) {
    ob_log_free(log);
    return NULL;
  }
  u->log = log;
  u->log_path = ob_xstrdup(path);
  u->log_size = (long long)st.st_size;
  u->log_mtime = mt;
  return log;
}

/* The documents of log as of message ?at=N (all of them without it). */
static void reply_state(ob_log *log, const ob_httpd_req *req, ob_httpd_res *res) {
  size_t len, at = ob_log_len(log);
  const char *v = ob_http_auth_find(req->query, "at", '&', &len);
  size_t n = 0;
  int ok = !v || (len > 0 && len < 20);
  for (size_t i = 0; ok && v && i < len; i++) {
    ok = v[i] >= '0' && v[i] <= '9';
    n = n * 10 + (size_t)(v[i] - '0');
  }
  if (v && ok)
    at = n;
  if (!ok || at > ob_log_len(log)) {
    char why[96];
    snprintf(why, sizeof why, "at is a number of messages, from 0 to %zu", ob_log_len(log));
    reply_error(res, 400, why);
  } else {
    ob_value *docs = ob_log_documents(log, at);
    docs = ob_object_set(docs, "messages", 8, ob_int((int64_t)ob_log_len(log)));
    reply_value(res, docs);
  }
}

static void state_at(ob_ui *u, const char *path, const ob_httpd_req *req, ob_httpd_res *res) {
  ob_error err;
  ob_log *log = log_of(u, path, &err);
  if (!log)
    reply_error(res, 422, err.msg);
  else
    reply_state(log, req, res);
}

static void list_runs(ob_ui *u, ob_httpd_res *res) {
  ob_value *list = ob_array();
  walk_all(u, add_listed, &list);
  if (u->fleet) { /* the fleet's jobs beside the journals */
    ob_value *jobs = ob_ui_fleet_runs(u->fleet);
    for (size_t i = 0; jobs && i < ob_array_len(jobs); i++)
      list = ob_array_push(list, ob_ref(ob_array_get(jobs, i)));
    ob_unref(jobs);
  }
  size_t n = ob_array_len(list);
  ob_value **items = ob_xmalloc((n ? n : 1) * sizeof *items);
  for (size_t i = 0; i < n; i++)
    items[i] = ob_ref(ob_array_get(list, i));
  qsort(items, n, sizeof *items, newest_first);
  ob_value *sorted = ob_array();
  for (size_t i = 0; i < n; i++)
    sorted = ob_array_push(sorted, items[i]);
  free(items);
  ob_unref(list);
  reply_value(res, ob_object_set(ob_object(), "runs", 4, sorted));
}

/* A run this server made (a start, a fork): {"id", "source"}, answered with status. */
static void reply_made(ob_ui *u, ob_httpd_res *res, int status, const char *path) {
  const char *rel;
  long dir = dir_of(u, path, &rel);
  char id[17];
  run_id((size_t)(dir < 0 ? 0 : dir), dir < 0 ? path : rel, id);
  ob_value *o = ob_object_set(ob_object(), "id", 2, ob_cstring(id));
  o = ob_object_set(o, "source", 6, ob_cstring(dir < 0 ? path : rel));
  res->status = status;
  reply_value(res, o);
}

/* POST /api/runs/{id}/{verb}: the run at path steered. */
static void steer(ob_ui *u, const char *path, const char *verb, const ob_httpd_req *req,
                  ob_httpd_res *res) {
  ob_error err = {0};
  char *made = NULL;
  int st;
  if (!u->runs) {
    reply_error(res, 409, "this server runs nothing: start obelus ui with --tools PATH");
    return;
  }
  if (!strcmp(verb, "cancel")) {
    st = ob_ui_runs_cancel(u->runs, path, &err);
  } else if (!strcmp(verb, "approve")) {
    st = ob_ui_runs_approve(u->runs, path, req->body, req->body_len, &err);
  } else if (!strcmp(verb, "resume")) {
    struct stat sb;
    const ob_value *sum = lstat(path, &sb) == 0 ? ob_ui_store_summary(u->store, path, &sb) : NULL;
    const ob_value *state = sum ? ob_object_get(sum, "state", 5) : NULL;
    if (!state || strcmp(ob_string_ptr(state), "killed-resumable")) {
      reply_error(res, 409, "only a run that was killed (no end in its journal, nobody "
                            "writing it) can be resumed");
      return;
    }
    st = ob_ui_runs_resume(u->runs, path, req->body, req->body_len, &err);
  } else if (!strcmp(verb, "fork")) {
    st = ob_ui_runs_fork(u->runs, path, req->body, req->body_len, &made, &err);
  } else {
    reply_error(res, 404, "not found (POST .../cancel, approve, resume or fork)");
    return;
  }
  if (st >= 400)
    reply_error(res, st, err.msg);
  else if (made)
    reply_made(u, res, st, made);
  else
    reply_value(res, ob_object_set(ob_object(), "ok", 2, ob_true()));
  free(made);
}

/* GET /api/runs/{id}/graph.svg: laid out by Graphviz's dot on the loop (ob_graph.h),
 * the response a stream that the layout ends (a client gone meanwhile: dropped). */
typedef struct svg_job {
  ob_httpd_stream *st; /* NULL once the client left */
  int laid_out;        /* dot has answered */
} svg_job;

static void svg_gone(void *ud) {
  svg_job *j = ud;
  j->st = NULL;
  if (j->laid_out)
    free(j);
}

static void svg_done(void *ud, int ok, const char *svg, size_t len, const char *err) {
  svg_job *j = ud;
  j->laid_out = 1;
  if (!j->st) {
    free(j);
    return;
  }
  if (ok) {
    ob_httpd_stream_send(j->st, svg, len);
  } else { /* the headers went: the failure is said in an image */
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"30\">"
                    "<text x=\"4\" y=\"20\">");
    for (const char *p = err ? err : "no graph"; *p; p++) /* escaped: it may quote a file */
      if (*p == '<')
        ob_buf_addf(&b, "&lt;");
      else if (*p == '&')
        ob_buf_addf(&b, "&amp;");
      else
        ob_buf_addc(&b, *p);
    ob_buf_addf(&b, "</text></svg>");
    ob_httpd_stream_send(j->st, b.data, b.len);
    ob_buf_free(&b);
  }
  ob_httpd_stream_end(j->st); /* svg_gone frees j once it is written */
}

/* The drawing of a run as an image/svg+xml stream, laid out by dot on the loop from
 * the DOT in dot (or, when it is NULL, with err's reason: 422). */
static void reply_svg(ob_ui *u, const ob_buf *dot, const ob_error *err, ob_httpd_res *res) {
  if (!dot) {
    reply_error(res, 422, err->msg);
    return;
  }
  svg_job *j = ob_xcalloc(1, sizeof *j);
  res->content_type = "image/svg+xml";
  j->st = ob_httpd_res_stream(res, svg_gone, j);
  ob_graph_svg(u->loop, dot->data, dot->len, svg_done, j);
}

static void graph_svg(ob_ui *u, const char *path, ob_httpd_res *res) {
  ob_buf dot;
  ob_buf_init(&dot);
  ob_error err;
  int ok = ob_graph_journal_dot(path, OB_GRAPH_MAX_CALLS, &dot, NULL, &err) == OB_OK;
  reply_svg(u, ok ? &dot : NULL, &err, res);
  ob_buf_free(&dot);
}

static int job_status(const ob_error *err) {
  return err->code == OB_ENOENT ? 404 : err->code == OB_EIO ? 503 : 422;
}

/* GET /api/runs/job-ID/state and /graph.svg: from the job's journal in Redis, read now. */
static void job_more(ob_ui *u, const char *id, const char *what, const ob_httpd_req *req,
                     ob_httpd_res *res) {
  if (strcmp(what, "state") != 0 && strcmp(what, "graph.svg") != 0) {
    reply_error(res, 404, "not found (a job's run has state and graph.svg)");
    return;
  }
  ob_buf text;
  ob_buf_init(&text);
  char *name = NULL;
  ob_error err;
  if (ob_ui_fleet_journal(u->fleet, id, &text, &name, &err) != OB_OK) {
    reply_error(res, job_status(&err), err.msg);
  } else {
    ob_log *log = ob_log_new();
    if (ob_journal_load_text(log, name, text.data, text.len, NULL, &err) != OB_OK) {
      reply_error(res, 422, err.msg);
    } else if (!strcmp(what, "state")) {
      reply_state(log, req, res);
    } else {
      ob_buf dot;
      ob_buf_init(&dot);
      ob_graph *g = ob_graph_from_log(log, name, OB_GRAPH_MAX_CALLS, &err);
      if (g)
        ob_graph_dot(g, &dot);
      reply_svg(u, g ? &dot : NULL, &err, res);
      ob_graph_free(g);
      ob_buf_free(&dot);
    }
    ob_log_free(log);
  }
  free(name);
  ob_buf_free(&text);
}

/* GET /api/runs/job-ID: a fleet job's run, from its journal in Redis. */
static void job_run(ob_ui *u, const char *id, ob_httpd_res *res) {
  ob_error err;
  ob_value *run = ob_ui_fleet_run(u->fleet, id, &err);
  if (!run) {
    reply_error(res, job_status(&err), err.msg);
    return;
  }
  ob_value *o = NULL, *jobs = ob_ui_fleet_runs(u->fleet);
  for (size_t i = 0; jobs && i < ob_array_len(jobs); i++) {
    const ob_value *j = ob_array_get(jobs, i), *jid = ob_object_get(j, "id", 2);
    if (jid && ob_typeof(jid) == OB_STRING && !strcmp(ob_string_ptr(jid), id))
      o = ob_ref((ob_value *)j);
  }
  ob_unref(jobs);
  if (!o) /* older than the jobs listed: its summary is its id */
    o = ob_object_set(ob_object_set(ob_object(), "id", 2, ob_cstring(id)), "source", 6,
                      ob_cstring(id + 4));
  reply_value(res, ob_object_set(o, "run", 3, run));
}

/* Whether the client said it takes gzip (Accept-Encoding: "gzip", not with q=0). */
static int takes_gzip(const ob_httpd_req *req) {
  char v[256];
  if (ob_httpd_header(req, "accept-encoding", v, sizeof v) < 0)
    return 0;
  for (const char *p = v; (p = strstr(p, "gzip")) != NULL; p += 4) {
    const char *q = p + 4;
    while (*q == ' ')
      q++;
    if (*q != ';')
      return 1;
    q++;
    while (*q == ' ')
      q++;
    if (strncmp(q, "q=0", 3) != 0 || (q[3] == '.' && strspn(q + 4, "0") < strcspn(q + 4, ", ")))
      return 1;
  }
  return 0;
}

static void handle(void *ud, const ob_httpd_req *req, ob_httpd_res *res) {
  ob_ui *u = ud;
  /* the web app's files, built in (ob_ui_assets.h); no other path outside /api/ */
  int api = !strncmp(req->path, "/api/", 5);
  const char *type, *data;
  size_t len;
  if (!api && (strcmp(req->method, "GET") || !ob_ui_asset(req->path, &type, &data, &len))) {
    reply_error(res, 404, "not found (the API is under /api/)");
    return;
  }
  if (!ob_http_auth_token(u->token, req, res)) {
    reply_error(res, 401, "this server needs its token: Authorization: Bearer TOKEN, or ?token=");
    return;
  }
  if (!api) {
    static const char headers[] =
        "Content-Security-Policy: default-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'\r\n"
        "X-Content-Type-Options: nosniff\r\n";
    size_t n = strlen(res->extra);
    if (n + sizeof headers > sizeof res->extra) { /* a token too long for its cookie too */
      reply_error(res, 500, "the token is too long to be set as a cookie with the page");
      return;
    }
    memcpy(res->extra + n, headers, sizeof headers);
    res->content_type = type;
    ob_buf_add(&res->body, data, len);
    return;
  }
  int get = !strcmp(req->method, "GET"), post = !strcmp(req->method, "POST");
  if (!get && !post) {
    reply_error(res, 405, "only GET and POST are served");
    return;
  }
  if (post && !ob_http_auth_origin(req, u->bind)) {
    reply_error(res, 403, "a request from another site's page is refused (its Origin is not "
                          "this server)");
    return;
  }
  if (!strcmp(req->path, "/api/fleet") && get) {
    if (u->fleet)
      reply_value(res, ob_ui_fleet_snapshot(u->fleet));
    else
      reply_error(res, 404, "this server watches no fleet: start obelus ui with --redis URL");
    return;
  }
  if (!strncmp(req->path, "/api/runs/job-", 14) && get) {
    char jid[80];
    const char *slash = strchr(req->path + 10, '/');
    size_t n = slash ? (size_t)(slash - (req->path + 10)) : strlen(req->path + 10);
    snprintf(jid, sizeof jid, "%.*s", (int)(n < sizeof jid ? n : sizeof jid - 1), req->path + 10);
    if (!u->fleet)
      reply_error(res, 404, "this server watches no fleet: start obelus ui with --redis URL");
    else if (slash)
      job_more(u, jid, slash + 1, req, res);
    else
      job_run(u, jid, res);
    return;
  }
  if (!strcmp(req->path, "/api/runs")) {
    if (get) {
      list_runs(u, res);
    } else if (!u->runs) {
      reply_error(res, 409, "this server runs nothing: start obelus ui with --tools PATH");
    } else {
      ob_error err = {0};
      char *made = NULL;
      int st = ob_ui_runs_start(u->runs, req->body, req->body_len, &made, &err);
      if (st >= 400)
        reply_error(res, st, err.msg);
      else
        reply_made(u, res, st, made);
      free(made);
    }
    return;
  }
  /* /api/runs/{id}[/what] */
  const char *id = req->path + 10, *what = id + 16;
  if (strncmp(req->path, "/api/runs/", 10) || strlen(id) < 16 || (*what && *what != '/')) {
    reply_error(res, 404, "not found");
    return;
  }
  for (int i = 0; i < 16; i++)
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) {
      reply_error(res, 404, "no run of that id");
      return;
    }
  char one[17];
  memcpy(one, id, 16);
  one[16] = '\0';
  if (*what)
    what++;
  char *path = path_of(u, one);
  if (!path) {
    reply_error(res, 404, "no run of that id");
    return;
  }
  if (post) {
    steer(u, path, what, req, res);
  } else if (!*what) {
    size_t n;
    const char *calls = ob_http_auth_find(req->query, "calls", '&', &n);
    if (detail(u, path, calls && n == 5 && !strncmp(calls, "light", 5), &res->body) != 0)
      reply_error(res, 404, "no run of that id (its journal cannot be read)");
  } else if (!strncmp(what, "calls/", 6)) {
    one_call(u, path, what + 6, res);
  } else if (!strcmp(what, "state")) {
    state_at(u, path, req, res);
  } else if (!strcmp(what, "events")) {
    ob_ui_follow_attach(u->follow, path, takes_gzip(req), res);
  } else if (!strcmp(what, "graph.svg")) {
    graph_svg(u, path, res);
  } else {
    reply_error(res, 404, "not found");
  }
  free(path);
}

static void tell_waiting(void *ud, const char *path, const char *json, size_t len) {
  ob_ui *u = ud;
  ob_ui_follow_push(u->follow, path, "waiting", json, len);
}

/* --- the server ---------------------------------------------------------------------------- */

ob_ui *ob_ui_new(uv_loop_t *loop, const ob_ui_config *cfg, ob_error *err) {
  const char *bind = cfg->bind ? cfg->bind : "127.0.0.1";
  ob_ui *u = ob_xcalloc(1, sizeof *u);
  u->store = ob_ui_store_new(UI_RUNS_KEPT_BYTES);
  ob_map_init(&u->index);
  u->dirs = ob_xcalloc(cfg->njournals ? cfg->njournals : 1, sizeof *u->dirs);
  for (size_t i = 0; i < cfg->njournals; i++) {
    char *real = realpath(cfg->journals[i], NULL);
    struct stat st;
    if (!real || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
      ob_error_set(err, OB_EINVAL, 0, "--journals %s: not a folder", cfg->journals[i]);
      free(real);
      ob_ui_free(u);
      return NULL;
    }
    u->dirs[u->ndirs++] = real;
  }
  u->token = cfg->token && *cfg->token ? ob_xstrdup(cfg->token) : NULL;
  u->bind = ob_xstrdup(bind);
  if (!u->token && !ob_http_auth_loopback(bind)) { /* anyone on the network could ask: a
                                                      token, made now */
    char made[33];
    if (ob_http_auth_make_token(made) != 0) {
      ob_error_set(err, OB_EIO, 0, "--bind %s needs a token, and none could be made: give "
                   "--token", bind);
      ob_ui_free(u);
      return NULL;
    }
    u->token = ob_xstrdup(made);
    u->token_made = 1;
  }
  u->loop = loop;
  if (cfg->redis && !(u->fleet = ob_ui_fleet_new(loop, cfg->redis, cfg->queue, err))) {
    ob_ui_free(u);
    return NULL;
  }
  u->follow = ob_ui_follow_new(loop, snapshot, u);
  if (cfg->engine)
    u->runs = ob_ui_runs_new(cfg->engine, u->dirs[0], cfg->limits, tell_waiting, u);
  ob_httpd_config hc = {.bind = bind, .port = cfg->port, .handler = handle, .ud = u};
  if (!(u->http = ob_httpd_new(loop, &hc, err))) {
    ob_ui_free(u);
    return NULL;
  }
  return u;
}

int ob_ui_port(const ob_ui *u) { return ob_httpd_port(u->http); }

const char *ob_ui_token(const ob_ui *u) { return u->token_made ? u->token : NULL; }

void ob_ui_close(ob_ui *u) {
  if (!u)
    return;
  ob_ui_runs_free(u->runs); /* every run cancelled, its journal resumable */
  u->runs = NULL;
  ob_ui_follow_close(u->follow);
  ob_ui_fleet_close(u->fleet);
  ob_httpd_close(u->http);
}

void ob_ui_free(ob_ui *u) {
  if (!u)
    return;
  ob_ui_runs_free(u->runs);
  ob_httpd_free(u->http);
  ob_ui_follow_free(u->follow);
  ob_ui_fleet_free(u->fleet);
  for (size_t i = 0; i < u->ndirs; i++)
    free(u->dirs[i]);
  free(u->dirs);
  free(u->token);
  free(u->bind);
  size_t i = 0;
  ob_map_entry *me;
  ob_ui_store_free(u->store);
  ob_log_free(u->log);
  free(u->log_path);
  while (ob_map_next(&u->index, &i, &me))
    free(me->val);
  ob_map_free(&u->index);
  free(u);
}
