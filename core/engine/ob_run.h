/* ob_run.h -- one execution of a plan on an engine: the scheduler (plan-format §5).
 * Ready calls start at once, each tool call in its own Lua coroutine on the engine's loop. */
#ifndef OB_RUN_H
#define OB_RUN_H

#include <stdio.h>

#include "engine/ob_engine.h"
#include "log/ob_log.h"

typedef enum ob_call_state {
  OB_CALL_WAITING, /* some call it depends on has not settled */
  OB_CALL_READY,   /* queued to start */
  OB_CALL_RUNNING,
  OB_CALL_DONE,
  OB_CALL_FAILED,
  OB_CALL_SKIPPED
} ob_call_state;

const char *ob_call_state_name(ob_call_state s);

/* What the scheduler tells whoever listens (--events, progress, hosts). */
typedef enum ob_event_type {
  OB_EV_READY,
  OB_EV_STARTED,
  OB_EV_DONE,
  OB_EV_SKIPPED,
  OB_EV_FAILED,
  OB_EV_RUN_DONE,
  OB_EV_NOTE, /* something the engine says about the run (a retry, a traceback): `note` is
                its kind, `reason` the message, `call` the call when there is one */
  OB_EV_PROGRESS /* a running call sent a partial result or its progress (obelus.emit,
                    ob_call_emit): `data` is the value, `attempt` the attempt's number */
} ob_event_type;

/* "ready", "started", "done", "skipped", "failed", "run_done", "note", "progress" */
const char *ob_event_name(ob_event_type type);

typedef struct ob_event {
  ob_event_type type;
  const ob_call *call; /* NULL for OB_EV_RUN_DONE */
  const char *reason;  /* skipped/failed: why */
  double t_ms;         /* milliseconds since the run started */
  const char *note;    /* OB_EV_NOTE: its kind ("retry", "traceback", ...); else NULL */
  const char *phase;   /* OB_EV_FAILED of an error (ob_crun_fail): "structural", "runtime" or
                          "refused"; NULL for a call failed otherwise (cancelled, ...) */
  int detached;        /* OB_EV_FAILED: the call is fire-and-forget */
  const ob_value *data; /* OB_EV_PROGRESS: what the call sent (borrowed: valid during the
                           callback); else NULL */
  uint32_t attempt;    /* the call's attempt (from 1) when the event is a call's; else 0 */
  const ob_value *value; /* OB_EV_DONE: the value written at the call's output path (its
                            result, or the error a || alternative received), borrowed;
                            NULL when the call placed its outputs itself or wrote none */
  int handled;         /* OB_EV_DONE: an error went to a || alternative (not plain done) */
  const ob_call *each; /* a copy's event: the _each call it is a copy of (call is the copy,
                          "<id>[i]", of the copies' own plan); else NULL */
} ob_event;

/* The largest value an event carries whole (compact JSON bytes): hosts give a larger
 * one's size instead (--events "size", the C API's value_size). */
#define OB_EVENT_VALUE_MAX 4096
/* The size of value v's compact JSON in bytes, counted past OB_EVENT_VALUE_MAX only when
 * v is larger (then the whole value is walked): carry v whole when it is at most
 * OB_EVENT_VALUE_MAX, else this size. */
size_t ob_event_value_size(const ob_value *v);

/* What an event says to the person running the engine, as the engine once printed it:
 * a note's message, or for a failed call of the top-level run "call X (T) failed[
 * [fire-and-forget]] (phase): msg", appended to out (no newline). Returns the kind (the
 * note's, or "failed"), or NULL for an event that says nothing (out untouched). */
const char *ob_event_say(const ob_event *ev, ob_buf *out);
/* For a host that reads none of a run's events itself (MCP, the worker): what the
 * event says (ob_event_say) handed to the engine's note hook (ob_engine_note). */
void ob_event_to_note(ob_engine *e, const ob_event *ev);


/* Approval (--approve, a host's own): asked before each call starts, with its params
 * resolved (ob_approve.c). The Lua approver (obelus.set_approver) comes first when there
 * is one. */
typedef enum {
  OB_APPROVE_REFUSE = 0,
  OB_APPROVE_ALLOW = 1,
  OB_APPROVE_BROKEN = -1,
  OB_APPROVE_LATER = 2 /* asked elsewhere (a person in a browser): ob_approve_answer */
} ob_approve_verdict;
typedef struct ob_approve_ask {
  const char *id, *tool, *instance; /* the call (instance NULL: none) */
  const ob_value *params;           /* its params, resolved (meta-properties too) */
  const ob_value *call;             /* the call as written (its wiring, which a replacement keeps) */
  struct ob_crun *pending;          /* the call, to answer later (OB_APPROVE_LATER) */
  const char *scope;                /* its run's journal scope (a delegated plan's), or NULL */
} ob_approve_ask;
/* Returns an ob_approve_verdict: ALLOW (with *replacement set: run that call instead, of
 * the same wiring; the hook's reference), REFUSE (the call fails "refused"), BROKEN
 * (it fails with why's text), or LATER: the call waits, unstarted and holding no
 * --concurrency slot, its params kept, until ob_approve_answer(q->pending, ...). */
typedef int (*ob_approve_fn)(void *ud, const ob_approve_ask *q, ob_value **replacement,
                             ob_buf *why);
/* The answer to an approval put off (OB_APPROVE_LATER), from outside every callback of
 * the engine: ALLOW (replacement: a call of the same wiring, or NULL; not taken), REFUSE
 * or BROKEN (why: the error's text). The call then goes on (or fails) as if the hook had
 * answered at once. pending is valid until it is answered, or its run is cancelled or
 * freed (then it is never to be answered: the host forgets it). Returns 0, or -1 when
 * the call no longer waits for an answer (answered already, or its run cancelled). */
int ob_approve_answer(struct ob_crun *pending, int verdict, const ob_value *replacement,
                      const char *why);

typedef struct ob_run_options {
  size_t concurrency;      /* calls running at once in this run and every run delegated
                              from it (a delegated run's own is not used); 0: unlimited */
  size_t max_running;      /* calls of this run running at once, besides the tree's
                              concurrency (an _each call's _eachConcurrency); 0: no bound */
  int depth;               /* 0 for a plan run directly; a delegated plan's is its caller's + 1 */
  int max_depth;           /* deepest delegation allowed (0: the default, 16) */
  const ob_value *pre_context; /* messages appended before the plan's context, or NULL */
  ob_log *log;             /* a log to run on (shared, never freed by the run); NULL: a new one */
  ob_approve_fn approve;   /* asked before each call starts (the CLI's --approve: the
                              terminal, ob_cli_approve_tty); NULL: none */
  void *approve_ud;
  unsigned max_slice_ms;   /* how long a tool may run without yielding before it is stopped
                              with an error (0: OB_RUN_MAX_SLICE_MS) */
  int time_travel;         /* keep every version of the documents (reads as of position N);
                              off, writes change unshared documents in place */
  struct ob_wal *journal;  /* JSON Lines, the log as it grows, and the records resume
                              needs (ob_record.c); NULL: none. Shared with delegated
                              runs; the host closes it (ob_wal_close) before the engine */
  uint32_t call_timeout_ms; /* a _timeout for every call without one (0: none) */
  size_t max_output;       /* --max-output: the largest message a call may write, in
                              bytes of its JSON text (0: no limit) */
  size_t max_calls;        /* --max-calls: the most calls of this run and every run
                              sharing calls_used (its delegated plans, a loop's steps) */
  size_t *calls_used;      /* that count (NULL: the run counts its own calls only) */
  const char *journal_scope; /* a delegated run's: its records' "scope" (ob_record.c) */
  struct ob_run *journal_in; /* and the run delegating to it, if it has a scope, */
  const char *journal_call;  /* and the call's id (its scope's definition, ob_record.c) */
  /* a sequence of runs sharing one log (the planning loop, `obelus loop`): */
  int step;                /* the step whose run this is, in its records (0: none) */
  const ob_value *run_record_extra; /* the first run's: its "run" record's "loop" */
  struct ob_resume *resume; /* obelus resume: where delegated runs find what their
                               earlier process did (ob_resume.h); NULL: none */
  const char *plans_root;  /* the folder _delegate paths must stay inside when calls run
                              (copied; delegated runs get the same); NULL: the plan's
                              root (ob_plan.root), and without one the current directory */
  void (*on_event)(void *ud, const ob_event *ev);
  void (*on_done)(ob_run *run, void *ud); /* every awaited call settled */
  void *ud;
} ob_run_options;

/* Prepares a run of a validated plan (plan->nerrors == 0, tools checked):
 * appends the plan message, the plan's context and `inputs` (an array of
 * input documents, each added as {"type":"data","kind":"input","data":...};
 * may be NULL) to a fresh log. Returns NULL with err when a context message
 * is refused. The plan must outlive the run. */
/* --max-calls: counts plan's calls into opt->calls_used; fails (err says
 * how many, and the limit) when that would pass opt->max_calls. */
int ob_run_count_calls(const ob_plan *plan, const ob_run_options *opt, ob_error *err);

ob_run *ob_run_new(ob_engine *e, ob_plan *plan, const ob_value *plan_value,
                   const ob_value *inputs, const ob_run_options *opt, ob_error *err);

/* Tries the plan's context and `inputs` (as ob_run_new would append them) on
 * a scratch log and adds each refused one to the plan's problems, so a
 * prepared run cannot fail on them. An input is named "<input_label> #<n>"
 * when numbered, else "<input_label>". Returns the number of new problems.
 * (ob_run_read_plan also refuses, on those messages, the references nothing can
 * provide: ob_plan_check_known.) */
size_t ob_run_check_messages(ob_plan *plan, const ob_value *inputs, const char *input_label,
                             int numbered);

/* The defaults of --max-output and --max-calls, for the CLI, the C API and
 * the Lua module alike (an option left 0 there): 64 MB of JSON is far more
 * than a tool's result needs, and keeps one message printable and its
 * journal record writable; 1,000,000 calls is ten times the largest plan
 * the benchmarks run, and stops a delegation or loop bomb long before it
 * fills memory or disk. Both are overridable (up to 1 TB; any count). */
#define OB_DEFAULT_MAX_OUTPUT_KB ((size_t)64 * 1024)
#define OB_DEFAULT_MAX_CALLS ((size_t)1000000)

/* Where a plan comes from and what a run of it is checked against. */
typedef struct ob_plan_source {
  const char *name;        /* the file, or a name for messages */
  const char *root;        /* its plans root (copied), or NULL: the current directory */
  const ob_value *inputs;  /* an array of the input's data, or NULL */
  const char *input_label; /* how a problem names an input ("--input"), */
  int numbered;            /* with its number ("--input #2") or without */
  size_t max_calls;        /* 0: no limit */
  int known_refs;          /* 1: also refuse a reference nothing can provide
                              (ob_plan_check_known): `obelus check`. A run does not: it
                              meets such a reference as the contract says, a structural
                              error of the call (exit 1) */
} ob_plan_source;

/* Plan v read and checked as a run of it is before it starts: its shape,
 * references and graph (ob_plan_from_value, or ob_plan_probe when probe),
 * its calls against e's tools, its context and inputs as messages, the
 * references that neither a call nor those messages can provide
 * (ob_plan_check_known), and the calls it would make against max_calls. Every problem is recorded in it. */
ob_plan *ob_run_read_plan(const ob_engine *e, const ob_value *v, const ob_plan_source *src,
                          int probe);

/* Starts every ready call; the rest happens on the engine's loop. */
void ob_run_start(ob_run *r);

/* Abandons the calls still running (their coroutines are dropped, their
 * timers closed); nothing more is written. */
void ob_run_cancel(ob_run *r);

void ob_run_free(ob_run *r);

ob_log *ob_run_log(ob_run *r);
/* 1 when every awaited call has settled. */
int ob_run_finished(const ob_run *r);
/* 1 when some error message was not handled by a || alternative (exit 1). */
int ob_run_failed(const ob_run *r);
/* Fire-and-forget calls not settled yet: running, or still to start (one that comes
 * after the awaited calls in the plan may not have started when they have all settled). */
size_t ob_run_detached_pending(const ob_run *r);
/* Calls still running (awaited or not). */
size_t ob_run_running(const ob_run *r);
ob_call_state ob_run_call_state(const ob_run *r, size_t i);

/* Writes the journal's last record: the run ended with this exit status
 * (resume then runs nothing and prints the output again). */
void ob_run_journal_end(ob_run *r, int exit_status);
/* Every run of e writing to journal w stops writing to it (what it wrote is
 * flushed): call it before ob_wal_close while runs that use w are alive. */
void ob_run_detach_journal(ob_engine *e, struct ob_wal *w);

/* Fails every call still waiting on something that can no longer happen
 * (the loop ran out of work while they waited). Returns how many. */
size_t ob_run_fail_stalled(ob_run *r);

/* The final output (plan-format §5): the template resolved (absent -> null), or the
 * global state document ({} when none). New reference. */
ob_value *ob_run_output(ob_run *r);

/* Completes a call of a C tool (ob_engine_add_tool), from its function or
 * later from any callback on the loop. With error NULL, value (borrowed) is
 * the result, written to the alternative numbered alt (0-based) of the
 * call's _outputPath (0: the first, as a Lua tool returning normally);
 * with error set it is the tool's error (routed to the last || alternative
 * when there are two or more). The handle is spent: call this once. After
 * the run was cancelled it does nothing; after the run is freed the handle
 * must not be used. */
void ob_call_complete(ob_call_handle *h, size_t alt, const ob_value *value, const char *error);
/* A C tool's call sends value (borrowed) while it runs, as obelus.emit does: an
 * OB_EV_PROGRESS event and a "progress" record of the journal. OB_OK; OB_EINVAL with
 * err filled when the call has completed already, or the value is larger than
 * --max-output. */
int ob_call_emit(ob_call_handle *h, const ob_value *value, ob_error *err);
/* The call's id and tool name, for the tool's own messages. */
const char *ob_call_handle_id(const ob_call_handle *h);
const char *ob_call_handle_tool(const ob_call_handle *h);
/* The attempt of the call the tool runs now (1, then 2... under _retry): a
 * handle of an attempt that timed out must not be completed once the next
 * attempt has started (compare this number). */
uint32_t ob_call_handle_attempt(const ob_call_handle *h);
/* The run the host started that the call belongs to: its own run, or, for a
 * call of a delegated plan, the outermost run that delegated to it (which
 * frees the delegated runs with it). */
ob_run *ob_call_handle_run(const ob_call_handle *h);

#endif
