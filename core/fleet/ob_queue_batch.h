/* ob_queue_batch.h -- the jobs a submission queues, made from a plan: validated
 * (against an engine's tools when one is given, else as far as no tools are
 * needed), one job per input line of a batch, each split into parts of K
 * instances with a shard size. What `obelus submit`, obelus_queue_submit and
 * the Lua module's queue:submit share (ob_queue_batch.c).
 *
 * Costs: the plan parsed and checked once; with shards, each part's plan text
 * printed once (parts are shared by every line of the batch). A batch too big to
 * hold is made with no lines, its lines checked one at a time
 * (ob_queue_batch_line_check), then its jobs made a part of its lines at a time
 * (ob_queue_batch_set_lines): memory is then a part's. */
#ifndef OB_QUEUE_BATCH_H
#define OB_QUEUE_BATCH_H

#include "engine/ob_engine.h"
#include "fleet/ob_queue.h"

typedef struct ob_queue_batch {
  ob_queue_job *jobs;
  size_t njobs;        /* parts included */
  size_t nids;         /* jobs whose ids are given back: not parts */
  char tools_id[17];   /* "" without an engine */
  ob_value *tools;     /* the engine's tool files, as jobs record them; NULL */
  char **problems;     /* what is wrong, one a line, when nproblems */
  size_t nproblems;
  /* owned: */
  char *plan_text;
  size_t plan_len;
  char *name;
  char **texts;
  size_t ntexts;
  ob_value **inputs;
  size_t ninputs;
  ob_value *given;   /* the inputs every job gets (an array) */
  size_t given_size; /* their compact JSON's length */
  ob_value *parts;
  ob_value *plan_value;
  struct ob_plan *plan;
} ob_queue_batch;

/* Makes the batch for plan_text (its name in messages: name). e: validate against
 * its tools (and send the jobs to workers with the same tool files); NULL: only
 * what needs no tools. inputs: documents every job gets (an array, or NULL);
 * lines: one job per element, each getting it as a last input (NULL: one job);
 * shard: instances per part (0: none; the plan must have "instances").
 * Returns the batch: b->nproblems > 0 when invalid (nothing to queue). */
ob_queue_batch *ob_queue_batch_new(const char *plan_text, size_t len, const char *name,
                                   ob_engine *e, const ob_value *inputs, const ob_value *lines,
                                   size_t shard);
/* What a worker would refuse in the job of one line (NULL: of a batch without
 * lines), said as a problem of b naming its number, lineno: OB_EINVAL then, else
 * OB_OK. ob_queue_batch_new checks its lines so; a caller that gives its lines
 * later checks each before queueing any. b must have no problems. */
int ob_queue_batch_line_check(ob_queue_batch *b, const ob_value *line, size_t lineno);
/* b's jobs made anew for lines (an array, checked; NULL: one job without a line),
 * those made before let go (the jobs queued with them must have been answered). */
void ob_queue_batch_set_lines(ob_queue_batch *b, const ob_value *lines);
void ob_queue_batch_free(ob_queue_batch *b);

#endif
