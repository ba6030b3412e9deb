/* ob_ctool.c -- tools written in C: the handle a C tool completes its call with.
 *
 * A C tool's function gets the call's record itself as its handle
 * (ob_call_handle); it completes once, then or later from any callback on
 * the loop. A handle of a cancelled run does nothing when completed. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ob_sched.h"

void ob_call_complete(ob_call_handle *h, size_t alt, const ob_value *value, const char *error) {
  ob_crun *c = (ob_crun *)h;
  if (c->state != OB_CALL_RUNNING || c->run->cancelled || c->retry_wait)
    return; /* spent, the run was cancelled, or the attempt timed out */
  if (error) {
    ob_crun_attempt_failed(c, error, NULL);
    return;
  }
  if (!c->call->has_output) {
    ob_crun_settle(c, OB_CALL_DONE, NULL);
    return;
  }
  if (alt >= c->call->output.n) {
    char why[128];
    snprintf(why, sizeof why, "the tool chose alternative %zu; the _outputPath has %zu", alt + 1,
             c->call->output.n);
    ob_crun_fail(c, "runtime", why);
    return;
  }
  ob_crun_write_alt(c, alt, value ? (ob_value *)value : ob_null());
}

const char *ob_call_handle_id(const ob_call_handle *h) { return ((const ob_crun *)h)->call->id; }
const char *ob_call_handle_tool(const ob_call_handle *h) {
  return ((const ob_crun *)h)->call->tool_name;
}

ob_run *ob_call_handle_run(const ob_call_handle *h) {
  ob_run *r = ((const ob_crun *)h)->run;
  while (r->parent) /* a delegated plan's run belongs to its caller's */
    r = r->parent->run;
  return r;
}

uint32_t ob_call_handle_attempt(const ob_call_handle *h) { return ((const ob_crun *)h)->attempt; }
