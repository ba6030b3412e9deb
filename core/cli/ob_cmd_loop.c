/* ob_cmd_loop.c -- `obelus loop PLAN --planner FILE.lua`: the planning loop
 * (docs/plan-format.md, section 10), and its resumption from a journal.
 *
 * Design
 * ------
 * PLAN runs first, as step 0; then a planner (a Lua function, run in the
 * engine's state, synchronously) is asked, step after step, for calls or an
 * output. Each step's calls run as a plan of their own on one log that every
 * step shares, driven by the same runner as `obelus run`'s (ob_runner.c):
 * the planner sees in ctx.messages everything every step wrote. A step whose
 * calls are invalid runs nothing: its problems join the log as error messages
 * (phase "validation") for the planner to read. The step plans are kept, with
 * their values, until the engine is freed, because its runs point into them.
 *
 * The journal is the runs' own (each record with its "step"), the first
 * run's record naming the planner (its file identity) and --max-steps, plus a
 * "step" record for a step that ran no plan and an "end" record with the exit
 * status and the output. An interruption writes no end record: `obelus
 * resume` (ob_cmd_resume.c) then calls ob_cmd_loop_resume, which refuses a
 * changed planner unless --force, rebuilds the shared log from the journal,
 * takes up the run of the step the journal reached, and asks the planner on
 * from the next step.
 *
 * Costs: per step, the whole log converted to Lua for ctx.messages
 * (O(messages): a planner sees everything), and the step's plan kept in
 * memory until the loop ends (at most --max-steps of them). */
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "cli/ob_cli.h"
#include "cli/ob_cmd_loop.h"
#include "log/ob_journal.h"
#include "bridge/ob_lua.h"
#include "base/ob_mem.h"
#include "log/ob_msg.h"
#include "engine/ob_resume.h"
#include "cli/ob_runner.h"
#include "log/ob_wal.h"
#include "bridge/ob_watch.h"

static const char loop_help[] =
    "usage: obelus loop PLAN --planner FILE.lua [--max-steps N] [--tools PATH]...\n"
    "                   [--input JSON|@FILE]... [--journal FILE] [--overwrite]\n"
    "                   [run options]\n"
    "\n"
    "The planning loop: PLAN gives the initial context (its calls, if any, run\n"
    "first). Then, step after step, the planner is asked what to do: FILE.lua\n"
    "returns a function (ctx) -> { calls = {...}, output = value|nil }, where\n"
    "ctx.messages is the log so far and ctx:resolve(expr) reads a reference\n"
    "(nil when absent). The calls run as a plan on the shared log; their errors\n"
    "join the log; the planner is asked again, until it returns an output\n"
    "(printed, exit 0) or --max-steps (default 10) is reached (exit 1).\n"
    "An existing --journal FILE is refused unless --overwrite; exit 4 when the\n"
    "journal, stdout or --events could not be written.\n"
    "\n"
    "example:\n"
    "  obelus loop plans/replan/plan.json --planner plans/replan/planner.lua \\\n"
    "              --tools plans/replan/tools\n";

/* ctx:resolve(expr): the value, or nil when absent. */
static int ctx_resolve(lua_State *L) {
  ob_log *log = lua_touserdata(L, lua_upvalueindex(1));
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(s, len, OB_EXPR_INPUT, &e, &err) != OB_OK)
    return luaL_error(L, "ctx:resolve: %s", err.msg);
  ob_value *v = ob_log_eval(log, &e, NULL, OB_LOG_NOW);
  ob_expr_free(&e);
  if (!v)
    return 0;
  int rc = ob_lua_push_safe(L, v, &err);
  ob_unref(v);
  return rc == OB_OK ? 1 : luaL_error(L, "ctx:resolve: %s", err.msg);
}

/* Pushes the planner's context: { step, messages, resolve }. */
static int push_ctx(lua_State *L, ob_log *log, int step) {
  ob_error err;
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, step);
  lua_setfield(L, -2, "step");
  lua_createtable(L, (int)ob_log_len(log), 0);
  for (size_t i = 0; i < ob_log_len(log); i++) {
    ob_value *m = ob_log_message(log, i);
    int rc = ob_lua_push_safe(L, m, &err);
    ob_unref(m);
    if (rc != OB_OK)
      return rc;
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "messages");
  lua_pushlightuserdata(L, log);
  lua_pushcclosure(L, ctx_resolve, 1);
  lua_setfield(L, -2, "resolve");
  return OB_OK;
}

/* A step's plan was invalid: its problems become error messages the planner reads. */
static void record_problems(ob_log *log, ob_wal *journal, const ob_plan *p, int step) {
  for (size_t i = 0; i < p->nerrors; i++) {
    ob_value *m = ob_msg_problem(p->errors[i], step);
    ob_error err;
    if (ob_log_append(log, m, &err) >= 0 && journal) {
      ob_wal_add_value(journal, m);
      ob_wal_flush(journal);
    }
    ob_unref(m);
  }
}

/* A loop's journal records: the first run's "run" record holds "loop":
 * {"planner": its identity, "max_steps": N}; {"journal":"step","step":N,...}
 * for a step that ran no plan; {"journal":"end","exit":X,"output":V} when the loop ends. A step's
 * run writes its own records, each with "step":N (ob_record.c). */
static void journal_record(ob_wal *journal, const ob_jrec *rec) {
  ob_buf *b = journal ? ob_wal_line(journal) : NULL;
  if (b) {
    ob_jrec_write(b, rec);
    ob_wal_line_ended(journal);
  }
  if (journal)
    ob_wal_flush(journal);
}

/* The planning loop as it goes, from `loop` or from `resume`. */
typedef struct looper {
  ob_cmd_options *o;
  ob_engine *e;
  ob_runner rn;
  ob_wal *journal;
  ob_log *log; /* shared by every step's run */
  ob_run_options ro;
  int planner; /* registry reference of the planner function */
  size_t nsteps;
  ob_plan **steps; /* each step's plan and its value, kept until the engine goes */
  ob_value **values;
} looper;

static void looper_init(looper *lp, ob_cmd_options *o, ob_engine *e) {
  memset(lp, 0, sizeof *lp);
  lp->o = o;
  lp->e = e;
  lp->planner = LUA_NOREF;
  lp->log = ob_log_new();
  ob_log_keep_history(lp->log, 0);
  lp->steps = ob_xcalloc(o->max_steps + 2, sizeof *lp->steps);
  lp->values = ob_xcalloc(o->max_steps + 2, sizeof *lp->values);
}

/* Loads the planner file: OB_EXIT_OK, or 2 said on stderr. */
static int looper_planner(looper *lp) {
  lua_State *L = lp->e->L;
  if (luaL_loadfile(L, lp->o->planner) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK ||
      !lua_isfunction(L, -1)) {
    ob_eprintf("obelus %s: %s\n", lp->o->cmd,
            lua_isstring(L, -1) ? lua_tostring(L, -1) : "the planner file must return a function");
    lua_pop(L, 1);
    return OB_EXIT_USAGE;
  }
  lp->planner = luaL_ref(L, LUA_REGISTRYINDEX);
  return OB_EXIT_OK;
}

/* Keeps a step's plan (made from calls, which it takes) for the engine's life. */
static ob_plan *looper_keep(looper *lp, ob_value *calls, int step) {
  char name[PATH_MAX + 32];
  snprintf(name, sizeof name, "%s#step%d", lp->o->plan, step);
  ob_plan *sp = ob_plan_from_value(calls ? calls : ob_null(), name);
  sp->root = ob_xstrdup(lp->o->root); /* the planner's _delegate too */
  lp->steps[lp->nsteps] = sp;
  lp->values[lp->nsteps++] = calls;
  ob_plan_check_tools(sp, &lp->e->tools, ob_engine_has_latent(lp->e));
  return sp;
}

/* Calls the planner (on the stack with its context) as a call's tool is run:
 * watched, so that a SIGINT or SIGTERM stops a planner that never returns.
 * Returns the signal that stopped it, 0 when it was not; *rc is lua_pcall's. */
static int planner_call(ob_engine *e, lua_State *L, int *rc) {
  ob_watch *w = e->watch;
  ob_watch_outer outer = {0};
  if (w)
    outer = ob_watch_enter(w, L, 0, 0);
  *rc = lua_pcall(L, 1, 1, 0);
  int why = w ? ob_watch_leave(w, L, outer) : OB_STOP_NONE;
  int sig = atomic_load(&ob_watch_interrupted);
  return why == OB_STOP_SIGNAL || sig ? sig : 0;
}

/* Asks the planner at steps from `from` on; returns the exit status. */
static int looper_steps(looper *lp, int from) {
  lua_State *L = lp->e->L;
  ob_cmd_options *o = lp->o;
  ob_error err;
  int rc = -1;
  for (int step = from; rc < 0 && step <= (int)o->max_steps; step++) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->planner);
    int prc = LUA_ERRRUN, stopped = 0;
    if (push_ctx(L, lp->log, step) == OB_OK)
      stopped = planner_call(lp->e, L, &prc);
    if (stopped) {
      /* as a run ends on a signal: no end record, `resume` asks this step again */
      fprintf(stderr, "obelus %s: interrupted by %s; the planner was stopped at step %d\n",
              o->cmd, stopped == SIGINT ? "SIGINT" : "SIGTERM", step);
      lua_settop(L, 0);
      return 128 + stopped;
    }
    if (prc != LUA_OK) {
      ob_eprintf("obelus %s: the planner failed at step %d: %s\n", o->cmd, step,
              lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no message)");
      lua_settop(L, 0);
      rc = OB_EXIT_FAIL;
      break;
    }
    if (!lua_istable(L, -1)) {
      fprintf(stderr, "obelus %s: step %d: the planner must return { calls = ..., output = ... }\n",
              o->cmd, step);
      lua_settop(L, 0);
      rc = OB_EXIT_FAIL;
      break;
    }
    lua_getfield(L, -1, "output");
    if (!lua_isnil(L, -1)) {
      ob_value *out = ob_lua_to_value_named(L, -1, "output", &err);
      lua_settop(L, 0);
      if (!out) {
        ob_eprintf("obelus %s: step %d: %s\n", o->cmd, step, err.msg);
        rc = OB_EXIT_FAIL;
        break;
      }
      journal_record(lp->journal, &(ob_jrec){.kind = OB_JREC_END, .exit = 0, .output = out});
      return ob_runner_finish(&lp->rn, &lp->journal, OB_EXIT_OK, out);
    }
    lua_pop(L, 1);
    lua_getfield(L, -1, "calls");
    if (lua_isnil(L, -1)) { /* no calls, no output: ask again with nothing new */
      lua_settop(L, 0);
      journal_record(lp->journal, &(ob_jrec){.kind = OB_JREC_STEP, .step = step});
      continue;
    }
    ob_value *calls = ob_lua_to_value_named(L, -1, "calls", &err);
    lua_settop(L, 0);
    if (calls && ob_typeof(calls) == OB_OBJECT && !ob_object_len(calls)) {
      ob_unref(calls); /* {} from Lua: an empty list */
      calls = ob_array();
    }
    ob_plan *sp = looper_keep(lp, calls, step);
    if (!calls)
      ob_plan_error(sp, NULL, "%s", err.msg);
    if (sp->nerrors) {
      record_problems(lp->log, lp->journal, sp, step);
      journal_record(lp->journal, &(ob_jrec){.kind = OB_JREC_STEP, .step = step,
                                             .problems = (int64_t)sp->nerrors});
      continue;
    }
    ob_run_options ro = lp->ro;
    ro.step = step;
    ob_run *r = ob_run_new(lp->e, sp, calls, NULL, &ro, &err);
    if (!r) {
      ob_eprintf("obelus %s: step %d: %s\n", o->cmd, step, err.msg);
      rc = OB_EXIT_FAIL;
      break;
    }
    int sig = ob_runner_drive(&lp->rn, r, sp->ncalls);
    if (sig)
      return sig; /* interrupted: no end record, resume goes on from here */
  }
  if (rc < 0) {
    fprintf(stderr, "obelus %s: no output after %zu steps (see --max-steps)\n", o->cmd,
            o->max_steps);
    rc = OB_EXIT_FAIL;
  }
  journal_record(lp->journal, &(ob_jrec){.kind = OB_JREC_END, .exit = rc});
  return rc;
}

static int looper_free(looper *lp, int rc) {
  if (lp->journal && ob_runner_journal_close(lp->e, &lp->journal, lp->o->cmd) &&
      (rc == OB_EXIT_OK || rc == OB_EXIT_FAIL))
    rc = OB_EXIT_WRITE;
  rc = ob_runner_close(&lp->rn, &lp->journal, rc);
  ob_engine_free(lp->e); /* frees the runs before the plans and the shared log they use */
  lp->e = NULL;
  for (size_t i = 0; i < lp->nsteps; i++) {
    ob_plan_free(lp->steps[i]);
    ob_unref(lp->values[i]);
  }
  free(lp->steps);
  free(lp->values);
  ob_log_free(lp->log);
  return rc;
}

int ob_cmd_loop(int argc, char **argv) {
  ob_cmd_options o;
  ob_engine *e;
  ob_drun *d;
  int rc = ob_cmd_begin(argc, argv, loop_help, &o, &e, &d);
  if (rc >= 0)
    return rc;
  /* the first plan runs on the log its steps share, writing the loop's journal: the
   * loop makes its runs itself, from the plan the driver prepared */
  ob_plan *p = ob_drun_plan(d);
  looper lp;
  looper_init(&lp, &o, e);
  if ((rc = looper_planner(&lp)) != OB_EXIT_OK ||
      (rc = ob_runner_open(&lp.rn, &o, e, &lp.journal)) != OB_EXIT_OK)
    goto done;
  lp.ro = ob_runner_run_options(&o, &lp.rn, lp.journal, lp.log);
  /* the run record says it is a loop's, with what resume needs to go on */
  ob_value *loop = ob_object_set(ob_object(), "planner", 7, ob_file_identity(o.planner));
  loop = ob_object_set(loop, "max_steps", 9, ob_int((int64_t)o.max_steps));
  ob_run_options first_opt = lp.ro;
  first_opt.run_record_extra = loop;
  ob_error err;
  ob_run *first = ob_run_new(e, p, ob_drun_plan_value(d), o.inputs, &first_opt, &err);
  ob_unref(loop);
  if (!first) {
    ob_eprintf("obelus loop: %s\n", err.msg);
    rc = OB_EXIT_USAGE;
    goto done;
  }
  if ((rc = ob_runner_drive(&lp.rn, first, p->ncalls)))
    goto done;
  rc = looper_steps(&lp, 1);
done:
  rc = looper_free(&lp, rc);
  ob_cmd_cleanup(&o, NULL, d);
  return rc;
}

/* `resume` of a loop's journal: the planner and --max-steps as the loop had
 * them, the shared log rebuilt, the step the journal reached taken up (its
 * run resumed like any run), then the planner asked from the next step on. */
int ob_cmd_loop_resume(ob_cmd_options *o, ob_engine *e, ob_plan *p, ob_resume *rs,
                       ob_wal **journal) {
  const ob_value *loop = ob_resume_loop(rs);
  ob_value *pl = ob_object_get(loop, "planner", 7), *ms = ob_object_get(loop, "max_steps", 9);
  ob_value *pf = pl ? ob_object_get(pl, "file", 4) : NULL;
  if (!pf || ob_typeof(pf) != OB_STRING) {
    fprintf(stderr, "obelus resume: %s: the loop record names no planner\n", o->plan);
    return OB_EXIT_USAGE;
  }
  o->planner = ob_string_ptr(pf);
  if (ms && ob_typeof(ms) == OB_INT && ob_int_value(ms) > 0 && ob_int_value(ms) <= 100000)
    o->max_steps = (size_t)ob_int_value(ms);
  ob_value *now = ob_file_identity(o->planner);
  int changed = !ob_equal(now, pl);
  ob_unref(now);
  if (changed && !o->force) {
    fprintf(stderr, "obelus resume: the planner %s changed since the run; nothing ran (--force "
                    "resumes anyway)\n", o->planner);
    return OB_EXIT_USAGE;
  }
  looper lp;
  looper_init(&lp, o, e);
  lp.journal = *journal;
  *journal = NULL;
  ob_error err;
  int rc = looper_planner(&lp);
  if (rc == OB_EXIT_OK && (rc = ob_runner_open(&lp.rn, o, e, &(ob_wal *){NULL})) == OB_EXIT_OK) {
    lp.ro = ob_runner_run_options(o, &lp.rn, lp.journal, lp.log);
    lp.ro.resume = rs;
    int step = ob_resume_last_step(rs), need_run = step == 0;
    char key[32];
    snprintf(key, sizeof key, "step %d", step);
    ob_run *r = NULL;
    size_t ncalls = p->ncalls;
    if (ob_resume_fill_log(rs, lp.log, &err) != OB_OK) {
      need_run = 1;
    } else if (step == 0) { /* the first plan's run */
      r = ob_resume_run(e, p, rs, "", &lp.ro, &err);
    } else if ((need_run = ob_resume_has_run(rs, key))) { /* the step's run */
      ob_plan *sp = looper_keep(&lp, ob_ref((ob_value *)ob_resume_part_plan(rs, key)), step);
      ncalls = sp->ncalls;
      lp.ro.step = step;
      if (sp->nerrors)
        ob_error_set(&err, OB_EINVAL, 0, "%s", sp->errors[0]);
      else
        r = ob_resume_run(e, sp, rs, key, &lp.ro, &err);
      lp.ro.step = 0;
    }
    if (need_run && !r) {
      ob_eprintf("obelus resume: %s\n", err.msg);
      rc = OB_EXIT_USAGE;
    } else {
      journal_record(lp.journal, &(ob_jrec){.kind = OB_JREC_RESUME});
      if (!(rc = r ? ob_runner_drive(&lp.rn, r, ncalls) : 0))
        rc = looper_steps(&lp, step + 1);
    }
  }
  return looper_free(&lp, rc);
}
