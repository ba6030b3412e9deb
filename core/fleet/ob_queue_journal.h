/* ob_queue_journal.h -- a job's journal as Redis keeps it (ob_queue_journal.c): as text
 * while the job runs (ob:{Q}:journal:ID, the worker's flushes APPENDed; a job that ended
 * with few others keeps it so a few seconds more: ob_worker_records.h), and, once it has
 * finished, inside a compact record in the bucket of the minute it finished in and the
 * worker that ran it (ob:{Q}:journals:M:WORKER, M = finished ms /
 * OB_QUEUE_JOURNAL_BUCKET_MS, WORKER its consumer name, which the job's hash names),
 * which expires as a whole --keep-journals after its last record was written: each
 * record lives at least that long after its jobs ended, at most a minute more. The job's
 * hash names its record ("journal": the record's field in the bucket, the id of its first
 * job: a worker ends a job once, and two workers that both ran one write two buckets;
 * "-" when its journal was not kept: --keep-journals 0).
 *
 * A record holds the journals of the jobs whose results one worker stored together (up
 * to OB_QUEUE_JOURNAL_RECORD of text; a longer journal has a record of its own), each as
 * "ID\nLENGTH\n" and its text. It is OB_QUEUE_JOURNAL_MAGIC, the hash of the plan whose
 * text is part of its dictionary (16 characters; "-" 16 times for none), how many
 * journals it holds (8 hex digits: what `obelus status` divides its size by), and those
 * journals deflated with a dictionary of what journals say (version 1 of it) followed by
 * that plan's text as submitted (ob:{Q}:plan:H, kept as long as the journals of its
 * jobs). Deflated together, each journal after the first points back into the one before
 * it: a trivial job's 610 bytes become some 40. "\0J0" and the same hash begin a record
 * whose journals are not deflated (zlib could not be loaded). */
#ifndef OB_QUEUE_JOURNAL_H
#define OB_QUEUE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "base/ob_buf.h"
#include "base/ob_error.h"

#define OB_QUEUE_JOURNAL_MAGIC "\0J1"
#define OB_QUEUE_JOURNAL_BUCKET_MS 60000
/* A record holds journals up to this much text (then a new one begins). */
#define OB_QUEUE_JOURNAL_RECORD 65536
/* A record that inflates past this is refused (a bomb: anyone with Redis access can
 * write one). */
#define OB_QUEUE_JOURNAL_MAX ((size_t)1 << 30)

/* Adds job id's journal text (len) to the journals of a record to be (raw). */
void ob_queue_journal_add(ob_buf *raw, const char *id, const char *text, size_t len);

/* Appends to out the record of the count journals in raw (len): its dictionary's plan has
 * the hash plan_hash (NULL: none) and the text plan (plen). Never fails: without zlib, the
 * journals go in as they are. */
void ob_queue_journal_pack(const char *plan_hash, const char *plan, size_t plen, size_t count,
                           const char *raw, size_t len, ob_buf *out);

/* Appends to out job id's journal from record rec (len), inflated with its plan's text
 * (plan, plen; NULL when it is gone). OB_OK, or an error saying what is wrong with it (out
 * as it was); OB_ENOENT when the record does not hold the job's journal. */
int ob_queue_journal_unpack(const char *plan, size_t plen, const char *rec, size_t len,
                            const char *id, ob_buf *out, ob_error *err);

/* The key of the bucket a job that worker ended at finished_ms keeps its journal in.
 * Malloc'ed. */
char *ob_queue_journal_bucket(const char *q, uint64_t finished_ms, const char *worker);

/* Reading a job's journal, in one round trip whatever its state: EVAL with the
 * arguments ob_queue_journal_args_make fills (argv, 9 of them; free with
 * ob_queue_journal_args_free), whose reply ob_queue_journal_reply makes into text. */
typedef struct ob_queue_journal_args {
  const char *argv[9];
  char *owned[5];
} ob_queue_journal_args;
void ob_queue_journal_args_make(ob_queue_journal_args *a, const char *q, const char *job);
void ob_queue_journal_args_free(ob_queue_journal_args *a);

/* What the reply says about job id: OB_QJ_TEXT, its text appended to out (a running
 * job's, or a finished one's from its record); OB_QJ_NONE, no journal (not started, no
 * such job, failed before it ran: state, when not NULL, gets the job's state or ""),
 * OB_QJ_GONE, the job finished but its journal is no longer kept; OB_QJ_BAD, a record
 * that cannot be read or a reply of another shape (err says which). */
enum { OB_QJ_TEXT, OB_QJ_NONE, OB_QJ_GONE, OB_QJ_BAD };
int ob_queue_journal_reply(const redisReply *rp, const char *id, ob_buf *out, char *state,
                           size_t statelen, ob_error *err);

#endif
