/* ob_shard.h -- a plan with instances run on several threads, each instance on
 * one of them, and merged into one result and one journal. ob_shard.c tells how. */
#ifndef OB_SHARD_H
#define OB_SHARD_H

#include <stddef.h>

#include "engine/ob_engine.h"
#include "engine/ob_run.h"
#include "log/ob_wal.h"

/* Makes a shard's engine ready on the shard's own thread, as the host made its
 * own: tool files, latent and approver scripts, the memory limit. Returns 0, or
 * -1 with err filled. */
typedef int (*ob_shard_setup_fn)(void *ud, ob_engine *e, ob_error *err);

/* What a host loaded into its engine, in order, so that each part's engine loads
 * it again (ob_shard_config.loads): tool files or folders ('t') and scripts ('s'). */
typedef struct ob_shard_loads {
  char **items; /* kind letter + path */
  size_t n;
} ob_shard_loads;
void ob_shard_loads_add(ob_shard_loads *l, char kind, const char *path);
void ob_shard_loads_clear(ob_shard_loads *l);

typedef struct ob_shard_config {
  size_t threads;            /* what was asked for (ob_shard_threads decides what it gets) */
  ob_engine *e;              /* the host's engine: its loop hears the shards and writes
                                the journal; its runs are untouched */
  ob_plan *plan;             /* the whole plan, validated (or its probe, ob_plan_probe),
                                and its value (both borrowed) */
  const ob_value *plan_value;
  const ob_value *inputs;    /* array of input data, or NULL */
  ob_run_options opt;        /* as for a run on one engine: the journal (the host's, on
                                e's loop), on_event (called on e's loop, each part's
                                events in their order), concurrency (shared out),
                                max_calls, limits; on_done is called on e's loop once
                                every shard has ended */
  ob_shard_setup_fn setup;   /* how a part's engine is made ready, or NULL for ... */
  void *setup_ud;
  const ob_shard_loads *loads; /* ... these loaded again (the shards keep a copy: the host
                                  may load more meanwhile), with e's memory limit and
                                  obelus.http's transfers at once */
  size_t drain_ms;           /* how long a shard waits for its fire-and-forget calls */
} ob_shard_config;

typedef struct ob_shards ob_shards;

/* How many threads a run of plan with options opt gets when `threads` are
 * asked for (0: the number of cores when the plan has instances, else 1):
 * never more than its instances, or than opt->concurrency (when set); 1 when
 * the plan has no instances, when a call names its own _instance, when
 * opt->approve asks one host (a terminal), or when opt->journal is --fsync always
 * (a result on disk before its readers start: one engine's promise). 1 means:
 * run it on one engine as ever. */
size_t ob_shard_threads(const ob_plan *plan, size_t threads, const ob_run_options *opt);

/* The calls of the run by state (ob_call_state), as the parts' events tell:
 * for the progress line. Any thread. */
void ob_shards_counts(ob_shards *s, size_t n[6]);

/* The plan a run asking for `threads` (0: one per core) with `concurrency`
 * reads (ob_run_read_plan): when it has instances, first its probe, kept when
 * it is valid and ob_shard_threads gives it more than one thread (each thread
 * then reads and checks its own part whole: the main thread need not read the
 * whole); else the whole plan. `journal` is the --fsync of the journal the run
 * will write (OB_FSYNC_NEVER: none): always keeps it on one engine, as in
 * ob_shard_threads. The caller has ruled out what else keeps a run on one
 * engine whatever the plan (a terminal approval, C tools). */
ob_plan *ob_shard_read_plan(const ob_engine *e, const ob_value *v, const ob_plan_source *src,
                            size_t threads, size_t concurrency, ob_fsync journal);

/* Writes the run's first journal lines (plan, context, input, run) through a run
 * of the whole plan on cfg->e that never starts, then starts ob_shard_threads
 * threads, each with its own engine, loop and Lua state running its share of the
 * instances. NULL with err filled when the run cannot be made (nothing started). */
ob_shards *ob_shards_start(const ob_shard_config *cfg, ob_error *err);

/* 1 once every shard has ended and the host's loop has heard it (cfg->opt.on_done
 * called then: it may free the shards). */
int ob_shards_finished(const ob_shards *s);

/* Cancels every shard's run (its running calls abandoned); they end soon after. */
void ob_shards_cancel(ob_shards *s);

/* Runs e's loop until every shard has ended (after a cancel too): for a host whose
 * loop is not running. */
void ob_shards_wait(ob_shards *s);

/* After the end: did some awaited call fail, and a note when a shard could not run
 * at all (its engine or tools could not be made again), or NULL. */
int ob_shards_failed(const ob_shards *s);
const char *ob_shards_error(const ob_shards *s);

/* After the end: fire-and-forget calls abandoned at the drain timeout, in all. */
size_t ob_shards_abandoned(const ob_shards *s);

/* After the end: {instance: its output} in the plan's order of instances, as one
 * engine's ob_run_output gives it. */
ob_value *ob_shards_output(ob_shards *s);

/* The journal's last record (ob_run_journal_end), after the end. ob_shards_free
 * waits for the threads (cancel them first to have them end soon) without running
 * the host's loop, writes the journal's last lines, and frees everything. */
void ob_shards_journal_end(ob_shards *s, int exit_status);
void ob_shards_free(ob_shards *s);

#endif
