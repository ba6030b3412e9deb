/* ob_journal.h -- reading a log back from a file: a JSON array of messages, or a
 * journal (JSON Lines, as `run --journal` writes it through ob_wal).
 *
 * A journal's lines are of two sorts:
 *  - a record: a JSON object with a member "journal" whose value is a string, which
 *    the scheduler writes for `resume` ({"journal":"start","id":"#3","attempt":1},
 *    {"journal":"settled","id":"#3","state":"done"}). Records are not messages:
 *    ob_journal_load skips them, so `log`, `resolve` and `graph --journal` see the
 *    messages only, and `--at N` means after the first N messages, records not
 *    counted;
 *  - a message (SPEC 5): any other line; the first is the plan message.
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

#include "ob_log.h"
#include "ob_map.h"

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

/* Appends every message of the file at path to log, in order. The format is
 * told by the first non-blank character: '[' a JSON array, anything else a
 * journal (as ob_journal_read reads it; records are skipped, and a "_log"
 * naming a scope is rebuilt from its "msg" lines: ob_journal_subs). info (may be NULL):
 * as ob_journal_read fills it (a JSON array: messages only). On error returns a
 * negative code with err naming the file, the line (JSON Lines) or message index
 * (array), and the reason; the messages before the bad one stay appended. */
int ob_journal_load(ob_log *log, const char *path, ob_journal_info *info, ob_error *err);

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
