/* ob_record.c -- the journal as a run writes it: its log and its progress, JSON Lines.
 *
 * A journal (--journal FILE, plan-format §12) is the run's log, one message a line,
 * first the plan message, and between the messages the records that let
 * `obelus resume` take the run up again. The format, and the writing of each
 * record, is ob_journal's (ob_journal.h draws it: ob_jrec_write); this file
 * says WHEN a run writes what: the scope numbers of delegated runs (one counter
 * of the process: runs on threads share the file), the "msg" lines that wrap a
 * delegated run's messages, and a delegating call's "_log" written as {"scope":S}.
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

#include "log/ob_journal.h"
#include "engine/ob_sched.h"

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
    ob_jrec rec = {.kind = OB_JREC_SCOPE, .n = n};
    if (in && u->opt.journal_call) {
      rec.in = in->scope_no;
      rec.call = u->opt.journal_call;
    } else {
      rec.path = u->scope;
    }
    ob_jrec_write(b, &rec);
    ob_wal_line_ended(u->opt.journal);
    u->scope_no = n;
  }
  return r->scope_no;
}

/* The journal's buffer to write a record of run r into (no copy), *rec made of kind
 * with the run's scope (defined first when it is not yet) and step. NULL when the
 * journal has failed: then nothing is written. */
static ob_buf *record_begin(ob_run *r, ob_jrec *rec, ob_jrec_kind kind) {
  uint64_t scope = r->scope ? scope_define(r) : 0;
  if (r->scope && !scope)
    return NULL;
  ob_buf *b = ob_wal_line(r->opt.journal);
  if (!b)
    return NULL;
  *rec = (ob_jrec){.kind = kind, .scope = scope, .step = r->opt.step};
  return b;
}

/* Ends the record: written whole, in the vocabulary's words. */
static void record_end(ob_run *r, ob_buf *b, const ob_jrec *rec) {
  ob_jrec_write(b, rec);
  ob_wal_line_ended(r->opt.journal);
}

/* Message i of the run's log as JSON. A delegating call's output or error
 * carries its run's messages (_log), which that run's "msg" lines hold
 * already: it names their scope instead, {"scope":S}; so does an _each call's,
 * which holds none in memory (ob_cdel.link_only). */
static void message_write(ob_run *r, size_t i, ob_buf *b) {
  const ob_msg *m = ob_log_at(r->log, i);
  const ob_cdel *d = r->journal_sub;
  if (!d || !d->scope ||
      (!d->link_only && (!d->log || (m->sublog != d->log &&
                                     !(m->raw && ob_object_get(m->raw, "_log", 4) == d->log))))) {
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
  ob_jrec rec;
  const ob_cdel *d = r->journal_sub; /* its scope named below: defined first */
  if (d && (d->log || d->link_only) && d->scope && d->run && d->run->scope &&
      !scope_define(d->run))
    return;
  if (r->scope) {
    if (!(b = record_begin(r, &rec, OB_JREC_MSG)))
      return;
    ob_jrec_msg_open(b, &rec);
    message_write(r, i, b);
    ob_jrec_msg_close(b);
    ob_wal_line_ended(r->opt.journal);
    return;
  }
  if (!(b = ob_wal_line(r->opt.journal)))
    return;
  message_write(r, i, b);
  ob_wal_line_end(r->opt.journal);
}

void ob_record_run(ob_run *r) {
  ob_jrec rec;
  ob_buf *b;
  if (!r->opt.journal || !(b = record_begin(r, &rec, OB_JREC_RUN)))
    return;
  ob_value *tools = NULL;
  if (!r->scope && !r->opt.step)
    rec.tools = tools = ob_engine_tool_files(r->e);
  rec.loop = r->opt.run_record_extra;
  record_end(r, b, &rec);
  ob_unref(tools);
  ob_record_flush(r);
}

void ob_record_start(ob_crun *c) {
  ob_run *r = c->run;
  ob_jrec rec;
  ob_buf *b;
  if (!r->opt.journal || !(b = record_begin(r, &rec, OB_JREC_START)))
    return;
  rec.id = c->call->id;
  rec.attempt = c->attempt;
  rec.t_us = ob_jrec_now();
  record_end(r, b, &rec);
}

void ob_record_retry(ob_crun *c, const char *error, uint64_t delay_ms) {
  ob_run *r = c->run;
  ob_jrec rec;
  ob_buf *b;
  if (!r->opt.journal || !(b = record_begin(r, &rec, OB_JREC_RETRY)))
    return;
  rec.id = c->call->id;
  rec.attempt = c->attempt;
  rec.error = error;
  rec.delay_ms = delay_ms;
  rec.t_us = ob_jrec_now();
  record_end(r, b, &rec);
}

void ob_record_settled(ob_crun *c) {
  ob_run *r = c->run;
  ob_jrec rec;
  ob_buf *b;
  if (!r->opt.journal || !(b = record_begin(r, &rec, OB_JREC_SETTLED)))
    return;
  rec.id = c->call->id;
  rec.state = ob_call_state_name(c->state); /* done, failed, skipped */
  rec.t_us = ob_jrec_now();
  record_end(r, b, &rec);
}

void ob_record_progress(ob_crun *c, const ob_value *data) {
  ob_run *r = c->run;
  ob_jrec rec;
  ob_buf *b;
  if (!r->opt.journal || !(b = record_begin(r, &rec, OB_JREC_PROGRESS)))
    return;
  rec.id = c->call->id;
  rec.attempt = c->attempt;
  rec.data = data;
  rec.t_us = ob_jrec_now();
  record_end(r, b, &rec);
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
  ob_buf *b = ob_wal_line(r->opt.journal);
  if (b) {
    ob_jrec_write(b, &(ob_jrec){.kind = OB_JREC_END, .exit = exit_status});
    ob_wal_line_ended(r->opt.journal);
  }
  ob_wal_trim(r->opt.journal); /* complete: no zeros after it, closed or not */
}
