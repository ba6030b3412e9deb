/* ob_journal.h -- the journal's lines: its vocabulary of records, written and read
 * here (ob_jrec_write, ob_jrec_parse), and reading a log back from a file: a JSON
 * array of messages, or a journal (JSON Lines, as `run --journal` writes it through
 * ob_wal).
 *
 * THE FORMAT. A journal (--journal FILE, plan-format §12) is the run's log, one message a
 * line, first the plan message, and between the messages the RECORDS that let
 * `obelus resume` take the run up again: JSON objects with a "journal" member,
 * which the readers of logs skip, so `log`, `resolve --at N` and `graph --journal`
 * count messages only.
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
 *   {"journal":"progress","id":I,"attempt":N,"data":V,"t":T}   attempt N of the
 *        call sent V while it ran (obelus.emit, obelus_call_emit): what `log`, the
 *        trace and the report show; resume reads nothing from it
 *   {"journal":"end","exit":X[,"output":V]}    the run (or loop, with the
 *        planner's output) ended with exit status X
 *   {"journal":"fork","source":F,"at":N|"from":I}   the first record of a journal
 *        `obelus fork` made: the lines up to its last "fork" record are inherited
 *        from journal F (its first N messages, or all but those of call I and what
 *        follows from it), without the calls that run again
 *   {"journal":"fork","changes":K}             the K messages just before are a
 *        fork's own (--set, --input: "_call":{"_tool":"fork"}); the last one's are
 *        this fork's, and the run goes on after it (a fork of a fork inherits the
 *        first's changes, with their record)
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
 * Members come in the order shown, "scope" and "step" (when the record has them)
 * right after "journal": every writer goes through ob_jrec_write, so the bytes of
 * a record are the same whoever writes it (ob_record.c for a run, ob_resume.c,
 * `obelus loop`, the end record of every driver).
 *
 * READING. A journal's lines are of two sorts:
 *  - a record: a JSON object with a member "journal" whose value is a string (and
 *    no "type"; ob_jrec_parse). Records are not messages: ob_journal_load skips
 *    them, so `--at N` means after the first N messages, records not counted;
 *  - a message (plan-format §5): any other line; the first is the plan message.
 * Blank lines are skipped. Every line a writer finishes ends with '\n': a last line
 * without one (and not empty) is torn, what is left of a process that died while
 * writing it. It is ignored, whether or not it happens to parse, and reported
 * through ob_journal_info (the commands say so: ob_journal_torn_text).
 * Any other line that is not JSON is an error naming the file and line.
 * NUL bytes at the end of the file are not there: ob_wal grows a journal ahead of
 * its lines, zeros until written, and a run still going, or killed, leaves them
 * (ob_journal_len; a line never holds a NUL: JSON escapes it).
 *
 * Costs: the file is read whole into memory, then parsed a line at a time, each
 * line's value handed over and released before the next: O(file) memory for the
 * text, O(line) for values the caller does not keep. */
#ifndef OB_JOURNAL_H
#define OB_JOURNAL_H

#include <stdint.h>
#include <stdio.h>

#include "log/ob_log.h"
#include "base/ob_map.h"

/* --- the vocabulary ------------------------------------------------------------ */

typedef enum ob_jrec_kind {
  OB_JREC_NONE,    /* not a record: a message of the log (ob_jrec_parse returns 0) */
  OB_JREC_RUN,     /* "run": tools, loop */
  OB_JREC_STEP,    /* "step": step, problems */
  OB_JREC_RESUME,  /* "resume" */
  OB_JREC_START,   /* "start": id, attempt, t_us */
  OB_JREC_RETRY,   /* "retry": id, attempt, error, delay_ms, t_us */
  OB_JREC_SETTLED, /* "settled": id, state, t_us */
  OB_JREC_END,     /* "end": exit, output */
  OB_JREC_SCOPE,   /* "scope": n, in with call, or path */
  OB_JREC_MSG,     /* "msg": a delegated run's message, msg */
  OB_JREC_PROGRESS, /* "progress": id, attempt, data, t_us (obelus.emit) */
  OB_JREC_FORK,    /* "fork": source with at or from (the first record of a fork's
                      journal), or changes (after the fork's own messages) */
  OB_JREC_OTHER    /* a record of a kind this version does not write (read: what) */
} ob_jrec_kind;

/* One record. Strings and values are borrowed (from the writer's run, or from the
 * parsed line: valid while it is). Writing: the members the kind has are written
 * (0 / NULL ones that are optional left out: scope, step, problems, tools, loop,
 * output); t_us is the caller's (ob_jrec_now). Reading (ob_jrec_parse): a member
 * absent or of another JSON type reads as 0 / NULL (has_* say whether the number
 * was there), so each reader keeps its own defaults. */
typedef struct ob_jrec {
  ob_jrec_kind kind;
  const char *what;     /* read: the "journal" string (OB_JREC_OTHER's name) */
  uint64_t scope;       /* write: the scope's number (0: the record has none) */
  const char *scope_path; /* read: "scope" as a string (after ob_journal_scopes_take,
                           * or a journal that wrote paths), else NULL */
  int64_t step;         /* "step" (0: none); a "step" record's own */
  const char *id, *state, *error;
  int64_t attempt, exit, problems; /* problems 0: none */
  int has_attempt, has_exit;
  uint64_t delay_ms, t_us;
  uint64_t n, in;       /* a scope record's number and the scope it is in (0: none) */
  const char *call, *path; /* its call (with in) or its path */
  const ob_value *tools, *loop, *output, *msg, *data;
  const char *source, *from; /* a fork's: the journal forked, and its --from call */
  int64_t at, changes;       /* its --at N; the messages of its own it wrote */
  int has_at, has_changes;
} ob_jrec;

/* Appends record r to b as one line, its '\n' included. No allocation beyond b's
 * growth (ob_record_start writes one per call). */
void ob_jrec_write(ob_buf *b, const ob_jrec *r);
/* A "msg" record whose message the caller prints in place (ob_record.c prints a
 * log's message straight into the journal's buffer): _open writes the record up to
 * its "msg": member, the caller prints the message's JSON, _close ends the line. */
void ob_jrec_msg_open(ob_buf *b, const ob_jrec *r);
void ob_jrec_msg_close(ob_buf *b);
/* Now, in microseconds since the Unix epoch: a record's t_us. */
uint64_t ob_jrec_now(void);
/* The name a kind is written with ("run", ...; "" for NONE and OTHER). */
const char *ob_jrec_name(ob_jrec_kind kind);

/* Reads line (a parsed journal line, borrowed) into *out: 1 when it is a record (an
 * object with a string "journal" and no "type"), 0 when it is a message (out->kind
 * OB_JREC_NONE), or OB_EINVAL with err saying why for a "scope" record without "n"
 * (a number from 1) and "in" with "call", or "path". O(members read): lookups only. */
int ob_jrec_parse(const ob_value *line, ob_jrec *out, ob_error *err);

/* What reading a journal found besides its lines. */
typedef struct ob_journal_info {
  size_t messages, records; /* complete lines of each sort (blank lines not counted) */
  int torn;                 /* 1 when the last line was torn, and so ignored */
  size_t torn_line;         /* its number (1-based) */
  uint64_t torn_offset;     /* the byte where it starts: where an appender cuts */
  uint64_t torn_bytes;      /* its length */
} ob_journal_info;

/* One complete, non-blank line, as ob_journal_read hands it over. */
typedef struct ob_journal_line {
  size_t line;     /* 1-based */
  uint64_t offset; /* the byte where it starts */
  ob_value *value; /* the parsed line, borrowed: ob_ref it to keep it */
  int is_record;   /* a record ({"journal": "...", ...}) rather than a message */
} ob_journal_line;

/* Returns OB_OK to go on, anything else to stop reading (ob_journal_read then
 * returns it; fill err when it is an error). */
typedef int (*ob_journal_each)(void *ud, const ob_journal_line *l, ob_error *err);

/* Reads the journal (JSON Lines) at path ("-": standard input) and hands every
 * complete non-blank line to each, in order, messages and records alike. info (may
 * be NULL) is filled even when reading stops early, as far as it got; the torn last
 * line, if any, is known before the first line is handed over. Returns OB_OK; a
 * negative code with err naming the file and line when a line is not JSON
 * ("run.jsonl:4: ..."), or the file cannot be read; or what each returned. */
int ob_journal_read(const char *path, ob_journal_each each, void *ud, ob_journal_info *info,
                    ob_error *err);
/* The same over a journal's text held in memory (a fleet job's journal, from Redis):
 * name stands for the file in what err says. */
int ob_journal_read_text(const char *name, const char *text, size_t len, ob_journal_each each,
                         void *ud, ob_journal_info *info, ob_error *err);

/* Appends every message of the file at path to log, in order. The format is
 * told by the first non-blank character: '[' a JSON array, anything else a
 * journal (as ob_journal_read reads it; records are skipped, and a "_log"
 * naming a scope is rebuilt from its "msg" lines: ob_journal_subs). info (may be NULL):
 * as ob_journal_read fills it (a JSON array: messages only). On error returns a
 * negative code with err naming the file, the line (JSON Lines) or message index
 * (array), and the reason; the messages before the bad one stay appended. */
int ob_journal_load(ob_log *log, const char *path, ob_journal_info *info, ob_error *err);
/* The same from a journal's text in memory (len bytes; a fleet job's journal, from
 * Redis): name stands for the file in what err says. */
int ob_journal_load_text(ob_log *log, const char *name, const char *text, size_t len,
                         ob_journal_info *info, ob_error *err);

/* The messages of the delegated runs a journal holds, by scope, as its "msg" lines
 * ({"journal":"msg","scope":S,"msg":M}) give them: what a delegating call's message
 * names when its "_log" is {"scope":S} (ob_record.c writes each message once) and
 * a reader rebuilds as the array of them. Journals written before hold the array
 * itself, read as it is. */
typedef struct ob_journal_subs {
  ob_map scopes; /* scope -> ob_value * (an array of messages) */
} ob_journal_subs;

void ob_journal_subs_init(ob_journal_subs *s);
void ob_journal_subs_free(ob_journal_subs *s);
/* msg (borrowed) with its "_log" {"scope":S} replaced by S's messages so far (none:
 * []); a new reference (to msg itself when it names no scope). */
ob_value *ob_journal_subs_expand(ob_journal_subs *s, const ob_value *msg);
/* A "msg" line: its message, expanded, joins those of its scope; a plan message
 * starts the scope afresh (a retried delegation runs its plan again). Returns the
 * expanded message (a new reference). */
ob_value *ob_journal_subs_add(ob_journal_subs *s, const char *scope, const ob_value *msg);

/* The delegated runs' scopes by number. A scope is written once, as a record
 * {"journal":"scope","n":N,"in":P,"call":I} (scope P's call I's run: "P/I") or
 * {"journal":"scope","n":N,"path":S}, and lines name it by its number (ob_record.c);
 * journals written before named the path on every line, read as they are. Every
 * reader of a journal's lines passes each through ob_journal_scopes_take first, so
 * that what follows it sees paths, as before. */
typedef struct ob_journal_scopes {
  ob_map names; /* N (decimal) -> ob_value * (the path, a string) */
} ob_journal_scopes;

void ob_journal_scopes_init(ob_journal_scopes *s);
void ob_journal_scopes_free(ob_journal_scopes *s);
/* Line *v (a reference the call takes over): 1 when it defines a scope (noted;
 * *v released and set to NULL: it is not a line of the log), 0 when it goes on
 * (*v the line with each scope number, its own "scope", its "msg"'s "_log" or its
 * own "_log", replaced by the path), or a negative code with err saying
 * "FILE:LINE: ..." (a number not defined before, a definition that is wrong). */
int ob_journal_scopes_take(ob_journal_scopes *s, ob_value **v, const char *path, size_t line,
                           ob_error *err);

/* How much of a journal's text of len bytes counts: len without its tail of NUL
 * bytes (the zeros a writer reserved and has not written yet). Every reader of a
 * journal cuts its text there first. */
size_t ob_journal_len(const char *text, size_t len);

/* Appends to b, when info tells of a torn last line (nothing otherwise):
 * "WHO: PATH:LINE: the last line is torn (the process died while writing it); ignored\n"
 * (the commands print it: ob_cli_report_torn). */
void ob_journal_torn_text(ob_buf *b, const char *who, const char *path,
                          const ob_journal_info *info);
#endif
