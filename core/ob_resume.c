/* ob_resume.c -- taking a run up again from its journal (`obelus resume`).
 *
 * The journal (ob_record.c) holds the run's log and, between its messages,
 * records of what happened. Resuming reads it once, in order:
 *   - the plan message (line 1) gives the plan as it ran; the "run" record,
 *     the tool files it ran with;
 *   - a message is COMMITTED when some record follows it: a call's outputs
 *     are written just before its "settled" record, so messages after the
 *     last record belong to a call that never settled (the process died
 *     between them) and are dropped, and the file is cut back to the end of
 *     the last record so that the lines appended next follow a whole run;
 *   - a torn last line (no newline, not JSON) is reported and cut too;
 *   - "settled" records say which calls are done, failed or skipped: they
 *     are never run again; "start" records without a "settled" one are the
 *     calls that were in flight: they run again (at least once: a tool may
 *     see its own earlier attempt's effects), and ctx.attempt says which
 *     attempt this is, counting the lost ones.
 * The log is rebuilt from the committed messages (in the same order, so
 * every read gives what it gave), the calls' states from the records, and
 * the run goes on from there, appending to the same journal. A run that
 * ended ({"journal":"end"}) runs nothing: its output is printed again.
 *
 * A delegated plan's own calls (records with a "scope") are not yet taken
 * up: a delegating call that had not settled runs its plan again from the
 * start. `obelus loop` journals are refused for now.
 *
 * Costs: one pass over the journal, each line parsed once; the log rebuilt
 * at append speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ob_journal.h"
#include "ob_wal.h"
#include "ob_map.h"
#include "ob_mem.h"
#include "ob_resume.h"
#include "ob_sched.h"

struct ob_resume {
  char *path;
  ob_value *plan_msg;   /* the first line */
  ob_value *tools;      /* the run record's tool files, or NULL */
  ob_value *messages;   /* committed top-level messages, in order (the plan's first) */
  ob_map state;         /* call id -> "done"|"failed"|"skipped" (top-level records) */
  ob_map attempt;       /* call id -> last attempt started (as uintptr_t) */
  int ended, exit_status;
  long cut_at;          /* the length the file keeps (-1: all of it) */
  size_t lines;
};

static const char *str_member(const ob_value *o, const char *k) {
  ob_value *v = ob_object_get(o, k, strlen(k));
  return v && ob_typeof(v) == OB_STRING ? ob_string_ptr(v) : NULL;
}

static void resume_free(ob_resume *rs) {
  if (!rs)
    return;
  free(rs->path);
  ob_unref(rs->plan_msg);
  ob_unref(rs->tools);
  ob_unref(rs->messages);
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&rs->state, &i, &me))
    free(me->val);
  ob_map_free(&rs->state);
  ob_map_free(&rs->attempt);
  free(rs);
}

void ob_resume_free(ob_resume *rs) { resume_free(rs); }

/* One record of the top-level run (no scope). */
static int take_record(ob_resume *rs, const ob_value *v, const char *what) {
  const char *id = str_member(v, "id");
  if (ob_object_get(v, "step", 4))
    return -1; /* a planning loop's step: not taken up yet */
  if (!strcmp(what, "run")) {
    ob_value *t = ob_object_get(v, "tools", 5);
    ob_unref(rs->tools);
    rs->tools = t ? ob_ref(t) : NULL;
  } else if (!strcmp(what, "start") && id) {
    ob_value *a = ob_object_get(v, "attempt", 7);
    uintptr_t n = a && ob_typeof(a) == OB_INT ? (uintptr_t)ob_int_value(a) : 1;
    ob_map_put(&rs->attempt, id, strlen(id), (void *)n);
  } else if (!strcmp(what, "settled") && id) {
    const char *st = str_member(v, "state");
    if (st) {
      char *old = ob_map_put(&rs->state, id, strlen(id), ob_xstrdup(st));
      free(old);
    }
  } else if (!strcmp(what, "end")) {
    ob_value *x = ob_object_get(v, "exit", 4);
    rs->ended = 1;
    rs->exit_status = x && ob_typeof(x) == OB_INT ? (int)ob_int_value(x) : 0;
  }
  return 0;
}

ob_resume *ob_resume_load(const char *path, ob_error *err) {
  ob_buf b;
  ob_buf_init(&b);
  if (ob_read_file(path, &b, err) != OB_OK) {
    ob_buf_free(&b);
    return NULL;
  }
  ob_resume *rs = calloc(1, sizeof *rs);
  if (!rs)
    abort();
  rs->path = ob_xstrdup(path);
  rs->messages = ob_array();
  rs->cut_at = -1;
  ob_map_init(&rs->state);
  ob_map_init(&rs->attempt);
  ob_value *pending = ob_array(); /* messages since the last record */
  int ok = 1, seen_run = 0;
  const char *p = b.data, *end = b.data + b.len;
  size_t line = 0;
  while (ok && p < end) {
    line++;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *stop = nl ? nl : end;
    const char *q = p;
    while (q < stop && strchr(" \t\r", *q))
      q++;
    if (q == stop) {
      p = nl ? nl + 1 : end;
      continue;
    }
    ob_error e;
    ob_value *v = ob_json_parse(p, (size_t)(stop - p), &e);
    if (!v && !nl) {
      fprintf(stderr, "obelus: %s:%zu: the last line is torn (the process died while writing "
                      "it); ignored\n", path, line);
      break;
    }
    if (!v || ob_typeof(v) != OB_OBJECT) {
      ob_error_set(err, OB_EJSON, line, "%s:%zu: %s", path, line,
                   v ? "a line is a JSON object (a message or a record)" : e.msg);
      ob_unref(v);
      ok = 0;
      break;
    }
    if (line == 1) {
      const char *type = str_member(v, "type");
      if (!type || strcmp(type, "plan") || !ob_object_get(v, "plan", 4)) {
        ob_error_set(err, OB_EINVAL, 1, "%s:1: not a journal: its first line is not a plan "
                                        "message (obelus run --journal writes one)", path);
        ob_unref(v);
        ok = 0;
        break;
      }
      rs->plan_msg = ob_ref(v);
    }
    const char *what = str_member(v, "journal");
    if (!what) {
      pending = ob_array_push(pending, v); /* committed when a record follows */
    } else {
      if (!ob_object_get(v, "scope", 5)) {
        if (take_record(rs, v, what) < 0) {
          ob_error_set(err, OB_EINVAL, line, "%s:%zu: a journal of obelus loop: resuming the "
                                             "planning loop is not built yet", path, line);
          ok = 0;
        }
        seen_run |= !strcmp(what, "run");
      }
      if (strcmp(what, "msg")) { /* a record of the run's progress commits what came before */
        for (size_t i = 0; i < ob_array_len(pending); i++)
          rs->messages = ob_array_push(rs->messages, ob_ref(ob_array_get(pending, i)));
        ob_unref(pending);
        pending = ob_array();
        rs->cut_at = (long)(stop + 1 - b.data);
      }
      ob_unref(v);
    }
    p = nl ? nl + 1 : end;
  }
  rs->lines = line;
  if (ok && !rs->plan_msg) {
    ob_error_set(err, OB_EINVAL, 0, "%s: empty: not a journal", path);
    ok = 0;
  }
  if (ok && !seen_run) {
    ob_error_set(err, OB_EINVAL, 0, "%s: the run never began (the journal ends before its "
                                    "\"run\" record): run the plan again", path);
    ok = 0;
  }
  if (ok && rs->cut_at == (long)b.len)
    rs->cut_at = -1; /* nothing to cut */
  size_t dropped = ob_array_len(pending);
  if (ok && dropped)
    fprintf(stderr, "obelus resume: %s: %zu message%s of a call that never settled dropped\n",
            path, dropped, dropped == 1 ? "" : "s");
  ob_unref(pending);
  ob_buf_free(&b);
  if (!ok) {
    resume_free(rs);
    return NULL;
  }
  return rs;
}

const ob_value *ob_resume_plan(const ob_resume *rs) {
  return ob_object_get(rs->plan_msg, "plan", 4);
}

const char *ob_resume_plan_file(const ob_resume *rs) {
  const char *f = str_member(rs->plan_msg, "file");
  return f ? f : "(plan)";
}

int ob_resume_ended(const ob_resume *rs, int *exit_status) {
  if (rs->ended && exit_status)
    *exit_status = rs->exit_status;
  return rs->ended;
}

const ob_value *ob_resume_tool_files(const ob_resume *rs) { return rs->tools; }

size_t ob_resume_changes(const ob_resume *rs, const ob_engine *e, ob_buf *why) {
  size_t n = 0;
  /* the plan file, when it is still there */
  const char *file = ob_resume_plan_file(rs);
  if (access(file, R_OK) == 0) {
    ob_error err;
    ob_value *now = ob_json_parse_file(file, &err);
    if (!now || !ob_equal(now, ob_resume_plan(rs))) {
      ob_buf_addf(why, "%sthe plan file %s changed since the run", n++ ? "; " : "", file);
    }
    ob_unref(now);
  }
  ob_value *now = ob_engine_tool_files(e);
  const ob_value *then = rs->tools;
  for (size_t i = 0; then && i < ob_array_len(then); i++) {
    const ob_value *t = ob_array_get(then, i);
    const char *f = str_member(t, "file"), *h = str_member(t, "hash");
    const char *h2 = NULL;
    for (size_t k = 0; f && k < ob_array_len(now); k++) {
      const char *f2 = str_member(ob_array_get(now, k), "file");
      if (f2 && !strcmp(f, f2))
        h2 = str_member(ob_array_get(now, k), "hash");
    }
    if (!h2)
      ob_buf_addf(why, "%sthe tool file %s is not loaded now", n++ ? "; " : "", f ? f : "?");
    else if (!h || strcmp(h, h2))
      ob_buf_addf(why, "%sthe tool file %s changed since the run", n++ ? "; " : "", f);
  }
  for (size_t k = 0; k < ob_array_len(now); k++) {
    const char *f2 = str_member(ob_array_get(now, k), "file");
    int known = 0;
    for (size_t i = 0; then && f2 && i < ob_array_len(then); i++) {
      const char *f = str_member(ob_array_get(then, i), "file");
      known |= f && !strcmp(f, f2);
    }
    if (!known)
      ob_buf_addf(why, "%sthe tool file %s was not loaded in the run", n++ ? "; " : "",
                  f2 ? f2 : "?");
  }
  ob_unref(now);
  return n;
}

int ob_resume_cut(const ob_resume *rs, ob_error *err) {
  if (rs->cut_at < 0)
    return OB_OK;
  if (truncate(rs->path, rs->cut_at) != 0)
    return ob_error_set(err, OB_EIO, 0, "%s: cannot cut the journal back to its last record",
                        rs->path);
  return OB_OK;
}

ob_run *ob_resume_run(ob_engine *e, ob_plan *plan, ob_resume *rs, const ob_run_options *opt,
                      ob_error *err) {
  ob_run *r = ob_run_alloc(e, plan, opt);
  for (size_t i = 0; i < ob_array_len(rs->messages); i++) {
    ob_error e2;
    if (ob_log_append(r->log, ob_array_get(rs->messages, i), &e2) < 0) {
      ob_error_set(err, OB_EINVAL, i, "%s: message %zu does not go back into the log: %s",
                   rs->path, i, e2.msg);
      ob_run_free(r);
      return NULL;
    }
  }
  r->journaled = ob_log_len(r->log); /* they are in the journal already */
  /* the calls that settled: their states, and their followers' counts */
  for (size_t i = 0; i < plan->ncalls; i++) {
    ob_crun *c = &r->calls[i];
    const char *id = c->call->id;
    uintptr_t tries = (uintptr_t)ob_map_get(&rs->attempt, id, strlen(id));
    c->attempt = (uint32_t)tries;
    const char *st = ob_map_get(&rs->state, id, strlen(id));
    if (!st) {
      if (tries && !rs->ended)
        fprintf(stderr, "obelus resume: call %s (%s) had started (attempt %u) and did not "
                        "settle: it runs again (attempt %u)\n",
                id, c->call->tool_name, (unsigned)tries, (unsigned)tries + 1);
      continue;
    }
    c->state = !strcmp(st, "done")     ? OB_CALL_DONE
               : !strcmp(st, "failed") ? OB_CALL_FAILED
                                       : OB_CALL_SKIPPED;
    if (!c->detached)
      r->settled_awaited++;
    if (c->state == OB_CALL_FAILED && !c->detached)
      r->failed = 1;
    for (size_t u = 0; u < c->call->nusers; u++)
      r->calls[c->call->users[u]].pending--;
  }
  /* a call skipped because something upstream failed tells its followers so
   * (the plan's order need not be the graph's: until nothing changes) */
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t i = 0; i < plan->ncalls; i++) {
      ob_crun *c = &r->calls[i];
      for (size_t d = 0; c->state == OB_CALL_SKIPPED && !c->upstream_failed && d < c->call->ndeps;
           d++) {
        const ob_crun *dep = &r->calls[c->call->deps[d]];
        if (dep->state == OB_CALL_FAILED ||
            (dep->state == OB_CALL_SKIPPED && dep->upstream_failed))
          changed = c->upstream_failed = 1;
      }
    }
  }
  if (rs->ended) /* it ran to its end: nothing runs again */
    for (size_t i = 0; i < plan->ncalls; i++)
      if (r->calls[i].state == OB_CALL_WAITING && r->calls[i].detached)
        r->calls[i].state = OB_CALL_SKIPPED;
  if (r->opt.journal) {
    static const char line[] = "{\"journal\":\"resume\"}";
    ob_wal_add(r->opt.journal, line, sizeof line - 1);
    ob_wal_flush(r->opt.journal);
  }
  return r;
}
