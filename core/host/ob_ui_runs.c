/* ob_ui_runs.c -- the runs `obelus ui` drives itself.
 *
 * A run started from the page (POST /api/runs) is a plan value prepared, journaled and
 * made by the run driver (ob_drive.h), as `obelus run --journal` does, on the engine
 * whose tools `obelus ui --tools` loaded, sharing the server's loop: the server keeps
 * answering while it runs, and its viewers follow it through its journal like any
 * other's (ob_ui_follow.c). Its journal is written under the first --journals folder,
 * in ui/, named after the plan's "name", the time and a number.
 *
 * Approval. A run started with "approve": true asks before every call starts (as
 * `obelus run --approve` does), but not on a terminal: the approval hook answers
 * OB_APPROVE_LATER, and the call waits, unstarted and holding no slot, until a person
 * answers in the page (POST .../approve): yes, no, or yes with params edited, which run
 * the call with those values (a replacement of the same wiring; strings that look like
 * references are taken as text, escaped). Whoever views the run is told the list of
 * waiting calls as it changes.
 *
 * Cancel abandons what runs and writes no end record: the journal stays that of a run
 * that can be taken up (POST .../resume resumes it here, as `obelus resume` would).
 * Fork writes a new journal from a point of another (ob_fork.h) and takes it up.
 *
 * A run finished is let go on the loop's next turn (the driver's deferred work), once
 * its fire-and-forget calls have settled: its journal is closed and its memory freed;
 * the journal is what remains. Costs: per live run, its driver, plan and log; per
 * waiting call, its params. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/ob_mem.h"
#include "base/ob_path.h"
#include "drive/ob_drive.h"
#include "host/ob_ui_runs.h"

typedef struct waiting {
  char *call, *scope, *tool, *instance;
  ob_value *params, *raw;
  struct ob_crun *c; /* the engine's call, answered with ob_approve_answer */
  struct waiting *next;
} waiting;

typedef struct urun {
  ob_ui_runs *x;
  ob_drun *d;
  char *path;
  size_t calls_used;
  int finished, cancelled;
  waiting *waits;
  struct urun *next;
} urun;

struct ob_ui_runs {
  ob_engine *e;
  char *dir;
  ob_run_options limits;
  ob_ui_runs_notify_fn notify;
  void *ud;
  ob_drive *dv;
  urun *runs;
  unsigned seq;
};

/* --- the list of waiting calls ------------------------------------------------------ */

static void waiting_free(waiting *w) {
  free(w->call);
  free(w->scope);
  free(w->tool);
  free(w->instance);
  ob_unref(w->params);
  ob_unref(w->raw);
  free(w);
}

static ob_value *waiting_list(const urun *r) {
  ob_value *a = ob_array();
  for (const waiting *w = r->waits; w; w = w->next) {
    ob_value *o = ob_object_set(ob_object(), "call", 4, ob_cstring(w->call));
    o = ob_object_set(o, "scope", 5, w->scope ? ob_cstring(w->scope) : ob_null());
    o = ob_object_set(o, "tool", 4, ob_cstring(w->tool));
    o = ob_object_set(o, "instance", 8, w->instance ? ob_cstring(w->instance) : ob_null());
    o = ob_object_set(o, "params", 6, ob_ref(w->params));
    a = ob_array_push(a, o);
  }
  return a;
}

static void tell_waiting(urun *r) {
  if (!r->x->notify)
    return;
  ob_value *a = waiting_list(r);
  ob_buf b;
  ob_buf_init(&b);
  ob_json_write(&b, a, OB_JSON_COMPACT);
  r->x->notify(r->x->ud, r->path, b.data, b.len);
  ob_buf_free(&b);
  ob_unref(a);
}

static void drop_waits(urun *r) {
  int had = r->waits != NULL;
  while (r->waits) {
    waiting *w = r->waits;
    r->waits = w->next;
    waiting_free(w);
  }
  if (had)
    tell_waiting(r);
}

/* The approval hook: asked in the page, later. */
static int approve_later(void *ud, const ob_approve_ask *q, ob_value **replacement, ob_buf *why) {
  urun *r = ud;
  (void)replacement;
  (void)why;
  waiting *w = ob_xcalloc(1, sizeof *w);
  w->call = ob_xstrdup(q->id);
  w->scope = q->scope ? ob_xstrdup(q->scope) : NULL;
  w->tool = ob_xstrdup(q->tool);
  w->instance = q->instance ? ob_xstrdup(q->instance) : NULL;
  w->params = ob_ref((ob_value *)q->params);
  w->raw = ob_ref((ob_value *)q->call);
  w->c = q->pending;
  waiting **tail = &r->waits; /* in the order they came */
  while (*tail)
    tail = &(*tail)->next;
  *tail = w;
  tell_waiting(r);
  return OB_APPROVE_LATER;
}

/* --- runs ------------------------------------------------------------------------------ */

static void urun_free(urun *r) {
  drop_waits(r);
  ob_error err;
  if (r->d) {
    ob_drun_close_journal(r->d, &err); /* a failure here has nobody to tell: the journal
                                          says what it holds */
    ob_drun_free(r->d);
  }
  free(r->path);
  free(r);
}

/* The runs finished (and their fire-and-forget calls settled) or cancelled go. */
static void reap(void *ud) {
  ob_ui_runs *x = ud;
  for (urun **pp = &x->runs; *pp;) {
    urun *r = *pp;
    if (r->cancelled || (r->finished && !ob_drun_detached(r->d))) {
      *pp = r->next;
      if (!r->cancelled)
        ob_drun_end_journal(r->d); /* once: the driver's own when it wrote it already */
      urun_free(r);
    } else {
      pp = &r->next;
    }
  }
}

static void on_done(ob_run *run, void *ud) {
  urun *r = ud;
  (void)run;
  r->finished = 1;
  ob_drive_defer(r->x->dv);
}

static void on_event(void *ud, const ob_event *ev) {
  urun *r = ud;
  ob_event_to_note(r->x->e, ev); /* said as the engine's notes are (the CLI prints them) */
  if (r->finished) /* a fire-and-forget call settling after the end */
    ob_drive_defer(r->x->dv);
}

static urun *find(const ob_ui_runs *x, const char *path) {
  for (urun *r = x->runs; r; r = r->next)
    if (!strcmp(r->path, path))
      return r;
  return NULL;
}

/* The problems of a prepared plan, as one message: 400. */
static int plan_problems(ob_drun *d, ob_error *err) {
  ob_plan *p = ob_drun_plan(d);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%zu problem%s, nothing ran:", p->nerrors, p->nerrors == 1 ? "" : "s");
  for (size_t i = 0; i < p->nerrors && b.len < 3000; i++)
    ob_buf_addf(&b, " %s%s", p->errors[i], i + 1 < p->nerrors ? ";" : "");
  ob_error_set(err, OB_EINVAL, 0, "%s", b.data);
  ob_buf_free(&b);
  return 400;
}

/* Makes and starts prepared run d, its journal open: 201 (or 200 for one taken up). */
static int launch(ob_ui_runs *x, ob_drun *d, const char *path, int approve, int status,
                  ob_error *err) {
  urun *r = ob_xcalloc(1, sizeof *r);
  r->x = x;
  r->d = d;
  r->path = ob_xstrdup(path);
  ob_run_options ro = x->limits;
  ro.calls_used = &r->calls_used;
  ro.approve = approve ? approve_later : NULL;
  ro.approve_ud = r;
  ro.on_done = on_done;
  ro.on_event = on_event;
  ro.ud = r;
  if (ob_drun_make(d, &ro, err) != OB_OK) {
    urun_free(r);
    return 500;
  }
  ob_drun_attach(d, x->dv, r);
  r->next = x->runs;
  x->runs = r;
  if (ob_drun_start(d, NULL, NULL, NULL, 0, err) != OB_OK) {
    ob_drun_cancel(d);
    r->cancelled = 1;
    ob_drive_defer(x->dv);
    return 500;
  }
  return status;
}

static ob_value *parse_body(const char *body, size_t len, ob_error *err) {
  ob_value *v = ob_json_parse(body, len, err);
  if (v && ob_typeof(v) != OB_OBJECT) {
    ob_unref(v);
    ob_error_set(err, OB_EINVAL, 0, "the body is not a JSON object");
    return NULL;
  }
  return v;
}

/* A new journal's path: DIR/ui/NAME-YYYYMMDD-HHMMSS-N.jsonl (NAME: letters, digits, _ -). */
static char *new_path(ob_ui_runs *x, const ob_value *name, const char *dflt) {
  char safe[41];
  size_t n = 0;
  const char *s = name && ob_typeof(name) == OB_STRING ? ob_string_ptr(name) : dflt;
  for (; *s && n < sizeof safe - 1; s++)
    if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
        *s == '_' || *s == '-')
      safe[n++] = *s;
  safe[n] = '\0';
  if (!n)
    snprintf(safe, sizeof safe, "%s", dflt);
  char stamp[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%s/ui", x->dir);
  mkdir(b.data, 0755); /* there already, or made */
  ob_buf_addf(&b, "/%s-%s-%u.jsonl", safe, stamp, ++x->seq);
  return b.data;
}

int ob_ui_runs_start(ob_ui_runs *x, const char *body, size_t len, char **path, ob_error *err) {
  ob_value *req = parse_body(body, len, err);
  if (!req)
    return 400;
  const ob_value *plan = ob_object_get(req, "plan", 4), *input = ob_object_get(req, "input", 5);
  const ob_value *approve = ob_object_get(req, "approve", 7);
  if (!plan || (ob_typeof(plan) != OB_OBJECT && ob_typeof(plan) != OB_ARRAY)) {
    ob_unref(req);
    ob_error_set(err, OB_EINVAL, 0, "\"plan\": a plan (an array of calls, or an object with "
                 "\"plan\") is needed");
    return 400;
  }
  ob_value *inputs = NULL;
  if (input && ob_typeof(input) != OB_NULL)
    inputs = ob_array_push(ob_array(), ob_ref((ob_value *)input));
  ob_drive_source src = {.name = "plan", .plan = ob_ref((ob_value *)plan), .inputs = inputs,
                         .input_label = "input", .max_calls = x->limits.max_calls};
  ob_drun *d = ob_drun_prepare(x->e, &src, err);
  if (!d) {
    ob_unref(req);
    return 400;
  }
  if (ob_drun_plan(d)->nerrors) {
    ob_unref(req);
    int st = plan_problems(d, err);
    ob_drun_free(d);
    return st;
  }
  char *p = new_path(x, ob_object_get(req, "name", 4), "run");
  int go = approve && ob_typeof(approve) == OB_TRUE;
  ob_unref(req);
  if (ob_drun_open_journal(d, p, 0, OB_FSYNC_BATCH, err) != OB_OK) {
    ob_drun_free(d);
    free(p);
    return 500;
  }
  int st = launch(x, d, p, go, 201, err);
  if (st >= 300)
    free(p);
  else
    *path = p;
  return st;
}

int ob_ui_runs_cancel(ob_ui_runs *x, const char *path, ob_error *err) {
  urun *r = find(x, path);
  if (!r || r->cancelled || r->finished) {
    ob_error_set(err, OB_EINVAL, 0, "this run is not running in this server (only a run "
                 "started or resumed here can be cancelled here)");
    return 409;
  }
  drop_waits(r); /* before the cancel: their calls are the engine's no more */
  ob_drun_cancel(r->d);
  r->cancelled = 1;
  ob_drive_defer(x->dv);
  return 200;
}

/* The call the person approved, with the params they edited: the call as written with
 * its wiring and meta-properties, its params replaced by params (every string in them
 * taken as text). */
static ob_value *replacement(const waiting *w, const ob_value *params) {
  ob_value *call = ob_object();
  ob_object_iter it;
  ob_value *k, *v;
  ob_object_iter_init(&it, w->raw);
  while (ob_object_iter_next(&it, &k, &v))
    if (ob_string_ptr(k)[0] == '_')
      call = ob_object_setv(call, ob_ref(k), ob_ref(v));
  ob_value *esc = ob_str_escape(params);
  ob_object_iter_init(&it, esc);
  while (ob_object_iter_next(&it, &k, &v))
    if (ob_string_ptr(k)[0] != '_')
      call = ob_object_setv(call, ob_ref(k), ob_ref(v));
  ob_unref(esc);
  return call;
}

int ob_ui_runs_approve(ob_ui_runs *x, const char *path, const char *body, size_t len,
                       ob_error *err) {
  urun *r = find(x, path);
  if (!r || r->cancelled) {
    ob_error_set(err, OB_EINVAL, 0, "this run is not running in this server");
    return 409;
  }
  ob_value *req = parse_body(body, len, err);
  if (!req)
    return 400;
  const ob_value *call = ob_object_get(req, "call", 4), *dec = ob_object_get(req, "decision", 8);
  const ob_value *params = ob_object_get(req, "params", 6), *scope = ob_object_get(req, "scope", 5);
  int yes = dec && ob_typeof(dec) == OB_STRING && !strcmp(ob_string_ptr(dec), "yes");
  int no = dec && ob_typeof(dec) == OB_STRING && !strcmp(ob_string_ptr(dec), "no");
  int st = 200;
  if (!call || ob_typeof(call) != OB_STRING || (!yes && !no) ||
      (params && ob_typeof(params) != OB_OBJECT && ob_typeof(params) != OB_NULL)) {
    ob_error_set(err, OB_EINVAL, 0, "the body is {\"call\": ID, \"decision\": \"yes\" or \"no\", "
                 "\"params\": {...} to run it with other values}");
    st = 400;
  } else {
    waiting **pp = &r->waits;
    for (; *pp; pp = &(*pp)->next)
      if (!strcmp((*pp)->call, ob_string_ptr(call)) &&
          (!scope || ob_typeof(scope) != OB_STRING ||
           !strcmp((*pp)->scope ? (*pp)->scope : "", ob_string_ptr(scope))))
        break;
    if (!*pp) {
      ob_error_set(err, OB_EINVAL, 0, "call %s is not waiting for approval", ob_string_ptr(call));
      st = 409;
    } else {
      waiting *w = *pp;
      *pp = w->next; /* off the list first: the answer may bring the next call's question */
      ob_value *repl = yes && params && ob_typeof(params) == OB_OBJECT ? replacement(w, params) : NULL;
      struct ob_crun *c = w->c;
      tell_waiting(r);
      ob_approve_answer(c, yes ? OB_APPROVE_ALLOW : OB_APPROVE_REFUSE, repl, NULL);
      ob_unref(repl);
      waiting_free(w);
    }
  }
  ob_unref(req);
  return st;
}

int ob_ui_runs_resume(ob_ui_runs *x, const char *path, const char *body, size_t len,
                      ob_error *err) {
  if (find(x, path)) {
    ob_error_set(err, OB_EINVAL, 0, "this run is running in this server already");
    return 409;
  }
  ob_value *req = len ? parse_body(body, len, err) : ob_object();
  if (!req)
    return 400;
  const ob_value *force = ob_object_get(req, "force", 5), *approve = ob_object_get(req, "approve", 7);
  int forced = force && ob_typeof(force) == OB_TRUE;
  int go = approve && ob_typeof(approve) == OB_TRUE;
  ob_unref(req);
  ob_buf why;
  ob_buf_init(&why);
  size_t changes = 0;
  ob_drun *d = ob_drun_prepare_resume(x->e, path, "plan", NULL, &why, &changes, err);
  int st = 200;
  if (!d) {
    st = 409;
  } else if (ob_drun_plan(d)->nerrors) {
    st = plan_problems(d, err);
  } else if (changes && !forced) {
    ob_error_set(err, OB_EINVAL, 0, "%s(send {\"force\": true} to resume all the same)",
                 why.data ? why.data : "");
    st = 409;
  } else if (ob_drun_open_journal(d, NULL, 0, OB_FSYNC_BATCH, err) != OB_OK) {
    st = 409;
  }
  ob_buf_free(&why);
  if (st != 200) {
    ob_drun_free(d);
    return st;
  }
  return launch(x, d, path, go, 200, err);
}

int ob_ui_runs_fork(ob_ui_runs *x, const char *path, const char *body, size_t len, char **newpath,
                    ob_error *err) {
  ob_value *req = parse_body(body, len, err);
  if (!req)
    return 400;
  const ob_value *at = ob_object_get(req, "at", 2), *from = ob_object_get(req, "from", 4);
  const ob_value *set = ob_object_get(req, "set", 3), *input = ob_object_get(req, "input", 5);
  const ob_value *approve = ob_object_get(req, "approve", 7);
  if ((!at) == (!from) || (at && (ob_typeof(at) != OB_INT || ob_int_value(at) < 0)) ||
      (from && ob_typeof(from) != OB_STRING) || (set && ob_typeof(set) != OB_OBJECT) ||
      (input && ob_typeof(input) != OB_ARRAY && ob_typeof(input) != OB_NULL)) {
    ob_unref(req);
    ob_error_set(err, OB_EINVAL, 0, "the body is {\"at\": N} or {\"from\": CALL_ID}, with "
                 "\"set\": {\"†kind.path\": value, ...} and \"input\": [document, ...] if need be");
    return 400;
  }
  ob_value *sets = NULL;
  if (set) { /* {"†state.x": value} -> [["†state.x", value], ...] */
    sets = ob_array();
    ob_object_iter it;
    ob_value *k, *v;
    ob_object_iter_init(&it, set);
    while (ob_object_iter_next(&it, &k, &v))
      sets = ob_array_push(sets, ob_array_push(ob_array_push(ob_array(), ob_ref(k)), ob_ref(v)));
  }
  char *p = new_path(x, NULL, "fork");
  ob_fork_options fo = {.source = path,
                        .at = at ? ob_int_value(at) : -1,
                        .from = from ? ob_string_ptr(from) : NULL,
                        .sets = sets,
                        .inputs = input && ob_typeof(input) == OB_ARRAY ? input : NULL,
                        .journal = p,
                        .fsync = OB_FSYNC_BATCH};
  ob_buf why;
  ob_buf_init(&why);
  size_t changes = 0;
  ob_fork_result fr;
  ob_drun *d = ob_drun_prepare_fork(x->e, &fo, "plan", NULL, &why, &changes, &fr, err);
  int go = approve && ob_typeof(approve) == OB_TRUE;
  ob_unref(sets);
  ob_unref(req);
  ob_buf_free(&why); /* what changed since the source ran: a fork goes on all the same */
  int st = 201;
  if (!d)
    st = 400;
  else if (ob_drun_plan(d)->nerrors)
    st = plan_problems(d, err);
  else if (ob_drun_open_journal(d, NULL, 0, OB_FSYNC_BATCH, err) != OB_OK)
    st = 500;
  if (st == 201)
    st = launch(x, d, p, go, 201, err);
  else
    ob_drun_free(d);
  if (st == 201)
    *newpath = p;
  else
    free(p);
  return st;
}

ob_value *ob_ui_runs_waiting(ob_ui_runs *x, const char *path) {
  urun *r = find(x, path);
  return r && r->waits && !r->cancelled ? waiting_list(r) : NULL;
}

int ob_ui_runs_live(const ob_ui_runs *x, const char *path) {
  const urun *r = find(x, path);
  return r && !r->cancelled && !r->finished;
}

ob_ui_runs *ob_ui_runs_new(ob_engine *e, const char *dir, const ob_run_options *limits,
                           ob_ui_runs_notify_fn notify, void *ud) {
  ob_ui_runs *x = ob_xcalloc(1, sizeof *x);
  x->e = e;
  x->dir = ob_xstrdup(dir);
  ob_run_options lim = {0};
  if (limits) {
    lim.concurrency = limits->concurrency;
    lim.max_calls = limits->max_calls;
    lim.max_output = limits->max_output;
    lim.call_timeout_ms = limits->call_timeout_ms;
    lim.max_depth = limits->max_depth;
    lim.max_slice_ms = limits->max_slice_ms;
  }
  x->limits = lim;
  x->notify = notify;
  x->ud = ud;
  /* no stall check: the server's listening keeps the loop alive */
  x->dv = ob_drive_new(e, &(ob_drive_host){.flush = reap, .ud = x}, 0);
  return x;
}

void ob_ui_runs_free(ob_ui_runs *x) {
  if (!x)
    return;
  x->notify = NULL; /* nobody is told any more */
  while (x->runs) {
    urun *r = x->runs;
    x->runs = r->next;
    if (!r->finished)
      ob_drun_cancel(r->d); /* its journal stays resumable */
    else if (!r->cancelled)
      ob_drun_end_journal(r->d); /* its fire-and-forget calls abandoned, as at a drain's end */
    urun_free(r);
  }
  ob_drive_free(x->dv);
  free(x->dir);
  free(x);
}
