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
 *                        their scope), plus its summary above
 *   GET /api/runs/{id}/state?at=N   the documents as of message N, as `obelus log --at N`
 *                        prints them ({"at", "documents", "instances"}), and "messages"
 *                        (how many the journal holds); without at, as it ends
 * An id is a digest of the folder's number and the path in it: a request names no path,
 * so nothing outside the folders can be asked for. A run whose journal another process
 * holds locked (ob_wal's flock) is running; one without an end record that nobody holds
 * was killed and can be resumed.
 *
 * Security. It listens on 127.0.0.1 unless told otherwise; any other address needs a
 * token, and with a token every /api request must carry it: "Authorization: Bearer T",
 * the cookie obelus_token=T, or ?token=T (which sets that cookie, so a link opens the
 * app). A request without it is answered 401. The comparison takes the same time
 * whatever the first wrong byte.
 *
 * Costs: a journal is read (ob_trace_build) when it is asked for, and for the list
 * once per change of its size or time, its summary kept; the folders are walked at
 * every list. */
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
#include "host/ob_trace.h"
#include "host/ob_ui.h"
#include "host/ob_ui_assets.h"
#include "io/ob_httpd.h"
#include "log/ob_journal.h"
#include "log/ob_log.h"

#define UI_MAX_DEPTH 32 /* folders below a --journals folder walked at most */

typedef struct summary {
  long long size, mtime_ns; /* the file as it was read */
  ob_value *value;          /* its summary (without id, source, dir) */
} summary;

struct ob_ui {
  ob_httpd *http;
  char **dirs;
  size_t ndirs;
  char *token;
  ob_map cache; /* absolute path -> summary */
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

/* --- summaries ------------------------------------------------------------------------ */

/* 1 when another process holds the journal locked: its run is going on. */
static int locked(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return 0;
  int held = flock(fd, LOCK_SH | LOCK_NB) != 0;
  close(fd);
  return held;
}

/* What the list says of a run, from its journal as the report reads it. */
static ob_value *summarize(const char *path, const ob_value *run) {
  ob_value *s = ob_object();
  const ob_value *exit = ob_object_get(run, "exit", 4), *calls = ob_object_get(run, "calls", 5);
  const ob_value *t0 = ob_object_get(run, "t0_us", 5), *dur = ob_object_get(run, "duration_us", 11);
  const char *state = exit && ob_typeof(exit) == OB_INT
                          ? (ob_int_value(exit) == 0 ? "done" : "failed")
                      : locked(path) ? "running"
                                     : "killed-resumable";
  s = ob_object_set(s, "state", 5, ob_cstring(state));
  long long start = t0 && ob_typeof(t0) == OB_INT ? ob_int_value(t0) / 1000 : 0;
  s = ob_object_set(s, "started", 7, start ? ob_int(start) : ob_null());
  s = ob_object_set(s, "ended", 5,
                    start && exit && ob_typeof(exit) == OB_INT && dur && ob_typeof(dur) == OB_INT
                        ? ob_int(start + ob_int_value(dur) / 1000)
                        : ob_null());
  size_t n = 0, failed = 0;
  for (size_t i = 0; calls && i < ob_array_len(calls); i++) {
    const ob_value *c = ob_array_get(calls, i), *scope = ob_object_get(c, "scope", 5);
    const ob_value *st = ob_object_get(c, "state", 5);
    if (scope && ob_typeof(scope) == OB_STRING && ob_string_len(scope))
      continue; /* a delegated plan's call, or an _each call's copy: under its call */
    n++;
    failed += st && ob_typeof(st) == OB_STRING && !strcmp(ob_string_ptr(st), "failed");
  }
  s = ob_object_set(s, "calls", 5, ob_int((int64_t)n));
  s = ob_object_set(s, "failed", 6, ob_int((int64_t)failed));
  const ob_value *plan = ob_object_get(run, "plan", 4);
  return ob_object_set(s, "plan", 4, plan ? ob_ref((ob_value *)plan) : ob_null());
}

/* The summary of the journal at path (cached while its size and time stay), or NULL when
 * it is not a journal. *run, when run is not NULL, gets the run as read (read again). */
static const ob_value *summary_of(ob_ui *u, const char *path, const struct stat *st,
                                  ob_value **run) {
  summary *s = ob_map_get(&u->cache, path, strlen(path));
  long long mt = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
  if (s && s->size == (long long)st->st_size && s->mtime_ns == mt && !run)
    return s->value;
  ob_error err;
  ob_value *r = ob_trace_build(path, OB_TRACE_RUN, NULL, &err);
  if (!r)
    return NULL;
  if (!s) {
    s = ob_xcalloc(1, sizeof *s);
    ob_map_put(&u->cache, path, strlen(path), s);
  }
  ob_unref(s->value);
  s->value = summarize(path, r);
  s->size = (long long)st->st_size;
  s->mtime_ns = mt;
  if (run)
    *run = r;
  else
    ob_unref(r);
  return s->value;
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

static void add_listed(ob_ui *u, size_t dir, const char *rel, const char *path,
                       const struct stat *st, void *ud) {
  ob_value **list = ud;
  const ob_value *sum = summary_of(u, path, st, NULL);
  if (sum)
    *list = ob_array_push(*list, listed(dir, rel, sum));
}

static int newest_first(const void *a, const void *b) {
  const ob_value *x = ob_object_get(*(ob_value *const *)a, "started", 7);
  const ob_value *y = ob_object_get(*(ob_value *const *)b, "started", 7);
  long long p = x && ob_typeof(x) == OB_INT ? ob_int_value(x) : 0;
  long long q = y && ob_typeof(y) == OB_INT ? ob_int_value(y) : 0;
  return p < q ? 1 : p > q ? -1 : 0;
}

typedef struct finding {
  const char *id;
  int path_only;   /* only its path (the state route): the journal is not read here */
  char *path;      /* the journal's path, when found */
  ob_value *found; /* the run with its summary */
} finding;

static void find_id(ob_ui *u, size_t dir, const char *rel, const char *path, const struct stat *st,
                    void *ud) {
  finding *f = ud;
  char id[17];
  run_id(dir, rel, id);
  if (f->found || f->path || strcmp(id, f->id))
    return;
  if (f->path_only) {
    f->path = ob_xstrdup(path);
    return;
  }
  ob_value *run = NULL;
  const ob_value *sum = summary_of(u, path, st, &run);
  if (!sum || !run)
    return;
  ob_value *o = listed(dir, rel, sum);
  o = ob_object_set(o, "run", 3, run);
  f->found = o;
}

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

/* 1 when a and b (b of len bytes) are equal, in a time that does not tell where not. */
static int same_secret(const char *a, const char *b, size_t len) {
  size_t n = strlen(a);
  unsigned diff = (unsigned)(n ^ len);
  for (size_t i = 0; i < len; i++)
    diff |= (unsigned char)(b[i] ^ a[i < n ? i : 0]);
  return diff == 0;
}

/* The value of name in a list "a=1; b=2" (sep ';') or "a=1&b=2" (sep '&'), or NULL. */
static const char *find_pair(const char *s, const char *name, char sep, size_t *len) {
  size_t n = strlen(name);
  while (s && *s) {
    while (*s == ' ' || *s == sep)
      s++;
    const char *end = strchr(s, sep);
    size_t l = end ? (size_t)(end - s) : strlen(s);
    if (l > n && !strncmp(s, name, n) && s[n] == '=') {
      *len = l - n - 1;
      return s + n + 1;
    }
    s = end;
  }
  return NULL;
}

/* The request carries the token (or none is needed); ?token= sets the cookie. */
static int allowed(ob_ui *u, const ob_httpd_req *req, ob_httpd_res *res) {
  if (!u->token)
    return 1;
  size_t len;
  const char *v;
  if (req->auth && !strncmp(req->auth, "Bearer ", 7) &&
      same_secret(u->token, req->auth + 7, strlen(req->auth + 7)))
    return 1;
  if ((v = find_pair(req->cookie, "obelus_token", ';', &len)) && same_secret(u->token, v, len))
    return 1;
  if ((v = find_pair(req->query, "token", '&', &len)) && same_secret(u->token, v, len)) {
    snprintf(res->extra, sizeof res->extra,
             "Set-Cookie: obelus_token=%s; HttpOnly; SameSite=Strict; Path=/\r\n", u->token);
    return 1;
  }
  return 0;
}

/* GET /api/runs/{id}/state?at=N: the documents as of message N (`obelus log --at N`);
 * without at, as the journal ends. */
static void state_at(ob_ui *u, const char *id, const ob_httpd_req *req, ob_httpd_res *res) {
  finding f = {id, 1, NULL, NULL};
  walk_all(u, find_id, &f);
  if (!f.path) {
    reply_error(res, 404, "no run of that id");
    return;
  }
  ob_log *log = ob_log_new();
  ob_error err;
  if (ob_journal_load(log, f.path, NULL, &err) != OB_OK) {
    reply_error(res, 422, err.msg);
  } else {
    size_t len, at = ob_log_len(log);
    const char *v = find_pair(req->query, "at", '&', &len);
    char num[24];
    size_t n = 0;
    int ok = !v || (len > 0 && len < sizeof num);
    for (size_t i = 0; ok && v && i < len; i++) {
      ok = v[i] >= '0' && v[i] <= '9';
      n = n * 10 + (size_t)(v[i] - '0');
    }
    if (v && ok)
      at = n;
    if (!ok || at > ob_log_len(log)) {
      snprintf(num, sizeof num, "%zu", ob_log_len(log));
      ob_buf why;
      ob_buf_init(&why);
      ob_buf_addf(&why, "at is a number of messages, from 0 to %s", num);
      reply_error(res, 400, why.data);
      ob_buf_free(&why);
    } else {
      ob_value *docs = ob_log_documents(log, at);
      docs = ob_object_set(docs, "messages", 8, ob_int((int64_t)ob_log_len(log)));
      reply_value(res, docs);
    }
  }
  ob_log_free(log);
  free(f.path);
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
  if (!allowed(u, req, res)) {
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
  if (strcmp(req->method, "GET")) {
    reply_error(res, 405, "only GET is served here yet");
    return;
  }
  if (!strcmp(req->path, "/api/runs")) {
    ob_value *list = ob_array();
    walk_all(u, add_listed, &list);
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
    return;
  }
  const char *id = req->path + strlen("/api/runs/");
  if (!strncmp(req->path, "/api/runs/", 10) && strlen(id) == 16 + 6 && !strcmp(id + 16, "/state")) {
    char one[17];
    memcpy(one, id, 16);
    one[16] = '\0';
    state_at(u, one, req, res);
    return;
  }
  if (!strncmp(req->path, "/api/runs/", 10) && strlen(id) == 16 && !strchr(id, '/')) {
    finding f = {id, 0, NULL, NULL};
    walk_all(u, find_id, &f);
    if (f.found)
      reply_value(res, f.found);
    else
      reply_error(res, 404, "no run of that id");
    return;
  }
  reply_error(res, 404, "not found");
}

/* --- the server ---------------------------------------------------------------------------- */

static int loopback(const char *bind) {
  return !strcmp(bind, "127.0.0.1") || !strcmp(bind, "::1") || !strcmp(bind, "localhost") ||
         !strncmp(bind, "127.", 4);
}

ob_ui *ob_ui_new(uv_loop_t *loop, const ob_ui_config *cfg, ob_error *err) {
  const char *bind = cfg->bind ? cfg->bind : "127.0.0.1";
  if (!loopback(bind) && (!cfg->token || !*cfg->token)) {
    ob_error_set(err, OB_EINVAL, 0, "--bind %s is not a loopback address: give --token", bind);
    return NULL;
  }
  ob_ui *u = ob_xcalloc(1, sizeof *u);
  ob_map_init(&u->cache);
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
  ob_httpd_config hc = {.bind = bind, .port = cfg->port, .handler = handle, .ud = u};
  if (!(u->http = ob_httpd_new(loop, &hc, err))) {
    ob_ui_free(u);
    return NULL;
  }
  return u;
}

int ob_ui_port(const ob_ui *u) { return ob_httpd_port(u->http); }

void ob_ui_close(ob_ui *u) {
  if (u)
    ob_httpd_close(u->http);
}

void ob_ui_free(ob_ui *u) {
  if (!u)
    return;
  ob_httpd_free(u->http);
  for (size_t i = 0; i < u->ndirs; i++)
    free(u->dirs[i]);
  free(u->dirs);
  free(u->token);
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&u->cache, &i, &me)) {
    summary *s = me->val;
    ob_unref(s->value);
    free(s);
  }
  ob_map_free(&u->cache);
  free(u);
}
