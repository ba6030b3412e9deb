/* ob_run.c -- the scheduler: one execution of a plan (SPEC 5, 7).
 *
 * Design
 * ------
 * Each call keeps a count of the calls it depends on that have not settled.
 * When that count reaches zero the call is queued; the pump starts queued
 * calls (up to --concurrency) the moment they are queued, so a fast branch's
 * follower starts while a slow sibling still runs: there are no rounds.
 *
 * Starting a call resolves its params against the log as it is then, and
 * decides: skip (an upstream call failed, or a branch not taken), fail (a
 * structural error), or run. Running means a Lua coroutine on the engine's
 * state: it runs until it finishes or yields through obelus.sleep/await;
 * the timer or callback that ends the wait resumes it. A call that finishes
 * has its result written (its output messages appended) and settles, which
 * queues the calls waiting for it.
 *
 * The pump is the only place calls start, and it never nests: a call that
 * settles while the pump runs only queues its followers. So a chain of
 * 100,000 calls that finish synchronously runs in constant C stack.
 *
 * Costs per call: O(deps + users) bookkeeping, one coroutine, the params'
 * conversion to Lua and the result's back, and one path copy per write.
 */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ob_lua.h"
#include "ob_mem.h"
#include "ob_run.h"
#include "ob_watch.h"

const char ob_run_yield_token = 0;

typedef struct crun {
  ob_run *run;
  ob_call *call;
  ob_call_state state;
  int upstream_failed; /* skipped because something upstream failed */
  int detached;        /* fire-and-forget: not awaited */
  size_t pending;      /* dependencies not settled yet */
  lua_State *co;       /* while running */
  int co_slot;         /* its slot in the engine's anchor table (or LUA_NOREF) */
  int asleep;          /* in the engine's sleep heap (obelus.sleep) */
  uint64_t slice_start; /* when the slice hook first fired in this resume */
  uint32_t resumes, slice_resume; /* resumes so far; the one slice_start belongs to */
  ob_run *sub;         /* a delegated plan's run (kept until this run is freed) */
  ob_plan *subplan;
  ob_value *subvalue;
  ob_value *sublog;    /* its messages, attached to this call's output or error */
  const ob_tool *tool; /* what runs: the call's tool, or the approver's replacement's */
  ob_value *raw;       /* the approver's replacement call, or NULL (the call as written) */
} crun;

static const ob_value *call_raw(const crun *c) { return c->raw ? c->raw : c->call->raw; }

struct ob_run {
  ob_engine *e;
  ob_plan *plan;
  ob_log *log;
  ob_run_options opt;
  crun *calls;
  size_t nawaited, settled_awaited, running, detached_running;
  size_t *queue, qhead, qtail; /* each call is queued at most once */
  int pumping, finished, failed, cancelled;
  size_t journaled;
  uint64_t t0;
  ob_map schemas; /* schema value (by address) -> compiled */
  crun *parent;   /* the call that delegated to this run, or NULL */
  ob_run *next, **prevp;
  uint64_t serial; /* the engine's count of runs when this one was made */
};

static void pump(ob_run *r);
static void prefetch_users(const ob_run *r, const ob_call *call, int stage);
typedef struct out_write out_write; /* one write of a call's result (see "writing results") */

const char *ob_call_state_name(ob_call_state s) {
  static const char *const names[] = {"waiting", "ready", "running", "done", "failed", "skipped"};
  return names[s];
}

const char *ob_event_name(ob_event_type type) {
  static const char *const names[] = {"ready", "started", "done", "skipped", "failed", "run_done"};
  return (unsigned)type < sizeof names / sizeof *names ? names[type] : "unknown";
}

static double now_ms(const ob_run *r) { return (double)(uv_hrtime() - r->t0) / 1e6; }

static void emit(ob_run *r, ob_event_type type, const ob_call *c, const char *reason) {
  if (!r->opt.on_event)
    return;
  ob_event ev = {type, c, reason, now_ms(r)};
  r->opt.on_event(r->opt.ud, &ev);
}

/* Writes the messages appended since the last time to the journal. */
static void sync_journal(ob_run *r) {
  if (!r->opt.journal) {
    r->journaled = ob_log_len(r->log);
    return;
  }
  for (; r->journaled < ob_log_len(r->log); r->journaled++) {
    ob_value *m = ob_log_message(r->log, r->journaled);
    size_t len;
    char *text = ob_json_print(m, OB_JSON_COMPACT, &len);
    fwrite(text, 1, len, r->opt.journal);
    fputc('\n', r->opt.journal);
    free(text);
    ob_unref(m);
  }
  fflush(r->opt.journal);
}

static long append(ob_run *r, ob_value *msg, ob_error *err) {
  long rc = ob_log_append(r->log, msg, err);
  sync_journal(r);
  return rc;
}

/* --- settling ---------------------------------------------------------------- */

static void enqueue(ob_run *r, crun *c) {
  c->state = OB_CALL_READY;
  r->queue[r->qtail++] = (size_t)(c - r->calls);
  emit(r, OB_EV_READY, c->call, NULL);
}

/* Lua's generational collector (the engine's default: calls make short-lived
 * tables) visits every live coroutine at every minor collection; with
 * thousands of calls waiting at once that is most of its work. Past
 * GC_MANY_CALLS live calls the collector turns incremental, and back to
 * generational when a run is freed with none left (the switch back costs a
 * full collection: not in the middle of a run). Measured on sleep 10000 100:
 * the start cascade ~10% shorter. Its pause is then GC_MANY_PAUSE (Lua's
 * default: 200): while thousands of calls wait, most of the heap is live and
 * grows, and each cycle walks all of it again; a cycle at every tripling
 * rather than every doubling. Measured on sleep 10000 100 (perf stat, 5
 * interleaved runs): 17% fewer cycles, the same peak RSS (a waiting call's
 * memory is live, not garbage); sleep 100000 200: 1,022 to 736 ms. The cost:
 * garbage made while that many calls wait may reach 3x the live heap, not 2x. */
#define GC_MANY_CALLS 1000
#define GC_MANY_PAUSE 300

static void calls_up(ob_engine *e) {
  if (++e->live_calls > GC_MANY_CALLS && !e->gc_incremental) {
    lua_gc(e->L, LUA_GCINC, GC_MANY_PAUSE, 0, 0);
    e->gc_incremental = 1;
  }
}

/* Anchors the coroutine on top of L's stack (popped) in a slot of the engine's table. */
static int anchor_coroutine(ob_engine *e, lua_State *L) {
  int slot = e->nfree ? e->free_slots[--e->nfree] : ++e->nslots;
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->anchor_ref);
  lua_rotate(L, -2, 1);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 1);
  return slot;
}

/* The coroutine in slot. */
static lua_State *anchored(ob_engine *e, int slot) {
  lua_State *L = e->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->anchor_ref);
  lua_rawgeti(L, -1, slot);
  lua_State *co = lua_tothread(L, -1);
  lua_pop(L, 2);
  return co;
}

/* Lets the collector have the coroutine in slot; the slot serves again. */
static void release_slot(ob_engine *e, int slot) {
  lua_State *L = e->L;
  if (e->nfree == e->capfree) {
    size_t cap = e->capfree ? 2 * e->capfree : 256;
    int *f = realloc(e->free_slots, cap * sizeof *f);
    if (!f)
      abort();
    e->free_slots = f;
    e->capfree = cap;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, e->anchor_ref);
  lua_pushnil(L);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 1);
  e->free_slots[e->nfree++] = slot;
}

static void drop_coroutine(crun *c) {
  if (!c->co)
    return;
  ob_engine *e = c->run->e;
  e->live_calls--;
  *(crun **)lua_getextraspace(c->co) = NULL; /* late wake-ups find nobody */
  /* a coroutine that returned has no wait pending anywhere: it can serve again */
  if (lua_status(c->co) == LUA_OK && e->npool < OB_ENGINE_POOL) {
    lua_settop(c->co, 0);
    e->pool[e->npool++] = c->co_slot;
  } else {
    release_slot(e, c->co_slot);
  }
  c->co = NULL;
}

static void settle(crun *c, ob_call_state st, const char *reason) {
  ob_run *r = c->run;
  if (c->state == OB_CALL_RUNNING) {
    r->running--;
    if (c->detached)
      r->detached_running--;
  }
  c->state = st;
  drop_coroutine(c);
  emit(r, st == OB_CALL_DONE ? OB_EV_DONE : st == OB_CALL_SKIPPED ? OB_EV_SKIPPED : OB_EV_FAILED,
       c->call, reason);
  if (!c->detached)
    r->settled_awaited++;
  for (size_t u = 0; u < c->call->nusers; u++) {
    crun *user = &r->calls[c->call->users[u]];
    if (--user->pending == 0 && !r->cancelled)
      enqueue(r, user);
  }
  if (!r->finished && r->settled_awaited == r->nawaited) {
    r->finished = 1;
    emit(r, OB_EV_RUN_DONE, NULL, NULL);
    if (r->opt.on_done)
      r->opt.on_done(r, r->opt.ud);
  }
  pump(r);
}

/* Appends the error message of a call and settles it as failed. */
static void fail(crun *c, const char *phase, const char *msg) {
  ob_run *r = c->run;
  ob_value *data = ob_object();
  data = ob_object_set(data, "call", 4, ob_ref((ob_value *)call_raw(c)));
  data = ob_object_set(data, "id", 2, ob_cstring(c->call->id));
  data = ob_object_set(data, "error", 5, ob_cstring(msg));
  data = ob_object_set(data, "phase", 5, ob_cstring(phase));
  if (c->detached)
    data = ob_object_set(data, "detached", 8, ob_true());
  ob_value *m = ob_object();
  m = ob_object_set(m, "type", 4, ob_cstring("data"));
  m = ob_object_set(m, "kind", 4, ob_cstring("error"));
  if (c->call->instance)
    m = ob_object_set(m, "_instance", 9, ob_cstring(c->call->instance));
  m = ob_object_set(m, "data", 4, data);
  if (c->sublog)
    m = ob_object_set(m, "_log", 4, ob_ref(c->sublog));
  ob_error err;
  if (append(r, m, &err) < 0)
    fprintf(stderr, "obelus: could not record an error: %s\n", err.msg);
  ob_unref(m);
  if (!r->opt.depth) /* a delegated plan's failures reach stderr through its caller's */
    fprintf(stderr, "obelus: call %s (%s) failed%s (%s): %s\n", c->call->id, c->call->tool_name,
            c->detached ? " [fire-and-forget]" : "", phase, msg);
  if (!c->detached)
    r->failed = 1;
  settle(c, OB_CALL_FAILED, msg);
}

/* --- resolving params ---------------------------------------------------------- */

typedef struct resolver {
  ob_run *run;
  const ob_call *call; /* whose refs are resolved: the call, or an approver's replacement */
  size_t next;   /* the next of call->refs, in walk order (as ob_plan found them) */
  int skip;      /* an absent part has a writer: a branch not taken */
  int missing;   /* an absent part nobody writes: a structural error */
  ob_buf why;
} resolver;

static void absent(resolver *rs, const ob_param_ref *ref) {
  ob_run *r = rs->run;
  size_t part = 0;
  for (size_t a = 0; a < ref->expr.n; a++)
    for (size_t k = 0; k < ref->expr.alts[a].n; k++, part++) {
      const ob_reference *x = &ref->expr.alts[a].refs[k];
      ob_value *v = ob_log_read(r->log, x->kind, rs->call->instance, &x->path, OB_LOG_NOW);
      if (v) {
        ob_unref(v);
        continue;
      }
      if (ref->seen[part] && !rs->skip) {
        rs->skip = 1;
        rs->why.len = 0;
        ob_buf_addf(&rs->why, "%s was not written (a branch not taken)", x->text);
      } else if (!ref->seen[part] && !rs->skip && !rs->missing) {
        rs->missing = 1;
        ob_buf_addf(&rs->why, "parameter \"%s\": %s is absent and no call in the plan writes it",
                    ref->where, x->text);
      }
    }
}

/* A copy of v with every reference expression replaced by what `eval` makes
 * of it and every "††" literal unescaped; the rest is shared, not copied.
 * Params and the output template both go through here. */
typedef ob_value *(*eval_fn)(void *ud, const ob_value *expr_text);

static ob_value *substitute(const ob_value *v, eval_fn eval, void *ud) {
  switch (ob_typeof(v)) {
  case OB_STRING: {
    const char *s = ob_string_ptr(v);
    size_t n = ob_string_len(v);
    int cls = ob_str_classify(s, n);
    if (cls == OB_STR_LITERAL)
      return ob_string(s + OB_DAGGER_LEN, n - OB_DAGGER_LEN);
    return cls == OB_STR_EXPR ? eval(ud, v) : ob_ref((ob_value *)v);
  }
  case OB_ARRAY: {
    ob_value *a = ob_array();
    for (size_t i = 0; i < ob_array_len(v); i++)
      a = ob_array_push(a, substitute(ob_array_get(v, i), eval, ud));
    return a;
  }
  case OB_OBJECT: {
    ob_value *o = ob_object(), *k, *x;
    ob_object_iter it;
    ob_object_iter_init(&it, v);
    while (ob_object_iter_next(&it, &k, &x))
      o = ob_object_setv(o, k, substitute(x, eval, ud));
    return o;
  }
  default: return ob_ref((ob_value *)v);
  }
}

/* A param's reference: the call's refs were found in this same walk order. */
/* A reference's value now (an absent one: null, and noted as a skip or a structural error). */
static ob_value *eval_ref(resolver *rs, const ob_param_ref *ref) {
  ob_value *x = ob_log_eval(rs->run->log, &ref->expr, rs->call->instance, OB_LOG_NOW);
  if (!x) {
    absent(rs, ref);
    return ob_null();
  }
  return x;
}

static ob_value *eval_param(void *ud, const ob_value *text) {
  resolver *rs = ud;
  (void)text;
  return eval_ref(rs, &rs->call->refs[rs->next++]);
}

static ob_value *resolve(resolver *rs, const ob_value *v) { return substitute(v, eval_param, rs); }

/* The call with its references resolved; meta-properties kept as written. */
static ob_value *resolve_params(resolver *rs) {
  const ob_value *raw = rs->call->raw;
  if (!rs->call->nrefs && !rs->call->nliterals)
    return ob_ref((ob_value *)raw); /* nothing to resolve: the call as written */
  ob_value *o = ob_object(), *k, *x;
  ob_object_iter it;
  ob_object_iter_init(&it, raw);
  while (ob_object_iter_next(&it, &k, &x))
    o = ob_object_setv(o, k, ob_string_ptr(k)[0] == '_' ? ob_ref(x) : resolve(rs, x));
  return o;
}

/* The schema view of resolved params fails? Describes the first failures. */
static int params_invalid(const ob_tool *t, const ob_value *params, ob_buf *why) {
  if (!t || !t->schema)
    return 0;
  ob_value *props = ob_typeof(t->schema_value) == OB_OBJECT
                        ? ob_object_get(t->schema_value, "properties", 10)
                        : NULL;
  ob_value *view = ob_object(), *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, params);
  while (ob_object_iter_next(&it, &k, &v))
    if (ob_string_ptr(k)[0] != '_' ||
        (props && ob_typeof(props) == OB_OBJECT &&
         ob_object_get(props, ob_string_ptr(k), ob_string_len(k))))
      view = ob_object_setv(view, k, ob_ref(v));
  ob_schema_result res = {0};
  int ok = ob_schema_validate(t->schema, view, &res);
  for (size_t i = 0; i < res.n && i < 3; i++)
    ob_buf_addf(why, "%s%s: %s: %s", i ? "; " : "params do not satisfy the tool's schema: ",
                res.fail[i].instance_path[0] ? res.fail[i].instance_path : "(params)",
                res.fail[i].keyword, res.fail[i].message);
  ob_schema_result_free(&res);
  ob_unref(view);
  return !ok;
}

/* --- running a call's coroutine ----------------------------------------------- */

static void complete(crun *c, int nres);
static void tool_error(crun *c, const char *msg, const char *traceback);

/* A tool that runs on without yielding would stop the whole loop. With the
 * engine's watch (ob_watch.h), this hook is set on the call's coroutine only
 * once the watchdog saw it run past the run's limit: it stops the tool at
 * once. Without one, it is a count hook on every coroutine: every million
 * Lua instructions it checks how long the call has run since it was
 * resumed, and past the limit raises the error. */
static unsigned slice_limit(const ob_run *r) {
  return r->opt.max_slice_ms ? r->opt.max_slice_ms : OB_RUN_MAX_SLICE_MS;
}

void ob_run_slice_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  crun *c = *(crun **)lua_getextraspace(L);
  if (!c)
    return;
  unsigned limit = slice_limit(c->run);
  if (c->run->e->watch) {
    lua_sethook(L, NULL, 0, 0);
  } else if (c->slice_resume != c->resumes) { /* the first million of this resume: start */
    c->slice_resume = c->resumes;
    c->slice_start = uv_hrtime();
    return;
  } else if ((uv_hrtime() - c->slice_start) / 1000000u <= limit) {
    return;
  }
  luaL_error(L, "the tool ran %d ms without yielding (an endless loop?); obelus stopped it",
             (int)limit);
}

static void resume(crun *c, lua_State *from, int nargs) {
  lua_State *co = c->co;
  int nres = 0;
  c->resumes++; /* the clock starts when the hook first fires: no clock read per resume */
  ob_watch *w = c->run->e->watch;
  lua_State *outer = w ? ob_watch_enter(w, co, slice_limit(c->run)) : NULL;
  int st = lua_resume(co, from, nargs, &nres);
  if (w)
    ob_watch_leave(w, co, outer);
  if (c->state != OB_CALL_RUNNING || c->co != co)
    return; /* cancelled meanwhile */
  if (st == LUA_YIELD) {
    int ours = nres >= 1 && lua_touserdata(co, -nres) == &ob_run_yield_token;
    lua_pop(co, nres);
    if (!ours)
      tool_error(c, "the tool yielded its coroutine itself: wait with obelus.sleep, "
                    "obelus.await or obelus.uv callbacks wrapped in obelus.await", NULL);
    return;
  }
  if (st == LUA_OK) {
    complete(c, nres);
    return;
  }
  /* the message: a string as it is, a table as its JSON text */
  ob_buf msg;
  ob_buf_init(&msg);
  if (lua_type(co, -1) == LUA_TSTRING) {
    ob_buf_add(&msg, lua_tostring(co, -1), lua_rawlen(co, -1));
  } else {
    ob_error err;
    ob_value *v = lua_istable(co, -1) ? ob_lua_to_value_named(co, -1, "error", &err) : NULL;
    char *text = v ? ob_json_print(v, OB_JSON_COMPACT, NULL) : NULL;
    if (text)
      ob_buf_add(&msg, text, strlen(text));
    else
      ob_buf_addf(&msg, "(error object is a %s value)", luaL_typename(co, -1));
    free(text);
    ob_unref(v);
  }
  lua_State *L = c->run->e->L;
  luaL_traceback(L, co, msg.data, 0);
  tool_error(c, msg.data, lua_tostring(L, -1));
  lua_pop(L, 1);
  ob_buf_free(&msg);
}

/* --- approval: a human (or a rule) in the loop ----------------------------------------- */

enum { REFUSE = 0, ALLOW = 1, BROKEN = -1 };

/* Asks the Lua approver: fn(call, ctx) -> true/nil, false/"refuse", or a replacement. */
static int ask_lua(crun *c, const ob_value *params, ob_value **replacement, ob_buf *why) {
  lua_State *L = c->run->e->L;
  int top = lua_gettop(L);
  ob_error err;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->run->e->approver_ref);
  if (ob_lua_push_safe(L, params, &err) != OB_OK) {
    lua_settop(L, top);
    ob_buf_addf(why, "%s", err.msg);
    return BROKEN;
  }
  lua_createtable(L, 0, 3);
  lua_pushstring(L, c->call->id);
  lua_setfield(L, -2, "id");
  lua_pushstring(L, c->call->tool_name);
  lua_setfield(L, -2, "tool");
  if (c->call->instance) {
    lua_pushstring(L, c->call->instance);
    lua_setfield(L, -2, "instance");
  }
  int verdict = BROKEN;
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    ob_buf_addf(why, "the approver failed: %s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
  } else if (lua_isnil(L, -1) || (lua_isboolean(L, -1) && lua_toboolean(L, -1)) ||
             (lua_type(L, -1) == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "allow"))) {
    verdict = ALLOW;
  } else if ((lua_isboolean(L, -1)) ||
             (lua_type(L, -1) == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "refuse"))) {
    verdict = REFUSE;
  } else if (lua_istable(L, -1)) {
    if ((*replacement = ob_lua_to_value_named(L, -1, "replacement", &err)))
      verdict = ALLOW;
    else
      ob_buf_addf(why, "the approver's %s", err.msg);
  } else {
    ob_buf_addf(why, "the approver returned a %s (expected true, false or a call)",
                luaL_typename(L, -1));
  }
  lua_settop(L, top);
  return verdict;
}

/* --approve on a terminal: "run #3 sendEmail {...}? [y/n/e]" */
static int ask_tty(crun *c, const ob_value *params, ob_value **replacement, ob_buf *why) {
  FILE *tty = fopen("/dev/tty", "r+");
  if (!tty) {
    ob_buf_addf(why, "--approve needs a terminal to ask on");
    return BROKEN;
  }
  setvbuf(tty, NULL, _IONBF, 0); /* read one answer, leave the next ones on the terminal */
  ob_value *shown = ob_object(), *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, params);
  while (ob_object_iter_next(&it, &k, &v))
    if (ob_string_ptr(k)[0] != '_')
      shown = ob_object_setv(shown, k, ob_ref(v));
  char *text = ob_json_print(shown, OB_JSON_COMPACT, NULL);
  ob_unref(shown);
  int verdict = BROKEN;
  for (;;) {
    fprintf(tty, "run %s %s %s? [y/n/e] ", c->call->id, c->call->tool_name, text);
    fflush(tty);
    char line[64];
    if (!fgets(line, sizeof line, tty)) {
      verdict = REFUSE; /* the terminal closed: nobody said yes */
      break;
    }
    if (line[0] == 'y' || line[0] == 'Y') {
      verdict = ALLOW;
      break;
    }
    if (line[0] == 'n' || line[0] == 'N') {
      verdict = REFUSE;
      break;
    }
    if (line[0] != 'e' && line[0] != 'E')
      continue;
    /* edit the whole call (meta-properties too) in $EDITOR */
    char path[] = "/tmp/obelus-call-XXXXXX.json";
    int fd = mkstemps(path, 5);
    if (fd < 0)
      continue;
    char *doc = ob_json_print(params, OB_JSON_PRETTY, NULL);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "%s\n", doc);
    fclose(f);
    free(doc);
    ob_buf cmd;
    ob_buf_init(&cmd);
    const char *editor = getenv("EDITOR");
    ob_buf_addf(&cmd, "%s '%s' </dev/tty >/dev/tty", editor && *editor ? editor : "vi", path);
    int st = system(cmd.data);
    ob_buf_free(&cmd);
    ob_error err;
    ob_value *edited = st == 0 ? ob_json_parse_file(path, &err) : NULL;
    unlink(path);
    if (!edited) {
      fprintf(tty, "obelus: %s; try again\n", st == 0 ? err.msg : "the editor failed");
      continue;
    }
    *replacement = edited;
    verdict = ALLOW;
    break;
  }
  free(text);
  fclose(tty);
  return verdict;
}

/* The wiring of a call (where it sits in the graph) that a replacement keeps. */
static const char *const wiring[] = {"_outputPath", "_outputMethod", "_instance", "_id",
                                     "_delegate", "_scopes"};

/* Takes the approver's replacement: validated as a call of its own, with the
 * same wiring, its references resolved now. */
static int adopt(crun *c, ob_value *replacement, ob_value **params, ob_buf *why) {
  ob_run *r = c->run;
  if (ob_typeof(replacement) != OB_OBJECT) {
    ob_buf_addf(why, "the replacement is not a call (a JSON object)");
    return 0;
  }
  for (size_t i = 0; i < sizeof wiring / sizeof *wiring; i++) {
    ob_value *a = ob_object_get(c->call->raw, wiring[i], strlen(wiring[i]));
    ob_value *b = ob_object_get(replacement, wiring[i], strlen(wiring[i]));
    if ((a || b) && (!a || !b || !ob_equal(a, b))) {
      ob_buf_addf(why, "a replacement may change the tool and its params, not %s", wiring[i]);
      return 0;
    }
  }
  ob_value *one = ob_array_push(ob_array(), ob_ref(replacement));
  ob_plan *tmp = ob_plan_from_value(one, r->plan->file);
  ob_unref(one);
  ob_plan_check_tools(tmp, &r->e->tools, ob_engine_has_latent(r->e));
  int ok = 0;
  if (tmp->nerrors) {
    ob_buf_addf(why, "the replacement is invalid: %s", tmp->errors[0]);
  } else {
    resolver rs = {r, &tmp->calls[0], 0, 0, 0, {0}};
    ob_buf_init(&rs.why);
    ob_value *np = resolve_params(&rs);
    if (rs.skip || rs.missing || params_invalid(tmp->calls[0].tool, np, &rs.why)) {
      ob_buf_addf(why, "the replacement: %s", rs.why.data ? rs.why.data : "a reference is absent");
      ob_unref(np);
    } else {
      ob_unref(*params);
      *params = np;
      c->tool = tmp->calls[0].tool;
      ob_unref(c->raw);
      c->raw = ob_ref(replacement);
      ok = 1;
    }
    ob_buf_free(&rs.why);
  }
  ob_plan_free(tmp);
  return ok;
}

/* Asks whoever approves; settles the call itself when it may not run. */
static int approve(crun *c, ob_value **params) {
  ob_value *replacement = NULL;
  ob_buf why;
  ob_buf_init(&why);
  int verdict = c->run->e->approver_ref != LUA_NOREF ? ask_lua(c, *params, &replacement, &why)
                                                     : ask_tty(c, *params, &replacement, &why);
  int go = verdict == ALLOW && (!replacement || adopt(c, replacement, params, &why));
  ob_unref(replacement);
  if (!go) {
    ob_unref(*params);
    /* refused, or the approver broke: runtime; a replacement that is no valid call: structural */
    fail(c, verdict == ALLOW ? "structural" : "runtime", verdict == REFUSE ? "refused" : why.data);
  }
  ob_buf_free(&why);
  return go;
}

/* --- delegation: a call that runs a plan ---------------------------------------------- */

static void write_alt(crun *c, size_t alt, ob_value *value);

/* The delegated plan settled: its output is the call's result; its failure
 * the call's error. Its messages go with the call's output or error. */
static void delegate_done(ob_run *sub, void *ud) {
  crun *c = ud;
  ob_value *sublog = ob_array();
  for (size_t i = 0; i < ob_log_len(sub->log); i++)
    sublog = ob_array_push(sublog, ob_log_message(sub->log, i));
  c->sublog = sublog;
  ob_run_cancel(sub); /* its fire-and-forget calls end with it */
  if (sub->failed) {
    ob_buf why;
    ob_buf_init(&why);
    ob_buf_addf(&why, "the delegated plan %s failed", c->call->delegate);
    for (size_t i = 0; i < ob_log_len(sub->log); i++) {
      const ob_msg *m = ob_log_at(sub->log, i);
      if (m->type != OB_MSG_CONTEXT || strcmp(ob_string_ptr(m->kind), "error"))
        continue;
      ob_value *id = ob_object_get(m->value, "id", 2), *e = ob_object_get(m->value, "error", 5);
      if (ob_object_get(m->value, "detached", 8) || !id || !e || ob_typeof(e) != OB_STRING)
        continue;
      if (!strncmp(ob_string_ptr(e), "the delegated plan ", 19)) { /* the deepest cause only */
        why.len = 0;
        ob_buf_add(&why, ob_string_ptr(e), ob_string_len(e));
      } else {
        ob_buf_addf(&why, ": call %s: %s", ob_string_ptr(id), ob_string_ptr(e));
      }
      break;
    }
    tool_error(c, why.data, NULL);
    ob_buf_free(&why);
    return;
  }
  if (!c->call->has_output) {
    settle(c, OB_CALL_DONE, NULL);
    return;
  }
  ob_value *out = ob_run_output(sub);
  write_alt(c, 0, out);
  ob_unref(out);
}

static void start_delegate(crun *c, ob_value *params) {
  ob_run *r = c->run;
  ob_call *call = c->call;
  int max_depth = r->opt.max_depth > 0 ? r->opt.max_depth : 16;
  c->state = OB_CALL_RUNNING;
  r->running++;
  emit(r, OB_EV_STARTED, call, NULL);
  if (r->opt.depth + 1 > max_depth) {
    ob_unref(params);
    char why[160];
    snprintf(why, sizeof why, "delegation deeper than %d levels (see --max-depth)", max_depth);
    fail(c, "runtime", why);
    return;
  }
  ob_error err;
  c->subvalue = ob_json_parse_file(call->delegate, &err);
  if (c->subvalue)
    c->subplan = ob_plan_from_value(c->subvalue, call->delegate);
  if (c->subplan)
    ob_plan_check_tools(c->subplan, &r->e->tools, ob_engine_has_latent(r->e));
  if (!c->subplan || c->subplan->nerrors) {
    ob_unref(params);
    fail(c, "runtime", c->subplan ? c->subplan->errors[0] : err.msg);
    return;
  }
  /* the clean room: only the kinds named by _scopes, as this call sees them,
   * then the call's own params as an input document */
  ob_value *pre = ob_array(), *k, *v;
  ob_path root = {0, NULL};
  for (size_t i = 0; i < call->nscopes; i++) {
    ob_value *doc = ob_log_read(r->log, call->scopes[i], call->instance, &root, OB_LOG_NOW);
    if (!doc)
      continue;
    ob_value *m = ob_object();
    m = ob_object_set(m, "type", 4, ob_cstring("data"));
    m = ob_object_set(m, "kind", 4, ob_cstring(call->scopes[i]));
    m = ob_object_set(m, "data", 4, doc);
    pre = ob_array_push(pre, m);
  }
  ob_value *args = ob_object();
  ob_object_iter it;
  ob_object_iter_init(&it, params);
  while (ob_object_iter_next(&it, &k, &v))
    if (ob_string_ptr(k)[0] != '_')
      args = ob_object_setv(args, k, ob_ref(v));
  ob_unref(params);
  ob_value *inputs = ob_array();
  if (ob_object_len(args))
    inputs = ob_array_push(inputs, ob_ref(args));
  ob_unref(args);
  ob_run_options opt = {.concurrency = r->opt.concurrency,
                        .depth = r->opt.depth + 1,
                        .max_depth = max_depth,
                        .pre_context = pre,
                        .approve_tty = r->opt.approve_tty,
                        .max_slice_ms = r->opt.max_slice_ms,
                        .on_done = delegate_done,
                        .ud = c};
  c->sub = ob_run_new(r->e, c->subplan, c->subvalue, inputs, &opt, &err);
  ob_unref(pre);
  ob_unref(inputs);
  if (!c->sub) {
    fail(c, "runtime", err.msg);
    return;
  }
  c->sub->parent = c;
  ob_run_start(c->sub);
}

/* --- ctx: the second argument of a tool's run ---------------------------------------- */

/* A call's ctx is a small userdata read like a table: id, tool, index and
 * instance come from the call itself when asked for, and a tool may set
 * fields of its own (kept in the userdata's user value). Measured on chain
 * 100000: a table with those four fields, its id string interned, was a
 * sixth of the instructions of a call. It names its call by run and
 * position, and reads it only while that run exists (after ob_run_free:
 * index and the tool's own fields only). */
typedef struct call_ctx {
  ob_engine *e;
  const ob_run *run;
  uint64_t serial; /* the run's: another run at the same address is not it */
  size_t i;        /* the call's position in run->calls (an instance's copies included) */
  size_t index;    /* ctx.index: its position in the plan as written */
} call_ctx;

/* The call ctx names, or NULL when its run is gone. */
static const crun *ctx_call(const call_ctx *x) {
  for (const ob_run *r = x->e->runs; r; r = r->next)
    if (r == x->run && r->serial == x->serial)
      return &r->calls[x->i];
  return NULL;
}

/* Pushes ctx's own field k (id, tool, index, instance); 0 when k is none of them. */
static int ctx_field(lua_State *L, const call_ctx *x, const char *k) {
  if (!strcmp(k, "index")) {
    lua_pushinteger(L, (lua_Integer)x->index);
    return 1;
  }
  const crun *c = ctx_call(x);
  const char *v = NULL;
  if (!strcmp(k, "id"))
    v = c ? c->call->id : NULL;
  else if (!strcmp(k, "tool"))
    v = c ? c->tool->name : NULL;
  else if (!strcmp(k, "instance"))
    v = c ? c->call->instance : NULL;
  else
    return 0;
  if (v)
    lua_pushstring(L, v);
  else
    lua_pushnil(L);
  return 1;
}

static int ctx_index(lua_State *L) {
  const call_ctx *x = lua_touserdata(L, 1);
  if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE) { /* the tool's own fields come first */
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) != LUA_TNIL)
      return 1;
  }
  if (lua_type(L, 2) == LUA_TSTRING && ctx_field(L, x, lua_tostring(L, 2)))
    return 1;
  lua_pushnil(L);
  return 1;
}

static int ctx_newindex(lua_State *L) {
  if (lua_getiuservalue(L, 1, 1) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, 1, 1);
  }
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_rawset(L, -3);
  return 0;
}

static int ctx_next(lua_State *L) {
  lua_settop(L, 2);
  if (lua_next(L, 1))
    return 2;
  lua_pushnil(L);
  return 1;
}

/* pairs(ctx): a table of everything ctx shows, walked like next. */
static int ctx_pairs(lua_State *L) {
  const call_ctx *x = lua_touserdata(L, 1);
  static const char *const keys[] = {"id", "tool", "index", "instance"};
  lua_pushcfunction(L, ctx_next);
  lua_newtable(L);
  for (int k = 0; k < 4; k++) {
    ctx_field(L, x, keys[k]);
    lua_setfield(L, -2, keys[k]);
  }
  if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, -5);
    }
  }
  lua_pop(L, 1);
  lua_pushnil(L);
  return 3;
}

static int ctx_tostring(lua_State *L) {
  const call_ctx *x = lua_touserdata(L, 1);
  const crun *c = ctx_call(x);
  lua_pushfstring(L, "obelus.ctx: %s", c ? c->call->id : "(run freed)");
  return 1;
}

void ob_run_push_ctx_meta(lua_State *L) {
  static const luaL_Reg mt[] = {{"__index", ctx_index},       {"__newindex", ctx_newindex},
                                {"__pairs", ctx_pairs},       {"__tostring", ctx_tostring},
                                {NULL, NULL}};
  luaL_newlib(L, mt);
  lua_pushliteral(L, "obelus.ctx");
  lua_setfield(L, -2, "__name");
}

/* What a call's coroutine starts from: the params as an object (params),
 * or the call as written with its references' values (vals, direct). */
typedef struct call_args {
  crun *c;
  const ob_value *params;
  ob_value *const *vals;
  size_t nvals;
} call_args;

static int call_body_done(lua_State *co, int status, lua_KContext k) {
  (void)status;
  (void)k;
  return lua_gettop(co); /* whatever the tool returned */
}

/* The body of every call's coroutine: builds the tool's arguments inside the
 * coroutine (a Lua error while building them, such as running out of
 * memory, is then the call's runtime error, caught by its resume like any
 * other, with no protected call of its own), then calls the tool. */
int ob_run_call_body(lua_State *co) {
  const call_args *a = lua_touserdata(co, 1);
  crun *c = a->c;
  ob_engine *e = c->run->e;
  const ob_call *call = c->call;
  ob_tool *t = (ob_tool *)c->tool; /* its key list cache changes: nothing else */
  static const ob_lua_tables tables = {lua_upvalueindex(1), lua_upvalueindex(2),
                                       lua_upvalueindex(3)};
  lua_settop(co, 0);
  luaL_checkstack(co, 8, "obelus: Lua stack exhausted");
  lua_rawgeti(co, LUA_REGISTRYINDEX, t->latent ? e->latent_ref : t->run_ref);
  if (a->params)
    ob_lua_push_call(co, a->params, NULL, 0, 0, &t->keys, &tables);
  else
    ob_lua_push_call(co, call->raw, a->vals, a->nvals, 1, &t->keys, &tables);
  int nargs = 2;
  if (t->latent) { /* handler(call, tool, ctx) */
    lua_rawgeti(co, LUA_REGISTRYINDEX, t->table_ref);
    nargs = 3;
  }
  call_ctx *x = lua_newuserdatauv(co, sizeof *x, 1);
  *x = (call_ctx){e, c->run, c->run->serial, (size_t)(c - c->run->calls), call->index};
  lua_pushvalue(co, lua_upvalueindex(4));
  lua_setmetatable(co, -2);
  lua_callk(co, nargs, LUA_MULTRET, 0, call_body_done);
  return call_body_done(co, LUA_OK, 0);
}

/* Runs the call's tool: a C tool's function, or a coroutine for a Lua one. */
static void run_tool(crun *c, const call_args *args) {
  ob_run *r = c->run;
  lua_State *L = r->e->L;
  c->state = OB_CALL_RUNNING;
  r->running++;
  if (c->detached)
    r->detached_running++;
  emit(r, OB_EV_STARTED, c->call, NULL);
  if (c->tool->fn) { /* a tool written in C: it completes through its handle */
    c->tool->fn((ob_call_handle *)c, args->params, c->tool->fn_data);
    return;
  }
  lua_State *co;
  if (r->e->npool) {
    c->co_slot = r->e->pool[--r->e->npool];
    co = anchored(r->e, c->co_slot);
  } else {
    co = lua_newthread(L);
    c->co_slot = anchor_coroutine(r->e, L);
    if (!r->e->watch) /* the fallback (see ob_run_slice_hook): stays with the pooled thread */
      lua_sethook(co, ob_run_slice_hook, LUA_MASKCOUNT, 1000000);
  }
  c->co = co;
  calls_up(r->e);
  *(crun **)lua_getextraspace(co) = c;
  prefetch_users(r, c->call, 2);
  lua_rawgeti(co, LUA_REGISTRYINDEX, r->e->body_ref);
  lua_pushlightuserdata(co, (void *)args);
  resume(c, L, 1);
}

static void start(crun *c) {
  ob_run *r = c->run;
  ob_call *call = c->call;
  prefetch_users(r, call, 1);
  for (size_t d = 0; d < call->ndeps; d++) {
    crun *dep = &r->calls[call->deps[d]];
    if (dep->state == OB_CALL_FAILED || (dep->state == OB_CALL_SKIPPED && dep->upstream_failed)) {
      c->upstream_failed = 1;
      char why[256];
      snprintf(why, sizeof why, "upstream failed: call %s (%s)", dep->call->id,
               dep->call->tool_name);
      settle(c, OB_CALL_SKIPPED, why);
      return;
    }
  }
  resolver rs = {r, call, 0, 0, 0, {0}};
  ob_buf_init(&rs.why);
  /* Direct: a Lua tool that nothing but the tool itself looks at the params
   * of (no schema, no approver, no delegation) gets them pushed straight
   * from the call as written and its references' values: no params object. */
  int direct = c->tool && !c->tool->fn && !c->tool->schema && !call->delegate && !c->raw &&
               r->e->approver_ref == LUA_NOREF && !r->opt.approve_tty;
  ob_value *vals_inline[8], **vals = NULL, *params = NULL;
  if (direct) {
    vals = call->nrefs <= 8 ? vals_inline : ob_xmalloc(call->nrefs * sizeof *vals);
    for (size_t k = 0; k < call->nrefs; k++)
      vals[k] = eval_ref(&rs, &call->refs[k]);
  } else {
    params = resolve_params(&rs);
  }
  if (rs.skip || rs.missing || (params && params_invalid(c->tool, params, &rs.why))) {
    if (rs.skip)
      settle(c, OB_CALL_SKIPPED, rs.why.data);
    else
      fail(c, "structural", rs.why.data);
  } else if (params && (r->e->approver_ref != LUA_NOREF || r->opt.approve_tty) &&
             !approve(c, &params)) {
    params = NULL; /* refused, or the approver broke: approve released it and settled the call */
  } else if (call->delegate) {
    start_delegate(c, params);
    params = NULL; /* start_delegate took it */
  } else {
    call_args args = {c, params, vals, direct ? call->nrefs : 0};
    run_tool(c, &args);
  }
  ob_buf_free(&rs.why);
  ob_unref(params);
  for (size_t k = 0; vals && k < call->nrefs; k++)
    ob_unref(vals[k]);
  if (vals != vals_inline)
    free(vals);
}

/* --- writing results ------------------------------------------------------------ */

struct out_write {
  const char *kind;
  char *own_kind; /* kind copied from an obelus.message */
  ob_value *path_text; /* the path's canonical text when known (borrowed from the plan) */
  ob_path path;
  int own_path; /* path allocated here */
  ob_method method;
  ob_value *value;
};

static int has_metatable(lua_State *co, int idx, int ref) {
  if (!lua_getmetatable(co, idx))
    return 0;
  lua_rawgeti(co, LUA_REGISTRYINDEX, ref);
  int same = lua_rawequal(co, -1, -2);
  lua_pop(co, 2);
  return same;
}

/* Does (kind, path) land on a path of the call's _outputPath? */
static int declared(const ob_call *call, const char *kind, const ob_path *p) {
  for (size_t a = 0; a < call->output.n; a++)
    for (size_t k = 0; k < call->output.alts[a].n; k++) {
      const ob_reference *x = &call->output.alts[a].refs[k];
      if (!strcmp(x->kind, kind) && ob_path_is_prefix(&x->path, p))
        return 1;
    }
  return 0;
}

/* Reads an obelus.message table at idx into w. */
static int read_message(crun *c, lua_State *co, int idx, out_write *w, ob_buf *why) {
  idx = lua_absindex(co, idx);
  lua_getfield(co, idx, "kind");
  lua_getfield(co, idx, "path");
  lua_getfield(co, idx, "method");
  lua_getfield(co, idx, "instance");
  const char *kind = lua_tostring(co, -4), *path = lua_tostring(co, -3);
  const char *method = lua_tostring(co, -2);
  int rc = 0;
  ob_error err;
  int m = ob_method_parse(method, strlen(method));
  if (!lua_isnil(co, -1) && (!c->call->instance || strcmp(lua_tostring(co, -1), c->call->instance)))
    ob_buf_addf(why, "obelus.message: a message stays in the call's instance");
  else if (m < 0)
    ob_buf_addf(why, "obelus.message: unknown method \"%s\"", method);
  else if (ob_path_parse(path, strlen(path), &w->path, &err) != OB_OK)
    ob_buf_addf(why, "obelus.message: path: %s", err.msg);
  else if (!declared(c->call, kind, &w->path)) {
    ob_buf_addf(why, "obelus.message writes %s.%s, which is not on the call's _outputPath", kind,
                path);
    ob_path_free(&w->path);
  } else {
    w->kind = w->own_kind = strdup(kind);
    if (!w->own_kind)
      abort();
    w->own_path = 1;
    w->method = (ob_method)m;
    lua_getfield(co, idx, "value");
    w->value = ob_lua_to_value_named(co, -1, "message value", &err);
    lua_pop(co, 1);
    if (!w->value) {
      ob_buf_addf(why, "%s", err.msg);
      ob_path_free(&w->path);
      free(w->own_kind);
    } else {
      rc = 1;
    }
  }
  lua_pop(co, 4);
  return rc;
}

/* Which || alternative obelus.branch named (0-based), or -1 with why filled. */
static long pick_branch(crun *c, lua_State *co, int idx, ob_buf *why) {
  const ob_expr *out = &c->call->output;
  lua_getfield(co, idx, "which");
  long alt = -1;
  if (lua_isinteger(co, -1)) {
    lua_Integer n = lua_tointeger(co, -1);
    if (n >= 1 && (size_t)n <= out->n)
      alt = (long)n - 1;
    else
      ob_buf_addf(why, "obelus.branch(%lld): the _outputPath has %zu alternative%s", (long long)n,
                  out->n, out->n == 1 ? "" : "s");
  } else {
    const char *s = lua_tostring(co, -1);
    ob_expr e;
    ob_error err;
    if (ob_expr_parse(s, strlen(s), OB_EXPR_OUTPUT, &e, &err) == OB_OK) {
      for (size_t a = 0; alt < 0 && e.n == 1 && a < out->n; a++) {
        int same = out->alts[a].n == e.alts[0].n;
        for (size_t k = 0; same && k < e.alts[0].n; k++)
          same = !strcmp(out->alts[a].refs[k].kind, e.alts[0].refs[k].kind) &&
                 ob_path_equal(&out->alts[a].refs[k].path, &e.alts[0].refs[k].path);
        if (same)
          alt = (long)a;
      }
      ob_expr_free(&e);
    }
    if (alt < 0)
      ob_buf_addf(why, "obelus.branch(\"%s\"): no such alternative in the _outputPath", s);
  }
  lua_pop(co, 1);
  return alt;
}

/* Checks every write (its method, the document's schema), then makes them all:
 * a call's outputs are written entirely or not at all. */
static int commit_writes(crun *c, out_write *w, size_t n, ob_buf *why, int *structural) {
  ob_run *r = c->run;
  const char *inst = c->call->instance;
  /* a single write without a schema is atomic by itself: no need to try it first */
  int precheck = n > 1;
  for (size_t i = 0; !precheck && i < n; i++)
    precheck = ob_log_schema(r->log, w[i].kind, inst, OB_LOG_NOW) != NULL;
  for (size_t i = 0; precheck && i < n; i++) {
    ob_error err;
    ob_value *after = ob_log_preview(r->log, w[i].kind, inst, &w[i].path, w[i].method,
                                     w[i].value, &err);
    if (!after) {
      ob_buf_addf(why, "writing %s: %s", w[i].kind, err.msg);
      return 0;
    }
    ob_value *schema = ob_log_schema(r->log, w[i].kind, inst, OB_LOG_NOW);
    if (schema) {
      char key[sizeof schema];
      memcpy(key, &schema, sizeof schema);
      ob_schema *s = ob_map_get(&r->schemas, key, sizeof key);
      if (!s && (s = ob_schema_compile(schema, &err)))
        ob_map_put(&r->schemas, key, sizeof key, s);
      ob_schema_result res = {0};
      if (s && !ob_schema_validate(s, after, &res)) {
        ob_buf_addf(why, "the write breaks the %s schema: %s: %s: %s", w[i].kind,
                    res.fail[0].instance_path[0] ? res.fail[0].instance_path : "(root)",
                    res.fail[0].keyword, res.fail[0].message);
        *structural = 1;
      }
      ob_schema_result_free(&res);
    }
    ob_unref(after);
    if (*structural)
      return 0;
  }
  for (size_t i = 0; i < n; i++) {
    ob_error err;
    long pos = ob_log_append_output_text(r->log, w[i].kind, inst, &w[i].path, w[i].path_text,
                                         w[i].method, w[i].value, call_raw(c), &err);
    if (pos < 0) {
      sync_journal(r);
      ob_buf_addf(why, "writing %s: %s", w[i].kind, err.msg);
      return 0;
    }
    if (c->sublog && i == 0)
      ob_log_attach(r->log, (size_t)pos, c->sublog);
  }
  sync_journal(r);
  return 1;
}

/* Releases writes (and w itself, when heap: else it is the caller's buffer). */
static void free_writes(out_write *w, size_t n, int heap) {
  for (size_t i = 0; i < n; i++) {
    if (w[i].own_path)
      ob_path_free(&w[i].path);
    free(w[i].own_kind);
    ob_unref(w[i].value);
  }
  if (heap)
    free(w);
}

/* Makes the writes (all or none) and settles the call: done, or failed. */
static void finish_writes(crun *c, out_write *w, size_t n, int heap) {
  ob_buf why;
  ob_buf_init(&why);
  int structural = 0;
  if (commit_writes(c, w, n, &why, &structural)) {
    free_writes(w, n, heap);
    ob_buf_free(&why);
    settle(c, OB_CALL_DONE, NULL);
    return;
  }
  free_writes(w, n, heap);
  fail(c, structural ? "structural" : "runtime", why.data);
  ob_buf_free(&why);
}

/* Writes value (borrowed) to each path of alternative `alt` and settles the call. */
static void write_alt(crun *c, size_t alt, ob_value *value) {
  const ob_alt *a = &c->call->output.alts[alt];
  out_write inline_w[4], *w = a->n <= 4 ? inline_w : ob_xmalloc(a->n * sizeof *w);
  memset(w, 0, a->n * sizeof *w);
  size_t first = 0; /* the alternative's first part, alternatives flattened */
  for (size_t x = 0; x < alt; x++)
    first += c->call->output.alts[x].n;
  for (size_t k = 0; k < a->n; k++) {
    w[k].kind = a->refs[k].kind;
    w[k].path_text = c->call->output_text[first + k];
    w[k].path = a->refs[k].path;
    w[k].method = c->call->method;
    w[k].value = ob_ref(value);
  }
  finish_writes(c, w, a->n, w != inline_w);
}

static void complete(crun *c, int nres) {
  ob_call *call = c->call;
  lua_State *co = c->co;
  prefetch_users(c->run, call, 3);
  if (!call->has_output) { /* fire-and-forget, or a thought: nothing is written */
    settle(c, OB_CALL_DONE, NULL);
    return;
  }
  if (nres == 0)
    lua_pushnil(co);
  int idx = lua_gettop(co) - (nres ? nres - 1 : 0);
  ob_run *r = c->run;
  ob_buf why;
  ob_buf_init(&why);
  out_write *w = NULL;
  size_t n = 0;
  int msg_one = lua_istable(co, idx) && has_metatable(co, idx, r->e->message_mt_ref);
  int msg_list = 0;
  if (!msg_one && lua_istable(co, idx) && luaL_len(co, idx) > 0) {
    lua_geti(co, idx, 1);
    msg_list = lua_istable(co, -1) && has_metatable(co, -1, r->e->message_mt_ref);
    lua_pop(co, 1);
  }
  if (msg_one || msg_list) {
    size_t total = msg_one ? 1 : (size_t)luaL_len(co, idx);
    w = calloc(total, sizeof *w);
    if (!w)
      abort();
    for (size_t i = 0; i < total; i++) {
      if (msg_one)
        lua_pushvalue(co, idx);
      else
        lua_geti(co, idx, (lua_Integer)i + 1);
      int ok = lua_istable(co, -1) && has_metatable(co, -1, r->e->message_mt_ref) &&
               read_message(c, co, -1, &w[n], &why);
      if (!ok && !why.len)
        ob_buf_addf(&why, "result[%zu] is not an obelus.message", i + 1);
      lua_pop(co, 1);
      if (!ok)
        break;
      n++;
    }
    if (n < total) {
      free_writes(w, n, 1);
      fail(c, "runtime", why.data);
      ob_buf_free(&why);
      return;
    }
    ob_buf_free(&why);
    finish_writes(c, w, n, 1);
    return;
  }
  long alt = 0;
  int value_idx = idx;
  if (lua_istable(co, idx) && has_metatable(co, idx, r->e->branch_mt_ref)) {
    alt = pick_branch(c, co, idx, &why);
    lua_getfield(co, idx, "value");
    value_idx = lua_gettop(co);
  }
  ob_error err;
  /* returning nothing writes null */
  ob_value *value = alt < 0                      ? NULL
                    : lua_isnil(co, value_idx) ? ob_null()
                                               : ob_lua_to_value_named(co, value_idx, "result", &err);
  if (alt >= 0 && !value)
    ob_buf_addf(&why, "%s", err.msg);
  if (!value) {
    fail(c, "runtime", why.data);
    ob_buf_free(&why);
    return;
  }
  ob_buf_free(&why);
  write_alt(c, (size_t)alt, value);
  ob_unref(value);
}

/* --- tools written in C ------------------------------------------------------------ */

void ob_call_complete(ob_call_handle *h, size_t alt, const ob_value *value, const char *error) {
  crun *c = (crun *)h;
  if (c->state != OB_CALL_RUNNING || c->run->cancelled)
    return; /* spent, or the run was cancelled */
  if (error) {
    tool_error(c, error, NULL);
    return;
  }
  if (!c->call->has_output) {
    settle(c, OB_CALL_DONE, NULL);
    return;
  }
  if (alt >= c->call->output.n) {
    char why[128];
    snprintf(why, sizeof why, "the tool chose alternative %zu; the _outputPath has %zu", alt + 1,
             c->call->output.n);
    fail(c, "runtime", why);
    return;
  }
  write_alt(c, alt, value ? (ob_value *)value : ob_null());
}

const char *ob_call_handle_id(const ob_call_handle *h) { return ((const crun *)h)->call->id; }
const char *ob_call_handle_tool(const ob_call_handle *h) {
  return ((const crun *)h)->call->tool_name;
}

ob_run *ob_call_handle_run(const ob_call_handle *h) {
  ob_run *r = ((const crun *)h)->run;
  while (r->parent) /* a delegated plan's run belongs to its caller's */
    r = r->parent->run;
  return r;
}

/* A Lua error in the tool: handled by the last || alternative when there are
 * two or more (SPEC 3), else a runtime error of the call (with its traceback
 * on stderr). */
static void tool_error(crun *c, const char *msg, const char *traceback) {
  ob_call *call = c->call;
  if (!call->has_output || call->output.n < 2) {
    if (traceback)
      fprintf(stderr, "obelus: call %s (%s) raised an error:\n%s\n", call->id, call->tool_name,
              traceback);
    fail(c, "runtime", msg);
    return;
  }
  ob_value *e = ob_object();
  e = ob_object_set(e, "error", 5, ob_cstring(msg));
  e = ob_object_set(e, "tool", 4, ob_cstring(call->tool_name));
  e = ob_object_set(e, "call", 4, ob_cstring(call->id));
  fprintf(stderr, "obelus: call %s (%s): the error goes to %s: %s\n", call->id, call->tool_name,
          call->output.alts[call->output.n - 1].text, msg);
  write_alt(c, call->output.n - 1, e);
  ob_unref(e);
}

/* --- the pump ------------------------------------------------------------------------ */

/* What starting a call reads lies in a dozen small blocks of the plan, cold
 * in a big plan (each call is read once). The scheduler often knows which
 * call starts next (the queue holds it, or it waits only for the call now
 * running), so it asks for those blocks ahead, in stages, each reading only
 * what an earlier one brought in: 1 the call's structs, 2 the blocks they
 * point to, 3 what those point to. Hints only: nothing waits for them. */
static void prefetch_call(const ob_run *r, size_t i, int stage) {
  const ob_call *call = &r->plan->calls[i];
  if (stage == 1) {
    __builtin_prefetch(&r->calls[i]);
    __builtin_prefetch((const char *)&r->calls[i] + 64);
    __builtin_prefetch(call);
    __builtin_prefetch((const char *)call + 64);
    __builtin_prefetch((const char *)call + 128);
    __builtin_prefetch((const char *)call + 192);
  } else if (stage == 2) {
    ob_prefetch(call->raw);
    __builtin_prefetch(call->refs);
    __builtin_prefetch(call->output.block);
    __builtin_prefetch(call->output_text);
    __builtin_prefetch(call->id);
    __builtin_prefetch(call->deps);
    __builtin_prefetch(call->users);
  } else if (stage == 3) {
    ob_prefetch_members(call->raw);
    if (call->nrefs) {
      __builtin_prefetch(call->refs[0].expr.block);
      __builtin_prefetch((const char *)call->refs[0].expr.block + 64);
    }
    if (call->has_output)
      ob_prefetch(call->output_text[0]);
  }
}

/* The followers of a call that wait for nothing else (of its first two: a
 * chain's next call) at one stage;
 * at 3 also the path the follower's result will take into a wide object's
 * index (measured: a tenth of the cycles of a chain writing 100,000 keys;
 * none for queued calls, whose start comes later anyway). */
static void prefetch_users(const ob_run *r, const ob_call *call, int stage) {
  for (size_t u = 0; u < call->nusers && u < 2; u++) {
    if (r->calls[call->users[u]].pending != 1)
      continue; /* it waits for more than this call: it does not start next */
    prefetch_call(r, call->users[u], stage);
    const ob_call *user = &r->plan->calls[call->users[u]];
    if (stage == 3 && user->has_output) {
      const ob_reference *x = &user->output.alts[0].refs[0];
      ob_log_prefetch_write(r->log, x->kind, user->instance, &x->path, 2);
    }
  }
}

/* The calls queued behind position q: three ahead at stage 1, two at 2, one at 3. */
static void prefetch_queued(const ob_run *r, size_t q) {
  for (int stage = 1; stage <= 3; stage++)
    if (q + 4 - stage < r->qtail)
      prefetch_call(r, r->queue[q + 4 - stage], stage);
}

/* --- the collector in bursts and in idle time --------------------------------- */

#define BURST_CALLS 64           /* a burst is looked for every this many calls started */
#define BURST_LIVE 256           /* calls alive (waiting, mostly) that make it a burst */
#define BURST_MIN_ROOM_KB 16384  /* a held collector lets the heap grow by its size, or this */
#define IDLE_MAX_MS 20           /* idle collection: at most this long a loop turn */

static void gc_release(ob_engine *e) {
  if (e->gc_held) {
    e->gc_held = 0;
    lua_gc(e->L, LUA_GCRESTART);
  }
}

/* A held collector whose heap outgrew the bound runs again; 1 when it was released. */
static int gc_release_past_bound(ob_engine *e) {
  if (!e->gc_held || lua_gc(e->L, LUA_GCCOUNT) <= e->gc_limit_kb)
    return 0;
  gc_release(e);
  return 1;
}

/* Collection owed by a burst, done while the loop has nothing due: a timer
 * (kept from holding the loop open) comes back every millisecond and works
 * for as long as the loop's next task is away, less a millisecond, at most
 * IDLE_MAX_MS at a time. */
static void gc_idle_cb(uv_timer_t *t) {
  ob_engine *e = t->data;
  if (!e->gc_held || gc_release_past_bound(e))
    return;
  int wait = uv_backend_timeout(e->loop); /* without this timer: it is not active now */
  if (wait < 0 || wait >= 2) {
    int budget_ms = wait < 0 || wait - 1 > IDLE_MAX_MS ? IDLE_MAX_MS : wait - 1;
    uint64_t t0 = uv_hrtime(), budget = (uint64_t)budget_ms * 1000000u;
    /* a step works even while the collector is stopped; a generational one
     * is a whole (minor) collection, an incremental one says when it ends a cycle */
    int finished = 0;
    do
      finished = lua_gc(e->L, LUA_GCSTEP, 0) || !e->gc_incremental;
    while (!finished && uv_hrtime() - t0 < budget);
    uv_update_time(e->loop); /* the wait ahead is measured from now */
    if (finished) { /* a whole cycle done: the collector runs as usual again */
      gc_release(e);
      return;
    }
  }
  uv_timer_start(t, gc_idle_cb, 1, 0);
}

/* A burst: many calls started in one pump while BURST_LIVE or more are alive
 * (they wait). Collecting in its middle finds little to free (what a
 * waiting call started with is live) and walks everything again each cycle;
 * so the collector holds off, until the heap has doubled (or grown 16 MB,
 * when smaller), and does its work while the loop has nothing due
 * (gc_idle_cb). Calls that finish at once (a chain) leave few alive: no
 * burst. Measured on sleep 10000 100 (8 interleaved runs): the start cascade
 * ~30% shorter, loop time median 151 to 144 ms, and 141 to 134 ms once the
 * work went to idle time rather than after; chain and fanout: unchanged. */
static void gc_hold(ob_engine *e) {
  if (e->gc_held || !lua_gc(e->L, LUA_GCISRUNNING))
    return;
  if (!e->gc_idle) {
    if (!(e->gc_idle = malloc(sizeof *e->gc_idle)))
      return;
    uv_timer_init(e->loop, e->gc_idle);
    e->gc_idle->data = e;
  }
  int kb = lua_gc(e->L, LUA_GCCOUNT);
  e->gc_limit_kb = kb + (kb > BURST_MIN_ROOM_KB ? kb : BURST_MIN_ROOM_KB);
  lua_gc(e->L, LUA_GCSTOP);
  e->gc_held = 1;
  uv_timer_start(e->gc_idle, gc_idle_cb, 1, 0);
  uv_unref((uv_handle_t *)e->gc_idle);
}

static void pump(ob_run *r) {
  if (r->pumping)
    return;
  r->pumping = 1;
  ob_engine *e = r->e;
  size_t started = 0;
  while (r->qhead < r->qtail && !r->cancelled &&
         (r->opt.concurrency == 0 || r->running < r->opt.concurrency)) {
    if (++started % BURST_CALLS == 0) {
      if (!e->gc_held && e->live_calls >= BURST_LIVE)
        gc_hold(e);
      else
        gc_release_past_bound(e);
    }
    prefetch_queued(r, r->qhead);
    start(&r->calls[r->queue[r->qhead++]]);
  }
  r->pumping = 0;
}

/* --- primitives for the obelus module -------------------------------------------------- */

static crun *running_call(lua_State *co) {
  crun *c = *(crun **)lua_getextraspace(co);
  return c && c->co == co && c->state == OB_CALL_RUNNING ? c : NULL;
}

int ob_run_lua_is_call(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  lua_pushboolean(L, co && running_call(co) != NULL);
  return 1;
}

int ob_run_lua_wake(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  crun *c = co ? running_call(co) : NULL;
  if (c && lua_status(co) == LUA_YIELD)
    resume(c, L, 0);
  return 0;
}

/* --- obelus.sleep: the engine's queue and heap of sleepers ------------------------------ */

static int sleeper_before(const ob_sleeper *a, const ob_sleeper *b) {
  return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_up(ob_sleeper *h, size_t i) {
  while (i > 0 && sleeper_before(&h[i], &h[(i - 1) / 2])) {
    ob_sleeper t = h[i];
    h[i] = h[(i - 1) / 2];
    h[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static void heap_down(ob_sleeper *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && sleeper_before(&h[l], &h[m]))
      m = l;
    if (r < n && sleeper_before(&h[r], &h[m]))
      m = r;
    if (m == i)
      return;
    ob_sleeper t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static void sleep_fire(uv_timer_t *t);

/* The earliest sleeper: the queue's head or the heap's top; NULL when none. */
static ob_sleeper *sleep_first(ob_engine *e) {
  ob_sleeper *q = e->queue_head < e->queue_tail ? &e->queue[e->queue_head] : NULL;
  ob_sleeper *h = e->nsleepers ? &e->sleepers[0] : NULL;
  return !q ? h : !h ? q : sleeper_before(q, h) ? q : h;
}

/* Takes out s, the earliest sleeper (sleep_first's answer). */
static crun *sleep_pop(ob_engine *e, ob_sleeper *s) {
  crun *c = s->call;
  if (s != e->sleepers) {
    e->queue_head++;
  } else {
    e->sleepers[0] = e->sleepers[--e->nsleepers];
    heap_down(e->sleepers, e->nsleepers, 0);
  }
  return c;
}

static void sleep_arm(ob_engine *e) {
  ob_sleeper *s = sleep_first(e);
  if (!s) {
    uv_timer_stop(e->sleep_timer);
    return;
  }
  uint64_t now = uv_now(e->loop), due = s->due;
  uv_timer_start(e->sleep_timer, sleep_fire, due > now ? due - now : 0, 0);
}

/* Wakes every call whose time has come; calls that fall asleep meanwhile
 * (even for 0 ms) wait for the next round, so a loop of sleep(0) still yields. */
static void sleep_fire(uv_timer_t *t) {
  ob_engine *e = t->data;
  uint64_t now = uv_now(e->loop), limit = e->sleep_seq;
  ob_sleeper *s;
  while ((s = sleep_first(e)) && s->due <= now && s->seq < limit) {
    crun *c = sleep_pop(e, s);
    if (e->queue_head + 2 < e->queue_tail) { /* the next ones' coroutines, ahead of time */
      __builtin_prefetch(e->queue[e->queue_head + 2].call);
      __builtin_prefetch(((const crun *)e->queue[e->queue_head + 1].call)->co);
    }
    c->asleep = 0;
    resume(c, e->L, 0);
  }
  sleep_arm(e);
}

/* Keeps the sleepers of a[from..to) that are not run r's, in order; returns the new end. */
static size_t sleep_drop_run(ob_sleeper *a, size_t from, size_t to, const ob_run *r) {
  size_t kept = from;
  for (size_t i = from; i < to; i++) {
    crun *c = a[i].call;
    if (c->run == r)
      c->asleep = 0;
    else
      a[kept++] = a[i];
  }
  return kept;
}

/* Takes the calls of run r out of the queue and the heap (the run is cancelled or freed). */
static void sleep_forget(ob_run *r) {
  ob_engine *e = r->e;
  size_t queued = sleep_drop_run(e->queue, e->queue_head, e->queue_tail, r); /* stays in order */
  size_t kept = sleep_drop_run(e->sleepers, 0, e->nsleepers, r);
  int changed = queued != e->queue_tail || kept != e->nsleepers;
  e->queue_tail = queued;
  if (kept != e->nsleepers) {
    e->nsleepers = kept;
    for (size_t i = kept / 2; i-- > 0;)
      heap_down(e->sleepers, kept, i);
  }
  if (changed && e->sleep_timer)
    sleep_arm(e);
}

/* Room for one more in the array *a of capacity *cap holding n; 0 when out of memory. */
static int sleep_room(ob_sleeper **a, size_t *cap, size_t n) {
  if (n < *cap)
    return 1;
  size_t c = *cap ? 2 * *cap : 64;
  ob_sleeper *b = realloc(*a, c * sizeof *b);
  if (!b)
    return 0;
  *a = b;
  *cap = c;
  return 1;
}

int ob_run_lua_sleep(lua_State *L) {
  lua_Number ms = luaL_checknumber(L, 1);
  crun *c = running_call(L);
  if (!c)
    return luaL_error(L, "obelus.sleep must be called from a tool's own coroutine (its run "
                         "function), not from outside a tool or from a coroutine the tool made");
  if (!(ms >= 0) || ms > 1e15)
    return luaL_error(L, "obelus.sleep: milliseconds must be 0 or more");
  ob_engine *e = c->run->e;
  if (!e->sleep_timer) {
    if (!(e->sleep_timer = malloc(sizeof *e->sleep_timer)))
      return luaL_error(L, "obelus.sleep: out of memory");
    uv_timer_init(e->loop, e->sleep_timer);
    e->sleep_timer->data = e;
  }
  uv_update_time(e->loop); /* the loop's clock is as old as this iteration */
  ob_sleeper s = {uv_now(e->loop) + (uint64_t)ms, e->sleep_seq, c};
  if (e->queue_head == e->queue_tail)
    e->queue_head = e->queue_tail = 0; /* empty: start again from the front */
  if (e->queue_head == e->queue_tail || s.due >= e->queue[e->queue_tail - 1].due) {
    if (e->queue_head > 0 && e->queue_tail == e->capqueue) { /* slide to the front */
      memmove(e->queue, e->queue + e->queue_head,
              (e->queue_tail - e->queue_head) * sizeof *e->queue);
      e->queue_tail -= e->queue_head;
      e->queue_head = 0;
    }
    if (!sleep_room(&e->queue, &e->capqueue, e->queue_tail))
      return luaL_error(L, "obelus.sleep: out of memory");
    e->queue[e->queue_tail++] = s;
  } else {
    if (!sleep_room(&e->sleepers, &e->capsleepers, e->nsleepers))
      return luaL_error(L, "obelus.sleep: out of memory");
    e->sleepers[e->nsleepers] = s;
    heap_up(e->sleepers, e->nsleepers++);
  }
  e->sleep_seq++;
  c->asleep = 1;
  if (sleep_first(e)->call == c) /* the earliest now: the timer moves */
    sleep_arm(e);
  lua_pushlightuserdata(L, (void *)&ob_run_yield_token);
  return lua_yield(L, 1);
}

/* --- the run ----------------------------------------------------------------------------- */

/* {"type":"data","kind":"input","data":<data>}: how an input enters the log. */
static ob_value *input_message(const ob_value *data) {
  ob_value *m = ob_object();
  m = ob_object_set(m, "type", 4, ob_cstring("data"));
  m = ob_object_set(m, "kind", 4, ob_cstring("input"));
  return ob_object_set(m, "data", 4, ob_ref((ob_value *)data));
}

size_t ob_run_check_messages(ob_plan *plan, const ob_value *inputs, const char *input_label,
                             int numbered) {
  size_t before = plan->nerrors;
  ob_log *scratch = ob_log_new();
  ob_error err;
  for (size_t i = 0; i < ob_array_len(plan->context); i++)
    if (ob_log_append(scratch, ob_array_get(plan->context, i), &err) < 0)
      ob_plan_error(plan, NULL, "context[%zu]: %s", i, err.msg);
  for (size_t i = 0; inputs && i < ob_array_len(inputs); i++) {
    ob_value *m = input_message(ob_array_get(inputs, i));
    if (ob_log_append(scratch, m, &err) < 0) {
      if (numbered)
        ob_plan_error(plan, NULL, "%s #%zu: %s", input_label, i + 1, err.msg);
      else
        ob_plan_error(plan, NULL, "%s: %s", input_label, err.msg);
    }
    ob_unref(m);
  }
  ob_log_free(scratch);
  return plan->nerrors - before;
}

ob_run *ob_run_new(ob_engine *e, ob_plan *plan, const ob_value *plan_value,
                   const ob_value *inputs, const ob_run_options *opt, ob_error *err) {
  ob_run *r = calloc(1, sizeof *r);
  if (!r)
    abort();
  r->e = e;
  r->plan = plan;
  r->log = opt->log;
  if (!r->log) {
    r->log = ob_log_new();
    ob_log_keep_history(r->log, opt->time_travel);
  }
  r->journaled = ob_log_len(r->log); /* a shared log's older messages are journaled already */
  r->opt = *opt;
  ob_map_init(&r->schemas);
  r->calls = calloc(plan->ncalls ? plan->ncalls : 1, sizeof *r->calls);
  r->queue = calloc(plan->ncalls ? plan->ncalls : 1, sizeof *r->queue);
  if (!r->calls || !r->queue)
    abort();
  r->serial = ++e->run_serial;
  r->next = e->runs;
  if (e->runs)
    e->runs->prevp = &r->next;
  r->prevp = &e->runs;
  e->runs = r;

  ob_value *pm = ob_object();
  pm = ob_object_set(pm, "type", 4, ob_cstring("plan"));
  pm = ob_object_set(pm, "file", 4, ob_cstring(plan->file));
  pm = ob_object_set(pm, "plan", 4, ob_ref((ob_value *)plan_value));
  long rc = append(r, pm, err);
  ob_unref(pm);
  for (size_t i = 0; rc >= 0 && opt->pre_context && i < ob_array_len(opt->pre_context); i++)
    rc = append(r, ob_array_get(opt->pre_context, i), err);
  for (size_t i = 0; rc >= 0 && i < ob_array_len(plan->context); i++) {
    ob_error e2;
    if ((rc = append(r, ob_array_get(plan->context, i), &e2)) < 0)
      ob_error_set(err, (int)rc, i, "%s: context[%zu]: %s", plan->file, i, e2.msg);
  }
  for (size_t i = 0; rc >= 0 && inputs && i < ob_array_len(inputs); i++) {
    ob_value *m = input_message(ob_array_get(inputs, i));
    ob_error e2;
    if ((rc = append(r, m, &e2)) < 0)
      ob_error_set(err, (int)rc, i, "--input #%zu: %s", i + 1, e2.msg);
    ob_unref(m);
  }
  if (rc < 0) {
    ob_run_free(r);
    return NULL;
  }
  for (size_t i = 0; i < plan->ncalls; i++) {
    crun *c = &r->calls[i];
    c->run = r;
    c->call = &plan->calls[i];
    c->pending = c->call->ndeps;
    c->co_slot = LUA_NOREF;
    c->tool = c->call->tool;
    c->detached = !c->call->has_output && c->tool && !c->tool->latent;
    if (!c->detached)
      r->nawaited++;
  }
  return r;
}

void ob_run_start(ob_run *r) {
  r->t0 = uv_hrtime();
  if (r->e->watch)
    ob_watch_arm(r->e->watch, slice_limit(r));
  if (r->nawaited == 0 && !r->finished) {
    r->finished = 1;
    emit(r, OB_EV_RUN_DONE, NULL, NULL);
    if (r->opt.on_done)
      r->opt.on_done(r, r->opt.ud);
  }
  for (size_t i = 0; i < r->plan->ncalls; i++)
    if (r->calls[i].pending == 0)
      enqueue(r, &r->calls[i]);
  pump(r);
}

void ob_run_cancel(ob_run *r) {
  r->cancelled = 1;
  sleep_forget(r);
  for (size_t i = 0; i < r->plan->ncalls; i++) {
    crun *c = &r->calls[i];
    drop_coroutine(c);
    if (c->sub)
      ob_run_cancel(c->sub);
  }
}

void ob_run_free(ob_run *r) {
  if (!r)
    return;
  ob_run_cancel(r);
  for (size_t k = 0; k < r->plan->ncalls; k++) {
    crun *c = &r->calls[k];
    ob_run_free(c->sub); /* clears c->sub through its parent pointer */
    ob_plan_free(c->subplan);
    ob_unref(c->subvalue);
    ob_unref(c->sublog);
    ob_unref(c->raw);
  }
  if (r->parent)
    r->parent->sub = NULL;
  *r->prevp = r->next;
  if (r->next)
    r->next->prevp = r->prevp;
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&r->schemas, &i, &me))
    ob_schema_free(me->val);
  ob_map_free(&r->schemas);
  if (!r->opt.log)
    ob_log_free(r->log);
  free(r->calls);
  free(r->queue);
  ob_engine *e = r->e;
  free(r);
  if (e->live_calls == 0) { /* no call is left waiting: the collector works as usual */
    gc_release(e);
    if (e->gc_incremental) { /* the burst is over (see calls_up) */
      lua_gc(e->L, LUA_GCGEN, 0, 0);
      e->gc_incremental = 0;
    }
  }
}

ob_log *ob_run_log(ob_run *r) { return r->log; }
int ob_run_finished(const ob_run *r) { return r->finished; }
int ob_run_failed(const ob_run *r) { return r->failed; }
size_t ob_run_detached_pending(const ob_run *r) { return r->detached_running; }
size_t ob_run_running(const ob_run *r) { return r->running; }
ob_call_state ob_run_call_state(const ob_run *r, size_t i) { return r->calls[i].state; }

size_t ob_run_fail_stalled(ob_run *r) {
  size_t n = 0;
  for (size_t i = 0; i < r->plan->ncalls; i++) {
    crun *c = &r->calls[i];
    if (c->state != OB_CALL_RUNNING)
      continue;
    n++;
    fail(c, "runtime", "stalled: the tool waits for a callback that can no longer come "
                       "(nothing is pending on the loop)");
  }
  return n;
}

typedef struct template_eval {
  ob_run *run;
  const char *inst;
} template_eval;

/* An output template's reference, read in inst's view; absent is null. */
static ob_value *eval_template(void *ud, const ob_value *text) {
  template_eval *t = ud;
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(ob_string_ptr(text), ob_string_len(text), OB_EXPR_INPUT, &e, &err) != OB_OK)
    return ob_null(); /* validation already reported it */
  ob_value *x = ob_log_eval(t->run->log, &e, t->inst, OB_LOG_NOW);
  ob_expr_free(&e);
  return x ? x : ob_null();
}

static ob_value *resolve_template(ob_run *r, const ob_value *v, const char *inst) {
  template_eval t = {r, inst};
  return substitute(v, eval_template, &t);
}

static ob_value *output_in(ob_run *r, const char *inst) {
  if (r->plan->output)
    return resolve_template(r, r->plan->output, inst);
  ob_path root = {0, NULL};
  ob_value *s = ob_log_read(r->log, "state", inst, &root, OB_LOG_NOW);
  return s ? s : ob_object();
}

ob_value *ob_run_output(ob_run *r) {
  if (!r->plan->ninstances)
    return output_in(r, NULL);
  ob_value *o = ob_object(); /* instance id -> that instance's result */
  for (size_t i = 0; i < r->plan->ninstances; i++) {
    const char *inst = r->plan->instances[i];
    o = ob_object_set(o, inst, strlen(inst), output_in(r, inst));
  }
  return o;
}
