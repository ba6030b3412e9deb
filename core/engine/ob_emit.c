/* ob_emit.c -- a call's partial results while it runs: obelus.emit(value) from a Lua
 * tool, ob_call_emit (obelus_call_emit) from a C tool.
 *
 * Design
 * ------
 * What a call sends is neither its result nor a message of the log: nothing reads it
 * through a reference, and a plan's documents never change for it. It is an event
 * (OB_EV_PROGRESS, with the value and the attempt's number) for whoever watches the
 * run (--events, on_event, MCP's progress notifications), and a "progress" record of
 * the journal, so that `log`, the trace and the report show it after the run; resume
 * reads nothing from it. The record goes out with the next flush of the journal (the
 * call's own settling, another call's start, the loop's turn), never on its own.
 *
 * A value is bounded as a result is (--max-output: an emit larger than that raises in
 * the tool, which may catch it), and only a running attempt may send: a tool's
 * callback that fires after its attempt ended (timed out, retried) sends nothing, and
 * says so. The event of a delegated plan's call goes to the top-level run's listener,
 * as its notes do: a delegated run has no listener of its own.
 *
 * Costs: per emit, the value converted from Lua (as a result is), its size counted up
 * to the bound, one journal line and one event. */
#include <lauxlib.h>

#include "bridge/ob_lua.h"
#include "engine/ob_sched.h"

/* c's attempt sends data (borrowed): OB_OK, or OB_EINVAL with err filled. */
static int emit(ob_crun *c, const ob_value *data, ob_error *err) {
  ob_run *r = c->run;
  if (r->opt.max_output && ob_json_size(data, r->opt.max_output) > r->opt.max_output)
    return ob_error_set(err, OB_EINVAL, 0, "the value is larger than the run's --max-output "
                        "of %zu KB", r->opt.max_output >> 10);
  ob_record_progress(c, data);
  ob_run *root = r->root ? r->root : r;
  if (root->opt.on_event) {
    ob_event ev = {.type = OB_EV_PROGRESS, .call = c->call, .data = data,
                   .t_ms = ob_run_now_ms(root), .attempt = c->attempt};
    root->opt.on_event(root->opt.ud, &ev);
  }
  return OB_OK;
}

int ob_emit_lua(lua_State *L) {
  luaL_checkany(L, 1);
  ob_crun *c = ob_crun_of(L);
  if (!c)
    return luaL_error(L, "obelus.emit must be called from a tool's own coroutine (its run "
                         "function) while its call runs, not from outside a tool, from a "
                         "coroutine the tool made, or after the attempt ended");
  ob_error err;
  lua_settop(L, 1);
  ob_value *v = ob_lua_to_value_named(L, 1, "the value", &err);
  if (!v)
    return luaL_error(L, "obelus.emit: %s", err.msg);
  int rc = emit(c, v, &err);
  ob_unref(v);
  if (rc != OB_OK)
    return luaL_error(L, "obelus.emit: %s", err.msg);
  return 0;
}

int ob_call_emit(ob_call_handle *h, const ob_value *value, ob_error *err) {
  ob_crun *c = (ob_crun *)h;
  if (c->state != OB_CALL_RUNNING)
    return ob_error_set(err, OB_EINVAL, 0, "the call has completed: nothing more is sent");
  return emit(c, value, err);
}
