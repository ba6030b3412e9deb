/* ob_queue.h -- a queue of plan runs ("jobs") in Redis Streams: what `obelus
 * submit`, `wait`, `status`, `log --redis` and the worker (ob_worker.c) agree on,
 * and the client side of it (submitting, waiting, reading), on a libuv loop
 * through ob_redis.
 *
 * The data (Q: the queue's name, "obelus" by default). Every key of a queue
 * carries the hash tag {Q}, so that a queue lives in one Redis Cluster slot and
 * its MULTI blocks stay legal there; queues spread over a cluster by name.
 *
 *   ob:{Q}:seq               INCRBY counter: job ids are "1", "2", ...; the parts
 *                            of a sharded job are "ID.1", "ID.2", ... A submission
 *                            takes its ids in one INCRBY: they are consecutive
 *   ob:{Q}:batchseq          INCR counter: batch ids are "1", "2", ...
 *   ob:{Q}:batch:B           HASH: first, last (batch B's job ids are first..last,
 *                            every number between; not its parts), count, name (the
 *                            plan's), submitted (ms since the epoch): what `submit
 *                            --batch` records and `wait --batch B` reads, whatever
 *                            the batch's size; left: its stream entries (jobs and
 *                            parts) yet to end, added before they are queued and taken
 *                            down as each ends (its entry names the batch: "batch"). At
 *                            none it expires the worker's --keep-results after
 *   ob:{Q}:plan:H            a plan's JSON text (H: FNV-1a 64 of it, 16 hex digits),
 *                            written once (SET NX) and shared by every job of it; it
 *                            expires once the last of its jobs ended (the longer of the
 *                            workers' --keep-journals and --keep-results after)
 *   ob:{Q}:planrefs          HASH: plan H -> how many of its jobs have yet to end. A
 *                            submission adds its jobs' count, then stores the text and
 *                            PERSISTs it (a batch queued in parts: each part its own,
 *                            before its jobs); a worker takes one off as a job ends and,
 *                            at none, drops the field and lets the text expire
 *   ob:{Q}:jobs              the stream of jobs submitted without --tools (any
 *                            worker takes them and validates them itself)
 *   ob:{Q}:jobs:T            the stream of jobs submitted with tool files whose
 *                            identity is T (ob_queue_tools_id): only workers with
 *                            the same files read it, so a job waits for one
 *   ob:{Q}:streams           SET of those stream keys (status, and workers' claims)
 *     entry fields: job ID, plan H, name (the plan's file name), inputs (a JSON array
 *     of input documents, when any), batch B (when submitted with --batch); anyone with access can XADD one, so a worker
 *     checks each field first (ob_queue_job.h) and fails a job that breaks one
 *     consumer group "workers"; a worker is a consumer named host:pid
 *   ob:{Q}:job:ID            HASH: state (queued, running, done, failed; "sharded"
 *                            for a job split into parts), stream (until it ends),
 *                            submitted, started, finished (ms since the epoch), worker,
 *                            deliveries (past the first), claimed (1 once taken over
 *                            from a dead worker), exit (0, 1, 2), output (the run's
 *                            result, JSON), error (why it failed without a result),
 *                            entry ("STREAM ENTRY": the entry that holds the job, set
 *                            when a worker claims it, let go when it ends), journal
 *                            (its journal's record: ob_queue_journal.h); a sharded job:
 *                            parts (how many, at most OB_QUEUE_PARTS_MAX), instances
 *                            (JSON: each part's ids). A finished job's hash expires
 *                            the worker's --keep-results after it ended (a day unless
 *                            told; a sharded job's with its last part's)
 *   ob:{Q}:journal:ID        STRING: a running job's journal, the lines `run
 *                            --journal` writes, shipped once a turn of the worker's
 *                            loop (SET, then APPENDs); deleted when the job ends (a job
 *                            that ends within one turn never has one), unless it ended
 *                            with few others: then SET whole with its result, expiring
 *                            as a record would, until its worker puts it in a record
 *                            (ob_worker_records.h)
 *   ob:{Q}:journals:M:W      HASH: the records of the journals of the jobs worker W
 *                            ended in minute M, expiring --keep-journals (an hour
 *                            unless told) after its last one (ob_queue_journal.h)
 *   ob:{Q}:done              STREAM of finished jobs (job, exit), trimmed to about
 *                            OB_QUEUE_DONE_KEEP entries: what `wait` blocks on
 *   ob:{Q}:workers           HASH: worker name -> JSON {host, pid, tools id, tool
 *                            files, jobs (its --jobs), running, seen (ms)}
 *   ob:{Q}:stats             HASH: done, failed, claimed, poisoned (counters)
 *   ob:{Q}:rate:S            counter of jobs finished in second S, expiring after
 *                            two minutes: throughput over the last minute
 *
 * Delivery is at least once. A job is acknowledged (XACK) in the same MULTI that
 * stores its result, so a worker that dies before leaves it pending, and another
 * worker claims it once it has been idle for --claim-idle (XPENDING IDLE, then
 * XCLAIM, which only one claimant wins), and resumes it from its journal in
 * Redis. A running job's worker claims it again to itself every third of that
 * time (XCLAIM JUSTID resets the idle time), so a long job is not taken from a
 * live worker. A job delivered more than --max-deliveries times (its worker died
 * each time) is failed as poison instead of run again.
 *
 * A job id runs once however many entries name it: a worker claims a job with one
 * EVAL that marks it running (recording its entry as "entry") unless it has
 * finished, is a sharded job's whole, or another entry holds it; then the entry
 * is acknowledged and dropped. An entry that holds its job (taken over, handed
 * back) gets it again. Its result is stored by another script that keeps the first
 * result: a finished job's result is never replaced.
 *
 * The jobs streams keep what is still needed: the worker that acknowledges entries
 * trims the stream below its first pending entry (or, with none, to the last read).
 *
 * Costs (per job, trivial plan): submit, 2 commands pipelined (HSET, XADD) after
 * one INCRBY for the whole batch (a batch queued in parts: a round trip per part
 * besides, storing and counting the plan); the worker, one XREADGROUP per batch of
 * jobs, an EVAL (the claim, which also GETs the plan the first time it sees it), a SET
 * or APPEND per turn of its loop while the job runs (none when it ends within one), and
 * one MULTI for all that ended in a turn (their journals' records, an EVAL per job, an
 * XACK and a trim per stream, INCRBY, EXPIRE); wait (ob_queue_wait.c), one XREAD per
 * batch of finished jobs and one HMGET per job. Redis's memory: some 370 bytes a
 * finished trivial job, its hash and its share of a record (`obelus status` measures it). */
#ifndef OB_QUEUE_H
#define OB_QUEUE_H

#include <stdint.h>
#include <stddef.h>

#include "io/ob_redis.h"
#include "base/ob_value.h"

#define OB_QUEUE_DEFAULT "obelus"
#define OB_QUEUE_GROUP "workers"
/* ob:{Q}:done keeps about this many entries (MAXLEN ~). */
#define OB_QUEUE_DONE_KEEP 100000
/* A worker's default --claim-idle (ms). */
#define OB_QUEUE_CLAIM_IDLE_MS 30000
/* A worker's default --max-deliveries. */
#define OB_QUEUE_MAX_DELIVERIES 5
/* A sharded job has at most this many parts (a job hash that says more is broken). */
#define OB_QUEUE_PARTS_MAX 1000000
#define OB_QUEUE_STR_(x) #x
#define OB_QUEUE_STR(x) OB_QUEUE_STR_(x)

/* The key for what of queue q (a job id, a plan hash...): "ob:{q}:what" or
 * "ob:{q}:what:id". Malloc'ed. */
char *ob_queue_key(const char *q, const char *what, const char *id);

/* A queue name: 1 to 64 of [A-Za-z0-9_.-]. */
int ob_queue_name_ok(const char *q);

/* The identity of a set of tool files (ob_engine_tool_files' form: {"file",
 * "size", "hash"} each): FNV-1a 64 over their base names and hashes, sorted by
 * name, as 16 hex digits into out[17]. Where a worker's files are does not
 * matter, what they hold does. */
void ob_queue_tools_id(const ob_value *files, char out[17]);
/* The tool files as a job records them: [{"name", "hash", "size"}], sorted. */
ob_value *ob_queue_tools_names(const ob_value *files);

/* FNV-1a 64 of bytes, as 16 hex digits into out[17]. */
void ob_queue_hash(const char *bytes, size_t len, char out[17]);

/* Milliseconds since the epoch. */
uint64_t ob_queue_now_ms(void);

/* A worker is live when its entry in ob:{Q}:workers (info: the parsed JSON) was written
 * within three of its ticks (every_ms, which it gives; 5000 when it does not) and at
 * least a second before now (ms since 1970); silent otherwise: `obelus status` and
 * `obelus ui` tell them apart so. */
int ob_queue_worker_live(const ob_value *info, uint64_t now);

/* --- submitting ------------------------------------------------------------------------- */

/* One job to submit: a plan's text (shared by jobs that point to the same text),
 * its inputs (an array of documents, or NULL), and its name in messages. */
typedef struct ob_queue_job {
  const char *plan_text;
  size_t plan_len;
  const char *name;
  const ob_value *inputs; /* array, or NULL */
  int parent;             /* the job this is a part of: its index in the batch, else -1 */
  size_t nparts;          /* a sharded job: how many parts follow it (it runs nothing) */
  ob_value *instances;    /* a sharded job: [[ids of part 1], ...] (owned by the caller) */
} ob_queue_job;

typedef struct ob_queue_submit ob_queue_submit;
/* Called once: ids[i] the id given to jobs[i] (NULL on error), and the batch's id
 * (NULL unless one was asked for), or why it failed. */
typedef void (*ob_queue_submit_cb)(void *ud, char **ids, size_t n, const char *batch,
                                   const char *why);

/* Queues jobs (they and their texts must live until cb) in queue q for tool
 * identity tools_id (NULL: any worker), with tools (ob_queue_tools_names' form, or
 * NULL) recorded in each; batch: also records them as a batch (ob:{Q}:batch:B).
 * r must be up. OB_OK (cb will be called), or an error (it will not). */
int ob_queue_submit_start(ob_redis *r, const char *q, const ob_queue_job *jobs, size_t n,
                          const char *tools_id, const ob_value *tools, int batch,
                          ob_queue_submit_cb cb, void *ud);

/* How a submission is made (zeros: ob_queue_submit_start's defaults). */
typedef struct ob_queue_submit_opts {
  const char *tools_id;  /* the stream of workers with this tool identity; NULL: any */
  const ob_value *tools; /* ob_queue_tools_names' form, or NULL */
  int batch;             /* record the jobs as a batch, taking its id (unless first > 0) */
  /* A batch queued in parts (`submit --batch` streams its file so): its job ids, and
   * its batch id, taken ahead in one round trip (ob_queue_reserve_start), each part then
   * submitted with the ids that follow the previous part's. */
  long long first;      /* > 0: these jobs' ids (parts aside) start here; none is taken */
  long long batch_id;   /* > 0 with first: the jobs are of batch batch_id (every part) */
  long long batch_last; /* > 0 (the batch's first part only): also record the batch as
                           first..batch_last, before its jobs */
} ob_queue_submit_opts;

/* ob_queue_submit_start with options. Each call stores and counts (planrefs) the
 * plans of its own jobs before queueing them, so a batch in parts counts each
 * part's as it goes. */
int ob_queue_submit_with(ob_redis *r, const char *q, const ob_queue_job *jobs, size_t n,
                         const ob_queue_submit_opts *o, ob_queue_submit_cb cb, void *ud);

/* Called once: the first of the count ids taken (they are first..first+count-1) and
 * the batch id (0 unless asked for), or why it failed (then 0, 0). */
typedef void (*ob_queue_reserve_cb)(void *ud, long long first, long long batch, const char *why);
/* Takes count consecutive job ids (one INCRBY of ob:{Q}:seq) and, with batch, a batch
 * id (INCR of ob:{Q}:batchseq), in one round trip, for a batch to be submitted in
 * parts (ob_queue_submit_opts.first). count > 0 and r up, else an error (cb will not
 * be called). Ids taken and never queued are a gap in the numbering, nothing more. */
int ob_queue_reserve_start(ob_redis *r, const char *q, size_t count, int batch,
                           ob_queue_reserve_cb cb, void *ud);

#endif
