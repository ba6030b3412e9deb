/* ob_log.h -- the append-only message log and the documents it composes (plan-format §1, 2, 6).
 * Appending updates a materialised document per (kind, scope); reading never scans the log. */
#ifndef OB_LOG_H
#define OB_LOG_H

#include "base/ob_doc.h"
#include "base/ob_error.h"
#include "base/ob_path.h"
#include "base/ob_value.h"

typedef struct ob_log ob_log;

/* What a message is, once read (plan-format §1). */
typedef enum ob_msg_type {
  OB_MSG_CONTEXT, /* a data message merged (or written with its _outputMethod) at the root */
  OB_MSG_OUTPUT,  /* a data message written by a call: value at _path with _outputMethod */
  OB_MSG_OTHER    /* kept in the log, writes no document: {"type":"plan", ...} */
} ob_msg_type;

typedef struct ob_msg { /* 64 bytes: a run's log holds one a call */
  int64_t date_ms : 48; /* an output made here: when (ms since 1970, UTC, up to the year
                           6400), printed as its _date when the message is materialised;
                           else 0 */
  uint64_t type : 8;    /* an ob_msg_type */
  uint64_t method : 8;  /* an ob_method */
  ob_value *raw;      /* the message as appended (its "schema", if any, is the one the
                         message carries: ob_msg_schema); NULL for an output made by
                         ob_log_append_output (ob_log_message builds it) */
  ob_value *kind;     /* OB_STRING; NULL for OB_MSG_OTHER */
  ob_value *instance; /* OB_STRING, or NULL for the global scope */
  ob_value *path;     /* OB_STRING: where the value was written, canonical
                         path text ("" = the root) */
  ob_value *value;    /* what was written */
  ob_value *call;     /* an output's _call, or NULL */
  ob_value *sublog;   /* the messages of a delegated plan, printed as "_log" */
} ob_msg;

/* The "schema" a data message carries (plan-format §1), or NULL. */
ob_value *ob_msg_schema(const ob_msg *m);

/* Position meaning "the log as it is now" for every `at` argument. */
#define OB_LOG_NOW ((size_t)-1)

ob_log *ob_log_new(void);
void ob_log_free(ob_log *log);

/* Whether every version of every document is kept (the default: reads as
 * of an earlier position work). Without history only the newest version
 * is kept, and writes change the documents in place where nothing else
 * shares them: much less memory and time for long runs; a read as of an
 * earlier position then answers absent. Set it before the first append. */
void ob_log_keep_history(ob_log *log, int keep);
/* Makes room for n messages in all (a run's log: one a call), so that the
 * message array is not copied as it doubles (measured: 1% of fanout 100000). */
void ob_log_reserve(ob_log *log, size_t n);

/* Number of messages appended so far. */
size_t ob_log_len(const ob_log *log);

/* The i-th message (i < len), as read by ob_log_append. Borrowed. */
const ob_msg *ob_log_at(const ob_log *log, size_t i);

/* The i-th message as a JSON object (i < len): as appended, or, for an
 * output made by ob_log_append_output, in its canonical form. New reference. */
ob_value *ob_log_message(const ob_log *log, size_t i);
/* The same message as compact JSON text (ob_json_write's), added to b: what
 * a journal's line is, written without building the object. */
void ob_log_message_write(const ob_log *log, size_t i, ob_buf *b);

/* Appends a message in any accepted form (plan-format §1): canonical
 * {"type":"data","kind":k,"data":d}, the `type` shorthand {"type":"state",
 * "data":d}, the data-less shorthand {"type":"input","customerId":"c1"},
 * no type at all (kind data), output messages (with _call, _path or
 * _call._outputPath, _outputMethod), and {"type":"plan"} messages. The
 * message is borrowed (a reference is kept). Returns the message's
 * position (>= 0), or a negative OB_E* code with err filled and nothing
 * appended: a malformed message, or a write its method cannot make
 * (plan-format §4) at that point of the log. */
long ob_log_append(ob_log *log, ob_value *msg, ob_error *err);

/* Appends the output message of a call, {"type":"data","kind":kind,
 * "_instance"?, "data":<value nested under path>, "_path", "_outputMethod",
 * "_call"?, "_date"}, and writes value. call may be NULL. Borrowed
 * arguments. Returns the position or a negative code (nothing appended).
 * The JSON form is built only when asked for (ob_log_message): appending
 * costs the write and a few references, not a copy of the message. */
long ob_log_append_output(ob_log *log, const char *kind, const char *instance,
                          const ob_path *path, ob_method method, const ob_value *value,
                          const ob_value *call, ob_error *err);

/* What document `kind` would be, read in scope `instance`, if value were
 * written at p with method now: a new reference, or NULL with err filled
 * when the write would fail. Nothing is appended. Costs a write, plus a
 * merge of the whole view for an instance. Used to check a write against
 * the document's schema before making it. */
ob_value *ob_log_preview(ob_log *log, const char *kind, const char *instance, const ob_path *p,
                         ob_method method, const ob_value *value, ob_error *err);

/* The same, with the path's canonical text already made (an OB_STRING
 * value, borrowed, as ob_path_format writes it): the scheduler formats each
 * output path once per plan, not once per write. */
long ob_log_append_output_text(ob_log *log, const char *kind, const char *instance,
                               const ob_path *path, ob_value *path_text, ob_method method,
                               const ob_value *value, const ob_value *call, ob_error *err);

/* Attaches the messages of a delegated run (an array, borrowed) to output
 * message pos, made by ob_log_append_output: they print as its "_log" field
 * and never enter this log's documents. */
void ob_log_attach(ob_log *log, size_t pos, const ob_value *sublog);

/* The value at path p of document `kind` read in scope `instance` (NULL:
 * global) as of the first `at` messages (OB_LOG_NOW: all of them). An
 * instance reads its view: the global document deep-merged with the
 * instance's own, the instance winning (plan-format §6). New reference, or NULL
 * when absent. Cost: O(depth) lookups plus, when a global and an instance
 * object meet at p, a merge of the instance's part. Never scans the log. */
/* A cache hint before a write of (kind, instance, path): finds the object
 * the path's last key goes into and, when it is wide, asks for `levels`
 * (see ob_prefetch_key) of that key's path in its index. Changes nothing. */
void ob_log_prefetch_write(ob_log *log, const char *kind, const char *instance,
                           const ob_path *p, int levels);
ob_value *ob_log_read(ob_log *log, const char *kind, const char *instance, const ob_path *p,
                      size_t at);

/* Evaluates a reference expression (plan-format §3, input rules): the value of the
 * first alternative that is present; an alternative of refs joined by &&
 * is present when all are, and is worth its last. New reference or NULL. */
ob_value *ob_log_eval(ob_log *log, const ob_expr *e, const char *instance, size_t at);

/* The newest schema visible to `instance` for `kind` (the instance's own,
 * else the global one), borrowed, or NULL. */
ob_value *ob_log_schema(ob_log *log, const char *kind, const char *instance, size_t at);

/* Milliseconds since 1970 (UTC) as RFC 3339 with milliseconds:
 * "2026-11-21T23:20:15.123Z". */
void ob_log_date(int64_t ms, char out[32]);

/* The documents as they were after the first `at` messages (at <= ob_log_len; the log
 * kept its history, ob_log_keep_history): {"at": N, "documents": {kind: doc},
 * "instances": {X: {kind: the instance's view}}} ("instances" only when some message was
 * an instance's), kinds and instances in their first message's order. A new value. */
ob_value *ob_log_documents(ob_log *log, size_t at);

#endif
