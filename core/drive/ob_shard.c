/* ob_shard.c -- a plan with instances run on several threads (ob_shard.h).
 *
 * Design
 * ------
 * Instances never depend on one another (plan-format §6: a copy reads the global
 * documents and its own scope, and writes its own scope only), so a plan with
 * instances splits into parts that share nothing: part k is the plan with
 * "instances" cut to the k-th of N equal runs of its list ("auto" already
 * resolved). Each part runs on a thread of its own, on an engine of its own:
 * its own loop, Lua state, tools loaded again from the same files (cfg->setup),
 * log and scheduler. Nothing crosses threads while they run but text: the part
 * is handed over as JSON and parsed on its thread, its journal lines go out as
 * bytes, so no ob_value is ever shared (their counts are not atomic). What a
 * part leaves (its output, its failure) is read once its thread has been joined.
 * The host may hand in its plan as a probe (ob_plan_probe: one copy of each
 * call, enough to know it valid), since each part reads and checks its own part
 * whole anyway: `run` then reads the plan once, in parallel, not once whole on
 * the main thread and again in parts.
 *
 * A part whose run is over frees its engine on its own thread, while the others
 * still run, once the host has told the events it noted (they point into its
 * plan); only its loop waits for the host, which closes it after the join:
 * libuv closes a loop's descriptors with a raw system call ThreadSanitizer does
 * not see, so a loop closed while another thread takes the same numbers would
 * look like a race.
 *
 * The journal is the host's. Its first lines are what one engine writes first:
 * a run of the whole plan is made on the host's engine and never started, which
 * appends the plan, the context, the input and the "run" record. Each part's run
 * writes its own journal to /dev/null, its first lines (its plan, context,
 * input, run) dropped, and the rest, at every flush (ob_wal_set_tee), added to
 * the host's journal and flushed there by the part's own thread, under the lock:
 * a flush comes before the part's next tool runs, so a call's start and what it
 * reads are in the journal file before its tool does anything, as on one engine
 * (a SIGKILL then finds them; resume reports the call as having started). While
 * the parts run, nothing else touches the host's journal (its waiters, the only
 * users of its loop, come with --fsync always, which keeps a run on one engine).
 * Each call's lines are in the order its engine wrote them, parts' flushes in
 * the order they took the lock: the order one engine writes when calls settle at
 * those times; the lines of one instance are in exactly the order one engine
 * gives them, since one engine runs each instance. Then "end", written after
 * every part ended. `obelus resume`, `log`, `report` read it as one engine's.
 *
 * What a run on threads shares out: --concurrency (N split into parts that add
 * up to N; never more threads than N), --max-calls (each part may use the limit
 * less the other parts' plan calls), --max-memory (each part's engine has an
 * nth of the limit its setup gave it). What each engine has of its own: tool
 * globals, obelus.http's transfers, the memory account, the
 * fire-and-forget drain (each part waits for its own). Scheduler events reach
 * cfg->opt.on_event on the host's loop, a part's in the order it had them: each
 * is noted under the lock (its call points into the part's plan, which its part
 * keeps until they are told) and told on the host's loop.
 *
 * Costs: per part, a thread, an engine with its tools loaded (under a ms), the
 * part's JSON printed and parsed once and its part of the plan read (about 1.7 us
 * a call); per journal flush of a part, the lock and its bytes copied into the
 * host's journal (its lines split); per scheduler event, with a
 * listener, a note of 32 bytes, a lock and a uv_async_send (libuv folds sends
 * that come before the host's loop wakes into one callback). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drive/ob_drain.h"
#include "base/ob_mem.h"
#include "bridge/ob_pool.h"
#include "drive/ob_shard.h"
#include "log/ob_wal.h"

/* A scheduler event of a part, kept until the host's loop tells it: its call
 * lives in the part's plan, which lasts until the shards are freed. */
typedef struct part_event_note {
  ob_event_type type;
  const ob_call *call;
  char *reason;
  double t_ms;
  const char *note; /* OB_EV_NOTE's kind: a string literal of the engine's */
  const char *phase; /* OB_EV_FAILED's: a string literal too */
  int detached;
  uint32_t attempt;
  char *data;        /* OB_EV_PROGRESS's value as JSON text: values are not shared
                        between threads (their counts are not atomic) */
  char *value;       /* OB_EV_DONE's value as JSON text, when OB_EVENT_VALUE_MAX bytes or
                        less (a larger one is not carried across) */
  int handled;
  const ob_call *each;
} part_event_note;

typedef struct shard {
  ob_shards *all;
  size_t k;
  uv_thread_t thread;
  char *plan_text, *inputs_text; /* its part of the plan, and the input (or NULL) */
  size_t plan_len, inputs_len;
  size_t concurrency, max_calls, calls_used;
  /* made on the part's thread (part_make) and freed there (part_free), but for
   * its loop, closed by the host after the join */
  uv_loop_t loop;
  int loop_open;
  ob_engine *e;
  ob_value *pv, *inputs;
  ob_plan *plan;
  ob_wal *wal;
  ob_run *run;
  uv_async_t wake; /* the host asks the part to cancel */
  ob_drain drain;
  int handles, wake_open;
  /* under all->lock */
  size_t counts[OB_EV_PROGRESS + 1]; /* by event: started, done, ... (ob_shard_counts) */
  part_event_note *events; /* events not yet told on the host's loop */
  size_t nevents, capevents;
  int closing;  /* its run is over: no more events noted, its engine about to go */
  int may_free; /* the host has told every event it noted (their calls are its plan's) */
  /* read after the join */
  ob_value *output;
  int failed, ended;
  size_t abandoned;
  char *error;
} shard;

struct ob_shards {
  ob_shard_config cfg;
  ob_run *head;          /* the run of the whole plan that wrote the journal's first lines */
  shard *parts;
  size_t n;
  uv_mutex_t lock;
  uv_cond_t told;        /* a closing part may free its engine (under lock) */
  int dropping;          /* events are no longer told: closing parts need not wait */
  uv_async_t *note;      /* on the host's loop: journal bytes, or a part ended (its own
                            memory: it may close after the shards are freed) */
  size_t ended;          /* parts ended (under lock) */
  int cancelled;         /* under lock */
  int finished, waiting, joined;
  uint64_t t0;           /* uv_hrtime() at the start: run_done's t_ms */
  struct loads_copy *loads; /* cfg.loads, copied, or NULL */
};

/* A journal synced at every result keeps the run on one engine: a result is
 * on disk before its readers start, one engine's promise. */
static int journal_pins(ob_fsync mode) { return mode == OB_FSYNC_ALWAYS; }

size_t ob_shard_threads(const ob_plan *plan, size_t threads, const ob_run_options *opt) {
  size_t concurrency = opt->concurrency;
  if (!threads)
    threads = plan->ninstances ? (size_t)uv_available_parallelism() : 1;
  if (threads > plan->ninstances)
    threads = plan->ninstances;
  if (concurrency && threads > concurrency)
    threads = concurrency;
  for (size_t i = 0; i < plan->ncalls && threads > 1; i++)
    if (ob_object_get(plan->calls[i].raw, "_instance", 9))
      threads = 1; /* its scope would need a part of its own: one engine does it all */
  if (opt->approve || (opt->journal && journal_pins(ob_wal_mode(opt->journal))))
    return 1;
  return threads < 2 ? 1 : threads;
}

ob_plan *ob_shard_read_plan(const ob_engine *e, const ob_value *v, const ob_plan_source *src,
                            size_t threads, size_t concurrency, ob_fsync journal) {
  if (threads != 1 && !journal_pins(journal) && ob_typeof(v) == OB_OBJECT &&
      ob_object_get(v, "instances", 9)) {
    ob_plan *p = ob_run_read_plan(e, v, src, 1);
    ob_run_options opt = {.concurrency = concurrency};
    if (!p->nerrors && ob_shard_threads(p, threads, &opt) > 1)
      return p;
    ob_plan_free(p); /* its problems are reported as the whole plan has them */
  }
  return ob_run_read_plan(e, v, src, 0);
}

/* --- what the host's loop does ------------------------------------------------ */

/* Adds the bytes (whole lines, each with its '\n') to the journal, line by line. */
static void journal_add(ob_wal *w, const char *bytes, size_t len) {
  const char *p = bytes, *end = bytes + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
      break;
    ob_wal_add(w, p, (size_t)(nl - p));
    p = nl + 1;
  }
}

/* Tells the first ntell of the n events the parts noted (on the host's loop), and
 * frees the notes. */
static void tell_events(ob_shards *s, part_event_note *ev, size_t ntell, size_t n) {
  for (size_t i = 0; i < n; i++) {
    ob_value *data = NULL, *value = NULL;
    if (i < ntell && ev[i].data)
      data = ob_json_parse(ev[i].data, strlen(ev[i].data), &(ob_error){0});
    if (i < ntell && ev[i].value)
      value = ob_json_parse(ev[i].value, strlen(ev[i].value), &(ob_error){0});
    ob_event e = {ev[i].type, ev[i].call, ev[i].reason, ev[i].t_ms, ev[i].note, ev[i].phase,
                  ev[i].detached, data, ev[i].attempt, value, ev[i].handled, ev[i].each};
    if (i < ntell && s->cfg.opt.on_event)
      s->cfg.opt.on_event(s->cfg.opt.ud, &e);
    ob_unref(data);
    ob_unref(value);
    free(ev[i].reason);
    free(ev[i].data);
    free(ev[i].value);
  }
  free(ev);
}

/* Tells the events the parts noted since the last time (tell) or drops them.
 * Returns 1 when every part had ended by then: all they will ever note is told. */
static int drain(ob_shards *s, int tell) {
  part_event_note *ev[s->n];
  size_t nev[s->n];
  int closing[s->n], any_closing = 0;
  uv_mutex_lock(&s->lock);
  for (size_t k = 0; k < s->n; k++) {
    shard *sh = &s->parts[k];
    any_closing |= closing[k] = sh->closing && !sh->may_free;
    ev[k] = sh->events;
    nev[k] = sh->nevents;
    sh->events = NULL;
    sh->nevents = sh->capevents = 0;
  }
  int all_ended = s->ended == s->n;
  uv_mutex_unlock(&s->lock);
  for (size_t k = 0; k < s->n; k++)
    tell_events(s, ev[k], tell ? nev[k] : 0, nev[k]);
  if (any_closing) { /* what they noted is told: their calls may go */
    uv_mutex_lock(&s->lock);
    for (size_t k = 0; k < s->n; k++)
      s->parts[k].may_free |= closing[k];
    uv_cond_broadcast(&s->told);
    uv_mutex_unlock(&s->lock);
  }
  return all_ended;
}

static void on_note(uv_async_t *h) {
  ob_shards *s = h->data;
  if (drain(s, 1) && !s->finished) {
    s->finished = 1;
    uv_unref((uv_handle_t *)h); /* it kept the host's loop alive while threads ran */
    if (s->cfg.opt.on_event) {
      ob_event done = {.type = OB_EV_RUN_DONE, .t_ms = (double)(uv_hrtime() - s->t0) / 1e6};
      s->cfg.opt.on_event(s->cfg.opt.ud, &done);
    }
    if (s->cfg.opt.on_done) /* may free the shards: nothing after it */
      s->cfg.opt.on_done(NULL, s->cfg.opt.ud);
    else if (s->waiting)
      uv_stop(s->cfg.e->loop);
  }
}

/* --- what a part's thread does ------------------------------------------------ */

/* A flush of the part's journal: its lines go into the host's, on disk (or in
 * the page cache, where a SIGKILL cannot take them back) before the part goes on. */
static void journal_tee(void *ud, const char *bytes, size_t len) {
  shard *sh = ud;
  ob_shards *s = sh->all;
  uv_mutex_lock(&s->lock);
  journal_add(s->cfg.opt.journal, bytes, len);
  if (ob_wal_flush(s->cfg.opt.journal) != OB_OK) {
    /* the host's journal failed (for good): every part stops, and this part's own
     * wal fails with it, so that the tool about to start does not (ob_record_flush) */
    ob_wal_fail(sh->wal, ob_wal_error(s->cfg.opt.journal));
    s->cancelled = 1;
    for (size_t k = 0; k < s->n; k++)
      if (s->parts[k].wake_open && &s->parts[k] != sh)
        uv_async_send(&s->parts[k].wake);
  }
  uv_mutex_unlock(&s->lock);
}

static void part_event(void *ud, const ob_event *ev);

/* A note of a part's engine (ob_engine_note, on the part's thread): told on the host's
 * loop as a note of the run (OB_EV_NOTE, no call), like the part's events. */
static void part_note(void *ud, const char *kind, const char *call_id, const char *msg) {
  shard *sh = ud;
  (void)call_id;
  ob_event ev = {.type = OB_EV_NOTE, .reason = msg,
                 .t_ms = (double)(uv_hrtime() - sh->all->t0) / 1e6, .note = kind};
  part_event(sh, &ev);
}

static void part_event(void *ud, const ob_event *ev) {
  shard *sh = ud;
  ob_shards *s = sh->all;
  uv_mutex_lock(&s->lock);
  if (sh->closing) { /* its engine is being freed: not an event of the run */
    uv_mutex_unlock(&s->lock);
    return;
  }
  if (!ev->each) /* a copy of an _each call is not a call of the part's plan */
    sh->counts[ev->type]++;
  if (s->cfg.opt.on_event && ev->type != OB_EV_RUN_DONE) { /* told on the host's loop; the
                                                                run's run_done is one, last */
    if (sh->nevents == sh->capevents) {
      sh->capevents = sh->capevents ? 2 * sh->capevents : 64;
      sh->events = ob_xrealloc(sh->events, sh->capevents * sizeof *sh->events);
    }
    part_event_note *n = &sh->events[sh->nevents++];
    n->type = ev->type;
    n->call = ev->call;
    n->reason = ev->reason ? ob_xstrdup(ev->reason) : NULL;
    n->t_ms = ev->t_ms;
    n->note = ev->note;
    n->phase = ev->phase;
    n->detached = ev->detached;
    n->attempt = ev->attempt;
    n->each = ev->each;
    n->data = ev->data ? ob_json_print(ev->data, OB_JSON_COMPACT, NULL) : NULL;
    n->value = ev->value && ob_json_size(ev->value, OB_EVENT_VALUE_MAX) <= OB_EVENT_VALUE_MAX
                   ? ob_json_print(ev->value, OB_JSON_COMPACT, NULL)
                   : NULL;
    n->handled = ev->handled;
  }
  uv_mutex_unlock(&s->lock);
  if (s->cfg.opt.on_event)
    uv_async_send(s->note);
  ob_drain_event(&sh->drain, ev); /* the last fire-and-forget call may have ended */
}

static void part_done(ob_run *run, void *ud) {
  shard *sh = ud;
  (void)run;
  ob_drain_done(&sh->drain);
}

static int part_cancelled(shard *sh) {
  uv_mutex_lock(&sh->all->lock);
  int c = sh->all->cancelled;
  uv_mutex_unlock(&sh->all->lock);
  return c;
}

static int part_stop(void *ud) { return part_cancelled(ud); }

static void part_wake(uv_async_t *h) {
  shard *sh = h->data;
  if (part_cancelled(sh) && sh->run)
    ob_run_cancel(sh->run);
  uv_stop(sh->e->loop);
}

static void part_fail(shard *sh, const char *what, const char *why) {
  size_t n = strlen(what) + strlen(why) + 64;
  sh->error = ob_xmalloc(n);
  snprintf(sh->error, n, "thread %zu: %s: %s", sh->k + 1, what, why);
  sh->failed = 1;
}

/* Makes part sh ready to run, on its thread: 0, or -1 with sh->error. */
static int part_make(shard *sh) {
  ob_shards *s = sh->all;
  ob_error err;
  int rc = uv_loop_init(&sh->loop);
  if (rc) {
    part_fail(sh, "cannot make a loop", uv_strerror(rc));
    return -1;
  }
  sh->loop_open = 1;
  ob_engine *e = sh->e = ob_engine_new(&sh->loop, &err);
  if (!e) {
    part_fail(sh, "cannot make an engine", err.msg);
    return -1;
  }
  /* its engine's notes go to the host's loop as the run's notes (part_note) */
  ob_engine_set_note(e, part_note, sh);
  if (s->cfg.setup && s->cfg.setup(s->cfg.setup_ud, e, &err)) {
    part_fail(sh, "cannot load the tools again", err.msg);
    return -1;
  }
  /* the run's memory limit, shared out: an nth of it to each part's engine, so
   * that --max-memory bounds the run on threads as on one engine */
  size_t limit = e->mem.limit;
  if (limit && limit != SIZE_MAX && s->n > 1)
    ob_engine_set_max_memory(e, limit / s->n ? limit / s->n : 1);
  sh->pv = ob_json_parse(sh->plan_text, sh->plan_len, &err);
  if (!sh->pv) {
    part_fail(sh, "cannot read its part of the plan", err.msg);
    return -1;
  }
  ob_plan *p = sh->plan = ob_plan_from_value(sh->pv, s->cfg.plan->file);
  p->root = s->cfg.plan->root ? ob_xstrdup(s->cfg.plan->root) : NULL;
  if (!p->nerrors)
    ob_plan_check_tools(p, &e->tools, ob_engine_has_latent(e));
  if (p->nerrors) {
    part_fail(sh, "its part of the plan is not valid", p->errors[0]);
    return -1;
  }
  if (sh->inputs_text && !(sh->inputs = ob_json_parse(sh->inputs_text, sh->inputs_len, &err))) {
    part_fail(sh, "cannot read the input", err.msg);
    return -1;
  }
  if (s->cfg.opt.journal &&
      !(sh->wal = ob_wal_open(e->loop, "/dev/null", OB_WAL_CREATE, OB_FSYNC_NEVER, &err))) {
    part_fail(sh, "cannot open its journal", err.msg);
    return -1;
  }
  ob_run_options ro = s->cfg.opt;
  ro.journal = sh->wal;
  ro.concurrency = sh->concurrency;
  ro.max_calls = sh->max_calls;
  ro.calls_used = &sh->calls_used;
  ro.on_event = part_event;
  ro.on_done = part_done;
  ro.ud = sh;
  ro.approve = NULL;
  if (!(sh->run = ob_run_new(e, p, sh->pv, sh->inputs, &ro, &err))) {
    part_fail(sh, "cannot start", err.msg);
    return -1;
  }
  if (sh->wal) { /* its first lines are the host's journal's already */
    ob_wal_flush(sh->wal);
    ob_wal_set_tee(sh->wal, journal_tee, sh);
  }
  ob_drain_init(&sh->drain, e->loop, s->cfg.drain_ms);
  uv_mutex_lock(&s->lock);
  uv_async_init(e->loop, &sh->wake, part_wake);
  sh->wake.data = sh;
  uv_unref((uv_handle_t *)&sh->wake);
  sh->wake_open = sh->handles = 1;
  uv_mutex_unlock(&s->lock);
  return 0;
}

static void close_handle(uv_handle_t *h, void *arg) {
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

/* Frees what part_make made (once, on its thread), but for its loop: libuv closes a
 * loop's descriptors with a raw system call, which ThreadSanitizer cannot see, so
 * a loop closed here while another thread takes the same numbers would look like
 * a race. The host closes it after the join (ob_shards_free). */
static void part_free(shard *sh) {
  ob_error err;
  if (sh->handles) {
    uv_close((uv_handle_t *)&sh->wake, NULL);
    ob_drain_close(&sh->drain);
  }
  if (sh->wal) {
    ob_run_detach_journal(sh->e, sh->wal);
    ob_wal_close(sh->wal, &err); /* its last bytes, if any, through the tee */
  }
  ob_engine_free(sh->e); /* its runs first */
  if (sh->loop_open) { /* what its tools left, and the engine's own last handles */
    uv_walk(&sh->loop, close_handle, NULL);
    while (uv_run(&sh->loop, UV_RUN_DEFAULT)) /* the first returns at once after a uv_stop */
      ;
  }
  ob_plan_free(sh->plan);
  ob_unref(sh->pv);
  ob_unref(sh->inputs);
}

/* A part whose run is over frees its engine on its own thread, while the others
 * run (freeing thousands of calls' records takes milliseconds), once the host has
 * told the events it noted: they point into its plan. The host no longer wakes it
 * (wake_open), and events its engine has while it goes are not the run's. */
static void part_close(shard *sh) {
  ob_shards *s = sh->all;
  uv_mutex_lock(&s->lock);
  sh->wake_open = 0;
  sh->closing = 1;
  int wait = s->cfg.opt.on_event != NULL; /* the host may be telling some now */
  uv_mutex_unlock(&s->lock);
  if (wait) {
    uv_async_send(s->note);
    uv_mutex_lock(&s->lock);
    while (!sh->may_free && !s->dropping)
      uv_cond_wait(&s->told, &s->lock);
    uv_mutex_unlock(&s->lock);
  }
  part_free(sh);
}

/* The part's thread: its engine, tools, plan and run made, run to the end on its
 * own loop, then freed (part_close). */
static void part_main(void *arg) {
  shard *sh = arg;
  ob_shards *s = sh->all;
  if (!part_make(sh) && !part_cancelled(sh)) {
    ob_drain_start(&sh->drain, sh->run);
    ob_run_start(sh->run);
    sh->abandoned = ob_drain_wait(&sh->drain, part_stop, sh); /* or cancelled */
  }
  if (sh->run) {
    if (sh->wal)
      ob_run_detach_journal(sh->e, sh->wal); /* its last lines go through the tee */
    sh->output = ob_run_output(sh->run);
    sh->failed |= ob_run_failed(sh->run);
  }
  part_close(sh);
  uv_mutex_lock(&s->lock);
  sh->ended = 1;
  s->ended++;
  uv_mutex_unlock(&s->lock);
  uv_async_send(s->note);
}


/* --- what a part's engine loads ------------------------------------------------ */

void ob_shard_loads_add(ob_shard_loads *l, char kind, const char *path) {
  size_t n = strlen(path);
  l->items = ob_xrealloc(l->items, (l->n + 1) * sizeof *l->items);
  char *item = l->items[l->n++] = ob_xmalloc(n + 2);
  item[0] = kind;
  memcpy(item + 1, path, n + 1);
}


void ob_shard_loads_clear(ob_shard_loads *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

/* The host's loads, copied with its engine's limits when the shards start. */
typedef struct loads_copy {
  ob_shard_loads l;
  size_t max_memory, http_max, http_max_bytes;
  int http_allow_private, lenient_schemas;
} loads_copy;

static loads_copy *loads_copy_of(const ob_shard_loads *l, const ob_engine *host) {
  loads_copy *c = ob_xcalloc(1, sizeof *c);
  for (size_t i = 0; i < l->n; i++)
    ob_shard_loads_add(&c->l, l->items[i][0], l->items[i] + 1);
  c->max_memory = host->lua_pool->max;
  c->http_max = host->http_max;
  c->http_max_bytes = host->http_max_bytes;
  c->http_allow_private = host->http_allow_private;
  c->lenient_schemas = host->lenient_schemas;
  return c;
}

/* The ob_shard_setup_fn of cfg.loads. */
static int loads_setup(void *ud, ob_engine *e, ob_error *err) {
  const loads_copy *c = ud;
  const ob_shard_loads *l = &c->l;
  ob_engine_set_max_memory(e, c->max_memory);
  e->http_max = c->http_max;
  e->http_max_bytes = c->http_max_bytes;
  e->http_allow_private = c->http_allow_private;
  e->lenient_schemas = c->lenient_schemas;
  for (size_t i = 0; i < l->n; i++) {
    const char *path = l->items[i] + 1;
    int rc = l->items[i][0] == 't' ? ob_engine_load_tools(e, path, err)
                                   : ob_engine_load_script(e, path, err);
    if (rc != OB_OK)
      return -1;
  }
  return 0;
}

/* --- the parts ---------------------------------------------------------------- */

/* The calls a part of n instances runs: a plan on threads names no _instance of its
 * own (ob_shard_threads), so each of its calls is one instance's copy, and each
 * instance has as many. */
static size_t part_calls(const ob_plan *p, size_t n) {
  return p->ncalls_all / p->ninstances * n;
}

ob_shards *ob_shards_start(const ob_shard_config *cfg, ob_error *err) {
  ob_plan *p = cfg->plan;
  size_t n = ob_shard_threads(p, cfg->threads, &cfg->opt);
  ob_shards *s = ob_xcalloc(1, sizeof *s);
  s->cfg = *cfg;
  s->n = n;
  s->t0 = uv_hrtime();
  ob_run_options head = cfg->opt;
  head.on_event = NULL;
  head.on_done = NULL;
  if (!(s->head = ob_run_new(cfg->e, p, cfg->plan_value, cfg->inputs, &head, err))) {
    free(s);
    return NULL;
  }
  if (cfg->opt.journal)
    ob_wal_flush(cfg->opt.journal);
  if (cfg->loads) {
    s->loads = loads_copy_of(cfg->loads, cfg->e);
    s->cfg.setup = loads_setup;
    s->cfg.setup_ud = s->loads;
  }
  uv_mutex_init(&s->lock);
  uv_cond_init(&s->told);
  s->note = ob_xmalloc(sizeof *s->note);
  uv_async_init(cfg->e->loop, s->note, on_note);
  s->note->data = s;
  s->parts = ob_xcalloc(n, sizeof *s->parts);
  size_t inputs_len = 0;
  char *inputs_text = cfg->inputs ? ob_json_print(cfg->inputs, OB_JSON_COMPACT, &inputs_len) : NULL;
  for (size_t k = 0; k < n; k++) {
    shard *sh = &s->parts[k];
    size_t from = p->ninstances * k / n, to = p->ninstances * (k + 1) / n;
    sh->all = s;
    sh->k = k;
    sh->plan_text = ob_plan_part_text(cfg->plan_value, p, from, to, &sh->plan_len, NULL);
    if (inputs_text) { /* parsed on its thread: a value of its own */
      sh->inputs_text = ob_xstrndup(inputs_text, inputs_len);
      sh->inputs_len = inputs_len;
    }
    if (cfg->opt.concurrency)
      sh->concurrency = cfg->opt.concurrency * (k + 1) / n - cfg->opt.concurrency * k / n;
    if (cfg->opt.max_calls) { /* the limit less the other parts' plan calls */
      size_t others = p->ncalls_all - part_calls(p, to - from);
      sh->max_calls = cfg->opt.max_calls > others ? cfg->opt.max_calls - others : 1;
    }
  }
  free(inputs_text);
  for (size_t k = 0; k < n; k++)
    if (uv_thread_create(&s->parts[k].thread, part_main, &s->parts[k])) {
      ob_die("obelus: cannot start a thread");
    }
  return s;
}

int ob_shards_finished(const ob_shards *s) { return s->finished; }

void ob_shards_counts(ob_shards *s, size_t n[6]) {
  size_t ev[6] = {0};
  uv_mutex_lock(&s->lock);
  for (size_t k = 0; k < s->n; k++)
    for (int t = 0; t < 6; t++)
      ev[t] += s->parts[k].counts[t];
  uv_mutex_unlock(&s->lock);
  memset(n, 0, 6 * sizeof *n);
  n[OB_CALL_DONE] = ev[OB_EV_DONE];
  n[OB_CALL_FAILED] = ev[OB_EV_FAILED];
  n[OB_CALL_SKIPPED] = ev[OB_EV_SKIPPED];
  size_t ended = ev[OB_EV_DONE] + ev[OB_EV_FAILED];
  n[OB_CALL_RUNNING] = ev[OB_EV_STARTED] > ended ? ev[OB_EV_STARTED] - ended : 0;
  size_t all = s->cfg.plan->ncalls_all, gone = ended + n[OB_CALL_SKIPPED] + n[OB_CALL_RUNNING];
  n[OB_CALL_WAITING] = all > gone ? all - gone : 0;
}

void ob_shards_cancel(ob_shards *s) {
  uv_mutex_lock(&s->lock);
  s->cancelled = 1;
  for (size_t k = 0; k < s->n; k++)
    if (s->parts[k].wake_open)
      uv_async_send(&s->parts[k].wake);
  uv_mutex_unlock(&s->lock);
}

static void join(ob_shards *s) {
  if (s->joined)
    return;
  for (size_t k = 0; k < s->n; k++)
    uv_thread_join(&s->parts[k].thread);
  s->joined = 1;
}

void ob_shards_wait(ob_shards *s) {
  s->waiting = 1;
  while (!s->finished)
    uv_run(s->cfg.e->loop, UV_RUN_DEFAULT);
  s->waiting = 0;
  join(s);
}

int ob_shards_failed(const ob_shards *s) {
  for (size_t k = 0; k < s->n; k++)
    if (s->parts[k].failed)
      return 1;
  return 0;
}

const char *ob_shards_error(const ob_shards *s) {
  for (size_t k = 0; k < s->n; k++)
    if (s->parts[k].error)
      return s->parts[k].error;
  return NULL;
}

size_t ob_shards_abandoned(const ob_shards *s) {
  size_t n = 0;
  for (size_t k = 0; k < s->n; k++)
    n += s->parts[k].abandoned;
  return n;
}

ob_value *ob_shards_output(ob_shards *s) {
  join(s);
  ob_value *o = ob_object();
  for (size_t k = 0; k < s->n; k++) {
    const ob_value *part = s->parts[k].output;
    size_t from = s->cfg.plan->ninstances * k / s->n, to = s->cfg.plan->ninstances * (k + 1) / s->n;
    for (size_t i = from; i < to; i++) {
      const char *inst = s->cfg.plan->instances[i];
      const ob_value *v = part ? ob_object_get(part, inst, strlen(inst)) : NULL;
      o = ob_object_set(o, inst, strlen(inst), ob_ref((ob_value *)(v ? v : ob_null())));
    }
  }
  return o;
}

void ob_shards_journal_end(ob_shards *s, int exit_status) {
  ob_run_journal_end(s->head, exit_status);
}

static void free_handle(uv_handle_t *h) { free(h); }

void ob_shards_free(ob_shards *s) {
  if (!s)
    return;
  uv_mutex_lock(&s->lock); /* parts still closing need not wait to be told */
  s->dropping = 1;
  uv_cond_broadcast(&s->told);
  uv_mutex_unlock(&s->lock);
  join(s);     /* without the host's loop: it may be running (this is one of its callbacks) */
  drain(s, 0); /* events no longer told */
  uv_close((uv_handle_t *)s->note, free_handle);
  for (size_t k = 0; k < s->n; k++) {
    shard *sh = &s->parts[k];
    if (sh->loop_open)
      uv_loop_close(&sh->loop);
    free(sh->plan_text);
    free(sh->inputs_text);
    ob_unref(sh->output);
    free(sh->error);
  }
  free(s->parts);
  uv_cond_destroy(&s->told);
  uv_mutex_destroy(&s->lock);
  ob_run_free(s->head);
  if (s->loads) {
    ob_shard_loads_clear(&s->loads->l);
    free(s->loads);
  }
  free(s);
}
