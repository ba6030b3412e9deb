/* ob_worker_records.h -- the records of finished jobs' journals (ob_worker_records.c):
 * sent with a batch of results, or, for jobs that ended few at a time, held by their
 * worker until enough of them make a record worth its name. Meanwhile each held one is
 * in Redis whole, as text, in its job's journal key (written with the job's result:
 * nothing is lost if the worker dies). */
#ifndef OB_WORKER_RECORDS_H
#define OB_WORKER_RECORDS_H

#include <stdint.h>

#include "fleet/ob_worker_job.h"

/* A batch of results of fewer journals than this stores them as text, for a later
 * record. A worker of trivial jobs at --jobs 256 ends about 12 a turn: those get their
 * record at once (holding them would cost each a SET and a DEL for no smaller record);
 * jobs that end alone or nearly, held, cost Redis 378 bytes rather than 597. */
#define OB_WREC_DEFER_BELOW 8

/* One journal for a record: its job's id and text, and its job's plan (text and hash,
 * or NULL), whose text is the record's dictionary when it comes first. */
typedef struct ob_wrec_journal {
  const char *id;
  const char *text;
  size_t len;
  const ob_value *plan_text;
  const char *plan_hash;
} ob_wrec_journal;

/* Sends, on w's command connection (inside the caller's MULTI), the records of the n
 * journals v: HSETs of at most OB_QUEUE_JOURNAL_RECORD bytes of text each into bucket,
 * each record's field its first job's id, then EXPIRE bucket --keep-journals (none when
 * kept for ever). names[i] is v[i]'s record's field (v's own strings). Returns how many
 * commands were sent, or -1 when the connection went. Both kinds of records use it: those
 * of a batch of results (ob_worker_job.c) and those of the journals held (below). */
int ob_wrec_send(ob_wjobs *w, const char *bucket, const ob_wrec_journal *v, size_t n,
                 const char **names);

/* Holds job id's journal (text, len) for a record: it finished at finished (ms) on this
 * worker, of the plan whose text and hash are plan_text and plan_hash (or NULL). A record
 * is sent at once when enough are held. */
void ob_wrec_hold(ob_wjobs *w, const char *id, uint64_t finished, const char *text, size_t len,
                  const ob_value *plan_text, const char *plan_hash);

/* Sends the records of every journal held, in one MULTI (each journal then named in its
 * job's hash and its text key deleted). Those a lost connection or an error leaves are
 * held still: sent again at the next flush. Nothing when none is held, or one is out. */
void ob_wrec_flush(ob_wjobs *w);

/* How many journals are held. */
size_t ob_wrec_held(const ob_wjobs *w);

/* Frees what is held (the worker ends: their text stays in Redis until it expires). */
void ob_wrec_free(ob_wjobs *w);

#endif
