/* ob_approve.c -- approval: a human (or a rule) before a call starts.
 *
 * With an approver (obelus.set_approver) or the run's approval hook
 * (ob_run_options.approve: the CLI's --approve asks on the terminal), each
 * call is shown with its params resolved before it runs; the answer allows
 * it, refuses it (a runtime error "refused"), or replaces it with another call
 * of the same wiring (outputs, instance, id), validated like a plan's own
 * call and resolved now. The Lua approver runs watched, as a call's tool
 * does (ob_watch.h): a SIGINT or SIGTERM stops one that never returns, and
 * the call is then left as it was, unstarted and unsettled, for the run's
 * cancel (no record: `resume` asks the approver again). Costs: one approver
 * call per call started. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge/ob_lua.h"
#include "base/ob_mem.h"
#include "engine/ob_sched.h"
#include "bridge/ob_watch.h"

enum { REFUSE = 0, ALLOW = 1, BROKEN = -1, STOPPED = -2, LATER = 2 };

/* Calls the approver (on the stack with its two arguments) watched; returns
 * lua_pcall's status, or STOPPED when a SIGINT or SIGTERM stopped it. */
static int approver_call(ob_engine *e, lua_State *L) {
  ob_watch *w = e->watch;
  ob_watch_outer outer = {0};
  if (w)
    outer = ob_watch_enter(w, L, 0, 0);
  int rc = lua_pcall(L, 2, 1, 0);
  int why = w ? ob_watch_leave(w, L, outer) : OB_STOP_NONE;
  if (why == OB_STOP_SIGNAL || (rc != LUA_OK && atomic_load(&ob_watch_interrupted)))
    return STOPPED;
  return rc;
}

/* Asks the Lua approver: fn(call, ctx) -> true/nil, false/"refuse", or a replacement. */
static int ask_lua(ob_crun *c, const ob_value *params, ob_value **replacement, ob_buf *why) {
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
  int verdict = BROKEN, rc = approver_call(c->run->e, L);
  if (rc == STOPPED) {
    verdict = STOPPED;
  } else if (rc != LUA_OK) {
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

/* Asks the run's approval hook (the CLI's: the terminal, ob_cli_approve_tty). */
static int ask_hook(ob_crun *c, const ob_value *params, ob_value **replacement, ob_buf *why) {
  ob_approve_ask q = {c->call->id,   c->call->tool_name, c->call->instance, params,
                      ob_crun_raw(c), c, c->run->opt.journal_scope};
  int verdict = c->run->opt.approve(c->run->opt.approve_ud, &q, replacement, why);
  if (verdict == OB_APPROVE_BROKEN && !why->len)
    ob_buf_addf(why, "the approval failed");
  return verdict == OB_APPROVE_ALLOW    ? ALLOW
         : verdict == OB_APPROVE_REFUSE ? REFUSE
         : verdict == OB_APPROVE_LATER  ? LATER
                                        : BROKEN;
}

/* The wiring of a call (where it sits in the graph) that a replacement keeps. */
static const char *const wiring[] = {"_outputPath", "_outputMethod", "_instance", "_id",
                                     "_delegate", "_scopes"};

/* Takes the approver's replacement: validated as a call of its own, with the
 * same wiring, its references resolved now. */
static int adopt(ob_crun *c, ob_value *replacement, ob_value **params, ob_buf *why) {
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
  tmp->root = r->plans_root ? ob_xstrdup(r->plans_root) : NULL; /* its _delegate, confined */
  ob_plan_check_tools(tmp, &r->e->tools, ob_engine_has_latent(r->e));
  int ok = 0;
  if (tmp->nerrors) {
    ob_buf_addf(why, "the replacement is invalid: %s", tmp->errors[0]);
  } else {
    ob_resolver rs = {r, &tmp->calls[0], 0, 0, 0, {0}};
    ob_buf_init(&rs.why);
    ob_value *np = ob_params_resolve(&rs);
    if (rs.skip || rs.missing || ob_params_invalid(tmp->calls[0].tool, np, &rs.why)) {
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
int ob_crun_approve(ob_crun *c, ob_value **params) {
  ob_value *replacement = NULL;
  ob_buf why;
  ob_buf_init(&why);
  int verdict = c->run->e->approver_ref != LUA_NOREF ? ask_lua(c, *params, &replacement, &why)
                                                     : ask_hook(c, *params, &replacement, &why);
  int go = verdict == ALLOW && (!replacement || adopt(c, replacement, params, &why));
  ob_unref(replacement);
  if (verdict == LATER) { /* asked elsewhere: the call waits, its params kept */
    c->awaiting = 1;
    c->params = *params;
    *params = NULL;
  } else if (verdict == STOPPED) {
    ob_unref(*params); /* stopped by a signal: the run's cancel comes next, nothing settles */
    *params = NULL;
  } else if (!go) {
    ob_unref(*params);
    /* refused, or the approver broke: runtime; a replacement that is no valid call: structural */
    ob_crun_fail(c, verdict == ALLOW ? "structural" : "runtime", verdict == REFUSE ? "refused" : why.data);
  }
  ob_buf_free(&why);
  return go;
}

int ob_approve_answer(ob_crun *c, int verdict, const ob_value *replacement, const char *why) {
  ob_run *r = c->run;
  if (!c->awaiting || r->cancelled)
    return -1;
  c->awaiting = 0;
  ob_value *params = c->params;
  c->params = NULL;
  ob_buf b;
  ob_buf_init(&b);
  if (verdict == OB_APPROVE_ALLOW &&
      (!replacement || adopt(c, (ob_value *)replacement, &params, &b))) {
    ob_crun_go(c, params, NULL, NULL, 0);
    if (c->state == OB_CALL_RUNNING && !c->call->delegate && !c->call->each && !c->holds_slot) {
      c->holds_slot = 1; /* as the pump does; it may pass --concurrency for a while */
      r->root->busy++;
    }
  } else {
    ob_unref(params);
    if (verdict != OB_APPROVE_ALLOW && why && *why)
      ob_buf_addf(&b, "%s", why);
    ob_crun_fail(c, verdict == OB_APPROVE_ALLOW ? "structural" : "runtime",
                 verdict == OB_APPROVE_REFUSE ? "refused" : b.len ? b.data : "the approval failed");
  }
  ob_buf_free(&b);
  return 0;
}
