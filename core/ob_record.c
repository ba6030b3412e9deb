/* ob_record.c -- the journal as a run writes it: its log and its progress, JSON Lines.
 *
 * A journal (--journal FILE, SPEC 8) is the run's log, one message a line,
 * first the plan message, and between the messages the RECORDS that let
 * `obelus resume` take the run up again: JSON objects with a "journal" member,
 * which the readers of logs skip (ob_journal.h), so `log`, `resolve --at N`
 * and `graph --journal` count messages only.
 *
 *   {"journal":"run","tools":[{"file":F,"hash":H,"size":N}...]}   after the
 *        plan, context and input messages: the run has begun; the identity
 *        of the tool files it runs with (resume refuses changed ones); an
 *        `obelus loop`'s has "loop":{"planner":{file,hash,size},"max_steps":N}
 *   {"journal":"step","step":N[,"problems":K]}   a loop's step N that ran no
 *        plan (the planner gave no calls, or calls with K problems)
 *   {"journal":"resume"}                       `obelus resume` took the run up
 *   {"journal":"start","id":I,"attempt":N,"t":T}     the call's tool starts
 *   {"journal":"retry","id":I,"attempt":N,"error":E,"delay_ms":D,"t":T}
 *                                              attempt N failed; another comes
 *   {"journal":"settled","id":I,"state":"done"|"failed"|"skipped","t":T}
 *        the call settled: its output or error messages are the lines just
 *        before (a fire-and-forget call or a thought: none)
 *   {"journal":"end","exit":X[,"output":V]}    the run (or loop, with the
 *        planner's output) ended with exit status X
 *
 * T is when it happened, in microseconds since the Unix epoch (the clock of the
 * messages' _date): what `log --format trace|otlp` draws attempts with.
 *
 * A delegated plan's run writes into the same journal: its records carry
 * "scope" (which names the delegating call's id, "#1/#0" when nested) and its
 * messages, which are its own log's and not the caller's, are wrapped:
 * {"journal":"msg","scope":S,"msg":M}. S is a number, defined once, before its
 * first line, by a record of its own:
 *   {"journal":"scope","n":S,"in":P,"call":I}   scope P's call I's run
 *   {"journal":"scope","n":S,"path":"#1/#0"}    a run whose caller has no scope
 *        (the top run's calls, a loop step's: "step 3/#1")
 * so that a line costs a few bytes however deep its plan is: the path written
 * on every line made a chain 1,000 plans deep a 31 MB journal (its square).
 * Numbers come from one counter of the process (runs on threads share the
 * file), and a process defines each scope it writes again (resume: the
 * numbers of the run before are not known), so a reader takes the last
 * definition of S before the line (ob_journal_scopes_take). The delegating call's output or error
 * message carries that run's messages in the log (_log); in the journal its
 * "_log" is {"scope":S} instead, naming the "msg" lines above it that hold
 * them, so each message is in the file once however deep plans delegate
 * (journals before this wrote the array, again at every level: depth 8 made
 * a leaf's message nine times over). A reader rebuilds the array: the
 * messages of scope S since its last plan message (a retried delegation
 * starts its plan again: ob_journal_load, ob_resume.c). The runs of `obelus
 * loop`'s steps share the loop's log: their messages are plain and their
 * records carry "step".
 *
 * Write-ahead: lines go to the stdio buffer as they happen and to the file
 * (one write) before any tool runs (ob_record_flush from ob_co.c and
 * ob_delegate.c), when the loop is about to wait (a prepare handle), and when
 * the run ends; so a call's completion is in the file before any call that
 * reads it starts, and a tool's start before the tool does anything. A
 * process killed mid-write leaves at most a torn last line, which readers
 * report and ignore. A flush that fails (ob_record_flush) cancels the run: no
 * tool starts unless its start record is in the file.
 *
 * Costs: two short records a call (start, settled) besides its messages,
 * printed straight into the journal's buffer (ob_wal_line: no copy, no
 * allocation per call); one write(2) per call that starts, at most. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ob_sched.h"

static void add_lit(ob_buf *b, const char *s) { ob_buf_add(b, s, strlen(s)); }

/* ,"t":<microseconds since the Unix epoch> */
static void add_time(ob_buf *b) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ob_buf_add(b, ",\"t\":", 5);
  ob_buf_add_uint(b, (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}
/* A string literal, its length known when compiling. */
#define ADD_LIT(b, s) ob_buf_add((b), (s), sizeof(s) - 1)

static _Atomic uint64_t scopes_made; /* the process's: runs on threads share a journal */

/* The run's scope number, its definition written first if this process has
 * not written it yet (and its callers' before it: a resumed run's children
 * may write before it does). Iterative: chains are as deep as --max-depth. */
static uint64_t scope_define(ob_run *r) {
  while (!r->scope_no) {
    ob_run *u = r; /* the outermost run of the chain not defined yet */
    while (u->opt.journal_in && !u->opt.journal_in->scope_no)
      u = u->opt.journal_in;
    ob_run *in = u->opt.journal_in;
    ob_buf *b = ob_wal_line(u->opt.journal);
    if (!b)
      return 0;
    uint64_t n = atomic_fetch_add(&scopes_made, 1) + 1;
    ADD_LIT(b, "{\"journal\":\"scope\",\"n\":");
    ob_buf_add_uint(b, n);
    if (in && u->opt.journal_call) {
      ADD_LIT(b, ",\"in\":");
      ob_buf_add_uint(b, in->scope_no);
      ADD_LIT(b, ",\"call\":");
      ob_json_write_string(b, u->opt.journal_call, strlen(u->opt.journal_call));
    } else {
      ADD_LIT(b, ",\"path\":");
      ob_json_write_string(b, u->scope, strlen(u->scope));
    }
    ob_buf_addc(b, '}');
    ob_wal_line_end(u->opt.journal);
    u->scope_no = n;
  }
  return r->scope_no;
}

/* Starts a line in the journal's own buffer (no copy): {"journal":"<what>" and the
 * run's scope or step. NULL when the journal has failed: then nothing is written. */
static ob_buf *line_begin(ob_run *r, const char *what) {
  uint64_t scope = r->scope ? scope_define(r) : 0;
  if (r->scope && !scope)
    return NULL;
  ob_buf *b = ob_wal_line(r->opt.journal);
  if (!b)
    return NULL;
  ADD_LIT(b, "{\"journal\":\"");
  add_lit(b, what);
  ob_buf_addc(b, '"');
  if (scope) {
    ADD_LIT(b, ",\"scope\":");
    ob_buf_add_uint(b, scope);
  }
  if (r->opt.step)
    ob_buf_addf(b, ",\"step\":%d", r->opt.step);
  return b;
}

static void add_string(ob_buf *b, const char *key, const char *s) {
  ADD_LIT(b, ",\"");
  add_lit(b, key);
  ADD_LIT(b, "\":");
  ob_json_write_string(b, s, strlen(s));
}

static void line_end(ob_run *r, ob_buf *b) {
  ob_buf_addc(b, '}');
  ob_wal_line_end(r->opt.journal);
}

/* Message i of the run's log as JSON. A delegating call's output or error
 * carries its run's messages (_log), which that run's "msg" lines hold
 * already: it names their scope instead, {"scope":S}. */
static void message_write(ob_run *r, size_t i, ob_buf *b) {
  const ob_msg *m = ob_log_at(r->log, i);
  const ob_cdel *d = r->journal_sub;
  if (!d || !d->log || !d->scope ||
      (m->sublog != d->log && !(m->raw && ob_object_get(m->raw, "_log", 4) == d->log))) {
    ob_log_message_write(r->log, i, b);
    return;
  }
  ob_value *ref = ob_object();
  ref = ob_object_set(ref, "scope", 5, d->run && d->run->scope_no
                                            ? ob_int((int64_t)d->run->scope_no)
                                            : ob_cstring(d->scope));
  ob_value *raw = ob_object_set(ob_log_message(r->log, i), "_log", 4, ref);
  ob_json_write(b, raw, OB_JSON_COMPACT);
  ob_unref(raw);
}

void ob_record_message(ob_run *r, size_t i) {
  ob_buf *b;
  const ob_cdel *d = r->journal_sub; /* its scope named below: defined first */
  if (d && d->log && d->scope && d->run && d->run->scope && !scope_define(d->run))
    return;
  if (r->scope) {
    if (!(b = line_begin(r, "msg")))
      return;
    ADD_LIT(b, ",\"msg\":");
    message_write(r, i, b);
    line_end(r, b);
    return;
  }
  if (!(b = ob_wal_line(r->opt.journal)))
    return;
  message_write(r, i, b);
  ob_wal_line_end(r->opt.journal);
}

void ob_record_run(ob_run *r) {
  if (!r->opt.journal)
    return;
  ob_buf *b = line_begin(r, "run");
  if (!b)
    return;
  if (!r->scope && !r->opt.step) {
    ob_value *tools = ob_engine_tool_files(r->e);
    ADD_LIT(b, ",\"tools\":");
    ob_json_write(b, tools, OB_JSON_COMPACT);
    ob_unref(tools);
  }
  if (r->opt.run_record_extra) {
    ADD_LIT(b, ",\"loop\":");
    ob_json_write(b, r->opt.run_record_extra, OB_JSON_COMPACT);
  }
  line_end(r, b);
  ob_record_flush(r);
}

void ob_record_start(ob_crun *c) {
  ob_run *r = c->run;
  ob_buf *b;
  if (!r->opt.journal || !(b = line_begin(r, "start")))
    return;
  ADD_LIT(b, ",\"id\":");
  ob_json_write_string(b, c->call->id, strlen(c->call->id));
  ADD_LIT(b, ",\"attempt\":");
  ob_buf_add_uint(b, c->attempt);
  add_time(b);
  line_end(r, b);
}

void ob_record_retry(ob_crun *c, const char *error, uint64_t delay_ms) {
  ob_run *r = c->run;
  ob_buf *b;
  if (!r->opt.journal || !(b = line_begin(r, "retry")))
    return;
  add_string(b, "id", c->call->id);
  ob_buf_addf(b, ",\"attempt\":%u", (unsigned)c->attempt);
  add_string(b, "error", error);
  ob_buf_addf(b, ",\"delay_ms\":%llu", (unsigned long long)delay_ms);
  add_time(b);
  line_end(r, b);
}

void ob_record_settled(ob_crun *c) {
  ob_run *r = c->run;
  ob_buf *b;
  if (!r->opt.journal || !(b = line_begin(r, "settled")))
    return;
  ADD_LIT(b, ",\"id\":");
  ob_json_write_string(b, c->call->id, strlen(c->call->id));
  ADD_LIT(b, ",\"state\":\""); /* done, failed, skipped: nothing to escape */
  add_lit(b, ob_call_state_name(c->state));
  ob_buf_addc(b, '"');
  add_time(b);
  ob_buf_addc(b, '}');
  ob_wal_line_end(r->opt.journal);
}

int ob_record_flush(ob_run *r) {
  if (!r->opt.journal || ob_wal_flush(r->opt.journal) == OB_OK)
    return OB_OK;
  /* The journal could not be written (disk full, I/O error, file too large): what
   * happens from here could not be taken up again, so nothing more starts. The
   * top-level run is cancelled (its running calls abandoned) and the loop stopped;
   * whoever drives it reads the failure from the wal (ob_wal_error) and reports it. */
  ob_run *top = r;
  while (top->parent)
    top = top->parent->run;
  if (!top->cancelled) {
    ob_run_cancel(top);
    uv_stop(r->e->loop);
  }
  return OB_EIO;
}

/* --fsync always: the engine's runs held back by ob_record_hold go on when their
 * lines are on disk (or the journal failed: nothing more will be). Pumping a run may
 * free others, so the walk starts over after each. */
static void on_durable(void *ud, int status) {
  ob_engine *e = ud;
  (void)status;
  for (;;) {
    ob_run *r = e->runs;
    while (r && !(r->hold_seq && (r->hold_seq <= ob_wal_durable(r->opt.journal) ||
                                  ob_wal_error(r->opt.journal))))
      r = r->next;
    if (!r)
      return;
    r->hold_seq = 0;
    ob_run_pump(r);
  }
}

int ob_record_hold(ob_run *r, uint64_t seq) {
  ob_wal *w = r->opt.journal;
  if (seq <= r->durable_seq)
    return 0;
  if ((r->durable_seq = ob_wal_durable(w)) >= seq || ob_wal_error(w))
    return 0;
  if (!r->hold_seq) { /* the engine outlives the wal's waiters (closed before it) */
    ob_wal_flush(w);
    if (ob_wal_when_durable(w, seq, on_durable, r->e) != OB_OK)
      return 0;
    r->hold_seq = seq;
  }
  return 1;
}

void ob_run_journal_end(ob_run *r, int exit_status) {
  if (!r->opt.journal)
    return;
  char line[48];
  int n = snprintf(line, sizeof line, "{\"journal\":\"end\",\"exit\":%d}", exit_status);
  ob_wal_add(r->opt.journal, line, (size_t)n);
  ob_wal_trim(r->opt.journal); /* complete: no zeros after it, closed or not */
}
