/* obelus.c -- the public C API (obelus.h): a thin layer over the engine (ob_engine),
 * the scheduler (ob_run), plans (ob_plan) and the log (ob_log) that speaks JSON text.
 *
 * Design
 * ------
 * What the layer adds to the internal modules is the part a host cannot
 * get wrong:
 *
 *  - Callbacks come from the loop. The scheduler reports events and the
 *    end of a run synchronously, from deep inside itself; a host freeing
 *    the run there would pull the scheduler's memory from under it. So the
 *    layer queues each event and each completion (one FIFO per engine, so
 *    the order across runs is kept) and delivers them on the next turn of
 *    the loop, outside every obelus function: the driver's deferred work
 *    (ob_drive_defer; ob_drive_loop.c says why that turn always comes, and
 *    never keeps the loop alive). Cost: one malloc per event (none when the
 *    host has no on_event).
 *
 *  - C tool handles are safe to complete at any time. The scheduler's own
 *    handle (ob_call_handle) dies with its run; the host may well complete
 *    later, from a timer it forgot to stop. The layer gives the host its
 *    own handle (obelus_call), linked into the run's list of calls in
 *    flight; freeing the run detaches them, and completing a detached
 *    handle only frees it. A C tool's function runs inside the scheduler,
 *    so `depth` counts those frames and obelus_run_free defers itself
 *    (cancel now, free on the loop) while it is above zero.
 *
 *  - JSON is text at the boundary: parsed on the way in (a host's malformed
 *    JSON is an error code with line and column, never a crash), printed on
 *    the way out (malloc'ed, free() it).
 *
 *  - Errors land in the engine's message, which every fallible call clears
 *    first; validation problems are also kept one by one.
 *
 *  - Journals end as `obelus run`'s do: the end record is written once the
 *    run has finished and no fire-and-forget call runs (or when it is
 *    cancelled or freed after finishing), so a journal without one is of a
 *    run that was killed or cancelled: obelus_resume takes it up (through
 *    ob_drive_resume.c, as `obelus resume` does) and gives the host a run
 *    like any other, which keeps the journal it read until it is freed.
 *
 * Costs: a C tool call costs one malloc (handle and its strings), one print
 * of its params and one parse of its result; finding the host's run of a
 * call walks the engine's live runs (a handful in any real host).
 */
#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/ob_engine.h"
#include "drive/ob_files.h"
#include "io/ob_http.h"
#include "engine/ob_resume.h"
#include "drive/ob_drive.h"
#include "engine/ob_run.h"
#include "drive/ob_shard.h"
#include "log/ob_wal.h"
#include "obelus.h"

/* The public codes are the engine's own: one table of meanings everywhere. */
_Static_assert(OBELUS_ENOMEM == OB_ENOMEM && OBELUS_EINVAL == OB_EINVAL &&
                   OBELUS_ESYNTAX == OB_ESYNTAX && OBELUS_EJSON == OB_EJSON &&
                   OBELUS_EWRITE == OB_EWRITE && OBELUS_EDEPTH == OB_EDEPTH &&
                   OBELUS_EIO == OB_EIO && OBELUS_ETYPE == OB_ETYPE &&
                   OBELUS_ENOENT == OB_ENOENT,
               "obelus.h error codes must match ob_error.h");
_Static_assert((int)OBELUS_EVENT_READY == (int)OB_EV_READY &&
                   (int)OBELUS_EVENT_STARTED == (int)OB_EV_STARTED &&
                   (int)OBELUS_EVENT_DONE == (int)OB_EV_DONE &&
                   (int)OBELUS_EVENT_SKIPPED == (int)OB_EV_SKIPPED &&
                   (int)OBELUS_EVENT_FAILED == (int)OB_EV_FAILED &&
                   (int)OBELUS_EVENT_RUN_DONE == (int)OB_EV_RUN_DONE &&
                   (int)OBELUS_EVENT_NOTE == (int)OB_EV_NOTE &&
                   (int)OBELUS_EVENT_PROGRESS == (int)OB_EV_PROGRESS,
               "obelus_event_type must match ob_event_type");

/* A C tool as registered: what the scheduler's ob_tool_fn data points to. */
typedef struct ctool {
  obelus_engine *engine;
  obelus_tool_fn fn;
  void *data;
  struct ctool *next;
} ctool;

/* An event or a completion waiting to be delivered from the loop. */
typedef struct delivery {
  struct delivery *next;
  obelus_run *run;
  int done;        /* the completion; else ev */
  obelus_event ev; /* ev.reason points just past the struct */
} delivery;

struct obelus_engine {
  ob_engine *e;
  obelus_note_cb note; /* obelus_engine_set_notes, or NULL */
  void *note_data;
  ctool *tools;
  ob_drive *dv;                  /* its runs (alive, zombies included: ob_drun_host is the
                                    obelus_run) and the turn of the loop that delivers */
  delivery *qhead, **qtail;
  int depth;                     /* C tool functions on the stack */
  int dispatching;               /* inside deliver() */
  obelus_run *waiting;           /* the run obelus_run_wait waits for */
  int wait_over, wait_status;
  char *msg;                     /* the latest error ("" when none) */
  size_t nproblems;
  char **problems;
  struct obelus_http *https;     /* the host's transfers in flight (obelus_http_start) */
  ob_shard_loads loads;          /* what was loaded, in order: a run on threads' engines
                                    load it again */
};

struct obelus_run {
  obelus_engine *engine;
  ob_drun *d;                        /* the driven run (ob_drive.h): plan, journal, run
                                        (ob_drun_run: NULL on threads) */
  obelus_event_cb on_event;
  obelus_done_cb on_done;
  void *data;
  int time_travel;
  int started, cancelled, completed; /* completed: the completion was delivered */
  int zombie;                        /* freed from a tool function: freed on the loop */
  obelus_call *calls;                /* C tool handles in flight */
};

struct obelus_call {
  ob_call_handle *h; /* NULL once detached (its run freed) */
  obelus_run *run;   /* NULL once detached */
  obelus_call *next, **prevp;
  const char *id, *tool; /* copies, stored after the struct */
  uint32_t attempt;       /* the attempt it was made for: an older one's is spent
                             (it timed out, and _retry ran the call again) */
};

/* --- errors ------------------------------------------------------------------------ */

const char *obelus_strerror(int code) {
  switch (code) {
  case OBELUS_EBUSY: return "not possible now";
  case OBELUS_ECANCELED: return "cancelled";
  default: return ob_strerror(code);
  }
}

const char *obelus_version(void) { return OB_VERSION; }

static void clear_problems(obelus_engine *E) {
  for (size_t i = 0; i < E->nproblems; i++)
    free(E->problems[i]);
  free(E->problems);
  E->problems = NULL;
  E->nproblems = 0;
}

/* Every fallible call starts here, so the message always describes the latest one. */
static void clear_error(obelus_engine *E) {
  clear_problems(E);
  free(E->msg);
  E->msg = NULL;
}

static int set_error(obelus_engine *E, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int set_error(obelus_engine *E, int code, const char *fmt, ...) {
  ob_buf b;
  ob_buf_init(&b);
  va_list ap;
  va_start(ap, fmt);
  char small[1024];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof small) {
    ob_buf_add(&b, small, (size_t)n);
  } else if (n >= 0) { /* a long message (a long path, a long JSON error): print it whole */
    char *big = malloc((size_t)n + 1);
    if (!big)
      abort();
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ob_buf_add(&b, big, (size_t)n);
    free(big);
  }
  free(E->msg);
  E->msg = b.data ? b.data : strdup("");
  if (!E->msg)
    abort();
  return code;
}

const char *obelus_engine_errmsg(const obelus_engine *e) { return e && e->msg ? e->msg : ""; }

ob_engine *ob_api_engine(obelus_engine *E) { return E ? E->e : NULL; }

size_t obelus_engine_nproblems(const obelus_engine *e) { return e ? e->nproblems : 0; }

const char *obelus_engine_problem(const obelus_engine *e, size_t i) {
  return e && i < e->nproblems ? e->problems[i] : NULL;
}

/* --- delivering callbacks from the loop ------------------------------------------------ */

static void run_free_now(obelus_run *R);

static void enqueue(obelus_engine *E, delivery *d) {
  d->next = NULL;
  *E->qtail = d;
  E->qtail = &d->next;
  ob_drive_defer(E->dv);
}

/* Drops what is still queued for R (cancelled or freed: no more callbacks). */
static void forget_deliveries(obelus_run *R) {
  obelus_engine *E = R->engine;
  delivery **pp = &E->qhead;
  E->qtail = &E->qhead;
  while (*pp) {
    delivery *d = *pp;
    if (d->run == R) {
      *pp = d->next;
      free(d);
    } else {
      E->qtail = &d->next;
      pp = &d->next;
    }
  }
}

static int run_status(const obelus_run *R) {
  const ob_drun *d = R->d;
  if (!ob_drun_threads(d) && ob_drun_journal_error(d))
    return OBELUS_EIO; /* its journal could not be written: the run was stopped */
  if (ob_drun_finished(d))
    return ob_drun_exit_status(d); /* a journal of a run that had ended: as it was */
  return R->cancelled || R->zombie ? OBELUS_ECANCELED : OBELUS_EBUSY;
}

/* The driver's deferred work (ob_drive_defer), on the next turn of the loop. */
static void deliver(void *ud) {
  obelus_engine *E = ud;
  E->dispatching++;
  /* runs freed from tool functions: the scheduler is off the stack now */
  for (ob_drun *d = ob_drive_runs(E->dv), *next; d; d = next) {
    next = ob_drun_next(d);
    obelus_run *R = ob_drun_host(d);
    if (R->zombie)
      run_free_now(R);
  }
  /* one at a time from the head: a callback may free runs, whose entries go */
  while (E->qhead) {
    delivery *d = E->qhead;
    if (!(E->qhead = d->next))
      E->qtail = &E->qhead;
    obelus_run *R = d->run;
    if (d->done) {
      R->completed = 1;
      int status = run_status(R);
      if (E->waiting == R) {
        E->wait_over = 1;
        E->wait_status = status;
      }
      if (R->on_done) {
        char *out = obelus_run_output(R);
        R->on_done(R, status, out, R->data);
        free(out);
      }
    } else if (R->on_event) {
      R->on_event(R, &d->ev, R->data);
    }
    free(d);
  }
  E->dispatching--;
}

/* The run's listeners (after the driver's, which ends the journal): they only queue. */
static void on_run_event(void *ud, const ob_event *ev) {
  obelus_run *R = ud;
  if (R->cancelled || R->zombie)
    return;
  size_t rlen = ev->reason ? strlen(ev->reason) + 1 : 0, dlen = 0, vlen = 0;
  size_t vsize = ev->value ? ob_event_value_size(ev->value) : 0;
  char *data = ev->data ? ob_json_print(ev->data, OB_JSON_COMPACT, &dlen) : NULL, *value = NULL;
  if (ev->value && vsize <= OB_EVENT_VALUE_MAX)
    value = ob_json_print(ev->value, OB_JSON_COMPACT, &vlen);
  delivery *d = malloc(sizeof *d + rlen + (data ? dlen + 1 : 0) + (value ? vlen + 1 : 0));
  if (!d)
    abort();
  d->run = R;
  d->done = 0;
  d->ev.type = (obelus_event_type)ev->type;
  d->ev.call_id = ev->call ? ev->call->id : NULL; /* the plan lives as long as the run */
  d->ev.tool = ev->call ? ev->call->tool_name : NULL;
  d->ev.call_index = ev->each ? ev->each->index : ev->call ? ev->call->index : (size_t)-1;
  d->ev.each_id = ev->each ? ev->each->id : NULL; /* the copies' plan lives as long too */
  d->ev.reason = NULL;
  if (rlen) {
    memcpy(d + 1, ev->reason, rlen);
    d->ev.reason = (const char *)(d + 1);
  }
  d->ev.data_json = d->ev.value_json = NULL;
  char *at = (char *)(d + 1) + rlen; /* after the reason: the data, the value */
  if (data) {
    memcpy(at, data, dlen + 1);
    d->ev.data_json = at;
    at += dlen + 1;
    free(data);
  }
  if (value) {
    memcpy(at, value, vlen + 1);
    d->ev.value_json = at;
    free(value);
  }
  d->ev.value_size = vsize;
  d->ev.handled = ev->handled;
  d->ev.attempt = ev->attempt;
  d->ev.t_ms = ev->t_ms;
  d->ev.note = ev->note; /* a string literal of the engine's */
  d->ev.position = obelus_run_position(R);
  enqueue(R->engine, d);
}

static void on_run_done(ob_run *r, void *ud) {
  obelus_run *R = ud;
  (void)r;
  if (R->cancelled || R->zombie)
    return;
  delivery *d = calloc(1, sizeof *d);
  if (!d)
    abort();
  d->run = R;
  d->done = 1;
  enqueue(R->engine, d);
}

const char *obelus_event_name(obelus_event_type type) {
  return ob_event_name((ob_event_type)type); /* the same order: checked below */
}

/* --- the engine --------------------------------------------------------------------------- */

int obelus_engine_new(obelus_engine **out, uv_loop_t *loop) {
  if (!out)
    return OBELUS_EINVAL;
  *out = NULL;
  obelus_engine *E = calloc(1, sizeof *E);
  if (!E)
    return OBELUS_ENOMEM;
  ob_error err;
  if (!(E->e = ob_engine_new(loop, &err))) {
    free(E);
    return err.code;
  }
  E->qtail = &E->qhead;
  /* no stall check of its own: a host may complete a C tool's call from outside the
   * loop (its game's tick); obelus_run_wait and obelus_run_fail_stalled ask */
  E->dv = ob_drive_new(E->e, &(ob_drive_host){.flush = deliver, .ud = E}, 0);
  *out = E;
  return OBELUS_OK;
}

void obelus_engine_set_http_max(obelus_engine *E, size_t n) {
  if (!E)
    return;
  E->e->http_max = n;
  if (E->e->http)
    ob_http_set_max(E->e->http, n);
}

void obelus_engine_set_http_max_bytes(obelus_engine *E, size_t n) {
  E->e->http_max_bytes = n;
  if (E->e->http)
    ob_http_set_max_bytes(E->e->http, n);
}

void obelus_engine_set_http_allow_private(obelus_engine *E, int allow) {
  E->e->http_allow_private = allow != 0;
  if (E->e->http)
    ob_http_set_allow_private(E->e->http, allow);
}

static void engine_note(void *ud, const char *kind, const char *call_id, const char *msg) {
  obelus_engine *E = ud;
  E->note(kind, call_id, msg, E->note_data);
}

void obelus_engine_set_notes(obelus_engine *E, obelus_note_cb cb, void *data) {
  if (!E)
    return;
  E->note = cb;
  E->note_data = data;
  ob_engine_set_note(E->e, cb ? engine_note : NULL, E);
}

void obelus_engine_set_max_memory(obelus_engine *E, size_t mb) {
  if (E)
    ob_engine_set_max_memory(E->e, mb << 20);
}

static void http_forget_all(obelus_engine *E);

void obelus_engine_free(obelus_engine *E) {
  if (!E)
    return;
  if (E->depth || E->dispatching || E->waiting) {
    ob_die("obelus_engine_free: called from inside one of the engine's own callbacks "
           "(or during obelus_run_wait); free the engine after the loop returns");
  }
  ob_engine_free_begin(E->e); /* before the runs close their calls' tool handles */
  while (ob_drive_runs(E->dv))
    run_free_now(ob_drun_host(ob_drive_runs(E->dv)));
  /* closed before the engine frees its own loop, whose last turns release it */
  ob_drive_free(E->dv);
  ob_engine_free(E->e); /* ends every transfer, without a callback */
  http_forget_all(E);
  for (ctool *t = E->tools, *next; t; t = next) {
    next = t->next;
    free(t);
  }
  ob_shard_loads_clear(&E->loads);
  clear_error(E);
  free(E);
}

uv_loop_t *obelus_engine_loop(obelus_engine *E) { return E->e->loop; }

int obelus_engine_load_tools(obelus_engine *E, const char *path) {
  clear_error(E);
  if (!path)
    return set_error(E, OBELUS_EINVAL, "obelus_engine_load_tools: no path");
  ob_error err;
  int rc = ob_engine_load_tools(E->e, path, &err);
  if (rc == OB_OK)
    ob_shard_loads_add(&E->loads, 't', path);
  return rc == OB_OK ? OBELUS_OK : set_error(E, rc, "%s", err.msg);
}

int obelus_engine_load_script(obelus_engine *E, const char *path) {
  clear_error(E);
  if (!path)
    return set_error(E, OBELUS_EINVAL, "obelus_engine_load_script: no path");
  ob_error err;
  int rc = ob_engine_load_script(E->e, path, &err);
  if (rc == OB_OK)
    ob_shard_loads_add(&E->loads, 's', path);
  return rc == OB_OK ? OBELUS_OK : set_error(E, rc, "%s", err.msg);
}

/* --- tools written in C ------------------------------------------------------------------- */

static void link_call(obelus_run *R, obelus_call *c) {
  c->run = R;
  c->next = R->calls;
  if (R->calls)
    R->calls->prevp = &c->next;
  c->prevp = &R->calls;
  R->calls = c;
}

static void unlink_call(obelus_call *c) {
  if (!c->run)
    return;
  *c->prevp = c->next;
  if (c->next)
    c->next->prevp = c->prevp;
  c->run = NULL;
}

/* What the scheduler calls for every call of a C tool. */
static void trampoline(ob_call_handle *h, const ob_value *params, void *data) {
  ctool *t = data;
  obelus_engine *E = t->engine;
  const char *id = ob_call_handle_id(h), *tool = ob_call_handle_tool(h);
  size_t idlen = strlen(id) + 1, toollen = strlen(tool) + 1;
  obelus_call *c = malloc(sizeof *c + idlen + toollen);
  if (!c)
    abort();
  char *strs = (char *)(c + 1);
  memcpy(strs, id, idlen);
  memcpy(strs + idlen, tool, toollen);
  c->id = strs;
  c->tool = strs + idlen;
  c->h = h;
  c->run = NULL;
  c->attempt = ob_call_handle_attempt(h);
  obelus_run *R = ob_drive_find(E->dv, ob_call_handle_run(h));
  if (R)
    link_call(R, c);
  else /* cannot happen: every run of the engine's scheduler is one of ours */
    c->h = NULL;
  char *json = ob_json_print(params, OB_JSON_COMPACT, NULL);
  E->depth++;
  t->fn(c, json, t->data);
  E->depth--;
  free(json);
}

int obelus_engine_add_tool(obelus_engine *E, const char *name, const char *schema_json,
                           obelus_tool_fn fn, void *data) {
  clear_error(E);
  if (!name || !*name || !fn)
    return set_error(E, OBELUS_EINVAL, "obelus_engine_add_tool: a C tool needs a name and a "
                                       "function");
  ob_error err;
  ob_value *schema = NULL;
  if (schema_json && !(schema = ob_json_parse(schema_json, strlen(schema_json), &err)))
    return set_error(E, err.code, "C tool \"%s\": the schema is not JSON: %s", name, err.msg);
  ctool *t = calloc(1, sizeof *t);
  if (!t)
    abort();
  t->engine = E;
  t->fn = fn;
  t->data = data;
  int rc = ob_engine_add_tool(E->e, name, schema, trampoline, t, &err);
  ob_unref(schema);
  if (rc != OB_OK) {
    free(t);
    return set_error(E, rc, "C tool \"%s\": %s", name, err.msg);
  }
  t->next = E->tools;
  E->tools = t;
  return OBELUS_OK;
}

/* Takes the handle from the host: unlinks and frees it, returning the
 * scheduler's handle (NULL when the run is gone) and the engine to report to. */
static ob_call_handle *spend(obelus_call *c, obelus_engine **E) {
  ob_call_handle *h = c->h;
  *E = c->run ? c->run->engine : NULL;
  if (h && ob_call_handle_attempt(h) != c->attempt)
    h = NULL; /* a later attempt runs now: this one's completion is not its */
  unlink_call(c);
  free(c);
  return h;
}

int obelus_call_branch(obelus_call *c, size_t alt, const char *result_json) {
  if (!c)
    return OBELUS_EINVAL;
  obelus_engine *E;
  ob_call_handle *h = spend(c, &E);
  if (!h)
    return OBELUS_OK; /* the run was freed: nothing left to complete */
  clear_error(E);
  if (!result_json) {
    ob_call_complete(h, alt, NULL, NULL);
    return OBELUS_OK;
  }
  ob_error err;
  ob_value *v = ob_json_parse(result_json, strlen(result_json), &err);
  if (!v) {
    char why[600];
    snprintf(why, sizeof why, "the tool's result is not JSON: %s", err.msg);
    set_error(E, err.code, "call %s (%s): %s", ob_call_handle_id(h), ob_call_handle_tool(h), why);
    ob_call_complete(h, 0, NULL, why);
    return err.code;
  }
  ob_call_complete(h, alt, v, NULL);
  ob_unref(v);
  return OBELUS_OK;
}

int obelus_call_complete(obelus_call *c, const char *result_json) {
  return obelus_call_branch(c, 0, result_json);
}

int obelus_call_emit(obelus_call *c, const char *data_json) {
  if (!c || !data_json)
    return OBELUS_EINVAL;
  obelus_engine *E = c->run ? c->run->engine : NULL;
  ob_call_handle *h = c->h;
  if (E)
    clear_error(E);
  /* completed, its run freed, or a later attempt's: the handle sends nothing */
  if (!h || !E || ob_call_handle_attempt(h) != c->attempt)
    return E ? set_error(E, OBELUS_EINVAL, "call %s (%s): obelus_call_emit after the call "
                                           "completed, or its attempt ended", c->id, c->tool)
             : OBELUS_EINVAL;
  ob_error err;
  ob_value *v = ob_json_parse(data_json, strlen(data_json), &err);
  if (!v)
    return set_error(E, err.code, "call %s (%s): obelus_call_emit: not JSON: %s", c->id,
                     c->tool, err.msg);
  int rc = ob_call_emit(h, v, &err);
  ob_unref(v);
  return rc == OB_OK ? OBELUS_OK
                     : set_error(E, rc, "call %s (%s): obelus_call_emit: %s", c->id, c->tool,
                                 err.msg);
}

void obelus_call_fail(obelus_call *c, const char *message) {
  if (!c)
    return;
  obelus_engine *E;
  ob_call_handle *h = spend(c, &E);
  if (h)
    ob_call_complete(h, 0, NULL, message ? message : "failed (no message)");
}

const char *obelus_call_id(const obelus_call *c) { return c->id; }
const char *obelus_call_tool(const obelus_call *c) { return c->tool; }

/* --- runs ----------------------------------------------------------------------------------- */

/* Keeps every problem of an invalid plan on the engine, one by one and joined. */
static int report_problems(obelus_engine *E, const ob_plan *p) {
  ob_buf b;
  ob_buf_init(&b);
  E->problems = calloc(p->nerrors, sizeof *E->problems);
  if (!E->problems)
    abort();
  for (size_t i = 0; i < p->nerrors; i++) {
    if (!(E->problems[i] = strdup(p->errors[i])))
      abort();
    ob_buf_addf(&b, "%s%s", i ? "\n" : "", p->errors[i]);
  }
  E->nproblems = p->nerrors;
  free(E->msg);
  E->msg = b.data;
  return OBELUS_EINVAL;
}

/* The host's run of the driven run d (prepared, its journal open), made with opt's
 * options and put on the engine's list: OBELUS_OK, or the error (d freed). */
static int run_make(obelus_engine *E, obelus_run **out, ob_drun *d,
                    const obelus_run_options *opt) {
  obelus_run *R = calloc(1, sizeof *R);
  if (!R)
    abort();
  R->engine = E;
  R->d = d;
  R->on_event = opt->on_event;
  R->on_done = opt->on_done;
  R->data = opt->data;
  R->time_travel = opt->time_travel != 0;
  ob_run_options ro = {.concurrency = opt->concurrency,
                       .max_depth = opt->max_depth,
                       .time_travel = R->time_travel,
                       .call_timeout_ms = opt->call_timeout_ms,
                       .max_output = (opt->max_output_kb ? opt->max_output_kb
                                                         : OB_DEFAULT_MAX_OUTPUT_KB) << 10,
                       .max_calls = opt->max_calls ? opt->max_calls : OB_DEFAULT_MAX_CALLS,
                       .on_event = opt->on_event ? on_run_event : NULL,
                       .on_done = on_run_done,
                       .ud = R};
  ob_error err;
  if (ob_drun_make(d, &ro, &err) != OB_OK) { /* the context was tried: only the unexpected */
    ob_drun_free(d);
    free(R);
    return set_error(E, err.code, "%s", err.msg);
  }
  ob_drun_attach(d, E->dv, R);
  *out = R;
  return OBELUS_OK;
}

/* Reports the problems of d's plan, if it has any, and frees d: OBELUS_EINVAL; else 0. */
static int refuse_problems(obelus_engine *E, ob_drun *d) {
  if (!ob_drun_plan(d)->nerrors)
    return 0;
  report_problems(E, ob_drun_plan(d));
  ob_drun_free(d);
  return OBELUS_EINVAL;
}

/* Validates the plan (pv, consumed; read from file, or NULL) and makes the run: what
 * obelus_run_new and obelus_run_new_file share. */
static int run_new(obelus_engine *E, obelus_run **out, ob_value *pv, const char *name,
                   const char *file, const obelus_run_options *opt) {
  static const obelus_run_options defaults = {0};
  if (!opt)
    opt = &defaults;
  ob_error err;
  ob_value *inputs = NULL;
  if (opt->input) {
    ob_value *in = ob_json_parse(opt->input, strlen(opt->input), &err);
    if (!in) {
      ob_unref(pv);
      return set_error(E, err.code, "%s: the input is not JSON: %s", name, err.msg);
    }
    inputs = ob_array_push(ob_array(), in);
  }
  ob_fsync mode = OB_FSYNC_BATCH;
  int fsync_ok = !opt->fsync || ob_fsync_parse(opt->fsync, &mode) == OB_OK;
  /* on threads when more than one is asked for and there are no C tools (they are the
   * host's, on its thread); an invalid fsync is refused below, on one engine */
  ob_drive_source src = {.name = name,
                         .file = file,
                         .plan = pv,
                         .inputs = inputs,
                         .plans_root = opt->plans_root,
                         .input_label = "input",
                         .max_calls = opt->max_calls ? opt->max_calls : OB_DEFAULT_MAX_CALLS,
                         .may_thread = opt->threads > 1 && !E->tools && fsync_ok,
                         .threads = opt->threads,
                         .concurrency = opt->concurrency,
                         .journal_fsync = opt->journal ? mode : OB_FSYNC_NEVER};
  ob_drun *d = ob_drun_prepare(E->e, &src, &err);
  if (!d) /* the plans root */
    return set_error(E, OBELUS_EINVAL, "%s: %s", name, err.msg);
  int rc = refuse_problems(E, d);
  if (rc)
    return rc;
  if (opt->journal) {
    if (!fsync_ok) {
      ob_drun_free(d);
      return set_error(E, OBELUS_EIO, "fsync is never, batch or always, not \"%s\"", opt->fsync);
    }
    /* the host's FILE flushed, and its file opened again by the descriptor; the FILE
     * stays the host's to close */
    fflush(opt->journal);
    if (ob_drun_open_journal_fd(d, fileno(opt->journal), mode, &err) != OB_OK) {
      ob_drun_free(d);
      return set_error(E, OBELUS_EIO, "%s", err.msg);
    }
  }
  return run_make(E, out, d, opt);
}

int obelus_run_new(obelus_engine *E, obelus_run **out, const char *plan_json,
                   const obelus_run_options *opt) {
  if (out)
    *out = NULL;
  clear_error(E);
  if (!out || !plan_json)
    return set_error(E, OBELUS_EINVAL, "obelus_run_new: needs a place for the run and a plan");
  const char *name = opt && opt->name ? opt->name : "plan";
  ob_error err;
  ob_value *pv = ob_json_parse(plan_json, strlen(plan_json), &err);
  if (!pv)
    return set_error(E, err.code, "%s: the plan is not JSON: %s", name, err.msg);
  return run_new(E, out, pv, name, NULL, opt);
}

int obelus_run_new_file(obelus_engine *E, obelus_run **out, const char *path,
                        const obelus_run_options *opt) {
  if (out)
    *out = NULL;
  clear_error(E);
  if (!out || !path)
    return set_error(E, OBELUS_EINVAL, "obelus_run_new_file: needs a place for the run and a "
                                       "path");
  /* a journal that is the plan file or a tool file (the same inode, whatever the
   * names) would be appended to, or was truncated by the host's fopen: refused
   * before it is read */
  if (opt && opt->journal) {
    ob_files *fs = ob_files_new();
    ob_files_add(fs, "the plan file", path);
    ob_files_add_engine(fs, E->e);
    ob_buf why;
    ob_buf_init(&why);
    int bad = ob_files_clash_fd(fs, "the journal", fileno(opt->journal), &why);
    ob_files_free(fs);
    if (bad) {
      set_error(E, OBELUS_EINVAL, "obelus_run_new_file: %s", why.data);
      ob_buf_free(&why);
      return OBELUS_EINVAL;
    }
    ob_buf_free(&why);
  }
  ob_error err;
  ob_value *pv = ob_json_parse_file(path, &err); /* the message starts with the path */
  if (!pv)
    return set_error(E, err.code, "%s", err.msg);
  return run_new(E, out, pv, opt && opt->name ? opt->name : path, path, opt);
}

int obelus_resume(obelus_engine *E, obelus_run **out, const char *journal_path,
                  const obelus_run_options *opt) {
  static const obelus_run_options defaults = {0};
  if (out)
    *out = NULL;
  clear_error(E);
  if (!out || !journal_path)
    return set_error(E, OBELUS_EINVAL, "obelus_resume: needs a place for the run and a journal");
  if (!opt)
    opt = &defaults;
  if (opt->journal || opt->input)
    return set_error(E, OBELUS_EINVAL, "obelus_resume: journal and input are the run's: the run "
                                       "appends to the journal it resumes and reads its inputs "
                                       "from it (leave them NULL)");
  ob_fsync mode = OB_FSYNC_BATCH;
  if (opt->fsync && ob_fsync_parse(opt->fsync, &mode) != OB_OK)
    return set_error(E, OBELUS_EINVAL, "obelus_resume: fsync is never, batch or always, not "
                                       "\"%s\"", opt->fsync);
  ob_error err;
  ob_buf why;
  ob_buf_init(&why);
  size_t changes;
  ob_drun *d = ob_drun_prepare_resume(E->e, journal_path, opt->name, opt->plans_root, &why,
                                      &changes, &err);
  if (!d) {
    ob_buf_free(&why);
    return set_error(E, err.code, "%s", err.msg);
  }
  int rc = refuse_problems(E, d);
  if (!rc && changes && !opt->force) {
    set_error(E, OBELUS_EINVAL, "%s: %s; nothing ran (force in the options resumes anyway)",
              journal_path, why.data);
    ob_drun_free(d);
    rc = OBELUS_EINVAL;
  }
  ob_buf_free(&why);
  if (rc)
    return rc;
  if ((rc = ob_drun_open_journal(d, NULL, 0, mode, &err)) != OB_OK) {
    ob_drun_free(d);
    return set_error(E, rc, "%s", err.msg);
  }
  return run_make(E, out, d, opt);
}

int obelus_fork(obelus_engine *E, obelus_run **out, const char *journal_path,
                const obelus_fork_options *fork, const obelus_run_options *opt) {
  static const obelus_run_options defaults = {0};
  if (out)
    *out = NULL;
  clear_error(E);
  if (!out || !journal_path || !fork || !fork->journal)
    return set_error(E, OBELUS_EINVAL, "obelus_fork: needs a place for the run, a journal and "
                                       "the fork's options with its own journal");
  if (!opt)
    opt = &defaults;
  if (opt->journal || opt->input)
    return set_error(E, OBELUS_EINVAL, "obelus_fork: journal and input of the run options are "
                                       "the fork's (fork->journal, fork->inputs): leave them NULL");
  ob_fsync mode = OB_FSYNC_BATCH;
  if (opt->fsync && ob_fsync_parse(opt->fsync, &mode) != OB_OK)
    return set_error(E, OBELUS_EINVAL, "obelus_fork: fsync is never, batch or always, not "
                                       "\"%s\"", opt->fsync);
  ob_error err;
  ob_value *sets = ob_array(), *inputs = ob_array();
  int rc = OBELUS_OK;
  for (size_t i = 0; !rc && i < fork->nsets; i++) {
    ob_value *pair = fork->sets && fork->sets[i] ? ob_fork_parse_set(fork->sets[i], &err) : NULL;
    if (!pair)
      rc = set_error(E, OBELUS_EINVAL, "obelus_fork: %s",
                     fork->sets && fork->sets[i] ? err.msg : "a set is NULL");
    else
      sets = ob_array_push(sets, pair);
  }
  for (size_t i = 0; !rc && i < fork->ninputs; i++) {
    ob_value *v = fork->inputs && fork->inputs[i]
                      ? ob_json_parse(fork->inputs[i], strlen(fork->inputs[i]), &err) : NULL;
    if (!v)
      rc = set_error(E, OBELUS_EJSON, "obelus_fork: input %zu: %s", i + 1,
                     fork->inputs && fork->inputs[i] ? err.msg : "NULL");
    else
      inputs = ob_array_push(inputs, v);
  }
  ob_drun *d = NULL;
  if (!rc) {
    ob_fork_options fo = {.source = journal_path, .at = fork->from ? -1 : fork->at,
                          .from = fork->from, .sets = sets, .inputs = inputs,
                          .journal = fork->journal, .overwrite = fork->overwrite, .fsync = mode};
    ob_fork_result res;
    ob_buf why;
    ob_buf_init(&why);
    size_t changes;
    d = ob_drun_prepare_fork(E->e, &fo, opt->name, opt->plans_root, &why, &changes, &res, &err);
    if (!d)
      rc = set_error(E, err.code, "%s", err.msg);
    else if (changes)
      ob_engine_note(E->e, "changed", NULL, "%s", why.data);
    ob_buf_free(&why);
  }
  ob_unref(sets);
  ob_unref(inputs);
  if (rc)
    return rc;
  if ((rc = refuse_problems(E, d)))
    return rc;
  if ((rc = ob_drun_open_journal(d, NULL, 0, mode, &err)) != OB_OK) {
    ob_drun_free(d);
    return set_error(E, rc, "%s", err.msg);
  }
  return run_make(E, out, d, opt);
}

int obelus_run_start(obelus_run *R) {
  obelus_engine *E = R->engine;
  clear_error(E);
  if (R->cancelled || R->zombie)
    return set_error(E, OBELUS_ECANCELED, "obelus_run_start: the run was cancelled");
  if (R->started)
    return set_error(E, OBELUS_EINVAL, "obelus_run_start: the run was started already");
  R->started = 1;
  ob_error err;
  /* on one engine, ob_run_start: it may free R (deferred) through a C tool, and R is not
   * touched after; on threads, the parts' engines load what this one loaded */
  if (ob_drun_start(R->d, NULL, NULL, &E->loads, 5000, &err) != OB_OK) {
    R->cancelled = 1;
    return set_error(E, err.code, "%s", err.msg);
  }
  return OBELUS_OK;
}

int obelus_run_wait(obelus_run *R) {
  obelus_engine *E = R->engine;
  clear_error(E);
  if (E->depth || E->dispatching || E->waiting)
    return set_error(E, OBELUS_EBUSY, "obelus_run_wait: called from inside a callback of the "
                                      "engine, whose loop is running already");
  if (!R->started)
    return set_error(E, OBELUS_EINVAL, "obelus_run_wait: the run was not started");
  if (R->completed || R->cancelled || R->zombie)
    return run_status(R);
  uv_loop_t *loop = E->e->loop;
  E->waiting = R;
  E->wait_over = 0;
  while (!E->wait_over) {
    int alive = uv_run(loop, UV_RUN_ONCE);
    if (E->wait_over)
      break;
    if (ob_drun_journal_error(R->d)) { /* the run was stopped (ob_record_flush) */
      E->wait_status = set_error(E, OBELUS_EIO, "%s; the run was stopped",
                                 ob_drun_journal_error(R->d));
      break;
    }
    /* nothing left on the loop, yet calls wait: they never will finish */
    if (!alive && ob_drun_run(R->d) && !uv_loop_alive(loop) && ob_drun_fail_stalled(R->d) == 0 &&
        !uv_loop_alive(loop)) {
      E->wait_status = set_error(E, OBELUS_EBUSY, "obelus_run_wait: the run cannot finish "
                                                  "(nothing runs, nothing is pending)");
      break;
    }
  }
  E->waiting = NULL;
  return E->wait_status;
}

void obelus_run_cancel(obelus_run *R) {
  if (!R || R->cancelled)
    return;
  obelus_engine *E = R->engine;
  R->cancelled = 1;
  ob_drun_cancel(R->d);
  ob_drun_end_journal(R->d); /* a run that finished: what still ran is abandoned */
  forget_deliveries(R);
  if (E->waiting == R) {
    E->wait_over = 1;
    E->wait_status = run_status(R);
  }
}

/* Detaches the host's handles (completing one later only frees it) and frees. */
static void run_free_now(obelus_run *R) {
  obelus_engine *E = R->engine;
  forget_deliveries(R);
  if (E->waiting == R) {
    E->wait_over = 1;
    E->wait_status = ob_drun_finished(R->d) ? run_status(R) : OBELUS_ECANCELED;
  }
  while (R->calls) {
    obelus_call *c = R->calls;
    unlink_call(c);
    c->h = NULL;
  }
  ob_drun_end_journal(R->d); /* a run that finished: what still ran is abandoned */
  /* threads joined, the run, its journal (the host's FILE stays open: only our
   * descriptor goes), the plan and the journal read */
  ob_drun_free(R->d); /* off the driver's list too */
  free(R);
}

void obelus_run_free(obelus_run *R) {
  if (!R)
    return;
  obelus_engine *E = R->engine;
  if (E->depth) { /* a C tool's function: the scheduler is on the stack */
    if (!R->zombie) {
      obelus_run_cancel(R);
      R->zombie = 1;
      while (R->calls) {
        obelus_call *c = R->calls;
        unlink_call(c);
        c->h = NULL;
      }
      ob_drive_defer(E->dv);
    }
    return;
  }
  run_free_now(R);
}

int obelus_run_status(const obelus_run *R) { return run_status(R); }

size_t obelus_run_detached(const obelus_run *R) {
  return R->cancelled || R->zombie ? 0 : ob_drun_detached(R->d);
}

char *obelus_run_output(obelus_run *R) {
  ob_value *v = ob_drun_output(R->d);
  char *s = ob_json_print(v, OB_JSON_COMPACT, NULL);
  ob_unref(v);
  return s;
}

/* The run's log; NULL for a run on threads (a log on each thread). */
static ob_log *run_log(const obelus_run *R) {
  ob_run *r = ob_drun_run(R->d);
  return r ? ob_run_log(r) : NULL;
}

int obelus_run_resolve(obelus_run *R, const char *expr, const char *instance, size_t at,
                       char **json_out) {
  obelus_engine *E = R->engine;
  clear_error(E);
  if (json_out)
    *json_out = NULL;
  if (!expr || !json_out)
    return set_error(E, OBELUS_EINVAL, "obelus_run_resolve: needs an expression and a place "
                                       "for the value");
  ob_log *log = run_log(R);
  if (!log)
    return set_error(E, OBELUS_EINVAL, "obelus_run_resolve: a run on threads has a log on each "
                                       "thread, none to read here (read its output)");
  size_t len = ob_log_len(log);
  if (at >= len)
    at = OB_LOG_NOW;
  else if (!R->time_travel)
    return set_error(E, OBELUS_EINVAL, "obelus_run_resolve: reading as of position %zu needs "
                                       "the run made with time_travel (it keeps only the newest "
                                       "version of each document; the log has %zu messages)",
                     at, len);
  ob_expr ex;
  ob_error err;
  int rc = ob_expr_parse(expr, strlen(expr), OB_EXPR_INPUT, &ex, &err);
  if (rc != OB_OK)
    return set_error(E, rc, "malformed expression: %s", err.msg);
  ob_value *v = ob_log_eval(log, &ex, instance, at);
  ob_expr_free(&ex);
  if (!v) {
    if (at == OB_LOG_NOW)
      return set_error(E, OBELUS_ENOENT, "absent: nothing at %s%s%s", expr,
                       instance ? " in instance " : "", instance ? instance : "");
    return set_error(E, OBELUS_ENOENT, "absent: nothing at %s%s%s as of position %zu", expr,
                     instance ? " in instance " : "", instance ? instance : "", at);
  }
  *json_out = ob_json_print(v, OB_JSON_COMPACT, NULL);
  ob_unref(v);
  return OBELUS_OK;
}

size_t obelus_run_position(const obelus_run *R) {
  ob_log *log = run_log(R);
  return log ? ob_log_len(log) : 0;
}

char *obelus_run_message(obelus_run *R, size_t i) {
  ob_log *log = run_log(R);
  if (!log || i >= ob_log_len(log))
    return NULL;
  ob_value *m = ob_log_message(log, i);
  char *s = ob_json_print(m, OB_JSON_COMPACT, NULL);
  ob_unref(m);
  return s;
}

size_t obelus_run_fail_stalled(obelus_run *R) {
  return R->cancelled || R->zombie ? 0 : ob_drun_fail_stalled(R->d);
}

/* --- HTTP ---------------------------------------------------------------------- */

/* A transfer of the host's: what to call back, in the engine's list so that
 * freeing the engine frees the ones left. */
struct obelus_http {
  ob_http_xfer *x;
  obelus_http_cb cb;
  void *data;
  obelus_http *next, **prevp;
};

static void http_unlink(obelus_http *t) {
  *t->prevp = t->next;
  if (t->next)
    t->next->prevp = t->prevp;
}

static void http_done(void *ud, const ob_http_response *res) {
  obelus_http *t = ud;
  http_unlink(t);
  obelus_http_response r = {res->error,    res->status,   res->nheaders,
                            res->names,    res->values,   res->body,
                            res->body_len, res->url,      res->version};
  obelus_http_cb cb = t->cb;
  void *data = t->data;
  free(t);
  cb(&r, data);
}

int obelus_http_start(obelus_engine *E, const obelus_http_request *rq, obelus_http_cb cb,
                      void *data, obelus_http **out) {
  if (out)
    *out = NULL;
  clear_error(E);
  if (!rq || !cb)
    return set_error(E, OBELUS_EINVAL, "obelus_http_start: needs a request and a callback");
  ob_error err;
  if (!ob_engine_http(E->e, &err))
    return set_error(E, OBELUS_EINVAL, "%s", err.msg);
  ob_http_request q = {rq->method, rq->url, rq->headers, rq->nheaders, rq->body, rq->body_len,
                       rq->body != NULL, rq->timeout_ms, !rq->no_follow, rq->max_bytes,
                       rq->ca_file, rq->download, rq->low_speed_limit, rq->low_speed_time};
  obelus_http *t = calloc(1, sizeof *t);
  if (!t)
    abort();
  t->cb = cb;
  t->data = data;
  if (!(t->x = ob_http_start(E->e->http, &q, http_done, t, &err))) {
    free(t);
    return set_error(E, OBELUS_EINVAL, "%s", err.msg);
  }
  t->next = E->https;
  if (E->https)
    E->https->prevp = &t->next;
  t->prevp = &E->https;
  E->https = t;
  if (out)
    *out = t;
  return OBELUS_OK;
}

void obelus_http_cancel(obelus_http *t) {
  if (!t)
    return;
  http_unlink(t);
  ob_http_cancel(t->x);
  free(t);
}

/* The engine goes: its transfers end with it (ob_engine_free cancels them). */
static void http_forget_all(obelus_engine *E) {
  while (E->https) {
    obelus_http *t = E->https;
    http_unlink(t);
    free(t);
  }
}
