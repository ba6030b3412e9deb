/* ob_resume.c -- taking a run up again from its journal (`obelus resume`).
 *
 * The journal (its format: ob_journal.h; ob_record.c writes it) holds the
 * run's log and, between its messages, records of what happened, read through
 * ob_jrec_parse (a line with a "type" is a message). Resuming reads it once, in
 * order:
 *   - the plan message (line 1) gives the plan as it ran; the "run" record,
 *     the tool files it ran with;
 *   - a message is COMMITTED when some record follows it: a call's outputs
 *     are written just before its "settled" record, so messages after the
 *     last record belong to a call that never settled (the process died
 *     between them) and are dropped, and the file is cut back to the end of
 *     the last record so that the lines appended next follow a whole run;
 *   - a torn last line (no newline, not JSON) is reported and cut too, and so
 *     are the zeros a killed run's writer left after its lines (ob_journal_len);
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
 * The journal is read as PARTS, one per run it holds: the top-level run
 * (key ""), each delegated plan's run (its records' "scope": "#1", "#1/#0")
 * and each of `obelus loop`'s step runs ("step N"). A delegating call that
 * had not settled takes its plan's run up from that part (ob_delegate.c),
 * so the sub-plan's completed calls are not run again; a retry record of
 * the delegating call forgets its earlier sub-run (the next attempt starts
 * the plan afresh). A loop's journal is resumed from the step it reached
 * (ob_cmd_loop.c asks the planner on from there).
 *
 * Costs: one pass over the journal, each line parsed once; the log rebuilt
 * at append speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/ob_journal.h"
#include "log/ob_wal.h"
#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "engine/ob_resume.h"
#include "engine/ob_sched.h"

/* The journal line of each message of a list (the n-th message's at v[n]): an error
 * about a message names its line, as every reader of the journal does. */
typedef struct line_list {
  size_t *v, n, cap;
} line_list;

static void lines_push(line_list *l, size_t line) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->v = ob_xrealloc(l->v, l->cap * sizeof *l->v);
  }
  l->v[l->n++] = line;
}

static size_t line_at(const line_list *l, size_t i) { return i < l->n ? l->v[i] : 0; }

/* What the journal says of one run: the top-level run (key ""), a delegated
 * plan's (its scope, "#1", "#1/#0", "step 2/#1") or a loop step's ("step 2"). */
typedef struct part {
  ob_value *messages; /* a delegated run's committed messages (its plan message first) */
  line_list message_lines;
  ob_value *plan_msg; /* a delegated run's or a step's plan message, or NULL */
  ob_map state;       /* call id -> "done"|"failed"|"skipped" */
  ob_map attempt;     /* call id -> last attempt started (as uintptr_t) */
  ob_map line;        /* call id -> the line of its first record (as uintptr_t) */
  ob_map bare;        /* call id -> the line of a "settled" record with no message before */
  size_t first_line;  /* the line of its first record */
  int ran;            /* its "run" record was seen */
  int used;           /* taken up already (ob_resume_run): a later attempt starts afresh */
} part;

struct ob_resume {
  char *path;
  size_t torn_line;     /* the torn last line's number, ignored (0: none): the caller says it */
  size_t dropped;       /* messages of a call that never settled, dropped: the caller says it */
  ob_value *plan_msg;   /* the first line */
  ob_value *tools;      /* the run record's tool files, or NULL */
  ob_value *messages;   /* committed top-level messages, in order (the plan's first) */
  line_list message_lines;
  ob_map parts;         /* key -> part* */
  ob_value *loop;       /* the loop record ({"journal":"loop",...}), or NULL */
  ob_value *output;     /* the end record's output (a loop's), or NULL */
  ob_value *last_plan;  /* the last committed top-level plan message */
  int last_step;        /* the last loop step the journal tells of (0: none) */
  int ended, exit_status;
  long cut_at;          /* the length the file keeps (-1: all of it) */
  uint64_t whole;       /* the length of its complete lines, as read */
  size_t lines;
  ob_journal_subs subs; /* delegated runs' messages by scope, to rebuild "_log" */
};

static const char *str_member(const ob_value *o, const char *k) {
  ob_value *v = ob_object_get(o, k, strlen(k));
  return v && ob_typeof(v) == OB_STRING ? ob_string_ptr(v) : NULL;
}

/* Whether o's member k is a string holding a NUL byte: as C text it would be cut
 * short (call "a\0junk" taken as call a, tool file "t.lua\0junk" loading t.lua). */
static int nul_member(const ob_value *o, const char *k) {
  ob_value *v = o && ob_typeof(o) == OB_OBJECT ? ob_object_get(o, k, strlen(k)) : NULL;
  return v && ob_typeof(v) == OB_STRING && memchr(ob_string_ptr(v), '\0', ob_string_len(v));
}

static void part_free(part *pt) {
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&pt->state, &i, &me))
    free(me->val);
  ob_map_free(&pt->state);
  ob_map_free(&pt->attempt);
  ob_map_free(&pt->line);
  ob_map_free(&pt->bare);
  ob_unref(pt->messages);
  free(pt->message_lines.v);
  ob_unref(pt->plan_msg);
  free(pt);
}

static part *part_get(ob_resume *rs, const char *key, int make) {
  part *pt = ob_map_get(&rs->parts, key, strlen(key));
  if (!pt && make) {
    pt = ob_xcalloc(1, sizeof *pt);
    pt->messages = ob_array();
    ob_map_init(&pt->state);
    ob_map_init(&pt->attempt);
    ob_map_init(&pt->line);
    ob_map_init(&pt->bare);
    ob_map_put(&rs->parts, key, strlen(key), pt);
  }
  return pt;
}

/* A delegating call (key/id) tries again: what its earlier attempt's plan did
 * (the part id names, and those nested in it) is no longer what runs. */
static void parts_forget(ob_resume *rs, const char *key, const char *id) {
  ob_buf child;
  ob_buf_init(&child);
  ob_buf_addf(&child, "%s%s%s", key, *key ? "/" : "", id);
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&rs->parts, &i, &me)) {
    const char *k = me->key;
    if (!strncmp(k, child.data, child.len) && (!k[child.len] || k[child.len] == '/')) {
      part *pt = me->val;
      pt->ran = 0;
      pt->used = 1;
    }
  }
  ob_buf_free(&child);
}

static void resume_free(ob_resume *rs) {
  if (!rs)
    return;
  free(rs->path);
  ob_unref(rs->plan_msg);
  ob_unref(rs->tools);
  ob_unref(rs->messages);
  free(rs->message_lines.v);
  ob_unref(rs->loop);
  ob_unref(rs->output);
  ob_unref(rs->last_plan);
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&rs->parts, &i, &me))
    part_free(me->val);
  ob_map_free(&rs->parts);
  ob_journal_subs_free(&rs->subs);
  free(rs);
}

void ob_resume_free(ob_resume *rs) { resume_free(rs); }

size_t ob_resume_torn(const ob_resume *rs) { return rs->torn_line; }
size_t ob_resume_dropped(const ob_resume *rs) { return rs->dropped; }

void ob_resume_say(ob_engine *e, const ob_resume *rs) {
  if (rs->torn_line)
    ob_engine_note(e, "torn", NULL, "%s:%zu: the last line is torn (the process died while "
                   "writing it); ignored", rs->path, rs->torn_line);
  if (rs->dropped)
    ob_engine_note(e, "dropped", NULL, "resume: %s: %zu message%s of a call that never settled "
                   "dropped", rs->path, rs->dropped, rs->dropped == 1 ? "" : "s");
}

const char *ob_resume_path(const ob_resume *rs) { return rs->path; }

/* One record of the run's progress (not a "msg"); key: the run it is of. */
static void take_record(ob_resume *rs, const char *key, const ob_jrec *rec, size_t line,
                        size_t nbefore) {
  part *pt = part_get(rs, key, 1);
  const char *id = rec->id;
  if (!pt->first_line)
    pt->first_line = line;
  if (id && !ob_map_get(&pt->line, id, strlen(id)))
    ob_map_put(&pt->line, id, strlen(id), (void *)(uintptr_t)line);
  if (id && rec->kind == OB_JREC_SETTLED) {
    ob_map_put(&pt->bare, id, strlen(id), nbefore ? NULL : (void *)(uintptr_t)line);
  }
  int scoped = rec->scope_path || rec->scope;
  if (rec->step > rs->last_step && !scoped)
    rs->last_step = (int)rec->step;
  if (rec->kind == OB_JREC_RUN) {
    pt->ran = 1;
    pt->used = 0;
    if (!*key) {
      ob_unref(rs->tools);
      rs->tools = rec->tools ? ob_ref((ob_value *)rec->tools) : NULL;
      if (rec->loop) {
        ob_unref(rs->loop);
        rs->loop = ob_ref((ob_value *)rec->loop);
      }
    } else if (rec->step && !scoped && rs->last_plan) {
      ob_unref(pt->plan_msg); /* a loop step's plan message comes just before */
      pt->plan_msg = ob_ref(rs->last_plan);
    } else if (ob_array_len(pt->messages)) {
      ob_unref(pt->plan_msg); /* a delegated plan's is the first of its own log */
      pt->plan_msg = ob_ref(ob_array_get(pt->messages, 0));
    }
  } else if (rec->kind == OB_JREC_START && id) {
    uintptr_t n = rec->has_attempt ? (uintptr_t)rec->attempt : 1;
    ob_map_put(&pt->attempt, id, strlen(id), (void *)n);
  } else if (rec->kind == OB_JREC_RETRY && id) {
    parts_forget(rs, key, id);
  } else if (rec->kind == OB_JREC_SETTLED && id) {
    const char *st = rec->state;
    if (st) {
      char *old = ob_map_put(&pt->state, id, strlen(id), ob_xstrdup(st));
      free(old);
    }
  } else if (rec->kind == OB_JREC_END && !*key) {
    rs->ended = 1;
    rs->exit_status = rec->has_exit ? (int)rec->exit : 0;
    ob_unref(rs->output);
    rs->output = rec->output ? ob_ref((ob_value *)rec->output) : NULL;
  }
}

/* The run a record is of: its scope, else its loop step ("step N"), else "". */
static void record_key(const ob_jrec *rec, ob_buf *key) {
  key->len = 0;
  if (rec->scope_path)
    ob_buf_addf(key, "%s", rec->scope_path);
  else if (rec->step)
    ob_buf_addf(key, "step %lld", (long long)rec->step);
}

/* The record a line is, or OB_JREC_NONE (a message). */
static ob_jrec_kind kind_of(const ob_value *v, ob_jrec *rec) {
  ob_jrec scratch;
  rec = rec ? rec : &scratch;
  return ob_jrec_parse(v, rec, NULL) > 0 ? rec->kind : OB_JREC_NONE;
}

/* Messages since the last record are committed: each to its run's log (a
 * "_log" that names a scope gets that scope's messages back: ob_journal_subs). */
static void commit(ob_resume *rs, ob_value *pending, line_list *pending_lines) {
  for (size_t i = 0; i < ob_array_len(pending); i++) {
    ob_value *m = ob_array_get(pending, i);
    ob_jrec rec;
    const char *scope = kind_of(m, &rec) == OB_JREC_MSG ? rec.scope_path : NULL;
    if (scope) {
      const ob_value *inner = rec.msg;
      part *pt = part_get(rs, scope, 1);
      if (inner) {
        pt->messages = ob_array_push(pt->messages, ob_journal_subs_add(&rs->subs, scope, inner));
        lines_push(&pt->message_lines, line_at(pending_lines, i));
      }
      continue;
    }
    m = ob_journal_subs_expand(&rs->subs, m);
    rs->messages = ob_array_push(rs->messages, m);
    lines_push(&rs->message_lines, line_at(pending_lines, i));
    const char *type = str_member(m, "type");
    if (type && !strcmp(type, "plan")) {
      ob_unref(rs->last_plan);
      rs->last_plan = ob_ref(m);
    }
  }
}

/* The journal's consistency, as a record (v, what, at line) comes after the messages
 * since the last one (pending): a call's messages are written just before its
 * "settled" record (ob_record.c), a run's first ones (plan, context, inputs) just
 * before its "run" record, and a loop step's problems before its "step" record, so
 * messages before any other record, or before another run's record, mean a record
 * was lost or the journal was edited; and a failed call has its error message.
 * 1, or 0 with err naming the line. (That the ids and scopes named are the plan's,
 * and that a done call with an output has its message, is checked against the plans
 * before anything runs, ob_resume_verify, and again as each run is taken up,
 * ob_resume_run.) */
/* Whether pending holds an error message (ob_crun_fail's: kind "error", naming a call;
 * a delegated run's wrapped in its "msg" line). */
static int has_error(const ob_value *pending) {
  for (size_t i = 0; i < ob_array_len(pending); i++) {
    const ob_value *m = ob_array_get(pending, i);
    ob_jrec rec;
    if (kind_of(m, &rec) == OB_JREC_MSG) {
      m = rec.msg;
      if (!m)
        continue;
    }
    const char *kind = str_member(m, "kind");
    ob_value *data = ob_object_get(m, "data", 4);
    if (kind && !strcmp(kind, "error") && data && str_member(data, "id"))
      return 1;
  }
  return 0;
}

static int consistent(const ob_resume *rs, const ob_value *pending, const ob_value *v,
                      const ob_jrec *rec, size_t line, ob_error *err) {
  size_t n = ob_array_len(pending);
  const char *scope = rec->scope_path, *what = rec->what;
  const char *nul = nul_member(v, "id") ? "id" : nul_member(v, "scope") ? "scope"
                    : nul_member(v, "state") ? "state" : NULL;
  if (nul)
    return ob_error_set(err, OB_EINVAL, line, "%s:%zu: inconsistent journal: its record's "
                        "\"%s\" holds a NUL byte (\\u0000): no call, scope or state of a plan "
                        "does", rs->path, line, nul), 0;
  const ob_value *tools = rec->kind == OB_JREC_RUN ? rec->tools : NULL;
  for (size_t i = 0; tools && ob_typeof(tools) == OB_ARRAY && i < ob_array_len(tools); i++)
    if (nul_member(ob_array_get(tools, i), "file"))
      return ob_error_set(err, OB_EINVAL, line, "%s:%zu: inconsistent journal: the run's "
                          "tool file %zu holds a NUL byte (\\u0000): no file name does",
                          rs->path, line, i + 1), 0;
  if (rec->kind == OB_JREC_SETTLED) {
    const char *st = rec->state;
    if (!rec->id || !st ||
        (strcmp(st, "done") && strcmp(st, "failed") && strcmp(st, "skipped")))
      return ob_error_set(err, OB_EINVAL, line, "%s:%zu: inconsistent journal: a \"settled\" "
                          "record without a call id or a state (done, failed, skipped)",
                          rs->path, line), 0;
    if (!strcmp(st, "failed") && !has_error(pending))
      return ob_error_set(err, OB_EINVAL, line, "%s:%zu: inconsistent journal: call %s failed "
                          "but its error message is not before its \"settled\" record (a "
                          "line deleted, or its state edited?)", rs->path, line,
                          rec->id), 0;
  }
  if (!n)
    return 1;
  if (rec->kind != OB_JREC_SETTLED && rec->kind != OB_JREC_RUN && rec->kind != OB_JREC_STEP &&
      rec->kind != OB_JREC_FORK) /* a fork's first record follows the plan; its last, its changes */
    return ob_error_set(err, OB_EINVAL, line, "%s:%zu: inconsistent journal: %zu message%s "
                        "before this \"%s\" record belong%s to no call: a call's messages "
                        "come just before its \"settled\" record (one deleted?)", rs->path,
                        line, n, n == 1 ? "" : "s", what, n == 1 ? "s" : ""), 0;
  for (size_t i = 0; i < n; i++) {
    const ob_value *m = ob_array_get(pending, i);
    ob_jrec mr;
    const char *ms = kind_of(m, &mr) == OB_JREC_MSG ? mr.scope_path : NULL;
    if ((ms == NULL) != (scope == NULL) || (ms && strcmp(ms, scope)))
      return ob_error_set(err, OB_EINVAL, line, "%s:%zu: inconsistent journal: the record is "
                          "of %s%s but the message%s before it of %s%s (a record deleted?)",
                          rs->path, line, scope ? "scope " : "the top-level run",
                          scope ? scope : "", n == 1 ? "" : "s", ms ? "scope " : "the top-level run",
                          ms ? ms : ""), 0;
  }
  return 1;
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
  ob_map_init(&rs->parts);
  ob_journal_subs_init(&rs->subs);
  ob_journal_scopes scopes; /* the delegated runs' scope numbers, to their paths */
  ob_journal_scopes_init(&scopes);
  ob_value *pending = ob_array(); /* messages since the last record */
  line_list pending_lines = {0};   /* their lines */
  ob_buf key;
  ob_buf_init(&key);
  int ok = 1;
  const char *p = b.data, *end = b.data + ob_journal_len(b.data, b.len);
  const char *last_nl = end > p ? memrchr(p, '\n', (size_t)(end - p)) : NULL;
  rs->whole = last_nl ? (uint64_t)(last_nl + 1 - b.data) : 0;
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
    if (!nl) { /* no newline: the process died while writing it, whatever it holds */
      rs->torn_line = line;
      break;
    }
    ob_error e;
    ob_value *v = ob_json_parse(p, (size_t)(stop - p), &e);
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
    int taken = ob_journal_scopes_take(&scopes, &v, path, line, err);
    if (taken < 0) {
      ob_unref(v);
      ok = 0;
      break;
    }
    if (taken) { /* a scope's definition: no message, no commit */
      p = nl + 1;
      continue;
    }
    ob_jrec rec;
    ob_jrec_kind kind = kind_of(v, &rec);
    if (kind == OB_JREC_NONE || kind == OB_JREC_MSG) {
      pending = ob_array_push(pending, v); /* committed when a record follows */
      lines_push(&pending_lines, line);
    } else { /* a record of the run's progress commits what came before */
      record_key(&rec, &key);
      if (!consistent(rs, pending, v, &rec, line, err)) {
        ob_unref(v);
        ok = 0;
        break;
      }
      size_t nbefore = ob_array_len(pending);
      commit(rs, pending, &pending_lines);
      pending_lines.n = 0;
      ob_unref(pending);
      pending = ob_array();
      rs->cut_at = (long)(stop + 1 - b.data);
      take_record(rs, key.len ? key.data : "", &rec, line, nbefore);
      ob_unref(v);
    }
    p = nl ? nl + 1 : end;
  }
  ob_buf_free(&key);
  ob_journal_scopes_free(&scopes);
  rs->lines = line;
  part *top = part_get(rs, "", 0);
  if (ok && !rs->plan_msg) {
    ob_error_set(err, OB_EINVAL, 0, "%s: empty: not a journal", path);
    ok = 0;
  }
  if (ok && (!top || !top->ran)) {
    ob_error_set(err, OB_EINVAL, 0, "%s: the run never began (the journal ends before its "
                                    "\"run\" record): run the plan again", path);
    ok = 0;
  }
  if (ok && rs->cut_at == (long)b.len)
    rs->cut_at = -1; /* nothing to cut */
  size_t dropped = ob_array_len(pending);
  if (ok)
    rs->dropped = dropped;
  ob_unref(pending);
  free(pending_lines.v);
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

/* The plan in a plan file as it is now, or NULL when there is none to compare: a file
 * gone, unreadable, or not a regular one (a FIFO the run read its plan from: opening it
 * again would wait for a writer forever; the journal's plan is what resumes). A file
 * that is there but does not parse is null, unequal to any plan. */
static ob_value *plan_now(const char *file) {
  ob_error err;
  if (access(file, R_OK) != 0 || ob_file_check_regular(file, &err) != OB_OK)
    return NULL;
  ob_buf b;
  ob_buf_init(&b);
  ob_value *v = NULL;
  if (ob_read_regular_file(file, &b, &err) == OB_OK)
    v = ob_json_parse(b.data ? b.data : "", b.len, &err);
  ob_buf_free(&b);
  return v ? v : ob_null();
}

size_t ob_resume_changes(const ob_resume *rs, const ob_engine *e, ob_buf *why) {
  size_t n = 0;
  /* the plan file, when it is still there */
  const char *file = ob_resume_plan_file(rs);
  ob_value *now_plan = plan_now(file);
  if (now_plan && !ob_equal(now_plan, ob_resume_plan(rs)))
    ob_buf_addf(why, "%sthe plan file %s changed since the run", n++ ? "; " : "", file);
  ob_unref(now_plan);
  /* the delegated plans, as their runs began */
  size_t it = 0;
  ob_map_entry *me;
  while (ob_map_next(&rs->parts, &it, &me)) {
    part *pt = me->val;
    int delegated = *me->key && (strncmp(me->key, "step ", 5) || strchr(me->key, '/'));
    const char *pf = delegated && pt->plan_msg ? str_member(pt->plan_msg, "file") : NULL;
    const ob_value *pv = pt->plan_msg ? ob_object_get(pt->plan_msg, "plan", 4) : NULL;
    if (pv && ob_typeof(pv) == OB_OBJECT && ob_object_get(pv, "each", 4))
      continue; /* an _each call's copies: made by the engine, not read from pf */
    if (!pf || !pt->ran || (why->data && strstr(why->data, pf)))
      continue;
    ob_value *now = plan_now(pf);
    if (now && !ob_equal(now, ob_object_get(pt->plan_msg, "plan", 4)))
      ob_buf_addf(why, "%sthe delegated plan %s changed since the run", n++ ? "; " : "", pf);
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

void ob_resume_lengths(const ob_resume *rs, uint64_t *whole, uint64_t *keep) {
  *whole = rs->whole;
  *keep = rs->cut_at < 0 ? rs->whole : (uint64_t)rs->cut_at;
}

int ob_resume_has_run(const ob_resume *rs, const char *key) {
  part *pt = ob_map_get(&rs->parts, key, strlen(key));
  return pt && pt->ran && !pt->used && pt->plan_msg;
}

const ob_value *ob_resume_part_plan(const ob_resume *rs, const char *key) {
  part *pt = ob_map_get(&rs->parts, key, strlen(key));
  return pt && pt->plan_msg ? ob_object_get(pt->plan_msg, "plan", 4) : NULL;
}

const ob_value *ob_resume_loop(const ob_resume *rs) { return rs->loop; }
int ob_resume_last_step(const ob_resume *rs) { return rs->last_step; }
const ob_value *ob_resume_output(const ob_resume *rs) { return rs->output; }

int ob_resume_fill_log(const ob_resume *rs, ob_log *log, ob_error *err) {
  for (size_t i = 0; i < ob_array_len(rs->messages); i++) {
    ob_error e2;
    size_t line = line_at(&rs->message_lines, i);
    if (ob_log_append(log, ob_array_get(rs->messages, i), &e2) < 0)
      return ob_error_set(err, OB_EINVAL, line, "%s:%zu: the message does not go back into "
                          "the log: %s", rs->path, line, e2.msg);
  }
  return OB_OK;
}

static const ob_call *call_of(const ob_map *ids, const char *id, size_t len) {
  return ob_map_get(ids, id, len);
}

static int ids_check_with(const ob_resume *rs, const part *pt, const ob_map *plan,
                          const char *key, ob_error *err);

/* The part's records name calls of its plan, its delegated runs' scopes delegating
 * calls of it, and each call that settled done with an output has its message.
 * O(calls + records): the plan's ids in a map. */
static int ids_check(const ob_resume *rs, const part *pt, const ob_plan *plan, const char *key,
                     ob_error *err) {
  ob_map ids;
  ob_map_init(&ids);
  for (size_t i = 0; i < plan->ncalls; i++)
    ob_map_put(&ids, plan->calls[i].id, strlen(plan->calls[i].id), &plan->calls[i]);
  int rc = ids_check_with(rs, pt, &ids, key, err);
  ob_map_free(&ids);
  return rc;
}

static int ids_check_with(const ob_resume *rs, const part *pt, const ob_map *plan,
                          const char *key, ob_error *err) {
  size_t i = 0;
  ob_map_entry *me;
  const char *of = *key ? " of " : "", *which = *key ? key : "";
  while (ob_map_next(&pt->line, &i, &me)) {
    const ob_call *c = call_of(plan, me->key, strlen(me->key));
    if (!c)
      return ob_error_set(err, OB_EINVAL, (size_t)(uintptr_t)me->val,
                          "%s:%zu: inconsistent journal: its record names call %s%s%s, which "
                          "is not in the plan", rs->path, (size_t)(uintptr_t)me->val, me->key,
                          of, which);
  }
  i = 0;
  while (ob_map_next(&pt->bare, &i, &me)) {
    if (!me->val)
      continue; /* its last "settled" had its messages */
    const ob_call *c = call_of(plan, me->key, strlen(me->key));
    const char *st = ob_map_get(&pt->state, me->key, strlen(me->key));
    if (c && c->has_output && st && !strcmp(st, "done"))
      return ob_error_set(err, OB_EINVAL, (size_t)(uintptr_t)me->val,
                          "%s:%zu: inconsistent journal: call %s%s%s settled done, but its "
                          "output message is not before its \"settled\" record (a line "
                          "deleted?)", rs->path, (size_t)(uintptr_t)me->val, me->key, of, which);
  }
  size_t klen = strlen(key);
  i = 0;
  while (ob_map_next(&rs->parts, &i, &me)) {
    const char *k = me->key, *seg;
    if (*key) {
      if (strncmp(k, key, klen) || k[klen] != '/')
        continue;
      seg = k + klen + 1;
    } else {
      if (!strncmp(k, "step ", 5) || !*k)
        continue;
      seg = k;
    }
    const char *slash = strchr(seg, '/');
    size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
    const ob_call *c = call_of(plan, seg, len);
    if (!c || (!c->delegate && !c->each)) {
      size_t at = ((part *)me->val)->first_line;
      return ob_error_set(err, OB_EINVAL, at, "%s:%zu: inconsistent journal: its record's "
                          "scope %s names no delegating call of the plan%s%s", rs->path, at, k,
                          of, which);
    }
  }
  return OB_OK;
}

int ob_resume_verify(const ob_resume *rs, const ob_plan *plan, ob_error *err) {
  const part *pt = ob_map_get(&rs->parts, "", 0);
  if (pt && ids_check(rs, pt, plan, "", err) != OB_OK)
    return err->code;
  /* the delegated runs the resume may take up, against the plans they ran (their
   * own first messages): now, before anything runs, not once their delegating
   * call has started again */
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&rs->parts, &i, &me)) {
    const part *sp = me->val;
    if (!*me->key || !strncmp(me->key, "step ", 5) || !sp->ran || sp->used || !sp->plan_msg)
      continue;
    const ob_value *pv = ob_object_get(sp->plan_msg, "plan", 4);
    if (!pv)
      continue;
    ob_plan *sub = ob_plan_from_value(pv, me->key);
    int rc = ids_check(rs, sp, sub, me->key, err);
    ob_plan_free(sub);
    if (rc != OB_OK)
      return rc;
  }
  return OB_OK;
}

ob_run *ob_resume_run(ob_engine *e, ob_plan *plan, ob_resume *rs, const char *key,
                      const ob_run_options *opt, ob_error *err) {
  part *pt = part_get(rs, key, 1);
  int top = !*key;
  if (ob_run_count_calls(plan, opt, err) != OB_OK)
    return NULL;
  ob_run *r = ob_run_alloc(e, plan, opt);
  const ob_value *msgs = top ? rs->messages : pt->messages;
  for (size_t i = 0; !opt->log && i < ob_array_len(msgs); i++) {
    ob_error e2;
    size_t line = line_at(top ? &rs->message_lines : &pt->message_lines, i);
    if (ob_log_append(r->log, ob_array_get(msgs, i), &e2) < 0) {
      ob_error_set(err, OB_EINVAL, line, "%s:%zu: the message%s%s does not go back into the "
                   "log: %s", rs->path, line, top ? "" : " of ", key, e2.msg);
      ob_run_free(r);
      return NULL;
    }
  }
  if (ids_check(rs, pt, plan, key, err) != OB_OK) {
    ob_run_free(r);
    return NULL;
  }
  pt->used = 1;
  r->journaled = ob_log_len(r->log); /* they are in the journal already */
  /* the calls that settled: their states, and their followers' counts */
  for (size_t i = 0; i < plan->ncalls; i++) {
    ob_crun *c = &r->calls[i];
    const char *id = c->call->id;
    uintptr_t tries = (uintptr_t)ob_map_get(&pt->attempt, id, strlen(id));
    c->attempt = (uint32_t)tries;
    const char *st = ob_map_get(&pt->state, id, strlen(id));
    if (!st) {
      if (tries && !rs->ended) { /* said when the run starts (note "rerun") */
        ob_buf b = {0};
        ob_buf_addf(&b, "call %s (%s)%s%s had started (attempt %u) and did not settle: it "
                    "runs again (attempt %u)", id,
                    c->call->delegate ? c->call->delegate : c->call->tool_name,
                    top ? "" : " of ", key, (unsigned)tries, (unsigned)tries + 1);
        r->reruns = ob_xrealloc(r->reruns, (r->nreruns + 1) * sizeof *r->reruns);
        r->reruns[r->nreruns++] = (struct ob_rerun){c->call, b.data ? b.data : ob_xstrdup("")};
      }
      continue;
    }
    c->state = !strcmp(st, "done")     ? OB_CALL_DONE
               : !strcmp(st, "failed") ? OB_CALL_FAILED
                                       : OB_CALL_SKIPPED;
    if (!c->detached)
      r->settled_awaited++;
    else
      r->detached_unsettled--;
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
      if (r->calls[i].state == OB_CALL_WAITING && r->calls[i].detached) {
        r->calls[i].state = OB_CALL_SKIPPED;
        r->detached_unsettled--;
      }
  ob_buf *b = r->opt.journal && top ? ob_wal_line(r->opt.journal) : NULL;
  if (b) {
    ob_jrec_write(b, &(ob_jrec){.kind = OB_JREC_RESUME});
    ob_wal_line_ended(r->opt.journal);
  }
  if (r->opt.journal && top)
    ob_wal_flush(r->opt.journal);
  return r;
}
