/* ob_ui_fleet.h -- a fleet (ob_queue.h's job queue in Redis) as `obelus ui` serves it:
 * GET /api/fleet's body, and the fleet's jobs as runs beside the journals' (ob_ui_fleet.c
 * tells how it samples Redis and what each one costs).
 *
 * It samples the queue every second on the host's loop, asynchronously, and keeps what
 * the last sample found and the rates of the last 10 minutes: the answers below are built
 * from that, at once, without a round trip. A Redis that cannot be reached is a state
 * ("redis": "unreachable: WHY"), the last data kept and tried again every second.
 *
 * GET /api/fleet (ob_ui_fleet_snapshot):
 *   {"redis": "ok" | "unreachable: WHY", "queue": Q,
 *    "sampled": ms since 1970 of the last sample that answered (null before any),
 *    "workers": [{"name", "state": "live"|"silent", "running", "done", "failed",
 *                 "taken_over", "last_seen"}],
 *    "queues": [{"name": Q, "waiting", "running", "done", "failed", "poison"}],
 *    "rate": [{"t", "done", "failed"}],
 *    "poison": [{"job", "deliveries", "error"}],
 *    "jobs": [{"job", "state": "waiting"|"running"|"done"|"failed"|"poison", "worker",
 *              "started", "ended"}]}
 * What each holds, and where Redis does not tell (null):
 *   workers    each entry of ob:{Q}:workers (sorted by name), and each consumer of the
 *              group that holds jobs without one (a worker gone before it wrote it):
 *              "live" when it wrote its entry within three of its ticks and at least a
 *              second ago, as `obelus status` says (ob_queue_worker_live), else
 *              "silent" (killed, hung, cut off: its jobs are taken over after
 *              --claim-idle). running: the jobs the consumer group says it holds
 *              (XPENDING: for a silent one, those waiting to be taken over). done,
 *              failed, taken_over (jobs it took over from silent workers): its own
 *              counts since it started, as its entry last said them; last_seen: when it
 *              wrote it. A consumer without an entry: those four null. A worker
 *              stopped cleanly removes its entry and is not listed.
 *   queues     one entry, the queue: waiting (entries no worker has read yet, all
 *              streams), running (entries read and not acknowledged: running, or
 *              held by a silent worker), done, failed and poison (the counters in
 *              ob:{Q}:stats since the queue began; failed counts poison jobs too).
 *   rate       one point per sample, oldest first, at most 600 (10 minutes): jobs
 *              done and failed a second since the sample before (ob:{Q}:stats'
 *              counters' growth over the time between; a gap while Redis was
 *              unreachable is one point over the gap).
 *   jobs       the most recent jobs by id (ids that `obelus submit` numbers from
 *              ob:{Q}:seq; a sharded job by its parts, "ID.1"...), newest first, at most
 *              500. A job queued under an id of its own (XADD by hand) is not among them.
 *              worker: the last that took it (null while waiting); started: when that
 *              one took it (a job taken over: the takeover); ended: when its result was
 *              stored. "poison": failed after --max-deliveries deliveries whose workers
 *              died.
 *   poison     the poison jobs seen among those, newest first, at most 100, kept after
 *              they leave the 500 (an older one, from before this process, is counted in
 *              queues' poison but not listed); deliveries: how many times it was
 *              delivered, the last one (that found it poison) included.
 *
 * Fleet jobs as runs (ob_ui_fleet_runs: the listed jobs that started):
 *   {"id": "job-ID", "source": "job:ID", "state": "running"|"done"|"failed"|
 *    "killed-resumable" (its hash says running and its worker is silent or gone: another
 *    takes it over after --claim-idle, resuming it from its journal), "started", "ended"
 *    (ms since 1970: the journal's first start and end once read, else the job hash's),
 *    "calls", "failed" (as GET /api/runs counts them, from its journal; null until the
 *    journal has been read: at most 16 a second, a running job's again every 5 s at most,
 *    one over 8 MB only once it ended)}
 * and one run (ob_ui_fleet_run): what ob_trace_build(OB_TRACE_RUN) makes of a journal
 * file, from the job's journal in Redis (ob_trace_build_text: the same bytes give the
 * same value). */
#ifndef OB_UI_FLEET_H
#define OB_UI_FLEET_H

#include <stdint.h>
#include <uv.h>

#include "base/ob_error.h"
#include "base/ob_value.h"

typedef struct ob_ui_fleet ob_ui_fleet;

/* Starts sampling queue (NULL: the default, "obelus") at redis_url on loop. NULL with err
 * (OB_EINVAL) for a URL that is not one, or a queue name that is not one; an unreachable
 * Redis is no error (a state, tried again). */
ob_ui_fleet *ob_ui_fleet_new(uv_loop_t *loop, const char *redis_url, const char *queue,
                             ob_error *err);

/* GET /api/fleet's body (a new reference). */
ob_value *ob_ui_fleet_snapshot(ob_ui_fleet *f);

/* The fleet's jobs that started, as GET /api/runs lists runs (an array; a new reference),
 * newest first. */
ob_value *ob_ui_fleet_runs(ob_ui_fleet *f);

/* Job job_id's run ("job-ID" or "ID"), what GET /api/runs/{id} gives as "run": read from
 * its journal in Redis now, on a blocking connection of its own (2 s to connect, 2 s for
 * an answer to start coming; while the sampler finds Redis unreachable, or for 5 s after
 * this connection failed, it fails at once). NULL with err: OB_ENOENT no such job, or it
 * has no journal (not started; failed before it ran; a sharded job, whose parts are the
 * runs); OB_EIO Redis unreachable; OB_EINVAL an id that cannot be one, or a journal that
 * is none. */
ob_value *ob_ui_fleet_run(ob_ui_fleet *f, const char *job_id, ob_error *err);
/* The journal itself, as above: its text appended to out and *name (malloc'd) its Redis
 * key, what errors about its lines name; OB_OK or the error code, with err. */
int ob_ui_fleet_journal(ob_ui_fleet *f, const char *job_id, ob_buf *out, char **name,
                        ob_error *err);

/* Samples that answered so far (tests wait for the next one). */
uint64_t ob_ui_fleet_samples(const ob_ui_fleet *f);

/* Stops sampling: its connections close and its timer's handle closes as the loop runs;
 * run it (uv_run until nothing is left), then ob_ui_fleet_free. NULL is allowed. */
void ob_ui_fleet_close(ob_ui_fleet *f);
/* Frees it (closes it first when that was not done: then its memory goes once the loop
 * has closed the timer). NULL is allowed. */
void ob_ui_fleet_free(ob_ui_fleet *f);

#endif
